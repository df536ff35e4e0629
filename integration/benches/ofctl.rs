//! What a user's own OpenFlow client sees: `ovs-ofctl -O OpenFlow13
//! add-flows` and `dump-flows` of one flow file against eswitchd and against
//! a private Open vSwitch 3.1 in the same run (root; `cargo bench -p
//! integration --bench ofctl`, or `integration/scripts/bench-ofctl.sh`,
//! which builds eswitchd first).
//!
//! `ovs-ofctl add-flows` sends every flow mod followed by a BARRIER and
//! waits for each reply, as a user's script does: a barrier that waits for
//! a revalidator pass shows here, not in a bench that pipelines flow mods.
//!
//! - `openflow.add_flows_ovs_ofctl_per_s`: flows per second against
//!   eswitchd; `_ovs`: against Open vSwitch; `openflow.add_flows_ovs_ofctl_ratio`
//!   the first over the second;
//! - `openflow.dump_flows_ovs_ofctl_100k_ratio`: `dump-flows` of the table
//!   so made, eswitchd's time over Open vSwitch's;
//! - `openflow.bundle_add_flows_per_s` (and `_ovs`, `_ratio`): the same
//!   file as one bundle (`ovs-ofctl --bundle add-flows`) on an empty table,
//!   committed all or nothing.
//!
//! Each switch starts empty for each of three runs (alternating which goes
//! first); the figures are medians. `OFCTL_FLOWS` sets the file's size
//! (default 100,000), `ESWITCHD` the daemon (default
//! `target/release/eswitchd`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use integration::eswitchd::Eswitchd;
use integration::ovs::Ovs;

const BENCH: &str = "bench ofctl";

/// A flow file of `n` distinct rules, as a port-range ACL would be written.
fn flow_file(n: usize) -> String {
    (0..n)
        .map(|i| {
            let (a, b, c) = ((i >> 16) & 255, (i >> 8) & 255, i & 255);
            let out = 1 + i % 2;
            format!(
                "priority={},ip,nw_src=10.{a}.{b}.{c},actions=output:{out}\n",
                10 + i % 7
            )
        })
        .collect()
}

/// Runs `ovs-ofctl -O OpenFlow13 ARGS`; its seconds, or why it failed.
fn ofctl(args: &[&str]) -> Result<(f64, String), String> {
    let t = Instant::now();
    let out = Command::new("ovs-ofctl")
        .args(["--timeout", "900", "-O", "OpenFlow13"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ovs-ofctl: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "ovs-ofctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// add-flows then dump-flows against `target`: their seconds, and the
/// flows the dump listed.
fn measure(target: &str, file: &Path) -> Result<(f64, f64, usize), String> {
    let file = file.display().to_string();
    let (add, _) = ofctl(&["add-flows", target, &file])?;
    let (dump, text) = ofctl(&["dump-flows", target])?;
    let flows = text.lines().filter(|l| l.contains("actions=")).count();
    Ok((add, dump, flows))
}

/// `add-flows --bundle` against `target`: its seconds, and the flows a
/// dump then lists.
fn measure_bundle(target: &str, file: &Path) -> Result<(f64, usize), String> {
    let file = file.display().to_string();
    let (add, _) = ofctl(&["--bundle", "add-flows", target, &file])?;
    let (_, text) = ofctl(&["dump-flows", target])?;
    Ok((add, text.lines().filter(|l| l.contains("actions=")).count()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::var("OFCTL_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = std::env::var_os("ESWITCHD")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/eswitchd"));
    if !bin.exists() {
        prereq::skip(
            BENCH,
            format!("no {} (cargo build --release -p cli)", bin.display()),
        );
        return;
    }
    if prereq::tool(BENCH, "ovs-ofctl").is_none() {
        return;
    }
    let Some(ovs) = Ovs::start_or_skip(BENCH) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("esw-ofctl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench directory");
    let file = dir.join("flows.txt");
    std::fs::write(&file, flow_file(n)).expect("flow file");
    let (mut esw_add, mut ovs_add, mut esw_dump, mut ovs_dump) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut esw_bundle, mut ovs_bundle) = (Vec::new(), Vec::new());
    for run in 0..3 {
        let mut one = |which: &str| -> Result<(), String> {
            if which == "eswitchd" {
                // The table starts with the default NORMAL rule.
                let d = Eswitchd::start(&bin, &dir, 2, None)?;
                let (add, dump, flows) = measure(d.target(), &file)?;
                eprintln!("run {run} eswitchd: add {add:.2} s, dump {dump:.2} s, {flows} flows");
                if flows < n {
                    return Err(format!("eswitchd dumped {flows} flows of {n}"));
                }
                esw_add.push(add);
                esw_dump.push(dump);
                drop(d);
                // The same flows in one bundle, on a fresh table.
                let d = Eswitchd::start(&bin, &dir, 2, None)?;
                let (add, flows) = measure_bundle(d.target(), &file)?;
                eprintln!("run {run} eswitchd: --bundle add {add:.2} s, {flows} flows");
                if flows < n {
                    return Err(format!(
                        "eswitchd dumped {flows} flows of {n} after a bundle"
                    ));
                }
                esw_bundle.push(add);
            } else {
                ovs.del_flows().map_err(|e| e.to_string())?;
                let (add, dump, flows) = measure(&ovs.bridge_target(), &file)?;
                eprintln!("run {run} ovs: add {add:.2} s, dump {dump:.2} s, {flows} flows");
                ovs_add.push(add);
                ovs_dump.push(dump);
                ovs.del_flows().map_err(|e| e.to_string())?;
                let (add, flows) = measure_bundle(&ovs.bridge_target(), &file)?;
                eprintln!("run {run} ovs: --bundle add {add:.2} s, {flows} flows");
                ovs_bundle.push(add);
            }
            Ok(())
        };
        let order = if run % 2 == 0 {
            ["eswitchd", "ovs"]
        } else {
            ["ovs", "eswitchd"]
        };
        for which in order {
            if let Err(e) = one(which) {
                panic!("{BENCH}: {which}: {e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (ea, oa) = (median(esw_add), median(ovs_add));
    let (ed, od) = (median(esw_dump), median(ovs_dump));
    println!(
        "bench: openflow.add_flows_ovs_ofctl_per_s {:.0} flows/s",
        n as f64 / ea
    );
    println!(
        "bench: openflow.add_flows_ovs_ofctl_per_s_ovs {:.0} flows/s",
        n as f64 / oa
    );
    println!("bench: openflow.add_flows_ovs_ofctl_ratio {:.2}", oa / ea);
    println!("bench: openflow.dump_flows_ovs_ofctl_ms {:.0} ms", ed * 1e3);
    println!(
        "bench: openflow.dump_flows_ovs_ofctl_ms_ovs {:.0} ms",
        od * 1e3
    );
    println!(
        "bench: openflow.dump_flows_ovs_ofctl_100k_ratio {:.2}",
        ed / od
    );
    let (eb, ob) = (median(esw_bundle), median(ovs_bundle));
    println!(
        "bench: openflow.bundle_add_flows_per_s {:.0} flows/s",
        n as f64 / eb
    );
    println!(
        "bench: openflow.bundle_add_flows_per_s_ovs {:.0} flows/s",
        n as f64 / ob
    );
    println!("bench: openflow.bundle_add_flows_ratio {:.2}", ob / eb);
}

//! OpenFlow by difference: the same `ovs-ofctl -O OpenFlow13` commands
//! against eswitchd and against a private Open vSwitch 3.1, outputs
//! compared (root: Open vSwitch needs it; `SKIP` otherwise).
//!
//! The corpus (`tests/ofctl_diff/corpus.txt`) is one case a line:
//! - `flow SPEC`: `add-flow SPEC` on empty tables, then `dump-flows`: the
//!   add's error (type and code) or the flow as each switch prints it back;
//! - `run CMD ; CMD ...`: `ovs-ofctl` commands (`TARGET` is the switch) on
//!   empty tables, each one's output or error.
//!
//! What is compared goes through [`normalize`], the one place that says
//! what may differ (xids, durations, counters, the socket's path). A case
//! whose outputs still differ must be on the allow-list
//! (`tests/ofctl_diff/allow.txt`: the case, `|`, why), which the test reads;
//! a case on the list that no longer differs is reported, so the list
//! stays short. `OFCTL_DIFF_ONLY=TEXT` runs only the cases containing
//! TEXT. Prints `bench: openflow.diff_cases` and
//! `openflow.diff_mismatches` (differences not on the list: must be 0).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use integration::eswitchd::Eswitchd;
use integration::ovs::Ovs;

const T: &str = "ovs_ofctl_against_eswitchd_and_open_vswitch";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ofctl_diff")
        .join(name)
}

/// One `ovs-ofctl -O OpenFlow13` run: its normalized outcome.
fn ofctl(bin: &Path, target: &str, cmd: &str) -> String {
    let args: Vec<String> = cmd
        .split_whitespace()
        .map(|a| {
            if a == "TARGET" {
                target.to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    let out = Command::new(bin)
        .args(["--timeout", "10", "-O", "OpenFlow13"])
        .args(&args)
        .output();
    match out {
        Err(e) => format!("cannot run ovs-ofctl: {e}"),
        Ok(o) => normalize(
            target,
            o.status.success(),
            &String::from_utf8_lossy(&o.stdout),
            &String::from_utf8_lossy(&o.stderr),
        ),
    }
}

/// What may differ between the two switches and is not compared: the
/// socket's path, xids, durations and ages, counters, the order of a
/// dump's flows; an OpenFlow error is compared by its type and code names.
fn normalize(target: &str, ok: bool, stdout: &str, stderr: &str) -> String {
    if !ok {
        let names: Vec<&str> = stderr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("OFP") && w.contains('_'))
            .collect();
        if !names.is_empty() {
            return format!("error {}", names.join(" "));
        }
        return format!("error {}", stderr.replace(target, "TARGET").trim());
    }
    let mut lines: Vec<String> = stdout
        .lines()
        .map(|l| {
            let mut out = Vec::new();
            for part in l.replace(target, "TARGET").split(", ") {
                let part = part.trim_end_matches(',');
                let drop = [
                    "duration=",
                    "n_packets=",
                    "n_bytes=",
                    "idle_age=",
                    "hard_age=",
                ]
                .iter()
                .any(|p| part.trim_start().starts_with(p));
                if !drop {
                    out.push(part.to_string());
                }
            }
            let l = out.join(", ");
            match l.find("(xid=") {
                Some(i) => {
                    let end = l[i..].find(')').map_or(l.len(), |j| i + j + 1);
                    format!("{}{}", &l[..i], &l[end..])
                }
                None => l,
            }
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines.sort();
    lines.join("\n")
}

/// Empty tables, meters and groups.
fn reset(bin: &Path, target: &str) {
    for cmd in ["del-flows TARGET", "del-groups TARGET", "del-meters TARGET"] {
        ofctl(bin, target, cmd);
    }
}

fn outcome(bin: &Path, target: &str, case: &str) -> String {
    reset(bin, target);
    if let Some(spec) = case.strip_prefix("flow ") {
        let add = ofctl(bin, target, &format!("add-flow TARGET {spec}"));
        let dump = ofctl(bin, target, "dump-flows TARGET");
        return format!("add: {add}\ndump: {dump}");
    }
    let cmds = case.strip_prefix("run ").unwrap_or(case);
    cmds.split(" ; ")
        .map(|c| format!("{c}: {}", ofctl(bin, target, c.trim())))
        .collect::<Vec<_>>()
        .join("\n")
}

fn read_lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(data(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn ovs_ofctl_against_eswitchd_and_open_vswitch() {
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let Some(ovs) = Ovs::start_or_skip(T) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("esw-ofdiff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("test directory");
    let esw = Eswitchd::start(Path::new(env!("CARGO_BIN_EXE_eswitchd")), &dir, 4, Some(""))
        .unwrap_or_else(|e| panic!("{T}: {e}"));
    let allow: BTreeMap<String, String> = read_lines("allow.txt")
        .into_iter()
        .filter_map(|l| {
            let (case, why) = l.split_once(" | ")?;
            Some((case.trim().to_string(), why.trim().to_string()))
        })
        .collect();
    // `OFCTL_DIFF_ONLY=TEXT`: only the cases containing TEXT (a developer
    // looking at one difference).
    let only = std::env::var("OFCTL_DIFF_ONLY").unwrap_or_default();
    let cases: Vec<String> = read_lines("corpus.txt")
        .into_iter()
        .filter(|c| c.contains(&only))
        .collect();
    let (mut mismatches, mut allowed, mut stale) = (Vec::new(), 0, Vec::new());
    for case in &cases {
        let ours = outcome(&bin, esw.target(), case);
        let theirs = outcome(&bin, &ovs.bridge_target(), case);
        match (ours == theirs, allow.get(case)) {
            (true, None) => {}
            (true, Some(_)) => stale.push(case.clone()),
            (false, Some(why)) => {
                allowed += 1;
                eprintln!("allowed: {case}: {why}");
            }
            (false, None) => {
                eprintln!("MISMATCH {case}\n--- eswitchd\n{ours}\n--- Open vSwitch\n{theirs}\n");
                mismatches.push(case.clone());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    for case in &stale {
        eprintln!("on the allow-list but the same now (remove it): {case}");
    }
    println!("bench: openflow.diff_cases {}", cases.len());
    println!("bench: openflow.diff_allowed {allowed}");
    println!("bench: openflow.diff_mismatches {}", mismatches.len());
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ from Open vSwitch and are not on the allow-list: {mismatches:#?}",
        mismatches.len(),
        cases.len()
    );
    assert!(
        stale.is_empty(),
        "allow-list entries that no longer differ: {stale:#?}"
    );
}

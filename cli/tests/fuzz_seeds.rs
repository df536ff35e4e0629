//! Every fuzz target's property on every seed and regression input, in
//! the test command: `fuzz/seed.py` writes the corpora the fuzz runs start
//! from (the frames of `examples/demo.pcapng`, the OpenFlow sessions of
//! `fuzz/seeds/openflow/`, the flows, meters, configs and requests of
//! `examples/` and the README, the host's own netlink links, and every
//! input in `fuzz/seeds/regressions/`), and each file goes through the
//! same function its target runs (`fuzz/checks/`), so an input that once
//! crashed a target fails this test if the defect comes back.

#[path = "../../fuzz/checks/mod.rs"]
mod checks;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fuzz target's check.
type Check = fn(&[u8]);

/// Each target's check, by the corpus directory's name.
const TARGETS: [(&str, Check); 16] = [
    ("config_parse", checks::config_parse::check),
    ("control_request", checks::control_request::check),
    ("dr_dump", checks::dr_dump::check),
    ("extract", checks::extract::check),
    ("flow_file", checks::flow_file::check),
    ("flow_text", checks::flow_text::check),
    ("meter_parse", checks::meter_parse::check),
    ("netlink_host", checks::netlink_host::check),
    ("netlink_link", checks::netlink_link::check),
    ("openflow_channel", checks::openflow_channel::check),
    ("openflow_parse", checks::openflow_parse::check),
    ("pcap_read", checks::pcap_read::check),
    ("prm_decode", checks::prm_decode::check),
    ("tunnel_decap", checks::tunnel_decap::check),
    ("conntrack", checks::conntrack::check),
    ("ovsdb_message", checks::ovsdb_message::check),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files of `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_seed_and_regression_passes_its_targets_check() {
    let test = "every_seed_and_regression_passes_its_targets_check";
    let corpus = std::env::temp_dir().join(format!("eswitch-fuzz-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&corpus);
    let seeded = Command::new("python3")
        .arg(root().join("fuzz/seed.py"))
        .arg(&corpus)
        .output();
    let out = match seeded {
        Ok(o) => o,
        Err(e) => {
            prereq::skip(test, format!("python3 did not run ({e})"));
            return;
        }
    };
    assert!(
        out.status.success(),
        "fuzz/seed.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut counts = Vec::new();
    for (target, check) in TARGETS {
        let inputs = files(&corpus.join(target));
        for f in &inputs {
            let data = std::fs::read(f).expect("a corpus file");
            let r = std::panic::catch_unwind(|| check(&data));
            assert!(r.is_ok(), "{target}: {} fails its check", f.display());
        }
        counts.push((target, inputs.len()));
    }
    let _ = std::fs::remove_dir_all(&corpus);
    println!("{counts:?}");
    // What the seeds must reach: the committed sessions and regressions,
    // and the examples (netlink links depend on the host; prm_decode has
    // no seeds of its own).
    let regressions = files(&root().join("fuzz/seeds/regressions/openflow_parse"));
    assert!(
        !regressions.is_empty(),
        "the PORT_DESC name regression is kept"
    );
    for (target, n) in counts {
        let least = match target {
            "openflow_parse" => 100,
            "openflow_channel" | "extract" | "flow_text" => 10,
            "netlink_link" | "netlink_host" | "prm_decode" => 0,
            _ => 1,
        };
        assert!(
            n >= least,
            "{target}: {n} inputs, expected at least {least}"
        );
    }
}

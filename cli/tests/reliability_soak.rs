//! The soak, bounded for CI: integration/scripts/soak.sh run for 60 s on
//! the debug binaries (the script's default is 10 minutes). Churn of
//! ports (del-port/add-port and a netdev deleted and re-created), flows
//! over OpenFlow (ovs-ofctl), a UDP stream over changing 5-tuples and sim
//! faults switching on and off; the churn happened as expected and every
//! fault kind was met; at the end eswitchd's RSS is within 10 % of where
//! it settled (its slope over the rounds is printed, for long runs), the
//! stream's rule counted exactly what vm2 received, the stream lost at
//! most 0.1 %, and the device is empty after the stop.
//!
//! Needs root, iproute2, ethtool, ping, python3, ovs-ofctl and esw-pktgen
//! (built by `cargo test --workspace`). Only 198.18.0.0/15; the script
//! removes its lab on exit, also on failure, and is stopped (by PID) if
//! it overruns.

mod script;

use std::time::Duration;

const TEST: &str = "a_minute_of_churn_leaves_memory_counts_and_the_device_right";

#[test]
fn a_minute_of_churn_leaves_memory_counts_and_the_device_right() {
    if !prereq::netns(
        TEST,
        &["ip", "ethtool", "ping", "python3", "bash", "ovs-ofctl"],
    ) {
        return;
    }
    let Some(bin) = script::bin_dir(TEST) else {
        return;
    };
    let args: Vec<String> = ["--seconds", "60", "--rate", "2000", "--bin"]
        .map(String::from)
        .into_iter()
        .chain([bin.display().to_string()])
        .collect();
    let Some((out, ok)) = script::run(TEST, "soak.sh", &args, Duration::from_secs(240)) else {
        return;
    };
    let got = script::figures(&out, "soak:");
    let v = |k: &str| -> f64 { *got.get(k).unwrap_or_else(|| panic!("no '{k}' in:\n{out}")) };
    // The script checks the bounds too (and exits 1); here each is named.
    assert!(v("stream_sent") > 30_000.0, "the stream ran:\n{out}");
    assert!(v("stream_loss_pct") <= 0.1, "{out}");
    assert_eq!(v("stream_rule_packets"), v("stream_received"), "{out}");
    assert!(v("rss_end_vs_settled_pct") <= 110.0, "{out}");
    assert!(v("megaflows") == 0.0 && v("hw_undestroyed") == 0.0, "{out}");
    // The churn happened, each step as expected (a port's add taken when
    // it is absent, its del when present, each refused by name
    // otherwise), and every fault kind was met.
    for k in ["port_adds", "port_dels", "netdev_recreations", "of_mods"] {
        assert!(v(k) > 0.0, "no {k}:\n{out}");
    }
    assert_eq!(v("churn_unexpected"), 0.0, "{out}");
    assert!(
        v("poll_errors") > 0.0,
        "the counter-query faults were met:\n{out}"
    );
    assert!(v("rule_create_faults_met") > 0.0, "{out}");
    assert!(v("rule_destroy_faults_met") > 0.0, "{out}");
    assert!(out.contains("soak: device_empty_after_stop yes"), "{out}");
    assert!(ok, "soak.sh failed:\n{out}");
}

//! Scenario: what megaflow does real Open vSwitch install?
//!
//! Each test starts a private OVS (see `integration::ovs`), adds OpenFlow
//! rules and asks `ofproto/trace` for the megaflow of a packet. The expected
//! strings were recorded from Debian bookworm's OVS 3.1.0; they are the
//! reference eswitch's wildcarding is compared against. Each full trace is
//! printed (`cargo test -p integration --test ovs_trace -- --nocapture`).
//!
//! What they record:
//! * IPv4 prefixes: OVS's prefix trie un-wildcards `nw_src` only up to the
//!   first bit that tells the packet apart from the other rules' prefixes
//!   (10.9.9.9 vs 10.1.2.0/24 -> `10.8.0.0/13`), not the full /8 or /24.
//! * L4 ports: the same trie on `tp_dst` (443 vs rule 80 -> `0x100/0xff00`).
//! * L2-only rules leave L3 wildcarded apart from `dl_type` and `nw_frag`,
//!   even for a TCP packet (`ip`, not `tcp`).
//! * OVS always adds `recirc_id=0`, `eth`, the `dl_type`, `in_port` and,
//!   for IP, `nw_frag=no`.
//! * The trace's megaflow is the one the datapath really installs.
//!
//! Needs root and the `openvswitch-switch` package; prints `SKIP` otherwise.

use std::time::{Duration, Instant};

use integration::ovs::{Ovs, Trace};

/// Traces `packet`, prints the output and checks the two lines that matter.
fn expect(ovs: &Ovs, packet: &str, megaflow: &str, actions: &str) -> Trace {
    let t = ovs
        .trace(packet)
        .unwrap_or_else(|e| panic!("trace {packet}: {e}"));
    println!("--- ofproto/trace br0 '{packet}'\n{}", t.raw);
    assert_eq!(t.megaflow, megaflow, "megaflow of {packet}");
    assert_eq!(t.datapath_actions, actions, "datapath actions of {packet}");
    t
}

fn add(ovs: &Ovs, flows: &[&str]) {
    ovs.add_flows(flows)
        .unwrap_or_else(|e| panic!("add-flows: {e}"));
    println!("{}", ovs.dump_flows().unwrap_or_else(|e| e.to_string()));
}

#[test]
fn ipv4_prefixes_are_unwildcarded_to_the_deciding_bit() {
    let Some(ovs) = Ovs::start_or_skip("ovs_trace::ipv4_prefixes") else {
        return;
    };
    println!(
        "{} started in {:?} ({})",
        ovs.version().unwrap_or_default(),
        ovs.startup(),
        ovs.dir().display()
    );
    add(
        &ovs,
        &[
            "table=0,priority=10,ip,nw_src=10.0.0.0/8,actions=output:2",
            "table=0,priority=20,ip,nw_src=10.1.2.0/24,actions=output:3",
            "table=0,priority=0,actions=drop",
        ],
    );
    // Matches the /8 rule; 13 bits are enough to rule out 10.1.2.0/24
    // (10.9 = 00001010.00001001 vs 10.1 = 00001010.00000001). nw_dst stays
    // wildcarded.
    let t = expect(
        &ovs,
        "in_port=1,ip,nw_src=10.9.9.9,nw_dst=1.2.3.4",
        "recirc_id=0,eth,ip,in_port=1,nw_src=10.8.0.0/13,nw_frag=no",
        "2",
    );
    assert_eq!(t.megaflow_field("nw_src"), Some("10.8.0.0/13"));
    assert_eq!(t.megaflow_field("nw_dst"), None);
    // Matches the /24 rule: exactly its prefix.
    expect(
        &ovs,
        "in_port=1,ip,nw_src=10.1.2.3",
        "recirc_id=0,eth,ip,in_port=1,nw_src=10.1.2.0/24,nw_frag=no",
        "3",
    );
    // Outside 10/8: one bit (192 = 1..., 10 = 0...) decides.
    expect(
        &ovs,
        "in_port=1,ip,nw_src=192.168.0.1",
        "recirc_id=0,eth,ip,in_port=1,nw_src=128.0.0.0/1,nw_frag=no",
        "drop",
    );
    // del_flows empties the table: no rule, and no bits needed.
    ovs.del_flows().unwrap();
    expect(
        &ovs,
        "in_port=1,ip,nw_src=10.9.9.9",
        "recirc_id=0,eth,ip,in_port=1,nw_frag=no",
        "drop",
    );
}

#[test]
fn tcp_ports_get_a_prefix_too() {
    let Some(ovs) = Ovs::start_or_skip("ovs_trace::tcp_ports") else {
        return;
    };
    add(
        &ovs,
        &[
            "table=0,priority=10,tcp,tp_dst=80,actions=output:2",
            "table=0,priority=0,actions=drop",
        ],
    );
    // 443 = 0x01bb, 80 = 0x0050: the 8th bit from the top differs, so the
    // top 8 bits are un-wildcarded; tp_src and the addresses stay wild.
    expect(
        &ovs,
        "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=12345,tp_dst=443",
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x100/0xff00",
        "drop",
    );
    expect(
        &ovs,
        "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=12345,tp_dst=80",
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=80",
        "2",
    );
}

#[test]
fn l2_rule_leaves_l3_wildcarded() {
    let Some(ovs) = Ovs::start_or_skip("ovs_trace::l2_rule") else {
        return;
    };
    add(
        &ovs,
        &[
            "table=0,priority=10,dl_dst=00:00:00:00:00:02,actions=output:2",
            "table=0,priority=0,actions=drop",
        ],
    );
    expect(
        &ovs,
        "in_port=1,ip,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,\
         nw_src=10.0.0.1,nw_dst=10.0.0.2",
        "recirc_id=0,eth,ip,in_port=1,dl_dst=00:00:00:00:00:02,nw_frag=no",
        "2",
    );
    // A TCP packet: the megaflow says `ip`, not `tcp`: nw_proto and ports
    // are not looked at; dl_src neither.
    expect(
        &ovs,
        "in_port=1,tcp,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:03,\
         nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=80",
        "recirc_id=0,eth,ip,in_port=1,dl_dst=00:00:00:00:00:03,nw_frag=no",
        "drop",
    );
}

#[test]
fn trace_megaflow_is_what_the_datapath_installs() {
    let Some(ovs) = Ovs::start_or_skip("ovs_trace::datapath") else {
        return;
    };
    add(
        &ovs,
        &[
            "table=0,priority=10,ip,nw_src=10.0.0.0/8,actions=output:2",
            "table=0,priority=20,ip,nw_src=10.1.2.0/24,actions=output:3",
            "table=0,priority=0,actions=drop",
        ],
    );
    expect(
        &ovs,
        "in_port=1,udp,nw_src=10.9.9.9,nw_dst=1.2.3.4,udp_src=1,udp_dst=2",
        "recirc_id=0,eth,ip,in_port=1,nw_src=10.8.0.0/13,nw_frag=no",
        "2",
    );
    ovs.receive(
        "p1",
        "in_port(1),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0800),\
         ipv4(src=10.9.9.9,dst=1.2.3.4,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)",
    )
    .unwrap();
    // The packet is handled by the daemon's main loop: poll, bounded.
    let deadline = Instant::now() + Duration::from_secs(5);
    let flows = loop {
        let flows = ovs.dp_flows().unwrap();
        if !flows.is_empty() || Instant::now() >= deadline {
            break flows;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    println!("--- dpif/dump-flows br0\n{}", flows.join("\n"));
    assert_eq!(flows.len(), 1, "{flows:?}");
    // Same mask in datapath syntax: 10.8.0.0/13 = 10.9.9.9/255.248.0.0.
    assert!(
        flows[0].starts_with(
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.9.9.9/255.248.0.0,frag=no),"
        ),
        "{}",
        flows[0]
    );
    assert!(flows[0].ends_with("actions:2"), "{}", flows[0]);
    ovs.del_dp_flows().unwrap();
    assert_eq!(ovs.dp_flows().unwrap(), Vec::<String>::new());
}

#[test]
fn errors_are_reported_and_nothing_is_left_behind() {
    let Some(ovs) = Ovs::start_or_skip("ovs_trace::cleanup") else {
        return;
    };
    let err = ovs.trace("in_port=1,garbage=1").unwrap_err().to_string();
    assert!(err.contains("unknown field garbage"), "{err}");
    let err = ovs.add_flows(&["actions=frobnicate"]).unwrap_err();
    println!("expected errors reported: {err}");

    let pids = ovs.pids();
    let dir = ovs.dir().to_owned();
    assert_eq!(pids.len(), 2);
    assert!(dir.join("ovs-vswitchd.ctl").exists());
    drop(ovs);
    for pid in pids {
        // Killed and reaped: not even a zombie is left.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} survived"
        );
    }
    if std::env::var_os("ESWITCH_KEEP_OVS").is_none() {
        assert!(!dir.exists(), "{} survived", dir.display());
    }

    // The same when the test panics with the instance alive.
    let mut seen = None;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ovs = Ovs::start().expect("second instance");
        seen = Some((ovs.pids(), ovs.dir().to_owned()));
        panic!("deliberate panic with OVS running");
    }));
    assert!(unwound.is_err());
    let (pids, dir) = seen.expect("instance started");
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} survived the panic"
        );
    }
    if std::env::var_os("ESWITCH_KEEP_OVS").is_none() {
        assert!(!dir.exists(), "{} survived the panic", dir.display());
    }
}

//! Unit tests of `integration/src/ovs.rs`, kept beside it.

use super::*;

/// Captured from OVS 3.1.0 (Debian bookworm): `ovs-appctl ofproto/trace
/// br0 'in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=12345,
/// tp_dst=443'` with flows `priority=10,tcp,tp_dst=80,actions=output:2`
/// and `priority=0,actions=drop`.
const TCP_443: &str = "\
Flow: tcp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=12345,tp_dst=443,tcp_flags=0

bridge(\"br0\")
-------------
 0. priority 0
drop

Final flow: unchanged
Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x100/0xff00
Datapath actions: drop
";

#[test]
fn parses_real_trace() {
    let t = Trace::parse(TCP_443).unwrap();
    assert!(t.flow.starts_with("tcp,in_port=1,vlan_tci=0x0000,"));
    assert_eq!(
        t.megaflow,
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x100/0xff00"
    );
    assert_eq!(t.datapath_actions, "drop");
    assert_eq!(
        t.megaflow_fields(),
        vec![
            ("recirc_id", Some("0")),
            ("eth", None),
            ("tcp", None),
            ("in_port", Some("1")),
            ("nw_frag", Some("no")),
            ("tp_dst", Some("0x100/0xff00")),
        ]
    );
    assert_eq!(t.megaflow_field("tp_dst"), Some("0x100/0xff00"));
    assert_eq!(t.megaflow_field("nw_src"), None);
}

#[test]
fn missing_megaflow_is_an_error() {
    let err = Trace::parse("Flow: ip\nDatapath actions: drop\n").unwrap_err();
    assert!(err.contains("Megaflow"), "{err}");
}

#[test]
fn parentheses_do_not_split() {
    assert_eq!(
        split_top_level("packet_type=(1,0x800),ip, nw_src=1.2.3.4,"),
        vec!["packet_type=(1,0x800)", "ip", "nw_src=1.2.3.4"]
    );
}

//! Two bridges joined by patch ports: a packet sent to one goes on in the
//! peer's bridge with its metadata cleared, and one translation (one
//! megaflow) carries it across, as Open vSwitch's `patch_port_output`.

use megaflow::{DpAction, Field, FlowKey, PortNo, Timestamp};
use ofproto::text::parse_flow;
use ofproto::{Bridge, BridgeNo, FlowModCommand, PortInfo};

fn now() -> Timestamp {
    Timestamp::from_millis(1)
}

/// br-int (the main bridge): VM ports 1 and 2, patch port 10; br-ex:
/// uplink port 3, patch port 20, each patch the other's peer.
fn two_bridges() -> (Bridge, BridgeNo) {
    let mut br = Bridge::new();
    for p in [1, 2] {
        br.add_port(PortInfo::new(PortNo(p), format!("vm{p}")));
    }
    let ex = br.add_bridge().expect("room for a bridge");
    let patch = |no: u32, peer: u32| PortInfo {
        patch: Some(PortNo(peer)),
        ..PortInfo::new(PortNo(no), format!("patch{no}"))
    };
    br.add_port(patch(10, 20));
    let sub = br.sub_mut(ex).expect("br-ex");
    sub.add_port(PortInfo::new(PortNo(3), "uplink"));
    sub.add_port(patch(20, 10));
    (br, ex)
}

fn flow(br: &mut Bridge, no: BridgeNo, text: &str) {
    let fm = parse_flow(text, FlowModCommand::Add).expect("flow parses");
    br.sub_mut(no)
        .expect("bridge")
        .apply_flow_mod(&fm, now())
        .expect("flow applies");
}

fn from(port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(port.into());
    k.set_eth_type(0x0800);
    k.set_field(Field::EthSrc, 0x02_00_00_00_00_01);
    k.set_field(Field::EthDst, 0x02_00_00_00_00_99);
    k
}

#[test]
fn a_packet_crosses_a_patch_port_with_registers_cleared_and_comes_back_to_the_senders_actions() {
    let (mut br, ex) = two_bridges();
    flow(&mut br, BridgeNo::MAIN, "in_port=1,actions=load:7->NXM_NX_REG0[],load:9->OXM_OF_METADATA[],mod_dl_dst:02:00:00:00:00:42,output:10,output:2");
    // Only a packet with reg0 and metadata cleared matches in br-ex.
    flow(
        &mut br,
        ex,
        "priority=10,in_port=20,reg0=0,metadata=0,actions=mod_vlan_vid:5,output:3",
    );
    flow(&mut br, ex, "priority=1,actions=drop");
    let t = br.translate(&from(1), now());
    assert_eq!(t.error, None);
    let outs: Vec<&DpAction> = t
        .actions
        .iter()
        .filter(|a| matches!(a, DpAction::Output(_)))
        .collect();
    assert_eq!(
        outs,
        vec![&DpAction::Output(PortNo(3)), &DpAction::Output(PortNo(2))],
        "out the uplink through br-ex, then on to vm2: {:?}",
        t.actions
    );
    // vm2's copy carries no VLAN tag: br-ex's push is undone for it.
    let after_uplink = t
        .actions
        .iter()
        .position(|a| *a == DpAction::Output(PortNo(3)))
        .expect("uplink output");
    assert!(
        t.actions[after_uplink..]
            .iter()
            .any(|a| matches!(a, DpAction::PopVlan)),
        "the sender's packet is as it was: {:?}",
        t.actions
    );
    // Both bridges' rules are credited, each in its own bridge.
    let bridges: Vec<BridgeNo> = t.rules.iter().map(|r| r.bridge).collect();
    assert_eq!(bridges, vec![BridgeNo::MAIN, ex]);
    assert_eq!(
        t.final_flow.field(Field::Reg0),
        7,
        "the sender's registers are back"
    );
}

#[test]
fn a_bridge_of_its_own_is_chosen_by_the_input_port_and_normal_learns_in_it() {
    let (mut br, ex) = two_bridges();
    flow(&mut br, ex, "actions=normal");
    // From the uplink: br-ex floods to its patch port, into br-int, whose
    // empty table drops; nothing goes out of br-int's own ports.
    let t = br.translate(&from(3), now());
    assert_eq!(t.error, None);
    assert!(
        t.actions.iter().all(|a| !matches!(a, DpAction::Output(_))),
        "{:?}",
        t.actions
    );
    assert!(t.learned.iter().all(|l| l.bridge == ex));
    br.learn(&t.learned, now());
    assert_eq!(
        br.sub(ex)
            .expect("br-ex")
            .mac()
            .lookup(0, 0x02_00_00_00_00_01, now()),
        Some(PortNo(3))
    );
    assert_eq!(
        br.mac().lookup(0, 0x02_00_00_00_00_01, now()),
        None,
        "br-int learned nothing"
    );
    // br-int sends to the patch: br-ex's NORMAL now knows the MAC is
    // behind the uplink.
    flow(&mut br, BridgeNo::MAIN, "in_port=1,actions=output:10");
    let mut k = from(1);
    k.set_field(Field::EthDst, 0x02_00_00_00_00_01);
    k.set_field(Field::EthSrc, 0x02_00_00_00_00_07);
    let t = br.translate(&k, now());
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(3))]);
    assert!(t.uses_mac_table);
}

#[test]
fn patch_ports_that_send_a_packet_back_and_forth_end_as_too_deep_and_a_lone_patch_port_sends_nowhere(
) {
    let (mut br, ex) = two_bridges();
    flow(&mut br, BridgeNo::MAIN, "in_port=1,actions=output:10");
    flow(&mut br, BridgeNo::MAIN, "in_port=10,actions=output:in_port");
    flow(&mut br, ex, "in_port=20,actions=output:in_port");
    let t = br.translate(&from(1), now());
    assert_eq!(t.error, Some(ofproto::XlateError::TooDeep));
    assert!(t.actions.is_empty());
    // Its peer gone (br-ex deleted): the patch port leads nowhere.
    assert!(br.remove_bridge(ex));
    let t = br.translate(&from(1), now());
    assert_eq!(t.error, None);
    assert!(t.actions.is_empty());
}

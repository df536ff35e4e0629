//! `check_pkt_larger(LEN)->DST`: one megaflow for packets of any length,
//! whose `check_pkt_len` datapath action picks the branch by the length,
//! as Open vSwitch's datapath does (`frames_diff` compares the frames with
//! Open vSwitch's own). And `learn`, kept but not run: its megaflow says
//! why it stays in software.

use megaflow::actions::{execute, CollectSink};
use megaflow::frame::{FrameSpec, L4};
use megaflow::{extract, extract_into, DpAction, Field, PortNo, Timestamp};
use ofproto::text::parse_flow;
use ofproto::{Bridge, FlowModCommand};

fn bridge(flows: &[&str]) -> Bridge {
    let mut b = Bridge::with_ports(1..=4);
    for f in flows {
        let fm = parse_flow(f, FlowModCommand::Add).expect("flow parses");
        b.apply_flow_mod(&fm, Timestamp(0)).expect("flow applies");
    }
    b
}

fn frame(payload: usize) -> Vec<u8> {
    let mut f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1000, 53));
    f.payload = payload;
    f.build()
}

#[test]
fn one_megaflow_sends_short_and_long_packets_their_own_ways() {
    let b = bridge(&[
        "table=0,actions=resubmit(,1),output:4",
        "table=1,actions=check_pkt_larger(100)->reg0[0],mod_dl_dst:02:00:00:00:77:02,resubmit(,2)",
        "table=2,reg0=1,actions=output:3",
        "table=2,priority=0,actions=output:2",
    ]);
    let short = frame(10);
    let long = frame(200);
    let key = |f: &[u8]| extract(1, f);
    let t = b.translate(&key(&short), Timestamp(1));
    assert_eq!(t.error, None);
    // The register is the translation's own: the megaflow does not match it.
    assert_eq!(t.mask.field(Field::Reg0), 0);
    // The fork is the resubmitted chain's: the caller's output:4 follows
    // it once, with the packet as it was (no eth_dst rewrite for it).
    let [DpAction::CheckPktLen { size: 100, gt, le }, DpAction::Output(PortNo(4))] = &t.actions[..]
    else {
        panic!("a check_pkt_len then the caller's output: {:?}", t.actions);
    };
    for (branch, port) in [(gt, 3), (le, 2)] {
        assert!(
            matches!(branch.as_slice(), [DpAction::SetEthDst(_), DpAction::Output(PortNo(p))] if *p == port),
            "{branch:?}"
        );
    }
    // The same megaflow for both packets; each goes its own way, then on
    // to port 4.
    assert_eq!(b.translate(&key(&long), Timestamp(1)).mask, t.mask);
    for (f, port) in [(short, 2), (long, 3)] {
        let mut pkt = f.clone();
        let mut scratch = megaflow::FlowKey::ZERO;
        let mut layout = extract_into(1, &pkt, &mut scratch).layout;
        let mut sink = CollectSink::new();
        let out = execute(&t.actions, &mut pkt, &mut layout, &mut sink);
        assert_eq!(out.dropped, None);
        let ports: Vec<u32> = sink.outputs.iter().map(|(p, _)| p.0).collect();
        assert_eq!(ports, vec![port, 4], "a frame of {} bytes", f.len());
        // Port 4 got the packet unrewritten; the branch's port, rewritten.
        assert_eq!(sink.outputs[1].1, f);
        assert_ne!(sink.outputs[0].1, f);
    }
}

/// `learn(table=10,idle_timeout=60,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
/// output:NXM_OF_IN_PORT[])` as ovs-ofctl encodes it (NXAST_LEARN's bytes
/// after the subtype), with `extra` in its flags and fin timeouts.
fn learn_body(flags: u16, fin_idle: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(60u16.to_be_bytes()); // idle_timeout
    b.extend(0u16.to_be_bytes()); // hard_timeout
    b.extend(0x8000u16.to_be_bytes()); // priority
    b.extend(0x55u64.to_be_bytes()); // cookie
    b.extend(flags.to_be_bytes());
    b.extend([10, 0]); // table_id, pad
    b.extend(fin_idle.to_be_bytes());
    b.extend(0u16.to_be_bytes());
    // NXM_OF_ETH_DST[] = NXM_OF_ETH_SRC[]: a match from a field, 48 bits.
    b.extend(48u16.to_be_bytes());
    b.extend(0x0000_0406u32.to_be_bytes());
    b.extend(0u16.to_be_bytes());
    b.extend(0x0000_0206u32.to_be_bytes());
    b.extend(0u16.to_be_bytes());
    // output:NXM_OF_IN_PORT[]: 16 bits.
    b.extend((2u16 << 11 | 16).to_be_bytes());
    b.extend(0x0000_0002u32.to_be_bytes());
    b.extend(0u16.to_be_bytes());
    b.extend(0u16.to_be_bytes()); // the end
    b
}

fn learning_bridge(body: Vec<u8>) -> Bridge {
    let mut b = bridge(&["table=10,priority=0,actions=output:4"]);
    let mut spec = ofproto::RuleSpec::new(
        ofproto::TableId(0),
        ofproto::Priority(1),
        megaflow::Match::catch_all(),
    );
    spec.instructions.apply = vec![
        ofproto::OfAction::Learn {
            learn2: false,
            body,
        },
        ofproto::OfAction::Resubmit(ofproto::TableId(10)),
    ];
    b.apply_flow_mod(&ofproto::FlowMod::add(spec), Timestamp(0))
        .expect("flow applies");
    b
}

/// A packet through `learn` adds the flow it says (once: learning it
/// again refreshes it and moves no generation), and the next packet to
/// that MAC takes it; the megaflow depends on the source MAC it read.
#[test]
fn learn_adds_the_flow_its_specs_build_from_the_packet() {
    let mut b = learning_bridge(learn_body(0, 0));
    let mut k = extract(3, &frame(10));
    k.set_field(Field::EthSrc, 0x02_00_00_00_00_33);
    let t = b.translate(&k, Timestamp(1));
    assert_eq!(
        t.actions,
        vec![DpAction::Output(PortNo(4))],
        "not learned yet"
    );
    assert_eq!(
        t.mask.field(Field::EthSrc),
        0xffff_ffff_ffff,
        "learn read it"
    );
    let [(bridge, fm)] = &t.learned_flows[..] else {
        panic!("one learned flow: {:?}", t.learned_flows);
    };
    assert_eq!(*bridge, ofproto::BridgeNo::MAIN);
    let text = ofproto::text::format_rule(&fm.rule);
    assert!(
        text.contains("table=10")
            && text.contains("idle_timeout=60")
            && text.contains("dl_dst=02:00:00:00:00:33")
            && text.contains("actions=output:3"),
        "{text}"
    );
    b.learn_flows(&t.learned_flows, Timestamp(2));
    let g = b.generations();
    b.learn_flows(&t.learned_flows, Timestamp(3));
    assert_eq!(b.generations(), g, "learning it again is a refresh");
    // A packet to the learned MAC goes where it came from.
    let mut back = extract(1, &frame(10));
    back.set_field(Field::EthDst, 0x02_00_00_00_00_33);
    let t = b.translate(&back, Timestamp(4));
    assert!(
        t.actions.contains(&DpAction::Output(PortNo(3))),
        "{:?}",
        t.actions
    );
}

/// A `learn` this switch does not run (here: `fin_idle_timeout`) is kept
/// and learns nothing; its megaflow stays in software, with the reason.
#[test]
fn a_learn_not_run_keeps_its_megaflow_in_software_with_the_reason() {
    let b = learning_bridge(learn_body(0, 5));
    let t = b.translate(&extract(3, &frame(10)), Timestamp(1));
    assert!(t.learned_flows.is_empty());
    assert!(
        t.actions.contains(&DpAction::Output(PortNo(4))),
        "{:?}",
        t.actions
    );
    assert!(
        t.actions
            .contains(&DpAction::SoftwareOnly(ofproto::xlate::LEARN_NOT_RUN)),
        "{:?}",
        t.actions
    );
}

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

/// `learn(...)` is kept but not run: the megaflow of a packet that ran it
/// says so, so that it stays in software with the reason (the FDB
/// refuses it), and forwards as the rest of its actions say.
#[test]
fn a_megaflow_that_ran_learn_stays_in_software_with_the_reason() {
    // As ovs-ofctl sends it (the text parser leaves learn to the wire).
    let mut b = bridge(&[]);
    let mut spec = ofproto::RuleSpec::new(
        ofproto::TableId(0),
        ofproto::Priority(1),
        megaflow::Match::catch_all(),
    );
    spec.instructions.apply = vec![
        ofproto::OfAction::Learn {
            learn2: false,
            body: vec![0; 22],
        },
        ofproto::OfAction::Output {
            port: ofproto::OfPort::Port(PortNo(2)),
            max_len: 0,
        },
    ];
    b.apply_flow_mod(&ofproto::FlowMod::add(spec), Timestamp(0))
        .expect("flow applies");
    let t = b.translate(&extract(1, &frame(10)), Timestamp(1));
    assert!(
        t.actions.contains(&DpAction::Output(PortNo(2))),
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

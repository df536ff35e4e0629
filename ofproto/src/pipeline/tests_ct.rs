//! `ct()` through the software pipeline: the first packet of each stage
//! goes up and installs that stage's megaflow, later packets stay in the
//! datapath for both stages, the tracker decides what a stateful table
//! lets through.

use std::sync::Arc;

use conntrack::{Config, Tracker};
use megaflow::actions::CollectSink;
use megaflow::frame::{FrameSpec, L4};

use super::tests::{bridge, Model};
use super::*;

const A: u32 = 0xc612_0002;
const B: u32 = 0xc612_0003;
const C: u32 = 0xc612_0004;

/// Open vSwitch's conntrack tutorial firewall: port 1 may open
/// connections to port 2; port 2 may only answer.
const FIREWALL: [&str; 5] = [
    "table=0,priority=50,ct_state=-trk,ip actions=ct(table=1,zone=9)",
    "table=1,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=9),output:2",
    "table=1,priority=50,ct_state=+trk+est,ip,in_port=1 actions=output:2",
    "table=1,priority=50,ct_state=+trk+est,ip,in_port=2 actions=output:1",
    "table=1,priority=40,ct_state=+trk,ip actions=drop",
];

fn firewall() -> (Pipeline<Model>, Arc<Tracker>) {
    let mut p = Pipeline::new(
        bridge(&FIREWALL),
        Model::default(),
        PipelineConfig::default(),
    );
    let t = Arc::new(Tracker::new(Config::default()));
    p.set_tracker(Arc::clone(&t));
    p.datapaths_mut().0.set_tracker(Arc::clone(&t));
    (p, t)
}

fn udp(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
    FrameSpec::ipv4(src, dst, L4::udp(sport, dport)).build()
}

/// Sends one frame from `port`: (went up, ports it left on).
fn send(p: &mut Pipeline<Model>, port: u32, mut f: Vec<u8>, ms: u64) -> (bool, Vec<u32>) {
    let mut sink = CollectSink::new();
    let out = p.process(
        Timestamp(1_000_000_000 + ms * 1_000_000),
        PortNo(port),
        &mut f,
        &mut sink,
    );
    (out.upcall, sink.outputs.iter().map(|(p, _)| p.0).collect())
}

#[test]
fn a_stateful_table_lets_replies_in_and_keeps_strangers_out() {
    let (mut p, t) = firewall();
    // A opens: up (stage 1, then stage 2 in the slow path), out port 2.
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 0), (true, vec![2]));
    assert_eq!(t.len(), 1, "committed");
    // B answers: its stage-1 megaflow (port 2, untracked) is new, its
    // stage-2 one too; out port 1.
    assert_eq!(send(&mut p, 2, udp(B, A, 53, 5000), 1), (true, vec![1]));
    // A again: now established, a stage-2 megaflow of its own; B again:
    // all in the datapath, both stages.
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 2), (true, vec![2]));
    assert_eq!(send(&mut p, 2, udp(B, A, 53, 5000), 3), (false, vec![1]));
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 3), (false, vec![2]));
    // A stranger on port 2: tracked new, dropped.
    assert_eq!(send(&mut p, 2, udp(C, A, 53, 5001), 4).1, Vec::<u32>::new());
    assert_eq!(t.len(), 1, "nothing committed for the stranger");
    // The megaflows: each stage its own, the second stage named by its id.
    let dumps: Vec<String> = p.dump().iter().map(|d| ofproto_text(&d.matched)).collect();
    assert!(
        dumps
            .iter()
            .any(|m| m.starts_with("ct_state=0") || m.contains("ct_state=-trk")),
        "{dumps:?}"
    );
    assert!(
        dumps
            .iter()
            .any(|m| m.starts_with("recirc_id=0x") && m.contains("ct_state=")),
        "{dumps:?}"
    );
    let st = p.datapaths().0.stats();
    assert!(st.recirculations >= 2, "{st:?}");
}

fn ofproto_text(m: &Match) -> String {
    crate::text::format_match(m)
}

#[test]
fn tcp_through_the_firewall_is_tracked_by_its_window() {
    let (mut p, t) = firewall();
    let data = megaflow::frame::tcp_segment;
    let seg =
        |src, dst, sport, dport, flags, seq, ack| data(src, dst, sport, dport, flags, seq, ack, 0);
    assert_eq!(
        send(&mut p, 1, seg(A, B, 40000, 80, 0x02, 100, 0), 0).1,
        vec![2]
    );
    assert_eq!(
        send(&mut p, 2, seg(B, A, 80, 40000, 0x12, 700, 101), 1).1,
        vec![1]
    );
    assert_eq!(
        send(&mut p, 1, seg(A, B, 40000, 80, 0x10, 101, 701), 2).1,
        vec![2]
    );
    // Data far outside the window is invalid: the catch-all drops it.
    assert!(send(
        &mut p,
        2,
        data(B, A, 80, 40000, 0x10, 700 + 90_000_000, 101, 100),
        3
    )
    .1
    .is_empty());
    // In the window it passes.
    assert_eq!(
        send(&mut p, 2, data(B, A, 80, 40000, 0x10, 701, 101, 100), 3).1,
        vec![1]
    );
    // An unsolicited SYN from B's side is new and dropped.
    assert!(send(&mut p, 2, seg(B, A, 81, 40001, 0x02, 5, 0), 4)
        .1
        .is_empty());
    let d = t.dump(None, 5_000);
    assert_eq!(d.len(), 1);
    assert!(
        d[0].format(false)
            .ends_with("zone=9,protoinfo=(state=ESTABLISHED)"),
        "{}",
        d[0].format(false)
    );
}

/// A recirculation id lives while a megaflow recirculates to it: once the
/// first stages age out, the id is freed after its grace and the later
/// stages that match it go too; traffic that comes back gets a new id and
/// works as before.
#[test]
fn recirculation_ids_are_freed_with_their_megaflows() {
    let (mut p, _t) = firewall();
    let pass = |p: &mut Pipeline<Model>, ms: u64| {
        p.revalidate(Timestamp(1_000_000_000 + ms * 1_000_000));
    };
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 0), (true, vec![2]));
    assert_eq!(send(&mut p, 2, udp(B, A, 53, 5000), 1), (true, vec![1]));
    fn p_ids(p: &Pipeline<Model>) -> usize {
        p.bridge().recirc.len()
    }
    assert_eq!(p_ids(&p), 1, "one frozen state: table 1, zone 9");
    // Passes while the flows live keep the id.
    for i in 0..4 {
        pass(&mut p, 2 + i);
    }
    assert_eq!(p_ids(&p), 1);
    let before = p.stats().recirc_ids_freed;
    // Idle past max_idle: every megaflow ages out, then the id goes.
    let idle = 11_000;
    for i in 0..4 {
        pass(&mut p, idle + i);
    }
    assert!(p.is_empty(), "{} megaflows left", p.len());
    assert_eq!(p_ids(&p), 0, "freed with its megaflows");
    assert_eq!(p.stats().recirc_ids_freed, before + 1);
    // The connection comes back (still tracked): a new id, both stages
    // installed again, forwarded as before.
    assert_eq!(
        send(&mut p, 2, udp(B, A, 53, 5000), idle + 10),
        (true, vec![1])
    );
    assert_eq!(p_ids(&p), 1);
    assert_eq!(
        send(&mut p, 2, udp(B, A, 53, 5000), idle + 11),
        (false, vec![1])
    );
}

/// An id no first stage recirculates to any more (the table changed) is
/// freed after its grace, and the later stages that still match it go
/// with it, however busy they were.
#[test]
fn a_freed_id_takes_its_later_stages_along() {
    let (mut p, _t) = firewall();
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 0), (true, vec![2]));
    assert!(p.len() >= 2, "both stages: {}", p.len());
    // Table 0 forwards without ct() from now on.
    let fm = crate::text::parse_flow(
        "table=0,priority=50,ct_state=-trk,ip actions=output:2",
        crate::FlowModCommand::Add,
    )
    .expect("flow");
    p.bridge_mut()
        .apply_flow_mod(&fm, Timestamp(1_000_000_000))
        .expect("applies");
    for i in 0..4 {
        p.revalidate(Timestamp(1_000_000_000 + (1 + i) * 1_000_000));
    }
    assert_eq!(p.bridge().recirc.len(), 0, "no first stage holds it");
    assert!(p.stats().recirc_ids_freed >= 1);
    assert!(
        p.dump().iter().all(|d| d.matched.key().recirc_id() == 0),
        "no later stage of a freed id"
    );
    assert_eq!(send(&mut p, 1, udp(A, B, 5000, 53), 10).1, vec![2]);
}

#[test]
fn a_dp_hash_group_spreads_connections_over_a_few_megaflows() {
    use crate::group::{Bucket, GroupSpec, GroupType, SelectMethod};
    let mut b = bridge(&["priority=10,ip,in_port=1 actions=group:1"]);
    let bucket = |p: u32| Bucket {
        weight: 1,
        watch_port: None,
        actions: vec![crate::rule::OfAction::Output {
            port: crate::rule::OfPort::Port(PortNo(p)),
            max_len: 0,
        }],
    };
    let spec = GroupSpec {
        id: 1,
        ty: GroupType::Select,
        buckets: vec![bucket(2), bucket(3)],
        method: SelectMethod::DpHash { param: 1 << 32 },
    };
    b.add_group(spec, Timestamp(0)).expect("group");
    let mut p = Pipeline::new(b, Model::default(), PipelineConfig::default());
    let (mut upcalls, mut by_port) = (0, [0u32; 4]);
    for i in 0..400u32 {
        let mut ports = Vec::new();
        for k in 0..3 {
            let (up, out) = send(
                &mut p,
                1,
                udp(A + (i << 8), B, 1000 + i as u16, 53),
                u64::from(i * 3 + k),
            );
            upcalls += u32::from(up);
            ports.extend(out);
        }
        // Every packet of a connection leaves by the same bucket.
        assert_eq!(ports.len(), 3, "connection {i}: {ports:?}");
        assert!(
            ports.iter().all(|&q| q == ports[0]),
            "connection {i}: {ports:?}"
        );
        by_port[ports[0] as usize] += 1;
    }
    // One first-stage megaflow, one per value of the map's 16 that came
    // up: the connections' own fields are in none.
    assert!(p.len() <= 17, "{} megaflows", p.len());
    assert!(upcalls <= 17, "{upcalls} upcalls");
    assert!(p
        .dump()
        .iter()
        .all(|d| d.matched.mask().is_wildcard(megaflow::Field::TpSrc)));
    // Equal weights: each bucket about half.
    for q in [2, 3] {
        assert!((120..=280).contains(&by_port[q]), "{by_port:?}");
    }
}

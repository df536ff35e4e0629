use super::*;
use crate::actions::{
    CollectSink, DpAction, DropReason, SampleCookie, UserspaceReason, MAX_RECIRC_DEPTH,
};
use crate::frame::{FrameSpec, L4};
use crate::key::{Field, Mask};
use crate::offload::MeterBand;
use proptest::prelude::*;

fn frame(dport: u16) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1000, dport)).build()
}

/// The megaflow `in_port=1,udp,tp_dst=dport`.
fn flow(dport: u16) -> Box<Match> {
    let mut key = FlowKey::ZERO;
    extract_into(1, &frame(dport), &mut key);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::TpDst);
    Box::new(Match::new(&key, &mask))
}

fn out(p: u32) -> Actions {
    Actions::new(vec![DpAction::Output(PortNo(p))])
}

fn insert(dp: &mut Datapath, id: u64, dport: u16, actions: Actions) {
    dp.apply(DpCommand::Insert {
        id: FlowId(id),
        matched: flow(dport),
        actions,
    });
}

fn send(dp: &mut Datapath, dport: u16, t: u64) -> (Lookup, CollectSink) {
    let mut sink = CollectSink::new();
    let mut pkt = frame(dport);
    let r = dp.process(Timestamp(t), PortNo(1), &mut pkt, &mut sink);
    (r, sink)
}

fn report(dp: &mut Datapath) -> Vec<DpEvent> {
    let mut v = Vec::new();
    dp.report(&mut v);
    v
}

fn stats(packets: u64, bytes: u64, used: u64) -> FlowStats {
    FlowStats {
        packets,
        bytes,
        used: Timestamp(used),
        tcp_flags: 0,
    }
}

#[test]
fn hits_run_their_actions_and_are_reported_once_as_deltas() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    insert(&mut dp, 7, 53, out(2));
    let (r, sink) = send(&mut dp, 53, 10);
    assert!(matches!(r, Lookup::Hit(o) if o.outputs == 1), "{r:?}");
    assert_eq!(sink.outputs[0].0, PortNo(2));
    send(&mut dp, 53, 11);
    let len = frame(53).len() as u64;
    assert_eq!(
        report(&mut dp),
        vec![DpEvent::Stats {
            id: FlowId(7),
            delta: stats(2, 2 * len, 11)
        }]
    );
    assert_eq!(report(&mut dp), vec![], "nothing new, nothing reported");
    send(&mut dp, 53, 12);
    assert_eq!(
        report(&mut dp),
        vec![DpEvent::Stats {
            id: FlowId(7),
            delta: stats(1, len, 12)
        }]
    );
    let st = dp.stats();
    assert_eq!((st.packets, st.hits, st.misses), (3, 3, 0));
}

/// Installs megaflow `id`: `m` with actions `a`.
fn insert_m(dp: &mut Datapath, id: u64, m: Box<Match>, a: Vec<DpAction>) {
    dp.apply(DpCommand::Insert {
        id: FlowId(id),
        matched: m,
        actions: Actions::new(a),
    })
}

/// `flow(dport)` at stage `recirc_id`, with `reg0` as given.
fn staged(dport: u16, recirc_id: u64, reg0: Option<u64>) -> Box<Match> {
    let m = flow(dport);
    let mut key = *m.key();
    key.set_recirc_id(recirc_id);
    let mut mask = m.mask().with_exact(Field::RecircId);
    if let Some(r) = reg0 {
        key.set_reg0(r);
        mask = mask.with_exact(Field::Reg0);
    }
    Box::new(Match::new(&key, &mask))
}

#[test]
fn recirc_looks_the_modified_packet_up_again_at_the_next_stage() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    // Stage 0: rewrite the port to 81 and go to stage 7; stage 7 (port 81,
    // recirc_id 7) outputs to 3. A stage-7 flow for port 80 must not match:
    // the packet was rewritten.
    insert_m(
        &mut dp,
        1,
        staged(80, 0, None),
        vec![DpAction::SetTpDst(81), DpAction::Recirc(7)],
    );
    insert_m(
        &mut dp,
        2,
        staged(81, 7, None),
        vec![DpAction::Output(PortNo(3))],
    );
    insert_m(
        &mut dp,
        3,
        staged(80, 7, None),
        vec![DpAction::Output(PortNo(9))],
    );
    let (r, sink) = send(&mut dp, 80, 1);
    let Lookup::Hit(o) = r else { panic!("{r:?}") };
    assert_eq!((o.outputs, o.dropped, o.recirc), (1, None, None));
    let outs = &sink.outputs;
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].0, PortNo(3));
    assert_eq!(outs[0].1, frame(81), "the stage-0 rewrite went through");
    let st = dp.stats();
    assert_eq!(
        (st.packets, st.hits, st.misses, st.recirculations),
        (1, 2, 0, 1)
    );
    // Both stages' flows counted the packet.
    let ev = report(&mut dp);
    for id in [1, 2] {
        assert!(
            ev.iter()
                .any(|e| matches!(e, DpEvent::Stats { id: FlowId(i), .. } if *i == id)),
            "flow {id}: {ev:?}"
        );
    }
    // A miss at stage 7 leaves the stage-7 key (its recirc_id, the
    // rewritten port, the registers kept) for the slow path.
    insert_m(
        &mut dp,
        4,
        staged(82, 0, None),
        vec![DpAction::SetTpDst(83), DpAction::Recirc(9)],
    );
    let (r, _) = send(&mut dp, 82, 2);
    assert!(matches!(r, Lookup::Miss), "{r:?}");
    assert_eq!(dp.key().recirc_id(), 9);
    assert_eq!(dp.key().tp_dst(), 83);
    assert_eq!(dp.key().in_port(), 1);
}

#[test]
fn a_recirc_before_the_end_forks_a_copy_that_runs_after_the_list() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    // Stage 0 forks a copy to stage 7 as the packet is (port 80), then
    // rewrites the packet itself to 81 and outputs it to 2. Stage 7 sees
    // the copy, not the rewrite: its port-81 flow must not match.
    insert_m(
        &mut dp,
        1,
        staged(80, 0, None),
        vec![
            DpAction::Recirc(7),
            DpAction::SetTpDst(81),
            DpAction::Output(PortNo(2)),
        ],
    );
    insert_m(
        &mut dp,
        2,
        staged(80, 7, None),
        vec![DpAction::Output(PortNo(3))],
    );
    insert_m(
        &mut dp,
        3,
        staged(81, 7, None),
        vec![DpAction::Output(PortNo(9))],
    );
    let (r, sink) = send(&mut dp, 80, 1);
    let Lookup::Hit(o) = r else { panic!("{r:?}") };
    assert_eq!(
        (o.outputs, o.forks, o.dropped, o.recirc),
        (2, 1, None, None)
    );
    let outs: Vec<(PortNo, Vec<u8>)> = sink.outputs.clone();
    assert_eq!(
        outs,
        vec![(PortNo(2), frame(81)), (PortNo(3), frame(80))],
        "the packet's own actions first, then the copy's stage"
    );
    let st = dp.stats();
    assert_eq!((st.forks, st.forks_lost, st.recirculations), (1, 0, 1));

    // The copy's stage misses: the packet's own path is done, the miss is
    // the copy's (its key, its bytes); a second fork waits behind it and
    // runs once the caller asks.
    insert_m(
        &mut dp,
        4,
        staged(82, 0, None),
        vec![
            DpAction::Recirc(9),
            DpAction::Recirc(7),
            DpAction::Output(PortNo(2)),
        ],
    );
    insert_m(
        &mut dp,
        5,
        staged(82, 7, None),
        vec![DpAction::Output(PortNo(4))],
    );
    let mut sink = CollectSink::new();
    let mut pkt = frame(82);
    let r = dp.process(Timestamp(2), PortNo(1), &mut pkt, &mut sink);
    assert!(matches!(r, Lookup::Miss), "{r:?}");
    // The copies run in the order forked: stage 9's missed first, stage
    // 7's waits until the caller asks.
    assert_eq!(dp.key().recirc_id(), 9);
    assert_eq!(pkt, frame(82), "the missed copy's bytes");
    let r = dp.run_deferred(Timestamp(2), &mut pkt, &mut sink);
    assert!(matches!(r, Some(Lookup::Hit(o)) if o.outputs == 1), "{r:?}");
    let ports: Vec<u32> = sink.outputs.iter().map(|(p, _)| p.0).collect();
    assert!(ports.contains(&2) && ports.contains(&4), "{ports:?}");
    // Nothing left behind, nothing lost at the next packet.
    assert!(dp.run_deferred(Timestamp(3), &mut pkt, &mut sink).is_none());
    send(&mut dp, 80, 3);
    assert_eq!(dp.stats().forks_lost, 0);
}

#[test]
fn a_fork_the_caller_leaves_waiting_is_counted_lost_at_the_next_packet() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    insert_m(
        &mut dp,
        1,
        staged(80, 0, None),
        vec![
            DpAction::Recirc(9),
            DpAction::Recirc(8),
            DpAction::Output(PortNo(2)),
        ],
    );
    // Both stages miss: the first copy's miss is answered, the other
    // waits; the next packet drops it and counts it.
    let (r, _) = send(&mut dp, 80, 1);
    assert!(matches!(r, Lookup::Miss));
    send(&mut dp, 80, 2);
    assert_eq!(dp.stats().forks_lost, 1);
    assert_eq!(dp.stats().forks, 4);
}

#[test]
fn a_recirculation_loop_is_cut_at_the_depth_limit() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    // Every stage sends the packet to stage 5 again.
    for (id, stage) in [(1, 0), (2, 5)] {
        dp.apply(DpCommand::Insert {
            id: FlowId(id),
            matched: staged(80, stage, None),
            actions: Actions::new(vec![DpAction::Recirc(5)]),
        });
    }
    let (r, sink) = send(&mut dp, 80, 1);
    let Lookup::Hit(o) = r else { panic!("{r:?}") };
    assert_eq!(o.dropped, Some(DropReason::RecircDepth));
    assert!(sink.outputs.is_empty());
    let st = dp.stats();
    assert_eq!(
        (st.recirculations, st.recirc_too_deep),
        (MAX_RECIRC_DEPTH as u64, 1)
    );
}

#[test]
fn a_miss_keeps_the_key_for_the_slow_path() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    let (r, sink) = send(&mut dp, 80, 1);
    assert_eq!(r, Lookup::Miss);
    assert!(sink.outputs.is_empty());
    assert_eq!(dp.key().tp_dst(), 80);
    assert_eq!(dp.key().in_port(), 1);
    assert_eq!(dp.stats().misses, 1);
}

#[test]
fn removal_returns_the_counts_not_yet_reported() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    insert(&mut dp, 1, 53, out(2));
    send(&mut dp, 53, 1);
    report(&mut dp);
    send(&mut dp, 53, 2);
    send(&mut dp, 53, 3);
    dp.apply(DpCommand::Remove { id: FlowId(1) });
    let len = frame(53).len() as u64;
    assert_eq!(
        report(&mut dp),
        vec![DpEvent::Removed {
            id: FlowId(1),
            delta: stats(2, 2 * len, 3)
        }],
        "the removal carries the two hits; no separate Stats for them"
    );
    assert!(dp.is_empty());
    assert_eq!(send(&mut dp, 53, 4).0, Lookup::Miss);
    // Removing a flow not held is answered with zero counts.
    dp.apply(DpCommand::Remove { id: FlowId(1) });
    assert_eq!(
        report(&mut dp),
        vec![DpEvent::Removed {
            id: FlowId(1),
            delta: FlowStats::default()
        }]
    );
}

#[test]
fn modify_changes_the_actions_and_keeps_the_counts() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    insert(&mut dp, 3, 53, out(2));
    send(&mut dp, 53, 1);
    dp.apply(DpCommand::Modify {
        id: FlowId(3),
        actions: out(4),
    });
    let (_, sink) = send(&mut dp, 53, 2);
    assert_eq!(sink.outputs[0].0, PortNo(4));
    let ev = report(&mut dp);
    assert!(
        matches!(&ev[..], [DpEvent::Stats { id: FlowId(3), delta }] if delta.packets == 2),
        "{ev:?}"
    );
    assert_eq!(dp.flow(FlowId(3)).map(|(_, a)| a), Some(out(4)));
}

#[test]
fn refused_inserts_are_reported() {
    let mut dp = Datapath::new(
        CacheConfig {
            flow_limit: 1,
            ..CacheConfig::default()
        },
        1,
    );
    insert(&mut dp, 1, 53, out(2));
    insert(&mut dp, 1, 54, out(2)); // same id again
    insert(&mut dp, 2, 55, out(2)); // over the limit
    let ev = report(&mut dp);
    assert!(
        matches!(
            &ev[..],
            [
                DpEvent::Refused {
                    id: FlowId(1),
                    error: InsertError::Duplicate(_)
                },
                DpEvent::Refused {
                    id: FlowId(2),
                    error: InsertError::FlowLimit { limit: 1 }
                }
            ]
        ),
        "{ev:?}"
    );
    assert_eq!(dp.len(), 1);
}

#[test]
fn meters_are_shared_and_a_deleted_meter_drops() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    let len = frame(53).len() as u64;
    // Burst of exactly two packets, no refill within the test.
    let m = Arc::new(Meter::new(MeterId(5), MeterBand::bytes(1, 2 * len)));
    dp.apply(DpCommand::SetMeter(Arc::clone(&m)));
    let acts = Actions::new(vec![
        DpAction::Meter(MeterId(5)),
        DpAction::Output(PortNo(2)),
    ]);
    insert(&mut dp, 1, 53, acts);
    let passed = (0..5)
        .filter(|t| send(&mut dp, 53, 100 + t).1.outputs.len() == 1)
        .count();
    assert_eq!(passed, 2);
    assert_eq!(m.stats().dropped_packets, 3);
    dp.apply(DpCommand::DeleteMeter(MeterId(5)));
    let m2 = Arc::new(Meter::new(MeterId(5), MeterBand::bytes(1, 100 * len)));
    assert!(
        send(&mut dp, 53, 200).1.outputs.is_empty(),
        "no meter: drop"
    );
    dp.apply(DpCommand::SetMeter(m2));
    assert_eq!(send(&mut dp, 53, 201).1.outputs.len(), 1, "a new band");
}

#[test]
fn samples_draw_from_the_datapath_generator() {
    let mut dp = Datapath::new(CacheConfig::default(), 42);
    let acts = Actions::new(vec![DpAction::Sample {
        probability: u32::MAX / 2,
        actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample(
            SampleCookie::new(2),
        ))]),
    }]);
    insert(&mut dp, 1, 53, acts);
    let taken = (0..1000)
        .filter(|t| !send(&mut dp, 53, *t).1.userspace.is_empty())
        .count();
    assert!((400..600).contains(&taken), "{taken} of 1000 at 1/2");
}

#[test]
fn a_linked_datapath_on_its_own_thread_serves_commands_and_sends_events() {
    let (link, mut end) = link();
    let t = std::thread::spawn(move || {
        let mut dp = Datapath::new(CacheConfig::default(), 1);
        let mut buf = Vec::new();
        let mut hits = 0;
        // Bounded: the loop ends after 10 s even if the flow never comes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while hits < 3 && std::time::Instant::now() < deadline {
            end.serve(&mut dp, 64, &mut buf);
            if matches!(send(&mut dp, 53, 1).0, Lookup::Hit(_)) {
                hits += 1;
            }
        }
        end.flush(&mut dp, &mut buf);
        hits
    });
    assert!(link.send(DpCommand::Insert {
        id: FlowId(9),
        matched: flow(53),
        actions: out(2)
    }));
    assert_eq!(t.join().expect("datapath thread"), 3);
    let mut ev = Vec::new();
    link.collect(&mut ev);
    let total: u64 = ev
        .iter()
        .map(|e| match e {
            DpEvent::Stats { delta, .. } => delta.packets,
            _ => 0,
        })
        .sum();
    assert_eq!(total, 3);
    // The counters as the thread's last report left them: every packet
    // it ran, the misses before the insert arrived, the one command.
    let c = link.counters();
    assert_eq!(c.dp.hits, 3);
    assert_eq!(c.dp.commands, 1);
    assert_eq!(c.dp.packets, c.dp.hits + c.dp.misses);
    assert_eq!(c.cache.emc_hits + c.cache.tss_hits, 3);
    assert_eq!(c.cache.misses, c.dp.misses);
    assert!(
        !link.send(DpCommand::Remove { id: FlowId(9) }),
        "the thread is gone"
    );
}

#[test]
fn counters_since_a_snapshot_are_the_differences_and_never_wrap() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    insert(&mut dp, 1, 53, out(2));
    send(&mut dp, 53, 1);
    send(&mut dp, 54, 2);
    let base = dp.counters();
    for t in 3..8 {
        send(&mut dp, 53, t);
    }
    let d = dp.counters().since(&base);
    assert_eq!((d.dp.packets, d.dp.hits, d.dp.misses), (5, 5, 0));
    assert_eq!(d.cache.emc_hits + d.cache.tss_hits, 5);
    assert_eq!(d.dp.commands, 0);
    // Against a later snapshot (counters cleared, then the order mixed
    // up), nothing below zero.
    let back = base.since(&dp.counters());
    assert_eq!(back, DatapathCounters::default());
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    Remove(u8),
    Modify(u8),
    Send(u8),
    Report,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..8).prop_map(Op::Insert),
        1 => (0u8..8).prop_map(Op::Remove),
        1 => (0u8..8).prop_map(Op::Modify),
        6 => (0u8..10).prop_map(Op::Send),
        1 => Just(Op::Report),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every hit is reported exactly once, through Stats or Removed, and
    /// the packets a flow reports are those sent while it was installed
    /// (flows are keyed by id = tp_dst; ids 8 and 9 are never installed).
    #[test]
    fn every_hit_is_reported_exactly_once(ops in prop::collection::vec(op(), 1..200)) {
        let mut dp = Datapath::new(CacheConfig { emc_insert_inv_prob: 2, ..CacheConfig::default() }, 3);
        let mut installed = [false; 10];
        let mut sent = [0u64; 10];
        let mut reported = [0u64; 10];
        let add = |ev: Vec<DpEvent>, reported: &mut [u64; 10]| {
            for e in ev {
                match e {
                    DpEvent::Stats { id, delta } | DpEvent::Removed { id, delta } => {
                        reported[id.0 as usize] += delta.packets;
                    }
                    DpEvent::Refused { .. } => {}
                }
            }
        };
        for (t, op) in ops.iter().enumerate() {
            match *op {
                Op::Insert(i) => {
                    let was = installed[i as usize];
                    insert(&mut dp, u64::from(i), u16::from(i), out(u32::from(i)));
                    installed[i as usize] = true;
                    if was {
                        let ev = report(&mut dp);
                        let refused = ev.iter().any(|e| matches!(e, DpEvent::Refused { id, .. } if id.0 == u64::from(i)));
                        prop_assert!(refused, "a second insert of {i} is refused");
                        add(ev, &mut reported);
                    }
                }
                Op::Remove(i) => {
                    dp.apply(DpCommand::Remove { id: FlowId(u64::from(i)) });
                    installed[i as usize] = false;
                }
                Op::Modify(i) => dp.apply(DpCommand::Modify { id: FlowId(u64::from(i)), actions: out(99) }),
                Op::Send(i) => {
                    let (r, _) = send(&mut dp, u16::from(i), t as u64);
                    prop_assert_eq!(matches!(r, Lookup::Hit(_)), installed[i as usize]);
                    if installed[i as usize] {
                        sent[i as usize] += 1;
                    }
                }
                Op::Report => add(report(&mut dp), &mut reported),
            }
        }
        for i in 0..10u64 {
            dp.apply(DpCommand::Remove { id: FlowId(i) });
        }
        add(report(&mut dp), &mut reported);
        prop_assert_eq!(reported, sent);
        prop_assert!(dp.is_empty());
    }
}

/// A stage-2 megaflow: `staged` plus `ct_state` exact.
fn tracked(dport: u16, recirc_id: u64, ct_state: u8) -> Box<Match> {
    let m = staged(dport, recirc_id, None);
    let mut key = *m.key();
    key.set_ct_state(u64::from(ct_state));
    Box::new(Match::new(&key, &m.mask().with_exact(Field::CtState)))
}

/// A datapath with a tracker, and a committing `ct(zone=3)`.
fn with_tracker() -> (Arc<conntrack::Tracker>, Datapath, conntrack::CtSpec) {
    let tracker = Arc::new(conntrack::Tracker::new(conntrack::Config::default()));
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    dp.set_tracker(Arc::clone(&tracker));
    let spec = conntrack::CtSpec {
        zone: 3,
        commit: true,
        ..Default::default()
    };
    (tracker, dp, spec)
}

#[test]
fn ct_then_recirc_gives_the_next_stage_the_connection_state() {
    use conntrack::state::{EST, NEW, RPL, TRK};
    let (tracker, mut dp, spec) = with_tracker();
    let insert = |dp: &mut Datapath, id: u64, m: Box<Match>, a: Vec<DpAction>| {
        dp.apply(DpCommand::Insert {
            id: FlowId(id),
            matched: m,
            actions: Actions::new(a),
        })
    };
    insert(
        &mut dp,
        1,
        staged(53, 0, None),
        vec![DpAction::Ct(Box::new(spec)), DpAction::Recirc(4)],
    );
    // New packets go to port 2, established ones to port 3.
    insert(
        &mut dp,
        2,
        tracked(53, 4, TRK | NEW),
        vec![DpAction::Output(PortNo(2))],
    );
    insert(
        &mut dp,
        3,
        tracked(53, 4, TRK | EST | RPL),
        vec![DpAction::Output(PortNo(3))],
    );
    let (r, sink) = send(&mut dp, 53, 1_000_000);
    assert!(matches!(r, Lookup::Hit(_)), "{r:?}");
    assert_eq!(sink.outputs[0].0, PortNo(2));
    assert_eq!(tracker.len(), 1, "committed");
    // The reply direction: the same flows see it established.
    let mut reply = FrameSpec::ipv4(0xc612_0002, 0xc612_0001, L4::udp(53, 1000)).build();
    let mut sink = CollectSink::new();
    let r = dp.process(Timestamp(2_000_000), PortNo(1), &mut reply, &mut sink);
    // The reply has tp_dst 1000: no stage-0 flow, a miss whose key is a
    // stage-0 key.
    assert!(matches!(r, Lookup::Miss));
    assert_eq!(dp.key().ct_state(), 0);
    insert(
        &mut dp,
        4,
        staged(1000, 0, None),
        vec![DpAction::Ct(Box::new(spec)), DpAction::Recirc(4)],
    );
    let r = dp.process(Timestamp(3_000_000), PortNo(1), &mut reply, &mut sink);
    // Stage 4 has no flow for tp_dst 1000: the miss carries what ct() said.
    assert!(matches!(r, Lookup::Miss));
    assert_eq!(dp.key().recirc_id(), 4);
    assert_eq!(dp.key().ct_state(), u64::from(TRK | EST | RPL));
    assert_eq!(dp.key().ct_zone(), 3);
    assert_eq!(dp.key().ct_tp_dst(), 53, "the original direction's tuple");
    assert_eq!(dp.key().ct_nw_src(), 0xc612_0001);
    // A ct_clear in between zeroes the state.
    insert(
        &mut dp,
        5,
        staged(54, 0, None),
        vec![
            DpAction::Ct(Box::new(spec)),
            DpAction::CtClear,
            DpAction::Recirc(6),
        ],
    );
    let (r, _) = send(&mut dp, 54, 4_000_000);
    assert!(matches!(r, Lookup::Miss));
    assert_eq!(
        (
            dp.key().recirc_id(),
            dp.key().ct_state(),
            dp.key().ct_zone()
        ),
        (6, 0, 0)
    );
}

/// `in_port=1,udp` at stage `recirc_id`, with `ct_state` exact when given
/// and `reg0` when given.
fn udp_stage(recirc_id: u64, ct_state: Option<u8>, reg0: Option<u64>) -> Box<Match> {
    let mut key = FlowKey::ZERO;
    extract_into(1, &frame(53), &mut key);
    key.set_recirc_id(recirc_id);
    let mut mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::RecircId);
    if let Some(st) = ct_state {
        key.set_ct_state(u64::from(st));
        mask = mask.with_exact(Field::CtState);
    }
    if let Some(r) = reg0 {
        key.set_reg0(r);
        mask = mask.with_exact(Field::Reg0);
    }
    let mut m = FlowKey::ZERO;
    for (w, (k, mk)) in m
        .words_mut()
        .iter_mut()
        .zip(key.words().iter().zip(mask.words()))
    {
        *w = k & mk;
    }
    Box::new(Match::new(&m, &mask))
}

#[test]
fn the_stage_after_ct_is_found_from_its_hint_and_the_hint_is_checked() {
    use conntrack::state::{EST, NEW, RPL, TRK};
    let (tracker, mut dp, spec) = with_tracker();
    let ct = || vec![DpAction::Ct(Box::new(spec)), DpAction::Recirc(4)];
    insert_m(&mut dp, 1, udp_stage(0, None, None), ct());
    insert_m(
        &mut dp,
        2,
        udp_stage(4, Some(TRK | NEW), None),
        vec![DpAction::Output(PortNo(2))],
    );
    insert_m(
        &mut dp,
        3,
        udp_stage(4, Some(TRK | EST | RPL), None),
        vec![DpAction::Output(PortNo(3))],
    );
    let query = frame(53);
    let reply = FrameSpec::ipv4(0xc612_0002, 0xc612_0001, L4::udp(53, 1000)).build();
    let mut t = 1_000_000;
    let mut run = |dp: &mut Datapath, f: &[u8]| {
        let mut sink = CollectSink::new();
        t += 1_000;
        let r = dp.process(Timestamp(t), PortNo(1), &mut f.to_vec(), &mut sink);
        (r, sink.outputs.first().map(|o| o.0 .0))
    };
    let hinted = |dp: &Datapath| dp.cache().counters().hinted_hits;
    // First packet of each state: searched; the next ones: from the hint.
    assert_eq!(run(&mut dp, &query).1, Some(2));
    assert_eq!(hinted(&dp), 0);
    assert_eq!(run(&mut dp, &query).1, Some(2), "still new: no reply yet");
    assert_eq!(hinted(&dp), 1);
    // The reply is in another state: another successor, searched first.
    assert_eq!(run(&mut dp, &reply).1, Some(3));
    assert_eq!(hinted(&dp), 1);
    assert_eq!(run(&mut dp, &reply).1, Some(3));
    assert_eq!(hinted(&dp), 2);
    assert_eq!(tracker.len(), 1, "one connection, both ways");
    // Both stages counted every packet, hinted or not.
    let st = dp.stats();
    assert_eq!((st.packets, st.hits, st.recirculations), (4, 8, 4));
    // A flow replaced in place: the next packet runs the new one.
    dp.apply(DpCommand::Remove { id: FlowId(3) });
    insert_m(
        &mut dp,
        6,
        udp_stage(4, Some(TRK | EST | RPL), None),
        vec![DpAction::Output(PortNo(7))],
    );
    assert_eq!(run(&mut dp, &reply).1, Some(7));
    // A hint to a flow that no longer matches the packet is not taken:
    // the stage misses, with the tracked key for the slow path.
    dp.apply(DpCommand::Remove { id: FlowId(6) });
    insert_m(
        &mut dp,
        7,
        udp_stage(4, Some(TRK | EST | RPL), Some(5)),
        vec![DpAction::Output(PortNo(8))],
    );
    let (r, out) = run(&mut dp, &reply);
    assert!(matches!(r, Lookup::Miss), "{r:?}");
    assert_eq!(out, None);
    assert_eq!(dp.key().ct_state(), u64::from(TRK | EST | RPL));
    assert_eq!(dp.key().recirc_id(), 4);
    // Packets that share the hint (same first flow, same state) but not
    // the next flow: each gets its own.
    dp.apply(DpCommand::Remove { id: FlowId(2) });
    for (id, port, out) in [(9, 53, 2), (10, 99, 9)] {
        let mut m = *udp_stage(4, Some(TRK | NEW), None);
        let mut key = *m.key();
        key.set_tp_dst(port);
        let mask = m.mask().with_exact(Field::TpDst);
        m = Match::new(&key, &mask);
        insert_m(
            &mut dp,
            id,
            Box::new(m),
            vec![DpAction::Output(PortNo(out))],
        );
    }
    let new_conn =
        |sport, dport| FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(sport, dport)).build();
    assert_eq!(run(&mut dp, &new_conn(2000, 53)).1, Some(2));
    let before = hinted(&dp);
    assert_eq!(
        run(&mut dp, &new_conn(2001, 99)).1,
        Some(9),
        "the hint's flow does not match"
    );
    assert_eq!(hinted(&dp), before);
    assert_eq!(run(&mut dp, &new_conn(2002, 99)).1, Some(9));
    assert_eq!(
        hinted(&dp),
        before + 1,
        "the hint now names the port-99 flow"
    );
}

#[test]
fn without_a_tracker_ct_is_skipped() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    dp.apply(DpCommand::Insert {
        id: FlowId(1),
        matched: flow(53),
        actions: Actions::new(vec![
            DpAction::Ct(Box::default()),
            DpAction::Output(PortNo(2)),
        ]),
    });
    let (r, sink) = send(&mut dp, 53, 1);
    let Lookup::Hit(o) = r else { panic!("{r:?}") };
    assert_eq!((o.skipped, sink.outputs.len()), (1, 1));
    assert_eq!(
        format!(
            "{}",
            DpAction::Ct(Box::new(conntrack::CtSpec {
                zone: 2,
                commit: true,
                ..Default::default()
            }))
        ),
        "ct(commit,zone=2)"
    );
}

#[test]
fn flows_with_equal_actions_run_one_shared_list_and_lists_no_flow_runs_go() {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    // Each insert brings its own list, equal in content.
    for i in 0..50u16 {
        insert(&mut dp, u64::from(i), 1000 + i, out(2));
    }
    insert(&mut dp, 99, 2000, out(3));
    let (_, a) = dp.flow(FlowId(0)).expect("flow 0");
    // The 50 flows' cache entries and the datapath's own copy: one list.
    assert!(a.holders() > 50, "{} holders", a.holders());
    let (_, b) = dp.flow(FlowId(99)).expect("flow 99");
    assert!(b.holders() < 5, "a list of its own: {}", b.holders());
    // Each packet still runs its own flow's list.
    assert_eq!(send(&mut dp, 1007, 1).1.outputs[0].0, PortNo(2));
    assert_eq!(send(&mut dp, 2000, 2).1.outputs[0].0, PortNo(3));
    // A modify to a list another flow runs shares that one too.
    dp.apply(DpCommand::Modify {
        id: FlowId(99),
        actions: out(2),
    });
    assert!(dp.flow(FlowId(99)).expect("flow 99").1.holders() > 51);
    assert_eq!(send(&mut dp, 2000, 3).1.outputs[0].0, PortNo(2));
    // Flows come and go, each with a list of its own, sent (as the slow
    // path sends a flow not exact on in_port) to a second datapath too,
    // the slow path keeping its own handle on each: the lists held stay
    // bounded by the flows that run them, in both.
    drop((a, b));
    let mut dp2 = Datapath::new(CacheConfig::default(), 2);
    let mut kept = Vec::new();
    for i in 0..2000u64 {
        let id = FlowId(1000 + i);
        let actions = out(10 + i as u32);
        kept.push(actions.clone());
        let insert = DpCommand::Insert {
            id,
            matched: flow(3000),
            actions,
        };
        for d in [&mut dp, &mut dp2] {
            d.apply(insert.clone());
            d.apply(DpCommand::Remove { id });
        }
    }
    for d in [&dp, &dp2] {
        let n = d.interned.lists.len();
        assert!(n <= 2 * d.len() + 65, "{n} lists for {} flows", d.len());
    }
    // Sharing goes on after the sweeps.
    insert(&mut dp, 5000, 4000, out(2));
    assert!(dp.flow(FlowId(5000)).expect("flow").1.holders() > 51);
    assert_eq!(send(&mut dp, 1007, 4).1.outputs[0].0, PortNo(2));
}

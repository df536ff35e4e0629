//! Fair shares: the bookkeeping, the decision, and the pipeline under a
//! flooding port.

use megaflow::actions::CollectSink;
use megaflow::frame::{FrameSpec, L4};
use megaflow::{PortNo, SplitMix64, Timestamp};
use proptest::prelude::*;

use super::{room, PortShares, Room};
use crate::bridge::Bridge;
use crate::pipeline::{OffloadMode, OffloadPolicy, Pipeline, PipelineConfig, RevalidatorConfig};
use crate::rule::FlowModCommand;
use crate::text::parse_flow;

#[test]
fn shares_count_sample_and_forget() {
    let mut s = PortShares::default();
    for i in 0..20 {
        s.add(PortNo(1), i);
    }
    for i in 20..25 {
        s.add(PortNo(2), i);
    }
    assert_eq!(
        (s.count(PortNo(1)), s.count(PortNo(2)), s.ports()),
        (20, 5, 2)
    );
    assert_eq!(s.largest(), Some((PortNo(1), 20)));
    let mut rng = SplitMix64::new(7);
    let sample = s.sample(PortNo(1), &mut rng);
    assert_eq!(sample.len(), super::SAMPLE);
    assert!(sample.iter().all(|&i| i < 20), "{sample:?}");
    assert_eq!(s.sample(PortNo(2), &mut rng).len(), 5);
    for i in 20..25 {
        s.remove(PortNo(2), i);
    }
    assert_eq!((s.count(PortNo(2)), s.ports()), (0, 1));
    // Removing what is not there changes nothing.
    s.remove(PortNo(1), 99);
    s.remove(PortNo(3), 0);
    assert_eq!(s.count(PortNo(1)), 20);
}

#[test]
fn room_follows_quota_then_fair_share() {
    let mut s = PortShares::default();
    for i in 0..8 {
        s.add(PortNo(1), i);
    }
    // Room left: anyone may install, up to the quota.
    assert_eq!(room(&s, PortNo(1), 8, 10, 0), Room::Free);
    assert_eq!(room(&s, PortNo(1), 8, 10, 8), Room::PortLimit);
    // Full: the flooder keeps what it has, a newcomer takes its room.
    for i in 8..10 {
        s.add(PortNo(1), i);
    }
    assert_eq!(room(&s, PortNo(1), 10, 10, 0), Room::FlowLimit);
    assert_eq!(room(&s, PortNo(2), 10, 10, 0), Room::TakeFrom(PortNo(1)));
    // Two ports with their fair shares each: nobody takes from anybody.
    let mut even = PortShares::default();
    for i in 0..10 {
        even.add(PortNo(1 + i % 2), i);
    }
    assert_eq!(room(&even, PortNo(1), 10, 10, 0), Room::FlowLimit);
    assert_eq!(room(&even, PortNo(3), 10, 10, 0), Room::TakeFrom(PortNo(1)));
}

proptest! {
    /// Whatever the order of adds and removes, the counts are the flows
    /// added and not removed, and the largest port is one with the most.
    #[test]
    fn shares_stay_exact(ops in proptest::collection::vec((0u32..4, 0u32..64, any::<bool>()), 0..300)) {
        let mut s = PortShares::default();
        let mut model: std::collections::HashMap<u32, (u32, bool)> = Default::default();
        for (port, idx, add) in ops {
            match (add, model.get(&idx).copied()) {
                (true, None) => {
                    s.add(PortNo(port), idx);
                    model.insert(idx, (port, true));
                }
                (false, Some((p, _))) => {
                    s.remove(PortNo(p), idx);
                    model.remove(&idx);
                }
                _ => {}
            }
        }
        for port in 0..4 {
            let n = model.values().filter(|(p, _)| *p == port).count();
            prop_assert_eq!(s.count(PortNo(port)), n);
        }
        let max = (0..4).map(|p| s.count(PortNo(p))).max().unwrap_or(0);
        match s.largest() {
            Some((_, n)) => prop_assert_eq!(n, max),
            None => prop_assert_eq!(max, 0),
        }
        prop_assert_eq!(s.ports(), (0..4).filter(|&p| s.count(PortNo(p)) > 0).count());
    }
}

// ----------------------------------------------------------------------
// The pipeline.

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_000 * SEC;

/// One megaflow per UDP source port, from any port to port 4.
fn pipeline(flow_limit: usize, port_flow_limit: usize) -> Pipeline<crate::pipeline::tests::Model> {
    let mut b = Bridge::with_ports(1..=4);
    // A rule per UDP source port: every megaflow is exact on it.
    for sport in 1024..1024 + 6_000 {
        let f = format!("priority=10,udp,tp_src={sport},actions=output:4");
        let fm = parse_flow(&f, FlowModCommand::Add).expect("flow");
        b.tables.apply(&fm, Timestamp(T0)).expect("applies");
    }
    let cfg = PipelineConfig {
        offload: OffloadPolicy {
            mode: OffloadMode::Off,
            ..OffloadPolicy::default()
        },
        revalidator: RevalidatorConfig {
            flow_limit,
            port_flow_limit,
            dynamic_limit: false,
            ..RevalidatorConfig::default()
        },
        ..PipelineConfig::default()
    };
    Pipeline::new(b, Default::default(), cfg)
}

/// A new 5-tuple from `port` at `ms`: true if it reached port 4.
fn new_flow(p: &mut Pipeline<crate::pipeline::tests::Model>, port: u32, n: u32, ms: u64) -> bool {
    let mut f = FrameSpec::ipv4(
        0xc612_0000 | port,
        0xc612_0004,
        L4::udp(n as u16 + 1024, 5000),
    )
    .payload(18)
    .build();
    let mut sink = CollectSink::new();
    p.process(
        Timestamp(T0 + ms * 1_000_000),
        PortNo(port),
        &mut f,
        &mut sink,
    );
    sink.outputs.iter().any(|(out, _)| *out == PortNo(4))
}

#[test]
fn a_flooding_port_stops_at_its_quota_and_still_forwards() {
    let mut p = pipeline(1_000, 250);
    for n in 0..2_000 {
        assert!(new_flow(&mut p, 1, n, 1), "flood packet {n} forwarded");
    }
    assert_eq!(p.port_flows(), vec![(PortNo(1), 250)]);
    assert_eq!(p.stats().port_limit_hits, 1_750);
    // Another port's new flows are all cached.
    for n in 0..500 {
        assert!(new_flow(&mut p, 2, n, 2));
    }
    assert_eq!(p.port_flows(), vec![(PortNo(1), 250), (PortNo(2), 250)]);
    assert_eq!(p.stats().megaflows_created, 500);
}

#[test]
fn with_the_table_full_a_newcomer_takes_the_flooders_stalest_flows() {
    // No quota: the flooder fills the table.
    let mut p = pipeline(1_000, 0);
    for n in 0..1_000 {
        new_flow(&mut p, 1, n, u64::from(n));
    }
    assert_eq!(p.len(), 1_000);
    assert!(new_flow(&mut p, 1, 5_000, 2_000));
    assert_eq!(
        p.stats().flow_limit_hits,
        1,
        "the flooder gets nothing more"
    );
    // Port 2 gets every new flow up to its fair share (half of the table),
    // each taking an old flood flow's room; then it is refused too.
    for n in 0..500 {
        new_flow(&mut p, 2, n, 3_000);
    }
    assert_eq!(p.stats().evicted_fair, 500);
    assert_eq!(p.port_flows(), vec![(PortNo(1), 500), (PortNo(2), 500)]);
    assert_eq!(p.len(), 1_000);
    new_flow(&mut p, 2, 600, 3_000);
    assert_eq!(p.stats().flow_limit_hits, 2);
    // What was evicted is old flood flows (the stalest of 8 sampled): the
    // flood flows left are mostly the newer half. Random eviction would
    // leave a mean of 500 ms.
    let left: Vec<u64> = p
        .dump()
        .iter()
        .filter(|d| d.matched.key().in_port() == 1)
        .filter_map(|d| d.stats.used.0.checked_sub(T0))
        .collect();
    let mean_ms = left.iter().sum::<u64>() / left.len() as u64 / 1_000_000;
    assert!(
        mean_ms > 650,
        "flood flows left were used at {mean_ms} ms on average"
    );
    // A third port gets its share (a third) the same way.
    for n in 0..400 {
        new_flow(&mut p, 3, n, 4_000);
    }
    let counts: Vec<usize> = p.port_flows().iter().map(|(_, n)| *n).collect();
    assert_eq!(counts.iter().sum::<usize>(), 1_000);
    assert_eq!(
        p.port_flows()
            .iter()
            .find(|(q, _)| *q == PortNo(3))
            .map(|x| x.1),
        Some(333)
    );
}

//! The pipeline against a model offloader: a device that installs what it
//! is given, counts what the test says hardware forwarded, and fails on
//! request. The end-to-end tests with the `sim` eSwitch are in the `tests`
//! crate (tests/tests/pipeline_*.rs).

use std::collections::HashMap;

use megaflow::actions::CollectSink;
use megaflow::frame::{FrameSpec, L4};
use megaflow::offload::{HwStats, MeterBand, NotOffloaded};
use megaflow::MeterId;

use super::*;
use crate::rule::FlowModCommand;
use crate::text::parse_flow;

#[derive(Default)]
pub(super) struct Model {
    pub(super) rules: HashMap<HwId, (Match, Actions, HwStats)>,
    /// Final counters of removed rules, reported by the next poll.
    removed: Vec<(HwId, HwStats)>,
    next: u64,
    fail: Vec<NotOffloaded>,
    installs: usize,
    replaces: usize,
}

impl Model {
    /// Hardware forwarded `n` packets of `len` bytes for the rule matching
    /// `key`; false if no rule matches.
    fn forward(&mut self, key: &FlowKey, n: u64, len: u64) -> bool {
        match self.rules.values_mut().find(|(m, _, _)| m.matches(key)) {
            Some((_, _, s)) => {
                s.packets += n;
                s.bytes += n * len;
                true
            }
            None => false,
        }
    }
}

impl FlowOffload for Model {
    fn install(&mut self, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        self.installs += 1;
        if let Some(e) = self.fail.pop() {
            return Err(e);
        }
        if actions.iter().any(|a| matches!(a, DpAction::Userspace(_))) {
            return Err(NotOffloaded::Action("controller".into()));
        }
        self.next += 1;
        let id = HwId(self.next);
        self.rules
            .insert(id, (*m, actions.clone(), HwStats::default()));
        Ok(id)
    }

    fn replace(&mut self, old: HwId, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        self.replaces += 1;
        let new = self.install(m, actions)?;
        self.remove(old);
        Ok(new)
    }

    fn remove(&mut self, id: HwId) {
        if let Some((_, _, s)) = self.rules.remove(&id) {
            self.removed.push((id, s));
        }
    }

    fn poll(&mut self, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        out.extend(self.rules.iter().map(|(id, (_, _, s))| (*id, *s)));
        out.append(&mut self.removed);
        Ok(())
    }

    fn set_meter(&mut self, _: MeterId, _: Option<MeterBand>) -> Result<(), NotOffloaded> {
        Ok(())
    }
}

const T0: u64 = 1_000 * SEC;
const MS: u64 = 1_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * MS)
}

pub(super) fn bridge(flows: &[&str]) -> Bridge {
    let mut b = Bridge::with_ports(1..=4);
    for f in flows {
        let fm = parse_flow(f, FlowModCommand::Add).expect("flow parses");
        b.tables.apply(&fm, Timestamp(T0)).expect("flow applies");
    }
    b
}

fn pipeline(flows: &[&str], policy: OffloadPolicy) -> Pipeline<Model> {
    let cfg = PipelineConfig {
        offload: policy,
        ..PipelineConfig::default()
    };
    Pipeline::new(bridge(flows), Model::default(), cfg)
}

const BY_DST: [&str; 4] = [
    "priority=10,ip,nw_dst=198.18.0.2,actions=output:2",
    "priority=10,ip,nw_dst=198.18.0.3,actions=output:3",
    "priority=10,ip,nw_dst=198.18.0.4,actions=output:4",
    "priority=0,actions=drop",
];

fn frame(sport: u16, dst: u8) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0000 | u32::from(dst),
        L4::udp(sport, 53),
    )
    .payload(18)
    .build()
}

/// Sends one packet of flow (sport, dst) from port 1 at `ms`, through
/// the model hardware first (as the eSwitch would): true = hardware
/// forwarded it.
fn send(p: &mut Pipeline<Model>, sport: u16, dst: u8, ms: u64) -> bool {
    let mut f = frame(sport, dst);
    let key = megaflow::extract(1, &f);
    if p.offloader_mut().forward(&key, 1, f.len() as u64) {
        return true;
    }
    let mut sink = CollectSink::new();
    p.process(at(ms), PortNo(1), &mut f, &mut sink);
    false
}

fn key(sport: u16, dst: u8) -> FlowKey {
    megaflow::extract(1, &frame(sport, dst))
}

fn hot() -> OffloadPolicy {
    OffloadPolicy::default()
}

#[test]
fn a_flow_is_offloaded_on_its_third_packet_within_a_second() {
    let mut p = pipeline(&BY_DST, hot());
    assert!(!send(&mut p, 1000, 2, 0));
    assert!(!send(&mut p, 1000, 2, 100));
    assert_eq!(
        p.find(&key(1000, 2)).expect("flow").state,
        FlowState::Installed
    );
    assert!(
        !send(&mut p, 1000, 2, 200),
        "the third packet still in software"
    );
    let d = p.find(&key(1000, 2)).expect("flow");
    assert_eq!(d.state, FlowState::Offloaded);
    assert_eq!(d.offloaded(), "yes");
    assert!(send(&mut p, 1000, 2, 300), "the fourth in hardware");
    assert_eq!(p.stats().upcalls, 1);
    assert_eq!(p.stats().offloaded, 1);
    assert_eq!(p.stats().illegal_transitions, 0);
}

#[test]
fn packets_spread_wider_than_the_window_are_not_hot() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..6 {
        send(&mut p, 1000, 2, i * 700);
    }
    let d = p.find(&key(1000, 2)).expect("flow");
    assert_eq!(d.state, FlowState::Installed, "2 packets a window at most");
    assert_eq!(d.offloaded(), "no (not hot)");
}

#[test]
fn offload_all_and_off() {
    let mut all = pipeline(
        &BY_DST,
        OffloadPolicy {
            mode: OffloadMode::All,
            ..hot()
        },
    );
    assert!(!send(&mut all, 1, 2, 0));
    assert!(send(&mut all, 1, 2, 1), "offloaded after one packet");
    let mut off = pipeline(
        &BY_DST,
        OffloadPolicy {
            mode: OffloadMode::Off,
            ..hot()
        },
    );
    for i in 0..10 {
        assert!(!send(&mut off, 1, 2, i));
    }
    assert_eq!(off.offloader().installs, 0);
}

#[test]
fn hardware_counts_fold_into_megaflows_and_openflow_rules() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 7, 2, i);
    }
    for i in 3..53 {
        assert!(send(&mut p, 7, 2, i));
    }
    let len = frame(7, 2).len() as u64;
    p.revalidate(at(100));
    let d = p.find(&key(7, 2)).expect("flow");
    assert_eq!(d.stats.packets, 53, "3 in software + 50 in hardware");
    assert_eq!(d.stats.bytes, 53 * len);
    assert_eq!(p.stats().hw_packets, 50);
    let br = p.bridge();
    let rule = br
        .tables
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r))
        .find(|r| r.spec.priority.0 == 10 && r.packets > 0)
        .expect("credited rule");
    assert_eq!(rule.packets, 53);
    drop(br);
    // A second pass adds nothing twice.
    p.revalidate(at(200));
    assert_eq!(p.find(&key(7, 2)).expect("flow").stats.packets, 53);
}

#[test]
fn busy_offloaded_flows_live_and_idle_ones_go_within_one_interval() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
        send(&mut p, 2, 3, i);
    }
    assert_eq!(p.offloaded_len(), 2);
    // Flow 1 keeps going in hardware for 30 s; flow 2 stops.
    let mut gone_at = None;
    for pass in 1..=60u64 {
        let ms = pass * 500;
        assert!(send(&mut p, 1, 2, ms), "busy flow stays in hardware");
        p.tick(at(ms));
        if gone_at.is_none() && p.find(&key(2, 3)).is_none() {
            gone_at = Some(ms);
        }
    }
    assert!(p.find(&key(1, 2)).is_some(), "busy offloaded flow not aged");
    let gone = gone_at.expect("idle flow aged");
    assert!((10_000..=10_500).contains(&gone), "aged at {gone} ms");
    assert_eq!(p.offloader().rules.len(), 1, "and gone from hardware");
    assert_eq!(p.stats().aged, 1);
}

#[test]
fn table_change_modifies_or_deletes_exactly_the_affected_flows() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
        send(&mut p, 2, 3, i);
    }
    let old2 = p.find(&key(1, 2)).expect("flow").hw.expect("hw");
    let old3 = p.find(&key(2, 3)).expect("flow").hw.expect("hw");
    // Traffic to .2 now goes to port 4: same match fields, new actions.
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:4",
        FlowModCommand::Modify,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(10)).expect("applies");
    let r = p.revalidate(at(20));
    assert_eq!((r.modified, r.deleted), (1, 0));
    let d2 = p.find(&key(1, 2)).expect("kept");
    assert_eq!(d2.actions.to_string(), "output:4");
    assert_ne!(d2.hw, Some(old2), "replaced in hardware");
    assert_eq!(d2.state, FlowState::Offloaded);
    assert_eq!(p.find(&key(2, 3)).expect("untouched").hw, Some(old3));
    assert_eq!(p.offloader().replaces, 1);
    // A rule that needs the UDP source port: the flows' masks are too wide.
    let fm = parse_flow(
        "priority=20,udp,nw_dst=198.18.0.3,tp_src=2,actions=output:1",
        FlowModCommand::Add,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(30)).expect("applies");
    let r = p.revalidate(at(40));
    assert!(r.deleted >= 1, "{r:?}");
    assert!(p.find(&key(2, 3)).is_none(), "unsound flow deleted");
    assert!(!p.offloader().rules.contains_key(&old3));
    assert_eq!(p.stats().illegal_transitions, 0);
}

#[test]
fn failed_offload_stays_in_software_with_its_reason_and_is_retried() {
    let mut p = pipeline(&BY_DST, hot());
    p.offloader_mut().fail.push(NotOffloaded::Backend {
        errno: "ENOSPC",
        op: "rule_create",
    });
    for i in 0..3 {
        send(&mut p, 1, 2, i);
    }
    let d = p.find(&key(1, 2)).expect("flow");
    assert_eq!(d.state, FlowState::SoftwareOnly);
    assert_eq!(d.offloaded(), "no (backend error ENOSPC on rule_create)");
    assert_eq!(
        p.stats()
            .offload_failures
            .get("backend error ENOSPC on rule_create"),
        Some(&1)
    );
    // Before the retry time: still software, no new attempt.
    for i in 3..10 {
        assert!(!send(&mut p, 1, 2, i * 10));
    }
    assert_eq!(p.offloader().installs, 1);
    // After it: hot again → offloaded.
    for i in 0..3 {
        send(&mut p, 1, 2, 1_200 + i);
    }
    assert_eq!(
        p.find(&key(1, 2)).expect("flow").state,
        FlowState::Offloaded
    );
    assert_eq!(p.offloader().installs, 2);
    // Every packet counted once.
    assert!(send(&mut p, 1, 2, 1_300));
    p.revalidate(at(1_400));
    assert_eq!(p.find(&key(1, 2)).expect("flow").stats.packets, 14);
}

#[test]
fn flows_the_device_cannot_take_are_not_retried() {
    let mut p = pipeline(&["priority=1,actions=controller"], hot());
    for i in 0..20 {
        send(&mut p, 1, 2, i * 100);
    }
    let d = p.find(&key(1, 2)).expect("flow");
    assert_eq!(d.offloaded(), "no (action controller)");
    assert_eq!(p.offloader().installs, 1);
}

#[test]
fn at_the_budget_the_least_recently_hit_flow_is_demoted() {
    let mut p = pipeline(
        &BY_DST,
        OffloadPolicy {
            budget: Some(2),
            ..hot()
        },
    );
    // One megaflow per destination (the table matches nw_dst only).
    for dst in [2, 3] {
        for i in 0..3 {
            send(&mut p, 1, dst, i);
        }
    }
    // The flow to .2 is hit in hardware, the one to .3 is not: .3 is
    // least recent.
    assert!(send(&mut p, 1, 2, 10));
    p.revalidate(at(20));
    for i in 0..3 {
        send(&mut p, 1, 4, 30 + i);
    }
    assert_eq!(p.offloaded_len(), 2);
    assert_eq!(p.stats().demoted, 1);
    let d2 = p.find(&key(1, 3)).expect("kept in software");
    assert_eq!(d2.state, FlowState::SoftwareOnly);
    assert!(d2.offloaded().contains("demoted"), "{}", d2.offloaded());
    assert_eq!(
        p.find(&key(1, 2)).expect("flow").state,
        FlowState::Offloaded
    );
    assert_eq!(
        p.find(&key(1, 4)).expect("flow").state,
        FlowState::Offloaded
    );
}

#[test]
fn counts_of_a_removed_rule_are_not_lost() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
    }
    for i in 0..5 {
        assert!(send(&mut p, 1, 2, 10 + i));
    }
    // Port 2 goes away before any poll: the flow is flushed...
    assert_eq!(p.flush_port(PortNo(2)), 1);
    assert!(p.is_empty());
    // ...and the next poll still credits its 5 hardware packets.
    p.revalidate(at(100));
    let credited: u64 = p
        .bridge()
        .tables
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r.packets))
        .sum();
    assert_eq!(credited, 8, "3 software + 5 hardware packets");
}

#[test]
fn openflow_idle_timeouts_expire_rules_and_their_megaflows() {
    let mut p = pipeline(
        &[
            "priority=10,ip,nw_dst=198.18.0.2,idle_timeout=2,actions=output:2",
            "priority=0,actions=drop",
        ],
        hot(),
    );
    send(&mut p, 1, 2, 0);
    p.revalidate(at(1_000));
    assert_eq!(p.take_expired().len(), 0);
    // 3 s without traffic: the rule expires; its megaflow now translates
    // to drop and is modified.
    let r = p.revalidate(at(3_100));
    assert_eq!(r.rules_expired, 1);
    let gone = p.take_expired();
    assert_eq!(gone.len(), 1);
    let d = p.find(&key(1, 2)).expect("flow still there, now dropping");
    assert!(d.actions.is_empty(), "{}", d.actions);
}

#[test]
fn expired_rules_nobody_takes_stay_bounded_and_counted() {
    let n = EXPIRED_KEPT + 5;
    let rules: Vec<String> = (0..n)
        .map(|i| format!("priority=10,tcp,tp_dst={i},idle_timeout=1,actions=drop"))
        .collect();
    let refs: Vec<&str> = rules.iter().map(String::as_str).collect();
    let mut p = pipeline(&refs, hot());
    p.revalidate(at(2_000));
    let st = p.stats();
    assert_eq!(st.rules_expired, n as u64);
    assert_eq!(st.expired_unreported, 5);
    let kept = p.take_expired();
    assert_eq!(kept.len(), EXPIRED_KEPT, "the newest are kept");
    assert!(p.take_expired().is_empty());
}

#[test]
fn software_meter_caps_a_flow() {
    let mut p = pipeline(
        &["priority=1,ip,actions=meter:1,output:2"],
        OffloadPolicy {
            mode: OffloadMode::Off,
            ..hot()
        },
    );
    // 80 kbit/s = 10,000 B/s; burst 8 kbit = 1,000 B.
    p.set_meter(
        crate::meter::parse_meter("meter=1,kbps,burst,band=type=drop,rate=80,burst_size=8")
            .expect("meter"),
    );
    let f = frame(1, 2);
    let mut sink = CollectSink::new();
    // 10 s of 1,000 packets a second.
    for i in 0..10_000u64 {
        let mut pkt = f.clone();
        p.process(Timestamp(T0 + i * MS), PortNo(1), &mut pkt, &mut sink);
    }
    let sent: u64 = sink.outputs.iter().map(|(_, b)| b.len() as u64).sum();
    let want = 10_000 * 10 + 1_000;
    assert!(
        sent.abs_diff(want) < 2 * f.len() as u64 + 100,
        "sent {sent}, want ≈{want}"
    );
}

#[test]
fn dump_lines_say_what_is_in_hardware_and_why_not() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
    }
    send(&mut p, 2, 3, 0);
    let lines: Vec<String> = p.dump().iter().map(|d| d.line(at(500))).collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("offloaded:yes") && l.contains("actions:output:2")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("offloaded:no (not hot)") && l.contains("packets:1,")),
        "{lines:?}"
    );
}

/// Packets credited to the OpenFlow rules, all tables.
fn credited(p: &Pipeline<Model>) -> u64 {
    p.bridge()
        .tables
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r.packets))
        .sum()
}

/// A pipeline with two offloaded flows (one busy in hardware), one idle
/// software flow and one flow made stale by a table change.
fn busy_pipeline() -> Pipeline<Model> {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
        send(&mut p, 2, 3, i);
    }
    send(&mut p, 3, 4, 5);
    for i in 0..7 {
        assert!(send(&mut p, 1, 2, 10 + i));
    }
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.3,actions=output:4",
        FlowModCommand::Modify,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(20)).expect("applies");
    p
}

#[test]
fn a_pass_in_steps_of_one_does_what_a_pass_at_once_does() {
    for now in [at(100), at(20_000)] {
        let (mut whole, mut steps) = (busy_pipeline(), busy_pipeline());
        let a = whole.revalidate(now);
        let mut pass = steps.pass_begin(now);
        let mut n = 0;
        while !steps.pass_step(&mut pass, now, 1) {
            n += 1;
        }
        let b = steps.pass_end(pass, now);
        assert!(n >= 4, "one step per counter and per record: {n}");
        assert_eq!((a.flows, a.counters, a.aged), (b.flows, b.counters, b.aged));
        assert_eq!((a.modified, a.deleted), (b.modified, b.deleted));
        assert_eq!(whole.dump(), steps.dump());
        assert_eq!(whole.stats(), steps.stats());
        assert_eq!(credited(&whole), credited(&steps));
        assert_eq!(whole.synced_tables(), steps.synced_tables());
    }
}

#[test]
fn upcalls_and_flow_mods_go_on_between_the_steps_of_a_pass() {
    let mut p = busy_pipeline();
    let begun = p.bridge().generations().tables;
    let mut pass = p.pass_begin(at(100));
    assert!(!p.pass_step(&mut pass, at(100), 1));
    // A handler's upcall and a controller's flow mod between two steps.
    send(&mut p, 9, 2, 101);
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Modify,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(102)).expect("applies");
    while !p.pass_step(&mut pass, at(100), 1) {}
    p.pass_end(pass, at(100));
    assert!(p.find(&key(9, 2)).is_some(), "the upcall's megaflow stays");
    // The pass synced the tables it began with, not the flow mod's.
    assert_eq!(p.synced_tables(), begun);
    assert!(p.synced_tables() < p.bridge().generations().tables);
    p.revalidate(at(200));
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
    for sport in [1, 9] {
        let d = p.find(&key(sport, 2)).expect("kept");
        assert_eq!(d.actions.to_string(), "output:3", "flow {sport}");
    }
    assert_eq!(p.stats().illegal_transitions, 0);
}

#[test]
fn counts_of_a_rule_removed_while_a_pass_is_under_way_are_not_lost() {
    let mut p = pipeline(&BY_DST, hot());
    for i in 0..3 {
        send(&mut p, 1, 2, i);
    }
    for i in 0..5 {
        assert!(send(&mut p, 1, 2, 10 + i));
    }
    // The pass queries the counters (5 hardware packets so far) and has
    // not folded the report yet...
    let mut pass = p.pass_begin(at(100));
    assert!(!p.pass_step(&mut pass, at(100), 1));
    assert_eq!(credited(&p), 0, "queried, not folded");
    // ...two more go through hardware, then the port goes away: the
    // report the pass still holds is not the rule's last.
    for i in 0..2 {
        assert!(send(&mut p, 1, 2, 101 + i));
    }
    assert_eq!(p.flush_port(PortNo(2)), 1);
    while !p.pass_step(&mut pass, at(100), 1) {}
    p.pass_end(pass, at(100));
    // The poll after the removal reports the rule's last counts.
    p.revalidate(at(200));
    assert_eq!(credited(&p), 10, "3 software + 7 hardware packets");
    p.revalidate(at(300));
    assert_eq!(credited(&p), 10, "and nothing twice");
}

#[test]
fn offloads_drain_in_bounded_batches_oldest_first() {
    let mut p = pipeline(
        &BY_DST,
        OffloadPolicy {
            mode: OffloadMode::All,
            ..OffloadPolicy::default()
        },
    );
    let mask = megaflow::Mask::exact_fields(megaflow::Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for sport in 0..10 {
        let m = Match::new(&key(sport, 2), &mask);
        p.install_flow(&m, out.clone(), at(1)).expect("installs");
    }
    assert!(!p.offload_tick_some(at(2), 4));
    assert_eq!(p.offloaded_len(), 4);
    let first: Vec<_> = (0..4)
        .map(|s| p.find(&key(s, 2)).expect("flow").hw)
        .collect();
    assert!(first.iter().all(Option::is_some), "the oldest went first");
    assert!(!p.offload_tick_some(at(3), 4));
    assert!(p.offload_tick_some(at(4), 4));
    assert_eq!(p.offloaded_len(), 10);
}

#[test]
fn a_miss_translated_before_a_flow_mod_is_translated_again_at_install() {
    let mut p = pipeline(&BY_DST, hot());
    let bridge = p.bridge_handle();
    let mut f = frame(5, 2);
    // A handler translates without the slow path...
    let miss = Miss::parse(PortNo(1), &f);
    let t = translate_miss(&bridge, &miss.key, at(1));
    assert_eq!(t.datapath_actions().to_string(), "output:2");
    // ...a controller changes the rule before the handler installs...
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Modify,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(2)).expect("applies");
    let mut sink = CollectSink::new();
    p.upcall_translated(at(3), &miss, &t, &mut f, &mut sink);
    // ...so the megaflow and the packet follow the new rule.
    let d = p.find(&key(5, 2)).expect("installed");
    assert_eq!(d.actions.to_string(), "output:3");
    assert_eq!(p.stats().retranslated, 1);
    // A translation of the tables in force is installed as it is.
    let mut g = frame(6, 3);
    let miss = Miss::parse(PortNo(1), &g);
    let t = translate_miss(&bridge, &miss.key, at(4));
    p.upcall_translated(at(5), &miss, &t, &mut g, &mut sink);
    assert_eq!(p.stats().retranslated, 1);
    assert!(p.find(&key(6, 3)).is_some());
}

#[test]
fn megaflows_of_one_shape_share_one_mask_that_goes_with_the_last() {
    let mut p = pipeline(&BY_DST, hot());
    let five = megaflow::Mask::exact_fields(megaflow::Mask::IPV4_5TUPLE);
    let dst = megaflow::Mask::exact_fields(&[
        megaflow::Field::InPort,
        megaflow::Field::EthType,
        megaflow::Field::Ipv4Dst,
    ]);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for sport in 0..5 {
        p.install_flow(&Match::new(&key(sport, 2), &five), out.clone(), at(1))
            .expect("installs");
    }
    let wide = Match::new(&key(0, 3), &dst);
    let out3 = Actions::new(vec![DpAction::Output(PortNo(3))]);
    p.install_flow(&wide, out3, at(1)).expect("installs");
    assert_eq!(p.reg.masks(), 2, "one copy per shape");
    // Stored compact, dumped whole.
    let dumped: Vec<Match> = p.dump().into_iter().map(|d| d.matched).collect();
    assert!(dumped.contains(&wide));
    assert!(dumped.contains(&Match::new(&key(4, 2), &five)));
    assert_eq!(p.find(&key(9, 3)).map(|d| d.matched), Some(wide));
    // The wide flow goes: its shape with it; the 5-tuples' stays.
    assert_eq!(p.flush_port(PortNo(3)), 1);
    assert_eq!(p.reg.masks(), 1);
    assert_eq!(p.flush_port(PortNo(2)), 5);
    assert!(p.reg.masks() == 0, "no megaflow, no mask kept");
}

/// A pipeline that offloads every flow, with one flow (sport 5 to
/// 198.18.0.2) upcalled and queued for the device, not offloaded yet.
fn queued_flow(budget: Option<usize>) -> Pipeline<Model> {
    let mut p = pipeline(
        &BY_DST,
        OffloadPolicy {
            mode: OffloadMode::All,
            budget,
            ..OffloadPolicy::default()
        },
    );
    let bridge = p.bridge_handle();
    let mut f = frame(5, 2);
    let miss = Miss::parse(PortNo(1), &f);
    let t = translate_miss(&bridge, &miss.key, at(1));
    p.upcall_translated(at(1), &miss, &t, &mut f, &mut CollectSink::new());
    assert_eq!(
        p.find(&key(5, 2)).expect("flow").state,
        FlowState::Offloading
    );
    p
}

/// Runs offload jobs on the pipeline's own device, as the live offload
/// thread runs them on the shared one.
fn run_jobs(p: &mut Pipeline<Model>, jobs: Vec<OffloadJob>) -> Vec<OffloadDone> {
    jobs.into_iter().map(|j| j.run(p.offloader_mut())).collect()
}

#[test]
fn a_flow_evicted_while_its_offload_runs_leaves_no_rule_and_loses_no_count() {
    let mut p = queued_flow(None);
    let jobs = p.take_offloads(at(2), 8);
    assert_eq!(jobs.len(), 1);
    // The device installs it; meanwhile the slow path flushes the flow...
    let done = run_jobs(&mut p, jobs);
    assert_eq!(p.flush_port(PortNo(2)), 1);
    // ...and the new rule forwards 4 packets before anyone removes it.
    assert!(p.offloader_mut().forward(&key(5, 2), 4, 60));
    p.finish_offloads(done, at(3));
    assert!(
        p.offloader().rules.is_empty(),
        "the rule of a gone flow is removed"
    );
    assert_eq!(p.offloaded_len(), 0);
    p.revalidate(at(4));
    assert_eq!(
        credited(&p),
        1 + 4,
        "the upcalled packet and the 4 in hardware"
    );
}

#[test]
fn a_flow_whose_actions_change_while_its_offload_runs_gets_the_new_ones() {
    let mut p = queued_flow(None);
    let jobs = p.take_offloads(at(2), 8);
    let done = run_jobs(&mut p, jobs);
    // A controller changes the rule while the device installs output:2.
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Modify,
    )
    .expect("parses");
    p.bridge_mut().tables.apply(&fm, at(2)).expect("applies");
    p.revalidate(at(3));
    p.finish_offloads(done, at(4));
    assert!(p.offloader().rules.is_empty(), "the stale rule went");
    // Queued again: the next batch installs the new actions.
    assert!(p.flush_offloads_some(at(5), 8));
    let d = p.find(&key(5, 2)).expect("flow");
    assert_eq!(
        (d.state, d.actions.to_string()),
        (FlowState::Offloaded, "output:3".into())
    );
    let rules: Vec<String> = p
        .offloader()
        .rules
        .values()
        .map(|r| r.1.to_string())
        .collect();
    assert_eq!(rules, ["output:3"]);
}

#[test]
fn offloads_under_way_count_against_the_rule_budget() {
    let mut p = queued_flow(Some(2));
    let mask = megaflow::Mask::exact_fields(megaflow::Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for sport in 6..9 {
        p.install_flow(&Match::new(&key(sport, 2), &mask), out.clone(), at(1))
            .expect("installs");
    }
    let jobs = p.take_offloads(at(2), 8);
    assert_eq!(jobs.len(), 2, "the budget's worth, not the batch's");
    let done = run_jobs(&mut p, jobs);
    p.finish_offloads(done, at(3));
    assert_eq!(p.offloaded_len(), 2);
    // The next batch makes room by demoting the least recently hit: the
    // device never holds more than the budget, jobs under way included.
    let jobs = p.take_offloads(at(4), 8);
    assert_eq!(jobs.len(), 2);
    assert_eq!(p.stats().demoted, 2);
    assert!(p.offloader().rules.is_empty());
    let done = run_jobs(&mut p, jobs);
    p.finish_offloads(done, at(5));
    assert_eq!(p.offloaded_len(), 2);
    assert_eq!(p.offloader().rules.len(), 2);
}

//! A BARRIER's targeted sync: only the megaflows a rule change can affect
//! are re-translated, and afterwards every megaflow has the actions of the
//! tables in force, as after a pass.

use megaflow::actions::CollectSink;
use megaflow::frame::{FrameSpec, L4};

use super::super::tests::Model;
use super::*;
use crate::bridge::Bridge;
use crate::group::{GroupSpec, GroupType};
use crate::rule::FlowModCommand;
use crate::text::parse_flow;
use crate::PipelineConfig;
use megaflow::{FlowKey, PortNo, SplitMix64};

const T0: u64 = 1_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

type P = Pipeline<Model>;

fn pipeline(flows: &[&str]) -> P {
    let mut b = Bridge::with_ports(1..=4);
    for f in flows {
        let fm = parse_flow(f, FlowModCommand::Add).expect("flow parses");
        b.apply_flow_mod(&fm, at(0)).expect("flow applies");
    }
    let mut cfg = PipelineConfig::default();
    cfg.offload.mode = crate::OffloadMode::Off;
    Pipeline::new(b, Model::default(), cfg)
}

fn frame(dst: u8, dport: u16) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0000 | u32::from(dst),
        L4::udp(1000, dport),
    )
    .payload(18)
    .build()
}

fn send(p: &mut P, dst: u8, dport: u16, ms: u64) {
    let mut f = frame(dst, dport);
    p.process(at(ms), PortNo(1), &mut f, &mut CollectSink::new());
}

fn flow_mod(p: &mut P, text: &str, cmd: FlowModCommand) {
    let fm = parse_flow(text, cmd).expect("parses");
    p.bridge_mut().apply_flow_mod(&fm, at(1)).expect("applies");
}

fn actions_of(p: &P, dst: u8, dport: u16) -> String {
    let key = megaflow::extract(1, &frame(dst, dport));
    p.find(&key).expect("megaflow").actions.to_string()
}

/// Every megaflow has, for every packet of the tests' universe it
/// matches (198.18.0.2–.5, UDP ports 50–53, and 53), the actions a fresh
/// translation of that packet gives.
fn all_current(p: &P) -> bool {
    let br = p.bridge();
    let universe: Vec<FlowKey> = (2..=5)
        .flat_map(|d| (50..=53).map(move |port| megaflow::extract(1, &frame(d, port))))
        .collect();
    p.dump().iter().all(|d| {
        universe
            .iter()
            .filter(|k| d.matched.matches(k))
            .all(|k| br.translate(k, at(2)).datapath_actions() == d.actions)
    })
}

const BY_DST: [&str; 3] = [
    "priority=10,ip,nw_dst=198.18.0.2,actions=output:2",
    "priority=10,ip,nw_dst=198.18.0.3,actions=output:3",
    "priority=0,actions=drop",
];

#[test]
fn a_barrier_syncs_only_the_megaflows_a_rule_change_affects() {
    let mut p = pipeline(&BY_DST);
    send(&mut p, 2, 53, 0);
    send(&mut p, 3, 53, 0);
    assert_eq!(p.len(), 2);
    flow_mod(
        &mut p,
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:4",
        FlowModCommand::ModifyStrict,
    );
    assert!(p.synced_tables() < p.bridge().generations().tables);
    assert!(p.sync_targeted(at(2)), "only a flow rule changed");
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
    assert_eq!(actions_of(&p, 2, 53), "output:4");
    assert_eq!(actions_of(&p, 3, 53), "output:3");
    assert_eq!(p.stats().revalidated_modified, 1);
    assert_eq!(p.stats().targeted_syncs, 1);
    // The pass after has nothing left to do.
    p.revalidate(at(3));
    assert_eq!(p.stats().revalidated_modified, 1);
    assert!(all_current(&p));
}

#[test]
fn a_rule_no_megaflow_overlaps_changes_none_and_a_deleted_one_is_followed() {
    let mut p = pipeline(&BY_DST);
    send(&mut p, 2, 53, 0);
    send(&mut p, 3, 53, 0);
    flow_mod(
        &mut p,
        "priority=10,ip,nw_dst=198.18.0.4,actions=output:4",
        FlowModCommand::Add,
    );
    assert!(p.sync_targeted(at(2)));
    assert_eq!(
        p.stats().revalidated_modified + p.stats().revalidated_deleted,
        0
    );
    flow_mod(&mut p, "ip,nw_dst=198.18.0.3", FlowModCommand::DeleteStrict);
    // A higher-priority rule that shadows part of .2's megaflow.
    flow_mod(
        &mut p,
        "priority=20,udp,nw_dst=198.18.0.2,tp_dst=53,actions=output:1",
        FlowModCommand::Add,
    );
    assert!(p.sync_targeted(at(2)));
    assert!(all_current(&p), "{:?}", p.dump());
}

#[test]
fn a_change_past_table_0_affects_every_megaflow_that_went_there() {
    let mut p = pipeline(&[
        "table=0,priority=10,ip,actions=goto_table:1",
        "table=0,priority=0,actions=drop",
        "table=1,priority=10,ip,nw_dst=198.18.0.2,actions=output:2",
        "table=1,priority=0,actions=output:3",
    ]);
    send(&mut p, 2, 53, 0);
    send(&mut p, 3, 53, 0);
    flow_mod(
        &mut p,
        "table=1,priority=10,ip,nw_dst=198.18.0.3,actions=output:4",
        FlowModCommand::Add,
    );
    assert!(p.sync_targeted(at(2)));
    assert!(all_current(&p), "{:?}", p.dump());
    assert_eq!(actions_of(&p, 3, 53), "output:4");
}

#[test]
fn a_rule_added_where_a_resubmit_missed_affects_the_megaflows_that_resubmitted() {
    // (Found by the frames' differential test: resubmit into an empty
    // table 1, then a rule there; the megaflow kept the miss.)
    for how in ["resubmit(,1),output:2", "group:1"] {
        // (in_port matched from the start: output reads it.)
        let mut p = pipeline(&["table=0,priority=0,in_port=1,actions=drop"]);
        let bucket = |a| crate::group::Bucket {
            weight: 0,
            watch_port: None,
            actions: vec![a],
        };
        let group = GroupSpec {
            id: 1,
            ty: GroupType::All,
            buckets: vec![
                bucket(crate::rule::OfAction::Resubmit(crate::TableId(1))),
                bucket(crate::rule::OfAction::Output {
                    port: crate::rule::OfPort::Port(PortNo(2)),
                    max_len: 0,
                }),
            ],
            method: Default::default(),
        };
        p.bridge_mut().add_group(group, at(0)).expect("group");
        p.revalidate(at(0));
        send(&mut p, 2, 53, 0);
        let text = format!("table=0,priority=5,in_port=1,actions={how}");
        flow_mod(&mut p, &text, FlowModCommand::Add);
        assert!(p.sync_targeted(at(2)), "{how}");
        assert_eq!(actions_of(&p, 2, 53), "output:2", "{how}");
        flow_mod(&mut p, "table=1,actions=output:3", FlowModCommand::Add);
        assert!(p.sync_targeted(at(2)), "{how}");
        assert!(all_current(&p), "{how}: {:?}", p.dump());
        assert_eq!(actions_of(&p, 2, 53), "output:3,output:2", "{how}");
    }
}

#[test]
fn a_group_change_or_a_log_overrun_needs_a_pass() {
    let mut p = pipeline(&BY_DST);
    send(&mut p, 2, 53, 0);
    let group = GroupSpec {
        id: 1,
        ty: GroupType::All,
        buckets: Vec::new(),
        method: Default::default(),
    };
    p.bridge_mut().add_group(group, at(1)).expect("group");
    assert!(!p.sync_targeted(at(2)), "groups are not logged");
    p.revalidate(at(2));
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
    for i in 0..=crate::table::CHANGES_KEPT as u32 {
        let text = format!("priority=5,udp,tp_dst={},actions=output:2", 1 + i % 60_000);
        flow_mod(&mut p, &text, FlowModCommand::Add);
    }
    assert!(!p.sync_targeted(at(2)), "the log no longer holds them all");
    p.revalidate(at(3));
    assert!(p.sync_targeted(at(3)), "nothing changed since");
}

/// Random rule changes over random megaflows: after each targeted sync
/// every megaflow has the actions the tables give now.
#[test]
fn after_a_targeted_sync_every_megaflow_is_current() {
    let mut rng = SplitMix64::new(0x5ec);
    for round in 0..60 {
        let mut p = pipeline(&[
            "priority=0,actions=drop",
            "table=1,priority=0,actions=output:4",
        ]);
        for _ in 0..20 {
            let (dst, port) = (2 + rng.below(4) as u8, 50 + rng.below(4) as u16);
            send(&mut p, dst, port, 0);
        }
        for step in 0..10 {
            let dst = 2 + rng.below(4);
            let port = 50 + rng.below(4);
            let out = 1 + rng.below(4);
            // One priority per shape: overlapping rules never tie (which
            // of two would win is undefined).
            let text = match rng.below(5) {
                0 => format!("priority=10,ip,nw_dst=198.18.0.{dst},actions=output:{out}"),
                1 => format!("priority=20,udp,tp_dst={port},actions=output:{out}"),
                2 => format!("priority=30,udp,nw_dst=198.18.0.{dst},actions=goto_table:1"),
                3 => format!("table=1,priority=10,udp,tp_dst={port},actions=output:{out}"),
                _ => format!("priority=10,ip,nw_dst=198.18.0.{dst}"),
            };
            let cmd = if text.contains("actions") {
                FlowModCommand::Add
            } else {
                FlowModCommand::DeleteStrict
            };
            flow_mod(&mut p, &text, cmd);
            assert!(p.sync_targeted(at(2)), "round {round} step {step}");
            assert!(all_current(&p), "round {round} step {step}: {text}");
            let (dst, port) = (2 + rng.below(4) as u8, 50 + rng.below(4) as u16);
            send(&mut p, dst, port, 2);
        }
    }
}

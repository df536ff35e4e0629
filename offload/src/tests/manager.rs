use std::collections::HashMap;

use megaflow::actions::UserspaceReason;
use megaflow::frame::{FrameSpec, L4};
use megaflow::{extract, Field, Mask};

use super::*;
use crate::dr::Errno;
use crate::sim::{Egress, Fault, Op, Output, SimBackend, SimConfig};

#[path = "manager_staged.rs"]
mod staged;

#[path = "manager_faults.rs"]
mod faults;

fn ports() -> PortTable {
    (1..=4u32).fold(PortTable::new(), |t, p| {
        t.with(PortNo(p), Vport::vf(p as u16).expect("vf"))
    })
}

fn manager() -> OffloadManager<SimBackend> {
    OffloadManager::new(
        Arc::new(SimBackend::default()),
        ports(),
        ManagerConfig::default(),
    )
    .expect("fdb layout")
}

fn frame(sport: u16) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(sport, 80)).build()
}

/// The 5-tuple megaflow of `frame(sport)` from port 1.
fn flow(sport: u16) -> Match {
    let key = extract(1, &frame(sport));
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    Match::new(&key, &mask)
}

fn send(mgr: &OffloadManager<SimBackend>, f: &[u8]) -> Vec<(Egress, Vec<u8>)> {
    let mut out = Output::new();
    let vport = Vport::vf(1).expect("vf");
    mgr.backend().process(mgr.domain(), 0, vport, f, &mut out);
    out.frames()
        .iter()
        .map(|f| (f.egress, f.bytes.clone()))
        .collect()
}

fn stats(mgr: &mut OffloadManager<SimBackend>) -> HashMap<HwId, HwStats> {
    let mut v = Vec::new();
    mgr.poll(&mut v).expect("poll");
    v.into_iter().collect()
}

#[test]
fn an_offloaded_flow_forwards_in_hardware_and_counts_exactly() {
    let mut mgr = manager();
    let out2 = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let id = mgr.install(&flow(1000), &out2).expect("offload");
    for _ in 0..5 {
        let r = send(&mgr, &frame(1000));
        assert_eq!(
            r,
            vec![(Egress::Vport(Vport::vf(2).expect("vf")), frame(1000))]
        );
    }
    // Another 5-tuple misses to software on the ingress representor.
    let miss = send(&mgr, &frame(1001));
    assert_eq!(
        miss[0].0,
        Egress::Manager {
            ingress: Vport::vf(1).expect("vf")
        }
    );
    let s = stats(&mut mgr);
    assert_eq!(s[&id].packets, 5);
    assert_eq!(s[&id].bytes, 5 * frame(1000).len() as u64);
}

#[test]
fn unsupported_flows_stay_in_software_with_their_reason() {
    let mut mgr = manager();
    let ctl = Actions::new(vec![DpAction::Userspace(UserspaceReason::controller(128))]);
    assert_eq!(
        mgr.install(&flow(1), &ctl),
        Err(NotOffloaded::Action("controller".into()))
    );
    let nowhere = Actions::new(vec![DpAction::Output(PortNo(9))]);
    assert_eq!(
        mgr.install(&flow(1), &nowhere).map_err(|e| e.to_string()),
        Err("action output:9 (no vport)".into())
    );
    // ICMP type and code (the key's tp_src/tp_dst) have no FDB match field.
    let icmp = FrameSpec::ipv4(1, 2, L4::Icmp { ty: 8, code: 0 }).build();
    let key = extract(1, &icmp);
    let mask = Mask::exact_fields(&[Field::InPort, Field::EthType, Field::IpProto, Field::TpSrc]);
    let e = mgr
        .install(
            &Match::new(&key, &mask),
            &Actions::new(vec![DpAction::Output(PortNo(2))]),
        )
        .map_err(|e| e.to_string());
    assert!(
        matches!(&e, Err(s) if s.starts_with("unsupported match field tp_src")),
        "{e:?}"
    );
    let late = Actions::new(vec![
        DpAction::Output(PortNo(2)),
        DpAction::SetEthDst(1),
        DpAction::Output(PortNo(3)),
    ]);
    assert!(matches!(
        mgr.install(&flow(1), &late),
        Err(NotOffloaded::Action(_))
    ));
    // A forked ct(table=T): the tracked copy to a stage, the packet on.
    let fork = Actions::new(vec![
        DpAction::Ct(Box::new(conntrack::CtSpec {
            zone: 9,
            ..conntrack::CtSpec::default()
        })),
        DpAction::Recirc(3),
        DpAction::Output(PortNo(2)),
    ]);
    let e = mgr.install(&flow(1), &fork).map_err(|e| e.to_string());
    assert!(
        matches!(&e, Err(s) if s.contains("forked ct(table=T)")),
        "{e:?}"
    );
    // Nothing was left behind by the refusals.
    assert_eq!(mgr.matcher_count(), 0);
    assert!(mgr.is_empty());
}

#[test]
fn rewrites_are_done_by_the_device_and_shared() {
    let mut mgr = manager();
    let acts = Actions::new(vec![
        DpAction::SetEthDst(0x0200_0000_0099),
        DpAction::SetTpDst(8080),
        DpAction::Output(PortNo(3)),
    ]);
    let a = mgr.install(&flow(1), &acts).expect("a");
    let b = mgr.install(&flow(2), &acts).expect("b");
    let before = mgr.backend().snapshot().actions;
    let r = send(&mgr, &frame(1));
    let want = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(1, 8080))
        .macs(0x0200_0000_0001, 0x0200_0000_0099)
        .build();
    assert_eq!(r, vec![(Egress::Vport(Vport::vf(3).expect("vf")), want)]);
    mgr.remove(a);
    // The shared modify-header stays while b uses it.
    assert_eq!(mgr.backend().snapshot().actions, before - 1);
    assert_eq!(
        send(&mgr, &frame(2))[0].0,
        Egress::Vport(Vport::vf(3).expect("vf"))
    );
    mgr.remove(b);
    assert_eq!(mgr.backend().snapshot().actions, before - 3);
    assert_eq!(mgr.matcher_count(), 0);
}

#[test]
fn several_outputs_become_a_dest_array() {
    let mut mgr = manager();
    let acts = Actions::new(vec![
        DpAction::Output(PortNo(2)),
        DpAction::Output(PortNo(3)),
    ]);
    mgr.install(&flow(7), &acts).expect("offload");
    let mut to: Vec<Egress> = send(&mgr, &frame(7)).into_iter().map(|(e, _)| e).collect();
    to.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        to,
        vec![
            Egress::Vport(Vport::vf(2).expect("vf")),
            Egress::Vport(Vport::vf(3).expect("vf"))
        ]
    );
}

#[test]
fn replace_is_hitless_and_keeps_one_matcher() {
    let mut mgr = manager();
    let to2 = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let to3 = Actions::new(vec![DpAction::Output(PortNo(3))]);
    let old = mgr.install(&flow(5), &to2).expect("install");
    let new = mgr.replace(old, &flow(5), &to3).expect("replace");
    assert_ne!(old, new);
    assert_eq!(mgr.len(), 1);
    assert_eq!(mgr.matcher_count(), 1);
    assert_eq!(
        send(&mgr, &frame(5))[0].0,
        Egress::Vport(Vport::vf(3).expect("vf"))
    );
    // A failed replace leaves the old rule working.
    mgr.backend()
        .inject(Fault::nth(Op::RuleCreate, 1, Errno::EIO));
    let e = mgr.replace(new, &flow(5), &to2);
    assert_eq!(
        e,
        Err(NotOffloaded::Backend {
            errno: "EIO",
            op: "rule_create"
        })
    );
    assert_eq!(
        send(&mgr, &frame(5))[0].0,
        Egress::Vport(Vport::vf(3).expect("vf"))
    );
}

#[test]
fn a_failed_insert_leaks_nothing_and_names_the_errno() {
    let mut mgr = manager();
    let before = mgr.backend().snapshot();
    mgr.backend()
        .inject(Fault::nth(Op::RuleCreate, 1, Errno::ENOSPC));
    let acts = Actions::new(vec![DpAction::SetEthSrc(5), DpAction::Output(PortNo(2))]);
    assert_eq!(
        mgr.install(&flow(1), &acts).map_err(|e| e.to_string()),
        Err("backend error ENOSPC on rule_create".into())
    );
    let after = mgr.backend().snapshot();
    assert_eq!(after.rules, before.rules);
    assert_eq!(after.matchers, before.matchers);
    // The retry works.
    mgr.install(&flow(1), &acts).expect("retry");
}

#[test]
fn a_reused_counter_starts_from_zero() {
    let mut mgr = manager();
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let mgr_cfg_counters = 1usize << ManagerConfig::default().bulk_log;
    let a = mgr.install(&flow(1), &acts).expect("a");
    for _ in 0..3 {
        send(&mgr, &frame(1));
    }
    mgr.remove(a);
    let _ = stats(&mut mgr); // records the freed counter's final value
                             // Fill every counter of the bulk so the freed one is reused.
    let mut ids = Vec::new();
    for p in 0..mgr_cfg_counters as u16 {
        ids.push(mgr.install(&flow(100 + p), &acts).expect("install"));
    }
    let s = stats(&mut mgr);
    assert!(ids.iter().all(|id| s[id] == HwStats::default()));
}

#[test]
fn shutdown_leaves_the_device_empty() {
    let mut mgr = manager();
    let backend = Arc::clone(mgr.backend());
    for p in 0..20 {
        let acts = Actions::new(vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: p,
            },
            DpAction::Output(PortNo(2)),
        ]);
        mgr.install(&flow(p), &acts).expect("install");
    }
    mgr.shutdown().expect("shutdown");
    assert_eq!(backend.snapshot(), crate::sim::Snapshot::default());
}

fn manager_with(sim: SimConfig, config: ManagerConfig) -> OffloadManager<SimBackend> {
    OffloadManager::new(Arc::new(SimBackend::new(sim)), ports(), config).expect("fdb layout")
}

fn poll_all(mgr: &mut OffloadManager<SimBackend>) -> Vec<(HwId, HwStats)> {
    let mut v = Vec::new();
    mgr.poll(&mut v).expect("poll");
    v
}

#[test]
fn a_removed_flow_reports_its_final_counts_once_and_its_counter_restarts() {
    // Two counters per bulk, so the removed flow's counter is the next one
    // given out.
    let config = ManagerConfig {
        bulk_log: 1,
        ..ManagerConfig::default()
    };
    let mut mgr = manager_with(SimConfig::default(), config);
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let gone = mgr.install(&flow(1), &acts).expect("install");
    let kept = mgr.install(&flow(2), &acts).expect("install");
    for _ in 0..3 {
        send(&mgr, &frame(1));
    }
    assert_eq!(stats(&mut mgr)[&gone].packets, 3);
    // Between two polls: 4 more packets, then the rule goes.
    for _ in 0..4 {
        send(&mgr, &frame(1));
    }
    send(&mgr, &frame(2));
    mgr.remove(gone);
    assert_eq!(
        send(&mgr, &frame(1))[0].0,
        Egress::Manager {
            ingress: Vport::vf(1).expect("vf")
        },
        "the rule is gone at once"
    );
    let first = poll_all(&mut mgr);
    let finals: Vec<HwStats> = first
        .iter()
        .filter(|(id, _)| *id == gone)
        .map(|(_, s)| *s)
        .collect();
    let len = frame(1).len() as u64;
    assert_eq!(
        finals,
        vec![HwStats {
            packets: 7,
            bytes: 7 * len
        }],
        "the final cumulative counts, once"
    );
    let second = poll_all(&mut mgr);
    assert!(second.iter().all(|(id, _)| *id != gone), "{second:?}");
    assert_eq!(
        second
            .iter()
            .find(|(id, _)| *id == kept)
            .map(|(_, s)| s.packets),
        Some(1)
    );
    // The counter is reused and starts from zero.
    let reused = mgr.install(&flow(3), &acts).expect("install");
    assert_eq!(
        mgr.bulks.len(),
        1,
        "no new bulk: the freed counter was reused"
    );
    assert_eq!(stats(&mut mgr)[&reused], HwStats::default());
    send(&mgr, &frame(3));
    assert_eq!(stats(&mut mgr)[&reused].packets, 1);
}

#[test]
fn a_failed_poll_keeps_the_final_counts_for_the_next() {
    let mut mgr = manager();
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let a = mgr.install(&flow(1), &acts).expect("install");
    for _ in 0..5 {
        send(&mgr, &frame(1));
    }
    mgr.remove(a);
    // A replace also reports the old rule's final counts.
    let b = mgr.install(&flow(2), &acts).expect("install");
    send(&mgr, &frame(2));
    let c = mgr.replace(b, &flow(2), &acts).expect("replace");
    mgr.backend()
        .inject(Fault::nth(Op::CounterQuery, 1, Errno::EIO));
    let mut out = Vec::new();
    assert_eq!(
        mgr.poll(&mut out),
        Err(NotOffloaded::Backend {
            errno: "EIO",
            op: "counter_bulk_query"
        })
    );
    assert!(out.is_empty(), "a failed poll reports nothing: {out:?}");
    let s = poll_all(&mut mgr);
    let of = |id: HwId| -> Vec<u64> {
        s.iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, s)| s.packets)
            .collect()
    };
    assert_eq!(of(a), vec![5]);
    assert_eq!(of(b), vec![1]);
    assert_eq!(of(c), vec![0]);
}

#[test]
fn a_full_device_is_a_backend_enospc_not_table_full() {
    let sim = SimConfig {
        max_rules_per_table: 2,
        ..SimConfig::default()
    };
    let mut mgr = manager_with(sim, ManagerConfig::default());
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    mgr.install(&flow(1), &acts).expect("install");
    mgr.install(&flow(2), &acts).expect("install");
    let before = mgr.backend().snapshot();
    let e = mgr.install(&flow(3), &acts).expect_err("the table is full");
    assert_eq!(
        e,
        NotOffloaded::Backend {
            errno: "ENOSPC",
            op: "rule_create"
        }
    );
    assert_eq!(e.to_string(), "backend error ENOSPC on rule_create");
    assert!(e.is_transient());
    assert_eq!(mgr.backend().snapshot(), before, "nothing left behind");

    // Out of counters: the bulk allocation is refused by the device.
    let sim = SimConfig {
        max_counters: 2,
        ..SimConfig::default()
    };
    let config = ManagerConfig {
        bulk_log: 1,
        ..ManagerConfig::default()
    };
    let mut mgr = manager_with(sim, config);
    mgr.install(&flow(1), &acts).expect("install");
    mgr.install(&flow(2), &acts).expect("install");
    assert_eq!(
        mgr.install(&flow(3), &acts).map_err(|e| e.to_string()),
        Err("backend error ENOSPC on counter_bulk_alloc".into())
    );
}

#[test]
fn a_failed_layout_leaves_the_device_empty() {
    for nth in 1..=3 {
        let sim = Arc::new(SimBackend::default());
        sim.inject(Fault::nth(Op::TableCreate, nth, Errno::ENOMEM));
        let r = OffloadManager::new(Arc::clone(&sim), ports(), ManagerConfig::default());
        assert!(r.is_err(), "table_create #{nth} fails");
        assert_eq!(sim.snapshot(), crate::sim::Snapshot::default());
    }
}

#[test]
fn a_poll_in_parts_reports_what_a_whole_poll_does_and_loses_no_final_count() {
    // Two counters per bulk: six flows in three bulks, a part per bulk.
    let config = ManagerConfig {
        bulk_log: 1,
        ..ManagerConfig::default()
    };
    let mut mgr = manager_with(SimConfig::default(), config);
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let ids: Vec<HwId> = (1..=6)
        .map(|s| mgr.install(&flow(s), &acts).expect("install"))
        .collect();
    for (i, s) in (1..=6).enumerate() {
        for _ in 0..=i {
            send(&mgr, &frame(s));
        }
    }
    let mut parts = Vec::new();
    let (mut next, mut calls) = (0, 0);
    loop {
        let mut out = Vec::new();
        let done = mgr.poll_some(&mut next, 1, &mut out).expect("poll");
        calls += 1;
        parts.push(out);
        if done {
            break;
        }
    }
    assert_eq!((calls, next), (3, 0), "one bulk a part, then back to 0");
    let mut all: Vec<_> = parts.concat();
    let mut whole = poll_all(&mut mgr);
    all.sort_by_key(|(id, _)| id.0);
    whole.sort_by_key(|(id, _)| id.0);
    assert_eq!(all, whole, "the parts add up to a whole poll");
    // One flow of the first bulk and one of the last go while a poll is
    // between its first and second part: the last bulk's final count comes
    // with this poll, the first bulk's with the next; each once.
    let (mut next, mut out) = (0, Vec::new());
    assert!(!mgr.poll_some(&mut next, 1, &mut out).expect("poll"));
    send(&mgr, &frame(1));
    send(&mgr, &frame(6));
    mgr.remove(ids[0]);
    mgr.remove(ids[5]);
    while !mgr.poll_some(&mut next, 1, &mut out).expect("poll") {}
    let of = |v: &[(HwId, HwStats)], id: HwId| -> Vec<u64> {
        v.iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, s)| s.packets)
            .collect()
    };
    assert_eq!(of(&out, ids[0]), vec![1], "polled before it went");
    assert_eq!(of(&out, ids[5]), vec![7], "its final count");
    let next_poll = poll_all(&mut mgr);
    assert_eq!(of(&next_poll, ids[0]), vec![2], "its final count, later");
    assert_eq!(of(&next_poll, ids[5]), Vec::<u64>::new());
}

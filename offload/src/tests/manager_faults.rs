//! Device faults the manager must survive: destroys the device refuses,
//! and the sim's fault plans (shares of calls, windows of time).

use std::time::Duration;

use super::*;

fn rules(mgr: &OffloadManager<SimBackend>) -> usize {
    mgr.backend().snapshot().rules
}

#[test]
fn a_refused_destroy_keeps_the_rule_and_its_counter_until_a_retry_succeeds() {
    let mut mgr = manager();
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let a = mgr.install(&flow(1), &acts).expect("install");
    let before = rules(&mgr);
    for _ in 0..3 {
        send(&mgr, &frame(1));
    }
    assert_eq!(stats(&mut mgr)[&a].packets, 3);
    mgr.backend()
        .inject(Fault::nth(Op::RuleDestroy, 1, Errno::EBUSY));
    mgr.remove(a);
    assert_eq!(mgr.undestroyed(), 1);
    assert_eq!(rules(&mgr), before, "the device kept the rule");
    // It still forwards (and counts) in the device.
    assert!(matches!(send(&mgr, &frame(1))[0].0, Egress::Vport(_)));
    // The next poll retries the destroy first: it succeeds, and the flow's
    // final counts (the 3 polled, the 1 since) come once.
    let first = poll_all(&mut mgr);
    let finals: Vec<u64> = first
        .iter()
        .filter(|(id, _)| *id == a)
        .map(|(_, s)| s.packets)
        .collect();
    assert_eq!(finals, vec![4], "{first:?}");
    assert_eq!(mgr.undestroyed(), 0);
    assert!(rules(&mgr) < before);
    assert!(poll_all(&mut mgr).iter().all(|(id, _)| *id != a));
}

#[test]
fn a_kept_rules_counter_is_not_reported_or_reused_while_it_counts() {
    let config = ManagerConfig {
        bulk_log: 1,
        ..ManagerConfig::default()
    };
    let mut mgr = manager_with(SimConfig::default(), config);
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let a = mgr.install(&flow(1), &acts).expect("install");
    // Every destroy fails for now.
    mgr.backend()
        .inject(Fault::always(Op::RuleDestroy, Errno::EIO));
    mgr.remove(a);
    send(&mgr, &frame(1));
    let polled = poll_all(&mut mgr);
    assert!(polled.iter().all(|(id, _)| *id != a), "{polled:?}");
    // New flows get other counters (the bulk of 2 has one left, then a
    // new bulk), never the kept rule's.
    let b = mgr.install(&flow(2), &acts).expect("install");
    let c = mgr.install(&flow(3), &acts).expect("install");
    send(&mgr, &frame(2));
    let now = stats(&mut mgr);
    assert_eq!((now[&b].packets, now[&c].packets), (1, 0));
    // The fault clears: the retry destroys it; its one packet is reported.
    mgr.backend().clear_faults();
    let finals: Vec<u64> = poll_all(&mut mgr)
        .into_iter()
        .filter(|(id, _)| *id == a)
        .map(|(_, s)| s.packets)
        .collect();
    assert_eq!(finals, vec![1]);
}

#[test]
fn shutdown_retries_refused_destroys_and_leaves_the_device_empty() {
    let mut mgr = manager();
    let backend = Arc::clone(mgr.backend());
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for p in 0..10 {
        mgr.install(&flow(p), &acts).expect("install");
    }
    // The first 12 destroys fail: 10 at shutdown's removes, 2 retries.
    backend.inject(Fault {
        times: 12,
        ..Fault::nth(Op::RuleDestroy, 1, Errno::EBUSY)
    });
    mgr.shutdown().expect("shutdown");
    assert_eq!(backend.snapshot(), crate::sim::Snapshot::default());
}

#[test]
fn a_destroy_the_device_never_accepts_fails_shutdown_by_name() {
    let mut mgr = manager();
    let acts = Actions::new(vec![DpAction::Output(PortNo(2))]);
    mgr.install(&flow(1), &acts).expect("install");
    mgr.backend()
        .inject(Fault::always(Op::RuleDestroy, Errno::EIO));
    let e = mgr.shutdown().expect_err("the rule stays");
    assert_eq!(e.errno(), Errno::EIO);
    assert!(e.to_string().contains("rule_destroy"), "{e}");
}

#[test]
fn a_share_of_calls_fails_and_only_inside_the_window() {
    let sim = SimBackend::default();
    sim.inject(Fault::always(Op::CounterAlloc, Errno::EIO).fraction(0.25));
    let failed = (0..4_000)
        .filter(|_| sim.counter_bulk_alloc(0).is_err())
        .count();
    assert!((800..1200).contains(&failed), "{failed} of 4000 failed");
    sim.clear_faults();
    // A window that has not opened yet, then one that has closed.
    sim.inject(
        Fault::always(Op::CounterAlloc, Errno::EIO).window(Duration::from_secs(3_600), None),
    );
    sim.inject(
        Fault::always(Op::CounterAlloc, Errno::EIO).window(Duration::ZERO, Some(Duration::ZERO)),
    );
    assert!((0..100).all(|_| sim.counter_bulk_alloc(0).is_ok()));
    assert_eq!(sim.injected(), failed as u64);
}

//! The Direct Rule conformance suite ([`offload::conformance`]) on the
//! software eSwitch: every case on a fresh [`SimBackend`], the ENOSPC cases
//! on one with that capacity made small.

use offload::conformance::{self, Device, Outcome};
use offload::dr::DomainId;
use offload::sim::{OutFrame, SimBackend};
use offload::Vport;

#[test]
fn every_case_passes_on_the_sim() {
    let cases = conformance::cases::<SimBackend>();
    let report = conformance::run(&cases, |case| match case.capacity() {
        None => conformance::check(&SimBackend::default(), case, None),
        Some(c) => {
            let (sim, n) = conformance::small_sim(c);
            conformance::check(&sim, case, Some(n))
        }
    });
    println!("{report}");
    assert_eq!(report.failed(), 0, "{report}");
    assert_eq!(report.skipped(), 0, "{report}");
    assert_eq!(report.passed(), cases.len());
}

/// The runner reports a failing case by its message and goes on; a case
/// asking for a port the device lacks is skipped with the reason.
#[test]
fn a_failing_case_is_a_line_not_a_crash() {
    struct Broken(SimBackend, bool);
    offload::delegate_backend!(Broken, 0);
    impl Device for Broken {
        // Loses every frame.
        fn send(&self, _: DomainId, _: u64, _: Vport, _: &[u8]) -> Vec<OutFrame> {
            Vec::new()
        }
        fn vf(&self, n: u16) -> Vport {
            if self.1 && n > 0 {
                std::panic::panic_any(conformance::NeedsPorts(format!(
                    "needs VF {n}; this device has 1"
                )));
            }
            Vport::vf(n).unwrap()
        }
    }
    let cases = conformance::cases::<Broken>();
    let drop_case = cases.iter().find(|c| c.name == "action_drop").unwrap();
    match conformance::check(&Broken(SimBackend::default(), false), drop_case, None) {
        Outcome::Fail(why) => assert!(why.contains("one frame in, one out"), "{why}"),
        o => panic!("a device that loses frames passed action_drop: {o:?}"),
    }
    let vport_case = cases
        .iter()
        .find(|c| c.name == "action_dest_vport")
        .unwrap();
    match conformance::check(&Broken(SimBackend::default(), true), vport_case, None) {
        Outcome::Skip(why) => assert!(why.contains("needs VF"), "{why}"),
        o => panic!("expected a skip: {o:?}"),
    }
    let errno_case = cases
        .iter()
        .find(|c| c.name == "busy_table_led_to")
        .unwrap();
    assert_eq!(
        conformance::check(&Broken(SimBackend::default(), false), errno_case, None),
        Outcome::Pass,
        "a case without traffic passes on a device that loses frames"
    );
}

#[test]
fn measure_reports_rates_and_leaves_nothing() {
    let sim = SimBackend::default();
    let rates = conformance::measure(&sim, 1000, 12).unwrap();
    assert_eq!(rates.rules, 1000);
    assert_eq!(rates.counters, 4096);
    assert!(rates.rules_per_sec > 0.0);
    let dump = offload::dr::DrBackend::dump(&sim).unwrap();
    assert!(dump.domains.is_empty(), "{dump:?}");
}

/// On one device, every case in turn with what it made cleared after it:
/// the way `eswitchd hw-check` runs the suite on a real eSwitch. Each case
/// passes, and after each the device is empty.
#[test]
fn every_case_passes_on_one_device_cleared_between_cases() {
    let dev = conformance::Tracked::new(SimBackend::default());
    let cases = conformance::cases::<conformance::Tracked<SimBackend>>();
    let report = conformance::run(&cases, |case| {
        let outcome = conformance::check(&dev, case, None);
        let left = dev.clear();
        assert!(left.is_empty(), "{}: not cleared: {left:?}", case.name);
        let dump = offload::dr::DrBackend::dump(&dev).unwrap();
        assert_eq!(dump, Default::default(), "{}: left behind", case.name);
        outcome
    });
    println!("{report}");
    assert_eq!(report.failed(), 0, "{report}");
    assert_eq!(report.skipped(), 3, "the ENOSPC cases: {report}");
}

/// A device whose slow path reads no restore tags (the representor
/// netdevs): the restore cases check its clean refusal and are skipped,
/// naming why; every other case passes as before.
#[test]
fn without_a_restore_path_the_restore_cases_skip_saying_why() {
    let no_path = || {
        SimBackend::new(offload::sim::SimConfig {
            restore_path: false,
            ..Default::default()
        })
    };
    let cases = conformance::cases::<SimBackend>();
    let report = conformance::run(&cases, |case| match case.capacity() {
        None => conformance::check(&no_path(), case, None),
        Some(_) => Outcome::Skip("not this test's".into()),
    });
    println!("{report}");
    assert_eq!(report.failed(), 0, "{report}");
    let restore: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.name.starts_with("restore_"))
        .collect();
    assert_eq!(restore.len(), 3);
    for c in restore {
        match &c.outcome {
            Outcome::Skip(why) => assert!(why.contains("needs a restore path"), "{why}"),
            o => panic!("{}: {o:?}", c.name),
        }
    }
}

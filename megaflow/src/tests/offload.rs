use super::*;
use FlowState::*;

const ALL: [FlowState; 7] = [
    New,
    Installed,
    Offloading,
    Offloaded,
    SoftwareOnly,
    Evicting,
    Gone,
];

#[test]
fn every_state_reaches_gone_and_gone_is_final() {
    // Breadth-first over legal transitions from New.
    let mut seen = vec![New];
    let mut i = 0;
    while i < seen.len() {
        for to in ALL {
            if seen[i].can_go(to) && !seen.contains(&to) {
                seen.push(to);
            }
        }
        i += 1;
    }
    assert_eq!(seen.len(), ALL.len(), "every state reachable: {seen:?}");
    for s in ALL {
        assert!(!Gone.can_go(s));
        // From every state but Gone, Gone is reachable through Evicting.
        if s != Gone && s != New {
            assert!(s == Evicting || s.can_go(Evicting), "{s:?}");
        }
    }
}

#[test]
fn illegal_moves_are_refused_and_named() {
    let mut s = Installed;
    assert!(s.go(Offloaded).is_err(), "hardware only through offloading");
    assert_eq!(s, Installed);
    s.go(Offloading).expect("legal");
    s.go(SoftwareOnly).expect("a failure");
    s.go(Offloading).expect("a retry");
    s.go(Offloaded).expect("done");
    // The error `go` returns names both ends, and the state stays put.
    let e = s.go(New).expect_err("Offloaded cannot go back to New");
    assert_eq!(
        e,
        IllegalTransition {
            from: Offloaded,
            to: New,
        }
    );
    assert_eq!(e.to_string(), "megaflow cannot go from Offloaded to New");
    assert_eq!(s, Offloaded);
    let mut gone = Gone;
    let e = gone.go(New).expect_err("Gone is final");
    assert_eq!(e.to_string(), "megaflow cannot go from Gone to New");
    assert_eq!(gone, Gone);
}

#[test]
fn reasons_read_as_dump_flows_shows_them() {
    let m = NotOffloaded::Match {
        field: "tcp_flags",
        reason: "mask",
    };
    assert_eq!(m.to_string(), "unsupported match field tcp_flags: mask");
    assert_eq!(
        NotOffloaded::Action("controller".into()).to_string(),
        "action controller"
    );
    assert_eq!(NotOffloaded::TableFull.to_string(), "table full");
    let b = NotOffloaded::Backend {
        errno: "ENOSPC",
        op: "rule_create",
    };
    assert_eq!(b.to_string(), "backend error ENOSPC on rule_create");
}

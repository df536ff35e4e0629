//! What a device's errno becomes, per call (the part of the backend that
//! runs without a device).

use super::*;

#[test]
fn errnos_become_the_errors_the_sim_gives_for_the_same_failure() {
    assert_eq!(
        device_error("mlx5dv_dr_rule_create", libc::EEXIST),
        DrError::DuplicateRule
    );
    assert_eq!(
        device_error("mlx5dv_dr_rule_create", libc::ENOSPC),
        DrError::NoSpace(Resource::TableRules)
    );
    assert_eq!(
        device_error("ALLOC_FLOW_COUNTER", libc::ENOMEM),
        DrError::NoSpace(Resource::Counters)
    );
    assert_eq!(
        device_error("mlx5dv_dr_matcher_create", libc::ENOSPC),
        DrError::NoSpace(Resource::Matchers)
    );
}

#[test]
fn other_errnos_keep_the_call_and_the_number() {
    let e = device_error("mlx5dv_dr_table_create", libc::EOPNOTSUPP);
    assert_eq!(e.errno(), Errno::EOPNOTSUPP);
    assert_eq!(
        e.to_string(),
        "EOPNOTSUPP: the device refused mlx5dv_dr_table_create (errno 95)"
    );
    // An errno Direct Rule does not document is kept as a number, EIO as
    // its nearest value.
    let e = device_error("mlx5dv_dr_domain_create", libc::EPERM);
    assert_eq!(e.errno(), Errno::EIO);
    assert!(e.to_string().contains("errno 1"), "{e}");
}

#[test]
fn every_action_spec_names_its_library_call() {
    use offload::dr::ActionKind;
    let specs = [
        ActionSpec::Drop,
        ActionSpec::DefaultMiss,
        ActionSpec::PopVlan,
        ActionSpec::PushVlan {
            header: 0x8100_0000,
        },
        ActionSpec::ModifyHeader(vec![0; 8]),
    ];
    for s in specs {
        let op = action_op(&s);
        assert!(
            op.ends_with(ActionKind::of(&s).name()),
            "{op} for {}",
            s.name()
        );
    }
}

//! The action-sequence check against rows of rdma-core's FDB-ingress state
//! machine (providers/mlx5/dr_action.c, `next_action_state`).

use super::*;
use ActionKind as K;

fn errno(kinds: &[ActionKind]) -> Option<Errno> {
    check_sequence(kinds.iter().copied())
        .err()
        .map(|e| e.errno())
}

#[test]
fn accepted_sequences() {
    for seq in [
        &[][..],
        &[K::FlowCounter],
        &[K::FlowCounter, K::DestVport],
        &[K::DestVport, K::FlowCounter],
        &[K::PopVlan, K::ModifyHeader, K::PushVlan, K::DestVport],
        &[K::PopVlan, K::PopVlan, K::DestTable],
        &[K::PushVlan, K::PushVlan, K::FlowCounter, K::DestVport],
        &[K::ModifyHeader, K::FlowMeter],
        &[K::FlowCounter, K::FlowSampler],
        &[K::FlowCounter, K::Drop],
        &[K::FlowCounter, K::DefaultMiss],
        &[K::ModifyHeader, K::DestArray],
    ] {
        assert_eq!(errno(seq), None, "{seq:?}");
    }
}

#[test]
fn refused_sequences_name_the_action_and_its_errno() {
    for (seq, want) in [
        (&[K::Drop, K::DestVport][..], Errno::EOPNOTSUPP),
        (&[K::DestVport, K::Drop], Errno::EOPNOTSUPP),
        (&[K::DestVport, K::DestTable], Errno::EOPNOTSUPP),
        (&[K::PushVlan, K::ModifyHeader], Errno::EOPNOTSUPP),
        (&[K::ModifyHeader, K::PopVlan], Errno::EOPNOTSUPP),
        (&[K::PopVlan, K::PushVlan], Errno::EOPNOTSUPP),
        (&[K::ModifyHeader, K::Drop], Errno::EOPNOTSUPP),
        (&[K::FlowCounter, K::FlowCounter], Errno::EINVAL),
        (&[K::ModifyHeader, K::ModifyHeader], Errno::EINVAL),
        (&[K::PushVlan, K::PushVlan, K::PushVlan], Errno::EOPNOTSUPP),
        (&[K::PopVlan, K::PopVlan, K::PopVlan], Errno::EINVAL),
    ] {
        assert_eq!(errno(seq), Some(want), "{seq:?}");
    }
    let e = check_sequence([K::Drop, K::DestVport]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "EOPNOTSUPP: invalid action sequence: dest_vport after a terminating action"
    );
}

#[test]
fn errno_names_round_trip() {
    for e in Errno::ALL {
        assert_eq!(Errno::from_name(e.name()), Some(e));
        assert_eq!(Errno::from_code(e.code()), Some(e));
    }
    assert_eq!(Errno::from_name("enospc"), Some(Errno::ENOSPC));
    assert_eq!(Errno::ENOSPC.code(), 28);
}

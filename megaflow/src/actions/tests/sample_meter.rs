//! The sample and meter actions.

use super::*;

#[test]
fn sample_runs_on_a_copy() {
    let acts = [
        DpAction::Sample {
            probability: u32::MAX,
            actions: Actions::new(vec![
                DpAction::SetEthSrc(0x0200_0000_00aa),
                DpAction::Output(PortNo(9)),
            ]),
        },
        DpAction::Output(PortNo(1)),
    ];
    let mut sink = CollectSink::new();
    let (buf, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(buf, P1_IN);
    assert_eq!(
        sink.outputs,
        vec![(PortNo(9), P1_PORT2.to_vec()), (PortNo(1), P1_IN.to_vec())]
    );
    assert_eq!(sink.sample_calls, vec![u32::MAX]);
    assert_eq!((o.outputs, o.dropped), (2, None));

    let mut sink = CollectSink {
        sample_take: false,
        ..CollectSink::new()
    };
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_IN.to_vec())]);
    assert_eq!(o.outputs, 1);

    // A drop inside the sample drops the copy only; a sample alone
    // delivers only the copy, so the packet itself is dropped.
    let inner = |a: Vec<DpAction>| DpAction::Sample {
        probability: 1 << 31,
        actions: Actions::new(a),
    };
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(
        &[inner(vec![DpAction::Drop]), DpAction::Output(PortNo(1))],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, None));
    let (_, _, o) = run_on(
        &[inner(vec![DpAction::Output(PortNo(4))])],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, Some(DropReason::NoOutput)));
}

#[test]
fn sample_nesting_is_bounded() {
    let mut acts = Actions::new(vec![DpAction::Output(PortNo(0))]);
    for _ in 0..20 {
        acts = Actions::new(vec![
            DpAction::Output(PortNo(0)),
            DpAction::Sample {
                probability: u32::MAX,
                actions: acts,
            },
        ]);
    }
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    // The top level and MAX_SAMPLE_DEPTH nested levels run.
    assert_eq!(o.outputs, MAX_SAMPLE_DEPTH + 1);
    assert_eq!(o.skipped, 1);
}

#[test]
fn meter_drop_and_pass() {
    let acts = [DpAction::Meter(MeterId(5)), DpAction::Output(PortNo(1))];
    let mut sink = CollectSink {
        meter_pass: false,
        ..CollectSink::new()
    };
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert!(sink.outputs.is_empty());
    assert_eq!(sink.meter_calls, vec![(MeterId(5), P1_IN.len())]);
    assert_eq!(o.dropped, Some(DropReason::Meter(MeterId(5))));
    assert!(o.is_dropped());

    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_IN.to_vec())]);
    assert_eq!(o.dropped, None);
}

//! Outputs, drops, userspace and the textual form of actions.

use super::*;

#[test]
fn outputs_to_several_ports_with_changes_between() {
    let acts = [
        DpAction::Output(PortNo(1)),
        DpAction::SetEthSrc(0x0200_0000_00aa),
        DpAction::Output(PortNo(2)),
        DpAction::SetIpv4Dst(ip4("192.168.0.42")),
        DpAction::SetTpSrc(40000),
        DpAction::Output(PortNo(3)),
    ];
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(
        sink.outputs,
        vec![
            (PortNo(1), P1_IN.to_vec()),
            (PortNo(2), P1_PORT2.to_vec()),
            (PortNo(3), P1_PORT3.to_vec()),
        ]
    );
    assert_eq!((o.outputs, o.dropped), (3, None));
    for (_, p) in &sink.outputs {
        check_checksums(p).unwrap();
    }
}

#[test]
fn drop_empty_and_userspace() {
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&[], P1_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::NoOutput));
    let (_, _, o) = run_on(
        &[DpAction::Drop, DpAction::Output(PortNo(1))],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (0, Some(DropReason::Explicit)));
    let (_, _, o) = run_on(
        &[DpAction::Output(PortNo(1)), DpAction::Drop],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, Some(DropReason::Explicit)));

    let mut sink = CollectSink::new();
    let reason = UserspaceReason::controller(128);
    let (_, _, o) = run_on(&[DpAction::Userspace(reason.clone())], P1_IN, &mut sink);
    assert_eq!(sink.userspace, vec![(reason, P1_IN.to_vec())]);
    assert_eq!((o.userspace, o.dropped), (1, None));
    assert_eq!(DropReason::TtlExpired.to_string(), "ttl_expired");
}

#[test]
fn display() {
    let a = Actions::new(vec![
        DpAction::PushVlan {
            tpid: 0x8100,
            tci: 0x1064,
        },
        DpAction::SetIpv4Src(ip4("10.0.0.1")),
        DpAction::Output(PortNo(2)),
    ]);
    assert_eq!(
        a.to_string(),
        "push_vlan(tpid=0x8100,tci=0x1064),set(ipv4_src=10.0.0.1),output:2"
    );
    assert_eq!(Actions::default().to_string(), "drop");
    assert_eq!(Actions::from(vec![DpAction::Drop]).to_string(), "drop");
    let a: Actions = [
        DpAction::PopVlan,
        DpAction::SetEthSrc(0x0200_0000_00aa),
        DpAction::SetEthDst(0xffff_ffff_ffff),
        DpAction::SetIpv6Dst(ip6("2001:db8::1")),
        DpAction::SetDscp(46),
        DpAction::SetEcn(1),
        DpAction::SetTtl(3),
        DpAction::SetTpSrc(1),
        DpAction::SetTpDst(2),
        DpAction::DecTtl,
        DpAction::Meter(MeterId(7)),
        DpAction::Sample {
            probability: u32::MAX / 2,
            actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample(
                SampleCookie {
                    rate: 2,
                    output: SampleOutput::Multiple(2),
                },
            ))]),
        },
        DpAction::Userspace(UserspaceReason::controller(65535)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        a.to_string(),
        "pop_vlan,set(eth_src=02:00:00:00:00:aa),set(eth_dst=ff:ff:ff:ff:ff:ff),\
         set(ipv6_dst=2001:db8::1),set(ip_dscp=46),set(ip_ecn=1),set(ip_ttl=3),\
         set(tp_src=1),set(tp_dst=2),dec_ttl,meter(7),\
         sample(sample=50.0%,actions(userspace(sflow(rate=2,output=multiple:2)))),\
         userspace(controller(max_len=65535))"
    );
    assert_eq!(a.len(), 13);
    assert!(!a.is_empty());
    assert_eq!(a.as_slice()[0], DpAction::PopVlan);
    assert_eq!((&a).into_iter().count(), 13);
}

#[test]
fn a_sample_cookie_names_where_the_flow_sends_the_packet() {
    let out = |a: Vec<DpAction>| SampleOutput::of(&a);
    assert_eq!(out(vec![]), SampleOutput::Drop);
    assert_eq!(out(vec![DpAction::Drop]), SampleOutput::Drop);
    assert_eq!(
        out(vec![DpAction::DecTtl, DpAction::Output(PortNo(4))]),
        SampleOutput::Port(PortNo(4))
    );
    let three = (1..=3).map(|p| DpAction::Output(PortNo(p))).collect();
    assert_eq!(out(three), SampleOutput::Multiple(3));
    // A sampled copy's own actions are not where the packet went.
    let nested = DpAction::Sample {
        probability: 1,
        actions: Actions::new(vec![DpAction::Output(PortNo(9))]),
    };
    assert_eq!(out(vec![nested]), SampleOutput::Drop);
    assert_eq!(
        SampleCookie::new(1000).to_string(),
        "sflow(rate=1000,output=unknown)"
    );
}

//! IPv4 and IPv6 header edits: addresses, TOS / traffic class, TTL.

use super::*;

#[test]
fn ipv4_tcp_set_address_and_port() {
    let (out, o) = output_of(
        &[
            DpAction::SetIpv4Src(ip4("10.1.2.3")),
            DpAction::SetTpDst(8080),
        ],
        P1_IN,
    );
    assert_eq!(out, P1_OUT);
    check_checksums(&out).unwrap();
    assert_eq!(
        o,
        ExecOutcome {
            outputs: 1,
            userspace: 0,
            skipped: 0,
            dropped: None,
            too_big: 0,
            recirc: None,
            forks: 0,
            dp_hash: None,
            rewritten: true,
        }
    );
}

#[test]
fn ipv4_udp_set_address_port_and_ttl() {
    let acts = [
        DpAction::SetIpv4Dst(ip4("172.16.0.9")),
        DpAction::SetTpSrc(5353),
        DpAction::SetTtl(7),
    ];
    let (out, _) = output_of(&acts, P2_IN);
    assert_eq!(out, P2_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv4_tos_dscp_and_ecn() {
    let (out, _) = output_of(&[DpAction::SetDscp(46), DpAction::SetEcn(1)], P1_IN);
    assert_eq!(out, P1_DSCP);
    check_checksums(&out).unwrap();
    // Out-of-range bits are masked off.
    let (out, _) = output_of(
        &[DpAction::SetDscp(46 | 0xc0), DpAction::SetEcn(1 | 0xfc)],
        P1_IN,
    );
    assert_eq!(out, P1_DSCP);
}

#[test]
fn ipv6_tcp_set_source_port_and_hop_limit() {
    let acts = [
        DpAction::SetIpv6Src(ip6("2001:db8:ffff::42")),
        DpAction::SetTpSrc(443),
        DpAction::DecTtl,
    ];
    let (out, _) = output_of(&acts, P5_IN);
    assert_eq!(out, P5_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv6_udp_set_destination_and_port() {
    let acts = [
        DpAction::SetIpv6Dst(ip6("fe80::1234")),
        DpAction::SetTpDst(9999),
    ];
    let (out, _) = output_of(&acts, P6_IN);
    assert_eq!(out, P6_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv6_traffic_class() {
    let (out, _) = output_of(&[DpAction::SetDscp(46), DpAction::SetEcn(1)], P6_IN);
    assert_eq!(out, P6_DSCP);
}

#[test]
fn dec_ttl_to_expiry() {
    let acts = [
        DpAction::DecTtl,
        DpAction::Output(PortNo(1)),
        DpAction::DecTtl,
        DpAction::Output(PortNo(2)),
    ];
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_TTL2, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_TTL1.to_vec())]);
    check_checksums(P1_TTL1).unwrap();
    assert_eq!(o.outputs, 1);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    // TTL 0 expires too; IPv6 hop limit 1 as well.
    let (_, _, o) = run_on(&[DpAction::SetTtl(0), DpAction::DecTtl], P1_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    let (_, _, o) = run_on(&[DpAction::SetTtl(1), DpAction::DecTtl], P6_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    // Not IP: skipped, not dropped.
    let (buf, _, o) = run_on(
        &[DpAction::DecTtl, DpAction::Output(PortNo(3))],
        ARP,
        &mut sink,
    );
    assert_eq!((buf.as_slice(), o.skipped, o.dropped), (ARP, 1, None));
}

#[test]
fn missing_layers_are_skipped() {
    let all_l3_l4 = [
        DpAction::SetIpv4Src(1),
        DpAction::SetIpv4Dst(2),
        DpAction::SetIpv6Src(3),
        DpAction::SetIpv6Dst(4),
        DpAction::SetDscp(5),
        DpAction::SetEcn(1),
        DpAction::SetTtl(9),
        DpAction::DecTtl,
        DpAction::SetTpSrc(7),
        DpAction::SetTpDst(8),
    ];
    // ARP: no IP, no L4.
    let (out, o) = output_of(&all_l3_l4, ARP);
    assert_eq!((out.as_slice(), o.skipped), (ARP, all_l3_l4.len()));
    // IPv6: IPv4 addresses skipped.
    let (out, o) = output_of(&[DpAction::SetIpv4Src(1), DpAction::SetIpv4Dst(2)], P6_IN);
    assert_eq!((out.as_slice(), o.skipped), (P6_IN, 2));
    // IPv4: IPv6 addresses skipped.
    let (out, o) = output_of(&[DpAction::SetIpv6Src(1), DpAction::SetIpv6Dst(2)], P2_IN);
    assert_eq!((out.as_slice(), o.skipped), (P2_IN, 2));
    // Unknown ethertype whose payload looks like IPv4: skipped.
    let mut odd = P2_IN.to_vec();
    odd[12..14].copy_from_slice(&[0x88, 0xb5]);
    let (out, o) = output_of(&all_l3_l4, &odd);
    assert_eq!((out, o.skipped), (odd, all_l3_l4.len()));
    // Truncated frames: everything skipped, nothing panics.
    for n in 0..P2_IN.len() {
        let mut sink = CollectSink::new();
        let mut acts = all_l3_l4.to_vec();
        acts.extend([
            DpAction::SetEthSrc(1),
            DpAction::PopVlan,
            DpAction::Output(PortNo(1)),
        ]);
        let (_, _, o) = run_on(&acts, &P2_IN[..n], &mut sink);
        assert_eq!(o.outputs, 1);
    }
}

//! Ports and L4 checksums: UDP zero checksums, ICMPv6 and SCTP, fragments,
//! IPv6 routing headers.

use super::*;

#[test]
fn ipv4_udp_zero_checksum_stays_zero() {
    let acts = [
        DpAction::SetIpv4Src(ip4("10.9.8.7")),
        DpAction::SetTpDst(4789),
    ];
    let (out, _) = output_of(&acts, P3_IN);
    assert_eq!(out, P3_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn udp_checksum_computing_to_zero_is_sent_as_ffff() {
    let (out, _) = output_of(&[DpAction::SetTpDst(58348)], P2_IN);
    assert_eq!(out, P4_OUT);
    check_checksums(&out).unwrap();
    // And back: 0xffff is a valid stored form of zero to update from.
    let (back, _) = output_of(&[DpAction::SetTpDst(53)], &out);
    assert_eq!(back, P2_IN);
}

#[test]
fn ipv6_icmpv6_pseudo_header() {
    let acts = [
        DpAction::SetIpv6Src(ip6("fd00::a")),
        DpAction::SetIpv6Dst(ip6("fd00::b")),
        DpAction::SetTpSrc(300), // no ICMPv6 type is that large: skipped
    ];
    let (out, o) = output_of(&acts, P7_IN);
    assert_eq!(out, P7_OUT);
    check_checksums(&out).unwrap();
    assert_eq!(o.skipped, 1);
}

#[test]
fn sctp_ports_patch_the_crc32c() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c_bitwise(b"123456789"), 0xe306_9283);
    let (out, _) = output_of(
        &[DpAction::SetTpSrc(5001), DpAction::SetTpDst(36412)],
        SCTP_IN,
    );
    assert_eq!(out, SCTP_OUT);
    check_checksums(&out).unwrap();
    // A wrong CRC stays wrong by the same difference.
    let mut bad = SCTP_IN.to_vec();
    bad[42] ^= 0x5a;
    let (out, _) = output_of(&[DpAction::SetTpSrc(5001), DpAction::SetTpDst(36412)], &bad);
    assert_eq!(out[42], SCTP_OUT[42] ^ 0x5a);
    assert_eq!(out[43..], SCTP_OUT[43..]);
    // Address changes do not touch it (no pseudo-header in SCTP).
    let (out, _) = output_of(&[DpAction::SetIpv4Src(ip4("1.2.3.4"))], SCTP_IN);
    assert_eq!(out[42..46], SCTP_IN[42..46]);
    check_checksums(&out).unwrap();
}

#[test]
fn sctp_first_fragment_is_left_alone() {
    // Same packet with More Fragments set: its CRC covers the reassembled
    // packet, which this fragment does not hold, so ports stay as they are.
    let mut frag = SCTP_IN.to_vec();
    frag[20] |= 0x20;
    let (out, outcome) = output_of(
        &[DpAction::SetTpSrc(5001), DpAction::SetTpDst(36412)],
        &frag,
    );
    assert_eq!(out, frag);
    assert_eq!(outcome.skipped, 2);
}

#[test]
fn later_fragment_has_no_l4() {
    // P2 as a later fragment (offset 8 bytes), header checksum redone.
    let mut frag = P2_IN.to_vec();
    frag[20..22].copy_from_slice(&[0x00, 0x01]);
    let c = full_csum(&[], &frag[14..34], 10);
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    check_checksums(&frag).unwrap();
    assert_eq!(parse(&frag).1.l4, NO_OFFSET);

    let acts = [
        DpAction::SetIpv4Src(ip4("10.9.8.7")),
        DpAction::SetTpDst(99),
    ];
    let (out, o) = output_of(&acts, &frag);
    assert_eq!(o.skipped, 1);
    assert_eq!(out[26..30], [10, 9, 8, 7]);
    assert_eq!(out[34..], frag[34..], "the payload is not an L4 header");
    check_checksums(&out).unwrap();

    // A stale layout that still claims an L4 header is not believed.
    let mut buf = frag.clone();
    let mut layout = parse(P2_IN).1;
    let o = execute(&acts, &mut buf, &mut layout, &mut CollectSink::new());
    assert_eq!(o.skipped, 1);
    assert_eq!(buf[34..], frag[34..]);
}

#[test]
fn ipv6_routing_header_keeps_destination_out_of_the_pseudo_header() {
    // IPv6 / routing header (1 segment left, final destination inside) / TCP.
    let mut pkt = P5_IN[..14].to_vec();
    pkt.extend([0x60, 0, 0, 0, 0x00, 0x30, 43, 64]);
    pkt.extend(ip6("2001:db8::1").to_be_bytes());
    pkt.extend(ip6("2001:db8::2").to_be_bytes());
    pkt.extend([IP_PROTO_TCP, 2, 4, 1, 0, 0, 0, 0]);
    pkt.extend(ip6("2001:db8::99").to_be_bytes());
    pkt.extend(&P5_IN[54..]);
    let (_, layout) = parse(&pkt);
    assert_eq!(layout.l4, 14 + 40 + 24);
    let (out, _) = output_of(&[DpAction::SetIpv6Dst(ip6("2001:db8::3"))], &pkt);
    assert_eq!(out[78..], pkt[78..], "TCP checksum untouched");
    let (out, _) = output_of(&[DpAction::SetIpv6Src(ip6("2001:db8::3"))], &pkt);
    assert_ne!(
        out[94..96],
        pkt[94..96],
        "the source is in the pseudo-header"
    );
    assert_eq!(
        be16(&out[94..]),
        csum_update(
            be16(&pkt[94..]),
            &ip6("2001:db8::1").to_be_bytes(),
            &ip6("2001:db8::3").to_be_bytes()
        )
    );
}

#[test]
fn icmp_type_and_code_are_the_keys_ports_and_keep_the_checksum() {
    // OVN's router answers a ping by setting icmp_type 0 on the request.
    let echo = crate::frame::FrameSpec::ipv4(
        0xc612_0001,
        0xc612_00fe,
        crate::frame::L4::Icmp { ty: 8, code: 0 },
    )
    .build();
    check_checksums(&echo).unwrap();
    let (out, o) = output_of(&[DpAction::SetTpSrc(0), DpAction::SetTpDst(3)], &echo);
    assert_eq!(o.skipped, 0);
    let (key, _) = parse(&out);
    assert_eq!((key.tp_src(), key.tp_dst()), (0, 3));
    check_checksums(&out).unwrap();
    // ICMPv6 (its checksum covers a pseudo-header; the word changes alike).
    let (out, o) = output_of(&[DpAction::SetTpSrc(129)], P7_IN);
    assert_eq!(o.skipped, 0);
    assert_eq!(parse(&out).0.tp_src(), 129);
    check_checksums(&out).unwrap();
}

#[test]
fn a_partial_checksum_is_completed_as_the_nic_would() {
    // TCP and UDP over IPv4, and TCP over IPv6: the checksum field holding
    // the pseudo-header's sum only (what a veth peer sends with TX
    // checksum offload on) becomes the whole checksum.
    for spec in [
        crate::frame::FrameSpec::ipv4(0xc612_0001, 0xc612_0002, crate::frame::L4::tcp(40000, 22)),
        crate::frame::FrameSpec::ipv4(0xc612_0001, 0xc612_0002, crate::frame::L4::udp(68, 67)),
    ] {
        let good = spec.build();
        check_checksums(&good).unwrap();
        let (_, layout) = parse(&good);
        let l4 = usize::from(layout.l4);
        let at = if good[23] == 6 { l4 + 16 } else { l4 + 6 };
        let mut partial = good.clone();
        partial[at] = 0x12;
        partial[at + 1] = 0x34;
        assert!(check_checksums(&partial).is_err());
        assert!(edit::complete_l4_checksum(&mut partial));
        assert_eq!(partial, good);
    }
    let (mut v6, _) = output_of(&[], P7_IN);
    // P7 is ICMPv6: no TCP/UDP checksum to complete.
    assert!(!edit::complete_l4_checksum(&mut v6));
}

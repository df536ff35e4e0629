//! IPv6 headers, extension header chains and fragments.

use super::*;

#[test]
fn ipv6_tcp_and_header_fields() {
    let ip = V6 {
        tc: 0xb9,
        flow: 0xabcde,
        hlim: 255,
        nh: IP_PROTO_TCP,
        ..V6::default()
    }
    .build(&tcp(40003, 22, 0x002, &[2, 4, 5, 0xa0]));
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip));
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x86dd);
    assert_eq!(key.ipv6_src(), IP6_A);
    assert_eq!(key.ipv6_dst(), IP6_B);
    assert_eq!(key.ipv4_src(), 0);
    assert_eq!(key.ip_proto(), 6);
    assert_eq!(key.ip_dscp(), 0x2e);
    assert_eq!(key.ip_ecn(), 1);
    assert_eq!(key.ipv6_label(), 0xabcde);
    assert_eq!(key.ip_ttl(), 255);
    assert_eq!(key.ip_frag(), 0);
    assert_eq!(
        (key.tp_src(), key.tp_dst(), key.tcp_flags()),
        (40003, 22, 0x002)
    );
    assert_eq!(
        ex.layout,
        Layout {
            l3: 14,
            l4: 54,
            l3_end: 78,
            vlans: 0
        }
    );
}

#[test]
fn ipv6_udp_sctp_and_others() {
    let (key, ex) = run(&eth(
        ETH_TYPE_IPV6,
        &V6::default().build(&udp(546, 547, b"x")),
    ));
    assert_eq!(ex.error, None);
    assert_eq!((key.ip_proto(), key.tp_src(), key.tp_dst()), (17, 546, 547));

    let ip = V6 {
        nh: IP_PROTO_SCTP,
        ..V6::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip.build(&sctp(1, 2))));
    assert_eq!(ex.error, None);
    assert_eq!((key.ip_proto(), key.tp_src(), key.tp_dst()), (132, 1, 2));

    // ICMPv4 inside IPv6 is not parsed.
    let ip = V6 {
        nh: IP_PROTO_ICMP,
        ..V6::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip.build(&icmp(8, 0, &[0; 4]))));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 1);
    assert_eq!((key.tp_src(), key.tp_dst()), (0, 0));
    assert_eq!(ex.layout.l4, NO_OFFSET);

    // No next header: protocol 59, whatever follows is ignored.
    let ip = V6 {
        nh: IPV6_NONXT,
        ..V6::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip.build(&[0xff; 3])));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 59);
    assert_eq!(ex.layout.l4, NO_OFFSET);
    assert_eq!(ex.layout.l3_end as usize, 14 + 40 + 3);
}

#[test]
fn bad_ipv6_headers() {
    let good = eth(ETH_TYPE_IPV6, &V6::default().build(&udp(1, 2, b"data")));
    let l2 = only(&extract(7, &good), L2_FIELDS);
    let mut f = good.clone();
    f[14] = 0x40;
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv6));
    assert_eq!(key, l2);
    let mut f = good.clone();
    let plen = (f.len() - 54 + 1) as u16;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv6));
    assert_eq!(key, l2);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn ipv6_payload_length_bounds_l4() {
    // Payload length 0 with trailing bytes that look like UDP.
    let mut f = eth(ETH_TYPE_IPV6, &V6::default().build(&[]));
    f.extend_from_slice(&udp(9, 9, b""));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::TruncatedUdp));
    assert_eq!(key.ip_proto(), 17);
    assert_eq!(key.tp_src(), 0);
    assert_eq!(ex.layout.l3_end, 54);
}

#[test]
fn ipv6_end_must_fit_a_layout_offset() {
    let data = vec![0u8; 65534 - 14 - 40 - 8];
    let f = eth(ETH_TYPE_IPV6, &V6::default().build(&udp(1, 2, &data)));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(ex.layout.l3_end, 65534);
    assert_eq!(key.tp_src(), 1);

    // Largest payload length: the end (14 + 40 + 65535) does not fit a u16.
    let data = vec![0u8; 65535 - 8];
    let f = eth(ETH_TYPE_IPV6, &V6::default().build(&udp(1, 2, &data)));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv6));
    assert_eq!(key.ipv6_src(), 0);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn ipv6_extension_header_chain() {
    // hop-by-hop (8) -> routing (24) -> destination options (16) -> TCP.
    let mut p = ext(IPV6_ROUTING, 0);
    p.extend(ext(IPV6_DSTOPTS, 2));
    p.extend(ext(IP_PROTO_TCP, 1));
    p.extend(tcp(33000, 443, 0x018, &[]));
    let ip = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    }
    .build(&p);
    let f = eth(ETH_TYPE_IPV6, &ip);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 6);
    assert_eq!(key.ip_frag(), 0);
    assert_eq!(
        (key.tp_src(), key.tp_dst(), key.tcp_flags()),
        (33000, 443, 0x018)
    );
    assert_eq!(ex.layout.l4 as usize, 14 + 40 + 8 + 24 + 16);
    assert_eq!(ex.layout.l3_end as usize, f.len());

    // Authentication header (len field 4: 24 bytes) then UDP.
    let mut p = ah(IP_PROTO_UDP, 4);
    assert_eq!(p.len(), 24);
    p.extend(udp(500, 4500, b"ike"));
    let ip = V6 {
        nh: IPV6_AH,
        ..V6::default()
    }
    .build(&p);
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.ip_proto(), key.tp_src(), key.tp_dst()),
        (17, 500, 4500)
    );
    assert_eq!(ex.layout.l4 as usize, 14 + 40 + 24);

    // Unknown upper layer after an extension header: protocol only.
    let mut p = ext(50, 0);
    p.extend_from_slice(&[0; 16]);
    let ip = V6 {
        nh: IPV6_DSTOPTS,
        ..V6::default()
    }
    .build(&p);
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 50);
    assert_eq!(ex.layout.l4, NO_OFFSET);
}

#[test]
fn ipv6_extension_header_limit() {
    // `n` destination options headers, then UDP.
    let chain = |n: usize| {
        let mut p = Vec::new();
        for i in 0..n {
            p.extend(ext(
                if i + 1 == n {
                    IP_PROTO_UDP
                } else {
                    IPV6_DSTOPTS
                },
                0,
            ));
        }
        p.extend(udp(1, 2, b""));
        let nh = if n == 0 { IP_PROTO_UDP } else { IPV6_DSTOPTS };
        eth(
            ETH_TYPE_IPV6,
            &V6 {
                nh,
                ..V6::default()
            }
            .build(&p),
        )
    };
    for n in 0..=MAX_IPV6_EXT_HEADERS {
        let (key, ex) = run(&chain(n));
        assert_eq!(ex.error, None, "{n} extension headers");
        assert_eq!(
            (key.ip_proto(), key.tp_dst()),
            (17, 2),
            "{n} extension headers"
        );
        assert_eq!(ex.layout.l4 as usize, 54 + 8 * n);
    }
    let (key, ex) = run(&chain(MAX_IPV6_EXT_HEADERS + 1));
    assert_eq!(ex.error, Some(ParseError::BadIpv6Ext));
    assert_eq!(key.ip_proto(), 0);
    assert_eq!(key.tp_dst(), 0);
    assert_eq!(key.ipv6_dst(), IP6_B);
    assert_eq!(ex.layout.l4, NO_OFFSET);
}

#[test]
fn ipv6_extension_header_beyond_payload() {
    // Routing header claiming 24 bytes with only 16 in the payload, followed
    // by junk in the frame beyond the payload length.
    let p = ext(IP_PROTO_UDP, 2);
    let ip = V6 {
        nh: IPV6_ROUTING,
        ..V6::default()
    }
    .build(&p[..16]);
    let mut f = eth(ETH_TYPE_IPV6, &ip);
    f.extend_from_slice(&[0; 16]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv6Ext));
    assert_eq!(key.ip_proto(), 0);
    assert_eq!(key.ipv6_src(), IP6_A);
    assert_eq!(ex.layout.l3_end, 14 + 40 + 16);
}

#[test]
fn ipv6_fragment_header() {
    let payload = udp(7000, 8000, &[0x66; 24]);
    let frame = |offset: u16, more: bool| {
        let mut p = frag6(IP_PROTO_UDP, offset, more);
        p.extend_from_slice(&payload);
        eth(
            ETH_TYPE_IPV6,
            &V6 {
                nh: IPV6_FRAGMENT,
                ..V6::default()
            }
            .build(&p),
        )
    };
    // First fragment: L4 parsed.
    let (key, ex) = run(&frame(0, true));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), FRAG_ANY as u64);
    assert_eq!(
        (key.ip_proto(), key.tp_src(), key.tp_dst()),
        (17, 7000, 8000)
    );
    assert_eq!(ex.layout.l4, 14 + 40 + 8);

    // Later fragments (with or without M): protocol, no L4.
    for more in [true, false] {
        let (key, ex) = run(&frame(154, more));
        assert_eq!(ex.error, None);
        assert_eq!(key.ip_frag(), (FRAG_ANY | FRAG_LATER) as u64);
        assert_eq!(key.ip_proto(), 17);
        assert_eq!(key.ipv6_src(), IP6_A);
        assert_eq!((key.tp_src(), key.tp_dst()), (0, 0));
        assert_eq!(ex.layout.l4, NO_OFFSET);
    }

    // Atomic fragment (offset 0, no M, RFC 6946): a whole packet.
    let (key, ex) = run(&frame(0, false));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), 0);
    assert_eq!((key.tp_src(), key.tp_dst()), (7000, 8000));

    // Hop-by-hop, then fragment, then destination options, then UDP.
    let mut p = ext(IPV6_FRAGMENT, 0);
    p.extend(frag6(IPV6_DSTOPTS, 0, true));
    p.extend(ext(IP_PROTO_UDP, 0));
    p.extend_from_slice(&payload);
    let ip = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    }
    .build(&p);
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), FRAG_ANY as u64);
    assert_eq!(key.tp_dst(), 8000);
    assert_eq!(ex.layout.l4, 14 + 40 + 24);

    // Truncated fragment header.
    let ip = V6 {
        nh: IPV6_FRAGMENT,
        ..V6::default()
    }
    .build(&frag6(IP_PROTO_UDP, 0, true)[..7]);
    let (key, ex) = run(&eth(ETH_TYPE_IPV6, &ip));
    assert_eq!(ex.error, Some(ParseError::BadIpv6Ext));
    assert_eq!((key.ip_frag(), key.ip_proto()), (0, 0));
}

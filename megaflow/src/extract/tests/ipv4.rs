//! IPv4 headers, options, padding and fragments.

use super::*;

#[test]
fn ipv4_tcp() {
    let t = tcp(40001, 80, 0x012, &[]);
    let ip = V4 {
        tos: 0xb9,
        ttl: 63,
        proto: IP_PROTO_TCP,
        ..V4::default()
    }
    .build(&t);
    let f = eth(ETH_TYPE_IPV4, &ip);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!(key.ipv4_dst(), ip_u64(IP_B));
    assert_eq!(key.ip_proto(), 6);
    assert_eq!(key.ip_dscp(), 0x2e);
    assert_eq!(key.ip_ecn(), 1);
    assert_eq!(key.ip_ttl(), 63);
    assert_eq!(key.ip_frag(), 0);
    assert_eq!(key.tp_src(), 40001);
    assert_eq!(key.tp_dst(), 80);
    assert_eq!(key.tcp_flags(), 0x012);
    assert_eq!(key.ipv6_src(), 0);
    assert_eq!(
        ex.layout,
        Layout {
            l3: 14,
            l4: 34,
            l3_end: 54,
            vlans: 0
        }
    );
}

#[test]
fn tcp_flags_keep_the_low_12_bits() {
    // NS and all eight classic flags; the data offset nibble is not a flag.
    let t = tcp(1, 2, 0x1ff, &[]);
    let f = eth(
        ETH_TYPE_IPV4,
        &V4 {
            proto: IP_PROTO_TCP,
            ..V4::default()
        }
        .build(&t),
    );
    assert_eq!(extract(0, &f).tcp_flags(), 0x1ff);
    let t = tcp(1, 2, 0x002, &[1, 1, 1, 1, 1, 1, 1, 1]);
    let f = eth(
        ETH_TYPE_IPV4,
        &V4 {
            proto: IP_PROTO_TCP,
            ..V4::default()
        }
        .build(&t),
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.tcp_flags(), 0x002);
}

#[test]
fn ipv4_udp_sctp_icmp() {
    let f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(53, 33333, b"abc")));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.ip_proto(), key.tp_src(), key.tp_dst()),
        (17, 53, 33333)
    );
    assert_eq!(key.tcp_flags(), 0);
    assert_eq!(ex.layout.l4, 34);

    let ip = V4 {
        proto: IP_PROTO_SCTP,
        ..V4::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV4, &ip.build(&sctp(2905, 3868))));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.ip_proto(), key.tp_src(), key.tp_dst()),
        (132, 2905, 3868)
    );
    assert_eq!(ex.layout.l4, 34);

    let ip = V4 {
        proto: IP_PROTO_ICMP,
        ..V4::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV4, &ip.build(&icmp(3, 3, &[0; 4]))));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 1);
    assert_eq!((key.icmp_type(), key.icmp_code()), (3, 3));
    assert_eq!((key.tp_src(), key.tp_dst()), (3, 3));
    assert_eq!(ex.layout.l4, 34);

    // ICMPv6 inside IPv4 is not ICMP: protocol only.
    let ip = V4 {
        proto: IP_PROTO_ICMPV6,
        ..V4::default()
    };
    let (key, ex) = run(&eth(ETH_TYPE_IPV4, &ip.build(&nd(135, IP6_B, &[]))));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 58);
    assert_eq!((key.tp_src(), key.tp_dst(), key.nd_target()), (0, 0, 0));
    assert_eq!(ex.layout.l4, NO_OFFSET);

    // An unknown protocol keeps L3 only.
    let ip = V4 {
        proto: 47,
        ..V4::default()
    };
    let (key, ex) = run(&eth(
        ETH_TYPE_IPV4,
        &ip.build(&[0, 0, 0x65, 0x58, 1, 2, 3, 4]),
    ));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 47);
    assert_eq!(key.tp_src(), 0);
    assert_eq!(ex.layout.l4, NO_OFFSET);
    assert_eq!(ex.layout.l3_end, 42);
}

#[test]
fn ipv4_options_move_l4() {
    // Router alert (4 bytes): IHL 6.
    let ip = V4 {
        opts: vec![0x94, 0x04, 0x00, 0x00],
        ..V4::default()
    };
    let f = eth(ETH_TYPE_IPV4, &ip.build(&udp(1000, 2000, b"")));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (1000, 2000));
    assert_eq!(ex.layout.l4, 14 + 24);
    assert_eq!(key.ipv4_dst(), ip_u64(IP_B));

    // Maximum IHL (15): 40 bytes of NOP options before TCP.
    let ip = V4 {
        proto: IP_PROTO_TCP,
        opts: vec![1; 40],
        ..V4::default()
    };
    let f = eth(ETH_TYPE_IPV4, &ip.build(&tcp(5, 6, 0x010, &[])));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst(), key.tcp_flags()), (5, 6, 0x010));
    assert_eq!(ex.layout.l4, 14 + 60);
    assert_eq!(ex.layout.l3_end, 14 + 60 + 20);
}

#[test]
fn bad_ipv4_headers() {
    let good = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, b"data")));
    let check = |f: &[u8], what: &str| {
        let (key, ex) = run(f);
        assert_eq!(ex.error, Some(ParseError::BadIpv4), "{what}");
        assert_eq!(key, only(&extract(7, &good), L2_FIELDS), "{what}");
        assert_eq!(ex.layout.l3, 14, "{what}");
        assert_eq!(ex.layout.l4, NO_OFFSET, "{what}");
        assert_eq!(ex.layout.l3_end, NO_OFFSET, "{what}");
    };
    let mut f = good.clone();
    f[14] = 0x65; // version 6
    check(&f, "version");
    for ihl in 0..5u8 {
        let mut f = good.clone();
        f[14] = 0x40 | ihl;
        check(&f, "ihl < 5");
    }
    let mut f = good.clone();
    f[14] = 0x46; // IHL 24 > total length 20 below
    f[16..18].copy_from_slice(&20u16.to_be_bytes());
    check(&f, "total length < ihl");
    let mut f = good.clone();
    f[16..18].copy_from_slice(&19u16.to_be_bytes());
    check(&f, "total length < 20");
    let mut f = good.clone();
    let tot = (f.len() - 14 + 1) as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    check(&f, "total length beyond the frame");
    let mut f = good.clone();
    f[14] = 0x4f; // IHL 60, options past the end of frame and total length
    check(&f, "options beyond the packet");
}

#[test]
fn ethernet_padding_is_not_l4() {
    // An IPv4 header alone (total length 20) claiming TCP, padded to the
    // 60-byte minimum with bytes that would look like a TCP header.
    let ip = V4 {
        proto: IP_PROTO_TCP,
        ..V4::default()
    }
    .build(&[]);
    let mut f = eth(ETH_TYPE_IPV4, &ip);
    f.extend_from_slice(&tcp(1234, 80, 0x002, &[]));
    f.resize(60, 0);
    assert_eq!(f.len(), 60);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadTcp));
    assert_eq!(key.ip_proto(), 6);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!((key.tp_src(), key.tp_dst(), key.tcp_flags()), (0, 0, 0));
    assert_eq!(ex.layout.l3_end, 34);
    assert_eq!(ex.layout.l4, NO_OFFSET);

    // TCP whose options end past the IP total length but inside the padding.
    let mut t = tcp(1234, 80, 0x002, &[2, 4, 5, 0xb4]);
    let ip = V4 {
        proto: IP_PROTO_TCP,
        ..V4::default()
    }
    .build(&t[..20]);
    let mut f = eth(ETH_TYPE_IPV4, &ip);
    f.append(&mut t.split_off(20));
    f.resize(60, 0);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadTcp));
    assert_eq!(key.tp_src(), 0);

    // A short UDP datagram padded with junk: parsed, bounded by the IP length.
    let mut f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(7, 9, b"hi")));
    let ip_end = f.len();
    f.resize(60, 0xee);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (7, 9));
    assert_eq!(ex.layout.l3_end as usize, ip_end);

    // UDP header entirely in the padding.
    let ip = V4::default().build(&udp(7, 9, b"")[..4]);
    let mut f = eth(ETH_TYPE_IPV4, &ip);
    f.extend_from_slice(&[0, 8, 0, 0]);
    f.resize(60, 0);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::TruncatedUdp));
    assert_eq!((key.tp_src(), key.tp_dst()), (0, 0));
}

#[test]
fn ipv4_fragments() {
    let payload = udp(5000, 6000, &[0x55; 16]);
    let frame = |frag: u16| {
        eth(
            ETH_TYPE_IPV4,
            &V4 {
                frag,
                ..V4::default()
            }
            .build(&payload),
        )
    };

    // DF alone: not a fragment.
    let (key, ex) = run(&frame(0x4000));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), 0);
    assert_eq!(key.tp_src(), 5000);

    // First fragment: MF, offset 0; L4 parsed.
    let (key, ex) = run(&frame(0x2000));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), FRAG_ANY as u64);
    assert_eq!((key.tp_src(), key.tp_dst()), (5000, 6000));
    assert_eq!(ex.layout.l4, 34);

    // Middle and last fragments: offset != 0; the payload's first bytes are
    // not an L4 header.
    for frag in [0x2000 | 185, 185, 0x4000 | 1, 0x1fff] {
        let (key, ex) = run(&frame(frag));
        assert_eq!(ex.error, None, "{frag:#x}");
        assert_eq!(key.ip_frag(), (FRAG_ANY | FRAG_LATER) as u64, "{frag:#x}");
        assert_eq!(key.ip_proto(), 17);
        assert_eq!(key.ipv4_src(), ip_u64(IP_A));
        assert_eq!((key.tp_src(), key.tp_dst()), (0, 0));
        assert_eq!(ex.layout.l4, NO_OFFSET);
        assert_eq!(ex.layout.l3_end as usize, 14 + 20 + payload.len());
    }

    // The reserved ("evil") bit alone does not make a fragment.
    let (key, _) = run(&frame(0x8000));
    assert_eq!(key.ip_frag(), 0);

    // A later fragment too short to hold any L4 header is still no error.
    let f = eth(
        ETH_TYPE_IPV4,
        &V4 {
            frag: 100,
            ..V4::default()
        }
        .build(&[1]),
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_frag(), 3);
}

#[test]
fn ipv4_end_must_fit_a_layout_offset() {
    // end = 14 + total length; 65534 is the largest representable offset.
    let data = vec![0u8; 65534 - 14 - 20 - 8];
    let f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, &data)));
    assert_eq!(f.len(), 65534);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(ex.layout.l3_end, 65534);
    assert_eq!(key.tp_dst(), 2);

    // One more byte would make l3_end == NO_OFFSET ("absent").
    let data = vec![0u8; 65535 - 14 - 20 - 8];
    let f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, &data)));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv4));
    assert_eq!(key.ipv4_src(), 0);

    // The largest IPv4 packet behind Ethernet and two tags would wrap a u16.
    let data = vec![0u8; 65535 - 20 - 8];
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 1), (ETH_TYPE_VLAN, 2)],
        ETH_TYPE_IPV4,
        &V4::default().build(&udp(1, 2, &data)),
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, Some(ParseError::BadIpv4));
    assert_eq!(key.tp_dst(), 0);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

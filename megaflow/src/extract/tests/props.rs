//! Sample frames and property tests.

use super::*;
use proptest::prelude::*;

/// A handful of valid frames covering every parser path, for mutation.
fn sample_frames() -> Vec<Vec<u8>> {
    let mut chain = ext(IPV6_ROUTING, 0);
    chain.extend(ext(IPV6_FRAGMENT, 1));
    chain.extend(frag6(IPV6_AH, 0, true));
    chain.extend(ah(IP_PROTO_TCP, 1));
    chain.extend(tcp(1, 2, 0x010, &[]));
    let mut snap = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x86, 0xdd];
    snap.extend(V6::default().build(&udp(5, 6, b"")));
    let mut nd_opts = nd_opt(14, &[1; 6]);
    nd_opts.extend(nd_opt(2, &TLL));
    vec![
        eth(
            ETH_TYPE_IPV4,
            &V4 {
                proto: IP_PROTO_TCP,
                opts: vec![0x94, 4, 0, 0],
                ..V4::default()
            }
            .build(&tcp(1, 2, 0x002, &[2, 4, 5, 0xb4])),
        ),
        eth_tagged(
            &[(ETH_TYPE_QINQ, 1), (ETH_TYPE_VLAN, 2)],
            ETH_TYPE_IPV4,
            &V4::default().build(&udp(1, 2, b"payload")),
        ),
        eth(
            ETH_TYPE_IPV4,
            &V4 {
                proto: IP_PROTO_SCTP,
                frag: 0x2000,
                ..V4::default()
            }
            .build(&sctp(1, 2)),
        ),
        eth(
            ETH_TYPE_IPV4,
            &V4 {
                proto: IP_PROTO_ICMP,
                ..V4::default()
            }
            .build(&icmp(8, 0, &[0; 12])),
        ),
        eth(
            ETH_TYPE_IPV6,
            &V6 {
                nh: IPV6_HOPOPTS,
                ..V6::default()
            }
            .build(&chain),
        ),
        v6_icmp(&nd(135, IP6_B, &nd_opt(1, &SLL))),
        v6_icmp(&nd(136, IP6_B, &nd_opts)),
        eth(ETH_TYPE_ARP, &arp(1, MAC_A, IP_A, [0; 6], IP_B)),
        dot3(&snap),
    ]
}

#[test]
fn sample_frames_parse_cleanly() {
    for (i, f) in sample_frames().iter().enumerate() {
        let (key, ex) = run(f);
        assert_eq!(ex.error, None, "sample {i}");
        assert_ne!(key.eth_type(), 0, "sample {i}");
    }
}

/// Frames that start like something the parser knows, then random bytes.
fn plausible_frame() -> impl Strategy<Value = Vec<u8>> {
    let ty = prop_oneof![
        Just(ETH_TYPE_IPV4),
        Just(ETH_TYPE_IPV6),
        Just(ETH_TYPE_ARP),
        Just(ETH_TYPE_VLAN),
        Just(ETH_TYPE_QINQ),
        0u16..0x0600,
        any::<u16>(),
    ];
    (ty, any::<u8>(), prop::collection::vec(any::<u8>(), 0..160)).prop_map(
        |(ty, first, mut body)| {
            // Most IP payloads get the right version nibble and a plausible IHL.
            if let Some(b) = body.first_mut() {
                *b = match ty {
                    ETH_TYPE_IPV4 if first < 200 => 0x45 + (first % 3),
                    ETH_TYPE_IPV6 if first < 200 => 0x60,
                    _ => *b,
                };
            }
            // Make the IP length fields match the body most of the time.
            if first & 1 == 0 {
                let n = body.len();
                if ty == ETH_TYPE_IPV4 && n >= 4 {
                    body[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                }
                if ty == ETH_TYPE_IPV6 && n >= 40 {
                    body[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
                }
            }
            eth(ty, &body)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_on_arbitrary_bytes(
        in_port in any::<u32>(),
        pkt in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut key = FlowKey::from_words([u64::MAX; crate::key::KEY_WORDS]);
        let ex = extract_into(in_port, &pkt, &mut key);
        check_invariants(&pkt, &key, &ex);
        prop_assert_eq!(key.in_port(), in_port as u64);
        prop_assert_eq!(key, extract(in_port, &pkt));
        if pkt.len() < 14 {
            prop_assert_eq!(ex.error, Some(ParseError::TruncatedEthernet));
        }
    }

    #[test]
    fn never_panics_on_plausible_frames(pkt in plausible_frame()) {
        let (_, ex) = run(&pkt);
        // Offsets are recorded for every IP packet that passed its L3 checks.
        if ex.layout.l3_end != NO_OFFSET {
            prop_assert!(ex.error != Some(ParseError::BadIpv4));
            prop_assert!(ex.error != Some(ParseError::BadIpv6));
        }
    }

    #[test]
    fn never_panics_on_mutated_frames(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        tail in prop::collection::vec(any::<u8>(), 0..24),
        mode in 0u8..3,
    ) {
        let frames = sample_frames();
        let mut f = which.get(&frames).clone();
        for (i, b) in &edits {
            let at = i.index(f.len());
            f[at] = *b;
        }
        match mode {
            0 => f.truncate(cut.index(f.len() + 1)),
            1 => f.extend_from_slice(&tail),
            _ => {}
        }
        let (key, ex) = run(&f);
        // Parsing again into a dirty key gives the same result.
        let mut dirty = FlowKey::from_words([!0; crate::key::KEY_WORDS]);
        let again = extract_into(7, &f, &mut dirty);
        prop_assert_eq!((key, ex), (dirty, again));
    }

    #[test]
    fn ipv4_fields_round_trip(
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
        sp in any::<u16>(), dp in any::<u16>(),
        tos in any::<u8>(), ttl in any::<u8>(),
        tcp_flags in 0u16..0x1000, is_tcp in any::<bool>(),
        tci in any::<Option<u16>>(),
        data in prop::collection::vec(any::<u8>(), 0..32),
    ) {
        let (proto, l4) = if is_tcp {
            (IP_PROTO_TCP, tcp(sp, dp, tcp_flags, &[]))
        } else {
            (IP_PROTO_UDP, udp(sp, dp, &data))
        };
        let ip = V4 { tos, ttl, proto, src, dst, ..V4::default() }.build(&l4);
        let f = match tci {
            Some(t) => eth_tagged(&[(ETH_TYPE_VLAN, t)], ETH_TYPE_IPV4, &ip),
            None => eth(ETH_TYPE_IPV4, &ip),
        };
        let (key, ex) = run(&f);
        prop_assert_eq!(ex.error, None);
        prop_assert_eq!(key.ipv4_src(), ip_u64(src));
        prop_assert_eq!(key.ipv4_dst(), ip_u64(dst));
        prop_assert_eq!((key.tp_src(), key.tp_dst()), (sp as u64, dp as u64));
        prop_assert_eq!(key.tcp_flags(), if is_tcp { tcp_flags as u64 } else { 0 });
        prop_assert_eq!((key.ip_dscp() << 2) | key.ip_ecn(), tos as u64);
        prop_assert_eq!(key.ip_ttl(), ttl as u64);
        prop_assert_eq!(key.vlan_tci(), tci.map_or(0, |t| (t | VLAN_PRESENT) as u64));
        prop_assert_eq!(ex.layout.l3_end as usize, f.len());
    }

    #[test]
    fn ipv6_fields_round_trip(
        src in any::<u128>(), dst in any::<u128>(),
        tc in any::<u8>(), flow in 0u32..0x10_0000, hlim in any::<u8>(),
        sp in any::<u16>(), dp in any::<u16>(),
        exts in 0usize..4,
    ) {
        let mut p = Vec::new();
        for i in 0..exts {
            p.extend(ext(if i + 1 == exts { IP_PROTO_UDP } else { IPV6_DSTOPTS }, i as u8));
        }
        p.extend(udp(sp, dp, b""));
        let nh = if exts == 0 { IP_PROTO_UDP } else { IPV6_HOPOPTS };
        let f = eth(ETH_TYPE_IPV6, &V6 { tc, flow, hlim, nh, src, dst }.build(&p));
        let (key, ex) = run(&f);
        prop_assert_eq!(ex.error, None);
        prop_assert_eq!(key.ipv6_src(), src);
        prop_assert_eq!(key.ipv6_dst(), dst);
        prop_assert_eq!((key.ip_dscp() << 2) | key.ip_ecn(), tc as u64);
        prop_assert_eq!(key.ipv6_label(), flow as u64);
        prop_assert_eq!(key.ip_ttl(), hlim as u64);
        prop_assert_eq!((key.ip_proto(), key.tp_src(), key.tp_dst()), (17, sp as u64, dp as u64));
        prop_assert_eq!(ex.layout.l4 as usize, f.len() - 8);
    }
}

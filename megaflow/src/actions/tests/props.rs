//! Property tests: execution never panics, and edits keep every checksum valid.

use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

const BASES: &[&[u8]] = &[
    P1_IN, P1_TTL1, P2_IN, P3_IN, P8_POP_IN, P5_IN, P6_IN, P7_IN, SCTP_IN, ARP,
];

fn arb_leaf() -> impl Strategy<Value = DpAction> {
    (
        0u8..20,
        any::<u64>(),
        any::<u128>(),
        prop_oneof![Just(0x8100u16), Just(0x88a8), any::<u16>()],
    )
        .prop_map(|(kind, a, b, tpid)| match kind {
            0 | 1 => DpAction::Output(PortNo(a as u32)),
            2 => DpAction::Drop,
            3 => DpAction::PushVlan {
                tpid,
                tci: a as u16,
            },
            4 => DpAction::PopVlan,
            5 => DpAction::SetEthSrc(a),
            6 => DpAction::SetEthDst(a),
            7 => DpAction::SetIpv4Src(a as u32),
            8 => DpAction::SetIpv4Dst(a as u32),
            9 => DpAction::SetIpv6Src(b),
            10 => DpAction::SetIpv6Dst(b),
            11 => DpAction::SetDscp(a as u8),
            12 => DpAction::SetEcn(a as u8),
            13 => DpAction::SetTtl(a as u8),
            14 => DpAction::SetTpSrc(a as u16),
            15 => DpAction::SetTpDst(a as u16),
            16 => DpAction::DecTtl,
            17 => DpAction::Meter(MeterId(a as u32)),
            18 => DpAction::Userspace(UserspaceReason::controller(a as u16)),
            _ => DpAction::Userspace(UserspaceReason::Action),
        })
}

fn arb_actions() -> impl Strategy<Value = Vec<DpAction>> {
    let action = arb_leaf().prop_recursive(3, 32, 6, |inner| {
        (any::<u32>(), vec(inner, 0..6)).prop_map(|(probability, a)| DpAction::Sample {
            probability,
            actions: Actions::new(a),
        })
    });
    vec(action, 0..12)
}

/// Random bytes, or a valid frame mutated and possibly cut short.
fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..128),
        (
            0..BASES.len(),
            vec((0usize..100, any::<u8>()), 0..6),
            0usize..100
        )
            .prop_map(|(i, muts, cut)| {
                let mut p = BASES[i].to_vec();
                for (at, v) in muts {
                    if let Some(b) = p.get_mut(at) {
                        *b = v;
                    }
                }
                if cut % 3 == 0 {
                    p.truncate(p.len().saturating_sub(cut));
                }
                p
            }),
    ]
}

fn arb_offset() -> impl Strategy<Value = u16> {
    prop_oneof![Just(NO_OFFSET), 0u16..130, any::<u16>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics(
        pkt in arb_packet(),
        actions in arb_actions(),
        meter_pass in any::<bool>(),
        sample_take in any::<bool>(),
        random_layout in prop::option::of((arb_offset(), arb_offset(), arb_offset(), any::<u8>())),
    ) {
        let mut sink = CollectSink { meter_pass, sample_take, ..CollectSink::new() };
        let mut buf = pkt.clone();
        let mut layout = match random_layout {
            Some((l3, l4, l3_end, vlans)) => Layout { l3, l4, l3_end, vlans },
            None => parse(&pkt).1,
        };
        let o = execute(&actions, &mut buf, &mut layout, &mut sink);
        prop_assert_eq!(o.outputs, sink.outputs.len());
        prop_assert_eq!(o.userspace, sink.userspace.len());
    }
}

/// A valid IPv4 or IPv6 packet with TCP, UDP or (IPv6) ICMPv6.
#[derive(Clone, Debug)]
struct Spec {
    v6: bool,
    src: u128,
    dst: u128,
    proto: u8,
    sport: u16,
    dport: u16,
    ttl: u8,
    tos: u8,
    udp_zero: bool,
    payload: Vec<u8>,
}

fn arb_spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        any::<u128>(),
        any::<u128>(),
        0u8..3,
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<bool>(),
        vec(any::<u8>(), 0..40),
    )
        .prop_map(
            |(v6, src, dst, p, sport, dport, ttl, tos, udp_zero, payload)| {
                let proto = match p {
                    0 => IP_PROTO_TCP,
                    1 => IP_PROTO_UDP,
                    _ if v6 => IP_PROTO_ICMPV6,
                    _ => IP_PROTO_UDP,
                };
                let (src, dst) = if v6 {
                    (src, dst)
                } else {
                    (src & 0xffff_ffff, dst & 0xffff_ffff)
                };
                Spec {
                    v6,
                    src,
                    dst,
                    proto,
                    sport,
                    dport,
                    ttl,
                    tos,
                    udp_zero,
                    payload,
                }
            },
        )
}

/// Builds the packet, every checksum computed in full.
fn build(s: &Spec) -> Vec<u8> {
    let mut l4 = match s.proto {
        IP_PROTO_TCP => {
            let mut t = vec![0u8; 20];
            t[0..2].copy_from_slice(&s.sport.to_be_bytes());
            t[2..4].copy_from_slice(&s.dport.to_be_bytes());
            t[12] = 0x50;
            t[13] = 0x18;
            t
        }
        IP_PROTO_UDP => {
            let mut u = vec![0u8; 8];
            u[0..2].copy_from_slice(&s.sport.to_be_bytes());
            u[2..4].copy_from_slice(&s.dport.to_be_bytes());
            u[4..6].copy_from_slice(&((8 + s.payload.len()) as u16).to_be_bytes());
            u
        }
        _ => vec![128, 0, 0, 0, 0, 1, 0, 1],
    };
    l4.extend(&s.payload);
    let len = l4.len();
    let mut pkt = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    let pseudo = if s.v6 {
        pkt.extend(ETH_TYPE_IPV6.to_be_bytes());
        let vtcfl = (6u32 << 28) | (u32::from(s.tos) << 20) | 0xbeef;
        pkt.extend(vtcfl.to_be_bytes());
        pkt.extend((len as u16).to_be_bytes());
        pkt.extend([s.proto, s.ttl]);
        pkt.extend(s.src.to_be_bytes());
        pkt.extend(s.dst.to_be_bytes());
        let mut ph = pkt[22..54].to_vec();
        ph.extend((len as u32).to_be_bytes());
        ph.extend([0, 0, 0, s.proto]);
        ph
    } else {
        pkt.extend(ETH_TYPE_IPV4.to_be_bytes());
        pkt.extend([0x45, s.tos]);
        pkt.extend(((20 + len) as u16).to_be_bytes());
        pkt.extend([0, 7, 0, 0, s.ttl, s.proto, 0, 0]);
        pkt.extend((s.src as u32).to_be_bytes());
        pkt.extend((s.dst as u32).to_be_bytes());
        let c = full_csum(&[], &pkt[14..34], 10);
        pkt[24..26].copy_from_slice(&c.to_be_bytes());
        let mut ph = pkt[26..34].to_vec();
        ph.extend([0, s.proto]);
        ph.extend((len as u16).to_be_bytes());
        ph
    };
    let at = match s.proto {
        IP_PROTO_TCP => 16,
        IP_PROTO_UDP => 6,
        _ => 2,
    };
    let mut c = full_csum(&pseudo, &l4, at);
    if s.proto == IP_PROTO_UDP {
        c = if s.udp_zero {
            0
        } else if c == 0 {
            0xffff
        } else {
            c
        };
    }
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    pkt.extend(l4);
    pkt
}

fn arb_edit() -> impl Strategy<Value = DpAction> {
    (0u8..13, any::<u128>(), any::<bool>()).prop_map(|(kind, v, qinq)| match kind {
        0 => DpAction::SetIpv4Src(v as u32),
        1 => DpAction::SetIpv4Dst(v as u32),
        2 => DpAction::SetIpv6Src(v),
        3 => DpAction::SetIpv6Dst(v),
        4 => DpAction::SetDscp(v as u8),
        5 => DpAction::SetEcn(v as u8),
        6 => DpAction::SetTtl(v as u8),
        7 => DpAction::DecTtl,
        8 => DpAction::SetTpSrc(v as u16),
        9 => DpAction::SetTpDst(v as u16),
        10 => DpAction::PushVlan {
            tpid: if qinq { ETH_TYPE_QINQ } else { ETH_TYPE_VLAN },
            tci: v as u16,
        },
        11 => DpAction::PopVlan,
        _ => DpAction::SetEthSrc(v as u64),
    })
}

/// What the packet's fields should be after the edits, by a simple model.
fn model(s: &Spec, edits: &[DpAction]) -> (Spec, usize, i32, bool) {
    let mut m = s.clone();
    let (mut skipped, mut vlans) = (0, 0i32);
    let icmp = m.proto == IP_PROTO_ICMPV6;
    if icmp {
        // An echo request: the key's tp_src and tp_dst are its type and
        // code, which the edits rewrite (a value over a byte is skipped).
        (m.sport, m.dport) = (128, 0);
    }
    for e in edits {
        match *e {
            DpAction::SetIpv4Src(a) if !m.v6 => m.src = u128::from(a),
            DpAction::SetIpv4Dst(a) if !m.v6 => m.dst = u128::from(a),
            DpAction::SetIpv6Src(a) if m.v6 => m.src = a,
            DpAction::SetIpv6Dst(a) if m.v6 => m.dst = a,
            DpAction::SetDscp(d) => m.tos = (m.tos & 3) | ((d & 0x3f) << 2),
            DpAction::SetEcn(e) => m.tos = (m.tos & 0xfc) | (e & 3),
            DpAction::SetTtl(t) => m.ttl = t,
            DpAction::DecTtl if m.ttl <= 1 => return (m, skipped, vlans, true),
            DpAction::DecTtl => m.ttl -= 1,
            DpAction::SetTpSrc(p) if !icmp || p <= 0xff => m.sport = p,
            DpAction::SetTpDst(p) if !icmp || p <= 0xff => m.dport = p,
            DpAction::PushVlan { .. } => vlans += 1,
            DpAction::PopVlan => vlans = (vlans - 1).max(0),
            DpAction::SetEthSrc(_) => {}
            _ => skipped += 1,
        }
    }
    (m, skipped, vlans, false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn edits_keep_checksums_valid(spec in arb_spec(), edits in vec(arb_edit(), 0..10)) {
        let pkt = build(&spec);
        prop_assert_eq!(check_checksums(&pkt), Ok(()));
        let (want, want_skipped, vlans, expired) = model(&spec, &edits);

        let mut all = edits.clone();
        all.push(DpAction::Output(PortNo(1)));
        let mut sink = CollectSink::new();
        let (buf, layout, o) = run_on(&all, &pkt, &mut sink);
        if expired {
            prop_assert_eq!(o.dropped, Some(DropReason::TtlExpired));
            prop_assert!(sink.outputs.is_empty());
            return Ok(());
        }
        prop_assert_eq!(o.dropped, None);
        prop_assert_eq!(o.skipped, want_skipped);
        prop_assert_eq!(&sink.outputs, &vec![(PortNo(1), buf.clone())]);
        prop_assert_eq!(usize::from(layout.vlans), vlans as usize);
        if vlans > 2 {
            // Extraction stops after two tags; pop the rest to check.
            let mut buf = buf.clone();
            let mut layout = layout;
            let pops = vec![DpAction::PopVlan; vlans as usize - 2];
            execute(&pops, &mut buf, &mut layout, &mut CollectSink::new());
            prop_assert_eq!(layout, parse(&buf).1);
            prop_assert_eq!(check_checksums(&buf), Ok(()));
            return Ok(());
        }
        prop_assert_eq!(layout, parse(&buf).1);
        prop_assert_eq!(check_checksums(&buf), Ok(()));

        let (key, _) = parse(&buf);
        if spec.v6 {
            prop_assert_eq!((key.ipv6_src(), key.ipv6_dst()), (want.src, want.dst));
        } else {
            prop_assert_eq!((key.ipv4_src(), key.ipv4_dst()), (want.src as u64, want.dst as u64));
        }
        prop_assert_eq!(key.ip_dscp(), u64::from(want.tos >> 2));
        prop_assert_eq!(key.ip_ecn(), u64::from(want.tos & 3));
        prop_assert_eq!(key.ip_ttl(), u64::from(want.ttl));
        prop_assert_eq!((key.tp_src(), key.tp_dst()), (u64::from(want.sport), u64::from(want.dport)));
        if !spec.v6 && spec.proto == IP_PROTO_UDP && spec.udp_zero {
            let l4 = usize::from(layout.l4);
            prop_assert_eq!(&buf[l4 + 6..l4 + 8], &[0u8, 0][..]);
        }
    }
}

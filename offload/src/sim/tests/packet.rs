//! Tests of the device's view of a packet: key extraction and edits.

use super::*;
use crate::prm::{set, PrmField, FIELDS};
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Offsets against the layout table.

fn byte_of(f: PrmField) -> usize {
    usize::from(f.def().bit) / 8
}

/// The byte and bit mask `set(f, 1)` touches, for one-bit fields.
fn flag_of(f: PrmField) -> (usize, u8) {
    let mut b = [0u8; ENCODED_LEN];
    set(&mut b, f, 1).unwrap();
    let i = b.iter().position(|&x| x != 0).unwrap();
    (i, b[i])
}

#[test]
fn fast_offsets_match_the_field_table() {
    assert_eq!(byte_of(PrmField::OuterSmac), W_SMAC_ETHERTYPE * 8);
    assert_eq!(byte_of(PrmField::OuterEthertype), W_SMAC_ETHERTYPE * 8 + 6);
    assert_eq!(byte_of(PrmField::OuterDmac), W_DMAC_TCI * 8);
    assert_eq!(byte_of(PrmField::OuterFirstPrio), W_DMAC_TCI * 8 + 6);
    assert_eq!(byte_of(PrmField::OuterIpProtocol), W_L3_TCP * 8);
    assert_eq!(byte_of(PrmField::OuterIpDscp), W_L3_TCP * 8 + 1);
    assert_eq!(byte_of(PrmField::OuterIpEcn), W_L3_TCP * 8 + 1);
    assert_eq!(byte_of(PrmField::OuterTcpSport), W_L3_TCP * 8 + 4);
    assert_eq!(byte_of(PrmField::OuterTcpDport), W_L3_TCP * 8 + 6);
    assert_eq!(byte_of(PrmField::OuterIpTtlHoplimit), W_TTL_UDP * 8 + 3);
    assert_eq!(byte_of(PrmField::OuterUdpSport), W_TTL_UDP * 8 + 4);
    assert_eq!(byte_of(PrmField::OuterUdpDport), W_TTL_UDP * 8 + 6);
    assert_eq!(byte_of(PrmField::OuterSrcIp), W_SRC_IP * 8);
    assert_eq!(byte_of(PrmField::OuterDstIp), W_SRC_IP * 8 + 16);
    assert_eq!(
        byte_of(PrmField::MiscSourcePort),
        W_MISC_SOURCE_PORT * 8 + 6
    );
    assert_eq!(
        byte_of(PrmField::MiscOuterSecondPrio),
        W_MISC_SECOND_VLAN * 8
    );
    assert_eq!(byte_of(PrmField::Misc2MetadataRegC7), W_REG_C7 * 8);
    assert_eq!(byte_of(PrmField::Misc2MetadataRegC0), W_REG_C7 * 8 + 28);
    assert_eq!(flag_of(PrmField::OuterCvlanTag), (18, CVLAN_TAG));
    assert_eq!(flag_of(PrmField::OuterSvlanTag), (18, SVLAN_TAG));
    assert_eq!(flag_of(PrmField::OuterFrag), (18, FRAG));
    assert_eq!(flag_of(PrmField::OuterIpVersion), (18, 1 << 1));
    assert_eq!(flag_of(PrmField::OuterTcpFlags), (19, 1));
    assert_eq!(
        flag_of(PrmField::MiscOuterSecondCvlanTag),
        (W_MISC_SECOND_VLAN * 8 + 4, SECOND_CVLAN_TAG)
    );
    assert_eq!(
        flag_of(PrmField::MiscOuterSecondSvlanTag),
        (W_MISC_SECOND_VLAN * 8 + 4, SECOND_SVLAN_TAG)
    );
    // The whole key fits the encoded blocks.
    assert!(FIELDS.iter().all(|d| d.end_byte() <= KEY_WORDS * 8));
}

#[test]
fn bytes_and_words_agree() {
    let mut b = [0u8; ENCODED_LEN];
    for (i, x) in b.iter_mut().enumerate() {
        *x = i as u8;
    }
    let k = PacketKey::from_bytes(&b);
    assert_eq!(k.bytes(), b);
    assert_eq!(
        k.words[1],
        u64::from_ne_bytes([8, 9, 10, 11, 12, 13, 14, 15])
    );
    assert_eq!(PacketKey::default(), PacketKey::ZERO);
}

// ---------------------------------------------------------------------------
// The slow reference extractor: every field through prm::set.

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_int(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

fn reference(pkt: &[u8], vport: u16, regs: &[u32; 8]) -> [u8; ENCODED_LEN] {
    let mut b = [0u8; ENCODED_LEN];
    let mut s = |f: PrmField, v: u128| set(&mut b, f, v).unwrap();
    s(PrmField::MiscSourcePort, u128::from(vport));
    for (n, &r) in regs.iter().enumerate() {
        s(PrmField::reg_c(n as u8).unwrap(), u128::from(r));
    }
    let Some((dport, t)) = reference_headers(pkt, 0, &mut s, false) else {
        return b;
    };
    // The tunnel on its IANA port.
    let h = pkt.get(t..t + 8);
    let inner = match (dport, h) {
        (4789, Some(h)) => {
            s(PrmField::MiscVxlanVni, be_int(&h[4..7]));
            Some(t + 8)
        }
        (6081, Some(h)) => {
            s(PrmField::MiscGeneveVni, be_int(&h[4..7]));
            s(PrmField::MiscGeneveOam, u128::from(h[1] >> 7));
            s(PrmField::MiscGeneveOptLen, u128::from(h[0] & 0x3f));
            s(PrmField::MiscGeneveProtocolType, u128::from(be16(&h[2..])));
            (be16(&h[2..]) == 0x6558).then_some(t + 8 + usize::from(h[0] & 0x3f) * 4)
        }
        _ => None,
    };
    if let Some(inner) = inner {
        reference_headers(pkt, inner, &mut s, true);
    }
    b
}

/// One block of headers (outer or inner) through `prm::set`: the UDP
/// destination port and payload offset of an unfragmented UDP packet.
fn reference_headers(
    pkt: &[u8],
    start: usize,
    s: &mut impl FnMut(PrmField, u128),
    inner: bool,
) -> Option<(u16, usize)> {
    use PrmField::*;
    let pick = |o: PrmField, i: PrmField| if inner { i } else { o };
    if pkt.len() < start + 14 {
        return None;
    }
    s(pick(OuterDmac, InnerDmac), be_int(&pkt[start..start + 6]));
    s(
        pick(OuterSmac, InnerSmac),
        be_int(&pkt[start + 6..start + 12]),
    );
    let mut ty = be16(&pkt[start + 12..]);
    let mut off = start + 14;
    for tag in 0..2 {
        if !(ty == 0x8100 || ty == 0x88a8) || pkt.len() < off + 4 {
            break;
        }
        let tci = be16(&pkt[off..]);
        let c = ty == 0x8100;
        let (cv, sv, prio, cfi, vid) = match (tag, inner) {
            (0, false) => (
                OuterCvlanTag,
                OuterSvlanTag,
                OuterFirstPrio,
                OuterFirstCfi,
                OuterFirstVid,
            ),
            (0, true) => (
                InnerCvlanTag,
                InnerSvlanTag,
                InnerFirstPrio,
                InnerFirstCfi,
                InnerFirstVid,
            ),
            (_, false) => (
                MiscOuterSecondCvlanTag,
                MiscOuterSecondSvlanTag,
                MiscOuterSecondPrio,
                MiscOuterSecondCfi,
                MiscOuterSecondVid,
            ),
            (_, true) => (
                MiscInnerSecondCvlanTag,
                MiscInnerSecondSvlanTag,
                MiscInnerSecondPrio,
                MiscInnerSecondCfi,
                MiscInnerSecondVid,
            ),
        };
        s(if c { cv } else { sv }, 1);
        s(prio, u128::from(tci >> 13));
        s(cfi, u128::from((tci >> 12) & 1));
        s(vid, u128::from(tci & 0xfff));
        ty = be16(&pkt[off + 2..]);
        off += 4;
    }
    s(pick(OuterEthertype, InnerEthertype), u128::from(ty));
    let l3 = &pkt[off..];
    let (proto, l4, frag) = if ty == 0x0800 && l3.len() >= 20 && l3[0] >> 4 == 4 {
        s(pick(OuterIpVersion, InnerIpVersion), 4);
        s(pick(OuterIpProtocol, InnerIpProtocol), u128::from(l3[9]));
        s(pick(OuterIpDscp, InnerIpDscp), u128::from(l3[1] >> 2));
        s(pick(OuterIpEcn, InnerIpEcn), u128::from(l3[1] & 3));
        s(
            pick(OuterIpTtlHoplimit, InnerIpTtlHoplimit),
            u128::from(l3[8]),
        );
        let mf = l3[6] & 0x20 != 0;
        let offset = be16(&l3[6..]) & 0x1fff;
        s(pick(OuterFrag, InnerFrag), u128::from(mf || offset != 0));
        s(pick(OuterSrcIp, InnerSrcIp), be_int(&l3[12..16]));
        s(pick(OuterDstIp, InnerDstIp), be_int(&l3[16..20]));
        let ihl = usize::from(l3[0] & 15) * 4;
        if offset == 0 && ihl >= 20 {
            (l3[9], Some(off + ihl), mf)
        } else {
            (l3[9], None, true)
        }
    } else if ty == 0x86dd && l3.len() >= 40 && l3[0] >> 4 == 6 {
        s(pick(OuterIpVersion, InnerIpVersion), 6);
        s(pick(OuterIpProtocol, InnerIpProtocol), u128::from(l3[6]));
        let tc = (be16(&l3[0..]) >> 4) & 0xff;
        s(pick(OuterIpDscp, InnerIpDscp), u128::from(tc >> 2));
        s(pick(OuterIpEcn, InnerIpEcn), u128::from(tc & 3));
        s(
            pick(OuterIpTtlHoplimit, InnerIpTtlHoplimit),
            u128::from(l3[7]),
        );
        s(pick(OuterFrag, InnerFrag), u128::from(l3[6] == 44));
        s(pick(OuterSrcIp, InnerSrcIp), be_int(&l3[8..24]));
        s(pick(OuterDstIp, InnerDstIp), be_int(&l3[24..40]));
        (l3[6], Some(off + 40), l3[6] == 44)
    } else {
        (0, None, false)
    };
    let t = pkt.get(l4?..).unwrap_or(&[]);
    if proto == 6 && t.len() >= 20 {
        s(
            pick(OuterTcpSport, InnerTcpSport),
            u128::from(be16(&t[0..])),
        );
        s(
            pick(OuterTcpDport, InnerTcpDport),
            u128::from(be16(&t[2..])),
        );
        s(
            pick(OuterTcpFlags, InnerTcpFlags),
            u128::from(be16(&t[12..]) & 0x1ff),
        );
    } else if proto == 17 && t.len() >= 8 {
        s(
            pick(OuterUdpSport, InnerUdpSport),
            u128::from(be16(&t[0..])),
        );
        s(
            pick(OuterUdpDport, InnerUdpDport),
            u128::from(be16(&t[2..])),
        );
        return (!frag).then_some((be16(&t[2..]), l4? + 8));
    }
    None
}

// ---------------------------------------------------------------------------
// Random frames: tags, IPv4 with options and fragments, IPv6, TCP, UDP,
// other protocols, cut anywhere, sometimes corrupted.

#[derive(Clone, Debug)]
enum L3 {
    V4 {
        version: u8,
        ihl: u8,
        tos: u8,
        frag: u16,
        ttl: u8,
        proto: u8,
        src: u32,
        dst: u32,
    },
    V6 {
        version: u8,
        tc: u8,
        nh: u8,
        hop: u8,
        src: u128,
        dst: u128,
    },
    Other(u16),
}

#[derive(Clone, Debug)]
struct Frame {
    macs: [u8; 12],
    tags: Vec<(bool, u16)>,
    l3: L3,
    l4: Vec<u8>,
    cut: Option<usize>,
    flip: Option<(usize, u8)>,
}

fn arb_l3() -> impl Strategy<Value = L3> {
    let proto = prop_oneof![
        Just(6u8),
        Just(17),
        Just(1),
        Just(44),
        Just(58),
        any::<u8>()
    ];
    let proto6 = prop_oneof![
        Just(6u8),
        Just(17),
        Just(44),
        Just(0),
        Just(58),
        any::<u8>()
    ];
    let frag = prop_oneof![
        Just(0u16),
        Just(0x4000),
        Just(0x2000),
        Just(0x0010),
        Just(0x2010),
        any::<u16>()
    ];
    let version4 = prop_oneof![4 => Just(4u8), 1 => 0..16u8];
    let version6 = prop_oneof![4 => Just(6u8), 1 => 0..16u8];
    prop_oneof![
        3 => (
            version4,
            prop_oneof![4 => Just(5u8), 2 => 6..16u8, 1 => 0..5u8],
            any::<u8>(),
            frag,
            any::<u8>(),
            proto,
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(version, ihl, tos, frag, ttl, proto, src, dst)| L3::V4 {
                version,
                ihl,
                tos,
                frag,
                ttl,
                proto,
                src,
                dst
            }),
        2 => (version6, any::<u8>(), proto6, any::<u8>(), any::<u128>(), any::<u128>())
            .prop_map(|(version, tc, nh, hop, src, dst)| L3::V6 {
                version,
                tc,
                nh,
                hop,
                src,
                dst
            }),
        1 => prop_oneof![Just(0x0806u16), Just(0x8100), Just(0x88a8), any::<u16>()]
            .prop_map(L3::Other),
    ]
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    (
        any::<[u8; 12]>(),
        vec((any::<bool>(), any::<u16>()), 0..4),
        arb_l3(),
        vec(any::<u8>(), 0..40),
        prop::option::weighted(0.3, 0..120usize),
        prop::option::weighted(0.1, (0..120usize, any::<u8>())),
    )
        .prop_map(|(macs, tags, l3, l4, cut, flip)| Frame {
            macs,
            tags,
            l3,
            l4,
            cut,
            flip,
        })
}

/// A VXLAN or Geneve packet (over IPv4 or IPv6, on the IANA port) whose
/// inner frame is any frame: the outer headers as `arb_frame` makes them,
/// Geneve with up to 3 words of options, mostly an Ethernet payload.
fn arb_tunnel_frame() -> impl Strategy<Value = Frame> {
    (
        arb_frame(),
        any::<bool>(),
        any::<bool>(),
        any::<[u8; 8]>(),
        0..4u8,
        prop::option::weighted(0.8, Just(0x6558u16)),
        arb_frame(),
        prop::option::weighted(0.2, 0..200usize),
    )
        .prop_map(|(mut f, v6, geneve, mut th, opts, proto, inner, cut)| {
            f.l3 = if v6 {
                L3::V6 {
                    version: 6,
                    tc: th[7],
                    nh: 17,
                    hop: 64,
                    src: 0x2001_0db8 << 96 | 1,
                    dst: 0x2001_0db8 << 96 | 2,
                }
            } else {
                L3::V4 {
                    version: 4,
                    ihl: 5,
                    tos: th[7],
                    frag: 0x4000,
                    ttl: 64,
                    proto: 17,
                    src: 0xc613_0002,
                    dst: 0xc613_0001,
                }
            };
            let port: u16 = if geneve { 6081 } else { 4789 };
            if geneve {
                th[0] = (th[0] & 0xc0) | opts;
                if let Some(p) = proto {
                    th[2..4].copy_from_slice(&p.to_be_bytes());
                }
            }
            let mut l4 = vec![0x30, 0x39];
            l4.extend(port.to_be_bytes());
            l4.extend([0, 0, 0, 0]);
            l4.extend(th);
            if geneve {
                l4.extend(std::iter::repeat_n(0xaau8, usize::from(opts) * 4));
            }
            l4.extend(build(&inner));
            f.l4 = l4;
            f.cut = cut;
            f.flip = None;
            f
        })
}

fn build(f: &Frame) -> Vec<u8> {
    let mut p = f.macs.to_vec();
    for &(c, tci) in &f.tags {
        p.extend(if c { [0x81, 0x00] } else { [0x88, 0xa8] });
        p.extend(tci.to_be_bytes());
    }
    match &f.l3 {
        L3::V4 {
            version,
            ihl,
            tos,
            frag,
            ttl,
            proto,
            src,
            dst,
        } => {
            p.extend([0x08, 0x00, (version << 4) | (ihl & 15), *tos]);
            let opts = usize::from(*ihl).saturating_sub(5) * 4;
            let total = 20 + opts + f.l4.len();
            p.extend((total as u16).to_be_bytes());
            p.extend([0, 0]);
            p.extend(frag.to_be_bytes());
            p.extend([*ttl, *proto, 0, 0]);
            p.extend(src.to_be_bytes());
            p.extend(dst.to_be_bytes());
            p.extend(std::iter::repeat_n(1u8, opts));
        }
        L3::V6 {
            version,
            tc,
            nh,
            hop,
            src,
            dst,
        } => {
            p.extend([0x86, 0xdd, (version << 4) | (tc >> 4), tc << 4, 0, 0]);
            p.extend((f.l4.len() as u16).to_be_bytes());
            p.extend([*nh, *hop]);
            p.extend(src.to_be_bytes());
            p.extend(dst.to_be_bytes());
        }
        L3::Other(ty) => p.extend(ty.to_be_bytes()),
    }
    p.extend(&f.l4);
    if let Some(n) = f.cut {
        p.truncate(n);
    }
    if let Some((i, x)) = f.flip {
        if let Some(b) = p.get_mut(i) {
            *b ^= x;
        }
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_extractor_matches_the_reference(
        f in prop_oneof![2 => arb_frame(), 1 => arb_tunnel_frame()],
        vport in any::<u16>(),
        regs in any::<[u32; 8]>(),
    ) {
        let pkt = build(&f);
        let mut k = PacketKey::ZERO;
        k.words = [!0; KEY_WORDS]; // overwritten whole
        extract_key(&pkt, vport, &regs, &mut k);
        let want = reference(&pkt, vport, &regs);
        prop_assert_eq!(k.bytes().to_vec(), want.to_vec(), "{:02x?}", pkt);
    }
}

proptest! {
    #[test]
    fn extract_never_panics(pkt in vec(any::<u8>(), 0..200), vport in any::<u16>()) {
        let regs = [7u32; 8];
        let mut k = PacketKey::ZERO;
        extract_key(&pkt, vport, &regs, &mut k);
        prop_assert_eq!(k.bytes().to_vec(), reference(&pkt, vport, &regs).to_vec());
    }

    #[test]
    fn edits_never_panic(
        f in arb_frame(),
        ops in vec(arb_any_op(), 0..6),
        header in any::<u32>(),
    ) {
        let mut pkt = build(&f);
        let mut regs = [0u32; 8];
        apply_modify(&mut pkt, &mut regs, &ops);
        for field in ModifyField::ALL {
            let _ = read_field(&pkt, &regs, field);
        }
        push_vlan(&mut pkt, header);
        pop_vlan(&mut pkt);
    }
}

/// Any op, valid or not (offsets and lengths up to 63).
fn arb_any_op() -> impl Strategy<Value = ModifyOp> {
    let field = || proptest::sample::select(ModifyField::ALL.to_vec());
    prop_oneof![
        (field(), 0..64u8, 0..64u8, any::<u32>()).prop_map(|(field, offset, length, data)| {
            ModifyOp::Set {
                field,
                offset,
                length,
                data,
            }
        }),
        (field(), any::<u32>()).prop_map(|(field, data)| ModifyOp::Add { field, data }),
        (field(), 0..64u8, 0..64u8, field(), 0..64u8).prop_map(
            |(src, src_offset, length, dst, dst_offset)| ModifyOp::Copy {
                src,
                src_offset,
                length,
                dst,
                dst_offset,
            }
        ),
    ]
}

#[test]
fn key_of_a_tagged_tcp_packet() {
    let spec = Spec {
        v6: false,
        tcp: true,
        tagged: true,
        udp_csum: true,
    };
    let pkt = spec.build();
    let regs = [0, 1, 2, 3, 4, 5, 6, 0xc0c0_0007];
    let mut k = PacketKey::ZERO;
    extract_key(&pkt, 0x1234, &regs, &mut k);
    let b = k.bytes();
    assert_eq!(b[0..6], pkt[6..12], "smac");
    assert_eq!(b[6..8], [0x08, 0x00], "ethertype after the tag");
    assert_eq!(b[8..14], pkt[0..6], "dmac");
    assert_eq!(b[14..16], [0x20, 0x64], "prio 1, vid 100");
    assert_eq!(b[16], 6);
    assert_eq!(b[17], 0xb8 | 1, "dscp 46, ecn 1");
    assert_eq!(b[18], CVLAN_TAG | (4 << 1));
    assert_eq!(b[19], 0x18, "PSH|ACK");
    assert_eq!(b[20..24], [0x30, 0x39, 0x00, 0x50]);
    assert_eq!(b[27], 64);
    assert_eq!(b[44..48], [10, 0, 0, 1]);
    assert_eq!(b[60..64], [10, 0, 0, 2]);
    assert_eq!(b[70..72], [0x12, 0x34]);
    assert_eq!(b[208..212], [0xc0, 0xc0, 0, 7], "reg_c_7");
    assert_eq!(b[236..240], [0, 0, 0, 0], "reg_c_0");
    assert_eq!(b[232..236], [0, 0, 0, 1], "reg_c_1");
}

// ---------------------------------------------------------------------------
// Edits on well-formed packets, checksums recomputed from scratch.

#[derive(Clone, Copy, Debug)]
struct Spec {
    v6: bool,
    tcp: bool,
    tagged: bool,
    /// UDP with a checksum (false: checksum 0, "none").
    udp_csum: bool,
}

impl Spec {
    fn all() -> Vec<Spec> {
        let mut v = Vec::new();
        for v6 in [false, true] {
            for tcp in [false, true] {
                for tagged in [false, true] {
                    for udp_csum in [false, true] {
                        if tcp && !udp_csum {
                            continue;
                        }
                        v.push(Spec {
                            v6,
                            tcp,
                            tagged,
                            udp_csum,
                        });
                    }
                }
            }
        }
        v
    }

    fn l3(&self) -> usize {
        if self.tagged {
            18
        } else {
            14
        }
    }

    fn l4(&self) -> usize {
        self.l3() + if self.v6 { 40 } else { 20 }
    }

    fn build(&self) -> Vec<u8> {
        let mut p = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
        if self.tagged {
            p.extend([0x81, 0x00, 0x20, 0x64]);
        }
        let payload = b"payload!";
        let l4_len = if self.tcp { 20 } else { 8 } + payload.len();
        let proto = if self.tcp { 6 } else { 17 };
        if self.v6 {
            p.extend([0x86, 0xdd, 0x6b, 0x91, 0x23, 0x45]);
            p.extend((l4_len as u16).to_be_bytes());
            p.extend([proto, 64]);
            p.extend(0x2001_0db8_0000_0000_0000_0000_0000_0001u128.to_be_bytes());
            p.extend(0x2001_0db8_0000_0000_0000_0000_0000_0002u128.to_be_bytes());
        } else {
            p.extend([0x08, 0x00, 0x45, 0xb9]);
            p.extend(((20 + l4_len) as u16).to_be_bytes());
            p.extend([
                0x12, 0x34, 0x40, 0x00, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
            ]);
        }
        if self.tcp {
            p.extend([0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18]);
            p.extend([0x10, 0x00, 0, 0, 0, 0]);
        } else {
            p.extend([0x30, 0x39, 0x00, 0x35]);
            p.extend((l4_len as u16).to_be_bytes());
            p.extend([0, 0]);
        }
        p.extend(payload);
        // Checksums from scratch.
        let l3 = self.l3();
        let l4 = self.l4();
        if !self.v6 {
            let c = !fold(sum16(&p[l3..l4]));
            p[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let at = l4 + if self.tcp { 16 } else { 6 };
        if self.tcp || self.udp_csum {
            let mut c = !fold(sum16(&pseudo(&p, l3, l4, self.v6)) + sum16(&p[l4..]));
            if !self.tcp && c == 0 {
                c = 0xffff;
            }
            p[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        assert!(checksums_ok(&p, self));
        p
    }

    /// Where each field's bytes are in the packet, and the checksum bytes
    /// a change of it may touch.
    fn bytes_of(&self, f: ModifyField) -> Vec<usize> {
        let (l3, l4) = (self.l3(), self.l4());
        let ip_csum: Vec<usize> = if self.v6 {
            vec![]
        } else {
            vec![l3 + 10, l3 + 11]
        };
        let l4_csum = if self.tcp {
            vec![l4 + 16, l4 + 17]
        } else {
            vec![l4 + 6, l4 + 7]
        };
        let cat = |a: std::ops::Range<usize>, b: &[usize], c: &[usize]| {
            a.chain(b.iter().copied())
                .chain(c.iter().copied())
                .collect()
        };
        match f {
            ModifyField::DmacHi => (0..4).collect(),
            ModifyField::DmacLo => (4..6).collect(),
            ModifyField::SmacHi => (6..10).collect(),
            ModifyField::SmacLo => (10..12).collect(),
            ModifyField::Ethertype => (l3 - 2..l3).collect(),
            ModifyField::FirstVid => (14..16).collect(),
            ModifyField::IpDscp | ModifyField::IpEcn => cat(l3..l3 + 2, &ip_csum, &[]),
            ModifyField::IpTtl => cat(l3 + 8..l3 + 9, &ip_csum, &[]),
            ModifyField::Ipv6HopLimit => (l3 + 7..l3 + 8).collect(),
            ModifyField::Sipv4 => cat(l3 + 12..l3 + 16, &ip_csum, &l4_csum),
            ModifyField::Dipv4 => cat(l3 + 16..l3 + 20, &ip_csum, &l4_csum),
            ModifyField::Sipv6(n) => {
                let a = l3 + 8 + 4 * usize::from(n);
                cat(a..a + 4, &[], &l4_csum)
            }
            ModifyField::Dipv6(n) => {
                let a = l3 + 24 + 4 * usize::from(n);
                cat(a..a + 4, &[], &l4_csum)
            }
            ModifyField::TcpSport | ModifyField::UdpSport => cat(l4..l4 + 2, &[], &l4_csum),
            ModifyField::TcpDport | ModifyField::UdpDport => cat(l4 + 2..l4 + 4, &[], &l4_csum),
            ModifyField::TcpFlags => cat(l4 + 12..l4 + 14, &[], &l4_csum),
            ModifyField::RegC(_) | ModifyField::RegB => vec![],
        }
    }

    /// Whether the packet has the field.
    fn has(&self, f: ModifyField) -> bool {
        match f {
            ModifyField::FirstVid => self.tagged,
            ModifyField::IpTtl | ModifyField::Sipv4 | ModifyField::Dipv4 => !self.v6,
            ModifyField::Ipv6HopLimit | ModifyField::Sipv6(_) | ModifyField::Dipv6(_) => self.v6,
            ModifyField::TcpSport | ModifyField::TcpDport | ModifyField::TcpFlags => self.tcp,
            ModifyField::UdpSport | ModifyField::UdpDport => !self.tcp,
            // NIC RX's register: no FDB packet has it (the sim refuses it
            // in its Direct Rule domains).
            ModifyField::RegB => false,
            _ => true,
        }
    }
}

fn sum16(d: &[u8]) -> u64 {
    d.chunks(2)
        .map(|c| match c {
            [a, b] => u64::from(u16::from_be_bytes([*a, *b])),
            [a] => u64::from(*a) << 8,
            _ => 0,
        })
        .sum()
}

fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn pseudo(p: &[u8], l3: usize, l4: usize, v6: bool) -> Vec<u8> {
    let len = p.len() - l4;
    if v6 {
        let mut v = p[l3 + 8..l3 + 40].to_vec();
        v.extend((len as u32).to_be_bytes());
        v.extend([0, 0, 0, p[l3 + 6]]);
        v
    } else {
        let mut v = p[l3 + 12..l3 + 20].to_vec();
        v.extend([0, p[l3 + 9]]);
        v.extend((len as u16).to_be_bytes());
        v
    }
}

/// Every checksum of a [`Spec`] packet recomputed from scratch: the one's
/// complement sum over the covered bytes, checksum included, is 0xffff.
fn checksums_ok(p: &[u8], s: &Spec) -> bool {
    let (l3, l4) = (s.l3(), s.l4());
    if !s.v6 && fold(sum16(&p[l3..l4])) != 0xffff {
        return false;
    }
    if !s.tcp && be16(&p[l4 + 6..]) == 0 {
        return true;
    }
    fold(sum16(&pseudo(p, l3, l4, s.v6)) + sum16(&p[l4..])) == 0xffff
}

/// Values worth writing into a field of `width` bits.
fn values(width: u8) -> Vec<u32> {
    let max = if width == 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    vec![0, 1, max, max / 3, 0x1234_5678 & max, 0xfedc_ba98 & max]
}

#[test]
fn set_changes_exactly_the_field_and_keeps_checksums() {
    for spec in Spec::all() {
        let orig = spec.build();
        let regs0 = [0x1111_1111u32, 2, 3, 4, 5, 6, 7, 8];
        for field in ModifyField::ALL {
            for v in values(field.width()) {
                let mut pkt = orig.clone();
                let mut regs = regs0;
                apply_modify(&mut pkt, &mut regs, &[ModifyOp::set(field, v)]);
                let what = format!("{spec:?} {field} = {v:#x}");
                if !spec.has(field) {
                    assert_eq!(pkt, orig, "{what}: absent, skipped");
                    assert_eq!(regs, regs0, "{what}");
                    assert_eq!(read_field(&pkt, &regs, field), None, "{what}");
                    continue;
                }
                assert_eq!(read_field(&pkt, &regs, field), Some(v), "{what}");
                assert!(checksums_ok(&pkt, &spec), "{what}: {pkt:02x?}");
                let allowed = spec.bytes_of(field);
                for (i, (a, b)) in orig.iter().zip(pkt.iter()).enumerate() {
                    assert!(a == b || allowed.contains(&i), "{what}: byte {i} changed");
                }
                assert_eq!(pkt.len(), orig.len());
                if let ModifyField::RegC(n) = field {
                    for (i, (&a, &b)) in regs0.iter().zip(regs.iter()).enumerate() {
                        assert!(a == b || i == usize::from(n), "{what}");
                    }
                } else {
                    assert_eq!(regs, regs0, "{what}");
                }
                if field == ModifyField::Ethertype {
                    continue; // the rest of the packet is another protocol now
                }
                // Every other field reads as before.
                for other in ModifyField::ALL {
                    if other != field {
                        assert_eq!(
                            read_field(&pkt, &regs, other),
                            read_field(&orig, &regs0, other),
                            "{what}: {other}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn partial_set_writes_only_its_bits() {
    let spec = Spec {
        v6: false,
        tcp: true,
        tagged: false,
        udp_csum: true,
    };
    let mut pkt = spec.build();
    let mut regs = [0xaaaa_5555u32; 8];
    apply_modify(
        &mut pkt,
        &mut regs,
        &[
            // Linux's vport metadata: reg_c_0 bits 16..32.
            ModifyOp::Set {
                field: ModifyField::RegC(0),
                offset: 16,
                length: 16,
                data: 0x0007,
            },
            // DSCP 46 = 0b101110: bits 3..6 := 0b010 gives 0b010110 = 22.
            ModifyOp::Set {
                field: ModifyField::IpDscp,
                offset: 3,
                length: 3,
                data: 0xfffe_fff2,
            },
            // The low byte of the source address.
            ModifyOp::Set {
                field: ModifyField::Sipv4,
                offset: 0,
                length: 8,
                data: 0x99,
            },
        ],
    );
    assert_eq!(regs[0], 0x0007_5555);
    assert_eq!(regs[1], 0xaaaa_5555);
    assert_eq!(read_field(&pkt, &regs, ModifyField::IpDscp), Some(22));
    assert_eq!(read_field(&pkt, &regs, ModifyField::IpEcn), Some(1));
    assert_eq!(
        read_field(&pkt, &regs, ModifyField::Sipv4),
        Some(0x0a00_0099)
    );
    assert!(checksums_ok(&pkt, &spec));
}

#[test]
fn add_ttl_wraps_and_keeps_checksums() {
    for v6 in [false, true] {
        let spec = Spec {
            v6,
            tcp: false,
            tagged: false,
            udp_csum: true,
        };
        let field = if v6 {
            ModifyField::Ipv6HopLimit
        } else {
            ModifyField::IpTtl
        };
        let mut pkt = spec.build();
        let mut regs = [0; 8];
        let dec = ModifyOp::Add { field, data: 0xff };
        apply_modify(&mut pkt, &mut regs, &[dec]);
        assert_eq!(read_field(&pkt, &regs, field), Some(63));
        apply_modify(&mut pkt, &mut regs, &[ModifyOp::set(field, 0), dec]);
        assert_eq!(read_field(&pkt, &regs, field), Some(0xff), "0 - 1 wraps");
        apply_modify(&mut pkt, &mut regs, &[ModifyOp::Add { field, data: 3 }]);
        assert_eq!(read_field(&pkt, &regs, field), Some(2), "255 + 3 wraps");
        assert!(checksums_ok(&pkt, &spec));
    }
    // ADD on a register and on a port, modulo the width.
    let spec = Spec {
        v6: false,
        tcp: true,
        tagged: true,
        udp_csum: true,
    };
    let mut pkt = spec.build();
    let mut regs = [u32::MAX; 8];
    apply_modify(
        &mut pkt,
        &mut regs,
        &[
            ModifyOp::Add {
                field: ModifyField::RegC(5),
                data: 2,
            },
            ModifyOp::Add {
                field: ModifyField::TcpDport,
                data: 0xffff_ffff,
            },
        ],
    );
    assert_eq!(regs[5], 1);
    assert_eq!(read_field(&pkt, &regs, ModifyField::TcpDport), Some(79));
    assert!(checksums_ok(&pkt, &spec));
}

#[test]
fn copy_between_registers_and_fields() {
    let spec = Spec {
        v6: false,
        tcp: true,
        tagged: false,
        udp_csum: true,
    };
    let mut pkt = spec.build();
    let mut regs = [0u32; 8];
    regs[1] = 0xdead_beef;
    regs[2] = 0x1111_1111;
    let copy = |src, src_offset, length, dst, dst_offset| ModifyOp::Copy {
        src,
        src_offset,
        length,
        dst,
        dst_offset,
    };
    apply_modify(
        &mut pkt,
        &mut regs,
        &[
            // reg_c_1[16..32] -> reg_c_2[0..16].
            copy(ModifyField::RegC(1), 16, 16, ModifyField::RegC(2), 0),
            // The IPv4 source -> reg_c_3, whole.
            copy(ModifyField::Sipv4, 0, 32, ModifyField::RegC(3), 0),
            // The TCP destination port -> reg_c_0[16..32].
            copy(ModifyField::TcpDport, 0, 16, ModifyField::RegC(0), 16),
            // reg_c_1[0..16] -> the TCP source port (checksum fixed).
            copy(ModifyField::RegC(1), 0, 16, ModifyField::TcpSport, 0),
            // The TTL -> the low byte of the IPv4 destination.
            copy(ModifyField::IpTtl, 0, 8, ModifyField::Dipv4, 0),
        ],
    );
    assert_eq!(regs[2], 0x1111_dead);
    assert_eq!(regs[3], 0x0a00_0001);
    assert_eq!(regs[0], 0x0050_0000);
    assert_eq!(read_field(&pkt, &regs, ModifyField::TcpSport), Some(0xbeef));
    assert_eq!(
        read_field(&pkt, &regs, ModifyField::Dipv4),
        Some(0x0a00_0040)
    );
    assert!(checksums_ok(&pkt, &spec));

    // A source the packet lacks: skipped.
    let before = (pkt.clone(), regs);
    apply_modify(
        &mut pkt,
        &mut regs,
        &[copy(ModifyField::UdpSport, 0, 16, ModifyField::RegC(4), 0)],
    );
    assert_eq!((pkt, regs), before);
}

#[test]
fn ethertype_rewrite_changes_what_follows() {
    let spec = Spec {
        v6: false,
        tcp: true,
        tagged: true,
        udp_csum: true,
    };
    let mut pkt = spec.build();
    let mut regs = [0; 8];
    apply_modify(
        &mut pkt,
        &mut regs,
        &[
            ModifyOp::set(ModifyField::Ethertype, 0x88b5),
            ModifyOp::set(ModifyField::Sipv4, 1),
        ],
    );
    assert_eq!(pkt[16..18], [0x88, 0xb5]);
    assert_eq!(pkt[30..34], [10, 0, 0, 1], "no longer IPv4: skipped");
    apply_modify(
        &mut pkt,
        &mut regs,
        &[
            ModifyOp::set(ModifyField::Ethertype, 0x0800),
            ModifyOp::set(ModifyField::TcpSport, 7),
        ],
    );
    assert_eq!(read_field(&pkt, &regs, ModifyField::TcpSport), Some(7));
    assert!(checksums_ok(&pkt, &spec));
}

#[test]
fn udp_checksum_zero_stays_zero() {
    for v6 in [false, true] {
        let spec = Spec {
            v6,
            tcp: false,
            tagged: false,
            udp_csum: false,
        };
        let mut pkt = spec.build();
        let mut regs = [0; 8];
        let addr = if v6 {
            ModifyField::Sipv6(3)
        } else {
            ModifyField::Sipv4
        };
        apply_modify(
            &mut pkt,
            &mut regs,
            &[
                ModifyOp::set(ModifyField::UdpDport, 99),
                ModifyOp::set(addr, 0x0102_0304),
            ],
        );
        let l4 = spec.l4();
        assert_eq!(pkt[l4 + 6..l4 + 8], [0, 0]);
        assert_eq!(read_field(&pkt, &regs, ModifyField::UdpDport), Some(99));
        assert!(checksums_ok(&pkt, &spec));
    }
}

#[test]
fn push_pop_round_trip() {
    let spec = Spec {
        v6: true,
        tcp: true,
        tagged: false,
        udp_csum: true,
    };
    let orig = spec.build();
    let mut pkt = orig.clone();
    push_vlan(&mut pkt, 0x8100_2064);
    assert_eq!(pkt[12..18], [0x81, 0x00, 0x20, 0x64, 0x86, 0xdd]);
    assert_eq!(pkt.len(), orig.len() + 4);
    push_vlan(&mut pkt, 0x88a8_0005);
    assert_eq!(pkt[12..16], [0x88, 0xa8, 0x00, 0x05], "outermost first");
    let mut k = PacketKey::ZERO;
    extract_key(&pkt, 0, &[0; 8], &mut k);
    let b = k.bytes();
    assert_eq!(b[18] & (CVLAN_TAG | SVLAN_TAG), SVLAN_TAG);
    assert_eq!(b[14..16], [0x00, 0x05]);
    assert_eq!(b[72..74], [0x20, 0x64]);
    assert_eq!(b[76], SECOND_CVLAN_TAG);
    assert_eq!(b[6..8], [0x86, 0xdd]);
    assert_eq!(b[18] >> 1 & 0xf, 6);
    // The VLAN id is a modify field on the outer tag.
    let mut regs = [0; 8];
    apply_modify(
        &mut pkt,
        &mut regs,
        &[ModifyOp::set(ModifyField::FirstVid, 0xabc)],
    );
    assert_eq!(pkt[14..16], [0x0a, 0xbc], "priority bits kept");
    pop_vlan(&mut pkt);
    assert_eq!(pkt[12..16], [0x81, 0x00, 0x20, 0x64]);
    pop_vlan(&mut pkt);
    assert_eq!(pkt, orig);
    pop_vlan(&mut pkt);
    assert_eq!(pkt, orig, "untagged: no-op");
    let mut short = vec![0u8; 10];
    push_vlan(&mut short, 0x8100_0001);
    assert_eq!(short, vec![0u8; 10]);
}

#[test]
fn fields_follow_the_device_parse() {
    // IPv6 with a hop-by-hop header before TCP: the key has no ports, and
    // neither do the edits.
    let spec = Spec {
        v6: true,
        tcp: true,
        tagged: false,
        udp_csum: true,
    };
    let base = spec.build();
    let mut pkt = base[..54].to_vec();
    pkt[20] = 0; // next header: hop-by-hop
    pkt.extend([6, 0, 1, 4, 0, 0, 0, 0]); // HBH: next TCP, 8 bytes
    pkt.extend(&base[54..]);
    pkt[18..20].copy_from_slice(&((base.len() - 54 + 8) as u16).to_be_bytes());
    let mut k = PacketKey::ZERO;
    extract_key(&pkt, 0, &[0; 8], &mut k);
    assert_eq!(k.bytes()[16], 0, "ip_protocol is the first next header");
    assert_eq!(k.bytes()[20..24], [0; 4]);
    assert_eq!(read_field(&pkt, &[0; 8], ModifyField::TcpSport), None);
    assert_eq!(
        read_field(&pkt, &[0; 8], ModifyField::Ipv6HopLimit),
        Some(64)
    );
}

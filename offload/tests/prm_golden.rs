//! `fte_match_param` encoding against hand-derived bytes, the refusals, and
//! the layout setter's bounds.
//!
//! Every expected byte below is derived from the struct offsets in rdma-core
//! `providers/mlx5/mlx5_ifc.h` (commit 691953d8d502): outer headers =
//! `mlx5_ifc_dr_match_spec_bits` at byte 0, misc =
//! `mlx5_ifc_dr_match_set_misc_bits` at byte 64, misc2 =
//! `mlx5_ifc_dr_match_set_misc2_bits` at byte 192 (blocks of 0x200 bits in
//! `mlx5_ifc_dr_match_param_bits`). "byte.bit" counts bits from the most
//! significant bit of the byte. `ip_version` carries the version in the
//! mask too, as Direct Rule requires (mlx5dv_dr man page: "IP version in
//! matcher mask and rule should be equal and set to 4, 6 or 0").

use megaflow::key::{FRAG_ANY, FRAG_LATER, VLAN_PRESENT};
use megaflow::{Field, FlowKey, Mask, Match, PortNo};
use offload::prm::{
    decode, encode, get, set, DecodeError, Encoded, PortTable, PrmError, PrmField, SourcePortMode,
    Unsupported, ENCODED_LEN, FIELDS, MATCH_PARAM_LEN,
};
use offload::Vport;

/// Builds a match from (field, value, mask) triples.
fn mk(fields: &[(Field, u128, u128)]) -> Match {
    let mut k = FlowKey::ZERO;
    let mut m = Mask::EMPTY;
    for &(f, v, bits) in fields {
        k.set_field(f, v);
        m.set_field(f, bits);
    }
    Match::new(&k, &m)
}

/// Exact (field, value) triple.
fn ex(f: Field, v: u128) -> (Field, u128, u128) {
    (f, v, f.layout().max_value())
}

/// A `len`-byte buffer, zero but for the given (offset, bytes) patches.
fn bytes(len: usize, patches: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; len];
    for &(off, p) in patches {
        b[off..off + p.len()].copy_from_slice(p);
    }
    b
}

fn ports() -> PortTable {
    PortTable::new()
        .with(PortNo(1), Vport::UPLINK)
        .with(PortNo(7), Vport(3))
        .with(PortNo(9), Vport(4))
}

/// Asserts encode gives exactly these bytes, and the bytes decode back.
fn golden(m: &Match, mode: SourcePortMode, criteria: u8, mask: &[u8], value: &[u8]) {
    let p = ports();
    let e = encode(m, mode, &p).expect("encodable");
    assert_eq!(e.criteria(), criteria, "criteria of {e:?}");
    assert_eq!(e.mask(), mask, "mask of {e:?}");
    assert_eq!(e.value(), value, "value of {e:?}");
    assert_eq!(e.match_sz(), mask.len());
    let back = Encoded::from_bytes(criteria, mask, value).expect("valid bytes");
    assert_eq!(back, e);
    assert_eq!(decode(&back, mode, &p), Ok(*m));
    // The same bytes padded to the full 448-byte dr_match_param decode alike.
    let mut full_m = mask.to_vec();
    full_m.resize(MATCH_PARAM_LEN, 0);
    let mut full_v = value.to_vec();
    full_v.resize(MATCH_PARAM_LEN, 0);
    assert_eq!(Encoded::from_bytes(criteria, &full_m, &full_v), Ok(e));
}

/// `tcp,in_port=7,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=12345,tp_dst=80`
/// from VF2 (vport 3), source port as misc.source_port.
#[test]
fn golden_ipv4_tcp_5tuple_from_vport_3() {
    let m = mk(&[
        ex(Field::InPort, 7),
        ex(Field::EthType, 0x0800),
        ex(Field::IpProto, 6),
        ex(Field::Ipv4Src, 0x0a00_0001),
        ex(Field::Ipv4Dst, 0x0a00_0002),
        ex(Field::TpSrc, 12345),
        ex(Field::TpDst, 80),
    ]);
    let mask = bytes(
        128,
        &[
            (6, &[0xff, 0xff]),              // outer.ethertype @6
            (16, &[0xff]),                   // outer.ip_protocol @16
            (18, &[0x08]),                   // outer.ip_version @18.3, 4 = 0b0100
            (20, &[0xff, 0xff, 0xff, 0xff]), // outer.tcp_sport @20, tcp_dport @22
            (44, &[0xff, 0xff, 0xff, 0xff]), // outer.src_ip, IPv4 in the last 4 of @32..48
            (60, &[0xff, 0xff, 0xff, 0xff]), // outer.dst_ip, IPv4 in the last 4 of @48..64
            (64 + 6, &[0xff, 0xff]),         // misc.source_port @6
        ],
    );
    let value = bytes(
        128,
        &[
            (6, &[0x08, 0x00]),
            (16, &[0x06]),
            (18, &[0x08]),
            (20, &[0x30, 0x39, 0x00, 0x50]), // 12345, 80
            (44, &[10, 0, 0, 1]),
            (60, &[10, 0, 0, 2]),
            (64 + 6, &[0x00, 0x03]), // vport 3
        ],
    );
    golden(&m, SourcePortMode::MiscSourcePort, 0x03, &mask, &value);
}

/// `in_port=9,dl_dst=52:54:00:12:34:56,dl_vlan=100` with an 802.1Q TPID,
/// from VF3 (vport 4), source port as reg_c_0 vport metadata (upper 16
/// bits, tag = vport).
#[test]
fn golden_dmac_vlan_with_reg_c0_metadata() {
    let m = mk(&[
        ex(Field::InPort, 9),
        ex(Field::EthDst, 0x5254_0012_3456),
        ex(Field::VlanTpid, 0x8100),
        (Field::VlanTci, u128::from(VLAN_PRESENT) | 100, 0x1fff),
    ]);
    let mask = bytes(
        256,
        &[
            (8, &[0xff; 6]),                       // outer.dmac @8
            (14, &[0x0f, 0xff]),                   // outer.first_vid @14.4, 12 bits
            (18, &[0xc0]),                         // outer.cvlan_tag @18.0, svlan_tag @18.1
            (192 + 44, &[0xff, 0xff, 0x00, 0x00]), // misc2.metadata_reg_c_0 @44
        ],
    );
    let value = bytes(
        256,
        &[
            (8, &[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            (14, &[0x00, 0x64]), // VID 100
            (18, &[0x80]),       // C-VLAN
            (192 + 44, &[0x00, 0x04, 0x00, 0x00]),
        ],
    );
    golden(&m, SourcePortMode::REG_C0_UPPER_16, 0x09, &mask, &value);
}

/// `udp6,ipv6_dst=2001:db8:1:2::/64,tp_dst=53`, any source port.
#[test]
fn golden_ipv6_prefix_64() {
    let m = mk(&[
        ex(Field::EthType, 0x86dd),
        ex(Field::IpProto, 17),
        (
            Field::Ipv6Dst,
            0x2001_0db8_0001_0002_0000_0000_0000_0000,
            0xffff_ffff_ffff_ffff_0000_0000_0000_0000,
        ),
        ex(Field::TpDst, 53),
    ]);
    let mask = bytes(
        64,
        &[
            (6, &[0xff, 0xff]),  // outer.ethertype
            (16, &[0xff]),       // outer.ip_protocol
            (18, &[0x0c]),       // outer.ip_version @18.3, 6 = 0b0110
            (30, &[0xff, 0xff]), // outer.udp_dport @30
            (48, &[0xff; 8]),    // outer.dst_ip @48, first 64 bits
        ],
    );
    let value = bytes(
        64,
        &[
            (6, &[0x86, 0xdd]),
            (16, &[17]),
            (18, &[0x0c]),
            (30, &[0x00, 53]),
            (48, &[0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x02]),
        ],
    );
    golden(&m, SourcePortMode::MiscSourcePort, 0x01, &mask, &value);
}

/// QinQ from the uplink: S-tag VID 10, C-tag PCP 5 VID 20, IPv4 UDP to
/// 4789, DSCP 46 (EF), TTL 64, not a fragment.
#[test]
fn golden_qinq_udp_dscp_ttl_not_fragment() {
    let present = u128::from(VLAN_PRESENT);
    let m = mk(&[
        ex(Field::InPort, 1),
        ex(Field::VlanTpid, 0x88a8),
        (Field::VlanTci, present | 10, 0x1fff),
        ex(Field::Vlan2Tpid, 0x8100),
        (Field::Vlan2Tci, 0xa000 | present | 20, 0xffff),
        ex(Field::EthType, 0x0800),
        ex(Field::IpProto, 17),
        ex(Field::IpDscp, 46),
        ex(Field::IpTtl, 64),
        (Field::IpFrag, 0, u128::from(FRAG_ANY)),
        ex(Field::TpDst, 4789),
    ]);
    let mask = bytes(
        128,
        &[
            (6, &[0xff, 0xff]),
            (14, &[0x0f, 0xff]),     // outer.first_vid
            (16, &[0xff, 0xfc]),     // outer.ip_protocol @16, ip_dscp @17.0 (6 bits)
            (18, &[0xe8]), // cvlan 0x80 | svlan 0x40 | frag @18.2 0x20 | ip_version 4 0x08
            (27, &[0xff]), // outer.ip_ttl_hoplimit @27
            (30, &[0xff, 0xff]), // outer.udp_dport
            (64 + 6, &[0xff, 0xff]), // misc.source_port
            (64 + 8, &[0xef, 0xff]), // misc.outer_second_prio @8.0 (3), vid @8.4 (12), not cfi @8.3
            (64 + 12, &[0xa0]), // misc.outer_second_cvlan_tag @12.0, outer_second_svlan_tag @12.2
        ],
    );
    let value = bytes(
        128,
        &[
            (6, &[0x08, 0x00]),
            (14, &[0x00, 0x0a]),  // VID 10
            (16, &[17, 46 << 2]), // UDP, DSCP 46 = 0xb8 in the top 6 bits
            (18, &[0x48]),        // S-VLAN 0x40 | ip_version 4; frag 0
            (27, &[64]),
            (30, &[0x12, 0xb5]),     // 4789
            (64 + 6, &[0xff, 0xff]), // uplink vport 0xffff
            (64 + 8, &[0xa0, 0x14]), // PCP 5, VID 20
            (64 + 12, &[0x80]),      // second tag is a C-VLAN
        ],
    );
    golden(&m, SourcePortMode::MiscSourcePort, 0x03, &mask, &value);
}

/// The catch-all match: no criteria, no bytes.
#[test]
fn golden_catch_all() {
    golden(
        &Match::catch_all(),
        SourcePortMode::MiscSourcePort,
        0,
        &[],
        &[],
    );
}

/// Untagged, TCP SYN only, and an IPv6 flow label: tag-qualifier zero,
/// tcp_flags' 9 bits straddling bytes 18/19, flow label at misc 29.4.
#[test]
fn golden_untagged_syn_and_flow_label() {
    let m = mk(&[
        ex(Field::VlanTpid, 0),
        (Field::VlanTci, 0, u128::from(VLAN_PRESENT)),
        ex(Field::EthType, 0x86dd),
        ex(Field::IpProto, 6),
        (Field::TcpFlags, 0x002, 0x1ff),
        ex(Field::Ipv6Label, 0x12345),
    ]);
    let mask = bytes(
        128,
        &[
            (6, &[0xff, 0xff]),
            (16, &[0xff]),
            (18, &[0xcd, 0xff]), // cvlan|svlan 0xc0, ip_version 6 0x0c, tcp_flags 0x1ff from 18.7
            (64 + 29, &[0x0f, 0xff, 0xff]), // misc.outer_ipv6_flow_label @29.4
        ],
    );
    let value = bytes(
        128,
        &[
            (6, &[0x86, 0xdd]),
            (16, &[6]),
            (18, &[0x0c, 0x02]), // untagged: both tag bits 0; SYN
            (64 + 29, &[0x01, 0x23, 0x45]),
        ],
    );
    golden(&m, SourcePortMode::MiscSourcePort, 0x03, &mask, &value);
}

/// Equivalent forms decode to the canonical one.
#[test]
fn equivalent_forms_decode_canonically() {
    let p = ports();
    let mode = SourcePortMode::MiscSourcePort;
    let ip = ex(Field::EthType, 0x0800);
    // "not a fragment" written with both frag bits.
    let a = mk(&[ip, (Field::IpFrag, 0, u128::from(FRAG_ANY | FRAG_LATER))]);
    let b = mk(&[ip, (Field::IpFrag, 0, u128::from(FRAG_ANY))]);
    assert_eq!(encode(&a, mode, &p), encode(&b, mode, &p));
    assert_eq!(decode(&encode(&a, mode, &p).unwrap(), mode, &p), Ok(b));
    // `Mask::set_exact(IpFrag)` masks all 8 bits: the same "not a fragment".
    let c = mk(&[ip, (Field::IpFrag, 0, 0xff)]);
    assert_eq!(encode(&c, mode, &p), encode(&b, mode, &p));
    let later = mk(&[ip, (Field::IpFrag, 3, 0xff)]);
    assert_eq!(encode(&later, mode, &p).unwrap_err().field, Field::IpFrag);
    // Key bits outside every field are zero in keys and packets: ignored.
    let mut words = [0u64; megaflow::KEY_WORDS];
    words[13] = 0xffff_0000; // between tp_dst and tcp_flags
    let pad = Match::new(&FlowKey::ZERO, &Mask::from_words(words));
    assert_eq!(encode(&pad, mode, &p), Ok(Encoded::EMPTY));
    // Untagged by presence alone, or tagged by TPID alone.
    let present = u128::from(VLAN_PRESENT);
    let canon_untagged = mk(&[ex(Field::VlanTpid, 0), (Field::VlanTci, 0, present)]);
    for m in [
        mk(&[(Field::VlanTci, 0, present)]),
        mk(&[ex(Field::VlanTpid, 0)]),
    ] {
        let e = encode(&m, mode, &p).unwrap();
        assert_eq!(decode(&e, mode, &p), Ok(canon_untagged));
    }
    let by_tpid = mk(&[ex(Field::VlanTpid, 0x88a8)]);
    let e = encode(&by_tpid, mode, &p).unwrap();
    assert_eq!(
        decode(&e, mode, &p),
        Ok(mk(&[
            ex(Field::VlanTpid, 0x88a8),
            (Field::VlanTci, present, present)
        ]))
    );
    // ip_version without ethertype is the same exact eth_type.
    let mut mb = [0u8; 64];
    let mut vb = [0u8; 64];
    set(&mut mb, PrmField::OuterIpVersion, 6).unwrap();
    set(&mut vb, PrmField::OuterIpVersion, 6).unwrap();
    let e = Encoded::from_bytes(1, &mb, &vb).unwrap();
    assert_eq!(decode(&e, mode, &p), Ok(mk(&[ex(Field::EthType, 0x86dd)])));
}

/// Each field or mask the device cannot match refuses the flow, naming it.
#[test]
fn encode_names_each_unsupported_field() {
    let p = ports();
    let present = u128::from(VLAN_PRESENT);
    let tcp4 = [ex(Field::EthType, 0x0800), ex(Field::IpProto, 6)];
    let with = |base: &[(Field, u128, u128)], extra: &[(Field, u128, u128)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        mk(&v)
    };
    let ms = SourcePortMode::MiscSourcePort;
    let cases: Vec<(&str, Match, SourcePortMode, Field)> = vec![
        (
            "pkt_mark",
            with(&tcp4, &[ex(Field::PktMark, 1)]),
            ms,
            Field::PktMark,
        ),
        (
            "metadata",
            with(&tcp4, &[ex(Field::Metadata, 1)]),
            ms,
            Field::Metadata,
        ),
        ("reg0", with(&tcp4, &[ex(Field::Reg0, 1)]), ms, Field::Reg0),
        ("reg7", with(&tcp4, &[ex(Field::Reg7, 1)]), ms, Field::Reg7),
        (
            "tun_id",
            with(&tcp4, &[ex(Field::TunId, 42)]),
            ms,
            Field::TunId,
        ),
        (
            "tun_src",
            with(&tcp4, &[ex(Field::TunSrc, 1)]),
            ms,
            Field::TunSrc,
        ),
        (
            "tun_dst",
            with(&tcp4, &[ex(Field::TunDst, 1)]),
            ms,
            Field::TunDst,
        ),
        (
            "recirc_id_partial",
            with(&tcp4, &[(Field::RecircId, 7, 0xff)]),
            ms,
            Field::RecircId,
        ),
        (
            "ct_label_after_ct",
            with(
                &tcp4,
                &[ex(Field::RecircId, 7), ex(Field::CtLabel, 1 << 100)],
            ),
            ms,
            Field::CtLabel,
        ),
        (
            "ct_nw_src_after_ct",
            with(&tcp4, &[ex(Field::RecircId, 7), ex(Field::CtNwSrc, 1)]),
            ms,
            Field::CtNwSrc,
        ),
        (
            "ct_state",
            with(&tcp4, &[(Field::CtState, 0x22, 0x22)]),
            ms,
            Field::CtState,
        ),
        (
            "ct_label",
            with(&tcp4, &[ex(Field::CtLabel, 1 << 100)]),
            ms,
            Field::CtLabel,
        ),
        (
            "nd_target",
            mk(&[
                ex(Field::EthType, 0x86dd),
                ex(Field::IpProto, 58),
                ex(Field::NdTarget, 1),
            ]),
            ms,
            Field::NdTarget,
        ),
        (
            "arp_sha",
            mk(&[ex(Field::EthType, 0x0806), ex(Field::ArpSha, 1)]),
            ms,
            Field::ArpSha,
        ),
        (
            "arp_tha",
            mk(&[ex(Field::EthType, 0x0806), ex(Field::ArpTha, 1)]),
            ms,
            Field::ArpTha,
        ),
        (
            "arp_op",
            mk(&[ex(Field::EthType, 0x0806), ex(Field::IpProto, 1)]),
            ms,
            Field::IpProto,
        ),
        (
            "arp_spa",
            mk(&[ex(Field::EthType, 0x0806), ex(Field::Ipv4Src, 1)]),
            ms,
            Field::Ipv4Src,
        ),
        (
            "icmp_type",
            mk(&[
                ex(Field::EthType, 0x0800),
                ex(Field::IpProto, 1),
                ex(Field::TpSrc, 8),
            ]),
            ms,
            Field::TpSrc,
        ),
        (
            "icmpv6_code",
            mk(&[
                ex(Field::EthType, 0x86dd),
                ex(Field::IpProto, 58),
                ex(Field::TpDst, 0),
            ]),
            ms,
            Field::TpDst,
        ),
        (
            "sctp_port",
            mk(&[
                ex(Field::EthType, 0x0800),
                ex(Field::IpProto, 132),
                ex(Field::TpDst, 9),
            ]),
            ms,
            Field::TpDst,
        ),
        (
            "port_without_proto",
            mk(&[ex(Field::EthType, 0x0800), ex(Field::TpDst, 80)]),
            ms,
            Field::TpDst,
        ),
        (
            "port_with_partial_proto",
            mk(&[
                ex(Field::EthType, 0x0800),
                (Field::IpProto, 6, 0xfe),
                ex(Field::TpDst, 80),
            ]),
            ms,
            Field::TpDst,
        ),
        (
            "tcp_flags_12_bits",
            with(&tcp4, &[(Field::TcpFlags, 0x800, 0xfff)]),
            ms,
            Field::TcpFlags,
        ),
        (
            "tcp_flags_on_udp",
            mk(&[
                ex(Field::EthType, 0x0800),
                ex(Field::IpProto, 17),
                (Field::TcpFlags, 2, 2),
            ]),
            ms,
            Field::TcpFlags,
        ),
        (
            "partial_ethertype",
            mk(&[(Field::EthType, 0x0800, 0xff00)]),
            ms,
            Field::EthType,
        ),
        (
            "8023_frame",
            mk(&[ex(Field::EthType, 0x05ff)]),
            ms,
            Field::EthType,
        ),
        (
            "third_tag",
            mk(&[ex(Field::EthType, 0x8100)]),
            ms,
            Field::EthType,
        ),
        (
            "dscp_without_ip",
            mk(&[ex(Field::IpDscp, 46)]),
            ms,
            Field::IpDscp,
        ),
        (
            "ttl_on_arp",
            mk(&[ex(Field::EthType, 0x0806), ex(Field::IpTtl, 1)]),
            ms,
            Field::IpTtl,
        ),
        (
            "partial_in_port",
            mk(&[(Field::InPort, 7, 0xff)]),
            ms,
            Field::InPort,
        ),
        (
            "unmapped_in_port",
            mk(&[ex(Field::InPort, 99)]),
            ms,
            Field::InPort,
        ),
        (
            "metadata_tag_too_wide",
            mk(&[ex(Field::InPort, 1)]),
            SourcePortMode::Metadata {
                mask: 0xff00_0000,
                shift: 24,
            },
            Field::InPort,
        ),
        (
            "tagged_any_tpid",
            mk(&[(Field::VlanTci, present | 5, 0x1fff)]),
            ms,
            Field::VlanTci,
        ),
        (
            "vid_without_presence",
            mk(&[(Field::VlanTci, 5, 0x0fff)]),
            ms,
            Field::VlanTci,
        ),
        (
            "partial_tpid",
            mk(&[(Field::VlanTpid, 0x8100, 0xff00)]),
            ms,
            Field::VlanTpid,
        ),
        (
            "tpid_9100",
            mk(&[ex(Field::VlanTpid, 0x9100)]),
            ms,
            Field::VlanTpid,
        ),
        (
            "presence_contradicts_tpid",
            mk(&[ex(Field::VlanTpid, 0x8100), (Field::VlanTci, 0, present)]),
            ms,
            Field::VlanTci,
        ),
        (
            "second_tag_any_tpid",
            mk(&[(Field::Vlan2Tci, present, present)]),
            ms,
            Field::Vlan2Tci,
        ),
        (
            "first_fragment",
            mk(&[ex(Field::EthType, 0x0800), (Field::IpFrag, 1, 3)]),
            ms,
            Field::IpFrag,
        ),
        (
            "not_later",
            mk(&[ex(Field::EthType, 0x0800), (Field::IpFrag, 0, 2)]),
            ms,
            Field::IpFrag,
        ),
        (
            "ipv6_partial_proto",
            mk(&[ex(Field::EthType, 0x86dd), (Field::IpProto, 6, 0xf0)]),
            ms,
            Field::IpProto,
        ),
        (
            "ipv6_ext_header_proto",
            mk(&[ex(Field::EthType, 0x86dd), ex(Field::IpProto, 44)]),
            ms,
            Field::IpProto,
        ),
        (
            "label_on_ipv4",
            mk(&[ex(Field::EthType, 0x0800), ex(Field::Ipv6Label, 1)]),
            ms,
            Field::Ipv6Label,
        ),
        (
            "ipv4_src_on_ipv6",
            mk(&[ex(Field::EthType, 0x86dd), ex(Field::Ipv4Src, 1)]),
            ms,
            Field::Ipv4Src,
        ),
        (
            "ipv6_dst_on_ipv4",
            mk(&[ex(Field::EthType, 0x0800), ex(Field::Ipv6Dst, 1)]),
            ms,
            Field::Ipv6Dst,
        ),
    ];
    for (name, m, mode, field) in cases {
        match encode(&m, mode, &p) {
            Err(Unsupported { field: got, reason }) => {
                assert_eq!(got, field, "{name}: {reason}");
                assert!(!reason.is_empty());
            }
            Ok(e) => panic!("{name}: encoded {m:?} as {e:?}"),
        }
    }
}

/// A packet from a port has not recirculated nor been tracked: a match on
/// zero `recirc_id` and ct fields holds on every packet the root table
/// sees, and encodes as if it were not there.
#[test]
fn zero_packet_metadata_holds_at_the_root() {
    let p = ports();
    let ms = SourcePortMode::MiscSourcePort;
    let base = [ex(Field::EthType, 0x0800), ex(Field::IpProto, 6)];
    let mut zeros = base.to_vec();
    for f in megaflow::key::PACKET_META_FIELDS {
        zeros.push(ex(f, 0));
    }
    let plain = encode(&mk(&base), ms, &p).expect("plain");
    let with = encode(&mk(&zeros), ms, &p).expect("zeros hold");
    assert_eq!(format!("{plain:?}"), format!("{with:?}"));
}

/// Outside bytes the decoder does not understand are refused, naming the
/// PRM field or byte.
#[test]
fn decode_refuses_what_it_cannot_mean() {
    let p = ports();
    let ms = SourcePortMode::MiscSourcePort;
    let dec = |criteria: u8, fields: &[(PrmField, u128, u128)]| {
        let mut mb = [0u8; ENCODED_LEN];
        let mut vb = [0u8; ENCODED_LEN];
        for &(f, v, m) in fields {
            set(&mut mb, f, m).unwrap();
            set(&mut vb, f, v).unwrap();
        }
        decode(&Encoded::from_bytes(criteria, &mb, &vb)?, ms, &p)
    };
    let v4 = (PrmField::OuterIpVersion, 4, 4);
    let invalid = |r: Result<Match, DecodeError>| match r {
        Err(DecodeError::Invalid { field, .. }) => field,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert_eq!(
        invalid(dec(1, &[(PrmField::OuterFirstCfi, 1, 1)])),
        PrmField::OuterFirstCfi
    );
    assert_eq!(
        dec(2, &[(PrmField::MiscVxlanVni, 5, 0xff_ffff)]),
        Err(DecodeError::UnsupportedField(PrmField::MiscVxlanVni))
    );
    assert_eq!(
        dec(8, &[(PrmField::Misc2MetadataRegC1, 5, 0xffff)]),
        Err(DecodeError::UnsupportedField(PrmField::Misc2MetadataRegC1))
    );
    // outer bytes 24..26 are reserved_at_c0.
    let mut mb = [0u8; 64];
    mb[24] = 0x80;
    assert_eq!(
        decode(&Encoded::from_bytes(1, &mb, &[]).unwrap(), ms, &p),
        Err(DecodeError::ReservedBits { byte: 24 })
    );
    assert_eq!(
        invalid(dec(1, &[(PrmField::OuterIpVersion, 4, 0xf)])),
        PrmField::OuterIpVersion
    );
    assert_eq!(
        invalid(dec(1, &[(PrmField::OuterIpVersion, 0, 6)])),
        PrmField::OuterIpVersion
    );
    assert_eq!(
        invalid(dec(1, &[(PrmField::OuterIpProtocol, 6, 0xff)])),
        PrmField::OuterIpProtocol
    );
    assert_eq!(
        invalid(dec(1, &[v4, (PrmField::OuterEthertype, 0x86dd, 0xffff)])),
        PrmField::OuterEthertype
    );
    assert_eq!(
        invalid(dec(1, &[v4, (PrmField::OuterTcpDport, 80, 0xffff)])),
        PrmField::OuterTcpDport
    );
    assert_eq!(
        invalid(dec(
            1,
            &[
                v4,
                (PrmField::OuterIpProtocol, 6, 0xff),
                (PrmField::OuterUdpDport, 53, 0xffff)
            ]
        )),
        PrmField::OuterUdpDport
    );
    assert_eq!(
        invalid(dec(1, &[v4, (PrmField::OuterSrcIp, 1 << 40, 1 << 40)])),
        PrmField::OuterSrcIp
    );
    assert_eq!(
        invalid(dec(2, &[(PrmField::MiscSourcePort, 3, 0xff)])),
        PrmField::MiscSourcePort
    );
    assert_eq!(
        dec(2, &[(PrmField::MiscSourcePort, 77, 0xffff)]),
        Err(DecodeError::UnknownVport(Vport(77)))
    );
    assert_eq!(
        invalid(dec(
            1,
            &[
                (PrmField::OuterCvlanTag, 1, 1),
                (PrmField::OuterSvlanTag, 1, 1)
            ]
        )),
        PrmField::OuterSvlanTag
    );
    // A lone cvlan_tag mask bit masks the whole qualifier (dr_ste_v1.c).
    assert_eq!(
        dec(1, &[(PrmField::OuterSvlanTag, 1, 1)]),
        Ok(mk(&[
            ex(Field::VlanTpid, 0x88a8),
            (Field::VlanTci, 0x1000, 0x1000)
        ]))
    );
}

/// The setter refuses values wider than the field and buffers too short,
/// and touches no bit outside its field; the getter checks the buffer too.
#[test]
fn setter_and_getter_bounds() {
    let mut b = [0u8; ENCODED_LEN];
    assert_eq!(
        set(&mut b, PrmField::OuterTcpFlags, 0x200),
        Err(PrmError::ValueTooWide {
            field: PrmField::OuterTcpFlags,
            width: 9,
            value: 0x200
        })
    );
    assert_eq!(
        set(&mut b, PrmField::OuterFirstVid, 0x1000),
        Err(PrmError::ValueTooWide {
            field: PrmField::OuterFirstVid,
            width: 12,
            value: 0x1000
        })
    );
    assert_eq!(b, [0u8; ENCODED_LEN], "a refused write changes nothing");
    assert_eq!(
        set(&mut b[..60], PrmField::OuterDstIp, 1),
        Err(PrmError::BufferTooShort {
            field: PrmField::OuterDstIp,
            need: 64,
            len: 60
        })
    );
    assert_eq!(
        get(&b[..64], PrmField::MiscSourcePort),
        Err(PrmError::BufferTooShort {
            field: PrmField::MiscSourcePort,
            need: 72,
            len: 64
        })
    );
    assert_eq!(set(&mut b[..64], PrmField::OuterDstIp, u128::MAX), Ok(()));
    assert_eq!(get(&b, PrmField::OuterDstIp), Ok(u128::MAX));
    // Each field at all ones in a zero buffer, then all zeros in an all-ones
    // buffer: no other field changes.
    for d in FIELDS {
        let mut zero = [0u8; ENCODED_LEN];
        set(&mut zero, d.field, d.max_value()).unwrap();
        let mut ones = [0xffu8; ENCODED_LEN];
        set(&mut ones, d.field, 0).unwrap();
        for o in FIELDS {
            let (z, n) = (get(&zero, o.field).unwrap(), get(&ones, o.field).unwrap());
            if o.field == d.field {
                assert_eq!((z, n), (d.max_value(), 0), "{}", d.name);
            } else {
                assert_eq!(
                    (z, n),
                    (0, o.max_value()),
                    "{} leaked into {}",
                    d.name,
                    o.name
                );
            }
        }
        let set_bits: u32 = zero.iter().map(|b| b.count_ones()).sum();
        assert_eq!(set_bits, u32::from(d.width), "{}", d.name);
    }
}

/// A later stage's megaflow (exact `recirc_id`) matches what the
/// conntrack chain wrote: `recirc_id` in reg_c_5, `ct_zone` and
/// `ct_state` in reg_c_2 (state from bit 16), `ct_mark` in reg_c_3
/// (`offload::ct`).
#[test]
fn a_later_stage_matches_the_chain_registers() {
    let p = ports();
    let ms = SourcePortMode::MiscSourcePort;
    let m = mk(&[
        ex(Field::EthType, 0x0800),
        ex(Field::IpProto, 6),
        ex(Field::RecircId, 7),
        (Field::CtState, 0x22, 0x23),
        ex(Field::CtZone, 9),
        (Field::CtMark, 0x10, 0xf0),
    ]);
    let e = encode(&m, ms, &p).expect("a later stage encodes");
    let shown = format!("{e:?}");
    for want in [
        "misc2.metadata_reg_c_5=0x7/0xffffffff",
        "misc2.metadata_reg_c_2=0x220009/0x23ffff",
        "misc2.metadata_reg_c_3=0x10/0xf0",
    ] {
        assert!(shown.contains(want), "{want} not in {shown}");
    }
}

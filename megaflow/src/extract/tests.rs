//! Unit and property tests of packet extraction over hand-built frames.
//!
//! Frames are assembled by the small builders below (no checksums: the
//! parser never reads them). Captured, real frames are checked in
//! `tests/extract_golden.rs`.

use super::*;
use crate::key::{Field, FlowKey, FRAG_ANY, FRAG_LATER, VLAN_PRESENT};
use proptest::prelude::*;

// ---------------------------------------------------------------- builders

const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
const IP_A: [u8; 4] = [198, 18, 0, 1];
const IP_B: [u8; 4] = [198, 18, 0, 2];
/// 2001:2::1 and 2001:2::2 (benchmarking range).
const IP6_A: u128 = 0x2001_0002_0000_0000_0000_0000_0000_0001;
const IP6_B: u128 = 0x2001_0002_0000_0000_0000_0000_0000_0002;

fn mac_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0, |a, &b| (a << 8) | b as u64)
}

fn ip_u64(a: [u8; 4]) -> u64 {
    u32::from_be_bytes(a) as u64
}

fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Ethernet with VLAN tags (`(tpid, tci)` outermost first) before `ty`.
fn eth_tagged(tags: &[(u16, u16)], ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&MAC_A);
    for &(tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[derive(Clone)]
struct V4 {
    tos: u8,
    ttl: u8,
    /// Flags and fragment offset word (0x2000 = MF, 0x4000 = DF).
    frag: u16,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    opts: Vec<u8>,
}

impl Default for V4 {
    fn default() -> Self {
        V4 {
            tos: 0,
            ttl: 64,
            frag: 0x4000,
            proto: IP_PROTO_UDP,
            src: IP_A,
            dst: IP_B,
            opts: Vec::new(),
        }
    }
}

impl V4 {
    fn build(&self, payload: &[u8]) -> Vec<u8> {
        assert_eq!(self.opts.len() % 4, 0);
        let hlen = 20 + self.opts.len();
        let tot = (hlen + payload.len()) as u16;
        let mut h = vec![0x40 | (hlen / 4) as u8, self.tos];
        h.extend_from_slice(&tot.to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34]);
        h.extend_from_slice(&self.frag.to_be_bytes());
        h.extend_from_slice(&[self.ttl, self.proto, 0, 0]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(&self.opts);
        h.extend_from_slice(payload);
        h
    }
}

#[derive(Clone)]
struct V6 {
    tc: u8,
    flow: u32,
    hlim: u8,
    nh: u8,
    src: u128,
    dst: u128,
}

impl Default for V6 {
    fn default() -> Self {
        V6 {
            tc: 0,
            flow: 0,
            hlim: 64,
            nh: IP_PROTO_UDP,
            src: IP6_A,
            dst: IP6_B,
        }
    }
}

impl V6 {
    fn build(&self, payload: &[u8]) -> Vec<u8> {
        let vtcfl = (6u32 << 28) | ((self.tc as u32) << 20) | (self.flow & 0xf_ffff);
        let mut h = vtcfl.to_be_bytes().to_vec();
        h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        h.extend_from_slice(&[self.nh, self.hlim]);
        h.extend_from_slice(&self.src.to_be_bytes());
        h.extend_from_slice(&self.dst.to_be_bytes());
        h.extend_from_slice(payload);
        h
    }
}

/// TCP header with `opts` (a multiple of 4 bytes) and the 12 flag bits.
fn tcp(sp: u16, dp: u16, flags: u16, opts: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    let doff = ((20 + opts.len()) / 4) as u16;
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    t.extend_from_slice(&((doff << 12) | (flags & 0x0fff)).to_be_bytes());
    t.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(opts);
    t
}

fn udp(sp: u16, dp: u16, data: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

fn sctp(sp: u16, dp: u16) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&sp.to_be_bytes());
    s.extend_from_slice(&dp.to_be_bytes());
    s.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);
    s
}

/// ICMP or ICMPv6 message: type, code, checksum, then `rest`.
fn icmp(ty: u8, code: u8, rest: &[u8]) -> Vec<u8> {
    let mut i = vec![ty, code, 0, 0];
    i.extend_from_slice(rest);
    i
}

/// ND option: type, length in units of 8 bytes, data (padded to the length).
fn nd_opt(ty: u8, data: &[u8]) -> Vec<u8> {
    let len = (2 + data.len()).div_ceil(8);
    let mut o = vec![ty, len as u8];
    o.extend_from_slice(data);
    o.resize(len * 8, 0);
    o
}

/// Neighbour solicitation (135) or advertisement (136) for `target`.
fn nd(ty: u8, target: u128, opts: &[u8]) -> Vec<u8> {
    let flags: [u8; 4] = if ty == 136 { [0x60, 0, 0, 0] } else { [0; 4] };
    let mut rest = flags.to_vec();
    rest.extend_from_slice(&target.to_be_bytes());
    rest.extend_from_slice(opts);
    icmp(ty, 0, &rest)
}

/// Hop-by-hop, routing or destination options header of `(units + 1) * 8` bytes.
fn ext(nh: u8, units: u8) -> Vec<u8> {
    let mut e = vec![nh, units];
    // PadN option filling the rest (contents never matter to the parser).
    e.extend_from_slice(&[1, (units as usize * 8 + 4) as u8]);
    e.resize((units as usize + 1) * 8, 0);
    e
}

/// IPv6 fragment header; `offset` in 8-byte units.
fn frag6(nh: u8, offset: u16, more: bool) -> Vec<u8> {
    let offlg = (offset << 3) | more as u16;
    let mut f = vec![nh, 0];
    f.extend_from_slice(&offlg.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x42, 0x42]);
    f
}

/// Authentication header; its length field counts 4-byte words minus 2.
fn ah(nh: u8, len_field: u8) -> Vec<u8> {
    let mut a = vec![nh, len_field, 0, 0];
    a.resize((len_field as usize + 2) * 4, 0xa5);
    a
}

/// Ethernet/IPv4 ARP.
fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&spa);
    a.extend_from_slice(&tha);
    a.extend_from_slice(&tpa);
    a
}

// ------------------------------------------------------------ test helpers

fn run(pkt: &[u8]) -> (FlowKey, Extracted) {
    let mut key = FlowKey::ZERO;
    let ex = extract_into(7, pkt, &mut key);
    check_invariants(pkt, &key, &ex);
    (key, ex)
}

/// Facts that hold for any input, valid or not.
fn check_invariants(pkt: &[u8], key: &FlowKey, ex: &Extracted) {
    let len = pkt.len();
    let l = ex.layout;
    assert!(l.vlans as usize <= MAX_VLAN_TAGS, "{l:?}");
    if l.l3 != NO_OFFSET {
        let base = 14 + 4 * l.vlans as usize;
        assert!(
            l.l3 as usize == base || l.l3 as usize == base + 8,
            "l3 not after the tags (or SNAP): {l:?}"
        );
        assert!(l.l3 as usize <= len, "{l:?} len {len}");
    }
    if l.l3_end != NO_OFFSET {
        assert_ne!(l.l3, NO_OFFSET, "{l:?}");
        assert!(l.l3 as usize + 20 <= l.l3_end as usize, "{l:?}");
        assert!(l.l3_end as usize <= len, "{l:?} len {len}");
    }
    if l.l4 != NO_OFFSET {
        assert_ne!(l.l3_end, NO_OFFSET, "{l:?}");
        assert!(l.l3 < l.l4, "{l:?}");
        assert!(l.l4 as usize + 4 <= l.l3_end as usize, "{l:?}");
    }
    // Key-level facts.
    assert_eq!(
        key.words()[1..8],
        [0u64; 7],
        "metadata, registers and tunnel stay zero"
    );
    assert_eq!(key.pkt_mark(), 0);
    let ty = key.eth_type();
    assert!(
        ty == 0 || ty >= 0x0600 || ty == ETH_TYPE_NONE as u64,
        "eth_type {ty:#x}"
    );
    if key.vlan_tci() != 0 {
        assert_ne!(key.vlan_tci() as u16 & VLAN_PRESENT, 0);
        assert!(key.vlan_tpid() == ETH_TYPE_VLAN as u64 || key.vlan_tpid() == ETH_TYPE_QINQ as u64);
    } else {
        assert_eq!(key.vlan_tpid(), 0);
        assert_eq!(key.vlan2_tci(), 0);
    }
    assert_eq!(key.vlan2_tci() != 0, l.vlans == 2);
    let frag = key.ip_frag() as u8;
    assert!(frag == 0 || frag == FRAG_ANY || frag == FRAG_ANY | FRAG_LATER);
    if frag & FRAG_LATER != 0 {
        assert_eq!(l.l4, NO_OFFSET);
        assert_eq!((key.tp_src(), key.tp_dst(), key.tcp_flags()), (0, 0, 0));
    }
    if key.nd_target() != 0 {
        assert_eq!(ty, ETH_TYPE_IPV6 as u64);
        assert!(key.tp_src() == 135 || key.tp_src() == 136);
    }
    if ex.error.is_none() && len >= 14 {
        assert_eq!(key.eth_dst(), mac_u64(pkt[0..6].try_into().unwrap()));
        assert_eq!(key.eth_src(), mac_u64(pkt[6..12].try_into().unwrap()));
    }
}

/// `key` with only `fields` kept.
fn only(key: &FlowKey, fields: &[Field]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for &f in fields {
        k.set_field(f, key.field(f));
    }
    k
}

const ETH_FIELDS: &[Field] = &[Field::InPort, Field::EthDst, Field::EthSrc];
const L2_FIELDS: &[Field] = &[
    Field::InPort,
    Field::EthDst,
    Field::EthSrc,
    Field::EthType,
    Field::VlanTci,
    Field::VlanTpid,
    Field::Vlan2Tpid,
    Field::Vlan2Tci,
];
/// L3 fields of IP (and ARP) except `ip_proto`.
const L3_FIELDS: &[Field] = &[
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::IpFrag,
    Field::Ipv6Label,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
];

fn fields(groups: &[&[Field]]) -> Vec<Field> {
    groups.iter().flat_map(|g| g.iter().copied()).collect()
}

/// One stage of a truncation sweep: from `min_len` bytes on (up to the next
/// stage), extraction reports `error` and yields `key`.
struct Stage {
    min_len: usize,
    error: Option<ParseError>,
    key: FlowKey,
}

fn stage(min_len: usize, error: Option<ParseError>, key: FlowKey) -> Stage {
    Stage {
        min_len,
        error,
        key,
    }
}

/// Extracts every prefix of `frame` and compares with the stages.
fn sweep(frame: &[u8], stages: &[Stage]) {
    assert_eq!(stages[0].min_len, 0);
    for len in 0..=frame.len() {
        let st = stages.iter().rev().find(|s| s.min_len <= len).unwrap();
        let (key, ex) = run(&frame[..len]);
        assert_eq!(ex.error, st.error, "prefix of {len} bytes");
        assert_eq!(key, st.key, "prefix of {len} bytes");
    }
}

// ------------------------------------------------------------- Ethernet

#[test]
fn short_frames_are_truncated_ethernet() {
    let f = eth(0x88cc, &[1, 2, 3]);
    for len in 0..14 {
        let (key, ex) = run(&f[..len]);
        assert_eq!(ex.error, Some(ParseError::TruncatedEthernet));
        assert_eq!(ex.layout, Layout::NONE);
        let mut want = FlowKey::ZERO;
        want.set_in_port(7);
        assert_eq!(key, want);
    }
}

#[test]
fn unknown_ethertype_keeps_l2_only() {
    let f = eth(0x88cc, &[0xaa; 40]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.in_port(), 7);
    assert_eq!(key.eth_dst(), mac_u64(MAC_B));
    assert_eq!(key.eth_src(), mac_u64(MAC_A));
    assert_eq!(key.eth_type(), 0x88cc);
    assert_eq!(key.vlan_tci(), 0);
    assert_eq!(only(&key, L2_FIELDS), key);
    assert_eq!(ex.layout.l3, 14);
    assert_eq!(ex.layout.l4, NO_OFFSET);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn in_port_is_kept_whole_and_key_is_overwritten() {
    let f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, b"x")));
    let mut key = FlowKey::from_words([u64::MAX; crate::key::KEY_WORDS]);
    let ex = extract_into(0xfedc_ba98, &f, &mut key);
    assert_eq!(ex.error, None);
    assert_eq!(key.in_port(), 0xfedc_ba98);
    assert_eq!(key, extract(0xfedc_ba98, &f));
    assert_eq!(key.metadata(), 0);
    assert_eq!(key.nd_target(), 0);
    assert_eq!(key.ipv6_src(), 0);
}

// ------------------------------------------------------------------ IPv4

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

// ------------------------------------------------------------------ IPv6

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

// ------------------------------------------------------------ ICMPv6 / ND

fn v6_icmp(payload: &[u8]) -> Vec<u8> {
    eth(
        ETH_TYPE_IPV6,
        &V6 {
            nh: IP_PROTO_ICMPV6,
            hlim: 255,
            ..V6::default()
        }
        .build(payload),
    )
}

const SLL: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const TLL: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

#[test]
fn icmpv6_echo() {
    let (key, ex) = run(&v6_icmp(&icmp(128, 0, &[0x12, 0x34, 0, 1, 9, 9])));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 58);
    assert_eq!((key.icmp_type(), key.icmp_code()), (128, 0));
    assert_eq!(key.nd_target(), 0);
    assert_eq!(ex.layout.l4, 54);
}

#[test]
fn nd_solicitation_with_sll() {
    let f = v6_icmp(&nd(135, IP6_B, &nd_opt(1, &SLL)));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (135, 0));
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), mac_u64(SLL));
    assert_eq!(key.arp_tha(), 0);
    assert_eq!(key.ip_ttl(), 255);
    assert_eq!(ex.layout.l4, 54);
    assert_eq!(ex.layout.l3_end as usize, f.len());

    // Without options: the target only.
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &[])));
    assert_eq!(ex.error, None);
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!((key.arp_sha(), key.arp_tha()), (0, 0));
}

#[test]
fn nd_advertisement_with_tll() {
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &nd_opt(2, &TLL))));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (136, 0));
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), 0);
    assert_eq!(key.arp_tha(), mac_u64(TLL));
}

#[test]
fn nd_options_that_do_not_apply_are_skipped() {
    // Nonce (type 14), a 16-byte "SLL" (not the Ethernet form), then the SLL.
    let mut opts = nd_opt(14, &[1, 2, 3, 4, 5, 6]);
    opts.extend(nd_opt(1, &[0xee; 14]));
    opts.extend(nd_opt(1, &SLL));
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &opts)));
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_sha(), mac_u64(SLL));

    // TLL in a solicitation and SLL in an advertisement are ignored.
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &nd_opt(2, &TLL))));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.nd_target(), key.arp_sha(), key.arp_tha()),
        (IP6_B, 0, 0)
    );
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &nd_opt(1, &SLL))));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.nd_target(), key.arp_sha(), key.arp_tha()),
        (IP6_B, 0, 0)
    );

    // A non-zero code is not neighbour discovery.
    let mut m = nd(135, IP6_B, &nd_opt(1, &SLL));
    m[1] = 1;
    let (key, ex) = run(&v6_icmp(&m));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (135, 1));
    assert_eq!((key.nd_target(), key.arp_sha()), (0, 0));

    // Router solicitation (133) is not parsed as ND either.
    let (key, ex) = run(&v6_icmp(&icmp(133, 0, &[0; 4])));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.nd_target()), (133, 0));
}

#[test]
fn malformed_nd_options_clear_nd_fields() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zero-length option", {
            let mut o = nd_opt(1, &SLL);
            o[1] = 0;
            o
        }),
        ("zero-length option after a good one", {
            let mut o = nd_opt(1, &SLL);
            o.extend_from_slice(&[14, 0, 0, 0, 0, 0, 0, 0]);
            o
        }),
        ("duplicate SLL", {
            let mut o = nd_opt(1, &SLL);
            o.extend(nd_opt(1, &TLL));
            o
        }),
        ("option longer than the payload", {
            let mut o = nd_opt(1, &SLL);
            o[1] = 2;
            o
        }),
        ("truncated option", nd_opt(1, &SLL)[..5].to_vec()),
        ("one trailing byte", {
            let mut o = nd_opt(1, &SLL);
            o.push(1);
            o
        }),
    ];
    for (what, opts) in cases {
        let f = v6_icmp(&nd(135, IP6_B, &opts));
        let (key, ex) = run(&f);
        assert_eq!(ex.error, Some(ParseError::BadNd), "{what}");
        assert_eq!(
            (key.nd_target(), key.arp_sha(), key.arp_tha()),
            (0, 0, 0),
            "{what}"
        );
        // The ICMPv6 type/code and the IPv6 layer are kept.
        assert_eq!((key.tp_src(), key.tp_dst()), (135, 0), "{what}");
        assert_eq!((key.ip_proto(), key.ipv6_src()), (58, IP6_A), "{what}");
        assert_eq!(ex.layout.l4, 54, "{what}");
    }

    // Duplicate TLL in an advertisement.
    let mut o = nd_opt(2, &TLL);
    o.extend(nd_opt(2, &SLL));
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &o)));
    assert_eq!(ex.error, Some(ParseError::BadNd));
    assert_eq!((key.nd_target(), key.arp_tha()), (0, 0));
}

#[test]
fn nd_options_are_bounded_by_payload_length() {
    // An SLL option sits in the Ethernet padding, outside the IPv6 payload.
    let mut f = v6_icmp(&nd(135, IP6_B, &[]));
    f.extend(nd_opt(1, &SLL));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), 0);
}

// ------------------------------------------------------------------ VLAN

#[test]
fn single_vlan_tag() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 0xa064)], ETH_TYPE_IPV4, &ip);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.vlan_tci(), (0xa064 | VLAN_PRESENT) as u64);
    assert_eq!(key.vlan_tci() as u16 & crate::key::VLAN_VID_MASK, 100);
    assert_eq!((key.vlan_tci() as u16 & crate::key::VLAN_PCP_MASK) >> 13, 5);
    assert_eq!(key.vlan_tpid(), 0x8100);
    assert_eq!((key.vlan2_tpid(), key.vlan2_tci()), (0, 0));
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!((key.tp_src(), key.tp_dst()), (1, 2));
    assert_eq!(ex.layout.vlans, 1);
    assert_eq!(ex.layout.l3, 18);
    assert_eq!(ex.layout.l4, 38);

    // A priority tag (VID 0, PCP 0) differs from no tag.
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 0)], ETH_TYPE_IPV4, &ip);
    let (key, _) = run(&f);
    assert_eq!(key.vlan_tci(), VLAN_PRESENT as u64);
    let untagged = extract(7, &eth(ETH_TYPE_IPV4, &ip));
    assert_eq!(untagged.vlan_tci(), 0);
    assert_ne!(key, untagged);
}

#[test]
fn qinq_double_tag() {
    let ip = V4::default().build(&udp(40101, 53, b"q"));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 0x600a), (ETH_TYPE_VLAN, 0x0064)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.vlan_tpid(), 0x88a8);
    assert_eq!(key.vlan_tci(), 0x700a);
    assert_eq!(key.vlan2_tpid(), 0x8100);
    assert_eq!(key.vlan2_tci(), 0x1064);
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!((key.tp_src(), key.tp_dst()), (40101, 53));
    assert_eq!(ex.layout.vlans, 2);
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l4, 42);
}

#[test]
fn third_tag_is_left_as_ethertype() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 1), (ETH_TYPE_VLAN, 2), (ETH_TYPE_VLAN, 3)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x8100);
    assert_eq!(key.vlan_tci(), 0x1001);
    assert_eq!(key.vlan2_tci(), 0x1002);
    assert_eq!((key.ip_proto(), key.ipv4_src(), key.tp_src()), (0, 0, 0));
    assert_eq!(ex.layout.vlans, 2);
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn truncated_vlan_tags() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 0x0123), (ETH_TYPE_VLAN, 0x0456)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let full = extract(7, &f);
    let mut one_tag = only(&full, ETH_FIELDS);
    one_tag.set_vlan_tpid(0x88a8);
    one_tag.set_vlan_tci(0x1123);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, Some(ParseError::TruncatedVlan), only(&full, ETH_FIELDS)),
            stage(18, Some(ParseError::TruncatedVlan), one_tag),
            stage(22, Some(ParseError::BadIpv4), only(&full, L2_FIELDS)),
            stage(f.len(), None, full),
        ],
    );
}

// --------------------------------------------------------------- 802.3

fn dot3(payload: &[u8]) -> Vec<u8> {
    eth(payload.len() as u16, payload)
}

#[test]
fn llc_snap_carries_an_ethertype() {
    let ip = V4::default().build(&udp(40102, 9999, b"snap"));
    let mut p = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    p.extend_from_slice(&ip);
    let f = dot3(&p);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!((key.tp_src(), key.tp_dst()), (40102, 9999));
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l4, 42);

    // Truncation inside the SNAP header: plain 802.3, no error.
    let full = key;
    let mut plain = only(&full, ETH_FIELDS);
    plain.set_eth_type(ETH_TYPE_NONE as u64);
    let l2 = only(&full, L2_FIELDS);
    assert_eq!(l2.eth_type(), 0x0800);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, None, plain),
            stage(22, Some(ParseError::BadIpv4), l2),
            stage(f.len(), None, full),
        ],
    );
}

#[test]
fn plain_802_3_is_eth_type_none() {
    // STP BPDU behind LLC 42 42 03.
    let mut p = vec![0x42, 0x42, 0x03];
    p.extend_from_slice(&[0; 35]);
    let f = dot3(&p);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(key.eth_src(), mac_u64(MAC_A));
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // SNAP with a non-zero OUI (Cisco CDP) is not an ethertype encapsulation.
    let f = dot3(&[0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00, 1, 2, 3, 4]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // SNAP whose "ethertype" is a length is 802.3 as well.
    let f = dot3(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x01, 0x00, 0x45, 0, 0, 20]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // The boundary: 0x05ff is a length, 0x0600 an ethertype.
    let (key, ex) = run(&eth(0x05ff, &[0; 8]));
    assert_eq!((key.eth_type(), ex.layout.l3), (0x05ff, NO_OFFSET));
    let (key, ex) = run(&eth(0x0600, &[0; 8]));
    assert_eq!((key.eth_type(), ex.layout.l3), (0x0600, 14));

    // 802.3 behind a VLAN tag.
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 5)], 0x0010, &[0x42; 16]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.eth_type(), key.vlan_tci()), (0x05ff, 0x1005));
}

// ------------------------------------------------------------------- ARP

#[test]
fn arp_request_and_reply() {
    let req = eth(ETH_TYPE_ARP, &arp(1, MAC_A, IP_A, [0; 6], IP_B));
    let (key, ex) = run(&req);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x0806);
    assert_eq!(key.arp_op(), 1);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!(key.ipv4_dst(), ip_u64(IP_B));
    assert_eq!(key.arp_sha(), mac_u64(MAC_A));
    assert_eq!(key.arp_tha(), 0);
    assert_eq!((key.tp_src(), key.ip_ttl()), (0, 0));
    assert_eq!(ex.layout.l3, 14);
    assert_eq!(ex.layout.l4, NO_OFFSET);

    // Reply, padded to 60 bytes.
    let mut rep = eth(ETH_TYPE_ARP, &arp(2, MAC_B, IP_B, MAC_A, IP_A));
    rep.resize(60, 0);
    let (key, ex) = run(&rep);
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_op(), 2);
    assert_eq!(key.ipv4_src(), ip_u64(IP_B));
    assert_eq!(key.ipv4_dst(), ip_u64(IP_A));
    assert_eq!(key.arp_sha(), mac_u64(MAC_B));
    assert_eq!(key.arp_tha(), mac_u64(MAC_A));
}

#[test]
fn unusual_arp() {
    // Opcode above 255: addresses but no opcode.
    let (key, ex) = run(&eth(ETH_TYPE_ARP, &arp(0x0101, MAC_A, IP_A, MAC_B, IP_B)));
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_op(), 0);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!(key.arp_tha(), mac_u64(MAC_B));

    // Not Ethernet/IPv4 (hardware type 6, or a 16-byte protocol address).
    for (i, v) in [(1usize, 6u8), (5, 16), (4, 8)] {
        let mut a = arp(1, MAC_A, IP_A, MAC_B, IP_B);
        a[i] = v;
        let f = eth(ETH_TYPE_ARP, &a);
        let (key, ex) = run(&f);
        assert_eq!(ex.error, None);
        assert_eq!(key, only(&key, L2_FIELDS), "byte {i} = {v}");
        assert_eq!(key.eth_type(), 0x0806);
    }

    // ARP behind a VLAN tag.
    let f = eth_tagged(
        &[(ETH_TYPE_VLAN, 100)],
        ETH_TYPE_ARP,
        &arp(1, MAC_A, IP_A, [0; 6], IP_B),
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.vlan_tci(), key.arp_op(), key.ipv4_dst()),
        (0x1064, 1, ip_u64(IP_B))
    );
}

#[test]
fn truncated_arp() {
    let f = eth(ETH_TYPE_ARP, &arp(1, MAC_A, IP_A, [0; 6], IP_B));
    let full = extract(7, &f);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, Some(ParseError::TruncatedArp), only(&full, L2_FIELDS)),
            stage(42, None, full),
        ],
    );
}

// ---------------------------------------------------- truncation sweeps

/// Every prefix of a valid frame: the IP length check makes any cut inside
/// the IP packet a bad L3 header, with everything past L2 zero.
#[test]
fn truncated_ip_frames() {
    let v4 = V4 {
        proto: IP_PROTO_TCP,
        opts: vec![1, 1, 1, 0],
        ..V4::default()
    };
    let v6 = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    };
    let mut chain = ext(IP_PROTO_UDP, 0);
    chain.extend(udp(1, 2, b"xy"));
    let frames = [
        (
            eth(ETH_TYPE_IPV4, &v4.build(&tcp(1, 2, 2, &[]))),
            ParseError::BadIpv4,
        ),
        (
            eth_tagged(
                &[(ETH_TYPE_VLAN, 7)],
                ETH_TYPE_IPV4,
                &V4::default().build(&udp(1, 2, b"z")),
            ),
            ParseError::BadIpv4,
        ),
        (eth(ETH_TYPE_IPV6, &v6.build(&chain)), ParseError::BadIpv6),
        (
            v6_icmp(&nd(135, IP6_B, &nd_opt(1, &SLL))),
            ParseError::BadIpv6,
        ),
    ];
    for (f, err) in &frames {
        let full = extract(7, f);
        let l3 = 14 + 4 * (full.vlan_tci() != 0) as usize;
        let mut stages = vec![
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(l3, Some(*err), only(&full, L2_FIELDS)),
            stage(f.len(), None, full),
        ];
        if l3 > 14 {
            stages.insert(
                1,
                stage(14, Some(ParseError::TruncatedVlan), only(&full, ETH_FIELDS)),
            );
        }
        sweep(f, &stages);
    }
}

/// Cuts the IPv4 payload (`l4`) at every length, with the total length
/// adjusted, and checks which L4 error each cut gives.
fn sweep_ipv4_l4(proto: u8, l4: &[u8], need: usize, err: ParseError) {
    let ip = V4 {
        proto,
        ..V4::default()
    };
    let full = extract(7, &eth(ETH_TYPE_IPV4, &ip.build(l4)));
    let l3_key = only(&full, &fields(&[L2_FIELDS, L3_FIELDS, &[Field::IpProto]]));
    for k in 0..=l4.len() {
        let f = eth(ETH_TYPE_IPV4, &ip.build(&l4[..k]));
        let (key, ex) = run(&f);
        if k < need {
            assert_eq!(ex.error, Some(err), "proto {proto}, {k} bytes");
            assert_eq!(key, l3_key, "proto {proto}, {k} bytes");
            assert_eq!(ex.layout.l4, NO_OFFSET);
        } else {
            assert_eq!(ex.error, None, "proto {proto}, {k} bytes");
            assert_eq!(key, full, "proto {proto}, {k} bytes");
            assert_eq!(ex.layout.l4, 34);
        }
        assert_eq!(ex.layout.l3_end as usize, f.len());
    }
}

#[test]
fn truncated_l4_headers() {
    let t = tcp(1, 2, 0x011, &[1, 1, 1, 1]);
    sweep_ipv4_l4(IP_PROTO_TCP, &t, 24, ParseError::BadTcp);
    sweep_ipv4_l4(IP_PROTO_UDP, &udp(3, 4, b""), 8, ParseError::TruncatedUdp);
    sweep_ipv4_l4(IP_PROTO_SCTP, &sctp(5, 6), 12, ParseError::TruncatedSctp);
    sweep_ipv4_l4(
        IP_PROTO_ICMP,
        &icmp(8, 0, &[]),
        4,
        ParseError::TruncatedIcmp,
    );

    // A TCP data offset below 5 words is invalid even with bytes to spare.
    let mut t = tcp(1, 2, 0x002, &[0; 8]);
    for doff in 0..5u8 {
        t[12] = doff << 4;
        let ip = V4 {
            proto: IP_PROTO_TCP,
            ..V4::default()
        };
        let (key, ex) = run(&eth(ETH_TYPE_IPV4, &ip.build(&t)));
        assert_eq!(ex.error, Some(ParseError::BadTcp), "doff {doff}");
        assert_eq!(key.tp_src(), 0);
    }
}

#[test]
fn truncated_ipv6_chain_and_l4() {
    let mut p = ext(IPV6_ROUTING, 0);
    p.extend(ext(IPV6_DSTOPTS, 2));
    p.extend(ext(IP_PROTO_TCP, 1));
    p.extend(tcp(9, 10, 0x002, &[]));
    let hdr = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    };
    let full = extract(7, &eth(ETH_TYPE_IPV6, &hdr.build(&p)));
    let l3 = fields(&[L2_FIELDS, L3_FIELDS]);
    for k in 0..=p.len() {
        let (key, ex) = run(&eth(ETH_TYPE_IPV6, &hdr.build(&p[..k])));
        if k < 48 {
            assert_eq!(ex.error, Some(ParseError::BadIpv6Ext), "{k} bytes");
            assert_eq!(key, only(&full, &l3), "{k} bytes");
        } else if k < 68 {
            assert_eq!(ex.error, Some(ParseError::BadTcp), "{k} bytes");
            let mut want = only(&full, &l3);
            want.set_ip_proto(6);
            assert_eq!(key, want, "{k} bytes");
        } else {
            assert_eq!((ex.error, key), (None, full));
        }
    }
}

#[test]
fn truncated_nd() {
    let m = nd(135, IP6_B, &nd_opt(1, &SLL));
    let full = extract(7, &v6_icmp(&m));
    let l3 = fields(&[L2_FIELDS, L3_FIELDS, &[Field::IpProto]]);
    for k in 0..=m.len() {
        let (key, ex) = run(&v6_icmp(&m[..k]));
        let mut want = only(&full, &l3);
        let err = match k {
            0..=3 => Some(ParseError::TruncatedIcmp),
            4..=23 => {
                want.set_tp_src(135);
                Some(ParseError::BadNd)
            }
            24 => {
                want.set_tp_src(135);
                want.set_nd_target(IP6_B);
                None
            }
            25..=31 => {
                want.set_tp_src(135);
                Some(ParseError::BadNd)
            }
            _ => {
                want = full;
                None
            }
        };
        assert_eq!(ex.error, err, "{k} bytes");
        assert_eq!(key, want, "{k} bytes");
        assert_eq!(ex.layout.l4 == NO_OFFSET, k < 4, "{k} bytes");
    }
}

// ------------------------------------------------------------- counters

#[test]
fn parse_counters() {
    let mut c = ParseCounters::default();
    assert_eq!(c.total(), 0);
    let frames = [
        vec![0u8; 5],
        vec![0u8; 13],
        eth(ETH_TYPE_IPV4, &[0x45]),
        eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, b""))),
    ];
    for f in &frames {
        let mut key = FlowKey::ZERO;
        c.record(&extract_into(1, f, &mut key));
    }
    assert_eq!(c.count(ParseError::TruncatedEthernet), 2);
    assert_eq!(c.count(ParseError::BadIpv4), 1);
    assert_eq!(c.count(ParseError::BadNd), 0);
    assert_eq!(c.total(), 3);
    let v: Vec<_> = c.iter().collect();
    assert_eq!(
        v,
        vec![(ParseError::TruncatedEthernet, 2), (ParseError::BadIpv4, 1)]
    );
    // Every error has its own counter slot and a distinct name.
    for (i, e) in ParseError::ALL.iter().enumerate() {
        assert_eq!(*e as usize, i);
        assert_eq!(e.to_string(), e.name());
    }
    let mut names: Vec<_> = ParseError::ALL.iter().map(|e| e.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ParseError::ALL.len());
}

// ------------------------------------------------------------ properties

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

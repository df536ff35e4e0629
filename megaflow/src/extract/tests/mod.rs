//! Unit and property tests of packet extraction over hand-built frames.
//!
//! Frames are assembled by the small builders below (no checksums: the
//! parser never reads them). Captured, real frames are checked in
//! `tests/extract_golden.rs`.

use super::*;
use crate::key::{Field, FlowKey, FRAG_ANY, FRAG_LATER, VLAN_PRESENT};

mod ipv4;
mod ipv6;
mod l2;
mod nd;
mod props;
mod truncation;

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

fn dot3(payload: &[u8]) -> Vec<u8> {
    eth(payload.len() as u16, payload)
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

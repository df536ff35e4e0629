//! The packet as the simulated device sees it: its match key and the header
//! edits the device makes.
//!
//! ## The key
//!
//! [`extract_key`] parses a frame into the `fte_match_param` value the
//! device would compare with a rule ([`PacketKey`]): the outer headers,
//! misc, inner and misc2 blocks, the
//! [`ENCODED_LEN`] bytes an [`Encoded`](crate::prm::Encoded) mask and value
//! have, viewed as 32 native-endian `u64` words so a matcher compares
//! `(key_word & mask_word) == value_word` word by word.
//!
//! It is the hot path of the simulator, so it writes bytes at fixed offsets
//! instead of going through [`crate::prm::set`]; the offsets were taken from
//! [`crate::prm::FIELDS`] (rdma-core `providers/mlx5/mlx5_ifc.h` at
//! 691953d8, `mlx5_ifc_dr_match_spec_bits` / `_misc_bits` / `_misc2_bits`),
//! a unit test checks each against the table, and a property test compares
//! the whole key with a slow reference that writes every field through
//! [`crate::prm::set`]. What is parsed:
//!
//! - Ethernet (14 bytes, else the key holds only the source port and the
//!   registers): `smac`, `dmac`;
//! - up to two VLAN tags (TPID 0x8100 or 0x88a8, all 4 bytes present; a cut
//!   tag ends parsing and its TPID is the ethertype): the first in
//!   `cvlan_tag`/`svlan_tag` and `first_prio`/`first_cfi`/`first_vid`, the
//!   second in misc `outer_second_*`; `ethertype` is the one after the tags
//!   (a third tag's TPID, or an 802.3 length: no SNAP parsing);
//! - IPv4 (ethertype 0x0800, version 4, 20 bytes present) and IPv6
//!   (0x86dd, version 6, 40 bytes): `ip_version`, `ip_protocol` (IPv6: the
//!   first next header, no extension header walking), `ip_dscp`, `ip_ecn`,
//!   `ip_ttl_hoplimit`, `frag` (IPv4: MF or a non-zero offset; IPv6: the
//!   first next header is Fragment, 44), `src_ip`/`dst_ip` (IPv4 in the last
//!   4 bytes of the 16);
//! - TCP (20 bytes present: `tcp_sport`, `tcp_dport`, the 9 `tcp_flags`) or
//!   UDP (8 bytes: `udp_sport`, `udp_dport`) right after the IP header
//!   (IPv4: IHL ≥ 5, not a later fragment; IPv6: the first next header).
//!   Lengths are checked against the buffer, not the IP length field;
//! - misc `source_port` = the vport the packet came from, misc2
//!   `metadata_reg_c_0..7` = the packet's registers;
//! - a tunnel, on the UDP ports a ConnectX parses without being told
//!   (VXLAN 4789, Geneve 6081), of an unfragmented outer packet: misc
//!   `vxlan_vni`, or `geneve_vni`, `geneve_oam`, `geneve_opt_len` and
//!   `geneve_protocol_type`; and the frame inside (VXLAN's always,
//!   Geneve's when its payload is Ethernet, after its options) parsed as
//!   above into `inner_headers`, its second tag into misc `inner_second_*`.
//!   The VXLAN flags are not looked at (a frame without the I flag, which
//!   software drops as malformed, is parsed all the same).
//!
//! Nothing else is set (`ipv4_ihl`, the `*_ok` bits, flow label: zero).
//!
//! ## The edits
//!
//! [`apply_modify`] runs modify-header actions ([`ModifyOp`]) on the
//! packet and its registers, [`push_vlan`] and [`pop_vlan`] the VLAN
//! actions. The header rewrites and their checksum updates are megaflow's
//! ([`megaflow::actions::edit`]): incremental (RFC 1624), so the IPv4
//! header checksum and the TCP/UDP checksums stay valid, and a UDP checksum
//! of 0 stays 0, as the NIC does. Headers are found as the key finds them
//! (no SNAP, no IPv6 extension headers walked; IPv4 L4 within the IP total
//! length, as megaflow parses it). A field the packet does not have (SIPV4
//! on IPv6, TCP ports on UDP, the IPv4 TTL on IPv6, the VLAN id on an
//! untagged frame) is skipped.
//!
//! Thread-safety: pure functions.

use megaflow::actions::edit::{self, Ip};
use megaflow::extract::{
    extract_into, header, Layout, ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_QINQ, ETH_TYPE_VLAN,
    IP_PROTO_TCP, IP_PROTO_UDP, NO_OFFSET,
};
use megaflow::FlowKey;

use megaflow::tunnel::{GENEVE_ETH, GENEVE_PORT, VXLAN_PORT};

use crate::dr::modify::{ModifyField, ModifyOp};
use crate::prm::{PrmField, ENCODED_LEN};

/// Words in a [`PacketKey`].
pub const KEY_WORDS: usize = ENCODED_LEN / 8;

/// The packet's `fte_match_param` value as the device parses it: outer
/// headers, misc, inner (a tunnel's frame), misc2 (metadata registers) =
/// [`ENCODED_LEN`] (256) bytes, viewed as 32 native-endian u64 words (word
/// i = `u64::from_ne_bytes(bytes[8i..8i+8])`), so a matcher can compare
/// `(pkt_word & mask_word) == value_word` with mask and value bytes
/// converted the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketKey {
    /// The 256 bytes as native-endian words.
    pub words: [u64; KEY_WORDS],
}

impl PacketKey {
    /// All zero.
    pub const ZERO: PacketKey = PacketKey {
        words: [0; KEY_WORDS],
    };

    /// The key as `fte_match_param` bytes (outer, misc, inner, misc2).
    pub fn bytes(&self) -> [u8; ENCODED_LEN] {
        let mut b = [0u8; ENCODED_LEN];
        for (chunk, w) in b.chunks_exact_mut(8).zip(self.words.iter()) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        b
    }

    /// The key of `fte_match_param` bytes (outer, misc, inner, misc2), as
    /// a mask or value is converted for comparison.
    pub fn from_bytes(b: &[u8; ENCODED_LEN]) -> Self {
        let mut k = PacketKey::ZERO;
        for (w, chunk) in k.words.iter_mut().zip(b.chunks_exact(8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            *w = u64::from_ne_bytes(a);
        }
        k
    }
}

impl Default for PacketKey {
    fn default() -> Self {
        PacketKey::ZERO
    }
}

// Byte offsets in the key (checked against prm::FIELDS by a unit test).
/// Word of `outer.smac` (bytes 0..6) and `outer.ethertype` (6..8).
pub(crate) const W_SMAC_ETHERTYPE: usize = 0;
/// Word of `outer.dmac` (8..14) and the first tag's TCI (14..16).
pub(crate) const W_DMAC_TCI: usize = 1;
/// Word of bytes 16..24: ip_protocol, dscp|ecn, tag/frag/version/flags,
/// tcp_flags, tcp_sport, tcp_dport.
pub(crate) const W_L3_TCP: usize = 2;
/// Word of bytes 24..32: ipv4_ihl (26), ttl (27), udp_sport, udp_dport.
pub(crate) const W_TTL_UDP: usize = 3;
/// First word of `outer.src_ip` (bytes 32..48); `dst_ip` follows.
pub(crate) const W_SRC_IP: usize = 4;
/// Word of misc bytes 0..8 (key bytes 64..72): source_port at 70.
pub(crate) const W_MISC_SOURCE_PORT: usize = 8;
/// Word of misc bytes 8..16 (key bytes 72..80): second TCI at 72, second
/// tag flags at 76.
pub(crate) const W_MISC_SECOND_VLAN: usize = 9;
/// Word of misc2 bytes 16..24 (key bytes 208..216): reg_c_7, reg_c_6; the
/// next three words hold reg_c_5/4, reg_c_3/2, reg_c_1/0.
pub(crate) const W_REG_C7: usize = 26;

/// Byte 18: first tag is a C-VLAN (`cvlan_tag`, bit 0x90).
const CVLAN_TAG: u8 = 0x80;
/// Byte 18: first tag is an S-VLAN (`svlan_tag`, bit 0x91).
const SVLAN_TAG: u8 = 0x40;
/// Byte 18: `frag` (bit 0x92).
const FRAG: u8 = 0x20;
/// Misc byte 12: `outer_second_cvlan_tag` (bit 0x260).
const SECOND_CVLAN_TAG: u8 = 0x80;
/// Misc byte 12: `outer_second_svlan_tag` (bit 0x262).
const SECOND_SVLAN_TAG: u8 = 0x20;

/// Misc byte 12: `inner_second_cvlan_tag` (bit 0x261).
const INNER_SECOND_CVLAN_TAG: u8 = 0x40;
/// Misc byte 12: `inner_second_svlan_tag` (bit 0x263).
const INNER_SECOND_SVLAN_TAG: u8 = 0x10;
/// First word of `inner_headers` (key byte 128).
pub(crate) const W_INNER: usize = 16;

/// IPv6 next header of the Fragment extension header.
const IPV6_FRAGMENT: u8 = 44;

#[inline(always)]
fn be16(a: u8, b: u8) -> u16 {
    u16::from_be_bytes([a, b])
}

/// The packet's key for a rule lookup: see the module documentation for
/// what is parsed. `key` is overwritten whole.
pub fn extract_key(pkt: &[u8], source_vport: u16, regs: &[u32; 8], key: &mut PacketKey) {
    let w = &mut key.words;
    *w = [0; KEY_WORDS];
    let [sp0, sp1] = source_vport.to_be_bytes();
    w[W_MISC_SOURCE_PORT] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, sp0, sp1]);
    for (i, pair) in regs.rchunks_exact(2).enumerate() {
        // rchunks from the end: (reg_c_6, reg_c_7), (reg_c_4, reg_c_5), ...
        let hi = pair[1].to_be_bytes();
        let lo = pair[0].to_be_bytes();
        w[W_REG_C7 + i] =
            u64::from_ne_bytes([hi[0], hi[1], hi[2], hi[3], lo[0], lo[1], lo[2], lo[3]]);
    }

    if let Some((dport, payload)) = headers(pkt, 0, w, &OUTER_AT) {
        tunnel(pkt, dport, payload, w);
    }
}

/// Where one block of headers goes in the key: the block's first word,
/// and the second VLAN tag's place in misc (its TCI's byte in word
/// [`W_MISC_SECOND_VLAN`], its C-VLAN and S-VLAN bits in that word's
/// byte 4).
struct HeadersAt {
    base: usize,
    second_tci: usize,
    second_c: u8,
    second_s: u8,
}

const OUTER_AT: HeadersAt = HeadersAt {
    base: 0,
    second_tci: 0,
    second_c: SECOND_CVLAN_TAG,
    second_s: SECOND_SVLAN_TAG,
};

/// The inner headers: `inner_headers` (key word 16), misc's
/// `inner_second_*` (bytes 10..12, bits 0x261 and 0x263).
const INNER_AT: HeadersAt = HeadersAt {
    base: W_INNER,
    second_tci: 2,
    second_c: INNER_SECOND_CVLAN_TAG,
    second_s: INNER_SECOND_SVLAN_TAG,
};

/// Parses the Ethernet frame at `start` into the block `at`. Returns the
/// UDP destination port and the offset of the UDP payload of an
/// unfragmented UDP packet.
#[inline(always)]
fn headers(
    pkt: &[u8],
    start: usize,
    w: &mut [u64; KEY_WORDS],
    at: &HeadersAt,
) -> Option<(u16, usize)> {
    let eth = header::<14>(pkt, start)?;
    let mut ty = be16(eth[12], eth[13]);
    let mut off = start + 14;
    let (mut tci1, mut tag1) = ([0u8; 2], 0u8);
    if ty == ETH_TYPE_VLAN || ty == ETH_TYPE_QINQ {
        if let Some(t) = header::<4>(pkt, off) {
            tag1 = if ty == ETH_TYPE_VLAN {
                CVLAN_TAG
            } else {
                SVLAN_TAG
            };
            tci1 = [t[0], t[1]];
            ty = be16(t[2], t[3]);
            off += 4;
            if ty == ETH_TYPE_VLAN || ty == ETH_TYPE_QINQ {
                if let Some(t) = header::<4>(pkt, off) {
                    let tag2 = if ty == ETH_TYPE_VLAN {
                        at.second_c
                    } else {
                        at.second_s
                    };
                    let mut b = w[W_MISC_SECOND_VLAN].to_ne_bytes();
                    b[at.second_tci] = t[0];
                    b[at.second_tci + 1] = t[1];
                    b[4] |= tag2;
                    w[W_MISC_SECOND_VLAN] = u64::from_ne_bytes(b);
                    ty = be16(t[2], t[3]);
                    off += 4;
                }
            }
        }
    }
    let w = &mut w[at.base..at.base + 8];
    let [ty0, ty1] = ty.to_be_bytes();
    w[W_SMAC_ETHERTYPE] =
        u64::from_ne_bytes([eth[6], eth[7], eth[8], eth[9], eth[10], eth[11], ty0, ty1]);
    w[W_DMAC_TCI] = u64::from_ne_bytes([
        eth[0], eth[1], eth[2], eth[3], eth[4], eth[5], tci1[0], tci1[1],
    ]);

    // L3: (protocol, tos, byte 18 without the tag bits, ttl, L4 offset).
    let mut b18 = tag1;
    let (proto, tos, ttl, l4) = match ty {
        ETH_TYPE_IPV4 => match header::<20>(pkt, off) {
            Some(h) if h[0] >> 4 == 4 => {
                let frag = be16(h[6], h[7]);
                if frag & 0x3fff != 0 {
                    b18 |= FRAG;
                }
                b18 |= 4 << 1;
                w[W_SRC_IP + 1] = u64::from_ne_bytes([0, 0, 0, 0, h[12], h[13], h[14], h[15]]);
                w[W_SRC_IP + 3] = u64::from_ne_bytes([0, 0, 0, 0, h[16], h[17], h[18], h[19]]);
                let ihl = usize::from(h[0] & 0x0f) * 4;
                let l4 = (frag & 0x1fff == 0 && ihl >= 20).then_some(off + ihl);
                (h[9], h[1], h[8], l4)
            }
            _ => (0, 0, 0, None),
        },
        ETH_TYPE_IPV6 => match header::<40>(pkt, off) {
            Some(h) if h[0] >> 4 == 6 => {
                if h[6] == IPV6_FRAGMENT {
                    b18 |= FRAG;
                }
                b18 |= 6 << 1;
                for (i, a) in h[8..40].chunks_exact(8).enumerate() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(a);
                    w[W_SRC_IP + i] = u64::from_ne_bytes(b);
                }
                (h[6], (h[0] << 4) | (h[1] >> 4), h[7], Some(off + 40))
            }
            _ => (0, 0, 0, None),
        },
        _ => (0, 0, 0, None),
    };

    let (mut tcp, mut udp) = ([0u8; 6], [0u8; 4]);
    let mut payload = None;
    if let Some(l4) = l4 {
        match proto {
            IP_PROTO_TCP => {
                if let Some(t) = header::<20>(pkt, l4) {
                    tcp = [t[0], t[1], t[2], t[3], t[12] & 1, t[13]];
                }
            }
            IP_PROTO_UDP => {
                if let Some(u) = header::<8>(pkt, l4) {
                    udp = [u[0], u[1], u[2], u[3]];
                    if b18 & FRAG == 0 {
                        payload = Some((be16(u[2], u[3]), l4 + 8));
                    }
                }
            }
            _ => {}
        }
    }
    w[W_L3_TCP] = u64::from_ne_bytes([
        proto,
        tos,
        b18 | tcp[4],
        tcp[5],
        tcp[0],
        tcp[1],
        tcp[2],
        tcp[3],
    ]);
    w[W_TTL_UDP] = u64::from_ne_bytes([0, 0, 0, ttl, udp[0], udp[1], udp[2], udp[3]]);
    payload
}

/// Writes `bytes` at byte `at` of the key.
#[inline(always)]
fn put_bytes(w: &mut [u64; KEY_WORDS], at: usize, bytes: &[u8]) {
    for (i, &x) in bytes.iter().enumerate() {
        let (word, byte) = ((at + i) / 8, (at + i) % 8);
        let mut b = w[word].to_ne_bytes();
        b[byte] = x;
        w[word] = u64::from_ne_bytes(b);
    }
}

/// The tunnel the device parses on the UDP port `dport` (VXLAN on 4789,
/// Geneve on 6081, the ports a ConnectX knows without being told): the
/// VNI (Geneve: also the OAM bit, the options' length and the protocol
/// type) into misc, and the inner frame (VXLAN's always; Geneve's when
/// its payload is Ethernet) into the inner block.
fn tunnel(pkt: &[u8], dport: u16, payload: usize, w: &mut [u64; KEY_WORDS]) {
    let inner = match dport {
        VXLAN_PORT => {
            let Some(h) = header::<8>(pkt, payload) else {
                return;
            };
            put_bytes(w, misc_byte(PrmField::MiscVxlanVni), &h[4..7]);
            payload + 8
        }
        GENEVE_PORT => {
            let Some(h) = header::<8>(pkt, payload) else {
                return;
            };
            put_bytes(
                w,
                misc_byte(PrmField::MiscGeneveVni),
                &[h[4], h[5], h[6], h[1] >> 7],
            );
            let opt_len = h[0] & 0x3f;
            put_bytes(
                w,
                misc_byte(PrmField::MiscGeneveOptLen),
                &[opt_len, h[2], h[3]],
            );
            if be16(h[2], h[3]) != GENEVE_ETH {
                return;
            }
            payload + 8 + usize::from(opt_len) * 4
        }
        _ => return,
    };
    headers(pkt, inner, w, &INNER_AT);
}

/// The key byte a misc field starts at.
#[inline(always)]
fn misc_byte(f: PrmField) -> usize {
    usize::from(f.def().bit) / 8
}

// ---------------------------------------------------------------------------
// Edits.

/// The header layout the edits work from: megaflow's, restricted to what
/// the device parses (L3 right after at most two tags, IPv6 L4 right after
/// the fixed header).
fn layout_of(pkt: &[u8]) -> Layout {
    let mut scratch = FlowKey::ZERO;
    let mut l = extract_into(0, pkt, &mut scratch).layout;
    if l.l3 != NO_OFFSET {
        let direct = eth_type_offset(pkt).map(|o| o + 2);
        if direct != Some(usize::from(l.l3)) {
            // LLC/SNAP: the device does not look through it.
            return Layout::NONE;
        }
        if matches!(edit::ip_header(pkt, &l), Some(Ip::V6(_)))
            && l.l4 != NO_OFFSET
            && usize::from(l.l4) != usize::from(l.l3) + 40
        {
            l.l4 = NO_OFFSET;
        }
    }
    l
}

/// Offset of the ethertype after up to two complete VLAN tags, as
/// [`extract_key`] reads it; `None` on a frame shorter than 14 bytes.
fn eth_type_offset(pkt: &[u8]) -> Option<usize> {
    header::<14>(pkt, 0)?;
    let mut at = 12;
    for _ in 0..2 {
        match edit::read16(pkt, at) {
            Some(ETH_TYPE_VLAN | ETH_TYPE_QINQ) if header::<4>(pkt, at + 2).is_some() => at += 4,
            _ => break,
        }
    }
    Some(at)
}

/// Offset of the first tag's TCI, if the frame is tagged.
fn first_tci_offset(pkt: &[u8]) -> Option<usize> {
    header::<18>(pkt, 0)?;
    matches!(edit::read16(pkt, 12), Some(ETH_TYPE_VLAN | ETH_TYPE_QINQ)).then_some(14)
}

fn be32_at(pkt: &[u8], off: usize) -> Option<u32> {
    edit::read::<4>(pkt, off).map(u32::from_be_bytes)
}

/// IPv4 / IPv6 traffic class byte.
fn tos(pkt: &[u8], ip: Ip) -> Option<u8> {
    match ip {
        Ip::V4(l3) => pkt.get(l3 + 1).copied(),
        Ip::V6(l3) => {
            let [a, b] = edit::read::<2>(pkt, l3)?;
            Some((a << 4) | (b >> 4))
        }
    }
}

/// The current value of `f` (in its low `f.width()` bits), if the packet
/// has the field.
fn read_at(pkt: &[u8], layout: &Layout, regs: &[u32; 8], f: ModifyField) -> Option<u32> {
    let l2 = || header::<14>(pkt, 0).map(|_| ());
    let ip = || edit::ip_header(pkt, layout);
    Some(match f {
        ModifyField::SmacHi => {
            l2()?;
            be32_at(pkt, 6)?
        }
        ModifyField::SmacLo => {
            l2()?;
            u32::from(edit::read16(pkt, 10)?)
        }
        ModifyField::DmacHi => {
            l2()?;
            be32_at(pkt, 0)?
        }
        ModifyField::DmacLo => {
            l2()?;
            u32::from(edit::read16(pkt, 4)?)
        }
        ModifyField::Ethertype => u32::from(edit::read16(pkt, eth_type_offset(pkt)?)?),
        ModifyField::FirstVid => u32::from(edit::read16(pkt, first_tci_offset(pkt)?)? & 0x0fff),
        ModifyField::IpDscp => u32::from(tos(pkt, ip()?)? >> 2),
        ModifyField::IpEcn => u32::from(tos(pkt, ip()?)? & 3),
        ModifyField::IpTtl => match ip()? {
            Ip::V4(l3) => u32::from(*pkt.get(l3 + 8)?),
            Ip::V6(_) => return None,
        },
        ModifyField::Ipv6HopLimit => match ip()? {
            Ip::V6(l3) => u32::from(*pkt.get(l3 + 7)?),
            Ip::V4(_) => return None,
        },
        ModifyField::Sipv4 | ModifyField::Dipv4 => match ip()? {
            Ip::V4(l3) => be32_at(pkt, l3 + if f == ModifyField::Sipv4 { 12 } else { 16 })?,
            Ip::V6(_) => return None,
        },
        ModifyField::Sipv6(n) | ModifyField::Dipv6(n) => match ip()? {
            Ip::V6(l3) => {
                let base = if matches!(f, ModifyField::Sipv6(_)) {
                    8
                } else {
                    24
                };
                be32_at(pkt, l3 + base + 4 * usize::from(n & 3))?
            }
            Ip::V4(_) => return None,
        },
        ModifyField::TcpSport | ModifyField::TcpDport | ModifyField::TcpFlags => {
            let t = edit::tcp_header(pkt, layout)?;
            match f {
                ModifyField::TcpSport => u32::from(edit::read16(pkt, t)?),
                ModifyField::TcpDport => u32::from(edit::read16(pkt, t + 2)?),
                _ => u32::from(edit::read16(pkt, t + 12)? & 0x1ff),
            }
        }
        ModifyField::UdpSport | ModifyField::UdpDport => {
            let u = edit::udp_header(pkt, layout)?;
            let at = if f == ModifyField::UdpSport { u } else { u + 2 };
            u32::from(edit::read16(pkt, at)?)
        }
        ModifyField::RegC(n) => regs[usize::from(n & 7)],
        // Only NIC RX has reg_b, and the sim refuses it in its Direct Rule
        // domains (the restore path is the verbs flow API, modelled on its
        // own): an action that names it never reaches a packet.
        ModifyField::RegB => return None,
    })
}

/// Writes `v` (already within the field's width) into `f`, which
/// [`read_at`] found in the packet.
fn write_at(pkt: &mut [u8], layout: &mut Layout, regs: &mut [u32; 8], f: ModifyField, v: u32) {
    let l = *layout;
    // Narrowing casts below: `v` holds at most the field's width.
    match f {
        ModifyField::SmacHi => {
            edit::put(pkt, 6, &v.to_be_bytes());
        }
        ModifyField::SmacLo => {
            edit::put(pkt, 10, &(v as u16).to_be_bytes());
        }
        ModifyField::DmacHi => {
            edit::put(pkt, 0, &v.to_be_bytes());
        }
        ModifyField::DmacLo => {
            edit::put(pkt, 4, &(v as u16).to_be_bytes());
        }
        ModifyField::Ethertype => {
            if let Some(at) = eth_type_offset(pkt) {
                edit::put(pkt, at, &(v as u16).to_be_bytes());
                // What follows the ethertype is now another protocol.
                *layout = layout_of(pkt);
            }
        }
        ModifyField::FirstVid => {
            if let Some(at) = first_tci_offset(pkt) {
                if let Some(tci) = edit::read16(pkt, at) {
                    let tci = (tci & 0xf000) | (v as u16 & 0x0fff);
                    edit::put(pkt, at, &tci.to_be_bytes());
                }
            }
        }
        ModifyField::IpDscp => {
            edit::set_dscp(pkt, &l, v as u8);
        }
        ModifyField::IpEcn => {
            edit::set_ecn(pkt, &l, v as u8);
        }
        ModifyField::IpTtl | ModifyField::Ipv6HopLimit => {
            edit::set_ttl(pkt, &l, v as u8);
        }
        ModifyField::Sipv4 => {
            edit::set_ipv4_src(pkt, &l, v);
        }
        ModifyField::Dipv4 => {
            edit::set_ipv4_dst(pkt, &l, v);
        }
        ModifyField::Sipv6(n) | ModifyField::Dipv6(n) => {
            let src = matches!(f, ModifyField::Sipv6(_));
            if let Some(Ip::V6(l3)) = edit::ip_header(pkt, &l) {
                let at = l3 + if src { 8 } else { 24 };
                if let Some(mut a) = edit::read::<16>(pkt, at) {
                    let q = 4 * usize::from(n & 3);
                    a[q..q + 4].copy_from_slice(&v.to_be_bytes());
                    let addr = u128::from_be_bytes(a);
                    if src {
                        edit::set_ipv6_src(pkt, &l, addr);
                    } else {
                        edit::set_ipv6_dst(pkt, &l, addr);
                    }
                }
            }
        }
        ModifyField::TcpSport | ModifyField::UdpSport => {
            edit::set_tp_src(pkt, &l, v as u16);
        }
        ModifyField::TcpDport | ModifyField::UdpDport => {
            edit::set_tp_dst(pkt, &l, v as u16);
        }
        ModifyField::TcpFlags => {
            edit::set_tcp_flags(pkt, &l, v as u16);
        }
        ModifyField::RegC(n) => regs[usize::from(n & 7)] = v,
        ModifyField::RegB => {}
    }
}

/// `length` (clamped to 32) low bits set.
fn bits(length: u8) -> u64 {
    (1u64 << length.min(32)) - 1
}

/// `old` with the low `length` bits of `data` written at `offset`, kept
/// within `width` bits.
fn splice(old: u32, offset: u8, length: u8, data: u64, width: u8) -> u32 {
    let m = bits(length);
    let shift = u32::from(offset);
    let place = |x: u64| x.checked_shl(shift).unwrap_or(0);
    let v = (u64::from(old) & !place(m)) | place(data & m);
    (v & bits(width)) as u32
}

/// Runs modify-header actions in order on the packet and its metadata
/// registers, as the device does: SET writes `length` bits at `offset` of
/// the field, ADD adds modulo 2^width (TTL decrement = ADD 0xff on
/// IP_TTL), COPY copies `length` bits from `src` at `src_offset` to `dst`
/// at `dst_offset` (any two fields, registers included). Reg_c fields edit
/// `regs`. An action whose field (or COPY source) the packet lacks is
/// skipped. Checksums are updated incrementally.
pub fn apply_modify(pkt: &mut [u8], regs: &mut [u32; 8], ops: &[ModifyOp]) {
    let mut layout = layout_of(pkt);
    for op in ops {
        let (dst, new) = match *op {
            ModifyOp::Set {
                field,
                offset,
                length,
                data,
            } => {
                let Some(old) = read_at(pkt, &layout, regs, field) else {
                    continue;
                };
                let v = splice(old, offset, length, u64::from(data), field.width());
                (field, v)
            }
            ModifyOp::Add { field, data } => {
                let Some(old) = read_at(pkt, &layout, regs, field) else {
                    continue;
                };
                let v = (u64::from(old) + u64::from(data)) & bits(field.width());
                (field, v as u32)
            }
            ModifyOp::Copy {
                src,
                src_offset,
                length,
                dst,
                dst_offset,
            } => {
                let Some(s) = read_at(pkt, &layout, regs, src) else {
                    continue;
                };
                let Some(old) = read_at(pkt, &layout, regs, dst) else {
                    continue;
                };
                let data = u64::from(s).checked_shr(u32::from(src_offset)).unwrap_or(0);
                (dst, splice(old, dst_offset, length, data, dst.width()))
            }
        };
        write_at(pkt, &mut layout, regs, dst, new);
    }
}

/// The value of `f` in the packet (or in `regs` for reg_c), in the low
/// `f.width()` bits, if the packet has the field.
pub fn read_field(pkt: &[u8], regs: &[u32; 8], f: ModifyField) -> Option<u32> {
    read_at(pkt, &layout_of(pkt), regs, f)
}

/// Inserts a VLAN tag `header` = TPID << 16 | TCI (host order) after the
/// MAC addresses, before any existing tag. A frame shorter than an
/// Ethernet header is left alone.
pub fn push_vlan(pkt: &mut Vec<u8>, header: u32) {
    let mut l = Layout::NONE;
    edit::push_vlan(pkt, &mut l, (header >> 16) as u16, header as u16);
}

/// Removes the outermost VLAN tag (TPID 0x8100 or 0x88a8) if the frame has
/// one.
pub fn pop_vlan(pkt: &mut Vec<u8>) {
    let mut l = Layout::NONE;
    edit::pop_vlan(pkt, &mut l);
}

/// Whether an encap header is one the sim can fill: Ethernet, IPv4 (no
/// options) or IPv6, UDP.
pub fn encap_header_ok(h: &[u8]) -> bool {
    match h.get(12..14) {
        Some([0x08, 0x00]) => h.len() >= 42 && h[14] == 0x45 && h[23] == 17,
        Some([0x86, 0xdd]) => h.len() >= 62 && h[20] == 17,
        _ => false,
    }
}

/// The encap the device does: `header` in front of the frame, and what the
/// hardware fills: the IPv4 total length and checksum (or the IPv6
/// payload length), the UDP length, and the UDP source port from the inner
/// flow's hash (the entropy the port is set up for).
pub fn encap(pkt: &mut Vec<u8>, header: &[u8]) {
    let mut key = megaflow::FlowKey::ZERO;
    let layout = megaflow::extract_into(0, pkt, &mut key).layout;
    let hash = megaflow::tunnel::flow_hash(pkt, &layout);
    let n = pkt.len();
    pkt.splice(0..0, header.iter().copied());
    let sport = megaflow::tunnel::source_port(hash);
    megaflow::tunnel::fill_header(&mut pkt[..header.len()], n, sport);
}

/// The decap the device does: a VXLAN or Geneve packet (on their IANA
/// ports) loses its outer headers; anything else is left as it is.
pub fn decap(pkt: &mut Vec<u8>) {
    use megaflow::tunnel::Kind;
    let ports = [(VXLAN_PORT, Kind::Vxlan), (GENEVE_PORT, Kind::Geneve)];
    if let Ok(Some(d)) = megaflow::tunnel::decap(pkt, &ports) {
        pkt.drain(..d.inner);
    }
}

#[cfg(test)]
#[path = "tests/packet.rs"]
mod tests;

//! Packet header edits with incremental checksum updates.
//!
//! Purpose: the header rewrites behind the datapath's set/push/pop actions,
//! usable on their own. [`execute`](super::execute) runs them for
//! [`DpAction`](super::DpAction)s; the offload crate's software NIC model
//! runs them for the device's modify-header actions, so the two datapaths
//! rewrite (and fix checksums) with the same code.
//!
//! Every function takes the packet and the [`Layout`] extraction gave for it
//! ([`crate::extract::extract_into`]), checks the layout against the bytes
//! ([`ip_header`], [`l4_header`]) and returns `false` when the packet lacks
//! the header it edits (an IPv4 address on IPv6, a port on a later
//! fragment, ...) or is too short for it; nothing here panics or reads out
//! of bounds, whatever the bytes and the layout.
//!
//! Checksums: a rewrite updates the IPv4 header checksum and the TCP, UDP
//! and ICMPv6 checksums it is part of (through the pseudo-header for
//! addresses) incrementally (RFC 1624, eqn. 3), which gives the same bytes
//! as a full recomputation when the checksum was valid before; a UDP
//! checksum of zero ("none") stays zero, and a computed zero is written
//! 0xffff; SCTP's CRC32c is patched by the difference of the CRCs before
//! and after a port change, so a wrong CRC stays wrong.
//!
//! Thread-safety: pure functions of their arguments.

use super::ArpField;
use crate::extract::{
    header, ipv6_ext_len, Layout, ETH_TYPE_ARP, ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_QINQ,
    ETH_TYPE_VLAN, IPV6_FRAGMENT, IPV6_ROUTING, IP_PROTO_ICMP, IP_PROTO_ICMPV6, IP_PROTO_SCTP,
    IP_PROTO_TCP, IP_PROTO_UDP, MAX_IPV6_EXT_HEADERS, NO_OFFSET,
};

// ---------------------------------------------------------------------------
// Byte access and checksums.

/// Copies `bytes` into `pkt` at `off`; false (and nothing written) if they
/// do not fit.
pub fn put(pkt: &mut [u8], off: usize, bytes: &[u8]) -> bool {
    let Some(end) = off.checked_add(bytes.len()) else {
        return false;
    };
    match pkt.get_mut(off..end) {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// The `N` bytes at `off`, if the packet has them.
pub fn read<const N: usize>(pkt: &[u8], off: usize) -> Option<[u8; N]> {
    header::<N>(pkt, off).copied()
}

/// The big-endian 16-bit word at `off`, if the packet has it.
pub fn read16(pkt: &[u8], off: usize) -> Option<u16> {
    read::<2>(pkt, off).map(u16::from_be_bytes)
}

/// The six bytes of the 48-bit MAC address in the low bits of `m`.
pub fn mac_bytes(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// RFC 1624 eqn. 3: the Internet checksum `csum` after the 16-bit-aligned
/// data `old` became `new` (same, even, length): `~(~csum + ~old + new)`.
pub fn csum_update(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut sum = u32::from(!csum);
    for w in old.chunks_exact(2) {
        if let [a, b] = *w {
            sum += u32::from(!u16::from_be_bytes([a, b]));
        }
    }
    for w in new.chunks_exact(2) {
        if let [a, b] = *w {
            sum += u32::from(u16::from_be_bytes([a, b]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Updates the checksum stored at `at` for the change `old` -> `new` (no-op
/// if the packet does not reach `at + 2`).
pub fn fix_csum(pkt: &mut [u8], at: usize, old: &[u8], new: &[u8]) {
    if let Some(c) = read16(pkt, at) {
        put(pkt, at, &csum_update(c, old, new).to_be_bytes());
    }
}

/// As [`fix_csum`] for UDP: zero means "no checksum" and stays zero; a
/// result of zero is sent as 0xffff (RFC 768).
pub fn fix_udp_csum(pkt: &mut [u8], at: usize, old: &[u8], new: &[u8]) {
    if let Some(c) = read16(pkt, at) {
        if c != 0 {
            let n = match csum_update(c, old, new) {
                0 => 0xffff,
                n => n,
            };
            put(pkt, at, &n.to_be_bytes());
        }
    }
}

/// CRC32c (Castagnoli, reflected polynomial 0x82f63b78) lookup table.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC32c of `data`, as SCTP computes it (RFC 4960 appendix B).
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        // The index is masked to 0..=255, within the 256-entry table.
        c = CRC32C_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

// ---------------------------------------------------------------------------
// Locating headers from the layout, checked against the bytes.

/// An IP header found by [`ip_header`], with its offset in the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    /// An IPv4 header (20 bytes at least are in the packet).
    V4(usize),
    /// An IPv6 header (its 40 fixed bytes are in the packet).
    V6(usize),
}

/// The IP header the layout points at, if the ethertype in front of it and
/// its version agree and its fixed part is in the buffer.
pub fn ip_header(pkt: &[u8], layout: &Layout) -> Option<Ip> {
    if layout.l3 == NO_OFFSET {
        return None;
    }
    let l3 = usize::from(layout.l3);
    // The ethertype (after any tags, or of the SNAP header) precedes L3.
    let ty = read16(pkt, l3.checked_sub(2)?)?;
    let version = pkt.get(l3)? >> 4;
    match (ty, version) {
        (ETH_TYPE_IPV4, 4) if header::<20>(pkt, l3).is_some() => Some(Ip::V4(l3)),
        (ETH_TYPE_IPV6, 6) if header::<40>(pkt, l3).is_some() => Some(Ip::V6(l3)),
        _ => None,
    }
}

/// The transport header of a packet, found by [`l4_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4 {
    /// Offset of the L4 header in the packet (its length is not checked).
    pub off: usize,
    /// The IP protocol / IPv6 next header that leads to it.
    pub proto: u8,
    /// IPv6 with a routing header that still has segments left: the L4
    /// pseudo-header holds the final destination, not the IPv6 destination.
    pub routing_pending: bool,
    /// A first fragment: the L4 header is here but the payload is not whole.
    pub first_fragment: bool,
}

/// The L4 header the layout points at, if the IP header leads to it: the
/// IPv4 header length, or the IPv6 extension header chain, ends there, and
/// the packet is not a later fragment.
pub fn l4_header(pkt: &[u8], layout: &Layout, ip: Ip) -> Option<L4> {
    if layout.l4 == NO_OFFSET {
        return None;
    }
    let l4 = usize::from(layout.l4);
    match ip {
        Ip::V4(l3) => {
            let h: &[u8; 20] = header(pkt, l3)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([h[6], h[7]]);
            if l3 + ihl != l4 || frag & 0x1fff != 0 {
                return None;
            }
            Some(L4 {
                off: l4,
                proto: h[9],
                routing_pending: false,
                first_fragment: frag & 0x2000 != 0,
            })
        }
        Ip::V6(l3) => {
            let mut nh = *pkt.get(l3 + 6)?;
            let mut cur = l3 + 40;
            let mut routing_pending = false;
            let mut first_fragment = false;
            for _ in 0..=MAX_IPV6_EXT_HEADERS {
                if cur == l4 {
                    return Some(L4 {
                        off: l4,
                        proto: nh,
                        routing_pending,
                        first_fragment,
                    });
                }
                if cur > l4 {
                    return None;
                }
                let e: &[u8; 8] = header(pkt, cur)?;
                match nh {
                    IPV6_ROUTING => routing_pending |= e[3] != 0,
                    IPV6_FRAGMENT if u16::from_be_bytes([e[2], e[3]]) & 0xfff8 != 0 => return None,
                    IPV6_FRAGMENT => first_fragment |= e[3] & 1 != 0,
                    _ => {}
                }
                let len = ipv6_ext_len(nh, e)?;
                nh = e[0];
                cur += len;
            }
            None
        }
    }
}

/// The TCP header (its 20 fixed bytes in the packet) the layout leads to.
pub fn tcp_header(pkt: &[u8], layout: &Layout) -> Option<usize> {
    let l4 = l4_header(pkt, layout, ip_header(pkt, layout)?)?;
    (l4.proto == IP_PROTO_TCP && header::<20>(pkt, l4.off).is_some()).then_some(l4.off)
}

/// The UDP header (its 8 bytes in the packet) the layout leads to.
pub fn udp_header(pkt: &[u8], layout: &Layout) -> Option<usize> {
    let l4 = l4_header(pkt, layout, ip_header(pkt, layout)?)?;
    (l4.proto == IP_PROTO_UDP && header::<8>(pkt, l4.off).is_some()).then_some(l4.off)
}

/// Folds a change of pseudo-header bytes (an IP address) into the L4
/// checksum. ICMPv4 and SCTP have no pseudo-header in their checksum.
fn fix_pseudo_header(pkt: &mut [u8], l4: &L4, v6: bool, old: &[u8], new: &[u8]) {
    match l4.proto {
        IP_PROTO_TCP => fix_csum(pkt, l4.off + 16, old, new),
        IP_PROTO_UDP => fix_udp_csum(pkt, l4.off + 6, old, new),
        IP_PROTO_ICMPV6 if v6 => fix_csum(pkt, l4.off + 2, old, new),
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// The edits. Each returns false when skipped.

/// Sets the Ethernet source address (the 48-bit address in the low bits).
pub fn set_eth_src(pkt: &mut [u8], mac: u64) -> bool {
    put(pkt, 6, &mac_bytes(mac))
}

/// Sets the Ethernet destination address (the 48-bit address in the low
/// bits).
pub fn set_eth_dst(pkt: &mut [u8], mac: u64) -> bool {
    put(pkt, 0, &mac_bytes(mac))
}

/// Sets the IPv4 source address.
pub fn set_ipv4_src(pkt: &mut [u8], layout: &Layout, addr: u32) -> bool {
    set_ipv4_addr(pkt, layout, 12, addr)
}

/// Sets the IPv4 destination address.
pub fn set_ipv4_dst(pkt: &mut [u8], layout: &Layout, addr: u32) -> bool {
    set_ipv4_addr(pkt, layout, 16, addr)
}

/// Sets the IPv6 source address.
pub fn set_ipv6_src(pkt: &mut [u8], layout: &Layout, addr: u128) -> bool {
    set_ipv6_addr(pkt, layout, 8, addr)
}

/// Sets the IPv6 destination address. With a routing header that has
/// segments left, the L4 pseudo-header holds the final destination, so the
/// L4 checksum is left alone.
pub fn set_ipv6_dst(pkt: &mut [u8], layout: &Layout, addr: u128) -> bool {
    set_ipv6_addr(pkt, layout, 24, addr)
}

/// Sets a field of an Ethernet/IPv4 ARP packet (what the flow key's
/// `arp_*` fields read); false for any other packet.
pub fn set_arp(pkt: &mut [u8], layout: &Layout, field: ArpField) -> bool {
    if layout.l3 == NO_OFFSET {
        return false;
    }
    let l3 = usize::from(layout.l3);
    let is_arp = l3
        .checked_sub(2)
        .and_then(|t| read16(pkt, t))
        .is_some_and(|t| t == ETH_TYPE_ARP);
    let Some(a) = header::<28>(pkt, l3) else {
        return false;
    };
    if !is_arp || a[..6] != [0, 1, 0x08, 0x00, 6, 4] {
        return false;
    }
    match field {
        ArpField::Op(v) => put(pkt, l3 + 6, &v.to_be_bytes()),
        ArpField::Sha(m) => put(pkt, l3 + 8, &mac_bytes(m)),
        ArpField::Spa(v) => put(pkt, l3 + 14, &v.to_be_bytes()),
        ArpField::Tha(m) => put(pkt, l3 + 18, &mac_bytes(m)),
        ArpField::Tpa(v) => put(pkt, l3 + 24, &v.to_be_bytes()),
    }
}

fn set_ipv4_addr(pkt: &mut [u8], layout: &Layout, field: usize, addr: u32) -> bool {
    let Some(Ip::V4(l3)) = ip_header(pkt, layout) else {
        return false;
    };
    let Some(old) = read::<4>(pkt, l3 + field) else {
        return false;
    };
    let new = addr.to_be_bytes();
    put(pkt, l3 + field, &new);
    fix_csum(pkt, l3 + 10, &old, &new);
    if let Some(l4) = l4_header(pkt, layout, Ip::V4(l3)) {
        fix_pseudo_header(pkt, &l4, false, &old, &new);
    }
    true
}

fn set_ipv6_addr(pkt: &mut [u8], layout: &Layout, field: usize, addr: u128) -> bool {
    let Some(Ip::V6(l3)) = ip_header(pkt, layout) else {
        return false;
    };
    let Some(old) = read::<16>(pkt, l3 + field) else {
        return false;
    };
    let new = addr.to_be_bytes();
    put(pkt, l3 + field, &new);
    if let Some(l4) = l4_header(pkt, layout, Ip::V6(l3)) {
        let is_dst = field == 24;
        if !(is_dst && l4.routing_pending) {
            fix_pseudo_header(pkt, &l4, true, &old, &new);
        }
    }
    true
}

/// Sets the DSCP bits (a 6-bit value) of the IPv4 TOS / IPv6 traffic class.
pub fn set_dscp(pkt: &mut [u8], layout: &Layout, dscp: u8) -> bool {
    set_tos(pkt, layout, 0xfc, (dscp & 0x3f) << 2)
}

/// Sets the ECN bits (a 2-bit value) of the IPv4 TOS / IPv6 traffic class.
pub fn set_ecn(pkt: &mut [u8], layout: &Layout, ecn: u8) -> bool {
    set_tos(pkt, layout, 0x03, ecn & 0x03)
}

/// Replaces the `mask` bits of the IPv4 TOS / IPv6 traffic class by `bits`.
fn set_tos(pkt: &mut [u8], layout: &Layout, mask: u8, bits: u8) -> bool {
    match ip_header(pkt, layout) {
        Some(Ip::V4(l3)) => {
            let Some(old) = read::<2>(pkt, l3) else {
                return false;
            };
            let new = [old[0], (old[1] & !mask) | (bits & mask)];
            put(pkt, l3, &new);
            fix_csum(pkt, l3 + 10, &old, &new);
            true
        }
        Some(Ip::V6(l3)) => {
            // Version (4 bits) | traffic class (8) | flow label (20).
            let Some(old) = read::<4>(pkt, l3) else {
                return false;
            };
            let vtcfl = u32::from_be_bytes(old);
            let tc = (vtcfl >> 20) as u8;
            let tc = (tc & !mask) | (bits & mask);
            let vtcfl = (vtcfl & 0xf00f_ffff) | (u32::from(tc) << 20);
            put(pkt, l3, &vtcfl.to_be_bytes())
        }
        None => false,
    }
}

/// Sets the IPv4 TTL / IPv6 hop limit.
pub fn set_ttl(pkt: &mut [u8], layout: &Layout, ttl: u8) -> bool {
    match ip_header(pkt, layout) {
        Some(Ip::V4(l3)) => {
            // TTL shares its checksum word with the protocol.
            let Some(old) = read::<2>(pkt, l3 + 8) else {
                return false;
            };
            let new = [ttl, old[1]];
            put(pkt, l3 + 8, &new);
            fix_csum(pkt, l3 + 10, &old, &new);
            true
        }
        Some(Ip::V6(l3)) => put(pkt, l3 + 7, &[ttl]),
        None => false,
    }
}

/// Decrements the TTL / hop limit: `Some(true)` decremented, `Some(false)`
/// expired (0 or 1, left as is), `None` not IP.
pub fn dec_ttl(pkt: &mut [u8], layout: &Layout) -> Option<bool> {
    let at = match ip_header(pkt, layout)? {
        Ip::V4(l3) => l3 + 8,
        Ip::V6(l3) => l3 + 7,
    };
    let ttl = *pkt.get(at)?;
    if ttl <= 1 {
        return Some(false);
    }
    Some(set_ttl(pkt, layout, ttl - 1))
}

/// Sets the TCP/UDP/SCTP source port.
pub fn set_tp_src(pkt: &mut [u8], layout: &Layout, port: u16) -> bool {
    set_port(pkt, layout, 0, port)
}

/// Sets the TCP/UDP/SCTP destination port.
pub fn set_tp_dst(pkt: &mut [u8], layout: &Layout, port: u16) -> bool {
    set_port(pkt, layout, 2, port)
}

/// Sets the 9 TCP flag bits (NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN;
/// the low 9 bits of `flags`), keeping the data offset and reserved bits.
pub fn set_tcp_flags(pkt: &mut [u8], layout: &Layout, flags: u16) -> bool {
    let Some(l4) = tcp_header(pkt, layout) else {
        return false;
    };
    let Some(old) = read::<2>(pkt, l4 + 12) else {
        return false;
    };
    let [hi, lo] = (flags & 0x1ff).to_be_bytes();
    let new = [(old[0] & 0xfe) | hi, lo];
    put(pkt, l4 + 12, &new);
    fix_csum(pkt, l4 + 16, &old, &new);
    true
}

/// Sets the TCP/UDP/SCTP port at offset `field` (0 source, 2 destination);
/// on ICMP and ICMPv6, where the key keeps the type in `tp_src` and the
/// code in `tp_dst`, the type (`field` 0) or the code byte.
fn set_port(pkt: &mut [u8], layout: &Layout, field: usize, port: u16) -> bool {
    let Some(ip) = ip_header(pkt, layout) else {
        return false;
    };
    let Some(l4) = l4_header(pkt, layout, ip) else {
        return false;
    };
    let at = l4.off + field;
    let new = port.to_be_bytes();
    match l4.proto {
        IP_PROTO_TCP if header::<20>(pkt, l4.off).is_some() => {
            let Some(old) = read::<2>(pkt, at) else {
                return false;
            };
            put(pkt, at, &new);
            fix_csum(pkt, l4.off + 16, &old, &new);
            true
        }
        IP_PROTO_UDP if header::<8>(pkt, l4.off).is_some() => {
            let Some(old) = read::<2>(pkt, at) else {
                return false;
            };
            put(pkt, at, &new);
            fix_udp_csum(pkt, l4.off + 6, &old, &new);
            true
        }
        IP_PROTO_ICMP | IP_PROTO_ICMPV6
            if port <= 0xff && (l4.proto == IP_PROTO_ICMP) == matches!(ip, Ip::V4(_)) =>
        {
            // Type and code are the checksummed word at the start.
            let Some(old) = read::<2>(pkt, l4.off) else {
                return false;
            };
            let mut word = old;
            word[field / 2] = port as u8;
            put(pkt, l4.off, &word);
            fix_csum(pkt, l4.off + 2, &old, &word);
            true
        }
        // The CRC32c of a fragment covers the reassembled packet, which this
        // fragment does not hold: leave it (and the port) alone.
        IP_PROTO_SCTP if !l4.first_fragment => {
            set_sctp_port(pkt, l4.off, layout.l3_end, field, new)
        }
        _ => false,
    }
}

/// SCTP's CRC32c covers the whole SCTP packet (up to the IP payload's end),
/// so it is computed before and after the change with the CRC field zeroed,
/// and the stored value is patched by their difference (XOR: CRC is linear),
/// which keeps a bad CRC bad. The XOR patch is applied in the byte order
/// SCTP stores the CRC in (RFC 4960 appendix B: as computed, least
/// significant byte first); the tests pin that order.
fn set_sctp_port(pkt: &mut [u8], l4: usize, l3_end: u16, field: usize, new: [u8; 2]) -> bool {
    if l3_end == NO_OFFSET {
        return false;
    }
    let Some(seg) = pkt.get_mut(l4..usize::from(l3_end)) else {
        return false;
    };
    // The common header (ports, verification tag, CRC) is 12 bytes.
    let Some(stored) = read::<4>(seg, 8) else {
        return false;
    };
    put(seg, 8, &[0; 4]);
    let before = crc32c(seg).to_le_bytes();
    put(seg, field, &new);
    let after = crc32c(seg).to_le_bytes();
    let mut crc = stored;
    for (c, (b, a)) in crc.iter_mut().zip(before.iter().zip(after.iter())) {
        *c ^= b ^ a;
    }
    put(seg, 8, &crc)
}

/// Shifts a layout offset by the 4 bytes of a tag inserted at 12; an offset
/// that would no longer fit becomes absent.
fn shift_up(off: u16) -> u16 {
    if off == NO_OFFSET {
        return NO_OFFSET;
    }
    off.checked_add(4).unwrap_or(NO_OFFSET)
}

/// Shifts a layout offset for the removal of bytes 12..16; an offset that
/// pointed into them (an inconsistent layout) becomes absent.
fn shift_down(off: u16) -> u16 {
    if off == NO_OFFSET || off < 16 {
        return NO_OFFSET;
    }
    off - 4
}

/// Inserts the tag `tpid`, `tci` (written as given: PCP | DEI | VID) after
/// the MAC addresses, before any existing tag, and shifts the layout's
/// offsets to follow the bytes. False (nothing done) on a frame shorter
/// than an Ethernet header.
pub fn push_vlan(pkt: &mut Vec<u8>, layout: &mut Layout, tpid: u16, tci: u16) -> bool {
    if pkt.len() < 14 {
        return false;
    }
    let [t0, t1] = tpid.to_be_bytes();
    let [c0, c1] = tci.to_be_bytes();
    // 12 <= len was checked above, so the splice range is in bounds.
    pkt.splice(12..12, [t0, t1, c0, c1]);
    layout.l3 = shift_up(layout.l3);
    layout.l4 = shift_up(layout.l4);
    layout.l3_end = shift_up(layout.l3_end);
    layout.vlans = layout.vlans.saturating_add(1);
    true
}

/// Removes the outermost tag (TPID 0x8100 or 0x88a8) and shifts the
/// layout's offsets; no-op on an untagged frame (or one too short to hold a
/// tag and the ethertype after it). True if a tag was removed.
pub fn pop_vlan(pkt: &mut Vec<u8>, layout: &mut Layout) -> bool {
    let tagged = matches!(read16(pkt, 12), Some(ETH_TYPE_VLAN | ETH_TYPE_QINQ));
    // A tag must be followed by an ethertype: at least 18 bytes, so the
    // drained range 12..16 is in bounds.
    if !tagged || pkt.len() < 18 {
        return false;
    }
    pkt.drain(12..16);
    layout.l3 = shift_down(layout.l3);
    layout.l4 = shift_down(layout.l4);
    layout.l3_end = shift_down(layout.l3_end);
    layout.vlans = layout.vlans.saturating_sub(1);
    true
}

/// Completes the TCP or UDP checksum of a packet its sender left to the
/// NIC (a veth peer's `CHECKSUM_PARTIAL`: AF_PACKET marks it
/// `TP_STATUS_CSUMNOTREADY`, the checksum field holding only the
/// pseudo-header's sum): computed whole from the pseudo-header and the
/// segment, as the NIC would have. False when the packet has no whole
/// TCP or UDP segment to sum (a fragment, another protocol).
pub fn complete_l4_checksum(pkt: &mut [u8]) -> bool {
    let mut key = crate::key::FlowKey::ZERO;
    let layout = crate::extract::extract_into(0, pkt, &mut key).layout;
    let Some(ip) = ip_header(pkt, &layout) else {
        return false;
    };
    let Some(l4) = l4_header(pkt, &layout, ip) else {
        return false;
    };
    if l4.first_fragment || layout.l3_end == NO_OFFSET {
        return false;
    }
    let end = usize::from(layout.l3_end);
    let at = match l4.proto {
        IP_PROTO_TCP => l4.off + 16,
        IP_PROTO_UDP => l4.off + 6,
        _ => return false,
    };
    if end > pkt.len() || at + 2 > end {
        return false;
    }
    let seg_len = (end - l4.off) as u32;
    let mut sum: u64 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    match ip {
        Ip::V4(l3) => {
            add(&pkt[l3 + 12..l3 + 20]);
            add(&[0, l4.proto]);
            add(&(seg_len as u16).to_be_bytes());
        }
        Ip::V6(l3) => {
            add(&pkt[l3 + 8..l3 + 40]);
            add(&seg_len.to_be_bytes());
            add(&[0, 0, 0, l4.proto]);
        }
    }
    put(pkt, at, &[0, 0]);
    add(&pkt[l4.off..end]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = match !(sum as u16) {
        0 if l4.proto == IP_PROTO_UDP => 0xffff,
        c => c,
    };
    put(pkt, at, &c.to_be_bytes())
}

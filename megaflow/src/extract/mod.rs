//! Packet parsing: bytes -> [`FlowKey`] in one pass, without copies.
//!
//! `extract` walks Ethernet II (and 802.3 LLC/SNAP), up to two 802.1Q/802.1ad
//! tags, ARP, IPv4 (options, fragments), IPv6 with its extension headers
//! (hop-by-hop, routing, fragment, destination options, AH), TCP, UDP, SCTP,
//! ICMPv4 and ICMPv6 with neighbour discovery. Every header is read through a
//! length-checked fixed-size view ([`header`]), so no input can make it panic or
//! read out of bounds (the `extract` fuzz target and a property test check it).
//!
//! Malformed or truncated input follows Open vSwitch: the layers that could be
//! parsed are filled in, the rest of the key stays zero, and the reason is
//! returned in [`Extracted::error`] for the caller to count
//! ([`ParseCounters`]). IPv4/IPv6 payloads are bounded by the IP length field,
//! so Ethernet padding is never parsed as L4.
//!
//! Besides the key, extraction records the [`Layout`] (offsets of L3 and L4),
//! which action execution uses to rewrite headers without parsing again.
//!
//! Thread-safety: pure functions.

use crate::key::{FlowKey, FRAG_ANY, FRAG_LATER, VLAN_PRESENT};

pub const ETH_TYPE_IPV4: u16 = 0x0800;
pub const ETH_TYPE_ARP: u16 = 0x0806;
pub const ETH_TYPE_IPV6: u16 = 0x86dd;
pub const ETH_TYPE_VLAN: u16 = 0x8100;
pub const ETH_TYPE_QINQ: u16 = 0x88a8;
/// `eth_type` of an 802.3 frame without a SNAP header (as Open vSwitch).
pub const ETH_TYPE_NONE: u16 = 0x05ff;

pub const IP_PROTO_ICMP: u8 = 1;
pub const IP_PROTO_TCP: u8 = 6;
pub const IP_PROTO_UDP: u8 = 17;
pub const IP_PROTO_ICMPV6: u8 = 58;
pub const IP_PROTO_SCTP: u8 = 132;

/// Most VLAN tags parsed into the key; a third tag is left as the ethertype.
pub const MAX_VLAN_TAGS: usize = 2;
/// Most IPv6 extension headers walked before giving up.
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Offset meaning "this layer is absent".
pub const NO_OFFSET: u16 = u16::MAX;

/// Where the layers of a parsed packet start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Start of the L3 header (after VLAN tags), or [`NO_OFFSET`].
    pub l3: u16,
    /// Start of the L4 header, or [`NO_OFFSET`] (absent, later fragment, unparsed).
    pub l4: u16,
    /// End of the L3 payload as given by the IP length field.
    pub l3_end: u16,
    /// Number of VLAN tags between Ethernet and L3.
    pub vlans: u8,
}

impl Layout {
    pub const NONE: Layout = Layout {
        l3: NO_OFFSET,
        l4: NO_OFFSET,
        l3_end: NO_OFFSET,
        vlans: 0,
    };
}

impl Default for Layout {
    fn default() -> Self {
        Layout::NONE
    }
}

/// Why extraction stopped before the end of the headers it knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer than 14 bytes.
    TruncatedEthernet,
    /// A VLAN tag cut short.
    TruncatedVlan,
    /// ARP shorter than its Ethernet/IPv4 form.
    TruncatedArp,
    /// IPv4 header cut short, bad version, IHL < 5, or total length inconsistent
    /// (below the IHL, beyond the frame, or ending past offset 65534, which a
    /// [`Layout`] offset cannot hold).
    BadIpv4,
    /// IPv6 header cut short, bad version, or payload length beyond the frame
    /// (or ending past offset 65534, as for IPv4).
    BadIpv6,
    /// An IPv6 extension header cut short or too many of them.
    BadIpv6Ext,
    /// TCP header cut short or data offset invalid.
    BadTcp,
    /// UDP header cut short.
    TruncatedUdp,
    /// SCTP header cut short.
    TruncatedSctp,
    /// ICMP/ICMPv6 header cut short.
    TruncatedIcmp,
    /// Neighbour discovery message or option malformed.
    BadNd,
}

impl ParseError {
    pub const ALL: [ParseError; 11] = [
        ParseError::TruncatedEthernet,
        ParseError::TruncatedVlan,
        ParseError::TruncatedArp,
        ParseError::BadIpv4,
        ParseError::BadIpv6,
        ParseError::BadIpv6Ext,
        ParseError::BadTcp,
        ParseError::TruncatedUdp,
        ParseError::TruncatedSctp,
        ParseError::TruncatedIcmp,
        ParseError::BadNd,
    ];

    /// Stable short name for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            ParseError::TruncatedEthernet => "truncated_ethernet",
            ParseError::TruncatedVlan => "truncated_vlan",
            ParseError::TruncatedArp => "truncated_arp",
            ParseError::BadIpv4 => "bad_ipv4",
            ParseError::BadIpv6 => "bad_ipv6",
            ParseError::BadIpv6Ext => "bad_ipv6_ext",
            ParseError::BadTcp => "bad_tcp",
            ParseError::TruncatedUdp => "truncated_udp",
            ParseError::TruncatedSctp => "truncated_sctp",
            ParseError::TruncatedIcmp => "truncated_icmp",
            ParseError::BadNd => "bad_nd",
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of [`extract_into`] besides the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Extracted {
    pub layout: Layout,
    pub error: Option<ParseError>,
}

/// Counts of malformed packets by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParseCounters {
    counts: [u64; ParseError::ALL.len()],
}

impl ParseCounters {
    #[inline]
    pub fn record(&mut self, e: &Extracted) {
        if let Some(err) = e.error {
            self.counts[err as usize] += 1;
        }
    }

    pub fn count(&self, err: ParseError) -> u64 {
        self.counts[err as usize]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Non-zero counters with their names.
    pub fn iter(&self) -> impl Iterator<Item = (ParseError, u64)> + '_ {
        ParseError::ALL
            .iter()
            .map(|&e| (e, self.counts[e as usize]))
            .filter(|&(_, n)| n != 0)
    }
}

/// A length-checked fixed-size view of `N` bytes at `off`.
#[inline(always)]
pub fn header<const N: usize>(p: &[u8], off: usize) -> Option<&[u8; N]> {
    p.get(off..off.checked_add(N)?)?.try_into().ok()
}

#[inline(always)]
fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[inline(always)]
fn be32(b: [u8; 4]) -> u32 {
    u32::from_be_bytes(b)
}

#[inline(always)]
fn mac(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[2..].copy_from_slice(&b[..6]);
    u64::from_be_bytes(a)
}

#[inline(always)]
fn ip6(b: &[u8]) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    u128::from_be_bytes(a)
}

/// Parses `pkt` received on `in_port` into a fresh key.
#[inline]
pub fn extract(in_port: u32, pkt: &[u8]) -> FlowKey {
    let mut key = FlowKey::ZERO;
    extract_into(in_port, pkt, &mut key);
    key
}

/// Parses `pkt` received on `in_port` into `key`, which is overwritten whole.
pub fn extract_into(in_port: u32, pkt: &[u8], key: &mut FlowKey) -> Extracted {
    *key = FlowKey::ZERO;
    key.set_in_port(in_port as u64);
    let mut out = Extracted::default();
    if let Err(e) = parse_l2(pkt, key, &mut out.layout) {
        out.error = Some(e);
    }
    out
}

type Step = Result<(), ParseError>;

fn parse_l2(pkt: &[u8], key: &mut FlowKey, layout: &mut Layout) -> Step {
    let eth: &[u8; 14] = header(pkt, 0).ok_or(ParseError::TruncatedEthernet)?;
    key.set_eth_dst(mac(&eth[0..6]));
    key.set_eth_src(mac(&eth[6..12]));
    let mut ty = be16([eth[12], eth[13]]);
    let mut off = 14usize;

    let mut tags = 0usize;
    while (ty == ETH_TYPE_VLAN || ty == ETH_TYPE_QINQ) && tags < MAX_VLAN_TAGS {
        let tag: &[u8; 4] = header(pkt, off).ok_or(ParseError::TruncatedVlan)?;
        let tci = be16([tag[0], tag[1]]) | VLAN_PRESENT;
        if tags == 0 {
            key.set_vlan_tpid(ty as u64);
            key.set_vlan_tci(tci as u64);
        } else {
            key.set_vlan2_tpid(ty as u64);
            key.set_vlan2_tci(tci as u64);
        }
        ty = be16([tag[2], tag[3]]);
        off += 4;
        tags += 1;
    }
    layout.vlans = tags as u8;

    if ty < 0x0600 {
        // 802.3 length field: LLC/SNAP carries the real ethertype.
        match header::<8>(pkt, off) {
            // A SNAP ethertype that is itself a length is not an ethertype
            // (as Open vSwitch): such frames are plain 802.3 too.
            Some(s) if s[..6] == [0xaa, 0xaa, 0x03, 0, 0, 0] && be16([s[6], s[7]]) >= 0x0600 => {
                ty = be16([s[6], s[7]]);
                off += 8;
            }
            _ => {
                key.set_eth_type(ETH_TYPE_NONE as u64);
                return Ok(());
            }
        }
    }
    key.set_eth_type(ty as u64);
    layout.l3 = off as u16;

    match ty {
        ETH_TYPE_IPV4 => parse_ipv4(pkt, off, key, layout),
        ETH_TYPE_IPV6 => parse_ipv6(pkt, off, key, layout),
        ETH_TYPE_ARP => parse_arp(pkt, off, key),
        _ => Ok(()),
    }
}

fn parse_arp(pkt: &[u8], off: usize, key: &mut FlowKey) -> Step {
    let a: &[u8; 28] = header(pkt, off).ok_or(ParseError::TruncatedArp)?;
    // Only Ethernet/IPv4 ARP is parsed; others keep just eth_type.
    if be16([a[0], a[1]]) != 1 || be16([a[2], a[3]]) != ETH_TYPE_IPV4 || a[4] != 6 || a[5] != 4 {
        return Ok(());
    }
    let op = be16([a[6], a[7]]);
    if op <= 0xff {
        key.set_ip_proto(op as u64);
    }
    key.set_arp_sha(mac(&a[8..14]));
    key.set_ipv4_src(be32([a[14], a[15], a[16], a[17]]) as u64);
    key.set_arp_tha(mac(&a[18..24]));
    key.set_ipv4_dst(be32([a[24], a[25], a[26], a[27]]) as u64);
    Ok(())
}

fn set_tos(key: &mut FlowKey, tos: u8) {
    key.set_ip_dscp((tos >> 2) as u64);
    key.set_ip_ecn((tos & 3) as u64);
}

fn parse_ipv4(pkt: &[u8], off: usize, key: &mut FlowKey, layout: &mut Layout) -> Step {
    let h: &[u8; 20] = header(pkt, off).ok_or(ParseError::BadIpv4)?;
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    let tot_len = be16([h[2], h[3]]) as usize;
    // The end must fit a `Layout` offset (and differ from NO_OFFSET); only a
    // frame longer than 64 KiB could break that.
    if h[0] >> 4 != 4
        || ihl < 20
        || tot_len < ihl
        || pkt.len() - off < tot_len
        || off + tot_len >= NO_OFFSET as usize
    {
        return Err(ParseError::BadIpv4);
    }
    key.set_ipv4_src(be32([h[12], h[13], h[14], h[15]]) as u64);
    key.set_ipv4_dst(be32([h[16], h[17], h[18], h[19]]) as u64);
    let proto = h[9];
    key.set_ip_proto(proto as u64);
    set_tos(key, h[1]);
    key.set_ip_ttl(h[8] as u64);
    let frag = be16([h[6], h[7]]);
    let end = off + tot_len;
    layout.l3_end = end as u16;
    if frag & 0x3fff != 0 {
        if frag & 0x1fff != 0 {
            key.set_ip_frag((FRAG_ANY | FRAG_LATER) as u64);
            return Ok(());
        }
        key.set_ip_frag(FRAG_ANY as u64);
    }
    parse_l4(&pkt[..end], off + ihl, proto, key, layout)
}

/// IPv6 extension headers walked over, per RFC 8200 (plus AH, RFC 4302).
pub(crate) const IPV6_HOPOPTS: u8 = 0;
pub(crate) const IPV6_ROUTING: u8 = 43;
pub(crate) const IPV6_FRAGMENT: u8 = 44;
pub(crate) const IPV6_AH: u8 = 51;
const IPV6_NONXT: u8 = 59;
pub(crate) const IPV6_DSTOPTS: u8 = 60;

/// Length of the IPv6 extension header `nh` whose first 8 bytes are `e`, or
/// `None` when `nh` is not an extension header walked over (an upper layer).
/// Shared by extraction and by action execution, which re-walks the chain to
/// validate a layout.
#[inline]
pub(crate) fn ipv6_ext_len(nh: u8, e: &[u8; 8]) -> Option<usize> {
    match nh {
        IPV6_HOPOPTS | IPV6_ROUTING | IPV6_DSTOPTS => Some((e[1] as usize + 1) * 8),
        IPV6_AH => Some((e[1] as usize + 2) * 4),
        IPV6_FRAGMENT => Some(8),
        _ => None,
    }
}

fn parse_ipv6(pkt: &[u8], off: usize, key: &mut FlowKey, layout: &mut Layout) -> Step {
    let h: &[u8; 40] = header(pkt, off).ok_or(ParseError::BadIpv6)?;
    let plen = be16([h[4], h[5]]) as usize;
    // As for IPv4, the end must fit a `Layout` offset.
    if h[0] >> 4 != 6 || pkt.len() - off - 40 < plen || off + 40 + plen >= NO_OFFSET as usize {
        return Err(ParseError::BadIpv6);
    }
    let vtcfl = be32([h[0], h[1], h[2], h[3]]);
    set_tos(key, (vtcfl >> 20) as u8);
    key.set_ipv6_label((vtcfl & 0x000f_ffff) as u64);
    key.set_ip_ttl(h[7] as u64);
    key.set_ipv6_src(ip6(&h[8..24]));
    key.set_ipv6_dst(ip6(&h[24..40]));
    let end = off + 40 + plen;
    layout.l3_end = end as u16;
    let pkt = &pkt[..end];

    let mut nh = h[6];
    let mut cur = off + 40;
    // MAX_IPV6_EXT_HEADERS headers plus the upper-layer header that follows.
    for _ in 0..=MAX_IPV6_EXT_HEADERS {
        match nh {
            IPV6_HOPOPTS | IPV6_ROUTING | IPV6_DSTOPTS | IPV6_AH => {
                let e: &[u8; 8] = header(pkt, cur).ok_or(ParseError::BadIpv6Ext)?;
                let len = ipv6_ext_len(nh, e).ok_or(ParseError::BadIpv6Ext)?;
                if pkt.len() - cur < len {
                    return Err(ParseError::BadIpv6Ext);
                }
                nh = e[0];
                cur += len;
            }
            IPV6_FRAGMENT => {
                let e: &[u8; 8] = header(pkt, cur).ok_or(ParseError::BadIpv6Ext)?;
                let offlg = be16([e[2], e[3]]);
                nh = e[0];
                cur += 8;
                if offlg & 0xfff8 != 0 {
                    key.set_ip_frag((FRAG_ANY | FRAG_LATER) as u64);
                    key.set_ip_proto(nh as u64);
                    return Ok(());
                }
                // Offset 0 and no M flag is an atomic fragment (RFC 6946): a
                // whole packet, as an IPv4 packet without MF and offset is.
                if offlg & 0x0001 != 0 {
                    key.set_ip_frag(FRAG_ANY as u64);
                }
            }
            _ => {
                key.set_ip_proto(nh as u64);
                if nh == IPV6_NONXT {
                    return Ok(());
                }
                return parse_l4(pkt, cur, nh, key, layout);
            }
        }
    }
    Err(ParseError::BadIpv6Ext)
}

fn parse_l4(pkt: &[u8], off: usize, proto: u8, key: &mut FlowKey, layout: &mut Layout) -> Step {
    match proto {
        IP_PROTO_TCP => {
            let t: &[u8; 20] = header(pkt, off).ok_or(ParseError::BadTcp)?;
            let doff = ((t[12] >> 4) as usize) * 4;
            if doff < 20 || pkt.len() - off < doff {
                return Err(ParseError::BadTcp);
            }
            key.set_tp_src(be16([t[0], t[1]]) as u64);
            key.set_tp_dst(be16([t[2], t[3]]) as u64);
            key.set_tcp_flags((be16([t[12], t[13]]) & 0x0fff) as u64);
        }
        IP_PROTO_UDP => {
            let u: &[u8; 8] = header(pkt, off).ok_or(ParseError::TruncatedUdp)?;
            key.set_tp_src(be16([u[0], u[1]]) as u64);
            key.set_tp_dst(be16([u[2], u[3]]) as u64);
        }
        IP_PROTO_SCTP => {
            let s: &[u8; 12] = header(pkt, off).ok_or(ParseError::TruncatedSctp)?;
            key.set_tp_src(be16([s[0], s[1]]) as u64);
            key.set_tp_dst(be16([s[2], s[3]]) as u64);
        }
        IP_PROTO_ICMP if key.eth_type() == ETH_TYPE_IPV4 as u64 => {
            let i: &[u8; 4] = header(pkt, off).ok_or(ParseError::TruncatedIcmp)?;
            key.set_tp_src(i[0] as u64);
            key.set_tp_dst(i[1] as u64);
        }
        IP_PROTO_ICMPV6 if key.eth_type() == ETH_TYPE_IPV6 as u64 => {
            let i: &[u8; 4] = header(pkt, off).ok_or(ParseError::TruncatedIcmp)?;
            key.set_tp_src(i[0] as u64);
            key.set_tp_dst(i[1] as u64);
            layout.l4 = off as u16;
            return parse_nd(pkt, off, i[0], i[1], key);
        }
        _ => return Ok(()),
    }
    layout.l4 = off as u16;
    Ok(())
}

const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_SOURCE_LINKADDR: u8 = 1;
const ND_OPT_TARGET_LINKADDR: u8 = 2;

/// Neighbour solicitation/advertisement: target address and the link-layer
/// address options. A malformed message clears the ND fields (as OVS does).
fn parse_nd(pkt: &[u8], off: usize, ty: u8, code: u8, key: &mut FlowKey) -> Step {
    if code != 0 || (ty != ND_NEIGHBOR_SOLICIT && ty != ND_NEIGHBOR_ADVERT) {
        return Ok(());
    }
    let nd: &[u8; 24] = header(pkt, off).ok_or(ParseError::BadNd)?;
    key.set_nd_target(ip6(&nd[8..24]));
    let mut cur = off + 24;
    while cur < pkt.len() {
        // A lone trailing byte is as malformed as a too-long option.
        let Some(opt) = header::<2>(pkt, cur) else {
            clear_nd(key);
            return Err(ParseError::BadNd);
        };
        let len = opt[1] as usize * 8;
        if len == 0 || pkt.len() - cur < len {
            clear_nd(key);
            return Err(ParseError::BadNd);
        }
        if len == 8 {
            let o: &[u8; 8] = header(pkt, cur).ok_or(ParseError::BadNd)?;
            let lla = &o[2..8];
            match opt[0] {
                ND_OPT_SOURCE_LINKADDR if ty == ND_NEIGHBOR_SOLICIT => {
                    if key.arp_sha() != 0 {
                        clear_nd(key);
                        return Err(ParseError::BadNd);
                    }
                    key.set_arp_sha(mac(lla));
                }
                ND_OPT_TARGET_LINKADDR if ty == ND_NEIGHBOR_ADVERT => {
                    if key.arp_tha() != 0 {
                        clear_nd(key);
                        return Err(ParseError::BadNd);
                    }
                    key.set_arp_tha(mac(lla));
                }
                _ => {}
            }
        }
        cur += len;
    }
    Ok(())
}

fn clear_nd(key: &mut FlowKey) {
    key.set_nd_target(0);
    key.set_arp_sha(0);
    key.set_arp_tha(0);
}

#[cfg(test)]
mod tests;

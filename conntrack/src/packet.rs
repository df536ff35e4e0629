//! The packet as the tracker sees it: its L3/L4 headers read through
//! length-checked views, the tuple they give, and the rewrites NAT makes
//! (addresses, ports, ICMP ids) with incremental checksum updates
//! (RFC 1624), so a translated packet leaves with valid checksums.
//!
//! Nothing here keeps state. Callers hand the frame and the offset of its
//! L3 header (the datapath's parse already found it, VLANs included).

use crate::tuple::{Addr, Tuple};

pub const ETH_IPV4: u16 = 0x0800;
pub const ETH_IPV6: u16 = 0x86dd;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

/// Why a packet cannot be tracked: it gets `inv` (as in Open vSwitch, where
/// a packet that does not parse is marked invalid, never dropped by the
/// tracker itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unparsable {
    /// Not IPv4 or IPv6.
    NotIp,
    /// A header is cut short or its lengths do not add up.
    Truncated,
    /// A fragment: reassembly is not done here (Open vSwitch reassembles
    /// before `ct()`; eswitch marks fragments invalid).
    Fragment,
    /// A transport the tracker does not follow.
    Protocol(u8),
}

/// A TCP segment's fields the window tracking reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSeg {
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    pub flags: u8,
    /// Payload length.
    pub len: u32,
    /// The window scale option, when the segment carries one.
    pub wscale: Option<u8>,
}

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_ACK: u8 = 0x10;

/// ICMP and ICMPv6 message kinds the tracker tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    /// An echo request or reply (or another query with an id).
    Query,
    /// An error quoting the packet that caused it.
    Error,
    /// Anything else (router advertisements, neighbour discovery, ...).
    Other,
}

/// One parsed packet.
#[derive(Debug, Clone, Copy)]
pub struct Parsed {
    /// The packet's own tuple (its direction).
    pub tuple: Tuple,
    pub l3: usize,
    pub l4: usize,
    /// End of the IP payload (excludes link padding).
    pub end: usize,
    pub tcp: Option<TcpSeg>,
    pub icmp: Option<IcmpKind>,
    /// For an ICMP error: the quoted packet's tuple (as that packet was
    /// sent) and where its IP header starts.
    pub quoted: Option<(Tuple, usize)>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The L3 header at `l3`: (src, dst, proto, l4 offset, end, is a fragment).
/// `quote`: the header of a packet an ICMP error quotes, whose stated
/// length may run past the quote (its end is then the quote's).
#[inline(always)]
fn ip_header(
    b: &[u8],
    l3: usize,
    v6: bool,
    quote: bool,
) -> Result<(Addr, Addr, u8, usize, usize, bool), Unparsable> {
    use Unparsable::Truncated;
    if !v6 {
        let h = b.get(l3..l3 + 20).ok_or(Truncated)?;
        if h[0] >> 4 != 4 {
            return Err(Truncated);
        }
        let ihl = ((h[0] & 0x0f) as usize) * 4;
        let mut total = u16::from_be_bytes([h[2], h[3]]) as usize;
        if quote {
            total = total.min(b.len() - l3);
        }
        if ihl < 20 || total < ihl || b.len() < l3 + total {
            return Err(Truncated);
        }
        let frag = u16::from_be_bytes([h[6], h[7]]);
        let is_frag = frag & 0x3fff != 0;
        let src = Addr::v4(h[12..16].try_into().expect("4 bytes"));
        let dst = Addr::v4(h[16..20].try_into().expect("4 bytes"));
        Ok((src, dst, h[9], l3 + ihl, l3 + total, is_frag))
    } else {
        let h = b.get(l3..l3 + 40).ok_or(Truncated)?;
        if h[0] >> 4 != 6 {
            return Err(Truncated);
        }
        let plen = u16::from_be_bytes([h[4], h[5]]) as usize;
        let mut end = l3 + 40 + plen;
        if quote {
            end = end.min(b.len());
        }
        if b.len() < end {
            return Err(Truncated);
        }
        let src = Addr(h[8..24].try_into().expect("16 bytes"));
        let dst = Addr(h[24..40].try_into().expect("16 bytes"));
        // Walk extension headers: hop-by-hop (0), routing (43), destination
        // options (60); a fragment header (44) makes it a fragment.
        let mut next = h[6];
        let mut at = l3 + 40;
        for _ in 0..8 {
            match next {
                0 | 43 | 60 => {
                    let e = b.get(at..at + 2).ok_or(Truncated)?;
                    next = e[0];
                    at += (e[1] as usize + 1) * 8;
                    if at > end {
                        return Err(Truncated);
                    }
                }
                44 => return Ok((src, dst, next, at, end, true)),
                _ => return Ok((src, dst, next, at, end, false)),
            }
        }
        Err(Truncated)
    }
}

/// Parses the packet at `l3` (`eth_type` says which IP version).
#[inline]
pub fn parse(b: &[u8], l3: usize, eth_type: u16) -> Result<Parsed, Unparsable> {
    let v6 = match eth_type {
        ETH_IPV4 => false,
        ETH_IPV6 => true,
        _ => return Err(Unparsable::NotIp),
    };
    let (src, dst, proto, l4, end, frag) = ip_header(b, l3, v6, false)?;
    if frag {
        return Err(Unparsable::Fragment);
    }
    let mut p = Parsed {
        tuple: Tuple {
            src,
            dst,
            sport: 0,
            dport: 0,
            proto,
            v6,
        },
        l3,
        l4,
        end,
        tcp: None,
        icmp: None,
        quoted: None,
    };
    let l4b = b.get(l4..end).ok_or(Unparsable::Truncated)?;
    match (proto, v6) {
        (PROTO_TCP, _) => {
            if l4b.len() < 20 {
                return Err(Unparsable::Truncated);
            }
            let off = ((l4b[12] >> 4) as usize) * 4;
            if off < 20 || off > l4b.len() {
                return Err(Unparsable::Truncated);
            }
            p.tuple.sport = be16(l4b, 0).expect("checked");
            p.tuple.dport = be16(l4b, 2).expect("checked");
            p.tcp = Some(TcpSeg {
                seq: be32(l4b, 4).expect("checked"),
                ack: be32(l4b, 8).expect("checked"),
                flags: l4b[13],
                win: be16(l4b, 14).expect("checked"),
                len: (l4b.len() - off) as u32,
                wscale: tcp_wscale(&l4b[20..off]),
            });
        }
        (PROTO_UDP, _) => {
            if l4b.len() < 8 {
                return Err(Unparsable::Truncated);
            }
            p.tuple.sport = be16(l4b, 0).expect("checked");
            p.tuple.dport = be16(l4b, 2).expect("checked");
        }
        (PROTO_ICMP, false) | (PROTO_ICMPV6, true) => {
            if l4b.len() < 8 {
                return Err(Unparsable::Truncated);
            }
            let (ty, code) = (l4b[0], l4b[1]);
            let kind = icmp_kind(ty, v6);
            p.icmp = Some(kind);
            match kind {
                IcmpKind::Query => {
                    p.tuple.sport = be16(l4b, 4).expect("checked");
                    p.tuple.dport = u16::from_be_bytes([ty, code]);
                }
                IcmpKind::Error => {
                    p.tuple.dport = u16::from_be_bytes([ty, code]);
                    p.quoted = quoted(b, l4 + 8, end, v6).map(|t| (t, l4 + 8));
                }
                IcmpKind::Other => p.tuple.dport = u16::from_be_bytes([ty, code]),
            }
        }
        (other, _) => return Err(Unparsable::Protocol(other)),
    }
    Ok(p)
}

/// The window scale option in TCP options, capped at 14 (RFC 7323).
fn tcp_wscale(mut o: &[u8]) -> Option<u8> {
    while let Some(&kind) = o.first() {
        match kind {
            0 => return None,
            1 => o = &o[1..],
            _ => {
                let len = *o.get(1)? as usize;
                if len < 2 || len > o.len() {
                    return None;
                }
                if kind == 3 && len == 3 {
                    return Some(o[2].min(14));
                }
                o = &o[len..];
            }
        }
    }
    None
}

pub fn icmp_kind(ty: u8, v6: bool) -> IcmpKind {
    if v6 {
        match ty {
            1..=4 => IcmpKind::Error,
            128 | 129 => IcmpKind::Query,
            _ => IcmpKind::Other,
        }
    } else {
        match ty {
            3 | 4 | 5 | 11 | 12 => IcmpKind::Error,
            0 | 8 | 13 | 14 | 15 | 16 | 17 | 18 => IcmpKind::Query,
            _ => IcmpKind::Other,
        }
    }
}

/// ICMP query types and the types of their replies (query, reply,
/// ICMPv6): echo 8 -> 0, timestamp 13 -> 14, information 15 -> 16,
/// address mask 17 -> 18; ICMPv6 echo 128 -> 129.
const ICMP_QUERIES: [(u8, u8, bool); 5] = [
    (8, 0, false),
    (13, 14, false),
    (15, 16, false),
    (17, 18, false),
    (128, 129, true),
];

/// The reply type of an ICMP query type.
pub fn icmp_reply_type(ty: u8, v6: bool) -> Option<u8> {
    ICMP_QUERIES
        .iter()
        .find(|&&(q, _, v)| q == ty && v == v6)
        .map(|&(_, r, _)| r)
}

/// The query type of an ICMP reply type.
pub fn icmp_request_type(ty: u8, v6: bool) -> Option<u8> {
    ICMP_QUERIES
        .iter()
        .find(|&&(_, r, v)| r == ty && v == v6)
        .map(|&(q, _, _)| q)
}

/// The type of the other direction of an ICMP query: the reply of a
/// request, the request of a reply (Open vSwitch's `reverse_icmp_type`).
pub fn icmp_other_type(ty: u8, v6: bool) -> Option<u8> {
    icmp_reply_type(ty, v6).or_else(|| icmp_request_type(ty, v6))
}

/// The tuple of the packet an ICMP error quotes: its IP header and the
/// first 8 bytes of its transport header. The quote may be cut after
/// those (RFC 792 requires no more).
fn quoted(b: &[u8], at: usize, end: usize, v6: bool) -> Option<Tuple> {
    let inner = b.get(..end)?;
    let (src, dst, proto, l4, _, frag) = ip_header(inner, at, v6, true).ok()?;
    if frag {
        return None;
    }
    let l4b = inner.get(l4..l4 + 8)?;
    let (sport, dport) = match proto {
        PROTO_TCP | PROTO_UDP => (be16(l4b, 0)?, be16(l4b, 2)?),
        PROTO_ICMP | PROTO_ICMPV6 if icmp_kind(l4b[0], v6) == IcmpKind::Query => {
            (be16(l4b, 4)?, u16::from_be_bytes([l4b[0], l4b[1]]))
        }
        _ => return None,
    };
    Some(Tuple {
        src,
        dst,
        sport,
        dport,
        proto,
        v6,
    })
}

// --- Rewriting -----------------------------------------------------------

/// One's-complement sum of `data` folded into `acc`.
fn sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut c = data.chunks_exact(2);
    for w in &mut c {
        acc += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = c.remainder() {
        acc += (*last as u32) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Updates the checksum at `b[at..at+2]` for `old` bytes replaced by `new`
/// (RFC 1624, eqn. 3). A UDP checksum of 0 (none, IPv4) stays 0.
fn adjust(b: &mut [u8], at: usize, old: &[u8], new: &[u8], udp: bool) {
    let Some(c) = b.get(at..at + 2) else { return };
    let hc = u16::from_be_bytes([c[0], c[1]]);
    if udp && hc == 0 {
        return;
    }
    let mut acc = (!hc) as u32;
    let mut o = old.chunks_exact(2);
    for w in &mut o {
        acc += (!u16::from_be_bytes([w[0], w[1]])) as u32;
    }
    acc = sum(acc, new);
    let mut v = !fold(acc);
    if udp && v == 0 {
        v = 0xffff;
    }
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Where a packet's L4 checksum is, and whether it covers the IP
/// addresses (a pseudo-header).
fn l4_csum(p: &Parsed) -> Option<(usize, bool, bool)> {
    match p.tuple.proto {
        PROTO_TCP => Some((p.l4 + 16, true, false)),
        PROTO_UDP => Some((p.l4 + 6, true, !p.tuple.v6)),
        PROTO_ICMP => Some((p.l4 + 2, false, false)),
        PROTO_ICMPV6 => Some((p.l4 + 2, true, false)),
        _ => None,
    }
}

/// Rewrites the packet's addresses and ports (ICMP query: its id) to
/// `to`, fixing the IP and L4 checksums. `p` is the packet's parse; it
/// describes the packet as it was before.
pub fn rewrite(b: &mut [u8], p: &Parsed, to: &Tuple) {
    let t = &p.tuple;
    let csum = l4_csum(p);
    let alen = if t.v6 { 16 } else { 4 };
    for (field, old, new) in [(0usize, &t.src, &to.src), (1, &t.dst, &to.dst)] {
        if old == new {
            continue;
        }
        let at = if t.v6 {
            p.l3 + 8 + 16 * field
        } else {
            p.l3 + 12 + 4 * field
        };
        let (o, n) = (old.bytes(t.v6), new.bytes(t.v6));
        if !t.v6 {
            adjust(b, p.l3 + 10, o, n, false);
        }
        if let Some((c, pseudo, udp)) = csum {
            if pseudo {
                adjust(b, c, o, n, udp);
            }
        }
        b[at..at + alen].copy_from_slice(n);
    }
    let ports: &[(usize, u16, u16)] = match (t.proto, p.icmp) {
        (PROTO_TCP | PROTO_UDP, _) => &[(0, t.sport, to.sport), (2, t.dport, to.dport)],
        (_, Some(IcmpKind::Query)) => &[(4, t.sport, to.sport)],
        _ => &[],
    };
    for &(off, old, new) in ports {
        if old == new {
            continue;
        }
        if let Some((c, _, udp)) = csum {
            adjust(b, c, &old.to_be_bytes(), &new.to_be_bytes(), udp);
        }
        b[p.l4 + off..p.l4 + off + 2].copy_from_slice(&new.to_be_bytes());
    }
}

/// Rewrites an ICMP error whose quoted packet belongs to a translated
/// connection: the quoted header's addresses and ports become `quoted_to`
/// and the outer addresses `outer_src` and `outer_dst`, with the inner IPv4 header
/// checksum and the ICMP checksum recomputed over the message.
pub fn rewrite_related(
    b: &mut [u8],
    p: &Parsed,
    quoted_to: &Tuple,
    outer_src: &Addr,
    outer_dst: &Addr,
) {
    let Some((qt, at)) = p.quoted else { return };
    let v6 = p.tuple.v6;
    let alen = if v6 { 16 } else { 4 };
    // Inner addresses.
    let (src_at, dst_at) = if v6 {
        (at + 8, at + 24)
    } else {
        (at + 12, at + 16)
    };
    b[src_at..src_at + alen].copy_from_slice(quoted_to.src.bytes(v6));
    b[dst_at..dst_at + alen].copy_from_slice(quoted_to.dst.bytes(v6));
    let inner_l4 = if v6 {
        at + 40
    } else {
        at + ((b[at] & 0x0f) as usize) * 4
    };
    match qt.proto {
        PROTO_TCP | PROTO_UDP => {
            b[inner_l4..inner_l4 + 2].copy_from_slice(&quoted_to.sport.to_be_bytes());
            b[inner_l4 + 2..inner_l4 + 4].copy_from_slice(&quoted_to.dport.to_be_bytes());
        }
        _ => b[inner_l4 + 4..inner_l4 + 6].copy_from_slice(&quoted_to.sport.to_be_bytes()),
    }
    if !v6 {
        let ihl = ((b[at] & 0x0f) as usize) * 4;
        b[at + 10..at + 12].fill(0);
        let c = !fold(sum(0, &b[at..at + ihl]));
        b[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
    }
    // Outer addresses.
    for (old, new, at) in [
        (
            p.tuple.src,
            outer_src,
            if v6 { p.l3 + 8 } else { p.l3 + 12 },
        ),
        (
            p.tuple.dst,
            outer_dst,
            if v6 { p.l3 + 24 } else { p.l3 + 16 },
        ),
    ] {
        if !v6 {
            adjust(b, p.l3 + 10, old.bytes(false), new.bytes(false), false);
        }
        b[at..at + alen].copy_from_slice(new.bytes(v6));
    }
    // The ICMP checksum over the whole message (plus the pseudo-header in v6).
    let c_at = p.l4 + 2;
    b[c_at..c_at + 2].fill(0);
    let mut acc = sum(0, &b[p.l4..p.end]);
    if v6 {
        acc = sum(acc, &b[p.l3 + 8..p.l3 + 40]);
        acc += (p.end - p.l4) as u32 + PROTO_ICMPV6 as u32;
    }
    let c = !fold(acc);
    b[c_at..c_at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Verifies a full checksum the way a receiving stack would (tests).
pub fn checksums_ok(b: &[u8], p: &Parsed) -> bool {
    let v6 = p.tuple.v6;
    if !v6 {
        let ihl = ((b[p.l3] & 0x0f) as usize) * 4;
        if fold(sum(0, &b[p.l3..p.l3 + ihl])) != 0xffff {
            return false;
        }
    }
    let Some((c, pseudo, udp)) = l4_csum(p) else {
        return true;
    };
    if udp && b[c] == 0 && b[c + 1] == 0 {
        return true;
    }
    let mut acc = sum(0, &b[p.l4..p.end]);
    if pseudo {
        let (s, d) = if v6 {
            (p.l3 + 8, p.l3 + 24)
        } else {
            (p.l3 + 12, p.l3 + 16)
        };
        let alen = if v6 { 16 } else { 4 };
        acc = sum(acc, &b[s..s + alen]);
        acc = sum(acc, &b[d..d + alen]);
        acc += (p.end - p.l4) as u32 + p.tuple.proto as u32;
    }
    fold(acc) == 0xffff
}

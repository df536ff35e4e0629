//! Building valid frames: Ethernet (with up to two VLAN tags), IPv4 or
//! IPv6, TCP/UDP/ICMP, with correct lengths and checksums. Used by the
//! traffic generators (`eswitchd replay --demo`), benchmarks and tests.
//!
//! ```
//! use megaflow::frame::{FrameSpec, L4};
//! let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1000, 53)).build();
//! assert_eq!(f.len(), 60); // padded to the Ethernet minimum
//! ```

/// The transport part of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp {
        sport: u16,
        dport: u16,
        flags: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
    },
    /// ICMP (v4) or ICMPv6, by the IP version.
    Icmp {
        ty: u8,
        code: u8,
    },
    /// Another protocol number with no header of its own.
    Raw(u8),
}

impl L4 {
    /// A TCP segment with ACK set.
    pub fn tcp(sport: u16, dport: u16) -> L4 {
        L4::Tcp {
            sport,
            dport,
            flags: 0x010,
        }
    }

    /// A UDP datagram.
    pub fn udp(sport: u16, dport: u16) -> L4 {
        L4::Udp { sport, dport }
    }

    fn proto(self, v6: bool) -> u8 {
        match self {
            L4::Tcp { .. } => 6,
            L4::Udp { .. } => 17,
            L4::Icmp { .. } if v6 => 58,
            L4::Icmp { .. } => 1,
            L4::Raw(p) => p,
        }
    }

    fn header_len(self) -> usize {
        match self {
            L4::Tcp { .. } => 20,
            L4::Udp { .. } | L4::Icmp { .. } => 8,
            L4::Raw(_) => 0,
        }
    }
}

/// The network part of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    Ipv4 { src: u32, dst: u32 },
    Ipv6 { src: u128, dst: u128 },
}

/// A frame to build. Fields are public: adjust them after a constructor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    pub eth_src: u64,
    pub eth_dst: u64,
    /// Tags outermost first: (TPID, TCI).
    pub vlans: Vec<(u16, u16)>,
    pub l3: L3,
    pub l4: L4,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// Payload bytes after the L4 header (filled with a pattern).
    pub payload: usize,
}

/// A TCP segment `src:sport` → `dst:dport` over IPv4 with `flags`,
/// sequence and acknowledgement numbers, a 64240-byte window and `len`
/// bytes of payload (the TCP checksum is not recomputed for them: the
/// connection tracker, like Linux's with checksum checks off, reads the
/// numbers only). For conntrack tests and benches.
#[allow(clippy::too_many_arguments)]
pub fn tcp_segment(
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    flags: u16,
    seq: u32,
    ack: u32,
    len: usize,
) -> Vec<u8> {
    let mut f = FrameSpec::ipv4(
        src,
        dst,
        L4::Tcp {
            sport,
            dport,
            flags,
        },
    )
    .payload(len)
    .build();
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    f[42..46].copy_from_slice(&ack.to_be_bytes());
    f[48..50].copy_from_slice(&64240u16.to_be_bytes());
    f
}

impl FrameSpec {
    /// An IPv4 frame from 02:00:00:00:00:01 to 02:00:00:00:00:02, TTL 64.
    pub fn ipv4(src: u32, dst: u32, l4: L4) -> FrameSpec {
        FrameSpec {
            eth_src: 0x0200_0000_0001,
            eth_dst: 0x0200_0000_0002,
            vlans: Vec::new(),
            l3: L3::Ipv4 { src, dst },
            l4,
            tos: 0,
            ttl: 64,
            payload: 0,
        }
    }

    /// An IPv6 frame, hop limit 64.
    pub fn ipv6(src: u128, dst: u128, l4: L4) -> FrameSpec {
        FrameSpec {
            l3: L3::Ipv6 { src, dst },
            ..FrameSpec::ipv4(0, 0, l4)
        }
    }

    /// Sets the MAC addresses.
    pub fn macs(mut self, src: u64, dst: u64) -> Self {
        self.eth_src = src;
        self.eth_dst = dst;
        self
    }

    /// Adds a VLAN tag inside the ones already there.
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.vlans.push((tpid, tci));
        self
    }

    /// Sets the payload length.
    pub fn payload(mut self, len: usize) -> Self {
        self.payload = len;
        self
    }

    /// The frame's bytes, padded with zeros to 60 when shorter.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(64 + self.payload);
        eth_header(&mut f, self.eth_dst, self.eth_src, &self.vlans);
        let l4_len = self.l4.header_len() + self.payload;
        let v6 = matches!(self.l3, L3::Ipv6 { .. });
        let proto = self.l4.proto(v6);
        let pseudo = match self.l3 {
            L3::Ipv4 { src, dst } => {
                f.extend_from_slice(&0x0800u16.to_be_bytes());
                let ip_start = f.len();
                let total = (20 + l4_len) as u16;
                f.extend_from_slice(&[0x45, self.tos]);
                f.extend_from_slice(&total.to_be_bytes());
                f.extend_from_slice(&[0, 0, 0x40, 0, self.ttl, proto, 0, 0]);
                f.extend_from_slice(&src.to_be_bytes());
                f.extend_from_slice(&dst.to_be_bytes());
                let c = checksum(0, f.get(ip_start..).unwrap_or(&[]));
                f[ip_start + 10..ip_start + 12].copy_from_slice(&c.to_be_bytes());
                sum16(&src.to_be_bytes())
                    + sum16(&dst.to_be_bytes())
                    + u32::from(proto)
                    + l4_len as u32
            }
            L3::Ipv6 { src, dst } => {
                f.extend_from_slice(&0x86ddu16.to_be_bytes());
                let vtc = 0x6000_0000u32 | u32::from(self.tos) << 20;
                f.extend_from_slice(&vtc.to_be_bytes());
                f.extend_from_slice(&(l4_len as u16).to_be_bytes());
                f.extend_from_slice(&[proto, self.ttl]);
                f.extend_from_slice(&src.to_be_bytes());
                f.extend_from_slice(&dst.to_be_bytes());
                sum16(&src.to_be_bytes())
                    + sum16(&dst.to_be_bytes())
                    + u32::from(proto)
                    + l4_len as u32
            }
        };
        let l4_start = f.len();
        let csum_at = match self.l4 {
            L4::Tcp {
                sport,
                dport,
                flags,
            } => {
                f.extend_from_slice(&sport.to_be_bytes());
                f.extend_from_slice(&dport.to_be_bytes());
                f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
                let off_flags = 0x5000u16 | (flags & 0x1ff);
                f.extend_from_slice(&off_flags.to_be_bytes());
                f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
                Some((16, true))
            }
            L4::Udp { sport, dport } => {
                f.extend_from_slice(&sport.to_be_bytes());
                f.extend_from_slice(&dport.to_be_bytes());
                f.extend_from_slice(&(l4_len as u16).to_be_bytes());
                f.extend_from_slice(&[0, 0]);
                Some((6, true))
            }
            L4::Icmp { ty, code } => {
                f.extend_from_slice(&[ty, code, 0, 0, 0, 1, 0, 1]);
                Some((2, v6))
            }
            L4::Raw(_) => None,
        };
        f.extend((0..self.payload).map(|i| (i as u8).wrapping_mul(31).wrapping_add(7)));
        if let Some((at, with_pseudo)) = csum_at {
            let init = if with_pseudo { pseudo } else { 0 };
            let mut c = checksum(init, f.get(l4_start..).unwrap_or(&[]));
            if c == 0 && matches!(self.l4, L4::Udp { .. }) {
                c = 0xffff;
            }
            f[l4_start + at..l4_start + at + 2].copy_from_slice(&c.to_be_bytes());
        }
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    }
}

fn eth_header(f: &mut Vec<u8>, dst: u64, src: u64, vlans: &[(u16, u16)]) {
    f.extend_from_slice(&dst.to_be_bytes()[2..]);
    f.extend_from_slice(&src.to_be_bytes()[2..]);
    for &(tpid, tci) in vlans {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
}

/// An ARP request (broadcast) from `src_mac`/`src_ip` for `target_ip`.
pub fn arp_request(src_mac: u64, src_ip: u32, target_ip: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    eth_header(&mut f, 0xffff_ffff_ffff, src_mac, &[]);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&src_mac.to_be_bytes()[2..]);
    f.extend_from_slice(&src_ip.to_be_bytes());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target_ip.to_be_bytes());
    f.resize(60, 0);
    f
}

/// The one's complement sum of 16-bit words (odd tail padded with zero),
/// not folded.
pub fn sum16(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum()
}

/// The Internet checksum of `data` with `init` (e.g. a pseudo-header sum)
/// added.
pub fn checksum(init: u32, data: &[u8]) -> u16 {
    let mut s = u64::from(init) + u64::from(sum16(data));
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
#[path = "tests/frame.rs"]
mod tests;

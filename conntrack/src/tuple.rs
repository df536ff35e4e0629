//! Addresses and tuples: what identifies a connection in one direction.
//!
//! A [`Tuple`] is a packet's (src, dst, sport, dport, proto). For ICMP
//! queries `sport` is the id and `dport` the type and code (as Open
//! vSwitch's `conn_key` keeps them), so a reply's tuple is the request's
//! reversed with the reply type.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::packet::{icmp_other_type, PROTO_ICMP, PROTO_ICMPV6};

/// An IPv4 (first four bytes, the rest zero) or IPv6 address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Addr(pub [u8; 16]);

impl Addr {
    #[inline]
    pub fn v4(b: [u8; 4]) -> Addr {
        // Built as one value in a register and stored whole: built byte by
        // byte, the 16-byte loads that read it next stall on store
        // forwarding (a fifth of a tracked packet's time).
        Addr((u128::from(u32::from_be_bytes(b)) << 96).to_be_bytes())
    }

    /// The address as two words (native order), for hashing and ordering.
    #[inline]
    pub(crate) fn words(&self) -> (u64, u64) {
        let v = u128::from_ne_bytes(self.0);
        (v as u64, (v >> 64) as u64)
    }

    pub fn from_v4(a: Ipv4Addr) -> Addr {
        Addr::v4(a.octets())
    }

    pub fn from_v6(a: Ipv6Addr) -> Addr {
        Addr(a.octets())
    }

    /// The address's bytes on the wire.
    pub fn bytes(&self, v6: bool) -> &[u8] {
        if v6 {
            &self.0
        } else {
            &self.0[..4]
        }
    }

    pub fn as_v4(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.0[0], self.0[1], self.0[2], self.0[3])
    }

    pub fn as_v6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// As an integer, for ranges (IPv4 in the low 32 bits).
    pub fn to_u128(self, v6: bool) -> u128 {
        if v6 {
            u128::from_be_bytes(self.0)
        } else {
            u32::from_be_bytes(self.0[..4].try_into().expect("4 bytes")) as u128
        }
    }

    pub fn from_u128(v: u128, v6: bool) -> Addr {
        if v6 {
            Addr(v.to_be_bytes())
        } else {
            Addr::v4((v as u32).to_be_bytes())
        }
    }

    pub fn display(&self, v6: bool) -> String {
        if v6 {
            self.as_v6().to_string()
        } else {
            self.as_v4().to_string()
        }
    }
}

impl fmt::Debug for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0[4..] == [0; 12] {
            write!(f, "{}", self.as_v4())
        } else {
            write!(f, "{}", self.as_v6())
        }
    }
}

/// One direction of a connection.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tuple {
    pub src: Addr,
    pub dst: Addr,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub v6: bool,
}

impl Tuple {
    pub fn is_icmp(&self) -> bool {
        matches!(
            (self.proto, self.v6),
            (PROTO_ICMP, false) | (PROTO_ICMPV6, true)
        )
    }

    /// ICMP: (type, code).
    pub fn icmp_type_code(&self) -> (u8, u8) {
        let [t, c] = self.dport.to_be_bytes();
        (t, c)
    }

    /// The tuple of the other direction (an ICMP query's reply, a reply's
    /// query); `None` for an ICMP type that is neither.
    pub fn reverse(&self) -> Option<Tuple> {
        if self.is_icmp() {
            let (ty, code) = self.icmp_type_code();
            let rt = icmp_other_type(ty, self.v6)?;
            return Some(Tuple {
                src: self.dst,
                dst: self.src,
                sport: self.sport,
                dport: u16::from_be_bytes([rt, code]),
                ..*self
            });
        }
        Some(Tuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            ..*self
        })
    }

    /// The protocol's name as Open vSwitch prints it.
    pub fn proto_name(&self) -> String {
        match (self.proto, self.v6) {
            (6, _) => "tcp".into(),
            (17, _) => "udp".into(),
            (1, false) => "icmp".into(),
            (58, true) => "icmp6".into(),
            (p, _) => p.to_string(),
        }
    }

    /// `src=...,dst=...,sport=...,dport=...` (ICMP: `id=,type=,code=`),
    /// as `ovs-appctl dpctl/dump-conntrack` prints a direction.
    pub fn format(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "src={},dst={}",
            self.src.display(self.v6),
            self.dst.display(self.v6)
        );
        if self.is_icmp() {
            let (t, c) = self.icmp_type_code();
            let _ = write!(out, ",id={},type={},code={}", self.sport, t, c);
        } else {
            let _ = write!(out, ",sport={},dport={}", self.sport, self.dport);
        }
    }
}

impl fmt::Debug for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.format(&mut s);
        write!(f, "{}({})", self.proto_name(), s)
    }
}

/// A direction of a connection in a zone: what the tracker's index maps.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ConnKey {
    pub tuple: Tuple,
    pub zone: u16,
}

//! Frames for the tracker's tests: Ethernet + IPv4/IPv6 + TCP/UDP/ICMP
//! with valid checksums, as a stack would send them.
#![allow(dead_code)]

use conntrack::packet::{self, ETH_IPV4, ETH_IPV6};
use conntrack::{Addr, AddrRange, CtMeta, CtSpec, NatKind, NatRange, NatSpec, Tracker};

pub const L3: usize = 14;

/// The hosts of the scenarios: two ends and a NAT gateway's address.
pub const A: &str = "198.18.0.2";
pub const B: &str = "198.18.0.3";
pub const GW: &str = "198.19.0.1";

/// A tracker with a fixed hash seed (runs repeat).
pub fn tracker() -> Tracker {
    Tracker::new(conntrack::Config {
        seed: Some(7),
        ..conntrack::Config::default()
    })
}

fn sum(mut acc: u32, d: &[u8]) -> u32 {
    for c in d.chunks(2) {
        acc += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    acc
}

fn csum(acc: u32) -> u16 {
    let mut a = acc;
    while a > 0xffff {
        a = (a & 0xffff) + (a >> 16);
    }
    !(a as u16)
}

/// An IP packet (`src`/`dst` as text) carrying `l4` of `proto`.
pub fn ip(src: &str, dst: &str, proto: u8, mut l4: Vec<u8>) -> Vec<u8> {
    let s: std::net::IpAddr = src.parse().unwrap();
    let d: std::net::IpAddr = dst.parse().unwrap();
    let mut f = vec![0u8; 12];
    let (sb, db, v6) = match (s, d) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => {
            (s.octets().to_vec(), d.octets().to_vec(), false)
        }
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
            (s.octets().to_vec(), d.octets().to_vec(), true)
        }
        _ => panic!("mixed families"),
    };
    f.extend_from_slice(&(if v6 { ETH_IPV6 } else { ETH_IPV4 }).to_be_bytes());
    // L4 checksum.
    let ck_at = match proto {
        6 => Some(16),
        17 => Some(6),
        1 | 58 => Some(2),
        _ => None,
    };
    if let Some(at) = ck_at {
        l4[at] = 0;
        l4[at + 1] = 0;
        let mut acc = sum(0, &l4);
        if proto != 1 {
            acc = sum(acc, &sb);
            acc = sum(acc, &db);
            acc += l4.len() as u32 + proto as u32;
        }
        let c = csum(acc);
        l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    if v6 {
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&sb);
        f.extend_from_slice(&db);
    } else {
        let mut h = vec![0x45, 0];
        h.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
        h.extend_from_slice(&sb);
        h.extend_from_slice(&db);
        let c = csum(sum(0, &h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&l4);
    f
}

pub fn tcp_l4(sport: u16, dport: u16, flags: u8, seq: u32, ack: u32, data: usize) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    t.extend(std::iter::repeat_n(0xab, data));
    t
}

#[allow(clippy::too_many_arguments)]
pub fn tcp(
    src: &str,
    dst: &str,
    sport: u16,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    data: usize,
) -> Vec<u8> {
    ip(src, dst, 6, tcp_l4(sport, dport, flags, seq, ack, data))
}

pub fn udp(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(b"ping");
    ip(src, dst, 17, u)
}

pub fn icmp(src: &str, dst: &str, ty: u8, code: u8, id: u16) -> Vec<u8> {
    let proto = if src.contains(':') { 58 } else { 1 };
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 1, 1, 2, 3, 4]);
    ip(src, dst, proto, m)
}

/// An ICMP error (`ty`/`code`) from `src` to `dst` quoting `quoted` (a
/// frame built above).
pub fn icmp_error(src: &str, dst: &str, ty: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
    let proto = if src.contains(':') { 58 } else { 1 };
    let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
    let end = (L3 + if proto == 58 { 48 } else { 28 }).min(quoted.len());
    m.extend_from_slice(&quoted[L3..end]);
    ip(src, dst, proto, m)
}

pub const SYN: u8 = 0x02;
pub const ACK: u8 = 0x10;
pub const FIN: u8 = 0x01;
pub const RST: u8 = 0x04;

pub fn eth_type(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[12], f[13]])
}

/// Runs one ct() on a fresh packet (no earlier ct state).
pub fn ct(t: &Tracker, f: &mut [u8], spec: &CtSpec, now: u64) -> CtMeta {
    let mut m = CtMeta::default();
    t.execute(f, L3, eth_type(f), spec, &mut m, now);
    m
}

pub fn parsed(f: &[u8]) -> packet::Parsed {
    packet::parse(f, L3, eth_type(f)).expect("test frames parse")
}

/// The packet's addresses and ports as text, for asserting rewrites.
pub fn tuple_of(f: &[u8]) -> (Addr, Addr, u16, u16) {
    let t = parsed(f).tuple;
    (t.src, t.dst, t.sport, t.dport)
}

pub fn v4(s: &str) -> Addr {
    Addr::from_v4(s.parse().unwrap())
}

pub fn zone(z: u16) -> CtSpec {
    CtSpec {
        zone: z,
        ..CtSpec::default()
    }
}

pub fn commit(z: u16) -> CtSpec {
    CtSpec {
        zone: z,
        commit: true,
        ..CtSpec::default()
    }
}

/// `ct(commit,zone=0,nat(src=GW[:min-max]))`.
pub fn snat(min_port: u16, max_port: u16) -> CtSpec {
    CtSpec {
        nat: Some(NatSpec {
            range: Some(NatRange {
                kind: NatKind::Src,
                addrs: Some(AddrRange {
                    min: v4(GW),
                    max: v4(GW),
                    v6: false,
                }),
                port_min: min_port,
                port_max: max_port,
                random: false,
                hash: false,
                persistent: false,
            }),
        }),
        ..commit(0)
    }
}

/// `ct(nat)` in zone 0.
pub const NAT: CtSpec = CtSpec {
    zone: 0,
    commit: false,
    force: false,
    nat: Some(NatSpec { range: None }),
    mark: None,
    label: None,
};

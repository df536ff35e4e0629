//! Synthetic workloads: the 1,000-rule ACL pipeline of the translation
//! benchmark, shared by the benchmark, the Open vSwitch width comparison
//! and demos, so all of them measure the same tables and packets.
//!
//! The pipeline: table 0 admits each of ports 1-4 (writes the port into
//! metadata, goes to table 1); table 1 is an ACL of `ACL_RULES` rules over
//! IPv4 source/destination prefixes (/0-/32), IP protocol (TCP or UDP) and
//! destination ports (exact service ports or a prefix-masked range), 70 %
//! going on to table 2, 30 % dropping; table 2 forwards by destination MAC
//! (64 MACs over the 4 ports). Packets: half inside a random rule's
//! prefixes (random host bits), half uniform.

use megaflow::{Field, FlowKey, Match, PortNo, Timestamp};

use crate::rule::{Instructions, OfAction, OfPort, RuleSpec};
use crate::{Bridge, Priority, TableId};

/// Rules in the ACL table.
pub const ACL_RULES: usize = 1000;

/// The workloads' generator.
pub use megaflow::SplitMix64 as Rng;

/// The IPv4 netmask of a prefix length.
pub fn prefix(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

/// Destination ports the ACL names.
pub const SERVICE_PORTS: [u16; 8] = [22, 53, 80, 123, 443, 3306, 5432, 8080];
/// Destination MACs table 2 knows.
pub const MACS: u64 = 64;

/// The i-th workload MAC.
pub fn mac(i: u64) -> u64 {
    0x0200_0000_0000 | i
}

/// One ACL rule's shape, kept to draw matching packets.
#[derive(Clone, Copy)]
pub struct AclRule {
    pub src: u32,
    pub src_len: u32,
    pub dst: u32,
    pub dst_len: u32,
    pub proto: u8,
    pub dport: Option<(u16, u16)>,
}

/// `ACL_RULES` random rules.
pub fn acl_rules(r: &mut Rng) -> Vec<AclRule> {
    (0..ACL_RULES)
        .map(|_| {
            let src_len = [0u32, 8, 16, 24, 32][r.below(5) as usize];
            let dst_len = [8u32, 16, 24, 32][r.below(4) as usize];
            let dport = match r.below(4) {
                0 => None,
                1 => Some((0x0400, 0xfc00)),
                _ => Some((SERVICE_PORTS[r.below(8) as usize], 0xffff)),
            };
            AclRule {
                src: (0x0a00_0000 | r.below(1 << 24) as u32) & prefix(src_len),
                src_len,
                dst: (0xc612_0000 | r.below(1 << 17) as u32) & prefix(dst_len),
                dst_len,
                proto: if r.below(3) == 0 { 17 } else { 6 },
                dport,
            }
        })
        .collect()
}

/// The match of one ACL rule.
pub fn acl_match(a: &AclRule) -> Match {
    let mut m = Match::catch_all();
    m.set_field_masked(Field::EthType, 0x0800, 0xffff);
    m.set_field_masked(Field::IpProto, a.proto.into(), 0xff);
    m.set_field_masked(Field::Ipv4Src, a.src.into(), prefix(a.src_len).into());
    m.set_field_masked(Field::Ipv4Dst, a.dst.into(), prefix(a.dst_len).into());
    if let Some((p, mask)) = a.dport {
        m.set_field_masked(Field::TpDst, p.into(), mask.into());
    }
    m
}

/// The three-table pipeline around `rules`, on ports 1-4.
pub fn acl_bridge(rules: &[AclRule]) -> Bridge {
    let mut br = Bridge::with_ports(1..=4);
    let now = Timestamp(0);
    let add = |br: &mut Bridge, t: u8, prio: u16, m: Match, ins: Instructions| {
        let mut s = RuleSpec::new(TableId(t), Priority(prio), m);
        s.instructions = ins;
        br.tables.add(s, now).expect("workload rules are valid");
    };
    for p in 1..=4u32 {
        let mut m = Match::catch_all();
        m.set_field_masked(Field::InPort, p.into(), u32::MAX.into());
        let ins = Instructions {
            write_metadata: Some((u64::from(p), 0xff)),
            goto_table: Some(TableId(1)),
            ..Default::default()
        };
        add(&mut br, 0, 100, m, ins);
    }
    for (i, a) in rules.iter().enumerate() {
        let ins = if i % 10 < 7 {
            Instructions {
                goto_table: Some(TableId(2)),
                ..Default::default()
            }
        } else {
            Instructions::default()
        };
        add(&mut br, 1, 1 + i as u16, acl_match(a), ins);
    }
    for i in 0..MACS {
        let mut m = Match::catch_all();
        m.set_field_masked(Field::EthDst, mac(i).into(), (1u128 << 48) - 1);
        let ins = Instructions {
            apply: vec![OfAction::Output {
                port: OfPort::Port(PortNo(1 + (i % 4) as u32)),
                max_len: 0,
            }],
            ..Default::default()
        };
        add(&mut br, 2, 10, m, ins);
    }
    br
}

/// One packet of the workload.
pub fn acl_packet(r: &mut Rng, rules: &[AclRule]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1 + r.below(4));
    k.set_eth_src(mac(r.below(MACS)));
    k.set_eth_dst(mac(r.below(MACS)));
    k.set_eth_type(0x0800);
    k.set_ip_ttl(64);
    let a = rules[r.below(rules.len() as u64) as usize];
    let inside = r.below(2) == 0;
    let host = |r: &mut Rng, base: u32, len: u32| {
        (base & prefix(len)) | (r.next_u64() as u32 & !prefix(len))
    };
    if inside {
        k.set_ipv4_src(host(r, a.src, a.src_len).into());
        k.set_ipv4_dst(host(r, a.dst, a.dst_len).into());
        k.set_ip_proto(a.proto.into());
        let dport = match a.dport {
            Some((p, m)) => (p & m) | (r.next_u64() as u16 & !m),
            None => r.next_u64() as u16,
        };
        k.set_tp_dst(dport.into());
    } else {
        k.set_ipv4_src(r.next_u64() & 0xffff_ffff);
        k.set_ipv4_dst(r.next_u64() & 0xffff_ffff);
        k.set_ip_proto(if r.below(3) == 0 { 17 } else { 6 });
        k.set_tp_dst(u64::from(SERVICE_PORTS[r.below(8) as usize]));
    }
    k.set_tp_src(1024 + r.below(60000));
    k
}

/// A dense ACL of `n` rules for classifier tests and benches: IPv4
/// source and destination prefixes /8, /16, /20, /24, /28 or /32 around 24
/// random networks, TCP/UDP destination ports exact, prefix-masked or
/// absent, and five priority levels, so many rules overlap at equal
/// priority. Pairs of (match, priority), each pair unique.
pub fn dense_acl(r: &mut Rng, n: usize) -> Vec<(Match, u16)> {
    let nets: Vec<u32> = (0..24).map(|_| r.next_u64() as u32).collect();
    let lens = [8u32, 16, 20, 24, 28, 32];
    let mut out: Vec<(Match, u16)> = Vec::new();
    while out.len() < n {
        let mut pick = || nets[r.below(nets.len() as u64) as usize] ^ r.below(256) as u32;
        let (sv, dv) = (pick(), pick());
        let mut m = Match::catch_all();
        m.set_field_masked(Field::EthType, 0x0800, 0xffff);
        let s = lens[r.below(6) as usize];
        let d = lens[r.below(6) as usize];
        m.set_field_masked(Field::Ipv4Src, sv.into(), prefix(s).into());
        m.set_field_masked(Field::Ipv4Dst, dv.into(), prefix(d).into());
        match r.below(4) {
            0 => {}
            1 => {
                m.set_field_masked(Field::IpProto, [6, 17][r.below(2) as usize], 0xff);
                m.set_field_masked(
                    Field::TpDst,
                    [22, 80, 443, 53, 8080][r.below(5) as usize],
                    0xffff,
                );
            }
            2 => {
                m.set_field_masked(Field::IpProto, 6, 0xff);
                m.set_field_masked(Field::TpDst, 0x400 * u128::from(r.below(4)), 0xfc00);
            }
            _ => {
                m.set_field_masked(Field::IpProto, 17, 0xff);
                m.set_field_masked(Field::TpSrc, 1024 * u128::from(r.below(2)), 0xfc00);
                m.set_field_masked(Field::TpDst, 53, 0xffff);
            }
        }
        let prio = [100u16, 200, 300, 400, 500][r.below(5) as usize];
        if !out.iter().any(|(om, op)| *om == m && *op == prio) {
            out.push((m, prio));
        }
    }
    out
}

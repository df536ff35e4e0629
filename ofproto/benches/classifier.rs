//! Classifier micro-benchmark: lookups in 1,000-rule IPv4 ACLs.
//!
//! `cargo bench -p ofproto --bench classifier` prints `bench: ofproto.cls.<acl>.<name>
//! <value> <unit>` lines (best of several short rounds, a few seconds in all).
//!
//! Two ACLs, each lookup starting from fresh wildcards as one translation
//! step does:
//! - `acl1k`: the shape of the translation benchmark's ACL table
//!   (`benches/xlate.rs`): source /0,/8,/16,/24,/32 in 10/8, destination
//!   /8../32 in 198.18/15, TCP or UDP, destination port absent, /6 or exact;
//!   every rule its own priority (60 subtables). Half the packets fall inside
//!   a rule's prefixes, half are random.
//! - `acl1k_dense`: source and destination /8,/16,/20,/24,/28,/32 around 24
//!   random networks, ports absent, exact, prefix-masked or source and
//!   destination together, five priority levels only (144 subtables, nearly
//!   all sharing the top priority, so every miss visits them all). Packets
//!   are rule values with random host bits, sometimes a flipped network bit.
//!
//! Besides the lookup cost it reports the average megaflow mask width next
//! to the Open vSwitch 3.1 policy and the linear reference.

use std::hint::black_box;
use std::time::Instant;

use megaflow::{Field, FlowKey, Mask, Match};
use ofproto::classifier::reference::ReferenceClassifier;
#[path = "../fixtures/workload.rs"]
mod workload;
use ofproto::{Classifier, Priority, RuleId, Wildcards};
use workload::{dense_acl, Rng as WRng};

const RULES: usize = 1000;
const PACKETS: usize = 4096;
const ROUNDS: usize = 15;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn exact(f: Field, v: u128) -> (Field, u128, u128) {
    (f, v, f.layout().max_value())
}

fn prefix(f: Field, v: u32, plen: u32) -> (Field, u128, u128) {
    (f, v as u128, (u32::MAX << (32 - plen)) as u128)
}

fn rule(fields: &[(Field, u128, u128)]) -> Match {
    let mut k = FlowKey::ZERO;
    let mut m = Mask::EMPTY;
    for &(f, v, bits) in fields {
        k.set_field(f, v);
        m.set_field(f, bits);
    }
    Match::new(&k, &m)
}

/// The translation benchmark's ACL shape (see the module comment).
fn acl_xlate(r: &mut Rng, n: usize) -> Vec<(Match, u16)> {
    const SERVICE_PORTS: [u128; 8] = [22, 53, 80, 123, 443, 3306, 5432, 8080];
    (0..n)
        .map(|i| {
            let src_len = [0u32, 8, 16, 24, 32][r.below(5) as usize];
            let dst_len = [8u32, 16, 24, 32][r.below(4) as usize];
            let src = 0x0a00_0000 | r.below(1 << 24) as u32;
            let dst = 0xc612_0000 | r.below(1 << 17) as u32;
            let mut f = vec![
                exact(Field::EthType, 0x0800),
                exact(Field::IpProto, if r.below(3) == 0 { 17 } else { 6 }),
                prefix(Field::Ipv4Dst, dst, dst_len),
            ];
            if src_len > 0 {
                f.push(prefix(Field::Ipv4Src, src, src_len));
            }
            match r.below(4) {
                0 => {}
                1 => f.push((Field::TpDst, 0x0400, 0xfc00)),
                _ => f.push(exact(Field::TpDst, SERVICE_PORTS[r.below(8) as usize])),
            }
            (rule(&f), 1 + i as u16)
        })
        .collect()
}

/// Packets for [`acl_xlate`]: half inside a rule's prefixes, half random.
fn packet_xlate(r: &mut Rng, rules: &[(Match, u16)]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1 + r.below(4));
    k.set_eth_src(0x0200_0000_0000 | r.below(64));
    k.set_eth_dst(0x0200_0000_0000 | r.below(64));
    k.set_eth_type(0x0800);
    k.set_ip_ttl(64);
    let (m, _) = rules[r.below(rules.len() as u64) as usize];
    if r.below(2) == 0 {
        let host = |r: &mut Rng, f: Field| {
            let mask = m.mask().field(f) as u64;
            m.key().field(f) as u64 | (r.next() & !mask & 0xffff_ffff)
        };
        k.set_ipv4_src(host(r, Field::Ipv4Src));
        k.set_ipv4_dst(host(r, Field::Ipv4Dst));
        k.set_ip_proto(m.key().ip_proto());
        let pm = m.mask().field(Field::TpDst) as u64;
        k.set_tp_dst(m.key().tp_dst() | (r.next() & !pm & 0xffff));
    } else {
        k.set_ipv4_src(r.next() & 0xffff_ffff);
        k.set_ipv4_dst(r.next() & 0xffff_ffff);
        k.set_ip_proto(if r.below(3) == 0 { 17 } else { 6 });
        k.set_tp_dst([22, 53, 80, 123, 443, 3306, 5432, 8080][r.below(8) as usize]);
    }
    k.set_tp_src(1024 + r.below(60000));
    k
}

fn packet(r: &mut Rng, rules: &[(Match, u16)]) -> FlowKey {
    let (m, _) = rules[r.below(rules.len() as u64) as usize];
    let k = m.key();
    let smask = m.mask().field(Field::Ipv4Src) as u32;
    let dmask = m.mask().field(Field::Ipv4Dst) as u32;
    let mut src = k.ipv4_src() as u32 ^ (r.next() as u32 & !smask);
    let dst = k.ipv4_dst() as u32 ^ (r.next() as u32 & !dmask);
    if r.below(3) == 0 {
        src ^= 1 << r.below(32);
    }
    let pmask = m.mask().field(Field::TpDst) as u64;
    let dport = if pmask != 0 && r.below(2) == 0 {
        k.tp_dst() | (r.next() & !pmask & 0xffff)
    } else {
        [22, 80, 443, 53, 8080, 33000][r.below(6) as usize]
    };
    let mut p = FlowKey::ZERO;
    p.set_in_port(1);
    p.set_eth_dst(0x0200_0000_0001);
    p.set_eth_src(0x0200_0000_0002);
    p.set_eth_type(0x0800);
    p.set_ip_proto([6, 17][r.below(2) as usize]);
    p.set_ip_ttl(64);
    p.set_ipv4_src(src as u64);
    p.set_ipv4_dst(dst as u64);
    p.set_tp_src(1024 + r.below(60000));
    p.set_tp_dst(dport);
    p
}

/// Nanoseconds per call of `f` over the packet stream: the best of
/// several short rounds (the machine is shared; the minimum is the figure
/// least disturbed by other load).
fn time_per_lookup(packets: &[FlowKey], mut f: impl FnMut(&FlowKey) -> u64) -> f64 {
    let mut best = f64::MAX;
    // warm-up
    for p in packets {
        black_box(f(p));
    }
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut iters = 0usize;
        while start.elapsed().as_millis() < 40 {
            for p in packets {
                black_box(f(black_box(p)));
            }
            iters += packets.len();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

fn report(acl: &str, name: &str, value: f64, unit: &str) {
    println!("bench: ofproto.cls.{acl}.{name} {value:.2} {unit}");
}

fn bits(m: &Mask) -> u64 {
    m.words().iter().map(|w| w.count_ones() as u64).sum()
}

fn run(name: &str, rules: &[(Match, u16)], packets: &[FlowKey]) {
    let report = |metric: &str, value: f64, unit: &str| report(name, metric, value, unit);
    let start = Instant::now();
    let mut c = Classifier::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        c.insert(RuleId(i as u32), m, Priority(*p));
    }
    report(
        "insert_ns",
        start.elapsed().as_nanos() as f64 / rules.len() as f64,
        "ns/rule",
    );
    let mut rf = ReferenceClassifier::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        rf.insert(RuleId(i as u32), m, Priority(*p));
    }
    report("subtables", c.subtable_count() as f64, "count");

    // Untimed: answers agree, and the mask widths.
    let (mut ours, mut ovs, mut refb, mut hits) = (0u64, 0u64, 0u64, 0u64);
    for p in packets {
        let (mut a, mut b, mut cw) = (Wildcards::new(), Wildcards::new(), Wildcards::new());
        let x = c.lookup(p, &mut a);
        let y = c.lookup_ovs31(p, &mut b);
        let z = rf.lookup(p, &mut cw);
        assert_eq!(x, y);
        let prio = |id: Option<RuleId>| id.map(|id| rules[id.0 as usize].1);
        assert_eq!(prio(x), prio(z));
        ours += bits(a.mask());
        ovs += bits(b.mask());
        refb += bits(cw.mask());
        hits += x.is_some() as u64;
    }
    let n = packets.len() as f64;
    report("hit_ratio", hits as f64 / n, "fraction");
    report("mask_bits", ours as f64 / n, "bits");
    report("ovs31_mask_bits", ovs as f64 / n, "bits");
    report("reference_mask_bits", refb as f64 / n, "bits");

    let ns = time_per_lookup(packets, |p| {
        let mut wc = Wildcards::new();
        c.lookup(p, &mut wc).map_or(0, |id| id.0 as u64) ^ wc.mask().words()[12]
    });
    report("lookup_ns", ns, "ns");
    report("lookups_per_s", 1e9 / ns, "lookups/s");
    let ns = time_per_lookup(packets, |p| {
        let mut wc = Wildcards::new();
        c.lookup_ovs31(p, &mut wc).map_or(0, |id| id.0 as u64) ^ wc.mask().words()[12]
    });
    report("ovs31_lookup_ns", ns, "ns");
    let ns = time_per_lookup(&packets[..256], |p| {
        let mut wc = Wildcards::new();
        rf.lookup(p, &mut wc).map_or(0, |id| id.0 as u64)
    });
    report("reference_lookup_ns", ns, "ns");
}

fn main() {
    let mut r = Rng(0x00c1_a551_f1e5_2024);
    let rules = acl_xlate(&mut r, RULES);
    let packets: Vec<FlowKey> = (0..PACKETS).map(|_| packet_xlate(&mut r, &rules)).collect();
    run("acl1k", &rules, &packets);
    let rules = dense_acl(&mut WRng::new(r.next()), RULES);
    let packets: Vec<FlowKey> = (0..PACKETS).map(|_| packet(&mut r, &rules)).collect();
    run("acl1k_dense", &rules, &packets);
}

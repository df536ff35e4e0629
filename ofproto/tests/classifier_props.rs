//! Property tests of the classifier: agreement with the linear reference
//! and soundness of the recorded wildcards.
//!
//! Tables are drawn from a pool of realistic masks (in_port, eth_dst,
//! IPv4/IPv6 prefixes of random lengths, ARP, ports exact and prefix-masked,
//! TCP flags, VLAN, metadata and registers, non-prefix address masks, the
//! catch-all) with values from small pools, so rules overlap and packets hit
//! them. Packets are built on rule values with random fields elsewhere and a
//! few random bit flips.
//!
//! Soundness: for every lookup, many keys that agree with the packet on the
//! recorded mask (the packet with other bits changed, realistic packets
//! overlaid, uniformly random bits) must get the same answer. Every lookup's
//! mask must also be within the reference's (the union of all rule masks).
//!
//! Tests: random tables with distinct priorities against the reference,
//! before and after removing about half the rules; the same with many
//! equal-priority overlaps (answer: a matching rule of the best priority);
//! many small dense tables of prefixes and ports; more subtables than the
//! tries' owner bitmaps cover, with slot reuse.
//!
//! These tests were checked to fail when the trie skip, the port trie, a
//! stage miss, a hit, the trie lemma or the owner bitmaps record one bit
//! too few. `PROPTEST_CASES` scales the number of random tables.

use megaflow::{Field, FlowKey, Mask, Match, KEY_WORDS};
use ofproto::classifier::reference::ReferenceClassifier;
use ofproto::{Classifier, Priority, RuleId, Wildcards};
use proptest::prelude::*;

struct Rng(megaflow::SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(megaflow::SplitMix64::new(seed ^ 0x9e37_79b9_7f4a_7c15 | 1))
    }
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, pool: &[T]) -> T {
        pool[self.below(pool.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const IN_PORTS: &[u64] = &[1, 2, 3, 4];
const MACS: &[u64] = &[0x0200_0000_0001, 0x0200_0000_0002, 0x0200_0000_0103];
const V4: &[u64] = &[
    0x0a00_0000,
    0x0a01_0203,
    0x0a01_0280,
    0x0a80_0001,
    0xc0a8_0101,
    0xc0a8_01f0,
    0xac10_0005,
];
const V6: &[u128] = &[
    0x2001_0db8_0000_0000_0000_0000_0000_0001,
    0x2001_0db8_0001_0000_0000_0000_0000_0001,
    0x2001_0db8_8000_0000_0000_0000_0000_0042,
    0xfe80_0000_0000_0000_0000_0000_0000_0001,
];
const PROTOS: &[u64] = &[6, 17, 1];
const PORTS: &[u64] = &[80, 443, 22, 53, 8080, 1024, 0x8000];
const VLANS: &[u64] = &[0, 0x1000 | 10, 0x1000 | 20, 0x1000 | 0x30a];
const FLAGS: &[u64] = &[0x002, 0x010, 0x012, 0x004];
const ETH_TYPES: &[u64] = &[0x0800, 0x0800, 0x0800, 0x86dd, 0x0806, 0x88cc];

/// A prefix length: mostly the usual ones, sometimes anything.
fn plen(rng: &mut Rng, width: u32) -> u32 {
    if rng.chance(60) {
        let usual: &[u32] = if width == 32 {
            &[8, 16, 24, 32]
        } else {
            &[32, 48, 64, 128]
        };
        rng.pick(usual)
    } else {
        1 + rng.below(width as u64) as u32
    }
}

fn v4_prefix(p: u32) -> u128 {
    (u32::MAX << (32 - p)) as u128
}

fn v6_prefix(p: u32) -> u128 {
    u128::MAX << (128 - p)
}

/// Number of rule templates [`rule`] knows.
const TEMPLATES: u8 = 18;

/// A rule of template `tpl`, its values drawn with `seed`.
fn rule(tpl: u8, seed: u64) -> Match {
    let mut r = Rng::new(seed);
    let mut k = FlowKey::ZERO;
    let mut m = Mask::EMPTY;
    let set = |k: &mut FlowKey, m: &mut Mask, f: Field, v: u128, bits: u128| {
        k.set_field(f, v);
        m.set_field(f, m.field(f) | bits);
    };
    let all = |f: Field| f.layout().max_value();
    let ip = |k: &mut FlowKey, m: &mut Mask, r: &mut Rng| {
        let s = plen(r, 32);
        set(k, m, Field::EthType, 0x0800, all(Field::EthType));
        set(k, m, Field::Ipv4Src, r.pick(V4) as u128, v4_prefix(s));
    };
    match tpl % TEMPLATES {
        0 => set(
            &mut k,
            &mut m,
            Field::InPort,
            r.pick(IN_PORTS) as u128,
            all(Field::InPort),
        ),
        1 => set(
            &mut k,
            &mut m,
            Field::EthDst,
            r.pick(MACS) as u128,
            all(Field::EthDst),
        ),
        2 => ip(&mut k, &mut m, &mut r),
        3 => {
            set(&mut k, &mut m, Field::EthType, 0x0800, all(Field::EthType));
            let d = plen(&mut r, 32);
            set(
                &mut k,
                &mut m,
                Field::Ipv4Dst,
                r.pick(V4) as u128,
                v4_prefix(d),
            );
        }
        4 => {
            ip(&mut k, &mut m, &mut r);
            let d = plen(&mut r, 32);
            set(
                &mut k,
                &mut m,
                Field::Ipv4Dst,
                r.pick(V4) as u128,
                v4_prefix(d),
            );
        }
        5 => {
            set(&mut k, &mut m, Field::EthType, 0x0800, all(Field::EthType));
            set(&mut k, &mut m, Field::IpProto, r.pick(PROTOS) as u128, 0xff);
        }
        6 => {
            set(&mut k, &mut m, Field::EthType, 0x0800, all(Field::EthType));
            set(&mut k, &mut m, Field::IpProto, r.pick(PROTOS) as u128, 0xff);
            set(&mut k, &mut m, Field::TpDst, r.pick(PORTS) as u128, 0xffff);
        }
        7 => {
            ip(&mut k, &mut m, &mut r);
            set(&mut k, &mut m, Field::IpProto, r.pick(PROTOS) as u128, 0xff);
            let ps = r.below(17) as u32;
            let pd = r.below(17) as u32;
            let pm = |p: u32| {
                if p == 0 {
                    0
                } else {
                    (0xffffu32 << (16 - p)) as u128 & 0xffff
                }
            };
            set(&mut k, &mut m, Field::TpSrc, r.pick(PORTS) as u128, pm(ps));
            set(&mut k, &mut m, Field::TpDst, r.pick(PORTS) as u128, pm(pd));
        }
        8 => {
            set(&mut k, &mut m, Field::EthType, 0x0800, all(Field::EthType));
            set(&mut k, &mut m, Field::IpProto, 6, 0xff);
            set(&mut k, &mut m, Field::TpDst, r.pick(PORTS) as u128, 0xffff);
            set(
                &mut k,
                &mut m,
                Field::TcpFlags,
                r.pick(FLAGS) as u128,
                r.pick(&[0x002u128, 0x012, 0xfff]),
            );
        }
        9 => {
            let bits = r.pick(&[0xffffu128, 0x1fff, 0x1000]);
            set(&mut k, &mut m, Field::VlanTci, r.pick(VLANS) as u128, bits);
        }
        10 => {
            set(
                &mut k,
                &mut m,
                Field::Metadata,
                r.below(3) as u128,
                u64::MAX as u128,
            );
            if r.chance(50) {
                set(
                    &mut k,
                    &mut m,
                    Field::Reg0,
                    r.below(2) as u128 * 5,
                    all(Field::Reg0),
                );
            }
        }
        11 => {
            set(&mut k, &mut m, Field::EthType, 0x86dd, all(Field::EthType));
            let p = plen(&mut r, 128);
            set(&mut k, &mut m, Field::Ipv6Src, r.pick(V6), v6_prefix(p));
        }
        12 => {
            set(&mut k, &mut m, Field::EthType, 0x86dd, all(Field::EthType));
            let p = plen(&mut r, 128);
            set(&mut k, &mut m, Field::Ipv6Dst, r.pick(V6), v6_prefix(p));
            set(&mut k, &mut m, Field::IpProto, r.pick(PROTOS) as u128, 0xff);
            set(&mut k, &mut m, Field::TpDst, r.pick(PORTS) as u128, 0xffff);
        }
        13 => {
            set(
                &mut k,
                &mut m,
                Field::InPort,
                r.pick(IN_PORTS) as u128,
                all(Field::InPort),
            );
            ip(&mut k, &mut m, &mut r);
            set(&mut k, &mut m, Field::IpProto, r.pick(PROTOS) as u128, 0xff);
            let pd = 1 + r.below(16) as u32;
            set(
                &mut k,
                &mut m,
                Field::TpDst,
                r.pick(PORTS) as u128,
                (0xffffu32 << (16 - pd)) as u128 & 0xffff,
            );
        }
        14 => {}
        15 => {
            set(&mut k, &mut m, Field::EthType, 0x0800, all(Field::EthType));
            set(
                &mut k,
                &mut m,
                Field::Ipv4Src,
                r.pick(V4) as u128,
                r.pick(&[0xff00_ff00u128, 0x00ff_0000, 0x8000_0001]),
            );
        }
        16 => {
            set(&mut k, &mut m, Field::EthType, 0x0806, all(Field::EthType));
            let p = plen(&mut r, 32);
            set(
                &mut k,
                &mut m,
                Field::Ipv4Src,
                r.pick(V4) as u128,
                v4_prefix(p),
            );
            set(&mut k, &mut m, Field::IpProto, 1 + r.below(2) as u128, 0xff);
        }
        _ => {
            set(
                &mut k,
                &mut m,
                Field::InPort,
                r.pick(IN_PORTS) as u128,
                all(Field::InPort),
            );
            set(
                &mut k,
                &mut m,
                Field::EthDst,
                r.pick(MACS) as u128,
                all(Field::EthDst),
            );
            set(
                &mut k,
                &mut m,
                Field::VlanTci,
                r.pick(VLANS) as u128,
                0x1fff,
            );
        }
    }
    Match::new(&k, &m)
}

/// A realistic packet with pool values everywhere (not aimed at a rule).
fn background(r: &mut Rng) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(r.pick(IN_PORTS));
    k.set_eth_dst(r.pick(MACS));
    k.set_eth_src(r.pick(MACS));
    k.set_vlan_tci(r.pick(VLANS));
    if r.chance(20) {
        k.set_metadata(r.below(3));
        k.set_reg0(r.below(2) * 5);
    }
    let et = r.pick(ETH_TYPES);
    k.set_eth_type(et);
    match et {
        0x0800 | 0x0806 => {
            k.set_ipv4_src(r.pick(V4));
            k.set_ipv4_dst(r.pick(V4));
            k.set_ip_proto(if et == 0x0806 {
                1 + r.below(2)
            } else {
                r.pick(PROTOS)
            });
        }
        0x86dd => {
            k.set_ipv6_src(r.pick(V6));
            k.set_ipv6_dst(r.pick(V6));
            k.set_ip_proto(r.pick(PROTOS));
        }
        _ => {}
    }
    if et != 0x0806 && et != 0x88cc {
        k.set_tp_src(r.pick(PORTS));
        k.set_tp_dst(r.pick(PORTS));
        k.set_tcp_flags(r.pick(FLAGS));
        k.set_ip_ttl(64);
    }
    k
}

/// Fields the random bit flips hit.
const FLIP_FIELDS: &[Field] = &[
    Field::InPort,
    Field::EthDst,
    Field::EthType,
    Field::VlanTci,
    Field::Metadata,
    Field::IpProto,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::TpSrc,
    Field::TpDst,
    Field::TcpFlags,
];

fn flip(r: &mut Rng, k: &mut FlowKey) {
    let f = r.pick(FLIP_FIELDS);
    let bits = f.layout().bits as u64;
    // low bits more often: addresses and ports differ there
    let b = if r.chance(50) {
        r.below(bits.min(12))
    } else {
        r.below(bits)
    };
    k.set_field(f, k.field(f) ^ (1u128 << b));
}

/// A packet aimed at one of `rules` (or at none).
fn packet(r: &mut Rng, rules: &[(RuleId, Match, Priority)]) -> FlowKey {
    let mut k = background(r);
    if !rules.is_empty() && r.chance(85) {
        let (_, m, _) = rules[r.below(rules.len() as u64) as usize];
        k = overlay(&k, m.key(), m.mask());
    }
    for _ in 0..r.below(4) {
        flip(r, &mut k);
    }
    k
}

/// `base` with the bits of `mask` taken from `top`.
fn overlay(base: &FlowKey, top: &FlowKey, mask: &Mask) -> FlowKey {
    let (b, t, m) = (base.words(), top.words(), mask.words());
    let mut w = [0u64; KEY_WORDS];
    for i in 0..KEY_WORDS {
        w[i] = (b[i] & !m[i]) | (t[i] & m[i]);
    }
    FlowKey::from_words(w)
}

/// Keys agreeing with `key` on `mask`: the packet with other bits changed,
/// other realistic packets overlaid, uniformly random bits.
fn neighbours(
    r: &mut Rng,
    key: &FlowKey,
    mask: &Mask,
    rules: &[(RuleId, Match, Priority)],
    n: usize,
) -> Vec<FlowKey> {
    (0..n)
        .map(|i| {
            let other = match i % 4 {
                0 => {
                    let mut k = *key;
                    for _ in 0..1 + r.below(6) {
                        flip(r, &mut k);
                    }
                    k
                }
                1 | 2 => packet(r, rules),
                _ => FlowKey::from_words(std::array::from_fn(|_| r.next())),
            };
            overlay(&other, key, mask)
        })
        .collect()
}

/// Builds the rules of a table; `distinct` gives every rule its own
/// priority, otherwise priorities come from 0..4 (many ties).
fn table(seeds: &[(u8, u64, u16)], distinct: bool) -> Vec<(RuleId, Match, Priority)> {
    let mut out: Vec<(RuleId, Match, Priority)> = Vec::new();
    for (i, &(tpl, seed, p)) in seeds.iter().enumerate() {
        let m = rule(tpl, seed);
        let prio = if distinct {
            Priority((p % 100) * 300 + i as u16)
        } else {
            Priority(p % 4)
        };
        if out.iter().any(|(_, om, op)| *om == m && *op == prio) {
            continue; // the flow table never inserts a duplicate
        }
        out.push((RuleId(i as u32), m, prio));
    }
    out
}

fn lookup(c: &Classifier, k: &FlowKey) -> (Option<RuleId>, Mask) {
    let mut wc = Wildcards::new();
    let r = c.lookup(k, &mut wc);
    (r, *wc.mask())
}

/// Highest priority among the rules matching `k`.
fn best_priority(rules: &[(RuleId, Match, Priority)], k: &FlowKey) -> Option<Priority> {
    rules
        .iter()
        .filter(|(_, m, _)| m.matches(k))
        .map(|(_, _, p)| *p)
        .max()
}

/// Checks one table: answers (against the reference when priorities are
/// distinct, against the best matching priority otherwise) and soundness
/// of every lookup.
fn check_table(
    rules: &[(RuleId, Match, Priority)],
    c: &Classifier,
    rf: &ReferenceClassifier,
    r: &mut Rng,
    packets: usize,
    per_packet: usize,
    distinct: bool,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(c.len(), rules.len());
    for _ in 0..packets {
        let k = packet(r, rules);
        let (got, mask) = lookup(c, &k);
        let mut rwc = Wildcards::new();
        let want = rf.lookup(&k, &mut rwc);
        if distinct {
            prop_assert_eq!(got, want, "key {:?}", k);
        } else {
            let bp = best_priority(rules, &k);
            let gp = got.map(|id| {
                let (_, m, p) = rules
                    .iter()
                    .find(|(rid, _, _)| *rid == id)
                    .expect("answer is a rule of the table");
                assert!(m.matches(&k), "answer does not match");
                *p
            });
            prop_assert_eq!(gp, bp, "key {:?}", k);
        }
        prop_assert!(
            mask.is_subset_of(rwc.mask()),
            "wider than every rule's mask: {:?} vs {:?}",
            mask,
            rwc.mask()
        );
        for q in neighbours(r, &k, &mask, rules, per_packet) {
            let (gq, _) = lookup(c, &q);
            prop_assert_eq!(
                gq,
                got,
                "unsound: key {:?} mask {:?} neighbour {:?}",
                k,
                mask,
                q
            );
        }
    }
    Ok(())
}

fn seeds() -> impl Strategy<Value = Vec<(u8, u64, u16)>> {
    prop::collection::vec((0..TEMPLATES, any::<u64>(), any::<u16>()), 50..300)
}

fn run(seeds: &[(u8, u64, u16)], stream: u64, distinct: bool) -> Result<(), TestCaseError> {
    let mut rules = table(seeds, distinct);
    let mut c = Classifier::new();
    let mut rf = ReferenceClassifier::new();
    for (id, m, p) in &rules {
        c.insert(*id, m, *p);
        rf.insert(*id, m, *p);
    }
    let mut r = Rng::new(stream);
    check_table(&rules, &c, &rf, &mut r, 60, 32, distinct)?;
    // Remove about half the rules (and try removing them twice).
    let mut kept = Vec::new();
    for (id, m, p) in rules.drain(..) {
        if r.chance(50) {
            prop_assert!(c.remove(id, &m, p));
            prop_assert!(!c.remove(id, &m, p));
            prop_assert!(rf.remove(id));
            prop_assert_eq!(c.find_exact(&m, p), None);
        } else {
            prop_assert_eq!(c.find_exact(&m, p), Some(id));
            kept.push((id, m, p));
        }
    }
    check_table(&kept, &c, &rf, &mut r, 60, 32, distinct)?;
    let mut listed: Vec<(RuleId, Match, Priority)> =
        c.iter().map(|(id, m, p)| (id, *m, p)).collect();
    listed.sort_by_key(|(id, _, _)| *id);
    prop_assert_eq!(listed, kept);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_reference_and_is_sound(seeds in seeds(), stream in any::<u64>()) {
        run(&seeds, stream, true)?;
    }

    #[test]
    fn sound_with_equal_priorities(seeds in seeds(), stream in any::<u64>()) {
        run(&seeds, stream, false)?;
    }
}

/// Many small tables from few templates: dense overlaps of prefixes and
/// ports, the cases where the trie and port-trie tricks decide most.
#[test]
fn dense_prefix_and_port_tables_are_sound() {
    for seed in 0..300u64 {
        let mut r = Rng::new(seed);
        let tpls: &[u8] = &[2, 3, 4, 7, 8, 11, 12, 13, 15, 16];
        let n = 5 + r.below(40) as usize;
        let seeds: Vec<(u8, u64, u16)> = (0..n)
            .map(|_| (r.pick(tpls), r.next(), r.next() as u16))
            .collect();
        let distinct = seed % 2 == 0;
        let rules = table(&seeds, distinct);
        let mut c = Classifier::new();
        let mut rf = ReferenceClassifier::new();
        for (id, m, p) in &rules {
            c.insert(*id, m, *p);
            rf.insert(*id, m, *p);
        }
        check_table(&rules, &c, &rf, &mut r, 40, 32, distinct)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// More subtables than the tries' owner bitmaps cover (512): the ones in
/// higher slots fall back to the length test. Agreement and soundness,
/// also after removing a band of subtables so that slots are reused.
#[test]
fn many_subtables_beyond_owner_bitmaps() {
    let mut r = Rng::new(0x0515);
    let mut rules: Vec<(RuleId, Match, Priority)> = Vec::new();
    // 24 x 24 (source, destination) prefix lengths: 576 masks.
    for s in 9..=32u32 {
        for d in 9..=32u32 {
            for _ in 0..2 {
                let mut k = FlowKey::ZERO;
                k.set_eth_type(0x0800);
                k.set_ipv4_src(r.pick(V4) ^ (r.below(4) << (32 - s)));
                k.set_ipv4_dst(r.pick(V4));
                let m = Mask::EMPTY
                    .with_exact(Field::EthType)
                    .with(Field::Ipv4Src, v4_prefix(s))
                    .with(Field::Ipv4Dst, v4_prefix(d));
                let m = Match::new(&k, &m);
                let id = RuleId(rules.len() as u32);
                let prio = Priority(r.below(60_000) as u16);
                if !rules.iter().any(|(_, om, op)| *om == m && *op == prio) {
                    rules.push((id, m, prio));
                }
            }
        }
    }
    let mut c = Classifier::new();
    let mut rf = ReferenceClassifier::new();
    for (id, m, p) in &rules {
        c.insert(*id, m, *p);
        rf.insert(*id, m, *p);
    }
    assert!(c.subtable_count() > 512, "{}", c.subtable_count());
    check_table(&rules, &c, &rf, &mut r, 150, 16, false).unwrap_or_else(|e| panic!("{e}"));
    // Remove every rule with a source length in 12..=20 (a band of masks),
    // then insert them again: new subtables reuse the freed slots.
    let (band, kept): (Vec<_>, Vec<_>) = rules
        .into_iter()
        .partition(|(_, m, _)| (12..=20).contains(&m.mask().field(Field::Ipv4Src).count_ones()));
    for (id, m, p) in &band {
        assert!(c.remove(*id, m, *p));
        assert!(rf.remove(*id));
    }
    check_table(&kept, &c, &rf, &mut r, 100, 16, false).unwrap_or_else(|e| panic!("{e}"));
    for (id, m, p) in band.iter().rev() {
        c.insert(*id, m, *p);
        rf.insert(*id, m, *p);
    }
    let all: Vec<_> = kept.into_iter().chain(band).collect();
    check_table(&all, &c, &rf, &mut r, 150, 16, false).unwrap_or_else(|e| panic!("{e}"));
}

use super::*;
use crate::actions::DpAction;
use crate::key::Field;
use crate::types::PortNo;
use proptest::prelude::*;

fn out(p: u32) -> Actions {
    Actions::new(vec![DpAction::Output(PortNo(p))])
}

fn key_with(f: &[(Field, u128)]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for &(field, v) in f {
        k.set_field(field, v);
    }
    k
}

fn cfg() -> CacheConfig {
    CacheConfig {
        emc_insert_inv_prob: 1,
        rerank_interval: 7,
        emc_min_probes: 0,
        ..CacheConfig::default()
    }
}

/// The brute-force reference: a linear scan over (key & mask) == stored.
struct Linear(Vec<(Match, u32)>);

impl Linear {
    fn lookup(&self, key: &FlowKey) -> Vec<u32> {
        self.0
            .iter()
            .filter(|(m, _)| m.matches(key))
            .map(|(_, p)| *p)
            .collect()
    }
}

fn port_of(cache: &MegaflowCache, h: FlowHandle) -> u32 {
    match cache.actions(h).expect("live handle").as_slice() {
        [DpAction::Output(p)] => p.0,
        other => panic!("unexpected actions {other:?}"),
    }
}

#[test]
fn insert_lookup_remove() {
    let mut c = MegaflowCache::new(cfg());
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthDst);
    let k = key_with(&[
        (Field::InPort, 1),
        (Field::EthDst, 0xaa),
        (Field::TpDst, 80),
    ]);
    let h = c.insert(&Match::new(&k, &mask), out(2), 5).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c.subtable_count(), 1);

    let mut other = k;
    other.set_tp_dst(443); // wildcarded: still a hit
    assert_eq!(c.lookup(&other, 100, Timestamp(10)), Some(h));
    assert_eq!(c.lookup(&k, 60, Timestamp(20)), Some(h));
    other.set_eth_dst(0xbb);
    assert_eq!(c.lookup(&other, 60, Timestamp(30)), None);

    let st = c.get(h).unwrap().stats();
    assert_eq!((st.packets, st.bytes, st.used), (2, 160, Timestamp(20)));
    assert_eq!(c.get(h).unwrap().generation(), 5);

    let removed = c.remove(h).unwrap();
    assert_eq!(removed.stats.packets, 2);
    assert_eq!(removed.matched, Match::new(&k, &mask));
    assert!(c.is_empty());
    assert_eq!(c.subtable_count(), 0, "empty subtable is dropped");
    assert_eq!(c.lookup(&k, 60, Timestamp(40)), None);
    assert!(c.remove(h).is_none(), "stale handle");
    assert!(c.get(h).is_none());
}

#[test]
fn duplicate_is_rejected_with_existing_handle() {
    let mut c = MegaflowCache::new(cfg());
    let mask = Mask::EMPTY.with_exact(Field::Ipv4Dst);
    let k = key_with(&[(Field::Ipv4Dst, 7), (Field::Ipv4Src, 9)]);
    let h = c.insert(&Match::new(&k, &mask), out(1), 0).unwrap();
    let mut k2 = k;
    k2.set_ipv4_src(99); // differs only in wildcarded bits: same megaflow
    assert_eq!(
        c.insert(&Match::new(&k2, &mask), out(3), 0),
        Err(InsertError::Duplicate(h))
    );
    assert_eq!(c.len(), 1);
    assert_eq!(port_of(&c, h), 1, "the existing flow is untouched");
}

#[test]
fn flow_limit_refuses_without_evicting() {
    let mut c = MegaflowCache::new(CacheConfig {
        flow_limit: 3,
        ..cfg()
    });
    let mask = Mask::EMPTY.with_exact(Field::TpDst);
    let mut handles = vec![];
    for p in 0..3 {
        handles.push(
            c.insert(
                &Match::new(&key_with(&[(Field::TpDst, p)]), &mask),
                out(1),
                0,
            )
            .unwrap(),
        );
    }
    let other_mask = Mask::EMPTY.with_exact(Field::TpSrc);
    assert_eq!(
        c.insert(
            &Match::new(&key_with(&[(Field::TpSrc, 1)]), &other_mask),
            out(1),
            0
        ),
        Err(InsertError::FlowLimit { limit: 3 })
    );
    assert_eq!(
        c.subtable_count(),
        1,
        "the refused insert leaves no empty subtable"
    );
    assert_eq!(c.len(), 3);
    for h in &handles {
        assert!(c.get(*h).is_some(), "nothing evicted");
    }
    c.remove(handles[0]).unwrap();
    assert!(c
        .insert(
            &Match::new(&key_with(&[(Field::TpSrc, 1)]), &other_mask),
            out(1),
            0
        )
        .is_ok());
}

#[test]
fn slot_reuse_makes_old_handles_and_emc_entries_harmless() {
    let mut c = MegaflowCache::new(cfg());
    let mask = Mask::EMPTY.with_exact(Field::TpDst);
    let ka = key_with(&[(Field::TpDst, 80)]);
    let kb = key_with(&[(Field::TpDst, 81)]);
    let ha = c.insert(&Match::new(&ka, &mask), out(1), 0).unwrap();
    let other = c
        .insert(
            &Match::new(&key_with(&[(Field::TpDst, 1)]), &mask),
            out(9),
            0,
        )
        .unwrap();
    // Fill the EMC with ka -> ha.
    assert_eq!(c.lookup(&ka, 1, Timestamp(1)), Some(ha));
    assert_eq!(c.lookup(&ka, 1, Timestamp(1)), Some(ha));
    assert!(c.counters().emc_hits >= 1);
    c.remove(ha).unwrap();
    // kb reuses ha's slot.
    let hb = c.insert(&Match::new(&kb, &mask), out(2), 0).unwrap();
    assert_ne!(ha, hb);
    assert!(c.actions(ha).is_none());
    // The EMC entry for ka now points at kb's slot: it must not verify.
    assert_eq!(c.lookup(&ka, 1, Timestamp(2)), None);
    assert_eq!(c.lookup(&kb, 1, Timestamp(2)), Some(hb));
    assert!(c.get(other).is_some());
}

#[test]
fn overlapping_megaflows_return_a_matching_one() {
    // Documented policy: overlaps are not searched for; a lookup returns one
    // of the matching flows, never a non-matching one.
    let mut c = MegaflowCache::new(cfg());
    let a = Match::new(
        &key_with(&[(Field::TpDst, 80)]),
        &Mask::EMPTY.with_exact(Field::TpDst),
    );
    let b = Match::new(
        &key_with(&[(Field::Ipv4Dst, 1)]),
        &Mask::EMPTY.with_exact(Field::Ipv4Dst),
    );
    assert!(a.overlaps(&b));
    let ha = c.insert(&a, out(1), 0).unwrap();
    let hb = c.insert(&b, out(2), 0).unwrap();
    let both = key_with(&[(Field::TpDst, 80), (Field::Ipv4Dst, 1)]);
    let got = c.lookup(&both, 1, Timestamp(1)).unwrap();
    assert!(got == ha || got == hb);
    let only_a = key_with(&[(Field::TpDst, 80), (Field::Ipv4Dst, 2)]);
    assert_eq!(c.lookup(&only_a, 1, Timestamp(1)), Some(ha));
}

#[test]
fn ranking_puts_busy_masks_first() {
    let mut c = MegaflowCache::new(CacheConfig {
        emc_entries: 0,
        rerank_interval: 1000,
        ..cfg()
    });
    let masks = [Field::TpSrc, Field::TpDst, Field::Ipv4Src, Field::Ipv4Dst];
    for (i, f) in masks.iter().enumerate() {
        c.insert(
            &Match::new(&key_with(&[(*f, 5)]), &Mask::EMPTY.with_exact(*f)),
            out(i as u32),
            0,
        )
        .unwrap();
    }
    // Traffic only for the last-inserted mask.
    let k = key_with(&[(Field::Ipv4Dst, 5)]);
    for _ in 0..1000 {
        assert!(c.lookup(&k, 1, Timestamp(1)).is_some());
    }
    let before = c.counters().subtable_probes;
    for _ in 0..100 {
        c.lookup(&k, 1, Timestamp(1));
    }
    assert_eq!(
        c.counters().subtable_probes - before,
        100,
        "busy mask probed first after rerank"
    );
}

#[test]
fn tcp_flags_are_ored_and_used_is_max() {
    let mut c = MegaflowCache::new(cfg());
    let mask = Mask::EMPTY.with_exact(Field::TpDst);
    let h = c
        .insert(
            &Match::new(&key_with(&[(Field::TpDst, 22)]), &mask),
            out(1),
            0,
        )
        .unwrap();
    c.lookup(
        &key_with(&[(Field::TpDst, 22), (Field::TcpFlags, 0x002)]),
        1,
        Timestamp(50),
    );
    c.lookup(
        &key_with(&[(Field::TpDst, 22), (Field::TcpFlags, 0x010)]),
        1,
        Timestamp(40),
    );
    let st = c.get(h).unwrap().stats();
    assert_eq!(st.tcp_flags, 0x012);
    assert_eq!(st.used, Timestamp(50));
}

#[test]
fn batch_lookup_matches_single_lookups() {
    let mut c = MegaflowCache::new(cfg());
    let mask = Mask::EMPTY.with_exact(Field::TpDst);
    for p in 0..50u128 {
        c.insert(
            &Match::new(&key_with(&[(Field::TpDst, p * 2)]), &mask),
            out(p as u32),
            0,
        )
        .unwrap();
    }
    let keys: Vec<FlowKey> = (0..100u128)
        .map(|p| key_with(&[(Field::TpDst, p)]))
        .collect();
    let lens = vec![64u32; keys.len()];
    let mut res = vec![None; keys.len()];
    c.lookup_batch(&keys, &lens, Timestamp(1), &mut res);
    for (i, r) in res.iter().enumerate() {
        match r {
            Some(h) => assert_eq!(port_of(&c, *h) as usize * 2, i),
            None => assert_eq!(i % 2, 1),
        }
    }
    assert_eq!(c.counters().misses, 50);
}

/// The non-discriminating part of a flow's mask: with and without an exact
/// in_port (so flows land in per-port classes and in the port-independent
/// one), L2, L3, L4 and VLAN fields, exact and partial.
fn shapes() -> Vec<Mask> {
    vec![
        Mask::EMPTY,
        Mask::EMPTY.with_exact(Field::InPort),
        Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::EthDst),
        Mask::EMPTY
            .with_exact(Field::EthType)
            .with(Field::Ipv4Dst, 0xffff_ff00),
        Mask::EMPTY
            .with_exact(Field::EthType)
            .with_exact(Field::Ipv4Dst)
            .with_exact(Field::TpDst),
        Mask::EMPTY
            .with(Field::TpDst, 0xfff0)
            .with_exact(Field::IpProto),
        Mask::EMPTY
            .with_exact(Field::Ipv6Dst)
            .with_exact(Field::InPort),
        Mask::EMPTY.with(Field::VlanTci, 0x1fff),
        Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::TpSrc),
        Mask::EMPTY.with_exact(Field::EthSrc),
        Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::IpProto)
            .with(Field::TpDst, 0xff00),
        Mask::EMPTY
            .with_exact(Field::InPort)
            .with(Field::Ipv4Dst, 0xffff_0000),
    ]
}

/// Prefix lengths of the discriminator (`ipv4_src`) by class.
const CLASS_LEN: [u32; 7] = [8, 12, 16, 20, 24, 28, 32];

/// The 32-bit mask of a prefix of `len` bits.
fn prefix32(len: u32) -> u64 {
    (u64::from(u32::MAX) << (32 - len)) & u64::from(u32::MAX)
}

/// Disjoint flows by construction: every flow matches a prefix of
/// `ipv4_src` from a prefix-free code, so no packet can match two of them,
/// whatever else their masks hold. The top 4 bits are the class (which
/// fixes the prefix length), the bits below them up to the prefix length a
/// serial number, never reused. A flow's mask is its shape plus its prefix:
/// 12 shapes x 7 lengths make up to 84 subtables.
#[derive(Default)]
struct Codes {
    next: [u64; CLASS_LEN.len()],
}

impl Codes {
    /// The next free (value, length) in `class` or, when it is full, in the
    /// first longer class with room.
    fn alloc(&mut self, class: usize) -> Option<(u64, u32)> {
        (class..CLASS_LEN.len()).find_map(|c| {
            let len = CLASS_LEN[c];
            if self.next[c] >= 1 << (len - 4) {
                return None;
            }
            let v = (c as u64) << 28 | self.next[c] << (32 - len);
            self.next[c] += 1;
            Some((v, len))
        })
    }
}

/// An `ipv4_src` that often falls in allocated codes.
fn arb_src() -> impl Strategy<Value = u64> {
    (0..CLASS_LEN.len(), 0u64..24, any::<u32>()).prop_map(|(c, serial, low)| {
        let len = CLASS_LEN[c];
        let code = (c as u64) << 28 | (serial << (32 - len) & prefix32(len) & 0x0fff_ffff);
        code | (u64::from(low) & !prefix32(len) & u64::from(u32::MAX))
    })
}

fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        (0u64..16, 0u64..3, 0u64..3),
        prop::sample::select(vec![0x0800u64, 0x86dd]),
        (0u64..4, 0u64..40, 0u64..40, 0u64..3),
        0u128..3,
        0u64..0x2000,
        arb_src(),
    )
        .prop_map(
            |((port, dst, src), ty, (ip, tp, sp, proto), v6, tci, v4src)| {
                let mut k = FlowKey::ZERO;
                k.set_in_port(port);
                k.set_eth_dst(dst);
                k.set_eth_src(src);
                k.set_eth_type(ty);
                k.set_ipv4_dst(0x0a00_0000 | (ip << 7) | ip);
                k.set_tp_dst(tp);
                k.set_tp_src(sp);
                k.set_ip_proto(proto);
                k.set_ipv6_dst(v6);
                k.set_vlan_tci(tci);
                k.set_ipv4_src(v4src);
                k
            },
        )
}

#[derive(Debug, Clone)]
enum Op {
    /// A new flow: its shape, the class of its discriminator and its key.
    Insert(usize, usize, FlowKey),
    RemoveNth(usize),
    /// A random packet.
    Lookup(FlowKey),
    /// A packet that agrees with the nth live flow on its mask, with the
    /// other key's bits elsewhere: it must hit that flow.
    LookupNear(usize, FlowKey),
    /// The nth live flow's key with one bit of its mask flipped (the bit is
    /// the index among the mask's set bits, modulo their count).
    LookupFlip(usize, usize),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..shapes().len(), 0..CLASS_LEN.len(), arb_key())
            .prop_map(|(s, c, k)| Op::Insert(s, c, k)),
        1 => any::<usize>().prop_map(Op::RemoveNth),
        2 => arb_key().prop_map(Op::Lookup),
        3 => (any::<usize>(), arb_key()).prop_map(|(n, k)| Op::LookupNear(n, k)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(n, b)| Op::LookupFlip(n, b)),
    ]
}

/// The key `near` with `key`'s bits where `mask` has them.
fn agreeing(key: &FlowKey, mask: &Mask, near: &FlowKey) -> FlowKey {
    let mut w = *near.words();
    for ((w, k), m) in w.iter_mut().zip(key.words()).zip(mask.words()) {
        *w = (k & m) | (*w & !m);
    }
    FlowKey::from_words(w)
}

/// `key` with the `nth` set bit of `mask` (modulo their count) flipped.
fn flip_masked_bit(key: &FlowKey, mask: &Mask, nth: usize) -> FlowKey {
    let set: u32 = mask.words().iter().map(|w| w.count_ones()).sum();
    let mut w = *key.words();
    if set == 0 {
        return FlowKey::from_words(w);
    }
    let mut left = (nth % set as usize) as u32;
    for (wi, m) in w.iter_mut().zip(mask.words()) {
        let n = m.count_ones();
        if left < n {
            let mut bits = *m;
            for _ in 0..left {
                bits &= bits - 1;
            }
            *wi ^= bits & bits.wrapping_neg();
            break;
        }
        left -= n;
    }
    FlowKey::from_words(w)
}

/// What one case reached, for the floors checked over the whole run.
#[derive(Debug, Default, Clone, Copy)]
struct Reach {
    peak_flows: usize,
    peak_subtables: usize,
    ports: usize,
    hits: usize,
}

/// A live flow of the model: handle, id (its output port), packets it must
/// have counted, its match.
type Live = (FlowHandle, u32, u64, Match);

/// A lookup on the cache and the reference; the answers must agree.
fn lookup_both(
    c: &mut MegaflowCache,
    reference: &Linear,
    live: &mut [Live],
    key: &FlowKey,
    now: u64,
) -> Result<Option<u32>, TestCaseError> {
    let want = reference.lookup(key);
    prop_assert!(want.len() <= 1, "flows overlap: {:?}", want);
    let got = c.lookup(key, 10, Timestamp(now)).map(|h| port_of(c, h));
    prop_assert_eq!(got, want.first().copied());
    if let Some(id) = got {
        live.iter_mut().find(|l| l.1 == id).unwrap().2 += 1;
    }
    Ok(got)
}

/// One case: `ops` on a cache and on the linear reference.
fn cache_vs_linear(ops: &[Op], emc: bool) -> Result<Reach, TestCaseError> {
    let shapes = shapes();
    let mut c = MegaflowCache::new(CacheConfig {
        emc_entries: if emc { 64 } else { 0 },
        emc_insert_inv_prob: 2,
        rerank_interval: 13,
        flow_limit: 10_000,
        emc_min_probes: 0,
    });
    let mut codes = Codes::default();
    let mut reference = Linear(vec![]);
    let mut live: Vec<Live> = vec![];
    let mut next_id = 0u32;
    let mut now = 0u64;
    let mut reach = Reach::default();
    let mut ports = std::collections::HashSet::new();
    for op in ops {
        now += 1;
        match op {
            Op::Insert(shape, class, key) => {
                let Some((code, len)) = codes.alloc(*class) else {
                    continue;
                };
                let mask = shapes[*shape].with(Field::Ipv4Src, prefix32(len).into());
                let mut key = *key;
                key.set_ipv4_src(code | (key.ipv4_src() & !prefix32(len)));
                let m = Match::new(&key, &mask);
                prop_assert!(
                    !reference.0.iter().any(|(o, _)| o.overlaps(&m)),
                    "the code is not prefix-free"
                );
                let h = c.insert(&m, out(next_id), 0).unwrap();
                reference.0.push((m, next_id));
                live.push((h, next_id, 0, m));
                if mask.is_exact(Field::InPort) {
                    ports.insert(key.in_port());
                }
                next_id += 1;
            }
            Op::RemoveNth(n) => {
                if live.is_empty() {
                    continue;
                }
                let (h, id, pkts, _) = live.remove(n % live.len());
                let r = c.remove(h).unwrap();
                prop_assert_eq!(r.stats.packets, pkts);
                prop_assert_eq!(r.actions, out(id));
                reference.0.retain(|(_, i)| *i != id);
                prop_assert!(c.remove(h).is_none());
            }
            Op::Lookup(key) => {
                lookup_both(&mut c, &reference, &mut live, key, now)?;
            }
            Op::LookupNear(n, near) => {
                if live.is_empty() {
                    continue;
                }
                let (_, id, _, m) = live[n % live.len()];
                let key = agreeing(m.key(), m.mask(), near);
                let got = lookup_both(&mut c, &reference, &mut live, &key, now)?;
                prop_assert_eq!(got, Some(id), "a packet inside the flow");
                reach.hits += 1;
            }
            Op::LookupFlip(n, bit) => {
                if live.is_empty() {
                    continue;
                }
                let (_, id, _, m) = live[n % live.len()];
                let key = flip_masked_bit(m.key(), m.mask(), *bit);
                let got = lookup_both(&mut c, &reference, &mut live, &key, now)?;
                prop_assert_ne!(got, Some(id), "a packet outside the flow");
            }
        }
        prop_assert_eq!(c.len(), live.len());
        prop_assert_eq!(c.iter().count(), live.len());
        reach.peak_flows = reach.peak_flows.max(live.len());
        reach.peak_subtables = reach.peak_subtables.max(c.subtable_count());
    }
    for (h, id, pkts, m) in &live {
        let f = c.get(*h).unwrap();
        prop_assert_eq!(f.stats().packets, *pkts);
        prop_assert_eq!(f.stats().bytes, *pkts * 10);
        prop_assert_eq!(f.actions(), &out(*id));
        prop_assert_eq!(&f.matched(), m);
        prop_assert_eq!(c.find(&f.matched()), Some(*h));
    }
    reach.ports = ports.len();
    Ok(reach)
}

/// The cache answers exactly what a linear scan answers, through any
/// sequence of inserts, removals and lookups, with hundreds of live flows
/// over dozens of masks and ports; counts and stats stay consistent. Flows
/// never overlap (see [`Codes`]), so every answer is unique. Floors on what
/// the cases reached keep the generator from shrinking to a toy.
#[test]
fn cache_equals_linear_scan() {
    use proptest::test_runner::{Config, TestRunner};
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let reached = std::cell::RefCell::new(Vec::new());
    let strategy = (prop::collection::vec(arb_op(), 400..1200), any::<bool>());
    let result = runner.run(&strategy, |(ops, emc)| {
        let r = cache_vs_linear(&ops, emc)?;
        reached.borrow_mut().push(r);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let mut reached = reached.into_inner();
    assert_eq!(reached.len(), cases as usize);
    reached.sort_by_key(|r| r.peak_flows);
    let median = reached[reached.len() / 2];
    let most_flows = reached.last().map_or(0, |r| r.peak_flows);
    let most_subtables = reached.iter().map(|r| r.peak_subtables).max().unwrap_or(0);
    let most_ports = reached.iter().map(|r| r.ports).max().unwrap_or(0);
    eprintln!(
        "cache_equals_linear_scan: {cases} cases; median case {median:?}; at most \
         {most_flows} flows, {most_subtables} subtables, {most_ports} ports"
    );
    assert!(median.peak_flows >= 150, "median case {median:?}");
    assert!(most_flows >= 250, "at most {most_flows} flows");
    assert!(median.peak_subtables >= 30, "median case {median:?}");
    assert!(most_subtables >= 40, "at most {most_subtables} subtables");
    assert!(most_ports >= 12, "at most {most_ports} ports");
    assert!(median.hits >= 50, "median case {median:?}");
}

#[test]
fn packets_probe_only_their_ports_subtables() {
    let mut c = MegaflowCache::new(CacheConfig {
        emc_entries: 0,
        ..cfg()
    });
    let per_port = Mask::EMPTY.with_exact(Field::InPort);
    // Port 1 has four masks, port 2 one; one port-independent mask.
    for (i, f) in [Field::TpSrc, Field::TpDst, Field::Ipv4Src, Field::Ipv4Dst]
        .iter()
        .enumerate()
    {
        let k = key_with(&[(Field::InPort, 1), (*f, 5)]);
        c.insert(&Match::new(&k, &per_port.with_exact(*f)), out(i as u32), 0)
            .unwrap();
    }
    let k2 = key_with(&[(Field::InPort, 2), (Field::EthDst, 7)]);
    let h2 = c
        .insert(
            &Match::new(&k2, &per_port.with_exact(Field::EthDst)),
            out(20),
            0,
        )
        .unwrap();
    let any = c
        .insert(
            &Match::new(
                &key_with(&[(Field::EthSrc, 9)]),
                &Mask::EMPTY.with_exact(Field::EthSrc),
            ),
            out(30),
            0,
        )
        .unwrap();
    assert_eq!(c.subtable_count(), 6);

    let before = c.counters().subtable_probes;
    assert_eq!(c.lookup(&k2, 1, Timestamp(1)), Some(h2));
    assert_eq!(
        c.counters().subtable_probes - before,
        1,
        "port 2's one subtable only"
    );

    // A port-2 packet that only the port-independent flow matches.
    let mut k = key_with(&[(Field::InPort, 2), (Field::EthSrc, 9)]);
    let before = c.counters().subtable_probes;
    assert_eq!(c.lookup(&k, 1, Timestamp(1)), Some(any));
    assert_eq!(
        c.counters().subtable_probes - before,
        2,
        "own subtable, then the independent one"
    );

    // The same packet on port 3 (no own subtables) still finds it.
    k.set_in_port(3);
    assert_eq!(c.lookup(&k, 1, Timestamp(1)), Some(any));
    // A port-1 miss probes port 1's four and the independent one.
    let before = c.counters().subtable_probes;
    assert_eq!(
        c.lookup(&key_with(&[(Field::InPort, 1)]), 1, Timestamp(1)),
        None
    );
    assert_eq!(c.counters().subtable_probes - before, 5);
    // Mixed batch: each packet is grouped with its own port.
    let keys = [k2, key_with(&[(Field::InPort, 1), (Field::TpDst, 5)]), k2];
    let mut res = [None; 3];
    c.lookup_batch(&keys, &[1, 1, 1], Timestamp(2), &mut res);
    assert_eq!(res[0], Some(h2));
    assert_eq!(res[2], Some(h2));
    assert_eq!(port_of(&c, res[1].unwrap()), 1);
    // Removing the last flow of a port drops its class.
    c.remove(h2).unwrap();
    assert_eq!(c.subtable_count(), 5);
    assert_eq!(c.lookup(&k2, 1, Timestamp(3)), None);
}

#[test]
fn reused_subtable_index_rejects_old_handles() {
    let mut c = MegaflowCache::new(cfg());
    let a = Match::new(
        &key_with(&[(Field::TpDst, 1)]),
        &Mask::EMPTY.with_exact(Field::TpDst),
    );
    let b = Match::new(
        &key_with(&[(Field::TpSrc, 1)]),
        &Mask::EMPTY.with_exact(Field::TpSrc),
    );
    let ha = c.insert(&a, out(1), 0).unwrap();
    c.remove(ha).unwrap();
    // b's subtable takes the freed index and slot 0 with sequence 0 again.
    let hb = c.insert(&b, out(2), 0).unwrap();
    assert_ne!(ha, hb);
    assert!(c.get(ha).is_none());
    assert!(!c.modify(ha, out(9), 0));
    assert!(c.remove(ha).is_none());
    assert_eq!(port_of(&c, hb), 2);
}

#[test]
fn short_slices_never_leave_stale_results() {
    let mut c = MegaflowCache::new(cfg());
    let k = key_with(&[(Field::TpDst, 1)]);
    let h = c
        .insert(
            &Match::new(&k, &Mask::EMPTY.with_exact(Field::TpDst)),
            out(1),
            0,
        )
        .unwrap();
    let mut res = [Some(h); 2];
    c.lookup_batch(
        &[key_with(&[(Field::TpDst, 2)])],
        &[1],
        Timestamp(1),
        &mut res[..1],
    );
    assert_eq!(res, [None, Some(h)]);
}

#[test]
fn the_emc_is_used_only_while_searches_probe_enough_subtables() {
    let mut c = MegaflowCache::new(CacheConfig {
        emc_insert_inv_prob: 1,
        rerank_interval: 64,
        emc_min_probes: 3,
        ..CacheConfig::default()
    });
    // One mask: every search probes one subtable; after a re-ranking the
    // EMC is left alone (no hits, nothing inserted).
    let one = Mask::exact_fields(&[Field::TpDst]);
    let k = |p: u128| key_with(&[(Field::TpDst, p)]);
    for p in 0..8 {
        c.insert(&Match::new(&k(p), &one), out(1), 0).unwrap();
    }
    assert!(c.emc_in_use(), "until it has measured");
    for i in 0..64 {
        assert!(c.lookup(&k(i % 8), 1, Timestamp(1)).is_some());
    }
    assert!(!c.emc_in_use());
    let before = c.counters().emc_hits;
    for i in 0..200 {
        assert!(c.lookup(&k(i % 8), 1, Timestamp(2)).is_some());
    }
    assert_eq!(c.counters().emc_hits, before, "not looked up");
    // Five more masks that the packets must get past: searches probe
    // more, the EMC comes back and hits.
    for (i, f) in [
        Field::TpSrc,
        Field::IpProto,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::EthType,
    ]
    .into_iter()
    .enumerate()
    {
        let m = Mask::exact_fields(&[f, Field::TpDst]);
        let mut key = k(1000 + i as u128);
        key.set_field(f, 7);
        c.insert(&Match::new(&key, &m), out(2), 0).unwrap();
    }
    // Lookups that hit the first mask's flows only after the others
    // (re-ranking puts the busy subtable first, so look up misses too).
    for i in 0..256 {
        let _ = c.lookup(&k(100 + i % 8), 1, Timestamp(3));
    }
    assert!(c.emc_in_use(), "probes: {:?}", c.counters());
    for i in 0..64 {
        assert!(c.lookup(&k(i % 8), 1, Timestamp(4)).is_some());
    }
    assert!(c.counters().emc_hits > before, "used again");
}

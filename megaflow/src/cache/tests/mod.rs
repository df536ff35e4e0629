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

/// A small universe of masks and values so random flows and packets collide
/// often enough to exercise every path.
fn arb_mask() -> impl Strategy<Value = Mask> {
    prop::sample::select(vec![
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
    ])
}

fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        0u64..3,
        0u64..3,
        prop::sample::select(vec![0x0800u64, 0x86dd]),
        0u64..4,
        0u64..40,
        0u64..3,
        0u128..3,
        0u64..0x2000,
    )
        .prop_map(|(port, dst, ty, ip, tp, proto, v6, tci)| {
            let mut k = FlowKey::ZERO;
            k.set_in_port(port);
            k.set_eth_dst(dst);
            k.set_eth_type(ty);
            k.set_ipv4_dst(0x0a00_0000 | (ip << 7) | ip);
            k.set_tp_dst(tp);
            k.set_ip_proto(proto);
            k.set_ipv6_dst(v6);
            k.set_vlan_tci(tci);
            k
        })
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Mask, FlowKey),
    RemoveNth(usize),
    Lookup(FlowKey),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (arb_mask(), arb_key()).prop_map(|(m, k)| Op::Insert(m, k)),
        1 => any::<usize>().prop_map(Op::RemoveNth),
        4 => arb_key().prop_map(Op::Lookup),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With non-overlapping flows, the cache answers exactly what a linear
    /// scan answers, through any sequence of inserts, removals and lookups;
    /// counts and stats stay consistent.
    #[test]
    fn cache_equals_linear_scan(ops in prop::collection::vec(arb_op(), 1..300), emc in any::<bool>()) {
        let mut c = MegaflowCache::new(CacheConfig {
            emc_entries: if emc { 64 } else { 0 },
            emc_insert_inv_prob: 2,
            rerank_interval: 13,
            flow_limit: 1000,
        });
        let mut reference = Linear(vec![]);
        let mut live: Vec<(FlowHandle, u32, u64)> = vec![]; // handle, id, packets expected
        let mut next_id = 0u32;
        let mut now = 0u64;
        for op in ops {
            now += 1;
            match op {
                Op::Insert(mask, key) => {
                    let m = Match::new(&key, &mask);
                    if reference.0.iter().any(|(o, _)| o.overlaps(&m)) {
                        continue; // keep the flow set non-overlapping
                    }
                    let h = c.insert(&m, out(next_id), 0).unwrap();
                    reference.0.push((m, next_id));
                    live.push((h, next_id, 0));
                    next_id += 1;
                }
                Op::RemoveNth(n) => {
                    if live.is_empty() { continue; }
                    let (h, id, pkts) = live.remove(n % live.len());
                    let r = c.remove(h).unwrap();
                    prop_assert_eq!(r.stats.packets, pkts);
                    prop_assert_eq!(r.actions, out(id));
                    reference.0.retain(|(_, i)| *i != id);
                    prop_assert!(c.remove(h).is_none());
                }
                Op::Lookup(key) => {
                    let want = reference.lookup(&key);
                    prop_assert!(want.len() <= 1);
                    let got = c.lookup(&key, 10, Timestamp(now)).map(|h| port_of(&c, h));
                    prop_assert_eq!(got, want.first().copied());
                    if let Some(id) = got {
                        live.iter_mut().find(|l| l.1 == id).unwrap().2 += 1;
                    }
                }
            }
            prop_assert_eq!(c.len(), live.len());
            prop_assert_eq!(c.iter().count(), live.len());
        }
        for (h, id, pkts) in &live {
            let f = c.get(*h).unwrap();
            prop_assert_eq!(f.stats().packets, *pkts);
            prop_assert_eq!(f.stats().bytes, *pkts * 10);
            prop_assert_eq!(f.actions(), &out(*id));
            prop_assert_eq!(c.find(&f.matched()), Some(*h));
        }
    }
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

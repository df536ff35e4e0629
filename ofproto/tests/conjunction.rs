//! Conjunctive matches (`conjunction(ID,K/N)`, `conj_id`): a table's answer
//! against a brute-force model of Open vSwitch's semantics
//! (`lib/classifier.c`), and the soundness of the bits a lookup records.

use megaflow::{Field, FlowKey, Match, PortNo, Timestamp};
use ofproto::rule::{Instructions, OfAction, OfPort, RuleSpec};
use ofproto::{FlowTables, Priority, TableId, Wildcards};
use proptest::prelude::*;

/// One rule of a random table: what it matches and what kind it is.
#[derive(Clone, Debug)]
enum Kind {
    /// An ordinary flow; its output port names it.
    Hard,
    /// `conjunction(id, clause/n)` for each entry.
    Soft(Vec<(u32, u8, u8)>),
    /// `conj_id=ID` (plus the match), an ordinary flow.
    ConjId(u32),
}

#[derive(Clone, Debug)]
struct R {
    prio: u16,
    src: Option<u8>,
    dst_port: Option<u8>,
    reg0: Option<u8>,
    kind: Kind,
}

const SRCS: [u32; 3] = [0xc612_0001, 0xc612_0002, 0xc612_0003];
const PORTS: [u16; 3] = [22, 80, 443];

fn rule_strategy() -> impl Strategy<Value = R> {
    // One clause count per id (flows that disagree on it leave the answer
    // to the order they are met in, in Open vSwitch too).
    let clause = (1u32..4).prop_flat_map(|id| {
        let n = 2 + (id % 2) as u8;
        (Just(id), 0..n, Just(n))
    });
    let kind = prop_oneof![
        3 => Just(Kind::Hard),
        5 => proptest::collection::vec(clause, 1..3).prop_map(Kind::Soft),
        2 => (1u32..4).prop_map(Kind::ConjId),
    ];
    (
        prop_oneof![Just(10u16), Just(20), Just(30)],
        // Sparse matches: a field few rules read is one whose bits only
        // the lookups that met those rules can record.
        proptest::option::weighted(0.35, 0u8..3),
        proptest::option::weighted(0.35, 0u8..3),
        proptest::option::weighted(0.25, 0u8..3),
        kind,
    )
        .prop_map(|(prio, src, dst_port, reg0, kind)| R {
            prio,
            src,
            dst_port,
            reg0,
            kind,
        })
}

fn rule_match(r: &R) -> Match {
    let mut m = Match::catch_all();
    m.set_field_masked(Field::EthType, 0x0800, 0xffff);
    m.set_field_masked(Field::IpProto, 6, 0xff);
    if let Some(s) = r.src {
        m.set_field_masked(Field::Ipv4Src, SRCS[s as usize].into(), u32::MAX.into());
    }
    if let Some(p) = r.dst_port {
        m.set_field_masked(Field::TpDst, PORTS[p as usize].into(), 0xffff);
    }
    if let Some(v) = r.reg0 {
        m.set_field_masked(Field::Reg0, v.into(), u32::MAX.into());
    }
    if let Kind::ConjId(id) = r.kind {
        m.set_field_masked(Field::ConjId, id.into(), u32::MAX.into());
    }
    m
}

/// The table (0) of `rules`; rule `i`'s output port is `i + 1`. Rules
/// with an identical match and priority replace earlier ones, as adds do.
fn build(rules: &[R]) -> FlowTables {
    let mut t = FlowTables::new();
    for (i, r) in rules.iter().enumerate() {
        let mut spec = RuleSpec::new(TableId(0), Priority(r.prio), rule_match(r));
        spec.instructions = match &r.kind {
            Kind::Soft(c) => Instructions {
                apply: c
                    .iter()
                    .map(|&(id, clause, n_clauses)| OfAction::Conjunction {
                        id,
                        clause,
                        n_clauses,
                    })
                    .collect(),
                ..Default::default()
            },
            _ => Instructions {
                apply: vec![OfAction::Output {
                    port: OfPort::Port(PortNo(i as u32 + 1)),
                    max_len: 0,
                }],
                ..Default::default()
            },
        };
        t.add(spec, Timestamp::from_millis(1)).expect("valid rule");
    }
    t
}

/// The rules still in the table after replacements (by index).
fn live(rules: &[R]) -> Vec<usize> {
    (0..rules.len())
        .filter(|&i| {
            !rules[i + 1..].iter().any(|later| {
                later.prio == rules[i].prio && rule_match(later) == rule_match(&rules[i])
            })
        })
        .collect()
}

/// Every answer Open vSwitch's semantics allow for `key` (several where
/// equal-priority rules overlap or several conjunctions complete at once:
/// the order is then unspecified), as rule indexes; empty for no match.
fn model(rules: &[R], key: &FlowKey) -> Vec<usize> {
    let alive = live(rules);
    let matching = |k: &FlowKey| -> Vec<usize> {
        alive
            .iter()
            .copied()
            .filter(|&i| rule_match(&rules[i]).matches(k))
            .collect()
    };
    let best_hard = |k: &FlowKey| -> Vec<usize> {
        let hard: Vec<usize> = matching(k)
            .into_iter()
            .filter(|&i| !matches!(rules[i].kind, Kind::Soft(_)))
            .collect();
        let top = hard.iter().map(|&i| rules[i].prio).max();
        hard.into_iter()
            .filter(|&i| Some(rules[i].prio) == top)
            .collect()
    };
    let hard = best_hard(key);
    let hard_prio = hard.first().map(|&i| rules[i].prio);
    let mut levels: Vec<u16> = matching(key)
        .into_iter()
        .filter(|&i| matches!(rules[i].kind, Kind::Soft(_)))
        .map(|i| rules[i].prio)
        .filter(|&p| hard_prio.is_none_or(|h| p > h))
        .collect();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    for level in levels {
        // Per conjunction id: the clause count (the first flow's) and
        // the clauses seen.
        let mut ids: Vec<(u32, u8, u64)> = Vec::new();
        for i in matching(key) {
            let Kind::Soft(c) = &rules[i].kind else {
                continue;
            };
            if rules[i].prio != level {
                continue;
            }
            for &(id, clause, n) in c {
                match ids.iter_mut().find(|e| e.0 == id) {
                    Some(e) => e.2 |= 1 << clause,
                    None => ids.push((id, n, 1 << clause)),
                }
            }
        }
        let mut answers = Vec::new();
        for (id, n, seen) in ids {
            if seen & ((1u64 << n) - 1) == (1u64 << n) - 1 {
                let mut k = *key;
                k.set_field(Field::ConjId, id.into());
                answers.extend(best_hard(&k));
            }
        }
        if !answers.is_empty() {
            return answers;
        }
    }
    hard
}

fn packet(src: u8, port: u16, reg0: u8) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ipv4_src(SRCS[src as usize % 3].into());
    k.set_tp_dst(port.into());
    k.set_reg0(reg0.into());
    k
}

fn answer(t: &FlowTables, key: &FlowKey, wc: &mut Wildcards) -> Option<usize> {
    let (_, r) = t.table(TableId(0))?.lookup(key, wc)?;
    match r.spec.instructions.apply.first() {
        Some(OfAction::Output {
            port: OfPort::Port(p),
            ..
        }) => Some(p.0 as usize - 1),
        other => panic!("a lookup answered with {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// The answer is one the model allows, and every packet that agrees
    /// with the recorded bits gets the same answer.
    #[test]
    fn conjunctive_lookups_follow_open_vswitch_and_record_enough(
        rules in proptest::collection::vec(rule_strategy(), 1..14),
        packets in proptest::collection::vec((0u8..3, 0usize..4, 0u8..3), 1..6),
        others in proptest::collection::vec((0u8..3, 0usize..4, 0u8..3, any::<u32>()), 8),
    ) {
        let t = build(&rules);
        let port = |i: usize| PORTS.get(i).copied().unwrap_or(8080);
        for &(s, p, r0) in &packets {
            let key = packet(s, port(p), r0);
            let mut wc = Wildcards::new();
            let got = answer(&t, &key, &mut wc);
            let allowed = model(&rules, &key);
            match got {
                Some(i) => prop_assert!(allowed.contains(&i),
                    "answer {i} not among {allowed:?} for {key:?}\n{rules:#?}"),
                None => prop_assert!(allowed.is_empty(), "no answer, model says {allowed:?}"),
            }
            let mut mask = *wc.mask();
            mask.set_field(Field::ConjId, 0);
            for &(s2, p2, r2, noise) in &others {
                // A packet taking the other's bits wherever the mask
                // leaves them free (and noise in the port's low bits).
                let other = packet(s2, port(p2) ^ (noise as u16 & 0x3), r2);
                let mut w = *key.words();
                for (i, x) in w.iter_mut().enumerate() {
                    let m = mask.words()[i];
                    *x = (*x & m) | (other.words()[i] & !m);
                }
                let q = FlowKey::from_words(w);
                prop_assert_eq!(answer(&t, &q, &mut Wildcards::new()), got,
                    "unsound: {:?} and {:?} agree on {:?}", key, q, mask);
            }
        }
    }
}

/// OVN's shape: an address set and a port set at one priority.
#[test]
fn an_address_set_and_a_port_set_select_the_conj_id_flow() {
    let hard = |prio, src, dst_port| R {
        prio,
        src,
        dst_port,
        reg0: None,
        kind: Kind::Hard,
    };
    let soft = |src, dst_port, clause| R {
        prio: 20,
        src,
        dst_port,
        reg0: None,
        kind: Kind::Soft(vec![(9, clause, 2)]),
    };
    let rules = vec![
        soft(Some(0), None, 0),
        soft(Some(1), None, 0),
        soft(None, Some(1), 1),
        soft(None, Some(2), 1),
        R {
            kind: Kind::ConjId(9),
            ..hard(20, None, None)
        },
        hard(10, None, None),
    ];
    let t = build(&rules);
    let at = |s, p| answer(&t, &packet(s, p, 0), &mut Wildcards::new());
    assert_eq!(at(0, 80), Some(4), "source 1 and port 80: the conj_id flow");
    assert_eq!(at(1, 443), Some(4));
    assert_eq!(at(2, 80), Some(5), "source not in the set: the catch-all");
    assert_eq!(at(0, 22), Some(5), "port not in the set");
    // A hard flow at the conjunction's priority wins the tie.
    let mut more = rules.clone();
    more.push(hard(20, Some(0), None));
    assert_eq!(
        answer(&build(&more), &packet(0, 80, 0), &mut Wildcards::new()),
        Some(6)
    );
    // The second lookup takes the best flow for conj_id=9, which may be
    // one that ignores conj_id: a conj_id flow below the catch-all loses.
    let mut low = rules.clone();
    low[4].prio = 5;
    assert_eq!(
        answer(&build(&low), &packet(0, 80, 0), &mut Wildcards::new()),
        Some(5)
    );
    // Without port 443 in the set, 443 falls to the catch-all (index 4
    // once the soft flow is gone).
    let mut fewer = rules.clone();
    fewer.remove(3);
    let t = build(&fewer);
    assert_eq!(
        answer(&t, &packet(0, 443, 0), &mut Wildcards::new()),
        Some(4)
    );
    assert_eq!(
        answer(&t, &packet(0, 80, 0), &mut Wildcards::new()),
        Some(3)
    );
}

//! Invariants of the table under random traffic: one connection per
//! tuple and zone, counts that add up, translated reply tuples never
//! shared, nothing left after everything expires; and the same under
//! threads racing on the same connections.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::*;
use conntrack::state::*;
use conntrack::{AddrRange, Config, CtSpec, NatKind, NatRange, NatSpec, Tracker};
use proptest::prelude::*;

const HOSTS: [&str; 4] = ["198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.4"];

#[derive(Debug, Clone)]
struct Op {
    src: usize,
    dst: usize,
    sport: u16,
    kind: u8,
    zone: u16,
    commit: bool,
    nat: bool,
    dt: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0..4usize,
        0..4usize,
        1..6u16,
        0..4u8,
        0..3u16,
        any::<bool>(),
        any::<bool>(),
        0..20_000u64,
    )
        .prop_map(|(src, dst, sport, kind, zone, commit, nat, dt)| Op {
            src,
            dst,
            sport,
            kind,
            zone,
            commit,
            nat,
            dt,
        })
}

fn frame(o: &Op) -> Vec<u8> {
    let (s, d) = (HOSTS[o.src], HOSTS[o.dst]);
    match o.kind {
        0 => udp(s, d, o.sport, 53),
        1 => tcp(s, d, o.sport, 80, SYN_, 1000, 0, 0),
        2 => tcp(s, d, o.sport, 80, ACK_, 1000, 1, 0),
        _ => icmp(s, d, 8, 0, o.sport),
    }
}
const SYN_: u8 = SYN;
const ACK_: u8 = ACK;

fn snat_spec(zone: u16) -> CtSpec {
    CtSpec {
        nat: Some(NatSpec {
            range: Some(NatRange {
                kind: NatKind::Src,
                addrs: Some(AddrRange {
                    min: v4("198.19.9.1"),
                    max: v4("198.19.9.2"),
                    v6: false,
                }),
                port_min: 1000,
                port_max: 1003,
                random: false,
                hash: false,
                persistent: false,
            }),
        }),
        ..commit(zone)
    }
}

fn check(t: &Tracker, now: u64) {
    let d = t.dump(None, 0);
    assert_eq!(d.len(), t.len(), "every counted connection is in the table");
    let mut keys = HashSet::new();
    for e in &d {
        assert!(keys.insert((e.zone, e.orig)), "orig tuple twice: {e:?}");
        if e.reply != e.orig {
            assert!(keys.insert((e.zone, e.reply)), "reply tuple shared: {e:?}");
        }
    }
    let zones: u32 = (0..3).map(|z| t.zone_len(z)).sum();
    assert_eq!(zones as usize, t.len());
    let _ = now;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_table_keeps_one_connection_per_tuple_and_counts_that_add_up(ops in proptest::collection::vec(op(), 1..120)) {
        let t = Tracker::new(Config { seed: Some(1), ..Config::default() });
        t.set_limits(None, &[(2, 5)]);
        let mut now = 0;
        for o in &ops {
            now += o.dt;
            let mut f = frame(o);
            let spec = if o.nat && o.commit { snat_spec(o.zone) } else if o.commit { commit(o.zone) } else { zone(o.zone) };
            let m = ct(&t, &mut f, &spec, now);
            prop_assert!(m.state & TRK != 0);
            prop_assert!(m.state & INV == 0 || m.state & (NEW | EST) == 0, "{:#x}", m.state);
            prop_assert!(t.zone_len(2) <= 5);
            if m.state & SNAT != 0 {
                let (src, _, sport, _) = tuple_of(&f);
                prop_assert!(src == v4("198.19.9.1") || src == v4("198.19.9.2"));
                prop_assert!(o.kind == 3 || (1000..=1003).contains(&sport));
                prop_assert!(conntrack::packet::checksums_ok(&f, &parsed(&f)));
            }
            check(&t, now);
            if o.dt > 15_000 {
                t.sweep(now, 1 << 20);
                check(&t, now);
            }
        }
        t.sweep(now + 100_000_000, 1 << 20);
        prop_assert!(t.is_empty());
        prop_assert!((0..3).all(|z| t.zone_len(z) == 0));
    }
}

#[test]
fn threads_racing_on_the_same_connections_create_each_once() {
    let t = Arc::new(Tracker::new(Config {
        shards: 8,
        ..Config::default()
    }));
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                for round in 0..3u64 {
                    for i in 0..2000u16 {
                        // Every thread sends the same 2,000 flows, each
                        // also in its reply direction.
                        let (a, b) = ("198.18.2.1", "198.18.2.2");
                        let mut f = if (i + k) % 2 == 0 {
                            udp(a, b, 1000 + i, 53)
                        } else {
                            udp(b, a, 53, 1000 + i)
                        };
                        ct(&t, &mut f, &commit(0), round);
                    }
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert_eq!(
        t.len(),
        2000,
        "one connection per flow, whichever thread and direction came first"
    );
    assert_eq!(t.dump(None, 0).len(), 2000);
}

#[test]
fn threads_translating_at_once_never_share_a_reply_tuple() {
    let t = Arc::new(Tracker::new(Config {
        shards: 8,
        ..Config::default()
    }));
    let threads: Vec<_> = (0..4u16)
        .map(|k| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                let spec = CtSpec {
                    nat: Some(NatSpec {
                        range: Some(NatRange {
                            kind: NatKind::Src,
                            addrs: Some(AddrRange {
                                min: v4("198.19.9.1"),
                                max: v4("198.19.9.1"),
                                v6: false,
                            }),
                            port_min: 2000,
                            port_max: 2999,
                            random: k % 2 == 0,
                            hash: false,
                            persistent: false,
                        }),
                    }),
                    ..commit(0)
                };
                let mut ok = 0;
                for i in 0..400u16 {
                    let mut f = udp(HOSTS[k as usize], "198.18.3.3", 1000 + i, 53);
                    if ct(&t, &mut f, &spec, 0).state & SNAT != 0 {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let ok: u32 = threads.into_iter().map(|th| th.join().unwrap()).sum();
    let d = t.dump(None, 0);
    assert_eq!(
        ok, 1000,
        "1,000 ports for 1,600 connections: every port used once"
    );
    assert_eq!(d.len(), 1000, "an exhausted commit stores nothing");
    let replies: HashSet<_> = d
        .iter()
        .filter(|e| e.reply.dst == v4("198.19.9.1"))
        .map(|e| e.reply)
        .collect();
    assert_eq!(replies.len(), 1000);
    assert_eq!(t.stats().nat_exhausted, 600);
}

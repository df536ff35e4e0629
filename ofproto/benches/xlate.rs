//! Translation benchmark: `cargo bench -p ofproto --bench xlate`.
//!
//! Prints `bench: <name> <value> <unit>` lines (median of rounds):
//! - `ofproto.xlate.acl1k` Kxlates/s: a 3-table pipeline (table 0 admits
//!   by in_port, table 1 is a 1,000-rule ACL over IPv4 src/dst prefixes and
//!   TCP/UDP ports, table 2 forwards by destination MAC), random packets;
//! - `ofproto.xlate.normal` Kxlates/s: one `actions=normal` rule, 10,000
//!   learned MACs, packets between random learned MACs;
//! - `ofproto.megaflows.acl1k`: megaflows created by 100,000 random packets
//!   through the ACL pipeline (each packet first looked up in a megaflow
//!   cache; a miss translates and installs) — lower is better;
//! - `ofproto.xlate.acl1k_vs_reference` ratio: the same ACL table's
//!   lookups against the linear reference classifier, measured in the same
//!   run, for scale;
//! - `ofproto.megaflow.acl1k_wildcarded_bits` mean wildcarded bits of the
//!   ACL pipeline's megaflows (of 1,408; higher is wider).
//!
//! Packets: half draw their addresses inside a rule's prefix (random host
//! bits), half uniformly; ports from the rules' ports or random.

use std::hint::black_box;
use std::time::Instant;

use megaflow::{Actions, CacheConfig, FlowKey, Match, MegaflowCache, PortNo, Timestamp};
use ofproto::classifier::reference::ReferenceClassifier;
use ofproto::mac::MacLearn;
use ofproto::rule::{OfAction, OfPort, RuleSpec};
#[path = "../fixtures/workload.rs"]
mod workload;
use ofproto::{Bridge, Priority, RuleId, TableId, Wildcards};
use workload::{acl_bridge, acl_packet, acl_rules, mac, Rng};

const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench(name: &str, value: f64, unit: &str) {
    println!("bench: {name} {value:.1} {unit}");
}

/// Kxlates/s of translating every key, median of rounds.
fn xlate_rate(br: &Bridge, keys: &[FlowKey]) -> f64 {
    let now = Timestamp(1);
    let rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            let mut n = 0usize;
            for k in keys {
                n += black_box(br.translate(black_box(k), now)).actions.len();
            }
            black_box(n);
            keys.len() as f64 / t.elapsed().as_secs_f64() / 1e3
        })
        .collect();
    median(rates)
}

fn main() {
    let mut r = Rng::new(42);
    let rules = acl_rules(&mut r);
    let br = acl_bridge(&rules);
    let keys: Vec<FlowKey> = (0..50_000).map(|_| acl_packet(&mut r, &rules)).collect();
    bench("ofproto.xlate.acl1k", xlate_rate(&br, &keys), "Kxlates/s");

    // NORMAL with 10,000 learned MACs.
    let mut nb = Bridge::with_ports(1..=8);
    let mut s = RuleSpec::new(TableId(0), Priority(0), Match::catch_all());
    s.instructions.apply.push(OfAction::Output {
        port: OfPort::Normal,
        max_len: 0,
    });
    nb.apply_flow_mod(&ofproto::FlowMod::add(s), Timestamp(0))
        .expect("normal rule");
    let learned: Vec<(u64, u32)> = (0..10_000u64)
        .map(|i| (mac(0x10_0000 + i), 1 + (i % 8) as u32))
        .collect();
    for &(m, p) in &learned {
        nb.learn(
            &[MacLearn {
                bridge: ofproto::BridgeNo::MAIN,
                vlan: 0,
                mac: m,
                port: PortNo(p),
            }],
            Timestamp(1),
        );
    }
    let nkeys: Vec<FlowKey> = (0..50_000)
        .map(|_| {
            let (src, sp) = learned[r.below(learned.len() as u64) as usize];
            let (dst, _) = learned[r.below(learned.len() as u64) as usize];
            let mut k = FlowKey::ZERO;
            k.set_in_port(sp.into());
            k.set_eth_src(src);
            k.set_eth_dst(dst);
            k.set_eth_type(0x0800);
            k.set_ipv4_src(r.next_u64() & 0xffff_ffff);
            k
        })
        .collect();
    bench("ofproto.xlate.normal", xlate_rate(&nb, &nkeys), "Kxlates/s");

    // Megaflows per 100,000 packets: a packet covered by an installed
    // megaflow is a hit; a miss translates and installs.
    let mut cache = MegaflowCache::new(CacheConfig {
        flow_limit: 1_000_000,
        ..CacheConfig::default()
    });
    let mut wild = 0u64;
    let mut created = 0u64;
    for _ in 0..100_000 {
        let k = acl_packet(&mut r, &rules);
        if cache.lookup(&k, 0, Timestamp(1)).is_some() {
            continue;
        }
        let t = br.translate(&k, Timestamp(1));
        wild += u64::from(t.mask.words().iter().map(|w| w.count_zeros()).sum::<u32>());
        if cache
            .insert(&t.megaflow(&k), Actions::new(t.actions), 0)
            .is_ok()
        {
            created += 1;
        }
    }
    bench("ofproto.megaflows.acl1k", created as f64, "megaflows/100k");
    bench(
        "ofproto.megaflow.acl1k_wildcarded_bits",
        wild as f64 / created.max(1) as f64,
        "bits",
    );

    // The ACL table alone: staged classifier vs linear reference.
    let acl = br.tables().table(TableId(1)).expect("table 1");
    let mut reference = ReferenceClassifier::new();
    for (id, rule) in acl.rules() {
        reference.insert(id, &rule.spec.matched, rule.spec.priority);
    }
    let probe: Vec<FlowKey> = keys[..5000].to_vec();
    let time = |f: &dyn Fn(&FlowKey) -> Option<RuleId>| {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    for k in &probe {
                        black_box(f(black_box(k)));
                    }
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        )
    };
    let fast = time(&|k| acl.classifier().lookup(k, &mut Wildcards::new()));
    let slow = time(&|k| reference.lookup(k, &mut Wildcards::new()));
    bench("ofproto.xlate.acl1k_vs_reference", slow / fast, "x");
}

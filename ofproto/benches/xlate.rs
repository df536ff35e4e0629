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

use megaflow::{Actions, CacheConfig, Field, FlowKey, Match, MegaflowCache, PortNo, Timestamp};
use ofproto::classifier::reference::ReferenceClassifier;
use ofproto::normal::MacLearn;
use ofproto::rule::{Instructions, OfAction, OfPort, RuleSpec};
use ofproto::{Bridge, Priority, RuleId, TableId, Wildcards};

const ROUNDS: usize = 5;
const ACL_RULES: usize = 1000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn prefix(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

const SERVICE_PORTS: [u16; 8] = [22, 53, 80, 123, 443, 3306, 5432, 8080];
const MACS: u64 = 64;

fn mac(i: u64) -> u64 {
    0x0200_0000_0000 | i
}

/// One ACL rule's shape, kept to draw matching packets.
#[derive(Clone, Copy)]
struct AclRule {
    src: u32,
    src_len: u32,
    dst: u32,
    dst_len: u32,
    proto: u8,
    dport: Option<(u16, u16)>,
}

fn acl_rules(r: &mut Rng) -> Vec<AclRule> {
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

fn acl_match(a: &AclRule) -> Match {
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

fn acl_bridge(rules: &[AclRule]) -> Bridge {
    let mut br = Bridge::with_ports(1..=4);
    let now = Timestamp(0);
    let add = |br: &mut Bridge, t: u8, prio: u16, m: Match, ins: Instructions| {
        let mut s = RuleSpec::new(TableId(t), Priority(prio), m);
        s.instructions = ins;
        br.tables.add(s, now).expect("bench rule");
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

fn acl_packet(r: &mut Rng, rules: &[AclRule]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1 + r.below(4));
    k.set_eth_src(mac(r.below(MACS)));
    k.set_eth_dst(mac(r.below(MACS)));
    k.set_eth_type(0x0800);
    k.set_ip_ttl(64);
    let a = rules[r.below(rules.len() as u64) as usize];
    let inside = r.below(2) == 0;
    let host = |r: &mut Rng, base: u32, len: u32| (base & prefix(len)) | (r.next() as u32 & !prefix(len));
    if inside {
        k.set_ipv4_src(host(r, a.src, a.src_len).into());
        k.set_ipv4_dst(host(r, a.dst, a.dst_len).into());
        k.set_ip_proto(a.proto.into());
        let dport = match a.dport {
            Some((p, m)) => (p & m) | (r.next() as u16 & !m),
            None => r.next() as u16,
        };
        k.set_tp_dst(dport.into());
    } else {
        k.set_ipv4_src(r.next() & 0xffff_ffff);
        k.set_ipv4_dst(r.next() & 0xffff_ffff);
        k.set_ip_proto(if r.below(3) == 0 { 17 } else { 6 });
        k.set_tp_dst(u64::from(SERVICE_PORTS[r.below(8) as usize]));
    }
    k.set_tp_src(1024 + r.below(60000));
    k
}

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
    let mut r = Rng(42);
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
    nb.tables.add(s, Timestamp(0)).expect("normal rule");
    let learned: Vec<(u64, u32)> = (0..10_000u64).map(|i| (mac(0x10_0000 + i), 1 + (i % 8) as u32)).collect();
    for &(m, p) in &learned {
        nb.mac.learn(
            MacLearn {
                vlan: 0,
                mac: m,
                port: PortNo(p),
            },
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
            k.set_ipv4_src(r.next() & 0xffff_ffff);
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
        if cache.insert(&t.megaflow(&k), Actions::new(t.actions), 0).is_ok() {
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
    let acl = br.tables.table(TableId(1)).expect("table 1");
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

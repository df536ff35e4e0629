//! Offload benchmark: `cargo bench -p offload --bench sim`.
//!
//! Prints `bench: <name> <value> <unit>` lines (median of rounds):
//! - `offload.prm.encode` Mops: encoding a typical 5-tuple megaflow (in_port
//!   as misc.source_port, eth_type, ip_proto, IPv4 src/dst, TCP ports) into
//!   `fte_match_param` mask and value bytes, a fresh `Encoded` per call;
//! - `offload.prm.encode_into` Mops: the same into a reused buffer;
//! - `offload.sim.rule_insert` Krules/s: 1,000,000 5-tuple rules, each with
//!   dest_vport and its own flow counter, into one matcher of a fresh sim
//!   eSwitch, each value built from a template in the loop;
//! - `offload.sim.process_100k` Mpps: 64-byte packets of 12,500 flows in
//!   random order through an FDB of 100,000 rules spread over 8 matchers of
//!   different masks (root jump → level 1), each rule counter + dest_vport,
//!   in batches of 32, one thread;
//! - `offload.sim.process_8k` Mpps: the same with 8,000 rules (1,000 flows),
//!   the compute cost without the memory stalls of the large tables.

use std::hint::black_box;
use std::time::Instant;

use megaflow::frame::{FrameSpec, L4};
use megaflow::{Field, FlowKey, Mask, Match, PortNo};
use offload::dr::{ActionId, ActionSpec, CounterBulkId, DomainId, DomainType, DrBackend, TableId};
use offload::prm::PortMap;
use offload::prm::{encode, encode_into, Encoded, PortTable, PrmField, SourcePortMode};
use offload::sim::{Output, SimBackend, SimConfig};
use offload::Vport;

const ROUNDS: usize = 5;
const N: u32 = 2_000_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut ports = PortTable::new();
    for i in 1..=8u32 {
        ports.insert(PortNo(i), Vport(i as u16));
    }
    let mut k = FlowKey::ZERO;
    k.set_in_port(4);
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ipv4_src(0x0a00_0001);
    k.set_ipv4_dst(0x0a00_0002);
    k.set_tp_dst(80);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::Ipv4Src)
        .with_exact(Field::Ipv4Dst)
        .with_exact(Field::TpSrc)
        .with_exact(Field::TpDst);
    let matches: Vec<Match> = (0..1024u64)
        .map(|i| {
            let mut kk = k;
            kk.set_tp_src(1024 + i);
            Match::new(&kk, &mask)
        })
        .collect();
    let mode = SourcePortMode::MiscSourcePort;
    let rate = |f: &mut dyn FnMut(&Match) -> u8| {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    let mut sum = 0u32;
                    for i in 0..N {
                        sum += u32::from(f(black_box(&matches[(i & 1023) as usize])));
                    }
                    black_box(sum);
                    f64::from(N) / t.elapsed().as_secs_f64() / 1e6
                })
                .collect(),
        )
    };
    let by_value = rate(&mut |m| encode(m, mode, &ports).map_or(0, |e| e.value()[21]));
    println!("bench: offload.prm.encode {by_value:.1} Mops");
    let mut e = Encoded::EMPTY;
    let into = rate(&mut |m| encode_into(m, mode, &ports, &mut e).map_or(0, |()| e.value()[21]));
    println!("bench: offload.prm.encode_into {into:.1} Mops");

    // The packet benchmark first, before the insert benchmark's million
    // rules have churned the heap.
    let process = process_rules(100_000);
    let small = process_rules(8_000);
    let insert = median((0..3).map(|_| rule_insert(1_000_000)).collect());
    println!("bench: offload.sim.rule_insert {insert:.0} Krules/s");
    println!("bench: offload.sim.process_100k {process:.2} Mpps");
    println!("bench: offload.sim.process_8k {small:.2} Mpps");
}

/// A sim eSwitch with an FDB domain, a level-1 table and a root rule that
/// jumps to it.
fn fdb(config: SimConfig) -> (SimBackend, DomainId, TableId) {
    let sim = SimBackend::new(config);
    let d = sim.domain_create(DomainType::Fdb).expect("domain");
    let root = sim.table_create(d, 0).expect("root table");
    let t1 = sim.table_create(d, 1).expect("table");
    let m = sim.matcher_create(root, 0, 0, &[]).expect("root matcher");
    let jump = sim
        .action_create(d, ActionSpec::DestTable(t1))
        .expect("jump");
    sim.rule_create(m, &[], &[jump]).expect("jump rule");
    (sim, d, t1)
}

/// Counter actions from bulks of 2^15, allocated as needed.
struct Counters {
    bulk: Option<CounterBulkId>,
    next: u32,
}

impl Counters {
    fn next(&mut self, sim: &SimBackend, d: DomainId) -> ActionId {
        if self.bulk.is_none() || self.next == 1 << 15 {
            self.bulk = Some(sim.counter_bulk_alloc(15).expect("bulk"));
            self.next = 0;
        }
        let bulk = self.bulk.expect("allocated above");
        self.next += 1;
        sim.action_create(
            d,
            ActionSpec::FlowCounter {
                bulk,
                offset: self.next - 1,
            },
        )
        .expect("counter")
    }
}

fn five_tuple(in_port: u32, src: u32, dst: u32, sport: u16, dport: u16) -> Match {
    let mut k = FlowKey::ZERO;
    k.set_in_port(u64::from(in_port));
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ipv4_src(u64::from(src));
    k.set_ipv4_dst(u64::from(dst));
    k.set_tp_src(u64::from(sport));
    k.set_tp_dst(u64::from(dport));
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::Ipv4Src)
        .with_exact(Field::Ipv4Dst)
        .with_exact(Field::TpSrc)
        .with_exact(Field::TpDst);
    Match::new(&k, &mask)
}

fn ports() -> PortTable {
    let mut ports = PortTable::new();
    for i in 1..=8u32 {
        ports.insert(PortNo(i), Vport::vf(i as u16).expect("vf"));
    }
    ports
}

/// Krules/s for `n` inserts of distinct 5-tuples into one matcher.
fn rule_insert(n: u32) -> f64 {
    let mode = SourcePortMode::REG_C0_UPPER_16;
    let (sim, d, t1) = fdb(SimConfig::default());
    let template = encode(&five_tuple(1, 0, 0xc612_0002, 0, 80), mode, &ports()).expect("encode");
    let m = sim
        .matcher_create(t1, 0, template.criteria(), template.mask())
        .expect("matcher");
    let out = sim
        .action_create(d, ActionSpec::DestVport(Vport::vf(1).expect("vf")))
        .expect("vport");
    let mut counters = Counters {
        bulk: None,
        next: 0,
    };
    let mut value = template.value().to_vec();
    let t = Instant::now();
    for i in 0..n {
        let ctr = counters.next(&sim, d);
        let _ = offload::prm::set(
            &mut value,
            PrmField::OuterSrcIp,
            u128::from(0xc612_0000 + (i >> 16)),
        );
        let _ = offload::prm::set(&mut value, PrmField::OuterTcpSport, u128::from(i & 0xffff));
        sim.rule_create(m, &value, &[ctr, out]).expect("insert");
    }
    f64::from(n) / t.elapsed().as_secs_f64() / 1e3
}

/// Mpps through `rules` rules in 8 matchers.
fn process_rules(rules: u32) -> f64 {
    let mode = SourcePortMode::REG_C0_UPPER_16;
    let ports = ports();
    let (sim, d, t1) = fdb(SimConfig::default());
    // Eight masks, from the most specific (looked up first) down.
    let masks: [&[Field]; 8] = [
        Mask::IPV4_5TUPLE,
        &[
            Field::EthType,
            Field::IpProto,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::TpDst,
        ],
        &[
            Field::InPort,
            Field::EthType,
            Field::IpProto,
            Field::Ipv4Dst,
            Field::TpDst,
        ],
        &[Field::EthType, Field::Ipv4Src, Field::Ipv4Dst],
        &[
            Field::InPort,
            Field::EthType,
            Field::IpProto,
            Field::Ipv4Dst,
        ],
        &[Field::EthType, Field::IpProto, Field::TpSrc],
        &[Field::InPort, Field::EthDst],
        &[Field::EthDst, Field::EthSrc],
    ];
    let mut counters = Counters {
        bulk: None,
        next: 0,
    };
    let outs: Vec<ActionId> = (1..=4)
        .map(|i| {
            sim.action_create(d, ActionSpec::DestVport(Vport::vf(i).expect("vf")))
                .expect("vport")
        })
        .collect();
    let mut frames = Vec::new();
    let mut ingress = Vec::new();
    for (mi, fields) in masks.iter().enumerate() {
        let mask = Mask::exact_fields(fields);
        let mut matcher = None;
        for j in 0..rules / 8 {
            let n = mi as u32 * (rules / 8) + j;
            let port = 1 + n % 8;
            let spec = FrameSpec::ipv4(
                0xc612_0000 | n,
                0xc613_0000 | (n * 7 % 65536),
                L4::tcp((n % 60_000) as u16 + 1024, 80 + (n % 7) as u16),
            )
            .macs(
                0x0200_0000_0000 | u64::from(n),
                0x0200_0100_0000 | u64::from(n),
            );
            let f = spec.build();
            let key = megaflow::extract(port, &f);
            let e = encode(&Match::new(&key, &mask), mode, &ports).expect("encode");
            let m = *matcher.get_or_insert_with(|| {
                sim.matcher_create(t1, mi as u16, e.criteria(), e.mask())
                    .expect("matcher")
            });
            let ctr = counters.next(&sim, d);
            sim.rule_create(m, e.value(), &[ctr, outs[n as usize % 4]])
                .expect("rule");
            if j % 8 == 0 {
                frames.push(f);
                ingress.push(ports.vport(PortNo(port)).expect("vport"));
            }
        }
    }
    let mut out = Output::new();
    let n = frames.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let total = 4_000_000usize;
    median(
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                let mut hw = 0usize;
                for b in 0..total / 32 {
                    out.clear();
                    let batch = (0..32).map(|i| {
                        let k = order[(b * 32 + i) % n];
                        (ingress[k], frames[k].as_slice())
                    });
                    sim.process_batch(d, 0, batch, &mut out);
                    hw += out.frames().len();
                }
                black_box(hw);
                total as f64 / t.elapsed().as_secs_f64() / 1e6
            })
            .collect(),
    )
}

//! The datapath benchmark: extract + megaflow lookup + stats, single thread,
//! packets prepared in memory as real 64-byte frames.
//!
//! `cargo bench -p megaflow --bench pipeline` prints `bench: <name> <value>
//! <unit>` lines (median of several rounds). Set `MEGAFLOW_BENCH_FLOWS` to
//! shrink the 1M-flow cases on a small machine (default 1,000,000).
//!
//! Workloads:
//! - 16 masks; every mask matches in_port exactly (as every translated
//!   megaflow does) plus its own mix of L2/L3/L4 fields, prefixes included;
//! - 4 ports (VMs), every port has flows of every mask, so each port's
//!   classifier holds all 16 masks;
//! - each flow has one representative UDP or TCP frame; traffic is a stream
//!   of receive batches of 32 frames, each batch from one port (as a port's
//!   receive ring delivers them), flows drawn by the workload's distribution;
//! - the hashmap baseline holds the full keys of the same representative
//!   frames in a std `HashMap` (stats in the value) hashed with the same
//!   function, one probe per packet: the ratio compares tuple-space search
//!   over 16 masks with a single exact-match probe;
//! - an untimed validation pass checks every packet finds its own flow.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use megaflow::actions::DpAction;
use megaflow::key::hash_words;
use megaflow::{
    extract_into, Actions, CacheConfig, Field, FlowKey, Mask, Match, MegaflowCache, PortNo,
    Timestamp,
};

const FRAME: usize = 64;
const BATCH: usize = 32;
const STREAM: usize = 1 << 18;
const ROUNDS: usize = 7;
const PORTS: u64 = 4;

struct Rng(megaflow::SplitMix64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
}

/// Header values of one representative frame.
#[derive(Clone, Copy)]
struct Spec {
    in_port: u32,
    ttl: u8,
    eth_src: u64,
    eth_dst: u64,
    ip_src: u32,
    ip_dst: u32,
    proto: u8,
    sport: u16,
    dport: u16,
}

/// The fields a mask matches besides in_port and eth_type; the first one is
/// made unique per flow.
#[derive(Clone, Copy)]
enum F {
    EthDst,
    EthSrc,
    IpSrc(u32),
    IpDst(u32),
    Proto,
    Sport,
    Dport,
}

const MASKS: [&[F]; 16] = [
    &[F::IpDst(32), F::Proto, F::Dport],
    &[F::EthDst],
    &[F::IpSrc(24)],
    &[F::IpDst(24)],
    &[F::IpSrc(32), F::IpDst(32)],
    &[F::IpDst(16), F::Proto],
    &[F::EthSrc, F::EthDst],
    &[F::IpSrc(32), F::Proto, F::Sport],
    &[F::Dport, F::IpDst(8)],
    &[F::IpSrc(28), F::Dport],
    &[F::EthDst, F::IpDst(32)],
    &[F::Sport, F::Dport],
    &[F::IpDst(32), F::IpSrc(32), F::Proto, F::Sport, F::Dport],
    &[F::IpSrc(20), F::IpDst(20)],
    &[F::EthSrc],
    &[F::IpDst(30), F::Sport],
];

fn prefix(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        (u32::MAX << (32 - bits)) as u128
    }
}

fn mask_of(fields: &[F]) -> Mask {
    // Every mask also matches ip_ttl, which each mask's flows set to their own
    // value: flows of different masks never overlap, as the cache expects of
    // megaflows (without it, masks sharing a first field would overlap).
    let mut m = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpTtl);
    for f in fields {
        m = match *f {
            F::EthDst => m.with_exact(Field::EthDst),
            F::EthSrc => m.with_exact(Field::EthSrc),
            F::IpSrc(b) => m.with(Field::Ipv4Src, prefix(b)),
            F::IpDst(b) => m.with(Field::Ipv4Dst, prefix(b)),
            F::Proto => m.with_exact(Field::IpProto),
            F::Sport => m.with_exact(Field::TpSrc),
            F::Dport => m.with_exact(Field::TpDst),
        };
    }
    m
}

/// A unique value for flow `j` in the first field of a mask.
fn unique(f: F, j: u64, s: &mut Spec) {
    match f {
        F::EthDst => s.eth_dst = 0x0200_0000_0000 | j,
        F::EthSrc => s.eth_src = 0x0200_0000_0000 | j,
        F::IpSrc(b) => s.ip_src = ((j as u32) << (32 - b)) | (s.ip_src & !(prefix(b) as u32)),
        F::IpDst(b) => s.ip_dst = ((j as u32) << (32 - b)) | (s.ip_dst & !(prefix(b) as u32)),
        F::Proto => unreachable!("proto is never first"),
        F::Sport => s.sport = j as u16,
        F::Dport => s.dport = j as u16,
    }
}

fn spec(mask: usize, j: u64, rng: &mut Rng) -> Spec {
    let r = rng.next();
    let mut s = Spec {
        in_port: (j % PORTS) as u32 + 1,
        ttl: mask as u8 + 1,
        // Random fill never equals a unique value (those have 0x02 first).
        eth_src: 0x0600_0000_0000 | (rng.next() & 0xffff_ffff),
        eth_dst: 0x0600_0000_0000 | (rng.next() & 0xffff_ffff),
        ip_src: rng.next() as u32,
        ip_dst: rng.next() as u32,
        proto: if r & 1 == 0 { 17 } else { 6 },
        sport: (r >> 8) as u16,
        dport: (r >> 24) as u16,
    };
    unique(MASKS[mask][0], j, &mut s);
    s
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in h.chunks(2) {
        sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn frame(s: &Spec) -> [u8; FRAME] {
    let mut f = [0u8; FRAME];
    f[0..6].copy_from_slice(&s.eth_dst.to_be_bytes()[2..]);
    f[6..12].copy_from_slice(&s.eth_src.to_be_bytes()[2..]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let l4len: usize = if s.proto == 6 { 20 } else { 8 };
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4len + 10) as u16).to_be_bytes());
    ip[8] = s.ttl;
    ip[9] = s.proto;
    ip[12..16].copy_from_slice(&s.ip_src.to_be_bytes());
    ip[16..20].copy_from_slice(&s.ip_dst.to_be_bytes());
    let c = ip_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let l4 = &mut f[34..34 + l4len];
    l4[0..2].copy_from_slice(&s.sport.to_be_bytes());
    l4[2..4].copy_from_slice(&s.dport.to_be_bytes());
    if s.proto == 6 {
        l4[12] = 0x50;
        l4[13] = 0x10; // ACK
    } else {
        l4[4..6].copy_from_slice(&((8 + 10) as u16).to_be_bytes());
    }
    f
}

struct FlowSet {
    /// Per mask, the representative frames of its flows.
    frames: Vec<Vec<[u8; FRAME]>>,
    matches: Vec<Vec<Match>>,
}

fn build_flows(per_mask: usize, seed: u64) -> FlowSet {
    let mut rng = Rng(megaflow::SplitMix64::new(seed));
    let mut frames = vec![];
    let mut matches = vec![];
    for (i, fields) in MASKS.iter().enumerate() {
        let mask = mask_of(fields);
        let mut fr = Vec::with_capacity(per_mask);
        let mut ms = Vec::with_capacity(per_mask);
        for j in 0..per_mask as u64 {
            let s = spec(i, j, &mut rng);
            let f = frame(&s);
            let mut k = FlowKey::ZERO;
            extract_into(s.in_port, &f, &mut k);
            ms.push(Match::new(&k, &mask));
            fr.push(f);
        }
        frames.push(fr);
        matches.push(ms);
    }
    FlowSet { frames, matches }
}

fn actions_pool() -> Vec<Actions> {
    (0..16)
        .map(|p| Actions::new(vec![DpAction::Output(PortNo(100 + p))]))
        .collect()
}

fn fill(cache: &mut MegaflowCache, set: &FlowSet, pool: &[Actions]) -> usize {
    let mut n = 0;
    for ms in &set.matches {
        for (j, m) in ms.iter().enumerate() {
            if cache.insert(m, pool[j % pool.len()].clone(), 1).is_ok() {
                n += 1;
            }
        }
    }
    n
}

/// A stream of receive batches: each batch of [`BATCH`] frames comes from
/// one port; inside it, a `hot` share of packets from the flows of the
/// first `hot_masks` masks, the rest from the other masks, uniform inside
/// each (`hot_masks` = 0: uniform over all flows).
struct Stream {
    bytes: Vec<u8>,
    ports: Vec<u32>,
    /// (mask, flow) each packet was drawn from, for the validation pass.
    expect: Vec<(u32, u32)>,
}

fn stream(set: &FlowSet, hot_masks: usize, hot: f64, seed: u64) -> Stream {
    let mut rng = Rng(megaflow::SplitMix64::new(seed));
    let mut bytes = Vec::with_capacity(STREAM * FRAME);
    let mut ports = Vec::with_capacity(STREAM);
    let mut expect = Vec::with_capacity(STREAM);
    let n = set.frames.len();
    for b in 0..STREAM / BATCH {
        let port = b as u64 % PORTS;
        for _ in 0..BATCH {
            let p = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            let m = if hot_masks == 0 || hot_masks >= n {
                (rng.next() % n as u64) as usize
            } else if p < hot {
                (rng.next() % hot_masks as u64) as usize
            } else {
                hot_masks + (rng.next() % (n - hot_masks) as u64) as usize
            };
            // Flow j of a mask is on port j % PORTS.
            let per_port = set.frames[m].len() as u64 / PORTS;
            let j = (rng.next() % per_port) * PORTS + port;
            bytes.extend_from_slice(&set.frames[m][j as usize]);
            ports.push(port as u32 + 1);
            expect.push((m as u32, j as u32));
        }
    }
    Stream {
        bytes,
        ports,
        expect,
    }
}

/// Runs the stream through extract + batch lookup + stats `passes` times;
/// returns (Mpps, hit share).
fn run_cache(cache: &mut MegaflowCache, s: &Stream, passes: usize) -> (f64, f64) {
    let mut keys = [FlowKey::ZERO; BATCH];
    let lens = [FRAME as u32; BATCH];
    let mut out = [None; BATCH];
    let mut hits = 0u64;
    let mut total = 0u64;
    let start = Instant::now();
    for pass in 0..passes {
        let now = Timestamp(pass as u64 + 1);
        for (chunk, ports) in s
            .bytes
            .chunks_exact(FRAME * BATCH)
            .zip(s.ports.chunks_exact(BATCH))
        {
            for i in 0..BATCH {
                extract_into(ports[i], &chunk[i * FRAME..(i + 1) * FRAME], &mut keys[i]);
            }
            cache.lookup_batch(&keys, &lens, now, &mut out);
            hits += out.iter().filter(|o| o.is_some()).count() as u64;
            total += BATCH as u64;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    black_box(hits);
    (total as f64 / secs / 1e6, hits as f64 / total as f64)
}

#[derive(Clone, Copy, Default)]
struct KeyHasher(u64);
impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("FlowKey hashes through write_u64 only")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Hashes a FlowKey with the same function the cache uses.
#[derive(Clone, Copy, Default)]
struct KeyBuild;
impl std::hash::BuildHasher for KeyBuild {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

#[derive(PartialEq, Eq)]
struct FullKey(FlowKey);
impl std::hash::Hash for FullKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(hash_words(self.0.words()));
    }
}

fn run_hashmap(
    map: &mut HashMap<FullKey, (u64, u64), KeyBuild>,
    s: &Stream,
    passes: usize,
) -> (f64, f64) {
    let mut key = FullKey(FlowKey::ZERO);
    let mut hits = 0u64;
    let mut total = 0u64;
    let start = Instant::now();
    for _ in 0..passes {
        for (f, &port) in s.bytes.chunks_exact(FRAME).zip(s.ports.iter()) {
            extract_into(port, f, &mut key.0);
            if let Some(st) = map.get_mut(&key) {
                st.0 += 1;
                st.1 += FRAME as u64;
                hits += 1;
            }
            total += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    black_box(hits);
    (total as f64 / secs / 1e6, hits as f64 / total as f64)
}

/// Untimed: every packet of the stream finds exactly the flow it was drawn
/// from (not merely some flow).
fn validate(cache: &mut MegaflowCache, set: &FlowSet, s: &Stream) {
    let mut key = FlowKey::ZERO;
    for ((f, &port), &(m, j)) in s
        .bytes
        .chunks_exact(FRAME)
        .zip(s.ports.iter())
        .zip(s.expect.iter())
    {
        extract_into(port, f, &mut key);
        let h = cache
            .lookup(&key, FRAME as u32, Timestamp(1))
            .expect("every packet hits");
        let got = cache.get(h).expect("live handle").matched();
        assert_eq!(
            got, set.matches[m as usize][j as usize],
            "packet found its own flow"
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN in timings"));
    v[v.len() / 2]
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Mean latency of dependent random loads over `bytes` of memory: what one
/// cache and TLB miss costs on this machine (context for the 1M figures).
fn random_load_ns(bytes: usize) -> f64 {
    let n = bytes / 8;
    let mut next: Vec<usize> = (0..n).collect();
    // Sattolo's algorithm: one cycle through every element.
    let mut rng = Rng(megaflow::SplitMix64::new(99));
    for i in (1..n).rev() {
        let j = (rng.next() % i as u64) as usize;
        next.swap(i, j);
    }
    let steps = 2_000_000;
    let mut p = 0usize;
    let t = Instant::now();
    for _ in 0..steps {
        p = next[p];
    }
    black_box(p);
    t.elapsed().as_secs_f64() * 1e9 / steps as f64
}

fn bench(name: &str, value: f64, unit: &str) {
    println!("bench: {name} {value:.2} {unit}");
}

fn measure(rounds: usize, mut f: impl FnMut() -> (f64, f64)) -> (f64, f64) {
    let mut rates = vec![];
    let mut hit = 0.0;
    for _ in 0..rounds {
        let (r, h) = f();
        rates.push(r);
        hit = h;
    }
    (median(rates), hit)
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let total_flows: usize = std::env::var("MEGAFLOW_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // Each port needs flows of each mask; port numbers stay below 2^16.
    let total_flows = total_flows.clamp(MASKS.len() * PORTS as usize, 1 << 20);
    let per_mask = total_flows / MASKS.len();
    let pool = actions_pool();

    // Profiling aid: only the insert workload, N rounds.
    if let Some(rounds) = std::env::var("MEGAFLOW_BENCH_ONLY_INSERT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let set = build_flows(per_mask, 42);
        let mut rates = vec![];
        for _ in 0..rounds {
            let mut c = MegaflowCache::new(CacheConfig {
                flow_limit: total_flows,
                emc_entries: 0,
                ..CacheConfig::default()
            });
            let t = Instant::now();
            let n = fill(&mut c, &set, &pool);
            rates.push(n as f64 / t.elapsed().as_secs_f64() / 1e3);
        }
        bench("megaflow.insert", median(rates), "Kflows/s");
        return;
    }

    // --- EMC: 10,000 active flows.
    let small = build_flows(10_000 / MASKS.len(), 7);
    let mut emc_cache = MegaflowCache::new(CacheConfig::default());
    fill(&mut emc_cache, &small, &pool);
    let s = stream(&small, 0, 0.0, 11);
    validate(&mut emc_cache, &small, &s);
    // Warm up: EMC inserts happen on 1 subtable hit in 100 (as in OVS), so
    // every flow needs a few hundred packets before it is cached.
    run_cache(&mut emc_cache, &s, 40);
    let warm = emc_cache.counters();
    let (emc, emc_hit) = measure(ROUNDS, || run_cache(&mut emc_cache, &s, 2));
    let mut c = emc_cache.counters();
    c.emc_hits -= warm.emc_hits;
    c.tss_hits -= warm.tss_hits;
    eprintln!(
        "# emc: {} flows, hit share {:.3}, emc {:.1}% of hits",
        emc_cache.len(),
        emc_hit,
        100.0 * c.emc_hits as f64 / (c.emc_hits + c.tss_hits).max(1) as f64
    );
    bench("megaflow.pipeline.emc_hit", emc, "Mpps");
    drop(emc_cache);
    if std::env::var_os("MEGAFLOW_BENCH_ONLY_EMC").is_some() {
        return;
    }

    // --- 1M flows over 16 masks.
    let set = build_flows(per_mask, 42);
    let skewed = stream(&set, 2, 0.8, 5);
    let uniform = stream(&set, 0, 0.0, 6);

    let mut inserts = vec![];
    let mut bytes_per_flow = 0.0;
    let mut heap_per_flow = 0.0;
    let mut cache = None;
    for round in 0..3 {
        drop(cache.take());
        let rss0 = rss_bytes();
        let mut c = MegaflowCache::new(CacheConfig {
            flow_limit: total_flows,
            emc_entries: 0,
            ..CacheConfig::default()
        });
        let t = Instant::now();
        let n = fill(&mut c, &set, &pool);
        let secs = t.elapsed().as_secs_f64();
        inserts.push(n as f64 / secs / 1e3);
        if round == 0 {
            bytes_per_flow = rss_bytes().saturating_sub(rss0) as f64 / n as f64;
            heap_per_flow = c.heap_bytes() as f64 / n as f64;
            eprintln!("# built {n} flows in {} subtables", c.subtable_count());
        }
        cache = Some(c);
    }
    let mut cache = cache.expect("built three times");

    let (ex, _) = measure(ROUNDS, || {
        let mut k = FlowKey::ZERO;
        let mut acc = 0u64;
        let t = Instant::now();
        for (f, &port) in skewed.bytes.chunks_exact(FRAME).zip(skewed.ports.iter()) {
            extract_into(port, f, &mut k);
            acc = acc.wrapping_add(k.tp_dst());
        }
        black_box(acc);
        (STREAM as f64 / t.elapsed().as_secs_f64() / 1e6, 0.0)
    });
    eprintln!("# extract only: {ex:.2} Mpps");
    validate(&mut cache, &set, &skewed);
    validate(&mut cache, &set, &uniform);
    let (skew, skew_hit) = measure(ROUNDS, || run_cache(&mut cache, &skewed, 1));
    let (uni, uni_hit) = measure(ROUNDS, || run_cache(&mut cache, &uniform, 1));
    let c = cache.counters();
    eprintln!(
        "# tss hit shares: skewed {skew_hit:.3}, uniform {uni_hit:.3}; {:.2} subtable probes per lookup",
        c.subtable_probes as f64 / (c.tss_hits + c.misses).max(1) as f64
    );
    drop(cache);

    let mut map: HashMap<FullKey, (u64, u64), KeyBuild> =
        HashMap::with_capacity_and_hasher(total_flows, KeyBuild);
    for (fr, ms) in set.frames.iter().zip(set.matches.iter()) {
        for (f, m) in fr.iter().zip(ms.iter()) {
            let mut k = FlowKey::ZERO;
            extract_into(m.key().in_port() as u32, f, &mut k);
            map.entry(FullKey(k)).or_insert((0, 0));
        }
    }
    let (hm, hm_hit) = measure(ROUNDS, || run_hashmap(&mut map, &skewed, 1));
    eprintln!("# hashmap hit share {hm_hit:.3}");

    bench("megaflow.pipeline.tss_skewed_1m", skew, "Mpps");
    bench("megaflow.pipeline.tss_uniform_1m", uni, "Mpps");
    bench("megaflow.pipeline.hashmap_1m", hm, "Mpps");
    bench("megaflow.pipeline.skewed_vs_hashmap", skew / hm, "ratio");
    bench("megaflow.insert", median(inserts), "Kflows/s");
    bench("megaflow.bytes_per_flow_1m", bytes_per_flow, "bytes");
    eprintln!("# heap accounted by the cache: {heap_per_flow:.1} bytes per flow");
    eprintln!(
        "# machine: dependent random load {:.0} ns over 256 MiB, {:.0} ns over 1 MiB",
        random_load_ns(256 << 20),
        random_load_ns(1 << 20)
    );
}

//! The tracker alone, one thread, packets prepared in memory.
//!
//! `cargo bench -p conntrack --bench conntrack` prints `bench: <name>
//! <value> <unit>` lines, medians of several rounds:
//! - `ct.tracker.tcp_conns_per_s`: whole TCP connections (SYN, SYN-ACK,
//!   ACK, a data segment each way, FIN, FIN, ACK: 8 packets, the first
//!   committed) through `ct()`, 100,000 connections per round;
//! - `ct.tracker.est_mpps`: packets of established connections (64k
//!   connections, round robin) through `ct()`;
//! - `ct.bytes_per_conn_1m`: resident memory per tracked connection with
//!   1M UDP connections (`CT_BENCH_CONNS` changes the count).
//!
//! The replay figures (`ct.tcp_conns_per_s` through a stateful OpenFlow
//! table) come from the pipeline; this bench bounds what the tracker
//! itself costs.

use std::hint::black_box;
use std::time::Instant;

use conntrack::{Config, CtMeta, CtSpec, Tracker};

const L3: usize = 14;

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

/// An Ethernet + IPv4 + TCP/UDP frame (checksums left zero: the tracker
/// does not verify them).
fn frame(proto: u8) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let mut f = vec![0u8; 14 + 20 + l4];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + l4) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    if proto == 6 {
        f[34 + 12] = 5 << 4;
        f[34 + 14..34 + 16].copy_from_slice(&64240u16.to_be_bytes());
    }
    f
}

fn set(f: &mut [u8], src: u32, dst: u32, sport: u16, dport: u16) {
    f[26..30].copy_from_slice(&src.to_be_bytes());
    f[30..34].copy_from_slice(&dst.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
}

fn tcp(f: &mut [u8], flags: u8, seq: u32, ack: u32) {
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    f[42..46].copy_from_slice(&ack.to_be_bytes());
    f[47] = flags;
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench(name: &str, v: f64, unit: &str) {
    println!("bench: {name} {v:.2} {unit}");
}

const CLIENT: u32 = 0xc612_0000; // 198.18.0.0
const SERVER: u32 = 0xc613_0001; // 198.19.0.1

fn ct(t: &Tracker, f: &mut [u8], spec: &CtSpec, now: u64) -> u8 {
    let mut m = CtMeta::default();
    t.execute(f, L3, 0x0800, spec, &mut m, now);
    m.state
}

/// One whole connection; returns the last packet's state.
fn connection(t: &Tracker, f: &mut [u8], i: u32, now: u64) -> u8 {
    let commit = CtSpec {
        commit: true,
        ..CtSpec::default()
    };
    let plain = CtSpec::default();
    let (c, sp) = (CLIENT + (i >> 14), 1024 + (i & 0x3fff) as u16);
    let (a, b) = (1000u32, 5000u32);
    set(f, c, SERVER, sp, 80);
    tcp(f, 0x02, a, 0);
    ct(t, f, &commit, now);
    set(f, SERVER, c, 80, sp);
    tcp(f, 0x12, b, a + 1);
    ct(t, f, &plain, now);
    set(f, c, SERVER, sp, 80);
    tcp(f, 0x10, a + 1, b + 1);
    ct(t, f, &plain, now);
    tcp(f, 0x18, a + 1, b + 1);
    ct(t, f, &plain, now);
    set(f, SERVER, c, 80, sp);
    tcp(f, 0x18, b + 1, a + 1);
    ct(t, f, &plain, now);
    set(f, c, SERVER, sp, 80);
    tcp(f, 0x11, a + 1, b + 1);
    ct(t, f, &plain, now);
    set(f, SERVER, c, 80, sp);
    tcp(f, 0x11, b + 1, a + 2);
    ct(t, f, &plain, now);
    set(f, c, SERVER, sp, 80);
    tcp(f, 0x10, a + 2, b + 2);
    ct(t, f, &plain, now)
}

fn main() {
    let n_conns: u32 = std::env::var("CT_BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);

    // Whole TCP connections.
    let mut rates = vec![];
    for round in 0..5u64 {
        let t = Tracker::new(Config::default());
        let mut f = frame(6);
        let n = 100_000u32;
        let start = Instant::now();
        for i in 0..n {
            black_box(connection(&t, &mut f, i, round));
        }
        rates.push(n as f64 / start.elapsed().as_secs_f64());
        assert_eq!(
            t.len(),
            n as usize,
            "every connection stays tracked (TIME_WAIT)"
        );
    }
    bench("ct.tracker.tcp_conns_per_s", median(rates), "conns/s");

    // Established packets.
    let t = Tracker::new(Config::default());
    let mut f = frame(17);
    let n = 65_536u32;
    let commit = CtSpec {
        commit: true,
        ..CtSpec::default()
    };
    for i in 0..n {
        set(
            &mut f,
            CLIENT + (i >> 14),
            SERVER,
            1024 + (i & 0x3fff) as u16,
            53,
        );
        ct(&t, &mut f, &commit, 0);
        set(
            &mut f,
            SERVER,
            CLIENT + (i >> 14),
            53,
            1024 + (i & 0x3fff) as u16,
        );
        ct(&t, &mut f, &CtSpec::default(), 0);
    }
    let mut rates = vec![];
    for _ in 0..5 {
        let start = Instant::now();
        let rounds = 8;
        for _ in 0..rounds {
            for i in 0..n {
                set(
                    &mut f,
                    CLIENT + (i >> 14),
                    SERVER,
                    1024 + (i & 0x3fff) as u16,
                    53,
                );
                black_box(ct(&t, &mut f, &CtSpec::default(), 1));
            }
        }
        rates.push((rounds * n) as f64 / start.elapsed().as_secs_f64() / 1e6);
    }
    bench("ct.tracker.est_mpps", median(rates), "Mpps");
    drop(t);

    // Memory at 1M.
    let rss0 = rss_bytes();
    let t = Tracker::new(Config::default());
    let mut f = frame(17);
    for i in 0..n_conns {
        set(
            &mut f,
            CLIENT + (i >> 14),
            SERVER,
            1024 + (i & 0x3fff) as u16,
            53,
        );
        ct(&t, &mut f, &commit, 0);
    }
    assert_eq!(t.len(), n_conns as usize);
    let per = rss_bytes().saturating_sub(rss0) as f64 / n_conns as f64;
    bench("ct.bytes_per_conn_1m", per, "B");
}

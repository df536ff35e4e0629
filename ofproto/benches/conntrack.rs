//! Stateful tables in software: `cargo bench -p ofproto --bench conntrack`.
//!
//! The whole software path (datapath with its megaflow cache, upcalls,
//! the slow path running each stage, the shared tracker) on one thread,
//! with nothing offloaded, packets prepared in memory. Prints `bench:`
//! lines, medians of rounds:
//! - `ct.tcp_conns_per_s`: whole TCP connections (SYN, SYN-ACK, ACK, a
//!   data segment each way, FIN, FIN-ACK, ACK: 8 packets) through Open
//!   vSwitch's conntrack tutorial firewall (`ct(table=1)`, then
//!   `ct(commit)` for new connections from port 1), 50,000 connections
//!   a round, each on new addresses and ports;
//! - `ct.est_pps` / `ct.plain_pps`: packets of 10,000 established UDP
//!   connections, both directions, through that firewall, and through the
//!   same forwarding without `ct()` (`in_port=1 → 2`, `in_port=2 → 1`),
//!   interleaved in turns within each round;
//! - `ct.est_vs_plain`: their ratio;
//! - `ct.tracker_est_ns`: the tracker alone (`Tracker::execute`) on those
//!   established packets, nanoseconds a packet;
//! - `ct.single_pps`, `ct.single_vs_plain`: the ceiling of any `ct()`
//!   that leads to a second stage: the same packets through
//!   `ct(commit,zone=7),output` in the one stage, no recirculation, so
//!   the tracker's cost and nothing else on top of plain forwarding;
//! - `ct.scale_est_pps`, `ct.scale_plain_pps`, `ct.scale_est_vs_plain`:
//!   est and plain with a first-stage rule per source port added to both
//!   tables (as per-port ACLs make): 10,000 first-stage megaflows;
//! - `ct.dp_*`: each of the above but the tracker's through the datapath
//!   thread alone (as the live daemon's threads run packets; the slow
//!   path folds their counts between rounds), where the replay pipeline
//!   above also folds the datapath's report after every packet.

use std::sync::Arc;
use std::time::Instant;

use megaflow::actions::CountSink;
use megaflow::frame::{FrameSpec, L4};
use megaflow::offload::{FlowOffload, HwId, HwStats, NotOffloaded};
use megaflow::{Actions, Match, PortNo, Timestamp};
use ofproto::text::parse_flow;
use ofproto::{Bridge, FlowModCommand, Pipeline, PipelineConfig};

/// A device that takes nothing: every megaflow stays in software.
struct NoDevice;

impl FlowOffload for NoDevice {
    fn install(&mut self, _: &Match, _: &Actions) -> Result<HwId, NotOffloaded> {
        Err(NotOffloaded::Action("bench: software only".into()))
    }
    fn replace(&mut self, _: HwId, _: &Match, _: &Actions) -> Result<HwId, NotOffloaded> {
        Err(NotOffloaded::Action("bench: software only".into()))
    }
    fn remove(&mut self, _: HwId) {}
    fn poll(&mut self, _: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        Ok(())
    }
}

const FIREWALL: &[&str] = &[
    "table=0,priority=50,ct_state=-trk,ip actions=ct(table=1,zone=7)",
    "table=1,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=7),output:2",
    "table=1,priority=50,ct_state=+trk+est,ip,in_port=1 actions=output:2",
    "table=1,priority=50,ct_state=+trk+est,ip,in_port=2 actions=output:1",
    "table=1,priority=40,ct_state=+trk,ip actions=drop",
];

/// `ct()` with no second stage: the packet tracked (committed: already
/// established after the warm-up) and forwarded in the one megaflow.
const SINGLE: &[&str] = &[
    "priority=50,ip,in_port=1 actions=ct(commit,zone=7),output:2",
    "priority=50,ip,in_port=2 actions=ct(commit,zone=7),output:1",
];

const PLAIN: &[&str] = &[
    "priority=50,ip,in_port=1 actions=output:2",
    "priority=50,ip,in_port=2 actions=output:1",
];

fn pipeline(flows: &[&str]) -> Pipeline<NoDevice> {
    let mut b = Bridge::with_ports([1, 2]);
    for f in flows {
        let fm = parse_flow(f, FlowModCommand::Add).expect("flow");
        b.apply_flow_mod(&fm, Timestamp(0)).expect("flow applies");
    }
    let mut p = Pipeline::new(b, NoDevice, PipelineConfig::default());
    let t = Arc::new(conntrack::Tracker::new(conntrack::Config::default()));
    p.set_tracker(Arc::clone(&t));
    p.datapaths_mut().0.set_tracker(t);
    p
}

use megaflow::frame::tcp_segment as tcp;

/// The 8 packets of connection `i` with the port each comes in on.
fn connection(i: u32) -> Vec<(u32, Vec<u8>)> {
    let (c, s) = (0xc612_0000 | (i >> 14), 0xc613_0001u32);
    let sp = 1024 + (i & 0x3fff) as u16;
    let (a, b) = (1000u32, 5000u32);
    vec![
        (1, tcp(c, s, sp, 80, 0x02, a, 0, 0)),
        (2, tcp(s, c, 80, sp, 0x12, b, a + 1, 0)),
        (1, tcp(c, s, sp, 80, 0x10, a + 1, b + 1, 0)),
        (1, tcp(c, s, sp, 80, 0x18, a + 1, b + 1, 100)),
        (2, tcp(s, c, 80, sp, 0x18, b + 1, a + 101, 100)),
        (1, tcp(c, s, sp, 80, 0x11, a + 101, b + 101, 0)),
        (2, tcp(s, c, 80, sp, 0x11, b + 101, a + 102, 0)),
        (1, tcp(c, s, sp, 80, 0x10, a + 102, b + 102, 0)),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench(name: &str, v: f64, unit: &str) {
    println!("bench: {name} {v:.3} {unit}");
}

fn main() {
    const CONNS: u32 = 50_000;
    let mut rates = vec![];
    // Profiling aid: CT_BENCH_ONLY_EST=1 skips the TCP connections.
    let rounds = if std::env::var_os("CT_BENCH_ONLY_EST").is_some() {
        0
    } else {
        5
    };
    for round in 0..rounds {
        let mut p = pipeline(FIREWALL);
        let pkts: Vec<(u32, Vec<u8>)> = (0..CONNS)
            .flat_map(|i| connection(i + round * CONNS))
            .collect();
        let mut sink = CountSink::default();
        let t = Instant::now();
        for (i, (port, f)) in pkts.iter().enumerate() {
            let mut f = f.clone();
            p.process(
                Timestamp(1_000_000_000 + i as u64 * 100),
                PortNo(*port),
                &mut f,
                &mut sink,
            );
        }
        rates.push(f64::from(CONNS) / t.elapsed().as_secs_f64());
        // Every packet delivered: 8 a connection.
        assert_eq!(sink.outputs, u64::from(CONNS) * 8, "round {round}");
        assert_eq!(p.tracker().map_or(0, |t| t.len()), CONNS as usize);
    }
    if !rates.is_empty() {
        bench("ct.tcp_conns_per_s", median(rates), "conns/s");
    }

    // Established UDP, both directions, against the same without ct().
    // CT_BENCH_FLOWS=N: N connections instead (profiling aid).
    let flows: u32 = std::env::var("CT_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let udp = |i: u32, reply: bool| {
        let (c, s) = (0xc612_0000 | (i >> 14), 0xc613_0001u32);
        let sp = 1024 + (i & 0x3fff) as u16;
        if reply {
            FrameSpec::ipv4(s, c, L4::udp(53, sp)).build()
        } else {
            FrameSpec::ipv4(c, s, L4::udp(sp, 53)).build()
        }
    };
    let stream: Vec<(u32, Vec<u8>)> = (0..flows)
        .flat_map(|i| [(1, udp(i, false)), (2, udp(i, true))])
        .collect();
    let mut ct = pipeline(FIREWALL);
    let mut plain = pipeline(PLAIN);
    // At scale: a first-stage rule per source port in both tables (as
    // per-port ACLs make), so every connection's first stage is a
    // megaflow of its own, 10,000 of them.
    let per_port = |rule: &dyn Fn(u16) -> String, base: &[&str]| {
        let mut v: Vec<String> = (0..flows)
            .map(|i| rule(1024 + (i & 0x3fff) as u16))
            .collect();
        v.extend(base.iter().map(|s| s.to_string()));
        v
    };
    let fw = per_port(
        &|p| {
            format!("table=0,priority=55,ct_state=-trk,udp,in_port=1,tp_src={p} actions=ct(table=1,zone=7)")
        },
        FIREWALL,
    );
    let pl = per_port(
        &|p| format!("priority=55,udp,in_port=1,tp_src={p} actions=output:2"),
        PLAIN,
    );
    let mut ct_scale = pipeline(&fw.iter().map(String::as_str).collect::<Vec<_>>());
    let mut plain_scale = pipeline(&pl.iter().map(String::as_str).collect::<Vec<_>>());
    let mut single = pipeline(SINGLE);
    let mut sink = CountSink::default();
    let mut now = 1_000_000_000u64;
    // Warm: connections established, megaflows in place.
    for _ in 0..3 {
        for p in [
            &mut ct,
            &mut plain,
            &mut single,
            &mut ct_scale,
            &mut plain_scale,
        ] {
            for (port, f) in &stream {
                let mut f = f.clone();
                now += 100;
                p.process(Timestamp(now), PortNo(*port), &mut f, &mut sink);
            }
        }
    }
    // The tracker alone: `ct(zone=7)` on the same established packets.
    {
        let t = ct.tracker().expect("a tracker");
        let spec = conntrack::CtSpec {
            zone: 7,
            ..Default::default()
        };
        let mut frames: Vec<Vec<u8>> = stream.iter().map(|(_, f)| f.clone()).collect();
        let mut ns = vec![];
        for _ in 0..5 {
            let start = Instant::now();
            for _ in 0..8 {
                for f in frames.iter_mut() {
                    let mut m = conntrack::CtMeta::default();
                    now += 10;
                    t.execute(f, 14, 0x0800, &spec, &mut m, now / 1_000_000);
                    std::hint::black_box(&m);
                }
            }
            ns.push(start.elapsed().as_nanos() as f64 / (8 * frames.len()) as f64);
        }
        bench("ct.tracker_est_ns", median(ns), "ns/pkt");
    }
    let mut frames: Vec<Vec<u8>> = stream.iter().map(|(_, f)| f.clone()).collect();
    // `dp`: the datapath thread alone, as the live daemon runs it (the slow
    // path folds its reports between batches, here after the round);
    // otherwise the replay pipeline, which folds after every packet.
    let mut run = |p: &mut Pipeline<NoDevice>, now: &mut u64, dp: bool| {
        let before = sink.outputs;
        let t = Instant::now();
        for _ in 0..4 {
            for ((port, _), f) in stream.iter().zip(frames.iter_mut()) {
                *now += 10;
                let (at, port) = (Timestamp(*now), PortNo(*port));
                if dp {
                    let none = &megaflow::tunnel::TunnelKey::NONE;
                    p.datapaths_mut().0.run(at, port, none, f, &mut sink, None);
                } else {
                    p.process(at, port, f, &mut sink);
                }
            }
        }
        let rate = (4 * stream.len()) as f64 / t.elapsed().as_secs_f64();
        // Every packet forwarded: none dropped as untracked or invalid.
        assert_eq!(sink.outputs - before, 4 * stream.len() as u64);
        p.offload_tick(Timestamp(*now));
        rate
    };
    // Profiling aids: CT_BENCH_ONLY_DP=1 runs the datapath-thread loop
    // only, CT_BENCH_ONLY_REPLAY=1 the replay pipeline's only.
    let only = |v| std::env::var_os(v).is_some();
    for (dp, prefix) in [(false, "ct."), (true, "ct.dp_")] {
        if (dp && only("CT_BENCH_ONLY_REPLAY")) || (!dp && only("CT_BENCH_ONLY_DP")) {
            continue;
        }
        // In turns within each round: est, plain, single; then at scale.
        let mut got: [Vec<f64>; 5] = Default::default();
        for _ in 0..7 {
            let ps = [
                &mut ct,
                &mut plain,
                &mut single,
                &mut ct_scale,
                &mut plain_scale,
            ];
            for (v, p) in got.iter_mut().zip(ps) {
                v.push(run(p, &mut now, dp));
            }
        }
        let ratio = |a: &[f64], b: &[f64]| median(a.iter().zip(b).map(|(x, y)| x / y).collect());
        let [e, pl, one, e_s, pl_s] = &got;
        bench(&format!("{prefix}est_pps"), median(e.clone()) / 1e6, "Mpps");
        bench(
            &format!("{prefix}plain_pps"),
            median(pl.clone()) / 1e6,
            "Mpps",
        );
        bench(&format!("{prefix}est_vs_plain"), ratio(e, pl), "ratio");
        bench(
            &format!("{prefix}single_pps"),
            median(one.clone()) / 1e6,
            "Mpps",
        );
        bench(&format!("{prefix}single_vs_plain"), ratio(one, pl), "ratio");
        bench(
            &format!("{prefix}scale_est_pps"),
            median(e_s.clone()) / 1e6,
            "Mpps",
        );
        bench(
            &format!("{prefix}scale_plain_pps"),
            median(pl_s.clone()) / 1e6,
            "Mpps",
        );
        bench(
            &format!("{prefix}scale_est_vs_plain"),
            ratio(e_s, pl_s),
            "ratio",
        );
    }
    let st = ct.datapaths().0.stats();
    eprintln!(
        "# ct pipeline: {} megaflows, {} recirculations; at scale {} megaflows",
        ct.len(),
        st.recirculations,
        ct_scale.len()
    );
}

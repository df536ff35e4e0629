//! Flow setup while the revalidator works: `cargo bench -p cli --bench
//! slowpath`.
//!
//! A slow path holds 1,000,000 offloaded 5-tuple megaflows in the sim
//! eSwitch (as the revalidator bench does) and the 1,000-rule ACL
//! pipeline of the translation bench (`ofproto/fixtures/workload.rs`). It
//! sits behind the daemon's slow-path lock (a `parking_lot` mutex). A
//! handler thread upcalls the workload's packets, each translated and
//! installed as a megaflow, as the daemon's handler does it (parsed,
//! translated, staged, sent to the datapaths and executed without the
//! lock: `ofproto::FlowSetup`), while a revalidator thread runs passes
//! back to back and, between them and when idle, adopts the staged
//! records every 2 ms (the daemon's offload tick):
//!
//! - `slowpath.upcall_p99_us_during_pass` (and `_max_`): from a miss
//!   handed to the handler to its megaflow's insert sent to the datapaths,
//!   p99 and worst, the handler paced at one upcall every 250 µs, passes
//!   run as the daemon runs them (`cli::live::pass_in_batches`: batches
//!   of `ofproto::PASS_BATCH` records);
//! - `slowpath.upcall_p99_us_during_pass_locked` (and `_max_`): the same
//!   with each install made under the slow path's lock, as eswitch did
//!   before (the baseline, in the same run);
//! - `slowpath.upcall_p99_us_idle`: with no pass running;
//! - `slowpath.handlers_2_vs_1`: translate+install throughput of two
//!   handler threads over one, no pass running;
//! - `slowpath.setup_during_pass_ratio`: upcalls per second by a handler
//!   that never pauses (`HANDLER_BATCH` upcalls per lock, as the daemon's),
//!   passes back to back (batched) over none;
//! - `slowpath.pass_batched_vs_whole`: the time of a pass run in batches
//!   with no one waiting over the time of the same pass at once (what the
//!   hand-offs cost; medians of six each, alternating).
//!
//! Set `REVALIDATOR_FLOWS` to change the size, `SLOWPATH_UPCALLS` the
//! paced upcalls per mode (default 4,000).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cli::live::{pass_in_batches, HANDLER_BATCH};
use common::{SEC, T0};
use megaflow::actions::CountSink;
use megaflow::frame::{FrameSpec, L4};
use megaflow::{FlowKey, PortNo, Timestamp};
use offload::manager::OffloadManager;
use offload::sim::SimBackend;
use ofproto::{translate_miss, FlowSetup, Miss, Pipeline, SharedBridge, ThreadedDatapaths};
use parking_lot::Mutex;

#[path = "common/mod.rs"]
mod common;

#[path = "../../ofproto/fixtures/workload.rs"]
mod workload;

type Slow = Pipeline<OffloadManager<SimBackend>, ThreadedDatapaths>;

/// How the revalidator runs while the handler measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Passes {
    None,
    Batched,
}

/// How the handler installs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Install {
    /// Through its `FlowSetup`, without the slow path's lock.
    Staged,
    /// Under the slow path's lock (before).
    Locked,
}

/// The frame of a workload key (Ethernet, IPv4, TCP or UDP).
fn frame_of(k: &FlowKey) -> Vec<u8> {
    let (sport, dport) = (k.tp_src() as u16, k.tp_dst() as u16);
    let l4 = if k.ip_proto() == 6 {
        L4::tcp(sport, dport)
    } else {
        L4::udp(sport, dport)
    };
    FrameSpec::ipv4(k.ipv4_src() as u32, k.ipv4_dst() as u32, l4)
        .macs(k.eth_src(), k.eth_dst())
        .build()
}

/// `n` workload packets, each with its in_port.
fn packets(n: usize, rules: &[workload::AclRule], seed: u64) -> Vec<(PortNo, Vec<u8>)> {
    let mut r = workload::Rng::new(seed);
    (0..n)
        .map(|_| {
            let k = workload::acl_packet(&mut r, rules);
            (PortNo(k.in_port() as u32), frame_of(&k))
        })
        .collect()
}

/// The revalidator thread: passes back to back until `stop`, all at one
/// time (nothing ages: the workload stays the same from mode to mode).
fn revalidator(slow: &Mutex<Slow>, passes: Passes, stop: &AtomicBool, count: &AtomicU64) {
    let now = Timestamp(T0.0 + SEC);
    while !stop.load(Ordering::Relaxed) {
        // The offload tick's fold (which adopts what handlers staged).
        slow.lock().fold_datapaths(now);
        match passes {
            Passes::Batched => {
                pass_in_batches(&mut slow.lock(), now, |p| p);
                count.fetch_add(1, Ordering::Relaxed);
            }
            Passes::None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// What the daemon's handler does with a batch of misses: parse and
/// translate each on the bridge, then install and execute it through
/// `setup` (under the slow path's lock if the slow path has a backlog);
/// or, `Locked`, install and execute them all under the lock (before).
fn handle(
    slow: &Mutex<Slow>,
    (setup, install, inbox): (&FlowSetup, Install, usize),
    bridge: &SharedBridge,
    batch: &[(PortNo, Vec<u8>)],
    sink: &mut CountSink,
) {
    let now = Timestamp(T0.0 + SEC);
    let mut rng = megaflow::SplitMix64::new(7);
    let translated: Vec<_> = batch
        .iter()
        .map(|(port, frame)| {
            let miss = Miss::parse(*port, frame);
            let t = translate_miss(bridge, &miss.key, now);
            (miss, t)
        })
        .collect();
    if install == Install::Locked {
        let mut g = slow.lock();
        for ((_, frame), (miss, t)) in batch.iter().zip(&translated) {
            let mut f = frame.clone();
            g.upcall_translated(now, miss, t, &mut f, sink);
        }
        return;
    }
    for ((_, frame), (miss, t)) in batch.iter().zip(&translated) {
        let mut f = frame.clone();
        if setup
            .upcall(inbox, &mut rng, now, miss, t, &mut f, sink)
            .is_err()
        {
            slow.lock().upcall_translated(now, miss, t, &mut f, sink);
        }
    }
}

/// Runs the handler's loop with the revalidator in `passes` mode; returns
/// the upcall latencies (µs), the upcalls done, the loop's seconds and
/// the passes completed.
fn run(
    slow: &Arc<Mutex<Slow>>,
    (passes, install): (Passes, Install),
    pkts: &[(PortNo, Vec<u8>)],
    pace: Option<Duration>,
    budget: Duration,
) -> (Vec<f64>, usize, f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let reval = {
        let (slow, stop, count) = (Arc::clone(slow), Arc::clone(&stop), Arc::clone(&count));
        std::thread::spawn(move || revalidator(&slow, passes, &stop, &count))
    };
    // Let the first pass begin.
    std::thread::sleep(Duration::from_millis(20));
    let bridge = slow.lock().bridge_handle();
    let setup = slow.lock().flow_setup().expect("threaded datapaths");
    let mut lat = Vec::with_capacity(pkts.len());
    let mut sink = CountSink::default();
    let started = Instant::now();
    let mut next = Instant::now();
    let mut done = 0;
    let per_lock = if pace.is_some() { 1 } else { HANDLER_BATCH };
    for chunk in pkts.chunks(per_lock) {
        if started.elapsed() > budget {
            break;
        }
        if let Some(p) = pace {
            while Instant::now() < next {
                std::hint::spin_loop();
            }
            next += p;
        }
        let t = Instant::now();
        handle(slow, (&setup, install, 0), &bridge, chunk, &mut sink);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        done += chunk.len();
    }
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    reval.join().expect("revalidator thread");
    (lat, done, secs, count.load(Ordering::Relaxed))
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * q) as usize)
        .copied()
        .unwrap_or(0.0)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn main() {
    let flows = common::flows();
    let upcalls: usize = std::env::var("SLOWPATH_UPCALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000);
    let mut r = workload::Rng::new(0x51_0e9a);
    let rules = workload::acl_rules(&mut r);
    let (_sim, mgr) = common::device();
    let mut cfg = common::config();
    cfg.revalidator.flow_limit = flows as usize + 4_000_000;
    // No per-port quota: the installed flows are all port 1's.
    cfg.revalidator.port_flow_limit = 0;
    let mut p: Slow = Pipeline::with_datapaths(
        workload::acl_bridge(&rules),
        mgr,
        cfg,
        ThreadedDatapaths::new(),
    );
    let t = Instant::now();
    common::install_offloaded(&mut p, flows);
    eprintln!(
        "{flows} offloaded megaflows installed in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let slow = Arc::new(Mutex::new(p));
    // Each mode upcalls packets no mode has seen (a new megaflow each,
    // but for the few the workload repeats).
    let mut seed = 1;
    let mut fresh = |n| {
        seed += 1;
        packets(n, &rules, seed)
    };
    let pace = Some(Duration::from_micros(250));
    let paced_budget = Duration::from_secs(10);
    let mut report = |name: &str, mode: (Passes, Install)| {
        let (lat, done, _, n) = run(&slow, mode, &fresh(upcalls), pace, paced_budget);
        eprintln!("{name}: {done} upcalls over {n} passes");
        (quantile(&lat, 0.99), max(&lat))
    };
    let (idle_p99, idle_max) = report("idle", (Passes::None, Install::Staged));
    let (p99, worst) = report("passes", (Passes::Batched, Install::Staged));
    let (locked_p99, locked_max) = report("passes, locked", (Passes::Batched, Install::Locked));
    println!("bench: slowpath.upcall_p99_us_idle {idle_p99:.0} us");
    println!("bench: slowpath.upcall_max_us_idle {idle_max:.0} us");
    println!("bench: slowpath.upcall_p99_us_during_pass {p99:.0} us");
    println!("bench: slowpath.upcall_max_us_during_pass {worst:.0} us");
    println!("bench: slowpath.upcall_p99_us_during_pass_locked {locked_p99:.0} us");
    println!("bench: slowpath.upcall_max_us_during_pass_locked {locked_max:.0} us");

    // Setup rate: a handler that never pauses, for 2 s each, idle and
    // with passes alternating (three of each; medians), so the growth of
    // the tables weighs on both alike.
    let rate_budget = Duration::from_secs(2);
    let mut rate = |passes: Passes| {
        let pkts = fresh(300_000);
        let (_, done, secs, n) = run(&slow, (passes, Install::Staged), &pkts, None, rate_budget);
        eprintln!("setup: {done} upcalls in {secs:.2} s over {n} passes");
        done as f64 / secs
    };
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        idle.push(rate(Passes::None));
        busy.push(rate(Passes::Batched));
    }
    let (idle, busy) = (quantile(&idle, 0.5), quantile(&busy, 0.5));
    println!("bench: slowpath.setup_per_s_idle {idle:.0} upcalls/s");
    println!("bench: slowpath.setup_per_s_during_pass {busy:.0} upcalls/s");
    println!(
        "bench: slowpath.setup_during_pass_ratio {:.2}",
        busy / idle.max(1.0)
    );
    // Handlers: translate+install throughput of 2 handler threads over
    // 1, no pass running, 2 s each, alternating (three of each; medians).
    let mut handlers = |n: usize| {
        let pkts: Vec<_> = (0..n).map(|_| fresh(600_000)).collect();
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let done: usize = std::thread::scope(|s| {
            let threads: Vec<_> = pkts
                .iter()
                .enumerate()
                .map(|(h, pkts)| {
                    let (slow, stop) = (&slow, &stop);
                    s.spawn(move || {
                        let bridge = slow.lock().bridge_handle();
                        let setup = slow.lock().flow_setup().expect("threaded datapaths");
                        let mut sink = CountSink::default();
                        let mut done = 0;
                        for chunk in pkts.chunks(HANDLER_BATCH) {
                            if stop.load(Ordering::Relaxed) || started.elapsed() > rate_budget {
                                break;
                            }
                            handle(
                                slow,
                                (&setup, Install::Staged, h),
                                &bridge,
                                chunk,
                                &mut sink,
                            );
                            done += chunk.len();
                        }
                        // The first to run out stops the others: every
                        // handler is busy for the whole measure.
                        stop.store(true, Ordering::Relaxed);
                        done
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("handler"))
                .sum()
        });
        let secs = started.elapsed().as_secs_f64();
        eprintln!("{n} handler(s): {done} upcalls in {secs:.2} s");
        done as f64 / secs
    };
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        one.push(handlers(1));
        two.push(handlers(2));
    }
    let (one, two) = (quantile(&one, 0.5), quantile(&two, 0.5));
    println!("bench: slowpath.setup_per_s_1_handler {one:.0} upcalls/s");
    println!("bench: slowpath.setup_per_s_2_handlers {two:.0} upcalls/s");
    println!("bench: slowpath.handlers_2_vs_1 {:.2}", two / one.max(1.0));

    // What the batches cost a pass no one waits for, once the flows the
    // handlers made are offloaded (a pass offloads what is pending).
    {
        let mut g = slow.lock();
        g.flush_offloads(Timestamp(T0.0 + SEC));
        g.revalidate(Timestamp(T0.0 + SEC));
    }
    let pass_ms = |batched: bool| {
        let mut g = slow.lock();
        let now = Timestamp(T0.0 + SEC);
        let t = Instant::now();
        if batched {
            pass_in_batches(&mut g, now, |p| p);
        } else {
            g.revalidate(now);
        }
        t.elapsed().as_secs_f64() * 1e3
    };
    let (mut batched, mut whole) = (Vec::new(), Vec::new());
    for i in 0..6 {
        // Alternating which goes first.
        if i % 2 == 0 {
            batched.push(pass_ms(true));
            whole.push(pass_ms(false));
        } else {
            whole.push(pass_ms(false));
            batched.push(pass_ms(true));
        }
    }
    let (batched, whole) = (quantile(&batched, 0.5), quantile(&whole, 0.5));
    println!("bench: slowpath.pass_ms_batched {batched:.0} ms");
    println!("bench: slowpath.pass_ms_whole {whole:.0} ms");
    println!(
        "bench: slowpath.pass_batched_vs_whole {:.2}",
        batched / whole.max(1e-9)
    );

    let g = slow.lock();
    eprintln!(
        "{} megaflows at the end, {} passes, flow limit {}",
        g.len(),
        g.stats().passes,
        g.flow_limit()
    );
}

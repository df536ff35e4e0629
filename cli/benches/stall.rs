//! How long a datapath thread stands still while the revalidator works:
//! `cargo bench -p cli --bench stall`.
//!
//! A slow path holds 1,000,000 offloaded 5-tuple megaflows in the sim
//! eSwitch (as the revalidator bench does) and drives a datapath on its
//! own thread through a link. That thread loops: apply the slow path's
//! commands and report, then run a batch of 32 packets that hit its cache,
//! and it records the longest time between two batches while the slow path
//! runs 5 revalidator passes on another thread under its lock.
//!
//! - `datapath.reval_stall_max_us`: the longest gap as eswitch runs now
//!   (the datapath thread never takes the slow path's lock);
//! - `datapath.reval_stall_locked_max_us`: the same run with the datapath
//!   thread taking the slow path's lock for each batch, as the daemon did
//!   when the whole switch sat behind one mutex (the baseline).
//!
//! Set `REVALIDATOR_FLOWS` to change the size.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use megaflow::actions::{ActionSink, UserspaceReason};
use megaflow::build::{FrameSpec, L4};
use megaflow::datapath::{link, DatapathEnd};
use megaflow::{
    extract, Actions, CacheConfig, Datapath, DpAction, Mask, Match, MeterId, PortNo, Timestamp,
};
use offload::manager::{ManagerConfig, OffloadManager};
use offload::prm::PortTable;
use offload::sim::SimBackend;
use offload::Vport;
use ofproto::{
    Bridge, OffloadMode, OffloadPolicy, Pipeline, PipelineConfig, RevalidatorConfig,
    ThreadedDatapaths,
};

const SEC: u64 = 1_000_000_000;

type Slow = Pipeline<OffloadManager<SimBackend>, ThreadedDatapaths>;

fn frame(i: u32) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | (i >> 8),
        0xc613_0001,
        L4::udp(1024 + (i & 0xff) as u16, 80),
    )
    .build()
}

struct Count(u64);

impl ActionSink for Count {
    fn output(&mut self, _: PortNo, _: &[u8]) {
        self.0 += 1;
    }
    fn userspace(&mut self, _: &UserspaceReason, _: &[u8]) {}
    fn meter(&mut self, _: MeterId, _: usize) -> bool {
        true
    }
    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

/// The datapath thread's loop until `stop`; the longest gap between two
/// batches while `measuring` is set, in microseconds. With `lock`, each
/// batch runs under the slow path's mutex.
fn datapath_loop(
    mut end: DatapathEnd,
    frames: Vec<Vec<u8>>,
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicBool>,
    lock: Option<Arc<Mutex<Slow>>>,
) -> (Datapath, f64) {
    let mut dp = Datapath::new(
        CacheConfig {
            flow_limit: 2_000_000,
            ..CacheConfig::default()
        },
        1,
    );
    let mut events = Vec::new();
    let mut sink = Count(0);
    let mut buf = Vec::with_capacity(256);
    let mut worst = Duration::ZERO;
    let mut last = Instant::now();
    let mut t = 0u64;
    while !stop.load(Ordering::Relaxed) {
        end.serve(&mut dp, 4096, &mut events);
        let guard = lock
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        for f in frames
            .iter()
            .cycle()
            .skip(t as usize % frames.len())
            .take(32)
        {
            buf.clear();
            buf.extend_from_slice(f);
            t += 1;
            let _ = dp.process(Timestamp(t), PortNo(1), &mut buf, &mut sink);
        }
        drop(guard);
        let now = Instant::now();
        if measuring.load(Ordering::Relaxed) {
            worst = worst.max(now - last);
        }
        last = now;
    }
    (dp, worst.as_secs_f64() * 1e6)
}

/// One run: the slow path with `flows` offloaded megaflows, a datapath
/// thread (taking the slow path's lock per batch if `locked`), 5 passes.
/// Returns the longest stall and the pass times.
fn run(flows: u32, locked: bool) -> (f64, Vec<f64>) {
    let ports = (1..=4u32).fold(PortTable::new(), |t, p| {
        t.with(PortNo(p), Vport::vf(p as u16).expect("vf"))
    });
    let sim = Arc::new(SimBackend::default());
    let mgr = OffloadManager::new(Arc::clone(&sim), ports, ManagerConfig::default()).expect("fdb");
    let cfg = PipelineConfig {
        offload: OffloadPolicy {
            mode: OffloadMode::All,
            ..OffloadPolicy::default()
        },
        revalidator: RevalidatorConfig {
            flow_limit: 2_000_000,
            dynamic_limit: false,
            ..RevalidatorConfig::default()
        },
        ..PipelineConfig::default()
    };
    let (l, end) = link();
    let mut dps = ThreadedDatapaths::new();
    let index = dps.add(l);
    dps.assign(PortNo(1), Some(index));
    let p: Slow = Pipeline::with_datapaths(Bridge::with_ports(1..=4), mgr, cfg, dps);
    let slow = Arc::new(Mutex::new(p));
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let hits: Vec<Vec<u8>> = (0..64).map(frame).collect();
    let dp_thread = {
        let (stop, measuring) = (Arc::clone(&stop), Arc::clone(&measuring));
        let lock = locked.then(|| Arc::clone(&slow));
        std::thread::Builder::new()
            .name("esw-dp0".into())
            .spawn(move || datapath_loop(end, hits, stop, measuring, lock))
            .expect("spawn")
    };
    let t0 = Timestamp(1_700_000_000 * SEC);
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    {
        let mut p = slow.lock().expect("slow path");
        for i in 0..flows {
            let key = extract(1, &frame(i));
            p.install_flow(&Match::new(&key, &mask), out.clone(), t0)
                .expect("install");
            if i % 4096 == 4095 {
                p.flush_offloads(t0);
            }
        }
        p.flush_offloads(t0);
        assert_eq!(p.offloaded_len(), flows as usize, "every flow offloaded");
    }
    // The datapath has applied the inserts once it hits the first frames.
    std::thread::sleep(Duration::from_secs(2));
    measuring.store(true, Ordering::Relaxed);
    let mut passes = Vec::new();
    let mut now = t0;
    for _ in 0..5 {
        now = Timestamp(now.0 + SEC / 2);
        let started = Instant::now();
        let r = slow.lock().expect("slow path").revalidate(now);
        passes.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.flows, flows as usize);
        std::thread::sleep(Duration::from_millis(20));
    }
    measuring.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let (dp, worst) = dp_thread.join().expect("datapath thread");
    assert_eq!(
        dp.len(),
        flows as usize,
        "the datapath holds every megaflow"
    );
    let st = dp.stats();
    assert!(st.hits > 0 && st.misses == 0, "{st:?}");
    (worst, passes)
}

fn main() {
    let flows: u32 = std::env::var("REVALIDATOR_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (free, passes) = run(flows, false);
    eprintln!("lock-free datapath: longest stall {free:.0} us; passes (ms): {passes:.1?}");
    let (locked, passes) = run(flows, true);
    eprintln!("datapath under the lock: longest stall {locked:.0} us; passes (ms): {passes:.1?}");
    println!("bench: datapath.reval_stall_max_us {free:.0} us");
    println!("bench: datapath.reval_stall_locked_max_us {locked:.0} us");
}

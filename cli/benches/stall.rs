//! How long a datapath thread stands still while the revalidator works:
//! `cargo bench -p cli --bench stall`.
//!
//! A slow path holds 1,000,000 offloaded 5-tuple megaflows in the sim
//! eSwitch (as the revalidator bench does) and drives a datapath on its
//! own thread through a link. That thread loops: apply the slow path's
//! commands and report, then run a batch of 32 packets that hit its cache,
//! and it records the longest time between two batches while the slow path
//! runs 5 revalidator passes under its lock on a thread of their own (the
//! daemon's `esw-revalidator`), the main thread waiting.
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

use common::{frame, SEC, T0};
use megaflow::actions::CountSink;
use megaflow::datapath::{link, DatapathEnd};
use megaflow::{CacheConfig, Datapath, PortNo, Timestamp};
use offload::manager::OffloadManager;
use offload::sim::SimBackend;
use ofproto::{Pipeline, ThreadedDatapaths};

#[path = "common/mod.rs"]
mod common;

type Slow = Pipeline<OffloadManager<SimBackend>, ThreadedDatapaths>;

/// Gaps between two datapath batches while the passes ran, microseconds.
struct Gaps(Vec<f64>);

impl Gaps {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v.get(((v.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    }

    fn max(&self) -> f64 {
        self.0.iter().copied().fold(0.0, f64::max)
    }

    fn over(&self, us: f64) -> usize {
        self.0.iter().filter(|&&g| g > us).count()
    }
}

/// The datapath thread's loop until `stop`; the gaps between two batches
/// while `measuring` is set. With `lock`, each batch runs under the slow
/// path's mutex.
fn datapath_loop(
    mut end: DatapathEnd,
    frames: Vec<Vec<u8>>,
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicBool>,
    lock: Option<Arc<Mutex<Slow>>>,
) -> (Datapath, Gaps) {
    let mut dp = Datapath::new(
        CacheConfig {
            flow_limit: 2_000_000,
            ..CacheConfig::default()
        },
        1,
    );
    let mut events = Vec::new();
    let mut sink = CountSink::default();
    let mut buf = Vec::with_capacity(256);
    // Touched before measuring: a page fault of the recorder itself can
    // wait for the address-space lock while the pass maps or unmaps memory,
    // which would measure the bench, not the datapath.
    let mut gaps = vec![0.0f64; 1 << 22];
    let mut used = 0;
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
        if measuring.load(Ordering::Relaxed) && used < gaps.len() {
            gaps[used] = (now - last).as_secs_f64() * 1e6;
            used += 1;
        }
        last = now;
    }
    gaps.truncate(used);
    (dp, Gaps(gaps))
}

/// One run: the slow path with `flows` offloaded megaflows, a datapath
/// thread (taking the slow path's lock per batch if `locked`), 5 passes.
/// Returns the longest stall and the pass times.
fn run(flows: u32, locked: bool) -> (Gaps, Vec<f64>) {
    let (_sim, mgr) = common::device();
    let cfg = common::config();
    let (l, end) = link();
    let mut dps = ThreadedDatapaths::new();
    let index = dps.add(l);
    dps.assign(PortNo(1), Some(index));
    let p: Slow = Pipeline::with_datapaths(common::bridge(), mgr, cfg, dps);
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
    common::install_offloaded(&mut slow.lock().expect("slow path"), flows);
    // The datapath has applied the inserts once it hits the first frames.
    std::thread::sleep(Duration::from_secs(2));
    let passes_on = std::thread::Builder::new().name("esw-revalidator".into());
    let (slow2, measuring2) = (Arc::clone(&slow), Arc::clone(&measuring));
    let passes = passes_on
        .spawn(move || passes(&slow2, &measuring2, flows))
        .expect("spawn")
        .join()
        .expect("passes");
    stop.store(true, Ordering::Relaxed);
    let (dp, gaps) = dp_thread.join().expect("datapath thread");
    assert_eq!(
        dp.len(),
        flows as usize,
        "the datapath holds every megaflow"
    );
    let st = dp.stats();
    assert!(st.hits > 0 && st.misses == 0, "{st:?}");
    (gaps, passes)
}

/// Five revalidator passes, measured; the pass times in milliseconds.
fn passes(slow: &Mutex<Slow>, measuring: &AtomicBool, flows: u32) -> Vec<f64> {
    measuring.store(true, Ordering::Relaxed);
    let mut passes = Vec::new();
    let mut now = T0;
    for _ in 0..5 {
        now = Timestamp(now.0 + SEC / 2);
        let started = Instant::now();
        let r = slow.lock().expect("slow path").revalidate(now);
        passes.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.flows, flows as usize);
        std::thread::sleep(Duration::from_millis(20));
    }
    measuring.store(false, Ordering::Relaxed);
    passes
}

fn main() {
    let flows = common::flows();
    let show = |what: &str, g: &Gaps, passes: &[f64]| {
        eprintln!(
            "{what}: {} batches; gap p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.0} us; \
             {} gaps over 1 ms; passes (ms): {passes:.1?}",
            g.0.len(),
            g.quantile(0.5),
            g.quantile(0.99),
            g.quantile(0.999),
            g.max(),
            g.over(1000.0)
        );
    };
    let (free, passes) = run(flows, false);
    show("lock-free datapath", &free, &passes);
    let (locked, passes) = run(flows, true);
    show("datapath under the lock", &locked, &passes);
    println!("bench: datapath.reval_stall_max_us {:.0} us", free.max());
    println!(
        "bench: datapath.reval_stall_p999_us {:.1} us",
        free.quantile(0.999)
    );
    println!(
        "bench: datapath.reval_stall_locked_max_us {:.0} us",
        locked.max()
    );
}

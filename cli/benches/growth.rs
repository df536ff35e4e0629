//! How long a handler waits for the slow path while the megaflow tables
//! and the device's grow: `cargo bench -p cli --bench growth`.
//!
//! A handler thread installs `GROWTH_FLOWS` (default 2,500,000: past
//! 2,097,152, where tables sized for a million double) 5-tuple megaflows
//! one at a time under the slow path's lock, as the daemon's handler does
//! (the datapath caches, on their own threads in the daemon, are not here),
//! while an offload thread offloads them every 2 ms (every flow is hot) in
//! the daemon's batches (`cli::live::OFFLOAD_BATCH`). Each install is timed
//! from asking for the lock to its release. Two runs, the same in all but
//! where the device calls are made:
//!
//! - `slowpath.growth_install_max_ms`: the longest, with the device calls
//!   made outside the slow path's lock (`cli::live::offload_outside`, as
//!   the daemon runs them);
//! - `slowpath.growth_install_max_ms_device_under_lock`: the same with
//!   each offload batch made under the lock (as eswitch did before; the
//!   baseline);
//! - `slowpath.growth_install_p9999_us` (and `_device_under_lock`): the
//!   99.99th percentile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cli::live::{offload_outside, OFFLOAD_BATCH};
use common::{frame, T0};
use megaflow::extract::extract;
use megaflow::{Actions, DpAction, Mask, Match, PortNo};
use offload::manager::OffloadManager;
use offload::sim::SimBackend;
use ofproto::{Pipeline, SharedOffload, ThreadedDatapaths};
use parking_lot::Mutex;

#[path = "common/mod.rs"]
mod common;

type Slow = Pipeline<SharedOffload<OffloadManager<SimBackend>>, ThreadedDatapaths>;

/// Install latencies (µs) of one run, sorted.
fn run(flows: u32, outside: bool) -> Vec<f64> {
    let (_sim, mgr) = common::device();
    let mut cfg = common::config();
    cfg.revalidator.flow_limit = flows as usize + 1;
    cfg.revalidator.port_flow_limit = 0;
    let dev = SharedOffload::new(mgr);
    // The datapaths' caches are theirs, on their threads (none here): the
    // slow path only queues their inserts, as in the daemon.
    let slow = Arc::new(Mutex::new(Pipeline::with_datapaths(
        common::bridge(),
        dev.clone(),
        cfg,
        ThreadedDatapaths::new(),
    )));
    let done = Arc::new(AtomicBool::new(false));
    let offloader = {
        let (slow, done) = (Arc::clone(&slow), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(2));
                if outside {
                    offload_outside(&slow, &dev, T0, |p: &mut Slow| p);
                } else {
                    let mut g = slow.lock();
                    while !g.offload_tick_some(T0, OFFLOAD_BATCH) {
                        parking_lot::MutexGuard::bump(&mut g);
                    }
                }
            }
        })
    };
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let mut lat = Vec::with_capacity(flows as usize);
    let started = Instant::now();
    for i in 0..flows {
        let m = Match::new(&extract(1, &frame(i)), &mask);
        let t = Instant::now();
        slow.lock()
            .install_flow(&m, out.clone(), T0)
            .expect("install");
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    done.store(true, Ordering::Relaxed);
    offloader.join().expect("offload thread");
    eprintln!(
        "device calls {}: {flows} megaflows in {:.1} s, {} offloaded",
        if outside {
            "outside the lock"
        } else {
            "under the lock"
        },
        started.elapsed().as_secs_f64(),
        slow.lock().offloaded_len()
    );
    lat.sort_by(f64::total_cmp);
    lat
}

fn main() {
    let flows: u32 = std::env::var("GROWTH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_500_000);
    for (outside, suffix) in [(true, ""), (false, "_device_under_lock")] {
        let lat = run(flows, outside);
        let max = lat.last().copied().unwrap_or(0.0);
        let p9999 = lat[((lat.len() - 1) as f64 * 0.9999) as usize];
        println!(
            "bench: slowpath.growth_install_max_ms{suffix} {:.1} ms",
            max / 1e3
        );
        println!("bench: slowpath.growth_install_p9999_us{suffix} {p9999:.0} us");
    }
}

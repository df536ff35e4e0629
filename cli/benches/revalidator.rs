//! Revalidator benchmark: `cargo bench -p cli --bench revalidator`.
//!
//! Prints `bench: revalidator.pass_1m_offloaded <ms> ms`: the median of 5
//! passes over 1,000,000 offloaded 5-tuple megaflows in the sim eSwitch
//! (one bulk counter query per 4,096-counter bulk, the fold of hardware
//! deltas into megaflow stats, the idle check; nothing to re-translate).
//! Between passes, 100,000 packets of random flows go through the sim so
//! the fold has deltas to add. Set `REVALIDATOR_FLOWS` to change the size.
//!
//! Also `bench: slowpath.bytes_per_megaflow_1m`: the growth of the
//! process's resident set while the 1M megaflows are installed and
//! offloaded, per megaflow (slow-path record, datapath cache, offload
//! manager and sim device together).

use std::time::Instant;

use common::{flows, frame, SEC, T0};
use megaflow::Timestamp;
use offload::sim::Output;
use offload::Vport;
use ofproto::Pipeline;

#[path = "common/mod.rs"]
mod common;

/// The process's resident set, from /proc/self/statm (pages of 4 KiB).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn main() {
    let flows = flows();
    let (sim, mgr) = common::device();
    let domain = mgr.domain();
    let mut p = Pipeline::new(common::bridge(), mgr, common::config());
    let t0 = T0;
    let setup = Instant::now();
    let rss_before = rss_bytes();
    common::install_offloaded(&mut p, flows);
    let rss_after = rss_bytes();
    eprintln!(
        "setup: {flows} megaflows offloaded in {:.1} s",
        setup.elapsed().as_secs_f64()
    );
    // What a megaflow costs the whole slow path: its record, the datapath
    // cache's copy, the offload manager's and the sim device's rule.
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        let per = b.saturating_sub(a) as f64 / f64::from(flows.max(1));
        let name = if flows == 1_000_000 {
            "slowpath.bytes_per_megaflow_1m".to_string()
        } else {
            format!("slowpath.bytes_per_megaflow_{flows}")
        };
        println!("bench: {name} {per:.0} B");
    }
    let frames: Vec<Vec<u8>> = (0..100_000u32)
        .map(|j| frame(j.wrapping_mul(2_654_435_761) % flows))
        .collect();
    let vport = Vport::vf(1).expect("vf");
    let mut passes = Vec::new();
    let mut sent = 0u64;
    let mut now = t0;
    for _ in 0..5 {
        now = Timestamp(now.0 + SEC / 2);
        let mut o = Output::new();
        for chunk in frames.chunks(32) {
            o.clear();
            sim.process_batch(domain, now.0, chunk.iter().map(|f| (vport, &f[..])), &mut o);
        }
        sent += frames.len() as u64;
        let t = Instant::now();
        let r = p.revalidate(now);
        passes.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.flows, flows as usize);
        assert_eq!(r.aged + r.modified + r.deleted, 0);
    }
    assert_eq!(p.stats().hw_packets, sent, "every hardware packet folded");
    passes.sort_by(f64::total_cmp);
    eprintln!("passes (ms): {passes:.1?}");
    let name = if flows == 1_000_000 {
        "revalidator.pass_1m_offloaded".to_string()
    } else {
        format!("revalidator.pass_{flows}_offloaded")
    };
    println!("bench: {name} {:.1} ms", passes[passes.len() / 2]);
}

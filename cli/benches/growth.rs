//! How long one step of the slow path holds its lock while the megaflow
//! tables grow: `cargo bench -p cli --bench growth`.
//!
//! Installs `GROWTH_FLOWS` (default 2,500,000: past 2,097,152, where a map
//! sized for a million doubles) 5-tuple megaflows one at a time, as a
//! handler does, offloading them in the live daemon's batches
//! (`cli::live::OFFLOAD_BATCH`) as the offload thread does, and times each
//! call: each is one hold of the daemon's slow-path lock, which every
//! handler waits for.
//!
//! - `slowpath.growth_install_max_ms`: the longest single install;
//! - `slowpath.growth_offload_max_ms`: the longest single offload batch;
//! - `slowpath.growth_install_p9999_us`: the 99.99th percentile install.

use std::time::Instant;

use common::{frame, T0};
use megaflow::extract::extract;
use megaflow::{Actions, DpAction, Mask, Match, PortNo};
use ofproto::Pipeline;

#[path = "common/mod.rs"]
mod common;

fn main() {
    let flows: u32 = std::env::var("GROWTH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_500_000);
    let (_sim, mgr) = common::device();
    let mut cfg = common::config();
    cfg.revalidator.flow_limit = flows as usize + 1;
    cfg.revalidator.port_flow_limit = 0;
    let mut p = Pipeline::new(common::bridge(), mgr, cfg);
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    let mut installs = Vec::with_capacity(flows as usize);
    let (mut offload_max, mut at_offload) = (0f64, 0u32);
    let started = Instant::now();
    for i in 0..flows {
        let key = extract(1, &frame(i));
        let m = Match::new(&key, &mask);
        let t = Instant::now();
        p.install_flow(&m, out.clone(), T0).expect("install");
        installs.push(t.elapsed().as_secs_f64() * 1e6);
        if i % cli::live::OFFLOAD_BATCH as u32 == 0 {
            let t = Instant::now();
            p.flush_offloads_some(T0, cli::live::OFFLOAD_BATCH);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if ms > offload_max {
                (offload_max, at_offload) = (ms, i);
            }
        }
    }
    let (at_install, worst) =
        installs.iter().enumerate().fold(
            (0, 0f64),
            |(bi, b), (i, &v)| if v > b { (i, v) } else { (bi, b) },
        );
    eprintln!(
        "{flows} megaflows in {:.1} s; longest install at #{at_install}, longest offload batch at #{at_offload}",
        started.elapsed().as_secs_f64()
    );
    installs.sort_by(f64::total_cmp);
    let p9999 = installs[((installs.len() - 1) as f64 * 0.9999) as usize];
    println!(
        "bench: slowpath.growth_install_max_ms {:.1} ms",
        worst / 1e3
    );
    println!("bench: slowpath.growth_offload_max_ms {offload_max:.1} ms");
    println!("bench: slowpath.growth_install_p9999_us {p9999:.0} us");
}

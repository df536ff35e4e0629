//! Revalidator benchmark: `cargo bench -p cli --bench revalidator`.
//!
//! Prints `bench: revalidator.pass_1m_offloaded <ms> ms`: the median of 5
//! passes over 1,000,000 offloaded 5-tuple megaflows in the sim eSwitch
//! (one bulk counter query per 4,096-counter bulk, the fold of hardware
//! deltas into megaflow stats, the idle check; nothing to re-translate).
//! Between passes, 100,000 packets of random flows go through the sim so
//! the fold has deltas to add. Set `REVALIDATOR_FLOWS` to change the size.

use std::sync::Arc;
use std::time::Instant;

use megaflow::build::{FrameSpec, L4};
use megaflow::{extract, Actions, DpAction, Mask, Match, PortNo, Timestamp};
use offload::manager::{ManagerConfig, OffloadManager};
use offload::prm::PortTable;
use offload::sim::{Output, SimBackend};
use offload::Vport;
use ofproto::{Bridge, OffloadMode, OffloadPolicy, Pipeline, PipelineConfig, RevalidatorConfig};

const SEC: u64 = 1_000_000_000;

fn frame(i: u32) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | (i >> 8),
        0xc613_0001,
        L4::udp(1024 + (i & 0xff) as u16, 80),
    )
    .build()
}

fn main() {
    let flows: u32 = std::env::var("REVALIDATOR_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let ports = (1..=4u32).fold(PortTable::new(), |t, p| {
        t.with(PortNo(p), Vport::vf(p as u16).expect("vf"))
    });
    let sim = Arc::new(SimBackend::default());
    let mgr = OffloadManager::new(Arc::clone(&sim), ports, ManagerConfig::default()).expect("fdb");
    let domain = mgr.domain();
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
    let mut p = Pipeline::new(Bridge::with_ports(1..=4), mgr, cfg);
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let t0 = Timestamp(1_700_000_000 * SEC);
    let setup = Instant::now();
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
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
    eprintln!(
        "setup: {flows} megaflows offloaded in {:.1} s",
        setup.elapsed().as_secs_f64()
    );
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

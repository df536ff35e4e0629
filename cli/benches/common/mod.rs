//! What the revalidator and stall benchmarks share: a slow path holding N
//! offloaded 5-tuple megaflows in the sim eSwitch.

// Each bench uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use megaflow::frame::{FrameSpec, L4};
use megaflow::{extract, Actions, DpAction, Mask, Match, PortNo, Timestamp};
use offload::manager::{ManagerConfig, OffloadManager};
use offload::prm::PortTable;
use offload::sim::SimBackend;
use offload::Vport;
use ofproto::{
    Bridge, Datapaths, OffloadMode, OffloadPolicy, Pipeline, PipelineConfig, RevalidatorConfig,
};

pub const SEC: u64 = 1_000_000_000;

/// The time the flows are installed at.
pub const T0: Timestamp = Timestamp(1_700_000_000 * SEC);

/// Flow `i`'s frame: UDP from 198.18.x.y:1024+z to 198.19.0.1:80.
pub fn frame(i: u32) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | (i >> 8),
        0xc613_0001,
        L4::udp(1024 + (i & 0xff) as u16, 80),
    )
    .build()
}

/// The flow count: `REVALIDATOR_FLOWS`, else 1,000,000.
pub fn flows() -> u32 {
    std::env::var("REVALIDATOR_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// The sim device and an offload manager on it (ports 1..4 on VFs 1..4).
pub fn device() -> (Arc<SimBackend>, OffloadManager<SimBackend>) {
    let ports = (1..=4u32).fold(PortTable::new(), |t, p| {
        t.with(PortNo(p), Vport::vf(p as u16).expect("vf"))
    });
    let sim = Arc::new(SimBackend::default());
    let mgr = OffloadManager::new(Arc::clone(&sim), ports, ManagerConfig::default()).expect("fdb");
    (sim, mgr)
}

/// Offload everything at once, no dynamic flow limit, room for 2M flows.
pub fn config() -> PipelineConfig {
    PipelineConfig {
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
    }
}

/// A bridge with ports 1..4.
pub fn bridge() -> Bridge {
    Bridge::with_ports(1..=4)
}

/// Installs `flows` 5-tuple megaflows (output:2) and offloads them all.
pub fn install_offloaded<D: Datapaths>(
    p: &mut Pipeline<OffloadManager<SimBackend>, D>,
    flows: u32,
) {
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for i in 0..flows {
        let key = extract(1, &frame(i));
        p.install_flow(&Match::new(&key, &mask), out.clone(), T0)
            .expect("install");
        if i % 4096 == 4095 {
            p.flush_offloads(T0);
        }
    }
    p.flush_offloads(T0);
    assert_eq!(p.offloaded_len(), flows as usize, "every flow offloaded");
}

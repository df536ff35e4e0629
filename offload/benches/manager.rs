//! Offload manager benchmark: `cargo bench -p offload --bench manager`.
//!
//! Prints `bench: <name> <value> <unit>` (median of rounds):
//! - `offload.manager.offload_rate` Krules/s: 200,000 5-tuple megaflows
//!   (from 4 ports, output to another) through `FlowOffload::install` into
//!   the sim eSwitch: PRM encoding, action translation, a counter from a
//!   bulk, the shared dest_vport, the matcher lookup and the rule insert;
//! - `offload.manager.poll_200k` ms: one `poll` of those 200,000 rules' counters
//!   (bulk queries and the per-flow stats list).

use std::sync::Arc;
use std::time::Instant;

use megaflow::offload::FlowOffload;
use megaflow::{Actions, DpAction, FlowKey, Mask, Match, PortNo};
use offload::manager::{ManagerConfig, OffloadManager};
use offload::prm::PortTable;
use offload::sim::SimBackend;
use offload::Vport;

const FLOWS: u32 = 200_000;
const ROUNDS: usize = 3;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let ports = (1..=8u32).fold(PortTable::new(), |t, p| {
        t.with(PortNo(p), Vport::vf(p as u16).expect("vf"))
    });
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let flows: Vec<(Match, Actions)> = (0..FLOWS)
        .map(|i| {
            let mut k = FlowKey::ZERO;
            k.set_in_port(u64::from(1 + i % 4));
            k.set_eth_type(0x0800);
            k.set_ip_proto(6);
            k.set_ipv4_src(u64::from(0xc612_0000 | (i >> 8)));
            k.set_ipv4_dst(0xc613_0001);
            k.set_tp_src(u64::from(1024 + (i & 0xff)));
            k.set_tp_dst(80);
            let out = Actions::new(vec![DpAction::Output(PortNo(5 + i % 4))]);
            (Match::new(&k, &mask), out)
        })
        .collect();
    let mut rates = Vec::new();
    let mut polls = Vec::new();
    for _ in 0..ROUNDS {
        let mut mgr = OffloadManager::new(
            Arc::new(SimBackend::default()),
            ports.clone(),
            ManagerConfig::default(),
        )
        .expect("fdb");
        let t = Instant::now();
        for (m, a) in &flows {
            mgr.install(m, a).expect("install");
        }
        rates.push(f64::from(FLOWS) / t.elapsed().as_secs_f64() / 1e3);
        let mut out = Vec::with_capacity(FLOWS as usize);
        let t = Instant::now();
        mgr.poll(&mut out).expect("poll");
        polls.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(out.len(), FLOWS as usize);
    }
    println!(
        "bench: offload.manager.offload_rate {:.0} Krules/s",
        median(rates)
    );
    println!("bench: offload.manager.poll_200k {:.2} ms", median(polls));
}

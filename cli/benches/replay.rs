//! Replay benchmark: `cargo bench -p cli --bench replay`.
//!
//! Writes the demo workload with 1,000,000 packets and 100,000 flows to a
//! pcapng file (as `eswitchd generate` does), then replays it at full speed
//! through the whole pipeline (sim eSwitch, megaflow cache, upcalls,
//! offload, revalidator) three times. Prints (medians):
//! - `bench: demo.generate_mpps <v> Mpps`: the generator alone;
//! - `bench: replay.pps <v> Mpps`: packets replayed per wall-clock second,
//!   capture reading included (what `eswitchd replay --bench` prints).
//!
//! `REPLAY_PACKETS` / `REPLAY_FLOWS` change the size.

use std::time::Instant;

use cli::demo::{self, DemoSpec};
use cli::replay::{self, ReplayJob, Source, Speed};
use cli::switch::FlowFile;
use megaflow::port::PcapReader;
use offload::sim::SimConfig;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let spec = DemoSpec {
        packets: env("REPLAY_PACKETS", 1_000_000),
        flows: env("REPLAY_FLOWS", 100_000) as u32,
        ..DemoSpec::default()
    };
    let mut gen = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut g = demo::generate(&spec);
        let mut buf = Vec::with_capacity(2048);
        let mut n = 0u64;
        while g.next_into(&mut buf).is_some() {
            n += 1;
        }
        gen.push(n as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    let dir = std::env::temp_dir().join(format!("eswitch-replay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("demo.pcapng");
    let written = demo::write_pcapng(&spec, &pcap).expect("write capture");
    let size = std::fs::metadata(&pcap).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "capture: {written} packets, {} flows, {:.0} MB",
        spec.flows,
        size as f64 / 1e6
    );
    let flows = FlowFile::parse(&format!(
        "{}\n{}",
        demo::meter_lines(),
        demo::flow_table(spec.vms)
    ))
    .expect("demo table");
    let mut pps = Vec::new();
    for _ in 0..3 {
        let job = ReplayJob {
            source: Source::Capture(Box::new(PcapReader::open(&pcap).expect("open capture"))),
            ports: replay::default_ports(spec.vms),
            flows: flows.clone(),
            pipeline: ofproto::PipelineConfig::default(),
            sim: SimConfig::default(),
            speed: Speed::Max,
            progress: false,
            dump_flows: false,
            underlay: None,
            conntrack: Default::default(),
        };
        let s = replay::run(job).expect("replay");
        assert_eq!(s.packets, written);
        eprintln!(
            "replay: {:.2} Mpps, {} megaflows, {} offloaded, {:.1}% in hardware",
            s.mpps,
            s.megaflows_created,
            s.offloaded,
            s.hw_share * 100.0
        );
        pps.push(s.mpps);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("bench: demo.generate_mpps {:.2} Mpps", median(gen));
    println!("bench: replay.pps {:.3} Mpps", median(pps));
}

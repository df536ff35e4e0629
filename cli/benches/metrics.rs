//! Metrics benchmark: `cargo bench -p cli --bench metrics`.
//!
//! Prints, with 100,000 megaflows in the switch (5-tuple masks, offloaded
//! to the sim eSwitch; `METRICS_FLOWS` changes the count), the medians of
//! 11 scrapes:
//! - `bench: metrics.scrape_ms_100k_flows`: `GET /metrics` over HTTP from
//!   the endpoint eswitchd serves, to the last byte (target ≤ 50 ms);
//! - `bench: metrics.snapshot_encode_ms_100k_flows`: of that, the part
//!   under the slow-path lock and the encoding.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli::live::metrics::{encode_snapshot, serve, LiveMetrics, Scrape, Snapshot};
use cli::switch::{FlowFile, SimSwitch};
use common::{frame, T0};
use megaflow::{Actions, DpAction, Mask, Match, PortNo};
use offload::sim::SimConfig;

#[path = "common/mod.rs"]
mod common;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let flows: u32 = std::env::var("METRICS_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let ports = cli::replay::default_ports(4);
    let table = FlowFile::parse("priority=0,actions=drop").expect("table");
    let mut sw =
        SimSwitch::new(&ports, &table, common::config(), SimConfig::default(), T0).expect("switch");
    let mask = Mask::exact_fields(Mask::IPV4_5TUPLE);
    let out = Actions::new(vec![DpAction::Output(PortNo(2))]);
    for i in 0..flows {
        let key = megaflow::extract::extract(1, &frame(i));
        sw.pipeline_mut()
            .install_flow(&Match::new(&key, &mask), out.clone(), T0)
            .expect("install");
        if i % 4096 == 4095 {
            sw.pipeline_mut().flush_offloads(T0);
        }
    }
    sw.pipeline_mut().flush_offloads(T0);
    eprintln!(
        "setup: {} megaflows, {} offloaded",
        sw.pipeline().len(),
        sw.pipeline().offloaded_len()
    );
    let m = Arc::new(LiveMetrics::default());
    let mut local = Vec::new();
    for _ in 0..11 {
        let t = Instant::now();
        let text = encode_snapshot(&Snapshot::of(&sw), &[], &m, "sim").expect("encode");
        local.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(text.contains("eswitch_megaflows{state=\"offloaded\"}"));
    }
    let sw = Arc::new(Mutex::new(sw));
    let scrape: Scrape = {
        let (sw, m) = (Arc::clone(&sw), Arc::clone(&m));
        Arc::new(move || {
            let snap = Snapshot::of(&sw.lock().expect("switch"));
            encode_snapshot(&snap, &[], &m, "sim").map_err(|e| e.to_string())
        })
    };
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    l.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            serve(
                tokio::net::TcpListener::from_std(l).expect("listener"),
                scrape,
            )
            .await
        })
    });
    let mut http = Vec::new();
    for _ in 0..11 {
        let t = Instant::now();
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut r = Vec::new();
        s.read_to_end(&mut r).expect("read");
        http.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(r.starts_with(b"HTTP/1.1 200"));
    }
    eprintln!("scrapes over HTTP (ms): {http:.2?}");
    println!("bench: metrics.scrape_ms_100k_flows {:.2} ms", median(http));
    println!(
        "bench: metrics.snapshot_encode_ms_100k_flows {:.2} ms",
        median(local)
    );
}

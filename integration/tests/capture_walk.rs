//! Scenario: real traffic between two network namespaces, captured by
//! tcpdump, walks the software datapath.
//!
//! Two namespaces (a "VM" and a "peer") joined by a veth pair exchange ping
//! and UDP on 198.18.0.0/15 while tcpdump captures on the VM side. The
//! capture is replayed through `PcapReader` -> `extract` -> megaflow cache:
//! the first packet of each conversation misses and installs a megaflow
//! (in_port, eth_type, ip_proto, addresses) whose actions rewrite the DSCP
//! and output to port 2; later packets hit it. Outputs are written with
//! `PcapWriter` and read back by tcpdump itself.
//!
//! Needs root (namespaces) plus `ip` and `tcpdump`; prints `SKIP` otherwise.

use std::time::Duration;

use integration::netns::{run, Lab};
use megaflow::actions::{execute, CollectSink, DpAction};
use megaflow::port::{PacketBatch, PcapReader, PcapWriter, Port};
use megaflow::{
    extract_into, Actions, CacheConfig, Field, FlowKey, Mask, Match, MegaflowCache, PortNo,
};

const TEST: &str = "capture_walk";

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("eswitch-{TEST}-{}-{name}", std::process::id()))
}

#[test]
fn captured_traffic_walks_the_datapath() {
    if !prereq::netns(TEST, &["ip", "tcpdump", "ping"]) {
        return;
    }
    let capture = tmp("in.pcap");
    let output = tmp("out.pcap");
    let result = scenario(&capture, &output);
    let _ = std::fs::remove_file(&capture);
    let _ = std::fs::remove_file(&output);
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn scenario(capture: &std::path::Path, output: &std::path::Path) -> Result<(), String> {
    let mut lab = Lab::new("eswcw");
    let vm = lab.netns("vm")?;
    let peer = lab.netns("peer")?;
    let (vm_if, _) = lab.veth(&vm, "198.18.7.1/24", &peer, "198.18.7.2/24")?;

    let cap = capture.display().to_string();
    let tcpdump = lab.spawn_in(
        &vm,
        &[
            "tcpdump",
            "--immediate-mode",
            "-i",
            &vm_if,
            "-w",
            &cap,
            "-U",
            "-n",
            "-c",
            "64",
            "ip",
        ],
    )?;
    // tcpdump needs a moment to open its socket; wait for the file, bounded.
    for _ in 0..100 {
        if capture.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));

    lab.exec(
        &vm,
        &["ping", "-c", "4", "-i", "0.05", "-W", "1", "198.18.7.2"],
    )?;
    for i in 0..3 {
        // UDP from the VM; the peer's port is closed, which is fine here.
        lab.exec(
            &vm,
            &[
                "bash",
                "-c",
                &format!("echo datagram{i} > /dev/udp/198.18.7.2/9999"),
            ],
        )?;
    }
    std::thread::sleep(Duration::from_millis(300));
    lab.stop(tcpdump, Duration::from_secs(3));

    // Replay the capture: in_port 1 is the VM's port.
    let mut reader = PcapReader::open(capture).map_err(|e| e.to_string())?;
    let mut writer = PcapWriter::create(output).map_err(|e| e.to_string())?;
    let mut cache = MegaflowCache::new(CacheConfig::default());
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::Ipv4Src)
        .with_exact(Field::Ipv4Dst);
    let actions = Actions::new(vec![DpAction::SetDscp(10), DpAction::Output(PortNo(2))]);

    let mut batch = PacketBatch::new();
    let (mut packets, mut upcalls, mut hits, mut echo_requests, mut udp_from_vm) = (0, 0, 0, 0, 0);
    loop {
        match reader.recv_batch(&mut batch) {
            Ok(_) => {}
            Err(e) if e.is_eof() => break,
            Err(e) => return Err(e.to_string()),
        }
        for p in &batch {
            packets += 1;
            let mut key = FlowKey::ZERO;
            let ex = extract_into(1, p.data, &mut key);
            if ex.error.is_some() {
                return Err(format!("captured frame did not parse: {:?}", ex.error));
            }
            if key.eth_type() != 0x0800 {
                continue;
            }
            if key.ip_proto() == 1 && key.icmp_type() == 8 {
                echo_requests += 1;
            }
            if key.ip_proto() == 17 && key.tp_dst() == 9999 {
                udp_from_vm += 1;
            }
            let handle = match cache.lookup(&key, p.data.len() as u32, p.meta.ts) {
                Some(h) => {
                    hits += 1;
                    h
                }
                None => {
                    upcalls += 1;
                    cache
                        .insert(&Match::new(&key, &mask), actions.clone(), 1)
                        .map_err(|e| e.to_string())?
                }
            };
            let acts = cache.actions(handle).ok_or("handle went stale")?.clone();
            let mut buf = p.data.to_vec();
            let mut layout = ex.layout;
            let mut sink = CollectSink::new();
            execute(&acts, &mut buf, &mut layout, &mut sink);
            for (port, bytes) in &sink.outputs {
                if *port != PortNo(2) {
                    return Err(format!("output to unexpected port {port}"));
                }
                let mut out_key = FlowKey::ZERO;
                extract_into(2, bytes, &mut out_key);
                if out_key.ip_dscp() != 10 || out_key.ipv4_dst() != key.ipv4_dst() {
                    return Err(format!("rewrite lost: {out_key:?}"));
                }
                writer
                    .send_batch(&[bytes], p.meta.ts)
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    writer.flush().map_err(|e| e.to_string())?;
    drop(writer);

    if echo_requests < 4 || udp_from_vm < 3 {
        return Err(format!(
            "capture incomplete: {echo_requests} echo requests, {udp_from_vm} UDP datagrams of {packets} packets"
        ));
    }
    // Conversations: VM->peer ICMP, peer->VM ICMP, VM->peer UDP, peer->VM
    // ICMP port unreachable (same key as the echo replies: ICMP peer->VM).
    if upcalls != cache.len() || upcalls > 4 {
        return Err(format!("{upcalls} upcalls for {} megaflows", cache.len()));
    }
    if hits + upcalls != packets {
        return Err(format!(
            "{hits} hits + {upcalls} upcalls != {packets} packets"
        ));
    }
    let total: u64 = cache.iter().map(|f| f.stats().packets).sum();
    if total != hits as u64 {
        return Err(format!("flow stats count {total} packets, {hits} hits"));
    }

    // The rewritten packets are a valid capture for tcpdump, DSCP 10 = tos 0x28.
    let text = run(
        "tcpdump",
        &["-r", &output.display().to_string(), "-nn", "-v"],
    )?;
    let lines = text.lines().filter(|l| l.contains("tos 0x28")).count();
    if lines != packets {
        return Err(format!(
            "tcpdump shows {lines} rewritten packets of {packets}:\n{text}"
        ));
    }
    Ok(())
}

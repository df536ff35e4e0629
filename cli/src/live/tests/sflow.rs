//! sFlow export from the live daemon (memory ports) to real collectors:
//! sfcapd (nfdump's sFlow collector) stores the flow samples it receives
//! and nfdump prints them; a plain UDP socket keeps the datagrams for
//! Wireshark's sFlow dissector, which also reads the counter samples
//! (sfcapd does not store those).

use std::net::UdpSocket;
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, Stdio};

use megaflow::port::PacketMeta;

use crate::sflow::tests::word;

use super::openflow_tests::Child;
use super::tests::{config, limits, rep, wait_for, MemFactory};
use super::*;

/// A UDP port free on the loopback now.
fn free_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

/// sfcapd writing into its own directory; killed (by [`Child`]) and
/// its directory removed on drop.
struct Sfcapd {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Sfcapd {
    fn start(bin: &FsPath) -> Sfcapd {
        let port = free_udp_port();
        let dir = std::env::temp_dir().join(format!("esw-sfcapd-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let child = Child(
            Command::new(bin)
                .args([
                    "-b",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-t",
                    "3600",
                    "-w",
                ])
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sfcapd"),
        );
        // Bound once the port is taken.
        wait_for("sfcapd to listen", || {
            UdpSocket::bind(("127.0.0.1", port)).is_err()
        });
        Sfcapd { child, dir, port }
    }

    /// Stops it (SIGTERM: it closes its file) and gives the files it
    /// wrote.
    fn finish(&mut self) -> Vec<PathBuf> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nfcapd.") && !n.contains("current"))
        });
        files
    }
}

impl Drop for Sfcapd {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One flow record as nfdump prints it.
#[derive(Debug)]
struct Record {
    input: u32,
    output: u32,
    packets: u64,
    bytes: u64,
    src: String,
    dst: String,
    sport: u16,
    dport: u16,
}

fn nfdump_records(bin: &FsPath, files: &[PathBuf]) -> Vec<Record> {
    let mut out = Vec::new();
    for f in files {
        let o = Command::new(bin)
            .args([
                "-q",
                "-N",
                "-o",
                "fmt:%in %out %pkt %byt %sa %da %sp %dp",
                "-r",
            ])
            .arg(f)
            .output()
            .expect("nfdump");
        assert!(
            o.status.success(),
            "nfdump -r {}: {}",
            f.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        eprintln!(
            "nfdump: {}",
            text.lines().take(2).collect::<Vec<_>>().join("\nnfdump: ")
        );
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() != 8 {
                continue;
            }
            let n = |i: usize| w[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
            out.push(Record {
                input: n(0) as u32,
                output: n(1) as u32,
                packets: n(2),
                bytes: n(3),
                src: w[4].to_string(),
                dst: w[5].to_string(),
                sport: n(6) as u16,
                dport: n(7) as u16,
            });
        }
    }
    out
}

/// A UDP frame 198.18.0.1:`sport` → 198.18.0.2:`dport`.
fn udp(sport: u16, dport: u16) -> Vec<u8> {
    use megaflow::frame::{FrameSpec, L4};
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(sport, dport)).build()
}

/// `n` within 5 standard deviations of the samples expected of
/// `packets` sampled 1 in `rate`.
fn plausible(n: usize, packets: usize, rate: u32) -> bool {
    let p = 1.0 / f64::from(rate);
    let mean = packets as f64 * p;
    let sigma = (packets as f64 * p * (1.0 - p)).sqrt();
    (n as f64 - mean).abs() <= 5.0 * sigma
}

#[test]
fn sfcapd_gets_the_sampled_headers_ports_and_rates_and_wireshark_the_counters() {
    const T: &str = "sfcapd_gets_the_sampled_headers_ports_and_rates_and_wireshark_the_counters";
    let (Some(sfcapd), Some(nfdump), Some(tshark)) = (
        prereq::tool(T, "sfcapd"),
        prereq::tool(T, "nfdump"),
        prereq::tool(T, "tshark"),
    ) else {
        return;
    };
    let mut collector = Sfcapd::start(&sfcapd);
    let raw = UdpSocket::bind("127.0.0.1:0").expect("bind");
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut cfg = config();
    cfg.sflow.collectors = vec![
        format!("127.0.0.1:{}", collector.port),
        raw.local_addr().expect("addr").to_string(),
    ];
    cfg.sflow.agent = Some(std::net::Ipv4Addr::new(198, 18, 0, 254));
    // vm1 sampled 1 in 10 by its port; vm3's flow by its own action, 1 in 5.
    cfg.sflow.ports.insert("vm1".into(), 10);
    cfg.sflow.polling_interval = 1;
    cfg.sflow.flush_ms = 50;
    let flows = FlowFile::parse(
        "priority=10,in_port=1,actions=output:2\n\
         priority=10,in_port=3,actions=sample(probability=13107,collector_set_id=1),output:1\n\
         priority=0,actions=drop",
    )
    .expect("flows");
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3"]);
    let mut d = Daemon::start(&cfg, &flows, factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2", "vm3"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    d.set_sflow(&cfg.sflow).expect("exporter");

    // 4,000 packets vm1 → vm2 over 8 source ports, 2,000 vm3 → vm1: the
    // first of each flow in software, the rest mostly in hardware.
    let (n1, n3) = (4000usize, 2000usize);
    let mut sent = 0usize;
    let (mut got2, mut got1) = (0usize, 0usize);
    for round in 0..(n1 / 100) {
        for i in 0..100 {
            let f = udp(4000 + ((round * 100 + i) % 8) as u16, 9);
            assert!(h["vm1"].rx.inject(&f, PacketMeta::default()));
        }
        for _ in 0..50 {
            assert!(h["vm3"].rx.inject(&udp(7000, 53), PacketMeta::default()));
        }
        sent += 150;
        wait_for("the round forwarded", || {
            got2 += h["vm2"].received().len();
            got1 += h["vm1"].received().len();
            got2 + got1 == sent
        });
    }
    assert_eq!((got2, got1), (n1, n3));
    let core = d.core();
    wait_for("every packet counted", || {
        lock(&core).counters().rx.packets == (n1 + n3) as u64
    });
    // A counter poll after the traffic.
    std::thread::sleep(Duration::from_millis(1200));
    let c = lock(&core).counters();
    drop(core);
    assert!(
        c.hw_samples > 0 && c.sw_samples > 0,
        "both paths sampled: {c:?}"
    );
    let stats = d.stop_sflow().expect("on");
    let samples = c.hw_samples + c.sw_samples;
    assert_eq!(stats.flow_samples, samples, "{stats:?} {c:?}");
    assert_eq!(stats.send_errors, 0);
    let text = d.scrape_fn(None, "sim")().expect("scrape");
    assert!(
        text.contains("eswitch_sflow_samples_dropped_total 0\n"),
        "{text}"
    );
    d.stop().expect("stop");

    let files = collector.finish();
    let records = nfdump_records(&nfdump, &files);
    let vm1: Vec<&Record> = records.iter().filter(|r| r.input == 10).collect();
    let vm3: Vec<&Record> = records.iter().filter(|r| r.input == 12).collect();
    assert_eq!(
        vm1.len() + vm3.len(),
        records.len(),
        "every sample from vm1 or vm3: {records:?}"
    );
    assert_eq!(records.len() as u64, samples, "sfcapd got every sample");
    eprintln!(
        "sfcapd: {} samples of vm1 (1:10 of {n1}), {} of vm3 (1:5 of {n3}), e.g. {:?}",
        vm1.len(),
        vm3.len(),
        records.first()
    );
    assert!(
        plausible(vm1.len(), n1, 10),
        "{} samples of {n1} at 1:10",
        vm1.len()
    );
    assert!(
        plausible(vm3.len(), n3, 5),
        "{} samples of {n3} at 1:5",
        vm3.len()
    );
    let frame_len = udp(1, 1).len() as u64;
    for r in &vm1 {
        assert_eq!((r.output, r.packets), (11, 10), "to vm2, 1 in 10: {r:?}");
        assert_eq!(r.bytes, 10 * frame_len, "{r:?}");
        assert_eq!(
            (r.src.as_str(), r.dst.as_str()),
            ("198.18.0.1", "198.18.0.2")
        );
        assert!((4000..4008).contains(&r.sport) && r.dport == 9, "{r:?}");
    }
    for r in &vm3 {
        assert_eq!((r.output, r.packets), (10, 5), "to vm1, 1 in 5: {r:?}");
        assert_eq!((r.sport, r.dport), (7000, 53), "{r:?}");
    }

    // The same datagrams through Wireshark: the counters of each port.
    let mut datagrams = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = raw.recv(&mut buf) {
        datagrams.push(buf[..n].to_vec());
    }
    let text = crate::sflow::tests::tshark_decode(&tshark, &datagrams);
    assert!(!text.contains("Malformed"), "{text}");
    assert!(text.contains("Agent address: 198.18.0.254"), "{text}");
    let last_counters = |ifindex: u32| {
        text.split("Interface index: ")
            .filter(|b| b.starts_with(&format!("{ifindex}\n")))
            .last()
            .unwrap_or_else(|| panic!("no counters of ifIndex {ifindex}:\n{text}"))
            .to_string()
    };
    let vm1 = last_counters(10);
    assert!(vm1.contains(&format!("Input Packets: {n1}\n")), "{vm1}");
    assert!(vm1.contains(&format!("Output Packets: {n3}\n")), "{vm1}");
    assert!(vm1.contains("IfOperStatus: Up"), "{vm1}");
    let vm2 = last_counters(11);
    assert!(vm2.contains(&format!("Output Packets: {n1}\n")), "{vm2}");
}

#[test]
fn the_exporter_fills_datagrams_to_their_limit_and_reports_what_the_queue_dropped() {
    use megaflow::actions::{SampleCookie, SampleOutput};

    use super::sflow::{ExportConfig, Exporter, PortSnapshot, PortsFn, SampleQueue};

    let raw = UdpSocket::bind("127.0.0.1:0").expect("bind");
    raw.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let (q, rx) = SampleQueue::new(50, 128);
    let cookie = SampleCookie {
        rate: 100,
        output: SampleOutput::Port(PortNo(2)),
    };
    // 80 offered before anything drains the queue: 30 dropped.
    for i in 0..80 {
        q.offer(PortNo(1), cookie, &udp(i, 9), crate::switch::Path::Software);
    }
    assert_eq!(q.dropped.load(Ordering::Relaxed), 30);
    let ports: PortsFn = Box::new(|| {
        vec![
            PortSnapshot {
                no: PortNo(1),
                ifindex: Some(21),
                stats: megaflow::port::PortStats {
                    rx_packets: 5000,
                    ..Default::default()
                },
                ..PortSnapshot::default()
            },
            PortSnapshot {
                no: PortNo(2),
                ifindex: Some(22),
                ..PortSnapshot::default()
            },
        ]
    });
    let cfg = ExportConfig {
        collectors: vec![raw.local_addr().expect("addr")],
        agent: std::net::Ipv4Addr::new(198, 18, 0, 254),
        polling: None,
        max_datagram: 500,
        flush: Duration::from_millis(20),
    };
    let e = Exporter::start(cfg, rx, Arc::clone(&q), ports).expect("start");
    let mut datagrams = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut samples = 0;
    while samples < 50 && Instant::now() < deadline {
        if let Ok(n) = raw.recv(&mut buf) {
            samples += word(&buf, 24);
            datagrams.push(buf[..n].to_vec());
        }
    }
    let stats = e.stop();
    assert_eq!((samples, stats.flow_samples), (50, 50), "{stats:?}");
    assert_eq!(stats.datagrams as usize, datagrams.len());
    // A flow sample here takes 64 bytes and the 60-byte frame: 3 fit in
    // 500 bytes with the header, a 4th would not.
    assert!(datagrams.iter().all(|d| d.len() <= 500 && word(d, 24) <= 3));
    assert_eq!(datagrams.len(), 17, "50 samples, 3 a datagram");
    let d = &datagrams[0];
    assert_eq!(word(d, 16), 1, "datagram sequence");
    let f = &d[28 + 8..];
    // sequence, source, rate, pool, drops, input, output
    let got: Vec<u32> = (0..7).map(|i| word(f, 4 * i)).collect();
    assert_eq!(got, [1, 21, 100, 5000, 30, 21, 22]);
}

#[test]
fn an_export_stopped_for_want_of_collectors_starts_again_when_one_is_named() {
    let raw = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mut cfg = config();
    cfg.sflow.collectors = vec![raw.local_addr().expect("addr").to_string()];
    let flows = FlowFile::parse("priority=0,actions=drop").expect("flows");
    let (factory, _h) = MemFactory::new(&["vm1"]);
    let mut d = Daemon::start(&cfg, &flows, factory, limits()).expect("start");
    d.set_sflow(&cfg.sflow).expect("on");
    let mut off = cfg.sflow.clone();
    off.collectors.clear();
    d.set_sflow(&off).expect("off");
    assert!(d.stop_sflow().is_none(), "stopped");
    // The queue's end survived the stop: a collector named again exports.
    d.set_sflow(&cfg.sflow).expect("on again");
    assert!(d.stop_sflow().is_some(), "exporting again");
}

//! The whole walk on generated packets: the sim eSwitch in front, the
//! software pipeline behind it, offload, revalidation and aging on
//! simulated time. Every test ends with `finish`, which checks that the
//! device is left empty.

use std::collections::HashMap;

use cli::config::PortSpec;
use cli::switch::{Egressor, FlowFile, Path, SimSwitch};
use megaflow::actions::{SampleCookie, SampleOutput};
use megaflow::frame::{FrameSpec, L4};
use megaflow::offload::FlowState;
use megaflow::{extract, PortNo, Timestamp};
use offload::dr::Errno;
use offload::sim::{Fault, Op, SimConfig};
use offload::Vport;
use ofproto::{OffloadPolicy, PipelineConfig};

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * MS)
}

fn ports() -> Vec<PortSpec> {
    (1..=4u32)
        .map(|i| PortSpec {
            name: format!("vm{i}"),
            no: PortNo(i),
            kind: cli::switch::PortKind::Representor,
            vport: Some(Vport::vf((i - 1) as u16).expect("vf")),
            tunnel: None,
            bridge: ofproto::BridgeNo::MAIN,
            peer: None,
        })
        .collect()
}

const TABLE: &str = "
meter=1,kbps,burst,band=type=drop,rate=800,burst_size=80
priority=100,udp,nw_dst=198.18.0.4,tp_dst=5001,actions=meter:1,output:4
priority=100,tcp,nw_dst=198.18.0.3,tp_dst=22,actions=sample(probability=16384),output:3
priority=10,ip,nw_dst=198.18.0.2,actions=output:2
priority=10,ip,nw_dst=198.18.0.3,actions=output:3
priority=10,ip,nw_dst=198.18.0.4,actions=output:4
priority=0,actions=drop
";

fn switch_with(table: &str, cfg: PipelineConfig) -> SimSwitch {
    let flows = FlowFile::parse(table).expect("table parses");
    SimSwitch::new(&ports(), &flows, cfg, SimConfig::default(), at(0)).expect("switch")
}

fn switch() -> SimSwitch {
    switch_with(TABLE, PipelineConfig::default())
}

/// Records every frame that leaves, by path.
#[derive(Default)]
struct Rec {
    tx: Vec<(PortNo, Vec<u8>, Path)>,
    /// Each sampled copy's input port, cookie and path.
    samples: Vec<(PortNo, SampleCookie, Path)>,
}

impl Egressor for Rec {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path) {
        self.tx.push((port, frame.to_vec(), path));
    }
    fn sample(&mut self, in_port: PortNo, cookie: SampleCookie, _: &[u8], path: Path) {
        self.samples.push((in_port, cookie, path));
    }
}

fn udp(sport: u16, dst: u8, dport: u16, len: usize) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0000 | u32::from(dst),
        L4::udp(sport, dport),
    )
    .macs(0x0200_0000_0001, 0x0200_0000_0000 | u64::from(dst))
    .payload(len)
    .build()
}

fn tcp(sport: u16, dst: u8, dport: u16) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0000 | u32::from(dst),
        L4::tcp(sport, dport),
    )
    .macs(0x0200_0000_0001, 0x0200_0000_0000 | u64::from(dst))
    .payload(100)
    .build()
}

fn send(sw: &mut SimSwitch, ms: u64, frame: &[u8], rec: &mut Rec) -> Path {
    let before = rec.tx.len();
    sw.receive(at(ms), &[(PortNo(1), frame)], rec);
    rec.tx
        .get(before)
        .map_or(Path::Software, |(_, _, path)| *path)
}

fn state(sw: &SimSwitch, frame: &[u8]) -> Option<FlowState> {
    sw.pipeline().find(&extract(1, frame)).map(|d| d.state)
}

#[test]
fn after_the_threshold_packets_are_forwarded_by_the_fdb_and_counted_exactly() {
    let mut sw = switch();
    let mut rec = Rec::default();
    let f = udp(1000, 2, 53, 50);
    for i in 0..3 {
        assert_eq!(send(&mut sw, i, &f, &mut rec), Path::Software, "packet {i}");
    }
    assert_eq!(state(&sw, &f), Some(FlowState::Offloaded));
    let after = 997;
    for i in 0..after {
        assert_eq!(send(&mut sw, 3 + i, &f, &mut rec), Path::Hardware);
    }
    assert_eq!(rec.tx.len() as u64, 3 + after);
    assert!(rec.tx.iter().all(|(p, b, _)| *p == PortNo(2) && *b == f));
    // One pass folds the hardware counter: exactly the packets after offload.
    sw.pipeline_mut().revalidate(at(2_000));
    let st = sw.pipeline().stats().clone();
    assert_eq!(st.hw_packets, after);
    assert_eq!(st.hw_bytes, after * f.len() as u64);
    let d = sw.pipeline().find(&extract(1, &f)).expect("flow");
    assert_eq!(d.stats.packets, 3 + after, "software + hardware, once each");
    assert_eq!(st.upcalls, 1);
    assert_eq!(st.illegal_transitions, 0);
    // The OpenFlow rule got every packet.
    let rule_packets: u64 = sw
        .pipeline()
        .bridge()
        .tables()
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r.packets))
        .sum();
    assert_eq!(rule_packets, 3 + after);
    let (c, _) = sw.finish(at(3_000)).expect("clean teardown");
    assert_eq!(c.hw_handled, after);
    assert_eq!(c.sw_handled, 3);
}

#[test]
fn an_idle_flow_leaves_hardware_and_software_within_one_interval_of_max_idle() {
    let mut sw = switch();
    let mut rec = Rec::default();
    let idle = udp(1, 2, 53, 10);
    let busy = udp(2, 3, 53, 10);
    for i in 0..3 {
        send(&mut sw, i, &idle, &mut rec);
        send(&mut sw, i, &busy, &mut rec);
    }
    assert_eq!(sw.sim().snapshot().rules, 3, "root jump + 2 flows");
    let mut gone = None;
    let mut ms = 0;
    while ms < 15_000 {
        ms += 100;
        // The busy flow runs in hardware only: no software hits at all.
        assert_eq!(send(&mut sw, ms, &busy, &mut rec), Path::Hardware);
        if gone.is_none() && state(&sw, &idle).is_none() {
            gone = Some(ms);
            assert_eq!(sw.sim().snapshot().rules, 2, "its DR rule went too");
        }
    }
    let gone = gone.expect("idle flow aged out");
    let last_used = 2;
    assert!(
        gone >= last_used + 10_000 && gone <= last_used + 10_000 + 500 + 100,
        "gone at {gone} ms"
    );
    assert_eq!(
        state(&sw, &busy),
        Some(FlowState::Offloaded),
        "busy flow kept"
    );
    assert_eq!(sw.pipeline().stats().aged, 1);
    sw.finish(at(16_000)).expect("clean teardown");
}

#[test]
fn a_table_change_rewrites_or_removes_exactly_the_affected_flows_and_rules() {
    let mut sw = switch();
    let mut rec = Rec::default();
    let to2 = udp(1, 2, 53, 10);
    let to3 = udp(1, 3, 53, 10);
    let to4 = udp(1, 4, 53, 10);
    for i in 0..3 {
        for f in [&to2, &to3, &to4] {
            send(&mut sw, i, f, &mut rec);
        }
    }
    let hw_of = |sw: &SimSwitch, f: &[u8]| sw.pipeline().find(&extract(1, f)).and_then(|d| d.hw);
    let (h3, h4) = (hw_of(&sw, &to3), hw_of(&sw, &to4));
    // .2 now goes to port 3; .3's rule is deleted (falls to drop).
    let p = sw.pipeline_mut();
    for (cmd, text) in [
        (
            ofproto::FlowModCommand::ModifyStrict,
            "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        ),
        (
            ofproto::FlowModCommand::DeleteStrict,
            "priority=10,ip,nw_dst=198.18.0.3",
        ),
    ] {
        let fm = ofproto::text::parse_flow(text, cmd).expect("parses");
        p.bridge_mut().apply_flow_mod(&fm, at(10)).expect("applies");
    }
    let r = p.revalidate(at(20));
    assert_eq!(r.modified, 2, "{r:?}");
    assert_eq!(hw_of(&sw, &to4), h4, "unaffected flow keeps its rule");
    assert_ne!(hw_of(&sw, &to3), h3);
    rec.tx.clear();
    assert_eq!(send(&mut sw, 30, &to2, &mut rec), Path::Hardware);
    assert_eq!(rec.tx[0].0, PortNo(3), "rewritten in hardware");
    let before = rec.tx.len();
    sw.receive(at(31), &[(PortNo(1), &to3)], &mut rec);
    assert_eq!(rec.tx.len(), before, "dropped");
    assert!(sw.counters().hw_drops >= 1, "by the hardware drop rule");
    sw.finish(at(40)).expect("clean teardown");
}

#[test]
fn a_meter_caps_a_flow_at_its_rate_in_software_and_hardware() {
    let mut sw = switch();
    let mut rec = Rec::default();
    // 800 kbit/s = 100,000 B/s. Offer 1,000-byte frames at 1,000/s (1 MB/s)
    // for 5 s.
    let f = udp(7, 4, 5001, 958);
    assert_eq!(f.len(), 1000);
    for i in 0..5_000 {
        send(&mut sw, i, &f, &mut rec);
    }
    assert_eq!(state(&sw, &f), Some(FlowState::Offloaded));
    let sent: u64 = rec.tx.iter().map(|(_, b, _)| b.len() as u64).sum();
    let want = 100_000 * 5;
    // Software and hardware buckets each allow a burst (10 kB).
    assert!(
        sent >= want - 5_000 && sent <= want + 25_000,
        "forwarded {sent} bytes in 5 s, rate allows {want}"
    );
    assert!(rec.tx.iter().any(|(_, _, p)| *p == Path::Hardware));
    assert!(
        sw.counters().hw_drops > 3_000,
        "red packets dropped in hardware"
    );
    sw.finish(at(6_000)).expect("clean teardown");
}

#[test]
fn a_sampler_delivers_about_one_in_n_to_the_sink() {
    let mut sw = switch();
    let mut rec = Rec::default();
    let f = tcp(4000, 3, 22);
    let n = 8_000u64;
    for i in 0..n {
        send(&mut sw, i / 4, &f, &mut rec);
    }
    assert_eq!(state(&sw, &f), Some(FlowState::Offloaded));
    assert_eq!(rec.tx.len() as u64, n, "every original forwarded");
    let hw = rec.samples.iter().filter(|s| s.2 == Path::Hardware).count() as f64;
    // Both paths' copies name the port the packet came in on, the rate
    // (65535 / 16384, rounded) and where the flow sent it.
    let cookie = SampleCookie {
        rate: 4,
        output: SampleOutput::Port(rec.tx[0].0),
    };
    assert!(
        rec.samples
            .iter()
            .all(|s| (s.0, s.1) == (PortNo(1), cookie)),
        "{:?}",
        &rec.samples[..3]
    );
    let total = rec.samples.len() as f64;
    // probability 16384/65535 ≈ 1/4.
    let p = 16384.0 / 65535.0;
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (total - mean).abs() < 5.0 * sd,
        "{total} samples, expected {mean:.0} ± {sd:.0}"
    );
    assert!(hw > 0.9 * total, "most samples from the hardware sampler");
    sw.finish(at(3_000)).expect("clean teardown");
}

/// On a device whose slow path reads no restore tags (the representor
/// netdevs), a sampled flow stays in software, saying why, and is sampled
/// there: its copies could not be told from misses. A plain flow beside
/// it is offloaded as ever.
#[test]
fn without_a_restore_path_a_sampled_flow_stays_in_software_saying_why() {
    let flows = FlowFile::parse(TABLE).expect("table parses");
    let netdevs = SimConfig {
        restore_path: false,
        ..SimConfig::default()
    };
    let mut sw = SimSwitch::new(&ports(), &flows, PipelineConfig::default(), netdevs, at(0))
        .expect("switch");
    let mut rec = Rec::default();
    let (sampled, plain) = (tcp(4000, 3, 22), udp(1000, 2, 53, 50));
    for i in 0..400 {
        send(&mut sw, i, &sampled, &mut rec);
        send(&mut sw, i, &plain, &mut rec);
    }
    let d = sw.pipeline().find(&extract(1, &sampled)).expect("flow");
    assert_eq!(d.state, FlowState::SoftwareOnly);
    assert_eq!(d.offloaded(), "no (no restore path)");
    assert_eq!(state(&sw, &plain), Some(FlowState::Offloaded));
    assert!(!rec.samples.is_empty(), "sampled in software");
    assert!(rec.samples.iter().all(|s| s.2 == Path::Software));
    assert_eq!(rec.tx.len(), 800, "every packet forwarded once");
    sw.finish(at(3_000)).expect("clean teardown");
}

fn fault_case(errno: Errno) {
    let mut sw = switch();
    let mut rec = Rec::default();
    sw.sim().inject(Fault::nth(Op::RuleCreate, 1, errno));
    let f = udp(9, 2, 53, 10);
    for i in 0..3 {
        send(&mut sw, i, &f, &mut rec);
    }
    let d = sw
        .pipeline()
        .find(&extract(1, &f))
        .expect("flow in software");
    assert_eq!(d.state, FlowState::SoftwareOnly);
    let reason = format!("backend error {} on rule_create", errno.name());
    assert_eq!(d.offloaded(), format!("no ({reason})"));
    // It keeps forwarding in software until the retry time...
    for i in 3..50 {
        assert_eq!(send(&mut sw, i * 10, &f, &mut rec), Path::Software);
    }
    // ...then it gets hot again and goes to hardware.
    let mut ms = 1_100;
    while state(&sw, &f) != Some(FlowState::Offloaded) && ms < 3_000 {
        send(&mut sw, ms, &f, &mut rec);
        ms += 10;
    }
    assert_eq!(state(&sw, &f), Some(FlowState::Offloaded), "retried");
    for _ in 0..100 {
        ms += 1;
        assert_eq!(send(&mut sw, ms, &f, &mut rec), Path::Hardware);
    }
    sw.pipeline_mut().revalidate(at(ms + 1));
    let sent = rec.tx.len() as u64;
    let d = sw.pipeline().find(&extract(1, &f)).expect("flow");
    assert_eq!(d.stats.packets, sent, "nothing lost or double-counted");
    assert_eq!(
        sw.pipeline().stats().offload_failures.get(&reason),
        Some(&1)
    );
    sw.finish(at(ms + 2)).expect("clean teardown");
}

#[test]
fn enospc_on_rule_insertion_keeps_the_flow_in_software_and_retries() {
    fault_case(Errno::ENOSPC);
}

#[test]
fn eio_on_rule_insertion_keeps_the_flow_in_software_and_retries() {
    fault_case(Errno::EIO);
}

#[test]
fn a_failing_counter_poll_loses_nothing() {
    let mut sw = switch();
    let mut rec = Rec::default();
    let f = udp(5, 2, 53, 10);
    for i in 0..103 {
        send(&mut sw, i, &f, &mut rec);
    }
    sw.sim().inject(Fault::nth(Op::CounterQuery, 1, Errno::EIO));
    sw.pipeline_mut().revalidate(at(200));
    assert_eq!(sw.pipeline().stats().poll_errors, 1);
    sw.pipeline_mut().revalidate(at(300));
    let d = sw.pipeline().find(&extract(1, &f)).expect("flow");
    assert_eq!(d.stats.packets, 103);
    sw.finish(at(400)).expect("clean teardown");
}

#[test]
fn offload_all_puts_every_megaflow_in_hardware_at_once() {
    let cfg = PipelineConfig {
        offload: OffloadPolicy {
            mode: ofproto::OffloadMode::All,
            ..OffloadPolicy::default()
        },
        ..PipelineConfig::default()
    };
    let mut sw = switch_with(TABLE, cfg);
    let mut rec = Rec::default();
    let mut paths = HashMap::new();
    for dst in [2u8, 3, 4] {
        let f = udp(1, dst, 53, 10);
        paths.insert(
            dst,
            (
                send(&mut sw, 0, &f, &mut rec),
                send(&mut sw, 1, &f, &mut rec),
            ),
        );
    }
    for (dst, (first, second)) in paths {
        assert_eq!(
            (first, second),
            (Path::Software, Path::Hardware),
            "dst .{dst}"
        );
    }
    sw.finish(at(10)).expect("clean teardown");
}

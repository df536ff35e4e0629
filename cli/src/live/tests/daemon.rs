//! The live daemon's threads on memory ports: no privileges needed. The
//! netdev version of these walks is cli/tests/live_netns.rs.

use std::collections::HashMap;

use megaflow::frame::{FrameSpec, L4};
use megaflow::port::{MemoryHandle, MemoryPort, PacketMeta};
use offload::Vport;

use super::*;
use crate::control;

/// Hands out memory ports created up front; the test keeps their handles.
pub(super) struct MemFactory {
    ports: Mutex<HashMap<String, OpenedPort>>,
}

pub(super) struct Handles {
    /// What the VM sends (inject) and what reaches it from the RX thread.
    pub(super) rx: MemoryHandle,
    /// What reaches it from the handler thread.
    tx: MemoryHandle,
}

impl Handles {
    pub(super) fn received(&self) -> Vec<Vec<u8>> {
        let mut v = self.rx.take_tx();
        v.extend(self.tx.take_tx());
        v
    }
}

impl MemFactory {
    pub(super) fn new(names: &[&str]) -> (Arc<MemFactory>, HashMap<String, Handles>) {
        let mut ports = HashMap::new();
        let mut handles = HashMap::new();
        for n in names {
            let rx = MemoryPort::with_capacity(format!("{n}-rx"), 4096);
            let tx = MemoryPort::with_capacity(format!("{n}-tx"), 4096);
            handles.insert(
                n.to_string(),
                Handles {
                    rx: rx.handle(),
                    tx: tx.handle(),
                },
            );
            ports.insert(
                n.to_string(),
                OpenedPort {
                    rx: Box::new(rx),
                    tx: Box::new(tx),
                    kind: "memory".to_string(),
                },
            );
        }
        (
            Arc::new(MemFactory {
                ports: Mutex::new(ports),
            }),
            handles,
        )
    }
}

impl PortFactory for MemFactory {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort> {
        self.ports
            .lock()
            .expect("factory lock")
            .remove(name)
            .ok_or_else(|| anyhow!("no memory port {name} left"))
    }
}

pub(super) fn config() -> Config {
    Config::parse(
        r#"
[offload]
mode = "hot"
hot_packets = 3
[limits]
revalidator_interval_ms = 20
max_idle_ms = 400
[[port]]
name = "vm1"
ofport = 1
vport = "vf0"
[[port]]
name = "vm2"
ofport = 2
vport = "vf1"
[[port]]
name = "vm3"
ofport = 3
vport = "vf2"
"#,
    )
    .expect("config")
}

pub(super) fn flows() -> FlowFile {
    FlowFile::parse(
        "priority=10,in_port=1,actions=output:2\n\
         priority=10,in_port=3,actions=output:1\n\
         priority=0,actions=drop",
    )
    .expect("flows")
}

pub(super) fn rep(ifindex: u32, name: &str, vf: u16) -> Representor {
    Representor::emulated(ifindex, name, Vport::vf(vf))
}

pub(super) fn frame(sport: u16) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(sport, 9)).build()
}

/// Waits (at most 5 s) until `cond` holds.
pub(super) fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("timed out waiting for {what}");
}

pub(super) fn limits() -> LiveLimits {
    LiveLimits {
        upcall_rate: 0,
        upcall_burst: 1,
        upcall_queue: 1024,
        revalidator_interval: Duration::from_millis(20),
        datapath_threads: 1,
        // Two handlers: every daemon test runs them concurrently.
        handlers: 2,
    }
}

#[test]
fn forwards_offloads_flushes_a_removed_port_and_stops_clean() {
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3"]);
    let mut d = Daemon::start(&config(), &flows(), factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2", "vm3"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    // Packets one at a time: the first ones go up to the handler, the
    // flow gets hot, then the sim eSwitch forwards the rest.
    let mut got2 = Vec::new();
    for i in 0..20u16 {
        assert!(h["vm1"].rx.inject(&frame(1000), PacketMeta::default()));
        wait_for("vm1 → vm2", || {
            got2.extend(h["vm2"].received());
            got2.len() == usize::from(i) + 1
        });
    }
    assert!(got2.iter().all(|f| *f == frame(1000)));
    let mut got1 = Vec::new();
    for i in 0..5u16 {
        assert!(h["vm3"].rx.inject(&frame(2000), PacketMeta::default()));
        wait_for("vm3 → vm1", || {
            got1.extend(h["vm1"].received());
            got1.len() == usize::from(i) + 1
        });
    }
    // The datapath threads publish their counters a few times a second.
    let core = d.core();
    wait_for("the counters published", || {
        lock(&core).counters().rx.packets == 25
    });
    // The offload thread offloads asynchronously, within a tick.
    wait_for("both flows offloaded", || {
        lock(&core).pipeline().offloaded_len() == 2
    });
    {
        let sw = lock(&core);
        let c = sw.counters();
        assert_eq!(c.rx.packets, 25);
        assert!(c.hw_handled >= 15, "hardware forwarded {}", c.hw_handled);
        assert_eq!(c.hw_handled + c.sw_handled, 25);
        assert_eq!(c.upcalls_queued, 2, "one upcall per flow");
        assert_eq!(sw.pipeline().offloaded_len(), 2);
        let st = sw.port_status(PortNo(2)).expect("status");
        assert_eq!((st.ifindex, st.state.as_str()), (Some(11), "up"));
    }
    drop(core);
    // Link down, then up: the bridge's port table is the one place that
    // keeps it, and `show` reads it from there.
    d.apply(&PortEvent::Down { ifindex: 11 });
    {
        let core = d.core();
        let sw = lock(&core);
        let state = sw.port_status(PortNo(2)).map(|s| s.state);
        assert_eq!(state.as_deref(), Some("down"));
        let up = sw.pipeline().bridge().ports().get(PortNo(2)).map(|p| p.up);
        assert_eq!(up, Some(false));
    }
    d.apply(&PortEvent::Up { ifindex: 11 });
    let state = lock(&d.core()).port_status(PortNo(2)).map(|s| s.state);
    assert_eq!(state.as_deref(), Some("up"));
    // vm2's netdev vanishes: the flow to it goes, the vm3 → vm1 one stays.
    d.apply(&PortEvent::Removed(rep(11, "vm2", 1)));
    {
        let core = d.core();
        let sw = lock(&core);
        assert_eq!(sw.pipeline().len(), 1);
        assert_eq!(sw.pipeline().offloaded_len(), 1);
        assert_eq!(
            sw.port_status(PortNo(2)).map(|s| s.state),
            Some("absent".to_string())
        );
    }
    assert!(h["vm3"].rx.inject(&frame(2000), PacketMeta::default()));
    wait_for("vm3 → vm1 after the removal", || {
        got1.extend(h["vm1"].received());
        got1.len() == 6
    });
    let report = d.stop().expect("stop");
    assert_eq!(report.rules_removed, 1);
    assert_eq!(report.packets, 26);
}

#[test]
fn idle_flows_age_out_on_the_revalidator_thread() {
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3"]);
    let mut d = Daemon::start(&config(), &flows(), factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    for _ in 0..5 {
        assert!(h["vm1"].rx.inject(&frame(7), PacketMeta::default()));
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_for("the flow offloaded", || {
        lock(&d.core()).pipeline().offloaded_len() == 1
    });
    // max-idle is 400 ms; nothing is sent any more.
    wait_for("the flow aged out", || {
        lock(&d.core()).pipeline().is_empty()
    });
    assert!(lock(&d.core()).pipeline().stats().aged >= 1);
    let report = d.stop().expect("stop");
    assert_eq!(report.rules_removed, 0);
}

#[test]
fn upcall_rate_limit_drops_and_counts_without_blocking() {
    let (factory, h) = MemFactory::new(&["vm1", "vm2"]);
    let lim = LiveLimits {
        upcall_rate: 1,
        upcall_burst: 5,
        ..limits()
    };
    // NORMAL matches source MACs exactly: a new source MAC per packet
    // makes each one a new megaflow.
    let normal = FlowFile::parse("actions=normal").expect("flows");
    let mut d = Daemon::start(&config(), &normal, factory, lim).expect("start");
    for (i, n) in ["vm1", "vm2"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    // 200 new flows at once: 5 get through (the burst), the rest are
    // dropped and counted.
    for s in 0..200u64 {
        let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(7, 9))
            .macs(0x0200_0000_1000 + s, 0x0200_0000_0002)
            .build();
        assert!(h["vm1"].rx.inject(&f, PacketMeta::default()));
    }
    wait_for("all 200 seen", || {
        let core = d.core();
        let sw = lock(&core);
        let c = sw.counters();
        c.upcalls_queued + c.upcall_drops_rate == 200
    });
    let (queued, dropped) = {
        let core = d.core();
        let sw = lock(&core);
        (
            sw.counters().upcalls_queued,
            sw.counters().upcall_drops_rate,
        )
    };
    assert!((5..=6).contains(&queued), "queued {queued}");
    assert_eq!(queued + dropped, 200);
    // Each admitted miss becomes its megaflow.
    wait_for("the admitted flows installed", || {
        let core = d.core();
        let sw = lock(&core);
        sw.pipeline().len() as u64 == queued
    });
    let mut got = Vec::new();
    wait_for("the admitted packets forwarded", || {
        got.extend(h["vm2"].received());
        got.len() as u64 == queued
    });
    d.stop().expect("stop");
}

/// Four ports over two datapath threads, explicit flows by destination.
fn config_two_threads() -> Config {
    let mut text = String::from(
        "[offload]\nmode = \"hot\"\nhot_packets = 2\n\
         [limits]\nrevalidator_interval_ms = 10\nmax_idle_ms = 150\n\
         [datapath]\nthreads = 2\n",
    );
    for k in 1..=4 {
        text.push_str(&format!(
            "[[port]]\nname = \"vm{k}\"\nofport = {k}\nvport = \"vf{}\"\n",
            k - 1
        ));
    }
    Config::parse(&text).expect("config")
}

/// The daemon of [`config_two_threads`] on memory ports vm1..vm4, flows
/// by destination address (`nw_dst=198.18.0.K` to port K) and `extra`,
/// every port's netdev added.
fn two_thread_daemon(
    extra: &str,
    lim: LiveLimits,
) -> (Daemon, HashMap<String, Handles>, [&'static str; 4]) {
    let names = ["vm1", "vm2", "vm3", "vm4"];
    let (factory, h) = MemFactory::new(&names);
    let mut table = String::new();
    for k in 1..=4 {
        table.push_str(&format!(
            "priority=10,ip,nw_dst=198.18.0.{k},actions=output:{k}\n"
        ));
    }
    table.push_str(extra);
    let flows = FlowFile::parse(&table).expect("flows");
    let mut d = Daemon::start(&config_two_threads(), &flows, factory, lim).expect("start");
    for (i, n) in names.iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    (d, h, names)
}

fn vm_frame(src: u64, dst: u64, sport: u16) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | src as u32,
        0xc612_0000 | dst as u32,
        L4::udp(sport, 7 + (sport % 2)),
    )
    .macs(0x0200_0000_0000 | src, 0x0200_0000_0000 | dst)
    .build()
}

/// No two rules of one matcher match the same value: no megaflow is in the
/// device twice (the offload thread runs its jobs outside the slow path's
/// lock; a flow queued again meanwhile must not get a second rule).
fn assert_no_match_offloaded_twice(dump: &offload::dr::DeviceDump) {
    let mut seen = std::collections::HashSet::new();
    for r in &dump.rules {
        let key = (r.matcher.clone(), format!("{:?}", r.value));
        assert!(seen.insert(key), "a match offloaded twice: {r:?}");
    }
}

/// Two datapath threads, the handler and the revalidator/offload thread
/// racing over random traffic, a table change and a port removal: every
/// packet is accounted exactly once across hardware and software, no
/// flow is offloaded twice, no lifecycle move is illegal, only the
/// revalidator/offload thread programs rules, and the device is empty at
/// the end.
#[test]
fn two_datapath_threads_racing_the_slow_path_account_every_packet_once() {
    let lim = LiveLimits {
        upcall_queue: 4096,
        revalidator_interval: Duration::from_millis(10),
        datapath_threads: 2,
        ..limits()
    };
    let (mut d, h, names) = two_thread_daemon("priority=0,actions=drop\n", lim);
    let core = d.core();
    {
        let sw = lock(&core);
        let homes: std::collections::BTreeSet<_> = (1..=4)
            .filter_map(|k| sw.pipeline().datapaths().home(PortNo(k)))
            .collect();
        assert_eq!(homes.len(), 2, "the ports are spread over both threads");
    }
    let mut rng = megaflow::SplitMix64::new(7);
    let mut sent = 0u64;
    let mut sent_from = [0u64; 5];
    let mut live_ports = 4;
    let started = Instant::now();
    for round in 0..300 {
        assert!(started.elapsed() < Duration::from_secs(60), "bounded");
        for _ in 0..8 {
            let src = 1 + rng.below(live_ports);
            let dst = 1 + rng.below(4);
            let sport = rng.below(12) as u16;
            let f = vm_frame(src, dst, sport);
            if h[&format!("vm{src}")].rx.inject(&f, PacketMeta::default()) {
                sent += 1;
                sent_from[src as usize] += 1;
            }
        }
        if round == 100 {
            // A table change while traffic flows: UDP to port 8 dropped.
            let req = control::parse_request(
                r#"{"cmd":"add-flow","flow":"priority=20,udp,tp_dst=8,actions=drop"}"#,
            )
            .expect("request");
            let now = d.clock().now();
            assert!(matches!(
                control::handle(&mut lock(&core), &req, now),
                control::Response::Ok(_)
            ));
        }
        if round == 200 {
            // vm4's netdev vanishes (once what it sent was received; frames
            // still in a vanished netdev's queue are lost, as they would be
            // on a real one); it sends no more.
            wait_for("vm4's frames received", || {
                let c = lock(&core).counters();
                c.ports.get(&PortNo(4)).map_or(0, |p| p.rx.packets) == sent_from[4]
            });
            d.apply(&PortEvent::Removed(rep(13, "vm4", 3)));
            live_ports = 3;
        }
        if round % 25 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
        if round % 50 == 49 {
            assert_no_match_offloaded_twice(&lock(&core).dump_rules().expect("dump-rules"));
        }
        for n in &names {
            h[*n].received();
        }
    }
    wait_for("every packet received", || {
        lock(&core).counters().rx.packets == sent
    });
    {
        let sw = lock(&core);
        assert_eq!(sw.pipeline().stats().illegal_transitions, 0);
        // Only the offload thread created or removed rules (the FDB's own
        // setup ran on the starting thread, before any of them).
        for op in [offload::sim::Op::RuleCreate, offload::sim::Op::RuleDestroy] {
            let callers = sw.sim().callers(op);
            let me = std::thread::current().name().unwrap_or("?").to_string();
            assert!(
                callers.iter().all(|c| c == "esw-revalidator" || *c == me),
                "{op:?} called from {callers:?}"
            );
        }
        assert!(
            sw.sim()
                .callers(offload::sim::Op::RuleCreate)
                .contains(&"esw-revalidator".to_string()),
            "flows were offloaded"
        );
        assert_no_match_offloaded_twice(&sw.dump_rules().expect("dump-rules"));
    }
    drop(core);
    let r = d.stop().expect("stop: the device is empty at the end");
    let (c, st) = (&r.counters, &r.stats);
    assert_eq!(c.rx.packets, sent);
    assert_eq!(c.hw_handled + c.sw_handled, sent, "{c:?}");
    assert_eq!(
        st.hits + st.upcalls + c.upcall_drops_rate + c.upcall_drops_full,
        c.sw_handled,
        "every software packet hit a datapath or went up, once: {st:?} {c:?}"
    );
    assert_eq!(st.upcalls, c.upcalls_queued, "every queued upcall handled");
    assert_eq!(st.packets, st.hits + st.upcalls);
    assert_eq!(
        st.hw_packets, c.hw_handled,
        "hardware counts folded exactly"
    );
    assert!(
        c.hw_handled > 0 && st.hits > 0 && st.upcalls > 0,
        "{c:?} {st:?}"
    );
    assert_eq!(st.illegal_transitions, 0);
    assert!(st.offloaded >= 1 && st.flushed >= 1, "{st:?}");
}

/// Ports of every kind: a representor, the uplink and a host-stack port.
fn kinds_config() -> Config {
    Config::parse(
        r#"
[offload]
mode = "all"
[limits]
revalidator_interval_ms = 20
[[port]]
name = "vm1"
ofport = 1
vport = "vf0"
[[port]]
name = "wire"
ofport = 2
type = "uplink"
[[port]]
name = "host"
ofport = 3
type = "internal"
"#,
    )
    .expect("config")
}

#[test]
fn each_port_kind_forwards_and_only_what_the_device_sees_is_offloaded() {
    let cfg = kinds_config();
    let specs = cfg.port_specs().expect("ports");
    let kinds: Vec<(PortKind, Option<Vport>)> = specs.iter().map(|p| (p.kind, p.vport)).collect();
    assert_eq!(
        kinds,
        [
            (PortKind::Representor, Vport::vf(0)),
            (PortKind::Uplink, Some(Vport::UPLINK)),
            (PortKind::Internal, None)
        ]
    );
    let (factory, h) = MemFactory::new(&["vm1", "wire", "host"]);
    let flows = FlowFile::parse(
        "priority=10,in_port=1,actions=output:2\n\
         priority=10,in_port=3,actions=output:1\n\
         priority=10,in_port=2,actions=output:3\n\
         priority=0,actions=drop",
    )
    .expect("flows");
    let mut d = Daemon::start(&cfg, &flows, factory, limits()).expect("start");
    d.apply(&PortEvent::Added(rep(10, "vm1", 0)));
    d.apply(&PortEvent::Added(Representor::emulated(
        11,
        "wire",
        Some(Vport::UPLINK),
    )));
    d.apply(&PortEvent::Added(Representor::emulated(12, "host", None)));
    // vm1 → wire, wire → host, host → vm1: every kind sends and receives.
    for (from, to, sport) in [("vm1", "wire", 1), ("wire", "host", 2), ("host", "vm1", 3)] {
        let mut got = Vec::new();
        for i in 0..5usize {
            assert!(h[from].rx.inject(&frame(sport), PacketMeta::default()));
            wait_for(&format!("{from} → {to}"), || {
                got.extend(h[to].received());
                got.len() == i + 1
            });
        }
    }
    let core = d.core();
    // The representor → uplink flow goes to hardware; the two that name
    // the internal port stay in software, saying why.
    wait_for("vm1 → wire offloaded", || {
        lock(&core).pipeline().offloaded_len() == 1
    });
    // The datapath threads publish their counters a few times a second.
    wait_for("the counters published", || {
        lock(&core).counters().rx.packets == 15
    });
    {
        let sw = lock(&core);
        let dump = sw.pipeline().dump();
        assert_eq!(dump.len(), 3, "{dump:?}");
        for f in &dump {
            let in_port = f.matched.key().in_port();
            let line = f.offloaded();
            if in_port == 1 {
                assert_eq!(line, "yes");
            } else {
                assert!(line.contains("no vport"), "port {in_port}: {line}");
            }
        }
        let rows = sw.port_summaries();
        let types: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.kind.as_str(), r.vport.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("representor", "vf0"),
                ("uplink", "uplink"),
                ("internal", "-")
            ]
        );
    }
    drop(core);
    let report = d.stop().expect("stop");
    assert_eq!(report.stats.illegal_transitions, 0);
}

/// A frame whose output port is served by another datapath thread reaches
/// it, from software (cache hits) and from the sim's FDB alike.
#[test]
fn frames_cross_from_one_datapath_thread_to_another() {
    let lim = LiveLimits {
        datapath_threads: 2,
        ..limits()
    };
    let (d, h, names) = two_thread_daemon("", lim);
    let core = d.core();
    let (src, dst) = {
        let sw = lock(&core);
        let home = |k| sw.pipeline().datapaths().home(PortNo(k));
        let dst = (2..=4)
            .find(|&k| home(k) != home(1))
            .expect("a port on the other thread");
        (1u64, u64::from(dst))
    };
    let mut got = 0;
    for i in 0..200u16 {
        // One flow: a miss, then cache hits, then (hot) the sim's FDB.
        let f = vm_frame(src, dst, 100);
        assert!(h["vm1"].rx.inject(&f, PacketMeta::default()));
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        got += h[names[dst as usize - 1]].received().len();
    }
    wait_for("all 200 delivered", || {
        got += h[names[dst as usize - 1]].received().len();
        got >= 200
    });
    assert_eq!(got, 200);
    let c = lock(&core).counters();
    assert!(
        c.sw_handled > 1 && c.hw_handled > 0,
        "both paths crossed: {c:?}"
    );
    drop(core);
    d.stop().expect("stop");
}

/// A port whose driver panics on receive.
struct PanicPort;

impl megaflow::port::Port for PanicPort {
    fn name(&self) -> &str {
        "broken"
    }
    fn recv_batch(
        &mut self,
        _: &mut megaflow::port::PacketBatch,
    ) -> Result<usize, megaflow::port::PortError> {
        panic!("driver bug in recv");
    }
    fn send_batch(
        &mut self,
        pkts: &[&[u8]],
        _: megaflow::Timestamp,
    ) -> Result<usize, megaflow::port::PortError> {
        Ok(pkts.len())
    }
    fn stats(&self) -> megaflow::port::PortStats {
        megaflow::port::PortStats::default()
    }
}

struct PanicFactory;

impl PortFactory for PanicFactory {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort> {
        Ok(OpenedPort {
            rx: Box::new(PanicPort),
            tx: Box::new(MemoryPort::with_capacity(format!("{name}-tx"), 16)),
            kind: "memory".to_string(),
        })
    }
}

#[test]
fn a_datapath_thread_that_panics_is_reported_by_name_and_the_daemon_still_stops_clean() {
    let mut d =
        Daemon::start(&config(), &flows(), Arc::new(PanicFactory), limits()).expect("start");
    let (tx, rx) = std::sync::mpsc::channel();
    d.on_thread_failure(move |m| {
        let _ = tx.send(m);
    });
    d.apply(&PortEvent::Added(rep(10, "vm1", 0)));
    let msg = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the panic reported");
    assert_eq!(msg, "thread esw-dp0 panicked: driver bug in recv");
    // What `eswitchd run` then does: stop, the device emptied.
    let report = d.stop().expect("stops");
    assert_eq!(report.megaflows, 0, "{report:?}");
}

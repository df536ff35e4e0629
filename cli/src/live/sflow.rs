//! The sFlow exporter: sampled packets and port counters to the
//! collectors of `[sflow]`, as sFlow v5 datagrams over UDP.
//!
//! The threads that see sampled copies (the datapath threads for the
//! device's copies and for megaflow hits, the handler for upcalls) hand
//! each to a [`SampleQueue`]: bounded, never waited on, a full queue drops
//! and counts (the count goes out as the flow samples' `drops`). The
//! exporter thread owns the socket: it packs flow samples into datagrams
//! up to `max_datagram_bytes`, sends one when the next sample would not
//! fit or when its oldest sample is `flush_ms` old, and every
//! `polling_interval` sends each port's counters.
//!
//! Ports are named by their netdev's ifindex (what `ip link` and SNMP
//! show); a port whose netdev is gone is `0x3FFFFFFF` (unknown).

use super::lock;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use megaflow::actions::{SampleCookie, SampleOutput};
use megaflow::port::PortStats;
use megaflow::PortNo;
use tracing::{info, warn};

use crate::config::SflowConfig;
use crate::sflow::{Agent, FlowSample, IfCounters, Sample, DATAGRAM_HEADER_LEN, UNKNOWN_IF};
use crate::switch::Path;

/// A sampled packet on its way to the exporter.
#[derive(Clone, Debug)]
pub struct SampledPacket {
    pub in_port: PortNo,
    pub cookie: SampleCookie,
    pub frame_length: u32,
    /// Its first `header_bytes`.
    pub header: Vec<u8>,
    pub path: Path,
}

/// Where every thread puts sampled packets.
#[derive(Debug)]
pub struct SampleQueue {
    tx: SyncSender<SampledPacket>,
    /// How much of each packet a sample keeps (changed with the
    /// exporter's settings).
    header_bytes: AtomicUsize,
    /// Samples dropped because the queue was full.
    pub dropped: AtomicU64,
}

impl SampleQueue {
    /// A queue of `capacity` samples of at most `header_bytes` each, and
    /// its receiving end.
    pub fn new(
        capacity: usize,
        header_bytes: usize,
    ) -> (Arc<SampleQueue>, Receiver<SampledPacket>) {
        let (tx, rx) = mpsc::sync_channel(capacity);
        let q = SampleQueue {
            tx,
            header_bytes: AtomicUsize::new(header_bytes),
            dropped: AtomicU64::new(0),
        };
        (Arc::new(q), rx)
    }

    /// Keeps the first `n` bytes of each packet from now on.
    pub fn set_header_bytes(&self, n: usize) {
        self.header_bytes.store(n, Ordering::Relaxed);
    }

    /// Offers a sampled copy of `frame` (received on `in_port`).
    pub fn offer(&self, in_port: PortNo, cookie: SampleCookie, frame: &[u8], path: Path) {
        let s = SampledPacket {
            in_port,
            cookie,
            frame_length: frame.len() as u32,
            header: frame[..frame.len().min(self.header_bytes.load(Ordering::Relaxed))].to_vec(),
            path,
        };
        if self.tx.try_send(s).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One port as the exporter sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    pub no: PortNo,
    /// Its netdev's ifindex, while it has one.
    pub ifindex: Option<u32>,
    pub admin_up: bool,
    pub oper_up: bool,
    /// Both paths' packets, and the netdev's drops.
    pub stats: PortStats,
}

/// The ports now (called from the exporter thread).
pub type PortsFn = Box<dyn Fn() -> Vec<PortSnapshot> + Send>;

/// The ports of a switch, for [`PortsFn`].
pub fn port_snapshots<B: crate::switch::Device, D: ofproto::Datapaths>(
    sw: &crate::switch::Switch<B, D>,
) -> Vec<PortSnapshot> {
    sw.port_rows()
        .into_iter()
        .map(|(p, pc, st)| {
            let st = st.unwrap_or_default();
            PortSnapshot {
                no: p.no,
                ifindex: st.ifindex,
                admin_up: st.state != "absent",
                oper_up: st.state == "up",
                stats: PortStats {
                    rx_packets: pc.rx.packets,
                    rx_bytes: pc.rx.bytes,
                    tx_packets: pc.tx_hw.packets + pc.tx_sw.packets,
                    tx_bytes: pc.tx_hw.bytes + pc.tx_sw.bytes,
                    rx_dropped: st.rx_dropped,
                    tx_dropped: st.tx_dropped,
                },
            }
        })
        .collect()
}

/// The exporter's settings, checked.
#[derive(Clone, Debug)]
pub struct ExportConfig {
    pub collectors: Vec<SocketAddr>,
    pub agent: Ipv4Addr,
    pub polling: Option<Duration>,
    pub max_datagram: usize,
    pub flush: Duration,
}

impl ExportConfig {
    /// From `[sflow]`; `None` when it names no collector. The agent
    /// address defaults to the local address of the route to the first
    /// collector.
    pub fn from_config(cfg: &SflowConfig) -> anyhow::Result<Option<ExportConfig>> {
        let collectors = cfg.collector_addrs()?;
        let Some(first) = collectors.first() else {
            return Ok(None);
        };
        let agent = match cfg.agent {
            Some(a) => a,
            None => route_source(*first)
                .with_context(|| format!("sflow: no route to the collector {first}"))?,
        };
        Ok(Some(ExportConfig {
            collectors,
            agent,
            polling: (cfg.polling_interval > 0).then(|| Duration::from_secs(cfg.polling_interval)),
            max_datagram: cfg.max_datagram_bytes,
            flush: Duration::from_millis(cfg.flush_ms.max(1)),
        }))
    }
}

/// The local IPv4 address the kernel would send from to `to`.
fn route_source(to: SocketAddr) -> anyhow::Result<Ipv4Addr> {
    let s = UdpSocket::bind(("0.0.0.0", 0))?;
    s.connect(to)?;
    match s.local_addr()?.ip() {
        std::net::IpAddr::V4(a) if !a.is_unspecified() => Ok(a),
        ip => anyhow::bail!("the source address is {ip}, not an IPv4 address"),
    }
}

/// What the exporter sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub datagrams: u64,
    pub flow_samples: u64,
    pub counter_samples: u64,
    /// Sends the socket refused (the collector unreachable, ...).
    pub send_errors: u64,
}

/// The running exporter thread.
pub struct Exporter {
    stop: Arc<AtomicBool>,
    /// The thread gives the queue's end back when it stops.
    thread: Option<JoinHandle<(ExportStats, Receiver<SampledPacket>)>>,
}

/// How often the exporter takes what the queue holds (at 1 sample in
/// 1,000 of 10 Mpps, 200 samples; the default queue holds 4,096).
const DRAIN_EVERY: Duration = Duration::from_millis(20);

impl Exporter {
    /// Starts the exporter thread on `samples` (the [`SampleQueue`]'s
    /// other end, and the queue for its drop count).
    pub fn start(
        cfg: ExportConfig,
        samples: Receiver<SampledPacket>,
        queue: Arc<SampleQueue>,
        ports: PortsFn,
    ) -> anyhow::Result<Exporter> {
        let socket = UdpSocket::bind(("0.0.0.0", 0)).context("sflow: cannot open a UDP socket")?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        info!(
            collectors = ?cfg.collectors,
            agent = %cfg.agent,
            "sFlow export started"
        );
        let mut state = ExportState::new(cfg, socket, queue, ports);
        let thread = std::thread::Builder::new()
            .name("esw-sflow".to_string())
            .spawn(move || (state.run(&samples, &s), samples))
            .context("sflow: cannot start the exporter thread")?;
        Ok(Exporter {
            stop,
            thread: Some(thread),
        })
    }

    /// Sends what is pending and stops.
    pub fn stop(mut self) -> ExportStats {
        self.join().0
    }

    /// [`stop`](Self::stop), and the queue's end back (for an exporter
    /// started again with other settings); `None` if the thread died.
    pub fn stop_returning(mut self) -> (ExportStats, Option<Receiver<SampledPacket>>) {
        self.join()
    }

    fn join(&mut self) -> (ExportStats, Option<Receiver<SampledPacket>>) {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().and_then(|t| t.join().ok()) {
            Some((stats, rx)) => (stats, Some(rx)),
            None => (ExportStats::default(), None),
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.join();
    }
}

/// What the exporter thread owns.
struct ExportState {
    cfg: ExportConfig,
    socket: UdpSocket,
    queue: Arc<SampleQueue>,
    ports: PortsFn,
    agent: Agent,
    started: Instant,
    /// Samples of the datagram being filled, its encoded size, and when
    /// its first sample came.
    pending: Vec<Sample>,
    pending_bytes: usize,
    oldest: Option<Instant>,
    /// The ports at the last look: ifindex by port, packets received.
    known: HashMap<PortNo, (u32, u64)>,
    looked: Option<Instant>,
    next_poll: Option<Instant>,
    stats: ExportStats,
    errors_logged: u64,
}

/// How often a flow sample's port table (ifindex, sample pool) is read
/// again from the switch.
const LOOK_EVERY: Duration = Duration::from_secs(1);

impl ExportState {
    fn new(cfg: ExportConfig, socket: UdpSocket, queue: Arc<SampleQueue>, ports: PortsFn) -> Self {
        let agent = Agent::new(cfg.agent, 0);
        let now = Instant::now();
        ExportState {
            next_poll: cfg.polling.map(|p| now + p),
            cfg,
            socket,
            queue,
            ports,
            agent,
            started: now,
            pending: Vec::new(),
            pending_bytes: DATAGRAM_HEADER_LEN,
            oldest: None,
            known: HashMap::new(),
            looked: None,
            stats: ExportStats::default(),
            errors_logged: 0,
        }
    }

    /// Wakes every [`DRAIN_EVERY`] (or at a deadline) and takes what the
    /// queue holds: never blocked in a receive, the exporter is never
    /// woken by a sender, so a sample costs its sender no system call and
    /// the busy datapath threads no context switch per sample.
    fn run(&mut self, samples: &Receiver<SampledPacket>, stop: &AtomicBool) -> ExportStats {
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            while let Ok(s) = samples.try_recv() {
                self.flow_sample(s);
            }
            let now = Instant::now();
            if stopping {
                self.send();
                return self.stats;
            }
            if self.oldest.is_some_and(|o| now >= o + self.cfg.flush) {
                self.send();
            }
            if self.next_poll.is_some_and(|p| now >= p) {
                self.poll();
                self.next_poll = self.cfg.polling.map(|p| now + p);
            }
            let mut until = now + DRAIN_EVERY;
            if let Some(o) = self.oldest {
                until = until.min(o + self.cfg.flush);
            }
            if let Some(p) = self.next_poll {
                until = until.min(p);
            }
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
    }

    /// Reads the ports; keeps each one's ifindex and received packets.
    fn look(&mut self) -> Vec<PortSnapshot> {
        self.looked = Some(Instant::now());
        let ports = (self.ports)();
        self.known = ports
            .iter()
            .map(|p| (p.no, (p.ifindex.unwrap_or(UNKNOWN_IF), p.stats.rx_packets)))
            .collect();
        ports
    }

    fn ifindex(&self, port: PortNo) -> u32 {
        self.known.get(&port).map_or(UNKNOWN_IF, |k| k.0)
    }

    fn flow_sample(&mut self, s: SampledPacket) {
        // Ports (a new one's ifindex) and pools at most LOOK_EVERY old.
        if self.looked.is_none_or(|l| l.elapsed() >= LOOK_EVERY) {
            self.look();
        }
        let source = self.ifindex(s.in_port);
        let output = match s.cookie.output {
            SampleOutput::Port(p) => self.ifindex(p),
            // sFlow's "multiple": format 2 and the count (0: unknown).
            SampleOutput::Multiple(n) => 0x8000_0000 | (n & 0x3fff_ffff),
            SampleOutput::Unknown => 0x8000_0000,
            // "Discarded": format 1, reason 258 (the flow's ACL).
            SampleOutput::Drop => 0x4000_0000 | 258,
        };
        let received = self.known.get(&s.in_port).map_or(0, |k| k.1);
        let f = FlowSample {
            source,
            rate: s.cookie.rate.max(1),
            pool: received as u32,
            drops: self.queue.dropped.load(Ordering::Relaxed) as u32,
            input: source,
            output,
            frame_length: s.frame_length,
            header: s.header,
        };
        self.push(Sample::Flow(f));
        self.stats.flow_samples += 1;
    }

    /// Every port's counters.
    fn poll(&mut self) {
        for p in self.look() {
            let st = p.stats;
            let c = IfCounters {
                index: p.ifindex.unwrap_or(UNKNOWN_IF),
                speed: 0,
                admin_up: p.admin_up,
                oper_up: p.oper_up,
                in_octets: st.rx_bytes,
                in_packets: st.rx_packets as u32,
                in_discards: st.rx_dropped as u32,
                out_octets: st.tx_bytes,
                out_packets: st.tx_packets as u32,
                out_discards: st.tx_dropped as u32,
            };
            self.push(Sample::Counters(c));
            self.stats.counter_samples += 1;
        }
    }

    /// Adds a sample, sending what is pending first if it would not fit.
    fn push(&mut self, sample: Sample) {
        let size = crate::sflow::encoded_len(&sample);
        if !self.pending.is_empty() && self.pending_bytes + size > self.cfg.max_datagram {
            self.send();
        }
        self.pending.push(sample);
        self.pending_bytes += size;
        self.oldest.get_or_insert_with(Instant::now);
    }

    fn send(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let uptime = self.started.elapsed().as_millis() as u32;
        let d = self.agent.datagram(uptime, &self.pending);
        self.pending.clear();
        self.pending_bytes = DATAGRAM_HEADER_LEN;
        self.oldest = None;
        self.stats.datagrams += 1;
        for c in &self.cfg.collectors {
            if let Err(e) = self.socket.send_to(&d, c) {
                self.stats.send_errors += 1;
                // Logged at powers of two: a collector that is down must
                // not flood the log.
                self.errors_logged += 1;
                if self.errors_logged.is_power_of_two() {
                    warn!(collector = %c, errors = self.errors_logged, "sflow: cannot send: {e}");
                }
            }
        }
    }
}

impl<B: crate::switch::Device> super::Daemon<B> {
    /// Exports sFlow as `cfg` says from now on (`[sflow]`, or the
    /// database's sFlow row): the exporter started, restarted with new
    /// settings, or stopped when no collector is named; the ports sample
    /// at its rates. It reads the switch only while the daemon runs.
    pub fn set_sflow(&mut self, cfg: &crate::config::SflowConfig) -> anyhow::Result<()> {
        if self.sflow.as_ref().map(|(c, _)| c) == Some(cfg)
            || (self.sflow.is_none() && cfg.collectors.is_empty())
        {
            return Ok(());
        }
        let export = ExportConfig::from_config(cfg)?;
        if let Some(s) = self.stop_sflow() {
            info!(
                datagrams = s.datagrams,
                flow_samples = s.flow_samples,
                "sFlow export stopped for new settings"
            );
        }
        // No collector: stopped (the queue's end kept for a later start).
        let Some(export) = export else {
            lock(self.shared()).set_sample_rates(Arc::new(|_| 0));
            return Ok(());
        };
        let q = Arc::clone(&self.samples);
        let Some(rx) = self.sample_rx.take() else {
            anyhow::bail!("sflow: the sample queue's end is gone (an exporter thread died)");
        };
        q.set_header_bytes(cfg.header_bytes);
        let core = Arc::downgrade(self.shared());
        let ports: PortsFn = Box::new(move || {
            core.upgrade()
                .map(|c| port_snapshots(&lock(&c)))
                .unwrap_or_default()
        });
        let exporter = Exporter::start(export, rx, q, ports)?;
        let rates = cfg.clone();
        {
            let mut sw = lock(self.shared());
            sw.set_sample_rates(Arc::new(move |name| rates.rate_of(name)));
            // The megaflows sample at the new rates from the next pass.
            sw.pipeline_mut().request_pass();
        }
        self.sflow = Some((cfg.clone(), exporter));
        Ok(())
    }

    /// Stops the sFlow exporter (ports stop sampling); what it sent.
    pub fn stop_sflow(&mut self) -> Option<ExportStats> {
        let (_, e) = self.sflow.take()?;
        {
            let mut sw = lock(self.shared());
            sw.set_sample_rates(Arc::new(|_| 0));
            sw.pipeline_mut().request_pass();
        }
        let (stats, rx) = e.stop_returning();
        self.sample_rx = rx;
        Some(stats)
    }
}

//! `eswitchd run`: the switch on live netdevs.
//!
//! ## Threads
//!
//! ```text
//!  datapath threads 0..N ── each owns its ports' RX, its Datapath (cache shard) and a
//!     │   sim front; per round: recv_batch on its ports (TPACKET_V3 ring or AF_XDP), the
//!     │   sim eSwitch step (offloaded flows forwarded "in hardware"), datapath hits
//!     │   executed; misses offered to the upcall gate; transmit batched per port
//!     │   (ports of other threads through their shared send-only handles);
//!     │   between rounds: apply the slow path's commands, report stats deltas.
//!     │   Never takes the switch lock, never calls the device.
//!     ├─ gate: token bucket per port + bounded queue (full: drop and count, never wait)
//!  handler threads ── drain the queue in batches; without the lock: parse and
//!                    translate on the shared bridge; lock: install (commands to the
//!                    datapath threads), execute; unlock; transmit through the
//!                    send-only socket of each port
//!  revalidator/offload thread ── programs the device: every 2 ms, lock: fold the
//!                        datapaths' counts, take hot flows as offload jobs; unlock:
//!                        run them on the device; lock: take the results back
//!                        ([`offload_outside`]); every interval, lock: one pass
//!                        (counters, aging, re-translation, flow limit) in steps, the
//!                        lock handed to a waiting handler between two
//!  control thread(s) ── the unix socket; each request runs under the lock
//!  main thread ── port events (rtnetlink tracker): open/close ports (spread over the
//!                 datapath threads), flush a removed port's flows, up/down into the
//!                 bridge; SIGINT/SIGTERM → stop
//! ```
//!
//! The slow path ([`Switch`] over [`ThreadedDatapaths`]: the pipeline,
//! the port map) is behind one mutex, taken by the handlers (to install
//! what they translated without it), the revalidator and the control
//! socket, never by a datapath thread: a revalidator pass, however long,
//! stops no cache hit, and it runs in steps ([`pass_in_batches`]) so a
//! handler waits for one step, not the pass. The offload manager has a
//! mutex of its own ([`ofproto::SharedOffload`]): offloads run on the
//! device without the slow path's lock. docs/ARCHITECTURE.md has the whole
//! lock map. The datapath threads
//! publish their counters to a [`CounterBoard`] a few times a second.
//!
//! Port I/O comes from a [`PortFactory`], so the same daemon runs on
//! memory ports in unprivileged tests and on netdevs in production; the
//! device is any [`Device`] (the sim eSwitch, whose front each datapath
//! thread runs its batches through, or a real NIC with nothing in front).

pub mod metrics;
pub mod of_bridges;
pub mod openflow;
pub mod ovsdb;
mod ovsdb_apply;
mod ports;
mod run;
pub mod sflow;
mod supervise;
pub mod tls;
mod underlay;
mod upcall;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use megaflow::datapath::DatapathEnd;
use megaflow::port::{PacketBatch, Port, BATCH_SIZE};
use megaflow::{Datapath, DpEvent, Lookup, PortNo, Timestamp};
use offload::representor::{PortEvent, Representor};
use offload::sim::{SimBackend, SimConfig};
use offload::Vport;
use tracing::{debug, info, warn};

use megaflow::offload::FlowOffload;
use ofproto::pipeline::SwOutcome;
use ofproto::{Datapaths, OffloadDone, PassReport, Pipeline, SharedOffload, ThreadedDatapaths};

use crate::config::{Config, PortSpec};
use crate::switch::{
    sim_device, CounterBoard, Detach, Device, Egressor, FlowFile, Front, Netdev, Path, PortKind,
    Rx, SoftwarePath, Switch,
};

pub use ports::NetdevFactory;
pub use run::{run, run_on, DEFAULT_FLOWS};
pub use upcall::{
    channel as upcall_channel, Admission, Disconnected, TokenBucket, Upcall, UpcallGate,
    UpcallReceiver,
};

/// Most upcalls the handler runs under one lock acquisition.
pub const HANDLER_BATCH: usize = 64;

/// Batches a port may deliver in one RX round: more packets per lock and
/// per transmit call when traffic is heavy.
const BATCHES_PER_ROUND: usize = 4;

/// Most frames handed to one `send_batch` call.
const TX_CHUNK: usize = BATCH_SIZE * BATCHES_PER_ROUND;

/// Empty RX rounds before the RX thread sleeps in poll(2).
const SPIN_ROUNDS: u32 = 64;

/// Longest sleep of an idle RX thread (also how late it notices a new port
/// or a stop request).
const IDLE_WAIT: Duration = Duration::from_millis(10);

/// How often the offload thread folds counts and offloads hot flows.
const OFFLOAD_TICK: Duration = Duration::from_millis(2);

/// How often a datapath thread publishes its counters (for `show` and
/// `stats`, which therefore lag by at most this much).
const STATUS_EVERY: Duration = Duration::from_millis(50);

/// The daemon's clock: nanoseconds since it started (monotonic).
#[derive(Clone, Copy, Debug)]
pub struct Clock(Instant);

impl Clock {
    pub fn new() -> Clock {
        Clock(Instant::now())
    }

    pub fn now(&self) -> Timestamp {
        Timestamp(self.0.elapsed().as_nanos() as u64)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// A port opened on a netdev: the RX thread's (receive and send) and the
/// handler's (send only).
pub struct OpenedPort {
    pub rx: Box<dyn Port>,
    pub tx: Box<dyn Port>,
    /// `af_packet`, `af_xdp`, `memory`.
    pub kind: String,
}

/// Opens ports by netdev name, and waits for them.
pub trait PortFactory: Send + Sync {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort>;

    /// Sleeps until one of `fds` is readable or `timeout` passes. The
    /// default (ports without descriptors) sleeps a millisecond.
    fn wait(&self, _fds: &[i32], timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }
}

/// Settings of the live threads (from `[limits]`).
#[derive(Clone, Copy, Debug)]
pub struct LiveLimits {
    pub upcall_rate: u64,
    pub upcall_burst: u64,
    pub upcall_queue: usize,
    pub revalidator_interval: Duration,
    /// Datapath threads (`[datapath] threads`).
    pub datapath_threads: usize,
    /// Handler threads (`[slowpath] handlers`).
    pub handlers: usize,
}

impl LiveLimits {
    pub fn from_config(cfg: &Config) -> LiveLimits {
        LiveLimits {
            upcall_rate: cfg.limits.upcall_rate,
            upcall_burst: cfg.limits.upcall_burst,
            upcall_queue: cfg.limits.upcall_queue,
            revalidator_interval: Duration::from_millis(cfg.limits.revalidator_interval_ms.max(1)),
            datapath_threads: cfg.datapath.threads.max(1),
            handlers: cfg.slowpath.handlers.max(1),
        }
    }
}

/// The slow path, shared by the handler, the revalidator and the control
/// socket (never by a datapath thread). A `parking_lot` mutex: whoever
/// holds it for long (a revalidator pass, a burst of offloads) works in
/// batches and hands it to a waiting thread between two
/// ([`SlowGuard::bump`], a fair hand-off), so a handler waits for one
/// batch, never for a pass. It does not poison: a thread that panicked
/// holding it leaves the switch as it was between two batches, and going
/// on is better than stopping forwarding.
pub type Core<B = SimBackend> = Arc<parking_lot::Mutex<Switch<B, ThreadedDatapaths>>>;

/// The slow path, held.
pub type SlowGuard<'a, B> = parking_lot::MutexGuard<'a, Switch<B, ThreadedDatapaths>>;

fn lock<B: Device>(core: &Core<B>) -> SlowGuard<'_, B> {
    core.lock()
}

enum RxCmd {
    Add(Box<RxPort>),
    Remove(PortNo),
}

struct RxPort {
    no: PortNo,
    port: Box<dyn Port>,
    /// Up to [`BATCHES_PER_ROUND`] batches received in one round; `used`
    /// of them hold packets.
    batches: Vec<PacketBatch>,
    used: usize,
}

/// The receive-side number of a device's slow-path queue: above
/// OFPP_MAX (0xffffff00), so never one of the switch's ports (the config
/// and add-port refuse those), and none of OpenFlow's reserved numbers
/// (0xfffffff8 and up). Its packets name their own ports.
const SLOW_PATH_PORT: PortNo = PortNo(0xffff_ff40);

impl RxPort {
    fn new(no: PortNo, port: Box<dyn Port>) -> RxPort {
        RxPort {
            no,
            port,
            batches: (0..BATCHES_PER_ROUND).map(|_| PacketBatch::new()).collect(),
            used: 0,
        }
    }

    /// Receives until a batch comes back short or the round is full.
    fn receive(&mut self) -> Result<usize, megaflow::port::PortError> {
        self.used = 0;
        let mut got = 0;
        for b in &mut self.batches {
            let n = self.port.recv_batch(b)?;
            got += n;
            if n > 0 {
                self.used += 1;
            }
            if n < BATCH_SIZE {
                break;
            }
        }
        Ok(got)
    }

    /// The packets received, each from the port its source names (a
    /// slow-path queue receives for every port) or this one.
    fn packets(&self) -> impl Iterator<Item = Rx<'_>> + '_ {
        self.batches[..self.used].iter().flat_map(move |b| {
            b.iter().map(move |k| Rx {
                port: k.meta.in_port.unwrap_or(self.no),
                data: k.data,
                restore: k.meta.restore,
            })
        })
    }
}

/// Packets for the controllers waiting for the OpenFlow channels.
pub const PACKET_IN_QUEUE: usize = 4096;

/// One packet for the controllers, as a thread that ran a controller
/// action saw it.
#[derive(Clone, Debug)]
pub struct PacketInEvent {
    pub in_port: PortNo,
    /// A `UserspaceReason::Controller`.
    pub reason: megaflow::actions::UserspaceReason,
    /// The packet, cut to the action's `max_len`.
    pub frame: Vec<u8>,
    /// Its whole length.
    pub total_len: usize,
}

/// The queue every thread puts packet-ins on: bounded, never waited on (a
/// full queue drops and counts).
pub struct PacketIns {
    tx: mpsc::SyncSender<PacketInEvent>,
    pub dropped: std::sync::atomic::AtomicU64,
}

impl PacketIns {
    /// The queue and its receiving end.
    pub fn new(capacity: usize) -> (Arc<PacketIns>, Receiver<PacketInEvent>) {
        let (tx, rx) = mpsc::sync_channel(capacity);
        (
            Arc::new(PacketIns {
                tx,
                dropped: Default::default(),
            }),
            rx,
        )
    }

    fn offer(&self, ev: PacketInEvent) {
        if self.tx.try_send(ev).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Frames a batch produced, stored back to back, sent after the lock is
/// released; packet-ins go to the OpenFlow channels' queue.
#[derive(Default)]
struct TxArena {
    data: Vec<u8>,
    frames: Vec<(PortNo, usize, usize)>,
    packet_ins: Option<Arc<PacketIns>>,
    /// Where sampled copies go (sFlow export on).
    samples: Option<Arc<sflow::SampleQueue>>,
}

impl TxArena {
    fn with_queues(q: &Arc<PacketIns>, samples: Option<&Arc<sflow::SampleQueue>>) -> TxArena {
        TxArena {
            packet_ins: Some(Arc::clone(q)),
            samples: samples.cloned(),
            ..TxArena::default()
        }
    }
}

impl Egressor for TxArena {
    fn tx(&mut self, port: PortNo, frame: &[u8], _path: Path) {
        self.tx_parts(port, frame, &[], _path);
    }

    fn tx_parts(&mut self, port: PortNo, head: &[u8], body: &[u8], _path: Path) {
        let off = self.data.len();
        self.data.extend_from_slice(head);
        self.data.extend_from_slice(body);
        self.frames.push((port, off, head.len() + body.len()));
    }

    fn sample(
        &mut self,
        in_port: PortNo,
        cookie: megaflow::actions::SampleCookie,
        frame: &[u8],
        path: Path,
    ) {
        if let Some(q) = &self.samples {
            q.offer(in_port, cookie, frame, path);
        }
    }

    fn packet_in(
        &mut self,
        in_port: PortNo,
        reason: &megaflow::actions::UserspaceReason,
        frame: &[u8],
    ) {
        let Some(q) = &self.packet_ins else {
            return;
        };
        let max = match reason {
            megaflow::actions::UserspaceReason::Controller { max_len, .. } => usize::from(*max_len),
            _ => frame.len(),
        };
        q.offer(PacketInEvent {
            in_port,
            reason: reason.clone(),
            frame: frame[..frame.len().min(max)].to_vec(),
            total_len: frame.len(),
        });
    }
}

impl TxArena {
    /// Sends every frame to its port (in order per port, in chunks of
    /// up to [`TX_CHUNK`]); frames for a port that is not open are
    /// dropped (the port is gone or down).
    fn flush<'p>(&mut self, ports: impl Iterator<Item = (PortNo, &'p mut Box<dyn Port>)>) {
        for (no, port) in ports {
            self.send_to(no, port);
        }
        self.data.clear();
        self.frames.clear();
    }

    /// [`flush`](Self::flush) for a datapath thread: frames for its own
    /// ports through them; frames for ports another thread serves through
    /// those ports' shared handles (`shared`, the handlers' too; locked
    /// once, and only when there are such frames).
    fn flush_own_and_shared<'p>(
        &mut self,
        own: impl Iterator<Item = (PortNo, &'p mut Box<dyn Port>)>,
        shared: &Mutex<BTreeMap<PortNo, Box<dyn Port>>>,
    ) {
        if self.frames.is_empty() {
            return;
        }
        let mut mine: Vec<PortNo> = Vec::new();
        for (no, port) in own {
            self.send_to(no, port);
            mine.push(no);
        }
        if self.frames.iter().any(|(p, _, _)| !mine.contains(p)) {
            let mut others = lock_tx(shared);
            for (no, port) in others.iter_mut().filter(|(no, _)| !mine.contains(no)) {
                self.send_to(*no, port);
            }
        }
        self.data.clear();
        self.frames.clear();
    }

    /// Sends the frames for port `no` through `port`.
    fn send_to(&self, no: PortNo, port: &mut Box<dyn Port>) {
        let mut refs: [&[u8]; TX_CHUNK] = [&[]; TX_CHUNK];
        let mut n = 0;
        for &(p, off, len) in &self.frames {
            if p != no {
                continue;
            }
            refs[n] = &self.data[off..off + len];
            n += 1;
            if n == TX_CHUNK {
                send(port, &refs);
                n = 0;
            }
        }
        if n > 0 {
            send(port, &refs[..n]);
        }
    }
}

fn send(port: &mut Box<dyn Port>, refs: &[&[u8]]) {
    // Refused packets are counted by the port; a failed port is noticed
    // by the RX side (and by netlink).
    if let Err(e) = port.send_batch(refs, Timestamp(0)) {
        debug!("{e}");
    }
}

/// The send side of every open port (what the handler and PACKET_OUT
/// transmit through).
pub type TxPorts = Arc<Mutex<BTreeMap<PortNo, Box<dyn Port>>>>;

/// A running daemon: its threads and the switch they share.
pub struct Daemon<B: Device = SimBackend> {
    /// Taken by [`stop`](Daemon::stop) only.
    core: Option<Core<B>>,
    clock: Clock,
    factory: Arc<dyn PortFactory>,
    /// Every representor reported and not removed since, by name (a port
    /// added later opens at once when its netdev is here).
    known: BTreeMap<String, Representor>,
    /// Where ports added while running are tracked (`eswitchd run`).
    tracker: Option<offload::representor::TrackerHandle>,
    /// The tunnel UDP ports held on the host.
    claims: underlay::PortClaims,
    /// Stops the handler and the revalidator; `stop_rx` the datapath threads.
    stop: Arc<AtomicBool>,
    stop_rx: Arc<AtomicBool>,
    /// Per datapath thread, its command queue.
    rx_cmds: Vec<Sender<RxCmd>>,
    handler_tx: TxPorts,
    /// Open ports: OpenFlow port → (ifindex, datapath thread).
    open: BTreeMap<PortNo, (u32, usize)>,
    rx_threads: Vec<JoinHandle<()>>,
    threads: Vec<JoinHandle<()>>,
    /// Packet-ins for the OpenFlow channels (taken by them).
    packet_ins: Arc<PacketIns>,
    packet_in_rx: Option<Receiver<PacketInEvent>>,
    /// What the metrics endpoint keeps between scrapes.
    metrics: Arc<metrics::LiveMetrics>,
    /// Sampled copies for the sFlow exporter, and the queue's receiving
    /// end while no exporter runs.
    samples: Arc<sflow::SampleQueue>,
    sample_rx: Option<Receiver<sflow::SampledPacket>>,
    /// The exporter running and its settings ([`set_sflow`](Self::set_sflow)).
    sflow: Option<(crate::config::SflowConfig, sflow::Exporter)>,
    /// Watches the threads forwarding depends on.
    supervisor: Arc<supervise::Supervisor>,
}

/// What [`Daemon::stop`] found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReport {
    /// Rules that were in the device when the daemon stopped (all removed).
    pub rules_removed: usize,
    pub megaflows: usize,
    pub packets: u64,
    /// The switch's final counters, and the pipeline's.
    pub counters: crate::switch::SwitchCounters,
    pub stats: ofproto::PipelineStats,
}

impl Daemon<SimBackend> {
    /// The daemon on the sim eSwitch (made for the configured ports).
    pub fn start(
        cfg: &Config,
        flows: &FlowFile,
        factory: Arc<dyn PortFactory>,
        limits: LiveLimits,
    ) -> anyhow::Result<Daemon> {
        let sim = SimConfig {
            restore_path: cfg.backend.verbs_slow_path()?,
            ..SimConfig::default()
        };
        let dev = sim_device(&cfg.port_specs()?, sim);
        let plan = crate::faults::FaultPlan::parse(&cfg.backend.fault)?;
        if !plan.is_empty() {
            warn!(
                faults = plan.faults.len(),
                delays = plan.delays.len(),
                "the sim eSwitch runs a fault plan (backend.fault)"
            );
            plan.apply(&dev);
        }
        Daemon::start_on(dev, cfg, flows, factory, limits)
    }
}

impl<B: Device> Daemon<B> {
    /// Builds the switch on `dev` and starts the datapath, handler and
    /// revalidator threads. Ports open as [`Daemon::apply`] learns that
    /// their netdevs exist.
    pub fn start_on(
        dev: Arc<B>,
        cfg: &Config,
        flows: &FlowFile,
        factory: Arc<dyn PortFactory>,
        limits: LiveLimits,
    ) -> anyhow::Result<Daemon<B>> {
        let clock = Clock::new();
        let ports = cfg.port_specs()?;
        let pipeline = cfg.pipeline()?;
        let n = limits.datapath_threads.max(1);
        let mut dps = ThreadedDatapaths::new();
        let mut ends = Vec::with_capacity(n);
        for _ in 0..n {
            let (link, end) = megaflow::datapath::link();
            dps.add(link);
            ends.push(end);
        }
        let cache = pipeline.cache.clone();
        let device = Arc::clone(&dev);
        let mut sw = Switch::with_datapaths(dev, &ports, flows, pipeline, clock.now(), dps)?;
        for p in &ports {
            sw.set_link(p.no, false);
            sw.set_netdev(p.no, None);
        }
        // The queue is there from the start: an exporter may be started
        // later (the database's sFlow row); no port samples until then.
        let (samples, sample_rx) = sflow::SampleQueue::new(cfg.sflow.queue, cfg.sflow.header_bytes);
        let fronts: Vec<_> = (0..n).map(|_| sw.front_for_thread()).collect();
        let tracker = sw.tracker();
        cfg.conntrack.apply(&tracker)?;
        let core: Core<B> = Arc::new(parking_lot::Mutex::new(sw));
        let stop = Arc::new(AtomicBool::new(false));
        let stop_rx = Arc::new(AtomicBool::new(false));
        let (gate, upcalls) =
            upcall_channel(limits.upcall_queue, limits.upcall_rate, limits.upcall_burst);
        let handler_tx: Arc<Mutex<BTreeMap<PortNo, Box<dyn Port>>>> = Arc::default();
        let (packet_ins, packet_in_rx) = PacketIns::new(PACKET_IN_QUEUE);
        let supervisor = Arc::new(supervise::Supervisor::default());
        let mut rx_threads = Vec::new();
        let mut threads = Vec::new();
        let mut rx_cmds = Vec::with_capacity(n);
        for (index, (end, (front, board))) in ends.into_iter().zip(fronts).enumerate() {
            let (tx, cmds) = mpsc::channel();
            rx_cmds.push(tx);
            let rx = RxThread {
                index,
                dp: {
                    let mut dp = Datapath::new(cache.clone(), 0x5eed_0000 + index as u64);
                    dp.set_tracker(Arc::clone(&tracker));
                    dp
                },
                end,
                front,
                board,
                clock,
                factory: factory.clone(),
                stop: stop_rx.clone(),
                cmds,
                gate: gate.fork(),
                tally: Vec::new(),
                ports: Vec::new(),
                events: Vec::new(),
                packet_ins: Arc::clone(&packet_ins),
                samples: Arc::clone(&samples),
                shared_tx: Arc::clone(&handler_tx),
            };
            rx_threads.push(supervisor.spawn(&format!("esw-dp{index}"), move || rx.run())?);
        }
        drop(gate);
        // The device's slow-path queue (the `verbs` port), on the first
        // datapath thread: it names each packet's port itself.
        let vports: Vec<(offload::Vport, PortNo)> = ports
            .iter()
            .filter_map(|p| Some((p.vport?, p.no)))
            .collect();
        if let Some(q) = B::slow_path_port(&device, &vports) {
            info!("the slow path receives on the device's queue (restore tags)");
            let _ = rx_cmds[0].send(RxCmd::Add(Box::new(RxPort::new(SLOW_PATH_PORT, q))));
        }
        let upcalls = Arc::new(upcalls);
        let bridge = lock(&core).bridge_handle();
        for h in 0..limits.handlers.max(1) {
            let (c, s, t) = (core.clone(), stop.clone(), handler_tx.clone());
            let (b, q) = (Arc::clone(&bridge), Arc::clone(&upcalls));
            let arena = TxArena::with_queues(&packet_ins, Some(&samples));
            let link = lock(&core)
                .handler_link(h)
                .ok_or_else(|| anyhow!("the datapaths take no commands from handlers"))?;
            threads.push(supervisor.spawn(&format!("esw-handler{h}"), move || {
                let ends = HandlerEnds {
                    core: &c,
                    bridge: &b,
                    stop: &s,
                    upcalls: &q,
                    tx: &t,
                };
                handler(ends, clock, h, link, arena)
            })?);
        }
        let (c, s) = (core.clone(), stop.clone());
        let every = limits.revalidator_interval;
        let live_metrics = Arc::new(metrics::LiveMetrics::default());
        let _ = live_metrics.sflow.set(Arc::clone(&samples));
        let m = Arc::clone(&live_metrics);
        threads.push(supervisor.spawn("esw-revalidator", move || {
            revalidator(&c, clock, &s, every, &m)
        })?);
        info!(
            ports = ports.len(),
            flows = flows.flows.len(),
            datapath_threads = n,
            "eswitchd started"
        );
        Ok(Daemon {
            core: Some(core),
            clock,
            factory,
            known: BTreeMap::new(),
            tracker: None,
            claims: underlay::PortClaims::default(),
            stop,
            stop_rx,
            rx_cmds,
            handler_tx,
            open: BTreeMap::new(),
            rx_threads,
            threads,
            packet_ins,
            packet_in_rx: Some(packet_in_rx),
            metrics: live_metrics,
            samples,
            sample_rx: Some(sample_rx),
            sflow: None,
            supervisor,
        })
    }

    /// Tells `notify` of a datapath thread, handler or revalidator that
    /// panicked (with the thread's name and message), and of one that did
    /// before this call.
    pub fn on_thread_failure(&self, notify: impl Fn(String) + Send + 'static) {
        self.supervisor.notify(notify);
    }

    /// The send side of the open ports.
    pub fn tx_ports(&self) -> TxPorts {
        Arc::clone(&self.handler_tx)
    }

    /// The packet-in queue's receiving end (once: for the OpenFlow
    /// channels), and the queue (for its drop count).
    pub fn take_packet_ins(&mut self) -> (Option<Receiver<PacketInEvent>>, Arc<PacketIns>) {
        (self.packet_in_rx.take(), Arc::clone(&self.packet_ins))
    }

    /// The switch (for the control socket).
    pub fn core(&self) -> Core<B> {
        Arc::clone(self.shared())
    }

    fn shared(&self) -> &Core<B> {
        // Present from start until stop, which consumes the daemon.
        self.core.as_ref().expect("the daemon's switch")
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// What the metrics endpoint reads besides the switch.
    pub fn live_metrics(&self) -> Arc<metrics::LiveMetrics> {
        Arc::clone(&self.metrics)
    }

    /// One scrape of the metrics endpoint: the switch's counters now,
    /// with the OpenFlow connections of `conns`. It reads the switch only
    /// while the daemon runs.
    pub fn scrape_fn(&self, conns: Option<openflow::ConnBoard>, backend: &str) -> metrics::Scrape {
        let core = Arc::downgrade(self.shared());
        let (m, backend) = (self.live_metrics(), backend.to_string());
        Arc::new(move || {
            let core = core.upgrade().ok_or("the daemon is stopping")?;
            let snap = metrics::Snapshot::of(&lock(&core));
            let conns = conns.as_ref().map(|c| c.connections()).unwrap_or_default();
            metrics::encode_snapshot(&snap, &conns, &m, &backend)
                .map_err(|e| format!("cannot encode the metrics: {e}"))
        })
    }

    /// The switch's port named `name`.
    fn spec_named(&self, name: &str) -> Option<PortSpec> {
        lock(self.shared())
            .ports()
            .iter()
            .find(|p| p.name == name)
            .cloned()
    }

    /// Stops a port's I/O: its datapath thread drops it, the handler its
    /// send side.
    fn close(&mut self, no: PortNo) {
        if let Some((_, thread)) = self.open.remove(&no) {
            let _ = self.rx_cmds[thread].send(RxCmd::Remove(no));
        }
        lock_tx(&self.handler_tx).remove(&no);
    }

    fn spec_of_ifindex(&self, ifindex: u32) -> Option<PortNo> {
        self.open
            .iter()
            .find(|(_, &(i, _))| i == ifindex)
            .map(|(&no, _)| no)
    }

    /// Stops the threads in order: the datapath threads first (their last
    /// counts and misses sent), then the handler (which runs the upcalls
    /// still queued) and the revalidator.
    fn join_threads(&mut self) {
        self.stop_rx.store(true, Ordering::SeqCst);
        for t in self.rx_threads.drain(..) {
            let _ = t.join();
        }
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// The datapath thread with the fewest open ports.
    fn least_loaded(&self) -> usize {
        (0..self.rx_cmds.len())
            .min_by_key(|t| self.open.values().filter(|(_, o)| o == t).count())
            .unwrap_or(0)
    }

    /// Applies a port-table event: opens a configured port whose netdev
    /// appeared, closes and flushes one that vanished, follows up/down.
    pub fn apply(&mut self, ev: &PortEvent) {
        match ev {
            PortEvent::Added(rep) => {
                self.known.insert(rep.ifname.clone(), rep.clone());
                self.added(rep);
            }
            PortEvent::Removed(rep) => {
                self.known.remove(&rep.ifname);
                self.removed(rep);
            }
            PortEvent::Up { ifindex } | PortEvent::Down { ifindex } => {
                let up = matches!(ev, PortEvent::Up { .. });
                // Known netdevs that are no port yet too: an add-port
                // later opens them with the link they have.
                for rep in self.known.values_mut().filter(|r| r.ifindex == *ifindex) {
                    rep.oper_up = up;
                }
                if let Some(no) = self.spec_of_ifindex(*ifindex) {
                    lock(self.shared()).link_changed(no, up);
                    info!(port = %no, "link {}", state_name(up));
                }
            }
            PortEvent::Renamed { ifindex, old, new } => {
                if let Some(mut rep) = self.known.remove(old) {
                    rep.ifname.clone_from(new);
                    self.known.insert(new.clone(), rep);
                }
                info!(
                    ifindex,
                    "netdev {old} renamed {new}; the port keeps its identity"
                );
            }
            PortEvent::MtuChanged { ifindex, old, new } => {
                info!(ifindex, "mtu {old} -> {new}");
            }
            PortEvent::MacChanged { ifindex, .. } => debug!(ifindex, "mac changed"),
        }
    }

    fn added(&mut self, rep: &Representor) {
        let Some(spec) = self.spec_named(&rep.ifname) else {
            debug!(ifname = %rep.ifname, "representor not in the config; ignored");
            return;
        };
        if self.open.contains_key(&spec.no) {
            return;
        }
        let opened = match self.factory.open(&spec.name) {
            Ok(o) => o,
            Err(e) => {
                warn!(port = %spec.name, "cannot open: {e:#}");
                return;
            }
        };
        let thread = self.least_loaded();
        info!(port = %spec.name, ofport = %spec.no, r#type = %spec.kind, vport = %spec.vport_name(), ifindex = rep.ifindex, kind = %opened.kind, up = rep.oper_up, thread, "port opened");
        let netdev = Netdev {
            ifindex: Some(rep.ifindex),
            kind: opened.kind.clone(),
        };
        lock(self.shared()).attach(spec.no, netdev, rep.oper_up, thread);
        lock_tx(&self.handler_tx).insert(spec.no, opened.tx);
        let port = RxPort::new(spec.no, opened.rx);
        if self.rx_cmds[thread]
            .send(RxCmd::Add(Box::new(port)))
            .is_ok()
        {
            self.open.insert(spec.no, (rep.ifindex, thread));
        }
    }

    fn removed(&mut self, rep: &Representor) {
        let Some(no) = self.spec_of_ifindex(rep.ifindex) else {
            return;
        };
        let flushed = self.detach(no, Detach::NetdevGone);
        info!(port = %rep.ifname, ofport = %no, flushed, "netdev removed; its megaflows and rules flushed");
    }

    /// The one way a port stops, whatever asked (its netdev vanished, a
    /// `del-port`): its I/O closed (its datapath thread drops it, the
    /// handlers its send side), then the slow path told
    /// ([`Switch::detach`]). Returns how many megaflows went.
    fn detach(&mut self, no: PortNo, why: Detach) -> usize {
        self.close(no);
        lock(self.shared()).detach(no, why)
    }

    /// Tracks the netdevs of ports added from now on through `t`.
    pub fn set_tracker(&mut self, t: offload::representor::TrackerHandle) {
        self.tracker = Some(t);
    }

    /// Tunnel ports send over the host's routes and neighbours, `host`;
    /// their UDP ports are held on the host.
    pub fn set_host_state(&mut self, host: Arc<offload::host::HostState>) {
        let ports = lock(self.shared()).shared_ports();
        self.set_underlay(Arc::new(underlay::HostUnderlay::new(host, ports)));
    }

    /// Tunnel ports send over `u`; their UDP ports are held on the host.
    pub fn set_underlay(&mut self, u: Arc<dyn ofproto::tunnel::Underlay>) {
        let mut sw = lock(self.shared());
        sw.set_underlay(u);
        for (_, t) in sw.port_map().tunnels() {
            self.claims.claim(t.dst_port);
        }
    }

    /// Adds a port while running (`eswitchctl add-port`; not written to
    /// the config), of `kind`. Without `ofport`, the lowest free number;
    /// without `vport`, the one its kind gives it (a representor's own,
    /// as its netdev reports it; `uplink`; none). The port opens as soon
    /// as its netdev is here (now, if it already is).
    pub fn add_port(
        &mut self,
        name: &str,
        kind: PortKind,
        ofport: Option<u32>,
        vport: Option<Vport>,
        options: &[(String, String)],
    ) -> anyhow::Result<PortSpec> {
        self.add_port_to(ofproto::BridgeNo::MAIN, name, kind, ofport, vport, options)
    }

    /// [`add_port`](Self::add_port) on bridge `bridge`.
    pub fn add_port_to(
        &mut self,
        bridge: ofproto::BridgeNo,
        name: &str,
        kind: PortKind,
        ofport: Option<u32>,
        vport: Option<Vport>,
        options: &[(String, String)],
    ) -> anyhow::Result<PortSpec> {
        let tunnel = kind.tunnel(name, options)?;
        let peer = kind.peer(name, options)?;
        let known = self.known.get(name).cloned();
        let reported = known.as_ref().and_then(|r| r.vport);
        let vport = kind.spec().vport(name, vport, reported)?;
        let spec = {
            let mut sw = lock(self.shared());
            let no = ofport.map_or_else(|| sw.free_port_number(), PortNo);
            let spec = PortSpec {
                name: name.to_string(),
                no,
                kind,
                vport,
                tunnel,
                bridge,
                peer,
            };
            sw.add_port(spec.clone())?;
            spec
        };
        info!(port = %spec.name, ofport = %spec.no, r#type = %spec.kind, vport = %spec.vport_name(), "port added");
        if let Some(t) = &spec.tunnel {
            self.claims.claim(t.dst_port);
        }
        if let Some(t) = &self.tracker {
            t.track(name, vport);
        }
        if let Some(rep) = known {
            self.added(&rep);
        }
        Ok(spec)
    }

    /// What the port named `name` is to the switch, for
    /// `Interface.status`: its kind, its eSwitch vport, a patch port's
    /// peer, a tunnel port's remote.
    pub fn port_status_pairs(&self, name: &str) -> Vec<(String, String)> {
        let Some(s) = self.spec_named(name) else {
            return Vec::new();
        };
        let mut out = vec![("eswitch_port_type".to_string(), s.kind.to_string())];
        if let Some(v) = s.vport {
            out.push(("eswitch_vport".into(), v.to_string()));
        }
        if let Some(p) = &s.peer {
            out.push(("peer".into(), p.clone()));
        }
        if let Some(t) = &s.tunnel {
            let remote = match t.remote {
                ofproto::tunnel::FromFlow::Fixed(ip) => ip.to_string(),
                ofproto::tunnel::FromFlow::Flow => "flow".into(),
            };
            out.push(("tunnel_remote_ip".into(), remote));
        }
        out
    }

    /// The OpenFlow port number of the port named `name`.
    pub fn port_number(&self, name: &str) -> Option<u32> {
        self.spec_named(name).map(|s| s.no.0)
    }

    /// Removes a port while running (`eswitchctl del-port`): closed, its
    /// megaflows and hardware rules flushed; returns it and how many
    /// megaflows went.
    pub fn del_port(&mut self, name: &str) -> anyhow::Result<(PortSpec, usize)> {
        let spec = self
            .spec_named(name)
            .ok_or_else(|| anyhow::anyhow!("no port named \"{name}\""))?;
        let flushed =
            self.detach(spec.no, Detach::Removing) + lock(self.shared()).del_port(spec.no)?;
        if let Some(t) = &self.tracker {
            t.untrack(name);
        }
        info!(port = %spec.name, ofport = %spec.no, flushed, "port deleted");
        Ok((spec, flushed))
    }

    /// Stops the threads, then removes every rule and object from the
    /// device (a final revalidator pass folds the last counts first).
    pub fn stop(mut self) -> anyhow::Result<StopReport> {
        self.join_threads();
        lock_tx(&self.handler_tx).clear();
        let core = self
            .core
            .take()
            .ok_or_else(|| anyhow!("the daemon was stopped"))?;
        let mut sw = Arc::try_unwrap(core)
            .map_err(|_| anyhow!("the switch is still in use (control socket not stopped?)"))?
            .into_inner();
        sw.pipeline_mut().adopt();
        let rules = sw.pipeline().offloaded_len();
        let megaflows = sw.pipeline().len();
        let now = self.clock.now();
        let (counters, stats) = sw.finish(now)?;
        Ok(StopReport {
            rules_removed: rules,
            megaflows,
            packets: counters.rx.packets,
            counters,
            stats,
        })
    }
}

impl<B: Device> Drop for Daemon<B> {
    fn drop(&mut self) {
        self.join_threads();
    }
}

fn state_name(up: bool) -> &'static str {
    if up {
        "up"
    } else {
        "down"
    }
}

fn lock_tx(
    m: &Mutex<BTreeMap<PortNo, Box<dyn Port>>>,
) -> MutexGuard<'_, BTreeMap<PortNo, Box<dyn Port>>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The native stack of the daemon's threads: a translation nests one
/// frame set per `resubmit` (up to `ofproto::xlate::MAX_NESTING`, which a
/// debug build fits in 2 MiB with little to spare); virtual memory, paid
/// for only as it is touched.
const THREAD_STACK: usize = 8 << 20;

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> anyhow::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(THREAD_STACK)
        .spawn(f)
        .with_context(|| format!("cannot start thread {name}"))
}

/// One datapath thread: its ports, its datapath, its front.
struct RxThread<F> {
    index: usize,
    dp: Datapath,
    end: DatapathEnd,
    front: F,
    board: Arc<CounterBoard>,
    clock: Clock,
    factory: Arc<dyn PortFactory>,
    stop: Arc<AtomicBool>,
    cmds: Receiver<RxCmd>,
    gate: UpcallGate,
    /// Each round's admissions per port (kept: no allocation per round).
    tally: Vec<(PortNo, Tally)>,
    ports: Vec<RxPort>,
    events: Vec<DpEvent>,
    packet_ins: Arc<PacketIns>,
    samples: Arc<sflow::SampleQueue>,
    /// Every open port's shared sending handle: frames for ports another
    /// thread serves go out through them.
    shared_tx: TxPorts,
}

/// Commands from the slow path applied between two rounds that carried
/// packets, at most (a busy thread spreads a burst of installs over its
/// rounds instead of letting its receive rings fill). An idle thread
/// applies everything waiting: a removed megaflow must not outlive its
/// eviction for longer than a wake-up.
const COMMANDS_PER_ROUND: usize = 64;

impl<F: Front> RxThread<F> {
    fn run(mut self) {
        let mut arena = TxArena::with_queues(&self.packet_ins, Some(&self.samples));
        let mut idle = 0u32;
        let mut fds: Vec<i32> = Vec::new();
        let mut last_status = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            self.commands();
            let budget = if idle > 0 {
                usize::MAX
            } else {
                COMMANDS_PER_ROUND
            };
            self.end.serve(&mut self.dp, budget, &mut self.events);
            let mut got = 0;
            let mut failed = Vec::new();
            for p in &mut self.ports {
                match p.receive() {
                    Ok(n) => got += n,
                    Err(e) => {
                        p.used = 0;
                        failed.push(p.no);
                        warn!("{e}; the port stops until its netdev returns");
                    }
                }
            }
            self.ports.retain(|p| !failed.contains(&p.no));
            if last_status.elapsed() >= STATUS_EVERY {
                self.publish();
                last_status = Instant::now();
            }
            if got == 0 {
                idle += 1;
                if idle > SPIN_ROUNDS {
                    fds.clear();
                    fds.extend(self.ports.iter().filter_map(|p| p.port.poll_fd()));
                    self.factory.wait(&fds, IDLE_WAIT);
                }
                continue;
            }
            idle = 0;
            self.round(&mut arena);
        }
        // The last counts, so the final pass folds every packet.
        self.end.flush(&mut self.dp, &mut self.events);
        self.publish();
    }

    fn commands(&mut self) {
        while let Ok(cmd) = self.cmds.try_recv() {
            match cmd {
                RxCmd::Add(p) => {
                    self.ports.retain(|q| q.no != p.no);
                    self.ports.push(*p);
                }
                RxCmd::Remove(no) => {
                    self.ports.retain(|q| q.no != no);
                    self.gate.forget(no);
                }
            }
        }
    }

    /// One round: the received batches through the sim and the datapath,
    /// misses to the gate, then out.
    fn round(&mut self, arena: &mut TxArena) {
        let now = self.clock.now();
        let pkts: Vec<Rx<'_>> = self.ports.iter().flat_map(RxPort::packets).collect();
        let mut sw = LivePath {
            dp: &mut self.dp,
            gate: &mut self.gate,
            tally: &mut self.tally,
        };
        self.front.step(now, &pkts, arena, &mut sw);
        let c = self.front.counters_mut();
        for (port, t) in self.tally.drain(..) {
            c.upcalls_queued += t.queued;
            c.upcall_drops_rate += t.rate;
            c.upcall_drops_full += t.full;
            let pc = c.ports.entry(port).or_default();
            pc.upcalls += t.queued;
            pc.upcall_drops += t.rate + t.full;
        }
        drop(pkts);
        arena.flush_own_and_shared(
            self.ports.iter_mut().map(|p| (p.no, &mut p.port)),
            &self.shared_tx,
        );
    }

    /// This thread's counters and port drops, for `show` and `stats`.
    fn publish(&self) {
        self.board.publish(self.index, self.front.counters());
        for p in &self.ports {
            let st = p.port.stats();
            self.board.port_drops(p.no, st.rx_dropped, st.tx_dropped);
        }
    }
}

/// A datapath thread's software path: its datapath; a miss goes to the
/// upcall gate (never waits).
struct LivePath<'a> {
    dp: &'a mut Datapath,
    gate: &'a mut UpcallGate,
    /// Admissions of this round, per port (a thread has few ports).
    tally: &'a mut Vec<(PortNo, Tally)>,
}

/// Misses queued, and dropped over the port's rate or its queue share.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    queued: u64,
    rate: u64,
    full: u64,
}

impl SoftwarePath for LivePath<'_> {
    fn run<S: megaflow::actions::ActionSink>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        tun: &megaflow::TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        from: Option<megaflow::Resume>,
    ) -> Option<SwOutcome> {
        let lookup = self.dp.run(now, port, tun, pkt, sink, from);
        let mut out = self.answer(now, port, tun, lookup, pkt);
        // Copies the packet forked and left waiting at a miss.
        while let Some(lookup) = self.dp.run_deferred(now, pkt, sink) {
            match (&mut out, self.answer(now, port, tun, lookup, pkt)) {
                (Some(o), Some(more)) => o.exec.then(&more.exec),
                (None, more) => out = more,
                (Some(_), None) => {}
            }
        }
        out
    }
}

impl LivePath<'_> {
    /// A datapath answer: a hit as it is; a miss queued for a handler
    /// (`None`).
    fn answer(
        &mut self,
        now: Timestamp,
        port: PortNo,
        tun: &megaflow::TunnelKey,
        lookup: Lookup,
        pkt: &[u8],
    ) -> Option<SwOutcome> {
        match lookup {
            Lookup::Hit(exec) => Some(SwOutcome {
                upcall: false,
                exec,
            }),
            Lookup::Miss => {
                let at = match self.tally.iter().position(|(p, _)| *p == port) {
                    Some(i) => i,
                    None => {
                        self.tally.push((port, Tally::default()));
                        self.tally.len() - 1
                    }
                };
                let t = &mut self.tally[at].1;
                let key = self.dp.key();
                let stage = (key.recirc_id() != 0).then_some(key);
                match self.gate.offer_tunneled(now, port, tun, pkt, stage) {
                    Admission::Queued => t.queued += 1,
                    Admission::RateLimited => t.rate += 1,
                    Admission::QueueFull | Admission::Closed => t.full += 1,
                }
                None
            }
        }
    }
}

/// What a handler thread shares with the others.
struct HandlerEnds<'a, B: Device> {
    core: &'a Core<B>,
    bridge: &'a ofproto::SharedBridge,
    stop: &'a AtomicBool,
    upcalls: &'a UpcallReceiver,
    tx: &'a Mutex<BTreeMap<PortNo, Box<dyn Port>>>,
}

/// One handler thread (`[slowpath] handlers` of them share the queue):
/// takes a batch of misses, parses and translates them on the bridge,
/// installs their megaflows through its [`ofproto::FlowSetup`] and
/// executes them, all without the slow path's lock (concurrently with
/// the other handlers, a revalidator pass, a dump or a scrape), and sends
/// what they produced. Only when the slow path has a backlog of records
/// to adopt ([`ofproto::STAGED_MAX`]) does it take the lock itself.
fn handler<B: Device>(
    ends: HandlerEnds<'_, B>,
    clock: Clock,
    h: usize,
    (setup, board, place): (ofproto::FlowSetup, Arc<CounterBoard>, usize),
    mut arena: TxArena,
) {
    let mut batch: Vec<Upcall> = Vec::with_capacity(HANDLER_BATCH);
    let mut counters = crate::switch::SwitchCounters::default();
    let mut rng = megaflow::SplitMix64::new(0x5eed_4a4d_0000_0001 ^ h as u64);
    loop {
        match ends
            .upcalls
            .recv_batch(&mut batch, HANDLER_BATCH, Duration::from_millis(50))
        {
            // Stopping: the datapath threads have stopped first, so the
            // queue is complete; it is empty now.
            Ok(()) if batch.is_empty() && ends.stop.load(Ordering::Relaxed) => return,
            Ok(()) if batch.is_empty() => continue,
            Ok(()) => {}
            Err(Disconnected) => return,
        }
        let now = clock.now();
        for u in batch.iter_mut() {
            let miss = u.miss();
            let t = ofproto::translate_miss(ends.bridge, &miss.key, now);
            let mut sink = crate::switch::SwSink {
                egress: &mut arena,
                counters: &mut counters,
                in_port: u.port,
            };
            match setup.upcall(h, &mut rng, now, &miss, &t, &mut u.frame, &mut sink) {
                Ok(r) => crate::switch::count_sw_drop(&mut counters, &r),
                Err(ofproto::Backlog) => {
                    let mut sw = lock(ends.core);
                    sw.upcall_translated(now, u.port, &miss, &t, &mut u.frame, &mut arena);
                }
            }
        }
        batch.clear();
        // Sent before counted: whoever reads the board after a packet's
        // upcall is counted finds its outputs already on their ports.
        {
            let mut ports = lock_tx(ends.tx);
            arena.flush(ports.iter_mut().map(|(no, p)| (*no, p)));
        }
        board.publish(place, &counters);
    }
}

/// Most offloads the offload thread takes from the slow path at a time:
/// it takes them under the slow path's lock (no device call), runs them
/// on the device without it, and hands the results back under it
/// ([`offload_outside`]).
pub const OFFLOAD_BATCH: usize = 32;

/// One revalidator pass on the pipeline `of` finds in what `held` guards,
/// in batches of [`PASS_BATCH`](ofproto::PASS_BATCH): between two, the
/// lock goes to a thread waiting for it, if one is (a fair hand-off), and
/// comes back after it.
pub fn pass_in_batches<T, O: FlowOffload, D: Datapaths>(
    held: &mut parking_lot::MutexGuard<'_, T>,
    now: Timestamp,
    of: impl Fn(&mut T) -> &mut Pipeline<O, D>,
) -> PassReport {
    let mut pass = of(held).pass_begin(now);
    while !of(held).pass_step(&mut pass, now, ofproto::PASS_BATCH) {
        parking_lot::MutexGuard::bump(held);
    }
    of(held).pass_end(pass, now)
}

/// The offload tick: the datapaths' counts folded, then the queued hot
/// flows offloaded [`OFFLOAD_BATCH`] at a time, each batch's device calls
/// made on `dev` without the slow path's lock (a handler installing
/// megaflows never waits for the device). Returns the offloads made.
pub fn offload_outside<T, O: FlowOffload, D: Datapaths>(
    slow: &parking_lot::Mutex<T>,
    dev: &SharedOffload<O>,
    now: Timestamp,
    of: impl Fn(&mut T) -> &mut Pipeline<SharedOffload<O>, D>,
) -> usize {
    let mut made = 0;
    let mut jobs = {
        let mut g = slow.lock();
        let p = of(&mut g);
        p.fold_datapaths(now);
        p.take_offloads(now, OFFLOAD_BATCH)
    };
    while !jobs.is_empty() {
        made += jobs.len();
        let done: Vec<OffloadDone> = {
            let mut d = dev.lock();
            jobs.into_iter().map(|j| j.run(&mut *d)).collect()
        };
        let mut g = slow.lock();
        let p = of(&mut g);
        p.finish_offloads(done, now);
        jobs = p.take_offloads(now, OFFLOAD_BATCH);
    }
    made
}

/// The revalidator/offload thread: the one thread that programs the
/// device. Every [`OFFLOAD_TICK`] it folds the datapath's counts and
/// offloads the flows that turned hot; every `every` it runs a pass. Both
/// run in batches ([`PASS_BATCH`](ofproto::PASS_BATCH) records,
/// [`OFFLOAD_BATCH`] offloads), handing the slow path to whoever waits for
/// it between two: a handler's upcall waits for a batch, not a pass.
fn revalidator<B: Device>(
    core: &Core<B>,
    clock: Clock,
    stop: &AtomicBool,
    every: Duration,
    m: &metrics::LiveMetrics,
) {
    let mut next = Instant::now() + every;
    let dev = {
        let mut sw = lock(core);
        // Passes leave the offloads to the tick, which makes the device
        // calls without the slow path's lock.
        sw.pipeline_mut().set_offload_in_passes(false);
        sw.offloader_handle()
    };
    while !stop.load(Ordering::Relaxed) {
        let left = next.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left.min(OFFLOAD_TICK));
            // An OpenFlow BARRIER waits for a pass: run it now.
            if !lock(core).pipeline().pass_wanted() {
                offload_outside(core, &dev, clock.now(), Switch::pipeline_mut);
                continue;
            }
            next = Instant::now() + every;
        } else {
            next += every;
            if next < Instant::now() {
                next = Instant::now() + every;
            }
        }
        let now = clock.now();
        let mut sw = lock(core);
        let poll_errors = sw.pipeline().stats().poll_errors;
        let r = pass_in_batches(&mut sw, now, Switch::pipeline_mut);
        let polled = sw.pipeline().stats().poll_errors == poll_errors;
        // Rules the pass expired, to the controllers that asked.
        sw.report_expired(now);
        let tracker = sw.tracker();
        drop(sw);
        // Expired connections go outside the switch's lock.
        tracker.sweep(now.as_millis(), crate::switch::CT_SWEEP_BUDGET);
        m.pass(r.micros as f64 / 1e6, polled);
        debug!(?r, "revalidator pass");
    }
}

#[cfg(test)]
#[path = "tests/daemon.rs"]
mod tests;

#[cfg(test)]
#[path = "tests/openflow.rs"]
mod openflow_tests;

#[cfg(test)]
#[path = "tests/openflow_groups.rs"]
mod openflow_groups_tests;

#[cfg(test)]
#[path = "tests/sflow.rs"]
mod sflow_tests;

#[cfg(test)]
#[path = "tests/metrics.rs"]
mod metrics_tests;

#[cfg(test)]
#[path = "tests/openflow_tls.rs"]
mod openflow_tls_tests;

#[cfg(test)]
#[path = "tests/openflow_hostile.rs"]
mod openflow_hostile_tests;

#[cfg(test)]
#[path = "tests/openflow_control.rs"]
mod openflow_control_tests;

#[cfg(test)]
#[path = "tests/openflow_dial.rs"]
mod openflow_dial_tests;

#[cfg(test)]
#[path = "tests/ports.rs"]
mod ports_tests;

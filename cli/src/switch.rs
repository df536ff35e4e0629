//! A switch with the `sim` eSwitch in front of the software datapath: the
//! walk of ../shared/DESIGN.md on packets handed in by a caller (replay's
//! capture loop, or the live datapath threads).
//!
//! Each batch goes through the sim FDB first ([`SimFront`]). What it
//! forwards (offloaded flows) leaves "in hardware" and is counted there;
//! what misses reaches the software path on the ingress port's
//! representor, exactly as the NIC hands misses to the eSwitch manager.
//! Sampled copies the hardware makes come back to software marked as
//! samples.
//!
//! [`SimSwitch`] is the slow path's side (the pipeline, the device, the
//! port map, what `show` and `stats` print); it is generic over where its
//! datapaths run: one on the caller's thread ([`LocalDatapath`]: replay,
//! tests), or one per live datapath thread ([`ThreadedDatapaths`]), each
//! thread with its own [`SimFront`] and counters, published to a
//! [`CounterBoard`] for the slow path to read.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::bail;
use megaflow::actions::{ActionSink, UserspaceReason};
use megaflow::{MeterId, PortNo, Timestamp};
use offload::dr::DomainId;
use offload::manager::{ManagerConfig, OffloadManager};
use offload::prm::PortTable;
use offload::sim::{Egress, Output, SimBackend, SimConfig};
use offload::Vport;
use ofproto::bridge::PortInfo;
use ofproto::pipeline::SwOutcome;
use ofproto::{Bridge, Datapaths, LocalDatapath, Pipeline, PipelineConfig, ThreadedDatapaths};

use crate::config::PortSpec;

pub use ofproto::text::FlowFile;

/// Where a packet went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// Forwarded by the (simulated) eSwitch.
    Hardware,
    /// Forwarded by the software pipeline.
    Software,
}

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }
}

/// Per-port counters, split by path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx: Count,
    pub tx_hw: Count,
    pub tx_sw: Count,
}

/// Counters of the whole switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Packets received (all ports).
    pub rx: Count,
    /// Received packets the eSwitch handled (forwarded or dropped by a rule).
    pub hw_handled: u64,
    /// Received packets that reached software (FDB misses).
    pub sw_handled: u64,
    /// Dropped by hardware rules (drop actions, red meter colour).
    pub hw_drops: u64,
    /// Dropped in software (drop actions, meters, no output).
    pub sw_drops: u64,
    /// Sampled copies from hardware samplers / software sample actions.
    pub hw_samples: u64,
    pub sw_samples: u64,
    /// Packets for the controller (software only).
    pub to_controller: u64,
    /// Per OpenFlow port.
    pub ports: BTreeMap<PortNo, PortCounters>,
    /// Live mode: misses handed to the upcall handler thread, and misses
    /// dropped because their port was over its upcall rate or the queue
    /// to the handler was full (the RX thread never waits).
    pub upcalls_queued: u64,
    pub upcall_drops_rate: u64,
    pub upcall_drops_full: u64,
}

impl SwitchCounters {
    /// Adds another thread's counters.
    pub fn add(&mut self, o: &SwitchCounters) {
        let add = |a: &mut Count, b: &Count| {
            a.packets += b.packets;
            a.bytes += b.bytes;
        };
        add(&mut self.rx, &o.rx);
        self.hw_handled += o.hw_handled;
        self.sw_handled += o.sw_handled;
        self.hw_drops += o.hw_drops;
        self.sw_drops += o.sw_drops;
        self.hw_samples += o.hw_samples;
        self.sw_samples += o.sw_samples;
        self.to_controller += o.to_controller;
        for (p, c) in &o.ports {
            let mine = self.ports.entry(*p).or_default();
            add(&mut mine.rx, &c.rx);
            add(&mut mine.tx_hw, &c.tx_hw);
            add(&mut mine.tx_sw, &c.tx_sw);
        }
        self.upcalls_queued += o.upcalls_queued;
        self.upcall_drops_rate += o.upcall_drops_rate;
        self.upcall_drops_full += o.upcall_drops_full;
    }
}

/// What the daemon knows of a live port besides the switch's counters
/// (absent in replay).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStatus {
    /// The netdev's ifindex while it exists.
    pub ifindex: Option<u32>,
    /// `up`, `down` (oper state), `absent` (no such netdev now).
    pub state: String,
    /// The port type in use (`af_packet`, `af_xdp`).
    pub kind: String,
    /// Received frames the port could not deliver, and sends it refused.
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// One port and its counters, as `show` and the replay summary print it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PortSummary {
    pub name: String,
    pub ofport: u32,
    pub vport: String,
    pub rx_packets: u64,
    pub tx_hw_packets: u64,
    pub tx_sw_packets: u64,
    pub tx_bytes: u64,
    /// Live mode only: ifindex, state, port type, drops.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub status: Option<PortStatus>,
}

/// What a caller can watch: every frame leaving the switch.
pub trait Egressor {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path);
    /// A sampled copy (to the sampling collector).
    fn sample(&mut self, _frame: &[u8], _path: Path) {}
}

/// Counts only.
pub struct Discard;

impl Egressor for Discard {
    fn tx(&mut self, _: PortNo, _: &[u8], _: Path) {}
}

/// A packet software dropped on purpose (a drop action, a meter, no
/// output at all) is counted once.
fn count_sw_drop(c: &mut SwitchCounters, r: &SwOutcome) {
    if r.exec.dropped.is_some() && r.exec.outputs == 0 && r.exec.userspace == 0 {
        c.sw_drops += 1;
    }
}

/// The ports of a switch: OpenFlow port ↔ vport, in configuration order.
/// The one place that maps them (the offload manager's `PortTable` is
/// built from it).
#[derive(Clone, Debug, Default)]
pub struct PortMap {
    specs: Vec<PortSpec>,
    by_vport: BTreeMap<Vport, PortNo>,
    by_port: BTreeMap<PortNo, Vport>,
}

impl PortMap {
    /// The map of `ports`; two ports on one vport are an error.
    pub fn new(ports: &[PortSpec]) -> anyhow::Result<PortMap> {
        let mut by_vport = BTreeMap::new();
        for p in ports {
            if by_vport.insert(p.vport, p.no).is_some() {
                bail!("two ports on vport {}", p.vport);
            }
        }
        Ok(PortMap {
            specs: ports.to_vec(),
            by_port: by_vport.iter().map(|(v, p)| (*p, *v)).collect(),
            by_vport,
        })
    }

    pub fn specs(&self) -> &[PortSpec] {
        &self.specs
    }

    pub fn vport(&self, port: PortNo) -> Option<Vport> {
        self.by_port.get(&port).copied()
    }

    pub fn port(&self, vport: Vport) -> Option<PortNo> {
        self.by_vport.get(&vport).copied()
    }

    /// The table the offload manager compiles rules with.
    fn table(&self) -> PortTable {
        self.specs
            .iter()
            .fold(PortTable::new(), |t, p| t.with(p.no, p.vport))
    }
}

/// What runs a packet the device handed to software, for [`SimFront::step`].
pub trait SoftwarePath {
    /// Runs `pkt` (received on `port`) into `sink`; `None` when it was not
    /// run here (a live datapath miss, queued for the handler).
    fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Option<SwOutcome>;
}

/// The whole software path on one thread (replay, tests): the datapath,
/// then an upcall on a miss.
impl<O: megaflow::offload::FlowOffload> SoftwarePath for Pipeline<O, LocalDatapath> {
    fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Option<SwOutcome> {
        Some(self.process(now, port, pkt, sink))
    }
}

/// The sim eSwitch as one thread sees it: the shared device, the port
/// map, and this thread's counters.
pub struct SimFront {
    sim: Arc<SimBackend>,
    domain: DomainId,
    ports: Arc<PortMap>,
    out: Output,
    /// Per packet of the batch: whether the eSwitch forwarded or dropped it.
    handled: Vec<bool>,
    buf: Vec<u8>,
    counters: SwitchCounters,
}

impl SimFront {
    fn new(sim: Arc<SimBackend>, domain: DomainId, ports: Arc<PortMap>) -> SimFront {
        SimFront {
            sim,
            domain,
            ports,
            out: Output::new(),
            handled: Vec::new(),
            buf: Vec::new(),
            counters: SwitchCounters::default(),
        }
    }

    /// This thread's counters.
    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    pub fn counters_mut(&mut self) -> &mut SwitchCounters {
        &mut self.counters
    }

    /// Runs a batch of received packets `(in_port, frame)` at `now`: the
    /// sim FDB first, then what it hands to software through `sw`. Packets
    /// from unknown ports are counted in `rx` and dropped.
    pub fn step<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        pkts: &[(PortNo, &[u8])],
        egress: &mut E,
        sw: &mut P,
    ) {
        self.out.clear();
        let mut known = Vec::with_capacity(pkts.len());
        for (port, frame) in pkts {
            self.counters.rx.add(frame.len());
            self.counters
                .ports
                .entry(*port)
                .or_default()
                .rx
                .add(frame.len());
            if let Some(v) = self.ports.vport(*port) {
                known.push((v, *frame));
            }
        }
        self.sim
            .process_batch(self.domain, now.0, known.iter().copied(), &mut self.out);
        let mut handled = std::mem::take(&mut self.handled);
        handled.clear();
        handled.resize(known.len(), false);
        for i in 0..self.out.frames().len() {
            let f = &self.out.frames()[i];
            let Some(seen) = handled.get_mut(f.packet as usize) else {
                continue;
            };
            match f.egress {
                _ if f.sampled => {
                    self.counters.hw_samples += 1;
                    egress.sample(&f.bytes, Path::Hardware);
                }
                Egress::Vport(v) => {
                    *seen = true;
                    if let Some(port) = self.ports.port(v) {
                        self.counters
                            .ports
                            .entry(port)
                            .or_default()
                            .tx_hw
                            .add(f.bytes.len());
                        egress.tx(port, &f.bytes, Path::Hardware);
                    }
                }
                Egress::Drop(_) => {
                    *seen = true;
                    self.counters.hw_drops += 1;
                }
                Egress::Manager { ingress } => {
                    let Some(port) = self.ports.port(ingress) else {
                        continue;
                    };
                    self.counters.sw_handled += 1;
                    self.buf.clear();
                    self.buf.extend_from_slice(&f.bytes);
                    let mut buf = std::mem::take(&mut self.buf);
                    let mut sink = SwSink {
                        egress,
                        counters: &mut self.counters,
                    };
                    if let Some(r) = sw.run(now, port, &mut buf, &mut sink) {
                        count_sw_drop(&mut self.counters, &r);
                    }
                    self.buf = buf;
                }
            }
        }
        self.counters.hw_handled += handled.iter().filter(|&&h| h).count() as u64;
        self.handled = handled;
    }
}

/// The live datapath threads' counters and port drops, as they publish
/// them (a few times a second, never per packet), for `show` and `stats`.
#[derive(Debug, Default)]
pub struct CounterBoard {
    inner: Mutex<Board>,
}

#[derive(Debug, Default)]
struct Board {
    threads: BTreeMap<usize, SwitchCounters>,
    drops: BTreeMap<PortNo, (u64, u64)>,
}

impl CounterBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Board> {
        // A publisher that panicked left whole snapshots behind.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Thread `thread`'s counters now (replacing its last snapshot).
    pub fn publish(&self, thread: usize, counters: &SwitchCounters) {
        self.lock().threads.insert(thread, counters.clone());
    }

    /// A port's receive and send drops (its own counters).
    pub fn port_drops(&self, port: PortNo, rx_dropped: u64, tx_dropped: u64) {
        self.lock().drops.insert(port, (rx_dropped, tx_dropped));
    }

    /// Every thread's counters added up.
    pub fn total(&self) -> SwitchCounters {
        let mut t = SwitchCounters::default();
        for c in self.lock().threads.values() {
            t.add(c);
        }
        t
    }

    fn drops(&self, port: PortNo) -> Option<(u64, u64)> {
        self.lock().drops.get(&port).copied()
    }
}

/// The switch as the slow path holds it.
pub struct SimSwitch<D: Datapaths = LocalDatapath> {
    pipeline: Pipeline<OffloadManager<SimBackend>, D>,
    /// Replay: the front the packets go through. Live: the handler's
    /// counters (the datapath threads have fronts of their own).
    front: SimFront,
    /// Live: what the datapath threads published.
    board: Arc<CounterBoard>,
    status: BTreeMap<PortNo, PortStatus>,
}

/// The software path's outputs, counted and handed on.
struct SwSink<'a, E> {
    egress: &'a mut E,
    counters: &'a mut SwitchCounters,
}

impl<E: Egressor> ActionSink for SwSink<'_, E> {
    fn output(&mut self, port: PortNo, pkt: &[u8]) {
        self.counters
            .ports
            .entry(port)
            .or_default()
            .tx_sw
            .add(pkt.len());
        self.egress.tx(port, pkt, Path::Software);
    }

    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]) {
        match reason {
            UserspaceReason::Sample => {
                self.counters.sw_samples += 1;
                self.egress.sample(pkt, Path::Software);
            }
            _ => self.counters.to_controller += 1,
        }
    }

    // Meters and samples are answered by the datapath's or the slow
    // path's own sink in front of this one; these two are never reached.
    fn meter(&mut self, _: MeterId, _: usize) -> bool {
        true
    }

    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

impl SimSwitch<LocalDatapath> {
    /// Builds the switch with its datapath on the caller's thread: the sim
    /// device with the ports' vports, the FDB layout, the bridge with
    /// `flows`.
    pub fn new(
        ports: &[PortSpec],
        flows: &FlowFile,
        cfg: PipelineConfig,
        sim_cfg: SimConfig,
        now: Timestamp,
    ) -> anyhow::Result<SimSwitch> {
        let dp = megaflow::Datapath::new(cfg.cache.clone(), 0x5eed_da7a_9a7b_0001);
        SimSwitch::with_datapaths(ports, flows, cfg, sim_cfg, now, LocalDatapath(dp))
    }

    /// Runs a batch of received packets `(in_port, frame)` at `now`, then
    /// a revalidator pass if one is due. Packets from unknown ports are
    /// counted in `rx` and dropped.
    pub fn receive<E: Egressor>(
        &mut self,
        now: Timestamp,
        pkts: &[(PortNo, &[u8])],
        egress: &mut E,
    ) {
        self.front.step(now, pkts, egress, &mut self.pipeline);
        self.pipeline.tick(now);
    }
}

impl SimSwitch<ThreadedDatapaths> {
    /// A front for one more live datapath thread, and the board it
    /// publishes its counters to.
    pub fn front_for_thread(&self) -> (SimFront, Arc<CounterBoard>) {
        let f = &self.front;
        (
            SimFront::new(Arc::clone(&f.sim), f.domain, Arc::clone(&f.ports)),
            Arc::clone(&self.board),
        )
    }
}

impl<D: Datapaths> SimSwitch<D> {
    /// Builds the switch over the datapaths `dps`.
    pub fn with_datapaths(
        ports: &[PortSpec],
        flows: &FlowFile,
        cfg: PipelineConfig,
        sim_cfg: SimConfig,
        now: Timestamp,
        dps: D,
    ) -> anyhow::Result<SimSwitch<D>> {
        let map = Arc::new(PortMap::new(ports)?);
        let mut sim_cfg = sim_cfg;
        for p in ports {
            if !sim_cfg.vports.contains(&p.vport) {
                sim_cfg.vports.push(p.vport);
            }
        }
        let source_port = sim_cfg.source_port;
        let sim = Arc::new(SimBackend::new(sim_cfg));
        let mgr = OffloadManager::new(
            Arc::clone(&sim),
            map.table(),
            ManagerConfig {
                source_port,
                ..ManagerConfig::default()
            },
        )
        .map_err(|e| anyhow::anyhow!("cannot set up the FDB: {e}"))?;
        let domain = mgr.domain();
        let mut bridge = Bridge::new();
        for p in ports {
            bridge.ports.insert(PortInfo::new(p.no, p.name.clone()));
        }
        for (i, fm) in flows.flows.iter().enumerate() {
            bridge
                .tables
                .apply(fm, now)
                .map_err(|e| anyhow::anyhow!("flow {}: {e}", i + 1))?;
        }
        let mut pipeline = Pipeline::with_datapaths(bridge, mgr, cfg, dps);
        for m in &flows.meters {
            pipeline.set_meter(*m);
        }
        Ok(SimSwitch {
            pipeline,
            front: SimFront::new(sim, domain, map),
            board: Arc::default(),
            status: BTreeMap::new(),
        })
    }

    pub fn pipeline(&self) -> &Pipeline<OffloadManager<SimBackend>, D> {
        &self.pipeline
    }

    pub fn pipeline_mut(&mut self) -> &mut Pipeline<OffloadManager<SimBackend>, D> {
        &mut self.pipeline
    }

    /// The simulated device (for dumps, fault injection).
    pub fn sim(&self) -> &Arc<SimBackend> {
        &self.front.sim
    }

    pub fn ports(&self) -> &[PortSpec] {
        self.front.ports.specs()
    }

    /// The switch's counters: the front's (replay), or the handler's plus
    /// what the datapath threads last published (live).
    pub fn counters(&self) -> SwitchCounters {
        let mut c = self.front.counters.clone();
        c.add(&self.board.total());
        c
    }

    /// The counters of this switch's own front (replay), or of the upcall
    /// handler (live).
    pub fn counters_mut(&mut self) -> &mut SwitchCounters {
        &mut self.front.counters
    }

    /// Records what the daemon knows of a live port (shown by `show`).
    pub fn set_port_status(&mut self, port: PortNo, status: PortStatus) {
        self.status.insert(port, status);
    }

    pub fn port_status(&self, port: PortNo) -> Option<&PortStatus> {
        self.status.get(&port)
    }

    /// A live port's status, created empty if the port has none yet.
    pub fn port_status_mut(&mut self, port: PortNo) -> &mut PortStatus {
        self.status.entry(port).or_default()
    }

    /// Every port with its counters, in configuration order.
    pub fn port_summaries(&self) -> Vec<PortSummary> {
        let counters = self.counters();
        self.ports()
            .iter()
            .map(|p| {
                let pc = counters.ports.get(&p.no).copied().unwrap_or_default();
                let status = self.status.get(&p.no).cloned().map(|mut s| {
                    if let Some((rx, tx)) = self.board.drops(p.no) {
                        (s.rx_dropped, s.tx_dropped) = (rx, tx);
                    }
                    s
                });
                PortSummary {
                    name: p.name.clone(),
                    ofport: p.no.0,
                    vport: p.vport.to_string(),
                    rx_packets: pc.rx.packets,
                    tx_hw_packets: pc.tx_hw.packets,
                    tx_sw_packets: pc.tx_sw.packets,
                    tx_bytes: pc.tx_hw.bytes + pc.tx_sw.bytes,
                    status,
                }
            })
            .collect()
    }

    /// The upcall handler's side of the live datapath threads: translates a
    /// missed packet, installs its megaflow in the datapath(s) and executes
    /// it. Nothing here calls the device: the offload thread does
    /// ([`offload_tick`](Self::offload_tick)). The packet was counted on
    /// receive.
    pub fn upcall<E: Egressor>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        pkt: &mut Vec<u8>,
        egress: &mut E,
    ) {
        let counters = &mut self.front.counters;
        let mut sink = SwSink { egress, counters };
        let r = self.pipeline.upcall(now, port, pkt, &mut sink);
        count_sw_drop(&mut self.front.counters, &r);
    }

    /// The offload thread's frequent step: the datapaths' counts folded
    /// in, hot flows put into the device.
    pub fn offload_tick(&mut self, now: Timestamp) {
        self.pipeline.offload_tick(now);
    }

    /// A final revalidator pass (folds the last hardware counts), then
    /// every rule and object removed from the device. Returns the counters.
    pub fn finish(
        mut self,
        now: Timestamp,
    ) -> anyhow::Result<(SwitchCounters, ofproto::PipelineStats)> {
        self.pipeline.revalidate(now);
        let stats = self.pipeline.stats().clone();
        let counters = self.counters();
        let sim = Arc::clone(&self.front.sim);
        let mgr = self.pipeline.into_offloader();
        mgr.shutdown()
            .map_err(|e| anyhow::anyhow!("FDB teardown: {e}"))?;
        let left = sim.snapshot();
        if left != offload::sim::Snapshot::default() {
            bail!("objects left in the device after shutdown: {left:?}");
        }
        Ok((counters, stats))
    }
}

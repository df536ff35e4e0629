//! The switch: the walk of ../shared/DESIGN.md on packets handed in by a
//! caller (replay's capture loop, or the live datapath threads).
//!
//! [`Switch`] is the slow path's side (the pipeline, the device, the port
//! map, what `show` and `stats` print). It is generic over its device
//! ([`Device`]: the `sim`, which also stands in front of the datapath as
//! the NIC model, or a real NIC, with nothing in front) and over where its
//! datapaths run: one on the caller's thread ([`LocalDatapath`]: replay,
//! tests), or one per live datapath thread ([`ThreadedDatapaths`]), each
//! thread with its own [`Front`] and counters, published to a
//! [`CounterBoard`] for the slow path to read.

mod counters;
mod front;
mod kind;
mod ports;
mod tunnel;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::bail;
use megaflow::{PortNo, Timestamp};
use offload::dr::{DeviceDump, DomainId};
use offload::manager::{ManagerConfig, OffloadManager};
use offload::sim::{SimBackend, SimConfig};
use ofproto::{
    Bridge, Datapaths, LocalDatapath, Pipeline, PipelineConfig, SharedOffload, ThreadedDatapaths,
};

use crate::config::PortSpec;

pub use counters::{Count, CounterBoard, PortCounters, SwitchCounters};
pub use front::{Device, Direct, Discard, Egressor, Front, Path, Rx, SimFront, SoftwarePath};
pub use kind::{Kind, PortKind};
pub use ofproto::text::FlowFile;
pub use ports::{Ingress, Netdev, PortMap, PortStatus, PortSummary, PortsView, SharedPorts};
pub use tunnel::TunnelDrop;

pub(crate) use front::{count_sw_drop, SwSink};

/// What the switch tells its OpenFlow channels without being asked.
#[derive(Clone, Debug)]
pub enum SwitchEvent {
    /// A rule with `send_flow_rem` left its table (timeout or delete), at
    /// `at`.
    RuleRemoved {
        removed: Box<ofproto::table::RemovedRule>,
        at: Timestamp,
        /// The TLV table then (how its `tun_metadata` fields are placed).
        tlv: Box<ofproto::tlv::TlvTable>,
    },
    /// A port was added (`OFPPR_ADD` 0), deleted (1) or changed (2).
    Port {
        reason: u8,
        desc: openflow::Port,
        bridge: ofproto::BridgeNo,
    },
}

/// A port's link as `show` and OpenFlow report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// No such netdev now.
    Absent,
    Down,
    Up,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Absent => "absent",
            Link::Down => "down",
            Link::Up => "up",
        }
    }
}

/// `OFPPR_MODIFY`: a configured port's netdev appeared, vanished, or its
/// link changed (the OpenFlow port itself stays).
const PORT_MODIFY: u8 = openflow::port::reason::MODIFY;

/// 10 Gb/s in kb/s, as a VF representor reports it.
const SPEED_KBPS: u32 = 10_000_000;

/// The switch as the slow path holds it.
pub struct Switch<B: Device, D: Datapaths = LocalDatapath> {
    pipeline: Pipeline<Offloader<B>, D>,
    dev: Arc<B>,
    domain: DomainId,
    /// The port map, and where the datapath threads read it (the same
    /// map, published after each change).
    ports: Arc<PortMap>,
    shared_ports: Arc<SharedPorts>,
    /// Replay: the front the packets go through. Live: the handler's
    /// counters (the datapath threads have fronts of their own).
    front: B::Front,
    /// Live: what the datapath threads published.
    board: Arc<CounterBoard>,
    netdevs: BTreeMap<PortNo, Netdev>,
    /// Where each bridge's events go (its OpenFlow channels), once
    /// something listens.
    events: BTreeMap<ofproto::BridgeNo, std::sync::mpsc::Sender<SwitchEvent>>,
    /// sFlow: each port's sampling rate by its name (0: none).
    sample_rates: Option<SampleRates>,
    /// The connection tracker every datapath and the slow path share.
    tracker: Arc<conntrack::Tracker>,
    /// Each datapath's counters when `dp-stats-clear` last ran (what
    /// `dp-stats` counts from; the metrics never reset).
    dp_base: Vec<megaflow::DatapathCounters>,
}

/// Expired connections removed per revalidator pass at most (Open
/// vSwitch's sweeper visits a 64th of its limit per run).
pub const CT_SWEEP_BUDGET: usize = 65_536;

/// A port's sFlow sampling rate by its name.
pub type SampleRates = Arc<dyn Fn(&str) -> u32 + Send + Sync>;

/// The offload manager of a switch on device `B`, shared by the slow path
/// and the thread that runs its offloads outside the slow path's lock.
pub type Offloader<B> = SharedOffload<OffloadManager<B>>;

/// The switch on the `sim` eSwitch.
pub type SimSwitch<D = LocalDatapath> = Switch<SimBackend, D>;

/// The sim device for `ports`: `cfg` with every port's vport.
pub fn sim_device(ports: &[PortSpec], cfg: SimConfig) -> Arc<SimBackend> {
    let mut cfg = cfg;
    for v in ports.iter().filter_map(|p| p.vport) {
        if !cfg.vports.contains(&v) {
            cfg.vports.push(v);
        }
    }
    Arc::new(SimBackend::new(cfg))
}

impl SimSwitch<LocalDatapath> {
    /// The switch on a sim device made for `ports`, its datapath on the
    /// caller's thread.
    pub fn new(
        ports: &[PortSpec],
        flows: &FlowFile,
        cfg: PipelineConfig,
        sim_cfg: SimConfig,
        now: Timestamp,
    ) -> anyhow::Result<SimSwitch> {
        Switch::local(sim_device(ports, sim_cfg), ports, flows, cfg, now)
    }
}

impl<B: Device> Switch<B, LocalDatapath> {
    /// The switch on `dev` with its datapath on the caller's thread.
    pub fn local(
        dev: Arc<B>,
        ports: &[PortSpec],
        flows: &FlowFile,
        cfg: PipelineConfig,
        now: Timestamp,
    ) -> anyhow::Result<Switch<B>> {
        let dp = megaflow::Datapath::new(cfg.cache.clone(), 0x5eed_da7a_9a7b_0001);
        let mut sw = Switch::with_datapaths(dev, ports, flows, cfg, now, LocalDatapath(dp))?;
        let t = sw.tracker();
        sw.pipeline.datapaths_mut().0.set_tracker(t);
        Ok(sw)
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
        let pkts: Vec<Rx<'_>> = pkts.iter().map(|&(p, d)| Rx::plain(p, d)).collect();
        self.front.step(now, &pkts, egress, &mut self.pipeline);
        self.pipeline.tick(now);
        self.tracker.sweep(now.as_millis(), CT_SWEEP_BUDGET);
    }
}

impl<B: Device> Switch<B, ThreadedDatapaths> {
    /// What handler thread `h` installs megaflows through without the
    /// slow path's lock, and how it publishes its counters: its board and
    /// its place on it (after every datapath thread's).
    pub fn handler_link(&self, h: usize) -> Option<(ofproto::FlowSetup, Arc<CounterBoard>, usize)> {
        let setup = self.pipeline.flow_setup()?;
        Some((setup, Arc::clone(&self.board), HANDLER_BOARD + h))
    }

    /// A front for one more live datapath thread, and the board it
    /// publishes its counters to.
    pub fn front_for_thread(&self) -> (B::Front, Arc<CounterBoard>) {
        (
            B::front(
                &self.dev,
                self.domain,
                &self.shared_ports,
                &self.pipeline.offloader().lock().restore_table(),
            ),
            Arc::clone(&self.board),
        )
    }
}

/// Where handler threads' counters go on the board (datapath threads
/// take the places below).
const HANDLER_BOARD: usize = 1 << 16;

/// Why a port stops ([`Switch::detach`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// Its netdev vanished; the port stays, absent.
    NetdevGone,
    /// The port is being removed (`del-port`).
    Removing,
}

/// The port lifecycle as the slow path sees it (live: one datapath thread
/// per open port). Each event tells every part of the slow path in one
/// order, whoever reported it (rtnetlink, `eswitchctl`, a controller,
/// shutdown): the datapath threads' assignment, the bridge (what
/// translation reads), the megaflows and hardware rules, the netdev
/// record (`show`), the controllers (PORT_STATUS).
impl<B: Device> Switch<B, ThreadedDatapaths> {
    /// A port's netdev is open for I/O on datapath thread `thread`.
    pub fn attach(&mut self, no: PortNo, netdev: Netdev, up: bool, thread: usize) {
        self.pipeline.datapaths_mut().assign(no, Some(thread));
        self.set_link(no, up);
        self.set_netdev(no, Some(netdev));
        self.port_changed(no, PORT_MODIFY);
    }

    /// A port's netdev is gone, or the port is being removed: its link
    /// down, its megaflows and hardware rules flushed (only its own), no
    /// thread receives it, its netdev absent; PORT_STATUS MODIFY for a
    /// port that stays (one being removed gets DELETE from
    /// [`del_port`](Self::del_port), as Open vSwitch sends). Returns how
    /// many megaflows went.
    pub fn detach(&mut self, no: PortNo, why: Detach) -> usize {
        self.set_link(no, false);
        let flushed = self.pipeline.flush_port(no);
        self.pipeline.datapaths_mut().assign(no, None);
        if self.netdevs.contains_key(&no) {
            self.set_netdev(no, None);
        }
        if why == Detach::NetdevGone {
            self.port_changed(no, PORT_MODIFY);
        }
        flushed
    }

    /// A port's link went up or down: PORT_STATUS MODIFY.
    pub fn link_changed(&mut self, no: PortNo, up: bool) {
        self.set_link(no, up);
        self.port_changed(no, PORT_MODIFY);
    }

    /// The datapath thread that receives `no`.
    pub fn thread_of(&self, no: PortNo) -> Option<usize> {
        self.pipeline.datapaths().home(no)
    }
}

impl<D: Datapaths> SimSwitch<D> {
    /// The simulated device (for fault injection and what only the model
    /// can tell: snapshots, callers).
    pub fn sim(&self) -> &Arc<SimBackend> {
        &self.dev
    }
}

impl<B: Device, D: Datapaths> Switch<B, D> {
    /// Builds the switch on `dev` over the datapaths `dps`: the FDB layout
    /// in the device, the bridge with `flows`.
    pub fn with_datapaths(
        dev: Arc<B>,
        ports: &[PortSpec],
        flows: &FlowFile,
        cfg: PipelineConfig,
        now: Timestamp,
        dps: D,
    ) -> anyhow::Result<Switch<B, D>> {
        let map = Arc::new(PortMap::new(ports)?);
        let shared_ports = SharedPorts::new(Arc::clone(&map));
        let mut table = map.table();
        for v in ports.iter().filter_map(|p| p.vport) {
            if let Some(t) = dev.vport_tag(v) {
                table.set_tag(v, t);
            }
        }
        let mgr = OffloadManager::new(
            Arc::clone(&dev),
            table,
            ManagerConfig {
                source_port: dev.source_port(),
                ..ManagerConfig::default()
            },
        )
        .map_err(|e| anyhow::anyhow!("cannot set up the FDB: {e}"))?;
        let domain = mgr.domain();
        let restore = mgr.restore_table();
        let mut bridge = Bridge::new();
        for p in ports {
            bridge.add_port(p.info());
        }
        for (i, fm) in flows.flows.iter().enumerate() {
            bridge
                .apply_flow_mod(fm, now)
                .map_err(|e| anyhow::anyhow!("flow {}: {e}", i + 1))?;
        }
        let mut pipeline = Pipeline::with_datapaths(bridge, SharedOffload::new(mgr), cfg, dps);
        for m in &flows.meters {
            pipeline.set_meter(*m);
        }
        let tracker = Arc::new(conntrack::Tracker::new(conntrack::Config::default()));
        pipeline.set_tracker(Arc::clone(&tracker));
        Ok(Switch {
            pipeline,
            front: B::front(&dev, domain, &shared_ports, &restore),
            dev,
            domain,
            ports: map,
            shared_ports,
            board: Arc::default(),
            netdevs: BTreeMap::new(),
            events: BTreeMap::new(),
            sample_rates: None,
            tracker,
            dp_base: Vec::new(),
        })
    }

    /// Each datapath's counters (one per datapath thread; the replay's
    /// one datapath), since the last
    /// [`clear_datapath_counters`](Self::clear_datapath_counters).
    pub fn datapath_counters(&self) -> Vec<megaflow::DatapathCounters> {
        let base = |i: usize| self.dp_base.get(i).copied().unwrap_or_default();
        let now = self.pipeline.datapaths().counters();
        now.iter()
            .enumerate()
            .map(|(i, c)| c.since(&base(i)))
            .collect()
    }

    /// Counts the datapaths' counters from now on (`dp-stats-clear`, as
    /// Open vSwitch's `dpif-netdev/pmd-stats-clear`).
    pub fn clear_datapath_counters(&mut self) {
        self.dp_base = self.pipeline.datapaths().counters();
    }

    /// The connection tracker (give it to every datapath thread).
    pub fn tracker(&self) -> Arc<conntrack::Tracker> {
        Arc::clone(&self.tracker)
    }

    pub fn pipeline(&self) -> &Pipeline<Offloader<B>, D> {
        &self.pipeline
    }

    pub fn pipeline_mut(&mut self) -> &mut Pipeline<Offloader<B>, D> {
        &mut self.pipeline
    }

    /// The offload manager, for the thread that runs offload jobs outside
    /// the slow path ([`ofproto::OffloadJob`]).
    pub fn offloader_handle(&self) -> Offloader<B> {
        self.pipeline.offloader().clone()
    }

    /// The device.
    pub fn device(&self) -> &Arc<B> {
        &self.dev
    }

    /// What is programmed in the device now (`eswitchctl dump-rules`).
    pub fn dump_rules(&self) -> anyhow::Result<DeviceDump> {
        self.dev
            .dump()
            .map_err(|e| anyhow::anyhow!("cannot dump the device: {e}"))
    }

    pub fn ports(&self) -> &[PortSpec] {
        self.ports.specs()
    }

    /// The port map as the datapath threads read it (the last published).
    pub fn published_ports(&self) -> Arc<PortMap> {
        self.shared_ports.current()
    }

    /// The switch's counters: the front's (replay), or the handler's plus
    /// what the datapath threads last published (live).
    pub fn counters(&self) -> SwitchCounters {
        let mut c = self.front.counters().clone();
        c.add(&self.board.total());
        c
    }

    /// The counters of this switch's own front (replay), or of the upcall
    /// handler (live).
    pub fn counters_mut(&mut self) -> &mut SwitchCounters {
        self.front.counters_mut()
    }

    /// A port's link went up or down (or it was added or removed): the
    /// bridge's port table, which translation reads, is the one place
    /// that keeps it.
    pub fn set_link(&mut self, port: PortNo, up: bool) {
        self.pipeline.bridge_mut().set_port_up(port, up);
    }

    /// A live port's netdev appeared (`Some`) or vanished (`None`): what
    /// `show` prints besides counters. Its link is set with
    /// [`set_link`](Self::set_link).
    pub fn set_netdev(&mut self, port: PortNo, netdev: Option<Netdev>) {
        self.netdevs.insert(port, netdev.unwrap_or_default());
    }

    /// A live port as `show` prints it (`None` in replay).
    pub fn port_status(&self, port: PortNo) -> Option<PortStatus> {
        let counters = self.counters();
        self.status_with(port, counters.ports.get(&port).copied().unwrap_or_default())
    }

    /// [`port_status`](Self::port_status) with the port's counters at hand.
    fn status_with(&self, port: PortNo, pc: PortCounters) -> Option<PortStatus> {
        let nd = self.netdevs.get(&port)?;
        let (rx_dropped, tx_dropped) = self.board.drops(port).unwrap_or_default();
        let megaflows = self.pipeline.port_flow_count(port);
        Some(PortStatus {
            ifindex: nd.ifindex,
            state: self.link(port).name().to_string(),
            kind: nd.kind.clone(),
            rx_dropped,
            tx_dropped,
            upcalls: pc.upcalls,
            upcall_drops: pc.upcall_drops,
            megaflows,
        })
    }

    /// A port's link, from the bridge and what is known of its netdev (a
    /// port with no netdev record, in replay, is up).
    fn link(&self, port: PortNo) -> Link {
        let br = self.pipeline.bridge();
        let up = br.home(port).1.ports().get(port).is_some_and(|p| p.up);
        match self.netdevs.get(&port).map(|nd| nd.ifindex) {
            Some(None) => Link::Absent,
            Some(Some(_)) if !up => Link::Down,
            _ => Link::Up,
        }
    }

    /// Sends events (rules removed, port changes) to `tx` from now on.
    pub fn set_events(&mut self, tx: std::sync::mpsc::Sender<SwitchEvent>) {
        self.set_bridge_events(ofproto::BridgeNo::MAIN, tx);
    }

    /// Sends bridge `no`'s events to `tx` from now on.
    pub fn set_bridge_events(
        &mut self,
        no: ofproto::BridgeNo,
        tx: std::sync::mpsc::Sender<SwitchEvent>,
    ) {
        self.events.insert(no, tx);
    }

    fn emit(&self, ev: SwitchEvent) {
        let no = match &ev {
            SwitchEvent::RuleRemoved { removed, .. } => removed.bridge,
            SwitchEvent::Port { bridge, .. } => *bridge,
        };
        if let Some(tx) = self.events.get(&no) {
            let _ = tx.send(ev);
        }
    }

    /// Rules that left their tables, for the controllers that asked
    /// (`send_flow_rem`).
    pub fn rules_removed(&self, removed: &[ofproto::table::RemovedRule], at: Timestamp) {
        for r in removed.iter().filter(|r| r.rule.spec.flags.send_flow_rem) {
            self.emit(SwitchEvent::RuleRemoved {
                removed: Box::new(r.clone()),
                at,
                tlv: Box::new(self.pipeline().bridge().tlv().clone()),
            });
        }
    }

    /// The revalidator's expired rules, handed to the controllers (left
    /// in the pipeline's bounded list while nobody listens).
    pub fn report_expired(&mut self, at: Timestamp) {
        if self.events.is_empty() {
            return;
        }
        let expired = self.pipeline.take_expired();
        self.rules_removed(&expired, at);
    }

    /// Samples every port's packets at the rate `rates` gives its name
    /// (sFlow), now and for ports added later. Megaflows of a port whose
    /// rate changed are translated again.
    pub fn set_sample_rates(&mut self, rates: SampleRates) {
        for p in self.ports.specs() {
            self.pipeline
                .bridge_mut()
                .set_port_sample_rate(p.no, rates(&p.name));
        }
        self.sample_rates = Some(rates);
    }

    /// The tunnel ports' routes and neighbours (and the host's addresses,
    /// their local endpoints).
    pub fn set_underlay(&mut self, u: Arc<dyn ofproto::tunnel::Underlay>) {
        self.pipeline.bridge_mut().set_underlay(Arc::clone(&u));
        let map = Arc::new((*self.ports).clone().with_underlay(Some(u)));
        self.ports = Arc::clone(&map);
        self.shared_ports.replace(map);
    }

    /// Applies a TLV table mod to the bridge and, when it changed the
    /// table, publishes where received Geneve options now land in the key
    /// (every thread's at its next batch).
    pub fn apply_tlv_mod(
        &mut self,
        m: &openflow::nx_tlv::TableMod,
    ) -> Result<(), openflow::OfpError> {
        let mut br = self.pipeline.bridge_mut();
        br.apply_tlv_mod(m)?;
        let options = br.tlv().option_map();
        drop(br);
        if options != *self.ports.options() {
            let map = Arc::new((*self.ports).clone().with_options(Arc::new(options)));
            self.ports = Arc::clone(&map);
            self.shared_ports.replace(map);
        }
        Ok(())
    }

    /// The port map every thread reads.
    pub fn shared_ports(&self) -> Arc<SharedPorts> {
        Arc::clone(&self.shared_ports)
    }

    /// The current port map.
    pub fn port_map(&self) -> Arc<PortMap> {
        Arc::clone(&self.ports)
    }

    /// Adds a port while the switch runs (`eswitchctl add-port`): in the
    /// port map (every thread's, at its next batch), the bridge (link
    /// down until its netdev is up) and the offload manager; PORT_STATUS
    /// ADD to the controllers.
    pub fn add_port(&mut self, spec: PortSpec) -> anyhow::Result<()> {
        let map = Arc::new(self.ports.with(spec.clone())?);
        let tag = spec.vport.and_then(|v| self.dev.vport_tag(v));
        self.offload_port(&map, spec.no, spec.vport, tag);
        let mut info = spec.info();
        // Down until its netdev is up; a tunnel or patch port has none.
        info.up = !spec.kind.spec().has_netdev();
        info.sample_rate = self.sample_rates.as_ref().map_or(0, |r| r(&spec.name));
        {
            let mut br = self.pipeline.bridge_mut();
            let Some(home) = br.sub_mut(spec.bridge) else {
                bail!("port \"{}\": no {}", spec.name, spec.bridge);
            };
            home.add_port(info);
        }
        if spec.kind.spec().has_netdev() || spec.tunnel.is_some() {
            self.netdevs.insert(spec.no, Netdev::default());
        }
        self.ports = Arc::clone(&map);
        self.shared_ports.replace(map);
        self.relink_patches();
        self.port_changed(spec.no, openflow::port::reason::ADD);
        Ok(())
    }

    /// Points every patch port at its peer's number (the port of that
    /// name, if it is a patch port too; else nowhere), after a port came
    /// or went.
    fn relink_patches(&mut self) {
        let specs = self.ports.specs();
        let mut br = self.pipeline.bridge_mut();
        for p in specs.iter().filter(|p| p.kind == PortKind::Patch) {
            let peer = p.peer.as_deref().and_then(|name| {
                specs
                    .iter()
                    .find(|q| q.name == name && q.kind == PortKind::Patch)
                    .map(|q| q.no)
            });
            let Some(home) = br.sub_mut(p.bridge) else {
                continue;
            };
            if let Some(mut info) = home.ports().get(p.no).cloned() {
                if info.patch != peer {
                    info.patch = peer;
                    home.add_port(info);
                }
            }
        }
    }

    /// Adds an empty bridge beside the main one (its number), for ports
    /// and patch ports to join.
    pub fn add_bridge(&mut self) -> anyhow::Result<ofproto::BridgeNo> {
        self.pipeline
            .bridge_mut()
            .add_bridge()
            .ok_or_else(|| anyhow::anyhow!("at most {} bridges", ofproto::bridges::MAX_BRIDGES))
    }

    /// Deletes bridge `no` and every port on it (their megaflows and
    /// hardware rules flushed); no more events for it.
    pub fn del_bridge(&mut self, no: ofproto::BridgeNo) -> anyhow::Result<usize> {
        let ports: Vec<PortNo> = self
            .ports
            .specs()
            .iter()
            .filter(|p| p.bridge == no)
            .map(|p| p.no)
            .collect();
        let mut flushed = 0;
        for p in ports {
            flushed += self.del_port(p)?;
        }
        self.pipeline.bridge_mut().remove_bridge(no);
        self.events.remove(&no);
        // Whatever crossed into it is translated again.
        self.pipeline.request_pass();
        Ok(flushed)
    }

    /// Removes a port (`eswitchctl del-port`): its megaflows and hardware
    /// rules flushed first, then gone from the bridge, the offload manager
    /// and the port map; PORT_STATUS DELETE to the controllers. The
    /// OpenFlow rules that name it stay (as in Open vSwitch).
    pub fn del_port(&mut self, no: PortNo) -> anyhow::Result<usize> {
        let Some(spec) = self.ports.specs().iter().find(|p| p.no == no).cloned() else {
            bail!("no port {no}");
        };
        let desc = self.of_port(&spec);
        // Live, the port was detached first (Switch::detach): this finds
        // nothing left to flush.
        let flushed = self.pipeline.flush_port(no);
        self.pipeline.bridge_mut().remove_port(no);
        self.netdevs.remove(&no);
        self.ports = Arc::new(self.ports.without(no));
        self.offload_port(&self.ports, no, None, None);
        self.shared_ports.replace(Arc::clone(&self.ports));
        self.relink_patches();
        self.emit(SwitchEvent::Port {
            reason: openflow::port::reason::DELETE,
            desc,
            bridge: spec.bridge,
        });
        Ok(flushed)
    }

    /// Tells the offload manager of a port added (`Some` vport) or
    /// removed, and where every tunnel port of `map` (the port map after
    /// the change) now reaches the eSwitch.
    fn offload_port(
        &self,
        map: &PortMap,
        no: PortNo,
        vport: Option<offload::Vport>,
        tag: Option<u32>,
    ) {
        let mut mgr = self.pipeline.offloader().lock();
        mgr.set_port(no, vport, tag);
        for (t, ground) in map.tunnel_grounds() {
            mgr.set_tunnel(t, ground);
        }
    }

    /// The lowest free OpenFlow port number.
    pub fn free_port_number(&self) -> PortNo {
        self.ports.free_number()
    }

    /// A port was added (0), deleted (1) or changed (2): PORT_STATUS.
    pub fn port_changed(&self, port: PortNo, reason: u8) {
        if let Some(spec) = self.ports().iter().find(|p| p.no == port) {
            let desc = self.of_port(spec);
            self.emit(SwitchEvent::Port {
                reason,
                desc,
                bridge: spec.bridge,
            });
        }
    }

    /// Every port as OpenFlow describes it (PORT_DESC, PORT_STATUS).
    pub fn of_ports(&self) -> Vec<openflow::Port> {
        self.bridge_of_ports(ofproto::BridgeNo::MAIN)
    }

    /// Bridge `no`'s ports as OpenFlow describes them.
    pub fn bridge_of_ports(&self, no: ofproto::BridgeNo) -> Vec<openflow::Port> {
        self.ports()
            .iter()
            .filter(|p| p.bridge == no)
            .map(|p| self.of_port(p))
            .collect()
    }

    fn of_port(&self, p: &PortSpec) -> openflow::Port {
        use openflow::port::{config, features, state};
        let link = self.link(p.no);
        openflow::Port {
            port_no: p.no.0,
            hw_addr: [0; 6],
            name: p.name.clone(),
            config: if link == Link::Absent {
                config::PORT_DOWN
            } else {
                0
            },
            state: if link == Link::Up {
                state::LIVE
            } else {
                state::LINK_DOWN
            },
            curr: features::F_10GB_FD | features::F_COPPER,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: SPEED_KBPS,
            max_speed: SPEED_KBPS,
        }
    }

    /// Every port with its counters, in configuration order.
    /// Each port with its counters and (live) its status.
    pub fn port_rows(&self) -> Vec<(&PortSpec, PortCounters, Option<PortStatus>)> {
        let counters = self.counters();
        self.ports()
            .iter()
            .map(|p| {
                let pc = counters.ports.get(&p.no).copied().unwrap_or_default();
                (p, pc, self.status_with(p.no, pc))
            })
            .collect()
    }

    pub fn port_summaries(&self) -> Vec<PortSummary> {
        self.port_rows()
            .into_iter()
            .map(|(p, pc, status)| PortSummary {
                name: p.name.clone(),
                ofport: p.no.0,
                kind: p.kind.to_string(),
                vport: p.vport_name(),
                rx_packets: pc.rx.packets,
                rx_sw_packets: pc.rx_sw,
                tx_hw_packets: pc.tx_hw.packets,
                tx_sw_packets: pc.tx_sw.packets,
                tx_bytes: pc.tx_hw.bytes + pc.tx_sw.bytes,
                status,
                tunnel: p.tunnel.as_ref().map(|t| t.to_string()),
                overhead: p.tunnel.as_ref().map(|t| t.overhead(false)),
            })
            .collect()
    }

    /// The upcall handlers' side of the live datapath threads: a missed
    /// packet the handler parsed and translated before it took the slow
    /// path ([`ofproto::translate_miss`] on
    /// [`bridge_handle`](Self::bridge_handle)) gets its megaflow installed
    /// in the datapath(s) and is executed. Nothing here calls the device:
    /// the offload thread does ([`offload_tick`](Self::offload_tick)). The
    /// packet was counted on receive.
    pub fn upcall_translated<E: Egressor>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        miss: &ofproto::Miss,
        t: &ofproto::xlate::Translation,
        pkt: &mut Vec<u8>,
        egress: &mut E,
    ) {
        let counters = self.front.counters_mut();
        let mut sink = SwSink {
            egress,
            counters,
            in_port: port,
        };
        let r = self
            .pipeline
            .upcall_translated(now, miss, t, pkt, &mut sink);
        count_sw_drop(self.front.counters_mut(), &r);
    }

    /// The bridge, for threads that translate before they take the slow
    /// path.
    pub fn bridge_handle(&self) -> ofproto::SharedBridge {
        self.pipeline.bridge_handle()
    }

    /// A controller's PACKET_OUT: `actions` on `frame` as received on
    /// `in_port` (an OpenFlow port number, CONTROLLER for none); the frames
    /// it sends go to `egress`.
    pub fn packet_out<E: Egressor>(
        &mut self,
        now: Timestamp,
        (bridge, in_port): (ofproto::BridgeNo, u32),
        actions: &[ofproto::OfAction],
        frame: &[u8],
        egress: &mut E,
    ) -> Result<(), ofproto::XlateError> {
        self.run_from_controller(in_port, frame, egress, |p, pkt, sink| {
            p.packet_out(now, (bridge, in_port), actions, pkt, sink)
        })
    }

    /// A controller's NXT_RESUME: `frame`, received on `in_port`, goes on
    /// from `controller(pause)`'s continuation `id` with the pipeline
    /// fields it gave; the frames it sends go to `egress`.
    pub fn resume<E: Egressor>(
        &mut self,
        now: Timestamp,
        (in_port, id): (u32, u32),
        fields: &[(megaflow::Field, u128, u128)],
        frame: &[u8],
        egress: &mut E,
    ) -> Result<(), ofproto::XlateError> {
        self.run_from_controller(in_port, frame, egress, |p, pkt, sink| {
            p.resume(now, in_port, id, fields, pkt, sink)
        })
    }

    /// Runs `f` (the pipeline's PACKET_OUT or NXT_RESUME) on a copy of
    /// `frame` received on `in_port`, counting what it sends to `egress`.
    fn run_from_controller<E: Egressor>(
        &mut self,
        in_port: u32,
        frame: &[u8],
        egress: &mut E,
        f: impl FnOnce(
            &mut Pipeline<Offloader<B>, D>,
            &mut Vec<u8>,
            &mut SwSink<'_, E>,
        ) -> Result<megaflow::actions::ExecOutcome, ofproto::XlateError>,
    ) -> Result<(), ofproto::XlateError> {
        let mut pkt = frame.to_vec();
        let counters = self.front.counters_mut();
        let mut sink = SwSink {
            egress,
            counters,
            in_port: PortNo(in_port),
        };
        f(&mut self.pipeline, &mut pkt, &mut sink).map(|_| ())
    }

    /// The offload thread's frequent step: the datapaths' counts folded
    /// in, hot flows put into the device.
    pub fn offload_tick(&mut self, now: Timestamp) {
        self.pipeline.offload_tick(now);
    }

    /// A final revalidator pass (folds the last hardware counts), then
    /// every rule and object removed from the device, which must then be
    /// empty (its own dump says so). Returns the counters.
    pub fn finish(
        mut self,
        now: Timestamp,
    ) -> anyhow::Result<(SwitchCounters, ofproto::PipelineStats)> {
        self.pipeline.revalidate(now);
        let stats = self.pipeline.stats().clone();
        let counters = self.counters();
        let dev = Arc::clone(&self.dev);
        let mgr =
            self.pipeline.into_offloader().into_inner().map_err(|_| {
                anyhow::anyhow!("FDB teardown: the offload manager is still in use")
            })?;
        mgr.shutdown()
            .map_err(|e| anyhow::anyhow!("FDB teardown: {e}"))?;
        let left = dev
            .dump()
            .map_err(|e| anyhow::anyhow!("cannot dump the device after shutdown: {e}"))?;
        if !left.is_empty() {
            bail!(
                "objects left in the device after shutdown: {} domains, {} tables, {} matchers, {} rules",
                left.domains.len(),
                left.tables.len(),
                left.matchers.len(),
                left.rules.len()
            );
        }
        Ok((counters, stats))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "tests_tunnel.rs"]
mod tunnel_tests;

#[cfg(test)]
#[path = "tests_ct.rs"]
mod ct_tests;

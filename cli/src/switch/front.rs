//! What stands between a port's receive ring and the software datapath.
//!
//! On a ConnectX in switchdev mode the eSwitch forwards offloaded flows
//! itself; a representor receives only what missed the FDB. So a switch on
//! real hardware has nothing in front of its datapath ([`Direct`]): every
//! frame it receives is a miss, and what the hardware forwarded is known
//! only through the rules' flow counters. The `sim` device is also the NIC
//! model, so a switch on it puts it in front ([`SimFront`]): each batch
//! walks the simulated FDB first, and only its misses reach software.
//!
//! A [`Device`] names its front. Frames leaving the switch, whichever path
//! sent them, go to an [`Egressor`]; the software path's action outputs
//! reach it through [`SwSink`], which counts them.

use std::sync::Arc;

use megaflow::actions::{ActionSink, SampleCookie, UserspaceReason};
use megaflow::{MeterId, PortNo, Timestamp, TunnelKey};
use offload::dr::{DomainId, DrBackend};
use offload::prm::SourcePortMode;
use offload::restore::{Arrival, Restore, RestoreTable};
use offload::sim::{Egress, Output, SimBackend};
use ofproto::pipeline::SwOutcome;
use ofproto::{LocalDatapath, Pipeline};

use super::counters::SwitchCounters;
use super::ports::Ingress;
use super::ports::{PortMap, PortsView, SharedPorts};
use super::tunnel::Received;

/// Where a packet went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Path {
    /// Forwarded by the eSwitch.
    Hardware,
    /// Forwarded by the software pipeline.
    Software,
}

/// Every frame leaving the switch, whichever path sent it: a port's
/// transmit batch, a test's recorder, nothing.
pub trait Egressor {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path);
    /// A frame made of `head` then `body` (a tunnel header and the
    /// packet); the default joins them.
    fn tx_parts(&mut self, port: PortNo, head: &[u8], body: &[u8], path: Path) {
        megaflow::actions::with_joined(head, body, |f| self.tx(port, f, path));
    }
    /// A sampled copy of a packet received on `in_port`, for the sFlow
    /// exporter: `cookie` says its rate and where the packet went.
    fn sample(&mut self, _in_port: PortNo, _cookie: SampleCookie, _frame: &[u8], _path: Path) {}
    /// A packet for the controllers (received on `in_port`; `reason` is a
    /// [`UserspaceReason::Controller`]). The default drops it (counted).
    fn packet_in(&mut self, _in_port: PortNo, _reason: &UserspaceReason, _frame: &[u8]) {}
}

/// Counts only.
pub struct Discard;

impl Egressor for Discard {
    fn tx(&mut self, _: PortNo, _: &[u8], _: Path) {}
}

/// What runs a packet the device handed to software.
pub trait SoftwarePath {
    /// Runs `pkt` (received on `port`) into `sink`, or, `from` given (its
    /// restore tag's word), on from the offloaded `ct()` stage the device
    /// handed it over after; `None` when it was not run here (a live
    /// datapath miss, queued for the handler).
    fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        from: Option<megaflow::Resume>,
    ) -> Option<SwOutcome>;
}

/// The whole software path on one thread (replay, tests): the datapath,
/// then an upcall on a miss.
impl<O: megaflow::offload::FlowOffload> SoftwarePath for Pipeline<O, LocalDatapath> {
    fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        from: Option<megaflow::Resume>,
    ) -> Option<SwOutcome> {
        Some(self.process_from(now, port, tun, pkt, sink, from))
    }
}

/// A received packet: the port it came in on, its bytes, and the restore
/// tag it came with (0 but from a device's slow-path queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rx<'a> {
    pub port: PortNo,
    pub data: &'a [u8],
    pub restore: u32,
}

impl<'a> Rx<'a> {
    /// A packet from a port that is not a slow-path queue.
    pub fn plain(port: PortNo, data: &'a [u8]) -> Rx<'a> {
        Rx {
            port,
            data,
            restore: 0,
        }
    }
}

/// What one thread (replay's loop, a live datapath thread) runs received
/// batches through before, or instead of, the software path.
pub trait Front: Send + 'static {
    /// Runs a batch of received packets at `now`: what the device does
    /// not handle goes to `sw`. Packets from ports the switch does not
    /// have are counted in `rx` and dropped.
    fn step<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        pkts: &[Rx<'_>],
        egress: &mut E,
        sw: &mut P,
    );

    /// This thread's counters.
    fn counters(&self) -> &SwitchCounters;

    fn counters_mut(&mut self) -> &mut SwitchCounters;
}

/// A device a switch programs: the Direct Rule API, what it puts in front
/// of the software datapath, and how its rules match a source vport.
pub trait Device: DrBackend + Sized + 'static {
    type Front: Front;

    /// The front of one more thread; `restore` says what the restore
    /// tags of the packets the device hands to software stand for.
    fn front(
        dev: &Arc<Self>,
        domain: DomainId,
        ports: &Arc<SharedPorts>,
        restore: &Arc<RestoreTable>,
    ) -> Self::Front;

    /// How the firmware marks a packet's source vport.
    fn source_port(&self) -> SourcePortMode;

    /// The reg_c_0 tag of `vport` under [`SourcePortMode::Metadata`], when
    /// the device says (the sim's tag is the vport number).
    fn vport_tag(&self, _vport: offload::Vport) -> Option<u32> {
        None
    }

    /// The device's slow-path receive queue as a port (`None`: misses
    /// arrive on the ports' own netdevs): it receives for every port,
    /// naming each packet's port and restore tag in its metadata. `ports`
    /// maps vports to the switch's ports.
    fn slow_path_port(
        _dev: &Arc<Self>,
        _ports: &[(offload::Vport, PortNo)],
    ) -> Option<Box<dyn megaflow::port::Port>> {
        None
    }
}

impl Device for SimBackend {
    type Front = SimFront;

    fn front(
        dev: &Arc<Self>,
        domain: DomainId,
        ports: &Arc<SharedPorts>,
        restore: &Arc<RestoreTable>,
    ) -> SimFront {
        SimFront {
            sim: Arc::clone(dev),
            restore: Arc::clone(restore),
            domain,
            ports: ports.view(),
            out: Output::new(),
            handled: Vec::new(),
            sw: ToSoftware::default(),
        }
    }

    fn source_port(&self) -> SourcePortMode {
        SimBackend::source_port(self)
    }
}

/// A frame handed to software from a port, counted once: the copy the
/// software path may edit, its outcome counted.
#[derive(Default)]
struct ToSoftware {
    buf: Vec<u8>,
    counters: SwitchCounters,
}

impl ToSoftware {
    /// A frame of `port` through software; a tunnel's (on an uplink)
    /// decapsulated first, entering on its tunnel port.
    #[allow(clippy::too_many_arguments)]
    fn run<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        ports: &PortMap,
        port: PortNo,
        frame: &[u8],
        egress: &mut E,
        sw: &mut P,
        from: Option<megaflow::Resume>,
    ) {
        self.counters.sw_handled += 1;
        self.counters.ports.entry(port).or_default().rx_sw += 1;
        let (port, tun, inner) =
            match super::tunnel::receive(ports, port, frame, &mut self.counters) {
                Received::Plain => (port, TunnelKey::NONE, 0),
                Received::Tunnel { port, key, inner } => (port, key, inner),
                Received::Dropped => return,
            };
        self.buf.clear();
        self.buf.extend_from_slice(&frame[inner..]);
        let mut sink = SwSink {
            egress,
            counters: &mut self.counters,
            in_port: port,
        };
        if let Some(r) = sw.run(now, port, &tun, &mut self.buf, &mut sink, from) {
            count_sw_drop(&mut self.counters, &r);
        }
    }

    /// A frame the device handed over from `port` with restore tag `tag`:
    /// what the tag says the device did decides, never anything else
    /// known of the frame.
    #[allow(clippy::too_many_arguments)]
    fn arrive<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        ports: &PortMap,
        port: PortNo,
        frame: &[u8],
        tag: u32,
        restore: &RestoreTable,
        egress: &mut E,
        sw: &mut P,
    ) {
        match restore.classify(tag) {
            Arrival::Miss => self.run(now, ports, port, frame, egress, sw, None),
            Arrival::Restored(Restore::SampledCopy { cookie, .. }) => {
                self.counters.hw_samples += 1;
                egress.sample(port, cookie, frame, Path::Hardware);
            }
            Arrival::Restored(r) => match r.resume() {
                // Through an offloaded ct() stage: the rest in software.
                Some(from) => {
                    self.counters.ct_restored += 1;
                    self.run(now, ports, port, frame, egress, sw, Some(from))
                }
                // A generic continuation (nothing registers one yet):
                // dropped and counted, as below.
                None => self.counters.restore_drops += 1,
            },
            // A tag whose flow has gone: the packet cannot start over (it
            // was rewritten): dropped and counted.
            Arrival::Stale(_) => self.counters.restore_drops += 1,
        }
    }
}

/// Nothing in front: every received frame is one the device handed to
/// the eSwitch manager (a real NIC's representors, or its slow-path queue
/// with each frame's restore tag).
pub struct Direct {
    ports: PortsView,
    restore: Arc<RestoreTable>,
    sw: ToSoftware,
}

impl Direct {
    pub fn new(ports: &Arc<SharedPorts>, restore: &Arc<RestoreTable>) -> Direct {
        Direct {
            ports: ports.view(),
            restore: Arc::clone(restore),
            sw: ToSoftware::default(),
        }
    }
}

impl Front for Direct {
    fn step<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        pkts: &[Rx<'_>],
        egress: &mut E,
        sw: &mut P,
    ) {
        let ports = self.ports.get();
        for p in pkts {
            self.sw.counters.received(p.port, p.data.len());
            // What the NIC did not forward, and what a host-stack port
            // sent (the NIC never saw it): software, as its tag says.
            if ports.ingress(p.port) != Ingress::Unknown {
                let restore = &self.restore;
                self.sw
                    .arrive(now, ports, p.port, p.data, p.restore, restore, egress, sw);
            }
        }
    }

    fn counters(&self) -> &SwitchCounters {
        &self.sw.counters
    }

    fn counters_mut(&mut self) -> &mut SwitchCounters {
        &mut self.sw.counters
    }
}

/// The sim eSwitch as one thread sees it: the shared device, the port
/// map, and this thread's counters.
pub struct SimFront {
    sim: Arc<SimBackend>,
    /// What the restore tags stand for.
    restore: Arc<RestoreTable>,
    domain: DomainId,
    ports: PortsView,
    out: Output,
    /// Per packet of the batch: whether the eSwitch forwarded or dropped it.
    handled: Vec<bool>,
    sw: ToSoftware,
}

impl Front for SimFront {
    fn step<E: Egressor, P: SoftwarePath>(
        &mut self,
        now: Timestamp,
        pkts: &[Rx<'_>],
        egress: &mut E,
        sw: &mut P,
    ) {
        self.out.clear();
        let ports = self.ports.get();
        let mut known = Vec::with_capacity(pkts.len());
        for p in pkts {
            self.sw.counters.received(p.port, p.data.len());
            match ports.ingress(p.port) {
                Ingress::Device(v) => known.push((v, p.data)),
                // A host-stack port: the eSwitch never sees its frames.
                Ingress::Software => self.sw.run(now, ports, p.port, p.data, egress, sw, None),
                Ingress::Unknown => {}
            }
        }
        self.sim
            .process_batch(self.domain, now.0, known.iter().copied(), &mut self.out);
        let mut handled = std::mem::take(&mut self.handled);
        handled.clear();
        handled.resize(known.len(), false);
        for f in self.out.frames() {
            let Some(seen) = handled.get_mut(f.packet as usize) else {
                continue;
            };
            match f.egress {
                Egress::Vport(v) => {
                    *seen = true;
                    if let Some(port) = ports.port(v) {
                        self.sw
                            .counters
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
                    self.sw.counters.hw_drops += 1;
                }
                // What the completion's restore tag says the device did,
                // never the sim's own knowledge of the frame.
                Egress::Manager { ingress } => {
                    if let Some(port) = ports.port(ingress) {
                        let restore = &self.restore;
                        self.sw
                            .arrive(now, ports, port, &f.bytes, f.tag, restore, egress, sw);
                    }
                }
            }
        }
        self.sw.counters.hw_handled += handled.iter().filter(|&&h| h).count() as u64;
        self.handled = handled;
    }

    fn counters(&self) -> &SwitchCounters {
        &self.sw.counters
    }

    fn counters_mut(&mut self) -> &mut SwitchCounters {
        &mut self.sw.counters
    }
}

/// A packet software dropped on purpose (a drop action, a meter, no
/// output at all) is counted once.
pub(crate) fn count_sw_drop(c: &mut SwitchCounters, r: &SwOutcome) {
    c.tunnel_too_big += r.exec.too_big as u64;
    if r.exec.dropped.is_some() && r.exec.outputs == 0 && r.exec.userspace == 0 {
        c.sw_drops += 1;
    }
}

/// The software path's outputs, counted and handed on.
pub(crate) struct SwSink<'a, E> {
    pub(crate) egress: &'a mut E,
    pub(crate) counters: &'a mut SwitchCounters,
    /// The port the packet came in on (what a packet-in says).
    pub(crate) in_port: PortNo,
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

    fn output_parts(&mut self, port: PortNo, head: &[u8], body: &[u8]) {
        self.counters
            .ports
            .entry(port)
            .or_default()
            .tx_sw
            .add(head.len() + body.len());
        self.egress.tx_parts(port, head, body, Path::Software);
    }

    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]) {
        match reason {
            UserspaceReason::Sample(cookie) => {
                self.counters.sw_samples += 1;
                self.egress
                    .sample(self.in_port, *cookie, pkt, Path::Software);
            }
            UserspaceReason::Controller { .. } => {
                self.counters.to_controller += 1;
                self.egress.packet_in(self.in_port, reason, pkt);
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

impl Device for mlx5::Mlx5Backend {
    type Front = Direct;

    fn front(
        _: &Arc<Self>,
        _: DomainId,
        ports: &Arc<SharedPorts>,
        restore: &Arc<RestoreTable>,
    ) -> Direct {
        Direct::new(ports, restore)
    }

    fn source_port(&self) -> SourcePortMode {
        mlx5::Mlx5Backend::source_port(self)
    }

    fn vport_tag(&self, vport: offload::Vport) -> Option<u32> {
        mlx5::Mlx5Backend::vport_tag(self, vport)
    }

    /// The slow-path queue, once `backend.slow_path = "verbs"` opened it.
    fn slow_path_port(
        dev: &Arc<Self>,
        ports: &[(offload::Vport, PortNo)],
    ) -> Option<Box<dyn megaflow::port::Port>> {
        use offload::dr::DrBackend;
        dev.restore_path().ok()?;
        Some(Box::new(crate::hw::verbs::VerbsPort::new(
            Arc::clone(dev),
            ports,
        )))
    }
}

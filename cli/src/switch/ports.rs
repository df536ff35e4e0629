//! The ports of a switch: the one map of OpenFlow port ↔ vport, what the
//! daemon knows of a live port's netdev, and the summary `show` prints.
//!
//! A port's link state lives in one place, the bridge's port table (what
//! translation reads); `show` derives `up`/`down`/`absent` from it and
//! from whether the netdev exists.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::bail;
use megaflow::PortNo;
use offload::prm::PortTable;
use offload::Vport;
use ofproto::tunnel::{TunnelPort, Underlay};

use crate::config::PortSpec;

use super::PortKind;

/// The ports of a switch: OpenFlow port ↔ vport, in configuration order.
/// The one place that maps them (the offload manager's `PortTable` is
/// built from it).
#[derive(Clone, Debug, Default)]
pub struct PortMap {
    specs: Vec<PortSpec>,
    by_vport: BTreeMap<Vport, PortNo>,
    by_port: BTreeMap<PortNo, Vport>,
    /// The tunnel ports' UDP ports (what decap looks for).
    tunnel_udp: Vec<(u16, megaflow::tunnel::Kind)>,
    /// The host's addresses, for local tunnel endpoints.
    underlay: Option<Arc<dyn Underlay>>,
    /// The bridge's TLV table: which Geneve options fill `tun_metadata`.
    options: Arc<megaflow::tunnel::OptionMap>,
}

impl PortMap {
    /// The map of `ports`; two ports on one vport are an error.
    pub fn new(ports: &[PortSpec]) -> anyhow::Result<PortMap> {
        let mut by_vport = BTreeMap::new();
        for p in ports {
            let Some(v) = p.vport else { continue };
            if by_vport.insert(v, p.no).is_some() {
                bail!("two ports on vport {v}");
            }
        }
        let mut tunnel_udp: Vec<(u16, megaflow::tunnel::Kind)> = Vec::new();
        for t in ports.iter().filter_map(|p| p.tunnel.as_ref()) {
            match tunnel_udp.iter().find(|(u, _)| *u == t.dst_port) {
                Some((u, k)) if *k != t.kind => {
                    bail!("UDP port {u} is both a vxlan and a geneve port's")
                }
                Some(_) => {}
                None => tunnel_udp.push((t.dst_port, t.kind)),
            }
        }
        Ok(PortMap {
            specs: ports.to_vec(),
            by_port: by_vport.iter().map(|(v, p)| (*p, *v)).collect(),
            by_vport,
            tunnel_udp,
            underlay: None,
            options: Arc::default(),
        })
    }

    /// The map, whose local tunnel endpoints are `underlay`'s addresses.
    pub fn with_underlay(mut self, underlay: Option<Arc<dyn Underlay>>) -> PortMap {
        self.underlay = underlay;
        self
    }

    /// The map, whose received Geneve options fill the key as `options`
    /// says.
    pub fn with_options(mut self, options: Arc<megaflow::tunnel::OptionMap>) -> PortMap {
        self.options = options;
        self
    }

    /// The TLV table as receive applies it.
    pub fn options(&self) -> &megaflow::tunnel::OptionMap {
        &self.options
    }

    /// The tunnel ports' UDP ports and protocols.
    pub fn tunnel_udp_ports(&self) -> &[(u16, megaflow::tunnel::Kind)] {
        &self.tunnel_udp
    }

    /// The tunnel ports.
    pub fn tunnels(&self) -> impl Iterator<Item = (PortNo, &TunnelPort)> + Clone + '_ {
        self.specs
            .iter()
            .filter_map(|p| p.tunnel.as_deref().map(|t| (p.no, t)))
    }

    /// Whether `addr` is a local tunnel endpoint: a tunnel port's
    /// `local_ip`, or one of the host's addresses. With no host state
    /// (replay) and no `local_ip` given, every address is.
    pub fn is_local_endpoint(&self, addr: std::net::IpAddr) -> bool {
        ofproto::tunnel::is_local_endpoint(
            self.tunnels().map(|(_, t)| t),
            self.underlay.as_deref(),
            addr,
        )
    }

    /// The map with one more port; its name, number and vport must be
    /// new.
    pub fn with(&self, spec: PortSpec) -> anyhow::Result<PortMap> {
        spec.check(&self.specs)?;
        let mut specs = self.specs.clone();
        specs.push(spec);
        Ok(PortMap::new(&specs)?
            .with_underlay(self.underlay.clone())
            .with_options(Arc::clone(&self.options)))
    }

    /// The map without port `no`.
    pub fn without(&self, no: PortNo) -> PortMap {
        let specs: Vec<PortSpec> = self.specs.iter().filter(|p| p.no != no).cloned().collect();
        // Removing a port cannot make two share a vport.
        PortMap::new(&specs)
            .unwrap_or_default()
            .with_underlay(self.underlay.clone())
            .with_options(Arc::clone(&self.options))
    }

    /// The lowest OpenFlow port number no port has.
    pub fn free_number(&self) -> PortNo {
        // Every port, those without a vport (internal, tunnel) too.
        let mut n = 1;
        while self.specs.iter().any(|p| p.no == PortNo(n)) {
            n += 1;
        }
        PortNo(n)
    }

    pub fn specs(&self) -> &[PortSpec] {
        &self.specs
    }

    /// The port's vport; `None` for a port the device does not see (an
    /// internal port) or no port at all.
    pub fn vport(&self, port: PortNo) -> Option<Vport> {
        self.by_port.get(&port).copied()
    }

    /// How a received frame of `port` enters the switch: through the
    /// device (a port with a vport), straight to software (a port the
    /// device does not see), or not at all (no such port).
    pub fn ingress(&self, port: PortNo) -> Ingress {
        match self.by_port.get(&port) {
            Some(v) => Ingress::Device(*v),
            None if self.specs.iter().any(|p| p.no == port) => Ingress::Software,
            None => Ingress::Unknown,
        }
    }

    /// The port's kind.
    pub fn kind(&self, port: PortNo) -> Option<PortKind> {
        self.specs.iter().find(|p| p.no == port).map(|p| p.kind)
    }

    pub fn port(&self, vport: Vport) -> Option<PortNo> {
        self.by_vport.get(&vport).copied()
    }

    /// The table the offload manager compiles rules with.
    /// A port the device does not see is not in it: flows that name it
    /// stay in software.
    pub(crate) fn table(&self) -> PortTable {
        let mut t = self
            .by_port
            .iter()
            .fold(PortTable::new(), |t, (no, v)| t.with(*no, *v));
        for (no, ground) in self.tunnel_grounds() {
            t.set_tunnel(no, ground);
        }
        t
    }

    /// Where each tunnel port's packets reach the eSwitch: the uplink
    /// (`None` unless the switch has exactly one uplink with a vport; a
    /// tunnel's flows then stay in software).
    pub(crate) fn tunnel_grounds(
        &self,
    ) -> impl Iterator<Item = (PortNo, Option<offload::prm::TunnelGround>)> + '_ {
        let mut uplinks = self
            .specs
            .iter()
            .filter(|p| p.kind == PortKind::Uplink)
            .filter_map(|p| p.vport);
        let uplink = match (uplinks.next(), uplinks.next()) {
            (Some(v), None) => Some(v),
            _ => None,
        };
        self.tunnels().map(move |(no, t)| {
            let ground = uplink.map(|uplink| offload::prm::TunnelGround {
                kind: t.kind,
                uplink,
            });
            (no, ground)
        })
    }
}

/// How a received frame enters the switch ([`PortMap::ingress`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ingress {
    /// Through the eSwitch, from this vport (its FDB first).
    Device(Vport),
    /// Straight to software (a host-stack port: the device never saw it).
    Software,
    /// From no port of the switch: dropped.
    Unknown,
}

/// What the daemon knows of a live port's netdev (absent in replay). Its
/// link state is not here: the bridge's port table holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Netdev {
    /// The netdev's ifindex while it exists.
    pub ifindex: Option<u32>,
    /// The port type in use (`af_packet`, `af_xdp`).
    pub kind: String,
}

/// A live port as `show` prints it.
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
    /// Misses of this port queued to the upcall handler, and dropped.
    pub upcalls: u64,
    pub upcall_drops: u64,
    /// Megaflows whose in_port this is (its share of the flow table).
    pub megaflows: usize,
}

/// One port and its counters, as `show` and the replay summary print it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PortSummary {
    pub name: String,
    pub ofport: u32,
    /// The port's kind: `representor`, `uplink`, `internal`, `vxlan`,
    /// `geneve`.
    #[serde(rename = "type")]
    pub kind: String,
    pub vport: String,
    pub rx_packets: u64,
    /// Of them, handled in software (replay: the rest the eSwitch did).
    pub rx_sw_packets: u64,
    pub tx_hw_packets: u64,
    pub tx_sw_packets: u64,
    pub tx_bytes: u64,
    /// Live mode only: ifindex, state, port type, drops.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub status: Option<PortStatus>,
    /// A tunnel port's options, as `ovs-vsctl` would list them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// Bytes a tunnel port adds in front of a frame (an IPv4 underlay;
    /// an IPv6 one adds 20 more): an inner IP packet fits the uplink when
    /// it is this much under the uplink's MTU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<usize>,
}

/// The port map as the datapath threads read it. A port added or removed
/// while the switch runs replaces the map whole; a reader
/// ([`PortsView`]) checks one atomic per batch and takes the lock only
/// after a change.
#[derive(Debug)]
pub struct SharedPorts {
    version: AtomicU64,
    map: Mutex<Arc<PortMap>>,
}

impl SharedPorts {
    pub fn new(map: Arc<PortMap>) -> Arc<SharedPorts> {
        Arc::new(SharedPorts {
            version: AtomicU64::new(0),
            map: Mutex::new(map),
        })
    }

    /// The map published last.
    pub fn current(&self) -> Arc<PortMap> {
        Arc::clone(&self.map.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Publishes a new map to every view.
    pub fn replace(&self, map: Arc<PortMap>) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        *m = map;
        self.version.fetch_add(1, Ordering::Release);
    }

    /// A reader's view.
    pub fn view(self: &Arc<Self>) -> PortsView {
        let version = self.version.load(Ordering::Acquire);
        PortsView {
            map: self.current(),
            shared: Arc::clone(self),
            version,
        }
    }
}

/// One thread's copy of the [`SharedPorts`], refreshed when it changed.
#[derive(Debug)]
pub struct PortsView {
    shared: Arc<SharedPorts>,
    version: u64,
    map: Arc<PortMap>,
}

impl PortsView {
    /// The map as of now.
    #[inline]
    pub fn get(&mut self) -> &PortMap {
        let v = self.shared.version.load(Ordering::Acquire);
        if v != self.version {
            self.map = self.shared.current();
            self.version = v;
        }
        &self.map
    }
}

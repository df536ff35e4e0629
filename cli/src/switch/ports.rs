//! The ports of a switch: the one map of OpenFlow port ↔ vport, what the
//! daemon knows of a live port's netdev, and the summary `show` prints.
//!
//! A port's link state lives in one place, the bridge's port table (what
//! translation reads); `show` derives `up`/`down`/`absent` from it and
//! from whether the netdev exists.

use std::collections::BTreeMap;

use anyhow::bail;
use megaflow::PortNo;
use offload::prm::PortTable;
use offload::Vport;

use crate::config::PortSpec;

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
    pub(crate) fn table(&self) -> PortTable {
        self.specs
            .iter()
            .fold(PortTable::new(), |t, p| t.with(p.no, p.vport))
    }
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

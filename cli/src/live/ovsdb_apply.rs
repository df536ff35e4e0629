//! The main thread's side of `--ovsdb`: makes the switch's bridges, ports,
//! fail modes and controllers what the database wants ([`Wanted`]) and
//! says what became of each interface ([`IfaceState`]).
//!
//! The main bridge (`[ovsdb] bridge`) is there from the start. Every other
//! bridge row becomes a bridge of the same switch ([`ofproto::bridges`])
//! with an OpenFlow server of its own on `punix:RUNDIR/NAME.mgmt`; a new
//! bridge in fail mode `standalone` with no controller starts with
//! `priority=0,actions=NORMAL`, as Open vSwitch's (`connmgr_flushed`). A
//! bridge row deleted takes its ports, its server and its tables with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use ofproto::BridgeNo;
use tracing::{info, warn};

use super::openflow::{ConnBoard, OfServer, OtherBridges};
use super::ovsdb::{bridge_dpid, IfaceState, Managed, PortChange, Wanted, LOCAL_OFPORT};
use super::{lock, Core, Daemon};
use crate::config::{Config, OpenflowConfig, OvsdbConfig};
use crate::switch::{Device, PortKind};

/// A bridge other than the main one: its number and its OpenFlow server.
struct SubBridge {
    no: BridgeNo,
    server: OfServer,
}

/// What the main thread keeps between two sets of [`Wanted`] bridges.
pub struct Applier {
    ports: Managed,
    subs: BTreeMap<String, SubBridge>,
    others: OtherBridges,
    clock: super::Clock,
    packet_ins: Arc<super::PacketIns>,
    tx: super::TxPorts,
    openflow: OpenflowConfig,
    sflow: crate::config::SflowConfig,
    ovsdb: Option<OvsdbConfig>,
    main_dpid: u64,
}

impl Applier {
    /// For the daemon `daemon`, whose main bridge's OpenFlow server is
    /// `main`.
    pub fn new<B: Device>(daemon: &mut Daemon<B>, main: &OfServer, cfg: &Config) -> Applier {
        Applier {
            ports: Managed::default(),
            subs: BTreeMap::new(),
            others: main.others(),
            clock: daemon.clock(),
            packet_ins: daemon.take_packet_ins().1,
            tx: daemon.tx_ports(),
            openflow: cfg.openflow.clone(),
            sflow: cfg.sflow.clone(),
            ovsdb: cfg.ovsdb.clone(),
            main_dpid: cfg.openflow.dpid().unwrap_or(0),
        }
    }

    /// Makes the switch what `wanted` says (the main bridge first, then
    /// the others); what became of each interface.
    pub fn apply<B: Device>(
        &mut self,
        daemon: &mut Daemon<B>,
        main: &ConnBoard,
        core: &Core<B>,
        wanted: &[Wanted],
    ) -> Vec<IfaceState> {
        let mut refused: BTreeMap<String, String> = BTreeMap::new();
        let others: Vec<&Wanted> = wanted
            .iter()
            .skip(1)
            .filter(|w| w.bridge.is_some())
            .collect();
        for w in &others {
            let name = w.bridge.as_deref().unwrap_or_default();
            if !self.subs.contains_key(name) {
                if let Err(e) = self.add_bridge(core, w) {
                    warn!(bridge = %name, "OVSDB: {e:#}");
                    for i in &w.ifaces {
                        refused.insert(i.name.clone(), format!("bridge {name}: {e:#}"));
                    }
                }
            }
        }
        for change in self.ports.plan(wanted) {
            match change {
                PortChange::Del(name) => {
                    if let Err(e) = daemon.del_port(&name) {
                        warn!(port = %name, "OVSDB: {e:#}");
                    }
                    self.ports.deleted(&name);
                }
                PortChange::Add(i) => {
                    if !refused.contains_key(&i.name) {
                        if let Err(e) = self.add_port(daemon, i) {
                            warn!(port = %i.name, "OVSDB: {e:#}");
                            refused.insert(i.name.clone(), e);
                        }
                    }
                    self.ports.added(i);
                }
            }
        }
        let gone: Vec<String> = self
            .subs
            .keys()
            .filter(|n| {
                !others
                    .iter()
                    .any(|w| w.bridge.as_deref() == Some(n.as_str()))
            })
            .cloned()
            .collect();
        for name in gone {
            self.del_bridge(core, &name);
        }
        // The main bridge's sFlow row, else the config's [sflow].
        let sflow = wanted
            .first()
            .and_then(|w| w.sflow.clone())
            .unwrap_or_else(|| self.sflow.clone());
        if let Err(e) = daemon.set_sflow(&sflow) {
            warn!("OVSDB: sFlow: {e:#}");
        }
        // The database's SSL row, else the config's keys.
        let ssl = wanted
            .first()
            .and_then(|w| w.ssl.clone())
            .or(self.openflow.ssl.clone());
        if let Some(w) = wanted.first() {
            follow(main, core, w, ssl.as_ref());
        }
        for w in &others {
            if let Some(sub) = self.subs.get(w.bridge.as_deref().unwrap_or_default()) {
                follow(&sub.server.board(), core, w, ssl.as_ref());
            }
        }
        let stats: std::collections::HashMap<u32, megaflow::port::PortStats> =
            super::sflow::port_snapshots(&lock(core))
                .into_iter()
                .map(|s| (s.no.0, s.stats))
                .collect();
        wanted
            .iter()
            .flat_map(|w| w.ifaces.iter())
            .map(|i| IfaceState {
                uuid: i.uuid.clone(),
                name: i.name.clone(),
                stats: daemon
                    .port_number(&i.name)
                    .and_then(|p| stats.get(&p).copied()),
                status: daemon.port_status_pairs(&i.name),
                ofport: if let Some(e) = refused.get(&i.name) {
                    Err(e.clone())
                } else if i.name == i.bridge {
                    Ok(LOCAL_OFPORT as u32)
                } else {
                    daemon
                        .port_number(&i.name)
                        .ok_or_else(|| format!("could not add network device {}", i.name))
                },
            })
            .collect()
    }

    /// A bridge beside the main one, with its OpenFlow server.
    fn add_bridge<B: Device>(&mut self, core: &Core<B>, w: &Wanted) -> anyhow::Result<()> {
        let name = w.bridge.clone().unwrap_or_default();
        let mut cfg = self.openflow.clone();
        cfg.listen = vec![self.mgmt(&name)];
        cfg.controllers = Vec::new();
        cfg.fail_mode = w.fail_mode.clone();
        cfg.datapath_id = format!("{:016x}", bridge_dpid(w, false, self.main_dpid));
        let no = lock(core).add_bridge()?;
        if w.fail_mode == "standalone" && w.controllers.is_empty() {
            let fm = ofproto::text::parse_flow(
                "priority=0,actions=NORMAL",
                ofproto::FlowModCommand::Add,
            )?;
            let now = self.clock.now();
            let mut sw = lock(core);
            let mut br = sw.pipeline_mut().bridge_mut();
            if let Some(b) = br.sub_mut(no) {
                b.apply_flow_mod(&fm, now)?;
            }
        }
        let server = OfServer::start_bridge(
            core,
            self.clock,
            &cfg,
            (no, self.others.clone()),
            (None, Arc::clone(&self.packet_ins)),
            Arc::clone(&self.tx),
        );
        match server {
            Ok(server) => {
                info!(bridge = %name, number = no.0, listen = %cfg.listen[0], "bridge added");
                self.subs.insert(name, SubBridge { no, server });
                Ok(())
            }
            Err(e) => {
                let _ = lock(core).del_bridge(no);
                Err(e)
            }
        }
    }

    /// Deletes a bridge whose row went (its ports went first, with the
    /// plan): its server stopped, then its tables.
    fn del_bridge<B: Device>(&mut self, core: &Core<B>, name: &str) {
        let Some(sub) = self.subs.remove(name) else {
            return;
        };
        sub.server.stop();
        match lock(core).del_bridge(sub.no) {
            Ok(flushed) => info!(bridge = %name, flushed, "bridge deleted"),
            Err(e) => warn!(bridge = %name, "OVSDB: deleting the bridge: {e:#}"),
        }
    }

    /// Adds interface `i` on its bridge, as its type says.
    fn add_port<B: Device>(
        &self,
        daemon: &mut Daemon<B>,
        i: &super::ovsdb::Iface,
    ) -> Result<(), String> {
        let main = self.ovsdb.as_ref().map(|o| o.bridge.as_str());
        let bridge = if Some(i.bridge.as_str()) == main {
            BridgeNo::MAIN
        } else {
            self.subs
                .get(&i.bridge)
                .map(|s| s.no)
                .ok_or_else(|| format!("bridge {} is not running", i.bridge))?
        };
        let kind = match i.ty.as_str() {
            "" | "system" => None,
            "internal" => Some(PortKind::Internal),
            "geneve" => Some(PortKind::Geneve),
            "vxlan" => Some(PortKind::Vxlan),
            "patch" => Some(PortKind::Patch),
            other => {
                return Err(format!(
                    "interface type \"{other}\" is not supported by eswitchd"
                ))
            }
        };
        // A netdev: the representor (or uplink) its other_config:eswitch-vport
        // or its netdev says it is, else a port the host sees and the
        // device does not.
        let vport = match i.vport.as_deref().map(str::parse::<offload::Vport>) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => return Err(format!("other_config:eswitch-vport: {e}")),
        };
        let mut add = |k: PortKind, v: Option<offload::Vport>| {
            daemon.add_port_to(bridge, &i.name, k, i.ofport_request, v, &i.options)
        };
        let added = match (kind, vport) {
            (Some(k), v) => add(k, v),
            (None, Some(v)) if v == offload::Vport::UPLINK => add(PortKind::Uplink, Some(v)),
            (None, Some(v)) => add(PortKind::Representor, Some(v)),
            (None, None) => {
                add(PortKind::Representor, None).or_else(|_| add(PortKind::Internal, None))
            }
        };
        added.map(|_| ()).map_err(|e| format!("{e:#}"))
    }

    /// `punix:RUNDIR/NAME.mgmt`.
    fn mgmt(&self, name: &str) -> String {
        match &self.ovsdb {
            Some(o) => OvsdbConfig {
                bridge: name.to_string(),
                ..o.clone()
            }
            .mgmt_listener(),
            None => format!("punix:{name}.mgmt"),
        }
    }

    /// Stops the other bridges' servers (the daemon is stopping).
    pub fn stop(self) {
        for (_, sub) in self.subs {
            sub.server.stop();
        }
    }
}

/// A bridge's keys, fail mode and controllers as the database has them
/// (the keys before the controllers: an `ssl:` one needs them).
fn follow<B: Device>(
    board: &ConnBoard,
    core: &Core<B>,
    w: &Wanted,
    ssl: Option<&crate::config::SslConfig>,
) {
    board.set_protocols(&w.protocols);
    match board.set_ssl(ssl) {
        Ok(true) => {
            info!(keys = ?ssl.map(|s| &s.private_key), "OVSDB: SSL keys and certificates set")
        }
        Ok(false) => {}
        Err(e) => warn!("OVSDB: SSL: {e:#}"),
    }
    if board.fail_mode() != w.fail_mode {
        if let Err(e) = board.set_fail_mode(&w.fail_mode) {
            warn!("OVSDB: fail_mode: {e:#}");
        }
    }
    if board.controllers() != w.controllers {
        if let Err(e) = board.set_controllers(core, &w.controllers) {
            warn!("OVSDB: controllers: {e:#}");
        }
    }
}

//! A bridge: the OpenFlow tables, the ports and the MAC learning table of one
//! switch, which is everything translation reads.
//!
//! Translation ([`Bridge::translate`]) takes `&self` and has no side
//! effects: what NORMAL would learn comes back in the
//! [`Translation`](crate::xlate::Translation) and
//! the caller applies it with [`Bridge::learn`]. So the revalidator can
//! re-translate without learning, tests can translate the same key twice,
//! and several handler threads can share a bridge behind a read lock.
//!
//! This module is what translation reads; it does not depend on
//! translation (`xlate` adds `translate` and `trace` to [`Bridge`]).
//!
//! Every input translation reads carries a generation: the tables', the
//! ports' and the MAC table's. A megaflow records them; when one moved on,
//! the revalidator re-translates it.

use std::collections::BTreeMap;
use std::sync::Arc;

use megaflow::{MeterId, PortNo, Timestamp};

use crate::group::{GroupError, GroupSpec, GroupTable, GROUP_TABLE};
use crate::mac::{MacLearn, MacTable};
use crate::rule::{FlowMod, FlowModCommand, OfAction, OfPort, RuleSpec};
use crate::table::{FlowModError, FlowModOutcome, FlowTables, RemovedReason, RemovedRule, RuleRef};
use crate::tunnel::{TunnelPort, Underlay};
use crate::{Priority, TableId};

/// How a port carries VLANs for NORMAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VlanMode {
    /// Carries every VLAN, tagged; untagged frames are VLAN 0.
    #[default]
    Trunk,
    /// Carries one VLAN, untagged on the wire; tagged frames are dropped.
    Access(u16),
}

/// One port of the bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub no: PortNo,
    pub name: String,
    pub vlan: VlanMode,
    /// False: FLOOD and NORMAL's flooding skip it (OFPPC_NO_FLOOD).
    pub flood: bool,
    /// False: the port is down or administratively disabled; nothing is
    /// sent to it.
    pub up: bool,
    /// sFlow: 1 in this many packets received on the port is sampled
    /// (0: none but the flows' own `sample` actions).
    pub sample_rate: u32,
    /// A tunnel port's options (`None`: a port with a netdev).
    pub tunnel: Option<Arc<TunnelPort>>,
    /// Tunnel packets for a local endpoint that arrive here are
    /// decapsulated before the datapath sees them (an uplink): what tells
    /// its other packets apart from them is matched.
    pub decap: bool,
    /// A patch port's peer (a port of another bridge of the switch): what
    /// is sent here goes on in the peer's bridge, received on the peer.
    pub patch: Option<PortNo>,
}

impl PortInfo {
    /// An up, flooding trunk port.
    pub fn new(no: PortNo, name: impl Into<String>) -> Self {
        PortInfo {
            no,
            name: name.into(),
            vlan: VlanMode::Trunk,
            flood: true,
            up: true,
            sample_rate: 0,
            tunnel: None,
            decap: false,
            patch: None,
        }
    }
}

/// The ports of a bridge, in port number order.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    map: BTreeMap<PortNo, PortInfo>,
    generation: u64,
}

impl Ports {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a port.
    pub fn insert(&mut self, port: PortInfo) {
        self.map.insert(port.no, port);
        self.generation += 1;
    }

    /// Removes a port; returns it if it was there.
    pub fn remove(&mut self, no: PortNo) -> Option<PortInfo> {
        let p = self.map.remove(&no);
        if p.is_some() {
            self.generation += 1;
        }
        p
    }

    /// Sets a port up or down.
    pub fn set_up(&mut self, no: PortNo, up: bool) {
        if let Some(p) = self.map.get_mut(&no) {
            if p.up != up {
                p.up = up;
                self.generation += 1;
            }
        }
    }

    pub fn get(&self, no: PortNo) -> Option<&PortInfo> {
        self.map.get(&no)
    }

    pub fn iter(&self) -> impl Iterator<Item = &PortInfo> + Clone + '_ {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Sets a port's sFlow sampling rate (0: off).
    pub fn set_sample_rate(&mut self, no: PortNo, rate: u32) {
        if let Some(p) = self.map.get_mut(&no) {
            if p.sample_rate != rate {
                p.sample_rate = rate;
                self.generation += 1;
            }
        }
    }

    /// Bumped by every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The generations of everything a translation read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Generations {
    pub tables: u64,
    pub ports: u64,
    pub mac: u64,
    /// The underlay's (routes, addresses, neighbours), for the flows that
    /// send through a tunnel port.
    pub underlay: u64,
}

/// What besides the tables and ports a translation read, whose change
/// makes its megaflow stale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uses {
    /// NORMAL consulted the MAC table.
    pub mac: bool,
    /// A tunnel output consulted the underlay.
    pub underlay: bool,
}

impl Generations {
    pub(crate) fn add(&mut self, o: &Generations) {
        self.tables += o.tables;
        self.ports += o.ports;
        self.mac += o.mac;
        self.underlay += o.underlay;
    }

    /// Whether a megaflow translated at `self`, having read what `uses`
    /// says, is out of date at `now`.
    pub fn stale(&self, uses: Uses, now: &Generations) -> bool {
        self.tables != now.tables
            || self.ports != now.ports
            || (uses.mac && self.mac != now.mac)
            || (uses.underlay && self.underlay != now.underlay)
    }
}

/// Where the tables stand ([`Bridge::sync_mark`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncMark {
    pub tables: u64,
    pub flows: u64,
    pub other: u64,
}

/// The tables and groups of a bridge at one moment ([`Bridge::checkpoint`]).
#[derive(Debug)]
pub struct Checkpoint {
    tables: FlowTables,
    groups: GroupTable,
}

/// Tables, ports and MAC table of one switch.
#[derive(Debug, Default)]
pub struct Bridge {
    pub(crate) tables: FlowTables,
    /// The groups `group:N` actions run.
    pub(crate) groups: GroupTable,
    pub(crate) ports: Ports,
    pub(crate) mac: MacTable,
    /// Fail-open (OpenFlow fail mode `standalone` with no controller
    /// reachable): every packet is switched by NORMAL, the tables aside.
    fail_open: bool,
    /// Counts changes of `fail_open` (part of the tables' generation).
    fail_open_changes: u64,
    /// Routes and neighbours for tunnel ports' packets.
    underlay: Option<Arc<dyn Underlay>>,
    /// Counts `set_underlay` calls (part of the underlay's generation).
    underlay_sets: u64,
    /// Geneve options ↔ `tun_metadata<n>` (`NXT_TLV_TABLE_MOD`).
    tlv: crate::tlv::TlvTable,
    /// Counts TLV table changes (part of the tables' generation: where an
    /// option lands in a key moved).
    tlv_changes: u64,
    /// Recirculation ids and their frozen states (`ct(table=T)`).
    pub(crate) recirc: Arc<crate::recirc::RecircPool>,
    /// The switch's other bridges ([`crate::bridges`]): this one is
    /// bridge 0, `others[i]` bridge i+1 (`None`: deleted, its number free).
    pub(crate) others: Vec<Option<Bridge>>,
    /// What deleted bridges' generations added up to (so the sums only
    /// grow).
    pub(crate) retired: Generations,
}

impl Bridge {
    /// An empty bridge: no ports, no rules (every packet dropped).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty bridge beside this one: the same recirculation ids and
    /// underlay.
    pub(crate) fn sibling(&self) -> Bridge {
        Bridge {
            recirc: Arc::clone(&self.recirc),
            underlay: self.underlay.clone(),
            ..Bridge::default()
        }
    }

    /// A bridge with `ports` trunk ports numbered as given.
    pub fn with_ports(ports: impl IntoIterator<Item = u32>) -> Self {
        let mut b = Bridge::new();
        for p in ports {
            b.ports.insert(PortInfo::new(PortNo(p), format!("p{p}")));
        }
        b
    }

    /// Whether NORMAL switches every packet (fail-open).
    pub fn fail_open(&self) -> bool {
        self.fail_open
    }

    /// The flow tables (changed by [`apply_flow_mod`](Self::apply_flow_mod)).
    pub fn tables(&self) -> &FlowTables {
        &self.tables
    }

    /// The groups, to change how SELECT groups pick
    /// ([`GroupTable::set_dp_hash_default`]); GROUP_MODs go through
    /// [`add_group`](Self::add_group) and the others.
    pub fn groups_mut(&mut self) -> &mut GroupTable {
        &mut self.groups
    }

    /// A copy of the tables and groups, to put back with
    /// [`roll_back`](Self::roll_back) if the changes after it must not
    /// stand (a bundle commit that failed part way).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            tables: self.tables.snapshot(),
            groups: self.groups.clone(),
        }
    }

    /// Puts back the tables and groups of `c`, under new generations (the
    /// megaflows translated meanwhile are revalidated).
    pub fn roll_back(&mut self, c: Checkpoint) {
        self.tables.roll_back_to(c.tables);
        self.groups.roll_back_to(c.groups);
    }

    /// The groups (changed by group mods).
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// The ports (changed by [`add_port`](Self::add_port),
    /// [`remove_port`](Self::remove_port), [`set_port_up`](Self::set_port_up),
    /// [`set_port_sample_rate`](Self::set_port_sample_rate)).
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The MAC table NORMAL learns into.
    pub fn mac(&self) -> &MacTable {
        &self.mac
    }

    /// Replaces the MAC table whole (a model kept in step with a switch's
    /// learning; its generation moves, so megaflows that read it are
    /// translated again).
    pub fn set_mac_table(&mut self, mut mac: MacTable) {
        mac.bump_generation_past(self.mac.generation());
        self.mac = mac;
    }

    /// Adds a group (an OpenFlow GROUP_MOD add).
    pub fn add_group(&mut self, spec: GroupSpec, now: Timestamp) -> Result<(), GroupError> {
        self.groups.add(spec, now)
    }

    /// Changes a group (an OpenFlow GROUP_MOD modify).
    pub fn modify_group(&mut self, spec: GroupSpec) -> Result<(), GroupError> {
        self.groups.modify(spec)
    }

    /// Deletes group `which` (`None`: every group) and every rule that runs
    /// a deleted group, as Open vSwitch does; returns the rules removed.
    pub fn delete_groups(&mut self, which: Option<u32>, now: Timestamp) -> Vec<RemovedRule> {
        let mut removed = Vec::new();
        for g in self.groups.delete(which) {
            let fm = FlowMod {
                command: FlowModCommand::Delete,
                table: None,
                rule: RuleSpec::new(TableId(0), Priority(0), megaflow::Match::catch_all()),
                cookie_mask: 0,
                out_port: OfPort::Any,
                out_group: Some(g),
            };
            // A delete of every table with no filter but the group cannot
            // be refused.
            if let Ok(o) = self.tables.apply(&fm, now) {
                removed.extend(o.removed.into_iter().map(|mut r| {
                    r.reason = RemovedReason::GroupDelete;
                    r
                }));
            }
        }
        removed
    }

    /// Removes the rules whose instructions run meter `which` (`None`:
    /// any meter), as Open vSwitch does when a meter is deleted.
    pub fn delete_meter_users(&mut self, which: Option<MeterId>) -> Vec<RemovedRule> {
        self.tables.remove_rules(
            |r| {
                r.spec
                    .instructions
                    .meter
                    .is_some_and(|m| which.is_none_or(|w| w == m))
            },
            RemovedReason::MeterDelete,
        )
    }

    /// The routes and neighbours tunnel ports send over; a change of its
    /// generation re-translates, at the next revalidator pass, the flows
    /// that sent through a tunnel port (and only those).
    pub fn set_underlay(&mut self, underlay: Arc<dyn Underlay>) {
        for b in self.others.iter_mut().flatten() {
            b.underlay = Some(Arc::clone(&underlay));
        }
        self.underlay = Some(underlay);
        self.underlay_sets += 1;
    }

    /// The TLV table.
    pub fn tlv(&self) -> &crate::tlv::TlvTable {
        &self.tlv
    }

    /// Applies a TLV table mod (all or nothing). A DELETE or CLEAR of a
    /// mapping a rule uses (in its match or a `set_field`) is refused with
    /// `NXTTMFC_INVALID_TLV_DEL`, as Open vSwitch does.
    pub fn apply_tlv_mod(
        &mut self,
        m: &openflow::nx_tlv::TableMod,
    ) -> Result<(), openflow::error::OfpError> {
        use openflow::nx_tlv::{err, CMD_CLEAR, CMD_DELETE};
        let dropped: u64 = match m.command {
            CMD_DELETE => m
                .maps
                .iter()
                .filter(|x| x.index < 64)
                .fold(0, |a, x| a | 1 << x.index),
            CMD_CLEAR => u64::MAX,
            _ => 0,
        };
        if dropped & self.tlv_in_use() != 0 {
            return Err(err::INVALID_TLV_DEL);
        }
        if self.tlv.apply(m)? {
            self.tlv_changes += 1;
        }
        Ok(())
    }

    /// Which `tun_metadata<n>` the rules use (bit n).
    fn tlv_in_use(&self) -> u64 {
        let mut used = 0;
        for t in self.tables.tables() {
            for (_, r) in t.rules() {
                used |= r.spec.matched.mask().field(megaflow::Field::TunMdPresent) as u64;
                for a in r.spec.instructions.actions() {
                    if let OfAction::SetTunMetadata { slot, .. } = a {
                        used |= slot.present_bit();
                    }
                }
            }
        }
        used
    }

    /// The underlay, if the switch has one.
    pub fn underlay(&self) -> Option<&Arc<dyn Underlay>> {
        self.underlay.as_ref()
    }

    /// Adds or replaces a port.
    pub fn add_port(&mut self, port: PortInfo) {
        self.ports.insert(port);
    }

    /// Removes a port, and forgets the MACs learned behind it (NORMAL
    /// floods to find them again rather than send into a port that is not
    /// there). Returns it if it was there.
    pub fn remove_port(&mut self, no: PortNo) -> Option<PortInfo> {
        let b = self.home_mut(no)?;
        b.mac.flush_port(no);
        b.ports.remove(no)
    }

    /// Sets a port's link up or down; down forgets the MACs learned behind
    /// it, as a removal does.
    pub fn set_port_up(&mut self, no: PortNo, up: bool) {
        let Some(b) = self.home_mut(no) else {
            return;
        };
        if !up {
            b.mac.flush_port(no);
        }
        b.ports.set_up(no, up);
    }

    /// Sets a port's sFlow sampling rate (0: off).
    pub fn set_port_sample_rate(&mut self, no: PortNo, rate: u32) {
        if let Some(b) = self.home_mut(no) {
            b.ports.set_sample_rate(no, rate);
        }
    }

    /// Enters or leaves fail-open; every megaflow is re-translated at the
    /// next revalidator pass (the tables' generation moves).
    pub fn set_fail_open(&mut self, on: bool) {
        if self.fail_open != on {
            self.fail_open = on;
            self.fail_open_changes += 1;
        }
    }

    /// The generations translation depends on now.
    /// Where the tables stand, as a BARRIER's sync needs it: the
    /// generation [`generations`](Self::generations) reports, the flow
    /// tables' own (whose changes are logged), and the groups' and the
    /// fail mode's (whose are not).
    pub fn sync_mark(&self) -> SyncMark {
        // The other bridges' changes are no part of this bridge's change
        // log: they count as `other` (a full pass brings them in).
        let others: u64 = self
            .others()
            .map(|(_, b)| b.generations().tables)
            .sum::<u64>()
            + self.retired.tables;
        SyncMark {
            tables: self.generations().tables,
            flows: self.tables.generation(),
            other: self.groups.generation() + self.fail_open_changes + self.tlv_changes + others,
        }
    }

    /// The generations of everything a translation may read: this
    /// bridge's and, through patch ports, every other bridge's.
    pub fn generations(&self) -> Generations {
        let mut g = self.own_generations();
        for (_, b) in self.others() {
            g.add(&b.own_generations());
        }
        g.add(&self.retired);
        g
    }

    fn own_generations(&self) -> Generations {
        Generations {
            tables: self.tables.generation()
                + self.groups.generation()
                + self.fail_open_changes
                + self.tlv_changes,
            ports: self.ports.generation(),
            underlay: self.underlay_sets + self.underlay.as_ref().map_or(0, |u| u.generation()),
            mac: self.mac.generation(),
        }
    }

    /// A flow mod on the tables: an add or modify may only run groups that
    /// exist (`OFPBAC_BAD_OUT_GROUP`), whoever sends it (a controller,
    /// `eswitchctl add-flow`, the flow file).
    pub fn apply_flow_mod(
        &mut self,
        fm: &FlowMod,
        now: Timestamp,
    ) -> Result<FlowModOutcome, FlowModError> {
        if !matches!(
            fm.command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        ) {
            if let Some(g) = fm
                .rule
                .instructions
                .groups()
                .find(|g| self.groups.get(*g).is_none())
            {
                return Err(FlowModError::UnknownGroup(g));
            }
        }
        self.tables.apply(fm, now)
    }

    /// Adds a megaflow's counts to a rule, or to a group or bucket it went
    /// through.
    pub fn credit(&mut self, r: RuleRef, packets: u64, bytes: u64, used: Timestamp) {
        if r.bridge != crate::bridges::BridgeNo::MAIN {
            if let Some(b) = self.sub_mut(r.bridge) {
                b.credit(r, packets, bytes, used);
            }
        } else if r.table == GROUP_TABLE {
            self.groups.credit(r, packets, bytes);
        } else {
            self.tables.credit(r, packets, bytes, used);
        }
    }

    /// Applies what a translation's NORMAL action learned.
    pub fn learn(&mut self, learned: &[MacLearn], now: Timestamp) {
        for l in learned {
            if let Some(b) = self.sub_mut(l.bridge) {
                b.mac.learn(*l, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(br: &Bridge, mac: u64, now: Timestamp) -> Option<PortNo> {
        br.mac().lookup(0, mac, now)
    }

    /// A port that goes away or down takes the MACs learned behind it
    /// with it (NORMAL floods to find them again instead of sending into
    /// a dead port), and translations that read them are redone.
    #[test]
    fn a_port_removed_or_down_forgets_its_macs() {
        let mut br = Bridge::with_ports(1..=3);
        let now = Timestamp(1);
        let learn = |p: u32, mac: u64| MacLearn {
            bridge: crate::BridgeNo::MAIN,
            vlan: 0,
            mac,
            port: PortNo(p),
        };
        br.learn(&[learn(1, 0xa1), learn(2, 0xa2), learn(3, 0xa3)], now);
        let before = br.generations();
        assert!(br.remove_port(PortNo(2)).is_some());
        assert_eq!(learned(&br, 0xa2, now), None);
        assert_eq!(learned(&br, 0xa1, now), Some(PortNo(1)));
        assert!(br.generations().mac > before.mac && br.generations().ports > before.ports);
        br.set_port_up(PortNo(3), true);
        assert_eq!(learned(&br, 0xa3, now), Some(PortNo(3)), "up keeps them");
        br.set_port_up(PortNo(3), false);
        assert_eq!(learned(&br, 0xa3, now), None, "down forgets them");
        assert!(!br.ports().get(PortNo(3)).expect("port 3").up);
    }
}

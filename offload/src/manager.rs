//! The offload manager: megaflows become FDB rules.
//!
//! Layout in the FDB domain (../shared/DESIGN.md): the root table (level 0,
//! firmware-managed, slow to change) holds one catch-all rule that jumps to
//! our level-1 table; there, one matcher per distinct megaflow mask
//! (reference-counted, destroyed with its last rule) and one rule per
//! offloaded megaflow. Actions are shared where the device allows: one
//! dest_vport per vport, one drop, one pop_vlan, one push_vlan per header,
//! one modify-header per distinct rewrite list, one dest_array per set of
//! vports; every rule has its own flow counter, taken from bulks allocated
//! on demand and queried a bulk at a time.
//!
//! Translation of datapath actions follows the order the device runs them
//! in (counter, pop, modify, push, destination): a list that needs another
//! order, rewrites between two outputs, or an action the device lacks
//! (userspace, meter, sample: not yet) leaves the flow in software with the
//! reason ([`NotOffloaded`]).
//!
//! Hitless replace: the new rule goes in before the old one goes out (the
//! level-1 table allows duplicate values, and the older rule answers until
//! it is removed), so a megaflow whose actions change is never missing
//! from hardware.

use std::collections::HashMap;
use std::sync::Arc;

use megaflow::offload::{FlowOffload, HwId, HwStats, NotOffloaded};
use megaflow::{Actions, DpAction, Field, Match, PortNo};

use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
use crate::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DomainId, DomainType, DrBackend, DrError,
    MatcherId, RuleId, TableId,
};
use crate::prm::{encode_into, Encoded, PortMap, PortTable, SourcePortMode};
use crate::Vport;

/// How the manager lays out the FDB.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// How rules match the source vport.
    pub source_port: SourcePortMode,
    /// Counters per bulk, as log2.
    pub bulk_log: u8,
    /// Priority of our matchers in the level-1 table.
    pub priority: u16,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            source_port: SourcePortMode::REG_C0_UPPER_16,
            bulk_log: 12,
            priority: 1,
        }
    }
}

/// Shared action objects, created on first use.
#[derive(Default)]
struct Shared {
    vport: HashMap<Vport, ActionId>,
    array: HashMap<Vec<Vport>, ActionId>,
    drop: Option<ActionId>,
    pop: Option<ActionId>,
    push: HashMap<u32, ActionId>,
    modify: HashMap<Vec<u8>, (ActionId, usize)>,
}

struct Bulk {
    id: CounterBulkId,
    /// Offset → the flow counting there.
    owner: Vec<Option<HwId>>,
    /// Offset → the counter's value when its flow got it (device counters
    /// are not reset; a reused counter starts where the last flow left it).
    base: Vec<CounterValue>,
    /// Offsets given back whose final value the next query records.
    releasing: Vec<u32>,
}

struct HwFlow {
    rule: RuleId,
    matcher: (u8, Vec<u8>),
    counter: ActionId,
    slot: (usize, u32),
    modify: Option<Vec<u8>>,
}

/// Megaflows in the FDB through a [`DrBackend`].
pub struct OffloadManager<B: DrBackend> {
    backend: Arc<B>,
    config: ManagerConfig,
    ports: PortTable,
    domain: DomainId,
    root: TableId,
    table: TableId,
    root_matcher: MatcherId,
    jump: ActionId,
    jump_rule: RuleId,
    matchers: HashMap<(u8, Vec<u8>), (MatcherId, usize)>,
    shared: Shared,
    bulks: Vec<Bulk>,
    free_counters: Vec<(usize, u32)>,
    flows: HashMap<HwId, HwFlow>,
    next_id: u64,
    scratch: Encoded,
    query: Vec<CounterValue>,
}

fn backend(op: &'static str) -> impl Fn(DrError) -> NotOffloaded {
    move |e| match e {
        DrError::NoSpace(_) => NotOffloaded::TableFull,
        e => NotOffloaded::Backend {
            errno: e.errno().name(),
            op,
        },
    }
}

fn action(name: &str) -> NotOffloaded {
    NotOffloaded::Action(name.to_string())
}

impl<B: DrBackend> OffloadManager<B> {
    /// Creates the FDB layout: domain, root table with its jump rule, and
    /// our level-1 table. `ports` maps datapath ports to vports.
    pub fn new(backend: Arc<B>, ports: PortTable, config: ManagerConfig) -> Result<Self, DrError> {
        let b = &backend;
        let domain = b.domain_create(DomainType::Fdb)?;
        let root = b.table_create(domain, 0)?;
        let table = b.table_create(domain, 1)?;
        let root_matcher = b.matcher_create(root, 0, 0, &[])?;
        let jump = b.action_create(domain, ActionSpec::DestTable(table))?;
        let jump_rule = b.rule_create(root_matcher, &[], &[jump])?;
        Ok(OffloadManager {
            backend,
            config,
            ports,
            domain,
            root,
            table,
            root_matcher,
            jump,
            jump_rule,
            matchers: HashMap::new(),
            shared: Shared::default(),
            bulks: Vec::new(),
            free_counters: Vec::new(),
            flows: HashMap::new(),
            next_id: 1,
            scratch: Encoded::EMPTY,
            query: Vec::new(),
        })
    }

    /// The FDB domain (for the sim's packet path).
    pub fn domain(&self) -> DomainId {
        self.domain
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// Rules in hardware.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether no rule is in hardware.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Matchers in the level-1 table.
    pub fn matcher_count(&self) -> usize {
        self.matchers.len()
    }

    fn vport_of(&self, port: PortNo) -> Result<Vport, NotOffloaded> {
        self.ports
            .vport(port)
            .ok_or_else(|| action(&format!("output:{port} (no vport)")))
    }

    fn shared_action(
        &self,
        cache: Option<ActionId>,
        spec: ActionSpec,
    ) -> Result<ActionId, NotOffloaded> {
        match cache {
            Some(a) => Ok(a),
            None => self
                .backend
                .action_create(self.domain, spec)
                .map_err(backend("action_create")),
        }
    }

    /// A counter action for a new flow.
    fn counter(&mut self, id: HwId) -> Result<(ActionId, (usize, u32)), NotOffloaded> {
        if self.free_counters.is_empty() {
            let log = self.config.bulk_log;
            let bulk = self
                .backend
                .counter_bulk_alloc(log)
                .map_err(backend("counter_bulk_alloc"))?;
            let n = 1u32 << log;
            let bi = self.bulks.len();
            self.bulks.push(Bulk {
                id: bulk,
                owner: vec![None; n as usize],
                base: vec![CounterValue::default(); n as usize],
                releasing: Vec::new(),
            });
            self.free_counters.extend((0..n).rev().map(|o| (bi, o)));
        }
        let Some((bi, offset)) = self.free_counters.pop() else {
            return Err(NotOffloaded::TableFull);
        };
        let Some(bulk) = self.bulks.get_mut(bi) else {
            return Err(NotOffloaded::TableFull);
        };
        let a = match self.backend.action_create(
            self.domain,
            ActionSpec::FlowCounter {
                bulk: bulk.id,
                offset,
            },
        ) {
            Ok(a) => a,
            Err(e) => {
                self.free_counters.push((bi, offset));
                return Err(backend("action_create")(e));
            }
        };
        if let Some(o) = bulk.owner.get_mut(offset as usize) {
            *o = Some(id);
        }
        Ok((a, (bi, offset)))
    }

    /// Gives a counter back: it is reused after the next query has read
    /// its final value.
    fn release_counter(&mut self, counter: ActionId, (bi, offset): (usize, u32)) {
        let _ = self.backend.action_destroy(counter);
        if let Some(b) = self.bulks.get_mut(bi) {
            if let Some(o) = b.owner.get_mut(offset as usize) {
                *o = None;
            }
            b.releasing.push(offset);
        }
    }

    /// The modify-header ops for one set action, given what the match says
    /// about the packet.
    fn rewrite(m: &Match, a: &DpAction, ops: &mut Vec<ModifyOp>) -> Result<(), NotOffloaded> {
        let (k, mask) = (m.key(), m.mask());
        let exact = |f: Field| mask.is_exact(f);
        let v4 = exact(Field::EthType) && k.eth_type() == 0x0800;
        let v6 = exact(Field::EthType) && k.eth_type() == 0x86dd;
        let proto = if exact(Field::IpProto) {
            Some(k.ip_proto())
        } else {
            None
        };
        let set = |ops: &mut Vec<ModifyOp>, f: ModifyField, v: u32| ops.push(ModifyOp::set(f, v));
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(action(&format!(
                    "{what} without an exact layer in the match"
                )))
            }
        };
        match *a {
            DpAction::SetEthSrc(mac) => {
                set(ops, ModifyField::SmacHi, (mac >> 16) as u32);
                set(ops, ModifyField::SmacLo, (mac & 0xffff) as u32);
            }
            DpAction::SetEthDst(mac) => {
                set(ops, ModifyField::DmacHi, (mac >> 16) as u32);
                set(ops, ModifyField::DmacLo, (mac & 0xffff) as u32);
            }
            DpAction::SetIpv4Src(ip) => {
                need(v4, "set(ipv4_src)")?;
                set(ops, ModifyField::Sipv4, ip);
            }
            DpAction::SetIpv4Dst(ip) => {
                need(v4, "set(ipv4_dst)")?;
                set(ops, ModifyField::Dipv4, ip);
            }
            DpAction::SetIpv6Src(ip) | DpAction::SetIpv6Dst(ip) => {
                need(v6, "set(ipv6)")?;
                let src = matches!(a, DpAction::SetIpv6Src(_));
                for i in 0..4u8 {
                    let word = (ip >> (96 - 32 * u32::from(i))) as u32;
                    let f = if src {
                        ModifyField::Sipv6(i)
                    } else {
                        ModifyField::Dipv6(i)
                    };
                    set(ops, f, word);
                }
            }
            DpAction::SetDscp(d) => {
                need(v4 || v6, "set(ip_dscp)")?;
                set(ops, ModifyField::IpDscp, u32::from(d));
            }
            DpAction::SetEcn(e) => {
                need(v4 || v6, "set(ip_ecn)")?;
                set(ops, ModifyField::IpEcn, u32::from(e));
            }
            DpAction::SetTtl(t) => {
                need(v4 || v6, "set(ip_ttl)")?;
                let f = if v4 {
                    ModifyField::IpTtl
                } else {
                    ModifyField::Ipv6HopLimit
                };
                set(ops, f, u32::from(t));
            }
            DpAction::DecTtl => {
                need(v4 || v6, "dec_ttl")?;
                let field = if v4 {
                    ModifyField::IpTtl
                } else {
                    ModifyField::Ipv6HopLimit
                };
                ops.push(ModifyOp::Add { field, data: 0xff });
            }
            DpAction::SetTpSrc(p) | DpAction::SetTpDst(p) => {
                let src = matches!(a, DpAction::SetTpSrc(_));
                let f = match (proto, src) {
                    (Some(6), true) => ModifyField::TcpSport,
                    (Some(6), false) => ModifyField::TcpDport,
                    (Some(17), true) => ModifyField::UdpSport,
                    (Some(17), false) => ModifyField::UdpDport,
                    _ => return Err(action("set(tp_port) on a protocol other than TCP or UDP")),
                };
                set(ops, f, u32::from(p));
            }
            _ => return Err(action(&a.to_string())),
        }
        Ok(())
    }

    /// The DR actions for a megaflow's datapath actions, in device order;
    /// the modify-header bytes if one is used.
    fn translate(
        &mut self,
        m: &Match,
        actions: &Actions,
    ) -> Result<(Vec<ActionId>, Option<Vec<u8>>), NotOffloaded> {
        let mut pops = 0;
        let mut pushes = Vec::new();
        let mut ops = Vec::new();
        let mut outs: Vec<Vport> = Vec::new();
        let mut drop = false;
        for a in actions.iter() {
            match a {
                DpAction::Output(p) => {
                    let v = self.vport_of(*p)?;
                    if !outs.contains(&v) {
                        outs.push(v);
                    }
                }
                DpAction::Drop => drop = true,
                _ if !outs.is_empty() => {
                    return Err(action(&format!("{a} after an output")));
                }
                DpAction::PopVlan => {
                    if !ops.is_empty() || !pushes.is_empty() {
                        return Err(action("pop_vlan after a rewrite"));
                    }
                    pops += 1;
                }
                DpAction::PushVlan { tpid, tci } => {
                    pushes.push(u32::from(*tpid) << 16 | u32::from(*tci));
                }
                DpAction::Meter(_) => return Err(action("meter")),
                DpAction::Sample { .. } => return Err(action("sample")),
                DpAction::Userspace(r) => {
                    let name = match r {
                        megaflow::actions::UserspaceReason::Controller { .. } => "controller",
                        megaflow::actions::UserspaceReason::Sample => "userspace(sample)",
                        megaflow::actions::UserspaceReason::Action => "userspace",
                        megaflow::actions::UserspaceReason::SlowPath => "slow_path",
                    };
                    return Err(action(name));
                }
                set => {
                    if !pushes.is_empty() {
                        return Err(action(&format!("{set} after push_vlan")));
                    }
                    Self::rewrite(m, set, &mut ops)?;
                }
            }
        }
        if pops + pushes.len() > 2 {
            return Err(action("more than two VLAN actions"));
        }
        let mut list = Vec::new();
        for _ in 0..pops {
            let a = self.shared_action(self.shared.pop, ActionSpec::PopVlan)?;
            self.shared.pop = Some(a);
            list.push(a);
        }
        let modify = if ops.is_empty() {
            None
        } else {
            let bytes = encode_list(&ops);
            let a = match self.shared.modify.get_mut(&bytes) {
                Some((a, n)) => {
                    *n += 1;
                    *a
                }
                None => {
                    let a = self
                        .backend
                        .action_create(self.domain, ActionSpec::ModifyHeader(bytes.clone()))
                        .map_err(backend("action_create"))?;
                    self.shared.modify.insert(bytes.clone(), (a, 1));
                    a
                }
            };
            list.push(a);
            Some(bytes)
        };
        for h in pushes {
            let a = self.shared_action(
                self.shared.push.get(&h).copied(),
                ActionSpec::PushVlan { header: h },
            )?;
            self.shared.push.insert(h, a);
            list.push(a);
        }
        let term = match outs.as_slice() {
            [] => {
                let _ = drop;
                let a = self.shared_action(self.shared.drop, ActionSpec::Drop)?;
                self.shared.drop = Some(a);
                a
            }
            [v] => {
                let a = self
                    .shared_action(self.shared.vport.get(v).copied(), ActionSpec::DestVport(*v))?;
                self.shared.vport.insert(*v, a);
                a
            }
            many => {
                let key = many.to_vec();
                match self.shared.array.get(&key) {
                    Some(&a) => a,
                    None => {
                        let mut dests = Vec::new();
                        for v in many {
                            let a = self.shared_action(
                                self.shared.vport.get(v).copied(),
                                ActionSpec::DestVport(*v),
                            )?;
                            self.shared.vport.insert(*v, a);
                            dests.push(a);
                        }
                        let a = self
                            .backend
                            .action_create(self.domain, ActionSpec::DestArray(dests))
                            .map_err(backend("action_create"))?;
                        self.shared.array.insert(key, a);
                        a
                    }
                }
            }
        };
        list.push(term);
        Ok((list, modify))
    }

    fn release_modify(&mut self, bytes: Option<Vec<u8>>) {
        let Some(bytes) = bytes else {
            return;
        };
        let gone = match self.shared.modify.get_mut(&bytes) {
            Some((a, n)) => {
                *n -= 1;
                (*n == 0).then_some(*a)
            }
            None => None,
        };
        if let Some(a) = gone {
            self.shared.modify.remove(&bytes);
            let _ = self.backend.action_destroy(a);
        }
    }

    /// The matcher for an encoded mask, created on first use.
    fn matcher(&mut self, key: &(u8, Vec<u8>)) -> Result<MatcherId, NotOffloaded> {
        if let Some((m, n)) = self.matchers.get_mut(key) {
            *n += 1;
            return Ok(*m);
        }
        let m = self
            .backend
            .matcher_create(self.table, self.config.priority, key.0, &key.1)
            .map_err(backend("matcher_create"))?;
        self.matchers.insert(key.clone(), (m, 1));
        Ok(m)
    }

    fn release_matcher(&mut self, key: &(u8, Vec<u8>)) {
        let gone = match self.matchers.get_mut(key) {
            Some((m, n)) => {
                *n -= 1;
                (*n == 0).then_some(*m)
            }
            None => None,
        };
        if let Some(m) = gone {
            self.matchers.remove(key);
            let _ = self.backend.matcher_destroy(m);
        }
    }

    /// Everything `install` does; on error, what it took is given back.
    fn try_install(&mut self, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        encode_into(m, self.config.source_port, &self.ports, &mut self.scratch).map_err(|u| {
            NotOffloaded::Match {
                field: u.field.name(),
                reason: u.reason,
            }
        })?;
        let key = (self.scratch.criteria(), self.scratch.mask().to_vec());
        let value = self.scratch.value().to_vec();
        let (mut list, modify) = self.translate(m, actions)?;
        let id = HwId(self.next_id);
        let (counter, slot) = match self.counter(id) {
            Ok(c) => c,
            Err(e) => {
                self.release_modify(modify);
                return Err(e);
            }
        };
        list.insert(0, counter);
        let matcher = match self.matcher(&key) {
            Ok(mm) => mm,
            Err(e) => {
                self.release_counter(counter, slot);
                self.release_modify(modify);
                return Err(e);
            }
        };
        match self.backend.rule_create(matcher, &value, &list) {
            Ok(rule) => {
                self.next_id += 1;
                self.flows.insert(
                    id,
                    HwFlow {
                        rule,
                        matcher: key,
                        counter,
                        slot,
                        modify,
                    },
                );
                Ok(id)
            }
            Err(e) => {
                self.release_matcher(&key);
                self.release_counter(counter, slot);
                self.release_modify(modify);
                Err(backend("rule_create")(e))
            }
        }
    }

    /// Removes every rule and object this manager made, root jump included
    /// (nothing is left orphaned in the device).
    pub fn shutdown(mut self) -> Result<(), DrError> {
        let ids: Vec<HwId> = self.flows.keys().copied().collect();
        for id in ids {
            self.remove(id);
        }
        let b = Arc::clone(&self.backend);
        b.rule_destroy(self.jump_rule)?;
        b.matcher_destroy(self.root_matcher)?;
        b.action_destroy(self.jump)?;
        let arrays: Vec<ActionId> = self.shared.array.drain().map(|(_, a)| a).collect();
        for a in arrays {
            b.action_destroy(a)?;
        }
        let singles: Vec<ActionId> = self
            .shared
            .vport
            .drain()
            .map(|(_, a)| a)
            .chain(self.shared.push.drain().map(|(_, a)| a))
            .chain(self.shared.drop.take())
            .chain(self.shared.pop.take())
            .collect();
        for a in singles {
            b.action_destroy(a)?;
        }
        for bulk in self.bulks.drain(..) {
            b.counter_bulk_free(bulk.id)?;
        }
        b.table_destroy(self.table)?;
        b.table_destroy(self.root)?;
        b.domain_destroy(self.domain)
    }
}

impl<B: DrBackend> FlowOffload for OffloadManager<B> {
    fn install(&mut self, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        self.try_install(m, actions)
    }

    fn replace(&mut self, old: HwId, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        let new = self.try_install(m, actions)?;
        self.remove(old);
        Ok(new)
    }

    fn remove(&mut self, id: HwId) {
        let Some(f) = self.flows.remove(&id) else {
            return;
        };
        let _ = self.backend.rule_destroy(f.rule);
        self.release_counter(f.counter, f.slot);
        self.release_modify(f.modify);
        self.release_matcher(&f.matcher);
    }

    fn poll(&mut self, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        for (bi, bulk) in self.bulks.iter_mut().enumerate() {
            self.backend
                .counter_bulk_query(bulk.id, &mut self.query)
                .map_err(backend("counter_bulk_query"))?;
            for ((owner, v), base) in bulk.owner.iter().zip(&self.query).zip(&bulk.base) {
                if let Some(id) = owner {
                    out.push((
                        *id,
                        HwStats {
                            packets: v.packets.wrapping_sub(base.packets),
                            bytes: v.bytes.wrapping_sub(base.bytes),
                        },
                    ));
                }
            }
            for offset in bulk.releasing.drain(..) {
                if let (Some(b), Some(v)) = (
                    bulk.base.get_mut(offset as usize),
                    self.query.get(offset as usize),
                ) {
                    *b = *v;
                }
                self.free_counters.push((bi, offset));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "tests/manager.rs"]
mod tests;

//! The offload manager: megaflows become FDB rules.
//!
//! Layout in the FDB domain (../shared/DESIGN.md): the root table (level 0,
//! firmware-managed, slow to change) holds one catch-all rule that jumps to
//! our level-1 table; there, one matcher per distinct megaflow mask
//! (reference-counted, destroyed with its last rule) and one rule per
//! offloaded megaflow. Actions are shared where the device allows: one
//! dest_vport per vport, one drop, one default_miss, one pop_vlan, one
//! decap, one push_vlan per header, one modify-header per distinct rewrite
//! list, one encap per distinct header, one dest_array per set of
//! destinations (and their encaps), one flow_meter per OpenFlow meter (the
//! content-shared ones counted and destroyed with their last flow); every
//! rule has its own flow counter, taken from bulks allocated on demand and
//! queried a bulk at a time.
//!
//! Translation of datapath actions follows the order the device runs them
//! in (counter, decap, pop, modify, push, encap, destination): a list that needs another
//! order, rewrites between two outputs, or an action the device lacks
//! (userspace, a sample of anything but a copy to the sFlow exporter) leaves the
//! flow in software with the reason ([`NotOffloaded`]).
//!
//! ## Meters and samplers: the level-2 table
//!
//! A flow whose actions start with `meter(N)` or `sample(...)` takes two
//! steps (module `staged`): its level-1 rule counts (every packet, before the
//! meter), writes the flow's *tag* into reg_c_1 ([`REG_FLOW_TAG`]) with a
//! per-flow modify-header, and ends in the meter (OpenFlow meter N's shared
//! flow_meter action, which writes the colour into reg_c_2, [`REG_COLOR`])
//! or in the flow's own flow_sampler (whose sampled copy goes to the eSwitch
//! manager, i.e. software, carrying the tag in reg_c_1). Both continue in
//! the level-2 table ([`LEVEL2`]), created with the layout, where two shared
//! matchers wait: on (reg_c_1, reg_c_2), priority 0, a rule per metered
//! flow sends (tag, red) to the shared drop; on reg_c_1, priority 1, a rule
//! per flow does the rest of its actions. Tags are unique among live flows
//! ([`OffloadManager::tag_of`], [`OffloadManager::flow_of_tag`]).
//!
//! Meters ([`FlowOffload::set_meter`]): a changed band gets a new flow_meter
//! action; the flows installed on the old one keep it (the caller replaces
//! them to move them) and it is destroyed with its last flow. Deleting a
//! meter that flows still use is deferred the same way: the definition is
//! gone at once (new installs naming it are refused), the action goes with
//! its last flow.
//!
//! ## Counters
//!
//! A removed flow's counter is reused only after the next poll has read its
//! final value, which that poll reports once under the removed flow's id;
//! the value becomes the counter's new base, so the next flow on it starts
//! at zero.
//!
//! Hitless replace: the new rule goes in before the old one goes out (the
//! level-1 table allows duplicate values, and the older rule answers until
//! it is removed), so a megaflow whose actions change is never missing
//! from hardware.

pub(crate) mod chain;
mod counters;
mod staged;
mod translate;

use std::collections::HashMap;
use std::sync::Arc;

use megaflow::offload::{FlowOffload, HwId, HwStats, MeterBand, NotOffloaded};
use megaflow::shard::ShardedMap;
use megaflow::MeterId;
use megaflow::{Actions, DpAction, Match, PortNo};

use crate::dr::{
    ActionId, ActionSpec, CounterValue, DomainId, DomainType, DrBackend, DrError, MatcherId,
    RuleId, TableId,
};
use crate::prm::{encode_into, Encoded, PortMap, PortTable, SourcePortMode};
use crate::restore::RestoreTable;
use crate::Vport;

use counters::Bulk;
use staged::{MeterDef, Staged};
use translate::Stage;

/// The metadata register that carries a metered or sampled flow's tag from
/// its level-1 rule to the level-2 table (and, on a sampled copy, to
/// software). reg_c_0 holds the vport metadata.
pub const REG_FLOW_TAG: u8 = crate::restore::REG_TAG;

/// The register a flow meter writes its colour into.
pub const REG_COLOR: u8 = 2;

/// The level of the table where metered and sampled flows continue.
pub const LEVEL2: u32 = 2;

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
    drop: Option<ActionId>,
    miss: Option<ActionId>,
    pop: Option<ActionId>,
    /// The decap (`L2_TUNNEL_TO_L2`) of rules for tunnel packets.
    decap: Option<ActionId>,
    push: HashMap<u32, ActionId>,
    /// Actions shared by content and counted (modify-headers, encaps,
    /// dest_arrays, an array's key its destinations and their headers):
    /// destroyed when their last flow goes.
    counted: HashMap<Counted, (ActionId, usize)>,
}

/// A counted shared action's key: its kind and bytes.
pub(super) type Counted = (crate::dr::ActionKind, Vec<u8>);

/// What a flow holds in the device. An install fills it step by step; a
/// remove, or a failed install, gives back whatever part of it is set.
#[derive(Default)]
struct Held {
    /// The level-1 rule.
    rule: Option<RuleId>,
    /// The level-1 matcher's key (shared with every flow on that matcher:
    /// a mask's encoding is hundreds of bytes).
    matcher: Option<MatcherKey>,
    /// The counter action and its (bulk, offset).
    counter: Option<(ActionId, (usize, u32))>,
    /// The counted shared actions of the flow (its rewrites' modify-header,
    /// its encap header), in the level-1 rule, or in the level-2 rule of a
    /// metered or sampled flow.
    counted: Vec<Counted>,
    /// The meter or sampler stage (boxed: most flows have none, and a
    /// million flows' records stay small).
    staged: Option<Box<Staged>>,
    /// A chained first stage's tags and their restore rules.
    chain: Option<Box<chain::ChainHeld>>,
    /// Rules beside the first: a conntrack entry's in the conntrack tables
    /// of the later `ct()` passes, with their matchers' keys.
    extra: Vec<(RuleId, MatcherKey)>,
}

/// A matcher's table level, criteria and encoded mask.
type MatcherKey = Arc<(u32, u8, Vec<u8>)>;

/// Attempts at destroying the rules the device kept, at shutdown (the
/// last waits 10 << 4 ms).
const SHUTDOWN_RETRIES: u32 = 5;

/// Objects [`OffloadManager::new`] made, undone if a later step fails.
enum Made {
    Domain(DomainId),
    Table(TableId),
    Matcher(MatcherId),
    Action(ActionId),
}

/// Megaflows in the FDB through a [`DrBackend`].
pub struct OffloadManager<B: DrBackend> {
    backend: Arc<B>,
    config: ManagerConfig,
    ports: PortTable,
    domain: DomainId,
    root: TableId,
    table: TableId,
    /// The level-2 table of metered and sampled flows.
    level2: TableId,
    root_matcher: MatcherId,
    jump: ActionId,
    jump_rule: RuleId,
    matchers: HashMap<MatcherKey, (MatcherId, usize)>,
    /// Level 2, on (reg_c_1, reg_c_2): a metered flow's red packets.
    red_matcher: Option<MatcherId>,
    /// Level 2, on reg_c_1: the rest of a flow's actions.
    tag_matcher: Option<MatcherId>,
    /// The conntrack and post-ct tables of each `ct()` pass, made on
    /// first use.
    chain: Vec<chain::Tables>,
    /// Which pass each recirculation id's stages follow.
    passes: chain::Passes,
    /// The conntrack entries in the device (copied into a pass's table
    /// when the pass is made).
    ct_live: HashMap<HwId, megaflow::offload::CtRule>,
    shared: Shared,
    /// OpenFlow meters defined in hardware.
    meters: HashMap<MeterId, MeterDef>,
    /// Live flows per flow_meter action (only actions in use have an
    /// entry; one no longer in `meters` goes with its last flow).
    meter_users: HashMap<ActionId, usize>,
    /// Live tags and their flows.
    tags: HashMap<u32, HwId>,
    /// What each tag a packet may reach software with stands for (sampled
    /// flows' copies), for the threads that receive them.
    restore: Arc<RestoreTable>,
    next_tag: u32,
    bulks: Vec<Bulk>,
    free_counters: Vec<(usize, u32)>,
    flows: ShardedMap<HwId, Held>,
    next_id: u64,
    scratch: Encoded,
    /// One query buffer per bulk.
    queries: Vec<Vec<CounterValue>>,
    /// Removed flows whose rule the device did not destroy: still in the
    /// device (steering and counting), so they keep everything they use,
    /// their counter too (not reported, not reused) until a retry
    /// destroys the rule; then the next poll reports their final counts.
    zombies: Vec<(Held, Option<HwId>)>,
    /// Rule destroys the device refused, since the start (each retry that
    /// fails counts again).
    destroy_refusals: u64,
}

/// Maps a device error of `op`: its errno by name (`ENOSPC` included: a
/// device table or resource that is full is the device's answer, not one
/// of the manager's own limits).
fn backend(op: &'static str) -> impl Fn(DrError) -> NotOffloaded {
    move |e| NotOffloaded::Backend {
        errno: e.errno().name(),
        op,
    }
}

fn action(name: &str) -> NotOffloaded {
    NotOffloaded::Action(name.to_string())
}

fn undo<B: DrBackend>(b: &B, made: Vec<Made>) {
    for m in made.into_iter().rev() {
        let _ = match m {
            Made::Domain(d) => b.domain_destroy(d),
            Made::Table(t) => b.table_destroy(t),
            Made::Matcher(m) => b.matcher_destroy(m),
            Made::Action(a) => b.action_destroy(a),
        };
    }
}

impl<B: DrBackend> OffloadManager<B> {
    /// Creates the FDB layout: domain, root table with its jump rule, our
    /// level-1 table and the level-2 table. `ports` maps datapath ports to
    /// vports. On error nothing is left in the device.
    pub fn new(backend: Arc<B>, ports: PortTable, config: ManagerConfig) -> Result<Self, DrError> {
        let b = &*backend;
        let mut made = Vec::new();
        let mut step = || -> Result<_, DrError> {
            let domain = b.domain_create(DomainType::Fdb)?;
            made.push(Made::Domain(domain));
            let root = b.table_create(domain, 0)?;
            made.push(Made::Table(root));
            let table = b.table_create(domain, 1)?;
            made.push(Made::Table(table));
            let level2 = b.table_create(domain, LEVEL2)?;
            made.push(Made::Table(level2));
            let root_matcher = b.matcher_create(root, 0, 0, &[])?;
            made.push(Made::Matcher(root_matcher));
            let jump = b.action_create(domain, ActionSpec::DestTable(table))?;
            made.push(Made::Action(jump));
            let jump_rule = b.rule_create(root_matcher, &[], &[jump])?;
            Ok((domain, root, table, level2, root_matcher, jump, jump_rule))
        };
        let (domain, root, table, level2, root_matcher, jump, jump_rule) = match step() {
            Ok(v) => v,
            Err(e) => {
                undo(b, made);
                return Err(e);
            }
        };
        Ok(OffloadManager {
            backend,
            config,
            ports,
            domain,
            root,
            table,
            level2,
            root_matcher,
            jump,
            jump_rule,
            matchers: HashMap::new(),
            red_matcher: None,
            tag_matcher: None,
            chain: Vec::new(),
            passes: chain::Passes::default(),
            ct_live: HashMap::new(),
            shared: Shared::default(),
            meters: HashMap::new(),
            meter_users: HashMap::new(),
            tags: HashMap::new(),
            restore: Arc::default(),
            next_tag: 1,
            bulks: Vec::new(),
            free_counters: Vec::new(),
            flows: ShardedMap::new(),
            next_id: 1,
            scratch: Encoded::EMPTY,
            queries: Vec::new(),
            zombies: Vec::new(),
            destroy_refusals: 0,
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

    /// OpenFlow meters defined in hardware.
    pub fn meter_count(&self) -> usize {
        self.meters.len()
    }

    /// The tag (reg_c_1 value) of a metered or sampled flow: what its
    /// packets carry into the level-2 table and its sampled copies carry to
    /// software.
    pub fn tag_of(&self, id: HwId) -> Option<u32> {
        self.flows
            .get(&id)
            .and_then(|h| h.staged.as_ref().and_then(|s| s.tag))
    }

    /// What the threads that receive packets from the device read: what
    /// each restore tag stands for ([`crate::restore`]).
    pub fn restore_table(&self) -> Arc<RestoreTable> {
        Arc::clone(&self.restore)
    }

    /// The flow a tag (reg_c_1 of a sampled copy) belongs to.
    pub fn flow_of_tag(&self, tag: u32) -> Option<HwId> {
        self.tags.get(&tag).copied()
    }

    /// A port added (`Some` vport) or removed (`None`) while the switch
    /// runs. Flows that output to or match a removed port must have been
    /// removed first; its dest_vport action stays shared until stop.
    pub fn set_port(&mut self, port: PortNo, vport: Option<Vport>, tag: Option<u32>) {
        match vport {
            Some(v) => {
                self.ports.insert(port, v);
                if let Some(t) = tag {
                    self.ports.set_tag(v, t);
                }
            }
            None => self.ports.remove(port),
        }
    }

    /// A tunnel port's ground (`None`: not a tunnel port, or none the
    /// device can take): its packets' rules match them on that uplink
    /// and decapsulate first.
    pub fn set_tunnel(&mut self, port: PortNo, ground: Option<crate::prm::TunnelGround>) {
        self.ports.set_tunnel(port, ground);
    }

    /// The vport rules use for `port` (`None`: the device has no such
    /// port, flows naming it stay in software).
    pub fn port_vport(&self, port: PortNo) -> Option<Vport> {
        self.ports.vport(port)
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

    /// The shared drop.
    fn drop_action(&mut self) -> Result<ActionId, NotOffloaded> {
        let a = self.shared_action(self.shared.drop, ActionSpec::Drop)?;
        self.shared.drop = Some(a);
        Ok(a)
    }

    /// Gives back counted shared actions (the last user's goes), in the
    /// reverse of the order they were
    /// taken: an action that holds others (a dest_array holds its encaps)
    /// goes before them.
    fn release_counted(&mut self, keys: Vec<Counted>) {
        for key in keys.into_iter().rev() {
            let gone = match self.shared.counted.get_mut(&key) {
                Some((a, n)) => {
                    *n -= 1;
                    (*n == 0).then_some(*a)
                }
                None => None,
            };
            if let Some(a) = gone {
                self.shared.counted.remove(&key);
                let _ = self.backend.action_destroy(a);
            }
        }
    }

    /// The shared action of `spec` (its kind and `bytes` its key), made on
    /// first use, counted once more; `keys` records it for release.
    fn counted_action(
        &mut self,
        bytes: Vec<u8>,
        spec: ActionSpec,
        keys: &mut Vec<Counted>,
    ) -> Result<ActionId, NotOffloaded> {
        let key = (crate::dr::ActionKind::of(&spec), bytes);
        let a = match self.shared.counted.get_mut(&key) {
            Some((a, n)) => {
                *n += 1;
                *a
            }
            None => {
                let a = self
                    .backend
                    .action_create(self.domain, spec)
                    .map_err(backend("action_create"))?;
                self.shared.counted.insert(key.clone(), (a, 1));
                a
            }
        };
        keys.push(key);
        Ok(a)
    }

    /// The matcher for an encoded mask in the table of `level` (1, or
    /// the chain's), created on first use, and its shared key.
    fn matcher(
        &mut self,
        level: u32,
        key: (u8, &[u8]),
    ) -> Result<(MatcherId, MatcherKey), NotOffloaded> {
        let wanted = (level, key.0, key.1.to_vec());
        if let Some((k, (m, n))) = self.matchers.get_key_value(&wanted) {
            let (k, m, n) = (Arc::clone(k), *m, *n);
            self.matchers.insert(Arc::clone(&k), (m, n + 1));
            return Ok((m, k));
        }
        let chain = crate::ct::pass_of(level).and_then(|(d, ct)| {
            let t = self.chain.get(d)?;
            Some(if ct { t.ct } else { t.post })
        });
        let table = chain.unwrap_or(self.table);
        let m = self
            .backend
            .matcher_create(table, self.config.priority, key.0, key.1)
            .map_err(backend("matcher_create"))?;
        let k = Arc::new(wanted);
        self.matchers.insert(Arc::clone(&k), (m, 1));
        Ok((m, k))
    }

    fn release_matcher(&mut self, key: &MatcherKey) {
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
        self.reap_some();
        encode_into(m, self.config.source_port, &self.ports, &mut self.scratch)?;
        let (criteria, mask, value) = self.scratch_match();
        let (stage, rest) = translate::stage(actions.as_slice())?;
        let later = m.mask().is_exact(megaflow::Field::RecircId) && m.key().recirc_id() != 0;
        let level = if later {
            if stage != Stage::Plain {
                return Err(action("a meter or sampler in a stage after ct()"));
            }
            // Its table is the post-ct table of the pass the stage that
            // leads here ends in.
            let Some(pass) = self.passes.after(m.key().recirc_id() as u32) else {
                return Err(NotOffloaded::Waiting(
                    "its ct() stage is not in the device yet",
                ));
            };
            self.chain_tables(pass)?;
            crate::ct::level_post(pass)
        } else {
            1
        };
        self.install_held(|me, id, held| {
            me.build(id, m, stage, rest, (level, criteria, &mask), &value, held)
        })
    }

    /// Retries the destroys the device refused, if any, before an install.
    fn reap_some(&mut self) {
        if !self.zombies.is_empty() {
            let _ = self.reap();
        }
    }

    /// The encoded match in `scratch`: criteria, mask and value.
    fn scratch_match(&self) -> (u8, Vec<u8>, Vec<u8>) {
        let s = &self.scratch;
        (s.criteria(), s.mask().to_vec(), s.value().to_vec())
    }

    /// A new rule under the next id: `build` makes its objects into a
    /// [`Held`], kept when it succeeds, given back when it fails.
    fn install_held(
        &mut self,
        build: impl FnOnce(&mut Self, HwId, &mut Held) -> Result<(), NotOffloaded>,
    ) -> Result<HwId, NotOffloaded> {
        let id = HwId(self.next_id);
        let mut held = Held::default();
        match build(self, id, &mut held) {
            Ok(()) => {
                self.next_id += 1;
                self.flows.insert(id, held);
                Ok(id)
            }
            Err(e) => {
                self.release(held, None);
                Err(e)
            }
        }
    }

    /// Creates a flow's objects into `held`, level 2 before level 1 so that
    /// the rule that leads there finds everything in place.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &mut self,
        id: HwId,
        m: &Match,
        stage: Stage,
        rest: &[DpAction],
        key: (u32, u8, &[u8]),
        value: &[u8],
        held: &mut Held,
    ) -> Result<(), NotOffloaded> {
        // An unknown meter is refused before anything is taken.
        let meter = match stage {
            Stage::Meter(mid) => Some(self.meter_action(mid)?),
            _ => None,
        };
        let (rest, chained) = chain::split(rest)?;
        let regs = match chained {
            Some((spec, recirc)) => {
                if stage != Stage::Plain {
                    return Err(action("ct() after a meter or sampler"));
                }
                // A first stage's ct() is pass 0; a later stage's, the
                // pass after the one its own table follows.
                let pass = match crate::ct::pass_of(key.0) {
                    Some((d, false)) => d + 1,
                    _ => 0,
                };
                let ch = held.chain.insert(Box::default());
                Some((self.chain_stage(id, &spec, (recirc, pass), ch)?, pass))
            }
            None => None,
        };
        let (list, counted) = self.translate(m, rest, regs)?;
        held.counted = counted;
        let mut first = match stage {
            Stage::Plain => list,
            _ => {
                let st = held.staged.insert(Box::default());
                self.stage2(id, stage, meter, &list, st)?
            }
        };
        let (counter, slot) = self.counter(id)?;
        held.counter = Some((counter, slot));
        first.insert(0, counter);
        let (matcher, key) = self.matcher(key.0, (key.1, key.2))?;
        held.matcher = Some(key);
        let rule = self
            .backend
            .rule_create(matcher, value, &first)
            .map_err(backend("rule_create"))?;
        held.rule = Some(rule);
        Ok(())
    }

    /// Gives back what a flow holds; `report`: the id under which the next
    /// poll reports its counter's final value (none for a failed install).
    fn release(&mut self, held: Held, report: Option<HwId>) {
        // A refused destroy is kept and retried ([`Self::reap`]).
        let _ = self.try_release(held, report);
    }

    /// [`release`](Self::release); the error: the device kept the rule,
    /// and the flow is kept whole until a retry destroys it.
    fn try_release(&mut self, mut held: Held, report: Option<HwId>) -> Result<(), DrError> {
        while let Some((r, k)) = held.extra.pop() {
            if let Err(e) = self.backend.rule_destroy(r) {
                held.extra.push((r, k));
                if let Some((_, slot)) = held.counter {
                    self.hide_counter(slot);
                }
                self.zombies.push((held, report));
                self.destroy_refusals += 1;
                return Err(e);
            }
            self.release_matcher(&k);
        }
        if let Some(r) = held.rule {
            if let Err(e) = self.backend.rule_destroy(r) {
                if let Some((_, slot)) = held.counter {
                    self.hide_counter(slot);
                }
                self.zombies.push((held, report));
                self.destroy_refusals += 1;
                return Err(e);
            }
            held.rule = None;
        }
        if let Some((a, slot)) = held.counter {
            self.release_counter(a, slot, report);
        }
        if let Some(st) = held.staged {
            self.release_staged(*st);
        }
        if let Some(ch) = held.chain {
            self.release_chain(*ch);
        }
        self.release_counted(held.counted);
        if let Some(k) = held.matcher {
            self.release_matcher(&k);
        }
        Ok(())
    }

    /// Retries destroying the rules of removed flows the device kept; the
    /// error: the last refusal (those flows are kept for the next retry).
    fn reap(&mut self) -> Result<(), DrError> {
        let mut refused = Ok(());
        for (held, report) in std::mem::take(&mut self.zombies) {
            if let Err(e) = self.try_release(held, report) {
                refused = Err(e);
            }
        }
        refused
    }

    /// Removed flows whose rule is still in the device (a destroy failed;
    /// retried at every install, poll and shutdown).
    pub fn undestroyed(&self) -> usize {
        self.zombies.len()
    }

    /// Rule destroys the device refused since the start, retries included.
    pub fn destroy_refusals(&self) -> u64 {
        self.destroy_refusals
    }

    /// Removes every rule and object this manager made, root jump, level-2
    /// table and meters included (nothing is left orphaned in the device).
    /// Rules whose destroy fails are retried a few times; if the device
    /// still refuses, the error is the last refusal.
    pub fn shutdown(mut self) -> Result<(), DrError> {
        let ids: Vec<HwId> = self.flows.keys().copied().collect();
        for id in ids {
            self.remove(id);
        }
        let mut reaped = Ok(());
        for attempt in 0..SHUTDOWN_RETRIES {
            if self.zombies.is_empty() {
                break;
            }
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(10 << attempt));
            }
            reaped = self.reap();
        }
        reaped?;
        let b = Arc::clone(&self.backend);
        let meters: std::collections::BTreeSet<ActionId> = self
            .meters
            .drain()
            .map(|(_, d)| d.action)
            .chain(self.meter_users.drain().map(|(a, _)| a))
            .collect();
        for a in meters {
            b.action_destroy(a)?;
        }
        for m in [self.red_matcher.take(), self.tag_matcher.take()]
            .into_iter()
            .flatten()
        {
            b.matcher_destroy(m)?;
        }
        b.rule_destroy(self.jump_rule)?;
        b.matcher_destroy(self.root_matcher)?;
        b.action_destroy(self.jump)?;
        // Arrays hold other actions: they go first.
        let is_array = |k: &Counted| k.0 == crate::dr::ActionKind::DestArray;
        let counted_arrays: Vec<Counted> = self
            .shared
            .counted
            .keys()
            .filter(|k| is_array(k))
            .cloned()
            .collect();
        let arrays: Vec<ActionId> = counted_arrays
            .iter()
            .filter_map(|k| self.shared.counted.remove(k).map(|(a, _)| a))
            .collect();
        for a in arrays {
            b.action_destroy(a)?;
        }
        let singles: Vec<ActionId> = self
            .shared
            .vport
            .drain()
            .map(|(_, a)| a)
            .chain(self.shared.push.drain().map(|(_, a)| a))
            .chain(self.shared.counted.drain().map(|(_, (a, _))| a))
            .chain(self.shared.drop.take())
            .chain(self.shared.miss.take())
            .chain(self.shared.pop.take())
            .chain(self.shared.decap.take())
            .collect();
        for a in singles {
            b.action_destroy(a)?;
        }
        for bulk in self.bulks.drain(..) {
            b.counter_bulk_free(bulk.id)?;
        }
        self.shutdown_chain()?;
        b.table_destroy(self.level2)?;
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
        self.ct_live.remove(&id);
        if let Some(held) = self.flows.remove(&id) {
            self.release(held, Some(id));
        }
    }

    fn poll(&mut self, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        self.poll_counters(out)
    }

    fn poll_some(
        &mut self,
        next: &mut usize,
        max: usize,
        out: &mut Vec<(HwId, HwStats)>,
    ) -> Result<bool, NotOffloaded> {
        self.poll_counters_some(next, max, out)
    }

    fn set_meter(&mut self, id: MeterId, band: Option<MeterBand>) -> Result<(), NotOffloaded> {
        self.define_meter(id, band)
    }

    fn ct_install(&mut self, rule: &megaflow::offload::CtRule) -> Result<HwId, NotOffloaded> {
        self.install_ct(rule)
    }

    fn ct_remove(&mut self, id: HwId) {
        self.remove(id);
    }
}

#[cfg(test)]
#[path = "../tests/manager.rs"]
mod tests;

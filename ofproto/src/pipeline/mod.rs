//! The pipeline: the software datapath, the upcall handler, the offload
//! policy and the revalidator joined around one megaflow cache.
//!
//! ```text
//! packet (a hardware miss) ─► extract ─► megaflow cache ─hit─► execute
//!                                          └─miss─► upcall: translate through
//!                                             the bridge, install the megaflow
//! per hit: hot? (N packets within T) ─► offload queue ─► FlowOffload::install
//! revalidate (every interval): poll hardware counters, fold them into the
//!   megaflows and the OpenFlow rules, expire rules (idle/hard timeouts),
//!   evict idle megaflows, re-translate flows whose inputs changed, hold the
//!   flow limit.
//! ```
//!
//! Every megaflow has a [`FlowState`]; its moves go through one function
//! ([`Pipeline::go`]) that checks [`FlowState::can_go`], so an illegal
//! transition is counted (and asserted on in tests), never silently done.
//!
//! The pipeline is owned by one thread (replay's loop; the datapath thread
//! live). Time is the caller's: capture timestamps in replay, the monotonic
//! clock live, so aging in replay behaves as it would have live.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use lru::LruCache;
use megaflow::actions::{execute, ActionSink, ExecOutcome, UserspaceReason};
use megaflow::offload::{FlowOffload, FlowState, HwId, HwStats, NotOffloaded};
use megaflow::{
    extract_into, Actions, CacheConfig, DpAction, FlowHandle, FlowKey, FlowStats, InsertError,
    Match, MegaflowCache, MeterId, PortNo, SplitMix64, Timestamp,
};

use crate::bridge::{Bridge, Generations};
use crate::meter::{MeterSpec, MeterTable};
use crate::table::{RemovedRule, RuleRef};
use crate::text::format_match;

mod revalidate;

pub use revalidate::PassReport;

const SEC: u64 = 1_000_000_000;

/// When megaflows go to hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadMode {
    /// Never: everything stays in software.
    Off,
    /// Every megaflow, as soon as it is installed (Open vSwitch's
    /// hw-offload behaviour).
    All,
    /// A megaflow that sees `packets` packets within `window_ns`.
    Hot { packets: u32, window_ns: u64 },
}

/// The offload policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffloadPolicy {
    pub mode: OffloadMode,
    /// Most rules in hardware; at the budget, the least recently hit
    /// offloaded flow is demoted to make room. `None`: the device's
    /// capacity is the only bound.
    pub budget: Option<usize>,
    /// How long a flow whose offload failed for a transient reason (device
    /// error, table full, demotion) waits before it may be tried again.
    pub retry_ns: u64,
}

impl Default for OffloadPolicy {
    fn default() -> Self {
        OffloadPolicy {
            mode: OffloadMode::Hot {
                packets: 3,
                window_ns: SEC,
            },
            budget: None,
            retry_ns: SEC,
        }
    }
}

/// Revalidator tunables (Open vSwitch's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevalidatorConfig {
    /// Time between passes.
    pub interval_ns: u64,
    /// A megaflow unused this long is evicted.
    pub max_idle_ns: u64,
    /// The most megaflows (the dynamic limit never goes above it).
    pub flow_limit: usize,
    /// Shrink the limit when passes run long, grow it back when they are
    /// quick (OVS's `udpif` behaviour).
    pub dynamic_limit: bool,
}

impl Default for RevalidatorConfig {
    fn default() -> Self {
        RevalidatorConfig {
            interval_ns: SEC / 2,
            max_idle_ns: 10 * SEC,
            flow_limit: 200_000,
            dynamic_limit: true,
        }
    }
}

/// Everything a pipeline is configured with.
#[derive(Clone, Debug, Default)]
pub struct PipelineConfig {
    pub cache: CacheConfig,
    pub offload: OffloadPolicy,
    pub revalidator: RevalidatorConfig,
}

/// Counters of the pipeline as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Packets through the software path.
    pub packets: u64,
    /// Of which: megaflow cache hits.
    pub hits: u64,
    /// Of which: misses translated by the upcall handler.
    pub upcalls: u64,
    /// Megaflows installed.
    pub megaflows_created: u64,
    /// Upcalls whose megaflow was not installed (flow limit).
    pub flow_limit_hits: u64,
    /// Successful hardware installs (a replace counts once).
    pub offloaded: u64,
    /// Failed offloads by reason (`dump-flows` text).
    pub offload_failures: BTreeMap<String, u64>,
    /// Offloaded flows demoted under the rule budget.
    pub demoted: u64,
    /// Megaflows evicted for idleness.
    pub aged: u64,
    /// Megaflows evicted because the flow limit was exceeded.
    pub evicted_limit: u64,
    /// Megaflows the revalidator found changed and updated in place.
    pub revalidated_modified: u64,
    /// Megaflows the revalidator found unsound and deleted.
    pub revalidated_deleted: u64,
    /// Megaflows removed by [`Pipeline::flush_port`].
    pub flushed: u64,
    /// Packets and bytes folded in from hardware counters.
    pub hw_packets: u64,
    pub hw_bytes: u64,
    /// Revalidator passes run.
    pub passes: u64,
    /// Counter polls that failed (the pass went on without them).
    pub poll_errors: u64,
    /// Lifecycle moves [`FlowState::can_go`] refused (a bug if not 0).
    pub illegal_transitions: u64,
}

/// Why a flow left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Eviction {
    Idle,
    Limit,
    Unsound,
    Flush,
}

/// What the pipeline keeps per megaflow besides the cache entry.
#[derive(Clone, Debug)]
struct FlowMeta {
    handle: FlowHandle,
    state: FlowState,
    hw: Option<HwId>,
    reason: Option<NotOffloaded>,
    /// May be offloaded again (always, unless the device can never take it
    /// and its actions have not changed since).
    eligible: bool,
    created: Timestamp,
    window_start: Timestamp,
    window_packets: u32,
    retry_at: Timestamp,
    /// Packets and bytes already credited to the OpenFlow rules.
    credited: (u64, u64),
    rules: Arc<[RuleRef]>,
    generations: Generations,
    uses_mac: bool,
}

/// A hardware rule the pipeline knows about.
#[derive(Clone, Debug)]
struct HwEntry {
    idx: u32,
    handle: FlowHandle,
    /// The cumulative counters already folded.
    seen: HwStats,
    rules: Arc<[RuleRef]>,
    /// Removed: its next report is its last.
    retired: bool,
}

/// One megaflow as a dump shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowDump {
    pub matched: Match,
    pub actions: Actions,
    pub stats: FlowStats,
    pub state: FlowState,
    pub hw: Option<HwId>,
    /// Why it is not in hardware (for a software-only flow).
    pub reason: Option<NotOffloaded>,
    pub created: Timestamp,
}

impl FlowDump {
    /// `yes`, or why not.
    pub fn offloaded(&self) -> String {
        match (self.state, &self.reason) {
            (FlowState::Offloaded, _) => "yes".to_string(),
            (_, Some(r)) => format!("no ({r})"),
            (FlowState::Installed, None) => "no (not hot)".to_string(),
            (s, None) => format!("no ({})", s.name()),
        }
    }

    /// The line `dump-flows` prints, at time `now`.
    pub fn line(&self, now: Timestamp) -> String {
        let used = if self.stats.used == Timestamp::NEVER {
            "never".to_string()
        } else {
            format!("{:.3}s", now.since(self.stats.used) as f64 / SEC as f64)
        };
        let m = format_match(&self.matched);
        format!(
            "{}, packets:{}, bytes:{}, used:{used}, offloaded:{}, actions:{}",
            if m.is_empty() { "any" } else { &m },
            self.stats.packets,
            self.stats.bytes,
            self.offloaded(),
            if self.actions.is_empty() {
                "drop".to_string()
            } else {
                self.actions.to_string()
            }
        )
    }
}

impl fmt::Display for FlowDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line(self.stats.used))
    }
}

/// What the software path did with one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwOutcome {
    /// The packet missed the cache and was translated.
    pub upcall: bool,
    /// What execution did.
    pub exec: ExecOutcome,
}

/// The software datapath, upcalls, offload and revalidation of one bridge.
pub struct Pipeline<O: FlowOffload> {
    /// Tables, ports and MAC table.
    pub bridge: Bridge,
    meters: MeterTable,
    cache: MegaflowCache,
    offload: O,
    cfg: PipelineConfig,
    flows: Vec<Option<FlowMeta>>,
    /// Per flow slot, the key of the packet whose upcall made the flow:
    /// revalidation re-translates it (the masked key could take other
    /// paths through the classifier and read bits the megaflow does not
    /// match). Apart from the metadata, which every pass walks.
    keys: Vec<FlowKey>,
    free: Vec<u32>,
    hw: HashMap<HwId, HwEntry>,
    /// Offloaded flows by recency of hardware hits (front = most recent).
    lru: LruCache<u32, ()>,
    pending: Vec<u32>,
    /// Meters the hardware refused, and why.
    hw_meter_errors: BTreeMap<MeterId, NotOffloaded>,
    key: FlowKey,
    poll_buf: Vec<(HwId, HwStats)>,
    stats: PipelineStats,
    flow_limit: usize,
    next_pass: Timestamp,
    rng: SplitMix64,
    /// Rules removed by timeouts, for whoever reports them.
    expired: Vec<RemovedRule>,
}

impl<O: FlowOffload> Pipeline<O> {
    pub fn new(bridge: Bridge, offload: O, cfg: PipelineConfig) -> Self {
        let mut cache_cfg = cfg.cache.clone();
        cache_cfg.flow_limit = cfg.revalidator.flow_limit;
        Pipeline {
            bridge,
            meters: MeterTable::new(),
            cache: MegaflowCache::new(cache_cfg),
            offload,
            flow_limit: cfg.revalidator.flow_limit,
            cfg,
            flows: Vec::new(),
            keys: Vec::new(),
            free: Vec::new(),
            hw: HashMap::new(),
            lru: LruCache::unbounded(),
            pending: Vec::new(),
            hw_meter_errors: BTreeMap::new(),
            key: FlowKey::ZERO,
            poll_buf: Vec::new(),
            stats: PipelineStats::default(),
            next_pass: Timestamp::NEVER,
            rng: SplitMix64::new(0x9e37_79b9_7f4a_7c15),
            expired: Vec::new(),
        }
    }

    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &PipelineStats {
        &self.stats
    }

    /// The offloader (to reach the backend, or to shut it down).
    pub fn offloader(&self) -> &O {
        &self.offload
    }

    pub fn offloader_mut(&mut self) -> &mut O {
        &mut self.offload
    }

    /// Takes the pipeline apart: every hardware rule removed first, so the
    /// offloader can be shut down with nothing of ours in the device.
    pub fn into_offloader(mut self) -> O {
        let ids: Vec<HwId> = self.flows.iter().flatten().filter_map(|m| m.hw).collect();
        for id in ids {
            self.offload.remove(id);
        }
        self.offload
    }

    /// Megaflows installed.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Megaflows in hardware.
    pub fn offloaded_len(&self) -> usize {
        self.lru.len()
    }

    /// The flow limit in force (the dynamic one).
    pub fn flow_limit(&self) -> usize {
        self.flow_limit
    }

    /// The megaflow cache (read-only: counters, subtables).
    pub fn cache(&self) -> &MegaflowCache {
        &self.cache
    }

    pub fn meters(&self) -> &MeterTable {
        &self.meters
    }

    /// Why the hardware refused a meter, if it did.
    pub fn meter_error(&self, id: MeterId) -> Option<&NotOffloaded> {
        self.hw_meter_errors.get(&id)
    }

    /// Rules removed by idle or hard timeouts since the last call.
    pub fn take_expired(&mut self) -> Vec<RemovedRule> {
        std::mem::take(&mut self.expired)
    }

    /// Adds or changes a meter, in software and in hardware. Offloaded
    /// flows that use it are moved to the new band (hitless replace).
    pub fn set_meter(&mut self, spec: MeterSpec) {
        self.meters.set(spec);
        match self.offload.set_meter(spec.id, Some(spec.band())) {
            Ok(()) => {
                self.hw_meter_errors.remove(&spec.id);
            }
            Err(e) => {
                self.hw_meter_errors.insert(spec.id, e);
            }
        }
        self.refresh_meter_users(spec.id, Timestamp::NEVER);
    }

    /// Deletes a meter; flows naming it drop from now on (in software at
    /// once, in hardware after their rule is refreshed here).
    pub fn remove_meter(&mut self, id: MeterId) -> Option<MeterSpec> {
        let spec = self.meters.remove(id)?;
        self.refresh_meter_users(id, Timestamp::NEVER);
        let _ = self.offload.set_meter(id, None);
        self.hw_meter_errors.remove(&id);
        Some(spec)
    }

    /// Re-installs the offloaded flows whose actions name meter `id`.
    fn refresh_meter_users(&mut self, id: MeterId, now: Timestamp) {
        let users: Vec<u32> = self
            .flows
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let m = m.as_ref()?;
                let acts = self.cache.actions(m.handle)?;
                let uses = acts.contains(&DpAction::Meter(id));
                uses.then_some(i as u32)
            })
            .collect();
        for idx in users {
            if self.meta(idx).is_some_and(|m| m.hw.is_some()) {
                self.rehome(idx, now);
            } else if let Some(m) = self.meta_mut(idx) {
                m.eligible = true;
            }
        }
    }

    // ------------------------------------------------------------------
    // Lifecycle.

    fn meta(&self, idx: u32) -> Option<&FlowMeta> {
        self.flows.get(idx as usize).and_then(Option::as_ref)
    }

    fn meta_mut(&mut self, idx: u32) -> Option<&mut FlowMeta> {
        self.flows.get_mut(idx as usize).and_then(Option::as_mut)
    }

    /// Moves a flow to `to` if [`FlowState::can_go`] allows it; counts the
    /// attempt otherwise. The one place states change.
    fn go(&mut self, idx: u32, to: FlowState) -> bool {
        let Some(m) = self.flows.get_mut(idx as usize).and_then(Option::as_mut) else {
            return false;
        };
        if m.state.go(to).is_ok() {
            true
        } else {
            debug_assert!(false, "illegal megaflow transition {:?} -> {to:?}", m.state);
            self.stats.illegal_transitions += 1;
            false
        }
    }

    fn new_meta(
        &mut self,
        handle: FlowHandle,
        key: &FlowKey,
        rules: Arc<[RuleRef]>,
        generations: Generations,
        uses_mac: bool,
        now: Timestamp,
    ) -> u32 {
        let meta = FlowMeta {
            handle,
            state: FlowState::New,
            hw: None,
            reason: None,
            eligible: true,
            created: now,
            window_start: now,
            window_packets: 0,
            retry_at: Timestamp::NEVER,
            credited: (0, 0),
            rules,
            generations,
            uses_mac,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(meta);
                self.keys[i as usize] = *key;
                i
            }
            None => {
                self.flows.push(Some(meta));
                self.keys.push(*key);
                (self.flows.len() - 1) as u32
            }
        };
        self.cache.set_offload(handle, u64::from(idx) + 1);
        self.go(idx, FlowState::Installed);
        idx
    }

    // ------------------------------------------------------------------
    // The software path.

    /// Runs one packet that hardware did not forward (received on
    /// `in_port`) through the software path: cache lookup, upcall on a
    /// miss, execution into `sink`; then offloads whatever became hot.
    pub fn process<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        // With upcalls allowed every packet is handled: never the default.
        self.run(now, in_port, pkt, sink, true).unwrap_or_default()
    }

    /// The fast path alone: like [`process`](Self::process) for a packet
    /// whose megaflow is cached; `None` on a miss, with nothing changed
    /// and nothing counted in [`PipelineStats`] (the cache's own lookup
    /// counters do count the probe). Live RX threads call this and queue the misses for the
    /// upcall handler thread, which calls `process` on them.
    pub fn process_cached<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Option<SwOutcome> {
        self.run(now, in_port, pkt, sink, false)
    }

    fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        may_upcall: bool,
    ) -> Option<SwOutcome> {
        let mut key = self.key;
        let ex = extract_into(in_port.0, pkt, &mut key);
        self.key = key;
        let len = pkt.len();
        let hit = self.cache.lookup(&key, len as u32, now);
        if hit.is_none() && !may_upcall {
            return None;
        }
        self.stats.packets += 1;
        let (actions, upcall) = match hit {
            Some(h) => {
                self.stats.hits += 1;
                self.touch_handle(h, now);
                (self.cache.actions(h).cloned().unwrap_or_default(), false)
            }
            None => (self.upcall(&key, len, now), true),
        };
        let mut layout = ex.layout;
        let mut sink = PipeSink {
            inner: sink,
            meters: &mut self.meters,
            now,
            rng: &mut self.rng,
        };
        let exec = execute(&actions, pkt, &mut layout, &mut sink);
        if !self.pending.is_empty() {
            self.flush_offloads(now);
        }
        Some(SwOutcome { upcall, exec })
    }

    /// Translates a missed key, installs its megaflow (counting the packet
    /// in it) and returns the actions.
    fn upcall(&mut self, key: &FlowKey, len: usize, now: Timestamp) -> Actions {
        self.stats.upcalls += 1;
        let t = self.bridge.translate(key, now);
        if !t.learned.is_empty() {
            self.bridge.learn(&t.learned, now);
        }
        let m = t.megaflow(key);
        let actions = t.datapath_actions();
        let one = FlowStats {
            packets: 1,
            bytes: len as u64,
            used: now,
            tcp_flags: 0,
        };
        match self.cache.insert(&m, actions.clone(), t.generations.tables) {
            Ok(h) => {
                self.stats.megaflows_created += 1;
                self.cache.add_stats(h, &one);
                let idx = self.new_meta(
                    h,
                    key,
                    t.rules.clone().into(),
                    t.generations,
                    t.uses_mac_table,
                    now,
                );
                self.touch(idx, now);
            }
            Err(InsertError::Duplicate(h)) => {
                // Another packet of the flow got there first.
                self.cache.add_stats(h, &one);
                self.touch_handle(h, now);
            }
            Err(_) => {
                self.stats.flow_limit_hits += 1;
                for r in t.rules.iter() {
                    self.bridge.tables.credit(*r, 1, len as u64, now);
                }
            }
        }
        actions
    }

    /// Installs a megaflow directly, outside any upcall (as
    /// `ovs-dpctl add-flow` does; also how benchmarks fill the cache). It
    /// is revalidated like any other: when the tables change, it is
    /// re-translated and kept only if the tables agree with it.
    pub fn install_flow(
        &mut self,
        m: &Match,
        actions: Actions,
        now: Timestamp,
    ) -> Result<FlowHandle, InsertError> {
        let gens = self.bridge.generations();
        let h = self.cache.insert(m, actions, gens.tables)?;
        self.stats.megaflows_created += 1;
        let idx = self.new_meta(h, m.key(), Arc::from(Vec::new()), gens, false, now);
        if self.cfg.offload.mode == OffloadMode::All && self.go(idx, FlowState::Offloading) {
            self.pending.push(idx);
        }
        Ok(h)
    }

    /// [`touch`](Self::touch) for the flow a cache handle names (its slot
    /// is kept, plus one, in the cache entry's offload word).
    fn touch_handle(&mut self, h: FlowHandle, now: Timestamp) {
        let slot = self.cache.get(h).map_or(0, |f| f.offload());
        if slot > 0 {
            self.touch((slot - 1) as u32, now);
        }
    }

    /// The match and actions a flow has in the cache now.
    fn cached(&self, handle: FlowHandle) -> Option<(Match, Actions)> {
        let f = self.cache.get(handle)?;
        Some((f.matched(), f.actions().clone()))
    }

    /// Counts a software hit towards the flow's hotness; queues it for
    /// offload when it is hot.
    fn touch(&mut self, idx: u32, now: Timestamp) {
        let policy = self.cfg.offload;
        let Some(m) = self.flows.get_mut(idx as usize).and_then(Option::as_mut) else {
            return;
        };
        let may = match m.state {
            FlowState::Installed => true,
            FlowState::SoftwareOnly => m.eligible && now >= m.retry_at,
            _ => false,
        };
        if !may {
            return;
        }
        let hot = match policy.mode {
            OffloadMode::Off => false,
            OffloadMode::All => true,
            OffloadMode::Hot { packets, window_ns } => {
                if now.since(m.window_start) > window_ns {
                    m.window_start = now;
                    m.window_packets = 0;
                }
                m.window_packets += 1;
                m.window_packets >= packets
            }
        };
        if hot && self.go(idx, FlowState::Offloading) {
            self.pending.push(idx);
        }
    }

    /// Offloads the queued hot flows now.
    pub fn flush_offloads(&mut self, now: Timestamp) {
        let pending = std::mem::take(&mut self.pending);
        for idx in pending {
            self.offload_one(idx, now);
        }
    }

    fn offload_one(&mut self, idx: u32, now: Timestamp) {
        let Some(m) = self.meta(idx) else {
            return;
        };
        if m.state != FlowState::Offloading {
            return;
        }
        let Some((matched, actions)) = self.cached(m.handle) else {
            return;
        };
        if let Some(budget) = self.cfg.offload.budget {
            if budget == 0 {
                self.fail(idx, NotOffloaded::Disabled, now);
                return;
            }
            while self.lru.len() >= budget {
                match self.lru.pop_lru() {
                    Some((victim, ())) => self.demote(victim, budget, now),
                    None => break,
                }
            }
        }
        match self.offload.install(&matched, &actions) {
            Ok(hw) => self.installed(idx, hw),
            Err(r) => self.fail(idx, r, now),
        }
    }

    fn installed(&mut self, idx: u32, hw: HwId) {
        let Some(m) = self.flows.get_mut(idx as usize).and_then(Option::as_mut) else {
            return;
        };
        m.hw = Some(hw);
        m.reason = None;
        let entry = HwEntry {
            idx,
            handle: m.handle,
            seen: HwStats::default(),
            rules: Arc::clone(&m.rules),
            retired: false,
        };
        self.hw.insert(hw, entry);
        self.lru.put(idx, ());
        self.stats.offloaded += 1;
        self.go(idx, FlowState::Offloaded);
    }

    fn fail(&mut self, idx: u32, r: NotOffloaded, now: Timestamp) {
        *self
            .stats
            .offload_failures
            .entry(r.to_string())
            .or_default() += 1;
        let retry = self.cfg.offload.retry_ns;
        if let Some(m) = self.meta_mut(idx) {
            m.eligible = r.is_transient();
            m.retry_at = Timestamp(now.0.saturating_add(retry));
            m.window_packets = 0;
            m.window_start = now;
            m.reason = Some(r);
        }
        self.go(idx, FlowState::SoftwareOnly);
    }

    /// Marks a hardware rule removed: its last counts arrive with the next
    /// poll.
    fn retire(&mut self, hw: HwId) {
        if let Some(e) = self.hw.get_mut(&hw) {
            e.retired = true;
        }
    }

    /// Takes an offloaded flow out of hardware (it stays in software).
    fn demote(&mut self, idx: u32, budget: usize, now: Timestamp) {
        let Some(hw) = self.meta_mut(idx).and_then(|m| m.hw.take()) else {
            return;
        };
        self.offload.remove(hw);
        self.retire(hw);
        self.stats.demoted += 1;
        self.fail(idx, NotOffloaded::Demoted { budget }, now);
    }

    /// Puts an offloaded flow's current actions into hardware again
    /// (hitless), or takes it out if the device refuses them now.
    fn rehome(&mut self, idx: u32, now: Timestamp) {
        let Some(m) = self.meta(idx) else {
            return;
        };
        let Some(old) = m.hw else {
            return;
        };
        let Some((matched, actions)) = self.cached(m.handle) else {
            return;
        };
        self.go(idx, FlowState::Offloading);
        match self.offload.replace(old, &matched, &actions) {
            Ok(new) => {
                self.retire(old);
                self.stats.offloaded += 1;
                self.lru.pop(&idx);
                self.installed(idx, new);
            }
            Err(r) => {
                self.offload.remove(old);
                self.retire(old);
                self.lru.pop(&idx);
                if let Some(m) = self.meta_mut(idx) {
                    m.hw = None;
                }
                self.fail(idx, r, now);
            }
        }
    }

    /// Removes a flow from hardware and software, crediting its last
    /// software counts to its rules.
    fn evict(&mut self, idx: u32, why: Eviction) {
        if !self.go(idx, FlowState::Evicting) {
            return;
        }
        let Some(m) = self.flows.get_mut(idx as usize).and_then(Option::take) else {
            return;
        };
        if let Some(hw) = m.hw {
            self.offload.remove(hw);
            self.retire(hw);
            self.lru.pop(&idx);
        }
        if let Some(gone) = self.cache.remove(m.handle) {
            let (dp, db) = (
                gone.stats.packets.saturating_sub(m.credited.0),
                gone.stats.bytes.saturating_sub(m.credited.1),
            );
            if dp > 0 || db > 0 {
                for r in m.rules.iter() {
                    self.bridge.tables.credit(*r, dp, db, gone.stats.used);
                }
            }
        }
        let mut state = m.state;
        if state.go(FlowState::Gone).is_err() {
            self.stats.illegal_transitions += 1;
        }
        self.free.push(idx);
        match why {
            Eviction::Idle => self.stats.aged += 1,
            Eviction::Limit => self.stats.evicted_limit += 1,
            Eviction::Unsound => self.stats.revalidated_deleted += 1,
            Eviction::Flush => self.stats.flushed += 1,
        }
    }

    /// Removes every megaflow that names `port` (as in_port or output),
    /// from hardware and software; other flows stay.
    pub fn flush_port(&mut self, port: PortNo) -> usize {
        let victims: Vec<u32> = self
            .flows
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let m = m.as_ref()?;
                let f = self.cache.get(m.handle)?;
                let matched = f.matched();
                let names = (matched.mask().is_exact(megaflow::Field::InPort)
                    && matched.key().in_port() == u64::from(port.0))
                    || f.actions().iter().any(|a| names_port(a, port));
                names.then_some(i as u32)
            })
            .collect();
        for &idx in &victims {
            self.evict(idx, Eviction::Flush);
        }
        victims.len()
    }

    /// Every megaflow, as `dump-flows` shows them.
    pub fn dump(&self) -> Vec<FlowDump> {
        self.flows
            .iter()
            .flatten()
            .filter_map(|m| {
                let f = self.cache.get(m.handle)?;
                Some(FlowDump {
                    matched: f.matched(),
                    actions: f.actions().clone(),
                    stats: f.stats(),
                    state: m.state,
                    hw: m.hw,
                    reason: m.reason.clone(),
                    created: m.created,
                })
            })
            .collect()
    }

    /// The dump entry of the megaflow that matches `key`, if any.
    pub fn find(&self, key: &FlowKey) -> Option<FlowDump> {
        self.dump().into_iter().find(|d| d.matched.matches(key))
    }

    /// Runs a revalidator pass if one is due at `now` (the first call
    /// schedules the first pass one interval later).
    pub fn tick(&mut self, now: Timestamp) -> Option<PassReport> {
        if self.next_pass == Timestamp::NEVER {
            self.next_pass = Timestamp(now.0.saturating_add(self.cfg.revalidator.interval_ns));
            return None;
        }
        if now < self.next_pass {
            return None;
        }
        let report = self.revalidate(now);
        self.next_pass = Timestamp(now.0.saturating_add(self.cfg.revalidator.interval_ns));
        Some(report)
    }
}

fn names_port(a: &DpAction, port: PortNo) -> bool {
    match a {
        DpAction::Output(p) => *p == port,
        DpAction::Sample { actions, .. } => actions.iter().any(|a| names_port(a, port)),
        _ => false,
    }
}

/// The caller's sink with the pipeline's meters and sampler in front.
struct PipeSink<'a, S> {
    inner: &'a mut S,
    meters: &'a mut MeterTable,
    now: Timestamp,
    rng: &'a mut SplitMix64,
}

impl<S: ActionSink> ActionSink for PipeSink<'_, S> {
    fn output(&mut self, port: PortNo, pkt: &[u8]) {
        self.inner.output(port, pkt);
    }

    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]) {
        self.inner.userspace(reason, pkt);
    }

    fn meter(&mut self, id: MeterId, len: usize) -> bool {
        self.meters.charge(id, len, self.now)
    }

    fn sample(&mut self, probability: u32) -> bool {
        self.rng.take(probability)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

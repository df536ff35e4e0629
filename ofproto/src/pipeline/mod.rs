//! The slow path: upcall handling, the offload policy and the revalidator
//! around the megaflows it owns, driving the datapaths through commands.
//!
//! By job, types of their own: `registry` which megaflows exist and
//! where (slots, indexes); `setup` flow setup by handler threads without
//! the slow path's lock, and its adoption; `sync` the BARRIER sync point
//! and the pass schedule; `offload::Scheduler` the hardware rules known,
//! the rule budget's order, the hot flows waiting and the counter queries;
//! `meters::MeterSync` the meter changes on their way to the device;
//! `fair` the per-port quotas and fair eviction; `recency` the offloaded
//! flows' recency; `datapaths` the datapaths the pipeline drives.
//! `Pipeline` composes them, and its modules hold what moves a megaflow
//! between them: this one the lifecycle and the locked upcall path;
//! `record` the record types and dumps; `offload` the offload jobs;
//! `meters` the meter changes applied; `revalidate` the pass in steps.
//!
//! ```text
//! datapath thread k: parse ─► its cache shard ─hit─► execute, count
//!                                └─miss─► upcall (handler thread, or inline)
//! upcall: translate through the bridge ─► megaflow (key & mask, actions)
//!   ─► a FlowId, Insert to the datapath(s) that need it ─► execute the packet
//! offload tick (the offload thread, or after each replay batch): fold the
//!   datapaths' stats deltas into the megaflows; a megaflow with N packets
//!   within T is hot ─► FlowOffload::install (the only caller of the device)
//! revalidate (every interval): the tick, then poll hardware counters, fold
//!   them, credit OpenFlow rules, expire rules (idle/hard timeouts), evict
//!   idle megaflows, re-translate flows whose inputs changed, hold the flow
//!   limit.
//! ```
//!
//! The slow path keeps every megaflow's match, actions and cumulative
//! counts (upcalled packets, datapath deltas, hardware deltas), so dumps,
//! crediting and aging never ask a datapath. A megaflow is named by a
//! [`FlowId`] that is never reused, so a datapath event that arrives after
//! the flow was evicted still finds its rules (`retired`).
//!
//! Every megaflow has a [`FlowState`]; its moves go through one function
//! ([`Pipeline::go`]) that checks [`FlowState::can_go`], so an illegal
//! transition is counted (and asserted on in tests), never silently done.
//!
//! Who calls what: replay and tests own a [`LocalDatapath`] and call
//! [`Pipeline::process`] (datapath, then upcall, then offload tick) per
//! packet; the live daemon's datapath threads own their datapaths, its
//! handlers call [`translate_miss`] and [`FlowSetup::upcall`] without the
//! slow path (which adopts what they staged: [`Pipeline::adopt`]), and its
//! revalidator/offload
//! thread [`Pipeline::take_offloads`] and [`Pipeline::finish_offloads`]
//! around the device calls ([`OffloadJob::run`], made without the slow
//! path) and a pass in steps ([`Pipeline::pass_step`]): no path that
//! receives packets calls the device. Time is the caller's: capture
//! timestamps in replay, the monotonic clock live.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use megaflow::actions::{execute, ActionSink, ExecOutcome};
use megaflow::key::hash_words;
use megaflow::meter::MeteredSink;
use megaflow::offload::{FlowOffload, FlowState, HwId};
use megaflow::TunnelKey;
use megaflow::{
    extract_into, Actions, CacheConfig, Datapath, DpAction, DpCommand, DpEvent, FlowId, FlowKey,
    FlowStats, Lookup, Match, PortNo, SplitMix64, Timestamp,
};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::bridge::{Bridge, Generations};
use crate::table::{RemovedRule, RuleRef};
use crate::xlate::Translation;

/// The bridge as the slow path and its handlers share it: translations
/// read it (one consistent version each: the read lock is held for the
/// whole translation), flow mods, port changes, MAC learning, rule
/// credits and expiry write it, one short change at a time.
pub type SharedBridge = Arc<RwLock<Bridge>>;

mod ct_hw;
mod datapaths;
mod fair;
mod meters;
mod offload;
mod recency;
mod record;
mod registry;
mod revalidate;
mod setup;
mod sync;
pub use sync::TARGETED_MAX;

pub use ct_hw::{CtHwConn, CtHwStats};
pub use datapaths::{Datapaths, DpSender, LocalDatapath, ThreadedDatapaths};
pub use offload::{OffloadDone, OffloadJob, SharedOffload};
pub use record::FlowDump;
use record::{FlowDef, FlowMeta, Retired};
pub use revalidate::{Pass, PassReport, PASS_BATCH};
pub use setup::{Backlog, FlowSetup, STAGED_MAX};

const SEC: u64 = 1_000_000_000;

/// Rules removed by timeouts kept for [`Pipeline::take_expired`]; older
/// ones are dropped and counted in `expired_unreported`.
pub const EXPIRED_KEPT: usize = 4096;

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
    /// The most megaflows of one in_port (0: no quota); see [`fair`].
    pub port_flow_limit: usize,
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
            port_flow_limit: 25_000,
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
    /// SELECT groups that name no method pick by `dp_hash`
    /// ([`GroupTable::set_dp_hash_default`](crate::group::GroupTable::set_dp_hash_default)).
    pub select_dp_hash: bool,
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
    /// Upcalls translated outside the slow path whose tables or ports
    /// changed before they were installed (translated again).
    pub retranslated: u64,
    /// Upcalls whose megaflow was not installed (flow limit).
    pub flow_limit_hits: u64,
    /// Upcalls whose megaflow was not installed: its in_port holds its
    /// quota of megaflows already.
    pub port_limit_hits: u64,
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
    /// Megaflows evicted, with the table full, to give a port under its
    /// fair share room (taken from the port holding the most).
    pub evicted_fair: u64,
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
    /// BARRIERs answered by re-translating only the megaflows the changes
    /// since the last sync can affect ([`Pipeline::sync_targeted`]).
    pub targeted_syncs: u64,
    /// Counter polls that failed (the pass went on without them).
    pub poll_errors: u64,
    /// Lifecycle moves [`FlowState::can_go`] refused (a bug if not 0).
    pub illegal_transitions: u64,
    /// OpenFlow rules removed by idle or hard timeouts.
    pub rules_expired: u64,
    /// Recirculation ids freed: no megaflow recirculated to them any more.
    pub recirc_ids_freed: u64,
    /// Of which: not taken by [`Pipeline::take_expired`] before
    /// [`EXPIRED_KEPT`] newer ones came (no one reports them).
    pub expired_unreported: u64,
}

/// Why a flow left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Eviction {
    Idle,
    Limit,
    Unsound,
    Flush,
    Fair,
}

/// Why [`Pipeline::install_flow`] refused a megaflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    #[error("an identical megaflow is installed already ({0:?})")]
    Duplicate(FlowId),
    #[error("flow limit of {limit} megaflows reached")]
    FlowLimit { limit: usize },
}

/// What the software path did with one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwOutcome {
    /// The packet missed the cache and was translated.
    pub upcall: bool,
    /// What execution did.
    pub exec: ExecOutcome,
}

/// The slow path of one bridge: upcalls, offload and revalidation over the
/// megaflows it owns, installed in the datapaths `D`.
pub struct Pipeline<O: FlowOffload, D: Datapaths = LocalDatapath> {
    /// Tables, ports and MAC table, shared with the threads that translate
    /// outside the slow path ([`bridge_handle`](Self::bridge_handle)).
    bridge: SharedBridge,
    /// The bridge again, the meters and the id counter, with the inboxes
    /// handlers stage new megaflows in ([`setup`]).
    shared: Arc<setup::Shared>,
    /// The records being adopted (kept for its allocation).
    adopting: Vec<setup::Staged>,
    dps: D,
    offload: O,
    cfg: PipelineConfig,
    /// The megaflows: which exist, and where ([`registry`]).
    reg: registry::Registry,
    retired: HashMap<FlowId, Retired>,
    events: Vec<DpEvent>,
    /// The offload scheduler's state ([`offload`]).
    sched: offload::Scheduler,
    stats: PipelineStats,
    flow_limit: usize,
    /// Megaflows per home port ([`fair`]).
    shares: fair::PortShares,
    /// The BARRIER sync point and the pass schedule ([`sync`]).
    sync: sync::SyncPoint,
    /// The underlay's generation at the last pass.
    underlay_seen: u64,
    /// The upcalled packets' sampler.
    rng: SplitMix64,
    /// Rules removed by timeouts, for whoever reports them.
    expired: Vec<RemovedRule>,
    /// Meter changes on their way to the device ([`meters`]).
    meter_sync: meters::MeterSync,
    /// A pass's last phase offloads what is queued (replay, tests); the
    /// live daemon leaves that to its offload thread, which runs the
    /// device calls outside the slow path's lock.
    offload_in_passes: bool,
    /// Connections in the device's conntrack table ([`ct_hw`]).
    ct_hw: ct_hw::CtHw,
}

impl<O: FlowOffload> Pipeline<O, LocalDatapath> {
    /// A slow path with one datapath on the caller's thread (replay, tests).
    pub fn new(bridge: Bridge, offload: O, cfg: PipelineConfig) -> Self {
        let dp = Datapath::new(cfg.cache.clone(), 0x5eed_da7a_9a7b_0001);
        Pipeline::with_datapaths(bridge, offload, cfg, LocalDatapath(dp))
    }

    /// Runs one packet that hardware did not forward (received on
    /// `in_port`) through the whole software path: the datapath, an upcall
    /// on a miss, then an offload tick (so a flow that turned hot goes to
    /// hardware before the next packet, as a busy daemon's offload thread
    /// would do soon after).
    pub fn process<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        self.process_tunneled(now, in_port, &TunnelKey::NONE, pkt, sink)
    }

    /// [`process`](Self::process) of a packet decapsulated on tunnel port
    /// `in_port` with `tun`.
    pub fn process_tunneled<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        self.process_from(now, in_port, tun, pkt, sink, None)
    }

    /// [`process_tunneled`](Self::process_tunneled), or, `from` given, of
    /// a packet the device handed over after an offloaded `ct()` stage: it
    /// continues there ([`Datapath::run`]).
    pub fn process_from<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        from: Option<megaflow::Resume>,
    ) -> SwOutcome {
        let lookup = self.dps.0.run(now, in_port, tun, pkt, sink, from);
        let mut out = self.after_lookup(now, in_port, lookup, pkt, sink);
        // Copies the packet forked and left waiting at a miss.
        while let Some(lookup) = self.dps.0.run_deferred(now, pkt, sink) {
            let more = self.after_lookup(now, in_port, lookup, pkt, sink);
            out.upcall |= more.upcall;
            out.exec.then(&more.exec);
        }
        self.offload_tick(now);
        out
    }

    /// A datapath answer: a hit as it is, a miss translated and run.
    fn after_lookup<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        lookup: Lookup,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        match lookup {
            // Counted in the pipeline's stats when the datapath reports it.
            Lookup::Hit(exec) => SwOutcome {
                upcall: false,
                exec,
            },
            Lookup::Miss => {
                // The datapath's key: a later stage's miss carries its
                // recirc_id and tracking state, and the packet is as the
                // earlier stages left it.
                let key = *self.dps.0.key();
                let mut scratch = FlowKey::ZERO;
                let layout = extract_into(in_port.0, pkt, &mut scratch).layout;
                let miss = Miss { key, layout };
                let t = translate_miss(&self.bridge, &miss.key, now);
                self.upcall_translated(now, &miss, &t, pkt, sink)
            }
        }
    }
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// A slow path over the datapaths `dps` (each told the flow limit).
    pub fn with_datapaths(mut bridge: Bridge, offload: O, cfg: PipelineConfig, mut dps: D) -> Self {
        bridge.groups_mut().set_dp_hash_default(cfg.select_dp_hash);
        let limit = cfg.revalidator.flow_limit;
        dps.send(None, &DpCommand::SetFlowLimit(limit));
        let bridge = Arc::new(RwLock::new(bridge));
        Pipeline {
            shared: Arc::new(setup::Shared::new(Arc::clone(&bridge))),
            adopting: Vec::new(),
            bridge,
            dps,
            offload,
            flow_limit: limit,
            shares: fair::PortShares::default(),
            cfg,
            reg: registry::Registry::default(),
            retired: HashMap::new(),
            events: Vec::new(),
            sched: offload::Scheduler::default(),
            stats: PipelineStats::default(),
            sync: sync::SyncPoint::default(),
            underlay_seen: 0,
            rng: SplitMix64::new(0x9e37_79b9_7f4a_7c15),
            expired: Vec::new(),
            offload_in_passes: true,
            ct_hw: ct_hw::CtHw::default(),
            meter_sync: meters::MeterSync::default(),
        }
    }

    /// The datapaths.
    pub fn datapaths(&self) -> &D {
        &self.dps
    }

    pub fn datapaths_mut(&mut self) -> &mut D {
        &mut self.dps
    }

    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    /// The bridge, read (held: no flow mod, port change or learning meanwhile).
    pub fn bridge(&self) -> RwLockReadGuard<'_, Bridge> {
        self.bridge.read_recursive()
    }

    /// The bridge, to change (held: no translation meanwhile).
    pub fn bridge_mut(&mut self) -> RwLockWriteGuard<'_, Bridge> {
        self.bridge.write()
    }

    /// The bridge for threads that translate outside the slow path
    /// ([`translate_miss`]).
    pub fn bridge_handle(&self) -> SharedBridge {
        Arc::clone(&self.bridge)
    }

    /// The tables' generation every megaflow agrees with: a flow mod of a
    /// later generation may still be shadowed by an older megaflow until
    /// the next pass. With no megaflow, none staged either, it is the
    /// current one: nothing can disagree (a handler stages only what it
    /// checked against the version in force), so a BARRIER need not wait
    /// for a pass.
    pub fn synced_tables(&self) -> u64 {
        let synced = self.sync.synced_tables();
        if self.reg.len() == 0 && self.shared.staged() == 0 {
            return synced.max(self.bridge.read().generations().tables);
        }
        synced
    }

    /// Asks the revalidator for a pass now ([`pass_wanted`](Self::pass_wanted)).
    pub fn request_pass(&mut self) {
        self.sync.want();
    }

    /// Whether a pass offloads what it queued (the default), or leaves it
    /// to [`take_offloads`](Self::take_offloads).
    pub fn set_offload_in_passes(&mut self, on: bool) {
        self.offload_in_passes = on;
    }

    /// Whether a pass was asked for before its time: a BARRIER waits for
    /// one, or the underlay (routes, neighbours) changed since the last,
    /// so tunnel flows' headers are rebuilt now.
    pub fn pass_wanted(&self) -> bool {
        self.sync.wanted()
            || self
                .bridge
                .read()
                .underlay()
                .is_some_and(|u| u.generation() != self.underlay_seen)
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
        let ids: Vec<HwId> = self.reg.iter().filter_map(|(_, m, _)| m.hw).collect();
        for id in ids {
            self.offload.remove(id);
        }
        self.offload
    }

    /// Megaflows installed.
    pub fn len(&self) -> usize {
        self.reg.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reg.len() == 0
    }

    /// Megaflows in hardware.
    pub fn offloaded_len(&self) -> usize {
        self.sched.lru.len()
    }

    /// The flow limit in force (the dynamic one).
    pub fn flow_limit(&self) -> usize {
        self.flow_limit
    }

    /// Rules removed by idle or hard timeouts since the last call.
    pub fn take_expired(&mut self) -> Vec<RemovedRule> {
        std::mem::take(&mut self.expired)
    }

    // ------------------------------------------------------------------
    // Lifecycle.

    fn meta(&self, idx: u32) -> Option<&FlowMeta> {
        self.reg.meta(idx)
    }

    fn meta_mut(&mut self, idx: u32) -> Option<&mut FlowMeta> {
        self.reg.meta_mut(idx)
    }

    /// Moves a flow to `to` if [`FlowState::can_go`] allows it; counts the
    /// attempt otherwise. The one place states change.
    fn go(&mut self, idx: u32, to: FlowState) -> bool {
        let Some(m) = self.reg.meta_mut(idx) else {
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

    /// Registers a new megaflow: a slot, an id, the datapaths told.
    #[allow(clippy::too_many_arguments)]
    fn new_flow(
        &mut self,
        matched: Match,
        actions: Actions,
        key: &FlowKey,
        rules: Arc<[RuleRef]>,
        generations: Generations,
        uses: crate::bridge::Uses,
        now: Timestamp,
    ) -> u32 {
        let id = self.shared.new_id();
        self.dps.send(
            home_of(&matched),
            &DpCommand::Insert {
                id,
                matched: Box::new(matched),
                actions: actions.clone(),
            },
        );
        self.register(id, matched, actions, key, rules, generations, uses, now)
    }

    /// Enters megaflow `id`, sent to its datapaths already, in the
    /// registry: a slot, the indexes, its port's share.
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        id: FlowId,
        matched: Match,
        actions: Actions,
        key: &FlowKey,
        rules: Arc<[RuleRef]>,
        generations: Generations,
        uses: crate::bridge::Uses,
        now: Timestamp,
    ) -> u32 {
        let home = home_of(&matched);
        let meta = FlowMeta {
            id,
            home,
            stats: FlowStats::default(),
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
            uses,
        };
        let idx = self.reg.insert(meta, &matched, actions, key);
        self.shares.add(home.unwrap_or(fair::NO_HOME), idx);
        self.go(idx, FlowState::Installed);
        idx
    }

    /// The live flow whose match is `m`.
    fn find_match(&self, m: &Match) -> Option<u32> {
        self.reg.find(m)
    }

    fn def(&self, idx: u32) -> Option<&FlowDef> {
        self.reg.def(idx)
    }

    // ------------------------------------------------------------------
    // Upcalls.

    /// Handles a packet a datapath missed: parses it (once: the key and
    /// the header layout execution needs), translates it, installs its
    /// megaflow (counting the packet in it) in the datapath(s) that need
    /// it, and executes it into `sink`. Nothing here calls the device:
    /// offloads wait for the offload tick.
    pub fn upcall<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        self.upcall_tunneled(now, in_port, &TunnelKey::NONE, pkt, sink)
    }

    /// [`upcall`](Self::upcall) of a packet that came in a tunnel.
    pub fn upcall_tunneled<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        let miss = Miss::parse_tunneled(in_port, tun, pkt);
        let t = translate_miss(&self.bridge, &miss.key, now);
        self.upcall_translated(now, &miss, &t, pkt, sink)
    }

    /// [`upcall`](Self::upcall) of a miss translated outside the slow path
    /// (a handler thread: [`Miss::parse`], then [`translate_miss`] on the
    /// [`bridge_handle`](Self::bridge_handle)): installs its megaflow and
    /// executes the packet into `sink`.
    pub fn upcall_translated<S: ActionSink>(
        &mut self,
        now: Timestamp,
        miss: &Miss,
        t: &Translation,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> SwOutcome {
        self.adopt();
        self.stats.packets += 1;
        self.stats.upcalls += 1;
        // Translated before a flow mod or a port change that came since:
        // again, now, so no megaflow of an older table version is
        // installed behind a pass that already swept its slot (a BARRIER
        // would be answered with it in place).
        let current = self.bridge.read().generations();
        let fresh;
        let t = if t.generations.tables == current.tables && t.generations.ports == current.ports {
            t
        } else {
            self.stats.retranslated += 1;
            fresh = translate_miss(&self.bridge, &miss.key, now);
            &fresh
        };
        let one = FlowStats {
            packets: 1,
            bytes: pkt.len() as u64,
            used: now,
            tcp_flags: 0,
        };
        let actions = self.install_translated(&miss.key, t, &one, now);
        let mut layout = miss.layout;
        let exec = self.run_actions(now, &miss.key, &actions, pkt, &mut layout, sink);
        SwOutcome { upcall: true, exec }
    }

    /// Executes `actions` (of the stage `key` is in) on `pkt` here, the
    /// slow path's meters, sampler and tracker in front of `sink`; a
    /// recirculation runs the next stage here too, installing its megaflow
    /// as an upcall would ([`run_stages`]).
    fn run_actions<S: ActionSink>(
        &mut self,
        now: Timestamp,
        key: &FlowKey,
        actions: &Actions,
        pkt: &mut Vec<u8>,
        layout: &mut megaflow::Layout,
        sink: &mut S,
    ) -> ExecOutcome {
        let meters = Arc::clone(&self.shared.meters);
        let meters = meters.read();
        let tracker = self.shared.tracker();
        let mut rng = self.rng;
        let one = FlowStats {
            packets: 1,
            bytes: pkt.len() as u64,
            used: now,
            tcp_flags: 0,
        };
        let exec = run_stages(
            (&*meters, &mut rng, tracker.as_deref(), now),
            *key,
            actions.clone(),
            pkt,
            layout,
            sink,
            |k| {
                let t = translate_miss(&self.bridge, k, now);
                Ok::<_, std::convert::Infallible>(self.install_translated(k, &t, &one, now))
            },
        );
        self.rng = rng;
        match exec {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }

    /// The tracker `ct()` runs against when the slow path executes a
    /// packet (give the datapaths the same one).
    pub fn set_tracker(&self, tracker: Arc<conntrack::Tracker>) {
        *self.shared.tracker.write() = Some(tracker);
    }

    /// The slow path's tracker.
    pub fn tracker(&self) -> Option<Arc<conntrack::Tracker>> {
        self.shared.tracker()
    }

    /// A PACKET_OUT: `actions` run on `pkt` as if received on `in_port`
    /// (an OpenFlow port number; CONTROLLER when from no port). Nothing is
    /// cached; what NORMAL learns is learned. The error says why the
    /// actions could not be translated.
    pub fn packet_out<S: ActionSink>(
        &mut self,
        now: Timestamp,
        (bridge, in_port): (crate::BridgeNo, u32),
        actions: &[crate::rule::OfAction],
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Result<ExecOutcome, crate::xlate::XlateError> {
        self.run_from_controller(now, in_port, pkt, sink, |br, key| {
            br.translate_actions_in(bridge, key, actions, now)
        })
    }

    /// A controller's NXT_RESUME: the packet it sent back goes on from
    /// `controller(pause)`'s continuation `id`, with the pipeline fields
    /// it gave (see [`crate::Bridge::translate_resume`]).
    pub fn resume<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: u32,
        id: u32,
        fields: &[(megaflow::Field, u128, u128)],
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Result<ExecOutcome, crate::xlate::XlateError> {
        self.run_from_controller(now, in_port, pkt, sink, |br, key| {
            br.translate_resume(key, id, fields, now)
        })
    }

    /// A packet a controller sent (PACKET_OUT, NXT_RESUME), received on
    /// `in_port`: `translate`d (nothing installed), what it learned
    /// learned, its actions run on it.
    fn run_from_controller<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: u32,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        translate: impl FnOnce(&Bridge, &FlowKey) -> crate::xlate::Translation,
    ) -> Result<ExecOutcome, crate::xlate::XlateError> {
        let mut key = FlowKey::ZERO;
        let ex = extract_into(in_port, pkt, &mut key);
        let t = translate(&self.bridge.read(), &key);
        if let Some(e) = t.error.clone() {
            return Err(e);
        }
        if !t.learned.is_empty() || !t.learned_flows.is_empty() {
            let mut br = self.bridge.write();
            br.learn(&t.learned, now);
            br.learn_flows(&t.learned_flows, now);
        }
        let actions = t.datapath_actions();
        let mut layout = ex.layout;
        Ok(self.run_actions(now, &key, &actions, pkt, &mut layout, sink))
    }

    /// Installs the megaflow of a missed key translated outside the slow
    /// path ([`translate_miss`]), counting the packet in it; returns the
    /// actions to run on the packet. A translation of an older version of
    /// the tables is installed like any other: the next pass brings it up
    /// to date (its generations say which version it read).
    fn install_translated(
        &mut self,
        key: &FlowKey,
        t: &Translation,
        one: &FlowStats,
        now: Timestamp,
    ) -> Actions {
        let m = t.megaflow(key);
        let actions = t.datapath_actions();
        if let Some(idx) = self.find_match(&m) {
            self.resend(idx, Some(PortNo(key.in_port() as u32)));
            self.count(idx, one, now);
            return self.def(idx).map_or(actions, |d| d.actions.clone());
        }
        if !self.make_room(&m) {
            credit_rules(&self.bridge, &t.rules, one.packets, one.bytes, one.used);
            return actions;
        }
        self.stats.megaflows_created += 1;
        let idx = self.new_flow(
            m,
            actions.clone(),
            key,
            t.rules.clone().into(),
            t.generations,
            t.uses(),
            now,
        );
        self.count(idx, one, now);
        actions
    }

    /// A miss of installed megaflow `idx` on `port`: the datapath that
    /// missed has not applied its insert yet, or refused it; the insert
    /// goes (again) to its home, or to `port`'s datapath.
    fn resend(&mut self, idx: u32, port: Option<PortNo>) {
        let (Some(f), Some(d)) = (self.meta(idx), self.def(idx)) else {
            return;
        };
        let to = f.home.or(port);
        let cmd = DpCommand::Insert {
            id: f.id,
            matched: Box::new(d.matched()),
            actions: d.actions.clone(),
        };
        self.dps.send(to, &cmd);
    }

    /// Whether a new megaflow `m` may be installed ([`fair`]), after
    /// taking the room of another port's stale flow if that is what its
    /// fair share needs. A refusal is counted.
    fn make_room(&mut self, m: &Match) -> bool {
        let home = home_of(m).unwrap_or(fair::NO_HOME);
        let port_limit = self.cfg.revalidator.port_flow_limit;
        let victim = match fair::room(
            &self.shares,
            home,
            self.reg.len(),
            self.flow_limit,
            port_limit,
        ) {
            fair::Room::Free => return true,
            fair::Room::PortLimit => {
                self.stats.port_limit_hits += 1;
                return false;
            }
            fair::Room::TakeFrom(big) => self.stalest_in_software(big),
            fair::Room::FlowLimit => None,
        };
        match victim {
            Some(v) => self.evict(v, Eviction::Fair),
            None => self.stats.flow_limit_hits += 1,
        }
        victim.is_some()
    }

    /// The least recently used of a few sampled megaflows of `port` that
    /// are not in hardware (the upcall path never calls the device).
    fn stalest_in_software(&mut self, port: PortNo) -> Option<u32> {
        let sample = self.shares.sample(port, &mut self.rng);
        sample
            .into_iter()
            .filter_map(|i| {
                let m = self.meta(i)?;
                (m.hw.is_none() && m.state != FlowState::Offloading)
                    .then_some((m.stats.used.max(m.created), i))
            })
            .min()
            .map(|(_, i)| i)
    }

    /// Megaflows per home port (in_port), most first.
    pub fn port_flows(&self) -> Vec<(PortNo, usize)> {
        let mut v: Vec<_> = self
            .shares
            .counts()
            .filter(|(p, _)| *p != fair::NO_HOME)
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Megaflows whose home (in_port) is `port`.
    pub fn port_flow_count(&self, port: PortNo) -> usize {
        self.shares.count(port)
    }

    /// Adds counts to a flow and its hotness.
    fn count(&mut self, idx: u32, st: &FlowStats, now: Timestamp) {
        if let Some(m) = self.meta_mut(idx) {
            m.stats.merge(st);
        }
        self.touch(idx, st.packets, now);
    }

    /// Installs a megaflow directly, outside any upcall (as
    /// `ovs-dpctl add-flow` does; also how benchmarks fill the switch). It
    /// is revalidated like any other: when the tables change, it is
    /// re-translated and kept only if the tables agree with it.
    pub fn install_flow(
        &mut self,
        m: &Match,
        actions: Actions,
        now: Timestamp,
    ) -> Result<FlowId, InstallError> {
        self.adopt();
        if let Some(idx) = self.find_match(m) {
            let id = self.meta(idx).map_or(FlowId(0), |f| f.id);
            return Err(InstallError::Duplicate(id));
        }
        if self.reg.len() >= self.flow_limit {
            return Err(InstallError::FlowLimit {
                limit: self.flow_limit,
            });
        }
        let gens = self.bridge.read().generations();
        self.stats.megaflows_created += 1;
        let idx = self.new_flow(
            *m,
            actions,
            m.key(),
            Arc::from(Vec::new()),
            gens,
            crate::bridge::Uses::default(),
            now,
        );
        if self.cfg.offload.mode == OffloadMode::All && self.go(idx, FlowState::Offloading) {
            self.sched.pending.push_back(idx);
        }
        Ok(self.meta(idx).map_or(FlowId(0), |f| f.id))
    }

    /// The match and actions a flow has now.
    fn cached(&self, idx: u32) -> Option<(Match, Actions)> {
        let d = self.def(idx)?;
        Some((d.matched(), d.actions.clone()))
    }

    // ------------------------------------------------------------------
    // The offload tick.

    /// What the offload thread does often (and every pass first): folds
    /// the datapaths' events into the megaflows (counts, hotness; the last
    /// counts of evicted flows into their rules), then offloads the flows
    /// that turned hot. The only place, with [`revalidate`](Self::revalidate),
    /// that calls the device.
    pub fn offload_tick(&mut self, now: Timestamp) {
        self.offload_tick_some(now, usize::MAX);
    }

    /// Folds the datapaths' events.
    pub fn fold_datapaths(&mut self, now: Timestamp) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        self.dps.collect(&mut events);
        // After the collect: a handler stages a record before it sends
        // its insert, so every event collected is of a record adopted.
        self.adopt();
        for e in &events {
            if let DpEvent::Stats { delta, .. } | DpEvent::Removed { delta, .. } = e {
                // Datapath hits: the software path's packets besides upcalls.
                self.stats.packets += delta.packets;
                self.stats.hits += delta.packets;
            }
            match e {
                DpEvent::Stats { id, delta } => {
                    if let Some(idx) = self.reg.by_id(id) {
                        self.count(idx, delta, now);
                    } else {
                        self.credit_retired(*id, delta, false);
                    }
                }
                DpEvent::Removed { id, delta } => self.credit_retired(*id, delta, true),
                // The flow stays in the slow path; that datapath's packets
                // keep missing and their upcalls send it again.
                DpEvent::Refused { .. } => {}
            }
        }
        self.events = events;
    }

    /// Counts of an evicted flow, from a datapath: to its OpenFlow rules.
    fn credit_retired(&mut self, id: FlowId, delta: &FlowStats, last: bool) {
        let Some(r) = self.retired.get_mut(&id) else {
            return;
        };
        credit_rules(
            &self.bridge,
            &r.rules,
            delta.packets,
            delta.bytes,
            delta.used,
        );
        if last {
            r.pending = r.pending.saturating_sub(1);
            if r.pending == 0 {
                self.retired.remove(&id);
            }
        }
    }

    /// Counts `packets` software hits towards the flow's hotness; queues it
    /// for offload when it is hot.
    fn touch(&mut self, idx: u32, packets: u64, now: Timestamp) {
        let policy = self.cfg.offload;
        let Some(m) = self.reg.meta_mut(idx) else {
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
        let hits = packets;
        let hot = match policy.mode {
            OffloadMode::Off => false,
            OffloadMode::All => true,
            OffloadMode::Hot { packets, window_ns } => {
                if now.since(m.window_start) > window_ns {
                    m.window_start = now;
                    m.window_packets = 0;
                }
                m.window_packets = m
                    .window_packets
                    .saturating_add(u32::try_from(hits).unwrap_or(u32::MAX));
                m.window_packets >= packets
            }
        };
        if hot && self.go(idx, FlowState::Offloading) {
            self.sched.pending.push_back(idx);
        }
    }

    /// Removes a flow from hardware and software, crediting its counts
    /// not credited yet to its rules (and, as they arrive, what the
    /// datapaths counted since their last report).
    fn evict(&mut self, idx: u32, why: Eviction) {
        if !self.go(idx, FlowState::Evicting) {
            return;
        }
        let Some(m) = self.reg.remove(idx) else {
            return;
        };
        if let Some(hw) = m.hw {
            self.offload.remove(hw);
            self.retire(hw);
            self.sched.lru.remove(idx);
        }
        let (dp, db) = (
            m.stats.packets.saturating_sub(m.credited.0),
            m.stats.bytes.saturating_sub(m.credited.1),
        );
        credit_rules(&self.bridge, &m.rules, dp, db, m.stats.used);
        self.shares.remove(m.home.unwrap_or(fair::NO_HOME), idx);
        let sent = self.dps.send(m.home, &DpCommand::Remove { id: m.id });
        self.retired.insert(
            m.id,
            Retired {
                rules: Arc::clone(&m.rules),
                pending: sent,
            },
        );
        let mut state = m.state;
        if state.go(FlowState::Gone).is_err() {
            self.stats.illegal_transitions += 1;
        }
        match why {
            Eviction::Idle => self.stats.aged += 1,
            Eviction::Limit => self.stats.evicted_limit += 1,
            Eviction::Unsound => self.stats.revalidated_deleted += 1,
            Eviction::Flush => self.stats.flushed += 1,
            Eviction::Fair => self.stats.evicted_fair += 1,
        }
    }

    /// Removes every megaflow that names `port` (as in_port or output),
    /// from hardware and software; other flows stay.
    pub fn flush_port(&mut self, port: PortNo) -> usize {
        self.adopt();
        let victims: Vec<u32> = self
            .reg
            .iter()
            .filter_map(|(i, _, d)| {
                let names = (d.mask.is_exact(megaflow::Field::InPort)
                    && d.key.unpack().in_port() == u64::from(port.0))
                    || d.actions.iter().any(|a| names_port(a, port));
                names.then_some(i)
            })
            .collect();
        for &idx in &victims {
            self.evict(idx, Eviction::Flush);
        }
        victims.len()
    }

    /// Every megaflow, as `dump-flows` shows them.
    pub fn dump(&self) -> Vec<FlowDump> {
        self.reg
            .iter()
            .map(|(_, m, d)| FlowDump {
                matched: d.matched(),
                actions: d.actions.clone(),
                stats: m.stats,
                state: m.state,
                hw: m.hw,
                reason: m.reason.clone(),
                created: m.created,
            })
            .collect()
    }

    /// How many megaflows are in each lifecycle state (no copy of any).
    pub fn state_counts(&self) -> Vec<(FlowState, usize)> {
        let mut counts: Vec<(FlowState, usize)> = Vec::new();
        for (_, m, _) in self.reg.iter() {
            match counts.iter_mut().find(|(s, _)| *s == m.state) {
                Some((_, n)) => *n += 1,
                None => counts.push((m.state, 1)),
            }
        }
        counts
    }

    /// The dump entry of the megaflow that matches `key`, if any.
    pub fn find(&self, key: &FlowKey) -> Option<FlowDump> {
        self.dump().into_iter().find(|d| d.matched.matches(key))
    }

    /// Runs a revalidator pass if one is due at `now` (the first call
    /// schedules the first pass one interval later).
    pub fn tick(&mut self, now: Timestamp) -> Option<PassReport> {
        if !self.sync.due(now, self.cfg.revalidator.interval_ns) {
            return None;
        }
        Some(self.revalidate(now))
    }
}

/// Executes `actions` of the stage `key` is in on `pkt` (the meters,
/// sampler and tracker of `ctx` in front of `sink`), then each stage the
/// packet recirculates to, at most `MAX_RECIRC_DEPTH` more (then it is
/// dropped, as the datapath does): `next` translates a stage's key and
/// installs its megaflow, giving its actions. The slow path's and the
/// handlers' way to run an upcalled packet through all its stages.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_stages<S: ActionSink, M: megaflow::meter::Meters, E>(
    ctx: (
        &M,
        &mut megaflow::SplitMix64,
        Option<&conntrack::Tracker>,
        Timestamp,
    ),
    mut key: FlowKey,
    mut actions: Actions,
    pkt: &mut Vec<u8>,
    layout: &mut megaflow::Layout,
    sink: &mut S,
    mut next: impl FnMut(&FlowKey) -> Result<Actions, E>,
) -> Result<ExecOutcome, E> {
    use megaflow::actions::{DropReason, MAX_RECIRC_DEPTH};
    let (meters, rng, tracker, now) = ctx;
    let mut total = ExecOutcome::default();
    // Forked copies waiting for their stages, in the order forked: key,
    // packet, layout, depth.
    let mut deferred = std::collections::VecDeque::new();
    let mut depth = 0;
    loop {
        let mut ms = MeteredSink {
            inner: &mut *sink,
            meters,
            rng: &mut *rng,
            now,
            ct: tracker,
            ct_meta: megaflow::key::read_ct_meta(&key),
            forks: Vec::new(),
        };
        let mut out = execute(&actions, pkt, layout, &mut ms);
        let (ct_meta, forks) = (ms.ct_meta, ms.forks);
        // Copies past the recirculation depth are dropped, as the packet
        // itself would be.
        for f in forks.into_iter().filter(|_| depth < MAX_RECIRC_DEPTH) {
            let (k, l) = f.key(&key);
            deferred.push_back((k, f.pkt, l, depth + 1));
        }
        if out.recirc.is_some() && depth == MAX_RECIRC_DEPTH {
            out.dropped = Some(DropReason::RecircDepth);
            out.recirc = None;
        }
        total.then(&out);
        if out.recirc.is_some() {
            depth += 1;
            *layout = megaflow::datapath::next_stage(&mut key, pkt, &out, &ct_meta, *layout);
        } else {
            // This path is done: the next forked copy's, if any.
            let Some((k, p, l, d)) = deferred.pop_front() else {
                return Ok(total);
            };
            (key, *pkt, *layout, depth) = (k, p, l, d);
        }
        actions = next(&key)?;
    }
}

/// A missed packet, parsed once: its key and the header layout execution
/// needs.
#[derive(Clone, Copy, Debug)]
pub struct Miss {
    pub key: FlowKey,
    pub layout: megaflow::Layout,
}

impl Miss {
    /// Parses `pkt`, received on `in_port`.
    pub fn parse(in_port: PortNo, pkt: &[u8]) -> Miss {
        Miss::parse_tunneled(in_port, &TunnelKey::NONE, pkt)
    }

    /// Parses `pkt`, decapsulated on tunnel port `in_port` with `tun`.
    pub fn parse_tunneled(in_port: PortNo, tun: &TunnelKey, pkt: &[u8]) -> Miss {
        let mut key = FlowKey::ZERO;
        let ex = extract_into(in_port.0, pkt, &mut key);
        if tun.is_set() {
            tun.write(&mut key);
        }
        Miss {
            key,
            layout: ex.layout,
        }
    }
}

/// Credits `packets` and `bytes` used at `used` to OpenFlow rules `rules`
/// (the bridge's write lock taken only when there is something to credit).
fn credit_rules(
    bridge: &RwLock<Bridge>,
    rules: &[RuleRef],
    packets: u64,
    bytes: u64,
    used: Timestamp,
) {
    if rules.is_empty() || (packets == 0 && bytes == 0) {
        return;
    }
    let mut br = bridge.write();
    for r in rules {
        br.credit(*r, packets, bytes, used);
    }
}

/// Translates a missed key through `bridge` (one consistent version: the
/// read lock is held throughout), then applies what NORMAL learned. What
/// a handler does before it needs the slow path
/// ([`Pipeline::install_translated`]).
pub fn translate_miss(bridge: &RwLock<Bridge>, key: &FlowKey, now: Timestamp) -> Translation {
    let t = bridge.read().translate(key, now);
    if !t.learned.is_empty() || !t.learned_flows.is_empty() {
        let mut br = bridge.write();
        br.learn(&t.learned, now);
        br.learn_flows(&t.learned_flows, now);
    }
    t
}

fn names_port(a: &DpAction, port: PortNo) -> bool {
    match a {
        DpAction::Output(p) => *p == port,
        DpAction::Sample { actions, .. } => actions.iter().any(|a| names_port(a, port)),
        _ => false,
    }
}

/// The in_port a megaflow is exact on: its datapath, and whose share of
/// the table it counts in.
fn home_of(m: &Match) -> Option<PortNo> {
    m.mask()
        .is_exact(megaflow::Field::InPort)
        .then(|| PortNo(m.key().in_port() as u32))
}

/// The hash that indexes megaflows by match.
fn match_hash(m: &Match) -> u64 {
    hash_words(m.key().words()) ^ hash_words(m.mask().words()).rotate_left(17)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "tests_ct.rs"]
mod tests_ct;

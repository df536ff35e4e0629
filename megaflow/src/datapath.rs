//! One datapath thread's share of the switch: its megaflow cache shard,
//! its view of the meters and its sampler.
//!
//! Open vSwitch's dpif-netdev is the model: each PMD thread owns a
//! classifier, and the slow path (handlers, revalidators) changes it only
//! through commands the thread applies between two batches. Here:
//!
//! - [`Datapath::process`] runs one packet: parse once into the key, look
//!   it up, and on a hit execute the megaflow's actions (meters and
//!   samplers answered here), counting the hit in the flow. A miss returns
//!   [`Lookup::Miss`] with the key kept ([`Datapath::key`]) for the caller
//!   to hand to a handler. Nothing here translates, allocates per packet,
//!   waits, or calls the device.
//! - [`DpCommand`]s from the slow path insert, modify and remove megaflows
//!   (named by the slow path's [`FlowId`], the same in every datapath that
//!   holds the flow) and set meters; [`Datapath::apply`] carries one out.
//! - [`Datapath::report`] hands the slow path what it needs to account and
//!   age flows: per flow hit since the last report, the packets, bytes and
//!   last use since then ([`DpEvent::Stats`]); per flow removed, its last
//!   unreported counts ([`DpEvent::Removed`]); inserts refused. Counts are
//!   deltas, each reported once, so none is lost or counted twice across
//!   reports, modifications and removal.
//!
//! Which flows were hit is tracked without a scan: a flow's first hit after
//! a report sets a bit in its cache entry's slow-path word and queues the
//! flow; a report looks only at those.
//!
//! Threads: a `Datapath` is owned by one thread (`Send`, not shared). A
//! [`link`] pairs it with channels for a slow path on other threads:
//! [`DatapathEnd::serve`] applies the commands waiting and sends the events,
//! between batches; a single-threaded caller (replay) calls
//! [`Datapath::apply`] and [`Datapath::report`] directly.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use crate::actions::{
    execute_into, ActionSink, Actions, DropReason, ExecOutcome, MAX_RECIRC_DEPTH,
};
use crate::cache::{CacheConfig, FlowHandle, FlowStats, InsertError, MegaflowCache};
use crate::extract::{extract_into, Layout};
use crate::key::HEADER_END;
use crate::key::{FlowKey, Match};
use crate::meter::{Meter, MeteredSink};
use crate::rand::SplitMix64;
use crate::shard::ShardedMap;
use crate::tunnel::TunnelKey;
use crate::types::{MeterId, PortNo, Timestamp};

/// The slow path's name for a megaflow, the same in every datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u64);

/// What the slow path asks of a datapath.
#[derive(Clone, Debug)]
pub enum DpCommand {
    /// Install a megaflow (boxed: a match is 384 bytes).
    Insert {
        id: FlowId,
        matched: Box<Match>,
        actions: Actions,
    },
    /// New actions for a megaflow (its counts go on).
    Modify { id: FlowId, actions: Actions },
    /// Remove a megaflow; its last counts come back as [`DpEvent::Removed`]
    /// (zero counts for a flow this datapath does not hold, so the slow
    /// path hears back once from every datapath it sent the removal to).
    Remove { id: FlowId },
    /// Add or replace a meter.
    SetMeter(Arc<Meter>),
    /// Delete a meter: flows naming it drop (as OpenFlow says).
    DeleteMeter(MeterId),
    /// The most megaflows this datapath holds.
    SetFlowLimit(usize),
}

/// What a datapath tells the slow path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DpEvent {
    /// Counts since the last report of a flow that was hit.
    Stats { id: FlowId, delta: FlowStats },
    /// The flow is gone from this datapath; its counts not reported yet.
    Removed { id: FlowId, delta: FlowStats },
    /// An insert was refused.
    Refused { id: FlowId, error: InsertError },
}

/// The answer of [`Datapath::process`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A megaflow matched and its actions ran.
    Hit(ExecOutcome),
    /// No megaflow: the packet is the slow path's ([`Datapath::key`]).
    Miss,
}

/// Counters of one datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatapathStats {
    pub packets: u64,
    pub hits: u64,
    pub misses: u64,
    /// Commands applied.
    pub commands: u64,
    /// Packets sent on to a next stage (`recirc`), one per stage.
    pub recirculations: u64,
    /// Packets dropped for recirculating more than `MAX_RECIRC_DEPTH` times.
    pub recirc_too_deep: u64,
    /// Copies forked to a later stage.
    pub forks: u64,
    /// Forked copies dropped: more than a packet may have waiting, or
    /// left behind by a caller that did not run them after a miss
    /// ([`Datapath::run_deferred`]).
    pub forks_lost: u64,
}

/// One copy of each distinct action list a datapath's flows run. The
/// megaflows of one table mostly run the same few lists (every
/// first stage of a stateful table `ct(zone=7),recirc(R)`, every flow of
/// a port `output:2`); sharing one copy keeps it in the CPU's cache
/// instead of one list per flow, a dependent miss on every hit when
/// flows are many. The copy is the datapath's own, not the one the slow
/// path sent (which the slow path and other datapaths hold too): held
/// by no flow here, it is held once, by this set, and a sweep lets it go.
#[derive(Default)]
struct Interned {
    lists: std::collections::HashSet<Actions>,
    /// The set's size at which the next sweep runs.
    sweep_at: usize,
}

impl Interned {
    /// The copy of `actions` held, made now if there is none. `flows`:
    /// the flows the datapath holds. When the set reaches twice that
    /// (and at least twice what the last sweep left), lists no flow runs
    /// any more are let go: a sweep costs its size, and comes after as
    /// many new lists again, so each insert pays a constant share.
    fn share(&mut self, actions: Actions, flows: usize) -> Actions {
        if let Some(a) = self.lists.get(&actions) {
            return a.clone();
        }
        if self.lists.len() >= self.sweep_at.max(2 * flows + 64) {
            self.lists.retain(|a| a.holders() > 1);
            self.sweep_at = 2 * self.lists.len();
        }
        let own = Actions::new(actions.as_slice().to_vec());
        self.lists.insert(own.clone());
        own
    }
}

/// What a datapath counts, its own and its cache's: what `eswitchctl
/// dp-stats` shows per datapath thread (Open vSwitch's
/// `dpif-netdev/pmd-stats-show`) and the metrics export.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatapathCounters {
    pub dp: DatapathStats,
    pub cache: crate::cache::CacheCounters,
}

impl DatapathCounters {
    /// The counts since `base` (an earlier snapshot of the same
    /// datapath; a counter below its base, which a datapath never makes,
    /// reads 0).
    pub fn since(&self, base: &DatapathCounters) -> DatapathCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let (s, b) = (&self.dp, &base.dp);
        let (c, cb) = (&self.cache, &base.cache);
        DatapathCounters {
            dp: DatapathStats {
                packets: d(s.packets, b.packets),
                hits: d(s.hits, b.hits),
                misses: d(s.misses, b.misses),
                commands: d(s.commands, b.commands),
                recirculations: d(s.recirculations, b.recirculations),
                recirc_too_deep: d(s.recirc_too_deep, b.recirc_too_deep),
                forks: d(s.forks, b.forks),
                forks_lost: d(s.forks_lost, b.forks_lost),
            },
            cache: crate::cache::CacheCounters {
                emc_hits: d(c.emc_hits, cb.emc_hits),
                hinted_hits: d(c.hinted_hits, cb.hinted_hits),
                tss_hits: d(c.tss_hits, cb.tss_hits),
                misses: d(c.misses, cb.misses),
                subtable_probes: d(c.subtable_probes, cb.subtable_probes),
            },
        }
    }
}

/// The bit of a cache entry's slow-path word that says "hit since the last
/// report"; the flow id is the word shifted right by one.
const DIRTY: u64 = 1;

#[derive(Clone, Copy, Debug)]
struct Slot {
    handle: FlowHandle,
    /// The cumulative counts already reported.
    reported: FlowStats,
}

/// Turns `key`, the key of stage `out` ran at, into the key of the
/// packet's next stage (`recirc(id)`): the packet as modified, parsed
/// again; its metadata (port, registers, tunnel) kept, its tracking state
/// `ct`, the new id. Returns the packet's header layout. What the datapath
/// does between stages, and the slow path when it runs them itself.
/// `out` is the stage's outcome (its `recirc` the id): a packet no action
/// rewrote keeps its header words and `layout` (no second parse, no copy).
pub fn next_stage(
    key: &mut FlowKey,
    pkt: &[u8],
    out: &ExecOutcome,
    ct: &conntrack::CtMeta,
    layout: Layout,
) -> Layout {
    let layout = if out.rewritten {
        let mut fresh = FlowKey::ZERO;
        let layout = extract_into(key.in_port() as u32, pkt, &mut fresh).layout;
        let (w, s) = (key.words_mut(), fresh.words());
        w[8..HEADER_END].copy_from_slice(&s[8..HEADER_END]);
        layout
    } else {
        layout
    };
    key.set_recirc_id(u64::from(out.recirc.unwrap_or(0)));
    if let Some(h) = out.dp_hash {
        key.set_dp_hash(u64::from(h));
    }
    crate::key::write_ct_meta(key, ct);
    layout
}

/// Most copies one action list forks (a [`DpAction::Recirc`] before its
/// end); more are skipped.
///
/// [`DpAction::Recirc`]: crate::actions::DpAction::Recirc
pub const MAX_FORKS: usize = 4;

/// Most forked copies of one packet waiting for their stages at once;
/// more are dropped ([`DatapathStats::forks_lost`]).
const MAX_DEFERRED: usize = 16;

/// A copy of a packet forked to a later stage: Open vSwitch's
/// `ct(table=T)` with more actions after it sends the tracked copy to
/// table T and runs the rest on the packet itself.
#[derive(Clone, Debug)]
pub struct Fork {
    /// The stage the copy goes to.
    pub recirc: u32,
    /// The packet as it was at the fork.
    pub pkt: Vec<u8>,
    pub layout: Layout,
    /// Its tracking state at the fork.
    pub ct: conntrack::CtMeta,
}

impl Fork {
    /// The copy's key and layout at its stage, from the key of the stage
    /// that forked it.
    pub fn key(&self, forked_at: &FlowKey) -> (FlowKey, Layout) {
        let mut key = *forked_at;
        let out = ExecOutcome {
            recirc: Some(self.recirc),
            rewritten: true,
            ..ExecOutcome::default()
        };
        let layout = next_stage(&mut key, &self.pkt, &out, &self.ct, self.layout);
        (key, layout)
    }
}

/// A forked copy waiting for its stage.
#[derive(Debug)]
struct Deferred {
    pkt: Vec<u8>,
    key: FlowKey,
    layout: Layout,
    ct: conntrack::CtMeta,
    /// Stages run before it.
    depth: usize,
}

/// Where a packet the device handed over after an offloaded `ct()` stage
/// continues (the restore tag's word for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// It missed the device's conntrack table, untouched: track it with
    /// `spec`, then look it up again with `recirc`.
    AtCt {
        spec: conntrack::CtSpec,
        recirc: u32,
    },
    /// It passed the conntrack table of `zone` (rewritten there when
    /// `translated`) and missed the next stage's table: its tracking
    /// state is the connection's, its next lookup with `recirc`.
    PostCt {
        zone: u16,
        translated: bool,
        recirc: u32,
    },
}

/// One thread's datapath.
pub struct Datapath {
    cache: MegaflowCache,
    /// By id (ids are the slow path's sequence numbers: a fast hash).
    flows: ShardedMap<FlowId, Slot>,
    /// Flows hit since the last report (each once).
    dirty: Vec<FlowId>,
    /// Removals and refusals waiting for the next report.
    events: Vec<DpEvent>,
    meters: HashMap<MeterId, Arc<Meter>>,
    rng: SplitMix64,
    key: FlowKey,
    stats: DatapathStats,
    /// The connection tracker `ct()` runs against (shared by all threads).
    tracker: Option<Arc<conntrack::Tracker>>,
    /// The current packet's tracking state, carried from stage to stage.
    ct_meta: conntrack::CtMeta,
    /// Copies the current stage forked (kept for their buffers).
    forked: Vec<Fork>,
    /// The current packet's forked copies waiting for their stages, in
    /// the order forked (as the kernel datapath defers them).
    deferred: std::collections::VecDeque<Deferred>,
    /// Successor hints: the flow a recirculated packet's next stage last
    /// hit, by [`successor_key`] (direct-mapped). After `ct()`, every
    /// packet of the connections in one state goes on to the same
    /// megaflow: the hint, checked as an exact-match cache entry is,
    /// spares that stage its search.
    succ: Box<[(u64, Option<FlowHandle>)]>,
    /// The current stage's key into `succ` (0: none, a first stage).
    succ_key: u64,
    /// The flow the last stage hit.
    last_hit: Option<FlowHandle>,
    /// One copy of each distinct action list its flows run
    /// ([`Interned`]).
    interned: Interned,
}

/// Entries of [`Datapath::succ`]: a power of two, small enough to stay in
/// the first-level cache (the stages after `ct()` are few megaflows).
const SUCC_ENTRIES: usize = 256;

/// What decides a recirculated packet's next megaflow besides the packet
/// itself: the flow it came from, the next stage's id, its tracking state
/// and `dp_hash`. Never 0.
#[inline]
fn successor_key(
    from: FlowHandle,
    recirc: u32,
    ct: &conntrack::CtMeta,
    dp_hash: Option<u32>,
) -> u64 {
    let a =
        from.word() ^ (u64::from(recirc) << 32 | u64::from(ct.state) << 16 | u64::from(ct.zone));
    let b = u64::from(ct.mark) << 32 ^ u64::from(dp_hash.unwrap_or(0)) ^ ct.label as u64;
    let p = u128::from(a ^ 0x9e37_79b9_7f4a_7c15) * u128::from(b ^ 0xbf58_476d_1ce4_e5b9);
    ((p as u64) ^ ((p >> 64) as u64)) | 1
}

impl Datapath {
    /// An empty datapath; `seed` starts its sampler.
    pub fn new(cfg: CacheConfig, seed: u64) -> Self {
        Datapath {
            cache: MegaflowCache::new(cfg),
            flows: ShardedMap::new(),
            dirty: Vec::new(),
            events: Vec::new(),
            meters: HashMap::new(),
            rng: SplitMix64::new(seed),
            key: FlowKey::ZERO,
            stats: DatapathStats::default(),
            tracker: None,
            ct_meta: conntrack::CtMeta::default(),
            forked: Vec::new(),
            deferred: std::collections::VecDeque::new(),
            succ: vec![(0, None); SUCC_ENTRIES].into_boxed_slice(),
            succ_key: 0,
            last_hit: None,
            interned: Interned::default(),
        }
    }

    /// The tracker `ct()` actions run against; without one they are
    /// skipped.
    pub fn set_tracker(&mut self, tracker: Arc<conntrack::Tracker>) {
        self.tracker = Some(tracker);
    }

    /// Runs one received packet: on a hit its actions run (outputs and
    /// userspace copies go to `sink`, meters and samplers are answered
    /// here); on a miss nothing is done and [`key`](Self::key) holds the
    /// packet's key.
    pub fn process<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Lookup {
        self.process_tunneled(now, in_port, &TunnelKey::NONE, pkt, sink)
    }

    /// [`process`](Self::process) for a packet that came in a tunnel
    /// (decapsulated on `in_port`, the tunnel port): `tun` goes into its
    /// key.
    pub fn process_tunneled<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Lookup {
        self.run(now, in_port, tun, pkt, sink, None)
    }

    /// [`process_tunneled`](Self::process_tunneled), or, `from` given, for
    /// a packet the device handed over part way: it went through an
    /// offloaded `ct()` stage and continues there. On a miss,
    /// [`key`](Self::key) holds the key of the stage that missed.
    pub fn run<S: ActionSink>(
        &mut self,
        now: Timestamp,
        in_port: PortNo,
        tun: &TunnelKey,
        pkt: &mut Vec<u8>,
        sink: &mut S,
        from: Option<Resume>,
    ) -> Lookup {
        let layout = self.begin(in_port, tun, pkt);
        let first = match from {
            None => None,
            Some(from) => match self.resume(from, pkt, &layout, now) {
                Some(out) => Some(out),
                None => return Lookup::Hit(Self::ct_gone()),
            },
        };
        self.stages(now, pkt, layout, first, 0, sink)
    }

    /// Runs the next copy the last packet forked and left waiting when one
    /// of its stages missed (the caller handles that miss first): `pkt`
    /// becomes the copy, and the answer is as [`run`](Self::run)'s. `None`
    /// when none waits. A caller that handles misses calls it until
    /// `None`; what is left is dropped at the next packet.
    pub fn run_deferred<S: ActionSink>(
        &mut self,
        now: Timestamp,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Option<Lookup> {
        let d = self.deferred.pop_front()?;
        let (layout, depth) = self.take_up(d, pkt);
        Some(self.stages(now, pkt, layout, None, depth, sink))
    }

    /// Makes a waiting copy the current packet.
    fn take_up(&mut self, d: Deferred, pkt: &mut Vec<u8>) -> (Layout, usize) {
        *pkt = d.pkt;
        self.key = d.key;
        self.ct_meta = d.ct;
        self.stats.recirculations += 1;
        self.succ_key = 0;
        (d.layout, d.depth)
    }

    /// The offloaded `ct()` stage's outcome as software finishes it: the
    /// packet tracked (a CT-table miss) or given its connection's state (a
    /// later-stage miss), then recirculated. `None`: no connection (or no
    /// tracker) to give it a state.
    fn resume(
        &mut self,
        from: Resume,
        pkt: &mut [u8],
        layout: &Layout,
        now: Timestamp,
    ) -> Option<ExecOutcome> {
        let t = self.tracker.as_deref()?;
        let (l3, eth_type) = crate::actions::ct_l3(pkt, layout);
        let ms = now.as_millis();
        let (recirc, rewritten) = match from {
            Resume::AtCt { spec, recirc } => {
                // The CT table missed: the connection is tracked here, as
                // the stage's `ct()` would have, and offered to the device
                // once it is established.
                t.execute(pkt, l3, eth_type, &spec, &mut self.ct_meta, ms);
                let m = &self.ct_meta;
                let est = conntrack::state::TRK | conntrack::state::EST;
                let not = conntrack::state::NEW | conntrack::state::INV | conntrack::state::REL;
                if m.state & est == est && m.state & not == 0 && matches!(m.orig.proto, 6 | 17) {
                    let reply = m.state & conntrack::state::RPL != 0;
                    t.offer(m.zone, &m.orig, reply, spec.nat.is_some(), ms);
                }
                (recirc, spec.nat.is_some())
            }
            Resume::PostCt {
                zone,
                translated,
                recirc,
            } => {
                self.ct_meta = t.restore_meta(pkt, l3, eth_type, zone, translated, ms)?;
                (recirc, false)
            }
        };
        Some(ExecOutcome {
            recirc: Some(recirc),
            rewritten,
            ..ExecOutcome::default()
        })
    }

    fn ct_gone() -> ExecOutcome {
        ExecOutcome {
            dropped: Some(DropReason::CtGone),
            ..ExecOutcome::default()
        }
    }

    /// A packet's key (its tunnel's too) and header layout.
    fn begin(&mut self, in_port: PortNo, tun: &TunnelKey, pkt: &[u8]) -> Layout {
        let ex = extract_into(in_port.0, pkt, &mut self.key);
        if tun.is_set() {
            tun.write(&mut self.key);
        }
        self.stats.packets += 1;
        self.ct_meta = conntrack::CtMeta::default();
        self.succ_key = 0;
        self.last_hit = None;
        if !self.deferred.is_empty() {
            self.stats.forks_lost += self.deferred.len() as u64;
            self.deferred.clear();
        }
        ex.layout
    }

    /// The packet's stages from the current key (`depth` stages run
    /// before it), or after `first` (a stage run already, that
    /// recirculates); then each copy its stages forked.
    fn stages<S: ActionSink>(
        &mut self,
        now: Timestamp,
        pkt: &mut Vec<u8>,
        mut layout: Layout,
        first: Option<ExecOutcome>,
        mut depth: usize,
        sink: &mut S,
    ) -> Lookup {
        let mut total = ExecOutcome::default();
        let mut out = ExecOutcome::default();
        let mut pending = first;
        loop {
            match pending.take() {
                Some(first) => out = first,
                None => {
                    if !self.stage(now, pkt, &mut layout, sink, &mut out) {
                        return Lookup::Miss;
                    }
                }
            }
            total.then(&out);
            if out.forks > 0 {
                self.defer_forks(depth + 1);
            }
            if out.recirc.is_some() {
                if depth < MAX_RECIRC_DEPTH {
                    depth += 1;
                    self.stats.recirculations += 1;
                    self.succ_key = match (self.last_hit.take(), out.recirc) {
                        (Some(h), Some(r)) => successor_key(h, r, &self.ct_meta, out.dp_hash),
                        _ => 0,
                    };
                    layout = next_stage(&mut self.key, pkt, &out, &self.ct_meta, layout);
                    continue;
                }
                self.stats.recirc_too_deep += 1;
                total.dropped = Some(DropReason::RecircDepth);
                total.recirc = None;
            }
            // This path is done: the next forked copy's, if any.
            let Some(d) = self.deferred.pop_front() else {
                return Lookup::Hit(total);
            };
            (layout, depth) = self.take_up(d, pkt);
        }
    }

    /// The copies the stage just run forked, queued for their stages
    /// (`depth` stages behind them; past the recirculation depth they are
    /// dropped as too deep, as the packet itself would be).
    #[cold]
    fn defer_forks(&mut self, depth: usize) {
        for f in self.forked.drain(..) {
            self.stats.forks += 1;
            if depth > MAX_RECIRC_DEPTH {
                self.stats.recirc_too_deep += 1;
                continue;
            }
            if self.deferred.len() >= MAX_DEFERRED {
                self.stats.forks_lost += 1;
                continue;
            }
            let (key, layout) = f.key(&self.key);
            self.deferred.push_back(Deferred {
                pkt: f.pkt,
                key,
                layout,
                ct: f.ct,
                depth,
            });
        }
    }

    /// One stage: the lookup of the current key and, on a hit (true), its
    /// actions, their outcome in `out`.
    fn stage<S: ActionSink>(
        &mut self,
        now: Timestamp,
        pkt: &mut Vec<u8>,
        layout: &mut Layout,
        sink: &mut S,
        out: &mut ExecOutcome,
    ) -> bool {
        let bytes = pkt.len() as u32;
        let slot = self.succ_key as usize & (SUCC_ENTRIES - 1);
        let hinted = match self.succ[slot] {
            (k, Some(h)) if k == self.succ_key && k != 0 => {
                self.cache.lookup_hinted(h, &self.key, bytes, now)
            }
            _ => None,
        };
        let h = match hinted {
            Some(h) => h,
            None => {
                let Some(h) = self.cache.lookup(&self.key, bytes, now) else {
                    self.stats.misses += 1;
                    return false;
                };
                if self.succ_key != 0 {
                    self.succ[slot] = (self.succ_key, Some(h));
                }
                h
            }
        };
        self.last_hit = Some(h);
        self.stats.hits += 1;
        // One resolution of the handle for a flow already marked hit since
        // the last report (the common case); the first hit marks it.
        let marked = match self.cache.get(h) {
            Some(f) if f.offload() & DIRTY != 0 => Some(f.actions()),
            Some(f) => {
                let word = f.offload();
                self.cache.set_offload(h, word | DIRTY);
                self.dirty.push(FlowId(word >> 1));
                None
            }
            None => None,
        };
        let Some(actions) = marked.or_else(|| self.cache.actions(h)) else {
            // Not reached: a handle the lookup just returned is live.
            return false;
        };
        let mut sink = MeteredSink {
            inner: sink,
            meters: &self.meters,
            rng: &mut self.rng,
            now,
            ct: self.tracker.as_deref(),
            ct_meta: self.ct_meta,
            forks: std::mem::take(&mut self.forked),
        };
        execute_into(actions, pkt, layout, &mut sink, out);
        self.ct_meta = sink.ct_meta;
        self.forked = sink.forks;
        true
    }

    /// The key of the last packet processed.
    pub fn key(&self) -> &FlowKey {
        &self.key
    }

    /// Carries out one command of the slow path.
    pub fn apply(&mut self, cmd: DpCommand) {
        self.stats.commands += 1;
        match cmd {
            DpCommand::Insert {
                id,
                matched,
                actions,
            } => {
                if let Some(old) = self.flows.get(&id) {
                    let error = InsertError::Duplicate(old.handle);
                    self.events.push(DpEvent::Refused { id, error });
                    return;
                }
                let actions = self.interned.share(actions, self.flows.len());
                match self.cache.insert(&matched, actions, 0) {
                    Ok(handle) => {
                        self.cache.set_offload(handle, id.0 << 1);
                        let reported = FlowStats::default();
                        self.flows.insert(id, Slot { handle, reported });
                    }
                    Err(error) => self.events.push(DpEvent::Refused { id, error }),
                }
            }
            DpCommand::Modify { id, actions } => {
                if let Some(s) = self.flows.get(&id) {
                    let actions = self.interned.share(actions, self.flows.len());
                    self.cache.modify(s.handle, actions, 0);
                }
            }
            DpCommand::Remove { id } => {
                let delta = self
                    .flows
                    .remove(&id)
                    .and_then(|s| {
                        let gone = self.cache.remove(s.handle)?;
                        Some(since(&gone.stats, &s.reported))
                    })
                    .unwrap_or_default();
                self.events.push(DpEvent::Removed { id, delta });
            }
            DpCommand::SetMeter(m) => {
                self.meters.insert(m.id(), m);
            }
            DpCommand::DeleteMeter(id) => {
                self.meters.remove(&id);
            }
            DpCommand::SetFlowLimit(n) => self.cache.set_flow_limit(n),
        }
    }

    /// Appends to `out` the removals and refusals since the last report,
    /// then the counts of every flow hit since then.
    pub fn report(&mut self, out: &mut Vec<DpEvent>) {
        out.append(&mut self.events);
        for id in self.dirty.drain(..) {
            let Some(s) = self.flows.get_mut(&id) else {
                continue; // removed since: its counts went with the removal
            };
            let Some(st) = self.cache.get(s.handle).map(|f| f.stats()) else {
                continue;
            };
            let delta = since(&st, &s.reported);
            s.reported = st;
            self.cache.set_offload(s.handle, id.0 << 1);
            if delta.packets > 0 || delta.bytes > 0 {
                out.push(DpEvent::Stats { id, delta });
            }
        }
    }

    /// Its megaflows' matches and actions (tests, diagnostics).
    pub fn megaflows(&self) -> impl Iterator<Item = (crate::Match, &Actions)> + '_ {
        self.cache.iter().map(|f| (f.matched(), f.actions()))
    }

    /// Megaflows held.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn stats(&self) -> DatapathStats {
        self.stats
    }

    /// Its counters and its cache's.
    pub fn counters(&self) -> DatapathCounters {
        DatapathCounters {
            dp: self.stats,
            cache: self.cache.counters(),
        }
    }

    /// The cache, read-only (counters, subtables, a flow's match).
    pub fn cache(&self) -> &MegaflowCache {
        &self.cache
    }

    /// Flow `id`'s match and actions, as held here.
    pub fn flow(&self, id: FlowId) -> Option<(Match, Actions)> {
        let s = self.flows.get(&id)?;
        let f = self.cache.get(s.handle)?;
        Some((f.matched(), f.actions().clone()))
    }
}

/// `now - before`, with `now`'s last use and flags.
fn since(now: &FlowStats, before: &FlowStats) -> FlowStats {
    FlowStats {
        packets: now.packets.saturating_sub(before.packets),
        bytes: now.bytes.saturating_sub(before.bytes),
        used: now.used,
        tcp_flags: now.tcp_flags,
    }
}

/// The slow path's end of a datapath on another thread.
#[derive(Debug)]
pub struct DatapathLink {
    cmds: Sender<DpCommand>,
    events: Receiver<DpEvent>,
    counters: Arc<Mutex<DatapathCounters>>,
}

/// The datapath thread's end of a [`DatapathLink`].
#[derive(Debug)]
pub struct DatapathEnd {
    cmds: Receiver<DpCommand>,
    events: Sender<DpEvent>,
    /// When the last report went out: reports go at most every
    /// [`REPORT_EVERY`], so a busy flow costs the slow path one event per
    /// interval, not one per batch.
    last_report: Option<std::time::Instant>,
    /// Where each report leaves the datapath's counters for readers
    /// ([`DatapathLink::counters`]).
    counters: Arc<Mutex<DatapathCounters>>,
}

/// How often a datapath thread reports its counts, at most.
pub const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// A pair of ends: commands one way, events the other. Both channels are
/// unbounded: the slow path's flow limit bounds the commands, and a report
/// holds at most one event per flow.
pub fn link() -> (DatapathLink, DatapathEnd) {
    let (ctx, crx) = mpsc::channel();
    let (etx, erx) = mpsc::channel();
    let counters = Arc::default();
    (
        DatapathLink {
            cmds: ctx,
            events: erx,
            counters: Arc::clone(&counters),
        },
        DatapathEnd {
            cmds: crx,
            events: etx,
            last_report: None,
            counters,
        },
    )
}

impl DatapathLink {
    /// Another sender of commands (for a second slow-path thread).
    pub fn commands(&self) -> Sender<DpCommand> {
        self.cmds.clone()
    }

    /// Sends a command; false when the datapath thread has stopped.
    pub fn send(&self, cmd: DpCommand) -> bool {
        self.cmds.send(cmd).is_ok()
    }

    /// Appends the events the datapath has sent, without waiting.
    pub fn collect(&self, out: &mut Vec<DpEvent>) {
        out.extend(self.events.try_iter());
    }

    /// The datapath's counters as of its last report (at most
    /// [`REPORT_EVERY`] old while its thread runs).
    pub fn counters(&self) -> DatapathCounters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl DatapathEnd {
    /// Applies up to `max` waiting commands, then reports if the last
    /// report is [`REPORT_EVERY`] old. Call between batches. Returns the
    /// commands applied; a slow path that went away is not an error (its
    /// events are dropped).
    pub fn serve(&mut self, dp: &mut Datapath, max: usize, buf: &mut Vec<DpEvent>) -> usize {
        let n = self.apply(dp, max);
        let now = std::time::Instant::now();
        if self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= REPORT_EVERY)
        {
            self.last_report = Some(now);
            self.report(dp, buf);
        }
        n
    }

    /// Applies every waiting command and reports now (a thread about to
    /// stop, or a caller that needs the counts current).
    pub fn flush(&mut self, dp: &mut Datapath, buf: &mut Vec<DpEvent>) {
        self.apply(dp, usize::MAX);
        self.last_report = Some(std::time::Instant::now());
        self.report(dp, buf);
    }

    fn apply(&self, dp: &mut Datapath, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(cmd) = self.cmds.try_recv() else {
                break;
            };
            dp.apply(cmd);
            n += 1;
        }
        n
    }

    fn report(&self, dp: &mut Datapath, buf: &mut Vec<DpEvent>) {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner()) = dp.counters();
        buf.clear();
        dp.report(buf);
        for e in buf.drain(..) {
            if self.events.send(e).is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
#[path = "tests/datapath.rs"]
mod tests;

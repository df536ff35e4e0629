//! One revalidator pass.
//!
//! In order: expire OpenFlow rules (idle/hard timeouts) and MAC entries;
//! one counter poll (a bulk query per counter bulk) folded into the
//! megaflows (a hardware delta also marks the flow used now, so a busy
//! offloaded flow is never aged for lack of software hits); then per
//! megaflow: credit its new packets to the OpenFlow rules it came from,
//! evict it when idle past max-idle (100 ms when over the flow limit, as
//! Open vSwitch does), re-translate it when an input it depends on changed
//! (keep, modify in place with a hitless hardware replace, or delete when
//! the new translation needs a narrower megaflow); then offload what is
//! queued and adjust the dynamic flow limit by how long the pass took.

use std::time::Instant;

use megaflow::offload::{FlowOffload, FlowState, HwId, HwStats};
use megaflow::{DpCommand, FlowStats, Timestamp};

use super::{Datapaths, Eviction, OffloadMode, Pipeline, PipelineStats};
use crate::bridge::{Generations, SyncMark};

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Megaflows looked at.
    pub flows: usize,
    /// Hardware counters reported by the poll.
    pub counters: usize,
    pub aged: usize,
    pub evicted_limit: usize,
    pub modified: usize,
    pub deleted: usize,
    pub rules_expired: usize,
    /// Wall-clock duration of the pass, in microseconds.
    pub micros: u64,
    /// The flow limit after the pass.
    pub flow_limit: usize,
}

/// Records a pass's sweep looks at per [`Pipeline::pass_step`] in the
/// live daemon: a handler waiting for the slow path waits for at most
/// one such step (about 0.1 ms; a handler installs its 64 upcalls in
/// about 0.25 ms, so flow setup keeps most of its rate while passes run:
/// `slowpath.setup_during_pass_ratio`). A hand-off with no one waiting
/// costs an atomic, so a pass in small steps costs little more than one
/// at once (`slowpath.pass_batched_vs_whole`). 1,024 made handlers wait
/// 1 ms a batch and set up a third of their idle rate.
pub const PASS_BATCH: usize = 64;

/// An offload costs the device what sweeping this many records costs: a
/// step's budget buys that many times fewer offloads.
const OFFLOAD_COST: usize = 8;

/// Where a pass is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Polling the hardware counters a part at a time (the next part from
    /// this position on), each part folded in batches before the next is
    /// queried.
    Poll(usize),
    /// Looking at each megaflow record, from this slot on.
    Sweep(u32),
    /// Offloading what the sweep queued.
    Offload,
    Done,
}

/// A revalidator pass in progress: [`Pipeline::pass_begin`] starts it,
/// [`Pipeline::pass_step`] advances it a batch at a time (the caller may
/// let go of the slow path between two steps: handlers install megaflows
/// and flow mods change the tables meanwhile), [`Pipeline::pass_end`]
/// closes it. [`Pipeline::revalidate`] runs all three at once.
///
/// Between two steps anything may change; a step relies only on what
/// holds whatever happened meanwhile: a slot it reaches holds a live
/// record or none; a record installed after the pass began carries the
/// tables' generation of its own translation (at least the pass's, so
/// it is re-translated only if the tables moved again); the generation
/// the pass reports as synced is the one it began with; a rule removed
/// after the query of its counter and before the fold of that report is
/// told apart by the query's number (its last counts come with a later
/// query: `Pipeline::retired_at`).
#[derive(Debug)]
pub struct Pass {
    started: Instant,
    before: PipelineStats,
    report: PassReport,
    current: Generations,
    /// Where the tables stood when it began (what it syncs).
    mark: SyncMark,
    over_limit: bool,
    max_idle: u64,
    polled: bool,
    retry_all: bool,
    /// The number of the last counter query (`Pipeline::retired_at`), how
    /// much of what it returned is folded, and whether it was the last.
    query: u64,
    folded: usize,
    polled_all: bool,
    phase: Phase,
}

impl Pass {
    /// Whether every phase has run.
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// Runs one revalidator pass at `now`, all at once.
    pub fn revalidate(&mut self, now: Timestamp) -> PassReport {
        let mut pass = self.pass_begin(now);
        while !self.pass_step(&mut pass, now, usize::MAX) {}
        self.pass_end(pass, now)
    }

    /// Starts a pass: the datapaths' events folded, OpenFlow rules and
    /// MAC entries expired. The steps poll the hardware counters, sweep
    /// the records and offload.
    pub fn pass_begin(&mut self, now: Timestamp) -> Pass {
        let started = Instant::now();
        let before = self.stats.clone();
        let mut report = PassReport::default();
        self.fold_datapaths(now);

        let mut br = self.bridge.write();
        let expired = br.expire(now);
        report.rules_expired = expired.len();
        self.stats.rules_expired += expired.len() as u64;
        self.expired.extend(expired);
        // Nobody may be taking them (no controller asked for FLOW_REMOVED):
        // keep the newest, count the others.
        if let Some(extra) = self.expired.len().checked_sub(super::EXPIRED_KEPT) {
            self.expired.drain(..extra);
            self.stats.expired_unreported += extra as u64;
        }
        self.underlay_seen = br.underlay().map_or(0, |u| u.generation());
        let current = br.generations();
        let mark = br.sync_mark();
        drop(br);

        self.sync.begun();
        let over_limit = self.reg.len() > self.flow_limit;
        let max_idle = if over_limit {
            100_000_000
        } else {
            self.cfg.revalidator.max_idle_ns
        };
        Pass {
            started,
            before,
            report,
            current,
            mark,
            over_limit,
            max_idle,
            polled: true,
            retry_all: self.cfg.offload.mode == OffloadMode::All,
            query: 0,
            folded: 0,
            polled_all: false,
            phase: Phase::Poll(0),
        }
    }

    /// Advances `pass` by at most `budget` counters polled and folded or
    /// records looked at (an offload counts as [`OFFLOAD_COST`] of them);
    /// returns whether it is done.
    pub fn pass_step(&mut self, pass: &mut Pass, now: Timestamp, budget: usize) -> bool {
        // What handlers staged since the last step, before the sweep
        // passes its slot.
        self.adopt();
        let mut left = budget.max(1);
        while left > 0 {
            match pass.phase {
                Phase::Poll(from) => {
                    // Fold what the last query returned, a budget at a
                    // time; query the next part once it is all folded.
                    if pass.folded < self.sched.poll_buf.len() {
                        let to = pass
                            .folded
                            .saturating_add(left)
                            .min(self.sched.poll_buf.len());
                        let buf = std::mem::take(&mut self.sched.poll_buf);
                        self.fold_hardware(&buf[pass.folded..to], pass.query, now);
                        self.sched.poll_buf = buf;
                        left -= to - pass.folded;
                        pass.folded = to;
                        continue;
                    }
                    if pass.polled_all {
                        pass.phase = Phase::Sweep(0);
                        continue;
                    }
                    let mut next = from;
                    self.sched.poll_buf.clear();
                    self.sched.queries += 1;
                    pass.query = self.sched.queries;
                    pass.folded = 0;
                    pass.polled_all =
                        match self
                            .offload
                            .poll_some(&mut next, left, &mut self.sched.poll_buf)
                        {
                            Ok(done) => done,
                            Err(_) => {
                                // Without the hardware's counts, an offloaded
                                // flow's idleness is unknown: it is not aged
                                // this pass.
                                self.stats.poll_errors += 1;
                                pass.polled = false;
                                true
                            }
                        };
                    pass.report.counters += self.sched.poll_buf.len();
                    // A query costs its part's fold, which follows.
                    left -= 1;
                    pass.phase = Phase::Poll(next);
                }
                Phase::Sweep(from) => {
                    let slots = self.reg.slots();
                    let to = from
                        .saturating_add(u32::try_from(left).unwrap_or(u32::MAX))
                        .min(slots);
                    for idx in from..to {
                        self.sweep_one(pass, idx, now);
                    }
                    left -= (to - from) as usize;
                    pass.phase = if to >= self.reg.slots() {
                        // The last counts of the flows evicted above (a
                        // datapath on this thread has answered already;
                        // threads answer by the next tick).
                        self.fold_datapaths(now);
                        Phase::Offload
                    } else {
                        Phase::Sweep(to)
                    };
                }
                Phase::Offload if !self.offload_in_passes => pass.phase = Phase::Done,
                Phase::Offload => {
                    let done = self.flush_offloads_some(now, (left / OFFLOAD_COST).max(1));
                    left = 0;
                    if done {
                        pass.phase = Phase::Done;
                    }
                }
                Phase::Done => break,
            }
        }
        pass.done()
    }

    /// Closes a pass (every step run first): the tables' generation it
    /// began with is synced, the dynamic flow limit follows how long the
    /// pass took (from its start, steps and pauses alike).
    pub fn pass_end(&mut self, mut pass: Pass, now: Timestamp) -> PassReport {
        while !self.pass_step(&mut pass, now, usize::MAX) {}
        // Staged records of an older version than the one synced are
        // translated again as they are adopted.
        self.adopt();
        self.sync.reached(pass.mark);
        self.ct_revalidate(now);
        self.free_recirc_ids();

        let elapsed = pass.started.elapsed();
        self.adjust_flow_limit(elapsed.as_millis() as u64);
        self.stats.passes += 1;
        let (before, mut report) = (&pass.before, pass.report);
        report.aged = (self.stats.aged - before.aged) as usize;
        report.evicted_limit = (self.stats.evicted_limit - before.evicted_limit) as usize;
        report.modified = (self.stats.revalidated_modified - before.revalidated_modified) as usize;
        report.deleted = (self.stats.revalidated_deleted - before.revalidated_deleted) as usize;
        report.micros = elapsed.as_micros() as u64;
        report.flow_limit = self.flow_limit;
        report
    }

    /// One record of the sweep: credit its new packets to its rules, then
    /// evict it when idle, re-translate it when an input changed, or queue
    /// it for another offload try.
    fn sweep_one(&mut self, pass: &mut Pass, idx: u32, now: Timestamp) {
        let Some(m) = self.meta(idx) else {
            return;
        };
        pass.report.flows += 1;
        let current = pass.current;
        let st = m.stats;
        let (dp, db) = (
            st.packets.saturating_sub(m.credited.0),
            st.bytes.saturating_sub(m.credited.1),
        );
        let last = st.used.max(m.created);
        let in_hw = m.hw.is_some();
        let stale = m.generations.stale(m.uses, &current);
        let retry =
            pass.retry_all && m.state == FlowState::SoftwareOnly && m.eligible && now >= m.retry_at;
        if dp > 0 || db > 0 {
            super::credit_rules(&self.bridge, &m.rules, dp, db, st.used);
            if let Some(m) = self.meta_mut(idx) {
                m.credited = (st.packets, st.bytes);
            }
        }
        if now.since(last) >= pass.max_idle && (pass.polled || !in_hw) {
            let why = if pass.over_limit {
                Eviction::Limit
            } else {
                Eviction::Idle
            };
            self.evict(idx, why);
        } else if stale {
            self.revalidate_flow(idx, now);
        } else if retry && self.go(idx, FlowState::Offloading) {
            self.sched.pending.push_back(idx);
        }
    }

    /// Folds polled counters: each rule's new packets into its megaflow
    /// (or, for a rule whose flow is gone, straight into the OpenFlow
    /// rules).
    fn fold_hardware(&mut self, counters: &[(HwId, HwStats)], query: u64, now: Timestamp) {
        for &(hw, cum) in counters {
            if self.ct_fold(hw, cum, now) {
                continue;
            }
            let Some(e) = self.sched.hw.get_mut(&hw) else {
                continue;
            };
            let delta = HwStats {
                packets: cum.packets.saturating_sub(e.seen.packets),
                bytes: cum.bytes.saturating_sub(e.seen.bytes),
            };
            e.seen = cum;
            let (idx, id, retired) = (e.idx, e.id, e.retired);
            let rules = retired.then(|| std::sync::Arc::clone(&e.rules));
            // The report of a query made after the removal is the rule's
            // last; one made before it (folded later) is not.
            if retired && self.sched.retired_at.get(&hw).is_none_or(|&at| query > at) {
                self.sched.hw.remove(&hw);
                self.sched.retired_at.remove(&hw);
            }
            if delta.packets == 0 && delta.bytes == 0 {
                continue;
            }
            self.stats.hw_packets += delta.packets;
            self.stats.hw_bytes += delta.bytes;
            let stats = FlowStats {
                packets: delta.packets,
                bytes: delta.bytes,
                used: now,
                tcp_flags: 0,
            };
            let alive = self.meta(idx).is_some_and(|m| m.id == id);
            if alive {
                if let Some(m) = self.meta_mut(idx) {
                    m.stats.merge(&stats);
                }
                if !retired {
                    self.sched.lru.hit(idx);
                }
            } else if let Some(rules) = rules {
                super::credit_rules(&self.bridge, &rules, delta.packets, delta.bytes, now);
            }
        }
    }

    /// Frees the recirculation ids no megaflow holds any more (past their
    /// grace), and removes the later-stage megaflows that match them:
    /// no packet reaches those stages now.
    fn free_recirc_ids(&mut self) {
        let pool = std::sync::Arc::clone(&self.bridge.read().recirc);
        let freed: std::collections::HashSet<u32> =
            pool.collect(|id| self.reg.holds(id)).into_iter().collect();
        if freed.is_empty() {
            return;
        }
        self.stats.recirc_ids_freed += freed.len() as u64;
        let orphans: Vec<u32> = self
            .reg
            .iter()
            .filter(|(_, _, d)| {
                let id = d.matched().key().recirc_id();
                id != 0 && u32::try_from(id).is_ok_and(|id| freed.contains(&id))
            })
            .map(|(idx, _, _)| idx)
            .collect();
        for idx in orphans {
            self.evict(idx, Eviction::Unsound);
        }
    }

    /// Re-translates a flow whose inputs changed: keep it, update its
    /// actions (software and, hitless, hardware), or delete it.
    pub(super) fn revalidate_flow(&mut self, idx: u32, now: Timestamp) {
        let Some(m) = self.meta(idx) else {
            return;
        };
        let (id, home) = (m.id, m.home);
        let Some(key) = self.reg.upcall_key(idx) else {
            return;
        };
        let Some(d) = self.def(idx) else {
            return;
        };
        let matched = d.matched();
        let old = d.actions.clone();
        // As Open vSwitch does: translate the packet that made the flow;
        // the result holds for every packet the megaflow matches as long
        // as the new translation reads no bit outside its mask.
        let t = self.bridge.read().translate(&key, now);
        if !t.mask.is_subset_of(matched.mask()) {
            // The flow now depends on bits it does not match: unsound.
            self.evict(idx, Eviction::Unsound);
            return;
        }
        let new = t.datapath_actions();
        let offloaded = if let Some(m) = self.meta_mut(idx) {
            m.generations = t.generations;
            m.uses = t.uses();
            m.rules = t.rules.clone().into();
            m.hw.is_some()
        } else {
            false
        };
        if new == old {
            return;
        }
        let cmd = DpCommand::Modify {
            id,
            actions: new.clone(),
        };
        self.dps.send(home, &cmd);
        self.reg.set_actions(idx, new);
        self.stats.revalidated_modified += 1;
        if offloaded {
            self.rehome(idx, now);
        } else if let Some(m) = self.meta_mut(idx) {
            // New actions: a flow the device refused may suit it now.
            m.eligible = true;
            m.retry_at = now;
        }
    }

    /// Open vSwitch's dynamic flow limit: shrink when a pass takes long,
    /// grow back while passes are quick and the cache is near the limit.
    fn adjust_flow_limit(&mut self, pass_ms: u64) {
        if !self.cfg.revalidator.dynamic_limit {
            return;
        }
        let max = self.cfg.revalidator.flow_limit;
        let min = 1000.min(max);
        let mut limit = self.flow_limit;
        if pass_ms > 2000 {
            limit /= (pass_ms / 1000) as usize;
        } else if pass_ms > 1300 {
            limit = limit * 3 / 4;
        } else if pass_ms < 1000 && limit < self.reg.len() * 1000 / (pass_ms.max(1) as usize) {
            limit += 1000;
        }
        let limit = limit.clamp(min, max);
        if limit != self.flow_limit {
            self.flow_limit = limit;
            self.dps.send(None, &DpCommand::SetFlowLimit(limit));
        }
    }
}

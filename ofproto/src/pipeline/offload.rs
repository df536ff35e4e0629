//! The offload scheduler's device side: hot flows taken out of the slow
//! path as jobs ([`Pipeline::take_offloads`]), run on the device with or
//! without the slow path's lock ([`OffloadJob::run`], [`SharedOffload`]),
//! and handed back ([`Pipeline::finish_offloads`]); demotion under the
//! rule budget and hitless replacement of a flow's rule.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use megaflow::key::FastBuild;
use megaflow::offload::{FlowOffload, FlowState, HwId, HwStats, MeterBand, NotOffloaded};
use megaflow::shard::ShardedMap;
use megaflow::{Actions, FlowId, Match, MeterId, Timestamp};

use super::record::HwEntry;
use super::{recency, Datapaths, Pipeline};
use crate::table::RuleRef;

/// A hot flow to put into the device ([`Pipeline::take_offloads`]).
#[derive(Clone, Debug)]
pub struct OffloadJob {
    idx: u32,
    id: FlowId,
    matched: Match,
    actions: Actions,
    rules: Arc<[RuleRef]>,
}

/// What the device did with an [`OffloadJob`].
#[derive(Debug)]
pub struct OffloadDone {
    job: OffloadJob,
    result: Result<HwId, NotOffloaded>,
}

impl OffloadJob {
    /// Installs the flow in `dev` (the device call; no slow-path state is
    /// touched).
    pub fn run<O: FlowOffload + ?Sized>(self, dev: &mut O) -> OffloadDone {
        let result = dev.install(&self.matched, &self.actions);
        OffloadDone { job: self, result }
    }
}

/// An offloader shared between the slow path and the thread that runs its
/// device calls outside the slow path's lock ([`OffloadJob`]): each call
/// locks it for its own length.
pub struct SharedOffload<O>(Arc<parking_lot::Mutex<O>>);

impl<O> SharedOffload<O> {
    pub fn new(o: O) -> Self {
        SharedOffload(Arc::new(parking_lot::Mutex::new(o)))
    }

    /// The offloader, for a call or a batch of them.
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, O> {
        self.0.lock()
    }

    /// The offloader back, if no other handle is left.
    pub fn into_inner(self) -> Result<O, Self> {
        Arc::try_unwrap(self.0)
            .map(parking_lot::Mutex::into_inner)
            .map_err(SharedOffload)
    }
}

impl<O> Clone for SharedOffload<O> {
    fn clone(&self) -> Self {
        SharedOffload(Arc::clone(&self.0))
    }
}

impl<O: FlowOffload> FlowOffload for SharedOffload<O> {
    fn install(&mut self, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        self.lock().install(m, actions)
    }

    fn replace(&mut self, old: HwId, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded> {
        self.lock().replace(old, m, actions)
    }

    fn remove(&mut self, id: HwId) {
        self.lock().remove(id);
    }

    fn poll(&mut self, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        self.lock().poll(out)
    }

    fn poll_some(
        &mut self,
        next: &mut usize,
        max: usize,
        out: &mut Vec<(HwId, HwStats)>,
    ) -> Result<bool, NotOffloaded> {
        self.lock().poll_some(next, max, out)
    }

    fn set_meter(&mut self, id: MeterId, band: Option<MeterBand>) -> Result<(), NotOffloaded> {
        self.lock().set_meter(id, band)
    }

    fn ct_install(&mut self, rule: &megaflow::offload::CtRule) -> Result<HwId, NotOffloaded> {
        self.lock().ct_install(rule)
    }

    fn ct_remove(&mut self, id: HwId) {
        self.lock().ct_remove(id)
    }
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// Offloads the queued hot flows now.
    pub fn flush_offloads(&mut self, now: Timestamp) {
        while !self.flush_offloads_some(now, usize::MAX) {}
    }

    /// Applies the meter changes waiting, then offloads at most `max` of
    /// the queued hot flows, oldest first; returns whether none is left
    /// (the live offload thread lets go of the slow path between two
    /// calls).
    pub fn flush_offloads_some(&mut self, now: Timestamp, max: usize) -> bool {
        let jobs = self.take_offloads(now, max);
        let done: Vec<OffloadDone> = jobs.into_iter().map(|j| j.run(&mut self.offload)).collect();
        self.finish_offloads(done, now);
        self.sched.pending.is_empty()
    }

    /// [`offload_tick`](Self::offload_tick) with at most `max` offloads;
    /// returns whether none is left queued.
    pub fn offload_tick_some(&mut self, now: Timestamp, max: usize) -> bool {
        self.fold_datapaths(now);
        self.flush_offloads_some(now, max)
    }

    /// Takes at most `max` queued hot flows out of the slow path as jobs
    /// for the device, oldest first, making room under the rule budget
    /// first. The live offload thread runs them
    /// ([`OffloadJob::run`]) without the slow path's lock, so no handler
    /// waits for the device, then hands them back
    /// ([`finish_offloads`](Self::finish_offloads)); the flows stay
    /// `offloading` meanwhile.
    pub fn take_offloads(&mut self, now: Timestamp, max: usize) -> Vec<OffloadJob> {
        self.apply_meter_changes();
        self.ct_offload(now);
        let mut jobs = Vec::new();
        while jobs.len() < max {
            let Some(idx) = self.sched.pending.pop_front() else {
                break;
            };
            let Some(m) = self.meta(idx) else {
                continue;
            };
            if m.state != FlowState::Offloading {
                continue;
            }
            let (id, rules) = (m.id, Arc::clone(&m.rules));
            let Some((matched, actions)) = self.cached(idx) else {
                continue;
            };
            if let Some(budget) = self.cfg.offload.budget {
                if budget == 0 {
                    self.fail(idx, NotOffloaded::Disabled, now);
                    continue;
                }
                // The jobs under way count against the budget too: when
                // they fill it, this flow waits for the next batch.
                while self.sched.lru.len() + jobs.len() >= budget {
                    match self.sched.lru.pop_oldest() {
                        Some(victim) => self.demote(victim, budget, now),
                        None => break,
                    }
                }
                if self.sched.lru.len() + jobs.len() >= budget {
                    self.sched.pending.push_front(idx);
                    break;
                }
            }
            jobs.push(OffloadJob {
                idx,
                id,
                matched,
                actions,
                rules,
            });
        }
        jobs
    }

    /// Takes back what the device did with [`take_offloads`]' jobs. A flow
    /// installed: offloaded. A flow refused: in software with the reason.
    /// A flow whose actions changed meanwhile: its rule goes and it is
    /// queued again with the new ones. A flow gone meanwhile: its rule
    /// goes too, its last counts still credited to its rules.
    pub fn finish_offloads(&mut self, done: Vec<OffloadDone>, now: Timestamp) {
        for OffloadDone { job, result } in done {
            let alive = self
                .meta(job.idx)
                .is_some_and(|m| m.id == job.id && m.state == FlowState::Offloading);
            match result {
                Ok(hw) if alive && self.def(job.idx).is_some_and(|d| d.actions == job.actions) => {
                    self.installed(job.idx, hw);
                }
                Ok(hw) => {
                    // Out of date: the rule goes, what it counted meanwhile
                    // is folded in (to the flow, or to its rules if gone).
                    self.sched.hw.insert(
                        hw,
                        HwEntry {
                            idx: job.idx,
                            id: job.id,
                            seen: HwStats::default(),
                            rules: Arc::clone(&job.rules),
                            retired: false,
                        },
                    );
                    self.offload.remove(hw);
                    self.retire(hw);
                    if alive {
                        self.sched.pending.push_back(job.idx);
                    }
                }
                Err(r) if alive => self.fail(job.idx, r, now),
                Err(_) => {}
            }
        }
    }

    pub(super) fn installed(&mut self, idx: u32, hw: HwId) {
        let Some(m) = self.reg.meta_mut(idx) else {
            return;
        };
        m.hw = Some(hw);
        m.reason = None;
        let entry = HwEntry {
            idx,
            id: m.id,
            seen: HwStats::default(),
            rules: Arc::clone(&m.rules),
            retired: false,
        };
        self.sched.hw.insert(hw, entry);
        self.sched.lru.touch(idx);
        self.stats.offloaded += 1;
        self.go(idx, FlowState::Offloaded);
    }

    pub(super) fn fail(&mut self, idx: u32, r: NotOffloaded, now: Timestamp) {
        *self
            .stats
            .offload_failures
            .entry(r.to_string())
            .or_default() += 1;
        // A flow waiting for another is tried at the next pass; a refusal
        // that may pass later, after the retry delay.
        let retry = match r {
            NotOffloaded::Waiting(_) => 0,
            _ => self.cfg.offload.retry_ns,
        };
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
    pub(super) fn retire(&mut self, hw: HwId) {
        if let Some(e) = self.sched.hw.get_mut(&hw) {
            e.retired = true;
            self.sched.retired_at.insert(hw, self.sched.queries);
        }
    }

    /// Takes an offloaded flow out of hardware (it stays in software).
    pub(super) fn demote(&mut self, idx: u32, budget: usize, now: Timestamp) {
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
    pub(super) fn rehome(&mut self, idx: u32, now: Timestamp) {
        let Some(m) = self.meta(idx) else {
            return;
        };
        let Some(old) = m.hw else {
            return;
        };
        let Some((matched, actions)) = self.cached(idx) else {
            return;
        };
        self.go(idx, FlowState::Offloading);
        match self.offload.replace(old, &matched, &actions) {
            Ok(new) => {
                self.retire(old);
                self.stats.offloaded += 1;
                self.sched.lru.remove(idx);
                self.installed(idx, new);
            }
            Err(r) => {
                self.offload.remove(old);
                self.retire(old);
                self.sched.lru.remove(idx);
                if let Some(m) = self.meta_mut(idx) {
                    m.hw = None;
                }
                self.fail(idx, r, now);
            }
        }
    }
}

/// What the offload scheduler keeps: the hardware rules the slow path
/// knows of, the offloaded flows' recency (the rule budget's order), the
/// hot flows waiting for the offload thread, and the counter queries'
/// bookkeeping.
#[derive(Default)]
pub(super) struct Scheduler {
    pub(super) hw: ShardedMap<HwId, HwEntry>,
    /// Offloaded flows by recency of hardware hits (front = most recent).
    pub(super) lru: recency::Recency,
    /// Hot flows waiting for the offload thread, oldest first.
    pub(super) pending: VecDeque<u32>,
    pub(super) poll_buf: Vec<(HwId, HwStats)>,
    /// Counter queries made; the number of the last one before each
    /// removed rule went (a pass folds a query's reports in batches, so a
    /// rule can be removed between its report and the report's fold: only
    /// a later query's report is its last). Apart from [`HwEntry`], which
    /// the fold of every report reads: few rules are retired at a time.
    pub(super) queries: u64,
    pub(super) retired_at: HashMap<HwId, u64, FastBuild>,
}

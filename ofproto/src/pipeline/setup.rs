//! Flow setup without the slow path's lock: what handler threads install
//! megaflows through ([`FlowSetup`]), and how the slow path adopts them
//! ([`Pipeline::adopt`]).
//!
//! A handler translates a miss on the bridge (one consistent version,
//! under its read lock), then, holding only its own inbox:
//! 1. checks that the tables and ports it read are still in force (or
//!    translates again);
//! 2. stages a record of the new megaflow (id, match, actions, rules, the
//!    version it read, the packet's counts) in its inbox;
//! 3. sends the insert to the datapath(s) that need it;
//!
//! then executes the packet under the meters' read lock. Whoever holds
//! the slow path next (the offload tick every 2 ms, a pass's every step,
//! a control request) adopts the staged records into the registry: a
//! record of an older table version is translated again, a duplicate of
//! an installed megaflow (two handlers, or a datapath that had not
//! applied an insert yet) gives way to it, and one the flow limits have
//! no room for leaves; all three keep their counts. So a handler waits
//! for no pass, no dump, no scrape and no device call: only for its own
//! inbox, which the adopter holds for a swap.
//!
//! Why staging, and not the registry itself in a concurrent map: the
//! registry's indexes, the fair shares and the offload state change
//! together and are swept by a pass; keeping one owner for them keeps the
//! pass lock-free on its hot loop, and what a handler needs (an id, a
//! route to the datapaths, the meters) is shared already.
//!
//! Order: a record is staged before its insert is sent, and both happen
//! under the inbox's lock; an adopter drains an inbox under the same
//! lock. So every datapath event about a handler's flow is collected
//! after its record is staged (the offload tick collects, then adopts,
//! then folds), and every command the adopter sends about it (a remove, a
//! modify) reaches the datapath after its insert.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use megaflow::actions::ActionSink;
use megaflow::key::FastBuild;
use megaflow::offload::FlowOffload;
use megaflow::{
    Actions, DpCommand, FlowId, FlowKey, FlowStats, Match, PortNo, SplitMix64, Timestamp,
};
use parking_lot::{Mutex, RwLock};

use super::{
    credit_rules, home_of, match_hash, translate_miss, Datapaths, DpSender, Miss, Pipeline,
    SharedBridge, SwOutcome,
};
use crate::bridge::Generations;
use crate::meter::MeterTable;
use crate::table::RuleRef;
use crate::xlate::Translation;

/// Inboxes (handlers beyond this share them).
const INBOXES: usize = 8;

/// Most records staged and not adopted yet: past it a handler takes the
/// slow path itself ([`Backlog`]), so the flow limits are overshot by at
/// most this many megaflows, for at most one offload tick.
pub const STAGED_MAX: usize = 4096;

/// A megaflow a handler installed and the slow path has not adopted yet.
pub(super) struct Staged {
    pub(super) id: FlowId,
    pub(super) matched: Match,
    pub(super) actions: Actions,
    pub(super) key: FlowKey,
    pub(super) rules: Arc<[RuleRef]>,
    pub(super) generations: Generations,
    pub(super) uses: crate::bridge::Uses,
    /// Where its insert went, and to how many datapaths.
    pub(super) to: Option<PortNo>,
    pub(super) sent: u32,
    /// The upcalled packets it carries (one, or more that missed before
    /// the datapath applied the insert).
    pub(super) stats: FlowStats,
    /// Translations of it redone because the tables changed meanwhile.
    pub(super) retranslated: u32,
}

#[derive(Default)]
struct Inbox {
    records: Vec<Staged>,
    /// Records by match hash: a second miss of a staged megaflow adds its
    /// packet to the record.
    index: HashMap<u64, usize, FastBuild>,
}

/// What the slow path shares with its handlers.
pub(super) struct Shared {
    pub(super) bridge: SharedBridge,
    pub(super) meters: Arc<RwLock<MeterTable>>,
    /// Ids for new megaflows, whoever makes them (never reused).
    pub(super) next_id: AtomicU64,
    inboxes: [Mutex<Inbox>; INBOXES],
    staged: AtomicUsize,
    /// The connection tracker `ct()` runs against when the slow path
    /// executes a packet (the datapaths' own).
    pub(super) tracker: RwLock<Option<Arc<conntrack::Tracker>>>,
}

impl Shared {
    pub(super) fn new(bridge: SharedBridge) -> Shared {
        Shared {
            bridge,
            meters: Arc::default(),
            next_id: AtomicU64::new(1),
            inboxes: Default::default(),
            staged: AtomicUsize::new(0),
            tracker: RwLock::new(None),
        }
    }

    pub(super) fn tracker(&self) -> Option<Arc<conntrack::Tracker>> {
        self.tracker.read().clone()
    }

    pub(super) fn new_id(&self) -> FlowId {
        FlowId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Records staged and not adopted.
    pub(super) fn staged(&self) -> usize {
        self.staged.load(Ordering::Acquire)
    }

    /// Moves every staged record to `out`.
    fn drain(&self, out: &mut Vec<Staged>) {
        for inbox in &self.inboxes {
            let mut g = inbox.lock();
            if g.records.is_empty() {
                continue;
            }
            self.staged.fetch_sub(g.records.len(), Ordering::AcqRel);
            out.append(&mut g.records);
            g.index.clear();
        }
    }
}

/// The slow path had [`STAGED_MAX`] records waiting for adoption: install
/// through it ([`Pipeline::upcall_translated`], which adopts them first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog;

/// A handler's way to install megaflows without the slow path's lock
/// ([`Pipeline::flow_setup`]).
#[derive(Clone)]
pub struct FlowSetup {
    shared: Arc<Shared>,
    dps: Arc<dyn DpSender>,
}

impl FlowSetup {
    /// Installs the megaflow of `miss`, translated by [`translate_miss`]
    /// (`t`), counting the packet in it, and executes the packet into
    /// `sink` (meters, then `rng` for samples). `inbox` picks the
    /// handler's inbox (any number: handlers with different ones never
    /// wait for each other).
    #[allow(clippy::too_many_arguments)]
    pub fn upcall<S: ActionSink>(
        &self,
        inbox: usize,
        rng: &mut SplitMix64,
        now: Timestamp,
        miss: &Miss,
        t: &Translation,
        pkt: &mut Vec<u8>,
        sink: &mut S,
    ) -> Result<SwOutcome, Backlog> {
        let sh = &*self.shared;
        let actions = self.stage(inbox, now, &miss.key, t, pkt.len())?;
        let tracker = sh.tracker();
        let meters = sh.meters.read();
        let mut layout = miss.layout;
        let len = pkt.len();
        // Later stages (`ct(table=T)`) run here too, each installing its
        // own megaflow, as the datapath would after its inserts.
        let exec = super::run_stages(
            (&*meters, rng, tracker.as_deref(), now),
            miss.key,
            actions,
            pkt,
            &mut layout,
            sink,
            |k| self.stage(inbox, now, k, &translate_miss(&sh.bridge, k, now), len),
        )?;
        Ok(SwOutcome { upcall: true, exec })
    }

    /// Stages the megaflow of one stage of an upcalled packet (`key`,
    /// translated as `t`), counting the packet in it; returns its actions.
    fn stage(
        &self,
        inbox: usize,
        now: Timestamp,
        key: &FlowKey,
        t: &Translation,
        len: usize,
    ) -> Result<Actions, Backlog> {
        let sh = &*self.shared;
        let one = FlowStats {
            packets: 1,
            bytes: len as u64,
            used: now,
            tcp_flags: 0,
        };
        let mut g = sh.inboxes[inbox % INBOXES].lock();
        if sh.staged() >= STAGED_MAX {
            return Err(Backlog);
        }
        // Translated before a flow mod or a port change that came
        // since: again, now (the adopter would, but the insert goes
        // out first).
        let current = sh.bridge.read().generations();
        let fresh;
        let mut retranslated = 0;
        let t = if same_version(&t.generations, &current) {
            t
        } else {
            retranslated = 1;
            fresh = translate_miss(&sh.bridge, key, now);
            &fresh
        };
        let matched = t.megaflow(key);
        let h = match_hash(&matched);
        let inbox = &mut *g;
        let known = inbox
            .index
            .get(&h)
            .copied()
            .filter(|&i| inbox.records[i].matched == matched);
        Ok(match known {
            Some(i) => {
                let r = &mut inbox.records[i];
                r.stats.merge(&one);
                r.retranslated += retranslated;
                r.actions.clone()
            }
            None => {
                let id = sh.new_id();
                let to = home_of(&matched);
                let actions = t.datapath_actions();
                inbox.index.insert(h, inbox.records.len());
                inbox.records.push(Staged {
                    id,
                    matched,
                    actions: actions.clone(),
                    key: *key,
                    rules: t.rules.clone().into(),
                    generations: t.generations,
                    uses: t.uses(),
                    to,
                    sent: 0,
                    stats: one,
                    retranslated,
                });
                sh.staged.fetch_add(1, Ordering::AcqRel);
                let cmd = DpCommand::Insert {
                    id,
                    matched: Box::new(matched),
                    actions: actions.clone(),
                };
                let sent = self.dps.send(to, &cmd);
                if let Some(r) = inbox.records.last_mut() {
                    r.sent = sent;
                }
                actions
            }
        })
    }

    /// Records staged and not adopted yet.
    pub fn staged(&self) -> usize {
        self.shared.staged()
    }
}

fn same_version(a: &Generations, b: &Generations) -> bool {
    a.tables == b.tables && a.ports == b.ports
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// A handle handler threads install megaflows through without this
    /// slow path's lock; `None` when the datapaths are this slow path's
    /// own ([`super::LocalDatapath`]).
    pub fn flow_setup(&self) -> Option<FlowSetup> {
        Some(FlowSetup {
            shared: Arc::clone(&self.shared),
            dps: self.dps.sender()?,
        })
    }

    /// Takes the records handlers staged into the registry (see the
    /// module's doc). Every entry point that reads or sweeps the records
    /// calls it first.
    pub fn adopt(&mut self) {
        if self.shared.staged() == 0 {
            return;
        }
        let mut batch = std::mem::take(&mut self.adopting);
        self.shared.drain(&mut batch);
        let current = self.bridge.read().generations();
        for s in batch.drain(..) {
            self.adopt_one(s, &current);
        }
        self.adopting = batch;
    }

    fn adopt_one(&mut self, s: Staged, current: &Generations) {
        // When the handler saw the packet.
        let now = s.stats.used;
        self.stats.packets += s.stats.packets;
        self.stats.upcalls += s.stats.packets;
        self.stats.retranslated += u64::from(s.retranslated);
        if !same_version(&s.generations, current) {
            // Read tables older than those in force, which a pass may
            // have brought every record up to already: translated again.
            self.stats.retranslated += 1;
            self.unstage(&s);
            let t = translate_miss(&self.bridge, &s.key, now);
            self.install_translated(&s.key, &t, &s.stats, now);
            return;
        }
        if let Some(idx) = self.find_match(&s.matched) {
            // Installed already (by another handler, or before a datapath
            // applied its insert): that record stays, this one leaves.
            self.unstage(&s);
            self.resend(idx, Some(PortNo(s.key.in_port() as u32)));
            self.count(idx, &s.stats, now);
            return;
        }
        if !self.make_room(&s.matched) {
            self.unstage(&s);
            credit_rules(
                &self.bridge,
                &s.rules,
                s.stats.packets,
                s.stats.bytes,
                s.stats.used,
            );
            return;
        }
        self.stats.megaflows_created += 1;
        let idx = self.register(
            s.id,
            s.matched,
            s.actions,
            &s.key,
            s.rules,
            s.generations,
            s.uses,
            now,
        );
        self.count(idx, &s.stats, now);
    }

    /// Removes a staged record's megaflow from the datapaths it went to;
    /// their last counts go to its rules.
    fn unstage(&mut self, s: &Staged) {
        if s.sent == 0 {
            return;
        }
        let n = self.dps.send(s.to, &DpCommand::Remove { id: s.id });
        if n > 0 {
            self.retired.insert(
                s.id,
                super::record::Retired {
                    rules: Arc::clone(&s.rules),
                    pending: n,
                },
            );
        }
    }
}

#[cfg(test)]
#[path = "tests_setup.rs"]
mod tests;

//! OpenFlow flow tables and flow mod semantics (OpenFlow 1.3, section 6.4).
//!
//! [`FlowTables`] holds the 254 tables of a switch. Each [`FlowTable`] keeps
//! its rules in a slot vector (a rule's [`RuleId`] is its slot) and indexes
//! them in a [`Classifier`]. A rule also gets a [`RuleUid`] that is never
//! reused, so a megaflow that remembers which rules it came from can tell a
//! rule from its replacement in the same slot.
//!
//! Every change bumps the changed table's generation and the switch-wide
//! [`FlowTables::generation`]; the revalidator re-translates megaflows
//! translated under an older generation.
//!
//! Semantics implemented, as the specification states them:
//! - add replaces a rule of identical match and priority (keeping its
//!   counters unless `reset_counts`), and with `check_overlap` refuses to add
//!   a rule that overlaps one of the same priority;
//! - modify (non-strict) changes the instructions of every rule whose match
//!   is within the flow mod's match, modify-strict of the rule with identical
//!   match and priority; neither adds a rule (OpenFlow 1.2 and later);
//! - delete and delete-strict likewise, with `out_port` and cookie filters;
//!   `table` `None` means every table;
//! - `goto_table` must name a later table.
//!
//! A failed flow mod changes nothing. Thread-safety: plain data, mutated
//! through `&mut`.

use megaflow::{FlowKey, Match, Timestamp};

use crate::classifier::{Classifier, RuleId};
use crate::rule::{FlowMod, FlowModCommand, Instructions, OfAction, OfPort, RuleSpec};
use crate::wildcards::Wildcards;
use crate::{Priority, TableId};

/// Number of tables (ids 0..=253).
pub const N_TABLES: usize = 254;

/// A rule's identity for its whole life; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleUid(pub u64);

/// Where a rule lives and which incarnation it is: what a megaflow keeps to
/// credit stats to the rules it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleRef {
    /// The bridge whose tables hold it.
    pub bridge: crate::BridgeNo,
    pub table: TableId,
    pub id: RuleId,
    pub uid: RuleUid,
}

/// A rule as a table stores it: the spec plus its life and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub spec: RuleSpec,
    pub uid: RuleUid,
    /// When it was added (duration counts from here).
    pub created: Timestamp,
    /// Last modify (a hard timeout counts from `created`, as in OpenFlow).
    pub modified: Timestamp,
    /// Last time a packet hit it (idle timeout counts from here).
    pub used: Timestamp,
    pub packets: u64,
    pub bytes: u64,
}

impl Rule {
    /// True when the rule's instructions send packets to `port` (the
    /// `out_port` filter of modify and delete).
    pub fn outputs_to(&self, port: OfPort) -> bool {
        if port == OfPort::Any {
            return true;
        }
        self.spec
            .instructions
            .actions()
            .any(|a| matches!(a, OfAction::Output { port: p, .. } if *p == port))
    }

    /// True for a flow of `conjunction` actions: a soft flow, never a
    /// lookup's answer (see `crate::conjunction`).
    pub fn is_conjunctive(&self) -> bool {
        self.spec.instructions.conjunctions().next().is_some()
    }

    /// True when the rule's instructions run `group` (`None`: any rule;
    /// the `out_group` filter).
    pub fn outputs_to_group(&self, group: Option<u32>) -> bool {
        group.is_none_or(|g| self.spec.instructions.groups().any(|x| x == g))
    }
}

/// Why a rule left its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovedReason {
    IdleTimeout,
    HardTimeout,
    Delete,
    /// The group the rule ran was deleted.
    GroupDelete,
    /// The meter the rule ran was deleted (OpenFlow 1.3 has no reason for
    /// it: FLOW_REMOVED says DELETE, as Open vSwitch sends).
    MeterDelete,
}

/// A rule that left its table, with its final counters (for a FLOW_REMOVED
/// message when it has `send_flow_rem`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedRule {
    /// The bridge it was in (set by the switch's bridges; a table does
    /// not know its own).
    pub bridge: crate::BridgeNo,
    pub table: TableId,
    pub rule: Rule,
    pub reason: RemovedReason,
}

/// A flow mod that could not be applied; the tables are unchanged. Each maps
/// to an OpenFlow 1.3 error (type, code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowModError {
    #[error("table {0} does not exist (tables are 0..=253)")]
    BadTable(u8),
    #[error("goto_table:{goto} in table {table} must name a later table")]
    BadGoto { table: TableId, goto: TableId },
    #[error("rule overlaps a rule of the same priority {0} (check_overlap)")]
    Overlap(u16),
    #[error("table {table} is full ({limit} rules)")]
    TableFull { table: TableId, limit: usize },
    #[error("add needs one table, not all")]
    AddNeedsTable,
    #[error("group:{0}: no such group")]
    UnknownGroup(u32),
    #[error("meter:{0}: no such meter")]
    UnknownMeter(u32),
}

impl FlowModError {
    /// The OpenFlow 1.3 (error type, code) this error is sent as.
    pub fn of_error(&self) -> (u16, u16) {
        const BAD_INSTRUCTION: u16 = 3;
        const FLOW_MOD_FAILED: u16 = 5;
        match self {
            // Table 254 is Open vSwitch's hidden one: OFPBRC_EPERM there,
            // as it answers.
            FlowModError::BadTable(254) => (1, 5),
            FlowModError::BadTable(_) | FlowModError::AddNeedsTable => (FLOW_MOD_FAILED, 2),
            FlowModError::BadGoto { .. } => (BAD_INSTRUCTION, 2),
            FlowModError::Overlap(_) => (FLOW_MOD_FAILED, 3),
            FlowModError::TableFull { .. } => (FLOW_MOD_FAILED, 1),
            // OFPBAC_BAD_OUT_GROUP.
            FlowModError::UnknownGroup(_) => (2, 9),
            // OFPMMFC_INVALID_METER, as Open vSwitch answers.
            FlowModError::UnknownMeter(_) => (12, 2),
        }
    }
}

/// What a successful flow mod did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FlowModOutcome {
    pub added: usize,
    pub replaced: usize,
    pub modified: usize,
    pub removed: Vec<RemovedRule>,
}

/// One table: rules in slots, indexed by a classifier.
#[derive(Clone, Debug)]
pub struct FlowTable {
    id: TableId,
    cls: Classifier,
    slots: Vec<Option<Rule>>,
    free: Vec<u32>,
    generation: u64,
    max_rules: usize,
    /// Rules with an idle or hard timeout: expiry walks only tables that
    /// have some (a pass runs expiry, and a table of 100,000 rules without
    /// timeouts would be walked for nothing at each).
    timed: usize,
    /// Conjunctive rules: a table with none looks up the plain way.
    conjunctive: usize,
}

fn timed(r: &Rule) -> bool {
    r.spec.idle_timeout != 0 || r.spec.hard_timeout != 0
}

impl FlowTable {
    fn new(id: TableId, max_rules: usize) -> Self {
        FlowTable {
            id,
            cls: Classifier::new(),
            slots: Vec::new(),
            free: Vec::new(),
            generation: 0,
            max_rules,
            timed: 0,
            conjunctive: 0,
        }
    }

    pub fn id(&self) -> TableId {
        self.id
    }

    /// Bumped by every change of this table.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn len(&self) -> usize {
        self.cls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cls.is_empty()
    }

    /// The classifier (for statistics such as its subtable count).
    pub fn classifier(&self) -> &Classifier {
        &self.cls
    }

    /// The rule in slot `id`.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        self.slots.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// The highest-priority rule matching `key`, recording what was read.
    pub fn lookup(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<(RuleId, &Rule)> {
        let id = if self.conjunctive == 0 {
            self.cls.lookup(key, wc)?
        } else {
            crate::conjunction::lookup(self, key, wc)?
        };
        self.rule(id).map(|r| (id, r))
    }

    /// Every rule, in slot order.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, &Rule)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().map(|r| (RuleId(i as u32), r)))
    }

    fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        self.cls.find_exact(m, priority)
    }

    fn insert(&mut self, rule: Rule) -> RuleId {
        let id = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        let id = RuleId(id);
        self.timed += usize::from(timed(&rule));
        self.conjunctive += usize::from(rule.is_conjunctive());
        self.cls.insert(id, &rule.spec.matched, rule.spec.priority);
        self.slots[id.0 as usize] = Some(rule);
        id
    }

    fn take(&mut self, id: RuleId) -> Option<Rule> {
        let rule = self.slots.get_mut(id.0 as usize)?.take()?;
        self.timed -= usize::from(timed(&rule));
        self.conjunctive -= usize::from(rule.is_conjunctive());
        self.cls.remove(id, &rule.spec.matched, rule.spec.priority);
        self.free.push(id.0);
        Some(rule)
    }

    /// Rules a non-strict modify/delete selects: within `m`, cookie and
    /// out_port filters.
    fn select_loose(&self, fm: &FlowMod) -> Vec<RuleId> {
        let m = &fm.rule.matched;
        self.rules()
            .filter(|(_, r)| match_covers(m, &r.spec.matched) && cookie_ok(fm, r))
            .filter(|(_, r)| r.outputs_to(fm.out_port) && r.outputs_to_group(fm.out_group))
            .map(|(id, _)| id)
            .collect()
    }

    /// The rule a strict modify/delete selects.
    fn select_strict(&self, fm: &FlowMod) -> Vec<RuleId> {
        self.find_exact(&fm.rule.matched, fm.rule.priority)
            .filter(|&id| {
                self.rule(id).is_some_and(|r| {
                    cookie_ok(fm, r)
                        && r.outputs_to(fm.out_port)
                        && r.outputs_to_group(fm.out_group)
                })
            })
            .into_iter()
            .collect()
    }
}

/// True when every packet `inner` matches is matched by `outer` (the
/// non-strict selection of OpenFlow: the rule is at least as specific).
pub fn match_covers(outer: &Match, inner: &Match) -> bool {
    let (om, ok) = (outer.mask().words(), outer.key().words());
    let (im, ik) = (inner.mask().words(), inner.key().words());
    (0..om.len()).all(|i| om[i] & !im[i] == 0 && (ik[i] & om[i]) == ok[i])
}

fn cookie_ok(fm: &FlowMod, r: &Rule) -> bool {
    (r.spec.cookie.0 ^ fm.rule.cookie.0) & fm.cookie_mask == 0
}

/// The tables of one switch.
#[derive(Clone, Debug)]
pub struct FlowTables {
    tables: Vec<FlowTable>,
    generation: u64,
    next_uid: u64,
    /// The rules each change touched ([`FlowTables::changes_since`]).
    log: ChangeLog,
}

/// Most rule changes the log keeps: past it the oldest go, and whoever
/// asks about a generation before them is told to look at everything.
pub const CHANGES_KEPT: usize = 8192;

/// The matches of the rules the last changes added, modified or removed,
/// by the generation each change made: what lets a BARRIER bring up to
/// date only the megaflows a change can affect.
#[derive(Clone, Debug, Default)]
struct ChangeLog {
    entries: std::collections::VecDeque<(u64, TableId, Match)>,
    /// The newest generation whose entries were dropped.
    dropped: u64,
}

impl ChangeLog {
    fn push(&mut self, generation: u64, table: TableId, m: Match) {
        if self.entries.len() >= CHANGES_KEPT {
            if let Some((g, _, _)) = self.entries.pop_front() {
                self.dropped = self.dropped.max(g);
            }
        }
        self.entries.push_back((generation, table, m));
    }
}

impl Default for FlowTables {
    fn default() -> Self {
        Self::new()
    }
}

impl FlowTables {
    /// Default per-table rule limit.
    pub const DEFAULT_MAX_RULES: usize = 1 << 20;

    /// 254 empty tables: every packet is dropped (OpenFlow 1.3's default
    /// table-miss).
    pub fn new() -> Self {
        Self::with_limit(Self::DEFAULT_MAX_RULES)
    }

    /// Tables holding at most `max_rules` rules each.
    pub fn with_limit(max_rules: usize) -> Self {
        FlowTables {
            tables: (0..N_TABLES)
                .map(|i| FlowTable::new(TableId(i as u8), max_rules))
                .collect(),
            generation: 0,
            next_uid: 1,
            log: ChangeLog::default(),
        }
    }

    /// The table and match of every rule added, modified or removed since
    /// generation `since`, or `None` when the log no longer holds them all.
    pub fn changes_since(&self, since: u64) -> Option<Vec<(TableId, Match)>> {
        if self.log.dropped > since {
            return None;
        }
        Some(
            self.log
                .entries
                .iter()
                .filter(|(g, _, _)| *g > since)
                .map(|(_, t, m)| (*t, *m))
                .collect(),
        )
    }

    /// Bumped by every change of any table.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Puts back `earlier`, a copy taken before changes that must not
    /// stand (a bundle that failed part way). Generations only move
    /// forward: the tables as they were come back under a new one, every
    /// table changed and the log saying "look at everything" (the rules
    /// the changes touched are not listed), rule ids never reused.
    /// A copy to roll back to ([`roll_back_to`](Self::roll_back_to)):
    /// the tables without the change log, which a roll back does not take
    /// from it (up to 8,192 matches: copying them made every bundle
    /// commit pay megabytes).
    pub fn snapshot(&self) -> FlowTables {
        FlowTables {
            tables: self.tables.clone(),
            generation: self.generation,
            next_uid: self.next_uid,
            log: ChangeLog::default(),
        }
    }

    pub fn roll_back_to(&mut self, mut earlier: FlowTables) {
        let gen = self.generation.max(earlier.generation) + 1;
        earlier.generation = gen;
        for t in &mut earlier.tables {
            t.generation = gen;
        }
        earlier.next_uid = earlier.next_uid.max(self.next_uid);
        earlier.log = std::mem::take(&mut self.log);
        earlier.log.dropped = gen;
        *self = earlier;
    }

    /// One table. Ids above 253 name no table.
    pub fn table(&self, id: TableId) -> Option<&FlowTable> {
        self.tables.get(id.0 as usize)
    }

    /// Every table, in id order.
    pub fn tables(&self) -> impl Iterator<Item = &FlowTable> + '_ {
        self.tables.iter()
    }

    /// The rule a reference names, if it is still that incarnation.
    pub fn rule(&self, r: RuleRef) -> Option<&Rule> {
        self.table(r.table)?
            .rule(r.id)
            .filter(|rule| rule.uid == r.uid)
    }

    /// Total number of rules.
    pub fn len(&self) -> usize {
        self.tables.iter().map(FlowTable::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a rule (an add flow mod with no filters); the convenient form for
    /// tests and flow files.
    pub fn add(&mut self, spec: RuleSpec, now: Timestamp) -> Result<FlowModOutcome, FlowModError> {
        self.apply(&FlowMod::add(spec), now)
    }

    /// Applies one flow mod. On error nothing changed.
    pub fn apply(&mut self, fm: &FlowMod, now: Timestamp) -> Result<FlowModOutcome, FlowModError> {
        let ids: Vec<TableId> = match fm.table {
            Some(t) if t > TableId::MAX => return Err(FlowModError::BadTable(t.0)),
            Some(t) => vec![t],
            None if fm.command == FlowModCommand::Add => return Err(FlowModError::AddNeedsTable),
            None => (0..N_TABLES as u8).map(TableId).collect(),
        };
        let mut touched: Vec<(TableId, Match)> = Vec::new();
        let out = match fm.command {
            FlowModCommand::Add => {
                let out = self.add_rule(ids[0], fm, now)?;
                touched.push((ids[0], fm.rule.matched));
                out
            }
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
                let strict = fm.command == FlowModCommand::ModifyStrict;
                // Without `table=`, every table: select first, so a bad
                // goto in any of them changes nothing.
                let mut chosen = Vec::new();
                for &t in &ids {
                    let table = &self.tables[t.0 as usize];
                    let sel = if strict {
                        table.select_strict(fm)
                    } else {
                        table.select_loose(fm)
                    };
                    if !sel.is_empty() || fm.table.is_some() {
                        check_goto(t, &fm.rule.instructions)?;
                    }
                    if !sel.is_empty() {
                        chosen.push((t, sel));
                    }
                }
                let mut modified = 0;
                for (t, sel) in chosen {
                    let table = &mut self.tables[t.0 as usize];
                    for &id in &sel {
                        if let Some(Some(r)) = table.slots.get_mut(id.0 as usize) {
                            touched.push((t, r.spec.matched));
                            table.conjunctive -= usize::from(r.is_conjunctive());
                            r.spec.instructions = fm.rule.instructions.clone();
                            table.conjunctive += usize::from(r.is_conjunctive());
                            r.modified = now;
                            if fm.rule.flags.reset_counts {
                                r.packets = 0;
                                r.bytes = 0;
                            }
                        }
                    }
                    table.generation += 1;
                    modified += sel.len();
                }
                FlowModOutcome {
                    modified,
                    ..Default::default()
                }
            }
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                let strict = fm.command == FlowModCommand::DeleteStrict;
                let mut removed = Vec::new();
                for t in ids {
                    let table = &mut self.tables[t.0 as usize];
                    let sel = if strict {
                        table.select_strict(fm)
                    } else {
                        table.select_loose(fm)
                    };
                    if !sel.is_empty() {
                        table.generation += 1;
                    }
                    for id in sel {
                        if let Some(rule) = table.take(id) {
                            touched.push((t, rule.spec.matched));
                            removed.push(RemovedRule {
                                bridge: crate::BridgeNo::MAIN,
                                table: t,
                                rule,
                                reason: RemovedReason::Delete,
                            });
                        }
                    }
                }
                FlowModOutcome {
                    removed,
                    ..Default::default()
                }
            }
        };
        if out.added + out.replaced + out.modified + out.removed.len() > 0 {
            self.generation += 1;
            for (t, m) in touched {
                self.log.push(self.generation, t, m);
            }
        }
        Ok(out)
    }

    fn add_rule(
        &mut self,
        t: TableId,
        fm: &FlowMod,
        now: Timestamp,
    ) -> Result<FlowModOutcome, FlowModError> {
        check_goto(t, &fm.rule.instructions)?;
        let table = &mut self.tables[t.0 as usize];
        let spec = &fm.rule;
        let existing = table.find_exact(&spec.matched, spec.priority);
        if spec.flags.check_overlap {
            let overlap = table.rules().any(|(id, r)| {
                Some(id) != existing
                    && r.spec.priority == spec.priority
                    && r.spec.matched.overlaps(&spec.matched)
            });
            if overlap {
                return Err(FlowModError::Overlap(spec.priority.0));
            }
        }
        if existing.is_none() && table.len() >= table.max_rules {
            return Err(FlowModError::TableFull {
                table: t,
                limit: table.max_rules,
            });
        }
        let mut rule = Rule {
            spec: RuleSpec {
                table: t,
                ..spec.clone()
            },
            uid: RuleUid(self.next_uid),
            created: now,
            modified: now,
            used: now,
            packets: 0,
            bytes: 0,
        };
        self.next_uid += 1;
        let mut out = FlowModOutcome::default();
        if let Some(old) = existing.and_then(|id| table.take(id)) {
            if !spec.flags.reset_counts {
                // The same rule, changed: it keeps its counters and its
                // identity, so hits the datapath has not credited yet
                // still reach it.
                rule.packets = old.packets;
                rule.bytes = old.bytes;
                rule.uid = old.uid;
            }
            out.replaced = 1;
        } else {
            out.added = 1;
        }
        table.insert(rule);
        table.generation += 1;
        Ok(out)
    }

    /// Credits hits to a rule (from the datapath's stats); ignored when the
    /// rule has been replaced or removed since.
    pub fn credit(&mut self, r: RuleRef, packets: u64, bytes: u64, used: Timestamp) {
        if let Some(Some(rule)) = self
            .tables
            .get_mut(r.table.0 as usize)
            .and_then(|t| t.slots.get_mut(r.id.0 as usize))
        {
            if rule.uid == r.uid {
                rule.packets += packets;
                rule.bytes += bytes;
                rule.used = rule.used.max(used);
            }
        }
    }

    /// Removes every rule `doomed` picks, as removed for `reason`.
    pub fn remove_rules(
        &mut self,
        doomed: impl Fn(&Rule) -> bool,
        reason: RemovedReason,
    ) -> Vec<RemovedRule> {
        self.remove_picked(false, |r| doomed(r).then_some(reason))
    }

    /// Removes the rules whose idle or hard timeout has passed at `now`.
    pub fn expire(&mut self, now: Timestamp) -> Vec<RemovedRule> {
        let secs = |s: u16| u64::from(s) * 1_000_000_000;
        self.remove_picked(true, |r| {
            let (hard, idle) = (r.spec.hard_timeout, r.spec.idle_timeout);
            if hard != 0 && now.since(r.created) >= secs(hard) {
                Some(RemovedReason::HardTimeout)
            } else if idle != 0 && now.since(r.used) >= secs(idle) {
                Some(RemovedReason::IdleTimeout)
            } else {
                None
            }
        })
    }

    /// Removes every rule `pick` gives a reason for (`timed_only`: it
    /// picks only rules with a timeout): one generation for each table
    /// changed, each rule logged.
    fn remove_picked(
        &mut self,
        timed_only: bool,
        pick: impl Fn(&Rule) -> Option<RemovedReason>,
    ) -> Vec<RemovedRule> {
        let mut removed = Vec::new();
        for table in &mut self.tables {
            if timed_only && table.timed == 0 {
                continue;
            }
            let gone: Vec<(RuleId, RemovedReason)> = table
                .rules()
                .filter_map(|(id, r)| Some((id, pick(r)?)))
                .collect();
            if gone.is_empty() {
                continue;
            }
            table.generation += 1;
            self.generation += 1;
            for (id, reason) in gone {
                if let Some(rule) = table.take(id) {
                    self.log.push(self.generation, table.id, rule.spec.matched);
                    removed.push(RemovedRule {
                        bridge: crate::BridgeNo::MAIN,
                        table: table.id,
                        rule,
                        reason,
                    });
                }
            }
        }
        removed
    }
}

fn check_goto(t: TableId, i: &Instructions) -> Result<(), FlowModError> {
    match i.goto_table {
        Some(g) if g <= t || g > TableId::MAX => Err(FlowModError::BadGoto { table: t, goto: g }),
        _ => Ok(()),
    }
}

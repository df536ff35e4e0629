//! The sync point: which version of the OpenFlow tables every megaflow has
//! been brought up to (what an OpenFlow BARRIER waits for), whether a pass
//! is wanted before its time, and when the next one is due (replay's
//! clock; the daemon's revalidator keeps its own).
//!
//! Two ways reach a version. A pass re-translates every record whose
//! inputs changed ([`super::Pipeline::pass_end`]). A BARRIER first tries
//! [`super::Pipeline::sync_targeted`]: when only flow rules changed since
//! the last sync, and the tables' log still holds them all, only the
//! megaflows those rules can affect are re-translated, at once; with none
//! affected it costs one walk of the records.

use std::collections::HashSet;

use megaflow::offload::FlowOffload;
use megaflow::{Match, Timestamp};

use super::record::FlowMeta;
use super::{Datapaths, Pipeline};
use crate::bridge::{Bridge, SyncMark};
use crate::table::RuleRef;
use crate::TableId;

/// Most megaflows a targeted sync re-translates under the slow path's
/// lock; past it, a pass (in steps) does the work.
pub const TARGETED_MAX: usize = 4096;

pub(super) struct SyncPoint {
    /// Where the tables stood when the last completed sync began.
    synced: SyncMark,
    /// A pass was asked for before its time (a BARRIER is waiting).
    wanted: bool,
    next_pass: Timestamp,
}

impl Default for SyncPoint {
    fn default() -> Self {
        SyncPoint {
            synced: SyncMark::default(),
            wanted: false,
            next_pass: Timestamp::NEVER,
        }
    }
}

impl SyncPoint {
    pub(super) fn synced_tables(&self) -> u64 {
        self.synced.tables
    }

    pub(super) fn synced_mark(&self) -> SyncMark {
        self.synced
    }

    pub(super) fn want(&mut self) {
        self.wanted = true;
    }

    pub(super) fn wanted(&self) -> bool {
        self.wanted
    }

    /// A pass began: what was wanted is under way.
    pub(super) fn begun(&mut self) {
        self.wanted = false;
    }

    /// A sync that began with the tables at `mark` completed (a pass that
    /// began before a targeted sync ends after it: the newer stays).
    pub(super) fn reached(&mut self, mark: SyncMark) {
        if mark.tables >= self.synced.tables {
            self.synced = mark;
        }
    }

    /// Whether a pass is due at `now`, passes every `interval_ns` (the
    /// first call schedules the first one interval later); when it is,
    /// the next is scheduled.
    pub(super) fn due(&mut self, now: Timestamp, interval_ns: u64) -> bool {
        let next = Timestamp(now.0.saturating_add(interval_ns));
        if self.next_pass == Timestamp::NEVER {
            self.next_pass = next;
            return false;
        }
        if now < self.next_pass {
            return false;
        }
        self.next_pass = next;
        true
    }
}

/// Whether a change of a rule matching `changed` in table `table` can
/// change the translation of megaflow `matched`, whose translation hit
/// `rules`. Table 0 sees the packet as the megaflow matches it: only an
/// overlap matters. A later table may see it rewritten (set_field,
/// metadata, registers), so a megaflow that went past table 0 (by
/// goto_table, a resubmit or a group: a miss in the next table leaves no
/// rule to see), or hit no rule at all, is taken as affected by any change
/// there.
fn affects(
    br: &Bridge,
    changed: &[(TableId, Match)],
    matched: &Match,
    m: &FlowMeta,
    multi: &mut HashSet<RuleRef>,
) -> bool {
    let past_table_0 = m.rules.is_empty()
        || m.rules.iter().any(|r| {
            r.table.0 != 0
                || r.bridge != crate::BridgeNo::MAIN
                || multi.contains(r)
                || br.tables.rule(*r).is_none_or(|rule| {
                    let goes_on = rule.spec.instructions.goes_on();
                    if goes_on {
                        multi.insert(*r);
                    }
                    goes_on
                })
        });
    // A packet that crossed a patch port met the main bridge's table 0
    // as another packet (another in_port, registers cleared).
    let in_port = megaflow::PortNo(matched.key().field(megaflow::Field::InPort) as u32);
    let crossed = br.home(in_port).0 != crate::BridgeNo::MAIN
        || m.rules.iter().any(|r| r.bridge != crate::BridgeNo::MAIN);
    crossed
        || changed
            .iter()
            .any(|(t, c)| (t.0 != 0 && past_table_0) || (t.0 == 0 && c.overlaps(matched)))
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// Brings the megaflows up to the tables in force now without a pass,
    /// if it can: only flow rules changed since the last sync, the tables'
    /// log holds them all, and at most [`TARGETED_MAX`] megaflows can be
    /// affected. Those are re-translated (changed in place, or removed);
    /// the others are marked current. Returns whether the tables are
    /// synced now; if not, a pass is needed.
    pub fn sync_targeted(&mut self, now: Timestamp) -> bool {
        self.adopt();
        let br = self.bridge.read();
        let mark = br.sync_mark();
        let last = self.sync.synced_mark();
        if mark.tables == last.tables {
            return true;
        }
        if mark.other != last.other {
            return false;
        }
        let Some(changed) = br.tables.changes_since(last.flows) else {
            return false;
        };
        let mut multi = HashSet::new();
        let mut affected = Vec::new();
        for (idx, m, d) in self.reg.iter() {
            if m.generations.tables < last.tables
                || affects(&br, &changed, &d.matched(), m, &mut multi)
            {
                affected.push(idx);
                if affected.len() > TARGETED_MAX {
                    return false;
                }
            }
        }
        drop(br);
        let everyone: Vec<u32> = self.reg.iter().map(|(i, _, _)| i).collect();
        for idx in everyone {
            if let Some(m) = self.reg.meta_mut(idx) {
                m.generations.tables = mark.tables;
            }
        }
        for idx in affected {
            self.revalidate_flow(idx, now);
        }
        self.stats.targeted_syncs += 1;
        self.sync.reached(mark);
        true
    }
}

#[cfg(test)]
#[path = "tests_sync.rs"]
mod tests;

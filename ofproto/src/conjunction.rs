//! Conjunctive matches: `conjunction(ID,K/N)` flows and the `conj_id=ID`
//! flow they lead to, with Open vSwitch's semantics
//! (`lib/classifier.c`, `classifier_lookup__`; ovs-fields(7), "Conjunctive
//! Match Fields").
//!
//! A flow whose actions are `conjunction`s is *soft*: matching it alone
//! decides nothing. A lookup in a table that holds soft flows goes:
//! 1. find the best *hard* (any other) flow matching the packet, priority
//!    `H`, and every soft flow matching it above `H`;
//! 2. from the highest priority among those soft flows down: when, among
//!    the soft flows of that one priority, some conjunction `ID` has a
//!    matching flow for each of its `N` clauses, look the packet up again
//!    with `conj_id=ID`, among hard flows only; its answer, if any, is the
//!    table's (it may be a flow that does not match `conj_id` at all, as in
//!    Open vSwitch);
//! 3. else the answer is the hard flow of step 1.
//!
//! A hard flow wins ties with soft ones. Packets carry `conj_id` 0 and the
//! megaflow never matches it (`Wildcards::finish` drops it with the
//! pipeline fields): the bits the second lookups recorded on it say nothing
//! about the packet. Both lookups record their bits in the wildcards, and
//! each is sound on its own (`crate::classifier`), so the megaflow is too.
//!
//! Flows of one conjunction are expected at one priority (ovs-fields(7));
//! clauses of one `ID` at different priorities never combine. Where several
//! conjunctions complete at once, the one completed first in the
//! classifier's visiting order is tried first.

use megaflow::{Field, FlowKey};

use crate::classifier::RuleId;
use crate::table::FlowTable;
use crate::wildcards::Wildcards;
use crate::Priority;

/// The conjunction state of one `ID` among the soft flows of a priority:
/// bit `k` set once clause `k` matched; bits at and above `N` preset.
struct Clauses {
    id: u32,
    seen: u64,
}

/// The table's answer for `key` when it holds soft flows (see the module
/// comment).
pub(crate) fn lookup(table: &FlowTable, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
    let cls = table.classifier();
    let soft = |id: RuleId| table.rule(id).is_some_and(|r| r.is_conjunctive());
    let mut softs: Vec<(Priority, RuleId)> = Vec::new();
    let hard = cls.lookup_split(key, wc, &soft, Some(&mut softs));
    // Highest priority first; the walk's order kept among equals.
    softs.sort_by_key(|&(p, _)| std::cmp::Reverse(p));
    let mut clauses: Vec<Clauses> = Vec::new();
    let mut completed: Vec<u32> = Vec::new();
    for level in softs.chunk_by(|a, b| a.0 == b.0) {
        clauses.clear();
        completed.clear();
        for &(_, id) in level {
            let Some(rule) = table.rule(id) else { continue };
            for (cid, clause, n) in rule.spec.instructions.conjunctions() {
                let at = match clauses.iter().position(|c| c.id == cid) {
                    Some(at) => at,
                    None => {
                        clauses.push(Clauses {
                            id: cid,
                            seen: u64::MAX.checked_shl(u32::from(n)).unwrap_or(0),
                        });
                        clauses.len() - 1
                    }
                };
                let c = &mut clauses[at];
                let before = c.seen;
                c.seen |= 1u64.checked_shl(u32::from(clause)).unwrap_or(0);
                if c.seen == u64::MAX && before != u64::MAX {
                    completed.push(cid);
                }
            }
        }
        for &cid in &completed {
            let mut with_id = *key;
            with_id.set_field(Field::ConjId, u128::from(cid));
            if let Some((_, found)) = cls.lookup_split(&with_id, wc, &soft, None) {
                return Some(found);
            }
        }
    }
    hard.map(|(_, id)| id)
}

//! A linear-scan classifier: the specification the real one is tested
//! against (as Open vSwitch's `tests/test-classifier.c` keeps a "tcls").
//!
//! Every rule is checked in turn; the highest priority match wins, and among
//! equal priorities the rule inserted first. Its wildcards are the union of
//! the masks of every rule it examined (sound, never wide). Public so tests
//! and benches of other crates can use it as a baseline.

use megaflow::{FlowKey, Match};

use super::RuleId;
use crate::wildcards::Wildcards;
use crate::Priority;

/// Rules in insertion order.
#[derive(Clone, Debug, Default)]
pub struct ReferenceClassifier {
    rules: Vec<(RuleId, Match, Priority)>,
}

impl ReferenceClassifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule. The caller keeps (match, priority) pairs unique.
    pub fn insert(&mut self, id: RuleId, m: &Match, priority: Priority) {
        self.rules.push((id, *m, priority));
    }

    /// Removes a rule; false when it was not there.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|(r, _, _)| *r != id);
        self.rules.len() != before
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        self.rules
            .iter()
            .find(|(_, rm, p)| rm == m && *p == priority)
            .map(|(id, _, _)| *id)
    }

    /// The highest-priority rule matching `key` (first inserted among equals).
    pub fn lookup(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
        let mut best: Option<(RuleId, Priority)> = None;
        for (id, m, p) in &self.rules {
            wc.unwildcard_mask(m.mask());
            if m.matches(key) && best.is_none_or(|(_, bp)| *p > bp) {
                best = Some((*id, *p));
            }
        }
        best.map(|(id, _)| id)
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

//! The OpenFlow classifier of one table (placeholder: linear scan until the
//! staged, prefix-tracking implementation lands).

pub mod reference;

use megaflow::{FlowKey, Match};

use crate::wildcards::Wildcards;
use crate::Priority;

/// The caller's handle of a rule in a classifier (the table's slot index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// The rules of one table, looked up by priority.
#[derive(Clone, Debug, Default)]
pub struct Classifier {
    inner: reference::ReferenceClassifier,
}

impl Classifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule. The caller keeps (match, priority) pairs unique.
    pub fn insert(&mut self, id: RuleId, m: &Match, priority: Priority) {
        self.inner.insert(id, m, priority)
    }

    /// Removes the rule `id`, inserted with this match and priority.
    pub fn remove(&mut self, id: RuleId, _m: &Match, _priority: Priority) -> bool {
        self.inner.remove(id)
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        self.inner.find_exact(m, priority)
    }

    /// The highest-priority rule matching `key`, recording in `wc` every key
    /// bit the answer depended on.
    pub fn lookup(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
        self.inner.lookup(key, wc)
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

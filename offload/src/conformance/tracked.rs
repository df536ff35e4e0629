//! [`Tracked`]: a backend that remembers every object made through it, so
//! that what one case made can be removed before the next (on a real
//! device cases share the FDB: a case's root rule left behind would steer
//! the next case's frames) and the check leaves the device as it found it.

use std::sync::{Mutex, MutexGuard};

use super::Device;
use crate::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DeviceDump, DomainId, DomainType, DrBackend,
    DrError, MatcherId, RestoreRuleId, RuleId, SyncFlags, TableId,
};
use crate::sim::OutFrame;
use crate::Vport;

#[derive(Default)]
struct Live {
    domains: Vec<DomainId>,
    tables: Vec<TableId>,
    matchers: Vec<MatcherId>,
    rules: Vec<RuleId>,
    actions: Vec<ActionId>,
    bulks: Vec<CounterBulkId>,
    restore: Vec<RestoreRuleId>,
}

/// `B`, with every live object it made through this wrapper remembered.
pub struct Tracked<B> {
    inner: B,
    live: Mutex<Live>,
}

/// Records `$h` in `$list` when the create succeeded.
macro_rules! made {
    ($self:ident, $list:ident, $call:expr) => {{
        let r = $call;
        if let Ok(h) = &r {
            $self.live().$list.push(*h);
        }
        r
    }};
}

/// Forgets `$h` when the destroy succeeded.
macro_rules! gone {
    ($self:ident, $list:ident, $h:expr, $call:expr) => {{
        let r = $call;
        if r.is_ok() {
            $self.live().$list.retain(|x| *x != $h);
        }
        r
    }};
}

impl<B: DrBackend> Tracked<B> {
    pub fn new(inner: B) -> Tracked<B> {
        Tracked {
            inner,
            live: Mutex::new(Live::default()),
        }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Destroys everything made through this wrapper and not yet
    /// destroyed, users before what they use: rules, matchers, actions
    /// (in passes, as actions use tables and other actions), tables
    /// (newest first), counter bulks, domains. Returns the errors of
    /// objects that would not go (they stay tracked).
    pub fn clear(&self) -> Vec<String> {
        // A destroy that succeeds forgets its object; one that fails
        // leaves it tracked.
        let mut errors = Vec::new();
        let e = &mut errors;
        let rules = self.live().rules.clone();
        passes(rules, |r| self.rule_destroy(*r), "rule", e);
        let restore = self.live().restore.clone();
        passes(
            restore,
            |r| self.restore_rule_destroy(*r),
            "restore rule",
            e,
        );
        let matchers = self.live().matchers.clone();
        passes(matchers, |m| self.matcher_destroy(*m), "matcher", e);
        let actions = self.live().actions.clone();
        passes(actions, |a| self.action_destroy(*a), "action", e);
        let tables: Vec<TableId> = self.live().tables.iter().rev().copied().collect();
        passes(tables, |t| self.table_destroy(*t), "table", e);
        let bulks = self.live().bulks.clone();
        passes(bulks, |b| self.counter_bulk_free(*b), "counter bulk", e);
        let domains = self.live().domains.clone();
        passes(domains, |d| self.domain_destroy(*d), "domain", e);
        errors
    }
}

/// Destroys `items` in passes until a pass frees nothing: an object still
/// in use by one destroyed later in the same pass goes in the next.
fn passes<T: Copy + std::fmt::Debug>(
    mut items: Vec<T>,
    destroy: impl Fn(&T) -> Result<(), DrError>,
    kind: &str,
    errors: &mut Vec<String>,
) {
    loop {
        let before = items.len();
        let mut last = Vec::new();
        items.retain(|x| match destroy(x) {
            Ok(()) => false,
            Err(e) => {
                last.push(format!("{kind} {x:?}: {e}"));
                true
            }
        });
        if items.is_empty() || items.len() == before {
            errors.extend(last);
            return;
        }
    }
}

impl<B: Device> Device for Tracked<B> {
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame> {
        self.inner.send(d, now_ns, ingress, frame)
    }
    fn send_many(&self, d: DomainId, ingress: Vport, frames: &[(u64, &[u8])]) -> Vec<OutFrame> {
        self.inner.send_many(d, ingress, frames)
    }
    fn model_differences(&self) -> Vec<String> {
        self.inner.model_differences()
    }
    fn begin_case(&self) {
        self.inner.begin_case()
    }
    fn uplink_and_pf(&self) -> Vec<Vport> {
        self.inner.uplink_and_pf()
    }
    fn max_frame_rate(&self) -> Option<u64> {
        self.inner.max_frame_rate()
    }
    fn steady_frame_rate(&self) -> Option<u64> {
        self.inner.steady_frame_rate()
    }
    fn vf(&self, n: u16) -> Vport {
        self.inner.vf(n)
    }
    fn ingress(&self) -> Vport {
        self.inner.ingress()
    }
    fn disturbed_frames(&self) -> u64 {
        self.inner.disturbed_frames()
    }
}

impl<B: DrBackend> DrBackend for Tracked<B> {
    fn domain_create(&self, ty: DomainType) -> Result<DomainId, DrError> {
        made!(self, domains, self.inner.domain_create(ty))
    }
    fn domain_destroy(&self, d: DomainId) -> Result<(), DrError> {
        gone!(self, domains, d, self.inner.domain_destroy(d))
    }
    fn domain_sync(&self, d: DomainId, flags: SyncFlags) -> Result<(), DrError> {
        self.inner.domain_sync(d, flags)
    }
    fn domain_allow_duplicate_rules(&self, d: DomainId, allow: bool) -> Result<(), DrError> {
        self.inner.domain_allow_duplicate_rules(d, allow)
    }
    fn table_create(&self, d: DomainId, level: u32) -> Result<TableId, DrError> {
        made!(self, tables, self.inner.table_create(d, level))
    }
    fn table_destroy(&self, t: TableId) -> Result<(), DrError> {
        gone!(self, tables, t, self.inner.table_destroy(t))
    }
    fn matcher_create(
        &self,
        t: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError> {
        made!(
            self,
            matchers,
            self.inner.matcher_create(t, priority, criteria, mask)
        )
    }
    fn matcher_destroy(&self, m: MatcherId) -> Result<(), DrError> {
        gone!(self, matchers, m, self.inner.matcher_destroy(m))
    }
    fn rule_create(
        &self,
        m: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError> {
        made!(self, rules, self.inner.rule_create(m, value, actions))
    }
    fn rule_destroy(&self, r: RuleId) -> Result<(), DrError> {
        gone!(self, rules, r, self.inner.rule_destroy(r))
    }
    fn action_create(&self, d: DomainId, spec: ActionSpec) -> Result<ActionId, DrError> {
        made!(self, actions, self.inner.action_create(d, spec))
    }
    fn action_destroy(&self, a: ActionId) -> Result<(), DrError> {
        gone!(self, actions, a, self.inner.action_destroy(a))
    }
    fn counter_bulk_alloc(&self, log_size: u8) -> Result<CounterBulkId, DrError> {
        made!(self, bulks, self.inner.counter_bulk_alloc(log_size))
    }
    fn counter_bulk_free(&self, b: CounterBulkId) -> Result<(), DrError> {
        gone!(self, bulks, b, self.inner.counter_bulk_free(b))
    }
    fn counter_bulk_query(
        &self,
        b: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        self.inner.counter_bulk_query(b, out)
    }
    fn dump(&self) -> Result<DeviceDump, DrError> {
        self.inner.dump()
    }
    fn restore_path(&self) -> Result<(), &'static str> {
        self.inner.restore_path()
    }
    fn restore_rule_create(&self, tag: u32) -> Result<RestoreRuleId, DrError> {
        made!(self, restore, self.inner.restore_rule_create(tag))
    }
    fn restore_rule_destroy(&self, r: RestoreRuleId) -> Result<(), DrError> {
        gone!(self, restore, r, self.inner.restore_rule_destroy(r))
    }
}

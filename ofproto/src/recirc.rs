//! Recirculation ids and the translation state frozen under them.
//!
//! A `ct(table=T)` (and later any freezing action) ends the translation of
//! a packet's first stage with `ct(...)` and `recirc(id)`: the datapath
//! tracks the packet and looks it up again with `recirc_id=id`. The id
//! names a [`FrozenState`], what translation needs to go on in the next
//! stage: the table to look up, the pipeline's registers and metadata and
//! what it wrote into the packet's tunnel metadata and mark, and the
//! action set. The datapath keeps the packet's own fields (port, tunnel,
//! headers as rewritten, the ct state), so they are not frozen.
//!
//! Equal states share one id (as Open vSwitch's `recirc_alloc_id_ctx`), so
//! the number of ids follows the number of distinct states the tables
//! produce, not the number of packets or megaflows. At most [`MAX_IDS`]
//! exist at once; past that, translation drops the packet with
//! [`XlateError::RecircIdsExhausted`](crate::xlate::XlateError).
//!
//! An id lives while a megaflow's actions recirculate to it (the slow
//! path's registry counts them) and for [`GRACE`] revalidator passes
//! after it was last frozen, so a translation whose megaflow is still on
//! its way to the registry (a handler's staged record) finds it; then
//! [`RecircPool::collect`] frees it, as Open vSwitch frees an id when the
//! last datapath flow using it goes, and the later-stage megaflows that
//! match it go too. Ids are never reused (a 32-bit sequence): a packet
//! still in flight with a freed id misses and its translation finds no
//! state, never another's.
//!
//! Shared by the handler threads through the bridge (`Arc`), behind one
//! mutex held for a hash lookup.

use std::collections::HashMap;
use std::sync::Arc;

use megaflow::Field;
use parking_lot::Mutex;

use crate::rule::OfAction;
use crate::TableId;

/// Most ids at once.
pub const MAX_IDS: usize = 1 << 20;

/// Passes an id no megaflow holds outlives its last freeze.
pub const GRACE: u64 = 2;

/// What the next stage starts from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrozenState {
    /// The bridge the next stage runs in.
    pub bridge: crate::BridgeNo,
    /// The table the next stage looks the packet up in.
    pub table: TableId,
    /// Pipeline fields (registers, metadata) and written packet metadata,
    /// with their values, in field order.
    pub fields: Vec<(Field, u128, u128)>,
    /// The action set as it stood.
    pub action_set: Vec<OfAction>,
    /// The packet went through `ct()`: the next stage sees its `ct_*`
    /// fields (else they read as untracked).
    pub conntracked: bool,
    /// What the next stage runs first, when the stage was cut short in
    /// the middle of a rule (a `dp_hash` group): the group, the rest of
    /// the action lists it was in, innermost first, and where each went
    /// on. Empty: the next stage starts at `table`.
    pub steps: Vec<Step>,
    /// The packet's `dp_hash` was computed before the next stage (so a
    /// `dp_hash` group there picks by it instead of hashing again).
    pub hashed: bool,
    /// The `push`/`pop` stack as it stood.
    pub stack: Vec<u128>,
}

/// A step of a stage that resumes in the middle of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// An action, as in the list the stage was cut short in.
    Action(OfAction),
    /// The rest of a rule's instructions after its apply-actions (its
    /// clear-actions, write-actions and write-metadata; where it goes on
    /// is a [`Step::Chain`] of its own).
    Instructions(crate::rule::Instructions),
    /// Go on at `table`: the pipeline's own chain (`top`: its end runs
    /// the action set) or a resubmit's.
    Chain { table: TableId, top: bool },
    /// The pipeline ended: run the action set.
    ActionSet,
}

#[derive(Default)]
struct Inner {
    /// Each id's state and the epoch it was last frozen in.
    by_id: HashMap<u32, (Arc<FrozenState>, u64)>,
    by_state: HashMap<Arc<FrozenState>, u32>,
    next: u32,
    /// Revalidator passes begun ([`RecircPool::collect`]).
    epoch: u64,
}

/// The ids of one bridge.
#[derive(Default)]
pub struct RecircPool {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for RecircPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecircPool({} ids)", self.len())
    }
}

impl RecircPool {
    /// The id of `state`: the one it already has, or a new one; `None`
    /// when [`MAX_IDS`] are in use.
    pub fn freeze(&self, state: FrozenState) -> Option<u32> {
        let mut g = self.inner.lock();
        let epoch = g.epoch;
        if let Some(&id) = g.by_state.get(&state) {
            if let Some(e) = g.by_id.get_mut(&id) {
                e.1 = epoch;
            }
            return Some(id);
        }
        if g.by_id.len() >= MAX_IDS {
            return None;
        }
        // Never 0 (no recirculation), never an id used before.
        g.next = g.next.checked_add(1).unwrap_or(1);
        let id = g.next;
        let state = Arc::new(state);
        g.by_id.insert(id, (Arc::clone(&state), epoch));
        g.by_state.insert(state, id);
        Some(id)
    }

    /// The state `id` names.
    pub fn thaw(&self, id: u32) -> Option<Arc<FrozenState>> {
        self.inner.lock().by_id.get(&id).map(|(s, _)| Arc::clone(s))
    }

    /// Starts a new epoch (a revalidator pass), then frees every id that
    /// `held` says no megaflow holds and that was not frozen in the last
    /// [`GRACE`] epochs. Returns the ids freed.
    pub fn collect(&self, held: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut g = self.inner.lock();
        g.epoch += 1;
        let epoch = g.epoch;
        let freed: Vec<u32> = g
            .by_id
            .iter()
            .filter(|(&id, (_, at))| at + GRACE <= epoch && !held(id))
            .map(|(&id, _)| id)
            .collect();
        for id in &freed {
            if let Some((state, _)) = g.by_id.remove(id) {
                g.by_state.remove(&state);
            }
        }
        freed
    }

    /// Ids in use.
    pub fn len(&self) -> usize {
        self.inner.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[path = "tests/conntrack.rs"]
mod tests;

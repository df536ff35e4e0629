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
//! produce, not the number of packets or megaflows. Ids stay valid while
//! the bridge lives: a stage-1 megaflow that recirculates to an id always
//! finds its state (no window where a packet in flight meets a freed id),
//! and at most [`MAX_IDS`] exist; past that, translation drops the packet
//! with [`XlateError::RecircIdsExhausted`](crate::xlate::XlateError). Open
//! vSwitch frees an id when the last datapath flow using it goes; that
//! refinement is left for when stage counts make it matter.
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

/// What the next stage starts from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrozenState {
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
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<u32, Arc<FrozenState>>,
    by_state: HashMap<Arc<FrozenState>, u32>,
    next: u32,
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
        if let Some(&id) = g.by_state.get(&state) {
            return Some(id);
        }
        if g.by_id.len() >= MAX_IDS {
            return None;
        }
        g.next += 1;
        let id = g.next;
        let state = Arc::new(state);
        g.by_id.insert(id, Arc::clone(&state));
        g.by_state.insert(state, id);
        Some(id)
    }

    /// The state `id` names.
    pub fn thaw(&self, id: u32) -> Option<Arc<FrozenState>> {
        self.inner.lock().by_id.get(&id).cloned()
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

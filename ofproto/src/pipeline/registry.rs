//! The megaflow registry: which megaflows exist, and where. One job: the
//! slots (each megaflow's [`FlowMeta`], [`FlowDef`] and upcall key), the
//! free slots, and the indexes by [`FlowId`] and by match. What a
//! megaflow is doing (offloaded, hot, stale) is the rest of the slow
//! path's; the registry keeps it and never decides it.

use megaflow::shard::{ChunkedVec, ShardedMap};
use megaflow::{Actions, FlowId, FlowKey, Match, PackedKey};

use super::match_hash;
use super::record::{FlowDef, FlowMeta, Masks};

#[derive(Default)]
pub(super) struct Registry {
    flows: ChunkedVec<Option<FlowMeta>>,
    defs: ChunkedVec<Option<FlowDef>>,
    /// Per slot, the key of the packet whose upcall made the flow:
    /// revalidation re-translates it (the masked key could take other
    /// paths through the classifier and read bits the megaflow does not
    /// match). Apart from the metadata, which every pass walks.
    keys: ChunkedVec<PackedKey>,
    masks: Masks,
    free: Vec<u32>,
    /// Live megaflows by id, and by the hash of their match (both keys are
    /// hashes or sequence numbers already: a fast hash is enough).
    ids: ShardedMap<FlowId, u32>,
    by_match: ShardedMap<u64, u32>,
    live: usize,
    /// Megaflows whose actions recirculate to each id
    /// ([`crate::recirc`]: an id no megaflow holds may be freed).
    recirc_refs: std::collections::HashMap<u32, u32>,
}

/// The recirculation ids `actions` send packets on to, or hold for a
/// controller to resume at (`controller(pause)`'s continuation).
fn recircs(actions: &Actions) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        megaflow::DpAction::Recirc(id) => Some(*id),
        megaflow::DpAction::Userspace(megaflow::actions::UserspaceReason::Controller {
            extra: Some(x),
            ..
        }) => x.continuation,
        _ => None,
    })
}

impl Registry {
    /// Live megaflows.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// Slots, live or free (what a sweep walks).
    pub(super) fn slots(&self) -> u32 {
        self.flows.len() as u32
    }

    pub(super) fn meta(&self, idx: u32) -> Option<&FlowMeta> {
        self.flows.get(idx as usize).and_then(Option::as_ref)
    }

    pub(super) fn meta_mut(&mut self, idx: u32) -> Option<&mut FlowMeta> {
        self.flows.get_mut(idx as usize).and_then(Option::as_mut)
    }

    pub(super) fn def(&self, idx: u32) -> Option<&FlowDef> {
        self.defs.get(idx as usize).and_then(Option::as_ref)
    }

    /// The key of the packet whose upcall made slot `idx`'s megaflow.
    pub(super) fn upcall_key(&self, idx: u32) -> Option<FlowKey> {
        self.keys.get(idx as usize).map(PackedKey::unpack)
    }

    /// The slot of live megaflow `id`.
    pub(super) fn by_id(&self, id: &FlowId) -> Option<u32> {
        self.ids.get(id).copied()
    }

    /// The slot of the live megaflow whose match is `m`.
    pub(super) fn find(&self, m: &Match) -> Option<u32> {
        let idx = *self.by_match.get(&match_hash(m))?;
        let same = self.def(idx).is_some_and(|d| d.matched() == *m);
        same.then_some(idx)
    }

    /// Enters a megaflow: a slot (a free one first), the indexes.
    pub(super) fn insert(
        &mut self,
        meta: FlowMeta,
        matched: &Match,
        actions: Actions,
        key: &FlowKey,
    ) -> u32 {
        let id = meta.id;
        self.hold(&actions);
        let def = FlowDef {
            key: PackedKey::pack(matched.key()),
            mask: self.masks.get(matched.mask()),
            actions,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(meta);
                self.defs[i as usize] = Some(def);
                self.keys[i as usize] = PackedKey::pack(key);
                i
            }
            None => {
                self.flows.push(Some(meta));
                self.defs.push(Some(def));
                self.keys.push(PackedKey::pack(key));
                (self.flows.len() - 1) as u32
            }
        };
        self.ids.insert(id, idx);
        self.by_match.insert(match_hash(matched), idx);
        self.live += 1;
        idx
    }

    /// Takes slot `idx`'s megaflow out; the slot is free.
    pub(super) fn remove(&mut self, idx: u32) -> Option<FlowMeta> {
        let m = self.flows.get_mut(idx as usize).and_then(Option::take)?;
        let def = self.defs.get_mut(idx as usize).and_then(Option::take);
        self.ids.remove(&m.id);
        if let Some(d) = def {
            self.release(&d.actions);
            let h = match_hash(&d.matched());
            if self.by_match.get(&h) == Some(&idx) {
                self.by_match.remove(&h);
            }
            self.masks.put(d.mask);
        }
        self.live -= 1;
        self.free.push(idx);
        Some(m)
    }

    /// Replaces slot `idx`'s actions (their recirculation ids held
    /// instead of the old ones').
    pub(super) fn set_actions(&mut self, idx: u32, actions: Actions) {
        self.hold(&actions);
        let old = match self.defs.get_mut(idx as usize).and_then(Option::as_mut) {
            Some(d) => std::mem::replace(&mut d.actions, actions),
            None => actions,
        };
        self.release(&old);
    }

    /// Whether a megaflow's actions recirculate to `id`.
    pub(super) fn holds(&self, id: u32) -> bool {
        self.recirc_refs.contains_key(&id)
    }

    fn hold(&mut self, actions: &Actions) {
        for id in recircs(actions) {
            *self.recirc_refs.entry(id).or_insert(0) += 1;
        }
    }

    fn release(&mut self, actions: &Actions) {
        for id in recircs(actions) {
            if let Some(n) = self.recirc_refs.get_mut(&id) {
                *n -= 1;
                if *n == 0 {
                    self.recirc_refs.remove(&id);
                }
            }
        }
    }

    /// Masks in use, one copy each.
    #[cfg(test)]
    pub(super) fn masks(&self) -> usize {
        self.masks.0.len()
    }

    /// Every live megaflow: its slot, record and definition.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &FlowMeta, &FlowDef)> + '_ {
        self.flows
            .iter()
            .zip(&self.defs)
            .enumerate()
            .filter_map(|(i, (m, d))| Some((i as u32, m.as_ref()?, d.as_ref()?)))
    }
}

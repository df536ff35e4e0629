//! The megaflow cache: an exact-match front over a tuple-space search.
//!
//! ## Structure
//!
//! - One subtable per distinct (port class, [`Mask`]). A subtable stores, for
//!   each flow, only the words its mask uses (`key & mask`, compacted) next to
//!   the flow's stats, and an open-addressing table of 64-byte buckets maps
//!   the hash of those words to the flow's slot (see `subtable.rs`). Hash and
//!   compare therefore touch only the words the mask uses, and a subtable
//!   that does not hold the packet's flow costs one bucket line.
//! - Subtables are grouped by *port class*: a megaflow whose mask matches
//!   in_port exactly (every translated megaflow does) lives in a subtable of
//!   its in_port; others live in port-independent subtables ([`ANY_PORT`]).
//!   A packet probes only its own port's subtables, then the independent
//!   ones, as Open vSwitch keeps one classifier per in_port.
//! - Within a class, subtables are probed in *rank* order: every `rerank_interval` lookups
//!   they are sorted by recent hits (then the hit counts are halved), so the
//!   masks that carry most traffic are tried first.
//! - An exact-match cache (EMC) sits in front: 8-way sets of packed
//!   `(signature, subtable, slot)` entries indexed by the hash of the
//!   packet's words ([`FlowKey::packet_hash`]). An EMC hit is *verified* against the megaflow itself (`key & mask
//!   == stored`), so an EMC entry can never be stale in a harmful way: after a
//!   flow is removed or its slot reused, a wrong entry simply fails to verify.
//!   Entries are inserted on subtable hits with probability
//!   1/`emc_insert_inv_prob` (Open vSwitch's default: 1/100), so short flows
//!   do not thrash it. The EMC pays only when a tuple-space search would
//!   probe several subtables: at each re-ranking the cache looks at how
//!   many a search probed on average since the last one and uses the EMC
//!   (looks up and inserts) only while that is at least `emc_min_probes`.
//!   A table of one or two masks per port forwards without it (an EMC probe
//!   is a hash of the whole key and a random access into a table of
//!   hundreds of kilobytes; one subtable probe hashes a few words of a
//!   small, cached table).
//!
//! ## Invariants
//!
//! - Stored key words are always `key & mask` (built from a [`Match`]).
//! - A slot is live iff its entry holds actions; a [`FlowHandle`] names
//!   (subtable, subtable epoch, slot, slot sequence) and is rejected once the
//!   flow is removed, even if the slot or subtable is reused.
//! - The flow count never exceeds `flow_limit`: an insert beyond it returns
//!   [`InsertError::FlowLimit`]; nothing is evicted silently.
//! - Overlap policy: megaflows are expected not to overlap (the translator
//!   makes each one sound for its packet). The cache rejects an exact
//!   duplicate (same mask and masked key, [`InsertError::Duplicate`]), but does
//!   not search for partial overlaps (that costs a scan of every subtable per
//!   insert). Overlaps arise only transiently, when OpenFlow tables change
//!   between two translations, and the revalidator removes the stale flow;
//!   until then a lookup returns *one* matching megaflow, never a
//!   non-matching one.
//!
//! ## Threads
//!
//! `MegaflowCache` is single-owner (`Send`, not shared): see
//! [`crate::datapath`] for how other threads insert, remove and read stats.

use std::collections::HashMap;

use thiserror::Error;

use crate::actions::Actions;
use crate::key::{FastBuild, Field, FlowKey, Mask, Match};
use crate::types::Timestamp;

/// Most packets a batch lookup takes at once.
pub const MAX_BATCH: usize = 64;

/// Tunables of one cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Most megaflows the cache holds (Open vSwitch: 200,000).
    pub flow_limit: usize,
    /// Exact-match cache entries (rounded up to a power of two); 0 disables it.
    pub emc_entries: usize,
    /// An EMC insert happens on one subtable hit in this many (1 = always).
    pub emc_insert_inv_prob: u32,
    /// Lookups between two re-rankings of the subtables.
    pub rerank_interval: u32,
    /// The EMC is used while tuple-space searches probe at least this many
    /// subtables a lookup on average (measured between re-rankings); 0:
    /// always.
    pub emc_min_probes: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            flow_limit: 200_000,
            emc_entries: 32_768,
            emc_insert_inv_prob: 100,
            rerank_interval: 1 << 16,
            emc_min_probes: 3,
        }
    }
}

/// Per-flow statistics, updated on every hit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub packets: u64,
    pub bytes: u64,
    /// Time of the last hit; [`Timestamp::NEVER`] if none.
    pub used: Timestamp,
    /// OR of the TCP flags of every packet counted.
    pub tcp_flags: u16,
}

impl FlowStats {
    /// Adds another set of stats (e.g. hardware counter deltas).
    pub fn merge(&mut self, other: &FlowStats) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        self.used = self.used.max(other.used);
        self.tcp_flags |= other.tcp_flags;
    }
}

/// Names one megaflow in one cache. Stale handles (flow removed) are
/// rejected by every method that takes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowHandle {
    sub: u16,
    /// Bumped each time the subtable index is reused; slot sequences restart
    /// at 0 in a new subtable, so this is what tells old handles apart.
    sub_epoch: u32,
    slot: u32,
    seq: u32,
}

impl FlowHandle {
    /// The handle as one word (subtable, slot, sequence), for hashing.
    #[inline]
    pub fn word(&self) -> u64 {
        (u64::from(self.sub) << 48 | u64::from(self.slot))
            ^ u64::from(self.seq) << 28
            ^ u64::from(self.sub_epoch) << 52
    }
}

/// Why an insert was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InsertError {
    #[error("flow limit of {limit} megaflows reached")]
    FlowLimit { limit: usize },
    #[error("an identical megaflow is already installed")]
    Duplicate(FlowHandle),
    #[error("too many subtables, i.e. (port, mask) pairs (at most {max})")]
    TooManyMasks { max: usize },
}

/// A flow taken out of the cache, with its final stats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedFlow {
    pub matched: Match,
    pub actions: Actions,
    pub stats: FlowStats,
    pub generation: u64,
    pub offload: u64,
}

/// A read-only view of one installed flow.
#[derive(Clone, Copy, Debug)]
pub struct FlowRef<'a> {
    pub handle: FlowHandle,
    sub: &'a Subtable,
    slot: u32,
}

impl<'a> FlowRef<'a> {
    /// The flow's match (rebuilt from the subtable's mask and stored words).
    pub fn matched(&self) -> Match {
        self.sub.match_of(self.slot)
    }

    pub fn actions(&self) -> &'a Actions {
        // Invariant: a FlowRef is only built for live slots, which hold actions.
        self.sub
            .cold(self.slot)
            .and_then(|c| c.actions.as_ref())
            .expect("FlowRef points at a live slot")
    }

    pub fn stats(&self) -> FlowStats {
        self.sub.stats(self.slot)
    }

    pub fn generation(&self) -> u64 {
        self.sub.cold(self.slot).map_or(0, |c| c.generation)
    }

    pub fn offload(&self) -> u64 {
        self.sub.cold(self.slot).map_or(0, |c| c.offload)
    }
}

/// Counters of the cache as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    pub emc_hits: u64,
    /// Later-stage lookups answered by the earlier stage's successor hint
    /// ([`MegaflowCache::lookup_hinted`]).
    pub hinted_hits: u64,
    pub tss_hits: u64,
    pub misses: u64,
    /// Subtables probed by tuple-space searches (hits and misses).
    pub subtable_probes: u64,
}

mod emc;
mod subtable;

use emc::Emc;
use subtable::Subtable;

/// The megaflow cache of one datapath thread.
pub struct MegaflowCache {
    cfg: CacheConfig,
    subtables: Vec<Option<Subtable>>,
    /// Per port class (an in_port, or [`ANY_PORT`]), its subtables, best first.
    classes: HashMap<u32, Vec<u16>, FastBuild>,
    by_mask: HashMap<(u32, Mask), u16, FastBuild>,
    free_subs: Vec<u16>,
    epochs: Vec<u32>,
    emc: Emc,
    count: usize,
    lookups_until_rerank: u32,
    rng: u64,
    counters: CacheCounters,
    /// The EMC is looked up and filled (see `emc_min_probes`).
    emc_on: bool,
    /// Subtables a search would have probed for the EMC's hits.
    emc_saved: u64,
    /// Probes (`subtable_probes` and `emc_saved`) and lookups (hits and
    /// misses) at the last re-ranking.
    probes_mark: (u64, u64),
}

impl MegaflowCache {
    pub fn new(cfg: CacheConfig) -> Self {
        MegaflowCache {
            lookups_until_rerank: cfg.rerank_interval.max(1),
            emc: Emc::new(cfg.emc_entries),
            emc_on: cfg.emc_entries > 0,
            cfg,
            subtables: Vec::new(),
            classes: HashMap::default(),
            by_mask: HashMap::default(),
            free_subs: Vec::new(),
            epochs: Vec::new(),
            count: 0,
            rng: 0x2545_f491_4f6c_dd1d,
            counters: CacheCounters::default(),
            emc_saved: 0,
            probes_mark: (0, 0),
        }
    }

    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// Number of megaflows installed.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of subtables: distinct (port class, mask) pairs.
    pub fn subtable_count(&self) -> usize {
        self.classes.values().map(Vec::len).sum()
    }

    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// Changes the flow limit; flows above a lowered limit stay (the
    /// revalidator evicts them), new inserts are refused until under it.
    pub fn set_flow_limit(&mut self, limit: usize) {
        self.cfg.flow_limit = limit;
    }

    /// Installs a megaflow.
    pub fn insert(
        &mut self,
        m: &Match,
        actions: Actions,
        generation: u64,
    ) -> Result<FlowHandle, InsertError> {
        let class = class_of(m);
        let existing = self.by_mask.get(&(class, *m.mask())).copied();
        if existing.is_none() && self.count >= self.cfg.flow_limit {
            return Err(self.limit_error());
        }
        let sub_idx = match existing {
            Some(i) => i,
            None => self.new_subtable(m.mask(), class)?,
        };
        let at_limit = self.count >= self.cfg.flow_limit;
        let sub = self.subtables[sub_idx as usize]
            .as_mut()
            .expect("by_mask names live subtables");
        if at_limit {
            // Still report a duplicate as such.
            if let Some(slot) = sub.find(m.key()) {
                return Err(InsertError::Duplicate(handle_of(sub_idx, sub, slot)));
            }
            return Err(self.limit_error());
        }
        match sub.insert(m.key(), actions, generation) {
            Ok(slot) => {
                self.count += 1;
                Ok(handle_of(sub_idx, sub, slot))
            }
            Err(slot) => Err(InsertError::Duplicate(handle_of(sub_idx, sub, slot))),
        }
    }

    fn limit_error(&self) -> InsertError {
        InsertError::FlowLimit {
            limit: self.cfg.flow_limit,
        }
    }

    fn new_subtable(&mut self, mask: &Mask, class: u32) -> Result<u16, InsertError> {
        const MAX: usize = u16::MAX as usize;
        let idx = match self.free_subs.pop() {
            Some(i) => i,
            None => {
                if self.subtables.len() >= MAX {
                    return Err(InsertError::TooManyMasks { max: MAX });
                }
                self.subtables.push(None);
                self.epochs.push(0);
                (self.subtables.len() - 1) as u16
            }
        };
        let epoch = self.epochs[idx as usize].wrapping_add(1);
        self.epochs[idx as usize] = epoch;
        self.subtables[idx as usize] = Some(Subtable::new(mask, epoch, class));
        self.by_mask.insert((class, *mask), idx);
        // New masks go last until they earn hits.
        self.classes.entry(class).or_default().push(idx);
        Ok(idx)
    }

    fn drop_if_empty(&mut self, idx: u16) {
        let empty = matches!(&self.subtables[idx as usize], Some(s) if s.live() == 0);
        if empty {
            if let Some(s) = self.subtables[idx as usize].take() {
                self.by_mask.remove(&(s.class, *s.mask()));
                if let Some(list) = self.classes.get_mut(&s.class) {
                    list.retain(|&i| i != idx);
                    if list.is_empty() {
                        self.classes.remove(&s.class);
                    }
                }
            }
            self.free_subs.push(idx);
        }
    }

    #[inline]
    fn resolve(&self, h: FlowHandle) -> Option<&Subtable> {
        let sub = self.subtables.get(h.sub as usize)?.as_ref()?;
        (sub.epoch == h.sub_epoch && sub.seq(h.slot) == Some(h.seq)).then_some(sub)
    }

    #[inline]
    fn resolve_mut(&mut self, h: FlowHandle) -> Option<&mut Subtable> {
        let sub = self.subtables.get_mut(h.sub as usize)?.as_mut()?;
        (sub.epoch == h.sub_epoch && sub.seq(h.slot) == Some(h.seq)).then_some(sub)
    }

    /// Removes a flow, returning it with its final stats; `None` if the
    /// handle is stale.
    pub fn remove(&mut self, h: FlowHandle) -> Option<RemovedFlow> {
        let removed = self.resolve_mut(h)?.remove(h.slot)?;
        self.count -= 1;
        self.drop_if_empty(h.sub);
        Some(removed)
    }

    /// Finds the installed megaflow with exactly this match.
    pub fn find(&self, m: &Match) -> Option<FlowHandle> {
        let &idx = self.by_mask.get(&(class_of(m), *m.mask()))?;
        let sub = self.subtables[idx as usize].as_ref()?;
        let slot = sub.find(m.key())?;
        Some(handle_of(idx, sub, slot))
    }

    /// A view of one flow.
    pub fn get(&self, h: FlowHandle) -> Option<FlowRef<'_>> {
        let sub = self.resolve(h)?;
        Some(FlowRef {
            handle: h,
            sub,
            slot: h.slot,
        })
    }

    /// The actions of a flow.
    #[inline]
    pub fn actions(&self, h: FlowHandle) -> Option<&Actions> {
        self.resolve(h)?.cold(h.slot)?.actions.as_ref()
    }

    /// Replaces a flow's actions (revalidation found they changed) and
    /// generation; stats stay.
    pub fn modify(&mut self, h: FlowHandle, actions: Actions, generation: u64) -> bool {
        match self.resolve_mut(h).and_then(|s| s.cold_mut(h.slot)) {
            Some(c) => {
                c.actions = Some(actions);
                c.generation = generation;
                true
            }
            None => false,
        }
    }

    /// Records the generation a flow was last validated at.
    pub fn set_generation(&mut self, h: FlowHandle, generation: u64) -> bool {
        self.resolve_mut(h)
            .and_then(|s| s.cold_mut(h.slot))
            .map(|c| c.generation = generation)
            .is_some()
    }

    /// Stores the opaque offload state of a flow (owned by the offload layer).
    pub fn set_offload(&mut self, h: FlowHandle, state: u64) -> bool {
        self.resolve_mut(h)
            .and_then(|s| s.cold_mut(h.slot))
            .map(|c| c.offload = state)
            .is_some()
    }

    /// Folds stats counted elsewhere (e.g. by hardware) into a flow.
    pub fn add_stats(&mut self, h: FlowHandle, stats: &FlowStats) -> bool {
        self.resolve_mut(h)
            .map(|s| s.add_stats(h.slot, stats))
            .is_some()
    }

    /// Every installed flow, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = FlowRef<'_>> + '_ {
        self.subtables.iter().enumerate().flat_map(|(i, s)| {
            s.iter().flat_map(move |sub| {
                sub.slots().map(move |slot| FlowRef {
                    handle: handle_of(i as u16, sub, slot),
                    sub,
                    slot,
                })
            })
        })
    }

    /// Looks one packet up and, on a hit, counts it. Returns the flow.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, bytes: u32, now: Timestamp) -> Option<FlowHandle> {
        // A chunk of one: its scratch arrays are one entry long, not
        // `MAX_BATCH` entries zeroed for every packet.
        let mut out = [None];
        self.lookup_chunk::<1>(std::slice::from_ref(key), &[bytes], now, &mut out);
        out[0]
    }

    /// The flow `hint` names, if its slot is live and matches `key`
    /// (checked as an exact-match cache entry is, so a stale or wrong hint
    /// only costs the check), counted as a hit; `None` sends the caller to
    /// [`lookup`](Self::lookup). The datapath's successor hints: a
    /// packet's next stage after `ct()` is, for every packet of the
    /// connections in the same state, the same megaflow.
    #[inline]
    pub fn lookup_hinted(
        &mut self,
        hint: FlowHandle,
        key: &FlowKey,
        bytes: u32,
        now: Timestamp,
    ) -> Option<FlowHandle> {
        let sub = self.subtables.get_mut(hint.sub as usize)?.as_mut()?;
        if sub.epoch != hint.sub_epoch || !sub.slot_matches(hint.slot, key) {
            return None;
        }
        // Live (the match checks it); a slot reused since holds a flow
        // that matches the key all the same.
        let seq = sub.seq(hint.slot)?;
        sub.hit(hint.slot, bytes, now, key.tcp_flags() as u16);
        // Counted as an exact-match hit is: what a search would have
        // probed, and a lookup towards the next rerank.
        self.emc_saved += u64::from(sub.depth);
        self.counters.hinted_hits += 1;
        self.lookups_until_rerank = self.lookups_until_rerank.saturating_sub(1);
        if self.lookups_until_rerank == 0 {
            self.rerank();
        }
        Some(FlowHandle { seq, ..hint })
    }

    /// Looks a batch up (at most [`MAX_BATCH`] packets; longer batches are
    /// processed in chunks), counts every hit in its flow's stats, and writes
    /// one result per key into `out`. `bytes[i]` is the length of packet i.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        bytes: &[u32],
        now: Timestamp,
        out: &mut [Option<FlowHandle>],
    ) {
        debug_assert!(
            keys.len() == bytes.len() && keys.len() == out.len(),
            "lookup_batch slices differ in length"
        );
        let n = keys.len().min(bytes.len()).min(out.len());
        // Never leave a stale result behind for a key that was not looked up.
        for o in out.iter_mut().skip(n) {
            *o = None;
        }
        let mut start = 0;
        while start < n {
            let end = (start + MAX_BATCH).min(n);
            self.lookup_chunk::<MAX_BATCH>(
                &keys[start..end],
                &bytes[start..end],
                now,
                &mut out[start..end],
            );
            start = end;
        }
    }

    /// At most `N` (≤ 64) packets.
    fn lookup_chunk<const N: usize>(
        &mut self,
        keys: &[FlowKey],
        bytes: &[u32],
        now: Timestamp,
        out: &mut [Option<FlowHandle>],
    ) {
        let n = keys.len();
        // Bit i set: packet i still needs a lookup.
        let mut pending: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut emc_hash = [0u64; N];
        let mut slots = [0u32; N];
        let mut subs = [0u16; N];

        // 1. Exact-match cache, in waves over the batch (hash all, load all
        // sets, pick candidates, load all records, verify) so that the cache
        // misses of different packets overlap instead of chaining.
        if self.emc_on {
            let mut touch = 0u64;
            for i in 0..n {
                emc_hash[i] = keys[i].packet_hash();
            }
            for &h in &emc_hash[..n] {
                touch ^= self.emc.touch(h);
            }
            let mut cand = 0u64;
            for i in 0..n {
                if let Some((sub, slot)) = self.emc.candidate(emc_hash[i]) {
                    if let Some(Some(s)) = self.subtables.get(sub as usize) {
                        subs[i] = sub;
                        slots[i] = slot;
                        cand |= 1 << i;
                        touch ^= s.touch(slot);
                    }
                }
            }
            std::hint::black_box(touch);
            for i in set_bits(cand) {
                let ok = matches!(self.subtables.get(subs[i] as usize), Some(Some(s)) if s.slot_matches(slots[i], &keys[i]));
                if ok {
                    pending &= !(1 << i);
                }
            }
            self.counters.emc_hits += (n as u32 - pending.count_ones()) as u64;
        }

        // 2. Tuple-space search. Packets are grouped by in_port; each group
        // probes its port's subtables, then the port-independent ones, each
        // subtable for all the group's packets at once so that their memory
        // accesses overlap.
        let mut tss_found = 0u64;
        if pending != 0 {
            let mut probes = 0u64;
            let mut todo = pending;
            while todo != 0 {
                let port = keys[todo.trailing_zeros() as usize].in_port() as u32;
                let mut group = 0u64;
                for i in set_bits(todo) {
                    if keys[i].in_port() as u32 == port {
                        group |= 1 << i;
                    }
                }
                todo &= !group;
                let mut left = group;
                for idx in self.subtables_for(port) {
                    let Some(sub) = self.subtables[idx as usize].as_ref() else {
                        continue;
                    };
                    probes += left.count_ones() as u64;
                    let found = sub.candidates(keys, left, &mut slots);
                    for i in set_bits(found) {
                        subs[i] = idx;
                    }
                    left &= !found;
                    if left == 0 {
                        break;
                    }
                }
                tss_found |= group & !left;
            }
            // Load every candidate's record in a tight loop (the misses
            // overlap), then verify; a signature collision takes the full probe.
            let mut touch = 0u64;
            for i in set_bits(tss_found) {
                if let Some(Some(s)) = self.subtables.get(subs[i] as usize) {
                    touch ^= s.touch(slots[i]);
                }
            }
            std::hint::black_box(touch);
            for i in set_bits(tss_found) {
                let ok = matches!(self.subtables.get(subs[i] as usize), Some(Some(s)) if s.slot_matches(slots[i], &keys[i]));
                if !ok {
                    match self.find_slow(&keys[i]) {
                        Some((idx, slot)) => {
                            subs[i] = idx;
                            slots[i] = slot;
                        }
                        None => tss_found &= !(1 << i),
                    }
                }
            }
            pending &= !tss_found;
            self.counters.subtable_probes += probes;
            self.counters.tss_hits += tss_found.count_ones() as u64;
            self.counters.misses += pending.count_ones() as u64;
            if tss_found != 0 {
                self.emc_insert_hits(tss_found, &emc_hash, &subs, &slots);
            }
        }

        // 3. Stats and results.
        for i in 0..n {
            if pending & (1 << i) != 0 {
                out[i] = None;
                continue;
            }
            let Some(Some(sub)) = self.subtables.get_mut(subs[i] as usize) else {
                out[i] = None;
                continue;
            };
            let slot = slots[i];
            if tss_found & (1 << i) != 0 {
                sub.hits += 1;
            } else {
                // An EMC hit: what a search would have probed for it.
                self.emc_saved += u64::from(sub.depth);
            }
            sub.hit(slot, bytes[i], now, keys[i].tcp_flags() as u16);
            out[i] = sub.seq(slot).map(|seq| FlowHandle {
                sub: subs[i],
                sub_epoch: sub.epoch,
                slot,
                seq,
            });
        }

        self.lookups_until_rerank = self.lookups_until_rerank.saturating_sub(n as u32);
        if self.lookups_until_rerank == 0 {
            self.rerank();
        }
    }

    /// The megaflow matching `key`, by a full probe of its port's
    /// subtables and the port-independent ones.
    fn find_slow(&self, key: &FlowKey) -> Option<(u16, u32)> {
        self.subtables_for(key.in_port() as u32)
            .find_map(|idx| Some((idx, self.subtables[idx as usize].as_ref()?.find(key)?)))
    }

    /// The subtables a packet received on `port` probes, in order: its
    /// port's, then the port-independent ones.
    fn subtables_for(&self, port: u32) -> impl Iterator<Item = u16> + '_ {
        let own = self.classes.get(&port).into_iter().flatten();
        let any = (port != ANY_PORT)
            .then(|| self.classes.get(&ANY_PORT))
            .flatten()
            .into_iter()
            .flatten();
        own.chain(any).copied()
    }

    fn emc_insert_hits(&mut self, found: u64, emc_hash: &[u64], subs: &[u16], slots: &[u32]) {
        if !self.emc_on {
            return;
        }
        let inv = self.cfg.emc_insert_inv_prob.max(1) as u64;
        for i in set_bits(found) {
            // xorshift64: cheap, good enough to spread inserts.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if inv > 1 && self.rng % inv != 0 {
                continue;
            }
            self.emc
                .insert(emc_hash[i], subs[i], slots[i], self.rng >> 32);
        }
    }

    /// Sorts each port's subtables by recent hits and halves the counts.
    pub fn rerank(&mut self) {
        let subs = &mut self.subtables;
        for list in self.classes.values_mut() {
            list.sort_by_key(|&i| {
                std::cmp::Reverse(subs[i as usize].as_ref().map_or(0, |s| s.hits))
            });
            for (place, &i) in list.iter().enumerate() {
                if let Some(s) = subs[i as usize].as_mut() {
                    s.depth = place as u32 + 1;
                }
            }
        }
        for s in self.subtables.iter_mut().flatten() {
            s.hits /= 2;
        }
        self.lookups_until_rerank = self.cfg.rerank_interval.max(1);
        // The EMC while searches are deep enough to make it pay: the
        // subtables searches probed, and would have for the EMC's hits,
        // per lookup.
        let c = &self.counters;
        let probes = c.subtable_probes + self.emc_saved;
        let lookups = c.emc_hits + c.hinted_hits + c.tss_hits + c.misses;
        let (dp, dl) = (probes - self.probes_mark.0, lookups - self.probes_mark.1);
        self.probes_mark = (probes, lookups);
        if dl > 0 {
            let min = u64::from(self.cfg.emc_min_probes);
            self.emc_on = self.emc.is_enabled() && dp >= min * dl;
        }
    }

    /// Whether the EMC is in use now (`emc_min_probes`).
    pub fn emc_in_use(&self) -> bool {
        self.emc_on
    }

    /// Empties the exact-match cache (e.g. after a mass removal).
    pub fn clear_emc(&mut self) {
        self.emc.clear();
    }

    /// Approximate heap bytes held by the cache structures (not counting
    /// shared action lists).
    pub fn heap_bytes(&self) -> usize {
        let subs: usize = self
            .subtables
            .iter()
            .flatten()
            .map(Subtable::heap_bytes)
            .sum();
        subs + self.emc.heap_bytes()
            + self.subtables.capacity() * std::mem::size_of::<Option<Subtable>>()
    }
}

/// Indices of the set bits of a batch bitmap, lowest first.
#[inline(always)]
pub(crate) fn set_bits(mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (bits != 0).then(|| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            i
        })
    })
}

/// Port class of subtables whose masks do not match in_port exactly.
pub const ANY_PORT: u32 = u32::MAX;

/// The port class a match's flow belongs to: its in_port when the mask
/// matches in_port exactly (as every translated megaflow does), else
/// [`ANY_PORT`].
#[inline]
fn class_of(m: &Match) -> u32 {
    if m.mask().is_exact(Field::InPort) {
        m.key().in_port() as u32
    } else {
        ANY_PORT
    }
}

/// The handle of a live slot.
#[inline]
fn handle_of(sub_idx: u16, sub: &Subtable, slot: u32) -> FlowHandle {
    FlowHandle {
        sub: sub_idx,
        sub_epoch: sub.epoch,
        slot,
        seq: sub.seq(slot).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests;

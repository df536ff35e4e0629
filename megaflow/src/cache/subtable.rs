//! One subtable: every megaflow of one mask.
//!
//! Memory layout, chosen so a lookup costs about two cache lines:
//! - `buckets`: an open-addressing table of 64-byte buckets, each holding 7
//!   (32-bit signature, slot) pairs and an overflow count. A key hashes to
//!   one bucket; it lives there or, if that bucket was full, in a following
//!   one, and every bucket passed over counts it in `ovf`, so a lookup stops
//!   at the first bucket whose `ovf` is zero. Load stays under 80 %.
//! - `hot`: one record per slot, `nwords` masked key words followed by the
//!   stats (packets, bytes, used, meta = seq << 32 | LIVE | tcp_flags), so
//!   the key compare and the stats update touch the same memory.
//! - `cold`: per slot, what the lookup does not need (hash, actions,
//!   generation, offload state).
//!
//! Batch lookups run in phases over all pending packets (hash and touch the
//! bucket, then pick the candidate and touch its record, then compare): the
//! loads of different packets are independent, so their cache misses
//! overlap instead of queueing one after another.

use std::hint::black_box;

use super::{set_bits, FlowStats, RemovedFlow};
use crate::actions::Actions;
use crate::key::{FlowKey, Mask, Match, WordHasher, KEY_WORDS};
use crate::types::Timestamp;

const WAYS: usize = 7;
const EMPTY: u32 = u32::MAX;
const STATS_WORDS: usize = 4;
const LIVE: u64 = 1 << 16;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket {
    sig: [u32; WAYS],
    /// Keys that hashed to this bucket or an earlier one and live further on.
    ovf: u32,
    slot: [u32; WAYS],
    _pad: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    sig: [0; WAYS],
    ovf: 0,
    slot: [EMPTY; WAYS],
    _pad: 0,
};

#[derive(Clone, Debug)]
pub(super) struct Cold {
    hash: u64,
    pub(super) actions: Option<Actions>,
    pub(super) generation: u64,
    pub(super) offload: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Subtable {
    mask: Mask,
    words: [u8; KEY_WORDS],
    mask_words: [u64; KEY_WORDS],
    nwords: usize,
    stride: usize,
    buckets: Vec<Bucket>,
    hot: Vec<u64>,
    cold: Vec<Cold>,
    free: Vec<u32>,
    live: usize,
    pub(super) hits: u64,
    /// Its place in its class's probing order at the last re-ranking (1:
    /// first): the subtables a search probes to find one of its flows.
    pub(super) depth: u32,
    pub(super) epoch: u32,
    /// The in_port this subtable's flows all match exactly, or [`super::ANY_PORT`].
    pub(super) class: u32,
}

#[inline(always)]
fn sig_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}

impl Subtable {
    pub(super) fn new(mask: &Mask, epoch: u32, class: u32) -> Self {
        let mut words = [0u8; KEY_WORDS];
        let mut mask_words = [0u64; KEY_WORDS];
        let mut nwords = 0;
        for (i, &w) in mask.words().iter().enumerate() {
            if w != 0 {
                words[nwords] = i as u8;
                mask_words[nwords] = w;
                nwords += 1;
            }
        }
        Subtable {
            mask: *mask,
            words,
            mask_words,
            nwords,
            stride: nwords + STATS_WORDS,
            buckets: vec![EMPTY_BUCKET; 2],
            hot: Vec::new(),
            cold: Vec::new(),
            free: Vec::new(),
            live: 0,
            hits: 0,
            depth: 1,
            epoch,
            class,
        }
    }

    pub(super) fn mask(&self) -> &Mask {
        &self.mask
    }

    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Hash of `key & mask` over the used words only.
    #[inline(always)]
    pub(super) fn hash_of(&self, key: &FlowKey) -> u64 {
        let kw = key.words();
        let mut h = WordHasher::new();
        for j in 0..self.nwords {
            h.push(kw[self.words[j] as usize] & self.mask_words[j]);
        }
        h.finish()
    }

    #[inline(always)]
    fn record(&self, slot: u32) -> &[u64] {
        let base = slot as usize * self.stride;
        self.hot.get(base..base + self.stride).unwrap_or(&[])
    }

    #[inline(always)]
    fn meta(&self, slot: u32) -> u64 {
        self.record(slot).get(self.nwords + 3).copied().unwrap_or(0)
    }

    /// True when `slot` is live and its stored words equal `key & mask`.
    #[inline(always)]
    pub(super) fn slot_matches(&self, slot: u32, key: &FlowKey) -> bool {
        let r = self.record(slot);
        if r.len() != self.stride || r[self.nwords + 3] & LIVE == 0 {
            return false;
        }
        let kw = key.words();
        (0..self.nwords).all(|j| kw[self.words[j] as usize] & self.mask_words[j] == r[j])
    }

    /// The slot whose megaflow matches `key`.
    #[inline]
    pub(super) fn find(&self, key: &FlowKey) -> Option<u32> {
        self.find_hashed(key, self.hash_of(key))
    }

    #[inline]
    fn find_hashed(&self, key: &FlowKey, hash: u64) -> Option<u32> {
        self.probe(hash, |slot| self.slot_matches(slot, key))
    }

    /// Walks the buckets from the hash's home bucket (following overflow)
    /// and returns the first live slot with the hash's signature that
    /// `accept` takes.
    #[inline(always)]
    fn probe(&self, hash: u64, mut accept: impl FnMut(u32) -> bool) -> Option<u32> {
        let sig = sig_of(hash);
        let bmask = self.buckets.len() - 1;
        let mut b = hash as usize & bmask;
        for _ in 0..self.buckets.len() {
            let bk = &self.buckets[b];
            for w in 0..WAYS {
                if bk.sig[w] == sig && bk.slot[w] != EMPTY && accept(bk.slot[w]) {
                    return Some(bk.slot[w]);
                }
            }
            if bk.ovf == 0 {
                return None;
            }
            b = (b + 1) & bmask;
        }
        None
    }

    /// For every packet whose bit is set in `pending`, finds the first slot
    /// whose signature matches and starts loading its record; sets the
    /// packet's bit in the result and its slot in `slots`. Candidates are
    /// *not* verified nor loaded: the caller loads and verifies them all at the end of the batch
    /// (a signature collision is rare and falls back to [`Subtable::find`]),
    /// so the record loads of the whole batch overlap.
    #[inline]
    pub(super) fn candidates<const N: usize>(
        &self,
        keys: &[FlowKey],
        pending: u64,
        slots: &mut [u32; N],
    ) -> u64 {
        let mut hashes = [0u64; N];
        let bmask = self.buckets.len() - 1;
        let mut touch = 0u64;

        // Phase 1: hash (compute only), then load every packet's bucket in a
        // tight loop, so many cache misses are in flight at once.
        for i in set_bits(pending) {
            hashes[i] = self.hash_of(&keys[i]);
        }
        for i in set_bits(pending) {
            touch ^= self.buckets[hashes[i] as usize & bmask].ovf as u64;
        }

        // Phase 2: first candidate by signature (following overflow). The
        // caller loads the records of all candidates of the batch together.
        let mut found = 0u64;
        for i in set_bits(pending) {
            if let Some(s) = self.candidate(hashes[i]) {
                slots[i] = s;
                found |= 1 << i;
            }
        }
        black_box(touch);
        found
    }

    /// Loads the first word of a slot's record and returns it (for the
    /// caller to fold into a value it keeps, so the load is not elided).
    #[inline(always)]
    pub(super) fn touch(&self, slot: u32) -> u64 {
        self.hot
            .get(slot as usize * self.stride)
            .copied()
            .unwrap_or(0)
    }

    /// The first live slot whose signature equals the hash's.
    #[inline(always)]
    fn candidate(&self, hash: u64) -> Option<u32> {
        self.probe(hash, |_| true)
    }

    /// Counts one packet in a slot found by a lookup.
    #[inline(always)]
    pub(super) fn hit(&mut self, slot: u32, bytes: u32, now: Timestamp, tcp_flags: u16) {
        self.fold(slot, 1, bytes as u64, now, tcp_flags);
    }

    /// Adds counts to a slot's stats record.
    #[inline(always)]
    fn fold(&mut self, slot: u32, packets: u64, bytes: u64, used: Timestamp, tcp_flags: u16) {
        let base = slot as usize * self.stride + self.nwords;
        if let Some(st) = self.hot.get_mut(base..base + STATS_WORDS) {
            st[0] += packets;
            st[1] += bytes;
            st[2] = st[2].max(used.0);
            st[3] |= tcp_flags as u64;
        }
    }

    /// The sequence number of a live slot.
    #[inline]
    pub(super) fn seq(&self, slot: u32) -> Option<u32> {
        let m = self.meta(slot);
        (m & LIVE != 0).then_some((m >> 32) as u32)
    }

    pub(super) fn stats(&self, slot: u32) -> FlowStats {
        let r = self.record(slot);
        match r.get(self.nwords..self.nwords + STATS_WORDS) {
            Some(st) => FlowStats {
                packets: st[0],
                bytes: st[1],
                used: Timestamp(st[2]),
                tcp_flags: st[3] as u16,
            },
            None => FlowStats::default(),
        }
    }

    pub(super) fn add_stats(&mut self, slot: u32, s: &FlowStats) {
        self.fold(slot, s.packets, s.bytes, s.used, s.tcp_flags);
    }

    pub(super) fn cold(&self, slot: u32) -> Option<&Cold> {
        self.cold.get(slot as usize)
    }

    pub(super) fn cold_mut(&mut self, slot: u32) -> Option<&mut Cold> {
        self.cold.get_mut(slot as usize)
    }

    pub(super) fn match_of(&self, slot: u32) -> Match {
        let mut w = [0u64; KEY_WORDS];
        for (j, &v) in self.record(slot).iter().take(self.nwords).enumerate() {
            w[self.words[j] as usize] = v;
        }
        Match::new(&FlowKey::from_words(w), &self.mask)
    }

    /// Live slots.
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.cold.len() as u32).filter(move |&s| self.meta(s) & LIVE != 0)
    }

    /// Inserts a megaflow whose key is already masked. `Err(slot)` names the
    /// identical flow already present.
    pub(super) fn insert(
        &mut self,
        key: &FlowKey,
        actions: Actions,
        generation: u64,
    ) -> Result<u32, u32> {
        let hash = self.hash_of(key);
        if let Some(s) = self.find_hashed(key, hash) {
            return Err(s);
        }
        if (self.live + 1) * 5 > self.buckets.len() * WAYS * 4 {
            self.grow();
        }
        let kw = key.words();
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = self.cold.len() as u32;
                self.hot.resize(self.hot.len() + self.stride, 0);
                self.cold.push(Cold {
                    hash: 0,
                    actions: None,
                    generation: 0,
                    offload: 0,
                });
                s
            }
        };
        let base = slot as usize * self.stride;
        let seq = self.hot[base + self.nwords + 3] >> 32;
        let rec = &mut self.hot[base..base + self.stride];
        for j in 0..self.nwords {
            rec[j] = kw[self.words[j] as usize] & self.mask_words[j];
        }
        rec[self.nwords..].copy_from_slice(&[0, 0, 0, (seq << 32) | LIVE]);
        self.cold[slot as usize] = Cold {
            hash,
            actions: Some(actions),
            generation,
            offload: 0,
        };
        self.place(hash, slot);
        self.live += 1;
        Ok(slot)
    }

    fn place(&mut self, hash: u64, slot: u32) {
        let bmask = self.buckets.len() - 1;
        let mut b = hash as usize & bmask;
        // Load is kept under 80 %, so a free way exists within the table.
        for _ in 0..self.buckets.len() {
            let bk = &mut self.buckets[b];
            if let Some(w) = bk.slot.iter().position(|&s| s == EMPTY) {
                bk.slot[w] = slot;
                bk.sig[w] = sig_of(hash);
                return;
            }
            bk.ovf += 1;
            b = (b + 1) & bmask;
        }
        unreachable!("bucket table full despite the load limit");
    }

    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        self.buckets = vec![EMPTY_BUCKET; n];
        for s in 0..self.cold.len() as u32 {
            if self.meta(s) & LIVE != 0 {
                let h = self.cold[s as usize].hash;
                self.place(h, s);
            }
        }
    }

    /// Removes a live slot.
    pub(super) fn remove(&mut self, slot: u32) -> Option<RemovedFlow> {
        self.seq(slot)?;
        let hash = self.cold.get(slot as usize)?.hash;
        let bmask = self.buckets.len() - 1;
        let mut b = hash as usize & bmask;
        let mut unlinked = false;
        for _ in 0..self.buckets.len() {
            let bk = &mut self.buckets[b];
            if let Some(w) = bk.slot.iter().position(|&s| s == slot) {
                bk.slot[w] = EMPTY;
                unlinked = true;
                break;
            }
            bk.ovf -= 1;
            b = (b + 1) & bmask;
        }
        debug_assert!(unlinked, "a live slot is in the bucket table");
        let matched = self.match_of(slot);
        let stats = self.stats(slot);
        let base = slot as usize * self.stride + self.nwords;
        let seq = (self.hot[base + 3] >> 32).wrapping_add(1) & 0xffff_ffff;
        self.hot[base..base + STATS_WORDS].copy_from_slice(&[0, 0, 0, seq << 32]);
        let cold = &mut self.cold[slot as usize];
        let actions = cold.actions.take()?;
        self.free.push(slot);
        self.live -= 1;
        Some(RemovedFlow {
            matched,
            actions,
            stats,
            generation: cold.generation,
            offload: cold.offload,
        })
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.hot.capacity() * 8
            + self.cold.capacity() * std::mem::size_of::<Cold>()
            + self.free.capacity() * 4
    }
}

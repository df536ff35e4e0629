//! A matcher's rules as the device holds them: one hash table keyed by the
//! masked value (Direct Rule keeps each matcher as hash tables of STEs
//! keyed by the masked bytes), so a lookup costs one hash of the few mask
//! words in use, whatever the number of rules.
//!
//! The packet side is a [`PacketKey`]: the packet's `fte_match_param` as 32
//! native-endian words. A matcher keeps the positions and masks of its
//! non-zero mask words; a rule's key is its value at those words.
//!
//! Layout for speed: open addressing with linear probing over one word per
//! bucket (32 bits of hash and the slot), keys apart in slot order, so the
//! buckets of a matcher stay small enough to live in cache; a batch of
//! packets is probed in two passes (load every first bucket, then resolve),
//! so the memory accesses of different packets overlap, and a key is only
//! read when its bucket's hash bits agree.
//!
//! In front of the buckets sits a presence filter, four bits per bucket
//! (a sixteenth of the table's bytes): a packet
//! whose bit is clear cannot be in the matcher, so the matchers a packet
//! walks past cost a cache-resident bit test rather than a bucket read. A
//! removal leaves its bit set (a false positive costs a probe, never a
//! wrong answer); the filter is rebuilt with the table.
//!
//! Duplicates (same key) are kept in insertion order and the oldest one
//! answers, as the device's miss list does; removing it promotes the next.

use std::collections::{HashMap, VecDeque};

use super::packet::PacketKey;

/// Packets walked together: each matcher is probed for every packet of the
/// batch before the next, so the memory accesses of different packets
/// overlap (the batching of Open vSwitch's dpcls).
pub(crate) const BATCH: usize = 32;

/// Words of an `fte_match_param` the sim models (outer, misc, inner, misc2).
pub(crate) const WORDS: usize = crate::prm::ENCODED_LEN / 8;

const EMPTY: u64 = 0;
const TOMB: u64 = u64::MAX;
const NONE: u32 = u32::MAX;

/// Converts match bytes to words the way [`PacketKey`] holds them.
pub(crate) fn to_words(bytes: &[u8]) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    for (i, chunk) in bytes.chunks(8).take(WORDS).enumerate() {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w[i] = u64::from_ne_bytes(b);
    }
    w
}

const SEED: u64 = 0x243f_6a88_85a3_08d3;

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

#[inline]
fn finish(h: u64) -> u64 {
    let h = (h ^ (h >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

/// The bucket tag of a hash and slot: never EMPTY or TOMB.
#[inline]
fn tag(h: u64, slot: u32) -> u64 {
    (h >> 32) << 32 | u64::from(slot + 1)
}

/// The rules of one matcher, by masked value, each with a payload `T` (the
/// answering rule's compiled actions).
#[derive(Debug)]
pub(crate) struct MatcherIndex<T> {
    /// Word positions with a non-zero mask.
    pos: Box<[u8]>,
    /// The mask at each position.
    masks: Box<[u64]>,
    /// Buckets: EMPTY, TOMB or [`tag`].
    table: Vec<u64>,
    /// Keys, `pos.len()` words per slot.
    keys: Vec<u64>,
    /// Presence filter: `cap * 4` bits.
    filter: Vec<u64>,
    /// Removals since the filter was built.
    stale: usize,
    /// Buckets in `table` (a power of two).
    cap: usize,
    /// Buckets not EMPTY (live and tombstones).
    used: usize,
    live: usize,
    /// Slot → the rule that answers (NONE when the slot is free).
    active: Vec<u32>,
    /// Slot → the answering rule's payload.
    payload: Vec<T>,
    /// Slot → its bucket.
    bucket: Vec<u32>,
    /// Slot → younger rules with the same key, oldest first.
    dups: HashMap<u32, VecDeque<u32>>,
    free: Vec<u32>,
}

impl<T: Clone + Default> MatcherIndex<T> {
    /// An index for a matcher whose mask words are `mask`.
    pub(crate) fn new(mask: &[u64; WORDS]) -> Self {
        let pos: Vec<u8> = (0..WORDS as u8)
            .filter(|&i| mask[usize::from(i)] != 0)
            .collect();
        let masks = pos.iter().map(|&i| mask[usize::from(i)]).collect();
        let cap = 16;
        MatcherIndex {
            table: vec![EMPTY; cap],
            keys: Vec::new(),
            filter: vec![0; cap / 16],
            stale: 0,
            pos: pos.into_boxed_slice(),
            masks,
            cap,
            used: 0,
            live: 0,
            active: Vec::new(),
            payload: Vec::new(),
            bucket: Vec::new(),
            dups: HashMap::new(),
            free: Vec::new(),
        }
    }

    #[inline]
    fn key_at(&self, slot: u32) -> &[u64] {
        let w = self.pos.len();
        let start = slot as usize * w;
        self.keys.get(start..start + w).unwrap_or(&[])
    }

    /// The value words of the key in `slot` (zero outside the mask), for
    /// dumps.
    pub(crate) fn words_of(&self, slot: u32) -> [u64; WORDS] {
        let mut w = [0u64; WORDS];
        for (&p, &k) in self.pos.iter().zip(self.key_at(slot)) {
            if let Some(x) = w.get_mut(usize::from(p)) {
                *x = k;
            }
        }
        w
    }

    /// The key of a rule value (already inside the mask).
    pub(crate) fn key_of(&self, value: &[u64; WORDS]) -> Vec<u64> {
        self.pos
            .iter()
            .zip(self.masks.iter())
            .map(|(&p, &m)| value[usize::from(p)] & m)
            .collect()
    }

    fn hash(key: &[u64]) -> u64 {
        finish(key.iter().fold(SEED, |h, &w| mix(h, w)))
    }

    /// The filter word and bit of a hash.
    #[inline]
    fn filter_bit(&self, h: u64) -> (usize, u64) {
        let bit = (h.rotate_right(24) as usize) & (self.cap * 4 - 1);
        (bit / 64, 1u64 << (bit % 64))
    }

    /// Whether the filter admits `h`.
    #[inline]
    fn may_contain(&self, h: u64) -> bool {
        let (w, b) = self.filter_bit(h);
        self.filter.get(w).is_some_and(|&x| x & b != 0)
    }

    fn mark(&mut self, h: u64) {
        let (w, b) = self.filter_bit(h);
        if let Some(x) = self.filter.get_mut(w) {
            *x |= b;
        }
    }

    /// The masked key of a packet and its hash.
    #[inline]
    fn packet_key(&self, pkt: &PacketKey, key: &mut [u64; WORDS]) -> u64 {
        let mut h = SEED;
        for ((k, &p), &m) in key.iter_mut().zip(self.pos.iter()).zip(self.masks.iter()) {
            *k = pkt.words[usize::from(p)] & m;
            h = mix(h, *k);
        }
        finish(h)
    }

    /// The slot holding `key`, probing from bucket `i`.
    #[inline]
    fn find_from(&self, key: &[u64], h: u64, mut i: usize) -> Option<u32> {
        let want = h >> 32;
        loop {
            let e = *self.table.get(i)?;
            if e == EMPTY {
                return None;
            }
            if e != TOMB && e >> 32 == want {
                let slot = (e as u32).wrapping_sub(1);
                if self.key_at(slot).iter().zip(key).all(|(a, b)| a == b) {
                    return Some(slot);
                }
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    fn find(&self, key: &[u64], h: u64) -> Option<u32> {
        self.find_from(key, h, h as usize & (self.cap - 1))
    }

    /// Looks up the packets `group` of `keys` that have no hit yet, filling
    /// `hits`. First every packet's first bucket is read (independent loads
    /// the CPU overlaps), then each is resolved.
    #[inline]
    pub(crate) fn lookup_batch<'a>(
        &'a self,
        keys: &[PacketKey],
        group: &[u8],
        hits: &mut [Option<&'a T>],
    ) {
        const B: usize = BATCH;
        let mut first = [0u64; B];
        let mut sink = 0u64;
        for &i in group {
            let i = usize::from(i);
            let (Some(pkt), Some(None)) = (keys.get(i), hits.get(i)) else {
                continue;
            };
            let mut h = SEED;
            for (&p, &m) in self.pos.iter().zip(self.masks.iter()) {
                h = mix(h, pkt.words[usize::from(p)] & m);
            }
            let h = finish(h);
            let e = if self.may_contain(h) {
                self.table
                    .get(h as usize & (self.cap - 1))
                    .copied()
                    .unwrap_or(EMPTY)
            } else {
                EMPTY
            };
            first[i] = e;
            sink ^= e;
        }
        std::hint::black_box(sink);
        let mut key = [0u64; WORDS];
        for &i in group {
            let i = usize::from(i);
            let (Some(pkt), Some(hit)) = (keys.get(i), hits.get_mut(i)) else {
                continue;
            };
            if hit.is_some() || first[i] == EMPTY {
                continue;
            }
            let h = self.packet_key(pkt, &mut key);
            if let Some(slot) = key
                .get(..self.pos.len())
                .and_then(|k| self.find_from(k, h, h as usize & (self.cap - 1)))
            {
                *hit = self.payload.get(slot as usize);
            }
        }
    }

    /// Adds `rule` under `key`, after any rules with the same key if
    /// `duplicates` allows, and returns its slot; None for a refused
    /// duplicate. `payload` is kept when the rule answers.
    pub(crate) fn insert(
        &mut self,
        key: &[u64],
        rule: u32,
        payload: T,
        duplicates: bool,
    ) -> Option<u32> {
        let h = Self::hash(key);
        if let Some(slot) = self.find(key, h) {
            if !duplicates {
                return None;
            }
            self.dups.entry(slot).or_default().push_back(rule);
            return Some(slot);
        }
        if (self.used + 1) * 2 > self.cap {
            self.rehash();
        }
        let slot = match self.free.pop() {
            Some(s) => {
                let w = self.pos.len();
                let start = s as usize * w;
                if let Some(dst) = self.keys.get_mut(start..start + w) {
                    dst.copy_from_slice(key);
                }
                if let Some(a) = self.active.get_mut(s as usize) {
                    *a = rule;
                }
                if let Some(p) = self.payload.get_mut(s as usize) {
                    *p = payload;
                }
                s
            }
            None => {
                self.keys.extend_from_slice(key);
                self.active.push(rule);
                self.payload.push(payload);
                self.bucket.push(0);
                (self.active.len() - 1) as u32
            }
        };
        if self.place(h, slot) {
            self.used += 1;
        }
        self.mark(h);
        self.live += 1;
        Some(slot)
    }

    /// Puts `slot` into the first free bucket; true if it was EMPTY (not a
    /// tombstone).
    fn place(&mut self, h: u64, slot: u32) -> bool {
        let mut i = h as usize & (self.cap - 1);
        loop {
            let Some(e) = self.table.get_mut(i) else {
                return false;
            };
            if *e == EMPTY || *e == TOMB {
                let was_empty = *e == EMPTY;
                *e = tag(h, slot);
                if let Some(p) = self.bucket.get_mut(slot as usize) {
                    *p = i as u32;
                }
                return was_empty;
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    /// Rebuilds the table, doubling it when more than a quarter is live.
    fn rehash(&mut self) {
        let old = std::mem::take(&mut self.table);
        if (self.live + 1) * 4 > self.cap {
            self.cap *= 2;
        }
        self.table = vec![EMPTY; self.cap];
        self.filter = vec![0; self.cap / 16];
        self.stale = 0;
        self.used = 0;
        for e in old {
            if e != EMPTY && e != TOMB {
                let slot = (e as u32).wrapping_sub(1);
                let h = Self::hash(self.key_at(slot));
                if self.place(h, slot) {
                    self.used += 1;
                }
                self.mark(h);
            }
        }
    }

    /// Removes `rule` from `slot`; the next duplicate, if any, takes over
    /// with the payload `promote` gives for it.
    pub(crate) fn remove(&mut self, slot: u32, rule: u32, promote: impl FnOnce(u32) -> T) {
        let Some(&cur) = self.active.get(slot as usize) else {
            return;
        };
        if cur != rule {
            if let Some(q) = self.dups.get_mut(&slot) {
                q.retain(|&r| r != rule);
                if q.is_empty() {
                    self.dups.remove(&slot);
                }
            }
            return;
        }
        if let Some(q) = self.dups.get_mut(&slot) {
            if let Some(next) = q.pop_front() {
                if q.is_empty() {
                    self.dups.remove(&slot);
                }
                if let Some(a) = self.active.get_mut(slot as usize) {
                    *a = next;
                }
                if let Some(p) = self.payload.get_mut(slot as usize) {
                    *p = promote(next);
                }
                return;
            }
        }
        if let Some(&b) = self.bucket.get(slot as usize) {
            if let Some(e) = self.table.get_mut(b as usize) {
                *e = TOMB;
            }
        }
        if let Some(a) = self.active.get_mut(slot as usize) {
            *a = NONE;
        }
        if let Some(p) = self.payload.get_mut(slot as usize) {
            *p = T::default();
        }
        self.free.push(slot);
        self.live -= 1;
        self.stale += 1;
        if self.stale > self.cap / 2 {
            self.rehash();
        }
    }
}

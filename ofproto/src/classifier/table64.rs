//! A small open-addressing map from 64-bit hashes to `u32` values: the
//! subtables' stage sets (hash → count) and final index (hash → node).
//!
//! The keys are already well-mixed hashes, so the map does no hashing of
//! its own: linear probing from bits of the key, keys stored as `key | 1` so
//! that 0 marks an empty slot. Two hashes that differ only in bit 0 thus
//! share an entry; every user tolerates that (a stage set then lets a packet
//! through to the next stage, the index verifies the node's key), and it
//! happens with probability 2^-63 per pair.
//!
//! Invariants: the capacity is a power of two and at most half full, so a
//! probe always ends at an empty slot; removal shifts the following entries
//! back (no tombstones), so probe sequences stay short after churn.
//!
//! Single-owner data, like the subtable that holds it.

/// Map from a hash to a `u32`.
#[derive(Clone, Debug)]
pub(crate) struct Table64 {
    /// `key | 1`, or 0 for an empty slot.
    keys: Vec<u64>,
    vals: Vec<u32>,
    len: usize,
}

impl Default for Table64 {
    fn default() -> Self {
        Table64 {
            keys: vec![0; 1],
            vals: vec![0; 1],
            len: 0,
        }
    }
}

impl Table64 {
    #[inline]
    fn slot_mask(&self) -> usize {
        self.keys.len() - 1
    }

    #[inline]
    fn home(stored: u64, mask: usize) -> usize {
        (stored >> 1) as usize & mask
    }

    /// Slot holding `hash`, or the empty slot where it would go.
    #[inline]
    fn find(&self, hash: u64) -> (usize, bool) {
        let k = hash | 1;
        let mask = self.slot_mask();
        let mut i = Self::home(k, mask);
        loop {
            let s = self.keys[i];
            if s == k {
                return (i, true);
            }
            if s == 0 {
                return (i, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value stored for `hash`.
    #[inline]
    pub fn get(&self, hash: u64) -> Option<u32> {
        match self.find(hash) {
            (i, true) => Some(self.vals[i]),
            _ => None,
        }
    }

    /// True when `hash` has an entry.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        self.find(hash).1
    }

    /// The value of `hash`, inserting `init` first when absent.
    pub fn entry(&mut self, hash: u64, init: u32) -> &mut u32 {
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let (i, found) = self.find(hash);
        if !found {
            self.keys[i] = hash | 1;
            self.vals[i] = init;
            self.len += 1;
        }
        &mut self.vals[i]
    }

    /// Sets the value of `hash`.
    pub fn insert(&mut self, hash: u64, val: u32) {
        *self.entry(hash, val) = val;
    }

    /// The value of `hash`, mutably.
    pub fn get_mut(&mut self, hash: u64) -> Option<&mut u32> {
        match self.find(hash) {
            (i, true) => Some(&mut self.vals[i]),
            _ => None,
        }
    }

    /// Removes `hash`; its value, if it was there.
    pub fn remove(&mut self, hash: u64) -> Option<u32> {
        let (mut hole, found) = self.find(hash);
        if !found {
            return None;
        }
        let val = self.vals[hole];
        let mask = self.slot_mask();
        // Backward shift: move every following entry of the run whose home
        // is not between the hole and itself into the hole.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.keys[j];
            if s == 0 {
                break;
            }
            let home = Self::home(s, mask);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.keys[hole] = s;
                self.vals[hole] = self.vals[j];
                hole = j;
            }
        }
        self.keys[hole] = 0;
        self.len -= 1;
        Some(val)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn grow(&mut self) {
        let cap = (self.keys.len() * 2).max(4);
        let keys = std::mem::replace(&mut self.keys, vec![0; cap]);
        let vals = std::mem::replace(&mut self.vals, vec![0; cap]);
        let mask = cap - 1;
        for (k, v) in keys.into_iter().zip(vals) {
            if k != 0 {
                let mut i = Self::home(k, mask);
                while self.keys[i] != 0 {
                    i = (i + 1) & mask;
                }
                self.keys[i] = k;
                self.vals[i] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_hash_map_under_churn() {
        let mut t = Table64::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // few distinct keys, clustered homes: long runs and wrap-around
            let key =
                ((x % 97) << 1 | 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) & 0xff00_0000_0000_00ff;
            if x % 3 == 0 {
                assert_eq!(t.remove(key), model.remove(&(key | 1)), "step {step}");
            } else {
                *t.entry(key, 0) += 1;
                *model.entry(key | 1).or_insert(0) += 1;
            }
            assert_eq!(t.len(), model.len());
            if step % 64 == 0 {
                for (&k, &v) in &model {
                    assert_eq!(t.get(k), Some(v));
                }
            }
            assert_eq!(t.get(key), model.get(&(key | 1)).copied());
        }
    }

    #[test]
    fn empty_table_finds_nothing() {
        let mut t = Table64::default();
        assert!(!t.contains(5));
        assert_eq!(t.remove(5), None);
        t.insert(5, 9);
        assert_eq!(t.get(4), Some(9), "4 | 1 == 5 | 1: the documented merge");
        assert_eq!(t.get_mut(5).map(|v| *v), Some(9));
    }
}

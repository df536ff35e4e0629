//! The exact-match cache: hash of the whole key -> (subtable, slot) hint.
//!
//! Entries are packed into one `u64` (24-bit signature, 12-bit subtable
//! index + 1, 28-bit slot) and grouped in 8-way sets of one cache line, so a
//! probe reads one line. Entries are hints: the caller verifies each one
//! against the megaflow it names, so stale entries are harmless and removal
//! never has to find them. Flows whose subtable index or slot do not fit the
//! packing are simply not cached here.

const WAYS: usize = 8;
const SIG_SHIFT: u32 = 40;
const SUB_SHIFT: u32 = 28;
const SUB_BITS: u64 = 0xfff;
const SLOT_BITS: u64 = 0x0fff_ffff;

#[derive(Clone, Debug)]
pub(super) struct Emc {
    entries: Vec<u64>,
    set_mask: usize,
}

#[inline(always)]
fn sig_of(hash: u64) -> u64 {
    hash >> SIG_SHIFT
}

impl Emc {
    /// `entries` is rounded up to a power of two of at least one set; 0 disables.
    pub(super) fn new(entries: usize) -> Self {
        if entries == 0 {
            return Emc {
                entries: Vec::new(),
                set_mask: 0,
            };
        }
        let n = entries.next_power_of_two().max(WAYS);
        Emc {
            entries: vec![0; n],
            set_mask: n / WAYS - 1,
        }
    }

    #[inline(always)]
    pub(super) fn is_enabled(&self) -> bool {
        !self.entries.is_empty()
    }

    #[inline(always)]
    fn set(&self, hash: u64) -> usize {
        (hash as usize & self.set_mask) * WAYS
    }

    /// Calls `verify(sub, slot)` on each candidate for `hash` until it
    /// returns true; returns that candidate.
    #[inline(always)]
    pub(super) fn lookup(
        &self,
        hash: u64,
        mut verify: impl FnMut(u16, u32) -> bool,
    ) -> Option<(u16, u32)> {
        let base = self.set(hash);
        let sig = sig_of(hash);
        let set = self.entries.get(base..base + WAYS)?;
        for &e in set {
            let sub = (e >> SUB_SHIFT) & SUB_BITS;
            if e >> SIG_SHIFT == sig && sub != 0 {
                let (sub, slot) = ((sub - 1) as u16, (e & SLOT_BITS) as u32);
                if verify(sub, slot) {
                    return Some((sub, slot));
                }
            }
        }
        None
    }

    /// The first entry whose signature matches `hash`, unverified.
    #[inline(always)]
    pub(super) fn candidate(&self, hash: u64) -> Option<(u16, u32)> {
        self.lookup(hash, |_, _| true)
    }

    /// Loads the set `hash` maps to and returns one word of it (for the
    /// caller to keep, so the load is not elided).
    #[inline(always)]
    pub(super) fn touch(&self, hash: u64) -> u64 {
        self.entries.get(self.set(hash)).copied().unwrap_or(0)
    }

    /// Remembers that the key hashing to `hash` is in (sub, slot). `victim`
    /// picks the way to replace when the set is full.
    pub(super) fn insert(&mut self, hash: u64, sub: u16, slot: u32, victim: u64) {
        if !self.is_enabled() || sub as u64 >= SUB_BITS || slot as u64 > SLOT_BITS {
            return;
        }
        let base = self.set(hash);
        let sig = sig_of(hash);
        let entry = (sig << SIG_SHIFT) | ((sub as u64 + 1) << SUB_SHIFT) | slot as u64;
        let set = &mut self.entries[base..base + WAYS];
        let way = set
            .iter()
            .position(|&e| e >> SIG_SHIFT == sig && e != 0)
            .or_else(|| set.iter().position(|&e| e == 0))
            .unwrap_or(victim as usize % WAYS);
        set[way] = entry;
    }

    pub(super) fn clear(&mut self) {
        self.entries.fill(0);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_then_lookup_and_replace() {
        let mut e = Emc::new(16);
        e.insert(0xdead_beef_0000_0003, 4, 77, 0);
        assert_eq!(e.lookup(0xdead_beef_0000_0003, |_, _| true), Some((4, 77)));
        // A rejecting verifier means no hit.
        assert_eq!(e.lookup(0xdead_beef_0000_0003, |_, _| false), None);
        // Same signature: the entry is updated in place.
        e.insert(0xdead_beef_0000_0003, 5, 1, 0);
        assert_eq!(e.lookup(0xdead_beef_0000_0003, |_, _| true), Some((5, 1)));
        // Values that do not fit the packing are not cached.
        e.insert(0x1111_0000_0000_0001, 0xfff, 1, 0);
        e.insert(0x2222_0000_0000_0001, 1, 1 << 29, 0);
        assert_eq!(e.lookup(0x1111_0000_0000_0001, |_, _| true), None);
        assert_eq!(e.lookup(0x2222_0000_0000_0001, |_, _| true), None);
        e.clear();
        assert_eq!(e.lookup(0xdead_beef_0000_0003, |_, _| true), None);
    }

    #[test]
    fn full_set_replaces_the_victim_way() {
        let mut e = Emc::new(8); // one set
        for i in 0..8u64 {
            e.insert((i + 1) << 40, 0, i as u32, 0);
        }
        e.insert(100 << 40, 0, 100, 3);
        assert_eq!(e.lookup(100 << 40, |_, _| true), Some((0, 100)));
        assert_eq!(
            e.lookup(4 << 40, |_, _| true),
            None,
            "way 3 held the 4th entry"
        );
        assert_eq!(e.lookup(5 << 40, |_, _| true), Some((0, 4)));
    }

    #[test]
    fn disabled_cache_never_hits() {
        let mut e = Emc::new(0);
        e.insert(1, 0, 0, 0);
        assert!(!e.is_enabled());
        assert_eq!(e.lookup(1, |_, _| true), None);
    }
}

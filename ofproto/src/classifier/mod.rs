//! The OpenFlow classifier of one table: highest-priority match with
//! wildcard tracking as wide as Open vSwitch's (`lib/classifier.c`,
//! `find_match_wc`), and wider in three places.
//!
//! ## What a lookup promises
//!
//! `lookup(key, wc)` returns the highest-priority rule matching `key` and
//! un-wildcards in `wc` a set of key bits `M` such that every key agreeing
//! with `key` on `M` gets the same answer ("soundness"); `M` is kept small,
//! since it becomes the mask of the megaflow the translation installs.
//! Among equal-priority overlapping rules the answer is the one found first
//! in the (fixed) subtable order; the answer is therefore a function of the
//! key and the classifier's contents alone, whatever path a lookup takes.
//!
//! ## Structure
//!
//! - Tuple space search: one [`Subtable`] per distinct mask, kept sorted by
//!   the highest priority of its rules. A lookup visits them in that order and
//!   stops as soon as the best priority found is at least the next
//!   subtable's maximum; skipped subtables cannot change the answer (a tie
//!   keeps the earlier rule), so they record nothing.
//! - Staged lookup inside a subtable (metadata, L2, L3, L4 hash stages) and a
//!   port-pair trie per subtable: see `subtable.rs`.
//! - Four prefix tries over the whole classifier, for `ipv4_src`, `ipv4_dst`
//!   (also ARP SPA/TPA), `ipv6_src`, `ipv6_dst` (`trie.rs`). A rule whose mask
//!   on such a field is a CIDR prefix of length `p > 0` has its prefix in the
//!   field's trie (one entry per distinct match, as nodes are counted).
//!
//! ## Prefix-trie skips and why `min(examined, p)` bits suffice
//!
//! A lookup walks a trie at most once (lazily, when the first subtable using
//! it is reached, and only when the packet's eth_type is one the field
//! applies to: 0x0800/0x0806 for the v4 slots, 0x86dd for v6; otherwise the
//! subtable relies on its stages). The walk of the packet's address `a`
//! yields `plens` (the lengths `p` with a stored prefix equal to `a`'s top
//! `p` bits) and `e`, the bits examined. Before hashing anything in a
//! subtable whose mask on the field is the prefix `/p`, if `p ∉ plens` the
//! subtable cannot match, and only the top `min(e, p)` bits of the field are
//! recorded. Let `q` agree with `a` on those bits:
//! - if `p ≤ e`, `q`'s top `p` bits are `a`'s, and no stored prefix of length
//!   `p` equals them;
//! - if `p > e`, `q` agrees with `a` on the `e` examined bits, so by the
//!   trie lemma its walk finds the same `plens`, without `p`.
//!
//! Either way no stored `/p` prefix equals `q`'s top `p` bits. Every rule of
//! the subtable has its `/p` prefix in the trie and would have to equal
//! `q`'s top `p` bits to match `q`, so none matches `q`. The proof uses the
//! field alone, so unlike Open vSwitch no bits of earlier stages are recorded
//! and the skip is taken even when `e > p`. Nor is eth_type recorded for the
//! choice to consult a trie: that choice changes which (sound) proof of a
//! subtable's miss is recorded, never the answer. (The translator records
//! eth_type itself, as a megaflow must for its L3 fields to make sense.)
//!
//! ## Soundness of a whole lookup
//!
//! For each subtable visited, the bits recorded for it fix its outcome (no
//! match, or the same node) for every key agreeing on them: a trie skip by
//! the argument above, a stage miss and a port-trie miss by `subtable.rs`,
//! and a hit or a final miss because the whole mask is recorded. The visiting
//! order is fixed and the stop test depends only on the best priority so far,
//! so by induction over the visited subtables every such key sees the same
//! outcomes, stops at the same place and gets the same rule.
//!
//! ## Recording
//!
//! A lookup ORs the bits it needs into a local word array and hands it to
//! [`Wildcards::unwildcard_mask`] once at the end: the same result as
//! recording each piece as it is found (the wildcards' "written bits" filter
//! is bitwise), at one pass over the mask instead of one per subtable.
//!
//! ## Costs and threads
//!
//! A lookup allocates nothing: trie results live on the stack. Inserts and
//! removals re-sort the subtables when a maximum priority changes. The
//! classifier is plain data: `Send` and `Sync`, mutated only through
//! `&mut self`.

pub mod reference;
mod subtable;
mod trie;

use std::collections::HashMap;

use megaflow::key::FastBuild;
use megaflow::{Field, FlowKey, Mask, Match, KEY_WORDS};

use crate::wildcards::Wildcards;
use crate::Priority;

use subtable::{trie_value, Removed, Subtable, TRIE_FIELDS};
use trie::{PrefixTrie, TrieHit};

/// The caller's handle of a rule in a classifier (the table's slot index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// eth_type values for which the v4 address slots hold addresses.
const ETH_TYPE_IPV4: u64 = 0x0800;
const ETH_TYPE_ARP: u64 = 0x0806;
/// eth_type for which the v6 address slots hold addresses.
const ETH_TYPE_IPV6: u64 = 0x86dd;

/// The rules of one table, looked up by priority.
#[derive(Clone, Debug)]
pub struct Classifier {
    /// Sorted by maximum priority, highest first (stable among equals).
    subtables: Vec<Subtable>,
    /// Mask to its subtable's index in `subtables`.
    by_mask: HashMap<Mask, usize, FastBuild>,
    /// One trie per field of [`TRIE_FIELDS`].
    tries: [PrefixTrie; 4],
    n_rules: usize,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            subtables: Vec::new(),
            by_mask: HashMap::default(),
            tries: TRIE_FIELDS.map(|f| PrefixTrie::new(f.layout().bits as u32)),
            n_rules: 0,
        }
    }
}

impl Classifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule. The caller keeps (match, priority) pairs unique.
    pub fn insert(&mut self, id: RuleId, m: &Match, priority: Priority) {
        let si = match self.by_mask.get(m.mask()) {
            Some(&i) => i,
            None => {
                self.subtables.push(Subtable::new(m.mask()));
                let i = self.subtables.len() - 1;
                self.by_mask.insert(*m.mask(), i);
                i
            }
        };
        let st = &mut self.subtables[si];
        let was_empty = st.is_empty();
        let old_max = st.max_priority();
        if st.insert(id, m, priority) {
            for (t, &p) in st.trie_plen().iter().enumerate() {
                if p != 0 {
                    self.tries[t].insert(trie_value(m.key(), TRIE_FIELDS[t]), p as u32);
                }
            }
        }
        self.n_rules += 1;
        if was_empty || st.max_priority() != old_max {
            self.resort();
        }
    }

    /// Removes the rule `id`, inserted with this match and priority.
    pub fn remove(&mut self, id: RuleId, m: &Match, priority: Priority) -> bool {
        let Some(&si) = self.by_mask.get(m.mask()) else {
            return false;
        };
        let st = &mut self.subtables[si];
        let old_max = st.max_priority();
        match st.remove(id, m, priority) {
            Removed::Absent => return false,
            Removed::Rule => {}
            Removed::Node => {
                for (t, &p) in st.trie_plen().iter().enumerate() {
                    if p != 0 {
                        let gone =
                            self.tries[t].remove(trie_value(m.key(), TRIE_FIELDS[t]), p as u32);
                        debug_assert!(gone, "prefix trie out of step with the subtables");
                    }
                }
            }
        }
        self.n_rules -= 1;
        if st.is_empty() {
            self.subtables.remove(si);
            self.resort();
        } else if st.max_priority() != old_max {
            self.resort();
        }
        true
    }

    /// Restores the order of `subtables` and the index `by_mask`.
    fn resort(&mut self) {
        self.subtables
            .sort_by_key(|st| std::cmp::Reverse(st.max_priority()));
        self.by_mask.clear();
        for (i, st) in self.subtables.iter().enumerate() {
            self.by_mask.insert(*st.mask(), i);
        }
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        let &si = self.by_mask.get(m.mask())?;
        self.subtables[si].find_exact(m, priority)
    }

    /// The highest-priority rule matching `key`, recording in `wc` every key
    /// bit the answer depended on (see the module comment).
    pub fn lookup(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
        let eth_type = key.eth_type();
        let v4 = eth_type == ETH_TYPE_IPV4 || eth_type == ETH_TYPE_ARP;
        let v6 = eth_type == ETH_TYPE_IPV6;
        let applies = [v4, v4, v6, v6];
        let mut hits: [Option<TrieHit>; 4] = [None; 4];
        let mut acc = [0u64; KEY_WORDS];
        let mut best: Option<(Priority, RuleId)> = None;
        for st in &self.subtables {
            if best.is_some_and(|(bp, _)| bp >= st.max_priority()) {
                break;
            }
            if st.has_tries() {
                // The trie proving a miss with the fewest bits, if any.
                let mut skip: Option<(usize, u32)> = None;
                for (t, &p) in st.trie_plen().iter().enumerate() {
                    if p == 0 || !applies[t] {
                        continue;
                    }
                    let hit = *hits[t]
                        .get_or_insert_with(|| self.tries[t].lookup(trie_value(key, TRIE_FIELDS[t])));
                    let p = p as u32;
                    if !hit.has_len(p) {
                        let n = hit.examined.min(p);
                        if skip.is_none_or(|(_, m)| n < m) {
                            skip = Some((t, n));
                        }
                    }
                }
                if let Some((t, n)) = skip {
                    or_prefix(&mut acc, TRIE_FIELDS[t], n);
                    continue;
                }
            }
            if let Some(found) = st.probe(key, &mut acc) {
                if best.is_none_or(|(bp, _)| found.0 > bp) {
                    best = Some(found);
                }
            }
        }
        wc.unwildcard_mask(&Mask::from_words(acc));
        best.map(|(_, id)| id)
    }

    pub fn len(&self) -> usize {
        self.n_rules
    }

    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of distinct masks (subtables).
    pub fn subtable_count(&self) -> usize {
        self.subtables.len()
    }

    /// Every rule, by subtable (highest maximum priority first).
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &Match, Priority)> + '_ {
        self.subtables.iter().flat_map(|st| st.iter())
    }
}

/// ORs the top `n` bits of `field` into the word array `acc`.
#[inline]
fn or_prefix(acc: &mut [u64; KEY_WORDS], field: Field, n: u32) {
    let l = field.layout();
    let ones = l.max_value();
    // `checked_shr` because a 128-bit field shifted by 128 is all gone.
    let bits = ones & !ones.checked_shr(n).unwrap_or(0);
    let w = l.word as usize;
    if l.bits == 128 {
        acc[w] |= (bits >> 64) as u64;
        acc[w + 1] |= bits as u64;
    } else {
        acc[w] |= ((bits as u64) << l.shift) & l.word_mask();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_rule(src: u32, plen: u32) -> Match {
        let mut k = FlowKey::ZERO;
        k.set_eth_type(0x0800);
        k.set_ipv4_src(src as u64);
        let mask = Mask::EMPTY
            .with_exact(Field::EthType)
            .with(Field::Ipv4Src, (u32::MAX << (32 - plen)) as u128);
        Match::new(&k, &mask)
    }

    fn v4_packet(src: u32) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set_eth_type(0x0800);
        k.set_ipv4_src(src as u64);
        k
    }

    #[test]
    fn or_prefix_places_bits() {
        let mut acc = [0u64; KEY_WORDS];
        or_prefix(&mut acc, Field::Ipv4Dst, 8);
        or_prefix(&mut acc, Field::Ipv4Src, 1);
        assert_eq!(acc[12], 0x8000_0000_ff00_0000);
        or_prefix(&mut acc, Field::Ipv6Src, 72);
        or_prefix(&mut acc, Field::Ipv6Dst, 128);
        assert_eq!((acc[16], acc[17]), (u64::MAX, u64::MAX));
        or_prefix(&mut acc, Field::TpDst, 0);
        assert_eq!(acc[13], 0);
        assert_eq!(acc[14], u64::MAX);
        assert_eq!(acc[15], 0xff00_0000_0000_0000);
    }

    #[test]
    fn insert_remove_keep_order_and_tries() {
        let mut c = Classifier::new();
        let a = v4_rule(0x0a00_0000, 8);
        let b = v4_rule(0x0a01_0200, 24);
        c.insert(RuleId(1), &a, Priority(10));
        c.insert(RuleId(2), &b, Priority(20));
        assert_eq!(c.subtable_count(), 2);
        assert_eq!(c.len(), 2);
        assert_eq!(c.find_exact(&b, Priority(20)), Some(RuleId(2)));
        assert_eq!(c.find_exact(&b, Priority(21)), None);
        let mut wc = Wildcards::new();
        assert_eq!(c.lookup(&v4_packet(0x0a01_0203), &mut wc), Some(RuleId(2)));
        assert!(!c.remove(RuleId(2), &b, Priority(21)));
        assert!(c.remove(RuleId(2), &b, Priority(20)));
        assert_eq!(c.subtable_count(), 1);
        let mut wc = Wildcards::new();
        assert_eq!(c.lookup(&v4_packet(0x0a01_0203), &mut wc), Some(RuleId(1)));
        assert_eq!(wc.mask().field(Field::Ipv4Src), 0xff00_0000);
        assert!(c.remove(RuleId(1), &a, Priority(10)));
        assert!(c.is_empty());
        assert_eq!(c.tries[0].len(), 0);
        assert_eq!(c.iter().count(), 0);
    }

    #[test]
    fn trie_skip_records_only_the_examined_prefix() {
        let mut c = Classifier::new();
        c.insert(RuleId(1), &v4_rule(0x0a00_0000, 8), Priority(10));
        c.insert(RuleId(2), &v4_rule(0x0a01_0200, 24), Priority(20));
        let mut wc = Wildcards::new();
        assert_eq!(c.lookup(&v4_packet(0x0a09_0909), &mut wc), Some(RuleId(1)));
        assert_eq!(wc.mask().field(Field::Ipv4Src), 0xfff8_0000);
        let mut wc = Wildcards::new();
        assert_eq!(c.lookup(&v4_packet(0x0b00_0001), &mut wc), None);
        assert_eq!(
            *wc.mask(),
            Mask::EMPTY.with(Field::Ipv4Src, 0xff00_0000),
            "only the trie's bits"
        );
    }
}

//! Open vSwitch 3.1's wildcard policy (`lib/classifier.c`, `find_match_wc`
//! and `check_tries`) run on eswitch's classifier structures: the baseline
//! the tests and the benchmark measure [`Classifier::lookup`]'s megaflow
//! width against. Same subtables, order, stop rule and answers; only the
//! recorded bits differ:
//! - a prefix trie is consulted only when the stage holding the address is
//!   reached, and a skip records the earlier stages too;
//! - a skip needs `examined ≤ p` (or those bits already recorded);
//! - a port-trie miss records every stage before the last as well.
//!
//! Not for production use; kept beside the real lookup so the two cannot
//! drift apart in anything but policy.

use megaflow::{FlowKey, Mask, KEY_WORDS};

use super::subtable::{trie_value, TRIE_FIELDS};
use super::trie::TrieHit;
use super::{or_prefix, Classifier, RuleId};
use crate::wildcards::Wildcards;
use crate::Priority;

impl Classifier {
    /// [`Classifier::lookup`] with Open vSwitch 3.1's wildcard policy (a
    /// baseline for tests and benchmarks; same answers, narrower megaflows).
    #[doc(hidden)]
    pub fn lookup_ovs31(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
        let families = super::address_families(key);
        let applies: [bool; 4] = std::array::from_fn(|t| families & (1 << t) != 0);
        let mut hits: [Option<TrieHit>; 4] = [None; 4];
        let mut acc = [0u64; KEY_WORDS];
        let mut best: Option<(Priority, RuleId)> = None;
        let recorded = *wc.mask().words();
        for head in &self.order {
            if best.is_some_and(|(bp, _)| bp >= head.max_priority) {
                break;
            }
            let Some(st) = &self.slots[head.slot as usize] else {
                continue;
            };
            let plen = st.trie_plen();
            let check = |acc: &mut [u64; KEY_WORDS]| {
                for (t, &p) in plen.iter().enumerate() {
                    // Open vSwitch: a trie whose prerequisites fail reports
                    // every length, i.e. never skips.
                    if p == 0 || !applies[t] {
                        continue;
                    }
                    let hit = *hits[t].get_or_insert_with(|| {
                        self.tries[t].lookup(trie_value(key, TRIE_FIELDS[t]))
                    });
                    let p = p as u32;
                    if hit.has_len(p) {
                        continue;
                    }
                    if hit.examined <= p {
                        or_prefix(acc, TRIE_FIELDS[t], hit.examined);
                        return true;
                    }
                    let mut need = [0u64; KEY_WORDS];
                    or_prefix(&mut need, TRIE_FIELDS[t], hit.examined);
                    if (0..KEY_WORDS).all(|i| need[i] & !(acc[i] | recorded[i]) == 0) {
                        return true;
                    }
                }
                false
            };
            if let Some(found) = st.probe_ovs31(key, &mut acc, check) {
                if best.is_none_or(|(bp, _)| found.0 > bp) {
                    best = Some(found);
                }
            }
        }
        wc.unwildcard_mask(&Mask::from_words(acc));
        best.map(|(_, id)| id)
    }
}

//! The OpenFlow classifier of one table: highest-priority match with
//! wildcard tracking at least as wide as Open vSwitch 3.1's
//! (`lib/classifier.c`, `find_match_wc`), and wider in four places.
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
//! Callers: the flow table (`crate::table`), once per table a translation
//! visits.
//!
//! ## Structure
//!
//! - Tuple space search: one `Subtable` per distinct mask, kept in a slab
//!   (`slots`; a subtable's slot never changes while it lives) and visited
//!   through `order`, a dense array of `Head`s sorted by the highest
//!   priority of each subtable's rules. A lookup stops as soon as the best
//!   priority found is at least the next subtable's maximum; subtables not
//!   visited cannot change the answer (a tie keeps the earlier rule), so
//!   they record nothing.
//! - Staged lookup inside a subtable (metadata, L2, L3, L4 hash stages) and a
//!   port-pair trie per subtable: see `subtable.rs`.
//! - Four prefix tries over the whole classifier, for `ipv4_src`, `ipv4_dst`
//!   (also ARP SPA/TPA), `ipv6_src`, `ipv6_dst` (`trie.rs`). Every distinct
//!   match whose mask on such a field is a CIDR prefix of length `p > 0` has
//!   its prefix in the field's trie, *owned* by its subtable's slot.
//!
//! ## Prefix-trie skips and why `min(examined, p)` bits suffice
//!
//! A lookup walks a trie at most once: when the first subtable using it is
//! reached, and only when the packet's eth_type is one the field applies to
//! (0x0800/0x0806 for the v4 slots, 0x86dd for v6; otherwise the subtable
//! relies on its stages). The walk of the packet's address `a` yields the
//! stored prefixes equal to `a`'s top bits (their lengths, and their owners
//! as a bitmap over slots) and `e`, the bits the walk examined. Before
//! hashing anything in a subtable `S` whose mask on the field is the prefix
//! `/p`, if `S` owns none of the matching prefixes, `S` cannot match, and
//! only the top `min(e, p)` bits of the field are recorded. Let `q` agree
//! with `a` on those bits:
//! - if `p ≤ e`, `q`'s top `p` bits are `a`'s, and no prefix of `S` (all of
//!   length `p`) equals them;
//! - if `p > e`, `q` agrees with `a` on the `e` examined bits, so by the
//!   trie lemma (`trie.rs`) its walk matches exactly the same stored
//!   prefixes, none of them `S`'s.
//!
//! Either way no rule of `S` has the prefix of `q`, so none matches `q`.
//!
//! Improvements over Open vSwitch, which keeps per trie only the set of
//! lengths with a matching prefix (any subtable's) and checks it when the
//! lookup reaches the address's stage: the ownership test is exact per
//! subtable, so many more subtables are skipped by a few address bits
//! instead of a stage miss (which records the whole stage mask); the proof
//! uses the field alone, so no bits of earlier stages are recorded; and the
//! skip is taken even when `e > p`. (The fourth improvement is in
//! `subtable.rs`: a port-trie miss records port bits only.) Subtables in
//! slots beyond the owner bitmaps (`OWNER_CAP`) fall back to the length
//! test, which the same argument covers.
//!
//! Which proof to record is chosen once, after the lookup, over all
//! skipped subtables: a packet is IPv4 or IPv6, so at most two tries apply
//! (source and destination), and each skipped subtable needs either `a` bits
//! of the source or `b` bits of the destination. Prefixes of one field nest,
//! so the cost of a choice is the longest prefix charged per field; the
//! lookup sorts the (a, b) pairs and sweeps the source length over them,
//! charging the destination with the largest `b` among the pairs the source
//! does not cover, and keeps the cheapest. Choosing subtable by subtable
//! (the cheapest proof for each) can cost more in total than Open vSwitch's
//! fixed destination-first order; this choice never does.
//!
//! Eth_type is not recorded for the choice to consult a trie: that choice
//! changes which (sound) proof of a subtable's miss is recorded, never the
//! answer. (The translator records eth_type itself, as a megaflow must for
//! its L3 fields to mean anything.)
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
//! A lookup ORs the bits it needs into a local word array (trie skips as
//! one longest prefix per field) and hands it to
//! [`Wildcards::unwildcard_mask`] once at the end: the same result as
//! recording each piece as it is found (the wildcards' "written bits" filter
//! is bitwise), at one pass over the mask instead of one per subtable.
//!
//! ## Costs and threads
//!
//! A lookup allocates nothing: trie results, owner bitmaps and the recorded
//! bits live on the stack; the tries a subtable needs are walked together,
//! so that their memory accesses overlap. Inserts and removals rebuild `order` when
//! a maximum priority changes or a subtable comes or goes (O(subtables)).
//! [`Classifier::lookup_ovs31`] (`baseline.rs`) runs Open vSwitch's policy on
//! the same structures, for the tests and the benchmark to compare widths.
//! The classifier is plain data: `Send` and `Sync`, mutated only through
//! `&mut self`.

mod baseline;
pub mod reference;
mod subtable;
mod table64;
mod trie;

use std::collections::HashMap;

use megaflow::key::FastBuild;
use megaflow::{Field, FlowKey, Mask, Match, KEY_WORDS};

use crate::wildcards::Wildcards;
use crate::Priority;

use subtable::{trie_value, Removed, Subtable, TRIE_FIELDS};
use trie::{OwnerBits, PrefixTrie, TrieHit, OWNER_CAP};

/// The caller's handle of a rule in a classifier (the table's slot index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// eth_type values for which the v4 address slots hold addresses.
const ETH_TYPE_IPV4: u64 = 0x0800;
const ETH_TYPE_ARP: u64 = 0x0806;
/// eth_type for which the v6 address slots hold addresses.
const ETH_TYPE_IPV6: u64 = 0x86dd;

/// The per-subtable facts a lookup needs before touching the subtable
/// itself, kept in one dense array in visiting order.
#[derive(Clone, Copy, Debug)]
struct Head {
    max_priority: Priority,
    /// Bit `t` set when the mask is a prefix on trie field `t`.
    tries: u8,
    /// Prefix length of the mask on each trie field (0: none).
    trie_plen: [u8; 4],
    /// Index in `Classifier::slots`, also the subtable's owner id in the
    /// tries.
    slot: u32,
}

/// What one lookup learned from the prefix tries it walked (lazily, each
/// when the first subtable using it is reached).
struct Walks {
    /// Bit `t` set once trie `t` has been walked.
    done: u8,
    hits: [TrieHit; 4],
    /// Per walked trie: the slots (below [`OWNER_CAP`]) that use the trie
    /// and own no prefix matching the packet: subtables it proves empty.
    fails: [OwnerBits; 4],
}

/// The rules of one table, looked up by priority.
#[derive(Clone, Debug)]
pub struct Classifier {
    /// Subtables by slot; `None` for free slots.
    slots: Vec<Option<Subtable>>,
    free_slots: Vec<u32>,
    /// Visiting order: by maximum priority, highest first (stable among
    /// equals). One entry per live slot.
    order: Vec<Head>,
    /// Mask to its subtable's slot.
    by_mask: HashMap<Mask, u32, FastBuild>,
    /// One trie per field of [`TRIE_FIELDS`]; prefixes owned by slot.
    tries: [PrefixTrie; 4],
    /// Per trie, the slots (below [`OWNER_CAP`]) whose mask uses it.
    uses: [OwnerBits; 4],
    n_rules: usize,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            slots: Vec::new(),
            free_slots: Vec::new(),
            order: Vec::new(),
            by_mask: HashMap::default(),
            tries: TRIE_FIELDS.map(|f| PrefixTrie::new(f.layout().bits as u32)),
            uses: [[0; OWNER_CAP / 64]; 4],
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
        let slot = match self.by_mask.get(m.mask()) {
            Some(&s) => s,
            None => self.new_subtable(m.mask()),
        };
        let Some(st) = self.slots[slot as usize].as_mut() else {
            // Invariant: `by_mask` names live slots only (a slot is freed
            // and unmapped together, in `remove`).
            unreachable!("by_mask names a free slot");
        };
        let old_max = st.max_priority();
        let was_empty = st.is_empty();
        if st.insert(id, m, priority) {
            for (t, &p) in st.trie_plen().iter().enumerate() {
                if p != 0 {
                    let v = trie_value(m.key(), TRIE_FIELDS[t]);
                    self.tries[t].insert(v, p as u32, slot);
                }
            }
        }
        self.n_rules += 1;
        if was_empty || st.max_priority() != old_max {
            self.resort();
        }
    }

    /// A new, empty subtable in the lowest free slot (low slots fit the
    /// tries' owner bitmaps).
    fn new_subtable(&mut self, mask: &Mask) -> u32 {
        let slot = match self.free_slots.iter().enumerate().min_by_key(|(_, &s)| s) {
            Some((i, _)) => self.free_slots.swap_remove(i),
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        let st = Subtable::new(mask);
        self.set_uses(slot, st.trie_plen(), true);
        self.slots[slot as usize] = Some(st);
        self.by_mask.insert(*mask, slot);
        slot
    }

    /// Marks (or clears) `slot` as a user of the tries its mask has prefixes
    /// on.
    fn set_uses(&mut self, slot: u32, plen: &[u8; 4], on: bool) {
        let s = slot as usize;
        if s >= OWNER_CAP {
            return;
        }
        for (t, &p) in plen.iter().enumerate() {
            if p != 0 {
                let w = &mut self.uses[t][s / 64];
                if on {
                    *w |= 1 << (s % 64);
                } else {
                    *w &= !(1 << (s % 64));
                }
            }
        }
    }

    /// Removes the rule `id`, inserted with this match and priority.
    pub fn remove(&mut self, id: RuleId, m: &Match, priority: Priority) -> bool {
        let Some(&slot) = self.by_mask.get(m.mask()) else {
            return false;
        };
        let Some(st) = self.slots[slot as usize].as_mut() else {
            // Invariant: as in `insert`.
            unreachable!("by_mask names a free slot");
        };
        let old_max = st.max_priority();
        match st.remove(id, m, priority) {
            Removed::Absent => return false,
            Removed::Rule => {}
            Removed::Node => {
                for (t, &p) in st.trie_plen().iter().enumerate() {
                    if p != 0 {
                        let v = trie_value(m.key(), TRIE_FIELDS[t]);
                        let gone = self.tries[t].remove(v, p as u32, slot);
                        debug_assert!(gone, "prefix trie out of step with the subtables");
                    }
                }
            }
        }
        self.n_rules -= 1;
        if st.is_empty() {
            let plen = *st.trie_plen();
            self.set_uses(slot, &plen, false);
            self.slots[slot as usize] = None;
            self.free_slots.push(slot);
            self.by_mask.remove(m.mask());
            self.resort();
        } else if st.max_priority() != old_max {
            self.resort();
        }
        true
    }

    /// Rebuilds the visiting order from the live subtables.
    fn resort(&mut self) {
        // Keep the previous relative order among equal maxima: the old
        // order first, then new slots, then a stable sort.
        let mut seen = vec![false; self.slots.len()];
        let mut order: Vec<Head> = Vec::with_capacity(self.by_mask.len());
        let old = self.order.iter().map(|h| h.slot);
        for slot in old.chain(0..self.slots.len() as u32) {
            let s = slot as usize;
            if std::mem::replace(&mut seen[s], true) {
                continue;
            }
            if let Some(st) = &self.slots[s] {
                let trie_plen = *st.trie_plen();
                let tries = (0..4)
                    .filter(|&t| trie_plen[t] != 0)
                    .fold(0, |m, t| m | 1 << t);
                order.push(Head {
                    max_priority: st.max_priority(),
                    tries,
                    trie_plen,
                    slot,
                });
            }
        }
        order.sort_by_key(|h| std::cmp::Reverse(h.max_priority));
        self.order = order;
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        let &slot = self.by_mask.get(m.mask())?;
        self.slots[slot as usize].as_ref()?.find_exact(m, priority)
    }

    /// The highest-priority rule matching `key`, recording in `wc` every key
    /// bit the answer depended on (see the module comment).
    pub fn lookup(&self, key: &FlowKey, wc: &mut Wildcards) -> Option<RuleId> {
        let mut best = Best(None);
        self.walk(key, wc, &mut best);
        best.0.map(|(_, id)| id)
    }

    /// The highest-priority rule matching `key` that is not `soft`
    /// (`None` if there is none), and, when `softs` is given, the `soft`
    /// rules matching `key` above it, in the order found (for conjunctive
    /// matches: see `crate::conjunction`). Records in `wc` what both
    /// depend on.
    pub fn lookup_split(
        &self,
        key: &FlowKey,
        wc: &mut Wildcards,
        soft: &dyn Fn(RuleId) -> bool,
        softs: Option<&mut Vec<(Priority, RuleId)>>,
    ) -> Option<(Priority, RuleId)> {
        let mut split = Split {
            soft,
            hard: None,
            softs,
        };
        self.walk(key, wc, &mut split);
        let hard = split.hard;
        if let (Some(v), Some((hp, _))) = (split.softs, hard) {
            // Softs met before the hard answer was found.
            v.retain(|&(p, _)| p > hp);
        }
        hard
    }

    /// Visits, in order, every subtable that may hold a rule above
    /// `v.floor()`, and hands `v` the rules of each node matching `key`;
    /// records in `wc` what decided each subtable's outcome. Sound for any
    /// visitor whose floor only rises with what it is handed (the stop
    /// test then depends only on the outcomes so far).
    #[inline]
    fn walk<V: Visit>(&self, key: &FlowKey, wc: &mut Wildcards, v: &mut V) {
        let applies = address_families(key);
        let mut walks = Walks {
            done: 0,
            hits: [TrieHit::default(); 4],
            fails: [[0; OWNER_CAP / 64]; 4],
        };
        // Per trie: the bits a walk examined, and the longest prefix of the
        // field some skip relied on. Kept apart from `walks` and indexed
        // only by constants so that they live in registers: a skip per
        // subtable updates them, and a dependency through memory would
        // serialize the loop.
        let mut examined = [0u32; 4];
        let mut skip_bits = [0u32; 4];
        let mut acc = [0u64; KEY_WORDS];
        // Subtables two tries proved empty: the bits each proof needs.
        let mut pairs = [(0u8, 0u8); PAIR_CAP];
        let mut n_pairs = 0;
        let mut pair_tries = (0, 0);
        for head in &self.order {
            if v.floor().is_some_and(|f| f >= head.max_priority) {
                break;
            }
            let usable = head.tries & applies;
            if usable != 0 {
                let unwalked = usable & !walks.done;
                if unwalked != 0 {
                    self.walk_tries(unwalked, key, &mut walks);
                    examined = walks.hits.map(|h| h.examined);
                }
                let proving = self.proving(head, usable, &walks);
                if proving != 0 {
                    // Each proof is sound (see the module comment); a
                    // subtable with one proof is charged now, one with two
                    // joins the choice made after the loop.
                    let need = |t: usize| examined[t].min(u32::from(head.trie_plen[t]));
                    let first = proving.trailing_zeros() as usize;
                    let rest = proving & (proving - 1);
                    if rest == 0 {
                        skip_bits[first] = skip_bits[first].max(need(first));
                    } else {
                        let second = rest.trailing_zeros() as usize;
                        if rest & (rest - 1) == 0 && n_pairs < PAIR_CAP {
                            pair_tries = (first, second);
                            pairs[n_pairs] = (need(first) as u8, need(second) as u8);
                            n_pairs += 1;
                        } else {
                            // Out of room: the cheaper proof, now.
                            let (a, b) = (need(first), need(second));
                            if a.saturating_sub(skip_bits[first])
                                <= b.saturating_sub(skip_bits[second])
                            {
                                skip_bits[first] = skip_bits[first].max(a);
                            } else {
                                skip_bits[second] = skip_bits[second].max(b);
                            }
                        }
                    }
                    continue;
                }
            }
            let Some(st) = &self.slots[head.slot as usize] else {
                debug_assert!(false, "order names a free slot");
                continue;
            };
            if let Some(rules) = st.probe(key, &mut acc) {
                v.hit(rules);
            }
        }
        if n_pairs > 0 {
            let (x, y) = pair_tries;
            let (sx, sy) = cheapest_cover(&mut pairs[..n_pairs], skip_bits[x], skip_bits[y]);
            skip_bits[x] = sx;
            skip_bits[y] = sy;
        }
        for (t, &n) in skip_bits.iter().enumerate() {
            or_prefix(&mut acc, TRIE_FIELDS[t], n);
        }
        wc.unwildcard_mask(&Mask::from_words(acc));
    }

    /// The tries among `usable` (walked ones, that the subtable of `head`
    /// uses and that apply to the packet) proving that the subtable has no
    /// rule matching the packet: those in which the subtable owns no prefix
    /// matching it.
    #[inline]
    fn proving(&self, head: &Head, usable: u8, walks: &Walks) -> u8 {
        let slot = head.slot as usize;
        if slot < OWNER_CAP {
            let (w, b) = (slot / 64, slot % 64);
            let bit = |t: usize| (((walks.fails[t][w] >> b) & 1) as u8) << t;
            (bit(0) | bit(1) | bit(2) | bit(3)) & usable
        } else {
            self.proving_by_length(head, usable, walks)
        }
    }

    /// [`Classifier::proving`] for a slot beyond the owner bitmaps: the
    /// tries in which no rule of any subtable has a prefix of the
    /// subtable's length matching the packet (sound, less selective).
    #[cold]
    fn proving_by_length(&self, head: &Head, usable: u8, walks: &Walks) -> u8 {
        (0..4)
            .filter(|&t| usable & (1 << t) != 0)
            .filter(|&t| !walks.hits[t].has_len(head.trie_plen[t] as u32))
            .fold(0, |m, t| m | 1 << t)
    }

    /// Walks the tries in `which` for `key` (together, see
    /// [`trie::walk_all`]), filling in their part of `walks`.
    #[cold]
    fn walk_tries(&self, which: u8, key: &FlowKey, walks: &mut Walks) {
        let mut todo: [(&PrefixTrie, u128); 4] = [(&self.tries[0], 0); 4];
        let mut index = [0usize; 4];
        let mut n = 0;
        for t in (0..4).filter(|&t| which & (1 << t) != 0) {
            todo[n] = (&self.tries[t], trie_value(key, TRIE_FIELDS[t]));
            index[n] = t;
            n += 1;
        }
        let mut owners = [[0u64; OWNER_CAP / 64]; 4];
        let mut hits = [TrieHit::default(); 4];
        trie::walk_all(&todo[..n], &mut owners[..n], &mut hits[..n]);
        for (i, &t) in index[..n].iter().enumerate() {
            walks.hits[t] = hits[i];
            let uses = self.uses[t].iter().zip(&owners[i]);
            for (f, (u, o)) in walks.fails[t].iter_mut().zip(uses) {
                *f = u & !o;
            }
        }
        walks.done |= which;
    }

    pub fn len(&self) -> usize {
        self.n_rules
    }

    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of distinct masks (subtables).
    pub fn subtable_count(&self) -> usize {
        self.order.len()
    }

    /// Every rule, by subtable in visiting order.
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &Match, Priority)> + '_ {
        self.order
            .iter()
            .filter_map(|h| self.slots[h.slot as usize].as_ref())
            .flat_map(|st| st.iter())
    }
}

/// What a walk does with the matching nodes it finds.
trait Visit {
    /// Subtables whose rules all have priorities at or below this are not
    /// visited (`None`: all are).
    fn floor(&self) -> Option<Priority>;
    /// The rules of a node matching the key, highest priority first.
    fn hit(&mut self, rules: &[(Priority, RuleId)]);
}

/// The plain lookup: the best rule, the first found among equals.
struct Best(Option<(Priority, RuleId)>);

impl Visit for Best {
    #[inline]
    fn floor(&self) -> Option<Priority> {
        self.0.map(|(p, _)| p)
    }

    #[inline]
    fn hit(&mut self, rules: &[(Priority, RuleId)]) {
        if let Some(&found) = rules.first() {
            if self.0.is_none_or(|(bp, _)| found.0 > bp) {
                self.0 = Some(found);
            }
        }
    }
}

/// [`Classifier::lookup_split`]'s walk: soft rules never raise the floor.
struct Split<'a> {
    soft: &'a dyn Fn(RuleId) -> bool,
    hard: Option<(Priority, RuleId)>,
    softs: Option<&'a mut Vec<(Priority, RuleId)>>,
}

impl Visit for Split<'_> {
    fn floor(&self) -> Option<Priority> {
        self.hard.map(|(p, _)| p)
    }

    fn hit(&mut self, rules: &[(Priority, RuleId)]) {
        for &(p, id) in rules {
            if self.hard.is_some_and(|(hp, _)| p <= hp) {
                return;
            }
            if !(self.soft)(id) {
                self.hard = Some((p, id));
                return;
            }
            if let Some(v) = self.softs.as_deref_mut() {
                v.push((p, id));
            }
        }
    }
}

/// Most subtables whose choice of proof is deferred to the end of a lookup
/// (beyond it, the cheaper proof is charged at once: sound, maybe wider).
const PAIR_CAP: usize = 128;

/// The cheapest prefix lengths (x, y) such that every pair (a, b) has
/// `a <= x` or `b <= y`, given that at least `fx` and `fy` bits are charged
/// anyway. Cost: `x + y`. Sorts `pairs`.
fn cheapest_cover(pairs: &mut [(u8, u8)], fx: u32, fy: u32) -> (u32, u32) {
    pairs.sort_unstable();
    // suffix[i]: the largest b among pairs[i..].
    let mut suffix = [0u8; PAIR_CAP + 1];
    for i in (0..pairs.len()).rev() {
        suffix[i] = suffix[i + 1].max(pairs[i].1);
    }
    let mut best = (u32::MAX, 0, 0);
    // x = fx covers the pairs with a <= fx; then each larger a in turn.
    let mut i = pairs.partition_point(|p| u32::from(p.0) <= fx);
    let mut x = fx;
    loop {
        let y = fy.max(u32::from(suffix[i]));
        if x + y < best.0 {
            best = (x + y, x, y);
        }
        if i == pairs.len() {
            break;
        }
        x = u32::from(pairs[i].0);
        while i < pairs.len() && u32::from(pairs[i].0) <= x {
            i += 1;
        }
    }
    (best.1, best.2)
}

/// The tries (bit `t` for [`TRIE_FIELDS`]`[t]`) whose field holds an
/// address for this packet's eth_type (IPv4 and ARP: the v4 slots; IPv6:
/// the v6 slots); the others are not consulted.
#[inline]
fn address_families(key: &FlowKey) -> u8 {
    match key.eth_type() {
        ETH_TYPE_IPV4 | ETH_TYPE_ARP => 0b0011,
        ETH_TYPE_IPV6 => 0b1100,
        _ => 0,
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
    fn cheapest_cover_beats_greedy_choices() {
        // Three subtables: sources need 3, 4, 5 bits, destinations 4 each;
        // one destination prefix of 4 covers them all (greedy per subtable
        // would charge 5 source bits and nothing else only if it looked
        // ahead).
        let mut p = [(3, 4), (4, 4), (5, 4)];
        assert_eq!(cheapest_cover(&mut p, 0, 0), (0, 4));
        // A forced source charge of 4 leaves only the third pair.
        let mut p = [(3, 9), (4, 9), (5, 6)];
        assert_eq!(cheapest_cover(&mut p, 4, 0), (5, 0));
        // Every pair is covered by the answer.
        let mut p = [(8, 1), (2, 7), (5, 5), (1, 9)];
        let (x, y) = cheapest_cover(&mut p, 0, 0);
        assert!(p
            .iter()
            .all(|&(a, b)| u32::from(a) <= x || u32::from(b) <= y));
        assert_eq!((x, y), (5, 1));
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

//! One subtable of the classifier: the rules that share one mask.
//!
//! A subtable stores, for each distinct masked key ("node"), the rules with
//! exactly that match, highest priority first; only the first can ever be a
//! lookup's answer (the others are shadowed until it goes), the rest wait
//! for removals. Nodes are found by the hash of the key words the mask uses.
//!
//! ## Staged lookup
//!
//! The used words are hashed in stage order (metadata, L2, L3, L4; see
//! [`STAGE_WORDS`]) with one incremental hasher, so the hash after stage `i`
//! is the hash of the key masked to stages `0..=i`. For every stage but the
//! last the subtable keeps a counted set of those cumulative hashes of its
//! nodes. A lookup that finds its cumulative hash absent after stage `i`
//! knows no node can match: any node matching the packet agrees with it on
//! stages `0..=i` and so has the same cumulative hash. Every packet that
//! agrees with this one on the mask restricted to stages `0..=i` computes the
//! same hash and misses the same way, so those bits are all the miss
//! depended on. A hash collision only lets the lookup go on to the next
//! stage; the final stage verifies the key words, so it costs time, never
//! correctness.
//!
//! ## Port trie
//!
//! When the final stage misses and the mask has `tp_src`/`tp_dst` bits, the
//! subtable's trie over the 32-bit port pair (`tp_src << 16 | tp_dst`, masked
//! by the subtable's port mask, every entry of length `L = 32 -
//! trailing_zeros(port mask)`) is walked with the packet's masked ports:
//! - no entry of length `L` matches: no node's port bits equal the packet's,
//!   so no node can match. Every packet `q` that agrees with the packet on
//!   the walk's examined top bits intersected with the port mask has, once
//!   masked, the same examined top bits (bits outside the port mask are zero
//!   in both) and by the trie lemma (`trie.rs`) the same answer: no entry of
//!   length `L`. So only those bits are recorded, and none of the earlier
//!   stages: they passed, and the ports alone exclude every node.
//! - an entry matches fully: some node has the packet's ports but differs
//!   elsewhere (tcp_flags, or an L3 combination the stage hash let through),
//!   so the whole mask is recorded: every packet equal to this one under the
//!   mask has the same masked key and misses the same way.
//!
//! Stage sets (hash → count) and the final index (hash → first node of a
//! collision chain) are [`Table64`]s: open addressing over hashes.
//!
//! Invariants: every node's key is `key & mask` (it comes from a `Match`);
//! the stage sets and the port trie hold exactly one entry per node; `prios`
//! counts the rules of each priority.
//!
//! Owned by one [`super::Classifier`]; single-threaded like it.

use std::collections::BTreeMap;

use megaflow::key::WordHasher;
use megaflow::{Field, FlowKey, Mask, Match, KEY_WORDS};

use super::table64::Table64;
use super::trie::{top_bits, PrefixTrie};
use super::RuleId;
use crate::Priority;

/// Key words of each lookup stage, in hashing order: metadata (in_port,
/// pkt_mark, metadata, registers, tunnel, recirculation, ct state, zone,
/// mark and label, the ct original ports with conj_id), L2, L3 (with the ct
/// original addresses), L4 (ports and flags, ND target, ARP/ND link-layer
/// addresses). conj_id is in the first stage: a packet (conj_id 0) misses a
/// `conj_id=N` flow's subtable there, on the metadata bits alone.
pub(crate) const STAGE_WORDS: [&[u8]; 4] = [
    &[
        0, 1, 2, 3, 4, 5, 6, 7, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 39, 40, 41, 42, 43,
    ],
    &[8, 9, 10],
    &[11, 12, 14, 15, 16, 17, 34, 35, 36, 37, 38],
    &[13, 18, 19, 20, 21],
];

/// Word of the port pair and shift of `tp_dst` in it: `tp_src << 16 |
/// tp_dst` is `word >> PORTS_SHIFT` (checked against the field table at
/// compile time).
const PORTS_WORD: usize = 13;
const PORTS_SHIFT: u32 = 32;
const _: () = {
    let s = Field::TpSrc.layout();
    let d = Field::TpDst.layout();
    assert!(s.word as usize == PORTS_WORD && d.word as usize == PORTS_WORD);
    assert!(s.bits == 16 && d.bits == 16);
    assert!(d.shift as u32 == PORTS_SHIFT && s.shift as u32 == PORTS_SHIFT + 16);
};

/// The fields the classifier keeps prefix tries for, in trie order. The v4
/// slots also hold ARP's SPA/TPA.
pub(crate) const TRIE_FIELDS: [Field; 4] = [
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
];

/// A field's value left-aligned in a `u128`, as the tries store values.
#[inline]
pub(crate) fn trie_value(key: &FlowKey, field: Field) -> u128 {
    key.field(field) << (128 - field.layout().bits as u32)
}

/// Length of the CIDR prefix `field`'s mask is, 0 when it has no bits or is
/// not a prefix.
fn prefix_len(mask: &Mask, field: Field) -> u8 {
    let m = mask.field(field) << (128 - field.layout().bits as u32);
    let n = m.leading_ones();
    if n > 0 && m == top_bits(n) {
        n as u8
    } else {
        0
    }
}

/// End of a collision chain.
const NONE: u32 = u32::MAX;

/// The rules with one exact match.
#[derive(Clone, Debug)]
struct Node {
    m: Match,
    /// Never empty while the node is live; highest priority first.
    rules: Vec<(Priority, RuleId)>,
    /// Next node with the same final hash.
    next: u32,
}

/// The port-pair trie of a subtable whose mask has port bits.
#[derive(Clone, Debug)]
struct PortTrie {
    /// `tp_src << 16 | tp_dst` bits of the mask.
    mask: u32,
    /// Length every entry is inserted with.
    len: u32,
    trie: PrefixTrie,
}

impl PortTrie {
    #[inline]
    fn value(&self, words: &[u64; KEY_WORDS]) -> u128 {
        let v = (words[PORTS_WORD] >> PORTS_SHIFT) as u32 & self.mask;
        (v as u128) << 96
    }
}

/// What [`Subtable::remove`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Removed {
    /// No such rule.
    Absent,
    /// The rule went; its node still holds other rules.
    Rule,
    /// The rule went and so did its node (the last rule of that match).
    Node,
}

/// The rules of one mask.
#[derive(Clone, Debug)]
pub(crate) struct Subtable {
    /// Highest priority of the rules (meaningless while empty).
    max_priority: Priority,
    /// Prefix length of the mask on each of [`TRIE_FIELDS`], 0 = untracked.
    trie_plen: [u8; 4],
    /// True when some `trie_plen` is non-zero.
    has_tries: bool,
    /// Non-empty stages (at least 1: an empty mask has one stage of no
    /// words).
    n_stages: u8,
    n_words: u8,
    /// Exclusive end in `words` of each stage.
    stage_ends: [u8; 4],
    /// Used key words, in stage order.
    words: [u8; KEY_WORDS],
    /// Mask word of each entry of `words`.
    mwords: [u64; KEY_WORDS],
    /// Counted cumulative hashes, one set per stage but the last.
    stage_sets: Vec<Table64>,
    /// Final hash to the first node of its chain.
    index: Table64,
    nodes: Vec<Node>,
    free: Vec<u32>,
    ports: Option<PortTrie>,
    prios: BTreeMap<Priority, u32>,
    n_rules: usize,
    mask: Mask,
}

impl Subtable {
    pub fn new(mask: &Mask) -> Self {
        let mw = mask.words();
        let mut words = [0u8; KEY_WORDS];
        let mut mwords = [0u64; KEY_WORDS];
        let mut stage_ends = [0u8; 4];
        let mut n_words = 0usize;
        let mut n_stages = 0usize;
        for stage in STAGE_WORDS {
            let before = n_words;
            for &w in stage {
                if mw[w as usize] != 0 {
                    words[n_words] = w;
                    mwords[n_words] = mw[w as usize];
                    n_words += 1;
                }
            }
            if n_words > before {
                stage_ends[n_stages] = n_words as u8;
                n_stages += 1;
            }
        }
        if n_stages == 0 {
            // The empty mask: one final stage of no words.
            n_stages = 1;
        }
        let mut trie_plen = [0u8; 4];
        for (p, f) in trie_plen.iter_mut().zip(TRIE_FIELDS) {
            *p = prefix_len(mask, f);
        }
        let port_mask = (mw[PORTS_WORD] >> PORTS_SHIFT) as u32;
        let ports = (port_mask != 0).then(|| PortTrie {
            mask: port_mask,
            len: 32 - port_mask.trailing_zeros(),
            trie: PrefixTrie::new(32),
        });
        Subtable {
            max_priority: Priority(0),
            trie_plen,
            has_tries: trie_plen.iter().any(|&p| p != 0),
            n_stages: n_stages as u8,
            n_words: n_words as u8,
            stage_ends,
            words,
            mwords,
            stage_sets: vec![Table64::default(); n_stages - 1],
            index: Table64::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            ports,
            prios: BTreeMap::new(),
            n_rules: 0,
            mask: *mask,
        }
    }

    #[inline]
    pub fn max_priority(&self) -> Priority {
        self.max_priority
    }

    /// Prefix lengths on [`TRIE_FIELDS`] (0 = untracked).
    #[inline]
    pub fn trie_plen(&self) -> &[u8; 4] {
        &self.trie_plen
    }

    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Cumulative hash after each stage of `key & mask`; the last is the
    /// final (index) hash.
    fn stage_hashes(&self, key: &FlowKey) -> [u64; 4] {
        let kw = key.words();
        let mut out = [0u64; 4];
        let mut h = WordHasher::new();
        let mut j = 0usize;
        for (s, o) in out.iter_mut().enumerate().take(self.n_stages as usize) {
            let end = self.stage_ends[s] as usize;
            while j < end {
                h.push(kw[self.words[j] as usize] & self.mwords[j]);
                j += 1;
            }
            *o = h.finish();
        }
        out
    }

    /// True when `node`'s match covers the key words `kw`.
    #[inline]
    fn node_matches(&self, node: &Node, kw: &[u64; KEY_WORDS]) -> bool {
        let nk = node.m.key().words();
        (0..self.n_words as usize).all(|j| {
            let w = self.words[j] as usize;
            kw[w] & self.mwords[j] == nk[w]
        })
    }

    /// The node holding exactly `m` (whose mask is this subtable's).
    fn find_node(&self, m: &Match, final_hash: u64) -> Option<u32> {
        let mut ni = self.index.get(final_hash).unwrap_or(NONE);
        while ni != NONE {
            let node = &self.nodes[ni as usize];
            if node.m == *m {
                return Some(ni);
            }
            ni = node.next;
        }
        None
    }

    /// Adds a rule; true when it created a node (a match new to this
    /// subtable), which the caller must add to the classifier's tries.
    pub fn insert(&mut self, id: RuleId, m: &Match, priority: Priority) -> bool {
        debug_assert_eq!(m.mask(), &self.mask);
        let hashes = self.stage_hashes(m.key());
        let last = self.n_stages as usize - 1;
        let final_hash = hashes[last];
        *self.prios.entry(priority).or_insert(0) += 1;
        if self.n_rules == 0 || priority > self.max_priority {
            self.max_priority = priority;
        }
        self.n_rules += 1;
        if let Some(ni) = self.find_node(m, final_hash) {
            let rules = &mut self.nodes[ni as usize].rules;
            let at = rules.partition_point(|(p, _)| *p >= priority);
            rules.insert(at, (priority, id));
            return false;
        }
        let next = self.index.get(final_hash).unwrap_or(NONE);
        let node = Node {
            m: *m,
            rules: vec![(priority, id)],
            next,
        };
        let ni = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(final_hash, ni);
        for (set, &h) in self.stage_sets.iter_mut().zip(&hashes[..last]) {
            *set.entry(h, 0) += 1;
        }
        if let Some(pt) = &mut self.ports {
            let v = pt.value(m.key().words());
            pt.trie.insert(v, pt.len, 0);
        }
        true
    }

    /// Removes the rule `id` with this match and priority.
    pub fn remove(&mut self, id: RuleId, m: &Match, priority: Priority) -> Removed {
        let hashes = self.stage_hashes(m.key());
        let last = self.n_stages as usize - 1;
        let final_hash = hashes[last];
        let Some(ni) = self.find_node(m, final_hash) else {
            return Removed::Absent;
        };
        let rules = &mut self.nodes[ni as usize].rules;
        let Some(at) = rules.iter().position(|&r| r == (priority, id)) else {
            return Removed::Absent;
        };
        rules.remove(at);
        let node_empty = rules.is_empty();
        self.n_rules -= 1;
        if let Some(c) = self.prios.get_mut(&priority) {
            *c -= 1;
            if *c == 0 {
                self.prios.remove(&priority);
            }
        }
        if let Some((&p, _)) = self.prios.last_key_value() {
            self.max_priority = p;
        }
        if !node_empty {
            return Removed::Rule;
        }
        // Unlink the node from its chain.
        let next = self.nodes[ni as usize].next;
        let head = self.index.get(final_hash).unwrap_or(NONE);
        if head == ni {
            if next == NONE {
                self.index.remove(final_hash);
            } else {
                self.index.insert(final_hash, next);
            }
        } else {
            let mut cur = head;
            while cur != NONE {
                if self.nodes[cur as usize].next == ni {
                    self.nodes[cur as usize].next = next;
                    break;
                }
                cur = self.nodes[cur as usize].next;
            }
        }
        self.nodes[ni as usize].next = NONE;
        self.free.push(ni);
        for (set, &h) in self.stage_sets.iter_mut().zip(&hashes[..last]) {
            if let Some(c) = set.get_mut(h) {
                *c -= 1;
                if *c == 0 {
                    set.remove(h);
                }
            }
        }
        if let Some(pt) = &mut self.ports {
            let v = pt.value(m.key().words());
            let removed = pt.trie.remove(v, pt.len, 0);
            debug_assert!(removed, "port trie out of step with the nodes");
        }
        Removed::Node
    }

    /// The rule with exactly this match and priority.
    pub fn find_exact(&self, m: &Match, priority: Priority) -> Option<RuleId> {
        let hashes = self.stage_hashes(m.key());
        let ni = self.find_node(m, hashes[self.n_stages as usize - 1])?;
        self.nodes[ni as usize]
            .rules
            .iter()
            .find(|(p, _)| *p == priority)
            .map(|&(_, id)| id)
    }

    /// Every rule of the subtable.
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &Match, Priority)> + '_ {
        self.nodes
            .iter()
            .flat_map(|n| n.rules.iter().map(move |&(p, id)| (id, &n.m, p)))
    }

    /// ORs the mask words of the first `n` entries of `words` (a stage
    /// prefix, or all of them) into `acc`.
    #[inline]
    fn fold(&self, acc: &mut [u64; KEY_WORDS], n: usize) {
        for j in 0..n {
            acc[self.words[j] as usize] |= self.mwords[j];
        }
    }

    /// The node with final hash `hash` whose match covers `kw`.
    #[inline]
    fn matching_node(&self, kw: &[u64; KEY_WORDS], hash: u64) -> Option<&Node> {
        let mut ni = self.index.get(hash).unwrap_or(NONE);
        while ni != NONE {
            let node = &self.nodes[ni as usize];
            if self.node_matches(node, kw) {
                return Some(node);
            }
            ni = node.next;
        }
        None
    }

    /// Looks `key` up in this subtable's stages and nodes: the rules of the
    /// node matching `key` (highest priority first), if any. ORs into `acc`
    /// the key bits the answer depends on (see the module comment for why
    /// each is enough).
    #[inline]
    pub fn probe(
        &self,
        key: &FlowKey,
        acc: &mut [u64; KEY_WORDS],
    ) -> Option<&[(Priority, RuleId)]> {
        let kw = key.words();
        let mut h = WordHasher::new();
        let mut j = 0usize;
        let last = self.n_stages as usize - 1;
        for (s, set) in self.stage_sets.iter().enumerate() {
            let end = self.stage_ends[s] as usize;
            while j < end {
                h.push(kw[self.words[j] as usize] & self.mwords[j]);
                j += 1;
            }
            if !set.contains(h.finish()) {
                // Stages 0..=s decided the miss.
                self.fold(acc, end);
                return None;
            }
        }
        debug_assert_eq!(self.stage_sets.len(), last);
        let n = self.n_words as usize;
        while j < n {
            h.push(kw[self.words[j] as usize] & self.mwords[j]);
            j += 1;
        }
        if let Some(node) = self.matching_node(kw, h.finish()) {
            self.fold(acc, n);
            return Some(&node.rules);
        }
        if let Some(pt) = &self.ports {
            let hit = pt.trie.lookup(pt.value(kw));
            if !hit.has_len(pt.len) {
                // No node has these ports: the examined port bits decide.
                let bits = (top_bits(hit.examined) >> 96) as u32 & pt.mask;
                acc[PORTS_WORD] |= (bits as u64) << PORTS_SHIFT;
                return None;
            }
        }
        self.fold(acc, n);
        None
    }

    /// Open vSwitch 3.1's `find_match_wc` on this subtable, as a baseline
    /// for the width of [`Subtable::probe`]'s wildcards: the prefix tries
    /// are consulted (through `trie_check`, which records its own bits and
    /// says whether to skip) only when the stage holding the address words
    /// is reached, and a skip, like a port-trie miss, also records every
    /// earlier stage. Where the port trie finds the packet's ports in full,
    /// the whole mask is recorded (Open vSwitch keeps tcp_flags out of its
    /// L4 stage, eswitch's layout does not).
    pub fn probe_ovs31(
        &self,
        key: &FlowKey,
        acc: &mut [u64; KEY_WORDS],
        mut trie_check: impl FnMut(&mut [u64; KEY_WORDS]) -> bool,
    ) -> Option<(Priority, RuleId)> {
        let kw = key.words();
        let mut h = WordHasher::new();
        let mut j = 0usize;
        let last = self.n_stages as usize - 1;
        for s in 0..=last {
            let (start, end) = (j, self.stage_ends[s] as usize);
            let has_address = self.words[start..end]
                .iter()
                .any(|&w| w == 12 || (14..=17).contains(&w));
            if self.has_tries && has_address && trie_check(acc) {
                self.fold(acc, start);
                return None;
            }
            while j < end {
                h.push(kw[self.words[j] as usize] & self.mwords[j]);
                j += 1;
            }
            if s < last && !self.stage_sets[s].contains(h.finish()) {
                self.fold(acc, end);
                return None;
            }
        }
        let n = self.n_words as usize;
        if let Some(node) = self.matching_node(kw, h.finish()) {
            self.fold(acc, n);
            return node.rules.first().copied();
        }
        if let Some(pt) = &self.ports {
            let hit = pt.trie.lookup(pt.value(kw));
            if !hit.has_len(pt.len) {
                let bits = (top_bits(hit.examined) >> 96) as u32 & pt.mask;
                acc[PORTS_WORD] |= (bits as u64) << PORTS_SHIFT;
                let before_last = if last == 0 {
                    0
                } else {
                    self.stage_ends[last - 1]
                };
                self.fold(acc, before_last as usize);
                return None;
            }
        }
        self.fold(acc, n);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_cover_every_word_once() {
        let mut seen = [0u8; KEY_WORDS];
        for stage in STAGE_WORDS {
            for &w in stage {
                seen[w as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
    }

    #[test]
    fn prefix_lengths() {
        let m = Mask::EMPTY
            .with(Field::Ipv4Src, 0xffff_0000)
            .with(Field::Ipv4Dst, 0x00ff_0000)
            .with(Field::Ipv6Dst, u128::MAX);
        assert_eq!(prefix_len(&m, Field::Ipv4Src), 16);
        assert_eq!(prefix_len(&m, Field::Ipv4Dst), 0);
        assert_eq!(prefix_len(&m, Field::Ipv6Src), 0);
        assert_eq!(prefix_len(&m, Field::Ipv6Dst), 128);
    }

    #[test]
    fn empty_mask_subtable_matches_everything() {
        let mut st = Subtable::new(&Mask::EMPTY);
        assert!(st.insert(RuleId(1), &Match::catch_all(), Priority(5)));
        let mut acc = [0u64; KEY_WORDS];
        let mut k = FlowKey::ZERO;
        k.set_tp_dst(99);
        assert_eq!(
            st.probe(&k, &mut acc).and_then(|r| r.first().copied()),
            Some((Priority(5), RuleId(1)))
        );
        assert_eq!(acc, [0u64; KEY_WORDS]);
        assert_eq!(
            st.remove(RuleId(1), &Match::catch_all(), Priority(5)),
            Removed::Node
        );
        assert!(st.is_empty());
        assert_eq!(st.probe(&k, &mut acc), None);
    }

    #[test]
    fn shadowed_rules_and_removal() {
        let mask = Mask::EMPTY.with_exact(Field::InPort);
        let mut k = FlowKey::ZERO;
        k.set_in_port(3);
        let m = Match::new(&k, &mask);
        let mut st = Subtable::new(&mask);
        assert!(st.insert(RuleId(1), &m, Priority(5)));
        assert!(!st.insert(RuleId(2), &m, Priority(9)));
        assert_eq!(st.max_priority(), Priority(9));
        let mut acc = [0u64; KEY_WORDS];
        assert_eq!(
            st.probe(&k, &mut acc).and_then(|r| r.first().copied()),
            Some((Priority(9), RuleId(2)))
        );
        assert_eq!(st.find_exact(&m, Priority(5)), Some(RuleId(1)));
        assert_eq!(st.remove(RuleId(2), &m, Priority(5)), Removed::Absent);
        assert_eq!(st.remove(RuleId(2), &m, Priority(9)), Removed::Rule);
        assert_eq!(st.max_priority(), Priority(5));
        assert_eq!(
            st.probe(&k, &mut acc).and_then(|r| r.first().copied()),
            Some((Priority(5), RuleId(1)))
        );
        assert_eq!(st.remove(RuleId(1), &m, Priority(5)), Removed::Node);
        assert_eq!(st.iter().count(), 0);
    }
}

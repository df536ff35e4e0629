//! Path-compressed binary prefix tries: which prefix lengths of a value are
//! present, and how many of its top bits that answer depended on.
//!
//! The classifier keeps one trie per address field (IPv4/ARP source and
//! destination, IPv6 source and destination) holding the prefix of every
//! rule whose mask on that field is a CIDR prefix, and one trie per subtable
//! over the 32-bit port pair. A lookup walks a packet's value once and
//! returns a [`TrieHit`]: the set of lengths `p` such that some stored prefix
//! of length `p` equals the value's top `p` bits, and the number of top bits
//! the walk examined.
//!
//! Every stored prefix has an *owner* (the classifier's subtable slot; the
//! port tries use 0). A walk can also collect the owners of the prefixes it
//! matched, as a bitmap over owners below [`OWNER_CAP`]: the classifier then
//! knows which subtables have a rule whose prefix matches the packet, not
//! only which lengths some rule has.
//!
//! ## The examined-bits lemma
//!
//! Think of the uncompressed binary trie whose nodes are all prefixes of
//! stored prefixes (so every leaf is a stored prefix). The walk for a value
//! `a` descends while the child for `a`'s next bit exists and stops at depth
//! `d` for one of three reasons, giving `examined`:
//! - `d` = width (all bits read): `examined = width`;
//! - the node has no child at all: `examined = d` (bit `d` was not needed);
//! - the node has only the other child: `examined = d + 1`.
//!
//! Lemma: every value `q` with the same top `examined` bits as `a` walks the
//! same nodes and stops at the same node, so it matches the same stored
//! prefixes: same set of lengths, same owners, same `examined`.
//! (Its path is decided by its first `d` bits; at the last node the reason
//! to stop depends only on the node and, in the third case, on bit `d`.)
//! The classifier builds its skip arguments on this lemma.
//!
//! A compressed node stands for a chain of uncompressed nodes with one child
//! each, so a mismatch inside a node's bits at position `m` is the third case
//! at depth `m`: `examined = m + 1`.
//!
//! ## Representation and invariants
//!
//! Values are left-aligned in a `u128` (bit 127 is bit 0 of the prefix), so
//! one implementation serves 32- and 128-bit fields. Nodes (32 bytes: what
//! a walk reads) live in a `Vec` with `u32` indices and a free list; node 0
//! is the root (the empty prefix), and index 0 never appears as a child, so
//! 0 means "no child". A node where prefixes are stored points to a
//! [`Stored`] entry (owners and counts) and to its owner bitmap, kept in
//! side vectors. Invariants:
//! - a node's `prefix` holds exactly its top `end` bits (the rest zero), and
//!   its first bit after its parent's end selects the parent's child slot;
//! - a node has a `Stored` entry iff some prefix is stored there, and the
//!   entry's bitmap has exactly the bits of its owners below [`OWNER_CAP`];
//! - every node but the root stores a prefix or has two children (removal
//!   prunes and merges), so the compressed trie is exactly the uncompressed
//!   one;
//! - the root never stores a prefix (length 0 is not a prefix the
//!   classifier tracks).
//!
//! Single-owner data; not shared between threads by itself.

/// Most bits a trie value has.
pub(crate) const MAX_WIDTH: u32 = 128;

/// Owners below this are tracked in walk bitmaps ([`OwnerBits`]).
pub(crate) const OWNER_CAP: usize = 512;

/// Bitmap over owners `0..OWNER_CAP`.
pub(crate) type OwnerBits = [u64; OWNER_CAP / 64];

/// A value with only its top `n` bits set (`n` ≤ 128).
#[inline]
pub(crate) fn top_bits(n: u32) -> u128 {
    if n == 0 {
        0
    } else {
        u128::MAX << (MAX_WIDTH - n.min(MAX_WIDTH))
    }
}

/// Bit `i` (0 = most significant) of a left-aligned value.
#[inline]
fn bit(v: u128, i: u32) -> usize {
    ((v >> (MAX_WIDTH - 1 - i)) & 1) as usize
}

/// What a walk found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrieHit {
    /// Bit `p - 1` set when a stored prefix of length `p` equals the value's
    /// top `p` bits.
    pub plens: u128,
    /// Top bits of the value the answer depends on (see the lemma above).
    pub examined: u32,
}

impl TrieHit {
    /// True when a stored prefix of length `p` (1..=128) matched.
    #[inline]
    pub fn has_len(&self, p: u32) -> bool {
        p > 0 && (self.plens >> (p - 1)) & 1 != 0
    }
}

/// A trie node: only what a walk reads, 32 bytes, so that walks touch few
/// cache lines; who stores a prefix here is kept aside in [`Stored`].
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Top `end` bits of every value below this node; other bits zero.
    prefix: u128,
    /// Child by the first bit after `end`; 0 = none.
    child: [u32; 2],
    /// Index in `PrefixTrie::stored` when prefixes of length `end` equal
    /// to `prefix` are stored, else [`NO_SET`].
    set: u32,
    /// Depth this node's bits end at (its parent's `end` is where they start).
    end: u8,
}

/// No prefix is stored at a node.
const NO_SET: u32 = u32::MAX;

impl Node {
    fn new(prefix: u128, end: u32) -> Self {
        Node {
            prefix,
            child: [0, 0],
            set: NO_SET,
            end: end as u8,
        }
    }
}

/// The prefixes stored at one node, by owner.
#[derive(Clone, Debug, Default)]
struct Stored {
    /// Sum of the owners' counts; never 0 while in use.
    count: u32,
    owners: Vec<(u32, u32)>,
}

const ROOT: u32 = 0;

/// A counted set of prefixes of one width.
#[derive(Clone, Debug)]
pub(crate) struct PrefixTrie {
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Owners of the prefixes stored at a node (`Node::set`), and the
    /// bitmap of those below [`OWNER_CAP`] at the same index.
    stored: Vec<Stored>,
    stored_bits: Vec<OwnerBits>,
    free_stored: Vec<u32>,
    width: u8,
    /// Stored prefixes (with multiplicity).
    len: usize,
}

impl PrefixTrie {
    /// An empty trie over values of `width` bits (1..=128).
    pub fn new(width: u32) -> Self {
        debug_assert!((1..=MAX_WIDTH).contains(&width));
        PrefixTrie {
            nodes: vec![Node::new(0, 0)],
            free: Vec::new(),
            stored: Vec::new(),
            stored_bits: Vec::new(),
            free_stored: Vec::new(),
            width: width as u8,
            len: 0,
        }
    }

    /// Number of stored prefixes, with multiplicity.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn alloc(&mut self, node: Node) -> u32 {
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    fn release(&mut self, i: u32) {
        debug_assert_eq!(self.nodes[i as usize].set, NO_SET);
        self.nodes[i as usize] = Node::new(0, 0);
        self.free.push(i);
    }

    /// Records one more prefix of `owner` at node `n`.
    fn add_owner(&mut self, n: u32, owner: u32) {
        let mut si = self.nodes[n as usize].set;
        if si == NO_SET {
            si = match self.free_stored.pop() {
                Some(i) => i,
                None => {
                    self.stored.push(Stored::default());
                    self.stored_bits.push([0; OWNER_CAP / 64]);
                    (self.stored.len() - 1) as u32
                }
            };
            self.nodes[n as usize].set = si;
        }
        let st = &mut self.stored[si as usize];
        st.count += 1;
        match st.owners.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, c)) => *c += 1,
            None => {
                st.owners.push((owner, 1));
                let o = owner as usize;
                if o < OWNER_CAP {
                    self.stored_bits[si as usize][o / 64] |= 1 << (o % 64);
                }
            }
        }
    }

    /// Forgets one prefix of `owner` at node `n`; false when it has none.
    fn remove_owner(&mut self, n: u32, owner: u32) -> bool {
        let si = self.nodes[n as usize].set;
        if si == NO_SET {
            return false;
        }
        let st = &mut self.stored[si as usize];
        let Some(i) = st.owners.iter().position(|(o, _)| *o == owner) else {
            return false;
        };
        st.count -= 1;
        st.owners[i].1 -= 1;
        if st.owners[i].1 == 0 {
            st.owners.swap_remove(i);
            let o = owner as usize;
            if o < OWNER_CAP {
                self.stored_bits[si as usize][o / 64] &= !(1 << (o % 64));
            }
        }
        if st.count == 0 {
            debug_assert!(st.owners.is_empty());
            self.nodes[n as usize].set = NO_SET;
            self.free_stored.push(si);
        }
        true
    }

    /// Stored prefixes at node `n`.
    fn count(&self, n: u32) -> u32 {
        match self.nodes[n as usize].set {
            NO_SET => 0,
            si => self.stored[si as usize].count,
        }
    }

    /// Adds one copy of the prefix `value` / `plen` (`value` left-aligned;
    /// bits below `plen` are ignored; `plen` in 1..=width) for `owner`.
    pub fn insert(&mut self, value: u128, plen: u32, owner: u32) {
        debug_assert!(plen >= 1 && plen <= self.width as u32);
        let value = value & top_bits(plen);
        self.len += 1;
        let mut cur = ROOT;
        loop {
            let depth = self.nodes[cur as usize].end as u32;
            if depth == plen {
                self.add_owner(cur, owner);
                return;
            }
            let b = bit(value, depth);
            let c = self.nodes[cur as usize].child[b];
            if c == 0 {
                let leaf = self.alloc(Node::new(value, plen));
                self.add_owner(leaf, owner);
                self.nodes[cur as usize].child[b] = leaf;
                return;
            }
            let cn = &self.nodes[c as usize];
            let (cn_prefix, cn_end) = (cn.prefix, cn.end as u32);
            let limit = cn_end.min(plen);
            let diff = (value ^ cn_prefix) & top_bits(limit);
            let common = if diff == 0 {
                limit
            } else {
                diff.leading_zeros()
            };
            if common == cn_end {
                cur = c;
                continue;
            }
            // Split `c` at `common` (depth < common < cn.end: the bit at
            // `depth` is equal, it chose the slot).
            let mid = self.alloc(Node::new(cn_prefix & top_bits(common), common));
            self.nodes[mid as usize].child[bit(cn_prefix, common)] = c;
            self.nodes[cur as usize].child[b] = mid;
            if common == plen {
                self.add_owner(mid, owner);
            } else {
                let leaf = self.alloc(Node::new(value, plen));
                self.add_owner(leaf, owner);
                self.nodes[mid as usize].child[bit(value, common)] = leaf;
            }
            return;
        }
    }

    /// Removes one copy of `owner`'s prefix `value` / `plen`; false when
    /// absent.
    pub fn remove(&mut self, value: u128, plen: u32, owner: u32) -> bool {
        let value = value & top_bits(plen);
        // Path from the root to the node, root first.
        let mut path: [u32; MAX_WIDTH as usize + 1] = [0; MAX_WIDTH as usize + 1];
        let mut n = 1;
        let mut cur = ROOT;
        loop {
            let node = &self.nodes[cur as usize];
            let depth = node.end as u32;
            if depth == plen {
                break;
            }
            if depth > plen {
                return false;
            }
            let c = node.child[bit(value, depth)];
            if c == 0 {
                return false;
            }
            let cn = &self.nodes[c as usize];
            if (value ^ cn.prefix) & top_bits((cn.end as u32).min(plen)) != 0 {
                return false;
            }
            path[n] = c;
            n += 1;
            cur = c;
        }
        if !self.remove_owner(cur, owner) {
            return false;
        }
        self.len -= 1;
        // Restore "count > 0 or two children" from the node up: at most the
        // node itself and its parent can break it.
        let mut i = n - 1;
        while i > 0 {
            let idx = path[i];
            let (count, child) = (self.count(idx), self.nodes[idx as usize].child);
            let n_children = child.iter().filter(|&&c| c != 0).count();
            if count > 0 || n_children == 2 {
                break;
            }
            let parent = path[i - 1];
            let slot = if self.nodes[parent as usize].child[0] == idx {
                0
            } else {
                1
            };
            if n_children == 0 {
                self.nodes[parent as usize].child[slot] = 0;
                self.release(idx);
                i -= 1;
            } else {
                // One child: it takes this node's place (its prefix already
                // holds all bits above it).
                let only = child[0].max(child[1]);
                self.nodes[parent as usize].child[slot] = only;
                self.release(idx);
                break;
            }
        }
        true
    }

    /// Walks `value` (left-aligned): the stored lengths matching it and the
    /// bits examined.
    #[inline]
    pub fn lookup(&self, value: u128) -> TrieHit {
        let width = self.width as u32;
        let mut plens = 0u128;
        let mut cur = &self.nodes[ROOT as usize];
        loop {
            let end = cur.end as u32;
            if cur.set != NO_SET {
                plens |= 1 << (end - 1);
            }
            if end >= width {
                return TrieHit {
                    plens,
                    examined: width,
                };
            }
            let b = bit(value, end);
            let c = cur.child[b];
            if c == 0 {
                let examined = if cur.child[b ^ 1] == 0 { end } else { end + 1 };
                return TrieHit { plens, examined };
            }
            let next = &self.nodes[c as usize];
            let diff = (value ^ next.prefix) & top_bits(next.end as u32);
            if diff != 0 {
                return TrieHit {
                    plens,
                    examined: diff.leading_zeros() + 1,
                };
            }
            cur = next;
        }
    }

    /// [`PrefixTrie::lookup`] that also ORs into `owners` the owners (below
    /// [`OWNER_CAP`]) of every stored prefix matching `value`.
    #[cfg(test)]
    pub fn lookup_owners(&self, value: u128, owners: &mut OwnerBits) -> TrieHit {
        let mut w = Walk::new(value);
        loop {
            if let Some(hit) = self.step(&mut w, owners) {
                return hit;
            }
        }
    }

    /// One step of a walk: visits the walk's current node and moves to the
    /// child; the hit once the walk ends. Walks of different tries advanced
    /// in turn overlap their memory latency (see [`walk_all`]).
    #[inline]
    fn step(&self, w: &mut Walk, owners: &mut OwnerBits) -> Option<TrieHit> {
        let width = self.width as u32;
        let cur = &self.nodes[w.node as usize];
        let end = cur.end as u32;
        if cur.set != NO_SET {
            w.plens |= 1 << (end - 1);
            for (b, &o) in owners.iter_mut().zip(&self.stored_bits[cur.set as usize]) {
                *b |= o;
            }
        }
        let plens = w.plens;
        if end >= width {
            return Some(TrieHit {
                plens,
                examined: width,
            });
        }
        let b = bit(w.value, end);
        let c = cur.child[b];
        if c == 0 {
            let examined = if cur.child[b ^ 1] == 0 { end } else { end + 1 };
            return Some(TrieHit { plens, examined });
        }
        let next = &self.nodes[c as usize];
        let diff = (w.value ^ next.prefix) & top_bits(next.end as u32);
        if diff != 0 {
            return Some(TrieHit {
                plens,
                examined: diff.leading_zeros() + 1,
            });
        }
        w.node = c;
        None
    }

    /// Nodes in use (root included): for tests of pruning.
    #[cfg(test)]
    fn live_nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

/// A walk in progress.
#[derive(Clone, Copy, Debug)]
struct Walk {
    value: u128,
    plens: u128,
    node: u32,
}

impl Walk {
    fn new(value: u128) -> Self {
        Walk {
            value,
            plens: 0,
            node: ROOT,
        }
    }
}

/// Walks each `(trie, value)` of `walks` as [`PrefixTrie::lookup`] does,
/// also ORing into `owners[i]` the owners of the prefixes walk `i` matched;
/// the hits in `hits[i]`. The walks advance in turn, one node each, so
/// their node loads overlap instead of adding up.
#[inline]
pub(crate) fn walk_all(
    walks: &[(&PrefixTrie, u128)],
    owners: &mut [OwnerBits],
    hits: &mut [TrieHit],
) {
    let n = walks.len().min(4);
    let mut state = [Walk::new(0); 4];
    let mut pending = 0u8;
    for (i, (st, w)) in state.iter_mut().zip(walks).enumerate() {
        *st = Walk::new(w.1);
        pending |= 1 << i;
    }
    while pending != 0 {
        for i in 0..n {
            if pending & (1 << i) != 0 {
                if let Some(hit) = walks[i].0.step(&mut state[i], &mut owners[i]) {
                    hits[i] = hit;
                    pending &= !(1 << i);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored prefix: value, length, owner.
    type Entry = (u128, u32, u32);

    /// The uncompressed definition, over a list of stored prefixes: the hit
    /// and the owners (below the cap) of the matching prefixes.
    fn naive(stored: &[Entry], width: u32, a: u128) -> (TrieHit, OwnerBits) {
        let mut plens = 0u128;
        let mut owners = [0u64; OWNER_CAP / 64];
        for &(v, p, o) in stored {
            if (v ^ a) & top_bits(p) == 0 {
                plens |= 1 << (p - 1);
                if (o as usize) < OWNER_CAP {
                    owners[o as usize / 64] |= 1 << (o % 64);
                }
            }
        }
        // Node a[0..d) exists iff some stored prefix extends it.
        let extends = |d: u32| {
            stored
                .iter()
                .any(|&(v, p, _)| p >= d && (v ^ a) & top_bits(d) == 0)
        };
        let mut d = 0;
        let examined = loop {
            if d == width {
                break width;
            }
            let has_child = stored
                .iter()
                .any(|&(v, p, _)| p > d && (v ^ a) & top_bits(d) == 0);
            if !has_child {
                break d;
            }
            if !extends(d + 1) {
                break d + 1;
            }
            d += 1;
        };
        (TrieHit { plens, examined }, owners)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_value(rng: &mut Rng, width: u32, pool: &[u128]) -> u128 {
        let mut v = pool[rng.below(pool.len() as u64) as usize];
        // flip a few bits
        for _ in 0..rng.below(3) {
            v ^= 1u128 << (127 - rng.below(width as u64) as u32);
        }
        v & top_bits(width)
    }

    #[test]
    fn brief_example_ipv4() {
        let mut t = PrefixTrie::new(32);
        let v = |x: u32| (x as u128) << 96;
        t.insert(v(0x0a00_0000), 8, 1);
        t.insert(v(0x0a01_0200), 24, 2);
        let h = t.lookup(v(0x0a09_0909));
        assert_eq!(h.plens, 1 << 7);
        assert_eq!(h.examined, 13);
        let h = t.lookup(v(0x0b00_0001));
        assert_eq!(h.plens, 0);
        assert_eq!(h.examined, 8);
        let mut owners = [0u64; OWNER_CAP / 64];
        let h = t.lookup_owners(v(0x0a01_0203), &mut owners);
        assert!(h.has_len(8) && h.has_len(24));
        assert_eq!(owners[0], 0b110);
        // 10.1.2.x: the /24 node has no children, so bit 24 is not needed.
        assert_eq!(h.examined, 24);
    }

    #[test]
    fn matches_naive_model_under_inserts_and_removes() {
        for (seed, width) in [(1u64, 32u32), (2, 128), (3, 16), (4, 32), (5, 128)] {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
            let pool: Vec<u128> = (0..6)
                .map(|_| (((rng.next() as u128) << 64) | rng.next() as u128) & top_bits(width))
                .collect();
            let mut t = PrefixTrie::new(width);
            let mut stored: Vec<Entry> = Vec::new();
            for step in 0..3000 {
                let remove = !stored.is_empty() && rng.below(5) < 2;
                if remove {
                    let i = rng.below(stored.len() as u64) as usize;
                    let (v, p, o) = stored.swap_remove(i);
                    assert!(t.remove(v, p, o));
                } else {
                    let p = 1 + rng.below(width as u64) as u32;
                    let v = random_value(&mut rng, width, &pool) & top_bits(p);
                    // few owners, some beyond the bitmap cap
                    let o = [
                        0,
                        1,
                        63,
                        64,
                        200,
                        OWNER_CAP as u32 - 1,
                        OWNER_CAP as u32 + 7,
                    ][rng.below(7) as usize];
                    t.insert(v, p, o);
                    stored.push((v, p, o));
                }
                assert_eq!(t.len(), stored.len());
                for _ in 0..8 {
                    let a = random_value(&mut rng, width, &pool);
                    let mut owners = [0u64; OWNER_CAP / 64];
                    let hit = t.lookup_owners(a, &mut owners);
                    assert_eq!(
                        (hit, owners),
                        naive(&stored, width, a),
                        "step {step} a={a:#x}"
                    );
                    assert_eq!(t.lookup(a), hit);
                }
                // Removing something absent fails and changes nothing.
                let p = 1 + rng.below(width as u64) as u32;
                let v = random_value(&mut rng, width, &pool) & top_bits(p);
                if !stored.contains(&(v, p, 1)) {
                    assert!(!t.remove(v, p, 1));
                }
            }
            while let Some((v, p, o)) = stored.pop() {
                assert!(t.remove(v, p, o));
            }
            assert_eq!(t.live_nodes(), 1, "pruning left nodes behind");
        }
    }

    #[test]
    fn examined_lemma_holds() {
        // Values agreeing on the examined bits get the same hit and owners.
        let mut rng = Rng(77);
        let width = 32;
        let pool: Vec<u128> = (0..5).map(|_| (rng.next() as u128) << 96).collect();
        let mut t = PrefixTrie::new(width);
        for i in 0..40 {
            let p = 1 + rng.below(32) as u32;
            t.insert(random_value(&mut rng, width, &pool), p, i % 9);
        }
        for _ in 0..2000 {
            let a = random_value(&mut rng, width, &pool);
            let mut owners = [0u64; OWNER_CAP / 64];
            let h = t.lookup_owners(a, &mut owners);
            for _ in 0..10 {
                let noise = ((rng.next() as u128) << 96) & !top_bits(h.examined);
                let q = (a & top_bits(h.examined)) | noise;
                let mut q_owners = [0u64; OWNER_CAP / 64];
                assert_eq!(t.lookup_owners(q, &mut q_owners), h);
                assert_eq!(q_owners, owners);
            }
        }
    }
}

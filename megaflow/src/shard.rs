//! Tables of millions of entries that grow without stopping: a hash map
//! split in [`SHARDS`] maps by key hash ([`ShardedMap`]), and a vector in
//! fixed chunks ([`ChunkedVec`]).
//!
//! One `HashMap` doubles all at once: past 1,835,008 entries (7/8 of
//! 2^21 buckets) it moves every entry, and a slow-path step that installs
//! one megaflow held its lock for 0.6 s. Each shard grows on its own, so
//! one insert moves at most a shard's entries; a chunked vector never
//! moves what it holds.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use crate::key::FastBuild;

/// Shards of a [`ShardedMap`].
pub const SHARDS: usize = 128;

/// A hash map in [`SHARDS`] parts, each growing on its own.
#[derive(Clone, Debug)]
pub struct ShardedMap<K, V> {
    shards: Box<[HashMap<K, V, FastBuild>]>,
    len: usize,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap {
            shards: (0..SHARDS).map(|_| HashMap::default()).collect(),
            len: 0,
        }
    }
}

/// The shard of a key: its hash, mixed again (the shard's own map uses the
/// same hash; taking its bits as they are would give every key of a shard
/// the same control bits or the same home buckets).
fn shard_of<Q: Hash + ?Sized>(k: &Q) -> usize {
    let h = FastBuild::default().hash_one(k);
    let m = (h ^ (h >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (m >> (64 - SHARDS.trailing_zeros())) as usize
}

impl<K: Hash + Eq, V> ShardedMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get<Q>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[shard_of(k)].get(k)
    }

    pub fn get_mut<Q>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[shard_of(k)].get_mut(k)
    }

    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        let old = self.shards[shard_of(&k)].insert(k, v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove<Q>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let old = self.shards[shard_of(k)].remove(k);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Every entry, shard by shard (no order to rely on).
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flat_map(|s| s.iter())
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }
}

/// Entries per chunk of a [`ChunkedVec`].
const CHUNK: usize = 1 << 14;

/// A vector in fixed chunks of [`CHUNK`] entries: growing adds a chunk
/// and moves nothing.
#[derive(Clone, Debug)]
pub struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ChunkedVec<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, v: T) {
        if self.len % CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(c) = self.chunks.last_mut() {
            c.push(v);
        }
        self.len += 1;
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for ChunkedVec<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T> std::ops::IndexMut<usize> for ChunkedVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<'a, T> IntoIterator for &'a ChunkedVec<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Get(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few keys, so removals and overwrites hit.
        prop_oneof![
            4 => (0u64..512, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => (0u64..512).prop_map(Op::Remove),
            2 => (0u64..512).prop_map(Op::Get),
        ]
    }

    proptest! {
        /// A sharded map answers as one map does, whatever is done to it.
        #[test]
        fn a_sharded_map_is_a_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut s = ShardedMap::new();
            let mut m = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(k, v) => prop_assert_eq!(s.insert(k, v), m.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(s.remove(&k), m.remove(&k)),
                    Op::Get(k) => prop_assert_eq!(s.get(&k), m.get(&k)),
                }
                prop_assert_eq!(s.len(), m.len());
            }
            let mut all: Vec<_> = s.iter().map(|(k, v)| (*k, *v)).collect();
            all.sort_unstable();
            let mut want: Vec<_> = m.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(all, want);
        }

        /// A chunked vector keeps every pushed value at its index, across
        /// chunk boundaries.
        #[test]
        fn a_chunked_vec_is_a_vec(n in 0usize..(3 * CHUNK + 7), probe in any::<usize>()) {
            let mut c = ChunkedVec::new();
            for i in 0..n {
                c.push(i);
            }
            prop_assert_eq!(c.len(), n);
            if n > 0 {
                let i = probe % n;
                prop_assert_eq!(c[i], i);
                c[i] = usize::MAX;
                prop_assert_eq!(c.get(i), Some(&usize::MAX));
            }
            prop_assert_eq!(c.get(n), None);
            prop_assert_eq!(c.iter().count(), n);
        }
    }

    #[test]
    fn keys_spread_over_the_shards() {
        // Sequential ids (what flow and rule ids are) use every shard, and
        // none holds more than twice its share.
        let mut s = ShardedMap::new();
        for k in 0..(SHARDS as u64 * 1000) {
            s.insert(k, ());
        }
        let most = s.shards.iter().map(HashMap::len).max().unwrap_or(0);
        let least = s.shards.iter().map(HashMap::len).min().unwrap_or(0);
        assert!(least > 500 && most < 2000, "{least}..{most}");
    }
}

//! The offloaded megaflows by recency of hardware hits: a doubly linked
//! list threaded through the megaflow slots (8 bytes a slot, no map), so
//! a million offloaded flows cost 8 MB and never a rehash. The `lru`
//! crate's cache keeps a heap node and a map entry per flow (about 80
//! bytes) and rehashes its map whole as it grows (a quarter of a second
//! at 1.8M flows, under the slow path's lock).

use megaflow::shard::ChunkedVec;

const NIL: u32 = u32::MAX;

/// A slot's neighbours: towards the most recent and towards the least.
#[derive(Clone, Copy, Debug)]
struct Link {
    newer: u32,
    older: u32,
    linked: bool,
}

const UNLINKED: Link = Link {
    newer: NIL,
    older: NIL,
    linked: false,
};

/// Slots (megaflow indexes) from the most recently hit to the least.
#[derive(Debug)]
pub(super) struct Recency {
    links: ChunkedVec<Link>,
    newest: u32,
    oldest: u32,
    len: usize,
}

impl Default for Recency {
    fn default() -> Self {
        Recency {
            links: ChunkedVec::new(),
            newest: NIL,
            oldest: NIL,
            len: 0,
        }
    }
}

impl Recency {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn link(&mut self, i: u32) -> &mut Link {
        while self.links.len() <= i as usize {
            self.links.push(UNLINKED);
        }
        &mut self.links[i as usize]
    }

    /// Makes `i` the most recent (adding it if absent).
    pub(super) fn touch(&mut self, i: u32) {
        if self.newest == i {
            return;
        }
        self.remove(i);
        let old_newest = self.newest;
        *self.link(i) = Link {
            newer: NIL,
            older: old_newest,
            linked: true,
        };
        if old_newest != NIL {
            self.link(old_newest).newer = i;
        } else {
            self.oldest = i;
        }
        self.newest = i;
        self.len += 1;
    }

    /// A hit on `i`: the most recent, if it is in.
    pub(super) fn hit(&mut self, i: u32) {
        if self.links.get(i as usize).is_some_and(|l| l.linked) {
            self.touch(i);
        }
    }

    /// Takes `i` out; whether it was in.
    pub(super) fn remove(&mut self, i: u32) -> bool {
        let Some(&l) = self.links.get(i as usize) else {
            return false;
        };
        if !l.linked {
            return false;
        }
        match l.newer {
            NIL => self.newest = l.older,
            n => self.link(n).older = l.older,
        }
        match l.older {
            NIL => self.oldest = l.newer,
            o => self.link(o).newer = l.newer,
        }
        *self.link(i) = UNLINKED;
        self.len -= 1;
        true
    }

    /// Takes out the least recent.
    pub(super) fn pop_oldest(&mut self) -> Option<u32> {
        let i = self.oldest;
        (i != NIL && self.remove(i)).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Touch(u32),
        Remove(u32),
        Hit(u32),
        Pop,
    }

    proptest! {
        /// The list orders slots as the `lru` crate's cache does.
        #[test]
        fn recency_is_an_lru(ops in proptest::collection::vec(prop_oneof![
            4 => (0u32..64).prop_map(Op::Touch),
            2 => (0u32..80).prop_map(Op::Remove),
            2 => (0u32..80).prop_map(Op::Hit),
            1 => Just(Op::Pop),
        ], 1..300)) {
            let mut r = Recency::default();
            let mut oracle: lru::LruCache<u32, ()> =
                lru::LruCache::new(NonZeroUsize::new(1000).expect("non-zero"));
            for op in ops {
                match op {
                    Op::Touch(i) => {
                        r.touch(i);
                        oracle.put(i, ());
                    }
                    Op::Remove(i) => prop_assert_eq!(r.remove(i), oracle.pop(&i).is_some()),
                    Op::Hit(i) => {
                        r.hit(i);
                        oracle.get(&i);
                    }
                    Op::Pop => prop_assert_eq!(r.pop_oldest(), oracle.pop_lru().map(|(i, ())| i)),
                }
                prop_assert_eq!(r.len(), oracle.len());
            }
            // The whole order, least recent first.
            while let Some((i, ())) = oracle.pop_lru() {
                prop_assert_eq!(r.pop_oldest(), Some(i));
            }
            prop_assert_eq!(r.pop_oldest(), None);
        }
    }
}

//! Single-producer single-consumer rings shared with the kernel.
//!
//! Each ring is a power-of-two array of descriptors plus a producer index, a
//! consumer index and a flags word, all in one mapping whose layout
//! `getsockopt(XDP_MMAP_OFFSETS)` gives. Indexes are free-running u32s
//! (slot = index & mask). The producer writes descriptors, then publishes
//! them with a release store of the producer index; the consumer reads the
//! producer index with an acquire load before reading descriptors, and
//! gives slots back with a release store of the consumer index, which the
//! producer reads with an acquire load before reusing them.
//!
//! Both sides keep cached copies of the two indexes and only touch the
//! shared ones when the cache says the ring is empty (consumer) or full
//! (producer), so a batch costs one shared load and one shared store.
//!
//! We produce into the fill and TX rings and consume from the RX and
//! completion rings.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::Mmap;

/// `XDP_RING_NEED_WAKEUP` in a ring's flags word.
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// Where the parts of a ring are in its mapping (`struct xdp_ring_offset`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offsets {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// A ring of descriptors of type `T` (u64 addresses for the fill and
/// completion rings, [`XdpDesc`] for RX and TX).
pub(crate) struct Ring<T: Copy> {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    mask: u32,
    cached_prod: u32,
    cached_cons: u32,
    _t: PhantomData<T>,
}

// SAFETY: the ring owns its mapping; the raw pointers point into it and are
// only used through `&mut self` (or `&self` for atomic loads), so moving the
// ring to another thread moves sole access with it.
unsafe impl<T: Copy + Send> Send for Ring<T> {}

/// One RX or TX descriptor (`struct xdp_desc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

impl<T: Copy> Ring<T> {
    /// Builds a ring of `size` (a power of two) descriptors over `map`.
    /// Returns `None` if the offsets do not fit in the mapping.
    pub(crate) fn new(map: Mmap, off: Offsets, size: u32) -> Option<Ring<T>> {
        if !size.is_power_of_two() {
            return None;
        }
        let len = map.len() as u64;
        let desc_end = off
            .desc
            .checked_add(u64::from(size) * std::mem::size_of::<T>() as u64)?;
        let word_ok = |o: u64| o % 4 == 0 && o + 4 <= len;
        if desc_end > len
            || !word_ok(off.producer)
            || !word_ok(off.consumer)
            || !word_ok(off.flags)
            || off.desc % std::mem::align_of::<T>() as u64 != 0
        {
            return None;
        }
        let base = map.as_ptr();
        // SAFETY: called only with the four offsets checked above to lie
        // inside the mapping, suitably aligned (the mapping is
        // page-aligned): the pointer stays within its one allocation.
        let at = |o: u64| unsafe { base.add(o as usize) };
        let producer = at(off.producer) as *const AtomicU32;
        let consumer = at(off.consumer) as *const AtomicU32;
        let flags = at(off.flags) as *const AtomicU32;
        let descs = at(off.desc) as *mut T;
        let mut ring = Ring {
            _map: map,
            producer,
            consumer,
            flags,
            descs,
            size,
            mask: size - 1,
            cached_prod: 0,
            cached_cons: 0,
            _t: PhantomData,
        };
        ring.cached_prod = ring.prod().load(Ordering::Acquire);
        ring.cached_cons = ring.cons().load(Ordering::Acquire);
        Some(ring)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping, 4-aligned (checked in `new`);
        // the kernel accesses the word atomically too.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for `prod`.
        unsafe { &*self.consumer }
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// True when the kernel asks for a syscall to make progress
    /// (`XDP_RING_NEED_WAKEUP`, only with `XDP_USE_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `prod`.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Acquire) & XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side (fill, TX) ----

    /// How many slots (up to `want`) can be written now.
    pub(crate) fn prod_free(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < want {
            self.cached_cons = self.cons().load(Ordering::Acquire);
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        free.min(want)
    }

    /// Writes the `i`th descriptor after the published ones; `i` must be
    /// below what [`Ring::prod_free`] returned.
    pub(crate) fn prod_write(&mut self, i: u32, v: T) {
        debug_assert!(i < self.size - self.cached_prod.wrapping_sub(self.cached_cons));
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: `slot < size`, inside the descriptor array (checked in
        // `new`); the slot is free (the consumer index is past it), so the
        // kernel does not read it until we publish it.
        unsafe { self.descs.add(slot).write(v) };
    }

    /// Publishes `n` written descriptors.
    pub(crate) fn prod_submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Descriptors published but not yet consumed by the kernel.
    pub(crate) fn prod_outstanding(&self) -> u32 {
        self.cached_prod
            .wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    // ---- consumer side (RX, completion) ----

    /// How many descriptors (up to `max`) can be read now.
    pub(crate) fn cons_available(&mut self, max: u32) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < max {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        avail.min(max)
    }

    /// Reads the `i`th unread descriptor; `i` must be below what
    /// [`Ring::cons_available`] returned.
    pub(crate) fn cons_read(&self, i: u32) -> T {
        debug_assert!(i < self.cached_prod.wrapping_sub(self.cached_cons));
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: `slot < size`, inside the descriptor array; the producer
        // published it (acquire load in `cons_available`) and will not
        // rewrite it until we release it.
        unsafe { self.descs.add(slot).read() }
    }

    /// Gives `n` read descriptors back to the producer.
    pub(crate) fn cons_release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }

    /// The mapping (for tests that play the kernel's part).
    #[cfg(test)]
    pub(crate) fn mapping(&self) -> &Mmap {
        &self._map
    }
}

#[cfg(test)]
#[path = "tests/ring.rs"]
mod tests;

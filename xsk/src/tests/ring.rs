//! The ring index arithmetic, with the test playing the kernel's side on
//! an anonymous mapping laid out like a real ring.

use super::*;

const PROD: u64 = 0;
const CONS: u64 = 64;
const FLAGS: u64 = 128;
const DESC: u64 = 256;

fn offsets() -> Offsets {
    Offsets {
        producer: PROD,
        consumer: CONS,
        desc: DESC,
        flags: FLAGS,
    }
}

fn word(ring: &Ring<u64>, off: u64) -> &AtomicU32 {
    // SAFETY: `off` is one of the 4-aligned word offsets inside the mapping.
    unsafe { &*(ring.mapping().as_ptr().add(off as usize) as *const AtomicU32) }
}

fn slot(ring: &Ring<u64>, i: u32) -> u64 {
    let p = ring.mapping().as_ptr();
    // SAFETY: i < 8 (the ring's size), inside the descriptor array.
    unsafe {
        (p.add(DESC as usize) as *const u64)
            .add((i & 7) as usize)
            .read()
    }
}

fn put_slot(ring: &Ring<u64>, i: u32, v: u64) {
    let p = ring.mapping().as_ptr();
    // SAFETY: as for `slot`.
    unsafe {
        (p.add(DESC as usize) as *mut u64)
            .add((i & 7) as usize)
            .write(v)
    }
}

/// A ring of 8 u64s whose indexes start at `start`.
fn ring(start: u32) -> Ring<u64> {
    let map = Mmap::anonymous(4096).expect("mmap");
    let base = map.as_ptr();
    for off in [PROD, CONS] {
        // SAFETY: in the fresh 4096-byte mapping, 4-aligned.
        unsafe { (base.add(off as usize) as *mut u32).write(start) };
    }
    Ring::new(map, offsets(), 8).expect("ring")
}

#[test]
fn rejects_bad_layouts() {
    let map = Mmap::anonymous(4096).expect("mmap");
    assert!(
        Ring::<u64>::new(map, offsets(), 6).is_none(),
        "not a power of two"
    );
    let map = Mmap::anonymous(4096).expect("mmap");
    assert!(
        Ring::<u64>::new(map, offsets(), 1024).is_none(),
        "descs past the end"
    );
    let map = Mmap::anonymous(4096).expect("mmap");
    let mut off = offsets();
    off.consumer = 66;
    assert!(Ring::<u64>::new(map, off, 8).is_none(), "misaligned index");
}

#[test]
fn producer_fills_and_waits_for_consumer() {
    for start in [0, u32::MAX - 2] {
        let mut r = ring(start);
        assert_eq!(r.prod_free(100), 8);
        for i in 0..8 {
            r.prod_write(i, 1000 + u64::from(i));
        }
        r.prod_submit(8);
        assert_eq!(
            word(&r, PROD).load(Ordering::Acquire),
            start.wrapping_add(8)
        );
        assert_eq!(r.prod_outstanding(), 8);
        assert_eq!(r.prod_free(1), 0, "full until the kernel consumes");
        // The "kernel" reads three descriptors and moves its index.
        for i in 0..3 {
            assert_eq!(slot(&r, start.wrapping_add(i)), 1000 + u64::from(i));
        }
        word(&r, CONS).store(start.wrapping_add(3), Ordering::Release);
        assert_eq!(r.prod_free(5), 3);
        assert_eq!(r.prod_outstanding(), 5);
        r.prod_write(0, 7);
        r.prod_submit(1);
        // Wrapped into slot (start + 8) & 7.
        assert_eq!(slot(&r, start.wrapping_add(8)), 7);
    }
}

#[test]
fn consumer_reads_what_was_published() {
    for start in [0, u32::MAX - 1] {
        let mut r = ring(start);
        assert_eq!(r.cons_available(32), 0);
        // The "kernel" publishes five descriptors.
        for i in 0..5 {
            put_slot(&r, start.wrapping_add(i), 50 + u64::from(i));
        }
        word(&r, PROD).store(start.wrapping_add(5), Ordering::Release);
        assert_eq!(r.cons_available(2), 2);
        assert_eq!(r.cons_read(0), 50);
        assert_eq!(r.cons_read(1), 51);
        r.cons_release(2);
        assert_eq!(
            word(&r, CONS).load(Ordering::Acquire),
            start.wrapping_add(2)
        );
        assert_eq!(r.cons_available(32), 3);
        assert_eq!(r.cons_read(2), 54);
        r.cons_release(3);
        assert_eq!(r.cons_available(32), 0);
    }
}

#[test]
fn need_wakeup_flag() {
    let r = ring(0);
    assert!(!r.needs_wakeup());
    word(&r, FLAGS).store(1, Ordering::Release);
    assert!(r.needs_wakeup());
}

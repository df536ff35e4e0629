//! The user counts of owned handles, on a kind whose destroy only counts
//! its calls (no device).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

static DESTROYED: AtomicUsize = AtomicUsize::new(0);

enum Fake {}

impl Kind for Fake {
    type Raw = u8;
    const DESTROY_OP: &'static str = "fake_destroy";
    unsafe fn destroy(_: *mut u8) -> c_int {
        DESTROYED.fetch_add(1, Ordering::Relaxed);
        0
    }
}

#[test]
fn an_object_something_was_made_from_is_not_destroyed_until_that_goes() {
    let (mut a, mut b) = (1u8, 2u8);
    let parent: Dr<Fake> = Dr::made(&mut a, &[]).expect("made");
    let child: Dr<Fake> = Dr::made(&mut b, &[&parent.users]).expect("made");
    let before = DESTROYED.load(Ordering::Relaxed);
    let (parent, code) = destroy(parent).expect_err("in use");
    assert_eq!(code, libc::EBUSY);
    assert_eq!(DESTROYED.load(Ordering::Relaxed), before, "not called");
    destroy(child).expect("the child goes");
    destroy(parent).expect("then the parent");
    assert_eq!(DESTROYED.load(Ordering::Relaxed), before + 2);
    let e = Dr::<Fake>::made(std::ptr::null_mut(), &[]).expect_err("NULL");
    assert!(e >= 0);
}

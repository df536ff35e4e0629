use super::*;

fn copy(flow: u64) -> Restore {
    Restore::SampledCopy {
        flow: HwId(flow),
        cookie: SampleCookie::new(flow as u32),
    }
}

#[test]
fn tags_register_once_within_24_bits() {
    let t = RestoreTable::default();
    assert_eq!(t.register(0, copy(1)), Err(TagError::Zero));
    assert_eq!(
        t.register(TAG_MAX + 1, copy(1)),
        Err(TagError::TooLarge(TAG_MAX + 1))
    );
    assert_eq!(t.register(TAG_MAX, copy(1)), Ok(()));
    assert_eq!(t.register(TAG_MAX, copy(2)), Err(TagError::Taken(TAG_MAX)));
    assert_eq!(
        t.get(TAG_MAX),
        Some(copy(1)),
        "the first registration stays"
    );
    let e = t.register(TAG_MAX + 1, copy(1)).expect_err("too large");
    assert!(e.to_string().contains("0x1000000"), "{e}");
}

#[test]
fn arrivals_are_misses_restores_or_stale() {
    let t = RestoreTable::default();
    let cont = Restore::Continue {
        flow: HwId(9),
        stage: 1,
        state: 0xabc,
    };
    t.register(5, copy(3)).expect("register");
    t.register(6, cont).expect("register");
    assert_eq!(t.classify(PLAIN_MISS), Arrival::Miss);
    assert_eq!(t.classify(5), Arrival::Restored(copy(3)));
    assert_eq!(t.classify(6), Arrival::Restored(cont));
    assert_eq!(t.classify(7), Arrival::Stale(7));
    assert_eq!((t.len(), t.samplers()), (2, 1));
    assert_eq!(t.unregister(5), Some(copy(3)));
    assert_eq!(
        t.classify(5),
        Arrival::Stale(5),
        "a queued copy of a gone flow"
    );
    assert_eq!(t.unregister(5), None);
}

#[test]
fn rx_rules_are_the_bytes_the_device_takes() {
    // COPY (3) of reg_c_0 (0x51), 32 bits (length 0), into reg_b (0x50):
    // mlx5_ifc_copy_action_in_bits.
    assert_eq!(rx::copy_source(), [0x30, 0x51, 0, 0, 0, 0x50, 0, 0]);
    // misc2 starts at byte 192 of fte_match_param; metadata_reg_c_1 is at
    // misc2 + 40, metadata_reg_c_0 at misc2 + 44 (mlx5_ifc.h).
    let v = rx::tag_value(0x12_3456);
    assert_eq!(&v[232..236], &[0x00, 0x12, 0x34, 0x56]);
    assert_eq!(v.iter().filter(|&&b| b != 0).count(), 3, "nothing else set");
    assert_eq!(&rx::tag_mask()[232..236], &[0xff; 4]);
    let s = rx::source_value(0x0004_0000);
    assert_eq!(&s[236..240], &[0x00, 0x04, 0x00, 0x00]);
    assert_eq!(&rx::source_mask(0xffff_0000)[236..240], &[0xff, 0xff, 0, 0]);
    assert_eq!(rx::criteria(), 1 << 3, "misc2");
}

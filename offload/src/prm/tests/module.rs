//! Unit tests of `offload/src/prm/mod.rs`, kept beside it.

use super::*;

#[test]
fn from_bytes_checks_lengths_criteria_and_value_bits() {
    assert_eq!(
        Encoded::from_bytes(0, &[0; 6], &[]),
        Err(DecodeError::BadLength { len: 6 })
    );
    assert_eq!(
        Encoded::from_bytes(0, &[], &[0; MATCH_PARAM_LEN + 4]),
        Err(DecodeError::BadLength {
            len: MATCH_PARAM_LEN + 4
        })
    );
    assert_eq!(
        Encoded::from_bytes(0x80, &[], &[]),
        Err(DecodeError::BadCriteria(0x80))
    );
    let mut v = [0u8; 64];
    v[16] = 6;
    assert_eq!(
        Encoded::from_bytes(1, &[0; 64], &v),
        Err(DecodeError::ValueOutsideMask {
            block: Block::Outer,
            byte: 16
        })
    );
    // A value beyond a shorter mask is outside the mask too.
    assert_eq!(
        Encoded::from_bytes(1, &[0; 8], &v),
        Err(DecodeError::ValueOutsideMask {
            block: Block::Outer,
            byte: 16
        })
    );
    // Blocks not enabled are ignored, as Direct Rule copies only enabled ones.
    let e = Encoded::from_bytes(2, &[0xff; 64], &v).unwrap();
    assert_eq!(
        e,
        Encoded {
            criteria: 2,
            ..Encoded::EMPTY
        }
    );
    // Masked misc3 is refused; an enabled but empty misc3 is fine.
    let mut m = [0u8; MATCH_PARAM_LEN];
    assert!(Encoded::from_bytes(0x10, &m, &[]).is_ok());
    m[300] = 1;
    assert_eq!(
        Encoded::from_bytes(0x10, &m, &[]),
        Err(DecodeError::UnsupportedBlock(Block::Misc3))
    );
}

#[test]
fn match_sz_ends_at_the_last_enabled_block() {
    let with = |criteria| {
        Encoded {
            criteria,
            ..Encoded::EMPTY
        }
        .match_sz()
    };
    assert_eq!(with(0), 0);
    assert_eq!(with(1), 64);
    assert_eq!(with(3), 128);
    assert_eq!(with(2), 128);
    assert_eq!(with(9), 256);
    // misc3+ enabled but empty: the buffer still stops after misc2.
    assert_eq!(with(0x10), 256);
}

#[test]
fn port_table_is_a_bijection() {
    let mut t = PortTable::new().with(PortNo(1), Vport(2));
    t.insert(PortNo(1), Vport(3));
    assert_eq!(t.vport(PortNo(1)), Some(Vport(3)));
    assert_eq!(t.port(Vport(2)), None);
    t.insert(PortNo(5), Vport(3));
    assert_eq!(t.vport(PortNo(1)), None);
    assert_eq!(t.port(Vport(3)), Some(PortNo(5)));
}

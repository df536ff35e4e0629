//! Tests of the modify-header PRM encoding.

use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Golden bytes, worked out by hand from the bit layout.

#[test]
fn golden_set_reg_c_0_whole_field() {
    // set_action_in, big-endian bit numbering:
    //   bits 0..4   action_type = SET = 1          -> 0001
    //   bits 4..16  field = METADATA_REGC_0 = 0x051 -> 0000 0101 0001
    //   so bytes 0-1 are 0001 0000 | 0101 0001 = 0x10 0x51.
    //   bits 16..19 reserved, 19..24 offset = 0    -> byte 2 = 0x00
    //   bits 24..27 reserved, 27..32 length = 32, stored as 0 -> byte 3 = 0x00
    //   bits 32..64 data = 0x00001234              -> bytes 4-7.
    // (The brief's "0x15 0x10" swapped the nibbles: the 4-bit action type
    // comes first, then the 12-bit field id 0x051.)
    let op = ModifyOp::set(ModifyField::RegC(0), 0x1234);
    let want = [0x10, 0x51, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34];
    assert_eq!(op.encode(), want);
    assert_eq!(ModifyOp::decode(&want), Ok(op));
}

#[test]
fn golden_partial_set_add_and_copy() {
    // Linux's vport metadata write: reg_c_0 bits 16..32 = 5.
    //   0x1 | 0x051 -> 10 51; offset 16 = 0b10000 in bits 19..24 -> 0x10;
    //   length 16 in bits 27..32 -> 0x10; data 5.
    let op = ModifyOp::Set {
        field: ModifyField::RegC(0),
        offset: 16,
        length: 16,
        data: 5,
    };
    let want = [0x10, 0x51, 0x10, 0x10, 0x00, 0x00, 0x00, 0x05];
    assert_eq!(op.encode(), want);
    assert_eq!(ModifyOp::decode(&want), Ok(op));

    // TTL decrement: ADD (2) on IP_TTL (0x00a) of 0xff.
    //   0010 | 0000 0000 1010 -> 20 0a; reserved 00 00; data 00 00 00 ff.
    let op = ModifyOp::Add {
        field: ModifyField::IpTtl,
        data: 0xff,
    };
    let want = [0x20, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff];
    assert_eq!(op.encode(), want);
    assert_eq!(ModifyOp::decode(&want), Ok(op));

    // COPY (3) of SIPV4 (0x015) bits 0..32 into reg_c_2 (0x053):
    //   0011 | 0000 0001 0101 -> 30 15; src_offset 0, length 32 -> 00 00;
    //   reserved[4] | dst_field 0x053 -> 0000 0000 0101 0011 -> 00 53;
    //   dst_offset 0 -> 00; reserved -> 00.
    let op = ModifyOp::Copy {
        src: ModifyField::Sipv4,
        src_offset: 0,
        length: 32,
        dst: ModifyField::RegC(2),
        dst_offset: 0,
    };
    let want = [0x30, 0x15, 0x00, 0x00, 0x00, 0x53, 0x00, 0x00];
    assert_eq!(op.encode(), want);
    assert_eq!(ModifyOp::decode(&want), Ok(op));

    // A list is the concatenation.
    let list = [ModifyOp::set(ModifyField::RegC(0), 0x1234), op];
    let bytes = encode_list(&list);
    assert_eq!(bytes.len(), 16);
    assert_eq!(decode_list(&bytes), Ok(list.to_vec()));
}

// ---------------------------------------------------------------------------
// Field table.

#[test]
fn field_ids_round_trip_and_match_the_header() {
    let ids: Vec<u16> = ModifyField::ALL.iter().map(|f| f.id()).collect();
    let mut sorted = ids.clone();
    sorted.dedup();
    assert_eq!(sorted, ids, "ALL is in id order, without duplicates");
    for f in ModifyField::ALL {
        assert_eq!(ModifyField::from_id(f.id()), Some(f), "{f}");
        assert!((1..=32).contains(&f.width()));
    }
    // Spot checks against mlx5_ifc.h / the kernel header.
    assert_eq!(ModifyField::Sipv6(0).id(), 0xd);
    assert_eq!(ModifyField::Dipv6(3).id(), 0x14);
    assert_eq!(ModifyField::RegC(5).id(), 0x56);
    assert_eq!(ModifyField::RegC(7).id(), 0x58);
    assert_eq!(ModifyField::IpEcn.id(), 0x73);
    assert_eq!(ModifyField::Ipv6HopLimit.id(), 0x47);
    assert_eq!(ModifyField::TcpFlags.width(), 9);
    assert_eq!(ModifyField::FirstVid.width(), 12);
    assert_eq!(ModifyField::Sipv4.name(), "ipv4_src");
    assert_eq!(ModifyField::RegC(3).name(), "reg_c_3");
    assert_eq!(ModifyField::Dipv6(1).to_string(), "ipv6_dst_95_64");
    assert_eq!(ModifyField::from_id(0x50), Some(ModifyField::RegB));
    assert_eq!(ModifyField::RegB.width(), 32);
    // Unknown: REGA (0x49), TCP_SEQ_NUM (0x59), 0, 0x18.
    for id in [0, 0x18, 0x49, 0x59, 0x5b, 0x6e, 0xfff] {
        assert_eq!(ModifyField::from_id(id), None, "{id:#x}");
    }
    let known = (0..0x1000u16)
        .filter(|&id| ModifyField::from_id(id).is_some())
        .count();
    assert_eq!(known, ModifyField::ALL.len());
}

#[test]
fn set_masks_the_value_to_the_field() {
    assert_eq!(
        ModifyOp::set(ModifyField::IpDscp, 0xffff_ffff),
        ModifyOp::Set {
            field: ModifyField::IpDscp,
            offset: 0,
            length: 6,
            data: 0x3f
        }
    );
}

// ---------------------------------------------------------------------------
// Errors.

#[test]
fn size_errors() {
    assert_eq!(decode_list(&[]), Err(ModifyError::BadSize { len: 0 }));
    assert_eq!(decode_list(&[0; 12]), Err(ModifyError::BadSize { len: 12 }));
    assert_eq!(ModifyError::BadSize { len: 12 }.index(), None);
    assert!(!ModifyError::BadSize { len: 12 }.errno_is_eopnotsupp());
}

#[test]
fn action_errors_name_the_action() {
    let good = ModifyOp::set(ModifyField::RegC(1), 7).encode();
    let check = |bad: [u8; 8], want: ModifyError| {
        assert_eq!(ModifyOp::decode(&bad), Err(want), "{bad:02x?}");
        let mut list = good.to_vec();
        list.extend(good);
        list.extend(bad);
        let got = decode_list(&list);
        assert_eq!(got.map_err(|e| e.index()), Err(Some(2)));
    };
    // Action type 0 and 4: EOPNOTSUPP.
    let e = ModifyError::UnknownActionType {
        index: 0,
        action_type: 4,
    };
    check([0x40, 0x51, 0, 0, 0, 0, 0, 0], e);
    assert!(e.errno_is_eopnotsupp());
    check(
        [0x00, 0x51, 0, 0, 0, 0, 0, 0],
        ModifyError::UnknownActionType {
            index: 0,
            action_type: 0,
        },
    );
    // Unknown field 0x049 (REGA, not modelled) and 0x018.
    let e = ModifyError::UnknownField { index: 0, id: 0x49 };
    check([0x10, 0x49, 0, 0, 0, 0, 0, 0], e);
    assert!(!e.errno_is_eopnotsupp());
    // COPY with an unknown destination.
    check(
        [0x30, 0x15, 0, 0, 0x00, 0x18, 0, 0],
        ModifyError::UnknownField { index: 0, id: 0x18 },
    );
    // SET of 8 bits at offset 4 of the 8-bit TTL.
    check(
        [0x10, 0x0a, 0x04, 0x08, 0, 0, 0, 0],
        ModifyError::OutOfRange {
            index: 0,
            field: ModifyField::IpTtl,
            offset: 4,
            length: 8,
        },
    );
    // Length 0 means 32: too wide for the 16-bit port.
    check(
        [0x10, 0x08, 0x00, 0x00, 0, 0, 0, 0],
        ModifyError::OutOfRange {
            index: 0,
            field: ModifyField::TcpSport,
            offset: 0,
            length: 32,
        },
    );
    // COPY 16 bits at dst offset 20 of reg_c_0.
    check(
        [0x30, 0x08, 0x00, 0x10, 0x00, 0x51, 0x14, 0x00],
        ModifyError::OutOfRange {
            index: 0,
            field: ModifyField::RegC(0),
            offset: 20,
            length: 16,
        },
    );
    // Reserved bits: SET byte 2 bit 0, ADD's offset/length bytes, COPY's
    // last byte.
    check(
        [0x10, 0x51, 0x80, 0x00, 0, 0, 0, 0],
        ModifyError::ReservedBits {
            index: 0,
            bits: 0x0000_8000_0000_0000,
        },
    );
    check(
        [0x20, 0x0a, 0x00, 0x01, 0, 0, 0, 0],
        ModifyError::ReservedBits {
            index: 0,
            bits: 0x0000_0001_0000_0000,
        },
    );
    check(
        [0x30, 0x15, 0x00, 0x00, 0x00, 0x53, 0x00, 0x01],
        ModifyError::ReservedBits { index: 0, bits: 1 },
    );
    // ADD on a port: EINVAL.
    check(
        [0x20, 0x08, 0, 0, 0, 0, 0, 1],
        ModifyError::AddUnsupported {
            index: 0,
            field: ModifyField::TcpSport,
        },
    );
}

#[test]
fn one_ip_version_and_one_transport_per_list() {
    let v4 = ModifyOp::set(ModifyField::Sipv4, 1);
    let v6 = ModifyOp::set(ModifyField::Dipv6(2), 1);
    let tcp = ModifyOp::set(ModifyField::TcpDport, 1);
    let udp = ModifyOp::set(ModifyField::UdpSport, 1);
    let reg = ModifyOp::set(ModifyField::RegC(0), 1);
    let e = decode_list(&encode_list(&[v4, reg, v6])).unwrap_err();
    assert_eq!(
        e,
        ModifyError::MixedL3 {
            index: 2,
            field: ModifyField::Dipv6(2)
        }
    );
    assert!(e.errno_is_eopnotsupp());
    let e = decode_list(&encode_list(&[udp, v4, tcp])).unwrap_err();
    assert_eq!(
        e,
        ModifyError::MixedL4 {
            index: 2,
            field: ModifyField::TcpDport
        }
    );
    assert!(!e.errno_is_eopnotsupp());
    // The destination decides: copying an IPv4 address into a register
    // and then rewriting an IPv6 address is fine.
    let copy = ModifyOp::Copy {
        src: ModifyField::Sipv4,
        src_offset: 0,
        length: 32,
        dst: ModifyField::RegC(3),
        dst_offset: 0,
    };
    assert!(decode_list(&encode_list(&[copy, v6, tcp])).is_ok());
    assert!(e.to_string().contains("tcp_dport"), "{e}");
}

// ---------------------------------------------------------------------------
// Properties.

fn arb_field() -> impl Strategy<Value = ModifyField> {
    proptest::sample::select(ModifyField::ALL.to_vec())
}

/// (offset, length) with offset + length <= width.
fn arb_range(width: u8) -> impl Strategy<Value = (u8, u8)> {
    (1..=width).prop_flat_map(move |len| (0..=width - len, Just(len)))
}

fn arb_op() -> impl Strategy<Value = ModifyOp> {
    prop_oneof![
        arb_field().prop_flat_map(|field| (arb_range(field.width()), any::<u32>()).prop_map(
            move |((offset, length), data)| ModifyOp::Set {
                field,
                offset,
                length,
                data
            }
        )),
        (
            prop_oneof![Just(ModifyField::IpTtl), Just(ModifyField::Ipv6HopLimit)],
            any::<u32>()
        )
            .prop_map(|(field, data)| ModifyOp::Add { field, data }),
        (arb_field(), arb_field()).prop_flat_map(|(src, dst)| {
            let max = src.width().min(dst.width());
            (1..=max).prop_flat_map(move |length| {
                (0..=src.width() - length, 0..=dst.width() - length).prop_map(
                    move |(src_offset, dst_offset)| ModifyOp::Copy {
                        src,
                        src_offset,
                        length,
                        dst,
                        dst_offset,
                    },
                )
            })
        }),
    ]
}

/// What `decode_list` must answer for valid single ops in a list: the
/// first action whose destination disagrees with an earlier one's IP
/// version or transport is refused.
fn expected(ops: &[ModifyOp]) -> Result<Vec<ModifyOp>, ModifyError> {
    let (mut l3, mut l4) = (None, None);
    for (index, op) in ops.iter().enumerate() {
        let field = op.dst();
        if let Some(k) = field.l3_kind() {
            if l3.is_some_and(|p| p != k) {
                return Err(ModifyError::MixedL3 { index, field });
            }
            l3 = Some(k);
        }
        if let Some(k) = field.l4_kind() {
            if l4.is_some_and(|p| p != k) {
                return Err(ModifyError::MixedL4 { index, field });
            }
            l4 = Some(k);
        }
    }
    Ok(ops.to_vec())
}

proptest! {
    #[test]
    fn decode_never_panics(b in any::<[u8; 8]>()) {
        if let Ok(op) = ModifyOp::decode(&b) {
            // Whatever decodes re-encodes to the same bytes.
            prop_assert_eq!(op.encode(), b);
        }
    }

    #[test]
    fn decode_list_never_panics(bytes in vec(any::<u8>(), 0..80)) {
        let _ = decode_list(&bytes);
    }

    #[test]
    fn valid_ops_round_trip(op in arb_op()) {
        prop_assert_eq!(ModifyOp::decode(&op.encode()), Ok(op));
        prop_assert!(!op.to_string().is_empty());
    }

    #[test]
    fn valid_lists_round_trip(ops in vec(arb_op(), 1..8)) {
        prop_assert_eq!(decode_list(&encode_list(&ops)), expected(&ops));
    }
}

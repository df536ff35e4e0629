//! Unit tests of `offload/src/prm/layout.rs`, kept beside it.

use super::*;

#[test]
fn rows_are_indexed_by_their_field() {
    for (i, d) in FIELDS.iter().enumerate() {
        assert_eq!(d.field as usize, i, "{}", d.name);
        assert_eq!(d.field.def(), d);
    }
}

#[test]
fn rows_are_ordered_disjoint_and_inside_their_block() {
    for w in FIELDS.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.bit + u16::from(a.width) <= b.bit,
            "{} overlaps or follows {}",
            a.name,
            b.name
        );
    }
    for d in FIELDS {
        assert!(d.width >= 1 && d.width <= 128, "{}", d.name);
        assert!(d.bit >= d.block.base_bit(), "{}", d.name);
        assert!(
            d.bit + u16::from(d.width) <= d.block.base_bit() + 0x200,
            "{} leaves its block",
            d.name
        );
        assert!(d.end_byte() <= ENCODED_LEN, "{}", d.name);
        assert!(d.name.starts_with(d.block.name()), "{}", d.name);
        // A field the generic path handles stays within 17 bytes.
        assert!(d.end_byte() - usize::from(d.bit) / 8 <= 17, "{}", d.name);
    }
}

#[test]
fn inner_headers_repeat_the_outer_layout() {
    let outer: Vec<_> = FIELDS.iter().filter(|d| d.block == Block::Outer).collect();
    let inner: Vec<_> = FIELDS.iter().filter(|d| d.block == Block::Inner).collect();
    assert_eq!(outer.len(), inner.len());
    for (o, i) in outer.iter().zip(inner.iter()) {
        assert_eq!(o.bit + 0x400, i.bit, "{}", i.name);
        assert_eq!(o.width, i.width, "{}", i.name);
        assert_eq!(&o.name["outer".len()..], &i.name["inner".len()..]);
    }
}

/// Byte positions from the header, as the module comment and
/// REFERENCE.md state them (REFERENCE.md has outer_second_svlan_tag at
/// misc byte 12 bit 1; the header puts inner_second_cvlan_tag there and
/// outer_second_svlan_tag at bit 2).
#[test]
fn known_positions() {
    let at = |f: PrmField| (f.def().bit / 8, f.def().bit % 8, f.def().width);
    assert_eq!(at(PrmField::OuterSmac), (0, 0, 48));
    assert_eq!(at(PrmField::OuterEthertype), (6, 0, 16));
    assert_eq!(at(PrmField::OuterDmac), (8, 0, 48));
    assert_eq!(at(PrmField::OuterFirstPrio), (14, 0, 3));
    assert_eq!(at(PrmField::OuterFirstCfi), (14, 3, 1));
    assert_eq!(at(PrmField::OuterFirstVid), (14, 4, 12));
    assert_eq!(at(PrmField::OuterIpProtocol), (16, 0, 8));
    assert_eq!(at(PrmField::OuterIpDscp), (17, 0, 6));
    assert_eq!(at(PrmField::OuterIpEcn), (17, 6, 2));
    assert_eq!(at(PrmField::OuterCvlanTag), (18, 0, 1));
    assert_eq!(at(PrmField::OuterSvlanTag), (18, 1, 1));
    assert_eq!(at(PrmField::OuterFrag), (18, 2, 1));
    assert_eq!(at(PrmField::OuterIpVersion), (18, 3, 4));
    assert_eq!(at(PrmField::OuterTcpFlags), (18, 7, 9));
    assert_eq!(at(PrmField::OuterTcpSport), (20, 0, 16));
    assert_eq!(at(PrmField::OuterTcpDport), (22, 0, 16));
    assert_eq!(at(PrmField::OuterIpTtlHoplimit), (27, 0, 8));
    assert_eq!(at(PrmField::OuterUdpSport), (28, 0, 16));
    assert_eq!(at(PrmField::OuterUdpDport), (30, 0, 16));
    assert_eq!(at(PrmField::OuterSrcIp), (32, 0, 128));
    assert_eq!(at(PrmField::OuterDstIp), (48, 0, 128));
    assert_eq!(at(PrmField::MiscSourceEswitchOwnerVhcaId), (64 + 4, 0, 16));
    assert_eq!(at(PrmField::MiscSourcePort), (64 + 6, 0, 16));
    assert_eq!(at(PrmField::MiscOuterSecondPrio), (64 + 8, 0, 3));
    assert_eq!(at(PrmField::MiscOuterSecondVid), (64 + 8, 4, 12));
    assert_eq!(at(PrmField::MiscOuterSecondCvlanTag), (64 + 12, 0, 1));
    assert_eq!(at(PrmField::MiscOuterSecondSvlanTag), (64 + 12, 2, 1));
    assert_eq!(at(PrmField::MiscVxlanVni), (64 + 20, 0, 24));
    assert_eq!(at(PrmField::MiscOuterIpv6FlowLabel), (64 + 29, 4, 20));
    assert_eq!(at(PrmField::InnerSmac), (128, 0, 48));
    assert_eq!(at(PrmField::Misc2MetadataRegC7), (192 + 16, 0, 32));
    assert_eq!(at(PrmField::Misc2MetadataRegC1), (192 + 40, 0, 32));
    assert_eq!(at(PrmField::Misc2MetadataRegC0), (192 + 44, 0, 32));
    assert_eq!(PrmField::reg_c(0), Some(PrmField::Misc2MetadataRegC0));
    assert_eq!(PrmField::reg_c(7), Some(PrmField::Misc2MetadataRegC7));
    assert_eq!(PrmField::reg_c(8), None);
}

#[test]
fn set_writes_big_endian_bits_and_nothing_else() {
    let mut b = [0u8; ENCODED_LEN];
    set(&mut b, PrmField::OuterFirstVid, 0xabc).unwrap();
    assert_eq!(&b[14..16], &[0x0a, 0xbc]);
    set(&mut b, PrmField::OuterFirstPrio, 0b101).unwrap();
    assert_eq!(&b[14..16], &[0xaa, 0xbc]);
    set(&mut b, PrmField::OuterTcpFlags, 0x1ff).unwrap();
    assert_eq!(&b[18..20], &[0x01, 0xff]);
    set(&mut b, PrmField::OuterIpVersion, 6).unwrap();
    assert_eq!(b[18], 0x0d);
    set(&mut b, PrmField::MiscOuterIpv6FlowLabel, 0xfedcb).unwrap();
    assert_eq!(&b[93..96], &[0x0f, 0xed, 0xcb]);
    assert_eq!(get(&b, PrmField::OuterFirstVid), Ok(0xabc));
    assert_eq!(get(&b, PrmField::OuterFirstPrio), Ok(0b101));
    assert_eq!(get(&b, PrmField::OuterFirstCfi), Ok(0));
    assert_eq!(get(&b, PrmField::OuterIpVersion), Ok(6));
    assert_eq!(get(&b, PrmField::OuterFrag), Ok(0));
    assert_eq!(get(&b, PrmField::OuterTcpFlags), Ok(0x1ff));
    assert_eq!(get(&b, PrmField::MiscOuterIpv6FlowLabel), Ok(0xfedcb));
    set(&mut b, PrmField::OuterFirstVid, 0).unwrap();
    assert_eq!(&b[14..16], &[0xa0, 0x00]);
}

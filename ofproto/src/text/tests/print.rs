//! Unit tests of `ofproto/src/text/print.rs`, kept beside it.

use super::*;
use megaflow::{FlowKey, Mask};

fn one(field: Field, v: u128, mask: u128) -> Match {
    let mut k = FlowKey::ZERO;
    k.set_field(field, v);
    Match::new(&k, &Mask::EMPTY.with(field, mask))
}

#[test]
fn values() {
    assert_eq!(
        value(Field::Ipv4Src, 0x0a00_0000, 0xff00_0000),
        "10.0.0.0/8"
    );
    assert_eq!(
        value(Field::Ipv4Src, 0x0a00_0001, 0xff00_00ff),
        "10.0.0.1/255.0.0.255"
    );
    assert_eq!(
        value(Field::EthDst, 0xaabb_ccdd_eeff, 0xffff_ffff_ffff),
        "aa:bb:cc:dd:ee:ff"
    );
    assert_eq!(value(Field::TpDst, 0x1000, 0xf000), "0x1000/0xf000");
    assert_eq!(value(Field::InPort, 0xffff_fffe, 0xffff_ffff), "LOCAL");
    assert_eq!(value(Field::InPort, 7, 0xffff_ffff), "7");
    assert_eq!(value(Field::Ipv6Src, 1, u128::MAX), "::1");
    assert_eq!(value(Field::Ipv6Src, 0, u128::MAX << 64), "::/64");
}

#[test]
fn vlan_forms() {
    assert_eq!(
        format_match(&one(Field::VlanTci, 0x1005, 0x1fff)),
        "dl_vlan=5"
    );
    assert_eq!(
        format_match(&one(Field::VlanTci, 0, 0xffff)),
        "vlan_tci=0x0000"
    );
    assert_eq!(
        format_match(&one(Field::VlanTci, 0x7000, 0xf000)),
        "dl_vlan_pcp=3"
    );
    assert_eq!(
        format_match(&one(Field::VlanTci, 0x1000, 0x1000)),
        "vlan_tci=0x1000/0x1000"
    );
}

#[test]
fn actions_print_ovs_style() {
    let i = Instructions {
        apply: vec![
            OfAction::Output {
                port: OfPort::Controller,
                max_len: 0xffff,
            },
            OfAction::Output {
                port: OfPort::Normal,
                max_len: 0,
            },
            OfAction::SetField {
                field: Field::VlanTci,
                value: 0x1064,
                mask: 0x1fff,
            },
            OfAction::SetField {
                field: Field::Reg0,
                value: 0x50,
                mask: 0xf0,
            },
            OfAction::Move {
                src: FieldRange {
                    field: Field::Reg0,
                    ofs: 0,
                    n_bits: 16,
                    opt: None,
                },
                dst: FieldRange {
                    field: Field::Reg1,
                    ofs: 16,
                    n_bits: 16,
                    opt: None,
                },
            },
        ],
        ..Instructions::default()
    };
    assert_eq!(
        format_instructions(&i),
        "CONTROLLER:65535,NORMAL,set_field:4196->vlan_vid,set_field:0x50/0xf0->reg0,\
         move:reg0[0..15]->reg1[16..31]"
    );
    assert_eq!(format_instructions(&Instructions::default()), "drop");
}

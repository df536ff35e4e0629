//! Unit tests of `ofproto/src/text/actions.rs`, kept beside it.

use super::*;
use crate::rule::FieldRange;
use crate::text::parse_instructions;
use megaflow::PortNo;

fn apply(s: &str) -> Vec<OfAction> {
    parse_instructions(s).unwrap().apply
}

#[test]
fn outputs() {
    let out = |p, max_len| OfAction::Output { port: p, max_len };
    assert_eq!(apply("2"), vec![out(OfPort::Port(PortNo(2)), 0)]);
    assert_eq!(apply("output:LOCAL"), vec![out(OfPort::Local, 0)]);
    assert_eq!(
        apply("IN_PORT,flood ALL"),
        vec![
            out(OfPort::InPort, 0),
            out(OfPort::Flood, 0),
            out(OfPort::All, 0)
        ]
    );
    assert_eq!(apply("controller"), vec![out(OfPort::Controller, 0xffff)]);
    assert_eq!(apply("CONTROLLER:128"), vec![out(OfPort::Controller, 128)]);
    assert_eq!(
        apply("controller(max_len=64)"),
        vec![out(OfPort::Controller, 64)]
    );
    assert_eq!(
        apply("output(port=3,max_len=100)"),
        vec![out(OfPort::Port(PortNo(3)), 100)]
    );
    assert!(parse_instructions("output:ANY").is_err());
    assert!(parse_instructions("output:0").is_err());
}

#[test]
fn load_and_move() {
    assert_eq!(
        apply("load:0x5->NXM_NX_REG0[4..7]"),
        vec![OfAction::SetField {
            field: Field::Reg0,
            value: 0x50,
            mask: 0xf0
        }]
    );
    assert!(parse_instructions("load:0x10->reg0[0..3]").is_err());
    assert_eq!(
        apply("move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"),
        vec![OfAction::Move {
            src: FieldRange::whole(Field::EthSrc),
            dst: FieldRange::whole(Field::EthDst)
        }]
    );
    assert!(parse_instructions("move:reg0[]->nw_proto[0..7]").is_err());
}

#[test]
fn instructions_in_order() {
    let i = parse_instructions(
        "meter:1,output:2,clear_actions,write_actions(output:3),write_metadata:0x1/0xff,goto_table:2",
    )
    .unwrap();
    assert_eq!(i.meter, Some(MeterId(1)));
    assert!(i.clear_actions);
    assert_eq!(i.write.as_ref().map(Vec::len), Some(1));
    assert_eq!(i.write_metadata, Some((1, 0xff)));
    assert_eq!(i.goto_table, Some(TableId(2)));
    assert!(parse_instructions("output:1,meter:1").is_err());
    assert!(parse_instructions("meter:1,meter:2").is_err());
    assert!(parse_instructions("write_actions(goto_table:1)").is_err());
    assert_eq!(
        parse_instructions("write_actions()").unwrap().write,
        Some(vec![])
    );
}

#[test]
fn item_splitting() {
    assert!(split_item("resubmit(,1)x").is_err());
    assert!(matches!(
        split_item("a:b(c)"),
        Ok(("a", Arg::Colon("b(c)")))
    ));
    assert!(matches!(split_item("a(b:c)"), Ok(("a", Arg::Paren("b:c")))));
}

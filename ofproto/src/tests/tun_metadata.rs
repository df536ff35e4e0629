//! `tun_metadata<n>` end to end on a bridge: the TLV table places the
//! option, flows name it in text and on the wire and print it back, a
//! match reads it, `set_field` writes it, a Geneve output carries it, and
//! a mapping in use cannot be deleted.

use std::sync::Arc;

use megaflow::tunnel::{GeneveOpt, Kind, OptionError};
use megaflow::{DpAction, Field, FlowKey, PortNo, Timestamp};
use openflow::nx_tlv::{err, TableMod, TlvMap, CMD_ADD, CMD_CLEAR, CMD_DELETE};

use crate::channel::convert::{
    instructions_from_wire, instructions_to_wire, match_from_wire, match_to_wire,
};
use crate::rule::FlowModCommand;
use crate::text::{format_rule_in, parse_flow, parse_flow_in};
use crate::tunnel::{FromFlow, NextHop, StaticUnderlay, TunnelPort};
use crate::{Bridge, PortInfo};

const GENEVE: PortNo = PortNo(200);

fn tlv_mod(command: u16, maps: &[(u16, u8, u8, u16)]) -> TableMod {
    TableMod {
        command,
        maps: maps
            .iter()
            .map(|&(class, ty, len, index)| TlvMap {
                class,
                ty,
                len,
                index,
            })
            .collect(),
    }
}

/// A bridge with port 1, an uplink 100 and Geneve port 200 to
/// 198.19.0.2, whose TLV table maps OVN's option (0x0102, 0x80, 4 bytes)
/// to `tun_metadata0` and an 8-byte one to `tun_metadata5`.
fn bridge() -> Bridge {
    let mut b = Bridge::with_ports([1, 100]);
    let mut info = PortInfo::new(GENEVE, "gnv0");
    info.tunnel = Some(Arc::new(TunnelPort::new(
        Kind::Geneve,
        FromFlow::Fixed("198.19.0.2".parse().unwrap()),
    )));
    b.add_port(info);
    b.set_underlay(Arc::new(StaticUnderlay {
        local: vec!["198.19.0.1".parse().unwrap()],
        hops: vec![(
            "198.19.0.2".parse().unwrap(),
            NextHop {
                port: PortNo(100),
                src: "198.19.0.1".parse().unwrap(),
                eth_src: [2, 0, 0, 0, 0, 1],
                eth_dst: [2, 0, 0, 0, 0, 2],
                mtu: 1500,
            },
        )],
    }));
    b.apply_tlv_mod(&tlv_mod(
        CMD_ADD,
        &[(0x0102, 0x80, 4, 0), (0xffff, 1, 8, 5)],
    ))
    .expect("tlv map");
    b
}

fn add(b: &mut Bridge, text: &str) {
    let fm = parse_flow_in(text, FlowModCommand::Add, b.tlv()).expect(text);
    b.apply_flow_mod(&fm, Timestamp(0)).expect(text);
}

#[test]
fn flows_name_tun_metadata_as_the_table_maps_it_and_print_it_back() {
    let b = bridge();
    for text in [
        "table=0, priority=5, tun_metadata0=0x1234 actions=drop",
        "table=0, priority=5, tun_metadata0=0x1200/0xff00,tun_metadata5=0xa actions=drop",
        "table=0, priority=5, tun_metadata5=NP actions=drop",
        "table=0, priority=5, in_port=1 actions=set_field:0xabcdef->tun_metadata0,output:200",
        "table=0, priority=5, in_port=1 actions=set_field:0x10/0xf0->tun_metadata5,output:200",
    ] {
        let fm = parse_flow_in(text, FlowModCommand::Add, b.tlv()).expect(text);
        assert_eq!(format_rule_in(&fm.rule, b.tlv()), text);
        // And on the wire, as ovs-ofctl sends and dumps it (NXM has no
        // spelling of NP: an absent option reads back as present with
        // any value there, in Open vSwitch too).
        let m = &fm.rule.matched;
        if !text.contains("=NP") {
            let back = match_from_wire(&match_to_wire(m, b.tlv()), b.tlv());
            assert_eq!(back.as_ref(), Ok(m), "{text}");
        }
        let ins = instructions_to_wire(&fm.rule.instructions, m);
        let back = instructions_from_wire(&ins, fm.rule.table, b.tlv()).expect(text);
        assert_eq!(back, fm.rule.instructions, "{text}");
    }
    // A value wider than the option, and an unmapped field.
    let e = parse_flow_in(
        "tun_metadata0=0x1122334455,actions=drop",
        FlowModCommand::Add,
        b.tlv(),
    )
    .expect_err("too wide");
    assert!(e.to_string().contains("tun_metadata0"), "{e}");
    let e = parse_flow_in("tun_metadata3=1,actions=drop", FlowModCommand::Add, b.tlv())
        .expect_err("unmapped");
    assert!(e.to_string().contains("add-tlv-map"), "{e}");
    // With no table, as a flow file read before any map.
    assert!(parse_flow("tun_metadata0=1,actions=drop", FlowModCommand::Add).is_err());
    // On the wire, an unmapped field is NXFMFC_INVALID_TLV_FIELD.
    let fm =
        parse_flow_in("tun_metadata5=1,actions=drop", FlowModCommand::Add, b.tlv()).expect("flow");
    let wire = match_to_wire(&fm.rule.matched, b.tlv());
    assert_eq!(
        match_from_wire(&wire, &crate::tlv::EMPTY),
        Err(err::INVALID_TLV_FIELD)
    );
}

/// A Geneve key as receive makes it with `b`'s table from `opts`.
fn received(b: &Bridge, opts: &[GeneveOpt]) -> Result<FlowKey, OptionError> {
    let mut raw = Vec::new();
    megaflow::tunnel::write_options(opts, &mut raw);
    let (opts, present) = b.tlv().option_map().read(&raw)?;
    let mut k = FlowKey::ZERO;
    k.set_in_port(u64::from(GENEVE.0));
    k.set_eth_type(0x0800);
    k.set_tun_dst(0xc613_0001);
    k.set_tun_opts(opts);
    k.set_tun_md_present(present);
    Ok(k)
}

fn opt(class: u16, ty: u8, data: &[u8]) -> GeneveOpt {
    GeneveOpt {
        class,
        ty,
        data: data.to_vec(),
    }
}

#[test]
fn a_match_reads_the_received_option_and_an_output_carries_the_set_one() {
    let mut b = bridge();
    add(
        &mut b,
        "priority=10,in_port=200,tun_metadata0=0x00000042,actions=output:1",
    );
    add(
        &mut b,
        "priority=5,in_port=200,tun_metadata0=NP,actions=output:100",
    );
    add(&mut b, "priority=10,in_port=1,actions=set_field:0x77->tun_metadata0,set_field:0x1122334455667788->tun_metadata5,output:200");
    let out = |b: &Bridge, k: &FlowKey| b.translate(k, Timestamp(0));
    // The option as the rule says; an unmapped, uncritical one ignored.
    let k = received(
        &b,
        &[opt(0x0102, 0x80, &[0, 0, 0, 0x42]), opt(7, 1, &[0; 4])],
    )
    .expect("read");
    let t = out(&b, &k);
    assert!(
        matches!(t.actions.as_slice(), [DpAction::Output(PortNo(1))]),
        "{:?}",
        t.actions
    );
    // The megaflow holds the option's bits and its presence.
    assert_eq!(t.mask.field(Field::TunMdPresent) & 1, 1);
    assert_eq!(t.mask.field(Field::TunOpts) >> 96, 0xffff_ffff);
    // Absent: the NP rule.
    let k = received(&b, &[]).expect("read");
    assert!(matches!(
        out(&b, &k).actions.as_slice(),
        [DpAction::Output(PortNo(100))]
    ));
    // Another length than mapped, or an unknown critical option: an
    // error (the switch drops the packet, as Open vSwitch does).
    assert!(matches!(
        received(&b, &[opt(0x0102, 0x80, &[0; 8])]),
        Err(OptionError::Length {
            got: 8,
            want: 4,
            ..
        })
    ));
    assert!(matches!(
        received(&b, &[opt(9, 0x81, &[0; 4])]),
        Err(OptionError::UnknownCritical { class: 9, ty: 0x81 })
    ));
    // set_field then output: the header carries both options, by index.
    let mut k = FlowKey::ZERO;
    k.set_in_port(1);
    k.set_eth_type(0x0800);
    let t = out(&b, &k);
    let [DpAction::TunnelPush { header, .. }] = t.actions.as_slice() else {
        panic!("{:?}", t.actions);
    };
    assert_eq!(
        header.outer().opts,
        [
            opt(0x0102, 0x80, &[0, 0, 0, 0x77]),
            opt(0xffff, 1, &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]),
        ]
    );
}

#[test]
fn a_mapping_in_use_cannot_be_deleted_and_a_change_retranslates() {
    let mut b = bridge();
    add(
        &mut b,
        "in_port=1,actions=set_field:1->tun_metadata5,output:200",
    );
    add(&mut b, "tun_metadata0=1,actions=drop");
    for m in [
        tlv_mod(CMD_DELETE, &[(0, 0, 0, 5)]),
        tlv_mod(CMD_DELETE, &[(0, 0, 0, 0)]),
        tlv_mod(CMD_CLEAR, &[]),
    ] {
        let before = b.tlv().clone();
        assert_eq!(b.apply_tlv_mod(&m), Err(err::INVALID_TLV_DEL), "{m:?}");
        assert_eq!(*b.tlv(), before);
    }
    let gen = b.generations().tables;
    b.apply_tlv_mod(&tlv_mod(CMD_ADD, &[(1, 2, 4, 9)]))
        .expect("add");
    assert!(b.generations().tables > gen, "megaflows follow the table");
    b.apply_tlv_mod(&tlv_mod(CMD_DELETE, &[(0, 0, 0, 9)]))
        .expect("unused: deleted");
    assert!(b.tlv().get(9).is_none());
    let removed = b
        .tables
        .remove_rules(|_| true, crate::table::RemovedReason::Delete);
    assert_eq!(removed.len(), 2);
    b.apply_tlv_mod(&tlv_mod(CMD_CLEAR, &[]))
        .expect("nothing in use");
}

//! OpenFlow 1.5 encodings against the bytes Open vSwitch 3.1's
//! `ovs-ofctl --no-names -O OpenFlow15` sent (captured from a socket it
//! was pointed at): each parses to what the command said, and is written
//! back byte for byte.

use openflow::action::{Action, FieldCopy, Instruction};
use openflow::oxm::{CLASS_BASIC, CLASS_NXM1};
use openflow::{parse, Message, V15};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// The registers of a match as (register, value, mask).
fn regs(m: &openflow::OxmMatch) -> Vec<(u8, u32, u32)> {
    m.fields
        .iter()
        .filter(|o| o.class == CLASS_NXM1 && o.field < 16)
        .map(|o| {
            let v = u32::from_be_bytes(o.value[..4].try_into().unwrap());
            let mk = o
                .mask
                .as_ref()
                .map_or(u32::MAX, |m| u32::from_be_bytes(m[..4].try_into().unwrap()));
            (o.field, v, mk)
        })
        .collect()
}

/// `add-flow table=3,priority=7,reg0=0x5,reg1=0x6/0xff,reg14=9,tcp,
/// tcp_flags=+syn,actions=meter:3,move:NXM_NX_REG0[0..15]->NXM_NX_REG2[16..31],
/// load:0x7->NXM_NX_REG15[],load:0x1->NXM_NX_REG10[3],push:NXM_NX_XXREG0[],
/// resubmit(,4)`.
const FLOW_MOD: &str = "060e00e000000002000000000000000000000000000000000300000000000007ffffffffffffffffffffffff000000000001003f80000a02080080001401068000550400020002800101100000000500000006ffffffff000000ff80010f100000000900000000ffffffff00000000000004007000000000001d000800000003001c001800100000001000000001000400010404000000000019001000011e04000000070000000000190010000115080000000800000008ffff001800002320001b00000001de100080000000000000ffff001000002320000efff804000000";

#[test]
fn a_1_5_flow_mod_reads_its_xregs_copy_field_masked_set_field_and_meter_action() {
    let raw = hex(FLOW_MOD);
    let (h, m) = parse(&raw).expect("parses");
    assert_eq!(h.version, V15);
    let Message::FlowMod(fm) = &m else {
        panic!("{m:?}")
    };
    assert_eq!((fm.table_id, fm.priority), (3, 7));
    // OXM_OF_PKT_REG0 and 7 as the registers they span, reg<2n> high.
    assert_eq!(
        regs(&fm.matched),
        vec![(0, 5, u32::MAX), (1, 6, 0xff), (14, 9, u32::MAX)]
    );
    // tcp_flags is 1.5's own basic field 42.
    assert!(fm.matched.get(CLASS_BASIC, 42).is_some());
    let [Instruction::ApplyActions(a)] = &fm.instructions[..] else {
        panic!("{:?}", fm.instructions)
    };
    assert_eq!(a[0], Action::Meter(3));
    assert_eq!(
        a[1],
        Action::CopyField(FieldCopy {
            n_bits: 16,
            src_ofs: 0,
            dst_ofs: 16,
            src: 0x0001_0004,
            dst: 0x0001_0404,
        })
    );
    let Action::SetField(o) = &a[3] else {
        panic!("{:?}", a[3])
    };
    assert_eq!((o.field, o.mask.as_deref()), (10, Some(&[0, 0, 0, 8][..])));
    // push:NXM_NX_XXREG0[] names the 128-bit field.
    assert!(matches!(
        a[4],
        Action::NxStack {
            pop: false,
            n_bits: 128,
            field: 0x0001_de10,
            ..
        }
    ));
    assert_eq!(m.to_bytes_as(V15, 2).expect("emits"), raw, "written back");
}

/// `add-group group_id=5,type=select,selection_method=dp_hash,
/// bucket=weight:3,actions=output:2,bucket=weight:1,actions=output:3`.
const GROUP_MOD: &str = "060f008000000002000001000000000500400000ffffffff00200010000000000000001000000002000000000000000000000008000300000020001000000001000000100000000300000000000000000000000800010000ffff00280000154d000000010000000064705f686173680000000000000000000000000000000000";

#[test]
fn a_1_5_group_mod_reads_its_bucket_ids_weights_and_selection_method() {
    let raw = hex(GROUP_MOD);
    let (_, m) = parse(&raw).expect("parses");
    let Message::GroupMod(g) = &m else {
        panic!("{m:?}")
    };
    assert_eq!((g.command, g.group_type, g.group_id), (0, 1, 5));
    assert_eq!(g.method, Some(("dp_hash".to_string(), 0)));
    let got: Vec<_> = g
        .buckets
        .iter()
        .map(|b| (b.bucket_id, b.weight, b.actions.clone()))
        .collect();
    let out = |port| vec![Action::Output { port, max_len: 0 }];
    assert_eq!(got, vec![(Some(0), 3, out(2)), (Some(1), 1, out(3))]);
    assert_eq!(m.to_bytes_as(V15, 2).expect("emits"), raw, "written back");
}

/// `packet-out in_port=2 packet=... actions=output:3`: the port is in a
/// match.
const PACKET_OUT: &str = "060d005200000002ffffffff001000000001000c80000004000000020000000000000010000000030000000000000000000000000002000000000001080045000014000000004000f9a3c6120001c6120002";

#[test]
fn a_1_5_packet_out_takes_its_port_from_its_match() {
    let raw = hex(PACKET_OUT);
    let (_, m) = parse(&raw).expect("parses");
    let Message::PacketOut(p) = &m else {
        panic!("{m:?}")
    };
    assert_eq!(p.in_port, 2);
    assert_eq!(
        p.actions,
        vec![Action::Output {
            port: 3,
            max_len: 0
        }]
    );
    assert_eq!(p.data.len(), 34);
    assert_eq!(m.to_bytes_as(V15, 2).expect("emits"), raw, "written back");
}

#[test]
fn in_1_3_the_1_5_actions_are_not_actions() {
    // OFPAT_METER (29) in a 1.3 apply-actions: BAD_TYPE.
    let mut raw = hex(FLOW_MOD);
    raw[0] = 4;
    let e = parse(&raw).expect_err("not 1.3");
    assert_eq!(e.ofp_error(), openflow::OfpError::new(2, 0), "{e}");
}

#[test]
fn a_1_3_flow_written_for_1_5_moves_by_copy_field_loads_by_set_field_and_meters_by_action() {
    use openflow::flow::FlowMod;
    let fm = FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 1,
        buffer_id: u32::MAX,
        out_port: u32::MAX,
        out_group: u32::MAX,
        flags: 0,
        importance: 0,
        matched: openflow::OxmMatch::default(),
        instructions: vec![
            Instruction::Meter(4),
            Instruction::ApplyActions(vec![
                Action::NxRegMove(FieldCopy {
                    n_bits: 8,
                    src_ofs: 0,
                    dst_ofs: 8,
                    src: 0x0001_0004,
                    dst: 0x0001_0204,
                }),
                Action::NxRegLoad {
                    ofs: 4,
                    n_bits: 4,
                    dst: 0x0001_0204,
                    value: 0xa,
                },
            ]),
        ],
    };
    let bytes = Message::FlowMod(fm).to_bytes_as(V15, 1).expect("emits");
    let (_, m) = parse(&bytes).expect("parses back");
    let Message::FlowMod(back) = m else { panic!() };
    let [Instruction::ApplyActions(a)] = &back.instructions[..] else {
        panic!("{:?}", back.instructions)
    };
    assert_eq!(a[0], Action::Meter(4));
    assert!(matches!(
        a[1],
        Action::CopyField(FieldCopy { n_bits: 8, .. })
    ));
    let Action::SetField(o) = &a[2] else {
        panic!("{:?}", a[2])
    };
    assert_eq!(o.value, vec![0, 0, 0, 0xa0]);
    assert_eq!(o.mask, Some(vec![0, 0, 0, 0xf0]));
}

#[test]
fn replies_written_in_1_4_and_1_5_read_back_the_same() {
    use openflow::flow::{AggregateReply, FlowRemoved, FlowStats};
    use openflow::multipart::MpReply;
    use openflow::{Bucket, GroupDesc, Oxm, OxmMatch, Port, PortStatsEntry, PortStatus, V14};
    let regs = OxmMatch {
        fields: vec![
            Oxm::basic(5, &[0x08, 0x00]),
            Oxm {
                class: CLASS_NXM1,
                field: 14,
                value: vec![0, 0, 0, 9],
                mask: None,
            },
        ],
    };
    let out = |port| Action::Output { port, max_len: 0 };
    let flow = FlowStats {
        table_id: 7,
        duration_sec: 3,
        duration_nsec: 4,
        priority: 100,
        idle_timeout: 5,
        hard_timeout: 6,
        flags: 1,
        cookie: 0xabc,
        packet_count: 10,
        byte_count: 1000,
        matched: regs.clone(),
        instructions: vec![Instruction::ApplyActions(vec![out(2)])],
        idle_sec: 0,
        importance: 9,
    };
    let group = GroupDesc {
        group_type: 1,
        group_id: 5,
        buckets: vec![Bucket {
            weight: 2,
            watch_port: u32::MAX,
            watch_group: u32::MAX,
            actions: vec![out(3)],
            bucket_id: Some(0),
        }],
        method: Some(("dp_hash".into(), 0)),
    };
    let port = Port {
        port_no: 3,
        hw_addr: [2, 0, 0, 0, 0, 3],
        name: "vm3".into(),
        curr_speed: 10_000_000,
        ..Port::default()
    };
    let stats = PortStatsEntry {
        port_no: 3,
        rx_packets: 1,
        tx_bytes: 2,
        collisions: 3,
        ..PortStatsEntry::default()
    };
    let removed = FlowRemoved {
        cookie: 1,
        priority: 2,
        reason: 0,
        table_id: 3,
        duration_sec: 4,
        duration_nsec: 5,
        idle_timeout: 6,
        hard_timeout: 7,
        packet_count: 8,
        byte_count: 9,
        matched: regs,
    };
    let mp = |body| Message::MultipartReply { flags: 0, body };
    for (version, m) in [
        (V15, mp(MpReply::Flow(vec![flow.clone()]))),
        (V14, mp(MpReply::Flow(vec![flow]))),
        (
            V15,
            mp(MpReply::Aggregate(AggregateReply {
                packet_count: 1,
                byte_count: 2,
                flow_count: 3,
            })),
        ),
        (V15, mp(MpReply::GroupDesc(vec![group]))),
        (V14, mp(MpReply::PortDesc(vec![port.clone()]))),
        (V14, mp(MpReply::PortStats(vec![stats]))),
        (
            V14,
            Message::PortStatus(PortStatus {
                reason: 2,
                desc: port,
            }),
        ),
        (V15, Message::FlowRemoved(removed)),
    ] {
        let bytes = m.to_bytes_as(version, 3).expect("emits");
        assert_eq!(bytes[0], version);
        let (_, back) = parse(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(back, m, "version {version}");
    }
}

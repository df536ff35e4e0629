//! Bytes from a real `ovs-ofctl` (Open vSwitch 3.1.0, Debian 12): what it
//! sends for an add-flow decodes to the fields it was given, and emits
//! back byte for byte.
//!
//! Captured with a Unix socket that answers HELLO and BARRIER and records
//! what it receives (the same bytes `tcpdump -i lo -w x.pcap tcp port
//! 6653` shows over `tcp:`):
//!
//! ```text
//! ovs-ofctl -O OpenFlow13 --no-names add-flow unix:/tmp/cap/s.sock \
//!   "table=1,priority=20,cookie=0x42,udp,in_port=1,nw_dst=198.18.0.0/15,tp_dst=53,\
//!    actions=set_field:0x7->reg2,load:0x1->NXM_NX_REG0[0..7],resubmit(,2),output:3"
//! ```

use openflow::action::{Action, Instruction, NX_VENDOR};
use openflow::oxm::{Oxm, CLASS_BASIC, CLASS_NXM1, CLASS_ONF};
use openflow::{bitmap_has, parse, Framer, Message};

/// ovs-ofctl's HELLO, its FLOW_MOD and its BARRIER_REQUEST, in order.
const SESSION: &str = "04000010000000010001000800000010\
040e00b000000002000000000000004200000000000000000100000000000014ffffffffffffffffffffffff0000000000010029800000040000000180000a02080080001908c6120000fffe0000800014011180002002003500000000000000000400500000000000190010000104040000000700000000ffff00180000232000070007000100040000000000000001ffff001000002320000efff802000000000000100000000300000000000000000414000800000003";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn messages(session: &str) -> Vec<(Vec<u8>, Message)> {
    let mut f = Framer::new();
    f.push(&hex(session));
    let mut v = Vec::new();
    while let Some(m) = f.next_message().expect("frames") {
        let (_, parsed) = parse(&m).expect("parses");
        v.push((m, parsed));
    }
    v
}

#[test]
fn ovs_ofctl_add_flow_decodes_to_what_it_was_given_and_emits_back_exactly() {
    let msgs = messages(SESSION);
    assert_eq!(msgs.len(), 3);
    let Message::Hello { bitmap: Some(b) } = &msgs[0].1 else {
        panic!("{:?}", msgs[0].1)
    };
    assert!(bitmap_has(b, 4), "1.3 offered");
    assert_eq!(msgs[2].1, Message::BarrierRequest);
    let (raw, Message::FlowMod(fm)) = &msgs[1] else {
        panic!("{:?}", msgs[1].1)
    };
    assert_eq!(
        (fm.cookie, fm.table_id, fm.command, fm.priority),
        (0x42, 1, 0, 20)
    );
    assert_eq!(
        (fm.buffer_id, fm.out_port, fm.out_group),
        (u32::MAX, u32::MAX, u32::MAX)
    );
    let masked = Oxm {
        mask: Some(vec![255, 254, 0, 0]),
        ..Oxm::basic(12, &[198, 18, 0, 0])
    };
    assert_eq!(
        fm.matched.fields,
        vec![
            Oxm::basic(0, &[0, 0, 0, 1]),
            Oxm::basic(5, &[0x08, 0x00]),
            masked,
            Oxm::basic(10, &[17]),
            Oxm::basic(16, &[0, 53]),
        ]
    );
    assert!(fm.matched.fields.iter().all(|o| o.class == CLASS_BASIC));
    let [Instruction::ApplyActions(a)] = &fm.instructions[..] else {
        panic!("{:?}", fm.instructions)
    };
    assert_eq!(
        a,
        &vec![
            Action::SetField(Oxm {
                class: CLASS_NXM1,
                field: 2,
                value: vec![0, 0, 0, 7],
                mask: None
            }),
            Action::NxRegLoad {
                ofs: 0,
                n_bits: 8,
                dst: 0x0001_0004,
                value: 1
            },
            Action::NxResubmit {
                in_port: 0xfff8,
                table: Some(2)
            },
            Action::Output {
                port: 3,
                max_len: 0
            },
        ]
    );
    assert_eq!(NX_VENDOR, 0x2320);
    // Emitted again: the same bytes.
    let back = msgs[1].1.to_bytes(2).expect("emit");
    assert_eq!(&back, raw);
}

/// ovs-ofctl's HELLO, GROUP_MOD and BARRIER_REQUEST for
///
/// ```text
/// ovs-ofctl -O OpenFlow13 --no-names add-group unix:/tmp/cap/s.sock \
///   "group_id=7,type=select,bucket=weight:3,watch_port:2,\
///    actions=set_field:198.18.0.9->ip_dst,output:2,bucket=weight:1,actions=output:3"
/// ```
///
/// (captured the same way).
const GROUP_SESSION: &str = "04000010000000010001000800000010\
040f00600000000200000100000000070030000300000002ffffffff000000000019001080001804c6120009000000000000001000000002000000000000000000200001ffffffffffffffff00000000000000100000000300000000000000000414000800000003";

#[test]
fn ovs_ofctl_add_group_decodes_to_what_it_was_given_and_emits_back_exactly() {
    let msgs = messages(GROUP_SESSION);
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[2].1, Message::BarrierRequest);
    let (raw, Message::GroupMod(gm)) = &msgs[1] else {
        panic!("{:?}", msgs[1].1)
    };
    assert_eq!((gm.command, gm.group_type, gm.group_id), (0, 1, 7));
    let out = |port| Action::Output { port, max_len: 0 };
    assert_eq!(
        gm.buckets,
        vec![
            openflow::Bucket {
                weight: 3,
                watch_port: 2,
                watch_group: u32::MAX,
                actions: vec![Action::SetField(Oxm::basic(12, &[198, 18, 0, 9])), out(2)],
                bucket_id: None,
            },
            openflow::Bucket {
                weight: 1,
                watch_port: u32::MAX,
                watch_group: u32::MAX,
                actions: vec![out(3)],
                bucket_id: None,
            },
        ]
    );
    let back = msgs[1].1.to_bytes(2).expect("emit");
    assert_eq!(&back, raw);
}

/// ovs-ofctl's HELLO, FLOW_MOD and BARRIER_REQUEST for
///
/// ```text
/// ovs-ofctl -O OpenFlow13 --no-names add-flow unix:/tmp/cap/s.sock \
///   "tcp,tcp_flags=+syn-ack,actions=output:2"
/// ```
///
/// (captured the same way): OpenFlow 1.3 has no basic `tcp_flags`, so it
/// goes as the ONF's experimenter field, its id after the header.
const TCP_FLAGS_SESSION: &str = "04000010000000010001000800000010\
040e006800000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001001b80000a0208008000140106ffff55084f4e46000002001200000000000004001800000000000000100000000200000000000000000414000800000003";

#[test]
fn ovs_ofctl_tcp_flags_is_the_onf_experimenter_field_and_emits_back_exactly() {
    let msgs = messages(TCP_FLAGS_SESSION);
    assert_eq!(msgs.len(), 3);
    let (raw, Message::FlowMod(fm)) = &msgs[1] else {
        panic!("{:?}", msgs[1].1)
    };
    let flags = fm.matched.get(CLASS_ONF, 42).expect("tcp_flags decoded");
    // +syn-ack: SYN (0x002) set, ACK (0x010) clear.
    assert_eq!(
        (flags.value.as_slice(), flags.mask.as_deref()),
        (&[0x00, 0x02][..], Some(&[0x00, 0x12][..]))
    );
    assert_eq!(flags.name(), "ONFOXM_ET_TCP_FLAGS");
    let back = msgs[1].1.to_bytes(2).expect("emit");
    assert_eq!(&back, raw);
}

#[test]
fn an_experimenter_field_of_another_experimenter_is_bad_field_by_name() {
    // The tcp_flags flow mod with the experimenter id changed.
    let session = TCP_FLAGS_SESSION.replace("ffff55084f4e4600", "ffff550800002320");
    let mut f = Framer::new();
    f.push(&hex(&session));
    let _hello = f.next_message().expect("frames").expect("hello");
    let m = f.next_message().expect("frames").expect("flow mod");
    let err = parse(&m).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("experimenter 0x00002320"), "{text}");
    assert_eq!(err.ofp_error(), openflow::OfpError::new(4, 6), "{text}");
}

#[test]
fn nxt_packet_in2_properties_are_aligned_and_decode_back() {
    use openflow::flow::{nx_packet_in, PacketIn, NO_BUFFER};
    let pin = PacketIn {
        buffer_id: NO_BUFFER,
        total_len: 1500,
        reason: 1,
        table_id: 3,
        cookie: 0x42,
        matched: openflow::OxmMatch {
            fields: vec![Oxm::basic(0, &[0, 0, 0, 7])],
        },
        data: vec![0xab; 34],
    };
    let body = pin.nx_packet_in2();
    // Each property starts 8-aligned; the cookie's value is 8-aligned in
    // the message too (4 zero bytes after its header), as Open vSwitch's
    // decoder requires (it refused an unpadded one with BAD_LEN).
    let mut at = 0;
    let mut types = Vec::new();
    while at < body.len() {
        assert_eq!(at % 8, 0);
        let ty = u16::from_be_bytes([body[at], body[at + 1]]);
        let len = usize::from(u16::from_be_bytes([body[at + 2], body[at + 3]]));
        if ty == nx_packet_in::PROP_COOKIE {
            assert_eq!((len, &body[at + 4..at + 8]), (16, &[0u8; 4][..]));
        }
        types.push(ty);
        at += len.div_ceil(8) * 8;
    }
    assert_eq!(
        types,
        [0, 1, 3, 4, 5, 6],
        "packet, full_len, table, cookie, reason, metadata"
    );
    assert_eq!(PacketIn::from_nx_packet_in2(&body).expect("decodes"), pin);
    // A PACKET_OUT's (no rule): no cookie property; whole: no full_len.
    let out = PacketIn {
        cookie: nx_packet_in::NO_COOKIE,
        total_len: 34,
        ..pin
    };
    let body = out.nx_packet_in2();
    assert_eq!(PacketIn::from_nx_packet_in2(&body).expect("decodes"), out);
    assert_eq!(body.len(), 40 + 8 + 8 + 16);
}

/// ovs-ofctl's FLOW_MODs (HELLO and BARRIER around each) for
///
/// ```text
/// ovs-ofctl -O OpenFlow13 --no-names add-flow unix:/tmp/cap/s.sock \
///   "table=1,priority=100,ip,nw_src=198.18.0.1,\
///    actions=conjunction(7,2/3),note:01,conjunction(4294967295,64/64)"
/// ovs-ofctl -O OpenFlow13 --no-names add-flow unix:/tmp/cap/s.sock \
///   "table=1,conj_id=7,tcp,actions=output:2"
/// ```
const CONJUNCTION_FLOW_MODS: [&str; 2] = [
    "040e008000000002000000000000000000000000000000000100000000000064ffffffffffffffffffffffff000000000001001280000a02080080001604c61200010000000000000004003800000000ffff0010000023200022010300000007ffff0010000023200008010000000000ffff00100000232000223f40ffffffff",
    "040e006000000002000000000000000000000000000000000100000000008000ffffffffffffffffffffffff000000000001001700014a040000000780000a020800800014010600000400180000000000000010000000020000000000000000",
];

#[test]
fn ovs_ofctl_conjunctions_and_conj_id_decode_and_emit_back_exactly() {
    let mut fms = Vec::new();
    for hexed in CONJUNCTION_FLOW_MODS {
        let raw = hex(hexed);
        let (_, msg) = parse(&raw).expect("parses");
        assert_eq!(msg.to_bytes(2).expect("emit"), raw, "emitted back the same");
        let Message::FlowMod(fm) = msg else {
            panic!("{msg:?}")
        };
        fms.push(fm);
    }
    let [Instruction::ApplyActions(a)] = &fms[0].instructions[..] else {
        panic!("{:?}", fms[0].instructions)
    };
    // The text's K is the wire's clause + 1.
    assert_eq!(
        a,
        &vec![
            Action::NxConjunction {
                id: 7,
                clause: 1,
                n_clauses: 3
            },
            Action::NxNote(vec![1, 0, 0, 0, 0, 0]),
            Action::NxConjunction {
                id: u32::MAX,
                clause: 63,
                n_clauses: 64
            },
        ]
    );
    // conj_id: NXM_NX_CONJ_ID (class 1, field 37), 4 bytes, no mask.
    assert_eq!(
        fms[1].matched.fields[0],
        Oxm {
            class: CLASS_NXM1,
            field: 37,
            value: vec![0, 0, 0, 7],
            mask: None
        }
    );
}

#[test]
fn a_conjunction_with_a_bad_clause_count_or_index_is_nxbac_bad_conjunction() {
    let raw = hex(CONJUNCTION_FLOW_MODS[0]);
    // The first conjunction's clause and n_clauses bytes.
    let at = raw
        .windows(4)
        .position(|w| w == [0x00, 0x22, 0x01, 0x03])
        .expect("the first conjunction")
        + 2;
    for (clause, n) in [(0u8, 1u8), (2, 2), (0, 65), (64, 64)] {
        let mut bad = raw.clone();
        bad[at] = clause;
        bad[at + 1] = n;
        let err = parse(&bad).expect_err("refused");
        assert_eq!(
            err.ofp_error(),
            openflow::action::BAD_CONJUNCTION,
            "clause {clause} of {n}: {err}"
        );
    }
}

//! Flow text → tables' types → wire → tables' types gives back what the
//! text said: matches (every kind of field, masks, prerequisites) and
//! instructions (standard and Nicira actions).

use super::*;
use crate::text::parse_flow;
use crate::tlv::EMPTY;

/// Flows covering every field kind the wire carries.
const FLOWS: &[&str] = &[
    "in_port=3,actions=output:2",
    "priority=7,dl_dst=02:00:00:00:00:01,dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=normal",
    "ip,nw_src=198.18.0.0/15,nw_dst=198.18.0.5,actions=drop",
    "tcp,tp_src=1000,tp_dst=80,actions=output:1,output:2",
    "udp,udp_dst=53,nw_tos=0x20,actions=controller:128",
    "sctp,sctp_dst=9,actions=flood",
    "icmp,icmp_type=8,icmp_code=0,actions=in_port",
    "arp,arp_op=1,arp_spa=198.18.0.1,arp_tpa=198.18.0.0/24,arp_sha=02:00:00:00:00:09,actions=all",
    "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=2001:db8::1,ipv6_label=0x12345,actions=local",
    "icmp6,icmpv6_type=135,nd_target=2001:db8::7,nd_sll=02:00:00:00:00:07,actions=drop",
    "dl_vlan=10,dl_vlan_pcp=3,actions=strip_vlan,output:4",
    "vlan_tci=0x0000/0x1fff,actions=push_vlan:0x8100,set_field:0x1005->vlan_vid,output:1",
    "reg0=0x5,reg3=0x10/0xf0,metadata=0x1/0x3,actions=goto_table:2",
    "tun_id=0x99,actions=set_field:0x7->reg2,resubmit(,3)",
    "ip,nw_ttl=64,ip_frag=no,actions=dec_ttl,output:1",
    "tcp,tcp_flags=+syn-ack,actions=load:0x1->NXM_NX_REG0[0..7],move:NXM_OF_IP_SRC[]->NXM_NX_REG1[]",
    "priority=9,cookie=0x10,actions=meter:1,clear_actions,write_actions(output:3),write_metadata:0x5/0xff",
    "ip,actions=push_vlan:0x8100,set_field:0x1005->vlan_vid,set_field:02:00:00:00:00:aa->eth_dst,output:1",
    "actions=sample(probability=100),output:2",
    "tcp,tp_dst=0x100/0xff00,tp_src=0x8000/0x8000,actions=drop",
    "udp,udp_dst=0x1000/0xf000,actions=drop",
    "ip,actions=mod_nw_ttl:9,output:2",
];

/// An ARP match goes out as ARP_OP, ARP_SPA and ARP_TPA (`ovs-ofctl`
/// refuses IPV4_SRC under `arp` as a prerequisite error), and the L4 port
/// masks Open vSwitch takes go out masked.
#[test]
fn arp_fields_go_out_as_arp_and_port_masks_as_masks() {
    let fm = parse_flow(
        "arp,arp_op=1,arp_spa=198.18.0.1,arp_tpa=198.18.0.0/24,actions=drop",
        FlowModCommand::Add,
    )
    .expect("parses");
    let fields: Vec<u8> = match_to_wire(&fm.rule.matched, &EMPTY)
        .fields
        .iter()
        .map(|o| o.field)
        .collect();
    assert_eq!(
        fields,
        vec![5, 21, 22, 23],
        "eth_type, ARP_OP, ARP_SPA, ARP_TPA"
    );
    let fm =
        parse_flow("tcp,tp_dst=0x100/0xff00,actions=drop", FlowModCommand::Add).expect("parses");
    let oxm = match_to_wire(&fm.rule.matched, &EMPTY);
    let port = oxm.fields.iter().find(|o| o.field == 14).expect("TCP_DST");
    assert_eq!(port.value, vec![0x01, 0x00]);
    assert_eq!(port.mask.as_deref(), Some(&[0xff, 0x00][..]));
    assert_eq!(
        crate::text::format_match(&fm.rule.matched),
        "tcp,tp_dst=0x100/0xff00",
        "what eswitchctl prints"
    );
}

#[test]
fn matches_and_instructions_survive_the_wire() {
    for text in FLOWS {
        let fm = parse_flow(text, FlowModCommand::Add).unwrap_or_else(|e| panic!("{text}: {e}"));
        let m = &fm.rule.matched;
        let oxm = match_to_wire(m, &EMPTY);
        let back =
            match_from_wire(&oxm, &EMPTY).unwrap_or_else(|e| panic!("{text}: match {e}: {oxm:?}"));
        assert_eq!(&back, m, "{text}: {oxm:?}");
        let ins = instructions_to_wire(&fm.rule.instructions, m);
        let back = instructions_from_wire(&ins, fm.rule.table, &EMPTY)
            .unwrap_or_else(|e| panic!("{text}: instructions {e}: {ins:?}"));
        assert_eq!(back, fm.rule.instructions, "{text}: {ins:?}");
    }
}

#[test]
fn the_classic_vlan_actions_go_out_as_set_field() {
    // mod_vlan_vid/mod_vlan_pcp have no 1.3 action of their own: they go
    // out as SET_FIELD of VLAN_VID (with OFPVID_PRESENT) and VLAN_PCP, and
    // come back as the set_field form.
    let fm = parse_flow(
        "dl_vlan=7,actions=mod_vlan_vid:5,mod_vlan_pcp:3",
        FlowModCommand::Add,
    )
    .expect("flow");
    let ins = instructions_to_wire(&fm.rule.instructions, &fm.rule.matched);
    let [Instruction::ApplyActions(a)] = &ins[..] else {
        panic!("{ins:?}")
    };
    assert_eq!(a[0], Action::SetField(Oxm::basic(6, &[0x10, 0x05])));
    assert_eq!(a[1], Action::SetField(Oxm::basic(7, &[3])));
    let back = instructions_from_wire(&ins, TableId(0), &EMPTY).expect("back");
    assert_eq!(
        back.apply[0],
        OfAction::SetField {
            field: Field::VlanTci,
            value: 0x1005,
            mask: 0x1fff
        }
    );
}

#[test]
fn wire_matches_the_spec_refuses_get_its_errors() {
    let basic = |field, value: &[u8]| Oxm {
        class: CLASS_BASIC,
        field,
        value: value.to_vec(),
        mask: None,
    };
    let err =
        |fields: Vec<Oxm>| match_from_wire(&OxmMatch { fields }, &EMPTY).expect_err("refused");
    // TCP_DST without ip_proto=6: BAD_PREREQ.
    assert_eq!(err(vec![basic(14, &[0, 80])]), OfpError::new(4, 9));
    // An IP_DSCP above 63: BAD_VALUE.
    assert_eq!(
        err(vec![basic(5, &[8, 0]), basic(8, &[64])]),
        OfpError::new(4, 7)
    );
    // MPLS_LABEL: a field this switch does not match: BAD_FIELD.
    assert_eq!(err(vec![basic(34, &[0, 0, 0, 1])]), OfpError::new(4, 6));
    // The same bits twice, differently (eth_type as basic and NXM_0).
    let nxm_type = Oxm {
        class: CLASS_NXM0,
        field: 3,
        value: vec![0x86, 0xdd],
        mask: None,
    };
    assert_eq!(err(vec![basic(5, &[8, 0]), nxm_type]), OfpError::new(4, 10));
    // PACKET_TYPE other than Ethernet (here IPv4, namespace 1): BAD_VALUE.
    assert_eq!(err(vec![basic(44, &[0, 1, 8, 0])]), OfpError::new(4, 7));
}

#[test]
fn packet_type_ethernet_as_ovs_ofctl_sends_it_matches_every_packet() {
    // What ovs-ofctl sends for `nw_src=198.18.0.1` (no `ip`): the field
    // dropped by its normalisation, packet_type=(0,0) in its place.
    let only = OxmMatch {
        fields: vec![Oxm::basic(44, &[0, 0, 0, 0])],
    };
    assert_eq!(match_from_wire(&only, &EMPTY), Ok(Match::catch_all()));
    let with_ip = OxmMatch {
        fields: vec![Oxm::basic(44, &[0, 0, 0, 0]), Oxm::basic(5, &[8, 0])],
    };
    let m = match_from_wire(&with_ip, &EMPTY).expect("takes it");
    assert_eq!(m.key().field(Field::EthType), 0x0800);
}

#[test]
fn flow_mods_the_spec_refuses_get_their_errors() {
    let ok = parse_flow("tcp,tp_dst=80,actions=output:2", FlowModCommand::Add).expect("flow");
    let wire = |f: &dyn Fn(&mut WireFlowMod)| {
        let mut w = WireFlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: command::ADD,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0x8000,
            buffer_id: NO_BUFFER,
            out_port: 0xffff_ffff,
            out_group: 0xffff_ffff,
            flags: 0,
            importance: 0,
            matched: match_to_wire(&ok.rule.matched, &EMPTY),
            instructions: instructions_to_wire(&ok.rule.instructions, &ok.rule.matched),
        };
        f(&mut w);
        flow_mod_from_wire(&w, &EMPTY)
    };
    assert!(wire(&|_| {}).is_ok());
    assert_eq!(
        wire(&|w| w.command = 9).expect_err("cmd"),
        OfpError::new(5, 6)
    );
    assert_eq!(
        wire(&|w| w.flags = 0x80).expect_err("flags"),
        OfpError::new(5, 7)
    );
    assert_eq!(
        wire(&|w| w.buffer_id = 7).expect_err("buffer"),
        OfpError::BUFFER_UNKNOWN
    );
    assert_eq!(
        wire(&|w| w.table_id = 0xff).expect_err("add all"),
        OfpError::new(5, 2)
    );
    // Table 254: OFPBRC_EPERM, as Open vSwitch answers (its hidden table).
    assert_eq!(
        wire(&|w| w.table_id = 254).expect_err("table"),
        OfpError::new(1, 5)
    );
    let d = wire(&|w| {
        w.command = command::DELETE;
        w.table_id = 0xff;
    })
    .expect("delete everywhere");
    assert_eq!(d.table, None);
    // Actions: a queue, an output to port 0, a foreign experimenter.
    let with = |a: Action| {
        wire(&move |w: &mut WireFlowMod| {
            w.instructions = vec![Instruction::ApplyActions(vec![a.clone()])]
        })
    };
    assert_eq!(
        with(Action::SetQueue(1)).expect_err("queue"),
        OfpError::new(2, 0)
    );
    assert_eq!(
        with(Action::Output {
            port: 0,
            max_len: 0
        })
        .expect_err("port 0"),
        OfpError::new(2, 4)
    );
    assert_eq!(
        with(Action::Experimenter {
            experimenter: 1,
            data: vec![]
        })
        .expect_err("exp"),
        OfpError::new(2, 2)
    );
    assert_eq!(
        wire(&|w| w.instructions = vec![Instruction::GotoTable(254)]).expect_err("goto"),
        OfpError::new(3, 2)
    );
    // A conjunction beside anything but conjunctions and notes:
    // NXBAC_BAD_CONJUNCTION, as Open vSwitch answers.
    let conj = Action::NxConjunction {
        id: 7,
        clause: 0,
        n_clauses: 2,
    };
    let both = conj.clone();
    assert_eq!(
        wire(&move |w: &mut WireFlowMod| {
            w.instructions = vec![Instruction::ApplyActions(vec![
                both.clone(),
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
            ])]
        })
        .expect_err("conjunction with output"),
        openflow::action::BAD_CONJUNCTION
    );
    let then_goto = conj.clone();
    assert_eq!(
        wire(&move |w: &mut WireFlowMod| {
            w.instructions = vec![
                Instruction::ApplyActions(vec![then_goto.clone()]),
                Instruction::GotoTable(3),
            ]
        })
        .expect_err("conjunction with goto_table"),
        openflow::action::BAD_CONJUNCTION
    );
    let fm = with(conj).expect("a conjunction alone");
    assert_eq!(
        fm.rule.instructions.conjunctions().collect::<Vec<_>>(),
        vec![(7, 0, 2)]
    );
}

//! Golden tests of the `ovs-ofctl` flow syntax: real-style lines parsed into
//! flow mods (asserting key and mask fields), exact error messages for each
//! error kind, canonical printing, and flow files.
//!
//! The lines are written as one would type them after
//! `ovs-ofctl add-flow br0 '...'` (or `mod-flows`/`del-flows`).

use megaflow::key::{FRAG_ANY, FRAG_LATER};
use megaflow::{Field, Match, MeterId, PortNo};
use ofproto::rule::{FieldRange, FlowFlags};
use ofproto::text::{
    format_instructions, format_match, format_rule, parse_flow, parse_flow_file,
    parse_instructions, parse_match, ParseErrorKind,
};
use ofproto::{Cookie, FlowModCommand, Instructions, OfAction, OfPort, Priority, TableId};

use FlowModCommand::{Add, Delete, DeleteStrict, Modify, ModifyStrict};

/// (value, mask) of one field of a match.
fn vm(m: &Match, f: Field) -> (u128, u128) {
    (m.key().field(f), m.mask().field(f))
}

fn full(f: Field) -> u128 {
    f.layout().max_value()
}

fn out(n: u32) -> OfAction {
    OfAction::Output {
        port: OfPort::Port(PortNo(n)),
        max_len: 0,
    }
}

fn err(s: &str, command: FlowModCommand) -> String {
    match parse_flow(s, command) {
        Ok(fm) => panic!("{s:?} parsed: {fm:?}"),
        Err(e) => e.to_string(),
    }
}

// ---- golden parses -------------------------------------------------------

#[test]
fn spec_example_with_ip_then_tcp() {
    // ovs-ofctl add-flow br0 'table=0,priority=100,in_port=1,dl_dst=aa:bb:cc:dd:ee:ff,ip,nw_src=10.0.0.0/8,tcp,tp_dst=80,actions=output:2'
    let fm = parse_flow(
        "table=0,priority=100,in_port=1,dl_dst=aa:bb:cc:dd:ee:ff,ip,nw_src=10.0.0.0/8,tcp,tp_dst=80,actions=output:2",
        Add,
    )
    .unwrap();
    assert_eq!(fm.command, Add);
    assert_eq!(fm.table, Some(TableId(0)));
    let r = &fm.rule;
    assert_eq!(r.table, TableId(0));
    assert_eq!(r.priority, Priority(100));
    let m = &r.matched;
    assert_eq!(vm(m, Field::InPort), (1, 0xffff_ffff));
    assert_eq!(
        vm(m, Field::EthDst),
        (0xaabb_ccdd_eeff, full(Field::EthDst))
    );
    assert_eq!(vm(m, Field::EthType), (0x0800, 0xffff));
    assert_eq!(vm(m, Field::IpProto), (6, 0xff));
    assert_eq!(vm(m, Field::Ipv4Src), (0x0a00_0000, 0xff00_0000));
    assert_eq!(vm(m, Field::TpDst), (80, 0xffff));
    let used: Vec<Field> = m.mask().fields().collect();
    assert_eq!(used.len(), 6, "{used:?}");
    assert_eq!(r.instructions.apply, vec![out(2)]);
    assert_eq!(r.cookie, Cookie(0));
    assert_eq!(r.flags, FlowFlags::default());
    assert_eq!(
        format_match(m),
        "tcp,in_port=1,dl_dst=aa:bb:cc:dd:ee:ff,nw_src=10.0.0.0/8,tp_dst=80"
    );
    assert_eq!(
        format_rule(r),
        "table=0, priority=100, tcp,in_port=1,dl_dst=aa:bb:cc:dd:ee:ff,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2"
    );
}

#[test]
fn push_vlan_set_field_output() {
    // ovs-ofctl add-flow br0 'in_port=1,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:3'
    let fm = parse_flow(
        "in_port=1,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:3",
        Add,
    )
    .unwrap();
    assert_eq!(
        fm.rule.instructions.apply,
        vec![
            OfAction::PushVlan(0x8100),
            OfAction::SetField {
                field: Field::VlanTci,
                value: 0x1000 | 100,
                mask: 0x1fff
            },
            out(3),
        ]
    );
    assert_eq!(
        format_instructions(&fm.rule.instructions),
        "push_vlan:0x8100,set_field:4196->vlan_vid,output:3"
    );
}

#[test]
fn drop_and_normal() {
    let d = parse_flow("priority=0,actions=drop", Add).unwrap();
    assert!(d.rule.instructions.is_drop());
    assert!(d.rule.matched == Match::catch_all());
    assert_eq!(format_rule(&d.rule), "table=0, priority=0 actions=drop");
    let n = parse_flow("actions=normal", Add).unwrap();
    assert_eq!(
        n.rule.instructions.apply,
        vec![OfAction::Output {
            port: OfPort::Normal,
            max_len: 0
        }]
    );
    assert_eq!(format_instructions(&n.rule.instructions), "NORMAL");
    // An empty action list is a drop too.
    assert!(parse_flow("actions=", Add)
        .unwrap()
        .rule
        .instructions
        .is_drop());
}

#[test]
fn meter_then_output() {
    let fm = parse_flow("ip actions=meter:1,output:2", Add).unwrap();
    let i = &fm.rule.instructions;
    assert_eq!(i.meter, Some(MeterId(1)));
    assert_eq!(i.apply, vec![out(2)]);
    assert_eq!(format_instructions(i), "meter:1,output:2");
}

#[test]
fn timeouts_and_flags() {
    let fm = parse_flow(
        "table=3 priority=7 cookie=0x5 idle_timeout=10 hard_timeout=60 importance=2 \
         send_flow_rem check_overlap udp actions=resubmit(,4)",
        Add,
    )
    .unwrap();
    let r = &fm.rule;
    assert_eq!(r.idle_timeout, 10);
    assert_eq!(r.hard_timeout, 60);
    assert_eq!(r.importance, 2);
    assert_eq!(r.cookie, Cookie(5));
    assert!(r.flags.send_flow_rem && r.flags.check_overlap && !r.flags.reset_counts);
    assert_eq!(r.instructions.apply, vec![OfAction::Resubmit(TableId(4))]);
    assert_eq!(
        format_rule(r),
        "table=3, priority=7, cookie=0x5, idle_timeout=10, hard_timeout=60, importance=2, \
         send_flow_rem, check_overlap, udp actions=resubmit(,4)"
    );
}

#[test]
fn delete_with_cookie_mask() {
    // ovs-ofctl del-flows br0 'cookie=0x1/-1'
    let fm = parse_flow("cookie=0x1/-1", Delete).unwrap();
    assert_eq!(fm.command, Delete);
    assert_eq!(fm.rule.cookie, Cookie(1));
    assert_eq!(fm.cookie_mask, u64::MAX);
    assert_eq!(fm.table, None);
    assert_eq!(fm.out_port, OfPort::Any);

    let fm = parse_flow("table=2,cookie=0x10/0xf0,out_port=3,tcp", DeleteStrict).unwrap();
    assert_eq!(fm.table, Some(TableId(2)));
    assert_eq!(fm.cookie_mask, 0xf0);
    assert_eq!(fm.out_port, OfPort::Port(PortNo(3)));

    let fm = parse_flow("cookie=0x7 actions=drop", Modify).unwrap();
    assert_eq!(
        (fm.rule.cookie, fm.cookie_mask, fm.table),
        (Cookie(7), 0, None)
    );
    assert!(parse_flow("priority=9,ip,actions=output:1", ModifyStrict).is_ok());
}

#[test]
fn vlan_matches() {
    let m = parse_match("dl_vlan=100").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), (0x1000 | 100, 0x1fff));
    let m = parse_match("dl_vlan=0xffff").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), (0, 0xffff));
    let m = parse_match("dl_vlan_pcp=5").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), ((5 << 13) | 0x1000, 0xf000));
    let m = parse_match("dl_vlan=10,dl_vlan_pcp=5").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), ((5 << 13) | 0x1000 | 10, 0xffff));
    assert_eq!(format_match(&m), "dl_vlan=10,dl_vlan_pcp=5");
    let m = parse_match("vlan_tci=0x1000/0x1000").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), (0x1000, 0x1000));
    let m = parse_match("vlan_vid=0x1005").unwrap();
    assert_eq!(vm(&m, Field::VlanTci), (0x1005, 0x1fff));
    assert_eq!(format_match(&m), "dl_vlan=5");
}

#[test]
fn l2_l3_fields() {
    let m = parse_match(
        "dl_src=00:11:22:33:44:55/ff:ff:ff:00:00:00,eth_dst=01:00:00:00:00:00/01:00:00:00:00:00,\
         ip,nw_dst=192.168.1.0/255.255.255.0,nw_tos=32,nw_ecn=1,nw_ttl=64,nw_frag=first",
    )
    .unwrap();
    assert_eq!(vm(&m, Field::EthSrc), (0x0011_2200_0000, 0xffff_ff00_0000));
    assert_eq!(vm(&m, Field::EthDst), (0x0100_0000_0000, 0x0100_0000_0000));
    assert_eq!(vm(&m, Field::Ipv4Dst), (0xc0a8_0100, 0xffff_ff00));
    assert_eq!(vm(&m, Field::IpDscp), (8, 0x3f));
    assert_eq!(vm(&m, Field::IpEcn), (1, 3));
    assert_eq!(vm(&m, Field::IpTtl), (64, 0xff));
    assert_eq!(
        vm(&m, Field::IpFrag),
        (FRAG_ANY as u128, (FRAG_ANY | FRAG_LATER) as u128)
    );
    assert_eq!(
        format_match(&m),
        "ip,dl_src=00:11:22:00:00:00/ff:ff:ff:00:00:00,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,\
         nw_dst=192.168.1.0/24,nw_tos=32,nw_ecn=1,nw_ttl=64,nw_frag=first"
    );
    // host bits under the mask are dropped, arbitrary masks kept
    let m = parse_match("ip,nw_src=10.1.2.3/8,nw_dst=10.0.0.1/255.0.0.255").unwrap();
    assert_eq!(vm(&m, Field::Ipv4Src), (0x0a00_0000, 0xff00_0000));
    assert_eq!(
        format_match(&m),
        "ip,nw_src=10.0.0.0/8,nw_dst=10.0.0.1/255.0.0.255"
    );
}

#[test]
fn arp_uses_ip_slots() {
    let m = parse_match(
        "arp,arp_op=1,nw_src=10.0.0.1,arp_tpa=10.0.0.2,arp_sha=00:00:00:00:00:01,arp_tha=00:00:00:00:00:02",
    )
    .unwrap();
    assert_eq!(vm(&m, Field::EthType), (0x0806, 0xffff));
    assert_eq!(vm(&m, Field::IpProto), (1, 0xff));
    assert_eq!(vm(&m, Field::Ipv4Src), (0x0a00_0001, 0xffff_ffff));
    assert_eq!(vm(&m, Field::Ipv4Dst), (0x0a00_0002, 0xffff_ffff));
    assert_eq!(vm(&m, Field::ArpSha), (1, full(Field::ArpSha)));
    assert_eq!(
        format_match(&m),
        "arp,arp_spa=10.0.0.1,arp_tpa=10.0.0.2,arp_op=1,arp_sha=00:00:00:00:00:01,arp_tha=00:00:00:00:00:02"
    );
}

#[test]
fn l4_fields() {
    let m = parse_match("tcp,tp_src=0x1000/0xf000,tcp_dst=443,tcp_flags=+syn-ack").unwrap();
    assert_eq!(vm(&m, Field::TpSrc), (0x1000, 0xf000));
    assert_eq!(vm(&m, Field::TpDst), (443, 0xffff));
    assert_eq!(vm(&m, Field::TcpFlags), (0x002, 0x012));
    assert_eq!(
        format_match(&m),
        "tcp,tp_src=0x1000/0xf000,tp_dst=443,tcp_flags=+syn-ack"
    );
    let m = parse_match("tcp6,tcp_flags=0x2/0xfff").unwrap();
    assert_eq!(vm(&m, Field::TcpFlags), (2, 0xfff));
    assert_eq!(format_match(&m), "tcp6,tcp_flags=0x2/0xfff");
    let m = parse_match("udp,udp_src=53").unwrap();
    assert_eq!(vm(&m, Field::TpSrc), (53, 0xffff));
    let m = parse_match("sctp6,sctp_dst=9").unwrap();
    assert_eq!(vm(&m, Field::EthType), (0x86dd, 0xffff));
    assert_eq!(vm(&m, Field::IpProto), (132, 0xff));
    let m = parse_match("icmp,icmp_type=8,icmp_code=0").unwrap();
    assert_eq!(vm(&m, Field::TpSrc), (8, 0xffff));
    assert_eq!(vm(&m, Field::TpDst), (0, 0xffff));
    assert_eq!(format_match(&m), "icmp,icmp_type=8,icmp_code=0");
}

#[test]
fn ipv6_and_nd() {
    let m = parse_match(
        "icmp6,ipv6_src=2001:db8::/32,ipv6_dst=fe80::1,ipv6_label=0x12345,icmpv6_type=135,\
         nd_target=fe80::2,nd_sll=00:00:00:00:00:0a",
    )
    .unwrap();
    assert_eq!(
        vm(&m, Field::Ipv6Src),
        (0x2001_0db8u128 << 96, u128::MAX << 96)
    );
    assert_eq!(vm(&m, Field::Ipv6Dst).0, 0xfe80u128 << 112 | 1);
    assert_eq!(vm(&m, Field::Ipv6Label), (0x12345, 0xfffff));
    assert_eq!(vm(&m, Field::TpSrc), (135, 0xffff));
    assert_eq!(vm(&m, Field::ArpSha), (10, full(Field::ArpSha)));
    assert_eq!(
        format_match(&m),
        "icmp6,ipv6_src=2001:db8::/32,ipv6_dst=fe80::1,ipv6_label=0x12345,nd_sll=00:00:00:00:00:0a,\
         nd_target=fe80::2,icmpv6_type=135"
    );
    let m = parse_match("ipv6,ipv6_src=::1/ffff::ffff").unwrap();
    assert_eq!(format_match(&m), "ipv6,ipv6_src=::1/ffff::ffff");
}

#[test]
fn metadata_registers_tunnels() {
    let m = parse_match(
        "metadata=0x5/0xff,reg0=7,reg7=0x10/0xf0,pkt_mark=0x1,tun_id=0x64,tun_src=1.1.1.1,tun_dst=2.2.2.0/24,in_port=LOCAL",
    )
    .unwrap();
    assert_eq!(vm(&m, Field::Metadata), (5, 0xff));
    assert_eq!(vm(&m, Field::Reg0), (7, 0xffff_ffff));
    assert_eq!(vm(&m, Field::Reg7), (0x10, 0xf0));
    assert_eq!(vm(&m, Field::PktMark), (1, 0xffff_ffff));
    assert_eq!(vm(&m, Field::TunId), (0x64, u64::MAX as u128));
    assert_eq!(vm(&m, Field::TunDst), (0x0202_0200, 0xffff_ff00));
    assert_eq!(vm(&m, Field::InPort), (0xffff_fffe, 0xffff_ffff));
    assert_eq!(
        format_match(&m),
        "tun_id=0x64,tun_src=1.1.1.1,tun_dst=2.2.2.0/24,metadata=0x5/0xff,reg0=0x7,reg7=0x10/0xf0,\
         pkt_mark=0x1,in_port=LOCAL"
    );
}

#[test]
fn field_order_in_text_does_not_matter() {
    let a = parse_match("tp_dst=80,nw_src=1.2.3.4,tcp").unwrap();
    let b = parse_match("tcp,nw_src=1.2.3.4,tp_dst=80").unwrap();
    assert!(a == b);
    // the same value twice is fine
    assert!(parse_match("tcp,tcp,ip,nw_proto=6,in_port=1,in_port=1").is_ok());
    assert!(parse_match("dl_type=0x0800,ip").is_ok());
}

#[test]
fn classic_actions() {
    let i = parse_instructions(
        "mod_vlan_vid:5,mod_vlan_pcp:3,strip_vlan,mod_dl_src:00:00:00:00:00:01,mod_dl_dst:00:00:00:00:00:02,\
         mod_nw_src:1.2.3.4,mod_nw_dst:5.6.7.8,mod_nw_tos:16,mod_nw_ecn:2,mod_nw_ttl:9,mod_tp_src:1,mod_tp_dst:2,\
         dec_ttl,in_port,local,flood,all,controller:100,sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
    )
    .unwrap();
    let sf = |field: Field, value: u128| OfAction::SetField {
        field,
        value,
        mask: field.layout().max_value(),
    };
    let port = |port| OfAction::Output { port, max_len: 0 };
    assert_eq!(
        i.apply,
        vec![
            OfAction::SetVlanVid(5),
            OfAction::SetVlanPcp(3),
            OfAction::PopVlan,
            sf(Field::EthSrc, 1),
            sf(Field::EthDst, 2),
            sf(Field::Ipv4Src, 0x0102_0304),
            sf(Field::Ipv4Dst, 0x0506_0708),
            sf(Field::IpDscp, 4),
            sf(Field::IpEcn, 2),
            sf(Field::IpTtl, 9),
            sf(Field::TpSrc, 1),
            sf(Field::TpDst, 2),
            OfAction::DecTtl,
            port(OfPort::InPort),
            port(OfPort::Local),
            port(OfPort::Flood),
            port(OfPort::All),
            OfAction::Output {
                port: OfPort::Controller,
                max_len: 100
            },
            OfAction::Sample { probability: 100 },
        ]
    );
    assert_eq!(
        format_instructions(&i),
        "mod_vlan_vid:5,mod_vlan_pcp:3,pop_vlan,set_field:00:00:00:00:00:01->eth_src,\
         set_field:00:00:00:00:00:02->eth_dst,set_field:1.2.3.4->ip_src,set_field:5.6.7.8->ip_dst,\
         set_field:4->ip_dscp,set_field:2->nw_ecn,set_field:9->nw_ttl,set_field:1->tp_src,\
         set_field:2->tp_dst,dec_ttl,IN_PORT,LOCAL,FLOOD,ALL,CONTROLLER:100,sample(probability=100)"
    );
}

#[test]
fn set_field_load_move() {
    let i = parse_instructions(
        "set_field:aa:bb:cc:dd:ee:ff->eth_dst,set_field:10.0.0.0/8->ip_dst,set_field:80->tcp_dst,\
         set_field:0x5/0xf->reg0,set_field:0x1->metadata,load:0x1->NXM_NX_REG0[],load:0xab->reg1[8..15],\
         load:1->NXM_NX_PKT_MARK[3],load:0x0a000001->NXM_OF_IP_SRC[],load:0x5->OXM_OF_METADATA[0..7],\
         move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31],move:reg2[]->reg3[]",
    )
    .unwrap();
    let sfm = |field, value, mask| OfAction::SetField { field, value, mask };
    assert_eq!(
        i.apply,
        vec![
            sfm(Field::EthDst, 0xaabb_ccdd_eeff, 0xffff_ffff_ffff),
            sfm(Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000),
            sfm(Field::TpDst, 80, 0xffff),
            sfm(Field::Reg0, 5, 0xf),
            sfm(Field::Metadata, 1, u64::MAX as u128),
            sfm(Field::Reg0, 1, 0xffff_ffff),
            sfm(Field::Reg1, 0xab00, 0xff00),
            sfm(Field::PktMark, 8, 8),
            sfm(Field::Ipv4Src, 0x0a00_0001, 0xffff_ffff),
            sfm(Field::Metadata, 5, 0xff),
            OfAction::Move {
                src: FieldRange::new(Field::Reg0, 0, 16),
                dst: FieldRange::new(Field::Reg1, 16, 16),
            },
            OfAction::Move {
                src: FieldRange::whole(Field::Reg2),
                dst: FieldRange::whole(Field::Reg3),
            },
        ]
    );
    assert_eq!(
        format_instructions(&i),
        "set_field:aa:bb:cc:dd:ee:ff->eth_dst,set_field:10.0.0.0/8->ip_dst,set_field:80->tp_dst,\
         set_field:0x5/0xf->reg0,set_field:0x1->metadata,set_field:0x1->reg0,set_field:0xab00/0xff00->reg1,\
         set_field:0x8/0x8->pkt_mark,set_field:10.0.0.1->ip_src,set_field:0x5/0xff->metadata,\
         move:reg0[0..15]->reg1[16..31],move:reg2[]->reg3[]"
    );
}

#[test]
fn full_instruction_set() {
    let text = "meter:1,output:2,clear_actions,write_actions(pop_vlan,output:3),write_metadata:0x1/0xff,goto_table:2";
    let i = parse_instructions(text).unwrap();
    assert_eq!(
        i,
        Instructions {
            meter: Some(MeterId(1)),
            apply: vec![out(2)],
            clear_actions: true,
            write: Some(vec![OfAction::PopVlan, out(3)]),
            write_metadata: Some((1, 0xff)),
            goto_table: Some(TableId(2)),
        }
    );
    assert_eq!(format_instructions(&i), text);
    let i = parse_instructions("write_metadata:0x5").unwrap();
    assert_eq!(i.write_metadata, Some((5, u64::MAX)));
    assert_eq!(format_instructions(&i), "write_metadata:0x5");
    let i = parse_instructions("goto_table:1").unwrap();
    assert_eq!(format_instructions(&i), "goto_table:1");
}

#[test]
fn spaces_as_separators() {
    let a = parse_flow(
        "priority=5 ip nw_src=1.2.3.4 actions=output:1 output:2",
        Add,
    )
    .unwrap();
    let b = parse_flow(
        "priority=5,ip,nw_src=1.2.3.4,actions=output:1,output:2",
        Add,
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.rule.instructions.apply, vec![out(1), out(2)]);
}

// ---- golden errors ------------------------------------------------------

#[test]
fn error_messages() {
    let cases: &[(&str, FlowModCommand, &str)] = &[
        ("nw_srcc=1.2.3.4,actions=drop", Add, "unknown field \"nw_srcc\""),
        ("nw_src=1.2.3.4,actions=drop", Add, "prerequisite \"ip\" missing for \"nw_src\""),
        ("ip,nw_src=10.0.0.0/33,actions=drop", Add, "prefix /33 too long for IPv4"),
        ("ipv6,ipv6_src=::/129,actions=drop", Add, "prefix /129 too long for IPv6"),
        (
            "ip,nw_src=1.2.3,actions=drop",
            Add,
            "bad value \"1.2.3\" for \"nw_src\": not an IPv4 address",
        ),
        ("actions=outptu:2", Add, "unknown action \"outptu\""),
        ("in_port=1,in_port=2,actions=drop", Add, "duplicate field \"in_port\""),
        ("in_port=1,actions=drop", Delete, "\"actions\" not allowed in del-flows"),
        ("in_port=1,actions=drop", DeleteStrict, "\"actions\" not allowed in del-flows"),
        ("in_port=1", Add, "missing \"actions\""),
        ("in_port=1", Modify, "missing \"actions\""),
        ("tp_dst=80,actions=drop", Add, "prerequisite \"tcp, udp or sctp\" missing for \"tp_dst\""),
        ("ip,tcp_dst=80,actions=drop", Add, "prerequisite \"tcp\" missing for \"tcp_dst\""),
        ("tcp,udp_dst=80,actions=drop", Add, "prerequisite \"udp\" missing for \"udp_dst\""),
        ("udp,tcp_flags=+syn,actions=drop", Add, "prerequisite \"tcp\" missing for \"tcp_flags\""),
        ("nw_proto=6,actions=drop", Add, "prerequisite \"ip or ipv6\" missing for \"nw_proto\""),
        ("arp,nw_ttl=3,actions=drop", Add, "prerequisite \"ip or ipv6\" missing for \"nw_ttl\""),
        ("icmp6,icmp_type=1,actions=drop", Add, "prerequisite \"icmp\" missing for \"icmp_type\""),
        ("icmp,icmpv6_code=1,actions=drop", Add, "prerequisite \"icmp6\" missing for \"icmpv6_code\""),
        ("ip,arp_op=1,actions=drop", Add, "prerequisite \"arp\" missing for \"arp_op\""),
        ("ip,ipv6_label=1,actions=drop", Add, "prerequisite \"ipv6\" missing for \"ipv6_label\""),
        (
            "icmp6,icmpv6_type=1,nd_target=::1,actions=drop",
            Add,
            "prerequisite \"icmp6,icmpv6_type=135 or 136\" missing for \"nd_target\"",
        ),
        (
            "icmp6,icmpv6_type=136,nd_sll=00:00:00:00:00:01,actions=drop",
            Add,
            "prerequisite \"icmp6,icmpv6_type=135\" missing for \"nd_sll\"",
        ),
        ("ip,ipv6,actions=drop", Add, "\"ipv6\" conflicts with \"ip\""),
        ("tcp,nw_proto=17,actions=drop", Add, "\"nw_proto\" conflicts with \"tcp\""),
        ("ip,nw_tos=3,actions=drop", Add, "bad value \"3\" for \"nw_tos\": the ECN bits (low 2 bits) of the ToS must be zero"),
        ("dl_vlan=4096,actions=drop", Add, "bad value \"4096\" for \"dl_vlan\": VLAN id must be at most 4095 (or 0xffff for untagged)"),
        ("tcp,tp_dst=65536,actions=drop", Add, "bad value \"65536\" for \"tp_dst\": out of range (at most 65535)"),
        ("dl_src=aa:bb:cc,actions=drop", Add, "bad value \"aa:bb:cc\" for \"dl_src\": not an Ethernet address"),
        ("ip,nw_frag=maybe,actions=drop", Add, "bad value \"maybe\" for \"nw_frag\": expected no, yes, first, later, not_later or a number"),
        ("tcp,tcp_flags=+syn+bogus,actions=drop", Add, "bad value \"+syn+bogus\" for \"tcp_flags\": unknown TCP flag \"bogus\""),
        ("in_port,actions=drop", Add, "missing value for \"in_port\""),
        ("tcp=1,actions=drop", Add, "\"tcp\" takes no value"),
        ("priority=1,priority=2,actions=drop", Add, "duplicate field \"priority\""),
        ("priority=65536,actions=drop", Add, "bad value \"65536\" for \"priority\": out of range (at most 65535)"),
        ("table=254,actions=drop", Add, "bad value \"254\" for \"table\": table ids go up to 253"),
        ("cookie=0x1/-1,actions=drop", Add, "bad value \"0x1/-1\" for \"cookie\": a cookie mask is only allowed in mod-flows and del-flows"),
        ("out_port=1,actions=drop", Add, "\"out_port\" not allowed in add-flow"),
        ("idle_timeout=5", Delete, "\"idle_timeout\" not allowed in del-flows"),
        ("send_flow_rem", DeleteStrict, "\"send_flow_rem\" not allowed in del-flows"),
        ("send_flow_rem=1,actions=drop", Add, "\"send_flow_rem\" takes no value"),
        ("actions=drop,output:1", Add, "\"drop\" must be the only action"),
        ("actions=output:1,drop", Add, "\"drop\" must be the only action"),
        ("actions=goto_table:2,output:1", Add, "\"output:1\" may not follow \"goto_table:2\""),
        ("actions=output:1,meter:1", Add, "\"meter:1\" may not follow \"output:1\""),
        ("actions=clear_actions,output:1", Add, "\"output:1\" may not follow \"clear_actions\""),
        ("actions=goto_table:1,goto_table:2", Add, "duplicate instruction \"goto_table\""),
        ("table=2,actions=goto_table:2", Add, "bad value \"2\" for \"goto_table\": must be greater than the rule's table 2"),
        ("actions=goto_table:254", Add, "bad value \"254\" for \"goto_table\": out of range (at most 253)"),
        ("actions=resubmit(1,)", Add, "\"resubmit(1,)\" not supported: resubmit to a port without a table (use resubmit(PORT,TABLE))"),
        ("actions=resubmit(NORMAL,2)", Add, "\"resubmit(NORMAL,2)\" not supported: resubmit from a port other than a port number, CONTROLLER, LOCAL or IN_PORT"),
        ("actions=resubmit:1", Add, "\"resubmit:1\" not supported: resubmit to a port (use resubmit(,TABLE) or resubmit(PORT,TABLE))"),
        ("actions=move:reg0[0..15]->reg1[0..7]", Add, "bad value \"reg0[0..15]->reg1[0..7]\" for \"move\": source and destination widths differ (16 vs 8 bits)"),
        ("actions=load:0x100->reg0[0..7]", Add, "bad value \"0x100\" for \"load\": value does not fit in 8 bits"),
        ("actions=load:1->NXM_NX_REG16[]", Add, "unknown field \"NXM_NX_REG16\""),
        ("actions=set_field:6->nw_proto", Add, "field \"nw_proto\" is not writable"),
        ("actions=set_field:1->bogus", Add, "unknown field \"bogus\""),
        ("actions=push_vlan:0x0800", Add, "bad value \"0x0800\" for \"push_vlan\": the TPID must be 0x8100 or 0x88a8"),
        ("actions=mod_vlan_vid:4096", Add, "bad value \"4096\" for \"mod_vlan_vid\": out of range (at most 4095)"),
        ("actions=output:ANY", Add, "bad value \"ANY\" for \"output\": cannot output to ANY"),
        ("actions=output:eth0", Add, "bad value \"eth0\" for \"output\": not a port number or name"),
        ("actions=write_actions(meter:1)", Add, "\"meter\" not allowed in write_actions"),
        ("actions=sample(collector_set_id=1)", Add, "bad value \"collector_set_id=1\" for \"sample\": probability=N is required"),
        ("actions=output(port=1", Add, "syntax error in \"output(port=1\": unbalanced parentheses: \"(\" without \")\""),
        ("actions=meter:0", Add, "bad value \"0\" for \"meter\": meter ids start at 1"),
    ];
    for (line, command, want) in cases {
        assert_eq!(err(line, *command), *want, "{line:?}");
    }
}

#[test]
fn error_kinds_are_inspectable() {
    let e = parse_flow("ip,nw_src=10.0.0.0/40,actions=drop", Add).unwrap_err();
    assert_eq!(e.token(), "10.0.0.0/40");
    assert_eq!(
        e.kind(),
        &ParseErrorKind::PrefixTooLong {
            prefix: 40,
            family: "IPv4"
        }
    );
    let e = parse_flow("nw_src=1.2.3.4,actions=drop", Add).unwrap_err();
    assert_eq!(e.token(), "nw_src");
    assert!(matches!(
        e.kind(),
        ParseErrorKind::MissingPrerequisite { prerequisite: "ip" }
    ));
}

#[test]
fn parse_match_refuses_flow_keywords() {
    assert_eq!(
        parse_match("priority=1,ip").unwrap_err().to_string(),
        "\"priority\" not allowed in a match"
    );
    assert_eq!(
        parse_match("ip,actions=drop").unwrap_err().to_string(),
        "\"actions\" not allowed in a match"
    );
    assert!(parse_match("").unwrap() == Match::catch_all());
    assert_eq!(format_match(&Match::catch_all()), "");
}

// ---- flow files ----------------------------------------------------------

#[test]
fn flow_file_skips_comments_and_names_bad_lines() {
    let text = "\
# a comment
table=0,priority=10,ip,actions=output:1

   # indented comment
table=0,priority=5,arp,actions=NORMAL
";
    let flows = parse_flow_file(text, Add).unwrap();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[1].rule.priority, Priority(5));

    let bad = "priority=1,actions=drop\n\n# x\npriority=2,nw_srcc=1,actions=drop\n";
    let e = parse_flow_file(bad, Add).unwrap_err();
    assert_eq!(e.line, 4);
    assert_eq!(e.error.to_string(), "unknown field \"nw_srcc\"");
    assert_eq!(e.to_string(), "line 4: unknown field \"nw_srcc\"");
}

#[test]
fn conjunctions_and_conj_id_read_and_print_as_ovs_ofctl_writes_them() {
    let fm = parse_flow(
        "priority=100,ip,nw_src=198.18.0.1,actions=conjunction(7,2/3),note:01,conjunction(4294967295,64/64)",
        Add,
    )
    .unwrap();
    assert_eq!(
        fm.rule.instructions.conjunctions().collect::<Vec<_>>(),
        vec![(7, 1, 3), (u32::MAX, 63, 64)]
    );
    assert_eq!(
        format_instructions(&fm.rule.instructions),
        "conjunction(7,2/3),note:01,conjunction(4294967295,64/64)"
    );
    let fm = parse_flow("conj_id=7,tcp,actions=output:2", Add).unwrap();
    assert_eq!(
        vm(&fm.rule.matched, Field::ConjId),
        (7, full(Field::ConjId))
    );
    assert_eq!(format_match(&fm.rule.matched), "conj_id=7,tcp");
    // Open vSwitch's refusals, in its words.
    for (text, why) in [
        (
            "actions=conjunction(1,1/2),output:2",
            "such as the \"output\" action used here",
        ),
        (
            "actions=conjunction(1,1/2),goto_table:3",
            "such as the \"goto_table\" action",
        ),
        ("actions=conjunction(1,1/1)", "at least 2 clauses"),
        ("actions=conjunction(1,1/65)", "at most 64 clauses"),
        (
            "actions=conjunction(1,0/2)",
            "clause index must be positive",
        ),
        (
            "actions=conjunction(1,3/2)",
            "less than or equal to number of clauses",
        ),
        (
            "actions=conjunction(1)",
            "syntax is \"conjunction(id,i/n)\"",
        ),
        ("conj_id=1/0xff,actions=drop", "conj_id"),
    ] {
        let e = err(text, Add);
        assert!(e.contains(why), "{text}: {e}");
    }
}

//! Width and behaviour of translation on hand-written tables whose ideal
//! megaflow is known. The OVS 3.1 figures quoted were produced by
//! `ovs-appctl ofproto/trace` on a netdev bridge (integration/tests/ovs_trace.rs).

mod common;

use megaflow::actions::{SampleCookie, SampleOutput, UserspaceReason};
use megaflow::key::VLAN_PRESENT;
use megaflow::{DpAction, Field, FlowKey, Match, MeterId, PortNo, Timestamp};
use ofproto::bridge::VlanMode;
use ofproto::rule::{FieldRange, Instructions, OfAction, OfPort, RuleSpec};
use ofproto::{Bridge, PortInfo, Priority, TableId};

const NOW: Timestamp = Timestamp(1_000_000);

fn out(p: u32) -> OfAction {
    OfAction::Output {
        port: OfPort::Port(PortNo(p)),
        max_len: 0,
    }
}

fn rule(br: &mut Bridge, table: u8, prio: u16, m: Match, ins: Instructions) {
    let mut s = RuleSpec::new(TableId(table), Priority(prio), m);
    s.instructions = ins;
    br.apply_flow_mod(&ofproto::FlowMod::add(s), NOW)
        .expect("rule");
}

fn apply(actions: Vec<OfAction>) -> Instructions {
    Instructions {
        apply: actions,
        ..Default::default()
    }
}

fn m(fields: &[(Field, u128, u128)]) -> Match {
    let mut m = Match::catch_all();
    for &(f, v, mask) in fields {
        m.set_field_masked(f, v, mask);
    }
    m
}

const IP: (Field, u128, u128) = (Field::EthType, 0x0800, 0xffff);
const TCP: (Field, u128, u128) = (Field::IpProto, 6, 0xff);

fn tcp_packet(src: u32, dst: u32, dport: u16) -> FlowKey {
    common::tcp(src, dst, 40000, dport)
}

/// The fields a megaflow reads besides `recirc_id`, which every megaflow
/// matches exactly (its stage; checked here on each call).
fn fields(t: &ofproto::Translation) -> Vec<Field> {
    assert!(
        t.mask.is_exact(Field::RecircId),
        "every megaflow is of one stage"
    );
    t.mask.fields().filter(|&f| f != Field::RecircId).collect()
}

#[test]
fn l2_table_unwildcards_no_l3_or_l4() {
    let mut br = Bridge::with_ports(1..=4);
    for (i, p) in [(2u64, 2u32), (3, 3)] {
        let mac = 0x0200_0000_0000u128 | u128::from(i);
        rule(
            &mut br,
            0,
            10,
            m(&[(Field::EthDst, mac, (1 << 48) - 1)]),
            apply(vec![out(p)]),
        );
    }
    let k = tcp_packet(0x0a00_0001, 0x0a00_0002, 80);
    let t = br.translate(&k, NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);
    // eth_dst for the lookup, in_port because output:2 must not be the input.
    assert_eq!(fields(&t), vec![Field::InPort, Field::EthDst]);

    // A miss (unknown MAC) reads only eth_dst; OVS 3.1 also un-wildcards
    // eth_type and nw_frag here.
    let mut k2 = k;
    k2.set_eth_dst(0x0200_0000_0009);
    let t2 = br.translate(&k2, NOW);
    assert!(t2.is_drop());
    assert_eq!(fields(&t2), vec![Field::EthDst]);
}

#[test]
fn acl_prefixes_unwildcard_only_distinguishing_bits() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        10,
        m(&[IP, (Field::Ipv4Src, 0x0a00_0000, 0xff00_0000)]),
        apply(vec![out(2)]),
    );
    rule(
        &mut br,
        0,
        20,
        m(&[IP, (Field::Ipv4Src, 0x0a01_0200, 0xffff_ff00)]),
        apply(vec![out(3)]),
    );

    // 10.9.9.9: the /8 rule; telling it from 10.1.2.0/24 takes 13 bits
    // (OVS 3.1: nw_src=10.8.0.0/13).
    let t = br.translate(&tcp_packet(0x0a09_0909, 0x0102_0304, 80), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);
    assert_eq!(t.mask.field(Field::Ipv4Src), 0xfff8_0000);
    assert!(t.mask.is_wildcard(Field::Ipv4Dst) && t.mask.is_wildcard(Field::TpDst));
    assert!(t.mask.is_wildcard(Field::IpProto));

    // 10.1.2.3: the /24 rule, exactly /24.
    let t = br.translate(&tcp_packet(0x0a01_0203, 0x0102_0304, 80), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(3))]);
    assert_eq!(t.mask.field(Field::Ipv4Src), 0xffff_ff00);

    // 192.168.0.1: the first bit already differs (OVS 3.1: 128.0.0.0/1).
    let t = br.translate(&tcp_packet(0xc0a8_0001, 0x0102_0304, 80), NOW);
    assert!(t.is_drop());
    assert_eq!(t.mask.field(Field::Ipv4Src), 0x8000_0000);
}

#[test]
fn port_rules_unwildcard_only_high_port_bits() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        10,
        m(&[IP, TCP, (Field::TpDst, 80, 0xffff)]),
        apply(vec![out(2)]),
    );
    // 443 vs 80: they differ from bit 7 on (OVS 3.1: tp_dst=0x100/0xff00).
    let t = br.translate(&tcp_packet(1, 2, 443), NOW);
    assert!(t.is_drop());
    assert_eq!(t.mask.field(Field::TpDst), 0xff00);
    assert!(t.mask.is_wildcard(Field::TpSrc));
    let t = br.translate(&tcp_packet(1, 2, 80), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);
    assert_eq!(t.mask.field(Field::TpDst), 0xffff);
}

#[test]
fn fields_the_pipeline_wrote_are_not_unwildcarded() {
    let mut br = Bridge::with_ports(1..=4);
    // Table 0 rewrites nw_dst and tags reg0; table 1 matches both.
    rule(
        &mut br,
        0,
        1,
        m(&[IP]),
        Instructions {
            apply: vec![
                OfAction::SetField {
                    field: Field::Ipv4Dst,
                    value: 0x0101_0101,
                    mask: u32::MAX.into(),
                },
                OfAction::SetField {
                    field: Field::Reg0,
                    value: 5,
                    mask: u32::MAX.into(),
                },
            ],
            goto_table: Some(TableId(1)),
            ..Default::default()
        },
    );
    rule(
        &mut br,
        1,
        1,
        m(&[
            IP,
            (Field::Ipv4Dst, 0x0101_0101, u32::MAX.into()),
            (Field::Reg0, 5, u32::MAX.into()),
        ]),
        apply(vec![out(2)]),
    );
    let t = br.translate(&tcp_packet(7, 0x0909_0909, 80), NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Dst(0x0101_0101),
            DpAction::Output(PortNo(2))
        ]
    );
    assert!(t.mask.is_wildcard(Field::Ipv4Dst), "{:?}", t.mask);
    assert!(t.mask.is_wildcard(Field::Reg0));
    assert_eq!(fields(&t), vec![Field::InPort, Field::EthType]);
}

#[test]
fn masked_set_field_reads_the_bits_it_keeps() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        m(&[IP]),
        apply(vec![
            OfAction::SetField {
                field: Field::Ipv4Src,
                value: 0x0a00_0000,
                mask: 0xff00_0000,
            },
            out(2),
        ]),
    );
    let t = br.translate(&tcp_packet(0xc0a8_0102, 1, 80), NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetIpv4Src(0x0aa8_0102),
            DpAction::Output(PortNo(2))
        ]
    );
    assert_eq!(t.mask.field(Field::Ipv4Src), 0x00ff_ffff);
}

#[test]
fn move_unwildcards_its_source() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        Instructions {
            apply: vec![OfAction::Move {
                src: FieldRange {
                    field: Field::EthSrc,
                    ofs: 0,
                    n_bits: 8,
                    opt: None,
                },
                dst: FieldRange {
                    field: Field::Reg1,
                    ofs: 0,
                    n_bits: 8,
                    opt: None,
                },
            }],
            goto_table: Some(TableId(1)),
            ..Default::default()
        },
    );
    rule(
        &mut br,
        1,
        1,
        m(&[(Field::Reg1, 1, 0xff)]),
        apply(vec![out(2)]),
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);
    assert_eq!(t.mask.field(Field::EthSrc), 0xff);
}

#[test]
fn vlan_push_set_and_pop_commit_once() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        apply(vec![
            OfAction::PushVlan(0x8100),
            OfAction::SetField {
                field: Field::VlanTci,
                value: u128::from(VLAN_PRESENT | 100),
                mask: 0x1fff,
            },
            out(3),
            OfAction::PopVlan,
            out(4),
        ]),
    );
    let k = tcp_packet(1, 2, 3);
    let t = br.translate(&k, NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 100
            },
            DpAction::Output(PortNo(3)),
            DpAction::PopVlan,
            DpAction::Output(PortNo(4)),
        ]
    );
    // Only "untagged?" was read.
    assert_eq!(t.mask.field(Field::VlanTci), u128::from(VLAN_PRESENT));

    // On a tagged packet push_vlan copies the VID and PCP of the old tag.
    let mut tagged = k;
    tagged.set_vlan_tpid(0x8100);
    tagged.set_vlan_tci(u64::from(VLAN_PRESENT | 0x6000 | 7));
    let mut br2 = Bridge::with_ports(1..=4);
    rule(
        &mut br2,
        0,
        1,
        Match::catch_all(),
        apply(vec![OfAction::PushVlan(0x88a8), out(2)]),
    );
    let t = br2.translate(&tagged, NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x6007
            },
            DpAction::Output(PortNo(2))
        ]
    );
}

#[test]
fn output_to_input_port_needs_in_port_and_flood_skips_it() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        apply(vec![out(1), out(2)]),
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);

    let mut br = Bridge::with_ports(1..=4);
    br.add_port(PortInfo {
        flood: false,
        ..PortInfo::new(PortNo(4), "p4")
    });
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        apply(vec![OfAction::Output {
            port: OfPort::Flood,
            max_len: 0,
        }]),
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    assert_eq!(
        t.actions,
        vec![DpAction::Output(PortNo(2)), DpAction::Output(PortNo(3))]
    );
    assert_eq!(fields(&t), vec![Field::InPort]);
}

#[test]
fn meter_controller_and_sample_become_datapath_actions() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        Instructions {
            meter: Some(MeterId(7)),
            apply: vec![
                OfAction::Sample { probability: 65535 },
                OfAction::Output {
                    port: OfPort::Controller,
                    max_len: 128,
                },
                out(2),
            ],
            ..Default::default()
        },
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    assert_eq!(t.actions[0], DpAction::Meter(MeterId(7)));
    assert!(matches!(
        t.actions[1],
        DpAction::Sample {
            probability: u32::MAX,
            ..
        }
    ));
    assert_eq!(
        t.actions[2],
        DpAction::Userspace(UserspaceReason::controller(128))
    );
    assert_eq!(t.actions[3], DpAction::Output(PortNo(2)));
}

#[test]
fn action_set_runs_at_pipeline_end_in_spec_order() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        Instructions {
            write: Some(vec![out(3), OfAction::PushVlan(0x8100)]),
            goto_table: Some(TableId(1)),
            ..Default::default()
        },
    );
    rule(
        &mut br,
        1,
        1,
        Match::catch_all(),
        Instructions {
            write: Some(vec![out(2)]),
            ..Default::default()
        },
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    // One output (the later write wins), after the push.
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0
            },
            DpAction::Output(PortNo(2))
        ]
    );

    // A table miss later in the pipeline discards the action set.
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        Instructions {
            write: Some(vec![out(3)]),
            goto_table: Some(TableId(1)),
            ..Default::default()
        },
    );
    assert!(br.translate(&tcp_packet(1, 2, 3), NOW).is_drop());
}

#[test]
fn resubmit_loops_are_cut_and_drop() {
    let mut br = Bridge::with_ports(1..=4);
    rule(
        &mut br,
        0,
        1,
        Match::catch_all(),
        apply(vec![out(2), OfAction::Resubmit(TableId(0))]),
    );
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    assert!(t.error.is_some());
    assert!(t.is_drop());
}

#[test]
fn normal_learns_floods_and_forwards_per_vlan() {
    let mut br = Bridge::with_ports(1..=3);
    br.add_port(PortInfo {
        vlan: VlanMode::Access(10),
        ..PortInfo::new(PortNo(4), "p4")
    });
    rule(
        &mut br,
        0,
        0,
        Match::catch_all(),
        apply(vec![OfAction::Output {
            port: OfPort::Normal,
            max_len: 0,
        }]),
    );
    let a = 0x0200_0000_000a_u64;
    let b = 0x0200_0000_000b_u64;
    // Untagged a -> b from trunk port 1, VLAN 0: b unknown, flood to the
    // trunks 2 and 3 (port 4 is in VLAN 10).
    let mut k = tcp_packet(1, 2, 3);
    k.set_eth_src(a);
    k.set_eth_dst(b);
    let t = br.translate(&k, NOW);
    assert_eq!(
        t.actions,
        vec![DpAction::Output(PortNo(2)), DpAction::Output(PortNo(3))]
    );
    assert!(t.uses_mac_table);
    assert_eq!(
        fields(&t),
        vec![Field::InPort, Field::EthDst, Field::EthSrc, Field::VlanTci]
    );
    assert_eq!(t.mask.field(Field::VlanTci), u128::from(VLAN_PRESENT));
    br.learn(&t.learned, NOW);
    let gen = br.mac().generation();

    // b answers from port 3: goes straight to port 1, where a was learned.
    let mut r = k;
    r.set_in_port(3);
    r.set_eth_src(b);
    r.set_eth_dst(a);
    let t = br.translate(&r, NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(1))]);
    br.learn(&t.learned, NOW);
    assert!(
        br.mac().generation() > gen,
        "a new MAC bumps the generation"
    );

    // VLAN 10 traffic from the trunk reaches the access port untagged.
    let mut v = k;
    v.set_vlan_tpid(0x8100);
    v.set_vlan_tci(u64::from(VLAN_PRESENT | 10));
    v.set_eth_dst(0xffff_ffff_ffff);
    let t = br.translate(&v, NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::Output(PortNo(2)),
            DpAction::Output(PortNo(3)),
            DpAction::PopVlan,
            DpAction::Output(PortNo(4)),
        ]
    );
    // A tagged packet's megaflow names the tag kind, so it can be offloaded.
    assert!(t.mask.is_exact(Field::VlanTpid));

    // From the access port, untagged in VLAN 10: tagged onto the trunks.
    let mut w = k;
    w.set_in_port(4);
    w.set_eth_dst(0xffff_ffff_ffff);
    let t = br.translate(&w, NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            },
            DpAction::Output(PortNo(1)),
            DpAction::Output(PortNo(2)),
            DpAction::Output(PortNo(3)),
        ]
    );
}

#[test]
fn trace_explains_tables_rules_and_wildcards() {
    let mut br = Bridge::with_ports(1..=4);
    let mut s = RuleSpec::new(
        TableId(0),
        Priority(100),
        m(&[IP, (Field::Ipv4Src, 0x0a00_0000, 0xff00_0000)]),
    );
    s.cookie = ofproto::Cookie(0x5);
    s.instructions = Instructions {
        goto_table: Some(TableId(1)),
        ..Default::default()
    };
    br.apply_flow_mod(&ofproto::FlowMod::add(s), NOW)
        .expect("rule");
    let k = tcp_packet(0x0a01_0101, 2, 3);
    let t = br.trace(&k, NOW);
    let text = t.explain(&k);
    assert!(text.contains("priority 100, cookie 0x5"), "{text}");
    assert!(text.contains(" 1. No match: drop."), "{text}");
    assert!(text.contains("Datapath actions: drop"), "{text}");
    assert!(
        text.contains("exact: eth_type, recirc_id; masked: ipv4_src/0xff000000"),
        "{text}"
    );
}

/// The sampled copy of a translation's first action, if it has one.
fn sampled(t: &ofproto::Translation) -> Option<(u32, SampleCookie)> {
    match t.actions.first()? {
        DpAction::Sample {
            probability,
            actions,
        } => match actions.as_slice() {
            [DpAction::Userspace(UserspaceReason::Sample(c))] => Some((*probability, *c)),
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn port_sampling_comes_first_and_names_where_the_packet_goes() {
    let mut br = Bridge::with_ports(1..=4);
    rule(&mut br, 0, 2, m(&[TCP, IP]), apply(vec![out(2)]));
    rule(&mut br, 0, 1, m(&[IP]), apply(vec![out(3), out(4)]));
    let p = tcp_packet(1, 2, 3);
    let t = br.translate(&p, NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(2))]);

    let gen = br.generations();
    br.set_port_sample_rate(PortNo(1), 1000);
    assert_ne!(
        br.generations(),
        gen,
        "a rate change re-translates megaflows"
    );
    let t = br.translate(&p, NOW);
    let (probability, cookie) = sampled(&t).expect("sampled first");
    assert_eq!(probability, (f64::from(u32::MAX) / 1000.0).round() as u32);
    assert_eq!(
        cookie,
        SampleCookie {
            rate: 1000,
            output: SampleOutput::Port(PortNo(2))
        }
    );
    assert_eq!(t.actions[1..], [DpAction::Output(PortNo(2))]);
    assert!(fields(&t).contains(&Field::InPort));

    // Another port: not sampled, but its megaflow names its in_port too
    // (a port that samples must not share it).
    let mut q = p;
    q.set_in_port(2);
    let t = br.translate(&q, NOW);
    assert_eq!(sampled(&t), None);
    assert!(fields(&t).contains(&Field::InPort));

    // Two outputs: "multiple"; none: "drop".
    let mut udp = p;
    udp.set_ip_proto(17);
    let t = br.translate(&udp, NOW);
    assert_eq!(sampled(&t).unwrap().1.output, SampleOutput::Multiple(2));
    let mut arp = p;
    arp.set_eth_type(0x0806);
    let t = br.translate(&arp, NOW);
    assert_eq!(sampled(&t).unwrap().1.output, SampleOutput::Drop);
}

#[test]
fn an_openflow_sample_action_carries_its_rate_and_the_output() {
    let mut br = Bridge::with_ports(1..=4);
    let sample = OfAction::Sample { probability: 65 };
    rule(&mut br, 0, 1, m(&[IP]), apply(vec![sample, out(3)]));
    let t = br.translate(&tcp_packet(1, 2, 3), NOW);
    let (probability, cookie) = sampled(&t).expect("sampled");
    assert_eq!(probability, 65 * 65537);
    assert_eq!(cookie.rate, 1008, "65535 / 65, rounded");
    assert_eq!(cookie.output, SampleOutput::Port(PortNo(3)));
}

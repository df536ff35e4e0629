//! `ct()` through the bridge: the flow text Open vSwitch's users write,
//! translation into `ct` + `recirc` with the state the next stage needs
//! frozen under an id, and the next stage thawed from it.

use megaflow::{DpAction, Field, FlowKey, Timestamp};

use crate::rule::FlowModCommand;
use crate::text::{format_rule, parse_flow};
use crate::xlate::XlateError;
use crate::Bridge;

fn add(b: &mut Bridge, text: &str) {
    let fm = parse_flow(text, FlowModCommand::Add).expect(text);
    b.apply_flow_mod(&fm, Timestamp(0)).expect(text);
}

fn tcp(in_port: u64, dport: u64) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(in_port);
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ipv4_src(0xc612_0002);
    k.set_ipv4_dst(0xc612_0003);
    k.set_tp_src(40000);
    k.set_tp_dst(dport);
    k
}

#[test]
fn ct_flows_read_and_print_as_ovs_ofctl_writes_them() {
    for text in [
        "table=0, priority=100, ct_state=-trk,ip actions=ct(table=1)",
        "table=1, priority=10, ct_state=+new+trk,tcp,tp_dst=22 actions=ct(commit,zone=5),output:2",
        "table=1, priority=10, ct_state=est|trk,ip actions=output:2",
        "table=1, priority=5, ct_state=+inv+trk,ip actions=drop",
        "table=0, priority=5, ip actions=ct(commit,zone=NXM_NX_REG0[0..15],exec(set_field:0x1->ct_mark,set_field:0x2/0xff->ct_label))",
        "table=0, priority=5, ip actions=ct(commit,table=3,zone=9,nat(src=198.19.0.1:1024-2048,random))",
        "table=0, priority=5, ip actions=ct(commit,force,nat(dst=[2001:db8::1]:80))",
        "table=0, priority=5, ct_zone=7,ct_mark=0x1/0xf,ip actions=ct(nat),ct_clear,output:1",
        "table=0, priority=5, ct_state=+est+trk,ct_label=0x1,ct_nw_src=198.18.0.2,ct_nw_proto=6,ct_tp_dst=80,ip actions=drop",
    ] {
        let fm = parse_flow(text, FlowModCommand::Add).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(format_rule(&fm.rule), text);
    }
    // `load` into ct_mark inside exec reads as a set_field.
    let fm = parse_flow(
        "ip,actions=ct(commit,exec(load:0x5->NXM_NX_CT_MARK[]))",
        FlowModCommand::Add,
    )
    .expect("load into ct_mark inside exec reads");
    assert!(format_rule(&fm.rule).ends_with("actions=ct(commit,exec(set_field:0x5->ct_mark))"));
    for (text, err) in [
        (
            "ip,actions=ct(force)",
            "\"force\" flag requires \"commit\" flag.",
        ),
        ("ip,actions=ct(commit,alg=ftp)", "helpers"),
        ("ip,actions=ct(commit,exec(output:1))", "ct(exec(...))"),
        (
            "ip,actions=ct(exec(set_field:1->ct_mark))",
            "only with \"commit\"",
        ),
        ("ip,actions=ct(commit,nat(src,dst))", "May only specify one"),
        ("ip,actions=ct(commit,zone=NXM_NX_REG0[0..7])", "16 bits"),
        ("ip,actions=ct(bogus)", "invalid argument to \"ct\" action"),
        ("ct_state=+trk+bogus,actions=drop", "bogus"),
        ("ip,actions=set_field:1->ct_mark", "ct_mark"),
        ("ct_nw_src=198.18.0.2,ip,actions=drop", "ct_state=+trk-inv"),
    ] {
        let e = parse_flow(text, FlowModCommand::Add)
            .expect_err(text)
            .to_string();
        assert!(e.contains(err), "{text}: {e}");
    }
}

/// Open vSwitch's stateful firewall tutorial, table by table.
fn firewall() -> Bridge {
    let mut b = Bridge::with_ports([1, 2]);
    add(&mut b, "table=0,priority=50,ct_state=-trk,tcp,in_port=1 actions=load:0x7->NXM_NX_REG0[],ct(table=1,zone=3)");
    add(
        &mut b,
        "table=0,priority=50,ct_state=-trk,tcp,in_port=2 actions=ct(table=1,zone=3)",
    );
    add(&mut b, "table=1,priority=50,ct_state=+trk+new,tcp,in_port=1,reg0=0x7 actions=ct(commit,zone=3),output:2");
    add(
        &mut b,
        "table=1,priority=50,ct_state=+trk+est,tcp,in_port=1 actions=output:2",
    );
    add(
        &mut b,
        "table=1,priority=50,ct_state=+trk+est,tcp,in_port=2 actions=output:1",
    );
    add(
        &mut b,
        "table=1,priority=50,ct_state=+trk+new,tcp,in_port=2 actions=drop",
    );
    b
}

fn recirc_of(actions: &[DpAction]) -> u32 {
    match actions.last() {
        Some(DpAction::Recirc(id)) => *id,
        a => panic!("no recirc at the end: {a:?}"),
    }
}

#[test]
fn ct_with_a_table_freezes_the_stage_and_the_next_one_thaws_it() {
    let b = firewall();
    let t = b.translate(&tcp(1, 22), Timestamp(0));
    assert_eq!(t.error, None);
    let spec = conntrack::CtSpec {
        zone: 3,
        ..Default::default()
    };
    assert_eq!(t.actions[0], DpAction::Ct(Box::new(spec)));
    let id = recirc_of(&t.actions);
    // Stage 1 read the state (untracked) and its stage.
    assert!(t.mask.is_exact(Field::CtState) || t.mask.field(Field::CtState) != 0);
    assert!(t.mask.is_exact(Field::RecircId));
    // Another packet of the same port shares the id: the frozen state is
    // the same (reg0=7, table 1).
    let t2 = b.translate(&tcp(1, 80), Timestamp(0));
    assert_eq!(recirc_of(&t2.actions), id);
    // Port 2 writes no register: another state, another id.
    let t3 = b.translate(&tcp(2, 22), Timestamp(0));
    assert_ne!(recirc_of(&t3.actions), id);
    assert_eq!(b.recirc.len(), 2);

    // Stage 2 of a new connection: reg0 came through the freeze.
    let mut k = tcp(1, 22);
    k.set_recirc_id(u64::from(id));
    k.set_ct_state(u64::from(conntrack::state::TRK | conntrack::state::NEW));
    k.set_ct_zone(3);
    let s2 = b.translate(&k, Timestamp(0));
    assert_eq!(s2.error, None);
    let commit = conntrack::CtSpec {
        zone: 3,
        commit: true,
        ..Default::default()
    };
    assert_eq!(
        s2.actions,
        vec![
            DpAction::Ct(Box::new(commit)),
            DpAction::Output(megaflow::PortNo(2))
        ]
    );
    // The register is a constant of the stage, not read from the packet.
    assert!(s2.mask.is_wildcard(Field::Reg0));
    assert!(s2.mask.is_exact(Field::RecircId));
    // Established: straight out.
    k.set_ct_state(u64::from(conntrack::state::TRK | conntrack::state::EST));
    let s2 = b.translate(&k, Timestamp(0));
    assert_eq!(s2.actions, vec![DpAction::Output(megaflow::PortNo(2))]);
    // An unknown id: dropped, said why.
    k.set_recirc_id(0x999);
    let bad = b.translate(&k, Timestamp(0));
    assert_eq!(bad.error, Some(XlateError::NoRecircContext(0x999)));
    assert!(bad.actions.is_empty());
}

#[test]
fn the_action_set_waits_for_the_next_stage() {
    let mut b = Bridge::with_ports([1, 2, 3]);
    add(
        &mut b,
        "table=0,ip actions=write_actions(output:3),goto_table:1",
    );
    add(&mut b, "table=1,ip actions=ct(table=2)");
    add(&mut b, "table=2,ip actions=drop");
    let t = b.translate(&tcp(1, 22), Timestamp(0));
    let id = recirc_of(&t.actions);
    assert_eq!(
        t.actions.len(),
        2,
        "the set did not run in stage 1: {:?}",
        t.actions
    );
    // Actions after the ct(): a fork; the set went with the tracked copy
    // (the same frozen state), not with the packet itself.
    add(
        &mut b,
        "table=1,ip,priority=40000 actions=ct(table=2),output:2",
    );
    let f = b.translate(&tcp(1, 22), Timestamp(0));
    assert!(
        matches!(
            &f.actions[..],
            [DpAction::Ct(_), DpAction::Recirc(r), DpAction::Output(megaflow::PortNo(2))] if *r == id
        ),
        "{:?}",
        f.actions
    );
    let mut k = tcp(1, 22);
    k.set_recirc_id(u64::from(id));
    let s2 = b.translate(&k, Timestamp(0));
    assert_eq!(s2.actions, vec![DpAction::Output(megaflow::PortNo(3))]);
}

#[test]
fn a_ct_zone_from_a_register_reads_the_register() {
    let mut b = Bridge::with_ports([1, 2]);
    add(&mut b, "table=0,ip,in_port=1 actions=load:0x2a->NXM_NX_REG6[0..15],ct(zone=NXM_NX_REG6[0..15]),output:2");
    let t = b.translate(&tcp(1, 22), Timestamp(0));
    let spec = conntrack::CtSpec {
        zone: 42,
        ..Default::default()
    };
    assert_eq!(
        t.actions,
        vec![
            DpAction::Ct(Box::new(spec)),
            DpAction::Output(megaflow::PortNo(2))
        ]
    );
}

#[test]
fn ct_flows_go_out_and_come_back_on_the_wire_unchanged() {
    use crate::channel::convert::{
        instructions_from_wire, instructions_to_wire, match_from_wire, match_to_wire,
    };
    let tlv = &crate::tlv::EMPTY;
    for text in [
        "table=0, priority=100, ct_state=-trk,ip actions=ct(table=1)",
        "table=1, priority=10, ct_state=+new+trk,tcp,tp_dst=22 actions=ct(commit,zone=5),output:2",
        "table=1, priority=10, ct_state=est|trk,ip actions=output:2",
        "table=0, priority=5, ip actions=ct(commit,zone=NXM_NX_REG0[0..15],exec(set_field:0x1->ct_mark,set_field:0x2/0xff->ct_label))",
        "table=0, priority=5, ip actions=ct(commit,table=3,zone=9,nat(src=198.19.0.1-198.19.0.9:1024-2048,persistent,random))",
        "table=0, priority=5, ip actions=ct(commit,force,nat(dst=[2001:db8::1]:80))",
        "table=0, priority=5, ip actions=ct(commit,nat(src=198.19.0.1))",
        "table=0, priority=5, ct_zone=7,ct_mark=0x1/0xf,ip actions=ct(nat),ct_clear,output:1",
        "table=0, priority=5, ct_state=+est+trk,ct_label=0x1,ct_nw_src=198.18.0.2,ct_nw_proto=6,ct_tp_dst=80,ip actions=drop",
    ] {
        let fm = parse_flow(text, FlowModCommand::Add).unwrap_or_else(|e| panic!("{text}: {e}"));
        let m = &fm.rule.matched;
        let back = match_from_wire(&match_to_wire(m, tlv), tlv);
        assert_eq!(back.as_ref(), Ok(m), "{text}");
        let ins = instructions_to_wire(&fm.rule.instructions, m);
        let back = instructions_from_wire(&ins, fm.rule.table, tlv).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(back, fm.rule.instructions, "{text}");
    }
}

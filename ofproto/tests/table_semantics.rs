//! Flow mod semantics of OpenFlow 1.3 (section 6.4) on `FlowTables`.

use megaflow::{Field, FlowKey, Match, PortNo, Timestamp};
use ofproto::rule::{FlowFlags, FlowMod, FlowModCommand, Instructions, OfAction, OfPort, RuleSpec};
use ofproto::table::{RemovedReason, RuleRef};
use ofproto::{Cookie, FlowModError, FlowTables, Priority, TableId, Wildcards};

fn secs(s: u64) -> Timestamp {
    Timestamp(s * 1_000_000_000)
}

fn ip_src(v: u32, len: u32) -> Match {
    let mut m = Match::catch_all();
    m.set_field_masked(Field::EthType, 0x0800, 0xffff);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    m.set_field_masked(Field::Ipv4Src, v.into(), mask.into());
    m
}

fn out(p: u32) -> Instructions {
    Instructions {
        apply: vec![OfAction::Output {
            port: OfPort::Port(PortNo(p)),
            max_len: 0,
        }],
        ..Default::default()
    }
}

fn spec(table: u8, prio: u16, m: Match, p: u32) -> RuleSpec {
    let mut s = RuleSpec::new(TableId(table), Priority(prio), m);
    s.instructions = out(p);
    s
}

fn fm(command: FlowModCommand, table: Option<u8>, rule: RuleSpec) -> FlowMod {
    FlowMod {
        command,
        table: table.map(TableId),
        rule,
        cookie_mask: 0,
        out_port: OfPort::Any,
        out_group: None,
    }
}

fn key(src: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_eth_type(0x0800);
    k.set_ipv4_src(src.into());
    k
}

fn lookup_port(t: &FlowTables, table: u8, k: &FlowKey) -> Option<OfPort> {
    let (_, r) = t.table(TableId(table))?.lookup(k, &mut Wildcards::new())?;
    match r.spec.instructions.apply.first() {
        Some(OfAction::Output { port, .. }) => Some(*port),
        _ => None,
    }
}

#[test]
fn add_replaces_identical_rule_and_keeps_counters_unless_reset() {
    let mut t = FlowTables::new();
    t.add(spec(0, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    let (id, r) = t.table(TableId(0)).unwrap().rules().next().unwrap();
    let rr = RuleRef {
        bridge: ofproto::BridgeNo::MAIN,
        table: TableId(0),
        id,
        uid: r.uid,
    };
    t.credit(rr, 5, 500, secs(2));
    let g = t.generation();
    let out = t
        .add(spec(0, 10, ip_src(0x0a00_0000, 8), 2), secs(3))
        .unwrap();
    assert_eq!((out.added, out.replaced), (0, 1));
    assert!(t.generation() > g);
    assert_eq!(t.len(), 1);
    let (_, r2) = t.table(TableId(0)).unwrap().rules().next().unwrap();
    assert_eq!((r2.packets, r2.bytes), (5, 500));
    assert_eq!(
        r2.uid, rr.uid,
        "a replacement that keeps its counters keeps its identity"
    );
    // Hits the datapath credits late still reach it.
    t.credit(rr, 1, 100, secs(3));
    let (_, r2) = t.table(TableId(0)).unwrap().rules().next().unwrap();
    assert_eq!((r2.packets, r2.bytes), (6, 600));
    assert_eq!(
        lookup_port(&t, 0, &key(0x0a01_0101)),
        Some(OfPort::Port(PortNo(2)))
    );

    let mut s = spec(0, 10, ip_src(0x0a00_0000, 8), 3);
    s.flags.reset_counts = true;
    t.add(s, secs(4)).unwrap();
    let (_, r3) = t.table(TableId(0)).unwrap().rules().next().unwrap();
    assert_eq!((r3.packets, r3.bytes), (0, 0));
    assert_ne!(r3.uid, rr.uid, "reset_counts makes a new incarnation");
    t.credit(rr, 1, 100, secs(5));
    let (_, r3) = t.table(TableId(0)).unwrap().rules().next().unwrap();
    assert_eq!(r3.packets, 0, "old hits do not reach the reset rule");
}

#[test]
fn check_overlap_refuses_and_changes_nothing() {
    let mut t = FlowTables::new();
    t.add(spec(0, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    let g = t.generation();
    let mut s = spec(0, 10, ip_src(0x0a01_0000, 16), 2);
    s.flags = FlowFlags {
        check_overlap: true,
        ..Default::default()
    };
    assert_eq!(t.add(s.clone(), secs(1)), Err(FlowModError::Overlap(10)));
    assert_eq!(t.generation(), g);
    assert_eq!(t.len(), 1);
    // Another priority does not overlap in the OpenFlow sense.
    s.priority = Priority(11);
    t.add(s, secs(1)).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(FlowModError::Overlap(10).of_error(), (5, 3));
}

#[test]
fn modify_changes_covered_rules_and_never_adds() {
    let mut t = FlowTables::new();
    t.add(spec(0, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    t.add(spec(0, 20, ip_src(0x0a01_0000, 16), 1), secs(1))
        .unwrap();
    t.add(spec(0, 30, ip_src(0x0b00_0000, 8), 1), secs(1))
        .unwrap();

    // Non-strict over 10/8 covers the /8 and the /16 below it.
    let out = t
        .apply(
            &fm(
                FlowModCommand::Modify,
                Some(0),
                spec(0, 0, ip_src(0x0a00_0000, 8), 7),
            ),
            secs(2),
        )
        .unwrap();
    assert_eq!(out.modified, 2);
    assert_eq!(
        lookup_port(&t, 0, &key(0x0a01_0001)),
        Some(OfPort::Port(PortNo(7)))
    );
    assert_eq!(
        lookup_port(&t, 0, &key(0x0b00_0001)),
        Some(OfPort::Port(PortNo(1)))
    );

    // Strict needs the same priority.
    let out = t
        .apply(
            &fm(
                FlowModCommand::ModifyStrict,
                Some(0),
                spec(0, 21, ip_src(0x0a01_0000, 16), 9),
            ),
            secs(2),
        )
        .unwrap();
    assert_eq!(out.modified, 0);
    let out = t
        .apply(
            &fm(
                FlowModCommand::ModifyStrict,
                Some(0),
                spec(0, 20, ip_src(0x0a01_0000, 16), 9),
            ),
            secs(2),
        )
        .unwrap();
    assert_eq!(out.modified, 1);
    // Modify of nothing adds nothing.
    let n = t.len();
    t.apply(
        &fm(
            FlowModCommand::Modify,
            Some(0),
            spec(0, 0, ip_src(0x0c00_0000, 8), 1),
        ),
        secs(2),
    )
    .unwrap();
    assert_eq!(t.len(), n);
}

#[test]
fn delete_filters_by_cookie_out_port_and_table() {
    let mut t = FlowTables::new();
    for (table, prio, cookie, port) in [
        (0, 1, 0x11, 1),
        (0, 2, 0x12, 2),
        (1, 3, 0x21, 1),
        (2, 4, 0x11, 3),
    ] {
        let mut s = spec(table, prio, ip_src(0x0a00_0000 + u32::from(prio), 32), port);
        s.cookie = Cookie(cookie);
        t.add(s, secs(1)).unwrap();
    }
    // Cookie 0x1?/0xf0 in all tables.
    let mut d = fm(
        FlowModCommand::Delete,
        None,
        RuleSpec::new(TableId(0), Priority(0), Match::catch_all()),
    );
    d.rule.cookie = Cookie(0x10);
    d.cookie_mask = 0xf0;
    let out = t.apply(&d, secs(2)).unwrap();
    let mut gone: Vec<u64> = out.removed.iter().map(|r| r.rule.spec.cookie.0).collect();
    gone.sort();
    assert_eq!(gone, vec![0x11, 0x11, 0x12]);
    assert!(out
        .removed
        .iter()
        .all(|r| r.reason == RemovedReason::Delete));
    assert_eq!(t.len(), 1);

    // out_port keeps rules that do not output there.
    let mut d = fm(
        FlowModCommand::Delete,
        Some(1),
        RuleSpec::new(TableId(1), Priority(0), Match::catch_all()),
    );
    d.out_port = OfPort::Port(PortNo(2));
    assert!(t.apply(&d, secs(2)).unwrap().removed.is_empty());
    d.out_port = OfPort::Port(PortNo(1));
    assert_eq!(t.apply(&d, secs(2)).unwrap().removed.len(), 1);
    assert!(t.is_empty());
}

#[test]
fn delete_strict_removes_exactly_one() {
    let mut t = FlowTables::new();
    t.add(spec(0, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    t.add(spec(0, 11, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    let out = t
        .apply(
            &fm(
                FlowModCommand::DeleteStrict,
                Some(0),
                spec(0, 11, ip_src(0x0a00_0000, 8), 0),
            ),
            secs(2),
        )
        .unwrap();
    assert_eq!(out.removed.len(), 1);
    assert_eq!(out.removed[0].rule.spec.priority, Priority(11));
    assert_eq!(t.len(), 1);
}

#[test]
fn goto_must_go_forward_and_tables_exist() {
    let mut t = FlowTables::new();
    let mut s = spec(3, 1, Match::catch_all(), 1);
    s.instructions.goto_table = Some(TableId(3));
    assert!(matches!(
        t.add(s.clone(), secs(1)),
        Err(FlowModError::BadGoto { .. })
    ));
    s.instructions.goto_table = Some(TableId(4));
    t.add(s, secs(1)).unwrap();
    let bad = spec(254, 1, Match::catch_all(), 1);
    assert_eq!(
        t.apply(&fm(FlowModCommand::Add, Some(254), bad), secs(1)),
        Err(FlowModError::BadTable(254))
    );
    let err = t
        .apply(
            &fm(FlowModCommand::Add, None, spec(0, 1, Match::catch_all(), 1)),
            secs(1),
        )
        .unwrap_err();
    assert_eq!(err, FlowModError::AddNeedsTable);
}

#[test]
fn table_full_is_an_error_not_an_eviction() {
    let mut t = FlowTables::with_limit(2);
    t.add(spec(0, 1, ip_src(1, 32), 1), secs(1)).unwrap();
    t.add(spec(0, 1, ip_src(2, 32), 1), secs(1)).unwrap();
    assert!(matches!(
        t.add(spec(0, 1, ip_src(3, 32), 1), secs(1)),
        Err(FlowModError::TableFull { limit: 2, .. })
    ));
    // Replacing an existing rule is still allowed when full.
    t.add(spec(0, 1, ip_src(2, 32), 5), secs(1)).unwrap();
    assert_eq!(t.len(), 2);
}

#[test]
fn idle_and_hard_timeouts_expire() {
    let mut t = FlowTables::new();
    let mut idle = spec(0, 1, ip_src(1, 32), 1);
    idle.idle_timeout = 10;
    let mut hard = spec(0, 2, ip_src(2, 32), 1);
    hard.hard_timeout = 30;
    t.add(idle, secs(0)).unwrap();
    t.add(hard, secs(0)).unwrap();
    // Hits keep the idle rule alive.
    let (id, r) = t
        .table(TableId(0))
        .unwrap()
        .rules()
        .find(|(_, r)| r.spec.idle_timeout == 10)
        .unwrap();
    let rr = RuleRef {
        bridge: ofproto::BridgeNo::MAIN,
        table: TableId(0),
        id,
        uid: r.uid,
    };
    t.credit(rr, 1, 64, secs(8));
    assert!(t.expire(secs(15)).is_empty());
    let gone = t.expire(secs(18));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].reason, RemovedReason::IdleTimeout);
    let gone = t.expire(secs(30));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].reason, RemovedReason::HardTimeout);
    assert!(t.is_empty());
}

#[test]
fn modify_without_a_table_changes_every_table() {
    let mut t = FlowTables::new();
    t.add(spec(0, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    t.add(spec(3, 10, ip_src(0x0a00_0000, 8), 1), secs(1))
        .unwrap();
    let mut fm = ofproto::text::parse_flow(
        "ip,nw_src=10.0.0.0/8,actions=output:7",
        FlowModCommand::Modify,
    )
    .unwrap();
    fm.table = None;
    let out = t.apply(&fm, secs(2)).unwrap();
    assert_eq!(out.modified, 2);
    for table in [0, 3] {
        let (_, r) = t.table(TableId(table)).unwrap().rules().next().unwrap();
        assert_eq!(
            r.spec.instructions.apply.first(),
            Some(&OfAction::Output {
                port: OfPort::Port(PortNo(7)),
                max_len: 0
            }),
            "table {table}"
        );
    }
}

#[test]
fn expiry_follows_timed_rules_through_replace_delete_and_modify() {
    // Expiry skips tables without a rule with a timeout (each table counts
    // them): the count must follow every way a rule comes and goes.
    let mut t = FlowTables::new();
    let timed = |m: Match, idle: u16| {
        let mut s = spec(0, 1, m, 1);
        s.idle_timeout = idle;
        s
    };
    // A timed rule replaced by an untimed one with the same match and
    // priority: nothing expires, however late.
    t.add(timed(ip_src(1, 32), 5), secs(0)).unwrap();
    t.add(spec(0, 1, ip_src(1, 32), 2), secs(1)).unwrap();
    assert!(t.expire(secs(100)).is_empty());
    assert_eq!(t.len(), 1);
    // And back: an untimed rule replaced by a timed one expires.
    t.add(timed(ip_src(1, 32), 5), secs(100)).unwrap();
    // Modify keeps the timeout (OpenFlow changes only the instructions).
    let m = fm(FlowModCommand::Modify, None, spec(0, 1, ip_src(1, 32), 3));
    t.apply(&m, secs(101)).unwrap();
    assert!(t.expire(secs(104)).is_empty());
    let gone = t.expire(secs(106));
    assert_eq!(gone.len(), 1, "{gone:?}");
    // Timed rules deleted: the table counts none, and new ones count again.
    t.add(timed(ip_src(2, 32), 5), secs(200)).unwrap();
    t.add(timed(ip_src(3, 32), 5), secs(200)).unwrap();
    let d = fm(
        FlowModCommand::Delete,
        None,
        spec(0, 0, Match::catch_all(), 1),
    );
    t.apply(&d, secs(201)).unwrap();
    assert!(t.is_empty());
    t.add(timed(ip_src(4, 32), 1), secs(300)).unwrap();
    assert_eq!(t.expire(secs(302)).len(), 1);
    assert!(t.is_empty());
}

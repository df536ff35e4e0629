//! The device dump of rules installed through the offload manager, after
//! packets went through the sim.

use std::sync::Arc;

use megaflow::actions::{SampleCookie, UserspaceReason};
use megaflow::frame::{FrameSpec, L4};
use megaflow::offload::{FlowOffload, MeterBand};
use megaflow::{extract, Actions, DpAction, Field, Mask, Match, MeterId, PortNo};

use crate::dr::dump::{DeviceDump, FieldDump, MatcherDump, RuleDump};
use crate::dr::DrBackend;
use crate::manager::{ManagerConfig, OffloadManager};
use crate::prm::PortTable;
use crate::sim::{Output, SimBackend};
use crate::Vport;

fn vf(n: u16) -> Vport {
    Vport::vf(n).expect("vf")
}

fn manager() -> OffloadManager<SimBackend> {
    let ports = (1..=4u32).fold(PortTable::new(), |t, p| t.with(PortNo(p), vf(p as u16)));
    OffloadManager::new(
        Arc::new(SimBackend::default()),
        ports,
        ManagerConfig::default(),
    )
    .expect("fdb layout")
}

fn frame(sport: u16) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(sport, 80)).build()
}

/// The 5-tuple megaflow of `frame(sport)` from port 1.
fn flow(sport: u16) -> Match {
    let key = extract(1, &frame(sport));
    Match::new(&key, &Mask::exact_fields(Mask::IPV4_5TUPLE))
}

/// `in_port=1, ip, nw_dst=198.18.0.0/24`.
fn subnet_flow() -> Match {
    let key = extract(1, &frame(1));
    let mask =
        Mask::exact_fields(&[Field::InPort, Field::EthType]).with(Field::Ipv4Dst, 0xffff_ff00);
    Match::new(&key, &mask)
}

fn send(mgr: &OffloadManager<SimBackend>, now_ns: u64, f: &[u8]) {
    let mut out = Output::new();
    mgr.backend()
        .process(mgr.domain(), now_ns, vf(1), f, &mut out);
}

fn field<'a>(fields: &'a [FieldDump], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.value.as_str())
}

/// The level-1 matchers (the manager's megaflow matchers).
fn level1(d: &DeviceDump) -> Vec<&MatcherDump> {
    d.matchers.iter().filter(|m| m.level == 1).collect()
}

#[test]
fn an_empty_device_dumps_nothing() {
    assert_eq!(
        SimBackend::default().dump().expect("dump"),
        DeviceDump::default()
    );
}

#[test]
fn the_layout_shows_domain_tables_and_the_root_jump() {
    let mgr = manager();
    let d = mgr.backend().dump().expect("dump");
    assert_eq!(d.domains.len(), 1);
    assert_eq!(d.domains[0].kind, "FDB");
    let levels: Vec<u32> = d.tables.iter().map(|t| t.level).collect();
    assert_eq!(levels, vec![0, 1, 2]);
    assert!(d.tables.iter().all(|t| t.domain_type == "FDB"));
    // The root: one catch-all matcher, one rule jumping to level 1.
    let root = &d.matchers[0];
    assert_eq!((root.level, root.priority, root.criteria), (0, 0, 0));
    assert!(root.mask.is_empty() && root.blocks.is_empty());
    let jump: Vec<&RuleDump> = d.rules_of(&root.id).collect();
    assert_eq!(jump.len(), 1);
    assert_eq!(jump[0].actions, vec!["dest_table(level 1)"]);
    assert!(jump[0].value.is_empty());
    assert_eq!(jump[0].counter, None);
    assert_eq!(d.matchers_of(&d.tables[0].id).count(), 1);
}

#[test]
fn a_rule_names_its_fields_values_actions_and_counts() {
    let mut mgr = manager();
    mgr.install(
        &flow(1000),
        &Actions::new(vec![DpAction::Output(PortNo(2))]),
    )
    .expect("offload");
    for i in 0..3 {
        send(&mgr, i, &frame(1000));
    }
    // A miss counts nowhere.
    send(&mgr, 4, &frame(1001));
    let d = mgr.backend().dump().expect("dump");
    let l1 = level1(&d);
    assert_eq!(l1.len(), 1);
    let m = l1[0];
    assert_eq!(m.blocks, vec!["outer", "misc2"]);
    assert_eq!(m.criteria, 0b1001);
    assert_eq!(field(&m.mask, "outer.ip_version"), Some("0x4"));
    assert_eq!(field(&m.mask, "outer.ip_protocol"), Some("0xff"));
    assert_eq!(field(&m.mask, "outer.dst_ip"), Some("255.255.255.255"));
    assert_eq!(field(&m.mask, "outer.tcp_sport"), Some("0xffff"));
    assert_eq!(field(&m.mask, "misc2.metadata_reg_c_0"), Some("0xffff0000"));
    assert_eq!(field(&m.mask, "outer.udp_sport"), None, "unmasked");
    let rules: Vec<&RuleDump> = d.rules_of(&m.id).collect();
    assert_eq!(rules.len(), 1);
    let r = rules[0];
    assert_eq!(r.table, m.table);
    assert_eq!(field(&r.value, "outer.src_ip"), Some("198.18.0.1"));
    assert_eq!(field(&r.value, "outer.dst_ip"), Some("198.18.0.2"));
    assert_eq!(field(&r.value, "outer.ip_protocol"), Some("6"));
    assert_eq!(field(&r.value, "outer.tcp_sport"), Some("1000"));
    assert_eq!(field(&r.value, "outer.tcp_dport"), Some("80"));
    // VF 1 is vport 2, its metadata tag in the upper half of reg_c_0.
    assert_eq!(field(&r.value, "misc2.metadata_reg_c_0"), Some("0x20000"));
    assert_eq!(r.value.len(), m.mask.len(), "one value per masked field");
    assert_eq!(r.actions.len(), 2, "{:?}", r.actions);
    assert!(r.actions[0].starts_with("counter(bulk "), "{:?}", r.actions);
    assert_eq!(r.actions[1], "dest_vport(3)");
    let c = r.counter.expect("counter");
    assert_eq!(c.packets, 3);
    assert_eq!(c.bytes, 3 * frame(1000).len() as u64);
}

#[test]
fn partial_masks_and_drops_read_as_addresses_and_names() {
    let mut mgr = manager();
    mgr.install(&subnet_flow(), &Actions::new(vec![]))
        .expect("drop offloaded");
    send(&mgr, 0, &frame(7));
    let d = mgr.backend().dump().expect("dump");
    let m = level1(&d)[0];
    assert_eq!(field(&m.mask, "outer.dst_ip"), Some("255.255.255.0"));
    assert_eq!(field(&m.mask, "outer.src_ip"), None);
    let r = d.rules_of(&m.id).next().expect("rule");
    assert_eq!(field(&r.value, "outer.dst_ip"), Some("198.18.0.0"));
    assert_eq!(r.actions.last().map(String::as_str), Some("drop"));
    assert_eq!(r.counter.map(|c| c.packets), Some(1));
    let shown: Vec<String> = r.value.iter().map(ToString::to_string).collect();
    assert!(
        shown.contains(&"outer.dst_ip=198.18.0.0".to_string()),
        "{shown:?}"
    );
}

#[test]
fn rewrites_meters_and_samplers_are_spelled_out() {
    let mut mgr = manager();
    let rewrite = Actions::new(vec![DpAction::SetTpDst(8080), DpAction::Output(PortNo(3))]);
    mgr.install(&flow(1), &rewrite).expect("rewrite");
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(100_000, 5_000)))
        .expect("meter");
    let metered = Actions::new(vec![
        DpAction::Meter(MeterId(1)),
        DpAction::Output(PortNo(2)),
    ]);
    let id = mgr.install(&flow(2), &metered).expect("metered");
    let tag = mgr.tag_of(id).expect("tag");
    let sampled = Actions::new(vec![
        DpAction::Sample {
            probability: u32::MAX / 4,
            actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample(
                SampleCookie::new(4),
            ))]),
        },
        DpAction::Output(PortNo(4)),
    ]);
    mgr.install(&flow(3), &sampled).expect("sampled");
    for sport in 1..=3 {
        send(&mgr, 1_000, &frame(sport));
    }
    let d = mgr.backend().dump().expect("dump");
    let all: Vec<String> = d.rules.iter().flat_map(|r| r.actions.clone()).collect();
    let has = |prefix: &str| all.iter().find(|a| a.starts_with(prefix));
    let modify = has("modify_header(set tcp_dport=0x1f90)").expect("rewrite");
    assert_eq!(modify, "modify_header(set tcp_dport=0x1f90)");
    let tag_set = format!("modify_header(set reg_c_1={tag:#x})");
    assert!(all.contains(&tag_set), "{tag_set} in {all:?}");
    let meter = has("flow_meter(").expect("meter");
    // The device's nearest representable rate and burst.
    let cir: f64 = meter
        .strip_prefix("flow_meter(bytes cir=")
        .and_then(|s| s.split("/s").next())
        .and_then(|s| s.parse().ok())
        .expect("cir");
    assert!((cir - 100_000.0).abs() < 1_000.0, "{meter}");
    assert!(meter.contains("color->reg_c_2"), "{meter}");
    assert!(meter.contains("next level 2"), "{meter}");
    let sampler = has("sampler(").expect("sampler");
    assert!(sampler.starts_with("sampler(1/4,"), "{sampler}");
    assert!(sampler.contains("next level 2"), "{sampler}");
    // Level 2: the flows' rules match reg_c_1 exactly, the red rule
    // reg_c_2 too, and drops.
    let l2: Vec<&MatcherDump> = d.matchers.iter().filter(|m| m.level == 2).collect();
    assert!(l2
        .iter()
        .all(|m| field(&m.mask, "misc2.metadata_reg_c_1") == Some("0xffffffff")));
    let red = l2
        .iter()
        .find(|m| field(&m.mask, "misc2.metadata_reg_c_2").is_some())
        .expect("red matcher");
    let red_rule = d.rules_of(&red.id).next().expect("red rule");
    assert_eq!(
        field(&red_rule.value, "misc2.metadata_reg_c_1"),
        Some(format!("{tag:#x}").as_str())
    );
    assert_eq!(red_rule.actions, vec!["drop"]);
    // Every packet was counted once at level 1.
    let counted: u64 = d
        .rules
        .iter()
        .filter(|r| level1(&d).iter().any(|m| m.id == r.matcher))
        .filter_map(|r| r.counter)
        .map(|c| c.packets)
        .sum();
    assert_eq!(counted, 3);
    let l1_rules = d
        .rules
        .iter()
        .filter(|r| level1(&d).iter().any(|m| m.id == r.matcher))
        .count();
    assert_eq!(l1_rules, 3);
    assert_eq!(
        d.tables.iter().map(|t| t.rules).sum::<usize>(),
        d.rules.len()
    );
}

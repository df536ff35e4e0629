use offload::dr::{ActionSpec, DomainType, DrBackend};
use offload::prm::{set, PrmField, ENCODED_LEN};
use offload::sim::SimBackend;
use offload::Vport;

use super::*;
use crate::dr_dump::{DevDomain, DevMatcher, DevRule, DevTable};

/// The sim with an FDB root jumping to level 1, where one rule counts in
/// counter 5 of a bulk and sends to VF 2: the model's dump.
fn model() -> DeviceDump {
    let sim = SimBackend::default();
    let d = sim.domain_create(DomainType::Fdb).unwrap();
    let root = sim.table_create(d, 0).unwrap();
    let t1 = sim.table_create(d, 1).unwrap();
    let rm = sim.matcher_create(root, 0, 0, &[]).unwrap();
    let jump = sim.action_create(d, ActionSpec::DestTable(t1)).unwrap();
    sim.rule_create(rm, &[], &[jump]).unwrap();
    let mut mask = vec![0u8; ENCODED_LEN];
    set(&mut mask, PrmField::OuterDmac, 0xffff_ffff_ffff).unwrap();
    let mut value = vec![0u8; ENCODED_LEN];
    set(&mut value, PrmField::OuterDmac, 0x0200_0000_0001).unwrap();
    let m = sim.matcher_create(t1, 1, 1, &mask).unwrap();
    let bulk = sim.counter_bulk_alloc(3).unwrap();
    let ctr = sim
        .action_create(d, ActionSpec::FlowCounter { bulk, offset: 5 })
        .unwrap();
    let out = sim
        .action_create(d, ActionSpec::DestVport(Vport::vf(2).unwrap()))
        .unwrap();
    sim.rule_create(m, &value, &[ctr, out]).unwrap();
    sim.dump().unwrap()
}

/// What the device would list for the same objects.
fn device() -> DevDump {
    DevDump {
        domains: vec![DevDomain { id: 0xd, kind: 2 }],
        tables: vec![
            DevTable {
                id: 0x10,
                domain: 0xd,
                kind: 4,
                level: 0,
            },
            DevTable {
                id: 0x11,
                domain: 0xd,
                kind: 4,
                level: 1,
            },
        ],
        matchers: vec![
            DevMatcher {
                id: 0x20,
                table: 0x10,
                priority: 0,
            },
            DevMatcher {
                id: 0x21,
                table: 0x11,
                priority: 1,
            },
        ],
        rules: vec![
            DevRule {
                id: 0x30,
                matcher: 0x20,
                actions: vec![DevAction::Table(0x1c)],
            },
            DevRule {
                id: 0x31,
                matcher: 0x21,
                actions: vec![DevAction::Counter(0x805), DevAction::Vport(3)],
            },
        ],
    }
}

fn counter(_slot: u32, offset: u32) -> Option<u32> {
    Some(0x800 + offset)
}

#[test]
fn a_device_that_holds_what_the_model_says_has_no_differences() {
    assert_eq!(
        differences(&model(), &device(), counter),
        Vec::<String>::new()
    );
}

#[test]
fn every_kind_of_difference_is_a_line_naming_the_object() {
    let model = model();
    // The offloaded rule missing from the device.
    let mut d = device();
    d.rules.pop();
    let diff = differences(&model, &d, counter);
    assert!(
        diff.iter()
            .any(|l| l.contains("no rule in the device counts in counter 0x805")),
        "{diff:?}"
    );
    assert!(diff.iter().any(|l| l.starts_with("matchers")), "{diff:?}");
    // Another vport.
    let mut d = device();
    d.rules[1].actions[1] = DevAction::Vport(7);
    let diff = differences(&model, &d, counter);
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert!(
        diff[0].contains("Some(3)") && diff[0].contains("Some(7)"),
        "{diff:?}"
    );
    // A table the model does not have.
    let mut d = device();
    d.tables.push(DevTable {
        id: 0x12,
        domain: 0xd,
        kind: 4,
        level: 2,
    });
    let diff = differences(&model, &d, counter);
    assert_eq!(
        diff,
        ["tables (domain, level) (\"FDB\", 2): the model has 0, the device 1"]
    );
    // An empty device against a model with objects, and the reverse.
    let none = DevDump::default();
    assert!(!differences(&model, &none, counter).is_empty());
    assert!(!differences(&DeviceDump::default(), &device(), counter).is_empty());
    assert!(differences(&DeviceDump::default(), &none, counter).is_empty());
}

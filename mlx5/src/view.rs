//! The model held to the device: what the sim model says is programmed
//! ([`DeviceDump`]) against what the device's own dump lists
//! ([`DevDump`]), object by object:
//!
//! - the tables, by domain type and level;
//! - the matchers, by domain type, level and priority, with their rule
//!   counts;
//! - each rule that counts (every offloaded megaflow has its own flow
//!   counter) paired with the device's rule that counts in the same
//!   counter, and their action kinds in order, with the vport of a
//!   dest_vport.
//!
//! Rules without a counter (the root's jump, level-2 rules) are held to
//! the device through their matcher's rule count. Every difference is a
//! line naming the object; none means the device holds what the model
//! says.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};

use offload::dr::DeviceDump;

use crate::dr_dump::{DevAction, DevDump};

/// A domain type as the model names it, from the device's number.
fn domain_name(kind: u32) -> &'static str {
    match kind {
        0 => "NIC_RX",
        1 => "NIC_TX",
        2 => "FDB",
        _ => "?",
    }
}

/// The kind of a model action text (`dest_vport(4)` → `dest_vport`), in
/// the device dump's names, and the vport of a dest_vport.
fn model_kind(text: &str) -> (&str, Option<u32>) {
    let (name, arg) = match text.split_once('(') {
        Some((n, rest)) => (n, rest.trim_end_matches(')')),
        None => (text, ""),
    };
    match name {
        "counter" => ("flow_counter", None),
        "sampler" => ("flow_sampler", None),
        "dest_vport" => ("dest_vport", arg.parse().ok()),
        other => (other, None),
    }
}

fn device_kind(a: DevAction) -> (&'static str, Option<u32>) {
    match a {
        DevAction::Vport(v) => ("dest_vport", Some(v)),
        other => (other.name(), None),
    }
}

/// Counts of each key, for comparing lists whose order may differ.
fn tally<K: Ord>(keys: impl IntoIterator<Item = K>) -> BTreeMap<K, usize> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// Lines for every key whose count differs.
fn differ<K: Ord + std::fmt::Debug>(
    what: &str,
    model: &BTreeMap<K, usize>,
    device: &BTreeMap<K, usize>,
    out: &mut Vec<String>,
) {
    for k in model.keys().chain(device.keys()) {
        let (m, d) = (
            model.get(k).copied().unwrap_or(0),
            device.get(k).copied().unwrap_or(0),
        );
        if m != d {
            let line = format!("{what} {k:?}: the model has {m}, the device {d}");
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
}

/// Every difference between the model's dump and the device's;
/// `counter_id` gives the device's id of a model counter (bulk slot,
/// offset), `None` for a bulk the backend does not hold.
pub fn differences(
    model: &DeviceDump,
    device: &DevDump,
    counter_id: impl Fn(u32, u32) -> Option<u32>,
) -> Vec<String> {
    let mut out = Vec::new();
    let dom_kind: HashMap<u64, u32> = device.domains.iter().map(|d| (d.id, d.kind)).collect();
    let dev_table: HashMap<u64, (&str, u32)> = device
        .tables
        .iter()
        .map(|t| {
            let kind = dom_kind.get(&t.domain).copied().unwrap_or(u32::MAX);
            (t.id, (domain_name(kind), t.level))
        })
        .collect();
    differ(
        "domains",
        &tally(model.domains.iter().map(|d| d.kind.as_str())),
        &tally(device.domains.iter().map(|d| domain_name(d.kind))),
        &mut out,
    );
    differ(
        "tables (domain, level)",
        &tally(
            model
                .tables
                .iter()
                .map(|t| (t.domain_type.as_str(), t.level)),
        ),
        &tally(dev_table.values().copied()),
        &mut out,
    );
    let model_table: HashMap<&str, &str> = model
        .tables
        .iter()
        .map(|t| (t.id.as_str(), t.domain_type.as_str()))
        .collect();
    differ(
        "matchers (domain, level, priority, rules)",
        &tally(model.matchers.iter().map(|m| {
            let kind = model_table.get(m.table.as_str()).copied().unwrap_or("?");
            (kind, m.level, u32::from(m.priority), m.rules)
        })),
        &tally(device.matchers.iter().map(|m| {
            let (kind, level) = dev_table.get(&m.table).copied().unwrap_or(("?", u32::MAX));
            (kind, level, m.priority, device.rules_of(m.id).count())
        })),
        &mut out,
    );
    let by_counter: HashMap<u32, &crate::dr_dump::DevRule> = device
        .rules
        .iter()
        .filter_map(|r| {
            r.actions.iter().find_map(|a| match a {
                DevAction::Counter(id) => Some((*id, r)),
                _ => None,
            })
        })
        .collect();
    for r in &model.rules {
        let Some((slot, offset)) = r.counter_at else {
            continue;
        };
        let Some(id) = counter_id(slot, offset) else {
            out.push(format!(
                "rule {}: its counter's bulk is not the backend's",
                r.id
            ));
            continue;
        };
        let Some(dev) = by_counter.get(&id) else {
            out.push(format!(
                "rule {}: no rule in the device counts in counter {id:#x}",
                r.id
            ));
            continue;
        };
        let want: Vec<(&str, Option<u32>)> = r.actions.iter().map(|a| model_kind(a)).collect();
        let got: Vec<(&str, Option<u32>)> = dev.actions.iter().map(|&a| device_kind(a)).collect();
        if want != got {
            out.push(format!(
                "rule {}: the model's actions are {want:?}, the device's {got:?}",
                r.id
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "tests/view.rs"]
mod tests;

//! The sim's side of the device dump ([`crate::dr::dump`]): its objects
//! walked in lookup order, a rule's value read back from the matcher's
//! index, where the device keeps it.
//!
//! The dump is taken under the configuration lock held shared, so it is a
//! consistent picture; counters are read as the packet path left them.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::dr::dump::{
    fields, modify_text, CounterDump, DeviceDump, DomainDump, MatcherDump, RestoreRuleDump,
    RuleDump, TableDump,
};
use crate::dr::meter::MeterMode;
use crate::dr::{DomainId, MatcherId, RestoreRuleId, RuleId, TableId};
use crate::prm::{Block, ENCODED_LEN};

use super::state::{Body, State};

fn level_of(st: &State, table: u32) -> String {
    match st.tables.at(table) {
        Some(t) => format!("level {}", t.level),
        None => format!("t{table} (gone)"),
    }
}

/// An action with its parameters.
fn action_text(st: &State, a: u32) -> String {
    let Some(act) = st.actions.at(a) else {
        return format!("a{a} (gone)");
    };
    match &act.body {
        Body::Drop => "drop".to_string(),
        Body::DefaultMiss => "default_miss".to_string(),
        Body::Vport(v) => format!("dest_vport({})", v.0),
        Body::Table(t) => format!("dest_table({})", level_of(st, *t)),
        Body::Array(list) => {
            let dests: Vec<String> = list
                .iter()
                .map(|&(r, d)| match r {
                    Some(r) => format!("{} {}", action_text(st, r), action_text(st, d)),
                    None => action_text(st, d),
                })
                .collect();
            format!("dest_array({})", dests.join(", "))
        }
        Body::Counter { bulk, offset } => format!("counter(bulk {bulk} + {offset})"),
        Body::Meter(m) => {
            let p = &m.params;
            let unit = match p.mode {
                MeterMode::Bytes => "bytes",
                MeterMode::Packets => "packets",
            };
            format!(
                "flow_meter({unit} cir={:.0}/s cbs={} eir={:.0}/s ebs={}, color->reg_c_{}, next {}{})",
                p.cir_per_sec(),
                p.cbs(),
                p.eir_per_sec(),
                p.ebs(),
                m.reg,
                level_of(st, m.next),
                if m.active { "" } else { ", inactive" },
            )
        }
        Body::Sampler(s) => {
            let sample: Vec<String> = s.sample.iter().map(|&d| action_text(st, d)).collect();
            let set = s
                .set
                .as_ref()
                .map(|op| format!(", {}", modify_text(op)))
                .unwrap_or_default();
            format!(
                "sampler(1/{}, sample: {}{set}, next {})",
                s.ratio,
                sample.join(" "),
                level_of(st, s.next)
            )
        }
        Body::PushVlan(h) => format!("push_vlan(tpid={:#06x} tci={:#06x})", h >> 16, h & 0xffff),
        Body::PopVlan => "pop_vlan".to_string(),
        Body::Modify(ops) => {
            let ops: Vec<String> = ops.iter().map(modify_text).collect();
            format!("modify_header({})", ops.join(", "))
        }
        Body::Decap => "packet_reformat(l2_tunnel_to_l2)".to_string(),
        Body::Encap(data) => format!("packet_reformat(l2_to_l2_tunnel, {} bytes)", data.len()),
    }
}

/// The bulk slot and offset of the first flow counter among a rule's
/// actions.
fn counter_at(st: &State, actions: &[u32]) -> Option<(u32, u32)> {
    actions
        .iter()
        .find_map(|&a| match st.actions.at(a).map(|x| &x.body) {
            Some(Body::Counter { bulk, offset }) => Some((*bulk, *offset)),
            _ => None,
        })
}

/// The first flow counter among a rule's actions, read now.
fn counter_of(st: &State, actions: &[u32]) -> Option<CounterDump> {
    let (bulk, offset) = counter_at(st, actions)?;
    let cell = st.bulks.at(bulk)?.cells.get(offset as usize)?;
    Some(CounterDump {
        packets: cell.packets.load(Ordering::Relaxed),
        bytes: cell.bytes.load(Ordering::Relaxed),
    })
}

fn domain_id(index: u32, generation: u32) -> String {
    DomainId { index, generation }.to_string()
}

fn table_id(index: u32, generation: u32) -> String {
    TableId { index, generation }.to_string()
}

fn matcher_id(index: u32, generation: u32) -> String {
    MatcherId { index, generation }.to_string()
}

/// The dump of a device's state.
pub(crate) fn dump(st: &State) -> DeviceDump {
    let mut out = DeviceDump::default();
    for (i, g, d) in st.domains.iter() {
        out.domains.push(DomainDump {
            id: domain_id(i, g),
            kind: d.ty.name().to_string(),
            allow_duplicates: d.allow_duplicates,
        });
    }
    let mut tables: Vec<_> = st.tables.iter().collect();
    tables.sort_by_key(|(i, _, t)| (t.domain, t.level, *i));
    // Rules by matcher slot, in id order (the slab iterates by index).
    let mut rules: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for (i, g, r) in st.rules.iter() {
        rules.entry(r.matcher).or_default().push((i, g));
    }
    let gens: BTreeMap<u32, u32> = st.matchers.iter().map(|(i, g, _)| (i, g)).collect();
    let domains: BTreeMap<u32, (u32, &super::state::Domain)> =
        st.domains.iter().map(|(i, g, d)| (i, (g, d))).collect();
    for (ti, tg, t) in tables {
        let dom = domains.get(&t.domain).map(|&(g, d)| (t.domain, g, d));
        let tid = table_id(ti, tg);
        out.tables.push(TableDump {
            id: tid.clone(),
            domain: dom.map_or_else(|| format!("d{}", t.domain), |(i, g, _)| domain_id(i, g)),
            domain_type: dom.map_or("?", |(_, _, d)| d.ty.name()).to_string(),
            level: t.level,
            matchers: t.matchers.len(),
            rules: t.rules,
        });
        // Root matchers: the domain's lookup order, those of this table.
        let order: Vec<u32> = match (t.level, dom) {
            (0, Some((_, _, d))) => d
                .root
                .iter()
                .copied()
                .filter(|m| t.matchers.contains(m))
                .collect(),
            _ => t.matchers.clone(),
        };
        for mi in order {
            let (Some(m), Some(&mg)) = (st.matchers.at(mi), gens.get(&mi)) else {
                continue;
            };
            let mid = matcher_id(mi, mg);
            let mut mask = [0u8; ENCODED_LEN];
            let mb = m.mask.mask();
            mask[..mb.len()].copy_from_slice(mb);
            out.matchers.push(MatcherDump {
                id: mid.clone(),
                table: tid.clone(),
                level: t.level,
                priority: m.priority,
                criteria: m.criteria,
                blocks: Block::ALL
                    .iter()
                    .filter(|b| m.criteria & b.criteria_bit() != 0)
                    .map(|b| b.name().to_string())
                    .collect(),
                mask: fields(&mask, &mask, true, m.ip_version),
                rules: m.rules,
            });
            for &(ri, rg) in rules.get(&mi).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(r) = st.rules.at(ri) else {
                    continue;
                };
                let mut value = [0u8; ENCODED_LEN];
                for (chunk, w) in value.chunks_mut(8).zip(m.index.words_of(r.slot).iter()) {
                    chunk.copy_from_slice(&w.to_ne_bytes());
                }
                out.rules.push(RuleDump {
                    id: RuleId {
                        index: ri,
                        generation: rg,
                    }
                    .to_string(),
                    matcher: mid.clone(),
                    table: tid.clone(),
                    value: fields(&mask, &value, false, m.ip_version),
                    actions: r.actions.iter().map(|&a| action_text(st, a)).collect(),
                    counter: counter_of(st, &r.actions),
                    counter_at: counter_at(st, &r.actions),
                });
            }
        }
    }
    let mut restore: Vec<_> = st.restore_rules.iter().collect();
    restore.sort_by_key(|&(_, _, &tag)| tag);
    out.restore_rules = restore
        .into_iter()
        .map(|(index, generation, &tag)| RestoreRuleDump {
            id: RestoreRuleId { index, generation }.to_string(),
            tag,
        })
        .collect();
    out
}

#[cfg(test)]
#[path = "tests/dump.rs"]
mod tests;

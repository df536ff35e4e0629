//! What is programmed in the simulated device, as `eswitchctl dump-rules`
//! shows it: domains, tables, matchers (priority, criteria, the mask as
//! named fields), rules (the value as the same named fields, the action
//! list, the counter's packets and bytes).
//!
//! Field names and bit positions come from the layout table
//! ([`FIELDS`](crate::prm::FIELDS)); a rule's value is read back from the
//! matcher's index, where the device keeps it. Only fields whose mask is
//! non-zero are listed. Values are written as the header types read best:
//! MAC and IP addresses as addresses (IPv4 when the matcher's mask has
//! `ip_version` 4), ports, protocols and the source vport in decimal, the
//! rest (masks, registers) in hex.
//!
//! The dump is taken under the configuration lock held shared, so it is a
//! consistent picture; counters are read as the packet path left them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::dr::meter::MeterMode;
use crate::dr::modify::ModifyOp;
use crate::dr::{DomainId, MatcherId, RuleId, TableId};
use crate::prm::{get, Block, PrmField, ENCODED_LEN, FIELDS};

use super::state::{Body, State};

/// Everything programmed in the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceDump {
    pub domains: Vec<DomainDump>,
    /// By domain, then level, then id.
    pub tables: Vec<TableDump>,
    /// By table (in [`tables`](Self::tables) order), then in lookup order
    /// (priority, then creation).
    pub matchers: Vec<MatcherDump>,
    /// By matcher (in [`matchers`](Self::matchers) order), then id.
    pub rules: Vec<RuleDump>,
}

/// One domain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DomainDump {
    /// `d0`.
    pub id: String,
    /// `FDB`, `NIC_RX`, `NIC_TX`.
    #[serde(rename = "type")]
    pub kind: String,
    pub allow_duplicates: bool,
}

/// One table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableDump {
    /// `t1`.
    pub id: String,
    pub domain: String,
    /// The domain's type (`FDB`).
    pub domain_type: String,
    /// 0 is the root table.
    pub level: u32,
    pub matchers: usize,
    pub rules: usize,
}

/// One matcher.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MatcherDump {
    /// `m3`.
    pub id: String,
    pub table: String,
    /// The table's level.
    pub level: u32,
    pub priority: u16,
    /// `match_criteria_enable`.
    pub criteria: u8,
    /// The blocks `criteria` enables (`outer`, `misc`, `misc2`).
    pub blocks: Vec<String>,
    /// The mask, field by field.
    pub mask: Vec<FieldDump>,
    pub rules: usize,
}

/// One named field of a mask or value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldDump {
    /// `outer.dst_ip`, `misc.source_port`, `misc2.metadata_reg_c_1`.
    pub name: String,
    /// `255.255.255.0`, `0xffff`, `53`.
    pub value: String,
}

impl fmt::Display for FieldDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.value)
    }
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleDump {
    /// `r7`.
    pub id: String,
    pub matcher: String,
    pub table: String,
    /// The value of every field the matcher's mask covers.
    pub value: Vec<FieldDump>,
    /// The actions in order: `counter(bulk 0 + 3)`, `dest_vport(2)`,
    /// `modify_header(set reg_c_1=0x5)`, `dest_table(level 2)`, ...
    pub actions: Vec<String>,
    /// The rule's flow counter, if it has one.
    pub counter: Option<CounterDump>,
}

/// A flow counter's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterDump {
    pub packets: u64,
    pub bytes: u64,
}

impl DeviceDump {
    /// The rules of a matcher (by its id, `m3`).
    pub fn rules_of<'a>(&'a self, matcher: &'a str) -> impl Iterator<Item = &'a RuleDump> + 'a {
        self.rules.iter().filter(move |r| r.matcher == matcher)
    }

    /// The matchers of a table (by its id, `t1`).
    pub fn matchers_of<'a>(&'a self, table: &'a str) -> impl Iterator<Item = &'a MatcherDump> + 'a {
        self.matchers.iter().filter(move |m| m.table == table)
    }
}

/// Fields whose values read best in decimal.
fn decimal(f: PrmField) -> bool {
    use PrmField as F;
    matches!(
        f,
        F::OuterTcpSport
            | F::OuterTcpDport
            | F::OuterUdpSport
            | F::OuterUdpDport
            | F::OuterIpProtocol
            | F::OuterIpVersion
            | F::OuterIpTtlHoplimit
            | F::OuterFirstVid
            | F::OuterFirstPrio
            | F::OuterIpDscp
            | F::InnerTcpSport
            | F::InnerTcpDport
            | F::InnerUdpSport
            | F::InnerUdpDport
            | F::InnerIpProtocol
            | F::InnerIpVersion
            | F::InnerIpTtlHoplimit
            | F::InnerFirstVid
            | F::InnerFirstPrio
            | F::InnerIpDscp
            | F::MiscSourcePort
            | F::MiscOuterSecondVid
            | F::MiscOuterSecondPrio
    )
}

fn is_mac(f: PrmField) -> bool {
    use PrmField as F;
    matches!(f, F::OuterSmac | F::OuterDmac | F::InnerSmac | F::InnerDmac)
}

fn is_ip(f: PrmField) -> bool {
    use PrmField as F;
    matches!(
        f,
        F::OuterSrcIp | F::OuterDstIp | F::InnerSrcIp | F::InnerDstIp
    )
}

fn mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A field's mask (`mask` true) or value as text; `ip_version` is the
/// matcher's (4 or 6 makes addresses addresses).
fn format_field(f: PrmField, v: u128, mask: bool, ip_version: u8) -> String {
    if is_mac(f) {
        return mac(v);
    }
    if is_ip(f) {
        match ip_version {
            4 if v >> 32 == 0 => return Ipv4Addr::from(v as u32).to_string(),
            6 => return Ipv6Addr::from(v).to_string(),
            _ => {}
        }
    }
    if decimal(f) && !mask {
        v.to_string()
    } else {
        format!("{v:#x}")
    }
}

/// Every non-zero masked field of `buf`, named (mask or value).
fn fields(mask: &[u8], buf: &[u8], is_mask: bool, ip_version: u8) -> Vec<FieldDump> {
    FIELDS
        .iter()
        .filter(|d| get(mask, d.field).unwrap_or(0) != 0)
        .map(|d| FieldDump {
            name: d.name.to_string(),
            value: format_field(d.field, get(buf, d.field).unwrap_or(0), is_mask, ip_version),
        })
        .collect()
}

/// A modify-header op as `set reg_c_1=0x5`.
fn modify_text(op: &ModifyOp) -> String {
    match *op {
        ModifyOp::Set {
            field,
            offset,
            length,
            data,
        } if offset == 0 && length == field.width() => format!("set {field}={data:#x}"),
        ModifyOp::Set {
            field,
            offset,
            length,
            data,
        } => format!("set {field}[{offset}+{length}]={data:#x}"),
        ModifyOp::Add { field, data } => format!("add {field}+={data:#x}"),
        ModifyOp::Copy {
            src,
            src_offset,
            length,
            dst,
            dst_offset,
        } => format!("copy {src}[{src_offset}+{length}]->{dst}[{dst_offset}+{length}]"),
    }
}

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
            let dests: Vec<String> = list.iter().map(|&d| action_text(st, d)).collect();
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
    }
}

/// The first flow counter among a rule's actions, read now.
fn counter_of(st: &State, actions: &[u32]) -> Option<CounterDump> {
    actions
        .iter()
        .find_map(|&a| match st.actions.at(a).map(|x| &x.body) {
            Some(Body::Counter { bulk, offset }) => {
                let cell = st.bulks.at(*bulk)?.cells.get(*offset as usize)?;
                Some(CounterDump {
                    packets: cell.packets.load(Ordering::Relaxed),
                    bytes: cell.bytes.load(Ordering::Relaxed),
                })
            }
            _ => None,
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
                });
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "tests/dump.rs"]
mod tests;

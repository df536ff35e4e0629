//! The device's own view: what `mlx5dv_dump_dr_domain` writes, parsed.
//!
//! The dump is CSV, one record per line, its first field the record type
//! (rdma-core `providers/mlx5/dr_dbg.c`, `enum dr_dump_rec_type`), its
//! object ids the library's pointers in hex. What is read here:
//!
//! | type | record | fields after the type |
//! |---|---|---|
//! | 3000 | domain | id, type, gvmi, sw steering, version, device, ... |
//! | 3100 | table | id, domain id, table type, level |
//! | 3200 | matcher | id, table id, priority |
//! | 3300 | rule | id, matcher id |
//! | 3400–3424 | an action of a rule | action id, rule id, the action's own fields |
//!
//! Every other record (domain capabilities, send rings, the RX/TX halves of
//! tables, matchers and rules, matcher masks and builders) is skipped, as
//! are record types this parser does not know (later rdma-core versions
//! add some). A record it knows with a field missing or not a number is an
//! error naming the line.
//!
//! What the dump cannot give back is a rule's match value: it is written
//! as the device's steering entries. [`crate::Mlx5Backend`] pairs the
//! device's rules with the model's by their counters (each offloaded rule
//! has its own) and takes the decoded values from the model.

#![forbid(unsafe_code)]

use thiserror::Error;

/// A dump line the parser could not read.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("device dump line {line}: {reason}")]
pub struct DumpError {
    pub line: usize,
    pub reason: String,
}

/// One action of a rule, by its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DevAction {
    Drop,
    /// To a table: its DEVX object id.
    Table(u32),
    Qp(u32),
    Tir,
    /// A flow counter: its id (the bulk's object id plus the offset).
    Counter(u32),
    Tag(u32),
    /// To a vport: its number.
    Vport(u32),
    DecapL2,
    DecapL3,
    EncapL2,
    EncapL3,
    ModifyHeader,
    Meter,
    Sampler,
    DestArray,
    /// The VLAN header as the dump prints it (`TPID << 16 | TCI`, host
    /// order).
    PushVlan(u32),
    PopVlan,
    Aso,
    Miss,
    RootTable,
    /// A record type this parser does not know.
    Other(u32),
}

impl DevAction {
    /// The action kind's name as `dump-rules` writes the model's.
    pub fn name(self) -> &'static str {
        match self {
            DevAction::Drop => "drop",
            DevAction::Table(_) | DevAction::RootTable => "dest_table",
            DevAction::Qp(_) | DevAction::Tir => "dest_qp",
            DevAction::Counter(_) => "flow_counter",
            DevAction::Tag(_) => "tag",
            DevAction::Vport(_) => "dest_vport",
            DevAction::DecapL2 | DevAction::DecapL3 => "decap",
            DevAction::EncapL2 | DevAction::EncapL3 => "encap",
            DevAction::ModifyHeader => "modify_header",
            DevAction::Meter => "flow_meter",
            DevAction::Sampler => "flow_sampler",
            DevAction::DestArray => "dest_array",
            DevAction::PushVlan(_) => "push_vlan",
            DevAction::PopVlan => "pop_vlan",
            DevAction::Aso => "aso",
            DevAction::Miss => "default_miss",
            DevAction::Other(_) => "unknown",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevDomain {
    pub id: u64,
    /// `enum mlx5dv_dr_domain_type`: 0 NIC_RX, 1 NIC_TX, 2 FDB.
    pub kind: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevTable {
    pub id: u64,
    pub domain: u64,
    pub kind: u32,
    pub level: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevMatcher {
    pub id: u64,
    pub table: u64,
    pub priority: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevRule {
    pub id: u64,
    pub matcher: u64,
    /// In the rule's order.
    pub actions: Vec<DevAction>,
}

/// A parsed dump: the objects in the order the device listed them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevDump {
    pub domains: Vec<DevDomain>,
    pub tables: Vec<DevTable>,
    pub matchers: Vec<DevMatcher>,
    pub rules: Vec<DevRule>,
}

impl DevDump {
    /// The matchers of table `id`.
    pub fn matchers_of(&self, id: u64) -> impl Iterator<Item = &DevMatcher> + '_ {
        self.matchers.iter().filter(move |m| m.table == id)
    }

    /// The rules of matcher `id`.
    pub fn rules_of(&self, id: u64) -> impl Iterator<Item = &DevRule> + '_ {
        self.rules.iter().filter(move |r| r.matcher == id)
    }

    /// The dump of another domain added to this one.
    pub fn extend(&mut self, other: DevDump) {
        self.domains.extend(other.domains);
        self.tables.extend(other.tables);
        self.matchers.extend(other.matchers);
        self.rules.extend(other.rules);
    }
}

/// A hex field (`0x...`, or bare hex as the domain's gvmi is written).
fn hex(s: &str) -> Option<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(t, 16).ok()
}

fn dec(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

/// Parses a dump.
pub fn parse(text: &str) -> Result<DevDump, DumpError> {
    let mut d = DevDump::default();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let err = |reason: &str| DumpError {
            line: line_no,
            reason: format!("{reason}: {line:?}"),
        };
        let Some(ty) = dec(f[0]) else {
            return Err(err("the record type is not a number"));
        };
        let field = |n: usize, parse: fn(&str) -> Option<u64>, what: &str| {
            f.get(n)
                .and_then(|s| parse(s))
                .ok_or_else(|| err(&format!("field {n} ({what}) missing or not a number")))
        };
        let small = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| err(&format!("{what} {v:#x} does not fit 32 bits")))
        };
        match ty {
            3000 => d.domains.push(DevDomain {
                id: field(1, hex, "domain id")?,
                kind: small(field(2, dec, "domain type")?, "domain type")?,
            }),
            3100 => d.tables.push(DevTable {
                id: field(1, hex, "table id")?,
                domain: field(2, hex, "domain id")?,
                kind: small(field(3, dec, "table type")?, "table type")?,
                level: small(field(4, dec, "level")?, "level")?,
            }),
            3200 => d.matchers.push(DevMatcher {
                id: field(1, hex, "matcher id")?,
                table: field(2, hex, "table id")?,
                priority: small(field(3, dec, "priority")?, "priority")?,
            }),
            3300 => d.rules.push(DevRule {
                id: field(1, hex, "rule id")?,
                matcher: field(2, hex, "matcher id")?,
                actions: Vec::new(),
            }),
            3400..=3499 => {
                let rule = field(2, hex, "rule id")?;
                let arg = |what| field(3, hex, what).and_then(|v| small(v, what));
                let a = match ty {
                    3403 => DevAction::Drop,
                    3405 => DevAction::Table(arg("table object id")?),
                    3404 => DevAction::Qp(arg("QP number")?),
                    3411 => DevAction::Tir,
                    3406 => DevAction::Counter(arg("counter id")?),
                    3407 => DevAction::Tag(arg("flow tag")?),
                    3408 => DevAction::Vport(arg("vport")?),
                    3409 => DevAction::DecapL2,
                    3410 => DevAction::DecapL3,
                    3400 => DevAction::EncapL2,
                    3401 => DevAction::EncapL3,
                    3402 => DevAction::ModifyHeader,
                    3414 => DevAction::Meter,
                    3415 => DevAction::Sampler,
                    3416 => DevAction::DestArray,
                    3412 => DevAction::PushVlan(arg("VLAN header")?),
                    3413 => DevAction::PopVlan,
                    3417..=3419 => DevAction::Aso,
                    3423 => DevAction::Miss,
                    3424 => DevAction::RootTable,
                    other => DevAction::Other(other as u32),
                };
                // rdma-core writes a rule's actions right after the rule.
                match d.rules.last_mut() {
                    Some(r) if r.id == rule => r.actions.push(a),
                    _ => return Err(err("an action of a rule that is not the one before it")),
                }
            }
            _ => {}
        }
    }
    Ok(d)
}

#[cfg(test)]
#[path = "tests/dr_dump.rs"]
mod tests;

//! What a device has programmed, as `eswitchctl dump-rules` shows it, the
//! same for every backend ([`DrBackend::dump`](super::DrBackend::dump)):
//! domains, tables, matchers (priority, criteria, the mask as named
//! fields), rules (the value as the same named fields, the action list,
//! the counter's packets and bytes).
//!
//! Field names and bit positions come from the layout table
//! ([`FIELDS`]). Only fields whose mask is non-zero are listed. Values are
//! written as the header types read best: MAC and IP addresses as
//! addresses (IPv4 when the matcher's mask has `ip_version` 4), ports,
//! protocols and the source vport in decimal, the rest (masks, registers)
//! in hex.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::dr::modify::ModifyOp;
use crate::prm::{get, PrmField, FIELDS};

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
    /// The slow-path receive queue's restore rules, by tag
    /// ([`crate::restore`]).
    pub restore_rules: Vec<RestoreRuleDump>,
    /// A backend with a model: where the device's own dump differs from
    /// what is listed (empty: the device holds exactly this).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

/// One restore rule: packets whose reg_c_1 is `tag` reach software with
/// that flow tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RestoreRuleDump {
    /// `x3`.
    pub id: String,
    pub tag: u32,
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
    /// Where that counter is: the bulk's slot and the offset in it (a
    /// device backend reads the values from its own bulk).
    #[serde(skip)]
    pub counter_at: Option<(u32, u32)>,
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
pub fn fields(mask: &[u8], buf: &[u8], is_mask: bool, ip_version: u8) -> Vec<FieldDump> {
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
pub fn modify_text(op: &ModifyOp) -> String {
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

impl DeviceDump {
    /// Nothing programmed at all (what a device is after a clean shutdown).
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
            && self.tables.is_empty()
            && self.matchers.is_empty()
            && self.rules.is_empty()
            && self.restore_rules.is_empty()
    }
}

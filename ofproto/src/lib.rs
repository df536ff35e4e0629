//! # ofproto: OpenFlow tables and translation into megaflows
//!
//! The slow path of eswitch: OpenFlow 1.3 tables, the `ovs-ofctl` flow
//! syntax, translation of a packet's key through the pipeline into a sound,
//! wide megaflow, the upcall handler, the revalidator and the OpenFlow
//! control adapter. Depends on `megaflow` only. This crate grows in later
//! issues.
#![forbid(unsafe_code)]

pub mod bridge;
pub mod classifier;
pub mod normal;
pub mod rule;
pub mod table;
pub mod text;
pub mod wildcards;
pub mod xlate;

pub use bridge::{Bridge, Generations, PortInfo, Ports, VlanMode};
pub use classifier::{Classifier, RuleId};
pub use table::{FlowModError, FlowTables, Rule, RuleRef, RuleUid};
pub use xlate::{Translation, XlateError};
pub use rule::{FlowMod, FlowModCommand, Instructions, OfAction, OfPort, RuleSpec};
pub use wildcards::Wildcards;

use std::fmt;

/// An OpenFlow table id (0..=253 usable; 254 and 255 are reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u8);

impl TableId {
    /// Highest table id a rule may live in.
    pub const MAX: TableId = TableId(253);
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An OpenFlow rule priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Priority(pub u16);

/// An OpenFlow cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cookie(pub u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ids_order_by_number() {
        assert!(TableId(1) < TableId::MAX);
        assert_eq!(TableId(7).to_string(), "7");
    }
}

//! # ofproto: OpenFlow tables and translation into megaflows
//!
//! The slow path of eswitch, and its OpenFlow channels. Depends on
//! `megaflow` and `openflow`.
//!
//! - [`rule`]: what a flow mod carries ([`RuleSpec`], [`Instructions`],
//!   [`OfAction`], [`OfPort`]);
//! - [`text`]: the `ovs-ofctl` flow syntax, parsed into those types and
//!   printed back (round trip), with errors that name the bad token;
//! - [`table`]: 254 tables with OpenFlow 1.3 flow mod semantics, counters,
//!   timeouts and generations;
//! - [`classifier`]: one table's rules, looked up by priority with
//!   Open vSwitch's staged lookup, prefix tries and port tries, so a lookup
//!   reads as few key bits as it can ([`classifier::reference`] is the
//!   linear specification it is tested against);
//! - [`wildcards`]: the one door through which translation records what it
//!   read;
//! - [`xlate`]: a key through the pipeline into datapath actions and a
//!   megaflow mask, plus the trace that explains it;
//! - [`mac`] and [`bridge`]: the MAC learning table, the ports, and the
//!   [`Bridge`] that ties tables, ports and MAC table together;
//! - [`meter`]: OpenFlow meters (`add-meter` syntax, software buckets);
//! - [`pipeline`]: the software datapath, upcalls, offload policy and the
//!   revalidator around one megaflow cache;
//! - [`channel`]: one OpenFlow connection's state machine (version
//!   negotiation, echo keepalive, roles, async configuration) over the
//!   [`OfSwitch`](channel::OfSwitch) it programs.
//!
//! ## Why megaflows come out wider than Open vSwitch's
//!
//! The classifier follows OVS (`lib/classifier.c`), and translation adds:
//! a prefix-trie skip un-wildcards only the trie bits, never the stages
//! before it; fields the pipeline overwrote with constants (`set_field`
//! before a later match) are not un-wildcarded on the packet; set actions
//! are emitted for every field the pipeline wrote, without comparing with
//! the packet's old value; `dec_ttl` is left to the datapath, so the TTL
//! stays wildcarded; metadata and registers, zero in every packet a port
//! delivers, never reach the mask. Every one of these is checked by the
//! soundness property test (`tests/xlate_soundness.rs`).
#![forbid(unsafe_code)]

pub mod bridge;
pub mod bridges;
pub mod channel;
pub mod classifier;
mod conjunction;
pub mod group;
pub mod learn;
pub mod mac;
pub mod meter;
pub mod pipeline;
pub mod recirc;
pub mod rule;
pub mod table;
pub mod text;
pub mod tlv;
pub mod tunnel;
pub mod wildcards;
pub mod xlate;

pub use bridge::{Bridge, Generations, PortInfo, Ports, VlanMode};
pub use bridges::BridgeNo;
pub use classifier::{Classifier, RuleId};
pub use meter::{parse_meter, MeterSpec, MeterTable};
pub use pipeline::{
    translate_miss, Backlog, Datapaths, DpSender, FlowDump, FlowSetup, InstallError, LocalDatapath,
    Miss, OffloadDone, OffloadJob, OffloadMode, OffloadPolicy, Pass, PassReport, Pipeline,
    PipelineConfig, PipelineStats, RevalidatorConfig, SharedBridge, SharedOffload,
    ThreadedDatapaths, PASS_BATCH, STAGED_MAX,
};
pub use rule::{FlowMod, FlowModCommand, Instructions, OfAction, OfPort, RuleSpec};
pub use table::{FlowModError, FlowTables, Rule, RuleRef, RuleUid};
pub use wildcards::Wildcards;
pub use xlate::{Translation, XlateError};

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

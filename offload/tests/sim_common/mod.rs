//! Helpers shared by the sim scenario tests.
#![allow(dead_code, unused_imports)]

pub use std::sync::Arc;
pub use std::thread;

pub use megaflow::frame::{FrameSpec, L4};
pub use megaflow::key::{VLAN_PCP_MASK, VLAN_PRESENT, VLAN_VID_MASK};
pub use megaflow::{Field, Mask, Match, PortNo};
pub use offload::dr::meter::{Color, MeterMode, MeterParams};
pub use offload::dr::modify::{encode_list, ModifyField, ModifyOp};
pub use offload::dr::{
    ActionId, ActionSpec, CounterValue, DomainId, DomainType, DrBackend, DrError, Errno,
    FlowMeterAttr, FlowSamplerAttr, MatcherId, RuleId, TableId,
};
pub use offload::prm::{encode, set, Encoded, PortTable, PrmField, SourcePortMode, ENCODED_LEN};
pub use offload::sim::{DropCause, Egress, OutFrame, Output, SimBackend, SimConfig};
pub use offload::Vport;
pub use proptest::prelude::*;

pub use offload::conformance::support::*;

// ---------------------------------------------------------------------------
// Sim-specific helpers.

/// An FDB domain whose root sends everything to a table at level 1.
pub fn pipe(sim: &SimBackend) -> (DomainId, TableId) {
    let d = sim.domain_create(DomainType::Fdb).expect("domain_create");
    let root = table(sim, d, 0);
    let t1 = table(sim, d, 1);
    let to_t1 = action(sim, d, ActionSpec::DestTable(t1));
    let m = matcher(sim, root, 0, &buf());
    rule(sim, m, &buf(), &[to_t1]);
    (d, t1)
}

/// Every frame one input frame produces.
pub fn send_at(
    sim: &SimBackend,
    d: DomainId,
    now: u64,
    from: Vport,
    frame: &[u8],
) -> Vec<OutFrame> {
    let mut out = Output::new();
    sim.process(d, now, from, frame, &mut out);
    out.frames().to_vec()
}

/// The one frame an input frame produces.
#[track_caller]
pub fn one(sim: &SimBackend, d: DomainId, from: Vport, frame: &[u8]) -> OutFrame {
    let mut out = send_at(sim, d, 0, from, frame);
    assert_eq!(out.len(), 1, "one frame in, one out: {out:?}");
    out.pop().expect("one frame")
}

/// A domain whose level-1 table holds one rule: `enc`'s match, the
/// actions `first` (created in the domain) then a `dest_vport` to `out`;
/// everything else goes to the manager.
pub fn install_with(
    sim: &SimBackend,
    enc: &Encoded,
    first: &[ActionSpec],
    out: Vport,
) -> Result<DomainId, DrError> {
    let (d, t1) = pipe(sim);
    let m = sim.matcher_create(t1, 0, enc.criteria(), enc.mask())?;
    let mut actions = Vec::new();
    for spec in first {
        actions.push(sim.action_create(d, spec.clone())?);
    }
    actions.push(sim.action_create(d, ActionSpec::DestVport(out))?);
    sim.rule_create(m, enc.value(), &actions)?;
    Ok(d)
}

/// How rules name the source port: vport metadata in reg_c_0, or
/// `misc.source_port`.
pub fn source_mode(metadata: bool) -> SourcePortMode {
    if metadata {
        SourcePortMode::REG_C0_UPPER_16
    } else {
        SourcePortMode::MiscSourcePort
    }
}

/// A rule in a catch-all matcher of `t1` forwarding everything with
/// `actions`.
pub fn catch_all(sim: &SimBackend, t1: TableId, actions: &[ActionId]) {
    let m = matcher(sim, t1, 0, &buf());
    rule(sim, m, &buf(), actions);
}

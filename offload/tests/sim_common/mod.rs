//! Helpers shared by the sim scenario tests.
#![allow(dead_code, unused_imports)]

pub use std::sync::Arc;
pub use std::thread;

pub use megaflow::build::{FrameSpec, L4};
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

// ---------------------------------------------------------------------------
// Helpers.

pub const SRC_MAC: u64 = 0x0200_0000_00aa;

pub fn vf(n: u16) -> Vport {
    Vport::vf(n).expect("small VF numbers have a vport")
}

pub fn ingress() -> Vport {
    vf(10)
}

pub fn mac(i: u64) -> u64 {
    0x0200_0000_1000 + i
}

/// A UDP frame to `dmac`.
pub fn frame_to(dmac: u64, payload: usize) -> Vec<u8> {
    FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, dmac)
        .payload(payload)
        .build()
}

/// An `fte_match_param` buffer and its criteria.
#[derive(Clone, Debug)]
pub struct Buf {
    pub criteria: u8,
    pub bytes: Vec<u8>,
}

pub fn buf() -> Buf {
    Buf {
        criteria: 0,
        bytes: vec![0; ENCODED_LEN],
    }
}

impl Buf {
    pub fn with(mut self, f: PrmField, v: u128) -> Buf {
        set(&mut self.bytes, f, v).expect("the value fits the field");
        if v != 0 {
            self.criteria |= f.def().block.criteria_bit();
        }
        self
    }
}

pub fn dmac_mask() -> Buf {
    buf().with(PrmField::OuterDmac, 0xffff_ffff_ffff)
}

pub fn dmac_value(mac: u64) -> Buf {
    buf().with(PrmField::OuterDmac, u128::from(mac))
}

pub fn reg_mask(n: u8) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), 0xffff_ffff)
}

pub fn reg_value(n: u8, v: u32) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), u128::from(v))
}

pub fn table(sim: &SimBackend, d: DomainId, level: u32) -> TableId {
    sim.table_create(d, level).expect("table_create")
}

pub fn matcher(sim: &SimBackend, t: TableId, priority: u16, mask: &Buf) -> MatcherId {
    sim.matcher_create(t, priority, mask.criteria, &mask.bytes)
        .expect("matcher_create")
}

pub fn rule(sim: &SimBackend, m: MatcherId, value: &Buf, actions: &[ActionId]) -> RuleId {
    sim.rule_create(m, &value.bytes, actions)
        .expect("rule_create")
}

pub fn action(sim: &SimBackend, d: DomainId, spec: ActionSpec) -> ActionId {
    sim.action_create(d, spec).expect("action_create")
}

pub fn to_vport(sim: &SimBackend, d: DomainId, v: Vport) -> ActionId {
    action(sim, d, ActionSpec::DestVport(v))
}

pub fn modify(sim: &SimBackend, d: DomainId, ops: &[ModifyOp]) -> ActionId {
    action(sim, d, ActionSpec::ModifyHeader(encode_list(ops)))
}

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

/// A rule in a catch-all matcher of `t1` forwarding everything with
/// `actions`.
pub fn catch_all(sim: &SimBackend, t1: TableId, actions: &[ActionId]) {
    let m = matcher(sim, t1, 0, &buf());
    rule(sim, m, &buf(), actions);
}

/// SplitMix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

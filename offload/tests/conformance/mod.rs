//! Direct Rule conformance suite, written against [`DrBackend`] so every
//! backend runs the same cases: `tests/conformance_sim.rs` runs it on the
//! software eSwitch, the `mlx5` backend will run it on a ConnectX.
//!
//! Each case is a `pub fn` generic over [`Device`]: a backend plus a way to
//! put a frame into the eSwitch and see what leaves. A case builds its own
//! domain and objects, so cases share nothing but the device. Cases that
//! need a capacity (ENOSPC) take it as a parameter: the runner knows the
//! device it built.
//!
//! What is covered:
//! - every documented error with its errno (duplicates, value outside the
//!   mask, IP version, action sequences, domains and vports, table levels,
//!   objects in use, capacities, stale handles, VLAN and modify-header
//!   arguments);
//! - each action on real frames;
//! - counters exact under random traffic against an independent model;
//! - meter rates within 1% over a simulated second at several CIRs;
//! - sampler ratios within 5 sigma.
//!
//! Assumptions about the device: it has the PF, the uplink and VFs 0..=15
//! (vports 1..=16), and no vport [`NO_SUCH_VPORT`]; `send` returns every
//! frame one input frame produced, with the metadata registers at the end
//! of its walk and the sampled flag of sampler copies.

use megaflow::build::{FrameSpec, L4};
use offload::dr::meter::{Color, MeterMode, MeterParams};
use offload::dr::modify::{encode_list, ModifyField, ModifyOp};
use offload::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DomainId, DomainType, DrBackend, DrError,
    Errno, FlowMeterAttr, FlowSamplerAttr, MatcherId, RuleId, SyncFlags, TableId,
};
use offload::prm::{set, PrmField, ENCODED_LEN};
use offload::sim::{DropCause, Egress, OutFrame};
use offload::Vport;

/// A backend the suite can also send frames through.
pub trait Device: DrBackend {
    /// Puts `frame` into the eSwitch at `ingress` at time `now_ns` and
    /// returns every frame that leaves (forwarded, dropped, to the
    /// manager, sampled copies), in the order the device emits them.
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame>;
}

// ---------------------------------------------------------------------------
// Helpers.

/// A vport number the eSwitch does not have.
pub const NO_SUCH_VPORT: Vport = Vport(0x7000);

/// The source MAC of the suite's frames.
const SRC_MAC: u64 = 0x0200_0000_00aa;

/// The vport of VF `n`.
fn vf(n: u16) -> Vport {
    Vport::vf(n).expect("small VF numbers have a vport")
}

/// The ingress vport most cases send from.
fn ingress() -> Vport {
    vf(10)
}

/// The destination MAC of test flow `i`.
fn mac(i: u64) -> u64 {
    0x0200_0000_1000 + i
}

/// A UDP frame to `dmac` with `payload` bytes of payload.
fn frame_to(dmac: u64, payload: usize) -> Vec<u8> {
    FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, dmac)
        .payload(payload)
        .build()
}

/// The default frame of flow `i`.
fn frame(i: u64) -> Vec<u8> {
    frame_to(mac(i), 64)
}

/// The result of a call that must succeed.
#[track_caller]
fn ok<T>(r: Result<T, DrError>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: unexpected error {e} (errno {})", e.errno()),
    }
}

/// Asserts that a call failed with `want`.
#[track_caller]
fn fails<T: std::fmt::Debug>(r: Result<T, DrError>, want: Errno, what: &str) {
    match r {
        Ok(v) => panic!("{what}: succeeded ({v:?}), expected {want}"),
        Err(e) => assert_eq!(e.errno(), want, "{what}: wrong errno for {e}"),
    }
}

/// An `fte_match_param` buffer (mask or value) with its criteria.
#[derive(Clone, Debug)]
struct Buf {
    criteria: u8,
    bytes: Vec<u8>,
}

/// An all-zero buffer: the catch-all mask, or a value of zeros.
fn buf() -> Buf {
    Buf {
        criteria: 0,
        bytes: vec![0; ENCODED_LEN],
    }
}

impl Buf {
    /// Sets one field; a non-zero field enables its block.
    fn with(mut self, f: PrmField, v: u128) -> Buf {
        set(&mut self.bytes, f, v).expect("the value fits the field");
        if v != 0 {
            self.criteria |= f.def().block.criteria_bit();
        }
        self
    }
}

fn dmac_mask() -> Buf {
    buf().with(PrmField::OuterDmac, 0xffff_ffff_ffff)
}

fn dmac_value(mac: u64) -> Buf {
    buf().with(PrmField::OuterDmac, u128::from(mac))
}

/// A mask on one metadata register.
fn reg_mask(n: u8) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), 0xffff_ffff)
}

fn reg_value(n: u8, v: u32) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), u128::from(v))
}

fn domain<D: Device>(dev: &D, ty: DomainType) -> DomainId {
    ok(dev.domain_create(ty), "domain_create")
}

fn table<D: Device>(dev: &D, d: DomainId, level: u32) -> TableId {
    ok(dev.table_create(d, level), "table_create")
}

fn matcher<D: Device>(dev: &D, t: TableId, priority: u16, mask: &Buf) -> MatcherId {
    ok(
        dev.matcher_create(t, priority, mask.criteria, &mask.bytes),
        "matcher_create",
    )
}

fn rule<D: Device>(dev: &D, m: MatcherId, value: &Buf, actions: &[ActionId]) -> RuleId {
    ok(dev.rule_create(m, &value.bytes, actions), "rule_create")
}

fn action<D: Device>(dev: &D, d: DomainId, spec: ActionSpec) -> ActionId {
    let name = spec.name();
    ok(dev.action_create(d, spec), name)
}

fn to_vport<D: Device>(dev: &D, d: DomainId, v: Vport) -> ActionId {
    action(dev, d, ActionSpec::DestVport(v))
}

fn modify<D: Device>(dev: &D, d: DomainId, ops: &[ModifyOp]) -> ActionId {
    action(dev, d, ActionSpec::ModifyHeader(encode_list(ops)))
}

fn query<D: Device>(dev: &D, bulk: CounterBulkId) -> Vec<CounterValue> {
    let mut out = Vec::new();
    ok(dev.counter_bulk_query(bulk, &mut out), "counter_bulk_query");
    out
}

/// An FDB domain whose root sends everything to a table at level 1.
struct Pipe {
    d: DomainId,
    root: TableId,
    t1: TableId,
}

fn pipe<D: Device>(dev: &D) -> Pipe {
    let d = domain(dev, DomainType::Fdb);
    let root = table(dev, d, 0);
    let t1 = table(dev, d, 1);
    let to_t1 = action(dev, d, ActionSpec::DestTable(t1));
    let m = matcher(dev, root, 0, &buf());
    rule(dev, m, &buf(), &[to_t1]);
    Pipe { d, root, t1 }
}

/// Sends a frame that must leave exactly once.
#[track_caller]
fn one<D: Device>(dev: &D, d: DomainId, from: Vport, frame: &[u8]) -> OutFrame {
    let mut out = dev.send(d, 0, from, frame);
    assert_eq!(out.len(), 1, "one frame in, one out: {out:?}");
    out.pop().expect("one frame")
}

/// Where a frame from the default ingress goes.
#[track_caller]
fn egress<D: Device>(dev: &D, d: DomainId, frame: &[u8]) -> Egress {
    one(dev, d, ingress(), frame).egress
}

fn manager() -> Egress {
    Egress::Manager { ingress: ingress() }
}

/// SplitMix64: the suite's deterministic random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------
// Errors.

/// With duplicates disabled a second rule with the same value is EEXIST,
/// and the refused rule leaves nothing behind.
mod actions;
mod errors;

pub use actions::*;
pub use errors::*;

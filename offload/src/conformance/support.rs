//! Helpers shared by the Direct Rule test suites (conformance and sim
//! scenarios): frames, `fte_match_param` buffers, object creation that
//! names the failing call, deterministic random numbers.

use crate::dr::modify::{encode_list, ModifyOp};
use crate::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DomainId, DomainType, DrBackend, DrError,
    Errno, FlowSamplerAttr, MatcherId, RuleId, TableId,
};
use crate::prm::{set, PrmField, ENCODED_LEN};
use crate::Vport;
use megaflow::frame::{FrameSpec, L4};

/// The source MAC of the suite's frames.
pub const SRC_MAC: u64 = 0x0200_0000_00aa;

/// The vport of VF `n`.
pub fn vf(n: u16) -> Vport {
    Vport::vf(n).expect("small VF numbers have a vport")
}

/// The ingress vport most cases send from.
pub fn ingress() -> Vport {
    vf(10)
}

/// The destination MAC of test flow `i`.
pub fn mac(i: u64) -> u64 {
    0x0200_0000_1000 + i
}

/// A UDP frame to `dmac` with `payload` bytes of payload.
pub fn frame_to(dmac: u64, payload: usize) -> Vec<u8> {
    FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, dmac)
        .payload(payload)
        .build()
}

/// The default frame of flow `i`.
pub fn frame(i: u64) -> Vec<u8> {
    frame_to(mac(i), 64)
}

/// The result of a call that must succeed.
#[track_caller]
pub fn ok<T>(r: Result<T, DrError>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: unexpected error {e} (errno {})", e.errno()),
    }
}

/// Asserts that a call failed with `want`.
#[track_caller]
pub fn fails<T: std::fmt::Debug>(r: Result<T, DrError>, want: Errno, what: &str) {
    match r {
        Ok(v) => panic!("{what}: succeeded ({v:?}), expected {want}"),
        Err(e) => assert_eq!(e.errno(), want, "{what}: wrong errno for {e}"),
    }
}

/// An `fte_match_param` buffer (mask or value) with its criteria.
#[derive(Clone, Debug)]
pub struct Buf {
    pub criteria: u8,
    pub bytes: Vec<u8>,
}

/// An all-zero buffer: the catch-all mask, or a value of zeros.
pub fn buf() -> Buf {
    Buf {
        criteria: 0,
        bytes: vec![0; ENCODED_LEN],
    }
}

impl Buf {
    /// Sets one field; a non-zero field enables its block.
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

/// A mask on one metadata register.
pub fn reg_mask(n: u8) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), 0xffff_ffff)
}

pub fn reg_value(n: u8, v: u32) -> Buf {
    buf().with(PrmField::reg_c(n).expect("reg_c 0..=7"), u128::from(v))
}

pub fn domain<B: DrBackend + ?Sized>(dev: &B, ty: DomainType) -> DomainId {
    ok(dev.domain_create(ty), "domain_create")
}

pub fn table<B: DrBackend + ?Sized>(dev: &B, d: DomainId, level: u32) -> TableId {
    ok(dev.table_create(d, level), "table_create")
}

pub fn matcher<B: DrBackend + ?Sized>(dev: &B, t: TableId, priority: u16, mask: &Buf) -> MatcherId {
    ok(
        dev.matcher_create(t, priority, mask.criteria, &mask.bytes),
        "matcher_create",
    )
}

pub fn rule<B: DrBackend + ?Sized>(
    dev: &B,
    m: MatcherId,
    value: &Buf,
    actions: &[ActionId],
) -> RuleId {
    ok(dev.rule_create(m, &value.bytes, actions), "rule_create")
}

pub fn action<B: DrBackend + ?Sized>(dev: &B, d: DomainId, spec: ActionSpec) -> ActionId {
    let name = spec.name();
    ok(dev.action_create(d, spec), name)
}

/// A flow_sampler: one in `ratio` packets copied to `copies`, every packet
/// on to table `next`.
pub fn sampler<B: DrBackend + ?Sized>(
    dev: &B,
    d: DomainId,
    ratio: u32,
    next: TableId,
    copies: &[ActionId],
) -> ActionId {
    let spec = ActionSpec::FlowSampler(FlowSamplerAttr {
        sample_ratio: ratio,
        default_next_table: next,
        sample_actions: copies.to_vec(),
        action: None,
    });
    action(dev, d, spec)
}

pub fn to_vport<B: DrBackend + ?Sized>(dev: &B, d: DomainId, v: Vport) -> ActionId {
    action(dev, d, ActionSpec::DestVport(v))
}

pub fn modify<B: DrBackend + ?Sized>(dev: &B, d: DomainId, ops: &[ModifyOp]) -> ActionId {
    action(dev, d, ActionSpec::ModifyHeader(encode_list(ops)))
}

pub fn query<B: DrBackend + ?Sized>(dev: &B, bulk: CounterBulkId) -> Vec<CounterValue> {
    let mut out = Vec::new();
    ok(dev.counter_bulk_query(bulk, &mut out), "counter_bulk_query");
    out
}

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
pub fn duplicate_rule_eexist_when_disallowed<D: Device>(dev: &D) {
    let p = pipe(dev);
    ok(
        dev.domain_allow_duplicate_rules(p.d, false),
        "disallow duplicates",
    );
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let to_a = to_vport(dev, p.d, vf(0));
    let to_b = to_vport(dev, p.d, vf(1));
    let r1 = rule(dev, m, &dmac_value(mac(1)), &[to_a]);
    fails(
        dev.rule_create(m, &dmac_value(mac(1)).bytes, &[to_b]),
        Errno::EEXIST,
        "same value twice, duplicates disabled",
    );
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(0)));
    // The refused rule holds no reference on its action.
    ok(
        dev.action_destroy(to_b),
        "destroy the refused rule's action",
    );
    // Another value is fine; the value is free again once r1 is gone.
    rule(dev, m, &dmac_value(mac(2)), &[to_a]);
    ok(dev.rule_destroy(r1), "rule_destroy");
    assert_eq!(egress(dev, p.d, &frame(1)), manager());
    rule(dev, m, &dmac_value(mac(1)), &[to_a]);
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(0)));
}

/// The root table never takes duplicates, whatever the domain allows.
pub fn duplicate_rule_eexist_in_root<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let root = table(dev, d, 0);
    let t1 = table(dev, d, 1);
    ok(
        dev.domain_allow_duplicate_rules(d, true),
        "allow duplicates",
    );
    let m = matcher(dev, root, 0, &dmac_mask());
    let to_t1 = action(dev, d, ActionSpec::DestTable(t1));
    let miss = action(dev, d, ActionSpec::DefaultMiss);
    rule(dev, m, &dmac_value(mac(1)), &[to_t1]);
    fails(
        dev.rule_create(m, &dmac_value(mac(1)).bytes, &[to_t1]),
        Errno::EEXIST,
        "same rule twice in the root",
    );
    fails(
        dev.rule_create(m, &dmac_value(mac(1)).bytes, &[miss]),
        Errno::EEXIST,
        "same value, other action, in the root",
    );
    rule(dev, m, &dmac_value(mac(2)), &[miss]);
}

/// With duplicates allowed (the default off the root) every copy is
/// accepted, the oldest answers, and destroying it promotes the next.
pub fn duplicates_allowed_oldest_answers<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let bulk = ok(dev.counter_bulk_alloc(2), "counter_bulk_alloc");
    let mut rules = Vec::new();
    for i in 0..3u16 {
        let ctr = action(
            dev,
            p.d,
            ActionSpec::FlowCounter {
                bulk,
                offset: u32::from(i),
            },
        );
        let out = to_vport(dev, p.d, vf(i));
        rules.push(rule(dev, m, &dmac_value(mac(1)), &[ctr, out]));
    }
    let f = frame(1);
    assert_eq!(egress(dev, p.d, &f), Egress::Vport(vf(0)), "oldest answers");
    ok(dev.rule_destroy(rules[0]), "destroy the answering rule");
    assert_eq!(egress(dev, p.d, &f), Egress::Vport(vf(1)), "next promoted");
    ok(dev.rule_destroy(rules[2]), "destroy a waiting duplicate");
    assert_eq!(egress(dev, p.d, &f), Egress::Vport(vf(1)), "still the same");
    ok(dev.rule_destroy(rules[1]), "destroy the last copy");
    assert_eq!(egress(dev, p.d, &f), manager(), "no copy left");
    let c = query(dev, bulk);
    let len = f.len() as u64;
    let count = |n: u64| CounterValue {
        packets: n,
        bytes: n * len,
    };
    assert_eq!(&c[..3], &[count(1), count(2), count(0)][..], "counters");
}

/// Value bits outside the matcher's mask: EINVAL.
pub fn value_outside_mask_einval<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(
        dev,
        p.t1,
        0,
        &buf().with(PrmField::OuterDmac, 0xffff_ffff_ff00),
    );
    let out = to_vport(dev, p.d, vf(0));
    fails(
        dev.rule_create(m, &dmac_value(0x0200_0000_1001).bytes, &[out]),
        Errno::EINVAL,
        "value bits in the unmasked low byte of dmac",
    );
    fails(
        dev.rule_create(
            m,
            &dmac_value(0x0200_0000_1000)
                .with(PrmField::OuterSmac, 1)
                .bytes,
            &[out],
        ),
        Errno::EINVAL,
        "value in smac, which the mask does not cover",
    );
    fails(
        dev.rule_create(
            m,
            &dmac_value(0x0200_0000_1000)
                .with(PrmField::OuterIpProtocol, 6)
                .bytes,
            &[out],
        ),
        Errno::EINVAL,
        "value in ip_protocol, which the mask does not cover",
    );
    // Inside the mask is fine, and the partial mask matches the prefix.
    rule(dev, m, &dmac_value(0x0200_0000_1000), &[out]);
    assert_eq!(
        egress(dev, p.d, &frame_to(0x0200_0000_10ee, 0)),
        Egress::Vport(vf(0))
    );
}

/// Match buffers of a bad size or criteria with unknown bits: EINVAL.
pub fn match_sizes_and_criteria_einval<D: Device>(dev: &D) {
    let p = pipe(dev);
    let mask = dmac_mask();
    for len in [449, 452, 512] {
        let mut b = mask.bytes.clone();
        b.resize(len, 0);
        fails(
            dev.matcher_create(p.t1, 0, mask.criteria, &b),
            Errno::EINVAL,
            &format!("mask of {len} bytes"),
        );
    }
    fails(
        dev.matcher_create(p.t1, 0, mask.criteria | 0x80, &mask.bytes),
        Errno::EINVAL,
        "match_criteria_enable bit 7",
    );
    let m = matcher(dev, p.t1, 0, &mask);
    let out = to_vport(dev, p.d, vf(0));
    let value = dmac_value(mac(1));
    for len in [14, 449, 452] {
        let mut b = value.bytes.clone();
        b.resize(len, 0);
        fails(
            dev.rule_create(m, &b, &[out]),
            Errno::EINVAL,
            &format!("value of {len} bytes"),
        );
    }
    // Shorter buffers read as zeros past their end.
    rule(
        dev,
        m,
        &Buf {
            criteria: 0,
            bytes: value.bytes[..16].to_vec(),
        },
        &[out],
    );
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(0)));
}

/// The rule's IP version must be the matcher's (EINVAL); the mask takes
/// the IP version number itself (4, 6 or 0), and IP addresses need it.
pub fn ip_version_rules<D: Device>(dev: &D) {
    let p = pipe(dev);
    let mask4 = buf()
        .with(PrmField::OuterIpVersion, 4)
        .with(PrmField::OuterDstIp, 0xffff_ffff);
    let m4 = matcher(dev, p.t1, 0, &mask4);
    let out = to_vport(dev, p.d, vf(0));
    let dst = |v: u8| {
        buf()
            .with(PrmField::OuterIpVersion, u128::from(v))
            .with(PrmField::OuterDstIp, 0x0a00_0002)
    };
    fails(
        dev.rule_create(
            m4,
            &buf().with(PrmField::OuterDstIp, 0x0a00_0002).bytes,
            &[out],
        ),
        Errno::EINVAL,
        "rule without the matcher's ip_version 4",
    );
    fails(
        dev.rule_create(m4, &dst(6).bytes, &[out]),
        Errno::EINVAL,
        "rule ip_version 6 under a version-4 mask",
    );
    rule(dev, m4, &dst(4), &[out]);
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(0)));
    let v6 = FrameSpec::ipv6(1, 0x0a00_0002, L4::udp(1000, 2000)).build();
    assert_eq!(egress(dev, p.d, &v6), manager(), "IPv6 under a v4 rule");

    let mask6 = buf()
        .with(PrmField::OuterIpVersion, 6)
        .with(PrmField::OuterDstIp, u128::MAX << 64);
    let m6 = matcher(dev, p.t1, 1, &mask6);
    fails(
        dev.rule_create(
            m6,
            &buf()
                .with(PrmField::OuterIpVersion, 4)
                .with(PrmField::OuterDstIp, 0x2001_0db8 << 96)
                .bytes,
            &[out],
        ),
        Errno::EINVAL,
        "rule ip_version 4 under a version-6 mask",
    );

    for bad in [0xf, 5, 2] {
        let mask = buf()
            .with(PrmField::OuterIpVersion, bad)
            .with(PrmField::OuterDstIp, 0xffff_ffff);
        fails(
            dev.matcher_create(p.t1, 2, mask.criteria, &mask.bytes),
            Errno::EINVAL,
            &format!("ip_version mask {bad:#x} (DR takes the version number)"),
        );
    }
    let addrs_only = buf().with(PrmField::OuterDstIp, 0xffff_ffff);
    fails(
        dev.matcher_create(p.t1, 2, addrs_only.criteria, &addrs_only.bytes),
        Errno::EOPNOTSUPP,
        "IP address mask without ip_version: mask not consumed",
    );
}

/// Drop mixed with a destination, in either order: EOPNOTSUPP.
pub fn drop_with_destination_eopnotsupp<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let drop = action(dev, p.d, ActionSpec::Drop);
    let out = to_vport(dev, p.d, vf(0));
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let v = dmac_value(mac(1));
    for (list, what) in [
        ([drop, out], "drop, dest_vport"),
        ([out, drop], "dest_vport, drop"),
        ([drop, to_t2], "drop, dest_table"),
        ([to_t2, drop], "dest_table, drop"),
    ] {
        fails(dev.rule_create(m, &v.bytes, &list), Errno::EOPNOTSUPP, what);
    }
    // In the root too (both are root actions).
    let to_t1 = action(dev, p.d, ActionSpec::DestTable(p.t1));
    let rm = matcher(dev, p.root, 0, &dmac_mask());
    for (list, what) in [
        ([drop, to_t1], "root: drop, dest_table"),
        ([to_t1, drop], "root: dest_table, drop"),
    ] {
        fails(
            dev.rule_create(rm, &v.bytes, &list),
            Errno::EOPNOTSUPP,
            what,
        );
    }
    // Nothing was installed.
    assert_eq!(egress(dev, p.d, &frame(1)), manager());
}

/// dest_vport exists only in the FDB (EOPNOTSUPP elsewhere) and only to
/// vports the eSwitch has (EINVAL).
pub fn dest_vport_domain_and_vport<D: Device>(dev: &D) {
    let rx = domain(dev, DomainType::NicRx);
    fails(
        dev.action_create(rx, ActionSpec::DestVport(vf(0))),
        Errno::EOPNOTSUPP,
        "dest_vport in NIC_RX",
    );
    let tx = domain(dev, DomainType::NicTx);
    fails(
        dev.action_create(tx, ActionSpec::DestVport(vf(0))),
        Errno::EOPNOTSUPP,
        "dest_vport in NIC_TX",
    );
    let fdb = domain(dev, DomainType::Fdb);
    fails(
        dev.action_create(fdb, ActionSpec::DestVport(NO_SUCH_VPORT)),
        Errno::EINVAL,
        "dest_vport to a vport the eSwitch lacks",
    );
    for v in [vf(0), Vport::UPLINK, Vport::PF] {
        ok(
            dev.action_create(fdb, ActionSpec::DestVport(v)),
            "dest_vport",
        );
    }
}

/// Destination, meter and sampler tables must be above the rule's table
/// (EINVAL); the root is never a destination (EINVAL) nor a meter's next
/// table (EOPNOTSUPP).
pub fn table_levels<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let t2b = table(dev, p.d, 2);
    let m2 = matcher(dev, t2, 0, &dmac_mask());
    let v = dmac_value(mac(1));
    let params = MeterParams::single_rate(1_000_000, 10_000, MeterMode::Bytes)
        .encode()
        .to_vec();
    let meter_to = |next: TableId| {
        ActionSpec::FlowMeter(FlowMeterAttr {
            next_table: next,
            active: true,
            reg_c_index: 5,
            params: params.clone(),
        })
    };
    let sink = to_vport(dev, p.d, vf(3));
    let sampler_to = |next: TableId| {
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 2,
            default_next_table: next,
            sample_actions: vec![sink],
            action: None,
        })
    };
    let to_t1 = action(dev, p.d, ActionSpec::DestTable(p.t1));
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let to_t2b = action(dev, p.d, ActionSpec::DestTable(t2b));
    let array_to_t1 = action(dev, p.d, ActionSpec::DestArray(vec![sink, to_t1]));
    let meter_t1 = action(dev, p.d, meter_to(p.t1));
    let meter_t2b = action(dev, p.d, meter_to(t2b));
    let sampler_t1 = action(dev, p.d, sampler_to(p.t1));
    let sampler_t2b = action(dev, p.d, sampler_to(t2b));
    for (a, what) in [
        (to_t1, "dest_table to a lower level"),
        (to_t2, "dest_table to its own table"),
        (to_t2b, "dest_table to the same level"),
        (array_to_t1, "dest_array holding a lower table"),
        (meter_t1, "meter next table lower"),
        (meter_t2b, "meter next table at the same level"),
        (sampler_t1, "sampler default table lower"),
        (sampler_t2b, "sampler default table at the same level"),
    ] {
        fails(dev.rule_create(m2, &v.bytes, &[a]), Errno::EINVAL, what);
    }
    fails(
        dev.action_create(p.d, ActionSpec::DestTable(p.root)),
        Errno::EINVAL,
        "dest_table to the root",
    );
    fails(
        dev.action_create(p.d, meter_to(p.root)),
        Errno::EOPNOTSUPP,
        "meter continuing in the root",
    );
    // Upwards is fine, levels may be skipped.
    let t9 = table(dev, p.d, 9);
    let to_t9 = action(dev, p.d, ActionSpec::DestTable(t9));
    rule(dev, m2, &v, &[to_t9]);
}

/// A table with matchers cannot be destroyed (EBUSY) until they are gone.
pub fn busy_table_with_matchers<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let t = table(dev, d, 3);
    let m = matcher(dev, t, 0, &dmac_mask());
    fails(dev.table_destroy(t), Errno::EBUSY, "table with a matcher");
    ok(dev.matcher_destroy(m), "matcher_destroy");
    ok(dev.table_destroy(t), "table_destroy once empty");
}

/// A matcher with rules cannot be destroyed (EBUSY), and the refused
/// destroy changes nothing.
pub fn busy_matcher_with_rules<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let out = to_vport(dev, p.d, vf(0));
    let r = rule(dev, m, &dmac_value(mac(1)), &[out]);
    fails(dev.matcher_destroy(m), Errno::EBUSY, "matcher with a rule");
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(0)));
    ok(dev.rule_destroy(r), "rule_destroy");
    ok(dev.matcher_destroy(m), "matcher_destroy once empty");
    assert_eq!(egress(dev, p.d, &frame(1)), manager());
}

/// An action used by a rule or by another action cannot be destroyed.
pub fn busy_action_in_use<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let a = to_vport(dev, p.d, vf(0));
    let b = to_vport(dev, p.d, vf(1));
    let r1 = rule(dev, m, &dmac_value(mac(1)), &[a]);
    let r2 = rule(dev, m, &dmac_value(mac(2)), &[a]);
    let array = action(dev, p.d, ActionSpec::DestArray(vec![a, b]));
    fails(dev.action_destroy(a), Errno::EBUSY, "action used by rules");
    ok(dev.rule_destroy(r1), "rule_destroy");
    fails(dev.action_destroy(a), Errno::EBUSY, "action used by a rule");
    ok(dev.rule_destroy(r2), "rule_destroy");
    fails(
        dev.action_destroy(a),
        Errno::EBUSY,
        "action in a dest_array",
    );
    fails(
        dev.action_destroy(b),
        Errno::EBUSY,
        "action in a dest_array",
    );
    ok(dev.action_destroy(array), "destroy the dest_array");
    ok(dev.action_destroy(a), "action_destroy once unused");
    ok(dev.action_destroy(b), "action_destroy once unused");
}

/// A table that a dest_table, meter or sampler action leads to cannot be
/// destroyed, even when empty.
pub fn busy_table_led_to<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let t = table(dev, d, 2);
    let to_t = action(dev, d, ActionSpec::DestTable(t));
    fails(
        dev.table_destroy(t),
        Errno::EBUSY,
        "table a dest_table leads to",
    );
    ok(dev.action_destroy(to_t), "destroy the dest_table action");
    let meter = action(
        dev,
        d,
        ActionSpec::FlowMeter(FlowMeterAttr {
            next_table: t,
            active: true,
            reg_c_index: 5,
            params: MeterParams::single_rate(1_000_000, 10_000, MeterMode::Bytes)
                .encode()
                .to_vec(),
        }),
    );
    fails(dev.table_destroy(t), Errno::EBUSY, "table a meter leads to");
    ok(dev.action_destroy(meter), "destroy the meter");
    let sink = to_vport(dev, d, vf(0));
    let sampler = action(
        dev,
        d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 10,
            default_next_table: t,
            sample_actions: vec![sink],
            action: None,
        }),
    );
    fails(
        dev.table_destroy(t),
        Errno::EBUSY,
        "table a sampler leads to",
    );
    fails(
        dev.action_destroy(sink),
        Errno::EBUSY,
        "a sampler's sample action",
    );
    ok(dev.action_destroy(sampler), "destroy the sampler");
    ok(
        dev.table_destroy(t),
        "table_destroy once nothing leads to it",
    );
    ok(dev.action_destroy(sink), "action_destroy");
}

/// A counter bulk with counter actions cannot be freed.
pub fn busy_counter_bulk<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let bulk = ok(dev.counter_bulk_alloc(3), "counter_bulk_alloc");
    let c0 = action(dev, d, ActionSpec::FlowCounter { bulk, offset: 0 });
    let c7 = action(dev, d, ActionSpec::FlowCounter { bulk, offset: 7 });
    fails(
        dev.counter_bulk_free(bulk),
        Errno::EBUSY,
        "bulk with counters",
    );
    ok(dev.action_destroy(c0), "destroy one counter");
    fails(
        dev.counter_bulk_free(bulk),
        Errno::EBUSY,
        "bulk with a counter",
    );
    ok(dev.action_destroy(c7), "destroy the other");
    ok(dev.counter_bulk_free(bulk), "counter_bulk_free once unused");
}

/// A domain with tables or actions cannot be destroyed.
pub fn busy_domain<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let t = table(dev, d, 1);
    fails(dev.domain_destroy(d), Errno::EBUSY, "domain with a table");
    ok(dev.table_destroy(t), "table_destroy");
    let a = action(dev, d, ActionSpec::Drop);
    fails(dev.domain_destroy(d), Errno::EBUSY, "domain with an action");
    ok(dev.action_destroy(a), "action_destroy");
    ok(dev.domain_destroy(d), "domain_destroy once empty");
}

/// Rules per table: ENOSPC at the table's capacity, whichever matcher;
/// other tables keep their own room; a destroy makes room again.
pub fn enospc_rules_per_table<D: Device>(dev: &D, max_rules_per_table: usize) {
    let p = pipe(dev);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, p.t1, 1, &reg_mask(3));
    let out = to_vport(dev, p.d, vf(0));
    let mut rules = Vec::new();
    for i in 0..max_rules_per_table {
        let r = if i % 2 == 0 {
            rule(dev, m1, &dmac_value(mac(i as u64)), &[out])
        } else {
            rule(dev, m2, &reg_value(3, i as u32), &[out])
        };
        rules.push(r);
    }
    let full = max_rules_per_table as u64 + 10;
    fails(
        dev.rule_create(m1, &dmac_value(mac(full)).bytes, &[out]),
        Errno::ENOSPC,
        "one rule too many (first matcher)",
    );
    fails(
        dev.rule_create(m2, &reg_value(3, full as u32).bytes, &[out]),
        Errno::ENOSPC,
        "one rule too many (second matcher)",
    );
    let t2 = table(dev, p.d, 2);
    let m3 = matcher(dev, t2, 0, &dmac_mask());
    rule(dev, m3, &dmac_value(mac(full)), &[out]);
    let last = rules.pop().expect("at least one rule");
    ok(dev.rule_destroy(last), "rule_destroy");
    rule(dev, m1, &dmac_value(mac(full)), &[out]);
    fails(
        dev.rule_create(m1, &dmac_value(mac(full + 1)).bytes, &[out]),
        Errno::ENOSPC,
        "full again",
    );
    assert_eq!(egress(dev, p.d, &frame(full)), Egress::Vport(vf(0)));
}

/// Flow counters over all bulks: ENOSPC past the device's count.
pub fn enospc_counters<D: Device>(dev: &D, max_counters: usize) {
    let mut left = max_counters;
    let mut bulks = Vec::new();
    while left > 0 {
        let log = (usize::BITS - 1 - left.leading_zeros()).min(10) as u8;
        bulks.push((ok(dev.counter_bulk_alloc(log), "bulk within capacity"), log));
        left -= 1 << log;
    }
    fails(
        dev.counter_bulk_alloc(0),
        Errno::ENOSPC,
        "one counter too many",
    );
    let (last, log) = bulks.pop().expect("at least one bulk");
    ok(dev.counter_bulk_free(last), "counter_bulk_free");
    if log > 0 {
        fails(
            dev.counter_bulk_alloc(log + 1),
            Errno::ENOSPC,
            "a bulk larger than what was freed",
        );
    }
    ok(dev.counter_bulk_alloc(log), "the freed counters again");
    fails(dev.counter_bulk_alloc(0), Errno::ENOSPC, "full again");
}

/// Flow meters: ENOSPC past the device's count.
pub fn enospc_meters<D: Device>(dev: &D, max_meters: usize) {
    let d = domain(dev, DomainType::Fdb);
    let next = table(dev, d, 2);
    let spec = ActionSpec::FlowMeter(FlowMeterAttr {
        next_table: next,
        active: true,
        reg_c_index: 5,
        params: MeterParams::single_rate(1_000_000, 10_000, MeterMode::Bytes)
            .encode()
            .to_vec(),
    });
    let mut meters = Vec::new();
    for _ in 0..max_meters {
        meters.push(action(dev, d, spec.clone()));
    }
    fails(
        dev.action_create(d, spec.clone()),
        Errno::ENOSPC,
        "one meter too many",
    );
    // Other actions are not meters.
    action(dev, d, ActionSpec::Drop);
    let m = meters.pop().expect("at least one meter");
    ok(dev.action_destroy(m), "destroy a meter");
    action(dev, d, spec.clone());
    fails(dev.action_create(d, spec), Errno::ENOSPC, "full again");
}

/// Handles of destroyed objects are EINVAL everywhere, also once their
/// slot is reused.
pub fn stale_handles_einval<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let a = to_vport(dev, p.d, vf(0));
    let v = dmac_value(mac(1));

    let r = rule(dev, m, &v, &[a]);
    ok(dev.rule_destroy(r), "rule_destroy");
    fails(dev.rule_destroy(r), Errno::EINVAL, "rule destroyed twice");
    let r2 = rule(dev, m, &v, &[a]);
    fails(dev.rule_destroy(r), Errno::EINVAL, "old rule handle");
    assert_eq!(
        egress(dev, p.d, &frame(1)),
        Egress::Vport(vf(0)),
        "r2 lives"
    );
    ok(dev.rule_destroy(r2), "rule_destroy");

    ok(dev.matcher_destroy(m), "matcher_destroy");
    fails(
        dev.matcher_destroy(m),
        Errno::EINVAL,
        "matcher destroyed twice",
    );
    fails(
        dev.rule_create(m, &v.bytes, &[a]),
        Errno::EINVAL,
        "rule in a destroyed matcher",
    );
    let m2 = matcher(dev, p.t1, 0, &dmac_mask());
    fails(
        dev.rule_create(m, &v.bytes, &[a]),
        Errno::EINVAL,
        "old matcher handle",
    );

    ok(dev.action_destroy(a), "action_destroy");
    fails(
        dev.action_destroy(a),
        Errno::EINVAL,
        "action destroyed twice",
    );
    let a2 = to_vport(dev, p.d, vf(1));
    fails(dev.action_destroy(a), Errno::EINVAL, "old action handle");
    fails(
        dev.rule_create(m2, &v.bytes, &[a]),
        Errno::EINVAL,
        "rule with a destroyed action",
    );
    fails(
        dev.action_create(p.d, ActionSpec::DestArray(vec![a])),
        Errno::EINVAL,
        "dest_array of a destroyed action",
    );
    rule(dev, m2, &v, &[a2]);
    assert_eq!(
        egress(dev, p.d, &frame(1)),
        Egress::Vport(vf(1)),
        "a2 lives"
    );

    let t = table(dev, p.d, 5);
    ok(dev.table_destroy(t), "table_destroy");
    fails(dev.table_destroy(t), Errno::EINVAL, "table destroyed twice");
    let t_new = table(dev, p.d, 5);
    fails(dev.table_destroy(t), Errno::EINVAL, "old table handle");
    matcher(dev, t_new, 0, &buf());
    fails(
        dev.matcher_create(t, 0, 0, &buf().bytes),
        Errno::EINVAL,
        "matcher in a destroyed table",
    );
    fails(
        dev.action_create(p.d, ActionSpec::DestTable(t)),
        Errno::EINVAL,
        "dest_table to a destroyed table",
    );

    let bulk = ok(dev.counter_bulk_alloc(1), "counter_bulk_alloc");
    ok(dev.counter_bulk_free(bulk), "counter_bulk_free");
    fails(
        dev.counter_bulk_free(bulk),
        Errno::EINVAL,
        "bulk freed twice",
    );
    let bulk2 = ok(dev.counter_bulk_alloc(1), "counter_bulk_alloc");
    fails(
        dev.counter_bulk_free(bulk),
        Errno::EINVAL,
        "old bulk handle",
    );
    assert_eq!(query(dev, bulk2).len(), 2, "the new bulk is intact");
    let mut out = Vec::new();
    fails(
        dev.counter_bulk_query(bulk, &mut out),
        Errno::EINVAL,
        "query of a freed bulk",
    );
    fails(
        dev.action_create(p.d, ActionSpec::FlowCounter { bulk, offset: 0 }),
        Errno::EINVAL,
        "counter in a freed bulk",
    );

    let forged = RuleId {
        index: 1 << 20,
        generation: 1,
    };
    fails(
        dev.rule_destroy(forged),
        Errno::EINVAL,
        "a handle never made",
    );

    let d = domain(dev, DomainType::Fdb);
    ok(dev.domain_sync(d, SyncFlags::ALL), "domain_sync");
    ok(dev.domain_destroy(d), "domain_destroy");
    fails(
        dev.domain_destroy(d),
        Errno::EINVAL,
        "domain destroyed twice",
    );
    let d2 = domain(dev, DomainType::Fdb);
    fails(dev.domain_destroy(d), Errno::EINVAL, "old domain handle");
    table(dev, d2, 1);
    fails(
        dev.table_create(d, 1),
        Errno::EINVAL,
        "table in a dead domain",
    );
    fails(
        dev.action_create(d, ActionSpec::Drop),
        Errno::EINVAL,
        "action in a dead domain",
    );
    fails(
        dev.domain_sync(d, SyncFlags::ALL),
        Errno::EINVAL,
        "sync of a dead domain",
    );
    fails(
        dev.domain_allow_duplicate_rules(d, false),
        Errno::EINVAL,
        "duplicates of a dead domain",
    );
}

/// push_vlan takes TPID 0x8100 or 0x88a8 only.
pub fn push_vlan_tpid<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    for tpid in [0x0800u32, 0x9100, 0x0000, 0x8101, 0xffff] {
        fails(
            dev.action_create(
                d,
                ActionSpec::PushVlan {
                    header: tpid << 16 | 10,
                },
            ),
            Errno::EINVAL,
            &format!("push_vlan TPID {tpid:#x}"),
        );
    }
    for tpid in [0x8100u32, 0x88a8] {
        action(
            dev,
            d,
            ActionSpec::PushVlan {
                header: tpid << 16 | 0xe00a,
            },
        );
    }
}

/// Modify-header bytes the library refuses, with their errno.
pub fn modify_header_bad_bytes<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let set_word = |field: u16, offset: u8, length: u8, data: u32| -> [u8; 8] {
        let hi = 1u32 << 28 | u32::from(field) << 16 | u32::from(offset) << 8 | u32::from(length);
        (u64::from(hi) << 32 | u64::from(data)).to_be_bytes()
    };
    let good = ModifyOp::set(ModifyField::IpTtl, 9).encode();
    let cases: Vec<(Vec<u8>, Errno, &str)> = vec![
        (Vec::new(), Errno::EINVAL, "no actions"),
        (good[..4].to_vec(), Errno::EINVAL, "4 bytes"),
        ([&good[..], &good[..4]].concat(), Errno::EINVAL, "12 bytes"),
        (
            {
                let mut b = good;
                b[0] &= 0x0f;
                b.to_vec()
            },
            Errno::EOPNOTSUPP,
            "action type 0",
        ),
        (
            {
                let mut b = good;
                b[0] = (b[0] & 0x0f) | 0x40;
                b.to_vec()
            },
            Errno::EOPNOTSUPP,
            "action type 4",
        ),
        (
            set_word(0x0ffe, 0, 8, 1).to_vec(),
            Errno::EINVAL,
            "unknown field",
        ),
        (
            ModifyOp::Add {
                field: ModifyField::SmacLo,
                data: 1,
            }
            .encode()
            .to_vec(),
            Errno::EINVAL,
            "ADD on a MAC",
        ),
        (
            set_word(ModifyField::IpTtl.id(), 4, 8, 1).to_vec(),
            Errno::EINVAL,
            "offset + length beyond the TTL",
        ),
        (
            set_word(ModifyField::TcpSport.id(), 0, 0, 1).to_vec(),
            Errno::EINVAL,
            "length 0 (32 bits) on a 16-bit field",
        ),
        (
            encode_list(&[
                ModifyOp::set(ModifyField::Sipv4, 1),
                ModifyOp::set(ModifyField::Dipv6(3), 1),
            ]),
            Errno::EOPNOTSUPP,
            "IPv4 and IPv6 fields in one list",
        ),
        (
            encode_list(&[
                ModifyOp::set(ModifyField::TcpSport, 1),
                ModifyOp::set(ModifyField::UdpDport, 1),
            ]),
            Errno::EINVAL,
            "TCP and UDP fields in one list",
        ),
        (
            [&good[..], &set_word(0x0ffe, 0, 8, 1)[..]].concat(),
            Errno::EINVAL,
            "a bad second action",
        ),
    ];
    for (bytes, want, what) in cases {
        fails(
            dev.action_create(d, ActionSpec::ModifyHeader(bytes)),
            want,
            what,
        );
    }
    modify(
        dev,
        d,
        &[
            ModifyOp::set(ModifyField::IpTtl, 9),
            ModifyOp::Add {
                field: ModifyField::IpTtl,
                data: 0xff,
            },
            ModifyOp::set(ModifyField::RegC(2), 0xdead_beef),
        ],
    );
}

// ---------------------------------------------------------------------------
// Actions on frames.

/// drop: the frame is dropped by the rule; other frames miss.
pub fn action_drop<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let drop = action(dev, p.d, ActionSpec::Drop);
    rule(dev, m, &dmac_value(mac(1)), &[drop]);
    assert_eq!(
        egress(dev, p.d, &frame(1)),
        Egress::Drop(DropCause::Rule),
        "dropped"
    );
    assert_eq!(egress(dev, p.d, &frame(2)), manager(), "other flows miss");
}

/// default_miss and a plain miss both go to the eSwitch manager, on the
/// representor of the ingress vport.
pub fn action_default_miss<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let miss = action(dev, p.d, ActionSpec::DefaultMiss);
    let bulk = ok(dev.counter_bulk_alloc(0), "counter_bulk_alloc");
    let ctr = action(dev, p.d, ActionSpec::FlowCounter { bulk, offset: 0 });
    rule(dev, m, &dmac_value(mac(1)), &[ctr, miss]);
    for from in [vf(0), vf(5), Vport::UPLINK, Vport::PF] {
        for i in [1, 2] {
            let f = frame(i);
            let out = one(dev, p.d, from, &f);
            assert_eq!(out.egress, Egress::Manager { ingress: from }, "flow {i}");
            assert_eq!(out.bytes, f, "unchanged");
        }
    }
    assert_eq!(query(dev, bulk)[0].packets, 4, "default_miss rule counted");
}

/// dest_vport: the frame leaves on the vport unchanged.
pub fn action_dest_vport<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    for (i, v) in [vf(0), vf(15), Vport::UPLINK, Vport::PF]
        .into_iter()
        .enumerate()
    {
        let out = to_vport(dev, p.d, v);
        rule(dev, m, &dmac_value(mac(i as u64)), &[out]);
        let f = frame_to(mac(i as u64), 100 + i);
        let got = one(dev, p.d, ingress(), &f);
        assert_eq!(got.egress, Egress::Vport(v));
        assert_eq!(got.bytes, f, "bytes unchanged");
        assert!(!got.sampled);
    }
}

/// dest_table: the walk continues in the higher table, skipping levels.
pub fn action_dest_table<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t7 = table(dev, p.d, 7);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m7 = matcher(dev, t7, 0, &dmac_mask());
    let to_t7 = action(dev, p.d, ActionSpec::DestTable(t7));
    rule(dev, m1, &dmac_value(mac(1)), &[to_t7]);
    rule(dev, m1, &dmac_value(mac(2)), &[to_t7]);
    let out = to_vport(dev, p.d, vf(4));
    rule(dev, m7, &dmac_value(mac(1)), &[out]);
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(vf(4)));
    assert_eq!(
        egress(dev, p.d, &frame(2)),
        manager(),
        "a miss in the last table"
    );
}

/// dest_array to two vports and a table: three copies, each as it came.
pub fn action_dest_array<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &buf());
    let a = to_vport(dev, p.d, vf(0));
    let b = to_vport(dev, p.d, vf(1));
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let array = action(dev, p.d, ActionSpec::DestArray(vec![a, b, to_t2]));
    rule(dev, m1, &dmac_value(mac(1)), &[array]);
    let bulk = ok(dev.counter_bulk_alloc(0), "counter_bulk_alloc");
    let ctr = action(dev, p.d, ActionSpec::FlowCounter { bulk, offset: 0 });
    let c = to_vport(dev, p.d, vf(2));
    rule(dev, m2, &buf(), &[ctr, c]);
    let f = frame(1);
    let out = dev.send(p.d, 0, ingress(), &f);
    let mut egresses: Vec<Egress> = out.iter().map(|o| o.egress).collect();
    egresses.sort_by_key(|e| format!("{e:?}"));
    let mut want = vec![
        Egress::Vport(vf(0)),
        Egress::Vport(vf(1)),
        Egress::Vport(vf(2)),
    ];
    want.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(egresses, want, "one copy per destination: {out:?}");
    assert!(out.iter().all(|o| o.bytes == f), "copies unchanged");
    assert_eq!(
        query(dev, bulk)[0],
        CounterValue {
            packets: 1,
            bytes: f.len() as u64
        },
        "the table's copy was counted once"
    );
}

/// flow_counter: packets and bytes of the frames that hit the rule.
pub fn action_counter<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let bulk = ok(dev.counter_bulk_alloc(2), "counter_bulk_alloc");
    let ctr = action(dev, p.d, ActionSpec::FlowCounter { bulk, offset: 2 });
    let out = to_vport(dev, p.d, vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[ctr, out]);
    let mut bytes = 0;
    for n in 0..10 {
        let f = frame_to(mac(1), 30 * n);
        bytes += f.len() as u64;
        assert_eq!(egress(dev, p.d, &f), Egress::Vport(vf(0)));
        egress(dev, p.d, &frame(2));
    }
    let c = query(dev, bulk);
    assert_eq!(c.len(), 4, "the whole bulk");
    assert_eq!(c[2], CounterValue { packets: 10, bytes });
    for i in [0, 1, 3] {
        assert_eq!(c[i], CounterValue::default(), "unused counter {i}");
    }
}

/// A meter action writing colours to `reg` and continuing in `next`.
fn meter_spec(next: TableId, reg: u8, params: &MeterParams, active: bool) -> ActionSpec {
    ActionSpec::FlowMeter(FlowMeterAttr {
        next_table: next,
        active,
        reg_c_index: reg,
        params: params.encode().to_vec(),
    })
}

/// flow_meter: the colour lands in the reg_c and the next table sees it;
/// an inactive meter colours everything green.
pub fn action_meter<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &reg_mask(5));
    let big = MeterParams::single_rate(1_000_000, 1_000_000, MeterMode::Bytes);
    let tiny = MeterParams::single_rate(100, 1, MeterMode::Bytes);
    let metered = action(dev, p.d, meter_spec(t2, 5, &big, true));
    let inactive = action(dev, p.d, meter_spec(t2, 5, &tiny, false));
    rule(dev, m1, &dmac_value(mac(1)), &[metered]);
    rule(dev, m1, &dmac_value(mac(2)), &[inactive]);
    let green = to_vport(dev, p.d, vf(2));
    let drop = action(dev, p.d, ActionSpec::Drop);
    rule(dev, m2, &reg_value(5, Color::Green as u32), &[green]);
    rule(dev, m2, &reg_value(5, Color::Red as u32), &[drop]);
    for i in [1, 2] {
        for n in 0..20 {
            let out = one(dev, p.d, ingress(), &frame_to(mac(i), 100 + n));
            assert_eq!(out.egress, Egress::Vport(vf(2)), "flow {i}: green");
            assert_eq!(out.regs[5], Color::Green as u32, "colour in reg_c_5");
        }
    }
}

/// flow_sampler with ratio 1: every frame is sampled once, and the
/// original continues in the default table.
pub fn action_sampler<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &buf());
    let sink = to_vport(dev, p.d, vf(9));
    let sampler = action(
        dev,
        p.d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 1,
            default_next_table: t2,
            sample_actions: vec![sink],
            action: None,
        }),
    );
    rule(dev, m1, &dmac_value(mac(1)), &[sampler]);
    let out = to_vport(dev, p.d, vf(1));
    rule(dev, m2, &buf(), &[out]);
    for n in 0..10 {
        let f = frame_to(mac(1), n * 10);
        let got = dev.send(p.d, 0, ingress(), &f);
        assert_eq!(got.len(), 2, "a copy and the original: {got:?}");
        let copy = got.iter().find(|o| o.sampled).expect("a sampled copy");
        let orig = got.iter().find(|o| !o.sampled).expect("the original");
        assert_eq!(copy.egress, Egress::Vport(vf(9)));
        assert_eq!(orig.egress, Egress::Vport(vf(1)));
        assert_eq!(copy.bytes, f);
        assert_eq!(orig.bytes, f);
    }
}

/// `frame` with a tag inserted after the MAC addresses.
fn with_tag(frame: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut v = frame[..12].to_vec();
    v.extend_from_slice(&tpid.to_be_bytes());
    v.extend_from_slice(&tci.to_be_bytes());
    v.extend_from_slice(&frame[12..]);
    v
}

/// push_vlan inserts the tag after the MACs; pop_vlan removes the outer
/// tag.
pub fn action_push_pop_vlan<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let push = action(
        dev,
        p.d,
        ActionSpec::PushVlan {
            header: 0x8100 << 16 | 0x6064,
        },
    );
    let pop = action(dev, p.d, ActionSpec::PopVlan);
    let out = to_vport(dev, p.d, vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[push, out]);
    rule(dev, m, &dmac_value(mac(2)), &[pop, out]);
    let plain = frame_to(mac(1), 100);
    let got = one(dev, p.d, ingress(), &plain);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(got.bytes, with_tag(&plain, 0x8100, 0x6064), "tag pushed");

    let untagged = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, mac(2))
        .payload(100);
    let tagged = untagged.clone().vlan(0x8100, 0x0123).build();
    let got = one(dev, p.d, ingress(), &tagged);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(got.bytes, untagged.build(), "tag popped");
}

/// modify_header rewrites the header fields it names.
pub fn action_modify_header<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let new_dmac: u64 = 0x0a0b_0c0d_0e0f;
    let new_smac: u64 = 0x1222_3344_5566;
    let rewrite = modify(
        dev,
        p.d,
        &[
            ModifyOp::set(ModifyField::DmacHi, (new_dmac >> 16) as u32),
            ModifyOp::set(ModifyField::DmacLo, new_dmac as u32 & 0xffff),
            ModifyOp::set(ModifyField::SmacHi, (new_smac >> 16) as u32),
            ModifyOp::set(ModifyField::SmacLo, new_smac as u32 & 0xffff),
            ModifyOp::set(ModifyField::IpTtl, 7),
            ModifyOp::set(ModifyField::RegC(6), 0x1234_5678),
        ],
    );
    let out = to_vport(dev, p.d, vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[rewrite, out]);
    let spec = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000)).payload(64);
    let f = spec.clone().macs(SRC_MAC, mac(1)).build();
    let got = one(dev, p.d, ingress(), &f);
    let mut want = spec.macs(new_smac, new_dmac);
    want.ttl = 7;
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(got.bytes, want.build(), "MACs and TTL rewritten");
    assert_eq!(got.regs[6], 0x1234_5678, "register written");
}

// ---------------------------------------------------------------------------
// Counters under random traffic.

/// Many rules with their own counters, random traffic with misses, two
/// matchers by priority: every counter equals an independent count, and a
/// bulk query returns the whole bulk.
pub fn counters_exact_under_random_traffic<D: Device>(dev: &D) {
    const DSTS: u64 = 80;
    const PORTS: u64 = 20;
    const ROOT: usize = 127;
    let d = domain(dev, DomainType::Fdb);
    let root = table(dev, d, 0);
    let t1 = table(dev, d, 1);
    let bulk = ok(dev.counter_bulk_alloc(7), "counter_bulk_alloc");
    let ctr = |offset: usize| {
        action(
            dev,
            d,
            ActionSpec::FlowCounter {
                bulk,
                offset: offset as u32,
            },
        )
    };
    let rm = matcher(dev, root, 0, &buf());
    let to_t1 = action(dev, d, ActionSpec::DestTable(t1));
    rule(dev, rm, &buf(), &[ctr(ROOT), to_t1]);
    let by_dst = matcher(
        dev,
        t1,
        0,
        &buf()
            .with(PrmField::OuterIpVersion, 4)
            .with(PrmField::OuterDstIp, 0xffff_ffff),
    );
    let by_port = matcher(
        dev,
        t1,
        1,
        &buf()
            .with(PrmField::OuterIpVersion, 4)
            .with(PrmField::OuterIpProtocol, 0xff)
            .with(PrmField::OuterTcpDport, 0xffff),
    );
    let outs: Vec<ActionId> = (0..12).map(|i| to_vport(dev, d, vf(i))).collect();
    let dst_of = |i: u64| 0x0a01_0000 + i as u32;
    for i in 0..DSTS {
        let v = buf()
            .with(PrmField::OuterIpVersion, 4)
            .with(PrmField::OuterDstIp, u128::from(dst_of(i)));
        rule(dev, by_dst, &v, &[ctr(i as usize), outs[(i % 8) as usize]]);
    }
    for j in 0..PORTS {
        let v = buf()
            .with(PrmField::OuterIpVersion, 4)
            .with(PrmField::OuterIpProtocol, 6)
            .with(PrmField::OuterTcpDport, u128::from(5000 + j));
        rule(
            dev,
            by_port,
            &v,
            &[ctr((DSTS + j) as usize), outs[(8 + j % 4) as usize]],
        );
    }

    let mut want = vec![CounterValue::default(); 128];
    let mut rng = Rng(0x00c0_ffee);
    let from = [vf(0), vf(3), Vport::UPLINK];
    let mut hits = 0;
    for n in 0..6000u64 {
        let dst = if rng.below(2) == 0 {
            dst_of(rng.below(DSTS + 5))
        } else {
            0x0b00_0000 + rng.below(1 << 20) as u32
        };
        let tcp = rng.below(2) == 0;
        let dport = if rng.below(2) == 0 {
            5000 + rng.below(PORTS + 5) as u16
        } else {
            1024 + rng.below(60000) as u16
        };
        let l4 = if tcp {
            L4::tcp(1234, dport)
        } else {
            L4::udp(1234, dport)
        };
        let v6 = rng.below(10) == 0;
        let payload = rng.below(300) as usize;
        let f = if v6 {
            FrameSpec::ipv6(1, u128::from(dst), l4)
        } else {
            FrameSpec::ipv4(0x0a00_0001, dst, l4)
        }
        .payload(payload)
        .build();
        let len = f.len() as u64;
        // The model: the dst matcher first, then TCP ports; IPv4 only.
        let dst_rule = (u64::from(dst.wrapping_sub(dst_of(0))) < DSTS).then(|| {
            let i = u64::from(dst - dst_of(0));
            (i as usize, vf((i % 8) as u16))
        });
        let port_rule = (tcp && (5000..5000 + PORTS as u16).contains(&dport)).then(|| {
            let j = u64::from(dport - 5000);
            ((DSTS + j) as usize, vf((8 + j % 4) as u16))
        });
        let expect = if v6 { None } else { dst_rule.or(port_rule) };
        let ing = from[rng.below(3) as usize];
        let got = dev.send(d, n * 1000, ing, &f);
        assert_eq!(got.len(), 1, "packet {n}: {got:?}");
        want[ROOT].packets += 1;
        want[ROOT].bytes += len;
        match expect {
            Some((i, v)) => {
                hits += 1;
                want[i].packets += 1;
                want[i].bytes += len;
                assert_eq!(got[0].egress, Egress::Vport(v), "packet {n}");
            }
            None => assert_eq!(
                got[0].egress,
                Egress::Manager { ingress: ing },
                "packet {n} misses"
            ),
        }
    }
    assert!(hits > 1000 && hits < 5000, "traffic mixes hits and misses");
    let mut got = vec![CounterValue::default(); 3];
    ok(dev.counter_bulk_query(bulk, &mut got), "counter_bulk_query");
    assert_eq!(got.len(), 128, "the query returns the whole bulk");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "counter {i}");
    }
}

// ---------------------------------------------------------------------------
// Meter conformance.

/// rule → meter (next table, reg_c 5) → next table matches the colour
/// with counters, red dropped. 2×CIR of 1000-byte frames spread over one
/// simulated second: green bytes within 1% of CIR × 1 s + CBS, at several
/// CIRs.
pub fn meter_rate_conformance<D: Device>(dev: &D) {
    for cir in [500_000u64, 2_000_000, 10_000_000, 40_000_000] {
        meter_one_rate(dev, cir, 32_000);
    }
}

fn meter_one_rate<D: Device>(dev: &D, cir: u64, cbs: u64) {
    const LEN: u64 = 1000;
    let params = MeterParams::single_rate(cir, cbs, MeterMode::Bytes);
    assert!(
        (params.cir_per_sec() - cir as f64).abs() <= 0.01 * cir as f64,
        "representable CIR {} close to {cir}",
        params.cir_per_sec()
    );
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let meter = action(dev, p.d, meter_spec(t2, 5, &params, true));
    rule(dev, m1, &dmac_value(mac(1)), &[meter]);
    let bulk = ok(dev.counter_bulk_alloc(2), "counter_bulk_alloc");
    let m2 = matcher(dev, t2, 0, &reg_mask(5));
    let fwd = to_vport(dev, p.d, vf(1));
    let drop = action(dev, p.d, ActionSpec::Drop);
    for color in [Color::Green, Color::Yellow, Color::Red] {
        let ctr = action(
            dev,
            p.d,
            ActionSpec::FlowCounter {
                bulk,
                offset: color as u32,
            },
        );
        let last = if color == Color::Red { drop } else { fwd };
        rule(dev, m2, &reg_value(5, color as u32), &[ctr, last]);
    }
    let f = frame_to(mac(1), 958);
    assert_eq!(f.len() as u64, LEN);
    let n = 2 * cir / LEN;
    let (mut forwarded, mut dropped) = (0u64, 0u64);
    for i in 0..n {
        let t = (i + 1) * 1_000_000_000 / n;
        let out = dev.send(p.d, t, ingress(), &f);
        assert_eq!(out.len(), 1, "{out:?}");
        match out[0].egress {
            Egress::Vport(v) if v == vf(1) => forwarded += 1,
            Egress::Drop(DropCause::Rule) => dropped += 1,
            e => panic!("unexpected egress {e:?}"),
        }
    }
    let c = query(dev, bulk);
    let (green, yellow, red) = (
        c[Color::Green as usize],
        c[Color::Yellow as usize],
        c[Color::Red as usize],
    );
    let expect = params.cir_per_sec() + params.cbs() as f64;
    let g = green.bytes as f64;
    assert!(
        (g - expect).abs() <= 0.01 * expect,
        "CIR {cir}: green {g} bytes, expected {expect} ±1%"
    );
    assert_eq!(yellow, CounterValue::default(), "no excess bucket");
    assert_eq!(green.packets + red.packets, n, "every packet coloured");
    assert_eq!(green.bytes, green.packets * LEN);
    assert_eq!(red.bytes, red.packets * LEN);
    assert_eq!(forwarded, green.packets, "green forwarded");
    assert_eq!(dropped, red.packets, "red dropped");
}

// ---------------------------------------------------------------------------
// Sampler conformance.

/// A sampler of ratio N over many packets samples within 5 sigma of n/N;
/// every original is forwarded (after the sampler's SET), every copy is
/// marked sampled and carries the flow id its modify-header wrote.
pub fn sampler_ratio_within_bounds<D: Device>(dev: &D) {
    sampler_one_ratio(dev, 64, 100_000);
    sampler_one_ratio(dev, 5, 20_000);
}

fn sampler_one_ratio<D: Device>(dev: &D, ratio: u32, n: u64) {
    const FLOW_REG: u8 = 3;
    const FLOW_ID: u32 = 0x00c0_ffee;
    const MARK_REG: u8 = 4;
    const MARK: u32 = 0x5a5a;
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let tag = modify(
        dev,
        p.d,
        &[ModifyOp::set(ModifyField::RegC(FLOW_REG), FLOW_ID)],
    );
    let sink = to_vport(dev, p.d, vf(9));
    let sampler = action(
        dev,
        p.d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: ratio,
            default_next_table: t2,
            sample_actions: vec![tag, sink],
            action: Some(ModifyOp::set(ModifyField::RegC(MARK_REG), MARK).encode()),
        }),
    );
    rule(dev, m1, &dmac_value(mac(1)), &[sampler]);
    let m2 = matcher(dev, t2, 0, &reg_mask(MARK_REG));
    let out = to_vport(dev, p.d, vf(1));
    rule(dev, m2, &reg_value(MARK_REG, MARK), &[out]);
    let mut sampled = 0u64;
    for i in 0..n {
        let f = frame_to(mac(1), (i % 50) as usize);
        let got = dev.send(p.d, i, ingress(), &f);
        let originals: Vec<&OutFrame> = got.iter().filter(|o| !o.sampled).collect();
        assert_eq!(originals.len(), 1, "packet {i}: one original: {got:?}");
        let orig = originals[0];
        assert_eq!(orig.egress, Egress::Vport(vf(1)), "original forwarded");
        assert_eq!(orig.bytes, f, "original unchanged");
        assert_ne!(orig.regs[usize::from(FLOW_REG)], FLOW_ID, "id on copy only");
        for copy in got.iter().filter(|o| o.sampled) {
            sampled += 1;
            assert_eq!(copy.egress, Egress::Vport(vf(9)), "copy to the sink");
            assert_eq!(copy.bytes, f, "copy unchanged");
            assert_eq!(copy.regs[usize::from(FLOW_REG)], FLOW_ID, "flow id");
        }
        assert!(got.len() <= 2, "at most one copy: {got:?}");
    }
    let p1 = 1.0 / f64::from(ratio);
    let mean = n as f64 * p1;
    let sigma = (n as f64 * p1 * (1.0 - p1)).sqrt();
    let dev_sigma = (sampled as f64 - mean).abs() / sigma;
    assert!(
        dev_sigma <= 5.0,
        "ratio {ratio}: {sampled} of {n} sampled, expected {mean:.0} (±5σ = {:.0})",
        5.0 * sigma
    );
}

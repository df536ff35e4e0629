//! Conformance cases: restore tags ([`crate::restore`]), what the device
//! tells software about the packets it hands over. They need the
//! slow-path receive queue; a device without one is checked for its
//! clean refusal and the case is skipped, naming why.

use super::*;
use crate::restore::{REG_TAG, TAG_MAX};

/// Skips the case where the device has no restore path, after checking
/// that it says so cleanly (EOPNOTSUPP for a restore rule).
pub(super) fn restore_path_or_skip<D: Device>(dev: &D) {
    if let Err(why) = dev.restore_path() {
        fails(
            dev.restore_rule_create(1),
            Errno::EOPNOTSUPP,
            "a restore rule without a restore path",
        );
        std::panic::panic_any(NeedsPorts(format!("needs a restore path: {why}")));
    }
}

/// Writes reg_c_1 = `tag` (the FDB side of a restore tag).
fn write_tag<D: Device>(dev: &D, d: DomainId, tag: u32) -> ActionId {
    modify(dev, d, &[ModifyOp::set(ModifyField::RegC(REG_TAG), tag)])
}

/// The one frame that reached the manager, of those `got`.
#[track_caller]
pub(super) fn to_manager<D: Device>(dev: &D, got: &[OutFrame]) -> OutFrame {
    let up: Vec<&OutFrame> = got.iter().filter(|o| o.egress == manager(dev)).collect();
    assert_eq!(up.len(), 1, "one frame to the manager: {got:?}");
    up[0].clone()
}

/// Restore rules: tag 0 (the plain miss) and tags beyond the CQE's 24
/// bits are EINVAL, a tag steered twice is EEXIST, a destroyed rule's
/// handle is EINVAL; a destroyed rule's tag can be steered again.
pub fn restore_rule_errors<D: Device>(dev: &D) {
    restore_path_or_skip(dev);
    fails(dev.restore_rule_create(0), Errno::EINVAL, "tag 0");
    fails(
        dev.restore_rule_create(TAG_MAX + 1),
        Errno::EINVAL,
        "a 25-bit tag",
    );
    let r = ok(dev.restore_rule_create(TAG_MAX), "the largest tag");
    fails(
        dev.restore_rule_create(TAG_MAX),
        Errno::EEXIST,
        "the same tag twice",
    );
    ok(dev.restore_rule_destroy(r), "restore_rule_destroy");
    fails(
        dev.restore_rule_destroy(r),
        Errno::EINVAL,
        "a destroyed rule",
    );
    let again = ok(
        dev.restore_rule_create(TAG_MAX),
        "the tag after its rule went",
    );
    ok(dev.restore_rule_destroy(again), "restore_rule_destroy");
}

/// A sampled copy is told apart from a miss: a flow writes its tag, then
/// samples every packet to the manager (the copy action is default_miss,
/// as the offload manager builds it) and forwards the original from level
/// 2. With a restore rule for the tag, the copy reaches software with
/// that flow tag; a frame of another flow misses with tag 0; both from
/// the same source (reg_b). Without the rule the copy is a tag-0 frame,
/// indistinguishable from a miss: the rule, not reg_c_1, makes the tag.
pub fn restore_sampled_copy_told_apart<D: Device>(dev: &D) {
    restore_path_or_skip(dev);
    const TAG: u32 = 0x00ab_cdef;
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &reg_mask(REG_TAG));
    let miss = action(dev, p.d, ActionSpec::DefaultMiss);
    let sampler = sampler(dev, p.d, 1, t2, &[miss]);
    let mark = write_tag(dev, p.d, TAG);
    rule(dev, m1, &dmac_value(mac(1)), &[mark, sampler]);
    let out = to_vport(dev, p.d, dev.vf(1));
    rule(dev, m2, &reg_value(REG_TAG, TAG), &[out]);
    let steer = ok(dev.restore_rule_create(TAG), "restore_rule_create");

    let plain = one(dev, p.d, dev.ingress(), &frame(2));
    assert_eq!(plain.egress, manager(dev), "another flow misses");
    assert_eq!(plain.tag, 0, "a plain miss has tag 0");
    for n in 0..5 {
        let f = frame_to(mac(1), 60 + n * 10);
        let got = dev.send(p.d, 0, dev.ingress(), &f);
        assert_eq!(got.len(), 2, "a copy and the original: {got:?}");
        let copy = to_manager(dev, &got);
        assert_eq!(copy.tag, TAG, "the copy carries its flow's tag");
        assert_eq!(copy.reg_b, plain.reg_b, "and says where it came from");
        assert_eq!(copy.bytes, f, "the copy is the packet as it came");
        let orig = got.iter().find(|o| o.egress != manager(dev));
        assert_eq!(orig.map(|o| o.egress), Some(Egress::Vport(dev.vf(1))));
    }
    ok(dev.restore_rule_destroy(steer), "restore_rule_destroy");
    let got = dev.send(p.d, 0, dev.ingress(), &frame(1));
    assert_eq!(
        to_manager(dev, &got).tag,
        0,
        "without its rule the copy looks like a miss"
    );
}

/// A packet rewritten by stage 1 that misses stage 2 is restored exactly:
/// it reaches software rewritten (MACs and TTL as stage 1 left them) with
/// the tag stage 1 wrote, from its source, so software continues at stage
/// 2 with nothing done twice and nothing lost. A packet whose stage-2
/// rule exists is forwarded by it (stage 2 works).
pub fn restore_stage2_miss_exact<D: Device>(dev: &D) {
    restore_path_or_skip(dev);
    const HIT: u32 = 0x11;
    const MISS: u32 = 0x0f_0042;
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &reg_mask(REG_TAG));
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let new_dmac: u64 = 0x0a0b_0c0d_0e0f;
    let stage1 = |tag: u32| {
        modify(
            dev,
            p.d,
            &[
                ModifyOp::set(ModifyField::DmacHi, (new_dmac >> 16) as u32),
                ModifyOp::set(ModifyField::DmacLo, new_dmac as u32 & 0xffff),
                ModifyOp::set(ModifyField::IpTtl, 9),
                ModifyOp::set(ModifyField::RegC(REG_TAG), tag),
            ],
        )
    };
    let (hit, missing) = (stage1(HIT), stage1(MISS));
    rule(dev, m1, &dmac_value(mac(1)), &[hit, to_t2]);
    rule(dev, m1, &dmac_value(mac(2)), &[missing, to_t2]);
    let out = to_vport(dev, p.d, dev.vf(2));
    rule(dev, m2, &reg_value(REG_TAG, HIT), &[out]);
    ok(dev.restore_rule_create(MISS), "restore_rule_create");

    let plain = one(dev, p.d, dev.ingress(), &frame(3));
    assert_eq!((plain.egress, plain.tag), (manager(dev), 0), "a plain miss");
    let spec = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000)).payload(64);
    let mut want = spec.clone().macs(SRC_MAC, new_dmac);
    want.ttl = 9;
    let want = want.build();

    let through = one(
        dev,
        p.d,
        dev.ingress(),
        &spec.clone().macs(SRC_MAC, mac(1)).build(),
    );
    assert_eq!(through.egress, Egress::Vport(dev.vf(2)), "stage 2 forwards");
    assert_eq!(through.bytes, want, "as stage 1 rewrote it");

    let up = one(dev, p.d, dev.ingress(), &spec.macs(SRC_MAC, mac(2)).build());
    assert_eq!(up.egress, manager(dev), "stage 2 misses: to software");
    assert_eq!(up.tag, MISS, "with the tag stage 1 wrote");
    assert_eq!(up.bytes, want, "rewritten exactly as stage 1 did");
    assert_eq!(up.reg_b, plain.reg_b, "from its source");
}

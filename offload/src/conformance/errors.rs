//! Conformance cases: each documented error with its errno.

use super::*;

/// With duplicates disabled a second rule with the same value is EEXIST,
/// and the refused rule leaves nothing behind.
pub fn duplicate_rule_eexist_when_disallowed<D: Device>(dev: &D) {
    let p = pipe(dev);
    ok(
        dev.domain_allow_duplicate_rules(p.d, false),
        "disallow duplicates",
    );
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let to_a = to_vport(dev, p.d, dev.vf(0));
    let to_b = to_vport(dev, p.d, dev.vf(1));
    let r1 = rule(dev, m, &dmac_value(mac(1)), &[to_a]);
    fails(
        dev.rule_create(m, &dmac_value(mac(1)).bytes, &[to_b]),
        Errno::EEXIST,
        "same value twice, duplicates disabled",
    );
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(0)));
    // The refused rule holds no reference on its action.
    ok(
        dev.action_destroy(to_b),
        "destroy the refused rule's action",
    );
    // Another value is fine; the value is free again once r1 is gone.
    rule(dev, m, &dmac_value(mac(2)), &[to_a]);
    ok(dev.rule_destroy(r1), "rule_destroy");
    assert_eq!(egress(dev, p.d, &frame(1)), manager(dev));
    rule(dev, m, &dmac_value(mac(1)), &[to_a]);
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(0)));
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
        let out = to_vport(dev, p.d, dev.vf(i));
        rules.push(rule(dev, m, &dmac_value(mac(1)), &[ctr, out]));
    }
    let f = frame(1);
    assert_eq!(
        egress(dev, p.d, &f),
        Egress::Vport(dev.vf(0)),
        "oldest answers"
    );
    ok(dev.rule_destroy(rules[0]), "destroy the answering rule");
    assert_eq!(
        egress(dev, p.d, &f),
        Egress::Vport(dev.vf(1)),
        "next promoted"
    );
    ok(dev.rule_destroy(rules[2]), "destroy a waiting duplicate");
    assert_eq!(
        egress(dev, p.d, &f),
        Egress::Vport(dev.vf(1)),
        "still the same"
    );
    ok(dev.rule_destroy(rules[1]), "destroy the last copy");
    assert_eq!(egress(dev, p.d, &f), manager(dev), "no copy left");
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
    let out = to_vport(dev, p.d, dev.vf(0));
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
        Egress::Vport(dev.vf(0))
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
    let out = to_vport(dev, p.d, dev.vf(0));
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
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(0)));
}

/// The rule's IP version must be the matcher's (EINVAL); the mask takes
/// the IP version number itself (4, 6 or 0), and IP addresses need it.
pub fn ip_version_rules<D: Device>(dev: &D) {
    let p = pipe(dev);
    let mask4 = buf()
        .with(PrmField::OuterIpVersion, 4)
        .with(PrmField::OuterDstIp, 0xffff_ffff);
    let m4 = matcher(dev, p.t1, 0, &mask4);
    let out = to_vport(dev, p.d, dev.vf(0));
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
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(0)));
    let v6 = FrameSpec::ipv6(1, 0x0a00_0002, L4::udp(1000, 2000)).build();
    assert_eq!(egress(dev, p.d, &v6), manager(dev), "IPv6 under a v4 rule");

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
    let out = to_vport(dev, p.d, dev.vf(0));
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
    assert_eq!(egress(dev, p.d, &frame(1)), manager(dev));
}

/// dest_vport exists only in the FDB (EOPNOTSUPP elsewhere) and only to
/// vports the eSwitch has (EINVAL).
pub fn dest_vport_domain_and_vport<D: Device>(dev: &D) {
    let rx = domain(dev, DomainType::NicRx);
    fails(
        dev.action_create(rx, ActionSpec::DestVport(dev.vf(0))),
        Errno::EOPNOTSUPP,
        "dest_vport in NIC_RX",
    );
    let tx = domain(dev, DomainType::NicTx);
    fails(
        dev.action_create(tx, ActionSpec::DestVport(dev.vf(0))),
        Errno::EOPNOTSUPP,
        "dest_vport in NIC_TX",
    );
    let fdb = domain(dev, DomainType::Fdb);
    fails(
        dev.action_create(fdb, ActionSpec::DestVport(NO_SUCH_VPORT)),
        Errno::EINVAL,
        "dest_vport to a vport the eSwitch lacks",
    );
    for v in [dev.vf(0), Vport::UPLINK, Vport::PF] {
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
    let sink = to_vport(dev, p.d, dev.vf(3));
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
    let array_to_t1 = action(
        dev,
        p.d,
        ActionSpec::DestArray(vec![sink.into(), to_t1.into()]),
    );
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
    let out = to_vport(dev, p.d, dev.vf(0));
    let r = rule(dev, m, &dmac_value(mac(1)), &[out]);
    fails(dev.matcher_destroy(m), Errno::EBUSY, "matcher with a rule");
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(0)));
    ok(dev.rule_destroy(r), "rule_destroy");
    ok(dev.matcher_destroy(m), "matcher_destroy once empty");
    assert_eq!(egress(dev, p.d, &frame(1)), manager(dev));
}

/// An action used by a rule or by another action cannot be destroyed.
pub fn busy_action_in_use<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let a = to_vport(dev, p.d, dev.vf(0));
    let b = to_vport(dev, p.d, dev.vf(1));
    let r1 = rule(dev, m, &dmac_value(mac(1)), &[a]);
    let r2 = rule(dev, m, &dmac_value(mac(2)), &[a]);
    let array = action(dev, p.d, ActionSpec::DestArray(vec![a.into(), b.into()]));
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
    let sink = to_vport(dev, d, dev.vf(0));
    let sampler = sampler(dev, d, 10, t, &[sink]);
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
    let out = to_vport(dev, p.d, dev.vf(0));
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
    assert_eq!(egress(dev, p.d, &frame(full)), Egress::Vport(dev.vf(0)));
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
    let a = to_vport(dev, p.d, dev.vf(0));
    let v = dmac_value(mac(1));

    let r = rule(dev, m, &v, &[a]);
    ok(dev.rule_destroy(r), "rule_destroy");
    fails(dev.rule_destroy(r), Errno::EINVAL, "rule destroyed twice");
    let r2 = rule(dev, m, &v, &[a]);
    fails(dev.rule_destroy(r), Errno::EINVAL, "old rule handle");
    assert_eq!(
        egress(dev, p.d, &frame(1)),
        Egress::Vport(dev.vf(0)),
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
    let a2 = to_vport(dev, p.d, dev.vf(1));
    fails(dev.action_destroy(a), Errno::EINVAL, "old action handle");
    fails(
        dev.rule_create(m2, &v.bytes, &[a]),
        Errno::EINVAL,
        "rule with a destroyed action",
    );
    fails(
        dev.action_create(p.d, ActionSpec::DestArray(vec![a.into()])),
        Errno::EINVAL,
        "dest_array of a destroyed action",
    );
    rule(dev, m2, &v, &[a2]);
    assert_eq!(
        egress(dev, p.d, &frame(1)),
        Egress::Vport(dev.vf(1)),
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

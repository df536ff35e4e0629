//! Conformance cases: actions on frames, exact counters, meter and
//! sampler rates.

use super::*;
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
    assert_eq!(
        egress(dev, p.d, &frame(2)),
        manager(dev),
        "other flows miss"
    );
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
    let vfs = [dev.vf(0), dev.vf(5)];
    for from in vfs.into_iter().chain(dev.uplink_and_pf()) {
        for i in [1, 2] {
            let f = frame(i);
            let out = one(dev, p.d, from, &f);
            assert_eq!(out.egress, Egress::Manager { ingress: from }, "flow {i}");
            assert_eq!(out.bytes, f, "unchanged");
        }
    }
    let sent = 2 + dev.uplink_and_pf().len() as u64;
    assert_eq!(
        query(dev, bulk)[0].packets,
        sent,
        "default_miss rule counted"
    );
}

/// dest_vport: the frame leaves on the vport unchanged.
pub fn action_dest_vport<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let vfs = [dev.vf(0), dev.vf(15)];
    for (i, v) in vfs.into_iter().chain(dev.uplink_and_pf()).enumerate() {
        let out = to_vport(dev, p.d, v);
        rule(dev, m, &dmac_value(mac(i as u64)), &[out]);
        let f = frame_to(mac(i as u64), 100 + i);
        let got = one(dev, p.d, dev.ingress(), &f);
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
    let out = to_vport(dev, p.d, dev.vf(4));
    rule(dev, m7, &dmac_value(mac(1)), &[out]);
    assert_eq!(egress(dev, p.d, &frame(1)), Egress::Vport(dev.vf(4)));
    assert_eq!(
        egress(dev, p.d, &frame(2)),
        manager(dev),
        "a miss in the last table"
    );
}

/// dest_array to two vports and a table: three copies, each as it came.
pub fn action_dest_array<D: Device>(dev: &D) {
    let p = pipe(dev);
    let t2 = table(dev, p.d, 2);
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    let m2 = matcher(dev, t2, 0, &buf());
    let a = to_vport(dev, p.d, dev.vf(0));
    let b = to_vport(dev, p.d, dev.vf(1));
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let array = action(
        dev,
        p.d,
        ActionSpec::DestArray(vec![a.into(), b.into(), to_t2.into()]),
    );
    rule(dev, m1, &dmac_value(mac(1)), &[array]);
    let bulk = ok(dev.counter_bulk_alloc(0), "counter_bulk_alloc");
    let ctr = action(dev, p.d, ActionSpec::FlowCounter { bulk, offset: 0 });
    let c = to_vport(dev, p.d, dev.vf(2));
    rule(dev, m2, &buf(), &[ctr, c]);
    let f = frame(1);
    let out = dev.send(p.d, 0, dev.ingress(), &f);
    let mut egresses: Vec<Egress> = out.iter().map(|o| o.egress).collect();
    egresses.sort_by_key(|e| format!("{e:?}"));
    let mut want = vec![
        Egress::Vport(dev.vf(0)),
        Egress::Vport(dev.vf(1)),
        Egress::Vport(dev.vf(2)),
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
    let out = to_vport(dev, p.d, dev.vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[ctr, out]);
    let mut bytes = 0;
    for n in 0..10 {
        let f = frame_to(mac(1), 30 * n);
        bytes += f.len() as u64;
        assert_eq!(egress(dev, p.d, &f), Egress::Vport(dev.vf(0)));
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
    let green = to_vport(dev, p.d, dev.vf(2));
    let drop = action(dev, p.d, ActionSpec::Drop);
    rule(dev, m2, &reg_value(5, Color::Green as u32), &[green]);
    rule(dev, m2, &reg_value(5, Color::Red as u32), &[drop]);
    for i in [1, 2] {
        for n in 0..20 {
            let out = one(dev, p.d, dev.ingress(), &frame_to(mac(i), 100 + n));
            assert_eq!(out.egress, Egress::Vport(dev.vf(2)), "flow {i}: green");
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
    let sink = to_vport(dev, p.d, dev.vf(9));
    let sampler = sampler(dev, p.d, 1, t2, &[sink]);
    rule(dev, m1, &dmac_value(mac(1)), &[sampler]);
    let out = to_vport(dev, p.d, dev.vf(1));
    rule(dev, m2, &buf(), &[out]);
    for n in 0..10 {
        let f = frame_to(mac(1), n * 10);
        let got = dev.send(p.d, 0, dev.ingress(), &f);
        assert_eq!(got.len(), 2, "a copy and the original: {got:?}");
        let copy = got.iter().find(|o| o.sampled).expect("a sampled copy");
        let orig = got.iter().find(|o| !o.sampled).expect("the original");
        assert_eq!(copy.egress, Egress::Vport(dev.vf(9)));
        assert_eq!(orig.egress, Egress::Vport(dev.vf(1)));
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
    let out = to_vport(dev, p.d, dev.vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[push, out]);
    rule(dev, m, &dmac_value(mac(2)), &[pop, out]);
    let plain = frame_to(mac(1), 100);
    let got = one(dev, p.d, dev.ingress(), &plain);
    assert_eq!(got.egress, Egress::Vport(dev.vf(0)));
    assert_eq!(got.bytes, with_tag(&plain, 0x8100, 0x6064), "tag pushed");

    let untagged = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, mac(2))
        .payload(100);
    let tagged = untagged.clone().vlan(0x8100, 0x0123).build();
    let got = one(dev, p.d, dev.ingress(), &tagged);
    assert_eq!(got.egress, Egress::Vport(dev.vf(0)));
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
    let out = to_vport(dev, p.d, dev.vf(0));
    rule(dev, m, &dmac_value(mac(1)), &[rewrite, out]);
    let spec = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000)).payload(64);
    let f = spec.clone().macs(SRC_MAC, mac(1)).build();
    let got = one(dev, p.d, dev.ingress(), &f);
    let mut want = spec.macs(new_smac, new_dmac);
    want.ttl = 7;
    assert_eq!(got.egress, Egress::Vport(dev.vf(0)));
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
    let outs: Vec<ActionId> = (0..12).map(|i| to_vport(dev, d, dev.vf(i))).collect();
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
    let mut rng = megaflow::SplitMix64::new(0x00c0_ffee);
    let from = [dev.vf(0), dev.vf(3), dev.ingress()];
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
            (i as usize, dev.vf((i % 8) as u16))
        });
        let port_rule = (tcp && (5000..5000 + PORTS as u16).contains(&dport)).then(|| {
            let j = u64::from(dport - 5000);
            ((DSTS + j) as usize, dev.vf((8 + j % 4) as u16))
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
    const LEN: u64 = 1000;
    let cirs = [500_000u64, 2_000_000, 10_000_000, 40_000_000];
    // Offered at 2×CIR in frames of LEN bytes.
    let paced = |cir: &u64| {
        dev.steady_frame_rate()
            .is_none_or(|max| 2 * cir / LEN <= max)
    };
    if !cirs.iter().any(paced) {
        std::panic::panic_any(NeedsPorts(format!(
            "the device cannot be sent {} frames/s steadily",
            2 * cirs[0] / LEN
        )));
    }
    for cir in cirs.iter().filter(|c| paced(c)) {
        meter_one_rate(dev, *cir, 32_000);
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
    let fwd = to_vport(dev, p.d, dev.vf(1));
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
    let frames: Vec<(u64, &[u8])> = (0..n)
        .map(|i| ((i + 1) * 1_000_000_000 / n, f.as_slice()))
        .collect();
    let out = dev.send_many(p.d, dev.ingress(), &frames);
    for o in &out {
        assert_eq!(
            o.egress,
            Egress::Vport(dev.vf(1)),
            "only green leaves: {o:?}"
        );
    }
    let forwarded = out.len() as u64;
    let dropped = n - forwarded;
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
    let sink = to_vport(dev, p.d, dev.vf(9));
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
    let out = to_vport(dev, p.d, dev.vf(1));
    rule(dev, m2, &reg_value(MARK_REG, MARK), &[out]);
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| frame_to(mac(1), (i % 50) as usize))
        .collect();
    // 50,000 frames a second (a rate every receiver keeps up with), or
    // the device's steady rate if lower.
    let gap = dev
        .max_frame_rate()
        .map_or(20_000, |r| (1_000_000_000 / r.max(1)).max(20_000));
    let timed: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u64 * gap, f.as_slice()))
        .collect();
    let out = dev.send_many(p.d, dev.ingress(), &timed);
    let (mut sampled, mut originals) = (0u64, 0u64);
    let mut next = frames.iter();
    for o in &out {
        if o.egress == Egress::Vport(dev.vf(9)) {
            sampled += 1;
            if o.sampled {
                // Where the device reports the copy's metadata (the sim).
                assert_eq!(
                    o.regs[usize::from(FLOW_REG)],
                    FLOW_ID,
                    "flow id on the copy"
                );
            }
        } else {
            assert_eq!(o.egress, Egress::Vport(dev.vf(1)), "original forwarded");
            assert!(!o.sampled, "an original is not a copy");
            assert_ne!(o.regs[usize::from(FLOW_REG)], FLOW_ID, "id on copy only");
            // Originals leave in order, unchanged.
            assert_eq!(
                Some(&o.bytes),
                next.next(),
                "original {originals} unchanged"
            );
            originals += 1;
        }
    }
    assert_eq!(originals, n, "every original forwarded once");
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

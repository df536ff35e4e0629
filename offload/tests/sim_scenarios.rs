//! Packet-level scenarios on the software eSwitch ([`SimBackend`]): what
//! leaves the eSwitch, byte for byte, for forwarding, VLAN push/pop, header
//! rewrites (checked against frames built from scratch, checksums
//! included), meters, samplers, metadata registers across tables, source
//! port matching, misses; rules encoded from real megaflow matches hit
//! exactly the packets the match describes (property test); and rule
//! updates concurrent with forwarding keep counters exact.

mod sim_common;

use sim_common::*;

// ---------------------------------------------------------------------------
// Forwarding and VLANs.

#[test]
fn dest_vport_forwards_bytes_unchanged() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let out = to_vport(&sim, d, vf(3));
    catch_all(&sim, t1, &[out]);
    let frames = [
        FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::tcp(1, 2))
            .payload(700)
            .build(),
        FrameSpec::ipv6(1, 2, L4::udp(53, 53)).build(),
        FrameSpec::ipv4(1, 2, L4::Icmp { ty: 8, code: 0 })
            .vlan(0x8100, 0x2005)
            .build(),
        FrameSpec::ipv6(3, 4, L4::Raw(47))
            .vlan(0x88a8, 7)
            .vlan(0x8100, 8)
            .payload(33)
            .build(),
        megaflow::frame::arp_request(SRC_MAC, 0x0a00_0001, 0x0a00_0002),
        vec![0xff; 20],
        vec![0; 9],
    ];
    for f in &frames {
        for from in [vf(0), Vport::UPLINK, Vport::PF] {
            let got = one(&sim, d, from, f);
            assert_eq!(got.egress, Egress::Vport(vf(3)));
            assert_eq!(&got.bytes, f, "bytes unchanged");
            assert!(!got.sampled);
        }
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

#[test]
fn push_vlan_inserts_the_tag_after_the_macs() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let m = matcher(&sim, t1, 0, &dmac_mask());
    let out = to_vport(&sim, d, vf(0));
    let push_c = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x8100 << 16 | 0xa00b,
        },
    );
    let push_s = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x88a8 << 16 | 0x0123,
        },
    );
    rule(&sim, m, &dmac_value(mac(1)), &[push_c, out]);
    rule(&sim, m, &dmac_value(mac(2)), &[push_s, out]);
    rule(&sim, m, &dmac_value(mac(3)), &[push_c, push_s, out]);

    let spec = |dmac: u64| {
        FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::tcp(1000, 80))
            .macs(SRC_MAC, dmac)
            .payload(100)
    };
    // Untagged: the tag goes right after the MACs.
    let f = spec(mac(1)).build();
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    let want = with_tag(&f, 0x8100, 0xa00b);
    assert_eq!(got.bytes, want, "exact bytes");
    assert_eq!(got.bytes, spec(mac(1)).vlan(0x8100, 0xa00b).build());
    assert_eq!(got.bytes.len(), f.len() + 4);
    // A tagged frame: the new tag goes outside the old one.
    let f = spec(mac(2)).vlan(0x8100, 0x0064).build();
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(got.bytes, with_tag(&f, 0x88a8, 0x0123));
    assert_eq!(
        got.bytes,
        spec(mac(2))
            .vlan(0x88a8, 0x0123)
            .vlan(0x8100, 0x0064)
            .build()
    );
    // Two pushes: the second is outermost.
    let f = spec(mac(3)).build();
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(
        got.bytes,
        with_tag(&with_tag(&f, 0x8100, 0xa00b), 0x88a8, 0x0123)
    );
    // A short frame is padded to 60 by FrameSpec; the push keeps the pad.
    let f = frame_to(mac(1), 0);
    assert_eq!(f.len(), 60);
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(got.bytes, with_tag(&f, 0x8100, 0xa00b));
}

#[test]
fn pop_vlan_removes_the_outer_tag() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let pop = action(&sim, d, ActionSpec::PopVlan);
    let out = to_vport(&sim, d, vf(0));
    catch_all(&sim, t1, &[pop, out]);
    let spec = FrameSpec::ipv6(7, 8, L4::udp(5, 6)).payload(64);
    let f = spec.clone().vlan(0x8100, 0x0fff).build();
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(got.bytes, spec.build(), "tag removed");
    let mut want = f[..12].to_vec();
    want.extend_from_slice(&f[16..]);
    assert_eq!(got.bytes, want, "exactly the 4 bytes after the MACs");
    // Double tagged: only the outer tag goes.
    let f = spec.clone().vlan(0x88a8, 100).vlan(0x8100, 200).build();
    let got = one(&sim, d, ingress(), &f);
    assert_eq!(got.bytes, spec.clone().vlan(0x8100, 200).build());
    // Untagged: nothing to pop.
    let f = spec.build();
    assert_eq!(one(&sim, d, ingress(), &f).bytes, f);
}

// ---------------------------------------------------------------------------
// Header rewrites.

/// A rule rewriting every field of `ops` on all traffic of a fresh sim;
/// the frame that leaves for `input`.
fn rewritten(ops: &[ModifyOp], input: &[u8]) -> Vec<u8> {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let rw = modify(&sim, d, ops);
    let out = to_vport(&sim, d, vf(0));
    catch_all(&sim, t1, &[rw, out]);
    let got = one(&sim, d, ingress(), input);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    got.bytes
}

fn mac_ops(smac: u64, dmac: u64) -> [ModifyOp; 4] {
    [
        ModifyOp::set(ModifyField::SmacHi, (smac >> 16) as u32),
        ModifyOp::set(ModifyField::SmacLo, (smac & 0xffff) as u32),
        ModifyOp::set(ModifyField::DmacHi, (dmac >> 16) as u32),
        ModifyOp::set(ModifyField::DmacLo, (dmac & 0xffff) as u32),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// MACs, IPv4 addresses, TCP or UDP ports and the TTL rewritten: the
    /// frame equals one built from scratch with the new values, so the
    /// incremental checksum updates are exact.
    #[test]
    fn modify_header_matches_a_frame_built_with_the_new_values(
        smac in 0u64..1 << 48,
        dmac in 0u64..1 << 48,
        src in any::<u32>(),
        dst in any::<u32>(),
        sport in any::<u16>(),
        dport in any::<u16>(),
        ttl in any::<u8>(),
        tcp in any::<bool>(),
        tagged in any::<bool>(),
        payload in 0usize..200,
    ) {
        let l4 = |s, d| if tcp { L4::tcp(s, d) } else { L4::udp(s, d) };
        let (sp, dp) = if tcp {
            (ModifyField::TcpSport, ModifyField::TcpDport)
        } else {
            (ModifyField::UdpSport, ModifyField::UdpDport)
        };
        let mut ops = mac_ops(smac, dmac).to_vec();
        ops.extend([
            ModifyOp::set(ModifyField::Sipv4, src),
            ModifyOp::set(ModifyField::Dipv4, dst),
            ModifyOp::set(sp, u32::from(sport)),
            ModifyOp::set(dp, u32::from(dport)),
            ModifyOp::set(ModifyField::IpTtl, u32::from(ttl)),
        ]);
        let tag = |s: FrameSpec| if tagged { s.vlan(0x8100, 42) } else { s };
        let input = tag(FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, l4(1234, 80))
            .macs(SRC_MAC, mac(1))
            .payload(payload))
            .build();
        let mut want = tag(FrameSpec::ipv4(src, dst, l4(sport, dport))
            .macs(smac, dmac)
            .payload(payload));
        want.ttl = ttl;
        prop_assert_eq!(rewritten(&ops, &input), want.build());
    }
}

#[test]
fn modify_header_each_field_alone() {
    let base = |src, dst, l4| {
        FrameSpec::ipv4(src, dst, l4)
            .macs(SRC_MAC, mac(1))
            .payload(30)
    };
    let tcp = base(0x0a00_0001, 0x0a00_0002, L4::tcp(1234, 80)).build();
    let udp = base(0x0a00_0001, 0x0a00_0002, L4::udp(1234, 53)).build();
    let cases: Vec<(Vec<ModifyOp>, &Vec<u8>, FrameSpec)> = vec![
        (
            mac_ops(0x1111_2222_3333, 0x4444_5555_6666).to_vec(),
            &tcp,
            base(0x0a00_0001, 0x0a00_0002, L4::tcp(1234, 80))
                .macs(0x1111_2222_3333, 0x4444_5555_6666),
        ),
        (
            vec![ModifyOp::set(ModifyField::Sipv4, 0xc0a8_0101)],
            &tcp,
            base(0xc0a8_0101, 0x0a00_0002, L4::tcp(1234, 80)),
        ),
        (
            vec![ModifyOp::set(ModifyField::Dipv4, 0xc0a8_0102)],
            &udp,
            base(0x0a00_0001, 0xc0a8_0102, L4::udp(1234, 53)),
        ),
        (
            vec![ModifyOp::set(ModifyField::TcpSport, 4321)],
            &tcp,
            base(0x0a00_0001, 0x0a00_0002, L4::tcp(4321, 80)),
        ),
        (
            vec![ModifyOp::set(ModifyField::TcpDport, 8080)],
            &tcp,
            base(0x0a00_0001, 0x0a00_0002, L4::tcp(1234, 8080)),
        ),
        (
            vec![ModifyOp::set(ModifyField::UdpSport, 9)],
            &udp,
            base(0x0a00_0001, 0x0a00_0002, L4::udp(9, 53)),
        ),
        (
            vec![ModifyOp::set(ModifyField::UdpDport, 5353)],
            &udp,
            base(0x0a00_0001, 0x0a00_0002, L4::udp(1234, 5353)),
        ),
    ];
    for (ops, input, want) in cases {
        assert_eq!(rewritten(&ops, input), want.build(), "{ops:?}");
    }
    // TTL: SET, and decrement as ADD 0xff.
    for (op, ttl) in [
        (ModifyOp::set(ModifyField::IpTtl, 1), 1),
        (
            ModifyOp::Add {
                field: ModifyField::IpTtl,
                data: 0xff,
            },
            63,
        ),
    ] {
        for input in [&tcp, &udp] {
            let mut want = if input == &tcp {
                base(0x0a00_0001, 0x0a00_0002, L4::tcp(1234, 80))
            } else {
                base(0x0a00_0001, 0x0a00_0002, L4::udp(1234, 53))
            };
            want.ttl = ttl;
            assert_eq!(rewritten(&[op], input), want.build(), "{op:?}");
        }
    }
    // Fields the packet does not have are skipped.
    let v6 = FrameSpec::ipv6(1, 2, L4::udp(1, 2)).payload(20).build();
    assert_eq!(
        rewritten(
            &[
                ModifyOp::set(ModifyField::Sipv4, 5),
                ModifyOp::set(ModifyField::IpTtl, 5)
            ],
            &v6
        ),
        v6
    );
    assert_eq!(
        rewritten(&[ModifyOp::set(ModifyField::TcpSport, 5)], &udp),
        udp
    );
}

// ---------------------------------------------------------------------------
// Meters, samplers, registers.

#[test]
fn meter_then_next_table_drops_red() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    // 1000 B/s (representable: 998.4), a burst of 200 bytes.
    let params = MeterParams::single_rate(1000, 200, MeterMode::Bytes);
    assert_eq!(params.cbs(), 200);
    let meter = action(
        &sim,
        d,
        ActionSpec::FlowMeter(FlowMeterAttr {
            next_table: t2,
            active: true,
            reg_c_index: 5,
            params: params.encode().to_vec(),
        }),
    );
    catch_all(&sim, t1, &[meter]);
    let m2 = matcher(&sim, t2, 0, &reg_mask(5));
    let out = to_vport(&sim, d, vf(1));
    let drop = action(&sim, d, ActionSpec::Drop);
    rule(&sim, m2, &reg_value(5, Color::Green as u32), &[out]);
    rule(&sim, m2, &reg_value(5, Color::Red as u32), &[drop]);
    let f = frame_to(mac(1), 58);
    assert_eq!(f.len(), 100);
    let burst = |now: u64, n: usize| -> Vec<Egress> {
        let mut out = Output::new();
        sim.process_batch(d, now, (0..n).map(|_| (ingress(), &f[..])), &mut out);
        for o in out.frames() {
            let colour = Color::from_reg(o.regs[5]).expect("a colour");
            let want = match o.egress {
                Egress::Vport(_) => Color::Green,
                _ => Color::Red,
            };
            assert_eq!(colour, want, "colour in reg_c_5 matches the fate");
        }
        out.frames().iter().map(|o| o.egress).collect()
    };
    let green = Egress::Vport(vf(1));
    let red = Egress::Drop(DropCause::Rule);
    // A full bucket: 200 bytes = two frames, then red.
    let mut want = vec![green, green];
    want.extend([red; 8]);
    assert_eq!(burst(1_000, 10), want, "burst at t=0");
    // 200 ms at 998.4 B/s = 199.7 bytes: one more frame.
    assert_eq!(burst(200_001_000, 3), vec![green, red, red]);
    // Long idle: the bucket is capped at its burst size.
    assert_eq!(burst(60_000_000_000, 3), vec![green, green, red]);
}

#[test]
fn sampler_sends_a_copy_to_the_sink_and_forwards_the_original() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let bulk = sim.counter_bulk_alloc(1).expect("counter_bulk_alloc");
    let ctr = action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 1 });
    let stamp = modify(&sim, d, &mac_ops(SRC_MAC, 0x0200_0000_5151));
    let sink = to_vport(&sim, d, vf(9));
    let sampler = action(
        &sim,
        d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 1,
            default_next_table: t2,
            sample_actions: vec![ctr, stamp, sink],
            action: Some(ModifyOp::set(ModifyField::RegC(2), 77).encode()),
        }),
    );
    catch_all(&sim, t1, &[sampler]);
    let out = to_vport(&sim, d, vf(1));
    catch_all(&sim, t2, &[out]);
    let mut bytes = 0;
    for n in 0..5 {
        let f = frame_to(mac(n), 10 * n as usize);
        bytes += f.len() as u64;
        let got = send_at(&sim, d, 0, ingress(), &f);
        assert_eq!(got.len(), 2, "{got:?}");
        let copy = got.iter().find(|o| o.sampled).expect("a sampled copy");
        let orig = got.iter().find(|o| !o.sampled).expect("the original");
        assert_eq!(copy.egress, Egress::Vport(vf(9)));
        assert_eq!(copy.bytes[..6], 0x0200_0000_5151u64.to_be_bytes()[2..]);
        assert_eq!(copy.bytes[6..], f[6..], "only the dmac changed");
        assert_eq!(orig.egress, Egress::Vport(vf(1)));
        assert_eq!(orig.bytes, f, "the original is not rewritten");
        assert_eq!(orig.regs[2], 77, "the sampler's SET ran on the original");
        assert_eq!(copy.regs[2], 0, "but not on the copy");
    }
    let mut c = Vec::new();
    sim.counter_bulk_query(bulk, &mut c).expect("query");
    assert_eq!(c[1], CounterValue { packets: 5, bytes });
}

#[test]
fn reg_c_written_in_table_1_is_matched_in_table_2() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let m1 = matcher(&sim, t1, 0, &dmac_mask());
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    for (i, v) in [(1, 0xabc), (2, 0xdef), (3, 0x123)] {
        let w = modify(&sim, d, &[ModifyOp::set(ModifyField::RegC(2), v)]);
        rule(&sim, m1, &dmac_value(mac(i)), &[w, to_t2]);
    }
    rule(&sim, m1, &dmac_value(mac(4)), &[to_t2]);
    let m2 = matcher(&sim, t2, 0, &reg_mask(2));
    let a = to_vport(&sim, d, vf(0));
    let b = to_vport(&sim, d, vf(1));
    rule(&sim, m2, &reg_value(2, 0xabc), &[a]);
    rule(&sim, m2, &reg_value(2, 0xdef), &[b]);
    for (i, want, reg) in [
        (1, Egress::Vport(vf(0)), 0xabc),
        (2, Egress::Vport(vf(1)), 0xdef),
        (3, Egress::Manager { ingress: ingress() }, 0x123),
        (4, Egress::Manager { ingress: ingress() }, 0),
    ] {
        let f = frame_to(mac(i), 0);
        let got = one(&sim, d, ingress(), &f);
        assert_eq!(got.egress, want, "flow {i}");
        assert_eq!(got.regs[2], reg, "flow {i}: reg_c_2");
        assert_eq!(got.bytes, f, "registers are not in the frame");
        assert_eq!(
            got.regs[0],
            u32::from(ingress().0) << 16,
            "reg_c_0 keeps the vport metadata"
        );
    }
}

#[test]
fn two_rate_meter_colours_green_yellow_red() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    // CIR = EIR = 10^9 × 134 / 2^27 = 998.4 B/s, CBS 200 B, EBS 300 B.
    let params = MeterParams {
        valid: true,
        bucket_overflow: false,
        start_color: 0,
        both_buckets_on_green: false,
        mode: MeterMode::Bytes,
        cbs: (0, 200),
        cir: (27, 134),
        ebs: (1, 150),
        eir: (27, 134),
    };
    assert_eq!((params.cbs(), params.ebs()), (200, 300));
    // Packets mode: 3 packets of burst, whatever their size.
    let packets = MeterParams::single_rate(1000, 3, MeterMode::Packets);
    let m1 = matcher(&sim, t1, 0, &dmac_mask());
    for (i, p) in [(1, params), (2, packets)] {
        let meter = action(
            &sim,
            d,
            ActionSpec::FlowMeter(FlowMeterAttr {
                next_table: t2,
                active: true,
                reg_c_index: 7,
                params: p.encode().to_vec(),
            }),
        );
        rule(&sim, m1, &dmac_value(mac(i)), &[meter]);
    }
    let m2 = matcher(&sim, t2, 0, &reg_mask(7));
    for (c, n) in [(Color::Green, 0), (Color::Yellow, 1), (Color::Red, 2)] {
        let out = to_vport(&sim, d, vf(n));
        rule(&sim, m2, &reg_value(7, c as u32), &[out]);
    }
    let colours = |now: u64, frames: &[Vec<u8>]| -> Vec<Color> {
        frames
            .iter()
            .map(|f| {
                let o = send_at(&sim, d, now, ingress(), f);
                assert_eq!(o.len(), 1);
                let c = Color::from_reg(o[0].regs[7]).expect("a colour");
                let want = match c {
                    Color::Green => vf(0),
                    Color::Yellow => vf(1),
                    Color::Red => vf(2),
                };
                assert_eq!(o[0].egress, Egress::Vport(want), "next table saw {c}");
                c
            })
            .collect()
    };
    use Color::{Green as G, Red as R, Yellow as Y};
    let f = frame_to(mac(1), 58);
    assert_eq!(f.len(), 100);
    assert_eq!(colours(1, &vec![f.clone(); 8]), [G, G, Y, Y, Y, R, R, R]);
    // After a second both buckets are full again (capped at their bursts).
    assert_eq!(
        colours(2_000_000_000, &vec![f.clone(); 7]),
        [G, G, Y, Y, Y, R, R]
    );
    // C 200 → 100 (G); 200 B do not fit C's 100 but fit E's 300 → 100
    // (Y); 100 fit C (G); 200 fit neither (R).
    let big = frame_to(mac(1), 158);
    assert_eq!(big.len(), 200);
    assert_eq!(
        colours(4_000_000_000, &[f.clone(), big.clone(), f.clone(), big]),
        [G, Y, G, R]
    );
    let sizes: Vec<Vec<u8>> = (0..5).map(|n| frame_to(mac(2), 300 * n)).collect();
    assert_eq!(colours(1, &sizes), [G, G, G, R, R], "packets mode");
}

#[test]
fn sampled_copies_can_walk_a_table() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let t3 = table(&sim, d, 3);
    let to_t3 = action(&sim, d, ActionSpec::DestTable(t3));
    let sampler = action(
        &sim,
        d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 1,
            default_next_table: t2,
            sample_actions: vec![to_t3],
            action: None,
        }),
    );
    catch_all(&sim, t1, &[sampler]);
    let out = to_vport(&sim, d, vf(1));
    catch_all(&sim, t2, &[out]);
    let push = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x8100 << 16 | 99,
        },
    );
    let sink = to_vport(&sim, d, vf(9));
    catch_all(&sim, t3, &[push, sink]);
    let f = frame_to(mac(1), 20);
    let got = send_at(&sim, d, 0, ingress(), &f);
    assert_eq!(got.len(), 2, "{got:?}");
    let copy = got.iter().find(|o| o.sampled).expect("a sampled copy");
    let orig = got.iter().find(|o| !o.sampled).expect("the original");
    assert_eq!(copy.egress, Egress::Vport(vf(9)));
    assert_eq!(copy.bytes, with_tag(&f, 0x8100, 99), "the copy's table ran");
    assert_eq!(orig.egress, Egress::Vport(vf(1)));
    assert_eq!(orig.bytes, f);
}

#[test]
fn modify_header_copy_moves_fields_into_registers() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let copy = modify(
        &sim,
        d,
        &[
            ModifyOp::Copy {
                src: ModifyField::Sipv4,
                src_offset: 0,
                length: 32,
                dst: ModifyField::RegC(1),
                dst_offset: 0,
            },
            // The vport metadata (reg_c_0 bits 16..32) into reg_c_2 bits 4..20.
            ModifyOp::Copy {
                src: ModifyField::RegC(0),
                src_offset: 16,
                length: 16,
                dst: ModifyField::RegC(2),
                dst_offset: 4,
            },
            // And the low byte of the UDP source port into the TTL.
            ModifyOp::Copy {
                src: ModifyField::UdpSport,
                src_offset: 0,
                length: 8,
                dst: ModifyField::IpTtl,
                dst_offset: 0,
            },
        ],
    );
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    catch_all(&sim, t1, &[copy, to_t2]);
    let m2 = matcher(&sim, t2, 0, &reg_mask(1));
    let out = to_vport(&sim, d, vf(0));
    rule(&sim, m2, &reg_value(1, 0xc0a8_0007), &[out]);
    let spec = |src| FrameSpec::ipv4(src, 0x0a00_0002, L4::udp(0x1234, 53)).payload(10);
    let got = one(&sim, d, vf(6), &spec(0xc0a8_0007).build());
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(got.regs[1], 0xc0a8_0007);
    assert_eq!(got.regs[2], u32::from(vf(6).0) << 4);
    let mut want = spec(0xc0a8_0007);
    want.ttl = 0x34;
    assert_eq!(got.bytes, want.build(), "TTL copied, checksum updated");
    let got = one(&sim, d, vf(6), &spec(0xc0a8_0008).build());
    assert_eq!(got.egress, Egress::Manager { ingress: vf(6) });
    assert_eq!(got.regs[1], 0xc0a8_0008);
}

/// Header edits in one table are what the next table matches on, in
/// single calls and in batches whose packets take different paths.
#[test]
fn the_next_table_sees_the_edited_packet() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let m1 = matcher(&sim, t1, 0, &dmac_mask());
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    let push = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x8100 << 16 | 77,
        },
    );
    let pop = action(&sim, d, ActionSpec::PopVlan);
    let new_dmac = modify(&sim, d, &mac_ops(SRC_MAC, mac(50))[2..]);
    rule(&sim, m1, &dmac_value(mac(1)), &[push, to_t2]);
    rule(&sim, m1, &dmac_value(mac(2)), &[pop, to_t2]);
    rule(&sim, m1, &dmac_value(mac(3)), &[new_dmac, to_t2]);
    rule(&sim, m1, &dmac_value(mac(4)), &[to_t2]);
    // t2: by VLAN first, then by dmac.
    let by_vlan = matcher(
        &sim,
        t2,
        0,
        &buf()
            .with(PrmField::OuterCvlanTag, 1)
            .with(PrmField::OuterSvlanTag, 1)
            .with(PrmField::OuterFirstVid, 0xfff),
    );
    let by_dmac = matcher(&sim, t2, 1, &dmac_mask());
    let outs: Vec<ActionId> = (0..4).map(|i| to_vport(&sim, d, vf(i))).collect();
    rule(
        &sim,
        by_vlan,
        &buf()
            .with(PrmField::OuterCvlanTag, 1)
            .with(PrmField::OuterFirstVid, 77),
        &[outs[0]],
    );
    rule(&sim, by_vlan, &buf(), &[outs[1]]);
    rule(&sim, by_dmac, &dmac_value(mac(50)), &[outs[2]]);
    rule(&sim, by_dmac, &dmac_value(mac(4)), &[outs[3]]);
    let spec = |i| {
        FrameSpec::ipv4(1, 2, L4::udp(3, 4))
            .macs(SRC_MAC, mac(i))
            .payload(20)
    };
    let cases = [
        // Untagged, a tag pushed: the VLAN rule.
        (spec(1).build(), vf(0)),
        // Tagged with another VID, a tag pushed outside: VID 77 outer.
        (spec(1).vlan(0x8100, 5).build(), vf(0)),
        // Tagged with VID 77 and popped: untagged.
        (spec(2).vlan(0x8100, 77).build(), vf(1)),
        // Untagged, dmac rewritten: only the new dmac matches.
        (spec(3).build(), vf(1)),
        // Tagged: the VLAN matcher's untagged rule misses, new dmac hits.
        (spec(3).vlan(0x8100, 9).build(), vf(2)),
        // Tagged and unchanged.
        (spec(4).vlan(0x8100, 9).build(), vf(3)),
    ];
    for (f, want) in &cases {
        assert_eq!(one(&sim, d, ingress(), f).egress, Egress::Vport(*want));
    }
    let mut rng = megaflow::SplitMix64::new(3);
    let picks: Vec<usize> = (0..200).map(|_| rng.below(6) as usize).collect();
    let mut out = Output::new();
    sim.process_batch(
        d,
        0,
        picks.iter().map(|&i| (ingress(), &cases[i].0[..])),
        &mut out,
    );
    assert_eq!(out.frames().len(), picks.len());
    for o in out.frames() {
        let want = cases[picks[o.packet as usize]].1;
        assert_eq!(o.egress, Egress::Vport(want), "batched packet {}", o.packet);
    }
}

/// Rules with more actions than the matcher keeps inline run all of
/// them, also once promoted from a duplicate.
#[test]
fn long_action_lists_run_in_full() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let m = matcher(&sim, t1, 0, &dmac_mask());
    let bulk = sim.counter_bulk_alloc(1).expect("counter_bulk_alloc");
    let c0 = action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 0 });
    let c1 = action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 1 });
    let pop = action(&sim, d, ActionSpec::PopVlan);
    let rw = modify(
        &sim,
        d,
        &[
            ModifyOp::set(ModifyField::IpTtl, 9),
            ModifyOp::set(ModifyField::UdpDport, 4444),
        ],
    );
    let push = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x88a8 << 16 | 300,
        },
    );
    let a = to_vport(&sim, d, vf(0));
    let b = to_vport(&sim, d, vf(1));
    let first = rule(&sim, m, &dmac_value(mac(1)), &[c0, pop, rw, push, a]);
    rule(&sim, m, &dmac_value(mac(1)), &[rw, push, c1, b]);
    let spec = FrameSpec::ipv4(1, 2, L4::udp(3, 4))
        .macs(SRC_MAC, mac(1))
        .payload(40);
    let input = spec.clone().vlan(0x8100, 5).build();
    let mut edited = FrameSpec::ipv4(1, 2, L4::udp(3, 4444))
        .macs(SRC_MAC, mac(1))
        .payload(40);
    edited.ttl = 9;
    let got = one(&sim, d, ingress(), &input);
    assert_eq!(got.egress, Egress::Vport(vf(0)));
    assert_eq!(
        got.bytes,
        edited.clone().vlan(0x88a8, 300).build(),
        "pop, rewrite, push"
    );
    sim.rule_destroy(first).expect("rule_destroy");
    let got = one(&sim, d, ingress(), &input);
    assert_eq!(got.egress, Egress::Vport(vf(1)), "the duplicate promoted");
    assert_eq!(
        got.bytes,
        edited.vlan(0x88a8, 300).vlan(0x8100, 5).build(),
        "its own four actions"
    );
    let mut c = Vec::new();
    sim.counter_bulk_query(bulk, &mut c).expect("query");
    let len = input.len() as u64;
    assert_eq!(
        c[0],
        CounterValue {
            packets: 1,
            bytes: len
        }
    );
    assert_eq!(
        c[1],
        CounterValue {
            packets: 1,
            bytes: len + 4
        },
        "counted after the push"
    );
}

// ---------------------------------------------------------------------------
// Source port, misses, root restrictions.

/// A megaflow match on `in_port` 1 (vport 2) encoded in `mode`.
fn in_port_match(mode: SourcePortMode, ports: &PortTable) -> Encoded {
    let f = frame_to(mac(1), 0);
    let key = megaflow::extract(1, &f);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::EthDst);
    encode(&Match::new(&key, &mask), mode, ports).expect("in_port and L2 encode")
}

#[test]
fn source_port_matched_by_misc_source_port_and_by_reg_c_0_metadata() {
    let ports = PortTable::new()
        .with(PortNo(1), Vport(2))
        .with(PortNo(2), Vport(3));
    let misc = in_port_match(SourcePortMode::MiscSourcePort, &ports);
    assert_eq!(misc.field_mask(PrmField::MiscSourcePort), 0xffff);
    assert_eq!(misc.field_value(PrmField::MiscSourcePort), 2);
    assert_eq!(misc.field_mask(PrmField::Misc2MetadataRegC0), 0);
    let meta = in_port_match(SourcePortMode::REG_C0_UPPER_16, &ports);
    assert_eq!(meta.field_mask(PrmField::MiscSourcePort), 0);
    assert_eq!(meta.field_mask(PrmField::Misc2MetadataRegC0), 0xffff_0000);
    assert_eq!(meta.field_value(PrmField::Misc2MetadataRegC0), 2 << 16);

    // The default sim tags packets with metadata and fills source_port:
    // both encodings work. With misc.source_port only, reg_c_0 is zero.
    for (config, meta_works) in [
        (SimConfig::default(), true),
        (
            SimConfig {
                source_port: SourcePortMode::MiscSourcePort,
                ..SimConfig::default()
            },
            false,
        ),
    ] {
        let sim = SimBackend::new(config);
        for (enc, works) in [(&misc, true), (&meta, meta_works)] {
            let (d, t1) = pipe(&sim);
            let m = sim
                .matcher_create(t1, 0, enc.criteria(), enc.mask())
                .expect("matcher_create");
            let out = to_vport(&sim, d, vf(7));
            sim.rule_create(m, enc.value(), &[out])
                .expect("rule_create");
            let f = frame_to(mac(1), 0);
            let hit = one(&sim, d, Vport(2), &f).egress;
            if works {
                assert_eq!(hit, Egress::Vport(vf(7)), "from vport 2: {enc:?}");
            } else {
                assert_eq!(hit, Egress::Manager { ingress: Vport(2) });
            }
            for other in [Vport(3), Vport::UPLINK, Vport::PF] {
                assert_eq!(
                    one(&sim, d, other, &f).egress,
                    Egress::Manager { ingress: other },
                    "from {other}: {enc:?}"
                );
            }
        }
    }
}

#[test]
fn a_miss_goes_to_the_manager_on_the_ingress_representor() {
    let sim = SimBackend::default();
    // No tables at all.
    let bare = sim.domain_create(DomainType::Fdb).expect("domain_create");
    // Rules that do not match.
    let (d, t1) = pipe(&sim);
    let m = matcher(&sim, t1, 0, &dmac_mask());
    let out = to_vport(&sim, d, vf(0));
    rule(&sim, m, &dmac_value(mac(1)), &[out]);
    let f = frame_to(mac(2), 10);
    for dom in [bare, d] {
        for from in [vf(0), vf(126), Vport::UPLINK, Vport::PF, Vport::ECPF] {
            let got = one(&sim, dom, from, &f);
            assert_eq!(got.egress, Egress::Manager { ingress: from });
            assert_eq!(got.bytes, f);
        }
    }
    // A rule that ends without a destination takes the default too.
    let bulk = sim.counter_bulk_alloc(0).expect("counter_bulk_alloc");
    let ctr = action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 0 });
    let ttl = modify(&sim, d, &[ModifyOp::set(ModifyField::IpTtl, 3)]);
    rule(&sim, m, &dmac_value(mac(2)), &[ctr, ttl]);
    let got = one(&sim, d, vf(5), &f);
    assert_eq!(got.egress, Egress::Manager { ingress: vf(5) });
    let mut want = FrameSpec::ipv4(0x0a00_0001, 0x0a00_0002, L4::udp(1000, 2000))
        .macs(SRC_MAC, mac(2))
        .payload(10);
    want.ttl = 3;
    assert_eq!(
        got.bytes,
        want.build(),
        "rewritten on its way to the manager"
    );
    // Other domains' defaults: NIC_RX drops, NIC_TX sends on.
    let rx = sim.domain_create(DomainType::NicRx).expect("domain_create");
    assert_eq!(
        one(&sim, rx, vf(1), &f).egress,
        Egress::Drop(DropCause::DomainDefault)
    );
    let tx = sim.domain_create(DomainType::NicTx).expect("domain_create");
    assert_eq!(one(&sim, tx, vf(1), &f).egress, Egress::Vport(vf(1)));
}

#[test]
fn root_table_takes_only_firmware_actions() {
    let sim = SimBackend::default();
    let d = sim.domain_create(DomainType::Fdb).expect("domain_create");
    let root = table(&sim, d, 0);
    let t1 = table(&sim, d, 1);
    let m = matcher(&sim, root, 0, &dmac_mask());
    let bulk = sim.counter_bulk_alloc(0).expect("counter_bulk_alloc");
    let params = MeterParams::single_rate(1000, 1000, MeterMode::Bytes);
    let vport = to_vport(&sim, d, vf(0));
    let refused = [
        vport,
        action(
            &sim,
            d,
            ActionSpec::PushVlan {
                header: 0x8100 << 16,
            },
        ),
        action(&sim, d, ActionSpec::PopVlan),
        modify(&sim, d, &[ModifyOp::set(ModifyField::IpTtl, 1)]),
        action(
            &sim,
            d,
            ActionSpec::FlowMeter(FlowMeterAttr {
                next_table: t1,
                active: true,
                reg_c_index: 5,
                params: params.encode().to_vec(),
            }),
        ),
        action(
            &sim,
            d,
            ActionSpec::FlowSampler(FlowSamplerAttr {
                sample_ratio: 2,
                default_next_table: t1,
                sample_actions: vec![vport],
                action: None,
            }),
        ),
    ];
    for a in refused {
        let e = sim
            .rule_create(m, &dmac_value(mac(1)).bytes, &[a])
            .expect_err("not a root action");
        assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
    }
    let to_t1 = action(&sim, d, ActionSpec::DestTable(t1));
    let taken = [
        vec![action(&sim, d, ActionSpec::Drop)],
        vec![action(&sim, d, ActionSpec::DefaultMiss)],
        vec![
            action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 0 }),
            to_t1,
        ],
        vec![action(
            &sim,
            d,
            ActionSpec::DestArray(vec![vport.into(), to_t1.into()]),
        )],
    ];
    for (i, list) in taken.iter().enumerate() {
        rule(&sim, m, &dmac_value(mac(i as u64)), list);
    }
}

#[test]
fn matcher_priority_decides_between_overlapping_rules() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    // Created in this order; priority 1 first, then the two 5s by creation.
    let by_dmac = matcher(&sim, t1, 5, &dmac_mask());
    let by_port = matcher(&sim, t1, 5, &buf().with(PrmField::OuterUdpDport, 0xffff));
    let by_src = matcher(
        &sim,
        t1,
        1,
        &buf().with(PrmField::OuterSmac, 0xffff_ffff_ffff),
    );
    let outs: Vec<ActionId> = (0..3).map(|i| to_vport(&sim, d, vf(i))).collect();
    let r_dmac = rule(&sim, by_dmac, &dmac_value(mac(1)), &[outs[0]]);
    let r_port = rule(
        &sim,
        by_port,
        &buf().with(PrmField::OuterUdpDport, 2000),
        &[outs[1]],
    );
    let r_src = rule(
        &sim,
        by_src,
        &buf().with(PrmField::OuterSmac, u128::from(SRC_MAC)),
        &[outs[2]],
    );
    let f = frame_to(mac(1), 0);
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(2)));
    sim.rule_destroy(r_src).expect("rule_destroy");
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(0)));
    sim.rule_destroy(r_dmac).expect("rule_destroy");
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(1)));
    sim.rule_destroy(r_port).expect("rule_destroy");
    assert_eq!(
        one(&sim, d, ingress(), &f).egress,
        Egress::Manager { ingress: ingress() }
    );

    // Root matchers of several root tables form one list by priority.
    let d = sim.domain_create(DomainType::Fdb).expect("domain_create");
    let root_a = table(&sim, d, 0);
    let root_b = table(&sim, d, 0);
    let t1 = table(&sim, d, 1);
    let t2 = table(&sim, d, 2);
    let ma = matcher(&sim, root_a, 3, &dmac_mask());
    let mb = matcher(&sim, root_b, 2, &buf());
    let to_t1 = action(&sim, d, ActionSpec::DestTable(t1));
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    rule(&sim, ma, &dmac_value(mac(1)), &[to_t1]);
    let rb = rule(&sim, mb, &buf(), &[to_t2]);
    let a = to_vport(&sim, d, vf(4));
    let b = to_vport(&sim, d, vf(5));
    catch_all(&sim, t1, &[a]);
    catch_all(&sim, t2, &[b]);
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(5)));
    sim.rule_destroy(rb).expect("rule_destroy");
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(4)));
    sim.matcher_destroy(mb).expect("matcher_destroy");
    assert_eq!(one(&sim, d, ingress(), &f).egress, Egress::Vport(vf(4)));
}

#[test]
fn partial_source_port_mask_is_refused() {
    let sim = SimBackend::default();
    let (_, t1) = pipe(&sim);
    for bits in [0xff00u128, 0x00ff, 0x0001] {
        let mask = buf().with(PrmField::MiscSourcePort, bits);
        let e = sim
            .matcher_create(t1, 0, mask.criteria, &mask.bytes)
            .expect_err("partial source_port");
        assert_eq!(e.errno(), Errno::EINVAL, "{bits:#x}: {e}");
    }
    let mask = buf().with(PrmField::MiscSourcePort, 0xffff);
    matcher(&sim, t1, 0, &mask);
}

/// Thousands of rules inserted and removed at random, duplicates
/// included: after every round each key answers as a model says (the
/// oldest live rule of its value, or a miss).
#[test]
fn rule_churn_keeps_every_lookup_right() {
    use std::collections::{HashMap, VecDeque};
    const KEYS: u64 = 3000;
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let m = matcher(&sim, t1, 0, &dmac_mask());
    let outs: Vec<ActionId> = (0..16).map(|i| to_vport(&sim, d, vf(i))).collect();
    let mut model: HashMap<u64, VecDeque<(RuleId, u16)>> = HashMap::new();
    let mut rng = megaflow::SplitMix64::new(42);
    let frames: Vec<Vec<u8>> = (0..KEYS).map(|k| frame_to(mac(k), 0)).collect();
    for round in 0..8 {
        let ops = if round < 4 { 2500 } else { 1500 };
        for _ in 0..ops {
            let k = rng.below(KEYS);
            let list = model.entry(k).or_default();
            let remove = !list.is_empty() && rng.below(3) > usize::from(round < 4) as u64;
            if remove {
                let i = rng.below(list.len() as u64) as usize;
                let (r, _) = list.remove(i).expect("in the list");
                sim.rule_destroy(r).expect("rule_destroy");
            } else {
                let o = rng.below(16) as u16;
                let r = rule(&sim, m, &dmac_value(mac(k)), &[outs[usize::from(o)]]);
                list.push_back((r, o));
            }
        }
        let mut out = Output::new();
        sim.process_batch(d, 0, frames.iter().map(|f| (ingress(), &f[..])), &mut out);
        let mut got = out.frames().to_vec();
        got.sort_by_key(|o| o.packet);
        assert_eq!(got.len(), KEYS as usize);
        for (k, o) in got.iter().enumerate() {
            let want = match model.get(&(k as u64)).and_then(|l| l.front()) {
                Some(&(_, v)) => Egress::Vport(vf(v)),
                None => Egress::Manager { ingress: ingress() },
            };
            assert_eq!(o.egress, want, "round {round}, key {k}");
        }
    }
    let live: usize = model.values().map(VecDeque::len).sum();
    assert!(live > 500, "the table was well filled: {live}");
    assert_eq!(
        sim.snapshot().rules,
        live + 1,
        "the model's rules and the root's"
    );
}

/// Every object of a full pipeline can be destroyed once its users are
/// gone, refused creates leave nothing behind, and the device ends empty.
#[test]
fn teardown_releases_everything() {
    use offload::sim::Snapshot;
    let sim = SimBackend::new(SimConfig {
        max_meters: 1,
        ..SimConfig::default()
    });
    let d = sim.domain_create(DomainType::Fdb).expect("domain_create");
    let root = table(&sim, d, 0);
    let t1 = table(&sim, d, 1);
    let t2 = table(&sim, d, 2);
    let bulk = sim.counter_bulk_alloc(4).expect("counter_bulk_alloc");
    let ctr = action(&sim, d, ActionSpec::FlowCounter { bulk, offset: 3 });
    let to_t1 = action(&sim, d, ActionSpec::DestTable(t1));
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    let out = to_vport(&sim, d, vf(0));
    let sink = to_vport(&sim, d, vf(1));
    let array = action(
        &sim,
        d,
        ActionSpec::DestArray(vec![out.into(), to_t2.into()]),
    );
    let meter_spec = ActionSpec::FlowMeter(FlowMeterAttr {
        next_table: t2,
        active: true,
        reg_c_index: 5,
        params: MeterParams::single_rate(1_000_000, 10_000, MeterMode::Bytes)
            .encode()
            .to_vec(),
    });
    let meter = action(&sim, d, meter_spec.clone());
    let sampler = action(
        &sim,
        d,
        ActionSpec::FlowSampler(FlowSamplerAttr {
            sample_ratio: 3,
            default_next_table: t2,
            sample_actions: vec![sink],
            action: None,
        }),
    );
    let push = action(
        &sim,
        d,
        ActionSpec::PushVlan {
            header: 0x8100 << 16,
        },
    );
    let pop = action(&sim, d, ActionSpec::PopVlan);
    let rw = modify(&sim, d, &[ModifyOp::set(ModifyField::RegC(1), 1)]);
    let drop = action(&sim, d, ActionSpec::Drop);
    let rm = matcher(&sim, root, 0, &buf());
    let m1 = matcher(&sim, t1, 0, &dmac_mask());
    let m2 = matcher(&sim, t2, 0, &buf());
    let mut rules = vec![
        rule(&sim, rm, &buf(), &[ctr, to_t1]),
        rule(&sim, m1, &dmac_value(mac(1)), &[pop, rw, push, out]),
        rule(&sim, m1, &dmac_value(mac(2)), &[array]),
        rule(&sim, m1, &dmac_value(mac(3)), &[meter]),
        rule(&sim, m1, &dmac_value(mac(4)), &[sampler]),
        rule(&sim, m1, &dmac_value(mac(4)), &[drop]),
        rule(&sim, m2, &buf(), &[ctr, drop]),
    ];
    // Refused creates, each after some checks passed.
    sim.domain_allow_duplicate_rules(d, false)
        .expect("disallow duplicates");
    for (value, actions) in [
        (dmac_value(mac(1)), vec![out]),
        (dmac_value(mac(9)), vec![drop, out]),
        (dmac_value(mac(9)), vec![push, rw, out]),
    ] {
        sim.rule_create(m1, &value.bytes, &actions)
            .expect_err("refused");
    }
    sim.rule_create(rm, &dmac_value(mac(1)).bytes, &[to_t1])
        .expect_err("value outside the catch-all mask");
    sim.action_create(d, meter_spec)
        .expect_err("one meter only");
    for f in 1..6 {
        send_at(&sim, d, 0, ingress(), &frame_to(mac(f), 0));
    }
    assert_eq!(
        sim.snapshot(),
        Snapshot {
            domains: 1,
            tables: 3,
            matchers: 3,
            rules: 7,
            actions: 12,
            counter_bulks: 1,
            counters: 16,
            meters: 1,
            restore_rules: 0,
        }
    );
    for r in rules.drain(..) {
        sim.rule_destroy(r).expect("rule_destroy");
    }
    for m in [rm, m1, m2] {
        sim.matcher_destroy(m).expect("matcher_destroy");
    }
    // Actions that others use go last.
    for a in [ctr, to_t1, array, meter, sampler, push, pop, rw, drop] {
        sim.action_destroy(a).expect("action_destroy");
    }
    for a in [to_t2, out, sink] {
        sim.action_destroy(a).expect("action_destroy");
    }
    sim.counter_bulk_free(bulk).expect("counter_bulk_free");
    for t in [root, t1, t2] {
        sim.table_destroy(t).expect("table_destroy");
    }
    sim.domain_destroy(d).expect("domain_destroy");
    assert_eq!(sim.snapshot(), Snapshot::default(), "nothing left");
}

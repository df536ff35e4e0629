//! Rules encoded from real megaflow matches hit exactly the packets the
//! match describes (property test); batches forward as single calls do;
//! rule updates concurrent with forwarding keep counters exact.

mod sim_common;

use sim_common::*;

// ---------------------------------------------------------------------------
// Rules from megaflow matches.

/// Datapath ports 1..=3 and their vports.
const PORT_VPORTS: [Vport; 3] = [Vport(1), Vport(2), Vport::UPLINK];

fn port_table() -> PortTable {
    let mut t = PortTable::new();
    for (i, &v) in PORT_VPORTS.iter().enumerate() {
        t.insert(PortNo(i as u32 + 1), v);
    }
    t
}

const V4: [u32; 3] = [0x0a00_0001, 0x0a00_0002, 0xc0a8_0001];
const V6_BASE: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
const L4_PORTS: [u16; 4] = [80, 443, 1000, 53];

/// A packet of a small space, so matches hit often.
#[derive(Clone, Debug)]
struct Pkt {
    port: usize,
    v6: bool,
    tcp: bool,
    src4: u32,
    dst4: u32,
    src6: u128,
    dst6: u128,
    sport: u16,
    dport: u16,
    vlan: Option<(u16, u16)>,
    /// An inner tag, present only when `vlan` is.
    vlan2: Option<(u16, u16)>,
    tos: u8,
    ttl: u8,
    /// TCP flags (NS..FIN), for TCP packets.
    flags: u16,
    payload: usize,
}

impl Pkt {
    fn frame(&self) -> Vec<u8> {
        let l4 = if self.tcp {
            L4::Tcp {
                sport: self.sport,
                dport: self.dport,
                flags: self.flags,
            }
        } else {
            L4::udp(self.sport, self.dport)
        };
        let mut s = if self.v6 {
            FrameSpec::ipv6(self.src6, self.dst6, l4)
        } else {
            FrameSpec::ipv4(self.src4, self.dst4, l4)
        };
        if let Some((tpid, tci)) = self.vlan {
            s = s.vlan(tpid, tci);
            if let Some((tpid, tci)) = self.vlan2 {
                s = s.vlan(tpid, tci);
            }
        }
        s.tos = self.tos;
        s.ttl = self.ttl;
        s.payload(self.payload).build()
    }

    fn port_no(&self) -> u32 {
        self.port as u32 + 1
    }

    fn vport(&self) -> Vport {
        PORT_VPORTS[self.port]
    }

    /// `self` with the fields whose bit is set in `which` taken from
    /// `other`.
    fn mix(&self, other: &Pkt, which: u16) -> Pkt {
        let pick = |bit: u16| which & (1 << bit) != 0;
        let mut p = self.clone();
        if pick(0) {
            p.port = other.port;
        }
        if pick(1) {
            p.v6 = other.v6;
        }
        if pick(2) {
            p.tcp = other.tcp;
        }
        if pick(3) {
            p.src4 = other.src4;
            p.src6 = other.src6;
        }
        if pick(4) {
            p.dst4 = other.dst4;
        }
        if pick(5) {
            p.dst6 = other.dst6;
        }
        if pick(6) {
            p.sport = other.sport;
        }
        if pick(7) {
            p.dport = other.dport;
        }
        if pick(8) {
            p.vlan = other.vlan;
        }
        if pick(9) {
            p.payload = other.payload;
        }
        if pick(10) {
            p.tos = other.tos;
            p.ttl = other.ttl;
        }
        if pick(12) {
            p.flags = other.flags;
        }
        if pick(11) {
            p.vlan2 = other.vlan2;
        }
        p
    }
}

/// A VLAN tag: TPID, and a TCI from a few VIDs, any PCP and CFI.
fn tag() -> impl Strategy<Value = (u16, u16)> {
    (
        prop::sample::select(vec![0x8100u16, 0x88a8]),
        prop::sample::select(vec![0u16, 10, 20, 4095]),
        0u16..8,
        any::<bool>(),
    )
        .prop_map(|(tpid, vid, pcp, cfi)| (tpid, pcp << 13 | u16::from(cfi) << 12 | vid))
}

fn pkt() -> impl Strategy<Value = Pkt> {
    (
        (
            0usize..3,
            any::<bool>(),
            any::<bool>(),
            prop::sample::select(V4.to_vec()),
            prop::sample::select(V4.to_vec()),
            any::<bool>(),
            prop::option::of(0u32..128),
        ),
        (
            prop::sample::select(L4_PORTS.to_vec()),
            prop::sample::select(L4_PORTS.to_vec()),
            prop::option::of(tag()),
            prop::option::of(tag()),
            prop::sample::select(vec![0u8, 0xb9, 0x28, 0x03]),
            prop::sample::select(vec![64u8, 1, 255]),
            prop::sample::select(vec![0x010u16, 0x002, 0x012, 0x011, 0x110, 0x004]),
            0usize..40,
        ),
    )
        .prop_map(
            |(
                (port, v6, tcp, src4, dst4, src6_alt, flip),
                (sport, dport, vlan, vlan2, tos, ttl, flags, payload),
            )| Pkt {
                port,
                v6,
                tcp,
                src4,
                dst4,
                src6: if src6_alt { V6_BASE + 0x100 } else { V6_BASE },
                dst6: flip.map_or(V6_BASE, |b| V6_BASE ^ (1u128 << b)),
                sport,
                dport,
                vlan,
                vlan2,
                tos,
                ttl,
                flags,
                payload,
            },
        )
}

const OUT: Vport = Vport(8);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Rules encoded from megaflow matches (a 5-tuple with in_port and a
    /// destination prefix, a VLAN match with or without the inner tag, an
    /// IPv6 prefix, an IP DSCP/ECN/TTL match, TCP flags) forward exactly
    /// the packets the match matches.
    #[test]
    fn encoded_megaflow_rules_hit_exactly_their_packets(
        base in pkt(),
        packets in prop::collection::vec((pkt(), any::<u16>(), any::<u16>()), 40),
        prefix in 0u32..=128,
        pcp in any::<bool>(),
        inner in any::<bool>(),
        with_src in any::<bool>(),
        metadata in any::<bool>(),
    ) {
        let ports = port_table();
        let mode = source_mode(metadata);
        let five = Pkt { v6: false, ..base.clone() };
        let tagged = Pkt { vlan: base.vlan.or(Some((0x8100, 0x2014))), ..base.clone() };
        let v6 = Pkt { v6: true, ..base.clone() };
        let key_of = |p: &Pkt| megaflow::extract(p.port_no(), &p.frame());
        let prefix4 = prefix % 33;
        let five_mask = Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::EthType)
            .with_exact(Field::IpProto)
            .with_exact(Field::Ipv4Src)
            .with(Field::Ipv4Dst, u128::from(u32::MAX.checked_shl(32 - prefix4).unwrap_or(0)))
            .with_exact(Field::TpSrc)
            .with_exact(Field::TpDst);
        let tci_bits = VLAN_PRESENT | VLAN_VID_MASK | if pcp { VLAN_PCP_MASK } else { 0 };
        let mut vlan_mask = Mask::EMPTY
            .with_exact(Field::VlanTpid)
            .with(Field::VlanTci, u128::from(tci_bits));
        if inner {
            vlan_mask = vlan_mask
                .with_exact(Field::Vlan2Tpid)
                .with(Field::Vlan2Tci, u128::from(tci_bits));
        }
        let dst_bits = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
        let mut v6_mask = Mask::EMPTY
            .with_exact(Field::EthType)
            .with(Field::Ipv6Dst, dst_bits);
        if with_src {
            v6_mask.set_exact(Field::Ipv6Src);
        }
        let qos_mask = Mask::EMPTY
            .with_exact(Field::EthType)
            .with_exact(Field::IpProto)
            .with_exact(Field::IpDscp)
            .with_exact(Field::IpEcn)
            .with_exact(Field::IpTtl);
        let tcp = Pkt { tcp: true, ..base.clone() };
        let flags_mask = Mask::EMPTY
            .with_exact(Field::EthType)
            .with_exact(Field::IpProto)
            .with(Field::TcpFlags, 0x1ff)
            .with_exact(Field::TpDst);
        let sim = SimBackend::default();
        let shapes = [
            (&five, five_mask),
            (&tagged, vlan_mask),
            (&v6, v6_mask),
            (&base, qos_mask),
            (&tcp, flags_mask),
        ];
        for (template, mask) in shapes {
            let m = Match::new(&key_of(template), &mask);
            let enc = encode(&m, mode, &ports);
            prop_assert!(enc.is_ok(), "{:?} is offloadable: {:?}", m, enc);
            let Ok(enc) = enc else { continue };
            let d = install_with(&sim, &enc, &[], OUT).map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
            let mut all = vec![template.clone()];
            all.extend(packets.iter().map(|(p, a, b)| template.mix(p, a & b)));
            for (i, p) in all.iter().enumerate() {
                let f = p.frame();
                let want = m.matches(&key_of(p));
                prop_assert!(i > 0 || want, "the template matches its own match");
                let got = send_at(&sim, d, 0, p.vport(), &f);
                prop_assert_eq!(got.len(), 1);
                let hit = got[0].egress == Egress::Vport(OUT);
                prop_assert_eq!(
                    hit, want,
                    "match {:?}, packet {:?}, egress {:?}", m, p, got[0].egress
                );
                if !hit {
                    prop_assert_eq!(got[0].egress, Egress::Manager { ingress: p.vport() });
                }
                prop_assert_eq!(&got[0].bytes, &f);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Batches and concurrency.

/// A batch walks each packet as a single call would.
#[test]
fn a_batch_forwards_as_single_calls_do() {
    let sim = SimBackend::default();
    let (d, t1) = pipe(&sim);
    let t2 = table(&sim, d, 2);
    let t3 = table(&sim, d, 3);
    let m1 = matcher(&sim, t1, 0, &dmac_mask());
    let m2 = matcher(&sim, t2, 0, &reg_mask(1));
    let m3 = matcher(&sim, t3, 0, &buf().with(PrmField::OuterUdpDport, 0xffff));
    let to_t2 = action(&sim, d, ActionSpec::DestTable(t2));
    let to_t3 = action(&sim, d, ActionSpec::DestTable(t3));
    let outs: Vec<ActionId> = (0..6).map(|i| to_vport(&sim, d, vf(i))).collect();
    for i in 0..16u64 {
        let v = dmac_value(mac(i));
        match i % 4 {
            0 => rule(&sim, m1, &v, &[outs[(i % 6) as usize]]),
            1 => {
                let w = modify(
                    &sim,
                    d,
                    &[ModifyOp::set(ModifyField::RegC(1), (i % 3) as u32)],
                );
                rule(&sim, m1, &v, &[w, to_t2])
            }
            2 => rule(&sim, m1, &v, &[to_t3]),
            _ => continue,
        };
    }
    rule(&sim, m2, &reg_value(1, 1), &[outs[4]]);
    rule(&sim, m2, &reg_value(1, 2), &[to_t3]);
    let pop = action(&sim, d, ActionSpec::PopVlan);
    rule(
        &sim,
        m3,
        &buf().with(PrmField::OuterUdpDport, 53),
        &[pop, outs[5]],
    );
    let mut rng = megaflow::SplitMix64::new(7);
    let frames: Vec<(Vport, Vec<u8>)> = (0..300)
        .map(|_| {
            let mut s = FrameSpec::ipv4(1, 2, L4::udp(9, [53, 54][rng.below(2) as usize]))
                .macs(SRC_MAC, mac(rng.below(18)))
                .payload(rng.below(80) as usize);
            if rng.below(3) == 0 {
                s = s.vlan(0x8100, rng.below(4096) as u16);
            }
            (vf(rng.below(4) as u16), s.build())
        })
        .collect();
    let mut batch = Output::new();
    sim.process_batch(d, 0, frames.iter().map(|(v, f)| (*v, &f[..])), &mut batch);
    let mut single = Output::new();
    for (v, f) in &frames {
        sim.process(d, 0, *v, f, &mut single);
    }
    assert_eq!(batch.packets(), 300);
    // Frames of a batch leave as their walks end, not in input order: the
    // `packet` tag says which input each came from.
    let mut batched = batch.frames().to_vec();
    batched.sort_by_key(|o| o.packet);
    assert_eq!(batched.len(), single.frames().len());
    for (b, s) in batched.iter().zip(single.frames()) {
        assert_eq!(b, s, "packet {}", s.packet);
    }
    let egresses: std::collections::HashSet<_> = batch.frames().iter().map(|o| o.egress).collect();
    assert!(
        egresses.len() >= 6,
        "the traffic takes many paths: {egresses:?}"
    );
}

/// One writer inserting and removing rules while two threads forward:
/// every counter ends equal to the hits the threads saw.
#[test]
fn concurrent_rule_updates_keep_counters_exact() {
    const SLOTS: usize = 8;
    const WRITES: usize = 4000;
    const READS: usize = 20_000;
    let sim = Arc::new(SimBackend::default());
    let (d, t1) = pipe(&sim);
    let m = matcher(&*sim, t1, 0, &dmac_mask());
    let bulk = sim.counter_bulk_alloc(3).expect("counter_bulk_alloc");
    let ctrs: Vec<ActionId> = (0..SLOTS)
        .map(|k| {
            action(
                &*sim,
                d,
                ActionSpec::FlowCounter {
                    bulk,
                    offset: k as u32,
                },
            )
        })
        .collect();
    let outs: Vec<ActionId> = (0..SLOTS)
        .map(|k| to_vport(&*sim, d, vf(k as u16)))
        .collect();
    // Even slots stay; the writer toggles the odd ones.
    let mut live: Vec<Option<RuleId>> = (0..SLOTS)
        .map(|k| {
            (k % 2 == 0).then(|| rule(&*sim, m, &dmac_value(mac(k as u64)), &[ctrs[k], outs[k]]))
        })
        .collect();

    let writer = {
        let sim = Arc::clone(&sim);
        let (ctrs, outs) = (ctrs.clone(), outs.clone());
        thread::spawn(move || {
            let mut rng = megaflow::SplitMix64::new(1);
            let mut changes = 0;
            for _ in 0..WRITES {
                let k = 2 * rng.below(SLOTS as u64 / 2) as usize + 1;
                match live[k].take() {
                    Some(r) => sim.rule_destroy(r).expect("rule_destroy"),
                    None => {
                        let v = dmac_value(mac(k as u64));
                        live[k] = Some(
                            sim.rule_create(m, &v.bytes, &[ctrs[k], outs[k]])
                                .expect("rule_create"),
                        );
                    }
                }
                changes += 1;
            }
            changes
        })
    };
    let readers: Vec<_> = (0..2u64)
        .map(|t| {
            let sim = Arc::clone(&sim);
            thread::spawn(move || {
                let mut rng = megaflow::SplitMix64::new(100 + t);
                let mut seen = vec![CounterValue::default(); SLOTS];
                let mut sent = vec![0u64; SLOTS];
                let mut out = Output::new();
                for j in 0..READS {
                    let k = rng.below(SLOTS as u64) as usize;
                    let f = frame_to(mac(k as u64), rng.below(64) as usize);
                    out.clear();
                    sim.process(d, j as u64, ingress(), &f, &mut out);
                    let frames = out.frames();
                    assert_eq!(frames.len(), 1, "{frames:?}");
                    sent[k] += 1;
                    match frames[0].egress {
                        Egress::Vport(v) => {
                            assert_eq!(v, vf(k as u16), "slot {k} forwards to its vport");
                            seen[k].packets += 1;
                            seen[k].bytes += f.len() as u64;
                        }
                        Egress::Manager { ingress: i } => {
                            assert_eq!(i, ingress());
                            assert_eq!(k % 2, 1, "a permanent rule missed");
                        }
                        e => panic!("unexpected egress {e:?}"),
                    }
                }
                (seen, sent)
            })
        })
        .collect();
    assert_eq!(writer.join().expect("writer"), WRITES);
    let mut seen = vec![CounterValue::default(); SLOTS];
    let mut sent = [0u64; SLOTS];
    for r in readers {
        let (s, n) = r.join().expect("reader");
        for k in 0..SLOTS {
            seen[k].packets += s[k].packets;
            seen[k].bytes += s[k].bytes;
            sent[k] += n[k];
        }
    }
    let mut got = Vec::new();
    sim.counter_bulk_query(bulk, &mut got).expect("query");
    assert_eq!(got, seen, "counters equal the hits the threads saw");
    for k in (0..SLOTS).step_by(2) {
        assert_eq!(got[k].packets, sent[k], "slot {k} always forwarded");
    }
    assert_eq!(
        got.iter().map(|c| c.packets).sum::<u64>()
            + (0..SLOTS).map(|k| sent[k] - seen[k].packets).sum::<u64>(),
        2 * READS as u64
    );
}

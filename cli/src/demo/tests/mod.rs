use std::collections::{HashMap, HashSet};
use std::io::Cursor;

use megaflow::frame::{self as wire, FrameSpec, L4};
use megaflow::port::{PacketBatch, PcapReader, Port, PortError};
use megaflow::{extract_into, FlowKey};
use ofproto::text::parse_flow_file;
use ofproto::{FlowModCommand, OfAction};

use super::*;

fn spec(packets: u64, flows: u32, seed: u64) -> DemoSpec {
    DemoSpec {
        packets,
        flows,
        seed,
        ..DemoSpec::default()
    }
}

/// An FNV-style digest of a whole workload.
fn digest(spec: &DemoSpec) -> (u64, u64) {
    let mut g = generate(spec);
    let mut buf = Vec::new();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut n = 0;
    while let Some((ts, port)) = g.next_into(&mut buf) {
        for x in [ts.0, u64::from(port.0), buf.len() as u64]
            .into_iter()
            .chain(buf.iter().map(|&b| u64::from(b)))
        {
            h = (h ^ x).wrapping_mul(0x100_0000_01b3);
        }
        n += 1;
    }
    (h, n)
}

#[test]
fn deterministic_for_a_seed_different_for_another() {
    let a = spec(20_000, 300, 7);
    assert_eq!(digest(&a), digest(&a));
    let b = DemoSpec {
        seed: 8,
        ..a.clone()
    };
    assert_ne!(digest(&a).0, digest(&b).0);
    // The owned iterator gives what next_into gives.
    let mut g = generate(&a);
    let mut buf = Vec::new();
    for p in generate(&a).take(2_000) {
        let (ts, port) = g.next_into(&mut buf).unwrap();
        assert_eq!((p.ts, p.in_port, &p.frame), (ts, port, &buf));
    }
}

/// Checks the invariants every workload keeps.
fn check_invariants(s: &DemoSpec) {
    let g = generate(s);
    let n = s.normalized();
    let mix = g.mix();
    assert_eq!(g.remaining(), n.packets);
    assert_eq!(g.size_hint().0 as u64, n.packets);
    let sum = mix.tcp_packets
        + mix.udp_packets
        + mix.metered_packets
        + mix.broadcast_packets
        + mix.arp_packets;
    assert_eq!(sum, n.packets, "{mix:?}");
    let end = EPOCH.0 + (n.seconds * 1e9) as u64;
    let mut last = EPOCH;
    let mut key = FlowKey::ZERO;
    let mut count = 0;
    for (i, p) in g.enumerate() {
        count += 1;
        assert!(p.ts >= last, "packet {i}: {:?} before {last:?}", p.ts);
        assert!(p.ts.0 < end, "packet {i} at {:?} past the end", p.ts);
        last = p.ts;
        let vm = p.in_port.0;
        assert!((1..=n.vms).contains(&vm), "packet {i} on port {vm}");
        assert!(
            p.frame.len() >= 60 && p.frame.len() <= 1514,
            "{}",
            p.frame.len()
        );
        let ex = extract_into(vm, &p.frame, &mut key);
        assert_eq!(ex.error, None, "packet {i}: {:02x?}", p.frame);
        assert_eq!(key.eth_src(), vm_mac(vm), "packet {i}");
        // IPv4 source, or ARP sender address.
        assert_eq!(key.ipv4_src() as u32, vm_ip(vm), "packet {i}");
        assert!(matches!(key.eth_type(), 0x0800 | 0x0806));
    }
    assert_eq!(count, n.packets, "{s:?}");
}

#[test]
fn invariants_hold_for_many_specs() {
    let specs = [
        DemoSpec::default(),
        spec(0, 10, 1),
        spec(1, 10, 1),
        spec(5, 10, 1),
        spec(17, 1, 2),
        spec(40, 2_000, 3),
        spec(1_000, 5_000, 4),
        DemoSpec {
            vms: 2,
            packets: 5_000,
            flows: 50,
            seconds: 0.01,
            seed: 5,
        },
        DemoSpec {
            vms: 254,
            packets: 50_000,
            flows: 3_000,
            seconds: 3.0,
            seed: 6,
        },
        DemoSpec {
            vms: 3,
            packets: 10_000,
            flows: 100,
            seconds: 1_000.0,
            seed: 7,
        },
        // Out of range: normalised.
        DemoSpec {
            vms: 0,
            packets: 300,
            flows: 0,
            seconds: f64::NAN,
            seed: 8,
        },
    ];
    for s in &specs {
        check_invariants(s);
    }
}

/// (lower address, lower port, higher address, higher port, protocol) of
/// a unicast TCP/UDP packet, so both directions give the same tuple.
type Conv = (u64, u64, u64, u64, u64);

fn conversation(key: &FlowKey) -> Option<Conv> {
    if key.eth_type() != 0x0800 || key.ipv4_dst() == u64::from(BROADCAST_IP) {
        return None;
    }
    let a = (key.ipv4_src(), key.tp_src());
    let b = (key.ipv4_dst(), key.tp_dst());
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    Some((lo.0, lo.1, hi.0, hi.1, key.ip_proto()))
}

#[derive(Default)]
struct Census {
    packets: u64,
    tcp: u64,
    udp: u64,
    arp: u64,
    broadcast: u64,
    /// Packets per conversation, with first and last timestamps.
    convs: HashMap<Conv, (u64, u64, u64)>,
    /// Largest gap between two packets of one TCP conversation.
    tcp_gaps: HashMap<Conv, u64>,
    metered: Vec<(u64, usize)>,
    ssh_from_4: u64,
}

fn census(pkts: impl IntoIterator<Item = DemoPacket>) -> Census {
    let mut c = Census::default();
    let mut key = FlowKey::ZERO;
    for p in pkts {
        c.packets += 1;
        extract_into(p.in_port.0, &p.frame, &mut key);
        if key.eth_type() == 0x0806 {
            c.arp += 1;
            continue;
        }
        if key.eth_dst() == 0xffff_ffff_ffff {
            c.broadcast += 1;
            assert_eq!(key.ipv4_dst(), u64::from(BROADCAST_IP));
            continue;
        }
        match key.ip_proto() {
            6 => c.tcp += 1,
            17 => c.udp += 1,
            other => panic!("protocol {other}"),
        }
        if key.ip_proto() == 17 && key.tp_dst() == u64::from(METERED_UDP_PORT) {
            assert_eq!(p.in_port.0, METERED_VM);
            c.metered.push((p.ts.0, p.frame.len()));
        }
        if key.ip_proto() == 6
            && key.tp_dst() == u64::from(SAMPLED_TCP_PORT)
            && p.in_port.0 == METERED_VM
        {
            c.ssh_from_4 += 1;
        }
        let Some(conv) = conversation(&key) else {
            continue;
        };
        let e = c.convs.entry(conv).or_insert((0, p.ts.0, p.ts.0));
        if key.ip_proto() == 6 {
            let gap = c.tcp_gaps.entry(conv).or_insert(0);
            *gap = (*gap).max(p.ts.0 - e.2);
        }
        e.0 += 1;
        e.2 = p.ts.0;
    }
    c
}

#[test]
fn mix_flows_and_packet_kinds() {
    let s = DemoSpec::default();
    let mix = generate(&s).mix();
    check_invariants(&s);
    let c = census(generate(&s));
    let n = c.packets as f64;
    // Flows: one conversation per flow, exactly as many as asked.
    assert_eq!(
        c.convs.len() as u64,
        u64::from(mix.tcp_flows + mix.udp_flows + mix.metered_flows)
    );
    assert_eq!(c.convs.len(), s.flows as usize);
    // Proportions.
    let tcp = c.tcp as f64 / n;
    assert!(tcp > 0.6 && tcp < 0.95, "TCP share {tcp}");
    assert_eq!(c.tcp, mix.tcp_packets);
    assert_eq!(c.arp, mix.arp_packets);
    assert!(c.arp >= 2 && c.arp <= 12, "{}", c.arp);
    assert_eq!(c.broadcast, mix.broadcast_packets);
    assert_eq!(c.broadcast, s.packets / 500);
    assert_eq!(c.metered.len() as u64, mix.metered_packets);
    assert_eq!(c.udp, mix.udp_packets + mix.metered_packets);
    assert!(c.ssh_from_4 > 0);
    assert!(mix.ssh_flows >= 1);
    // Short UDP: at most 5 packets each, over within 10 ms.
    let mut short_udp = 0;
    for (conv, (count, first, last)) in &c.convs {
        let is_metered =
            conv.1 == u64::from(METERED_UDP_PORT) || conv.3 == u64::from(METERED_UDP_PORT);
        if conv.4 == 17 && !is_metered {
            assert!(*count <= 5, "{conv:?}: {count} packets");
            assert!(last - first < 10_000_000, "{conv:?}");
            short_udp += 1;
        }
        if conv.4 == 6 {
            assert!(*count >= 12, "{conv:?}: {count} packets");
        }
    }
    assert_eq!(short_udp, mix.udp_flows);
    // Long-lived TCP never idle for 2 s.
    for (conv, gap) in &c.tcp_gaps {
        assert!(*gap <= 2_000_000_000, "{conv:?}: idle for {gap} ns");
    }
    // The metered stream exceeds meter 1's rate well.
    let (t0, t1) = (c.metered[0].0, c.metered[c.metered.len() - 1].0);
    let bits: usize = c.metered.iter().map(|m| m.1 * 8).sum();
    let rate_kbps = bits as f64 / ((t1 - t0) as f64 / 1e9) / 1000.0;
    assert!(rate_kbps > 2.0 * f64::from(METER_KBPS), "{rate_kbps}");
}

#[test]
fn distinct_flows_track_the_spec_at_scale() {
    let s = DemoSpec {
        packets: 400_000,
        flows: 40_000,
        seconds: 20.0,
        ..DemoSpec::default()
    };
    let mix = generate(&s).mix();
    assert_eq!(mix.tcp_flows + mix.udp_flows + mix.metered_flows, s.flows);
    let c = census(generate(&s));
    assert_eq!(c.convs.len(), s.flows as usize);
    assert!(c.tcp as f64 / c.packets as f64 > 0.5);
    // Few packets per flow: flows are capped at packets / 8.
    let few = spec(8_000, 5_000, 3);
    let c = census(generate(&few));
    assert_eq!(c.convs.len(), 1_000);
}

#[test]
fn arp_precedes_each_pairs_first_packet() {
    let s = spec(20_000, 200, 11);
    let mut key = FlowKey::ZERO;
    let mut resolved: HashSet<(u64, u64)> = HashSet::new();
    let mut requested: HashMap<(u64, u64), u32> = HashMap::new();
    for p in generate(&s) {
        extract_into(p.in_port.0, &p.frame, &mut key);
        let (src, dst) = (key.ipv4_src(), key.ipv4_dst());
        let pair = (src.min(dst), src.max(dst));
        if key.eth_type() == 0x0806 {
            if key.ip_proto() == 1 {
                assert_eq!(key.eth_dst(), 0xffff_ffff_ffff);
                requested.insert(pair, p.in_port.0);
            } else {
                assert_eq!(key.ip_proto(), 2);
                assert!(requested.contains_key(&pair), "reply before request");
                assert_ne!(requested[&pair], p.in_port.0);
                assert_eq!(key.eth_dst(), vm_mac(requested[&pair]));
                assert!(resolved.insert(pair), "second ARP exchange");
            }
        } else if dst != u64::from(BROADCAST_IP) {
            assert!(resolved.contains(&pair), "{pair:?} talks before ARP");
        }
    }
    assert!(!resolved.is_empty());
}

#[test]
fn tcp_frames_are_sound() {
    // Checksums verify, sizes are the realistic ones, handshakes first.
    let s = spec(30_000, 100, 5);
    let mut key = FlowKey::ZERO;
    let mut sizes: HashMap<usize, u64> = HashMap::new();
    let mut seen_syn = HashSet::new();
    for p in generate(&s) {
        extract_into(p.in_port.0, &p.frame, &mut key);
        let f = &p.frame;
        if key.eth_type() != 0x0800 {
            continue;
        }
        assert_eq!(wire::checksum(0, &f[14..34]), 0, "IPv4 checksum");
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let l4 = &f[34..14 + total];
        let pseudo = wire::sum16(&f[26..34]) + key.ip_proto() as u32 + l4.len() as u32;
        assert_eq!(wire::checksum(pseudo, l4), 0, "L4 checksum");
        if key.ip_proto() == 6 {
            *sizes.entry(f.len()).or_default() += 1;
            let flags = key.tcp_flags();
            let conv = conversation(&key).unwrap();
            if flags == u64::from(frame::SYN) {
                assert!(seen_syn.insert(conv), "two SYNs");
            }
        }
    }
    for len in [1514, 66, 60, 74] {
        assert!(
            sizes.get(&len).copied().unwrap_or(0) > 0,
            "{len}: {sizes:?}"
        );
    }
    let data = sizes[&1514] as f64;
    let acks = (sizes[&66] + sizes[&60]) as f64;
    assert!(data > acks && acks > data / 4.0, "{sizes:?}");
}

#[test]
fn frame_writers_match_megaflow_build() {
    let (src, dst) = (vm_ip(3), vm_ip(9));
    let a = frame::Addrs {
        src_mac: vm_mac(3),
        dst_mac: vm_mac(9),
        src_ip: src,
        dst_ip: dst,
    };
    let mut buf = Vec::new();
    for payload in [0usize, 1, 2, 5, 6, 7, 33, 300, 1447, 1448, 1460, 1470] {
        for (sport, dport) in [(40_000u16, 53u16), (1, 65_535), (0, 0)] {
            frame::udp(&mut buf, &a, sport, dport, payload);
            let want = FrameSpec::ipv4(src, dst, L4::udp(sport, dport))
                .macs(vm_mac(3), vm_mac(9))
                .payload(payload)
                .build();
            assert_eq!(buf, want, "udp payload {payload}");
            let t = frame::Tcp {
                sport,
                dport,
                seq: 1,
                ack: 0,
                flags: frame::ACK,
                window: 0xffff,
                options: &[],
            };
            frame::tcp(&mut buf, &a, &t, payload);
            let want = FrameSpec::ipv4(src, dst, L4::tcp(sport, dport))
                .macs(vm_mac(3), vm_mac(9))
                .payload(payload)
                .build();
            assert_eq!(buf, want, "tcp payload {payload}");
        }
    }
    frame::arp_request(&mut buf, vm_mac(2), vm_ip(2), vm_ip(7));
    assert_eq!(buf, wire::arp_request(vm_mac(2), vm_ip(2), vm_ip(7)));
}

#[test]
fn flow_table_parses_and_says_what_it_should() {
    for vms in [2u32, 4, 8, 254] {
        let text = flow_table(vms);
        let mods = parse_flow_file(&text, FlowModCommand::Add)
            .unwrap_or_else(|e| panic!("{vms} VMs: {e}\n{text}"));
        let metered = if vms >= 4 { vms as usize - 1 } else { 0 };
        assert_eq!(mods.len(), 3 + metered + 2 * vms as usize, "{text}");
        let rules: Vec<_> = mods.iter().map(|m| &m.rule).collect();
        let with_meter = rules
            .iter()
            .filter(|r| r.instructions.meter == Some(megaflow::MeterId(METER_ID)))
            .count();
        assert_eq!(with_meter, metered);
        let sampled = rules
            .iter()
            .filter(|r| {
                r.instructions.apply.iter().any(|a| {
                    matches!(a, OfAction::Sample { probability } if *probability == SAMPLE_PROBABILITY)
                })
            })
            .count();
        assert_eq!(sampled, vms as usize);
    }
    assert_eq!(meter_lines(), "meter=1,kbps,band=type=drop,rate=8000\n");
}

fn read_all(bytes: Vec<u8>) -> Vec<DemoPacket> {
    let mut r = PcapReader::from_reader("demo", "demo.pcapng", Cursor::new(bytes)).unwrap();
    let mut batch = PacketBatch::new();
    let mut out = Vec::new();
    loop {
        match r.recv_batch(&mut batch) {
            Ok(_) => out.extend(batch.iter().map(|p| DemoPacket {
                ts: p.meta.ts,
                // Interface id i is port i + 1.
                in_port: PortNo(p.meta.in_port.unwrap().0 + 1),
                frame: p.data.to_vec(),
            })),
            Err(e) if e.is_eof() => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn pcapng_round_trip_equals_generate() {
    let s = spec(30_000, 500, 21);
    let (n, bytes) = write_pcapng_to(&s, Vec::new(), "demo.pcapng").unwrap();
    assert_eq!(n, s.packets);
    let got = read_all(bytes);
    let want: Vec<DemoPacket> = generate(&s).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want);

    let path = std::env::temp_dir().join(format!("eswitch-demo-{}.pcapng", std::process::id()));
    let n = write_pcapng(&spec(1_000, 20, 2), &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(n, 1_000);
    assert_eq!(
        read_all(bytes),
        generate(&spec(1_000, 20, 2)).collect::<Vec<_>>()
    );
}

#[test]
fn bad_specs_are_refused_by_the_writers() {
    let cases = [
        (
            DemoSpec {
                vms: 1,
                ..DemoSpec::default()
            },
            "vms",
        ),
        (
            DemoSpec {
                vms: 255,
                ..DemoSpec::default()
            },
            "vms",
        ),
        (
            DemoSpec {
                flows: 0,
                ..DemoSpec::default()
            },
            "flows",
        ),
        (
            DemoSpec {
                seconds: 0.0,
                ..DemoSpec::default()
            },
            "seconds",
        ),
        (
            DemoSpec {
                seconds: f64::INFINITY,
                ..DemoSpec::default()
            },
            "seconds",
        ),
        (
            DemoSpec {
                packets: MAX_PACKETS + 1,
                ..DemoSpec::default()
            },
            "packets",
        ),
    ];
    for (s, field) in cases {
        match write_pcapng_to(&s, Vec::new(), "x") {
            Err(DemoError::Spec { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{s:?}: {:?}", other.map(|(n, _)| n)),
        }
        assert!(s.validate().unwrap_err().to_string().contains(field));
        assert!(s.normalized().validate().is_ok());
    }
    assert!(DemoSpec::default().validate().is_ok());
    match write_pcapng(&DemoSpec::default(), "/nonexistent-dir/demo.pcapng") {
        Err(DemoError::Port(PortError::Io { .. })) => {}
        other => panic!("{other:?}"),
    }
}

mod overlay;
mod stateful;

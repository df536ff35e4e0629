use proptest::prelude::*;

use super::*;
use crate::frame::{sum16, FrameSpec, L4};

fn inner() -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1000, 53))
        .payload(40)
        .build()
}

fn vxlan4() -> Outer {
    let mut o = Outer::vxlan_v4(
        ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]),
        [198, 18, 1, 1],
        [198, 18, 1, 2],
        0x12_3456,
    );
    o.tos = 0x10;
    o
}

fn geneve6() -> Outer {
    let mut src = [0u8; 16];
    src[..2].copy_from_slice(&[0x20, 0x01]);
    src[15] = 1;
    let mut dst = src;
    dst[15] = 2;
    Outer {
        kind: Kind::Geneve,
        ip: OuterIp::V6 { src, dst },
        udp_dst: GENEVE_PORT,
        vni: 7,
        opts: vec![
            GeneveOpt {
                class: 0x0102,
                ty: 0x80,
                data: vec![1, 2, 3, 4],
            },
            GeneveOpt {
                class: 0xffff,
                ty: 3,
                data: vec![9; 8],
            },
        ],
        ..vxlan4()
    }
}

/// The ones'-complement sum folded: 0xffff over bytes whose checksum is
/// right.
fn folded(init: u32, data: &[u8]) -> u16 {
    let mut s = u64::from(init) + u64::from(sum16(data));
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn the_nics_vxlan_header_leaves_what_the_hardware_fills_zero() {
    let h = vxlan4().reformat_data().expect("valid");
    assert_eq!(h.len(), 50, "Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8");
    assert_eq!(&h[0..12], &[2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa]);
    assert_eq!(&h[12..14], &[0x08, 0x00]);
    // version/IHL, TOS, total length 0, id 0, DF, TTL, UDP, checksum 0.
    assert_eq!(&h[14..26], &[0x45, 0x10, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    assert_eq!(&h[26..34], &[198, 18, 1, 1, 198, 18, 1, 2]);
    // UDP: source port 0 (the hardware's entropy), 4789, length 0, checksum 0.
    assert_eq!(&h[34..42], &[0, 0, 0x12, 0xb5, 0, 0, 0, 0]);
    // VXLAN: the I flag, then VNI << 8.
    assert_eq!(&h[42..50], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
}

#[test]
fn software_encap_fills_lengths_checksum_and_entropy() {
    let o = vxlan4();
    let f = inner();
    let mut pkt = Vec::new();
    o.encap(&f, 0xdead_beef, &mut pkt).expect("encap");
    assert_eq!(pkt.len(), 50 + f.len());
    assert_eq!(
        u16::from_be_bytes([pkt[16], pkt[17]]) as usize,
        pkt.len() - 14
    );
    assert_eq!(folded(0, &pkt[14..34]), 0xffff, "IPv4 header checksum");
    let sport = u16::from_be_bytes([pkt[34], pkt[35]]);
    assert_eq!(sport, source_port(0xdead_beef));
    assert!(sport >= 49152);
    assert_eq!(
        u16::from_be_bytes([pkt[38], pkt[39]]) as usize,
        8 + 8 + f.len()
    );
    assert_eq!(&pkt[40..42], &[0, 0], "no UDP checksum unless asked");
    assert_eq!(&pkt[50..], &f[..]);
    assert_ne!(
        source_port(1),
        source_port(u32::MAX),
        "the hash spreads ports"
    );
}

#[test]
fn geneve_over_ipv6_carries_options_and_a_checksum_when_asked() {
    let o = Outer {
        csum: true,
        ..geneve6()
    };
    let f = inner();
    let mut pkt = Vec::new();
    o.encap(&f, 7, &mut pkt).expect("encap");
    let udp = 14 + 40;
    assert_eq!(
        u16::from_be_bytes([pkt[18], pkt[19]]) as usize,
        pkt.len() - udp
    );
    // opt_len 5 words (4 + 4, 4 + 8), the critical bit, protocol 0x6558.
    assert_eq!(&pkt[udp + 8..udp + 12], &[5, 0x40, 0x65, 0x58]);
    // The UDP checksum verifies over the pseudo-header.
    let mut pseudo = pkt[22..54].to_vec();
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&((pkt.len() - udp) as u16).to_be_bytes());
    assert_eq!(folded(sum16(&pseudo), &pkt[udp..]), 0xffff);
    let d = decap(&pkt, &[(GENEVE_PORT, Kind::Geneve)])
        .expect("well formed")
        .expect("a tunnel packet");
    assert_eq!(d.options(&pkt), o.opts);
    assert_eq!((d.vni, d.csum, d.kind), (7, true, Kind::Geneve));
    assert_eq!(&pkt[d.inner..], &f[..]);
}

#[test]
fn bad_headers_and_bad_packets_are_errors_that_say_why() {
    let mut o = vxlan4();
    o.vni = 1 << 24;
    assert_eq!(o.reformat_data(), Err(TunnelError::Vni(1 << 24)));
    let mut o = vxlan4();
    o.opts = geneve6().opts;
    assert_eq!(o.reformat_data(), Err(TunnelError::VxlanOptions));
    let mut o = geneve6();
    o.opts[0].data = vec![0; 5];
    assert_eq!(o.reformat_data(), Err(TunnelError::OptionLength(5)));
    let ports = [(VXLAN_PORT, Kind::Vxlan)];
    let mut pkt = Vec::new();
    vxlan4().encap(&inner(), 1, &mut pkt).expect("encap");
    // A fragment (more-fragments set).
    let mut frag = pkt.clone();
    frag[20] |= 0x20;
    assert_eq!(decap(&frag, &ports), Err(TunnelError::Fragment));
    // Cut in the VXLAN header, and in the inner frame.
    assert_eq!(
        decap(&pkt[..46], &ports),
        Err(TunnelError::Truncated("VXLAN header"))
    );
    assert_eq!(
        decap(&pkt[..55], &ports),
        Err(TunnelError::Truncated("inner Ethernet header"))
    );
    // No I flag.
    let mut bad = pkt.clone();
    bad[42] = 0;
    assert!(matches!(
        decap(&bad, &ports),
        Err(TunnelError::Malformed(_))
    ));
    // Not a tunnel: another UDP port, or not UDP at all.
    assert_eq!(decap(&pkt, &[(GENEVE_PORT, Kind::Geneve)]), Ok(None));
    assert_eq!(decap(&inner(), &ports), Ok(None));
}

proptest! {
    /// Whatever is encapsulated decapsulates to the same metadata and
    /// inner frame, and the NIC's header is the software header with the
    /// hardware's fields zeroed.
    #[test]
    fn encap_then_decap_gives_back_what_went_in(
        vni in 0u32..=VNI_MAX,
        v6 in any::<bool>(),
        geneve in any::<bool>(),
        tos in any::<u8>(),
        ttl in 1u8..,
        hash in any::<u32>(),
        opts in proptest::collection::vec((any::<u16>(), any::<u8>(), 0usize..4), 0..4),
        payload in 0usize..200,
    ) {
        let mut o = if v6 { geneve6() } else { vxlan4() };
        o.kind = if geneve { Kind::Geneve } else { Kind::Vxlan };
        o.udp_dst = o.kind.default_port();
        o.vni = vni;
        o.tos = tos;
        o.ttl = ttl;
        o.opts = if geneve {
            opts.iter()
                .map(|&(class, ty, words)| GeneveOpt { class, ty, data: vec![ty; words * 4] })
                .collect()
        } else {
            Vec::new()
        };
        let f = FrameSpec::ipv4(1, 2, L4::udp(5, 6)).payload(payload).build();
        let mut pkt = Vec::new();
        o.encap(&f, hash, &mut pkt).expect("encap");
        let ports = [(VXLAN_PORT, Kind::Vxlan), (GENEVE_PORT, Kind::Geneve)];
        let d = decap(&pkt, &ports).expect("well formed").expect("a tunnel packet");
        prop_assert_eq!(d.kind, o.kind);
        prop_assert_eq!(d.vni, vni);
        prop_assert_eq!(d.tos, tos);
        prop_assert_eq!(d.ttl, ttl);
        prop_assert_eq!(d.udp_src, source_port(hash));
        prop_assert_eq!(&d.options(&pkt), &o.opts);
        prop_assert_eq!(&pkt[d.inner..], &f[..]);
        let nic = o.reformat_data().expect("valid");
        prop_assert_eq!(nic.len(), o.len());
        prop_assert_eq!(d.inner, o.len());
    }
}

#[test]
fn the_template_encap_gives_the_same_bytes_as_building_the_header() {
    let mut g = geneve6();
    g.csum = true;
    for h in [vxlan4(), g] {
        let e = Encap::new(h.clone()).expect("header");
        assert_eq!(e.len(), h.len());
        for n in [0usize, 60, 1400] {
            let pkt = FrameSpec::ipv4(1, 2, L4::udp(3, 4)).payload(n).build();
            let (mut want, mut got) = (Vec::new(), Vec::new());
            h.encap(&pkt, 0x1234_5678, &mut want).expect("encap");
            e.encap_into(&pkt, 0x1234_5678, &mut got).expect("template");
            assert_eq!(got, want, "{:?} inner {n}", h.kind);
        }
    }
    let mut bad = vxlan4();
    bad.vni = 1 << 24;
    assert!(Encap::new(bad).is_err());
}

#[test]
fn the_tunnel_push_action_outputs_the_encapsulated_copy_or_counts_it_too_big() {
    use crate::actions::{execute, CollectSink, DpAction};
    use crate::extract::extract_into;
    use crate::types::PortNo;
    let pkt = inner();
    let run = |mtu: u16| {
        let mut key = FlowKey::ZERO;
        let mut layout = extract_into(1, &pkt, &mut key).layout;
        let acts = [
            DpAction::TunnelPush {
                header: std::sync::Arc::new(Encap::new(vxlan4()).expect("header")),
                port: PortNo(100),
                mtu,
            },
            DpAction::Output(PortNo(2)),
        ];
        let mut buf = pkt.clone();
        let mut sink = CollectSink::new();
        let o = execute(&acts, &mut buf, &mut layout, &mut sink);
        (o, sink, buf)
    };
    let (o, sink, buf) = run(1500);
    assert_eq!(o.outputs, 2);
    assert_eq!(o.too_big, 0);
    let (port, wire) = &sink.outputs[0];
    assert_eq!(*port, PortNo(100));
    let d = decap(wire, &[(VXLAN_PORT, Kind::Vxlan)])
        .expect("ok")
        .expect("vxlan");
    assert_eq!(d.vni, 0x12_3456);
    assert_eq!(&wire[d.inner..], &pkt[..], "the inner frame whole");
    assert_eq!(
        sink.outputs[1],
        (PortNo(2), pkt.clone()),
        "the packet goes on plain"
    );
    assert_eq!(buf, pkt);
    // Over the MTU: not sent, counted; the packet still goes on.
    let (o, sink, _) = run((vxlan4().ip_packet_len(pkt.len()) - 1) as u16);
    assert_eq!(o.too_big, 1);
    assert_eq!(sink.outputs.len(), 1);
    assert_eq!(sink.outputs[0].0, PortNo(2));
}

#[test]
fn tunnel_metadata_goes_into_the_key_and_back() {
    let pkt = {
        let mut v = Vec::new();
        vxlan4().encap(&inner(), 7, &mut v).expect("encap");
        v
    };
    let d = decap(&pkt, &[(VXLAN_PORT, Kind::Vxlan)])
        .expect("ok")
        .expect("vxlan");
    let k = TunnelKey::of(&d);
    assert!(k.is_set());
    assert_eq!(k.id, 0x12_3456);
    assert_eq!(k.ipv4_src, u32::from_be_bytes([198, 18, 1, 1]));
    assert_eq!(k.ipv4_dst, u32::from_be_bytes([198, 18, 1, 2]));
    assert_eq!((k.tos, k.ttl, k.tp_dst), (0x10, 64, VXLAN_PORT));
    assert_eq!(k.tp_src, source_port(7));
    let mut key = FlowKey::ZERO;
    k.write(&mut key);
    assert_eq!(TunnelKey::read(&key), k);
    assert!(!TunnelKey::read(&FlowKey::ZERO).is_set());
}

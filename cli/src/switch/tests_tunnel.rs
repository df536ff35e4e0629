//! Tunnel ports through the whole switch on the sim: encap in software
//! and, once the flow is hot, in the sim's FDB (an `L2_TO_L2_TUNNEL`
//! reformat), byte for byte the same frames; decap at receive from the
//! uplink into the tunnel port; drops by reason.

use std::net::IpAddr;

use megaflow::frame::{FrameSpec, L4};
use megaflow::tunnel::{decap, Encap, Kind, Outer, OuterIp, VXLAN_PORT};
use offload::sim::SimConfig;
use offload::Vport;
use ofproto::tunnel::{FromFlow, NextHop, StaticUnderlay, TunnelPort};
use ofproto::PipelineConfig;

use super::*;

const T0: u64 = 1_700_000_000_000_000_000;
const UPLINK: PortNo = PortNo(100);
const VNI: u32 = 4242;
const LOCAL: [u8; 4] = [198, 19, 0, 1];
const REMOTE: [u8; 4] = [198, 19, 0, 2];

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

fn ports() -> Vec<PortSpec> {
    let mut t = TunnelPort::new(Kind::Vxlan, FromFlow::Fixed(IpAddr::from(REMOTE)));
    t.key = FromFlow::Fixed(VNI);
    let spec = |name: &str, no: u32, kind, vport| PortSpec {
        name: name.into(),
        no: PortNo(no),
        kind,
        vport,
        tunnel: None,
        bridge: ofproto::BridgeNo::MAIN,
        peer: None,
    };
    vec![
        spec("vm1", 1, PortKind::Representor, Vport::vf(0)),
        spec("vm2", 2, PortKind::Representor, Vport::vf(1)),
        spec("wire0", 100, PortKind::Uplink, Some(Vport::UPLINK)),
        PortSpec {
            tunnel: Some(Arc::new(t)),
            ..spec("tun0", 200, PortKind::Vxlan, None)
        },
    ]
}

fn switch() -> SimSwitch {
    switch_with(
        "priority=10,in_port=1,actions=output:200\n\
         priority=10,in_port=200,tun_id=4242,actions=output:2\n\
         priority=0,actions=drop",
    )
}

/// The switch of [`ports`] with the flow table `flows`, over an underlay
/// that reaches the remote endpoint by the uplink.
fn switch_with(flows: &str) -> SimSwitch {
    switch_on(&ports(), flows)
}

/// A switch of `ports` with the flow table `flows`, over an underlay that
/// reaches the remote endpoint by the uplink.
fn switch_on(ports: &[PortSpec], flows: &str) -> SimSwitch {
    let flows = FlowFile::parse(flows).expect("flows");
    let mut sw = SimSwitch::new(
        ports,
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("switch");
    sw.set_underlay(Arc::new(StaticUnderlay {
        local: vec![IpAddr::from(LOCAL)],
        hops: vec![(
            IpAddr::from(REMOTE),
            NextHop {
                port: UPLINK,
                src: IpAddr::from(LOCAL),
                eth_src: [2, 0, 0, 0, 0xff, 1],
                eth_dst: [2, 0, 0, 0, 0xff, 2],
                mtu: 1500,
            },
        )],
    }));
    sw
}

#[derive(Default)]
struct Rec {
    out: Vec<(PortNo, Vec<u8>, Path)>,
}

impl Egressor for Rec {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path) {
        self.out.push((port, frame.to_vec(), path));
    }
}

fn inner() -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_00c8, L4::udp(5000, 9))
        .payload(100)
        .build()
}

#[test]
fn encap_in_software_then_in_the_sims_fdb_gives_the_same_frames() {
    let mut sw = switch();
    let pkt = inner();
    let mut rec = Rec::default();
    for i in 0..50 {
        sw.receive(at(i), &[(PortNo(1), &pkt[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 50, "every packet sent");
    let hw = rec.out.iter().filter(|o| o.2 == Path::Hardware).count();
    assert!(hw >= 40, "offloaded once hot: {hw} of 50 by the sim's FDB");
    assert!(
        rec.out.iter().any(|o| o.2 == Path::Software),
        "the first by software"
    );
    // One frame, whichever path encapsulated it: the hardware fills what
    // software fills (lengths, checksum, source port from the same hash).
    let first = &rec.out[0].1;
    for (port, frame, path) in &rec.out {
        assert_eq!(*port, UPLINK);
        assert_eq!(frame, first, "{path:?} frame differs");
    }
    let d = decap(first, &[(VXLAN_PORT, Kind::Vxlan)])
        .expect("ok")
        .expect("vxlan");
    assert_eq!(
        (d.vni, d.dst, d.src),
        (VNI, IpAddr::from(REMOTE), IpAddr::from(LOCAL))
    );
    assert_eq!(&first[d.inner..], &pkt[..]);
    // The device holds one encap context for the flow.
    let rules = sw.dump_rules();
    let text = format!("{rules:?}");
    assert!(text.contains("l2_to_l2_tunnel"), "{text}");
}

#[test]
fn decap_at_receive_enters_the_tunnel_port_and_bad_tunnel_packets_are_counted() {
    let mut sw = switch();
    let pkt = inner();
    let wire = |vni: u32| from_remote(vni, &pkt);
    let mut rec = Rec::default();
    let good = wire(VNI);
    for i in 0..5 {
        sw.receive(at(i), &[(UPLINK, &good[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 5);
    for (port, frame, _) in &rec.out {
        assert_eq!((*port, frame), (PortNo(2), &pkt), "the inner frame to vm2");
    }
    // Another VNI: no port takes it. A fragment: not decapsulated.
    let other = wire(7);
    let mut frag = good.clone();
    frag[20] = 0x20; // more fragments
    let c = megaflow::frame::checksum(0, &{
        let mut h = frag[14..34].to_vec();
        h[10..12].copy_from_slice(&[0, 0]);
        h
    });
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    sw.receive(
        at(10),
        &[(UPLINK, &other[..]), (UPLINK, &frag[..])],
        &mut rec,
    );
    assert_eq!(rec.out.len(), 5, "neither delivered");
    let c = sw.counters();
    // Software counts what it decapsulated; the rest the sim's FDB did.
    let sw_path = rec.out.iter().filter(|o| o.2 == Path::Software).count();
    assert_eq!(c.tunnel_rx, sw_path as u64);
    assert_eq!(c.tunnel_drop_unknown_vni, 1);
    assert_eq!(c.tunnel_drop_fragment, 1);
    // For another host (not a local endpoint): switched as it is, here by
    // the table's drop.
    let mut elsewhere = outer_from_remote(VNI);
    elsewhere.ip = OuterIp::V4 {
        src: REMOTE,
        dst: [198, 19, 0, 9],
    };
    let mut v = Vec::new();
    Encap::new(elsewhere)
        .expect("header")
        .encap_into(&pkt, 7, &mut v)
        .expect("encap");
    sw.receive(at(11), &[(UPLINK, &v[..])], &mut rec);
    assert_eq!(sw.counters().tunnel_rx, sw_path as u64);
    assert_eq!(rec.out.len(), 5);
}

/// The VXLAN header from the remote endpoint to the local one.
fn outer_from_remote(vni: u32) -> Outer {
    let mut o = Outer::vxlan_v4(
        ([2, 0, 0, 0, 0xff, 2], [2, 0, 0, 0, 0xff, 1]),
        REMOTE,
        LOCAL,
        vni,
    );
    o.df = false;
    o
}

/// A VXLAN frame from the remote endpoint to the local one with `vni`
/// around `inner`.
fn from_remote(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    Encap::new(outer_from_remote(vni))
        .expect("header")
        .encap_into(inner, 7, &mut v)
        .expect("encap");
    v
}

#[test]
fn decap_is_offloaded_once_hot_and_delivers_the_same_inner_frames() {
    let mut sw = switch();
    let pkt = inner();
    let wire = from_remote(VNI, &pkt);
    let mut rec = Rec::default();
    for i in 0..50 {
        sw.receive(at(i), &[(UPLINK, &wire[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 50, "every packet delivered");
    for (port, frame, path) in &rec.out {
        assert_eq!(
            (*port, frame),
            (PortNo(2), &pkt),
            "{path:?}: the inner frame"
        );
    }
    let hw = rec.out.iter().filter(|o| o.2 == Path::Hardware).count();
    assert!(
        hw >= 40,
        "decapsulated by the sim's FDB once hot: {hw} of 50; {:?}",
        sw.pipeline().dump()
    );
    let text = format!("{:?}", sw.dump_rules());
    assert!(text.contains("l2_tunnel_to_l2"), "{text}");
    // The rule is the tunnel's: another VNI is not taken by it (software
    // drops it, unknown), nor is a packet for another host.
    let other = from_remote(7, &pkt);
    sw.receive(at(60), &[(UPLINK, &other[..])], &mut rec);
    assert_eq!(rec.out.len(), 50, "unknown VNI not delivered");
    assert_eq!(sw.counters().tunnel_drop_unknown_vni, 1);
}

#[test]
fn an_offloaded_uplink_flow_never_takes_a_tunnel_packet() {
    // The uplink's own traffic goes to vm1: its megaflow, once offloaded,
    // sees every packet on the uplink before any decap, so it must tell
    // tunnel packets apart.
    let mut sw = switch_with(
        "priority=10,in_port=200,tun_id=4242,actions=output:2\n\
         priority=5,in_port=100,actions=output:1\n\
         priority=0,actions=drop",
    );
    let plain_to_local = FrameSpec::ipv4(0xc613_0002, 0xc613_0001, L4::udp(5000, 53))
        .payload(64)
        .build();
    let plain_elsewhere = FrameSpec::ipv4(0xc613_0002, 0xc613_0009, L4::udp(5000, 4789))
        .payload(64)
        .build();
    let mut rec = Rec::default();
    for i in 0..50 {
        sw.receive(
            at(i),
            &[
                (UPLINK, &plain_to_local[..]),
                (UPLINK, &plain_elsewhere[..]),
            ],
            &mut rec,
        );
    }
    let hw = rec.out.iter().filter(|o| o.2 == Path::Hardware).count();
    assert!(hw >= 80, "the uplink's flows offloaded: {hw} of 100");
    assert!(rec.out.iter().all(|o| o.0 == PortNo(1)));
    // Now a tunnel packet: decapsulated, to vm2, never raw to vm1.
    let pkt = inner();
    let wire = from_remote(VNI, &pkt);
    rec.out.clear();
    for i in 0..50 {
        sw.receive(at(100 + i), &[(UPLINK, &wire[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 50);
    for (port, frame, path) in &rec.out {
        assert_eq!((*port, frame), (PortNo(2), &pkt), "{path:?}");
    }
    assert!(
        rec.out.iter().any(|o| o.2 == Path::Hardware),
        "decap offloaded too"
    );
}

#[test]
fn a_copy_into_a_tunnel_beside_a_local_one_is_offloaded_as_one_rule() {
    // vm1's packets to vm2 and into the tunnel: a dest_array with an encap
    // in front of the uplink's copy.
    let mut sw = switch_with(
        "priority=10,in_port=1,actions=output:2,output:200\n\
         priority=0,actions=drop",
    );
    let pkt = inner();
    let mut rec = Rec::default();
    for i in 0..50 {
        sw.receive(at(i), &[(PortNo(1), &pkt[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 100, "two copies of each");
    let hw = rec.out.iter().filter(|o| o.2 == Path::Hardware).count();
    assert!(hw >= 80, "offloaded once hot: {hw} of 100");
    let by = |port: PortNo| -> Vec<&Vec<u8>> {
        rec.out
            .iter()
            .filter(|o| o.0 == port)
            .map(|o| &o.1)
            .collect()
    };
    assert!(
        by(PortNo(2)).iter().all(|f| **f == pkt),
        "vm2's copies plain"
    );
    let tunneled = by(UPLINK);
    assert_eq!(tunneled.len(), 50);
    assert!(
        tunneled.iter().all(|f| *f == tunneled[0]),
        "the sim's encap is software's, byte for byte"
    );
    let d = decap(tunneled[0], &[(VXLAN_PORT, Kind::Vxlan)])
        .expect("ok")
        .expect("vxlan");
    assert_eq!((d.vni, &tunneled[0][d.inner..]), (VNI, &pkt[..]));
    let text = format!("{:?}", sw.dump_rules());
    assert!(text.contains("dest_array"), "{text}");
}

/// A Geneve port to the remote endpoint (VNI 5000) on port 300.
fn geneve_ports() -> Vec<PortSpec> {
    let mut t = TunnelPort::new(Kind::Geneve, FromFlow::Fixed(IpAddr::from(REMOTE)));
    t.key = FromFlow::Fixed(5000);
    let mut p = ports();
    p.retain(|s| s.tunnel.is_none());
    p.push(PortSpec {
        name: "gnv0".into(),
        no: PortNo(300),
        kind: PortKind::Geneve,
        vport: None,
        tunnel: Some(Arc::new(t)),
        bridge: ofproto::BridgeNo::MAIN,
        peer: None,
    });
    p
}

#[test]
fn a_geneve_option_is_read_at_receive_and_carried_at_encap_by_the_tlv_table() {
    use megaflow::tunnel::GeneveOpt;
    use openflow::nx_tlv::{TableMod, TlvMap, CMD_ADD};
    let mut sw = switch_on(&geneve_ports(), "priority=0,actions=drop");
    // OVN's option, as ovn-controller maps it.
    sw.apply_tlv_mod(&TableMod {
        command: CMD_ADD,
        maps: vec![TlvMap::new(0x0102, 0x80, 4, 0)],
    })
    .expect("tlv map");
    for f in [
        "priority=10,in_port=300,tun_metadata0=0x00020001,actions=output:2",
        "priority=10,in_port=1,actions=set_field:0x00010002->tun_metadata0,output:300",
    ] {
        let fm = ofproto::text::parse_flow_in(
            f,
            ofproto::FlowModCommand::Add,
            sw.pipeline().bridge().tlv(),
        )
        .expect(f);
        sw.pipeline_mut()
            .bridge_mut()
            .apply_flow_mod(&fm, at(0))
            .expect(f);
    }
    let pkt = inner();
    let geneve = |opts: Vec<GeneveOpt>| {
        let mut o = outer_from_remote(5000);
        o.kind = Kind::Geneve;
        o.udp_dst = megaflow::tunnel::GENEVE_PORT;
        o.opts = opts;
        let mut v = Vec::new();
        Encap::new(o)
            .expect("header")
            .encap_into(&pkt, 7, &mut v)
            .expect("encap");
        v
    };
    let opt = |ty: u8, data: &[u8]| GeneveOpt {
        class: 0x0102,
        ty,
        data: data.to_vec(),
    };
    let mut rec = Rec::default();
    // The option the rule matches, many times: delivered every time, by
    // software (the device cannot read options).
    let good = geneve(vec![opt(0x80, &[0, 2, 0, 1])]);
    let other = geneve(vec![opt(0x80, &[0, 2, 0, 9])]);
    let long = geneve(vec![opt(0x80, &[0; 8])]);
    let critical = geneve(vec![opt(0x81, &[0; 4])]);
    for i in 0..30 {
        sw.receive(at(i), &[(UPLINK, &good[..])], &mut rec);
    }
    assert_eq!(rec.out.len(), 30);
    assert!(rec
        .out
        .iter()
        .all(|(p, f, path)| (*p, f, *path) == (PortNo(2), &pkt, Path::Software)));
    // Another value: no rule. Another length, an unknown critical option:
    // dropped at receive, counted.
    sw.receive(
        at(40),
        &[
            (UPLINK, &other[..]),
            (UPLINK, &long[..]),
            (UPLINK, &critical[..]),
        ],
        &mut rec,
    );
    assert_eq!(rec.out.len(), 30);
    assert_eq!(sw.counters().tunnel_drop_bad_option, 2);
    // And in a scrape, by reason.
    use crate::live::metrics::{encode_snapshot, LiveMetrics, Snapshot};
    let text =
        encode_snapshot(&Snapshot::of(&sw), &[], &LiveMetrics::default(), "sim").expect("scrape");
    for (series, want) in [
        (
            "eswitch_tunnel_dropped_packets_total{reason=\"bad_option\"} ",
            "2",
        ),
        (
            "eswitch_tunnel_dropped_packets_total{reason=\"unknown_vni\"} ",
            "0",
        ),
        // The 30 delivered and the one of another value (no rule).
        ("eswitch_tunnel_rx_packets_total ", "31"),
    ] {
        assert!(
            text.contains(&format!("{series}{want}\n")),
            "{series}{want} in:\n{text}"
        );
    }
    // The other way: the header carries the option set_field wrote.
    let mut rec = Rec::default();
    sw.receive(at(50), &[(PortNo(1), &pkt[..])], &mut rec);
    let [(UPLINK, frame, _)] = rec.out.as_slice() else {
        panic!("{:?}", rec.out.iter().map(|o| o.0).collect::<Vec<_>>());
    };
    let d = decap(frame, &[(megaflow::tunnel::GENEVE_PORT, Kind::Geneve)])
        .expect("ok")
        .expect("geneve");
    assert_eq!(d.vni, 5000);
    assert_eq!(d.options(frame), [opt(0x80, &[0, 1, 0, 2])]);
    assert_eq!(&frame[d.inner..], &pkt[..]);
}

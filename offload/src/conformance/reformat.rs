//! Conformance cases: packet reformat (VXLAN encap and decap), its
//! parameters and its place in a rule's action order.

use megaflow::tunnel::{decap, Encap, Kind, Outer, OuterIp, VXLAN_PORT};

use super::*;
use crate::dr::Reformat;

/// The VXLAN/IPv4 header of test flows: VNI 4242 between 198.19.0.1 and
/// .2.
fn vxlan() -> Outer {
    Outer::vxlan_v4(
        ([2, 0, 0, 0, 0xff, 1], [2, 0, 0, 0, 0xff, 2]),
        [198, 19, 0, 1],
        [198, 19, 0, 2],
        4242,
    )
}

fn encap_spec(data: Vec<u8>) -> ActionSpec {
    ActionSpec::PacketReformat {
        reformat: Reformat::L2ToL2Tunnel,
        data,
    }
}

fn decap_spec() -> ActionSpec {
    ActionSpec::PacketReformat {
        reformat: Reformat::L2TunnelToL2,
        data: Vec::new(),
    }
}

/// Reformat parameters the library refuses (EINVAL): encap without a
/// header or with one over the device's size, decap with data, encap in a
/// NIC_RX domain and decap in a NIC_TX one.
pub fn reformat_params_einval<D: Device>(dev: &D) {
    let d = domain(dev, DomainType::Fdb);
    let header = vxlan().reformat_data().expect("header");
    fails(
        dev.action_create(d, encap_spec(Vec::new())),
        Errno::EINVAL,
        "encap without data",
    );
    fails(
        dev.action_create(d, encap_spec(vec![0; 4096])),
        Errno::EINVAL,
        "encap of 4096 bytes",
    );
    fails(
        dev.action_create(
            d,
            ActionSpec::PacketReformat {
                reformat: Reformat::L2TunnelToL2,
                data: header.clone(),
            },
        ),
        Errno::EINVAL,
        "decap with data",
    );
    let rx = domain(dev, DomainType::NicRx);
    fails(
        dev.action_create(rx, encap_spec(header.clone())),
        Errno::EINVAL,
        "encap in NIC_RX",
    );
    let tx = domain(dev, DomainType::NicTx);
    fails(
        dev.action_create(tx, decap_spec()),
        Errno::EINVAL,
        "decap in NIC_TX",
    );
    action(dev, d, encap_spec(header));
    action(dev, d, decap_spec());
}

/// The order `decap → modify → push VLAN → encap → vport`: encap before a
/// rewrite or a push, or decap after a rewrite, is refused (EOPNOTSUPP).
pub fn reformat_order_eopnotsupp<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let encap = action(
        dev,
        p.d,
        encap_spec(vxlan().reformat_data().expect("header")),
    );
    let decap = action(dev, p.d, decap_spec());
    let set = modify(dev, p.d, &[ModifyOp::set(ModifyField::SmacLo, 0x0abc)]);
    let push = action(
        dev,
        p.d,
        ActionSpec::PushVlan {
            header: 0x8100_0064,
        },
    );
    let out = to_vport(dev, p.d, Vport::UPLINK);
    for (what, list) in [
        ("modify after encap", vec![encap, set, out]),
        ("push_vlan after encap", vec![encap, push, out]),
        ("decap after modify", vec![set, decap, out]),
    ] {
        fails(
            dev.rule_create(m, &dmac_value(mac(1)).bytes, &list),
            Errno::EOPNOTSUPP,
            what,
        );
    }
    rule(dev, m, &dmac_value(mac(1)), &[set, push, encap, out]);
}

/// encap: the frame leaves behind the header (toward a VF here: the FDB's
/// TX side encapsulates to any vport, and every check has VFs), with what
/// the hardware fills filled: the IPv4 total length and a valid checksum, the
/// UDP length, a UDP source port; the inner frame whole.
pub fn action_encap_vxlan<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let header = vxlan().reformat_data().expect("header");
    let encap = action(dev, p.d, encap_spec(header.clone()));
    let to = dev.vf(4);
    let out = to_vport(dev, p.d, to);
    rule(dev, m, &dmac_value(mac(1)), &[encap, out]);
    for payload in [18usize, 64, 1000] {
        let f = frame_to(mac(1), payload);
        let got = one(dev, p.d, dev.ingress(), &f);
        assert_eq!(got.egress, Egress::Vport(to));
        let b = &got.bytes;
        assert_eq!(b.len(), header.len() + f.len(), "header + frame");
        assert_eq!(&b[header.len()..], &f[..], "the inner frame whole");
        assert_eq!(&b[..14], &header[..14], "outer Ethernet as given");
        let total = u16::from_be_bytes([b[16], b[17]]) as usize;
        assert_eq!(total, b.len() - 14, "IPv4 total length filled");
        assert_eq!(
            megaflow::frame::checksum(0, &b[14..34]),
            0,
            "IPv4 checksum valid"
        );
        assert_eq!(&b[26..34], &header[26..34], "addresses as given");
        let ulen = u16::from_be_bytes([b[38], b[39]]) as usize;
        assert_eq!(ulen, b.len() - 34, "UDP length filled");
        assert_ne!(u16::from_be_bytes([b[34], b[35]]), 0, "a UDP source port");
        let d = decap(b, &[(VXLAN_PORT, Kind::Vxlan)])
            .expect("well formed")
            .expect("vxlan");
        assert_eq!(d.vni, 4242);
    }
}

/// decap: a VXLAN frame from the wire leaves on a VF as its inner frame
/// (the FDB decapsulates on its RX side only: a check without the uplink
/// among its ports skips this case).
pub fn action_decap_vxlan<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let decap_a = action(dev, p.d, decap_spec());
    let out = to_vport(dev, p.d, dev.vf(2));
    let outer_mac = 0x0200_0000_ff01u64;
    rule(dev, m, &dmac_value(outer_mac), &[decap_a, out]);
    let mut o = vxlan();
    o.eth_dst = outer_mac.to_be_bytes()[2..].try_into().expect("6 bytes");
    o.ip = OuterIp::V4 {
        src: [198, 19, 0, 2],
        dst: [198, 19, 0, 1],
    };
    let inner = frame_to(mac(3), 100);
    let mut wire = Vec::new();
    Encap::new(o)
        .expect("header")
        .encap_into(&inner, 99, &mut wire)
        .expect("encap");
    let got = one(dev, p.d, Vport::UPLINK, &wire);
    assert_eq!(got.egress, Egress::Vport(dev.vf(2)));
    assert_eq!(got.bytes, inner, "the inner frame");
}

/// The outer IPv4/UDP fields of a decap rule (to UDP `port`, not a
/// fragment) and the inner destination MAC 3: (mask, value).
fn decap_match(port: u16) -> (Buf, Buf) {
    let mask = buf()
        .with(PrmField::OuterEthertype, 0xffff)
        .with(PrmField::OuterIpVersion, 4)
        .with(PrmField::OuterIpProtocol, 0xff)
        .with(PrmField::OuterFrag, 1)
        .with(PrmField::OuterUdpDport, 0xffff)
        .with(PrmField::InnerDmac, 0xffff_ffff_ffff);
    let value = buf()
        .with(PrmField::OuterEthertype, 0x0800)
        .with(PrmField::OuterIpVersion, 4)
        .with(PrmField::OuterIpProtocol, 17)
        .with(PrmField::OuterUdpDport, u128::from(port))
        .with(PrmField::InnerDmac, u128::from(mac(3)));
    (mask, value)
}

/// A rule on `p.t1` that decapsulates what `mask`/`value` match to VF 2.
fn decap_rule<D: Device>(dev: &D, p: &Pipe, mask: &Buf, value: &Buf) {
    let m = matcher(dev, p.t1, 0, mask);
    let decap_a = action(dev, p.d, decap_spec());
    let out = to_vport(dev, p.d, dev.vf(2));
    rule(dev, m, value, &[decap_a, out]);
}

/// `inner` through the header `o` from the remote endpoint 198.19.0.2 to
/// the local one (DF clear).
fn from_remote(mut o: Outer, inner: &[u8]) -> Vec<u8> {
    o.df = false;
    o.ip = OuterIp::V4 {
        src: [198, 19, 0, 2],
        dst: [198, 19, 0, 1],
    };
    let mut v = Vec::new();
    Encap::new(o)
        .expect("header")
        .encap_into(inner, 99, &mut v)
        .expect("encap");
    v
}

/// A decap rule as the offload manager builds one for a tunnel port's
/// megaflow: the outer IPv4/UDP headers to port 4789, not a fragment, the
/// VXLAN VNI, and the *inner* destination MAC. Only a frame with that VNI
/// and that inner destination is decapsulated; another VNI or another
/// inner destination misses, untouched (the device parses VXLAN on 4789
/// and the frame inside it).
pub fn match_vxlan_vni_and_inner<D: Device>(dev: &D) {
    let p = pipe(dev);
    let (mask, value) = decap_match(VXLAN_PORT);
    let mask = mask.with(PrmField::MiscVxlanVni, 0xff_ffff);
    let value = value.with(PrmField::MiscVxlanVni, 4242);
    decap_rule(dev, &p, &mask, &value);
    let wire = |vni: u32, to: u64| {
        let mut o = vxlan();
        o.vni = vni;
        let inner = frame_to(to, 100);
        (from_remote(o, &inner), inner)
    };
    let (good, inner) = wire(4242, mac(3));
    let got = one(dev, p.d, Vport::UPLINK, &good);
    assert_eq!(got.egress, Egress::Vport(dev.vf(2)), "VNI 4242 to mac 3");
    assert_eq!(got.bytes, inner, "the inner frame");
    for (what, (f, _)) in [
        ("another VNI", wire(4243, mac(3))),
        ("another inner destination", wire(4242, mac(4))),
    ] {
        let got = one(dev, p.d, Vport::UPLINK, &f);
        assert_ne!(got.egress, Egress::Vport(dev.vf(2)), "{what} missed");
        assert_eq!(got.bytes, f, "{what}: untouched");
    }
}

/// A Geneve decap rule as the offload manager builds one: the outer
/// IPv4/UDP headers to port 6081, not a fragment, the Geneve VNI, an
/// Ethernet payload, *no options* (`geneve_opt_len` 0: this backend does
/// not program the flex parser that reads them) and the inner destination
/// MAC. A frame without options is decapsulated; the same frame carrying an
/// option misses, untouched, for software to read its options.
pub fn match_geneve_vni_without_options<D: Device>(dev: &D) {
    use megaflow::tunnel::{GeneveOpt, GENEVE_ETH, GENEVE_PORT};
    let p = pipe(dev);
    let (mask, value) = decap_match(GENEVE_PORT);
    let mask = mask
        .with(PrmField::MiscGeneveVni, 0xff_ffff)
        .with(PrmField::MiscGeneveProtocolType, 0xffff)
        .with(PrmField::MiscGeneveOptLen, 0x3f);
    let value = value
        .with(PrmField::MiscGeneveVni, 5000)
        .with(PrmField::MiscGeneveProtocolType, u128::from(GENEVE_ETH));
    decap_rule(dev, &p, &mask, &value);
    let inner = frame_to(mac(3), 100);
    let wire = |opts: Vec<GeneveOpt>| {
        let mut o = vxlan();
        o.kind = Kind::Geneve;
        o.udp_dst = GENEVE_PORT;
        o.vni = 5000;
        o.opts = opts;
        from_remote(o, &inner)
    };
    let got = one(dev, p.d, Vport::UPLINK, &wire(Vec::new()));
    assert_eq!(
        got.egress,
        Egress::Vport(dev.vf(2)),
        "no options: decapsulated"
    );
    assert_eq!(got.bytes, inner, "the inner frame");
    let with = wire(vec![GeneveOpt {
        class: 0x0102,
        ty: 0x80,
        data: vec![0, 0, 0xab, 0xcd],
    }]);
    let got = one(dev, p.d, Vport::UPLINK, &with);
    assert_ne!(got.egress, Egress::Vport(dev.vf(2)), "an option: missed");
    assert_eq!(got.bytes, with, "an option: untouched");
}

/// dest_array with an encap in front of one destination
/// (`MLX5DV_DR_ACTION_DEST_REFORMAT`): one copy leaves as it came, the
/// other behind the VXLAN header, each with what the hardware fills; an
/// entry whose reformat is a decap, or whose destination is a table, is
/// refused (EINVAL).
pub fn action_dest_array_encap<D: Device>(dev: &D) {
    let p = pipe(dev);
    let m = matcher(dev, p.t1, 0, &dmac_mask());
    let header = vxlan().reformat_data().expect("header");
    let encap = action(dev, p.d, encap_spec(header.clone()));
    let (plain, tunnel) = (dev.vf(1), dev.vf(4));
    let a = to_vport(dev, p.d, plain);
    let b = to_vport(dev, p.d, tunnel);
    let decap_a = action(dev, p.d, decap_spec());
    let t2 = table(dev, p.d, 2);
    let to_t2 = action(dev, p.d, ActionSpec::DestTable(t2));
    let bad = |reformat, to| {
        ActionSpec::DestArray(vec![
            a.into(),
            crate::dr::ArrayDest {
                reformat: Some(reformat),
                to,
            },
        ])
    };
    fails(
        dev.action_create(p.d, bad(decap_a, b)),
        Errno::EINVAL,
        "decap in a dest_array",
    );
    fails(
        dev.action_create(p.d, bad(encap, to_t2)),
        Errno::EINVAL,
        "encap to a table",
    );
    let array = action(dev, p.d, bad(encap, b));
    rule(dev, m, &dmac_value(mac(1)), &[array]);
    let f = frame_to(mac(1), 100);
    let out = dev.send(p.d, 0, dev.ingress(), &f);
    assert_eq!(out.len(), 2, "two copies: {out:?}");
    let copy = |v| {
        out.iter()
            .find(|o| o.egress == Egress::Vport(v))
            .expect("a copy")
    };
    assert_eq!(copy(plain).bytes, f, "the plain copy unchanged");
    let b = &copy(tunnel).bytes;
    assert_eq!(&b[header.len()..], &f[..], "the inner frame whole");
    assert_eq!(
        megaflow::frame::checksum(0, &b[14..34]),
        0,
        "IPv4 checksum valid"
    );
    let d = decap(b, &[(VXLAN_PORT, Kind::Vxlan)])
        .expect("well formed")
        .expect("vxlan");
    assert_eq!(d.vni, 4242);
}

//! Fuzz target for tunnel decapsulation (`megaflow::tunnel::decap`, what
//! the datapath runs on every UDP packet from the wire to a tunnel port):
//! any bytes are read back, refused with a reason, or left alone, without
//! a panic; what is read back points inside the packet, at a whole inner
//! Ethernet header, and re-encapsulating its inner frame with the same
//! metadata decapsulates to the same metadata. The options read through a
//! TLV table (`OptionMap::read`, what receive fills `tun_metadata` with)
//! are refused with a reason or fill only mapped bits, and written back
//! (`OptionMap::options`) read the same again.
//!
//! Input: arbitrary bytes, as one Ethernet frame.

use megaflow::tunnel::{
    decap, write_options, GeneveOpt, Kind, OptionMap, OptionSlot, Outer, OuterIp, GENEVE_PORT,
    VXLAN_PORT,
};

/// OVN's option (4 bytes, critical) as `tun_metadata0` and an 8-byte one
/// as `tun_metadata5`.
fn option_map() -> OptionMap {
    let slot = |index, class, ty, offset, len| OptionSlot {
        index,
        class,
        ty,
        offset,
        len,
    };
    OptionMap::new(vec![slot(0, 0x0102, 0x80, 0, 4), slot(5, 0xffff, 1, 4, 8)])
}

/// Options written back into raw bytes, as a Geneve header carries them.
fn raw(opts: &[GeneveOpt]) -> Vec<u8> {
    let mut v = Vec::new();
    write_options(opts, &mut v);
    v
}

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let ports = [(VXLAN_PORT, Kind::Vxlan), (GENEVE_PORT, Kind::Geneve)];
    let Ok(Some(d)) = decap(data, &ports) else {
        return;
    };
    assert!(d.inner + 14 <= data.len(), "{d:?}");
    let map = option_map();
    if let Ok((opts, present)) = map.read(&data[d.opts.clone()]) {
        let mapped = map.slots().iter().fold(0u64, |a, s| a | s.present_bit());
        assert_eq!(present & !mapped, 0, "only mapped options are present");
        let bits = map
            .slots()
            .iter()
            .filter(|s| present & s.present_bit() != 0)
            .fold(0u128, |a, s| a | s.mask());
        assert_eq!(opts & !bits, 0, "only present options' bits are set");
        let back = map.read(&raw(&map.options(opts, present)));
        assert_eq!(back, Ok((opts, present)), "written back, read the same");
    }
    let ip = match (d.src, d.dst) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(t)) => OuterIp::V4 {
            src: s.octets(),
            dst: t.octets(),
        },
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(t)) => OuterIp::V6 {
            src: s.octets(),
            dst: t.octets(),
        },
        _ => panic!("mixed address families: {d:?}"),
    };
    let outer = Outer {
        kind: d.kind,
        eth_src: [0; 6],
        eth_dst: [0; 6],
        ip,
        tos: d.tos,
        ttl: d.ttl,
        df: d.df,
        udp_dst: d.udp_dst,
        csum: false,
        vni: d.vni,
        opts: d.options(data),
    };
    let inner = &data[d.inner..];
    let mut again = Vec::new();
    if outer.encap(inner, 0, &mut again).is_err() {
        // Options the parser accepts but a header cannot carry (an option
        // longer than 124 bytes cannot be written): nothing to compare.
        return;
    }
    let back = decap(&again, &ports)
        .expect("a header built here reads back")
        .expect("a tunnel packet");
    assert_eq!(
        (back.vni, back.options(&again), back.kind),
        (d.vni, d.options(data), d.kind)
    );
    assert_eq!(&again[back.inner..], inner);
}

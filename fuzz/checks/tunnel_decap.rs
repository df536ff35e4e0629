//! Fuzz target for tunnel decapsulation (`megaflow::tunnel::decap`, what
//! the datapath runs on every UDP packet from the wire to a tunnel port):
//! any bytes are read back, refused with a reason, or left alone, without
//! a panic; what is read back points inside the packet, at a whole inner
//! Ethernet header, and re-encapsulating its inner frame with the same
//! metadata decapsulates to the same metadata.
//!
//! Input: arbitrary bytes, as one Ethernet frame.

use megaflow::tunnel::{decap, Kind, Outer, OuterIp, GENEVE_PORT, VXLAN_PORT};

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let ports = [(VXLAN_PORT, Kind::Vxlan), (GENEVE_PORT, Kind::Geneve)];
    let Ok(Some(d)) = decap(data, &ports) else {
        return;
    };
    assert!(d.inner + 14 <= data.len(), "{d:?}");
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

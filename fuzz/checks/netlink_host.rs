//! Fuzz target for rtnetlink address, route, neighbour and link messages
//! as the tunnel ports' host state reads them (`netlink-packet-route`'s
//! parser, then `offload::host::HostTable`): any bytes are parsed or
//! refused without a panic; whatever parses is added to a table, and a
//! next hop the table then gives is a route of it whose prefix holds the
//! address asked for.
//!
//! Input: arbitrary bytes, as one netlink datagram.

use std::net::IpAddr;

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use offload::host::HostTable;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(data) else {
        return;
    };
    let NetlinkPayload::InnerMessage(inner) = msg.payload else {
        return;
    };
    let mut t = HostTable::default();
    t.add(&inner);
    let asked: [IpAddr; 4] = [
        [198, 19, 0, 2].into(),
        [0, 0, 0, 0].into(),
        [255, 255, 255, 255].into(),
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1].into(),
    ];
    for dst in asked {
        let _ = t.is_local(dst);
        if let Some(hop) = t.next_hop(dst) {
            assert!(
                t.routes.iter().any(|r| r.oif == hop.ifindex
                    && r.dst.is_ipv4() == dst.is_ipv4()
                    && covers(r.dst, r.prefix, dst)),
                "{dst} routed by no route of {:?}",
                t.routes
            );
        }
    }
}

fn covers(net: IpAddr, prefix: u8, a: IpAddr) -> bool {
    let bits = |x: IpAddr| match x {
        IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, 32u32),
        IpAddr::V6(v) => (u128::from(v), 128u32),
    };
    let ((n, w), (x, _)) = (bits(net), bits(a));
    let p = u32::from(prefix).min(w);
    p == 0 || (n >> (128 - p)) == (x >> (128 - p))
}

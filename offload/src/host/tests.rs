use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn link(index: u32, name: &str, mac: [u8; 6], mtu: u32) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.attributes = vec![
        LinkAttribute::IfName(name.into()),
        LinkAttribute::Address(mac.to_vec()),
        LinkAttribute::Mtu(mtu),
    ];
    RouteNetlinkMessage::NewLink(m)
}

fn addr(index: u32, a: &str) -> RouteNetlinkMessage {
    let mut m = AddressMessage::default();
    m.header.index = index;
    m.attributes = vec![AddressAttribute::Local(ip(a))];
    RouteNetlinkMessage::NewAddress(m)
}

fn route(dst: &str, prefix: u8, oif: u32, gw: Option<&str>, metric: u32) -> RouteNetlinkMessage {
    let mut m = RouteMessage::default();
    let d = ip(dst);
    m.header.address_family = if d.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    m.header.destination_prefix_length = prefix;
    m.header.kind = RouteType::Unicast;
    m.header.table = 254;
    m.attributes = vec![
        RouteAttribute::Destination(RouteAddress::from(d)),
        RouteAttribute::Oif(oif),
        RouteAttribute::Priority(metric),
    ];
    if let Some(g) = gw {
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::from(ip(g))));
    }
    RouteNetlinkMessage::NewRoute(m)
}

fn neigh(index: u32, a: &str, state: NeighbourState, mac: Option<[u8; 6]>) -> RouteNetlinkMessage {
    let mut m = NeighbourMessage::default();
    m.header.ifindex = index;
    m.header.state = state;
    let dst = match ip(a) {
        IpAddr::V4(v) => NeighbourAddress::Inet(v),
        IpAddr::V6(v) => NeighbourAddress::Inet6(v),
    };
    m.attributes = vec![NeighbourAttribute::Destination(dst)];
    if let Some(mac) = mac {
        m.attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    }
    RouteNetlinkMessage::NewNeighbour(m)
}

const UPLINK_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];
const GW: [u8; 6] = [2, 0, 0, 0, 0, 3];

/// wire0 (2): 198.19.0.1/24, a gateway 198.19.0.254 for 10.0.0.0/8 and
/// the default; lo (1) holds no route to speak of.
fn table() -> HostTable {
    let mut t = HostTable::default();
    for m in [
        link(1, "lo", [0; 6], 65536),
        link(2, "wire0", UPLINK_MAC, 1500),
        addr(2, "198.19.0.1"),
        route("198.19.0.0", 24, 2, None, 0),
        route("10.0.0.0", 8, 2, Some("198.19.0.254"), 100),
        route("10.0.0.0", 8, 1, Some("127.0.0.2"), 50),
        route("10.1.0.0", 16, 2, Some("198.19.0.254"), 900),
        route("0.0.0.0", 0, 2, Some("198.19.0.254"), 0),
        neigh(2, "198.19.0.2", NeighbourState::Reachable, Some(PEER)),
        neigh(2, "198.19.0.254", NeighbourState::Stale, Some(GW)),
        neigh(2, "198.19.0.3", NeighbourState::Incomplete, None),
        neigh(2, "198.19.0.4", NeighbourState::Failed, None),
    ] {
        t.add(&m);
    }
    t
}

#[test]
fn the_longest_prefix_wins_then_the_lowest_metric() {
    let t = table();
    let on_link = t.next_hop(ip("198.19.0.2")).expect("route");
    assert_eq!(on_link.link.name, "wire0");
    assert_eq!(
        on_link.neighbour,
        ip("198.19.0.2"),
        "on link: the address itself"
    );
    assert_eq!(on_link.state, Some(NeighState::Valid(PEER)));
    assert_eq!(
        on_link.src,
        Some(ip("198.19.0.1")),
        "an address of the link"
    );
    assert_eq!((on_link.link.mac, on_link.link.mtu), (UPLINK_MAC, 1500));
    // /16 beats /8 whatever the metrics; among the /8s metric 50 wins.
    assert_eq!(t.next_hop(ip("10.1.2.3")).expect("route").ifindex, 2);
    let eight = t.next_hop(ip("10.2.0.1")).expect("route");
    assert_eq!((eight.ifindex, eight.neighbour), (1, ip("127.0.0.2")));
    // The default, through the gateway, whose MAC is known (stale is
    // usable).
    let d = t.next_hop(ip("203.0.113.9")).expect("default");
    assert_eq!(d.neighbour, ip("198.19.0.254"));
    assert_eq!(d.state, Some(NeighState::Valid(GW)));
    // No IPv6 route at all.
    assert!(t.next_hop(ip("2001:db8::1")).is_none());
}

#[test]
fn neighbour_states_read_as_usable_pending_or_failed() {
    let t = table();
    assert_eq!(
        t.next_hop(ip("198.19.0.3")).expect("r").state,
        Some(NeighState::Pending)
    );
    assert_eq!(
        t.next_hop(ip("198.19.0.4")).expect("r").state,
        Some(NeighState::Failed)
    );
    assert_eq!(
        t.next_hop(ip("198.19.0.5")).expect("r").state,
        None,
        "never asked"
    );
    assert!(t.is_local(ip("198.19.0.1")));
    assert!(!t.is_local(ip("198.19.0.2")));
}

#[test]
fn other_tables_and_route_types_are_not_the_main_tables_unicast() {
    let mut t = HostTable::default();
    let RouteNetlinkMessage::NewRoute(mut r) = route("198.51.100.0", 24, 2, None, 0) else {
        unreachable!()
    };
    r.header.table = 255; // local
    t.add(&RouteNetlinkMessage::NewRoute(r.clone()));
    r.header.table = 254;
    r.header.kind = RouteType::Broadcast;
    t.add(&RouteNetlinkMessage::NewRoute(r));
    assert!(t.routes.is_empty(), "{:?}", t.routes);
}

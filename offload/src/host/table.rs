//! The host's links, addresses, routes and neighbours as plain data, built
//! from rtnetlink messages, and the next hop toward an address.

use std::collections::BTreeMap;
use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::RouteNetlinkMessage;

/// The main routing table's id.
const RT_TABLE_MAIN: u32 = 254;

/// A link: its name, MAC and MTU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostLink {
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: u32,
}

/// A unicast route of the main table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostRoute {
    pub dst: IpAddr,
    pub prefix: u8,
    pub metric: u32,
    pub oif: u32,
    pub gateway: Option<IpAddr>,
    pub prefsrc: Option<IpAddr>,
}

/// What the kernel knows of a neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighState {
    /// A usable MAC (reachable, stale, delay, probe, permanent, noarp).
    Valid([u8; 6]),
    /// Being resolved (incomplete, none).
    Pending,
    /// Resolution failed.
    Failed,
}

/// The next hop toward an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The link the route leaves by.
    pub link: HostLink,
    pub ifindex: u32,
    /// The outer source: the route's preferred source, else an address of
    /// the link of the same family.
    pub src: Option<IpAddr>,
    /// The neighbour to resolve: the gateway, or the address on link.
    pub neighbour: IpAddr,
    pub state: Option<NeighState>,
}

/// Everything the underlay needs, as of the last dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostTable {
    pub links: BTreeMap<u32, HostLink>,
    /// `(ifindex, address)`.
    pub addrs: Vec<(u32, IpAddr)>,
    pub routes: Vec<HostRoute>,
    pub neighbours: BTreeMap<(u32, IpAddr), NeighState>,
}

fn route_addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
        RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
        _ => None,
    }
}

fn masked(a: IpAddr, prefix: u8) -> u128 {
    let (bits, width) = match a {
        IpAddr::V4(v) => (u128::from(u32::from(v)), 32u32),
        IpAddr::V6(v) => (u128::from(v), 128u32),
    };
    let p = u32::from(prefix).min(width);
    if p == 0 {
        0
    } else {
        bits >> (width - p)
    }
}

impl HostTable {
    /// Adds what one dumped (or notified) message says.
    pub fn add(&mut self, msg: &RouteNetlinkMessage) {
        match msg {
            RouteNetlinkMessage::NewLink(l) => self.add_link(l),
            RouteNetlinkMessage::NewAddress(a) => self.add_addr(a),
            RouteNetlinkMessage::NewRoute(r) => self.add_route(r),
            RouteNetlinkMessage::NewNeighbour(n) => self.add_neighbour(n),
            _ => {}
        }
    }

    fn add_link(&mut self, l: &LinkMessage) {
        let mut link = HostLink::default();
        for a in &l.attributes {
            match a {
                LinkAttribute::IfName(n) => link.name = n.clone(),
                LinkAttribute::Address(m) => {
                    link.mac = <[u8; 6]>::try_from(m.as_slice()).unwrap_or_default()
                }
                LinkAttribute::Mtu(m) => link.mtu = *m,
                _ => {}
            }
        }
        self.links.insert(l.header.index, link);
    }

    fn add_addr(&mut self, a: &AddressMessage) {
        let addr = a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let addr = addr.or_else(|| {
            a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            })
        });
        if let Some(ip) = addr {
            self.addrs.push((a.header.index, ip));
        }
    }

    fn add_route(&mut self, r: &RouteMessage) {
        if r.header.kind != RouteType::Unicast {
            return;
        }
        let mut table = u32::from(r.header.table);
        let (mut dst, mut oif, mut gateway, mut prefsrc, mut metric) = (None, None, None, None, 0);
        for a in &r.attributes {
            match a {
                RouteAttribute::Table(t) => table = *t,
                RouteAttribute::Destination(d) => dst = route_addr(d),
                RouteAttribute::Oif(i) => oif = Some(*i),
                RouteAttribute::Gateway(g) => gateway = route_addr(g),
                RouteAttribute::PrefSource(s) => prefsrc = route_addr(s),
                RouteAttribute::Priority(p) => metric = *p,
                _ => {}
            }
        }
        if table != RT_TABLE_MAIN {
            return;
        }
        let unspecified = match r.header.address_family {
            netlink_packet_route::AddressFamily::Inet6 => IpAddr::from([0u16; 8]),
            _ => IpAddr::from([0u8; 4]),
        };
        let Some(oif) = oif else { return };
        self.routes.push(HostRoute {
            dst: dst.unwrap_or(unspecified),
            prefix: r.header.destination_prefix_length,
            metric,
            oif,
            gateway,
            prefsrc,
        });
    }

    fn add_neighbour(&mut self, n: &NeighbourMessage) {
        let mut dst = None;
        let mut mac = None;
        for a in &n.attributes {
            match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => {
                    dst = Some(IpAddr::V4(*v))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v)) => {
                    dst = Some(IpAddr::V6(*v))
                }
                NeighbourAttribute::LinkLayerAddress(m) => {
                    mac = <[u8; 6]>::try_from(m.as_slice()).ok()
                }
                _ => {}
            }
        }
        let Some(dst) = dst else { return };
        let state = match (n.header.state, mac) {
            (NeighbourState::Failed, _) => NeighState::Failed,
            (
                NeighbourState::Reachable
                | NeighbourState::Stale
                | NeighbourState::Delay
                | NeighbourState::Probe
                | NeighbourState::Permanent
                | NeighbourState::Noarp,
                Some(m),
            ) => NeighState::Valid(m),
            _ => NeighState::Pending,
        };
        self.neighbours.insert((n.header.ifindex, dst), state);
    }

    /// Whether `addr` is one of the host's.
    pub fn is_local(&self, addr: IpAddr) -> bool {
        self.addrs.iter().any(|(_, a)| *a == addr)
    }

    /// The route toward `dst` (longest prefix, then lowest metric) and
    /// what is known of its neighbour; `None`: no route.
    pub fn next_hop(&self, dst: IpAddr) -> Option<Hop> {
        let r = self
            .routes
            .iter()
            .filter(|r| r.dst.is_ipv4() == dst.is_ipv4())
            .filter(|r| masked(r.dst, r.prefix) == masked(dst, r.prefix))
            .min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric))?;
        let link = self.links.get(&r.oif).cloned().unwrap_or_default();
        let neighbour = r.gateway.unwrap_or(dst);
        let src = r.prefsrc.or_else(|| {
            self.addrs
                .iter()
                .find(|(i, a)| *i == r.oif && a.is_ipv4() == dst.is_ipv4())
                .map(|(_, a)| *a)
        });
        Some(Hop {
            link,
            ifindex: r.oif,
            src,
            neighbour,
            state: self.neighbours.get(&(r.oif, neighbour)).copied(),
        })
    }
}

//! netlink-packet-route → [`LinkInfo`].

use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, State};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::table::{LinkInfo, LinkMsg};

/// The neutral view of a link message. `None` for messages that are not
/// about a link as a whole (e.g. `AF_BRIDGE` port notifications, whose
/// `RTM_DELLINK` only means "left the bridge").
pub fn link_info(msg: &LinkMessage) -> Option<LinkInfo> {
    if msg.header.interface_family != AddressFamily::Unspec {
        return None;
    }
    let flags = msg.header.flags;
    let mut info = LinkInfo {
        ifindex: msg.header.index,
        admin_up: flags.contains(LinkFlags::Up),
        ..LinkInfo::default()
    };
    let mut oper = State::Unknown;
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => info.ifname = n.clone(),
            LinkAttribute::PhysSwitchId(id) => {
                info.switch_id = id.id.get(..id.len).map(<[u8]>::to_vec);
            }
            LinkAttribute::PhysPortName(n) => info.port_name = Some(n.clone()),
            LinkAttribute::Mtu(m) => info.mtu = *m,
            LinkAttribute::Address(a) => info.mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            LinkAttribute::OperState(s) => oper = *s,
            _ => {}
        }
    }
    info.oper_up = match oper {
        State::Up => true,
        State::Unknown => flags.contains(LinkFlags::Up) && flags.contains(LinkFlags::LowerUp),
        _ => false,
    };
    Some(info)
}

/// `RTM_NEWLINK`/`RTM_DELLINK` as a [`LinkMsg`]; other messages → `None`.
pub fn link_msg(msg: &RouteNetlinkMessage) -> Option<LinkMsg> {
    match msg {
        RouteNetlinkMessage::NewLink(l) => link_info(l).map(LinkMsg::New),
        RouteNetlinkMessage::DelLink(l) => link_info(l).map(LinkMsg::Del),
        _ => None,
    }
}

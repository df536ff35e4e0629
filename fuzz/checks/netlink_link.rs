//! Fuzz target for rtnetlink link messages as the representor tracker
//! reads them (`netlink-packet-route`'s parser, then
//! `offload::representor::{link_msg, link_info}` and the port table):
//! any bytes are parsed or refused without a panic, and whatever parses is
//! applied to a table that stays consistent (names and ifindexes unique).
//!
//! Input: arbitrary bytes, as one netlink datagram.

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use offload::representor::{link_info, link_msg, RepresentorConfig, Representors};
use offload::Vport;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(data) else {
        return;
    };
    let NetlinkPayload::InnerMessage(inner) = msg.payload else {
        return;
    };
    let config = RepresentorConfig::default()
        .with("eth0", Vport::vf(0).expect("vf0"))
        .with("pf0vf1", Vport::vf(1).expect("vf1"));
    let mut table = Representors::new(config);
    if let RouteNetlinkMessage::NewLink(ref lm) = inner {
        let _ = link_info(lm);
    }
    if let Some(m) = link_msg(&inner) {
        let _ = table.apply(m);
    }
    let mut names = std::collections::HashSet::new();
    for r in table.iter() {
        assert!(names.insert(r.ifname.clone()), "a name twice");
    }
}

use super::{link_info, link_msg, LinkInfo, LinkMsg, PortEvent, RepresentorConfig, Representors};
use crate::Vport;
use netlink_packet_core::Parseable;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, LinkPhysId, State};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

const SWITCH: [u8; 8] = [0xb8, 0x59, 0x9f, 0x03, 0x00, 0x11, 0x22, 0x33];

fn rep(ifindex: u32, name: &str, port: &str) -> LinkInfo {
    LinkInfo {
        ifindex,
        ifname: name.to_string(),
        switch_id: Some(SWITCH.to_vec()),
        port_name: Some(port.to_string()),
        admin_up: false,
        oper_up: false,
        mtu: 1500,
        mac: Some([2, 0, 0, 0, 0, ifindex as u8]),
    }
}

fn plain(ifindex: u32, name: &str) -> LinkInfo {
    LinkInfo {
        switch_id: None,
        port_name: None,
        ..rep(ifindex, name, "")
    }
}

fn added(events: &[PortEvent]) -> Vec<(u32, Option<Vport>)> {
    events
        .iter()
        .filter_map(|e| match e {
            PortEvent::Added(r) => Some((r.ifindex, r.vport)),
            _ => None,
        })
        .collect()
}

#[test]
fn switchdev_links_are_added_with_their_vport() {
    let mut t = Representors::default();
    let ev = t.apply(LinkMsg::New(rep(10, "enp1s0f0_3", "pf0vf3")));
    assert_eq!(added(&ev), vec![(10, Some(Vport(4)))]);
    let ev = t.apply(LinkMsg::New(rep(11, "enp1s0f0", "p0")));
    assert_eq!(added(&ev), vec![(11, Some(Vport::UPLINK))]);
    // An SF has no vport without config.
    let ev = t.apply(LinkMsg::New(rep(12, "en3f0pf0sf88", "pf0sf88")));
    assert_eq!(added(&ev), vec![(12, None)]);
    assert_eq!(t.len(), 3);
    assert_eq!(
        t.get(10).map(|r| r.switch_id.clone()),
        Some(SWITCH.to_vec())
    );
}

#[test]
fn plain_links_are_ignored_unless_configured() {
    let cfg =
        RepresentorConfig::from_pairs([("vm1-rep", "vf0"), ("pf0sf88", "9")]).expect("config");
    let mut t = Representors::new(cfg);
    assert!(t.apply(LinkMsg::New(plain(1, "lo"))).is_empty());
    assert!(t.apply(LinkMsg::New(plain(2, "eth0"))).is_empty());
    // A switch id alone (e.g. a bond) is not a representor.
    let half = LinkInfo {
        port_name: None,
        ..rep(3, "bond0", "")
    };
    assert!(t.apply(LinkMsg::New(half)).is_empty());
    let ev = t.apply(LinkMsg::New(plain(4, "vm1-rep")));
    assert_eq!(added(&ev), vec![(4, Some(Vport(1)))]);
    // Config by port name overrides (SF vports come from config).
    let ev = t.apply(LinkMsg::New(rep(5, "en3f0pf0sf88", "pf0sf88")));
    assert_eq!(added(&ev), vec![(5, Some(Vport(9)))]);
    assert!(t.apply(LinkMsg::Del(plain(2, "eth0"))).is_empty());
    assert_eq!(t.len(), 2);
}

#[test]
fn bad_config_vport_is_an_error() {
    assert!(RepresentorConfig::from_pairs([("x", "vfx")]).is_err());
}

#[test]
fn rename_keeps_identity() {
    let mut t = Representors::default();
    t.apply(LinkMsg::New(rep(10, "eth5", "pf0vf0")));
    let ev = t.apply(LinkMsg::New(rep(10, "enp1s0f0_0", "pf0vf0")));
    assert_eq!(
        ev,
        vec![PortEvent::Renamed {
            ifindex: 10,
            old: "eth5".into(),
            new: "enp1s0f0_0".into()
        }]
    );
    assert_eq!(t.len(), 1);
    assert_eq!(
        t.by_name("enp1s0f0_0").map(|r| r.vport),
        Some(Some(Vport(1)))
    );
    assert!(t.by_name("eth5").is_none());
}

#[test]
fn emulated_rep_rename_keeps_identity_and_vport() {
    let mut t = Representors::new(RepresentorConfig::default().with("veth-a", Vport(3)));
    t.apply(LinkMsg::New(plain(7, "veth-a")));
    let ev = t.apply(LinkMsg::New(plain(7, "veth-z")));
    assert_eq!(
        ev,
        vec![PortEvent::Renamed {
            ifindex: 7,
            old: "veth-a".into(),
            new: "veth-z".into()
        }]
    );
    assert_eq!(t.get(7).and_then(|r| r.vport), Some(Vport(3)));
}

#[test]
fn ifindex_reused_by_another_port_is_remove_then_add() {
    let mut t = Representors::default();
    t.apply(LinkMsg::New(rep(10, "a", "pf0vf0")));
    let ev = t.apply(LinkMsg::New(rep(10, "a", "pf0vf1")));
    assert!(
        matches!(ev.as_slice(), [PortEvent::Removed(r), PortEvent::Added(n)]
        if r.port_name.as_deref() == Some("pf0vf0") && n.vport == Some(Vport(2)))
    );
}

#[test]
fn oper_state_down_up() {
    let mut t = Representors::default();
    let mut l = rep(10, "r", "pf0vf0");
    t.apply(LinkMsg::New(l.clone()));
    // Admin up alone (carrier still down) changes no oper state.
    l.admin_up = true;
    assert!(t.apply(LinkMsg::New(l.clone())).is_empty());
    assert_eq!(t.get(10).map(|r| r.admin_up), Some(true));
    l.oper_up = true;
    assert_eq!(
        t.apply(LinkMsg::New(l.clone())),
        vec![PortEvent::Up { ifindex: 10 }]
    );
    // Repeated notifications are not events.
    assert!(t.apply(LinkMsg::New(l.clone())).is_empty());
    l.oper_up = false;
    assert_eq!(
        t.apply(LinkMsg::New(l)),
        vec![PortEvent::Down { ifindex: 10 }]
    );
}

#[test]
fn mtu_and_mac_changes() {
    let mut t = Representors::default();
    let mut l = rep(10, "r", "pf0vf0");
    t.apply(LinkMsg::New(l.clone()));
    l.mtu = 9000;
    assert_eq!(
        t.apply(LinkMsg::New(l.clone())),
        vec![PortEvent::MtuChanged {
            ifindex: 10,
            old: 1500,
            new: 9000
        }]
    );
    let old = l.mac;
    l.mac = Some([2, 1, 2, 3, 4, 5]);
    assert_eq!(
        t.apply(LinkMsg::New(l.clone())),
        vec![PortEvent::MacChanged {
            ifindex: 10,
            old,
            new: l.mac
        }]
    );
    assert_eq!(t.get(10).map(|r| (r.mtu, r.mac)), Some((9000, l.mac)));
}

#[test]
fn delete_removes_only_that_port() {
    let mut t = Representors::default();
    t.apply(LinkMsg::New(rep(10, "a", "pf0vf0")));
    t.apply(LinkMsg::New(rep(11, "b", "pf0vf1")));
    let ev = t.apply(LinkMsg::Del(rep(10, "a", "pf0vf0")));
    assert!(matches!(ev.as_slice(), [PortEvent::Removed(r)] if r.ifindex == 10));
    assert!(t.get(10).is_none());
    assert!(t.get(11).is_some());
    // Deleting again, or an unknown link: nothing.
    assert!(t.apply(LinkMsg::Del(rep(10, "a", "pf0vf0"))).is_empty());
}

#[test]
fn resync_diffs_without_dropping_the_table() {
    let mut t = Representors::default();
    let ev = t.resync(vec![
        plain(1, "lo"),
        rep(10, "a", "pf0vf0"),
        rep(11, "b", "pf0vf1"),
        rep(12, "c", "pf0vf2"),
    ]);
    assert_eq!(
        added(&ev),
        vec![
            (10, Some(Vport(1))),
            (11, Some(Vport(2))),
            (12, Some(Vport(3)))
        ]
    );
    // Missed while overrun: 10 deleted, 11 renamed + up, 13 created; 12 same.
    let mut b = rep(11, "b2", "pf0vf1");
    b.oper_up = true;
    let ev = t.resync(vec![
        plain(1, "lo"),
        b,
        rep(12, "c", "pf0vf2"),
        rep(13, "d", "pf0vf3"),
    ]);
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert!(matches!(&ev[0], PortEvent::Removed(r) if r.ifindex == 10));
    assert!(ev.contains(&PortEvent::Renamed {
        ifindex: 11,
        old: "b".into(),
        new: "b2".into()
    }));
    assert!(ev.contains(&PortEvent::Up { ifindex: 11 }));
    assert_eq!(added(&ev), vec![(13, Some(Vport(4)))]);
    assert_eq!(t.len(), 3);
    // A resync with nothing changed is silent.
    let same: Vec<LinkInfo> = t
        .iter()
        .map(|r| LinkInfo {
            ifindex: r.ifindex,
            ifname: r.ifname.clone(),
            switch_id: Some(r.switch_id.clone()),
            port_name: r.port_name.clone(),
            admin_up: r.admin_up,
            oper_up: r.oper_up,
            mtu: r.mtu,
            mac: r.mac,
        })
        .collect();
    assert!(t.resync(same).is_empty());
}

fn link_message(family: AddressFamily) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header.interface_family = family;
    m.header.index = 42;
    m.header.flags = LinkFlags::Up | LinkFlags::LowerUp | LinkFlags::Running;
    let id = LinkPhysId::parse(&SWITCH[..]).expect("phys id");
    m.attributes = vec![
        LinkAttribute::IfName("enp1s0f0_2".into()),
        LinkAttribute::PhysSwitchId(id),
        LinkAttribute::PhysPortName("pf0vf2".into()),
        LinkAttribute::Mtu(9000),
        LinkAttribute::Address(vec![2, 0, 0, 0, 0, 9]),
        LinkAttribute::OperState(State::Up),
    ];
    m
}

#[test]
fn link_message_converts() {
    let info = link_info(&link_message(AddressFamily::Unspec)).expect("unspec family");
    assert_eq!(
        info,
        LinkInfo {
            ifindex: 42,
            ifname: "enp1s0f0_2".into(),
            switch_id: Some(SWITCH.to_vec()),
            port_name: Some("pf0vf2".into()),
            admin_up: true,
            oper_up: true,
            mtu: 9000,
            mac: Some([2, 0, 0, 0, 0, 9]),
        }
    );
    // AF_BRIDGE port notifications are not about the link itself.
    assert_eq!(link_info(&link_message(AddressFamily::Bridge)), None);
    let del = RouteNetlinkMessage::DelLink(link_message(AddressFamily::Unspec));
    assert!(matches!(link_msg(&del), Some(LinkMsg::Del(l)) if l.ifindex == 42));
}

#[test]
fn oper_state_unknown_falls_back_to_lower_up() {
    let mut m = link_message(AddressFamily::Unspec);
    m.attributes
        .retain(|a| !matches!(a, LinkAttribute::OperState(_)));
    m.attributes.push(LinkAttribute::OperState(State::Unknown));
    assert_eq!(link_info(&m).map(|l| l.oper_up), Some(true));
    m.header.flags = LinkFlags::Up;
    assert_eq!(link_info(&m).map(|l| l.oper_up), Some(false));
    m.attributes
        .retain(|a| !matches!(a, LinkAttribute::OperState(_)));
    m.attributes
        .push(LinkAttribute::OperState(State::LowerLayerDown));
    m.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    assert_eq!(link_info(&m).map(|l| l.oper_up), Some(false));
}

#[test]
fn a_netdev_named_without_a_vport_is_tracked_as_a_host_port() {
    // An internal (host-stack) port: tracked by name, no vport of its own
    // even when it happens to carry a port name.
    let cfg = RepresentorConfig::default()
        .with_netdev("host0", None)
        .with("vm1-rep", Vport(1));
    let mut t = Representors::new(cfg);
    let ev = t.apply(LinkMsg::New(plain(20, "host0")));
    assert_eq!(added(&ev), vec![(20, None)]);
    let ev = t.apply(LinkMsg::New(plain(21, "vm1-rep")));
    assert_eq!(added(&ev), vec![(21, Some(Vport(1)))]);
    assert!(t.apply(LinkMsg::New(plain(22, "other"))).is_empty());
    t.untrack("host0");
    t.track("host1", None);
    let ev = t.apply(LinkMsg::New(plain(23, "host1")));
    assert_eq!(added(&ev), vec![(23, None)]);
}

//! Tunnel ports (`vxlan`, `geneve`) as the pipeline sees them: their
//! options, as Open vSwitch's `Interface.options`, and the underlay the
//! switch sends their packets over.
//!
//! An output to a tunnel port becomes a [`DpAction::TunnelPush`]: the
//! outer header is built at translation from the port's options, the
//! packet's `tun_*` fields (where an option says `flow`), and the
//! [`Underlay`]'s answer for the remote endpoint (the route's uplink and
//! source address, the next hop's MAC). The megaflow depends on that
//! answer: the underlay's generation is part of the ports' generation, so
//! a route or neighbour change re-translates the flows at the next
//! revalidator pass.
//!
//! Receive (decap) is the switch's: a packet on an uplink for a local
//! endpoint and a tunnel port's UDP port enters the pipeline on that
//! tunnel port with its `tun_*` fields set (`megaflow::tunnel`).
//!
//! Thread-safety: [`TunnelPort`] is plain data; an [`Underlay`] is shared
//! by the handlers and must answer without waiting.

use std::fmt;
use std::net::IpAddr;

use megaflow::tunnel::{Kind, Outer, OuterIp};
use megaflow::PortNo;

/// An option that is fixed by the port or taken from the flow
/// (`remote_ip=flow`, `key=flow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FromFlow<T> {
    Fixed(T),
    Flow,
}

/// The outer TOS: a value, or the inner packet's (`inherit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tos {
    Fixed(u8),
    Inherit,
    Flow,
}

/// A tunnel port's options (Open vSwitch's names and defaults).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TunnelPort {
    pub kind: Kind,
    /// `remote_ip`: the far endpoint, or `flow` (`tun_dst`/`tun_ipv6_dst`).
    pub remote: FromFlow<IpAddr>,
    /// `local_ip`: the outer source; `None`: the route's preferred source.
    /// Received packets must be addressed to it when it is given.
    pub local: Option<IpAddr>,
    /// `key`: the VNI, or `flow` (`tun_id`). Default 0.
    pub key: FromFlow<u32>,
    /// `dst_port`: the outer UDP destination (4789 / 6081 by default).
    pub dst_port: u16,
    /// `tos`: default 0.
    pub tos: Tos,
    /// `ttl`: default 64.
    pub ttl: u8,
    /// `df_default`: default true.
    pub df: bool,
    /// `csum`: default false (the NIC emits a zero UDP checksum).
    pub csum: bool,
}

impl TunnelPort {
    /// A port of `kind` to `remote` with every other option at its
    /// default.
    pub fn new(kind: Kind, remote: FromFlow<IpAddr>) -> TunnelPort {
        TunnelPort {
            kind,
            remote,
            local: None,
            key: FromFlow::Fixed(0),
            dst_port: kind.default_port(),
            tos: Tos::Fixed(0),
            ttl: 64,
            df: true,
            csum: false,
        }
    }

    /// A port of `kind` from Open vSwitch's `Interface.options` (name,
    /// value): `remote_ip` (required: an address or `flow`), `local_ip`,
    /// `key` (a VNI or `flow`), `dst_port`, `tos` (a number, `inherit` or
    /// `flow`), `ttl`, `df_default`, `csum`. The error names the option
    /// and the value at fault.
    pub fn from_options<'a>(
        kind: Kind,
        options: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<TunnelPort, String> {
        let mut p = TunnelPort::new(kind, FromFlow::Flow);
        let mut remote = None;
        let bad = |name: &str, v: &str, want: &str| format!("option {name}=\"{v}\": {want}");
        let boolean = |name: &str, v: &str| match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad(name, v, "expected true or false")),
        };
        for (name, v) in options {
            match name {
                "remote_ip" => {
                    remote = Some(match v {
                        "flow" => FromFlow::Flow,
                        _ => FromFlow::Fixed(
                            v.parse()
                                .map_err(|_| bad(name, v, "expected an IP address or flow"))?,
                        ),
                    })
                }
                "local_ip" => {
                    p.local = Some(v.parse().map_err(|_| bad(name, v, "expected an IP address"))?)
                }
                "key" => {
                    p.key = match v {
                        "flow" => FromFlow::Flow,
                        _ => {
                            let n = parse_number(v)
                                .filter(|n| *n <= u64::from(megaflow::tunnel::VNI_MAX))
                                .ok_or_else(|| {
                                    bad(name, v, "expected a VNI of at most 24 bits, or flow")
                                })?;
                            FromFlow::Fixed(n as u32)
                        }
                    }
                }
                "dst_port" => {
                    p.dst_port = parse_number(v)
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|n| *n != 0)
                        .ok_or_else(|| bad(name, v, "expected a UDP port 1..65535"))?
                }
                "tos" => {
                    p.tos = match v {
                        "inherit" => Tos::Inherit,
                        "flow" => Tos::Flow,
                        _ => Tos::Fixed(
                            parse_number(v)
                                .and_then(|n| u8::try_from(n).ok())
                                .ok_or_else(|| bad(name, v, "expected 0..255, inherit or flow"))?,
                        ),
                    }
                }
                "ttl" => {
                    p.ttl = parse_number(v)
                        .and_then(|n| u8::try_from(n).ok())
                        .filter(|n| *n != 0)
                        .ok_or_else(|| bad(name, v, "expected 1..255"))?
                }
                "df_default" => p.df = boolean(name, v)?,
                "csum" => p.csum = boolean(name, v)?,
                _ => {
                    return Err(format!(
                        "option {name}: unknown (known: remote_ip, local_ip, key, dst_port, tos, ttl, df_default, csum)"
                    ))
                }
            }
        }
        p.remote = remote.ok_or("option remote_ip is required (an IP address or flow)")?;
        if let (FromFlow::Fixed(r), Some(l)) = (p.remote, p.local) {
            if r.is_ipv4() != l.is_ipv4() {
                return Err(format!("remote_ip {r} and local_ip {l} differ in family"));
            }
        }
        Ok(p)
    }

    /// Whether a packet received from `src` with VNI `vni` is this port's:
    /// a fixed remote must be the sender, a fixed key the VNI.
    pub fn accepts(&self, src: IpAddr, dst: IpAddr, vni: u32) -> bool {
        let remote = match self.remote {
            FromFlow::Fixed(r) => r == src,
            FromFlow::Flow => true,
        };
        let key = match self.key {
            FromFlow::Fixed(k) => k == vni,
            FromFlow::Flow => true,
        };
        let local = self.local.is_none_or(|l| l == dst);
        remote && key && local
    }

    /// Bytes the port adds in front of a frame (outer Ethernet, IP, UDP
    /// and tunnel header, no options), for `show`.
    pub fn overhead(&self, v6: bool) -> usize {
        let ip = if v6 { 40 } else { 20 };
        // Ethernet, IP, UDP, and the 8 bytes of VXLAN or of Geneve
        // without options.
        14 + ip + 8 + 8
    }
}

fn parse_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

impl fmt::Display for TunnelPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: remote_ip=", self.kind.name())?;
        match self.remote {
            FromFlow::Fixed(a) => write!(f, "{a}")?,
            FromFlow::Flow => f.write_str("flow")?,
        }
        if let Some(l) = self.local {
            write!(f, ", local_ip={l}")?;
        }
        match self.key {
            FromFlow::Fixed(k) => write!(f, ", key={k}")?,
            FromFlow::Flow => f.write_str(", key=flow")?,
        }
        write!(f, ", dst_port={}", self.dst_port)?;
        match self.tos {
            Tos::Fixed(0) => {}
            Tos::Fixed(t) => write!(f, ", tos={t}")?,
            Tos::Inherit => f.write_str(", tos=inherit")?,
            Tos::Flow => f.write_str(", tos=flow")?,
        }
        if self.ttl != 64 {
            write!(f, ", ttl={}", self.ttl)?;
        }
        if !self.df {
            f.write_str(", df_default=false")?;
        }
        if self.csum {
            f.write_str(", csum=true")?;
        }
        Ok(())
    }
}

/// Where the underlay sends a packet for a remote endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// The switch port the route leaves by (an uplink).
    pub port: PortNo,
    /// The outer source address (the route's preferred source).
    pub src: IpAddr,
    pub eth_src: [u8; 6],
    /// The next hop's MAC (the gateway's, or the endpoint's on link).
    pub eth_dst: [u8; 6],
    /// The uplink's MTU: the outer IP packet must fit.
    pub mtu: u16,
}

/// Why there is no next hop for an endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Unreachable {
    #[error("no route to {0}")]
    NoRoute(IpAddr),
    #[error("the route to {dst} leaves by {dev}, which is not an uplink of the switch")]
    NotOnSwitch { dst: IpAddr, dev: String },
    #[error("neighbour {0} unresolved (resolution requested)")]
    Unresolved(IpAddr),
    #[error("neighbour {0} failed to resolve")]
    Failed(IpAddr),
    #[error("no underlay: the switch has no host routes (a tunnel needs a live daemon or static routes)")]
    NoUnderlay,
}

/// The host's routes, addresses and neighbours, as the handlers consult
/// them: answers from what is known now, never waiting (an unresolved
/// neighbour is asked for and reported [`Unreachable::Unresolved`]).
pub trait Underlay: Send + Sync + fmt::Debug {
    /// Bumped by every change that can change an answer.
    fn generation(&self) -> u64;
    /// The next hop toward `dst`, from `src` if given.
    fn next_hop(&self, dst: IpAddr, src: Option<IpAddr>) -> Result<NextHop, Unreachable>;
    /// Whether `addr` is one of the host's own (a local tunnel endpoint).
    fn is_local(&self, addr: IpAddr) -> bool;
}

/// Whether `addr` is a local tunnel endpoint of a switch with these
/// tunnel ports: a port's `local_ip`, or one of the host's addresses as
/// the underlay knows them. With no underlay (replay) and no `local_ip`
/// given, every address is. The one rule receive (decap) and translation
/// (what tells an uplink packet from a tunnel's) both follow.
pub fn is_local_endpoint<'a>(
    mut tunnels: impl Iterator<Item = &'a TunnelPort> + Clone,
    underlay: Option<&dyn Underlay>,
    addr: IpAddr,
) -> bool {
    if tunnels.clone().any(|t| t.local == Some(addr)) {
        return true;
    }
    match underlay {
        Some(u) => u.is_local(addr),
        None => tunnels.all(|t| t.local.is_none()),
    }
}

/// The outer header for an inner packet through `port` to `dst` with VNI
/// `vni`, TOS `tos`, over `hop`.
pub fn outer(port: &TunnelPort, dst: IpAddr, vni: u32, tos: u8, hop: &NextHop) -> Option<Outer> {
    let ip = match (hop.src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => OuterIp::V4 {
            src: s.octets(),
            dst: d.octets(),
        },
        (IpAddr::V6(s), IpAddr::V6(d)) => OuterIp::V6 {
            src: s.octets(),
            dst: d.octets(),
        },
        _ => return None,
    };
    Some(Outer {
        kind: port.kind,
        eth_src: hop.eth_src,
        eth_dst: hop.eth_dst,
        ip,
        tos,
        ttl: port.ttl,
        df: port.df,
        udp_dst: port.dst_port,
        csum: port.csum,
        vni,
        opts: Vec::new(),
    })
}

/// A fixed underlay (replay, tests, a host without rtnetlink): routes
/// given as data.
#[derive(Clone, Debug, Default)]
pub struct StaticUnderlay {
    /// Local addresses.
    pub local: Vec<IpAddr>,
    /// `(endpoint, next hop)`: exact endpoints only.
    pub hops: Vec<(IpAddr, NextHop)>,
}

impl Underlay for StaticUnderlay {
    fn generation(&self) -> u64 {
        0
    }

    fn next_hop(&self, dst: IpAddr, src: Option<IpAddr>) -> Result<NextHop, Unreachable> {
        let (_, hop) = self
            .hops
            .iter()
            .find(|(d, _)| *d == dst)
            .ok_or(Unreachable::NoRoute(dst))?;
        let mut hop = *hop;
        if let Some(s) = src {
            hop.src = s;
        }
        Ok(hop)
    }

    fn is_local(&self, addr: IpAddr) -> bool {
        self.local.contains(&addr)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use megaflow::tunnel::Kind;
    use megaflow::{DpAction, Field, FlowKey, PortNo, Timestamp};

    use super::*;
    use crate::rule::FlowModCommand;
    use crate::text::parse_flow;
    use crate::{Bridge, PortInfo};

    const UPLINK: PortNo = PortNo(100);
    const TUN: PortNo = PortNo(200);

    fn hop() -> NextHop {
        NextHop {
            port: UPLINK,
            src: "198.19.0.1".parse().unwrap(),
            eth_src: [2, 0, 0, 0, 0, 1],
            eth_dst: [2, 0, 0, 0, 0, 2],
            mtu: 1500,
        }
    }

    fn bridge(port: TunnelPort, flows: &[&str], underlay: Option<StaticUnderlay>) -> Bridge {
        let mut b = Bridge::with_ports([1, 100]);
        let mut info = PortInfo::new(TUN, "tun0");
        info.tunnel = Some(Arc::new(port));
        b.add_port(info);
        if let Some(u) = underlay {
            b.set_underlay(Arc::new(u));
        }
        for f in flows {
            let fm = parse_flow(f, FlowModCommand::Add).expect("flow");
            b.apply_flow_mod(&fm, Timestamp(0)).expect("flow mod");
        }
        b
    }

    fn underlay() -> StaticUnderlay {
        StaticUnderlay {
            local: vec!["198.19.0.1".parse().unwrap()],
            hops: vec![("198.19.0.2".parse().unwrap(), hop())],
        }
    }

    fn key_from(port: u32) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set_in_port(u64::from(port));
        k.set_eth_type(0x0800);
        k
    }

    #[test]
    fn options_parse_as_open_vswitch_names_them_and_errors_name_the_option() {
        let p = TunnelPort::from_options(
            Kind::Geneve,
            [
                ("remote_ip", "flow"),
                ("key", "0x10"),
                ("tos", "inherit"),
                ("csum", "true"),
            ],
        )
        .expect("options");
        assert_eq!(p.remote, FromFlow::Flow);
        assert_eq!(p.key, FromFlow::Fixed(16));
        assert_eq!(p.dst_port, 6081);
        assert_eq!((p.tos, p.ttl, p.df, p.csum), (Tos::Inherit, 64, true, true));
        for (opts, want) in [
            (vec![], "remote_ip is required"),
            (
                vec![("remote_ip", "10.0.0.300")],
                "option remote_ip=\"10.0.0.300\"",
            ),
            (
                vec![("remote_ip", "flow"), ("key", "16777216")],
                "at most 24 bits",
            ),
            (vec![("remote_ip", "flow"), ("ttl", "0")], "expected 1..255"),
            (
                vec![("remote_ip", "flow"), ("colour", "red")],
                "option colour: unknown",
            ),
            (
                vec![("remote_ip", "10.0.0.1"), ("local_ip", "2001:db8::1")],
                "differ in family",
            ),
        ] {
            let e = TunnelPort::from_options(Kind::Vxlan, opts).expect_err(want);
            assert!(e.contains(want), "{e} (wanted {want})");
        }
    }

    #[test]
    fn an_output_to_a_tunnel_port_pushes_the_header_the_underlay_says() {
        let mut port = TunnelPort::new(Kind::Vxlan, FromFlow::Fixed("198.19.0.2".parse().unwrap()));
        port.key = FromFlow::Flow;
        let b = bridge(
            port,
            &["in_port=1,actions=set_field:0x1092->tun_id,output:200"],
            Some(underlay()),
        );
        let t = b.translate(&key_from(1), Timestamp(0));
        let [DpAction::TunnelPush { header, port, mtu }] = t.actions.as_slice() else {
            panic!("{:?}", t.actions);
        };
        assert_eq!((*port, *mtu), (UPLINK, 1500));
        assert_eq!(header.outer().vni, 0x1092);
        assert_eq!(header.outer().eth_dst, [2, 0, 0, 0, 0, 2]);
        assert_eq!(header.outer().udp_dst, 4789);
        // The VNI was written, not read: tun_id stays wildcarded.
        assert_eq!(t.mask.field(Field::TunId), 0);
    }

    #[test]
    fn remote_ip_flow_reads_tun_dst_and_an_unreachable_endpoint_sends_nothing() {
        let port = TunnelPort::new(Kind::Geneve, FromFlow::Flow);
        let flows = ["in_port=1,actions=output:200"];
        let b = bridge(port.clone(), &flows, Some(underlay()));
        let mut k = key_from(1);
        k.set_tun_dst(u64::from(u32::from_be_bytes([198, 19, 0, 2])));
        let t = b.translate(&k, Timestamp(0));
        assert!(
            matches!(t.actions.as_slice(), [DpAction::TunnelPush { .. }]),
            "{:?}",
            t.actions
        );
        assert_eq!(
            t.mask.field(Field::TunDst),
            u128::from(u32::MAX),
            "read, so matched"
        );
        // No route, or no underlay at all: nothing sent.
        k.set_tun_dst(u64::from(u32::from_be_bytes([198, 19, 0, 9])));
        assert!(b.translate(&k, Timestamp(0)).actions.is_empty());
        let none = bridge(port, &flows, None);
        assert!(none.translate(&k, Timestamp(0)).actions.is_empty());
    }

    #[test]
    fn a_packet_from_a_tunnel_matches_what_chose_its_port() {
        let mut port = TunnelPort::new(Kind::Vxlan, FromFlow::Flow);
        port.key = FromFlow::Fixed(7);
        // The table reads nothing of the tunnel.
        let b = bridge(port, &["actions=output:1"], Some(underlay()));
        let mut k = key_from(TUN.0);
        k.set_tun_dst(u64::from(u32::from_be_bytes([198, 19, 0, 1])));
        k.set_tun_src(u64::from(u32::from_be_bytes([198, 19, 0, 2])));
        k.set_tun_id(7);
        k.set_tun_tp_dst(4789);
        let t = b.translate(&k, Timestamp(0));
        for f in [
            Field::InPort,
            Field::TunSrc,
            Field::TunDst,
            Field::TunTpDst,
            Field::TunId,
        ] {
            assert!(t.mask.is_exact(f), "{f} not matched: {:?}", t.mask);
        }
        assert_eq!(
            t.mask.field(Field::TunTpSrc),
            0,
            "the source port is entropy"
        );
        // Not from a tunnel: none of it.
        let t = b.translate(&key_from(100), Timestamp(0));
        assert_eq!(t.mask.field(Field::TunDst), 0);
        assert_eq!(t.mask.field(Field::TunId), 0);
    }

    #[test]
    fn an_uplink_packet_matches_what_tells_it_from_a_tunnel_packet() {
        let port = TunnelPort::new(Kind::Vxlan, FromFlow::Flow);
        let mut b = bridge(port, &["actions=output:1"], Some(underlay()));
        let mut uplink = PortInfo::new(UPLINK, "wire0");
        uplink.decap = true;
        b.add_port(uplink);
        let udp = |dst: [u8; 4], tp_dst: u16| {
            let mut k = key_from(UPLINK.0);
            k.set_field(Field::Ipv4Dst, u128::from(u32::from_be_bytes(dst)));
            k.set_field(Field::IpProto, 17);
            k.set_field(Field::TpDst, u128::from(tp_dst));
            k
        };
        // For another host: the address tells it apart.
        let t = b.translate(&udp([198, 19, 0, 9], 4789), Timestamp(0));
        assert!(t.mask.is_exact(Field::EthType) && t.mask.is_exact(Field::Ipv4Dst));
        assert_eq!(t.mask.field(Field::TpDst), 0, "{:?}", t.mask);
        assert!(t.uses_underlay, "the host's addresses were read");
        // For this host: the protocol and the UDP port too.
        let t = b.translate(&udp([198, 19, 0, 1], 53), Timestamp(0));
        assert!(t.mask.is_exact(Field::IpProto) && t.mask.is_exact(Field::TpDst));
        // Not IP: the ethertype alone.
        let mut arp = key_from(UPLINK.0);
        arp.set_eth_type(0x0806);
        let t = b.translate(&arp, Timestamp(0));
        assert!(t.mask.is_exact(Field::EthType));
        assert_eq!(t.mask.field(Field::Ipv4Dst), 0);
        // A port that decapsulates nothing (a VF): none of it.
        let t = b.translate(&udp([198, 19, 0, 1], 53), Timestamp(0));
        let t1 = b.translate(
            &{
                let mut k = udp([198, 19, 0, 1], 53);
                k.set_in_port(1);
                k
            },
            Timestamp(0),
        );
        assert!(t.mask.is_exact(Field::TpDst));
        assert_eq!(t1.mask.field(Field::TpDst), 0);
        assert_eq!(t1.mask.field(Field::Ipv4Dst), 0);
    }

    #[test]
    fn an_underlay_change_makes_only_the_tunnel_flows_stale() {
        let port = TunnelPort::new(Kind::Vxlan, FromFlow::Fixed("198.19.0.2".parse().unwrap()));
        let b = bridge(
            port,
            &[
                "in_port=1,actions=output:200",
                "in_port=100,actions=output:1",
            ],
            Some(underlay()),
        );
        let tunnel = b.translate(&key_from(1), Timestamp(0));
        let plain = b.translate(&key_from(100), Timestamp(0));
        assert!(tunnel.uses().underlay && !plain.uses().underlay);
        let mut later = b.generations();
        later.underlay += 1;
        assert!(tunnel.generations.stale(tunnel.uses(), &later));
        assert!(!plain.generations.stale(plain.uses(), &later));
        later.ports += 1;
        assert!(
            plain.generations.stale(plain.uses(), &later),
            "a port change, all"
        );
    }

    #[test]
    fn a_tunnel_port_accepts_its_remote_and_key_only() {
        let mut p = TunnelPort::new(Kind::Vxlan, FromFlow::Fixed("198.19.0.2".parse().unwrap()));
        p.key = FromFlow::Fixed(7);
        let (r, l): (IpAddr, IpAddr) =
            ("198.19.0.2".parse().unwrap(), "198.19.0.1".parse().unwrap());
        assert!(p.accepts(r, l, 7));
        assert!(!p.accepts(r, l, 8), "another VNI");
        assert!(!p.accepts(l, l, 7), "another sender");
        p.local = Some("198.19.0.9".parse().unwrap());
        assert!(!p.accepts(r, l, 7), "another local endpoint");
    }
}

//! The demo's stateful tenant: a web server behind a security group, and
//! the SNAT gateway its own connections to the outside leave through, as
//! a cloud's SR-IOV host carries a tenant with security groups and a
//! router.
//!
//! ## The setting (for a workload of `vms` VMs)
//!
//! After the overlay tenant's ports (`vms + 1 ..= vms + 4`):
//! - port `vms + 5`: `web`, the server, 198.18.101.1;
//! - port `vms + 6`: `cli1`, a client in the allowed subnet
//!   (198.18.101.0/24), 198.18.101.2;
//! - port `vms + 7`: `cli2`, a client outside it, 198.18.102.2;
//! - port `vms + 8`: `ext`, the way out, where the outside host
//!   198.19.200.1 answers; `web`'s connections to it are translated to
//!   the gateway address [`GATEWAY`].
//!
//! All four are representors (VFs `vms + 2 ..= vms + 5`). MACs are
//! `02:00:00:00:65:0i` for the i-th ([`mac`]).
//!
//! ## The table ([`flow_table`])
//!
//! Every IPv4 packet of the tenant's ports is tracked in zone [`ZONE`]
//! (`ct(table=20,zone=10,nat)`); then, in table 20, the security group:
//! established and related packets pass to where they go; new TCP to port
//! 80 or 22 of `web` from 198.18.101.0/24 is committed and passes; `web`'s
//! new TCP to the outside host is committed with SNAT to [`GATEWAY`] and
//! leaves on `ext`; anything else tracked is dropped.
//!
//! ## The traffic
//!
//! [`FLOWS`] TCP connections, their packets spread evenly over the capture
//! in turns, so none goes idle: `cli1` to `web` port 80 (a request, then
//! the page in 1 448-byte segments, an ACK every second) and port 22
//! (small segments both ways), `web` to the outside host's port 443 (a
//! download, through the gateway), and two that the group refuses: `cli2`
//! to port 80 and `cli1` to port 8080, whose SYNs are sent again and
//! again. Once a connection is established its packets are what hardware
//! may carry: [`StatefulGenerator::established`] counts them, and
//! `ct.demo_est_hw_pct` is the share of them the sim's FDB forwarded
//! (first stage, conntrack entry with the NAT rewrite, later stage).

use megaflow::{PortNo, Timestamp};
use offload::Vport;

use super::frame::{self, Addrs, Tcp, ACK, PSH, SYN};
use super::plan::{duration_ns, mix, Timing};
use super::{DemoSpec, EPOCH};
use crate::config::PortSpec;
use crate::switch::PortKind;

/// The security group's conntrack zone.
pub const ZONE: u16 = 10;
/// The address `web`'s connections to the outside are translated to.
pub const GATEWAY: [u8; 4] = [198, 19, 100, 1];
/// The outside host.
pub const OUTSIDE: [u8; 4] = [198, 19, 200, 1];
/// TCP connections of the tenant.
pub const FLOWS: u32 = 12;
/// The table of the security group.
const TABLE: u8 = 20;

/// The tenant's ports in a workload of `vms` VMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub web: PortNo,
    pub cli1: PortNo,
    pub cli2: PortNo,
    pub ext: PortNo,
}

impl Ports {
    pub fn of(vms: u32) -> Ports {
        Ports {
            web: PortNo(vms + 5),
            cli1: PortNo(vms + 6),
            cli2: PortNo(vms + 7),
            ext: PortNo(vms + 8),
        }
    }

    /// In port order, with their names.
    pub fn named(&self) -> [(&'static str, PortNo); 4] {
        [
            ("web", self.web),
            ("cli1", self.cli1),
            ("cli2", self.cli2),
            ("ext", self.ext),
        ]
    }
}

/// The i-th host's MAC (1: web, 2: cli1, 3: cli2, 4: the outside host).
pub fn mac(i: u32) -> u64 {
    0x0200_0000_6500 | u64::from(i & 0xff)
}

const WEB: u32 = 0xc612_6501;
const CLI1: u32 = 0xc612_6502;
const CLI2: u32 = 0xc612_6602;

fn ip4(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
}

fn dotted(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// The tenant's ports, after the overlay tenant's.
pub fn port_specs(vms: u32) -> Vec<PortSpec> {
    Ports::of(vms)
        .named()
        .iter()
        .enumerate()
        .map(|(i, (name, no))| PortSpec {
            name: (*name).into(),
            no: *no,
            kind: PortKind::Representor,
            vport: u16::try_from(vms + 2 + i as u32).ok().and_then(Vport::vf),
            tunnel: None,
            bridge: ofproto::BridgeNo::MAIN,
            peer: None,
        })
        .collect()
}

/// The `[[port]]` sections of the tenant's ports for an `eswitch.toml`.
pub fn config_ports(vms: u32) -> String {
    let mut t = String::new();
    for (i, (name, no)) in Ports::of(vms).named().iter().enumerate() {
        t.push_str(&format!(
            "\n[[port]]\nname = \"{name}\"\nofport = {}\nvport = \"pf0vf{}\"\n",
            no.0,
            vms + 2 + i as u32
        ));
    }
    t
}

/// The tenant's flows, in `ovs-ofctl add-flows` syntax.
pub fn flow_table(vms: u32) -> String {
    let p = Ports::of(vms);
    let (web, cli1, cli2) = (dotted(WEB), dotted(CLI1), dotted(CLI2));
    let (gw, out) = (dotted(ip4(GATEWAY)), dotted(ip4(OUTSIDE)));
    let mut t = format!(
        "# Stateful tenant: web ({web}) on port {} behind a security group (zone {ZONE}, table {TABLE}), SNAT to {gw} for its connections out of port {}.\n",
        p.web, p.ext
    );
    for (_, port) in p.named() {
        t.push_str(&format!(
            "priority=260,ip,in_port={port},actions=ct(table={TABLE},zone={ZONE},nat)\n"
        ));
    }
    let pass = |t: &mut String, state: &str, from: PortNo, cond: &str, to: PortNo| {
        t.push_str(&format!(
            "table={TABLE},priority=200,ct_state={state},ip,in_port={from}{cond},actions=output:{to}\n"
        ));
    };
    for state in ["+trk+est", "+trk+rel"] {
        pass(&mut t, state, p.web, &format!(",nw_dst={cli1}"), p.cli1);
        pass(&mut t, state, p.web, &format!(",nw_dst={cli2}"), p.cli2);
        pass(&mut t, state, p.web, &format!(",nw_dst={out}"), p.ext);
        pass(&mut t, state, p.cli1, &format!(",nw_dst={web}"), p.web);
        pass(&mut t, state, p.cli2, &format!(",nw_dst={web}"), p.web);
        pass(&mut t, state, p.ext, &format!(",nw_dst={web}"), p.web);
    }
    for (cli, port) in [(p.cli1, 80), (p.cli1, 22), (p.cli2, 80), (p.cli2, 22)] {
        t.push_str(&format!(
            "table={TABLE},priority=100,ct_state=+trk+new,tcp,in_port={cli},nw_src=198.18.101.0/24,nw_dst={web},tp_dst={port},actions=ct(commit,zone={ZONE}),output:{}\n",
            p.web
        ));
    }
    t.push_str(&format!(
        "table={TABLE},priority=100,ct_state=+trk+new,tcp,in_port={},nw_dst={out},actions=ct(commit,zone={ZONE},nat(src={gw})),output:{}\n",
        p.web, p.ext
    ));
    t.push_str(&format!(
        "table={TABLE},priority=1,ct_state=+trk,ip,actions=drop\n"
    ));
    t
}

/// The tenant's share of a workload's packets: a tenth (none below 1 000
/// packets).
pub fn packets_of(spec: &DemoSpec) -> u64 {
    if spec.packets >= 1000 {
        spec.packets / 10
    } else {
        0
    }
}

/// What a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A page from `web` port 80 to `cli1`.
    Page,
    /// An SSH session from `cli1` to `web` port 22.
    Ssh,
    /// `web` downloads from the outside host's port 443, through the
    /// gateway.
    Out,
    /// A connection the group refuses: its SYN, again and again.
    Refused { from_cli2: bool },
}

/// One tenant connection.
#[derive(Clone, Debug)]
struct Conn {
    kind: Kind,
    sport: u16,
    seq_client: u32,
    seq_server: u32,
    /// Packets sent so far.
    k: u32,
}

/// The tenant's packets, in time order.
pub struct StatefulGenerator {
    n: u64,
    k: u64,
    timing: Timing,
    ports: Ports,
    conns: Vec<Conn>,
    established: u64,
}

impl StatefulGenerator {
    /// `n` packets of the tenant over the duration of `spec` (normalised).
    pub fn new(spec: &DemoSpec, n: u64) -> StatefulGenerator {
        let spec = spec.normalized();
        let salt = mix(spec.seed ^ 0x57a7_ef01);
        let conns = (0..FLOWS)
            .map(|i| {
                let h = mix(salt ^ u64::from(i));
                let kind = match i {
                    0..=5 => Kind::Page,
                    6 | 7 => Kind::Ssh,
                    8 | 9 => Kind::Out,
                    _ => Kind::Refused { from_cli2: i == 10 },
                };
                Conn {
                    kind,
                    sport: 32_768 + (h % 28_000) as u16,
                    seq_client: (h >> 32) as u32,
                    seq_server: h as u32,
                    k: 0,
                }
            })
            .collect();
        StatefulGenerator {
            n,
            k: 0,
            timing: Timing::new(duration_ns(spec.seconds)),
            ports: Ports::of(spec.vms),
            conns,
            established: 0,
        }
    }

    /// Packets not generated yet.
    pub fn remaining(&self) -> u64 {
        self.n - self.k
    }

    /// Packets generated so far of established connections, after their
    /// handshake: those hardware may carry.
    pub fn established(&self) -> u64 {
        self.established
    }

    /// Writes the next packet's frame into `buf` and returns its time and
    /// in_port; `None` after the last.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Option<(Timestamp, PortNo)> {
        let (at, conn) = self.timing.turn(&mut self.k, self.n, FLOWS)?;
        let c = &mut self.conns[conn];
        let i = c.k;
        c.k += 1;
        let p = self.ports;
        // (client, server) as (port, mac, ip), the server's port, and the
        // server's address as the client sees it (the gateway translates
        // the client's, not the server's).
        let (client, server, dport) = match c.kind {
            Kind::Page => ((p.cli1, mac(2), CLI1), (p.web, mac(1), WEB), 80),
            Kind::Ssh => ((p.cli1, mac(2), CLI1), (p.web, mac(1), WEB), 22),
            Kind::Out => ((p.web, mac(1), WEB), (p.ext, mac(4), ip4(OUTSIDE)), 443),
            Kind::Refused { from_cli2: true } => ((p.cli2, mac(3), CLI2), (p.web, mac(1), WEB), 80),
            Kind::Refused { from_cli2: false } => {
                ((p.cli1, mac(2), CLI1), (p.web, mac(1), WEB), 8080)
            }
        };
        // (from the client, flags, payload)
        let (from_client, flags, payload) = match (c.kind, i) {
            (Kind::Refused { .. }, _) => (true, SYN, 0),
            (_, 0) => (true, SYN, 0),
            (_, 1) => (false, SYN | ACK, 0),
            (_, 2) => (true, ACK, 0),
            (Kind::Ssh, _) => (i % 2 == 1, PSH | ACK, 64 + (i % 5) as usize * 40),
            (_, 3) => (true, PSH | ACK, 320),
            (_, _) => match (i - 4) % 3 {
                0 => (false, ACK, 1448),
                1 => (false, PSH | ACK, 1448),
                _ => (true, ACK, 0),
            },
        };
        if i >= 3 && !matches!(c.kind, Kind::Refused { .. }) {
            self.established += 1;
        }
        // The outside host answers the gateway.
        let client_ip_seen = if c.kind == Kind::Out {
            ip4(GATEWAY)
        } else {
            client.2
        };
        let (a, in_port, sport, dport_) = if from_client {
            (
                Addrs {
                    src_mac: client.1,
                    dst_mac: server.1,
                    src_ip: client.2,
                    dst_ip: server.2,
                },
                client.0,
                c.sport,
                dport,
            )
        } else {
            (
                Addrs {
                    src_mac: server.1,
                    dst_mac: client.1,
                    src_ip: server.2,
                    dst_ip: client_ip_seen,
                },
                server.0,
                dport,
                c.sport,
            )
        };
        let (seq, ack) = if from_client {
            (&mut c.seq_client, c.seq_server)
        } else {
            (&mut c.seq_server, c.seq_client)
        };
        let hdr = Tcp {
            sport,
            dport: dport_,
            seq: *seq,
            ack: if flags & ACK != 0 { ack } else { 0 },
            flags,
            window: 64_240,
            options: &[],
        };
        // A refused SYN is sent again with the same sequence number.
        if !matches!(c.kind, Kind::Refused { .. }) {
            *seq = seq
                .wrapping_add(payload as u32)
                .wrapping_add(u32::from(flags & SYN != 0));
        }
        frame::tcp(buf, &a, &hdr, payload);
        Some((Timestamp(EPOCH.0 + at), in_port))
    }
}

/// The established packets among a workload's tenant packets (what
/// `ct.demo_est_hw_pct` divides by): the generator run dry.
pub fn established_of(spec: &DemoSpec) -> u64 {
    let spec = spec.normalized();
    let mut g = StatefulGenerator::new(&spec, packets_of(&spec));
    let mut buf = Vec::with_capacity(1600);
    while g.next_into(&mut buf).is_some() {}
    g.established()
}

//! The demo's overlay tenant: two VMs on a Geneve network, VNI
//! [`VNI`], talking TCP with a VM behind a remote host reached over the
//! uplink, as a cloud's SR-IOV host carries a tenant network.
//!
//! ## The setting (for a workload of `vms` VMs)
//!
//! - ports `vms + 1` and `vms + 2`: the tenant's VMs `ovl1`, `ovl2`
//!   (representors of VFs `vms` and `vms + 1`), MAC `02:00:00:00:64:0i`,
//!   IPv4 `198.18.100.i` ([`tenant_mac`], [`tenant_ip`]);
//! - port `vms + 3`: the uplink `wire0`;
//! - port `vms + 4`: the Geneve port `gnv0` (`remote_ip` =
//!   [`REMOTE_ENDPOINT`], `local_ip` = [`LOCAL_ENDPOINT`], `key` = VNI);
//! - the remote VM is tenant VM 3 (198.18.100.3), behind the remote host;
//!   the underlay reaches the remote endpoint through the uplink
//!   ([`underlay`]).
//!
//! ## The traffic
//!
//! [`FLOWS`] long-lived TCP connections, each between one local VM
//! (alternately `ovl1` and `ovl2`) and the remote VM: a handshake, then
//! bulk data one way (two 1 448-byte segments, then an ACK the other way),
//! half of them uploads from the local VM. Their packets are spread evenly
//! over the capture, taking turns, so none goes idle. What the local VMs
//! send enters on their ports; what the remote VM sends arrives on the
//! uplink inside Geneve (outer UDP source port from the inner flow, as
//! Linux and the NIC choose it), for the switch to decapsulate.
//!
//! The table ([`flow_table`]) sends each local VM's packets for the remote
//! VM to the tunnel port, and the tunnel's packets with the tenant's VNI to
//! the local VM they are for; once hot, both directions run in the FDB
//! (encap and decap reformats), so the tenant measures the offloaded share
//! of an overlay (`tunnel.demo_hw_pct`).

use std::net::IpAddr;
use std::sync::Arc;

use megaflow::tunnel::{Encap, Kind, Outer, OuterIp};
use megaflow::{PortNo, Timestamp};
use offload::Vport;
use ofproto::tunnel::{FromFlow, NextHop, StaticUnderlay, TunnelPort};

use super::frame::{self, Addrs, Tcp, ACK, PSH, SYN};
use super::plan::{duration_ns, mix, Timing};
use super::{DemoSpec, EPOCH};
use crate::config::PortSpec;
use crate::switch::PortKind;

/// The tenant network's VNI.
pub const VNI: u32 = 5000;
/// This host's tunnel endpoint, and the remote host's.
pub const LOCAL_ENDPOINT: [u8; 4] = [198, 19, 0, 1];
pub const REMOTE_ENDPOINT: [u8; 4] = [198, 19, 0, 2];
/// The uplink's MAC, and the remote host's.
const LOCAL_HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0xfe, 1];
const REMOTE_HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0xfe, 2];
/// The remote VM (tenant VM 3).
const REMOTE_VM: u32 = 3;
/// TCP connections of the tenant.
pub const FLOWS: u32 = 8;

/// Tenant VM `i`'s IPv4 address: 198.18.100.i.
pub fn tenant_ip(i: u32) -> u32 {
    0xc612_6400 | (i & 0xff)
}

/// Tenant VM `i`'s MAC: 02:00:00:00:64:0i.
pub fn tenant_mac(i: u32) -> u64 {
    0x0200_0000_6400 | u64::from(i & 0xff)
}

/// The tenant's ports in a workload of `vms` VMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// `ovl1`, `ovl2`.
    pub vms: [PortNo; 2],
    pub uplink: PortNo,
    pub tunnel: PortNo,
}

impl Ports {
    pub fn of(vms: u32) -> Ports {
        Ports {
            vms: [PortNo(vms + 1), PortNo(vms + 2)],
            uplink: PortNo(vms + 3),
            tunnel: PortNo(vms + 4),
        }
    }

    /// The ports the tenant's packets come in by: its VMs' and the
    /// uplink.
    pub fn ins(&self) -> [PortNo; 3] {
        [self.vms[0], self.vms[1], self.uplink]
    }
}

/// The Geneve port's options.
fn tunnel_port() -> TunnelPort {
    let mut t = TunnelPort::new(Kind::Geneve, FromFlow::Fixed(IpAddr::from(REMOTE_ENDPOINT)));
    t.local = Some(IpAddr::from(LOCAL_ENDPOINT));
    t.key = FromFlow::Fixed(VNI);
    t
}

/// The tenant's ports, after the `vms` VMs' (see the module
/// documentation).
pub fn port_specs(vms: u32) -> Vec<PortSpec> {
    let p = Ports::of(vms);
    let spec = |name: &str, no, kind, vport| PortSpec {
        name: name.into(),
        no,
        kind,
        vport,
        tunnel: None,
        bridge: ofproto::BridgeNo::MAIN,
        peer: None,
    };
    let vf = |i: u32| u16::try_from(i).ok().and_then(Vport::vf);
    vec![
        spec("ovl1", p.vms[0], PortKind::Representor, vf(vms)),
        spec("ovl2", p.vms[1], PortKind::Representor, vf(vms + 1)),
        spec("wire0", p.uplink, PortKind::Uplink, Some(Vport::UPLINK)),
        PortSpec {
            tunnel: Some(Arc::new(tunnel_port())),
            ..spec("gnv0", p.tunnel, PortKind::Geneve, None)
        },
    ]
}

/// The underlay of the demo host: its endpoint, and the remote endpoint
/// through the uplink.
pub fn underlay(vms: u32) -> StaticUnderlay {
    StaticUnderlay {
        local: vec![IpAddr::from(LOCAL_ENDPOINT)],
        hops: vec![(
            IpAddr::from(REMOTE_ENDPOINT),
            NextHop {
                port: Ports::of(vms).uplink,
                src: IpAddr::from(LOCAL_ENDPOINT),
                eth_src: LOCAL_HOST_MAC,
                eth_dst: REMOTE_HOST_MAC,
                mtu: 9000,
            },
        )],
    }
}

/// The `eswitch.toml` that replays a capture of the workload with its
/// tenant (`eswitchd generate --config-file`): every port in interface
/// order (the VMs, `ovl1`, `ovl2`, `wire0`), then the Geneve port, the
/// underlay of [`underlay`], and `flows` naming the flow file if given.
pub fn config_toml(vms: u32, flows: Option<&str>) -> String {
    let p = Ports::of(vms);
    let mut t = String::from(
        "# The demo workload with its overlay tenant (eswitchd generate --config-file).\n",
    );
    if let Some(f) = flows {
        t.push_str(&format!("flows = {f:?}\n"));
    }
    let port = |t: &mut String, name: &str, no: PortNo, extra: &str| {
        t.push_str(&format!(
            "\n[[port]]\nname = \"{name}\"\nofport = {}\n{extra}",
            no.0
        ));
    };
    for i in 1..=vms {
        port(
            &mut t,
            &format!("vm{i}"),
            PortNo(i),
            &format!("vport = \"pf0vf{}\"\n", i - 1),
        );
    }
    for (i, vm) in p.vms.iter().enumerate() {
        let vf = vms + i as u32;
        port(
            &mut t,
            &format!("ovl{}", i + 1),
            *vm,
            &format!("vport = \"pf0vf{vf}\"\n"),
        );
    }
    port(
        &mut t,
        "wire0",
        p.uplink,
        "type = \"uplink\"\nvport = \"uplink\"\n",
    );
    let ip = |a: [u8; 4]| IpAddr::from(a).to_string();
    port(
        &mut t,
        "gnv0",
        p.tunnel,
        &format!(
            "type = \"geneve\"\noptions = {{ remote_ip = \"{}\", local_ip = \"{}\", key = {VNI} }}\n",
            ip(REMOTE_ENDPOINT),
            ip(LOCAL_ENDPOINT)
        ),
    );
    t.push_str(&super::stateful::config_ports(vms));
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    t.push_str(&format!(
        "\n[underlay]\nlocal = [\"{}\"]\n\n[[underlay.next_hop]]\nremote = \"{}\"\nport = \"wire0\"\nmac = \"{}\"\nsrc = \"{}\"\nsrc_mac = \"{}\"\nmtu = 9000\n",
        ip(LOCAL_ENDPOINT),
        ip(REMOTE_ENDPOINT),
        mac(REMOTE_HOST_MAC),
        ip(LOCAL_ENDPOINT),
        mac(LOCAL_HOST_MAC)
    ));
    t
}

/// The tenant's flows, in `ovs-ofctl add-flows` syntax: each local VM's
/// IPv4 for the remote VM to the tunnel; the tunnel's IPv4 with the VNI to
/// the local VM it is for.
pub fn flow_table(vms: u32) -> String {
    let p = Ports::of(vms);
    let ip = |i: u32| {
        let [a, b, c, d] = tenant_ip(i).to_be_bytes();
        format!("{a}.{b}.{c}.{d}")
    };
    let mut t = format!(
        "# Overlay tenant: VMs on ports {} and {}, Geneve VNI {VNI} to the remote host on port {}.\n",
        p.vms[0], p.vms[1], p.tunnel
    );
    for (i, vm) in p.vms.iter().enumerate() {
        t.push_str(&format!(
            "priority=250,ip,in_port={vm},nw_dst={},actions=output:{}\n",
            ip(REMOTE_VM),
            p.tunnel
        ));
        t.push_str(&format!(
            "priority=250,ip,in_port={},tun_id={VNI},nw_dst={},actions=output:{vm}\n",
            p.tunnel,
            ip(i as u32 + 1)
        ));
    }
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

/// One tenant connection.
#[derive(Clone, Debug)]
struct Conn {
    /// The local VM (1 or 2).
    local: u32,
    sport: u16,
    dport: u16,
    /// The local VM sends the data.
    upload: bool,
    seq_local: u32,
    seq_remote: u32,
    /// Packets sent so far.
    k: u32,
}

/// The tenant's packets, in time order.
pub struct OverlayGenerator {
    n: u64,
    k: u64,
    timing: Timing,
    ports: Ports,
    conns: Vec<Conn>,
    encap: Encap,
    inner: Vec<u8>,
}

impl OverlayGenerator {
    /// `n` packets of the tenant over the duration of `spec` (normalised).
    pub fn new(spec: &DemoSpec, n: u64) -> OverlayGenerator {
        let spec = spec.normalized();
        let salt = mix(spec.seed ^ 0x0e7e_41a7);
        let conns = (0..FLOWS)
            .map(|i| {
                let h = mix(salt ^ u64::from(i));
                Conn {
                    local: 1 + i % 2,
                    sport: 40_000 + (h % 20_000) as u16,
                    dport: [80, 443, 5201, 8080][(h >> 20) as usize % 4],
                    upload: i % 4 < 2,
                    seq_local: (h >> 32) as u32,
                    seq_remote: h as u32,
                    k: 0,
                }
            })
            .collect();
        let outer = Outer {
            kind: Kind::Geneve,
            eth_src: REMOTE_HOST_MAC,
            eth_dst: LOCAL_HOST_MAC,
            ip: OuterIp::V4 {
                src: REMOTE_ENDPOINT,
                dst: LOCAL_ENDPOINT,
            },
            tos: 0,
            ttl: 64,
            df: true,
            udp_dst: Kind::Geneve.default_port(),
            csum: false,
            vni: VNI,
            opts: Vec::new(),
        };
        OverlayGenerator {
            n,
            k: 0,
            timing: Timing::new(duration_ns(spec.seconds)),
            ports: Ports::of(spec.vms),
            conns,
            encap: Encap::new(outer).expect("a fixed Geneve header is well formed"),
            inner: Vec::with_capacity(1600),
        }
    }

    /// Packets not generated yet.
    pub fn remaining(&self) -> u64 {
        self.n - self.k
    }

    /// Writes the next packet's frame into `buf` and returns its time and
    /// in_port; `None` after the last.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Option<(Timestamp, PortNo)> {
        let (at, conn) = self.timing.turn(&mut self.k, self.n, FLOWS)?;
        let c = &mut self.conns[conn];
        let i = c.k;
        c.k += 1;
        // (from the local VM, flags, payload)
        let (local_sends, flags, payload) = match i {
            0 => (true, SYN, 0),
            1 => (false, SYN | ACK, 0),
            2 => (true, ACK, 0),
            _ => match (i - 3) % 3 {
                0 => (c.upload, ACK, 1448),
                1 => (c.upload, PSH | ACK, 1448),
                _ => (!c.upload, ACK, 0),
            },
        };
        let (local, remote) = (c.local, REMOTE_VM);
        let (from, to, sport, dport) = if local_sends {
            (local, remote, c.sport, c.dport)
        } else {
            (remote, local, c.dport, c.sport)
        };
        let (seq, ack) = if local_sends {
            (&mut c.seq_local, c.seq_remote)
        } else {
            (&mut c.seq_remote, c.seq_local)
        };
        let a = Addrs {
            src_mac: tenant_mac(from),
            dst_mac: tenant_mac(to),
            src_ip: tenant_ip(from),
            dst_ip: tenant_ip(to),
        };
        let hdr = Tcp {
            sport,
            dport,
            seq: *seq,
            ack: if flags & ACK != 0 { ack } else { 0 },
            flags,
            window: 64_240,
            options: &[],
        };
        *seq = seq
            .wrapping_add(payload as u32)
            .wrapping_add(u32::from(flags & SYN != 0));
        let port = if local_sends {
            frame::tcp(buf, &a, &hdr, payload);
            self.ports.vms[local as usize - 1]
        } else {
            frame::tcp(&mut self.inner, &a, &hdr, payload);
            // The remote host's source port: a hash of the inner flow.
            let hash = mix(u64::from(sport) << 16 | u64::from(dport)) as u32;
            self.encap
                .encap_into(&self.inner, hash, buf)
                .expect("a demo frame fits the tunnel");
            self.ports.uplink
        };
        Some((Timestamp(EPOCH.0 + at), port))
    }
}

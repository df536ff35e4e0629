//! The underlay of a live switch: the host's routes, addresses and
//! neighbours (`offload::host`, followed over rtnetlink) as the tunnel
//! ports' [`Underlay`], a route's device mapped to the switch's uplink
//! port of that name.
//!
//! The daemon also claims each tunnel port's UDP port on the host (a
//! bound socket it never reads): the host's own stack sees the frames of
//! the uplink too, and without a socket it would answer every tunnel
//! packet with an ICMP port unreachable.

use std::collections::BTreeMap;
use std::net::{IpAddr, UdpSocket};
use std::sync::{Arc, Mutex};

use offload::host::{HostState, NeighState};
use ofproto::tunnel::{NextHop, Underlay, Unreachable};

use crate::switch::{PortKind, SharedPorts};

/// [`Underlay`] over the host's tables.
#[derive(Debug)]
pub struct HostUnderlay {
    state: Arc<HostState>,
    ports: Arc<SharedPorts>,
}

impl HostUnderlay {
    pub fn new(state: Arc<HostState>, ports: Arc<SharedPorts>) -> HostUnderlay {
        HostUnderlay { state, ports }
    }
}

impl Underlay for HostUnderlay {
    fn generation(&self) -> u64 {
        self.state.generation()
    }

    fn next_hop(&self, dst: IpAddr, src: Option<IpAddr>) -> Result<NextHop, Unreachable> {
        let hop = self
            .state
            .table()
            .next_hop(dst)
            .ok_or(Unreachable::NoRoute(dst))?;
        let map = self.ports.current();
        let port = map
            .specs()
            .iter()
            .find(|p| p.kind == PortKind::Uplink && p.name == hop.link.name)
            .map(|p| p.no)
            .ok_or_else(|| Unreachable::NotOnSwitch {
                dst,
                dev: hop.link.name.clone(),
            })?;
        let src = src.or(hop.src).ok_or(Unreachable::NoRoute(dst))?;
        match hop.state {
            Some(NeighState::Valid(mac)) => Ok(NextHop {
                port,
                src,
                eth_src: hop.link.mac,
                eth_dst: mac,
                mtu: u16::try_from(hop.link.mtu).unwrap_or(u16::MAX),
            }),
            Some(NeighState::Failed) => {
                // Asked again: it may answer now.
                self.state.request_resolution(hop.ifindex, hop.neighbour);
                Err(Unreachable::Failed(hop.neighbour))
            }
            _ => {
                self.state.request_resolution(hop.ifindex, hop.neighbour);
                Err(Unreachable::Unresolved(hop.neighbour))
            }
        }
    }

    fn is_local(&self, addr: IpAddr) -> bool {
        self.state.table().is_local(addr)
    }
}

/// The tunnel UDP ports the daemon holds sockets on.
#[derive(Debug, Default)]
pub struct PortClaims {
    held: Mutex<BTreeMap<u16, Vec<UdpSocket>>>,
}

impl PortClaims {
    /// Holds a socket on UDP `port` (IPv4 and IPv6) unless one is held; a
    /// port another program holds is left to it (logged).
    pub fn claim(&self, port: u16) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains_key(&port) {
            return;
        }
        // "::" first: a dual-stack socket (bindv6only=0, the usual) holds
        // IPv4 too, and the IPv4 bind after it then fails for that reason
        // alone; with bindv6only=1 both succeed. Only none is a problem.
        let mut socks = Vec::new();
        let mut last = None;
        for addr in ["::", "0.0.0.0"] {
            match UdpSocket::bind((addr, port)) {
                Ok(s) => socks.push(s),
                Err(e) => last = Some(e),
            }
        }
        if let (true, Some(e)) = (socks.is_empty(), last) {
            tracing::warn!(
                port,
                "cannot hold the tunnel UDP port (the host stack may answer tunnel packets with ICMP): {e}"
            );
        }
        held.insert(port, socks);
    }
}

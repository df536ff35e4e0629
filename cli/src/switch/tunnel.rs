//! Receive side of the tunnel ports: which frames from an uplink are a
//! tunnel's, decapsulated before the datapath sees them.
//!
//! A frame on an uplink port that is UDP to a tunnel port's `dst_port`,
//! addressed to a local endpoint (a tunnel port's `local_ip`, or one of
//! the host's addresses as the underlay knows them), enters the pipeline
//! on the tunnel port that accepts it (its fixed `remote_ip` the sender,
//! its fixed `key` the VNI), its inner frame alone, with the outer
//! headers in the key's `tun_*` fields. What cannot be decapsulated (an
//! outer fragment, a malformed or cut-short header) or that no port
//! accepts (an unknown VNI) is dropped and counted by reason; a frame for
//! another host is switched as it is.

use std::net::IpAddr;

use megaflow::tunnel::{decap, TunnelError};
use megaflow::{PortNo, TunnelKey};

use super::counters::SwitchCounters;
use super::ports::PortMap;
use super::PortKind;

/// What a received frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Received {
    /// Not a tunnel's: switched as it is.
    Plain,
    /// A tunnel's: the inner frame starts at `inner`, and enters on `port`.
    Tunnel {
        port: PortNo,
        key: TunnelKey,
        inner: usize,
    },
    /// Dropped (counted).
    Dropped,
}

/// Why a tunnel frame was dropped at receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelDrop {
    /// The outer packet is a fragment.
    Fragment,
    /// Cut short or malformed.
    Malformed,
    /// No tunnel port accepts its sender and VNI.
    NoPort,
    /// Its Geneve options cannot enter a key (`megaflow::tunnel::OptionError`).
    BadOption,
}

impl TunnelDrop {
    pub fn name(self) -> &'static str {
        match self {
            TunnelDrop::Fragment => "fragment",
            TunnelDrop::Malformed => "malformed",
            TunnelDrop::NoPort => "unknown_vni",
            TunnelDrop::BadOption => "bad_option",
        }
    }
}

/// Classifies a frame received on `port`, counting tunnel receives and
/// drops in `c`.
pub(crate) fn receive(
    ports: &PortMap,
    port: PortNo,
    frame: &[u8],
    c: &mut SwitchCounters,
) -> Received {
    let udp = ports.tunnel_udp_ports();
    if udp.is_empty() || ports.kind(port) != Some(PortKind::Uplink) {
        return Received::Plain;
    }
    let d = match decap(frame, udp) {
        Ok(Some(d)) => d,
        Ok(None) => return Received::Plain,
        Err(e) => {
            // Not known to be for us: an error only when it would be.
            let why = match e {
                TunnelError::Fragment => TunnelDrop::Fragment,
                _ => TunnelDrop::Malformed,
            };
            return match outer_dst(frame) {
                Some(dst) if ports.is_local_endpoint(dst) => {
                    c.count_tunnel_drop(why);
                    Received::Dropped
                }
                _ => Received::Plain,
            };
        }
    };
    if !ports.is_local_endpoint(d.dst) {
        return Received::Plain;
    }
    let found = ports.tunnels().find(|(_, t)| {
        t.kind == d.kind && t.dst_port == d.udp_dst && t.accepts(d.src, d.dst, d.vni)
    });
    match found {
        Some((no, _)) => {
            let mut key = TunnelKey::of(&d);
            if !d.opts.is_empty() {
                match ports.options().read(&frame[d.opts.clone()]) {
                    Ok((opts, present)) => (key.opts, key.present) = (opts, present),
                    Err(_) => {
                        c.count_tunnel_drop(TunnelDrop::BadOption);
                        return Received::Dropped;
                    }
                }
            }
            c.tunnel_rx += 1;
            Received::Tunnel {
                port: no,
                key,
                inner: d.inner,
            }
        }
        None => {
            c.count_tunnel_drop(TunnelDrop::NoPort);
            Received::Dropped
        }
    }
}

/// The outer IP destination of an Ethernet frame, if it has one.
fn outer_dst(frame: &[u8]) -> Option<IpAddr> {
    match frame.get(12..14)? {
        [0x08, 0x00] => {
            let b: [u8; 4] = frame.get(30..34)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        [0x86, 0xdd] => {
            let b: [u8; 16] = frame.get(38..54)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

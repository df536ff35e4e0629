//! Live netdev ports: AF_PACKET sockets on Linux network interfaces.
//!
//! - [`AfPacketPort`] implements [`megaflow::port::Port`] on one interface:
//!   a TPACKET_V3 mmap'd receive ring (frames copied into the caller's
//!   [`PacketBatch`](megaflow::port::PacketBatch), VLAN tags the kernel
//!   stripped put back), batched transmit with `sendmmsg` or a TX ring
//!   ([`TxMode`]), bypassing the qdisc layer, promiscuous, non-blocking, with
//!   its own transmissions ignored on receive.
//! - [`AfPacketTx`] is a send-only handle (its own socket, no ring) that
//!   another thread can use on the same interface; the packet generator uses
//!   it.
//!
//! The raw syscalls and the shared-memory ring accesses are in `sys` (all
//! the crate's `unsafe` but the one `poll(2)` call of `wait`); the ring
//! protocols in safe code are in `ring`. [`wait_readable`] sleeps until one
//! of several ports' [`poll_fd`](megaflow::port::Port::poll_fd)s is ready.

mod afpacket;
mod ring;
mod sys;
mod tx;
mod wait;
pub use wait::wait_readable;

use std::io;

use megaflow::port::PortError;
use thiserror::Error;

pub use afpacket::{AfPacketConfig, AfPacketPort, TxMode};
pub use ring::{insert_vlan_tag, ETH_P_8021Q};
pub use tx::AfPacketTx;

/// Why opening or using a netdev failed: the interface, the step, the cause.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NetdevError {
    /// A system call failed; `step` names it, e.g.
    /// `setsockopt(PACKET_RX_RING)`.
    #[error("{ifname}: {step}: {source}")]
    Os {
        ifname: String,
        step: &'static str,
        #[source]
        source: io::Error,
    },
    /// The configuration cannot work; `reason` says why.
    #[error("{ifname}: bad configuration: {reason}")]
    Config { ifname: String, reason: String },
}

impl NetdevError {
    pub(crate) fn os(ifname: &str, step: &'static str, source: io::Error) -> Self {
        NetdevError::Os {
            ifname: ifname.to_owned(),
            step,
            source,
        }
    }

    /// The interface the error is about.
    pub fn ifname(&self) -> &str {
        match self {
            NetdevError::Os { ifname, .. } | NetdevError::Config { ifname, .. } => ifname,
        }
    }

    /// The OS error, if there is one.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            NetdevError::Os { source, .. } => Some(source),
            NetdevError::Config { .. } => None,
        }
    }
}

impl From<NetdevError> for PortError {
    fn from(e: NetdevError) -> PortError {
        match e {
            NetdevError::Os {
                ifname,
                step,
                source,
            } => PortError::Io {
                port: ifname,
                context: step.to_owned(),
                source,
            },
            NetdevError::Config { ifname, reason } => PortError::Io {
                port: ifname,
                context: "configuration".to_owned(),
                source: io::Error::new(io::ErrorKind::InvalidInput, reason),
            },
        }
    }
}

#[cfg(test)]
#[path = "tests/unit.rs"]
mod tests;

//! Ports on netdevs: AF_XDP (`xsk`) where the kernel and the netdev allow
//! it, AF_PACKET with a TPACKET_V3 ring (`netdev`) otherwise; the upcall
//! handler always sends through its own AF_PACKET socket.

use std::time::Duration;

use megaflow::port::{PacketBatch, Port, PortError, PortStats};
use megaflow::Timestamp;
use netdev::{AfPacketConfig, AfPacketPort, AfPacketTx};
use tracing::info;
use xsk::{XskConfig, XskPort};

use super::{OpenedPort, PortFactory};
use crate::config::PortType;

/// Opens netdev ports of the configured type.
#[derive(Clone, Copy, Debug)]
pub struct NetdevFactory {
    pub port_type: PortType,
}

impl PortFactory for NetdevFactory {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort> {
        let (rx, kind): (Box<dyn Port>, &str) = match self.port_type {
            PortType::AfPacket => (Box::new(open_afpacket(name)?), "af_packet"),
            PortType::AfXdp => (
                Box::new(XskPort::open(name, XskConfig::default())?),
                "af_xdp",
            ),
            PortType::Auto => match XskPort::open(name, XskConfig::default()) {
                Ok(p) => (Box::new(p), "af_xdp"),
                Err(e) => {
                    info!(port = name, "AF_XDP unavailable ({e}); using AF_PACKET");
                    (Box::new(open_afpacket(name)?), "af_packet")
                }
            },
        };
        let tx = SendOnly {
            name: name.to_string(),
            tx: AfPacketTx::open(name)?,
        };
        Ok(OpenedPort {
            rx,
            tx: Box::new(tx),
            kind: kind.to_string(),
        })
    }

    fn wait(&self, fds: &[i32], timeout: Duration) {
        netdev::wait_readable(fds, timeout);
    }
}

fn open_afpacket(name: &str) -> anyhow::Result<AfPacketPort> {
    Ok(AfPacketPort::open(name, AfPacketConfig::default())?)
}

/// The handler's send-only socket as a [`Port`] that never receives.
struct SendOnly {
    name: String,
    tx: AfPacketTx,
}

impl Port for SendOnly {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        Ok(0)
    }

    fn send_batch(&mut self, pkts: &[&[u8]], _now: Timestamp) -> Result<usize, PortError> {
        Ok(self.tx.send_batch(pkts))
    }

    fn stats(&self) -> PortStats {
        self.tx.stats()
    }
}

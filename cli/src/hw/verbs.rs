//! The `verbs` port: the mlx5 backend's slow-path receive queue as the
//! [`Port`] a datapath thread receives from. One queue receives for every
//! representor: each packet's port comes from its completion's reg_b (the
//! source vport's reg_c_0 metadata) and its restore tag from the flow tag,
//! both in its [`PacketMeta`]. It only receives: the slow path sends
//! through the ports' own netdevs.

use std::collections::HashMap;
use std::sync::Arc;

use megaflow::port::{PacketBatch, PacketMeta, Port, PortError, PortStats, BATCH_SIZE};
use megaflow::{PortNo, Timestamp};
use offload::Vport;

/// The slow-path queue of an mlx5 backend, as a receive-only port.
pub struct VerbsPort {
    dev: Arc<mlx5::Mlx5Backend>,
    ports: HashMap<Vport, PortNo>,
    stats: PortStats,
    /// Failed polls so far (each logged the first time and every 1,000th).
    poll_errors: u64,
}

impl VerbsPort {
    /// The queue of `dev`, naming packets by `ports` (vport → port).
    pub fn new(dev: Arc<mlx5::Mlx5Backend>, ports: &[(Vport, PortNo)]) -> VerbsPort {
        VerbsPort {
            dev,
            ports: ports.iter().copied().collect(),
            stats: PortStats::default(),
            poll_errors: 0,
        }
    }
}

impl Port for VerbsPort {
    fn name(&self) -> &str {
        "slow-path queue"
    }

    /// Up to a batch of packets, each with the port its reg_b names; one
    /// from a vport the switch has no port for is counted in `rx_dropped`.
    /// A failed poll is logged and counted, never the port's end: the
    /// queue has no netdev to come back with, and the NIC RX rules keep
    /// steering misses to it.
    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        // The datapath thread stamps a round with its own clock.
        let now = Timestamp::NEVER;
        let (dev, ports, stats) = (&self.dev, &self.ports, &mut self.stats);
        dev.poll_slow_path(BATCH_SIZE, |a| {
            let port = dev
                .vport_of_metadata(a.reg_b)
                .and_then(|v| ports.get(&v).copied());
            let meta = PacketMeta {
                in_port: port,
                restore: a.tag,
                ..PacketMeta::new(now)
            };
            if port.is_some() && batch.push(a.bytes, meta) {
                stats.rx_packets += 1;
                stats.rx_bytes += a.bytes.len() as u64;
            } else {
                stats.rx_dropped += 1;
            }
        })
        .unwrap_or_else(|e| {
            if self.poll_errors % 1000 == 0 {
                tracing::warn!(%e, errors = self.poll_errors + 1, "the slow-path queue");
            }
            self.poll_errors += 1;
            0
        });
        Ok(batch.len())
    }

    /// Receive-only: the slow path sends through the ports' netdevs.
    fn send_batch(&mut self, pkts: &[&[u8]], _now: Timestamp) -> Result<usize, PortError> {
        self.stats.refuse_send(pkts)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

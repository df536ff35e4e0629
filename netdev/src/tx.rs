//! Batched transmit with `sendmmsg`, shared by [`AfPacketPort`] and the
//! send-only [`AfPacketTx`].
//!
//! [`AfPacketPort`]: crate::AfPacketPort

use std::io;

use megaflow::port::PortStats;

use crate::sys::{self, PacketSocket};
use crate::NetdevError;

/// Sends `pkts` in order with as few `sendmmsg` calls as the kernel allows,
/// counting in `stats`. A full queue drops the rest of the batch, a frame the
/// device refuses (too long, too short) is dropped alone; both are counted
/// in `tx_dropped`. Returns the number sent, or the error that means the
/// device is unusable (everything not sent is then counted dropped).
pub(crate) fn send_mmsg(
    sock: &PacketSocket,
    pkts: &[&[u8]],
    stats: &mut PortStats,
) -> Result<usize, io::Error> {
    let mut i = 0;
    let mut sent = 0;
    while i < pkts.len() {
        match sock.sendmmsg(&pkts[i..]) {
            Ok(0) => {
                stats.tx_dropped += (pkts.len() - i) as u64;
                break;
            }
            Ok(n) => {
                stats.tx_packets += n as u64;
                stats.tx_bytes += pkts[i..i + n].iter().map(|p| p.len() as u64).sum::<u64>();
                i += n;
                sent += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if sys::is_queue_full(&e) => {
                stats.tx_dropped += (pkts.len() - i) as u64;
                break;
            }
            Err(e) if sys::is_bad_frame(&e) => {
                stats.tx_dropped += 1;
                i += 1;
            }
            Err(e) => {
                stats.tx_dropped += (pkts.len() - i) as u64;
                return Err(e);
            }
        }
    }
    Ok(sent)
}

/// A send-only AF_PACKET socket on one interface, for a thread other than
/// the one that owns the interface's [`AfPacketPort`](crate::AfPacketPort)
/// (or for a traffic generator). No ring: frames go out with `sendmmsg`,
/// bypassing the qdisc layer. It never receives (it is bound with protocol
/// 0), and being `Send` it can be moved to the thread that uses it.
#[derive(Debug)]
pub struct AfPacketTx {
    name: String,
    sock: PacketSocket,
    stats: PortStats,
}

impl AfPacketTx {
    /// Opens a send-only socket on `ifname`.
    pub fn open(ifname: &str) -> Result<AfPacketTx, NetdevError> {
        let ifindex =
            sys::if_index(ifname).map_err(|e| NetdevError::os(ifname, "if_nametoindex", e))?;
        let sock = PacketSocket::new()
            .map_err(|e| NetdevError::os(ifname, "socket(AF_PACKET, SOCK_RAW)", e))?;
        sock.set_opt(libc::PACKET_QDISC_BYPASS, &1i32)
            .map_err(|e| NetdevError::os(ifname, "setsockopt(PACKET_QDISC_BYPASS)", e))?;
        sock.bind(ifindex, 0)
            .map_err(|e| NetdevError::os(ifname, "bind", e))?;
        Ok(AfPacketTx {
            name: ifname.to_owned(),
            sock,
            stats: PortStats::default(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends `pkts` in order; returns how many were sent. Frames the device
    /// could not take (full queue, bad length, device down) are dropped and
    /// counted in `tx_dropped`; never blocks.
    pub fn send_batch(&mut self, pkts: &[&[u8]]) -> usize {
        let before = self.stats.tx_packets;
        let _ = send_mmsg(&self.sock, pkts, &mut self.stats);
        (self.stats.tx_packets - before) as usize
    }

    /// Like [`AfPacketTx::send_batch`], but reports a device that is gone or
    /// down (`ENXIO`, `ENETDOWN`) or another unexpected error.
    pub fn try_send_batch(&mut self, pkts: &[&[u8]]) -> Result<usize, NetdevError> {
        let before = self.stats.tx_packets;
        send_mmsg(&self.sock, pkts, &mut self.stats)
            .map_err(|e| NetdevError::os(&self.name, "sendmmsg", e))?;
        Ok((self.stats.tx_packets - before) as usize)
    }

    /// Transmit counters (`tx_*` only).
    pub fn stats(&self) -> PortStats {
        self.stats
    }
}

//! Port I/O: how packets get into and out of the datapath.
//!
//! A datapath thread polls its ports with [`Port::recv_batch`], which fills a
//! reusable [`PacketBatch`] with up to [`BATCH_SIZE`] packets, runs them
//! through extraction, the megaflow cache and the actions, and hands the
//! packets bound for each port to [`Port::send_batch`]. Implementations:
//!
//! - [`MemoryPort`]: bounded in-memory queues, alone or as a connected
//!   [`MemoryPort::pair`], with a [`MemoryHandle`] through which tests (on any
//!   thread) inject received packets and take sent ones;
//! - [`PcapReader`]: replays a pcap or pcapng capture (timestamps, and for
//!   pcapng the interface id as an `in_port` hint), ending with
//!   [`PortError::Eof`];
//! - [`PcapWriter`]: records everything sent to it in a pcap file that
//!   tcpdump and Wireshark open;
//! - [`PcapNgWriter`] (not a port): writes packets of several interfaces,
//!   each tagged with its interface id, to one pcapng file (replay inputs
//!   such as the `eswitchd replay --demo` workload).
//!
//! AF_PACKET (TPACKET_V3) and AF_XDP ports implement the same trait in the
//! `netdev` and `xsk` crates, which hold the project's `unsafe` code.
//! Callers: the datapath threads (through `Box<dyn Port>`), `eswitchd
//! replay` (capture in, capture out, the capture's timestamps as simulated
//! time), and tests.
//!
//! ## Invariants
//!
//! - A batch never holds more than [`BATCH_SIZE`] packets nor a packet longer
//!   than [`MAX_FRAME_LEN`]; its packet bytes live in one buffer that is
//!   reused from batch to batch, so steady-state receive does not allocate.
//! - A per-packet problem (queue full, oversized frame) never fails a whole
//!   batch: the packet is dropped and counted in [`PortStats`]. An `Err` means
//!   the port itself has a problem (I/O, a corrupt capture, end of file), with
//!   the one exception of [`PortError::PacketTooLarge`] from a capture reader,
//!   which reports a skipped record and lets the next call go on.
//!
//! ## Thread-safety
//!
//! `Port: Send`: a port is created on one thread and moved to the datapath
//! thread that owns it; its methods take `&mut self` and are called by that
//! thread only, so ports need no locks of their own (the memory port's
//! queues, shared with its peer and its handles, are the exception and take a
//! mutex once per batch).

mod memory;
mod pcap;
mod pcapng;
mod sink;

use std::fmt;
use std::io;

use thiserror::Error;

use crate::{PortNo, Timestamp};

pub use memory::{MemoryHandle, MemoryPort, DEFAULT_QUEUE_CAPACITY};
pub use pcap::{CaptureFormat, PcapReader, PcapWriter};
pub use pcapng::PcapNgWriter;

/// Most packets in one [`PacketBatch`] (and so one receive call).
pub const BATCH_SIZE: usize = 32;

/// Longest frame, in bytes, a batch holds (the classic pcap snap length; an
/// IPv4 or IPv6 packet of the largest size with its Ethernet header would
/// need 65 549, which no port that uses this datapath produces).
pub const MAX_FRAME_LEN: usize = 65_535;

/// Bytes of packet data a new batch reserves: room for a full batch of
/// standard 1 518-byte frames, rounded up, so typical traffic never grows it.
const INITIAL_DATA_CAPACITY: usize = BATCH_SIZE * 2048;

/// What a port knows about a received packet besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// When the packet was received, in nanoseconds: the capture timestamp
    /// for a capture reader, the sender's `now` for a memory port.
    pub ts: Timestamp,
    /// The port the packet came in on, when the source says so (the interface
    /// id of a pcapng record); `None` means "the port it was received from".
    pub in_port: Option<PortNo>,
    /// The restore tag the device handed the packet to software with
    /// (`offload::restore`: what the eSwitch already did to it); 0, a
    /// plain miss, for every port but a device's slow-path queue.
    pub restore: u32,
}

impl PacketMeta {
    pub fn new(ts: Timestamp) -> Self {
        PacketMeta {
            ts,
            in_port: None,
            restore: 0,
        }
    }

    pub fn with_in_port(ts: Timestamp, in_port: PortNo) -> Self {
        PacketMeta {
            in_port: Some(in_port),
            ..PacketMeta::new(ts)
        }
    }
}

/// One packet of a batch, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub data: &'a [u8],
    pub meta: PacketMeta,
}

/// Where a packet's bytes are in the batch buffer.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    off: usize,
    len: usize,
    meta: PacketMeta,
}

/// A reusable batch of up to [`BATCH_SIZE`] packets.
///
/// The bytes of all packets are stored back to back in one buffer, with an
/// (offset, length, [`PacketMeta`]) slot per packet, so adding a packet is a
/// copy and no allocation once the buffer has grown to the traffic's size
/// (it never shrinks; [`PacketBatch::clear`] keeps it).
#[derive(Clone)]
pub struct PacketBatch {
    data: Vec<u8>,
    slots: [Slot; BATCH_SIZE],
    count: usize,
}

impl Default for PacketBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PacketBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBatch")
            .field("len", &self.count)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl PacketBatch {
    pub fn new() -> Self {
        PacketBatch {
            data: Vec::with_capacity(INITIAL_DATA_CAPACITY),
            slots: [Slot::default(); BATCH_SIZE],
            count: 0,
        }
    }

    /// Removes all packets, keeping the buffer.
    pub fn clear(&mut self) {
        self.data.clear();
        self.count = 0;
    }

    /// Appends a copy of `pkt`. Returns `false`, and leaves the batch as it
    /// was, if the batch is full or `pkt` is longer than [`MAX_FRAME_LEN`].
    pub fn push(&mut self, pkt: &[u8], meta: PacketMeta) -> bool {
        if self.count == BATCH_SIZE || pkt.len() > MAX_FRAME_LEN {
            return false;
        }
        let off = self.data.len();
        self.data.extend_from_slice(pkt);
        self.slots[self.count] = Slot {
            off,
            len: pkt.len(),
            meta,
        };
        self.count += 1;
        true
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// True when [`PacketBatch::push`] would refuse any packet.
    pub fn is_full(&self) -> bool {
        self.count == BATCH_SIZE
    }

    /// Sum of the packets' lengths.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The `i`th packet, `None` past the end.
    pub fn get(&self, i: usize) -> Option<Packet<'_>> {
        if i >= self.count {
            return None;
        }
        let s = &self.slots[i];
        Some(Packet {
            data: &self.data[s.off..s.off + s.len],
            meta: s.meta,
        })
    }

    /// The bytes of the `i`th packet, to rewrite in place.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        if i >= self.count {
            return None;
        }
        let s = self.slots[i];
        Some(&mut self.data[s.off..s.off + s.len])
    }

    /// The metadata of the `i`th packet, to change (e.g. to resolve an
    /// `in_port` hint).
    pub fn meta_mut(&mut self, i: usize) -> Option<&mut PacketMeta> {
        if i >= self.count {
            return None;
        }
        Some(&mut self.slots[i].meta)
    }

    /// The packets in the order they were pushed.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            batch: self,
            next: 0,
        }
    }
}

impl<'a> IntoIterator for &'a PacketBatch {
    type Item = Packet<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over the packets of a [`PacketBatch`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    batch: &'a PacketBatch,
    next: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Packet<'a>;

    fn next(&mut self) -> Option<Packet<'a>> {
        let p = self.batch.get(self.next)?;
        self.next += 1;
        Some(p)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.batch.count - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Counters of a port, since it was created.
///
/// `rx_*`/`tx_*` count packets delivered by [`Port::recv_batch`] and accepted
/// by [`Port::send_batch`]; `rx_dropped` counts packets that arrived but could
/// not be delivered (receive queue full, frame too large), `tx_dropped`
/// packets given to send that the port could not take (queue full, frame
/// larger than the MTU, a receive-only port, a writer that failed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

impl PortStats {
    /// A receive-only port's answer to a send: every packet dropped and
    /// counted, none accepted.
    pub fn refuse_send(&mut self, pkts: &[&[u8]]) -> Result<usize, PortError> {
        self.tx_dropped += pkts.len() as u64;
        Ok(0)
    }
}

/// Why a port operation failed. Every variant names the port.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PortError {
    /// An operating-system I/O error; `context` says what was being done
    /// (e.g. "writing /tmp/out.pcap").
    #[error("port {port}: {context}: {source}")]
    Io {
        port: String,
        context: String,
        #[source]
        source: io::Error,
    },
    /// The capture file is not a pcap/pcapng file or is corrupt or truncated;
    /// `reason` says what was wrong and where.
    #[error("port {port}: {file}: bad capture file: {reason}")]
    BadCapture {
        port: String,
        file: String,
        reason: String,
    },
    /// The capture's link type is not Ethernet (pcapng: of the interface a
    /// packet refers to).
    #[error(
        "port {port}: {file}: unsupported link type {link_type}{} (only Ethernet captures can be replayed)",
        .interface.map(|i| format!(" on interface {i}")).unwrap_or_default()
    )]
    UnsupportedLinkType {
        port: String,
        file: String,
        link_type: String,
        interface: Option<u32>,
    },
    /// A packet is longer than the port or batch can carry. From a capture
    /// reader this is not fatal: the record was skipped (and counted in
    /// `rx_dropped`), and the next receive goes on with the next one.
    #[error("port {port}: packet of {len} bytes exceeds the limit of {limit} bytes")]
    PacketTooLarge {
        port: String,
        len: usize,
        limit: usize,
    },
    /// A capture reader has delivered its last packet. Every later receive
    /// returns this again.
    #[error("port {port}: end of capture")]
    Eof { port: String },
}

impl PortError {
    /// True for [`PortError::Eof`].
    pub fn is_eof(&self) -> bool {
        matches!(self, PortError::Eof { .. })
    }

    /// The name of the port the error is about.
    pub fn port(&self) -> &str {
        match self {
            PortError::Io { port, .. }
            | PortError::BadCapture { port, .. }
            | PortError::UnsupportedLinkType { port, .. }
            | PortError::PacketTooLarge { port, .. }
            | PortError::Eof { port } => port,
        }
    }

    /// A copy, for ports that keep returning the error that stopped them
    /// (`io::Error` is not `Clone`: its kind and message are kept).
    fn duplicate(&self) -> PortError {
        match self {
            PortError::Io {
                port,
                context,
                source,
            } => PortError::Io {
                port: port.clone(),
                context: context.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            PortError::BadCapture { port, file, reason } => PortError::BadCapture {
                port: port.clone(),
                file: file.clone(),
                reason: reason.clone(),
            },
            PortError::UnsupportedLinkType {
                port,
                file,
                link_type,
                interface,
            } => PortError::UnsupportedLinkType {
                port: port.clone(),
                file: file.clone(),
                link_type: link_type.clone(),
                interface: *interface,
            },
            PortError::PacketTooLarge { port, len, limit } => PortError::PacketTooLarge {
                port: port.clone(),
                len: *len,
                limit: *limit,
            },
            PortError::Eof { port } => PortError::Eof { port: port.clone() },
        }
    }
}

/// A port that receives and sends batches of packets.
///
/// Called by the datapath thread that owns the port (hence `Send`, and
/// `&mut self` everywhere). No method blocks: a port with nothing to receive
/// returns `Ok(0)`, one that cannot take a packet drops and counts it.
pub trait Port: Send {
    /// The port's name, as errors and logs show it.
    fn name(&self) -> &str;

    /// Clears `batch` and fills it with up to [`BATCH_SIZE`] received
    /// packets; returns how many (`batch.len()`).
    ///
    /// `Ok(0)` means nothing is available now (try again later). A capture
    /// reader returns `Err(PortError::Eof)` once it has delivered its last
    /// packet, and an error that stops it (I/O, corrupt file) on every call
    /// after the first; see [`PortError`] for the one non-fatal error.
    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError>;

    /// Sends `pkts`, in order, as of time `now` (the datapath passes its
    /// per-batch clock: a capture writer records it as the packets'
    /// timestamp, a live port ignores it). Returns how many packets the port
    /// accepted; the others were dropped and counted in `tx_dropped`. `Err`
    /// only if the port failed as a whole (e.g. a write error), in which case
    /// the packets not yet written are counted as dropped.
    ///
    /// It takes slices rather than a [`PacketBatch`] so that the datapath can
    /// send the packets of one batch bound for one port without copying them.
    fn send_batch(&mut self, pkts: &[&[u8]], now: Timestamp) -> Result<usize, PortError>;

    /// Sends every packet of `batch`, each with its own timestamp (runs of
    /// equal timestamps go to [`Port::send_batch`] together). Returns the
    /// number accepted. Handy to forward what another port received, and for
    /// tests.
    fn send(&mut self, batch: &PacketBatch) -> Result<usize, PortError> {
        let mut refs: [&[u8]; BATCH_SIZE] = [&[]; BATCH_SIZE];
        let mut run_ts = Timestamp::NEVER;
        let mut n = 0;
        let mut sent = 0;
        for p in batch {
            if n > 0 && p.meta.ts != run_ts {
                sent += self.send_batch(&refs[..n], run_ts)?;
                n = 0;
            }
            run_ts = p.meta.ts;
            refs[n] = p.data; // n < BATCH_SIZE: a batch holds at most that many
            n += 1;
        }
        if n > 0 {
            sent += self.send_batch(&refs[..n], run_ts)?;
        }
        Ok(sent)
    }

    /// The port's counters.
    fn stats(&self) -> PortStats;

    /// A file descriptor that becomes readable when the port has packets,
    /// so an idle datapath thread can sleep in `poll(2)` instead of
    /// spinning. `None` (the default): the port has none (memory and
    /// capture ports), and the caller must poll it.
    fn poll_fd(&self) -> Option<i32> {
        None
    }
}

#[cfg(test)]
mod tests;

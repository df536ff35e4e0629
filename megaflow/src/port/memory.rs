//! In-memory ports, for tests and for wiring datapaths together in-process.
//!
//! A [`MemoryPort`] has a receive queue and a transmit queue, each a bounded
//! FIFO of packets behind a mutex. [`MemoryPort::pair`] makes two ports whose
//! queues are crossed (what one sends, the other receives), like the two ends
//! of a veth pair. A [`MemoryHandle`] (cloneable, `Send + Sync`) reaches the
//! queues of a port that has been moved to another thread: it injects packets
//! as if they had arrived on the wire and takes the packets the port sent.
//!
//! Nothing blocks: a full queue drops the packet. A drop on `send_batch`
//! counts in the sender's `tx_dropped`; a drop on `inject` counts in the
//! receiving port's `rx_dropped` (the packet reached the port but found no
//! room), so a packet is never counted twice. Packets longer than the port's
//! MTU ([`MAX_FRAME_LEN`] unless set) are dropped the same way. A port whose
//! peer is gone keeps sending into the queue nobody reads, which fills and
//! then drops, like a link to nowhere.
//!
//! Queues recycle their packet buffers, so a port in steady state does not
//! allocate per packet. Locks are taken once per batch and never held while
//! calling out, so the queues are always consistent (a poisoned mutex is
//! simply recovered).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{PacketBatch, PacketMeta, Port, PortError, PortStats, BATCH_SIZE, MAX_FRAME_LEN};
use crate::Timestamp;

/// Packets a memory queue holds unless told otherwise.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;

/// One direction of a memory link.
#[derive(Debug)]
struct Queue {
    pkts: VecDeque<(Vec<u8>, PacketMeta)>,
    /// Emptied buffers kept for reuse (at most `capacity` of them).
    spare: Vec<Vec<u8>>,
    capacity: usize,
    /// Longest packet the queue accepts.
    mtu: usize,
    /// Packets `inject` could not queue: the receiving port's `rx_dropped`.
    inject_dropped: u64,
}

type SharedQueue = Arc<Mutex<Queue>>;

impl Queue {
    fn shared(capacity: usize) -> SharedQueue {
        Arc::new(Mutex::new(Queue {
            pkts: VecDeque::with_capacity(capacity.min(DEFAULT_QUEUE_CAPACITY)),
            spare: Vec::new(),
            capacity,
            mtu: MAX_FRAME_LEN,
            inject_dropped: 0,
        }))
    }

    /// Queues a copy of `data`; false if it is full or `data` too long.
    fn enqueue(&mut self, data: &[u8], meta: PacketMeta) -> bool {
        if self.pkts.len() >= self.capacity || data.len() > self.mtu {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.pkts.push_back((buf, meta));
        true
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < self.capacity {
            self.spare.push(buf);
        }
    }
}

/// Locks a queue. No code panics while holding the lock with the queue half
/// updated, so the data behind a poisoned mutex is still consistent.
fn lock(q: &SharedQueue) -> MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An in-memory port. See the [module documentation](self).
pub struct MemoryPort {
    name: String,
    rx: SharedQueue,
    tx: SharedQueue,
    stats: PortStats,
}

impl fmt::Debug for MemoryPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryPort")
            .field("name", &self.name)
            .field("stats", &self.stats())
            .finish()
    }
}

impl MemoryPort {
    /// A port connected to nothing: it receives what is injected through
    /// [`MemoryPort::inject`] or a [`MemoryHandle`], and what it sends stays
    /// in its transmit queue until taken with `take_tx`. Queues hold
    /// [`DEFAULT_QUEUE_CAPACITY`] packets.
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_capacity(name, DEFAULT_QUEUE_CAPACITY)
    }

    /// Like [`MemoryPort::new`] with queues of `capacity` packets.
    pub fn with_capacity(name: impl Into<String>, capacity: usize) -> Self {
        MemoryPort {
            name: name.into(),
            rx: Queue::shared(capacity),
            tx: Queue::shared(capacity),
            stats: PortStats::default(),
        }
    }

    /// Two connected ports: what `a` sends, `b` receives, and the other way
    /// round. Queues hold [`DEFAULT_QUEUE_CAPACITY`] packets.
    pub fn pair(a: impl Into<String>, b: impl Into<String>) -> (MemoryPort, MemoryPort) {
        Self::pair_with_capacity(a, b, DEFAULT_QUEUE_CAPACITY)
    }

    /// Like [`MemoryPort::pair`] with queues of `capacity` packets each way.
    pub fn pair_with_capacity(
        a: impl Into<String>,
        b: impl Into<String>,
        capacity: usize,
    ) -> (MemoryPort, MemoryPort) {
        let ab = Queue::shared(capacity);
        let ba = Queue::shared(capacity);
        let pa = MemoryPort {
            name: a.into(),
            rx: ba.clone(),
            tx: ab.clone(),
            stats: PortStats::default(),
        };
        let pb = MemoryPort {
            name: b.into(),
            rx: ab,
            tx: ba,
            stats: PortStats::default(),
        };
        (pa, pb)
    }

    /// Sets the longest packet this port sends and receives (default
    /// [`MAX_FRAME_LEN`], which is also the most it can be). Longer packets
    /// are dropped and counted. For a pair, set it on both ends.
    pub fn set_mtu(&mut self, mtu: usize) {
        let mtu = mtu.min(MAX_FRAME_LEN);
        lock(&self.rx).mtu = mtu;
        lock(&self.tx).mtu = mtu;
    }

    /// A handle on this port's queues, usable from any thread.
    pub fn handle(&self) -> MemoryHandle {
        MemoryHandle {
            name: self.name.clone(),
            rx: self.rx.clone(),
            tx: self.tx.clone(),
        }
    }

    /// Queues `data` for this port to receive, as if it arrived on the wire.
    /// Returns false, counting `rx_dropped`, if the receive queue is full or
    /// `data` exceeds the MTU.
    pub fn inject(&self, data: &[u8], meta: PacketMeta) -> bool {
        inject(&self.rx, data, meta)
    }

    /// Takes every packet this port has sent and that nobody has received
    /// yet (for a pair: that the peer has not received yet), oldest first.
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        take(&self.tx).into_iter().map(|(p, _)| p).collect()
    }
}

fn inject(q: &SharedQueue, data: &[u8], meta: PacketMeta) -> bool {
    let mut q = lock(q);
    let ok = q.enqueue(data, meta);
    if !ok {
        q.inject_dropped += 1;
    }
    ok
}

fn take(q: &SharedQueue) -> Vec<(Vec<u8>, PacketMeta)> {
    lock(q).pkts.drain(..).collect()
}

impl Port for MemoryPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        let mut q = lock(&self.rx);
        while batch.len() < BATCH_SIZE {
            let Some((buf, meta)) = q.pkts.pop_front() else {
                break;
            };
            // Queued packets are at most `mtu` <= MAX_FRAME_LEN bytes and the
            // batch has room, so the push cannot fail.
            let pushed = batch.push(&buf, meta);
            debug_assert!(pushed);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += buf.len() as u64;
            q.recycle(buf);
        }
        Ok(batch.len())
    }

    fn send_batch(&mut self, pkts: &[&[u8]], now: Timestamp) -> Result<usize, PortError> {
        let mut q = lock(&self.tx);
        let mut sent = 0;
        for p in pkts {
            if q.enqueue(p, PacketMeta::new(now)) {
                sent += 1;
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += p.len() as u64;
            } else {
                self.stats.tx_dropped += 1;
            }
        }
        Ok(sent)
    }

    fn stats(&self) -> PortStats {
        PortStats {
            rx_dropped: lock(&self.rx).inject_dropped,
            ..self.stats
        }
    }
}

/// Access to a [`MemoryPort`]'s queues from anywhere (clone it freely).
#[derive(Clone)]
pub struct MemoryHandle {
    name: String,
    rx: SharedQueue,
    tx: SharedQueue,
}

impl fmt::Debug for MemoryHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryHandle")
            .field("port", &self.name)
            .finish()
    }
}

impl MemoryHandle {
    /// The name of the port this handle reaches.
    pub fn port_name(&self) -> &str {
        &self.name
    }

    /// See [`MemoryPort::inject`].
    pub fn inject(&self, data: &[u8], meta: PacketMeta) -> bool {
        inject(&self.rx, data, meta)
    }

    /// See [`MemoryPort::take_tx`].
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        take(&self.tx).into_iter().map(|(p, _)| p).collect()
    }

    /// Like [`MemoryHandle::take_tx`], with the metadata (the `now` the
    /// packets were sent at).
    pub fn take_tx_with_meta(&self) -> Vec<(Vec<u8>, PacketMeta)> {
        take(&self.tx)
    }

    /// Packets waiting in the port's receive queue.
    pub fn rx_queued(&self) -> usize {
        lock(&self.rx).pkts.len()
    }

    /// Packets the port sent that are still queued.
    pub fn tx_queued(&self) -> usize {
        lock(&self.tx).pkts.len()
    }
}

#[cfg(test)]
mod tests;

//! [`AfPacketPort`]: a [`Port`] on a live interface through an AF_PACKET
//! socket with a TPACKET_V3 receive ring.

use std::cell::Cell;
use std::fmt;

use megaflow::port::{PacketBatch, Port, PortError, PortStats, MAX_FRAME_LEN};
use megaflow::Timestamp;

use crate::ring::{MappedRx, RxCursor, TxRing, FRAME_HDR_LEN, TX_DATA_OFF};
use crate::sys::{self, Mapping, PacketSocket};
use crate::tx::send_mmsg;
use crate::NetdevError;

/// How [`AfPacketPort::send_batch`](Port::send_batch) transmits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TxMode {
    /// One `sendmmsg` call per batch (per 64 frames). No extra memory, no
    /// length limit beyond the MTU. The default: on a veth pair (2 cores,
    /// kernel 6.18, 64-byte frames) it sent ~0.81 Mpps against ~0.65 Mpps
    /// for the TX ring.
    #[default]
    Sendmmsg,
    /// A PACKET_TX_RING of `tx_frame_count` slots of `tx_frame_size` bytes;
    /// frames are copied into the ring and one zero-length `send()` per
    /// batch kicks it. Frames longer than a slot holds are dropped.
    Ring,
}

/// Ring geometry and options of an [`AfPacketPort`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Bytes per receive block: a power of two, a multiple of the page size.
    pub block_size: u32,
    /// Number of receive blocks.
    pub block_count: u32,
    /// Nominal frame size (TPACKET_V3 packs frames of any length into the
    /// blocks; the kernel only checks it): a multiple of 16, at least the
    /// frame header, at most `block_size`.
    pub frame_size: u32,
    /// Milliseconds after which the kernel hands over a block that is not
    /// full (`tp_retire_blk_tov`); bounds receive latency at low rates. 0
    /// lets the kernel pick (several ms).
    pub retire_timeout_ms: u32,
    /// Transmit method.
    pub tx_mode: TxMode,
    /// Bytes per TX ring slot (`TxMode::Ring` only): a multiple of 16.
    pub tx_frame_size: u32,
    /// Number of TX ring slots (`TxMode::Ring` only).
    pub tx_frame_count: u32,
    /// Put the interface in promiscuous mode while the port is open.
    pub promiscuous: bool,
}

impl Default for AfPacketConfig {
    /// 32 blocks × 256 KiB (8 MiB: about 58 000 64-byte frames or 5 000
    /// 1 500-byte frames), 1 ms retire timeout, `sendmmsg` transmit,
    /// promiscuous.
    fn default() -> Self {
        AfPacketConfig {
            block_size: 256 * 1024,
            block_count: 32,
            frame_size: 2048,
            retire_timeout_ms: 1,
            tx_mode: TxMode::default(),
            tx_frame_size: 2048,
            tx_frame_count: 256,
            promiscuous: true,
        }
    }
}

/// Geometry derived from a validated [`AfPacketConfig`].
#[derive(Debug)]
struct Geometry {
    rx: libc::tpacket_req3,
    tx: Option<libc::tpacket_req3>,
}

impl AfPacketConfig {
    fn geometry(&self, ifname: &str) -> Result<Geometry, NetdevError> {
        let bad = |reason: String| NetdevError::Config {
            ifname: ifname.to_owned(),
            reason,
        };
        let page = sys::page_size() as u32;
        let bs = self.block_size;
        if bs < page || !bs.is_power_of_two() {
            return Err(bad(format!(
                "block_size {bs} must be a power of two of at least the page size {page}"
            )));
        }
        let fs = self.frame_size;
        if fs % 16 != 0 || (fs as usize) < FRAME_HDR_LEN + 64 || fs > bs {
            return Err(bad(format!(
                "frame_size {fs} must be a multiple of 16 between {} and block_size {bs}",
                FRAME_HDR_LEN + 64
            )));
        }
        let nr = self.block_count;
        if nr == 0 || u64::from(nr) * u64::from(bs) > 1 << 30 {
            return Err(bad(format!(
                "block_count {nr} must be at least 1 and the ring at most 1 GiB"
            )));
        }
        let rx = libc::tpacket_req3 {
            tp_block_size: bs,
            tp_block_nr: nr,
            tp_frame_size: fs,
            tp_frame_nr: (bs / fs) * nr,
            tp_retire_blk_tov: self.retire_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let tx = match self.tx_mode {
            TxMode::Sendmmsg => None,
            TxMode::Ring => {
                let tfs = self.tx_frame_size;
                if tfs % 16 != 0 || (tfs as usize) < TX_DATA_OFF + 60 || tfs > 1 << 20 {
                    return Err(bad(format!(
                        "tx_frame_size {tfs} must be a multiple of 16 between {} and 1 MiB",
                        TX_DATA_OFF + 60
                    )));
                }
                let tbs = tfs.next_power_of_two().max(page);
                let per_block = tbs / tfs;
                let count = self.tx_frame_count;
                if count == 0 || count > 1 << 16 {
                    return Err(bad(format!(
                        "tx_frame_count {count} must be between 1 and 65536"
                    )));
                }
                let tnr = count.div_ceil(per_block);
                // The kernel wants the TPACKET_V3-only fields zero for TX.
                Some(libc::tpacket_req3 {
                    tp_block_size: tbs,
                    tp_block_nr: tnr,
                    tp_frame_size: tfs,
                    tp_frame_nr: tnr * per_block,
                    tp_retire_blk_tov: 0,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                })
            }
        };
        Ok(Geometry { rx, tx })
    }
}

/// A [`Port`] on a live Linux interface: AF_PACKET, TPACKET_V3 receive ring,
/// batched transmit. See the crate documentation.
///
/// Receive copies up to `BATCH_SIZE` frames per call out of the ring into
/// the caller's batch, with the kernel timestamps; frames whose VLAN tag the
/// kernel moved to metadata get it back (TPID as reported, else 0x8100);
/// truncated frames and frames the kernel dropped because the ring was full
/// count as `rx_dropped`. Frames this socket sends are not received.
pub struct AfPacketPort {
    name: String,
    // Field order matters: the mapping is unmapped before the socket closes.
    map: Mapping,
    sock: PacketSocket,
    rx_block_size: usize,
    rx_block_nr: usize,
    rx: RxCursor,
    tx_ring: Option<TxRing>,
    stats: PortStats,
    /// Frames the kernel could not put in the ring (PACKET_STATISTICS,
    /// which resets on read, so it is accumulated here).
    kernel_drops: Cell<u64>,
}

impl fmt::Debug for AfPacketPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfPacketPort")
            .field("name", &self.name)
            .field("fd", &self.sock.raw())
            .field("ring_bytes", &self.map.len())
            .field("tx_ring", &self.tx_ring.is_some())
            .finish()
    }
}

impl AfPacketPort {
    /// Opens `ifname` with `cfg`.
    pub fn open(ifname: &str, cfg: AfPacketConfig) -> Result<AfPacketPort, NetdevError> {
        let geo = cfg.geometry(ifname)?;
        let err = |step: &'static str| move |e| NetdevError::os(ifname, step, e);
        let ifindex = sys::if_index(ifname).map_err(err("if_nametoindex"))?;
        let sock = PacketSocket::new().map_err(err("socket(AF_PACKET, SOCK_RAW)"))?;
        sock.set_opt(
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )
        .map_err(err("setsockopt(PACKET_VERSION, TPACKET_V3)"))?;
        sock.set_opt(libc::PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(err("setsockopt(PACKET_IGNORE_OUTGOING)"))?;
        sock.set_opt(libc::PACKET_QDISC_BYPASS, &1i32)
            .map_err(err("setsockopt(PACKET_QDISC_BYPASS)"))?;
        if geo.tx.is_some() {
            // Skip malformed TX frames instead of stalling the ring on them
            // (must be set before any ring exists).
            sock.set_opt(libc::PACKET_LOSS, &1i32)
                .map_err(err("setsockopt(PACKET_LOSS)"))?;
        }
        sock.set_opt(libc::PACKET_RX_RING, &geo.rx)
            .map_err(err("setsockopt(PACKET_RX_RING)"))?;
        let mut map_len = geo.rx.tp_block_size as usize * geo.rx.tp_block_nr as usize;
        let mut tx_ring = None;
        if let Some(tx) = geo.tx {
            sock.set_opt(libc::PACKET_TX_RING, &tx)
                .map_err(err("setsockopt(PACKET_TX_RING)"))?;
            tx_ring = Some(TxRing {
                base: map_len,
                block_size: tx.tp_block_size as usize,
                frame_size: tx.tp_frame_size as usize,
                frames_per_block: (tx.tp_block_size / tx.tp_frame_size) as usize,
                frame_nr: tx.tp_frame_nr as usize,
                head: 0,
            });
            map_len += tx.tp_block_size as usize * tx.tp_block_nr as usize;
        }
        let map = Mapping::new(&sock, map_len).map_err(err("mmap(ring)"))?;
        sock.bind(ifindex, sys::ETH_P_ALL_BE).map_err(err("bind"))?;
        if cfg.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as i32,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            sock.set_opt(libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(err("setsockopt(PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC)"))?;
        }
        Ok(AfPacketPort {
            name: ifname.to_owned(),
            map,
            sock,
            rx_block_size: geo.rx.tp_block_size as usize,
            rx_block_nr: geo.rx.tp_block_nr as usize,
            rx: RxCursor::default(),
            tx_ring,
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
        })
    }

    /// Opens `ifname` with the default configuration.
    pub fn open_default(ifname: &str) -> Result<AfPacketPort, NetdevError> {
        Self::open(ifname, AfPacketConfig::default())
    }

    /// The transmit method in use.
    pub fn tx_mode(&self) -> TxMode {
        if self.tx_ring.is_some() {
            TxMode::Ring
        } else {
            TxMode::Sendmmsg
        }
    }

    fn io_err(&self, context: &str, source: std::io::Error) -> PortError {
        PortError::Io {
            port: self.name.clone(),
            context: context.to_owned(),
            source,
        }
    }

    fn send_ring(&mut self, pkts: &[&[u8]]) -> Result<usize, PortError> {
        let Some(ring) = self.tx_ring.as_mut() else {
            return Ok(0);
        };
        let max = ring.max_len().min(MAX_FRAME_LEN);
        let mut queued = 0;
        for (i, p) in pkts.iter().enumerate() {
            if p.len() > max {
                self.stats.tx_dropped += 1;
                continue;
            }
            if !ring.push(&self.map, p) {
                // Ring full: the device is behind; drop the rest.
                self.stats.tx_dropped += (pkts.len() - i) as u64;
                break;
            }
            queued += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.len() as u64;
        }
        loop {
            match self.sock.kick() {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Queued frames stay in the ring and go with the next kick.
                Err(e) if sys::is_queue_full(&e) || sys::is_bad_frame(&e) => break,
                Err(e) => return Err(self.io_err("send(PACKET_TX_RING)", e)),
            }
        }
        Ok(queued)
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        let ring = MappedRx {
            map: &self.map,
            block_size: self.rx_block_size,
            block_nr: self.rx_block_nr,
        };
        Ok(self.rx.fill(&ring, batch, &mut self.stats))
    }

    fn send_batch(&mut self, pkts: &[&[u8]], _now: Timestamp) -> Result<usize, PortError> {
        if self.tx_ring.is_some() {
            return self.send_ring(pkts);
        }
        match send_mmsg(&self.sock, pkts, &mut self.stats) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.io_err("sendmmsg", e)),
        }
    }

    fn stats(&self) -> PortStats {
        if let Ok(st) = self.sock.stats_v3() {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(st.tp_drops));
        }
        let mut s = self.stats;
        s.rx_dropped += self.kernel_drops.get();
        s
    }

    fn poll_fd(&self) -> Option<i32> {
        Some(self.sock.raw())
    }
}

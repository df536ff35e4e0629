//! The TPACKET_V3 ring protocols, in safe code on top of [`crate::sys`].
//!
//! Receive: the ring is `block_nr` blocks of `block_size` bytes. The kernel
//! fills one block at a time with variable-length frames (each a
//! `tpacket3_hdr` followed, at `tp_mac`, by the frame bytes; `tp_next_offset`
//! links them) and hands the block over by setting its `block_status` to
//! `TP_STATUS_USER` when it is full or the retire timeout expires. User space
//! walks the blocks in ring order, and gives each back with
//! `TP_STATUS_KERNEL` once all its frames are consumed. [`RxCursor`] keeps the
//! position inside a partially consumed block across receive calls.
//!
//! Transmit: the TX ring is fixed-size frames. User space fills the next
//! `TP_STATUS_AVAILABLE` frame (header fields `tp_len`/`tp_snaplen`, frame
//! bytes at [`TX_DATA_OFF`]), marks it `TP_STATUS_SEND_REQUEST`, and a
//! zero-length `send()` makes the kernel transmit all marked frames in ring
//! order; it marks each available again once the device has it.

use std::mem::{offset_of, size_of};

use megaflow::port::{PacketBatch, PacketMeta, PortStats};
use megaflow::Timestamp;

use crate::sys::Mapping;

// Offsets inside `struct tpacket_block_desc` (block header).
const BLK_HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BLK_STATUS: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLK_NUM_PKTS: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLK_FIRST: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
/// Bytes of a block header that must be present.
const BLK_HDR_LEN: usize = BLK_FIRST + 4;

// Offsets inside `struct tpacket3_hdr` (frame header).
const F_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const F_SEC: usize = offset_of!(libc::tpacket3_hdr, tp_sec);
const F_NSEC: usize = offset_of!(libc::tpacket3_hdr, tp_nsec);
const F_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const F_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const F_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const F_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const F_HV1: usize = offset_of!(libc::tpacket3_hdr, hv1);
const F_VLAN_TCI: usize = F_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const F_VLAN_TPID: usize = F_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
/// Size of `struct tpacket3_hdr`.
pub(crate) const FRAME_HDR_LEN: usize = size_of::<libc::tpacket3_hdr>();

/// Where a TX frame's bytes start: `TPACKET3_HDRLEN - sizeof(sockaddr_ll)`,
/// i.e. the frame header rounded up to `TPACKET_ALIGNMENT`.
pub(crate) const TX_DATA_OFF: usize =
    (FRAME_HDR_LEN + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);

/// The 802.1Q tag protocol identifier used when the kernel does not report one.
pub const ETH_P_8021Q: u16 = 0x8100;

fn rd_u16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn rd_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// `(num_pkts, offset_to_first_pkt)` of a block.
pub(crate) fn block_header(blk: &[u8]) -> Option<(u32, u32)> {
    if blk.len() < BLK_HDR_LEN {
        return None;
    }
    Some((rd_u32(blk, BLK_NUM_PKTS)?, rd_u32(blk, BLK_FIRST)?))
}

/// One received frame, parsed from its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxFrame<'a> {
    /// The captured bytes (`tp_snaplen` of them).
    pub data: &'a [u8],
    /// The length on the wire (`tp_len`).
    pub wire_len: u32,
    pub ts_ns: u64,
    /// `(tpid, tci)` of a VLAN tag the kernel stripped.
    pub vlan: Option<(u16, u16)>,
    /// `TP_STATUS_CSUMNOTREADY`: the sender left the TCP/UDP checksum to
    /// a NIC (a veth peer with TX checksum offload on); it holds only the
    /// pseudo-header's sum.
    pub partial_csum: bool,
    /// Offset of the next frame from this one (0 for the last).
    pub next_offset: u32,
}

/// Parses the frame whose header is at `off` in `blk`. `None` if the header
/// or the data it points to is out of the block's bounds.
pub(crate) fn parse_frame(blk: &[u8], off: usize) -> Option<RxFrame<'_>> {
    let hdr = blk.get(off..off.checked_add(FRAME_HDR_LEN)?)?;
    let snaplen = rd_u32(hdr, F_SNAPLEN)? as usize;
    let mac = off + rd_u16(hdr, F_MAC)? as usize;
    let data = blk.get(mac..mac.checked_add(snaplen)?)?;
    let status = rd_u32(hdr, F_STATUS)?;
    let vlan = if status & libc::TP_STATUS_VLAN_VALID != 0 {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            rd_u16(hdr, F_VLAN_TPID)?
        } else {
            ETH_P_8021Q
        };
        Some((tpid, rd_u32(hdr, F_VLAN_TCI)? as u16))
    } else {
        None
    };
    let sec = u64::from(rd_u32(hdr, F_SEC)?);
    let nsec = u64::from(rd_u32(hdr, F_NSEC)?);
    Some(RxFrame {
        data,
        wire_len: rd_u32(hdr, F_LEN)?,
        ts_ns: sec * 1_000_000_000 + nsec,
        vlan,
        partial_csum: status & libc::TP_STATUS_CSUMNOTREADY != 0,
        next_offset: rd_u32(hdr, F_NEXT)?,
    })
}

/// Writes `frame` with an 802.1Q-style tag (`tpid`, `tci`) inserted after the
/// two MAC addresses into `out` (cleared first). A frame too short to hold
/// the addresses is copied as it is.
pub fn insert_vlan_tag(out: &mut Vec<u8>, frame: &[u8], tpid: u16, tci: u16) {
    out.clear();
    if frame.len() < 12 {
        out.extend_from_slice(frame);
        return;
    }
    out.reserve(frame.len() + 4);
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&tpid.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
}

/// The receive side of a ring, as [`RxCursor`] sees it.
pub(crate) trait BlockRing {
    fn block_nr(&self) -> usize;
    /// True when user space owns block `b`.
    fn is_user(&self, b: usize) -> bool;
    /// Calls `f` with the bytes of block `b`, which user space owns.
    fn with_block<R>(&self, b: usize, f: impl FnOnce(&[u8]) -> R) -> R;
    /// Gives block `b` back to the kernel.
    fn release(&self, b: usize);
}

/// The mmap'd receive ring: blocks at the start of a [`Mapping`].
pub(crate) struct MappedRx<'a> {
    pub map: &'a Mapping,
    pub block_size: usize,
    pub block_nr: usize,
}

impl BlockRing for MappedRx<'_> {
    fn block_nr(&self) -> usize {
        self.block_nr
    }

    fn is_user(&self, b: usize) -> bool {
        self.map.load_status(b * self.block_size + BLK_STATUS) & libc::TP_STATUS_USER != 0
    }

    fn with_block<R>(&self, b: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: callers only ask for blocks `is_user` reported as owned by
        // user space, and the slice cannot escape `f`, which returns before
        // `release` can store to the block's status word.
        let blk = unsafe { self.map.region(b * self.block_size, self.block_size) };
        f(blk)
    }

    fn release(&self, b: usize) {
        self.map
            .store_status(b * self.block_size + BLK_STATUS, libc::TP_STATUS_KERNEL);
    }
}

/// Where receive is in the ring.
#[derive(Debug, Default)]
pub(crate) struct RxCursor {
    block: usize,
    /// The current block is owned by us and partially consumed.
    open: bool,
    next_pkt: u32,
    num_pkts: u32,
    off: usize,
    /// Scratch buffer for re-tagging VLAN frames.
    scratch: Vec<u8>,
}

impl RxCursor {
    fn advance(&mut self, ring: &impl BlockRing) {
        ring.release(self.block);
        self.open = false;
        self.block = (self.block + 1) % ring.block_nr().max(1);
    }

    /// Clears `batch` and fills it with up to its capacity of frames from
    /// `ring`, counting in `stats`. Returns the number of packets.
    pub(crate) fn fill(
        &mut self,
        ring: &impl BlockRing,
        batch: &mut PacketBatch,
        stats: &mut PortStats,
    ) -> usize {
        batch.clear();
        while !batch.is_full() {
            if !self.open {
                if !ring.is_user(self.block) {
                    break;
                }
                match ring.with_block(self.block, block_header) {
                    Some((n, first)) => {
                        self.num_pkts = n;
                        self.off = first as usize;
                        self.next_pkt = 0;
                        self.open = true;
                    }
                    None => {
                        self.advance(ring);
                        continue;
                    }
                }
            }
            if self.next_pkt >= self.num_pkts {
                self.advance(ring);
                continue;
            }
            let scratch = &mut self.scratch;
            let off = self.off;
            let next = ring.with_block(self.block, |blk| {
                let f = parse_frame(blk, off)?;
                if (f.data.len() as u64) < u64::from(f.wire_len) {
                    stats.rx_dropped += 1;
                } else {
                    let meta = PacketMeta::new(Timestamp(f.ts_ns));
                    let pushed = match f.vlan {
                        Some((tpid, tci)) => {
                            insert_vlan_tag(scratch, f.data, tpid, tci);
                            batch.push(scratch, meta)
                        }
                        None => batch.push(f.data, meta),
                    };
                    if pushed {
                        stats.rx_packets += 1;
                        let n = batch.len() - 1;
                        if f.partial_csum {
                            // Completed here, as the NIC would have: the
                            // switch forwards it to ports that will not.
                            if let Some(p) = batch.get_mut(n) {
                                megaflow::actions::edit::complete_l4_checksum(p);
                            }
                        }
                        stats.rx_bytes += batch.get(n).map_or(0, |p| p.data.len() as u64);
                    } else {
                        stats.rx_dropped += 1;
                    }
                }
                Some(f.next_offset)
            });
            self.next_pkt += 1;
            match next {
                Some(0) if self.next_pkt < self.num_pkts => {
                    // Broken chain: the rest of the block cannot be found.
                    stats.rx_dropped += u64::from(self.num_pkts - self.next_pkt);
                    self.advance(ring);
                }
                Some(step) => self.off += step as usize,
                None => {
                    // Corrupt frame header: it and the rest are lost.
                    stats.rx_dropped += u64::from(self.num_pkts - self.next_pkt + 1);
                    self.advance(ring);
                }
            }
        }
        // Hand a fully consumed block back now rather than on the next call.
        if self.open && self.next_pkt >= self.num_pkts {
            self.advance(ring);
        }
        batch.len()
    }
}

/// The mmap'd transmit ring: fixed-size frames after the receive ring.
#[derive(Debug)]
pub(crate) struct TxRing {
    /// Offset of the TX ring in the mapping.
    pub base: usize,
    pub block_size: usize,
    pub frame_size: usize,
    pub frames_per_block: usize,
    pub frame_nr: usize,
    /// Next frame to fill.
    pub head: usize,
}

impl TxRing {
    fn frame_off(&self, i: usize) -> usize {
        self.base
            + (i / self.frames_per_block) * self.block_size
            + (i % self.frames_per_block) * self.frame_size
    }

    /// Longest frame a slot holds.
    pub(crate) fn max_len(&self) -> usize {
        self.frame_size - TX_DATA_OFF
    }

    /// Queues `pkt` in the next frame. `false` if that frame is still owned
    /// by the kernel (ring full). `pkt` must be at most [`TxRing::max_len`].
    pub(crate) fn push(&mut self, map: &Mapping, pkt: &[u8]) -> bool {
        let off = self.frame_off(self.head);
        let status = map.load_status(off + F_STATUS);
        if status & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
            return false;
        }
        let len = (pkt.len() as u32).to_ne_bytes();
        // SAFETY: the frame's status is neither SEND_REQUEST nor SENDING, so
        // the kernel is done with it and user space owns it; none of these
        // writes covers the status word at F_STATUS (20..24), and the data
        // fits the slot (checked by the caller against `max_len`).
        unsafe {
            map.write(off + F_NEXT, &0u32.to_ne_bytes());
            map.write(off + F_SNAPLEN, &len);
            map.write(off + F_LEN, &len);
            map.write(off + TX_DATA_OFF, pkt);
        }
        map.store_status(off + F_STATUS, libc::TP_STATUS_SEND_REQUEST);
        self.head = (self.head + 1) % self.frame_nr;
        true
    }
}

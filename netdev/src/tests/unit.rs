//! Unit tests: VLAN re-tagging, frame parsing and the receive cursor on a
//! synthetic ring, configuration checks, error messages.

use std::cell::{Cell, RefCell};
use std::mem::offset_of;

use megaflow::port::{PacketBatch, PortError, PortStats, BATCH_SIZE};

use crate::ring::{parse_frame, BlockRing, RxCursor, FRAME_HDR_LEN};
use crate::{insert_vlan_tag, AfPacketConfig, AfPacketPort, AfPacketTx, NetdevError, TxMode};

const BLOCK: usize = 4096;
const FIRST: usize = 48;

/// A frame to put in a synthetic block.
struct Fake {
    data: Vec<u8>,
    wire_len: u32,
    vlan: Option<(Option<u16>, u16)>,
    ts: (u32, u32),
    /// TP_STATUS_CSUMNOTREADY.
    partial: bool,
}

fn fake(seq: u8, len: usize) -> Fake {
    let mut data = vec![seq; len];
    data[12] = 0x08;
    data[13] = 0x00;
    Fake {
        wire_len: len as u32,
        data,
        vlan: None,
        ts: (1, u32::from(seq)),
        partial: false,
    }
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_ne_bytes());
}

/// Lays out a block the way the kernel does: block header, then frames
/// (header, then data at `tp_mac`) linked by `tp_next_offset`.
fn block(frames: &[Fake]) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    let hdr = offset_of!(libc::tpacket_block_desc, hdr);
    put_u32(
        &mut b,
        hdr + offset_of!(libc::tpacket_hdr_v1, num_pkts),
        frames.len() as u32,
    );
    put_u32(
        &mut b,
        hdr + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt),
        FIRST as u32,
    );
    let mut off = FIRST;
    let mac = 80usize;
    for (i, f) in frames.iter().enumerate() {
        let next = (mac + f.data.len()).next_multiple_of(16);
        let last = i + 1 == frames.len();
        put_u32(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_next_offset),
            if last { 0 } else { next as u32 },
        );
        put_u32(&mut b, off + offset_of!(libc::tpacket3_hdr, tp_sec), f.ts.0);
        put_u32(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_nsec),
            f.ts.1,
        );
        put_u32(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_snaplen),
            f.data.len() as u32,
        );
        put_u32(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_len),
            f.wire_len,
        );
        put_u16(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_mac),
            mac as u16,
        );
        let mut status = libc::TP_STATUS_USER;
        if f.partial {
            status |= libc::TP_STATUS_CSUMNOTREADY;
        }
        if let Some((tpid, tci)) = f.vlan {
            status |= libc::TP_STATUS_VLAN_VALID;
            let hv1 = off + offset_of!(libc::tpacket3_hdr, hv1);
            put_u32(
                &mut b,
                hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci),
                u32::from(tci),
            );
            if let Some(tpid) = tpid {
                status |= libc::TP_STATUS_VLAN_TPID_VALID;
                put_u16(
                    &mut b,
                    hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid),
                    tpid,
                );
            }
        }
        put_u32(
            &mut b,
            off + offset_of!(libc::tpacket3_hdr, tp_status),
            status,
        );
        b[off + mac..off + mac + f.data.len()].copy_from_slice(&f.data);
        off += next;
    }
    assert!(off <= BLOCK, "test block overflows");
    b
}

/// A ring in plain memory: blocks and who owns them.
struct FakeRing {
    blocks: RefCell<Vec<Vec<u8>>>,
    user: Vec<Cell<bool>>,
    releases: Cell<usize>,
}

impl FakeRing {
    fn new(nr: usize) -> FakeRing {
        FakeRing {
            blocks: RefCell::new(vec![vec![0; BLOCK]; nr]),
            user: (0..nr).map(|_| Cell::new(false)).collect(),
            releases: Cell::new(0),
        }
    }

    /// The kernel fills block `b` and hands it over.
    fn fill(&self, b: usize, frames: &[Fake]) {
        assert!(!self.user[b].get(), "filling a block user space owns");
        self.blocks.borrow_mut()[b] = block(frames);
        self.user[b].set(true);
    }
}

impl BlockRing for FakeRing {
    fn block_nr(&self) -> usize {
        self.user.len()
    }
    fn is_user(&self, b: usize) -> bool {
        self.user[b].get()
    }
    fn with_block<R>(&self, b: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        assert!(self.user[b].get(), "reading a block the kernel owns");
        f(&self.blocks.borrow()[b])
    }
    fn release(&self, b: usize) {
        assert!(self.user[b].get(), "releasing a block twice");
        self.user[b].set(false);
        self.releases.set(self.releases.get() + 1);
    }
}

fn datas(batch: &PacketBatch) -> Vec<Vec<u8>> {
    batch.iter().map(|p| p.data.to_vec()).collect()
}

#[test]
fn vlan_tag_is_inserted_after_the_addresses() {
    let frame: Vec<u8> = (0u8..20).collect();
    let mut out = vec![9, 9, 9];
    insert_vlan_tag(&mut out, &frame, 0x8100, 0x6064);
    let mut want: Vec<u8> = (0u8..12).collect();
    want.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]);
    want.extend(12u8..20);
    assert_eq!(out, want);
    insert_vlan_tag(&mut out, &[1, 2, 3], 0x8100, 1);
    assert_eq!(out, vec![1, 2, 3], "a runt is copied unchanged");
}

#[test]
fn parse_frame_rejects_out_of_bounds() {
    let b = block(&[fake(1, 60)]);
    let f = parse_frame(&b, FIRST).expect("frame parses");
    assert_eq!(f.data.len(), 60);
    assert_eq!(f.ts_ns, 1_000_000_001);
    assert_eq!(f.next_offset, 0);
    assert!(parse_frame(&b, BLOCK - FRAME_HDR_LEN + 1).is_none());
    assert!(
        parse_frame(&b[..FIRST + 100], FIRST).is_none(),
        "data past the end"
    );
    assert!(parse_frame(&b, usize::MAX - 3).is_none());
}

#[test]
fn cursor_keeps_its_place_in_a_partially_consumed_block() {
    let ring = FakeRing::new(4);
    let a: Vec<Fake> = (0..20).map(|i| fake(i, 60)).collect();
    let b: Vec<Fake> = (20..40).map(|i| fake(i, 64)).collect();
    let want: Vec<Vec<u8>> = a.iter().chain(b.iter()).map(|f| f.data.clone()).collect();
    ring.fill(0, &a);
    ring.fill(1, &b);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();

    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), BATCH_SIZE);
    assert_eq!(datas(&batch), want[..32].to_vec());
    assert!(!ring.is_user(0), "block 0 consumed and returned");
    assert!(ring.is_user(1), "block 1 still being read");
    assert_eq!(batch.get(0).map(|p| p.meta.ts.0), Some(1_000_000_000));

    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 8);
    assert_eq!(datas(&batch), want[32..].to_vec());
    assert!(!ring.is_user(1), "block 1 returned once fully read");
    assert_eq!(ring.releases.get(), 2);

    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 0);
    assert_eq!(stats.rx_packets, 40);
    assert_eq!(stats.rx_bytes, 20 * 60 + 20 * 64);
    assert_eq!(stats.rx_dropped, 0);
}

#[test]
fn a_frame_whose_checksum_the_sender_left_to_a_nic_is_completed_on_receive() {
    use megaflow::frame::{FrameSpec, L4};
    let good = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(40000, 22)).build();
    let mut partial = good.clone();
    // The checksum field (at 14 + 20 + 16) holding something else.
    partial[50] ^= 0x5a;
    let ring = FakeRing::new(1);
    let frames = [
        Fake {
            partial: true,
            ..fake(0, 14)
        },
        Fake {
            partial: false,
            ..fake(0, 14)
        },
    ]
    .map(|f| Fake {
        wire_len: partial.len() as u32,
        data: partial.clone(),
        ..f
    });
    ring.fill(0, &frames);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();
    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 2);
    // Completed when the status says so; left as it came otherwise.
    assert_eq!(datas(&batch), vec![good, partial]);
}

#[test]
fn cursor_wraps_around_the_ring() {
    let ring = FakeRing::new(2);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();
    for round in 0u8..5 {
        let b = usize::from(round % 2);
        ring.fill(b, &[fake(round, 70)]);
        assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 1);
        assert_eq!(batch.get(0).map(|p| p.data[0]), Some(round));
    }
    assert_eq!(ring.releases.get(), 5);
}

#[test]
fn cursor_retags_vlan_and_counts_truncated_frames() {
    let ring = FakeRing::new(2);
    let mut tagged = fake(1, 60);
    tagged.vlan = Some((Some(0x88a8), 0x0123));
    let mut default_tpid = fake(2, 60);
    default_tpid.vlan = Some((None, 5));
    let mut truncated = fake(3, 60);
    truncated.wire_len = 1500;
    let plain = fake(4, 60);
    let mut want1 = Vec::new();
    insert_vlan_tag(&mut want1, &tagged.data, 0x88a8, 0x0123);
    let mut want2 = Vec::new();
    insert_vlan_tag(&mut want2, &default_tpid.data, 0x8100, 5);
    let want = vec![want1, want2, plain.data.clone()];
    ring.fill(0, &[tagged, default_tpid, truncated, plain]);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();
    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 3);
    assert_eq!(datas(&batch), want);
    assert_eq!(stats.rx_dropped, 1);
    assert_eq!(stats.rx_packets, 3);
    assert_eq!(stats.rx_bytes, 64 + 64 + 60);
}

#[test]
fn cursor_survives_a_corrupt_block() {
    let ring = FakeRing::new(2);
    ring.fill(0, &[fake(1, 60), fake(2, 60)]);
    // Point the first frame's data far past the block.
    {
        let mut blocks = ring.blocks.borrow_mut();
        let off = FIRST + offset_of!(libc::tpacket3_hdr, tp_mac);
        blocks[0][off..off + 2].copy_from_slice(&60_000u16.to_ne_bytes());
    }
    ring.fill(1, &[fake(3, 60)]);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();
    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 1);
    assert_eq!(batch.get(0).map(|p| p.data[0]), Some(3));
    assert_eq!(stats.rx_dropped, 2);
    assert_eq!(ring.releases.get(), 2);
}

#[test]
fn cursor_stops_at_a_kernel_owned_block() {
    let ring = FakeRing::new(3);
    ring.fill(1, &[fake(9, 60)]);
    let mut cur = RxCursor::default();
    let mut batch = PacketBatch::new();
    let mut stats = PortStats::default();
    assert_eq!(cur.fill(&ring, &mut batch, &mut stats), 0);
    assert!(ring.is_user(1), "a later block is not skipped to");
}

#[test]
fn config_is_checked_before_any_syscall() {
    let bad = [
        AfPacketConfig {
            block_size: 100_000,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            frame_size: 1000,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            block_count: 0,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            tx_mode: TxMode::Ring,
            tx_frame_size: 64,
            ..AfPacketConfig::default()
        },
    ];
    for cfg in bad {
        let e = AfPacketPort::open("nd-cfg-test", cfg).expect_err("bad config accepted");
        assert!(matches!(e, NetdevError::Config { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("nd-cfg-test: bad configuration: "),
            "{e}"
        );
        let p: PortError = e.into();
        assert_eq!(p.port(), "nd-cfg-test");
    }
}

#[test]
fn open_errors_name_the_interface_and_the_step() {
    let e = AfPacketPort::open("ndnosuchif0", AfPacketConfig::default())
        .expect_err("no such interface");
    assert_eq!(e.ifname(), "ndnosuchif0");
    assert!(
        e.to_string().starts_with("ndnosuchif0: if_nametoindex: "),
        "{e}"
    );
    assert!(e.os_error().is_some());
    let e = AfPacketTx::open("ndnosuchif0").expect_err("no such interface");
    assert!(e.to_string().starts_with("ndnosuchif0: "), "{e}");
    let p: PortError = e.into();
    assert!(matches!(p, PortError::Io { .. }));
    assert!(p.to_string().contains("ndnosuchif0"), "{p}");
}

#[test]
fn handles_are_send() {
    fn is_send<T: Send>() {}
    is_send::<AfPacketPort>();
    is_send::<AfPacketTx>();
}

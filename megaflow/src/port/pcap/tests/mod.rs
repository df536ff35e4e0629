use std::borrow::Cow;
use std::io::Cursor;
use std::path::PathBuf;
use std::time::Duration;

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
use pcap_file::pcapng::PcapNgWriter;

use super::*;
use crate::port::BATCH_SIZE;

/// An Ethernet/IPv4/UDP frame of exactly `len` (>= 42) bytes, numbered `seq`.
fn udp_frame(len: usize, seq: u16) -> Vec<u8> {
    assert!(len >= 42);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let mut ip = [
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes());
    let sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(1000 + seq).to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&((len - 34) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(len, seq as u8);
    f
}

/// Reads until an error other than `PacketTooLarge`; returns the packets
/// and that error.
fn read_all<R: Read + Send>(r: &mut PcapReader<R>) -> (Vec<(Vec<u8>, PacketMeta)>, PortError) {
    let mut batch = PacketBatch::new();
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        match r.recv_batch(&mut batch) {
            Ok(n) => {
                assert_eq!(n, batch.len());
                assert!(n > 0, "a capture reader never idles");
                out.extend(batch.iter().map(|p| (p.data.to_vec(), p.meta)));
            }
            Err(PortError::PacketTooLarge { .. }) => {}
            Err(e) => return (out, e),
        }
    }
    panic!("reader never stopped");
}

fn reader(bytes: Vec<u8>) -> Result<PcapReader<Cursor<Vec<u8>>>, PortError> {
    PcapReader::from_reader("r", "mem.cap", Cursor::new(bytes))
}

fn bad_reason(e: &PortError) -> &str {
    match e {
        PortError::BadCapture { reason, port, file } => {
            assert_eq!((port.as_str(), file.as_str()), ("r", "mem.cap"));
            reason
        }
        other => panic!("expected BadCapture, got {other:?}"),
    }
}

/// A pcap file, written by `PcapWriter`, of `pkts` with their timestamps.
fn pcap_bytes(pkts: &[(Vec<u8>, u64)], snaplen: u32) -> Vec<u8> {
    let mut w = PcapWriter::new("w", "mem.pcap", Vec::new(), snaplen).unwrap();
    for (p, ts) in pkts {
        assert_eq!(w.send_batch(&[p], Timestamp(*ts)).unwrap(), 1);
    }
    w.into_inner().unwrap()
}

/// Packets of varied sizes (60 and 1514 included) and timestamps, some of
/// them not whole microseconds.
fn sample(n: usize) -> Vec<(Vec<u8>, u64)> {
    const SIZES: [usize; 9] = [60, 1514, 64, 61, 128, 342, 1000, 9018, 1513];
    (0..n)
        .map(|i| {
            let ts = 1_700_000_000 * NANOS_PER_SEC + i as u64 * 1_234_567 + (i as u64 % 3) * 7;
            (udp_frame(SIZES[i % SIZES.len()], i as u16), ts)
        })
        .collect()
}

#[test]
fn pcap_round_trip_in_memory() {
    let pkts = sample(2 * BATCH_SIZE + 7);
    // Send in batches, each packet with its own timestamp.
    let mut w = PcapWriter::new("w", "mem.pcap", Vec::new(), 0).unwrap();
    assert_eq!(w.snaplen(), MAX_FRAME_LEN as u32);
    let mut batch = PacketBatch::new();
    for chunk in pkts.chunks(BATCH_SIZE) {
        batch.clear();
        for (p, ts) in chunk {
            assert!(batch.push(p, PacketMeta::new(Timestamp(*ts))));
        }
        assert_eq!(w.send(&batch).unwrap(), chunk.len());
    }
    let s = w.stats();
    assert_eq!(s.tx_packets, pkts.len() as u64);
    assert_eq!(
        s.tx_bytes,
        pkts.iter().map(|(p, _)| p.len() as u64).sum::<u64>()
    );
    assert_eq!(
        w.recv_batch(&mut batch).unwrap(),
        0,
        "a writer receives nothing"
    );
    let bytes = w.into_inner().unwrap();

    let mut r = reader(bytes).unwrap();
    assert_eq!(r.format(), CaptureFormat::Pcap);
    let (got, end) = read_all(&mut r);
    assert!(end.is_eof(), "{end}");
    assert_eq!(got.len(), pkts.len());
    for (i, ((data, meta), (want, ts))) in got.iter().zip(&pkts).enumerate() {
        assert_eq!(data, want, "packet {i}");
        assert_eq!(meta.ts, Timestamp(*ts), "packet {i}");
        assert_eq!(meta.in_port, None);
    }
    let s = r.stats();
    assert_eq!((s.rx_packets, s.rx_dropped), (pkts.len() as u64, 0));
    assert!(r.is_finished());
    assert!(
        r.recv_batch(&mut batch).unwrap_err().is_eof(),
        "end of file is sticky"
    );
}

#[test]
fn writer_output_is_standard_pcap() {
    let pkts = sample(5);
    let bytes = pcap_bytes(&pkts, 0);
    // Read back with pcap-file's own validating reader.
    let mut r = pcap_file::pcap::PcapReader::new(Cursor::new(bytes)).unwrap();
    let h = r.header();
    assert_eq!(h.datalink, DataLink::ETHERNET);
    assert_eq!(h.ts_resolution, TsResolution::NanoSecond);
    assert_eq!(
        (h.version_major, h.version_minor, h.snaplen),
        (2, 4, 65_535)
    );
    for (want, ts) in &pkts {
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(&p.data[..], &want[..]);
        assert_eq!(p.orig_len as usize, want.len());
        assert_eq!(p.timestamp, Duration::from_nanos(*ts));
    }
    assert!(r.next_packet().is_none());
}

/// A unique temporary file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str, ext: &str) -> Self {
        TempFile(
            std::env::temp_dir().join(format!("megaflow-port-{}-{test}.{ext}", std::process::id())),
        )
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn file_round_trip_flush_and_drop() {
    let tmp = TempFile::new("file_round_trip", "pcap");
    let pkts = sample(3);
    let mut w = PcapWriter::create(&tmp.0).unwrap();
    assert_eq!(w.name(), tmp.0.display().to_string());
    for (p, ts) in &pkts {
        w.send_batch(&[p], Timestamp(*ts)).unwrap();
    }
    w.flush().unwrap();
    let want_len = 24 + pkts.iter().map(|(p, _)| 16 + p.len()).sum::<usize>();
    assert_eq!(
        std::fs::metadata(&tmp.0).unwrap().len() as usize,
        want_len,
        "flush wrote everything"
    );
    // More packets, then drop without an explicit flush.
    w.send_batch(&[&pkts[0].0], Timestamp(pkts[0].1)).unwrap();
    drop(w);

    let mut r = PcapReader::open_named("replay0", &tmp.0).unwrap();
    assert_eq!(r.name(), "replay0");
    assert_eq!(r.file(), tmp.0.display().to_string());
    let (got, end) = read_all(&mut r);
    assert!(end.is_eof());
    assert_eq!(got.len(), 4, "the drop flushed the last packet");
    assert_eq!(got[3].0, pkts[0].0);
}

#[test]
fn open_errors_name_the_file() {
    let tmp = TempFile::new("open_errors", "pcap");
    let e = PcapReader::open(&tmp.0).unwrap_err();
    assert!(matches!(e, PortError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains(&tmp.0.display().to_string()), "{e}");

    std::fs::write(&tmp.0, b"GIF89a, definitely not a capture").unwrap();
    let e = PcapReader::open(&tmp.0).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&tmp.0.display().to_string()) && msg.contains("magic"),
        "{msg}"
    );

    let bad_dir = tmp.0.join("no/such/dir/out.pcap");
    let e = PcapWriter::create(&bad_dir).unwrap_err();
    assert!(
        matches!(e, PortError::Io { .. }) && e.to_string().contains("creating"),
        "{e}"
    );
}

#[test]
fn writer_truncates_to_snaplen() {
    let pkts = vec![(udp_frame(60, 0), 1), (udp_frame(200, 1), 2)];
    let bytes = pcap_bytes(&pkts, 100);
    let mut raw = pcap_file::pcap::PcapReader::new(Cursor::new(bytes.clone())).unwrap();
    assert_eq!(raw.header().snaplen, 100);
    // (pcap-file's validating `next_packet` wrongly rejects orig_len >
    // snaplen, which every truncated capture has: look at the raw record.)
    let _ = raw.next_raw_packet().unwrap().unwrap();
    let p = raw.next_raw_packet().unwrap().unwrap();
    assert_eq!((p.incl_len, p.orig_len, p.data.len()), (100, 200, 100));

    let (got, end) = read_all(&mut reader(bytes).unwrap());
    assert!(end.is_eof());
    assert_eq!(got[0].0, pkts[0].0);
    assert_eq!(got[1].0, pkts[1].0[..100].to_vec(), "delivered as captured");
}

#[test]
fn microsecond_pcap_from_libpcap_is_read() {
    // A microsecond pcap as libpcap writes it (big-endian here).
    let frame = udp_frame(60, 9);
    let mut bytes = Vec::new();
    PcapHeader {
        endianness: Endianness::Big,
        ..PcapHeader::default()
    }
    .write_to(&mut bytes)
    .unwrap();
    for v in [1_600_000_000u32, 250_000, 60, 60] {
        bytes.extend_from_slice(&v.to_be_bytes());
    }
    bytes.extend_from_slice(&frame);
    let (got, end) = read_all(&mut reader(bytes).unwrap());
    assert!(end.is_eof());
    assert_eq!(
        got,
        vec![(frame, PacketMeta::new(Timestamp(1_600_000_000_250_000_000)))]
    );
}

#[test]
fn oversized_record_is_skipped_and_reported() {
    let big = udp_frame(70_000, 1);
    let pkts = vec![(udp_frame(60, 0), 1), (big, 2), (udp_frame(61, 2), 3)];
    let mut r = reader(pcap_bytes(&pkts, 262_144)).unwrap();
    let mut b = PacketBatch::new();
    assert_eq!(r.recv_batch(&mut b).unwrap(), 1);
    assert_eq!(b.get(0).unwrap().data.len(), 60);
    match r.recv_batch(&mut b) {
        Err(PortError::PacketTooLarge { port, len, limit }) => {
            assert_eq!((port.as_str(), len, limit), ("r", 70_000, MAX_FRAME_LEN));
        }
        other => panic!("{other:?}"),
    }
    assert!(b.is_empty());
    assert_eq!(r.recv_batch(&mut b).unwrap(), 1);
    assert_eq!(b.get(0).unwrap().data.len(), 61);
    assert!(r.recv_batch(&mut b).unwrap_err().is_eof());
    let s = r.stats();
    assert_eq!((s.rx_packets, s.rx_bytes, s.rx_dropped), (2, 121, 1));
}

#[test]
fn empty_capture_and_sends_to_a_reader() {
    let mut r = reader(pcap_bytes(&[], 0)).unwrap();
    let mut b = PacketBatch::new();
    assert!(r.recv_batch(&mut b).unwrap_err().is_eof());
    assert!(r.recv_batch(&mut b).unwrap_err().is_eof());
    assert_eq!(
        r.send_batch(&[&[0u8; 60], &[0u8; 60]], Timestamp(0))
            .unwrap(),
        0
    );
    assert_eq!(r.stats().tx_dropped, 2);
}

#[test]
fn pcap_link_type_must_be_ethernet() {
    let mut bytes = Vec::new();
    PcapHeader {
        datalink: DataLink::LINUX_SLL,
        ..PcapHeader::default()
    }
    .write_to(&mut bytes)
    .unwrap();
    let e = reader(bytes).unwrap_err();
    match &e {
        PortError::UnsupportedLinkType {
            file,
            link_type,
            interface,
            ..
        } => {
            assert_eq!(
                (file.as_str(), link_type.as_str(), *interface),
                ("mem.cap", "LINUX_SLL (113)", None)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string().contains("mem.cap") && e.to_string().contains("LINUX_SLL"),
        "{e}"
    );
}

#[test]
fn garbage_and_truncated_pcap_files() {
    assert!(bad_reason(&reader(Vec::new()).unwrap_err()).contains("0 bytes is too short"));
    assert!(bad_reason(&reader(vec![0xa1, 0xb2]).unwrap_err()).contains("too short"));
    let e = reader(b"this is a text file, not a capture\n".to_vec()).unwrap_err();
    assert!(
        bad_reason(&e).contains("unknown magic number 74686973"),
        "{e}"
    );
    let e = reader(vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0]).unwrap_err();
    assert!(
        bad_reason(&e).contains("pcap file header: truncated"),
        "{e}"
    );

    let pkts = sample(3);
    let full = pcap_bytes(&pkts, 0);
    let third = 24 + 16 * 2 + pkts[0].0.len() + pkts[1].0.len();
    // Cut inside the third packet's data, then inside its record header.
    for cut in [full.len() - 10, third + 8] {
        let mut r = reader(full[..cut].to_vec()).unwrap();
        let (got, e) = read_all(&mut r);
        assert_eq!(got.len(), 2, "packets before the damage are delivered");
        assert!(bad_reason(&e).contains("packet record: truncated"), "{e}");
        assert!(e.to_string().contains("after 2 packets"), "{e}");
        let again = r.recv_batch(&mut PacketBatch::new()).unwrap_err();
        assert_eq!(again.to_string(), e.to_string(), "errors are sticky");
        assert!(r.is_finished());
    }
}

/// Builds pcapng files with pcap-file's writer.
struct Ng(PcapNgWriter<Vec<u8>>);

impl Ng {
    fn new(endianness: Endianness) -> Self {
        Ng(PcapNgWriter::with_endianness(Vec::new(), endianness).unwrap())
    }

    fn section(mut self, endianness: Endianness) -> Self {
        self.0
            .write_pcapng_block(SectionHeaderBlock {
                endianness,
                ..SectionHeaderBlock::default()
            })
            .unwrap();
        self
    }

    fn iface(
        mut self,
        link: DataLink,
        snaplen: u32,
        options: Vec<InterfaceDescriptionOption<'static>>,
    ) -> Self {
        self.0
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: link,
                snaplen,
                options,
            })
            .unwrap();
        self
    }

    /// An enhanced packet block; `raw_ts` in the interface's units.
    fn epb(mut self, interface_id: u32, raw_ts: u64, data: &[u8]) -> Self {
        self.0
            .write_pcapng_block(EnhancedPacketBlock {
                interface_id,
                // pcap-file writes the Duration's nanoseconds as the raw value.
                timestamp: Duration::from_nanos(raw_ts),
                original_len: data.len() as u32,
                data: Cow::Borrowed(data),
                options: vec![],
            })
            .unwrap();
        self
    }

    fn spb(mut self, data: &[u8]) -> Self {
        self.0
            .write_pcapng_block(SimplePacketBlock {
                original_len: data.len() as u32,
                data: Cow::Borrowed(data),
            })
            .unwrap();
        self
    }

    fn bytes(self) -> Vec<u8> {
        self.0.into_inner()
    }
}

fn ns_iface() -> Vec<InterfaceDescriptionOption<'static>> {
    vec![InterfaceDescriptionOption::IfTsResol(9)]
}

#[test]
fn pcapng_two_interfaces_give_in_port_hints() {
    for endianness in [Endianness::Little, Endianness::Big] {
        let frames: Vec<Vec<u8>> = (0..6u16)
            .map(|i| udp_frame(60 + 500 * i as usize, i))
            .collect();
        let mut ng = Ng::new(endianness)
            .iface(DataLink::ETHERNET, 0, ns_iface())
            .iface(DataLink::ETHERNET, 0, ns_iface());
        for (i, f) in frames.iter().enumerate() {
            ng = ng.epb(
                (i % 2) as u32,
                1_700_000_000_000_000_000 + i as u64 * 1001,
                f,
            );
        }
        let mut r = reader(ng.bytes()).unwrap();
        assert_eq!(r.format(), CaptureFormat::PcapNg);
        let (got, end) = read_all(&mut r);
        assert!(end.is_eof(), "{end}");
        assert_eq!(got.len(), frames.len());
        for (i, (data, meta)) in got.iter().enumerate() {
            assert_eq!(data, &frames[i], "{endianness:?} packet {i}");
            assert_eq!(meta.in_port, Some(PortNo((i % 2) as u32)));
            assert_eq!(
                meta.ts,
                Timestamp(1_700_000_000_000_000_000 + i as u64 * 1001)
            );
        }
    }
}

#[test]
fn pcapng_timestamp_resolution_and_offset() {
    let f = udp_frame(60, 0);
    let bytes = Ng::new(Endianness::Little)
        // Default resolution: microseconds.
        .iface(DataLink::ETHERNET, 0, vec![])
        // Milliseconds, 100 s offset.
        .iface(
            DataLink::ETHERNET,
            0,
            vec![
                InterfaceDescriptionOption::IfTsResol(3),
                InterfaceDescriptionOption::IfTsOffset(100),
            ],
        )
        // 2^-10 s.
        .iface(
            DataLink::ETHERNET,
            0,
            vec![InterfaceDescriptionOption::IfTsResol(0x80 | 10)],
        )
        .epb(0, 1_500_000, &f)
        .epb(1, 2_500, &f)
        .epb(2, 3 * 1024 + 512, &f)
        .bytes();
    let (got, end) = read_all(&mut reader(bytes).unwrap());
    assert!(end.is_eof());
    let ts: Vec<u64> = got.iter().map(|(_, m)| m.ts.0).collect();
    assert_eq!(ts, vec![1_500_000_000, 102_500_000_000, 3_500_000_000]);
}

#[test]
fn pcapng_simple_packets_and_sections() {
    let a = udp_frame(61, 1); // 3 bytes of block padding follow it
    let b = udp_frame(100, 2);
    let bytes = Ng::new(Endianness::Little)
        .iface(DataLink::ETHERNET, 0, ns_iface())
        .epb(0, 5_000, &a)
        .spb(&a)
        // A new section (big-endian) forgets the interfaces of the first.
        .section(Endianness::Big)
        .iface(DataLink::ETHERNET, 64, vec![])
        .epb(0, 7, &b)
        .spb(&b)
        .bytes();
    let (got, end) = read_all(&mut reader(bytes).unwrap());
    assert!(end.is_eof(), "{end}");
    let want = vec![
        (
            a.clone(),
            PacketMeta::with_in_port(Timestamp(5_000), PortNo(0)),
        ),
        (
            a.clone(),
            PacketMeta::with_in_port(Timestamp(5_000), PortNo(0)),
        ),
        (
            b.clone(),
            PacketMeta::with_in_port(Timestamp(7_000), PortNo(0)),
        ),
        // Simple packet block: captured length min(original, snaplen 64).
        (
            b[..64].to_vec(),
            PacketMeta::with_in_port(Timestamp(7_000), PortNo(0)),
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn pcapng_link_type_must_be_ethernet() {
    let f = udp_frame(60, 0);
    let bytes = Ng::new(Endianness::Little)
        .iface(DataLink::ETHERNET, 0, vec![])
        .iface(DataLink::LINUX_SLL, 0, vec![])
        .epb(0, 1, &f)
        .epb(1, 2, &f)
        .bytes();
    let mut r = reader(bytes).unwrap();
    let (got, e) = read_all(&mut r);
    assert_eq!(got.len(), 1);
    match &e {
        PortError::UnsupportedLinkType {
            file,
            link_type,
            interface,
            ..
        } => {
            assert_eq!(
                (file.as_str(), link_type.as_str(), *interface),
                ("mem.cap", "LINUX_SLL (113)", Some(1))
            );
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("mem.cap") && msg.contains("LINUX_SLL (113) on interface 1"),
        "{msg}"
    );
}

/// Offsets in a little-endian pcapng of one section header (28 bytes),
/// one option-less interface (20) and enhanced packet blocks.
const EPB0: usize = 48;

fn one_packet_ng() -> Vec<u8> {
    Ng::new(Endianness::Little)
        .iface(DataLink::ETHERNET, 0, vec![])
        .epb(0, 1, &udp_frame(60, 0))
        .bytes()
}

#[test]
fn garbage_and_truncated_pcapng_files() {
    let good = one_packet_ng();
    assert_eq!(
        u32::from_le_bytes(good[EPB0..EPB0 + 4].try_into().unwrap()),
        ENHANCED_PACKET_BLOCK
    );
    let (got, end) = read_all(&mut reader(good.clone()).unwrap());
    assert!(end.is_eof() && got.len() == 1);

    // Truncated inside the section header.
    let e = reader(good[..20].to_vec()).unwrap_err();
    assert!(
        bad_reason(&e).contains("pcapng section header: truncated"),
        "{e}"
    );

    // Truncated inside the packet block.
    let mut two = Ng::new(Endianness::Little).iface(DataLink::ETHERNET, 0, vec![]);
    for i in 0..2 {
        two = two.epb(0, i, &udp_frame(60, i as u16));
    }
    let two = two.bytes();
    let (got, e) = read_all(&mut reader(two[..two.len() - 30].to_vec()).unwrap());
    assert_eq!(got.len(), 1);
    assert!(bad_reason(&e).contains("pcapng block: truncated"), "{e}");

    // A packet on an interface that was never described.
    let mut bad = good.clone();
    bad[EPB0 + 8..EPB0 + 12].copy_from_slice(&5u32.to_le_bytes());
    let (_, e) = read_all(&mut reader(bad).unwrap());
    assert!(
        bad_reason(&e).contains("interface 5 but the section describes 1"),
        "{e}"
    );

    // Captured length larger than the block.
    let mut bad = good.clone();
    bad[EPB0 + 20..EPB0 + 24].copy_from_slice(&4000u32.to_le_bytes());
    let (_, e) = read_all(&mut reader(bad).unwrap());
    assert!(
        bad_reason(&e).contains("captured length 4000 exceeds the block"),
        "{e}"
    );

    // Trailing length that does not match the leading one.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
    let (_, e) = read_all(&mut reader(bad).unwrap());
    assert!(
        bad_reason(&e).contains("initial_length != trailer_length"),
        "{e}"
    );

    // A block too short to be a packet block.
    let mut bad = good[..EPB0].to_vec();
    bad.extend_from_slice(&ENHANCED_PACKET_BLOCK.to_le_bytes());
    bad.extend_from_slice(&16u32.to_le_bytes());
    bad.extend_from_slice(&[0; 4]);
    bad.extend_from_slice(&16u32.to_le_bytes());
    let (_, e) = read_all(&mut reader(bad).unwrap());
    assert!(
        bad_reason(&e).contains("enhanced packet block of 16 bytes is too short"),
        "{e}"
    );
}

/// xorshift64*: a small deterministic generator for the mutation test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mutated_captures_never_panic() {
    let mut ng = Ng::new(Endianness::Little)
        .iface(DataLink::ETHERNET, 0, ns_iface())
        .iface(
            DataLink::ETHERNET,
            128,
            vec![InterfaceDescriptionOption::IfTsResol(3)],
        );
    for i in 0..6u16 {
        ng = ng.epb(
            u32::from(i % 2),
            u64::from(i) * 10,
            &udp_frame(60 + usize::from(i) * 37, i),
        );
    }
    let bases = [
        pcap_bytes(&sample(6), 0),
        ng.spb(&udp_frame(70, 9)).bytes(),
        Ng::new(Endianness::Big)
            .iface(DataLink::ETHERNET, 0, vec![])
            .epb(0, 1, &udp_frame(60, 0))
            .bytes(),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = [0usize; 3]; // open error, eof, read error
    for round in 0..3000 {
        let mut bytes = bases[round % bases.len()].clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 | 1 => {
                    let i = rng.below(bytes.len());
                    bytes[i] = rng.next() as u8;
                }
                2 if bytes.len() >= 8 => {
                    // Corrupt a length-like word.
                    let i = rng.below(bytes.len() - 4) & !3;
                    bytes[i..i + 4]
                        .copy_from_slice(&(rng.next() as u32 >> rng.below(32)).to_le_bytes());
                }
                2 => {}
                _ => bytes.truncate(rng.below(bytes.len()) + 1),
            }
        }
        match reader(bytes) {
            Err(_) => outcomes[0] += 1,
            Ok(mut r) => {
                let (_, e) = read_all(&mut r);
                outcomes[if e.is_eof() { 1 } else { 2 }] += 1;
            }
        }
    }
    assert!(outcomes.iter().all(|&n| n > 0), "{outcomes:?}");
}

/// A writer that fails once `budget` bytes have been written.
struct Failing {
    budget: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.budget == 0 {
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.budget);
        self.budget -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_errors_stop_the_writer() {
    let f = udp_frame(60, 0);
    let e = PcapWriter::new("w", "full.pcap", Failing { budget: 10 }, 0).unwrap_err();
    assert!(e.to_string().contains("header of full.pcap"), "{e}");

    let mut w = PcapWriter::new(
        "w",
        "full.pcap",
        Failing {
            budget: 24 + 76 + 30,
        },
        0,
    )
    .unwrap();
    let e = w.send_batch(&[&f, &f, &f], Timestamp(1)).unwrap_err();
    assert!(
        matches!(e, PortError::Io { .. }) && e.to_string().contains("writing full.pcap: disk full"),
        "{e}"
    );
    let s = w.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (1, 2));
    assert!(w.send_batch(&[&f], Timestamp(2)).is_err());
    assert!(w.flush().is_err());
    assert_eq!(w.stats().tx_dropped, 3);
}

#[test]
fn capture_ports_are_send() {
    fn send<T: Send>() {}
    send::<PcapReader>();
    send::<PcapWriter>();
    send::<PcapReader<Cursor<Vec<u8>>>>();
    send::<PcapWriter<Vec<u8>>>();
}

//! Capture-file ports: [`PcapReader`] replays a pcap or pcapng file,
//! [`PcapWriter`] records what is sent to it in a pcap file.
//!
//! The reader tells the two formats apart by their magic number and parses
//! them with the `pcap-file` crate (pcap records and pcapng blocks are framed
//! by it; the packet blocks themselves are decoded here, which avoids an
//! allocation per packet and lets the pcapng timestamp resolution be
//! honoured). Each packet comes with its timestamp in nanoseconds and, for
//! pcapng, its interface id as the `in_port` hint. Only Ethernet captures are
//! accepted. A malformed file yields [`PortError::BadCapture`] saying what and
//! where, never a panic; packets before the damage are delivered first.
//!
//! The writer writes a classic pcap file with nanosecond timestamps (magic
//! `a1b23c4d`, native byte order, link type Ethernet), which tcpdump,
//! Wireshark and libpcap read. Each record's timestamp is the `now` given to
//! [`Port::send_batch`], read as nanoseconds since the Unix epoch. Output is
//! buffered; [`PcapWriter::flush`] pushes it to the file, and dropping the
//! writer flushes too (ignoring errors: call `flush` to see them).
//!
//! Both are owned by one thread at a time (`Send`, not shared).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Chain, Cursor, Read, Write};
use std::path::Path;

use pcap_file::pcap::{PcapHeader, PcapReader as PcapFileReader};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgReader;
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use super::sink::Sink;
use super::{PacketBatch, PacketMeta, Port, PortError, PortStats, MAX_FRAME_LEN};
use crate::{PortNo, Timestamp};

const NANOS_PER_SEC: u64 = 1_000_000_000;

// pcapng block types (pcapng specification, section 11.1).
const SECTION_HEADER_BLOCK: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION_BLOCK: u32 = 1;
const PACKET_BLOCK: u32 = 2;
const SIMPLE_PACKET_BLOCK: u32 = 3;
const ENHANCED_PACKET_BLOCK: u32 = 6;

/// The kind of capture file a [`PcapReader`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Classic libpcap format (microsecond or nanosecond timestamps).
    Pcap,
    /// pcapng.
    PcapNg,
}

/// The stream handed to `pcap-file`: the four magic bytes read to detect the
/// format, then the rest of the source.
type Source<R> = Chain<Cursor<[u8; 4]>, R>;

/// What the reader knows of a pcapng interface.
#[derive(Clone, Copy, Debug)]
struct Iface {
    link: DataLink,
    snaplen: u32,
    /// `if_tsresol`: units of 10^-n s, or 2^-n s if the top bit is set.
    tsresol: u8,
    /// `if_tsoffset`, in seconds.
    tsoffset: i64,
}

impl Iface {
    fn new(idb: &InterfaceDescriptionBlock<'_>) -> Self {
        let mut iface = Iface {
            link: idb.linktype,
            snaplen: idb.snaplen,
            tsresol: 6,
            tsoffset: 0,
        };
        for opt in &idb.options {
            match opt {
                InterfaceDescriptionOption::IfTsResol(r) => iface.tsresol = *r,
                // The specification makes the offset a signed 64-bit number.
                InterfaceDescriptionOption::IfTsOffset(o) => iface.tsoffset = *o as i64,
                _ => {}
            }
        }
        iface
    }

    /// Converts a raw timestamp of this interface to nanoseconds since the
    /// epoch (saturating; 128-bit arithmetic cannot overflow here).
    fn nanos(&self, raw: u64) -> u64 {
        let scaled = u128::from(raw) * u128::from(NANOS_PER_SEC);
        let ns = if self.tsresol & 0x80 == 0 {
            match 10u128.checked_pow(u32::from(self.tsresol)) {
                Some(div) => scaled / div,
                None => 0,
            }
        } else {
            scaled >> (self.tsresol & 0x7f)
        };
        let ns = ns as i128 + i128::from(self.tsoffset) * i128::from(NANOS_PER_SEC);
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

enum Decoder<R: Read> {
    Pcap {
        reader: PcapFileReader<Source<R>>,
        /// Nanosecond (rather than microsecond) timestamps.
        nanos: bool,
    },
    PcapNg {
        reader: PcapNgReader<Source<R>>,
        /// Byte order of the current section.
        big_endian: bool,
        /// The current section's interfaces, in the order described.
        ifaces: Vec<Iface>,
    },
}

/// What reading one capture record produced.
enum Step {
    /// A packet of this length, pushed to the batch.
    Packet(usize),
    /// A packet of this length, too long for a batch: skipped.
    TooLarge(usize),
    /// A block that holds no packet (pcapng headers, statistics, ...).
    NotAPacket,
    /// End of the file.
    End,
}

/// Where an error happened, to name it.
struct Ctx<'a> {
    port: &'a str,
    file: &'a str,
    /// Packets read before.
    packets: u64,
}

impl Ctx<'_> {
    fn bad(&self, reason: impl fmt::Display) -> PortError {
        PortError::BadCapture {
            port: self.port.to_string(),
            file: self.file.to_string(),
            reason: format!("{reason} (after {} packets)", self.packets),
        }
    }

    fn unsupported(&self, link: DataLink, interface: Option<u32>) -> PortError {
        PortError::UnsupportedLinkType {
            port: self.port.to_string(),
            file: self.file.to_string(),
            link_type: link_name(link),
            interface,
        }
    }

    /// Translates a `pcap-file` error met while reading `what`.
    fn pcap_error(&self, e: PcapError, what: &str) -> PortError {
        match e {
            PcapError::IncompleteBuffer => self.bad(format_args!("{what}: truncated")),
            PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.bad(format_args!(
                    "{what}: truncated (the file ends inside it, or its length field is corrupt)"
                ))
            }
            PcapError::IoError(e) => PortError::Io {
                port: self.port.to_string(),
                context: format!("reading {}", self.file),
                source: e,
            },
            PcapError::InvalidField(f) => self.bad(format_args!("{what}: {f}")),
            other => self.bad(format_args!("{what}: {other}")),
        }
    }
}

fn link_name(link: DataLink) -> String {
    format!("{link:?} ({})", u32::from(link))
}

/// Pushes a packet read from the file, unless it is too long.
fn deliver(batch: &mut PacketBatch, data: &[u8], meta: PacketMeta) -> Step {
    // The caller checked that the batch has room, so only the length can
    // make the push fail.
    if batch.push(data, meta) {
        Step::Packet(data.len())
    } else {
        Step::TooLarge(data.len())
    }
}

/// A pcapng packet block, decoded.
struct PacketRecord<'a> {
    interface: u32,
    /// Raw timestamp in the interface's units; simple packet blocks have none.
    ts: Option<u64>,
    orig_len: u32,
    data: &'a [u8],
}

fn field_u32(b: &[u8], off: usize, big_endian: bool) -> Option<u32> {
    let bytes: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    })
}

fn field_u16(b: &[u8], off: usize, big_endian: bool) -> Option<u16> {
    let bytes: [u8; 2] = b.get(off..off + 2)?.try_into().ok()?;
    Some(if big_endian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    })
}

/// Decodes the body of an enhanced, simple or (obsolete) packet block.
fn decode_packet_block(ty: u32, body: &[u8], be: bool) -> Result<PacketRecord<'_>, String> {
    let name = match ty {
        ENHANCED_PACKET_BLOCK => "enhanced packet block",
        PACKET_BLOCK => "packet block",
        _ => "simple packet block",
    };
    let short = || format!("{name} of {} bytes is too short", body.len() + 12);
    if ty == SIMPLE_PACKET_BLOCK {
        let orig_len = field_u32(body, 0, be).ok_or_else(short)?;
        return Ok(PacketRecord {
            interface: 0,
            ts: None,
            orig_len,
            data: &body[4..],
        });
    }
    let interface = if ty == PACKET_BLOCK {
        field_u16(body, 0, be).map(u32::from)
    } else {
        field_u32(body, 0, be)
    }
    .ok_or_else(short)?;
    let hi = field_u32(body, 4, be).ok_or_else(short)?;
    let lo = field_u32(body, 8, be).ok_or_else(short)?;
    let cap_len = field_u32(body, 12, be).ok_or_else(short)?;
    let orig_len = field_u32(body, 16, be).ok_or_else(short)?;
    let data = usize::try_from(cap_len)
        .ok()
        .and_then(|n| body.get(20..20usize.checked_add(n)?))
        .ok_or_else(|| format!("{name}: captured length {cap_len} exceeds the block"))?;
    Ok(PacketRecord {
        interface,
        ts: Some(u64::from(hi) << 32 | u64::from(lo)),
        orig_len,
        data,
    })
}

/// A receive-only port that replays a pcap or pcapng capture.
///
/// Each receive delivers the next packets of the file with their capture
/// timestamps; pcapng packets also carry their interface id as
/// [`PacketMeta::in_port`] (ids count from 0 within a section, as in the
/// file; mapping them to datapath ports is the caller's business). After the
/// last packet every receive returns [`PortError::Eof`].
///
/// - pcapng timestamps honour the interface's `if_tsresol` (default
///   microseconds) and `if_tsoffset`; simple packet blocks, which have no
///   timestamp, get the previous packet's and interface 0.
/// - A record longer than [`MAX_FRAME_LEN`] is skipped, counted in
///   `rx_dropped` and reported once as [`PortError::PacketTooLarge`]; the
///   next receive continues after it.
/// - A packet on a non-Ethernet interface stops the reader with
///   [`PortError::UnsupportedLinkType`] (a pcap file is checked when opened).
/// - Damage stops it with [`PortError::BadCapture`], returned by every later
///   receive; an I/O error likewise with [`PortError::Io`].
/// - Records captured shorter than the wire length are delivered as
///   captured.
/// - `pcap-file` reads through an 8 MB buffer (allocated when the reader is
///   created); a single record larger than that is reported as truncated.
///
/// Sending to it drops the packets (`tx_dropped`).
pub struct PcapReader<R: Read = File> {
    name: String,
    file: String,
    decoder: Decoder<R>,
    /// Timestamp of the last packet, for simple packet blocks.
    last_ts: Timestamp,
    /// Packets read (delivered or skipped).
    packets: u64,
    /// A non-fatal error to return at the next receive.
    pending: Option<PortError>,
    /// Set once the reader has stopped (end of file or a fatal error).
    stopped: Option<PortError>,
    stats: PortStats,
}

impl<R: Read> fmt::Debug for PcapReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapReader")
            .field("name", &self.name)
            .field("file", &self.file)
            .field("format", &self.format())
            .field("packets", &self.packets)
            .finish()
    }
}

impl PcapReader<File> {
    /// Opens a capture file; the port is named after the path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PortError> {
        let name = path.as_ref().display().to_string();
        Self::open_named(name, path)
    }

    /// Opens a capture file as the port `name`.
    pub fn open_named(name: impl Into<String>, path: impl AsRef<Path>) -> Result<Self, PortError> {
        let name = name.into();
        let file = path.as_ref().display().to_string();
        match File::open(path.as_ref()) {
            Ok(f) => Self::from_reader(name, file, f),
            Err(source) => Err(PortError::Io {
                port: name,
                context: format!("opening {file}"),
                source,
            }),
        }
    }
}

impl<R: Read> PcapReader<R> {
    /// Reads a capture from any byte source (a pipe, memory, ...); `file`
    /// names it in errors. Reads and checks the file header now.
    pub fn from_reader(
        name: impl Into<String>,
        file: impl Into<String>,
        mut source: R,
    ) -> Result<Self, PortError> {
        let name = name.into();
        let file = file.into();
        let ctx = Ctx {
            port: &name,
            file: &file,
            packets: 0,
        };
        let mut magic = [0u8; 4];
        let got = read_prefix(&mut source, &mut magic)
            .map_err(|e| ctx.pcap_error(PcapError::IoError(e), "magic"))?;
        if got < magic.len() {
            return Err(ctx.bad(format_args!(
                "file of {got} bytes is too short to be a pcap or pcapng capture"
            )));
        }
        let stream = Cursor::new(magic).chain(source);
        let decoder = match magic {
            [0xa1, 0xb2, 0xc3, 0xd4]
            | [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
            | [0x4d, 0x3c, 0xb2, 0xa1] => {
                let reader = PcapFileReader::new(stream)
                    .map_err(|e| ctx.pcap_error(e, "pcap file header"))?;
                let header = reader.header();
                if header.datalink != DataLink::ETHERNET {
                    return Err(ctx.unsupported(header.datalink, None));
                }
                Decoder::Pcap {
                    reader,
                    nanos: header.ts_resolution == TsResolution::NanoSecond,
                }
            }
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                let reader = PcapNgReader::new(stream)
                    .map_err(|e| ctx.pcap_error(e, "pcapng section header"))?;
                let big_endian = reader.section().endianness == Endianness::Big;
                Decoder::PcapNg {
                    reader,
                    big_endian,
                    ifaces: Vec::new(),
                }
            }
            m => {
                return Err(ctx.bad(format_args!(
                    "unknown magic number {:02x}{:02x}{:02x}{:02x}: not a pcap or pcapng capture",
                    m[0], m[1], m[2], m[3]
                )))
            }
        };
        Ok(PcapReader {
            name,
            file,
            decoder,
            last_ts: Timestamp::NEVER,
            packets: 0,
            pending: None,
            stopped: None,
            stats: PortStats::default(),
        })
    }

    /// Whether the file is pcap or pcapng.
    pub fn format(&self) -> CaptureFormat {
        match self.decoder {
            Decoder::Pcap { .. } => CaptureFormat::Pcap,
            Decoder::PcapNg { .. } => CaptureFormat::PcapNg,
        }
    }

    /// The file's name as errors show it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// True once the reader has stopped (end of file or a fatal error).
    pub fn is_finished(&self) -> bool {
        self.stopped.is_some()
    }

    /// Reads the next record, pushing it to `batch` if it is a packet.
    fn read_one(&mut self, batch: &mut PacketBatch) -> Result<Step, PortError> {
        let ctx = Ctx {
            port: &self.name,
            file: &self.file,
            packets: self.packets,
        };
        match &mut self.decoder {
            Decoder::Pcap { reader, nanos } => {
                let raw = match reader.next_raw_packet() {
                    None => return Ok(Step::End),
                    Some(Err(e)) => return Err(ctx.pcap_error(e, "packet record")),
                    Some(Ok(raw)) => raw,
                };
                let frac = u64::from(raw.ts_frac) * if *nanos { 1 } else { 1000 };
                // At most (2^32 - 1) * 10^9 + 2^32 * 1000: fits in a u64.
                let ts = Timestamp(u64::from(raw.ts_sec) * NANOS_PER_SEC + frac);
                self.last_ts = ts;
                Ok(deliver(batch, &raw.data, PacketMeta::new(ts)))
            }
            Decoder::PcapNg {
                reader,
                big_endian,
                ifaces,
            } => {
                let ty = match reader.next_raw_block() {
                    None => return Ok(Step::End),
                    Some(Err(e)) => return Err(ctx.pcap_error(e, "pcapng block")),
                    Some(Ok(raw))
                        if matches!(
                            raw.type_,
                            ENHANCED_PACKET_BLOCK | SIMPLE_PACKET_BLOCK | PACKET_BLOCK
                        ) =>
                    {
                        let rec = decode_packet_block(raw.type_, &raw.body, *big_endian)
                            .map_err(|r| ctx.bad(r))?;
                        let Some(iface) = ifaces.get(rec.interface as usize) else {
                            return Err(ctx.bad(format_args!(
                                "packet on interface {} but the section describes {} interface(s)",
                                rec.interface,
                                ifaces.len()
                            )));
                        };
                        if iface.link != DataLink::ETHERNET {
                            return Err(ctx.unsupported(iface.link, Some(rec.interface)));
                        }
                        let mut data = rec.data;
                        if raw.type_ == SIMPLE_PACKET_BLOCK {
                            // Captured length: min(original length, snaplen),
                            // the rest of the body being padding.
                            let mut cap = rec.orig_len as usize;
                            if iface.snaplen != 0 {
                                cap = cap.min(iface.snaplen as usize);
                            }
                            data = &data[..cap.min(data.len())];
                        }
                        let ts = rec
                            .ts
                            .map_or(self.last_ts, |raw_ts| Timestamp(iface.nanos(raw_ts)));
                        self.last_ts = ts;
                        return Ok(deliver(
                            batch,
                            data,
                            PacketMeta::with_in_port(ts, PortNo(rec.interface)),
                        ));
                    }
                    Some(Ok(raw)) => raw.type_,
                };
                // The parser tracks sections and interfaces; mirror it.
                match ty {
                    SECTION_HEADER_BLOCK => {
                        *big_endian = reader.section().endianness == Endianness::Big;
                        ifaces.clear();
                    }
                    INTERFACE_DESCRIPTION_BLOCK => {
                        let known = reader.interfaces().get(ifaces.len()..).unwrap_or_default();
                        ifaces.extend(known.iter().map(Iface::new));
                    }
                    _ => {}
                }
                Ok(Step::NotAPacket)
            }
        }
    }

    /// Records that the reader stopped with `e`; returns `e` if nothing was
    /// received in this call, else leaves it for the next one.
    fn stop(&mut self, e: PortError, batch: &PacketBatch) -> Result<usize, PortError> {
        let copy = e.duplicate();
        self.stopped = Some(copy);
        if batch.is_empty() {
            Err(e)
        } else {
            Ok(batch.len())
        }
    }
}

/// Reads until `buf` is full or the source ends; returns the bytes read.
fn read_prefix(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read + Send> Port for PcapReader<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if let Some(e) = &self.stopped {
            return Err(e.duplicate());
        }
        while !batch.is_full() {
            match self.read_one(batch) {
                Ok(Step::Packet(len)) => {
                    self.packets += 1;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                }
                Ok(Step::NotAPacket) => {}
                Ok(Step::TooLarge(len)) => {
                    self.packets += 1;
                    self.stats.rx_dropped += 1;
                    let e = PortError::PacketTooLarge {
                        port: self.name.clone(),
                        len,
                        limit: MAX_FRAME_LEN,
                    };
                    if batch.is_empty() {
                        return Err(e);
                    }
                    self.pending = Some(e);
                    break;
                }
                Ok(Step::End) => {
                    let e = PortError::Eof {
                        port: self.name.clone(),
                    };
                    return self.stop(e, batch);
                }
                Err(e) => return self.stop(e, batch),
            }
        }
        Ok(batch.len())
    }

    /// A reader cannot send: the packets are dropped.
    fn send_batch(&mut self, pkts: &[&[u8]], _now: Timestamp) -> Result<usize, PortError> {
        self.stats.refuse_send(pkts)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// A transmit-only port that writes every packet sent to it to a pcap file.
///
/// See the [module documentation](self) for the format. Packets longer than
/// the snap length (default [`MAX_FRAME_LEN`]) are truncated to it, with
/// their full length recorded as the original length, as a capture tool
/// would. A write error stops the writer: that send and every later one
/// return [`PortError::Io`] and count their packets in `tx_dropped` (the file
/// may end with a partial record). Receiving from it yields nothing.
pub struct PcapWriter<W: Write = BufWriter<File>> {
    sink: Sink<W>,
    snaplen: u32,
    stats: PortStats,
}

impl<W: Write> fmt::Debug for PcapWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapWriter")
            .field("name", &self.sink.port)
            .field("file", &self.sink.file)
            .field("snaplen", &self.snaplen)
            .field("stats", &self.stats)
            .finish()
    }
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) a pcap file; the port is named after the path.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, PortError> {
        let name = path.as_ref().display().to_string();
        Self::create_named(name, path)
    }

    /// Creates (or truncates) a pcap file as the port `name`.
    pub fn create_named(
        name: impl Into<String>,
        path: impl AsRef<Path>,
    ) -> Result<Self, PortError> {
        let name = name.into();
        let file = path.as_ref().display().to_string();
        match File::create(path.as_ref()) {
            Ok(f) => Self::new(name, file, BufWriter::new(f), MAX_FRAME_LEN as u32),
            Err(source) => Err(PortError::Io {
                port: name,
                context: format!("creating {file}"),
                source,
            }),
        }
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes a pcap file header to `out` and returns the port; `file` names
    /// the output in errors; `snaplen` is the longest record written (0
    /// means [`MAX_FRAME_LEN`]).
    pub fn new(
        name: impl Into<String>,
        file: impl Into<String>,
        mut out: W,
        snaplen: u32,
    ) -> Result<Self, PortError> {
        let name = name.into();
        let file = file.into();
        let snaplen = if snaplen == 0 {
            MAX_FRAME_LEN as u32
        } else {
            snaplen
        };
        let header = PcapHeader {
            snaplen,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
            ..PcapHeader::default()
        };
        if let Err(e) = header.write_to(&mut out) {
            let source = match e {
                PcapError::IoError(e) => e,
                other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
            };
            return Err(PortError::Io {
                port: name,
                context: format!("writing the header of {file}"),
                source,
            });
        }
        Ok(PcapWriter {
            sink: Sink::new(name, file, out),
            snaplen,
            stats: PortStats::default(),
        })
    }

    /// The file's name as errors show it.
    pub fn file(&self) -> &str {
        &self.sink.file
    }

    /// The longest record written.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Pushes buffered records to the file.
    pub fn flush(&mut self) -> Result<(), PortError> {
        self.sink.flush()
    }

    /// Flushes and returns the output (e.g. the `Vec<u8>` written to).
    pub fn into_inner(self) -> Result<W, PortError> {
        self.sink.into_inner()
    }
}

impl<W: Write + Send> Port for PcapWriter<W> {
    fn name(&self) -> &str {
        &self.sink.port
    }

    /// A writer receives nothing.
    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        Ok(0)
    }

    fn send_batch(&mut self, pkts: &[&[u8]], now: Timestamp) -> Result<usize, PortError> {
        if let Err(e) = self.sink.check() {
            self.stats.tx_dropped += pkts.len() as u64;
            return Err(e);
        }
        // Seconds past 2106 do not fit the format: saturate.
        let secs = u32::try_from(now.0 / NANOS_PER_SEC).unwrap_or(u32::MAX);
        let nanos = (now.0 % NANOS_PER_SEC) as u32;
        for (i, p) in pkts.iter().enumerate() {
            let incl = p.len().min(self.snaplen as usize);
            let orig = u32::try_from(p.len()).unwrap_or(u32::MAX);
            let mut hdr = [0u8; 16];
            hdr[0..4].copy_from_slice(&secs.to_ne_bytes());
            hdr[4..8].copy_from_slice(&nanos.to_ne_bytes());
            hdr[8..12].copy_from_slice(&(incl as u32).to_ne_bytes());
            hdr[12..16].copy_from_slice(&orig.to_ne_bytes());
            let written = self.sink.write(|out| {
                out.write_all(&hdr)?;
                out.write_all(&p[..incl])
            });
            if let Err(e) = written {
                self.stats.tx_dropped += (pkts.len() - i) as u64;
                return Err(e);
            }
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.len() as u64;
        }
        Ok(pkts.len())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;

//! [`PcapNgWriter`]: records packets of several interfaces in one pcapng
//! file, each with its interface id and a nanosecond timestamp.
//!
//! The file is one section (pcapng specification, draft-ietf-opsawg-pcapng):
//!
//! - a Section Header Block (native byte order, version 1.0, section length
//!   unknown, `shb_userappl` = "eswitch");
//! - one Interface Description Block per interface name given, in order, so
//!   interface id `i` is the `i`th name: link type Ethernet, snap length
//!   [`MAX_FRAME_LEN`], options `if_name` and `if_tsresol` = 9 (timestamps in
//!   nanoseconds);
//! - an Enhanced Packet Block per packet written: interface id, 64-bit
//!   timestamp in nanoseconds since the Unix epoch, captured and original
//!   length, the bytes padded to 32 bits, no options.
//!
//! The blocks are written here rather than through `pcap-file`'s writer,
//! which serialises every block twice (once to learn its length); these have
//! fixed layouts. [`super::PcapReader`] reads the result back, giving each
//! packet's interface id as its `in_port` hint; tcpdump, tshark and
//! Wireshark open it too.
//!
//! Output is buffered: [`PcapNgWriter::flush`] pushes it to the file, and
//! dropping the writer flushes too (ignoring errors). A write error stops
//! the writer: that call and every later one return the error (the file may
//! end with a partial block). Owned by one thread (`Send`, not shared).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::sink::Sink;
use super::{PortError, MAX_FRAME_LEN};
use crate::Timestamp;

const SECTION_HEADER_BLOCK: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION_BLOCK: u32 = 1;
const ENHANCED_PACKET_BLOCK: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u16 = 1;

const OPT_ENDOFOPT: u16 = 0;
/// `shb_userappl`.
const OPT_SHB_USERAPPL: u16 = 4;
/// `if_name`.
const OPT_IF_NAME: u16 = 2;
/// `if_tsresol`.
const OPT_IF_TSRESOL: u16 = 9;
/// `if_tsresol` value: 10^-9 s.
const TSRESOL_NANOS: u8 = 9;

/// The application named in the section header.
const USER_APPL: &str = "eswitch";

/// Longest `if_name` written (longer names are cut at a character
/// boundary); option lengths are 16 bits.
const MAX_NAME_LEN: usize = 256;

/// Appends a pcapng option (code, length, value padded to 32 bits).
fn push_option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_ne_bytes());
    // Callers pass values of at most MAX_NAME_LEN bytes.
    body.extend_from_slice(&(value.len() as u16).to_ne_bytes());
    body.extend_from_slice(value);
    body.resize(body.len() + pad4(value.len()), 0);
}

/// Bytes of padding after `len` bytes to reach a multiple of 4.
fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Frames a block: type, total length, body, total length.
fn block(ty: u32, body: &[u8]) -> Vec<u8> {
    let total = (body.len() + 12) as u32;
    let mut b = Vec::with_capacity(body.len() + 12);
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(&total.to_ne_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&total.to_ne_bytes());
    b
}

/// `name` cut to at most [`MAX_NAME_LEN`] bytes at a character boundary.
fn clip_name(name: &str) -> &str {
    if name.len() <= MAX_NAME_LEN {
        return name;
    }
    let mut end = MAX_NAME_LEN;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The section header and interface description blocks of a file.
fn file_header(interface_names: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = Vec::with_capacity(32);
    body.extend_from_slice(&BYTE_ORDER_MAGIC.to_ne_bytes());
    body.extend_from_slice(&1u16.to_ne_bytes());
    body.extend_from_slice(&0u16.to_ne_bytes());
    body.extend_from_slice(&(-1i64).to_ne_bytes());
    push_option(&mut body, OPT_SHB_USERAPPL, USER_APPL.as_bytes());
    push_option(&mut body, OPT_ENDOFOPT, &[]);
    out.extend_from_slice(&block(SECTION_HEADER_BLOCK, &body));
    for name in interface_names {
        body.clear();
        body.extend_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        body.extend_from_slice(&0u16.to_ne_bytes());
        body.extend_from_slice(&(MAX_FRAME_LEN as u32).to_ne_bytes());
        push_option(&mut body, OPT_IF_NAME, clip_name(name).as_bytes());
        push_option(&mut body, OPT_IF_TSRESOL, &[TSRESOL_NANOS]);
        push_option(&mut body, OPT_ENDOFOPT, &[]);
        out.extend_from_slice(&block(INTERFACE_DESCRIPTION_BLOCK, &body));
    }
    out
}

/// Writes packets of several interfaces to a pcapng file.
///
/// The file is one section: a section header, an interface description per
/// name given at creation (interface id `i` is the `i`th; link type
/// Ethernet, `if_name`, `if_tsresol` = 9, i.e. nanoseconds), then an
/// enhanced packet block per [`PcapNgWriter::write`] (interface id and
/// timestamp in nanoseconds since the Unix epoch). Output is buffered;
/// dropping the writer flushes it, ignoring errors. Frames longer than
/// [`MAX_FRAME_LEN`] are truncated to it, with their full length recorded
/// as the original length, as a capture tool would.
pub struct PcapNgWriter<W: Write = BufWriter<File>> {
    sink: Sink<W>,
    interfaces: u32,
    packets: u64,
}

impl<W: Write> fmt::Debug for PcapNgWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapNgWriter")
            .field("file", &self.sink.file)
            .field("interfaces", &self.interfaces)
            .field("packets", &self.packets)
            .finish()
    }
}

impl PcapNgWriter<BufWriter<File>> {
    /// Creates (or truncates) a pcapng file with one interface per name
    /// (interface id `i` is `interface_names[i]`) and writes its headers.
    pub fn create(path: impl AsRef<Path>, interface_names: &[&str]) -> Result<Self, PortError> {
        let file = path.as_ref().display().to_string();
        match File::create(path.as_ref()) {
            Ok(f) => Self::new(BufWriter::new(f), file, interface_names),
            Err(source) => Err(PortError::Io {
                port: file.clone(),
                context: format!("creating {file}"),
                source,
            }),
        }
    }
}

impl<W: Write> PcapNgWriter<W> {
    /// Writes the section header and one interface description per name to
    /// `out`; `file_name` names the output in errors (as the port name and
    /// in the context).
    pub fn new(
        mut out: W,
        file_name: impl Into<String>,
        interface_names: &[&str],
    ) -> Result<Self, PortError> {
        let file = file_name.into();
        let interfaces = match u32::try_from(interface_names.len()) {
            Ok(n) => n,
            Err(_) => {
                return Err(PortError::Io {
                    port: file.clone(),
                    context: format!("writing the header of {file}"),
                    source: io::Error::new(io::ErrorKind::InvalidInput, "too many interfaces"),
                })
            }
        };
        if let Err(source) = out.write_all(&file_header(interface_names)) {
            return Err(PortError::Io {
                port: file.clone(),
                context: format!("writing the header of {file}"),
                source,
            });
        }
        Ok(PcapNgWriter {
            sink: Sink::new(file.clone(), file, out),
            interfaces,
            packets: 0,
        })
    }

    /// The file's name as errors show it.
    pub fn file(&self) -> &str {
        &self.sink.file
    }

    /// Number of interfaces described.
    pub fn interfaces(&self) -> u32 {
        self.interfaces
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Writes one packet received on `interface` (an index into the names
    /// given at creation) at `ts` (nanoseconds since the Unix epoch).
    ///
    /// An interface id with no description is refused with
    /// [`PortError::Io`] of kind `InvalidInput`, and nothing is written (the
    /// writer goes on); an I/O error stops the writer.
    pub fn write(&mut self, interface: u32, ts: Timestamp, frame: &[u8]) -> Result<(), PortError> {
        self.sink.check()?;
        if interface >= self.interfaces {
            return Err(PortError::Io {
                port: self.sink.port.clone(),
                context: format!("writing {}", self.sink.file),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "packet on interface {interface} but the file describes {} interface(s)",
                        self.interfaces
                    ),
                ),
            });
        }
        let cap = frame.len().min(MAX_FRAME_LEN);
        let pad = pad4(cap);
        // At most 65 535 + 3 + 32: fits.
        let total = (32 + cap + pad) as u32;
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let mut hdr = [0u8; 28];
        hdr[0..4].copy_from_slice(&ENHANCED_PACKET_BLOCK.to_ne_bytes());
        hdr[4..8].copy_from_slice(&total.to_ne_bytes());
        hdr[8..12].copy_from_slice(&interface.to_ne_bytes());
        hdr[12..16].copy_from_slice(&((ts.0 >> 32) as u32).to_ne_bytes());
        hdr[16..20].copy_from_slice(&(ts.0 as u32).to_ne_bytes());
        hdr[20..24].copy_from_slice(&(cap as u32).to_ne_bytes());
        hdr[24..28].copy_from_slice(&orig.to_ne_bytes());
        let mut trailer = [0u8; 7];
        trailer[pad..pad + 4].copy_from_slice(&total.to_ne_bytes());
        self.sink.write(|out| {
            out.write_all(&hdr)?;
            out.write_all(&frame[..cap])?;
            out.write_all(&trailer[..pad + 4])
        })?;
        self.packets += 1;
        Ok(())
    }

    /// Pushes buffered blocks to the file.
    pub fn flush(&mut self) -> Result<(), PortError> {
        self.sink.flush()
    }

    /// Flushes and returns the output (e.g. the `Vec<u8>` written to).
    pub fn into_inner(self) -> Result<W, PortError> {
        self.sink.into_inner()
    }
}

#[cfg(test)]
#[path = "pcapng/tests/mod.rs"]
mod tests;

//! The 8-byte header every message starts with, the message types, and
//! stream framing.

use crate::error::ParseError;
use crate::wire::{Put, Reader};

/// OpenFlow 1.3: the version messages are built in (see [`VERSIONS`]).
pub const VERSION: u8 = 0x04;
/// OpenFlow 1.3.
pub const V13: u8 = 0x04;
/// OpenFlow 1.4.
pub const V14: u8 = 0x05;
/// OpenFlow 1.5.
pub const V15: u8 = 0x06;
/// The versions this codec speaks. Messages are kept in one form (1.3's,
/// with the few 1.5 actions added); the encodings that differ are read
/// by version ([`crate::wire::Reader::version`]) and written by
/// [`crate::Message::emit_as`].
pub const VERSIONS: [u8; 3] = [V13, V14, V15];

/// The name of a version, as `ovs-ofctl -O` spells it.
pub fn version_name(v: u8) -> String {
    match v {
        0x01..=0x06 => format!("OpenFlow1{}", v - 1),
        _ => format!("version {v:#04x}"),
    }
}

/// Bytes in `ofp_header`.
pub const HEADER_LEN: usize = 8;

/// The largest message (the header's 16-bit length).
pub const MAX_LEN: usize = u16::MAX as usize;

/// `ofp_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub ty: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    pub fn parse(r: &mut Reader<'_>) -> Result<Header, ParseError> {
        Ok(Header {
            version: r.u8("header.version")?,
            ty: r.u8("header.type")?,
            length: r.u16("header.length")?,
            xid: r.u32("header.xid")?,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u8(self.version);
        out.put_u8(self.ty);
        out.put_u16(self.length);
        out.put_u32(self.xid);
    }
}

/// `ofp_type`: every message type of OpenFlow 1.3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MsgType {
    Hello = 0,
    Error = 1,
    EchoRequest = 2,
    EchoReply = 3,
    Experimenter = 4,
    FeaturesRequest = 5,
    FeaturesReply = 6,
    GetConfigRequest = 7,
    GetConfigReply = 8,
    SetConfig = 9,
    PacketIn = 10,
    FlowRemoved = 11,
    PortStatus = 12,
    PacketOut = 13,
    FlowMod = 14,
    GroupMod = 15,
    PortMod = 16,
    TableMod = 17,
    MultipartRequest = 18,
    MultipartReply = 19,
    BarrierRequest = 20,
    BarrierReply = 21,
    QueueGetConfigRequest = 22,
    QueueGetConfigReply = 23,
    RoleRequest = 24,
    RoleReply = 25,
    GetAsyncRequest = 26,
    GetAsyncReply = 27,
    SetAsync = 28,
    MeterMod = 29,
    /// 1.4+.
    RoleStatus = 30,
    /// 1.4+.
    TableStatus = 31,
    /// 1.4+.
    RequestForward = 32,
    /// 1.4+ (in 1.3: ONF's experimenter message 2300).
    BundleControl = 33,
    /// 1.4+ (in 1.3: ONF's experimenter message 2301).
    BundleAddMessage = 34,
    /// 1.5.
    ControllerStatus = 35,
}

impl MsgType {
    /// Every type, by number.
    pub const ALL: [MsgType; 36] = [
        MsgType::Hello,
        MsgType::Error,
        MsgType::EchoRequest,
        MsgType::EchoReply,
        MsgType::Experimenter,
        MsgType::FeaturesRequest,
        MsgType::FeaturesReply,
        MsgType::GetConfigRequest,
        MsgType::GetConfigReply,
        MsgType::SetConfig,
        MsgType::PacketIn,
        MsgType::FlowRemoved,
        MsgType::PortStatus,
        MsgType::PacketOut,
        MsgType::FlowMod,
        MsgType::GroupMod,
        MsgType::PortMod,
        MsgType::TableMod,
        MsgType::MultipartRequest,
        MsgType::MultipartReply,
        MsgType::BarrierRequest,
        MsgType::BarrierReply,
        MsgType::QueueGetConfigRequest,
        MsgType::QueueGetConfigReply,
        MsgType::RoleRequest,
        MsgType::RoleReply,
        MsgType::GetAsyncRequest,
        MsgType::GetAsyncReply,
        MsgType::SetAsync,
        MsgType::MeterMod,
        MsgType::RoleStatus,
        MsgType::TableStatus,
        MsgType::RequestForward,
        MsgType::BundleControl,
        MsgType::BundleAddMessage,
        MsgType::ControllerStatus,
    ];

    /// The OpenFlow 1.3 type numbered `v`.
    pub fn from_u8(v: u8) -> Option<MsgType> {
        MsgType::of_version(v, V13)
    }

    /// The type numbered `v` in `version`.
    pub fn of_version(v: u8, version: u8) -> Option<MsgType> {
        let last = match version {
            V13 => MsgType::MeterMod,
            V14 => MsgType::BundleAddMessage,
            _ => MsgType::ControllerStatus,
        };
        MsgType::ALL
            .get(usize::from(v))
            .copied()
            .filter(|t| *t <= last)
    }

    /// Replies and asynchronous messages: only a switch sends them, so a
    /// switch answers one with BAD_TYPE, whatever its body.
    pub fn switch_only(self) -> bool {
        matches!(
            self,
            MsgType::FeaturesReply
                | MsgType::GetConfigReply
                | MsgType::PacketIn
                | MsgType::FlowRemoved
                | MsgType::PortStatus
                | MsgType::MultipartReply
                | MsgType::BarrierReply
                | MsgType::QueueGetConfigReply
                | MsgType::RoleReply
                | MsgType::GetAsyncReply
                | MsgType::RoleStatus
                | MsgType::TableStatus
                | MsgType::RequestForward
                | MsgType::ControllerStatus
        )
    }
}

/// Splits a byte stream into whole messages: feed it what the socket
/// gave, take messages out. A header whose length is below 8 is an error
/// the stream cannot recover from (where the next message starts is
/// unknown), and so is one over the framer's limit, if it has one.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    start: usize,
    /// The longest message taken (`None`: OpenFlow's own, 65,535).
    limit: Option<usize>,
}

impl Framer {
    pub fn new() -> Framer {
        Framer::default()
    }

    /// A framer that refuses messages longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Framer {
        Framer {
            limit: Some(limit),
            ..Framer::default()
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The length of the next whole message, if one has arrived (or the
    /// error its header is).
    fn peek(&self) -> Result<Option<usize>, ParseError> {
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let length = u16::from_be_bytes([avail[2], avail[3]]);
        let n = usize::from(length);
        if n < HEADER_LEN {
            return Err(ParseError::ShortLength { length });
        }
        if let Some(limit) = self.limit.filter(|&l| n > l) {
            return Err(ParseError::OverLimit { length, limit });
        }
        Ok((avail.len() >= n).then_some(n))
    }

    /// The next whole message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>, ParseError> {
        let Some(n) = self.peek()? else {
            return Ok(None);
        };
        let msg = self.buf[self.start..self.start + n].to_vec();
        self.start += n;
        // Drop what was taken once it is most of the buffer (and more
        // than 64 KiB): each byte is moved at most once on average, however
        // far a burst of messages runs ahead of their handling.
        if self.start > 1 << 16 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(msg))
    }

    /// Bytes received but not yet a whole message.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether a whole message (or a header in error) is waiting.
    pub fn ready(&self) -> bool {
        !matches!(self.peek(), Ok(None))
    }
}

//! Typed messages: [`parse`] one whole message, [`Message::emit`] one.

use crate::config_msgs::{PortMod, QueueConfig, TableMod};
use crate::error::{OfpError, ParseError};
use crate::flow::{FlowMod, FlowRemoved, PacketIn, PacketOut};
use crate::group::GroupMod;
use crate::header::{Header, MsgType, HEADER_LEN, MAX_LEN, V14, V15, VERSION, VERSIONS};
use crate::meter::MeterMod;
use crate::multipart::{MpReply, MpRequest};
use crate::port::{Port, PORT_LEN};
use crate::wire::{Put, Reader};

/// `OFPHET_VERSIONBITMAP`.
pub const HELLO_VERSIONBITMAP: u16 = 1;

/// Bytes of an ERROR's `data` a reply carries of the offending message:
/// all of it, as Open vSwitch sends it (the spec asks for at least 64;
/// `ovs-ofctl` and controllers decode the whole request to say what was
/// refused), up to what fits in one message.
pub const ERROR_DATA_LEN: usize = u16::MAX as usize - 16;

/// `ofp_switch_features` capability bits.
pub mod capabilities {
    pub const FLOW_STATS: u32 = 1 << 0;
    pub const TABLE_STATS: u32 = 1 << 1;
    pub const PORT_STATS: u32 = 1 << 2;
    pub const GROUP_STATS: u32 = 1 << 3;
    pub const IP_REASM: u32 = 1 << 5;
    pub const QUEUE_STATS: u32 = 1 << 6;
    pub const PORT_BLOCKED: u32 = 1 << 8;
}

/// `ofp_switch_features` after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

/// `ofp_switch_config` after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*`.
    pub flags: u16,
    /// Bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

/// `ofp_controller_role`.
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// `ofp_role_request` after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Role {
    pub role: u32,
    pub generation_id: u64,
}

/// `ofp_async_config` after the header: per message kind, the reasons
/// sent to a master/equal (index 0) and to a slave (index 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

/// `ofp_port_status` after the header.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PortStatus {
    /// `OFPPR_ADD` 0, `DELETE` 1, `MODIFY` 2.
    pub reason: u8,
    pub desc: Port,
}

/// One OpenFlow 1.3 message (the header's xid travels beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The versions of the bitmap element (`None`: no element, as an
    /// OpenFlow 1.0 peer sends it).
    Hello {
        bitmap: Option<Vec<u32>>,
    },
    /// An error; `data` holds the start of the offending message (for an
    /// experimenter error, the experimenter id first).
    Error {
        error: OfpError,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(Features),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PortStatus(PortStatus),
    FlowMod(FlowMod),
    FlowRemoved(FlowRemoved),
    PacketIn(PacketIn),
    PacketOut(PacketOut),
    MeterMod(MeterMod),
    GroupMod(GroupMod),
    PortMod(PortMod),
    TableMod(TableMod),
    /// A request has no queues (`queues` empty).
    QueueGetConfigRequest(QueueConfig),
    QueueGetConfigReply(QueueConfig),
    MultipartRequest {
        flags: u16,
        body: MpRequest,
    },
    MultipartReply {
        flags: u16,
        body: MpReply,
    },
    BarrierRequest,
    BarrierReply,
    RoleRequest(Role),
    RoleReply(Role),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    /// SET_ASYNC as 1.4 sends it: properties that change some of the
    /// masks (checked when parsed; applied by
    /// [`crate::versions::async_apply_v14`]).
    SetAsyncProps(Vec<u8>),
}

/// Whether a HELLO's bitmap has `version`.
pub fn bitmap_has(bitmap: &[u32], version: u8) -> bool {
    let (word, bit) = (usize::from(version / 32), version % 32);
    bitmap.get(word).is_some_and(|w| w & (1 << bit) != 0)
}

/// The bitmap of one version.
pub fn bitmap_of(version: u8) -> Vec<u32> {
    let mut b = vec![0u32; usize::from(version / 32) + 1];
    b[usize::from(version / 32)] |= 1 << (version % 32);
    b
}

/// Parses one whole message (what [`Framer`](crate::Framer) hands out).
/// A HELLO of any version parses (the version is negotiated from it);
/// anything else must be of a version this codec speaks
/// ([`VERSIONS`]), read in that version's encodings.
pub fn parse(buf: &[u8]) -> Result<(Header, Message), ParseError> {
    let h = Header::parse(&mut Reader::new(buf))?;
    let mut r = Reader::versioned(buf, h.version);
    r.skip(HEADER_LEN, "header")?;
    if usize::from(h.length) < HEADER_LEN {
        return Err(ParseError::ShortLength { length: h.length });
    }
    if usize::from(h.length) != buf.len() {
        return Err(ParseError::LengthMismatch {
            length: h.length,
            have: buf.len(),
        });
    }
    if h.ty == MsgType::Hello as u8 {
        return Ok((h, parse_hello(&mut r)?));
    }
    if !VERSIONS.contains(&h.version) {
        return Err(ParseError::BadVersion(h.version));
    }
    let ty = MsgType::of_version(h.ty, h.version).ok_or(ParseError::BadType(h.ty))?;
    let m = parse_body(ty, &mut r)?;
    Ok((h, m))
}

fn parse_hello(r: &mut Reader<'_>) -> Result<Message, ParseError> {
    let mut bitmap = None;
    // Elements: type, length (of the element without padding), body,
    // padded to 8. Unknown elements are skipped.
    while r.remaining() >= 4 {
        let ty = r.u16("hello element type")?;
        let len = usize::from(r.u16("hello element length")?);
        if len < 4 {
            return Err(ParseError::BadLength {
                what: "hello element",
                length: len,
            });
        }
        let mut body = r.sub(len - 4, "hello element")?;
        let pad = (8 - len % 8) % 8;
        r.skip(pad.min(r.remaining()), "hello element padding")?;
        if ty == HELLO_VERSIONBITMAP {
            let mut words = Vec::new();
            while body.remaining() >= 4 {
                words.push(body.u32("version bitmap")?);
            }
            bitmap = Some(words);
        }
    }
    Ok(Message::Hello { bitmap })
}

fn exact(r: &Reader<'_>, what: &'static str, len: usize) -> Result<(), ParseError> {
    if r.remaining() != len {
        return Err(ParseError::BadLength {
            what,
            length: r.remaining() + HEADER_LEN,
        });
    }
    Ok(())
}

fn parse_body(ty: MsgType, r: &mut Reader<'_>) -> Result<Message, ParseError> {
    use MsgType as T;
    let empty = |r: &Reader<'_>, what, m: Message| exact(r, what, 0).map(|_| m);
    Ok(match ty {
        T::Hello => unreachable!("parsed before"),
        T::Error => Message::Error {
            error: OfpError::new(r.u16("error.type")?, r.u16("error.code")?),
            data: r.rest().to_vec(),
        },
        T::EchoRequest => Message::EchoRequest(r.rest().to_vec()),
        T::EchoReply => Message::EchoReply(r.rest().to_vec()),
        T::Experimenter => Message::Experimenter {
            experimenter: r.u32("experimenter")?,
            exp_type: r.u32("experimenter.exp_type")?,
            data: r.rest().to_vec(),
        },
        T::FeaturesRequest => empty(r, "features request", Message::FeaturesRequest)?,
        T::FeaturesReply => {
            exact(r, "features reply", 24)?;
            let datapath_id = r.u64("features.datapath_id")?;
            let n_buffers = r.u32("features.n_buffers")?;
            let n_tables = r.u8("features.n_tables")?;
            let auxiliary_id = r.u8("features.auxiliary_id")?;
            r.skip(2, "features.pad")?;
            let capabilities = r.u32("features.capabilities")?;
            r.skip(4, "features.reserved")?;
            Message::FeaturesReply(Features {
                datapath_id,
                n_buffers,
                n_tables,
                auxiliary_id,
                capabilities,
            })
        }
        T::GetConfigRequest => empty(r, "get config request", Message::GetConfigRequest)?,
        T::GetConfigReply | T::SetConfig => {
            exact(r, "switch config", 4)?;
            let c = SwitchConfig {
                flags: r.u16("config.flags")?,
                miss_send_len: r.u16("config.miss_send_len")?,
            };
            if ty == T::SetConfig {
                Message::SetConfig(c)
            } else {
                Message::GetConfigReply(c)
            }
        }
        T::PortStatus if r.version() >= V14 => {
            let reason = r.u8("port_status.reason")?;
            r.skip(7, "port_status.pad")?;
            Message::PortStatus(PortStatus {
                reason,
                desc: crate::versions::port_parse_v14(r)?,
            })
        }
        T::PortStatus => {
            exact(r, "port status", 8 + PORT_LEN)?;
            let reason = r.u8("port_status.reason")?;
            r.skip(7, "port_status.pad")?;
            Message::PortStatus(PortStatus {
                reason,
                desc: Port::parse(r)?,
            })
        }
        T::FlowMod => Message::FlowMod(FlowMod::parse(r)?),
        T::FlowRemoved => Message::FlowRemoved(FlowRemoved::parse(r)?),
        T::PacketIn => Message::PacketIn(PacketIn::parse(r)?),
        T::PacketOut => Message::PacketOut(PacketOut::parse(r)?),
        T::MeterMod => Message::MeterMod(MeterMod::parse(r)?),
        T::GroupMod => Message::GroupMod(GroupMod::parse(r)?),
        T::PortMod => {
            if r.version() < V14 {
                exact(r, "port mod", 32)?;
            }
            Message::PortMod(PortMod::parse(r)?)
        }
        T::TableMod => {
            // 1.4 adds properties (eviction, vacancy): accepted, unused.
            if r.version() < V14 {
                exact(r, "table mod", 8)?;
            }
            Message::TableMod(TableMod::parse(r)?)
        }
        // 1.4's bundle messages are kept as ONF's 1.3 extension (the same
        // bodies), the form the switch acts on.
        T::BundleControl | T::BundleAddMessage => Message::Experimenter {
            experimenter: crate::bundle::ONF_VENDOR,
            exp_type: if ty == T::BundleControl {
                crate::bundle::ET_BUNDLE_CONTROL
            } else {
                crate::bundle::ET_BUNDLE_ADD_MESSAGE
            },
            data: r.rest().to_vec(),
        },
        T::RoleStatus | T::TableStatus | T::RequestForward | T::ControllerStatus => {
            return Err(ParseError::BadType(ty as u8))
        }
        T::SetAsync if r.version() >= V14 => {
            let body = r.rest().to_vec();
            crate::versions::async_apply_v14(&body, &mut AsyncConfig::default())?;
            Message::SetAsyncProps(body)
        }
        T::QueueGetConfigRequest => {
            exact(r, "queue get config request", 8)?;
            Message::QueueGetConfigRequest(QueueConfig::parse(r)?)
        }
        T::QueueGetConfigReply => Message::QueueGetConfigReply(QueueConfig::parse(r)?),
        T::MultipartRequest | T::MultipartReply => {
            let mty = r.u16("multipart.type")?;
            let flags = r.u16("multipart.flags")?;
            r.skip(4, "multipart.pad")?;
            if ty == T::MultipartRequest {
                Message::MultipartRequest {
                    flags,
                    body: MpRequest::parse(mty, r)?,
                }
            } else {
                Message::MultipartReply {
                    flags,
                    body: MpReply::parse(mty, r)?,
                }
            }
        }
        T::BarrierRequest => empty(r, "barrier request", Message::BarrierRequest)?,
        T::BarrierReply => empty(r, "barrier reply", Message::BarrierReply)?,
        T::RoleRequest | T::RoleReply => {
            exact(r, "role request", 16)?;
            let role = r.u32("role.role")?;
            r.skip(4, "role.pad")?;
            let v = Role {
                role,
                generation_id: r.u64("role.generation_id")?,
            };
            if ty == T::RoleRequest {
                Message::RoleRequest(v)
            } else {
                Message::RoleReply(v)
            }
        }
        T::GetAsyncRequest => empty(r, "get async request", Message::GetAsyncRequest)?,
        // Read back in tests: the masks from the properties.
        T::GetAsyncReply if r.version() >= V14 => {
            let mut c = AsyncConfig::default();
            crate::versions::async_apply_v14(r.rest(), &mut c)?;
            Message::GetAsyncReply(c)
        }
        T::GetAsyncReply | T::SetAsync => {
            exact(r, "async config", 24)?;
            let mut w = [0u32; 6];
            for v in &mut w {
                *v = r.u32("async config mask")?;
            }
            let c = AsyncConfig {
                packet_in_mask: [w[0], w[1]],
                port_status_mask: [w[2], w[3]],
                flow_removed_mask: [w[4], w[5]],
            };
            if ty == T::SetAsync {
                Message::SetAsync(c)
            } else {
                Message::GetAsyncReply(c)
            }
        }
    })
}

/// A message that does not fit the header's 16-bit length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("message of {0} bytes is over the 65,535-byte limit")]
pub struct TooLong(pub usize);

impl Message {
    /// The header type.
    pub fn ty(&self) -> MsgType {
        use MsgType as T;
        match self {
            Message::Hello { .. } => T::Hello,
            Message::Error { .. } => T::Error,
            Message::EchoRequest(_) => T::EchoRequest,
            Message::EchoReply(_) => T::EchoReply,
            Message::Experimenter { .. } => T::Experimenter,
            Message::FeaturesRequest => T::FeaturesRequest,
            Message::FeaturesReply(_) => T::FeaturesReply,
            Message::GetConfigRequest => T::GetConfigRequest,
            Message::GetConfigReply(_) => T::GetConfigReply,
            Message::SetConfig(_) => T::SetConfig,
            Message::PortStatus(_) => T::PortStatus,
            Message::FlowMod(_) => T::FlowMod,
            Message::FlowRemoved(_) => T::FlowRemoved,
            Message::PacketIn(_) => T::PacketIn,
            Message::PacketOut(_) => T::PacketOut,
            Message::MeterMod(_) => T::MeterMod,
            Message::GroupMod(_) => T::GroupMod,
            Message::PortMod(_) => T::PortMod,
            Message::TableMod(_) => T::TableMod,
            Message::QueueGetConfigRequest(_) => T::QueueGetConfigRequest,
            Message::QueueGetConfigReply(_) => T::QueueGetConfigReply,
            Message::MultipartRequest { .. } => T::MultipartRequest,
            Message::MultipartReply { .. } => T::MultipartReply,
            Message::BarrierRequest => T::BarrierRequest,
            Message::BarrierReply => T::BarrierReply,
            Message::RoleRequest(_) => T::RoleRequest,
            Message::RoleReply(_) => T::RoleReply,
            Message::GetAsyncRequest => T::GetAsyncRequest,
            Message::GetAsyncReply(_) => T::GetAsyncReply,
            Message::SetAsync(_) | Message::SetAsyncProps(_) => T::SetAsync,
        }
    }

    /// Appends the message with header `xid` to `out` (version 1.3).
    pub fn emit(&self, xid: u32, out: &mut Vec<u8>) -> Result<(), TooLong> {
        self.emit_as(VERSION, xid, out)
    }

    /// The message in `version`'s encodings (one of [`VERSIONS`]).
    pub fn emit_as(&self, version: u8, xid: u32, out: &mut Vec<u8>) -> Result<(), TooLong> {
        let start = out.len();
        let ty = match self {
            Message::Experimenter {
                experimenter: crate::bundle::ONF_VENDOR,
                exp_type,
                ..
            } if version >= V14 && crate::bundle::is_bundle_type(*exp_type) => {
                if *exp_type == crate::bundle::ET_BUNDLE_CONTROL {
                    MsgType::BundleControl
                } else {
                    MsgType::BundleAddMessage
                }
            }
            m => m.ty(),
        };
        Header {
            version,
            ty: ty as u8,
            length: 0,
            xid,
        }
        .emit(out);
        self.emit_body(version, out);
        let len = out.len() - start;
        if len > MAX_LEN {
            out.truncate(start);
            return Err(TooLong(len));
        }
        out[start + 2..start + 4].copy_from_slice(&(len as u16).to_be_bytes());
        Ok(())
    }

    /// The message as bytes.
    pub fn to_bytes(&self, xid: u32) -> Result<Vec<u8>, TooLong> {
        self.to_bytes_as(VERSION, xid)
    }

    /// The message as bytes of `version`.
    pub fn to_bytes_as(&self, version: u8, xid: u32) -> Result<Vec<u8>, TooLong> {
        let mut v = Vec::new();
        self.emit_as(version, xid, &mut v)?;
        Ok(v)
    }

    fn emit_body(&self, version: u8, out: &mut Vec<u8>) {
        use crate::versions as vs;
        let v14 = version >= V14;
        let v15 = version >= V15;
        match self {
            Message::Experimenter {
                experimenter: crate::bundle::ONF_VENDOR,
                exp_type,
                data,
            } if v14 && crate::bundle::is_bundle_type(*exp_type) => out.extend_from_slice(data),
            // ONF's bundle errors are 1.4's BUNDLE_FAILED, without the id.
            Message::Error { error, data } if v14 && crate::bundle::is_onf_error(*error) => {
                out.put_u16(vs::BUNDLE_FAILED);
                out.put_u16(error.code - 2300);
                out.extend_from_slice(data.get(4..).unwrap_or_default());
            }
            Message::PortStatus(p) if v14 => {
                out.put_u8(p.reason);
                out.put_zeros(7);
                vs::port_emit_v14(&p.desc, out);
            }
            Message::FlowRemoved(f) if v15 => vs::flow_removed_emit_v15(f, out),
            Message::PacketOut(p) if v15 => vs::packet_out_emit_v15(p, out),
            Message::GroupMod(g) if v15 => vs::group_mod_emit_v15(g, out),
            Message::FlowMod(f) if v15 => {
                let f = crate::flow::FlowMod {
                    matched: vs::match_for(&f.matched, version).into_owned(),
                    instructions: vs::instructions_v15(&f.instructions),
                    ..f.clone()
                };
                f.emit(out)
            }
            Message::GetAsyncReply(c) if v14 => vs::async_emit_v14(c, out),
            Message::SetAsync(c) if v14 => vs::async_emit_v14(c, out),
            Message::SetAsyncProps(b) => out.extend_from_slice(b),
            Message::Hello { bitmap } => {
                if let Some(words) = bitmap {
                    let len = 4 + 4 * words.len();
                    out.put_u16(HELLO_VERSIONBITMAP);
                    out.put_u16(len as u16);
                    words.iter().for_each(|w| out.put_u32(*w));
                    out.put_zeros((8 - len % 8) % 8);
                }
            }
            Message::Error { error, data } => {
                out.put_u16(error.ty);
                out.put_u16(error.code);
                out.extend_from_slice(data);
            }
            Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
            Message::Experimenter {
                experimenter,
                exp_type,
                data,
            } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.extend_from_slice(data);
            }
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply
            | Message::GetAsyncRequest => {}
            Message::FeaturesReply(f) => {
                out.put_u64(f.datapath_id);
                out.put_u32(f.n_buffers);
                out.put_u8(f.n_tables);
                out.put_u8(f.auxiliary_id);
                out.put_zeros(2);
                out.put_u32(f.capabilities);
                out.put_u32(0);
            }
            Message::GetConfigReply(c) | Message::SetConfig(c) => {
                out.put_u16(c.flags);
                out.put_u16(c.miss_send_len);
            }
            Message::PortStatus(p) => {
                out.put_u8(p.reason);
                out.put_zeros(7);
                p.desc.emit(out);
            }
            Message::FlowMod(f) => f.emit(out),
            Message::FlowRemoved(f) => f.emit(out),
            Message::PacketIn(p) => p.emit(out),
            Message::PacketOut(p) => p.emit(out),
            Message::MeterMod(m) => m.emit(out),
            Message::GroupMod(g) => g.emit(out),
            Message::PortMod(p) => p.emit(out),
            Message::TableMod(t) => t.emit(out),
            Message::QueueGetConfigRequest(q) | Message::QueueGetConfigReply(q) => q.emit(out),
            Message::MultipartRequest { flags, body } => {
                out.put_u16(body.ty());
                out.put_u16(*flags);
                out.put_zeros(4);
                body.emit(version, out);
            }
            Message::MultipartReply { flags, body } => {
                out.put_u16(body.ty());
                out.put_u16(*flags);
                out.put_zeros(4);
                body.emit(version, out);
            }
            Message::RoleRequest(r) | Message::RoleReply(r) => {
                out.put_u32(r.role);
                out.put_zeros(4);
                out.put_u64(r.generation_id);
            }
            Message::GetAsyncReply(c) | Message::SetAsync(c) => {
                for w in c
                    .packet_in_mask
                    .iter()
                    .chain(&c.port_status_mask)
                    .chain(&c.flow_removed_mask)
                {
                    out.put_u32(*w);
                }
            }
        }
    }
}

/// The ERROR answering `offending` (as data, up to [`ERROR_DATA_LEN`] bytes of it). An
/// experimenter error is Nicira's (the only experimenter whose errors the
/// switch sends): its body starts with the experimenter id, as OpenFlow
/// 1.2+ lays `ofp_error_experimenter_msg` out.
pub fn error_reply(error: OfpError, offending: &[u8]) -> Message {
    let mut data = Vec::new();
    if error.ty == crate::error::EXPERIMENTER_ERROR {
        // ONF's bundle errors (EXT-230) under ONF's id; every other
        // experimenter error here is Nicira's.
        let vendor = if crate::bundle::is_onf_error(error) {
            crate::bundle::ONF_VENDOR
        } else {
            crate::action::NX_VENDOR
        };
        data.extend_from_slice(&vendor.to_be_bytes());
    }
    data.extend_from_slice(&offending[..offending.len().min(ERROR_DATA_LEN)]);
    Message::Error { error, data }
}

//! MULTIPART requests and replies: the 16-byte header (type, flags) and
//! the bodies decoded so far; the others are carried as bytes with their
//! type, for the channel to answer.

use crate::error::ParseError;
use crate::flow::{AggregateReply, FlowStats, FlowStatsRequest};
use crate::group::{GroupDesc, GroupFeatures, GroupStats};
use crate::header::{Header, MsgType, MAX_LEN};
use crate::message::TooLong;
use crate::meter::{MeterConfig, MeterFeatures, MeterStats};
use crate::port::{Port, PortStatsEntry, PORT_LEN, PORT_STATS_LEN};
use crate::table::{TableFeatures, TableStats};
use crate::wire::{c_string, Put, Reader};

/// `ofp_multipart_type`.
pub mod mp_type {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`.
pub const MORE: u16 = 1;

/// Lengths of the DESC reply's strings (`DESC_STR_LEN`, `SERIAL_NUM_LEN`).
pub const DESC_STR_LEN: usize = 256;
pub const SERIAL_NUM_LEN: usize = 32;

/// `ofp_desc` (1056 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

impl Desc {
    fn parse(r: &mut Reader<'_>) -> Result<Desc, ParseError> {
        Ok(Desc {
            mfr_desc: c_string(r.bytes(DESC_STR_LEN, "desc.mfr_desc")?),
            hw_desc: c_string(r.bytes(DESC_STR_LEN, "desc.hw_desc")?),
            sw_desc: c_string(r.bytes(DESC_STR_LEN, "desc.sw_desc")?),
            serial_num: c_string(r.bytes(SERIAL_NUM_LEN, "desc.serial_num")?),
            dp_desc: c_string(r.bytes(DESC_STR_LEN, "desc.dp_desc")?),
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.put_str(&self.mfr_desc, DESC_STR_LEN);
        out.put_str(&self.hw_desc, DESC_STR_LEN);
        out.put_str(&self.sw_desc, DESC_STR_LEN);
        out.put_str(&self.serial_num, SERIAL_NUM_LEN);
        out.put_str(&self.dp_desc, DESC_STR_LEN);
    }
}

/// A multipart request's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MpRequest {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    /// The port (`OFPP_ANY`: all).
    PortStats(u32),
    /// The meter (`OFPM_ALL`: all).
    Meter(u32),
    MeterConfig(u32),
    MeterFeatures,
    /// Empty: a query; entries: a request to set (which a switch may
    /// refuse).
    TableFeatures(Vec<TableFeatures>),
    /// The port (`OFPP_ANY`: all; 1.3 and 1.4 ask for all).
    PortDesc(u32),
    /// The group (`OFPG_ALL`: all).
    Group(u32),
    /// The group (`OFPG_ALL`: all; 1.3 and 1.4 ask for all).
    GroupDesc(u32),
    GroupFeatures,
    /// A type whose body is not decoded here (yet): its bytes.
    Other {
        ty: u16,
        body: Vec<u8>,
    },
}

impl MpRequest {
    pub fn ty(&self) -> u16 {
        match self {
            MpRequest::Desc => mp_type::DESC,
            MpRequest::Flow(_) => mp_type::FLOW,
            MpRequest::Aggregate(_) => mp_type::AGGREGATE,
            MpRequest::Table => mp_type::TABLE,
            MpRequest::PortStats(_) => mp_type::PORT_STATS,
            MpRequest::Meter(_) => mp_type::METER,
            MpRequest::MeterConfig(_) => mp_type::METER_CONFIG,
            MpRequest::MeterFeatures => mp_type::METER_FEATURES,
            MpRequest::TableFeatures(_) => mp_type::TABLE_FEATURES,
            MpRequest::PortDesc(_) => mp_type::PORT_DESC,
            MpRequest::Group(_) => mp_type::GROUP,
            MpRequest::GroupDesc(_) => mp_type::GROUP_DESC,
            MpRequest::GroupFeatures => mp_type::GROUP_FEATURES,
            MpRequest::Other { ty, .. } => *ty,
        }
    }

    pub(crate) fn parse(ty: u16, r: &mut Reader<'_>) -> Result<MpRequest, ParseError> {
        let v15 = r.version() >= crate::header::V15;
        match ty {
            // 1.5 names the port or group.
            mp_type::PORT_DESC | mp_type::GROUP_DESC if v15 => {
                if r.remaining() != 8 {
                    return Err(ParseError::BadLength {
                        what: "port or group description request",
                        length: r.remaining(),
                    });
                }
                let id = r.u32("request.id")?;
                r.skip(4, "request.pad")?;
                Ok(if ty == mp_type::PORT_DESC {
                    MpRequest::PortDesc(id)
                } else {
                    MpRequest::GroupDesc(id)
                })
            }
            mp_type::DESC
            | mp_type::PORT_DESC
            | mp_type::TABLE
            | mp_type::GROUP_DESC
            | mp_type::GROUP_FEATURES
                if !r.is_empty() =>
            {
                Err(ParseError::BadLength {
                    what: "multipart request body (DESC, TABLE, PORT_DESC, GROUP_DESC and GROUP_FEATURES have none)",
                    length: r.remaining(),
                })
            }
            mp_type::DESC => Ok(MpRequest::Desc),
            mp_type::PORT_DESC => Ok(MpRequest::PortDesc(crate::port::reserved::ANY)),
            mp_type::FLOW => Ok(MpRequest::Flow(FlowStatsRequest::parse(r)?)),
            mp_type::AGGREGATE => Ok(MpRequest::Aggregate(FlowStatsRequest::parse(r)?)),
            mp_type::TABLE => Ok(MpRequest::Table),
            mp_type::GROUP_DESC => Ok(MpRequest::GroupDesc(crate::group::GROUP_ALL)),
            mp_type::GROUP_FEATURES => Ok(MpRequest::GroupFeatures),
            mp_type::METER_FEATURES => Ok(MpRequest::MeterFeatures),
            mp_type::METER | mp_type::METER_CONFIG | mp_type::GROUP => {
                if r.remaining() != 8 {
                    return Err(ParseError::BadLength {
                        what: "meter or group request",
                        length: r.remaining(),
                    });
                }
                let id = r.u32("request.id")?;
                r.skip(4, "request.pad")?;
                Ok(match ty {
                    mp_type::METER => MpRequest::Meter(id),
                    mp_type::METER_CONFIG => MpRequest::MeterConfig(id),
                    _ => MpRequest::Group(id),
                })
            }
            mp_type::PORT_STATS => {
                if r.remaining() != 8 {
                    return Err(ParseError::BadLength {
                        what: "port stats request",
                        length: r.remaining(),
                    });
                }
                let p = r.u32("port_stats.port_no")?;
                r.skip(4, "port_stats.pad")?;
                Ok(MpRequest::PortStats(p))
            }
            mp_type::TABLE_FEATURES => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(TableFeatures::parse(r)?);
                }
                Ok(MpRequest::TableFeatures(v))
            }
            0..=mp_type::PORT_DESC | mp_type::EXPERIMENTER => Ok(MpRequest::Other {
                ty,
                body: r.rest().to_vec(),
            }),
            _ => Err(ParseError::BadMultipart(ty)),
        }
    }

    pub(crate) fn emit(&self, version: u8, out: &mut Vec<u8>) {
        match self {
            MpRequest::Other { body, .. } => out.extend_from_slice(body),
            MpRequest::Flow(f) | MpRequest::Aggregate(f) => f.emit(out),
            MpRequest::TableFeatures(v) => v.iter().for_each(|t| t.emit(out)),
            MpRequest::PortStats(p)
            | MpRequest::Meter(p)
            | MpRequest::MeterConfig(p)
            | MpRequest::Group(p) => {
                out.put_u32(*p);
                out.put_zeros(4);
            }
            MpRequest::MeterFeatures => {}
            MpRequest::PortDesc(id) | MpRequest::GroupDesc(id) if version >= crate::header::V15 => {
                out.put_u32(*id);
                out.put_zeros(4);
            }
            MpRequest::Desc
            | MpRequest::PortDesc(_)
            | MpRequest::Table
            | MpRequest::GroupDesc(_)
            | MpRequest::GroupFeatures => {}
        }
    }
}

/// A multipart reply's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MpReply {
    Desc(Desc),
    Flow(Vec<FlowStats>),
    Aggregate(AggregateReply),
    Table(Vec<TableStats>),
    PortStats(Vec<PortStatsEntry>),
    Meter(Vec<MeterStats>),
    MeterConfig(Vec<MeterConfig>),
    MeterFeatures(MeterFeatures),
    TableFeatures(Vec<TableFeatures>),
    PortDesc(Vec<Port>),
    Group(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    GroupFeatures(GroupFeatures),
    Other { ty: u16, body: Vec<u8> },
}

impl MpReply {
    pub fn ty(&self) -> u16 {
        match self {
            MpReply::Desc(_) => mp_type::DESC,
            MpReply::Flow(_) => mp_type::FLOW,
            MpReply::Aggregate(_) => mp_type::AGGREGATE,
            MpReply::Table(_) => mp_type::TABLE,
            MpReply::PortStats(_) => mp_type::PORT_STATS,
            MpReply::Meter(_) => mp_type::METER,
            MpReply::MeterConfig(_) => mp_type::METER_CONFIG,
            MpReply::MeterFeatures(_) => mp_type::METER_FEATURES,
            MpReply::TableFeatures(_) => mp_type::TABLE_FEATURES,
            MpReply::PortDesc(_) => mp_type::PORT_DESC,
            MpReply::Group(_) => mp_type::GROUP,
            MpReply::GroupDesc(_) => mp_type::GROUP_DESC,
            MpReply::GroupFeatures(_) => mp_type::GROUP_FEATURES,
            MpReply::Other { ty, .. } => *ty,
        }
    }

    pub(crate) fn parse(ty: u16, r: &mut Reader<'_>) -> Result<MpReply, ParseError> {
        use crate::versions as vs;
        let (v14, v15) = (
            r.version() >= crate::header::V14,
            r.version() >= crate::header::V15,
        );
        match ty {
            mp_type::FLOW if v15 => Ok(MpReply::Flow(each(r, vs::flow_stats_parse_v15)?)),
            mp_type::AGGREGATE if v15 => Ok(MpReply::Aggregate(vs::aggregate_parse_v15(r)?)),
            mp_type::GROUP_DESC if v15 => {
                Ok(MpReply::GroupDesc(each(r, vs::group_desc_parse_v15)?))
            }
            mp_type::PORT_STATS if v14 => {
                Ok(MpReply::PortStats(each(r, vs::port_stats_parse_v14)?))
            }
            mp_type::PORT_DESC if v14 => Ok(MpReply::PortDesc(each(r, vs::port_parse_v14)?)),
            mp_type::DESC => {
                let d = Desc::parse(r)?;
                if !r.is_empty() {
                    return Err(ParseError::BadLength {
                        what: "desc reply",
                        length: r.remaining() + 1056,
                    });
                }
                Ok(MpReply::Desc(d))
            }
            mp_type::FLOW => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowStats::parse(r)?);
                }
                Ok(MpReply::Flow(v))
            }
            mp_type::AGGREGATE => Ok(MpReply::Aggregate(AggregateReply::parse(r)?)),
            mp_type::GROUP => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(GroupStats::parse(r)?);
                }
                Ok(MpReply::Group(v))
            }
            mp_type::GROUP_DESC => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(GroupDesc::parse(r)?);
                }
                Ok(MpReply::GroupDesc(v))
            }
            mp_type::GROUP_FEATURES => {
                if r.remaining() != GroupFeatures::LEN {
                    return Err(ParseError::BadLength {
                        what: "group features reply",
                        length: r.remaining(),
                    });
                }
                Ok(MpReply::GroupFeatures(GroupFeatures::parse(r)?))
            }
            mp_type::TABLE => {
                if r.remaining() % 24 != 0 {
                    return Err(ParseError::BadLength {
                        what: "table stats reply (a multiple of 24)",
                        length: r.remaining(),
                    });
                }
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(TableStats::parse(r)?);
                }
                Ok(MpReply::Table(v))
            }
            mp_type::TABLE_FEATURES => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(TableFeatures::parse(r)?);
                }
                Ok(MpReply::TableFeatures(v))
            }
            mp_type::METER => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(MeterStats::parse(r)?);
                }
                Ok(MpReply::Meter(v))
            }
            mp_type::METER_CONFIG => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(MeterConfig::parse(r)?);
                }
                Ok(MpReply::MeterConfig(v))
            }
            mp_type::METER_FEATURES => {
                let f = MeterFeatures::parse(r)?;
                if !r.is_empty() {
                    return Err(ParseError::BadLength {
                        what: "meter features reply",
                        length: r.remaining() + 16,
                    });
                }
                Ok(MpReply::MeterFeatures(f))
            }
            mp_type::PORT_STATS => {
                if r.remaining() % PORT_STATS_LEN != 0 {
                    return Err(ParseError::BadLength {
                        what: "port stats reply (a multiple of 112)",
                        length: r.remaining(),
                    });
                }
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(PortStatsEntry::parse(r)?);
                }
                Ok(MpReply::PortStats(v))
            }
            mp_type::PORT_DESC => {
                if r.remaining() % PORT_LEN != 0 {
                    return Err(ParseError::BadLength {
                        what: "port desc reply (a multiple of 64)",
                        length: r.remaining(),
                    });
                }
                let mut ports = Vec::with_capacity(r.remaining() / PORT_LEN);
                while !r.is_empty() {
                    ports.push(Port::parse(r)?);
                }
                Ok(MpReply::PortDesc(ports))
            }
            0..=mp_type::PORT_DESC | mp_type::EXPERIMENTER => Ok(MpReply::Other {
                ty,
                body: r.rest().to_vec(),
            }),
            _ => Err(ParseError::BadMultipart(ty)),
        }
    }

    pub(crate) fn emit(&self, version: u8, out: &mut Vec<u8>) {
        use crate::versions as vs;
        match self {
            MpReply::Desc(d) => d.emit(out),
            MpReply::Flow(v) => v.iter().for_each(|f| vs::flow_stats_emit(f, version, out)),
            MpReply::Aggregate(a) if version >= crate::header::V15 => {
                vs::aggregate_emit_v15(a, out)
            }
            MpReply::Aggregate(a) => a.emit(out),
            MpReply::Table(v) => v.iter().for_each(|t| t.emit(out)),
            MpReply::PortStats(v) => v.iter().for_each(|p| vs::port_stats_emit(p, version, out)),
            MpReply::Meter(v) => v.iter().for_each(|m| m.emit(out)),
            MpReply::MeterConfig(v) => v.iter().for_each(|m| m.emit(out)),
            MpReply::MeterFeatures(f) => f.emit(out),
            MpReply::TableFeatures(v) => v.iter().for_each(|t| t.emit(out)),
            MpReply::PortDesc(ports) => ports.iter().for_each(|p| vs::port_emit(p, version, out)),
            MpReply::Group(v) => v.iter().for_each(|g| g.emit(out)),
            MpReply::GroupDesc(v) => v.iter().for_each(|g| vs::group_desc_emit(g, version, out)),
            MpReply::GroupFeatures(f) => f.emit(out),
            MpReply::Other { body, .. } => out.extend_from_slice(body),
        }
    }
}

/// Entries read by `f` until `r` is empty.
fn each<T>(
    r: &mut Reader<'_>,
    f: fn(&mut Reader<'_>) -> Result<T, ParseError>,
) -> Result<Vec<T>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(f(r)?);
    }
    Ok(v)
}

/// Bytes of a multipart message before its body.
const MP_HEADER: usize = 16;

fn begin_reply(out: &mut Vec<u8>, version: u8, xid: u32, ty: u16) -> usize {
    let start = out.len();
    Header {
        version,
        ty: MsgType::MultipartReply as u8,
        length: 0,
        xid,
    }
    .emit(out);
    out.put_u16(ty);
    out.put_u16(0);
    out.put_zeros(4);
    start
}

fn finish_reply(out: &mut [u8], start: usize, flags: u16) {
    let len = (out.len() - start) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    out[start + 10..start + 12].copy_from_slice(&flags.to_be_bytes());
}

/// Appends a multipart reply of type `ty` carrying `items` to `out`, in
/// as many messages as the 64 KiB limit needs (REPLY_MORE on all but the
/// last). Each item is encoded once; one that does not fit moves whole to
/// the next message. Returns how many messages; an item too large for a
/// message on its own is `TooLong` (and nothing is appended).
pub fn emit_reply_parts<I>(
    out: &mut Vec<u8>,
    version: u8,
    xid: u32,
    ty: u16,
    items: impl IntoIterator<Item = I>,
    mut emit: impl FnMut(I, &mut Vec<u8>),
) -> Result<usize, TooLong> {
    let first = out.len();
    let mut start = begin_reply(out, version, xid, ty);
    let mut messages = 1;
    for it in items {
        let before = out.len();
        emit(it, out);
        if out.len() - start <= MAX_LEN {
            continue;
        }
        let len = out.len() - before;
        if before - start == MP_HEADER || MP_HEADER + len > MAX_LEN {
            out.truncate(first);
            return Err(TooLong(MP_HEADER + len));
        }
        let item = out.split_off(before);
        finish_reply(out, start, MORE);
        start = begin_reply(out, version, xid, ty);
        out.extend_from_slice(&item);
        messages += 1;
    }
    finish_reply(out, start, 0);
    Ok(messages)
}

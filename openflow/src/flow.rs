//! The flow messages: FLOW_MOD, FLOW_REMOVED, PACKET_IN, PACKET_OUT, and
//! the FLOW and AGGREGATE multipart bodies.

use crate::action::{
    emit_actions, emit_instructions, parse_actions, parse_instructions, Action, Instruction,
};
use crate::error::ParseError;
use crate::oxm::OxmMatch;
use crate::wire::{Put, Reader};

/// `ofp_flow_mod_command`.
pub mod command {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const MODIFY_STRICT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const DELETE_STRICT: u8 = 4;
}

/// `ofp_flow_mod_flags`.
pub mod flow_flags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
}

/// `OFP_NO_BUFFER`, `OFPTT_ALL`.
pub const NO_BUFFER: u32 = 0xffff_ffff;
pub const TABLE_ALL: u8 = 0xff;
pub use crate::group::GROUP_ANY;

/// `ofp_flow_mod` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    /// Eviction precedence (1.4+; 1.3 has padding there).
    pub importance: u16,
    pub matched: OxmMatch,
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<FlowMod, ParseError> {
        let cookie = r.u64("flow_mod.cookie")?;
        let cookie_mask = r.u64("flow_mod.cookie_mask")?;
        let table_id = r.u8("flow_mod.table_id")?;
        let command = r.u8("flow_mod.command")?;
        let idle_timeout = r.u16("flow_mod.idle_timeout")?;
        let hard_timeout = r.u16("flow_mod.hard_timeout")?;
        let priority = r.u16("flow_mod.priority")?;
        let buffer_id = r.u32("flow_mod.buffer_id")?;
        let out_port = r.u32("flow_mod.out_port")?;
        let out_group = r.u32("flow_mod.out_group")?;
        let flags = r.u16("flow_mod.flags")?;
        let importance = match r.u16("flow_mod.importance")? {
            _ if r.version() < crate::header::V14 => 0,
            v => v,
        };
        let matched = OxmMatch::parse(r)?;
        let instructions = parse_instructions(r)?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            importance,
            matched,
            instructions,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        out.put_u8(self.table_id);
        out.put_u8(self.command);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.priority);
        out.put_u32(self.buffer_id);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_u16(self.flags);
        out.put_u16(self.importance);
        self.matched.emit(out);
        emit_instructions(&self.instructions, out);
    }
}

/// `ofp_flow_removed_reason`.
pub mod removed_reason {
    pub const IDLE_TIMEOUT: u8 = 0;
    pub const HARD_TIMEOUT: u8 = 1;
    pub const DELETE: u8 = 2;
    pub const GROUP_DELETE: u8 = 3;
}

/// `ofp_flow_removed` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matched: OxmMatch,
}

impl FlowRemoved {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<FlowRemoved, ParseError> {
        if r.version() >= crate::header::V15 {
            return crate::versions::flow_removed_parse_v15(r);
        }
        let f = FlowRemoved {
            cookie: r.u64("flow_removed.cookie")?,
            priority: r.u16("flow_removed.priority")?,
            reason: r.u8("flow_removed.reason")?,
            table_id: r.u8("flow_removed.table_id")?,
            duration_sec: r.u32("flow_removed.duration_sec")?,
            duration_nsec: r.u32("flow_removed.duration_nsec")?,
            idle_timeout: r.u16("flow_removed.idle_timeout")?,
            hard_timeout: r.u16("flow_removed.hard_timeout")?,
            packet_count: r.u64("flow_removed.packet_count")?,
            byte_count: r.u64("flow_removed.byte_count")?,
            matched: OxmMatch::parse(r)?,
        };
        Ok(f)
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u64(self.cookie);
        out.put_u16(self.priority);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.matched.emit(out);
    }
}

/// `ofp_packet_in_reason`.
pub mod packet_in_reason {
    pub const NO_MATCH: u8 = 0;
    pub const ACTION: u8 = 1;
    pub const INVALID_TTL: u8 = 2;
}

/// `ofp_packet_in` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub matched: OxmMatch,
    pub data: Vec<u8>,
}

impl PacketIn {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<PacketIn, ParseError> {
        let buffer_id = r.u32("packet_in.buffer_id")?;
        let total_len = r.u16("packet_in.total_len")?;
        let reason = r.u8("packet_in.reason")?;
        let table_id = r.u8("packet_in.table_id")?;
        let cookie = r.u64("packet_in.cookie")?;
        let matched = OxmMatch::parse(r)?;
        r.skip(2, "packet_in.pad")?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            matched,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.buffer_id);
        out.put_u16(self.total_len);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u64(self.cookie);
        self.matched.emit(out);
        out.put_zeros(2);
        out.extend_from_slice(&self.data);
    }
}

/// Nicira's packet-in formats (`NXT_SET_PACKET_IN_FORMAT`, subtype 16,
/// a 32-bit format) and `NXT_PACKET_IN2` (subtype 30), as Open vSwitch
/// sends it to a connection that asked for it (`ovs-ofctl monitor` does):
/// the standard packet-in's contents as properties.
pub mod nx_packet_in {
    pub const SET_FORMAT: u32 = 16;
    pub const PACKET_IN2: u32 = 30;
    /// `NXPIF_STANDARD`, `NXPIF_NXT_PACKET_IN`, `NXPIF_NXT_PACKET_IN2`.
    pub const FORMAT_STANDARD: u32 = 0;
    pub const FORMAT_NXT_PACKET_IN: u32 = 1;
    pub const FORMAT_NXT_PACKET_IN2: u32 = 2;
    /// `NXPINT_*` property types.
    pub const PROP_PACKET: u16 = 0;
    pub const PROP_FULL_LEN: u16 = 1;
    pub const PROP_BUFFER_ID: u16 = 2;
    pub const PROP_TABLE_ID: u16 = 3;
    pub const PROP_COOKIE: u16 = 4;
    pub const PROP_REASON: u16 = 5;
    pub const PROP_METADATA: u16 = 6;
    /// What the `controller(userdata=...)` action carried.
    pub const PROP_USERDATA: u16 = 7;
    /// `controller(pause)`'s continuation: opaque to the controller, sent
    /// back in `NXT_RESUME`.
    pub const PROP_CONTINUATION: u16 = 8;
    /// `NXT_RESUME`: a paused packet sent back (the body is a packet-in2's).
    pub const RESUME: u32 = 28;
    /// The one property inside this switch's continuations: the frozen
    /// state's id and [`CONTINUATION_MAGIC`].
    pub const CONTINUATION_STATE: u16 = 0x8000;
    pub const CONTINUATION_MAGIC: u32 = 0x4553_5743;
    /// `NXR_STALE` (Nicira's experimenter error 35): a continuation this
    /// switch did not make, or whose state is gone.
    pub const STALE: crate::error::OfpError =
        crate::error::OfpError::new(crate::error::EXPERIMENTER_ERROR, 35);
    /// A cookie of all ones: no rule sent the packet (a PACKET_OUT's);
    /// the property is left out.
    pub const NO_COOKIE: u64 = u64::MAX;
}

/// One property: type, length (header and value), value, zeros to 8.
pub(crate) fn put_prop(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.put_u16(ty);
    out.put_u16(len as u16);
    out.extend_from_slice(value);
    out.put_zeros((8 - len % 8) % 8);
}

impl PacketIn {
    /// The body of `NXT_PACKET_IN2` (after the experimenter header):
    /// the packet, its full length when truncated, the buffer id when
    /// buffered, the table, the cookie unless [`nx_packet_in::NO_COOKIE`],
    /// the reason and the match's fields as metadata.
    pub fn nx_packet_in2(&self) -> Vec<u8> {
        self.nx_packet_in2_paused(&[], None)
    }

    /// [`nx_packet_in2`](Self::nx_packet_in2) with a controller action's
    /// userdata (none when empty) and, for a `controller(pause)`, the
    /// continuation of frozen state `id`: nested
    /// properties 8-aligned after the property header (as Open vSwitch's
    /// clients read and send back a continuation), this switch's one
    /// property holding the id.
    pub fn nx_packet_in2_paused(&self, userdata: &[u8], continuation: Option<u32>) -> Vec<u8> {
        use nx_packet_in as nx;
        let mut out = Vec::with_capacity(self.data.len() + 64);
        put_prop(&mut out, nx::PROP_PACKET, &self.data);
        if usize::from(self.total_len) != self.data.len() {
            put_prop(
                &mut out,
                nx::PROP_FULL_LEN,
                &u32::from(self.total_len).to_be_bytes(),
            );
        }
        if self.buffer_id != NO_BUFFER {
            put_prop(&mut out, nx::PROP_BUFFER_ID, &self.buffer_id.to_be_bytes());
        }
        put_prop(&mut out, nx::PROP_TABLE_ID, &[self.table_id]);
        if self.cookie != nx::NO_COOKIE {
            // A 64-bit value is 8-aligned: 4 zero bytes before it.
            let mut v = vec![0; 4];
            v.extend_from_slice(&self.cookie.to_be_bytes());
            put_prop(&mut out, nx::PROP_COOKIE, &v);
        }
        put_prop(&mut out, nx::PROP_REASON, &[self.reason]);
        let mut fields = Vec::new();
        self.matched.fields.iter().for_each(|f| f.emit(&mut fields));
        put_prop(&mut out, nx::PROP_METADATA, &fields);
        if !userdata.is_empty() {
            put_prop(&mut out, nx::PROP_USERDATA, userdata);
        }
        if let Some(id) = continuation {
            let mut inner = vec![0; 4];
            let mut state = id.to_be_bytes().to_vec();
            state.extend_from_slice(&nx::CONTINUATION_MAGIC.to_be_bytes());
            put_prop(&mut inner, nx::CONTINUATION_STATE, &state);
            put_prop(&mut out, nx::PROP_CONTINUATION, &inner);
        }
        out
    }

    /// The frozen state id of an `NXT_RESUME` body's continuation (one
    /// of this switch's), `None` when it has none or another's.
    pub fn continuation_of(body: &[u8]) -> Option<u32> {
        use nx_packet_in as nx;
        let mut r = Reader::new(body);
        while !r.is_empty() {
            let ty = r.u16("property.type").ok()?;
            let len = usize::from(r.u16("property.length").ok()?);
            let value = r.bytes(len.checked_sub(4)?, "property").ok()?;
            r.skip((8 - len % 8) % 8, "property padding").ok()?;
            if ty != nx::PROP_CONTINUATION {
                continue;
            }
            let mut v = Reader::new(value);
            v.skip(4, "continuation padding").ok()?;
            let inner_ty = v.u16("continuation.type").ok()?;
            let inner_len = v.u16("continuation.length").ok()?;
            let id = v.u32("continuation.id").ok()?;
            let magic = v.u32("continuation.magic").ok()?;
            return (inner_ty == nx::CONTINUATION_STATE
                && inner_len == 12
                && magic == nx::CONTINUATION_MAGIC)
                .then_some(id);
        }
        None
    }

    /// Decodes an `NXT_PACKET_IN2` body ([`nx_packet_in2`](Self::nx_packet_in2)'s);
    /// unknown properties are skipped.
    pub fn from_nx_packet_in2(body: &[u8]) -> Result<PacketIn, ParseError> {
        use nx_packet_in as nx;
        let mut r = Reader::new(body);
        let mut pin = PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 0,
            reason: 0,
            table_id: 0,
            cookie: nx::NO_COOKIE,
            matched: OxmMatch::default(),
            data: Vec::new(),
        };
        let mut full_len = None;
        while !r.is_empty() {
            let ty = r.u16("packet_in2.property.type")?;
            let len = usize::from(r.u16("packet_in2.property.length")?);
            let value = r.bytes(len.saturating_sub(4), "packet_in2.property")?;
            r.skip((8 - len % 8) % 8, "packet_in2.property padding")?;
            let mut v = Reader::new(value);
            match ty {
                nx::PROP_PACKET => pin.data = value.to_vec(),
                nx::PROP_FULL_LEN => full_len = Some(v.u32("packet_in2.full_len")?),
                nx::PROP_BUFFER_ID => pin.buffer_id = v.u32("packet_in2.buffer_id")?,
                nx::PROP_TABLE_ID => pin.table_id = v.u8("packet_in2.table_id")?,
                nx::PROP_COOKIE => {
                    v.skip(4, "packet_in2.cookie padding")?;
                    pin.cookie = v.u64("packet_in2.cookie")?;
                }
                nx::PROP_REASON => pin.reason = v.u8("packet_in2.reason")?,
                nx::PROP_METADATA => {
                    while !v.is_empty() {
                        let f = crate::oxm::Oxm::parse(&mut v, "packet_in2.metadata")?;
                        pin.matched.fields.push(f);
                    }
                }
                _ => {}
            }
        }
        // xregs and xxregs as the registers they span, as in any match.
        crate::regs::narrow_match(&mut pin.matched).map_err(|reg| ParseError::Invalid {
            what: "packet_in2.metadata",
            detail: format!("register {reg} appears twice"),
            error: crate::error::OfpError::new(4, 10),
        })?;
        let total = full_len.map_or(pin.data.len(), |n| n as usize);
        pin.total_len = total.min(usize::from(u16::MAX)) as u16;
        Ok(pin)
    }
}

/// `ofp_packet_out` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

impl PacketOut {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<PacketOut, ParseError> {
        if r.version() >= crate::header::V15 {
            return crate::versions::packet_out_parse_v15(r);
        }
        let buffer_id = r.u32("packet_out.buffer_id")?;
        let in_port = r.u32("packet_out.in_port")?;
        let alen = usize::from(r.u16("packet_out.actions_len")?);
        r.skip(6, "packet_out.pad")?;
        let mut a = r.sub(alen, "packet_out.actions")?;
        let actions = parse_actions(&mut a)?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.buffer_id);
        out.put_u32(self.in_port);
        let at = out.len();
        out.put_u16(0);
        out.put_zeros(6);
        let start = out.len();
        emit_actions(&self.actions, out);
        let alen = (out.len() - start) as u16;
        out[at..at + 2].copy_from_slice(&alen.to_be_bytes());
        out.extend_from_slice(&self.data);
    }
}

/// The FLOW and AGGREGATE multipart request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matched: OxmMatch,
}

impl FlowStatsRequest {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<FlowStatsRequest, ParseError> {
        let table_id = r.u8("flow_stats.table_id")?;
        r.skip(3, "flow_stats.pad")?;
        let out_port = r.u32("flow_stats.out_port")?;
        let out_group = r.u32("flow_stats.out_group")?;
        r.skip(4, "flow_stats.pad2")?;
        let cookie = r.u64("flow_stats.cookie")?;
        let cookie_mask = r.u64("flow_stats.cookie_mask")?;
        let matched = OxmMatch::parse(r)?;
        if !r.is_empty() {
            return Err(ParseError::BadLength {
                what: "flow stats request",
                length: r.remaining(),
            });
        }
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie,
            cookie_mask,
            matched,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.put_zeros(3);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_zeros(4);
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        self.matched.emit(out);
    }
}

/// One `ofp_flow_stats` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matched: OxmMatch,
    pub instructions: Vec<Instruction>,
    /// Seconds since a packet last hit the flow (1.5's OXS idle time;
    /// 1.3 carries none).
    pub idle_sec: u32,
    /// Eviction precedence (1.4+).
    pub importance: u16,
}

impl FlowStats {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<FlowStats, ParseError> {
        let mut b = r.entry(48, "flow stats entry")?;
        let table_id = b.u8("flow_stats.table_id")?;
        b.skip(1, "flow_stats.pad")?;
        let duration_sec = b.u32("flow_stats.duration_sec")?;
        let duration_nsec = b.u32("flow_stats.duration_nsec")?;
        let priority = b.u16("flow_stats.priority")?;
        let idle_timeout = b.u16("flow_stats.idle_timeout")?;
        let hard_timeout = b.u16("flow_stats.hard_timeout")?;
        let flags = b.u16("flow_stats.flags")?;
        // 1.4+: the importance, then padding (1.3: padding).
        let importance = match b.u16("flow_stats.importance")? {
            _ if b.version() < crate::header::V14 => 0,
            v => v,
        };
        b.skip(2, "flow_stats.pad2")?;
        let f = FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie: b.u64("flow_stats.cookie")?,
            packet_count: b.u64("flow_stats.packet_count")?,
            byte_count: b.u64("flow_stats.byte_count")?,
            matched: OxmMatch::parse(&mut b)?,
            instructions: parse_instructions(&mut b)?,
            idle_sec: 0,
            importance,
        };
        Ok(f)
    }

    /// Appends the entry.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.put_u8(0);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.flags);
        out.put_zeros(4);
        out.put_u64(self.cookie);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.matched.emit(out);
        emit_instructions(&self.instructions, out);
        let len = (out.len() - start) as u16;
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// `ofp_aggregate_stats_reply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AggregateReply {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

impl AggregateReply {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<AggregateReply, ParseError> {
        let a = AggregateReply {
            packet_count: r.u64("aggregate.packet_count")?,
            byte_count: r.u64("aggregate.byte_count")?,
            flow_count: r.u32("aggregate.flow_count")?,
        };
        r.skip(4, "aggregate.pad")?;
        Ok(a)
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        out.put_u32(self.flow_count);
        out.put_zeros(4);
    }
}

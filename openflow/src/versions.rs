//! The encodings OpenFlow 1.4 and 1.5 change. Messages are kept in one
//! form (1.3's); this module reads and writes the bodies whose layout
//! differs, as Open vSwitch 3.1 reads and writes them:
//!
//! - 1.4: ports (`ofp14_port` with an Ethernet property) in PORT_STATUS
//!   and PORT_DESC, port statistics with a property, PORT_MOD with a
//!   property, TABLE_MOD with properties, asynchronous configuration as
//!   properties, bundles as messages of their own (types 33 and 34, with
//!   the bodies of ONF's 1.3 extension) and their errors as type 17;
//! - 1.5: PACKET_OUT with a match, GROUP_MOD and GROUP_DESC with bucket
//!   ids and properties, FLOW_REMOVED and the FLOW and AGGREGATE replies
//!   with statistics as OXS, the registers of a match as
//!   `OXM_OF_PKT_REG<n>`, `move` as `OFPAT_COPY_FIELD`, `load` as a masked
//!   `set_field`, and the meter as an action.

use crate::action::{emit_actions, emit_instructions, parse_actions, Action, Instruction};
use crate::error::{OfpError, ParseError};
use crate::flow::{AggregateReply, FlowRemoved, FlowStats, PacketOut};
use crate::group::{Bucket, GroupDesc, GroupMod, GROUP_ANY};
use crate::message::AsyncConfig;
use crate::oxm::{field_spec, Oxm, OxmMatch};
use crate::port::{Port, PortStatsEntry, PORT_NAME_LEN};
use crate::wire::{patch_len, Put, Reader};
use crate::{V14, V15};

/// `OFPET_BUNDLE_FAILED` in 1.4 and later (ONF's 1.3 extension sends
/// them as experimenter errors 2300 + code).
pub const BUNDLE_FAILED: u16 = 17;

/// `OFPP_CONTROLLER`: a 1.5 PACKET_OUT's port when its match has none.
const PORT_CONTROLLER: u32 = 0xffff_fffd;

/// `OFPXSC_OPENFLOW_BASIC`: the class of the statistics 1.5 sends as OXS.
const OXS_CLASS: u32 = 0x8002;
/// `OFPXST_OFB_*`.
mod oxs {
    pub const DURATION: u8 = 0;
    pub const IDLE_TIME: u8 = 1;
    pub const FLOW_COUNT: u8 = 3;
    pub const PACKET_COUNT: u8 = 4;
    pub const BYTE_COUNT: u8 = 5;
}

fn put_oxs(out: &mut Vec<u8>, field: u8, value: &[u8]) {
    out.put_u32((OXS_CLASS << 16) | (u32::from(field) << 9) | value.len() as u32);
    out.extend_from_slice(value);
}

/// `ofp_oxs_stat`: reserved, length, the statistics, zeros to 8.
/// `None` leaves a statistic out.
fn put_stats(
    out: &mut Vec<u8>,
    duration: Option<(u32, u32)>,
    idle_sec: Option<u32>,
    packets: u64,
    bytes: u64,
    flows: Option<u32>,
) {
    let start = out.len();
    out.put_u16(0);
    out.put_u16(0);
    if let Some((s, ns)) = duration {
        put_oxs(
            out,
            oxs::DURATION,
            &((u64::from(s) << 32) | u64::from(ns)).to_be_bytes(),
        );
    }
    if let Some(i) = idle_sec {
        put_oxs(out, oxs::IDLE_TIME, &(u64::from(i) << 32).to_be_bytes());
    }
    put_oxs(out, oxs::PACKET_COUNT, &packets.to_be_bytes());
    put_oxs(out, oxs::BYTE_COUNT, &bytes.to_be_bytes());
    if let Some(f) = flows {
        put_oxs(out, oxs::FLOW_COUNT, &f.to_be_bytes());
    }
    patch_len(out, start, start + 2);
    let len = out.len() - start;
    out.put_zeros((8 - len % 8) % 8);
}

/// Statistics read back from OXS (tests and tools): duration, packets,
/// bytes, flows.
pub fn parse_stats(r: &mut Reader<'_>) -> Result<(u64, u64, u64, u32), ParseError> {
    r.skip(2, "oxs_stat.reserved")?;
    let len = usize::from(r.u16("oxs_stat.length")?);
    if len < 4 {
        return Err(ParseError::BadLength {
            what: "oxs stat",
            length: len,
        });
    }
    let mut b = r.sub(len - 4, "oxs stats")?;
    r.skip((8 - len % 8) % 8, "oxs_stat.pad")?;
    let (mut d, mut p, mut by, mut f) = (0, 0, 0, 0);
    while !b.is_empty() {
        let h = b.u32("oxs header")?;
        let field = ((h >> 9) & 0x7f) as u8;
        let v = b.bytes((h & 0xff) as usize, "oxs value")?;
        let n = v.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x));
        match field {
            oxs::DURATION => d = n,
            oxs::PACKET_COUNT => p = n,
            oxs::BYTE_COUNT => by = n,
            oxs::FLOW_COUNT => f = n as u32,
            _ => {}
        }
    }
    Ok((d, p, by, f))
}

/// Actions as 1.5 writes them: `move` as COPY_FIELD, `load` as a
/// (masked) set_field, inside `ct()` too.
pub fn actions_v15(actions: &[Action]) -> Vec<Action> {
    actions.iter().map(action_v15).collect()
}

fn action_v15(a: &Action) -> Action {
    match a {
        Action::NxRegMove(c) => Action::CopyField(*c),
        Action::NxRegLoad2(o) => Action::SetField(o.clone()),
        Action::NxRegLoad {
            ofs,
            n_bits,
            dst,
            value,
        } => {
            let (class, field) = ((*dst >> 16) as u16, ((*dst >> 9) & 0x7f) as u8);
            let Some((width, _)) = field_spec(class, field).filter(|(w, _)| *w <= 16) else {
                return a.clone();
            };
            let (v, m) = crate::regs::load_bits(*ofs, *n_bits, *value);
            let bytes = |x: u128| x.to_be_bytes()[16 - width..].to_vec();
            let full = m
                == (if width == 16 {
                    u128::MAX
                } else {
                    (1u128 << (8 * width)) - 1
                });
            Action::SetField(Oxm {
                class,
                field,
                value: bytes(v),
                mask: (!full).then(|| bytes(m)),
            })
        }
        Action::NxCt(ct) => {
            let mut ct = ct.clone();
            ct.actions = actions_v15(&ct.actions);
            Action::NxCt(ct)
        }
        other => other.clone(),
    }
}

/// Instructions as 1.5 writes them: the meter is the first of the
/// apply-actions (one is made for it), the actions as [`actions_v15`].
pub fn instructions_v15(ins: &[Instruction]) -> Vec<Instruction> {
    let meter = ins.iter().find_map(|i| match i {
        Instruction::Meter(m) => Some(*m),
        _ => None,
    });
    let mut out: Vec<Instruction> = Vec::with_capacity(ins.len());
    let mut placed = meter.is_none();
    for i in ins {
        match i {
            Instruction::Meter(_) => {}
            Instruction::ApplyActions(a) => {
                let mut v = Vec::with_capacity(a.len() + 1);
                if !placed {
                    v.push(Action::Meter(meter.unwrap_or_default()));
                    placed = true;
                }
                v.extend(actions_v15(a));
                out.push(Instruction::ApplyActions(v));
            }
            Instruction::WriteActions(a) => out.push(Instruction::WriteActions(actions_v15(a))),
            other => out.push(other.clone()),
        }
    }
    if let Some(m) = meter.filter(|_| !placed) {
        out.insert(0, Instruction::ApplyActions(vec![Action::Meter(m)]));
    }
    out
}

/// A match as `version` writes it.
pub fn match_for(m: &OxmMatch, version: u8) -> std::borrow::Cow<'_, OxmMatch> {
    if version >= V15 {
        let mut m = crate::regs::xregs_for_v15(m);
        // tcp_flags: 1.5's basic field, not ONF's.
        for o in &mut m.fields {
            if o.class == crate::oxm::CLASS_ONF && o.field == 42 {
                o.class = crate::oxm::CLASS_BASIC;
            }
        }
        std::borrow::Cow::Owned(m)
    } else {
        std::borrow::Cow::Borrowed(m)
    }
}

/// `ofp14_port` with its Ethernet property (72 bytes).
pub fn port_emit_v14(p: &Port, out: &mut Vec<u8>) {
    let start = out.len();
    out.put_u32(p.port_no);
    out.put_u16(0);
    out.put_zeros(2);
    out.extend_from_slice(&p.hw_addr);
    out.put_zeros(2);
    out.put_str(&p.name, PORT_NAME_LEN);
    out.put_u32(p.config);
    out.put_u32(p.state);
    // OFPPDPT14_ETHERNET.
    out.put_u16(0);
    out.put_u16(32);
    out.put_zeros(4);
    for v in [
        p.curr,
        p.advertised,
        p.supported,
        p.peer,
        p.curr_speed,
        p.max_speed,
    ] {
        out.put_u32(v);
    }
    patch_len(out, start, start + 4);
}

/// `ofp14_port` read back (its Ethernet property, others skipped).
pub fn port_parse_v14(r: &mut Reader<'_>) -> Result<Port, ParseError> {
    let port_no = r.u32("port.port_no")?;
    let len = usize::from(r.u16("port.length")?);
    if len < 40 {
        return Err(ParseError::BadLength {
            what: "port (1.4)",
            length: len,
        });
    }
    let mut b = r.sub(len - 6, "port")?;
    b.skip(2, "port.pad")?;
    let hw_addr = b.array("port.hw_addr")?;
    b.skip(2, "port.pad2")?;
    let name = crate::wire::c_string(b.bytes(PORT_NAME_LEN, "port.name")?);
    let mut p = Port {
        port_no,
        hw_addr,
        name,
        config: b.u32("port.config")?,
        state: b.u32("port.state")?,
        ..Port::default()
    };
    while b.remaining() >= 4 {
        let ty = b.u16("port prop.type")?;
        let plen = usize::from(b.u16("port prop.length")?);
        let mut prop = b.sub(plen.saturating_sub(4), "port prop")?;
        b.skip((8 - plen % 8) % 8, "port prop pad")?;
        if ty == 0 {
            prop.skip(4, "ethernet.pad")?;
            p.curr = prop.u32("ethernet.curr")?;
            p.advertised = prop.u32("ethernet.advertised")?;
            p.supported = prop.u32("ethernet.supported")?;
            p.peer = prop.u32("ethernet.peer")?;
            p.curr_speed = prop.u32("ethernet.curr_speed")?;
            p.max_speed = prop.u32("ethernet.max_speed")?;
        }
    }
    Ok(p)
}

/// `ofp14_port_stats` with its Ethernet property (120 bytes).
pub fn port_stats_emit_v14(s: &PortStatsEntry, out: &mut Vec<u8>) {
    let start = out.len();
    out.put_u16(0);
    out.put_zeros(2);
    out.put_u32(s.port_no);
    out.put_u32(s.duration_sec);
    out.put_u32(s.duration_nsec);
    for v in [
        s.rx_packets,
        s.tx_packets,
        s.rx_bytes,
        s.tx_bytes,
        s.rx_dropped,
        s.tx_dropped,
        s.rx_errors,
        s.tx_errors,
    ] {
        out.put_u64(v);
    }
    // OFPPSPT14_ETHERNET.
    out.put_u16(0);
    out.put_u16(40);
    out.put_zeros(4);
    for v in [s.rx_frame_err, s.rx_over_err, s.rx_crc_err, s.collisions] {
        out.put_u64(v);
    }
    patch_len(out, start, start);
}

/// One FLOW reply entry as `version` writes it.
pub fn flow_stats_emit(f: &FlowStats, version: u8, out: &mut Vec<u8>) {
    if version < V15 {
        let start = out.len();
        f.emit(out);
        // 1.4 puts the importance where 1.3 has padding.
        if version >= V14 {
            out[start + 20..start + 22].copy_from_slice(&f.importance.to_be_bytes());
        }
        return;
    }
    let start = out.len();
    // ofp15_flow_desc.
    out.put_u16(0);
    out.put_zeros(2);
    out.put_u8(f.table_id);
    out.put_u8(0);
    out.put_u16(f.priority);
    out.put_u16(f.idle_timeout);
    out.put_u16(f.hard_timeout);
    out.put_u16(f.flags);
    out.put_u16(f.importance);
    out.put_u64(f.cookie);
    match_for(&f.matched, version).emit(out);
    put_stats(
        out,
        Some((f.duration_sec, f.duration_nsec)),
        Some(f.idle_sec),
        f.packet_count,
        f.byte_count,
        None,
    );
    emit_instructions(&instructions_v15(&f.instructions), out);
    patch_len(out, start, start);
}

/// The AGGREGATE reply as 1.5 writes it.
pub fn aggregate_emit_v15(a: &AggregateReply, out: &mut Vec<u8>) {
    put_stats(
        out,
        None,
        None,
        a.packet_count,
        a.byte_count,
        Some(a.flow_count),
    );
}

/// FLOW_REMOVED as 1.5 writes it.
pub fn flow_removed_emit_v15(f: &FlowRemoved, out: &mut Vec<u8>) {
    out.put_u8(f.table_id);
    out.put_u8(f.reason);
    out.put_u16(f.priority);
    out.put_u16(f.idle_timeout);
    out.put_u16(f.hard_timeout);
    out.put_u64(f.cookie);
    match_for(&f.matched, V15).emit(out);
    put_stats(
        out,
        Some((f.duration_sec, f.duration_nsec)),
        None,
        f.packet_count,
        f.byte_count,
        None,
    );
}

/// `ofp15_packet_out`: buffer id, actions length, a match (its IN_PORT
/// is the packet's port), actions, data.
pub fn packet_out_parse_v15(r: &mut Reader<'_>) -> Result<PacketOut, ParseError> {
    let buffer_id = r.u32("packet_out.buffer_id")?;
    let alen = usize::from(r.u16("packet_out.actions_len")?);
    r.skip(2, "packet_out.pad")?;
    let m = OxmMatch::parse(r)?;
    let in_port = m
        .get(crate::oxm::CLASS_BASIC, crate::oxm::ofb::IN_PORT)
        .map_or(PORT_CONTROLLER, |o| {
            o.value.iter().fold(0u32, |a, x| (a << 8) | u32::from(*x))
        });
    let mut a = r.sub(alen, "packet_out.actions")?;
    let actions = parse_actions(&mut a)?;
    Ok(PacketOut {
        buffer_id,
        in_port,
        actions,
        data: r.rest().to_vec(),
    })
}

pub fn packet_out_emit_v15(p: &PacketOut, out: &mut Vec<u8>) {
    out.put_u32(p.buffer_id);
    let at = out.len();
    out.put_u16(0);
    out.put_zeros(2);
    OxmMatch {
        fields: vec![Oxm::basic(
            crate::oxm::ofb::IN_PORT,
            &p.in_port.to_be_bytes(),
        )],
    }
    .emit(out);
    let start = out.len();
    emit_actions(&actions_v15(&p.actions), out);
    patch_len(out, start, at);
    out.extend_from_slice(&p.data);
}

/// `OFPGBPT15_*`.
mod bucket_prop {
    pub const WEIGHT: u16 = 0;
    pub const WATCH_PORT: u16 = 1;
    pub const WATCH_GROUP: u16 = 2;
}

/// Netronome's id, under which Open vSwitch sends a group's selection
/// method as a property.
pub const NTR_VENDOR: u32 = 0x0000_154d;
/// `NTRT_SELECTION_METHOD`.
const NTRT_SELECTION_METHOD: u32 = 1;

fn bad_group(code: u16, detail: String) -> ParseError {
    ParseError::Invalid {
        what: "group (1.5)",
        detail,
        error: OfpError::new(6, code),
    }
}

/// `ofp15_bucket`s filling `r`.
fn parse_buckets_v15(r: &mut Reader<'_>) -> Result<Vec<Bucket>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16("bucket.len")?);
        let alen = usize::from(r.u16("bucket.action_array_len")?);
        if len < 8 || alen > len - 8 || len - 4 > r.remaining() {
            return Err(bad_group(
                12,
                format!("bucket length {len}, actions {alen}"),
            ));
        }
        let mut b = r.sub(len - 4, "bucket")?;
        let bucket_id = b.u32("bucket.bucket_id")?;
        let mut a = b.sub(alen, "bucket.actions")?;
        let mut bucket = Bucket {
            weight: 0,
            watch_port: crate::port::reserved::ANY,
            watch_group: GROUP_ANY,
            actions: parse_actions(&mut a)?,
            bucket_id: Some(bucket_id),
        };
        while b.remaining() >= 4 {
            let ty = b.u16("bucket prop.type")?;
            let plen = usize::from(b.u16("bucket prop.length")?);
            if plen < 4 {
                return Err(bad_group(12, format!("bucket property length {plen}")));
            }
            let mut p = b.sub(plen - 4, "bucket prop")?;
            b.skip((8 - plen % 8) % 8, "bucket prop pad")?;
            match ty {
                bucket_prop::WEIGHT => bucket.weight = p.u16("weight")?,
                bucket_prop::WATCH_PORT => bucket.watch_port = p.u32("watch_port")?,
                bucket_prop::WATCH_GROUP => bucket.watch_group = p.u32("watch_group")?,
                _ => {}
            }
        }
        v.push(bucket);
    }
    Ok(v)
}

fn emit_bucket_v15(b: &Bucket, index: usize, group_type: u8, out: &mut Vec<u8>) {
    let start = out.len();
    out.put_u16(0);
    out.put_u16(0);
    out.put_u32(b.bucket_id.unwrap_or(index as u32));
    let astart = out.len();
    emit_actions(&actions_v15(&b.actions), out);
    patch_len(out, astart, start + 2);
    if group_type == crate::group::group_type::SELECT || b.weight != 0 {
        // Open vSwitch counts the padding in this property's length.
        out.put_u16(bucket_prop::WEIGHT);
        out.put_u16(8);
        out.put_u16(b.weight);
        out.put_zeros(2);
    }
    if b.watch_port != crate::port::reserved::ANY {
        out.put_u16(bucket_prop::WATCH_PORT);
        out.put_u16(8);
        out.put_u32(b.watch_port);
    }
    if b.watch_group != GROUP_ANY {
        out.put_u16(bucket_prop::WATCH_GROUP);
        out.put_u16(8);
        out.put_u32(b.watch_group);
    }
    patch_len(out, start, start);
}

/// A group's buckets, their length written at `at`, then its
/// properties (GROUP_MOD and GROUP_DESC alike).
fn emit_buckets_v15(
    buckets: &[Bucket],
    group_type: u8,
    method: &Option<(String, u64)>,
    at: usize,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    for (i, b) in buckets.iter().enumerate() {
        emit_bucket_v15(b, i, group_type, out);
    }
    patch_len(out, start, at);
    emit_group_props(method, out);
}

/// A group's selection method property (Netronome's, as Open vSwitch
/// writes it): type, length, experimenter, exp_type, pad, the method's
/// name (16 bytes), its parameter, the fields.
fn parse_group_props(r: &mut Reader<'_>) -> Result<Option<(String, u64)>, ParseError> {
    let mut method = None;
    while r.remaining() >= 4 {
        let ty = r.u16("group prop.type")?;
        let len = usize::from(r.u16("group prop.length")?);
        if len < 4 {
            return Err(bad_group(12, format!("group property length {len}")));
        }
        let mut p = r.sub(len - 4, "group prop")?;
        r.skip(((8 - len % 8) % 8).min(r.remaining()), "group prop pad")?;
        if ty != 0xffff {
            continue;
        }
        let exp = p.u32("group prop.experimenter")?;
        let exp_type = p.u32("group prop.exp_type")?;
        if exp == NTR_VENDOR && exp_type == NTRT_SELECTION_METHOD {
            p.skip(4, "selection_method.pad")?;
            let name = crate::wire::c_string(p.bytes(16, "selection_method")?);
            let param = p.u64("selection_method_param")?;
            method = Some((name, param));
        }
    }
    Ok(method)
}

fn emit_group_props(method: &Option<(String, u64)>, out: &mut Vec<u8>) {
    let Some((name, param)) = method else {
        return;
    };
    let start = out.len();
    out.put_u16(0xffff);
    out.put_u16(0);
    out.put_u32(NTR_VENDOR);
    out.put_u32(NTRT_SELECTION_METHOD);
    out.put_zeros(4);
    out.put_str(name, 16);
    out.put_u64(*param);
    patch_len(out, start, start + 2);
    let len = out.len() - start;
    out.put_zeros((8 - len % 8) % 8);
}

/// `ofp15_group_mod`.
pub fn group_mod_parse_v15(r: &mut Reader<'_>) -> Result<GroupMod, ParseError> {
    let command = r.u16("group_mod.command")?;
    let group_type = r.u8("group_mod.type")?;
    r.skip(1, "group_mod.pad")?;
    let group_id = r.u32("group_mod.group_id")?;
    let blen = usize::from(r.u16("group_mod.bucket_array_len")?);
    r.skip(2, "group_mod.pad1")?;
    let command_bucket_id = r.u32("group_mod.command_bucket_id")?;
    let mut b = r.sub(blen, "group_mod.buckets")?;
    let buckets = parse_buckets_v15(&mut b)?;
    let method = parse_group_props(r)?;
    Ok(GroupMod {
        command,
        group_type,
        group_id,
        buckets,
        method,
        command_bucket_id,
    })
}

pub fn group_mod_emit_v15(g: &GroupMod, out: &mut Vec<u8>) {
    out.put_u16(g.command);
    out.put_u8(g.group_type);
    out.put_zeros(1);
    out.put_u32(g.group_id);
    let at = out.len();
    out.put_u16(0);
    out.put_zeros(2);
    out.put_u32(g.command_bucket_id);
    emit_buckets_v15(&g.buckets, g.group_type, &g.method, at, out);
}

/// One GROUP_DESC entry as `version` writes it.
pub fn group_desc_emit(g: &GroupDesc, version: u8, out: &mut Vec<u8>) {
    if version < V15 {
        return g.emit(out);
    }
    let start = out.len();
    out.put_u16(0);
    out.put_u8(g.group_type);
    out.put_zeros(1);
    out.put_u32(g.group_id);
    let at = out.len();
    out.put_u16(0);
    out.put_zeros(6);
    emit_buckets_v15(&g.buckets, g.group_type, &g.method, at, out);
    patch_len(out, start, start);
}

/// `OFPACPT_*`: the asynchronous configuration's properties, (slave,
/// master) per kind of message.
const ASYNC_PROPS: [(u16, u16); 3] = [(0, 1), (2, 3), (4, 5)];

/// GET_ASYNC_REPLY's body as 1.4 writes it: one property per mask.
pub fn async_emit_v14(c: &AsyncConfig, out: &mut Vec<u8>) {
    let masks = [c.packet_in_mask, c.port_status_mask, c.flow_removed_mask];
    for ((slave, master), m) in ASYNC_PROPS.iter().zip(masks) {
        for (ty, v) in [(*slave, m[1]), (*master, m[0])] {
            out.put_u16(ty);
            out.put_u16(8);
            out.put_u32(v);
        }
    }
}

/// SET_ASYNC's properties (1.4) applied to `c`: the masks it names
/// change, the others stay (as the spec has it). An unknown property is
/// `OFPACFC_UNSUPPORTED`.
pub fn async_apply_v14(body: &[u8], c: &mut AsyncConfig) -> Result<(), ParseError> {
    let mut r = Reader::versioned(body, V14);
    while !r.is_empty() {
        let ty = r.u16("async prop.type")?;
        let len = r.u16("async prop.length")?;
        if len != 8 {
            return Err(ParseError::Invalid {
                what: "async config property",
                detail: format!("type {ty}: length {len}"),
                error: OfpError::new(15, 0),
            });
        }
        let v = r.u32("async prop.mask")?;
        let (kind, slot) = (usize::from(ty / 2), usize::from(ty % 2 == 0));
        let masks = match kind {
            0 => &mut c.packet_in_mask,
            1 => &mut c.port_status_mask,
            2 => &mut c.flow_removed_mask,
            // Role status, table status, request forward: never sent.
            3..=5 => continue,
            _ => {
                return Err(ParseError::Invalid {
                    what: "async config property",
                    detail: format!("type {ty} is not one this switch knows"),
                    error: OfpError::new(15, 2),
                })
            }
        };
        masks[slot] = v;
    }
    Ok(())
}

/// One port as `version` writes it (PORT_DESC, PORT_STATUS).
pub fn port_emit(p: &Port, version: u8, out: &mut Vec<u8>) {
    if version >= V14 {
        port_emit_v14(p, out)
    } else {
        p.emit(out)
    }
}

/// One PORT_STATS entry as `version` writes it.
pub fn port_stats_emit(s: &PortStatsEntry, version: u8, out: &mut Vec<u8>) {
    if version >= V14 {
        port_stats_emit_v14(s, out)
    } else {
        s.emit(out)
    }
}

/// One 1.5 FLOW reply entry (tests and tools read what the switch wrote).
pub fn flow_stats_parse_v15(r: &mut Reader<'_>) -> Result<FlowStats, ParseError> {
    let mut b = r.entry(24, "flow stats entry (1.5)")?;
    b.skip(2, "flow_desc.pad2")?;
    let table_id = b.u8("flow_desc.table_id")?;
    b.skip(1, "flow_desc.pad")?;
    let priority = b.u16("flow_desc.priority")?;
    let idle_timeout = b.u16("flow_desc.idle_timeout")?;
    let hard_timeout = b.u16("flow_desc.hard_timeout")?;
    let flags = b.u16("flow_desc.flags")?;
    let importance = b.u16("flow_desc.importance")?;
    let cookie = b.u64("flow_desc.cookie")?;
    let matched = OxmMatch::parse(&mut b)?;
    let (d, packet_count, byte_count, _) = parse_stats(&mut b)?;
    let instructions = crate::action::parse_instructions(&mut b)?;
    Ok(FlowStats {
        table_id,
        duration_sec: (d >> 32) as u32,
        duration_nsec: d as u32,
        priority,
        idle_timeout,
        hard_timeout,
        flags,
        cookie,
        packet_count,
        byte_count,
        matched,
        instructions,
        idle_sec: 0,
        importance,
    })
}

/// The 1.5 AGGREGATE reply.
pub fn aggregate_parse_v15(r: &mut Reader<'_>) -> Result<AggregateReply, ParseError> {
    let (_, packet_count, byte_count, flow_count) = parse_stats(r)?;
    Ok(AggregateReply {
        packet_count,
        byte_count,
        flow_count,
    })
}

/// One 1.5 GROUP_DESC entry.
pub fn group_desc_parse_v15(r: &mut Reader<'_>) -> Result<GroupDesc, ParseError> {
    let mut b = r.entry(16, "group desc (1.5)")?;
    let group_type = b.u8("group_desc.type")?;
    b.skip(1, "group_desc.pad")?;
    let group_id = b.u32("group_desc.group_id")?;
    let blen = usize::from(b.u16("group_desc.bucket_list_len")?);
    b.skip(6, "group_desc.pad2")?;
    let mut buckets = b.sub(blen, "group_desc.buckets")?;
    Ok(GroupDesc {
        group_type,
        group_id,
        buckets: parse_buckets_v15(&mut buckets)?,
        method: parse_group_props(&mut b)?,
    })
}

/// One 1.4 PORT_STATS entry (its Ethernet property read, others skipped).
pub fn port_stats_parse_v14(r: &mut Reader<'_>) -> Result<PortStatsEntry, ParseError> {
    let mut b = r.entry(80, "port stats (1.4)")?;
    b.skip(2, "port_stats.pad")?;
    let mut s = PortStatsEntry {
        port_no: b.u32("port_stats.port_no")?,
        duration_sec: b.u32("port_stats.duration_sec")?,
        duration_nsec: b.u32("port_stats.duration_nsec")?,
        ..PortStatsEntry::default()
    };
    for v in [
        &mut s.rx_packets,
        &mut s.tx_packets,
        &mut s.rx_bytes,
        &mut s.tx_bytes,
        &mut s.rx_dropped,
        &mut s.tx_dropped,
        &mut s.rx_errors,
        &mut s.tx_errors,
    ] {
        *v = b.u64("port_stats.counter")?;
    }
    while b.remaining() >= 4 {
        let ty = b.u16("port_stats prop.type")?;
        let plen = usize::from(b.u16("port_stats prop.length")?);
        let mut p = b.sub(plen.saturating_sub(4), "port_stats prop")?;
        if ty == 0 {
            p.skip(4, "ethernet.pad")?;
            s.rx_frame_err = p.u64("rx_frame_err")?;
            s.rx_over_err = p.u64("rx_over_err")?;
            s.rx_crc_err = p.u64("rx_crc_err")?;
            s.collisions = p.u64("collisions")?;
        }
    }
    Ok(s)
}

/// FLOW_REMOVED as 1.5 writes it, read back.
pub fn flow_removed_parse_v15(r: &mut Reader<'_>) -> Result<FlowRemoved, ParseError> {
    let table_id = r.u8("flow_removed.table_id")?;
    let reason = r.u8("flow_removed.reason")?;
    let priority = r.u16("flow_removed.priority")?;
    let idle_timeout = r.u16("flow_removed.idle_timeout")?;
    let hard_timeout = r.u16("flow_removed.hard_timeout")?;
    let cookie = r.u64("flow_removed.cookie")?;
    let matched = OxmMatch::parse(r)?;
    let (d, packet_count, byte_count, _) = parse_stats(r)?;
    Ok(FlowRemoved {
        cookie,
        priority,
        reason,
        table_id,
        duration_sec: (d >> 32) as u32,
        duration_nsec: d as u32,
        idle_timeout,
        hard_timeout,
        packet_count,
        byte_count,
        matched,
    })
}

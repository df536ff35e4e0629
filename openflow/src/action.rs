//! Actions (`ofp_action_*`) and instructions (`ofp_instruction_*`),
//! including the Nicira experimenter actions `ovs-ofctl` sends for
//! `resubmit`, `load` and `move`.

use crate::error::{OfpError, ParseError};
use crate::oxm::Oxm;
use crate::wire::{Put, Reader};

/// `ofp_action_type`.
pub mod action_type {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    /// OpenFlow 1.5.
    pub const COPY_FIELD: u16 = 28;
    /// OpenFlow 1.5 (in 1.3 and 1.4 an instruction).
    pub const METER: u16 = 29;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Nicira's experimenter id and the action subtypes decoded here.
pub const NX_VENDOR: u32 = 0x0000_2320;
pub mod nx {
    pub const RESUBMIT: u16 = 1;
    pub const REG_MOVE: u16 = 6;
    pub const NOTE: u16 = 8;
    pub const STACK_PUSH: u16 = 27;
    pub const STACK_POP: u16 = 28;
    pub const REG_LOAD: u16 = 7;
    pub const RESUBMIT_TABLE: u16 = 14;
    pub const REG_LOAD2: u16 = 33;
    pub const CONJUNCTION: u16 = 34;
    pub const DEC_TTL_CNT_IDS: u16 = 21;
    pub const CLONE: u16 = 42;
    pub const CHECK_PKT_LARGER: u16 = 49;
    pub const LEARN: u16 = 16;
    pub const LEARN2: u16 = 45;
}

/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const CML_NO_BUFFER: u16 = 0xffff;

/// One action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl(u8),
    DecMplsTtl,
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    SetQueue(u32),
    Group(u32),
    SetNwTtl(u8),
    DecNwTtl,
    SetField(Oxm),
    PushPbb(u16),
    PopPbb,
    /// `NXAST_RESUBMIT` (`table` `None`) / `NXAST_RESUBMIT_TABLE`
    /// (255: this table); `in_port` 0xfff8 is "the packet's".
    NxResubmit {
        in_port: u16,
        table: Option<u8>,
    },
    /// `NXAST_REG_LOAD`: `value` into bits `ofs..ofs+n_bits` of the field
    /// whose NXM/OXM header is `dst`.
    NxRegLoad {
        ofs: u16,
        n_bits: u16,
        dst: u32,
        value: u64,
    },
    /// `NXAST_REG_LOAD2`: a set_field that may be masked (Open vSwitch's
    /// form of `load` into part of a variable-length field).
    NxRegLoad2(Oxm),
    /// `NXAST_REG_MOVE`.
    NxRegMove(FieldCopy),
    /// `OFPAT_COPY_FIELD` (OpenFlow 1.5): `move` as 1.5 writes it.
    CopyField(FieldCopy),
    /// `OFPAT_METER` (OpenFlow 1.5): the meter instruction of 1.3 as an
    /// action.
    Meter(u32),
    /// `NXAST_STACK_PUSH` (`pop` false) / `NXAST_STACK_POP`: bits
    /// `ofs..ofs+n_bits` of the field whose NXM/OXM header is `field`.
    NxStack {
        pop: bool,
        ofs: u16,
        n_bits: u16,
        field: u32,
    },
    /// `NXAST_CHECK_PKT_LARGER`: bit `ofs` of the field whose NXM/OXM
    /// header is `field` says whether the packet is longer than `pkt_len`.
    NxCheckPktLarger {
        pkt_len: u16,
        ofs: u16,
        field: u32,
    },
    /// `NXAST_NOTE`: bytes kept with the flow, nothing done (the action's
    /// padding included, as Open vSwitch keeps it).
    NxNote(Vec<u8>),
    /// `NXAST_LEARN` / `NXAST_LEARN2` (`learn2` true): kept as their bytes
    /// after the subtype (the flow specs, padding included), so a dump
    /// gives the controller back what it sent.
    NxLearn {
        learn2: bool,
        body: Vec<u8>,
    },
    /// `NXAST_CLONE`: the nested actions on a copy of the packet and of
    /// the pipeline's state; what follows sees neither changed.
    NxClone(Vec<Action>),
    /// `NXAST_DEC_TTL_CNT_IDS`: `dec_ttl` whose expiry goes to the
    /// controllers with these ids (none: nobody; OVN writes it so).
    NxDecTtlCntIds(Vec<u16>),
    /// `NXAST_CONJUNCTION`: this flow is clause `clause` (0-based) of
    /// the `n_clauses` clauses of conjunctive match `id`.
    NxConjunction {
        id: u32,
        clause: u8,
        n_clauses: u8,
    },
    /// `NXAST_CT` (see [`crate::nx_ct`]).
    NxCt(Box<crate::nx_ct::NxCt>),
    /// `NXAST_NAT` (inside an `NXAST_CT`).
    NxNat(crate::nx_ct::NxNat),
    /// `NXAST_CT_CLEAR`.
    NxCtClear,
    /// `NXAST_CONTROLLER` / `NXAST_CONTROLLER2` (see
    /// [`crate::nx_controller`]).
    NxController(Box<crate::nx_controller::NxController>),
    /// Another experimenter's action, or a Nicira subtype not decoded:
    /// the switch refuses it with `BAD_EXPERIMENTER`/`BAD_EXP_TYPE`.
    Experimenter {
        experimenter: u32,
        data: Vec<u8>,
    },
}

/// A copy of `n_bits` from bit `src_ofs` of the field whose NXM/OXM
/// header is `src` to bit `dst_ofs` of `dst` (`move`: `NXAST_REG_MOVE`,
/// 1.5's `OFPAT_COPY_FIELD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldCopy {
    pub n_bits: u16,
    pub src_ofs: u16,
    pub dst_ofs: u16,
    pub src: u32,
    pub dst: u32,
}

impl FieldCopy {
    /// The three lengths, `pad` bytes, the two headers.
    fn read(b: &mut Reader<'_>, pad: usize) -> Result<FieldCopy, ParseError> {
        let n_bits = b.u16("move.n_bits")?;
        let src_ofs = b.u16("move.src_ofs")?;
        let dst_ofs = b.u16("move.dst_ofs")?;
        b.skip(pad, "move.pad")?;
        Ok(FieldCopy {
            n_bits,
            src_ofs,
            dst_ofs,
            src: b.u32("move.src")?,
            dst: b.u32("move.dst")?,
        })
    }

    fn write(&self, out: &mut Vec<u8>, pad: usize) {
        out.put_u16(self.n_bits);
        out.put_u16(self.src_ofs);
        out.put_u16(self.dst_ofs);
        out.put_zeros(pad);
        out.put_u32(self.src);
        out.put_u32(self.dst);
    }
}

/// The OXM a `what` action carries (set_field, reg_load2).
fn action_oxm(b: &mut Reader<'_>, what: &'static str) -> Result<Oxm, ParseError> {
    Oxm::parse(b, what).map_err(|e| match e {
        ParseError::Invalid { detail, .. } => bad_action(13, format!("{what}: {detail}")),
        other => bad_action(14, format!("{what}: {other}")),
    })
}

/// Checks that a `what` action of `len` bytes is its `head` bytes of
/// header and `oxm`, zero-padded to 8 (what `b` has left is the padding).
fn padded_to(
    b: &Reader<'_>,
    what: &str,
    oxm: &Oxm,
    head: usize,
    len: usize,
) -> Result<(), ParseError> {
    if b.rest().iter().any(|&x| x != 0) || len != (head + oxm.wire_len()).div_ceil(8) * 8 {
        return Err(bad_action(
            14,
            format!("{what} {}: length {len}", oxm.name()),
        ));
    }
    Ok(())
}

/// Checks that what `b` has left of a `what` action (its padding) is
/// zeros (`OFPBAC_BAD_ARGUMENT` otherwise).
fn zero_padded(b: &Reader<'_>, what: &str) -> Result<(), ParseError> {
    if b.rest().iter().any(|&x| x != 0) {
        return Err(bad_action(5, format!("{what}: padding not zero")));
    }
    Ok(())
}

/// `NXBAC_BAD_CONJUNCTION` (Nicira's experimenter error 15): a
/// conjunction with a bad clause count or index, or beside actions other
/// than `conjunction` and `note`.
pub const BAD_CONJUNCTION: OfpError = OfpError::new(crate::error::EXPERIMENTER_ERROR, 15);

fn bad_action(code: u16, detail: String) -> ParseError {
    ParseError::Invalid {
        what: "action",
        detail,
        error: OfpError::new(2, code),
    }
}

fn bad_instruction(code: u16, detail: String) -> ParseError {
    ParseError::Invalid {
        what: "instruction",
        detail,
        error: OfpError::new(3, code),
    }
}

/// How deep `clone`s may nest (each level is 16 bytes of a message;
/// without a bound a 64 KiB message would recurse thousands deep).
pub const MAX_NESTING: usize = 16;

impl Action {
    /// Parses one action.
    pub fn parse(r: &mut Reader<'_>) -> Result<Action, ParseError> {
        Action::parse_nested(r, 0)
    }

    /// Parses one action inside `depth` enclosing actions.
    fn parse_nested(r: &mut Reader<'_>, depth: usize) -> Result<Action, ParseError> {
        use action_type as t;
        let ty = r.u16("action.type")?;
        let len = usize::from(r.u16("action.len")?);
        if len < 8 || len % 8 != 0 {
            return Err(bad_action(
                1,
                format!("type {ty}: length {len} is not a multiple of 8 of at least 8"),
            ));
        }
        let mut b = r
            .sub(len - 4, "action body")
            .map_err(|_| bad_action(1, format!("type {ty}: length {len} runs past the list")))?;
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(bad_action(
                    1,
                    format!("type {ty}: length {len}, expected {want}"),
                ))
            }
        };
        let a = match ty {
            t::OUTPUT => {
                fixed(16)?;
                let port = b.u32("output.port")?;
                let max_len = b.u16("output.max_len")?;
                Action::Output { port, max_len }
            }
            t::COPY_TTL_OUT => fixed(8).map(|_| Action::CopyTtlOut)?,
            t::COPY_TTL_IN => fixed(8).map(|_| Action::CopyTtlIn)?,
            t::SET_MPLS_TTL => {
                fixed(8)?;
                Action::SetMplsTtl(b.u8("mpls_ttl")?)
            }
            t::DEC_MPLS_TTL => fixed(8).map(|_| Action::DecMplsTtl)?,
            t::PUSH_VLAN | t::PUSH_MPLS | t::POP_MPLS | t::PUSH_PBB => {
                fixed(8)?;
                let e = b.u16("ethertype")?;
                match ty {
                    t::PUSH_VLAN => Action::PushVlan(e),
                    t::PUSH_MPLS => Action::PushMpls(e),
                    t::POP_MPLS => Action::PopMpls(e),
                    _ => Action::PushPbb(e),
                }
            }
            t::POP_VLAN => fixed(8).map(|_| Action::PopVlan)?,
            t::POP_PBB => fixed(8).map(|_| Action::PopPbb)?,
            t::SET_QUEUE => {
                fixed(8)?;
                Action::SetQueue(b.u32("queue_id")?)
            }
            t::GROUP => {
                fixed(8)?;
                Action::Group(b.u32("group_id")?)
            }
            t::SET_NW_TTL => {
                fixed(8)?;
                Action::SetNwTtl(b.u8("nw_ttl")?)
            }
            t::DEC_NW_TTL => fixed(8).map(|_| Action::DecNwTtl)?,
            t::COPY_FIELD if r.version() >= crate::header::V15 => {
                // Two bytes of padding before the headers, zeros to 8
                // after (as Open vSwitch 3.1 writes it).
                let c = FieldCopy::read(&mut b, 2)?;
                if b.rest().iter().any(|&x| x != 0) {
                    return Err(bad_action(
                        5,
                        "copy_field: bytes after the fields are not zero".into(),
                    ));
                }
                Action::CopyField(c)
            }
            t::METER if r.version() >= crate::header::V15 => {
                fixed(8)?;
                Action::Meter(b.u32("meter.meter_id")?)
            }
            t::SET_FIELD => {
                let oxm = action_oxm(&mut b, "set_field")?;
                // 1.5 sets masked fields.
                if oxm.mask.is_some() && r.version() < crate::header::V15 {
                    return Err(bad_action(
                        15,
                        format!(
                            "set_field {}: OpenFlow 1.3 sets no masked field",
                            oxm.name()
                        ),
                    ));
                }
                padded_to(&b, "set_field", &oxm, 4, len)?;
                Action::SetField(oxm)
            }
            t::EXPERIMENTER => {
                let experimenter = b.u32("experimenter")?;
                if experimenter != NX_VENDOR {
                    return Ok(Action::Experimenter {
                        experimenter,
                        data: b.rest().to_vec(),
                    });
                }
                let sub = b.u16("nicira subtype")?;
                match sub {
                    nx::RESUBMIT | nx::RESUBMIT_TABLE => {
                        fixed(16)?;
                        let in_port = b.u16("resubmit.in_port")?;
                        let table = b.u8("resubmit.table")?;
                        Action::NxResubmit {
                            in_port,
                            table: (sub == nx::RESUBMIT_TABLE).then_some(table),
                        }
                    }
                    nx::REG_LOAD => {
                        fixed(24)?;
                        let ofs_nbits = b.u16("reg_load.ofs_nbits")?;
                        let dst = b.u32("reg_load.dst")?;
                        let value = b.u64("reg_load.value")?;
                        Action::NxRegLoad {
                            ofs: ofs_nbits >> 6,
                            n_bits: (ofs_nbits & 0x3f) + 1,
                            dst,
                            value,
                        }
                    }
                    nx::REG_LOAD2 => {
                        let oxm = action_oxm(&mut b, "reg_load2")?;
                        padded_to(&b, "reg_load2", &oxm, 10, len)?;
                        Action::NxRegLoad2(oxm)
                    }
                    nx::REG_MOVE => {
                        fixed(24)?;
                        Action::NxRegMove(FieldCopy::read(&mut b, 0)?)
                    }
                    nx::STACK_PUSH | nx::STACK_POP => {
                        // offset, a 4-byte NXM header, n_bits, zeros to 24.
                        fixed(24)?;
                        let ofs = b.u16("stack.offset")?;
                        let field = b.u32("stack.field")?;
                        let n_bits = b.u16("stack.n_bits")?;
                        zero_padded(&b, "stack")?;
                        Action::NxStack {
                            pop: sub == nx::STACK_POP,
                            ofs,
                            n_bits,
                            field,
                        }
                    }
                    nx::CHECK_PKT_LARGER => {
                        // pkt_len, offset, a 4-byte NXM header, zeros to 24.
                        fixed(24)?;
                        let pkt_len = b.u16("check_pkt_larger.pkt_len")?;
                        let ofs = b.u16("check_pkt_larger.offset")?;
                        let field = b.u32("check_pkt_larger.dst")?;
                        zero_padded(&b, "check_pkt_larger")?;
                        Action::NxCheckPktLarger {
                            pkt_len,
                            ofs,
                            field,
                        }
                    }
                    nx::NOTE => Action::NxNote(b.rest().to_vec()),
                    nx::LEARN | nx::LEARN2 => Action::NxLearn {
                        learn2: sub == nx::LEARN2,
                        body: b.rest().to_vec(),
                    },
                    nx::CLONE => {
                        if depth >= MAX_NESTING {
                            return Err(bad_action(
                                5,
                                format!("clone nested more than {MAX_NESTING} deep"),
                            ));
                        }
                        b.skip(6, "clone.pad")?;
                        let mut inner = Vec::new();
                        while !b.is_empty() {
                            inner.push(Action::parse_nested(&mut b, depth + 1)?);
                        }
                        Action::NxClone(inner)
                    }
                    nx::DEC_TTL_CNT_IDS => {
                        // n_controllers, 4 zero bytes, the ids padded to 8.
                        let n = usize::from(b.u16("dec_ttl_cnt_ids.n_controllers")?);
                        let zeros = b.bytes(4, "dec_ttl_cnt_ids.zeros")?;
                        if zeros.iter().any(|&z| z != 0) {
                            return Err(bad_action(
                                5,
                                "dec_ttl_cnt_ids: reserved bytes not zero".into(),
                            ));
                        }
                        if b.rest().len() < 2 * n {
                            return Err(bad_action(
                                1,
                                format!(
                                    "dec_ttl_cnt_ids: {n} controller ids need {} bytes, {} given",
                                    2 * n,
                                    b.rest().len()
                                ),
                            ));
                        }
                        let ids = (0..n)
                            .map(|_| b.u16("dec_ttl_cnt_ids.id"))
                            .collect::<Result<Vec<_>, _>>()?;
                        Action::NxDecTtlCntIds(ids)
                    }
                    nx::CONJUNCTION => {
                        fixed(16)?;
                        let clause = b.u8("conjunction.clause")?;
                        let n_clauses = b.u8("conjunction.n_clauses")?;
                        let id = b.u32("conjunction.id")?;
                        if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
                            return Err(ParseError::Invalid {
                                what: "conjunction",
                                detail: format!(
                                    "clause {clause} of {n_clauses}: a conjunction has 2 to 64 \
                                     clauses, numbered from 0 on the wire"
                                ),
                                error: BAD_CONJUNCTION,
                            });
                        }
                        Action::NxConjunction {
                            id,
                            clause,
                            n_clauses,
                        }
                    }
                    crate::nx_ct::CT => crate::nx_ct::parse_ct(&mut b, len)?,
                    crate::nx_ct::NAT => crate::nx_ct::parse_nat(&mut b)?,
                    crate::nx_ct::CT_CLEAR => {
                        fixed(16)?;
                        Action::NxCtClear
                    }
                    crate::nx_controller::CONTROLLER => {
                        fixed(16)?;
                        Action::NxController(Box::new(crate::nx_controller::parse_short(&mut b)?))
                    }
                    crate::nx_controller::CONTROLLER2 => {
                        Action::NxController(Box::new(crate::nx_controller::parse_long(&mut b)?))
                    }
                    _ => {
                        let mut data = sub.to_be_bytes().to_vec();
                        data.extend_from_slice(b.rest());
                        Action::Experimenter { experimenter, data }
                    }
                }
            }
            _ => {
                return Err(bad_action(
                    0,
                    format!("type {ty} is not an OpenFlow 1.3 action"),
                ))
            }
        };
        Ok(a)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        use action_type as t;
        let start = out.len();
        let head = |out: &mut Vec<u8>, ty: u16| {
            out.put_u16(ty);
            out.put_u16(0);
        };
        match self {
            Action::Output { port, max_len } => {
                head(out, t::OUTPUT);
                out.put_u32(*port);
                out.put_u16(*max_len);
                out.put_zeros(6);
            }
            Action::CopyTtlOut => simple(out, t::COPY_TTL_OUT),
            Action::CopyTtlIn => simple(out, t::COPY_TTL_IN),
            Action::DecMplsTtl => simple(out, t::DEC_MPLS_TTL),
            Action::PopVlan => simple(out, t::POP_VLAN),
            Action::PopPbb => simple(out, t::POP_PBB),
            Action::DecNwTtl => simple(out, t::DEC_NW_TTL),
            Action::SetMplsTtl(v) | Action::SetNwTtl(v) => {
                head(
                    out,
                    if matches!(self, Action::SetMplsTtl(_)) {
                        t::SET_MPLS_TTL
                    } else {
                        t::SET_NW_TTL
                    },
                );
                out.put_u8(*v);
                out.put_zeros(3);
            }
            Action::PushVlan(e) | Action::PushMpls(e) | Action::PopMpls(e) | Action::PushPbb(e) => {
                let ty = match self {
                    Action::PushVlan(_) => t::PUSH_VLAN,
                    Action::PushMpls(_) => t::PUSH_MPLS,
                    Action::PopMpls(_) => t::POP_MPLS,
                    _ => t::PUSH_PBB,
                };
                head(out, ty);
                out.put_u16(*e);
                out.put_zeros(2);
            }
            Action::SetQueue(v) | Action::Group(v) => {
                head(
                    out,
                    if matches!(self, Action::SetQueue(_)) {
                        t::SET_QUEUE
                    } else {
                        t::GROUP
                    },
                );
                out.put_u32(*v);
            }
            Action::SetField(oxm) => {
                head(out, t::SET_FIELD);
                oxm.emit(out);
            }
            Action::CopyField(c) => {
                head(out, t::COPY_FIELD);
                c.write(out, 2);
            }
            Action::Meter(id) => {
                head(out, t::METER);
                out.put_u32(*id);
            }
            Action::NxResubmit { in_port, table } => {
                nx_head(
                    out,
                    if table.is_some() {
                        nx::RESUBMIT_TABLE
                    } else {
                        nx::RESUBMIT
                    },
                );
                out.put_u16(*in_port);
                out.put_u8(table.unwrap_or(0));
                out.put_zeros(3);
            }
            Action::NxRegLoad {
                ofs,
                n_bits,
                dst,
                value,
            } => {
                nx_head(out, nx::REG_LOAD);
                out.put_u16((ofs << 6) | (n_bits.saturating_sub(1) & 0x3f));
                out.put_u32(*dst);
                out.put_u64(*value);
            }
            Action::NxRegLoad2(oxm) => {
                nx_head(out, nx::REG_LOAD2);
                oxm.emit(out);
            }
            Action::NxRegMove(c) => {
                nx_head(out, nx::REG_MOVE);
                c.write(out, 0);
            }
            Action::NxStack {
                pop,
                ofs,
                n_bits,
                field,
            } => {
                nx_head(out, if *pop { nx::STACK_POP } else { nx::STACK_PUSH });
                out.put_u16(*ofs);
                out.put_u32(*field);
                out.put_u16(*n_bits);
            }
            Action::NxCheckPktLarger {
                pkt_len,
                ofs,
                field,
            } => {
                nx_head(out, nx::CHECK_PKT_LARGER);
                out.put_u16(*pkt_len);
                out.put_u16(*ofs);
                out.put_u32(*field);
            }
            Action::NxNote(bytes) => {
                nx_head(out, nx::NOTE);
                out.extend_from_slice(bytes);
            }
            Action::NxLearn { learn2, body } => {
                nx_head(out, if *learn2 { nx::LEARN2 } else { nx::LEARN });
                out.extend_from_slice(body);
            }
            Action::NxClone(inner) => {
                nx_head(out, nx::CLONE);
                out.put_zeros(6);
                emit_actions(inner, out);
            }
            Action::NxDecTtlCntIds(ids) => {
                nx_head(out, nx::DEC_TTL_CNT_IDS);
                out.put_u16(ids.len() as u16);
                out.put_zeros(4);
                for id in ids {
                    out.put_u16(*id);
                }
            }
            Action::NxConjunction {
                id,
                clause,
                n_clauses,
            } => {
                nx_head(out, nx::CONJUNCTION);
                out.put_u8(*clause);
                out.put_u8(*n_clauses);
                out.put_u32(*id);
            }
            Action::NxCt(ct) => {
                nx_head(out, crate::nx_ct::CT);
                crate::nx_ct::emit_ct(ct, out);
            }
            Action::NxNat(n) => {
                nx_head(out, crate::nx_ct::NAT);
                crate::nx_ct::emit_nat(n, out);
            }
            Action::NxCtClear => {
                nx_head(out, crate::nx_ct::CT_CLEAR);
                out.put_zeros(6);
            }
            Action::NxController(c) => {
                let sub = if crate::nx_controller::needs_long(c) {
                    crate::nx_controller::CONTROLLER2
                } else {
                    crate::nx_controller::CONTROLLER
                };
                nx_head(out, sub);
                crate::nx_controller::emit(c, out);
            }
            Action::Experimenter { experimenter, data } => {
                head(out, t::EXPERIMENTER);
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
            }
        }
        // Pad to 8 and write the length.
        let len = out.len() - start;
        out.put_zeros((8 - len % 8) % 8);
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
}

fn simple(out: &mut Vec<u8>, ty: u16) {
    out.put_u16(ty);
    out.put_u16(8);
    out.put_zeros(4);
}

fn nx_head(out: &mut Vec<u8>, sub: u16) {
    out.put_u16(action_type::EXPERIMENTER);
    out.put_u16(0);
    out.put_u32(NX_VENDOR);
    out.put_u16(sub);
}

/// Parses actions until `r` is empty.
pub fn parse_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Action::parse(r)?);
    }
    Ok(v)
}

pub fn emit_actions(actions: &[Action], out: &mut Vec<u8>) {
    actions.iter().for_each(|a| a.emit(out));
}

/// `ofp_instruction_type`.
pub mod instruction_type {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { value: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

impl Instruction {
    pub fn ty(&self) -> u16 {
        use instruction_type as t;
        match self {
            Instruction::GotoTable(_) => t::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => t::WRITE_METADATA,
            Instruction::WriteActions(_) => t::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => t::APPLY_ACTIONS,
            Instruction::ClearActions => t::CLEAR_ACTIONS,
            Instruction::Meter(_) => t::METER,
            Instruction::Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    pub fn parse(r: &mut Reader<'_>) -> Result<Instruction, ParseError> {
        use instruction_type as t;
        let ty = r.u16("instruction.type")?;
        let len = usize::from(r.u16("instruction.len")?);
        if len < 8 || len % 8 != 0 {
            return Err(bad_instruction(7, format!("type {ty}: length {len}")));
        }
        let mut b = r.sub(len - 4, "instruction body").map_err(|_| {
            bad_instruction(7, format!("type {ty}: length {len} runs past the list"))
        })?;
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(bad_instruction(
                    7,
                    format!("type {ty}: length {len}, expected {want}"),
                ))
            }
        };
        Ok(match ty {
            t::GOTO_TABLE => {
                fixed(8)?;
                Instruction::GotoTable(b.u8("goto_table.table_id")?)
            }
            t::WRITE_METADATA => {
                fixed(24)?;
                b.skip(4, "write_metadata.pad")?;
                Instruction::WriteMetadata {
                    value: b.u64("write_metadata.metadata")?,
                    mask: b.u64("write_metadata.mask")?,
                }
            }
            t::WRITE_ACTIONS | t::APPLY_ACTIONS => {
                b.skip(4, "actions.pad")?;
                let a = parse_actions(&mut b)?;
                if ty == t::WRITE_ACTIONS {
                    Instruction::WriteActions(a)
                } else {
                    Instruction::ApplyActions(a)
                }
            }
            t::CLEAR_ACTIONS => fixed(8).map(|_| Instruction::ClearActions)?,
            t::METER => {
                fixed(8)?;
                Instruction::Meter(b.u32("meter.meter_id")?)
            }
            t::EXPERIMENTER => Instruction::Experimenter {
                experimenter: b.u32("experimenter")?,
                data: b.rest().to_vec(),
            },
            _ => {
                return Err(bad_instruction(
                    0,
                    format!("type {ty} is not an OpenFlow 1.3 instruction"),
                ))
            }
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.ty());
        out.put_u16(0);
        match self {
            Instruction::GotoTable(t) => {
                out.put_u8(*t);
                out.put_zeros(3);
            }
            Instruction::WriteMetadata { value, mask } => {
                out.put_zeros(4);
                out.put_u64(*value);
                out.put_u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.put_zeros(4);
                emit_actions(a, out);
            }
            Instruction::ClearActions => out.put_zeros(4),
            Instruction::Meter(m) => out.put_u32(*m),
            Instruction::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
                let len = out.len() - start;
                out.put_zeros((8 - len % 8) % 8);
            }
        }
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
}

/// Parses instructions until `r` is empty.
pub fn parse_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Instruction::parse(r)?);
    }
    Ok(v)
}

pub fn emit_instructions(ins: &[Instruction], out: &mut Vec<u8>) {
    ins.iter().for_each(|i| i.emit(out));
}

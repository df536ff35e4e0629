//! `learn(...)` (NXAST_LEARN, NXAST_LEARN2) run as Open vSwitch runs it
//! (`lib/learn.c`): a packet that goes through it adds (or refreshes) a
//! flow built from its specs, each taking a field of the packet or an
//! immediate value into the new flow's match, a `load` of it, or an
//! `output` to it. The megaflow depends on every field a spec reads, so a
//! packet with other values comes to the slow path and learns its own flow;
//! learning happens on a packet's translation in the slow path (an upcall,
//! a PACKET_OUT), never on a revalidator's.
//!
//! The action is kept as sent (its bytes), decoded here when it runs.
//! `fin_idle_timeout`/`fin_hard_timeout`, `learn2`'s `limit` and
//! `result_dst`, and `delete_learned` are not run: a learn using one is
//! kept, and its megaflow stays in software with the reason.

use megaflow::Match;
use openflow::wire::Reader;

use crate::rule::{FieldRange, FlowMod, OfAction, OfPort, RuleSpec};
use crate::tlv::TlvTable;
use crate::{Cookie, Priority, TableId};

/// `NX_LEARN_F_SEND_FLOW_REM`.
const F_SEND_FLOW_REM: u16 = 1 << 0;
/// `NX_LEARN_F_DELETE_LEARNED`.
const F_DELETE_LEARNED: u16 = 1 << 1;
/// `NX_LEARN_F_WRITE_RESULT`.
const F_WRITE_RESULT: u16 = 1 << 2;

/// Where a spec's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Src {
    Field(FieldRange),
    Immediate(u128),
}

/// What a spec makes of its value in the learned flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dst {
    Match(FieldRange),
    Load(FieldRange),
    Output,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub n_bits: u16,
    pub src: Src,
    pub dst: Dst,
}

/// A decoded `learn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learn {
    pub table: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub flags: u16,
    pub specs: Vec<Spec>,
}

/// Why a learn is kept but not run (see the module's text).
pub type NotRun = String;

/// Decodes the bytes after the subtype (`learn2`: NXAST_LEARN2's).
pub fn decode(
    learn2: bool,
    body: &[u8],
    tlv: &TlvTable,
    range: impl Fn(u32, u16, u16, &TlvTable) -> Option<FieldRange>,
) -> Result<Learn, NotRun> {
    let short = |e: openflow::ParseError| format!("learn: {e}");
    let mut b = Reader::new(body);
    let mut l = Learn {
        idle_timeout: b.u16("learn.idle_timeout").map_err(short)?,
        hard_timeout: b.u16("learn.hard_timeout").map_err(short)?,
        priority: b.u16("learn.priority").map_err(short)?,
        cookie: b.u64("learn.cookie").map_err(short)?,
        flags: b.u16("learn.flags").map_err(short)?,
        table: b.u8("learn.table_id").map_err(short)?,
        specs: Vec::new(),
    };
    b.u8("learn.pad").map_err(short)?;
    let fin_idle = b.u16("learn.fin_idle_timeout").map_err(short)?;
    let fin_hard = b.u16("learn.fin_hard_timeout").map_err(short)?;
    if fin_idle != 0 || fin_hard != 0 {
        return Err(
            "learn: fin_idle_timeout and fin_hard_timeout are not run by this switch".into(),
        );
    }
    if l.flags & F_DELETE_LEARNED != 0 {
        return Err("learn: delete_learned is not run by this switch".into());
    }
    if learn2 {
        let limit = b.u32("learn2.limit").map_err(short)?;
        b.bytes(4, "learn2.result_dst_ofs").map_err(short)?;
        if limit != 0 || l.flags & F_WRITE_RESULT != 0 {
            return Err("learn: limit and result_dst are not run by this switch".into());
        }
    }
    // Specs until a zero header or the end (the padding).
    while b.remaining() >= 2 {
        let header = b.u16("learn.spec").map_err(short)?;
        if header == 0 {
            break;
        }
        let n_bits = header & 0x3ff;
        let immediate = header & (1 << 13) != 0;
        let field = |b: &mut Reader<'_>| -> Result<FieldRange, NotRun> {
            let h = b.u32("learn.spec.field").map_err(short)?;
            let ofs = b.u16("learn.spec.ofs").map_err(short)?;
            range(h, ofs, n_bits, tlv)
                .ok_or_else(|| format!("learn: field {h:#010x}[{ofs}..+{n_bits}] is not one this switch learns into or from"))
        };
        let src = if immediate {
            let raw = b
                .bytes(2 * usize::from(n_bits.div_ceil(16)), "learn.spec.immediate")
                .map_err(short)?;
            if n_bits > 128 {
                return Err("learn: an immediate of more than 128 bits".into());
            }
            Src::Immediate(raw.iter().fold(0u128, |v, b| v << 8 | u128::from(*b)))
        } else {
            Src::Field(field(&mut b)?)
        };
        let dst = match (header >> 11) & 3 {
            0 => Dst::Match(field(&mut b)?),
            1 => Dst::Load(field(&mut b)?),
            2 if !immediate => Dst::Output,
            _ => return Err("learn: a spec of a kind Open vSwitch does not define".into()),
        };
        l.specs.push(Spec { n_bits, src, dst });
    }
    Ok(l)
}

impl Learn {
    /// The flow it learns, each spec's value given by `value` (a field of
    /// the packet, read as the pipeline sees it, or the immediate).
    pub fn flow(&self, mut value: impl FnMut(&Spec) -> u128) -> FlowMod {
        let mut m = Match::catch_all();
        let mut actions = Vec::new();
        for s in &self.specs {
            let bits = if s.n_bits >= 128 {
                u128::MAX
            } else {
                (1u128 << s.n_bits) - 1
            };
            let v = value(s) & bits;
            match &s.dst {
                Dst::Match(r) => m.set_field_masked(r.field, v << r.ofs, r.mask()),
                Dst::Load(r) => actions.push(OfAction::SetField {
                    field: r.field,
                    value: v << r.ofs,
                    mask: r.mask(),
                }),
                Dst::Output => {
                    // A 16-bit port number, as the NXM in_port is.
                    let p = crate::channel::convert::port16(v) as u32;
                    if let Some(port) = OfPort::from_number(p).filter(|p| {
                        matches!(
                            p,
                            OfPort::Port(_)
                                | OfPort::InPort
                                | OfPort::Flood
                                | OfPort::Local
                                | OfPort::All
                        )
                    }) {
                        actions.push(OfAction::Output { port, max_len: 0 });
                    }
                }
            }
        }
        let mut spec = RuleSpec::new(TableId(self.table), Priority(self.priority), m);
        spec.cookie = Cookie(self.cookie);
        spec.idle_timeout = self.idle_timeout;
        spec.hard_timeout = self.hard_timeout;
        spec.flags.send_flow_rem = self.flags & F_SEND_FLOW_REM != 0;
        spec.instructions.apply = actions;
        FlowMod::add(spec)
    }
}

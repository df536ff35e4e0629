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

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Decodes the bytes after the subtype (`learn2`: NXAST_LEARN2's).
pub fn decode(
    learn2: bool,
    body: &[u8],
    tlv: &TlvTable,
    range: impl Fn(u32, u16, u16, &TlvTable) -> Option<FieldRange>,
) -> Result<Learn, NotRun> {
    let short = || "learn: shorter than its header".to_string();
    let mut l = Learn {
        idle_timeout: be16(body, 0).ok_or_else(short)?,
        hard_timeout: be16(body, 2).ok_or_else(short)?,
        priority: be16(body, 4).ok_or_else(short)?,
        cookie: u64::from(be32(body, 6).ok_or_else(short)?) << 32
            | u64::from(be32(body, 10).ok_or_else(short)?),
        flags: be16(body, 14).ok_or_else(short)?,
        table: *body.get(16).ok_or_else(short)?,
        specs: Vec::new(),
    };
    let (fin_idle, fin_hard) = (
        be16(body, 18).ok_or_else(short)?,
        be16(body, 20).ok_or_else(short)?,
    );
    if fin_idle != 0 || fin_hard != 0 {
        return Err(
            "learn: fin_idle_timeout and fin_hard_timeout are not run by this switch".into(),
        );
    }
    if l.flags & F_DELETE_LEARNED != 0 {
        return Err("learn: delete_learned is not run by this switch".into());
    }
    let mut at = 22;
    if learn2 {
        let limit = be32(body, at).ok_or_else(short)?;
        if limit != 0 || l.flags & F_WRITE_RESULT != 0 {
            return Err("learn: limit and result_dst are not run by this switch".into());
        }
        at += 8;
    }
    while let Some(header) = be16(body, at) {
        at += 2;
        if header == 0 {
            break;
        }
        let n_bits = header & 0x3ff;
        let immediate = header & (1 << 13) != 0;
        let field = |at: &mut usize| -> Result<FieldRange, NotRun> {
            let h = be32(body, *at).ok_or("learn: a spec runs past the action")?;
            let ofs = be16(body, *at + 4).ok_or("learn: a spec runs past the action")?;
            *at += 6;
            range(h, ofs, n_bits, tlv)
                .ok_or_else(|| format!("learn: field {h:#010x}[{ofs}..+{n_bits}] is not one this switch learns into or from"))
        };
        let src = if immediate {
            let bytes = 2 * usize::from(n_bits.div_ceil(16));
            let raw = body
                .get(at..at + bytes)
                .ok_or("learn: an immediate runs past the action")?;
            at += bytes;
            if n_bits > 128 {
                return Err("learn: an immediate of more than 128 bits".into());
            }
            Src::Immediate(raw.iter().fold(0u128, |v, b| v << 8 | u128::from(*b)))
        } else {
            Src::Field(field(&mut at)?)
        };
        let dst = match (header >> 11) & 3 {
            0 => Dst::Match(field(&mut at)?),
            1 => Dst::Load(field(&mut at)?),
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
                    let p = v as u32;
                    let p = if (0xff00..=0xffff).contains(&p) {
                        p | 0xffff_0000
                    } else {
                        p
                    };
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

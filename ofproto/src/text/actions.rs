//! The text after `actions=`: actions and instructions, parsed into
//! [`Instructions`].
//!
//! The list is split at commas and white space outside parentheses; each
//! item is `name`, `name:arg` or `name(args)` (names in any case). Plain
//! actions go to the apply-actions list; `meter`, `clear_actions`,
//! `write_actions(...)`, `write_metadata` and `goto_table` are instructions
//! and must come in OpenFlow's execution order (meter first, goto_table
//! last), each at most once, as Open vSwitch demands. `drop` must stand
//! alone. The classic spellings (`mod_dl_src`, `load`, `strip_vlan`, ...)
//! parse into the same [`OfAction`] as their OpenFlow 1.3 equivalents; the
//! printer (`super::print`) writes the canonical one.

use megaflow::key::VLAN_PRESENT;
use megaflow::{Field, MeterId};

use super::fields::{self, Kind};
use super::value::{self, ValueError};
use super::{ParseError, ParseErrorKind};
use crate::rule::{Instructions, OfAction, OfPort};
use crate::tlv::TlvTable;
use crate::TableId;

/// Highest meter id OpenFlow 1.3 lets a rule name (OFPM_MAX).
const METER_MAX: u128 = 0xffff_0000;
/// The packet-in reasons by number, as `controller(reason=...)` names
/// them (Open vSwitch's names).
pub(crate) const PACKET_IN_REASONS: [&str; 6] = [
    "no_match",
    "action",
    "invalid_ttl",
    "action_set",
    "group",
    "packet_out",
];

/// `max_len` of `controller` when none is given (OFPCML_NO_BUFFER).
const CONTROLLER_MAX_LEN: u16 = 0xffff;

/// The argument of one list item.
#[derive(Clone, Copy, Debug)]
enum Arg<'a> {
    None,
    /// `name:arg`
    Colon(&'a str),
    /// `name(arg)`
    Paren(&'a str),
}

/// Instruction kinds in the order OpenFlow executes (and ovs requires).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Meter,
    Apply,
    Clear,
    Write,
    WriteMetadata,
    Goto,
}

enum Item {
    Meter(MeterId),
    Apply(OfAction),
    Clear,
    Write(Vec<OfAction>),
    WriteMetadata(u64, u64),
    Goto(TableId),
}

impl Item {
    fn rank(&self) -> Rank {
        match self {
            Item::Meter(_) => Rank::Meter,
            Item::Apply(_) => Rank::Apply,
            Item::Clear => Rank::Clear,
            Item::Write(_) => Rank::Write,
            Item::WriteMetadata(..) => Rank::WriteMetadata,
            Item::Goto(_) => Rank::Goto,
        }
    }
}

const INSTRUCTION_NAMES: [&str; 5] = [
    "meter",
    "clear_actions",
    "write_actions",
    "write_metadata",
    "goto_table",
];

/// Parses an instruction list (`meter:1,output:2,goto_table:3`).
pub(crate) fn parse_instructions(s: &str, tlv: &TlvTable) -> Result<Instructions, ParseError> {
    let items = split(s)?;
    let mut ins = Instructions::default();
    if let [only] = items[..] {
        if only.eq_ignore_ascii_case("drop") {
            return Ok(ins);
        }
    }
    let mut last: Option<(Rank, &str)> = None;
    for item in items {
        let (name, arg) = split_item(item)?;
        let parsed = parse_item(name, arg, item, tlv)?;
        let rank = parsed.rank();
        if let Some((last_rank, last_item)) = last {
            if rank < last_rank {
                return Err(ParseError::new(
                    item,
                    ParseErrorKind::InstructionOrder {
                        after: last_item.to_string(),
                    },
                ));
            }
            if rank == last_rank && rank != Rank::Apply {
                return Err(ParseError::new(name, ParseErrorKind::DuplicateInstruction));
            }
        }
        last = Some((rank, item));
        match parsed {
            Item::Meter(m) => ins.meter = Some(m),
            Item::Apply(a) => ins.apply.push(a),
            Item::Clear => ins.clear_actions = true,
            Item::Write(w) => ins.write = Some(w),
            Item::WriteMetadata(v, m) => ins.write_metadata = Some((v, m)),
            Item::Goto(t) => ins.goto_table = Some(t),
        }
    }
    if let Some(other) = ins.conjunction_conflict() {
        let other = match other {
            Ok(a) => super::print::action_name(a),
            Err(name) => name.to_string(),
        };
        return Err(ParseError::new(
            s,
            ParseErrorKind::ConjunctionNotAlone { other },
        ));
    }
    Ok(ins)
}

fn split(s: &str) -> Result<Vec<&str>, ParseError> {
    value::split_list(s).map_err(|reason| ParseError::new(s, ParseErrorKind::Syntax { reason }))
}

/// `name`, `name:arg` or `name(arg)`.
fn split_item(item: &str) -> Result<(&str, Arg<'_>), ParseError> {
    let Some(at) = item.find([':', '(']) else {
        return Ok((item, Arg::None));
    };
    let name = &item[..at];
    if item[at..].starts_with(':') {
        return Ok((name, Arg::Colon(&item[at + 1..])));
    }
    match value::matching_paren(item, at) {
        Some(close) if close + 1 == item.len() => Ok((name, Arg::Paren(&item[at + 1..close]))),
        // `check_pkt_larger(LEN)->DST`: the whole `(LEN)->DST` for it.
        Some(close)
            if name.eq_ignore_ascii_case("check_pkt_larger")
                && item[close + 1..].starts_with("->") =>
        {
            Ok((name, Arg::Colon(&item[at..])))
        }
        _ => Err(ParseError::new(
            item,
            ParseErrorKind::Syntax {
                reason: "text after the closing parenthesis",
            },
        )),
    }
}

fn parse_item(name: &str, arg: Arg<'_>, item: &str, tlv: &TlvTable) -> Result<Item, ParseError> {
    let lname = name.to_ascii_lowercase();
    let num = |text: &str, max: u128| value::number_max(text, max).map_err(|e| e.at(text, name));
    Ok(match lname.as_str() {
        "drop" => return Err(ParseError::new(name, ParseErrorKind::DropNotAlone)),
        "meter" => {
            let text = colon(name, arg)?;
            let id = num(text, METER_MAX)?;
            if id == 0 {
                return Err(ValueError::bad("meter ids start at 1").at(text, name));
            }
            // At most METER_MAX, checked above.
            Item::Meter(MeterId(id as u32))
        }
        "clear_actions" => {
            no_arg(name, arg)?;
            Item::Clear
        }
        "write_actions" => {
            let Arg::Paren(inner) = arg else {
                return Err(ValueError::bad("expected write_actions(ACTIONS)").at(item, name));
            };
            Item::Write(action_list(inner, "write_actions", tlv)?)
        }
        "write_metadata" => {
            let text = colon(name, arg)?;
            let (v, m) = value::split_mask(text);
            let max = u128::from(u64::MAX);
            let v = num(v, max)?;
            let m = match m {
                Some(m) => num(m, max)?,
                None => max,
            };
            // Both at most u64::MAX, checked above.
            Item::WriteMetadata((v & m) as u64, m as u64)
        }
        "goto_table" => {
            let text = colon(name, arg)?;
            // At most 253, checked by `num`.
            Item::Goto(TableId(num(text, u128::from(TableId::MAX.0))? as u8))
        }
        _ => match parse_action(name, arg, item, tlv)? {
            Some(a) => Item::Apply(a),
            None => return Err(ParseError::new(name, ParseErrorKind::UnknownAction)),
        },
    })
}

fn colon<'a>(name: &str, arg: Arg<'a>) -> Result<&'a str, ParseError> {
    match arg {
        Arg::Colon(text) => Ok(text),
        Arg::None => Err(ParseError::new(name, ParseErrorKind::MissingValue)),
        Arg::Paren(text) => Err(ValueError::bad(format!("expected {name}:VALUE")).at(text, name)),
    }
}

fn no_arg(name: &str, arg: Arg<'_>) -> Result<(), ParseError> {
    match arg {
        Arg::None => Ok(()),
        _ => Err(ParseError::new(name, ParseErrorKind::UnexpectedValue)),
    }
}

fn set(field: Field, value: u128) -> OfAction {
    OfAction::SetField {
        field,
        value,
        mask: field.layout().max_value(),
    }
}

/// A plain action, or `None` when `name` names no action.
///
/// Every narrowing `as` below casts a number `num` has range-checked.
/// The actions of a nested list (`write_actions(...)`, `clone(...)`):
/// actions only, `drop` alone meaning none.
fn action_list(
    inner: &str,
    context: &'static str,
    tlv: &TlvTable,
) -> Result<Vec<OfAction>, ParseError> {
    let mut actions = Vec::new();
    let items = split(inner)?;
    if matches!(items[..], [only] if only.eq_ignore_ascii_case("drop")) {
        return Ok(actions);
    }
    for sub in items {
        let (n, a) = split_item(sub)?;
        match parse_action(n, a, sub, tlv)? {
            Some(action) => actions.push(action),
            None if INSTRUCTION_NAMES.contains(&n.to_ascii_lowercase().as_str()) => {
                return Err(ParseError::new(n, ParseErrorKind::NotAllowed { context }))
            }
            None if n.eq_ignore_ascii_case("drop") => {
                return Err(ParseError::new(n, ParseErrorKind::DropNotAlone))
            }
            None => return Err(ParseError::new(n, ParseErrorKind::UnknownAction)),
        }
    }
    Ok(actions)
}

fn parse_action(
    name: &str,
    arg: Arg<'_>,
    item: &str,
    tlv: &TlvTable,
) -> Result<Option<OfAction>, ParseError> {
    let lname = name.to_ascii_lowercase();
    let num = |text: &str, max: u128| value::number_max(text, max).map_err(|e| e.at(text, name));
    let action = match lname.as_str() {
        "output" => match arg {
            Arg::Colon(p) => output(name, p, None)?,
            Arg::Paren(args) => output_args(name, args)?,
            Arg::None => return Err(ParseError::new(name, ParseErrorKind::MissingValue)),
        },
        "controller" => {
            let max_len = match arg {
                Arg::None => CONTROLLER_MAX_LEN,
                Arg::Colon(n) => num(n, 0xffff)? as u16,
                Arg::Paren(args) => {
                    let mut c = openflow::nx_controller::NxController::default();
                    for (k, v) in kv(args)? {
                        match (k, v) {
                            ("max_len", Some(v)) => c.max_len = num(v, 0xffff)? as u16,
                            ("id", Some(v)) => c.controller_id = num(v, 0xffff)? as u16,
                            ("reason", Some(v)) => {
                                c.reason = PACKET_IN_REASONS
                                    .iter()
                                    .position(|r| *r == v)
                                    .ok_or_else(|| {
                                        ValueError::bad("a reason is no_match, action, invalid_ttl, action_set, group or packet_out")
                                            .at(v, name)
                                    })? as u8
                            }
                            ("userdata", Some(v)) => {
                                c.userdata = value::dotted_hex(v).map_err(|e| e.at(v, name))?
                            }
                            ("pause", None) => c.pause = true,
                            ("meter_id", Some(v)) => c.meter_id = num(v, 0xffff_ffff)? as u32,
                            _ => {
                                return Err(ValueError::bad(
                                    "controller takes max_len=N, id=N, reason=R, userdata=HH.HH..., pause, meter_id=N",
                                )
                                .at(args, name))
                            }
                        }
                    }
                    if openflow::nx_controller::needs_long(&c)
                        || c.controller_id != 0
                        || c.reason != openflow::nx_controller::REASON_ACTION
                    {
                        return Ok(Some(OfAction::Controller(Box::new(c))));
                    }
                    c.max_len
                }
            };
            OfAction::Output {
                port: OfPort::Controller,
                max_len,
            }
        }
        "in_port" | "all" | "flood" | "local" | "normal" => {
            no_arg(name, arg)?;
            output(name, name, None)?
        }
        _ if value::number(name).is_ok() => {
            no_arg(name, arg)?;
            output("output", name, None)?
        }
        "push_vlan" => {
            let text = colon(name, arg)?;
            match num(text, 0xffff)? {
                tpid @ (0x8100 | 0x88a8) => OfAction::PushVlan(tpid as u16),
                _ => {
                    return Err(ValueError::bad("the TPID must be 0x8100 or 0x88a8").at(text, name))
                }
            }
        }
        "pop_vlan" | "strip_vlan" => {
            no_arg(name, arg)?;
            OfAction::PopVlan
        }
        "mod_vlan_vid" => OfAction::SetVlanVid(num(colon(name, arg)?, 0x0fff)? as u16),
        "mod_vlan_pcp" => OfAction::SetVlanPcp(num(colon(name, arg)?, 7)? as u8),
        "mod_dl_src" | "mod_dl_dst" => {
            let text = colon(name, arg)?;
            let mac = value::mac(text).map_err(|e| e.at(text, name))?;
            let field = if lname == "mod_dl_src" {
                Field::EthSrc
            } else {
                Field::EthDst
            };
            set(field, mac)
        }
        "mod_nw_src" | "mod_nw_dst" => {
            let text = colon(name, arg)?;
            let ip = value::ipv4(text).map_err(|e| e.at(text, name))?;
            let field = if lname == "mod_nw_src" {
                Field::Ipv4Src
            } else {
                Field::Ipv4Dst
            };
            set(field, ip)
        }
        "mod_nw_tos" => {
            let text = colon(name, arg)?;
            let tos = num(text, 0xff)?;
            if tos & 3 != 0 {
                return Err(
                    ValueError::bad("the ECN bits (low 2 bits) of the ToS must be zero")
                        .at(text, name),
                );
            }
            set(Field::IpDscp, tos >> 2)
        }
        "mod_nw_ecn" => set(Field::IpEcn, num(colon(name, arg)?, 3)?),
        "mod_nw_ttl" => set(Field::IpTtl, num(colon(name, arg)?, 0xff)?),
        "mod_tp_src" => set(Field::TpSrc, num(colon(name, arg)?, 0xffff)?),
        "mod_tp_dst" => set(Field::TpDst, num(colon(name, arg)?, 0xffff)?),
        "set_tunnel" => set(Field::TunId, num(colon(name, arg)?, 0xffff_ffff)?),
        "set_tunnel64" => set(Field::TunId, num(colon(name, arg)?, u128::from(u64::MAX))?),
        "set_field" => set_field(name, colon(name, arg)?, tlv)?,
        "load" => load(name, colon(name, arg)?, tlv)?,
        "move" => move_(name, colon(name, arg)?)?,
        "push" => OfAction::Push(fields::parse_subfield(colon(name, arg)?)?.0),
        "pop" => {
            let text = colon(name, arg)?;
            let (dst, writable) = fields::parse_subfield(text)?;
            if !writable {
                return Err(ParseError::new(text, ParseErrorKind::NotWritable));
            }
            OfAction::Pop(dst)
        }
        "note" => note(name, colon(name, arg)?)?,
        "check_pkt_larger" => {
            const SYNTAX: &str = "expected check_pkt_larger(LEN)->DST[BIT]";
            let Arg::Colon(text) = arg else {
                return Err(ValueError::bad(SYNTAX).at(item, name));
            };
            let Some((len, dst)) = text.strip_prefix('(').and_then(|t| t.split_once(")->")) else {
                return Err(ValueError::bad(SYNTAX).at(item, name));
            };
            let pkt_len = num(len.trim(), u128::from(u16::MAX))? as u16;
            let (dst, writable) = fields::parse_subfield(dst)?;
            if !writable {
                return Err(ParseError::new(dst_text(text), ParseErrorKind::NotWritable));
            }
            if dst.n_bits != 1 {
                return Err(
                    ValueError::bad("Only 1-bit destination field is allowed").at(item, name)
                );
            }
            OfAction::CheckPktLarger { pkt_len, dst }
        }
        "conjunction" => match arg {
            Arg::Paren(args) => conjunction(name, args)?,
            _ => return Err(ValueError::bad(CONJUNCTION_SYNTAX).at(item, name)),
        },
        "dec_ttl" => match arg {
            Arg::None => OfAction::DecTtl,
            // As ovs-ofctl: ids split by commas or spaces, one at least.
            Arg::Paren(args) => {
                let ids = args
                    .split([',', ' '])
                    .filter(|t| !t.is_empty())
                    .map(|t| num(t, u128::from(u16::MAX)).map(|n| n as u16))
                    .collect::<Result<Vec<u16>, _>>()?;
                if ids.is_empty() {
                    return Err(ValueError::bad(
                        "dec_ttl_cnt_ids: expected at least one controller id.",
                    )
                    .at(item, name));
                }
                OfAction::DecTtlIds(ids)
            }
            Arg::Colon(_) => {
                return Err(ValueError::bad("expected dec_ttl or dec_ttl(ID,...)").at(item, name))
            }
        },
        "resubmit" => resubmit(name, arg, item)?,
        "group" => {
            OfAction::Group(num(colon(name, arg)?, u128::from(crate::group::GROUP_MAX))? as u32)
        }
        "ct" => match arg {
            Arg::None => super::ct::parse_ct(name, "")?,
            Arg::Paren(args) => super::ct::parse_ct(name, args)?,
            Arg::Colon(_) => return Err(ValueError::bad("expected ct or ct(ARGS)").at(item, name)),
        },
        "ct_clear" => {
            no_arg(name, arg)?;
            OfAction::CtClear
        }
        "clone" => match arg {
            Arg::Paren(inner) => OfAction::Clone(action_list(inner, "clone", tlv)?),
            _ => return Err(ValueError::bad("expected clone(ACTIONS)").at(item, name)),
        },
        "sample" => match arg {
            Arg::Paren(args) => sample(name, args)?,
            _ => return Err(ValueError::bad("expected sample(probability=N,...)").at(item, name)),
        },
        _ => return Ok(None),
    };
    Ok(Some(action))
}

fn kv(args: &str) -> Result<Vec<(&str, Option<&str>)>, ParseError> {
    value::key_values(args)
        .map_err(|reason| ParseError::new(args, ParseErrorKind::Syntax { reason }))
}

/// `output:PORT` (max_len given by `output(...)` only).
fn output(name: &str, port: &str, max_len: Option<u16>) -> Result<OfAction, ParseError> {
    let p = value::port(port).map_err(|e| e.at(port, name))?;
    if p == OfPort::Any {
        return Err(ValueError::bad("cannot output to ANY").at(port, name));
    }
    let default = if p == OfPort::Controller {
        CONTROLLER_MAX_LEN
    } else {
        0
    };
    Ok(OfAction::Output {
        port: p,
        max_len: max_len.unwrap_or(default),
    })
}

/// `output(port=P[,max_len=N])`.
fn output_args(name: &str, args: &str) -> Result<OfAction, ParseError> {
    let mut port = None;
    let mut max_len = None;
    for (k, v) in kv(args)? {
        match (k, v) {
            ("port", Some(p)) => port = Some(p),
            ("max_len", Some(n)) => {
                max_len = Some(value::number_max(n, 0xffff).map_err(|e| e.at(n, "max_len"))? as u16)
            }
            _ => return Err(ValueError::bad("expected output(port=P[,max_len=N])").at(args, name)),
        }
    }
    match port {
        Some(p) => output(name, p, max_len),
        None => Err(ValueError::bad("expected output(port=P[,max_len=N])").at(args, name)),
    }
}

/// `set_field:VALUE[/MASK]->FIELD`.
fn set_field(name: &str, text: &str, tlv: &TlvTable) -> Result<OfAction, ParseError> {
    let Some((v, target)) = text.rsplit_once("->") else {
        return Err(ValueError::bad("expected VALUE[/MASK]->FIELD").at(text, name));
    };
    if let Some(index) = fields::tun_metadata_name(target) {
        let slot = fields::tun_metadata_slot(tlv, index, target)?;
        let (value, mask) = fields::tun_metadata_value(v, &slot, target)?;
        return Ok(OfAction::SetTunMetadata { slot, value, mask });
    }
    let def = fields::field_def(target)
        .ok_or_else(|| ParseError::new(target, ParseErrorKind::UnknownField))?;
    if !def.writable {
        return Err(ParseError::new(target, ParseErrorKind::NotWritable));
    }
    let (mut value, mask) = fields::parse_value(&def, v)?;
    // OXM vlan_vid: setting a VID makes the tag present (as ovs does).
    if matches!(def.kind, Kind::VlanVid | Kind::DlVlan) && mask & u128::from(VLAN_PRESENT) != 0 {
        value |= u128::from(VLAN_PRESENT);
    }
    Ok(OfAction::SetField {
        field: def.field,
        value,
        mask,
    })
}

/// `load:VALUE->DST[range]`.
fn load(name: &str, text: &str, tlv: &TlvTable) -> Result<OfAction, ParseError> {
    let Some((v, dst)) = text.split_once("->") else {
        return Err(ValueError::bad("expected VALUE->FIELD[range]").at(text, name));
    };
    if let Some(index) = dst
        .strip_prefix("NXM_NX_TUN_METADATA")
        .and_then(|r| r.strip_suffix("[]"))
        .and_then(fields::tun_metadata_number)
    {
        // The whole option (a bit range of it is not supported).
        let slot = fields::tun_metadata_slot(tlv, index, dst)?;
        let (value, mask) = fields::tun_metadata_value(v, &slot, dst)?;
        return Ok(OfAction::SetTunMetadata { slot, value, mask });
    }
    let (range, writable) = fields::parse_subfield(dst)?;
    if !writable {
        return Err(ParseError::new(dst, ParseErrorKind::NotWritable));
    }
    let n = value::number(v).map_err(|e| e.at(v, name))?;
    if range.n_bits < 128 && n >> range.n_bits != 0 {
        return Err(
            ValueError::bad(format!("value does not fit in {} bits", range.n_bits)).at(v, name),
        );
    }
    Ok(OfAction::SetField {
        field: range.field,
        value: n << range.ofs,
        mask: range.mask(),
    })
}

/// `move:SRC[range]->DST[range]`.
fn move_(name: &str, text: &str) -> Result<OfAction, ParseError> {
    let Some((s, d)) = text.split_once("->") else {
        return Err(ValueError::bad("expected SRC[range]->DST[range]").at(text, name));
    };
    let (src, _) = fields::parse_subfield(s)?;
    let (dst, writable) = fields::parse_subfield(d)?;
    if !writable {
        return Err(ParseError::new(d, ParseErrorKind::NotWritable));
    }
    if src.n_bits != dst.n_bits {
        return Err(ValueError::bad(format!(
            "source and destination widths differ ({} vs {} bits)",
            src.n_bits, dst.n_bits
        ))
        .at(text, name));
    }
    Ok(OfAction::Move { src, dst })
}

/// `note:HH.HH...`: hex bytes, each two digits, separated by dots (any
/// number of them, none too).
fn note(name: &str, text: &str) -> Result<OfAction, ParseError> {
    Ok(OfAction::Note(
        value::dotted_hex(text).map_err(|e| e.at(text, name))?,
    ))
}

const CONJUNCTION_SYNTAX: &str = "\"conjunction\" syntax is \"conjunction(id,i/n)\"";

/// `conjunction(ID,K/N)`: clause K (from 1) of N (2 to 64).
fn conjunction(name: &str, args: &str) -> Result<OfAction, ParseError> {
    let bad = |reason: &str| Err(ValueError::bad(reason).at(args, name));
    let Some((id, kn)) = args.split_once(',') else {
        return bad(CONJUNCTION_SYNTAX);
    };
    let Some((k, n)) = kn.split_once('/') else {
        return bad(CONJUNCTION_SYNTAX);
    };
    let num = |t: &str, max: u128| value::number_max(t.trim(), max).ok();
    let (Some(id), Some(k), Some(n)) = (num(id, u128::from(u32::MAX)), num(k, 255), num(n, 255))
    else {
        return bad(CONJUNCTION_SYNTAX);
    };
    if n < 2 {
        return bad("conjunction must have at least 2 clauses");
    }
    if n > 64 {
        return bad("conjunction must have at most 64 clauses");
    }
    if k < 1 {
        return bad("clause index must be positive");
    }
    if k > n {
        return bad("clause index must be less than or equal to number of clauses");
    }
    // Each checked against its maximum above.
    Ok(OfAction::Conjunction {
        id: id as u32,
        clause: (k - 1) as u8,
        n_clauses: n as u8,
    })
}

/// `resubmit(,TABLE)` or `resubmit(PORT,TABLE)`; `resubmit:PORT` and a
/// port without a table (this table, again) are not supported.
fn resubmit(name: &str, arg: Arg<'_>, item: &str) -> Result<OfAction, ParseError> {
    let unsupported = |reason| {
        Err(ParseError::new(
            item,
            ParseErrorKind::Unsupported { reason },
        ))
    };
    let Arg::Paren(args) = arg else {
        return unsupported("resubmit to a port (use resubmit(,TABLE) or resubmit(PORT,TABLE))");
    };
    let mut parts = args.split(',');
    let port = parts.next().unwrap_or("").trim();
    let table = parts.next().unwrap_or("").trim();
    if parts.next().is_some() {
        return unsupported("resubmit with more than a port and a table");
    }
    if table.is_empty() {
        if !port.is_empty() {
            return unsupported("resubmit to a port without a table (use resubmit(PORT,TABLE))");
        }
        return Err(ValueError::bad("expected resubmit(,TABLE)").at(item, name));
    }
    let t = value::number_max(table, u128::from(TableId::MAX.0)).map_err(|e| e.at(table, name))?;
    // At most 253, checked above.
    let t = TableId(t as u8);
    if port.is_empty() {
        return Ok(OfAction::Resubmit(t));
    }
    match value::port(port).map_err(|e| e.at(port, name))? {
        OfPort::InPort => Ok(OfAction::Resubmit(t)),
        p @ (OfPort::Port(_) | OfPort::Controller | OfPort::Local) => {
            Ok(OfAction::ResubmitPort(p, t))
        }
        _ => unsupported(
            "resubmit from a port other than a port number, CONTROLLER, LOCAL or IN_PORT",
        ),
    }
}

/// `sample(probability=N[,collector_set_id=..][,obs_domain_id=..][,obs_point_id=..])`.
fn sample(name: &str, args: &str) -> Result<OfAction, ParseError> {
    let mut probability = None;
    for (k, v) in kv(args)? {
        let Some(v) = v else {
            return Err(ValueError::bad(format!("\"{k}\" needs a value")).at(args, name));
        };
        match k {
            "probability" => {
                let p = value::number_max(v, 0xffff).map_err(|e| e.at(v, k))?;
                if p == 0 {
                    return Err(ValueError::bad("must be at least 1").at(v, k));
                }
                // At most 0xffff, checked above.
                probability = Some(p as u16);
            }
            "collector_set_id" | "obs_domain_id" | "obs_point_id" => {
                value::number_max(v, u128::from(u32::MAX)).map_err(|e| e.at(v, k))?;
            }
            _ => {
                return Err(
                    ValueError::bad(format!("unknown sample argument \"{k}\"")).at(args, name)
                )
            }
        }
    }
    match probability {
        Some(probability) => Ok(OfAction::Sample { probability }),
        None => Err(ValueError::bad("probability=N is required").at(args, name)),
    }
}

#[cfg(test)]
#[path = "tests/actions.rs"]
mod tests;

/// The `DST` of `(LEN)->DST`.
fn dst_text(text: &str) -> &str {
    text.split_once("->").map_or(text, |(_, d)| d)
}

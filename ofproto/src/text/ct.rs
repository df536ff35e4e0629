//! `ct(...)` in the flow syntax: `commit`, `force`, `table=T`,
//! `zone=N|SUBFIELD`, `nat[(...)]`, `exec(set_field:...->ct_mark, ...)`;
//! read with Open vSwitch's rules and errors, printed in its order.
//! Helpers (`alg=ftp|tftp`) are refused with a clear error: eswitch's
//! tracker has none.

use megaflow::Field;

use super::fields;
use super::value::{self, ValueError};
use super::{ParseError, ParseErrorKind};
use crate::rule::{CtAction, CtZone, OfAction};
use crate::TableId;

fn syntax(s: &str, reason: &'static str) -> ParseError {
    ParseError::new(s, ParseErrorKind::Syntax { reason })
}

/// Parses the argument of `ct(...)` (empty for a bare `ct`).
pub(crate) fn parse_ct(name: &str, args: &str) -> Result<OfAction, ParseError> {
    let mut ct = CtAction {
        commit: false,
        force: false,
        table: None,
        zone: CtZone::Imm(0),
        nat: None,
        exec: Vec::new(),
    };
    let items = if args.trim().is_empty() {
        vec![]
    } else {
        value::split_list(args).map_err(|reason| syntax(args, reason))?
    };
    for item in items {
        let (key, val) = match item.find(['=', '(']) {
            Some(i) if item.as_bytes()[i] == b'=' => (&item[..i], Some(&item[i + 1..])),
            Some(i) => {
                let inner = item[i + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| syntax(item, "text after the closing parenthesis"))?;
                (&item[..i], Some(inner))
            }
            None => (item, None),
        };
        match (key, val) {
            ("commit", None) => ct.commit = true,
            ("force", None) => ct.force = true,
            ("table", Some(t)) => {
                let n = value::number_max(t, u128::from(TableId::MAX.0)).map_err(|e| e.at(t, "table"))?;
                // At most 253, checked above.
                ct.table = Some(TableId(n as u8));
            }
            ("zone", Some(z)) => {
                ct.zone = match value::number_max(z, 0xffff) {
                    // At most 0xffff, checked.
                    Ok(n) => CtZone::Imm(n as u16),
                    Err(_) => {
                        let (range, _) = fields::parse_subfield(z)?;
                        if range.n_bits != 16 {
                            return Err(ValueError::bad("a zone subfield must be 16 bits wide").at(z, "zone"));
                        }
                        CtZone::Field(range)
                    }
                };
            }
            ("nat", v) => {
                let nat = conntrack::nat::parse_nat(v.unwrap_or("")).map_err(|e| ValueError::bad(e).at(item, "nat"))?;
                ct.nat = Some(nat);
            }
            ("exec", Some(list)) => {
                for sub in value::split_list(list).map_err(|reason| syntax(list, reason))? {
                    ct.exec.push(exec_action(sub)?);
                }
            }
            ("alg", Some(a)) => {
                return Err(ParseError::new(
                    a,
                    ParseErrorKind::Unsupported {
                        reason: "connection tracking helpers (alg=ftp, alg=tftp): eswitch's tracker has none",
                    },
                ))
            }
            _ => {
                return Err(ValueError::bad(format!("invalid argument to \"ct\" action: `{key}'")).at(item, name))
            }
        }
    }
    if ct.force && !ct.commit {
        return Err(ValueError::bad("\"force\" flag requires \"commit\" flag.").at(args, name));
    }
    if !ct.exec.is_empty() && !ct.commit {
        return Err(
            ValueError::bad("exec(...) writes ct_mark and ct_label only with \"commit\"")
                .at(args, name),
        );
    }
    Ok(OfAction::Ct(Box::new(ct)))
}

/// One action inside `exec(...)`: a write to `ct_mark` or `ct_label`.
fn exec_action(item: &str) -> Result<OfAction, ParseError> {
    let only = || {
        ParseError::new(
            item,
            ParseErrorKind::NotAllowed {
                context:
                    "ct(exec(...)), which takes only set_field and load into ct_mark and ct_label",
            },
        )
    };
    let ct_field = |f: Field| matches!(f, Field::CtMark | Field::CtLabel);
    if let Some(text) = item.strip_prefix("set_field:") {
        let (v, target) = text.rsplit_once("->").ok_or_else(only)?;
        let def = fields::field_def(target)
            .filter(|d| ct_field(d.field))
            .ok_or_else(only)?;
        let (value, mask) = fields::parse_value(&def, v)?;
        return Ok(OfAction::SetField {
            field: def.field,
            value,
            mask,
        });
    }
    if let Some(text) = item.strip_prefix("load:") {
        let (v, dst) = text.split_once("->").ok_or_else(only)?;
        let (range, _) = fields::parse_subfield(dst)?;
        if !ct_field(range.field) {
            return Err(only());
        }
        let n = value::number(v).map_err(|e| e.at(v, "load"))?;
        if range.n_bits < 128 && n >> range.n_bits != 0 {
            return Err(
                ValueError::bad(format!("value does not fit in {} bits", range.n_bits))
                    .at(v, "load"),
            );
        }
        return Ok(OfAction::SetField {
            field: range.field,
            value: n << range.ofs,
            mask: range.mask(),
        });
    }
    Err(only())
}

/// `ct(...)` as Open vSwitch's `format_CT` writes it; `actions` prints
/// the exec list.
pub(crate) fn format_ct(ct: &CtAction, actions: impl Fn(&[OfAction]) -> String) -> String {
    let mut parts: Vec<String> = Vec::new();
    if ct.commit {
        parts.push("commit".into());
    }
    if ct.force {
        parts.push("force".into());
    }
    if let Some(t) = ct.table {
        parts.push(format!("table={t}"));
    }
    match ct.zone {
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => parts.push(format!("zone={z}")),
        CtZone::Field(r) => {
            let name = fields::nxm_name(r.field);
            let hi = u32::from(r.ofs) + u32::from(r.n_bits) - 1;
            parts.push(format!("zone={name}[{}..{hi}]", r.ofs));
        }
    }
    if let Some(nat) = &ct.nat {
        parts.push(conntrack::nat::format_nat(nat));
    }
    if !ct.exec.is_empty() {
        parts.push(format!("exec({})", actions(&ct.exec)));
    }
    format!("ct({})", parts.join(","))
}

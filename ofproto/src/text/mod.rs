//! # The `ovs-ofctl` flow text syntax
//!
//! Parses the flows `ovs-ofctl add-flow`/`mod-flows`/`del-flows` take
//! (`table=0,priority=100,in_port=1,tcp,tp_dst=80,actions=output:2`) into
//! [`FlowMod`]s, and prints [`Match`]es, [`Instructions`] and [`RuleSpec`]s
//! back in the same syntax. The CLI, the OpenFlow adapter's tests and the
//! trace tool call it; it holds no state and is safe from any thread.
//!
//! Layout:
//! - this module: the flow-level keywords (`table`, `priority`, `cookie`,
//!   timeouts, flags, `out_port`, `actions=`), the error types and the
//!   public entry points;
//! - `fields`: the match field table (names, value kinds, prerequisites)
//!   and the builder that turns `field=value` tokens into a [`Match`];
//! - `actions`: the text after `actions=`;
//! - `print`: the canonical printer;
//! - `value`: numbers, addresses, masks, port names, list splitting.
//!
//! Semantics follow ovs-ofctl(8) and ovs-fields(7): key=value pairs are
//! separated by commas and/or white space; `actions=` takes the rest of the
//! line; field prerequisites (`nw_src` needs `ip` or `arp`, ...) are checked
//! after the whole match is read; a field given twice with different values
//! is an error. The statistics `dump-flows` prints (`duration`,
//! `n_packets`, `n_bytes`, `idle_age`, `hard_age`) are accepted and
//! ignored, so dump output can be fed back.
//!
//! Invariants: parsing never panics on any input (a proptest and a fuzz
//! target check it); every match built goes through
//! [`Match::set_field_masked`], so wildcarded key bits are zero; printing
//! then parsing a rule the parser produced gives the same rule.
//!
//! Errors are one [`ParseError`]: the offending token and a
//! [`ParseErrorKind`]; its `Display` is the whole message
//! (`prerequisite "ip" missing for "nw_src"`). [`FileError`] adds the line
//! number for [`parse_flow_file`].

mod actions;
mod ct;
mod fields;
pub use fields::ct_state_flags;
pub(crate) use fields::{field_def, FieldDef, MatchBuilder};
mod print;
mod value;

pub use print::{
    format_action_list, format_instructions, format_match, format_match_in, format_rule,
    format_rule_in,
};

use megaflow::Match;

use crate::rule::{FlowMod, FlowModCommand, Instructions, OfPort, RuleSpec};
use crate::{Cookie, Priority, TableId};

use value::ValueError;

/// Why a flow text did not parse: the offending token and what is wrong
/// with it. `Display` gives the whole message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.token, .kind))]
pub struct ParseError {
    token: String,
    kind: ParseErrorKind,
}

/// What is wrong with the token of a [`ParseError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// Not a match field or flow keyword (token: the name).
    UnknownField,
    /// Not an action or instruction (token: the name).
    UnknownAction,
    /// The match lacks what the field needs (token: the field name).
    MissingPrerequisite { prerequisite: &'static str },
    /// A `/N` prefix longer than the address (token: the value).
    PrefixTooLong { prefix: u32, family: &'static str },
    /// The value does not fit the field or action (token: the value).
    BadValue { field: String, reason: String },
    /// A field given twice with different values (token: the field name).
    DuplicateField,
    /// Two spellings disagree about the same key bits (token: the later one).
    Conflict { with: String },
    /// A keyword the command or context does not take (token: the keyword).
    NotAllowed { context: &'static str },
    /// `add-flow`/`mod-flows` without `actions=`.
    MissingActions,
    /// A field or action that needs a value has none (token: the name).
    MissingValue,
    /// A shorthand, flag or action that takes no value has one.
    UnexpectedValue,
    /// `drop` together with other actions.
    DropNotAlone,
    /// An instruction out of OpenFlow's order (token: the item).
    InstructionOrder { after: String },
    /// An instruction given twice (token: its name).
    DuplicateInstruction,
    /// `conjunction` beside an action other than `conjunction` and
    /// `note` (token: the instructions).
    ConjunctionNotAlone { other: String },
    /// A field actions may not write (token: the field name).
    NotWritable,
    /// Valid `ovs-ofctl` syntax eswitch does not implement (token: the item).
    Unsupported { reason: &'static str },
    /// Malformed text such as unbalanced parentheses (token: the text).
    Syntax { reason: &'static str },
}

fn describe(token: &str, kind: &ParseErrorKind) -> String {
    use ParseErrorKind as K;
    match kind {
        K::UnknownField => format!("unknown field \"{token}\""),
        K::UnknownAction => format!("unknown action \"{token}\""),
        K::MissingPrerequisite { prerequisite } => {
            format!("prerequisite \"{prerequisite}\" missing for \"{token}\"")
        }
        K::PrefixTooLong { prefix, family } => format!("prefix /{prefix} too long for {family}"),
        K::BadValue { field, reason } => format!("bad value \"{token}\" for \"{field}\": {reason}"),
        K::DuplicateField => format!("duplicate field \"{token}\""),
        K::Conflict { with } => format!("\"{token}\" conflicts with \"{with}\""),
        K::NotAllowed { context } => format!("\"{token}\" not allowed in {context}"),
        K::MissingActions => "missing \"actions\"".to_string(),
        K::MissingValue => format!("missing value for \"{token}\""),
        K::UnexpectedValue => format!("\"{token}\" takes no value"),
        K::DropNotAlone => "\"drop\" must be the only action".to_string(),
        K::InstructionOrder { after } => format!("\"{token}\" may not follow \"{after}\""),
        K::DuplicateInstruction => format!("duplicate instruction \"{token}\""),
        K::ConjunctionNotAlone { other } => format!(
            "\"conjunction\" actions may be used along with \"note\" but not any other \
             kind of action (such as the \"{other}\" action used here)"
        ),
        K::NotWritable => format!("field \"{token}\" is not writable"),
        K::Unsupported { reason } => format!("\"{token}\" not supported: {reason}"),
        K::Syntax { reason } => format!("syntax error in \"{token}\": {reason}"),
    }
}

impl ParseError {
    pub(crate) fn new(token: &str, kind: ParseErrorKind) -> Self {
        ParseError {
            token: token.to_string(),
            kind,
        }
    }

    /// The offending piece of text.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// What is wrong with it.
    pub fn kind(&self) -> &ParseErrorKind {
        &self.kind
    }
}

/// A flow file line that did not parse. `Display` gives
/// `line N: <parse error>`; the parse error is part of the message, not a
/// separate `source`, so error chains do not print it twice.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct FileError {
    /// 1-based line number.
    pub line: usize,
    pub error: ParseError,
}

/// Flow-level keywords (everything that is not a match field or `actions`).
const FLOW_KEYWORDS: [&str; 13] = [
    "table",
    "priority",
    "cookie",
    "idle_timeout",
    "hard_timeout",
    "importance",
    "send_flow_rem",
    "check_overlap",
    "reset_counts",
    "no_packet_counts",
    "no_byte_counts",
    "out_port",
    "out_group",
];

/// `dump-flows` statistics, accepted and ignored by `parse_flow`.
const DUMP_STATISTICS: [&str; 5] = ["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token<'a> {
    key: &'a str,
    value: Option<&'a str>,
}

fn is_sep(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// Splits a flow into `key[=value]` tokens and, when present, the text of
/// `actions=` (or `action=`): the rest of the line, as (keyword, text).
fn tokenize(s: &str) -> (Vec<Token<'_>>, Option<(&str, &str)>) {
    let mut tokens = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches(is_sep);
        if rest.is_empty() {
            return (tokens, None);
        }
        let end = rest.find(is_sep).unwrap_or(rest.len());
        let (token, after) = rest.split_at(end);
        let (key, value) = match token.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (token, None),
        };
        if value.is_some() && (key == "actions" || key == "action") {
            // `key=` is a prefix of `rest`, so this is a char boundary.
            return (tokens, Some((key, &rest[key.len() + 1..])));
        }
        tokens.push(Token { key, value });
        rest = after;
    }
}

/// The `ovs-ofctl` command a flow mod command comes from, for messages.
fn command_name(command: FlowModCommand) -> &'static str {
    match command {
        FlowModCommand::Add => "add-flow",
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => "mod-flows",
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => "del-flows",
    }
}

fn is_delete(command: FlowModCommand) -> bool {
    matches!(
        command,
        FlowModCommand::Delete | FlowModCommand::DeleteStrict
    )
}

/// Parses one flow as `ovs-ofctl add-flow`/`mod-flows`/`del-flows` take it.
///
/// For `Add`, a missing `table=` means table 0; for modify and delete it
/// (or `table=255`) means every table (`FlowMod::table` is `None`, and
/// `rule.table` is 0). `actions=` is required for add and modify and
/// refused for delete; `out_port` and cookie masks only filter modify and
/// delete; timeouts, importance and flags are refused for delete.
pub fn parse_flow(s: &str, command: FlowModCommand) -> Result<FlowMod, ParseError> {
    parse_flow_in(s, command, &crate::tlv::EMPTY)
}

/// [`parse_flow`] on a bridge whose TLV table is `tlv` (which places the
/// `tun_metadata<n>` fields it names).
pub fn parse_flow_in(
    s: &str,
    command: FlowModCommand,
    tlv: &crate::tlv::TlvTable,
) -> Result<FlowMod, ParseError> {
    let (tokens, actions) = tokenize(s);
    let mut builder = MatchBuilder::new(tlv);
    let mut fm = FlowMod {
        command,
        table: None,
        rule: RuleSpec::new(TableId(0), RuleSpec::DEFAULT_PRIORITY, Match::catch_all()),
        cookie_mask: 0,
        out_port: OfPort::Any,
        out_group: None,
    };
    let mut table: Option<Option<TableId>> = None;
    let mut seen: Vec<Token<'_>> = Vec::new();
    for tok in tokens {
        if DUMP_STATISTICS.contains(&tok.key) {
            continue;
        }
        if !FLOW_KEYWORDS.contains(&tok.key) {
            builder.apply(tok.key, tok.value)?;
            continue;
        }
        if let Some(prev) = seen.iter().find(|p| p.key == tok.key) {
            if prev.value != tok.value {
                return Err(ParseError::new(tok.key, ParseErrorKind::DuplicateField));
            }
            continue;
        }
        seen.push(tok);
        flow_keyword(&mut fm, &mut table, tok)?;
    }
    fm.rule.matched = builder.finish()?;

    let table = table.unwrap_or(if command == FlowModCommand::Add {
        Some(TableId(0))
    } else {
        None
    });
    fm.table = table;
    fm.rule.table = table.unwrap_or(TableId(0));

    match actions {
        Some((key, _)) if is_delete(command) => {
            return Err(ParseError::new(
                key,
                ParseErrorKind::NotAllowed {
                    context: command_name(command),
                },
            ))
        }
        Some((_, text)) => fm.rule.instructions = actions::parse_instructions(text, tlv)?,
        None if !is_delete(command) => {
            return Err(ParseError::new("actions", ParseErrorKind::MissingActions))
        }
        None => {}
    }
    if let (Some(t), Some(goto)) = (fm.table, fm.rule.instructions.goto_table) {
        if goto <= t {
            return Err(
                ValueError::bad(format!("must be greater than the rule's table {t}"))
                    .at(&goto.to_string(), "goto_table"),
            );
        }
    }
    Ok(fm)
}

fn required<'a>(tok: &Token<'a>) -> Result<&'a str, ParseError> {
    tok.value
        .ok_or_else(|| ParseError::new(tok.key, ParseErrorKind::MissingValue))
}

fn num(tok: &Token<'_>, max: u128) -> Result<u128, ParseError> {
    let v = required(tok)?;
    value::number_max(v, max).map_err(|e| e.at(v, tok.key))
}

/// Applies one flow-level keyword; `table` records an explicit `table=`.
fn flow_keyword(
    fm: &mut FlowMod,
    table: &mut Option<Option<TableId>>,
    tok: Token<'_>,
) -> Result<(), ParseError> {
    let command = fm.command;
    let add = command == FlowModCommand::Add;
    let not_allowed = || {
        Err(ParseError::new(
            tok.key,
            ParseErrorKind::NotAllowed {
                context: command_name(command),
            },
        ))
    };
    let rule = &mut fm.rule;
    match tok.key {
        "table" => {
            let v = required(&tok)?;
            *table = Some(match num(&tok, 255)? {
                255 if !add => None,
                255 => {
                    return Err(ValueError::bad(
                        "255 (all tables) is only allowed in mod-flows and del-flows",
                    )
                    .at(v, tok.key))
                }
                // At most 253 in this arm.
                n if n <= u128::from(TableId::MAX.0) => Some(TableId(n as u8)),
                _ => return Err(ValueError::bad("table ids go up to 253").at(v, tok.key)),
            });
        }
        // Each numeric keyword is range-checked by `num` before the cast.
        "priority" => rule.priority = Priority(num(&tok, 0xffff)? as u16),
        "cookie" => {
            let text = required(&tok)?;
            let (v, m) = value::split_mask(text);
            let max = u128::from(u64::MAX);
            rule.cookie = Cookie(value::number_max(v, max).map_err(|e| e.at(v, tok.key))? as u64);
            if let Some(m) = m {
                if add {
                    return Err(ValueError::bad(
                        "a cookie mask is only allowed in mod-flows and del-flows",
                    )
                    .at(text, tok.key));
                }
                fm.cookie_mask = if m == "-1" {
                    u64::MAX
                } else {
                    value::number_max(m, max).map_err(|e| e.at(m, tok.key))? as u64
                };
            }
        }
        "idle_timeout" | "hard_timeout" | "importance" if is_delete(command) => {
            return not_allowed()
        }
        "idle_timeout" => rule.idle_timeout = num(&tok, 0xffff)? as u16,
        "hard_timeout" => rule.hard_timeout = num(&tok, 0xffff)? as u16,
        "importance" => rule.importance = num(&tok, 0xffff)? as u16,
        "out_port" if add => return not_allowed(),
        "out_port" => {
            let v = required(&tok)?;
            fm.out_port = value::port(v).map_err(|e| e.at(v, tok.key))?;
        }
        "out_group" if add => return not_allowed(),
        "out_group" => fm.out_group = Some(num(&tok, u128::from(u32::MAX))? as u32),
        _ if is_delete(command) => return not_allowed(),
        flag => {
            if tok.value.is_some() {
                return Err(ParseError::new(flag, ParseErrorKind::UnexpectedValue));
            }
            let f = &mut rule.flags;
            match flag {
                "send_flow_rem" => f.send_flow_rem = true,
                "check_overlap" => f.check_overlap = true,
                "reset_counts" => f.reset_counts = true,
                "no_packet_counts" => f.no_packet_counts = true,
                "no_byte_counts" => f.no_byte_counts = true,
                // FLOW_KEYWORDS holds nothing else.
                _ => return Err(ParseError::new(flag, ParseErrorKind::UnknownField)),
            }
        }
    }
    Ok(())
}

/// Parses a match alone (`in_port=1,tcp,tp_dst=80`), as `ofproto/trace`
/// and `dump-flows` filters give it. Flow keywords and `actions=` are
/// refused.
pub fn parse_match(s: &str) -> Result<Match, ParseError> {
    parse_match_in(s, &crate::tlv::EMPTY)
}

/// [`parse_match`] on a bridge whose TLV table is `tlv`.
pub fn parse_match_in(s: &str, tlv: &crate::tlv::TlvTable) -> Result<Match, ParseError> {
    let (tokens, actions) = tokenize(s);
    let not_allowed =
        |key: &str| ParseError::new(key, ParseErrorKind::NotAllowed { context: "a match" });
    if let Some((key, _)) = actions {
        return Err(not_allowed(key));
    }
    let mut builder = MatchBuilder::new(tlv);
    for tok in tokens {
        if FLOW_KEYWORDS.contains(&tok.key) || DUMP_STATISTICS.contains(&tok.key) {
            return Err(not_allowed(tok.key));
        }
        builder.apply(tok.key, tok.value)?;
    }
    builder.finish()
}

/// Parses the text after `actions=` (`meter:1,output:2,goto_table:3`);
/// `drop` or nothing gives the empty instruction set.
pub fn parse_instructions(s: &str) -> Result<Instructions, ParseError> {
    actions::parse_instructions(s, &crate::tlv::EMPTY)
}

/// The lines of a flow file that hold something, trimmed, with their
/// 1-based numbers: blank lines and lines starting with `#` are skipped.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> + '_ {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Parses a flow file (`ovs-ofctl add-flows`): one flow a line; blank
/// lines and lines starting with `#` are skipped.
pub fn parse_flow_file(text: &str, command: FlowModCommand) -> Result<Vec<FlowMod>, FileError> {
    content_lines(text)
        .map(|(line, l)| parse_flow(l, command).map_err(|error| FileError { line, error }))
        .collect()
}

/// eswitch's flow file: `ovs-ofctl add-flows` lines, plus `meter=...` lines
/// in `ovs-ofctl add-meter` syntax (an eswitch extension, so one file sets
/// up a whole table). The one parser of flow files (replay, `eswitchd run`).
#[derive(Clone, Debug, Default)]
pub struct FlowFile {
    pub flows: Vec<FlowMod>,
    pub meters: Vec<crate::meter::MeterSpec>,
}

/// A flow file line that does not parse, named by its number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowFileError {
    #[error("line {line}: {error}")]
    Flow { line: usize, error: ParseError },
    #[error("line {line}: {error}")]
    Meter {
        line: usize,
        error: crate::meter::MeterError,
    },
}

impl FlowFile {
    /// Parses the text; an error names the line and what is wrong with it.
    pub fn parse(text: &str) -> Result<FlowFile, FlowFileError> {
        let mut out = FlowFile::default();
        for (line, l) in content_lines(text) {
            if l.starts_with("meter=") {
                let m = crate::meter::parse_meter(l)
                    .map_err(|error| FlowFileError::Meter { line, error })?;
                out.meters.push(m);
            } else {
                let fm = parse_flow(l, FlowModCommand::Add)
                    .map_err(|error| FlowFileError::Flow { line, error })?;
                out.flows.push(fm);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "tests/module.rs"]
mod tests;

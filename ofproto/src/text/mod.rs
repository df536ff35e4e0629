//! The `ovs-ofctl` flow text syntax (placeholder until the parser lands).

use crate::rule::{FlowMod, FlowModCommand};

/// A flow text that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// Parses one flow as `ovs-ofctl add-flow`/`mod-flows`/`del-flows` take it.
pub fn parse_flow(_s: &str, _command: FlowModCommand) -> Result<FlowMod, ParseError> {
    Err(ParseError("flow syntax not implemented yet".into()))
}

/// Placeholder printer.
pub fn format_match(m: &megaflow::Match) -> String {
    format!("{m:?}")
}

/// Placeholder printer.
pub fn format_instructions(i: &crate::rule::Instructions) -> String {
    format!("{i:?}")
}

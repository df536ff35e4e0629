//! Fuzz target for the `ovs-ofctl` flow syntax: any UTF-8 text must parse
//! or fail without a panic, for every flow mod command and for the match and
//! instruction parsers alone; and any text that parses as an add must print
//! (`format_rule`) to text that parses back to the same rule.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.

use ofproto::text::{format_match, format_rule, parse_flow, parse_instructions, parse_match};
use ofproto::FlowModCommand;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for command in [
        FlowModCommand::Modify,
        FlowModCommand::ModifyStrict,
        FlowModCommand::Delete,
        FlowModCommand::DeleteStrict,
    ] {
        let _ = parse_flow(s, command);
    }
    if let Ok(m) = parse_match(s) {
        let text = format_match(&m);
        let again = parse_match(&text).expect("printed match must parse");
        assert!(again == m, "{s:?} -> {text:?}");
    }
    let _ = parse_instructions(s);
    if let Ok(fm) = parse_flow(s, FlowModCommand::Add) {
        let text = format_rule(&fm.rule);
        let again = parse_flow(&text, FlowModCommand::Add)
            .unwrap_or_else(|e| panic!("{s:?} printed as {text:?} does not parse: {e}"));
        assert_eq!(again.rule, fm.rule, "{s:?} -> {text:?}");
    }
}

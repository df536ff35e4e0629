//! Unit tests of `ofproto/src/text/mod.rs`, kept beside it.

use super::*;

#[test]
fn tokenizer_splits_on_commas_and_spaces() {
    let (toks, actions) = tokenize(" priority=5, ip  nw_src=1.2.3.4 actions=output:1, 2");
    let keys: Vec<_> = toks.iter().map(|t| t.key).collect();
    assert_eq!(keys, ["priority", "ip", "nw_src"]);
    assert_eq!(toks[1].value, None);
    assert_eq!(actions, Some(("actions", "output:1, 2")));
    assert_eq!(tokenize(",, ,").0, vec![]);
}

#[test]
fn error_accessors() {
    let e = parse_match("foo=1").unwrap_err();
    assert_eq!(e.token(), "foo");
    assert_eq!(e.kind(), &ParseErrorKind::UnknownField);
}

#[test]
fn defaults_per_command() {
    let add = parse_flow("actions=drop", FlowModCommand::Add).unwrap();
    assert_eq!(add.table, Some(TableId(0)));
    assert_eq!(add.rule.priority, RuleSpec::DEFAULT_PRIORITY);
    let del = parse_flow("", FlowModCommand::Delete).unwrap();
    assert_eq!(del.table, None);
    assert_eq!(del.out_port, OfPort::Any);
    let m = parse_flow("table=255 actions=drop", FlowModCommand::Modify).unwrap();
    assert_eq!(m.table, None);
    assert!(parse_flow("table=255 actions=drop", FlowModCommand::Add).is_err());
    assert!(parse_flow("table=254 actions=drop", FlowModCommand::Add).is_err());
}

#[test]
fn dump_flows_output_feeds_back() {
    let fm = parse_flow(
        "cookie=0x0, duration=12.345s, table=0, n_packets=3, n_bytes=180, idle_age=2, \
         priority=100,ip actions=NORMAL",
        FlowModCommand::Add,
    )
    .unwrap();
    assert_eq!(fm.rule.priority, Priority(100));
}

//! Fuzz target for the `add-meter` syntax (`ofproto::parse_meter`): any
//! UTF-8 text must parse or fail without a panic, and a meter that parses
//! prints (`Display`) to text that parses back to the same `MeterSpec`.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.

use ofproto::parse_meter;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = parse_meter(s) else {
        return;
    };
    let text = m.to_string();
    let again = parse_meter(&text)
        .unwrap_or_else(|e| panic!("{s:?} printed as {text:?} does not parse: {e}"));
    assert_eq!(again, m, "{s:?} -> {text:?}");
    // The band the buckets use is defined for every accepted meter.
    let _ = m.band();
}

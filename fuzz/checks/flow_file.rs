//! Fuzz target for flow files (`cli::switch::FlowFile::parse`): any UTF-8
//! text must parse or fail without a panic; a file that parses has one
//! flow or meter per line that is neither blank nor a `#` comment.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.

use cli::switch::FlowFile;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(f) = FlowFile::parse(s) else {
        return;
    };
    let lines = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(f.flows.len() + f.meters.len(), lines, "{s:?}");
}

//! Fuzz target for the `ovs-ofctl` flow syntax: any UTF-8 text must parse
//! or fail without a panic, for every flow mod command and for the match and
//! instruction parsers alone; and any text that parses as an add must print
//! (`format_rule`) to text that parses back to the same rule.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.
//!
//! The check itself is `fuzz/checks/flow_text.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::flow_text::check(data));

//! Fuzz target for the `add-meter` syntax (`ofproto::parse_meter`): any
//! UTF-8 text must parse or fail without a panic, and a meter that parses
//! prints (`Display`) to text that parses back to the same `MeterSpec`.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.
//!
//! The check itself is `fuzz/checks/meter_parse.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::meter_parse::check(data));

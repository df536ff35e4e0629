//! Fuzz target for flow files (`cli::switch::FlowFile::parse`): any UTF-8
//! text must parse or fail without a panic; a file that parses has one
//! flow or meter per line that is neither blank nor a `#` comment.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.
//!
//! The check itself is `fuzz/checks/flow_file.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::flow_file::check(data));

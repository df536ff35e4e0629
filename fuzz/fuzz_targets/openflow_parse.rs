//! Fuzz target for the OpenFlow 1.3 codec: any bytes must parse or fail
//! with an error that maps to an ERROR the spec defines, without a panic;
//! a message that parses emits bytes that parse to the same message; the
//! framer cuts any stream without a panic.
//!
//! Input: arbitrary bytes, parsed as one message (with its header length
//! patched to the input's length, so bodies are reached) and as a stream.
//!
//! The check itself is `fuzz/checks/openflow_parse.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::openflow_parse::check(data));

//! Fuzz target for the control socket's requests
//! (`cli::control::parse_request`, one JSON object per line): any text is
//! parsed or refused with a message, never a panic; a request that parses
//! serializes and parses back to the same request.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.
//!
//! The check itself is `fuzz/checks/control_request.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::control_request::check(data));

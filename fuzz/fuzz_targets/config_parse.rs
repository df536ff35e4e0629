//! Fuzz target for `eswitch.toml` (`cli::config::Config::parse`): any UTF-8
//! text must be accepted or refused without a panic; an accepted config
//! yields its pipeline settings and its checked ports (names, OpenFlow
//! numbers and vports unique) again.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.
//!
//! The check itself is `fuzz/checks/config_parse.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::config_parse::check(data));

//! Fuzz target for the connection tracker (`conntrack`): see
//! `fuzz/checks/conntrack.rs`, which `cargo test` also runs on every seed
//! (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::conntrack::check(data));

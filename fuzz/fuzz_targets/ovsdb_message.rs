//! Fuzz target for what an OVSDB server sends: the check is
//! `fuzz/checks/ovsdb_message.rs`, which `cargo test` also runs on every
//! seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::ovsdb_message::check(data));

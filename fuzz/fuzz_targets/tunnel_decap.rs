//! Fuzz target for tunnel decapsulation (`megaflow::tunnel`): see
//! `fuzz/checks/tunnel_decap.rs`, which `cargo test` also runs on every
//! seed (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::tunnel_decap::check(data));

//! Fuzz target for the device dump parser (`mlx5::dr_dump`): see
//! `fuzz/checks/dr_dump.rs`, which `cargo test` also runs on every seed
//! (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::dr_dump::check(data));

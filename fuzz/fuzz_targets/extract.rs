//! Fuzz target for packet extraction: any bytes must parse without a panic,
//! into a key that is overwritten whole, with layout offsets inside the input.
//!
//! Input: the first 4 bytes (little-endian) are the ingress port when there
//! are at least 4; the rest is the frame. Shorter inputs are a frame on port 0.
//!
//! The check itself is `fuzz/checks/extract.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::extract::check(data));

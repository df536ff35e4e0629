//! Fuzz target for the OpenFlow connection state machine: byte streams as
//! a controller (or an attacker) would send them, in arbitrary cuts, never
//! panic it; whatever it answers is well-formed OpenFlow 1.3.
//!
//! Input: byte 0 chooses the cut size (1..=64); the rest is the stream,
//! sent after a valid HELLO half of the time (byte 0's top bit) so the
//! open state is reached.
//!
//! The check itself is `fuzz/checks/openflow_channel.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::openflow_channel::check(data));

//! Fuzz target for capture files (`megaflow::port::PcapReader`, pcap and
//! pcapng): any bytes are read or refused without a panic; every frame
//! read is within the length the reader promises, and the reader stops.
//!
//! Input: arbitrary bytes, as a capture file.
//!
//! The check itself is `fuzz/checks/pcap_read.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::pcap_read::check(data));

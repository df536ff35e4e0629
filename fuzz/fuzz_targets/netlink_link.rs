//! Fuzz target for rtnetlink link messages as the representor tracker
//! reads them (`netlink-packet-route`'s parser, then
//! `offload::representor::{link_msg, link_info}` and the port table):
//! any bytes are parsed or refused without a panic, and whatever parses is
//! applied to a table that stays consistent (names and ifindexes unique).
//!
//! Input: arbitrary bytes, as one netlink datagram.
//!
//! The check itself is `fuzz/checks/netlink_link.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::netlink_link::check(data));

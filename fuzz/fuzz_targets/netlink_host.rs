//! Fuzz target for rtnetlink messages as the tunnel ports' host state
//! reads them (`offload::host::HostTable`): parsed or refused without a
//! panic, and a next hop is always a route of the table that holds the
//! address.
//!
//! Input: arbitrary bytes, as one netlink datagram.
//!
//! The check itself is `fuzz/checks/netlink_host.rs`, which `cargo test`
//! also runs on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::netlink_host::check(data));

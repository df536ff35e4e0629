//! Fuzz target for `fte_match_param` decoding: any (criteria, mask, value)
//! bytes must be checked by `Encoded::from_bytes` and decoded by
//! `offload::prm::decode` without a panic; an accepted buffer keeps its
//! value bits inside its mask; a decoded match that encodes again decodes
//! to itself.
//!
//! Input: byte 0 is `match_criteria_enable`; byte 1 selects the source-port
//! mode (bit 0: misc.source_port or reg_c_0 metadata) and whether the
//! buffer lengths are kept raw (bit 1; otherwise they are cut to a multiple
//! of 4, at most 448, to reach the decoder); the rest is split in half into
//! mask and value. The value is tried as given and ANDed with the mask.
//!
//! The check itself is `fuzz/checks/prm_decode.rs`, which `cargo test` also runs
//! on every seed and regression input (`cli/tests/fuzz_seeds.rs`).

#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::prm_decode::check(data));

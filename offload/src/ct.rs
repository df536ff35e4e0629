//! The conntrack chain in the FDB: tables and the register layout.
//!
//! ```text
//! level 1 (megaflows of first stages)
//!   ct(zone=Z[,nat]),recirc(R) → counter, modify-header
//!        [rewrites, reg_c_1 = tag T, reg_c_2 = Z | NAT_ASKED?, reg_c_5 = R],
//!        goto CT
//! level 3, CT: zone + asked-for-NAT + 5-tuple (TCP with SYN = FIN = RST = 0),
//!        one entry per established connection direction
//!   hit  → counter, modify-header [NAT rewrite, reg_c_2 = Z | state << 16,
//!          reg_c_3 = mark, reg_c_1 |= HIT (| TRANSLATED)], goto POST_CT
//!   miss → the eSwitch manager with tag T: software tracks the untouched
//!          packet (`Restore::AtCt`)
//! level 4, POST_CT: megaflows of later stages, matching reg_c_5 (recirc_id),
//!        reg_c_2 (ct_zone, ct_state) and reg_c_3 (ct_mark)
//!   miss → the manager with tag T | HIT [| TRANSLATED]: software gives the
//!          packet its connection's state and continues at R
//!          (`Restore::PostCt`)
//! ```
//!
//! The layout follows the kernel's (`en/tc_ct.c`: zone in reg_c_2's low
//! half, the state above it, the mark in reg_c_3) but for three choices:
//! the state is Open vSwitch's `ct_state` byte (what megaflows match, so
//! a post-ct match is the megaflow's own bits); the recirculation id goes
//! in reg_c_5 (the kernel's chain mapping has a table of its own); and
//! there is no label register: a later stage that matches `ct_label` stays
//! in software. reg_c_0 is the source vport's (firmware), reg_c_1 the
//! restore tag's; a meter's colour (reg_c_2, level 2) never meets a chain:
//! a stage with a meter or a sampler is not chained.
//!
//! A stage-1 flow holds four consecutive tags from a multiple of four:
//! T (a CT miss), T | HIT and T | HIT | TRANSLATED (a post-ct miss), so
//! a CT entry marks the packet with two bits and needs no tag of its own.

/// zone (bits 15..0), then `ct_state` (bits 23..16) once the CT table
/// has run; before it, bit 31 says the `ct()` asked for NAT.
pub const REG_ZONE_STATE: u8 = 2;
/// Where `ct_state` starts in [`REG_ZONE_STATE`].
pub const STATE_SHIFT: u32 = 16;
/// The `ct()` of the stage asked for NAT (CT table lookups only).
pub const NAT_ASKED: u32 = 1 << 31;
/// `ct_mark`.
pub const REG_MARK: u8 = 3;
/// The next stage's `recirc_id`.
pub const REG_RECIRC: u8 = 5;

/// The conntrack table's level (of the first `ct()` pass).
pub const LEVEL_CT: u32 = 3;
/// The level of the tables of later stages (after the first pass).
pub const LEVEL_POST_CT: u32 = 4;

/// `ct()` passes one packet may take in the device. Tables only lead to
/// higher levels (rdma-core refuses a jump to a table at or below the
/// rule's own), so a stage after a second `ct()` (OVN's egress ACL after
/// its ingress ACL: two zones on one path) needs a second conntrack table
/// above the first pass's post-ct table, and so on: pass `d` has its
/// conntrack table at [`level_ct`]`(d)` and its later stages at
/// [`level_post`]`(d)`, and every established connection is in the
/// conntrack table of every pass in use (a lookup at any pass hits).
pub const MAX_PASSES: usize = 4;

/// The conntrack table's level of pass `d` (0 is the first).
pub const fn level_ct(d: usize) -> u32 {
    LEVEL_CT + 2 * d as u32
}

/// The level of the stages after pass `d`.
pub const fn level_post(d: usize) -> u32 {
    LEVEL_POST_CT + 2 * d as u32
}

/// The pass a chain table of `level` belongs to, and whether it is the
/// pass's conntrack table (else its post-ct table); `None` below the
/// chain (levels 1 and 2).
pub const fn pass_of(level: u32) -> Option<(usize, bool)> {
    if level < LEVEL_CT {
        return None;
    }
    let d = level - LEVEL_CT;
    Some(((d / 2) as usize, d % 2 == 0))
}

/// Restore-tag bit a CT entry sets: the packet passed the CT table.
pub const TAG_HIT: u32 = 1;
/// Restore-tag bit a translating CT entry sets.
pub const TAG_TRANSLATED: u32 = 2;
/// The tags of one chained stage-1 flow: `base .. base + TAG_BLOCK`.
pub const TAG_BLOCK: u32 = 4;

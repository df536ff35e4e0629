//! # conntrack: eswitch's connection tracker
//!
//! What `ct()` needs: a table of connections shared by every datapath
//! thread, each looked up by either direction's tuple in its zone, with
//! TCP window tracking ([`tcp`]), the generic UDP and ICMP state machines,
//! ICMP errors related to the connection they quote, marks and labels, NAT
//! with port allocation ([`nat`]), a global and per-zone limits, timeout
//! policies per zone ([`timeout`]), and the dumps, flushes and statistics
//! of `ovs-appctl dpctl/*-conntrack` ([`dump`]).
//!
//! Behaviour follows Open vSwitch's userspace tracker (`lib/conntrack*.c`),
//! which Open vSwitch's own tests and its users' flow tables assume: the
//! same `ct_state` bits for the same packets, the same timeouts, the same
//! dump text.
//!
//! ## Concurrency
//!
//! The table is split into [`Config::shards`] shards, each behind its own
//! lock; a connection lives in the shard its original tuple hashes to, and
//! the hash is symmetric, so both directions of an untranslated connection
//! find it in one shard with one probe. A translated connection's reply
//! tuple is indexed in the shard *it* hashes to, pointing home; a lookup
//! through it takes the two locks one after the other, never together.
//! Limits and statistics are atomics. Nothing allocates per packet once a
//! shard has grown; nothing blocks but a shard lock, held for one lookup
//! and update.
#![forbid(unsafe_code)]

pub mod dump;
mod hw;
pub mod nat;
pub mod packet;
mod table;
pub mod tcp;
pub mod timeout;
pub mod tuple;

pub use dump::{Entry, FlushFilter, ProtoCounts};
pub use hw::{HwView, Offer};
pub use nat::{AddrRange, NatKind, NatRange, NatSpec};
pub use packet::Unparsable;
pub use table::{Config, Limits, Stats, Tracker};
pub use timeout::{Class, PolicyError};
pub use tuple::{Addr, ConnKey, Tuple};

/// `ct_state` bits (Open vSwitch's `CS_*`).
pub mod state {
    pub const NEW: u8 = 0x01;
    pub const EST: u8 = 0x02;
    pub const REL: u8 = 0x04;
    pub const RPL: u8 = 0x08;
    pub const INV: u8 = 0x10;
    pub const TRK: u8 = 0x20;
    pub const SNAT: u8 = 0x40;
    pub const DNAT: u8 = 0x80;
}

/// One `ct()` as the datapath runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CtSpec {
    pub zone: u16,
    pub commit: bool,
    /// A connection found in its reply direction is ended and this packet
    /// starts a new one (`ct(force, commit)`).
    pub force: bool,
    /// Present when the action has `nat` (with or without a range).
    pub nat: Option<NatSpec>,
    /// `exec(set_field:V/M->ct_mark)`: value and mask.
    pub mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`.
    pub label: Option<(u128, u128)>,
}

/// What tracking wrote into the packet's metadata: the `ct_*` match
/// fields of the next stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtMeta {
    pub state: u8,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    /// The original direction's tuple (`ct_nw_src`, ..., `ct_tp_dst`);
    /// `proto` 0 when there is none.
    pub orig: Tuple,
}

impl CtMeta {
    /// `ct_clear`.
    pub fn clear(&mut self) {
        *self = CtMeta::default();
    }

    /// `ct_tp_src`/`ct_tp_dst` of the original tuple: ports, or for ICMP
    /// the type and code.
    pub fn orig_ports(&self) -> (u16, u16) {
        if self.orig.is_icmp() {
            let (t, c) = self.orig.icmp_type_code();
            (t as u16, c as u16)
        } else {
            (self.orig.sport, self.orig.dport)
        }
    }
}

/// A small seedable generator (NAT starts, hash seeds).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

//! The contract between the megaflow layer and hardware offload.
//!
//! megaflow never depends on the NIC: it defines [`FlowOffload`], which the
//! `offload` crate implements over Direct Rule, and the lifecycle every
//! megaflow goes through ([`FlowState`]), with its legal transitions in one
//! place ([`FlowState::can_go`]).

use std::fmt;

use thiserror::Error;

use crate::actions::Actions;
use crate::key::Match;
use crate::types::MeterId;

/// The offloader's name for a megaflow's hardware rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HwId(pub u64);

impl fmt::Display for HwId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hw{}", self.0)
    }
}

/// Cumulative hardware counters of one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct HwStats {
    pub packets: u64,
    pub bytes: u64,
}

/// Why a megaflow stays in software. `Display` is what `dump-flows` shows.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum NotOffloaded {
    /// A match field the device cannot match as the megaflow does.
    #[error("unsupported match field {field}: {reason}")]
    Match {
        field: &'static str,
        reason: &'static str,
    },
    /// An action the device cannot do (`action controller`).
    #[error("action {0}")]
    Action(String),
    /// The hardware table (or the rule budget) is full.
    #[error("table full")]
    TableFull,
    /// The backend refused: `backend error ENOSPC on rule_create`.
    #[error("backend error {errno} on {op}")]
    Backend {
        errno: &'static str,
        op: &'static str,
    },
    /// Taken out of hardware to make room for a hotter flow under the rule
    /// budget; offloaded again when it gets hot again.
    #[error("demoted: rule budget of {budget} reached, least recently hit")]
    Demoted { budget: usize },
    /// Offload is off by policy.
    #[error("offload disabled")]
    Disabled,
    /// The flow needs the device to tell software what it did to a packet
    /// it hands over (a sampled copy, a packet that continues after a
    /// stage), and the backend's slow path cannot read that (no restore
    /// tags on the packets it receives).
    #[error("no restore path")]
    NoRestorePath,
    /// Not yet: the device lacks something another flow brings (a later
    /// stage whose `ct()` stage is not in it); tried again at the next
    /// pass.
    #[error("waiting: {0}")]
    Waiting(&'static str),
}

impl NotOffloaded {
    /// Whether trying again later can succeed (a full table, a device
    /// error, a demotion) as opposed to a flow the device can never take.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            NotOffloaded::TableFull
                | NotOffloaded::Backend { .. }
                | NotOffloaded::Demoted { .. }
                | NotOffloaded::Waiting(_)
        )
    }
}

/// What a meter band enforces: the OpenFlow meter's single drop band.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MeterBand {
    /// Bytes per second, or packets per second when `packets` is set.
    pub rate: u64,
    /// Bucket depth in bytes (or packets).
    pub burst: u64,
    /// Counts packets instead of bytes.
    pub packets: bool,
}

impl MeterBand {
    /// A byte-rate band.
    pub fn bytes(rate: u64, burst: u64) -> Self {
        MeterBand {
            rate,
            burst,
            packets: false,
        }
    }
}

/// What the offload layer offers the megaflow layer. Calls come from the
/// one thread that owns offload decisions (the revalidator / offload
/// thread).
pub trait FlowOffload {
    /// Puts a megaflow into hardware.
    fn install(&mut self, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded>;
    /// Replaces a megaflow's rule without a gap: the new rule is in place
    /// before the old one goes. On error the old rule stays.
    fn replace(&mut self, old: HwId, m: &Match, actions: &Actions) -> Result<HwId, NotOffloaded>;
    /// Removes a rule (unknown ids are ignored). Its counts since the last
    /// [`poll`](Self::poll) are not lost: the next poll reports the rule's
    /// final cumulative counters one last time.
    fn remove(&mut self, id: HwId);
    /// The cumulative counters of every installed rule, and the final
    /// counters of every rule removed since the previous poll, appended to
    /// `out` (one bulk query per counter bulk).
    fn poll(&mut self, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded>;
    /// [`poll`](Self::poll) a part at a time, so a caller can let others
    /// in between: the counters from position `*next` on (0: the start),
    /// at least `max` of them unless none is left, appended to `out`;
    /// `*next` moves past them. Returns whether the poll is complete
    /// (`*next` is 0 again). A rule removed after its part was polled has
    /// its final counters reported by the next poll. The default polls
    /// everything at once.
    fn poll_some(
        &mut self,
        next: &mut usize,
        max: usize,
        out: &mut Vec<(HwId, HwStats)>,
    ) -> Result<bool, NotOffloaded> {
        let _ = max;
        *next = 0;
        self.poll(out).map(|()| true)
    }
    /// Defines (or, with `None`, deletes) OpenFlow meter `id` in hardware,
    /// so flows whose actions name it can be offloaded. Flows installed
    /// with the meter keep using it after a change of its band.
    fn set_meter(&mut self, id: MeterId, band: Option<MeterBand>) -> Result<(), NotOffloaded> {
        let _ = (id, band);
        Err(NotOffloaded::Action("meter".to_string()))
    }
    /// Puts one direction of an established connection into the device's
    /// conntrack table. Its counters are polled with the flows' (under
    /// the id returned).
    fn ct_install(&mut self, rule: &CtRule) -> Result<HwId, NotOffloaded> {
        let _ = rule;
        Err(NotOffloaded::Action(
            "ct: this device has no conntrack table".to_string(),
        ))
    }
    /// Removes a conntrack entry (unknown ids are ignored); its final
    /// counters come with the next poll, as a flow's.
    fn ct_remove(&mut self, id: HwId) {
        let _ = id;
    }
}

/// One direction of an established connection in the device's conntrack
/// table: packets that passed a `ct()` stage in `zone` (asking for NAT or
/// not) with `tuple` are rewritten to `rewrite`, given `meta`'s state and
/// mark, and go on to the next stage's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtRule {
    pub zone: u16,
    /// The `ct()` that leads here asked for NAT.
    pub nat: bool,
    pub tuple: conntrack::Tuple,
    pub rewrite: Option<conntrack::Tuple>,
    pub meta: conntrack::CtMeta,
}

/// Where a megaflow is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowState {
    /// Translated, not yet in the cache.
    New,
    /// In the software cache.
    Installed,
    /// Being put into hardware.
    Offloading,
    /// In hardware.
    Offloaded,
    /// Kept in software with a reason (may be retried).
    SoftwareOnly,
    /// Being removed from hardware and software.
    Evicting,
    /// Removed.
    Gone,
}

/// A transition [`FlowState::can_go`] does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("megaflow cannot go from {from:?} to {to:?}")]
pub struct IllegalTransition {
    pub from: FlowState,
    pub to: FlowState,
}

impl FlowState {
    /// The legal transitions, all of them.
    pub fn can_go(self, to: FlowState) -> bool {
        use FlowState::*;
        matches!(
            (self, to),
            (New, Installed | Gone)
                | (Installed, Offloading | SoftwareOnly | Evicting)
                | (Offloading, Offloaded | SoftwareOnly | Evicting)
                | (Offloaded, Offloading | SoftwareOnly | Evicting)
                | (SoftwareOnly, Offloading | Evicting)
                | (Evicting, Gone)
        )
    }

    /// Moves to `to` if legal.
    pub fn go(&mut self, to: FlowState) -> Result<(), IllegalTransition> {
        if self.can_go(to) {
            *self = to;
            Ok(())
        } else {
            Err(IllegalTransition { from: *self, to })
        }
    }

    /// The name `dump-flows` shows.
    pub fn name(self) -> &'static str {
        match self {
            FlowState::New => "new",
            FlowState::Installed => "installed",
            FlowState::Offloading => "offloading",
            FlowState::Offloaded => "offloaded",
            FlowState::SoftwareOnly => "software",
            FlowState::Evicting => "evicting",
            FlowState::Gone => "gone",
        }
    }
}

#[cfg(test)]
#[path = "tests/offload.rs"]
mod tests;

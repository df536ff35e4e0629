//! What the slow path keeps per megaflow: its record ([`FlowMeta`], walked
//! by every pass; [`FlowDef`], its match and actions, compact), the
//! hardware rules it knows of, and a megaflow as a dump shows it.

use std::fmt;
use std::sync::Arc;

use megaflow::key::FastBuild;
use megaflow::offload::{FlowState, HwId, HwStats, NotOffloaded};
use megaflow::{Actions, FlowId, FlowStats, Mask, Match, PackedKey, PortNo, Timestamp};
use std::collections::HashMap;

use crate::bridge::Generations;
use crate::table::RuleRef;
use crate::text::format_match;

use super::SEC;

/// What the slow path keeps per megaflow (compact: a pass walks these).
#[derive(Clone, Debug)]
pub(super) struct FlowMeta {
    pub(super) id: FlowId,
    /// The in_port the megaflow is exact on: its datapath ([`Datapaths`]).
    pub(super) home: Option<PortNo>,
    /// Cumulative counts: upcalled packets, datapath and hardware deltas.
    pub(super) stats: FlowStats,
    pub(super) state: FlowState,
    pub(super) hw: Option<HwId>,
    pub(super) reason: Option<NotOffloaded>,
    /// May be offloaded again (always, unless the device can never take it
    /// and its actions have not changed since).
    pub(super) eligible: bool,
    pub(super) created: Timestamp,
    pub(super) window_start: Timestamp,
    pub(super) window_packets: u32,
    pub(super) retry_at: Timestamp,
    /// Packets and bytes already credited to the OpenFlow rules.
    pub(super) credited: (u64, u64),
    pub(super) rules: Arc<[RuleRef]>,
    pub(super) generations: Generations,
    /// What else its translation read (the MAC table, the underlay).
    pub(super) uses: crate::bridge::Uses,
}

/// A megaflow's match and actions (apart from [`FlowMeta`]: a pass rarely
/// needs them), compact: the masked key without its zero words, the mask
/// shared with every megaflow of that shape ([`Masks`]).
#[derive(Clone, Debug)]
pub(super) struct FlowDef {
    pub(super) key: PackedKey,
    pub(super) mask: Arc<Mask>,
    pub(super) actions: Actions,
}

impl FlowDef {
    pub(super) fn matched(&self) -> Match {
        Match::new(&self.key.unpack(), &self.mask)
    }
}

/// The masks of the live megaflows, one copy of each (a few hundred
/// shapes for a million megaflows).
#[derive(Debug, Default)]
pub(super) struct Masks(pub(super) HashMap<Mask, Arc<Mask>, FastBuild>);

impl Masks {
    /// The shared copy of `m`.
    pub(super) fn get(&mut self, m: &Mask) -> Arc<Mask> {
        Arc::clone(self.0.entry(*m).or_insert_with(|| Arc::new(*m)))
    }

    /// A megaflow gave its copy back: forgets the mask with no other user.
    pub(super) fn put(&mut self, m: Arc<Mask>) {
        if Arc::strong_count(&m) == 2 {
            self.0.remove(&*m);
        }
    }
}

/// An evicted megaflow whose datapaths have not all answered its removal:
/// their last counts still go to its OpenFlow rules.
#[derive(Clone, Debug)]
pub(super) struct Retired {
    pub(super) rules: Arc<[RuleRef]>,
    /// Removal answers still to come.
    pub(super) pending: u32,
}

/// A hardware rule the pipeline knows about.
#[derive(Clone, Debug)]
pub(super) struct HwEntry {
    pub(super) idx: u32,
    pub(super) id: FlowId,
    /// The cumulative counters already folded.
    pub(super) seen: HwStats,
    pub(super) rules: Arc<[RuleRef]>,
    /// Removed: the report of a query made after its removal
    /// ([`Pipeline::retired_at`]) is its last.
    pub(super) retired: bool,
}

/// One megaflow as a dump shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowDump {
    pub matched: Match,
    pub actions: Actions,
    pub stats: FlowStats,
    pub state: FlowState,
    pub hw: Option<HwId>,
    /// Why it is not in hardware (for a software-only flow).
    pub reason: Option<NotOffloaded>,
    pub created: Timestamp,
}

impl FlowDump {
    /// `yes`, or why not.
    pub fn offloaded(&self) -> String {
        match (self.state, &self.reason) {
            (FlowState::Offloaded, _) => "yes".to_string(),
            (_, Some(r)) => format!("no ({r})"),
            (FlowState::Installed, None) => "no (not hot)".to_string(),
            (s, None) => format!("no ({})", s.name()),
        }
    }

    /// The line `dump-flows` prints, at time `now`.
    pub fn line(&self, now: Timestamp) -> String {
        let used = if self.stats.used == Timestamp::NEVER {
            "never".to_string()
        } else {
            format!("{:.3}s", now.since(self.stats.used) as f64 / SEC as f64)
        };
        let m = format_match(&self.matched);
        format!(
            "{}, packets:{}, bytes:{}, used:{used}, offloaded:{}, actions:{}",
            if m.is_empty() { "any" } else { &m },
            self.stats.packets,
            self.stats.bytes,
            self.offloaded(),
            if self.actions.is_empty() {
                "drop".to_string()
            } else {
                self.actions.to_string()
            }
        )
    }
}

impl fmt::Display for FlowDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line(self.stats.used))
    }
}

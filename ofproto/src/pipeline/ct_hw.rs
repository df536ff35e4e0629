//! Established connections in the device's conntrack table.
//!
//! A connection direction goes there when the datapath saw one of its
//! packets come back from an offloaded `ct()` stage established (the CT
//! table missed it: `conntrack::Tracker::offer`); the offload thread
//! installs it ([`Pipeline::ct_offload`]) and the tracker checks its TCP
//! liberally from then on. Its hardware counters keep the connection
//! alive in the tracker ([`Pipeline::ct_fold`]); each pass takes out
//! those the tracker no longer lets hardware have, or whose state (mark,
//! NAT) changed ([`Pipeline::ct_revalidate`]): closed by FIN or RST
//! (which, like SYN, always miss the table), expired, flushed.

use std::collections::{HashMap, VecDeque};

use conntrack::{Offer, Tuple};
use megaflow::offload::{CtRule, FlowOffload, HwId, HwStats};
use megaflow::Timestamp;

use super::{Datapaths, Pipeline};

/// Entries a pass looks at, at least.
pub const CT_CHECK_MIN: usize = 8192;

/// A direction: zone, original tuple, reply, asked for NAT.
type Key = (u16, Tuple, bool, bool);

/// The connection directions in hardware.
#[derive(Default)]
pub(super) struct CtHw {
    /// Each entry: its id, what it does, and the packets its counter
    /// showed at the last poll.
    by_key: HashMap<Key, (HwId, CtRule, u64)>,
    by_id: HashMap<HwId, Key>,
    /// The entries in the order a pass looks at them (oldest look first).
    ring: VecDeque<Key>,
    offers: Vec<Offer>,
    pub(super) stats: CtHwStats,
}

/// A connection's directions in the device's conntrack table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtHwConn {
    /// The original and the reply direction.
    pub dirs: [bool; 2],
    /// Packets their entries counted.
    pub packets: u64,
}

/// Counters of the conntrack table's entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtHwStats {
    /// Entries in the device now.
    pub entries: u64,
    /// Installed since start.
    pub installed: u64,
    /// Offers the device refused (the direction stays in software).
    pub refused: u64,
    /// Removed: closed, expired, flushed or changed.
    pub removed: u64,
    /// Packets the entries counted.
    pub packets: u64,
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// Installs the connection directions the datapaths offered that the
    /// tracker still lets hardware have.
    pub(super) fn ct_offload(&mut self, now: Timestamp) {
        // Every offload tick asks (in replay, every software packet): a
        // read of the tracker's flag, no clone, no queue lock, when none
        // waits.
        let waiting = self
            .shared
            .tracker
            .read()
            .as_ref()
            .is_some_and(|t| t.has_offers());
        if !waiting {
            return;
        }
        let Some(t) = self.shared.tracker() else {
            return;
        };
        let ms = now.as_millis();
        let mut offers = std::mem::take(&mut self.ct_hw.offers);
        t.take_offers(&mut offers);
        for o in offers.drain(..) {
            let key = (o.zone, o.orig, o.reply, o.nat);
            if self.ct_hw.by_key.contains_key(&key) {
                continue;
            }
            let Some(v) = t.hw_view(o.zone, &o.orig, o.reply, o.nat, ms) else {
                t.hw_forget(o.zone, &o.orig, o.reply, ms);
                continue;
            };
            let rule = CtRule {
                zone: o.zone,
                nat: o.nat,
                tuple: v.tuple,
                rewrite: v.rewrite,
                meta: v.meta,
            };
            match self.offload.ct_install(&rule) {
                Ok(id) => {
                    t.hw_taken(o.zone, &o.orig, ms);
                    self.ct_hw.by_key.insert(key, (id, rule, 0));
                    self.ct_hw.ring.push_back(key);
                    self.ct_hw.by_id.insert(id, key);
                    self.ct_hw.stats.installed += 1;
                }
                // Not offered again: it stays in software.
                Err(_) => self.ct_hw.stats.refused += 1,
            }
        }
        self.ct_hw.offers = offers;
        self.ct_hw.stats.entries = self.ct_hw.by_key.len() as u64;
    }

    /// Removes the entries whose connection hardware may no longer have,
    /// or whose state changed since they went in: an eighth of them a
    /// pass, at least [`CT_CHECK_MIN`] (so every entry is looked at within
    /// eight passes, and a pass stays short at a million entries).
    pub(super) fn ct_revalidate(&mut self, now: Timestamp) {
        let Some(t) = self.shared.tracker() else {
            return;
        };
        let ms = now.as_millis();
        let n = self.ct_hw.ring.len();
        let budget = n.min((n / 8).max(CT_CHECK_MIN));
        let mut gone = Vec::new();
        for _ in 0..budget {
            let Some(key) = self.ct_hw.ring.pop_front() else {
                break;
            };
            let Some((_, rule, _)) = self.ct_hw.by_key.get(&key) else {
                continue;
            };
            let (zone, orig, reply, nat) = key;
            let same = t.hw_view(zone, &orig, reply, nat, ms).is_some_and(|v| {
                v.tuple == rule.tuple && v.rewrite == rule.rewrite && v.meta == rule.meta
            });
            if same {
                self.ct_hw.ring.push_back(key);
            } else {
                gone.push(key);
            }
        }
        for key in gone {
            if let Some((id, ..)) = self.ct_hw.by_key.remove(&key) {
                self.ct_hw.by_id.remove(&id);
                self.offload.ct_remove(id);
                self.ct_hw.stats.removed += 1;
                let (zone, orig, reply, _) = key;
                t.hw_forget(zone, &orig, reply, ms);
            }
        }
        self.ct_hw.stats.entries = self.ct_hw.by_key.len() as u64;
    }

    /// A polled counter of a conntrack entry (false: not one): new
    /// packets keep its connection alive.
    pub(super) fn ct_fold(&mut self, hw: HwId, cum: HwStats, now: Timestamp) -> bool {
        let Some(key) = self.ct_hw.by_id.get(&hw) else {
            return false;
        };
        let (zone, orig, ..) = *key;
        let Some((_, _, seen)) = self.ct_hw.by_key.get_mut(key) else {
            return true;
        };
        let delta = cum.packets.saturating_sub(*seen);
        *seen = cum.packets;
        if delta > 0 {
            self.ct_hw.stats.packets += delta;
            if let Some(t) = self.shared.tracker() {
                t.hw_used(zone, &orig, now.as_millis());
            }
        }
        true
    }

    /// The connections with a direction in the device's conntrack table,
    /// by zone and original tuple: which directions, and the packets their
    /// entries counted (as of the last poll).
    pub fn ct_hw_conns(&self) -> HashMap<(u16, Tuple), CtHwConn> {
        let mut out: HashMap<(u16, Tuple), CtHwConn> = HashMap::new();
        for (&(zone, orig, reply, _), &(_, _, packets)) in &self.ct_hw.by_key {
            let c = out.entry((zone, orig)).or_default();
            c.dirs[usize::from(reply)] = true;
            c.packets += packets;
        }
        out
    }

    /// The conntrack table's counters.
    pub fn ct_hw_stats(&self) -> CtHwStats {
        self.ct_hw.stats
    }
}

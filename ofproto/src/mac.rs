//! The MAC learning table behind the NORMAL action.
//!
//! Maps (VLAN, MAC) to the port the MAC was last seen on. Entries age out
//! `aging` after they were last learned or refreshed (300 s by default, as
//! in Open vSwitch); the table holds at most `capacity` entries and, when
//! full, forgets the entry learned longest ago (a FIFO of learn times, with
//! stale FIFO slots skipped lazily, so every operation is O(1) amortized and
//! a flood of new source MACs cannot make learning slow).
//!
//! Every change that can alter a forwarding decision (new entry, a MAC moving
//! to another port, an entry aging out or being evicted) bumps the
//! generation; megaflows translated through NORMAL record it and are
//! re-translated when it moves. Refreshing an entry on the same port does
//! not bump it.

use std::collections::{HashMap, VecDeque};

use megaflow::{PortNo, Timestamp};

/// One learned location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    pub port: PortNo,
    /// Last learned or refreshed.
    pub seen: Timestamp,
}

/// A fact NORMAL learned from a packet: `mac` in `vlan` is behind `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacLearn {
    /// The bridge whose MAC table learns it.
    pub bridge: crate::BridgeNo,
    pub vlan: u16,
    pub mac: u64,
    pub port: PortNo,
}

/// The learning table.
#[derive(Debug)]
pub struct MacTable {
    map: HashMap<(u16, u64), MacEntry>,
    /// Learn order: (key, seen) — a slot is stale when the entry's `seen`
    /// differs.
    order: VecDeque<((u16, u64), Timestamp)>,
    capacity: usize,
    aging_ns: u64,
    generation: u64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(Self::DEFAULT_CAPACITY, Self::DEFAULT_AGING_SECS)
    }
}

impl MacTable {
    /// Default capacity (entries).
    pub const DEFAULT_CAPACITY: usize = 65_536;
    /// Default aging time (seconds).
    pub const DEFAULT_AGING_SECS: u64 = 300;

    pub fn new(capacity: usize, aging_secs: u64) -> Self {
        MacTable {
            map: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            aging_ns: aging_secs.saturating_mul(1_000_000_000),
            generation: 0,
        }
    }

    /// Bumped by every change that can alter a forwarding decision.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Where `mac` in `vlan` is, unless unknown or aged out at `now`.
    pub fn lookup(&self, vlan: u16, mac: u64, now: Timestamp) -> Option<PortNo> {
        self.map
            .get(&(vlan, mac))
            .filter(|e| now.since(e.seen) < self.aging_ns)
            .map(|e| e.port)
    }

    /// Learns (or refreshes) a location. Returns true when forwarding may
    /// change (a new entry or a move).
    pub fn learn(&mut self, l: MacLearn, now: Timestamp) -> bool {
        let key = (l.vlan, l.mac);
        let changed = match self.map.get_mut(&key) {
            Some(e) if e.port == l.port && now.since(e.seen) < self.aging_ns => {
                e.seen = now;
                false
            }
            Some(e) => {
                *e = MacEntry {
                    port: l.port,
                    seen: now,
                };
                true
            }
            None => {
                while self.map.len() >= self.capacity {
                    if !self.evict_oldest() {
                        break;
                    }
                }
                self.map.insert(
                    key,
                    MacEntry {
                        port: l.port,
                        seen: now,
                    },
                );
                true
            }
        };
        self.order.push_back((key, now));
        self.compact();
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// Removes entries not refreshed within the aging time; returns how many.
    pub fn expire(&mut self, now: Timestamp) -> usize {
        let mut n = 0;
        while let Some(&(key, seen)) = self.order.front() {
            if now.since(seen) < self.aging_ns {
                break;
            }
            self.order.pop_front();
            if self.map.get(&key).is_some_and(|e| e.seen == seen) {
                self.map.remove(&key);
                n += 1;
            }
        }
        if n > 0 {
            self.generation += 1;
        }
        n
    }

    /// Moves the generation past `other` (a table that replaces another
    /// must not look unchanged to those that read the old one).
    pub(crate) fn bump_generation_past(&mut self, other: u64) {
        self.generation = self.generation.max(other) + 1;
    }

    /// Forgets every MAC behind `port` (the port went away).
    pub fn flush_port(&mut self, port: PortNo) {
        let before = self.map.len();
        self.map.retain(|_, e| e.port != port);
        if self.map.len() != before {
            self.generation += 1;
        }
    }

    /// Every live entry.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64, MacEntry)> + '_ {
        self.map.iter().map(|(&(v, m), &e)| (v, m, e))
    }

    fn evict_oldest(&mut self) -> bool {
        while let Some((key, seen)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.seen == seen) {
                self.map.remove(&key);
                self.generation += 1;
                return true;
            }
        }
        false
    }

    /// Drops stale FIFO slots when they outnumber live entries, so refreshes
    /// cannot grow the FIFO without bound.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(k, seen)| map.get(k).is_some_and(|e| e.seen == *seen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(mac: u64, port: u32) -> MacLearn {
        MacLearn {
            bridge: crate::BridgeNo::MAIN,
            vlan: 0,
            mac,
            port: PortNo(port),
        }
    }

    #[test]
    fn learns_moves_ages_and_evicts() {
        let mut t = MacTable::new(2, 300);
        let t0 = Timestamp::from_millis(1000);
        assert!(t.learn(l(1, 1), t0));
        let g = t.generation();
        assert!(!t.learn(l(1, 1), t0), "refresh is not a change");
        assert_eq!(t.generation(), g);
        assert!(t.learn(l(1, 2), t0), "a move is a change");
        assert_eq!(t.lookup(0, 1, t0), Some(PortNo(2)));
        assert_eq!(t.lookup(7, 1, t0), None, "VLANs are separate");
        t.learn(l(2, 3), t0);
        t.learn(l(3, 3), Timestamp::from_millis(2000));
        assert_eq!(t.len(), 2, "capacity holds");
        assert_eq!(t.lookup(0, 1, t0), None, "oldest evicted");
        let late = Timestamp::from_millis(1000 + 300_000);
        assert_eq!(t.lookup(0, 2, late), None, "aged out on lookup");
        assert_eq!(t.expire(late), 1);
        assert_eq!(t.lookup(0, 3, late), Some(PortNo(3)));
    }

    #[test]
    fn refreshes_do_not_grow_the_fifo() {
        let mut t = MacTable::new(10, 300);
        for i in 0..10_000u64 {
            t.learn(l(i % 4, 1), Timestamp(i));
        }
        assert!(t.order.len() <= 2 * t.len() + 65);
    }
}

//! Fair shares of the flow table between ports.
//!
//! Open vSwitch has one flow limit for the whole datapath: a VM that sends
//! new 5-tuples fast enough fills it, and until those megaflows age out no
//! other VM's new flow is cached (or offloaded). eswitch gives every port
//! (every megaflow is exact on its in_port: its *home*) two guarantees:
//!
//! 1. **A quota.** No port holds more than `port_flow_limit` megaflows
//!    (by default an eighth of the flow limit: 25,000 of 200,000). A
//!    flooder's extra flows still forward, through the slow path, but are
//!    not cached, so what it costs in memory is bounded by its quota
//!    whatever it sends. A megaflow costs eswitchd about 1.5 KB (its
//!    packed match and upcall key, its actions and state in the slow path;
//!    its entry in the datapath's cache; its rule in the offload manager and
//!    the sim), so a flooder at its default quota costs about 37 MB.
//! 2. **Max-min sharing when full.** When the whole table is full, a port
//!    holding less than its fair share (the limit over the ports holding
//!    flows) takes the room of the stalest of a few sampled flows of the
//!    port holding the most. Idle flood flows go first; a well-behaved
//!    port always gets its share.
//!
//! Why not a fair eviction alone: it protects the others' new flows but
//! lets one port take all the memory the table may use. Why not quotas
//! alone: with many ports at their quota, a new port could still find
//! the table full.

use std::collections::HashMap;

use megaflow::{PortNo, SplitMix64};

/// Where flows that are not exact on an in_port are counted.
pub(super) const NO_HOME: PortNo = PortNo(u32::MAX);

/// Flows sampled to find the stalest of a port.
pub(super) const SAMPLE: usize = 8;

/// The flow slots of each home port, for counts and sampling.
#[derive(Debug, Default)]
pub(super) struct PortShares {
    lists: HashMap<PortNo, Vec<u32>>,
    /// Per flow slot: its index in its port's list.
    pos: Vec<u32>,
}

impl PortShares {
    pub(super) fn add(&mut self, port: PortNo, idx: u32) {
        let list = self.lists.entry(port).or_default();
        if self.pos.len() <= idx as usize {
            self.pos.resize(idx as usize + 1, 0);
        }
        self.pos[idx as usize] = list.len() as u32;
        list.push(idx);
    }

    pub(super) fn remove(&mut self, port: PortNo, idx: u32) {
        let Some(list) = self.lists.get_mut(&port) else {
            return;
        };
        let Some(&at) = self.pos.get(idx as usize) else {
            return;
        };
        if list.get(at as usize) != Some(&idx) {
            return;
        }
        list.swap_remove(at as usize);
        if let Some(&moved) = list.get(at as usize) {
            self.pos[moved as usize] = at;
        }
        if list.is_empty() {
            self.lists.remove(&port);
        }
    }

    /// Megaflows whose home is `port`.
    pub(super) fn count(&self, port: PortNo) -> usize {
        self.lists.get(&port).map_or(0, Vec::len)
    }

    /// Ports holding at least one megaflow.
    pub(super) fn ports(&self) -> usize {
        self.lists.len()
    }

    /// The port holding the most megaflows, and how many.
    pub(super) fn largest(&self) -> Option<(PortNo, usize)> {
        self.lists
            .iter()
            .map(|(p, l)| (*p, l.len()))
            .max_by_key(|&(p, n)| (n, std::cmp::Reverse(p)))
    }

    /// Up to [`SAMPLE`] of `port`'s flow slots, picked at random.
    pub(super) fn sample(&self, port: PortNo, rng: &mut SplitMix64) -> Vec<u32> {
        let Some(list) = self.lists.get(&port) else {
            return Vec::new();
        };
        if list.len() <= SAMPLE {
            return list.clone();
        }
        (0..SAMPLE)
            .map(|_| list[rng.below(list.len() as u64) as usize])
            .collect()
    }

    /// Every port and its count (for dumps and metrics).
    pub(super) fn counts(&self) -> impl Iterator<Item = (PortNo, usize)> + '_ {
        self.lists.iter().map(|(p, l)| (*p, l.len()))
    }
}

/// What the table may give a new megaflow of one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Room {
    /// There is room.
    Free,
    /// The table is full; the port is under its fair share: take the room
    /// of a flow of this (the largest) port.
    TakeFrom(PortNo),
    /// The port is at its quota.
    PortLimit,
    /// The table is full and the port has its fair share already.
    FlowLimit,
}

/// Decides [`Room`] for a new flow of `home`, given the table's limit, its
/// live count and the per-port quota (0: none).
pub(super) fn room(
    shares: &PortShares,
    home: PortNo,
    live: usize,
    limit: usize,
    port_limit: usize,
) -> Room {
    let mine = shares.count(home);
    if port_limit > 0 && mine >= port_limit {
        return Room::PortLimit;
    }
    if live < limit {
        return Room::Free;
    }
    let holders = shares.ports() + usize::from(mine == 0);
    let fair = limit / holders.max(1);
    match shares.largest() {
        Some((big, n)) if mine < fair && big != home && n > fair => Room::TakeFrom(big),
        _ => Room::FlowLimit,
    }
}

#[cfg(test)]
#[path = "tests_fair.rs"]
mod tests;

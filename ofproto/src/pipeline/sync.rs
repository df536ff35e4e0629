//! The sync point: which version of the OpenFlow tables every megaflow has
//! been brought up to (what an OpenFlow BARRIER waits for), whether a pass
//! is wanted before its time, and when the next one is due (replay's
//! clock; the daemon's revalidator keeps its own).

use megaflow::Timestamp;

pub(super) struct SyncPoint {
    /// The tables' generation the last completed pass began with.
    synced_tables: u64,
    /// A pass was asked for before its time (a BARRIER is waiting).
    wanted: bool,
    next_pass: Timestamp,
}

impl Default for SyncPoint {
    fn default() -> Self {
        SyncPoint {
            synced_tables: 0,
            wanted: false,
            next_pass: Timestamp::NEVER,
        }
    }
}

impl SyncPoint {
    pub(super) fn synced_tables(&self) -> u64 {
        self.synced_tables
    }

    pub(super) fn want(&mut self) {
        self.wanted = true;
    }

    pub(super) fn wanted(&self) -> bool {
        self.wanted
    }

    /// A pass began: what was wanted is under way.
    pub(super) fn begun(&mut self) {
        self.wanted = false;
    }

    /// A pass that began with tables generation `tables` completed.
    pub(super) fn reached(&mut self, tables: u64) {
        self.synced_tables = tables;
    }

    /// Whether a pass is due at `now`, passes every `interval_ns` (the
    /// first call schedules the first one interval later); when it is,
    /// the next is scheduled.
    pub(super) fn due(&mut self, now: Timestamp, interval_ns: u64) -> bool {
        let next = Timestamp(now.0.saturating_add(interval_ns));
        if self.next_pass == Timestamp::NEVER {
            self.next_pass = next;
            return false;
        }
        if now < self.next_pass {
            return false;
        }
        self.next_pass = next;
        true
    }
}

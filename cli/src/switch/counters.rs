//! What the switch counts: per path, per port, per thread; and the board
//! live datapath threads publish their counts to.

use std::collections::BTreeMap;
use std::sync::Mutex;

use megaflow::PortNo;

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    pub(crate) fn add(&mut self, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }

    fn merge(&mut self, o: &Count) {
        self.packets += o.packets;
        self.bytes += o.bytes;
    }
}

/// Per-port counters, split by path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx: Count,
    /// Received packets the software path handled (the rest the eSwitch
    /// did).
    pub rx_sw: u64,
    pub tx_hw: Count,
    pub tx_sw: Count,
    /// Live mode: misses of this port queued to the upcall handler, and
    /// dropped (over its upcall rate or its share of the queue).
    pub upcalls: u64,
    pub upcall_drops: u64,
}

/// Counters of the whole switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Packets received (all ports).
    pub rx: Count,
    /// Received packets the eSwitch handled (forwarded or dropped by a rule).
    pub hw_handled: u64,
    /// Received packets that reached software (FDB misses).
    pub sw_handled: u64,
    /// Dropped by hardware rules (drop actions, red meter colour).
    pub hw_drops: u64,
    /// Dropped in software (drop actions, meters, no output).
    pub sw_drops: u64,
    /// Sampled copies from hardware samplers / software sample actions.
    pub hw_samples: u64,
    pub sw_samples: u64,
    /// Packets the device handed over with a restore tag that stands for
    /// nothing software can resume (a flow gone while they were queued):
    /// dropped, as a rewritten packet cannot start over.
    pub restore_drops: u64,
    /// Packets the device handed over part way through an offloaded
    /// `ct()` stage (a conntrack or post-ct table miss), resumed there.
    pub ct_restored: u64,
    /// Packets for the controller (software only).
    pub to_controller: u64,
    /// Per OpenFlow port.
    pub ports: BTreeMap<PortNo, PortCounters>,
    /// Live mode: misses handed to the upcall handler thread, and misses
    /// dropped because their port was over its upcall rate or the queue
    /// to the handler was full (the RX thread never waits).
    pub upcalls_queued: u64,
    pub upcall_drops_rate: u64,
    pub upcall_drops_full: u64,
    /// Frames decapsulated at receive (entered on a tunnel port).
    pub tunnel_rx: u64,
    /// Tunnel frames for a local endpoint dropped at receive: an outer
    /// fragment, a malformed header, no port for their sender and VNI.
    pub tunnel_drop_fragment: u64,
    pub tunnel_drop_malformed: u64,
    pub tunnel_drop_unknown_vni: u64,
    /// Geneve frames whose options cannot enter a key (a mapped option of
    /// another length, an unknown critical one), as Open vSwitch drops.
    pub tunnel_drop_bad_option: u64,
    /// Tunnel outputs not sent: over the uplink's MTU once encapsulated.
    pub tunnel_too_big: u64,
}

impl SwitchCounters {
    /// Adds another thread's counters.
    pub fn add(&mut self, o: &SwitchCounters) {
        self.rx.merge(&o.rx);
        self.hw_handled += o.hw_handled;
        self.sw_handled += o.sw_handled;
        self.hw_drops += o.hw_drops;
        self.sw_drops += o.sw_drops;
        self.hw_samples += o.hw_samples;
        self.sw_samples += o.sw_samples;
        self.restore_drops += o.restore_drops;
        self.ct_restored += o.ct_restored;
        self.to_controller += o.to_controller;
        for (p, c) in &o.ports {
            let mine = self.ports.entry(*p).or_default();
            mine.rx.merge(&c.rx);
            mine.rx_sw += c.rx_sw;
            mine.tx_hw.merge(&c.tx_hw);
            mine.tx_sw.merge(&c.tx_sw);
            mine.upcalls += c.upcalls;
            mine.upcall_drops += c.upcall_drops;
        }
        self.upcalls_queued += o.upcalls_queued;
        self.upcall_drops_rate += o.upcall_drops_rate;
        self.upcall_drops_full += o.upcall_drops_full;
        self.tunnel_rx += o.tunnel_rx;
        self.tunnel_drop_fragment += o.tunnel_drop_fragment;
        self.tunnel_drop_malformed += o.tunnel_drop_malformed;
        self.tunnel_drop_unknown_vni += o.tunnel_drop_unknown_vni;
        self.tunnel_drop_bad_option += o.tunnel_drop_bad_option;
        self.tunnel_too_big += o.tunnel_too_big;
    }

    pub(crate) fn count_tunnel_drop(&mut self, why: super::tunnel::TunnelDrop) {
        use super::tunnel::TunnelDrop as D;
        match why {
            D::Fragment => self.tunnel_drop_fragment += 1,
            D::Malformed => self.tunnel_drop_malformed += 1,
            D::NoPort => self.tunnel_drop_unknown_vni += 1,
            D::BadOption => self.tunnel_drop_bad_option += 1,
        }
    }

    /// A received frame, on `port`.
    pub(crate) fn received(&mut self, port: PortNo, len: usize) {
        self.rx.add(len);
        self.ports.entry(port).or_default().rx.add(len);
    }
}

/// The live datapath threads' counters and port drops, as they publish
/// them (a few times a second, never per packet), for `show` and `stats`.
#[derive(Debug, Default)]
pub struct CounterBoard {
    inner: Mutex<Board>,
}

#[derive(Debug, Default)]
struct Board {
    threads: BTreeMap<usize, SwitchCounters>,
    drops: BTreeMap<PortNo, (u64, u64)>,
}

impl CounterBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Board> {
        // A publisher that panicked left whole snapshots behind.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Thread `thread`'s counters now (replacing its last snapshot).
    pub fn publish(&self, thread: usize, counters: &SwitchCounters) {
        self.lock().threads.insert(thread, counters.clone());
    }

    /// A port's receive and send drops (its own counters).
    pub fn port_drops(&self, port: PortNo, rx_dropped: u64, tx_dropped: u64) {
        self.lock().drops.insert(port, (rx_dropped, tx_dropped));
    }

    /// Every thread's counters added up.
    pub fn total(&self) -> SwitchCounters {
        let mut t = SwitchCounters::default();
        for c in self.lock().threads.values() {
            t.add(c);
        }
        t
    }

    pub(crate) fn drops(&self, port: PortNo) -> Option<(u64, u64)> {
        self.lock().drops.get(&port).copied()
    }
}

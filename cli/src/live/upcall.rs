//! Admission of cache misses to the upcall handler: a token bucket and a
//! queue per port, served in turn. The RX thread never waits: a miss over
//! its port's rate, or over its port's share of the queue, is dropped and
//! counted (the next packet of the flow gets another chance).
//!
//! Fairness is for contention: a port alone with misses waiting may fill
//! the queue but for a headroom of `capacity / 16` (a burst of new flows
//! from one VM is not cut at half the queue); while `active` ports (this
//! one included) have misses waiting, each may hold at most
//! `capacity / (active + 1)`, so a flooding port leaves room for a
//! newcomer (which enters through the headroom), and the handler takes
//! one miss from each port in turn. A VM that floods new
//! flows gets its share of the handler, and the others theirs, whatever
//! it sends (Open vSwitch's single queue per handler lets the flooder
//! crowd the others out).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use megaflow::{PortNo, Timestamp};

/// A token bucket: `rate` tokens per second, at most `burst` saved up.
/// A rate of zero admits everything.
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    /// Tokens, in units of 1/1e9 token (so refills need no division).
    nano_tokens: u128,
    last: Timestamp,
}

const NANO: u128 = 1_000_000_000;

impl TokenBucket {
    /// A full bucket as of `now`.
    pub fn new(rate: u64, burst: u64, now: Timestamp) -> TokenBucket {
        let burst = burst.max(1);
        TokenBucket {
            rate,
            burst,
            nano_tokens: u128::from(burst) * NANO,
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub fn admit(&mut self, now: Timestamp) -> bool {
        if self.rate == 0 {
            return true;
        }
        let elapsed = u128::from(now.since(self.last));
        self.last = Timestamp(self.last.0.max(now.0));
        let cap = u128::from(self.burst) * NANO;
        self.nano_tokens = (self.nano_tokens + elapsed * u128::from(self.rate)).min(cap);
        if self.nano_tokens >= NANO {
            self.nano_tokens -= NANO;
            true
        } else {
            false
        }
    }
}

/// One missed packet on its way to the handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upcall {
    pub port: PortNo,
    pub frame: Vec<u8>,
    /// What the tunnel said, for a packet decapsulated on `port`.
    pub tunnel: megaflow::TunnelKey,
    /// A miss at a later stage (after `recirc`): the datapath's key, with
    /// its recirc_id and tracking state, which the frame alone does not
    /// say.
    pub stage: Option<Box<megaflow::FlowKey>>,
}

impl Upcall {
    /// The miss as the slow path translates it.
    pub fn miss(&self) -> ofproto::Miss {
        let mut miss = ofproto::Miss::parse_tunneled(self.port, &self.tunnel, &self.frame);
        if let Some(k) = &self.stage {
            miss.key = **k;
        }
        miss
    }
}

/// What happened to an offered miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Queued,
    /// The port is over its upcall rate.
    RateLimited,
    /// The port's share of the queue (or the whole queue) is full.
    QueueFull,
    /// The handler is gone (shutting down).
    Closed,
}

/// One port's bucket and waiting misses.
#[derive(Debug)]
struct PortQueue {
    bucket: TokenBucket,
    waiting: VecDeque<Upcall>,
}

#[derive(Debug)]
struct Queues {
    ports: BTreeMap<PortNo, PortQueue>,
    /// Misses waiting, all ports.
    total: usize,
    /// Ports with misses waiting.
    active: usize,
    /// The port the handler served last (the next turn starts after it).
    last: Option<PortNo>,
    /// Handlers asleep on `ready`, and of them, those woken and not yet
    /// running: a miss wakes one more handler while some sleep that no
    /// one has woken (with one flag for all, a second handler slept
    /// through a burst until its timeout).
    sleeping: usize,
    woken: usize,
    /// Gates alive.
    gates: usize,
    /// The handler's end is gone.
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    queues: Mutex<Queues>,
    ready: Condvar,
    capacity: usize,
    rate: u64,
    burst: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // Every update is complete before it can panic: the state is whole.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A datapath thread's end: offers misses.
#[derive(Debug)]
pub struct UpcallGate {
    shared: Arc<Shared>,
}

/// The handler's end: takes misses in turn.
#[derive(Debug)]
pub struct UpcallReceiver {
    shared: Arc<Shared>,
}

/// The handler's end is gone, or every gate is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disconnected;

/// Most misses one port may have waiting while `active` ports (itself
/// included) have some: all but a headroom when alone, else an equal part
/// that leaves room for one more port.
fn share(capacity: usize, active: usize) -> usize {
    if active <= 1 {
        capacity - capacity / 16
    } else {
        capacity / (active + 1)
    }
}

/// A gate and the handler's end, for `capacity` misses waiting in all and
/// `rate` upcalls per second per port (`burst` above it; a rate of zero:
/// no limit).
pub fn channel(capacity: usize, rate: u64, burst: u64) -> (UpcallGate, UpcallReceiver) {
    let shared = Arc::new(Shared {
        queues: Mutex::new(Queues {
            ports: BTreeMap::new(),
            total: 0,
            active: 0,
            last: None,
            sleeping: 0,
            woken: 0,
            gates: 1,
            closed: false,
        }),
        ready: Condvar::new(),
        capacity: capacity.max(1),
        rate,
        burst,
    });
    (
        UpcallGate {
            shared: Arc::clone(&shared),
        },
        UpcallReceiver { shared },
    )
}

impl UpcallGate {
    /// Offers a miss; never waits (but for the queue's lock, held for a
    /// push or a pop at a time).
    pub fn offer(&mut self, now: Timestamp, port: PortNo, frame: &[u8]) -> Admission {
        self.offer_tunneled(now, port, &megaflow::TunnelKey::NONE, frame, None)
    }

    /// [`offer`](Self::offer) of a packet decapsulated on tunnel port
    /// `port` with `tunnel`.
    pub fn offer_tunneled(
        &mut self,
        now: Timestamp,
        port: PortNo,
        tunnel: &megaflow::TunnelKey,
        frame: &[u8],
        stage: Option<&megaflow::FlowKey>,
    ) -> Admission {
        let sh = &*self.shared;
        let mut q = sh.lock();
        if q.closed {
            return Admission::Closed;
        }
        let (rate, burst) = (sh.rate, sh.burst);
        let total = q.total;
        let active = q.active;
        let pq = q.ports.entry(port).or_insert_with(|| PortQueue {
            bucket: TokenBucket::new(rate, burst, now),
            waiting: VecDeque::new(),
        });
        if !pq.bucket.admit(now) {
            return Admission::RateLimited;
        }
        let newly = pq.waiting.is_empty();
        let share = share(sh.capacity, active + usize::from(newly));
        if total >= sh.capacity || pq.waiting.len() >= share.max(1) {
            return Admission::QueueFull;
        }
        pq.waiting.push_back(Upcall {
            port,
            frame: frame.to_vec(),
            tunnel: *tunnel,
            stage: stage.map(|k| Box::new(*k)),
        });
        q.total += 1;
        q.active += usize::from(newly);
        if q.sleeping > q.woken {
            q.woken += 1;
            sh.ready.notify_one();
        }
        Admission::Queued
    }

    /// A gate for another datapath thread (the same queues: each port has
    /// one bucket wherever it is received).
    pub fn fork(&self) -> UpcallGate {
        self.shared.lock().gates += 1;
        UpcallGate {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Forgets a port's bucket (the port is gone); misses of it already
    /// waiting are still handled.
    pub fn forget(&mut self, port: PortNo) {
        let mut q = self.shared.lock();
        if q.ports.get(&port).is_some_and(|p| p.waiting.is_empty()) {
            q.ports.remove(&port);
        }
    }
}

impl Drop for UpcallGate {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        q.gates -= 1;
        if q.gates == 0 {
            self.shared.ready.notify_all();
        }
    }
}

impl UpcallReceiver {
    /// Takes up to `max` misses into `out`, one from each port with misses
    /// waiting in turn, after waiting up to `timeout` for the first. Empty
    /// after a timeout; `Disconnected` once every gate is gone and nothing
    /// waits.
    pub fn recv_batch(
        &self,
        out: &mut Vec<Upcall>,
        max: usize,
        timeout: Duration,
    ) -> Result<(), Disconnected> {
        let sh = &*self.shared;
        let mut q = sh.lock();
        if q.total == 0 {
            if q.gates == 0 {
                return Err(Disconnected);
            }
            q.sleeping += 1;
            q = sh
                .ready
                .wait_timeout(q, timeout)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            q.sleeping -= 1;
            // Woken or timed out: either way one fewer is on its way.
            q.woken = q.woken.saturating_sub(1).min(q.sleeping);
        }
        let mut taken = 0;
        while taken < max && q.total > 0 {
            // The ports after the last one served, then from the start.
            let after = q.last.map_or(PortNo(0), |p| PortNo(p.0.saturating_add(1)));
            let next = q
                .ports
                .range(after..)
                .chain(q.ports.range(..after))
                .find(|(_, p)| !p.waiting.is_empty())
                .map(|(no, _)| *no);
            let Some(no) = next else { break };
            let Some(pq) = q.ports.get_mut(&no) else {
                break;
            };
            let Some(u) = pq.waiting.pop_front() else {
                break;
            };
            let emptied = pq.waiting.is_empty();
            out.push(u);
            q.total -= 1;
            q.active -= usize::from(emptied);
            q.last = Some(no);
            taken += 1;
        }
        Ok(())
    }

    /// Misses waiting, all ports.
    pub fn len(&self) -> usize {
        self.shared.lock().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for UpcallReceiver {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
    }
}

#[cfg(test)]
#[path = "tests/upcall.rs"]
mod tests;

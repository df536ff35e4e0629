//! Admission of cache misses to the upcall handler: a token bucket per
//! port and one bounded queue. The RX thread never waits on either: a miss
//! over its port's rate, or one that finds the queue full, is dropped and
//! counted (the next packet of the flow gets another chance), so a VM that
//! floods new flows costs the others nothing but their share of the
//! handler.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};

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
}

/// What happened to an offered miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Queued,
    /// The port is over its upcall rate.
    RateLimited,
    /// The queue to the handler is full.
    QueueFull,
    /// The handler is gone (shutting down).
    Closed,
}

/// The RX thread's end: per-port buckets in front of the bounded queue.
#[derive(Debug)]
pub struct UpcallGate {
    tx: SyncSender<Upcall>,
    rate: u64,
    burst: u64,
    buckets: HashMap<PortNo, TokenBucket>,
}

/// A gate and the handler's receiving end, for a queue of `capacity`
/// misses and `rate` upcalls per second per port (`burst` above it; a
/// rate of zero: no limit).
pub fn channel(capacity: usize, rate: u64, burst: u64) -> (UpcallGate, Receiver<Upcall>) {
    let (tx, rx) = mpsc::sync_channel(capacity.max(1));
    (
        UpcallGate {
            tx,
            rate,
            burst,
            buckets: HashMap::new(),
        },
        rx,
    )
}

impl UpcallGate {
    /// Offers a miss; never blocks.
    pub fn offer(&mut self, now: Timestamp, port: PortNo, frame: &[u8]) -> Admission {
        let (rate, burst) = (self.rate, self.burst);
        let bucket = self
            .buckets
            .entry(port)
            .or_insert_with(|| TokenBucket::new(rate, burst, now));
        if !bucket.admit(now) {
            return Admission::RateLimited;
        }
        match self.tx.try_send(Upcall {
            port,
            frame: frame.to_vec(),
        }) {
            Ok(()) => Admission::Queued,
            Err(TrySendError::Full(_)) => Admission::QueueFull,
            Err(TrySendError::Disconnected(_)) => Admission::Closed,
        }
    }

    /// Forgets a port's bucket (the port is gone).
    /// A gate for another datapath thread: the same queue to the handler,
    /// token buckets of its own (each port is received by one thread).
    pub fn fork(&self) -> UpcallGate {
        UpcallGate {
            tx: self.tx.clone(),
            rate: self.rate,
            burst: self.burst,
            buckets: HashMap::new(),
        }
    }

    pub fn forget(&mut self, port: PortNo) {
        self.buckets.remove(&port);
    }
}

#[cfg(test)]
#[path = "tests/upcall.rs"]
mod tests;

//! Software meters: OpenFlow's single drop band as a token bucket, shared
//! by every datapath thread that runs a flow naming the meter.
//!
//! The bucket counts nano-tokens so integer arithmetic stays exact: a band
//! of `rate` bytes (or packets) per second refills `rate` tokens × 10^9 per
//! second up to `burst` × 10^9, and a packet costs its length (or 1) × 10^9.
//! Time is the caller's (capture time in replay, the monotonic clock live).
//!
//! Threads: a [`Meter`] is shared (`Arc`) between the slow path, which
//! creates and deletes it, and the datapath threads, which charge it. A
//! charge takes the meter's own mutex for a few arithmetic operations:
//! meters are rate limits across threads, so their state must be one, and
//! only packets through a meter ever touch it (Open vSwitch's userspace
//! meters lock the same way). Counters are atomics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::actions::{ActionSink, UserspaceReason};
use crate::offload::MeterBand;
use crate::rand::SplitMix64;
use crate::types::{MeterId, PortNo, Timestamp};

/// A token bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    band: MeterBand,
    /// Tokens × 10^9.
    tokens: u128,
    last: Timestamp,
}

impl Bucket {
    /// A full bucket.
    pub fn new(band: MeterBand) -> Self {
        Bucket {
            band,
            tokens: u128::from(band.burst) * 1_000_000_000,
            last: Timestamp::NEVER,
        }
    }

    /// Charges one packet of `len` bytes at `now`: true = within the rate.
    pub fn charge(&mut self, len: usize, now: Timestamp) -> bool {
        let cap = u128::from(self.band.burst) * 1_000_000_000;
        if now > self.last {
            let dt = u128::from(now.since(self.last));
            if self.last != Timestamp::NEVER {
                self.tokens = (self.tokens + dt * u128::from(self.band.rate)).min(cap);
            }
            self.last = now;
        }
        let need = if self.band.packets { 1 } else { len as u128 } * 1_000_000_000;
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }
}

/// Counters of one meter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeterStats {
    pub packets: u64,
    pub bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
}

/// One meter as the datapath threads share it.
#[derive(Debug)]
pub struct Meter {
    id: MeterId,
    band: MeterBand,
    bucket: Mutex<Bucket>,
    packets: AtomicU64,
    bytes: AtomicU64,
    dropped_packets: AtomicU64,
    dropped_bytes: AtomicU64,
}

impl Meter {
    /// Meter `id` with `band`, its bucket full.
    pub fn new(id: MeterId, band: MeterBand) -> Self {
        Meter {
            id,
            band,
            bucket: Mutex::new(Bucket::new(band)),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped_packets: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
        }
    }

    pub fn id(&self) -> MeterId {
        self.id
    }

    pub fn band(&self) -> MeterBand {
        self.band
    }

    /// Charges a packet of `len` bytes at `now`: true = pass.
    pub fn charge(&self, len: usize, now: Timestamp) -> bool {
        // A thread that panicked while holding the bucket left it between
        // two charges: still a valid bucket.
        let pass = self
            .bucket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .charge(len, now);
        let (n, b) = if pass {
            (&self.packets, &self.bytes)
        } else {
            (&self.dropped_packets, &self.dropped_bytes)
        };
        n.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(len as u64, Ordering::Relaxed);
        pass
    }

    pub fn stats(&self) -> MeterStats {
        MeterStats {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped_packets: self.dropped_packets.load(Ordering::Relaxed),
            dropped_bytes: self.dropped_bytes.load(Ordering::Relaxed),
        }
    }
}

/// Meters by id, as an executing thread reaches them.
pub trait Meters {
    /// Charges a packet of `len` bytes to meter `id` at `now`: true =
    /// pass. An unknown meter drops (as OpenFlow says).
    fn charge(&self, id: MeterId, len: usize, now: Timestamp) -> bool;
}

impl Meters for HashMap<MeterId, Arc<Meter>> {
    fn charge(&self, id: MeterId, len: usize, now: Timestamp) -> bool {
        self.get(&id).is_some_and(|m| m.charge(len, now))
    }
}

/// A caller's sink with meters and a sampler in front: what executes a
/// packet's actions, on a datapath thread or in the slow path.
pub struct MeteredSink<'a, S, M> {
    pub inner: &'a mut S,
    pub meters: &'a M,
    pub rng: &'a mut SplitMix64,
    pub now: Timestamp,
    /// The tracker `ct()` runs against (`None`: `ct()` is skipped).
    pub ct: Option<&'a conntrack::Tracker>,
    /// The packet's tracking state, as `ct()` and `ct_clear` leave it.
    pub ct_meta: conntrack::CtMeta,
    /// Copies forked to later stages by this list, for the caller to run
    /// after it ([`crate::datapath::Fork`]); at most
    /// [`MAX_FORKS`](crate::datapath::MAX_FORKS) a list.
    pub forks: Vec<crate::datapath::Fork>,
}

impl<S: ActionSink, M: Meters> ActionSink for MeteredSink<'_, S, M> {
    fn output(&mut self, port: PortNo, pkt: &[u8]) {
        self.inner.output(port, pkt);
    }

    fn output_parts(&mut self, port: PortNo, head: &[u8], body: &[u8]) {
        self.inner.output_parts(port, head, body);
    }

    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]) {
        self.inner.userspace(reason, pkt);
    }

    fn meter(&mut self, id: MeterId, len: usize) -> bool {
        self.meters.charge(id, len, self.now)
    }

    fn sample(&mut self, probability: u32) -> bool {
        self.rng.take(probability)
    }

    fn conntrack(
        &mut self,
        spec: &conntrack::CtSpec,
        pkt: &mut [u8],
        l3: usize,
        eth_type: u16,
    ) -> bool {
        let Some(t) = self.ct else { return false };
        t.execute(
            pkt,
            l3,
            eth_type,
            spec,
            &mut self.ct_meta,
            self.now.as_millis(),
        );
        true
    }

    fn ct_clear(&mut self) {
        self.ct_meta.clear();
    }

    fn fork(&mut self, recirc: u32, pkt: &[u8], layout: &crate::Layout) -> bool {
        if self.forks.len() >= crate::datapath::MAX_FORKS {
            return false;
        }
        self.forks.push(crate::datapath::Fork {
            recirc,
            pkt: pkt.to_vec(),
            layout: *layout,
            ct: self.ct_meta,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_bucket_passes_its_burst_then_its_rate() {
        // 1000 bytes/s, burst 1500: one 1500-byte packet, then nothing
        // until 1.5 s of refill.
        let mut b = Bucket::new(MeterBand::bytes(1000, 1500));
        let t0 = Timestamp(1_000 * MS);
        assert!(b.charge(1500, t0));
        assert!(!b.charge(1, t0));
        assert!(!b.charge(1500, Timestamp(t0.0 + 1_499 * MS)));
        assert!(b.charge(1500, Timestamp(t0.0 + 1_500 * MS)));
        // Packet bands count packets.
        let mut p = Bucket::new(MeterBand {
            rate: 10,
            burst: 2,
            packets: true,
        });
        assert!(p.charge(9000, t0) && p.charge(9000, t0) && !p.charge(1, t0));
        assert!(p.charge(1, Timestamp(t0.0 + 100 * MS)));
    }

    #[test]
    fn a_shared_meter_limits_all_threads_together() {
        let m = std::sync::Arc::new(Meter::new(MeterId(1), MeterBand::bytes(1, 1000)));
        let t = Timestamp(5);
        let passed: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let m = &m;
                    s.spawn(move || (0..100).filter(|_| m.charge(10, t)).count())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert_eq!(passed, 100, "a burst of 1000 bytes: 100 packets of 10");
        let st = m.stats();
        assert_eq!((st.packets, st.bytes), (100, 1000));
        assert_eq!((st.dropped_packets, st.dropped_bytes), (300, 3000));
    }
}

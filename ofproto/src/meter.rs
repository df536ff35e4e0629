//! OpenFlow meters: definitions in `ovs-ofctl add-meter` syntax and the
//! software token buckets that police flows still in the software path.
//!
//! A meter has one drop band (the only band type eswitch offloads): a rate
//! in kbit/s or packets/s and a burst. Hardware gets the same band through
//! [`megaflow::offload::FlowOffload::set_meter`]; a flow is policed by the
//! software bucket while in software and by the device's bucket once
//! offloaded (the two buckets are separate, as in Open vSwitch with
//! hw-offload).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use megaflow::offload::MeterBand;
use megaflow::{MeterId, Timestamp};
use thiserror::Error;

/// A meter as `add-meter` defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterSpec {
    pub id: MeterId,
    /// `pktps` rather than `kbps`.
    pub packets: bool,
    /// Band rate: kbit/s, or packets/s.
    pub rate: u64,
    /// Band burst: kbit, or packets (`burst_size`); 0 = the default.
    pub burst_size: u64,
    /// `stats`: the controller asked for the meter's counters
    /// (OFPMF_STATS). They are kept either way; the flag is what the meter
    /// reads back with.
    pub stats: bool,
}

impl MeterSpec {
    /// The band in bytes (or packets) per second, with the burst the
    /// buckets use: `burst_size` when given, else 100 ms of the rate (at
    /// least one 1,518-byte frame, or one packet).
    pub fn band(&self) -> MeterBand {
        if self.packets {
            let burst = if self.burst_size > 0 {
                self.burst_size
            } else {
                (self.rate / 10).max(1)
            };
            MeterBand {
                rate: self.rate,
                burst,
                packets: true,
            }
        } else {
            let rate = self.rate.saturating_mul(1000) / 8;
            let burst = if self.burst_size > 0 {
                self.burst_size.saturating_mul(1000) / 8
            } else {
                (rate / 10).max(1518)
            };
            MeterBand::bytes(rate, burst)
        }
    }
}

impl fmt::Display for MeterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = if self.packets { "pktps" } else { "kbps" };
        write!(f, "meter={},{unit}", self.id)?;
        if self.burst_size > 0 {
            f.write_str(",burst")?;
        }
        if self.stats {
            f.write_str(",stats")?;
        }
        write!(f, ",band=type=drop,rate={}", self.rate)?;
        if self.burst_size > 0 {
            write!(f, ",burst_size={}", self.burst_size)?;
        }
        Ok(())
    }
}

/// A meter definition that does not parse; names the bad token.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("bad meter \"{text}\": {reason}")]
pub struct MeterError {
    pub text: String,
    pub reason: String,
}

fn bad(text: &str, reason: impl Into<String>) -> MeterError {
    MeterError {
        text: text.to_string(),
        reason: reason.into(),
    }
}

/// Parses `meter=1,kbps,burst,band=type=drop,rate=8000,burst_size=1000`
/// (`ovs-ofctl add-meter` syntax; `kbps` is the default unit).
pub fn parse_meter(text: &str) -> Result<MeterSpec, MeterError> {
    let s = text.trim();
    let mut id = None;
    let mut packets = false;
    let mut rate = None;
    let mut burst_size = 0;
    let mut stats = false;
    let mut in_band = false;
    for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = match tok.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (tok, None),
        };
        let num = |v: Option<&str>| -> Result<u64, MeterError> {
            let v = v.ok_or_else(|| bad(text, format!("\"{k}\" needs a value")))?;
            v.parse::<u64>()
                .map_err(|_| bad(text, format!("\"{v}\" is not a number for {k}")))
        };
        match (k, in_band) {
            ("meter", false) => {
                let n = num(v)?;
                let n = u32::try_from(n)
                    .ok()
                    .filter(|&n| n > 0 && n <= 0xffff_0000)
                    .ok_or_else(|| {
                        bad(text, format!("meter id {n} out of range 1..=4294901760"))
                    })?;
                id = Some(MeterId(n));
            }
            ("kbps", false) => packets = false,
            ("pktps", false) => packets = true,
            ("burst", false) => {}
            ("stats", false) => stats = true,
            ("band", _) => {
                in_band = true;
                match v.and_then(|v| v.split_once('=')) {
                    Some(("type", "drop")) => {}
                    Some(("type", t)) => {
                        return Err(bad(
                            text,
                            format!("band type \"{t}\" (only type=drop is supported)"),
                        ))
                    }
                    _ => return Err(bad(text, "band must start with type=drop")),
                }
            }
            ("rate", true) => rate = Some(num(v)?),
            ("burst_size", true) => burst_size = num(v)?,
            ("prec_level", true) => {
                return Err(bad(
                    text,
                    "prec_level (dscp_remark bands are not supported)",
                ))
            }
            _ => return Err(bad(text, format!("unknown token \"{tok}\""))),
        }
    }
    let id = id.ok_or_else(|| bad(text, "missing meter=ID"))?;
    let rate = rate.ok_or_else(|| bad(text, "missing band=type=drop,rate=N"))?;
    if rate == 0 {
        return Err(bad(text, "rate 0"));
    }
    Ok(MeterSpec {
        id,
        packets,
        rate,
        burst_size,
        stats,
    })
}

pub use megaflow::meter::{Bucket, Meter, MeterStats};

#[derive(Clone, Debug)]
struct Entry {
    spec: MeterSpec,
    /// The bucket and counters every datapath charges.
    meter: Arc<Meter>,
}

/// The meters of a bridge: their OpenFlow specs, and the shared [`Meter`]
/// each one is in the datapaths.
#[derive(Clone, Debug, Default)]
pub struct MeterTable {
    meters: BTreeMap<MeterId, Entry>,
    generation: u64,
}

impl MeterTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a meter (its bucket starts full); returns the
    /// shared meter to hand to the datapaths.
    pub fn set(&mut self, spec: MeterSpec) -> Arc<Meter> {
        let meter = Arc::new(Meter::new(spec.id, spec.band()));
        self.meters.insert(
            spec.id,
            Entry {
                spec,
                meter: Arc::clone(&meter),
            },
        );
        self.generation += 1;
        meter
    }

    /// Deletes a meter; flows naming it then drop (as in OpenFlow, a
    /// packet sent to a missing meter is dropped).
    pub fn remove(&mut self, id: MeterId) -> Option<MeterSpec> {
        let m = self.meters.remove(&id)?;
        self.generation += 1;
        Some(m.spec)
    }

    pub fn get(&self, id: MeterId) -> Option<&MeterSpec> {
        self.meters.get(&id).map(|m| &m.spec)
    }

    /// The shared meter `id` is in the datapaths.
    pub fn shared(&self, id: MeterId) -> Option<&Arc<Meter>> {
        self.meters.get(&id).map(|m| &m.meter)
    }

    /// Counters over every thread that charged the meter.
    pub fn stats(&self, id: MeterId) -> Option<MeterStats> {
        self.meters.get(&id).map(|m| m.meter.stats())
    }

    pub fn iter(&self) -> impl Iterator<Item = &MeterSpec> + '_ {
        self.meters.values().map(|m| &m.spec)
    }

    pub fn len(&self) -> usize {
        self.meters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    /// Bumped by every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Charges a packet to meter `id`: true = pass. An unknown meter drops.
    pub fn charge(&self, id: MeterId, len: usize, now: Timestamp) -> bool {
        self.meters
            .get(&id)
            .is_some_and(|m| m.meter.charge(len, now))
    }
}

/// The slow path executes its upcalled packets against the same meters.
impl megaflow::meter::Meters for MeterTable {
    fn charge(&self, id: MeterId, len: usize, now: Timestamp) -> bool {
        MeterTable::charge(self, id, len, now)
    }
}

#[cfg(test)]
#[path = "tests/meter.rs"]
mod tests;

//! The sim eSwitch's fault plan, from the config (`[[backend.fault]]`):
//! how a user rehearses a NIC that runs out of rules, fails inserts,
//! answers slowly, loses counter queries or refuses destroys, on the live
//! daemon, without a test binary.
//!
//! ```toml
//! [[backend.fault]]
//! op = "rule_create"     # rule_create | rule_destroy | counter_query | counter_bulk_alloc |
//!                        # action_create | matcher_create | table_create | domain_create
//! errno = "ENOSPC"       # ENOSPC | EIO | ENOMEM | EBUSY | EINVAL | EEXIST | EOPNOTSUPP |
//!                        # ETIMEDOUT (or its number); absent: no failure (a latency only)
//! after = 100            # calls that succeed first (default 0)
//! times = 50             # calls that fail then (default: every one)
//! fraction = 0.1         # of those, the share that fails (default 1)
//! latency_ms = 5         # every call in the window waits this long (default 0)
//! from_ms = 0            # the window, from the daemon's start (default: always)
//! until_ms = 20000
//! ```

use std::time::Duration;

use anyhow::{bail, Context};
use offload::dr::Errno;
use offload::sim::{Delay, Fault, Op, SimBackend};
use serde::Deserialize;

/// A share from 0 to 1, compared by value (configs compare as `Eq`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Share(pub f64);

impl Eq for Share {}

/// One `[[backend.fault]]` entry.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    pub op: String,
    #[serde(default)]
    pub errno: Option<String>,
    #[serde(default)]
    pub after: u64,
    #[serde(default)]
    pub times: Option<u64>,
    #[serde(default)]
    pub fraction: Option<Share>,
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub from_ms: u64,
    #[serde(default)]
    pub until_ms: Option<u64>,
}

/// What a plan does to the sim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    pub faults: Vec<Fault>,
    pub delays: Vec<Delay>,
}

impl FaultPlan {
    /// Checks the entries; the error names the entry (from 1) and the key.
    pub fn parse(entries: &[FaultConfig]) -> anyhow::Result<FaultPlan> {
        let mut plan = FaultPlan::default();
        for (i, e) in entries.iter().enumerate() {
            plan.add(e)
                .with_context(|| format!("backend.fault[{}]", i + 1))?;
        }
        Ok(plan)
    }

    fn add(&mut self, e: &FaultConfig) -> anyhow::Result<()> {
        let Some(op) = Op::from_name(&e.op) else {
            let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            bail!("op = \"{}\": expected one of {}", e.op, names.join(", "));
        };
        let from = Duration::from_millis(e.from_ms);
        let until = e.until_ms.map(Duration::from_millis);
        if let Some(u) = e.until_ms {
            if u <= e.from_ms {
                bail!("until_ms = {u}: must be after from_ms = {}", e.from_ms);
            }
        }
        if e.latency_ms > 0 {
            self.delays.push(Delay {
                op,
                latency: Duration::from_millis(e.latency_ms),
                from,
                until,
            });
        }
        let Some(name) = &e.errno else {
            if e.latency_ms == 0 {
                bail!("neither errno nor latency_ms: the entry does nothing");
            }
            if e.times.is_some() || e.fraction.is_some() || e.after > 0 {
                bail!("after, times and fraction need an errno to fail with");
            }
            return Ok(());
        };
        let errno = Errno::from_name(name)
            .or_else(|| name.parse().ok().and_then(Errno::from_code))
            .with_context(|| {
                let names: Vec<&str> = Errno::ALL.iter().map(|e| e.name()).collect();
                format!("errno = \"{name}\": expected one of {}", names.join(", "))
            })?;
        let share = e.fraction.map_or(1.0, |s| s.0);
        if !(share > 0.0 && share <= 1.0) {
            bail!("fraction = {share}: expected more than 0, at most 1");
        }
        if e.times == Some(0) {
            bail!("times = 0: the entry does nothing");
        }
        let fault = Fault {
            times: e.times.unwrap_or(u64::MAX),
            ..Fault::nth(op, e.after.saturating_add(1), errno)
        };
        self.faults.push(fault.fraction(share).window(from, until));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.delays.is_empty()
    }

    /// Puts the plan in force on `sim` (its windows count from now).
    pub fn apply(&self, sim: &SimBackend) {
        for f in &self.faults {
            sim.inject(*f);
        }
        for d in &self.delays {
            sim.delay(*d);
        }
    }
}

#[cfg(test)]
#[path = "tests/faults.rs"]
mod tests;

//! # sim: a software model of the eSwitch FDB
//!
//! [`SimBackend`] implements [`DrBackend`] the way the device and rdma-core
//! behave, and forwards packets through what was programmed
//! ([`SimBackend::process`]). It is how every test, `eswitchd replay` and
//! every user without a ConnectX sees offload work, so it takes the same
//! bytes the `mlx5` backend hands to the library and answers the same
//! errors:
//!
//! - matchers take `fte_match_param` masks; bits the device cannot match
//!   (reserved, blocks past misc2, a partial `source_port`, IP addresses
//!   without an `ip_version` of 4 or 6 in the mask) are refused; rule values
//!   must lie inside the mask and carry the matcher's IP version;
//! - a rule's actions must form a sequence the library accepts
//!   ([`check_sequence`](crate::dr::check_sequence)); destination, meter and
//!   sampler tables must be above the rule's level; the root table (level 0)
//!   takes only what firmware steering takes (drop, default_miss,
//!   dest_table, dest_array, counters); dest_vport is FDB-only and names a
//!   vport the eSwitch has;
//! - duplicates: refused in the root table, and in other tables once the
//!   domain disallows them (EEXIST); when allowed, the older rule answers;
//! - objects in use cannot be destroyed (EBUSY); capacities give ENOSPC.
//!
//! Packets walk the FDB as the man page says: level-0 matchers in priority
//! order (equal priorities: creation order, which the device leaves
//! undefined), the first rule whose masked packet equals its value fires,
//! its actions run in order, `dest_table`/meter/sampler continue in a
//! higher table, and a miss, or a rule that ends without a destination,
//! takes the FDB default: to the eSwitch manager, i.e. software sees the
//! packet on the representor of its ingress vport.
//!
//! Thread-safety: one lock. Packet processing takes it shared (counters,
//! meters and samplers are atomics or own a small lock), so any number of
//! datapath threads forward concurrently; configuration calls take it
//! exclusively, one at a time, as the library serialises per domain.
//!
//! Time is the caller's: [`process`](SimBackend::process) takes the packet's
//! timestamp, so meters run on simulated time (a replay) as on real time.
//!
//! Faults: [`SimBackend::inject`] makes the Nth call of an operation fail
//! with a chosen errno, or every call, and [`SimBackend::set_latency`]
//! delays calls, for the offload manager's fault tests.

mod config;
mod dump;
mod exec;
mod matcher;
pub mod packet;
mod slab;

mod state;

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

pub use config::{SimConfig, Snapshot};
pub use exec::{DropCause, Egress, OutFrame, Output};

use crate::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DeviceDump, DomainId, DomainType, DrBackend,
    DrError, Errno, MatcherId, RestoreRuleId, RuleId, SyncFlags, TableId,
};
use crate::Vport;

use state::State;

/// The operations faults can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    DomainCreate,
    TableCreate,
    MatcherCreate,
    RuleCreate,
    RuleDestroy,
    ActionCreate,
    CounterAlloc,
    CounterQuery,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [
        Op::DomainCreate,
        Op::TableCreate,
        Op::MatcherCreate,
        Op::RuleCreate,
        Op::RuleDestroy,
        Op::ActionCreate,
        Op::CounterAlloc,
        Op::CounterQuery,
    ];

    /// The operation named `name` (as [`Op::name`] gives it).
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The call's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::DomainCreate => "domain_create",
            Op::TableCreate => "table_create",
            Op::MatcherCreate => "matcher_create",
            Op::RuleCreate => "rule_create",
            Op::RuleDestroy => "rule_destroy",
            Op::ActionCreate => "action_create",
            Op::CounterAlloc => "counter_bulk_alloc",
            Op::CounterQuery => "counter_bulk_query",
        }
    }
}

/// A planned failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The operation that fails.
    pub op: Op,
    /// The call (counting from 1, from when the fault is injected, calls
    /// inside its window only) that fails first.
    pub nth: u64,
    /// How many calls in a row fail (`u64::MAX`: from then on).
    pub times: u64,
    /// The errno they fail with.
    pub errno: Errno,
    /// Of those calls, the share that fails, in millionths (1,000,000:
    /// every one); which ones is drawn from a seeded generator.
    pub per_million: u32,
    /// When the plan is in force, from the device's creation: calls
    /// before `from` or from `until` on are not counted and do not fail.
    pub from: Duration,
    pub until: Option<Duration>,
}

impl Fault {
    /// The `nth` call of `op` fails once with `errno`.
    pub fn nth(op: Op, nth: u64, errno: Errno) -> Fault {
        Fault {
            op,
            nth,
            times: 1,
            errno,
            per_million: MILLION,
            from: Duration::ZERO,
            until: None,
        }
    }

    /// Every call of `op` fails with `errno` until cleared.
    pub fn always(op: Op, errno: Errno) -> Fault {
        Fault {
            times: u64::MAX,
            ..Fault::nth(op, 1, errno)
        }
    }

    /// Only a share of the calls fail (0.0 to 1.0).
    pub fn fraction(self, share: f64) -> Fault {
        Fault {
            per_million: (share.clamp(0.0, 1.0) * f64::from(MILLION)).round() as u32,
            ..self
        }
    }

    /// In force from `from` until `until` (device time).
    pub fn window(self, from: Duration, until: Option<Duration>) -> Fault {
        Fault {
            from,
            until,
            ..self
        }
    }

    fn in_force(&self, at: Duration) -> bool {
        in_window(at, self.from, self.until)
    }
}

/// Whether device time `at` is in `[from, until)` (no `until`: for ever).
fn in_window(at: Duration, from: Duration, until: Option<Duration>) -> bool {
    at >= from && until.is_none_or(|u| at < u)
}

const MILLION: u32 = 1_000_000;

/// A delay of every call of an operation, in a window of device time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delay {
    pub op: Op,
    pub latency: Duration,
    pub from: Duration,
    pub until: Option<Duration>,
}

#[derive(Debug)]
struct Faults {
    planned: Vec<(Fault, u64)>,
    delays: Vec<Delay>,
    injected: u64,
    /// Per operation, the names of the threads that called it.
    callers: HashMap<Op, std::collections::BTreeSet<String>>,
    /// Device time starts with the device.
    started: std::time::Instant,
    rng: megaflow::SplitMix64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            planned: Vec::new(),
            delays: Vec::new(),
            injected: 0,
            callers: HashMap::new(),
            started: std::time::Instant::now(),
            rng: megaflow::SplitMix64::new(0xfa17_5eed),
        }
    }
}

impl Faults {
    /// Counts a call of `op`; the error if a fault fires.
    fn check(&mut self, op: Op) -> Result<Option<Duration>, DrError> {
        let at = self.started.elapsed();
        let mut fire = None;
        for (f, calls) in self.planned.iter_mut().filter(|(f, _)| f.op == op) {
            if !f.in_force(at) {
                continue;
            }
            *calls += 1;
            if *calls >= f.nth && *calls - f.nth < f.times && fire.is_none() {
                let drawn = f.per_million >= MILLION
                    || self.rng.below(u64::from(MILLION)) < u64::from(f.per_million);
                if drawn {
                    fire = Some(f.errno);
                }
            }
        }
        if let Some(errno) = fire {
            self.injected += 1;
            return Err(DrError::Injected {
                errno,
                op: op.name(),
            });
        }
        Ok(self
            .delays
            .iter()
            .filter(|d| d.op == op && in_window(at, d.from, d.until))
            .map(|d| d.latency)
            .max())
    }
}

/// The simulated eSwitch. See the module documentation.
#[derive(Debug)]
pub struct SimBackend {
    state: RwLock<State>,
    faults: Mutex<Faults>,
}

impl Default for SimBackend {
    fn default() -> Self {
        SimBackend::new(SimConfig::default())
    }
}

impl SimBackend {
    /// How the modelled firmware marks a packet's source vport (what the
    /// offload manager's rules must match).
    pub fn source_port(&self) -> crate::prm::SourcePortMode {
        self.read().config.source_port
    }

    /// A device with no domains.
    pub fn new(config: SimConfig) -> Self {
        SimBackend {
            state: RwLock::new(State::new(config)),
            faults: Mutex::new(Faults::default()),
        }
    }

    /// Whether software receives the manager's packets on the slow-path
    /// queue that reads restore tags ([`SimConfig::restore_path`]): a
    /// backend that models a device sets it when it opens its queue.
    pub fn set_restore_path(&self, on: bool) {
        self.write().config.restore_path = on;
    }

    /// Plans a failure.
    pub fn inject(&self, fault: Fault) {
        self.faults_lock().planned.push((fault, 0));
    }

    /// Delays the calls of an operation in a window of device time.
    pub fn delay(&self, d: Delay) {
        self.faults_lock().delays.push(d);
    }

    /// Delays every call of `op` by `latency` (zero removes it): a
    /// [`Delay`] always in force, replacing the last one set this way.
    pub fn set_latency(&self, op: Op, latency: Duration) {
        let always = |d: &Delay| d.op == op && d.from.is_zero() && d.until.is_none();
        let mut f = self.faults_lock();
        f.delays.retain(|d| !always(d));
        if !latency.is_zero() {
            f.delays.push(Delay {
                op,
                latency,
                from: Duration::ZERO,
                until: None,
            });
        }
    }

    /// Removes every planned failure and latency.
    pub fn clear_faults(&self) {
        let mut f = self.faults_lock();
        f.planned.clear();
        f.delays.clear();
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.faults_lock().injected
    }

    fn faults_lock(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The names of the threads that have called `op` (unnamed threads
    /// as `?`): which threads program the device.
    pub fn callers(&self, op: Op) -> Vec<String> {
        self.faults_lock()
            .callers
            .get(&op)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Runs the fault plan for `op`, sleeping outside every lock.
    fn gate(&self, op: Op) -> Result<(), DrError> {
        let delay = {
            let mut f = self.faults_lock();
            let me = std::thread::current();
            let name = me.name().unwrap_or("?");
            let callers = f.callers.entry(op).or_default();
            if !callers.contains(name) {
                callers.insert(name.to_string());
            }
            f.check(op)?
        };
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        Ok(())
    }

    /// Forwards one packet that entered the eSwitch from `ingress` through
    /// `domain` at time `now_ns`; appends what leaves to `out` (tagged with
    /// packet number `out.packets()` before the call).
    pub fn process(
        &self,
        domain: DomainId,
        now_ns: u64,
        ingress: Vport,
        frame: &[u8],
        out: &mut Output,
    ) {
        let st = self.read();
        exec::process(&st, domain, now_ns, [(ingress, frame)], out);
    }

    /// [`process`](Self::process) for a batch under one lock acquisition.
    pub fn process_batch<'a>(
        &self,
        domain: DomainId,
        now_ns: u64,
        packets: impl IntoIterator<Item = (Vport, &'a [u8])>,
        out: &mut Output,
    ) {
        let st = self.read();
        exec::process(&st, domain, now_ns, packets, out);
    }

    /// What is programmed, for dumps and tests.
    pub fn snapshot(&self) -> Snapshot {
        self.read().snapshot()
    }
}

impl DrBackend for SimBackend {
    fn domain_create(&self, ty: DomainType) -> Result<DomainId, DrError> {
        self.gate(Op::DomainCreate)?;
        Ok(self.write().domain_create(ty))
    }

    fn domain_destroy(&self, domain: DomainId) -> Result<(), DrError> {
        self.write().domain_destroy(domain)
    }

    fn domain_sync(&self, domain: DomainId, _flags: SyncFlags) -> Result<(), DrError> {
        // Every call is applied before it returns: nothing is queued.
        self.read().domain(domain).map(|_| ())
    }

    fn domain_allow_duplicate_rules(&self, domain: DomainId, allow: bool) -> Result<(), DrError> {
        self.write().domain_mut(domain)?.allow_duplicates = allow;
        Ok(())
    }

    fn table_create(&self, domain: DomainId, level: u32) -> Result<TableId, DrError> {
        self.gate(Op::TableCreate)?;
        self.write().table_create(domain, level)
    }

    fn table_destroy(&self, table: TableId) -> Result<(), DrError> {
        self.write().table_destroy(table)
    }

    fn matcher_create(
        &self,
        table: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError> {
        self.gate(Op::MatcherCreate)?;
        self.write().matcher_create(table, priority, criteria, mask)
    }

    fn matcher_destroy(&self, matcher: MatcherId) -> Result<(), DrError> {
        self.write().matcher_destroy(matcher)
    }

    fn rule_create(
        &self,
        matcher: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError> {
        self.gate(Op::RuleCreate)?;
        self.write().rule_create(matcher, value, actions)
    }

    fn rule_destroy(&self, rule: RuleId) -> Result<(), DrError> {
        self.gate(Op::RuleDestroy)?;
        self.write().rule_destroy(rule)
    }

    fn action_create(&self, domain: DomainId, spec: ActionSpec) -> Result<ActionId, DrError> {
        self.gate(Op::ActionCreate)?;
        self.write().action_create(domain, spec)
    }

    fn action_destroy(&self, action: ActionId) -> Result<(), DrError> {
        self.write().action_destroy(action)
    }

    fn counter_bulk_alloc(&self, log_size: u8) -> Result<CounterBulkId, DrError> {
        self.gate(Op::CounterAlloc)?;
        self.write().counter_bulk_alloc(log_size)
    }

    fn counter_bulk_free(&self, bulk: CounterBulkId) -> Result<(), DrError> {
        self.write().counter_bulk_free(bulk)
    }

    fn counter_bulk_query(
        &self,
        bulk: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        self.gate(Op::CounterQuery)?;
        self.read().counter_bulk_query(bulk, out)
    }

    /// Every domain, table, matcher and rule with its decoded match,
    /// actions and counter, read back from the sim's state.
    fn dump(&self) -> Result<DeviceDump, DrError> {
        Ok(dump::dump(&self.read()))
    }

    /// The sim models the `verbs` slow-path queue unless its config says
    /// the representor netdevs ([`SimConfig::restore_path`]).
    fn restore_path(&self) -> Result<(), &'static str> {
        if self.read().config.restore_path {
            Ok(())
        } else {
            Err(crate::dr::NO_RESTORE_PATH)
        }
    }

    fn restore_rule_create(&self, tag: u32) -> Result<RestoreRuleId, DrError> {
        self.gate(Op::RuleCreate)?;
        self.write().restore_rule_create(tag)
    }

    fn restore_rule_destroy(&self, rule: RestoreRuleId) -> Result<(), DrError> {
        self.write().restore_rule_destroy(rule)
    }
}

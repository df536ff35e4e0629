//! Running the suite: the list of cases, one case under `catch_unwind`, the
//! report, and the two figures a user compares devices by (rule insert
//! rate, counter query time).

use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, Instant};

use super::*;
use crate::dr::{CounterBulkId, DrError, MatcherId};

/// A capacity an ENOSPC case exhausts; the runner gives the case a device
/// where it is small, or skips the case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    RulesPerTable,
    Counters,
    Meters,
}

/// What a case runs.
pub enum Body<D> {
    /// On any device.
    Plain(fn(&D)),
    /// Needs a device whose `Capacity` is the given number.
    Exhausts(Capacity, fn(&D, usize)),
}

/// One case of the suite.
pub struct Case<D> {
    pub name: &'static str,
    pub body: Body<D>,
}

impl<D> Case<D> {
    /// The capacity the case exhausts, if any.
    pub fn capacity(&self) -> Option<Capacity> {
        match self.body {
            Body::Plain(_) => None,
            Body::Exhausts(c, _) => Some(c),
        }
    }
}

macro_rules! cases {
    ($($name:ident),* $(,)? ; $($cap:ident: $cname:ident),* $(,)?) => {
        /// Every case of the suite, in the order the report lists them.
        pub fn cases<D: Device>() -> Vec<Case<D>> {
            vec![
                $(Case { name: stringify!($name), body: Body::Plain($name::<D>) },)*
                $(Case {
                    name: stringify!($cname),
                    body: Body::Exhausts(Capacity::$cap, $cname::<D>),
                },)*
            ]
        }
    };
}

cases!(
    duplicate_rule_eexist_when_disallowed,
    duplicate_rule_eexist_in_root,
    duplicates_allowed_oldest_answers,
    value_outside_mask_einval,
    match_sizes_and_criteria_einval,
    ip_version_rules,
    drop_with_destination_eopnotsupp,
    dest_vport_domain_and_vport,
    table_levels,
    busy_table_with_matchers,
    busy_matcher_with_rules,
    busy_action_in_use,
    busy_table_led_to,
    busy_counter_bulk,
    busy_domain,
    stale_handles_einval,
    push_vlan_tpid,
    modify_header_bad_bytes,
    action_drop,
    action_default_miss,
    action_dest_vport,
    action_dest_table,
    action_dest_array,
    action_counter,
    action_meter,
    action_sampler,
    action_push_pop_vlan,
    action_modify_header,
    reformat_params_einval,
    reformat_order_eopnotsupp,
    action_encap_vxlan,
    action_decap_vxlan,
    match_vxlan_vni_and_inner,
    match_geneve_vni_without_options,
    action_dest_array_encap,
    counters_exact_under_random_traffic,
    meter_rate_conformance,
    sampler_ratio_within_bounds,
    restore_rule_errors,
    restore_sampled_copy_told_apart,
    restore_stage2_miss_exact,
    ct_chain_nat_and_restores;
    RulesPerTable: enospc_rules_per_table,
    Counters: enospc_counters,
    Meters: enospc_meters,
);

/// A sim where `c` is small enough for its ENOSPC case to exhaust, and
/// that size.
pub fn small_sim(c: Capacity) -> (crate::sim::SimBackend, usize) {
    let mut cfg = crate::sim::SimConfig::default();
    let n = match c {
        Capacity::RulesPerTable => {
            cfg.max_rules_per_table = 10;
            10
        }
        Capacity::Counters => {
            cfg.max_counters = 96;
            96
        }
        Capacity::Meters => {
            cfg.max_meters = 4;
            4
        }
    };
    (crate::sim::SimBackend::new(cfg), n)
}

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// What differed from the expectation, and where the case said so.
    Fail(String),
    /// Why the case could not run on this device.
    Skip(String),
}

thread_local! {
    /// While set, a panic on this thread is recorded here, not printed.
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that records the message and location of
/// a panic on a thread running a case, and leaves every other panic to the
/// hook that was there before.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAPTURE.with(|c| {
                let mut c = c.borrow_mut();
                let Some(slot) = c.as_mut() else {
                    return false;
                };
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    (*s).to_owned()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else if let Some(n) = info.payload().downcast_ref::<NeedsPorts>() {
                    n.0.clone()
                } else {
                    "a panic without a message".to_owned()
                };
                *slot = match info.location() {
                    Some(l) => format!("{msg} (at {}:{})", l.file(), l.line()),
                    None => msg,
                };
                true
            });
            if !captured {
                previous(info);
            }
        }));
    });
}

/// Runs one case on `dev`; `capacity` is the size of the capacity an
/// ENOSPC case exhausts (`None` skips such a case).
pub fn check<D: Device>(dev: &D, case: &Case<D>, capacity: Option<usize>) -> Outcome {
    install_hook();
    let body = || match (&case.body, capacity) {
        (Body::Plain(f), _) => {
            f(dev);
            true
        }
        (Body::Exhausts(_, f), Some(n)) => {
            f(dev, n);
            true
        }
        (Body::Exhausts(..), None) => false,
    };
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    dev.begin_case();
    let result = panic::catch_unwind(AssertUnwindSafe(body));
    let message = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    match result {
        Ok(true) => Outcome::Pass,
        Ok(false) => Outcome::Skip(format!(
            "exhausts {:?}, which this device has too many of to use up in a check",
            case.capacity().expect("an ENOSPC case")
        )),
        Err(payload) if payload.is::<NeedsPorts>() => Outcome::Skip(message),
        Err(_) => Outcome::Fail(message),
    }
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct CaseReport {
    pub name: &'static str,
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// The suite's result on one device.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub cases: Vec<CaseReport>,
}

impl Report {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }

    pub fn passed(&self) -> usize {
        self.count(|o| *o == Outcome::Pass)
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Fail(_)))
    }

    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skip(_)))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.cases {
            let ms = c.elapsed.as_secs_f64() * 1e3;
            match &c.outcome {
                Outcome::Pass => writeln!(f, "  pass  {:<40} {ms:>9.1} ms", c.name)?,
                Outcome::Fail(why) => {
                    writeln!(f, "  FAIL  {:<40} {ms:>9.1} ms\n        {why}", c.name)?
                }
                Outcome::Skip(why) => writeln!(f, "  skip  {:<40} {why}", c.name)?,
            }
        }
        write!(
            f,
            "{} cases: {} passed, {} failed, {} skipped",
            self.cases.len(),
            self.passed(),
            self.failed(),
            self.skipped()
        )
    }
}

/// Runs every case in `cases` through `each` (which picks or builds the
/// device and calls [`check`]), timing each.
pub fn run<D: Device>(cases: &[Case<D>], mut each: impl FnMut(&Case<D>) -> Outcome) -> Report {
    let cases = cases
        .iter()
        .map(|case| {
            let start = Instant::now();
            let outcome = each(case);
            CaseReport {
                name: case.name,
                outcome,
                elapsed: start.elapsed(),
            }
        })
        .collect();
    Report { cases }
}

/// The speed of a device's control path.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    /// Rules inserted in one table, and how fast.
    pub rules: usize,
    pub rules_per_sec: f64,
    /// Counters in one bulk, and the median time to query them all.
    pub counters: usize,
    pub counter_query: Duration,
}

impl fmt::Display for Rates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bench: hw_check.rule_insert_rate {:.0} rules/s ({} rules)\n\
             bench: hw_check.counter_query_time {:.3} ms ({} counters)",
            self.rules_per_sec,
            self.rules,
            self.counter_query.as_secs_f64() * 1e3,
            self.counters
        )
    }
}

/// Measures [`Rates`] on a scratch FDB table that nothing leads to (so
/// traffic is untouched): `rules` exact-dmac rules inserted one by one, and
/// `QUERIES` queries of a bulk of `2^counters_log` counters. Everything it
/// made is destroyed before it returns, also on error.
pub fn measure<B: DrBackend + ?Sized>(
    dev: &B,
    rules: usize,
    counters_log: u8,
) -> Result<Rates, DrError> {
    const QUERIES: usize = 9;
    let d = dev.domain_create(DomainType::Fdb)?;
    let mut made = Made::default();
    let result = measure_in(dev, d, rules, counters_log, QUERIES, &mut made);
    made.destroy(dev);
    let _ = dev.domain_destroy(d);
    result
}

/// The objects [`measure`] made, for the cleanup.
#[derive(Default)]
struct Made {
    rules: Vec<RuleId>,
    action: Option<ActionId>,
    matcher: Option<MatcherId>,
    table: Option<TableId>,
    bulk: Option<CounterBulkId>,
}

impl Made {
    fn destroy<B: DrBackend + ?Sized>(self, dev: &B) {
        for r in self.rules {
            let _ = dev.rule_destroy(r);
        }
        if let Some(a) = self.action {
            let _ = dev.action_destroy(a);
        }
        if let Some(m) = self.matcher {
            let _ = dev.matcher_destroy(m);
        }
        if let Some(t) = self.table {
            let _ = dev.table_destroy(t);
        }
        if let Some(b) = self.bulk {
            let _ = dev.counter_bulk_free(b);
        }
    }
}

fn measure_in<B: DrBackend + ?Sized>(
    dev: &B,
    d: DomainId,
    rules: usize,
    counters_log: u8,
    queries: usize,
    made: &mut Made,
) -> Result<Rates, DrError> {
    let t = *made.table.insert(dev.table_create(d, 1)?);
    let mask = dmac_mask();
    let m = *made
        .matcher
        .insert(dev.matcher_create(t, 0, mask.criteria, &mask.bytes)?);
    let a = *made.action.insert(dev.action_create(d, ActionSpec::Drop)?);
    let values: Vec<Buf> = (0..rules as u64).map(|i| dmac_value(mac(i))).collect();
    made.rules.reserve(rules);
    let start = Instant::now();
    for v in &values {
        made.rules.push(dev.rule_create(m, &v.bytes, &[a])?);
    }
    let insert = start.elapsed();
    let bulk = *made.bulk.insert(dev.counter_bulk_alloc(counters_log)?);
    let mut out = Vec::new();
    let mut times = Vec::with_capacity(queries);
    for _ in 0..queries {
        let start = Instant::now();
        dev.counter_bulk_query(bulk, &mut out)?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(Rates {
        rules,
        rules_per_sec: rules as f64 / insert.as_secs_f64().max(1e-9),
        counters: out.len(),
        counter_query: times[times.len() / 2],
    })
}

//! `eswitchd hw-check`: the Direct Rule conformance suite the sim passes
//! ([`offload::conformance`]), run on a real eSwitch with traffic between
//! the user's VFs ([`super::wire`]), and the figures that compare devices
//! (rule insert rate, counter query time).
//!
//! The backend runs in cross-check mode: every call the sim model refuses
//! is put to the device too, and every answer that differs is a
//! divergence. The suite's own expectations are checked on what the
//! device answered. What each case made is removed after it (on a real
//! FDB a case's root rule would steer the next case's frames), and what
//! could not be removed is reported. The check fails on any failed case,
//! divergence or leftover.

use std::fmt;

use anyhow::Context;

use offload::conformance::{self, Capacity, Device, Outcome, Rates, Report, Tracked};
use offload::sim::SimBackend;
use offload::Vport;

use super::wire::{Modelled, Timing, WireDevice, WirePort};

/// What `hw-check` measures with.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Rules inserted for the insert rate.
    pub rules: usize,
    /// log2 of the counters in the queried bulk.
    pub counters_log: u8,
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes {
            rules: 10_000,
            counters_log: 15,
        }
    }
}

/// The result of a check.
#[derive(Debug)]
pub struct CheckResult {
    /// What was checked (`mlx5_0 with ports …`, `the sim`).
    pub target: String,
    pub report: Report,
    pub rates: Result<Rates, String>,
    /// Calls the device answered differently from the sim.
    pub divergences: Vec<String>,
    /// Frames the wire showed differently from the sim (a case decides
    /// whether that fails it: meter rates allow for timing).
    pub notes: Vec<String>,
    /// Objects that would not go after the check.
    pub left: Vec<String>,
}

impl CheckResult {
    pub fn passed(&self) -> bool {
        self.report.failed() == 0
            && self.divergences.is_empty()
            && self.left.is_empty()
            && self.rates.is_ok()
    }
}

/// How many lines of a list the report shows.
const SHOWN: usize = 20;

fn list(f: &mut fmt::Formatter<'_>, title: &str, items: &[String]) -> fmt::Result {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(f, "{title} ({}):", items.len())?;
    for i in items.iter().take(SHOWN) {
        writeln!(f, "  {i}")?;
    }
    if items.len() > SHOWN {
        writeln!(f, "  … and {} more", items.len() - SHOWN)?;
    }
    Ok(())
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "hw-check on {}", self.target)?;
        writeln!(f, "{}", self.report)?;
        list(f, "differences from the sim", &self.divergences)?;
        list(f, "frames the wire showed otherwise", &self.notes)?;
        match &self.rates {
            Ok(r) => writeln!(f, "{r}")?,
            Err(e) => writeln!(f, "measuring rates failed: {e}")?,
        }
        if self.left.is_empty() {
            writeln!(f, "removed everything it created")?;
        } else {
            list(f, "LEFT ON THE DEVICE", &self.left)?;
        }
        write!(f, "{}", if self.passed() { "PASS" } else { "FAIL" })
    }
}

/// A device with one capacity made small, and that size, for the ENOSPC
/// cases (`None`: they are skipped).
pub type Small<'a, D> = Option<&'a dyn Fn(Capacity) -> (Tracked<D>, usize)>;

/// Runs of a case that failed while frames were disturbed.
const ATTEMPTS: u32 = 3;

/// Runs every case on `dev`, clearing after each (the ENOSPC cases on
/// `small` devices), then measures and clears again. A case that fails
/// while frames were disturbed on the way ([`Device::disturbed_frames`])
/// is run again (up to [`ATTEMPTS`] runs), each failure noted. Returns the report,
/// the rates, what would not go and the notes.
pub fn run_suite<D: Device>(
    dev: &Tracked<D>,
    small: Small<'_, D>,
    sizes: Sizes,
) -> (Report, Result<Rates, String>, Vec<String>, Vec<String>) {
    let cases = conformance::cases::<Tracked<D>>();
    let mut left = Vec::new();
    let mut notes = Vec::new();
    let report = conformance::run(&cases, |case| {
        if let (Some(c), Some(small)) = (case.capacity(), small) {
            let (dev, n) = small(c);
            return conformance::check(&dev, case, Some(n));
        }
        let mut once = || {
            let before = dev.disturbed_frames();
            let outcome = conformance::check(dev, case, None);
            // The model held to the device's own dump while the case's
            // objects are still there.
            let differ = dev.model_differences();
            let outcome = match outcome {
                Outcome::Pass if !differ.is_empty() => Outcome::Fail(format!(
                    "the device's own dump differs from the model: {}",
                    differ.join("; ")
                )),
                o => o,
            };
            let stuck = dev.clear();
            let failed_to_clear = !stuck.is_empty();
            left.extend(
                stuck
                    .into_iter()
                    .map(|s| format!("after {}: {s}", case.name)),
            );
            let disturbed = dev.disturbed_frames() - before;
            match outcome {
                Outcome::Pass if failed_to_clear => (
                    Outcome::Fail("objects it made could not be destroyed".to_owned()),
                    0,
                ),
                o => (o, disturbed),
            }
        };
        let mut attempt = 1;
        loop {
            match once() {
                (Outcome::Fail(why), disturbed) if disturbed > 0 && attempt < ATTEMPTS => {
                    notes.push(format!(
                        "{}: run again: attempt {attempt} failed while {disturbed} frames were lost or late on the way ({})",
                        case.name,
                        why.lines().next().unwrap_or_default()
                    ));
                    attempt += 1;
                }
                (o, _) => break o,
            }
        }
    });
    let rates =
        conformance::measure(dev, sizes.rules, sizes.counters_log).map_err(|e| e.to_string());
    left.extend(dev.clear());
    (report, rates, left, notes)
}

/// The suite on the sim, as the reference the device is held to.
pub fn check_sim(sizes: Sizes) -> CheckResult {
    let dev = Tracked::new(SimBackend::default());
    let small = |c| {
        let (sim, n) = conformance::small_sim(c);
        (Tracked::new(sim), n)
    };
    let (report, rates, left, _) = run_suite(&dev, Some(&small), sizes);
    CheckResult {
        target: "the sim (the reference every device is held to)".to_owned(),
        report,
        rates,
        divergences: Vec::new(),
        notes: Vec::new(),
        left,
    }
}

/// The suite on a backend with a model, through `ports` (the first is
/// the ingress); `divergences` reads the backend's recorded differences.
pub fn check_wire<B: Modelled>(
    target: String,
    backend: B,
    ports: Vec<WirePort>,
    timing: Timing,
    sizes: Sizes,
    divergences: impl Fn(&B) -> Vec<String>,
) -> anyhow::Result<CheckResult> {
    let wire = WireDevice::new(backend, ports, timing)?;
    let dev = Tracked::new(wire);
    let (report, rates, mut left, mut notes) = run_suite(&dev, None, sizes);
    let wire = dev.inner();
    let dump = wire
        .backend()
        .dump()
        .map_err(|e| anyhow::anyhow!("dump: {e}"))?;
    if !dump.rules.is_empty() || !dump.tables.is_empty() || !dump.domains.is_empty() {
        left.push(format!(
            "the device still holds {} domains, {} tables, {} rules",
            dump.domains.len(),
            dump.tables.len(),
            dump.rules.len()
        ));
    }
    Ok(CheckResult {
        target,
        report,
        rates,
        divergences: divergences(wire.backend()),
        notes: {
            notes.extend(wire.take_notes());
            notes
        },
        left,
    })
}

/// `eswitchd hw-check` on a ConnectX: `reps` are representors whose VFs
/// have netdevs on this host (at least two: the first is the ingress).
/// With `verbs`, misses are received on the slow-path queue, so the
/// restore cases run (without it they are skipped: the representor
/// netdevs carry no restore tag).
pub fn check_mlx5(
    device: Option<&str>,
    reps: &[String],
    sizes: Sizes,
    verbs: bool,
) -> anyhow::Result<CheckResult> {
    // No RDMA device at all is the first thing to say.
    mlx5::device::device_names().context("hw-check")?;
    if reps.len() < 2 {
        anyhow::bail!(
            "hw-check needs at least two representors whose VFs have netdevs on this host \
             (the first sends, the others receive); name them with --ports REP,REP,…"
        );
    }
    let sysfs = mlx5::discover::sysfs_root();
    let mut ports = Vec::new();
    for rep in reps {
        let vf = mlx5::discover::vf_netdev(&sysfs, rep)?;
        let name =
            std::fs::read_to_string(sysfs.join("class/net").join(rep).join("phys_port_name"))?;
        let index = mlx5::discover::vf_index(name.trim())
            .ok_or_else(|| anyhow::anyhow!("{rep}: phys_port_name {name:?} names no VF"))?;
        let vport =
            Vport::vf(index).ok_or_else(|| anyhow::anyhow!("{rep}: VF {index} has no vport"))?;
        ports.push(WirePort {
            vport,
            vf,
            rep: rep.clone(),
        });
    }
    let named: Vec<(String, Vport)> = ports.iter().map(|p| (p.rep.clone(), p.vport)).collect();
    let mut backend = super::open(device, &named)?;
    backend.set_cross_check(true);
    if verbs {
        backend
            .open_slow_path(1, mlx5::SLOW_PATH_DEPTH)
            .context("hw-check --slow-path verbs")?;
    }
    let target = format!(
        "{} through {}",
        device.unwrap_or("the representors' device"),
        ports
            .iter()
            .map(|p| format!("{} (vport {}, VF netdev {})", p.rep, p.vport.0, p.vf))
            .collect::<Vec<_>>()
            .join(", ")
    );
    check_wire(target, backend, ports, Timing::default(), sizes, |b| {
        b.take_divergences().iter().map(|d| d.to_string()).collect()
    })
}

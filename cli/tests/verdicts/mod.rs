//! What the differential tests share: their data files
//! (`tests/ofctl_diff/`), the allow-list they read, and the verdict on
//! each case (the same, allowed with its reason, a mismatch, or an
//! allow-list entry that no longer differs), reported as figures and
//! asserted.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A file of `tests/ofctl_diff/`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ofctl_diff")
        .join(name)
}

/// Its lines, trimmed, without blanks and `#` comments.
pub fn read_lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(data(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The verdicts of one run against the allow-list (`allow.txt`: the
/// case, ` | `, why), its entries that start with `prefix` (the prefix
/// taken off).
pub struct Verdicts {
    allow: BTreeMap<String, String>,
    cases: usize,
    allowed: usize,
    mismatches: Vec<String>,
    stale: Vec<String>,
}

impl Verdicts {
    pub fn new(prefix: &str) -> Verdicts {
        let allow = read_lines("allow.txt")
            .into_iter()
            .filter_map(|l| {
                let (case, why) = l.strip_prefix(prefix)?.split_once(" | ")?;
                Some((case.trim().to_string(), why.trim().to_string()))
            })
            .collect();
        Verdicts {
            allow,
            cases: 0,
            allowed: 0,
            mismatches: Vec::new(),
            stale: Vec::new(),
        }
    }

    /// The verdicts of a run of the corpus in one version: the entries
    /// without a prefix (what differs in every version) and those with
    /// `prefix` (`of13 `, `of15 `).
    pub fn layered(prefix: &str) -> Verdicts {
        let mut v = Verdicts::new(prefix);
        let base = Verdicts::new("");
        for (case, why) in base.allow {
            let prefixed = ["frames ", "of13 ", "of15 "]
                .iter()
                .any(|p| case.starts_with(p));
            if !prefixed {
                v.allow.entry(case).or_insert(why);
            }
        }
        v
    }

    /// Judges `case` by eswitchd's outcome and Open vSwitch's.
    pub fn judge(&mut self, case: &str, ours: &str, theirs: &str) {
        self.cases += 1;
        match (ours == theirs, self.allow.get(case)) {
            (true, None) => {}
            (true, Some(_)) => self.stale.push(case.to_string()),
            (false, Some(why)) => {
                self.allowed += 1;
                eprintln!("allowed: {case}: {why}");
            }
            (false, None) => {
                eprintln!("MISMATCH {case}\n--- eswitchd\n{ours}\n--- Open vSwitch\n{theirs}\n");
                self.mismatches.push(case.to_string());
            }
        }
    }

    /// Prints `bench: openflow.<name>_cases`, `_allowed` and
    /// `_mismatches`; fails on a mismatch or a stale allow-list entry.
    pub fn report(self, name: &str) {
        for case in &self.stale {
            eprintln!("on the allow-list but the same now (remove it): {case}");
        }
        println!("bench: openflow.{name}_cases {}", self.cases);
        println!("bench: openflow.{name}_allowed {}", self.allowed);
        println!(
            "bench: openflow.{name}_mismatches {}",
            self.mismatches.len()
        );
        assert!(
            self.mismatches.is_empty(),
            "{} of {} cases differ from Open vSwitch and are not on the allow-list: {:#?}",
            self.mismatches.len(),
            self.cases,
            self.mismatches
        );
        assert!(
            self.stale.is_empty(),
            "allow-list entries that no longer differ: {:#?}",
            self.stale
        );
    }
}

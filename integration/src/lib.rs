//! Scenarios with real parts (network namespaces, veth pairs, OpenFlow
//! clients, captures). Helpers shared by the scenario tests live here.
//!
//! Privileged scenarios call [`require_root`] and return early, printing the
//! reason, when the privilege is missing: they never pass silently.

pub mod netns;
pub mod ovs;

/// True when the process can create network namespaces (runs as root).
/// Prints why a test is skipped otherwise.
pub fn require_root(test: &str) -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .unwrap_or_default();
    if uid == "0" {
        true
    } else {
        println!("SKIP {test}: needs root to create network namespaces (uid {uid})");
        false
    }
}

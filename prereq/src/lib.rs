//! Prerequisites of tests, and the one way a test says it did not run.
//!
//! Some tests need what a machine may lack: root (network namespaces, veth
//! pairs, BPF, AF_XDP), a tool (`ip`, `ethtool`, `tcpdump`, `tshark`,
//! Open vSwitch) or a kernel feature. Such a test asks here first; when the
//! prerequisite is missing it calls [`skip`] and returns. It never panics for
//! a missing prerequisite and never passes silently:
//!
//! - [`skip`] writes `SKIP <test>: <reason>` straight to the process's
//!   standard error, past the test harness's output capture, so the line
//!   shows in every `cargo test` run, passing or not;
//! - when [`LOG_ENV`] names a file, it appends `<test>\t<reason>` to it
//!   (one `write` per line, in append mode, so concurrent test threads and
//!   test binaries do not interleave): `integration/scripts/test.sh` counts
//!   the skipped tests from it at the end of the run;
//! - when [`STRICT_ENV`] is set (CI sets it), a skip is a failure: [`skip`]
//!   panics with the same line, so a machine that should run everything
//!   cannot pass by skipping.
//!
//! - hardware no CI machine has (a ConnectX) is different: [`no_hardware`]
//!   says `NOT RUN <test>: <reason>` and logs `<test>\t<reason>\thardware`;
//!   it is never a failure, and `test.sh` lists those tests apart, with
//!   the command that runs them on a machine that has the hardware.
//!
//! Thread-safe: nothing here holds state.
#![forbid(unsafe_code)]

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Set (to anything but `0` or empty) to turn every skip into a failure.
pub const STRICT_ENV: &str = "ESWITCH_NO_SKIP";

/// A file to which every skip appends `<test>\t<reason>\n`.
pub const LOG_ENV: &str = "ESWITCH_SKIP_LOG";

/// Directories searched after `PATH`: a test runner's `PATH` often lacks the
/// sbin directories where `ip`, `ethtool` and the OVS daemons live.
const EXTRA_BIN_DIRS: [&str; 6] = [
    "/usr/sbin",
    "/sbin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/local/bin",
];

/// The programs the tests run and their Debian packages, one
/// `<program> <package>` per line (`#` starts a comment); the same file
/// tells `integration/scripts/test.sh` what to install.
const PACKAGES: &str = include_str!("../packages.txt");

/// True when [`STRICT_ENV`] asks that skips fail.
pub fn strict() -> bool {
    std::env::var_os(STRICT_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Reports that `test` did not run because of `reason`; the caller returns
/// right after. Panics instead when [`strict`] is on.
///
/// # Panics
/// When [`STRICT_ENV`] is set: a skip is then a failure.
pub fn skip(test: &str, reason: impl Display) {
    let line = format!("SKIP {test}: {reason}");
    log(&format!("{test}\t{reason}\n"));
    if strict() {
        panic!("{line} ({STRICT_ENV} is set: a missing prerequisite fails the test)");
    }
    // `std::io::stderr()` is not captured by the test harness (only the
    // print macros are), so the line shows even when the test passes.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Reports that `test` did not run because this machine lacks hardware
/// that no CI machine has (`reason` says which, and how to run the test
/// where it is). Unlike [`skip`], never a failure, even when [`strict`].
pub fn no_hardware(test: &str, reason: impl Display) {
    log(&format!("{test}\t{reason}\thardware\n"));
    let _ = writeln!(std::io::stderr(), "NOT RUN {test}: {reason}");
}

/// Appends `entry` to the skip log, when there is one.
fn log(entry: &str) {
    if let Some(path) = std::env::var_os(LOG_ENV).filter(|p| !p.is_empty()) {
        let logged = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(entry.as_bytes()));
        if let Err(e) = logged {
            // Not fatal: the line on stderr still shows it.
            let _ = writeln!(
                std::io::stderr(),
                "prereq: cannot append to {}: {e}",
                Path::new(&path).display()
            );
        }
    }
}

/// The effective user id, from `/proc/self/status` (`Uid:` real, effective,
/// saved, filesystem); `None` when it cannot be read.
pub fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// True when the process runs as root.
pub fn is_root() -> bool {
    euid() == Some(0)
}

/// True when running as root; otherwise skips `test`, saying what root is
/// needed `for` (e.g. "network namespaces and veth pairs").
pub fn root(test: &str, needed_for: &str) -> bool {
    if is_root() {
        return true;
    }
    let uid = euid().map_or_else(|| "unknown".to_string(), |u| u.to_string());
    skip(
        test,
        format_args!("needs root for {needed_for} (uid {uid})"),
    );
    false
}

/// Where `tool` is: the first executable file of that name on `PATH`, then
/// in the usual bin and sbin directories.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(EXTRA_BIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The Debian package that provides `tool`, when it is one the tests use.
pub fn package_of(tool: &str) -> Option<&'static str> {
    PACKAGES
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [t, pkg] if t == tool => Some(pkg),
            _ => None,
        })
}

/// The path of `tool`, or `None` after skipping `test` with a reason that
/// names the package to install.
pub fn tool(test: &str, tool: &str) -> Option<PathBuf> {
    let found = find_tool(tool);
    if found.is_none() {
        match package_of(tool) {
            Some(pkg) => skip(
                test,
                format_args!("{tool} is not installed (Debian package {pkg})"),
            ),
            None => skip(test, format_args!("{tool} is not installed")),
        }
    }
    found
}

/// True when every one of `tools` is installed; skips `test` at the first
/// missing one.
pub fn tools(test: &str, tools: &[&str]) -> bool {
    tools.iter().all(|t| tool(test, t).is_some())
}

/// Root and tools together, the usual gate of a network-namespace scenario:
/// true when the test can run, else it has been skipped.
pub fn netns(test: &str, tools: &[&str]) -> bool {
    root(test, "network namespaces and veth pairs") && self::tools(test, tools)
}

/// Whether an errno from probing a kernel feature means the kernel lacks it
/// (not built in, not allowed, unknown address family or call), as opposed
/// to a bug in the caller that must fail the test.
pub fn errno_means_missing_feature(errno: i32) -> bool {
    // ENOSYS 38, EAFNOSUPPORT 97, EPROTONOSUPPORT 93, EOPNOTSUPP 95,
    // ENOPROTOOPT 92: numbers of Linux on every architecture the project
    // builds for (std exposes no names for them without libc).
    matches!(errno, 38 | 97 | 93 | 95 | 92)
}

/// Gate on a kernel feature: true when `probe` succeeded; false, after
/// skipping `test`, when it failed with an errno that means the kernel lacks
/// `feature` (see [`errno_means_missing_feature`]).
///
/// # Panics
/// On any other probe error: a feature that is there but fails is a bug the
/// test must report, not a reason to skip.
pub fn kernel_feature<E: Display>(
    test: &str,
    feature: &str,
    probe: Result<(), (Option<i32>, E)>,
) -> bool {
    match probe {
        Ok(()) => true,
        Err((Some(errno), e)) if errno_means_missing_feature(errno) => {
            skip(test, format_args!("the kernel has no {feature}: {e}"));
            false
        }
        Err((_, e)) => panic!("{test}: probing {feature} failed: {e}"),
    }
}

#[cfg(test)]
mod tests;

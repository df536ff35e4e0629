//! What a skip does, seen from outside. Each test runs itself again as a
//! subprocess (`--exact <its name>`, with `PREREQ_CHILD` set and the
//! parent's own `ESWITCH_*` variables removed): the child does the skip
//! under the harness's output capture, the parent reads what it printed,
//! logged and returned. No test is ignored: a test that is not the child
//! is the parent.

use std::path::PathBuf;
use std::process::{Command, Output};

const REASON: &str = "the reason 7f3a";

/// In the child, runs `f` and returns true (the test then returns); in
/// the parent, returns false.
fn as_child(f: impl FnOnce()) -> bool {
    if std::env::var_os("PREREQ_CHILD").is_some() {
        f();
        true
    } else {
        false
    }
}

struct Child {
    out: Output,
    log: String,
}

/// Runs test `name` of this binary as the child, strict or not.
fn run_child(name: &str, strict: Option<&str>) -> Child {
    let log: PathBuf =
        std::env::temp_dir().join(format!("eswitch-prereq-{}-{name}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", name, "--test-threads=1"])
        .env_remove(prereq::STRICT_ENV)
        .env(prereq::LOG_ENV, &log)
        .env("PREREQ_CHILD", "1");
    if let Some(v) = strict {
        cmd.env(prereq::STRICT_ENV, v);
    }
    let out = cmd.output().expect("run the child test");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    Child { out, log: logged }
}

fn stderr(c: &Child) -> String {
    String::from_utf8_lossy(&c.out.stderr).into_owned()
}

#[test]
fn a_skip_is_printed_past_the_capture_and_logged() {
    let name = "a_skip_is_printed_past_the_capture_and_logged";
    if as_child(|| prereq::skip("prereq_child", REASON)) {
        return;
    }
    let c = run_child(name, None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    // The harness captured stdout (no --nocapture), yet the line shows.
    assert!(
        stderr(&c).contains(&format!("SKIP prereq_child: {REASON}\n")),
        "stderr: {}",
        stderr(&c)
    );
    assert_eq!(c.log, format!("prereq_child\t{REASON}\n"));
}

#[test]
fn strict_mode_turns_a_skip_into_a_failure() {
    let name = "strict_mode_turns_a_skip_into_a_failure";
    if as_child(|| prereq::skip("prereq_child", REASON)) {
        return;
    }
    let c = run_child(name, Some("1"));
    assert!(!c.out.status.success(), "a strict skip must fail");
    let all = format!("{}{}", String::from_utf8_lossy(&c.out.stdout), stderr(&c));
    assert!(
        all.contains(&format!("SKIP prereq_child: {REASON}")),
        "{all}"
    );
    assert!(all.contains("ESWITCH_NO_SKIP is set"), "{all}");
    // Still logged, so the count at the end includes it.
    assert_eq!(c.log, format!("prereq_child\t{REASON}\n"));
    // "0" and empty mean off.
    for v in ["0", ""] {
        let c = run_child(name, Some(v));
        assert!(
            c.out.status.success(),
            "ESWITCH_NO_SKIP={v:?}: {}",
            stderr(&c)
        );
    }
}

#[test]
fn a_missing_tool_is_a_skip_that_names_it() {
    let name = "a_missing_tool_is_a_skip_that_names_it";
    if as_child(|| assert!(prereq::tool("prereq_child", "eswitch-no-such-tool").is_none())) {
        return;
    }
    let c = run_child(name, None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    assert!(
        stderr(&c).contains("SKIP prereq_child: eswitch-no-such-tool is not installed"),
        "{}",
        stderr(&c)
    );
    let c = run_child(name, Some("1"));
    assert!(!c.out.status.success(), "strict: a missing tool fails");
}

#[test]
fn a_missing_known_tool_names_its_package() {
    let name = "a_missing_known_tool_names_its_package";
    if as_child(|| {
        let found = prereq::tool("prereq_child", "ovs-vswitchd");
        assert_eq!(found, prereq::find_tool("ovs-vswitchd"));
    }) {
        return;
    }
    let c = run_child(name, None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    if prereq::find_tool("ovs-vswitchd").is_none() {
        assert!(
            stderr(&c)
                .contains("ovs-vswitchd is not installed (Debian package openvswitch-switch)"),
            "{}",
            stderr(&c)
        );
    } else {
        assert!(!stderr(&c).contains("SKIP"), "{}", stderr(&c));
        assert!(c.log.is_empty(), "an installed tool is no skip: {}", c.log);
    }
}

#[test]
fn a_kernel_without_the_feature_is_a_skip() {
    let name = "a_kernel_without_the_feature_is_a_skip";
    if as_child(|| {
        let probe = Err((Some(97), "socket(AF_TEST): EAFNOSUPPORT"));
        assert!(!prereq::kernel_feature(
            "prereq_child",
            "AF_TEST sockets",
            probe
        ));
    }) {
        return;
    }
    let c = run_child(name, None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    assert!(
        stderr(&c).contains(
            "SKIP prereq_child: the kernel has no AF_TEST sockets: socket(AF_TEST): EAFNOSUPPORT"
        ),
        "{}",
        stderr(&c)
    );
}

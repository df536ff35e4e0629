//! What a skip does, seen from outside: this binary runs its own ignored
//! `child` test as a subprocess with the environment under test (the
//! parent's own `ESWITCH_*` variables removed), and reads what it printed,
//! logged and returned.

use std::path::PathBuf;
use std::process::{Command, Output};

const REASON: &str = "the reason 7f3a";

/// Run only as a child of the tests below (`PREREQ_CHILD` says what to do).
#[test]
#[ignore = "run as a subprocess by the other tests of this file"]
fn child() {
    match std::env::var("PREREQ_CHILD").as_deref() {
        Ok("skip") => prereq::skip("prereq_child", REASON),
        Ok("tool") => {
            assert!(prereq::tool("prereq_child", "eswitch-no-such-tool").is_none());
        }
        Ok("tool-with-package") => {
            let found = prereq::tool("prereq_child", "ovs-vswitchd");
            assert_eq!(found, prereq::find_tool("ovs-vswitchd"));
        }
        Ok("kernel") => {
            let probe = Err((Some(97), "socket(AF_TEST): EAFNOSUPPORT"));
            assert!(!prereq::kernel_feature(
                "prereq_child",
                "AF_TEST sockets",
                probe
            ));
        }
        other => panic!("PREREQ_CHILD={other:?}: not a child mode"),
    }
}

struct Child {
    out: Output,
    log: String,
}

fn run_child(mode: &str, strict: Option<&str>) -> Child {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log: PathBuf =
        std::env::temp_dir().join(format!("eswitch-prereq-{}-{n}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--ignored", "--exact", "child", "--test-threads=1"])
        .env_remove(prereq::STRICT_ENV)
        .env(prereq::LOG_ENV, &log)
        .env("PREREQ_CHILD", mode);
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
    let c = run_child("skip", None);
    assert!(c.out.status.success(), "{c:?}", c = stderr(&c));
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
    let c = run_child("skip", Some("1"));
    assert!(!c.out.status.success(), "a strict skip must fail");
    let all = format!("{}{}", String::from_utf8_lossy(&c.out.stdout), stderr(&c));
    assert!(
        all.contains(&format!("SKIP prereq_child: {REASON}")),
        "{all}"
    );
    assert!(all.contains("ESWITCH_NO_SKIP is set"), "{all}");
    // Still logged, so the count at the end includes it.
    assert_eq!(c.log, format!("prereq_child\t{REASON}\n"));
}

#[test]
fn strict_zero_or_empty_is_off() {
    for v in ["0", ""] {
        let c = run_child("skip", Some(v));
        assert!(
            c.out.status.success(),
            "ESWITCH_NO_SKIP={v:?}: {}",
            stderr(&c)
        );
    }
}

#[test]
fn a_missing_tool_is_a_skip_that_names_it() {
    let c = run_child("tool", None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    assert!(
        stderr(&c).contains("SKIP prereq_child: eswitch-no-such-tool is not installed"),
        "{}",
        stderr(&c)
    );
    let c = run_child("tool", Some("1"));
    assert!(!c.out.status.success(), "strict: a missing tool fails");
}

#[test]
fn a_missing_known_tool_names_its_package() {
    let c = run_child("tool-with-package", None);
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
    let c = run_child("kernel", None);
    assert!(c.out.status.success(), "{}", stderr(&c));
    assert!(
        stderr(&c).contains(
            "SKIP prereq_child: the kernel has no AF_TEST sockets: socket(AF_TEST): EAFNOSUPPORT"
        ),
        "{}",
        stderr(&c)
    );
}

//! esw-pktgen's command line: what it refuses, and how it says so. (Being
//! an integration test of this package, it also makes `cargo test
//! --workspace` build the binary, which the flood test runs.)

use std::process::Command;

fn pktgen(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_esw-pktgen"))
        .args(args)
        .output()
        .expect("run esw-pktgen");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_arguments_are_refused_by_name() {
    let cases: [(&[&str], &str); 5] = [
        (&["--iface", "x", "--size", "59"], "60 to 9014"),
        (&["--iface", "x", "--flows", "0"], "1 to 1000000 flows"),
        (&["--iface", "x", "--seconds", "61"], "0 < seconds <= 60"),
        (
            &["--iface", "x", "--dst-mac", "02:00:00"],
            "'02:00:00' is not a MAC address",
        ),
        (&["--size", "64"], "--iface"),
    ];
    for (args, want) in cases {
        let (ok, err) = pktgen(args);
        assert!(!ok, "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_interface_is_an_error_not_a_panic() {
    let (ok, err) = pktgen(&["--iface", "esw-no-such-if0", "--seconds", "0.1"]);
    assert!(!ok);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("esw-no-such-if0"), "{err}");
}

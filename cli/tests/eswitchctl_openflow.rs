//! `eswitchctl set-controller`, `get-controller`, `del-controller`,
//! `set-fail-mode` and `get-fail-mode` against a running eswitchd, as
//! `ovs-vsctl`'s are used against Open vSwitch (root: `eswitchd run`).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use integration::eswitchd::Eswitchd;

const T: &str = "eswitchctl_changes_controllers_and_the_fail_mode_of_a_running_switch";

fn ctl(sock: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eswitchctl"))
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .expect("run eswitchctl")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "eswitchctl failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn eswitchctl_changes_controllers_and_the_fail_mode_of_a_running_switch() {
    if !prereq::is_root() {
        prereq::skip(T, "needs root (eswitchd run)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("esw-ctl-of-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("test directory");
    let d = Eswitchd::start(Path::new(env!("CARGO_BIN_EXE_eswitchd")), &dir, 2, None)
        .unwrap_or_else(|e| panic!("{T}: {e}"));
    let sock = d.control_socket();
    assert_eq!(ok(&ctl(sock, &["get-controller"])), "");
    assert_eq!(ok(&ctl(sock, &["get-fail-mode"])), "standalone\n");
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let target = format!("tcp:{}", l.local_addr().expect("addr"));
    assert_eq!(ok(&ctl(sock, &["set-controller", &target])), "");
    assert_eq!(ok(&ctl(sock, &["get-controller"])), format!("{target}\n"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while l.accept().is_err() {
        assert!(
            Instant::now() < deadline,
            "the switch never dialled {target}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let bad = ctl(sock, &["set-controller", "198.18.0.1:6653"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("expected tcp:IP:PORT or ssl:IP:PORT"), "{err}");
    assert_eq!(ok(&ctl(sock, &["get-controller"])), format!("{target}\n"));
    assert_eq!(ok(&ctl(sock, &["del-controller"])), "");
    assert_eq!(ok(&ctl(sock, &["get-controller"])), "");
    assert_eq!(ok(&ctl(sock, &["set-fail-mode", "secure"])), "");
    assert_eq!(ok(&ctl(sock, &["get-fail-mode"])), "secure\n");
    let bad = ctl(sock, &["set-fail-mode", "open"]);
    assert_eq!(bad.status.code(), Some(1));
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}

use super::*;

#[test]
fn default_config_is_valid() {
    assert_eq!(XskConfig::default().validate(), Ok(()));
}

#[test]
fn bad_configs_say_why() {
    let bad = |f: fn(&mut XskConfig)| {
        let mut c = XskConfig::default();
        f(&mut c);
        c.validate().expect_err("should be rejected")
    };
    assert!(bad(|c| c.frame_size = 1000).contains("frame_size 1000"));
    assert!(bad(|c| c.ring_size = 1000).contains("ring_size 1000"));
    assert!(bad(|c| c.frame_count = 8192).contains("frame_count 8192"));
    assert!(bad(|c| c.frame_count = 1).contains("frame_count 1"));
    assert!(bad(|c| c.bind = BindMode::ZeroCopy).contains("native"));
    let c = XskConfig {
        bind: BindMode::ZeroCopy,
        mode: XdpMode::Native,
        ..XskConfig::default()
    };
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn errors_name_interface_and_step() {
    let e = XskError::os(
        "vm1",
        "bind(queue 0)",
        io::Error::from_raw_os_error(libc::EBUSY),
    );
    let s = e.to_string();
    assert!(s.starts_with("vm1: bind(queue 0): "), "{s}");
    assert!(
        s.contains("another AF_XDP socket is bound to this queue"),
        "{s}"
    );
    assert_eq!(e.ifname(), "vm1");
    assert_eq!(e.errno(), Some(libc::EBUSY));

    let e = XskError::ProgLoad {
        ifname: "vm1".into(),
        source: io::Error::from_raw_os_error(libc::EACCES),
        log: "R0 !read_ok".into(),
    };
    let s = e.to_string();
    assert!(s.starts_with("vm1: BPF_PROG_LOAD: "), "{s}");
    assert!(s.ends_with("(verifier: R0 !read_ok)"), "{s}");

    let e = XskError::os(
        "vm2",
        "socket(AF_XDP)",
        io::Error::from_raw_os_error(libc::EAFNOSUPPORT),
    );
    assert!(e.to_string().contains("CONFIG_XDP_SOCKETS"));
}

#[test]
fn available_reports_missing_interface() {
    match available("xk-no-such-if") {
        Err(XskError::NoSuchInterface { ifname }) => assert_eq!(ifname, "xk-no-such-if"),
        other => panic!("expected NoSuchInterface, got {other:?}"),
    }
}

#[test]
fn open_reports_missing_interface_and_bad_config() {
    match XskPort::open("xk-no-such-if", XskConfig::default()) {
        Err(XskError::NoSuchInterface { .. }) => {}
        other => panic!("expected NoSuchInterface, got {other:?}"),
    }
    let cfg = XskConfig {
        frame_size: 3000,
        ..XskConfig::default()
    };
    match XskPort::open("lo", cfg) {
        Err(XskError::BadConfig { ifname, reason }) => {
            assert_eq!(ifname, "lo");
            assert!(reason.contains("frame_size"));
        }
        other => panic!("expected BadConfig, got {other:?}"),
    }
}

/// As root the probe passes on `lo`; without privileges it fails with a
/// permission error that says what is missing.
#[test]
fn available_on_loopback() {
    let root = prereq::is_root();
    match available("lo") {
        Ok(()) => assert!(root, "probe passed without root"),
        Err(e) if root && e.errno().is_some_and(prereq::errno_means_missing_feature) => {
            prereq::skip(
                "available_on_loopback",
                format_args!("the kernel has no AF_XDP: {e}"),
            );
        }
        Err(e) => {
            assert!(!root, "probe failed as root: {e}");
            assert_eq!(e.ifname(), "lo");
            assert!(
                matches!(e.errno(), Some(libc::EPERM) | Some(libc::EACCES)),
                "{e}"
            );
            assert!(e.to_string().contains("needs CAP_"), "{e}");
        }
    }
}

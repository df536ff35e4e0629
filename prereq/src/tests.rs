use super::*;

#[test]
fn tools_are_found_on_path_and_in_sbin() {
    let sh = find_tool("sh").expect("every Debian machine has sh");
    assert!(sh.ends_with("sh") && sh.is_absolute(), "{}", sh.display());
    assert_eq!(find_tool("eswitch-no-such-tool"), None);
    // A directory of that name is not a tool.
    assert_eq!(find_tool("."), None);
}

#[test]
fn packages_are_named_for_the_tools_the_tests_use() {
    assert_eq!(package_of("ethtool"), Some("ethtool"));
    assert_eq!(package_of("ovs-vswitchd"), Some("openvswitch-switch"));
    assert_eq!(package_of("ping"), Some("iputils-ping"));
    assert_eq!(package_of("sh"), None);
    // Every line of the table is a program and a package.
    for l in PACKAGES.lines().filter(|l| !l.starts_with('#')) {
        assert_eq!(l.split_whitespace().count(), 2, "bad line {l:?}");
    }
}

#[test]
fn only_missing_feature_errnos_skip() {
    for errno in [38, 97, 93, 95, 92] {
        assert!(errno_means_missing_feature(errno), "{errno}");
    }
    // EPERM, EINVAL, EBUSY are bugs or state, not absence.
    for errno in [1, 22, 16] {
        assert!(!errno_means_missing_feature(errno), "{errno}");
    }
    assert!(kernel_feature::<String>("t", "x", Ok(())));
    // Errors that do not mean "absent" fail the test (they never skip).
    for (errno, what) in [(Some(22), "EINVAL"), (None, "no errno")] {
        let r = std::panic::catch_unwind(|| {
            kernel_feature("t", "feature x", Err((errno, what.to_string())))
        });
        let msg = r.expect_err("must panic");
        let msg = msg.downcast_ref::<String>().expect("formatted message");
        assert_eq!(msg, &format!("t: probing feature x failed: {what}"));
    }
}

#[test]
fn euid_agrees_with_id() {
    let Ok(out) = std::process::Command::new("id").arg("-u").output() else {
        panic!("id(1) is part of coreutils");
    };
    let id: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("id -u prints a number");
    assert_eq!(euid(), Some(id));
    assert_eq!(is_root(), id == 0);
}

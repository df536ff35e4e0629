//! Loading programs for real (needs root: prints SKIP otherwise).

use super::*;
use crate::asm::{exit, mov64_imm, Reg, XDP_PASS};

/// Root and a kernel with BPF and XSKMAPs; otherwise `test` is skipped.
fn can_load(test: &str) -> bool {
    prereq::root(test, "BPF_PROG_LOAD")
        && prereq::kernel_feature(
            test,
            "BPF XSKMAP",
            create_xskmap(1)
                .map(drop)
                .map_err(|e| (e.raw_os_error(), e)),
        )
}

#[test]
fn redirect_program_passes_the_verifier() {
    if !can_load("redirect_program_passes_the_verifier") {
        return;
    }
    let map = create_xskmap(4).expect("BPF_MAP_CREATE");
    let prog = load_redirect(&map);
    assert!(prog.is_ok(), "verifier rejected: {:?}", prog.err());
}

#[test]
fn verifier_log_is_captured() {
    if !can_load("verifier_log_is_captured") {
        return;
    }
    // `exit` without setting r0: the verifier refuses to read r0.
    let e = load_xdp(&[exit()]).expect_err("uninitialised r0 must be rejected");
    assert_eq!(e.source.raw_os_error(), Some(libc::EACCES), "{e:?}");
    assert!(e.log.contains("R0 !read_ok"), "log: {}", e.log);
    // And a trivial valid program loads.
    assert!(load_xdp(&[mov64_imm(Reg::R0, XDP_PASS), exit()]).is_ok());
}

/// The rtnetlink fallback against the real kernel: attach in generic mode,
/// a second attach with UPDATE_IF_NOEXIST is refused (with the kernel's
/// extended-ack message), and the guarded detach of `NetlinkAttachment`
/// removes the program.
#[test]
fn netlink_attach_and_guarded_detach() {
    use crate::netlink::{set_xdp, XdpRequest, XDP_FLAGS_SKB_MODE, XDP_FLAGS_UPDATE_IF_NOEXIST};
    use crate::port::NetlinkAttachment;
    use std::process::Command;

    let test = "netlink_attach_and_guarded_detach";
    if !can_load(test) || !prereq::tools(test, &["ip"]) {
        return;
    }
    struct Veth(String);
    impl Drop for Veth {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["link", "del", &self.0]).output();
        }
    }
    let a = format!("xkl{}a", std::process::id());
    let b = format!("xkl{}b", std::process::id());
    let _ = Command::new("ip").args(["link", "del", &a]).output();
    let st = Command::new("ip")
        .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
        .status()
        .expect("ip");
    assert!(st.success());
    let _guard = Veth(a.clone());
    let shown = || {
        let out = Command::new("ip")
            .args(["-d", "link", "show", "dev", &a])
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout).contains("xdpgeneric")
    };
    let ifindex = crate::sys::ifindex(&a).expect("ifindex");
    let map = create_xskmap(1).expect("map");
    let prog = load_redirect(&map).expect("load");
    let req = XdpRequest {
        ifindex,
        fd: prog.as_raw_fd(),
        flags: XDP_FLAGS_SKB_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST,
        expected_fd: None,
    };
    set_xdp(&req).expect("attach");
    assert!(shown(), "program not shown after the netlink attach");

    let prog2 = load_redirect(&map).expect("load 2");
    let e = set_xdp(&XdpRequest {
        fd: prog2.as_raw_fd(),
        ..req
    })
    .expect_err("second attach with UPDATE_IF_NOEXIST");
    println!("second attach: {e}");
    assert_eq!(e.errno(), Some(libc::EBUSY));
    assert!(e.message.is_some(), "no extended ack: {e}");

    // A guarded detach with the wrong program leaves ours in place.
    drop(NetlinkAttachment {
        ifindex,
        mode_flag: XDP_FLAGS_SKB_MODE,
        prog_fd: prog2.as_raw_fd(),
    });
    assert!(shown(), "a detach expecting another program removed ours");
    drop(NetlinkAttachment {
        ifindex,
        mode_flag: XDP_FLAGS_SKB_MODE,
        prog_fd: prog.as_raw_fd(),
    });
    assert!(!shown(), "program still attached after the guarded detach");
}

//! Loading programs for real (needs root: prints SKIP otherwise).

use super::*;
use crate::asm::{exit, mov64_imm, Reg, XDP_PASS};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn redirect_program_passes_the_verifier() {
    if !is_root() {
        println!("SKIP redirect_program_passes_the_verifier: needs root (BPF_PROG_LOAD)");
        return;
    }
    let map = create_xskmap(4).expect("BPF_MAP_CREATE");
    let prog = load_redirect(&map);
    assert!(prog.is_ok(), "verifier rejected: {:?}", prog.err());
}

#[test]
fn verifier_log_is_captured() {
    if !is_root() {
        println!("SKIP verifier_log_is_captured: needs root (BPF_PROG_LOAD)");
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

    if !is_root() {
        println!("SKIP netlink_attach_and_guarded_detach: needs root (veth, RTM_SETLINK)");
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

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

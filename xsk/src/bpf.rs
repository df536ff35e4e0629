//! The `bpf(2)` objects of a port: the XSKMAP, the redirect program and the
//! BPF link that attaches it to the interface. Each attribute struct below is
//! the `#[repr(C)]` prefix of `union bpf_attr` that its command reads; the
//! kernel zero-extends a shorter attribute, so only the fields used are
//! declared.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::asm::{self, Insn};
use crate::sys;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// enum bpf_attach_type: BPF_XDP.
const BPF_XDP: u32 = 37;
/// BPF_MAP_UPDATE_ELEM flag: create or replace.
const BPF_ANY: u64 = 0;

/// Size of the verifier log buffer (the redirect program's log is a few
/// hundred bytes; a bigger buffer costs nothing but memory).
const LOG_SIZE: usize = 64 * 1024;

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// An object name for the kernel (`bpftool` shows it): at most 15 bytes
/// and a NUL.
fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b;
    }
    out
}

/// Creates an XSKMAP with `entries` slots (keys are queue indexes).
pub(crate) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: obj_name("eswitch_xsks"),
        ..Default::default()
    };
    // SAFETY: the attribute holds no pointers.
    unsafe { sys::bpf_fd(sys::BPF_MAP_CREATE, &mut attr) }
}

/// Puts socket `sock` in the XSKMAP `map` at `key` (the queue id).
pub(crate) fn xskmap_set(map: &OwnedFd, key: u32, sock: &OwnedFd) -> io::Result<()> {
    let value: u32 = sock.as_raw_fd() as u32;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: BPF_ANY,
        ..Default::default()
    };
    // SAFETY: `key` and `value` are live u32s (the map's key and value
    // sizes) for the duration of the call; the kernel only reads them.
    unsafe { sys::bpf(sys::BPF_MAP_UPDATE_ELEM, &mut attr) }?;
    Ok(())
}

/// A failed `BPF_PROG_LOAD`: the errno and the verifier's log.
#[derive(Debug)]
pub(crate) struct LoadError {
    pub source: io::Error,
    pub log: String,
}

/// Loads `prog` as an XDP program; on failure returns the verifier log.
pub(crate) fn load_xdp(prog: &[Insn]) -> Result<OwnedFd, LoadError> {
    let license = b"GPL\0";
    let mut log = vec![0u8; LOG_SIZE];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: obj_name("eswitch_xsk"),
        ..Default::default()
    };
    const _: () = assert!(mem::size_of::<Insn>() == 8);
    // SAFETY: `prog` (insn_cnt 8-byte instructions), the NUL-terminated
    // license and the writable `log` buffer of `log_size` bytes all live
    // until the call returns.
    match unsafe { sys::bpf_fd(sys::BPF_PROG_LOAD, &mut attr) } {
        Ok(fd) => Ok(fd),
        Err(source) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(LoadError {
                source,
                log: text.trim().replace('\n', "; "),
            })
        }
    }
}

/// Loads the redirect program for the XSKMAP `map`.
pub(crate) fn load_redirect(map: &OwnedFd) -> Result<OwnedFd, LoadError> {
    load_xdp(&asm::redirect_program(map.as_raw_fd()))
}

/// Attaches XDP program `prog` to interface `ifindex` with a BPF link
/// (`xdp_flags` picks the mode: XDP_FLAGS_SKB_MODE or XDP_FLAGS_DRV_MODE).
/// The program stays attached while the returned link descriptor is open.
pub(crate) fn link_xdp(prog: &OwnedFd, ifindex: u32, xdp_flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: xdp_flags,
    };
    // SAFETY: the attribute holds no pointers.
    unsafe { sys::bpf_fd(sys::BPF_LINK_CREATE, &mut attr) }
}

#[cfg(test)]
#[path = "tests/bpf.rs"]
mod tests;

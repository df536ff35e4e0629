//! Raw AF_PACKET plumbing: the socket, its options, the mmap'd rings and the
//! batched send calls. Everything `unsafe` in the crate lives here.
//!
//! Design: the rest of the crate only sees safe wrappers.
//!
//! - [`PacketSocket`] owns the file descriptor (an [`OwnedFd`], closed on
//!   drop) and offers typed `setsockopt`/`getsockopt`, `bind`, the zero-length
//!   `send` that kicks a TX ring, and `sendmmsg` over a slice of frames.
//! - [`Mapping`] owns the `mmap` of the rings (unmapped on drop). The kernel
//!   and user space share it under the TPACKET ownership protocol
//!   (Documentation/networking/packet_mmap.rst): a receive *block* or a
//!   transmit *frame* belongs to whoever its status word says. The status
//!   words are therefore only touched with atomic loads (acquire: the
//!   kernel's writes of the contents happen before it hands the block over)
//!   and atomic stores (release: our writes happen before we hand it back).
//!   The contents of a block or frame are only read or written while user
//!   space owns it, which the callers check first.
//!
//! Receive blocks are read through a plain `&[u8]` of the whole block, and
//! frames are parsed from it with bounds-checked safe code (see
//! `crate::ring`), so a corrupt ring can at worst drop packets.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

/// `ETH_P_ALL` in network byte order, as `socket`/`bind` want it.
pub(crate) const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// Most frames handed to one `sendmmsg` call.
pub(crate) const MMSG_CHUNK: usize = 64;

/// The interface index of `name`.
pub(crate) fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Converts a `-1` return into the thread's `errno`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A non-blocking AF_PACKET `SOCK_RAW` socket.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// A new socket with protocol 0: it receives nothing until [`bind`]
    /// names a protocol, so no frames of other interfaces sneak in while the
    /// rings are being set up.
    ///
    /// [`bind`]: PacketSocket::bind
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain syscall, no pointers.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(PacketSocket { fd })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `setsockopt(SOL_PACKET, name, val)`. `T` must be the plain C struct or
    /// integer the option expects.
    pub(crate) fn set_opt<T: Copy>(&self, name: libc::c_int, val: &T) -> io::Result<()> {
        // SAFETY: `val` points to `size_of::<T>()` readable bytes for the
        // duration of the call; the kernel copies them.
        check(unsafe {
            libc::setsockopt(
                self.raw(),
                libc::SOL_PACKET,
                name,
                (val as *const T).cast(),
                mem::size_of::<T>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// `PACKET_STATISTICS` (TPACKET_V3 layout). Reading resets the kernel's
    /// counters, so the caller accumulates them.
    pub(crate) fn stats_v3(&self) -> io::Result<libc::tpacket_stats_v3> {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are valid for writes and `len` holds the
        // size of `st`, so the kernel writes at most that many bytes.
        check(unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        })?;
        Ok(st)
    }

    /// Binds to `ifindex`, receiving `protocol_be` (network byte order; 0 for
    /// a send-only socket).
    pub(crate) fn bind(&self, ifindex: u32, protocol_be: u16) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain integers; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol_be;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
        check(unsafe {
            libc::bind(
                self.raw(),
                (&sll as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// Kicks the TX ring: the kernel sends every frame marked
    /// `TP_STATUS_SEND_REQUEST`, without waiting.
    pub(crate) fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with a null buffer reads no memory.
        let r = unsafe { libc::send(self.raw(), ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// One `sendmmsg` of at most [`MMSG_CHUNK`] frames (the rest of `pkts`
    /// is ignored). Returns how many the kernel took, which may be fewer
    /// than offered; an error means the first frame was not taken.
    pub(crate) fn sendmmsg(&self, pkts: &[&[u8]]) -> io::Result<usize> {
        let n = pkts.len().min(MMSG_CHUNK);
        if n == 0 {
            return Ok(0);
        }
        let mut iov = [libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        }; MMSG_CHUNK];
        // SAFETY: mmsghdr is plain integers and pointers; all-zero (null
        // pointers, zero lengths) is a valid value.
        let mut msgs: [libc::mmsghdr; MMSG_CHUNK] = unsafe { mem::zeroed() };
        for (i, p) in pkts[..n].iter().enumerate() {
            iov[i].iov_base = p.as_ptr() as *mut libc::c_void;
            iov[i].iov_len = p.len();
        }
        for (m, v) in msgs[..n].iter_mut().zip(iov[..n].iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` are initialised headers whose iovecs point into
        // `iov` and through them into `pkts`, all alive for the call; the
        // kernel only reads the frames (and writes `msg_len`).
        let r = unsafe {
            libc::sendmmsg(
                self.raw(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
}

/// A shared `mmap` of a packet socket's rings, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by exactly one `Mapping`; the raw pointer is
// not shared with other threads by this type, so moving it to another thread
// is as safe as moving a `Vec<u8>`.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of the rings of `sock`.
    pub(crate) fn new(sock: &PacketSocket, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping chosen by the kernel; no existing
        // memory is affected.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                sock.raw(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast::<u8>())
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::other("mmap returned NULL"))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The status word at byte `off`, as an atomic.
    ///
    /// Panics (a bug in the caller) if `off` is out of range or unaligned.
    fn status_word(&self, off: usize) -> &AtomicU32 {
        assert!(
            off + 4 <= self.len && off % 4 == 0,
            "bad status offset {off}"
        );
        // SAFETY: in bounds and 4-aligned (checked above; the mapping is
        // page-aligned); the memory lives as long as `self`, and the kernel
        // side of the protocol accesses it with atomic-width stores.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Acquire-load of the status word at `off`.
    pub(crate) fn load_status(&self, off: usize) -> u32 {
        self.status_word(off).load(Ordering::Acquire)
    }

    /// Release-store of the status word at `off` (hands the block or frame
    /// to the kernel, after all our writes to it).
    pub(crate) fn store_status(&self, off: usize, v: u32) {
        self.status_word(off).store(v, Ordering::Release)
    }

    /// The bytes `off..off + len`.
    ///
    /// # Safety
    ///
    /// User space must own that region (its status word says so) for as
    /// long as the slice lives: the kernel must not write it meanwhile, and
    /// the caller must not store to a status word inside it until the slice
    /// is gone.
    pub(crate) unsafe fn region(&self, off: usize, len: usize) -> &[u8] {
        assert!(off <= self.len && len <= self.len - off, "bad region");
        // SAFETY: in bounds (checked); no concurrent writer by the caller's
        // contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Copies `src` to byte `off`.
    ///
    /// # Safety
    ///
    /// User space must own the destination region (a TX frame whose status
    /// is `TP_STATUS_AVAILABLE`), and it must not overlap a status word.
    pub(crate) unsafe fn write(&self, off: usize, src: &[u8]) {
        assert!(
            off <= self.len && src.len() <= self.len - off,
            "bad write region"
        );
        // SAFETY: in bounds (checked); `src` is a Rust slice and cannot
        // overlap the mapping we own; no concurrent access by the contract.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping made by `new` and not yet
        // unmapped; no slices into it outlive `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// True for the errors a full device or socket queue gives.
pub(crate) fn is_queue_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS))
}

/// True for errors about one frame (too long for the MTU, too short for an
/// Ethernet header): drop that frame and go on.
pub(crate) fn is_bad_frame(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMSGSIZE) | Some(libc::EINVAL))
}

//! The syscall layer: every `unsafe` call of the crate that is not ring or
//! UMEM access lives here, behind functions that take and return plain Rust
//! values and `io::Result`s.
//!
//! File descriptors are [`OwnedFd`]s (closed on drop); memory mappings are
//! [`Mmap`]s (unmapped on drop).

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// `bpf(2)` commands (enum bpf_cmd in linux/bpf.h).
pub(crate) const BPF_MAP_CREATE: u32 = 0;
pub(crate) const BPF_MAP_UPDATE_ELEM: u32 = 2;
pub(crate) const BPF_PROG_LOAD: u32 = 5;
pub(crate) const BPF_LINK_CREATE: u32 = 28;

/// Turns a `-1`-on-error return value into an `io::Result`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Takes ownership of a descriptor a syscall just returned.
fn own(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful syscall that creates a
    // descriptor, so it is open and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `if_nametoindex(3)`: `None` when the interface does not exist (or the
/// name cannot be one).
pub(crate) fn ifindex(ifname: &str) -> Option<u32> {
    let c = CString::new(ifname).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// `socket(2)` with `SOCK_CLOEXEC`.
pub(crate) fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    Ok(own(fd))
}

/// `setsockopt(2)` with a value of type `T` (a `#[repr(C)]` struct or an
/// integer).
pub(crate) fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of `size_of::<T>()` bytes, which the
    // kernel only reads.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `getsockopt(2)` into a `T` of plain data (all-zero is a valid value);
/// returns the value and the length the kernel wrote (older kernels write
/// shorter versions of some structs).
pub(crate) fn getsockopt<T: Copy>(fd: RawFd, level: i32, name: i32) -> io::Result<(T, usize)> {
    // SAFETY: `T` is plain data (integers, structs of integers) for which
    // all-zero bytes are a valid value.
    let mut val: T = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a writable `T` of `len` bytes and `len` is a valid
    // socklen_t the kernel updates.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut val as *mut T).cast(), &mut len) })?;
    Ok((val, len as usize))
}

/// `bind(2)` to a socket address of type `A` (a `sockaddr_*` struct).
pub(crate) fn bind<A>(fd: &OwnedFd, addr: &A) -> io::Result<()> {
    // SAFETY: `addr` is a live sockaddr struct of `size_of::<A>()` bytes.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const A).cast(),
            mem::size_of::<A>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`: the AF_XDP TX kick.
pub(crate) fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address, which the
    // kernel does not dereference.
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL)`: the AF_XDP RX wakeup
/// (for a fill ring that asks for one).
pub(crate) fn kick_rx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length receive with null buffer and address, which the
    // kernel does not dereference.
    let r = unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends a whole datagram to the kernel on a netlink socket.
pub(crate) fn netlink_send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr_nl; the fields are set below.
    let mut sa: libc::sockaddr_nl = unsafe { mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` and `sa` are live for the call and the lengths match.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&sa as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if r as usize != msg.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short netlink send",
        ));
    }
    Ok(())
}

/// `recv(2)` into `buf`; returns the length of the datagram received.
pub(crate) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for `buf.len()` bytes.
    let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sets `SO_RCVTIMEO`, so a netlink exchange never hangs.
pub(crate) fn set_recv_timeout(fd: &OwnedFd, secs: i64) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: secs as libc::time_t,
        tv_usec: 0,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)
}

/// Runs one `bpf(2)` command on an attribute struct `A` (a `#[repr(C)]`
/// prefix of `union bpf_attr`); returns the non-negative result (a new fd
/// for the commands that create objects, 0 otherwise).
///
/// # Safety
///
/// Every pointer stored in `attr` (as a u64) must point to memory that is
/// valid for what `cmd` does with it (read or written) for the duration of
/// the call.
pub(crate) unsafe fn bpf<A>(cmd: u32, attr: &mut A) -> io::Result<libc::c_int> {
    // SAFETY: `attr` is a live, writable struct of the size passed; the
    // pointers inside are valid per this function's contract.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            (attr as *mut A).cast::<libc::c_void>(),
            mem::size_of::<A>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::c_int)
    }
}

/// A `bpf(2)` command that returns a new descriptor.
///
/// # Safety
///
/// As for [`bpf`].
pub(crate) unsafe fn bpf_fd<A>(cmd: u32, attr: &mut A) -> io::Result<OwnedFd> {
    // SAFETY: forwarded contract.
    let fd = unsafe { bpf(cmd, attr) }?;
    Ok(own(fd))
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the datapath clock).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (nothing else unmaps it),
// and all access to its bytes goes through `&self`/`&mut self` methods of the
// owners (rings, UMEM) whose own Send reasoning covers the contents.
unsafe impl Send for Mmap {}

impl Mmap {
    /// A private anonymous read-write mapping of `len` bytes, populated
    /// up front (the UMEM).
    pub(crate) fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // aliases no existing Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::from_result(p, len)
    }

    /// A shared mapping of `len` bytes of `fd` at page offset `off` (an
    /// AF_XDP ring).
    pub(crate) fn shared(fd: RawFd, len: usize, off: i64) -> io::Result<Mmap> {
        // SAFETY: maps a kernel object at an address the kernel picks; it
        // aliases no existing Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                off as libc::off_t,
            )
        };
        Self::from_result(p, len)
    }

    fn from_result(p: *mut libc::c_void, len: usize) -> io::Result<Mmap> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        match NonNull::new(p.cast::<u8>()) {
            Some(ptr) => Ok(Mmap { ptr, len }),
            None => Err(io::Error::other("mmap returned NULL")),
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and owns;
        // nothing borrows it any more (its owners are being dropped).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

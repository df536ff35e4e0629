//! AF_XDP ports: the fast port type, an [`XskPort`] per (interface, queue)
//! implementing [`megaflow::port::Port`], built on raw syscalls (no libbpf,
//! no libxdp).
//!
//! ## How it works
//!
//! - **UMEM.** One anonymous mapping of `frame_count × frame_size` bytes is
//!   registered with the socket (`XDP_UMEM_REG`). The first half of the
//!   frames serves reception, the second half transmission; each half has
//!   its own free list, so a burst of sends can never starve the receive
//!   side of buffers (or the reverse).
//! - **Rings.** Four single-producer single-consumer rings are mapped from
//!   the socket at the offsets `getsockopt(XDP_MMAP_OFFSETS)` reports: we
//!   *produce* free receive frames into the **fill** ring and packets to send
//!   into the **TX** ring; the kernel produces received packets into the
//!   **RX** ring and sent frames into the **completion** ring. Indexes are
//!   free-running u32s read with acquire loads and published with release
//!   stores (see the `ring` module).
//! - **Redirect program.** An XSKMAP (queue index → socket) and a six-
//!   instruction XDP program, assembled here ([`asm`]), that redirects each
//!   packet of the queue to the socket and passes packets of other queues to
//!   the stack. It is attached with a BPF link (`BPF_LINK_CREATE`), which the
//!   kernel detaches when the link's descriptor is closed — also when the
//!   process dies, so no program is ever left behind; kernels before 5.9
//!   fall back to rtnetlink (`RTM_SETLINK` with `IFLA_XDP`).
//! - **Copy mode on veth.** Without a NIC driver that supports XDP, the
//!   program runs in generic (SKB) mode, after the kernel has built an skb,
//!   and the socket must be bound with `XDP_COPY`: frames are copied into the
//!   UMEM on receive and out of it (into a new skb) on send. Native mode and
//!   zero-copy are configuration options for NICs that support them.
//! - **Receive** refills the fill ring, takes up to
//!   [`BATCH_SIZE`](megaflow::port::BATCH_SIZE) descriptors off the RX
//!   ring, copies each packet into the caller's
//!   [`PacketBatch`](megaflow::port::PacketBatch) (timestamped with
//!   `CLOCK_MONOTONIC` nanoseconds, the datapath clock) and gives its frame
//!   straight back to the fill ring.
//! - **Send** reclaims frames from the completion ring, copies each packet
//!   into a free TX frame, publishes the descriptors and kicks the kernel
//!   with a zero-length `sendto` (always in copy mode, in zero-copy mode when
//!   the ring asks with `XDP_RING_NEED_WAKEUP`). No free frame or ring slot:
//!   the packet is dropped and counted; sending never blocks.
//! - **Drop** detaches the program (closing the link, or an rtnetlink detach
//!   that only removes *our* program), closes the program, the map and the
//!   socket, and unmaps the rings and the UMEM, in that order.
//!
//! [`available`] checks in a few syscalls whether AF_XDP can work on an
//! interface, and says why not, so the daemon can fall back to AF_PACKET.
//!
//! The `unsafe` code is in `sys` (syscalls and mappings), `ring` (the
//! shared indexes and descriptors) and `port` (UMEM frame access).

pub mod asm;
mod bpf;
pub mod netlink;
mod port;
mod ring;
mod sys;

use std::io;

use thiserror::Error;

pub use port::{AttachMethod, XskPort};

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Generic (SKB) mode: works on every interface (veth, bridges, NICs
    /// without XDP support), after skb allocation. Needs copy mode.
    #[default]
    Generic,
    /// Native (driver) mode: in the driver's receive path, before skb
    /// allocation; the driver must support XDP (veth does, as do most 10G+
    /// NIC drivers).
    Native,
}

/// How packet data moves between the NIC and the UMEM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// `XDP_COPY`: the kernel copies packets (works everywhere).
    #[default]
    Copy,
    /// `XDP_ZEROCOPY`: the NIC DMAs into the UMEM; fails to bind if the
    /// driver cannot. Needs [`XdpMode::Native`].
    ZeroCopy,
    /// Neither flag: the kernel uses zero-copy when it can, else copy.
    Auto,
}

/// Settings of an [`XskPort`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XskConfig {
    /// The interface queue to bind (and the XSKMAP key).
    pub queue_id: u32,
    /// Frames in the UMEM: half for receive, half for send. At most
    /// `2 × ring_size` (more could never be in flight).
    pub frame_count: u32,
    /// Bytes per frame: 2048 or 4096. In copy mode the kernel keeps 256
    /// bytes of headroom in receive frames, so 2048 receives frames up to
    /// 1792 bytes (a 1500-byte MTU), 4096 up to 3840; longer ones are
    /// dropped by the kernel and counted in `rx_dropped`.
    pub frame_size: u32,
    /// Descriptors in each of the four rings (a power of two).
    pub ring_size: u32,
    pub mode: XdpMode,
    pub bind: BindMode,
    /// `XDP_USE_NEED_WAKEUP`: the kernel says when it needs a syscall to
    /// make progress, saving syscalls in zero-copy mode.
    pub need_wakeup: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            queue_id: 0,
            frame_count: 4096,
            frame_size: 2048,
            ring_size: 2048,
            mode: XdpMode::Generic,
            bind: BindMode::Copy,
            need_wakeup: true,
        }
    }
}

impl XskConfig {
    /// Checks the settings; `Err` says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!(
                "frame_size {} (must be 2048 or 4096)",
                self.frame_size
            ));
        }
        if !self.ring_size.is_power_of_two() || !(64..=65536).contains(&self.ring_size) {
            return Err(format!(
                "ring_size {} (must be a power of two from 64 to 65536)",
                self.ring_size
            ));
        }
        if self.frame_count < 2 || self.frame_count > 2 * self.ring_size {
            return Err(format!(
                "frame_count {} (must be from 2 to 2 × ring_size = {})",
                self.frame_count,
                2 * self.ring_size
            ));
        }
        if self.bind == BindMode::ZeroCopy && self.mode == XdpMode::Generic {
            return Err("zero-copy needs native XDP mode".into());
        }
        Ok(())
    }
}

/// Why an AF_XDP port could not be opened (or used). Every variant names
/// the interface; [`XskError::Os`] also the step that failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum XskError {
    #[error("{ifname}: no such interface")]
    NoSuchInterface { ifname: String },
    #[error("{ifname}: bad AF_XDP configuration: {reason}")]
    BadConfig { ifname: String, reason: String },
    /// A syscall failed; `step` names it (e.g. "bind(queue 0)"), `hint`
    /// says what usually causes that errno there.
    #[error("{ifname}: {step}: {source}{}", hint_suffix(.hint))]
    Os {
        ifname: String,
        step: String,
        #[source]
        source: io::Error,
        hint: Option<&'static str>,
    },
    /// The verifier rejected the redirect program (or loading failed).
    #[error("{ifname}: BPF_PROG_LOAD: {source} (verifier: {log})")]
    ProgLoad {
        ifname: String,
        #[source]
        source: io::Error,
        log: String,
    },
    /// Neither a BPF link nor rtnetlink could attach the program.
    #[error("{ifname}: attaching the XDP program: BPF_LINK_CREATE: {link}; RTM_SETLINK: {netlink}{}", hint_suffix(.hint))]
    Attach {
        ifname: String,
        link: io::Error,
        netlink: String,
        hint: Option<&'static str>,
    },
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|h| format!(" ({h})")).unwrap_or_default()
}

impl XskError {
    /// The interface the error is about.
    pub fn ifname(&self) -> &str {
        match self {
            XskError::NoSuchInterface { ifname }
            | XskError::BadConfig { ifname, .. }
            | XskError::Os { ifname, .. }
            | XskError::ProgLoad { ifname, .. }
            | XskError::Attach { ifname, .. } => ifname,
        }
    }

    /// The OS error behind the failure, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            XskError::Os { source, .. } | XskError::ProgLoad { source, .. } => {
                source.raw_os_error()
            }
            XskError::Attach { link, .. } => link.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn os(ifname: &str, step: impl Into<String>, source: io::Error) -> XskError {
        let step = step.into();
        let hint = hint_for(&step, source.raw_os_error().unwrap_or(0));
        XskError::Os {
            ifname: ifname.to_string(),
            step,
            source,
            hint,
        }
    }
}

/// What an errno usually means at a given step.
fn hint_for(step: &str, errno: i32) -> Option<&'static str> {
    let perm = errno == libc::EPERM || errno == libc::EACCES;
    if step.starts_with("socket(AF_XDP)") {
        if errno == libc::EAFNOSUPPORT {
            return Some("kernel built without AF_XDP sockets (CONFIG_XDP_SOCKETS)");
        }
        if perm {
            return Some("needs CAP_NET_RAW");
        }
    }
    if step.starts_with("BPF_MAP_CREATE") {
        if perm {
            return Some("needs CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN");
        }
        if errno == libc::EINVAL {
            return Some("kernel without XSKMAP support");
        }
        if errno == libc::ENOSYS {
            return Some("kernel built without bpf(2)");
        }
    }
    if step.starts_with("setsockopt(XDP_UMEM_REG)") && (errno == libc::ENOMEM || perm) {
        return Some("locked-memory limit (RLIMIT_MEMLOCK) too low for the UMEM");
    }
    if step.starts_with("bind") {
        if errno == libc::EBUSY {
            return Some("another AF_XDP socket is bound to this queue");
        }
        if errno == libc::EOPNOTSUPP {
            return Some("the driver cannot do zero-copy (use copy mode)");
        }
        if errno == libc::EINVAL {
            return Some("queue id beyond the interface's queues?");
        }
    }
    None
}

/// Checks quickly whether AF_XDP can be used on `ifname` by this process:
/// the interface exists, the kernel has AF_XDP sockets and we may create
/// them and BPF maps. `Err` says which (the daemon logs it and falls back
/// to AF_PACKET). It does not attach anything, so a program already on the
/// interface or a queue already taken only shows at [`XskPort::open`].
pub fn available(ifname: &str) -> Result<(), XskError> {
    if sys::ifindex(ifname).is_none() {
        return Err(XskError::NoSuchInterface {
            ifname: ifname.to_string(),
        });
    }
    sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
        .map_err(|e| XskError::os(ifname, "socket(AF_XDP)", e))?;
    bpf::create_xskmap(1).map_err(|e| XskError::os(ifname, "BPF_MAP_CREATE(XSKMAP)", e))?;
    Ok(())
}

#[cfg(test)]
#[path = "tests/config.rs"]
mod tests;

//! [`XskPort`]: one AF_XDP socket bound to one interface queue, with its
//! UMEM, its four rings and its redirect program.

use std::fmt;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};

use megaflow::port::{PacketBatch, PacketMeta, Port, PortError, PortStats, BATCH_SIZE};
use megaflow::Timestamp;

use crate::netlink::{
    self, XdpRequest, XDP_FLAGS_DRV_MODE, XDP_FLAGS_REPLACE, XDP_FLAGS_SKB_MODE,
    XDP_FLAGS_UPDATE_IF_NOEXIST,
};
use crate::ring::{Offsets, Ring, XdpDesc};
use crate::sys::{self, Mmap};
use crate::{bpf, BindMode, XdpMode, XskConfig, XskError};

/// How many TX kicks one call makes at most while the kernel keeps taking
/// descriptors (in copy mode each `sendto` sends up to 32 packets).
const MAX_KICKS: usize = 4;

/// How the redirect program is attached to the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMethod {
    /// A BPF link: detached when its descriptor closes (also when the
    /// process dies).
    Link,
    /// rtnetlink `IFLA_XDP`: detached on drop; stays if the process is
    /// killed (`ip link set dev X xdpgeneric off` removes it).
    Netlink,
}

/// A program attached with rtnetlink; detaches it on drop, only if it is
/// still ours (`XDP_FLAGS_REPLACE` with our descriptor as the expected one).
pub(crate) struct NetlinkAttachment {
    pub(crate) ifindex: u32,
    pub(crate) mode_flag: u32,
    /// The program's descriptor, still open when this drops (the port's
    /// `prog` field is declared after this one).
    pub(crate) prog_fd: i32,
}

impl Drop for NetlinkAttachment {
    fn drop(&mut self) {
        let guarded = XdpRequest {
            ifindex: self.ifindex,
            fd: -1,
            flags: self.mode_flag | XDP_FLAGS_REPLACE,
            expected_fd: Some(self.prog_fd),
        };
        if let Err(e) = netlink::set_xdp(&guarded) {
            // Kernels before 5.7 know no XDP_FLAGS_REPLACE: plain detach.
            if matches!(e.errno(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) {
                let _ = netlink::set_xdp(&XdpRequest {
                    ifindex: self.ifindex,
                    fd: -1,
                    flags: self.mode_flag,
                    expected_fd: None,
                });
            }
        }
    }
}

/// An AF_XDP port on one interface queue. See the crate docs.
///
/// Fields drop in declaration order: the attachment first (no more packets
/// are redirected), then the program, the map, the rings, the socket and
/// the UMEM last.
pub struct XskPort {
    link: Option<OwnedFd>,
    netlink: Option<NetlinkAttachment>,
    _prog: OwnedFd,
    _map: OwnedFd,
    rx: Ring<XdpDesc>,
    tx: Ring<XdpDesc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    sock: OwnedFd,
    umem: Mmap,
    name: String,
    ifindex: u32,
    queue_id: u32,
    frame_size: u32,
    rx_free: Vec<u64>,
    tx_free: Vec<u64>,
    need_wakeup: bool,
    zero_copy: bool,
    stats: PortStats,
}

impl fmt::Debug for XskPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XskPort")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("queue_id", &self.queue_id)
            .field("attach", &self.attach_method())
            .field("zero_copy", &self.zero_copy)
            .finish()
    }
}

/// Maps one ring of the socket.
fn map_ring<T: Copy>(
    ifname: &str,
    sock: &OwnedFd,
    what: &str,
    pgoff: i64,
    off: &libc::xdp_ring_offset,
    size: u32,
) -> Result<Ring<T>, XskError> {
    let len = off.desc as usize + size as usize * mem::size_of::<T>();
    let map = Mmap::shared(sock.as_raw_fd(), len, pgoff)
        .map_err(|e| XskError::os(ifname, format!("mmap({what} ring)"), e))?;
    let offsets = Offsets {
        producer: off.producer,
        consumer: off.consumer,
        desc: off.desc,
        flags: off.flags,
    };
    Ring::new(map, offsets, size).ok_or_else(|| XskError::BadConfig {
        ifname: ifname.to_string(),
        reason: format!("kernel reported inconsistent {what} ring offsets {off:?}"),
    })
}

/// The bytes of a frame the kernel handed us, if the descriptor lies inside
/// the UMEM and inside one frame.
fn frame_bytes(umem: &Mmap, frame_size: u32, addr: u64, len: u32) -> Option<&[u8]> {
    let in_frame = addr % u64::from(frame_size) + u64::from(len) <= u64::from(frame_size);
    let end = addr.checked_add(u64::from(len))?;
    if !in_frame || end > umem.len() as u64 {
        return None;
    }
    // SAFETY: [addr, addr+len) lies inside the mapping (checked above). The
    // frame came off the RX ring, so the kernel has finished writing it and
    // will not touch it until we put it back on the fill ring, which happens
    // after the returned borrow ends (it borrows `umem`).
    Some(unsafe { std::slice::from_raw_parts(umem.as_ptr().add(addr as usize), len as usize) })
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN)
            | Some(libc::EBUSY)
            | Some(libc::ENOBUFS)
            | Some(libc::EINTR)
            | Some(libc::ENETDOWN)
    )
}

impl XskPort {
    /// Opens an AF_XDP port on `ifname` (which should be up): creates the
    /// UMEM and socket, binds it to `cfg.queue_id`, and attaches a program
    /// that redirects that queue's packets to it.
    pub fn open(ifname: &str, cfg: XskConfig) -> Result<XskPort, XskError> {
        let name = ifname.to_string();
        cfg.validate().map_err(|reason| XskError::BadConfig {
            ifname: name.clone(),
            reason,
        })?;
        let ifindex = sys::ifindex(ifname).ok_or_else(|| XskError::NoSuchInterface {
            ifname: name.clone(),
        })?;
        let os = |step: &str| {
            let step = step.to_string();
            move |e: io::Error| XskError::os(ifname, step, e)
        };

        let frame_size = cfg.frame_size;
        let ring_size = cfg.ring_size;
        let rx_frames = (cfg.frame_count / 2).min(ring_size);
        let tx_frames = (cfg.frame_count - rx_frames).min(ring_size);
        let umem_len = cfg.frame_count as usize * frame_size as usize;

        // UMEM before the socket, so the socket (registered with it) is
        // closed first on an error path.
        let umem =
            Mmap::anonymous(umem_len).map_err(os(&format!("mmap(UMEM, {umem_len} bytes)")))?;
        let sock = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(os("socket(AF_XDP)"))?;

        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(&sock, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(os("setsockopt(XDP_UMEM_REG)"))?;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
            (libc::XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
            (libc::XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
        ] {
            sys::setsockopt(&sock, libc::SOL_XDP, opt, &ring_size).map_err(os(what))?;
        }

        let (off, off_len) = sys::getsockopt::<libc::xdp_mmap_offsets>(
            sock.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
        )
        .map_err(os("getsockopt(XDP_MMAP_OFFSETS)"))?;
        if off_len < mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(XskError::BadConfig {
                ifname: name,
                reason: "kernel too old (before 5.4: no ring flags)".into(),
            });
        }
        let rx = map_ring::<XdpDesc>(
            ifname,
            &sock,
            "RX",
            libc::XDP_PGOFF_RX_RING,
            &off.rx,
            ring_size,
        )?;
        let tx = map_ring::<XdpDesc>(
            ifname,
            &sock,
            "TX",
            libc::XDP_PGOFF_TX_RING,
            &off.tx,
            ring_size,
        )?;
        let mut fill = map_ring::<u64>(
            ifname,
            &sock,
            "fill",
            libc::XDP_UMEM_PGOFF_FILL_RING as i64,
            &off.fr,
            ring_size,
        )?;
        let comp = map_ring::<u64>(
            ifname,
            &sock,
            "completion",
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
            &off.cr,
            ring_size,
        )?;

        // All receive frames go to the kernel now; it fills them as packets
        // arrive.
        let n = fill.prod_free(rx_frames);
        for i in 0..n {
            fill.prod_write(i, u64::from(i) * u64::from(frame_size));
        }
        fill.prod_submit(n);
        let rx_free: Vec<u64> = (n..rx_frames)
            .map(|i| u64::from(i) * u64::from(frame_size))
            .collect();
        let tx_free: Vec<u64> = (rx_frames..rx_frames + tx_frames)
            .rev()
            .map(|i| u64::from(i) * u64::from(frame_size))
            .collect();

        let mut bind_flags = match cfg.bind {
            BindMode::Copy => libc::XDP_COPY,
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
            BindMode::Auto => 0,
        };
        if cfg.need_wakeup {
            bind_flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: bind_flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: cfg.queue_id,
            sxdp_shared_umem_fd: 0,
        };
        sys::bind(&sock, &sa).map_err(os(&format!("bind(queue {})", cfg.queue_id)))?;
        let zero_copy = match sys::getsockopt::<libc::xdp_options>(
            sock.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
        ) {
            Ok((o, _)) => o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            Err(_) => cfg.bind == BindMode::ZeroCopy,
        };

        let map = bpf::create_xskmap(cfg.queue_id.saturating_add(1))
            .map_err(os("BPF_MAP_CREATE(XSKMAP)"))?;
        bpf::xskmap_set(&map, cfg.queue_id, &sock).map_err(os(&format!(
            "BPF_MAP_UPDATE_ELEM(XSKMAP[{}])",
            cfg.queue_id
        )))?;
        let prog = bpf::load_redirect(&map).map_err(|e| XskError::ProgLoad {
            ifname: name.clone(),
            source: e.source,
            log: e.log,
        })?;

        let mode_flag = match cfg.mode {
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
        };
        let (link, netlink) = match bpf::link_xdp(&prog, ifindex, mode_flag) {
            Ok(link) => (Some(link), None),
            Err(link_err) => {
                let req = XdpRequest {
                    ifindex,
                    fd: prog.as_raw_fd(),
                    flags: mode_flag | XDP_FLAGS_UPDATE_IF_NOEXIST,
                    expected_fd: None,
                };
                match netlink::set_xdp(&req) {
                    Ok(()) => (
                        None,
                        Some(NetlinkAttachment {
                            ifindex,
                            mode_flag,
                            prog_fd: prog.as_raw_fd(),
                        }),
                    ),
                    Err(nl_err) => {
                        let busy =
                            matches!(
                                link_err.raw_os_error(),
                                Some(libc::EBUSY) | Some(libc::EEXIST)
                            ) || matches!(nl_err.errno(), Some(libc::EBUSY) | Some(libc::EEXIST));
                        return Err(XskError::Attach {
                            ifname: name,
                            link: link_err,
                            netlink: nl_err.to_string(),
                            hint: busy
                                .then_some("another XDP program is attached to the interface"),
                        });
                    }
                }
            }
        };

        Ok(XskPort {
            link,
            netlink,
            _prog: prog,
            _map: map,
            rx,
            tx,
            fill,
            comp,
            sock,
            umem,
            name,
            ifindex,
            queue_id: cfg.queue_id,
            frame_size,
            rx_free,
            tx_free,
            need_wakeup: cfg.need_wakeup,
            zero_copy,
            stats: PortStats::default(),
        })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// True if the kernel bound the socket in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    pub fn attach_method(&self) -> AttachMethod {
        if self.link.is_some() {
            AttachMethod::Link
        } else {
            debug_assert!(self.netlink.is_some());
            AttachMethod::Netlink
        }
    }

    /// The kernel's counters for the socket (`XDP_STATISTICS`), zero where
    /// the kernel does not report them.
    pub fn kernel_stats(&self) -> io::Result<libc::xdp_statistics> {
        sys::getsockopt::<libc::xdp_statistics>(
            self.sock.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
        )
        .map(|(s, _)| s)
    }

    fn io_error(&self, context: &str, source: io::Error) -> PortError {
        PortError::Io {
            port: self.name.clone(),
            context: context.to_string(),
            source,
        }
    }

    /// Gives free receive frames to the kernel.
    fn refill(&mut self) {
        let n = self.fill.prod_free(self.rx_free.len() as u32);
        for i in 0..n {
            // n <= rx_free.len(), so pop always yields a frame.
            if let Some(addr) = self.rx_free.pop() {
                self.fill.prod_write(i, addr);
            }
        }
        if n > 0 {
            self.fill.prod_submit(n);
        }
    }

    /// Takes sent frames back from the completion ring.
    fn reclaim(&mut self) {
        let n = self.comp.cons_available(self.comp.size());
        let mask = !(u64::from(self.frame_size) - 1);
        for i in 0..n {
            self.tx_free.push(self.comp.cons_read(i) & mask);
        }
        if n > 0 {
            self.comp.cons_release(n);
        }
    }

    /// Kicks the kernel until it has taken every published TX descriptor
    /// (or says to try later), at most [`MAX_KICKS`] times.
    fn flush_tx(&mut self) -> Result<(), PortError> {
        for _ in 0..MAX_KICKS {
            if self.tx.prod_outstanding() == 0 {
                break;
            }
            if self.zero_copy && self.need_wakeup && !self.tx.needs_wakeup() {
                break;
            }
            if let Err(e) = sys::kick_tx(self.sock.as_raw_fd()) {
                if is_transient(&e) {
                    break;
                }
                return Err(self.io_error("sendto (AF_XDP TX kick)", e));
            }
        }
        Ok(())
    }
}

impl Port for XskPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        self.refill();
        if self.need_wakeup && self.fill.needs_wakeup() {
            if let Err(e) = sys::kick_rx(self.sock.as_raw_fd()) {
                if !is_transient(&e) {
                    return Err(self.io_error("recvfrom (AF_XDP RX wakeup)", e));
                }
            }
        }
        let n = self.rx.cons_available(BATCH_SIZE as u32);
        if n > 0 {
            let meta = PacketMeta::new(Timestamp(sys::monotonic_ns()));
            let mask = !(u64::from(self.frame_size) - 1);
            for i in 0..n {
                let d = self.rx.cons_read(i);
                match frame_bytes(&self.umem, self.frame_size, d.addr, d.len) {
                    Some(bytes) if batch.push(bytes, meta) => {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += u64::from(d.len);
                    }
                    _ => self.stats.rx_dropped += 1,
                }
                self.rx_free.push(d.addr & mask);
            }
            self.rx.cons_release(n);
            self.refill();
        }
        // Keep sends moving when the caller mostly receives.
        self.reclaim();
        self.flush_tx()?;
        Ok(batch.len())
    }

    fn send_batch(&mut self, pkts: &[&[u8]], _now: Timestamp) -> Result<usize, PortError> {
        self.reclaim();
        let want = pkts.len() as u32;
        let mut room = self.tx.prod_free(want).min(self.tx_free.len() as u32);
        if room < want {
            // Let the kernel drain what is queued, then look again.
            self.flush_tx()?;
            self.reclaim();
            room = self.tx.prod_free(want).min(self.tx_free.len() as u32);
        }
        let max_len = self.frame_size as usize;
        let mut queued = 0u32;
        for pkt in pkts {
            if pkt.is_empty() || pkt.len() > max_len || queued == room {
                self.stats.tx_dropped += 1;
                continue;
            }
            let Some(addr) = self.tx_free.pop() else {
                self.stats.tx_dropped += 1;
                continue;
            };
            debug_assert!(addr as usize + pkt.len() <= self.umem.len());
            // SAFETY: `addr` is the start of a TX frame we own (from the
            // free list: not in the TX or completion rings), `pkt.len()` is
            // at most a frame, and frames lie inside the UMEM mapping; the
            // kernel does not read the frame until we publish its descriptor.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pkt.as_ptr(),
                    self.umem.as_ptr().add(addr as usize),
                    pkt.len(),
                );
            }
            self.tx.prod_write(
                queued,
                XdpDesc {
                    addr,
                    len: pkt.len() as u32,
                    options: 0,
                },
            );
            queued += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += pkt.len() as u64;
        }
        if queued > 0 {
            self.tx.prod_submit(queued);
        }
        self.flush_tx()?;
        Ok(queued as usize)
    }

    /// Our counters plus the kernel's receive drops: `rx_dropped` adds the
    /// socket's `rx_dropped` (no free frame, frame too long) and
    /// `rx_ring_full` (RX ring full). `rx_fill_ring_empty_descs` is not
    /// added: in copy mode every such event is already in `rx_dropped`.
    fn stats(&self) -> PortStats {
        let mut s = self.stats;
        if let Ok(k) = self.kernel_stats() {
            s.rx_dropped += k.rx_dropped + k.rx_ring_full;
        }
        s
    }

    fn poll_fd(&self) -> Option<i32> {
        Some(self.sock.as_raw_fd())
    }
}

// Compile-time check that the port can move to its datapath thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<XskPort>();
};

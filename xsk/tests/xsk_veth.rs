//! AF_XDP on a veth pair (needs root; prints SKIP otherwise).
//!
//! Each test makes its own veth pair in the root namespace, named after the
//! test and the process id (`xk<tag><pid>a` / `…b`), without addresses and
//! with IPv6 off (so the kernel sends nothing of its own on it), and deletes
//! it in a drop guard, also on panic. The XskPort sits on the `a` end; a
//! plain AF_PACKET socket on the `b` end sends frames into it and receives
//! what it sends. Test frames carry the local experimental ethertype 0x88b5
//! and anything else is ignored.

use std::io;
use std::mem;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use megaflow::port::{PacketBatch, Port};
use megaflow::Timestamp;
use xsk::{AttachMethod, XdpMode, XskConfig, XskError, XskPort};

const ETHERTYPE: u16 = 0x88b5;
const DEADLINE: Duration = Duration::from_secs(5);

/// Root, `ip`, and a kernel with AF_XDP sockets and XSKMAPs; otherwise
/// `test` is skipped.
fn can_run(test: &str) -> bool {
    prereq::netns(test, &["ip"])
        && prereq::kernel_feature(
            test,
            "AF_XDP",
            xsk::available("lo").map_err(|e| (e.errno(), e)),
        )
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A veth pair, deleted on drop.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new(tag: &str) -> Veth {
        let pid = std::process::id();
        let a = format!("xk{tag}{pid}a");
        let b = format!("xk{tag}{pid}b");
        assert!(a.len() < 16, "interface name too long: {a}");
        // A leftover from a killed run with the same pid.
        let _ = Command::new("ip").args(["link", "del", &a]).output();
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        let v = Veth { a, b };
        for dev in [&v.a, &v.b] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
            ip(&["link", "set", "dev", dev, "up"]);
        }
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

/// What `ip -d link show` says about XDP on `dev`, if anything.
fn xdp_attached(dev: &str) -> bool {
    let out = ip(&["-d", "link", "show", "dev", dev]);
    out.contains("xdpgeneric") || out.contains("xdpdrv") || out.contains("prog/xdp")
}

/// A raw AF_PACKET socket bound to one interface and our ethertype.
struct PacketSock {
    fd: i32,
}

impl PacketSock {
    fn open(ifname: &str) -> PacketSock {
        let proto = ETHERTYPE.to_be();
        // SAFETY: plain syscall.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        assert!(fd >= 0, "socket(AF_PACKET): {}", io::Error::last_os_error());
        let c = std::ffi::CString::new(ifname).expect("name");
        // SAFETY: valid C string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(ifindex != 0, "no interface {ifname}");
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut sa: libc::sockaddr_ll = unsafe { mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: `sa` is a live sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert!(r == 0, "bind(AF_PACKET): {}", io::Error::last_os_error());
        PacketSock { fd }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is readable for its length.
        let r = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// The next incoming frame (outgoing copies skipped) before `deadline`.
    fn recv_incoming(&self, deadline: Instant) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        while Instant::now() < deadline {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                continue;
            }
            // SAFETY: all-zero sockaddr_ll is valid.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            let mut len = mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` and `from` are writable for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                continue;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(buf[..n as usize].to_vec());
        }
        None
    }
}

impl Drop for PacketSock {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.fd) };
    }
}

/// A 64-byte test frame numbered `seq` (`dir` tells the two directions
/// apart).
fn frame(dir: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(24)];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0b]);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14] = dir;
    f[15..19].copy_from_slice(&seq.to_be_bytes());
    f[19..23].copy_from_slice(&std::process::id().to_be_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(23) {
        *b = i as u8;
    }
    f
}

fn is_ours(f: &[u8]) -> bool {
    f.len() >= 23
        && f[12..14] == ETHERTYPE.to_be_bytes()
        && f[19..23] == std::process::id().to_be_bytes()
}

/// Receives on `port` until `want` of our frames arrived or the deadline.
fn recv_ours(port: &mut XskPort, want: usize) -> Vec<Vec<u8>> {
    let mut batch = PacketBatch::new();
    let mut got = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while got.len() < want && Instant::now() < deadline {
        let n = port.recv_batch(&mut batch).expect("recv_batch");
        if n == 0 {
            thread::sleep(Duration::from_millis(1));
            continue;
        }
        for p in &batch {
            assert!(p.meta.ts.0 > 0, "timestamp missing");
            if is_ours(p.data) {
                got.push(p.data.to_vec());
            }
        }
    }
    got
}

fn poll_readable(fd: i32, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) > 0 && pfd.revents & libc::POLLIN != 0 }
}

/// Frames in both directions through a port in `mode`, then detach on drop.
fn rx_tx_roundtrip(tag: &str, mode: XdpMode) {
    let veth = Veth::new(tag);
    xsk::available(&veth.a).expect("AF_XDP available");
    let cfg = XskConfig {
        mode,
        ..XskConfig::default()
    };
    let mut port = XskPort::open(&veth.a, cfg).expect("open XskPort");
    assert_eq!(port.name(), veth.a);
    assert_eq!(port.attach_method(), AttachMethod::Link);
    assert!(!port.is_zero_copy());
    assert!(xdp_attached(&veth.a), "no XDP program shown on {}", veth.a);
    let fd = port.poll_fd().expect("poll fd");

    // Peer → port.
    let peer = PacketSock::open(&veth.b);
    let sent: Vec<Vec<u8>> = (0..100)
        .map(|i| frame(1, i, 60 + (i as usize * 13) % 1400))
        .collect();
    for f in &sent {
        peer.send(f);
    }
    assert!(poll_readable(fd, 5000), "poll_fd never became readable");
    let got = recv_ours(&mut port, sent.len());
    assert_eq!(got.len(), sent.len(), "frames received through recv_batch");
    assert_eq!(got, sent, "received frames differ from the ones sent");

    // Port → peer, in two batches (32 + 8).
    let out: Vec<Vec<u8>> = (0..40).map(|i| frame(2, i, 64 + i as usize)).collect();
    for chunk in out.chunks(32) {
        let refs: Vec<&[u8]> = chunk.iter().map(|f| f.as_slice()).collect();
        let n = port
            .send_batch(&refs, Timestamp::NEVER)
            .expect("send_batch");
        assert_eq!(n, refs.len(), "send_batch accepted");
    }
    let deadline = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    while seen.len() < out.len() {
        match peer.recv_incoming(deadline) {
            Some(f) if is_ours(&f) && f[14] == 2 => seen.push(f),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(seen.len(), out.len(), "frames the peer received");
    assert_eq!(seen, out, "peer frames differ from the ones sent");

    let s = port.stats();
    assert!(s.rx_packets >= 100, "{s:?}");
    assert_eq!(s.tx_packets, 40, "{s:?}");
    assert_eq!(s.tx_dropped, 0, "{s:?}");
    assert_eq!(s.rx_dropped, 0, "{s:?}");

    drop(port);
    assert!(
        !xdp_attached(&veth.a),
        "XDP program still attached after drop: {}",
        ip(&["-d", "link", "show", "dev", &veth.a])
    );
}

#[test]
fn xsk_generic_rx_tx_and_detach() {
    if !can_run("xsk_generic_rx_tx_and_detach") {
        return;
    }
    rx_tx_roundtrip("g", XdpMode::Generic);
}

#[test]
fn xsk_native_veth_rx_tx_and_detach() {
    if !can_run("xsk_native_veth_rx_tx_and_detach") {
        return;
    }
    rx_tx_roundtrip("n", XdpMode::Native);
}

#[test]
fn xsk_second_socket_on_same_queue_is_refused() {
    if !can_run("xsk_second_socket_on_same_queue_is_refused") {
        return;
    }
    let veth = Veth::new("d");
    let first = XskPort::open(&veth.a, XskConfig::default()).expect("first open");
    let err = XskPort::open(&veth.a, XskConfig::default()).expect_err("second open must fail");
    println!("second open: {err}");
    assert_eq!(err.ifname(), veth.a);
    match &err {
        XskError::Os { step, .. } => assert_eq!(step, "bind(queue 0)"),
        other => panic!("expected a bind error, got {other}"),
    }
    assert_eq!(err.errno(), Some(libc::EBUSY));
    // The failed open attached nothing and detached nothing.
    assert!(xdp_attached(&veth.a));
    drop(first);
    assert!(!xdp_attached(&veth.a));
}

#[test]
fn xsk_rx_throughput() {
    if !can_run("xsk_rx_throughput") {
        return;
    }
    measure_rx("t", XdpMode::Generic, "xsk.rx_mpps");
    measure_rx("u", XdpMode::Native, "xsk.rx_native_veth_mpps");
}

/// Receives for 2 s while a thread blasts 64-byte frames from the peer;
/// prints the rate (no assertion on it).
fn measure_rx(tag: &str, mode: XdpMode, label: &str) {
    let veth = Veth::new(tag);
    let cfg = XskConfig {
        mode,
        ..XskConfig::default()
    };
    let mut port = XskPort::open(&veth.a, cfg).expect("open XskPort");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (stop, sent, b) = (stop.clone(), sent.clone(), veth.b.clone());
        thread::spawn(move || blast(&b, &stop, &sent))
    };
    let mut batch = PacketBatch::new();
    let start = Instant::now();
    let mut got = 0u64;
    while start.elapsed() < Duration::from_secs(2) {
        got += port.recv_batch(&mut batch).expect("recv_batch") as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let s = port.stats();
    println!(
        "bench: {label} {:.3} Mpps ({mode:?} mode, copy, veth; peer sent {:.3} Mpps; rx_dropped {})",
        got as f64 / secs / 1e6,
        sent.load(Ordering::Relaxed) as f64 / secs / 1e6,
        s.rx_dropped
    );
    assert!(got > 0, "nothing received");
}

/// Sends 64-byte frames with sendmmsg (64 per call) until `stop`.
fn blast(ifname: &str, stop: &AtomicBool, sent: &AtomicU64) {
    let sock = PacketSock::open(ifname);
    let f = frame(3, 0, 64);
    let mut iov: Vec<libc::iovec> = (0..64)
        .map(|_| libc::iovec {
            iov_base: f.as_ptr() as *mut libc::c_void,
            iov_len: f.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            // SAFETY: all-zero mmsghdr is valid.
            let mut m: libc::mmsghdr = unsafe { mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: `msgs` points at live iovecs over `f`, all outliving the call.
        let n = unsafe { libc::sendmmsg(sock.fd, msgs.as_mut_ptr(), msgs.len() as u32, 0) };
        if n > 0 {
            sent.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

//! AF_PACKET ports on a real veth pair (needs root).
//!
//! Each test makes two network namespaces with unique names (process id and
//! a counter) joined by a veth pair, opens sockets inside them from helper
//! threads that `setns` into the namespace (a socket stays in the namespace
//! it was created in), and removes the namespaces (and with them the veth
//! pair) in a drop guard, also on panic. Test frames use the local
//! experimental EtherType 0x88b5 so that anything else the kernel sends on
//! the link is ignored. Every wait is bounded by a deadline.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use megaflow::port::{PacketBatch, Port};
use megaflow::Timestamp;
use netdev::{AfPacketConfig, AfPacketPort, AfPacketTx, TxMode};

const ETHERTYPE_TEST: u16 = 0x88b5;
const DEADLINE: Duration = Duration::from_secs(5);

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn is_root(test: &str) -> bool {
    prereq::netns(test, &["ip"])
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Two namespaces joined by a veth pair; deleted on drop.
struct Lab {
    ns: Vec<String>,
    ns_a: String,
    ns_b: String,
    if_a: String,
    if_b: String,
}

impl Lab {
    fn new() -> Lab {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}x{n}", std::process::id());
        let mut lab = Lab {
            ns: Vec::new(),
            ns_a: format!("ndnsA{tag}"),
            ns_b: format!("ndnsB{tag}"),
            if_a: format!("ndA{tag}"),
            if_b: format!("ndB{tag}"),
        };
        for ns in [lab.ns_a.clone(), lab.ns_b.clone()] {
            ip(&["netns", "add", &ns]);
            lab.ns.push(ns.clone());
            // No IPv6 chatter (router solicitations, DAD) on the test link.
            ip(&[
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
        ip(&[
            "link", "add", &lab.if_a, "netns", &lab.ns_a, "type", "veth", "peer", "name",
            &lab.if_b, "netns", &lab.ns_b,
        ]);
        ip(&[
            "-n",
            &lab.ns_a,
            "addr",
            "add",
            "198.18.0.1/30",
            "dev",
            &lab.if_a,
        ]);
        ip(&[
            "-n",
            &lab.ns_b,
            "addr",
            "add",
            "198.18.0.2/30",
            "dev",
            &lab.if_b,
        ]);
        ip(&["-n", &lab.ns_a, "link", "set", &lab.if_a, "up"]);
        ip(&["-n", &lab.ns_b, "link", "set", &lab.if_b, "up"]);
        lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs `f` on a thread inside namespace `ns` (sockets it opens stay there).
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    thread::spawn(move || {
        let file = File::open(&path).expect("open netns file");
        // SAFETY: setns on a valid namespace fd only changes this thread's
        // network namespace; the thread ends right after `f`.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("namespace thread panicked")
}

fn open_port(ns: &str, ifname: &str, cfg: AfPacketConfig) -> AfPacketPort {
    let ifname = ifname.to_owned();
    in_ns(ns, move || {
        AfPacketPort::open(&ifname, cfg).expect("open AfPacketPort")
    })
}

fn open_tx(ns: &str, ifname: &str) -> AfPacketTx {
    let ifname = ifname.to_owned();
    in_ns(ns, move || {
        AfPacketTx::open(&ifname).expect("open AfPacketTx")
    })
}

/// A test frame of `len` bytes (at least 60) carrying `seq`, optionally with
/// a VLAN tag (`tpid`, `tci`).
fn frame(seq: u32, len: usize, vlan: Option<(u16, u16)>) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    if let Some((tpid, tci)) = vlan {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f.extend_from_slice(b"netdev-test");
    f.extend_from_slice(&seq.to_be_bytes());
    let mut i = 0u8;
    while f.len() < len {
        f.push(i);
        i = i.wrapping_add(7);
    }
    f
}

fn is_test_frame(f: &[u8]) -> bool {
    let et = |o: usize| f.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    match et(12) {
        Some(ETHERTYPE_TEST) => true,
        Some(0x8100) | Some(0x88a8) => et(16) == Some(ETHERTYPE_TEST),
        _ => false,
    }
}

/// Receives test frames until `want` of them arrived or `wait` passed.
fn recv_frames(port: &mut AfPacketPort, want: usize, wait: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut batch = PacketBatch::new();
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let n = port.recv_batch(&mut batch).expect("recv_batch");
        if n == 0 {
            thread::sleep(Duration::from_micros(200));
            continue;
        }
        for p in &batch {
            assert!(p.meta.ts.0 > 0, "kernel timestamp missing");
            if is_test_frame(p.data) {
                got.push(p.data.to_vec());
            }
        }
    }
    got
}

#[test]
fn veth_frames_arrive_exact_in_order() {
    if !is_root("veth_frames_arrive_exact_in_order") {
        return;
    }
    let lab = Lab::new();
    let mut rx = open_port(&lab.ns_a, &lab.if_a, AfPacketConfig::default());
    let mut tx = open_tx(&lab.ns_b, &lab.if_b);
    let sizes = [60, 61, 64, 100, 128, 255, 256, 512, 999, 1024, 1500, 1514];
    let sent: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len, None))
        .collect();
    let refs: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
    assert_eq!(tx.send_batch(&refs[..5]), 5);
    assert_eq!(tx.send_batch(&refs[5..]), sizes.len() - 5);
    assert_eq!(tx.stats().tx_packets, sizes.len() as u64);
    let got = recv_frames(&mut rx, sent.len(), DEADLINE);
    assert_eq!(got, sent);
    // Nothing more shows up.
    let extra = recv_frames(&mut rx, 1, Duration::from_millis(200));
    assert!(extra.is_empty(), "unexpected extra frames: {}", extra.len());
    let st = rx.stats();
    assert!(st.rx_packets >= sent.len() as u64);
    assert_eq!(st.rx_dropped, 0);
    assert!(rx.poll_fd().is_some());
}

#[test]
fn veth_own_sends_are_not_received() {
    if !is_root("veth_own_sends_are_not_received") {
        return;
    }
    let lab = Lab::new();
    let mut a = open_port(&lab.ns_a, &lab.if_a, AfPacketConfig::default());
    let mut b = open_port(&lab.ns_b, &lab.if_b, AfPacketConfig::default());
    let sent: Vec<Vec<u8>> = (0..5).map(|i| frame(i, 80, None)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
    assert_eq!(a.send_batch(&refs, Timestamp::NEVER).expect("send"), 5);
    assert_eq!(recv_frames(&mut b, 5, DEADLINE), sent);
    let echoed = recv_frames(&mut a, 1, Duration::from_millis(300));
    assert!(echoed.is_empty(), "the port received its own frames");
    // And the other direction.
    assert_eq!(b.send_batch(&refs[..2], Timestamp::NEVER).expect("send"), 2);
    assert_eq!(recv_frames(&mut a, 2, DEADLINE), sent[..2].to_vec());
    assert!(recv_frames(&mut b, 1, Duration::from_millis(300)).is_empty());
}

#[test]
fn veth_vlan_tags_come_back() {
    if !is_root("veth_vlan_tags_come_back") {
        return;
    }
    let lab = Lab::new();
    let mut rx = open_port(&lab.ns_a, &lab.if_a, AfPacketConfig::default());
    let mut tx = open_tx(&lab.ns_b, &lab.if_b);
    let sent = vec![
        frame(1, 64, Some((0x8100, (3 << 13) | 100))),
        frame(2, 64, None),
        frame(3, 200, Some((0x88a8, 4094))),
        frame(4, 64, Some((0x8100, 0))),
    ];
    let refs: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
    assert_eq!(tx.send_batch(&refs), sent.len());
    assert_eq!(recv_frames(&mut rx, sent.len(), DEADLINE), sent);
}

fn send_and_receive_1000(
    tx: &mut dyn FnMut(&[&[u8]]) -> usize,
    rx: &mut AfPacketPort,
) -> Vec<Vec<u8>> {
    let sent: Vec<Vec<u8>> = (0..1000)
        .map(|i| frame(i, 60 + (i as usize % 64), None))
        .collect();
    let refs: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
    let mut got = Vec::new();
    for chunk in refs.chunks(32) {
        assert_eq!(tx(chunk), chunk.len(), "a batch was not fully sent");
        // Drain as we go: the small test ring must not overflow.
        got.extend(recv_frames(rx, 32, Duration::from_millis(3)));
    }
    got.extend(recv_frames(rx, sent.len() - got.len(), DEADLINE));
    assert_eq!(got.len(), sent.len(), "frames lost");
    assert!(got == sent, "frames reordered or changed");
    got
}

/// A small receive ring (many blocks, several frames per block) so that the
/// test crosses block boundaries and wraps the ring.
fn small_ring(tx_mode: TxMode) -> AfPacketConfig {
    AfPacketConfig {
        block_size: 4096,
        block_count: 16,
        frame_size: 2048,
        tx_mode,
        ..AfPacketConfig::default()
    }
}

#[test]
fn veth_batched_1000_frames_sendmmsg() {
    if !is_root("veth_batched_1000_frames_sendmmsg") {
        return;
    }
    let lab = Lab::new();
    let mut rx = open_port(&lab.ns_a, &lab.if_a, small_ring(TxMode::Sendmmsg));
    let mut tx = open_port(&lab.ns_b, &lab.if_b, small_ring(TxMode::Sendmmsg));
    assert_eq!(tx.tx_mode(), TxMode::Sendmmsg);
    send_and_receive_1000(
        &mut |p| tx.send_batch(p, Timestamp::NEVER).expect("send"),
        &mut rx,
    );
    assert_eq!(tx.stats().tx_packets, 1000);
    assert_eq!(rx.stats().rx_dropped, 0);
}

#[test]
fn veth_batched_1000_frames_tx_ring() {
    if !is_root("veth_batched_1000_frames_tx_ring") {
        return;
    }
    let lab = Lab::new();
    let mut rx = open_port(&lab.ns_a, &lab.if_a, small_ring(TxMode::Sendmmsg));
    let mut tx = open_port(&lab.ns_b, &lab.if_b, small_ring(TxMode::Ring));
    assert_eq!(tx.tx_mode(), TxMode::Ring);
    send_and_receive_1000(
        &mut |p| tx.send_batch(p, Timestamp::NEVER).expect("send"),
        &mut rx,
    );
    assert_eq!(tx.stats().tx_packets, 1000);
    assert_eq!(tx.stats().tx_dropped, 0);
    assert_eq!(rx.stats().rx_dropped, 0);
}

#[test]
fn veth_batched_1000_frames_send_only_handle() {
    if !is_root("veth_batched_1000_frames_send_only_handle") {
        return;
    }
    let lab = Lab::new();
    let mut rx = open_port(&lab.ns_a, &lab.if_a, small_ring(TxMode::Sendmmsg));
    let mut tx = open_tx(&lab.ns_b, &lab.if_b);
    // The handle is Send: use it from another thread.
    let mut tx = thread::spawn(move || {
        let f = frame(7, 60, None);
        assert_eq!(tx.send_batch(&[f.as_slice()]), 1);
        tx
    })
    .join()
    .expect("sender thread");
    assert_eq!(recv_frames(&mut rx, 1, DEADLINE), vec![frame(7, 60, None)]);
    send_and_receive_1000(&mut |p| tx.send_batch(p), &mut rx);
    assert_eq!(tx.stats().tx_packets, 1001);
}

#[test]
fn veth_down_interface_is_an_error_not_a_drop() {
    if !is_root("veth_down_interface_is_an_error_not_a_drop") {
        return;
    }
    let lab = Lab::new();
    let mut a = open_port(&lab.ns_a, &lab.if_a, AfPacketConfig::default());
    ip(&["-n", &lab.ns_a, "link", "set", &lab.if_a, "down"]);
    let f = frame(1, 60, None);
    let err = a
        .send_batch(&[f.as_slice()], Timestamp::NEVER)
        .expect_err("send on a down interface must fail");
    let msg = err.to_string();
    assert!(
        msg.contains(&lab.if_a),
        "error does not name the port: {msg}"
    );
    assert_eq!(a.stats().tx_dropped, 1);
}

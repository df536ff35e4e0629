use std::time::Duration;

use super::*;

const MS: u64 = 1_000_000;

#[test]
fn bucket_admits_burst_then_rate() {
    let t0 = Timestamp(1_000 * MS);
    let mut b = TokenBucket::new(1000, 10, t0);
    let first: usize = (0..50).filter(|_| b.admit(t0)).count();
    assert_eq!(first, 10, "a full bucket admits exactly its burst");
    // 1000/s: 5 ms later, 5 more.
    let t1 = Timestamp(t0.0 + 5 * MS);
    assert_eq!((0..50).filter(|_| b.admit(t1)).count(), 5);
    // Long idle refills to the burst, not beyond.
    let t2 = Timestamp(t1.0 + 10_000 * MS);
    assert_eq!((0..50).filter(|_| b.admit(t2)).count(), 10);
}

#[test]
fn zero_rate_admits_everything() {
    let mut b = TokenBucket::new(0, 1, Timestamp(0));
    assert!((0..10_000).all(|_| b.admit(Timestamp(0))));
}

#[test]
fn clock_going_backwards_admits_nothing_extra() {
    let mut b = TokenBucket::new(1000, 1, Timestamp(10 * MS));
    assert!(b.admit(Timestamp(10 * MS)));
    assert!(!b.admit(Timestamp(5 * MS)));
    assert!(!b.admit(Timestamp(10 * MS)));
    assert!(b.admit(Timestamp(11 * MS)));
}

fn drain(rx: &UpcallReceiver) -> Vec<Upcall> {
    let mut out = Vec::new();
    while rx.recv_batch(&mut out, 1_000, Duration::ZERO).is_ok() && !rx.is_empty() {}
    out
}

#[test]
fn gate_limits_per_port_and_queue_bounds() {
    let (mut gate, rx) = channel(8, 1000, 3);
    let now = Timestamp(0);
    let a = PortNo(1);
    let b = PortNo(2);
    let got: Vec<Admission> = (0..5).map(|_| gate.offer(now, a, &[1])).collect();
    assert_eq!(
        got,
        [
            Admission::Queued,
            Admission::Queued,
            Admission::Queued,
            Admission::RateLimited,
            Admission::RateLimited
        ]
    );
    // Port 2 has its own bucket and its own share of the queue.
    assert_eq!(gate.offer(now, b, &[2]), Admission::Queued);
    let drained = drain(&rx);
    assert_eq!(drained.len(), 4);
    assert_eq!(
        drained[1],
        Upcall {
            port: b,
            frame: vec![2],
            tunnel: megaflow::TunnelKey::NONE,
            stage: None,
        },
        "ports are served in turn: {drained:?}"
    );
    drop(rx);
    assert_eq!(gate.offer(now, b, &[2]), Admission::Closed);
}

#[test]
fn a_flooding_port_leaves_room_and_turns_for_the_others() {
    let (mut gate, rx) = channel(64, 0, 1);
    let now = Timestamp(0);
    let flood = PortNo(1);
    let queued = (0..1_000)
        .filter(|_| gate.offer(now, flood, &[1]) == Admission::Queued)
        .count();
    // Alone, it gets all of the queue but a sixteenth of headroom, which
    // is for newcomers.
    assert_eq!(queued, 60);
    for p in [2, 3, 4, 2] {
        assert_eq!(gate.offer(now, PortNo(p), &[p as u8]), Admission::Queued);
    }
    // The headroom is used up: the queue is full for everyone.
    assert_eq!(gate.offer(now, PortNo(3), &[3]), Admission::QueueFull);
    // The handler's first batch of 4 has one of each port.
    let mut batch = Vec::new();
    rx.recv_batch(&mut batch, 4, Duration::ZERO).expect("batch");
    let mut ports: Vec<u32> = batch.iter().map(|u| u.port.0).collect();
    ports.sort_unstable();
    assert_eq!(ports, [1, 2, 3, 4]);
    // With four ports waiting, the flooder's share is a fifth: until the
    // handler drains it below, it gets nothing more.
    assert_eq!(gate.offer(now, flood, &[1]), Admission::QueueFull);
    assert_eq!(rx.len(), 60);
    assert_eq!(drain(&rx).len(), 60);
    assert_eq!(gate.offer(now, flood, &[1]), Admission::Queued);
}

#[test]
fn the_handler_wakes_for_a_miss_and_ends_when_the_gates_are_gone() {
    let (gate, rx) = channel(16, 0, 1);
    let mut g2 = gate.fork();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(g2.offer(Timestamp(0), PortNo(7), &[7]), Admission::Queued);
        drop(g2);
    });
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    while got.is_empty() && started.elapsed() < Duration::from_secs(10) {
        rx.recv_batch(&mut got, 8, Duration::from_secs(5))
            .expect("open");
    }
    assert_eq!(got.len(), 1);
    t.join().expect("sender");
    drop(gate);
    got.clear();
    assert_eq!(
        rx.recv_batch(&mut got, 8, Duration::from_secs(5)),
        Err(Disconnected)
    );
}

/// Two handlers asleep: two misses wake both, not one (the other would
/// sleep through the burst until its timeout).
#[test]
fn each_miss_wakes_a_sleeping_handler_while_one_sleeps() {
    let (mut gate, rx) = channel(64, 0, 1);
    let rx = std::sync::Arc::new(rx);
    let (tx_done, done) = std::sync::mpsc::channel();
    let handlers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, tx_done) = (std::sync::Arc::clone(&rx), tx_done.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                // A timeout far longer than the test waits below.
                let _ = rx.recv_batch(&mut out, 1, Duration::from_secs(600));
                let _ = tx_done.send(out.len());
            })
        })
        .collect();
    // Both asleep before the misses come.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rx.shared.lock().sleeping < 2 {
        assert!(std::time::Instant::now() < deadline, "handlers never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    for p in 1..=2 {
        assert_eq!(
            gate.offer(Timestamp(0), PortNo(p), &[p as u8]),
            Admission::Queued
        );
    }
    let got: Vec<usize> = (0..2)
        .map(|_| {
            done.recv_timeout(Duration::from_secs(10))
                .expect("a handler woke")
        })
        .collect();
    assert_eq!(got, [1, 1], "each took one miss");
    for h in handlers {
        h.join().expect("handler");
    }
}

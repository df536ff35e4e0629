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

#[test]
fn gate_limits_per_port_and_queue_bounds() {
    let (mut gate, rx) = channel(4, 1000, 3);
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
    // Port 2 has its own bucket, but only one queue slot is left.
    assert_eq!(gate.offer(now, b, &[2]), Admission::Queued);
    assert_eq!(gate.offer(now, b, &[2]), Admission::QueueFull);
    let drained: Vec<Upcall> = rx.try_iter().collect();
    assert_eq!(drained.len(), 4);
    assert_eq!(
        drained[3],
        Upcall {
            port: b,
            frame: vec![2]
        }
    );
    drop(rx);
    assert_eq!(gate.offer(now, b, &[2]), Admission::Closed);
}

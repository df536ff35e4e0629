use super::*;
use crate::PortNo;

fn recv_all(p: &mut MemoryPort) -> Vec<(Vec<u8>, PacketMeta)> {
    let mut b = PacketBatch::new();
    let mut out = Vec::new();
    loop {
        let n = p.recv_batch(&mut b).unwrap();
        assert_eq!(n, b.len());
        if n == 0 {
            return out;
        }
        out.extend(b.iter().map(|p| (p.data.to_vec(), p.meta)));
    }
}

#[test]
fn pair_delivers_both_ways() {
    let (mut a, mut b) = MemoryPort::pair("a", "b");
    assert_eq!((a.name(), b.name()), ("a", "b"));
    let p1 = vec![1u8; 60];
    let p2 = vec![2u8; 1514];
    assert_eq!(a.send_batch(&[&p1, &p2], Timestamp(5)).unwrap(), 2);
    assert!(recv_all(&mut a).is_empty(), "a does not hear itself");
    let got = recv_all(&mut b);
    assert_eq!(
        got,
        vec![
            (p1.clone(), PacketMeta::new(Timestamp(5))),
            (p2.clone(), PacketMeta::new(Timestamp(5)))
        ]
    );

    assert_eq!(b.send_batch(&[&p2], Timestamp(6)).unwrap(), 1);
    assert_eq!(
        recv_all(&mut a),
        vec![(p2.clone(), PacketMeta::new(Timestamp(6)))]
    );

    let sa = a.stats();
    assert_eq!(
        (sa.tx_packets, sa.tx_bytes, sa.rx_packets, sa.rx_bytes),
        (2, 1574, 1, 1514)
    );
    let sb = b.stats();
    assert_eq!(
        (sb.tx_packets, sb.tx_bytes, sb.rx_packets, sb.rx_bytes),
        (1, 1514, 2, 1574)
    );
    assert_eq!(
        (sa.tx_dropped, sa.rx_dropped, sb.tx_dropped, sb.rx_dropped),
        (0, 0, 0, 0)
    );
}

#[test]
fn full_queue_drops_and_counts_tx() {
    let (mut a, mut b) = MemoryPort::pair_with_capacity("a", "b", 4);
    let pkts: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 64]).collect();
    let refs: Vec<&[u8]> = pkts.iter().map(|p| &p[..]).collect();
    assert_eq!(a.send_batch(&refs, Timestamp(1)).unwrap(), 4);
    let s = a.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (4, 6));
    assert_eq!(
        b.stats().rx_dropped,
        0,
        "a send drop is counted once, at the sender"
    );
    let got: Vec<Vec<u8>> = recv_all(&mut b).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        got,
        pkts[..4].to_vec(),
        "the oldest packets were kept, in order"
    );
    // Room again once received.
    assert_eq!(a.send_batch(&refs[4..6], Timestamp(2)).unwrap(), 2);
    assert_eq!(recv_all(&mut b).len(), 2);
    assert_eq!(a.stats().tx_dropped, 6);
}

#[test]
fn inject_and_take_tx_on_a_lone_port() {
    let mut p = MemoryPort::with_capacity("p", 3);
    let meta = PacketMeta::with_in_port(Timestamp(42), PortNo(9));
    for i in 0..5u8 {
        assert_eq!(p.inject(&[i; 60], meta), i < 3);
    }
    assert_eq!(p.stats().rx_dropped, 2);
    let got = recv_all(&mut p);
    assert_eq!(got.len(), 3);
    assert!(
        got.iter().all(|(_, m)| *m == meta),
        "injected metadata is delivered as is"
    );
    assert_eq!(p.stats().rx_packets, 3);

    assert_eq!(
        p.send_batch(&[&[7u8; 61], &[8u8; 62]], Timestamp(3))
            .unwrap(),
        2
    );
    assert!(
        recv_all(&mut p).is_empty(),
        "a lone port's tx does not loop back"
    );
    assert_eq!(p.take_tx(), vec![vec![7u8; 61], vec![8u8; 62]]);
    assert!(p.take_tx().is_empty());
}

#[test]
fn recv_is_bounded_by_the_batch() {
    let mut p = MemoryPort::new("p");
    let h = p.handle();
    for i in 0..(BATCH_SIZE + 8) {
        assert!(h.inject(&(i as u32).to_be_bytes(), PacketMeta::default()));
    }
    assert_eq!(h.rx_queued(), BATCH_SIZE + 8);
    let mut b = PacketBatch::new();
    assert_eq!(p.recv_batch(&mut b).unwrap(), BATCH_SIZE);
    assert_eq!(b.get(0).unwrap().data, &0u32.to_be_bytes());
    assert_eq!(p.recv_batch(&mut b).unwrap(), 8);
    assert_eq!(b.get(0).unwrap().data, &(BATCH_SIZE as u32).to_be_bytes());
    assert_eq!(p.recv_batch(&mut b).unwrap(), 0);
    assert!(b.is_empty(), "recv clears the batch");
}

#[test]
fn mtu_drops_long_packets() {
    let (mut a, mut b) = MemoryPort::pair("a", "b");
    a.set_mtu(100);
    b.set_mtu(100);
    assert_eq!(
        a.send_batch(&[&[0u8; 100], &[0u8; 101]], Timestamp(0))
            .unwrap(),
        1
    );
    assert_eq!(a.stats().tx_dropped, 1);
    assert!(!a.inject(&[0u8; 101], PacketMeta::default()));
    assert_eq!(a.stats().rx_dropped, 1);
    assert_eq!(recv_all(&mut b).len(), 1);
}

#[test]
fn handle_works_across_threads() {
    let (a, mut b) = MemoryPort::pair("a", "b");
    let ha = a.handle();
    let hb = b.handle();
    assert_eq!(hb.port_name(), "b");
    let mut a = a;
    let t = std::thread::spawn(move || {
        // The port moves to its own thread, as a datapath would own it.
        let mut batch = PacketBatch::new();
        let mut seen = 0;
        while seen < 100 {
            seen += a.recv_batch(&mut batch).unwrap();
            let fwd: Vec<&[u8]> = batch.iter().map(|p| p.data).collect();
            a.send_batch(&fwd, Timestamp(1)).unwrap();
            std::thread::yield_now();
        }
        a.stats()
    });
    for i in 0..100u8 {
        while !ha.inject(&[i; 60], PacketMeta::default()) {
            std::thread::yield_now();
        }
    }
    let stats = t.join().unwrap();
    assert_eq!((stats.rx_packets, stats.tx_packets), (100, 100));
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 100);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, (p, m))| p[0] == i as u8 && m.ts == Timestamp(1)));
    assert_eq!(hb.tx_queued(), 0);
}

#[test]
fn take_tx_with_meta_keeps_send_time() {
    let mut p = MemoryPort::new("p");
    p.send_batch(&[&[1u8]], Timestamp(77)).unwrap();
    let h = p.handle();
    assert_eq!(h.tx_queued(), 1);
    assert_eq!(
        h.take_tx_with_meta(),
        vec![(vec![1u8], PacketMeta::new(Timestamp(77)))]
    );
}

#[test]
fn memory_types_are_send() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<MemoryPort>();
    send::<MemoryHandle>();
    sync::<MemoryHandle>();
}

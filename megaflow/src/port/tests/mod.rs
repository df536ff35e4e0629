use super::*;

fn meta(ts: u64) -> PacketMeta {
    PacketMeta::new(Timestamp(ts))
}

#[test]
fn batch_push_get_iter() {
    let mut b = PacketBatch::new();
    assert!(b.is_empty());
    assert!(b.push(&[1, 2, 3], meta(10)));
    assert!(b.push(&[], PacketMeta::with_in_port(Timestamp(11), PortNo(7))));
    assert!(b.push(&[4; 100], meta(12)));
    assert_eq!(b.len(), 3);
    assert_eq!(b.bytes(), 103);
    assert_eq!(b.get(0).map(|p| p.data), Some(&[1u8, 2, 3][..]));
    assert_eq!(b.get(1).map(|p| p.meta.in_port), Some(Some(PortNo(7))));
    assert_eq!(b.get(2).map(|p| p.data.len()), Some(100));
    assert!(b.get(3).is_none());
    let ts: Vec<u64> = b.iter().map(|p| p.meta.ts.0).collect();
    assert_eq!(ts, vec![10, 11, 12]);
    assert_eq!(b.iter().len(), 3);

    b.get_mut(0).unwrap()[0] = 9;
    b.meta_mut(0).unwrap().in_port = Some(PortNo(3));
    let p = b.get(0).unwrap();
    assert_eq!(p.data, &[9, 2, 3]);
    assert_eq!(p.meta.in_port, Some(PortNo(3)));
    assert!(b.get_mut(3).is_none());
    assert!(b.meta_mut(3).is_none());
}

#[test]
fn batch_full_and_oversized() {
    let mut b = PacketBatch::new();
    assert!(!b.push(&vec![0; MAX_FRAME_LEN + 1], meta(0)));
    assert!(b.is_empty());
    assert!(b.push(&vec![0; MAX_FRAME_LEN], meta(0)));
    for i in 1..BATCH_SIZE {
        assert!(b.push(&[i as u8; 60], meta(i as u64)));
    }
    assert!(b.is_full());
    assert!(!b.push(&[0; 60], meta(0)));
    assert_eq!(b.len(), BATCH_SIZE);
    assert_eq!(
        b.get(BATCH_SIZE - 1).unwrap().data,
        &[(BATCH_SIZE - 1) as u8; 60][..]
    );
}

#[test]
fn batch_clear_reuses_buffer() {
    let mut b = PacketBatch::new();
    for _ in 0..BATCH_SIZE {
        assert!(b.push(&[0xab; 1514], meta(0)));
    }
    let cap = b.data.capacity();
    let ptr = b.data.as_ptr();
    for round in 0..10u8 {
        b.clear();
        assert!(b.is_empty());
        for _ in 0..BATCH_SIZE {
            assert!(b.push(&[round; 1514], meta(0)));
        }
        assert!(b.iter().all(|p| p.data.iter().all(|&x| x == round)));
    }
    assert_eq!(b.data.capacity(), cap);
    assert_eq!(b.data.as_ptr(), ptr);
}

/// A port that records the calls to `send_batch`.
#[derive(Default)]
struct Recorder {
    calls: Vec<(Vec<Vec<u8>>, Timestamp)>,
}

impl Port for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn recv_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, PortError> {
        batch.clear();
        Ok(0)
    }
    fn send_batch(&mut self, pkts: &[&[u8]], now: Timestamp) -> Result<usize, PortError> {
        self.calls
            .push((pkts.iter().map(|p| p.to_vec()).collect(), now));
        Ok(pkts.len())
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

#[test]
fn default_send_groups_runs_of_equal_timestamps() {
    let mut b = PacketBatch::new();
    for (i, ts) in [1u64, 1, 2, 2, 2, 3, 1].iter().enumerate() {
        assert!(b.push(&[i as u8], meta(*ts)));
    }
    let mut r = Recorder::default();
    assert_eq!(r.send(&b).unwrap(), 7);
    let shape: Vec<(Vec<Vec<u8>>, u64)> = r.calls.iter().map(|(p, t)| (p.clone(), t.0)).collect();
    assert_eq!(
        shape,
        vec![
            (vec![vec![0], vec![1]], 1),
            (vec![vec![2], vec![3], vec![4]], 2),
            (vec![vec![5]], 3),
            (vec![vec![6]], 1),
        ]
    );
    r.calls.clear();
    assert_eq!(r.send(&PacketBatch::new()).unwrap(), 0);
    assert!(r.calls.is_empty());
}

#[test]
fn errors_name_the_port() {
    let e = PortError::PacketTooLarge {
        port: "p0".into(),
        len: 70_000,
        limit: MAX_FRAME_LEN,
    };
    assert_eq!(e.port(), "p0");
    assert!(e.to_string().contains("p0") && e.to_string().contains("70000"));
    let e = PortError::UnsupportedLinkType {
        port: "r".into(),
        file: "x.pcapng".into(),
        link_type: "LINUX_SLL (113)".into(),
        interface: Some(2),
    };
    let s = e.to_string();
    assert!(
        s.contains("x.pcapng") && s.contains("LINUX_SLL (113)") && s.contains("interface 2"),
        "{s}"
    );
    let e = PortError::Io {
        port: "w".into(),
        context: "writing f".into(),
        source: io::ErrorKind::Other.into(),
    };
    let d = e.duplicate();
    assert_eq!(d.to_string(), e.to_string());
    assert!(!d.is_eof());
    assert!(PortError::Eof { port: "r".into() }.is_eof());
}

#[test]
fn ports_are_send() {
    fn send<T: Send>() {}
    send::<Box<dyn Port>>();
    send::<PacketBatch>();
    send::<PortError>();
}

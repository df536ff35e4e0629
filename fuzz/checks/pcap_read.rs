//! Fuzz target for capture files (`megaflow::port::PcapReader`, pcap and
//! pcapng): any bytes are read or refused without a panic; every frame
//! read is within the length the reader promises, and the reader stops.
//!
//! Input: arbitrary bytes, as a capture file.

use megaflow::port::{PacketBatch, PcapReader, Port};

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(mut r) = PcapReader::from_reader("fuzz", "fuzz.pcap", data) else {
        return;
    };
    let mut batch = PacketBatch::new();
    // Each successful batch consumes input: at most one batch per byte.
    for _ in 0..=data.len() {
        match r.recv_batch(&mut batch) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                assert_eq!(batch.iter().count(), n, "the batch holds what was returned");
                for p in batch.iter() {
                    assert!(p.data.len() <= data.len(), "a frame longer than the file");
                }
            }
        }
    }
    panic!("the reader did not stop");
}

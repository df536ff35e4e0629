//! Fuzz target for the OpenFlow codec (1.3 to 1.5): any bytes must parse
//! or fail with an error that maps to an ERROR the spec defines, without
//! a panic; a 1.3 message that parses emits bytes that parse to the same
//! message; one of 1.4 or 1.5 a switch receives emits bytes of its
//! version that parse and emit the same bytes again (those versions' forms
//! are kept as 1.3's: a `load` comes back a `set_field`); the framer cuts
//! any stream without a panic.
//!
//! Input: arbitrary bytes, parsed as one message (with its header length
//! patched to the input's length, so bodies are reached) and as a stream.

use openflow::{parse, Framer};

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let mut one = data.to_vec();
    if one.len() >= 4 && one.len() <= usize::from(u16::MAX) {
        let n = one.len() as u16;
        one[2..4].copy_from_slice(&n.to_be_bytes());
    }
    match parse(&one) {
        Ok((h, m)) if h.version == openflow::V13 || m.ty() == openflow::MsgType::Hello => {
            let again = m.to_bytes(h.xid).expect("a parsed message fits");
            let (_, back) = parse(&again).expect("emitted bytes parse");
            assert_eq!(back, m);
        }
        Ok((h, m)) => {
            // Replies and asynchronous messages are written, never read,
            // in 1.4 and 1.5.
            if m.ty().switch_only() {
                return;
            }
            let once = m
                .to_bytes_as(h.version, h.xid)
                .expect("a parsed message fits");
            let (_, back) = parse(&once).expect("emitted bytes parse");
            let twice = back.to_bytes_as(h.version, h.xid).expect("fits");
            assert_eq!(once, twice, "{m:?}");
        }
        Err(e) => assert!(e.ofp_error().is_defined(), "{e}"),
    }
    let mut f = Framer::new();
    f.push(data);
    while let Ok(Some(m)) = f.next_message() {
        let _ = parse(&m);
    }
}

//! Fuzz target for packet extraction: any bytes must parse without a panic,
//! into a key that is overwritten whole, with layout offsets inside the input.
//!
//! Input: the first 4 bytes (little-endian) are the ingress port when there
//! are at least 4; the rest is the frame. Shorter inputs are a frame on port 0.

use megaflow::extract::{extract, extract_into, ETH_TYPE_NONE, MAX_VLAN_TAGS, NO_OFFSET};
use megaflow::key::{FlowKey, KEY_WORDS, VLAN_PRESENT};

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let (in_port, pkt) = match data.split_first_chunk::<4>() {
        Some((port, rest)) => (u32::from_le_bytes(*port), rest),
        None => (0, data),
    };

    // Start from a key with every bit set: extraction must overwrite it all.
    let mut key = FlowKey::from_words([u64::MAX; KEY_WORDS]);
    let ex = extract_into(in_port, pkt, &mut key);
    assert_eq!(key, extract(in_port, pkt), "key not overwritten whole");
    assert_eq!(key.in_port(), in_port as u64);

    let len = pkt.len();
    let l = ex.layout;
    assert!(l.vlans as usize <= MAX_VLAN_TAGS, "{l:?}");
    for off in [l.l3, l.l4, l.l3_end] {
        assert!(
            off == NO_OFFSET || off as usize <= len,
            "{l:?} outside {len} bytes"
        );
    }
    if l.l3_end != NO_OFFSET {
        assert!(l.l3 != NO_OFFSET && l.l3 < l.l3_end, "{l:?}");
    }
    if l.l4 != NO_OFFSET {
        assert!(
            l.l3_end != NO_OFFSET && l.l3 < l.l4 && l.l4 < l.l3_end,
            "{l:?}"
        );
    }

    // Key fields keep their documented forms.
    let ty = key.eth_type();
    assert!(
        ty == 0 || ty >= 0x0600 || ty == ETH_TYPE_NONE as u64,
        "eth_type {ty:#x}"
    );
    if key.vlan_tci() != 0 {
        assert_ne!(key.vlan_tci() & VLAN_PRESENT as u64, 0);
    }
    if len < 14 {
        assert!(ex.error.is_some());
    }
}

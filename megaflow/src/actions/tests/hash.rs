//! `hash`: the `dp_hash` a next stage matches.

use super::*;
use crate::frame::{FrameSpec, L4};

fn hash_of(f: &[u8], alg: HashAlg, basis: u32) -> u32 {
    let mut key = FlowKey::ZERO;
    let layout = extract_into(1, f, &mut key).layout;
    dp_hash(f, &layout, alg, basis)
}

#[test]
fn the_symmetric_hash_is_the_same_both_ways_and_the_plain_one_is_not() {
    let (a, b) = (0xc612_0001, 0xc613_0002);
    let mut differ = 0;
    for sp in 1000..1100u16 {
        for (l4, back) in [
            (L4::udp(sp, 53), L4::udp(53, sp)),
            (L4::tcp(sp, 80), L4::tcp(80, sp)),
        ] {
            let fwd = FrameSpec::ipv4(a, b, l4).build();
            let rev = FrameSpec::ipv4(b, a, back).build();
            let s = hash_of(&fwd, HashAlg::SymL4, 0);
            assert_eq!(s, hash_of(&rev, HashAlg::SymL4, 0), "port {sp}");
            assert_ne!(s, 0, "0 is 'not computed'");
            differ += u32::from(hash_of(&fwd, HashAlg::L4, 0) != hash_of(&rev, HashAlg::L4, 0));
            // The basis changes the hash.
            assert_ne!(s, hash_of(&fwd, HashAlg::SymL4, 7));
        }
    }
    assert!(
        differ >= 190,
        "the plain hash tells directions apart: {differ}/200"
    );
}

#[test]
fn the_hash_spreads_connections_over_the_low_bits() {
    let mut counts = [0u32; 16];
    for i in 0..4096u32 {
        let f = FrameSpec::ipv4(
            0xc612_0000 | i,
            0xc613_0001,
            L4::udp(1024 + (i % 7) as u16, 53),
        )
        .build();
        counts[(hash_of(&f, HashAlg::SymL4, 0) & 15) as usize] += 1;
    }
    // 256 expected each; a fair hash stays well inside this.
    assert!(
        counts.iter().all(|&c| (180..=340).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn hash_then_recirc_hands_the_hash_to_the_next_stage() {
    let f = FrameSpec::ipv4(0xc612_0001, 0xc613_0002, L4::udp(5, 6)).build();
    let mut pkt = f.clone();
    let mut key = FlowKey::ZERO;
    let mut layout = extract_into(1, &pkt, &mut key).layout;
    let acts = [
        DpAction::Hash {
            alg: HashAlg::L4,
            basis: 3,
        },
        DpAction::Recirc(9),
    ];
    let out = execute(&acts, &mut pkt, &mut layout, &mut CountSink::default());
    assert_eq!(out.dp_hash, Some(hash_of(&f, HashAlg::L4, 3)));
    assert_eq!(out.recirc, Some(9));
    let ct = conntrack::CtMeta::default();
    crate::datapath::next_stage(&mut key, &pkt, &out, &ct, layout);
    assert_eq!(key.dp_hash() as u32, hash_of(&f, HashAlg::L4, 3));
    assert_eq!(key.recirc_id(), 9);
    assert_eq!(
        format!("{}", Actions::new(acts.to_vec())),
        "hash(l4(3)),recirc(0x9)"
    );
}

//! Fuzz target for `fte_match_param` decoding: any (criteria, mask, value)
//! bytes must be checked by `Encoded::from_bytes` and decoded by
//! `offload::prm::decode` without a panic; an accepted buffer keeps its
//! value bits inside its mask; a decoded match that encodes again decodes
//! to itself.
//!
//! Input: byte 0 is `match_criteria_enable`; byte 1 selects the source-port
//! mode (bit 0: misc.source_port or reg_c_0 metadata) and whether the
//! buffer lengths are kept raw (bit 1; otherwise they are cut to a multiple
//! of 4, at most 448, to reach the decoder); the rest is split in half into
//! mask and value. The value is tried as given and ANDed with the mask.

use megaflow::PortNo;
use offload::prm::{decode, encode, Encoded, PortTable, SourcePortMode, MATCH_PARAM_LEN};
use offload::Vport;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let [criteria, sel, rest @ ..] = data else {
        return;
    };
    let mode = if sel & 1 == 0 {
        SourcePortMode::MiscSourcePort
    } else {
        SourcePortMode::REG_C0_UPPER_16
    };
    let (mut mask, mut value) = rest.split_at(rest.len() / 2);
    if sel & 2 == 0 {
        let cut = |b: &[u8]| b.len().min(MATCH_PARAM_LEN) / 4 * 4;
        mask = &mask[..cut(mask)];
        value = &value[..cut(value)];
    }
    let mut ports = PortTable::new();
    for (i, v) in [0u16, 1, 2, 3, 4, 0xfffe, 0xffff, 100]
        .into_iter()
        .enumerate()
    {
        ports.insert(PortNo(i as u32 + 1), Vport(v));
    }
    let anded: Vec<u8> = value
        .iter()
        .zip(mask.iter().chain(std::iter::repeat(&0)))
        .map(|(v, m)| v & m)
        .collect();
    for value in [value, &anded[..]] {
        let Ok(e) = Encoded::from_bytes(*criteria, mask, value) else {
            continue;
        };
        assert_eq!(e.mask().len(), e.match_sz());
        for (m, v) in e.mask().iter().zip(e.value()) {
            assert_eq!(v & !m, 0, "value bit outside the mask in {e:?}");
        }
        let Ok(m) = decode(&e, mode, &ports) else {
            continue;
        };
        if let Ok(e2) = encode(&m, mode, &ports) {
            assert_eq!(decode(&e2, mode, &ports), Ok(m), "{e:?} -> {m:?} -> {e2:?}");
        }
    }
}

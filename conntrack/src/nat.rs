//! NAT: what a `ct(nat(...))` asks for, and the choice of a free
//! translated tuple.
//!
//! The search is Open vSwitch's: the address is picked by a hash of the
//! connection (only the source address with `persistent`) within the
//! range; ports are tried from a hashed (or, with `random`, a random)
//! starting point in rounds of 128, 64, 32, 16 and 8 consecutive ports, each
//! round from a new random start, and the first whose reply tuple is free
//! wins. Without a source-port range a SNAT (and any DNAT whose reply
//! collides) keeps the original port if it can, else stays in its class:
//! 1-511, 600-1023 or 1024-65535. ICMP queries translate their id; ICMPv6
//! queries and other protocols translate addresses only.

use crate::packet::{PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use crate::tuple::{Addr, Tuple};
use crate::SplitMix;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    Src,
    Dst,
}

/// `nat(src|dst=ADDR[-ADDR][:PORT[-PORT]],random|hash,persistent)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NatRange {
    pub kind: NatKind,
    /// All zero: keep the address, translate ports only.
    pub addr_min: Addr,
    pub addr_max: Addr,
    /// 0: no port range.
    pub port_min: u16,
    pub port_max: u16,
    pub random: bool,
    pub persistent: bool,
}

/// The `nat` part of a `ct()`: with no range, packets of connections
/// committed with one are translated; with one, a new connection committed
/// here gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NatSpec {
    pub range: Option<NatRange>,
}

/// A connection's NAT, as stored: which side was translated.
pub const NAT_NONE: u8 = 0;
pub const NAT_SRC: u8 = 1;
pub const NAT_DST: u8 = 2;

fn pat_proto(t: &Tuple) -> bool {
    matches!(t.proto, PROTO_TCP | PROTO_UDP | 132) || (t.proto == PROTO_ICMP && !t.v6)
}

fn port_class(p: u16) -> (u16, u16) {
    match p {
        0..=511 => (1, 511),
        512..=1023 => (600, 1023),
        _ => (1024, 65535),
    }
}

/// Searches `[min, max]` for a free value: rounds of at most 128 tries,
/// halving down to 8, each from a new random start after the first.
fn search(
    min: u16,
    max: u16,
    start: u16,
    rng: &mut SplitMix,
    mut free: impl FnMut(u16) -> bool,
) -> Option<u16> {
    let size = (max - min) as u32 + 1;
    let mut attempts = size.min(128);
    let mut curr = start;
    loop {
        let mut v = curr;
        for _ in 0..attempts {
            if free(v) {
                return Some(v);
            }
            v = if v >= max || v < min { min } else { v + 1 };
        }
        if attempts < size && attempts >= 16 {
            attempts /= 2;
            curr = min + (rng.next() % size as u64) as u16;
        } else {
            return None;
        }
    }
}

/// Chooses the reply tuple of a new connection `fwd` translated by `r`:
/// `free(rev)` says whether a reply tuple is unused. `None`: exhausted.
pub(crate) fn choose(
    fwd: &Tuple,
    r: &NatRange,
    hash: u64,
    rng: &mut SplitMix,
    mut free: impl FnMut(&Tuple) -> bool,
) -> Option<Tuple> {
    let v6 = fwd.v6;
    let mut rev = fwd.reverse()?;
    let zero = r.addr_min == Addr::default();
    if !zero {
        let (lo, hi) = (
            r.addr_min.to_u128(v6),
            r.addr_max.to_u128(v6).max(r.addr_min.to_u128(v6)),
        );
        let span = (hi - lo).min(0xffff_fffe) + 1;
        let a = Addr::from_u128(lo + (hash as u128 % span), v6);
        match r.kind {
            NatKind::Src => rev.dst = a,
            NatKind::Dst => rev.src = a,
        }
    }
    if !pat_proto(fwd) {
        return free(&rev).then_some(rev);
    }
    let icmp = fwd.proto == PROTO_ICMP;
    let port_off = if r.random { rng.next() } else { hash };
    // Destination ports first, when a DNAT names them.
    if r.kind == NatKind::Dst && r.port_min != 0 && !icmp {
        let (lo, hi) = (r.port_min, r.port_max.max(r.port_min));
        let start = lo + (port_off % ((hi - lo) as u64 + 1)) as u16;
        let mut cand = rev;
        if let Some(p) = search(lo, hi, start, rng, |p| {
            cand.sport = p;
            free(&cand)
        }) {
            rev.sport = p;
            return Some(rev);
        }
    }
    // Then source ports (for ICMP: the id, both directions).
    let orig = fwd.sport;
    let (lo, hi, start) = if r.kind == NatKind::Src && r.port_min != 0 {
        let (lo, hi) = (r.port_min, r.port_max.max(r.port_min));
        (lo, hi, lo + (port_off % ((hi - lo) as u64 + 1)) as u16)
    } else if icmp {
        (1, 65535, orig.max(1))
    } else {
        let (lo, hi) = port_class(orig);
        (lo, hi, orig)
    };
    let mut cand = rev;
    let p = search(lo, hi, start, rng, |p| {
        if icmp {
            cand.sport = p;
        } else {
            cand.dport = p;
        }
        free(&cand)
    })?;
    if icmp {
        rev.sport = p;
    } else {
        rev.dport = p;
    }
    Some(rev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn fwd(sport: u16) -> Tuple {
        Tuple {
            src: Addr::v4([198, 18, 0, 2]),
            dst: Addr::v4([198, 19, 0, 9]),
            sport,
            dport: 80,
            proto: PROTO_TCP,
            v6: false,
        }
    }

    fn snat(min: u16, max: u16) -> NatRange {
        NatRange {
            kind: NatKind::Src,
            addr_min: Addr::v4([198, 18, 255, 1]),
            addr_max: Addr::v4([198, 18, 255, 1]),
            port_min: min,
            port_max: max,
            random: false,
            persistent: false,
        }
    }

    #[test]
    fn snat_keeps_the_port_when_free_and_rewrites_the_reply_destination() {
        let mut rng = SplitMix(1);
        let rev = choose(&fwd(40000), &snat(0, 0), 7, &mut rng, |_| true).unwrap();
        assert_eq!(rev.dst, Addr::v4([198, 18, 255, 1]));
        assert_eq!((rev.src, rev.sport, rev.dport), (fwd(0).dst, 80, 40000));
    }

    #[test]
    fn a_small_range_is_used_up_exactly_then_reports_exhaustion() {
        let mut rng = SplitMix(2);
        let mut used = HashSet::new();
        for i in 0..10u16 {
            let rev = choose(
                &fwd(1000 + i),
                &snat(5000, 5009),
                i as u64 * 977,
                &mut rng,
                |t| !used.contains(t),
            )
            .expect("ten ports for ten connections");
            assert!((5000..=5009).contains(&rev.dport));
            used.insert(rev);
        }
        assert_eq!(
            choose(&fwd(2000), &snat(5000, 5009), 3, &mut rng, |t| !used
                .contains(t)),
            None
        );
    }

    #[test]
    fn without_a_range_the_port_stays_in_its_class() {
        let mut rng = SplitMix(3);
        let taken = fwd(700).reverse().unwrap();
        let mut taken = taken;
        taken.dst = Addr::v4([198, 18, 255, 1]);
        let rev = choose(&fwd(700), &snat(0, 0), 1, &mut rng, |t| *t != taken).unwrap();
        assert!(
            (600..=1023).contains(&rev.dport) && rev.dport != 700,
            "{}",
            rev.dport
        );
    }
}

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
    /// `None`: keep the address, translate ports only if they collide.
    pub addrs: Option<AddrRange>,
    /// 0: no port range.
    pub port_min: u16,
    pub port_max: u16,
    pub random: bool,
    /// Open vSwitch's `hash` flag: accepted and printed; hashing is the
    /// default anyway.
    pub hash: bool,
    pub persistent: bool,
}

/// `ADDR[-ADDR]` of a NAT range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrRange {
    pub min: Addr,
    pub max: Addr,
    pub v6: bool,
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
    if let Some(ar) = r.addrs {
        if ar.v6 != v6 {
            // A range of the other family cannot translate this packet.
            return None;
        }
        let (lo, hi) = (
            ar.min.to_u128(v6),
            ar.max.to_u128(v6).max(ar.min.to_u128(v6)),
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
        // The id as it is first (0 included, as Open vSwitch keeps it),
        // then 1..=65535.
        (1, 65535, orig)
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

/// `nat` or `nat(src|dst[=ADDR[-ADDR][:PORT[-PORT]]][,persistent][,hash][,random])`
/// as `ovs-ofctl` prints it.
pub fn format_nat(n: &NatSpec) -> String {
    let Some(r) = n.range else {
        return "nat".into();
    };
    let mut s = String::from(if r.kind == NatKind::Src {
        "nat(src"
    } else {
        "nat(dst"
    });
    if let Some(a) = r.addrs {
        let addr = |x: &Addr| {
            if a.v6 {
                format!("[{}]", x.as_v6())
            } else {
                x.as_v4().to_string()
            }
        };
        s.push('=');
        s.push_str(&addr(&a.min));
        if a.max != a.min {
            s.push('-');
            s.push_str(&addr(&a.max));
        }
        if r.port_min != 0 {
            s.push_str(&format!(":{}", r.port_min));
            if r.port_max != 0 && r.port_max != r.port_min {
                s.push_str(&format!("-{}", r.port_max));
            }
        }
        for (on, flag) in [
            (r.persistent, "persistent"),
            (r.hash, "hash"),
            (r.random, "random"),
        ] {
            if on {
                s.push(',');
                s.push_str(flag);
            }
        }
    }
    s.push(')');
    s
}

fn parse_addr(s: &str) -> Option<(Addr, bool)> {
    let s = s
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(s);
    match s.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(a) => Some((Addr::from_v4(a), false)),
        std::net::IpAddr::V6(a) => Some((Addr::from_v6(a), true)),
    }
}

/// `ADDR[-ADDR][:PORT[-PORT]]` (IPv6 addresses in brackets when a port
/// follows).
fn parse_range(s: &str) -> Result<(AddrRange, u16, u16), String> {
    let bad = || format!("invalid nat range \"{s}\"");
    let (addrs, ports) = match s.rfind(']') {
        Some(end) => match s[end..].find(':') {
            Some(c) => (&s[..end + c], Some(&s[end + c + 1..])),
            None => (s, None),
        },
        None if s.matches(':').count() == 1 => {
            let (a, p) = s.split_once(':').expect("one colon");
            (a, Some(p))
        }
        None => (s, None),
    };
    let (min, max) = match addrs.split_once("]-[") {
        Some((a, b)) => (format!("{a}]"), Some(format!("[{b}"))),
        None if addrs.starts_with('[') => (addrs.to_string(), None),
        None => match addrs.split_once('-') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (addrs.to_string(), None),
        },
    };
    let (lo, v6) = parse_addr(&min).ok_or_else(bad)?;
    let hi = match max {
        Some(m) => {
            let (hi, v6b) = parse_addr(&m).ok_or_else(bad)?;
            if v6b != v6 || hi.to_u128(v6) < lo.to_u128(v6) {
                return Err(bad());
            }
            hi
        }
        None => lo,
    };
    let (pmin, pmax) = match ports {
        None => (0, 0),
        Some(p) => {
            let (a, b) = p.split_once('-').unwrap_or((p, ""));
            let a: u16 = a.parse().map_err(|_| bad())?;
            let b: u16 = if b.is_empty() {
                a
            } else {
                b.parse().map_err(|_| bad())?
            };
            if b < a {
                return Err(bad());
            }
            (a, b)
        }
    };
    Ok((
        AddrRange {
            min: lo,
            max: hi,
            v6,
        },
        pmin,
        pmax,
    ))
}

/// Parses the argument of `nat(...)` (the text inside the parentheses;
/// empty for a bare `nat`), with Open vSwitch's errors.
pub fn parse_nat(arg: &str) -> Result<NatSpec, String> {
    let mut kind = None;
    let mut range = None;
    let (mut persistent, mut hash, mut random) = (false, false, false);
    let mut both = false;
    for kv in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (kv, None),
        };
        match k {
            "src" | "dst" => {
                let kk = if k == "src" {
                    NatKind::Src
                } else {
                    NatKind::Dst
                };
                both |= kind.is_some_and(|x| x != kk);
                kind = Some(kk);
                if let Some(v) = v {
                    range = Some(parse_range(v)?);
                }
            }
            "persistent" => persistent = true,
            "hash" => hash = true,
            "random" => random = true,
            _ => return Err(format!("invalid key \"{k}\" in \"nat\" argument")),
        }
    }
    if both {
        return Err("May only specify one of \"src\" or \"dst\".".into());
    }
    let Some(kind) = kind else {
        if persistent || hash || random {
            return Err("Flags allowed only with \"src\" or \"dst\".".into());
        }
        return Ok(NatSpec { range: None });
    };
    if hash && random {
        return Err("Both \"hash\" and \"random\" are not allowed.".into());
    }
    let (addrs, port_min, port_max) = match range {
        Some((a, lo, hi)) => (Some(a), lo, hi),
        None => (None, 0, 0),
    };
    Ok(NatSpec {
        range: Some(NatRange {
            kind,
            addrs,
            port_min,
            port_max,
            random,
            hash,
            persistent,
        }),
    })
}

impl NatRange {
    /// A range over one address, no ports, no flags.
    pub fn to_addr(kind: NatKind, a: Addr, v6: bool) -> NatRange {
        NatRange {
            kind,
            addrs: Some(AddrRange { min: a, max: a, v6 }),
            port_min: 0,
            port_max: 0,
            random: false,
            hash: false,
            persistent: false,
        }
    }
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
            addrs: Some(AddrRange {
                min: Addr::v4([198, 18, 255, 1]),
                max: Addr::v4([198, 18, 255, 1]),
                v6: false,
            }),
            port_min: min,
            port_max: max,
            random: false,
            hash: false,
            persistent: false,
        }
    }

    #[test]
    fn snat_keeps_the_port_when_free_and_rewrites_the_reply_destination() {
        let mut rng = SplitMix(1);
        let rev =
            choose(&fwd(40000), &snat(0, 0), 7, &mut rng, |_| true).expect("every tuple free");
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
        let taken = fwd(700).reverse().expect("TCP reverses");
        let mut taken = taken;
        taken.dst = Addr::v4([198, 18, 255, 1]);
        let rev = choose(&fwd(700), &snat(0, 0), 1, &mut rng, |t| *t != taken)
            .expect("one tuple taken, the class has more");
        assert!(
            (600..=1023).contains(&rev.dport) && rev.dport != 700,
            "{}",
            rev.dport
        );
    }

    #[test]
    fn nat_text_reads_and_prints_as_open_vswitch() {
        for text in [
            "nat",
            "nat(src)",
            "nat(src=10.0.0.1)",
            "nat(src=10.0.0.1-10.0.0.9:1000-2000,persistent,random)",
            "nat(dst=10.0.0.5:80)",
            "nat(dst=[2001:db8::1]-[2001:db8::9]:8080,hash)",
            "nat(src=[2001:db8::1])",
        ] {
            let arg = text
                .strip_prefix("nat")
                .expect("every case starts with nat");
            let arg = arg
                .strip_prefix('(')
                .and_then(|a| a.strip_suffix(')'))
                .unwrap_or(arg);
            let n = parse_nat(arg).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_nat(&n), text);
        }
        assert_eq!(
            format_nat(&parse_nat("src=2001:db8::1").expect("unbracketed IPv6 reads")),
            "nat(src=[2001:db8::1])"
        );
        for (arg, err) in [
            ("src,dst", "May only specify one"),
            ("random", "Flags allowed only"),
            ("src=10.0.0.1,hash,random", "Both \"hash\" and \"random\""),
            ("src=10.0.0.9-10.0.0.1", "invalid nat range"),
            ("src=10.0.0.1:90-80", "invalid nat range"),
            ("via=1", "invalid key \"via\""),
        ] {
            let e = parse_nat(arg).unwrap_err();
            assert!(e.contains(err), "{arg}: {e}");
        }
    }
}

//! What the control path reads and removes: `dump-conntrack` entries in
//! Open vSwitch's text, per-protocol counts (`ct-stats-show`), and flushes
//! by zone, mark, labels or (partial) tuple (`flush-conntrack`).

use std::fmt::Write;
use std::net::IpAddr;

use crate::packet::{PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use crate::table::{Conn, Proto};
use crate::tcp::STATE_NAMES;
use crate::tuple::{Addr, Tuple};
use crate::Tracker;

/// One connection as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub orig: Tuple,
    pub reply: Tuple,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    /// TCP: both sides' states and the coalesced one.
    pub tcp: Option<([u8; 2], u8)>,
    /// Seconds left.
    pub timeout: u64,
}

impl Entry {
    fn of(c: &Conn, now: u64) -> Entry {
        Entry {
            orig: c.key[0],
            reply: c.key[1],
            zone: c.zone,
            mark: c.mark,
            label: c.label(),
            tcp: match &c.proto {
                Proto::Tcp(t) => Some(([t.peers[0].state, t.peers[1].state], t.coalesced_state())),
                _ => None,
            },
            timeout: c.expires.saturating_sub(now) / 1000,
        }
    }

    /// The line `ovs-appctl dpctl/dump-conntrack [-s]` prints.
    pub fn format(&self, stats: bool) -> String {
        let mut s = self.orig.proto_name();
        s.push_str(",orig=(");
        self.orig.format(&mut s);
        s.push_str("),reply=(");
        self.reply.format(&mut s);
        s.push(')');
        if self.zone != 0 {
            let _ = write!(s, ",zone={}", self.zone);
        }
        if stats {
            let _ = write!(s, ",timeout={}", self.timeout);
        }
        if self.mark != 0 {
            let _ = write!(s, ",mark={}", self.mark);
        }
        if self.label != 0 {
            let _ = write!(s, ",labels={:#x}", self.label);
        }
        if let Some((_, st)) = self.tcp {
            let _ = write!(s, ",protoinfo=(state={})", STATE_NAMES[st as usize]);
        }
        s
    }
}

/// Connections per protocol (`ct-stats-show`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtoCounts {
    pub total: u64,
    pub tcp: u64,
    /// TCP connections by coalesced state.
    pub tcp_states: [u64; 11],
    pub udp: u64,
    pub icmp: u64,
    pub icmpv6: u64,
    pub other: u64,
}

impl ProtoCounts {
    /// The text of `ovs-appctl dpctl/ct-stats-show [-m]` (ICMPv6 printed
    /// too: Open vSwitch counts it and forgets to print it).
    pub fn format(&self, verbose: bool) -> String {
        let mut s = format!("Connections Stats:\n    Total: {}\n", self.total);
        if self.tcp != 0 {
            let _ = writeln!(s, "  TCP: {}", self.tcp);
            if verbose {
                s.push_str("    Conn per TCP states:\n");
                for (i, n) in self.tcp_states.iter().enumerate().filter(|(_, n)| **n != 0) {
                    let _ = writeln!(s, "\t  [{}]={}", STATE_NAMES[i], n);
                }
            }
        }
        for (name, n) in [
            ("UDP", self.udp),
            ("ICMP", self.icmp),
            ("ICMPv6", self.icmpv6),
            ("Other", self.other),
        ] {
            if n != 0 {
                let _ = writeln!(s, "  {name}: {n}");
            }
        }
        s
    }
}

/// A partial tuple: unset fields match anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartialTuple {
    pub src: Option<Addr>,
    pub dst: Option<Addr>,
    pub v6: bool,
    pub proto: Option<u8>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
    pub icmp_id: Option<u16>,
}

impl PartialTuple {
    fn is_empty(&self) -> bool {
        *self == PartialTuple::default()
    }

    fn matches(&self, t: &Tuple) -> bool {
        let (ty, code) = t.icmp_type_code();
        (self.src.is_none() && self.dst.is_none() || self.v6 == t.v6)
            && self.src.is_none_or(|a| a == t.src)
            && self.dst.is_none_or(|a| a == t.dst)
            && self.proto.is_none_or(|p| p == t.proto)
            && (t.is_icmp()
                || (self.sport.is_none_or(|p| p == t.sport)
                    && self.dport.is_none_or(|p| p == t.dport)))
            && (!t.is_icmp()
                || (self.icmp_type.is_none_or(|v| v == ty)
                    && self.icmp_code.is_none_or(|v| v == code)
                    && self.icmp_id.is_none_or(|v| v == t.sport)))
    }

    /// A whole 5-tuple: addresses, protocol and (not ICMP) both ports.
    fn is_full(&self) -> bool {
        let icmp = matches!(self.proto, Some(PROTO_ICMP | PROTO_ICMPV6));
        self.src.is_some()
            && self.dst.is_some()
            && self.proto.is_some()
            && (icmp || (self.sport.is_some() && self.dport.is_some()))
    }

    /// `ct_nw_src=A,ct_nw_dst=B,ct_nw_proto=6,ct_tp_src=P,ct_tp_dst=Q`
    /// (also `ct_ipv6_src/dst`, `icmp_type/code/id`), as `flush-conntrack`.
    pub fn parse(s: &str) -> Result<PartialTuple, String> {
        let mut t = PartialTuple::default();
        for kv in s.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("field {kv} missing value"))?;
            let bad = || format!("failed to parse field {k}");
            match k {
                "ct_nw_src" | "ct_nw_dst" | "ct_ipv6_src" | "ct_ipv6_dst" => {
                    let ip: IpAddr = v.parse().map_err(|_| bad())?;
                    let v6 = k.starts_with("ct_ipv6");
                    let a = match (ip, v6) {
                        (IpAddr::V4(a), false) => Addr::from_v4(a),
                        (IpAddr::V6(a), true) => Addr::from_v6(a),
                        _ => return Err(bad()),
                    };
                    if (t.src.is_some() || t.dst.is_some()) && t.v6 != v6 {
                        return Err("IPv4 and IPv6 addresses mixed in one tuple".into());
                    }
                    t.v6 = v6;
                    if k.ends_with("src") {
                        t.src = Some(a);
                    } else {
                        t.dst = Some(a);
                    }
                }
                "ct_nw_proto" => t.proto = Some(v.parse().map_err(|_| bad())?),
                "ct_tp_src" | "ct_tp_dst" => {
                    if t.proto.is_none() {
                        return Err("port is set without protocol".into());
                    }
                    let p = v.parse().map_err(|_| bad())?;
                    if k == "ct_tp_src" {
                        t.sport = Some(p);
                    } else {
                        t.dport = Some(p);
                    }
                }
                "icmp_type" | "icmp_code" | "icmp_id" => {
                    if !matches!(t.proto, Some(PROTO_ICMP | PROTO_ICMPV6)) {
                        return Err(format!("{k} is set without ct_nw_proto=1 or 58"));
                    }
                    match k {
                        "icmp_type" => t.icmp_type = Some(v.parse().map_err(|_| bad())?),
                        "icmp_code" => t.icmp_code = Some(v.parse().map_err(|_| bad())?),
                        _ => t.icmp_id = Some(v.parse().map_err(|_| bad())?),
                    }
                }
                _ => return Err(format!("invalid conntrack tuple field: {k}")),
            }
        }
        Ok(t)
    }
}

/// What a flush removes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushFilter {
    pub zone: Option<u16>,
    pub mark: Option<(u32, u32)>,
    pub label: Option<(u128, u128)>,
    pub orig: PartialTuple,
    pub reply: PartialTuple,
}

/// Why a flush removed nothing it was asked to.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlushError {
    #[error("Tuple not found")]
    NotFound,
}

fn masked<T: Copy + std::ops::BitAnd<Output = T> + PartialEq>(v: T, f: Option<(T, T)>) -> bool {
    f.is_none_or(|(fv, m)| v & m == fv & m)
}

impl FlushFilter {
    /// `[zone=N] [mark=X[/M]] [labels=Y[/N]] [orig-tuple [reply-tuple]]`.
    pub fn parse(args: &[&str]) -> Result<FlushFilter, String> {
        let mut f = FlushFilter::default();
        let mut rest = args;
        if let Some(z) = rest.first().and_then(|a| a.strip_prefix("zone=")) {
            f.zone = Some(
                z.parse()
                    .map_err(|_| format!("failed to parse zone: {z}"))?,
            );
            rest = &rest[1..];
        }
        if let Some(m) = rest.first().and_then(|a| a.strip_prefix("mark=")) {
            f.mark = Some(
                parse_masked(m, u32::MAX, |s| {
                    parse_int(s).and_then(|v| u32::try_from(v).ok())
                })
                .ok_or_else(|| format!("failed to parse mark: {m}"))?,
            );
            rest = &rest[1..];
        }
        if let Some(l) = rest.first().and_then(|a| a.strip_prefix("labels=")) {
            f.label = Some(
                parse_masked(l, u128::MAX, parse_int)
                    .ok_or_else(|| format!("failed to parse labels: {l}"))?,
            );
            rest = &rest[1..];
        }
        if let Some(t) = rest.first() {
            f.orig = PartialTuple::parse(t)?;
            rest = &rest[1..];
        }
        if let Some(t) = rest.first() {
            f.reply = PartialTuple::parse(t)?;
            rest = &rest[1..];
        }
        if let Some(extra) = rest.first() {
            return Err(format!("unexpected argument: {extra}"));
        }
        Ok(f)
    }

    fn matches(&self, c: &Conn) -> bool {
        self.zone.is_none_or(|z| z == c.zone)
            && masked(c.mark, self.mark)
            && masked(c.label(), self.label)
            && self.orig.matches(&c.key[0])
            && self.reply.matches(&c.key[1])
    }
}

fn parse_int(s: &str) -> Option<u128> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u128::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_masked<T: Copy>(s: &str, all: T, p: impl Fn(&str) -> Option<T>) -> Option<(T, T)> {
    match s.split_once('/') {
        Some((v, m)) => Some((p(v)?, p(m)?)),
        None => Some((p(s)?, all)),
    }
}

impl Tracker {
    /// Every live connection (of `zone`), ordered by zone then tuple.
    pub fn dump(&self, zone: Option<u16>, now: u64) -> Vec<Entry> {
        let mut out = vec![];
        for shard in self.shards() {
            let g = shard.lock();
            out.extend(
                g.conns
                    .iter()
                    .flatten()
                    .filter(|c| c.expires > now && zone.is_none_or(|z| z == c.zone))
                    .map(|c| Entry::of(c, now)),
            );
        }
        out.sort_by(|a, b| {
            (
                a.zone,
                a.orig.v6,
                a.orig.proto,
                a.orig.src,
                a.orig.dst,
                a.orig.sport,
                a.orig.dport,
            )
                .cmp(&(
                    b.zone,
                    b.orig.v6,
                    b.orig.proto,
                    b.orig.src,
                    b.orig.dst,
                    b.orig.sport,
                    b.orig.dport,
                ))
        });
        out
    }

    /// Counts per protocol (of `zone`).
    pub fn proto_counts(&self, zone: Option<u16>, now: u64) -> ProtoCounts {
        let mut n = ProtoCounts::default();
        for shard in self.shards() {
            let g = shard.lock();
            for c in g.conns.iter().flatten() {
                if c.expires <= now || zone.is_some_and(|z| z != c.zone) {
                    continue;
                }
                n.total += 1;
                match (&c.proto, c.key[0].proto) {
                    (Proto::Tcp(t), _) => {
                        n.tcp += 1;
                        n.tcp_states[t.coalesced_state() as usize] += 1;
                    }
                    (_, PROTO_UDP) => n.udp += 1,
                    (_, PROTO_ICMP) => n.icmp += 1,
                    (_, PROTO_ICMPV6) => n.icmpv6 += 1,
                    (_, PROTO_TCP) | (_, _) => n.other += 1,
                }
            }
        }
        n
    }

    /// Removes what `f` matches. A whole original tuple alone (Open
    /// vSwitch's direct form, zone 0 unless given) that matches nothing is
    /// an error.
    pub fn flush(&self, f: &FlushFilter) -> Result<usize, FlushError> {
        let direct =
            f.orig.is_full() && f.reply.is_empty() && f.mark.is_none() && f.label.is_none();
        let f = if direct {
            FlushFilter {
                zone: Some(f.zone.unwrap_or(0)),
                ..*f
            }
        } else {
            *f
        };
        let n = self.retain(|c| !f.matches(c));
        if direct && n == 0 {
            return Err(FlushError::NotFound);
        }
        Ok(n)
    }
}

//! The connection table: shards, lookup by either direction, the
//! decisions of `ct()` for one packet, creation under the limits, NAT
//! reservation, expiry and removal. See the crate docs for the locking.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};

use crate::nat::{self, NatKind, NAT_DST, NAT_NONE, NAT_SRC};
use crate::packet::{self, IcmpKind, Parsed};
use crate::state::*;
use crate::tcp::{self, Tcp};
use crate::timeout::{Class, PolicyError, Timeouts, N_CLASSES};
use crate::tuple::{ConnKey, Tuple};
use crate::{CtMeta, CtSpec, SplitMix};

/// Tracker settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The most connections at once (`dpctl/ct-set-maxconns`).
    pub max_conns: u32,
    /// Lock stripes (rounded up to a power of two).
    pub shards: usize,
    /// TCP sequence and window checks (`dpctl/ct-enable-tcp-seq-chk`).
    pub tcp_seq_check: bool,
    /// Hash seed; `None` picks a random one (keys come from the network).
    pub seed: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_conns: 3_000_000,
            shards: 64,
            tcp_seq_check: true,
            seed: None,
        }
    }
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub created: u64,
    pub removed: u64,
    pub invalid: u64,
    pub related: u64,
    /// Commits refused by the global limit.
    pub table_full: u64,
    /// Commits refused by a zone limit.
    pub zone_full: u64,
    /// New translated connections with no free tuple left.
    pub nat_exhausted: u64,
}

#[derive(Default)]
struct AtomicStats {
    created: AtomicU64,
    removed: AtomicU64,
    invalid: AtomicU64,
    related: AtomicU64,
    table_full: AtomicU64,
    zone_full: AtomicU64,
    nat_exhausted: AtomicU64,
}

/// Zone limits as `dpctl/ct-get-limits` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    /// 0: unlimited.
    pub default: u32,
    /// (zone, limit, count) for the zones asked, or every zone with its own.
    pub zones: Vec<(u16, u32, u32)>,
}

const OTHER_FIRST: u8 = 0;
const OTHER_MULTIPLE: u8 = 1;
pub(crate) const OTHER_BIDIR: u8 = 2;
const ICMP_FIRST: u8 = 0;
const ICMP_REPLY: u8 = 1;
/// No explicit zone limit: the default applies.
const NO_LIMIT: u32 = u32::MAX;
/// A reply tuple reserved by a connection being created.
const PENDING: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp(Tcp),
    Other(u8),
    Icmp(u8),
}

#[derive(Debug, Clone)]
pub(crate) struct Conn {
    /// Original and reply direction.
    pub(crate) key: [Tuple; 2],
    pub(crate) zone: u16,
    pub(crate) nat: u8,
    pub(crate) proto: Proto,
    pub(crate) mark: u32,
    pub(crate) label: [u64; 2],
    /// Milliseconds, the tracker's clock.
    pub(crate) expires: u64,
    /// Hardware: which directions were offered to the FDB's conntrack
    /// table, and whether its packets pass there unseen (crate::hw).
    pub(crate) hw: u8,
}

impl Conn {
    pub(crate) fn label(&self) -> u128 {
        ((self.label[0] as u128) << 64) | self.label[1] as u128
    }
}

#[derive(Default)]
pub(crate) struct Shard {
    /// Entry: `idx << 1 | fwd_only`. An untranslated connection has one
    /// entry that both directions find (the hash is symmetric); a
    /// translated one indexes its original tuple here and its reply tuple
    /// in `nat_rev` of the shard that tuple hashes to.
    index: HashTable<u32>,
    nat_rev: HashMap<ConnKey, u64, foldhash::fast::FixedState>,
    pub(crate) conns: Vec<Option<Conn>>,
    free: Vec<u32>,
    cursor: usize,
}

/// The two halves of the 128-bit product, xored (foldhash's step).
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

fn home(shard: usize, idx: u32) -> u64 {
    ((shard as u64) << 32) | idx as u64
}

impl Shard {
    fn find_local(&self, h: u64, zone: u16, t: &Tuple, now: u64) -> Option<(u32, bool)> {
        let conns = &self.conns;
        let e = self.index.find(h, |&e| {
            let c = conns[(e >> 1) as usize]
                .as_ref()
                .expect("indexed slots are live");
            c.zone == zone && c.expires > now && (c.key[0] == *t || (e & 1 == 0 && c.key[1] == *t))
        })?;
        let c = conns[(e >> 1) as usize]
            .as_ref()
            .expect("indexed slots are live");
        Some((e >> 1, c.key[0] != *t))
    }

    fn taken(&self, h: u64, key: &ConnKey) -> bool {
        // Expired connections still hold their tuples until swept.
        self.find_local(h, key.zone, &key.tuple, 0).is_some() || self.nat_rev.contains_key(key)
    }
}

/// The tracker. Shared (`Arc`) by every datapath thread and the control
/// path.
pub struct Tracker {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::FixedState,
    /// [`sym_hash`](Self::sym_hash)'s keys, from the seed.
    hash_keys: [u64; 6],
    seed: u64,
    count: AtomicU32,
    max_conns: AtomicU32,
    seq_check: AtomicBool,
    zone_count: Box<[AtomicU32]>,
    zone_limit: Box<[AtomicU32]>,
    default_limit: AtomicU32,
    pub(crate) timeouts: Timeouts,
    stats: AtomicStats,
    /// Connection directions offered to the FDB, for the offload thread.
    pub(crate) offers: Mutex<Vec<crate::hw::Offer>>,
    /// Set when an offer is queued, cleared when the queue is taken.
    pub(crate) offered: AtomicBool,
    pub(crate) hw_refreshed: AtomicU64,
}

/// What one update of a found connection says.
enum Verdict {
    Valid,
    ValidNew,
    Invalid,
    Reopen,
}

impl Tracker {
    pub fn new(cfg: Config) -> Tracker {
        let n = cfg.shards.max(1).next_power_of_two();
        let seed = cfg
            .seed
            .unwrap_or_else(|| foldhash::fast::RandomState::default().hash_one(0x5eed_u64));
        Tracker {
            shards: (0..n)
                .map(|_| {
                    Mutex::new(Shard {
                        nat_rev: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(seed)),
                        ..Shard::default()
                    })
                })
                .collect(),
            hasher: foldhash::fast::FixedState::with_seed(seed),
            hash_keys: {
                let mut r = SplitMix(seed);
                // Odd, so the last multiply never collapses.
                [0; 6].map(|_| r.next() | 1)
            },
            seed,
            count: AtomicU32::new(0),
            max_conns: AtomicU32::new(cfg.max_conns),
            seq_check: AtomicBool::new(cfg.tcp_seq_check),
            zone_count: (0..=u16::MAX as usize).map(|_| AtomicU32::new(0)).collect(),
            zone_limit: (0..=u16::MAX as usize)
                .map(|_| AtomicU32::new(NO_LIMIT))
                .collect(),
            default_limit: AtomicU32::new(0),
            timeouts: Timeouts::new(),
            stats: AtomicStats::default(),
            offers: Mutex::new(Vec::new()),
            offered: AtomicBool::new(false),
            hw_refreshed: AtomicU64::new(0),
        }
    }

    /// The same value for both directions of an untranslated connection:
    /// the two endpoints in a fixed order (by value), then a folded
    /// multiply per word under the seed. A generic `Hash` of the tuple
    /// (byte-wise array ordering and writes) was a sixth of a tracked
    /// packet's time.
    #[inline]
    fn sym_hash(&self, zone: u16, t: &Tuple) -> u64 {
        let (s, d) = (t.src.words(), t.dst.words());
        let (a, b, ports) = if t.is_icmp() {
            let (ty, code) = t.icmp_type_code();
            let ty = packet::icmp_request_type(ty, t.v6).unwrap_or(ty);
            let (a, b) = if s <= d { (s, d) } else { (d, s) };
            (
                a,
                b,
                u64::from(t.sport) << 16 | u64::from(ty) << 8 | u64::from(code),
            )
        } else {
            let (e1, e2) = ((s, t.sport), (d, t.dport));
            let ((a, pa), (b, pb)) = if e1 <= e2 { (e1, e2) } else { (e2, e1) };
            (a, b, u64::from(pa) << 16 | u64::from(pb))
        };
        let rest = ports << 32 | u64::from(t.proto) << 24 | u64::from(t.v6) << 16 | u64::from(zone);
        let k = &self.hash_keys;
        let h = fold_mul(a.0 ^ k[0], a.1 ^ k[1]);
        let h = fold_mul(h ^ b.0 ^ k[2], b.1 ^ k[3]);
        fold_mul(h ^ rest ^ k[4], k[5])
    }

    fn shard_of(&self, h: u64) -> usize {
        ((h >> 32) as usize) & (self.shards.len() - 1)
    }

    pub(crate) fn shards(&self) -> &[Mutex<Shard>] {
        &self.shards
    }

    /// Finds the connection `t` belongs to in `zone`: its home shard,
    /// locked, its slot, and whether `t` is the reply direction.
    pub(crate) fn locate(
        &self,
        zone: u16,
        t: &Tuple,
        now: u64,
    ) -> Option<(MutexGuard<'_, Shard>, usize, u32, bool)> {
        let h = self.sym_hash(zone, t);
        let s = self.shard_of(h);
        let g = self.shards[s].lock();
        if let Some((idx, reply)) = g.find_local(h, zone, t, now) {
            return Some((g, s, idx, reply));
        }
        let at = *g.nat_rev.get(&ConnKey { tuple: *t, zone })?;
        drop(g);
        if at == PENDING {
            return None;
        }
        let (hs, idx) = ((at >> 32) as usize, at as u32);
        let g = self.shards[hs].lock();
        match g.conns.get(idx as usize) {
            Some(Some(c)) if c.zone == zone && c.key[1] == *t && c.expires > now => {
                Some((g, hs, idx, true))
            }
            _ => None,
        }
    }

    /// Runs one `ct()` on the packet at `l3` of `frame`: tracks it, may
    /// commit and translate it, and writes the result into `meta`.
    pub fn execute(
        &self,
        frame: &mut [u8],
        l3: usize,
        eth_type: u16,
        spec: &CtSpec,
        meta: &mut CtMeta,
        now: u64,
    ) {
        if meta.state != 0 && meta.zone != spec.zone {
            meta.state = 0;
        }
        // Borrowed, not moved out of the result: a move is a 130-byte copy
        // through memcpy on every packet.
        let parsed = packet::parse(frame, l3, eth_type);
        let p = match &parsed {
            Ok(p) if trackable(p) => p,
            _ => return self.invalid(meta, spec.zone),
        };
        if p.icmp == Some(IcmpKind::Error) {
            return self.related(frame, p, spec, meta, now);
        }
        // Translated by an earlier ct() in this zone: the packet carries
        // the other direction's view of its connection.
        let translated = (meta.state & (SNAT | DNAT) != 0)
            .then(|| p.tuple.reverse())
            .flatten()
            .and_then(|r| self.locate(spec.zone, &r, now))
            .map(|(g, s, idx, reply)| (g, s, idx, !reply));
        let mut state = meta.state;
        if let Some((mut g, s, idx, reply)) =
            translated.or_else(|| self.locate(spec.zone, &p.tuple, now))
        {
            if spec.force && reply {
                let rev = self.remove(&mut g, s, idx);
                drop(g);
                self.unlink(rev);
            } else {
                let seq_check = self.seq_check.load(Relaxed);
                let c = g.conns[idx as usize]
                    .as_mut()
                    .expect("located slots are live");
                match self.update(c, p, reply, seq_check, now) {
                    Verdict::Reopen => {
                        let rev = self.remove(&mut g, s, idx);
                        drop(g);
                        self.unlink(rev);
                    }
                    v => {
                        match v {
                            Verdict::Valid => {
                                state = (state | EST | if reply { RPL } else { 0 }) & !NEW
                            }
                            Verdict::ValidNew => state |= NEW,
                            _ => state = INV,
                        }
                        if spec.nat.is_some()
                            && c.nat != NAT_NONE
                            && meta.state & (SNAT | DNAT) == 0
                        {
                            state |= translate(frame, p, c, reply);
                        }
                        finish(c, spec, meta, state);
                        return;
                    }
                }
            }
        }
        self.not_found(frame, p, spec, meta, now);
    }

    fn invalid(&self, meta: &mut CtMeta, zone: u16) {
        self.stats.invalid.fetch_add(1, Relaxed);
        *meta = CtMeta {
            state: INV | TRK,
            zone,
            ..CtMeta::default()
        };
    }

    /// Tracks one packet of a connection, sent by the responder when
    /// `reply`, and refreshes its expiry.
    fn update(&self, c: &mut Conn, p: &Parsed, reply: bool, seq_check: bool, now: u64) -> Verdict {
        let (v, class) = match &mut c.proto {
            Proto::Tcp(t) => {
                let seg = p.tcp.expect("TCP packets parse a segment");
                // Hardware forwarded packets this tracker never saw: their
                // sequence numbers moved on (tracked liberally, as Linux
                // does a connection its flowtable took).
                let seq_check = seq_check && c.hw & crate::hw::LIBERAL == 0;
                match t.update(&seg, reply, seq_check) {
                    (tcp::Update::Invalid, _) => (Verdict::Invalid, None),
                    (tcp::Update::New, _) => (Verdict::Reopen, None),
                    (tcp::Update::Valid, c) => (Verdict::Valid, c),
                    (tcp::Update::ValidNew, c) => (Verdict::ValidNew, c),
                }
            }
            Proto::Other(st) => {
                if reply && *st != OTHER_BIDIR {
                    *st = OTHER_BIDIR;
                } else if *st == OTHER_FIRST {
                    *st = OTHER_MULTIPLE;
                }
                let class =
                    [Class::OtherFirst, Class::OtherMultiple, Class::OtherBidir][*st as usize];
                let v = if *st == OTHER_BIDIR {
                    Verdict::Valid
                } else {
                    Verdict::ValidNew
                };
                (v, Some(class))
            }
            Proto::Icmp(st) => {
                let v = if reply && *st == ICMP_FIRST {
                    *st = ICMP_REPLY;
                    Verdict::Valid
                } else if *st == ICMP_FIRST {
                    Verdict::ValidNew
                } else {
                    Verdict::Valid
                };
                (
                    v,
                    Some(if *st == ICMP_FIRST {
                        Class::IcmpFirst
                    } else {
                        Class::IcmpReply
                    }),
                )
            }
        };
        if let Some(class) = class {
            c.expires = now + self.timeouts.millis(c.zone, class);
        }
        v
    }

    /// An ICMP error: `rel` to the connection of the packet it quotes.
    fn related(&self, frame: &mut [u8], p: &Parsed, spec: &CtSpec, meta: &mut CtMeta, now: u64) {
        let Some((quoted, _)) = p.quoted.filter(|(q, _)| q.src == p.tuple.dst) else {
            return self.invalid(meta, spec.zone);
        };
        // The quoted packet went the other way.
        let Some(key) = quoted.reverse() else {
            return self.invalid(meta, spec.zone);
        };
        let Some((mut g, _, idx, reply)) = self.locate(spec.zone, &key, now) else {
            return self.invalid(meta, spec.zone);
        };
        self.stats.related.fetch_add(1, Relaxed);
        let c = g.conns[idx as usize]
            .as_mut()
            .expect("located slots are live");
        let mut state = meta.state | REL | if reply { RPL } else { 0 };
        if spec.nat.is_some() && c.nat != NAT_NONE {
            let d = reply as usize;
            let other = c.key[1 - d];
            let (mut src, mut dst) = (p.tuple.src, p.tuple.dst);
            match (c.nat == NAT_SRC, reply) {
                (true, false) => src = c.key[1].dst,
                (true, true) => dst = c.key[0].src,
                (false, false) => dst = c.key[1].src,
                (false, true) => src = c.key[0].dst,
            }
            packet::rewrite_related(frame, p, &other, &src, &dst);
            state |= nat_bit(c.nat, reply);
        }
        finish(c, spec, meta, state);
    }

    /// No connection: a new one if the packet may start one, committed if
    /// asked and allowed.
    fn not_found(&self, frame: &mut [u8], p: &Parsed, spec: &CtSpec, meta: &mut CtMeta, now: u64) {
        let t = p.tuple;
        let valid_new = match (p.tcp, p.icmp) {
            (Some(seg), _) => tcp::valid_new(&seg),
            (_, Some(_)) => {
                let (ty, _) = t.icmp_type_code();
                matches!((ty, t.v6), (8 | 13 | 15, false) | (128, true))
            }
            _ => true,
        };
        if !valid_new {
            return self.invalid(meta, spec.zone);
        }
        let uncommitted = CtMeta {
            state: NEW | TRK,
            zone: spec.zone,
            mark: 0,
            label: 0,
            orig: t,
        };
        if !spec.commit {
            *meta = uncommitted;
            return;
        }
        if !self.create(frame, p, spec, meta, now) {
            *meta = uncommitted;
        }
    }

    /// Takes a place under the global and zone limits.
    fn admit(&self, zone: u16) -> bool {
        let max = self.max_conns.load(Relaxed);
        if self
            .count
            .fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1))
            .is_err()
        {
            self.stats.table_full.fetch_add(1, Relaxed);
            return false;
        }
        let explicit = self.zone_limit[zone as usize].load(Relaxed);
        let limit = if explicit != NO_LIMIT {
            Some(explicit)
        } else {
            Some(self.default_limit.load(Relaxed)).filter(|&d| d != 0)
        };
        let zc = &self.zone_count[zone as usize];
        let ok = match limit {
            Some(l) => zc
                .fetch_update(Relaxed, Relaxed, |n| (n < l).then_some(n + 1))
                .is_ok(),
            None => {
                zc.fetch_add(1, Relaxed);
                true
            }
        };
        if !ok {
            self.count.fetch_sub(1, Relaxed);
            self.stats.zone_full.fetch_add(1, Relaxed);
        }
        ok
    }

    fn release(&self, zone: u16) {
        self.count.fetch_sub(1, Relaxed);
        self.zone_count[zone as usize].fetch_sub(1, Relaxed);
    }

    /// Creates the connection of `p`'s packet, translating the packet when
    /// the spec has a NAT range, and writes `meta` from it (under the one
    /// lock that inserted it). False: not committed (a limit, no NAT
    /// tuple); `meta` is left to the caller.
    fn create(
        &self,
        frame: &mut [u8],
        p: &Parsed,
        spec: &CtSpec,
        meta: &mut CtMeta,
        now: u64,
    ) -> bool {
        let zone = spec.zone;
        let fwd = p.tuple;
        if !self.admit(zone) {
            return false;
        }
        let mut nat = NAT_NONE;
        let mut rev = fwd
            .reverse()
            .expect("tuples that start connections reverse");
        if let Some(r) = spec.nat.and_then(|n| n.range) {
            let hash = if r.persistent {
                self.hasher.hash_one((fwd.src, zone))
            } else {
                self.sym_hash(zone, &fwd)
            };
            let mut rng = SplitMix(hash ^ now ^ self.seed);
            let chosen = nat::choose(&fwd, &r, hash, &mut rng, |cand| {
                self.reserve(&ConnKey { tuple: *cand, zone })
            });
            match chosen {
                Some(t) => {
                    rev = t;
                    nat = if r.kind == NatKind::Src {
                        NAT_SRC
                    } else {
                        NAT_DST
                    };
                }
                None => {
                    self.release(zone);
                    self.stats.nat_exhausted.fetch_add(1, Relaxed);
                    return false;
                }
            }
        }
        let (proto, class) = match (p.tcp, p.icmp) {
            (Some(seg), _) => {
                let (t, c) = Tcp::new(&seg);
                (Proto::Tcp(t), c)
            }
            (_, Some(_)) => (Proto::Icmp(ICMP_FIRST), Class::IcmpFirst),
            _ => (Proto::Other(OTHER_FIRST), Class::OtherFirst),
        };
        let conn = Conn {
            key: [fwd, rev],
            zone,
            nat,
            proto,
            mark: 0,
            label: [0; 2],
            expires: now + self.timeouts.millis(zone, class),
            hw: 0,
        };
        let h = self.sym_hash(zone, &fwd);
        let s = self.shard_of(h);
        let mut g = self.shards[s].lock();
        if g.find_local(h, zone, &fwd, now).is_some() {
            // Another thread created it meanwhile.
            drop(g);
            self.release(zone);
            if nat != NAT_NONE {
                self.unlink(Some((ConnKey { tuple: rev, zone }, PENDING)));
            }
            let Some((mut g, _, idx, _)) = self.locate(zone, &fwd, now) else {
                return false;
            };
            let c = g.conns[idx as usize]
                .as_mut()
                .expect("located slots are live");
            finish(c, spec, meta, NEW);
            return true;
        }
        // An expired connection on the same tuple goes first.
        if let Some((old, _)) = g.find_local(h, zone, &fwd, 0) {
            let rev_old = self.remove(&mut g, s, old);
            drop(g);
            self.unlink(rev_old);
            g = self.shards[s].lock();
        }
        let idx = match g.free.pop() {
            Some(i) => {
                g.conns[i as usize] = Some(conn);
                i
            }
            None => {
                g.conns.push(Some(conn));
                (g.conns.len() - 1) as u32
            }
        };
        let shard = &mut *g;
        let conns = &shard.conns;
        let hasher = |&e: &u32| {
            let c = conns[(e >> 1) as usize]
                .as_ref()
                .expect("indexed slots are live");
            self.sym_hash(c.zone, &c.key[0])
        };
        shard
            .index
            .insert_unique(h, idx << 1 | (nat != NAT_NONE) as u32, hasher);
        self.stats.created.fetch_add(1, Relaxed);
        let c = shard.conns[idx as usize].as_mut().expect("just inserted");
        let mut state = NEW;
        if nat != NAT_NONE {
            state |= translate(frame, p, c, false);
        }
        finish(c, spec, meta, state);
        drop(g);
        if nat != NAT_NONE {
            // The reply tuple, reserved, now points home (its shard may be
            // this one: after the home lock is released).
            self.settle(ConnKey { tuple: rev, zone }, home(s, idx));
        }
        true
    }

    /// Reserves a reply tuple for a connection being created: false when
    /// a connection already uses it.
    fn reserve(&self, key: &ConnKey) -> bool {
        let h = self.sym_hash(key.zone, &key.tuple);
        let mut g = self.shards[self.shard_of(h)].lock();
        if g.taken(h, key) {
            return false;
        }
        g.nat_rev.insert(*key, PENDING);
        true
    }

    /// Points a reserved reply tuple at its connection.
    fn settle(&self, key: ConnKey, at: u64) {
        let h = self.sym_hash(key.zone, &key.tuple);
        self.shards[self.shard_of(h)].lock().nat_rev.insert(key, at);
    }

    /// Drops a reply tuple's entry if it still points at `at`.
    fn unlink(&self, rev: Option<(ConnKey, u64)>) {
        let Some((key, at)) = rev else { return };
        let h = self.sym_hash(key.zone, &key.tuple);
        let mut g = self.shards[self.shard_of(h)].lock();
        if g.nat_rev.get(&key) == Some(&at) {
            g.nat_rev.remove(&key);
        }
    }

    /// Removes a connection from its home shard; returns its reply entry
    /// to [`unlink`](Self::unlink) once the home lock is released.
    pub(crate) fn remove(&self, g: &mut Shard, s: usize, idx: u32) -> Option<(ConnKey, u64)> {
        let c = g.conns[idx as usize].take().expect("removing a live slot");
        let h = self.sym_hash(c.zone, &c.key[0]);
        let e = g
            .index
            .find_entry(h, |&e| e >> 1 == idx)
            .expect("a live connection is indexed");
        e.remove();
        g.free.push(idx);
        self.release(c.zone);
        self.stats.removed.fetch_add(1, Relaxed);
        (c.nat != NAT_NONE).then(|| {
            (
                ConnKey {
                    tuple: c.key[1],
                    zone: c.zone,
                },
                home(s, idx),
            )
        })
    }

    /// Removes up to `budget` expired connections, resuming where the last
    /// call stopped in each shard. Returns how many went.
    pub fn sweep(&self, now: u64, budget: usize) -> usize {
        let per = (budget / self.shards.len()).max(1);
        let mut removed = 0;
        for (s, shard) in self.shards.iter().enumerate() {
            let mut unlink = vec![];
            {
                let mut g = shard.lock();
                let n = g.conns.len();
                if n == 0 {
                    continue;
                }
                for _ in 0..per.min(n) {
                    let i = g.cursor % n;
                    g.cursor = (i + 1) % n;
                    if matches!(&g.conns[i], Some(c) if c.expires <= now) {
                        unlink.push(self.remove(&mut g, s, i as u32));
                        removed += 1;
                    }
                }
            }
            for r in unlink {
                self.unlink(r);
            }
        }
        removed
    }

    /// Removes the connections `keep` says no to; returns how many.
    pub(crate) fn retain(&self, mut keep: impl FnMut(&Conn) -> bool) -> usize {
        let mut n = 0;
        for (s, shard) in self.shards.iter().enumerate() {
            let mut unlink = vec![];
            {
                let mut g = shard.lock();
                for i in 0..g.conns.len() {
                    if matches!(&g.conns[i], Some(c) if !keep(c)) {
                        unlink.push(self.remove(&mut g, s, i as u32));
                        n += 1;
                    }
                }
            }
            for r in unlink {
                self.unlink(r);
            }
        }
        n
    }

    /// Connections in the table (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.count.load(Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> Stats {
        let s = &self.stats;
        Stats {
            created: s.created.load(Relaxed),
            removed: s.removed.load(Relaxed),
            invalid: s.invalid.load(Relaxed),
            related: s.related.load(Relaxed),
            table_full: s.table_full.load(Relaxed),
            zone_full: s.zone_full.load(Relaxed),
            nat_exhausted: s.nat_exhausted.load(Relaxed),
        }
    }

    /// Every zone with connections, with its count.
    pub fn zone_counts(&self) -> Vec<(u16, u32)> {
        (0..=u16::MAX)
            .filter_map(|z| Some((z, self.zone_len(z))).filter(|(_, n)| *n != 0))
            .collect()
    }

    /// Connections in `zone`.
    pub fn zone_len(&self, zone: u16) -> u32 {
        self.zone_count[zone as usize].load(Relaxed)
    }

    pub fn max_conns(&self) -> u32 {
        self.max_conns.load(Relaxed)
    }

    pub fn set_max_conns(&self, n: u32) {
        self.max_conns.store(n, Relaxed);
    }

    pub fn set_tcp_seq_check(&self, on: bool) {
        self.seq_check.store(on, Relaxed);
    }

    pub fn tcp_seq_check(&self) -> bool {
        self.seq_check.load(Relaxed)
    }

    /// `ct-set-limits`: the default (0: unlimited) and zones' own limits
    /// (an explicit 0 admits nothing, as in Open vSwitch).
    pub fn set_limits(&self, default: Option<u32>, zones: &[(u16, u32)]) {
        if let Some(d) = default {
            self.default_limit.store(d, Relaxed);
        }
        for &(z, l) in zones {
            self.zone_limit[z as usize].store(l.min(NO_LIMIT - 1), Relaxed);
        }
    }

    /// `ct-del-limits`: zones back to the default; `default` to unlimited.
    pub fn del_limits(&self, default: bool, zones: &[u16]) {
        if default {
            self.default_limit.store(0, Relaxed);
        }
        for &z in zones {
            self.zone_limit[z as usize].store(NO_LIMIT, Relaxed);
        }
    }

    /// `ct-get-limits`: the zones asked, or every zone with its own limit.
    pub fn limits(&self, zones: &[u16]) -> Limits {
        let default = self.default_limit.load(Relaxed);
        let effective = |z: u16| match self.zone_limit[z as usize].load(Relaxed) {
            NO_LIMIT => default,
            l => l,
        };
        let zones: Vec<u16> = if zones.is_empty() {
            (0..=u16::MAX)
                .filter(|&z| self.zone_limit[z as usize].load(Relaxed) != NO_LIMIT)
                .collect()
        } else {
            zones.to_vec()
        };
        Limits {
            default,
            zones: zones
                .into_iter()
                .map(|z| (z, effective(z), self.zone_len(z)))
                .collect(),
        }
    }

    /// Gives `zone` a timeout policy (`attr=seconds` over the defaults),
    /// or with `None` the default policy back.
    pub fn set_zone_timeouts(
        &self,
        zone: u16,
        attrs: Option<&[(&str, u32)]>,
    ) -> Result<(), PolicyError> {
        let p = attrs.map(Timeouts::policy).transpose()?;
        self.timeouts.set_zone(zone, p)
    }

    /// Replaces the default timeout policy.
    pub fn set_default_timeouts(&self, attrs: &[(&str, u32)]) -> Result<(), PolicyError> {
        self.timeouts.set_default(Timeouts::policy(attrs)?);
        Ok(())
    }

    /// The timeouts, in seconds, `zone` uses, by attribute name.
    pub fn zone_timeouts(&self, zone: u16) -> [(&'static str, u32); N_CLASSES] {
        let p = self.timeouts.of_zone(zone);
        std::array::from_fn(|i| (crate::timeout::ATTRS[i].0, p[i]))
    }
}

/// Whether `ct()` follows this packet (otherwise: `inv`).
fn trackable(p: &Parsed) -> bool {
    let t = &p.tuple;
    match p.icmp {
        Some(IcmpKind::Other) => false,
        Some(IcmpKind::Query) => {
            let (ty, code) = t.icmp_type_code();
            code == 0 && (t.v6 || matches!(ty, 0 | 8 | 13 | 14 | 15 | 16))
        }
        Some(IcmpKind::Error) => true,
        None => t.sport != 0 && t.dport != 0,
    }
}

pub(crate) fn nat_bit(nat: u8, reply: bool) -> u8 {
    match (nat == NAT_SRC) ^ reply {
        true => SNAT,
        false => DNAT,
    }
}

/// Rewrites a packet of a translated connection as its direction needs:
/// to the reverse of the other direction's tuple.
fn translate(frame: &mut [u8], p: &Parsed, c: &Conn, reply: bool) -> u8 {
    let d = reply as usize;
    let Some(to) = c.key[1 - d].reverse() else {
        return 0;
    };
    packet::rewrite(frame, p, &to);
    debug_assert!(c.nat == NAT_SRC || c.nat == NAT_DST);
    nat_bit(c.nat, reply)
}

/// Applies the spec's mark and label to a connection and writes the
/// packet's metadata from it.
fn finish(c: &mut Conn, spec: &CtSpec, meta: &mut CtMeta, state: u8) {
    if let Some((v, m)) = spec.mark {
        c.mark = v | (c.mark & !m);
    }
    if let Some((v, m)) = spec.label {
        let l = v | (c.label() & !m);
        c.label = [(l >> 64) as u64, l as u64];
    }
    *meta = CtMeta {
        state: state | TRK,
        zone: spec.zone,
        mark: c.mark,
        label: c.label(),
        orig: c.key[0],
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tuple() -> impl Strategy<Value = Tuple> {
        let addr = |v6: bool| {
            any::<[u8; 16]>().prop_map(move |b| {
                if v6 {
                    crate::tuple::Addr(b)
                } else {
                    crate::tuple::Addr::v4([b[0], b[1], b[2], b[3]])
                }
            })
        };
        any::<bool>().prop_flat_map(move |v6| {
            let proto = if v6 {
                prop_oneof![Just(6u8), Just(17), Just(58)].boxed()
            } else {
                prop_oneof![Just(6u8), Just(17), Just(1)].boxed()
            };
            (
                addr(v6),
                addr(v6),
                any::<u16>(),
                any::<u16>(),
                proto,
                any::<bool>(),
            )
                .prop_map(move |(src, dst, sport, dport, proto, echo)| {
                    let icmp = (proto == 1 && !v6) || (proto == 58 && v6);
                    // ICMP: an echo request or reply, id in sport.
                    let dport = match (icmp, v6, echo) {
                        (false, ..) => dport,
                        (true, false, true) => 8 << 8,
                        (true, false, false) => 0,
                        (true, true, true) => 128 << 8,
                        (true, true, false) => 129 << 8,
                    };
                    Tuple {
                        src,
                        dst,
                        sport,
                        dport,
                        proto,
                        v6,
                    }
                })
        })
    }

    proptest! {
        /// Both directions of a connection hash alike (they find one
        /// entry), and the zone is part of the hash.
        #[test]
        fn sym_hash_is_the_same_both_ways(t in tuple(), zone in any::<u16>(), seed in any::<u64>()) {
            let tr = Tracker::new(Config { seed: Some(seed), shards: 1, ..Config::default() });
            let r = t.reverse().expect("echo and ports reverse");
            prop_assert_eq!(tr.sym_hash(zone, &t), tr.sym_hash(zone, &r));
            prop_assert_ne!(tr.sym_hash(zone, &t), tr.sym_hash(zone.wrapping_add(1), &t));
        }
    }

    #[test]
    fn v4_addresses_are_their_four_bytes_then_zeros() {
        let a = crate::tuple::Addr::v4([198, 18, 0, 7]);
        assert_eq!(a.0, [198, 18, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(a.as_v4(), std::net::Ipv4Addr::new(198, 18, 0, 7));
    }
}

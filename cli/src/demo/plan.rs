//! Planning the demo workload: which flows exist, between which VMs, how
//! many packets each sends and when.
//!
//! The plan is drawn once from the seed (memory proportional to the number
//! of flows, tens of bytes each); packets are produced from it on the fly.
//! Every packet time is a pure function of the flow and the packet's index,
//! so the generator only keeps, per flow, the index of its next packet (and
//! its TCP sequence numbers).

use std::collections::HashMap;

use megaflow::SplitMix64;

use super::{DemoMix, DemoSpec, METERED_UDP_PORT, METERED_VM, METER_KBPS, SAMPLED_TCP_PORT};

/// splitmix64: small, fast, seedable.
#[derive(Clone, Debug)]
pub(super) struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed ^ 0x5eed_0fe5_1fc4_0000))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n` > 0; 0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The splitmix64 finaliser: a good 64-bit mixing function.
pub(super) fn mix(x: u64) -> u64 {
    SplitMix64::mix(x)
}

/// What a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A long-lived bulk TCP transfer; `upload`: the client sends the data.
    Bulk { upload: bool },
    /// An interactive TCP session to port 22 (sampled by the table).
    Ssh,
    /// A DNS-like UDP exchange to port 53: 1-5 packets, queries and answers.
    Dns,
    /// An NTP-like UDP exchange to port 123: a query and its answer.
    Ntp,
    /// VM 4's UDP stream to port 5001 (metered by the table).
    Metered,
    /// Broadcasts of all VMs (DHCP- and NetBIOS-like), one per packet.
    Broadcast,
    /// The ARP request and reply before a VM pair's first packet.
    Arp,
}

/// One flow of the plan. VMs are numbered from 1.
#[derive(Clone, Debug)]
pub(super) struct Flow {
    /// Offset (ns from the epoch) of the first packet.
    pub first: u64,
    /// Where its packets are spread: [start, end) (ns from the epoch).
    pub start: u64,
    pub end: u64,
    /// Packets in all, and the index of the next one.
    pub n: u32,
    pub k: u32,
    pub kind: Kind,
    pub client: u8,
    pub server: u8,
    pub sport: u16,
    pub dport: u16,
    /// Next sequence numbers of client and server (TCP).
    pub seq_c: u32,
    pub seq_s: u32,
    /// TCP: packets of the handshake (3 or 0).
    pub head: u8,
    /// TCP: uses the timestamp option (66-byte ACKs) or not (54).
    pub tsopt: bool,
    /// TCP: ends with FINs before the end of the capture.
    pub closes: bool,
    /// Request / query payload length.
    pub req_len: u16,
    /// Random bits of the flow, for per-packet jitter and sizes.
    pub salt: u64,
}

/// Time constants, scaled down for captures shorter than 1 s.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    /// Duration (ns).
    pub dur: u64,
    /// The unit of the short delays: 1 ms, or 1/1000 of the duration.
    pub tick: u64,
}

impl Timing {
    pub fn new(dur: u64) -> Self {
        Timing {
            dur,
            tick: (dur / 1000).clamp(1, 1_000_000),
        }
    }

    /// The next of `n` packets that `flows` connections send in turns,
    /// counted by `k`: its time (spread evenly over the capture) and its
    /// connection; `None` after the last.
    pub fn turn(&self, k: &mut u64, n: u64, flows: u32) -> Option<(u64, usize)> {
        if *k >= n {
            return None;
        }
        let at = self.spread(*k, n);
        let conn = (*k % u64::from(flows)) as usize;
        *k += 1;
        Some((at, conn))
    }

    /// The time of packet `k` of `n` spread evenly over the capture, a
    /// tick in from each end (the tenants' steady traffic).
    pub fn spread(&self, k: u64, n: u64) -> u64 {
        let span = u128::from(self.dur.saturating_sub(2 * self.tick).max(1));
        self.tick + (u128::from(k) * span / u128::from(n.max(1))) as u64
    }

    /// Round trip between two VMs (handshake spacing).
    pub fn rtt(&self) -> u64 {
        self.tick * 8 / 100
    }

    /// Delay of a DNS answer after its query.
    fn answer(&self) -> u64 {
        self.tick * 3 / 10
    }

    /// Gap between the ARP request and reply, and from the reply to the
    /// pair's first packet.
    fn arp_gap(&self) -> u64 {
        self.tick / 10
    }

    /// Longest gap between two packets of a long-lived flow (2 s, or a
    /// tenth of the duration), so none looks idle to the revalidator.
    fn max_gap(&self) -> u64 {
        (self.dur / 10).min(2_000_000_000)
    }
}

/// Spreads packet `i` of `m` over [s0, e): one slot each, at a random place
/// (`h`) inside it, so times increase with `i`.
fn slot(s0: u64, e: u64, i: u32, m: u32, h: u64) -> u64 {
    let span = u128::from(e.saturating_sub(s0));
    let num = (u128::from(i) << 16 | u128::from(h & 0xffff)) * span;
    let den = u128::from(m.max(1)) << 16;
    s0 + (num / den) as u64
}

/// The time (ns from the epoch) of packet `k` of `f`: non-decreasing in
/// `k`, below the duration.
pub(super) fn time_of(f: &Flow, k: u32, t: &Timing) -> u64 {
    let h = mix(f.salt ^ u64::from(k));
    let at = match f.kind {
        Kind::Bulk { .. } | Kind::Ssh => {
            let head = u32::from(f.head);
            if k < head {
                f.start + u64::from(k) * t.rtt()
            } else {
                let s0 = f.start + u64::from(head) * t.rtt();
                slot(s0, f.end, k - head, f.n - head, h)
            }
        }
        Kind::Dns | Kind::Ntp => {
            f.start + u64::from(k / 2) * t.tick + u64::from(k % 2) * t.answer()
        }
        Kind::Metered | Kind::Broadcast => slot(f.start, f.end, k, f.n, h),
        Kind::Arp => f.start + u64::from(k) * t.arp_gap(),
    };
    at.min(t.dur.saturating_sub(1))
}

/// The flows of a workload, sorted by first packet, and its mix.
pub(super) struct Plan {
    pub flows: Vec<Flow>,
    pub mix: DemoMix,
}

/// Ephemeral source ports (Linux's default range).
const EPHEMERAL_LO: u32 = 32_768;
const EPHEMERAL_N: u32 = 28_232;
/// A prime that does not divide `EPHEMERAL_N`: stepping by it visits every
/// port of the range once before repeating.
const PORT_STRIDE: u32 = 7_919;

/// Hands out distinct ephemeral ports per (client, server, protocol).
struct Ports {
    seed: u64,
    next: HashMap<(u8, u8, u8), u32>,
}

impl Ports {
    fn take(&mut self, client: u8, server: u8, proto: u8) -> u16 {
        let key = (client, server, proto);
        let base =
            mix(self.seed ^ u64::from(client) << 16 ^ u64::from(server) << 8 ^ u64::from(proto));
        let n = self.next.entry(key).or_insert(0);
        let i = (base as u32 % EPHEMERAL_N + *n % EPHEMERAL_N * PORT_STRIDE) % EPHEMERAL_N;
        *n += 1;
        // Below 32 768 + 28 232 = 61 000: fits.
        (EPHEMERAL_LO + i) as u16
    }
}

/// A random pair of distinct VMs (client, server).
fn pair(r: &mut Rng, vms: u32) -> (u8, u8) {
    let c = 1 + r.below(u64::from(vms)) as u32;
    let mut s = 1 + r.below(u64::from(vms - 1)) as u32;
    if s >= c {
        s += 1;
    }
    // vms <= 254.
    (c as u8, s as u8)
}

/// A flow with the fields every kind sets.
fn flow(kind: Kind, client: u8, server: u8, n: u32, salt: u64) -> Flow {
    Flow {
        first: 0,
        start: 0,
        end: 0,
        n,
        k: 0,
        kind,
        client,
        server,
        sport: 0,
        dport: 0,
        seq_c: 0,
        seq_s: 0,
        head: 0,
        tsopt: false,
        closes: false,
        req_len: 0,
        salt,
    }
}

/// Packets of a DNS-like exchange: mostly a query and its answer, some
/// unanswered, some with a second (AAAA) query.
fn dns_packets(r: &mut Rng) -> u32 {
    match r.below(100) {
        0..=9 => 1,
        10..=64 => 2,
        65..=69 => 3,
        70..=94 => 4,
        _ => 5,
    }
}

/// Draws the plan of `spec` (already normalised).
pub(super) fn plan(spec: &DemoSpec) -> Plan {
    let t = Timing::new(duration_ns(spec.seconds));
    let mut r = Rng::new(spec.seed);
    let mut ports = Ports {
        seed: r.next_u64(),
        next: HashMap::new(),
    };
    let p = spec.packets;
    let vms = spec.vms;
    if p == 0 {
        return Plan {
            flows: Vec::new(),
            mix: DemoMix::default(),
        };
    }
    // Enough packets per flow for the mix (see the module documentation).
    let f = u64::from(spec.flows).min((p / 8).max(1)) as u32;
    let has_metered = vms >= METERED_VM && f >= 3;
    let n_tcp = ((f as u64 * 5 + 50) / 100).clamp(1, u64::from(f - u32::from(has_metered))) as u32;
    let n_udp = f - n_tcp - u32::from(has_metered);
    let n_bcast = p / 500;
    let n_met = if has_metered { (p / 10).max(1) } else { 0 };

    let mut flows = Vec::with_capacity(f as usize + 2);
    let mut mix_ = DemoMix {
        udp_flows: n_udp,
        metered_flows: u32::from(has_metered),
        metered_packets: n_met,
        broadcast_packets: n_bcast,
        ..DemoMix::default()
    };

    // Short UDP exchanges at random times.
    let udp_last = t.dur.saturating_sub(6 * t.tick).max(t.tick + 1);
    for _ in 0..n_udp {
        let (c, s) = pair(&mut r, vms);
        let ntp = r.chance(0.1);
        let (kind, n, dport) = if ntp {
            (Kind::Ntp, 2, 123)
        } else {
            (Kind::Dns, dns_packets(&mut r), 53)
        };
        let mut fl = flow(kind, c, s, n, r.next_u64());
        fl.sport = ports.take(c, s, 17);
        fl.dport = dport;
        fl.start = t.tick + r.below(udp_last - t.tick);
        fl.req_len = if ntp { 48 } else { 20 + r.below(40) as u16 };
        mix_.udp_packets += u64::from(n);
        flows.push(fl);
    }

    // VM 4's metered stream, about three times the meter's rate.
    if has_metered {
        let mut fl = flow(Kind::Metered, METERED_VM as u8, 1, 0, r.next_u64());
        fl.sport = ports.take(METERED_VM as u8, 1, 17);
        fl.dport = METERED_UDP_PORT;
        let bits = n_met as f64 * METERED_FRAME_LEN as f64 * 8.0;
        let window_ns = bits / (3.0 * f64::from(METER_KBPS) * 1000.0) * 1e9;
        let window = (window_ns as u64).clamp(t.dur / 10, t.dur * 6 / 10);
        fl.start = (t.dur / 4).max(t.tick);
        fl.end = (fl.start + window).min(t.dur - t.tick);
        // n_met <= p / 10 and p <= MAX_PACKETS: fits.
        fl.n = n_met as u32;
        flows.push(fl);
    }

    // Broadcasts all along.
    if n_bcast > 0 {
        // n_bcast <= p / 500: fits.
        let mut fl = flow(Kind::Broadcast, 0, 0, n_bcast as u32, r.next_u64());
        fl.start = t.tick;
        fl.end = t.dur - t.tick;
        flows.push(fl);
    }

    // Long-lived TCP, starting early or in the middle.
    let mut tcp = Vec::with_capacity(n_tcp as usize);
    let mut weights = Vec::with_capacity(n_tcp as usize);
    for i in 0..n_tcp {
        let ssh_from_4 = i == 1 && vms >= METERED_VM;
        let (c, s) = if ssh_from_4 {
            (METERED_VM as u8, 2)
        } else {
            pair(&mut r, vms)
        };
        let ssh = ssh_from_4 || (i > 0 && r.chance(0.15));
        let kind = if ssh {
            Kind::Ssh
        } else {
            Kind::Bulk {
                upload: r.chance(0.3),
            }
        };
        let mut fl = flow(kind, c, s, 0, r.next_u64());
        fl.sport = ports.take(c, s, 6);
        fl.dport = if ssh {
            SAMPLED_TCP_PORT
        } else {
            [80, 443, 443, 3306, 5432, 8080][r.below(6) as usize]
        };
        fl.tsopt = r.chance(0.8);
        fl.seq_c = r.next_u64() as u32;
        fl.seq_s = r.next_u64() as u32;
        fl.req_len = 80 + r.below(400) as u16;
        fl.start = if r.chance(0.75) {
            t.tick + r.below(t.dur / 5)
        } else {
            t.dur / 5 + r.below(t.dur / 2)
        };
        fl.closes = r.chance(0.3);
        fl.end = if fl.closes {
            let left = (t.dur - fl.start) as f64;
            fl.start + (left * (0.3 + 0.6 * r.unit())) as u64
        } else {
            t.dur - t.tick - r.below(t.dur / 50)
        };
        // Heavy-tailed sizes (Zipf-like weights from 1 to 50): a few
        // elephants, many mice; SSH sessions are light.
        let w = (1000 / (1 + r.below(1000))).min(50);
        weights.push(if ssh { w } else { w * 5 });
        tcp.push(fl);
    }
    mix_.tcp_flows = n_tcp;
    mix_.ssh_flows = tcp.iter().filter(|fl| fl.kind == Kind::Ssh).count() as u32;

    // ARP before each VM pair's first packet.
    let first_of = |fl: &Flow| match fl.kind {
        Kind::Bulk { .. } | Kind::Ssh | Kind::Dns | Kind::Ntp | Kind::Arp => fl.start,
        Kind::Metered | Kind::Broadcast => time_of(fl, 0, &t),
    };
    let mut pairs: HashMap<(u8, u8), (u64, u8)> = HashMap::new();
    for fl in flows.iter().chain(&tcp) {
        if fl.kind == Kind::Broadcast {
            continue;
        }
        let key = (fl.client.min(fl.server), fl.client.max(fl.server));
        let at = (first_of(fl), fl.client);
        pairs
            .entry(key)
            .and_modify(|e| *e = (*e).min(at))
            .or_insert(at);
    }
    let n_arp = 2 * pairs.len() as u64;
    let used = n_bcast + n_met + mix_.udp_packets + n_arp;
    if used + u64::from(n_tcp) > p {
        return minimal(spec, &t);
    }
    let mut sorted_pairs: Vec<_> = pairs.into_iter().collect();
    sorted_pairs.sort_unstable();
    for ((a, b), (first, client)) in sorted_pairs {
        let server = if client == a { b } else { a };
        let mut fl = flow(Kind::Arp, client, server, 2, r.next_u64());
        fl.start = first.saturating_sub(3 * t.arp_gap());
        flows.push(fl);
    }
    mix_.arp_packets = n_arp;

    // Share the remaining packets among the TCP flows.
    let budget = p - used;
    mix_.tcp_packets = budget;
    for (fl, n) in tcp.iter_mut().zip(share(budget, &weights)) {
        finish_tcp(fl, n, &t);
    }
    flows.extend(tcp.into_iter().filter(|fl| fl.n > 0));
    sort(&mut flows, &t);
    Plan { flows, mix: mix_ }
}

/// Frame length of the metered stream's datagrams (1 470 bytes of payload,
/// as iperf sends).
pub(super) const METERED_FRAME_LEN: usize = 14 + 20 + 8 + METERED_PAYLOAD;
pub(super) const METERED_PAYLOAD: usize = 1470;

/// Sorts flows by first packet (ties: plan order) and records it.
fn sort(flows: &mut Vec<Flow>, t: &Timing) {
    for fl in flows.iter_mut() {
        fl.first = time_of(fl, 0, t);
    }
    let mut idx: Vec<(u64, usize)> = flows.iter().map(|f| f.first).zip(0..).collect();
    idx.sort_unstable();
    let mut old: Vec<Option<Flow>> = std::mem::take(flows).into_iter().map(Some).collect();
    flows.extend(idx.into_iter().filter_map(|(_, i)| old[i].take()));
}

/// Splits `budget` in proportion to `weights`, giving each at least a
/// dozen packets when there are enough.
fn share(budget: u64, weights: &[u64]) -> Vec<u64> {
    let n = weights.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    let floor = (budget / n).min(12);
    let rest = budget - floor * n;
    let total: u128 = weights.iter().map(|&w| u128::from(w.max(1))).sum();
    let mut out: Vec<u64> = weights
        .iter()
        // At most `rest`: fits.
        .map(|&w| floor + (u128::from(rest) * u128::from(w.max(1)) / total) as u64)
        .collect();
    // Rounding down leaves fewer than n packets: one more to the first ones.
    let given: u64 = out.iter().sum();
    for slot in out.iter_mut().take((budget - given) as usize) {
        *slot += 1;
    }
    out
}

/// Sets a TCP flow's packet count and what depends on it.
fn finish_tcp(fl: &mut Flow, n: u64, t: &Timing) {
    // n <= MAX_PACKETS: fits.
    fl.n = n.min(u64::from(u32::MAX)) as u32;
    fl.head = if fl.n >= 6 { 3 } else { 0 };
    if fl.closes && fl.n < u32::from(fl.head) + 6 {
        // Too short to close: it runs to the end instead.
        fl.closes = false;
        fl.end = t.dur - t.tick;
    }
    // Never idle long enough to be aged out.
    let body = u64::from(fl.n - u32::from(fl.head));
    let s0 = fl.start + u64::from(fl.head) * t.rtt();
    fl.end = fl
        .end
        .min(s0.saturating_add(body.saturating_mul(t.max_gap())));
    fl.end = fl.end.max(s0 + 1).min(t.dur - 1);
}

/// The plan of a workload too small for the mix: one TCP flow from VM 1 to
/// VM 2 with every packet.
fn minimal(spec: &DemoSpec, t: &Timing) -> Plan {
    let mut r = Rng::new(spec.seed ^ 1);
    let mut fl = flow(Kind::Bulk { upload: false }, 1, 2, 0, r.next_u64());
    fl.sport = EPHEMERAL_LO as u16 + r.below(u64::from(EPHEMERAL_N)) as u16;
    fl.dport = 80;
    fl.tsopt = true;
    fl.seq_c = r.next_u64() as u32;
    fl.seq_s = r.next_u64() as u32;
    fl.req_len = 100;
    fl.start = t.tick;
    fl.end = t.dur - t.tick;
    finish_tcp(&mut fl, spec.packets, t);
    let mut flows = vec![fl];
    sort(&mut flows, t);
    Plan {
        flows,
        mix: DemoMix {
            tcp_flows: 1,
            tcp_packets: spec.packets,
            ..DemoMix::default()
        },
    }
}

/// The duration in nanoseconds (of a normalised spec).
pub(super) fn duration_ns(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

//! esw-pktgen: a send-only traffic generator for the benchmarks.
//!
//! Builds Ethernet/IPv4/UDP frames (valid IPv4 header checksum, UDP checksum
//! 0) and sends them on one interface through an AF_PACKET socket in batches
//! of 32 (`netdev::AfPacketTx`: `sendmmsg`, qdisc bypassed), for a bounded
//! time, optionally paced by a token bucket on the monotonic clock. With
//! `--flows N` packet `i` uses the `i mod N`th of N distinct (source port,
//! destination port) pairs. Receivers are counted by the scripts from
//! `/sys/class/net/<if>/statistics/rx_packets`.
//!
//! Prints `sent <packets> in <seconds> s (<pps> pps)`, or with `--json`
//! `{"sent":..,"seconds":..,"pps":..}`.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use megaflow::port::Port;
use megaflow::Timestamp;
use netdev::{AfPacketConfig, AfPacketPort, AfPacketTx, NetdevError, TxMode};

/// Frames per send call.
const BATCH: usize = 32;
/// Shortest frame (without FCS) Ethernet allows.
const MIN_SIZE: usize = 60;
/// Longest frame accepted (a 9000-byte MTU plus the Ethernet header).
const MAX_SIZE: usize = 9014;
/// Longest run.
const MAX_SECONDS: f64 = 60.0;
/// Most distinct flows.
const MAX_FLOWS: u32 = 1_000_000;
/// First source and destination ports of the flow set.
const SPORT_BASE: u16 = 1024;
const DPORT_BASE: u16 = 5001;
/// Source ports used before the destination port moves on.
const SPORTS: u32 = 32_768;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Method {
    /// `sendmmsg` on a send-only socket (the default, the faster one).
    Mmsg,
    /// A PACKET_TX_RING kicked once per batch.
    Ring,
}

/// Send-only UDP traffic generator over AF_PACKET.
#[derive(Debug, Parser)]
#[command(name = "esw-pktgen", version)]
struct Args {
    /// Interface to send on.
    #[arg(long, value_name = "IF")]
    iface: String,
    /// Source MAC address.
    #[arg(long, value_name = "MAC", default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    src_mac: [u8; 6],
    /// Destination MAC address.
    #[arg(long, value_name = "MAC", default_value = "02:00:00:00:00:02", value_parser = parse_mac)]
    dst_mac: [u8; 6],
    /// Source IPv4 address.
    #[arg(long, value_name = "IP", default_value = "198.18.0.1")]
    src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long, value_name = "IP", default_value = "198.18.0.2")]
    dst_ip: Ipv4Addr,
    /// Frame size in bytes, without the FCS (60 to 9014).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = parse_size)]
    size: usize,
    /// Packets per second; 0 sends as fast as possible.
    #[arg(long, value_name = "PPS", default_value_t = 0)]
    rate: u64,
    /// How long to send (at most 60 s).
    #[arg(long, value_name = "S", default_value_t = 3.0, value_parser = parse_seconds)]
    seconds: f64,
    /// Number of distinct UDP 5-tuples, used in turn (packet i uses tuple
    /// i mod N).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_flows)]
    flows: u32,
    /// Stop after this many packets.
    #[arg(long, value_name = "C")]
    count: Option<u64>,
    /// Send each flow's reply direction: its source and destination
    /// ports swapped (give --src-ip and --dst-ip swapped too), so a
    /// stateful table sees the flows the forward run opened answered.
    #[arg(long)]
    reverse: bool,
    /// Print the result as a JSON object.
    #[arg(long)]
    json: bool,
    /// Transmit method.
    #[arg(long, value_enum, default_value_t = Method::Mmsg)]
    tx_method: Method,
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("'{s}' is not a MAC address (want aa:bb:cc:dd:ee:ff)");
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(mac)
}

fn parse_size(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !(MIN_SIZE..=MAX_SIZE).contains(&n) {
        return Err(format!(
            "{n} is out of range: frames are {MIN_SIZE} to {MAX_SIZE} bytes (without FCS)"
        ));
    }
    Ok(n)
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let n: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !(n > 0.0 && n <= MAX_SECONDS) {
        return Err(format!("{n} is out of range: 0 < seconds <= {MAX_SECONDS}"));
    }
    Ok(n)
}

fn parse_flows(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if n == 0 || n > MAX_FLOWS {
        return Err(format!("{n} is out of range: 1 to {MAX_FLOWS} flows"));
    }
    Ok(n)
}

/// The (source port, destination port) of flow `k`; distinct for distinct
/// `k < MAX_FLOWS`; `reverse`: the reply's, the two swapped.
fn flow_ports(k: u32, reverse: bool) -> (u16, u16) {
    let (s, d) = (
        SPORT_BASE + (k % SPORTS) as u16,
        DPORT_BASE + (k / SPORTS) as u16,
    );
    if reverse {
        (d, s)
    } else {
        (s, d)
    }
}

/// The Internet checksum of `data` (even length).
fn ip_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Offset of the UDP source port in a frame.
const UDP_OFF: usize = 14 + 20;

/// An Ethernet/IPv4/UDP frame of `args.size` bytes for flow `k`.
fn build_frame(args: &Args, k: u32) -> Vec<u8> {
    let size = args.size;
    let mut f = Vec::with_capacity(size);
    f.extend_from_slice(&args.dst_mac);
    f.extend_from_slice(&args.src_mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (size - 14) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&args.src_ip.octets());
    ip[16..20].copy_from_slice(&args.dst_ip.octets());
    let csum = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    let (sport, dport) = flow_ports(k, args.reverse);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&0u16.to_be_bytes()); // no UDP checksum
    let mut i = 0u8;
    while f.len() < size {
        f.push(i);
        i = i.wrapping_add(1);
    }
    f
}

/// Rewrites the UDP ports of `frame` for flow `k` (the IPv4 checksum does
/// not cover them and the UDP checksum is 0, so nothing else changes).
fn set_flow(frame: &mut [u8], k: u32, reverse: bool) {
    let (sport, dport) = flow_ports(k, reverse);
    frame[UDP_OFF..UDP_OFF + 2].copy_from_slice(&sport.to_be_bytes());
    frame[UDP_OFF + 2..UDP_OFF + 4].copy_from_slice(&dport.to_be_bytes());
}

/// Where frames go.
enum Sender {
    Mmsg(AfPacketTx),
    Ring(Box<AfPacketPort>),
}

impl Sender {
    fn open(iface: &str, method: Method, size: usize) -> Result<Sender, NetdevError> {
        Ok(match method {
            Method::Mmsg => Sender::Mmsg(AfPacketTx::open(iface)?),
            Method::Ring => {
                let cfg = AfPacketConfig {
                    // The receive side is unused: keep it tiny.
                    block_size: 4096,
                    block_count: 1,
                    frame_size: 2048,
                    tx_mode: TxMode::Ring,
                    tx_frame_size: (size + 64).next_multiple_of(256) as u32,
                    tx_frame_count: 256,
                    promiscuous: false,
                    ..AfPacketConfig::default()
                };
                Sender::Ring(Box::new(AfPacketPort::open(iface, cfg)?))
            }
        })
    }

    fn send(&mut self, pkts: &[&[u8]]) -> Result<usize, String> {
        match self {
            Sender::Mmsg(tx) => tx.try_send_batch(pkts).map_err(|e| e.to_string()),
            Sender::Ring(p) => p
                .send_batch(pkts, Timestamp::NEVER)
                .map_err(|e| e.to_string()),
        }
    }

    fn dropped(&self) -> u64 {
        match self {
            Sender::Mmsg(tx) => tx.stats().tx_dropped,
            Sender::Ring(p) => p.stats().tx_dropped,
        }
    }
}

/// A token bucket on the monotonic clock: `rate` tokens per second, at most
/// `burst` saved up.
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u64, now: Instant) -> Bucket {
        let rate = rate as f64;
        let burst = (rate / 1000.0).max(BATCH as f64);
        Bucket {
            rate,
            burst,
            tokens: BATCH as f64,
            last: now,
        }
    }

    /// Refills, then returns how many whole tokens (up to `want`) can be
    /// spent now.
    fn available(&mut self, now: Instant, want: usize) -> usize {
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        (self.tokens as usize).min(want)
    }

    fn spend(&mut self, n: usize) {
        self.tokens -= n as f64;
    }

    /// How long until `n` tokens are there.
    fn wait_for(&self, n: usize) -> Duration {
        let missing = (n as f64 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing / self.rate)
    }
}

fn run(args: &Args) -> Result<(u64, f64, u64), String> {
    let mut sender =
        Sender::open(&args.iface, args.tx_method, args.size).map_err(|e| e.to_string())?;
    let mut frames: Vec<Vec<u8>> = (0..BATCH as u32)
        .map(|k| build_frame(args, k % args.flows))
        .collect();
    let limit = args.count.unwrap_or(u64::MAX);
    let duration = Duration::from_secs_f64(args.seconds);
    let start = Instant::now();
    let end = start + duration;
    let mut bucket = (args.rate > 0).then(|| Bucket::new(args.rate, start));
    let mut sent: u64 = 0;
    // Packet index of frames[0]; each packet i uses flow i mod N.
    let mut next: u64 = 0;
    let flows = u64::from(args.flows);
    let mut prepared_for: u64 = 0;
    loop {
        let now = Instant::now();
        if now >= end || sent >= limit {
            break;
        }
        let mut n = BATCH.min((limit - sent).min(BATCH as u64) as usize);
        if let Some(b) = bucket.as_mut() {
            n = b.available(now, n);
            if n == 0 {
                let wait = b.wait_for(1).min(end.saturating_duration_since(now));
                if wait > Duration::from_micros(100) {
                    std::thread::sleep(wait);
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
        }
        if args.flows > 1 && prepared_for != next {
            for (j, f) in frames.iter_mut().enumerate() {
                set_flow(f, ((next + j as u64) % flows) as u32, args.reverse);
            }
            prepared_for = next;
        }
        let mut refs: [&[u8]; BATCH] = [&[]; BATCH];
        for (r, f) in refs.iter_mut().zip(&frames) {
            *r = f;
        }
        let ok = sender.send(&refs[..n])?;
        if let Some(b) = bucket.as_mut() {
            b.spend(n);
        }
        sent += ok as u64;
        // Packets are numbered by attempt, so a dropped one keeps its tuple
        // slot and the flow cycle stays in order.
        next += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((sent, secs, sender.dropped()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok((sent, secs, dropped)) => {
            let pps = if secs > 0.0 { sent as f64 / secs } else { 0.0 };
            if args.json {
                println!("{{\"sent\":{sent},\"seconds\":{secs:.6},\"pps\":{pps:.0}}}");
            } else {
                println!("sent {sent} in {secs:.3} s ({pps:.0} pps)");
            }
            if dropped > 0 {
                eprintln!("esw-pktgen: {dropped} packets dropped (device queue full)");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("esw-pktgen: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["esw-pktgen", "--iface", "lo"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v).expect("args parse")
    }

    #[test]
    fn frame_is_valid_ipv4_udp() {
        let a = args(&[
            "--size",
            "64",
            "--src-ip",
            "198.18.1.2",
            "--dst-ip",
            "198.19.3.4",
        ]);
        let f = build_frame(&a, 0);
        assert_eq!(f.len(), 64);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(ip_checksum(&f[14..34]), 0, "header checksum verifies");
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 50);
        assert_eq!(&f[26..30], &[198, 18, 1, 2]);
        assert_eq!(&f[30..34], &[198, 19, 3, 4]);
        assert_eq!(f[23], 17);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 30, "UDP length");
        let big = build_frame(&args(&["--size", "1514"]), 3);
        assert_eq!(big.len(), 1514);
        assert_eq!(ip_checksum(&big[14..34]), 0);
    }

    #[test]
    fn flows_cycle_in_order_and_are_distinct() {
        let n = 100_000u32;
        let mut seen = std::collections::HashSet::new();
        for k in 0..n {
            assert!(seen.insert(flow_ports(k, false)), "flow {k} repeats");
        }
        let a = args(&["--flows", "5"]);
        let mut f = build_frame(&a, 0);
        set_flow(&mut f, 7 % 5, false);
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), SPORT_BASE + 2);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), DPORT_BASE);
        // The reply direction: the same flow's ports swapped.
        let r = args(&["--flows", "5", "--reverse"]);
        let mut f = build_frame(&r, 0);
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), DPORT_BASE);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), SPORT_BASE);
        set_flow(&mut f, 2, r.reverse);
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), DPORT_BASE);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), SPORT_BASE + 2);
    }

    #[test]
    fn bad_arguments_are_named() {
        for (flag, val) in [
            ("--size", "59"),
            ("--seconds", "61"),
            ("--flows", "0"),
            ("--src-mac", "02:00:00"),
            ("--dst-ip", "300.1.1.1"),
        ] {
            let e = Args::try_parse_from(["esw-pktgen", "--iface", "lo", flag, val])
                .expect_err("bad value accepted")
                .to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn bucket_paces() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1000, t0);
        assert_eq!(b.available(t0, 32), 32);
        b.spend(32);
        assert_eq!(b.available(t0, 32), 0);
        let later = t0 + Duration::from_millis(10);
        assert_eq!(b.available(later, 32), 10);
    }
}

//! The demo workload of `eswitchd replay --demo`: a deterministic, seeded
//! generator of the traffic of a few VMs, the OpenFlow table that goes with
//! it, and a writer of it as a pcapng capture.
//!
//! ## The setting
//!
//! VM `i` (1 ≤ i ≤ [`DemoSpec::vms`]) sits on OpenFlow port `i`, with MAC
//! `02:00:00:00:00:ii` ([`vm_mac`]; `ii` is `i` in hex) and IPv4 address
//! `198.18.0.i` ([`vm_ip`]; 198.18.0.0/15 is the benchmarking range). Every
//! packet is sent by a VM, from its own MAC and IP, and arrives on its port
//! ([`DemoPacket::in_port`]). Timestamps are nanoseconds from [`EPOCH`]
//! (1 700 000 000 s after the Unix epoch, November 2023), non-decreasing,
//! within `[EPOCH, EPOCH + seconds)`.
//!
//! ## The traffic
//!
//! - Long-lived TCP (most packets): about 5 % of the flows. Each opens
//!   with a handshake (SYN 74 bytes, SYN-ACK, ACK), sends a request, then
//!   data one way (1 514-byte segments) with an ACK every second segment
//!   (66 bytes with the timestamp option, which 80 % of the flows use; 54
//!   without, padded to the 60-byte Ethernet minimum), in both directions
//!   according to who uploads. Three quarters start in the first fifth of
//!   the capture, the rest in the middle; 30 % close with FINs before the
//!   end, the others run to it. Packet counts are heavy-tailed (a few
//!   elephants, many mice), and no such flow stays silent for more than
//!   2 s (a tenth of the duration if shorter), so none is aged out while
//!   alive. About 15 % are interactive SSH sessions to TCP port 22
//!   (small segments both ways), always including one from VM 4 to VM 2
//!   when there are at least 4 VMs: the table *samples* these.
//! - Short UDP exchanges: nearly all the other flows. DNS-like (90 %: a
//!   query to port 53 and usually its answer, sometimes a second pair; 1–5
//!   packets) or NTP-like (10 %: query and answer to port 123), starting at
//!   random times and over within milliseconds, so they go idle and are
//!   aged out 10 s (of capture time) later.
//! - VM 4's UDP stream to VM 1 port 5001 (10 % of the packets, 1 512-byte
//!   datagrams as iperf sends), in one burst at about three times the rate
//!   of meter 1 (8 Mbit/s) from a quarter of the capture on: the table
//!   *meters* it, so a meter drops about two packets in three. Present with
//!   4 VMs or more.
//! - Broadcasts (0.2 %): DHCP-like (UDP 68 → 67) and NetBIOS-like (UDP 138 →
//!   138) from random VMs to `ff:ff:ff:ff:ff:ff` / 198.18.255.255, spread
//!   over the capture.
//! - ARP: a request (broadcast) and its reply just before each VM pair's
//!   first packet.
//!
//! The TCP flows take whatever the others leave: with the defaults (200 000
//! packets, 2 000 flows) about 87 % of the packets, with 1 000 000 packets
//! and 100 000 flows about 66 % (short UDP flows then carry a quarter).
//! [`DemoMix`] gives the exact split of a workload.
//!
//! `flows` counts connections: a TCP connection or a UDP exchange is one
//! flow (two directional 5-tuples), the metered stream one; broadcasts and
//! ARP are extra. Client ports are distinct per (client, server, protocol)
//! up to the 28 232 ports of Linux's ephemeral range, so flows are distinct
//! 5-tuples while no VM pair has more UDP (or TCP) flows than that. A
//! workload keeps at least 8 packets per flow (it has fewer than `flows`
//! otherwise: `packets / 8`, at least 1); one of 1 or 2 packets is a single
//! TCP flow from VM 1 to VM 2 with no ARP.
//!
//! ## Generating
//!
//! [`generate`] returns a [`DemoGenerator`], an iterator of owned
//! [`DemoPacket`]s; [`DemoGenerator::next_into`] writes each frame into a
//! buffer the caller reuses instead, several million packets a second. The
//! plan (tens of bytes per flow) is drawn from the seed up front; packets
//! are made on the fly, so a million-packet workload needs no more memory
//! than a thousand-packet one with the same flows. The same spec always
//! gives the same packets, on any platform: a splitmix64 generator, integer
//! arithmetic, and floating point only in basic operations, which IEEE 754
//! rounds the same everywhere.

mod frame;
pub mod overlay;
mod plan;
pub mod stateful;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use megaflow::port::{PcapNgWriter, PortError};
use megaflow::{PortNo, Timestamp};

use frame::{Addrs, Tcp, ACK, ETH_BROADCAST, FIN, PSH, SYN};
use plan::{mix, Flow, Kind, Timing};

/// The capture's start: 1 700 000 000 s after the Unix epoch, in ns.
pub const EPOCH: Timestamp = Timestamp(1_700_000_000 * 1_000_000_000);
/// Most VMs (the last byte of their MAC and IPv4 address).
pub const MAX_VMS: u32 = 254;
/// Largest `packets` (one flow's packets are counted in 32 bits).
pub const MAX_PACKETS: u64 = u32::MAX as u64;
/// Shortest and longest `seconds`.
pub const MIN_SECONDS: f64 = 0.01;
pub const MAX_SECONDS: f64 = 1_000_000.0;
/// The VM whose UDP stream to [`METERED_UDP_PORT`] the table meters.
pub const METERED_VM: u32 = 4;
/// Destination port of the metered stream.
pub const METERED_UDP_PORT: u16 = 5001;
/// The meter of the stream, and its rate.
pub const METER_ID: u32 = 1;
pub const METER_KBPS: u32 = 8000;
/// Destination port of the TCP traffic the table samples.
pub const SAMPLED_TCP_PORT: u16 = 22;
/// The sampling probability, in 65 535ths (about 1 in 10).
pub const SAMPLE_PROBABILITY: u16 = 6553;
/// Destination IPv4 address of the broadcasts (198.18.255.255).
pub const BROADCAST_IP: u32 = 0xc612_ffff;

/// The MAC address of VM `vm`: `02:00:00:00:00:vm`.
pub fn vm_mac(vm: u32) -> u64 {
    0x0200_0000_0000 | u64::from(vm & 0xff)
}

/// The IPv4 address of VM `vm`: 198.18.0.vm.
pub fn vm_ip(vm: u32) -> u32 {
    0xc612_0000 | (vm & 0xff)
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoSpec {
    /// VMs, on OpenFlow ports 1..=vms (2 to [`MAX_VMS`]).
    pub vms: u32,
    /// Packets in all (exactly; at most [`MAX_PACKETS`]).
    pub packets: u64,
    /// Connections: TCP connections and UDP exchanges (see the module
    /// documentation; at least 1).
    pub flows: u32,
    /// Simulated duration ([`MIN_SECONDS`] to [`MAX_SECONDS`]).
    pub seconds: f64,
    /// Seed of everything random.
    pub seed: u64,
}

impl Default for DemoSpec {
    fn default() -> Self {
        DemoSpec {
            vms: 4,
            packets: 200_000,
            flows: 2_000,
            seconds: 30.0,
            seed: 1,
        }
    }
}

impl DemoSpec {
    /// `Ok` if every field is in range; else an error naming the first one
    /// that is not. [`generate`] works on any spec, bringing fields into
    /// range ([`DemoSpec::normalized`]); the writers refuse bad ones.
    pub fn validate(&self) -> Result<(), DemoError> {
        let bad = |field: &'static str, reason: String| Err(DemoError::Spec { field, reason });
        if !(2..=MAX_VMS).contains(&self.vms) {
            return bad(
                "vms",
                format!("{} is not between 2 and {MAX_VMS}", self.vms),
            );
        }
        if self.packets > MAX_PACKETS {
            return bad("packets", format!("{} exceeds {MAX_PACKETS}", self.packets));
        }
        if self.flows == 0 {
            return bad("flows", "must be at least 1".to_string());
        }
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds) {
            return bad(
                "seconds",
                format!(
                    "{} is not between {MIN_SECONDS} and {MAX_SECONDS}",
                    self.seconds
                ),
            );
        }
        Ok(())
    }

    /// The spec with every field clamped into range (a NaN duration
    /// becomes [`MIN_SECONDS`]): what [`generate`] uses.
    pub fn normalized(&self) -> DemoSpec {
        let seconds = if self.seconds.is_nan() {
            MIN_SECONDS
        } else {
            self.seconds.clamp(MIN_SECONDS, MAX_SECONDS)
        };
        DemoSpec {
            vms: self.vms.clamp(2, MAX_VMS),
            packets: self.packets.min(MAX_PACKETS),
            flows: self.flows.max(1),
            seconds,
            seed: self.seed,
        }
    }
}

/// How a workload's packets and flows divide among the kinds of traffic.
/// The packet counts add up to [`DemoSpec::packets`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemoMix {
    /// Long-lived TCP connections, SSH sessions included.
    pub tcp_flows: u32,
    /// Of which SSH sessions (TCP to [`SAMPLED_TCP_PORT`]).
    pub ssh_flows: u32,
    /// Short UDP exchanges (DNS- and NTP-like).
    pub udp_flows: u32,
    /// VM 4's stream to [`METERED_UDP_PORT`] (0 or 1).
    pub metered_flows: u32,
    pub tcp_packets: u64,
    pub udp_packets: u64,
    pub metered_packets: u64,
    pub broadcast_packets: u64,
    pub arp_packets: u64,
}

/// One generated packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoPacket {
    /// When it arrives (ns since the Unix epoch, from [`EPOCH`] on).
    pub ts: Timestamp,
    /// The OpenFlow port it arrives on: its sender VM's number.
    pub in_port: PortNo,
    /// The Ethernet frame.
    pub frame: Vec<u8>,
}

/// Why the demo workload could not be written.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// A [`DemoSpec`] field is out of range.
    Spec { field: &'static str, reason: String },
    /// Writing the capture failed.
    Port(PortError),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Spec { field, reason } => write!(f, "demo workload: {field}: {reason}"),
            DemoError::Port(e) => write!(f, "demo workload: {e}"),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DemoError::Spec { .. } => None,
            DemoError::Port(e) => Some(e),
        }
    }
}

impl From<PortError> for DemoError {
    fn from(e: PortError) -> Self {
        DemoError::Port(e)
    }
}

/// The workload of `spec` (normalised first, see [`DemoSpec::normalized`]).
pub fn generate(spec: &DemoSpec) -> DemoGenerator {
    DemoGenerator::new(spec)
}

/// Generates the packets of a workload in time order; see the [module
/// documentation](self).
pub struct DemoGenerator {
    spec: DemoSpec,
    timing: Timing,
    /// The plan, sorted by first packet.
    flows: Vec<Flow>,
    /// Flows before this index have started.
    next_new: usize,
    /// Started flows with packets left: (time of the next, flow index).
    active: BinaryHeap<Reverse<(u64, u32)>>,
    left: u64,
    mix: DemoMix,
}

impl fmt::Debug for DemoGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoGenerator")
            .field("spec", &self.spec)
            .field("flows", &self.flows.len())
            .field("left", &self.left)
            .finish()
    }
}

impl DemoGenerator {
    /// Plans the workload of `spec` (normalised first).
    pub fn new(spec: &DemoSpec) -> Self {
        let spec = spec.normalized();
        let timing = Timing::new(plan::duration_ns(spec.seconds));
        let plan = plan::plan(&spec);
        DemoGenerator {
            left: spec.packets,
            spec,
            timing,
            flows: plan.flows,
            next_new: 0,
            active: BinaryHeap::new(),
            mix: plan.mix,
        }
    }

    /// The spec generated (normalised).
    pub fn spec(&self) -> &DemoSpec {
        &self.spec
    }

    /// How the packets and flows divide among the kinds of traffic.
    pub fn mix(&self) -> DemoMix {
        self.mix
    }

    /// Packets not generated yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// Writes the next packet's frame into `buf` (replacing its contents)
    /// and returns its timestamp and in_port; `None` after the last.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Option<(Timestamp, PortNo)> {
        let (at, idx) = self.next_event()?;
        let timing = self.timing;
        let vms = self.spec.vms;
        let f = self.flows.get_mut(idx)?;
        let k = f.k;
        f.k += 1;
        if f.k < f.n {
            // idx < flows.len() <= u32::MAX packets.
            self.active
                .push(Reverse((plan::time_of(f, f.k, &timing), idx as u32)));
        }
        self.left -= 1;
        let port = emit(f, k, at, buf, vms, &timing);
        Some((Timestamp(EPOCH.0 + at), PortNo(port)))
    }

    /// The time and flow of the next packet.
    fn next_event(&mut self) -> Option<(u64, usize)> {
        let pending = self
            .flows
            .get(self.next_new)
            .map(|f| (f.first, self.next_new));
        let top = self.active.peek().map(|Reverse((t, i))| (*t, *i as usize));
        match (pending, top) {
            (Some(p), Some(a)) if a < p => {
                self.active.pop();
                Some(a)
            }
            (Some(p), _) => {
                self.next_new += 1;
                Some(p)
            }
            (None, Some(a)) => {
                self.active.pop();
                Some(a)
            }
            (None, None) => None,
        }
    }
}

impl Iterator for DemoGenerator {
    type Item = DemoPacket;

    fn next(&mut self) -> Option<DemoPacket> {
        let mut frame = Vec::with_capacity(128);
        let (ts, in_port) = self.next_into(&mut frame)?;
        Some(DemoPacket { ts, in_port, frame })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, usize::try_from(self.left).ok())
    }
}

/// The workload of `spec` with its tenants' packets in it: the overlay
/// tenant's ([`overlay`]) and the stateful tenant's ([`stateful`]), a
/// tenth of `spec.packets` each (none below 1 000), the rest the
/// workload's, merged in time order. Its ports are the VMs' then
/// [`overlay::port_specs`] and [`stateful::port_specs`], its table
/// [`flow_table`], [`overlay::flow_table`] and [`stateful::flow_table`],
/// its underlay [`overlay::underlay`].
pub fn with_overlay(spec: &DemoSpec) -> WithOverlay {
    let spec = spec.normalized();
    let n = overlay::packets_of(&spec);
    let s = stateful::packets_of(&spec);
    let main = DemoSpec {
        packets: spec.packets - n - s,
        ..spec.clone()
    };
    WithOverlay {
        main: DemoGenerator::new(&main),
        tenant: overlay::OverlayGenerator::new(&spec, n),
        stateful: stateful::StatefulGenerator::new(&spec, s),
        next: [None, None, None],
    }
}

/// The iterator of [`with_overlay`].
pub struct WithOverlay {
    main: DemoGenerator,
    tenant: overlay::OverlayGenerator,
    stateful: stateful::StatefulGenerator,
    /// The next packet of each, once drawn.
    next: [Option<DemoPacket>; 3],
}

impl Iterator for WithOverlay {
    type Item = DemoPacket;

    fn next(&mut self) -> Option<DemoPacket> {
        if self.next[0].is_none() {
            self.next[0] = self.main.next();
        }
        // A tenant's next packet, in a buffer of its own.
        fn draw(
            next: impl FnOnce(&mut Vec<u8>) -> Option<(Timestamp, PortNo)>,
        ) -> Option<DemoPacket> {
            let mut frame = Vec::with_capacity(1600);
            next(&mut frame).map(|(ts, in_port)| DemoPacket { ts, in_port, frame })
        }
        if self.next[1].is_none() {
            self.next[1] = draw(|b| self.tenant.next_into(b));
        }
        if self.next[2].is_none() {
            self.next[2] = draw(|b| self.stateful.next_into(b));
        }
        // The earliest; on a tie, the first source.
        let i = (0..3)
            .filter_map(|i| self.next[i].as_ref().map(|p| (p.ts, i)))
            .min()?
            .1;
        self.next[i].take()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = self.next.iter().flatten().count() as u64;
        let n = self.main.remaining() + self.tenant.remaining() + self.stateful.remaining() + held;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// The TCP timestamp clock of a VM (ms, with a per-VM offset).
fn ts_clock(vm: u8, at: u64) -> u32 {
    ((at / 1_000_000) as u32).wrapping_add(mix(u64::from(vm)) as u32)
}

/// One TCP segment's role in its flow.
struct Segment {
    from_client: bool,
    flags: u16,
    payload: usize,
}

/// What packet `k` of TCP flow `f` is.
fn tcp_segment(f: &Flow, k: u32) -> Segment {
    let seg = |from_client, flags, payload| Segment {
        from_client,
        flags,
        payload,
    };
    let head = u32::from(f.head);
    if k < head {
        return match k {
            0 => seg(true, SYN, 0),
            1 => seg(false, SYN | ACK, 0),
            _ => seg(true, ACK, 0),
        };
    }
    if f.closes && k + 2 >= f.n {
        return seg(k + 2 == f.n, FIN | ACK, 0);
    }
    let i = k - head;
    let h = mix(f.salt ^ u64::from(k) << 32);
    match f.kind {
        Kind::Ssh => match i % 3 {
            0 => seg(true, PSH | ACK, 36 + 16 * (h % 3) as usize),
            1 => seg(false, PSH | ACK, 36 + 16 * (h % 8) as usize),
            _ => seg(true, ACK, 0),
        },
        _ => {
            let upload = matches!(f.kind, Kind::Bulk { upload: true });
            if i == 0 {
                return seg(true, PSH | ACK, usize::from(f.req_len));
            }
            let mss = if f.tsopt { 1448 } else { 1460 };
            match (i - 1) % 3 {
                0 => seg(upload, ACK, mss),
                1 => seg(upload, PSH | ACK, mss),
                _ => seg(!upload, ACK, 0),
            }
        }
    }
}

/// Writes packet `k` of `f`, sent at `at`, into `buf`; returns the
/// sender's VM (= in_port).
fn emit(f: &mut Flow, k: u32, at: u64, buf: &mut Vec<u8>, vms: u32, t: &Timing) -> u32 {
    let (c, s) = (u32::from(f.client), u32::from(f.server));
    let addrs = |from: u32, to: u32| Addrs {
        src_mac: vm_mac(from),
        dst_mac: vm_mac(to),
        src_ip: vm_ip(from),
        dst_ip: vm_ip(to),
    };
    match f.kind {
        Kind::Arp if k == 0 => {
            frame::arp_request(buf, vm_mac(c), vm_ip(c), vm_ip(s));
            c
        }
        Kind::Arp => {
            frame::arp_reply(buf, vm_mac(s), vm_ip(s), vm_mac(c), vm_ip(c));
            s
        }
        Kind::Broadcast => {
            let h = mix(f.salt ^ u64::from(k) << 20);
            let vm = 1 + (h % u64::from(vms)) as u32;
            let a = Addrs {
                src_mac: vm_mac(vm),
                dst_mac: ETH_BROADCAST,
                src_ip: vm_ip(vm),
                dst_ip: BROADCAST_IP,
            };
            if h >> 40 & 1 == 0 {
                frame::udp(buf, &a, 138, 138, 201);
            } else {
                frame::udp(buf, &a, 68, 67, 300);
            }
            vm
        }
        Kind::Metered => {
            frame::udp(buf, &addrs(c, s), f.sport, f.dport, plan::METERED_PAYLOAD);
            c
        }
        Kind::Dns | Kind::Ntp => {
            let req = usize::from(f.req_len);
            if k & 1 == 0 {
                frame::udp(buf, &addrs(c, s), f.sport, f.dport, req);
                c
            } else {
                let answer = if f.kind == Kind::Ntp {
                    req
                } else {
                    req + 16 + (mix(f.salt ^ u64::from(k)) % 160) as usize
                };
                frame::udp(buf, &addrs(s, c), f.dport, f.sport, answer);
                s
            }
        }
        Kind::Bulk { .. } | Kind::Ssh => {
            let g = tcp_segment(f, k);
            let (from, to) = if g.from_client { (c, s) } else { (s, c) };
            let (sport, dport) = if g.from_client {
                (f.sport, f.dport)
            } else {
                (f.dport, f.sport)
            };
            let (seq, peer) = if g.from_client {
                (&mut f.seq_c, f.seq_s)
            } else {
                (&mut f.seq_s, f.seq_c)
            };
            let syn = g.flags & SYN != 0;
            let ack = if g.flags & ACK != 0 { peer } else { 0 };
            let tsval = ts_clock(from as u8, at);
            let tsecr = if g.flags == SYN {
                0
            } else {
                ts_clock(to as u8, at.saturating_sub(t.rtt()))
            };
            let mut opts = [0u8; 20];
            let opt_len = match (syn, f.tsopt) {
                (true, true) => {
                    // MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
                    opts[..8].copy_from_slice(&[2, 4, 0x05, 0xb4, 4, 2, 8, 10]);
                    opts[8..12].copy_from_slice(&tsval.to_be_bytes());
                    opts[12..16].copy_from_slice(&tsecr.to_be_bytes());
                    opts[16..20].copy_from_slice(&[1, 3, 3, 7]);
                    20
                }
                (true, false) => {
                    opts[..4].copy_from_slice(&[2, 4, 0x05, 0xb4]);
                    4
                }
                (false, true) => {
                    opts[..4].copy_from_slice(&[1, 1, 8, 10]);
                    opts[4..8].copy_from_slice(&tsval.to_be_bytes());
                    opts[8..12].copy_from_slice(&tsecr.to_be_bytes());
                    12
                }
                (false, false) => 0,
            };
            let window = if f.tsopt && !syn { 502 } else { 64_240 };
            let hdr = Tcp {
                sport,
                dport,
                seq: *seq,
                ack,
                flags: g.flags,
                window,
                options: &opts[..opt_len],
            };
            frame::tcp(buf, &addrs(from, to), &hdr, g.payload);
            let used = g.payload as u32 + u32::from(g.flags & (SYN | FIN) != 0);
            *seq = seq.wrapping_add(used);
            from
        }
    }
}

/// The pcapng interface names of a workload: `vm1`..`vm<vms>`; interface
/// id `i` is OpenFlow port `i + 1`.
pub fn interface_names(vms: u32) -> Vec<String> {
    (1..=vms).map(|i| format!("vm{i}")).collect()
}

/// Writes the workload of `spec` to a pcapng file at `path`; returns the
/// number of packets written.
///
/// The file has one interface per VM port, in order: interface id `i` is
/// named `vm<i+1>` and carries the packets of OpenFlow port `i + 1` (so a
/// reader maps pcapng interface id `i` → in_port `i + 1`). Timestamps are
/// in nanoseconds (`if_tsresol` 9). Reading the file back gives exactly
/// [`generate`]'s packets. An out-of-range spec is refused
/// ([`DemoSpec::validate`]).
pub fn write_pcapng(spec: &DemoSpec, path: impl AsRef<Path>) -> Result<u64, DemoError> {
    spec.validate()?;
    let names = interface_names(spec.vms);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let w = PcapNgWriter::create(path, &refs)?;
    let (n, _) = write_all(generate(spec), w)?;
    Ok(n)
}

/// [`write_pcapng`] of the workload with its overlay tenant
/// ([`with_overlay`]): the interfaces are the VMs', then the tenant's
/// `ovl1`, `ovl2` and `wire0` (interface id `i` is still OpenFlow port
/// `i + 1`); [`overlay::config_toml`] is the config that replays it.
pub fn write_pcapng_with_overlay(
    spec: &DemoSpec,
    path: impl AsRef<Path>,
) -> Result<u64, DemoError> {
    spec.validate()?;
    let spec = spec.normalized();
    let mut names = interface_names(spec.vms);
    // gnv0 (a tunnel port) receives nothing; its interface keeps the
    // ports after it at interface id + 1.
    names.extend(["ovl1", "ovl2", "wire0", "gnv0"].map(String::from));
    names.extend(
        stateful::Ports::of(spec.vms)
            .named()
            .map(|(n, _)| n.to_string()),
    );
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let w = PcapNgWriter::create(path, &refs)?;
    let (n, _) = write_all(with_overlay(&spec), w)?;
    Ok(n)
}

/// Like [`write_pcapng`], to any writer (`name` names it in errors);
/// returns the packets written and the writer, flushed.
pub fn write_pcapng_to<W: Write>(
    spec: &DemoSpec,
    out: W,
    name: &str,
) -> Result<(u64, W), DemoError> {
    spec.validate()?;
    let names = interface_names(spec.vms);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let w = PcapNgWriter::new(out, name, &refs)?;
    write_all(generate(spec), w)
}

fn write_all<W: Write>(
    packets: impl Iterator<Item = DemoPacket>,
    mut w: PcapNgWriter<W>,
) -> Result<(u64, W), DemoError> {
    let mut n = 0;
    for p in packets {
        w.write(p.in_port.0 - 1, p.ts, &p.frame)?;
        n += 1;
    }
    Ok((n, w.into_inner()?))
}

/// The example OpenFlow table of the workload for `vms` VMs (brought into
/// 2..=[`MAX_VMS`]), in `ovs-ofctl add-flows` syntax: one flow a line, `#`
/// comments.
///
/// - priority 300: ARP and Ethernet broadcasts → `normal`;
/// - priority 200: VM 4's UDP to port 5001 towards VM `j` (`in_port=4`,
///   `nw_dst=198.18.0.j`) → `meter:1,output:j` (with 4 VMs or more);
/// - priority 200: TCP to port 22 towards VM `i` →
///   `sample(probability=6553,collector_set_id=1),output:i`;
/// - priority 100: IPv4 to VM `i` (`nw_dst=198.18.0.i`) → `output:i`;
/// - priority 0: everything else → `drop`.
///
/// Meter 1 is defined by [`meter_lines`].
pub fn flow_table(vms: u32) -> String {
    let vms = vms.clamp(2, MAX_VMS);
    let ip = |i: u32| format!("198.18.0.{i}");
    let mut t = String::new();
    t.push_str(&format!(
        "# eswitch demo table ({vms} VMs): VM i is on port i, MAC 02:00:00:00:00:<i in hex>, IPv4 198.18.0.i.\n"
    ));
    t.push_str("# ARP and broadcasts: the NORMAL learning-switch pipeline.\n");
    t.push_str("priority=300,arp,actions=normal\n");
    t.push_str("priority=300,dl_dst=ff:ff:ff:ff:ff:ff,actions=normal\n");
    if vms >= METERED_VM {
        t.push_str(&format!(
            "# VM {METERED_VM}'s UDP to port {METERED_UDP_PORT}: policed by meter {METER_ID} ({METER_KBPS} kbit/s).\n"
        ));
        for j in (1..=vms).filter(|&j| j != METERED_VM) {
            t.push_str(&format!(
                "priority=200,udp,in_port={METERED_VM},nw_dst={},tp_dst={METERED_UDP_PORT},actions=meter:{METER_ID},output:{j}\n",
                ip(j)
            ));
        }
    }
    t.push_str(&format!(
        "# TCP to port {SAMPLED_TCP_PORT} (SSH): about 1 packet in 10 sampled.\n"
    ));
    for i in 1..=vms {
        t.push_str(&format!(
            "priority=200,tcp,nw_dst={},tp_dst={SAMPLED_TCP_PORT},actions=sample(probability={SAMPLE_PROBABILITY},collector_set_id=1),output:{i}\n",
            ip(i)
        ));
    }
    t.push_str("# Unicast IPv4 by destination.\n");
    for i in 1..=vms {
        t.push_str(&format!(
            "priority=100,ip,nw_dst={},actions=output:{i}\n",
            ip(i)
        ));
    }
    t.push_str("# Anything else.\npriority=0,actions=drop\n");
    t
}

/// The meters the table uses, in `ovs-ofctl add-meter` syntax (one a
/// line): meter 1, 8 000 kbit/s, drop band.
pub fn meter_lines() -> String {
    format!("meter={METER_ID},kbps,band=type=drop,rate={METER_KBPS}\n")
}

#[cfg(test)]
#[path = "demo/tests/mod.rs"]
mod tests;

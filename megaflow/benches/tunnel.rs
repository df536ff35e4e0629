//! Software forwarding through tunnels against plain forwarding, in one
//! run: the same megaflow cache hits, one output each, with
//! - plain: a frame in, out to a port;
//! - encap: a frame in, out through `tnl_push` (VXLAN over IPv4: the
//!   header pushed in place, output, popped);
//! - decap: a VXLAN frame in, read and stripped as the switch's receive
//!   does (`tunnel::decap`, the inner frame copied out, the tunnel
//!   metadata into the key), out to a port.
//!
//! Each output is copied into a transmit arena as the live daemon's
//! datapath threads gather a batch's frames (`TxArena`: back to back,
//! emptied every 32 frames) before the ports send them (a sink that only
//! counted would leave plain forwarding no work at all past the lookup). Frames of 512 bytes (inner). Prints `bench: tunnel.plain_mpps`,
//! `tunnel.encap_mpps`, `tunnel.decap_mpps`, `tunnel.encap_vs_plain` and
//! `tunnel.decap_vs_plain` (medians of 21 rounds; within a round the
//! three modes take turns every 65536 packets, the order turning, so a
//! machine whose speed drifts slows them alike). Run with
//! `cargo bench -p megaflow --bench tunnel`.

use std::sync::Arc;
use std::time::Instant;

use megaflow::actions::{ActionSink, DpAction, UserspaceReason};
use megaflow::frame::{FrameSpec, L4};
use megaflow::tunnel::{decap, Encap, Kind, Outer, OuterIp, VXLAN_PORT};
use megaflow::{
    extract_into, Actions, CacheConfig, Datapath, DpCommand, Field, FlowId, FlowKey, Lookup, Mask,
    Match, PortNo, SplitMix64, Timestamp, TunnelKey,
};

const FLOWS: u64 = 1000;
const FRAMES: usize = 4096;
const PACKETS: usize = 1_000_000;
const ROUNDS: usize = 21;
const TUNNEL: PortNo = PortNo(200);
const VNI: u32 = 4242;

fn frame(flow: u64, noise: u64) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | (noise as u32 & 0xff),
        0xc612_1000 | flow as u32,
        L4::udp(1024 + noise as u16, 80),
    )
    .payload(470)
    .build()
}

fn outer() -> Outer {
    Outer::vxlan_v4(
        ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]),
        [198, 19, 0, 1],
        [198, 19, 0, 2],
        VNI,
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    Encap,
    Decap,
}

/// One megaflow per destination address, entering on `in_port` (with the
/// tunnel's metadata for decap), each with `action`.
fn datapath(mode: Mode) -> Datapath {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    let mut mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::Ipv4Dst);
    if mode == Mode::Decap {
        mask = mask.with_exact(Field::TunId).with_exact(Field::TunSrc);
    }
    let header = Arc::new(Encap::new(outer()).expect("header"));
    for f in 0..FLOWS {
        let mut key = FlowKey::ZERO;
        let (in_port, action) = match mode {
            Mode::Plain => (1, DpAction::Output(PortNo(2))),
            Mode::Encap => (
                1,
                DpAction::TunnelPush {
                    header: Arc::clone(&header),
                    port: PortNo(100),
                    mtu: 1500,
                },
            ),
            Mode::Decap => (TUNNEL.0, DpAction::Output(PortNo(2))),
        };
        extract_into(in_port, &frame(f, 0), &mut key);
        if mode == Mode::Decap {
            key.set_tun_id(u64::from(VNI));
            key.set_tun_src(u64::from(u32::from_be_bytes([198, 19, 0, 2])));
        }
        dp.apply(DpCommand::Insert {
            id: FlowId(f),
            matched: Box::new(Match::new(&key, &mask)),
            actions: Actions::new(vec![action]),
        });
    }
    dp
}

/// One mode's datapath, frames and transmit arena.
struct Lane {
    mode: Mode,
    dp: Datapath,
    frames: Vec<Vec<u8>>,
    buf: Vec<u8>,
    sink: TxSink,
    next: usize,
    secs: f64,
    packets: usize,
}

impl Lane {
    fn new(mode: Mode, seed: u64) -> Lane {
        let mut rng = SplitMix64::new(seed);
        // What the far endpoint sends, for decap.
        let back = {
            let mut o = outer();
            o.ip = OuterIp::V4 {
                src: [198, 19, 0, 2],
                dst: [198, 19, 0, 1],
            };
            o
        };
        let frames = (0..FRAMES)
            .map(|_| {
                let f = frame(rng.below(FLOWS), rng.below(256));
                if mode == Mode::Decap {
                    let mut v = Vec::new();
                    back.encap(&f, rng.next_u64() as u32, &mut v)
                        .expect("encap");
                    v
                } else {
                    f
                }
            })
            .collect();
        Lane {
            mode,
            dp: datapath(mode),
            frames,
            buf: Vec::with_capacity(2048),
            sink: TxSink {
                arena: Vec::with_capacity(64 * 1024),
                frames: 0,
                outputs: 0,
                bytes: 0,
            },
            next: 0,
            secs: 0.0,
            packets: 0,
        }
    }

    /// `n` packets through, timed.
    fn run(&mut self, n: usize) {
        let ports = [(VXLAN_PORT, Kind::Vxlan)];
        let started = Instant::now();
        for _ in 0..n {
            let i = self.next;
            self.next += 1;
            let f = &self.frames[i % FRAMES];
            let now = Timestamp(i as u64);
            self.buf.clear();
            let r = match self.mode {
                Mode::Decap => {
                    let d = decap(f, &ports)
                        .expect("well formed")
                        .expect("a tunnel packet");
                    self.buf.extend_from_slice(&f[d.inner..]);
                    let tun = TunnelKey::of(&d);
                    self.dp
                        .process_tunneled(now, TUNNEL, &tun, &mut self.buf, &mut self.sink)
                }
                _ => {
                    self.buf.extend_from_slice(f);
                    self.dp
                        .process(now, PortNo(1), &mut self.buf, &mut self.sink)
                }
            };
            assert!(matches!(r, Lookup::Hit(_)), "every packet hits");
        }
        self.secs += started.elapsed().as_secs_f64();
        self.packets += n;
    }

    fn rate(&self) -> f64 {
        assert_eq!(self.sink.outputs, self.packets as u64);
        std::hint::black_box(self.sink.bytes);
        self.packets as f64 / self.secs
    }
}

/// Packets per second of `PACKETS` through each mode's datapath, the
/// modes taking turns every [`SLICE`] packets (a machine whose speed
/// drifts slows all three alike).
fn forward(seed: u64) -> [f64; 3] {
    let mut lanes = [Mode::Plain, Mode::Encap, Mode::Decap].map(|m| Lane::new(m, seed));
    for l in &mut lanes {
        l.run(FRAMES); // warm the caches
        (l.secs, l.packets) = (0.0, 0);
        l.sink.outputs = 0;
    }
    for turn in 0..PACKETS / SLICE {
        for k in 0..3 {
            lanes[(k + turn) % 3].run(SLICE);
        }
    }
    lanes.map(|l| l.rate())
}

/// Packets a mode runs before the next takes its turn.
const SLICE: usize = 65536;

/// Frames of a batch before the ports send them.
const BATCH: usize = 32;

/// Copies every output into a transmit arena, back to back, as the live
/// daemon's `TxArena` does; emptied every [`BATCH`] frames.
struct TxSink {
    arena: Vec<u8>,
    frames: usize,
    outputs: u64,
    bytes: u64,
}

impl TxSink {
    fn sent(&mut self, n: usize) {
        self.outputs += 1;
        self.bytes += n as u64;
        self.frames += 1;
        if self.frames == BATCH {
            std::hint::black_box(&self.arena);
            self.arena.clear();
            self.frames = 0;
        }
    }
}

impl ActionSink for TxSink {
    fn output(&mut self, _: PortNo, pkt: &[u8]) {
        self.arena.extend_from_slice(pkt);
        self.sent(pkt.len());
    }
    fn output_parts(&mut self, _: PortNo, head: &[u8], body: &[u8]) {
        self.arena.extend_from_slice(head);
        self.arena.extend_from_slice(body);
        self.sent(head.len() + body.len());
    }
    fn userspace(&mut self, _: &UserspaceReason, _: &[u8]) {}
    fn meter(&mut self, _: megaflow::MeterId, _: usize) -> bool {
        true
    }
    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (mut plain, mut encap, mut dec) = (Vec::new(), Vec::new(), Vec::new());
    let (mut er, mut dr) = (Vec::new(), Vec::new());
    // `-- decap` (or `encap`, `plain`): that mode alone, for a profiler.
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if let Some(m) = only.as_deref() {
        let mode = match m {
            "encap" => Mode::Encap,
            "decap" => Mode::Decap,
            _ => Mode::Plain,
        };
        for round in 0..ROUNDS as u64 {
            let mut l = Lane::new(mode, round);
            l.run(PACKETS);
            eprintln!("{m}: {:.2} Mpps", l.rate() / 1e6);
        }
        return;
    }
    for round in 0..ROUNDS as u64 {
        let got = forward(round);
        let [p, e, d] = got;
        eprintln!(
            "round {round}: plain {:.2} Mpps, encap {:.2} Mpps, decap {:.2} Mpps",
            p / 1e6,
            e / 1e6,
            d / 1e6
        );
        plain.push(p / 1e6);
        encap.push(e / 1e6);
        dec.push(d / 1e6);
        er.push(e / p);
        dr.push(d / p);
    }
    println!("bench: tunnel.plain_mpps {:.2} Mpps", median(plain));
    println!("bench: tunnel.encap_mpps {:.2} Mpps", median(encap));
    println!("bench: tunnel.decap_mpps {:.2} Mpps", median(dec));
    println!("bench: tunnel.encap_vs_plain {:.2} x", median(er));
    println!("bench: tunnel.decap_vs_plain {:.2} x", median(dr));
}

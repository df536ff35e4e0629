//! Datapath threads scale: in-memory forwarding of megaflow cache hits by
//! one `Datapath` thread, then by two at once (each with its own datapath
//! holding the same megaflows, as two PMD threads would), in one run.
//!
//! Prints `bench: datapath.threads_1_mpps`, `datapath.threads_2_mpps` and
//! `datapath.threads_2_vs_1` (medians of 5 rounds). Run with
//! `cargo bench -p megaflow --bench datapath`.

use std::time::Instant;

use megaflow::actions::{CountSink, DpAction};
use megaflow::frame::{FrameSpec, L4};
use megaflow::{
    extract_into, Actions, CacheConfig, Datapath, DpCommand, Field, FlowId, FlowKey, Lookup, Mask,
    Match, PortNo, SplitMix64, Timestamp,
};

const FLOWS: u64 = 1000;
const FRAMES: usize = 4096;
const PACKETS: usize = 4_000_000;
const ROUNDS: usize = 5;

fn frame(flow: u64, noise: u64) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0000 | (noise as u32 & 0xff),
        0xc612_1000 | flow as u32,
        L4::udp(1024 + noise as u16, 80),
    )
    .build()
}

/// A datapath holding one megaflow per destination address.
fn datapath() -> Datapath {
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::Ipv4Dst);
    for f in 0..FLOWS {
        let mut key = FlowKey::ZERO;
        extract_into(1, &frame(f, 0), &mut key);
        dp.apply(DpCommand::Insert {
            id: FlowId(f),
            matched: Box::new(Match::new(&key, &mask)),
            actions: Actions::new(vec![DpAction::Output(PortNo(2 + (f % 4) as u32))]),
        });
    }
    dp
}

/// One thread's work: `PACKETS` packets through its own datapath; its
/// packets per second.
fn forward(seed: u64) -> f64 {
    let mut dp = datapath();
    let mut rng = SplitMix64::new(seed);
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|_| frame(rng.below(FLOWS), rng.below(256)))
        .collect();
    let mut buf = Vec::with_capacity(2048);
    let mut sink = CountSink::default();
    let started = Instant::now();
    for i in 0..PACKETS {
        buf.clear();
        buf.extend_from_slice(&frames[i % FRAMES]);
        let r = dp.process(Timestamp(i as u64), PortNo(1), &mut buf, &mut sink);
        assert!(matches!(r, Lookup::Hit(_)), "every packet hits");
    }
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(sink.outputs, PACKETS as u64);
    PACKETS as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (mut one, mut two, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS as u64 {
        let single = forward(round);
        let pair: f64 = std::thread::scope(|s| {
            let a = s.spawn(move || forward(round * 2 + 100));
            let b = s.spawn(move || forward(round * 2 + 101));
            a.join().unwrap_or(0.0) + b.join().unwrap_or(0.0)
        });
        eprintln!(
            "round {round}: 1 thread {:.2} Mpps, 2 threads {:.2} Mpps",
            single / 1e6,
            pair / 1e6
        );
        one.push(single / 1e6);
        two.push(pair / 1e6);
        ratio.push(pair / single);
    }
    println!("bench: datapath.threads_1_mpps {:.2} Mpps", median(one));
    println!("bench: datapath.threads_2_mpps {:.2} Mpps", median(two));
    println!("bench: datapath.threads_2_vs_1 {:.2} x", median(ratio));
}

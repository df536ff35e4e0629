//! Threads around one datapath: the datapath thread processes packets and
//! serves commands between batches while a handler thread inserts flows
//! and a revalidator thread removes them. Checks that no hit ever runs
//! actions that are not its flow's (no torn entry) and that every hit is
//! reported exactly once to the slow path, through stats or removal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use megaflow::actions::{ActionSink, DpAction, UserspaceReason};
use megaflow::datapath::link;
use megaflow::frame::{FrameSpec, L4};
use megaflow::{
    extract_into, Actions, CacheConfig, Datapath, DpCommand, DpEvent, Field, FlowId, FlowKey,
    Lookup, Mask, Match, MeterId, PortNo, SplitMix64, Timestamp,
};

const FLOWS: u64 = 512;

fn frame(i: u64, noise: u64) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(noise as u16, i as u16)).build()
}

fn insert(i: u64) -> DpCommand {
    let mut key = FlowKey::ZERO;
    extract_into(1, &frame(i, 0), &mut key);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::TpDst);
    DpCommand::Insert {
        id: FlowId(i),
        matched: Box::new(Match::new(&key, &mask)),
        actions: Actions::new(vec![DpAction::Output(PortNo(i as u32 + 1))]),
    }
}

/// The one output port of a hit.
#[derive(Default)]
struct Out(Option<PortNo>);

impl ActionSink for Out {
    fn output(&mut self, port: PortNo, _: &[u8]) {
        assert!(self.0.replace(port).is_none(), "one output per packet");
    }
    fn userspace(&mut self, _: &UserspaceReason, _: &[u8]) {}
    fn meter(&mut self, _: MeterId, _: usize) -> bool {
        true
    }
    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

fn spawn_slow(name: &str, seed: u64, tx: Sender<DpCommand>, f: fn(u64) -> DpCommand) {
    let mut rng = SplitMix64::new(seed);
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for _ in 0..4000 {
                if tx.send(f(rng.below(FLOWS))).is_err() {
                    return;
                }
                if rng.below(8) == 0 {
                    thread::sleep(Duration::from_micros(50));
                }
            }
        })
        .expect("spawn");
}

#[test]
fn processing_racing_inserts_and_removals_reports_every_hit_once() {
    let (link, mut end) = link();
    let stop = Arc::new(AtomicBool::new(false));
    let dp_stop = stop.clone();
    let datapath = thread::spawn(move || {
        let mut dp = Datapath::new(
            CacheConfig {
                emc_entries: 256,
                emc_insert_inv_prob: 4,
                rerank_interval: 1000,
                ..CacheConfig::default()
            },
            1,
        );
        let mut hits = vec![0u64; FLOWS as usize];
        let mut rng = SplitMix64::new(0x1234_5678);
        let mut buf = Vec::new();
        let started = Instant::now();
        let mut t = 0;
        while !dp_stop.load(Ordering::Acquire) {
            assert!(started.elapsed() < Duration::from_secs(60), "bounded");
            end.serve(&mut dp, 64, &mut buf);
            for _ in 0..32 {
                let i = rng.below(FLOWS);
                let mut pkt = frame(i, rng.below(0xffff));
                let mut out = Out::default();
                t += 1;
                if let Lookup::Hit(_) = dp.process(Timestamp(t), PortNo(1), &mut pkt, &mut out) {
                    assert_eq!(out.0, Some(PortNo(i as u32 + 1)), "the flow's own actions");
                    hits[i as usize] += 1;
                }
            }
        }
        // Everything out, so every count comes back.
        end.flush(&mut dp, &mut buf);
        for i in 0..FLOWS {
            dp.apply(DpCommand::Remove { id: FlowId(i) });
        }
        buf.clear();
        dp.report(&mut buf);
        (hits, buf, dp.len())
    });
    // The handler inserts (a second insert of a live flow is refused), the
    // revalidator removes.
    spawn_slow("handler", 0x9abc_def0, link.commands(), insert);
    spawn_slow("revalidator", 0x0f0f_0f0f, link.commands(), |i| {
        DpCommand::Remove { id: FlowId(i) }
    });
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        link.collect(&mut events);
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Release);
    let (hits, last, left) = datapath.join().expect("datapath thread");
    link.collect(&mut events);
    events.extend(last);

    assert_eq!(left, 0);
    let mut reported = vec![0u64; FLOWS as usize];
    let (mut removals, mut refusals) = (0, 0);
    for e in &events {
        match e {
            DpEvent::Stats { id, delta } => reported[id.0 as usize] += delta.packets,
            DpEvent::Removed { id, delta } => {
                reported[id.0 as usize] += delta.packets;
                removals += 1;
            }
            DpEvent::Refused { .. } => refusals += 1,
        }
    }
    let total: u64 = hits.iter().sum();
    assert!(
        total > 0 && removals > 0 && refusals > 0,
        "the race happened: {total} hits, {removals} removals, {refusals} refused inserts"
    );
    assert_eq!(reported, hits, "every hit reported exactly once");
}

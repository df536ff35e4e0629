//! Threads around one shard: a datapath thread looking up while a handler
//! thread inserts and a revalidator thread dumps and removes. Checks that no
//! lookup ever sees an entry that is not whole (the actions always belong to
//! the key's flow) and that no packet count is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use megaflow::actions::DpAction;
use megaflow::shard::{snapshot, Shard, ShardError};
use megaflow::{Actions, CacheConfig, Field, FlowKey, InsertError, Mask, Match, PortNo, Timestamp};

const FLOWS: u64 = 512;
const WAIT: Duration = Duration::from_secs(10);

fn key(i: u64, noise: u64) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1);
    k.set_tp_dst(i);
    k.set_tp_src(noise); // wildcarded by the flows
    k
}

fn flow(i: u64) -> (Match, Actions) {
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::TpDst);
    (
        Match::new(&key(i, 0), &mask),
        Actions::new(vec![DpAction::Output(PortNo(i as u32))]),
    )
}

fn port(actions: &Actions) -> u64 {
    match actions.as_slice() {
        [DpAction::Output(p)] => p.0 as u64,
        other => panic!("torn or foreign actions {other:?}"),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn lookups_racing_inserts_and_removals_lose_nothing() {
    let cfg = CacheConfig {
        emc_entries: 256,
        emc_insert_inv_prob: 4,
        rerank_interval: 1000,
        ..CacheConfig::default()
    };
    let (mut shard, handle) = Shard::new(cfg, 64);
    let stop = Arc::new(AtomicBool::new(false));

    // Datapath thread: owns the shard.
    let dp_stop = stop.clone();
    let datapath = thread::spawn(move || {
        let mut hits = vec![0u64; FLOWS as usize];
        let mut rng = Rng(0x1234_5678);
        let started = Instant::now();
        let mut keys = [FlowKey::ZERO; 32];
        let lens = [64u32; 32];
        let mut out = [None; 32];
        let mut t = 0u64;
        loop {
            shard.apply_pending(64);
            if dp_stop.load(Ordering::Acquire) {
                // Drain what is left, then stop.
                while shard.apply_pending(1024) > 0 {}
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "datapath loop bounded in time"
            );
            for k in keys.iter_mut() {
                *k = key(rng.next() % FLOWS, rng.next() & 0xffff);
            }
            t += 1;
            shard
                .cache()
                .lookup_batch(&keys, &lens, Timestamp(t), &mut out);
            for (k, r) in keys.iter().zip(out.iter()) {
                if let Some(h) = r {
                    let actions = shard
                        .cache()
                        .actions(*h)
                        .expect("a returned handle is live");
                    assert_eq!(
                        port(actions),
                        k.tp_dst(),
                        "actions belong to the key's flow"
                    );
                    hits[k.tp_dst() as usize] += 1;
                }
            }
        }
        (shard, hits)
    });

    // Handler thread: installs flows (some twice: duplicates are refused).
    let h_handle = handle.clone();
    let handler = thread::spawn(move || {
        let mut rng = Rng(0x9abc_def0);
        let mut installed = 0;
        for _ in 0..4000 {
            let (m, a) = flow(rng.next() % FLOWS);
            match h_handle.try_insert(m, a, 1) {
                Ok(reply) => match reply.wait_timeout(WAIT).expect("insert answered") {
                    Ok(_) => installed += 1,
                    Err(InsertError::Duplicate(_)) => {}
                    Err(e) => panic!("unexpected insert error {e}"),
                },
                Err(ShardError::Busy) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        installed
    });

    // Revalidator thread: dumps, checks snapshots are whole, removes some
    // flows and keeps their final stats.
    let r_handle = handle.clone();
    let revalidator = thread::spawn(move || {
        let mut removed_pkts = vec![0u64; FLOWS as usize];
        let mut rng = Rng(0x0f0f_0f0f);
        let mut removals = 0;
        for _ in 0..200 {
            let dump = r_handle
                .dump()
                .unwrap()
                .wait_timeout(WAIT)
                .expect("dump answered");
            for f in &dump {
                assert_eq!(
                    port(&f.actions),
                    f.matched.key().tp_dst(),
                    "snapshot is whole"
                );
            }
            for f in dump.iter().filter(|_| rng.next() % 4 == 0) {
                if let Some(r) = r_handle
                    .remove(f.handle)
                    .unwrap()
                    .wait_timeout(WAIT)
                    .expect("remove answered")
                {
                    assert!(r.stats.packets >= f.stats.packets, "stats only grow");
                    removed_pkts[r.matched.key().tp_dst() as usize] += r.stats.packets;
                    removals += 1;
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
        (removed_pkts, removals)
    });

    let installed = handler.join().expect("handler thread");
    let (removed_pkts, removals) = revalidator.join().expect("revalidator thread");
    stop.store(true, Ordering::Release);
    let (shard, hits) = datapath.join().expect("datapath thread");

    assert!(
        installed > 0 && removals > 0,
        "the race happened: {installed} inserts, {removals} removals"
    );
    let mut remaining = vec![0u64; FLOWS as usize];
    for f in snapshot(shard.cache_ref()) {
        remaining[f.matched.key().tp_dst() as usize] += f.stats.packets;
    }
    let total: u64 = hits.iter().sum();
    assert!(total > 0, "lookups hit");
    for i in 0..FLOWS as usize {
        assert_eq!(
            removed_pkts[i] + remaining[i],
            hits[i],
            "flow {i}: every counted packet is accounted for"
        );
    }
}

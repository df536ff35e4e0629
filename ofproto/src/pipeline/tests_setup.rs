//! Flow setup without the slow path's lock: handlers stage, the slow path
//! adopts. Datapaths on "threads" the test serves by hand, so every
//! command's order is the test's.

use megaflow::actions::CollectSink;
use megaflow::datapath::{link, DatapathEnd};
use megaflow::frame::{FrameSpec, L4};

use super::super::tests::{bridge, Model};
use super::*;
use crate::rule::FlowModCommand;
use crate::text::parse_flow;
use crate::{OffloadMode, PipelineConfig, ThreadedDatapaths, PASS_BATCH};

const T0: u64 = 1_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

type Slow = Pipeline<Model, ThreadedDatapaths>;

/// One datapath "thread": its datapath and its end of the link.
struct Dp {
    dp: megaflow::Datapath,
    end: DatapathEnd,
}

impl Dp {
    /// Applies what was sent and reports (as the thread's loop does).
    fn serve(&mut self) {
        let mut buf = Vec::new();
        self.end.flush(&mut self.dp, &mut buf);
    }

    /// A packet through the datapath: true = a cache hit.
    fn hit(&mut self, in_port: u32, pkt: &[u8], ms: u64) -> bool {
        let mut f = pkt.to_vec();
        let mut sink = CollectSink::new();
        matches!(
            self.dp.process(at(ms), PortNo(in_port), &mut f, &mut sink),
            megaflow::Lookup::Hit(_)
        )
    }
}

/// The flow mod the version tests make: 198.18.0.2 now goes to port 3.
fn to_port_3(p: &mut Slow) {
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Add,
    )
    .expect("parses");
    p.bridge_mut().apply_flow_mod(&fm, at(0)).expect("applies");
}

/// A slow path over one datapath thread that receives ports 1 to 4.
fn slow(flows: &[&str], cfg: PipelineConfig) -> (Slow, Dp) {
    let (l, end) = link();
    let mut dps = ThreadedDatapaths::new();
    let i = dps.add(l);
    for p in 1..=4 {
        dps.assign(PortNo(p), Some(i));
    }
    let dp = megaflow::Datapath::new(cfg.cache.clone(), 7);
    let p = Pipeline::with_datapaths(bridge(flows), Model::default(), cfg, dps);
    let mut d = Dp { dp, end };
    d.serve();
    (p, d)
}

const BY_DST: [&str; 3] = [
    "priority=10,ip,nw_dst=198.18.0.2,actions=output:2",
    "priority=10,ip,nw_dst=198.18.0.3,actions=output:3",
    "priority=0,actions=drop",
];

fn frame(sport: u16, dst: u8) -> Vec<u8> {
    FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0000 | u32::from(dst),
        L4::udp(sport, 53),
    )
    .payload(18)
    .build()
}

/// A frame to 198.18.0.0 + `host`: a megaflow of its own under
/// [`by_host`].
fn frame_to(host: u32) -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0000 + host, L4::udp(1000, 53))
        .payload(18)
        .build()
}

/// A rule for each of `n` hosts from 198.18.0.10 (a megaflow each).
fn by_host(n: u32) -> Vec<String> {
    (0..n)
        .map(|i| {
            let a = std::net::Ipv4Addr::from(0xc612_0000 + 10 + i);
            format!("priority=10,ip,nw_dst={a},actions=output:2")
        })
        .collect()
}

/// A handler's upcall of `pkt` from port 1 through `setup` (inbox `h`).
fn upcall(
    p: &Slow,
    setup: &FlowSetup,
    h: usize,
    pkt: &[u8],
    ms: u64,
) -> Result<CollectSink, Backlog> {
    let miss = Miss::parse(PortNo(1), pkt);
    let t = translate_miss(&p.bridge_handle(), &miss.key, at(ms));
    let mut sink = CollectSink::new();
    let mut rng = SplitMix64::new(1);
    let mut f = pkt.to_vec();
    setup.upcall(h, &mut rng, at(ms), &miss, &t, &mut f, &mut sink)?;
    Ok(sink)
}

/// Packets credited to OpenFlow rules.
fn credited(p: &Slow) -> u64 {
    p.bridge()
        .tables()
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r.packets))
        .sum()
}

fn outputs(s: &CollectSink) -> Vec<PortNo> {
    s.outputs.iter().map(|(p, _)| *p).collect()
}

#[test]
fn local_datapaths_have_no_flow_setup_and_threaded_ones_do() {
    let local = Pipeline::new(bridge(&BY_DST), Model::default(), PipelineConfig::default());
    assert!(local.flow_setup().is_none());
    let (p, _) = slow(&BY_DST, PipelineConfig::default());
    assert!(p.flow_setup().is_some());
}

#[test]
fn a_handler_installs_without_the_slow_path_and_the_next_step_adopts_it() {
    let (mut p, mut d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let f = frame(1000, 2);
    let sink = upcall(&p, &setup, 0, &f, 0).expect("no backlog");
    assert_eq!(outputs(&sink), vec![PortNo(2)], "the packet went out");
    // The datapath has it before the slow path knows of it.
    d.serve();
    assert!(d.hit(1, &f, 1), "the next packet hits the cache");
    assert_eq!((p.len(), setup.staged()), (0, 1));
    d.serve();
    p.fold_datapaths(at(2));
    assert_eq!((p.len(), setup.staged()), (1, 0), "adopted by the fold");
    let dump = p.find(&megaflow::extract(1, &f)).expect("adopted");
    assert_eq!(dump.stats.packets, 2, "the upcalled packet and the hit");
    assert_eq!(p.stats().upcalls, 1);
    assert_eq!(p.stats().hits, 1);
    assert_eq!(p.stats().megaflows_created, 1);
}

#[test]
fn two_handlers_missing_one_flow_leave_one_megaflow_and_lose_no_count() {
    let (mut p, mut d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let f = frame(1000, 2);
    // The same inbox merges; another inbox stages its own record.
    upcall(&p, &setup, 0, &f, 0).expect("no backlog");
    upcall(&p, &setup, 0, &f, 0).expect("no backlog");
    assert_eq!(setup.staged(), 1, "one record for one inbox's misses");
    upcall(&p, &setup, 1, &f, 0).expect("no backlog");
    assert_eq!(setup.staged(), 2);
    d.serve(); // the first insert is taken, the second refused
    p.fold_datapaths(at(1));
    assert_eq!(p.len(), 1);
    d.serve(); // the duplicate's remove, the kept one's insert again
    assert!(d.hit(1, &f, 2));
    d.serve();
    p.fold_datapaths(at(3));
    let dump = p.find(&megaflow::extract(1, &f)).expect("one megaflow");
    assert_eq!(dump.stats.packets, 4, "3 upcalls and a hit");
    assert_eq!(p.stats().upcalls, 3);
    assert_eq!(d.dp.len(), 1, "one flow in the datapath");
    p.revalidate(at(4));
    assert_eq!(credited(&p), 4, "the rule got every packet once");
}

#[test]
fn a_miss_translated_before_a_flow_mod_is_translated_again_when_staged() {
    let (mut p, mut d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let f = frame(1000, 2);
    let miss = Miss::parse(PortNo(1), &f);
    let old = translate_miss(&p.bridge_handle(), &miss.key, at(0));
    to_port_3(&mut p);
    let mut sink = CollectSink::new();
    let mut rng = SplitMix64::new(1);
    let mut pkt = f.clone();
    setup
        .upcall(0, &mut rng, at(0), &miss, &old, &mut pkt, &mut sink)
        .expect("no backlog");
    assert_eq!(outputs(&sink), vec![PortNo(3)], "the new version ran");
    d.serve();
    p.fold_datapaths(at(1));
    assert_eq!(p.stats().retranslated, 1);
    let dump = p.find(&miss.key).expect("adopted");
    assert_eq!(dump.actions.to_string(), "output:3");
}

#[test]
fn a_record_staged_before_a_flow_mod_is_translated_again_when_adopted() {
    let (mut p, mut d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let f = frame(1000, 2);
    upcall(&p, &setup, 0, &f, 0).expect("no backlog");
    to_port_3(&mut p);
    p.adopt();
    assert_eq!(p.stats().retranslated, 1);
    let dump = p.find(&megaflow::extract(1, &f)).expect("adopted");
    assert_eq!(
        dump.actions.to_string(),
        "output:3",
        "no megaflow of the old version"
    );
    p.revalidate(at(1));
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
    d.serve();
    let mut sink = CollectSink::new();
    let mut pkt = f.clone();
    d.dp.process(at(2), PortNo(1), &mut pkt, &mut sink);
    assert_eq!(
        outputs(&sink),
        vec![PortNo(3)],
        "the datapath has the new actions"
    );
    d.serve();
    p.revalidate(at(3));
    assert_eq!(credited(&p), 2, "both packets counted once");
}

#[test]
fn a_miss_staged_after_a_pass_swept_is_of_the_version_the_pass_syncs() {
    let (mut p, _d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let f = frame(1000, 2);
    let miss = Miss::parse(PortNo(1), &f);
    let old = translate_miss(&p.bridge_handle(), &miss.key, at(0));
    to_port_3(&mut p);
    let mut pass = p.pass_begin(at(1));
    while !p.pass_step(&mut pass, at(1), usize::MAX) {}
    // Swept; a handler stages what it translated before the flow mod.
    let mut pkt = f.clone();
    let (mut rng, mut sink) = (SplitMix64::new(1), CollectSink::new());
    setup
        .upcall(0, &mut rng, at(1), &miss, &old, &mut pkt, &mut sink)
        .expect("no backlog");
    p.pass_end(pass, at(1));
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
    let dump = p.find(&miss.key).expect("adopted");
    assert_eq!(
        dump.actions.to_string(),
        "output:3",
        "what a BARRIER now promises"
    );
}

#[test]
fn with_no_megaflow_the_tables_are_synced_without_a_pass() {
    let (mut p, _d) = slow(&BY_DST, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    let fm = |out: u32| {
        let text = format!("priority=10,ip,nw_dst=198.18.0.2,actions=output:{out}");
        parse_flow(&text, FlowModCommand::Add).expect("parses")
    };
    p.bridge_mut()
        .apply_flow_mod(&fm(3), at(0))
        .expect("applies");
    let current = p.bridge().generations().tables;
    assert_eq!(p.synced_tables(), current, "no megaflow: synced at once");
    // A staged record, then an installed one: the next pass is needed.
    upcall(&p, &setup, 0, &frame(1000, 2), 0).expect("no backlog");
    p.bridge_mut()
        .apply_flow_mod(&fm(2), at(0))
        .expect("applies");
    assert!(
        p.synced_tables() < p.bridge().generations().tables,
        "staged"
    );
    p.adopt();
    assert!(
        p.synced_tables() < p.bridge().generations().tables,
        "installed"
    );
    p.revalidate(at(1));
    assert_eq!(p.synced_tables(), p.bridge().generations().tables);
}

#[test]
fn records_past_the_flow_limit_leave_and_their_packets_reach_their_rules() {
    let mut cfg = PipelineConfig::default();
    cfg.revalidator.flow_limit = 2;
    cfg.revalidator.port_flow_limit = 0;
    cfg.revalidator.dynamic_limit = false;
    let rules = by_host(4);
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let (mut p, mut d) = slow(&rules, cfg);
    let setup = p.flow_setup().expect("threaded");
    for sport in 0..4 {
        upcall(&p, &setup, 0, &frame_to(10 + sport), 0).expect("no backlog");
    }
    d.serve();
    p.fold_datapaths(at(1));
    assert_eq!(p.len(), 2, "the limit holds once adopted");
    assert_eq!(p.stats().flow_limit_hits, 2);
    d.serve();
    assert_eq!(d.dp.len(), 2, "the others left the datapath");
    p.revalidate(at(2));
    assert_eq!(credited(&p), 4, "every packet reached its rule");
}

#[test]
fn a_backlog_sends_handlers_to_the_slow_path_which_adopts_it() {
    let rules = by_host(STAGED_MAX as u32 + 1);
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let (mut p, _d) = slow(&rules, PipelineConfig::default());
    let setup = p.flow_setup().expect("threaded");
    for i in 0..STAGED_MAX {
        upcall(&p, &setup, i, &frame_to(10 + i as u32), 0).expect("room");
    }
    let f = frame_to(10 + STAGED_MAX as u32);
    assert_eq!(upcall(&p, &setup, 0, &f, 0).err(), Some(Backlog));
    let miss = Miss::parse(PortNo(1), &f);
    let t = translate_miss(&p.bridge_handle(), &miss.key, at(0));
    let mut pkt = f.clone();
    p.upcall_translated(at(0), &miss, &t, &mut pkt, &mut CollectSink::new());
    assert_eq!(setup.staged(), 0);
    assert_eq!(p.len(), STAGED_MAX + 1);
}

/// Everything at once: two datapath threads forwarding, two handlers
/// installing through their inboxes, a revalidator passing in steps and
/// offloading, flow mods in batches and a port going down and up, for a
/// bounded time. Then: every packet counted once (in the slow path's
/// counts and in the rules'), every megaflow with the actions of the
/// tables in force, no match offloaded twice, no datapath flow the slow
/// path does not know.
#[test]
fn handlers_passes_flow_mods_and_port_churn_at_once_lose_and_double_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const HOSTS: u32 = 300;
    const PER_THREAD: usize = 150_000;
    let budget = Duration::from_secs(3);
    let rules = by_host(HOSTS);
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let mut cfg = PipelineConfig::default();
    cfg.offload.mode = OffloadMode::All;
    cfg.revalidator.dynamic_limit = false;
    let mut dps = ThreadedDatapaths::new();
    let mut ends = Vec::new();
    for t in 0..2 {
        let (l, end) = link();
        let i = dps.add(l);
        // Thread 0 receives ports 1 and 2, thread 1 ports 3 and 4.
        dps.assign(PortNo(1 + 2 * t), Some(i));
        dps.assign(PortNo(2 + 2 * t), Some(i));
        ends.push(end);
    }
    let p = Pipeline::with_datapaths(bridge(&rules), Model::default(), cfg.clone(), dps);
    let bridge = p.bridge_handle();
    let setup = p.flow_setup().expect("threaded");
    let slow = parking_lot::Mutex::new(p);
    let start = Instant::now();
    let now = || Timestamp(T0 + start.elapsed().as_nanos() as u64);
    let (traffic_done, handlers_done) = (AtomicBool::new(false), AtomicBool::new(false));
    let dps_stop = AtomicBool::new(false);
    let synced_checks = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(PortNo, Vec<u8>)>();
    let rx = std::sync::Mutex::new(rx);

    let sent: usize = std::thread::scope(|s| {
        let datapaths: Vec<_> = ends
            .into_iter()
            .enumerate()
            .map(|(t, mut end)| {
                let (tx, cache, dps_stop) = (tx.clone(), cfg.cache.clone(), &dps_stop);
                s.spawn(move || {
                    let mut dp = megaflow::Datapath::new(cache, t as u64);
                    let mut buf = Vec::new();
                    let mut rng = SplitMix64::new(0xace + t as u64);
                    let mut sent = 0;
                    while sent < PER_THREAD && start.elapsed() < budget {
                        end.serve(&mut dp, usize::MAX, &mut buf);
                        for _ in 0..32 {
                            let host = (rng.next_u64() % u64::from(HOSTS)) as u32;
                            let port = PortNo(1 + 2 * t as u32 + (host % 2));
                            let mut f = frame_to(10 + host);
                            let mut sink = CollectSink::new();
                            if let megaflow::Lookup::Miss =
                                dp.process(now(), port, &mut f, &mut sink)
                            {
                                tx.send((port, f)).expect("handlers listen");
                            }
                            sent += 1;
                        }
                    }
                    drop(tx);
                    while !dps_stop.load(Ordering::Acquire) {
                        end.serve(&mut dp, usize::MAX, &mut buf);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    end.flush(&mut dp, &mut buf);
                    (sent, dp)
                })
            })
            .collect();
        drop(tx);
        let handlers: Vec<_> = (0..2)
            .map(|h| {
                let (rx, setup, bridge, slow) = (&rx, setup.clone(), &bridge, &slow);
                s.spawn(move || {
                    let mut rng = SplitMix64::new(h as u64);
                    loop {
                        let got = rx
                            .lock()
                            .expect("queue")
                            .recv_timeout(Duration::from_millis(10));
                        let (port, mut f) = match got {
                            Ok(u) => u,
                            Err(mpsc::RecvTimeoutError::Timeout) => continue,
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        };
                        let miss = Miss::parse(port, &f);
                        let t = translate_miss(bridge, &miss.key, now());
                        let mut sink = CollectSink::new();
                        let r = setup.upcall(h, &mut rng, now(), &miss, &t, &mut f, &mut sink);
                        if r.is_err() {
                            slow.lock()
                                .upcall_translated(now(), &miss, &t, &mut f, &mut sink);
                        }
                    }
                })
            })
            .collect();
        let revalidator = s.spawn(|| {
            while !handlers_done.load(Ordering::Acquire) {
                slow.lock().fold_datapaths(now());
                let mut g = slow.lock();
                let t = now();
                let mut pass = g.pass_begin(t);
                while !g.pass_step(&mut pass, t, PASS_BATCH) {
                    parking_lot::MutexGuard::bump(&mut g);
                }
                g.pass_end(pass, t);
                // What a BARRIER answered now would promise: with no flow
                // mod since the pass began, every megaflow has the
                // actions of the tables in force.
                let br = g.bridge();
                if br.generations().tables == g.synced_tables() {
                    for d in g.dump() {
                        let now = br.translate(d.matched.key(), t).datapath_actions();
                        assert_eq!(d.actions, now, "a megaflow of an older version past a pass");
                    }
                    synced_checks.fetch_add(1, Ordering::Relaxed);
                }
                drop(br);
                drop(g);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let flow_mods = s.spawn(|| {
            let mut round = 0u32;
            while !traffic_done.load(Ordering::Acquire) && round < 1_000 {
                for i in (round % 2..HOSTS).step_by(2).take(100) {
                    let a = std::net::Ipv4Addr::from(0xc612_0000 + 10 + i);
                    let out = 2 + (round % 2);
                    let text = format!("priority=10,ip,nw_dst={a},actions=output:{out}");
                    let fm = parse_flow(&text, FlowModCommand::ModifyStrict).expect("parses");
                    bridge.write().apply_flow_mod(&fm, now()).expect("applies");
                }
                slow.lock().request_pass();
                round += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let churn = s.spawn(|| {
            let mut up = false;
            for _ in 0..1_000 {
                if traffic_done.load(Ordering::Acquire) {
                    break;
                }
                let mut g = slow.lock();
                g.bridge_mut().set_port_up(PortNo(4), up);
                if !up {
                    g.flush_port(PortNo(4));
                }
                drop(g);
                up = !up;
                std::thread::sleep(Duration::from_millis(5));
            }
            slow.lock().bridge_mut().set_port_up(PortNo(4), true);
        });
        let mut sent = 0;
        let mut finals = Vec::new();
        for h in handlers {
            h.join().expect("handler");
        }
        traffic_done.store(true, Ordering::Release);
        flow_mods.join().expect("flow mods");
        churn.join().expect("churn");
        handlers_done.store(true, Ordering::Release);
        revalidator.join().expect("revalidator");
        // The last passes, the datapaths answering between them.
        for _ in 0..3 {
            slow.lock().revalidate(now());
            std::thread::sleep(Duration::from_millis(20));
        }
        dps_stop.store(true, Ordering::Release);
        for d in datapaths {
            let (n, dp) = d.join().expect("datapath");
            sent += n;
            finals.push(dp);
        }
        let mut g = slow.lock();
        g.revalidate(now());
        g.fold_datapaths(now());
        g.revalidate(now());
        let known: Vec<_> = g
            .dump()
            .into_iter()
            .map(|d| (d.matched, d.actions))
            .collect();
        for dp in &finals {
            for (m, a) in dp.megaflows() {
                let mine = known.iter().find(|(k, _)| *k == m);
                let mine = mine.expect("a datapath flow the slow path does not know");
                assert_eq!(&mine.1, a, "a datapath flow with other actions");
            }
        }
        sent
    });
    let p = slow.into_inner();
    let st = p.stats();
    let checks = synced_checks.load(Ordering::Relaxed);
    eprintln!("{sent} packets, {checks} passes checked: {st:?}");
    assert!(st.upcalls > 0 && st.hits > 0, "{st:?}");
    assert_eq!(st.packets, sent as u64, "every packet counted once: {st:?}");
    assert_eq!(st.packets, st.hits + st.upcalls);
    assert_eq!(
        credited(&p),
        sent as u64,
        "every packet credited to its rule once"
    );
    assert_eq!(st.illegal_transitions, 0);
    let br = p.bridge_handle();
    for d in p.dump() {
        let t = translate_miss(&br, d.matched.key(), now());
        assert_eq!(
            d.actions,
            t.datapath_actions(),
            "a megaflow of an older version"
        );
    }
    let mut offloaded: Vec<_> = p.offloader().rules.values().map(|(m, _, _)| *m).collect();
    let n = offloaded.len();
    offloaded.sort_by_key(|m| format!("{m:?}"));
    offloaded.dedup();
    assert_eq!(offloaded.len(), n, "a match offloaded twice");
}

//! Flow setup without the slow path's lock: handlers stage, the slow path
//! adopts. Datapaths on "threads" the test serves by hand, so every
//! command's order is the test's.

use megaflow::actions::CollectSink;
use megaflow::datapath::{link, DatapathEnd};
use megaflow::frame::{FrameSpec, L4};

use super::super::tests::Model;
use super::*;
use crate::bridge::Bridge;
use crate::rule::FlowModCommand;
use crate::text::parse_flow;
use crate::{PipelineConfig, ThreadedDatapaths};

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

fn bridge(flows: &[&str]) -> Bridge {
    let mut b = Bridge::with_ports(1..=4);
    for f in flows {
        let fm = parse_flow(f, FlowModCommand::Add).expect("flow parses");
        b.tables.apply(&fm, Timestamp(T0)).expect("flow applies");
    }
    b
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
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Add,
    )
    .expect("parses");
    p.bridge_mut().apply_flow_mod(&fm, at(0)).expect("applies");
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
    let fm = parse_flow(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:3",
        FlowModCommand::Add,
    )
    .expect("parses");
    p.bridge_mut().apply_flow_mod(&fm, at(0)).expect("applies");
    p.request_pass();
    // A pass right away: the record is adopted at its version's end.
    p.revalidate(at(1));
    let dump = p.find(&megaflow::extract(1, &f)).expect("adopted");
    assert_eq!(
        dump.actions.to_string(),
        "output:3",
        "no megaflow of the old version"
    );
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

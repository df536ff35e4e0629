//! The switch on a device with nothing in front of its datapath (a real
//! NIC's shape) against the same switch with the sim in front; port state
//! kept in one place.

use std::collections::BTreeMap;

use megaflow::frame::{FrameSpec, L4};
use megaflow::rand::SplitMix64;
use offload::dr::DrBackend;
use offload::prm::SourcePortMode;
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

use super::*;
use crate::control::{handle, Request, Response};

const T0: u64 = 1_700_000_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

/// The sim device as a real NIC is to the host: it takes rules, but the
/// host's representors receive only what it hands them, so nothing of it
/// stands in front of the datapath. Every call goes to the model.
struct Behind(Arc<SimBackend>);

offload::delegate_backend!(Behind, 0);

impl Device for Behind {
    type Front = Direct;

    fn front(
        _: &Arc<Self>,
        _: DomainId,
        ports: &Arc<SharedPorts>,
        restore: &Arc<offload::restore::RestoreTable>,
    ) -> Direct {
        Direct::new(ports, restore)
    }

    fn source_port(&self) -> SourcePortMode {
        self.0.source_port()
    }
}

const TABLE: &str = "priority=10,ip,nw_dst=198.18.0.2,actions=output:2
priority=10,ip,nw_dst=198.18.0.3,actions=output:3
priority=5,udp,tp_dst=53,actions=drop
priority=0,actions=normal";

/// Every frame out, by port and path.
#[derive(Default)]
struct Rec {
    out: BTreeMap<(u32, Vec<u8>), u64>,
    by_path: BTreeMap<Path, u64>,
}

impl Egressor for Rec {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path) {
        *self.out.entry((port.0, frame.to_vec())).or_default() += 1;
        *self.by_path.entry(path).or_default() += 1;
    }
}

fn traffic(seed: u64, n: usize) -> Vec<(PortNo, Vec<u8>)> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let port = PortNo(1 + (rng.next_u64() % 3) as u32);
            let dst = 0xc612_0001 + (rng.next_u64() % 4) as u32;
            let l4 = if rng.next_u64() % 4 == 0 {
                L4::udp(1000 + (rng.next_u64() % 8) as u16, 53)
            } else {
                L4::tcp(1000 + (rng.next_u64() % 8) as u16, 80)
            };
            (port, FrameSpec::ipv4(0xc612_0009, dst, l4).build())
        })
        .collect()
}

fn run<B: Device>(sw: &mut Switch<B>, pkts: &[(PortNo, Vec<u8>)]) -> Rec {
    let mut rec = Rec::default();
    for (i, chunk) in pkts.chunks(16).enumerate() {
        let batch: Vec<(PortNo, &[u8])> = chunk.iter().map(|(p, f)| (*p, &f[..])).collect();
        sw.receive(at(i as u64), &batch, &mut rec);
    }
    rec
}

fn ports() -> Vec<PortSpec> {
    crate::replay::default_ports(3)
}

#[test]
fn with_nothing_in_front_every_packet_is_software_and_the_device_still_gets_the_rules() {
    let flows = FlowFile::parse(TABLE).expect("table");
    let pkts = traffic(7, 2_000);
    let mut sim = SimSwitch::new(
        &ports(),
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("sim switch");
    let dev = Arc::new(Behind(sim_device(&ports(), SimConfig::default())));
    let mut nic = Switch::local(
        Arc::clone(&dev),
        &ports(),
        &flows,
        PipelineConfig::default(),
        at(0),
    )
    .expect("nic switch");
    let a = run(&mut sim, &pkts);
    let b = run(&mut nic, &pkts);
    // The same frames leave on the same ports, whichever path sent them.
    assert_eq!(a.out, b.out);
    assert!(
        a.by_path.get(&Path::Hardware).copied().unwrap_or(0) > 0,
        "the sim forwarded some"
    );
    assert_eq!(
        b.by_path.get(&Path::Hardware),
        None,
        "nothing in front forwards nothing"
    );
    let c = nic.counters();
    assert_eq!(c.rx.packets, pkts.len() as u64);
    assert_eq!((c.hw_handled, c.sw_handled), (0, pkts.len() as u64));
    assert_eq!(
        c.sw_drops,
        sim.counters().sw_drops + sim.counters().hw_drops
    );
    // The offload thread's side runs the same: hot flows became rules in
    // the device, which its own dump shows.
    assert!(nic.pipeline().offloaded_len() > 0);
    let dump = nic.dump_rules().expect("dump");
    assert!(
        dump.rules.len() > nic.pipeline().offloaded_len(),
        "flow rules and the root jump"
    );
    let Response::Ok(v) = handle(&mut nic, &Request::DumpRules, at(10_000)) else {
        panic!("dump-rules refused");
    };
    assert_eq!(v["rules"].as_array().map(Vec::len), Some(dump.rules.len()));
    let (counters, _) = nic.finish(at(20_000)).expect("finish");
    assert_eq!(counters.rx.packets, pkts.len() as u64);
    assert!(
        dev.dump().expect("dump").is_empty(),
        "the device is empty after stop"
    );
}

#[test]
fn a_ports_link_state_lives_in_the_bridge_and_show_derives_it() {
    let flows = FlowFile::parse(TABLE).expect("table");
    let mut sw = SimSwitch::new(
        &ports(),
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("switch");
    let p = PortNo(2);
    // Replay: no netdev known, no status.
    assert_eq!(sw.port_status(p), None);
    let up = |sw: &SimSwitch| sw.pipeline().bridge().ports().get(p).map(|i| i.up);
    sw.set_netdev(p, None);
    sw.set_link(p, false);
    assert_eq!(sw.port_status(p).map(|s| s.state), Some("absent".into()));
    assert_eq!(up(&sw), Some(false));
    sw.set_netdev(
        p,
        Some(Netdev {
            ifindex: Some(7),
            kind: "af_packet".into(),
        }),
    );
    assert_eq!(sw.port_status(p).map(|s| s.state), Some("down".into()));
    sw.set_link(p, true);
    let st = sw.port_status(p).expect("status");
    assert_eq!(
        (st.ifindex, st.state.as_str(), st.kind.as_str()),
        (Some(7), "up", "af_packet")
    );
    assert_eq!(up(&sw), Some(true));
    // Translation reads the same state: a flow to a down port outputs
    // nothing.
    sw.set_link(p, false);
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 80)).build();
    let mut rec = Rec::default();
    sw.receive(at(1), &[(PortNo(1), &f)], &mut rec);
    assert!(
        rec.out.is_empty(),
        "nothing sent to a down port: {:?}",
        rec.out.keys()
    );
    // Up again: the next revalidator pass sees the ports' generation moved
    // and re-translates the cached megaflow.
    sw.set_link(p, true);
    sw.pipeline_mut().revalidate(at(2));
    sw.receive(at(3), &[(PortNo(1), &f)], &mut rec);
    assert_eq!(rec.out.len(), 1);
}

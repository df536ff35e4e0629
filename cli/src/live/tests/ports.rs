//! The port lifecycle as a property: random netdev events (appear,
//! vanish, link up and down) and `add-port` / `del-port`, from every
//! source in any order; after each step every part of the switch agrees
//! with the one owner (the daemon's open ports and the switch's port map):
//! the bridge, the offload manager's port table, the datapath thread
//! assignment, the netdev record `show` prints, the port map the datapath
//! threads read.

use std::collections::{BTreeMap, BTreeSet};

use megaflow::port::MemoryPort;
use offload::Vport;
use proptest::prelude::*;

use super::tests::{config, flows, limits};
use super::*;

/// Opens a fresh memory port every time (a netdev that vanishes and
/// comes back is opened again).
struct Fresh;

impl PortFactory for Fresh {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort> {
        Ok(OpenedPort {
            rx: Box::new(MemoryPort::with_capacity(format!("{name}-rx"), 64)),
            tx: Box::new(MemoryPort::with_capacity(format!("{name}-tx"), 64)),
            kind: "memory".to_string(),
        })
    }
}

/// Netdevs vm1..vm4 (vm4 is not configured: `add-port` brings it in).
const NAMES: [&str; 4] = ["vm1", "vm2", "vm3", "vm4"];

#[derive(Clone, Debug)]
enum Step {
    Appear(usize),
    Vanish(usize),
    Link(usize, bool),
    AddPort(usize),
    DelPort(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let n = 0..NAMES.len();
    prop_oneof![
        n.clone().prop_map(Step::Appear),
        n.clone().prop_map(Step::Vanish),
        (n.clone(), any::<bool>()).prop_map(|(i, up)| Step::Link(i, up)),
        n.clone().prop_map(Step::AddPort),
        n.prop_map(Step::DelPort),
    ]
}

/// What should be: the netdevs present (ifindex, link up), the ports the
/// switch has.
#[derive(Default)]
struct Model {
    netdevs: BTreeMap<usize, (u32, bool)>,
    ports: BTreeSet<usize>,
    next_ifindex: u32,
}

fn vport(i: usize) -> Option<Vport> {
    Vport::vf(i as u16)
}

fn apply(d: &mut Daemon, m: &mut Model, s: &Step) {
    let rep = |ifindex, i: usize| Representor::emulated(ifindex, NAMES[i], vport(i));
    match *s {
        Step::Appear(i) => {
            if m.netdevs.contains_key(&i) {
                return;
            }
            m.next_ifindex += 1;
            let ifindex = 100 + m.next_ifindex;
            m.netdevs.insert(i, (ifindex, true));
            d.apply(&PortEvent::Added(rep(ifindex, i)));
        }
        Step::Vanish(i) => {
            if let Some((ifindex, _)) = m.netdevs.remove(&i) {
                d.apply(&PortEvent::Removed(rep(ifindex, i)));
            }
        }
        Step::Link(i, up) => {
            if let Some((ifindex, link)) = m.netdevs.get_mut(&i) {
                *link = up;
                let ifindex = *ifindex;
                d.apply(&if up {
                    PortEvent::Up { ifindex }
                } else {
                    PortEvent::Down { ifindex }
                });
            }
        }
        Step::AddPort(i) => {
            let r = d.add_port(NAMES[i], PortKind::Representor, None, vport(i), &[]);
            assert_eq!(r.is_ok(), m.ports.insert(i), "add-port {}: {r:?}", NAMES[i]);
        }
        Step::DelPort(i) => {
            let r = d.del_port(NAMES[i]);
            assert_eq!(
                r.is_ok(),
                m.ports.remove(&i),
                "del-port {}: {r:?}",
                NAMES[i]
            );
        }
    }
}

/// Every part agrees with the model and with each other.
fn check(d: &Daemon, m: &Model) {
    let sw = lock(d.shared());
    let names: BTreeSet<&str> = sw.ports().iter().map(|p| p.name.as_str()).collect();
    let want: BTreeSet<&str> = m.ports.iter().map(|&i| NAMES[i]).collect();
    assert_eq!(names, want, "the port map");
    assert_eq!(
        sw.published_ports().specs(),
        sw.ports(),
        "the datapath threads' map"
    );
    for (i, name) in NAMES.iter().enumerate() {
        let no = sw.ports().iter().find(|p| p.name == *name).map(|p| p.no);
        let Some(no) = no else {
            continue;
        };
        let open = m.netdevs.get(&i);
        let bridge_up = sw.pipeline().bridge().ports().get(no).map(|p| p.up);
        assert_eq!(
            bridge_up,
            Some(open.is_some_and(|(_, up)| *up)),
            "{name}: the bridge's link"
        );
        assert_eq!(d.open.contains_key(&no), open.is_some(), "{name}: open");
        assert_eq!(
            sw.thread_of(no),
            d.open.get(&no).map(|(_, t)| *t),
            "{name}: its datapath thread"
        );
        assert_eq!(
            d.open.get(&no).map(|(ifindex, _)| *ifindex),
            open.map(|(ifindex, _)| *ifindex),
            "{name}: its netdev"
        );
        let st = sw.port_status(no).expect("a live port has a status");
        let state = match open {
            None => "absent",
            Some((_, true)) => "up",
            Some((_, false)) => "down",
        };
        assert_eq!(st.state, state, "{name}: show");
        assert_eq!(
            sw.pipeline().offloader().lock().port_vport(no),
            vport(i),
            "{name}: the offload port table"
        );
    }
    // Ports gone are gone everywhere.
    let nos: BTreeSet<PortNo> = sw.ports().iter().map(|p| p.no).collect();
    assert!(
        d.open.keys().all(|no| nos.contains(no)),
        "open ports are ports"
    );
    for no in (1..=8).map(PortNo).filter(|no| !nos.contains(no)) {
        assert!(
            sw.pipeline().bridge().ports().get(no).is_none(),
            "{no}: bridge"
        );
        assert_eq!(
            sw.pipeline().offloader().lock().port_vport(no),
            None,
            "{no}"
        );
        assert_eq!(sw.thread_of(no), None, "{no}: thread");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_part_agrees_with_the_port_owner_after_each_step(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let lim = LiveLimits { datapath_threads: 2, ..limits() };
        let mut d = Daemon::start(&config(), &flows(), Arc::new(Fresh), lim).expect("start");
        let mut m = Model { ports: [0, 1, 2].into(), ..Model::default() };
        check(&d, &m);
        for s in &steps {
            apply(&mut d, &mut m, s);
            check(&d, &m);
        }
        let report = d.stop().expect("stop");
        prop_assert_eq!(report.stats.illegal_transitions, 0);
    }
}

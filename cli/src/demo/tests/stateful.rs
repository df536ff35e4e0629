//! The stateful tenant: its packets, and its table on the sim switch (the
//! security group lets through what it allows and nothing else, the
//! gateway translates, and established connections run in the FDB's
//! conntrack table).

use super::super::stateful::{self, Ports, GATEWAY, OUTSIDE};
use super::*;
use crate::switch::{Egressor, FlowFile, Path, SimSwitch};
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

#[derive(Default)]
struct Out(Vec<(PortNo, Vec<u8>)>);

impl Egressor for Out {
    fn tx(&mut self, port: PortNo, frame: &[u8], _: Path) {
        self.0.push((port, frame.to_vec()));
    }
}

fn v4(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

fn tcp_ports(b: &[u8]) -> (u16, u16) {
    (
        u16::from_be_bytes([b[34], b[35]]),
        u16::from_be_bytes([b[36], b[37]]),
    )
}

#[test]
fn the_security_group_passes_what_it_allows_the_gateway_translates_and_hardware_carries_it() {
    let s = spec(20_000, 200, 5);
    let n = stateful::packets_of(&s);
    let p = Ports::of(s.vms);
    let flows = FlowFile::parse(&stateful::flow_table(s.vms)).expect("the tenant's table");
    let mut sw = SimSwitch::new(
        &stateful::port_specs(s.vms),
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        Timestamp(EPOCH.0),
    )
    .expect("switch");
    let mut g = stateful::StatefulGenerator::new(&s, n);
    let mut buf = Vec::new();
    let (mut refused, mut passed) = (0u64, 0u64);
    while let Some((ts, port)) = g.next_into(&mut buf) {
        let mut out = Out::default();
        sw.receive(ts, &[(port, &buf[..])], &mut out);
        let (sport, dport) = tcp_ports(&buf);
        let (src, dst) = (v4(&buf, 26), v4(&buf, 30));
        if dport == 8080 || (port == p.cli2 && dport == 80) {
            // The group refuses these: nothing leaves.
            assert!(out.0.is_empty(), "refused {sport}->{dport}: {:?}", out.0);
            refused += 1;
            continue;
        }
        assert_eq!(out.0.len(), 1, "{port} {sport}->{dport}");
        passed += 1;
        let (to, f) = &out.0[0];
        match (port, dport, sport) {
            // web to the outside: leaves on ext from the gateway.
            (w, 443, _) if w == p.web => {
                assert_eq!(*to, p.ext);
                assert_eq!(v4(f, 26), GATEWAY);
                assert_eq!(v4(f, 30), OUTSIDE);
            }
            // the outside answers the gateway: reaches web, untranslated.
            (e, _, 443) if e == p.ext => {
                assert_eq!(*to, p.web);
                assert_eq!(v4(f, 30), [198, 18, 101, 1]);
                assert_eq!(v4(f, 26), OUTSIDE);
            }
            (w, _, _) if w == p.web => assert_eq!(*to, p.cli1, "{src:?}->{dst:?}"),
            _ => assert_eq!(*to, p.web),
        }
    }
    assert!(refused > 0 && passed > refused, "{refused} / {passed}");
    let est = g.established();
    let c = sw.counters();
    let hw = c.hw_handled;
    // Only established packets can pass the conntrack table; nearly all of
    // them did once their connection's entries were in.
    assert!(hw <= est, "{hw} of {est}");
    assert!(
        hw as f64 >= 0.9 * est as f64,
        "{hw} of {est} established packets in hardware"
    );
    assert_eq!(est, stateful::established_of(&s));
    assert!(sw.pipeline().ct_hw_stats().entries >= 8);
}

#[test]
fn the_tenant_table_parses_and_its_ports_follow_the_overlay_tenants() {
    let t = stateful::flow_table(4);
    let flows = parse_flow_file(&t, FlowModCommand::Add).expect("parses");
    assert!(flows.len() > 10, "{t}");
    assert!(t.contains("nat(src=198.19.100.1)"), "{t}");
    let ports = stateful::port_specs(4);
    let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["web", "cli1", "cli2", "ext"]);
    assert_eq!(ports[0].no, PortNo(9), "after the overlay's four");
    // The merged workload keeps every source's share.
    let s = spec(10_000, 100, 3);
    let all: Vec<DemoPacket> = with_overlay(&s).collect();
    assert_eq!(all.len() as u64, s.packets);
    let mine = Ports::of(s.vms).named().map(|(_, p)| p);
    let tenant = all.iter().filter(|x| mine.contains(&x.in_port)).count() as u64;
    assert_eq!(tenant, stateful::packets_of(&s));
}

//! The overlay tenant: its packets, its table and its merge with the
//! workload.

use std::net::IpAddr;

use super::super::overlay::{self, Ports, FLOWS, VNI};
use super::*;
use megaflow::tunnel::{decap, GENEVE_PORT};

#[test]
fn the_tenant_sends_tcp_both_ways_and_the_remote_side_in_geneve() {
    let s = spec(20_000, 200, 7);
    let n = overlay::packets_of(&s);
    assert_eq!(n, 2_000);
    let p = Ports::of(s.vms);
    let mut g = overlay::OverlayGenerator::new(&s, n);
    let mut buf = Vec::new();
    let (mut from_vms, mut from_wire, mut last) = (0, 0, Timestamp(0));
    let mut conns = HashSet::new();
    while let Some((ts, port)) = g.next_into(&mut buf) {
        assert!(ts >= last, "time order");
        last = ts;
        let inner = if port == p.uplink {
            from_wire += 1;
            let d = decap(&buf, &[(GENEVE_PORT, megaflow::tunnel::Kind::Geneve)])
                .expect("well formed")
                .expect("Geneve");
            assert_eq!(d.vni, VNI);
            assert_eq!(
                (d.src, d.dst),
                (
                    IpAddr::from(overlay::REMOTE_ENDPOINT),
                    IpAddr::from(overlay::LOCAL_ENDPOINT)
                )
            );
            buf[d.inner..].to_vec()
        } else {
            assert!(p.vms.contains(&port), "{port}");
            from_vms += 1;
            buf.clone()
        };
        let k = megaflow::extract(port.0, &inner);
        assert_eq!(k.ip_proto(), 6, "TCP");
        let (src, dst) = (
            k.field(megaflow::Field::Ipv4Src),
            k.field(megaflow::Field::Ipv4Dst),
        );
        let remote = u128::from(overlay::tenant_ip(3));
        assert!(src == remote || dst == remote, "with the remote VM");
        if port != p.uplink {
            // The local VM sends from its own port.
            let vm = (src & 0xff) as u32;
            assert_eq!(port, p.vms[vm as usize - 1]);
        }
        conns.insert((k.tp_src().min(k.tp_dst()), k.tp_src().max(k.tp_dst())));
    }
    assert_eq!(from_vms + from_wire, n);
    assert!(
        from_vms > n / 4 && from_wire > n / 4,
        "{from_vms} / {from_wire}"
    );
    assert_eq!(conns.len(), FLOWS as usize);
}

#[test]
fn the_merged_workload_keeps_the_count_and_the_time_order() {
    let s = spec(10_000, 100, 3);
    let all: Vec<DemoPacket> = with_overlay(&s).collect();
    assert_eq!(
        all.len() as u64,
        s.packets,
        "the tenant takes a share, not more"
    );
    assert!(all.windows(2).all(|w| w[0].ts <= w[1].ts));
    let p = Ports::of(s.vms);
    let tenant = all.iter().filter(|x| p.ins().contains(&x.in_port)).count() as u64;
    assert_eq!(tenant, overlay::packets_of(&s));
    // A small workload has none.
    assert_eq!(overlay::packets_of(&spec(500, 10, 1)), 0);
}

#[test]
fn the_tenant_table_parses_and_names_its_ports() {
    let p = Ports::of(4);
    let t = overlay::flow_table(4);
    let flows = parse_flow_file(&t, FlowModCommand::Add).expect("parses");
    assert_eq!(flows.len(), 4);
    assert!(t.contains(&format!("output:{}", p.tunnel)), "{t}");
    assert!(t.contains(&format!("tun_id={VNI}")), "{t}");
    let ports = overlay::port_specs(4);
    let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["ovl1", "ovl2", "wire0", "gnv0"]);
    assert!(ports[3].tunnel.is_some() && ports[3].vport.is_none());
}

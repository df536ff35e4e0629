//! Driven by OVN across two hosts: two eswitchd instances, each in its
//! own "host" network namespace with its own `Open_vSwitch` database and
//! `ovn-controller`, joined by an underlay veth (198.19.0.1 and
//! 198.19.0.2, each end an uplink port of its host's switch), with one
//! central northbound/southbound database and `ovn-northd`. The logical
//! network: switch sw0 (vm1 on host A, vm2 on host B), switch sw1 (vm3 on
//! host B), router lr0 between them. ovn-controller makes the Geneve
//! tunnel ports itself (`key=flow`, its logical ports in a Geneve option
//! it maps with NXT_TLV_TABLE_MOD).
//!
//! Checked: vm1 and vm2 ping across the tunnel; vm1 pings its router's
//! address (OVN's router answers from flows); vm1 and vm3 ping and talk
//! TCP through the router, across the tunnel, both ways; each host's
//! tunnel port has an OpenFlow port and no error; both ovn-controllers
//! logged no OpenFlow error and never reconnected. Prints `bench:
//! ovn.two_hosts_hw_pct` and `bench: ovn.two_hosts_routed_hw_pct`: the
//! share of a steady TCP stream's packets (both hosts, both ways) the sim
//! FDBs forwarded, on the switch and through the router; below 95 % each
//! megaflow's reason is printed.
//!
//! Needs root, iproute2, ethtool, ping, python3, openvswitch-switch (the
//! database server) and ovn-central/ovn-host (`SKIP` otherwise).

mod ovn;

use std::time::Duration;

use integration::netns::run;
use ovn::{pings, stream_hw_pct, tcp_talks, wait_for, Ovn};

const T: &str = "ovn_logical_switch_and_router_span_two_eswitchd_hosts_over_geneve";

#[test]
fn ovn_logical_switch_and_router_span_two_eswitchd_hosts_over_geneve() {
    if !ovn::can_run(T) {
        return;
    }
    let mut ovn = Ovn::new(T, "ovn2h");
    ovn.central();
    let hosts = [("A", "198.19.0.1"), ("B", "198.19.0.2")];
    let mut host_ns = Vec::new();
    for (h, ip) in hosts {
        ovn.host_db(h, ip);
        let ns = ovn.netns(&format!("host{h}"));
        ovn.eswitchd(h, Some(&ns));
        host_ns.push(ns);
    }
    // The underlay: a veth between the hosts, each end the host's tunnel
    // endpoint and an uplink port of its switch.
    let under: Vec<String> = hosts
        .iter()
        .map(|(h, _)| format!("{}u{h}", ovn.tag))
        .collect();
    run(
        "ip",
        &[
            "link",
            "add",
            &under[0],
            "netns",
            &host_ns[0],
            "type",
            "veth",
            "peer",
            "name",
            &under[1],
            "netns",
            &host_ns[1],
        ],
    )
    .unwrap_or_else(|e| panic!("{T}: {e}"));
    for (i, (h, ip)) in hosts.iter().enumerate() {
        let (ns, dev) = (&host_ns[i], &under[i]);
        run(
            "ip",
            &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev],
        )
        .expect("address");
        run("ip", &["-n", ns, "link", "set", dev, "up"]).expect("up");
        ovn.vsctl(
            h,
            &[
                "add-port",
                "br-int",
                dev,
                "--",
                "set",
                "Interface",
                dev,
                "other_config:eswitch-vport=uplink",
            ],
        );
    }

    // The VMs and their logical ports: vm1 on A (sw0), vm2 on B (sw0),
    // vm3 on B (sw1); each veth stands in for a VF's representor.
    ovn.nbctl(&["ls-add", "sw0"]);
    ovn.nbctl(&["ls-add", "sw1"]);
    let specs = [
        (
            "vm1",
            0,
            "sw0",
            "02:00:00:00:00:01",
            "198.18.0.1",
            "198.18.0.254",
            0,
        ),
        (
            "vm2",
            1,
            "sw0",
            "02:00:00:00:00:02",
            "198.18.0.2",
            "198.18.0.254",
            0,
        ),
        (
            "vm3",
            1,
            "sw1",
            "02:00:00:00:01:03",
            "198.18.1.3",
            "198.18.1.254",
            1,
        ),
    ];
    let mut vms = Vec::new();
    for (name, h, ls, mac, ip, gw, vf) in specs {
        let vm = ovn.vm(name, Some(&host_ns[h]), mac, &format!("{ip}/24"), Some(gw));
        ovn.plug(hosts[h].0, &vm, name, vf);
        ovn.nbctl(&["lsp-add", ls, name]);
        ovn.nbctl(&["lsp-set-addresses", name, &format!("{mac} {ip}")]);
        vms.push(vm);
    }
    let [vm1, vm2, vm3] = &vms[..] else {
        unreachable!("three VMs")
    };

    // The router, a port on each switch.
    ovn.nbctl(&["lr-add", "lr0"]);
    for (ls, lrp, mac, cidr) in [
        ("sw0", "lrp0", "02:00:00:00:ff:00", "198.18.0.254/24"),
        ("sw1", "lrp1", "02:00:00:00:ff:01", "198.18.1.254/24"),
    ] {
        ovn.nbctl(&["lrp-add", "lr0", lrp, mac, cidr]);
        let lsp = format!("{ls}-lr0");
        ovn.nbctl(&[
            "lsp-add",
            ls,
            &lsp,
            "--",
            "lsp-set-type",
            &lsp,
            "router",
            "--",
            "lsp-set-addresses",
            &lsp,
            "router",
            "--",
            "lsp-set-options",
            &lsp,
            &format!("router-port={lrp}"),
        ]);
    }
    for (h, _) in hosts {
        ovn.controller(h);
    }

    // Across the tunnel on one logical switch, then to the router, then
    // through it.
    let crossed = wait_for(Duration::from_secs(30), || pings(&vm1.ns, "198.18.0.2"));
    assert!(
        crossed.is_some(),
        "{T}: vm1 never pinged vm2 across hosts ({})",
        ovn.dir.display()
    );
    assert!(pings(&vm2.ns, "198.18.0.1"), "vm2 pings vm1 back");
    assert!(pings(&vm1.ns, "198.18.0.254"), "vm1 pings its router");
    assert!(
        wait_for(Duration::from_secs(10), || pings(&vm1.ns, "198.18.1.3")).is_some(),
        "vm1 pings vm3 through the router and the tunnel"
    );
    assert!(pings(&vm3.ns, "198.18.0.1"), "vm3 pings vm1 back");
    assert!(
        tcp_talks(&vm1.ns, &vm3.ns, "198.18.1.3", 8080),
        "TCP from vm1 to vm3 through the router"
    );
    assert!(tcp_talks(&vm3.ns, &vm1.ns, "198.18.0.1", 8080), "and back");

    // Each host's Geneve port, made by ovn-controller, has a port and no
    // error; the underlay carried the traffic.
    for (i, (h, _)) in hosts.iter().enumerate() {
        let other = hosts[1 - i].0;
        let port = format!("ovn-esw-{other}-0");
        let ofport = ovn.vsctl(h, &["get", "Interface", &port, "ofport"]);
        assert!(
            ofport.trim().parse::<u32>().is_ok_and(|p| p > 0),
            "{h}: {port}: ofport {ofport:?}"
        );
        let error = ovn.vsctl(h, &["get", "Interface", &port, "error"]);
        assert!(error.trim() == "[]", "{h}: {port}: {error}");
        let opts = ovn.vsctl(h, &["get", "Interface", &port, "options"]);
        assert!(opts.contains("key=flow"), "{h}: {port}: {opts}");
        // (`ip netns exec` mounts the namespace's own sysfs.)
        let stat = format!("/sys/class/net/{}/statistics/tx_packets", under[i]);
        let tx: u64 = run("ip", &["netns", "exec", &host_ns[i], "cat", &stat])
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        assert!(tx > 5, "{h}: the underlay sent {tx} packets");
    }

    // Everything both ovn-controllers sent was taken.
    for (h, _) in hosts {
        ovn.assert_controller_clean(&format!("{h}/ovn-controller"));
    }

    // The offloaded share, on the switch and through the router.
    let both = ["A", "B"];
    let pct = stream_hw_pct(&ovn, &both, (&vm1.ns, &vm2.ns), "198.18.0.2", 5001);
    println!("bench: ovn.two_hosts_hw_pct {pct:.1} %");
    let routed = stream_hw_pct(&ovn, &both, (&vm1.ns, &vm3.ns), "198.18.1.3", 5002);
    println!("bench: ovn.two_hosts_routed_hw_pct {routed:.1} %");
    if pct.min(routed) < 95.0 {
        for h in both {
            ovn.show_offload(h);
        }
    }
}

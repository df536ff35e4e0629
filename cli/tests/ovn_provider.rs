//! Driven by OVN with a provider network: br-int beside a second bridge
//! (`br-phys`) in the same eswitchd, joined by the patch ports
//! ovn-controller makes for a `localnet` logical port
//! (`ovn-bridge-mappings=physnet:br-phys`), as OpenStack and
//! OVN-Kubernetes run their provider networks. The wire side is the
//! uplink on br-phys (a veth to a "physical" host namespace standing in
//! for the PF's uplink representor); the VM's veth is VF 0's representor
//! on br-int.
//!
//! Checked: `ovs-vsctl add-br br-phys` returns at once and eswitchd
//! listens on `br-phys.mgmt`, where `ovs-ofctl` reads the
//! `priority=0 actions=NORMAL` flow a new standalone bridge has (as with
//! Open vSwitch); ovn-controller's patch ports get OpenFlow ports on both
//! bridges, and `Interface.status` says each is a patch to its peer (the
//! VM's port: VF 0); the VM and the physical host ping and talk TCP both ways
//! through br-int's logical pipeline, the patch ports and br-phys's
//! NORMAL; br-phys's MAC learning shows in `ovs-ofctl dump-ports` (packets
//! counted on its ports); `protocols=OpenFlow14` on br-phys makes its
//! socket refuse OpenFlow 1.3 at the HELLO and speak 1.4; a bridge deleted with `ovs-vsctl del-br` takes
//! its socket with it and the VM no longer reaches the wire; ovn-controller
//! logged no OpenFlow error and never reconnected, and eswitchd refused
//! none of its messages (its gratuitous ARPs are packet-outs that start
//! the pipeline with `resubmit(CONTROLLER,8)`). Prints `bench:
//! ovn.provider_hw_pct`: the share of a steady TCP stream's packets, both
//! ways, the sim FDB forwarded (one FDB rule per direction carries a
//! packet across both bridges).
//!
//! Needs root, iproute2, ethtool, ping, python3, openvswitch-switch (the
//! database server) and ovn-central/ovn-host (`SKIP` otherwise).

mod ovn;

use std::time::Duration;

use integration::netns::run;
use ovn::{pings, stream_hw_pct, tcp_talks, wait_for, Ovn};

const T: &str = "ovn_localnet_reaches_the_wire_through_a_provider_bridge_and_patch_ports";
const H: &str = "h1";

#[test]
fn ovn_localnet_reaches_the_wire_through_a_provider_bridge_and_patch_ports() {
    if !ovn::can_run(T) {
        return;
    }
    let mut ovn = Ovn::new(T, "ovnp");
    ovn.central();
    ovn.host_db(H, "198.19.0.1");
    ovn.eswitchd(H, None);

    // The provider bridge, made as a user makes it: standalone, no
    // controller. ovs-vsctl waits for cur_cfg: eswitchd applied it.
    ovn.vsctl(H, &["add-br", "br-phys"]);
    let phys_mgmt = format!("unix:{}", ovn.path(&format!("{H}/br-phys.mgmt")));
    let flows = run("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &phys_mgmt])
        .unwrap_or_else(|e| panic!("{T}: ovs-ofctl on br-phys.mgmt: {e}"));
    assert!(
        flows.contains("priority=0 actions=NORMAL"),
        "{T}: a new standalone bridge switches with NORMAL: {flows}"
    );

    // The wire: a "physical" host on the provider network, its switch end
    // the uplink on br-phys.
    let wire = ovn.vm("phys", None, "02:00:00:00:00:64", "198.18.0.100/24", None);
    ovn.vsctl(
        H,
        &[
            "add-port",
            "br-phys",
            &wire.port,
            "--",
            "set",
            "Interface",
            &wire.port,
            "other_config:eswitch-vport=uplink",
        ],
    );
    run(
        "ip",
        &[
            "netns",
            "exec",
            &wire.ns,
            "sysctl",
            "-qw",
            "net.ipv4.conf.eth0.arp_accept=1",
        ],
    )
    .expect("arp_accept");
    let vm = ovn.vm("vm1", None, "02:00:00:00:00:01", "198.18.0.1/24", None);
    ovn.plug(H, &vm, "vm1", 0);
    ovn.vsctl(
        H,
        &[
            "set",
            "Open_vSwitch",
            ".",
            "external_ids:ovn-bridge-mappings=physnet:br-phys",
        ],
    );

    // The logical network: vm1 and a localnet port on one switch.
    ovn.nbctl(&["ls-add", "sw0"]);
    ovn.nbctl(&["lsp-add", "sw0", "vm1"]);
    ovn.nbctl(&["lsp-set-addresses", "vm1", "02:00:00:00:00:01 198.18.0.1"]);
    ovn.nbctl(&["lsp-add", "sw0", "ln0"]);
    ovn.nbctl(&["lsp-set-type", "ln0", "localnet"]);
    ovn.nbctl(&["lsp-set-addresses", "ln0", "unknown"]);
    ovn.nbctl(&["lsp-set-options", "ln0", "network_name=physnet"]);
    ovn.controller(H);

    // ovn-controller makes the patch pair; eswitchd numbers both ends.
    let patched = wait_for(Duration::from_secs(20), || {
        let ports = ovn.vsctl(
            H,
            &[
                "--bare",
                "--columns=name,ofport",
                "find",
                "Interface",
                "type=patch",
            ],
        );
        let ofports: Vec<i64> = ports
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        ofports.len() == 2 && ofports.iter().all(|p| *p > 0)
    });
    assert!(
        patched.is_some(),
        "{T}: patch ports: {}",
        ovn.vsctl(H, &["find", "Interface", "type=patch"])
    );
    // Interface.status says what each port is to the switch.
    let st = ovn.vsctl(H, &["get", "Interface", "patch-br-int-to-ln0", "status"]);
    assert!(
        st.contains("eswitch_port_type=patch") && st.contains("peer=patch-ln0-to-br-int"),
        "{T}: patch port status: {st}"
    );
    let st = ovn.vsctl(H, &["get", "Interface", &vm.port, "status"]);
    assert!(
        st.contains("eswitch_vport=vf0"),
        "{T}: VM port status: {st}"
    );
    for br in ["br-int", "br-phys"] {
        let ports = ovn.vsctl(H, &["list-ports", br]);
        assert!(
            ports.contains("patch-"),
            "{T}: {br} has no patch port: {ports}"
        );
    }

    // ovn-controller announces vm1 on the provider network: a gratuitous
    // ARP, its packet-out run through br-int, the patch and br-phys, which
    // the physical host (accepting unsolicited ARP) learns from before
    // anything else is sent.
    let garp = wait_for(Duration::from_secs(10), || {
        run("ip", &["-n", &wire.ns, "neigh", "show", "198.18.0.1"])
            .is_ok_and(|n| n.contains("02:00:00:00:00:01"))
    });
    assert!(
        garp.is_some(),
        "{T}: no gratuitous ARP for vm1 reached the wire"
    );

    // Through br-int's pipeline, the patch ports and br-phys's NORMAL.
    let first = wait_for(Duration::from_secs(20), || pings(&vm.ns, "198.18.0.100"));
    assert!(first.is_some(), "{T}: vm1 never reached the physical host");
    assert!(
        pings(&wire.ns, "198.18.0.1"),
        "{T}: the wire side reaches vm1"
    );
    assert!(
        tcp_talks(&vm.ns, &wire.ns, "198.18.0.100", 5001),
        "{T}: TCP out"
    );
    assert!(
        tcp_talks(&wire.ns, &vm.ns, "198.18.0.1", 5002),
        "{T}: TCP in"
    );
    // br-phys counted its ports' packets (its own OpenFlow view).
    let stats = run("ovs-ofctl", &["-O", "OpenFlow13", "dump-ports", &phys_mgmt])
        .unwrap_or_else(|e| panic!("{T}: dump-ports: {e}"));
    assert!(stats.contains("rx pkts="), "{T}: {stats}");
    let desc = run("ovs-ofctl", &["-O", "OpenFlow13", "show", &phys_mgmt])
        .unwrap_or_else(|e| panic!("{T}: {e}"));
    assert!(
        desc.contains(&wire.port) && desc.contains("patch-"),
        "{T}: br-phys ports: {desc}"
    );
    assert!(
        !desc.contains(&vm.port),
        "{T}: br-int's port on br-phys: {desc}"
    );

    let pct = stream_hw_pct(&ovn, &[H], (&vm.ns, &wire.ns), "198.18.0.100", 5003);
    println!("bench: ovn.provider_hw_pct {pct:.1} %");
    if pct < 95.0 {
        ovn.show_offload(H);
    }
    ovn.assert_controller_clean(&format!("{H}/ovn-controller"));
    // Nor was any of its connections refused anything (its packet-outs
    // included: gratuitous ARPs for the localnet port start OVN's
    // pipeline with `resubmit(CONTROLLER,8)`).
    let log = std::fs::read_to_string(ovn.path(&format!("{H}/eswitchd.log"))).unwrap_or_default();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("OpenFlow error sent"))
        .collect();
    assert!(refused.is_empty(), "{T}: {refused:#?}");

    // Its OpenFlow versions, as `protocols` says: 1.4 only, then 1.3 is
    // refused at the HELLO and 1.4 spoken.
    ovn.vsctl(H, &["set", "Bridge", "br-phys", "protocols=OpenFlow14"]);
    let v13 = run("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &phys_mgmt]);
    assert!(
        v13.as_ref()
            .is_err_and(|e| e.contains("version negotiation failed")),
        "{T}: OpenFlow 1.3 with protocols=OpenFlow14: {v13:?}"
    );
    let v14 = run("ovs-ofctl", &["-O", "OpenFlow14", "dump-flows", &phys_mgmt])
        .unwrap_or_else(|e| panic!("{T}: OpenFlow 1.4: {e}"));
    assert!(v14.contains("actions=NORMAL"), "{T}: {v14}");
    ovn.vsctl(H, &["clear", "Bridge", "br-phys", "protocols"]);
    assert!(run("ovs-ofctl", &["-O", "OpenFlow13", "show", &phys_mgmt]).is_ok());

    // The bridge deleted: its socket goes, and nothing reaches the wire.
    ovn.vsctl(H, &["del-br", "br-phys"]);
    let sock = ovn.path(&format!("{H}/br-phys.mgmt"));
    assert!(
        wait_for(Duration::from_secs(5), || !std::path::Path::new(&sock)
            .exists())
        .is_some(),
        "{T}: br-phys.mgmt stays after del-br"
    );
    assert!(
        !pings(&vm.ns, "198.18.0.100"),
        "{T}: the wire reached with no provider bridge"
    );
    assert!(
        ovn.vsctl(H, &["get", "Interface", &vm.port, "ofport"])
            .trim()
            != "-1",
        "{T}: br-int's port survived"
    );
}

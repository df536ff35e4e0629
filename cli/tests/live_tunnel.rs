//! Overlays against the Linux kernel's own tunnel devices: lab.sh's lab
//! with an uplink (`wire0`, ofport 100) to the namespace `wire`, which
//! plays the remote host: its `eth0` is the underlay (198.19.0.2/24; the
//! switch namespace's `wire0` is 198.19.0.1/24, the local endpoint), and a
//! kernel `vxlan` or `geneve` device there carries an overlay address
//! (198.18.0.200/16) on the VMs' network. A tunnel port added live
//! (`eswitchctl add-port --type vxlan|geneve --option ...`) joins them:
//! vm1's packets are encapsulated toward the remote host, the remote
//! device's come back decapsulated on the tunnel port. The neighbour of
//! the remote endpoint is unknown at first: the switch asks the kernel to
//! resolve it and re-translates when it is. `tshark` on the wire checks
//! the outer headers. Root, iproute2 and tshark are needed (skipped
//! otherwise); traffic stays in the lab's namespaces, which go on drop.

mod lab;

use integration::netns::run;
use lab::{can_run, settled_stats, u, LiveLab};

const TUNNEL_PORT: &str = "200";

/// The lab with an uplink, the local endpoint 198.19.0.1 on the switch
/// namespace's `wire0`, and the switch's tunnel port of `kind` to
/// 198.19.0.2 (VNI 4242) between vm1 and the remote host.
fn switch_side(kind: &str) -> LiveLab {
    switch_side_with(kind, "")
}

/// [`switch_side`] with `extra` configuration.
fn switch_side_with(kind: &str, extra: &str) -> LiveLab {
    let flows = format!(
        "priority=10,in_port=1,actions=output:{TUNNEL_PORT}\n\
         priority=10,in_port={TUNNEL_PORT},tun_id=4242,actions=output:1\n\
         priority=0,actions=drop\n"
    );
    let lab = LiveLab::start_with(2, "af_packet", Some(&flows), extra, &["--uplink"]);
    run(
        "ip",
        &[
            "-n",
            &lab.ns("sw"),
            "addr",
            "add",
            "198.19.0.1/24",
            "dev",
            "wire0",
        ],
    )
    .expect("local endpoint");
    lab.ctl(&[
        "add-port",
        "tun0",
        "--type",
        kind,
        "--ofport",
        TUNNEL_PORT,
        "--option",
        "remote_ip=198.19.0.2",
        "--option",
        "key=4242",
    ])
    .expect("add-port");
    lab
}

/// The remote host's tunnel device of `kind` (VNI 4242) and the local
/// endpoint's address; the switch's tunnel port to it. `None` (skipped)
/// when the kernel has no such device type.
fn tunnel_lab(test: &str, kind: &str) -> Option<LiveLab> {
    let lab = switch_side(kind);
    let wire = lab.ns("wire");
    let sh = |ns: &str, cmd: &str| {
        run("ip", &["netns", "exec", ns, "sh", "-c", cmd]).unwrap_or_else(|e| panic!("{cmd}: {e}"))
    };
    sh(
        &wire,
        "ip addr flush dev eth0 && ip addr add 198.19.0.2/24 dev eth0",
    );
    let dev = match kind {
        "vxlan" => {
            "ip link add tun0 type vxlan id 4242 local 198.19.0.2 remote 198.19.0.1 dstport 4789"
        }
        _ => "ip link add tun0 type geneve id 4242 remote 198.19.0.1",
    };
    if let Err(e) = run("ip", &["netns", "exec", &wire, "sh", "-c", dev]) {
        if e.contains("Unknown device type") {
            // Not an install step: the running kernel lacks the module.
            prereq::no_hardware(
                test,
                format!(
                    "the running kernel has no {kind} device type ({e}); on a kernel with the {kind} module run cargo test -p cli --test live_tunnel"
                ),
            );
            return None;
        }
        panic!("{dev}: {e}");
    }
    sh(
        &wire,
        "ip link set tun0 address 02:00:00:00:ee:01 mtu 1400 && \
         ip addr add 198.18.0.200/16 dev tun0 && ip link set tun0 up",
    );
    let port = lab.port("tun0");
    assert_eq!(port["type"], kind, "{port}");
    let opts = port["tunnel"].as_str().unwrap_or("");
    assert!(
        opts.contains("remote_ip=198.19.0.2") && opts.contains("key=4242"),
        "{port}"
    );
    assert_eq!(port["overhead"], 50, "{port}");
    // A bad option is refused by name; the switch goes on.
    let e = lab
        .ctl(&[
            "add-port",
            "tun1",
            "--type",
            kind,
            "--option",
            "remote_ip=198.19.0.2",
            "--option",
            "ttl=0",
        ])
        .expect_err("ttl=0");
    assert!(e.contains("option ttl=\"0\""), "{e}");
    assert!(lab.port("tun1").is_null(), "no half-added port");
    Some(lab)
}

fn walk(test: &str, kind: &str) {
    let Some(lab) = tunnel_lab(test, kind) else {
        return;
    };
    // The first pings wait for the neighbour 198.19.0.2 to resolve (asked
    // of the kernel) and the flows to be re-translated: up to 30 s (CI
    // under load once took over 10 s for it).
    lab.wait_for_within(
        std::time::Duration::from_secs(30),
        "a ping through the tunnel",
        || lab.ping_addr("vm1", "198.18.0.200", 1),
    );
    assert!(
        lab.ping_addr("vm1", "198.18.0.200", 5),
        "5 pings vm1 → the remote host's {kind} device"
    );
    // The other way: the remote host pings vm1.
    assert!(
        lab.ping_addr("wire", "198.18.0.1", 3),
        "3 pings the remote host → vm1"
    );
    // UDP, counted at the far end.
    let before = lab.udp_received_in("wire");
    lab.udp_addr("vm1", "198.18.0.200", 9, 100);
    lab.wait_for("100 datagrams at the remote host", || {
        lab.udp_received_in("wire") >= before + 100
    });
    // The encap flow is in the (sim) eSwitch: an L2_TO_L2_TUNNEL reformat
    // and the uplink.
    let encap_flow = || {
        lab.flows()
            .into_iter()
            .find(|f| f["actions"].as_str().unwrap_or("").contains("tnl_push"))
            .unwrap_or_default()
    };
    lab.wait_for("the encap flow offloaded", || {
        encap_flow()["offloaded"] == "yes"
    });
    // Counters are published every 50 ms: the baseline once settled, the
    // 50 waited for.
    let hw_before = u(&settled_stats(&lab)["hw_handled"]);
    lab.udp_addr("vm1", "198.18.0.200", 9, 50);
    lab.wait_for("50 more datagrams at the remote host", || {
        lab.udp_received_in("wire") >= before + 150
    });
    lab.wait_for("the sim's FDB to count 45 of the 50 datagrams", || {
        u(&lab.stats()["hw_handled"]) >= hw_before + 45
    });
    let st = lab.stats();
    // Software decapsulated the first; the sim's FDB the rest.
    assert!(u(&st["tunnel_rx"]) >= 1, "decapsulated at receive: {st}");
    assert_eq!(u(&st["tunnel_drop_unknown_vni"]), 0, "{st}");
    // The outer headers as Wireshark reads them: the VNI, the UDP port,
    // the switch's source port in the dynamic range.
    let port = if kind == "vxlan" { 4789 } else { 6081 };
    let fields = match kind {
        "vxlan" => "vxlan.vni",
        _ => "geneve.vni",
    };
    let lines = capture(
        &lab,
        ("wire", "eth0"),
        &format!("src host 198.19.0.1 and udp dst port {port}"),
        10,
        &[fields, "udp.srcport", "ip.dst", "ip.src"],
        || lab.udp_addr("vm1", "198.18.0.200", 9, 10),
    );
    assert!(!lines.is_empty(), "no tunnel packet captured");
    for l in &lines {
        // Outer first: the inner packet's UDP and IP fields follow.
        let f: Vec<&str> = l
            .split('\t')
            .map(|v| v.split(',').next().unwrap_or(""))
            .collect();
        assert_eq!(f[0], "4242", "VNI: {l}");
        let sport: u16 = f[1].parse().expect("source port");
        assert!(
            sport >= 49152,
            "source port {sport} outside the dynamic range: {l}"
        );
        assert_eq!(f[2], "198.19.0.2", "{l}");
        assert_eq!(f[3], "198.19.0.1", "{l}");
    }
    // The decap flow is in the eSwitch too: matched on the uplink by the
    // outer headers and the VNI, decapsulated by an L2_TUNNEL_TO_L2.
    lab.ping_addr("wire", "198.18.0.1", 3);
    lab.wait_for("the decap flow offloaded", || {
        lab.flows().iter().any(|f| {
            f["match"].as_str().unwrap_or("").contains("tun_id=0x1092") && f["offloaded"] == "yes"
        })
    });
    // TCP both ways: a megabyte each, every byte counted at the far end.
    for (server, addr, client) in [
        ("wire", "198.18.0.200", "vm1"),
        ("vm1", "198.18.0.1", "wire"),
    ] {
        let got = tcp_transfer(&lab, server, addr, client, 1 << 20);
        assert_eq!(
            got,
            1 << 20,
            "TCP {client} → {server} ({addr}) through the tunnel"
        );
    }
    if kind == "vxlan" {
        neighbour_change(&lab);
        route_change(&lab);
    }
}

/// `bytes` sent over TCP from the lab namespace `client` to `addr` (in
/// `server`), port 5001; returns what the server received (python3 on
/// both ends, every wait bounded).
fn tcp_transfer(lab: &LiveLab, server: &str, addr: &str, client: &str, bytes: usize) -> usize {
    let srv = format!(
        "import socket\n\
         s = socket.socket()\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{addr}', 5001)); s.listen(1); s.settimeout(15)\n\
         c, _ = s.accept(); c.settimeout(15); n = 0\n\
         while True:\n    d = c.recv(65536)\n    if not d: break\n    n += len(d)\n\
         print(n)\n"
    );
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &lab.ns(server), "python3", "-c", &srv])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 server");
    let mut child = KillOnDrop(child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let cli = format!(
        "import socket\n\
         s = socket.create_connection(('{addr}', 5001), timeout=15)\n\
         s.sendall(b'e' * {bytes}); s.close()\n"
    );
    run(
        "ip",
        &["netns", "exec", &lab.ns(client), "python3", "-c", &cli],
    )
    .unwrap_or_else(|e| panic!("TCP client in {client}: {e}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut out = String::new();
    if let Some(mut o) = child.0.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_string(&mut out);
    }
    out.trim().parse().unwrap_or(0)
}

/// A route to the remote endpoint through a gateway that does not
/// answer: the tunnel's flows are re-translated and send nothing (the
/// neighbour cannot be resolved); the route goes and the connected one
/// carries the traffic again. Prints the time from the route's removal to
/// the first ping through (`bench:` line).
fn route_change(lab: &LiveLab) {
    let sw = lab.ns("sw");
    let route = |verb: &str| {
        let mut args = vec!["-n", &sw, "route", verb, "198.19.0.2/32"];
        if verb == "add" {
            args.extend(["via", "198.19.0.3", "dev", "wire0"]);
        }
        run("ip", &args).unwrap_or_else(|e| panic!("route {verb}: {e}"))
    };
    route("add");
    lab.wait_for(
        "the tunnel's flows to leave the dead route's traffic unsent",
        || !lab.ping_addr("vm1", "198.18.0.200", 1),
    );
    let t0 = std::time::Instant::now();
    route("del");
    lab.wait_for("pings through the tunnel again", || {
        lab.ping_addr("vm1", "198.18.0.200", 1)
    });
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    println!("bench: tunnel.route_change_recover_ms {ms:.1} ms");
    assert!(
        lab.ping_addr("vm1", "198.18.0.200", 3),
        "after the route change"
    );
}

/// The remote endpoint's MAC changes and the host learns it: the flows
/// through the tunnel are re-translated with the new outer header, and
/// traffic flows again. Prints the time from the neighbour change to the
/// new header in the megaflow (`bench:` line).
fn neighbour_change(lab: &LiveLab) {
    let (sw, wire) = (lab.ns("sw"), lab.ns("wire"));
    let new_mac = "02:00:00:00:ff:09";
    let has_new = || {
        lab.flows().iter().any(|f| {
            f["actions"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("eth_dst={new_mac}"))
        })
    };
    assert!(!has_new());
    lab.udp_addr("vm1", "198.18.0.200", 9, 1);
    run(
        "ip",
        &["-n", &wire, "link", "set", "eth0", "address", new_mac],
    )
    .expect("new MAC");
    let t0 = std::time::Instant::now();
    run(
        "ip",
        &[
            "-n",
            &sw,
            "neigh",
            "replace",
            "198.19.0.2",
            "lladdr",
            new_mac,
            "dev",
            "wire0",
            "nud",
            "reachable",
        ],
    )
    .expect("neighbour");
    let deadline = t0 + std::time::Duration::from_secs(10);
    while !has_new() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    assert!(
        has_new(),
        "no megaflow with the new header: {:?}",
        lab.flows()
    );
    println!("bench: tunnel.neigh_change_recover_ms {ms:.1} ms");
    assert!(
        lab.ping_addr("vm1", "198.18.0.200", 3),
        "pings through the tunnel after the MAC change"
    );
}

/// Open vSwitch 3.1 as the remote host: in the namespace `wire`, its
/// userspace datapath holds `eth0` in `br-phy` (whose tap carries the
/// endpoint 198.19.0.2) and a `kind` port to 198.19.0.1 with VNI 4242 in
/// `br-int` (whose tap carries the overlay address 198.18.0.200); both
/// bridges switch by NORMAL. Open vSwitch's native tunnelling encapsulates
/// and decapsulates; ping and TCP run both ways with eswitch's tunnel port
/// of the same kind.
fn with_open_vswitch(test: &str, lab: &LiveLab, kind: &str, of_target: Option<&str>) {
    let wire = lab.ns("wire");
    let Some(ovs) = integration::ovs::Ovs::start_in_or_skip(test, &wire) else {
        return;
    };
    let vsctl = |args: &[&str]| {
        ovs.vsctl(args)
            .unwrap_or_else(|e| panic!("ovs-vsctl {}: {e}", args.join(" ")))
    };
    vsctl(&[
        "add-br",
        "br-phy",
        "--",
        "set",
        "bridge",
        "br-phy",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-phy",
        "eth0",
    ]);
    let ty = format!("type={kind}");
    vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-int",
        "tun",
        "--",
        "set",
        "interface",
        "tun",
        &ty,
        "options:remote_ip=198.19.0.1",
        "options:key=4242",
    ]);
    let sh = |cmd: &str| {
        run("ip", &["netns", "exec", &wire, "sh", "-c", cmd])
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
    };
    sh("ip addr flush dev eth0 && ip addr add 198.19.0.2/24 dev br-phy && ip link set br-phy up");
    sh("ip addr add 198.18.0.200/16 dev br-int && ip link set br-int mtu 1400 up");
    // Open vSwitch's userspace far end learns its tunnel neighbour from an
    // ARP reply first; on a loaded machine (CI runs the tests of this file
    // together) that has taken over 10 s.
    lab.wait_for_within(
        std::time::Duration::from_secs(30),
        &format!("a ping to Open vSwitch's {kind} port"),
        || lab.ping_addr("vm1", "198.18.0.200", 1),
    );
    assert!(
        lab.ping_addr("vm1", "198.18.0.200", 5),
        "vm1 → Open vSwitch"
    );
    assert!(lab.ping_addr("wire", "198.18.0.1", 3), "Open vSwitch → vm1");
    for (server, addr, client) in [
        ("wire", "198.18.0.200", "vm1"),
        ("vm1", "198.18.0.1", "wire"),
    ] {
        let got = tcp_transfer(lab, server, addr, client, 1 << 20);
        assert_eq!(
            got,
            1 << 20,
            "TCP {client} → {server} over {kind} with Open vSwitch"
        );
    }
    // Open vSwitch decapsulated what eswitch sent (a tnl_pop flow that
    // counted packets), and eswitch what Open vSwitch sent.
    let dp = ovs.appctl(&["dpctl/dump-flows"]).unwrap_or_default();
    assert!(dp.contains("tnl_pop"), "{dp}");
    assert!(u(&lab.stats()["tunnel_rx"]) >= 1, "{}", lab.stats());
    if kind == "geneve" {
        if let Some(target) = of_target {
            geneve_option_from_open_vswitch(lab, &ovs, target);
            geneve_option_both_ways(lab, &ovs, target);
        }
    }
}

/// `ovs-ofctl -O OpenFlow13 ARGS`, its output.
fn ofctl13(args: &[&str]) -> String {
    let mut a = vec!["-O", "OpenFlow13"];
    a.extend_from_slice(args);
    run("ovs-ofctl", &a).unwrap_or_else(|e| panic!("ovs-ofctl {}: {e}", args.join(" ")))
}

/// Open vSwitch puts a Geneve option (class 0x0102, type 0x80, 4 bytes:
/// OVN's, critical) on what it sends to vm1. Unmapped on eswitch, the
/// packets are dropped and counted as Open vSwitch drops an unknown
/// critical option; once eswitch's TLV table maps it (`ovs-ofctl
/// add-tlv-map` on eswitch's socket `target`), they are decapsulated into
/// vm1's frames, and on the wire Wireshark reads the option.
fn geneve_option_from_open_vswitch(lab: &LiveLab, ovs: &integration::ovs::Ovs, target: &str) {
    let ofctl = |args: &[&str]| {
        ovs.ofctl(args)
            .unwrap_or_else(|e| panic!("ovs-ofctl {}: {e}", args.join(" ")))
    };
    ofctl(&[
        "add-tlv-map",
        "br-int",
        "{class=0x0102,type=0x80,len=4}->tun_metadata0",
    ]);
    ofctl(&[
        "add-flow",
        "br-int",
        "priority=100,ip,nw_dst=198.18.0.1,actions=set_field:0xabcd->tun_metadata0,NORMAL",
    ]);
    assert!(
        !lab.ping_addr("wire", "198.18.0.1", 2),
        "an unknown critical option passed"
    );
    assert!(
        u(&lab.stats()["tunnel_drop_bad_option"]) >= 1,
        "{}",
        lab.stats()
    );
    ofctl13(&[
        "add-tlv-map",
        target,
        "{class=0x0102,type=0x80,len=4}->tun_metadata0",
    ]);
    let dump = ofctl13(&["dump-tlv-map", target]);
    assert!(
        dump.contains("0x102") && dump.contains("tun_metadata0"),
        "{dump}"
    );
    let lines = capture(
        lab,
        ("sw", "wire0"),
        "src host 198.19.0.2 and udp dst port 6081",
        3,
        &[
            "geneve.option.class",
            "geneve.option.type",
            "geneve.option.length",
        ],
        || {
            assert!(
                lab.ping_addr("wire", "198.18.0.1", 5),
                "pings with a Geneve option, decapsulated by eswitch"
            );
        },
    );
    assert!(!lines.is_empty(), "no Geneve packet captured");
    for l in lines {
        // Wireshark's length counts the option's 4-byte header.
        let f: Vec<&str> = l
            .split('\t')
            .map(|v| v.split(',').next().unwrap_or(""))
            .collect();
        assert_eq!(f, ["0x0102", "0x80", "8"], "{l}");
    }
}

#[test]
fn vxlan_and_geneve_with_open_vswitch_as_the_far_end() {
    let test = "vxlan_and_geneve_with_open_vswitch_as_the_far_end";
    if !ready(test) {
        return;
    }
    for kind in ["vxlan", "geneve"] {
        // eswitch's OpenFlow socket, for ovs-ofctl (a unique name: the
        // lab's own directory is made with the lab).
        let sock = std::env::temp_dir().join(format!(
            "eswitch-tun-{}-{kind}-{}.sock",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let extra = format!("[openflow]\nlisten = [\"punix:{}\"]\n", sock.display());
        let lab = switch_side_with(kind, &extra);
        let target = format!("unix:{}", sock.display());
        with_open_vswitch(test, &lab, kind, Some(&target));
        drop(lab);
        let _ = std::fs::remove_file(&sock);
    }
}

/// OVN's Geneve option carried both ways between eswitch and Open
/// vSwitch, each side's TLV table mapping it to `tun_metadata0` (eswitch's
/// through its OpenFlow socket `target`): eswitch matches the value Open vSwitch sets (0xabcd) and
/// counts it on that rule; Open vSwitch passes only packets carrying the
/// value eswitch sets (0x1234), so vm1's pings cross only if eswitch
/// sent it.
fn geneve_option_both_ways(lab: &LiveLab, ovs: &integration::ovs::Ovs, target: &str) {
    let es = ofctl13;
    let ofctl = |args: &[&str]| {
        ovs.ofctl(args)
            .unwrap_or_else(|e| panic!("ovs-ofctl {}: {e}", args.join(" ")))
    };
    let from_ovs = format!(
        "priority=20,in_port={TUNNEL_PORT},tun_id=4242,tun_metadata0=0xabcd,actions=output:1"
    );
    let to_ovs = format!(
        "priority=20,in_port=1,actions=set_field:0x1234->tun_metadata0,output:{TUNNEL_PORT}"
    );
    es(&["add-flow", target, &from_ovs]);
    es(&["add-flow", target, &to_ovs]);
    // Open vSwitch's br-int: from the tunnel, only the value eswitch sets.
    ofctl(&[
        "add-flow",
        "br-int",
        "priority=200,in_port=tun,tun_metadata0=0x1234,actions=NORMAL",
    ]);
    ofctl(&[
        "add-flow",
        "br-int",
        "priority=150,in_port=tun,actions=drop",
    ]);
    let bad_before = u(&lab.stats()["tunnel_drop_bad_option"]);
    lab.wait_for("pings with options both ways", || {
        lab.ping_addr("vm1", "198.18.0.200", 1)
    });
    assert!(
        lab.ping_addr("vm1", "198.18.0.200", 5),
        "vm1 → Open vSwitch with the option"
    );
    let hits = |dump: &str, what: &str| -> u64 {
        dump.lines()
            .find(|l| l.contains(what))
            .and_then(|l| l.split("n_packets=").nth(1))
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // Both switches count rules as their revalidators pass.
    lab.wait_for("Open vSwitch's and eswitch's option rules to count", || {
        hits(&ofctl(&["dump-flows", "br-int"]), "tun_metadata0=0x1234") >= 5
            && hits(&es(&["dump-flows", target]), "tun_metadata0=0xabcd") >= 5
    });
    let ovs_flows = ofctl(&["dump-flows", "br-int"]);
    assert_eq!(
        hits(&ovs_flows, "priority=150"),
        0,
        "Open vSwitch dropped none from the tunnel: {ovs_flows}"
    );
    let es_flows = es(&["dump-flows", target]);
    assert!(
        es_flows.contains("set_field:0x1234->tun_metadata0"),
        "{es_flows}"
    );
    // A mapping in use cannot be deleted.
    let e = run("ovs-ofctl", &["-O", "OpenFlow13", "del-tlv-map", target]).expect_err("in use");
    assert!(e.contains("NXTTMFC_INVALID_TLV_DEL"), "{e}");
    assert_eq!(
        u(&lab.stats()["tunnel_drop_bad_option"]),
        bad_before,
        "{}",
        lab.stats()
    );
}

/// Captures up to `count` packets matching `filter` on `dev` in the lab
/// namespace `ns` while `during` runs (every wait bounded), and returns
/// Wireshark's `fields` of each, tab-separated, one line a packet.
fn capture(
    lab: &LiveLab,
    (ns, dev): (&str, &str),
    filter: &str,
    count: u32,
    fields: &[&str],
    during: impl FnOnce(),
) -> Vec<String> {
    let pcap = lab.dir().join(format!("{ns}-{dev}.pcap"));
    let pcap_s = pcap.display().to_string();
    let n = count.to_string();
    let cap = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.ns(ns),
            "tcpdump",
            "-i",
            dev,
            "-U",
            "-c",
            &n,
        ])
        .args(["-w", &pcap_s, filter])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tcpdump");
    let mut cap = KillOnDrop(cap);
    std::thread::sleep(std::time::Duration::from_millis(300));
    during();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cap.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    cap.0.kill().ok();
    let mut args = vec!["-r", pcap_s.as_str(), "-T", "fields"];
    for f in fields {
        args.extend(["-e", f]);
    }
    let out = run("tshark", &args).expect("tshark");
    out.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ready(test: &str) -> bool {
    can_run(test, "af_packet") && prereq::tools(test, &["tshark", "tcpdump"])
}

#[test]
fn vxlan_with_the_kernels_vxlan_device() {
    if !ready("vxlan_with_the_kernels_vxlan_device") {
        return;
    }
    walk("vxlan_with_the_kernels_vxlan_device", "vxlan");
}

#[test]
fn geneve_with_the_kernels_geneve_device() {
    if !ready("geneve_with_the_kernels_geneve_device") {
        return;
    }
    walk("geneve_with_the_kernels_geneve_device", "geneve");
}

//! Driven by OVN, end to end on one host: Debian's own `ovsdb-server`
//! (the `Open_vSwitch`, northbound and southbound databases),
//! `ovn-northd` and `ovn-controller`, with `eswitchd run --ovsdb` as the
//! switch daemon (`ovs-vswitchd` is never started). Two VMs (network
//! namespaces, veth pairs) are the two ports of a logical switch made with
//! `ovn-nbctl`, with ACLs as a security group writes them (everything out
//! allowed and related, in: ICMP and TCP port 22; the rest dropped).
//!
//! Checked: the VMs ping and talk TCP on port 22, and on 8443 from an
//! address set (conjunctive flows); TCP to port 80 is dropped; OVN's
//! native DHCP offers vm1 its address (the DISCOVER paused with
//! `controller(pause)`, answered and resumed by ovn-controller); a port
//! deleted in the northbound database stops forwarding and a port added
//! back forwards again; `eswitchd` wrote the `Interface.ofport` each port
//! was given; ovn-controller logged no OpenFlow error and never
//! reconnected. The VMs' veths stand in for VF representors
//! (`other_config:eswitch-vport`), so the sim FDB forwards what it can.
//! Prints `bench: ovn.first_ping_s` (from ovn-controller's start to the
//! first ping answered), `bench: ovn.hw_pct` (the share of a steady TCP
//! stream's packets the sim FDB forwarded) and `bench:
//! ovn.bundle_flows_per_s`.
//!
//! Needs root, iproute2, ethtool, ping, python3, openvswitch-switch (the
//! database server) and ovn-central/ovn-host (`SKIP` otherwise). The VMs
//! send with TX checksum offload on: their TCP checksums are partial, and
//! eswitchd completes them on receive.

mod ovn;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration::netns::run;
use ovn::{pings, pings_within, stream_hw_pct, tcp_talks, wait_for, Ovn};

const T: &str = "ovn_controller_programs_eswitchd_through_ovsdb_and_openflow_1_5";
/// The one host of this lab.
const H: &str = "h1";

#[test]
fn ovn_controller_programs_eswitchd_through_ovsdb_and_openflow_1_5() {
    if !ovn::can_run(T) {
        return;
    }
    let mut ovn = Ovn::new(T, "ovn");
    ovn.central();
    ovn.host_db(H, "198.19.0.1");
    // The switch daemon, following the database; `ovs-vsctl` waits for
    // cur_cfg, so add-br returns once eswitchd has applied the bridge.
    ovn.eswitchd(H, None);

    // Two VMs, the switch's ends in this namespace; each veth stands in
    // for VF n-1's representor, and says so in other_config (a ConnectX
    // representor's netdev says it itself).
    let vms = ovn.local_vms(H, 2);

    // eswitchd gave each its OpenFlow port and wrote it back.
    for vm in &vms {
        let ofport = ovn.vsctl(H, &["get", "Interface", &vm.port, "ofport"]);
        assert!(
            ofport.trim().parse::<u32>().is_ok_and(|p| p > 0),
            "{}: ofport {ofport:?}",
            vm.port
        );
    }

    // The `system` datapath says what eswitch does (ovn-controller reads
    // it), and only that.
    let caps = ovn.vsctl(H, &["--columns=capabilities", "list", "Datapath"]);
    for key in [
        "ct_flush=\"true\"",
        "dp_hash_l4_sym_support=\"true\"",
        "recirc=\"true\"",
        "check_pkt_len=\"true\"",
    ] {
        assert!(caps.contains(key), "Datapath capabilities: {caps}");
    }
    assert!(!caps.contains("ct_zero_snat"), "{caps}");
    assert!(ovn
        .vsctl(H, &["get", "Open_vSwitch", ".", "datapaths"])
        .contains("system"));

    // The logical network.
    ovn.nbctl(&["ls-add", "sw0"]);
    for n in 1..=2 {
        let lsp = format!("vm{n}");
        let addr = format!("02:00:00:00:00:0{n} 198.18.0.{n}");
        ovn.nbctl(&["lsp-add", "sw0", &lsp]);
        ovn.nbctl(&["lsp-set-addresses", &lsp, &addr]);
        ovn.nbctl(&["lsp-set-port-security", &lsp, &addr]);
    }
    // A security group: out, anything (and its replies); in, ICMP, SSH,
    // and two web ports from an address set (which OVN compiles to
    // conjunctive flows: a clause for the sources, one for the ports);
    // the rest dropped.
    ovn.nbctl(&[
        "create",
        "Address_Set",
        "name=web",
        "addresses=\"198.18.0.1\",\"198.18.0.9\"",
    ]);
    for (dir, prio, m, verdict) in [
        ("from-lport", "1002", "ip4", "allow-related"),
        ("to-lport", "1002", "ip4 && icmp4", "allow-related"),
        ("to-lport", "1002", "ip4 && tcp.dst == 22", "allow-related"),
        (
            "to-lport",
            "1002",
            "ip4.src == $web && tcp.dst == {8080, 8443}",
            "allow-related",
        ),
        ("to-lport", "1000", "ip4", "drop"),
    ] {
        ovn.nbctl(&["acl-add", "sw0", dir, prio, m, verdict]);
    }

    // Nothing forwards before ovn-controller programs the switch.
    assert!(
        !pings(&vms[0].ns, "198.18.0.2"),
        "vm1 pings vm2 with no flows"
    );
    // ovn-controller, and the time to the first ping answered.
    let started = Instant::now();
    ovn.controller(H);
    let (vm1, vm2) = (vms[0].ns.as_str(), vms[1].ns.as_str());
    // Tried every 0.1 s: the figure is as fine as that.
    let first = wait_for(Duration::from_secs(30), || {
        pings_within(vm1, "198.18.0.2", "0.1")
    });
    assert!(
        first.is_some(),
        "{T}: vm1 never pinged vm2 ({})",
        ovn.dir.display()
    );
    println!(
        "bench: ovn.first_ping_s {:.3} s",
        started.elapsed().as_secs_f64()
    );

    // The security group.
    assert!(
        tcp_talks(vm1, vm2, "198.18.0.2", 22),
        "TCP to port 22 is allowed"
    );
    assert!(
        !tcp_talks(vm1, vm2, "198.18.0.2", 80),
        "TCP to port 80 is dropped"
    );
    assert!(
        tcp_talks(vm1, vm2, "198.18.0.2", 8443),
        "TCP from the address set to a port of the set is allowed"
    );
    let flows = ovn.ofctl(H, &["dump-flows"]);
    assert!(
        flows.contains("conjunction(") && flows.contains("conj_id="),
        "the address set's ACL is conjunctive flows:\n{flows}"
    );
    assert!(pings(vm2, "198.18.0.1"), "vm2 pings vm1 back");

    // A port deleted stops forwarding; added back, it forwards again.
    ovn.nbctl(&["lsp-del", "vm2"]);
    assert!(
        wait_for(Duration::from_secs(10), || !pings(vm1, "198.18.0.2")).is_some(),
        "vm2 deleted from the northbound database still answers"
    );
    ovn.nbctl(&["lsp-add", "sw0", "vm2"]);
    ovn.nbctl(&["lsp-set-addresses", "vm2", "02:00:00:00:00:02 198.18.0.2"]);
    let back = wait_for(Duration::from_secs(20), || pings(vm1, "198.18.0.2"));
    assert!(back.is_some(), "vm2 added back does not answer");

    // OVN's own DHCP server: the DISCOVER is paused in the pipeline
    // (controller(pause)), ovn-controller writes the OFFER into it and
    // sends it back (NXT_RESUME), and the pipeline goes on to vm1.
    ovn.nbctl(&["dhcp-options-create", "198.18.0.0/24"]);
    let dhcp = ovn.nbctl(&[
        "--bare",
        "--columns=_uuid",
        "find",
        "DHCP_Options",
        "cidr=\"198.18.0.0/24\"",
    ]);
    let dhcp = dhcp.trim().to_string();
    ovn.nbctl(&[
        "dhcp-options-set-options",
        &dhcp,
        "lease_time=3600",
        "router=198.18.0.254",
        "server_id=198.18.0.253",
        "server_mac=02:00:00:00:ff:fd",
    ]);
    ovn.nbctl(&["lsp-set-dhcpv4-options", "vm1", &dhcp]);
    let offer = wait_for(Duration::from_secs(10), || {
        run(
            "ip",
            &[
                "netns",
                "exec",
                vm1,
                "python3",
                "-c",
                DHCP_DISCOVER,
                "02:00:00:00:00:01",
            ],
        )
        .is_ok_and(|o| o.trim() == "offer 198.18.0.1 router 198.18.0.254")
    });
    assert!(
        offer.is_some(),
        "{T}: no DHCP offer of 198.18.0.1 through NXT_RESUME ({})",
        ovn.dir.display()
    );

    // Everything ovn-controller sent was taken: no OpenFlow error, no
    // reconnect.
    ovn.assert_controller_clean(&format!("{H}/ovn-controller"));

    // `bench: ovn.hw_pct`: a steady TCP stream from vm1 to vm2 (port 22,
    // which the ACLs allow and conntrack follows), through OVN's pipeline
    // of both logical switch directions and both conntrack zones.
    let pct = stream_hw_pct(&ovn, &[H], (vm1, vm2), "198.18.0.2", 22);
    println!("bench: ovn.hw_pct {pct:.1} %");
    if pct < 95.0 {
        ovn.show_offload(H);
    }
    // Interface.statistics, as ovs-vswitchd writes them (every 5 s): the
    // stream's packets, the device's and software's together.
    let port = vms[0].port.clone();
    let counted = wait_for(Duration::from_secs(8), || {
        let rx = ovn.vsctl(H, &["get", "Interface", &port, "statistics:rx_packets"]);
        rx.trim().parse::<u64>().is_ok_and(|n| n > 1000)
    });
    assert!(
        counted.is_some(),
        "{T}: {port}: statistics {}",
        ovn.vsctl(H, &["get", "Interface", &port, "statistics"])
    );
    bundle_figure(&ovn);
}

/// A DHCPDISCOVER from `eth0` with the MAC given as the argument, on a
/// raw socket (no DHCP client in the namespace); prints `offer YIADDR
/// router R` for the first DHCPOFFER that comes back within a second.
const DHCP_DISCOVER: &str = r#"
import socket, struct, sys, time
mac = bytes.fromhex(sys.argv[1].replace(":", ""))
xid = 0x12345678
zero4 = bytes(4)
opts = bytes([53, 1, 1, 255])
bootp = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 0, xid, 0, 0x8000,
                    zero4, zero4, zero4, zero4, mac + bytes(10),
                    bytes(64), bytes(128)) + bytes([99, 130, 83, 99]) + opts
udp = struct.pack("!HHHH", 68, 67, 8 + len(bootp), 0) + bootp
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                 zero4, bytes([255] * 4))
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
frame = bytes([255] * 6) + mac + bytes([8, 0]) + ip + udp
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(("eth0", 0))
s.settimeout(0.2)
s.send(frame)
end = time.time() + 1
while time.time() < end:
    try:
        d = s.recv(2048)
    except socket.timeout:
        continue
    l3 = d[14:]
    if len(l3) < 28 or l3[9] != 17:
        continue
    ihl = (l3[0] & 15) * 4
    sport, dport = struct.unpack("!HH", l3[ihl:ihl + 4])
    b = l3[ihl + 8:]
    if (sport, dport) != (67, 68) or len(b) < 240 or struct.unpack("!I", b[4:8])[0] != xid:
        continue
    yiaddr = socket.inet_ntoa(b[16:20])
    o, router, kind = b[240:], None, None
    while o and o[0] != 255:
        if o[0] == 0:
            o = o[1:]
            continue
        t, n = o[0], o[1]
        if t == 53:
            kind = o[2]
        if t == 3:
            router = socket.inet_ntoa(o[2:6])
        o = o[2 + n:]
    if kind == 2:
        print("offer", yiaddr, "router", router)
        sys.exit(0)
sys.exit(1)
"#;

/// `bench: ovn.bundle_flows_per_s`: OVN's table for 100 logical ports
/// (the two VMs and 98 ports bound to interfaces without a netdev),
/// dumped with `ovs-ofctl`, put back in one bundle by `ovs-ofctl -O
/// OpenFlow15 --bundle add-flows` (after `del-flows`), whose bytes are
/// then sent again; the median of 3.
fn bundle_figure(ovn: &Ovn) {
    let mut cmd: Vec<String> = Vec::new();
    for n in 3..=100 {
        let (lsp, iface) = (format!("p{n}"), format!("ovnlabp{n}"));
        let addr = format!("02:00:00:00:01:{:02x} 198.18.1.{n}", n);
        ovn.nbctl(&["lsp-add", "sw0", &lsp]);
        ovn.nbctl(&["lsp-set-addresses", &lsp, &addr]);
        for w in [
            "--",
            "add-port",
            "br-int",
            &iface,
            "--",
            "set",
            "Interface",
            &iface,
        ] {
            cmd.push(w.to_string());
        }
        cmd.push(format!("external_ids:iface-id={lsp}"));
    }
    let args: Vec<&str> = cmd.iter().map(String::as_str).skip(1).collect();
    ovn.vsctl(H, &args);
    let target = ovn.mgmt(H);
    let count = || -> usize {
        run(
            "ovs-ofctl",
            &["-O", "OpenFlow15", "dump-aggregate", &target],
        )
        .ok()
        .and_then(|o| {
            o.split("flow_count=")
                .nth(1)
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
    };
    // Settled: the same count for a second.
    let mut last = (0, Instant::now());
    let settled = wait_for(Duration::from_secs(60), || {
        let n = count();
        if n != last.0 {
            last = (n, Instant::now());
        }
        n > 0 && last.1.elapsed() >= Duration::from_secs(1)
    });
    assert!(settled.is_some(), "the flow count never settled");
    let flows = ovn.dir.join("ovn-flows.txt");
    let dump = run(
        "ovs-ofctl",
        &["-O", "OpenFlow15", "--no-stats", "dump-flows", &target],
    )
    .unwrap_or_else(|e| panic!("{T}: {e}"));
    let lines: Vec<&str> = dump.lines().filter(|l| l.contains("actions=")).collect();
    std::fs::write(&flows, lines.join("\n") + "\n").expect("flows file");
    let flows = flows.display().to_string();
    // What `ovs-ofctl --bundle add-flows` sends, recorded through a relay,
    // then sent again as it was on a connection of its own after
    // `del-flows`: the time from its first byte to the reply of the
    // barrier after the commit is the switch's (the client's start and
    // parsing are not in it).
    let relay = ovn.path("relay.sock");
    let rec = ovn.dir.join("rec");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/record-openflow.py");
    let sock = target.trim_start_matches("unix:").to_string();
    let mut recorder = Command::new("python3")
        .args([script, &relay, &sock])
        .arg(&rec)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{T}: relay: {e}"));
    assert!(
        wait_for(Duration::from_secs(5), || std::path::Path::new(&relay)
            .exists())
        .is_some(),
        "the relay never listened"
    );
    run("ovs-ofctl", &["-O", "OpenFlow15", "del-flows", &target]).expect("del-flows");
    let via = format!("unix:{relay}");
    run(
        "ovs-ofctl",
        &[
            "-O",
            "OpenFlow15",
            "--no-names",
            "--bundle",
            "add-flows",
            &via,
            &flows,
        ],
    )
    .unwrap_or_else(|e| panic!("{T}: OVN's flows put back: {e}"));
    assert_eq!(count(), lines.len(), "every flow of the bundle is in");
    let _ = recorder.kill();
    let _ = recorder.wait();
    let sent = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("c2s-01"))
        })
        .map(|p| std::fs::read(p).expect("recorded bytes"))
        .expect("the client's bytes");
    let mut rates = Vec::new();
    for _ in 0..3 {
        run("ovs-ofctl", &["-O", "OpenFlow15", "del-flows", &target]).expect("del-flows");
        let secs = replay(&sock, &sent);
        assert_eq!(
            count(),
            lines.len(),
            "every flow of the replayed bundle is in"
        );
        rates.push(lines.len() as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);
    println!("bench: ovn.table_flows {} flows", lines.len());
    println!("bench: ovn.bundle_flows_per_s {:.0} flows/s", rates[1]);
}

/// Sends `bytes` (a client's whole side of a session: HELLO, the
/// bundle's open and adds, a barrier, the commit) on a new connection to
/// `sock` and reads until the answer to its last message (the commit's
/// reply, once the flows are in); the seconds it took.
fn replay(sock: &str, bytes: &[u8]) -> f64 {
    use std::io::{Read, Write};
    // The xid of the last message.
    let mut at = 0;
    let mut last_xid = 0;
    while at + 8 <= bytes.len() {
        let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        last_xid = u32::from_be_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        at += len.max(8);
    }
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let t = Instant::now();
    let mut w = s.try_clone().expect("clone");
    let bytes = bytes.to_vec();
    let writer = std::thread::spawn(move || w.write_all(&bytes));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut errors = 0;
    'read: loop {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "the switch closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        while buf.len() >= 8 {
            let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
            if buf.len() < len {
                break;
            }
            let (ty, xid) = (buf[1], u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]));
            if ty == 1 {
                errors += 1;
            }
            buf.drain(..len);
            if xid == last_xid {
                break 'read;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    writer.join().expect("writer").expect("write");
    assert_eq!(
        errors, 0,
        "the switch answered the replayed bundle with errors"
    );
    secs
}

//! Driven by OVN, end to end on one host: Debian's own `ovsdb-server`
//! (the `Open_vSwitch`, northbound and southbound databases),
//! `ovn-northd` and `ovn-controller`, with `eswitchd run --ovsdb` as the
//! switch daemon (`ovs-vswitchd` is never started). Two VMs (network
//! namespaces, veth pairs) are the two ports of a logical switch made with
//! `ovn-nbctl`, with ACLs as a security group writes them (everything out
//! allowed and related, in: ICMP and TCP port 22; the rest dropped).
//!
//! Checked: the VMs ping and talk TCP on port 22, and on 8443 from an
//! address set (conjunctive flows); TCP to port 80 is dropped; a port
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
//! send with TX checksum offload off (as the other labs do): eswitch does
//! not yet complete a veth's partial checksums.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration::netns::run;

const T: &str = "ovn_controller_programs_eswitchd_through_ovsdb_and_openflow_1_5";

/// The private daemons and namespaces of one run; stopped and removed on
/// drop (daemons by the PIDs their pidfiles say, namespaces by name).
struct Ovn {
    dir: PathBuf,
    pidfiles: Vec<PathBuf>,
    children: Vec<Child>,
    namespaces: Vec<String>,
}

impl Drop for Ovn {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for p in self.pidfiles.iter().rev() {
            if let Ok(pid) = std::fs::read_to_string(p) {
                let _ = run("kill", &[pid.trim()]);
            }
        }
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
        if std::env::var_os("OVN_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Ovn {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn sock(&self, db: &str) -> String {
        format!("unix:{}", self.path(&format!("{db}.sock")))
    }

    /// A detached daemon whose pidfile is `name.pid`.
    fn daemon(&mut self, bin: &str, name: &str, args: &[String]) {
        let pid = self.dir.join(format!("{name}.pid"));
        let mut all = vec![
            "--detach".to_string(),
            "--no-chdir".to_string(),
            format!("--pidfile={}", pid.display()),
            format!("--log-file={}", self.path(&format!("{name}.log"))),
        ];
        all.extend_from_slice(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = Command::new(bin)
            .args(&all)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVN_RUNDIR", &self.dir)
            .output()
            .unwrap_or_else(|e| panic!("{T}: {bin}: {e}"));
        assert!(
            out.status.success(),
            "{T}: {bin}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.pidfiles.push(pid);
    }

    fn nbctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.sock("nb"));
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        run("ovn-nbctl", &all).unwrap_or_else(|e| panic!("{T}: {e}"))
    }

    /// `ovs-ofctl -O OpenFlow15 CMD br-int.mgmt ARGS...`.
    fn ofctl(&self, cmd: &[&str]) -> String {
        let target = format!("unix:{}", self.path("br-int.mgmt"));
        let (first, rest) = cmd.split_first().expect("a command");
        let mut all = vec!["-O", "OpenFlow15", first, target.as_str()];
        all.extend_from_slice(rest);
        run("ovs-ofctl", &all).unwrap_or_else(|e| panic!("{T}: {e}"))
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.sock("ovs"));
        let mut all = vec![db.as_str(), "--timeout=10"];
        all.extend_from_slice(args);
        run("ovs-vsctl", &all).unwrap_or_else(|e| panic!("{T}: {e}"))
    }
}

/// Whether `ns` pings `addr` within a second.
fn pings(ns: &str, addr: &str) -> bool {
    pings_within(ns, addr, "1")
}

/// Whether `ns` pings `addr` within `wait` seconds.
fn pings_within(ns: &str, addr: &str, wait: &str) -> bool {
    run(
        "ip",
        &["netns", "exec", ns, "ping", "-c", "1", "-W", wait, addr],
    )
    .is_ok()
}

/// Waits (at most `limit`) for `f`; how long it took.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A TCP connection from `client` to `addr:port` served in `server`: the
/// bytes came back (`false`: refused or dropped).
fn tcp_talks(client: &str, server: &str, addr: &str, port: u16) -> bool {
    let serve = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{addr}',{port}))\ns.listen(1)\ns.settimeout(4)\n\
         try:\n  c,_=s.accept()\n  c.sendall(c.recv(16))\n  c.close()\nexcept Exception:\n  pass\n"
    );
    let mut srv = Command::new("ip")
        .args(["netns", "exec", server, "python3", "-c", &serve])
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{T}: {e}"));
    std::thread::sleep(Duration::from_millis(300));
    let talk = format!(
        "import socket\ns=socket.create_connection(('{addr}',{port}),timeout=2)\n\
         s.sendall(b'hello')\nassert s.recv(16)==b'hello'\n"
    );
    let ok = run("ip", &["netns", "exec", client, "python3", "-c", &talk]).is_ok();
    let _ = srv.kill();
    let _ = srv.wait();
    ok
}

#[test]
fn ovn_controller_programs_eswitchd_through_ovsdb_and_openflow_1_5() {
    let tools = [
        "ip",
        "ethtool",
        "ping",
        "sysctl",
        "python3",
        "ovsdb-server",
        "ovsdb-tool",
        "ovs-vsctl",
        "ovn-northd",
        "ovn-controller",
        "ovn-nbctl",
    ];
    if !prereq::netns(T, &tools) {
        return;
    }
    let tag = format!("ovn{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("esw-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("lab directory");
    let mut ovn = Ovn {
        dir,
        pidfiles: Vec::new(),
        children: Vec::new(),
        namespaces: Vec::new(),
    };

    // The three databases, then northd.
    for (db, schema) in [
        ("ovs", "/usr/share/openvswitch/vswitch.ovsschema"),
        ("nb", "/usr/share/ovn/ovn-nb.ovsschema"),
        ("sb", "/usr/share/ovn/ovn-sb.ovsschema"),
    ] {
        let file = ovn.path(&format!("{db}.db"));
        run("ovsdb-tool", &["create", &file, schema]).unwrap_or_else(|e| panic!("{T}: {e}"));
        let args = vec![
            format!("--remote=punix:{}", ovn.path(&format!("{db}.sock"))),
            format!("--unixctl={}", ovn.path(&format!("{db}-server.ctl"))),
            file,
        ];
        ovn.daemon("ovsdb-server", &format!("{db}-server"), &args);
    }
    ovn.vsctl(&["--no-wait", "init"]);
    let sb = ovn.sock("sb");
    ovn.vsctl(&[
        "--no-wait",
        "set",
        "Open_vSwitch",
        ".",
        "external_ids:system-id=esw-host1",
        &format!("external_ids:ovn-remote={sb}"),
        "external_ids:ovn-encap-type=geneve",
        "external_ids:ovn-encap-ip=198.19.0.1",
    ]);
    let northd = vec![
        format!("--ovnnb-db={}", ovn.sock("nb")),
        format!("--ovnsb-db={sb}"),
        format!("--unixctl={}", ovn.path("northd.ctl")),
    ];
    ovn.daemon("ovn-northd", "northd", &northd);

    // The switch daemon, following the database.
    let cfg = ovn.dir.join("eswitch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[backend]\nkind = \"sim\"\n\n[datapath]\nport_type = \"af_packet\"\n\n\
             [ovsdb]\nremote = \"{}\"\nbridge = \"br-int\"\nrundir = \"{}\"\n",
            ovn.sock("ovs"),
            ovn.dir.display()
        ),
    )
    .expect("config");
    let log = std::fs::File::create(ovn.dir.join("eswitchd.log")).expect("log");
    let esw = Command::new(env!("CARGO_BIN_EXE_eswitchd"))
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--socket")
        .arg(ovn.dir.join("esw.ctl"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{T}: eswitchd: {e}"));
    ovn.children.push(esw);
    // `ovs-vsctl` waits for cur_cfg: it returns once eswitchd has applied
    // the bridge.
    ovn.vsctl(&[
        "--may-exist",
        "add-br",
        "br-int",
        "--",
        "set",
        "Bridge",
        "br-int",
        "fail_mode=secure",
    ]);

    // Two VMs: a veth each, the switch's end in this namespace.
    let mut vms = Vec::new();
    for n in 1..=2u8 {
        let ns = format!("{tag}-vm{n}");
        let host = format!("{tag}v{n}");
        run("ip", &["netns", "add", &ns]).unwrap_or_else(|e| panic!("{T}: {e}"));
        ovn.namespaces.push(ns.clone());
        let steps: [&[&str]; 8] = [
            &[
                "link", "add", &host, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
            &[
                "-n",
                &ns,
                "link",
                "set",
                "eth0",
                "address",
                &format!("02:00:00:00:00:0{n}"),
            ],
            &[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("198.18.0.{n}/24"),
                "dev",
                "eth0",
            ],
            &["-n", &ns, "link", "set", "eth0", "up"],
            &["-n", &ns, "link", "set", "lo", "up"],
            &["link", "set", &host, "up"],
            &["netns", "exec", &ns, "ethtool", "-K", "eth0", "tx", "off"],
            // ARP asked again every 0.05 s, not every second: the first
            // ping's time is the switch's, not the kernel's retry timer.
            &[
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv4.neigh.eth0.retrans_time_ms=50",
            ],
        ];
        for s in steps {
            run("ip", s).unwrap_or_else(|e| panic!("{T}: {e}"));
        }
        let lsp = format!("vm{n}");
        // The veth stands in for VF n-1's representor: it says so in
        // other_config (a ConnectX representor's netdev says it itself).
        ovn.vsctl(&[
            "add-port",
            "br-int",
            &host,
            "--",
            "set",
            "Interface",
            &host,
            &format!("external_ids:iface-id={lsp}"),
            &format!("other_config:eswitch-vport=vf{}", n - 1),
        ]);
        vms.push((ns, host, lsp));
    }
    // eswitchd gave each its OpenFlow port and wrote it back.
    for (_, host, _) in &vms {
        let ofport = ovn.vsctl(&["get", "Interface", host, "ofport"]);
        assert!(
            ofport.trim().parse::<u32>().is_ok_and(|p| p > 0),
            "{host}: ofport {ofport:?}"
        );
    }

    // The `system` datapath says what eswitch does (ovn-controller reads
    // it), and only that.
    let caps = ovn.vsctl(&["--columns=capabilities", "list", "Datapath"]);
    for key in [
        "ct_flush=\"true\"",
        "dp_hash_l4_sym_support=\"true\"",
        "recirc=\"true\"",
    ] {
        assert!(caps.contains(key), "Datapath capabilities: {caps}");
    }
    assert!(!caps.contains("check_pkt_len"), "{caps}");
    assert!(ovn
        .vsctl(&["get", "Open_vSwitch", ".", "datapaths"])
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
        !pings(&vms[0].0, "198.18.0.2"),
        "vm1 pings vm2 with no flows"
    );
    // ovn-controller, and the time to the first ping answered.
    let started = Instant::now();
    let db = ovn.sock("ovs");
    ovn.daemon("ovn-controller", "ovn-controller", &[db]);
    let (vm1, vm2) = (&vms[0].0, &vms[1].0);
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
    let flows = ovn.ofctl(&["dump-flows"]);
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

    // Everything ovn-controller sent was taken: no OpenFlow error, no
    // reconnect.
    let log = std::fs::read_to_string(ovn.path("ovn-controller.log")).unwrap_or_default();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("OpenFlow error"))
        .collect();
    assert!(errors.is_empty(), "ovn-controller: {errors:#?}");
    let drops = log
        .lines()
        .filter(|l| {
            l.contains("br-int.mgmt")
                && (l.contains("disconnect") || l.contains("connection dropped"))
        })
        .count();
    assert_eq!(drops, 0, "ovn-controller reconnected:\n{log}");

    hw_figure(&ovn, vm1, vm2);
    bundle_figure(&ovn);
}

/// `eswitchctl --json ARGS` against the lab's eswitchd.
fn esw_ctl(ovn: &Ovn, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_eswitchctl"))
        .arg("--socket")
        .arg(ovn.dir.join("esw.ctl"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{T}: eswitchctl: {e}"));
    assert!(
        out.status.success(),
        "{T}: eswitchctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{T}: {e}"))
}

/// (packets the sim FDB forwarded, packets software forwarded) so far.
fn handled(ovn: &Ovn) -> (u64, u64) {
    let s = esw_ctl(ovn, &["stats"]);
    let n = |k: &str| {
        s[k].as_u64()
            .unwrap_or_else(|| panic!("{T}: stats.{k}: {s}"))
    };
    (n("hw_handled"), n("sw_handled"))
}

/// `bench: ovn.hw_pct`: a steady TCP stream from vm1 to vm2 (port 22,
/// which the ACLs allow and conntrack follows), through OVN's pipeline of
/// both logical switch directions and both conntrack zones: the share of
/// its packets (both directions) the sim FDB forwarded, counted from 1 s
/// into the stream (the connection set up and its flows offloaded) to its
/// end 3 s later; the median of 3 streams.
fn hw_figure(ovn: &Ovn, client: &str, server: &str) {
    let serve =
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                 s.bind(('198.18.0.2',22))\ns.listen(1)\ns.settimeout(8)\n\
                 c,_=s.accept()\nc.settimeout(8)\nn=0\n\
                 while True:\n  d=c.recv(65536)\n  if not d: break\n  n+=len(d)\nprint(n)\n";
    // Small writes, one segment each (TCP_NODELAY), paced: a stream of
    // packets, not of the few large segments a bulk send makes.
    let talk = "import socket,time\ns=socket.create_connection(('198.18.0.2',22),timeout=4)\n\
                s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n\
                end=time.time()+4.2\nb=b'x'*200\n\
                while time.time()<end:\n  s.sendall(b)\n  time.sleep(0.0005)\ns.close()\n";
    let mut pcts = Vec::new();
    for _ in 0..3 {
        let srv = Command::new("ip")
            .args(["netns", "exec", server, "python3", "-c", serve])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{T}: {e}"));
        std::thread::sleep(Duration::from_millis(300));
        let mut cli = Command::new("ip")
            .args(["netns", "exec", client, "python3", "-c", talk])
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{T}: {e}"));
        std::thread::sleep(Duration::from_secs(1));
        let (hw0, sw0) = handled(ovn);
        std::thread::sleep(Duration::from_secs(3));
        let (hw1, sw1) = handled(ovn);
        let sent = cli.wait().map(|s| s.success()).unwrap_or(false);
        let got = srv.wait_with_output().map(|o| o.stdout).unwrap_or_default();
        let bytes: u64 = String::from_utf8_lossy(&got).trim().parse().unwrap_or(0);
        assert!(
            sent && bytes > 0,
            "{T}: the TCP stream failed ({bytes} bytes)"
        );
        let (hw, sw) = (hw1 - hw0, sw1 - sw0);
        assert!(hw + sw > 1000, "{T}: only {} packets in 3 s", hw + sw);
        pcts.push(100.0 * hw as f64 / (hw + sw) as f64);
    }
    pcts.sort_by(f64::total_cmp);
    println!("bench: ovn.hw_pct {:.1} % (runs {pcts:?})", pcts[1]);
    if pcts[1] < 95.0 {
        // Why the rest stayed in software: each megaflow's reason.
        let flows = esw_ctl(ovn, &["dump-flows"]);
        for f in flows["flows"].as_array().into_iter().flatten() {
            eprintln!(
                "{T}: megaflow {} actions={} offloaded={} packets={}",
                f["match"], f["actions"], f["offloaded"], f["packets"]
            );
        }
    }
}

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
    ovn.vsctl(&args);
    let target = format!("unix:{}", ovn.path("br-int.mgmt"));
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

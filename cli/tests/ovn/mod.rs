//! The private OVN lab the OVN tests share: Debian's `ovsdb-server`
//! (the central northbound and southbound databases, and each host's
//! `Open_vSwitch` database), `ovn-northd`, and per host an `eswitchd run
//! --ovsdb` (in the host's network namespace, when it has one) with its own
//! `ovn-controller`; VMs are network namespaces on veth pairs whose switch
//! ends stand in for VF representors. Everything is under one directory
//! and stopped (daemons by the PIDs their pidfiles say, eswitchd by its
//! child handle) and removed (namespaces by name) on drop.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration::netns::run;

/// What the OVN labs run.
const TOOLS: [&str; 11] = [
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

/// Whether `test` can run here (root, network namespaces, the tools);
/// prints `SKIP` and the reason otherwise.
pub fn can_run(test: &str) -> bool {
    prereq::netns(test, &TOOLS)
}

/// One run's daemons, namespaces and directory.
pub struct Ovn {
    /// The test's name, for panics.
    pub test: &'static str,
    pub dir: PathBuf,
    /// A prefix unique to the run for namespaces and interfaces.
    pub tag: String,
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

/// A VM: its namespace, and the switch's end of its veth.
pub struct Vm {
    pub ns: String,
    pub port: String,
}

impl Ovn {
    /// An empty lab for `test`, its directory `/tmp/esw-<tag>`.
    pub fn new(test: &'static str, prefix: &str) -> Ovn {
        let tag = format!("{prefix}{}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("esw-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("lab directory");
        Ovn {
            test,
            dir,
            tag,
            pidfiles: Vec::new(),
            children: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `unix:` path of database `db` (`nb`, `sb`, or `HOST/ovs`).
    pub fn sock(&self, db: &str) -> String {
        format!("unix:{}", self.path(&format!("{db}.sock")))
    }

    /// A detached daemon whose pidfile is `name.pid` and log `name.log`,
    /// its run directory (OVS_RUNDIR, OVN_RUNDIR) `rundir` under the lab.
    pub fn daemon(&mut self, bin: &str, name: &str, rundir: &str, args: &[String]) {
        let pid = self.dir.join(format!("{name}.pid"));
        let mut all = vec![
            "--detach".to_string(),
            "--no-chdir".to_string(),
            format!("--pidfile={}", pid.display()),
            format!("--log-file={}", self.path(&format!("{name}.log"))),
        ];
        all.extend_from_slice(args);
        let out = Command::new(bin)
            .args(&all)
            .env("OVS_RUNDIR", self.dir.join(rundir))
            .env("OVN_RUNDIR", self.dir.join(rundir))
            .output()
            .unwrap_or_else(|e| panic!("{}: {bin}: {e}", self.test));
        assert!(
            out.status.success(),
            "{}: {bin}: {}",
            self.test,
            String::from_utf8_lossy(&out.stderr)
        );
        self.pidfiles.push(pid);
    }

    /// A database server for `db` (a name under the lab) with `schema`.
    fn database(&mut self, db: &str, schema: &str) {
        let file = self.path(&format!("{db}.db"));
        run("ovsdb-tool", &["create", &file, schema])
            .unwrap_or_else(|e| panic!("{}: {e}", self.test));
        let args = vec![
            format!("--remote=punix:{}", self.path(&format!("{db}.sock"))),
            format!("--unixctl={}", self.path(&format!("{db}-server.ctl"))),
            file,
        ];
        self.daemon("ovsdb-server", &format!("{db}-server"), ".", &args);
    }

    /// The northbound and southbound databases and `ovn-northd`.
    pub fn central(&mut self) {
        self.database("nb", "/usr/share/ovn/ovn-nb.ovsschema");
        self.database("sb", "/usr/share/ovn/ovn-sb.ovsschema");
        let northd = vec![
            format!("--ovnnb-db={}", self.sock("nb")),
            format!("--ovnsb-db={}", self.sock("sb")),
            format!("--unixctl={}", self.path("northd.ctl")),
        ];
        self.daemon("ovn-northd", "northd", ".", &northd);
    }

    /// Host `host`'s `Open_vSwitch` database, its chassis `host` with
    /// Geneve endpoint `encap_ip`.
    pub fn host_db(&mut self, host: &str, encap_ip: &str) {
        std::fs::create_dir_all(self.dir.join(host)).expect("host directory");
        self.database(
            &format!("{host}/ovs"),
            "/usr/share/openvswitch/vswitch.ovsschema",
        );
        self.vsctl(host, &["--no-wait", "init"]);
        let sb = self.sock("sb");
        self.vsctl(
            host,
            &[
                "--no-wait",
                "set",
                "Open_vSwitch",
                ".",
                &format!("external_ids:system-id=esw-{host}"),
                &format!("external_ids:ovn-remote={sb}"),
                "external_ids:ovn-encap-type=geneve",
                &format!("external_ids:ovn-encap-ip={encap_ip}"),
            ],
        );
    }

    /// Host `host`'s eswitchd (in network namespace `netns`, if given),
    /// following its database, with bridge `br-int` (fail_mode secure)
    /// made through `ovs-vsctl`, which returns once eswitchd applied it.
    pub fn eswitchd(&mut self, host: &str, netns: Option<&str>) {
        let cfg = self.dir.join(host).join("eswitch.toml");
        std::fs::write(
            &cfg,
            format!(
                "[backend]\nkind = \"sim\"\n\n[datapath]\nport_type = \"af_packet\"\n\n\
                 [ovsdb]\nremote = \"{}\"\nbridge = \"br-int\"\nrundir = \"{}\"\n",
                self.sock(&format!("{host}/ovs")),
                self.dir.join(host).display()
            ),
        )
        .expect("config");
        let log = std::fs::File::create(self.dir.join(host).join("eswitchd.log")).expect("log");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_eswitchd")]);
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_eswitchd")),
        };
        let esw = cmd
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--socket")
            .arg(self.dir.join(host).join("esw.ctl"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: eswitchd: {e}", self.test));
        self.children.push(esw);
        self.vsctl(
            host,
            &[
                "--may-exist",
                "add-br",
                "br-int",
                "--",
                "set",
                "Bridge",
                "br-int",
                "fail_mode=secure",
            ],
        );
    }

    /// Host `host`'s `ovn-controller`.
    pub fn controller(&mut self, host: &str) {
        let db = self.sock(&format!("{host}/ovs"));
        self.daemon(
            "ovn-controller",
            &format!("{host}/ovn-controller"),
            host,
            &[db],
        );
    }

    pub fn nbctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.sock("nb"));
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        run("ovn-nbctl", &all).unwrap_or_else(|e| panic!("{}: {e}", self.test))
    }

    /// `ovs-vsctl` on host `host`'s database.
    pub fn vsctl(&self, host: &str, args: &[&str]) -> String {
        let db = format!("--db={}", self.sock(&format!("{host}/ovs")));
        let mut all = vec![db.as_str(), "--timeout=10"];
        all.extend_from_slice(args);
        run("ovs-vsctl", &all).unwrap_or_else(|e| panic!("{}: {e}", self.test))
    }

    /// Host `host`'s `br-int.mgmt`, as an OpenFlow target.
    pub fn mgmt(&self, host: &str) -> String {
        format!("unix:{}", self.path(&format!("{host}/br-int.mgmt")))
    }

    /// `ovs-ofctl -O OpenFlow15 CMD <host's br-int.mgmt> ARGS...`.
    pub fn ofctl(&self, host: &str, cmd: &[&str]) -> String {
        let target = self.mgmt(host);
        let (first, rest) = cmd.split_first().expect("a command");
        let mut all = vec!["-O", "OpenFlow15", first, target.as_str()];
        all.extend_from_slice(rest);
        run("ovs-ofctl", &all).unwrap_or_else(|e| panic!("{}: {e}", self.test))
    }

    /// A network namespace of this run, removed on drop.
    pub fn netns(&mut self, name: &str) -> String {
        let ns = format!("{}-{name}", self.tag);
        run("ip", &["netns", "add", &ns]).unwrap_or_else(|e| panic!("{}: {e}", self.test));
        self.namespaces.push(ns.clone());
        run("ip", &["-n", &ns, "link", "set", "lo", "up"]).expect("lo up");
        ns
    }

    /// VM `name`: a namespace whose `eth0` (MAC `mac`, address `cidr`,
    /// default route by `gw`, MTU 1400 so that Geneve's overhead fits the
    /// underlay's 1500) is a veth whose other end is `port` in `host_ns`
    /// (the root namespace if `None`). It sends with TX checksum offload
    /// on, as a VM's virtio or a container's veth does (its TCP and UDP
    /// checksums are partial: eswitch completes them on receive), and asks
    /// ARP again every 50 ms.
    pub fn vm(
        &mut self,
        name: &str,
        host_ns: Option<&str>,
        mac: &str,
        cidr: &str,
        gw: Option<&str>,
    ) -> Vm {
        let ns = self.netns(name);
        let port = format!("{}{name}", self.tag);
        let mut add = vec!["link", "add", &port];
        if let Some(h) = host_ns {
            add.extend(["netns", h]);
        }
        add.extend(["type", "veth", "peer", "name", "eth0", "netns", &ns]);
        run("ip", &add).unwrap_or_else(|e| panic!("{}: {e}", self.test));
        let mut steps: Vec<Vec<&str>> = vec![
            vec![
                "-n", &ns, "link", "set", "eth0", "address", mac, "mtu", "1400",
            ],
            vec!["-n", &ns, "addr", "add", cidr, "dev", "eth0"],
            vec!["-n", &ns, "link", "set", "eth0", "up"],
            vec![
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv4.neigh.eth0.retrans_time_ms=50",
            ],
        ];
        if let Some(g) = gw {
            steps.push(vec!["-n", &ns, "route", "add", "default", "via", g]);
        }
        match host_ns {
            Some(h) => steps.push(vec!["-n", h, "link", "set", &port, "up"]),
            None => steps.push(vec!["link", "set", &port, "up"]),
        }
        for s in steps {
            run("ip", &s).unwrap_or_else(|e| panic!("{}: {e}", self.test));
        }
        Vm { ns, port }
    }

    /// Plugs `vm` into host `host`'s br-int as logical port `lsp`, its
    /// veth standing in for VF `vf`'s representor.
    /// VMs `vm1`..`vmN` on one subnet (`198.18.0.n/24`, MAC
    /// `02:00:00:00:00:0n`), each plugged into `host`'s br-int as logical
    /// port `vmN` on VF n-1.
    pub fn local_vms(&mut self, host: &str, n: u32) -> Vec<Vm> {
        (1..=n)
            .map(|i| {
                let name = format!("vm{i}");
                let vm = self.vm(
                    &name,
                    None,
                    &format!("02:00:00:00:00:0{i}"),
                    &format!("198.18.0.{i}/24"),
                    None,
                );
                self.plug(host, &vm, &name, i - 1);
                vm
            })
            .collect()
    }

    pub fn plug(&self, host: &str, vm: &Vm, lsp: &str, vf: u32) {
        self.vsctl(
            host,
            &[
                "add-port",
                "br-int",
                &vm.port,
                "--",
                "set",
                "Interface",
                &vm.port,
                &format!("external_ids:iface-id={lsp}"),
                &format!("other_config:eswitch-vport=vf{vf}"),
            ],
        );
    }

    /// `eswitchctl --json ARGS` against host `host`'s eswitchd.
    pub fn esw_ctl(&self, host: &str, args: &[&str]) -> serde_json::Value {
        let sock = self.path(&format!("{host}/esw.ctl"));
        let mut all = vec!["--socket", sock.as_str(), "--json"];
        all.extend_from_slice(args);
        let out = run(env!("CARGO_BIN_EXE_eswitchctl"), &all)
            .unwrap_or_else(|e| panic!("{}: eswitchctl {args:?}: {e}", self.test));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}", self.test))
    }

    /// (packets the sim FDB forwarded, packets software forwarded) so far
    /// on host `host`.
    pub fn handled(&self, host: &str) -> (u64, u64) {
        let s = self.esw_ctl(host, &["stats"]);
        let n = |k: &str| {
            s[k].as_u64()
                .unwrap_or_else(|| panic!("{}: stats.{k}: {s}", self.test))
        };
        (n("hw_handled"), n("sw_handled"))
    }

    /// ovn-controller `name` (a pidfile/log name under the lab) logged no
    /// OpenFlow error and never lost its connection to `mgmt`.
    pub fn assert_controller_clean(&self, name: &str) {
        let log = std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("OpenFlow error"))
            .collect();
        assert!(errors.is_empty(), "{}: {name}: {errors:#?}", self.test);
        let drops = log
            .lines()
            .filter(|l| {
                l.contains("br-int.mgmt")
                    && (l.contains("disconnect") || l.contains("connection dropped"))
            })
            .count();
        assert_eq!(drops, 0, "{}: {name} reconnected:\n{log}", self.test);
    }

    /// Each megaflow of host `host` and whether the device has it, on
    /// stderr (why a share stayed in software).
    pub fn show_offload(&self, host: &str) {
        let flows = self.esw_ctl(host, &["dump-flows"]);
        for f in flows["flows"].as_array().into_iter().flatten() {
            eprintln!(
                "{}: {host}: megaflow {} actions={} offloaded={} packets={}",
                self.test, f["match"], f["actions"], f["offloaded"], f["packets"]
            );
        }
    }
}

/// Whether `ns` pings `addr` within a second.
pub fn pings(ns: &str, addr: &str) -> bool {
    pings_within(ns, addr, "1")
}

/// Whether `ns` pings `addr` within `wait` seconds.
pub fn pings_within(ns: &str, addr: &str, wait: &str) -> bool {
    run(
        "ip",
        &["netns", "exec", ns, "ping", "-c", "1", "-W", wait, addr],
    )
    .is_ok()
}

/// Waits (at most `limit`) for `f`; how long it took.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
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
pub fn tcp_talks(client: &str, server: &str, addr: &str, port: u16) -> bool {
    let serve = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{addr}',{port}))\ns.listen(1)\ns.settimeout(4)\n\
         try:\n  c,_=s.accept()\n  c.sendall(c.recv(16))\n  c.close()\nexcept Exception:\n  pass\n"
    );
    let mut srv = Command::new("ip")
        .args(["netns", "exec", server, "python3", "-c", &serve])
        .stdin(Stdio::null())
        .spawn()
        .expect("server");
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

/// The share (percent) of a steady TCP stream's packets, both ways, that
/// the sim FDBs of `hosts` forwarded: from `client` to `addr:port` served
/// in `server`, small paced writes (one segment each), counted from 1 s
/// into the stream (the connection set up and its flows offloaded) for
/// 3 s; the median of 3 streams.
pub fn stream_hw_pct(
    ovn: &Ovn,
    hosts: &[&str],
    (client, server): (&str, &str),
    addr: &str,
    port: u16,
) -> f64 {
    let serve = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{addr}',{port}))\ns.listen(1)\ns.settimeout(8)\n\
         c,_=s.accept()\nc.settimeout(8)\nn=0\n\
         while True:\n  d=c.recv(65536)\n  if not d: break\n  n+=len(d)\nprint(n)\n"
    );
    let talk = format!(
        "import socket,time\ns=socket.create_connection(('{addr}',{port}),timeout=4)\n\
         s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n\
         end=time.time()+4.2\nb=b'x'*200\n\
         while time.time()<end:\n  s.sendall(b)\n  time.sleep(0.0005)\ns.close()\n"
    );
    let total = |ovn: &Ovn| {
        hosts.iter().fold((0, 0), |(h, s), host| {
            let (a, b) = ovn.handled(host);
            (h + a, s + b)
        })
    };
    let mut pcts = Vec::new();
    for _ in 0..3 {
        let srv = Command::new("ip")
            .args(["netns", "exec", server, "python3", "-c", &serve])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("server");
        std::thread::sleep(Duration::from_millis(300));
        let mut cli = Command::new("ip")
            .args(["netns", "exec", client, "python3", "-c", &talk])
            .stdin(Stdio::null())
            .spawn()
            .expect("client");
        std::thread::sleep(Duration::from_secs(1));
        let (hw0, sw0) = total(ovn);
        std::thread::sleep(Duration::from_secs(3));
        let (hw1, sw1) = total(ovn);
        let sent = cli.wait().map(|s| s.success()).unwrap_or(false);
        let got = srv.wait_with_output().map(|o| o.stdout).unwrap_or_default();
        let bytes: u64 = String::from_utf8_lossy(&got).trim().parse().unwrap_or(0);
        assert!(
            sent && bytes > 0,
            "{}: the TCP stream to {addr}:{port} failed ({bytes} bytes)",
            ovn.test
        );
        let (hw, sw) = (hw1 - hw0, sw1 - sw0);
        assert!(
            hw + sw > 1000,
            "{}: only {} packets in 3 s",
            ovn.test,
            hw + sw
        );
        pcts.push(100.0 * hw as f64 / (hw + sw) as f64);
    }
    pcts.sort_by(f64::total_cmp);
    pcts[1]
}

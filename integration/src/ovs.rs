//! A private, throwaway Open vSwitch to ask which megaflow it would install.
//!
//! eswitch's wildcarding is compared against the real thing: [`Ovs::start`]
//! runs its own `ovsdb-server` and `ovs-vswitchd` (Debian bookworm ships
//! 3.1.0) from a fresh temporary directory, and [`Ovs::trace`] runs
//! `ovs-appctl ofproto/trace`, whose `Megaflow:` line is the match (flow +
//! wildcards) the translation un-wildcarded, i.e. the megaflow the datapath
//! would get.
//!
//! # The instance
//!
//! * Every file (database, sockets, pid files, logs) lives in one directory
//!   under the temp dir; every `ovs-*` command gets `OVS_RUNDIR`,
//!   `OVS_DBDIR`, `OVS_LOGDIR` and `OVS_SYSCONFDIR` pointing there and is
//!   given explicit socket paths, so nothing touches `/var/run/openvswitch`
//!   or a system OVS.
//! * `ovs-vswitchd` runs with `--enable-dummy=override --disable-system
//!   --disable-system-route`: no kernel module, no netlink, no host routes,
//!   and every netdev is a dummy. Without `override` the bridge's internal
//!   port of a `datapath_type=netdev` bridge is a real tap device named
//!   `br0` in the host namespace, which outlives the daemon and collides
//!   between concurrent instances.
//! * Bridge [`BRIDGE`] (`datapath_type=netdev`, `fail_mode=secure`, so the
//!   table starts empty instead of holding a hidden `NORMAL` flow) has dummy
//!   ports `p1`..`p4` with OpenFlow port numbers 1..4. The dummy datapath
//!   numbers a port after the digits in its name, so datapath port numbers
//!   (those printed in `Datapath actions:`) are 1..4 too, and `br0` is 100.
//!
//! * [`Ovs::start_in`] is the other kind: `ovs-vswitchd` inside a network
//!   namespace with real netdevs (userspace datapath, AF_PACKET, taps for
//!   internal ports, the namespace's routes for native tunnels) and no
//!   bridge, for a test to make it the far end of a tunnel.
//!
//! # Lifetime
//!
//! The daemons are children of this process, each started through
//! `setpriv --pdeathsig KILL` when `setpriv` exists (util-linux), so they die
//! even if the test process is killed before [`Drop`] runs. The death signal
//! fires when the *thread* that started them exits: create, use and drop an
//! [`Ovs`] on one thread. Dropping kills both daemons by PID, reaps them and
//! removes the directory (set `ESWITCH_KEEP_OVS=1` to keep it for
//! debugging); this also happens while unwinding from a panic and when
//! start-up fails half-way. Every wait is bounded: socket polls by
//! [`START_TIMEOUT`], each `ovs-*` client by its own `--timeout`.
//!
//! # Errors
//!
//! [`OvsError::Unavailable`] means the machine cannot run OVS (not root,
//! binaries or schema missing): a test prints `SKIP` and returns, see
//! [`Ovs::start_or_skip`]. [`OvsError::Failed`] means OVS is there but did
//! not do what was asked; it carries the command, its stderr and, for
//! start-up failures, the tail of the daemon log.
//!
//! Not thread-safe beyond what `&self` allows: concurrent calls on one
//! instance run concurrent `ovs-*` clients, which OVS serialises.

use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The bridge every instance creates.
pub const BRIDGE: &str = "br0";

/// Dummy ports of [`BRIDGE`]: `p<n>` has OpenFlow and datapath port `n`.
pub const PORTS: [u16; 4] = [1, 2, 3, 4];

/// Longest wait for a daemon's socket to appear.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// `--timeout` (seconds) given to every `ovs-vsctl`/`ovs-ofctl`/`ovs-appctl`.
const CLIENT_TIMEOUT: &str = "10";

const SCHEMA_DIRS: [&str; 2] = ["/usr/share/openvswitch", "/usr/local/share/openvswitch"];

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Why an [`Ovs`] could not be started or could not answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum OvsError {
    /// This machine cannot run OVS (not root, binaries or schema missing).
    /// Tests skip, printing the reason.
    Unavailable(String),
    /// OVS is installed but a daemon or a command failed.
    Failed(String),
}

impl fmt::Display for OvsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OvsError::Unavailable(why) => write!(f, "OVS unavailable: {why}"),
            OvsError::Failed(why) => write!(f, "OVS failed: {why}"),
        }
    }
}

impl std::error::Error for OvsError {}

/// One private `ovsdb-server` + `ovs-vswitchd` pair; all of it goes on drop.
pub struct Ovs {
    dir: PathBuf,
    bin: Binaries,
    /// The network namespace `ovs-vswitchd` runs in (`None`: this one,
    /// every netdev a dummy).
    netns: Option<String>,
    ovsdb: Option<Child>,
    vswitchd: Option<Child>,
    startup: Duration,
    files: AtomicU32,
}

impl Ovs {
    /// Starts an instance with [`BRIDGE`] and ports [`PORTS`] ready.
    pub fn start() -> Result<Ovs, OvsError> {
        let began = Instant::now();
        let mut ovs = Ovs::daemons(None)?;
        // Without --no-wait, ovs-vsctl returns once ovs-vswitchd has applied
        // the change, so the ports exist when this returns.
        let mut args: Vec<String> = [
            "add-br",
            BRIDGE,
            "--",
            "set",
            "Bridge",
            BRIDGE,
            "datapath_type=netdev",
            "fail_mode=secure",
        ]
        .map(String::from)
        .to_vec();
        for n in PORTS {
            let p = format!("p{n}");
            args.extend(["--".into(), "add-port".into(), BRIDGE.into(), p.clone()]);
            args.extend(["--".into(), "set".into(), "Interface".into(), p]);
            args.extend(["type=dummy".into(), format!("ofport_request={n}")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ovs.vsctl(&args)?;
        ovs.startup = began.elapsed();
        Ok(ovs)
    }

    /// Starts an instance whose `ovs-vswitchd` runs in the network
    /// namespace `netns` with real netdevs (the userspace datapath: no
    /// kernel module; AF_PACKET on the namespace's devices, tap devices
    /// for internal ports, the namespace's routes for native tunnels) and
    /// no bridge: a far end for tunnels. The taps go with the namespace.
    pub fn start_in(netns: &str) -> Result<Ovs, OvsError> {
        let began = Instant::now();
        let mut ovs = Ovs::daemons(Some(netns.to_string()))?;
        ovs.startup = began.elapsed();
        Ok(ovs)
    }

    /// `ovsdb-server` and `ovs-vswitchd` (in `netns`, or with dummy
    /// netdevs here) on a fresh database.
    fn daemons(netns: Option<String>) -> Result<Ovs, OvsError> {
        if !prereq::is_root() {
            return Err(OvsError::Unavailable(
                "needs root (ovs-vswitchd opens tap and netlink sockets)".into(),
            ));
        }
        let bin = Binaries::find()?;
        let mut ovs = Ovs {
            dir: unique_dir()?,
            bin,
            netns,
            ovsdb: None,
            vswitchd: None,
            startup: Duration::ZERO,
            files: AtomicU32::new(0),
        };
        // From here on, `ovs` cleans up whatever was started if `?` returns.
        let db = ovs.path("conf.db");
        let schema = ovs.bin.schema.display().to_string();
        ovs.run(&ovs.bin.ovsdb_tool, &["create", &db, &schema])?;

        let ovsdb_args = [
            db.clone(),
            format!("--remote=punix:{}", ovs.path("db.sock")),
            format!("--unixctl={}", ovs.path("ovsdb-server.ctl")),
            format!("--pidfile={}", ovs.path("ovsdb-server.pid")),
            format!("--log-file={}", ovs.path("ovsdb-server.log")),
            "-vconsole:warn".into(),
        ];
        let exe = ovs.bin.ovsdb_server.clone();
        ovs.ovsdb = Some(ovs.spawn_daemon(&exe, &ovsdb_args, "ovsdb-server")?);
        ovs.wait_for_socket("db.sock", "ovsdb-server")?;
        ovs.vsctl(&["--no-wait", "init"])?;

        let mut vswitchd_args = vec![format!("unix:{}", ovs.path("db.sock"))];
        if ovs.netns.is_none() {
            vswitchd_args.extend([
                "--enable-dummy=override".into(),
                "--disable-system-route".into(),
            ]);
        }
        vswitchd_args.extend([
            "--disable-system".into(),
            format!("--unixctl={}", ovs.path("ovs-vswitchd.ctl")),
            format!("--pidfile={}", ovs.path("ovs-vswitchd.pid")),
            format!("--log-file={}", ovs.path("ovs-vswitchd.log")),
            "-vconsole:warn".into(),
        ]);
        let exe = ovs.bin.vswitchd.clone();
        ovs.vswitchd = Some(ovs.spawn_daemon(&exe, &vswitchd_args, "ovs-vswitchd")?);
        ovs.wait_for_socket("ovs-vswitchd.ctl", "ovs-vswitchd")?;
        Ok(ovs)
    }

    /// [`Ovs::start`] for a test: prints `SKIP <test>: <reason>` and returns
    /// `None` when OVS cannot run here.
    ///
    /// # Panics
    /// When OVS is installed but fails to start: a broken install must fail
    /// the test, not skip it.
    pub fn start_or_skip(test: &str) -> Option<Ovs> {
        Ovs::or_skip(test, Ovs::start())
    }

    /// [`Ovs::start_in`] for a test, as [`Ovs::start_or_skip`].
    pub fn start_in_or_skip(test: &str, netns: &str) -> Option<Ovs> {
        Ovs::or_skip(test, Ovs::start_in(netns))
    }

    fn or_skip(test: &str, started: Result<Ovs, OvsError>) -> Option<Ovs> {
        match started {
            Ok(ovs) => Some(ovs),
            Err(OvsError::Unavailable(why)) => {
                prereq::skip(test, why);
                None
            }
            Err(e) => panic!("{test}: {e}"),
        }
    }

    /// The directory holding the database, sockets and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Time [`Ovs::start`] took, from the root check to a configured bridge.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// PIDs of the running daemons (`ovsdb-server`, `ovs-vswitchd`).
    pub fn pids(&self) -> Vec<u32> {
        [&self.ovsdb, &self.vswitchd]
            .into_iter()
            .flatten()
            .map(Child::id)
            .collect()
    }

    /// `ovs-vswitchd --version`, first line (e.g. `ovs-vswitchd (Open
    /// vSwitch) 3.1.0`).
    pub fn version(&self) -> Result<String, OvsError> {
        let out = self.run(&self.bin.vswitchd, &["--version"])?;
        Ok(out.lines().next().unwrap_or_default().to_owned())
    }

    /// Adds OpenFlow 1.3 flows in `ovs-ofctl` syntax, one per entry.
    pub fn add_flows(&self, flows: &[&str]) -> Result<(), OvsError> {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        let file = self.dir.join(format!("flows-{n}.txt"));
        let mut text = flows.join("\n");
        text.push('\n');
        fs::write(&file, text)
            .map_err(|e| OvsError::Failed(format!("write {}: {e}", file.display())))?;
        let file = file.display().to_string();
        self.ofctl(&["add-flows", &self.bridge_target(), &file])
            .map(drop)
    }

    /// Deletes every flow of every table.
    pub fn del_flows(&self) -> Result<(), OvsError> {
        self.ofctl(&["del-flows", &self.bridge_target()]).map(drop)
    }

    /// `ovs-ofctl dump-flows` output, for test logs.
    pub fn dump_flows(&self) -> Result<String, OvsError> {
        self.ofctl(&["dump-flows", &self.bridge_target()])
    }

    /// Traces a packet given in OpenFlow match syntax (e.g.
    /// `in_port=1,ip,nw_src=10.9.9.9`; unspecified fields are zero) through
    /// [`BRIDGE`] without sending it or installing anything.
    pub fn trace(&self, flow: &str) -> Result<Trace, OvsError> {
        let raw = self.appctl(&["ofproto/trace", BRIDGE, flow])?;
        Trace::parse(&raw).map_err(OvsError::Failed)
    }

    /// Hands a packet to dummy port `port` (e.g. `p1`) as if received. The
    /// packet is a datapath flow key, e.g. `in_port(1),eth(src=..,dst=..),
    /// eth_type(0x0800),ipv4(src=..,dst=..,proto=17,tos=0,ttl=64,frag=no),
    /// udp(src=1,dst=2)`. A miss installs a megaflow, see [`Ovs::dp_flows`];
    /// processing is asynchronous, so poll for it.
    pub fn receive(&self, port: &str, packet: &str) -> Result<(), OvsError> {
        self.appctl(&["netdev-dummy/receive", port, packet])
            .map(drop)
    }

    /// The megaflows installed in the datapath (`ovs-appctl dpif/dump-flows
    /// br0`), one line each, e.g. `recirc_id(0),in_port(1),packet_type(ns=0,
    /// id=0),eth_type(0x0800),ipv4(src=10.9.9.9/255.248.0.0,frag=no),
    /// packets:0, bytes:0, used:never, actions:2`.
    pub fn dp_flows(&self) -> Result<Vec<String>, OvsError> {
        let out = self.appctl(&["dpif/dump-flows", BRIDGE])?;
        Ok(out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Removes every datapath flow.
    pub fn del_dp_flows(&self) -> Result<(), OvsError> {
        self.appctl(&["dpctl/del-flows"]).map(drop)
    }

    /// Runs `ovs-appctl` against this instance's `ovs-vswitchd`.
    pub fn appctl(&self, args: &[&str]) -> Result<String, OvsError> {
        let target = self.path("ovs-vswitchd.ctl");
        let mut all = vec!["--timeout", CLIENT_TIMEOUT, "-t", &target];
        all.extend_from_slice(args);
        self.run(&self.bin.appctl, &all)
    }

    /// Runs `ovs-ofctl -O OpenFlow13` (the bridge is named by
    /// `unix:<dir>/br0.mgmt`, see [`Ovs::bridge_target`]).
    pub fn ofctl(&self, args: &[&str]) -> Result<String, OvsError> {
        let mut all = vec!["--timeout", CLIENT_TIMEOUT, "-O", "OpenFlow13"];
        all.extend_from_slice(args);
        self.run(&self.bin.ofctl, &all)
    }

    /// Runs `ovs-vsctl` against this instance's database.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, OvsError> {
        let db = format!("--db=unix:{}", self.path("db.sock"));
        let timeout = format!("--timeout={CLIENT_TIMEOUT}");
        let mut all = vec![db.as_str(), timeout.as_str()];
        all.extend_from_slice(args);
        self.run(&self.bin.vsctl, &all)
    }

    /// The `ovs-ofctl` target for [`BRIDGE`]: its management socket.
    pub fn bridge_target(&self) -> String {
        format!("unix:{}", self.path(&format!("{BRIDGE}.mgmt")))
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn command(&self, exe: &Path) -> Command {
        let mut cmd = Command::new(exe);
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            cmd.env(var, &self.dir);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs an `ovs-*` client to completion; stdout, or stderr as the error.
    fn run(&self, exe: &Path, args: &[&str]) -> Result<String, OvsError> {
        let out = self
            .command(exe)
            .args(args)
            .output()
            .map_err(|e| OvsError::Failed(format!("{}: {e}", exe.display())))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(OvsError::Failed(format!(
                "{} {}: {} ({})",
                exe.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            )))
        }
    }

    fn spawn_daemon(&self, exe: &Path, args: &[String], name: &str) -> Result<Child, OvsError> {
        let console = self.dir.join(format!("{name}.console"));
        let open = || {
            File::create(&console)
                .map_err(|e| OvsError::Failed(format!("create {}: {e}", console.display())))
        };
        let (stdout, stderr) = (open()?, open()?);
        // `ip netns exec` and `setpriv` exec what they run: the child's
        // PID is the daemon's.
        let mut argv: Vec<&std::ffi::OsStr> = Vec::new();
        if let Some(ns) = self.netns.as_ref().filter(|_| name == "ovs-vswitchd") {
            argv.extend(["ip", "netns", "exec", ns.as_str()].map(std::ffi::OsStr::new));
        }
        if let Some(setpriv) = &self.bin.setpriv {
            argv.push(setpriv.as_os_str());
            argv.extend(["--pdeathsig", "KILL"].map(std::ffi::OsStr::new));
        }
        argv.push(exe.as_os_str());
        let mut cmd = self.command(Path::new(argv[0]));
        cmd.args(&argv[1..]);
        cmd.args(args)
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| OvsError::Failed(format!("spawn {}: {e}", exe.display())))
    }

    /// Polls for `<dir>/<socket>`, failing early when the daemon exits.
    fn wait_for_socket(&mut self, socket: &str, daemon: &str) -> Result<(), OvsError> {
        let path = self.dir.join(socket);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if path.exists() {
                return Ok(());
            }
            let child = match daemon {
                "ovsdb-server" => self.ovsdb.as_mut(),
                _ => self.vswitchd.as_mut(),
            };
            if let Some(Ok(Some(status))) = child.map(Child::try_wait) {
                return Err(self.daemon_failure(daemon, &format!("exited with {status}")));
            }
            if Instant::now() >= deadline {
                return Err(
                    self.daemon_failure(daemon, &format!("no {socket} after {START_TIMEOUT:?}"))
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn daemon_failure(&self, daemon: &str, what: &str) -> OvsError {
        let mut msg = format!("{daemon} {what}");
        for file in [format!("{daemon}.console"), format!("{daemon}.log")] {
            if let Ok(text) = fs::read_to_string(self.dir.join(&file)) {
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(10)..];
                msg.push_str(&format!("\n--- {file} (tail)\n{}", tail.join("\n")));
            }
        }
        OvsError::Failed(msg)
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        // vswitchd first: it is the database's client. SIGKILL cannot be
        // ignored, so the waits are bounded; nothing outlives the process
        // because every netdev is a dummy.
        for child in [self.vswitchd.as_mut(), self.ovsdb.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        if std::env::var_os("ESWITCH_KEEP_OVS").is_some() {
            println!("ESWITCH_KEEP_OVS: kept {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// One `ofproto/trace` answer.
///
/// Real output of OVS 3.1.0 (`ovs-appctl ofproto/trace br0
/// 'in_port=1,ip,nw_src=10.9.9.9,nw_dst=1.2.3.4'` with flows
/// `priority=10,ip,nw_src=10.0.0.0/8,actions=output:2`,
/// `priority=20,ip,nw_src=10.1.2.0/24,actions=output:3` and
/// `priority=0,actions=drop`):
///
/// ```text
/// Flow: ip,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.9.9.9,nw_dst=1.2.3.4,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no
///
/// bridge("br0")
/// -------------
///  0. ip,nw_src=10.0.0.0/8, priority 10
///     output:2
///
/// Final flow: unchanged
/// Megaflow: recirc_id=0,eth,ip,in_port=1,nw_src=10.8.0.0/13,nw_frag=no
/// Datapath actions: 2
/// ```
///
/// The megaflow is in OpenFlow match syntax (`in_port` is the OpenFlow
/// port), the actions in datapath syntax (datapath port numbers, `drop`).
/// Besides the fields the rules needed, OVS always puts `recirc_id=0`,
/// `eth` (packet_type Ethernet), the `dl_type` (spelt `ip`, or `tcp` etc.
/// when `nw_proto` is exact too), `in_port` and, for IP, `nw_frag=no` (the
/// two fragment bits, exact) into the match.
///
/// With recirculation (`ct`, bonds) the text holds several passes; the
/// fields here are the first pass's, `raw` has the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The whole output.
    pub raw: String,
    /// The `Flow:` line: the packet as OVS understood it.
    pub flow: String,
    /// The `Megaflow:` line: the match the datapath flow would have.
    pub megaflow: String,
    /// The `Datapath actions:` line.
    pub datapath_actions: String,
}

impl Trace {
    /// Picks the `Flow:`, `Megaflow:` and `Datapath actions:` lines out of
    /// `ofproto/trace` output; an error (with the text) if one is missing.
    pub fn parse(raw: &str) -> Result<Trace, String> {
        let line = |prefix: &str| {
            raw.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|v| v.trim().to_owned())
                .ok_or_else(|| format!("no `{prefix}` line in ofproto/trace output:\n{raw}"))
        };
        Ok(Trace {
            raw: raw.to_owned(),
            flow: line("Flow: ")?,
            megaflow: line("Megaflow: ")?,
            datapath_actions: line("Datapath actions: ")?,
        })
    }

    /// The megaflow's items in order: `(name, Some(value))` for `name=value`
    /// (the value may be `value/mask`), `(name, None)` for shorthands such
    /// as `eth`, `ip`, `tcp`. Commas inside parentheses do not split.
    pub fn megaflow_fields(&self) -> Vec<(&str, Option<&str>)> {
        split_top_level(&self.megaflow)
            .into_iter()
            .map(|item| match item.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (item, None),
            })
            .collect()
    }

    /// The value (with `/mask` if any) of megaflow field `name`.
    pub fn megaflow_field(&self, name: &str) -> Option<&str> {
        self.megaflow_fields()
            .into_iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v)
    }
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(s[start..].trim());
    items.retain(|i| !i.is_empty());
    items
}

/// Paths of the programs and schema an instance needs.
struct Binaries {
    ovsdb_tool: PathBuf,
    ovsdb_server: PathBuf,
    vswitchd: PathBuf,
    vsctl: PathBuf,
    ofctl: PathBuf,
    appctl: PathBuf,
    setpriv: Option<PathBuf>,
    schema: PathBuf,
}

impl Binaries {
    fn find() -> Result<Binaries, OvsError> {
        let mut missing = Vec::new();
        let mut need = |tool: &str| {
            prereq::find_tool(tool).unwrap_or_else(|| {
                missing.push(tool.to_owned());
                PathBuf::new()
            })
        };
        let bin = Binaries {
            ovsdb_tool: need("ovsdb-tool"),
            ovsdb_server: need("ovsdb-server"),
            vswitchd: need("ovs-vswitchd"),
            vsctl: need("ovs-vsctl"),
            ofctl: need("ovs-ofctl"),
            appctl: need("ovs-appctl"),
            setpriv: prereq::find_tool("setpriv"),
            schema: SCHEMA_DIRS
                .iter()
                .map(|d| Path::new(d).join("vswitch.ovsschema"))
                .find(|p| p.is_file())
                .unwrap_or_default(),
        };
        if bin.schema.as_os_str().is_empty() {
            missing.push("vswitch.ovsschema".into());
        }
        if missing.is_empty() {
            Ok(bin)
        } else {
            Err(OvsError::Unavailable(format!(
                "{} not installed (apt-get install openvswitch-switch)",
                missing.join(", ")
            )))
        }
    }
}

/// A new directory `eswitch-ovs-<pid>-<n>`. Unix socket paths are limited to
/// 107 bytes, so a long `TMPDIR` falls back to `/tmp`.
fn unique_dir() -> Result<PathBuf, OvsError> {
    let mut base = std::env::temp_dir();
    if base.as_os_str().len() > 60 {
        base = PathBuf::from("/tmp");
    }
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("eswitch-ovs-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Left over by an earlier process with the same PID: try the next n.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(OvsError::Failed(format!("mkdir {}: {e}", dir.display()))),
        }
    }
}

#[cfg(test)]
#[path = "tests/ovs.rs"]
mod tests;

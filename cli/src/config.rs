//! `eswitch.toml`: ports, backend, offload policy and limits.
//!
//! ```toml
//! flows = "flows.txt"            # initial OpenFlow table (relative to this file)
//!
//! [backend]
//! kind = "sim"                   # sim | mlx5
//! # device = "mlx5_0"            # mlx5: the RDMA device (default: the one
//!                                # the ports' representors belong to)
//!
//! [[backend.fault]]              # sim: a fault plan (see `crate::faults`)
//! op = "rule_create"
//! errno = "ENOSPC"
//! after = 1000
//!
//! [offload]
//! mode = "hot"                   # hot | all | off
//! hot_packets = 3                # hot = this many packets...
//! hot_window_ms = 1000           # ...within this long
//! budget = 100000                # most rules in hardware (absent: the device's capacity)
//! retry_ms = 1000
//!
//! [limits]
//! flow_limit = 200000
//! port_flow_limit = 25000        # most megaflows of one in_port (default: flow_limit / 8; 0: none)
//! max_idle_ms = 10000
//! revalidator_interval_ms = 500
//! upcall_rate = 100000           # live: upcalls per second per port (0: no limit)
//! upcall_burst = 10000           # ...and the burst above that rate
//! upcall_queue = 8192            # live: misses waiting for the handler thread
//!
//! [datapath]                     # live mode (`eswitchd run`)
//! port_type = "auto"             # auto (AF_XDP, else AF_PACKET) | af_xdp | af_packet
//! control_socket = "/run/eswitch/eswitchd.sock"
//! threads = 1                    # datapath threads (1..64); ports spread over them
//!
//! [slowpath]                     # live mode
//! handlers = 1                   # upcall handler threads (1..16): each translates
//!                                # its misses without the slow-path lock
//!
//! [openflow]                     # live mode: OpenFlow 1.3 channels
//! listen = ["punix:/run/eswitch/br0.mgmt"]   # punix:PATH | ptcp:PORT[:IP] | pssl:PORT[:IP] (IP default 127.0.0.1)
//! controllers = ["tcp:127.0.0.1:6653"]      # tcp:IP:PORT | ssl:IP:PORT; the switch connects, with backoff
//! fail_mode = "standalone"       # no controller: standalone (NORMAL) | secure (flows kept)
//! select_method = "hash"         # select groups: hash (a megaflow per connection, offloadable) | dp_hash (Open vSwitch's default: hash, recirculate, pick by dp_hash; software)
//! datapath_id = "0000000000000001"           # 16 hex digits
//! inactivity_probe_ms = 5000     # echo after this long quiet, close after twice (0: never)
//! packet_in_rate = 1000          # packet-ins per second per connection (0: no limit)...
//! packet_in_burst = 100          # ...and the burst above it; more are dropped and counted
//! max_connections = 64           # connections open at once (all listeners); more are closed at accept
//! max_message_bytes = 65535      # a longer message is answered BAD_LEN and its connection closed
//! max_queued_bytes = 16777216    # replies not yet taken by the peer; past it no request is read
//!
//! [openflow.ssl]                 # for pssl: and ssl: (Open vSwitch's set-ssl files, PEM)
//! private_key = "/etc/eswitch/sc-privkey.pem"
//! certificate = "/etc/eswitch/sc-cert.pem"
//! ca_cert = "/etc/eswitch/cacert.pem"     # a peer's certificate must chain to it
//!
//! [metrics]                      # live mode: Prometheus
//! listen = "127.0.0.1:9477"      # serve /metrics here (absent: no endpoint)
//!
//! [sflow]                        # live mode: sFlow v5 export
//! collectors = ["127.0.0.1:6343"]   # IP:PORT of each collector (empty: no export)
//! agent = "198.18.0.1"           # agent address (default: the one toward the first collector)
//! sampling_rate = 1000           # 1 in N packets of every port (0: only `sample` actions)
//! polling_interval = 20          # seconds between a port's counter samples (0: none)
//! header_bytes = 128             # bytes of each sampled packet sent (14..=1024)
//! max_datagram_bytes = 1400      # a datagram goes when the next sample would not fit...
//! flush_ms = 1000                # ...or when its oldest sample is this old
//! queue = 4096                   # samples waiting for the exporter; more are dropped, counted
//!
//! [sflow.ports]                  # a port's own rate, over sampling_rate (0: off)
//! vm1 = 100
//!
//! [[port]]
//! name = "vm1"                   # netdev (live) or capture interface (replay)
//! ofport = 1
//! vport = "vf0"                  # pf | vfN | pf0vfN | number (a representor's)
//! type = "representor"           # representor (default) | uplink (vport: uplink)
//!                                # | internal (the host's own netdev; no vport)
//!                                # | vxlan | geneve (tunnel ports: no netdev)
//! options = { remote_ip = "198.19.0.2", key = 4242 }   # a tunnel port's, as
//!                                # Open vSwitch's Interface.options
//!
//! [underlay]                     # the tunnel ports' routes, given (replay; live
//! local = ["198.19.0.1"]         # without it follows the host's over rtnetlink)
//! [[underlay.next_hop]]
//! remote = "198.19.0.2"          # a remote tunnel endpoint
//! port = "wire0"                 # the uplink port toward it
//! mac = "02:00:00:00:ff:02"      # the next hop's MAC
//! # src = "198.19.0.1"  src_mac = "02:00:00:00:ff:01"  mtu = 1500
//! ```
//!
//! Unknown keys are errors (a typo must not silently fall back to a
//! default), and every error names the key or value at fault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use megaflow::PortNo;
use offload::Vport;
use ofproto::tunnel::TunnelPort;
use ofproto::{OffloadMode, OffloadPolicy, PipelineConfig, RevalidatorConfig};

use crate::switch::PortKind;
use serde::Deserialize;

const MS: u64 = 1_000_000;

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Initial flow file, relative to the config file.
    pub flows: Option<PathBuf>,
    #[serde(default)]
    pub backend: BackendConfig,
    #[serde(default)]
    pub offload: OffloadConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub datapath: DatapathConfig,
    #[serde(default)]
    pub slowpath: SlowpathConfig,
    #[serde(default)]
    pub openflow: OpenflowConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub sflow: SflowConfig,
    #[serde(default)]
    pub conntrack: ConntrackConfig,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
    /// The tunnel ports' routes and neighbours, given (replay; a live
    /// daemon without it follows the host's over rtnetlink).
    #[serde(default)]
    pub underlay: Option<UnderlayConfig>,
    /// The `Open_vSwitch` database the daemon follows (`eswitchd run
    /// --ovsdb`), instead of ports in this file.
    #[serde(default)]
    pub ovsdb: Option<OvsdbConfig>,
    /// Where the file was read from (for relative paths).
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

/// `[ovsdb]`: be the switch daemon of an `Open_vSwitch` database, as
/// `ovs-vswitchd` is.
///
/// ```toml
/// [ovsdb]
/// remote = "unix:/var/run/openvswitch/db.sock"
/// bridge = "br-int"                 # the bridge this daemon is
/// rundir = "/var/run/openvswitch"   # where BRIDGE.mgmt is listened on
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OvsdbConfig {
    #[serde(default = "OvsdbConfig::default_remote")]
    pub remote: String,
    #[serde(default = "OvsdbConfig::default_bridge")]
    pub bridge: String,
    /// Default: `$OVS_RUNDIR`, else `/var/run/openvswitch`.
    #[serde(default)]
    pub rundir: Option<PathBuf>,
}

impl OvsdbConfig {
    fn default_remote() -> String {
        "unix:/var/run/openvswitch/db.sock".to_string()
    }

    fn default_bridge() -> String {
        "br-int".to_string()
    }

    /// `remote` alone, the rest defaults.
    pub fn with_remote(remote: &str) -> OvsdbConfig {
        OvsdbConfig {
            remote: remote.to_string(),
            bridge: OvsdbConfig::default_bridge(),
            rundir: None,
        }
    }

    /// The bridge's management socket: `punix:RUNDIR/BRIDGE.mgmt`.
    pub fn mgmt_listener(&self) -> String {
        let dir = self.rundir.clone().unwrap_or_else(|| {
            std::env::var_os("OVS_RUNDIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/run/openvswitch"))
        });
        format!(
            "punix:{}",
            dir.join(format!("{}.mgmt", self.bridge)).display()
        )
    }
}

/// `[conntrack]`: the tracker's limits and timeouts.
///
/// ```toml
/// [conntrack]
/// max_conns = 3000000          # dpctl/ct-set-maxconns
/// tcp_seq_check = true         # dpctl/ct-{en,dis}able-tcp-seq-chk
/// default_zone_limit = 0       # 0: unlimited (dpctl/ct-set-limits default=)
/// timeouts = { tcp_established = 3600 }   # the default policy
/// [[conntrack.zone]]
/// zone = 5
/// limit = 1000                 # an explicit 0 admits nothing
/// timeouts = { udp_first = 10 }
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ConntrackConfig {
    pub max_conns: u32,
    pub tcp_seq_check: bool,
    pub default_zone_limit: u32,
    pub timeouts: BTreeMap<String, u32>,
    pub zone: Vec<ZoneConfig>,
}

impl Default for ConntrackConfig {
    fn default() -> Self {
        ConntrackConfig {
            max_conns: conntrack::Config::default().max_conns,
            tcp_seq_check: true,
            default_zone_limit: 0,
            timeouts: BTreeMap::new(),
            zone: Vec::new(),
        }
    }
}

/// `[[conntrack.zone]]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    pub zone: u16,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub timeouts: BTreeMap<String, u32>,
}

impl ConntrackConfig {
    /// Sets the tracker as the section says; a bad timeout name or value
    /// is an error naming it.
    pub fn apply(&self, t: &conntrack::Tracker) -> anyhow::Result<()> {
        t.set_max_conns(self.max_conns);
        t.set_tcp_seq_check(self.tcp_seq_check);
        t.set_default_timeouts(&named(&self.timeouts))
            .map_err(|e| anyhow::anyhow!("conntrack.timeouts: {e}"))?;
        let limits: Vec<(u16, u32)> = self
            .zone
            .iter()
            .filter_map(|z| Some((z.zone, z.limit?)))
            .collect();
        t.set_limits(Some(self.default_zone_limit), &limits);
        for z in &self.zone {
            if !z.timeouts.is_empty() {
                t.set_zone_timeouts(z.zone, Some(&named(&z.timeouts)))
                    .map_err(|e| anyhow::anyhow!("conntrack.zone {}: {e}", z.zone))?;
            }
        }
        Ok(())
    }
}

/// `name = seconds` pairs as the tracker takes them.
fn named(m: &BTreeMap<String, u32>) -> Vec<(&str, u32)> {
    m.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    pub kind: String,
    /// mlx5: the RDMA device; absent: found from the representors.
    pub device: Option<String>,
    /// The sim's fault plan ([`crate::faults`]).
    pub fault: Vec<crate::faults::FaultConfig>,
    /// Where software receives the packets the eSwitch hands it:
    /// `"verbs"`, the slow-path queue whose completions carry each
    /// packet's restore tag, or `"netdev"`, the representor netdevs,
    /// which carry none (sampled flows then stay in software: `no restore
    /// path`). Absent: the sim models `"verbs"`; mlx5 uses `"netdev"`
    /// until set, which is for a device where `eswitchd hw-check` has
    /// passed its restore cases.
    pub slow_path: Option<String>,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            kind: "sim".to_string(),
            device: None,
            fault: Vec::new(),
            slow_path: None,
        }
    }
}

impl BackendConfig {
    /// Whether the slow path receives on the queue that reads restore
    /// tags (`slow_path`, or the backend's default).
    pub fn verbs_slow_path(&self) -> anyhow::Result<bool> {
        match self.slow_path.as_deref() {
            None => Ok(self.kind == "sim"),
            Some("verbs") => Ok(true),
            Some("netdev") => Ok(false),
            Some(other) => bail!(
                "backend.slow_path = \"{other}\": expected \"verbs\" (the queue that reads \
                 restore tags) or \"netdev\" (the representor netdevs)"
            ),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OffloadConfig {
    pub mode: String,
    pub hot_packets: u32,
    pub hot_window_ms: u64,
    pub budget: Option<usize>,
    pub retry_ms: u64,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        OffloadConfig {
            mode: "hot".to_string(),
            hot_packets: 3,
            hot_window_ms: 1000,
            budget: None,
            retry_ms: 1000,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    pub flow_limit: usize,
    /// Absent: an eighth of `flow_limit`.
    pub port_flow_limit: Option<usize>,
    pub max_idle_ms: u64,
    pub revalidator_interval_ms: u64,
    pub upcall_rate: u64,
    pub upcall_burst: u64,
    pub upcall_queue: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let r = RevalidatorConfig::default();
        LimitsConfig {
            flow_limit: r.flow_limit,
            port_flow_limit: None,
            max_idle_ms: r.max_idle_ns / MS,
            revalidator_interval_ms: r.interval_ns / MS,
            upcall_rate: 100_000,
            upcall_burst: 10_000,
            upcall_queue: 8192,
        }
    }
}

/// The Prometheus endpoint (live mode).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `IP:PORT` to serve `/metrics` on (absent: no endpoint).
    pub listen: Option<String>,
}

impl MetricsConfig {
    /// The address, checked.
    pub fn addr(&self) -> anyhow::Result<Option<std::net::SocketAddr>> {
        self.listen
            .as_deref()
            .map(|l| {
                l.parse().with_context(|| {
                    format!("metrics.listen = \"{l}\": expected IP:PORT (127.0.0.1:9477)")
                })
            })
            .transpose()
    }
}

/// sFlow export (live mode).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SflowConfig {
    /// `IP:PORT` of each collector (empty: no export).
    pub collectors: Vec<String>,
    /// The agent address datagrams carry (absent: the local address of
    /// the route to the first collector).
    pub agent: Option<std::net::Ipv4Addr>,
    /// 1 in this many packets of every port is sampled (0: none).
    pub sampling_rate: u32,
    /// Per port name: its own rate, over `sampling_rate` (0: none).
    pub ports: std::collections::BTreeMap<String, u32>,
    /// Seconds between counter samples of a port (0: none).
    pub polling_interval: u64,
    pub header_bytes: usize,
    pub max_datagram_bytes: usize,
    pub flush_ms: u64,
    pub queue: usize,
}

impl Default for SflowConfig {
    fn default() -> Self {
        SflowConfig {
            collectors: Vec::new(),
            agent: None,
            sampling_rate: 0,
            ports: Default::default(),
            polling_interval: 20,
            header_bytes: crate::sflow::DEFAULT_HEADER_BYTES,
            max_datagram_bytes: 1400,
            flush_ms: 1000,
            queue: 4096,
        }
    }
}

impl SflowConfig {
    /// The collectors' addresses, checked.
    pub fn collector_addrs(&self) -> anyhow::Result<Vec<std::net::SocketAddr>> {
        self.collectors
            .iter()
            .map(|c| {
                c.parse().with_context(|| {
                    format!("sflow.collectors: \"{c}\": expected IP:PORT (127.0.0.1:6343)")
                })
            })
            .collect()
    }

    /// The sampling rate of the port named `name` (0: not sampled).
    pub fn rate_of(&self, name: &str) -> u32 {
        if self.collectors.is_empty() {
            return 0;
        }
        self.ports.get(name).copied().unwrap_or(self.sampling_rate)
    }

    fn check(&self, ports: &[PortSpec]) -> anyhow::Result<()> {
        self.collector_addrs()?;
        let h = self.header_bytes;
        if !(14..=1024).contains(&h) {
            bail!("sflow.header_bytes = {h}: expected 14 to 1024");
        }
        // A datagram holds at least its header and any one sample.
        let least = 28 + 116 + h;
        let d = self.max_datagram_bytes;
        if !(least..=65_000).contains(&d) {
            bail!("sflow.max_datagram_bytes = {d}: expected {least} (header_bytes + 144) to 65000");
        }
        if self.queue == 0 {
            bail!("sflow.queue = 0: expected at least 1");
        }
        if let Some(name) = self
            .ports
            .keys()
            .find(|n| !ports.iter().any(|p| &p.name == *n))
        {
            bail!("sflow.ports.{name}: no [[port]] named \"{name}\"");
        }
        Ok(())
    }
}

/// The OpenFlow channels (live mode).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OpenflowConfig {
    /// Passive listeners: `punix:PATH`, `ptcp:PORT[:IP]`, `pssl:PORT[:IP]`
    /// (the address is loopback unless given).
    pub listen: Vec<String>,
    /// Controllers the switch connects to: `tcp:IP:PORT` or `ssl:IP:PORT`,
    /// reconnecting with exponential backoff.
    pub controllers: Vec<String>,
    /// With controllers configured and none connected for an inactivity
    /// probe interval: `standalone` (switch with NORMAL until one is back,
    /// as Open vSwitch) or `secure` (keep the flows; misses go nowhere).
    pub fail_mode: String,
    /// How SELECT groups pick a bucket (OpenFlow 1.3 cannot name a
    /// method): `hash`, a hash of the flow's addresses and ports in
    /// translation (each connection its own megaflow, which the device
    /// can hold), or `dp_hash`, Open vSwitch's default (the datapath
    /// hashes and recirculates, a few megaflows for any number of
    /// connections, all in software).
    pub select_method: String,
    /// 16 hex digits (`ovs-ofctl show` prints it as `dpid:`).
    pub datapath_id: String,
    pub inactivity_probe_ms: u64,
    /// Packet-ins per second to each connection (0: no limit), and the
    /// burst above that rate; more are dropped and counted.
    pub packet_in_rate: u64,
    pub packet_in_burst: u64,
    /// Connections open at once over every listener; one more is closed
    /// as soon as it is accepted (controllers the switch dials are not
    /// counted).
    pub max_connections: usize,
    /// The longest message a peer may send (OpenFlow's own limit is
    /// 65,535): a longer one is answered with BAD_REQUEST/BAD_LEN and the
    /// connection is closed.
    pub max_message_bytes: usize,
    /// Output a connection may hold that the peer has not taken: past it
    /// no further request is read until the peer reads (one reply may be
    /// longer). A peer that takes nothing for twice the inactivity probe
    /// (or a minute, with no probe) is disconnected.
    pub max_queued_bytes: usize,
    /// Keys and certificates for `pssl:` and `ssl:`.
    pub ssl: Option<SslConfig>,
}

/// TLS for the OpenFlow channels: this switch's private key and
/// certificate, and the CA certificate its peers' certificates must chain
/// to (PEM files, as Open vSwitch's `set-ssl` takes them).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SslConfig {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
}

/// Bounds of `max_message_bytes`.
pub const MESSAGE_BYTES: std::ops::RangeInclusive<usize> = 64..=65_535;

impl Default for OpenflowConfig {
    fn default() -> Self {
        OpenflowConfig {
            listen: Vec::new(),
            controllers: Vec::new(),
            fail_mode: "standalone".to_string(),
            select_method: "hash".to_string(),
            datapath_id: "0000000000000001".to_string(),
            inactivity_probe_ms: 5000,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            max_connections: 64,
            max_message_bytes: 65_535,
            max_queued_bytes: 16 << 20,
            ssl: None,
        }
    }
}

/// Where an OpenFlow listener listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Punix(PathBuf),
    Ptcp(std::net::SocketAddr),
    Pssl(std::net::SocketAddr),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Punix(p) => write!(f, "punix:{}", p.display()),
            Endpoint::Ptcp(a) => write!(f, "ptcp:{}:{}", a.port(), a.ip()),
            Endpoint::Pssl(a) => write!(f, "pssl:{}:{}", a.port(), a.ip()),
        }
    }
}

impl std::str::FromStr for Endpoint {
    type Err = anyhow::Error;

    /// `punix:PATH`, `ptcp:PORT[:IP]` or `pssl:PORT[:IP]` (Open vSwitch's
    /// syntax; IPv6 addresses in brackets). Unlike Open vSwitch, the
    /// address is loopback unless given: listening on the network is a
    /// choice the config makes.
    fn from_str(s: &str) -> anyhow::Result<Endpoint> {
        if let Some(path) = s.strip_prefix("punix:") {
            if path.is_empty() {
                bail!("\"{s}\": punix needs a path");
            }
            return Ok(Endpoint::Punix(PathBuf::from(path)));
        }
        let (rest, ssl) = match (s.strip_prefix("ptcp:"), s.strip_prefix("pssl:")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => bail!("\"{s}\": expected punix:PATH, ptcp:PORT[:IP] or pssl:PORT[:IP]"),
        };
        let (port, ip) = match rest.split_once(':') {
            Some((p, ip)) => (p, ip.trim_start_matches('[').trim_end_matches(']')),
            None => (rest, "127.0.0.1"),
        };
        let port: u16 = port
            .parse()
            .with_context(|| format!("\"{s}\": port \"{port}\""))?;
        let ip: std::net::IpAddr = ip
            .parse()
            .with_context(|| format!("\"{s}\": address \"{ip}\""))?;
        let addr = std::net::SocketAddr::new(ip, port);
        Ok(if ssl {
            Endpoint::Pssl(addr)
        } else {
            Endpoint::Ptcp(addr)
        })
    }
}

/// A controller the switch connects to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controller {
    pub addr: std::net::SocketAddr,
    /// `ssl:` (else `tcp:`).
    pub ssl: bool,
}

impl Controller {
    /// `tcp:IP:PORT` or `ssl:IP:PORT` (`[IPv6]` too); the error names
    /// what is wrong.
    pub fn parse(c: &str) -> anyhow::Result<Controller> {
        let expected = || anyhow::anyhow!("\"{c}\": expected tcp:IP:PORT or ssl:IP:PORT");
        let (rest, ssl) = match (c.strip_prefix("tcp:"), c.strip_prefix("ssl:")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err(expected()),
        };
        let (ip, port) = rest.rsplit_once(':').ok_or_else(expected)?;
        let ip: std::net::IpAddr = ip
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .with_context(|| format!("\"{c}\": address \"{ip}\""))?;
        let port: u16 = port
            .parse()
            .with_context(|| format!("\"{c}\": port \"{port}\""))?;
        Ok(Controller {
            addr: std::net::SocketAddr::new(ip, port),
            ssl,
        })
    }
}

impl std::fmt::Display for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.ssl { "ssl" } else { "tcp" };
        write!(f, "{scheme}:{}", self.addr)
    }
}

impl OpenflowConfig {
    /// The listeners, checked.
    pub fn endpoints(&self) -> anyhow::Result<Vec<Endpoint>> {
        let eps: Vec<Endpoint> = self
            .listen
            .iter()
            .map(|l| l.parse().context("openflow.listen"))
            .collect::<anyhow::Result<_>>()?;
        if let Some(ep) = eps.iter().find(|e| matches!(e, Endpoint::Pssl(_))) {
            self.need_ssl(&format!("openflow.listen: {ep}"))?;
        }
        Ok(eps)
    }

    fn need_ssl(&self, what: &str) -> anyhow::Result<()> {
        if self.ssl.is_none() {
            bail!(
                "{what} needs [openflow.ssl] with private_key, certificate and ca_cert \
                 (this switch's key and certificate, and the CA its peers' certificates chain to)"
            );
        }
        Ok(())
    }

    /// The controllers, checked (`tcp:IP:PORT` or `ssl:IP:PORT`).
    pub fn controller_addrs(&self) -> anyhow::Result<Vec<Controller>> {
        self.controllers
            .iter()
            .map(|c| {
                let ctl = Controller::parse(c).context("openflow.controllers")?;
                if ctl.ssl {
                    self.need_ssl(&format!("openflow.controllers: \"{c}\""))?;
                }
                Ok(ctl)
            })
            .collect()
    }

    /// The per-connection limits, checked.
    pub fn check_limits(&self) -> anyhow::Result<()> {
        if self.max_connections == 0 {
            bail!("openflow.max_connections = 0: expected at least 1");
        }
        let m = self.max_message_bytes;
        if !MESSAGE_BYTES.contains(&m) {
            bail!(
                "openflow.max_message_bytes = {m}: expected {} to {}",
                MESSAGE_BYTES.start(),
                MESSAGE_BYTES.end()
            );
        }
        if self.max_queued_bytes < openflow::MAX_LEN {
            bail!(
                "openflow.max_queued_bytes = {}: expected at least {} (one message)",
                self.max_queued_bytes,
                openflow::MAX_LEN
            );
        }
        Ok(())
    }

    /// Whether fail mode is `standalone` (else `secure`).
    pub fn standalone(&self) -> anyhow::Result<bool> {
        match self.fail_mode.as_str() {
            "standalone" => Ok(true),
            "secure" => Ok(false),
            m => bail!("openflow.fail_mode = \"{m}\": expected \"standalone\" or \"secure\""),
        }
    }

    /// Whether SELECT groups pick by `dp_hash` (else by a hash in
    /// translation).
    pub fn select_dp_hash(&self) -> anyhow::Result<bool> {
        match self.select_method.as_str() {
            "hash" => Ok(false),
            "dp_hash" => Ok(true),
            m => bail!("openflow.select_method = \"{m}\": expected \"hash\" or \"dp_hash\""),
        }
    }

    /// The datapath id.
    pub fn dpid(&self) -> anyhow::Result<u64> {
        let d = &self.datapath_id;
        if d.is_empty() || d.len() > 16 {
            bail!("openflow.datapath_id = \"{d}\": expected up to 16 hex digits");
        }
        u64::from_str_radix(d, 16)
            .with_context(|| format!("openflow.datapath_id = \"{d}\": expected hex digits"))
    }
}

/// The default control socket.
pub const DEFAULT_SOCKET: &str = "/run/eswitch/eswitchd.sock";

/// Live-mode settings.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct DatapathConfig {
    pub port_type: PortType,
    pub control_socket: PathBuf,
    /// Datapath threads; ports are spread over them as they open.
    pub threads: usize,
}

/// The most datapath threads a config may ask for.
pub const MAX_DATAPATH_THREADS: usize = 64;

/// Slow-path settings (live mode).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SlowpathConfig {
    /// Upcall handler threads sharing the upcall queues.
    pub handlers: usize,
}

/// The most handler threads a config may ask for.
pub const MAX_HANDLERS: usize = 16;

impl Default for SlowpathConfig {
    fn default() -> Self {
        SlowpathConfig { handlers: 1 }
    }
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig {
            port_type: PortType::Auto,
            control_socket: PathBuf::from(DEFAULT_SOCKET),
            threads: 1,
        }
    }
}

/// How live ports do I/O.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortType {
    /// AF_XDP where the kernel and the netdev allow it, else AF_PACKET.
    Auto,
    AfXdp,
    AfPacket,
}

impl std::str::FromStr for PortType {
    type Err = String;
    fn from_str(s: &str) -> Result<PortType, String> {
        match s {
            "auto" => Ok(PortType::Auto),
            "af_xdp" | "afxdp" => Ok(PortType::AfXdp),
            "af_packet" | "afpacket" => Ok(PortType::AfPacket),
            _ => Err(format!(
                "port type \"{s}\": expected \"auto\", \"af_xdp\" or \"af_packet\""
            )),
        }
    }
}

/// One port.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub name: String,
    pub ofport: u32,
    /// Its vport (`vfN`, `pf`, ...): a representor's; an uplink's is
    /// `uplink`; an internal port has none.
    #[serde(default)]
    pub vport: Option<String>,
    /// `representor` (the default), `uplink`, `internal`, `vxlan` or
    /// `geneve`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// A tunnel port's options, as Open vSwitch's `Interface.options`.
    #[serde(default)]
    pub options: BTreeMap<String, OptionValue>,
}

/// `[underlay]`: local tunnel endpoints and the next hop toward each
/// remote one.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UnderlayConfig {
    /// The host's own addresses (local tunnel endpoints).
    #[serde(default)]
    pub local: Vec<String>,
    #[serde(default, rename = "next_hop")]
    pub next_hops: Vec<NextHopConfig>,
}

/// `[[underlay.next_hop]]`: how to reach one remote endpoint.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NextHopConfig {
    /// The remote endpoint's address.
    pub remote: String,
    /// The uplink port it is reached by.
    pub port: String,
    /// The next hop's MAC.
    pub mac: String,
    /// The outer source address (default: the first `local` of the
    /// remote's family).
    #[serde(default)]
    pub src: Option<String>,
    /// The uplink's MAC (default 02:00:00:00:00:00).
    #[serde(default)]
    pub src_mac: Option<String>,
    /// The uplink's MTU (default 1500).
    #[serde(default)]
    pub mtu: Option<u16>,
}

/// `aa:bb:cc:dd:ee:ff` as bytes.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16).ok().filter(|_| p.len() == 2))
        .collect::<Option<Vec<u8>>>()?;
    parts.try_into().ok()
}

impl UnderlayConfig {
    /// The underlay of `[underlay]`, its ports resolved in `ports`; errors
    /// name the key and value at fault.
    pub fn underlay(&self, ports: &[PortSpec]) -> anyhow::Result<ofproto::tunnel::StaticUnderlay> {
        let ip = |key: &str, v: &str| -> anyhow::Result<std::net::IpAddr> {
            v.parse()
                .map_err(|_| anyhow::anyhow!("underlay {key} = \"{v}\": expected an IP address"))
        };
        let local = self
            .local
            .iter()
            .map(|a| ip("local", a))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut hops = Vec::new();
        for h in &self.next_hops {
            let remote = ip("next_hop.remote", &h.remote)?;
            let port = ports
                .iter()
                .find(|p| p.name == h.port)
                .filter(|p| p.kind == PortKind::Uplink)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "underlay next_hop.port = \"{}\": not an uplink port of the config",
                        h.port
                    )
                })?;
            let mac = |key: &str, v: &str| {
                parse_mac(v).ok_or_else(|| {
                    anyhow::anyhow!("underlay next_hop.{key} = \"{v}\": expected aa:bb:cc:dd:ee:ff")
                })
            };
            let src = match &h.src {
                Some(s) => ip("next_hop.src", s)?,
                None => *local
                    .iter()
                    .find(|l| l.is_ipv4() == remote.is_ipv4())
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "underlay next_hop {remote}: no src, and no local address of its family"
                        )
                    })?,
            };
            hops.push((
                remote,
                ofproto::tunnel::NextHop {
                    port: port.no,
                    src,
                    eth_src: match &h.src_mac {
                        Some(m) => mac("src_mac", m)?,
                        None => [2, 0, 0, 0, 0, 0],
                    },
                    eth_dst: mac("mac", &h.mac)?,
                    mtu: h.mtu.unwrap_or(1500),
                },
            ));
        }
        Ok(ofproto::tunnel::StaticUnderlay { local, hops })
    }
}

/// An option's value: TOML's string, integer or boolean, read as the
/// string Open vSwitch's database would hold.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum OptionValue {
    Text(String),
    Number(i64),
    Bool(bool),
}

impl std::fmt::Display for OptionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Text(s) => f.write_str(s),
            OptionValue::Number(n) => write!(f, "{n}"),
            OptionValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A port as the switch uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub name: String,
    pub no: PortNo,
    pub kind: PortKind,
    /// `None`: a port the device does not see (an internal port, a
    /// tunnel).
    pub vport: Option<Vport>,
    /// A tunnel port's options.
    pub tunnel: Option<Arc<TunnelPort>>,
    /// The bridge it is on (under a database, one of several).
    pub bridge: ofproto::BridgeNo,
    /// A patch port's peer: the name of the patch port of another bridge
    /// it leads to (`options:peer`).
    pub peer: Option<String>,
}

impl PortSpec {
    /// An OpenFlow number in range (1..OFPP_MAX), and a name, number and
    /// vport none of `others` has: what the config and `add-port` check.
    pub fn check(&self, others: &[PortSpec]) -> anyhow::Result<()> {
        if self.no.0 == 0 || self.no.0 >= 0xffff_ff00 {
            bail!(
                "port \"{}\": ofport {} out of range 1..0xffffff00",
                self.name,
                self.no
            );
        }
        if let Some(q) = others.iter().find(|q| {
            q.name == self.name || q.no == self.no || (q.vport.is_some() && q.vport == self.vport)
        }) {
            bail!(
                "port \"{}\" (ofport {}, vport {}) clashes with port \"{}\" (ofport {}, vport {})",
                self.name,
                self.no,
                self.vport_name(),
                q.name,
                q.no,
                q.vport_name()
            );
        }
        Ok(())
    }

    /// The port as the bridge knows it (up, a tunnel's options).
    pub fn info(&self) -> ofproto::PortInfo {
        let mut info = ofproto::PortInfo::new(self.no, self.name.clone());
        info.tunnel = self.tunnel.clone();
        info.decap = self.kind == PortKind::Uplink;
        info
    }

    /// The vport as `show` prints it (`-` for none).
    pub fn vport_name(&self) -> String {
        self.vport
            .map_or_else(|| "-".to_string(), |v| v.to_string())
    }
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        let mut cfg =
            Config::parse(&text).with_context(|| format!("in config {}", path.display()))?;
        cfg.dir = path.parent().map(Path::to_path_buf);
        if let (Some(ssl), Some(dir)) = (cfg.openflow.ssl.as_mut(), cfg.dir.as_ref()) {
            for f in [&mut ssl.private_key, &mut ssl.certificate, &mut ssl.ca_cert] {
                if f.is_relative() {
                    *f = dir.join(&*f);
                }
            }
        }
        Ok(cfg)
    }

    /// Parses and checks config text.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let cfg: Config = toml::from_str(text)?;
        cfg.pipeline()?;
        cfg.port_specs()?;
        match cfg.backend.kind.as_str() {
            "sim" | "mlx5" => {}
            k => bail!("backend.kind = \"{k}\": expected \"sim\" or \"mlx5\""),
        }
        crate::faults::FaultPlan::parse(&cfg.backend.fault)?;
        cfg.backend.verbs_slow_path()?;
        if cfg.backend.kind != "sim" && !cfg.backend.fault.is_empty() {
            bail!(
                "backend.fault: a fault plan is for the sim backend, not \"{}\"",
                cfg.backend.kind
            );
        }
        cfg.openflow.endpoints()?;
        cfg.openflow.controller_addrs()?;
        cfg.openflow.check_limits()?;
        cfg.metrics.addr()?;
        cfg.sflow.check(&cfg.port_specs()?)?;
        cfg.openflow.standalone()?;
        cfg.openflow.select_dp_hash()?;
        cfg.openflow.dpid()?;
        let t = cfg.datapath.threads;
        if !(1..=MAX_DATAPATH_THREADS).contains(&t) {
            bail!("datapath.threads = {t}: expected 1 to {MAX_DATAPATH_THREADS}");
        }
        let h = cfg.slowpath.handlers;
        if !(1..=MAX_HANDLERS).contains(&h) {
            bail!("slowpath.handlers = {h}: expected 1 to {MAX_HANDLERS}");
        }
        Ok(cfg)
    }

    /// The flow file's path, resolved against the config's directory.
    pub fn flows_path(&self) -> Option<PathBuf> {
        self.flows.as_ref().map(|f| match &self.dir {
            Some(d) if f.is_relative() => d.join(f),
            _ => f.clone(),
        })
    }

    /// Which netdevs are (emulated) representors, and their vports: the
    /// configured ports by name, for the representor tracker.
    pub fn representors(&self) -> anyhow::Result<offload::representor::RepresentorConfig> {
        let mut rc = offload::representor::RepresentorConfig::default();
        for p in self.port_specs()? {
            if p.kind.spec().has_netdev() {
                rc = rc.with_netdev(&p.name, p.vport);
            }
        }
        Ok(rc)
    }

    /// The ports, checked: names, OpenFlow numbers and vports unique.
    pub fn port_specs(&self) -> anyhow::Result<Vec<PortSpec>> {
        let mut out: Vec<PortSpec> = Vec::new();
        for p in &self.ports {
            let (kind, given) =
                PortKind::parse_words(&p.name, p.kind.as_deref(), p.vport.as_deref())?;
            let options: Vec<(String, String)> = p
                .options
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect();
            let spec = PortSpec {
                name: p.name.clone(),
                no: PortNo(p.ofport),
                kind,
                vport: kind.spec().vport(&p.name, given, None)?,
                tunnel: kind.tunnel(&p.name, &options)?,
                bridge: ofproto::BridgeNo::MAIN,
                peer: None,
            };
            spec.check(&out)?;
            out.push(spec);
        }
        Ok(out)
    }

    /// The pipeline settings.
    pub fn pipeline(&self) -> anyhow::Result<PipelineConfig> {
        let o = &self.offload;
        let mode = match o.mode.as_str() {
            "hot" => {
                if o.hot_packets == 0 {
                    bail!("offload.hot_packets = 0: must be at least 1");
                }
                OffloadMode::Hot {
                    packets: o.hot_packets,
                    window_ns: o.hot_window_ms.saturating_mul(MS),
                }
            }
            "all" => OffloadMode::All,
            "off" => OffloadMode::Off,
            m => bail!("offload.mode = \"{m}\": expected \"hot\", \"all\" or \"off\""),
        };
        let l = &self.limits;
        if l.revalidator_interval_ms == 0 {
            bail!("limits.revalidator_interval_ms = 0: must be at least 1");
        }
        if l.flow_limit == 0 {
            bail!("limits.flow_limit = 0: must be at least 1");
        }
        if l.upcall_queue == 0 {
            bail!("limits.upcall_queue = 0: must be at least 1");
        }
        Ok(PipelineConfig {
            offload: OffloadPolicy {
                mode,
                budget: o.budget,
                retry_ns: o.retry_ms.saturating_mul(MS),
            },
            revalidator: RevalidatorConfig {
                interval_ns: l.revalidator_interval_ms.saturating_mul(MS),
                max_idle_ns: l.max_idle_ms.saturating_mul(MS),
                flow_limit: l.flow_limit,
                port_flow_limit: l.port_flow_limit.unwrap_or((l.flow_limit / 8).max(1)),
                dynamic_limit: true,
            },
            select_dp_hash: self.openflow.select_dp_hash()?,
            ..PipelineConfig::default()
        })
    }
}

#[cfg(test)]
#[path = "tests/config.rs"]
mod tests;

//! The daemon's OpenFlow 1.3 channels: passive listeners (`punix:`,
//! `ptcp:`, `pssl:`) and controllers (`tcp:`, `ssl:`), one thread per
//! listener accepting and one per connection.
//! Each connection is an [`ofproto::channel::Connection`]; the bytes it
//! reads are acted on under the slow-path lock (as a control request is),
//! what it answers is written after the lock is released.
//!
//! A connection that goes wrong (a framing error, a peer that closed, an
//! inactivity probe unanswered) ends alone: the listener, the other
//! connections and forwarding go on.
//!
//! A peer cannot grow the daemon without bound: connections beyond
//! `max_connections` are closed at accept, a message over
//! `max_message_bytes` closes its connection, no request is read while
//! `max_queued_bytes` of output wait for the peer, and a peer that takes
//! nothing for twice the inactivity probe is disconnected.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use ofproto::channel::{role_name, Connection, OfSwitch, Roles};
use openflow::message::capabilities;
use openflow::{Desc, Features, Port};
use serde::Serialize;
use tracing::{debug, info, warn};

use super::of_bridges::BridgeGuard;
use super::tls::{TlsSettings, TlsStream};
use super::{lock, spawn, Core, PacketInEvent, TokenBucket};
use crate::config::{Controller, Endpoint, OpenflowConfig};
use crate::switch::{Device, SwitchEvent};

/// How long a connection thread blocks in read before it checks for stop
/// and runs its keepalive.
const READ_TICK: Duration = Duration::from_millis(50);

/// How long a peer may take nothing when the inactivity probe is off.
const SEND_STALL_NO_PROBE: Duration = Duration::from_secs(60);

/// How often a waiting BARRIER looks whether its pass has run.
const BARRIER_POLL: Duration = Duration::from_micros(500);

/// One connection as `show` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConnInfo {
    pub id: u64,
    /// The listener it came through and the peer.
    pub listener: String,
    pub peer: String,
    pub state: String,
    pub role: String,
    pub rx_msgs: u64,
    pub tx_msgs: u64,
    /// Packet-ins queued for it, and dropped (over its rate or its queue
    /// full).
    pub packet_ins: u64,
    pub packet_in_drops: u64,
    /// FLOW_REMOVED and PORT_STATUS queued for it, and dropped (its queue
    /// full).
    pub async_sent: u64,
    pub async_drops: u64,
    pub errors_sent: u64,
    pub last_error: Option<String>,
}

/// What the channels share: roles, the connection list, settings.
pub struct Shared {
    /// Controller connections (active, `tcp:`) that are open now, and
    /// when the count last fell to zero (or the server started).
    controllers_open: Mutex<(usize, Instant)>,
    roles: Mutex<Roles>,
    conns: Mutex<BTreeMap<u64, ConnInfo>>,
    /// What the packet-in distributor needs of each open connection.
    handles: Mutex<BTreeMap<u64, Arc<ConnHandle>>>,
    packet_in_rate: u64,
    packet_in_burst: u64,
    next_id: AtomicU64,
    stop: AtomicBool,
    dpid: u64,
    probe: Duration,
    clock: super::Clock,
    tx: super::TxPorts,
    /// The controllers the switch connects to now, by target
    /// (`tcp:IP:PORT`), each with the flag that stops its connection when
    /// it is removed ([`ConnBoard::set_controllers`]).
    controllers: Mutex<BTreeMap<String, Arc<AtomicBool>>>,
    /// Fail mode `standalone` (else `secure`).
    standalone: AtomicBool,
    /// The server's threads (a controller added later adds its own).
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Where a PACKET_OUT's packet-ins go (`output:TABLE` to a rule that
    /// sends to the controller): the distributor's queue, as the handlers'.
    packet_ins: Arc<super::PacketIns>,
    /// Keys and certificates, with `pssl:` or `ssl:` configured, and the
    /// settings they were loaded from (the config's, then the database's).
    tls: Mutex<(Option<Arc<TlsSettings>>, Option<crate::config::SslConfig>)>,
    /// The OpenFlow versions new connections may agree to (`Bridge.protocols`;
    /// empty: 1.3 to 1.5).
    versions: Mutex<Vec<u8>>,
    /// The bridge this server is the OpenFlow side of.
    bridge: ofproto::BridgeNo,
    /// The other bridges' servers (packet-ins from their pipelines go
    /// there).
    others: super::of_bridges::OfBridges<Shared>,
    /// Accepted connections open now, the most allowed, and how many were
    /// refused for it.
    accepted_open: AtomicUsize,
    max_connections: usize,
    refused: AtomicU64,
    max_message: usize,
    max_queued: usize,
    /// How long a write may wait for the peer to take bytes.
    send_stall: Duration,
}

/// The running channels.
pub struct OfServer {
    shared: Arc<Shared>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    sockets: Vec<std::path::PathBuf>,
    /// Each TCP listener's bound address, in the config's order (`ptcp:0`
    /// takes a free port).
    addrs: Vec<Option<std::net::SocketAddr>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OfServer {
    /// Binds every listener of `cfg` and starts accepting. A listener that
    /// cannot bind is an error naming it (nothing is left running).
    pub fn start<B: Device>(
        core: &Core<B>,
        clock: super::Clock,
        cfg: &OpenflowConfig,
        packet_ins: (
            Option<std::sync::mpsc::Receiver<PacketInEvent>>,
            Arc<super::PacketIns>,
        ),
        tx: super::TxPorts,
    ) -> anyhow::Result<OfServer> {
        Self::start_bridge(
            core,
            clock,
            cfg,
            (ofproto::BridgeNo::MAIN, Default::default()),
            packet_ins,
            tx,
        )
    }

    /// The OpenFlow side of bridge `bridge` (another than the main one:
    /// `others` is the main server's [`others`](Self::others), where it
    /// registers for its packet-ins).
    pub fn start_bridge<B: Device>(
        core: &Core<B>,
        clock: super::Clock,
        cfg: &OpenflowConfig,
        (bridge, others): (ofproto::BridgeNo, OtherBridges),
        (packet_ins, queue): (
            Option<std::sync::mpsc::Receiver<PacketInEvent>>,
            Arc<super::PacketIns>,
        ),
        tx: super::TxPorts,
    ) -> anyhow::Result<OfServer> {
        cfg.check_limits()?;
        let endpoints = cfg.endpoints()?;
        let controllers = cfg.controller_addrs()?;
        let tls = match &cfg.ssl {
            Some(ssl) => Some(TlsSettings::load(ssl)?),
            None => None,
        };
        let probe = Duration::from_millis(cfg.inactivity_probe_ms);
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let shared = Arc::new(Shared {
            controllers_open: Mutex::new((0, Instant::now())),
            roles: Mutex::default(),
            conns: Mutex::default(),
            handles: Mutex::default(),
            packet_in_rate: cfg.packet_in_rate,
            packet_in_burst: cfg.packet_in_burst.max(1),
            next_id: AtomicU64::new(1),
            stop: AtomicBool::new(false),
            dpid: cfg.dpid()?,
            probe,
            clock,
            tx,
            packet_ins: queue,
            controllers: Mutex::default(),
            standalone: AtomicBool::new(cfg.standalone()?),
            threads: Arc::clone(&threads),
            tls: Mutex::new((tls.map(Arc::new), cfg.ssl.clone())),
            versions: Mutex::new(Vec::new()),
            bridge,
            others: others.clone(),
            accepted_open: AtomicUsize::new(0),
            max_connections: cfg.max_connections,
            refused: AtomicU64::new(0),
            max_message: cfg.max_message_bytes,
            max_queued: cfg.max_queued_bytes,
            send_stall: if probe.is_zero() {
                SEND_STALL_NO_PROBE
            } else {
                (2 * probe).max(Duration::from_secs(1))
            },
        });
        if bridge != ofproto::BridgeNo::MAIN {
            shared.others.insert(bridge, &shared);
        }
        let mut server = OfServer {
            shared: Arc::clone(&shared),
            threads: Arc::clone(&threads),
            sockets: Vec::new(),
            addrs: Vec::new(),
        };
        {
            let (etx, erx) = std::sync::mpsc::channel();
            lock(core).set_bridge_events(bridge, etx);
            let sh = Arc::clone(&shared);
            let t = spawn("esw-of-events", move || announce(&erx, &sh))?;
            guard(&threads).push(t);
        }
        if let Some(rx) = packet_ins {
            let sh = Arc::clone(&shared);
            let t = spawn("esw-of-pktin", move || distribute(&rx, &sh))?;
            guard(&threads).push(t);
        }
        for ctl in &controllers {
            add_controller(core, &shared, *ctl)?;
        }
        {
            let (core, sh) = (Arc::clone(core), Arc::clone(&shared));
            let t = spawn("esw-of-failmode", move || fail_mode(&core, &sh))?;
            guard(&threads).push(t);
        }
        for ep in endpoints {
            let name = ep.to_string();
            let listener = match &ep {
                Endpoint::Punix(path) => {
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir)
                            .with_context(|| format!("{name}: cannot create {}", dir.display()))?;
                    }
                    // A socket file left by a daemon that did not stop clean.
                    let _ = std::fs::remove_file(path);
                    let l =
                        UnixListener::bind(path).with_context(|| format!("{name}: cannot bind"))?;
                    server.sockets.push(path.clone());
                    Listener::Unix(l)
                }
                Endpoint::Ptcp(addr) => Listener::Tcp(
                    TcpListener::bind(addr).with_context(|| format!("{name}: cannot bind"))?,
                ),
                Endpoint::Pssl(addr) => Listener::Tls(
                    TcpListener::bind(addr).with_context(|| format!("{name}: cannot bind"))?,
                ),
            };
            server.addrs.push(listener.local_addr());
            listener.set_nonblocking()?;
            let (core, shared, all) = (Arc::clone(core), Arc::clone(&shared), Arc::clone(&threads));
            let t = spawn("esw-of-listen", move || {
                accept_loop(&listener, &name, &core, &shared, &all)
            })?;
            guard(&threads).push(t);
            info!(listener = %ep, "OpenFlow listener ready");
        }
        Ok(server)
    }

    /// Every connection now.
    pub fn connections(&self) -> Vec<ConnInfo> {
        guard(&self.shared.conns).values().cloned().collect()
    }

    /// Where each listener listens, in the config's order (`None` for
    /// `punix:`).
    pub fn local_addrs(&self) -> &[Option<std::net::SocketAddr>] {
        &self.addrs
    }

    /// Where the other bridges' servers register.
    pub fn others(&self) -> OtherBridges {
        self.shared.others.clone()
    }

    /// A handle `show` can read the connections through.
    pub fn board(&self) -> ConnBoard {
        ConnBoard(Arc::clone(&self.shared))
    }

    /// Stops the listeners and closes every connection (their threads
    /// joined, so none holds the switch any more).
    pub fn stop(self) {
        self.shared.others.remove(self.shared.bridge);
        self.shared.stop.store(true, Ordering::SeqCst);
        loop {
            let batch: Vec<JoinHandle<()>> = guard(&self.threads).drain(..).collect();
            if batch.is_empty() {
                break;
            }
            for t in batch {
                let _ = t.join();
            }
        }
        for p in &self.sockets {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Read access to the connection list (for `show`).
#[derive(Clone)]
pub struct ConnBoard(Arc<Shared>);

impl ConnBoard {
    pub fn connections(&self) -> Vec<ConnInfo> {
        guard(&self.0.conns).values().cloned().collect()
    }

    /// The controllers the switch connects to (`ovs-vsctl
    /// get-controller`).
    pub fn controllers(&self) -> Vec<String> {
        guard(&self.0.controllers).keys().cloned().collect()
    }

    /// Replaces the controllers (`ovs-vsctl set-controller`; none:
    /// `del-controller`). A controller that stays keeps its connection; a
    /// removed one's connection is closed; an added one is dialled. Flows
    /// stay. Every target is checked before anything changes.
    pub fn set_controllers<B: Device>(
        &self,
        core: &Core<B>,
        targets: &[String],
    ) -> anyhow::Result<Vec<String>> {
        let mut wanted = Vec::new();
        for t in targets {
            let ctl = Controller::parse(t)?;
            if ctl.ssl && guard(&self.0.tls).0.is_none() {
                anyhow::bail!("\"{t}\" needs keys and certificates: [openflow.ssl] in the config, or ovs-vsctl set-ssl");
            }
            if !wanted.contains(&ctl) {
                wanted.push(ctl);
            }
        }
        let names: Vec<String> = wanted.iter().map(ToString::to_string).collect();
        {
            let mut now = guard(&self.0.controllers);
            now.retain(|name, removed| {
                let keep = names.contains(name);
                if !keep {
                    removed.store(true, Ordering::Relaxed);
                    info!(controller = %name, "OpenFlow controller removed");
                }
                keep
            });
        }
        for ctl in wanted {
            if !guard(&self.0.controllers).contains_key(&ctl.to_string()) {
                add_controller(core, &self.0, ctl)?;
            }
        }
        Ok(self.controllers())
    }

    /// The keys and certificates `ssl:` controllers and `pssl:` listeners
    /// use from now on (`ovs-vsctl set-ssl`; `None`: none); connections
    /// open now keep theirs. Whether they changed.
    pub fn set_ssl(&self, ssl: Option<&crate::config::SslConfig>) -> anyhow::Result<bool> {
        let mut now = guard(&self.0.tls);
        if now.1.as_ref() == ssl {
            return Ok(false);
        }
        let tls = ssl.map(TlsSettings::load).transpose()?;
        *now = (tls.map(Arc::new), ssl.cloned());
        Ok(true)
    }

    /// The OpenFlow versions new connections may agree to, from a bridge's
    /// `protocols` (`OpenFlow13`, `OpenFlow14`, `OpenFlow15`; the older
    /// ones are not spoken here and are left out); none: all three.
    /// Connections open now keep theirs.
    pub fn set_protocols(&self, names: &[String]) {
        let versions: Vec<u8> = names
            .iter()
            .filter_map(|n| match n.as_str() {
                "OpenFlow13" => Some(openflow::V13),
                "OpenFlow14" => Some(openflow::V14),
                "OpenFlow15" => Some(openflow::V15),
                _ => None,
            })
            .collect();
        let mut now = guard(&self.0.versions);
        if *now != versions {
            info!(protocols = ?names, "OpenFlow versions set");
            *now = versions;
        }
    }

    /// `standalone` (with no controller connected, NORMAL) or `secure`.
    pub fn fail_mode(&self) -> &'static str {
        if self.0.standalone.load(Ordering::Relaxed) {
            "standalone"
        } else {
            "secure"
        }
    }

    /// Sets the fail mode (`ovs-vsctl set-fail-mode`); flows stay.
    pub fn set_fail_mode(&self, mode: &str) -> anyhow::Result<&'static str> {
        let standalone = match mode {
            "standalone" => true,
            "secure" => false,
            m => anyhow::bail!("fail mode \"{m}\": expected standalone or secure"),
        };
        self.0.standalone.store(standalone, Ordering::Relaxed);
        info!(mode, "OpenFlow fail mode set");
        Ok(self.fail_mode())
    }

    /// Connections closed at accept: `max_connections` were open.
    pub fn refused(&self) -> u64 {
        self.0.refused.load(Ordering::Relaxed)
    }
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
    /// `pssl:`: TCP, each connection then TLS.
    Tls(TcpListener),
}

impl Listener {
    /// Its file descriptor (to wait on).
    fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) | Listener::Tls(l) => l.as_raw_fd(),
        }
    }

    fn set_nonblocking(&self) -> anyhow::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) | Listener::Tls(l) => l.set_nonblocking(true),
        }
        .context("cannot make the listener non-blocking")
    }

    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Listener::Unix(_) => None,
            Listener::Tcp(l) | Listener::Tls(l) => l.local_addr().ok(),
        }
    }

    /// The next connection, as it came (a `pssl:` one is TLS only once
    /// [`secure`](Self::secure) says so: a connection refused at accept
    /// costs no TLS state).
    fn accept(&self) -> std::io::Result<(Stream, String)> {
        match self {
            Listener::Unix(l) => l
                .accept()
                .map(|(s, _)| (Stream::Unix(s), "unix".to_string())),
            Listener::Tcp(l) | Listener::Tls(l) => {
                l.accept().map(|(s, a)| (Stream::Tcp(s), a.to_string()))
            }
        }
    }

    /// The server side of TLS over `stream`, for a `pssl:` listener.
    fn secure(&self, stream: Stream, tls: Option<&TlsSettings>) -> std::io::Result<Stream> {
        match (self, stream) {
            (Listener::Tls(_), Stream::Tcp(s)) => {
                let tls = tls.ok_or_else(|| std::io::Error::other("no TLS settings"))?;
                Ok(Stream::Tls(tls.accept(s)?))
            }
            (_, stream) => Ok(stream),
        }
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
    Tls(TlsStream),
}

impl Stream {
    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tls(s) => s.sock().shutdown(std::net::Shutdown::Both),
        };
    }

    fn try_clone(&self) -> std::io::Result<Stream> {
        match self {
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            Stream::Tls(s) => s.try_clone().map(Stream::Tls),
        }
    }

    /// Blocking reads that time out each tick; writes that give up after
    /// `stall` without progress.
    fn prepare(&self, stall: Duration) -> std::io::Result<()> {
        let tcp = match self {
            Stream::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_write_timeout(Some(stall))?;
                return s.set_read_timeout(Some(READ_TICK));
            }
            Stream::Tcp(s) => s,
            Stream::Tls(s) => s.sock(),
        };
        tcp.set_nonblocking(false)?;
        tcp.set_nodelay(true)?;
        tcp.set_write_timeout(Some(stall))?;
        tcp.set_read_timeout(Some(READ_TICK))?;
        if let Stream::Tls(s) = self {
            s.start()?;
        }
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

fn accept_loop<B: Device>(
    l: &Listener,
    name: &str,
    core: &Core<B>,
    shared: &Arc<Shared>,
    threads: &Mutex<Vec<JoinHandle<()>>>,
) {
    while !shared.stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((stream, peer)) => {
                // Threads of connections that ended are joined here, so
                // their handles do not pile up.
                guard(threads).retain(|t| !t.is_finished());
                let open = shared.accepted_open.load(Ordering::Relaxed);
                if open >= shared.max_connections {
                    let n = shared.refused.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        warn!(
                            listener = name,
                            %peer,
                            "{open} connections open (openflow.max_connections): \
                             closed a new one ({n} so far)"
                        );
                    }
                    stream.shutdown();
                    continue;
                }
                let tls = guard(&shared.tls).0.clone();
                let stream = match l
                    .secure(stream, tls.as_deref())
                    .and_then(|s| s.prepare(shared.send_stall).map(|()| s))
                {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(listener = name, "cannot set up a connection: {e}");
                        continue;
                    }
                };
                let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
                let (core, sh, listener) = (Arc::clone(core), Arc::clone(shared), name.to_string());
                info!(listener = name, %peer, id, "OpenFlow connection");
                shared.accepted_open.fetch_add(1, Ordering::Relaxed);
                match spawn("esw-of-conn", move || {
                    serve(stream, id, &listener, &peer, &core, &sh, None);
                    sh.accepted_open.fetch_sub(1, Ordering::Relaxed);
                }) {
                    Ok(t) => guard(threads).push(t),
                    Err(e) => {
                        shared.accepted_open.fetch_sub(1, Ordering::Relaxed);
                        warn!("{e:#}")
                    }
                }
            }
            // A new connection is taken as it comes (not at the next
            // tick: every `ovs-ofctl` run would wait for it); the stop
            // flag is looked at every tick.
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                netdev::wait_readable(&[l.fd()], READ_TICK);
            }
            Err(e) => {
                warn!(listener = name, "accept: {e}");
                std::thread::sleep(READ_TICK);
            }
        }
    }
}

/// The servers of a switch's bridges other than the main one.
pub type OtherBridges = super::of_bridges::OfBridges<Shared>;

/// The switch as one connection sees it, under the slow-path lock.
struct View<'a, B: Device> {
    bridge: ofproto::BridgeNo,
    sw: super::SlowGuard<'a, B>,
    roles: MutexGuard<'a, Roles>,
    dpid: u64,
    clock: super::Clock,
    tx: &'a super::TxPorts,
    packet_ins: &'a Arc<super::PacketIns>,
}

impl<'a, B: Device> View<'a, B> {
    /// The switch and the roles, locked, for one message's handling.
    fn of(sh: &'a Shared, core: &'a Core<B>) -> View<'a, B> {
        View {
            bridge: sh.bridge,
            sw: lock(core),
            roles: guard(&sh.roles),
            dpid: sh.dpid,
            clock: sh.clock,
            tx: &sh.tx,
            packet_ins: &sh.packet_ins,
        }
    }
}

impl<B: Device> OfSwitch for View<'_, B> {
    fn features(&self) -> Features {
        Features {
            datapath_id: self.dpid,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: capabilities::FLOW_STATS
                | capabilities::TABLE_STATS
                | capabilities::PORT_STATS,
        }
    }

    fn desc(&self) -> Desc {
        Desc {
            mfr_desc: "eswitch".into(),
            hw_desc: std::any::type_name::<B>()
                .rsplit("::")
                .next()
                .unwrap_or("device")
                .into(),
            sw_desc: format!("eswitchd {}", env!("CARGO_PKG_VERSION")),
            serial_num: String::new(),
            dp_desc: format!("dpid {:016x}", self.dpid),
        }
    }

    fn ports(&self) -> Vec<Port> {
        self.sw.bridge_of_ports(self.bridge)
    }

    fn roles(&mut self) -> &mut Roles {
        &mut self.roles
    }

    type BridgeRef<'r>
        = BridgeGuard<parking_lot::RwLockWriteGuard<'r, ofproto::Bridge>>
    where
        Self: 'r;

    fn bridge(&mut self) -> Self::BridgeRef<'_> {
        BridgeGuard::new(self.sw.pipeline_mut().bridge_mut(), self.bridge)
    }

    type BridgeView<'r>
        = BridgeGuard<parking_lot::RwLockReadGuard<'r, ofproto::Bridge>>
    where
        Self: 'r;

    fn bridge_view(&mut self) -> Self::BridgeView<'_> {
        BridgeGuard::new(self.sw.pipeline().bridge(), self.bridge)
    }

    fn tlv_mod(&mut self, m: &openflow::nx_tlv::TableMod) -> Result<(), openflow::OfpError> {
        if self.bridge == ofproto::BridgeNo::MAIN {
            // The main bridge's options are what the ports decode.
            self.sw.apply_tlv_mod(m)
        } else {
            self.bridge().apply_tlv_mod(m)
        }
    }

    fn ct_flush(&mut self, f: &conntrack::FlushFilter) -> Result<usize, openflow::OfpError> {
        // Nothing matched is no error here (Open vSwitch's OpenFlow flush).
        let n = self.sw.tracker().flush(f).unwrap_or(0);
        // The FDB's entries of what went are taken out by the next pass.
        if n > 0 {
            self.sw.pipeline_mut().request_pass();
        }
        Ok(n)
    }

    fn now(&self) -> megaflow::Timestamp {
        self.clock.now()
    }

    fn tables_synced(&self) -> u64 {
        self.sw.pipeline().synced_tables()
    }

    fn request_sync(&mut self) {
        self.sw.pipeline_mut().request_pass();
    }

    fn sync_now(&mut self) -> bool {
        let now = self.now();
        self.sw.pipeline_mut().sync_targeted(now)
    }

    fn meters(&mut self) -> Option<&mut dyn ofproto::channel::Meters> {
        Some(self.sw.pipeline_mut())
    }

    fn port_stats(&self, port: u32) -> Vec<openflow::PortStatsEntry> {
        let c = self.sw.counters();
        self.sw
            .ports()
            .iter()
            .filter(|p| p.bridge == self.bridge)
            .filter(|p| port == ofproto::OfPort::Any.number() || p.no.0 == port)
            .map(|p| {
                let pc = c.ports.get(&p.no).copied().unwrap_or_default();
                let (rx_dropped, tx_dropped) = self
                    .sw
                    .port_status(p.no)
                    .map_or((0, 0), |s| (s.rx_dropped, s.tx_dropped));
                openflow::PortStatsEntry {
                    port_no: p.no.0,
                    rx_packets: pc.rx.packets,
                    tx_packets: pc.tx_hw.packets + pc.tx_sw.packets,
                    rx_bytes: pc.rx.bytes,
                    tx_bytes: pc.tx_hw.bytes + pc.tx_sw.bytes,
                    rx_dropped,
                    tx_dropped,
                    ..Default::default()
                }
            })
            .collect()
    }

    fn rules_removed(&mut self, removed: &[ofproto::table::RemovedRule]) {
        let now = self.clock.now();
        self.sw.rules_removed(removed, now);
    }

    fn packet_out(
        &mut self,
        in_port: u32,
        actions: &[ofproto::OfAction],
        frame: &[u8],
    ) -> Result<(), openflow::OfpError> {
        let bridge = self.bridge;
        self.send_from_controller(
            "packet-out",
            openflow::OfpError::new(2, 5),
            |sw, now, arena| sw.packet_out(now, (bridge, in_port), actions, frame, arena),
        )
    }

    fn resume(
        &mut self,
        in_port: u32,
        id: u32,
        fields: &[(megaflow::Field, u128, u128)],
        frame: &[u8],
    ) -> Result<(), openflow::OfpError> {
        // Refused: the continuation is gone (or the resumed pipeline failed).
        let stale = openflow::flow::nx_packet_in::STALE;
        self.send_from_controller("resume", stale, |sw, now, arena| {
            sw.resume(now, (in_port, id), fields, frame, arena)
        })
    }
}

impl<B: Device> View<'_, B> {
    /// Runs `f` (a PACKET_OUT or an NXT_RESUME) and sends what it put out;
    /// a refusal is `refused` (what failed is logged).
    fn send_from_controller(
        &mut self,
        what: &str,
        refused: openflow::OfpError,
        f: impl FnOnce(
            &mut crate::switch::Switch<B, super::ThreadedDatapaths>,
            megaflow::Timestamp,
            &mut super::TxArena,
        ) -> Result<(), ofproto::XlateError>,
    ) -> Result<(), openflow::OfpError> {
        let mut arena = super::TxArena::with_queues(self.packet_ins, None);
        let now = self.clock.now();
        f(&mut self.sw, now, &mut arena).map_err(|e| {
            debug!("{what} refused: {e}");
            refused
        })?;
        let mut ports = super::lock_tx(self.tx);
        arena.flush(ports.iter_mut().map(|(no, p)| (*no, p)));
        Ok(())
    }
}

/// What another thread needs to send a connection packet-ins: where to
/// write, and what the connection asked for.
struct ConnHandle {
    writer: Mutex<Stream>,
    /// Its role, async configuration and miss_send_len, as of its last
    /// message.
    /// Role, async configuration, miss_send_len, packet-ins as
    /// NXT_PACKET_IN2.
    /// Role, async configuration, miss_send_len, NXT_PACKET_IN2 wanted,
    /// the connection's OpenFlow version.
    wants: Mutex<(u32, openflow::AsyncConfig, u16, bool, u8)>,
    /// Packet-ins waiting for the connection's writer thread.
    queue: std::sync::mpsc::SyncSender<Vec<u8>>,
    bucket: Mutex<TokenBucket>,
    /// Packet-ins queued and dropped; other async messages (FLOW_REMOVED,
    /// PORT_STATUS) queued and dropped.
    sent: AtomicU64,
    dropped: AtomicU64,
    events_sent: AtomicU64,
    events_dropped: AtomicU64,
    /// The connection ended: the writer thread stops.
    closed: AtomicBool,
}

/// Packet-ins a connection may have waiting before more are dropped.
const CONN_PACKET_INS: usize = 4096;

/// Most bytes of packet-ins gathered into one write.
const WRITE_BATCH: usize = 64 * 1024;

/// Hands each packet-in to every connection that wants it (not a slave,
/// its async mask allows the reason, its rate allows one more), never
/// waiting on any: a slow or flooded controller only loses its own.
fn distribute(rx: &std::sync::mpsc::Receiver<PacketInEvent>, sh: &Shared) {
    use megaflow::actions::UserspaceReason;
    use openflow::flow::{packet_in_reason, PacketIn, NO_BUFFER};
    while let Some(ev) = next_or_stop(rx, sh) {
        let UserspaceReason::Controller {
            table,
            cookie,
            miss,
            metadata,
            extra,
            ..
        } = ev.reason
        else {
            continue;
        };
        // Another bridge's: its own server's controllers (none running:
        // nobody takes it).
        let bridge = ofproto::BridgeNo(extra.as_ref().map_or(0, |x| x.bridge));
        let other;
        let sh: &Shared = if bridge == sh.bridge {
            sh
        } else {
            match sh.others.get(bridge) {
                Some(o) => {
                    other = o;
                    &other
                }
                None => continue,
            }
        };
        let in_port = extra
            .as_ref()
            .and_then(|x| x.in_port)
            .unwrap_or(ev.in_port.0);
        let reason = match extra.as_ref().and_then(|x| x.reason) {
            Some(r) => r,
            None if miss => packet_in_reason::NO_MATCH,
            None => packet_in_reason::ACTION,
        };
        let mut fields = vec![openflow::Oxm::basic(
            openflow::oxm::ofb::IN_PORT,
            &in_port.to_be_bytes(),
        )];
        if metadata != 0 {
            fields.push(openflow::Oxm::basic(
                openflow::oxm::ofb::METADATA,
                &metadata.to_be_bytes(),
            ));
        }
        // The registers that are set (a controller reads its logical ports
        // from them).
        let regs = extra.as_ref().map(|x| x.regs).unwrap_or_default();
        for (i, r) in regs.iter().enumerate().filter(|(_, r)| **r != 0) {
            fields.push(openflow::Oxm {
                class: openflow::oxm::CLASS_NXM1,
                field: i as u8,
                value: r.to_be_bytes().to_vec(),
                mask: None,
            });
        }
        let continuation = extra.as_ref().and_then(|x| x.continuation);
        let userdata = extra.map(|x| x.userdata.clone()).unwrap_or_default();
        let msg = openflow::Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: ev.total_len.min(usize::from(u16::MAX)) as u16,
            reason,
            table_id: table,
            cookie,
            matched: openflow::OxmMatch { fields },
            data: ev.frame,
        });
        // Each format encoded once per version, when the first connection
        // that wants it is reached.
        let cache = EncodedOnce::default();
        let bytes = |nx: bool, version: u8| {
            cache.get(nx, version, || {
                if nx {
                    match &msg {
                        openflow::Message::PacketIn(pin) => openflow::Message::Experimenter {
                            experimenter: openflow::action::NX_VENDOR,
                            exp_type: openflow::flow::nx_packet_in::PACKET_IN2,
                            data: pin.nx_packet_in2_paused(&userdata, continuation),
                        }
                        .to_bytes_as(version, 0)
                        .ok(),
                        _ => None,
                    }
                } else {
                    msg.to_bytes_as(version, 0).ok()
                }
            })
        };
        let now = sh.clock.now();
        let limit = (sh.packet_in_rate > 0).then_some(now);
        deliver(sh, bytes, true, limit, |asy, slot| {
            asy.packet_in_mask[slot] & (1 << reason) != 0
        });
    }
}

/// The next item of `rx`, or `None` once the server stops or the senders
/// are gone.
fn next_or_stop<T>(rx: &std::sync::mpsc::Receiver<T>, sh: &Shared) -> Option<T> {
    use std::sync::mpsc::RecvTimeoutError;
    while !sh.stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(READ_TICK) {
            Ok(v) => return Some(v),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
    None
}

/// Queues `bytes` for every connection whose async configuration (and
/// role: slot 1 for a slave) `wants` it, through its rate limit when
/// `limit` says now; a full queue or an exhausted rate drops (counted),
/// never waits.
/// A message's bytes, encoded at most once per format (standard or
/// Nicira's) and OpenFlow version.
#[derive(Default)]
struct EncodedOnce {
    cells: [[std::cell::OnceCell<Option<Vec<u8>>>; 3]; 2],
}

impl EncodedOnce {
    fn get(&self, nx: bool, version: u8, f: impl FnOnce() -> Option<Vec<u8>>) -> Option<&[u8]> {
        let v = usize::from(version.saturating_sub(openflow::V13)).min(2);
        self.cells[usize::from(nx)][v].get_or_init(f).as_deref()
    }
}

fn deliver<'b>(
    sh: &Shared,
    bytes: impl Fn(bool, u8) -> Option<&'b [u8]>,
    packet_in: bool,
    limit: Option<megaflow::Timestamp>,
    wants: impl Fn(&openflow::AsyncConfig, usize) -> bool,
) {
    // Nothing here waits (try_send), so the map's lock is held throughout:
    // no list copied per packet-in.
    for h in guard(&sh.handles).values() {
        let (role, asy, _, nx2, version) = *guard(&h.wants);
        let Some(bytes) = bytes(nx2, version) else {
            continue;
        };
        let slot = usize::from(role == openflow::message::role::SLAVE);
        if !wants(&asy, slot) {
            continue;
        }
        if limit.is_some_and(|now| !guard(&h.bucket).admit(now)) {
            h.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let (sent, dropped) = if limit.is_some() || packet_in {
            (&h.sent, &h.dropped)
        } else {
            (&h.events_sent, &h.events_dropped)
        };
        match h.queue.try_send(bytes.to_vec()) {
            Ok(()) => sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => dropped.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Sends each switch event (FLOW_REMOVED, PORT_STATUS) to every
/// connection whose async configuration wants its reason.
fn announce(rx: &std::sync::mpsc::Receiver<SwitchEvent>, sh: &Shared) {
    while let Some(ev) = next_or_stop(rx, sh) {
        let (msg, reason, is_port) = match ev {
            SwitchEvent::RuleRemoved { removed, at, tlv } => {
                let m = ofproto::channel::flow_removed(&removed, at, &tlv);
                let reason = m.reason;
                (openflow::Message::FlowRemoved(m), reason, false)
            }
            SwitchEvent::Port { reason, desc, .. } => (
                openflow::Message::PortStatus(openflow::PortStatus { reason, desc }),
                reason,
                true,
            ),
        };
        let cache = EncodedOnce::default();
        deliver(
            sh,
            |_, version| cache.get(false, version, || msg.to_bytes_as(version, 0).ok()),
            false,
            None,
            |asy, slot| {
                let mask = if is_port {
                    asy.port_status_mask[slot]
                } else {
                    asy.flow_removed_mask[slot]
                };
                mask & (1 << reason) != 0
            },
        );
    }
}

/// A connection's packet-in writer: what the distributor queued, written
/// in order, as many as are waiting in one write.
fn write_packet_ins(h: &ConnHandle, rx: &std::sync::mpsc::Receiver<Vec<u8>>, sh: &Shared) {
    let mut batch = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) && !h.closed.load(Ordering::Relaxed) {
        match rx.recv_timeout(READ_TICK) {
            Ok(b) => {
                batch.clear();
                batch.extend_from_slice(&b);
                while batch.len() < WRITE_BATCH {
                    match rx.try_recv() {
                        Ok(b) => batch.extend_from_slice(&b),
                        Err(_) => break,
                    }
                }
                if guard(&h.writer).write_all(&batch).is_err() {
                    return;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// First and longest wait between two attempts to reach a controller
/// (Open vSwitch's defaults).
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Connects to a controller, serves the connection, and on failure or
/// loss tries again after a backoff that doubles up to [`MAX_BACKOFF`].
fn connect_loop<B: Device>(
    ctl: Controller,
    core: &Core<B>,
    sh: &Arc<Shared>,
    removed: &AtomicBool,
) {
    let (name, addr) = (ctl.to_string(), ctl.addr);
    let mut backoff = MIN_BACKOFF;
    let going = || !sh.stop.load(Ordering::Relaxed) && !removed.load(Ordering::Relaxed);
    while going() {
        let tls = guard(&sh.tls).0.clone();
        let dialled =
            TcpStream::connect_timeout(&addr, MIN_BACKOFF).and_then(|s| match (ctl.ssl, tls) {
                (false, _) => Ok(Stream::Tcp(s)),
                (true, Some(tls)) => tls.connect(s).map(Stream::Tls),
                (true, None) => Err(std::io::Error::other(
                    "ssl: without keys and certificates ([openflow.ssl], or the database's SSL row)",
                )),
            });
        match dialled {
            Ok(stream) => {
                if let Err(e) = stream.prepare(sh.send_stall) {
                    warn!(controller = %addr, "cannot set up the connection: {e}");
                } else {
                    let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
                    info!(controller = %addr, id, "connected to the controller");
                    let started = Instant::now();
                    serve(
                        stream,
                        id,
                        &name,
                        &addr.to_string(),
                        core,
                        sh,
                        Some(removed),
                    );
                    if started.elapsed() > MAX_BACKOFF {
                        backoff = MIN_BACKOFF;
                    }
                }
            }
            Err(e) => debug!(controller = %addr, "cannot connect: {e}; again in {backoff:?}"),
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && going() {
            std::thread::sleep(READ_TICK);
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Starts dialling controller `ctl` (on its own thread, until it is
/// removed or the server stops).
fn add_controller<B: Device>(
    core: &Core<B>,
    sh: &Arc<Shared>,
    ctl: Controller,
) -> anyhow::Result<()> {
    let removed = Arc::new(AtomicBool::new(false));
    guard(&sh.controllers).insert(ctl.to_string(), Arc::clone(&removed));
    let (core, sh2) = (Arc::clone(core), Arc::clone(sh));
    let t = spawn("esw-of-ctl", move || {
        connect_loop(ctl, &core, &sh2, &removed)
    })?;
    guard(&sh.threads).push(t);
    info!(controller = %ctl, "OpenFlow controller configured");
    Ok(())
}

/// Fail mode `standalone`: with no controller connection open for an
/// inactivity probe interval, the bridge switches with NORMAL (fail-open);
/// as soon as one is open, the tables again. Each change re-translates
/// every megaflow at a pass asked for now.
fn fail_mode<B: Device>(core: &Core<B>, sh: &Shared) {
    let grace = sh.probe.max(READ_TICK);
    while !sh.stop.load(Ordering::Relaxed) {
        std::thread::sleep(READ_TICK);
        let (open, since) = *guard(&sh.controllers_open);
        // Secure, or no controller configured: the tables, always.
        let standalone = sh.standalone.load(Ordering::Relaxed);
        let configured = !guard(&sh.controllers).is_empty();
        let want = standalone && configured && open == 0 && since.elapsed() >= grace;
        let mut sw = lock(core);
        let now = sw.pipeline().bridge().sub(sh.bridge).map(|b| b.fail_open());
        if now.is_some_and(|on| on != want) {
            if let Some(b) = sw.pipeline_mut().bridge_mut().sub_mut(sh.bridge) {
                b.set_fail_open(want);
            }
            sw.pipeline_mut().request_pass();
            drop(sw);
            if want {
                warn!("no controller for {grace:?}: fail-open, switching with NORMAL");
            } else {
                info!("a controller is connected: the flow tables again");
            }
        }
    }
}

fn serve<B: Device>(
    mut stream: Stream,
    id: u64,
    listener: &str,
    peer: &str,
    core: &Core<B>,
    sh: &Arc<Shared>,
    // A controller connection (active) is closed when its controller is
    // removed: `Some(removed)`.
    cancel: Option<&AtomicBool>,
) {
    let controller = cancel.is_some();
    let mut counted = false;
    let mut conn = Connection::with_versions(id, Instant::now(), sh.probe, &guard(&sh.versions))
        .with_limits(sh.max_message, sh.max_queued);
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => {
            warn!(id, "cannot set up the connection's writer: {e}");
            return;
        }
    };
    let (qtx, qrx) = std::sync::mpsc::sync_channel(CONN_PACKET_INS);
    let handle = Arc::new(ConnHandle {
        writer: Mutex::new(writer),
        wants: Mutex::new((
            openflow::message::role::EQUAL,
            conn.async_config(),
            conn.switch_config().miss_send_len,
            conn.wants_packet_in2(),
            conn.version(),
        )),
        queue: qtx,
        bucket: Mutex::new(TokenBucket::new(
            sh.packet_in_rate,
            sh.packet_in_burst,
            sh.clock.now(),
        )),
        sent: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        events_sent: AtomicU64::new(0),
        events_dropped: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    let pin_writer = {
        let (h, sh) = (Arc::clone(&handle), Arc::clone(sh));
        spawn("esw-of-pktout", move || write_packet_ins(&h, &qrx, &sh))
    };
    guard(&sh.handles).insert(id, Arc::clone(&handle));
    let mut buf = vec![0u8; 64 * 1024];
    let publish = |c: &Connection, roles: &Roles| {
        let st = c.stats();
        guard(&sh.conns).insert(
            id,
            ConnInfo {
                id,
                listener: listener.to_string(),
                peer: peer.to_string(),
                state: c.state().name().to_string(),
                role: role_name(roles.of(id)).to_string(),
                rx_msgs: st.rx_msgs,
                tx_msgs: st.tx_msgs,
                packet_ins: handle.sent.load(Ordering::Relaxed),
                packet_in_drops: handle.dropped.load(Ordering::Relaxed),
                async_sent: handle.events_sent.load(Ordering::Relaxed),
                async_drops: handle.events_dropped.load(Ordering::Relaxed),
                errors_sent: st.errors_sent,
                last_error: c.last_error().map(str::to_string),
            },
        );
    };
    loop {
        let out = conn.take_output();
        if !out.is_empty() {
            if let Err(e) = guard(&handle.writer).write_all(&out) {
                conn.fail(match e.kind() {
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
                        "the peer took nothing for {:?} ({} bytes waiting)",
                        sh.send_stall,
                        out.len()
                    ),
                    _ => format!("write: {e}"),
                });
            }
        }
        if controller && !counted && *conn.state() == ofproto::channel::State::Open {
            counted = true;
            guard(&sh.controllers_open).0 += 1;
        }
        {
            let roles = guard(&sh.roles);
            *guard(&handle.wants) = (
                roles.of(id),
                conn.async_config(),
                conn.switch_config().miss_send_len,
                conn.wants_packet_in2(),
                conn.version(),
            );
            publish(&conn, &roles);
        }
        let removed = cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        if conn.is_closed() || sh.stop.load(Ordering::Relaxed) || removed {
            break;
        }
        if conn.backlogged() {
            // Requests held back while the output was over its limit: act
            // on them before reading more.
            conn.resume(&mut View::of(sh, core));
            continue;
        }
        match stream.read(&mut buf) {
            Ok(0) => conn.peer_closed(),
            Ok(n) => {
                let errors = conn.stats().errors_sent;
                let mut view = View::of(sh, core);
                conn.receive(&buf[..n], &mut view, Instant::now());
                drop(view);
                // Each refusal, with what was refused (as Open vSwitch's
                // "OFPT_ERROR" log lines; the first 100 of a connection,
                // then one in 1000).
                let now_sent = conn.stats().errors_sent;
                if now_sent > errors && (now_sent <= 100 || now_sent % 1000 == 0) {
                    info!(
                        id,
                        %peer,
                        errors = now_sent,
                        "OpenFlow error sent: {}",
                        conn.last_error().unwrap_or("?")
                    );
                }
                // A BARRIER waits, without the lock, for the revalidator
                // pass it asked for.
                while conn.waiting() && !sh.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(BARRIER_POLL);
                    conn.resume(&mut View::of(sh, core));
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                debug!(id, "read: {e}");
                conn.fail(format!("read: {e}"));
            }
        }
        conn.tick(Instant::now());
    }
    let why = match conn.state() {
        ofproto::channel::State::Closed(why) => why.clone(),
        _ => "the daemon is stopping".to_string(),
    };
    info!(id, %peer, "OpenFlow connection closed: {why}");
    if counted {
        let mut c = guard(&sh.controllers_open);
        c.0 -= 1;
        if c.0 == 0 {
            c.1 = Instant::now();
        }
    }
    guard(&sh.handles).remove(&id);
    handle.closed.store(true, Ordering::Relaxed);
    // The writer holds a clone of the socket: shut it so the peer sees the
    // end now.
    stream.shutdown();
    if let Ok(t) = pin_writer {
        let _ = t.join();
    }
    guard(&sh.roles).forget(id);
    guard(&sh.conns).remove(&id);
}

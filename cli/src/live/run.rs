//! `eswitchd run`: the daemon's main thread. Loads the config, starts the
//! [`Daemon`](super::Daemon), the control socket, and a tokio thread for
//! the representor tracker and the signals; applies port events until
//! SIGINT or SIGTERM, then stops everything and leaves the device empty.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;

use anyhow::Context;
use offload::representor::{PortEvent, Tracker};
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

use super::openflow::OfServer;
use super::{lock, Daemon, LiveLimits, PortFactory, StopReport};
use crate::config::Config;
use crate::control;
use crate::control::socket::CtlServer;
use crate::switch::FlowFile;

/// The table a switch gets when the config names no flow file: what a new
/// Open vSwitch bridge has.
pub const DEFAULT_FLOWS: &str = "priority=0,actions=normal";

/// What the main thread waits for.
enum Event {
    Port(PortEvent),
    /// The tracker is up: ports added later are tracked through it.
    Tracker(offload::representor::TrackerHandle),
    /// `eswitchctl add-port`/`del-port`: the daemon's ports change on
    /// this thread; the answer goes back to the control socket.
    PortCmd(control::Request, mpsc::Sender<control::Response>),
    /// What the `Open_vSwitch` database wants of the bridge; what became
    /// of each interface goes back to the OVSDB thread.
    Ovsdb(
        Vec<super::ovsdb::Wanted>,
        mpsc::Sender<Vec<super::ovsdb::IfaceState>>,
    ),
    Stop(&'static str),
    Failed(String),
    /// A thread forwarding depends on panicked.
    ThreadFailed(String),
}

/// How long the control socket waits for the main thread to add or
/// remove a port.
const PORT_CMD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs on the sim eSwitch until SIGINT/SIGTERM (or until the tracker
/// fails); returns what the shutdown removed.
pub fn run(
    cfg: &Config,
    socket: Option<PathBuf>,
    factory: Arc<dyn PortFactory>,
) -> anyhow::Result<StopReport> {
    run_on(cfg, socket, factory, |cfg, flows, factory, limits| {
        Daemon::start(cfg, flows, factory, limits)
    })
}

/// Runs on the device `start` builds the daemon on (the sim, or a real
/// NIC through `Daemon::start_on`).
pub fn run_on<B: crate::switch::Device>(
    cfg: &Config,
    socket: Option<PathBuf>,
    factory: Arc<dyn PortFactory>,
    start: impl FnOnce(
        &Config,
        &FlowFile,
        Arc<dyn PortFactory>,
        LiveLimits,
    ) -> anyhow::Result<Daemon<B>>,
) -> anyhow::Result<StopReport> {
    let flows = match cfg.flows_path() {
        Some(p) => {
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("cannot read flow file {}", p.display()))?;
            FlowFile::parse(&text).with_context(|| format!("in flow file {}", p.display()))?
        }
        // Under a database the controller (ovn-controller) programs the
        // tables: they start empty, as a secure bridge's do.
        None if cfg.ovsdb.is_some() => {
            info!("following an Open_vSwitch database: starting with no flows");
            FlowFile::parse("")?
        }
        None => {
            info!("no flow file in the config: starting with `{DEFAULT_FLOWS}`");
            FlowFile::parse(DEFAULT_FLOWS)?
        }
    };
    // Under a database, the bridge's management socket is listened on
    // from the start (ovn-controller connects as soon as it has made the
    // bridge).
    let with_mgmt;
    let cfg = match &cfg.ovsdb {
        Some(o) => {
            let mut c = cfg.clone();
            let l = o.mgmt_listener();
            if let Some(dir) = l
                .strip_prefix("punix:")
                .and_then(|p| std::path::Path::new(p).parent())
            {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot make {}", dir.display()))?;
            }
            if !c.openflow.listen.contains(&l) {
                c.openflow.listen.push(l);
            }
            with_mgmt = c;
            &with_mgmt
        }
        None => cfg,
    };
    let representors = cfg.representors()?;
    let socket = socket.unwrap_or_else(|| cfg.datapath.control_socket.clone());
    let server = CtlServer::bind(&socket)?;
    let mut daemon = start(cfg, &flows, factory, LiveLimits::from_config(cfg))?;
    let packet_ins = daemon.take_packet_ins();
    let of = OfServer::start(
        &daemon.core(),
        daemon.clock(),
        &cfg.openflow,
        packet_ins,
        daemon.tx_ports(),
    )?;
    let metrics = match cfg.metrics.addr()? {
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .with_context(|| format!("metrics.listen = \"{addr}\": cannot bind"))?;
            l.set_nonblocking(true)
                .context("metrics: cannot make the listener non-blocking")?;
            info!(listen = %addr, "metrics endpoint ready (GET /metrics)");
            Some((l, daemon.scrape_fn(Some(of.board()), &cfg.backend.kind)))
        }
        None => None,
    };
    daemon.set_sflow(&cfg.sflow)?;
    let (core, clock, conns) = (daemon.core(), daemon.clock(), of.board());
    let (tx, events) = mpsc::channel();
    let ovsdb_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ovsdb_thread = match &cfg.ovsdb {
        Some(o) => {
            let main = tx.clone();
            let session = super::ovsdb::Session {
                remote: o.remote.clone(),
                bridge: o.bridge.clone(),
                dpid: cfg.openflow.dpid()?,
            };
            Some(super::ovsdb::spawn(
                session,
                ovsdb_stop.clone(),
                move |w| {
                    let (rtx, rrx) = mpsc::channel();
                    main.send(Event::Ovsdb(w, rtx)).ok()?;
                    rrx.recv_timeout(PORT_CMD_TIMEOUT).ok()
                },
            )?)
        }
        None => None,
    };
    let mut managed = super::ovsdb_apply::Applier::new(&mut daemon, &of, cfg);
    let (main_conns, main_core) = (of.board(), daemon.core());
    let failed = tx.clone();
    daemon.on_thread_failure(move |msg| {
        let _ = failed.send(Event::ThreadFailed(msg));
    });
    let main = tx.clone();
    let ctl = server.serve(move |req| {
        if matches!(
            req,
            control::Request::AddPort { .. } | control::Request::DelPort { .. }
        ) {
            let (rtx, rrx) = mpsc::channel();
            if main.send(Event::PortCmd(req, rtx)).is_err() {
                return control::Response::Error("the daemon is stopping".into());
            }
            return rrx.recv_timeout(PORT_CMD_TIMEOUT).unwrap_or_else(|_| {
                control::Response::Error("the daemon did not answer in time".into())
            });
        }
        if req.is_openflow() {
            return openflow_cmd(&conns, &core, &req);
        }
        let mut r = control::handle(&mut lock(&core), &req, clock.now());
        if let (control::Request::Show, control::Response::Ok(v)) = (&req, &mut r) {
            if let Ok(c) = serde_json::to_value(conns.connections()) {
                v["openflow"] = c;
            }
        }
        r
    });
    info!(socket = %socket.display(), "control socket ready");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    // Routes, addresses and neighbours for the tunnel ports: followed on
    // the netlink thread's runtime.
    // Held to the end: dropping the tracker stops it.
    let _host = match &cfg.underlay {
        // Given: no host state followed.
        Some(u) => {
            daemon.set_underlay(Arc::new(u.underlay(&cfg.port_specs()?)?));
            None
        }
        None => {
            let _on = rt.enter();
            let host = offload::host::HostTracker::start();
            daemon.set_host_state(host.state());
            Some(host)
        }
    };
    let watcher = std::thread::Builder::new()
        .name("esw-netlink".to_string())
        .spawn(move || {
            rt.block_on(async move {
                if let Some((l, scrape)) = metrics {
                    match tokio::net::TcpListener::from_std(l) {
                        Ok(l) => {
                            tokio::spawn(super::metrics::serve(l, scrape));
                        }
                        Err(e) => warn!("metrics: cannot serve: {e}"),
                    }
                }
                if let Err(e) = watch(representors, &tx).await {
                    let _ = tx.send(Event::Failed(format!("{e:#}")));
                }
            })
        })
        .context("cannot start the netlink thread")?;

    let mut failure = None;
    for ev in events.iter() {
        match ev {
            Event::Port(p) => daemon.apply(&p),
            Event::Tracker(t) => daemon.set_tracker(t),
            Event::PortCmd(req, reply) => {
                let _ = reply.send(port_cmd(&mut daemon, &req));
            }
            Event::Ovsdb(wanted, reply) => {
                let _ = reply.send(managed.apply(&mut daemon, &main_conns, &main_core, &wanted));
            }
            Event::Stop(sig) => {
                info!("{sig}: stopping");
                break;
            }
            Event::Failed(e) => {
                let e = format!("representor tracking failed: {e}");
                error!("{e}");
                failure = Some(e);
                break;
            }
            Event::ThreadFailed(e) => {
                // A switch with a dead datapath thread drops its ports'
                // traffic while looking alive: stop, for the service
                // manager to restart it.
                error!("{e}: stopping");
                failure = Some(e);
                break;
            }
        }
    }
    drop(events);
    // The other bridges' servers, then the main thread's handles on the
    // switch go before it stops (it must be the last holder).
    managed.stop();
    drop((main_conns, main_core));
    ovsdb_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = ovsdb_thread {
        if t.join().is_err() {
            warn!("the OVSDB thread panicked");
        }
    }
    ctl.stop();
    // The channels hold the switch; they go first.
    of.stop();
    if let Some(s) = daemon.stop_sflow() {
        info!(
            datagrams = s.datagrams,
            flow_samples = s.flow_samples,
            counter_samples = s.counter_samples,
            send_errors = s.send_errors,
            "sFlow export stopped"
        );
    }
    let report = daemon.stop();
    // The watcher returns once it can no longer send (the receiver is gone).
    if watcher.join().is_err() {
        warn!("the netlink thread panicked");
    }
    let report = report?;
    info!(
        rules_removed = report.rules_removed,
        megaflows = report.megaflows,
        packets = report.packets,
        "stopped: every rule removed, the device is empty"
    );
    match failure {
        Some(e) => Err(anyhow::anyhow!("{e}")),
        None => Ok(report),
    }
}

/// Forwards port events and signals to the main thread.
async fn watch(
    representors: offload::representor::RepresentorConfig,
    tx: &mpsc::Sender<Event>,
) -> anyhow::Result<()> {
    let mut int = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
    let (tracker, mut ports) = Tracker::start(representors, 1024);
    if tx.send(Event::Tracker(tracker.handle())).is_err() {
        return Ok(());
    }
    loop {
        let ev = tokio::select! {
            p = ports.recv() => match p {
                Some(p) => Event::Port(p),
                None => Event::Failed("the netlink event stream ended".to_string()),
            },
            _ = int.recv() => Event::Stop("SIGINT"),
            _ = term.recv() => Event::Stop("SIGTERM"),
        };
        let last = !matches!(ev, Event::Port(_));
        if tx.send(ev).is_err() || last {
            return Ok(());
        }
    }
}

/// Carries out `eswitchctl set-controller`, `get-controller`,
/// `set-fail-mode` and `get-fail-mode` on the OpenFlow side.
fn openflow_cmd<B: crate::switch::Device>(
    conns: &super::openflow::ConnBoard,
    core: &super::Core<B>,
    req: &control::Request,
) -> control::Response {
    use control::{Request, Response};
    let r = match req {
        Request::GetController => Ok(serde_json::json!({ "controllers": conns.controllers() })),
        Request::SetController { targets } => conns
            .set_controllers(core, targets)
            .map(|c| serde_json::json!({ "controllers": c })),
        Request::GetFailMode => Ok(serde_json::json!({ "fail_mode": conns.fail_mode() })),
        Request::SetFailMode { mode } => conns
            .set_fail_mode(mode)
            .map(|m| serde_json::json!({ "fail_mode": m })),
        _ => Err(anyhow::anyhow!("not an OpenFlow command")),
    };
    match r {
        Ok(v) => Response::Ok(v),
        Err(e) => Response::Error(format!("{e:#}")),
    }
}

/// Carries out `eswitchctl add-port`/`del-port` on the daemon.
fn port_cmd<B: crate::switch::Device>(
    daemon: &mut Daemon<B>,
    req: &control::Request,
) -> control::Response {
    use control::{Request, Response};
    let r = match req {
        Request::AddPort {
            name,
            ofport,
            vport,
            kind,
            options,
        } => crate::switch::PortKind::parse_words(name, kind.as_deref(), vport.as_deref())
            .and_then(|(kind, v)| {
                let options = options
                    .iter()
                    .map(|o| match o.split_once('=') {
                        Some((k, v)) => Ok((k.to_string(), v.to_string())),
                        None => Err(anyhow::anyhow!("option \"{o}\": expected NAME=VALUE")),
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                daemon.add_port(name, kind, *ofport, v, &options)
            })
            .map(|p| {
                serde_json::json!({
                    "added": p.name,
                    "ofport": p.no.0,
                    "type": p.kind.to_string(),
                    "vport": p.vport_name(),
                })
            }),
        Request::DelPort { name } => daemon
            .del_port(name)
            .map(|(p, flushed)| serde_json::json!({"removed": p.name, "ofport": p.no.0, "flushed": flushed})),
        _ => Err(anyhow::anyhow!("not a port command")),
    };
    match r {
        Ok(v) => Response::Ok(v),
        Err(e) => Response::Error(format!("{e:#}")),
    }
}

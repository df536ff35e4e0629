//! The Prometheus endpoint (`[metrics] listen`): what `show` and `stats`
//! count, in the exposition format Prometheus scrapes, over HTTP on the
//! daemon's tokio thread.
//!
//! Every scrape takes one snapshot of the switch under the slow-path lock
//! (counters copied, megaflows counted by state; nothing per flow is
//! formatted) and encodes it with prometheus-client, so names and types
//! follow its conventions: counters end in `_total`, durations are
//! seconds. The revalidator's pass durations are the one metric kept
//! between scrapes (a histogram the revalidator thread observes into).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use tracing::{debug, warn};

use super::openflow::ConnInfo;
use crate::switch::{Device, PortStatus, PortSummary, Switch};

/// Labels of one sample.
type Labels = Vec<(String, String)>;

/// What the daemon keeps for the endpoint between scrapes.
#[derive(Debug)]
pub struct LiveMetrics {
    /// Revalidator pass durations, in seconds.
    pub pass_seconds: Histogram,
    /// When a pass last read the hardware counters without an error.
    last_poll: Mutex<Option<Instant>>,
    /// The sFlow sample queue, when export is on (for its drops).
    pub sflow: std::sync::OnceLock<Arc<super::sflow::SampleQueue>>,
}

impl Default for LiveMetrics {
    fn default() -> Self {
        LiveMetrics {
            // 50 µs to ~1.6 s.
            pass_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            last_poll: Mutex::new(None),
            sflow: std::sync::OnceLock::new(),
        }
    }
}

impl LiveMetrics {
    /// A pass that took `seconds`; `polled`: its counter poll succeeded.
    pub fn pass(&self, seconds: f64, polled: bool) {
        self.pass_seconds.observe(seconds);
        if polled {
            *self.last_poll.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }

    fn poll_age(&self) -> Option<Duration> {
        self.last_poll
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed())
    }
}

/// Everything one scrape reports, copied under the lock.
pub struct Snapshot {
    ports: Vec<PortSummary>,
    counters: crate::switch::SwitchCounters,
    stats: ofproto::PipelineStats,
    states: Vec<(megaflow::offload::FlowState, usize)>,
    offloaded: usize,
    undestroyed: usize,
    flow_limit: usize,
    port_flow_limit: usize,
    /// Connections per zone (those with any), the tracker's counters and
    /// limit.
    ct_zones: Vec<(u16, u32)>,
    ct_stats: conntrack::Stats,
    ct_max: u32,
    ct_hw: ofproto::pipeline::CtHwStats,
    /// Each datapath thread's counters (never cleared).
    datapaths: Vec<megaflow::DatapathCounters>,
}

impl Snapshot {
    pub fn of<B: Device, D: ofproto::Datapaths>(sw: &Switch<B, D>) -> Snapshot {
        let p = sw.pipeline();
        Snapshot {
            ports: sw.port_summaries(),
            counters: sw.counters(),
            stats: p.stats().clone(),
            states: p.state_counts(),
            offloaded: p.offloaded_len(),
            undestroyed: p.offloader().lock().undestroyed(),
            flow_limit: p.flow_limit(),
            port_flow_limit: p.config().revalidator.port_flow_limit,
            ct_zones: sw.tracker().zone_counts(),
            ct_stats: sw.tracker().stats(),
            ct_max: sw.tracker().max_conns(),
            ct_hw: sw.pipeline().ct_hw_stats(),
            datapaths: p.datapaths().counters(),
        }
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A family of counters, each set to its value.
fn counters(reg: &mut Registry, name: &str, help: &str, values: &[(Labels, u64)]) {
    let f = Family::<Labels, Counter>::default();
    for (l, v) in values {
        f.get_or_create(l).inc_by(*v);
    }
    reg.register(name, help, f);
}

/// A family of gauges, each set to its value.
fn gauges(reg: &mut Registry, name: &str, help: &str, values: &[(Labels, i64)]) {
    let f = Family::<Labels, Gauge>::default();
    for (l, v) in values {
        f.get_or_create(l).set(*v);
    }
    reg.register(name, help, f);
}

/// A value per path: the device's, the software's.
fn by_path(hw: u64, sw: u64) -> [(Labels, u64); 2] {
    [
        (labels(&[("path", "hardware")]), hw),
        (labels(&[("path", "software")]), sw),
    ]
}

/// One value per port, labelled with the port's name, number and type
/// (`representor`, `uplink`, `internal`) and `more`.
fn per_port<V>(
    rows: &[(&PortSummary, PortStatus)],
    more: &[(&str, &str)],
    value: impl Fn(&PortSummary, &PortStatus) -> V,
) -> Vec<(Labels, V)> {
    rows.iter()
        .map(|(p, st)| {
            let ofport = p.ofport.to_string();
            let mut l = labels(&[("port", &p.name), ("ofport", &ofport), ("type", &p.kind)]);
            l.extend(labels(more));
            (l, value(p, st))
        })
        .collect()
}

fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Each datapath thread's counters (what `eswitchctl dp-stats` shows,
/// here never cleared), labelled by thread.
fn datapath_metrics(reg: &mut Registry, dps: &[megaflow::DatapathCounters]) {
    let per = |value: &dyn Fn(&megaflow::DatapathCounters) -> u64, more: &[(&str, &str)]| {
        dps.iter()
            .enumerate()
            .map(|(i, c)| {
                let mut l = labels(&[("thread", &i.to_string())]);
                l.extend(labels(more));
                (l, value(c))
            })
            .collect::<Vec<_>>()
    };
    counters(
        reg,
        "datapath_packets",
        "Packets the datapath thread ran (first stages; recirculations apart)",
        &per(&|c| c.dp.packets, &[]),
    );
    counters(
        reg,
        "datapath_recirculations",
        "Packets the datapath thread sent on to a next stage (ct(table=T), dp_hash groups), one per stage",
        &per(&|c| c.dp.recirculations, &[]),
    );
    counters(
        reg,
        "datapath_lookups",
        "Stage lookups, by what answered: the exact-match cache, the successor hint of the stage before, a megaflow search, or nothing (a miss to the slow path)",
        &[
            per(&|c| c.cache.emc_hits, &[("result", "emc")]),
            per(&|c| c.cache.hinted_hits, &[("result", "hinted")]),
            per(&|c| c.cache.tss_hits, &[("result", "megaflow")]),
            per(&|c| c.dp.misses, &[("result", "miss")]),
        ]
        .concat(),
    );
    counters(
        reg,
        "datapath_subtable_probes",
        "Megaflow subtables probed by searches (hits and misses)",
        &per(&|c| c.cache.subtable_probes, &[]),
    );
    counters(
        reg,
        "datapath_dropped_packets",
        "Packets the datapath thread dropped on its own: recirculated too deep, forked copies that found no room",
        &[
            per(&|c| c.dp.recirc_too_deep, &[("reason", "recirc_too_deep")]),
            per(&|c| c.dp.forks_lost, &[("reason", "fork_lost")]),
        ]
        .concat(),
    );
}

/// The exposition text of one scrape.
pub fn encode_snapshot(
    s: &Snapshot,
    conns: &[ConnInfo],
    m: &LiveMetrics,
    backend: &str,
) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::with_prefix("eswitch");
    reg.register(
        "build",
        "The running eswitchd: its version and eSwitch backend",
        Info::new(labels(&[
            ("version", env!("CARGO_PKG_VERSION")),
            ("backend", backend),
        ])),
    );
    // Each port's status once (a replay switch has none: defaults).
    let rows: Vec<(&PortSummary, PortStatus)> = s
        .ports
        .iter()
        .map(|p| (p, p.status.clone().unwrap_or_default()))
        .collect();
    let rows = &rows[..];
    counters(
        &mut reg,
        "port_rx_packets",
        "Packets received from the port by the software datapath (the device's own forwarding is in eswitch_port_tx_packets_total{path=\"hardware\"})",
        &per_port(rows, &[("path", "software")], |p, _| p.rx_packets),
    );
    counters(
        &mut reg,
        "port_tx_packets",
        "Packets sent to the port, by the path that forwarded them",
        &[
            per_port(rows, &[("path", "hardware")], |p, _| p.tx_hw_packets),
            per_port(rows, &[("path", "software")], |p, _| p.tx_sw_packets),
        ]
        .concat(),
    );
    counters(
        &mut reg,
        "port_tx_bytes",
        "Bytes sent to the port",
        &per_port(rows, &[], |p, _| p.tx_bytes),
    );
    counters(
        &mut reg,
        "port_dropped_packets",
        "Packets the port could not take: received and not delivered (rx), sends refused (tx)",
        &[
            per_port(rows, &[("direction", "rx")], |_, st| st.rx_dropped),
            per_port(rows, &[("direction", "tx")], |_, st| st.tx_dropped),
        ]
        .concat(),
    );
    counters(
        &mut reg,
        "port_upcalls",
        "Misses of the port queued to the upcall handler",
        &per_port(rows, &[], |_, st| st.upcalls),
    );
    counters(
        &mut reg,
        "port_upcall_drops",
        "Misses of the port dropped (over its rate or its share of the queue)",
        &per_port(rows, &[], |_, st| st.upcall_drops),
    );
    gauges(
        &mut reg,
        "port_megaflows",
        "Megaflows whose in_port is the port",
        &per_port(rows, &[], |_, st| int(st.megaflows)),
    );
    gauges(
        &mut reg,
        "port_up",
        "1 when the port's netdev is there and up",
        &per_port(rows, &[], |_, st| i64::from(st.state == "up")),
    );
    let c = &s.counters;
    counters(
        &mut reg,
        "packets",
        "Packets the switch handled, by the path that handled them",
        &by_path(c.hw_handled, c.sw_handled),
    );
    counters(
        &mut reg,
        "dropped_packets",
        "Packets dropped by the flows' actions, by path",
        &by_path(c.hw_drops, c.sw_drops),
    );
    counters(
        &mut reg,
        "sampled_packets",
        "Packets sampled, by path",
        &by_path(c.hw_samples, c.sw_samples),
    );
    if let Some(q) = m.sflow.get() {
        counters(
            &mut reg,
            "sflow_samples_dropped",
            "Sampled packets the sFlow exporter's queue had no room for",
            &[(
                Vec::new(),
                q.dropped.load(std::sync::atomic::Ordering::Relaxed),
            )],
        );
    }
    let st = &s.stats;
    counters(
        &mut reg,
        "upcalls",
        "Misses admitted to the slow path",
        &[(Vec::new(), st.upcalls)],
    );
    counters(
        &mut reg,
        "upcall_drops",
        "Misses dropped before the slow path, by reason",
        &[
            (labels(&[("reason", "rate")]), c.upcall_drops_rate),
            (labels(&[("reason", "queue_full")]), c.upcall_drops_full),
        ],
    );
    counters(
        &mut reg,
        "tunnel_rx_packets",
        "Frames from an uplink decapsulated in software, entering on a tunnel port (the device's decap counts in its rules)",
        &[(Vec::new(), c.tunnel_rx)],
    );
    counters(
        &mut reg,
        "tunnel_dropped_packets",
        "Tunnel frames for a local endpoint dropped at receive, by reason, and encapsulated copies over the uplink's MTU (too_big)",
        &[
            (labels(&[("reason", "fragment")]), c.tunnel_drop_fragment),
            (labels(&[("reason", "malformed")]), c.tunnel_drop_malformed),
            (labels(&[("reason", "unknown_vni")]), c.tunnel_drop_unknown_vni),
            (labels(&[("reason", "bad_option")]), c.tunnel_drop_bad_option),
            (labels(&[("reason", "too_big")]), c.tunnel_too_big),
        ],
    );
    let mut by_state: BTreeMap<&str, i64> = [
        "new",
        "installed",
        "offloading",
        "offloaded",
        "software",
        "evicting",
    ]
    .into_iter()
    .map(|n| (n, 0))
    .collect();
    for (state, n) in &s.states {
        *by_state.entry(state.name()).or_default() += int(*n);
    }
    gauges(
        &mut reg,
        "megaflows",
        "Megaflows by lifecycle state",
        &by_state
            .iter()
            .map(|(k, v)| (labels(&[("state", k)]), *v))
            .collect::<Vec<_>>(),
    );
    counters(
        &mut reg,
        "megaflows_created",
        "Megaflows made",
        &[(Vec::new(), st.megaflows_created)],
    );
    counters(
        &mut reg,
        "megaflows_removed",
        "Megaflows removed, by reason",
        &[
            (labels(&[("reason", "idle")]), st.aged),
            (labels(&[("reason", "flow_limit")]), st.evicted_limit),
            (labels(&[("reason", "fair_share")]), st.evicted_fair),
        ],
    );
    gauges(
        &mut reg,
        "offloaded_rules",
        "Megaflows in the device now",
        &[(Vec::new(), int(s.offloaded))],
    );
    gauges(
        &mut reg,
        "undestroyed_rules",
        "Device rules whose destroy was refused, being retried",
        &[(Vec::new(), int(s.undestroyed))],
    );
    counters(
        &mut reg,
        "offload_failures",
        "Offloads the device or the model refused, by reason",
        &st.offload_failures
            .iter()
            .map(|(r, n)| (labels(&[("reason", r)]), *n))
            .collect::<Vec<_>>(),
    );
    gauges(
        &mut reg,
        "flow_limit",
        "The flow limit now (it follows the revalidator's pace)",
        &[(Vec::new(), int(s.flow_limit))],
    );
    gauges(
        &mut reg,
        "conntrack_connections",
        "Tracked connections, by zone (zones with none are left out)",
        &s.ct_zones
            .iter()
            .map(|(z, n)| (labels(&[("zone", &z.to_string())]), i64::from(*n)))
            .collect::<Vec<_>>(),
    );
    gauges(
        &mut reg,
        "conntrack_limit",
        "The most connections the tracker holds (dpctl/ct-set-maxconns)",
        &[(Vec::new(), i64::from(s.ct_max))],
    );
    let ct = &s.ct_stats;
    counters(
        &mut reg,
        "conntrack_created",
        "Connections committed",
        &[(Vec::new(), ct.created)],
    );
    counters(
        &mut reg,
        "conntrack_removed",
        "Connections removed (expired, flushed, ended by force or by a new SYN)",
        &[(Vec::new(), ct.removed)],
    );
    counters(
        &mut reg,
        "conntrack_packets",
        "Packets ct() marked invalid, and ICMP errors it found related to a connection",
        &[
            (labels(&[("state", "invalid")]), ct.invalid),
            (labels(&[("state", "related")]), ct.related),
        ],
    );
    counters(
        &mut reg,
        "conntrack_refused",
        "Commits refused, by reason: the global limit, a zone's limit, no free NAT tuple",
        &[
            (labels(&[("reason", "table_full")]), ct.table_full),
            (labels(&[("reason", "zone_full")]), ct.zone_full),
            (labels(&[("reason", "nat_exhausted")]), ct.nat_exhausted),
        ],
    );
    gauges(
        &mut reg,
        "conntrack_hw_entries",
        "Connection directions in the FDB's conntrack table",
        &[(Vec::new(), s.ct_hw.entries as i64)],
    );
    counters(
        &mut reg,
        "conntrack_hw_packets",
        "Packets the FDB's conntrack entries forwarded",
        &[(Vec::new(), s.ct_hw.packets)],
    );
    counters(
        &mut reg,
        "conntrack_hw_changes",
        "Conntrack table entries installed, refused by the device, and removed",
        &[
            (labels(&[("change", "installed")]), s.ct_hw.installed),
            (labels(&[("change", "refused")]), s.ct_hw.refused),
            (labels(&[("change", "removed")]), s.ct_hw.removed),
        ],
    );
    datapath_metrics(&mut reg, &s.datapaths);
    gauges(
        &mut reg,
        "port_flow_limit",
        "The most megaflows one in_port may hold (0: no limit)",
        &[(Vec::new(), int(s.port_flow_limit))],
    );
    counters(
        &mut reg,
        "flow_limit_hits",
        "Misses not cached: the flow table was full",
        &[(Vec::new(), st.flow_limit_hits)],
    );
    counters(
        &mut reg,
        "revalidator_passes",
        "Revalidator passes run",
        &[(Vec::new(), st.passes)],
    );
    reg.register_with_unit(
        "revalidator_pass",
        "How long a revalidator pass took",
        Unit::Seconds,
        m.pass_seconds.clone(),
    );
    counters(
        &mut reg,
        "counter_poll_errors",
        "Hardware counter polls that failed",
        &[(Vec::new(), st.poll_errors)],
    );
    if let Some(age) = m.poll_age() {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(age.as_secs_f64());
        reg.register_with_unit(
            "counter_poll_age",
            "Time since the hardware counters were last read without an error",
            Unit::Seconds,
            g,
        );
    }
    let mut by_conn: BTreeMap<(String, String), i64> = BTreeMap::new();
    for c in conns {
        *by_conn
            .entry((c.state.clone(), c.role.clone()))
            .or_default() += 1;
    }
    gauges(
        &mut reg,
        "openflow_connections",
        "OpenFlow connections open now, by state and role",
        &by_conn
            .iter()
            .map(|((s, r), n)| (labels(&[("state", s), ("role", r)]), *n))
            .collect::<Vec<_>>(),
    );
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

/// The content type of [`encode_snapshot`]'s text (OpenMetrics, which
/// Prometheus negotiates and reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Makes one scrape's text (or an error to answer with).
pub type Scrape = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// Serves `GET /metrics` (and `/`) on `listener` until the runtime ends;
/// anything else is 404, a method other than GET or HEAD 405.
pub async fn serve(listener: tokio::net::TcpListener, scrape: Scrape) {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioIo, TokioTimer};
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!("metrics: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let scrape = Arc::clone(&scrape);
        tokio::spawn(async move {
            let svc = service_fn(move |req| respond(req, Arc::clone(&scrape)));
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                debug!(%peer, "metrics connection: {e}");
            }
        });
    }
}

async fn respond(
    req: hyper::Request<hyper::body::Incoming>,
    scrape: Scrape,
) -> Result<hyper::Response<http_body_util::Full<bytes::Bytes>>, Infallible> {
    use hyper::{Method, StatusCode};
    let reply = |code: StatusCode, ctype: &str, body: String| {
        let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
        *r.status_mut() = code;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    if !matches!(req.uri().path(), "/metrics" | "/") {
        return Ok(reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "eswitchd serves its metrics at /metrics\n".into(),
        ));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET /metrics\n".into(),
        ));
    }
    // The snapshot takes the slow-path lock: off the runtime's thread.
    let text = tokio::task::spawn_blocking(move || scrape())
        .await
        .unwrap_or_else(|e| Err(format!("the scrape failed: {e}")));
    Ok(match text {
        Ok(t) => reply(StatusCode::OK, CONTENT_TYPE, t),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", e + "\n"),
    })
}

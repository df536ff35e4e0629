//! `eswitchd run --ovsdb REMOTE`: the switch daemon of an `Open_vSwitch`
//! database, as `ovs-vswitchd` is (Open vSwitch's `vswitchd/bridge.c`).
//!
//! A thread of its own holds the session: it connects (again and again,
//! 1 s to 8 s apart, while the server is away), takes the `ovs_vswitchd`
//! lock (one switch daemon per database), monitors `Open_vSwitch`,
//! `Bridge`, `Port`, `Interface` and `Controller`, and on every change
//! hands what the database wants of the bridge ([`Wanted`]) to the main
//! thread, which owns the ports. What the main thread made of it comes
//! back ([`IfaceState`]: each interface's OpenFlow port or error) and is
//! written back, as `ovs-vswitchd` writes it: `Interface.ofport`,
//! `error`, `ifindex`, `mac_in_use`, `admin_state` and `link_state`;
//! `Bridge.datapath_id`; `Open_vSwitch.cur_cfg` = `next_cfg` (so
//! `ovs-vsctl` returns), `iface_types` and `datapath_types`.
//!
//! One bridge (`[ovsdb] bridge`, `br-int` by default: OVN's) is the
//! daemon's main bridge; its management socket is
//! `punix:RUNDIR/BRIDGE.mgmt`, listened on from the start. Every other
//! bridge of the database is a bridge of the same switch
//! ([`ofproto::bridges`]), with its own management socket, controllers
//! and fail mode, joined to the others by `patch` ports. The interface
//! named as a bridge is its local port (OpenFlow port 65534, `LOCAL`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::ovsdb::{op, Client, Datum, Notification, Replica};
use serde_json::{json, Value};
use tracing::{info, warn};

/// The lock `ovs-vswitchd` takes.
pub const LOCK: &str = "ovs_vswitchd";
/// `OFPP_LOCAL` as `Interface.ofport` says it.
pub const LOCAL_OFPORT: i64 = 65534;
/// The interface types this daemon takes (`Open_vSwitch.iface_types`).
pub const IFACE_TYPES: [&str; 5] = ["", "internal", "geneve", "vxlan", "patch"];

/// `Datapath.capabilities` of the `system` datapath: only what eswitch
/// does (the keys Open vSwitch writes; a key missing reads as false, and
/// ovn-controller then writes simpler flows). `ct_flush`: NXT_CT_FLUSH;
/// `dp_hash_l4_sym_support`: the symmetric L4 `hash` of dp_hash groups;
/// `check_pkt_len`: `check_pkt_larger` as a datapath branch (software).
pub const CAPABILITIES: [(&str, &str); 12] = [
    ("check_pkt_len", "true"),
    ("recirc", "true"),
    ("ct_state", "true"),
    ("ct_zone", "true"),
    ("ct_mark", "true"),
    ("ct_label", "true"),
    ("ct_state_nat", "true"),
    ("ct_orig_tuple", "true"),
    ("ct_orig_tuple6", "true"),
    ("ct_flush", "true"),
    ("dp_hash_l4_sym_support", "true"),
    ("max_vlan_headers", "2"),
];

/// One interface of the bridge as the database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iface {
    pub uuid: String,
    pub name: String,
    /// The bridge it is on.
    pub bridge: String,
    /// `""` (a netdev), `internal`, `geneve`, `vxlan`, `patch`...
    pub ty: String,
    pub options: Vec<(String, String)>,
    pub ofport_request: Option<u32>,
    /// `other_config:eswitch-vport`: the eSwitch vport of a netdev that
    /// does not report one itself (a lab's veth standing in for a
    /// representor; `uplink` for the wire side). A ConnectX representor
    /// needs none: its `phys_port_name` says it.
    pub vport: Option<String>,
}

/// What the database wants of one bridge (the main one first, then the
/// others: [`wanted_all`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// The bridge row (`None`: not created yet).
    pub bridge: Option<String>,
    /// `other_config:datapath-id` (16 hex digits), if set.
    pub datapath_id: Option<u64>,
    pub ifaces: Vec<Iface>,
    /// `secure` or `standalone` (the default).
    pub fail_mode: String,
    /// `protocols`: the OpenFlow versions its connections may use
    /// (`OpenFlow13`...; empty: every one this daemon speaks).
    pub protocols: Vec<String>,
    /// `Controller.target`s, as `tcp:IP:PORT`/`ssl:...`.
    pub controllers: Vec<String>,
    /// The `SSL` row `Open_vSwitch.ssl` names (`ovs-vsctl set-ssl`): the
    /// keys and certificates of every bridge's `ssl:` controllers. The
    /// switch's, so on the main bridge's only.
    pub ssl: Option<crate::config::SslConfig>,
    /// The bridge's `sFlow` row (`Bridge.sflow`), as `[sflow]` says it.
    pub sflow: Option<crate::config::SflowConfig>,
}

/// What became of one interface: its OpenFlow port, or why it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfaceState {
    pub uuid: String,
    pub name: String,
    pub ofport: Result<u32, String>,
    /// Its counters (software and hardware together), for
    /// `Interface.statistics`.
    pub stats: Option<megaflow::port::PortStats>,
    /// For `Interface.status`: what the port is to the switch (its eSwitch
    /// vport, a patch port's peer, a tunnel's remote).
    pub status: Vec<(String, String)>,
}

/// `[ovsdb]`-derived settings of a session.
#[derive(Clone, Debug)]
pub struct Session {
    pub remote: String,
    pub bridge: String,
    /// The bridge's datapath id, written to `Bridge.datapath_id`.
    pub dpid: u64,
}

/// Runs sessions until `stop`; `apply` is the main thread's answer to
/// each set of [`Wanted`] bridges (`None`: the daemon is stopping).
pub fn spawn(
    s: Session,
    stop: Arc<AtomicBool>,
    apply: impl Fn(Vec<Wanted>) -> Option<Vec<IfaceState>> + Send + 'static,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    Ok(std::thread::Builder::new()
        .name("esw-ovsdb".to_string())
        .spawn(move || {
            let mut backoff = Duration::from_secs(1);
            while !stop.load(Ordering::Relaxed) {
                match session(&s, &stop, &apply) {
                    Ok(()) => return,
                    Err(e) => warn!(remote = %s.remote, "OVSDB session: {e:#}; again in {}s", backoff.as_secs()),
                }
                let until = Instant::now() + backoff;
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                backoff = (backoff * 2).min(Duration::from_secs(8));
            }
        })?)
}

/// The monitored columns.
fn monitor_requests() -> Value {
    json!({
        "Open_vSwitch": {"columns": ["next_cfg", "cur_cfg", "bridges", "iface_types", "datapath_types", "datapaths", "ssl"]},
        "SSL": {"columns": ["private_key", "certificate", "ca_cert"]},
        "Datapath": {"columns": ["capabilities", "datapath_version"]},
        "Bridge": {"columns": ["name", "ports", "fail_mode", "controller", "datapath_id", "other_config", "sflow", "protocols"]},
        "sFlow": {"columns": ["agent", "targets", "header", "sampling", "polling"]},
        "Port": {"columns": ["name", "interfaces"]},
        "Interface": {"columns": ["name", "type", "options", "other_config", "ofport", "ofport_request", "error", "statistics",
                                  "ifindex", "mac_in_use", "admin_state", "link_state"]},
        "Controller": {"columns": ["target"]},
    })
}

fn session(
    s: &Session,
    stop: &AtomicBool,
    apply: &impl Fn(Vec<Wanted>) -> Option<Vec<IfaceState>>,
) -> anyhow::Result<()> {
    let client = Client::connect(&s.remote)?;
    if !client.lock(LOCK)? {
        info!(remote = %s.remote, "waiting for the {LOCK} lock (another switch daemon holds it)");
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            match client.next_notification(Duration::from_millis(200)) {
                Some(Notification::Locked(l)) if l == LOCK => break,
                _ => {}
            }
            if let Some(why) = client.closed() {
                anyhow::bail!("{why}");
            }
        }
    }
    info!(remote = %s.remote, bridge = %s.bridge, "OVSDB: {LOCK} lock held, following the database");
    let mut db = Replica::new();
    db.apply(&client.monitor("Open_vSwitch", json!("eswitchd"), monitor_requests())?);
    let mut last: Option<(Vec<Wanted>, i64)> = None;
    let mut refresh = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let wanted = wanted_all(&db, &s.bridge);
        let next_cfg = root(&db)
            .and_then(|(_, r)| r.get("next_cfg").and_then(Datum::as_i64))
            .unwrap_or(0);
        let changed = last.as_ref() != Some(&(wanted.clone(), next_cfg));
        if changed || refresh.elapsed() >= Duration::from_secs(5) {
            let Some(states) = apply(wanted.clone()) else {
                return Ok(());
            };
            let ops = write_back(&db, s, &wanted, &states, next_cfg);
            if !ops.is_empty() {
                let mut all = vec![json!({"op": "assert", "lock": LOCK})];
                all.extend(ops);
                client.transact("Open_vSwitch", all)?;
            }
            last = Some((wanted, next_cfg));
            refresh = Instant::now();
        }
        match client.next_notification(Duration::from_millis(500)) {
            Some(Notification::Update { updates, .. }) => db.apply(&updates),
            Some(Notification::Stolen(l)) if l == LOCK => {
                anyhow::bail!("another client stole the {LOCK} lock")
            }
            _ => {}
        }
        if let Some(why) = client.closed() {
            anyhow::bail!("{why}");
        }
    }
}

fn root(db: &Replica) -> Option<(&str, &::ovsdb::Row)> {
    db.only("Open_vSwitch")
}

/// A string map column as pairs.
fn map_pairs(d: Option<&Datum>) -> Vec<(String, String)> {
    match d {
        Some(Datum::Map(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
            .collect(),
        _ => Vec::new(),
    }
}

/// The UUIDs a reference column of `row` holds.
fn uuids<'a>(row: &'a ::ovsdb::Row, col: &str) -> impl Iterator<Item = &'a str> + 'a {
    row.get(col).into_iter().flat_map(|d| d.uuids())
}

/// What the database wants of the main bridge `main` (first, even before
/// it exists) and of every other bridge (by name).
pub fn wanted_all(db: &Replica, main: &str) -> Vec<Wanted> {
    let mut names: Vec<&str> = db
        .rows("Bridge")
        .filter_map(|(_, r)| r.get("name").and_then(Datum::as_str))
        .filter(|n| *n != main)
        .collect();
    names.sort_unstable();
    let mut all: Vec<Wanted> = std::iter::once(main)
        .chain(names)
        .map(|b| wanted(db, b))
        .collect();
    all[0].ssl = ssl(db);
    all
}

/// The `SSL` row the root row names, if whole.
fn ssl(db: &Replica) -> Option<crate::config::SslConfig> {
    let (_, root) = root(db)?;
    let uuid = uuids(root, "ssl").next()?;
    let row = db.row("SSL", uuid)?;
    let path = |c: &str| {
        row.get(c)
            .and_then(Datum::as_str)
            .map(std::path::PathBuf::from)
    };
    Some(crate::config::SslConfig {
        private_key: path("private_key")?,
        certificate: path("certificate")?,
        ca_cert: path("ca_cert")?,
    })
}

/// A bridge's datapath id: `other_config:datapath-id` if set, the main
/// bridge's `main` otherwise, else one made from its name (stable, with
/// the locally administered bit of a MAC, as Open vSwitch's made-up ids).
pub fn bridge_dpid(w: &Wanted, is_main: bool, main: u64) -> u64 {
    if let Some(d) = w.datapath_id {
        return d;
    }
    if is_main {
        return main;
    }
    // FNV-1a over the name, cut to 48 bits.
    let h = w
        .bridge
        .as_deref()
        .unwrap_or_default()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    (h & 0xfeff_ffff_ffff) | 0x0200_0000_0000
}

/// What the database wants of `bridge`.
pub fn wanted(db: &Replica, bridge: &str) -> Wanted {
    let Some((_, br)) = db.find("Bridge", "name", bridge) else {
        return Wanted::default();
    };
    let mut ifaces = Vec::new();
    for p in uuids(br, "ports") {
        let Some(port) = db.row("Port", p) else {
            continue;
        };
        for i in uuids(port, "interfaces") {
            let Some(row) = db.row("Interface", i) else {
                continue;
            };
            let name = row.get("name").and_then(Datum::as_str).unwrap_or_default();
            ifaces.push(Iface {
                uuid: i.to_string(),
                name: name.to_string(),
                bridge: bridge.to_string(),
                ty: row
                    .get("type")
                    .and_then(Datum::as_str)
                    .unwrap_or_default()
                    .to_string(),
                options: map_pairs(row.get("options")),
                ofport_request: row
                    .get("ofport_request")
                    .and_then(Datum::as_i64)
                    .and_then(|v| u32::try_from(v).ok()),
                vport: map_pairs(row.get("other_config"))
                    .into_iter()
                    .find(|(k, _)| k == "eswitch-vport")
                    .map(|(_, v)| v),
            });
        }
    }
    ifaces.sort_by(|a, b| a.name.cmp(&b.name));
    let controllers = uuids(br, "controller")
        .filter_map(|u| {
            db.row("Controller", u)?
                .get("target")?
                .as_str()
                .map(str::to_string)
        })
        .collect();
    Wanted {
        bridge: Some(bridge.to_string()),
        datapath_id: map_pairs(br.get("other_config"))
            .into_iter()
            .find(|(k, _)| k == "datapath-id")
            .and_then(|(_, v)| u64::from_str_radix(&v, 16).ok()),
        ifaces,
        fail_mode: br
            .get("fail_mode")
            .and_then(Datum::as_str)
            .filter(|m| !m.is_empty())
            .unwrap_or("standalone")
            .to_string(),
        controllers,
        protocols: match br.get("protocols") {
            Some(Datum::Set(s)) => s
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        },
        ssl: None,
        sflow: uuids(br, "sflow")
            .next()
            .and_then(|u| db.row("sFlow", u))
            .map(sflow),
    }
}

/// An `sFlow` row as `[sflow]` says it, with Open vSwitch's defaults (1 in
/// 400 packets, counters every 30 s, 128 header bytes, port 6343). An
/// agent given as an address is the datagrams' agent; an interface name
/// leaves it to the route to the first collector.
fn sflow(row: &::ovsdb::Row) -> crate::config::SflowConfig {
    let int = |c: &str, default: i64| row.get(c).and_then(Datum::as_i64).unwrap_or(default);
    let collectors = match row.get("targets") {
        Some(Datum::Set(s)) => s
            .iter()
            .filter_map(|a| a.as_str())
            .map(|t| match t.rsplit_once(':') {
                Some((_, p)) if p.parse::<u16>().is_ok() => t.to_string(),
                _ => format!("{t}:6343"),
            })
            .collect(),
        _ => Vec::new(),
    };
    crate::config::SflowConfig {
        collectors,
        agent: row
            .get("agent")
            .and_then(Datum::as_str)
            .and_then(|a| a.parse().ok()),
        sampling_rate: u32::try_from(int("sampling", 400)).unwrap_or(400),
        polling_interval: u64::try_from(int("polling", 30)).unwrap_or(30),
        header_bytes: usize::try_from(int("header", 128))
            .unwrap_or(128)
            .clamp(14, 1024),
        ..crate::config::SflowConfig::default()
    }
}

/// A netdev as sysfs tells it.
struct NetdevFacts {
    ifindex: i64,
    mac: String,
    up: bool,
    /// The driver its device is bound to (`Interface.status:driver_name`,
    /// as Open vSwitch writes it).
    driver: Option<String>,
}

/// A netdev's ifindex, MAC, whether it is up and its driver, from sysfs
/// (`None`: no netdev of that name here).
fn netdev_facts(name: &str) -> Option<NetdevFacts> {
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    Some(NetdevFacts {
        ifindex: read("ifindex")?.parse().ok()?,
        mac: read("address").unwrap_or_default(),
        up: read("operstate").is_some_and(|s| s == "up" || s == "unknown"),
        driver: std::fs::read_link(dir.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
    })
}

/// The changes that make the database say what the daemon did: only the
/// columns that differ (a write of the same value would wake every
/// client for nothing).
fn write_back(
    db: &Replica,
    s: &Session,
    wanted: &[Wanted],
    states: &[IfaceState],
    next_cfg: i64,
) -> Vec<Value> {
    let mut ops = Vec::new();
    // Sets compare whatever their order (the server keeps its own).
    let differs = |row: Option<&::ovsdb::Row>, col: &str, v: &Datum| {
        let sorted = |d: &Datum| {
            let mut v: Vec<String> = match d {
                Datum::Set(s) => s.iter().map(|a| format!("{a:?}")).collect(),
                Datum::Map(m) => m.iter().map(|p| format!("{p:?}")).collect(),
            };
            v.sort();
            v
        };
        row.and_then(|r| r.get(col)).map(sorted) != Some(sorted(v))
    };
    for st in states {
        let row = db.row("Interface", &st.uuid);
        let mut cols: Vec<(&str, Datum)> = Vec::new();
        let (ofport, error) = match &st.ofport {
            Ok(p) => (Datum::integer(i64::from(*p)), Datum::empty()),
            Err(e) => (Datum::integer(-1), Datum::string(e.clone())),
        };
        cols.push(("ofport", ofport));
        cols.push(("error", error));
        let facts = netdev_facts(&st.name);
        let (ifindex, mac, up) = match &facts {
            Some(f) => (
                Datum::integer(f.ifindex),
                Datum::string(f.mac.clone()),
                f.up,
            ),
            None => (Datum::empty(), Datum::empty(), false),
        };
        let state = Datum::string(if up && st.ofport.is_ok() {
            "up"
        } else {
            "down"
        });
        cols.push(("ifindex", ifindex));
        cols.push(("mac_in_use", mac));
        cols.push(("admin_state", state.clone()));
        cols.push(("link_state", state));
        let mut status = st.status.clone();
        if let Some(d) = facts.and_then(|f| f.driver) {
            status.push(("driver_name".into(), d));
        }
        cols.push((
            "status",
            Datum::string_map(status.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        ));
        if let Some(s) = &st.stats {
            // As ovs-vswitchd writes them (every 5 s here too).
            let n = |v: u64| ::ovsdb::Atom::Integer(i64::try_from(v).unwrap_or(i64::MAX));
            let pairs = [
                ("rx_packets", s.rx_packets),
                ("rx_bytes", s.rx_bytes),
                ("rx_dropped", s.rx_dropped),
                ("tx_packets", s.tx_packets),
                ("tx_bytes", s.tx_bytes),
                ("tx_dropped", s.tx_dropped),
            ];
            cols.push((
                "statistics",
                Datum::Map(
                    pairs
                        .iter()
                        .map(|(k, v)| (::ovsdb::Atom::String((*k).into()), n(*v)))
                        .collect(),
                ),
            ));
        }
        let cols: Vec<(&str, Datum)> = cols
            .into_iter()
            .filter(|(c, v)| differs(row, c, v))
            .collect();
        if !cols.is_empty() && row.is_some() {
            ops.push(op::update("Interface", vec![op::uuid_is(&st.uuid)], &cols));
        }
    }
    for (i, w) in wanted.iter().enumerate() {
        let Some((uuid, row)) = w
            .bridge
            .as_deref()
            .and_then(|b| db.find("Bridge", "name", b))
        else {
            continue;
        };
        let dpid = Datum::string(format!("{:016x}", bridge_dpid(w, i == 0, s.dpid)));
        if differs(Some(row), "datapath_id", &dpid) {
            ops.push(op::update(
                "Bridge",
                vec![op::uuid_is(uuid)],
                &[("datapath_id", dpid)],
            ));
        }
    }
    if let Some((uuid, row)) = root(db) {
        let mut cols: Vec<(&str, Datum)> = Vec::new();
        let cur = Datum::integer(next_cfg);
        if differs(Some(row), "cur_cfg", &cur) {
            cols.push(("cur_cfg", cur));
        }
        let types = Datum::Set(
            IFACE_TYPES
                .iter()
                .map(|t| ::ovsdb::Atom::String((*t).into()))
                .collect(),
        );
        if differs(Some(row), "iface_types", &types) {
            cols.push(("iface_types", types));
        }
        let dps = Datum::Set(vec![::ovsdb::Atom::String("system".into())]);
        if differs(Some(row), "datapath_types", &dps) {
            cols.push(("datapath_types", dps));
        }
        if !cols.is_empty() {
            ops.push(op::update("Open_vSwitch", vec![op::uuid_is(uuid)], &cols));
        }
        // The `system` datapath's row: made once, its capabilities kept.
        let caps = Datum::string_map(CAPABILITIES);
        let system = row
            .get("datapaths")
            .and_then(|d| d.get("system"))
            .and_then(|a| a.as_uuid())
            .map(str::to_string);
        match system {
            Some(dp) => {
                if differs(db.row("Datapath", &dp), "capabilities", &caps) {
                    ops.push(op::update(
                        "Datapath",
                        vec![op::uuid_is(&dp)],
                        &[("capabilities", caps)],
                    ));
                }
            }
            None => {
                let version = Datum::string(concat!("eswitchd ", env!("CARGO_PKG_VERSION")));
                ops.push(op::insert(
                    "Datapath",
                    &[("capabilities", caps), ("datapath_version", version)],
                    Some("dp"),
                ));
                ops.push(op::mutate(
                    "Open_vSwitch",
                    vec![op::uuid_is(uuid)],
                    vec![json!([
                        "datapaths",
                        "insert",
                        ["map", [["system", ["named-uuid", "dp"]]]]
                    ])],
                ));
            }
        }
    }
    ops
}

/// What the main thread keeps between two [`Wanted`]s: the ports it
/// added for the database, and how each was asked for.
#[derive(Debug, Default)]
pub struct Managed {
    ports: BTreeMap<String, Iface>,
}

/// A port change the daemon is asked to make.
pub enum PortChange<'a> {
    Add(&'a Iface),
    Del(String),
}

impl Managed {
    /// The changes that make the daemon's ports the database's: ports
    /// gone (or changed: type, options, requested number) are deleted
    /// first, then the new ones added. The bridge's own interface is its
    /// local port, never added.
    pub fn plan<'a>(&self, wanted: &'a [Wanted]) -> Vec<PortChange<'a>> {
        let want: BTreeMap<&str, &Iface> = wanted
            .iter()
            .flat_map(|w| w.ifaces.iter())
            .filter(|i| i.name != i.bridge)
            .map(|i| (i.name.as_str(), i))
            .collect();
        let same = |a: &Iface, b: &Iface| {
            (
                a.ty.as_str(),
                &a.options,
                a.ofport_request,
                &a.vport,
                &a.bridge,
            ) == (
                b.ty.as_str(),
                &b.options,
                b.ofport_request,
                &b.vport,
                &b.bridge,
            )
        };
        let mut out = Vec::new();
        for (name, have) in &self.ports {
            if !want.get(name.as_str()).is_some_and(|w| same(w, have)) {
                out.push(PortChange::Del(name.clone()));
            }
        }
        for (name, w) in &want {
            if !self.ports.get(*name).is_some_and(|have| same(w, have)) {
                out.push(PortChange::Add(w));
            }
        }
        out
    }

    /// A port added (or refused: kept so it is not retried until its row
    /// changes).
    pub fn added(&mut self, i: &Iface) {
        self.ports.insert(i.name.clone(), i.clone());
    }

    pub fn deleted(&mut self, name: &str) {
        self.ports.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, ty: &str) -> Iface {
        Iface {
            uuid: format!("u-{name}"),
            name: name.to_string(),
            bridge: "br-int".to_string(),
            ty: ty.to_string(),
            options: Vec::new(),
            ofport_request: None,
            vport: None,
        }
    }

    #[test]
    fn a_plan_deletes_what_went_or_changed_then_adds_what_is_new_never_the_bridge_itself() {
        let mut m = Managed::default();
        m.added(&iface("vm1", ""));
        m.added(&iface("vm2", ""));
        let w = Wanted {
            bridge: Some("br-int".into()),
            datapath_id: None,
            ifaces: vec![
                iface("br-int", "internal"),
                iface("vm1", ""),
                iface("vm2", "internal"),
                iface("vm3", ""),
            ],
            fail_mode: "secure".into(),
            controllers: Vec::new(),
            protocols: Vec::new(),
            ssl: None,
            sflow: None,
        };
        let plan: Vec<String> = m
            .plan(std::slice::from_ref(&w))
            .iter()
            .map(|c| match c {
                PortChange::Add(i) => format!("+{}", i.name),
                PortChange::Del(n) => format!("-{n}"),
            })
            .collect();
        assert_eq!(plan, vec!["-vm2", "+vm2", "+vm3"]);
    }
}

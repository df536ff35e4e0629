//! The client against Debian's own `ovsdb-server` with Open vSwitch's
//! schema (`SKIP` without them): what `ovs-vsctl` writes reaches a
//! monitor and its replica; transactions, their errors and locks behave
//! as RFC 7047 says; a client that answers `cur_cfg` lets `ovs-vsctl`
//! return at once, as `ovs-vswitchd` does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ovsdb::{op, Atom, Client, Datum, Error, Notification, Replica};
use serde_json::{json, Value};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
const DB: &str = "Open_vSwitch";

/// A private `ovsdb-server` on a unix socket in its own directory; killed
/// (by PID) and removed on drop.
struct Server {
    dir: PathBuf,
    child: Child,
    vsctl: PathBuf,
}

impl Server {
    fn start(test: &str) -> Option<Server> {
        let server = prereq::tool(test, "ovsdb-server")?;
        let tool = prereq::tool(test, "ovsdb-tool")?;
        let vsctl = prereq::tool(test, "ovs-vsctl")?;
        if !Path::new(SCHEMA).exists() {
            prereq::skip(test, format!("{SCHEMA} missing (openvswitch-common)"));
            return None;
        }
        let dir = std::env::temp_dir().join(format!("esw-ovsdb-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = dir.join("conf.db");
        let st = Command::new(tool)
            .arg("create")
            .arg(&db)
            .arg(SCHEMA)
            .status()
            .expect("ovsdb-tool runs");
        assert!(st.success(), "ovsdb-tool create");
        let child = Command::new(server)
            .arg(&db)
            .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
            .arg(format!(
                "--unixctl={}",
                dir.join("ovsdb-server.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                dir.join("ovsdb-server.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ovsdb-server starts");
        let s = Server { dir, child, vsctl };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Client::connect(&s.target()).is_err() {
            assert!(Instant::now() < deadline, "ovsdb-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The root row, as `ovs-vsctl init` makes it.
        s.vsctl(&["--no-wait", "init"]).expect("init");
        Some(s)
    }

    fn target(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl --db=... ARGS`, bounded by its own timeout.
    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.vsctl)
            .arg(format!("--db={}", self.target()))
            .arg("--timeout=10")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (at most 5 s) for an update that makes `cond` true of the replica.
fn until(c: &Client, replica: &mut Replica, what: &str, cond: impl Fn(&Replica) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond(replica) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting for {what}");
        if let Some(Notification::Update { updates, .. }) = c.next_notification(left) {
            replica.apply(&updates);
        }
    }
}

fn all_columns(tables: &[&str]) -> Value {
    Value::Object(
        tables
            .iter()
            .map(|t| ((*t).to_string(), json!({})))
            .collect(),
    )
}

#[test]
fn what_ovs_vsctl_writes_reaches_a_monitor_and_its_replica() {
    const T: &str = "what_ovs_vsctl_writes_reaches_a_monitor_and_its_replica";
    let Some(s) = Server::start(T) else { return };
    let c = Client::connect(&s.target()).expect("connect");
    c.echo().expect("echo");
    let dbs = c.list_dbs().expect("list_dbs");
    assert!(dbs.contains(&DB.to_string()), "{dbs:?}");
    let schema = c.get_schema(DB).expect("schema");
    for t in ["Open_vSwitch", "Bridge", "Port", "Interface", "Controller"] {
        assert!(schema["tables"].get(t).is_some(), "{t} in the schema");
    }
    let mut replica = Replica::new();
    let initial = c
        .monitor(
            DB,
            json!("m"),
            all_columns(&["Open_vSwitch", "Bridge", "Port", "Interface"]),
        )
        .expect("monitor");
    replica.apply(&initial);
    assert!(replica.only("Open_vSwitch").is_some(), "the root row");
    assert_eq!(replica.rows("Bridge").count(), 0);

    s.vsctl(&[
        "--no-wait",
        "add-br",
        "br0",
        "--",
        "set",
        "Bridge",
        "br0",
        "fail_mode=secure",
    ])
    .expect("add-br");
    until(&c, &mut replica, "br0", |r| {
        r.find("Bridge", "name", "br0").is_some()
    });
    let (_, br) = replica.find("Bridge", "name", "br0").expect("br0");
    assert_eq!(br["fail_mode"].as_str(), Some("secure"));
    // add-br makes a port and an interface of the bridge's name, type internal.
    let (iface_uuid, iface) = replica.find("Interface", "name", "br0").expect("interface");
    assert_eq!(iface["type"].as_str(), Some("internal"));
    let (_, port) = replica.find("Port", "name", "br0").expect("port");
    assert_eq!(
        port["interfaces"].uuids().collect::<Vec<_>>(),
        vec![iface_uuid]
    );

    s.vsctl(&[
        "--no-wait",
        "add-port",
        "br0",
        "vm1",
        "--",
        "set",
        "Interface",
        "vm1",
        "type=geneve",
        "options:remote_ip=198.18.0.2",
        "ofport_request=7",
        "external_ids:iface-id=lsp1",
    ])
    .expect("add-port");
    until(&c, &mut replica, "vm1", |r| {
        r.find("Interface", "name", "vm1").is_some()
    });
    let (_, vm1) = replica.find("Interface", "name", "vm1").expect("vm1");
    assert_eq!(vm1["type"].as_str(), Some("geneve"));
    assert_eq!(
        vm1["options"].get("remote_ip"),
        Some(&Atom::String("198.18.0.2".into()))
    );
    assert_eq!(vm1["ofport_request"].as_i64(), Some(7));
    assert_eq!(
        vm1["external_ids"].get("iface-id").and_then(Atom::as_str),
        Some("lsp1")
    );

    s.vsctl(&["--no-wait", "del-br", "br0"]).expect("del-br");
    until(&c, &mut replica, "br0 gone", |r| {
        r.rows("Bridge").count() == 0 && r.rows("Interface").count() == 0
    });
    c.monitor_cancel(json!("m")).expect("cancel");
}

#[test]
fn answering_cur_cfg_lets_ovs_vsctl_return_and_writes_land() {
    const T: &str = "answering_cur_cfg_lets_ovs_vsctl_return_and_writes_land";
    let Some(s) = Server::start(T) else { return };
    let c = Client::connect(&s.target()).expect("connect");
    let mut replica = Replica::new();
    replica.apply(
        &c.monitor(
            DB,
            json!(["cfg"]),
            json!({"Open_vSwitch": {"columns": ["next_cfg", "cur_cfg"]}}),
        )
        .expect("monitor"),
    );
    // The switch's side, as ovs-vswitchd does it: each time next_cfg
    // moves, say it is done by writing it to cur_cfg.
    let target = s.target();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let daemon = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let c = Client::connect(&target).expect("connect");
            let mut r = Replica::new();
            r.apply(
                &c.monitor(
                    DB,
                    json!("d"),
                    json!({"Open_vSwitch": {"columns": ["next_cfg", "cur_cfg"]}}),
                )
                .expect("monitor"),
            );
            let mut answered = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(Notification::Update { updates, .. }) =
                    c.next_notification(Duration::from_millis(50))
                {
                    r.apply(&updates);
                }
                let Some((uuid, row)) = r.only("Open_vSwitch") else {
                    continue;
                };
                let (next, cur) = (row["next_cfg"].as_i64(), row["cur_cfg"].as_i64());
                if next != cur {
                    let uuid = uuid.to_string();
                    c.transact(
                        DB,
                        vec![op::update(
                            "Open_vSwitch",
                            vec![op::uuid_is(&uuid)],
                            &[("cur_cfg", Datum::integer(next.unwrap_or(0)))],
                        )],
                    )
                    .expect("cur_cfg");
                    answered += 1;
                }
            }
            answered
        })
    };
    // ovs-vsctl without --no-wait waits for cur_cfg to reach its
    // next_cfg: it returns, and well within its own timeout.
    let t = Instant::now();
    s.vsctl(&["add-br", "br1"])
        .expect("add-br waits and returns");
    s.vsctl(&["set-fail-mode", "br1", "standalone"])
        .expect("set-fail-mode");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = daemon.join().expect("daemon thread");
    assert!(answered >= 2, "one answer per change: {answered}");
    until(&c, &mut replica, "cur_cfg", |r| {
        r.only("Open_vSwitch")
            .is_some_and(|(_, row)| row["cur_cfg"].as_i64() >= Some(2))
    });
    assert_eq!(
        s.vsctl(&["get", "Bridge", "br1", "fail_mode"])
            .expect("get")
            .trim(),
        "standalone"
    );
}

#[test]
fn transactions_are_all_or_nothing_and_errors_name_the_operation() {
    const T: &str = "transactions_are_all_or_nothing_and_errors_name_the_operation";
    let Some(s) = Server::start(T) else { return };
    let c = Client::connect(&s.target()).expect("connect");
    // A bridge and its port in one transaction, joined by named UUIDs.
    let ops = vec![
        op::insert(
            "Interface",
            &[
                ("name", Datum::string("p0")),
                ("type", Datum::string("internal")),
            ],
            Some("i"),
        ),
        op::insert(
            "Port",
            &[
                ("name", Datum::string("p0")),
                ("interfaces", Datum::atom(Atom::NamedUuid("i".into()))),
            ],
            Some("p"),
        ),
        op::insert(
            "Bridge",
            &[
                ("name", Datum::string("br9")),
                ("ports", Datum::atom(Atom::NamedUuid("p".into()))),
                (
                    "other_config",
                    Datum::string_map([("datapath-id", "00000000000000ab")]),
                ),
            ],
            Some("b"),
        ),
        op::mutate(
            "Open_vSwitch",
            vec![],
            vec![op::mutation(
                "bridges",
                "insert",
                &Datum::atom(Atom::NamedUuid("b".into())),
            )],
        ),
        op::comment("eswitch test"),
    ];
    let r = c.transact(DB, ops).expect("transact");
    let bridge = r[2]["uuid"][1]
        .as_str()
        .expect("the bridge's uuid")
        .to_string();
    assert_eq!(s.vsctl(&["list-br"]).expect("list-br").trim(), "br9");
    assert_eq!(
        s.vsctl(&["list-ports", "br9"]).expect("list-ports").trim(),
        "p0"
    );
    assert_eq!(
        s.vsctl(&["get", "Bridge", "br9", "other_config:datapath-id"])
            .expect("get")
            .trim(),
        "\"00000000000000ab\""
    );
    let sel = c
        .transact(
            DB,
            vec![op::select("Bridge", vec![op::uuid_is(&bridge)], &["name"])],
        )
        .expect("select");
    assert_eq!(sel[0]["rows"][0]["name"], json!("br9"));

    // A bad operation: its index and the server's error, and nothing
    // of the transaction happened (the first insert is undone).
    let e = c
        .transact(
            DB,
            vec![
                op::insert("Bridge", &[("name", Datum::string("br-half"))], None),
                op::insert("Bridge", &[("no_such_column", Datum::integer(1))], None),
            ],
        )
        .expect_err("bad column");
    match &e {
        Error::Transaction {
            index: 1,
            error,
            details,
        } => {
            assert!(
                error.contains("constraint") || error.contains("unknown column"),
                "{e}"
            );
            assert!(details.contains("no_such_column"), "{e}");
        }
        e => panic!("{e:?}"),
    }
    let names = c
        .transact(DB, vec![op::select("Bridge", vec![], &["name"])])
        .expect("select");
    assert_eq!(
        names[0]["rows"].as_array().map(Vec::len),
        Some(1),
        "br-half undone: {names:?}"
    );
    // An unknown table and a bad method: errors, and the connection lives.
    let e = c
        .transact(DB, vec![op::select("NoTable", vec![], &[])])
        .expect_err("no table");
    assert!(
        e.to_string().contains("NoTable") || e.to_string().contains("unknown table"),
        "{e}"
    );
    let e = c.call("no_such_method", json!([])).expect_err("bad method");
    assert!(matches!(e, Error::Rpc { .. }), "{e:?}");
    c.echo().expect("still connected");
}

#[test]
fn a_lock_is_held_by_one_client_and_passes_on_unlock_or_steal() {
    const T: &str = "a_lock_is_held_by_one_client_and_passes_on_unlock_or_steal";
    let Some(s) = Server::start(T) else { return };
    let a = Client::connect(&s.target()).expect("a");
    let b = Client::connect(&s.target()).expect("b");
    assert!(a.lock("ovs_vswitchd").expect("lock"), "a holds it");
    assert!(!b.lock("ovs_vswitchd").expect("lock"), "b waits");
    a.unlock("ovs_vswitchd").expect("unlock");
    assert_eq!(
        b.next_notification(Duration::from_secs(5)),
        Some(Notification::Locked("ovs_vswitchd".into()))
    );
    // Stolen back: b hears of it.
    assert!(a.steal("ovs_vswitchd").expect("steal"));
    assert_eq!(
        b.next_notification(Duration::from_secs(5)),
        Some(Notification::Stolen("ovs_vswitchd".into()))
    );
    // A client that goes away releases what it holds: b's request, still
    // standing since the steal, is granted (asking again is an error).
    assert!(matches!(b.lock("ovs_vswitchd"), Err(Error::Rpc { .. })));
    drop(a);
    assert_eq!(
        b.next_notification(Duration::from_secs(5)),
        Some(Notification::Locked("ovs_vswitchd".into()))
    );
}

#[test]
fn a_server_that_goes_away_fails_calls_with_a_reason() {
    const T: &str = "a_server_that_goes_away_fails_calls_with_a_reason";
    let Some(mut s) = Server::start(T) else {
        return;
    };
    let c = Client::connect(&s.target()).expect("connect");
    c.echo().expect("echo");
    let _ = s.child.kill();
    let _ = s.child.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.closed().is_none() {
        assert!(Instant::now() < deadline, "the close is noticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = c.echo().expect_err("closed");
    assert!(matches!(e, Error::Closed(_)), "{e:?}");
    let e = Client::connect("tcp-but-wrong").expect_err("target");
    assert!(matches!(e, Error::Target(_)), "{e}");
}

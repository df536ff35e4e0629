use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Mutex;

use megaflow::Timestamp;
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

use super::*;
use crate::control::handle;
use crate::switch::{FlowFile, SimSwitch};

const T0: u64 = 1_700_000_000_000_000_000;

/// A temp dir with the socket path in it, removed on drop.
struct TempDir(integration::TempDir);

impl TempDir {
    fn new(name: &str) -> TempDir {
        TempDir(integration::TempDir::new(&format!("eswitch-ctl-{name}")).expect("temp dir"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn sock(&self) -> PathBuf {
        self.path().join("eswitchd.sock")
    }
}

fn switch() -> SimSwitch {
    let ports = crate::replay::default_ports(3);
    let flows =
        FlowFile::parse("priority=10,ip,nw_dst=198.18.0.2,actions=output:2").expect("table");
    SimSwitch::new(
        &ports,
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        Timestamp(T0),
    )
    .expect("switch")
}

/// A server on `path` around a fresh switch.
fn serve(path: &Path) -> CtlHandle {
    let sw = Mutex::new(switch());
    CtlServer::bind(path).expect("bind").serve(move |req| {
        let mut sw = sw.lock().unwrap_or_else(|p| p.into_inner());
        handle(&mut sw, &req, Timestamp(T0 + 1_000_000_000))
    })
}

/// A raw connection: writes lines, reads response lines.
struct Conn {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Conn {
    fn open(path: &Path) -> Conn {
        let w = UnixStream::connect(path).expect("connect");
        w.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let r = BufReader::new(w.try_clone().expect("clone"));
        Conn { w, r }
    }

    fn send(&mut self, line: &str) {
        self.w.write_all(line.as_bytes()).expect("write");
        self.w.write_all(b"\n").expect("write");
    }

    fn recv(&mut self) -> Response {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("read");
        assert!(line.ends_with('\n'), "one line per response: {line:?}");
        serde_json::from_str(&line).expect("response json")
    }
}

fn ok(r: Response) -> serde_json::Value {
    match r {
        Response::Ok(v) => v,
        Response::Error(e) => panic!("error: {e}"),
    }
}

fn err(r: Response) -> String {
    match r {
        Response::Error(e) => e,
        Response::Ok(v) => panic!("expected an error, got {v}"),
    }
}

#[test]
fn one_connection_carries_several_requests() {
    let dir = TempDir::new("several");
    let h = serve(&dir.sock());
    let mut c = Conn::open(&dir.sock());
    c.send(r#"{"cmd":"show"}"#);
    c.send(r#"{"cmd":"add-flow","flow":"priority=20,udp,tp_dst=53,actions=output:3"}"#);
    c.send(r#"{"cmd":"dump-of"}"#);
    let show = ok(c.recv());
    assert_eq!(show["ports"][0]["name"], "vm1");
    assert_eq!(ok(c.recv())["added"], 1);
    let of = ok(c.recv());
    assert_eq!(of["rules"].as_array().expect("rules").len(), 2);
    h.stop();
}

#[test]
fn a_bad_line_gets_an_error_and_the_connection_goes_on() {
    let dir = TempDir::new("bad");
    let h = serve(&dir.sock());
    let mut c = Conn::open(&dir.sock());
    c.send("this is not json");
    c.send(r#"{"cmd":"frobnicate"}"#);
    c.send(r#"{"cmd":"add-flow","flow":"tp_dts=1,actions=drop"}"#);
    c.send(r#"{"cmd":"stats"}"#);
    assert!(err(c.recv()).starts_with("bad request"));
    assert!(err(c.recv()).contains("frobnicate"));
    assert!(err(c.recv()).contains("tp_dts"));
    assert!(ok(c.recv())["flow_limit"].as_u64().is_some());
    // The raw protocol: an error is {"error": "..."}.
    c.send("{");
    let mut raw = String::new();
    c.recv_raw(&mut raw);
    assert!(raw.starts_with(r#"{"error":"bad request: "#), "{raw}");
    h.stop();
}

impl Conn {
    fn recv_raw(&mut self, line: &mut String) {
        self.r.read_line(line).expect("read");
    }
}

#[test]
fn an_overlong_line_is_refused_by_name_and_skipped() {
    let dir = TempDir::new("long");
    let h = serve(&dir.sock());
    let mut c = Conn::open(&dir.sock());
    let long = "x".repeat(MAX_LINE + 100);
    c.send(&long);
    c.send(r#"{"cmd":"show"}"#);
    let e = err(c.recv());
    assert!(e.contains(&MAX_LINE.to_string()), "{e}");
    assert!(ok(c.recv())["ports"].is_array());
    h.stop();
}

#[test]
fn the_socket_is_root_only_in_a_private_directory() {
    let dir = TempDir::new("perm");
    let path = dir.path().join("run").join("eswitch").join("eswitchd.sock");
    let h = serve(&path);
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().expect("dir")), 0o700);
    h.stop();
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = TempDir::new("stale");
    let path = dir.sock();
    // A daemon that died: the file stays, nobody answers.
    drop(UnixListener::bind(&path).expect("old socket"));
    assert!(path.exists());
    let h = serve(&path);
    let r = request(&path, &Request::Show, Duration::from_secs(5)).expect("request");
    assert!(ok(r)["ports"].is_array());
    // A second daemon on the same path is refused; the first goes on.
    let e = CtlServer::bind(&path).expect_err("live socket");
    assert_eq!(
        e.to_string(),
        format!("another eswitchd is listening on {}", path.display())
    );
    assert!(request(&path, &Request::Stats, Duration::from_secs(5)).is_ok());
    h.stop();
}

#[test]
fn a_file_that_is_not_a_socket_is_left_alone() {
    let dir = TempDir::new("file");
    let path = dir.sock();
    std::fs::write(&path, "precious").expect("write");
    let e = CtlServer::bind(&path).expect_err("not a socket");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "precious");
}

#[test]
fn stop_removes_the_socket_and_clients_get_the_hint() {
    let dir = TempDir::new("stop");
    let path = dir.sock();
    let h = serve(&path);
    // An idle connection does not keep stop waiting.
    let _idle = Conn::open(&path);
    assert!(path.exists());
    assert_eq!(h.path(), path.as_path());
    h.stop();
    assert!(!path.exists());
    let e = request(&path, &Request::Show, Duration::from_secs(1)).expect_err("gone");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("cannot connect to eswitchd at {}", path.display())),
        "{msg}"
    );
    assert!(msg.contains("is eswitchd running?"), "{msg}");
    assert!(e.downcast_ref::<ConnectError>().is_some());
    // Dropping a handle stops it too.
    let h = serve(&path);
    assert!(path.exists());
    drop(h);
    assert!(!path.exists());
}

#[test]
fn connections_past_the_cap_are_told_so() {
    let dir = TempDir::new("cap");
    let path = dir.sock();
    let h = serve(&path);
    let mut open: Vec<Conn> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let mut c = Conn::open(&path);
            c.send(r#"{"cmd":"stats"}"#);
            ok(c.recv());
            c
        })
        .collect();
    let mut extra = Conn::open(&path);
    let e = err(extra.recv());
    assert!(e.contains(&format!("limit {MAX_CONNECTIONS}")), "{e}");
    // Closing one frees its slot.
    drop(open.pop());
    let mut served = false;
    for _ in 0..200 {
        // A refused connection is closed at once: the write or the read
        // may fail.
        let mut c = Conn::open(&path);
        let _ = c.w.write_all(b"{\"cmd\":\"stats\"}\n");
        let mut line = String::new();
        let _ = c.r.read_line(&mut line);
        if line.starts_with(r#"{"ok""#) {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(served, "a slot came free");
    drop(open);
    h.stop();
}

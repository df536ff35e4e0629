//! The `eswitchctl` binary against an in-process control server around a
//! sim switch (no root, no NIC).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use cli::control::handle;
use cli::control::socket::{CtlHandle, CtlServer};
use cli::switch::{Discard, FlowFile, SimSwitch};
use megaflow::frame::{FrameSpec, L4};
use megaflow::{PortNo, Timestamp};
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

const T0: u64 = 1_700_000_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

/// A temp dir with the socket path in it, removed on drop.
struct Dir(integration::TempDir);

impl Dir {
    fn new(name: &str) -> Dir {
        Dir(integration::TempDir::new(&format!("eswitchctl-cli-{name}")).expect("temp dir"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn sock(&self) -> PathBuf {
        self.path().join("eswitchd.sock")
    }
}

fn switch() -> SimSwitch {
    let ports = cli::replay::default_ports(3);
    let flows = FlowFile::parse(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:2\npriority=0,actions=drop",
    )
    .expect("table");
    SimSwitch::new(
        &ports,
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("switch")
}

/// A server around a switch that has seen some traffic.
fn serve(path: &Path) -> (CtlHandle, Arc<Mutex<SimSwitch>>) {
    let mut sw = switch();
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 53)).build();
    for i in 0..4 {
        sw.receive(at(i), &[(PortNo(1), &f)], &mut Discard);
    }
    let sw = Arc::new(Mutex::new(sw));
    let shared = Arc::clone(&sw);
    let h = CtlServer::bind(path).expect("bind").serve(move |req| {
        let mut sw = shared.lock().unwrap_or_else(|p| p.into_inner());
        handle(&mut sw, &req, at(1_500))
    });
    (h, sw)
}

fn ctl(sock: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eswitchctl"))
        .arg("--socket")
        .arg(sock)
        .args(args)
        .env_remove("ESWITCH_SOCKET")
        .output()
        .expect("run eswitchctl")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

#[test]
fn every_subcommand_prints_what_the_daemon_knows() {
    let dir = Dir::new("all");
    let sock = dir.sock();
    let (h, _sw) = serve(&sock);

    let show = stdout(&ctl(&sock, &["show"]));
    let lines: Vec<&str> = show.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{show}");
    assert!(
        lines[0].contains("TX(hw)") && lines[0].contains("DROPS"),
        "{show}"
    );
    assert_eq!(lines.len(), 4, "{show}");
    let vm1: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(vm1[0], "vm1");
    assert_eq!(vm1[2], "representor", "type: {show}");
    assert_eq!(vm1[7], "4", "rx: {show}");

    let flows = stdout(&ctl(&sock, &["dump-flows"]));
    assert_eq!(flows.lines().count(), 1, "{flows}");
    assert!(flows.contains("packets:"), "{flows}");
    assert!(flows.contains("offloaded:yes actions:output:2"), "{flows}");
    assert!(flows.contains("used:"), "{flows}");

    let rules = stdout(&ctl(&sock, &["dump-rules"]));
    assert!(rules.starts_with("domain d"), "{rules}");
    assert!(rules.contains("table t0 level 0 (FDB)"), "{rules}");
    assert!(rules.contains("dest_table(level 1)"), "{rules}");
    assert!(rules.contains("outer.dst_ip=198.18.0.2"), "{rules}");
    assert!(rules.contains("dest_vport(2)"), "{rules}");

    let stats = stdout(&ctl(&sock, &["stats"]));
    for name in [
        "packets:",
        "upcalls_queued:",
        "upcall_drops_rate:",
        "hw_drops:",
        "sw_drops:",
    ] {
        assert!(
            stats.lines().any(|l| l.starts_with(name)),
            "{name}: {stats}"
        );
    }
    let packets = stats
        .lines()
        .find(|l| l.starts_with("packets:"))
        .expect("packets");
    assert_eq!(packets.split_whitespace().nth(1), Some("4"));

    let trace = stdout(&ctl(
        &sock,
        &["trace", "in_port=1,udp,nw_dst=198.18.0.2,tp_dst=53"],
    ));
    assert!(trace.contains("Datapath actions: output:2"), "{trace}");
    assert_eq!(trace.matches("Megaflow:").count(), 1, "{trace}");
    assert_eq!(trace.matches("Datapath actions:").count(), 1, "{trace}");

    // --json prints the value as pretty JSON.
    let json = stdout(&ctl(&sock, &["--json", "stats"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["packets"], 4);
    let json = stdout(&ctl(&sock, &["dump-rules", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["domains"][0]["type"], "FDB");
    h.stop();
}

#[test]
fn add_flow_shows_in_dump_of_and_del_flows_removes_it() {
    let dir = Dir::new("edit");
    let sock = dir.sock();
    let (h, _sw) = serve(&sock);
    let before = stdout(&ctl(&sock, &["dump-of"]));
    assert_eq!(before.lines().count(), 2, "{before}");
    assert!(
        before.lines().all(|l| l.starts_with(" n_packets=")),
        "{before}"
    );
    let added = stdout(&ctl(
        &sock,
        &["add-flow", "priority=20,udp,tp_dst=53,actions=output:3"],
    ));
    assert_eq!(added, "added 1, replaced 0\n");
    let after = stdout(&ctl(&sock, &["dump-of"]));
    assert_eq!(after.lines().count(), 3, "{after}");
    let line = after
        .lines()
        .find(|l| l.contains("tp_dst=53"))
        .expect("the new flow");
    assert!(
        line.starts_with(" n_packets=0, n_bytes=0, ") && line.contains("priority=20"),
        "{line}"
    );
    assert!(line.contains("output:3"), "{line}");
    let removed = stdout(&ctl(&sock, &["del-flows", "udp"]));
    assert_eq!(removed, "removed 1\n");
    assert_eq!(stdout(&ctl(&sock, &["dump-of"])).lines().count(), 2);
    h.stop();
}

#[test]
fn a_bad_flow_names_the_bad_token_and_exits_1() {
    let dir = Dir::new("bad");
    let sock = dir.sock();
    let (h, _sw) = serve(&sock);
    let o = ctl(
        &sock,
        &["add-flow", "priority=20,udp,tp_dts=53,actions=output:3"],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("eswitchctl: "), "{err}");
    assert!(err.contains("tp_dts"), "{err}");
    assert!(o.stdout.is_empty());
    // Nothing changed.
    assert_eq!(stdout(&ctl(&sock, &["dump-of"])).lines().count(), 2);
    h.stop();
}

#[test]
fn no_daemon_exits_2_with_the_hint() {
    let dir = Dir::new("none");
    let sock = dir.sock();
    let o = ctl(&sock, &["show"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "eswitchctl: cannot connect to eswitchd at {}",
            sock.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("is eswitchd running? --socket / ESWITCH_SOCKET"),
        "{err}"
    );
    // The environment names the socket when --socket is absent.
    let (h, _sw) = serve(&sock);
    let o = Command::new(env!("CARGO_BIN_EXE_eswitchctl"))
        .arg("stats")
        .env("ESWITCH_SOCKET", &sock)
        .output()
        .expect("run");
    assert!(stdout(&o).contains("packets:"));
    h.stop();
}

//! The daemon's OpenFlow channels with real clients: `ovs-ofctl -O
//! OpenFlow13` (Debian's openvswitch-common) and raw sockets sending what
//! a broken or hostile controller would. Memory ports: no root needed.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use ::openflow::{parse, Framer, Message, OfpError};

use super::openflow::OfServer;
use super::openflow_tls_tests::OsKen;
use super::tests::{config, flows, frame, limits, rep, wait_for, MemFactory};
use super::*;
use crate::config::OpenflowConfig;
use crate::control;

/// A unique directory for this test's socket, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(test: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("esw-of-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn start(sock: &Path, probe_ms: u64) -> (Daemon, OfServer) {
    let (d, of, _) = start_with_ports(sock, probe_ms);
    (d, of)
}

pub(super) type Vms = std::collections::HashMap<String, super::tests::Handles>;

fn start_with_ports(sock: &Path, probe_ms: u64) -> (Daemon, OfServer, Vms) {
    start_cfg(sock, probe_ms, |_| {})
}

pub(super) fn start_cfg(
    sock: &Path,
    probe_ms: u64,
    tune: impl FnOnce(&mut OpenflowConfig),
) -> (Daemon, OfServer, Vms) {
    start_table(sock, probe_ms, &flows(), tune)
}

pub(super) fn start_table(
    sock: &Path,
    probe_ms: u64,
    table: &FlowFile,
    tune: impl FnOnce(&mut OpenflowConfig),
) -> (Daemon, OfServer, Vms) {
    start_daemon(sock, probe_ms, &config(), table, tune)
}

pub(super) fn start_daemon(
    sock: &Path,
    probe_ms: u64,
    cfg: &Config,
    table: &FlowFile,
    tune: impl FnOnce(&mut OpenflowConfig),
) -> (Daemon, OfServer, Vms) {
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3"]);
    let mut d = Daemon::start(cfg, table, factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2", "vm3"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    // vm3's link is down.
    d.apply(&PortEvent::Down { ifindex: 12 });
    let cfg = OpenflowConfig {
        listen: vec![format!("punix:{}", sock.display())],
        datapath_id: "00000000000000ab".into(),
        inactivity_probe_ms: probe_ms,
        packet_in_rate: 0,
        packet_in_burst: 1,
        ..OpenflowConfig::default()
    };
    let mut cfg = cfg;
    tune(&mut cfg);
    let pins = d.take_packet_ins();
    let of = OfServer::start(&d.core(), d.clock(), &cfg, pins, d.tx_ports()).expect("openflow");
    (d, of, h)
}

/// Runs `ovs-ofctl -O OpenFlow13 ARGS... unix:SOCK`; stdout, or the
/// failure with stderr.
pub(super) fn ofctl(bin: &Path, sock: &Path, cmd: &str, extra: &[&str]) -> Result<String, String> {
    ofctl_to(bin, &[], cmd, &format!("unix:{}", sock.display()), extra)
}

/// Runs `ovs-ofctl -O OpenFlow13 OPTIONS... CMD TARGET EXTRA...`.
pub(super) fn ofctl_to(
    bin: &Path,
    options: &[String],
    cmd: &str,
    target: &str,
    extra: &[&str],
) -> Result<String, String> {
    let out = Command::new(bin)
        .args(["-O", "OpenFlow13", "--timeout=10"])
        .args(options)
        .args([cmd, target])
        .args(extra)
        .output()
        .map_err(|e| format!("cannot run ovs-ofctl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn ovs_ofctl_show_and_dump_desc_read_the_switch() {
    const T: &str = "ovs_ofctl_show_and_dump_desc_read_the_switch";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("show");
    let sock = dir.0.join("br0.mgmt");
    let (d, of) = start(&sock, 5000);
    let show = ofctl(&bin, &sock, "show", &[]).expect("ovs-ofctl show");
    assert!(show.contains("OFPT_FEATURES_REPLY (OF1.3)"), "{show}");
    assert!(show.contains("dpid:00000000000000ab"), "{show}");
    assert!(show.contains("n_tables:254"), "{show}");
    for p in [" 1(vm1):", " 2(vm2):", " 3(vm3):"] {
        assert!(show.contains(p), "{p} in {show}");
    }
    // vm3 is down, the others are live.
    let vm3 = show.split(" 3(vm3):").nth(1).expect("vm3");
    assert!(vm3.contains("LINK_DOWN"), "{vm3}");
    let vm1 = show.split(" 1(vm1):").nth(1).expect("vm1");
    let vm1 = vm1.split(" 2(vm2):").next().expect("vm1 block");
    assert!(vm1.contains("LIVE") && !vm1.contains("LINK_DOWN"), "{vm1}");
    assert!(show.contains("OFPT_GET_CONFIG_REPLY"), "{show}");
    let desc = ofctl(&bin, &sock, "dump-desc", &[]).expect("dump-desc");
    assert!(desc.contains("Manufacturer: eswitch"), "{desc}");
    assert!(
        desc.contains("DP Description: dpid 00000000000000ab"),
        "{desc}"
    );
    // No groups yet and no queues: empty answers; the group features.
    let groups = ofctl(&bin, &sock, "dump-groups", &[]).expect("dump-groups");
    assert!(
        groups.contains("OFPST_GROUP_DESC reply (OF1.3)") && !groups.contains("group_id="),
        "{groups}"
    );
    let f = ofctl(&bin, &sock, "dump-group-features", &[]).expect("dump-group-features");
    assert!(
        [
            "all group:",
            "select group:",
            "indirect group:",
            "fast failover group:"
        ]
        .iter()
        .all(|t| f.contains(t))
            && f.contains("max_groups=0x10000"),
        "{f}"
    );
    let q = ofctl(&bin, &sock, "queue-get-config", &["1"]).expect("queue-get-config");
    assert!(q.contains("OFPT_QUEUE_GET_CONFIG_REPLY (OF1.3)"), "{q}");
    let e = ofctl(&bin, &sock, "mod-port", &["vm1", "down"]).expect_err("mod-port");
    assert!(e.contains("OFPPMFC_EPERM"), "{e}");
    // A client that speaks only 1.0 is refused with HELLO_FAILED, and
    // says so.
    let target = format!("unix:{}", sock.display());
    let out = Command::new(&bin)
        .args(["-O", "OpenFlow10", "--timeout=10", "show", &target])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("version negotiation failed"), "{err}");
    of.stop();
    assert!(!sock.exists(), "the socket file is removed at stop");
    d.stop().expect("stop");
}

/// A raw client: connects, says HELLO for 1.3.
pub(super) fn raw_client(sock: &Path) -> (UnixStream, Framer) {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let hello = Message::Hello {
        bitmap: Some(::openflow::bitmap_of(4)),
    };
    s.write_all(&hello.to_bytes(1).expect("emit"))
        .expect("hello");
    let mut f = Framer::new();
    let (_, m) = next(&mut s, &mut f);
    assert!(matches!(m, Message::Hello { .. }), "{m:?}");
    (s, f)
}

/// The next reply, past any PORT_STATUS (the switch's own news can
/// arrive between a request and its reply).
pub(super) fn next_reply(s: &mut impl Read, f: &mut Framer) -> (u32, Message) {
    loop {
        let m = next(s, f);
        if !matches!(m.1, Message::PortStatus(_)) {
            return m;
        }
    }
}

pub(super) fn next(s: &mut impl Read, f: &mut Framer) -> (u32, Message) {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = f.next_message().expect("framing") {
            let (h, m) = parse(&m).expect("parse");
            return (h.xid, m);
        }
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "the switch closed the connection");
        f.push(&buf[..n]);
    }
}

#[test]
fn malformed_messages_get_errors_and_other_connections_go_on() {
    let dir = TempDir::new("malformed");
    let sock = dir.0.join("br0.mgmt");
    let (d, of) = start(&sock, 5000);
    let (mut a, mut fa) = raw_client(&sock);
    let (mut b, mut fb) = raw_client(&sock);
    let board = of.board();
    wait_for("both connections listed", || {
        board
            .connections()
            .iter()
            .filter(|c| c.state == "open")
            .count()
            == 2
    });
    // An unknown type, a bad version, a short FEATURES_REPLY-shaped body
    // on a request: each gets its ERROR, and `a` stays open.
    for (bytes, want) in [
        (vec![4u8, 77, 0, 8, 0, 0, 0, 5], OfpError::BAD_TYPE),
        (vec![2u8, 5, 0, 8, 0, 0, 0, 6], OfpError::BAD_VERSION),
        (
            vec![4u8, 5, 0, 12, 0, 0, 0, 7, 1, 2, 3, 4],
            OfpError::BAD_LEN,
        ),
    ] {
        a.write_all(&bytes).expect("send");
        let (xid, m) = next(&mut a, &mut fa);
        assert_eq!(
            xid,
            u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]])
        );
        assert!(
            matches!(m, Message::Error { error, .. } if error == want),
            "{m:?}"
        );
    }
    a.write_all(&Message::EchoRequest(vec![9]).to_bytes(8).expect("emit"))
        .expect("echo");
    assert_eq!(next(&mut a, &mut fa), (8, Message::EchoReply(vec![9])));
    // A header whose length is below 8: `a` is answered and closed; `b`
    // goes on.
    a.write_all(&[4, 2, 0, 2, 0, 0, 0, 9]).expect("send");
    let (_, m) = next(&mut a, &mut fa);
    assert!(
        matches!(m, Message::Error { error, .. } if error == OfpError::BAD_LEN),
        "{m:?}"
    );
    let mut rest = Vec::new();
    let _ = a.read_to_end(&mut rest);
    b.write_all(&Message::FeaturesRequest.to_bytes(3).expect("emit"))
        .expect("features");
    assert!(
        matches!(next(&mut b, &mut fb), (3, Message::FeaturesReply(f)) if f.datapath_id == 0xab)
    );
    wait_for("a gone from the list", || board.connections().len() == 1);
    // `show` lists the remaining connection with its state and role.
    let core = d.core();
    let mut v = match control::handle(&mut lock(&core), &control::Request::Show, d.clock().now()) {
        control::Response::Ok(v) => v,
        control::Response::Error(e) => panic!("{e}"),
    };
    v["openflow"] = serde_json::to_value(board.connections()).expect("json");
    let text = crate::control::render::show(&v);
    assert!(text.contains("OpenFlow connections:"), "{text}");
    assert!(text.contains("open") && text.contains("equal"), "{text}");
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn an_unanswered_inactivity_probe_closes_the_connection() {
    let dir = TempDir::new("probe");
    let sock = dir.0.join("br0.mgmt");
    let (d, of) = start(&sock, 100);
    let (mut a, mut fa) = raw_client(&sock);
    // Quiet: an echo request comes, and after another interval the
    // switch hangs up.
    let (_, m) = next(&mut a, &mut fa);
    assert!(matches!(m, Message::EchoRequest(_)), "{m:?}");
    let mut rest = Vec::new();
    a.read_to_end(&mut rest).expect("closed by the switch");
    let board = of.board();
    wait_for("the connection gone", || board.connections().is_empty());
    of.stop();
    d.stop().expect("stop");
}

/// The flow lines of `ovs-ofctl dump-flows` without the counters that
/// change (duration, n_packets, n_bytes), sorted.
pub(super) fn flow_lines(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains("actions="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|f| {
                    !f.starts_with("duration=")
                        && !f.starts_with("n_packets=")
                        && !f.starts_with("n_bytes=")
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

/// `ovs-ofctl`, and a daemon on `br0.mgmt` in a directory of its own
/// with the three VMs' ports up, for a test that drives it (`None`: the
/// tool is missing, SKIP said).
#[allow(clippy::type_complexity)]
pub(super) fn with_ofctl(
    test: &str,
    name: &str,
) -> Option<(PathBuf, TempDir, PathBuf, Daemon, OfServer, Vms)> {
    let bin = prereq::tool(test, "ovs-ofctl")?;
    let dir = TempDir::new(name);
    let sock = dir.0.join("br0.mgmt");
    let (mut d, of, h) = start_with_ports(&sock, 5000);
    d.apply(&PortEvent::Up { ifindex: 12 });
    Some((bin, dir, sock, d, of, h))
}

#[test]
fn ovs_ofctl_adds_dumps_modifies_and_deletes_flows_and_traffic_follows() {
    const T: &str = "ovs_ofctl_adds_dumps_modifies_and_deletes_flows_and_traffic_follows";
    let Some((bin, dir, sock, d, of, h)) = with_ofctl(T, "flows") else {
        return;
    };
    // The config's table: vm1 → vm2. A controller sends vm1's UDP to
    // port 9 to vm3 instead, above it.
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    run(
        "add-flow",
        &["priority=20,udp,in_port=1,tp_dst=9,actions=output:3"],
    )
    .expect("add-flow");
    let file = dir.0.join("flows.txt");
    std::fs::write(
        &file,
        "table=1,priority=5,ip,nw_src=198.18.0.0/15,actions=drop\n\
         table=1,cookie=0x42,priority=6,arp,actions=normal\n",
    )
    .expect("write");
    run("add-flows", &[file.to_str().expect("path")]).expect("add-flows");
    let dump = run("dump-flows", &[]).expect("dump-flows");
    let lines = flow_lines(&dump);
    let want = [
        "cookie=0x0, table=0, priority=0 actions=drop",
        "cookie=0x0, table=0, priority=10,in_port=1 actions=output:2",
        "cookie=0x0, table=0, priority=10,in_port=3 actions=output:1",
        "cookie=0x0, table=0, priority=20,udp,in_port=1,tp_dst=9 actions=output:3",
        "cookie=0x0, table=1, priority=5,ip,nw_src=198.18.0.0/15 actions=drop",
        "cookie=0x42, table=1, priority=6,arp actions=NORMAL",
    ];
    assert_eq!(lines, want, "{dump}");
    // Traffic follows the new flow (the BARRIER after the add waited for
    // the revalidator, so no stale megaflow sends it to vm2).
    assert!(h["vm1"].rx.inject(&frame(1000), Default::default()));
    wait_for("vm1 → vm3", || !h["vm3"].received().is_empty());
    assert!(h["vm2"].received().is_empty());
    // mod-flows (not strict) rewrites every flow the match covers; the
    // strict one only the exact one.
    run("mod-flows", &["udp,in_port=1,actions=output:2"]).expect("mod-flows");
    let lines = flow_lines(&run("dump-flows", &[]).expect("dump"));
    assert!(
        lines.contains(
            &"cookie=0x0, table=0, priority=20,udp,in_port=1,tp_dst=9 actions=output:2".to_string()
        ),
        "{lines:?}"
    );
    assert!(h["vm1"].rx.inject(&frame(1001), Default::default()));
    wait_for("vm1 → vm2 after mod-flows", || {
        !h["vm2"].received().is_empty()
    });
    let target = format!("unix:{}", sock.display());
    // mod-flows --strict: only the flow with exactly that match and
    // priority (the looser one at priority 10 keeps output:2).
    let out = Command::new(&bin)
        .args(["-O", "OpenFlow13", "--strict", "mod-flows", &target])
        .arg("priority=10,in_port=1,actions=output:3")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = flow_lines(&run("dump-flows", &[]).expect("dump"));
    assert!(
        lines.contains(&"cookie=0x0, table=0, priority=10,in_port=1 actions=output:3".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(
            &"cookie=0x0, table=0, priority=20,udp,in_port=1,tp_dst=9 actions=output:2".to_string()
        ),
        "{lines:?}"
    );
    // packet-out from the controller to vm3, as ovs-ofctl writes it.
    let pkt: String = frame(7000).iter().map(|b| format!("{b:02x}")).collect();
    run(
        "packet-out",
        &[&format!("in_port=controller packet={pkt} actions=output:3")],
    )
    .expect("packet-out");
    wait_for("the packet-out on vm3", || {
        h["vm3"].received().contains(&frame(7000))
    });
    let desc = run("dump-ports-desc", &[]).expect("dump-ports-desc");
    assert!(
        desc.contains(" 1(vm1): addr:") && desc.contains(" 3(vm3): addr:"),
        "{desc}"
    );
    // del-flows by cookie, then strict.
    run("del-flows", &["cookie=0x42/-1"]).expect("del by cookie");
    let out = Command::new(&bin)
        .args([
            "-O",
            "OpenFlow13",
            "--strict",
            "del-flows",
            &target,
            "priority=20,udp,in_port=1,tp_dst=9",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = flow_lines(&run("dump-flows", &[]).expect("dump"));
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(!lines
        .iter()
        .any(|l| l.contains("cookie=0x42") || l.contains("priority=20")));
    // Refusals: the error the spec names, and nothing changes.
    let e = run("add-flow", &["table=3,actions=goto_table:1"]).expect_err("goto backwards");
    assert!(e.contains("OFPBIC_BAD_TABLE_ID"), "{e}");
    run("add-flow", &["check_overlap,priority=7,ip,actions=drop"]).expect("first");
    let e = run(
        "add-flow",
        &["check_overlap,priority=7,ip,nw_dst=198.18.0.9,actions=drop"],
    )
    .expect_err("overlap");
    assert!(e.contains("OFPFMFC_OVERLAP"), "{e}");
    let lines = flow_lines(&run("dump-flows", &[]).expect("dump"));
    assert_eq!(lines.len(), 5, "{lines:?}");
    // dump-tables and dump-aggregate.
    let tables = run("dump-tables", &[]).expect("dump-tables");
    assert!(tables.contains("OFPST_TABLE reply"), "{tables}");
    let agg = run("dump-aggregate", &[]).expect("dump-aggregate");
    assert!(agg.contains("flow_count=5"), "{agg}");
    // dump-ports: vm1 received the two frames sent above, vm2 and vm3
    // sent one each (the counters are published every 50 ms).
    wait_for("vm1's two frames in dump-ports", || {
        run("dump-ports", &[]).is_ok_and(|p| p.contains("port  1: rx pkts=2,"))
    });
    let p1 = run("dump-ports", &["1"]).expect("dump-ports 1");
    assert!(
        p1.contains("port  1: rx pkts=2,") && !p1.contains("port  2"),
        "{p1}"
    );
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn ovs_ofctl_reads_every_tables_features_across_split_replies() {
    const T: &str = "ovs_ofctl_reads_every_tables_features_across_split_replies";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("features");
    let sock = dir.0.join("br0.mgmt");
    let (d, of) = start(&sock, 5000);
    // 254 tables do not fit one 64 KiB message: the reply comes in parts
    // and ovs-ofctl decodes every one (it refuses the whole on any error).
    let text = ofctl(&bin, &sock, "dump-table-features", &[]).expect("dump-table-features");
    // Unnamed tables, as Open vSwitch's: `table 0:`; the last one cannot
    // go to another, so its features differ from the others'.
    assert!(
        text.contains("  table 0:"),
        "{}",
        &text[..text.len().min(2000)]
    );
    assert!(text.contains("tables 1...252: ditto"), "{text}");
    assert!(text.contains("  table 253:"), "last table");
    assert!(text.contains("next tables: 1-253"), "table 0's next tables");
    assert!(text.contains("max_entries=1000000"));
    of.stop();
    d.stop().expect("stop");
}

/// A FLOW_MOD of flow text, on the wire.
pub(super) fn flow_mod(text: &str, cmd: ofproto::FlowModCommand) -> Message {
    use ofproto::channel::convert::{instructions_to_wire, match_to_wire};
    let fm = ofproto::text::parse_flow(text, cmd).expect("flow text");
    let command = match cmd {
        ofproto::FlowModCommand::Add => 0,
        ofproto::FlowModCommand::Delete => 3,
        ofproto::FlowModCommand::DeleteStrict => 4,
        _ => 1,
    };
    Message::FlowMod(::openflow::FlowMod {
        cookie: fm.rule.cookie.0,
        cookie_mask: 0,
        table_id: fm.table.map_or(0xff, |t| t.0),
        command,
        idle_timeout: fm.rule.idle_timeout,
        hard_timeout: fm.rule.hard_timeout,
        priority: fm.rule.priority.0,
        buffer_id: 0xffff_ffff,
        out_port: 0xffff_ffff,
        out_group: 0xffff_ffff,
        flags: ofproto::channel::convert::flags_to_wire(&fm.rule.flags),
        importance: 0,
        matched: match_to_wire(&fm.rule.matched, &ofproto::tlv::EMPTY),
        instructions: instructions_to_wire(&fm.rule.instructions, &fm.rule.matched),
    })
}

#[test]
fn controller_actions_and_table_misses_reach_the_controllers_that_want_them() {
    use ::openflow::flow::packet_in_reason;
    let dir = TempDir::new("packet-in");
    let sock = dir.0.join("br0.mgmt");
    let (d, of, h) = start_with_ports(&sock, 5000);
    let (mut a, mut fa) = raw_client(&sock);
    let (mut b, mut fb) = raw_client(&sock);
    // b is a slave: no packet-ins for it.
    let slave = Message::RoleRequest(::openflow::Role {
        role: ::openflow::message::role::SLAVE,
        generation_id: 1,
    });
    b.write_all(&slave.to_bytes(2).expect("emit"))
        .expect("role");
    assert!(matches!(next(&mut b, &mut fb), (2, Message::RoleReply(_))));
    let mods = [
        flow_mod("", ofproto::FlowModCommand::Delete),
        flow_mod(
            "priority=0,actions=controller:200",
            ofproto::FlowModCommand::Add,
        ),
        flow_mod(
            "priority=5,cookie=0x77,udp,actions=controller:32",
            ofproto::FlowModCommand::Add,
        ),
    ];
    for (i, m) in mods.iter().enumerate() {
        a.write_all(&m.to_bytes(10 + i as u32).expect("emit"))
            .expect("flow mod");
    }
    a.write_all(&Message::BarrierRequest.to_bytes(20).expect("emit"))
        .expect("barrier");
    assert_eq!(next(&mut a, &mut fa), (20, Message::BarrierReply));
    // A UDP packet: the controller action, cut to 32 bytes.
    let udp = frame(1000);
    assert!(h["vm1"].rx.inject(&udp, Default::default()));
    let (_, m) = next(&mut a, &mut fa);
    let Message::PacketIn(p) = m else {
        panic!("{m:?}")
    };
    assert_eq!(p.reason, packet_in_reason::ACTION);
    assert_eq!((p.table_id, p.cookie), (0, 0x77));
    assert_eq!(usize::from(p.total_len), udp.len());
    assert_eq!(p.data, udp[..32]);
    let in_port = p.matched.get(0x8000, 0).expect("in_port");
    assert_eq!(in_port.value, 1u32.to_be_bytes());
    // A TCP packet: the table-miss entry, reason NO_MATCH, whole (it is
    // shorter than 200 bytes).
    let tcp =
        megaflow::frame::FrameSpec::ipv4(0xc612_0001, 0xc612_0002, megaflow::frame::L4::tcp(5, 80))
            .build();
    assert!(h["vm3"].rx.inject(&tcp, Default::default()));
    let (_, m) = next(&mut a, &mut fa);
    let Message::PacketIn(p) = m else {
        panic!("{m:?}")
    };
    assert_eq!(p.reason, packet_in_reason::NO_MATCH);
    assert_eq!(p.data, tcp);
    assert_eq!(
        p.matched.get(0x8000, 0).expect("in_port").value,
        3u32.to_be_bytes()
    );
    // A PACKET_OUT through the tables (output:TABLE) whose rule sends to
    // the controller: its packet-in reaches the controller too.
    let po = Message::PacketOut(::openflow::PacketOut {
        buffer_id: 0xffff_ffff,
        in_port: 1,
        actions: vec![::openflow::Action::Output {
            port: 0xffff_fff9,
            max_len: 0,
        }],
        data: udp.clone(),
    });
    a.write_all(&po.to_bytes(30).expect("emit"))
        .expect("packet-out");
    let (_, m) = next(&mut a, &mut fa);
    let Message::PacketIn(p) = m else {
        panic!("{m:?}")
    };
    assert_eq!((p.reason, p.cookie), (packet_in_reason::ACTION, 0x77));
    assert_eq!(p.data, udp[..32]);
    // The slave got none of them.
    b.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    assert!(b.read(&mut buf).is_err(), "a slave gets no packet-ins");
    let board = of.board();
    let conns = board.connections();
    let sent: u64 = conns.iter().map(|c| c.packet_ins).sum();
    assert_eq!(sent, 3, "{conns:?}");
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn packet_out_sends_a_frame_to_a_port_or_through_the_tables() {
    let dir = TempDir::new("packet-out");
    let sock = dir.0.join("br0.mgmt");
    let (mut d, of, h) = start_with_ports(&sock, 5000);
    d.apply(&PortEvent::Up { ifindex: 12 });
    let (mut a, mut fa) = raw_client(&sock);
    let out = |in_port: u32, port: u32, data: Vec<u8>| {
        Message::PacketOut(::openflow::PacketOut {
            buffer_id: 0xffff_ffff,
            in_port,
            actions: vec![::openflow::Action::Output { port, max_len: 0 }],
            data,
        })
    };
    // Straight to vm3, from the controller.
    let f = frame(4000);
    a.write_all(&out(0xffff_fffd, 3, f.clone()).to_bytes(1).expect("emit"))
        .expect("send");
    wait_for("the frame on vm3", || {
        h["vm3"].received() == vec![f.clone()]
    });
    // Through the tables as if received on vm1: the config's table sends
    // in_port=1 to vm2.
    let g = frame(4001);
    a.write_all(&out(1, 0xffff_fff9, g.clone()).to_bytes(2).expect("emit"))
        .expect("send");
    wait_for("the frame on vm2", || {
        h["vm2"].received() == vec![g.clone()]
    });
    // A buffer this switch never gave out; no data at all.
    let mut bad = out(1, 2, f.clone());
    if let Message::PacketOut(p) = &mut bad {
        p.buffer_id = 7;
    }
    a.write_all(&bad.to_bytes(3).expect("emit")).expect("send");
    assert!(
        matches!(next_reply(&mut a, &mut fa), (3, Message::Error { error, .. }) if error == OfpError::BUFFER_UNKNOWN)
    );
    a.write_all(&out(1, 2, vec![]).to_bytes(4).expect("emit"))
        .expect("send");
    assert!(
        matches!(next_reply(&mut a, &mut fa), (4, Message::Error { error, .. }) if error == OfpError::BAD_PACKET)
    );
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn controllers_hear_of_removed_rules_and_port_changes() {
    use ::openflow::flow::removed_reason;
    let dir = TempDir::new("async");
    let sock = dir.0.join("br0.mgmt");
    let (mut d, of, _h) = start_with_ports(&sock, 5000);
    let (mut a, mut fa) = raw_client(&sock);
    let mods = [
        flow_mod(
            "priority=30,cookie=0x5,udp,hard_timeout=1,send_flow_rem,actions=output:2",
            ofproto::FlowModCommand::Add,
        ),
        flow_mod(
            "priority=31,cookie=0x6,tcp,send_flow_rem,actions=output:2",
            ofproto::FlowModCommand::Add,
        ),
        // Without send_flow_rem: removed silently.
        flow_mod(
            "priority=32,arp,actions=output:2",
            ofproto::FlowModCommand::Add,
        ),
    ];
    for (i, m) in mods.iter().enumerate() {
        a.write_all(&m.to_bytes(10 + i as u32).expect("emit"))
            .expect("flow mod");
    }
    let del = flow_mod("priority=31,tcp", ofproto::FlowModCommand::Delete);
    a.write_all(&del.to_bytes(13).expect("emit"))
        .expect("delete");
    let del = flow_mod("arp", ofproto::FlowModCommand::Delete);
    a.write_all(&del.to_bytes(14).expect("emit"))
        .expect("delete");
    let (_, m) = next(&mut a, &mut fa);
    let Message::FlowRemoved(r) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (r.reason, r.cookie, r.priority),
        (removed_reason::DELETE, 0x6, 31)
    );
    // The hard timeout: the revalidator expires it within a pass of 1 s.
    let (_, m) = next(&mut a, &mut fa);
    let Message::FlowRemoved(r) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (r.reason, r.cookie, r.hard_timeout),
        (removed_reason::HARD_TIMEOUT, 0x5, 1)
    );
    assert!(r.duration_sec >= 1, "{r:?}");
    // vm2's link goes down: PORT_STATUS MODIFY with LINK_DOWN.
    d.apply(&PortEvent::Down { ifindex: 11 });
    let (_, m) = next(&mut a, &mut fa);
    let Message::PortStatus(p) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (p.reason, p.desc.port_no, p.desc.name.as_str()),
        (2, 2, "vm2")
    );
    assert_eq!(p.desc.state, ::openflow::port::state::LINK_DOWN);
    of.stop();
    d.stop().expect("stop");
}

/// The lines `r` gives, gathered by a thread as they come.
pub(super) fn collect_lines(r: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            sink.lock().expect("lines").push(l);
        }
    });
    lines
}

/// A child process killed (by PID) and reaped however the test ends.
pub(super) struct Child(pub(super) std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A frame from VM `a` to VM `b` (MACs 02:00:00:00:00:0a / 0b).
pub(super) fn l2_frame(a: u64, b: u64, sport: u16) -> Vec<u8> {
    let mut f = megaflow::frame::FrameSpec::ipv4(
        0xc612_0000 | a as u32,
        0xc612_0000 | b as u32,
        megaflow::frame::L4::udp(sport, 9),
    );
    f.eth_src = 0x0200_0000_0000 | a;
    f.eth_dst = 0x0200_0000_0000 | b;
    f.build()
}

#[test]
fn an_os_ken_learning_switch_programs_eswitchd() {
    const T: &str = "an_os_ken_learning_switch_programs_eswitchd";
    let Some((app, port)) = OsKen::start(T, &[]) else {
        return;
    };
    let seen = |what: &str| app.seen(what);
    let dir = TempDir::new("osken");
    let sock = dir.0.join("br0.mgmt");
    let empty = FlowFile::parse("").expect("empty table");
    let (mut d, of, h) = start_table(&sock, 5000, &empty, |c| {
        c.controllers = vec![format!("tcp:127.0.0.1:{port}")];
        c.fail_mode = "secure".into();
    });
    d.apply(&PortEvent::Up { ifindex: 12 });
    wait_for_long("os-ken sees the switch", || {
        seen("connected dpid=00000000000000ab") > 0
    });
    // The table-miss entry is in before traffic (an echo round trip
    // through the switch after the app's flow mod).
    wait_for("the app's table-miss entry", || {
        lock(&d.core()).pipeline().bridge().tables().len() == 1
    });
    // vm1 → vm2: unknown, flooded by the app to vm2 and vm3.
    let a = l2_frame(1, 2, 1000);
    assert!(h["vm1"].rx.inject(&a, Default::default()));
    wait_for("the flood on vm2", || h["vm2"].received().contains(&a));
    // vm2 → vm1: vm1's MAC is known: a flow, and the packet out to vm1.
    let b = l2_frame(2, 1, 1000);
    assert!(h["vm2"].rx.inject(&b, Default::default()));
    wait_for("vm2 → vm1", || h["vm1"].received().contains(&b));
    // vm1 → vm2 again: a flow for that direction too.
    assert!(h["vm1"].rx.inject(&a, Default::default()));
    wait_for("vm1 → vm2 by the app", || {
        h["vm2"].received().contains(&a)
    });
    wait_for("both flows", || seen("flow in_port=") >= 2);
    // In the tables, and every megaflow revalidated against them.
    let core = d.core();
    wait_for("the learned flows in force", || {
        let sw = lock(&core);
        sw.pipeline().bridge().tables().len() == 3
            && sw.pipeline().synced_tables() >= sw.pipeline().bridge().generations().tables
    });
    let packet_ins = seen("packet_in");
    // From now on the flows forward without the controller, and the hot
    // one is offloaded to the sim FDB.
    let mut got = 0;
    for i in 0..20u16 {
        let f = l2_frame(1, 2, 2000 + i);
        assert!(h["vm1"].rx.inject(&f, Default::default()));
        wait_for("vm1 → vm2 by the flow", || {
            got += h["vm2"].received().len();
            got > usize::from(i)
        });
    }
    wait_for("the learned flow offloaded", || {
        lock(&core).pipeline().offloaded_len() >= 1
    });
    assert_eq!(seen("packet_in"), packet_ins, "no packet-in once learned");
    let rules = lock(&core).dump_rules().expect("dump").rules.len();
    assert!(rules >= 2, "the root jump and the learned flow: {rules}");
    drop(core);
    of.stop();
    d.stop().expect("stop");
    drop(app);
}

/// What the upcall handlers have done with packets: dropped, sent or
/// given to a controller (each counted after its outputs were sent).
pub(super) fn handled(core: &Core<SimBackend>) -> u64 {
    let c = lock(core).counters();
    c.sw_drops + c.to_controller + c.ports.values().map(|p| p.tx_sw.packets).sum::<u64>()
}

/// Waits (at most 30 s: a Python start-up) until `cond` holds.
pub(super) fn wait_for_long(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn ovs_ofctl_adds_dumps_and_deletes_meters_that_police_traffic() {
    const T: &str = "ovs_ofctl_adds_dumps_and_deletes_meters_that_police_traffic";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("meters");
    let sock = dir.0.join("br0.mgmt");
    // Offload off: the meter's counts are the software meter's (a
    // hardware meter's own counters are not folded into METER stats yet),
    // so every packet of the burst must go through software.
    let mut cfg = config();
    cfg.offload.mode = "off".into();
    let (d, of, h) = start_daemon(&sock, 5000, &cfg, &flows(), |_| {});
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    // 1 packet per second, burst 1: of a quick burst, about one passes.
    run(
        "add-meter",
        &["meter=1,pktps,burst,stats,band=type=drop,rate=1,burst_size=1"],
    )
    .expect("add-meter");
    let e = run("add-meter", &["meter=1,kbps,band=type=drop,rate=5"]).expect_err("exists");
    assert!(e.contains("OFPMMFC_METER_EXISTS"), "{e}");
    let e = run(
        "add-meter",
        &["meter=2,kbps,band=type=dscp_remark,rate=5,prec_level=1"],
    )
    .expect_err("dscp remark");
    assert!(e.contains("OFPMMFC_BAD_BAND"), "{e}");
    let dump = run("dump-meters", &[]).expect("dump-meters");
    assert!(
        dump.contains("meter=1 pktps burst stats bands=")
            && dump.contains("type=drop rate=1 burst_size=1"),
        "{dump}"
    );
    run(
        "add-flow",
        &["priority=40,udp,in_port=1,actions=meter:1,output:2"],
    )
    .expect("metered flow");
    for i in 0..20 {
        assert!(h["vm1"].rx.inject(&frame(3000 + i), Default::default()));
    }
    // Once the meter has seen all 20 (its counts come from every thread
    // at once), count what passed.
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !last.contains("packet_in_count:20 ") {
        assert!(
            Instant::now() < deadline,
            "the meter did not see all 20: {last}; vm2 got {}; {:?}",
            h["vm2"].received().len(),
            lock(&d.core()).counters()
        );
        std::thread::sleep(Duration::from_millis(20));
        last = run("meter-stats", &[]).unwrap_or_else(|e| e);
    }
    std::thread::sleep(Duration::from_millis(50));
    let passed = h["vm2"].received().len();
    assert!(
        (1..=3).contains(&passed),
        "{passed} of 20 passed a 1 pkt/s meter"
    );
    // Every packet the meter saw, and the drop band's share.
    let st = run("meter-stats", &[]).expect("meter-stats");
    assert!(
        st.contains("meter:1 flow_count:0 packet_in_count:20 byte_in_count:1200"),
        "{st}"
    );
    assert!(
        st.contains(&format!("0: packet_count:{} ", 20 - passed)),
        "{st}"
    );
    // A flow naming a meter that does not exist is refused, as Open
    // vSwitch refuses it.
    let e = run("add-flow", &["priority=41,actions=meter:99,output:2"]).expect_err("meter 99");
    assert!(e.contains("OFPMMFC_INVALID_METER"), "{e}");
    // A meter without `stats` reads back without it (as Open vSwitch's).
    run("add-meter", &["meter=3,kbps,band=type=drop,rate=5"]).expect("meter 3");
    let dump = run("dump-meters", &[]).expect("dump-meters");
    assert!(dump.contains("meter=3 kbps bands="), "{dump}");
    // Deleting a meter deletes the flows that run it.
    run("del-meter", &["meter=1"]).expect("del-meter");
    let dump = run("dump-meters", &[]).expect("dump-meters");
    assert!(!dump.contains("meter=1 "), "{dump}");
    let flows = run("dump-flows", &[]).expect("dump-flows");
    assert!(!flows.contains("meter:1"), "{flows}");
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn a_packet_in_flood_is_held_to_the_connections_rate_and_forwarding_goes_on() {
    let dir = TempDir::new("pin-flood");
    let sock = dir.0.join("br0.mgmt");
    // vm2 → controller (the miss entry); vm1 → vm2 by the config's flow.
    let table =
        FlowFile::parse("priority=10,in_port=1,actions=output:2\npriority=0,actions=controller")
            .expect("table");
    let (d, of, h) = start_table(&sock, 5000, &table, |c| {
        c.packet_in_rate = 100;
        c.packet_in_burst = 20;
    });
    let (mut a, mut fa) = raw_client(&sock);
    // 2,000 distinct misses from vm2 as fast as the port takes them.
    let started = Instant::now();
    for i in 0..2000u16 {
        let f = l2_frame(2, 9, i);
        while !h["vm2"].rx.inject(&f, Default::default()) {
            std::thread::yield_now();
        }
    }
    // Meanwhile vm1's traffic to vm2 is forwarded.
    for i in 0..50u16 {
        assert!(h["vm1"].rx.inject(&frame(6000 + i), Default::default()));
    }
    let mut got = 0;
    wait_for("vm1's 50 frames on vm2", || {
        got += h["vm2"].received().len();
        got == 50
    });
    let board = of.board();
    wait_for("the flood counted", || {
        board
            .connections()
            .iter()
            .any(|c| c.packet_ins + c.packet_in_drops >= 1000)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let c = board.connections().remove(0);
    // At most the burst plus the rate over the time it took.
    let allowed = 20.0 + 100.0 * (elapsed + 0.1);
    assert!(
        (c.packet_ins as f64) <= allowed && c.packet_ins >= 20,
        "{} packet-ins in {elapsed:.2} s (allowed {allowed:.0})",
        c.packet_ins
    );
    assert!(c.packet_in_drops > 0, "{c:?}");
    // The connection itself is fine: it answers.
    a.write_all(&Message::EchoRequest(vec![1]).to_bytes(77).expect("emit"))
        .expect("echo");
    loop {
        match next(&mut a, &mut fa) {
            (77, Message::EchoReply(d)) => {
                assert_eq!(d, vec![1]);
                break;
            }
            (_, Message::PacketIn(_)) => continue,
            other => panic!("{other:?}"),
        }
    }
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn ovs_ofctl_monitor_sees_packet_ins() {
    const T: &str = "ovs_ofctl_monitor_sees_packet_ins";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("monitor");
    let sock = dir.0.join("br0.mgmt");
    let table = FlowFile::parse("priority=0,actions=controller").expect("table");
    let (d, of, h) = start_table(&sock, 5000, &table, |_| {});
    let target = format!("unix:{}", sock.display());
    let mut mon = Child(
        Command::new(&bin)
            .arg(format!("--unixctl={}", dir.0.join("monitor.ctl").display()))
            .args(["-O", "OpenFlow13", "monitor", &target, "65534"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("monitor"),
    );
    // monitor prints what it receives on stderr.
    let out = mon.0.stderr.take().expect("stderr");
    let lines = collect_lines(out);
    let board = of.board();
    wait_for("the monitor connected", || {
        board.connections().iter().any(|c| c.state == "open")
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(h["vm1"].rx.inject(&frame(8000), Default::default()));
    wait_for("the packet-in in the monitor", || {
        lines
            .lock()
            .expect("lines")
            .iter()
            // It asks for Nicira's format, as Open vSwitch gives it.
            .any(|l| l.contains("NXT_PACKET_IN2 (OF1.3)"))
    });
    let all = lines.lock().expect("lines").join("\n");
    assert!(
        all.contains("in_port=1 (via no_match) data_len=60"),
        "{all}"
    );
    drop(mon);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn ports_added_and_removed_while_running_reach_the_controllers_and_carry_traffic() {
    use ::openflow::port::reason;
    let dir = TempDir::new("add-port");
    let sock = dir.0.join("br0.mgmt");
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3", "vm4"]);
    let mut d = Daemon::start(&config(), &flows(), factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2", "vm3", "vm4"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    let cfg = OpenflowConfig {
        listen: vec![format!("punix:{}", sock.display())],
        ..OpenflowConfig::default()
    };
    let pins = d.take_packet_ins();
    let of = OfServer::start(&d.core(), d.clock(), &cfg, pins, d.tx_ports()).expect("openflow");
    let (mut c, mut f) = raw_client(&sock);
    let core = d.core();
    // vm4's netdev is here but not in the config: not a port.
    assert!(!lock(&core).ports().iter().any(|p| p.name == "vm4"));
    // Refusals name what is wrong and change nothing.
    let e = d
        .add_port("vm9", PortKind::Representor, None, None, &[])
        .expect_err("unknown netdev");
    assert!(e.to_string().contains("give --vport"), "{e}");
    let e = d
        .add_port("vm5", PortKind::Representor, Some(1), Vport::vf(9), &[])
        .expect_err("ofport taken");
    assert!(e.to_string().contains("clashes with port \"vm1\""), "{e}");
    let e = d
        .add_port("vm4", PortKind::Representor, None, Vport::vf(0), &[])
        .expect_err("vport taken");
    assert!(e.to_string().contains("clashes"), "{e}");
    // Added: the lowest free number, the representor's vport; the
    // controller hears ADD, then the link coming up as the port opens.
    let spec = d
        .add_port("vm4", PortKind::Representor, None, None, &[])
        .expect("add-port");
    assert_eq!((spec.no, spec.vport), (PortNo(4), Vport::vf(3)));
    let (_, m) = next(&mut c, &mut f);
    let Message::PortStatus(ps) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (ps.reason, ps.desc.port_no, ps.desc.name.as_str()),
        (reason::ADD, 4, "vm4")
    );
    let (_, m) = next(&mut c, &mut f);
    assert!(
        matches!(&m, Message::PortStatus(p) if p.reason == reason::MODIFY && p.desc.state & 4 != 0),
        "{m:?}"
    );
    let e = d
        .add_port("vm4", PortKind::Representor, None, None, &[])
        .expect_err("twice");
    assert!(e.to_string().contains("clashes"), "{e}");
    // It carries traffic: a controller's flow to it, offloaded when hot.
    let add = flow_mod(
        "priority=40,udp,in_port=1,tp_dst=9,actions=output:4",
        ofproto::FlowModCommand::Add,
    );
    c.write_all(&add.to_bytes(5).expect("emit")).expect("send");
    c.write_all(&Message::BarrierRequest.to_bytes(6).expect("emit"))
        .expect("barrier");
    assert_eq!(next_reply(&mut c, &mut f), (6, Message::BarrierReply));
    let mut got = 0;
    for i in 0..5 {
        assert!(h["vm1"].rx.inject(&frame(1000), Default::default()));
        wait_for("vm1 → vm4", || {
            got += h["vm4"].received().len();
            got > i
        });
    }
    wait_for("the flow to vm4 offloaded", || {
        lock(&core).dump_rules().is_ok_and(|d| {
            d.rules
                .iter()
                .any(|r| r.actions.iter().any(|a| a.contains("dest_vport(4)")))
        })
    });
    // Removed: DELETE to the controller, its megaflows and rules gone,
    // nothing more reaches it; the rest of the switch goes on.
    let (gone, _flushed) = d.del_port("vm4").expect("del-port");
    assert_eq!(gone.no, PortNo(4));
    let (_, m) = next(&mut c, &mut f);
    assert!(
        matches!(&m, Message::PortStatus(p) if p.reason == reason::DELETE && p.desc.port_no == 4),
        "{m:?}"
    );
    assert!(!lock(&core).ports().iter().any(|p| p.no == PortNo(4)));
    assert!(d.del_port("vm4").is_err(), "no such port any more");
    let _ = h["vm4"].received();
    let drops = lock(&core).counters().sw_drops;
    assert!(h["vm1"].rx.inject(&frame(1000), Default::default()));
    // Not UDP to port 9: the config's vm1 → vm2 flow.
    let tcp =
        megaflow::frame::FrameSpec::ipv4(0xc612_0001, 0xc612_0002, megaflow::frame::L4::tcp(5, 80))
            .build();
    assert!(h["vm1"].rx.inject(&tcp, Default::default()));
    wait_for("vm1 → vm2 still", || !h["vm2"].received().is_empty());
    // The frame to the deleted port dropped (an event, not a window: a
    // handler counts a packet after sending its outputs), and vm4 got
    // nothing.
    wait_for("the frame to vm4 dropped", || {
        lock(&core).counters().sw_drops > drops
    });
    assert!(
        h["vm4"].received().is_empty(),
        "a deleted port gets nothing"
    );
    // The device holds no rule that outputs to vf3.
    let dump = lock(&core).dump_rules().expect("dump");
    assert!(
        !dump.rules.iter().any(|r| r
            .actions
            .iter()
            .any(|a| a.contains("dest_vport(vf3)") || a.contains("vf3"))),
        "{:#?}",
        dump.rules
    );
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

//! Connection tracking on real netdevs: Open vSwitch's conntrack tutorial
//! firewall on a live eswitchd in the lab (lab.sh's VM namespaces), real
//! TCP from the kernel's stack, ping. vm1 may open connections to vm2; vm2
//! may only answer. Needs root, iproute2, ethtool, ping and python3;
//! skips through `prereq` otherwise. Addresses from 198.18.0.0/15; the
//! lab is removed (daemon stopped by PID, namespaces deleted) even when
//! the test fails; every wait is bounded.

mod lab;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::{can_run, u, LiveLab};

const FIREWALL: &str = "priority=100,arp,actions=normal
table=0,priority=50,ct_state=-trk,ip,actions=ct(table=1,zone=7)
table=1,priority=50,ct_state=+trk+new,ip,in_port=1,actions=ct(commit,zone=7),output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=1,actions=output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=2,actions=output:1
table=1,priority=40,ct_state=+trk,ip,actions=drop
";

/// An echo server on `addr:port` in `ns` for one connection (gives up
/// after `secs`): prints the bytes it echoed.
const SERVER: &str = "
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(float(sys.argv[3]))
try:
    c, _ = s.accept()
except OSError:
    print('none'); sys.exit(0)
c.settimeout(10); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    c.sendall(d); n += len(d)
c.close(); print(n, _[0])
";

/// Connects to `addr:port` (timeout `secs`), sends `n` bytes, reads the
/// echo to the end: prints the bytes read back, or `fail`.
const CLIENT: &str = "
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    data = b'e' * int(sys.argv[4]); c.sendall(data); c.shutdown(socket.SHUT_WR)
    n = 0
    while True:
        d = c.recv(65536)
        if not d: break
        n += len(d)
    print(n)
except OSError as e:
    print('fail', e)
";

fn python(lab: &LiveLab, vm: &str, script: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.ns(vm), "python3", "-c", script])
        .args(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// A TCP echo of `bytes` from `client` to `server`'s `addr:port`: what
/// the client read back and what the server echoed (bytes and the peer's
/// address).
fn tcp_echo(
    lab: &LiveLab,
    client: &str,
    server: &str,
    addr: &str,
    port: &str,
    bytes: usize,
) -> (String, String) {
    tcp_echo_dial(lab, client, server, (addr, port), (addr, port), bytes)
}

/// [`tcp_echo`] with the client dialing `dial` while the server listens
/// on `listen` (a DNAT between them).
fn tcp_echo_dial(
    lab: &LiveLab,
    client: &str,
    server: &str,
    listen: (&str, &str),
    dial: (&str, &str),
    bytes: usize,
) -> (String, String) {
    let srv = python(lab, server, SERVER, &[listen.0, listen.1, "6"])
        .spawn()
        .expect("server");
    std::thread::sleep(Duration::from_millis(300));
    let cli = python(
        lab,
        client,
        CLIENT,
        &[dial.0, dial.1, "3", &bytes.to_string()],
    )
    .output()
    .expect("client");
    // The server exits on its own (EOF or its accept timeout); bounded.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut srv = srv;
    while srv.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = srv.kill();
    let out = srv.wait_with_output().expect("server output");
    (
        String::from_utf8_lossy(&cli.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

/// `eswitchctl dump-conntrack --zone ZONE`, a line per connection.
fn conn_lines(lab: &LiveLab, zone: u16) -> Vec<String> {
    lab.ctl(&["dump-conntrack", "--zone", &zone.to_string()])
        .expect("dump-conntrack")["conns"]
        .as_array()
        .expect("conns is a list")
        .iter()
        .map(|c| c["line"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_conntrack_tutorial_firewall_passes_replies_and_stops_strangers() {
    let test = "the_conntrack_tutorial_firewall_passes_replies_and_stops_strangers";
    if !can_run(test, "auto") || !prereq::tools(test, &["python3"]) {
        return;
    }
    let lab = LiveLab::start(2, "auto", Some(FIREWALL), "");
    // ICMP: vm1 may ping vm2 (its replies are established); vm2 may not
    // start anything.
    assert!(lab.ping(1, 2, 3), "ping vm1 → vm2 through the firewall");
    assert!(!lab.ping(2, 1, 1), "vm2 may not open to vm1");
    // TCP, the kernel's own: vm1 → vm2 passes both ways.
    let (got, echoed) = tcp_echo(&lab, "vm1", "vm2", "198.18.0.2", "8080", 300_000);
    assert_eq!(got, "300000", "vm1 read its 300 kB back (server: {echoed})");
    assert_eq!(echoed, "300000 198.18.0.1");
    // vm2 → vm1: the SYN is new from port 2 and dropped; nothing accepted.
    let (got, accepted) = tcp_echo(&lab, "vm2", "vm1", "198.18.0.1", "9090", 1000);
    assert!(got.starts_with("fail"), "vm2 connected to vm1: {got}");
    assert_eq!(accepted, "none");
    // The tracker saw it as Open vSwitch's would: the TCP connection in
    // zone 7, closed by now; the ICMP echo; counts by protocol.
    let lines = conn_lines(&lab, 7);
    assert!(
        lines.iter().any(
            |l| l.starts_with("tcp,orig=(src=198.18.0.1,dst=198.18.0.2,")
                && l.contains("dport=8080),reply=(src=198.18.0.2,dst=198.18.0.1,sport=8080,")
                && l.contains(",zone=7,")
        ),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("icmp,orig=(src=198.18.0.1,dst=198.18.0.2,")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(
            |l| l.contains("src=198.18.0.2,dst=198.18.0.1,") && l.contains("dport=9090),reply")
        ),
        "nothing committed for vm2's attempts: {lines:?}"
    );
    let st = lab.ctl(&["conntrack-stats"]).expect("conntrack-stats");
    assert!(u(&st["tcp"]) >= 1 && u(&st["icmp"]) >= 1, "{st}");
    // The stateful megaflows: the first stage ends in ct() and recirc, a
    // second stage follows.
    let flows = lab.flows();
    assert!(
        flows.iter().any(|f| f["match"]
            .as_str()
            .unwrap_or("")
            .starts_with("recirc_id=0x")),
        "a second-stage megaflow: {flows:?}"
    );
    // Before they went to the device, the connections' packets ran both
    // stages on the datapath threads: recirculated there, counted per
    // thread (`dp-stats`, as `dpif-netdev/pmd-stats-show`).
    let dp = lab.ctl(&["dp-stats"]).expect("dp-stats");
    let threads = dp["datapaths"].as_array().expect("datapaths");
    let sum = |k: &str| threads.iter().map(|t| u(&t[k])).sum::<u64>();
    assert!(sum("recirculations") >= 1, "{dp}");
    // One ct(table=1) a packet: a recirculation each at most.
    assert!(sum("recirculations") <= sum("packets"), "{dp}");
    // The connections went to the device's conntrack table (the sim's,
    // which has the restore path): vm1's TCP through an offloaded first
    // stage, its entries in the CT table, no ct() flow refused for want of
    // one.
    let st = lab.ctl(&["stats"]).expect("stats");
    assert!(u(&st["ct_hw"]["installed"]) >= 1, "{st}");
    assert!(
        !flows.iter().any(|f| f["offloaded"]
            .as_str()
            .unwrap_or("")
            .contains("no conntrack table")),
        "{flows:?}"
    );
    // A flush empties zone 7; a new vm1 → vm2 connection works again.
    lab.ctl(&["flush-conntrack", "zone=7"]).expect("flush");
    assert!(conn_lines(&lab, 7).is_empty());
    let (got, _) = tcp_echo(&lab, "vm1", "vm2", "198.18.0.2", "8081", 10_000);
    assert_eq!(got, "10000");
}

/// SNAT then DNAT, with the kernel's TCP at both ends: the server sees
/// the translated address, the client the address it dialed, and every
/// byte comes back (checksums the stacks accept, both ways).
#[test]
fn snat_and_dnat_carry_the_kernels_tcp_both_ways() {
    let test = "snat_and_dnat_carry_the_kernels_tcp_both_ways";
    if !can_run(test, "auto") || !prereq::tools(test, &["python3"]) {
        return;
    }
    let flows = "priority=100,arp,actions=normal
table=0,priority=50,ct_state=-trk,ip,actions=ct(table=1,zone=9,nat)
table=1,priority=50,ct_state=+trk+new,ip,in_port=1,nw_dst=198.18.0.200,actions=ct(commit,zone=9,nat(dst=198.18.0.2:8080)),output:2
table=1,priority=50,ct_state=+trk+new,ip,in_port=1,actions=ct(commit,zone=9,nat(src=198.18.0.100)),output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=1,actions=output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=2,actions=output:1
table=1,priority=40,ct_state=+trk,ip,actions=drop
";
    let lab = LiveLab::start(2, "auto", Some(flows), "");
    // Nobody owns the NAT addresses: the VMs learn them statically.
    let neigh = |vm: &str, addr: &str, mac: &str| {
        integration::netns::run(
            "ip",
            &[
                "netns",
                "exec",
                &lab.ns(vm),
                "ip",
                "neigh",
                "replace",
                addr,
                "lladdr",
                mac,
                "dev",
                "eth0",
            ],
        )
        .expect("neigh");
    };
    neigh("vm2", "198.18.0.100", "02:00:00:00:00:01");
    neigh("vm1", "198.18.0.200", "02:00:00:00:00:02");
    // SNAT: vm2's server sees 198.18.0.100 as its peer.
    let (got, echoed) = tcp_echo(&lab, "vm1", "vm2", "198.18.0.2", "8082", 100_000);
    assert_eq!(
        got, "100000",
        "SNAT: vm1 read its bytes back (server: {echoed})"
    );
    assert_eq!(echoed, "100000 198.18.0.100", "the server's peer");
    // DNAT: vm1 dials 198.18.0.200:80 and reaches vm2's 8080.
    let (got, echoed) = tcp_echo_dial(
        &lab,
        "vm1",
        "vm2",
        ("198.18.0.2", "8080"),
        ("198.18.0.200", "80"),
        100_000,
    );
    assert_eq!(
        got, "100000",
        "DNAT: vm1 read its bytes back (server: {echoed})"
    );
    assert_eq!(
        echoed, "100000 198.18.0.1",
        "DNAT keeps the client's address"
    );
    let lines = conn_lines(&lab, 9);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("reply=(src=198.18.0.2,dst=198.18.0.100,sport=8082,")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("dst=198.18.0.200,")
            && l.contains("dport=80),reply=(src=198.18.0.2,dst=198.18.0.1,sport=8080,")),
        "{lines:?}"
    );
}

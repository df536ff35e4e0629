//! sFlow set up through the database against `eswitchd run --ovsdb`, as a
//! user sets it up for Open vSwitch: an `sFlow` row (`ovs-vsctl create
//! sFlow ... -- set Bridge br-int sflow=@s`) starts the export, a change of
//! it restarts the export with the new settings, and clearing it stops it.
//!
//! Checked, with a UDP collector that decodes the sFlow v5 datagrams: the
//! agent address is the row's; flow samples of the pings between two VMs
//! carry the row's sampling rate (1, then 2 after the row changed);
//! counter samples come at the row's polling interval; after `clear Bridge
//! br-int sflow` nothing more is sent.
//!
//! Needs root (the lab's conventions), python3 and the OVN lab's tools
//! (`SKIP` otherwise).

mod ovn;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use integration::netns::run;
use ovn::Ovn;

const T: &str = "an_sflow_row_in_the_database_starts_changes_and_stops_eswitchds_export";
const H: &str = "h1";

/// Listens on 127.0.0.1 for `secs` seconds and prints, per datagram kind
/// seen: the agent addresses, the flow samples' sampling rates and the
/// number of flow and counter samples (one line of JSON).
const COLLECTOR: &str = r#"
import socket,struct,json,sys,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
s.bind(('127.0.0.1',0))
print(s.getsockname()[1],flush=True)
end=time.time()+float(sys.argv[1])
agents=set();rates=set();flows=0;counters=0
while time.time()<end:
    s.settimeout(max(0.05,end-time.time()))
    try: d,_=s.recvfrom(65536)
    except socket.timeout: break
    v,at=struct.unpack('!II',d[:8])
    if v!=5 or at!=1: continue
    agents.add(socket.inet_ntoa(d[8:12]))
    n=struct.unpack('!I',d[24:28])[0];o=28
    for _ in range(n):
        fmt,ln=struct.unpack('!II',d[o:o+8])
        if fmt==1:
            flows+=1;rates.add(struct.unpack('!I',d[o+16:o+20])[0])
        elif fmt==2: counters+=1
        o+=8+ln
print(json.dumps({'agents':sorted(agents),'rates':sorted(rates),'flows':flows,'counters':counters}),flush=True)
"#;

fn collector(secs: u32) -> (std::process::Child, u16) {
    let mut c = Command::new("python3")
        .args(["-c", COLLECTOR, &secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    (c, line.trim().parse().expect("a port"))
}

fn summary(c: std::process::Child) -> serde_json::Value {
    let out = c.wait_with_output().expect("collector");
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{T}: collector said {text:?}: {e}"))
}

fn pings(ns: &str, to: &str) {
    let _ = run(
        "ip",
        &[
            "netns", "exec", ns, "ping", "-q", "-c", "30", "-i", "0.05", "-W", "1", to,
        ],
    );
}

#[test]
fn an_sflow_row_in_the_database_starts_changes_and_stops_eswitchds_export() {
    if !ovn::can_run(T) {
        return;
    }
    let mut ovn = Ovn::new(T, "osfl");
    ovn.host_db(H, "198.19.0.1");
    ovn.eswitchd(H, None);
    let vms = ovn.local_vms(H, 2);
    ovn.ofctl(H, &["add-flow", "actions=normal"]);

    // A new sFlow row for br-int, sending to `port`.
    let attach = |port: u16| {
        ovn.vsctl(
            H,
            &[
                "--",
                "--id=@s",
                "create",
                "sFlow",
                "agent=127.0.0.1",
                &format!("targets=\"127.0.0.1:{port}\""),
                "header=128",
                "sampling=1",
                "polling=1",
                "--",
                "set",
                "Bridge",
                "br-int",
                "sflow=@s",
            ],
        )
    };
    let (c, port) = collector(4);
    attach(port);
    pings(&vms[0].ns, "198.18.0.2");
    let got = summary(c);
    assert_eq!(
        got["agents"],
        serde_json::json!(["127.0.0.1"]),
        "{T}: {got}"
    );
    assert_eq!(got["rates"], serde_json::json!([1]), "{T}: {got}");
    assert!(
        got["flows"].as_u64().unwrap_or(0) >= 30,
        "{T}: every ping sampled: {got}"
    );
    assert!(
        got["counters"].as_u64().unwrap_or(0) >= 2,
        "{T}: polled every second: {got}"
    );

    // The row changed: the export goes on with the new rate.
    let (c, port) = collector(4);
    let uuid = ovn.vsctl(H, &["get", "Bridge", "br-int", "sflow"]);
    ovn.vsctl(
        H,
        &[
            "set",
            "sFlow",
            uuid.trim(),
            &format!("targets=\"127.0.0.1:{port}\""),
            "sampling=2",
        ],
    );
    // The megaflows sample at the new rate from the pass the change asks
    // for.
    std::thread::sleep(std::time::Duration::from_millis(500));
    pings(&vms[0].ns, "198.18.0.2");
    let got = summary(c);
    assert_eq!(got["rates"], serde_json::json!([2]), "{T}: {got}");
    assert!(got["flows"].as_u64().unwrap_or(0) >= 5, "{T}: {got}");

    // Cleared: nothing more.
    let (c, port) = collector(3);
    ovn.vsctl(
        H,
        &[
            "set",
            "sFlow",
            uuid.trim(),
            &format!("targets=\"127.0.0.1:{port}\""),
        ],
    );
    ovn.vsctl(H, &["clear", "Bridge", "br-int", "sflow"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    pings(&vms[0].ns, "198.18.0.2");
    let got = summary(c);
    assert_eq!(got["flows"], 0, "{T}: export after the row went: {got}");

    // A row again: the export starts again.
    let (c, port) = collector(3);
    attach(port);
    std::thread::sleep(std::time::Duration::from_millis(500));
    pings(&vms[0].ns, "198.18.0.2");
    let got = summary(c);
    assert!(
        got["flows"].as_u64().unwrap_or(0) >= 5,
        "{T}: export after a row came back: {got}"
    );
}

//! Frames by difference: the same flows, put in by `ovs-ofctl -O
//! OpenFlow13`, and the same frames through eswitchd and through a private
//! Open vSwitch 3.1; what leaves each port must be the same bytes (root:
//! Open vSwitch and the lab need it; `SKIP` otherwise).
//!
//! Open vSwitch's ports are `dummy` netdevs: a frame goes in with
//! `ovs-appctl netdev-dummy/receive`, what leaves is written to each
//! port's `tx_pcap`. eswitchd's are the lab's veth pairs (AF_PACKET): a
//! frame goes in from the VM's side, what leaves is captured on each VM's
//! side (VLAN tags the kernel took out put back, from PACKET_AUXDATA).
//! The frames are `ovs-ofctl compose-packet`'s. Each frame is received
//! twice: the first is an upcall, the second a cache hit.
//!
//! The corpus is `tests/ofctl_diff/frames.txt`; a case whose outputs
//! differ on purpose is on `tests/ofctl_diff/allow.txt` as `frames CASE`
//! (the same list as the `ovs-ofctl` outputs'). `OFCTL_DIFF_ONLY=TEXT`
//! runs only the cases containing TEXT. Prints `bench:
//! openflow.frames_diff_cases` and `openflow.frames_diff_mismatches`.

mod lab;
mod verdicts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration::ovs::Ovs;
use integration::TempDir;
use lab::LiveLab;
use verdicts::{read_lines, Verdicts};

const T: &str = "frames_through_eswitchd_and_open_vswitch_leave_the_same_ports_as_the_same_bytes";
const PORTS: u32 = 4;
/// How long each VM captures after the frames are sent.
const SETTLE: Duration = Duration::from_millis(400);

fn ofctl(target: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("ovs-ofctl")
        .args(["--timeout", "10", "-O", "OpenFlow13"])
        .args(args.iter().map(|a| if *a == "TARGET" { target } else { a }))
        .output()
        .map_err(|e| format!("ovs-ofctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        // ovs-ofctl's own log lines carry the time: the message after it
        // is what is compared (the same refusal a second apart is the
        // same refusal).
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err
            .lines()
            .map(|l| match l.split_once('Z') {
                // 2026-11-29T03:51:38Z|00001|meta_flow|WARN|...
                Some((time, rest))
                    if rest.starts_with('|') && time.len() >= 19 && time.as_bytes()[10] == b'T' =>
                {
                    rest
                }
                _ => l,
            })
            .collect();
        Err(lines.join("\n").trim().to_string())
    }
}

/// `ovs-ofctl compose-packet FIELDS` as bytes (its output is a hex dump).
fn compose(fields: &str) -> Vec<u8> {
    let dump = ofctl("", &["compose-packet", fields])
        .unwrap_or_else(|e| panic!("compose-packet {fields}: {e}"));
    dump.lines()
        .flat_map(|l| {
            // "00000010  08 00 45 00 ...-.. 40 06  |ascii|" (no ascii here)
            let hex = l.get(10..).unwrap_or("");
            let hex = hex.split("  |").next().unwrap_or("");
            hex.split([' ', '-'])
                .filter(|b| b.len() == 2)
                .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
                .collect::<Vec<_>>()
        })
        .collect()
}

struct Case {
    line: String,
    packet: Vec<u8>,
    in_port: u32,
    cmds: Vec<String>,
}

fn cases(only: &str) -> Vec<Case> {
    let mut packets: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut out = Vec::new();
    for l in read_lines("frames.txt") {
        if let Some(rest) = l.strip_prefix("packet ") {
            let (name, fields) = rest.split_once(' ').expect("packet NAME FIELDS");
            packets.insert(name.to_string(), compose(fields));
            continue;
        }
        let rest = l.strip_prefix("case ").expect("packet or case");
        if !l.contains(only) {
            continue;
        }
        let (head, cmds) = rest.split_once(" | ").expect("case NAME PORT | CMDS");
        let (name, port) = head.split_once(' ').expect("case NAME PORT");
        out.push(Case {
            line: l.clone(),
            packet: packets
                .get(name)
                .unwrap_or_else(|| panic!("no packet {name}"))
                .clone(),
            in_port: port.parse().expect("in_port"),
            cmds: cmds.split(" ; ").map(str::to_string).collect(),
        });
    }
    out
}

/// A controller for the case: `ovs-ofctl monitor TARGET resume`, which
/// takes packet-ins as NXT_PACKET_IN2 and sends each paused one back
/// (NXT_RESUME); stopped on drop.
struct Monitor(std::process::Child);

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Empty tables and groups, then the case's commands (`monitor-resume`:
/// a [`Monitor`], kept while the case runs); the first error.
fn program(target: &str, cmds: &[String]) -> Result<Vec<Monitor>, String> {
    for c in ["del-flows", "del-groups"] {
        ofctl(target, &[c, "TARGET"])?;
    }
    let mut monitors = Vec::new();
    for c in cmds {
        if c == "monitor-resume" {
            let child = Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow13", "monitor", target, "resume"])
                // Its control socket goes there.
                .env("OVS_RUNDIR", std::env::temp_dir())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("ovs-ofctl monitor: {e}"))?;
            monitors.push(Monitor(child));
            // Connected and its packet-in format set before frames come.
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        let (verb, arg) = c.split_once(' ').unwrap_or((c, ""));
        ofctl(target, &[verb, "TARGET", arg]).map_err(|e| format!("{c}: {e}"))?;
    }
    Ok(monitors)
}

/// The frames of a pcap file, from the `skip`th on.
fn pcap_frames(path: &Path, skip: usize) -> Vec<Vec<u8>> {
    let Ok(b) = std::fs::read(path) else {
        return Vec::new();
    };
    let mut at = 24;
    let mut frames = Vec::new();
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        let Some(f) = b.get(at + 16..at + 16 + incl) else {
            break;
        };
        frames.push(f.to_vec());
        at += 16 + incl;
    }
    frames.split_off(skip.min(frames.len()))
}

/// What left each port, as text to compare: `port N: HEX` lines in order.
fn render(per_port: &BTreeMap<u32, Vec<Vec<u8>>>) -> String {
    let mut s = String::new();
    for (p, frames) in per_port {
        for f in frames {
            let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
            s += &format!("port {p}: {hex}\n");
        }
    }
    if s.is_empty() {
        s = "nothing left any port\n".into();
    }
    s
}

fn through_ovs(ovs: &Ovs, pcaps: &BTreeMap<u32, PathBuf>, c: &Case) -> String {
    let _monitors = match program(&ovs.bridge_target(), &c.cmds) {
        Ok(m) => m,
        Err(e) => return format!("error {e}"),
    };
    let before: BTreeMap<u32, usize> = pcaps
        .iter()
        .map(|(p, f)| (*p, pcap_frames(f, 0).len()))
        .collect();
    let hex: String = c.packet.iter().map(|b| format!("{b:02x}")).collect();
    for _ in 0..2 {
        ovs.appctl(&["netdev-dummy/receive", &format!("p{}", c.in_port), &hex])
            .unwrap_or_else(|e| panic!("netdev-dummy/receive: {e}"));
    }
    std::thread::sleep(Duration::from_millis(if _monitors.is_empty() {
        100
    } else {
        400
    }));
    let out = pcaps
        .iter()
        .map(|(p, f)| (*p, pcap_frames(f, before[p])))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    render(&out)
}

/// Receives on `eth0` for `secs` from the line "go" on its input (every
/// port's capture starts its time together, however long the others took
/// to start on a loaded machine), printing each frame that came in as
/// hex, its VLAN tag (taken out by the kernel) put back.
const CAPTURE: &str = r#"
import select, socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.bind(("eth0", 0))
print("ready", flush=True)
sys.stdin.readline()
end = time.time() + float(sys.argv[1])
while True:
    left = end - time.time()
    if left <= 0:
        break
    if not select.select([s], [], [], left)[0]:
        continue
    data, anc, _, addr = s.recvmsg(65536, 64)
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    for level, kind, aux in anc:
        if level == 263 and kind == 8:
            status, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", aux[:20])
            if status & 0x10:
                tpid = tpid if status & 0x40 else 0x8100
                data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    print(data.hex(), flush=True)
"#;

const SEND: &str = r#"
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for _ in range(int(sys.argv[2])):
    s.send(bytes.fromhex(sys.argv[1]))
"#;

fn through_eswitchd(lab: &LiveLab, target: &str, c: &Case) -> String {
    let _monitors = match program(target, &c.cmds) {
        Ok(m) => m,
        Err(e) => return format!("error {e}"),
    };
    let secs = format!("{}", SETTLE.as_secs_f64() + 1.0);
    let mut caps = Vec::new();
    for p in 1..=PORTS {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &lab.ns(&format!("vm{p}"))])
            .args(["python3", "-c", CAPTURE, &secs])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("capture");
        // Wait for its "ready" line: bound before anything is sent.
        let mut out = child.stdout.take().expect("stdout");
        let mut first = [0u8; 6];
        let _ = std::io::Read::read_exact(&mut out, &mut first);
        caps.push((p, child, out));
    }
    for (_, child, _) in &mut caps {
        if let Some(mut go) = child.stdin.take() {
            let _ = std::io::Write::write_all(&mut go, b"go\n");
        }
    }
    let hex: String = c.packet.iter().map(|b| format!("{b:02x}")).collect();
    // One at a time: the second meets the megaflow the first made.
    for _ in 0..2 {
        let ns = lab.ns(&format!("vm{}", c.in_port));
        integration::netns::run(
            "ip",
            &["netns", "exec", &ns, "python3", "-c", SEND, &hex, "1"],
        )
        .unwrap_or_else(|e| panic!("send: {e}"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut per_port = BTreeMap::new();
    for (p, mut child, mut out) in caps {
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut text);
        let frames: Vec<Vec<u8>> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                (0..l.len() / 2)
                    .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).expect("hex"))
                    .collect()
            })
            .collect();
        if !frames.is_empty() {
            per_port.insert(p, frames);
        }
    }
    render(&per_port)
}

#[test]
fn frames_through_eswitchd_and_open_vswitch_leave_the_same_ports_as_the_same_bytes() {
    if !lab::can_run(T, "af_packet") {
        return;
    }
    let Some(_) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let Some(_) = prereq::tool(T, "python3") else {
        return;
    };
    let Some(ovs) = Ovs::start_or_skip(T) else {
        return;
    };
    let mut pcaps = BTreeMap::new();
    for p in 1..=PORTS {
        let f = ovs.dir().join(format!("p{p}-tx.pcap"));
        ovs.vsctl(&[
            "set",
            "Interface",
            &format!("p{p}"),
            &format!("options:tx_pcap={}", f.display()),
        ])
        .expect("tx_pcap");
        pcaps.insert(p, f);
    }
    let of_dir = TempDir::new("esw-frames").expect("dir");
    let sock = of_dir.path().join("br0.mgmt");
    let extra = format!(
        "[openflow]\nlisten = [\"punix:{}\"]\nfail_mode = \"secure\"\n",
        sock.display()
    );
    let lab = LiveLab::start(
        PORTS,
        "af_packet",
        Some("priority=0,actions=drop\n"),
        &extra,
    );
    let target = format!("unix:{}", sock.display());
    let mut verdicts = Verdicts::new("frames ");
    let only = std::env::var("OFCTL_DIFF_ONLY").unwrap_or_default();
    let cases = cases(&only);
    for c in &cases {
        let theirs = through_ovs(&ovs, &pcaps, c);
        let ours = through_eswitchd(&lab, &target, c);
        if std::env::var_os("OFCTL_DIFF_SHOW").is_some() {
            eprintln!("CASE {}\n{ours}\n", c.line);
        }
        verdicts.judge(&c.line, &ours, &theirs);
    }
    verdicts.report("frames_diff");
}

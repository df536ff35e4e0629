//! OpenFlow by difference: the same `ovs-ofctl -O OpenFlow13` commands
//! against eswitchd and against a private Open vSwitch 3.1, outputs
//! compared (root: Open vSwitch needs it; `SKIP` otherwise).
//!
//! The corpus (`tests/ofctl_diff/corpus.txt`) is one case a line:
//! - `flow SPEC`: `add-flow SPEC` on empty tables, then `dump-flows`: the
//!   add's error (type and code) or the flow as each switch prints it back;
//! - `run CMD ; CMD ...`: `ovs-ofctl` commands (`TARGET` is the switch) on
//!   empty tables, each one's output or error;
//! - `monitor CMD ; CMD ...`: the same, with `ovs-ofctl monitor` connected
//!   meanwhile: the asynchronous messages it printed (PACKET_IN,
//!   FLOW_REMOVED) too;
//! - `raw MSG ; MSG ...`: OpenFlow messages `ovs-ofctl` has no command for
//!   (`role:ROLE:GENERATION`, `get-async`, `hex:BYTES`) on one connection,
//!   each followed by a BARRIER: each one's error or reply.
//!
//! What is compared goes through [`normalize`], the one place that says
//! what may differ (xids, durations, counters, the socket's path). A case
//! whose outputs still differ must be on the allow-list
//! (`tests/ofctl_diff/allow.txt`: the case, `|`, why), which the test reads;
//! a case on the list that no longer differs is reported, so the list
//! stays short. `OFCTL_DIFF_ONLY=TEXT` runs only the cases containing
//! TEXT; `OFCTL_DIFF_SHOW=1` prints eswitchd's outcome of each. Prints `bench: openflow.diff_cases` and
//! `openflow.diff_mismatches` (differences not on the list: must be 0).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod verdicts;

use integration::eswitchd::Eswitchd;
use integration::ovs::Ovs;
use verdicts::{read_lines, Verdicts};

const T: &str = "ovs_ofctl_against_eswitchd_and_open_vswitch";

/// One `ovs-ofctl -O PROTO` run: its normalized outcome.
fn ofctl(bin: &Path, proto: &str, target: &str, cmd: &str) -> String {
    let args: Vec<String> = cmd
        .split_whitespace()
        .map(|a| {
            if a == "TARGET" {
                target.to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    let out = Command::new(bin)
        .args(["--timeout", "10", "-O", proto])
        .args(&args)
        .output();
    match out {
        Err(e) => format!("cannot run ovs-ofctl: {e}"),
        Ok(o) => normalize(
            target,
            o.status.success(),
            &String::from_utf8_lossy(&o.stdout),
            &String::from_utf8_lossy(&o.stderr),
        ),
    }
}

/// What may differ between the two switches and is not compared: the
/// socket's path, xids, durations and ages, counters, the order of a
/// dump's flows; an OpenFlow error is compared by its type and code names.
fn normalize(target: &str, ok: bool, stdout: &str, stderr: &str) -> String {
    if !ok {
        let names: Vec<&str> = stderr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| (w.starts_with("OFP") || w.starts_with("NX")) && w.contains('_'))
            .collect();
        if !names.is_empty() {
            return format!("error {}", names.join(" "));
        }
        return format!("error {}", stderr.replace(target, "TARGET").trim());
    }
    let mut lines: Vec<String> = stdout
        .lines()
        // The TLV table's option space is each switch's own (eswitch's is
        // the room its flow key keeps, and its reply says so).
        .filter(|l| !l.trim_start().starts_with("max option space="))
        .map(|l| {
            let mut out = Vec::new();
            for part in l.replace(target, "TARGET").split(", ") {
                let part = part.trim_end_matches(',');
                let drop = [
                    "duration=",
                    "n_packets=",
                    "n_bytes=",
                    "idle_age=",
                    "hard_age=",
                ]
                .iter()
                .any(|p| part.trim_start().starts_with(p));
                if !drop {
                    out.push(part.to_string());
                }
            }
            // FLOW_REMOVED prints `duration0.253s idle0`, unseparated.
            let l = out
                .join(", ")
                .split(' ')
                .filter(|w| {
                    !w.strip_prefix("duration")
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
                })
                .collect::<Vec<_>>()
                .join(" ");
            match l.find("(xid=") {
                Some(i) => {
                    let end = l[i..].find(')').map_or(l.len(), |j| i + j + 1);
                    format!("{}{}", &l[..i], &l[end..])
                }
                None => l,
            }
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines.sort();
    lines.join("\n")
}

/// Empty tables, meters, groups and TLV map.
fn reset(bin: &Path, proto: &str, target: &str) {
    for cmd in [
        "del-flows TARGET",
        "del-groups TARGET",
        "del-meters TARGET",
        "del-tlv-map TARGET",
    ] {
        ofctl(bin, proto, target, cmd);
    }
}

fn outcome(bin: &Path, proto: &str, target: &str, case: &str, rundir: &Path) -> String {
    reset(bin, proto, target);
    if let Some(cmds) = case.strip_prefix("monitor ") {
        return monitored(bin, proto, target, cmds, rundir);
    }
    if let Some(msgs) = case.strip_prefix("raw ") {
        return raw_case(target, msgs);
    }
    if let Some(spec) = case.strip_prefix("flow ") {
        let add = ofctl(bin, proto, target, &format!("add-flow TARGET {spec}"));
        let dump = ofctl(bin, proto, target, "dump-flows TARGET");
        return format!("add: {add}\ndump: {dump}");
    }
    let cmds = case.strip_prefix("run ").unwrap_or(case);
    cmds.split(" ; ")
        .map(|c| format!("{c}: {}", ofctl(bin, proto, target, c.trim())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `ovs-ofctl monitor TARGET 65535` while the case's commands run: the
/// asynchronous messages it printed (PACKET_IN, FLOW_REMOVED, ...).
fn monitored(bin: &Path, proto: &str, target: &str, cmds: &str, rundir: &Path) -> String {
    let mut mon = match Command::new(bin)
        .args(["-O", proto, "monitor", target, "65535"])
        // Its unixctl socket goes here, not to /var/run/openvswitch.
        .env("OVS_RUNDIR", rundir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return format!("cannot run ovs-ofctl monitor: {e}"),
    };
    // Connected and its SET_CONFIG taken: a barrier from another
    // connection cannot tell, so wait for the connection to settle.
    std::thread::sleep(Duration::from_millis(500));
    let each: Vec<String> = cmds
        .split(" ; ")
        .map(|c| format!("{c}: {}", ofctl(bin, proto, target, c.trim())))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &mon.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while mon.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = mon.kill();
    let (out, err) = mon
        .wait_with_output()
        .map(|o| (o.stdout, o.stderr))
        .unwrap_or_default();
    // It prints what it receives on stderr when stdout is not a terminal,
    // beside its log lines (`2026-11-27T07:05:49Z|00001|...`).
    let err = String::from_utf8_lossy(&err);
    let printed: String = err
        .lines()
        .filter(|l| !(l.len() > 20 && l.as_bytes()[4] == b'-' && l.contains('|')))
        .map(|l| format!("{l}\n"))
        .collect();
    let seen = normalize(
        target,
        true,
        &format!("{}{printed}", String::from_utf8_lossy(&out)),
        "",
    );
    format!("{}\nmonitor: {seen}", each.join("\n"))
}

/// One OpenFlow 1.3 message of a `raw` case: `role:ROLE:GENERATION`
/// (ROLE_REQUEST), `get-async` (GET_ASYNC_REQUEST) or `hex:BYTES` (any
/// message; its xid is replaced).
fn raw_message(spec: &str, xid: u32) -> Result<Vec<u8>, String> {
    let header = |ty: u8, len: usize| {
        let mut v = vec![4, ty];
        v.extend_from_slice(&(len as u16).to_be_bytes());
        v.extend_from_slice(&xid.to_be_bytes());
        v
    };
    if let Some(rest) = spec.strip_prefix("role:") {
        let (role, generation) = rest.split_once(':').ok_or("role:ROLE:GENERATION")?;
        let role: u32 = match role {
            "nochange" => 0,
            "equal" => 1,
            "master" => 2,
            "slave" => 3,
            _ => return Err(format!("role {role}?")),
        };
        let generation: u64 = generation.parse().map_err(|e| format!("{spec}: {e}"))?;
        let mut m = header(24, 24);
        m.extend_from_slice(&role.to_be_bytes());
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&generation.to_be_bytes());
        return Ok(m);
    }
    if spec == "get-async" {
        return Ok(header(26, 8));
    }
    let hex = spec.strip_prefix("hex:").ok_or(format!("{spec}?"))?;
    let mut m: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{spec}: {e}"))?;
    if m.len() < 8 {
        return Err(format!("{spec}: shorter than a header"));
    }
    m[4..8].copy_from_slice(&xid.to_be_bytes());
    Ok(m)
}

/// Reads one OpenFlow message: (type, xid, body).
fn read_message(s: &mut UnixStream) -> std::io::Result<(u8, u32, Vec<u8>)> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h)?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len.saturating_sub(8)];
    s.read_exact(&mut body)?;
    Ok((h[1], u32::from_be_bytes([h[4], h[5], h[6], h[7]]), body))
}

/// A `raw` case: the messages on one connection, each followed by a
/// BARRIER; each one's answers (an error as its type and code, another
/// reply as its type and body) before the barrier's reply.
fn raw_case(target: &str, msgs: &str) -> String {
    let Some(path) = target.strip_prefix("unix:") else {
        return format!("not a unix target: {target}");
    };
    let mut s = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) => return format!("connect: {e}"),
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut out = Vec::new();
    let hello = [4u8, 0, 0, 8, 0, 0, 0, 1];
    if let Err(e) = s.write_all(&hello) {
        return format!("hello: {e}");
    }
    loop {
        match read_message(&mut s) {
            Ok((0, ..)) => break,
            Ok(_) => continue,
            Err(e) => return format!("hello: {e}"),
        }
    }
    for (i, spec) in msgs.split(" ; ").enumerate() {
        let xid = 0x100 + 2 * i as u32;
        let msg = match raw_message(spec.trim(), xid) {
            Ok(m) => m,
            Err(e) => panic!("bad raw message: {e}"),
        };
        let barrier = [4u8, 20, 0, 8]
            .into_iter()
            .chain((xid + 1).to_be_bytes())
            .collect::<Vec<u8>>();
        if let Err(e) = s.write_all(&msg).and_then(|()| s.write_all(&barrier)) {
            out.push(format!("{spec}: write: {e}"));
            break;
        }
        let mut answers = Vec::new();
        loop {
            match read_message(&mut s) {
                Ok((21, x, _)) if x == xid + 1 => break,
                Ok((1, x, body)) if x == xid && body.len() >= 4 => {
                    let ty = u16::from_be_bytes([body[0], body[1]]);
                    let code = u16::from_be_bytes([body[2], body[3]]);
                    answers.push(format!("error {ty} {code}"));
                }
                Ok((ty, x, body)) if x == xid => {
                    let hex: String = body.iter().map(|b| format!("{b:02x}")).collect();
                    answers.push(format!("type {ty} {hex}"));
                }
                // Asynchronous messages (port status...) are not compared.
                Ok(_) => {}
                Err(e) => {
                    answers.push(format!("read: {e}"));
                    break;
                }
            }
        }
        let said = if answers.is_empty() {
            "ok".to_string()
        } else {
            answers.join("; ")
        };
        out.push(format!("{spec}: {said}"));
    }
    out.join("\n")
}

#[test]
fn ovs_ofctl_against_eswitchd_and_open_vswitch() {
    corpus(T, "OpenFlow13", "diff", |_| true);
}

/// The corpus again with `ovs-ofctl -O OpenFlow15` (the version
/// ovn-controller speaks): every case but the `raw` ones, whose bytes are
/// 1.3's. Prints `bench: openflow.diff15_cases` and `_mismatches`.
#[test]
fn ovs_ofctl_openflow15_against_eswitchd_and_open_vswitch() {
    corpus(T15, "OpenFlow15", "diff15", |c| !c.starts_with("raw "));
}

const T15: &str = "ovs_ofctl_openflow15_against_eswitchd_and_open_vswitch";

fn corpus(t: &str, proto: &str, bench: &str, take: impl Fn(&str) -> bool) {
    let Some(bin) = prereq::tool(t, "ovs-ofctl") else {
        return;
    };
    let Some(ovs) = Ovs::start_or_skip(t) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("esw-{bench}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("test directory");
    let esw = Eswitchd::start(Path::new(env!("CARGO_BIN_EXE_eswitchd")), &dir, 4, Some(""))
        .unwrap_or_else(|e| panic!("{t}: {e}"));
    let mut verdicts = Verdicts::layered(if proto == "OpenFlow13" {
        "of13 "
    } else {
        "of15 "
    });
    // `OFCTL_DIFF_ONLY=TEXT`: only the cases containing TEXT (a developer
    // looking at one difference).
    let only = std::env::var("OFCTL_DIFF_ONLY").unwrap_or_default();
    let show = std::env::var_os("OFCTL_DIFF_SHOW").is_some();
    let cases: Vec<String> = read_lines("corpus.txt")
        .into_iter()
        .filter(|c| c.contains(&only) && take(c))
        .collect();
    for case in &cases {
        let ours = outcome(&bin, proto, esw.target(), case, &dir);
        let theirs = outcome(&bin, proto, &ovs.bridge_target(), case, &dir);
        if show {
            eprintln!("CASE {case}\n{ours}\n");
        }
        verdicts.judge(case, &ours, &theirs);
    }
    let _ = std::fs::remove_dir_all(&dir);
    verdicts.report(bench);
}

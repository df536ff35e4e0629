//! The live lab of the scenario tests: integration/scripts/lab.sh's
//! namespaces and the real `eswitchd`, stopped by PID and removed on drop.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use integration::netns::run;
use integration::TempDir;
use serde_json::Value;

pub static SEQ: AtomicU32 = AtomicU32::new(0);

/// Tools lab.sh and the scenarios run.
pub const TOOLS: [&str; 6] = ["ip", "ethtool", "ping", "bash", "kill", "sysctl"];

/// True when `test` can run: root, the tools, and for `af_xdp` ports a
/// kernel with AF_XDP sockets; otherwise it has been skipped.
pub fn can_run(test: &str, port_type: &str) -> bool {
    prereq::netns(test, &TOOLS)
        && (port_type != "af_xdp"
            || prereq::kernel_feature(
                test,
                "AF_XDP",
                xsk::available("lo").map_err(|e| (e.errno(), e)),
            ))
}

pub fn lab_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/scripts/lab.sh")
}

/// A lab with a running daemon; everything goes on drop.
pub struct LiveLab {
    name: String,
    /// Config, flow file, socket, log; removed after the lab.
    tmp: TempDir,
    daemon: Option<Child>,
}

impl LiveLab {
    /// `vms` VMs, the given port type, optional flow file text and extra
    /// config tables.
    pub fn start(vms: u32, port_type: &str, flows: Option<&str>, extra: &str) -> LiveLab {
        LiveLab::start_with(vms, port_type, flows, extra, &[])
    }

    /// As [`start`](Self::start), with lab.sh's port flags (`--uplink`:
    /// the port `wire0` to the namespace `wire`; `--internal`: the port
    /// `host0` whose peer is the switch namespace's own `host0h`).
    pub fn start_with(
        vms: u32,
        port_type: &str,
        flows: Option<&str>,
        extra: &str,
        flags: &[&str],
    ) -> LiveLab {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("el{}x{n}", std::process::id() % 100_000);
        let tmp = TempDir::new("eswitch-live").expect("lab dir");
        let mut lab = LiveLab {
            name,
            tmp,
            daemon: None,
        };
        let extra_path = lab.dir().join("extra.toml");
        std::fs::write(&extra_path, extra).expect("extra config");
        let script = lab_script();
        let vms_s = vms.to_string();
        let dir_s = lab.dir().display().to_string();
        let extra_s = extra_path.display().to_string();
        let mut args = vec![
            "up",
            "--name",
            &lab.name,
            "--vms",
            &vms_s,
            "--dir",
            &dir_s,
            "--port-type",
            port_type,
            "--extra",
            &extra_s,
        ];
        let flows_path = lab.dir().join("flows.txt");
        let flows_s = flows_path.display().to_string();
        if let Some(f) = flows {
            std::fs::write(&flows_path, f).expect("flow file");
            args.extend(["--flows", &flows_s]);
        }
        args.extend(flags);
        let script_s = script.display().to_string();
        run(&script_s, &args).expect("lab.sh up");
        let log = std::fs::File::create(lab.dir().join("eswitchd.log")).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.ns("sw")])
            .arg(env!("CARGO_BIN_EXE_eswitchd"))
            .args(["run", "--config"])
            .arg(lab.dir().join("eswitch.toml"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn eswitchd");
        lab.daemon = Some(child);
        lab.wait_for("every port open", || {
            lab.ctl(&["show"]).ok().is_some_and(|v| {
                let ports = v["ports"].as_array().cloned().unwrap_or_default();
                ports.len() == vms as usize + flags.len()
                    && ports.iter().all(|p| p["state"] == "up")
            })
        });
        lab
    }

    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    pub fn ns(&self, which: &str) -> String {
        format!("{}-{which}", self.name)
    }

    pub fn socket(&self) -> PathBuf {
        self.dir().join("eswitchd.sock")
    }

    /// `eswitchctl --json ARGS`: the value, or the error output.
    pub fn ctl(&self, args: &[&str]) -> Result<Value, String> {
        let out = Command::new(env!("CARGO_BIN_EXE_eswitchctl"))
            .arg("--socket")
            .arg(self.socket())
            .arg("--json")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
    }

    pub fn stats(&self) -> Value {
        self.ctl(&["stats"]).expect("stats")
    }

    pub fn flows(&self) -> Vec<Value> {
        self.ctl(&["dump-flows"]).expect("dump-flows")["flows"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn port(&self, name: &str) -> Value {
        self.ctl(&["show"]).expect("show")["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name).cloned())
            .unwrap_or(Value::Null)
    }

    /// `count` pings from VM `from` to VM `to`; true if all came back.
    pub fn ping(&self, from: u32, to: u32, count: u32) -> bool {
        self.ping_addr(&format!("vm{from}"), &format!("198.18.0.{to}"), count)
    }

    /// `count` pings from the lab namespace `from` (`vm1`, `wire`, `sw`)
    /// to `addr`; true if all came back.
    pub fn ping_addr(&self, from: &str, addr: &str, count: u32) -> bool {
        let count = count.to_string();
        let ns = self.ns(from);
        let args = [
            "netns", "exec", &ns, "ping", "-q", "-c", &count, "-i", "0.05", "-W", "1", addr,
        ];
        run("ip", &args).is_ok()
    }

    /// `count` UDP datagrams from VM `from` to VM `to` port 9 (bash's
    /// /dev/udp: each from a new socket, so a new source port each).
    pub fn udp(&self, from: u32, to: u32, count: u32) {
        self.udp_to_port(from, to, 9, count);
    }

    /// `count` UDP datagrams from VM `from` to VM `to`, UDP port `port`.
    pub fn udp_to_port(&self, from: u32, to: u32, port: u16, count: u32) {
        self.udp_addr(&format!("vm{from}"), &format!("198.18.0.{to}"), port, count);
    }

    /// `count` UDP datagrams from the lab namespace `from` to `addr`, UDP
    /// port `port`.
    pub fn udp_addr(&self, from: &str, addr: &str, port: u16, count: u32) {
        let script =
            format!("for i in $(seq 1 {count}); do echo eswitch >/dev/udp/{addr}/{port}; done");
        run(
            "ip",
            &["netns", "exec", &self.ns(from), "bash", "-c", &script],
        )
        .expect("udp");
    }

    /// UDP datagrams VM `vm` has received (its eth0 counter).
    pub fn udp_received(&self, vm: u32) -> u64 {
        self.udp_received_in(&format!("vm{vm}"))
    }

    /// UDP datagrams the lab namespace `ns` has received.
    pub fn udp_received_in(&self, ns: &str) -> u64 {
        let out = run(
            "ip",
            &["netns", "exec", &self.ns(ns), "cat", "/proc/net/snmp"],
        )
        .expect("snmp");
        // "Udp: InDatagrams NoPorts ..." header then values; a datagram
        // to a closed port counts in NoPorts.
        let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("Udp:")).collect();
        let (Some(h), Some(v)) = (lines.first(), lines.get(1)) else {
            return 0;
        };
        h.split_whitespace()
            .zip(v.split_whitespace())
            .filter(|(k, _)| *k == "InDatagrams" || *k == "NoPorts")
            .map(|(_, v)| v.parse::<u64>().unwrap_or(0))
            .sum()
    }

    pub fn wait_for(&self, what: &str, cond: impl FnMut() -> bool) {
        self.wait_for_within(Duration::from_secs(10), what, cond)
    }

    /// [`wait_for`](Self::wait_for) with a deadline of `limit`.
    pub fn wait_for_within(&self, limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir().join("eswitchd.log")).unwrap_or_default();
        panic!("timed out waiting for {what}; eswitchd log:\n{log}");
    }

    /// SIGTERM; waits (at most 10 s) for the exit; returns its status
    /// success and standard output.
    pub fn stop(&mut self) -> (bool, String) {
        let Some(mut child) = self.daemon.take() else {
            return (false, String::new());
        };
        let _ = run("kill", &["-TERM", &child.id().to_string()]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        if status.is_none() {
            let _ = child.kill();
        }
        let out = child
            .wait_with_output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        (status.is_some_and(|s| s.success()), out)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("eswitchd.log")).unwrap_or_default()
    }
}

impl Drop for LiveLab {
    fn drop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = run("kill", &["-TERM", &c.id().to_string()]);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let script = lab_script().display().to_string();
        let _ = run(&script, &["down", "--name", &self.name]);
        // `tmp` goes with the struct.
    }
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Waits past a few counter publications (the datapath threads publish
/// every 50 ms), then reads `stats`.
pub fn settled_stats(lab: &LiveLab) -> Value {
    std::thread::sleep(Duration::from_millis(200));
    lab.stats()
}

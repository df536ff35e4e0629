//! A real Prometheus (Debian's `prometheus`) scrapes a live eswitchd's
//! `[metrics] listen` endpoint; the values it stores, read back through
//! its HTTP query API, match the traffic sent. Needs root and the lab's
//! tools (see live_netns.rs), python3 and prometheus. Prometheus runs in
//! the lab's switch namespace (where eswitchd's loopback endpoint is),
//! stopped by PID however the test ends.

mod lab;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::{can_run, LiveLab};

const TEST: &str = "prometheus_scrapes_the_traffic_eswitchd_forwarded";
const PORT: u16 = 5300;

/// A process killed and reaped however the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Prometheus's answer to an instant `query`, as the value of its single
/// series (`None`: no series yet).
fn query(lab: &LiveLab, q: &str) -> Option<f64> {
    let script = "import json, sys, urllib.parse, urllib.request\n\
        u = 'http://127.0.0.1:9090/api/v1/query?query=' + urllib.parse.quote(sys.argv[1])\n\
        r = json.load(urllib.request.urlopen(u, timeout=5))\n\
        res = r['data']['result']\n\
        print(res[0]['value'][1] if len(res) == 1 else '')\n";
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.ns("sw"), "python3", "-c", script, q])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Waits (at most 30 s: a few scrapes) until `cond` holds of `q`'s value.
fn wait_query(lab: &LiveLab, q: &str, cond: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = None;
    while Instant::now() < deadline {
        last = query(lab, q);
        if last.is_some_and(&cond) {
            return last.unwrap_or_default();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!(
        "Prometheus never had {q} as wanted (last: {last:?}); eswitchd log:\n{}",
        lab.log()
    );
}

#[test]
fn prometheus_scrapes_the_traffic_eswitchd_forwarded() {
    if !can_run(TEST, "auto") || !prereq::tools(TEST, &["prometheus", "python3"]) {
        return;
    }
    let Some(prometheus) = prereq::find_tool("prometheus") else {
        return;
    };
    let flows =
        format!("priority=10,udp,tp_dst={PORT},actions=output:2\npriority=1,actions=normal\n");
    let lab = LiveLab::start(
        2,
        "auto",
        Some(&flows),
        "[metrics]\nlisten = \"127.0.0.1:9477\"\n[limits]\nrevalidator_interval_ms = 100\n",
    );
    let cfg = lab.dir().join("prometheus.yml");
    std::fs::write(
        &cfg,
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n  - job_name: eswitch\n    static_configs:\n      - targets: ['127.0.0.1:9477']\n",
    )
    .expect("prometheus.yml");
    let data = lab.dir().join("prometheus-data");
    let _prom = Killed(
        Command::new("ip")
            .args(["netns", "exec", &lab.ns("sw")])
            .arg(prometheus)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .args(["--web.listen-address=127.0.0.1:9090", "--log.level=warn"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    // The target is up and the build is known.
    wait_query(&lab, "up{job=\"eswitch\"}", |v| v == 1.0);
    wait_query(&lab, "eswitch_build_info{backend=\"sim\"}", |v| v == 1.0);
    // ARP settled, and the UDP flow hot and in the device, before
    // anything is counted.
    assert!(lab.ping(1, 2, 2), "vm1 reaches vm2");
    lab.udp_to_port(1, 2, PORT, 10);
    lab.wait_for("the UDP flow offloaded", || {
        lab.flows().iter().any(|f| {
            f["offloaded"] == "yes" && f["match"].as_str().is_some_and(|m| m.contains("udp"))
        })
    });
    let tx = "sum(eswitch_port_tx_packets_total{port=\"vm2\"})";
    let hw = "eswitch_port_tx_packets_total{port=\"vm2\",path=\"hardware\"}";
    // Steady: two scrapes agree (the device's counts arrive at a poll).
    let steady = |q: &str| {
        let mut before = query(&lab, q).unwrap_or_default();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(1500));
            let now = query(&lab, q).unwrap_or_default();
            if now == before {
                break;
            }
            before = now;
        }
        before
    };
    let (before, hw_before) = (steady(tx), steady(hw));
    let base = lab.udp_received(2);
    const N: u32 = 40;
    lab.udp_to_port(1, 2, PORT, N);
    lab.wait_for("every datagram delivered", || {
        lab.udp_received(2) >= base + u64::from(N)
    });
    // The device forwarded them: counted once, on the hardware path.
    let after = wait_query(&lab, tx, |v| v >= before + f64::from(N));
    std::thread::sleep(Duration::from_millis(2500));
    let after = query(&lab, tx).unwrap_or(after);
    // The datagrams, and at most the two frames of a neighbour probe
    // (vm1's kernel re-checks vm2's MAC with a unicast ARP now and then).
    let d = after - before;
    assert!(
        (f64::from(N)..=f64::from(N) + 2.0).contains(&d),
        "vm2's transmits, hardware and software: {d} for {N} datagrams"
    );
    let hw_after = wait_query(&lab, hw, |v| v > hw_before);
    assert!(hw_after - hw_before >= 1.0, "{hw_before} → {hw_after}");
    wait_query(&lab, "eswitch_megaflows_created_total", |v| v >= 1.0);
    wait_query(&lab, "eswitch_upcalls_total", |v| v >= 1.0);
    wait_query(&lab, "eswitch_revalidator_pass_seconds_count", |v| v >= 1.0);
    wait_query(&lab, "eswitch_counter_poll_age_seconds", |v| v < 5.0);
    wait_query(&lab, "eswitch_flow_limit", |v| v > 0.0);
}

//! The live daemon on a sim eSwitch that misbehaves, as the config's fault
//! plan (`[[backend.fault]]`) makes it: a NIC that is full for a while,
//! fails a share of inserts with EIO, answers slowly, loses counter
//! queries and refuses destroys. Traffic keeps flowing in software, each
//! refused flow says why in `dump-flows`, retries succeed once the fault
//! clears, every packet is counted exactly once in the OpenFlow rules
//! (through software, hardware, removal), and the device is empty after
//! the stop. Needs root and the lab's tools (see live_netns.rs).

mod lab;

use lab::{can_run, u, LiveLab};
use serde_json::Value;

const PORTS: std::ops::RangeInclusive<u16> = 9001..=9008;

fn flows() -> String {
    let mut f: String = PORTS
        .map(|p| format!("priority=10,udp,tp_dst={p},actions=output:2\n"))
        .collect();
    f.push_str("priority=5,arp,actions=flood\n");
    f
}

const PLAN: &str = r#"
[offload]
retry_ms = 200

[limits]
max_idle_ms = 1000
revalidator_interval_ms = 100

# The NIC is full for the first four flow inserts (the first insert is
# the FDB layout's own rule), then has room again.
[[backend.fault]]
op = "rule_create"
errno = "ENOSPC"
after = 1
times = 4

# Then half of the next ten inserts fail with EIO.
[[backend.fault]]
op = "rule_create"
errno = "EIO"
after = 5
times = 10
fraction = 0.5

# Every insert takes 3 ms.
[[backend.fault]]
op = "rule_create"
latency_ms = 3

# Four counter queries fail, from the third on.
[[backend.fault]]
op = "counter_bulk_query"
errno = "EIO"
after = 2
times = 4

# The first three destroys are refused.
[[backend.fault]]
op = "rule_destroy"
errno = "EBUSY"
times = 3
"#;

/// The OpenFlow rules' packet counts of the UDP rules, summed.
fn rule_packets(lab: &LiveLab) -> u64 {
    let v = lab.ctl(&["dump-of"]).expect("dump-of");
    v["rules"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter(|r| r["rule"].as_str().is_some_and(|t| t.contains("tp_dst=")))
                .map(|r| u(&r["packets"]))
                .sum()
        })
        .unwrap_or(0)
}

fn offloaded(flows: &[Value]) -> usize {
    flows
        .iter()
        .filter(|f| {
            f["offloaded"] == "yes" && f["match"].as_str().is_some_and(|m| m.contains("udp"))
        })
        .count()
}

#[test]
fn device_faults_keep_traffic_flowing_and_every_packet_counted_once() {
    let test = "device_faults_keep_traffic_flowing_and_every_packet_counted_once";
    if !can_run(test, "auto") {
        return;
    }
    let mut lab = LiveLab::start(2, "auto", Some(&flows()), PLAN);
    let base = lab.udp_received(2);
    let mut sent = 0u64;
    let mut send_round = |lab: &LiveLab, n: u32| {
        for p in PORTS {
            lab.udp_to_port(1, 2, p, n);
        }
        sent += u64::from(n) * PORTS.count() as u64;
        sent
    };
    // Every flow turns hot; the first four inserts find the NIC full.
    let s = send_round(&lab, 4);
    lab.wait_for("every datagram delivered", || {
        lab.udp_received(2) >= base + s
    });
    lab.wait_for("the ENOSPC refusals", || {
        lab.stats()["offload_failures"]
            .as_object()
            .is_some_and(|m| m.keys().any(|k| k.contains("ENOSPC")))
    });
    let refused: Vec<String> = lab
        .flows()
        .iter()
        .filter_map(|f| f["offloaded"].as_str().map(str::to_string))
        .filter(|o| o.contains("ENOSPC"))
        .collect();
    assert!(
        !refused.is_empty(),
        "dump-flows names ENOSPC: {:?}",
        lab.flows()
    );
    assert!(refused.iter().all(|o| o.starts_with("no (")), "{refused:?}");
    // The faults clear; the flows' next packets retry, until all are in
    // the device (EIO refuses some on the way).
    for _ in 0..20 {
        if offloaded(&lab.flows()) == PORTS.count() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        send_round(&lab, 3);
    }
    assert_eq!(offloaded(&lab.flows()), PORTS.count(), "{:?}", lab.flows());
    let failures = lab.stats()["offload_failures"].clone();
    assert!(
        failures
            .as_object()
            .is_some_and(|m| m.keys().any(|k| k.contains("EIO"))),
        "{failures}"
    );
    // In hardware now: the sim forwards them.
    let hw0 = u(&lab.stats()["hw_handled"]);
    let s = send_round(&lab, 5);
    lab.wait_for("every datagram delivered", || {
        lab.udp_received(2) >= base + s
    });
    lab.wait_for("the sim forwarding them", || {
        u(&lab.stats()["hw_handled"]) >= hw0 + 40
    });
    // Idle: the flows age out; the first destroys are refused and retried.
    lab.wait_for("every flow aged out", || lab.flows().is_empty());
    lab.wait_for("every refused destroy retried", || {
        u(&lab.stats()["hw_undestroyed"]) == 0
    });
    assert_eq!(lab.udp_received(2) - base, sent, "nothing lost");
    // Every packet in the rules' counters once: software, hardware, the
    // final counts of removed rules (after the failed polls, and those of
    // the refused destroys).
    lab.wait_for("the rules' counts complete", || rule_packets(&lab) >= sent);
    assert_eq!(rule_packets(&lab), sent, "nothing counted twice");
    let st = lab.stats();
    assert!(u(&st["poll_errors"]) >= 1, "{st}");
    let (ok, _) = lab.stop();
    assert!(ok, "eswitchd exits cleanly; log:\n{}", lab.log());
    assert!(lab.log().contains("the device is empty"), "{}", lab.log());
}

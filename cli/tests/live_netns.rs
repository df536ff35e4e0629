//! `eswitchd run` on real netdevs: the lab of integration/scripts/lab.sh
//! (VM namespaces joined by veth pairs to a switch namespace whose ends
//! stand for the VF representors), the real `eswitchd` and `eswitchctl`
//! binaries, ping and UDP between the VMs. Needs root, iproute2, ethtool
//! and ping (and AF_XDP in the kernel for the AF_XDP walk); skips through
//! `prereq` otherwise. Addresses are from 198.18.0.0/15; every lab has a unique
//! name, and is removed (daemon stopped by PID, namespaces deleted) even
//! when a test fails.

mod lab;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use integration::netns::run;
use lab::{can_run, settled_stats, u, LiveLab};
use serde_json::Value;

/// Ping, then UDP, between two VMs under `actions=normal`: the first
/// packets go through software, the flow turns hot and the offload thread
/// puts it into the sim eSwitch (asynchronously, within milliseconds, as
/// Open vSwitch's offload thread does); from then on the eSwitch forwards
/// it.
fn normal_walk(port_type: &str) {
    let lab = LiveLab::start(3, port_type, None, "");
    assert!(lab.ping(1, 2, 3), "ping vm1 → vm2");
    let before = lab.udp_received(2);
    lab.udp(1, 2, 200);
    lab.wait_for("200 datagrams at vm2", || {
        lab.udp_received(2) >= before + 200
    });
    assert_eq!(lab.udp_received(2), before + 200, "nothing duplicated");
    let flow = || {
        let flows = lab.flows();
        flows
            .iter()
            .find(|f| {
                let m = f["match"].as_str().unwrap_or("");
                m.contains("in_port=1") && m.contains("dl_dst=02:00:00:00:00:02")
            })
            .cloned()
            .unwrap_or_else(|| panic!("no vm1 → vm2 megaflow in {flows:?}"))
    };
    lab.wait_for("the flow offloaded", || flow()["offloaded"] == "yes");
    // The next 200 go through the sim FDB.
    let hw_before = u(&settled_stats(&lab)["hw_handled"]);
    lab.udp(1, 2, 200);
    lab.wait_for("200 more datagrams at vm2", || {
        lab.udp_received(2) >= before + 400
    });
    assert_eq!(lab.udp_received(2), before + 400, "nothing duplicated");
    let st = settled_stats(&lab);
    let hw = u(&st["hw_handled"]) - hw_before;
    assert!(
        hw >= 190,
        "the sim FDB forwarded only {hw} of 200 datagrams: {st}"
    );
    assert_eq!(flow()["offloaded"], "yes", "{}", flow());
    // The hardware counts fold into the megaflow at the next revalidator
    // pass: the 3 pings and the 400 datagrams, exactly.
    lab.wait_for("the hardware counts folded", || {
        u(&flow()["packets"]) >= 403
    });
    assert_eq!(u(&flow()["packets"]), 403, "{}", flow());
    // Every port is of the type asked for ("auto" falls back to AF_PACKET
    // only where AF_XDP cannot open).
    let p2 = lab.port("vm2");
    for vm in ["vm1", "vm2", "vm3"] {
        let kind = lab.port(vm)["kind"].clone();
        match port_type {
            "auto" => assert!(kind == "af_xdp" || kind == "af_packet", "{vm}: {kind}"),
            asked => assert_eq!(kind, asked, "{vm} opened as {kind}, asked {asked}"),
        }
    }
    assert!(u(&p2["tx_hw_packets"]) >= 190, "{p2}");
}

#[test]
fn normal_ping_and_udp_offloaded_af_xdp() {
    if !can_run("normal_ping_and_udp_offloaded_af_xdp", "af_xdp") {
        return;
    }
    normal_walk("af_xdp");
}

#[test]
fn normal_ping_and_udp_offloaded_af_packet() {
    if !can_run("normal_ping_and_udp_offloaded_af_packet", "af_packet") {
        return;
    }
    normal_walk("af_packet");
}

#[test]
fn explicit_flows_and_a_flow_added_live() {
    if !can_run("explicit_flows_and_a_flow_added_live", "auto") {
        return;
    }
    let flows = "priority=10,ip,nw_dst=198.18.0.2,actions=output:2\n\
                 priority=10,ip,nw_dst=198.18.0.1,actions=output:1\n\
                 priority=5,arp,actions=flood\n\
                 priority=0,actions=drop\n";
    let lab = LiveLab::start(3, "auto", Some(flows), "");
    assert!(lab.ping(1, 2, 3), "ping vm1 → vm2 by explicit flows");
    assert!(!lab.ping(1, 3, 1), "no flow sends IP to vm3");
    let before = lab.udp_received(2);
    lab.udp(1, 2, 50);
    lab.wait_for("50 datagrams", || lab.udp_received(2) >= before + 50);
    // A drop for UDP to port 9, added live: the revalidator rewrites the
    // offloaded megaflow; pings still pass. Waited for by events, not
    // windows: two revalidator passes (one whole pass after the change),
    // then the 50 datagrams counted as dropped, by the device or the
    // software, or one of them delivered.
    let stat = |k: &str| lab.stats()[k].as_u64().unwrap_or(0);
    let passes = stat("revalidator_passes");
    lab.ctl(&[
        "add-flow",
        "priority=20,udp,nw_dst=198.18.0.2,tp_dst=9,actions=drop",
    ])
    .expect("add-flow");
    lab.wait_for("a whole revalidator pass after the change", || {
        stat("revalidator_passes") >= passes + 2
    });
    let before = lab.udp_received(2);
    let drops = || stat("hw_drops") + stat("sw_drops");
    let dropped = drops();
    lab.udp(1, 2, 50);
    lab.wait_for("the 50 datagrams dropped or delivered", || {
        drops() >= dropped + 50 || lab.udp_received(2) > before
    });
    assert_eq!(lab.udp_received(2), before, "UDP to port 9 is dropped now");
    assert!(lab.ping(1, 2, 2), "ping still passes");
    let bad = lab.ctl(&["add-flow", "priority=20,udp,tp_dst=nine,actions=drop"]);
    assert!(
        bad.as_ref().is_err_and(|e| e.contains("nine")),
        "a bad flow is refused naming the token: {bad:?}"
    );
    assert!(lab.ping(1, 2, 1), "and the switch goes on");
}

#[test]
fn deleted_port_loses_only_its_flows_and_link_state_follows() {
    if !can_run(
        "deleted_port_loses_only_its_flows_and_link_state_follows",
        "auto",
    ) {
        return;
    }
    let lab = LiveLab::start(3, "auto", None, "");
    assert!(lab.ping(1, 2, 5));
    assert!(lab.ping(1, 3, 5));
    let names = |flows: &[Value], port: &str| {
        flows
            .iter()
            .filter(|f| {
                let m = f["match"].as_str().unwrap_or("");
                let a = f["actions"].as_str().unwrap_or("");
                m.contains(&format!("in_port={port},")) || a.contains(&format!("output:{port}"))
            })
            .count()
    };
    let flows = lab.flows();
    assert!(names(&flows, "3") > 0 && names(&flows, "2") > 0);
    let unicast_12 = |flows: &[Value]| {
        flows
            .iter()
            .filter(|f| {
                let m = f["match"].as_str().unwrap_or("");
                m.contains("in_port=1") && m.contains("dl_dst=02:00:00:00:00:02")
            })
            .count()
    };
    assert_eq!(unicast_12(&flows), 1);

    // Link down: the port shows down and nothing reaches vm2.
    run("ip", &["-n", &lab.ns("sw"), "link", "set", "vm2", "down"]).expect("down");
    lab.wait_for("vm2 down", || lab.port("vm2")["state"] == "down");
    assert!(!lab.ping(1, 2, 1), "vm2 is cut off while down");
    run("ip", &["-n", &lab.ns("sw"), "link", "set", "vm2", "up"]).expect("up");
    lab.wait_for("vm2 up", || lab.port("vm2")["state"] == "up");
    lab.wait_for("ping after up", || lab.ping(1, 2, 1));

    // vm3's representor vanishes: its flows go, the others stay.
    run("ip", &["-n", &lab.ns("sw"), "link", "del", "vm3"]).expect("del");
    lab.wait_for("vm3 absent", || lab.port("vm3")["state"] == "absent");
    let flows = lab.flows();
    assert_eq!(
        names(&flows, "3"),
        0,
        "flows naming port 3 remain: {flows:?}"
    );
    assert_eq!(unicast_12(&flows), 1, "vm1 → vm2 kept: {flows:?}");
    assert!(lab.ping(1, 2, 3), "vm1 ↔ vm2 unaffected");
    assert!(lab.log().contains("flushed"), "the removal is logged");
}

#[test]
fn idle_flows_age_out_and_stop_leaves_no_rules() {
    if !can_run("idle_flows_age_out_and_stop_leaves_no_rules", "auto") {
        return;
    }
    let extra = "[limits]\nmax_idle_ms = 600\nrevalidator_interval_ms = 100\n";
    let mut lab = LiveLab::start(2, "auto", None, extra);
    assert!(lab.ping(1, 2, 5));
    lab.wait_for("offloaded", || u(&lab.stats()["offloaded"]) >= 1);
    lab.wait_for("every flow aged out", || lab.flows().is_empty());
    assert!(u(&lab.stats()["aged"]) >= 1);
    assert_eq!(u(&lab.stats()["offloaded"]), 0);
    // Busy again, then stopped while flows are in hardware.
    let before = lab.udp_received(2);
    lab.udp(1, 2, 30);
    lab.wait_for("30 datagrams", || lab.udp_received(2) >= before + 30);
    // The offload thread puts the hot flow into the device within a tick.
    lab.wait_for("offloaded again", || u(&lab.stats()["offloaded"]) >= 1);
    let (ok, out) = lab.stop();
    assert!(ok, "eswitchd exits cleanly on SIGTERM; log:\n{}", lab.log());
    // How many rules were in the device at that moment depends on what the
    // offload thread did meanwhile (the reply direction may have turned
    // hot, a flow may have aged): stop reports them, at least the one.
    let removed: u64 = out
        .split(" rules removed")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("stop reports the rules it removed: {out}"));
    assert!(removed >= 1, "a flow was in hardware at the stop: {out}");
    assert!(lab.log().contains("the device is empty"), "{}", lab.log());
    assert!(!lab.socket().exists(), "the control socket is removed");
}

/// The Python of the os-ken virtualenv the test command makes.
fn osken_python() -> PathBuf {
    std::env::var_os("ESWITCH_OSKEN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/osken-venv/bin/python")
        })
}

/// A process stopped (by PID) and reaped however the test ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_os_ken_learning_switch_carries_pings_between_lab_vms() {
    const T: &str = "an_os_ken_learning_switch_carries_pings_between_lab_vms";
    if !can_run(T, "auto") {
        return;
    }
    let python = osken_python();
    if !python.exists() {
        prereq::skip(
            T,
            format!(
                "os-ken is not installed at {} (integration/scripts/test.sh makes that virtualenv)",
                python.display()
            ),
        );
        return;
    }
    // The controller listens inside the switch namespace, where eswitchd
    // runs; eswitchd connects (with backoff) once it is there.
    let port = 16653 + (std::process::id() % 1000) as u16;
    let extra = format!(
        "[openflow]\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\nfail_mode = \"secure\"\n\
         datapath_id = \"00000000000000ee\"\n"
    );
    let lab = LiveLab::start(2, "auto", Some("# programmed by the controller\n"), &extra);
    let log_path = lab.dir().join("osken.log");
    let log = std::fs::File::create(&log_path).expect("os-ken log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/osken/run.py");
    let _osken = Reaped(
        Command::new("ip")
            .args(["netns", "exec", &lab.ns("sw")])
            .arg(&python)
            .arg(&script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("start os-ken"),
    );
    let seen = |what: &str| {
        std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    };
    lab.wait_for("os-ken sees the switch", || {
        seen("connected dpid=00000000000000ee") > 0
    });
    // The app's table-miss entry, then pings: flooded and learned by the
    // controller, then forwarded by the flows it installs.
    lab.wait_for("the table-miss entry", || {
        lab.ctl(&["dump-of"])
            .is_ok_and(|v| v.to_string().contains("CONTROLLER"))
    });
    lab.wait_for("ping vm1 → vm2 through the controller", || {
        lab.ping(1, 2, 1)
    });
    lab.wait_for("the learned flows", || seen("flow in_port=") >= 2);
    assert!(lab.ping(1, 2, 3), "ping on the learned flows");
    let packet_ins = seen("packet_in");
    assert!(lab.ping(1, 2, 5), "more pings");
    assert_eq!(seen("packet_in"), packet_ins, "no packet-in once learned");
    // The learned flows' megaflows are offloaded to the sim FDB.
    lab.wait_for("a learned flow offloaded", || {
        lab.flows().iter().any(|f| {
            f["offloaded"] == "yes" && f["actions"].as_str().is_some_and(|a| a.contains("output"))
        })
    });
}

#[test]
fn eswitchctl_del_port_and_add_port_change_the_running_switch() {
    const T: &str = "eswitchctl_del_port_and_add_port_change_the_running_switch";
    if !can_run(T, "auto") {
        return;
    }
    let lab = LiveLab::start(3, "auto", None, "");
    assert!(lab.ping(1, 3, 3));
    // del-port: the port, its megaflows and rules go; vm3 is cut off;
    // vm1 ↔ vm2 go on.
    let v = lab.ctl(&["del-port", "vm3"]).expect("del-port");
    assert_eq!(
        (v["removed"].as_str(), v["ofport"].as_u64()),
        (Some("vm3"), Some(3))
    );
    assert!(lab.port("vm3").is_null(), "vm3 is no longer a port");
    let flows = lab.flows();
    assert!(
        !flows.iter().any(|f| {
            f["match"].as_str().unwrap_or("").contains("in_port=3,")
                || f["actions"].as_str().unwrap_or("").contains("output:3")
        }),
        "{flows:?}"
    );
    assert!(!lab.ping(1, 3, 1), "vm3 cut off");
    assert!(lab.ping(1, 2, 3), "vm1 ↔ vm2 unaffected");
    let e = lab.ctl(&["del-port", "vm3"]).expect_err("twice");
    assert!(e.contains("no port named \"vm3\""), "{e}");
    // add-port back under another number; its vport from the representor
    // the tracker knows. It opens (its netdev is here) and forwards.
    let e = lab
        .ctl(&["add-port", "vm3", "--ofport", "1"])
        .expect_err("ofport taken");
    assert!(e.contains("clashes"), "{e}");
    let v = lab
        .ctl(&["add-port", "vm3", "--ofport", "7"])
        .expect("add-port");
    assert_eq!(
        (v["ofport"].as_u64(), v["vport"].as_str()),
        (Some(7), Some("vf2"))
    );
    lab.wait_for("vm3 open and up", || lab.port("vm3")["state"] == "up");
    lab.wait_for("vm1 → vm3 again", || lab.ping(1, 3, 1));
    assert!(lab.ping(1, 3, 3));
    assert!(
        lab.flows()
            .iter()
            .any(|f| f["actions"].as_str().unwrap_or("").contains("output:7")),
        "NORMAL now outputs to port 7"
    );
}

/// Each port kind end to end: an `uplink` port forwards a VM's traffic to
/// a host on the wire (its own namespace) and its flows go to the device;
/// an `internal` port carries the host's own ping through the switch, and
/// the flows that name it stay in software (the device has no vport for
/// the host stack).
#[test]
fn an_uplink_reaches_the_wire_and_an_internal_port_the_host_stack() {
    const T: &str = "an_uplink_reaches_the_wire_and_an_internal_port_the_host_stack";
    if !can_run(T, "auto") {
        return;
    }
    let lab = LiveLab::start_with(2, "auto", None, "", &["--uplink", "--internal"]);
    for (port, kind, vport) in [
        ("vm1", "representor", "vf0"),
        ("wire0", "uplink", "uplink"),
        ("host0", "internal", "-"),
    ] {
        let p = lab.port(port);
        assert_eq!(p["type"], kind, "{port}: {p}");
        assert_eq!(p["vport"], vport, "{port}: {p}");
        assert_eq!(p["state"], "up", "{port}: {p}");
    }
    let flow_of = |in_port: u32, dl_dst: &str| {
        lab.flows().into_iter().find(|f| {
            let m = f["match"].as_str().unwrap_or("");
            m.contains(&format!("in_port={in_port},")) && m.contains(&format!("dl_dst={dl_dst}"))
        })
    };
    // The uplink: both ways through NORMAL, and UDP to the wire host
    // offloaded (a VF to the uplink vport is what the FDB is for).
    assert!(lab.ping_addr("vm1", "198.18.1.1", 3), "vm1 → the wire");
    assert!(lab.ping_addr("wire", "198.18.0.2", 3), "the wire → vm2");
    let before = lab.udp_received_in("wire");
    lab.udp_addr("vm1", "198.18.1.1", 9, 200);
    lab.wait_for("200 datagrams on the wire", || {
        lab.udp_received_in("wire") >= before + 200
    });
    lab.wait_for("vm1 → wire offloaded", || {
        flow_of(1, "02:00:00:00:ff:01").is_some_and(|f| f["offloaded"] == "yes")
    });
    let up = lab.port("wire0");
    assert!(u(&up["rx_packets"]) > 0, "{up}");
    // The internal port: the host's own address answers a VM and the
    // wire, and what enters or leaves by host0 stays in software.
    assert!(lab.ping_addr("vm1", "198.18.2.1", 10), "vm1 → the host");
    assert!(
        lab.ping_addr("wire", "198.18.2.1", 3),
        "the wire → the host"
    );
    assert!(lab.ping_addr("sw", "198.18.0.2", 3), "the host → vm2");
    let to_host = flow_of(1, "02:00:00:00:fe:01").expect("vm1 → host megaflow");
    let from_host = flow_of(200, "02:00:00:00:00:01").expect("host → vm1 megaflow");
    for f in [&to_host, &from_host] {
        let why = f["offloaded"].as_str().unwrap_or("");
        assert!(
            why.starts_with("no (") && why.contains("no vport"),
            "a flow naming the internal port stays in software, saying why: {f}"
        );
    }
    let host = lab.port("host0");
    assert!(u(&host["tx_sw_packets"]) >= 10, "{host}");
    assert_eq!(u(&host["tx_hw_packets"]), 0, "{host}");
}

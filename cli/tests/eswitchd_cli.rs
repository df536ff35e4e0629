//! `eswitchd` as a user runs it: the demo, the shipped examples, a
//! generated capture, and the errors bad input gets.

use std::path::PathBuf;
use std::process::{Command, Output};

fn eswitchd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eswitchd"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("eswitchd runs")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = eswitchd(args);
    assert!(
        out.status.success(),
        "eswitchd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON summary")
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Runs `eswitchd generate ...`, which must succeed.
fn generate(args: &[&str]) {
    let out = eswitchd(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The names of a replay summary's ports, in order.
fn port_names(s: &serde_json::Value) -> Vec<&str> {
    s["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect()
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Counters that must add up in any summary.
fn check_books(s: &serde_json::Value, packets: u64) {
    assert_eq!(n(s, "packets"), packets);
    assert_eq!(n(s, "hw_packets") + n(s, "sw_packets"), packets, "{s}");
    let ports = s["ports"].as_array().expect("ports");
    let rx: u64 = ports.iter().map(|p| n(p, "rx_packets")).sum();
    assert_eq!(rx, packets, "every packet received on a port");
    // Every upcall installed its megaflow (one per stage when it went
    // through ct() and recirculated).
    assert_eq!(n(s, "flow_limit_hits"), 0, "no flow limit hit");
    assert!(n(s, "megaflows_created") >= n(s, "upcalls"), "{s}");
    assert!(n(s, "offloaded") > 0);
    assert!(n(s, "hw_rules_at_end") <= n(s, "megaflows_at_end"));
}

#[test]
fn the_demo_runs_with_nothing_else_and_its_numbers_add_up() {
    let s = json(&["replay", "--demo", "--json"]);
    check_books(&s, 200_000);
    assert!(s["hw_share"].as_f64().expect("share") > 0.9, "{s}");
    assert!(n(&s, "flows_aged") > 0, "short flows age out over 30 s");
    assert!(n(&s, "hw_drops") > 0, "the meter drops in hardware");
    assert!(n(&s, "hw_samples") > 0, "the sampler samples in hardware");
    // Nothing refused but the stateful tenant's commits of new
    // connections, which only software makes.
    assert!(
        s["offload_failures"]
            .as_object()
            .expect("map")
            .keys()
            .all(|k| k.starts_with("action ct(commit)")),
        "{s}"
    );
    // Its established connections ran in the conntrack table.
    assert!(
        s["stateful"]["est_hw_share"].as_f64().expect("share") > 0.9,
        "{s}"
    );
    // The overlay tenant: a tenth of the packets, in by its VMs and the
    // uplink (Geneve), nearly all handled by the eSwitch (encap and decap
    // offloaded).
    let o = &s["overlay"];
    assert_eq!(n(o, "packets"), 20_000, "{o}");
    assert!(o["hw_share"].as_f64().expect("share") >= 0.99, "{o}");
    // The stateful tenant: a tenth too.
    assert_eq!(n(&s["stateful"], "packets"), 20_000, "{s}");
    let names = port_names(&s);
    assert_eq!(
        names,
        [
            "vm1", "vm2", "vm3", "vm4", "ovl1", "ovl2", "wire0", "gnv0", "web", "cli1", "cli2",
            "ext"
        ]
    );
}

#[test]
fn the_shipped_example_replays_with_its_config() {
    let ex = examples();
    let pcap = ex.join("demo.pcapng");
    let cfg = ex.join("eswitch.toml");
    let s = json(&[
        "replay",
        "--pcap",
        pcap.to_str().expect("utf-8"),
        "--config",
        cfg.to_str().expect("utf-8"),
        "--json",
    ]);
    check_books(&s, 400);
    let names = port_names(&s);
    assert_eq!(names, ["vm1", "vm2", "vm3", "vm4"]);
    assert!(n(&s, "flows_aged") > 0);
    assert!(
        std::fs::metadata(&pcap).expect("pcap").len() < 400_000,
        "a small capture"
    );
}

#[test]
fn a_generated_capture_replays_exactly_like_the_in_memory_demo() {
    let dir = std::env::temp_dir().join(format!("eswitchd-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("w.pcapng");
    let flows = dir.join("flows.txt");
    let spec = ["--packets", "5000", "--demo-flows", "300", "--seed", "7"];
    let mut gen = vec![
        "generate",
        "--out",
        pcap.to_str().expect("utf-8"),
        "--flow-file",
        flows.to_str().expect("utf-8"),
    ];
    gen.extend(spec);
    generate(&gen);
    let from_file = json(&[
        "replay",
        "--pcap",
        pcap.to_str().expect("utf-8"),
        "--flows",
        flows.to_str().expect("utf-8"),
        "--json",
    ]);
    let mut demo = vec!["replay", "--demo", "--no-overlay", "--json"];
    demo.extend(spec);
    let in_memory = json(&demo);
    let _ = std::fs::remove_dir_all(&dir);
    check_books(&from_file, 5_000);
    for k in [
        "packets",
        "bytes",
        "upcalls",
        "offloaded",
        "hw_packets",
        "sw_packets",
        "flows_aged",
        "hw_drops",
        "sw_drops",
        "hw_samples",
        "megaflows_at_end",
    ] {
        assert_eq!(from_file[k], in_memory[k], "{k}");
    }
    assert_eq!(from_file["ports"], in_memory["ports"]);
}

/// With `--config-file`, the capture holds the overlay tenant and the
/// config replays it exactly as `replay --demo` does.
#[test]
fn a_generated_capture_with_its_config_replays_like_the_demo_and_its_tenant() {
    let dir = std::env::temp_dir().join(format!("eswitchd-cli-ovl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (pcap, flows, cfg) = (
        dir.join("w.pcapng"),
        dir.join("flows.txt"),
        dir.join("e.toml"),
    );
    let spec = ["--packets", "5000", "--demo-flows", "300", "--seed", "7"];
    let path = |p: &PathBuf| p.to_str().expect("utf-8").to_string();
    let (pcap_s, flows_s, cfg_s) = (path(&pcap), path(&flows), path(&cfg));
    let mut gen = vec![
        "generate",
        "--out",
        &pcap_s,
        "--flow-file",
        &flows_s,
        "--config-file",
        &cfg_s,
    ];
    gen.extend(spec);
    generate(&gen);
    let from_file = json(&["replay", "--pcap", &pcap_s, "--config", &cfg_s, "--json"]);
    let mut demo = vec!["replay", "--demo", "--json"];
    demo.extend(spec);
    let in_memory = json(&demo);
    let _ = std::fs::remove_dir_all(&dir);
    check_books(&from_file, 5_000);
    for k in ["packets", "bytes", "hw_packets", "sw_packets", "offloaded"] {
        assert_eq!(from_file[k], in_memory[k], "{k}");
    }
    assert_eq!(from_file["ports"], in_memory["ports"]);
    assert!(n(&in_memory["overlay"], "packets") == 500, "{in_memory}");
}

#[test]
fn bench_mode_ends_with_the_bench_line() {
    let out = eswitchd(&["replay", "--demo", "--packets", "2000", "--bench"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("output");
    assert!(
        last.starts_with("bench: "),
        "ends with bench lines: {last:?}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("bench: replay.pps "))
        .expect("the replay figure");
    let v: f64 = line
        .strip_prefix("bench: replay.pps ")
        .and_then(|r| r.strip_suffix(" Mpps"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"));
    assert!(v > 0.0);
    // The overlay tenant's share (a small run: its first packets weigh).
    let pct: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("bench: tunnel.demo_hw_pct "))
        .and_then(|r| r.strip_suffix(" %"))
        .and_then(|v| v.parse().ok())
        .expect("the overlay figure");
    assert!(pct > 50.0 && pct <= 100.0, "{pct}");
    assert!(stdout.contains("replay summary"));
}

#[test]
fn bad_input_gets_an_error_that_names_it() {
    let dir = std::env::temp_dir().join(format!("eswitchd-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad_flows = dir.join("bad.txt");
    std::fs::write(
        &bad_flows,
        "priority=1,actions=drop\npriority=2,nw_dts=1.2.3.4,actions=drop\n",
    )
    .expect("write");
    let bad_cfg = dir.join("bad.toml");
    std::fs::write(&bad_cfg, "[offload]\nmode = \"sometimes\"\n").expect("write");
    let not_pcap = dir.join("not.pcap");
    std::fs::write(&not_pcap, b"this is not a capture").expect("write");
    let s = |p: &PathBuf| p.to_str().expect("utf-8").to_string();
    for (args, want) in [
        (vec!["replay".to_string()], "--demo".to_string()),
        (
            vec![
                "replay".into(),
                "--pcap".into(),
                "/nonexistent/x.pcap".into(),
                "--flows".into(),
                s(&bad_flows),
            ],
            "/nonexistent/x.pcap".into(),
        ),
        (
            vec![
                "replay".into(),
                "--demo".into(),
                "--flows".into(),
                s(&bad_flows),
            ],
            "line 2".into(),
        ),
        (
            vec![
                "replay".into(),
                "--demo".into(),
                "--config".into(),
                s(&bad_cfg),
            ],
            "offload.mode = \"sometimes\"".into(),
        ),
        (
            vec![
                "replay".into(),
                "--pcap".into(),
                s(&not_pcap),
                "--flows".into(),
                s(&bad_flows),
            ],
            "not.pcap".into(),
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = eswitchd(&args);
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A classic pcap file (microsecond times, Ethernet, snap length 262144, as
/// tcpdump writes one on a BIG TCP host) of `records`: (captured bytes,
/// original length).
fn pcap_bytes(records: &[(Vec<u8>, u32)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(0xa1b2_c3d4u32.to_le_bytes()); // microsecond pcap
    b.extend(2u16.to_le_bytes());
    b.extend(4u16.to_le_bytes());
    b.extend(0u32.to_le_bytes()); // thiszone
    b.extend(0u32.to_le_bytes()); // sigfigs
    b.extend(262_144u32.to_le_bytes()); // snaplen
    b.extend(1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, (data, orig)) in records.iter().enumerate() {
        b.extend(1_700_000_000u32.to_le_bytes());
        b.extend((i as u32 * 1000).to_le_bytes());
        b.extend((data.len() as u32).to_le_bytes());
        b.extend(orig.to_le_bytes());
        b.extend(data);
    }
    b
}

/// A capture with an 80 KB BIG TCP packet and a last record cut short by
/// the end of the file: both are skipped and counted with their reasons,
/// everything else is replayed; `--dump-flows` shows the megaflows left.
#[test]
fn a_capture_with_records_it_cannot_take_replays_the_rest() {
    use megaflow::frame::{FrameSpec, L4};
    let dir = std::env::temp_dir().join(format!("eswitchd-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let frame = |dport: u16| {
        FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(40000, dport))
            .macs(0x0200_0000_0001, 0x0200_0000_0002)
            .build()
    };
    let mut big = frame(443);
    big.resize(80_116, 0);
    let normal: Vec<(Vec<u8>, u32)> = (0..3).map(|i| (frame(80 + i), 60)).collect();
    let mut records = vec![normal[0].clone(), (big, 80_116)];
    records.extend(normal[1..].iter().cloned());
    let mut bytes = pcap_bytes(&records);
    // One more record header claiming 60 bytes, then only 10 of them.
    bytes.extend(1_700_000_001u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend(60u32.to_le_bytes());
    bytes.extend(60u32.to_le_bytes());
    bytes.extend(&frame(99)[..10]);
    let pcap = dir.join("bigtcp.pcap");
    std::fs::write(&pcap, &bytes).expect("write capture");
    let flows = dir.join("flows.txt");
    std::fs::write(
        &flows,
        "priority=10,tcp,actions=output:2\npriority=0,actions=drop\n",
    )
    .expect("write flows");
    let config = dir.join("eswitch.toml");
    std::fs::write(
        &config,
        "[[port]]\nname = \"vm1\"\nofport = 1\nvport = \"pf0vf0\"\n\n\
         [[port]]\nname = \"vm2\"\nofport = 2\nvport = \"pf0vf1\"\n",
    )
    .expect("write config");
    let (pcap_s, flows_s) = (pcap.display().to_string(), flows.display().to_string());
    let config_s = config.display().to_string();
    let base = [
        "replay", "--pcap", &pcap_s, "--flows", &flows_s, "--config", &config_s,
    ];

    let v = json(&[&base[..], &["--json", "--dump-flows"]].concat());
    assert_eq!(n(&v, "packets"), 3, "{v}");
    assert_eq!(n(&v, "skipped_records"), 2, "{v}");
    let skipped = v["skipped"].as_object().expect("skipped by reason");
    assert_eq!(skipped.len(), 2, "{v}");
    let reason = |needle: &str| {
        skipped
            .iter()
            .find(|(r, _)| r.contains(needle))
            .map(|(_, n)| n.as_u64().unwrap_or(0))
    };
    assert_eq!(reason("longer than 65535 bytes"), Some(1), "{v}");
    assert_eq!(reason("ends early"), Some(1), "{v}");
    // The megaflows: the TCP one to port 2 counted the three packets.
    let flows = v["flows"].as_array().expect("flows with --dump-flows");
    assert_eq!(flows.len(), 1, "{v}");
    assert_eq!(flows[0]["actions"], "output:2", "{v}");
    assert_eq!(n(&flows[0], "packets"), 3, "{v}");
    assert!(
        flows[0]["match"]
            .as_str()
            .is_some_and(|m| m.contains("tcp")),
        "{v}"
    );
    // Without --dump-flows the JSON has no flows.
    assert!(json(&[&base[..], &["--json"]].concat())
        .get("flows")
        .is_none());

    // The text summary says the same, and ends with the dump.
    let out = eswitchd(&[&base[..], &["--dump-flows"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("skipped capture records") && l.contains(" 2 (")),
        "{text}"
    );
    let dump = text
        .split("megaflows at the end (1):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no dump in {text}"));
    let line = dump.lines().next().unwrap_or_default();
    assert!(
        line.contains("packets:3") && line.ends_with("actions:output:2"),
        "{line}"
    );
    // The log names the first oversized packet's size.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a packet of 80116 bytes"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `backend = "mlx5"` on a machine with no ConnectX (no RDMA device at
/// all): one clear error, exit status non-zero, no panic, nothing left
/// behind (the control socket is never made).
#[test]
fn run_with_the_mlx5_backend_and_no_rdma_device_says_so_and_leaves_nothing() {
    const T: &str = "run_with_the_mlx5_backend_and_no_rdma_device_says_so_and_leaves_nothing";
    if std::path::Path::new("/sys/class/infiniband").exists() {
        prereq::skip(T, "this machine has RDMA devices");
        return;
    }
    let dir = std::env::temp_dir().join(format!("esw-mlx5-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let (cfg, sock) = mlx5_config(&dir);
    let out = eswitchd(&["run", "--config", cfg.to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_ne!(out.status.code(), Some(101), "a panic: {err}");
    assert!(
        err.contains("backend = \"mlx5\"") && err.contains("no RDMA device on this machine"),
        "{err}"
    );
    assert!(err.contains("ENOSYS"), "the library's reason: {err}");
    assert!(!sock.exists(), "nothing left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

/// In `dir`: an eswitch.toml with `backend = "mlx5"` and representor
/// `pf0vf0`, and where its control socket would be.
fn mlx5_config(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let sock = dir.join("eswitchd.sock");
    let cfg = dir.join("eswitch.toml");
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::write(
        &cfg,
        format!(
            "[backend]\nkind = \"mlx5\"\n[datapath]\ncontrol_socket = \"{}\"\n\
             [[port]]\nname = \"pf0vf0\"\nofport = 1\nvport = \"vf0\"\n",
            sock.display()
        ),
    )
    .expect("config");
    (cfg, sock)
}

/// `hw-check --sim`: the suite on the reference, every case passing, the
/// figures printed, nothing left.
#[test]
fn hw_check_on_the_sim_passes_every_case_and_prints_the_figures() {
    let out = eswitchd(&["hw-check", "--sim", "--rules", "2000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("45 cases: 45 passed, 0 failed, 0 skipped"),
        "{text}"
    );
    assert!(text.contains("bench: hw_check.rule_insert_rate "), "{text}");
    assert!(text.contains("rules/s (2000 rules)"), "{text}");
    assert!(
        text.contains("bench: hw_check.counter_query_time "),
        "{text}"
    );
    assert!(text.contains("removed everything it created"), "{text}");
    assert!(text.trim_end().ends_with("PASS"), "{text}");
}

/// `hw-check` on a machine without an RDMA device: says so, exits 1.
#[test]
fn hw_check_without_an_rdma_device_says_so() {
    const T: &str = "hw_check_without_an_rdma_device_says_so";
    if std::path::Path::new("/sys/class/infiniband").exists() {
        prereq::skip(T, "this machine has RDMA devices");
        return;
    }
    let out = eswitchd(&["hw-check", "--ports", "pf0vf0,pf0vf1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("hw-check") && err.contains("no RDMA device on this machine"),
        "{err}"
    );
    assert!(err.contains("ENOSYS"), "{err}");
}

/// Discovery through libibverbs itself on a fake sysfs (`SYSFS_PATH`, which
/// libibverbs honours): a ConnectX-5's `mlx5_0` with representor `pf0vf0`
/// on port 2, and a `/dev/infiniband/uverbs0` that exists (in a private
/// mount namespace) but is no device. The library lists `mlx5_0` (so the
/// error is not "no RDMA device"), eswitch maps the representor to it, and
/// the open fails by name. Needs root and a kernel without RDMA (one with
/// it answers libibverbs over netlink and never reads the fake tree).
#[test]
fn libibverbs_finds_a_fake_device_and_its_open_failure_is_named() {
    const T: &str = "libibverbs_finds_a_fake_device_and_its_open_failure_is_named";
    if std::path::Path::new("/sys/class/infiniband_verbs").exists() {
        prereq::skip(
            T,
            "this kernel has RDMA: libibverbs asks it, not SYSFS_PATH",
        );
        return;
    }
    if !prereq::root(T, "a private mount namespace") || !prereq::tools(T, &["unshare"]) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("esw-fake-verbs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sys = dir.join("sys");
    let file = |rel: &str, text: &str| {
        let p = sys.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
        std::fs::write(p, text).expect("write");
    };
    file("class/infiniband_verbs/abi_version", "6\n");
    file("class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n");
    file("class/infiniband_verbs/uverbs0/dev", "231:192\n");
    file("class/infiniband_verbs/uverbs0/abi_version", "1\n");
    file("class/infiniband/mlx5_0/node_type", "1: CA\n");
    // A ConnectX-5 (15b3:1017), as the kernel writes it.
    file(
        "class/infiniband/mlx5_0/device/modalias",
        "pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00\n",
    );
    file(
        "class/infiniband/mlx5_0/ports/2/gid_attrs/ndevs/0",
        "pf0vf0\n",
    );
    file("class/net/pf0vf0/compat/devlink/mode", "switchdev\n");
    std::fs::create_dir_all(sys.join("class/net/pf0vf0/device/infiniband/mlx5_0")).expect("dir");
    let (cfg, sock) = mlx5_config(&dir);
    // /dev/infiniband is made for the mount point and removed after.
    let made_dev_dir = !std::path::Path::new("/dev/infiniband").exists();
    let script = format!(
        "mkdir -p /dev/infiniband && mount -t tmpfs eswitch-test /dev/infiniband && \
         : > /dev/infiniband/uverbs0 && exec env SYSFS_PATH={} {} run --config {}",
        sys.display(),
        env!("CARGO_BIN_EXE_eswitchd"),
        cfg.display()
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    if made_dev_dir {
        let _ = std::fs::remove_dir("/dev/infiniband");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.contains("no RDMA device"),
        "libibverbs listed the fake device: {err}"
    );
    assert!(err.contains("cannot open RDMA device mlx5_0"), "{err}");
    assert!(err.contains("uverbs"), "what to check: {err}");
    assert!(!sock.exists(), "nothing left behind");
}

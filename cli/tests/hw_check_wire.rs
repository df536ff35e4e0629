//! `eswitchd hw-check`'s traffic path on real netdevs, with the sim as the
//! NIC behind them: in a namespace of its own, each VF of the check is a
//! veth pair (`vfN` the VF's netdev, `nicN` the eSwitch's side) plus a
//! second pair for its representor (`repN` where misses arrive, `rnicN`
//! the eSwitch's side). A "NIC" thread reads every `nicN`, walks the frame
//! through a `SimBackend` (the device) and writes each frame that leaves
//! to the `nicN` of its vport (so it arrives at `vfN`) or, for the manager,
//! to `rnicN` (so it arrives at `repN`). The check's backend makes every
//! call on a model and on that device, as the mlx5 backend does with its
//! model and the ConnectX. The whole suite then runs through the wire:
//! AF_PACKET in and out, pacing, the ingress and VF mapping, clearing
//! between cases, the rates and the report.
//!
//! Needs root and iproute2; skips otherwise. The namespace is removed, and
//! the NIC thread stopped, even when the test fails.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cli::hw::check::{check_wire, Sizes};
use cli::hw::wire::{Modelled, Timing, WirePort};
use integration::netns::run;
use megaflow::port::{PacketBatch, Port};
use megaflow::Timestamp;
use netdev::{wait_readable, AfPacketConfig, AfPacketPort};
use offload::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DeviceDump, DomainId, DomainType, DrBackend,
    DrError, MatcherId, RuleId, SyncFlags, TableId,
};
use offload::sim::{Egress, Output, SimBackend};
use offload::Vport;

/// The ingress and 16 VFs: every case of the suite can run.
const PORTS: u16 = 17;
const CHILD_ENV: &str = "ESWITCH_HW_WIRE_NETNS";

/// The check's backend: every call on the model, then on the device (the
/// NIC thread's sim); both allocate handles alike, so one handle names the
/// object in both. The newest FDB domain is the one the NIC walks.
struct Twin {
    model: SimBackend,
    device: Arc<SimBackend>,
    walked: Arc<Mutex<Option<DomainId>>>,
    /// Frames the NIC thread's receive rings dropped so far.
    lost: Arc<AtomicU64>,
}

impl Twin {
    fn both<T: PartialEq + std::fmt::Debug>(
        &self,
        f: impl Fn(&dyn DrBackend) -> Result<T, DrError>,
    ) -> Result<T, DrError> {
        let m = f(&self.model);
        let d = f(&*self.device);
        assert_eq!(
            m.as_ref().map_err(|e| e.errno()),
            d.as_ref().map_err(|e| e.errno()),
            "model and device agree"
        );
        d
    }
}

impl Modelled for Twin {
    fn model(&self) -> &SimBackend {
        &self.model
    }

    fn disturbed_frames(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// The NIC thread's own dump against the model's, object by object
    /// (counters aside: the NIC counts what the wire carried).
    fn differences(&self) -> Vec<String> {
        let strip = |mut d: offload::dr::DeviceDump| {
            for r in &mut d.rules {
                r.counter = None;
            }
            d
        };
        match (self.model.dump(), self.device.dump()) {
            (Ok(m), Ok(d)) if strip(m.clone()) == strip(d.clone()) => Vec::new(),
            (Ok(m), Ok(d)) => vec![format!(
                "the NIC holds {} tables, {} matchers, {} rules; the model {}, {}, {}",
                d.tables.len(),
                d.matchers.len(),
                d.rules.len(),
                m.tables.len(),
                m.matchers.len(),
                m.rules.len()
            )],
            (m, d) => vec![format!("dumps: model {:?}, NIC {:?}", m.err(), d.err())],
        }
    }
}

impl DrBackend for Twin {
    fn domain_create(&self, ty: DomainType) -> Result<DomainId, DrError> {
        let d = self.both(|b| b.domain_create(ty))?;
        if ty == DomainType::Fdb {
            *self.walked.lock().unwrap() = Some(d);
        }
        Ok(d)
    }
    fn domain_destroy(&self, d: DomainId) -> Result<(), DrError> {
        self.both(|b| b.domain_destroy(d))
    }
    fn domain_sync(&self, d: DomainId, f: SyncFlags) -> Result<(), DrError> {
        self.both(|b| b.domain_sync(d, f))
    }
    fn domain_allow_duplicate_rules(&self, d: DomainId, a: bool) -> Result<(), DrError> {
        self.both(|b| b.domain_allow_duplicate_rules(d, a))
    }
    fn table_create(&self, d: DomainId, l: u32) -> Result<TableId, DrError> {
        self.both(|b| b.table_create(d, l))
    }
    fn table_destroy(&self, t: TableId) -> Result<(), DrError> {
        self.both(|b| b.table_destroy(t))
    }
    fn matcher_create(&self, t: TableId, p: u16, c: u8, m: &[u8]) -> Result<MatcherId, DrError> {
        self.both(|b| b.matcher_create(t, p, c, m))
    }
    fn matcher_destroy(&self, m: MatcherId) -> Result<(), DrError> {
        self.both(|b| b.matcher_destroy(m))
    }
    fn rule_create(&self, m: MatcherId, v: &[u8], a: &[ActionId]) -> Result<RuleId, DrError> {
        self.both(|b| b.rule_create(m, v, a))
    }
    fn rule_destroy(&self, r: RuleId) -> Result<(), DrError> {
        self.both(|b| b.rule_destroy(r))
    }
    fn action_create(&self, d: DomainId, s: ActionSpec) -> Result<ActionId, DrError> {
        self.both(|b| b.action_create(d, s.clone()))
    }
    fn action_destroy(&self, a: ActionId) -> Result<(), DrError> {
        self.both(|b| b.action_destroy(a))
    }
    fn counter_bulk_alloc(&self, l: u8) -> Result<CounterBulkId, DrError> {
        self.both(|b| b.counter_bulk_alloc(l))
    }
    fn counter_bulk_free(&self, c: CounterBulkId) -> Result<(), DrError> {
        self.both(|b| b.counter_bulk_free(c))
    }
    fn counter_bulk_query(
        &self,
        c: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        self.device.counter_bulk_query(c, out)
    }
    fn dump(&self) -> Result<DeviceDump, DrError> {
        self.device.dump()
    }
}

/// The NIC: frames in at `nicN` walk the device's newest FDB domain.
fn nic(
    device: Arc<SimBackend>,
    walked: Arc<Mutex<Option<DomainId>>>,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicU64>,
) -> std::thread::JoinHandle<u64> {
    let open = |n: String| AfPacketPort::open_default(&n).unwrap_or_else(|e| panic!("{e}"));
    // The ingress's side takes the floods (rates, ratios). A ring block is
    // handed over after a millisecond even when nearly empty, so a ring's
    // depth in time is its block count: 512 blocks ride out half a second
    // of this thread not being scheduled on a busy machine.
    let deep = AfPacketConfig {
        block_size: 64 * 1024,
        block_count: 512,
        ..AfPacketConfig::default()
    };
    let mut nics: Vec<AfPacketPort> = (0..PORTS)
        .map(|i| match i {
            0 => AfPacketPort::open("nic0", deep).unwrap_or_else(|e| panic!("{e}")),
            _ => open(format!("nic{i}")),
        })
        .collect();
    let mut rnics: Vec<AfPacketPort> = (0..PORTS).map(|i| open(format!("rnic{i}"))).collect();
    std::thread::spawn(move || {
        let mut batch = PacketBatch::new();
        let mut out = Output::new();
        let fds: Vec<i32> = nics.iter().filter_map(|p| p.poll_fd()).collect();
        let mut published = std::time::Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if published.elapsed() >= Duration::from_millis(5) {
                let dropped: u64 = nics.iter().map(|p| p.stats().rx_dropped).sum();
                lost.store(dropped, Ordering::Relaxed);
                published = std::time::Instant::now();
            }
            wait_readable(&fds, Duration::from_millis(20));
            for i in 0..nics.len() {
                while nics[i].recv_batch(&mut batch).unwrap_or(0) > 0 {
                    let Some(d) = *walked.lock().unwrap() else {
                        continue;
                    };
                    let from = Vport::vf(i as u16).expect("a VF");
                    for p in batch.iter() {
                        // The kernel's receive time: when the frame was
                        // sent (veth delivers in the sender's call), not
                        // when this thread got to it.
                        let now = p.meta.ts.0;
                        out.clear();
                        device.process(d, now, from, p.data, &mut out);
                        for o in out.frames() {
                            let (port, n) = match o.egress {
                                Egress::Vport(v) => (&mut nics, v.0 - 1),
                                Egress::Manager { ingress } => (&mut rnics, ingress.0 - 1),
                                Egress::Drop(_) => continue,
                            };
                            if let Some(p) = port.get_mut(usize::from(n)) {
                                if !matches!(p.send_batch(&[&o.bytes], Timestamp::NEVER), Ok(1)) {
                                    eprintln!("the NIC could not send on {}", p.name());
                                }
                            }
                        }
                    }
                }
            }
        }
        nics.iter().map(|p| p.stats().rx_dropped).sum()
    })
}

/// Inside the namespace: the NIC thread and the check through the wire.
fn check_inside_netns() {
    // The NIC stand-in hands misses to representor netdevs, which carry
    // no restore tag: so do its device and its model.
    let netdevs = || {
        SimBackend::new(offload::sim::SimConfig {
            restore_path: false,
            ..Default::default()
        })
    };
    let device = Arc::new(netdevs());
    let walked = Arc::new(Mutex::new(None));
    let stop = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicU64::new(0));
    let thread = nic(
        Arc::clone(&device),
        Arc::clone(&walked),
        Arc::clone(&stop),
        Arc::clone(&lost),
    );
    let twin = Twin {
        model: netdevs(),
        device,
        walked,
        lost,
    };
    let ports = (0..PORTS)
        .map(|i| WirePort {
            vport: Vport::vf(i).expect("a VF"),
            vf: format!("vf{i}"),
            rep: format!("rep{i}"),
        })
        .collect();
    // One sending thread and one NIC thread on a shared two-core machine
    // in a test build: they keep up with 20,000 frames/s, and pace 5,000
    // steadily enough for a meter through the stalls of a busy machine
    // (the meter's 10 and 40 MB/s points, 20,000 and 80,000 frames/s, run
    // on the sim and in hw-check on a NIC).
    let timing = Timing {
        settle: Duration::from_millis(2),
        timeout: Duration::from_millis(100),
        max_frame_rate: Some(20_000),
        steady_frame_rate: Some(5_000),
    };
    let sizes = Sizes {
        rules: 2000,
        counters_log: 13,
    };
    let result = check_wire(
        "the sim behind veth pairs".to_owned(),
        twin,
        ports,
        timing,
        sizes,
        |_| Vec::new(),
    );
    stop.store(true, Ordering::Relaxed);
    let nic_drops = thread.join().expect("the NIC thread");
    println!("the NIC's receive rings dropped {nic_drops} frames");
    let result = result.expect("the wire opens");
    println!("{result}");
    assert!(result.passed(), "{result}");
    // The ENOSPC cases; the restore cases and the conntrack chain's (its
    // misses are told apart by their tags): the representor netdevs carry
    // no restore tag, and the check must say so, not pass them; the decap
    // cases, which send from the uplink this check has no veth for.
    assert_eq!(
        result.report.skipped(),
        10,
        "only the ENOSPC, restore, conntrack chain and decap cases: {result}"
    );
    for c in result
        .report
        .cases
        .iter()
        .filter(|c| c.name.starts_with("restore_") || c.name.starts_with("ct_"))
    {
        match &c.outcome {
            offload::conformance::Outcome::Skip(why) => {
                assert!(why.contains("needs a restore path"), "{}: {why}", c.name)
            }
            o => panic!("{}: {o:?}", c.name),
        }
    }
}

/// Removes the namespace on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

/// Makes the namespace and runs this same test again inside it (a test
/// cannot move itself into a namespace); the run inside does the check.
#[test]
fn hw_check_through_veths() {
    let test = "hw_check_through_veths";
    if std::env::var_os(CHILD_ENV).is_some() {
        check_inside_netns();
        return;
    }
    if !prereq::netns(test, &["ip"]) {
        return;
    }
    let ns = Netns(format!("ehw{}", std::process::id() % 100_000));
    run("ip", &["netns", "add", &ns.0]).expect("netns");
    let mut batch = String::from("link set lo up\n");
    for i in 0..PORTS {
        batch += &format!("link add vf{i} type veth peer name nic{i}\n");
        batch += &format!("link add rep{i} type veth peer name rnic{i}\n");
        for n in ["vf", "nic", "rep", "rnic"] {
            batch += &format!("link set {n}{i} up\n");
        }
    }
    let file = std::env::temp_dir().join(format!("{}.ipbatch", ns.0));
    std::fs::write(&file, batch).expect("batch file");
    let made = run("ip", &["-n", &ns.0, "-batch", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);
    made.expect("veth pairs");
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(&exe)
        .args(["--exact", test, "--nocapture"])
        .env(CHILD_ENV, "1")
        .output()
        .expect("run the check inside the namespace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the check inside the namespace failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("1 passed"), "the run inside ran: {stdout}");
    assert!(stdout.contains("\nPASS"), "{stdout}");
}

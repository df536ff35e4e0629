//! Privileged test: the representor tracker on a real veth pair whose one
//! end lives in a network namespace (an emulated representor). Skips with a
//! printed reason when not root or without `ip`.

use std::process::Command;
use std::time::Duration;

use offload::representor::{PortEvent, RepresentorConfig, Tracker};
use offload::Vport;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(5);

/// Runs `ip args...`; panics with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Best-effort `ip args...` for cleanup.
fn ip_quiet(args: &[&str]) {
    let _ = Command::new("ip").args(args).output();
}

/// Names unique to this process; removes them on drop, even on failure.
struct Lab {
    ns: String,
    host: String,
    peer: String,
    renamed: String,
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let id = std::process::id() % 10000;
        let lab = Lab {
            ns: format!("esr{id}{tag}ns"),
            host: format!("esr{id}{tag}a"),
            peer: format!("esr{id}{tag}b"),
            renamed: format!("esr{id}{tag}r"),
        };
        lab.cleanup();
        lab
    }

    fn cleanup(&self) {
        ip_quiet(&["link", "del", &self.host]);
        ip_quiet(&["link", "del", &self.renamed]);
        ip_quiet(&["netns", "del", &self.ns]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// The next event satisfying `pred`, within [`WAIT`].
async fn expect<T>(
    rx: &mut mpsc::Receiver<PortEvent>,
    what: &str,
    mut pred: impl FnMut(&PortEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(WAIT, async {
        while let Some(ev) = rx.recv().await {
            if let Some(t) = pred(&ev) {
                return Some(t);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(t)) => t,
        Ok(None) => panic!("tracker stopped while waiting for {what}"),
        Err(_) => panic!("no {what} within {WAIT:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veth_representor_lifecycle() {
    if !prereq::netns("veth_representor_lifecycle", &["ip"]) {
        return;
    }
    let lab = Lab::new("l");
    let config = RepresentorConfig::default().with(&lab.host, Vport::vf(0).expect("vf0"));
    let (tracker, mut rx) = Tracker::start(config.clone(), 256);

    // Created after the tracker started: seen through the multicast group.
    ip(&["netns", "add", &lab.ns]);
    ip(&[
        "link", "add", &lab.host, "type", "veth", "peer", "name", &lab.peer,
    ]);
    ip(&["link", "set", &lab.peer, "netns", &lab.ns]);
    ip(&["-n", &lab.ns, "link", "set", &lab.peer, "up"]);

    let host = lab.host.clone();
    let (ifindex, vport) = expect(&mut rx, "Added", |e| match e {
        PortEvent::Added(r) if r.ifname == host => Some((r.ifindex, r.vport)),
        _ => None,
    })
    .await;
    assert_eq!(vport, Some(Vport(1)));
    let snap = tracker.snapshot();
    assert_eq!(snap.by_name(&lab.host).map(|r| r.ifindex), Some(ifindex));
    assert_eq!(snap.len(), 1, "only the configured veth is a representor");

    ip(&["link", "set", &lab.host, "up"]);
    expect(&mut rx, "Up", |e| {
        (*e == PortEvent::Up { ifindex }).then_some(())
    })
    .await;

    ip(&["link", "set", &lab.host, "mtu", "1400"]);
    let (old, new) = expect(&mut rx, "MtuChanged", |e| match e {
        PortEvent::MtuChanged {
            ifindex: i,
            old,
            new,
        } if *i == ifindex => Some((*old, *new)),
        _ => None,
    })
    .await;
    assert_eq!((old, new), (1500, 1400));

    ip(&["link", "set", &lab.host, "address", "02:00:c6:12:00:01"]);
    let mac = expect(&mut rx, "MacChanged", |e| match e {
        PortEvent::MacChanged {
            ifindex: i, new, ..
        } if *i == ifindex => Some(*new),
        _ => None,
    })
    .await;
    assert_eq!(mac, Some([0x02, 0x00, 0xc6, 0x12, 0x00, 0x01]));

    ip(&["link", "set", &lab.host, "down"]);
    expect(&mut rx, "Down", |e| {
        (*e == PortEvent::Down { ifindex }).then_some(())
    })
    .await;

    // A second tracker sees the existing link through its initial dump.
    let (second, mut rx2) = Tracker::start(config, 256);
    let vport2 = expect(&mut rx2, "Added from dump", |e| match e {
        PortEvent::Added(r) if r.ifindex == ifindex => Some(r.vport),
        _ => None,
    })
    .await;
    assert_eq!(vport2, Some(Vport(1)));
    second.stop();

    ip(&["link", "set", &lab.host, "name", &lab.renamed]);
    let renamed = expect(&mut rx, "Renamed", |e| match e {
        PortEvent::Renamed {
            ifindex: i,
            old,
            new,
        } if *i == ifindex => Some((old.clone(), new.clone())),
        _ => None,
    })
    .await;
    assert_eq!(renamed, (lab.host.clone(), lab.renamed.clone()));
    assert_eq!(
        tracker.snapshot().get(ifindex).and_then(|r| r.vport),
        Some(Vport(1)),
        "a rename keeps the port's identity and vport"
    );

    // A forced resync (as after ENOBUFS) finds nothing new.
    let before = tracker.resyncs();
    tracker.request_resync();
    let deadline = tokio::time::Instant::now() + WAIT;
    while tracker.resyncs() == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no resync within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        rx.try_recv().is_err(),
        "a resync with no change emits nothing"
    );

    ip(&["link", "del", &lab.renamed]);
    let removed = expect(&mut rx, "Removed", |e| match e {
        PortEvent::Removed(r) if r.ifindex == ifindex => Some(r.ifname.clone()),
        _ => None,
    })
    .await;
    assert_eq!(removed, lab.renamed);
    assert!(tracker.snapshot().is_empty());
    tracker.stop();
}

/// Links this test makes (veth pairs `{p}x{k}`/`{p}y{k}`), deleted on drop.
struct Burst {
    prefix: String,
    n: usize,
}

impl Burst {
    fn batch(&self, lines: impl Iterator<Item = String>) -> std::process::Output {
        let script: String = lines.map(|l| l + "\n").collect();
        let path = std::env::temp_dir().join(format!("{}-batch.txt", self.prefix));
        std::fs::write(&path, script).expect("batch file");
        let out = Command::new("ip")
            .args(["-force", "-batch"])
            .arg(&path)
            .output()
            .expect("ip -batch");
        let _ = std::fs::remove_file(&path);
        out
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        let p = self.prefix.clone();
        self.batch((0..self.n).map(|k| format!("link del {p}x{k}")));
    }
}

/// The tracked names present now, with their ifindexes, from `ip link`.
fn ip_links(prefix: &str) -> std::collections::BTreeMap<String, u32> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let ifindex = f.next()?.trim().parse().ok()?;
            let name = f.next()?.trim().split('@').next()?.to_string();
            name.starts_with(&format!("{prefix}x"))
                .then_some((name, ifindex))
        })
        .collect()
}

/// A real overrun: a receive buffer of a few KB, and hundreds of links
/// created, brought up and deleted in one burst while the tracker's
/// runtime is blocked (it cannot read). The kernel drops messages, the
/// next read is ENOBUFS, and the resync leaves the table as `ip link`
/// shows the links.
#[tokio::test(flavor = "current_thread")]
async fn an_overrun_resyncs_the_table_to_what_ip_link_shows() {
    if !prereq::netns(
        "an_overrun_resyncs_the_table_to_what_ip_link_shows",
        &["ip"],
    ) {
        return;
    }
    const N: usize = 300;
    let prefix = format!("eo{}", std::process::id() % 10000);
    let burst = Burst {
        prefix: prefix.clone(),
        n: N,
    };
    let mut config = RepresentorConfig::default();
    for k in 0..N {
        config = config.with(&format!("{prefix}x{k}"), Vport::vf(k as u16).expect("vf"));
    }
    let options = offload::representor::TrackerOptions { rcvbuf: Some(4096) };
    let (tracker, mut rx) = Tracker::start_with(config, 1 << 16, options);
    let deadline = tokio::time::Instant::now() + WAIT;
    while tracker.resyncs() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no initial dump");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The burst, with this (the tracker's only) runtime thread blocked.
    let p = &prefix;
    let lines = (0..N)
        .map(|k| format!("link add {p}x{k} type veth peer name {p}y{k}"))
        .chain((0..N).step_by(2).map(|k| format!("link set {p}x{k} up")))
        .chain((0..N).step_by(3).map(|k| format!("link del {p}x{k}")))
        .chain(
            (0..N)
                .step_by(7)
                .filter(|k| k % 3 != 0)
                .map(|k| format!("link set {p}x{k} mtu 1400")),
        );
    let out = burst.batch(lines);
    assert!(
        out.status.success(),
        "ip -batch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = ip_links(&prefix);
    assert_eq!(
        want.len(),
        N - N.div_ceil(3),
        "the burst left {} links",
        want.len()
    );
    // The tracker reads ENOBUFS, resyncs, and its table is what ip shows.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        while rx.try_recv().is_ok() {}
        let have: std::collections::BTreeMap<String, u32> = tracker
            .snapshot()
            .iter()
            .map(|r| (r.ifname.clone(), r.ifindex))
            .collect();
        if tracker.overruns() >= 1 && have == want {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after the burst: {} overruns, {} resyncs; the table has {} links, ip link {}",
            tracker.overruns(),
            tracker.resyncs(),
            have.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tracker.resyncs() >= 2, "resynced after the overrun");
    // Up, and MTU, as ip shows them.
    for r in tracker.snapshot().iter() {
        let k: usize = r.ifname[prefix.len() + 1..].parse().expect("k");
        assert_eq!(r.admin_up, k % 2 == 0, "{}", r.ifname);
    }
    tracker.stop();
    drop(burst);
    assert!(ip_links(&prefix).is_empty(), "the links are gone");
}

//! `eswitchd replay`: the whole pipeline offline on a capture (or on the
//! generated demo workload), with the `sim` eSwitch forwarding offloaded
//! flows and simulated time following the capture's timestamps.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use megaflow::port::{PacketBatch, PcapReader, Port, PortError};
use megaflow::{PortNo, Timestamp};
use offload::sim::SimConfig;
use offload::Vport;
use serde::Serialize;
use serde_json::Value;
use tracing::warn;

use crate::config::PortSpec;
use crate::switch::{Discard, FlowFile, PortSummary, SimSwitch};

/// How fast to replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// As fast as the pipeline goes.
    Max,
    /// This many times the capture's own pace (1 = real time).
    Times(f64),
}

impl std::str::FromStr for Speed {
    type Err = String;

    fn from_str(s: &str) -> Result<Speed, String> {
        if s == "max" {
            return Ok(Speed::Max);
        }
        match s.parse::<f64>() {
            Ok(x) if x > 0.0 && x.is_finite() => Ok(Speed::Times(x)),
            _ => Err(format!(
                "bad speed \"{s}\": expected a positive number (1 = real time) or \"max\""
            )),
        }
    }
}

/// Where packets come from.
pub enum Source {
    /// A pcap or pcapng file (pcapng interface id i = the i-th port).
    Capture(Box<PcapReader>),
    /// Generated packets.
    Generated(Box<dyn Iterator<Item = (Timestamp, PortNo, Vec<u8>)>>),
}

/// Capture records a replay could not take, counted by reason (the summary
/// shows them; each reason is logged once as it is first met).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Skipped(pub BTreeMap<String, u64>);

impl Skipped {
    /// Counts one record skipped for `reason`; `detail` (about this record)
    /// goes to the log line of a reason's first record.
    fn count(&mut self, reason: String, detail: &str) {
        if !self.0.contains_key(&reason) {
            warn!("capture record skipped: {reason}{detail} (further ones are only counted)");
        }
        *self.0.entry(reason).or_default() += 1;
    }

    /// Records skipped, all reasons together.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// The next batch of a capture: `Ok(0)` at its end. A record longer than
/// the largest frame eswitch takes is skipped and counted; damage after the
/// first packet (a record cut short by the end of the file, a corrupt block)
/// ends the capture there and is counted as one skipped record, so every
/// packet before it is replayed. Damage before any packet, and I/O errors,
/// are errors.
pub fn read_capture(
    r: &mut PcapReader,
    batch: &mut PacketBatch,
    skipped: &mut Skipped,
) -> anyhow::Result<usize> {
    loop {
        match r.recv_batch(batch) {
            Ok(n) => return Ok(n),
            Err(e) if e.is_eof() => return Ok(0),
            Err(PortError::PacketTooLarge { len, limit, .. }) => {
                skipped.count(
                    format!("longer than {limit} bytes, the largest frame eswitch takes"),
                    &format!(": a packet of {len} bytes"),
                );
            }
            Err(PortError::BadCapture { reason, .. }) if r.stats().rx_packets > 0 => {
                skipped.count(format!("the capture ends early: {reason}"), "");
                return Ok(0);
            }
            Err(e) => return Err(e).context("reading the capture"),
        }
    }
}

/// The number of interfaces a capture uses (highest interface id + 1),
/// reading it as a replay would.
pub fn interfaces_in(path: &std::path::Path) -> anyhow::Result<u32> {
    let mut r = PcapReader::open(path)?;
    let mut batch = PacketBatch::new();
    let mut skipped = Skipped::default();
    let mut most = 0;
    while read_capture(&mut r, &mut batch, &mut skipped)? > 0 {
        for p in batch.iter() {
            most = most.max(p.meta.in_port.map_or(0, |p| p.0));
        }
    }
    Ok(most + 1)
}

impl Source {
    /// Fills `batch`; `Ok(0)` at the end.
    fn fill(
        &mut self,
        batch: &mut PacketBatch,
        ports: &[PortSpec],
        skipped: &mut Skipped,
    ) -> anyhow::Result<usize> {
        match self {
            Source::Capture(r) => {
                let n = read_capture(r, batch, skipped)?;
                // Interface ids name ports by position.
                for i in 0..n {
                    if let Some(meta) = batch.meta_mut(i) {
                        let id = meta.in_port.map_or(0, |p| p.0 as usize);
                        meta.in_port = Some(ports.get(id).map_or(PortNo(0), |p| p.no));
                    }
                }
                Ok(n)
            }
            Source::Generated(it) => {
                batch.clear();
                while !batch.is_full() {
                    let Some((ts, port, frame)) = it.next() else {
                        break;
                    };
                    batch.push(&frame, megaflow::port::PacketMeta::with_in_port(ts, port));
                }
                Ok(batch.len())
            }
        }
    }
}

/// The ports for a capture with `n` interfaces when no config names them:
/// interface i is OpenFlow port i+1 on VF i.
pub fn default_ports(n: u32) -> Vec<PortSpec> {
    (0..n)
        .filter_map(|i| {
            Some(PortSpec {
                name: format!("vm{}", i + 1),
                no: PortNo(i + 1),
                kind: crate::switch::PortKind::Representor,
                vport: Some(Vport::vf(u16::try_from(i).ok()?)?),
                tunnel: None,
                bridge: ofproto::BridgeNo::MAIN,
                peer: None,
            })
        })
        .collect()
}

/// What a replay did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub packets: u64,
    pub bytes: u64,
    /// Capture records not replayed, by reason (see [`read_capture`]).
    pub skipped_records: u64,
    pub skipped: Skipped,
    /// Capture time covered, seconds.
    pub capture_seconds: f64,
    /// Wall-clock time, seconds.
    pub wall_seconds: f64,
    /// Packets per second of wall-clock time, millions.
    pub mpps: f64,
    pub megaflows_created: u64,
    pub upcalls: u64,
    /// Upcalls whose megaflow the flow limits kept out (the table's or a
    /// port's).
    pub flow_limit_hits: u64,
    pub offloaded: u64,
    pub offload_failures: BTreeMap<String, u64>,
    /// Received packets forwarded or dropped by the eSwitch.
    pub hw_packets: u64,
    /// Received packets handled in software (FDB misses).
    pub sw_packets: u64,
    pub hw_share: f64,
    pub sw_share: f64,
    pub flows_aged: u64,
    pub flows_demoted: u64,
    pub revalidated_modified: u64,
    pub revalidated_deleted: u64,
    pub revalidator_passes: u64,
    /// Megaflows and hardware rules at the end (before teardown).
    pub megaflows_at_end: usize,
    pub hw_rules_at_end: usize,
    pub hw_drops: u64,
    pub sw_drops: u64,
    pub hw_samples: u64,
    pub sw_samples: u64,
    pub to_controller: u64,
    pub ports: Vec<PortSummary>,
    /// The megaflows left at the end, as `eswitchctl dump-flows --json`
    /// gives them (with `--dump-flows`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<Value>>,
    /// The demo's overlay tenant (set by the caller that added it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay: Option<OverlayShare>,
    /// The demo's stateful tenant (set by the caller that added it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stateful: Option<StatefulShare>,
}

/// What came in by the stateful tenant's ports, and the share of its
/// established connections' packets the eSwitch handled (through its
/// conntrack table).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StatefulShare {
    pub packets: u64,
    pub hw_packets: u64,
    /// Packets of established connections, after their handshakes.
    pub established: u64,
    /// `hw_packets / established`: only such packets can pass the
    /// conntrack table.
    pub est_hw_share: f64,
}

impl StatefulShare {
    /// The share over the ports numbered `ins`, of `established` packets.
    pub fn of(ports: &[PortSummary], ins: &[PortNo], established: u64) -> StatefulShare {
        let o = OverlayShare::of(ports, ins);
        StatefulShare {
            packets: o.packets,
            hw_packets: o.hw_packets,
            established,
            est_hw_share: if established == 0 {
                0.0
            } else {
                o.hw_packets as f64 / established as f64
            },
        }
    }
}

/// What came in by an overlay tenant's ports (its VMs' and the uplink, the
/// way in of its every packet), and the share the eSwitch handled.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OverlayShare {
    pub packets: u64,
    pub hw_packets: u64,
    pub hw_share: f64,
}

impl OverlayShare {
    /// The share over the ports numbered `ins`.
    pub fn of(ports: &[PortSummary], ins: &[PortNo]) -> OverlayShare {
        let mine = || ports.iter().filter(|p| ins.contains(&PortNo(p.ofport)));
        let all: u64 = mine().map(|p| p.rx_packets).sum();
        let hw = all - mine().map(|p| p.rx_sw_packets).sum::<u64>();
        OverlayShare {
            packets: all,
            hw_packets: hw,
            hw_share: if all == 0 {
                0.0
            } else {
                hw as f64 / all as f64
            },
        }
    }
}

/// Everything a replay needs.
pub struct ReplayJob {
    pub source: Source,
    pub ports: Vec<PortSpec>,
    pub flows: FlowFile,
    pub pipeline: ofproto::PipelineConfig,
    pub sim: SimConfig,
    pub speed: Speed,
    /// Print progress on stderr (when it is a terminal).
    pub progress: bool,
    /// Keep the megaflows left at the end in [`Summary::flows`].
    pub dump_flows: bool,
    /// The tunnel ports' routes and neighbours (`[underlay]`).
    pub underlay: Option<Arc<ofproto::tunnel::StaticUnderlay>>,
    /// `[conntrack]`.
    pub conntrack: crate::config::ConntrackConfig,
}

/// Runs a replay to the end of its source.
pub fn run(mut job: ReplayJob) -> anyhow::Result<Summary> {
    let mut batch = PacketBatch::new();
    let mut first_ts = None;
    let mut last_ts = Timestamp::NEVER;
    let mut switch: Option<SimSwitch> = None;
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let tty = job.progress && std::io::stderr().is_terminal();
    let mut skipped = Skipped::default();
    loop {
        let n = job.source.fill(&mut batch, &job.ports, &mut skipped)?;
        let mut pkts: Vec<(PortNo, &[u8])> = Vec::with_capacity(n);
        if n == 0 {
            break;
        }
        let ts0 = batch.get(0).map_or(Timestamp::NEVER, |p| p.meta.ts);
        let t0 = *first_ts.get_or_insert(ts0);
        if switch.is_none() {
            switch = Some(SimSwitch::new(
                &job.ports,
                &job.flows,
                job.pipeline.clone(),
                job.sim.clone(),
                ts0,
            )?);
            if let (Some(sw), Some(u)) = (switch.as_mut(), &job.underlay) {
                sw.set_underlay(Arc::clone(u) as Arc<dyn ofproto::tunnel::Underlay>);
            }
            if let Some(sw) = switch.as_ref() {
                job.conntrack.apply(&sw.tracker())?;
            }
        }
        let Some(sw) = switch.as_mut() else {
            break;
        };
        if let Speed::Times(x) = job.speed {
            let due = Duration::from_secs_f64(ts0.since(t0) as f64 / 1e9 / x);
            let now = started.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        // Runs of packets within 50 µs of capture time share one `now`.
        let mut start = 0;
        while start < n {
            let Some(first) = batch.get(start) else {
                break;
            };
            let now = first.meta.ts.max(last_ts);
            pkts.clear();
            let mut end = start;
            while end < n {
                let Some(p) = batch.get(end) else {
                    break;
                };
                if p.meta.ts.since(now) > 50_000 {
                    break;
                }
                pkts.push((p.meta.in_port.unwrap_or(PortNo(0)), p.data));
                end += 1;
            }
            sw.receive(now, &pkts, &mut Discard);
            last_ts = now;
            start = end;
        }
        if tty && last_progress.elapsed() > Duration::from_millis(200) {
            last_progress = Instant::now();
            let c = sw.counters();
            eprint!(
                "\r{} packets, {:.1} s of capture, {} megaflows, {} in hardware   ",
                c.rx.packets,
                last_ts.since(t0) as f64 / 1e9,
                sw.pipeline().len(),
                sw.pipeline().offloaded_len()
            );
        }
    }
    if tty {
        eprintln!();
    }
    let wall = started.elapsed().as_secs_f64();
    let Some(sw) = switch else {
        if skipped.total() > 0 {
            anyhow::bail!(
                "the capture has no packet eswitch can replay ({} skipped: {})",
                skipped.total(),
                skipped.0.keys().cloned().collect::<Vec<_>>().join("; ")
            );
        }
        anyhow::bail!("the capture has no packets");
    };
    let flows = job
        .dump_flows
        .then(|| crate::control::megaflows_json(sw.pipeline(), last_ts));
    let megaflows_at_end = sw.pipeline().len();
    let hw_rules_at_end = sw.pipeline().offloaded_len();
    let ports = sw.port_summaries();
    let (c, st) = sw.finish(last_ts)?;
    let rx = c.rx.packets.max(1) as f64;
    let summary = Summary {
        packets: c.rx.packets,
        bytes: c.rx.bytes,
        skipped_records: skipped.total(),
        skipped,
        capture_seconds: last_ts.since(first_ts.unwrap_or(last_ts)) as f64 / 1e9,
        wall_seconds: wall,
        mpps: c.rx.packets as f64 / wall.max(1e-9) / 1e6,
        megaflows_created: st.megaflows_created,
        upcalls: st.upcalls,
        flow_limit_hits: st.flow_limit_hits + st.port_limit_hits,
        offloaded: st.offloaded,
        offload_failures: st.offload_failures.clone(),
        hw_packets: c.hw_handled,
        sw_packets: c.sw_handled,
        hw_share: c.hw_handled as f64 / rx,
        sw_share: c.sw_handled as f64 / rx,
        flows_aged: st.aged,
        flows_demoted: st.demoted,
        revalidated_modified: st.revalidated_modified,
        revalidated_deleted: st.revalidated_deleted,
        revalidator_passes: st.passes,
        megaflows_at_end,
        hw_rules_at_end,
        hw_drops: c.hw_drops,
        sw_drops: c.sw_drops,
        hw_samples: c.hw_samples,
        sw_samples: c.sw_samples,
        to_controller: c.to_controller,
        ports,
        flows,
        overlay: None,
        stateful: None,
    };
    Ok(summary)
}

impl Summary {
    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        let mut line = |k: &str, v: String| s.push_str(&format!("  {k:<28} {v}\n"));
        line(
            "packets",
            format!("{} ({} bytes)", self.packets, self.bytes),
        );
        if self.skipped_records > 0 {
            let why: Vec<String> = self
                .skipped
                .0
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            line(
                "skipped capture records",
                format!("{} ({})", self.skipped_records, why.join("; ")),
            );
        }
        line(
            "capture time",
            format!(
                "{:.2} s (replayed in {:.2} s, {:.2} Mpps)",
                self.capture_seconds, self.wall_seconds, self.mpps
            ),
        );
        line("upcalls", self.upcalls.to_string());
        line("megaflows created", self.megaflows_created.to_string());
        line("offloaded to hardware", self.offloaded.to_string());
        line(
            "handled in hardware",
            format!("{} ({})", self.hw_packets, pct(self.hw_share)),
        );
        line(
            "handled in software",
            format!("{} ({})", self.sw_packets, pct(self.sw_share)),
        );
        line("flows aged out", self.flows_aged.to_string());
        line("flows demoted (budget)", self.flows_demoted.to_string());
        line(
            "revalidator",
            format!(
                "{} passes, {} flows modified, {} deleted",
                self.revalidator_passes, self.revalidated_modified, self.revalidated_deleted
            ),
        );
        line(
            "drops",
            format!(
                "{} in hardware, {} in software",
                self.hw_drops, self.sw_drops
            ),
        );
        line(
            "samples",
            format!(
                "{} from hardware, {} from software",
                self.hw_samples, self.sw_samples
            ),
        );
        line("to controller", self.to_controller.to_string());
        if let Some(o) = &self.overlay {
            line(
                "overlay tenant",
                format!(
                    "{} packets in, {} handled by the eSwitch ({})",
                    o.packets,
                    o.hw_packets,
                    pct(o.hw_share)
                ),
            );
        }
        if let Some(o) = &self.stateful {
            line(
                "stateful tenant",
                format!(
                    "{} packets in, {} of {} established handled by the eSwitch ({})",
                    o.packets,
                    o.hw_packets,
                    o.established,
                    pct(o.est_hw_share)
                ),
            );
        }
        line(
            "at the end",
            format!(
                "{} megaflows, {} in hardware",
                self.megaflows_at_end, self.hw_rules_at_end
            ),
        );
        let mut out = String::from("replay summary\n");
        out.push_str(&s);
        if self.offload_failures.is_empty() {
            out.push_str("  offload failures             none\n");
        } else {
            out.push_str("  offload failures by reason:\n");
            for (r, n) in &self.offload_failures {
                out.push_str(&format!("    {n:>10}  {r}\n"));
            }
        }
        out.push_str(&format!(
            "\n  {:<8} {:>6} {:>7} {:>10} {:>10} {:>10} {:>12}\n",
            "port", "ofport", "vport", "rx", "tx hw", "tx sw", "tx bytes"
        ));
        for p in &self.ports {
            out.push_str(&format!(
                "  {:<8} {:>6} {:>7} {:>10} {:>10} {:>10} {:>12}\n",
                p.name,
                p.ofport,
                p.vport,
                p.rx_packets,
                p.tx_hw_packets,
                p.tx_sw_packets,
                p.tx_bytes
            ));
        }
        if let Some(flows) = &self.flows {
            out.push_str(&format!("\nmegaflows at the end ({}):\n", flows.len()));
            out.push_str(&crate::control::render::dump_flows(
                &serde_json::json!({ "flows": flows }),
            ));
        }
        out
    }
}

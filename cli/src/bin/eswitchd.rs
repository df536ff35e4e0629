//! eswitchd: the eswitch daemon.
//!
//! - `eswitchd replay --demo`: the whole pipeline on a generated workload;
//! - `eswitchd replay --pcap FILE --flows FILE [--config FILE]`: on a capture;
//! - `eswitchd generate --out FILE`: writes the demo workload as pcapng;
//! - `eswitchd run --config eswitch.toml`: live on netdevs (see
//!   `cli::live`), until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args as ClapArgs, Parser, Subcommand};
use cli::config::{Config, PortType};
use cli::demo::{self, DemoSpec};
use cli::replay::{self, ReplayJob, Source, Speed};
use cli::switch::FlowFile;
use megaflow::port::PcapReader;
use offload::sim::SimConfig;

/// The eswitch daemon.
#[derive(Parser, Debug)]
#[command(name = "eswitchd", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the whole pipeline offline on a capture (or on the demo
    /// workload), with the sim eSwitch forwarding offloaded flows.
    Replay(ReplayArgs),
    /// Writes the demo workload to a pcapng file (one interface per VM).
    Generate(GenerateArgs),
    /// Runs live on the configured netdevs (VF representors, or veths
    /// standing in for them) until SIGINT/SIGTERM; logs go to stderr
    /// (`RUST_LOG`, default `info`).
    Run(RunArgs),
    /// Runs the Direct Rule conformance suite the sim passes on a real
    /// ConnectX eSwitch, with traffic between two or more of your VFs;
    /// prints a report with the rule insert rate and counter query time,
    /// removes everything it created, and exits non-zero on any difference
    /// from the sim. It programs the FDB root while it runs: stop the
    /// switch's traffic first.
    HwCheck(HwCheckArgs),
}

#[derive(ClapArgs, Debug)]
struct HwCheckArgs {
    /// The RDMA device (default: the one the representors are on).
    #[arg(long)]
    device: Option<String>,
    /// Representors whose VFs have netdevs on this host, comma-separated;
    /// the first one's VF sends (default: the ports of --config).
    #[arg(long, value_delimiter = ',')]
    ports: Vec<String>,
    /// eswitch.toml, for its ports and backend.device.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Run the suite on the sim instead: the reference, and the report's
    /// shape, on any machine.
    #[arg(long, conflicts_with_all = ["device", "ports", "config"])]
    sim: bool,
    /// Rules inserted to measure the insert rate.
    #[arg(long, default_value_t = cli::hw::check::Sizes::default().rules)]
    rules: usize,
    /// Where misses are received: `netdev` (the representors; the restore
    /// cases are skipped) or `verbs` (the slow-path queue, which reads
    /// restore tags: the cases that prove `backend.slow_path = "verbs"`).
    #[arg(long, default_value = "netdev", value_parser = ["netdev", "verbs"])]
    slow_path: String,
}

#[derive(ClapArgs, Debug)]
struct RunArgs {
    /// eswitch.toml: ports, backend, offload policy, limits, flow file
    /// (default with --ovsdb: the sim backend and every default).
    #[arg(long, required_unless_present = "ovsdb")]
    config: Option<PathBuf>,
    /// Be the switch daemon of this Open_vSwitch database (as
    /// ovs-vswitchd is): its bridge's ports, controllers and fail mode
    /// come from it, and what the switch did is written back.
    #[arg(long, value_name = "REMOTE", num_args = 0..=1,
          default_missing_value = "unix:/var/run/openvswitch/db.sock")]
    ovsdb: Option<String>,
    /// The control socket (default: `datapath.control_socket`).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Port I/O: auto, af_xdp or af_packet (default: `datapath.port_type`).
    #[arg(long)]
    port_type: Option<PortType>,
}

#[derive(ClapArgs, Debug)]
struct WorkloadArgs {
    /// VMs (ports) in the demo workload.
    #[arg(long, default_value_t = DemoSpec::default().vms)]
    vms: u32,
    /// Packets to generate.
    #[arg(long, default_value_t = DemoSpec::default().packets)]
    packets: u64,
    /// Distinct 5-tuple flows.
    #[arg(long, default_value_t = DemoSpec::default().flows)]
    demo_flows: u32,
    /// Simulated seconds the workload spans.
    #[arg(long, default_value_t = DemoSpec::default().seconds)]
    seconds: f64,
    /// Random seed.
    #[arg(long, default_value_t = DemoSpec::default().seed)]
    seed: u64,
}

impl WorkloadArgs {
    fn spec(&self) -> DemoSpec {
        DemoSpec {
            vms: self.vms,
            packets: self.packets,
            flows: self.demo_flows,
            seconds: self.seconds,
            seed: self.seed,
        }
    }
}

#[derive(ClapArgs, Debug)]
struct ReplayArgs {
    /// Replay the generated demo workload (no files needed).
    #[arg(long, conflicts_with = "pcap")]
    demo: bool,
    /// A pcap or pcapng capture (pcapng interface i = the i-th configured port).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// The OpenFlow table: ovs-ofctl flow lines, and `meter=` lines.
    #[arg(long)]
    flows: Option<PathBuf>,
    /// eswitch.toml: ports, offload policy, limits.
    #[arg(long)]
    config: Option<PathBuf>,
    /// `max`, or a multiple of the capture's own pace (1 = real time).
    #[arg(long, default_value = "max")]
    speed: Speed,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// End with a `bench: replay.pps <value> Mpps` line.
    #[arg(long)]
    bench: bool,
    /// Also print the megaflows left at the end, as `eswitchctl dump-flows`
    /// does (in `--json`: a `flows` array).
    #[arg(long)]
    dump_flows: bool,
    /// `--demo` without its overlay and stateful tenants (the workload
    /// alone, as `generate` writes it without `--config-file`).
    #[arg(long)]
    no_overlay: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
}

#[derive(ClapArgs, Debug)]
struct GenerateArgs {
    /// Where to write the pcapng file.
    #[arg(long)]
    out: PathBuf,
    /// Also write the matching flow file here.
    #[arg(long)]
    flow_file: Option<PathBuf>,
    /// Write the overlay tenant into the capture too, and here the
    /// eswitch.toml that replays it (its ports, tunnel port and underlay;
    /// `flows` naming the flow file).
    #[arg(long)]
    config_file: Option<PathBuf>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

fn replay(a: ReplayArgs) -> anyhow::Result<()> {
    init_logging("warn");
    let config = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let pipeline = config.pipeline()?;
    let mut ports = config.port_specs()?;
    let flow_text = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read flow file {}", p.display()))
    };
    // The demo's overlay tenant (its VMs' count), when the demo sets the
    // switch up itself: no ports, flows or underlay given.
    let mut tenant = None;
    let (source, flows) = if a.demo {
        let spec = a.workload.spec().normalized();
        let given = a.flows.clone().or(config.flows_path());
        let own = ports.is_empty() && given.is_none() && config.underlay.is_none();
        let mut text = match &given {
            Some(p) => flow_text(p)?,
            None => format!("{}\n{}", demo::meter_lines(), demo::flow_table(spec.vms)),
        };
        if ports.is_empty() {
            ports = replay::default_ports(spec.vms);
        }
        let gen: Box<dyn Iterator<Item = demo::DemoPacket>> =
            if own && !a.no_overlay && demo::overlay::packets_of(&spec) > 0 {
                ports.extend(demo::overlay::port_specs(spec.vms));
                ports.extend(demo::stateful::port_specs(spec.vms));
                text.push_str(&demo::overlay::flow_table(spec.vms));
                text.push_str(&demo::stateful::flow_table(spec.vms));
                tenant = Some(spec.vms);
                Box::new(demo::with_overlay(&spec))
            } else {
                Box::new(demo::generate(&spec))
            };
        let gen = gen.map(|p| (p.ts, p.in_port, p.frame));
        (Source::Generated(Box::new(gen)), text)
    } else {
        let Some(pcap) = &a.pcap else {
            bail!("give --pcap FILE (and --flows FILE), or --demo");
        };
        if ports.is_empty() {
            ports = replay::default_ports(replay::interfaces_in(pcap)?);
        }
        let flows = a
            .flows
            .clone()
            .or(config.flows_path())
            .context("give --flows FILE (or `flows = ...` in the config)")?;
        let reader = PcapReader::open(pcap)?;
        (Source::Capture(Box::new(reader)), flow_text(&flows)?)
    };
    let flows = FlowFile::parse(&flows).context("in the flow file")?;
    let underlay = match (&config.underlay, tenant) {
        (Some(u), _) => Some(std::sync::Arc::new(u.underlay(&ports)?)),
        (None, Some(vms)) => Some(std::sync::Arc::new(demo::overlay::underlay(vms))),
        (None, None) => None,
    };
    let mut summary = replay::run(ReplayJob {
        source,
        ports,
        flows,
        pipeline,
        sim: SimConfig::default(),
        speed: a.speed,
        progress: !a.json,
        dump_flows: a.dump_flows,
        underlay,
        conntrack: config.conntrack.clone(),
    })?;
    if let Some(vms) = tenant {
        let ins = demo::overlay::Ports::of(vms).ins();
        summary.overlay = Some(replay::OverlayShare::of(&summary.ports, &ins));
        let ins = demo::stateful::Ports::of(vms).named().map(|(_, p)| p);
        let est = demo::stateful::established_of(&a.workload.spec());
        summary.stateful = Some(replay::StatefulShare::of(&summary.ports, &ins, est));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.render());
    }
    if a.bench {
        println!("bench: replay.pps {:.3} Mpps", summary.mpps);
        if let Some(o) = &summary.overlay {
            println!("bench: tunnel.demo_hw_pct {:.2} %", o.hw_share * 100.0);
        }
        if let Some(o) = &summary.stateful {
            println!("bench: ct.demo_est_hw_pct {:.2} %", o.est_hw_share * 100.0);
        }
    }
    Ok(())
}

/// Logs to stderr, at `RUST_LOG` or else `default` level.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn run(a: RunArgs) -> anyhow::Result<()> {
    init_logging("info");
    let mut config = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::parse("")?,
    };
    if let Some(remote) = &a.ovsdb {
        let bridge = config.ovsdb.as_ref().map(|o| o.bridge.clone());
        let mut o = cli::config::OvsdbConfig::with_remote(remote);
        if let Some(b) = bridge {
            o.bridge = b;
        }
        o.rundir = config.ovsdb.as_ref().and_then(|o| o.rundir.clone());
        config.ovsdb = Some(o);
    }
    let port_type = a.port_type.unwrap_or(config.datapath.port_type);
    let factory = std::sync::Arc::new(cli::live::NetdevFactory { port_type });
    let report = if config.backend.kind == "mlx5" {
        // Found, opened and proven (FDB steering) first, so every "cannot"
        // is said before anything is bound or created.
        let dev = cli::hw::mlx5_backend(&config)?;
        cli::live::run_on(&config, a.socket, factory, move |cfg, flows, f, l| {
            cli::live::Daemon::start_on(dev, cfg, flows, f, l)
        })?
    } else {
        cli::live::run(&config, a.socket, factory)?
    };
    println!(
        "eswitchd: stopped; {} rules removed from the device, {} megaflows dropped, {} packets received",
        report.rules_removed, report.megaflows, report.packets
    );
    Ok(())
}

fn hw_check(a: HwCheckArgs) -> anyhow::Result<()> {
    init_logging("warn");
    let sizes = cli::hw::check::Sizes {
        rules: a.rules,
        ..Default::default()
    };
    let result = if a.sim {
        cli::hw::check::check_sim(sizes)
    } else {
        let config = a.config.as_deref().map(Config::load).transpose()?;
        let mut ports = a.ports;
        if ports.is_empty() {
            if let Some(c) = &config {
                ports = c.port_specs()?.into_iter().map(|p| p.name).collect();
            }
        }
        let device = a
            .device
            .or_else(|| config.as_ref().and_then(|c| c.backend.device.clone()));
        let verbs = a.slow_path == "verbs";
        cli::hw::check::check_mlx5(device.as_deref(), &ports, sizes, verbs)?
    };
    println!("{result}");
    if !result.passed() {
        anyhow::bail!("hw-check: the device differs from the sim (see above)");
    }
    Ok(())
}

fn generate(a: GenerateArgs) -> anyhow::Result<()> {
    let spec = a.workload.spec().normalized();
    let overlay = a.config_file.is_some();
    let (n, interfaces) = if overlay {
        (
            demo::write_pcapng_with_overlay(&spec, &a.out)?,
            spec.vms + 8,
        )
    } else {
        (demo::write_pcapng(&spec, &a.out)?, spec.vms)
    };
    println!(
        "wrote {n} packets on {interfaces} interfaces to {}",
        a.out.display()
    );
    let mut flows_at = None;
    if let Some(f) = &a.flow_file {
        let mut table = format!("{}\n{}", demo::meter_lines(), demo::flow_table(spec.vms));
        if overlay {
            table.push_str(&demo::overlay::flow_table(spec.vms));
            table.push_str(&demo::stateful::flow_table(spec.vms));
        }
        std::fs::write(f, table).with_context(|| format!("cannot write {}", f.display()))?;
        println!("wrote the flow table to {}", f.display());
        flows_at = Some(std::fs::canonicalize(f)?.display().to_string());
    }
    if let Some(c) = &a.config_file {
        let text = demo::overlay::config_toml(spec.vms, flows_at.as_deref());
        std::fs::write(c, text).with_context(|| format!("cannot write {}", c.display()))?;
        println!("wrote the config to {}", c.display());
    }
    Ok(())
}

#[cfg(test)]
#[path = "tests/eswitchd.rs"]
mod tests;

fn main() -> ExitCode {
    let args = Args::parse();
    let r = match args.command {
        Command::Replay(a) => replay(a),
        Command::Generate(a) => generate(a),
        Command::Run(a) => run(a),
        Command::HwCheck(a) => hw_check(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eswitchd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

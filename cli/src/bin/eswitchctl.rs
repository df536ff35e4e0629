//! eswitchctl: inspect and control a running eswitchd over its control
//! socket (one JSON request per line, see `cli::control`).
//!
//! Exit status: 0 on success, 1 when the daemon refused the request (the
//! reason is printed as `eswitchctl: <error>`), 2 when the daemon cannot be
//! reached (or answered garbage), as for a usage error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use cli::control::render::{pretty, render};
use cli::control::socket::{request, DEFAULT_SOCKET, SOCKET_ENV};
use cli::control::{FlowKind, Request, Response, SortKey};

/// Inspect and control a running eswitchd over its control socket.
#[derive(Parser, Debug)]
#[command(name = "eswitchctl", version, about)]
struct Args {
    /// Control socket of the daemon [default: $ESWITCH_SOCKET, else
    /// /run/eswitch/eswitchd.sock].
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Print the daemon's answer as pretty JSON.
    #[arg(long, global = true)]
    json: bool,
    /// How long to wait for the daemon, each way (0: forever).
    #[arg(long, global = true, default_value_t = 5000, value_name = "MS")]
    timeout_ms: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Ports with their counters (and live status).
    Show,
    /// Megaflows: match, counters, used, offloaded or why not, actions.
    DumpFlows {
        /// Only the megaflows in the device (Open vSwitch's
        /// `type=offloaded`).
        #[arg(long, conflicts_with = "software")]
        offloaded: bool,
        /// Only the megaflows in software (`type=ovs`), each with why.
        #[arg(long)]
        software: bool,
        /// Only those whose "offloaded" column contains TEXT (`ENOSPC`,
        /// `not hot`, `yes`).
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Most packets or bytes first.
        #[arg(long, value_enum)]
        sort: Option<Sort>,
    },
    /// What is programmed in the device: tables, matchers, rules, counters.
    DumpRules,
    /// The OpenFlow tables, as `ovs-ofctl dump-flows`.
    DumpOf,
    /// Adds a flow, in ovs-ofctl syntax (`priority=5,ip,actions=drop`).
    AddFlow { flow: String },
    /// Deletes the flows a match selects (all of them without one).
    DelFlows { flow: Option<String> },
    /// How a packet (flow syntax: `in_port=1,udp,tp_dst=53`) walks the
    /// tables.
    Trace {
        packet: String,
        /// At each recirculation (`ct(table=T)`), go on with this
        /// tracking state (`trk,new`, `trk,est`...), as `ovs-appctl
        /// ofproto/trace --ct-next`; repeat for later stages.
        #[arg(long = "ct-next", value_name = "FLAGS")]
        ct_next: Vec<String>,
    },
    /// Pipeline and switch counters.
    Stats,
    /// Adds a port to the running daemon (as `ovs-vsctl add-port`; not
    /// written to the config): NAME is its netdev.
    AddPort {
        name: String,
        /// OpenFlow port number [default: the lowest free one].
        #[arg(long)]
        ofport: Option<u32>,
        /// eSwitch vport (`vf3`, `pf`, a number) [default: a representor's
        /// own, from its phys_port_name; `uplink` for an uplink; none for
        /// an internal port].
        #[arg(long)]
        vport: Option<String>,
        /// The port's type: `representor` (a VF representor), `uplink`
        /// (the wire side of the eSwitch) or `internal` (a netdev of the
        /// host's own IP stack, which the device does not see) [default:
        /// `uplink` for `--vport uplink`, else `representor`]; `vxlan` or
        /// `geneve` for a tunnel port (no netdev; give its options).
        #[arg(long = "type")]
        kind: Option<String>,
        /// A tunnel port's option, `NAME=VALUE` (as ovs-vsctl's
        /// `options:NAME=VALUE`): remote_ip (an address or flow), local_ip,
        /// key (a VNI or flow), dst_port, tos, ttl, df_default, csum.
        #[arg(long = "option", value_name = "NAME=VALUE")]
        options: Vec<String>,
    },
    /// Removes a port from the running daemon: its megaflows and hardware
    /// rules go with it.
    DelPort { name: String },
    /// The controllers the switch connects to (as `ovs-vsctl
    /// get-controller`).
    GetController,
    /// Replaces the controllers (`tcp:IP:PORT`, `ssl:IP:PORT`; as
    /// `ovs-vsctl set-controller`): one that stays keeps its connection, a
    /// removed one's is closed; flows stay.
    SetController {
        #[arg(required = true)]
        targets: Vec<String>,
    },
    /// Removes every controller (as `ovs-vsctl del-controller`).
    DelController,
    /// `standalone` or `secure` (as `ovs-vsctl get-fail-mode`).
    GetFailMode,
    /// With no controller connected: `standalone` switches with NORMAL,
    /// `secure` keeps the flow tables (as `ovs-vsctl set-fail-mode`).
    SetFailMode { mode: String },
    /// Tracked connections, as `ovs-appctl dpctl/dump-conntrack`.
    DumpConntrack {
        /// Only this zone.
        #[arg(long)]
        zone: Option<u16>,
        /// With each connection's seconds left (`-s`).
        #[arg(short = 's', long)]
        statistics: bool,
    },
    /// Removes connections, as `ovs-appctl dpctl/flush-conntrack`:
    /// `[zone=N] [mark=X[/M]] [labels=Y[/N]] [ORIG-TUPLE [REPLY-TUPLE]]`,
    /// a tuple as `ct_nw_src=A,ct_nw_dst=B,ct_nw_proto=6,ct_tp_src=P,ct_tp_dst=Q`.
    FlushConntrack { args: Vec<String> },
    /// Connections per protocol and the tracker's counters, as
    /// `ovs-appctl dpctl/ct-stats-show`.
    ConntrackStats {
        #[arg(long)]
        zone: Option<u16>,
        /// TCP connections by state too (`-m`).
        #[arg(short = 'm', long)]
        more: bool,
    },
    /// Sets zone limits, as `ovs-appctl dpctl/ct-set-limits`:
    /// `[default=L] [zone=N,limit=L]...`.
    CtSetLimits {
        #[arg(required = true)]
        args: Vec<String>,
    },
    /// Zone limits in force, as `ovs-appctl dpctl/ct-get-limits`
    /// (`--zone N`, repeatable; none: every zone with its own limit).
    CtGetLimits {
        #[arg(long = "zone")]
        zones: Vec<u16>,
    },
    /// What each datapath thread did since the last `dp-stats-clear`:
    /// packets, recirculations, exact-match, hinted and megaflow hits,
    /// subtables probed, misses (as `ovs-appctl
    /// dpif-netdev/pmd-stats-show`).
    DpStats,
    /// Starts `dp-stats` from zero (as `dpif-netdev/pmd-stats-clear`; the
    /// metrics keep counting).
    DpStatsClear,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Sort {
    Packets,
    Bytes,
}

impl Cmd {
    /// The command's name and its request.
    fn request(self) -> (&'static str, Request) {
        match self {
            Cmd::Show => ("show", Request::Show),
            Cmd::DumpFlows {
                offloaded,
                software,
                reason,
                sort,
            } => (
                "dump-flows",
                Request::DumpFlows {
                    only: if offloaded {
                        Some(FlowKind::Offloaded)
                    } else if software {
                        Some(FlowKind::Software)
                    } else {
                        None
                    },
                    reason,
                    sort: sort.map(|s| match s {
                        Sort::Packets => SortKey::Packets,
                        Sort::Bytes => SortKey::Bytes,
                    }),
                },
            ),
            Cmd::DumpRules => ("dump-rules", Request::DumpRules),
            Cmd::DumpOf => ("dump-of", Request::DumpOf),
            Cmd::AddFlow { flow } => ("add-flow", Request::AddFlow { flow }),
            Cmd::DelFlows { flow } => ("del-flows", Request::DelFlows { flow }),
            Cmd::Trace { packet, ct_next } => ("trace", Request::Trace { packet, ct_next }),
            Cmd::Stats => ("stats", Request::Stats),
            Cmd::AddPort {
                name,
                ofport,
                vport,
                kind,
                options,
            } => (
                "add-port",
                Request::AddPort {
                    name,
                    ofport,
                    vport,
                    kind,
                    options,
                },
            ),
            Cmd::DelPort { name } => ("del-port", Request::DelPort { name }),
            Cmd::GetController => ("get-controller", Request::GetController),
            Cmd::SetController { targets } => {
                ("set-controller", Request::SetController { targets })
            }
            Cmd::DelController => (
                "del-controller",
                Request::SetController {
                    targets: Vec::new(),
                },
            ),
            Cmd::GetFailMode => ("get-fail-mode", Request::GetFailMode),
            Cmd::SetFailMode { mode } => ("set-fail-mode", Request::SetFailMode { mode }),
            Cmd::DumpConntrack { zone, statistics } => (
                "dump-conntrack",
                Request::DumpConntrack {
                    zone,
                    stats: statistics,
                },
            ),
            Cmd::FlushConntrack { args } => ("flush-conntrack", Request::FlushConntrack { args }),
            Cmd::ConntrackStats { zone, more } => (
                "conntrack-stats",
                Request::ConntrackStats {
                    zone,
                    verbose: more,
                },
            ),
            Cmd::CtSetLimits { args } => ("ct-set-limits", Request::CtSetLimits { args }),
            Cmd::CtGetLimits { zones } => ("ct-get-limits", Request::CtGetLimits { zones }),
            Cmd::DpStats => ("dp-stats", Request::DpStats),
            Cmd::DpStatsClear => ("dp-stats-clear", Request::DpStatsClear),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let socket = args
        .socket
        .or_else(|| std::env::var_os(SOCKET_ENV).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    let (name, req) = args.cmd.request();
    let timeout = Duration::from_millis(args.timeout_ms);
    match request(&socket, &req, timeout) {
        Err(e) => {
            eprintln!("eswitchctl: {e:#}");
            ExitCode::from(2)
        }
        Ok(Response::Error(e)) => {
            eprintln!("eswitchctl: {e}");
            ExitCode::from(1)
        }
        Ok(Response::Ok(v)) => {
            let out = if args.json {
                pretty(&v)
            } else {
                render(name, &v)
            };
            // A closed pipe (`| head`) is not an error worth a panic.
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("eswitchctl: cannot write the output: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

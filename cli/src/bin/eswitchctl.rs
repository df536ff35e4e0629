//! eswitchctl: inspect and control a running eswitchd.
use clap::Parser;

/// Inspect and control a running eswitchd over its control socket.
#[derive(Parser, Debug)]
#[command(name = "eswitchctl", version, about)]
struct Args {
    /// Control socket of the daemon.
    #[arg(long, default_value = "/run/eswitch/eswitchd.sock")]
    socket: std::path::PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::bail!(
        "no daemon control socket yet at {}: eswitchd's live mode arrives with the live-switching work",
        args.socket.display()
    )
}

//! eswitchd: the eswitch daemon.
use clap::Parser;

/// The eswitch daemon.
#[derive(Parser, Debug)]
#[command(name = "eswitchd", version, about)]
struct Args {}

fn main() -> anyhow::Result<()> {
    let _ = Args::parse();
    println!("eswitchd: replay and live modes are not built yet; run `cargo bench -p megaflow --bench pipeline` for the datapath benchmark");
    Ok(())
}

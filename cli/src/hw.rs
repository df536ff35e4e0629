//! `backend = "mlx5"`: finding and opening the ConnectX the configured
//! representors belong to, with a message a user can act on at each step:
//! no RDMA device on the machine at all, representors that are not behind
//! an mlx5 device, a device that does not open (DEVX, permissions).

use anyhow::Context;

use crate::config::Config;

/// The RDMA device `cfg` names, or the one its ports' representors are
/// on, opened with DEVX.
pub fn open_mlx5(cfg: &Config) -> anyhow::Result<mlx5::OpenDevice> {
    // Any device at all? ("none" is the commonest answer, and the clearest
    // to give first.)
    mlx5::device::device_names().context("backend = \"mlx5\"")?;
    let device = match &cfg.backend.device {
        Some(d) => d.clone(),
        None => {
            let specs = cfg.port_specs()?;
            let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
            let found = mlx5::discover(&mlx5::discover::sysfs_root(), &names).context(
                "backend = \"mlx5\": finding the RDMA device of the ports (or set backend.device)",
            )?;
            if found.eswitch_mode.as_deref() == Some("legacy") {
                anyhow::bail!(
                    "backend = \"mlx5\": the eSwitch of {} is in legacy mode; switch it with \
                     `devlink dev eswitch set pci/<PF address> mode switchdev`",
                    found.device
                );
            }
            found.device
        }
    };
    mlx5::open(&device).context("backend = \"mlx5\"")
}

//! `backend = "mlx5"`: finding the ConnectX the configured representors
//! belong to and starting the Direct Rule backend on it, with a message a
//! user can act on at each step: no RDMA device on the machine at all,
//! representors that are not behind an mlx5 device, an eSwitch in legacy
//! mode, a device that does not open (DEVX, permissions), a vport that
//! differs from the device's, no FDB software steering.

use std::sync::Arc;

use anyhow::Context;

use crate::config::Config;

/// The mlx5 backend on the device `cfg` names, or the one its ports'
/// representors are on.
pub fn mlx5_backend(cfg: &Config) -> anyhow::Result<Arc<mlx5::Mlx5Backend>> {
    // Any device at all? ("none" is the commonest answer, and the clearest
    // to give first.)
    mlx5::device::device_names().context("backend = \"mlx5\"")?;
    let specs = cfg.port_specs()?;
    let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    let found =
        match mlx5::discover(&mlx5::discover::sysfs_root(), &names) {
            Ok(f) => Some(f),
            // An explicit device needs no discovery; the representors' ports
            // are then unknown (source-port metadata stays unset).
            Err(_) if cfg.backend.device.is_some() => None,
            Err(e) => return Err(e).context(
                "backend = \"mlx5\": finding the RDMA device of the ports (or set backend.device)",
            ),
        };
    if let Some(f) = &found {
        if f.eswitch_mode.as_deref() == Some("legacy") {
            anyhow::bail!(
                "backend = \"mlx5\": the eSwitch of {} is in legacy mode; switch it with \
                 `devlink dev eswitch set pci/<PF address> mode switchdev`",
                f.device
            );
        }
    }
    let device = match (&cfg.backend.device, &found) {
        (Some(d), _) => d.clone(),
        (None, Some(f)) => f.device.clone(),
        (None, None) => unreachable!("discovery failed without a configured device"),
    };
    let reps: Vec<mlx5::RepPort> = specs
        .iter()
        .map(|p| mlx5::RepPort {
            netdev: p.name.clone(),
            vport: p.vport,
            ib_port: found.as_ref().and_then(|f| f.ports.get(&p.name).copied()),
        })
        .collect();
    let b = mlx5::start(&device, &reps).context("backend = \"mlx5\"")?;
    Ok(Arc::new(b))
}

//! `backend = "mlx5"`: finding the ConnectX the configured representors
//! belong to and starting the Direct Rule backend on it, with a message a
//! user can act on at each step: no RDMA device on the machine at all,
//! representors that are not behind an mlx5 device, an eSwitch in legacy
//! mode, a device that does not open (DEVX, permissions), a vport that
//! differs from the device's, no FDB software steering.

use std::sync::Arc;

use anyhow::Context;

use offload::Vport;

use crate::config::Config;

pub mod check;
pub mod verbs;
pub mod wire;

/// The mlx5 backend on the device `cfg` names, or the one its ports'
/// representors are on.
pub fn mlx5_backend(cfg: &Config) -> anyhow::Result<Arc<mlx5::Mlx5Backend>> {
    let specs = cfg.port_specs()?;
    let reps: Vec<(String, Vport)> = specs
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.vport?)))
        .collect();
    let b = open(cfg.backend.device.as_deref(), &reps)?;
    if cfg.backend.verbs_slow_path()? {
        // Port 1 of the manager's IB device is the uplink representor's.
        b.open_slow_path(1, mlx5::SLOW_PATH_DEPTH)
            .context("backend.slow_path = \"verbs\"")?;
    }
    Ok(Arc::new(b))
}

/// Starts the mlx5 backend on `device`, or on the device the
/// representors `reps` (netdev, vport) are on.
pub fn open(device: Option<&str>, reps: &[(String, Vport)]) -> anyhow::Result<mlx5::Mlx5Backend> {
    let names: Vec<&str> = reps.iter().map(|(n, _)| n.as_str()).collect();
    let found = mlx5::discover(&mlx5::discover::sysfs_root(), &names);
    let (device, found) = match (device, found) {
        // An explicit device needs no discovery; without it the
        // representors' ports are unknown (no source-port metadata).
        (Some(d), found) => (d.to_owned(), found.ok()),
        (None, Ok(f)) => (f.device.clone(), Some(f)),
        (None, Err(e)) => {
            // No RDMA device at all is the commonest reason, and the
            // clearest to give.
            mlx5::device::device_names().context("backend = \"mlx5\"")?;
            return Err(e).context(
                "backend = \"mlx5\": finding the RDMA device of the ports (or set backend.device)",
            );
        }
    };
    if let Some(mode) = found.as_ref().and_then(|f| f.eswitch_mode.as_deref()) {
        if mode == "legacy" {
            anyhow::bail!(
                "backend = \"mlx5\": the eSwitch of {device} is in legacy mode; switch it with \
                 `devlink dev eswitch set pci/<PF address> mode switchdev`"
            );
        }
    }
    let reps: Vec<mlx5::RepPort> = reps
        .iter()
        .map(|(name, vport)| mlx5::RepPort {
            netdev: name.clone(),
            vport: *vport,
            ib_port: found.as_ref().and_then(|f| f.ports.get(name).copied()),
        })
        .collect();
    mlx5::start(&device, &reps).context("backend = \"mlx5\"")
}

//! From representor netdevs to the RDMA device and ports that steer them,
//! through sysfs (`SYSFS_PATH`, as libibverbs itself honours, else `/sys`).
//!
//! - A representor shares its PF's PCI function, so
//!   `class/net/<rep>/device/infiniband/` names the RDMA device (`mlx5_0`).
//! - The device's ports list their netdev in
//!   `class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/0` (switchdev mode
//!   gives each representor a port of the PF's device): that is the port
//!   `mlx5dv_query_port` is asked about (vport, `reg_c_0` metadata).
//! - `class/net/<netdev>/compat/devlink/mode` says `switchdev` or `legacy`
//!   (mlx5 netdevs have it), for the message when the FDB is refused.
//!
//! Pure file reading: tested on fake sysfs trees.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where sysfs is: `SYSFS_PATH` or `/sys`.
pub fn sysfs_root() -> PathBuf {
    std::env::var_os("SYSFS_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"))
}

/// The RDMA device of a set of representors, and each one's port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovered {
    /// `mlx5_0`.
    pub device: String,
    /// Representor netdev → RDMA port (1-based), when sysfs lists it.
    pub ports: BTreeMap<String, u32>,
    /// The eSwitch mode one of the netdevs reports (`switchdev`,
    /// `legacy`), when it does.
    pub eswitch_mode: Option<String>,
}

/// Why discovery failed; each names the netdev and what to check.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DiscoverError {
    #[error("no representors configured: nothing to find the RDMA device by")]
    NoPorts,
    #[error("netdev {netdev}: no such netdev in {sysfs}/class/net")]
    NoNetdev { netdev: String, sysfs: String },
    #[error(
        "netdev {netdev}: no RDMA device behind it ({path} is missing): not an mlx5 representor, or mlx5_ib is not loaded"
    )]
    NoRdma { netdev: String, path: String },
    #[error(
        "netdev {netdev} is on RDMA device {other}, the others on {device}: one eSwitch per daemon"
    )]
    TwoDevices {
        netdev: String,
        device: String,
        other: String,
    },
    #[error("representor {rep}: {reason} ({path})")]
    NoVf {
        rep: String,
        path: String,
        reason: &'static str,
    },
}

/// The VF index a representor stands for, from its `phys_port_name`
/// (`pf0vf3`, or `c1pf0vf3` on a multi-host controller).
pub fn vf_index(phys_port_name: &str) -> Option<u16> {
    let (_, vf) = phys_port_name.rsplit_once("vf")?;
    vf.parse().ok()
}

/// The host netdev of the VF that representor `rep` stands for: the
/// representor's `phys_port_name` names the VF, and the PF's PCI function
/// (the representor's `device`) lists it as `virtfn<N>/net/<netdev>`. A VF
/// bound to vfio (passed to a VM) has no netdev: that is an error here.
pub fn vf_netdev(sysfs: &Path, rep: &str) -> Result<String, DiscoverError> {
    let net = sysfs.join("class/net").join(rep);
    let err = |path: &Path, reason| DiscoverError::NoVf {
        rep: rep.to_owned(),
        path: path.display().to_string(),
        reason,
    };
    let name_path = net.join("phys_port_name");
    let name = read_trimmed(&name_path)
        .ok_or_else(|| err(&name_path, "no phys_port_name: not a representor"))?;
    let vf = vf_index(&name).ok_or_else(|| err(&name_path, "not the representor of a VF"))?;
    let vf_net = net.join(format!("device/virtfn{vf}/net"));
    first_entry(&vf_net).ok_or_else(|| {
        err(
            &vf_net,
            "its VF has no netdev on this host (bound to vfio, or not created)",
        )
    })
}

/// Finds the device and ports of `netdevs` under `sysfs`.
pub fn discover(sysfs: &Path, netdevs: &[&str]) -> Result<Discovered, DiscoverError> {
    if netdevs.is_empty() {
        return Err(DiscoverError::NoPorts);
    }
    let mut device: Option<String> = None;
    let mut eswitch_mode = None;
    for n in netdevs {
        let net = sysfs.join("class/net").join(n);
        if !net.exists() {
            return Err(DiscoverError::NoNetdev {
                netdev: n.to_string(),
                sysfs: sysfs.display().to_string(),
            });
        }
        let ib = net.join("device/infiniband");
        let dev = first_entry(&ib).ok_or_else(|| DiscoverError::NoRdma {
            netdev: n.to_string(),
            path: ib.display().to_string(),
        })?;
        match &device {
            None => device = Some(dev),
            Some(d) if *d != dev => {
                return Err(DiscoverError::TwoDevices {
                    netdev: n.to_string(),
                    device: d.clone(),
                    other: dev,
                })
            }
            Some(_) => {}
        }
        if eswitch_mode.is_none() {
            eswitch_mode = read_trimmed(&net.join("compat/devlink/mode"));
        }
    }
    let device = device.ok_or(DiscoverError::NoPorts)?;
    let mut ports = BTreeMap::new();
    let ports_dir = sysfs.join("class/infiniband").join(&device).join("ports");
    if let Ok(rd) = fs::read_dir(&ports_dir) {
        for e in rd.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(nd) = read_trimmed(&e.path().join("gid_attrs/ndevs/0")) {
                if netdevs.contains(&nd.as_str()) {
                    ports.insert(nd, p);
                }
            }
        }
    }
    Ok(Discovered {
        device,
        ports,
        eswitch_mode,
    })
}

/// The first entry of a directory, by name.
fn first_entry(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().next()
}

fn read_trimmed(p: &Path) -> Option<String> {
    fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
#[path = "tests/discover.rs"]
mod tests;

//! # mlx5: the Direct Rule backend on a real ConnectX
//!
//! The same `DrBackend` the `sim` implements, on a ConnectX-5/6 Dx/7 whose
//! eSwitch is in switchdev mode, through `rdma-core-sys`:
//!
//! - [`discover`]: representor netdevs → the RDMA device and ports
//!   (sysfs, `SYSFS_PATH`);
//! - [`cmd`]: the PRM commands sent through DEVX (flow counter bulks,
//!   capabilities), byte-exact;
//! - [`marshal`]: the memory below each FFI call (match parameters, action
//!   arrays, meter and sampler attributes, dest_array entries);
//! - [`device`]: the device list and an opened device (DEVX), with the
//!   errors a user can act on;
//! - [`backend`]: `Mlx5Backend`, the `DrBackend` on the device, every
//!   call checked first on a `sim` model in the same state (so both
//!   backends answer with the same errors).
//!
//! Built without rdma-core (no `libibverbs-dev`), only the pure parts
//! exist and [`device::open`] says why it cannot open anything.

#[cfg(not(rdma_core_missing))]
pub mod backend;
#[cfg(rdma_core_missing)]
#[path = "backend_missing.rs"]
pub mod backend;
pub mod cmd;
pub mod device;
pub mod discover;
#[cfg(not(rdma_core_missing))]
pub mod marshal;

pub use backend::{start, Mlx5Backend};
pub use device::{open, DeviceError, OpenDevice, RepPort, StartError};
pub use discover::{discover, DiscoverError, Discovered};

/// A call the model (the sim) and the device answered differently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The rdma-core call.
    pub op: &'static str,
    /// What the model said ("accepted", or the error and its errno).
    pub model: String,
    /// What the device said.
    pub device: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the sim {}, the device {}",
            self.op, self.model, self.device
        )
    }
}

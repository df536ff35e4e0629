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
//! - [`dr_dump`]: the device's own view, `mlx5dv_dump_dr_domain`
//!   parsed;
//! - [`view`]: the model held to the device's dump, object by object;
//! - `ffi`: every call the Direct Rule backend makes into rdma-core, over
//!   owned handles (an object is destroyed only by consuming its handle),
//!   so the backend's model logic holds no raw pointer and no `unsafe`;
//! - [`backend`]: `Mlx5Backend`, the `DrBackend` on the device, every
//!   call checked first on a `sim` model in the same state (so both
//!   backends answer with the same errors);
//! - [`verbs`]: the slow-path receive queue (a raw-packet QP and an
//!   extended CQ steered by NIC RX flows), which reads each packet's
//!   restore tag from its completion.
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
pub mod dr_dump;
#[cfg(not(rdma_core_missing))]
mod ffi;
#[cfg(not(rdma_core_missing))]
pub mod marshal;
#[cfg(not(rdma_core_missing))]
pub mod verbs;
pub mod view;

pub use backend::{start, Mlx5Backend};
pub use device::{open, DeviceError, OpenDevice, RepPort, StartError};
pub use discover::{discover, DiscoverError, Discovered};

/// Receive buffers (and CQ entries) of the slow-path queue by default.
pub const SLOW_PATH_DEPTH: u32 = 1024;

/// Why the queue could not be set up: the call and the errno, with what
/// to check.
#[derive(Debug, thiserror::Error)]
#[error("slow-path queue: {op} failed: {err}{hint}")]
pub struct QueueError {
    pub op: &'static str,
    pub err: std::io::Error,
    pub hint: &'static str,
}

/// A packet the queue received, as its completion describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrived<'a> {
    pub bytes: &'a [u8],
    /// The flow tag (0: a plain miss).
    pub tag: u32,
    /// reg_b: reg_c_0 as the FDB left it (the source vport's metadata).
    pub reg_b: u32,
}

/// Why the slow-path queue did not open.
#[derive(Debug, thiserror::Error)]
pub enum SlowPathError {
    #[error(
        "the slow-path queue steers by the vport metadata in reg_c_0, and the device reported \
         none for the representors (mlx5dv_query_port gave no reg_c_0: vport metadata \
         matching is off in the eSwitch, or the ports were not discovered)"
    )]
    NoMetadata,
    #[error(transparent)]
    Queue(#[from] QueueError),
}

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

//! The RDMA device list and an opened mlx5 device.
//!
//! Opening is `mlx5dv_open_device` with `MLX5DV_CONTEXT_FLAGS_DEVX`, so a
//! device or a process without DEVX (it needs CAP_NET_RAW) fails here,
//! loudly, not at the first counter. A machine with no RDMA at all answers
//! `ibv_get_device_list` with NULL and ENOSYS: that is "no device", said
//! as such.

use thiserror::Error;

use crate::discover::DiscoverError;

/// Why no device could be opened; each says what to check.
#[derive(Debug, Error)]
pub enum DeviceError {
    #[error(
        "this eswitch was built without rdma-core (libibverbs-dev was missing at build time): \
         apt-get install libibverbs-dev pkg-config, then rebuild"
    )]
    BuiltWithout,
    #[error(
        "no RDMA device on this machine ({0}): the mlx5 backend needs a ConnectX with the \
         mlx5_core and mlx5_ib drivers loaded"
    )]
    NoDevices(String),
    #[error("RDMA device {name} not found (present: {})", if .available.is_empty() { "none".to_string() } else { .available.join(", ") })]
    NotFound {
        name: String,
        available: Vec<String>,
    },
    #[error("RDMA device {0} is not an mlx5 device (mlx5dv_is_supported is false)")]
    NotMlx5(String),
    #[error("cannot open RDMA device {name} with DEVX: {err}{hint}")]
    Open {
        name: String,
        err: std::io::Error,
        hint: &'static str,
    },
    #[error(transparent)]
    Discover(#[from] DiscoverError),
}

/// A representor the backend is told of at start: its netdev, the vport
/// the config gives it, and its RDMA port when discovery found one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepPort {
    pub netdev: String,
    pub vport: offload::Vport,
    pub ib_port: Option<u32>,
}

/// Why the backend did not start on an opened device.
#[derive(Debug, Error)]
pub enum StartError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{netdev}: mlx5dv_query_port on port {port} of {device}: {err}")]
    QueryPort {
        netdev: String,
        device: String,
        port: u32,
        err: std::io::Error,
    },
    #[error("{netdev}: the config says vport {config}, the device says vport {device_vport}")]
    VportMismatch {
        netdev: String,
        config: offload::Vport,
        device_vport: offload::Vport,
    },
    #[error(
        "FDB software steering unavailable on {device} ({err}): check that the eSwitch is in \
         switchdev mode (devlink dev eswitch show), that this is the eSwitch manager (the PF, \
         not a VF), and the firmware steering mode (devlink dev param show ... name \
         flow_steering_mode: smfs)"
    )]
    Fdb {
        device: String,
        err: offload::dr::DrError,
    },
}

/// A hint for an open that failed with `errno`.
pub fn open_hint(errno: i32) -> &'static str {
    match errno {
        libc::EPERM | libc::EACCES => {
            " (DEVX needs CAP_NET_RAW: run eswitchd as root or grant it the capability)"
        }
        libc::EOPNOTSUPP => " (the firmware or kernel has no DEVX for this device)",
        libc::ENOENT | libc::ENODEV => " (its /dev/infiniband/uverbs device is missing)",
        _ => "",
    }
}

#[cfg(not(rdma_core_missing))]
mod imp {
    use std::ffi::CStr;
    use std::ptr::NonNull;

    use rdma_core_sys as sys;

    use super::{open_hint, DeviceError};

    /// The names of the RDMA devices present (empty: none).
    pub fn device_names() -> Result<Vec<String>, DeviceError> {
        let (list, n) = list()?;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `list` has `n` valid device pointers until it is
            // freed below; ibv_get_device_name returns a NUL-terminated
            // string owned by the device.
            let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(*list.add(i))) };
            v.push(name.to_string_lossy().into_owned());
        }
        // SAFETY: freed once, after its last use.
        unsafe { sys::ibv_free_device_list(list) };
        Ok(v)
    }

    /// `ibv_get_device_list`, NULL with ENOSYS (no RDMA in the kernel) or
    /// an empty list being "no devices".
    fn list() -> Result<(*mut *mut sys::ibv_device, usize), DeviceError> {
        let mut n: std::os::raw::c_int = 0;
        // SAFETY: `n` is a valid out pointer.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = std::io::Error::last_os_error();
            let why = match e.raw_os_error() {
                Some(libc::ENOSYS) => {
                    "ibv_get_device_list: ENOSYS, the kernel has no RDMA support".to_string()
                }
                _ => format!("ibv_get_device_list: {e}"),
            };
            return Err(DeviceError::NoDevices(why));
        }
        if n <= 0 {
            // SAFETY: a non-NULL list from ibv_get_device_list, freed once.
            unsafe { sys::ibv_free_device_list(list) };
            return Err(DeviceError::NoDevices(
                "ibv_get_device_list: no devices".to_string(),
            ));
        }
        Ok((list, n as usize))
    }

    /// An opened mlx5 device (closed on drop, after everything made on
    /// it, which borrows it).
    pub struct OpenDevice {
        ctx: NonNull<sys::ibv_context>,
        name: String,
    }

    // SAFETY: an ibv_context may be used from any thread; libmlx5
    // serialises what needs it (DR domains lock themselves, DEVX commands
    // are independent ioctls). The context is only closed by Drop.
    unsafe impl Send for OpenDevice {}
    // SAFETY: as above: every call through `&OpenDevice` is thread-safe in
    // libmlx5.
    unsafe impl Sync for OpenDevice {}

    impl OpenDevice {
        pub fn name(&self) -> &str {
            &self.name
        }

        /// The raw context, for the objects made on it.
        pub fn context(&self) -> *mut sys::ibv_context {
            self.ctx.as_ptr()
        }

        /// `mlx5dv_devx_general_cmd`: `input` in, `out` filled.
        pub fn general_cmd(&self, input: &[u8], out: &mut [u8]) -> std::io::Result<()> {
            // SAFETY: the context is open; `input` and `out` are valid for
            // their lengths for the duration of the call.
            let rc = unsafe {
                sys::mlx5dv_devx_general_cmd(
                    self.context(),
                    input.as_ptr().cast(),
                    input.len(),
                    out.as_mut_ptr().cast(),
                    out.len(),
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(errno_of(rc))
            }
        }

        /// `mlx5dv_query_port`: the port's vport and, when the firmware
        /// marks packets with vport metadata, the `reg_c_0` value and mask.
        pub fn query_port(&self, port: u32) -> std::io::Result<PortInfo> {
            let mut info = sys::mlx5_ib_uapi_query_port::default();
            // SAFETY: the context is open and `info` is a valid out struct
            // of the size the wrapper's header declares.
            let rc = unsafe { sys::eswitch_mlx5dv_query_port(self.context(), port, &mut info) };
            if rc != 0 {
                return Err(errno_of(rc));
            }
            let has = |f: u32| info.flags & u64::from(f) != 0;
            Ok(PortInfo {
                vport: has(sys::MLX5_IB_UAPI_QUERY_PORT_VPORT).then_some(info.vport),
                reg_c0: has(sys::MLX5_IB_UAPI_QUERY_PORT_VPORT_REG_C0)
                    .then_some((info.reg_c0.value, info.reg_c0.mask)),
            })
        }
    }

    impl Drop for OpenDevice {
        fn drop(&mut self) {
            // SAFETY: opened by `open`, closed once; every object made on
            // it borrowed it and is gone.
            unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
        }
    }

    /// What `mlx5dv_query_port` says of one port.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct PortInfo {
        pub vport: Option<u16>,
        /// `reg_c_0` (value, mask) that marks this port's packets.
        pub reg_c0: Option<(u32, u32)>,
    }

    /// The errno of a failed call: its return code (the negative errno
    /// some calls return, or the errno others return), else (NULL
    /// returned, 0, or the -1 of a call that sets `errno`, as fprintf's
    /// in `mlx5dv_dump_dr_domain`) `errno` itself.
    pub fn errno(rc: i32) -> i32 {
        match rc {
            0 | -1 => std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
            rc => rc.abs(),
        }
    }

    /// A call's return code as an error ([`errno`]).
    pub fn errno_of(rc: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno(rc))
    }

    /// Opens the RDMA device `name` with DEVX.
    pub fn open(name: &str) -> Result<OpenDevice, DeviceError> {
        let (list, n) = list()?;
        let mut found = None;
        let mut names = Vec::new();
        for i in 0..n {
            // SAFETY: `list` has `n` valid pointers until freed below.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a valid device; the name is NUL-terminated.
            let dn = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if dn == name {
                found = Some(dev);
            }
            names.push(dn);
        }
        let result = match found {
            None => Err(DeviceError::NotFound {
                name: name.to_string(),
                available: names,
            }),
            // SAFETY: a valid device of the list.
            Some(dev) if !unsafe { sys::mlx5dv_is_supported(dev) } => {
                Err(DeviceError::NotMlx5(name.to_string()))
            }
            Some(dev) => {
                let mut attr = sys::mlx5dv_context_attr {
                    flags: sys::MLX5DV_CONTEXT_FLAGS_DEVX,
                    comp_mask: 0,
                };
                // SAFETY: a valid device and attribute struct; the result
                // is checked for NULL.
                let ctx = unsafe { sys::mlx5dv_open_device(dev, &mut attr) };
                match NonNull::new(ctx) {
                    Some(ctx) => Ok(OpenDevice {
                        ctx,
                        name: name.to_string(),
                    }),
                    None => {
                        let err = std::io::Error::last_os_error();
                        let hint = open_hint(err.raw_os_error().unwrap_or(0));
                        Err(DeviceError::Open {
                            name: name.to_string(),
                            err,
                            hint,
                        })
                    }
                }
            }
        };
        // SAFETY: the list is no longer used (an opened context does not
        // need it).
        unsafe { sys::ibv_free_device_list(list) };
        result
    }
}

#[cfg(not(rdma_core_missing))]
pub use imp::{device_names, errno, errno_of, open, OpenDevice, PortInfo};

/// Without rdma-core: no device list.
#[cfg(rdma_core_missing)]
pub fn device_names() -> Result<Vec<String>, DeviceError> {
    Err(DeviceError::BuiltWithout)
}

/// Without rdma-core nothing opens.
#[cfg(rdma_core_missing)]
pub fn open(_name: &str) -> Result<OpenDevice, DeviceError> {
    Err(DeviceError::BuiltWithout)
}

/// Without rdma-core there is no device type to hold.
#[cfg(rdma_core_missing)]
pub enum OpenDevice {}

#[cfg(rdma_core_missing)]
impl OpenDevice {
    pub fn name(&self) -> &str {
        match *self {}
    }
}

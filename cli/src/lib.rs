//! The pieces the `eswitchd` and `eswitchctl` binaries are made of:
//! [`config`] (eswitch.toml), [`switch`] (the sim eSwitch in front of the
//! software pipeline), [`replay`] (`eswitchd replay`) and [`demo`] (the
//! generated workload).
#![forbid(unsafe_code)]

pub mod config;
pub mod control;
pub mod ctl;
pub mod ctl_format;
pub mod demo;
pub mod live;
pub mod replay;
pub mod switch;

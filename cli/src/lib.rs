//! The pieces the `eswitchd` and `eswitchctl` binaries are made of:
//! [`config`] (eswitch.toml), [`switch`] (the sim eSwitch in front of the
//! datapath, the slow path's switch), [`live`] (`eswitchd run`),
//! [`control`] (the control protocol, its socket and how `eswitchctl`
//! prints answers), [`replay`] (`eswitchd replay`), [`demo`] (the
//! generated workload) and [`hw`] (finding and opening a real ConnectX).
// `eswitchctl stats` is one `json!` object of many fields, past the
// macro's default recursion depth.
#![recursion_limit = "256"]
#![forbid(unsafe_code)]

pub mod config;
pub mod control;
pub mod demo;
pub mod faults;
pub mod hw;
pub mod live;
pub mod replay;
pub mod sflow;
pub mod switch;

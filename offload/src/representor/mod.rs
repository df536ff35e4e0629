//! # Representor tracking over rtnetlink
//!
//! A link is a representor when it has `IFLA_PHYS_SWITCH_ID` and
//! `IFLA_PHYS_PORT_NAME` (switchdev), or when the config maps its name to a
//! vport (emulated representors, e.g. veths). Ports are tracked by ifindex +
//! switch id + port name, never by ifname alone.
//!
//! - [`parse_port_name`]: port name → [`PortName`] → vport.
//! - [`Representors`]: the port table; [`Representors::apply`] turns link
//!   messages ([`LinkInfo`], socket-free) into [`PortEvent`]s.
//! - [`Tracker`]: the tokio task doing dump + multicast + resync on overrun.

mod netlink;
mod port_name;
mod table;
mod tracker;

pub use netlink::{link_info, link_msg};
pub use port_name::{parse_port_name, PortKind, PortName};
pub use table::{LinkInfo, LinkMsg, PortEvent, Representor, RepresentorConfig, Representors};
pub use tracker::{Tracker, TrackerHandle, TrackerOptions};

#[cfg(test)]
#[path = "tests/port_name.rs"]
mod port_name_tests;

#[cfg(test)]
#[path = "tests/table.rs"]
mod table_tests;

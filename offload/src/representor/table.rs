//! The representor table: pure state tracking fed by link messages.

use std::collections::{BTreeMap, HashMap};

use super::port_name::{parse_port_name, PortName};
use crate::Vport;

/// What the tracker needs from an `RTM_NEWLINK`/`RTM_DELLINK` message,
/// independent of netlink types (see [`super::link_info`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    pub ifindex: u32,
    pub ifname: String,
    /// `IFLA_PHYS_SWITCH_ID`.
    pub switch_id: Option<Vec<u8>>,
    /// `IFLA_PHYS_PORT_NAME`.
    pub port_name: Option<String>,
    /// `IFF_UP`.
    pub admin_up: bool,
    /// `IFLA_OPERSTATE` is up (or unknown with `IFF_LOWER_UP`).
    pub oper_up: bool,
    pub mtu: u32,
    /// `IFLA_ADDRESS` when it is 6 bytes long.
    pub mac: Option<[u8; 6]>,
}

/// A link message, as the table consumes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkMsg {
    New(LinkInfo),
    Del(LinkInfo),
}

/// Which links are representors beyond the switchdev ones: a name (ifname
/// or port name) → vport map. Names in it also override the vport derived
/// from a port name (needed for SFs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepresentorConfig {
    /// `None`: a netdev of the switch with no vport (a host-stack port),
    /// tracked by name all the same.
    pub by_name: HashMap<String, Option<Vport>>,
}

impl RepresentorConfig {
    /// A config from `(name, vport)` pairs, the vport spelled as
    /// [`Vport`]'s `FromStr` accepts (`vf0`, `pf`, `uplink`, a number).
    pub fn from_pairs<'a, I>(pairs: I) -> Result<RepresentorConfig, crate::BadVport>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut by_name = HashMap::new();
        for (name, vport) in pairs {
            by_name.insert(name.to_string(), Some(vport.parse()?));
        }
        Ok(RepresentorConfig { by_name })
    }

    /// Adds one mapping.
    pub fn with(self, name: &str, vport: Vport) -> RepresentorConfig {
        self.with_netdev(name, Some(vport))
    }

    /// Adds a netdev tracked by name, with its vport if it has one.
    pub fn with_netdev(mut self, name: &str, vport: Option<Vport>) -> RepresentorConfig {
        self.by_name.insert(name.to_string(), vport);
        self
    }
}

/// A tracked representor. Identity: ifindex + switch id + port name; the
/// ifname may change (udev renames) without changing identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Representor {
    pub ifindex: u32,
    pub ifname: String,
    /// Empty for an emulated (config-named) representor without one.
    pub switch_id: Vec<u8>,
    pub port_name: Option<String>,
    pub parsed_name: Option<PortName>,
    /// `None`: not derivable (an SF not in the config).
    pub vport: Option<Vport>,
    pub oper_up: bool,
    pub admin_up: bool,
    pub mtu: u32,
    pub mac: Option<[u8; 6]>,
}

impl Representor {
    /// An emulated (config-named) representor that is up: no switch id,
    /// no phys_port_name, MTU 1500 (veth and memory ports in the lab and
    /// the tests).
    pub fn emulated(ifindex: u32, ifname: &str, vport: Option<Vport>) -> Representor {
        Representor {
            ifindex,
            ifname: ifname.to_string(),
            switch_id: Vec::new(),
            port_name: None,
            parsed_name: None,
            vport,
            oper_up: true,
            admin_up: true,
            mtu: 1500,
            mac: None,
        }
    }

    fn same_identity(&self, other: &Representor) -> bool {
        self.ifindex == other.ifindex
            && self.switch_id == other.switch_id
            && self.port_name == other.port_name
    }
}

/// A change in the port table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortEvent {
    Added(Representor),
    Removed(Representor),
    Renamed {
        ifindex: u32,
        old: String,
        new: String,
    },
    /// Operational state went up.
    Up {
        ifindex: u32,
    },
    /// Operational state went down.
    Down {
        ifindex: u32,
    },
    MtuChanged {
        ifindex: u32,
        old: u32,
        new: u32,
    },
    MacChanged {
        ifindex: u32,
        old: Option<[u8; 6]>,
        new: Option<[u8; 6]>,
    },
}

/// The port table, keyed by ifindex.
#[derive(Clone, Debug, Default)]
pub struct Representors {
    config: RepresentorConfig,
    ports: BTreeMap<u32, Representor>,
}

impl Representors {
    pub fn new(config: RepresentorConfig) -> Representors {
        Representors {
            config,
            ports: BTreeMap::new(),
        }
    }

    pub fn get(&self, ifindex: u32) -> Option<&Representor> {
        self.ports.get(&ifindex)
    }

    /// The representor named `ifname` now.
    pub fn by_name(&self, ifname: &str) -> Option<&Representor> {
        self.ports.values().find(|r| r.ifname == ifname)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Representor> {
        self.ports.values()
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// The representor `link` describes, if it is one. A link already in the
    /// table stays a representor through renames (even when the new name is
    /// not in the config).
    fn classify(&self, link: &LinkInfo) -> Option<Representor> {
        let configured = |name: &str| self.config.by_name.get(name).copied();
        let configured_vport = |name: &str| configured(name).flatten();
        let switchdev = link.switch_id.is_some() && link.port_name.is_some();
        let known = self.ports.get(&link.ifindex);
        let by_ifname = configured(&link.ifname);
        if !switchdev && by_ifname.is_none() && known.is_none() {
            return None;
        }
        let parsed_name = link.port_name.as_deref().and_then(parse_port_name);
        let vport = by_ifname
            .flatten()
            .or_else(|| link.port_name.as_deref().and_then(configured_vport))
            .or_else(|| parsed_name.and_then(|p| p.vport()))
            .or_else(|| known.and_then(|k| k.vport));
        Some(Representor {
            ifindex: link.ifindex,
            ifname: link.ifname.clone(),
            switch_id: link.switch_id.clone().unwrap_or_default(),
            port_name: link.port_name.clone(),
            parsed_name,
            vport,
            oper_up: link.oper_up,
            admin_up: link.admin_up,
            mtu: link.mtu,
            mac: link.mac,
        })
    }

    /// Applies one link message; returns what changed.
    pub fn apply(&mut self, msg: LinkMsg) -> Vec<PortEvent> {
        match msg {
            LinkMsg::New(link) => self.upsert(&link),
            LinkMsg::Del(link) => self
                .ports
                .remove(&link.ifindex)
                .map(PortEvent::Removed)
                .into_iter()
                .collect(),
        }
    }

    fn upsert(&mut self, link: &LinkInfo) -> Vec<PortEvent> {
        let Some(new) = self.classify(link) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        let ifindex = new.ifindex;
        match self.ports.remove(&ifindex) {
            Some(old) if old.same_identity(&new) => {
                if old.ifname != new.ifname {
                    events.push(PortEvent::Renamed {
                        ifindex,
                        old: old.ifname.clone(),
                        new: new.ifname.clone(),
                    });
                }
                if old.mtu != new.mtu {
                    events.push(PortEvent::MtuChanged {
                        ifindex,
                        old: old.mtu,
                        new: new.mtu,
                    });
                }
                if old.mac != new.mac {
                    events.push(PortEvent::MacChanged {
                        ifindex,
                        old: old.mac,
                        new: new.mac,
                    });
                }
                match (old.oper_up, new.oper_up) {
                    (false, true) => events.push(PortEvent::Up { ifindex }),
                    (true, false) => events.push(PortEvent::Down { ifindex }),
                    _ => {}
                }
                let new = Representor {
                    // Keep a vport once resolved: config by the old name.
                    vport: new.vport.or(old.vport),
                    ..new
                };
                self.ports.insert(ifindex, new);
            }
            old => {
                // New, or another port reusing the ifindex.
                events.extend(old.map(PortEvent::Removed));
                events.push(PortEvent::Added(new.clone()));
                self.ports.insert(ifindex, new);
            }
        }
        events
    }

    /// Takes `name` as the representor of `vport` (a port added while
    /// running); a resync applies it to the links present.
    pub fn track(&mut self, name: &str, vport: Option<Vport>) {
        self.config.by_name.insert(name.to_string(), vport);
    }

    /// Stops taking `name` as a representor by name.
    pub fn untrack(&mut self, name: &str) {
        self.config.by_name.remove(name);
    }

    /// Replaces the table by a full dump (after an overrun or at start):
    /// links gone are removed, the others applied as `RTM_NEWLINK`.
    pub fn resync(&mut self, dump: Vec<LinkInfo>) -> Vec<PortEvent> {
        let present: std::collections::HashSet<u32> = dump.iter().map(|l| l.ifindex).collect();
        let gone: Vec<u32> = self
            .ports
            .keys()
            .copied()
            .filter(|i| !present.contains(i))
            .collect();
        let mut events: Vec<PortEvent> = gone
            .into_iter()
            .filter_map(|i| self.ports.remove(&i))
            .map(PortEvent::Removed)
            .collect();
        for link in dump {
            events.extend(self.upsert(&link));
        }
        events
    }
}

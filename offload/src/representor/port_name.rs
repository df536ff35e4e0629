//! `IFLA_PHYS_PORT_NAME` parsing: which eSwitch port a representor stands for.
//!
//! The kernel (devlink) prints port names as `p<port>` / `p<port>s<split>`
//! (physical/uplink), `pf<n>` (PCI PF), `pf<n>vf<m>` (VF), `pf<n>sf<m>` (SF),
//! each PCI flavour optionally prefixed by `c<controller>` for an external
//! host controller (BlueField). BlueField also names the host PF `pf0hpf`.
//! Kernels before 5.0 used plain numbers: `3` is VF 3.

use std::fmt;

use crate::Vport;

/// What kind of eSwitch port a port name designates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortKind {
    /// Physical port (uplink): `p0`, split `p0s1`.
    Uplink { port: u32, split: Option<u32> },
    /// PCI PF: `pf0`.
    Pf { pf: u16 },
    /// BlueField host PF: `pf0hpf`.
    HostPf { pf: u16 },
    /// PCI VF: `pf0vf3`.
    Vf { pf: u16, vf: u16 },
    /// PCI SF: `pf0sf88`. Its vport is not its number.
    Sf { pf: u16, sf: u32 },
    /// Pre-5.0 kernels: a plain number, the VF number.
    LegacyVf { vf: u16 },
}

/// A parsed `IFLA_PHYS_PORT_NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortName {
    /// `Some(n)` for a `c<n>` prefix: a port of an external host controller.
    pub controller: Option<u32>,
    pub kind: PortKind,
}

impl PortName {
    /// A port of the local controller.
    pub fn local(kind: PortKind) -> PortName {
        PortName {
            controller: None,
            kind,
        }
    }

    /// The vport number, when the name alone determines it (an SF's does
    /// not: ask the device or the config). PF = 0, VF n = n + 1, uplink =
    /// 0xffff. An external controller's PF/VFs number the same way on the
    /// eSwitch that manages them.
    pub fn vport(&self) -> Option<Vport> {
        match self.kind {
            PortKind::Uplink { .. } => Some(Vport::UPLINK),
            PortKind::Pf { .. } | PortKind::HostPf { .. } => Some(Vport::PF),
            PortKind::Vf { vf, .. } | PortKind::LegacyVf { vf } => Vport::vf(vf),
            PortKind::Sf { .. } => None,
        }
    }
}

impl fmt::Display for PortName {
    /// The kernel's spelling; `parse_port_name(&p.to_string()) == Some(p)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.controller {
            write!(f, "c{c}")?;
        }
        match self.kind {
            PortKind::Uplink { port, split: None } => write!(f, "p{port}"),
            PortKind::Uplink {
                port,
                split: Some(s),
            } => write!(f, "p{port}s{s}"),
            PortKind::Pf { pf } => write!(f, "pf{pf}"),
            PortKind::HostPf { pf } => write!(f, "pf{pf}hpf"),
            PortKind::Vf { pf, vf } => write!(f, "pf{pf}vf{vf}"),
            PortKind::Sf { pf, sf } => write!(f, "pf{pf}sf{sf}"),
            PortKind::LegacyVf { vf } => write!(f, "{vf}"),
        }
    }
}

/// Splits a leading decimal number (canonical: no sign, no leading zero
/// unless it is `0`) off `s`.
fn number<T: std::str::FromStr>(s: &str) -> Option<(T, &str)> {
    let len = s.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || (len > 1 && s.starts_with('0')) {
        return None;
    }
    let n = s.get(..len)?.parse().ok()?;
    Some((n, s.get(len..)?))
}

/// A number that is all of `s`.
fn whole<T: std::str::FromStr>(s: &str) -> Option<T> {
    match number(s)? {
        (n, "") => Some(n),
        _ => None,
    }
}

/// Parses a representor's `IFLA_PHYS_PORT_NAME`. Accepts exactly the
/// canonical spellings (what [`PortName`]'s `Display` prints back).
pub fn parse_port_name(s: &str) -> Option<PortName> {
    if let Some(vf) = whole(s) {
        return Some(PortName::local(PortKind::LegacyVf { vf }));
    }
    let (controller, rest) = match s.strip_prefix('c') {
        Some(r) => {
            let (c, r) = number::<u32>(r)?;
            (Some(c), r)
        }
        None => (None, s),
    };
    let kind = if let Some(r) = rest.strip_prefix("pf") {
        let (pf, r) = number::<u16>(r)?;
        if r.is_empty() {
            PortKind::Pf { pf }
        } else if r == "hpf" {
            PortKind::HostPf { pf }
        } else if let Some(v) = r.strip_prefix("vf") {
            PortKind::Vf { pf, vf: whole(v)? }
        } else if let Some(v) = r.strip_prefix("sf") {
            PortKind::Sf { pf, sf: whole(v)? }
        } else {
            return None;
        }
    } else if let Some(r) = rest.strip_prefix('p') {
        // Physical ports have no controller prefix.
        if controller.is_some() {
            return None;
        }
        let (port, r) = number::<u32>(r)?;
        let split = match r {
            "" => None,
            _ => Some(whole(r.strip_prefix('s')?)?),
        };
        PortKind::Uplink { port, split }
    } else {
        return None;
    };
    Some(PortName { controller, kind })
}

//! # offload: the eSwitch side
//!
//! Representor discovery, the Direct Rule object model, `fte_match_param`
//! encoding and the backends (`sim`, `mlx5`). Depends on `megaflow` only.
//! This crate grows in later issues; for now it holds the vport numbering
//! that the rest of eswitch names ports by.
#![forbid(unsafe_code)]

pub mod conformance;
pub mod ct;
pub mod dr;
pub mod host;
pub mod manager;
pub mod prm;
pub mod representor;
pub mod restore;
pub mod sim;

use std::fmt;

/// An eSwitch vport number: PF = 0, VF n = n + 1, ECPF = 0xfffe, uplink = 0xffff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vport(pub u16);

impl Vport {
    pub const PF: Vport = Vport(0);
    pub const ECPF: Vport = Vport(0xfffe);
    pub const UPLINK: Vport = Vport(0xffff);

    /// The vport of VF number `vf`, if it fits.
    pub fn vf(vf: u16) -> Option<Vport> {
        vf.checked_add(1).filter(|&v| v < Vport::ECPF.0).map(Vport)
    }
}

impl fmt::Display for Vport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Vport::UPLINK => f.write_str("uplink"),
            Vport::ECPF => f.write_str("ecpf"),
            Vport::PF => f.write_str("pf"),
            Vport(n) => write!(f, "vf{}", n - 1),
        }
    }
}

/// A vport name that [`Vport::from_str`](std::str::FromStr) does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad vport \"{0}\": expected pf, ecpf, uplink, vfN, pfNvfM or a number")]
pub struct BadVport(pub String);

impl std::str::FromStr for Vport {
    type Err = BadVport;

    /// `pf`, `ecpf`, `uplink`, `vf3`, a representor's port name (`pf0vf3`,
    /// `p0` = uplink, `pf0` = PF), or the vport number itself.
    fn from_str(s: &str) -> Result<Vport, BadVport> {
        let bad = || BadVport(s.to_string());
        let t = s.trim().to_ascii_lowercase();
        let vf_of = |n: &str| n.parse::<u16>().ok().and_then(Vport::vf).ok_or_else(bad);
        match t.as_str() {
            "pf" | "pf0" | "pf0hpf" => Ok(Vport::PF),
            "ecpf" => Ok(Vport::ECPF),
            "uplink" | "p0" => Ok(Vport::UPLINK),
            _ => {
                if let Some(n) = t.strip_prefix("pf0vf") {
                    vf_of(n)
                } else if let Some(n) = t.strip_prefix("vf") {
                    vf_of(n)
                } else {
                    t.parse::<u16>().map(Vport).map_err(|_| bad())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vf_numbering_follows_the_eswitch() {
        assert_eq!(Vport::vf(3), Some(Vport(4)));
        assert_eq!(Vport::vf(0xfffd), None);
        assert_eq!(Vport(4).to_string(), "vf3");
        assert_eq!(Vport::UPLINK.to_string(), "uplink");
    }

    #[test]
    fn vport_names_parse_and_print_back() {
        for v in [
            Vport::PF,
            Vport::ECPF,
            Vport::UPLINK,
            Vport(1),
            Vport(4),
            Vport(128),
        ] {
            assert_eq!(v.to_string().parse::<Vport>(), Ok(v), "{v}");
        }
        assert_eq!("pf0vf3".parse::<Vport>(), Ok(Vport(4)));
        assert_eq!("p0".parse::<Vport>(), Ok(Vport::UPLINK));
        assert_eq!("7".parse::<Vport>(), Ok(Vport(7)));
        let e = "vfx".parse::<Vport>().expect_err("bad");
        assert!(e.to_string().contains("\"vfx\""), "{e}");
        assert!("vf65535".parse::<Vport>().is_err());
    }
}

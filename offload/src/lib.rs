//! # offload: the eSwitch side
//!
//! Representor discovery, the Direct Rule object model, `fte_match_param`
//! encoding and the backends (`sim`, `mlx5`). Depends on `megaflow` only.
//! This crate grows in later issues; for now it holds the vport numbering
//! that the rest of eswitch names ports by.
#![forbid(unsafe_code)]

pub mod dr;
pub mod manager;
pub mod prm;
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
}

//! `fte_match_param` mask and value → megaflow [`Match`].
//!
//! The inverse of [`encode`](super::encode), and the reader of outside
//! bytes: it consumes the mask field by field like the encoder, maps each
//! device field back to its megaflow field, and refuses any mask bit it does
//! not understand, naming the PRM field (or the reserved byte). Bytes come
//! in through [`Encoded::from_bytes`](super::Encoded::from_bytes), which has
//! already checked lengths and that value bits lie inside the mask.
//!
//! Canonical forms (what encoding the result gives back exactly):
//! - a VLAN qualifier becomes the tag-presence bit *and* an exact TPID
//!   (0 for "untagged");
//! - `frag` becomes `ip_frag` under mask `FRAG_ANY`;
//! - `ip_version` becomes an exact `eth_type` (0x0800 or 0x86dd).

use megaflow::extract::{
    ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_QINQ, ETH_TYPE_VLAN, IP_PROTO_TCP, IP_PROTO_UDP,
};
use megaflow::key::{FRAG_ANY, VLAN_PRESENT};
use megaflow::{Field, FlowKey, Mask, Match};

use super::layout::{get, set, PrmField, ENCODED_LEN, FIELDS};
use super::{DecodeError, Encoded, PortMap, SourcePortMode};
use crate::Vport;

/// Decodes a device match into the megaflow match it stands for. `mode`
/// and `ports` must be those the bytes were encoded with.
pub fn decode(
    e: &Encoded,
    mode: SourcePortMode,
    ports: &dyn PortMap,
) -> Result<Match, DecodeError> {
    let mut d = Dec {
        e,
        left: e.mask,
        key: FlowKey::ZERO,
        mask: Mask::EMPTY,
    };
    d.source_port(mode, ports)?;
    d.eth_addrs();
    d.vlan(VLAN1)?;
    d.vlan(VLAN2)?;
    let ipv = d.ip_version()?;
    let proto = d.l3(ipv)?;
    d.l4(proto)?;
    d.finish()?;
    Ok(Match::new(&d.key, &d.mask))
}

/// The device fields of one VLAN tag and the key fields they map to.
struct VlanFields {
    tpid: Field,
    tci: Field,
    cvlan: PrmField,
    svlan: PrmField,
    prio: PrmField,
    cfi: PrmField,
    vid: PrmField,
}

const VLAN1: VlanFields = VlanFields {
    tpid: Field::VlanTpid,
    tci: Field::VlanTci,
    cvlan: PrmField::OuterCvlanTag,
    svlan: PrmField::OuterSvlanTag,
    prio: PrmField::OuterFirstPrio,
    cfi: PrmField::OuterFirstCfi,
    vid: PrmField::OuterFirstVid,
};

const VLAN2: VlanFields = VlanFields {
    tpid: Field::Vlan2Tpid,
    tci: Field::Vlan2Tci,
    cvlan: PrmField::MiscOuterSecondCvlanTag,
    svlan: PrmField::MiscOuterSecondSvlanTag,
    prio: PrmField::MiscOuterSecondPrio,
    cfi: PrmField::MiscOuterSecondCfi,
    vid: PrmField::MiscOuterSecondVid,
};

/// The decoder's state: the input, the mask bits not consumed yet, and the
/// key and mask being built.
struct Dec<'a> {
    e: &'a Encoded,
    left: [u8; ENCODED_LEN],
    key: FlowKey,
    mask: Mask,
}

/// Shorthand for an [`DecodeError::Invalid`] error.
fn invalid<T>(field: PrmField, reason: &'static str) -> Result<T, DecodeError> {
    Err(DecodeError::Invalid { field, reason })
}

impl Dec<'_> {
    /// Consumes a device field: its (value, mask) if any mask bit is set.
    fn take(&mut self, f: PrmField) -> Option<(u128, u128)> {
        // Every row of the table lies inside ENCODED_LEN (checked by the
        // layout tests), so the getter and setter cannot fail here.
        let m = get(&self.left, f).unwrap_or(0);
        if m == 0 {
            return None;
        }
        let _ = set(&mut self.left, f, 0);
        Some((self.e.field_value(f), m))
    }

    /// Adds value and mask bits to a megaflow field.
    fn out(&mut self, f: Field, v: u128, m: u128) {
        self.mask.set_field(f, self.mask.field(f) | m);
        self.key.set_field(f, self.key.field(f) | (v & m));
    }

    /// `misc.source_port` or `metadata_reg_c_0` → `in_port`.
    fn source_port(
        &mut self,
        mode: SourcePortMode,
        ports: &dyn PortMap,
    ) -> Result<(), DecodeError> {
        let vport = match mode {
            SourcePortMode::MiscSourcePort => {
                let f = PrmField::MiscSourcePort;
                let Some((v, m)) = self.take(f) else {
                    return Ok(());
                };
                if m != 0xffff {
                    return invalid(f, "partial source_port mask (Direct Rule: ENOTSUP)");
                }
                Vport(v as u16)
            }
            SourcePortMode::Metadata { mask, shift } => {
                let f = PrmField::Misc2MetadataRegC0;
                let Some((v, m)) = self.take(f) else {
                    return Ok(());
                };
                if m != u128::from(mask) {
                    return invalid(f, "reg_c_0 mask is not the vport metadata mask");
                }
                let Some(tag) = (v as u32).checked_shr(u32::from(shift)) else {
                    return invalid(f, "metadata shift beyond 32 bits");
                };
                ports.tag_vport(tag).ok_or(DecodeError::UnknownTag(tag))?
            }
        };
        let port = ports.port(vport).ok_or(DecodeError::UnknownVport(vport))?;
        self.out(Field::InPort, u128::from(port.0), u128::from(u32::MAX));
        Ok(())
    }

    /// `smac`, `dmac`.
    fn eth_addrs(&mut self) {
        if let Some((v, m)) = self.take(PrmField::OuterSmac) {
            self.out(Field::EthSrc, v, m);
        }
        if let Some((v, m)) = self.take(PrmField::OuterDmac) {
            self.out(Field::EthDst, v, m);
        }
    }

    /// One VLAN tag: the C/S qualifier → presence and TPID; prio, vid → TCI.
    fn vlan(&mut self, t: VlanFields) -> Result<(), DecodeError> {
        if self.take(t.cfi).is_some() {
            return invalid(
                t.cfi,
                "the flow key has no CFI bit (tag presence sits there)",
            );
        }
        let present = u128::from(VLAN_PRESENT);
        let (mut tv, mut tm) = (0u128, 0u128);
        let c = self.take(t.cvlan);
        let s = self.take(t.svlan);
        if c.is_some() || s.is_some() {
            // Either mask bit masks the whole qualifier (dr_ste_v1.c).
            let tpid = match (c.map_or(0, |x| x.0), s.map_or(0, |x| x.0)) {
                (0, 0) => 0,
                (1, 0) => ETH_TYPE_VLAN,
                (0, _) => ETH_TYPE_QINQ,
                _ => return invalid(t.svlan, "C-VLAN and S-VLAN at once"),
            };
            self.out(t.tpid, u128::from(tpid), 0xffff);
            tm |= present;
            if tpid != 0 {
                tv |= present;
            }
        }
        if let Some((v, m)) = self.take(t.prio) {
            tm |= m << 13;
            tv |= v << 13;
        }
        if let Some((v, m)) = self.take(t.vid) {
            tm |= m;
            tv |= v;
        }
        if tm != 0 {
            self.out(t.tci, tv, tm);
        }
        Ok(())
    }

    /// `ethertype` and `ip_version` → `eth_type`; returns the IP version.
    fn ip_version(&mut self) -> Result<Option<u8>, DecodeError> {
        let et = self.take(PrmField::OuterEthertype);
        let ipv = match self.take(PrmField::OuterIpVersion) {
            None => None,
            Some((v, m)) => {
                let f = PrmField::OuterIpVersion;
                if m != 4 && m != 6 {
                    return invalid(f, "mask must be 4 or 6 (Direct Rule)");
                }
                if v != m {
                    return invalid(f, "value must equal the mask (Direct Rule)");
                }
                Some(m as u8)
            }
        };
        let ty = |ver: u8| {
            u128::from(if ver == 4 {
                ETH_TYPE_IPV4
            } else {
                ETH_TYPE_IPV6
            })
        };
        match (et, ipv) {
            (Some((v, m)), Some(ver)) => {
                if m != 0xffff || v != ty(ver) {
                    return invalid(PrmField::OuterEthertype, "contradicts ip_version");
                }
                self.out(Field::EthType, v, m);
            }
            (Some((v, m)), None) => self.out(Field::EthType, v, m),
            (None, Some(ver)) => self.out(Field::EthType, ty(ver), 0xffff),
            (None, None) => {}
        }
        Ok(ipv)
    }

    /// Checks that an L3/L4 field comes with an IP version: Direct Rule
    /// consumes none without it.
    fn need_ip(f: PrmField, ipv: Option<u8>) -> Result<u8, DecodeError> {
        match ipv {
            Some(v) => Ok(v),
            None => invalid(f, "L3/L4 field without ip_version in the mask"),
        }
    }

    /// L3 fields; returns the exact IP protocol, if any.
    fn l3(&mut self, ipv: Option<u8>) -> Result<Option<u8>, DecodeError> {
        let mut proto = None;
        if let Some((v, m)) = self.take(PrmField::OuterIpProtocol) {
            Self::need_ip(PrmField::OuterIpProtocol, ipv)?;
            if m == 0xff {
                proto = Some(v as u8);
            }
            self.out(Field::IpProto, v, m);
        }
        for (f, dst) in [
            (PrmField::OuterIpDscp, Field::IpDscp),
            (PrmField::OuterIpEcn, Field::IpEcn),
            (PrmField::OuterIpTtlHoplimit, Field::IpTtl),
        ] {
            if let Some((v, m)) = self.take(f) {
                Self::need_ip(f, ipv)?;
                self.out(dst, v, m);
            }
        }
        if let Some((v, _)) = self.take(PrmField::OuterFrag) {
            Self::need_ip(PrmField::OuterFrag, ipv)?;
            self.out(Field::IpFrag, v, u128::from(FRAG_ANY));
        }
        for (f, v4, v6) in [
            (PrmField::OuterSrcIp, Field::Ipv4Src, Field::Ipv6Src),
            (PrmField::OuterDstIp, Field::Ipv4Dst, Field::Ipv6Dst),
        ] {
            if let Some((v, m)) = self.take(f) {
                if Self::need_ip(f, ipv)? == 4 {
                    if m >> 32 != 0 {
                        return invalid(f, "IPv4 address with mask bits above the last 32");
                    }
                    self.out(v4, v, m);
                } else {
                    self.out(v6, v, m);
                }
            }
        }
        if let Some((v, m)) = self.take(PrmField::MiscOuterIpv6FlowLabel) {
            let f = PrmField::MiscOuterIpv6FlowLabel;
            if Self::need_ip(f, ipv)? != 6 {
                return invalid(f, "flow label without ip_version 6");
            }
            self.out(Field::Ipv6Label, v, m);
        }
        Ok(proto)
    }

    /// TCP and UDP ports (each needs its exact `ip_protocol`), TCP flags.
    fn l4(&mut self, proto: Option<u8>) -> Result<(), DecodeError> {
        for (f, want, dst) in [
            (PrmField::OuterTcpSport, IP_PROTO_TCP, Field::TpSrc),
            (PrmField::OuterTcpDport, IP_PROTO_TCP, Field::TpDst),
            (PrmField::OuterUdpSport, IP_PROTO_UDP, Field::TpSrc),
            (PrmField::OuterUdpDport, IP_PROTO_UDP, Field::TpDst),
            (PrmField::OuterTcpFlags, IP_PROTO_TCP, Field::TcpFlags),
        ] {
            if let Some((v, m)) = self.take(f) {
                if proto != Some(want) {
                    return invalid(f, "needs its exact ip_protocol (6 for TCP, 17 for UDP)");
                }
                self.out(dst, v, m);
            }
        }
        Ok(())
    }

    /// Refuses any mask bit left: a PRM field with no megaflow counterpart,
    /// or a reserved bit.
    fn finish(&self) -> Result<(), DecodeError> {
        if self.left.iter().all(|&b| b == 0) {
            return Ok(());
        }
        for d in FIELDS {
            if get(&self.left, d.field).unwrap_or(0) != 0 {
                return Err(DecodeError::UnsupportedField(d.field));
            }
        }
        let byte = self.left.iter().position(|&b| b != 0).unwrap_or(0);
        Err(DecodeError::ReservedBits { byte })
    }
}

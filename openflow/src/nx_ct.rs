//! Nicira's connection tracking actions, as Open vSwitch encodes them:
//! `NXAST_CT` (35) with its nested actions, `NXAST_NAT` (36) and
//! `NXAST_CT_CLEAR` (43).
//!
//! ```text
//! NXAST_CT:  type 0xffff, len, vendor 0x2320, subtype 35,
//!            flags(2) zone_src(4) zone_imm|zone_ofs_nbits(2)
//!            recirc_table(1) pad(3) alg(2), then actions (len - 24 bytes)
//! NXAST_NAT: type 0xffff, len, vendor, subtype 36, pad(2) flags(2)
//!            range_present(2), then the present ones in order:
//!            ipv4 min, ipv4 max (4 each), ipv6 min, ipv6 max (16 each),
//!            proto min, proto max (2 each), zero padding to 8
//! NXAST_CT_CLEAR: type, len 16, vendor, subtype 43, pad(6)
//! ```

use crate::action::Action;
use crate::error::{OfpError, ParseError};
use crate::wire::{Put, Reader};

pub const CT: u16 = 35;
pub const NAT: u16 = 36;
pub const CT_CLEAR: u16 = 43;

/// `NX_CT_F_*`.
pub const CT_F_COMMIT: u16 = 1 << 0;
pub const CT_F_FORCE: u16 = 1 << 1;
/// `recirc_table` when there is none.
pub const CT_RECIRC_NONE: u8 = 0xff;

/// `NX_NAT_F_*`.
pub const NAT_F_SRC: u16 = 1 << 0;
pub const NAT_F_DST: u16 = 1 << 1;
pub const NAT_F_PERSISTENT: u16 = 1 << 2;
pub const NAT_F_PROTO_HASH: u16 = 1 << 3;
pub const NAT_F_PROTO_RANDOM: u16 = 1 << 4;
const NAT_F_MASK: u16 = 0x1f;

const RANGE_IPV4_MIN: u16 = 1 << 0;
const RANGE_IPV4_MAX: u16 = 1 << 1;
const RANGE_IPV6_MIN: u16 = 1 << 2;
const RANGE_IPV6_MAX: u16 = 1 << 3;
const RANGE_PROTO_MIN: u16 = 1 << 4;
const RANGE_PROTO_MAX: u16 = 1 << 5;

/// `NXAST_CT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NxCt {
    pub flags: u16,
    /// The NXM header of the zone's field; 0: `zone` is the zone itself.
    pub zone_src: u32,
    /// The zone, or (with `zone_src`) the field's `ofs << 6 | (n_bits - 1)`.
    pub zone: u16,
    pub recirc_table: u8,
    pub alg: u16,
    /// Nested actions (`nat`, and set-fields into `ct_mark`/`ct_label`).
    pub actions: Vec<Action>,
}

/// `NXAST_NAT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NxNat {
    pub flags: u16,
    pub ipv4_min: Option<[u8; 4]>,
    pub ipv4_max: Option<[u8; 4]>,
    pub ipv6_min: Option<[u8; 16]>,
    pub ipv6_max: Option<[u8; 16]>,
    pub proto_min: Option<u16>,
    pub proto_max: Option<u16>,
}

fn bad(code: u16, detail: String) -> ParseError {
    ParseError::Invalid {
        what: "action",
        detail,
        error: OfpError::new(2, code),
    }
}

/// OFPBAC_BAD_LEN.
const BAD_LEN: u16 = 1;
/// OFPBAC_BAD_ARGUMENT.
const BAD_ARGUMENT: u16 = 5;

/// Parses an `NXAST_CT` body (after the subtype) of an action `len` long.
pub(crate) fn parse_ct(b: &mut Reader<'_>, len: usize) -> Result<Action, ParseError> {
    if len < 24 {
        return Err(bad(BAD_LEN, format!("ct: length {len}, at least 24")));
    }
    let flags = b.u16("ct.flags")?;
    let zone_src = b.u32("ct.zone_src")?;
    let zone = b.u16("ct.zone")?;
    let recirc_table = b.u8("ct.recirc_table")?;
    b.skip(3, "ct.pad")?;
    let alg = b.u16("ct.alg")?;
    if flags & CT_F_FORCE != 0 && flags & CT_F_COMMIT == 0 {
        return Err(bad(BAD_ARGUMENT, "ct: force without commit".into()));
    }
    let mut actions = Vec::new();
    while !b.is_empty() {
        actions.push(Action::parse(b)?);
    }
    Ok(Action::NxCt(Box::new(NxCt {
        flags,
        zone_src,
        zone,
        recirc_table,
        alg,
        actions,
    })))
}

/// Parses an `NXAST_NAT` body (after the subtype).
pub(crate) fn parse_nat(b: &mut Reader<'_>) -> Result<Action, ParseError> {
    b.skip(2, "nat.pad")?;
    let flags = b.u16("nat.flags")?;
    let present = b.u16("nat.range_present")?;
    if flags & !NAT_F_MASK != 0
        || (flags & NAT_F_SRC != 0 && flags & NAT_F_DST != 0)
        || (flags & NAT_F_PROTO_HASH != 0 && flags & NAT_F_PROTO_RANDOM != 0)
    {
        return Err(bad(BAD_ARGUMENT, format!("nat: flags {flags:#x}")));
    }
    let v4 = present & (RANGE_IPV4_MIN | RANGE_IPV4_MAX) != 0;
    let v6 = present & (RANGE_IPV6_MIN | RANGE_IPV6_MAX) != 0;
    if (v4 && v6) || present & !0x3f != 0 {
        return Err(bad(
            BAD_ARGUMENT,
            format!("nat: range_present {present:#x}"),
        ));
    }
    let short = |_| {
        bad(
            BAD_LEN,
            format!("nat: range_present {present:#x} runs past the action"),
        )
    };
    let mut n = NxNat {
        flags,
        ..NxNat::default()
    };
    if present & RANGE_IPV4_MIN != 0 {
        n.ipv4_min = Some(b.array("nat.ipv4_min").map_err(short)?);
    }
    if present & RANGE_IPV4_MAX != 0 {
        n.ipv4_max = Some(b.array("nat.ipv4_max").map_err(short)?);
    }
    if present & RANGE_IPV6_MIN != 0 {
        n.ipv6_min = Some(b.array("nat.ipv6_min").map_err(short)?);
    }
    if present & RANGE_IPV6_MAX != 0 {
        n.ipv6_max = Some(b.array("nat.ipv6_max").map_err(short)?);
    }
    if present & RANGE_PROTO_MIN != 0 {
        n.proto_min = Some(b.u16("nat.proto_min").map_err(short)?);
    }
    if present & RANGE_PROTO_MAX != 0 {
        n.proto_max = Some(b.u16("nat.proto_max").map_err(short)?);
    }
    if b.rest().iter().any(|&x| x != 0) || b.rest().len() >= 8 {
        return Err(bad(BAD_LEN, "nat: bytes after the range".into()));
    }
    Ok(Action::NxNat(n))
}

/// Writes an `NXAST_CT` body after the subtype (the caller pads and sets
/// the length).
pub(crate) fn emit_ct(ct: &NxCt, out: &mut Vec<u8>) {
    out.put_u16(ct.flags);
    out.put_u32(ct.zone_src);
    out.put_u16(ct.zone);
    out.put_u8(ct.recirc_table);
    out.put_zeros(3);
    out.put_u16(ct.alg);
    for a in &ct.actions {
        a.emit(out);
    }
}

/// Writes an `NXAST_NAT` body after the subtype.
pub(crate) fn emit_nat(n: &NxNat, out: &mut Vec<u8>) {
    out.put_zeros(2);
    out.put_u16(n.flags);
    let mut present = 0;
    for (on, bit) in [
        (n.ipv4_min.is_some(), RANGE_IPV4_MIN),
        (n.ipv4_max.is_some(), RANGE_IPV4_MAX),
        (n.ipv6_min.is_some(), RANGE_IPV6_MIN),
        (n.ipv6_max.is_some(), RANGE_IPV6_MAX),
        (n.proto_min.is_some(), RANGE_PROTO_MIN),
        (n.proto_max.is_some(), RANGE_PROTO_MAX),
    ] {
        if on {
            present |= bit;
        }
    }
    out.put_u16(present);
    for a in n.ipv4_min.iter().chain(&n.ipv4_max) {
        out.extend_from_slice(a);
    }
    for a in n.ipv6_min.iter().chain(&n.ipv6_max) {
        out.extend_from_slice(a);
    }
    for p in n.proto_min.iter().chain(&n.proto_max) {
        out.put_u16(*p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(a: &Action) -> Vec<u8> {
        let mut out = Vec::new();
        a.emit(&mut out);
        let back = Action::parse(&mut Reader::new(&out)).expect("parses back");
        assert_eq!(&back, a);
        out
    }

    #[test]
    fn ct_with_nat_encodes_as_open_vswitch() {
        // `ct(commit,zone=5,table=1,nat(src=10.0.0.1-10.0.0.2:1000-2000))`
        // as ovs-ofctl 3.1 sends it (-O OpenFlow13).
        let a = Action::NxCt(Box::new(NxCt {
            flags: CT_F_COMMIT,
            zone_src: 0,
            zone: 5,
            recirc_table: 1,
            alg: 0,
            actions: vec![Action::NxNat(NxNat {
                flags: NAT_F_SRC,
                ipv4_min: Some([10, 0, 0, 1]),
                ipv4_max: Some([10, 0, 0, 2]),
                proto_min: Some(1000),
                proto_max: Some(2000),
                ..NxNat::default()
            })],
        }));
        let out = round_trip(&a);
        let want: Vec<u8> = [
            // NXAST_CT, 56 bytes: 24 of its own, then the nested NAT.
            &[0xff, 0xff, 0x00, 0x38, 0x00, 0x00, 0x23, 0x20, 0x00, 0x23][..],
            &[
                0x00, 0x01, 0, 0, 0, 0, 0x00, 0x05, 0x01, 0, 0, 0, 0x00, 0x00,
            ],
            // NXAST_NAT, 16 + 12 bytes of range, padded to 32.
            &[0xff, 0xff, 0x00, 0x20, 0x00, 0x00, 0x23, 0x20, 0x00, 0x24],
            &[0, 0, 0x00, 0x01, 0x00, 0x33, 10, 0, 0, 1, 10, 0, 0, 2],
            &[0x03, 0xe8, 0x07, 0xd0, 0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(out, want);
        let mut clear = Vec::new();
        Action::NxCtClear.emit(&mut clear);
        assert_eq!(
            clear,
            [0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, 43, 0, 0, 0, 0, 0, 0]
        );
        round_trip(&Action::NxCtClear);
    }

    #[test]
    fn bad_ct_and_nat_are_refused_with_bad_argument() {
        let mut out = Vec::new();
        Action::NxCt(Box::new(NxCt {
            flags: CT_F_FORCE,
            zone_src: 0,
            zone: 0,
            recirc_table: CT_RECIRC_NONE,
            alg: 0,
            actions: vec![],
        }))
        .emit(&mut out);
        let e = Action::parse(&mut Reader::new(&out)).unwrap_err();
        assert!(matches!(e, ParseError::Invalid { error, .. } if error == OfpError::new(2, 5)));
        let mut out = Vec::new();
        Action::NxNat(NxNat {
            flags: NAT_F_SRC | NAT_F_DST,
            ..NxNat::default()
        })
        .emit(&mut out);
        assert!(Action::parse(&mut Reader::new(&out)).is_err());
        // A range running past the action.
        let mut out = Vec::new();
        Action::NxNat(NxNat::default()).emit(&mut out);
        out[15] = 0x3f;
        assert!(Action::parse(&mut Reader::new(&out)).is_err());
    }
}

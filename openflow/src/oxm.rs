//! OXM: the type-length-value match fields of `ofp_match` and of
//! SET_FIELD, in the OpenFlow basic class and Nicira's classes (the
//! registers `ovs-ofctl` names `reg0`..`reg15`).
//!
//! An OXM header is 32 bits: class (16), field (7), has-mask (1), length
//! (8, of the payload: the value, then the mask when there is one).

use crate::error::{OfpError, ParseError};
use crate::wire::{Put, Reader};

/// `OFPXMC_OPENFLOW_BASIC`.
pub const CLASS_BASIC: u16 = 0x8000;
/// `OFPXMC_NXM_0` and `OFPXMC_NXM_1` (Nicira; registers are in NXM_1).
pub const CLASS_NXM0: u16 = 0x0000;
pub const CLASS_NXM1: u16 = 0x0001;
/// `OFPXMC_EXPERIMENTER` with the ONF's experimenter id
/// ([`ONF_EXPERIMENTER`]), the one experimenter this codec knows: its
/// fields carry the id after the header (counted in the length), which
/// [`Oxm::parse`] checks and [`Oxm::emit`] writes. `ovs-ofctl` sends
/// `tcp_flags` so in OpenFlow 1.3 (`ONFOXM_ET_TCP_FLAGS`).
pub const CLASS_ONF: u16 = 0xffff;
/// The ONF's experimenter id (`ONF_EXPERIMENTER_ID`, "ONF\0").
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;

/// `OFPMT_OXM`.
pub const MATCH_TYPE_OXM: u16 = 1;

/// OpenFlow basic fields: (number, name, payload bytes without mask,
/// whether the spec allows a mask).
pub const BASIC_FIELDS: &[(u8, &str, usize, bool)] = &[
    (0, "IN_PORT", 4, false),
    (1, "IN_PHY_PORT", 4, false),
    (2, "METADATA", 8, true),
    (3, "ETH_DST", 6, true),
    (4, "ETH_SRC", 6, true),
    (5, "ETH_TYPE", 2, false),
    (6, "VLAN_VID", 2, true),
    (7, "VLAN_PCP", 1, false),
    (8, "IP_DSCP", 1, false),
    (9, "IP_ECN", 1, false),
    (10, "IP_PROTO", 1, false),
    (11, "IPV4_SRC", 4, true),
    (12, "IPV4_DST", 4, true),
    // The spec allows no mask on the L4 ports; Open vSwitch takes one (a
    // port range written as value/mask), and so does this switch.
    (13, "TCP_SRC", 2, true),
    (14, "TCP_DST", 2, true),
    (15, "UDP_SRC", 2, true),
    (16, "UDP_DST", 2, true),
    (17, "SCTP_SRC", 2, true),
    (18, "SCTP_DST", 2, true),
    (19, "ICMPV4_TYPE", 1, false),
    (20, "ICMPV4_CODE", 1, false),
    (21, "ARP_OP", 2, false),
    (22, "ARP_SPA", 4, true),
    (23, "ARP_TPA", 4, true),
    (24, "ARP_SHA", 6, true),
    (25, "ARP_THA", 6, true),
    (26, "IPV6_SRC", 16, true),
    (27, "IPV6_DST", 16, true),
    (28, "IPV6_FLABEL", 4, true),
    (29, "ICMPV6_TYPE", 1, false),
    (30, "ICMPV6_CODE", 1, false),
    (31, "IPV6_ND_TARGET", 16, false),
    (32, "IPV6_ND_SLL", 6, false),
    (33, "IPV6_ND_TLL", 6, false),
    (34, "MPLS_LABEL", 4, false),
    (35, "MPLS_TC", 1, false),
    (36, "MPLS_BOS", 1, false),
    (37, "PBB_ISID", 3, true),
    (38, "TUNNEL_ID", 8, true),
    (39, "IPV6_EXTHDR", 2, true),
    // 1.5's own tcp_flags (ONF's experimenter field in 1.3).
    (42, "TCP_FLAGS", 2, true),
    // OpenFlow 1.5's (namespace, type); ovs-ofctl sends it in 1.3 too,
    // for a match it normalised (a field dropped for its prerequisite).
    (44, "PACKET_TYPE", 4, false),
];

/// The ONF experimenter fields of OpenFlow 1.3 (extension 1.3.x of the
/// 1.4 ones): (number, name, bytes, maskable).
pub const ONF_FIELDS: &[(u8, &str, usize, bool)] = &[(42, "ONFOXM_ET_TCP_FLAGS", 2, true)];

/// Basic field numbers by name.
pub mod ofb {
    pub const IN_PORT: u8 = 0;
    pub const METADATA: u8 = 2;
    pub const ETH_DST: u8 = 3;
    pub const ETH_SRC: u8 = 4;
    pub const ETH_TYPE: u8 = 5;
    pub const VLAN_VID: u8 = 6;
    pub const VLAN_PCP: u8 = 7;
    pub const IP_DSCP: u8 = 8;
    pub const IP_ECN: u8 = 9;
    pub const IP_PROTO: u8 = 10;
    pub const IPV4_SRC: u8 = 11;
    pub const IPV4_DST: u8 = 12;
    pub const TCP_SRC: u8 = 13;
    pub const TCP_DST: u8 = 14;
    pub const UDP_SRC: u8 = 15;
    pub const UDP_DST: u8 = 16;
    pub const SCTP_SRC: u8 = 17;
    pub const SCTP_DST: u8 = 18;
    pub const ICMPV4_TYPE: u8 = 19;
    pub const ICMPV4_CODE: u8 = 20;
    pub const ARP_OP: u8 = 21;
    pub const ARP_SPA: u8 = 22;
    pub const ARP_TPA: u8 = 23;
    pub const ARP_SHA: u8 = 24;
    pub const ARP_THA: u8 = 25;
    pub const IPV6_SRC: u8 = 26;
    pub const IPV6_DST: u8 = 27;
    pub const IPV6_FLABEL: u8 = 28;
    pub const ICMPV6_TYPE: u8 = 29;
    pub const ICMPV6_CODE: u8 = 30;
    pub const IPV6_ND_TARGET: u8 = 31;
    pub const IPV6_ND_SLL: u8 = 32;
    pub const IPV6_ND_TLL: u8 = 33;
    pub const TUNNEL_ID: u8 = 38;
    pub const PACKET_TYPE: u8 = 44;
}

/// `OFPVID_PRESENT`: VLAN_VID's "a tag is present" bit.
pub const VID_PRESENT: u16 = 0x1000;

/// Nicira registers: NXM_1 fields 0..15, 4 bytes, maskable.
pub const NX_REGS: u8 = 16;
/// `NXM_NX_TUN_METADATA0`'s field number; `TUN_METADATA<n>` is this + n.
pub const NX_TUN_METADATA0: u8 = 40;
/// `tun_metadata0` .. `tun_metadata63`.
pub const NX_TUN_METADATA_FIELDS: u8 = 64;
/// The widest value of a variable-length field (a Geneve option body).
pub const VARIABLE_MAX: usize = 124;

/// The `n` of `NXM_NX_TUN_METADATA<n>`, for a variable-length field.
pub fn tun_metadata_index(class: u16, field: u8) -> Option<u8> {
    (class == CLASS_NXM1
        && (NX_TUN_METADATA0..NX_TUN_METADATA0 + NX_TUN_METADATA_FIELDS).contains(&field))
    .then(|| field - NX_TUN_METADATA0)
}

/// The Nicira NXM_0 fields (`NXM_OF_*`, what `move` names with its
/// version-0 headers): (number, name, bytes, maskable).
pub const NXM0_FIELDS: &[(u8, &str, usize, bool)] = &[
    (0, "NXM_OF_IN_PORT", 2, false),
    (1, "NXM_OF_ETH_DST", 6, true),
    (2, "NXM_OF_ETH_SRC", 6, true),
    (3, "NXM_OF_ETH_TYPE", 2, false),
    (4, "NXM_OF_VLAN_TCI", 2, true),
    (5, "NXM_OF_IP_TOS", 1, false),
    (6, "NXM_OF_IP_PROTO", 1, false),
    (7, "NXM_OF_IP_SRC", 4, true),
    (8, "NXM_OF_IP_DST", 4, true),
    (9, "NXM_OF_TCP_SRC", 2, true),
    (10, "NXM_OF_TCP_DST", 2, true),
    (11, "NXM_OF_UDP_SRC", 2, true),
    (12, "NXM_OF_UDP_DST", 2, true),
    (13, "NXM_OF_ICMP_TYPE", 1, false),
    (14, "NXM_OF_ICMP_CODE", 1, false),
    (15, "NXM_OF_ARP_OP", 2, false),
    (16, "NXM_OF_ARP_SPA", 4, true),
    (17, "NXM_OF_ARP_TPA", 4, true),
];

/// NXM_1 fields past the registers (`NXM_NX_*`).
pub const NXM1_FIELDS: &[(u8, &str, usize, bool)] = &[
    (16, "NXM_NX_TUN_ID", 8, true),
    (17, "NXM_NX_ARP_SHA", 6, true),
    (18, "NXM_NX_ARP_THA", 6, true),
    (19, "NXM_NX_IPV6_SRC", 16, true),
    (20, "NXM_NX_IPV6_DST", 16, true),
    (21, "NXM_NX_ICMPV6_TYPE", 1, false),
    (22, "NXM_NX_ICMPV6_CODE", 1, false),
    (23, "NXM_NX_ND_TARGET", 16, true),
    (24, "NXM_NX_ND_SLL", 6, true),
    (25, "NXM_NX_ND_TLL", 6, true),
    (26, "NXM_NX_IP_FRAG", 1, true),
    (27, "NXM_NX_IPV6_LABEL", 4, true),
    (28, "NXM_NX_IP_ECN", 1, false),
    (29, "NXM_NX_IP_TTL", 1, false),
    (31, "NXM_NX_TUN_IPV4_SRC", 4, true),
    (32, "NXM_NX_TUN_IPV4_DST", 4, true),
    (33, "NXM_NX_PKT_MARK", 4, true),
    (34, "NXM_NX_TCP_FLAGS", 2, true),
    (35, "NXM_NX_DP_HASH", 4, true),
    (36, "NXM_NX_RECIRC_ID", 4, false),
    (37, "NXM_NX_CONJ_ID", 4, false),
    (104, "NXM_NX_TUN_FLAGS", 2, true),
    (105, "NXM_NX_CT_STATE", 4, true),
    (106, "NXM_NX_CT_ZONE", 2, false),
    (107, "NXM_NX_CT_MARK", 4, true),
    (108, "NXM_NX_CT_LABEL", 16, true),
    (109, "NXM_NX_TUN_IPV6_SRC", 16, true),
    (110, "NXM_NX_TUN_IPV6_DST", 16, true),
    (119, "NXM_NX_CT_NW_PROTO", 1, false),
    (120, "NXM_NX_CT_NW_SRC", 4, true),
    (121, "NXM_NX_CT_NW_DST", 4, true),
    (122, "NXM_NX_CT_IPV6_SRC", 16, true),
    (123, "NXM_NX_CT_IPV6_DST", 16, true),
    (124, "NXM_NX_CT_TP_SRC", 2, true),
    (125, "NXM_NX_CT_TP_DST", 2, true),
];

fn find(
    table: &[(u8, &'static str, usize, bool)],
    field: u8,
) -> Option<(&'static str, usize, bool)> {
    table
        .iter()
        .find(|(n, ..)| *n == field)
        .map(|&(_, name, len, m)| (name, len, m))
}

/// One field: its class and number, the value and maybe a mask (both the
/// field's width in bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Oxm {
    pub class: u16,
    pub field: u8,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

/// A field's width and whether it may be masked, if this codec knows it.
pub fn field_spec(class: u16, field: u8) -> Option<(usize, bool)> {
    field_info(class, field).map(|(_, len, m)| (len, m))
}

/// A known field's name, width and maskability.
pub fn field_info(class: u16, field: u8) -> Option<(String, usize, bool)> {
    let named = |t, f| find(t, f).map(|(n, l, m)| (n.to_string(), l, m));
    match class {
        CLASS_BASIC => named(BASIC_FIELDS, field),
        CLASS_NXM0 => named(NXM0_FIELDS, field),
        CLASS_NXM1 if field < NX_REGS => Some((format!("NXM_NX_REG{field}"), 4, true)),
        crate::regs::CLASS_PKT_REGS if field < 8 => {
            Some((format!("OXM_OF_PKT_REG{field}"), 8, true))
        }
        CLASS_NXM1 if crate::regs::wide(class, field).is_some() => Some((
            format!("NXM_NX_XXREG{}", field - crate::regs::NX_XXREG0),
            16,
            true,
        )),
        // Variable length: the widest is given.
        CLASS_NXM1 if tun_metadata_index(class, field).is_some() => Some((
            format!("NXM_NX_TUN_METADATA{}", field - NX_TUN_METADATA0),
            VARIABLE_MAX,
            true,
        )),
        CLASS_NXM1 => named(NXM1_FIELDS, field),
        CLASS_ONF => named(ONF_FIELDS, field),
        _ => None,
    }
}

fn bad_match(code: u16, what: &'static str, detail: String) -> ParseError {
    ParseError::Invalid {
        what,
        detail,
        error: OfpError::new(4, code),
    }
}

impl Oxm {
    /// A basic field, exact.
    pub fn basic(field: u8, value: &[u8]) -> Oxm {
        Oxm {
            class: CLASS_BASIC,
            field,
            value: value.to_vec(),
            mask: None,
        }
    }

    /// A field's name (`ETH_DST`, `NXM_NX_REG3`), or its numbers.
    pub fn name(&self) -> String {
        field_info(self.class, self.field).map_or_else(
            || format!("class {:#06x} field {}", self.class, self.field),
            |(n, ..)| n,
        )
    }

    /// Bytes of the experimenter id after the header.
    fn id_len(&self) -> usize {
        if self.class == CLASS_ONF {
            4
        } else {
            0
        }
    }

    /// Bytes on the wire: header, experimenter id, value and mask.
    pub fn wire_len(&self) -> usize {
        4 + self.id_len() + self.value.len() + self.mask.as_ref().map_or(0, Vec::len)
    }

    /// The 32-bit header.
    pub fn header(&self) -> u32 {
        let len = self.wire_len() - 4;
        (u32::from(self.class) << 16)
            | (u32::from(self.field) << 9)
            | (u32::from(self.mask.is_some()) << 8)
            | (len as u32 & 0xff)
    }

    /// One OXM; `what` names where (match or set_field) for errors.
    /// Unknown classes and fields are `BAD_FIELD`, a mask where the spec
    /// allows none `BAD_MASK`, a wrong length `BAD_LEN`, a value with bits
    /// outside its mask `BAD_WILDCARDS`.
    pub fn parse(r: &mut Reader<'_>, what: &'static str) -> Result<Oxm, ParseError> {
        let h = r.u32("oxm header")?;
        let class = (h >> 16) as u16;
        let field = ((h >> 9) & 0x7f) as u8;
        let has_mask = h & 0x100 != 0;
        let len = (h & 0xff) as usize;
        let mut payload = r.bytes(len, "oxm payload")?;
        if class == CLASS_ONF {
            let id = payload
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if id != Some(ONF_EXPERIMENTER) {
                return Err(bad_match(
                    6,
                    what,
                    match id {
                        Some(id) => format!("experimenter {id:#010x} field {field}: only the ONF's ({ONF_EXPERIMENTER:#010x}) fields are known"),
                        None => format!("experimenter field {field}: payload of {len} bytes has no experimenter id"),
                    },
                ));
            }
            payload = &payload[4..];
        }
        let len = payload.len();
        let (width, maskable) = field_spec(class, field).ok_or_else(|| {
            bad_match(
                6,
                what,
                format!("class {class:#06x} field {field} is not a field this switch matches"),
            )
        })?;
        // A variable-length field's value is as long as the payload says
        // (half of it when masked).
        let width = match tun_metadata_index(class, field) {
            Some(_) if has_mask && len % 2 == 0 => (len / 2).clamp(1, width),
            Some(_) if !has_mask => len.clamp(1, width),
            _ => width,
        };
        let want = if has_mask { 2 * width } else { width };
        if len != want {
            return Err(bad_match(
                1,
                what,
                format!(
                    "class {class:#06x} field {field}: payload of {len} bytes, expected {want}"
                ),
            ));
        }
        if has_mask && !maskable {
            return Err(bad_match(
                8,
                what,
                format!("class {class:#06x} field {field} cannot be masked"),
            ));
        }
        let (value, mask) = if has_mask {
            let (v, m) = payload.split_at(width);
            if v.iter().zip(m).any(|(v, m)| v & !m != 0) {
                return Err(bad_match(
                    5,
                    what,
                    format!("class {class:#06x} field {field}: value bits outside the mask"),
                ));
            }
            (v.to_vec(), Some(m.to_vec()))
        } else {
            (payload.to_vec(), None)
        };
        Ok(Oxm {
            class,
            field,
            value,
            mask,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.header());
        if self.class == CLASS_ONF {
            out.put_u32(ONF_EXPERIMENTER);
        }
        out.extend_from_slice(&self.value);
        if let Some(m) = &self.mask {
            out.extend_from_slice(m);
        }
    }
}

/// An `ofp_match` of type OXM: its fields in order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OxmMatch {
    pub fields: Vec<Oxm>,
}

impl OxmMatch {
    /// Parses `ofp_match` with its padding. A repeated field is
    /// `DUP_FIELD`; a type other than OXM is `BAD_TYPE`.
    pub fn parse(r: &mut Reader<'_>) -> Result<OxmMatch, ParseError> {
        let ty = r.u16("match.type")?;
        let len = usize::from(r.u16("match.length")?);
        if ty != MATCH_TYPE_OXM {
            return Err(bad_match(
                0,
                "match",
                format!("type {ty}: only OXM (1) is OpenFlow 1.3's"),
            ));
        }
        if len < 4 {
            return Err(bad_match(1, "match", format!("length {len} is below 4")));
        }
        let mut body = r.sub(len - 4, "match fields")?;
        let pad = (8 - len % 8) % 8;
        r.skip(pad, "match padding")?;
        let mut fields: Vec<Oxm> = Vec::new();
        while !body.is_empty() {
            let f = Oxm::parse(&mut body, "match")?;
            if fields
                .iter()
                .any(|g| g.class == f.class && g.field == f.field)
            {
                return Err(bad_match(
                    10,
                    "match",
                    format!("{} appears twice", f.name()),
                ));
            }
            fields.push(f);
        }
        let mut m = OxmMatch { fields };
        crate::regs::narrow_match(&mut m).map_err(|reg| {
            bad_match(
                10,
                "match",
                format!("register {reg} appears twice (as itself and in an xreg or xxreg)"),
            )
        })?;
        Ok(m)
    }

    /// Bytes of the fields (without the 4-byte header and padding).
    fn fields_len(&self) -> usize {
        self.fields.iter().map(Oxm::wire_len).sum()
    }

    /// Bytes on the wire, padding included.
    pub fn wire_len(&self) -> usize {
        (4 + self.fields_len()).div_ceil(8) * 8
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let len = 4 + self.fields_len();
        out.put_u16(MATCH_TYPE_OXM);
        out.put_u16(len as u16);
        self.fields.iter().for_each(|f| f.emit(out));
        out.put_zeros((8 - len % 8) % 8);
    }

    /// The field of `class`/`field`, if present.
    pub fn get(&self, class: u16, field: u8) -> Option<&Oxm> {
        self.fields
            .iter()
            .find(|f| f.class == class && f.field == field)
    }
}

//! Modify-header actions as the device's PRM bytes.
//!
//! `mlx5dv_dr_action_create_modify_header(domain, flags, actions_sz,
//! __be64 actions[])` takes an array of 8-byte PRM actions. This module
//! turns a list of [`ModifyOp`]s into those bytes ([`encode_list`]) and
//! checks and reads them back ([`decode_list`]), refusing what rdma-core
//! refuses, with the errno it sets ([`ModifyError::errno_is_eopnotsupp`]).
//!
//! ## Layout
//!
//! Checked against rdma-core `providers/mlx5/mlx5_ifc.h` at commit 691953d8
//! (big-endian bit numbering: bit 0 is the most significant bit of byte 0):
//!
//! - `mlx5_ifc_set_action_in_bits` (line 3145): `action_type[4] field[12]
//!   reserved[3] offset[5] reserved[3] length[5] | data[32]`; a length of 0
//!   means 32 ("Based on device specification value of 0 means 32",
//!   `dr_action_modify_sw_to_hw_set` in `providers/mlx5/dr_action.c`);
//! - `mlx5_ifc_add_action_in_bits` (line 3156): `action_type[4] field[12]
//!   reserved[16] | data[32]`;
//! - `mlx5_ifc_copy_action_in_bits` (line 3164): `action_type[4]
//!   src_field[12] reserved[3] src_offset[5] reserved[3] length[5] |
//!   reserved[4] dst_field[12] reserved[3] dst_offset[5] reserved[8]`;
//! - `MLX5_ACTION_TYPE_SET/ADD/COPY` = 1/2/3 and the
//!   `MLX5_ACTION_IN_FIELD_OUT_*` ids (line 3180 on). `METADATA_REGC_6` and
//!   `_7` (0x57, 0x58) are not in rdma-core's header; they come from the
//!   Linux kernel's `include/linux/mlx5/mlx5_ifc.h`.
//!
//! Offsets and data are counted from the field's least significant bit: a
//! SET of `length` bits at `offset` writes the low `length` bits of `data`
//! into bits `offset .. offset + length` of the field (as Linux's TC offload
//! writes a partial rewrite: the data right-aligned, the offset of its
//! first bit).
//!
//! ## What decoding refuses (rdma-core 691953d8, `dr_action.c`)
//!
//! - a size that is not a multiple of 8 ("Invalid modify actions size
//!   provided", EINVAL) or zero actions ("Invalid number of actions",
//!   EINVAL);
//! - an action type other than SET, ADD, COPY ("Unsupported action type",
//!   EOPNOTSUPP);
//! - an ADD on a field other than the TTL / hop limit ("Unsupported field
//!   for ADD action", EINVAL; rdma-core also allows the TCP sequence and
//!   acknowledgement numbers, which this model does not have);
//! - an unknown field id ("invalid field given", EINVAL);
//! - `offset + length` beyond the field's width ("Modify action length +
//!   offset exceeds limit", EINVAL);
//! - one list rewriting both IPv4 and IPv6 fields ("Action list can't
//!   support two different L3 types", ENOTSUP = EOPNOTSUPP on Linux) or both
//!   TCP and UDP fields ("two different L4 types", EINVAL), judged on the
//!   destination field of each action (`dr_actions_convert_modify_header`);
//! - reserved bits set: stricter than rdma-core, which ignores them, so that
//!   a decoded list re-encodes to the same bytes.
//!
//! Field widths are the PRM field widths given by the header names; they
//! match the hardware ranges in `dr_ste_v1.c` except `FIRST_VID`, which the
//! hardware table gives 16 bits (the whole TCI word) and this model the 12
//! bits of the VLAN id.
//!
//! Thread-safety: plain values and pure functions.

use std::fmt;

use thiserror::Error;

/// Size in bytes of one PRM modify action (`DR_MODIFY_ACTION_SIZE`).
pub const ACTION_LEN: usize = 8;

/// `MLX5_ACTION_TYPE_SET`.
pub const ACTION_TYPE_SET: u8 = 1;
/// `MLX5_ACTION_TYPE_ADD`.
pub const ACTION_TYPE_ADD: u8 = 2;
/// `MLX5_ACTION_TYPE_COPY`.
pub const ACTION_TYPE_COPY: u8 = 3;

/// A header field or metadata register a modify action can rewrite
/// (`MLX5_ACTION_IN_FIELD_OUT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModifyField {
    /// Source MAC bits 47..16 (`SMAC_47_16`, 0x1), 32 bits.
    SmacHi,
    /// Source MAC bits 15..0 (`SMAC_15_0`, 0x2), 16 bits.
    SmacLo,
    /// Ethertype after the VLAN tags (`ETHERTYPE`, 0x3), 16 bits.
    Ethertype,
    /// Destination MAC bits 47..16 (`DMAC_47_16`, 0x4), 32 bits.
    DmacHi,
    /// Destination MAC bits 15..0 (`DMAC_15_0`, 0x5), 16 bits.
    DmacLo,
    /// IPv4/IPv6 DSCP (`IP_DSCP`, 0x6), 6 bits.
    IpDscp,
    /// TCP flags NS..FIN (`TCP_FLAGS`, 0x7), 9 bits.
    TcpFlags,
    /// TCP source port (`TCP_SPORT`, 0x8), 16 bits.
    TcpSport,
    /// TCP destination port (`TCP_DPORT`, 0x9), 16 bits.
    TcpDport,
    /// IPv4 TTL (`IP_TTL`, 0xa), 8 bits.
    IpTtl,
    /// UDP source port (`UDP_SPORT`, 0xb), 16 bits.
    UdpSport,
    /// UDP destination port (`UDP_DPORT`, 0xc), 16 bits.
    UdpDport,
    /// One 32-bit quarter of the IPv6 source address: 0 = bits 127..96
    /// (`SIPV6_127_96`, 0xd) .. 3 = bits 31..0 (`SIPV6_31_0`, 0x10). The
    /// index is taken modulo 4.
    Sipv6(u8),
    /// One 32-bit quarter of the IPv6 destination address, 0 = bits 127..96
    /// (`DIPV6_127_96`, 0x11) .. 3 (`DIPV6_31_0`, 0x14). Modulo 4.
    Dipv6(u8),
    /// IPv4 source address (`SIPV4`, 0x15), 32 bits.
    Sipv4,
    /// IPv4 destination address (`DIPV4`, 0x16), 32 bits.
    Dipv4,
    /// First VLAN id (`FIRST_VID`, 0x17), 12 bits.
    FirstVid,
    /// IPv6 hop limit (`IPV6_HOPLIMIT`, 0x47), 8 bits.
    Ipv6HopLimit,
    /// Metadata register C n = 0..8 (`METADATA_REGC_0` 0x51 ..
    /// `METADATA_REGC_7` 0x58), 32 bits. The index is taken modulo 8.
    RegC(u8),
    /// Metadata register B (`METADATA_REGB`, 0x50), 32 bits: what a NIC RX
    /// rule leaves in the completion of a received packet
    /// (`flow_table_metadata`, CQE byte 36). rdma-core allows it as the
    /// source or destination of SET and COPY only in a NIC_RX domain.
    RegB,
    /// IPv4/IPv6 ECN (`IP_ECN`, 0x73), 2 bits.
    IpEcn,
}

/// The IP version a field belongs to, for the one-L3-type rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum L3Kind {
    V4,
    V6,
}

/// The transport a field belongs to, for the one-L4-type rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum L4Kind {
    Tcp,
    Udp,
}

impl ModifyField {
    /// Every field, in id order.
    pub const ALL: [ModifyField; 34] = [
        ModifyField::SmacHi,
        ModifyField::SmacLo,
        ModifyField::Ethertype,
        ModifyField::DmacHi,
        ModifyField::DmacLo,
        ModifyField::IpDscp,
        ModifyField::TcpFlags,
        ModifyField::TcpSport,
        ModifyField::TcpDport,
        ModifyField::IpTtl,
        ModifyField::UdpSport,
        ModifyField::UdpDport,
        ModifyField::Sipv6(0),
        ModifyField::Sipv6(1),
        ModifyField::Sipv6(2),
        ModifyField::Sipv6(3),
        ModifyField::Dipv6(0),
        ModifyField::Dipv6(1),
        ModifyField::Dipv6(2),
        ModifyField::Dipv6(3),
        ModifyField::Sipv4,
        ModifyField::Dipv4,
        ModifyField::FirstVid,
        ModifyField::Ipv6HopLimit,
        ModifyField::RegB,
        ModifyField::RegC(0),
        ModifyField::RegC(1),
        ModifyField::RegC(2),
        ModifyField::RegC(3),
        ModifyField::RegC(4),
        ModifyField::RegC(5),
        ModifyField::RegC(6),
        ModifyField::RegC(7),
        ModifyField::IpEcn,
    ];

    /// The `MLX5_ACTION_IN_FIELD_OUT_*` id.
    pub fn id(self) -> u16 {
        match self {
            ModifyField::SmacHi => 0x1,
            ModifyField::SmacLo => 0x2,
            ModifyField::Ethertype => 0x3,
            ModifyField::DmacHi => 0x4,
            ModifyField::DmacLo => 0x5,
            ModifyField::IpDscp => 0x6,
            ModifyField::TcpFlags => 0x7,
            ModifyField::TcpSport => 0x8,
            ModifyField::TcpDport => 0x9,
            ModifyField::IpTtl => 0xa,
            ModifyField::UdpSport => 0xb,
            ModifyField::UdpDport => 0xc,
            ModifyField::Sipv6(n) => 0xd + u16::from(n & 3),
            ModifyField::Dipv6(n) => 0x11 + u16::from(n & 3),
            ModifyField::Sipv4 => 0x15,
            ModifyField::Dipv4 => 0x16,
            ModifyField::FirstVid => 0x17,
            ModifyField::Ipv6HopLimit => 0x47,
            ModifyField::RegB => 0x50,
            ModifyField::RegC(n) => 0x51 + u16::from(n & 7),
            ModifyField::IpEcn => 0x73,
        }
    }

    /// The field of an id, if the model knows it.
    pub fn from_id(id: u16) -> Option<Self> {
        Some(match id {
            0x1 => ModifyField::SmacHi,
            0x2 => ModifyField::SmacLo,
            0x3 => ModifyField::Ethertype,
            0x4 => ModifyField::DmacHi,
            0x5 => ModifyField::DmacLo,
            0x6 => ModifyField::IpDscp,
            0x7 => ModifyField::TcpFlags,
            0x8 => ModifyField::TcpSport,
            0x9 => ModifyField::TcpDport,
            0xa => ModifyField::IpTtl,
            0xb => ModifyField::UdpSport,
            0xc => ModifyField::UdpDport,
            0xd..=0x10 => ModifyField::Sipv6((id - 0xd) as u8),
            0x11..=0x14 => ModifyField::Dipv6((id - 0x11) as u8),
            0x15 => ModifyField::Sipv4,
            0x16 => ModifyField::Dipv4,
            0x17 => ModifyField::FirstVid,
            0x47 => ModifyField::Ipv6HopLimit,
            0x50 => ModifyField::RegB,
            0x51..=0x58 => ModifyField::RegC((id - 0x51) as u8),
            0x73 => ModifyField::IpEcn,
            _ => return None,
        })
    }

    /// The field's width in bits (1..=32).
    pub fn width(self) -> u8 {
        match self {
            ModifyField::SmacHi
            | ModifyField::DmacHi
            | ModifyField::Sipv6(_)
            | ModifyField::Dipv6(_)
            | ModifyField::Sipv4
            | ModifyField::Dipv4
            | ModifyField::RegB
            | ModifyField::RegC(_) => 32,
            ModifyField::SmacLo
            | ModifyField::Ethertype
            | ModifyField::DmacLo
            | ModifyField::TcpSport
            | ModifyField::TcpDport
            | ModifyField::UdpSport
            | ModifyField::UdpDport => 16,
            ModifyField::FirstVid => 12,
            ModifyField::TcpFlags => 9,
            ModifyField::IpTtl | ModifyField::Ipv6HopLimit => 8,
            ModifyField::IpDscp => 6,
            ModifyField::IpEcn => 2,
        }
    }

    /// All-ones value of the field's width.
    pub fn max_value(self) -> u32 {
        low_bits(self.width())
    }

    /// A short name: `eth_src_47_16`, `ipv4_src`, `ipv6_dst_31_0`, `reg_c_3`.
    pub fn name(self) -> &'static str {
        const SIPV6: [&str; 4] = [
            "ipv6_src_127_96",
            "ipv6_src_95_64",
            "ipv6_src_63_32",
            "ipv6_src_31_0",
        ];
        const DIPV6: [&str; 4] = [
            "ipv6_dst_127_96",
            "ipv6_dst_95_64",
            "ipv6_dst_63_32",
            "ipv6_dst_31_0",
        ];
        const REGC: [&str; 8] = [
            "reg_c_0", "reg_c_1", "reg_c_2", "reg_c_3", "reg_c_4", "reg_c_5", "reg_c_6", "reg_c_7",
        ];
        match self {
            ModifyField::SmacHi => "eth_src_47_16",
            ModifyField::SmacLo => "eth_src_15_0",
            ModifyField::Ethertype => "eth_type",
            ModifyField::DmacHi => "eth_dst_47_16",
            ModifyField::DmacLo => "eth_dst_15_0",
            ModifyField::IpDscp => "ip_dscp",
            ModifyField::TcpFlags => "tcp_flags",
            ModifyField::TcpSport => "tcp_sport",
            ModifyField::TcpDport => "tcp_dport",
            ModifyField::IpTtl => "ip_ttl",
            ModifyField::UdpSport => "udp_sport",
            ModifyField::UdpDport => "udp_dport",
            ModifyField::Sipv6(n) => SIPV6[usize::from(n & 3)],
            ModifyField::Dipv6(n) => DIPV6[usize::from(n & 3)],
            ModifyField::Sipv4 => "ipv4_src",
            ModifyField::Dipv4 => "ipv4_dst",
            ModifyField::FirstVid => "first_vid",
            ModifyField::Ipv6HopLimit => "ipv6_hop_limit",
            ModifyField::RegC(n) => REGC[usize::from(n & 7)],
            ModifyField::RegB => "reg_b",
            ModifyField::IpEcn => "ip_ecn",
        }
    }

    /// The IP version the hardware ties the field to (`l3_type` in
    /// `dr_ste_v1.c`), if any.
    pub(crate) fn l3_kind(self) -> Option<L3Kind> {
        match self {
            ModifyField::IpTtl | ModifyField::Sipv4 | ModifyField::Dipv4 => Some(L3Kind::V4),
            ModifyField::Ipv6HopLimit | ModifyField::Sipv6(_) | ModifyField::Dipv6(_) => {
                Some(L3Kind::V6)
            }
            _ => None,
        }
    }

    /// The transport the hardware ties the field to (`l4_type`), if any.
    pub(crate) fn l4_kind(self) -> Option<L4Kind> {
        match self {
            ModifyField::TcpFlags | ModifyField::TcpSport | ModifyField::TcpDport => {
                Some(L4Kind::Tcp)
            }
            ModifyField::UdpSport | ModifyField::UdpDport => Some(L4Kind::Udp),
            _ => None,
        }
    }

    /// Whether ADD may target the field (rdma-core's
    /// `dr_action_modify_check_field_limitation_add`).
    pub fn add_allowed(self) -> bool {
        matches!(self, ModifyField::IpTtl | ModifyField::Ipv6HopLimit)
    }
}

impl fmt::Display for ModifyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The low `n` bits set (`n` up to 32).
fn low_bits(n: u8) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// One modify-header action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModifyOp {
    /// Write the low `length` bits of `data` at bit `offset` (from the
    /// field's least significant bit) of `field`.
    Set {
        /// The field written.
        field: ModifyField,
        /// First bit written, from the field's least significant bit.
        offset: u8,
        /// Bits written, 1..=32 (the encoding stores 32 as 0).
        length: u8,
        /// The value, right-aligned.
        data: u32,
    },
    /// Add `data` to the field, modulo 2^width (TTL decrement = ADD 0xff).
    Add {
        /// The field added to.
        field: ModifyField,
        /// The addend.
        data: u32,
    },
    /// Copy `length` bits from `src` at `src_offset` to `dst` at
    /// `dst_offset`.
    Copy {
        /// The field read.
        src: ModifyField,
        /// First bit read, from `src`'s least significant bit.
        src_offset: u8,
        /// Bits copied, 1..=32 (the encoding stores 32 as 0).
        length: u8,
        /// The field written.
        dst: ModifyField,
        /// First bit written, from `dst`'s least significant bit.
        dst_offset: u8,
    },
}

/// Why [`ModifyOp::decode`] or [`decode_list`] refused the bytes. `index`
/// is always the position of the offending action in the list (0 from
/// [`ModifyOp::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ModifyError {
    /// The byte count is zero or not a multiple of 8 (EINVAL).
    #[error("invalid modify actions size {len}: not a non-zero multiple of 8 bytes")]
    BadSize {
        /// The byte count given.
        len: usize,
    },
    /// An action type other than SET (1), ADD (2), COPY (3) (EOPNOTSUPP).
    #[error("action {index}: unsupported action type {action_type}")]
    UnknownActionType {
        /// Position of the action.
        index: usize,
        /// Its action type.
        action_type: u8,
    },
    /// A field id the device does not have (EINVAL).
    #[error("action {index}: invalid field id {id:#x}")]
    UnknownField {
        /// Position of the action.
        index: usize,
        /// The unknown id.
        id: u16,
    },
    /// ADD on a field other than the TTL / hop limit (EINVAL).
    #[error("action {index}: ADD is not supported on {field}")]
    AddUnsupported {
        /// Position of the action.
        index: usize,
        /// The field.
        field: ModifyField,
    },
    /// `offset + length` beyond the field's width (EINVAL, "length + offset
    /// exceeds limit").
    #[error(
        "action {index}: {field}: length {length} + offset {offset} exceeds its {} bits",
        .field.width()
    )]
    OutOfRange {
        /// Position of the action.
        index: usize,
        /// The field too narrow for the range.
        field: ModifyField,
        /// The offset given.
        offset: u8,
        /// The length (0 read as 32).
        length: u8,
    },
    /// Reserved bits are set.
    #[error("action {index}: reserved bits set ({bits:#018x})")]
    ReservedBits {
        /// Position of the action.
        index: usize,
        /// The set reserved bits of the big-endian 64-bit action.
        bits: u64,
    },
    /// IPv4 and IPv6 fields rewritten by one list (ENOTSUP = EOPNOTSUPP).
    #[error("action {index}: {field} is of another IP version than an earlier action's")]
    MixedL3 {
        /// Position of the action.
        index: usize,
        /// Its destination field.
        field: ModifyField,
    },
    /// TCP and UDP fields rewritten by one list (EINVAL).
    #[error("action {index}: {field} is of another transport than an earlier action's")]
    MixedL4 {
        /// Position of the action.
        index: usize,
        /// Its destination field.
        field: ModifyField,
    },
}

impl ModifyError {
    /// True when rdma-core answers EOPNOTSUPP (an unknown action type, two
    /// IP versions in one list); every other error is EINVAL.
    pub fn errno_is_eopnotsupp(&self) -> bool {
        matches!(
            self,
            ModifyError::UnknownActionType { .. } | ModifyError::MixedL3 { .. }
        )
    }

    /// The index of the offending action, if the error is about one.
    pub fn index(&self) -> Option<usize> {
        match *self {
            ModifyError::BadSize { .. } => None,
            ModifyError::UnknownActionType { index, .. }
            | ModifyError::UnknownField { index, .. }
            | ModifyError::AddUnsupported { index, .. }
            | ModifyError::OutOfRange { index, .. }
            | ModifyError::ReservedBits { index, .. }
            | ModifyError::MixedL3 { index, .. }
            | ModifyError::MixedL4 { index, .. } => Some(index),
        }
    }

    fn at(self, i: usize) -> Self {
        match self {
            ModifyError::BadSize { .. } => self,
            ModifyError::UnknownActionType { action_type, .. } => ModifyError::UnknownActionType {
                index: i,
                action_type,
            },
            ModifyError::UnknownField { id, .. } => ModifyError::UnknownField { index: i, id },
            ModifyError::AddUnsupported { field, .. } => {
                ModifyError::AddUnsupported { index: i, field }
            }
            ModifyError::OutOfRange {
                field,
                offset,
                length,
                ..
            } => ModifyError::OutOfRange {
                index: i,
                field,
                offset,
                length,
            },
            ModifyError::ReservedBits { bits, .. } => ModifyError::ReservedBits { index: i, bits },
            ModifyError::MixedL3 { field, .. } => ModifyError::MixedL3 { index: i, field },
            ModifyError::MixedL4 { field, .. } => ModifyError::MixedL4 { index: i, field },
        }
    }
}

// Reserved bits of each action, as a mask of the 64-bit big-endian word
// (bit 63 = bit 0 of the PRM numbering).
/// SET: bits 0x10..0x13 and 0x18..0x1b.
const SET_RESERVED: u64 = 0x0000_e0e0_0000_0000;
/// ADD: bits 0x10..0x20.
const ADD_RESERVED: u64 = 0x0000_ffff_0000_0000;
/// COPY: 0x10..0x13, 0x18..0x1b, 0x20..0x24, 0x30..0x33, 0x38..0x40.
const COPY_RESERVED: u64 = 0x0000_e0e0_f000_e0ff;

/// Checks `offset + length <= width` (length 0 meaning 32).
fn check_range(field: ModifyField, offset: u8, length: u8) -> Result<(), ModifyError> {
    let length = if length == 0 { 32 } else { length };
    if u16::from(offset) + u16::from(length) > u16::from(field.width()) {
        return Err(ModifyError::OutOfRange {
            index: 0,
            field,
            offset,
            length,
        });
    }
    Ok(())
}

fn field_of(id: u16) -> Result<ModifyField, ModifyError> {
    ModifyField::from_id(id).ok_or(ModifyError::UnknownField { index: 0, id })
}

impl ModifyOp {
    /// SET of the whole field to `value` (masked to the field's width).
    pub fn set(field: ModifyField, value: u32) -> Self {
        ModifyOp::Set {
            field,
            offset: 0,
            length: field.width(),
            data: value & field.max_value(),
        }
    }

    /// The field the action writes.
    pub fn dst(&self) -> ModifyField {
        match *self {
            ModifyOp::Set { field, .. } | ModifyOp::Add { field, .. } => field,
            ModifyOp::Copy { dst, .. } => dst,
        }
    }

    /// The field a COPY reads.
    pub fn src(&self) -> Option<ModifyField> {
        match *self {
            ModifyOp::Copy { src, .. } => Some(src),
            _ => None,
        }
    }

    /// A COPY of all 32 bits of `src` into `dst`.
    pub fn copy32(src: ModifyField, dst: ModifyField) -> Self {
        ModifyOp::Copy {
            src,
            src_offset: 0,
            length: 32,
            dst,
            dst_offset: 0,
        }
    }

    /// The 8 PRM bytes of the action. Offsets and lengths are written
    /// modulo 32 (their 5 bits; a length of 32 becomes 0, as the device
    /// reads it).
    pub fn encode(&self) -> [u8; 8] {
        let (hi, lo): (u32, u32) = match *self {
            ModifyOp::Set {
                field,
                offset,
                length,
                data,
            } => (
                u32::from(ACTION_TYPE_SET) << 28
                    | u32::from(field.id()) << 16
                    | u32::from(offset & 0x1f) << 8
                    | u32::from(length & 0x1f),
                data,
            ),
            ModifyOp::Add { field, data } => (
                u32::from(ACTION_TYPE_ADD) << 28 | u32::from(field.id()) << 16,
                data,
            ),
            ModifyOp::Copy {
                src,
                src_offset,
                length,
                dst,
                dst_offset,
            } => (
                u32::from(ACTION_TYPE_COPY) << 28
                    | u32::from(src.id()) << 16
                    | u32::from(src_offset & 0x1f) << 8
                    | u32::from(length & 0x1f),
                u32::from(dst.id()) << 16 | u32::from(dst_offset & 0x1f) << 8,
            ),
        };
        let w = u64::from(hi) << 32 | u64::from(lo);
        w.to_be_bytes()
    }

    /// Reads one action (errors carry index 0). Lengths come back as
    /// 1..=32.
    pub fn decode(b: &[u8; 8]) -> Result<ModifyOp, ModifyError> {
        let w = u64::from_be_bytes(*b);
        let action_type = (w >> 60) as u8;
        let reserved = match action_type {
            ACTION_TYPE_SET => SET_RESERVED,
            ACTION_TYPE_ADD => ADD_RESERVED,
            ACTION_TYPE_COPY => COPY_RESERVED,
            _ => {
                return Err(ModifyError::UnknownActionType {
                    index: 0,
                    action_type,
                })
            }
        };
        if w & reserved != 0 {
            return Err(ModifyError::ReservedBits {
                index: 0,
                bits: w & reserved,
            });
        }
        let field = field_of((w >> 48) as u16 & 0xfff)?;
        let offset = (w >> 40) as u8 & 0x1f;
        let length = (w >> 32) as u8 & 0x1f;
        let data = w as u32;
        match action_type {
            ACTION_TYPE_SET => {
                check_range(field, offset, length)?;
                Ok(ModifyOp::Set {
                    field,
                    offset,
                    length: if length == 0 { 32 } else { length },
                    data,
                })
            }
            ACTION_TYPE_ADD => {
                if !field.add_allowed() {
                    return Err(ModifyError::AddUnsupported { index: 0, field });
                }
                Ok(ModifyOp::Add { field, data })
            }
            _ => {
                let dst = field_of((w >> 16) as u16 & 0xfff)?;
                let dst_offset = (w >> 8) as u8 & 0x1f;
                check_range(field, offset, length)?;
                check_range(dst, dst_offset, length)?;
                Ok(ModifyOp::Copy {
                    src: field,
                    src_offset: offset,
                    length: if length == 0 { 32 } else { length },
                    dst,
                    dst_offset,
                })
            }
        }
    }
}

impl fmt::Display for ModifyOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ModifyOp::Set {
                field,
                offset,
                length,
                data,
            } if offset == 0 && length == field.width() => write!(f, "set({field}={data:#x})"),
            ModifyOp::Set {
                field,
                offset,
                length,
                data,
            } => write!(f, "set({field}[{offset}+{length}]={data:#x})"),
            ModifyOp::Add { field, data } => write!(f, "add({field}+={data:#x})"),
            ModifyOp::Copy {
                src,
                src_offset,
                length,
                dst,
                dst_offset,
            } => write!(
                f,
                "copy({src}[{src_offset}+{length}]->{dst}[{dst_offset}+{length}])"
            ),
        }
    }
}

/// The PRM bytes of a list of actions, 8 per action, in order.
pub fn encode_list(ops: &[ModifyOp]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.len() * ACTION_LEN);
    for op in ops {
        out.extend_from_slice(&op.encode());
    }
    out
}

/// Reads and checks a list of PRM actions as
/// `mlx5dv_dr_action_create_modify_header` does: the size, then each action
/// in order (the first error wins, with its index), including the
/// one-IP-version and one-transport rules across the list.
pub fn decode_list(bytes: &[u8]) -> Result<Vec<ModifyOp>, ModifyError> {
    if bytes.is_empty() || bytes.len() % ACTION_LEN != 0 {
        return Err(ModifyError::BadSize { len: bytes.len() });
    }
    let mut ops = Vec::with_capacity(bytes.len() / ACTION_LEN);
    let mut l3: Option<L3Kind> = None;
    let mut l4: Option<L4Kind> = None;
    for (index, chunk) in bytes.chunks_exact(ACTION_LEN).enumerate() {
        let b: &[u8; 8] = chunk
            .try_into()
            .map_err(|_| ModifyError::BadSize { len: bytes.len() })?;
        let op = ModifyOp::decode(b).map_err(|e| e.at(index))?;
        let dst = op.dst();
        if let Some(k) = dst.l3_kind() {
            if l3.is_some_and(|prev| prev != k) {
                return Err(ModifyError::MixedL3 { index, field: dst });
            }
            l3 = Some(k);
        }
        if let Some(k) = dst.l4_kind() {
            if l4.is_some_and(|prev| prev != k) {
                return Err(ModifyError::MixedL4 { index, field: dst });
            }
            l4 = Some(k);
        }
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
#[path = "tests/modify.rs"]
mod tests;

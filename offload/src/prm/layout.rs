//! The `fte_match_param` layout as data, and the one setter and getter that
//! read and write it.
//!
//! Every field the device can match on is one row of [`FIELDS`]: its block,
//! its name, its bit offset from the start of `fte_match_param` and its
//! width. Offsets follow the PRM's big-endian bit numbering: bit 0 is the most
//! significant bit of byte 0, a field of width `w` at bit `b` occupies bits
//! `b .. b + w`, and its value is stored most significant bit first, so a
//! byte-aligned field is plain network byte order.
//!
//! Source of every row: rdma-core `providers/mlx5/mlx5_ifc.h` at commit
//! 691953d8d502 (2026-08-20), the structs the Direct Rule API parses the
//! match buffer with:
//! - `mlx5_ifc_dr_match_spec_bits` (line 501), used for both `outer` and
//!   `inner`; the kernel's `mlx5_ifc_fte_match_set_lyr_2_4_bits`
//!   (include/linux/mlx5/mlx5_ifc.h) has the same offsets, with
//!   `src_ipv4_src_ipv6`/`dst_ipv4_dst_ipv6` as the 128-bit address unions
//!   (IPv4 in the last 32 bits) and bits 0xd4..0xd8 reserved;
//! - `mlx5_ifc_dr_match_set_misc_bits` (line 554) = the kernel's
//!   `mlx5_ifc_fte_match_set_misc_bits`;
//! - `mlx5_ifc_dr_match_set_misc2_bits` (line 613) = the kernel's
//!   `mlx5_ifc_fte_match_set_misc2_bits`;
//! - `mlx5_ifc_dr_match_param_bits` (line 760): outer, misc, inner, misc2,
//!   misc3, misc4, misc5, each 0x200 bits, 0xe00 bits = 448 bytes in all. The
//!   kernel's `mlx5_ifc_fte_match_param_bits` adds `reserved_at_e00[0x200]`
//!   (512 bytes); `mlx5dv_dr_matcher_create` rejects a `match_sz` above 448
//!   (`dr_matcher_copy_param` in providers/mlx5/dr_matcher.c).
//!
//! Offsets inside a block are the header's cumulative widths, written in hex
//! as the header's `reserved_at_XX` names write them (a few of those names
//! are stale, e.g. misc `reserved_at_ec` sits at 0xe0; the sums are what
//! counts). They were computed by summing the widths of each struct in the
//! header above; the golden tests in `tests/prm_golden.rs` spell out the
//! resulting bytes for real flows.
//!
//! Only outer, misc, inner and misc2 have rows: nothing eswitch matches
//! lives in misc3..misc5, and an encoded buffer stops after misc2
//! ([`ENCODED_LEN`]).
//!
//! Thread-safety: constant data and pure functions.

use std::fmt;

use thiserror::Error;

/// Size in bytes of the match buffer the Direct Rule API accepts at most
/// (`mlx5_ifc_dr_match_param_bits`: seven blocks of 64 bytes).
pub const MATCH_PARAM_LEN: usize = 448;

/// Size in bytes of one block (0x200 bits).
pub const BLOCK_LEN: usize = 64;

/// Bytes an [`Encoded`](super::Encoded) buffer holds: outer, misc, inner and
/// misc2, the blocks that have rows in [`FIELDS`].
pub const ENCODED_LEN: usize = 4 * BLOCK_LEN;

/// The blocks of `fte_match_param`, in buffer order. A block's index is its
/// bit in `match_criteria_enable` (`DR_MATCHER_CRITERIA_*` in rdma-core
/// `providers/mlx5/mlx5dv_dr.h`; `MLX5_MATCH_*` in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Block {
    /// `outer_headers` (`DR_MATCHER_CRITERIA_OUTER` = 1 << 0).
    Outer = 0,
    /// `misc_parameters` (`DR_MATCHER_CRITERIA_MISC` = 1 << 1).
    Misc = 1,
    /// `inner_headers` (`DR_MATCHER_CRITERIA_INNER` = 1 << 2).
    Inner = 2,
    /// `misc_parameters_2` (`DR_MATCHER_CRITERIA_MISC2` = 1 << 3).
    Misc2 = 3,
    /// `misc_parameters_3` (`DR_MATCHER_CRITERIA_MISC3` = 1 << 4).
    Misc3 = 4,
    /// `misc_parameters_4` (`DR_MATCHER_CRITERIA_MISC4` = 1 << 5).
    Misc4 = 5,
    /// `misc_parameters_5` (`DR_MATCHER_CRITERIA_MISC5` = 1 << 6).
    Misc5 = 6,
}

impl Block {
    /// All blocks, in buffer order.
    pub const ALL: [Block; 7] = [
        Block::Outer,
        Block::Misc,
        Block::Inner,
        Block::Misc2,
        Block::Misc3,
        Block::Misc4,
        Block::Misc5,
    ];

    /// Bit offset of the block in `fte_match_param`.
    pub const fn base_bit(self) -> u16 {
        self as u16 * 0x200
    }

    /// Byte offset of the block in `fte_match_param`.
    pub const fn base_byte(self) -> usize {
        self as usize * BLOCK_LEN
    }

    /// The block's bit in `match_criteria_enable`.
    pub const fn criteria_bit(self) -> u8 {
        1 << self as u8
    }

    /// The prefix of the block's field names.
    pub const fn name(self) -> &'static str {
        match self {
            Block::Outer => "outer",
            Block::Misc => "misc",
            Block::Inner => "inner",
            Block::Misc2 => "misc2",
            Block::Misc3 => "misc3",
            Block::Misc4 => "misc4",
            Block::Misc5 => "misc5",
        }
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `match_criteria_enable` value with every known block bit set.
pub const CRITERIA_ALL: u8 = 0x7f;

/// One row of the layout table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDef {
    /// The field this row describes (its index in [`FIELDS`]).
    pub field: PrmField,
    /// The block holding the field.
    pub block: Block,
    /// `block.field` as the header names it (`outer.ip_protocol`).
    pub name: &'static str,
    /// Offset of the field's most significant bit from bit 0 of
    /// `fte_match_param`.
    pub bit: u16,
    /// Width in bits (1..=128).
    pub width: u8,
}

impl FieldDef {
    /// One past the last byte the field touches.
    pub const fn end_byte(&self) -> usize {
        (self.bit as usize + self.width as usize).div_ceil(8)
    }

    /// All-ones value of the field's width.
    pub const fn max_value(&self) -> u128 {
        if self.width >= 128 {
            u128::MAX
        } else {
            (1u128 << self.width) - 1
        }
    }
}

macro_rules! prm_fields {
    ($( $(#[$doc:meta])* $variant:ident = $block:ident $name:literal $off:literal $width:literal; )*) => {
        /// A field of `fte_match_param` (a row of [`FIELDS`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum PrmField {
            $( $(#[$doc])* $variant, )*
        }

        /// The layout table: every field of the outer, misc, inner and misc2
        /// blocks, in buffer order, indexed by [`PrmField`].
        pub const FIELDS: &[FieldDef] = &[
            $( FieldDef {
                field: PrmField::$variant,
                block: Block::$block,
                name: concat!(prm_fields!(@prefix $block), ".", $name),
                bit: Block::$block.base_bit() + $off,
                width: $width,
            }, )*
        ];
    };
    (@prefix Outer) => { "outer" };
    (@prefix Misc) => { "misc" };
    (@prefix Inner) => { "inner" };
    (@prefix Misc2) => { "misc2" };
}

// (variant = block "name" offset-in-block width). Offsets are those of the
// structs named in the module comment; two-part fields that are contiguous in
// the header (smac_47_16 + smac_15_0, src_ip_127_96 .. src_ip_31_0) are one
// row. Reserved ranges have no row.
prm_fields! {
    // mlx5_ifc_dr_match_spec_bits as outer_headers (block bit 0x000).
    /// Source MAC (`smac_47_16` + `smac_15_0`), byte 0.
    OuterSmac = Outer "smac" 0x000 48;
    /// Ethertype after the VLAN tags, byte 6.
    OuterEthertype = Outer "ethertype" 0x030 16;
    /// Destination MAC (`dmac_47_16` + `dmac_15_0`), byte 8.
    OuterDmac = Outer "dmac" 0x040 48;
    /// First VLAN PCP, byte 14 bits 0..3.
    OuterFirstPrio = Outer "first_prio" 0x070 3;
    /// First VLAN CFI/DEI, byte 14 bit 3.
    OuterFirstCfi = Outer "first_cfi" 0x073 1;
    /// First VLAN id, byte 14 bit 4 .. byte 15.
    OuterFirstVid = Outer "first_vid" 0x074 12;
    /// IP protocol / IPv6 next header, byte 16.
    OuterIpProtocol = Outer "ip_protocol" 0x080 8;
    /// IP DSCP, byte 17 bits 0..6.
    OuterIpDscp = Outer "ip_dscp" 0x088 6;
    /// IP ECN, byte 17 bits 6..8.
    OuterIpEcn = Outer "ip_ecn" 0x08e 2;
    /// First tag is a C-VLAN (0x8100), byte 18 bit 0.
    OuterCvlanTag = Outer "cvlan_tag" 0x090 1;
    /// First tag is an S-VLAN (0x88a8), byte 18 bit 1.
    OuterSvlanTag = Outer "svlan_tag" 0x091 1;
    /// The packet is an IP fragment, byte 18 bit 2.
    OuterFrag = Outer "frag" 0x092 1;
    /// IP version, byte 18 bits 3..7.
    OuterIpVersion = Outer "ip_version" 0x093 4;
    /// TCP flags (NS .. FIN), byte 18 bit 7 .. byte 19.
    OuterTcpFlags = Outer "tcp_flags" 0x097 9;
    /// TCP source port, byte 20.
    OuterTcpSport = Outer "tcp_sport" 0x0a0 16;
    /// TCP destination port, byte 22.
    OuterTcpDport = Outer "tcp_dport" 0x0b0 16;
    /// IPv4 header length, byte 26 bits 0..4.
    OuterIpv4Ihl = Outer "ipv4_ihl" 0x0d0 4;
    /// L3 ok (rdma-core only; reserved in the kernel header), byte 26 bit 4.
    OuterL3Ok = Outer "l3_ok" 0x0d4 1;
    /// L4 ok, byte 26 bit 5.
    OuterL4Ok = Outer "l4_ok" 0x0d5 1;
    /// IPv4 checksum ok, byte 26 bit 6.
    OuterIpv4ChecksumOk = Outer "ipv4_checksum_ok" 0x0d6 1;
    /// L4 checksum ok, byte 26 bit 7.
    OuterL4ChecksumOk = Outer "l4_checksum_ok" 0x0d7 1;
    /// IPv4 TTL / IPv6 hop limit, byte 27.
    OuterIpTtlHoplimit = Outer "ip_ttl_hoplimit" 0x0d8 8;
    /// UDP source port, byte 28.
    OuterUdpSport = Outer "udp_sport" 0x0e0 16;
    /// UDP destination port, byte 30.
    OuterUdpDport = Outer "udp_dport" 0x0f0 16;
    /// Source address, bytes 32..48 (IPv4 in bytes 44..48).
    OuterSrcIp = Outer "src_ip" 0x100 128;
    /// Destination address, bytes 48..64 (IPv4 in bytes 60..64).
    OuterDstIp = Outer "dst_ip" 0x180 128;

    // mlx5_ifc_dr_match_set_misc_bits as misc_parameters (block bit 0x200).
    /// GRE C bit present.
    MiscGreCPresent = Misc "gre_c_present" 0x000 1;
    /// BTH A bit (reserved in the kernel header).
    MiscBthA = Misc "bth_a" 0x001 1;
    /// GRE K bit present.
    MiscGreKPresent = Misc "gre_k_present" 0x002 1;
    /// GRE S bit present.
    MiscGreSPresent = Misc "gre_s_present" 0x003 1;
    /// Source vHCA port.
    MiscSourceVhcaPort = Misc "source_vhca_port" 0x004 4;
    /// Source send queue number.
    MiscSourceSqn = Misc "source_sqn" 0x008 24;
    /// vHCA id of the eSwitch owner of the source port, byte 4.
    MiscSourceEswitchOwnerVhcaId = Misc "source_eswitch_owner_vhca_id" 0x020 16;
    /// Source vport, byte 6.
    MiscSourcePort = Misc "source_port" 0x030 16;
    /// Second VLAN PCP, byte 8 bits 0..3.
    MiscOuterSecondPrio = Misc "outer_second_prio" 0x040 3;
    /// Second VLAN CFI/DEI, byte 8 bit 3.
    MiscOuterSecondCfi = Misc "outer_second_cfi" 0x043 1;
    /// Second VLAN id, byte 8 bit 4 .. byte 9.
    MiscOuterSecondVid = Misc "outer_second_vid" 0x044 12;
    /// Inner second VLAN PCP.
    MiscInnerSecondPrio = Misc "inner_second_prio" 0x050 3;
    /// Inner second VLAN CFI.
    MiscInnerSecondCfi = Misc "inner_second_cfi" 0x053 1;
    /// Inner second VLAN id.
    MiscInnerSecondVid = Misc "inner_second_vid" 0x054 12;
    /// Second tag is a C-VLAN, byte 12 bit 0.
    MiscOuterSecondCvlanTag = Misc "outer_second_cvlan_tag" 0x060 1;
    /// Inner second tag is a C-VLAN, byte 12 bit 1.
    MiscInnerSecondCvlanTag = Misc "inner_second_cvlan_tag" 0x061 1;
    /// Second tag is an S-VLAN, byte 12 bit 2.
    MiscOuterSecondSvlanTag = Misc "outer_second_svlan_tag" 0x062 1;
    /// Inner second tag is an S-VLAN, byte 12 bit 3.
    MiscInnerSecondSvlanTag = Misc "inner_second_svlan_tag" 0x063 1;
    /// EMD tag present.
    MiscOuterEmdTag = Misc "outer_emd_tag" 0x064 1;
    /// GRE protocol.
    MiscGreProtocol = Misc "gre_protocol" 0x070 16;
    /// GRE key, high 24 bits.
    MiscGreKeyH = Misc "gre_key_h" 0x080 24;
    /// GRE key, low 8 bits.
    MiscGreKeyL = Misc "gre_key_l" 0x098 8;
    /// VXLAN VNI, byte 20.
    MiscVxlanVni = Misc "vxlan_vni" 0x0a0 24;
    /// BTH opcode.
    MiscBthOpcode = Misc "bth_opcode" 0x0b8 8;
    /// Geneve VNI.
    MiscGeneveVni = Misc "geneve_vni" 0x0c0 24;
    /// Geneve TLV option 0 exists.
    MiscGeneveTlvOption0Exist = Misc "geneve_tlv_option_0_exist" 0x0de 1;
    /// Geneve OAM bit.
    MiscGeneveOam = Misc "geneve_oam" 0x0df 1;
    /// Outer IPv6 flow label, byte 29 bit 4 .. byte 31.
    MiscOuterIpv6FlowLabel = Misc "outer_ipv6_flow_label" 0x0ec 20;
    /// Inner IPv6 flow label.
    MiscInnerIpv6FlowLabel = Misc "inner_ipv6_flow_label" 0x10c 20;
    /// Geneve option length.
    MiscGeneveOptLen = Misc "geneve_opt_len" 0x12a 6;
    /// Geneve protocol type.
    MiscGeneveProtocolType = Misc "geneve_protocol_type" 0x130 16;
    /// BTH destination QP.
    MiscBthDstQp = Misc "bth_dst_qp" 0x148 24;
    /// Inner ESP SPI.
    MiscInnerEspSpi = Misc "inner_esp_spi" 0x160 32;
    /// Outer ESP SPI.
    MiscOuterEspSpi = Misc "outer_esp_spi" 0x180 32;

    // mlx5_ifc_dr_match_spec_bits as inner_headers (block bit 0x400); the
    // same offsets as outer (a unit test checks it).
    /// Inner source MAC.
    InnerSmac = Inner "smac" 0x000 48;
    /// Inner ethertype.
    InnerEthertype = Inner "ethertype" 0x030 16;
    /// Inner destination MAC.
    InnerDmac = Inner "dmac" 0x040 48;
    /// Inner first VLAN PCP.
    InnerFirstPrio = Inner "first_prio" 0x070 3;
    /// Inner first VLAN CFI.
    InnerFirstCfi = Inner "first_cfi" 0x073 1;
    /// Inner first VLAN id.
    InnerFirstVid = Inner "first_vid" 0x074 12;
    /// Inner IP protocol.
    InnerIpProtocol = Inner "ip_protocol" 0x080 8;
    /// Inner IP DSCP.
    InnerIpDscp = Inner "ip_dscp" 0x088 6;
    /// Inner IP ECN.
    InnerIpEcn = Inner "ip_ecn" 0x08e 2;
    /// Inner first tag is a C-VLAN.
    InnerCvlanTag = Inner "cvlan_tag" 0x090 1;
    /// Inner first tag is an S-VLAN.
    InnerSvlanTag = Inner "svlan_tag" 0x091 1;
    /// Inner packet is a fragment.
    InnerFrag = Inner "frag" 0x092 1;
    /// Inner IP version.
    InnerIpVersion = Inner "ip_version" 0x093 4;
    /// Inner TCP flags.
    InnerTcpFlags = Inner "tcp_flags" 0x097 9;
    /// Inner TCP source port.
    InnerTcpSport = Inner "tcp_sport" 0x0a0 16;
    /// Inner TCP destination port.
    InnerTcpDport = Inner "tcp_dport" 0x0b0 16;
    /// Inner IPv4 header length.
    InnerIpv4Ihl = Inner "ipv4_ihl" 0x0d0 4;
    /// Inner L3 ok.
    InnerL3Ok = Inner "l3_ok" 0x0d4 1;
    /// Inner L4 ok.
    InnerL4Ok = Inner "l4_ok" 0x0d5 1;
    /// Inner IPv4 checksum ok.
    InnerIpv4ChecksumOk = Inner "ipv4_checksum_ok" 0x0d6 1;
    /// Inner L4 checksum ok.
    InnerL4ChecksumOk = Inner "l4_checksum_ok" 0x0d7 1;
    /// Inner TTL / hop limit.
    InnerIpTtlHoplimit = Inner "ip_ttl_hoplimit" 0x0d8 8;
    /// Inner UDP source port.
    InnerUdpSport = Inner "udp_sport" 0x0e0 16;
    /// Inner UDP destination port.
    InnerUdpDport = Inner "udp_dport" 0x0f0 16;
    /// Inner source address.
    InnerSrcIp = Inner "src_ip" 0x100 128;
    /// Inner destination address.
    InnerDstIp = Inner "dst_ip" 0x180 128;

    // mlx5_ifc_dr_match_set_misc2_bits as misc_parameters_2 (block bit 0x600).
    /// Outer first MPLS label.
    Misc2OuterFirstMplsLabel = Misc2 "outer_first_mpls_label" 0x000 20;
    /// Outer first MPLS EXP.
    Misc2OuterFirstMplsExp = Misc2 "outer_first_mpls_exp" 0x014 3;
    /// Outer first MPLS bottom of stack.
    Misc2OuterFirstMplsSBos = Misc2 "outer_first_mpls_s_bos" 0x017 1;
    /// Outer first MPLS TTL.
    Misc2OuterFirstMplsTtl = Misc2 "outer_first_mpls_ttl" 0x018 8;
    /// Inner first MPLS label.
    Misc2InnerFirstMplsLabel = Misc2 "inner_first_mpls_label" 0x020 20;
    /// Inner first MPLS EXP.
    Misc2InnerFirstMplsExp = Misc2 "inner_first_mpls_exp" 0x034 3;
    /// Inner first MPLS bottom of stack.
    Misc2InnerFirstMplsSBos = Misc2 "inner_first_mpls_s_bos" 0x037 1;
    /// Inner first MPLS TTL.
    Misc2InnerFirstMplsTtl = Misc2 "inner_first_mpls_ttl" 0x038 8;
    /// MPLS-over-GRE label.
    Misc2OuterFirstMplsOverGreLabel = Misc2 "outer_first_mpls_over_gre_label" 0x040 20;
    /// MPLS-over-GRE EXP.
    Misc2OuterFirstMplsOverGreExp = Misc2 "outer_first_mpls_over_gre_exp" 0x054 3;
    /// MPLS-over-GRE bottom of stack.
    Misc2OuterFirstMplsOverGreSBos = Misc2 "outer_first_mpls_over_gre_s_bos" 0x057 1;
    /// MPLS-over-GRE TTL.
    Misc2OuterFirstMplsOverGreTtl = Misc2 "outer_first_mpls_over_gre_ttl" 0x058 8;
    /// MPLS-over-UDP label.
    Misc2OuterFirstMplsOverUdpLabel = Misc2 "outer_first_mpls_over_udp_label" 0x060 20;
    /// MPLS-over-UDP EXP.
    Misc2OuterFirstMplsOverUdpExp = Misc2 "outer_first_mpls_over_udp_exp" 0x074 3;
    /// MPLS-over-UDP bottom of stack.
    Misc2OuterFirstMplsOverUdpSBos = Misc2 "outer_first_mpls_over_udp_s_bos" 0x077 1;
    /// MPLS-over-UDP TTL.
    Misc2OuterFirstMplsOverUdpTtl = Misc2 "outer_first_mpls_over_udp_ttl" 0x078 8;
    /// Metadata register C7, byte 16.
    Misc2MetadataRegC7 = Misc2 "metadata_reg_c_7" 0x080 32;
    /// Metadata register C6, byte 20.
    Misc2MetadataRegC6 = Misc2 "metadata_reg_c_6" 0x0a0 32;
    /// Metadata register C5, byte 24.
    Misc2MetadataRegC5 = Misc2 "metadata_reg_c_5" 0x0c0 32;
    /// Metadata register C4, byte 28.
    Misc2MetadataRegC4 = Misc2 "metadata_reg_c_4" 0x0e0 32;
    /// Metadata register C3, byte 32.
    Misc2MetadataRegC3 = Misc2 "metadata_reg_c_3" 0x100 32;
    /// Metadata register C2, byte 36.
    Misc2MetadataRegC2 = Misc2 "metadata_reg_c_2" 0x120 32;
    /// Metadata register C1, byte 40.
    Misc2MetadataRegC1 = Misc2 "metadata_reg_c_1" 0x140 32;
    /// Metadata register C0 (vport metadata in its upper half), byte 44.
    Misc2MetadataRegC0 = Misc2 "metadata_reg_c_0" 0x160 32;
    /// Metadata register A, byte 48.
    Misc2MetadataRegA = Misc2 "metadata_reg_a" 0x180 32;
}

impl PrmField {
    /// The field's row in [`FIELDS`].
    #[inline]
    pub fn def(self) -> &'static FieldDef {
        &FIELDS[self as usize]
    }

    /// `block.field` as the header names it.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The reg_c register `n` (0..=7) of misc2.
    pub fn reg_c(n: u8) -> Option<PrmField> {
        const REGS: [PrmField; 8] = [
            PrmField::Misc2MetadataRegC0,
            PrmField::Misc2MetadataRegC1,
            PrmField::Misc2MetadataRegC2,
            PrmField::Misc2MetadataRegC3,
            PrmField::Misc2MetadataRegC4,
            PrmField::Misc2MetadataRegC5,
            PrmField::Misc2MetadataRegC6,
            PrmField::Misc2MetadataRegC7,
        ];
        REGS.get(usize::from(n)).copied()
    }
}

impl fmt::Display for PrmField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why [`set`] or [`get`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PrmError {
    /// The value has bits above the field's width.
    #[error("{value:#x} is wider than {field} ({width} bits)")]
    ValueTooWide {
        field: PrmField,
        width: u8,
        value: u128,
    },
    /// The buffer ends before the field does.
    #[error("{field} ends at byte {need}, the buffer has {len}")]
    BufferTooShort {
        field: PrmField,
        need: usize,
        len: usize,
    },
}

/// Writes `value` into `field` of the `fte_match_param` buffer `buf` (a mask
/// or a value buffer). The one setter of the layout: it refuses a value
/// wider than the field and a buffer too short for it, and touches no bit
/// outside the field.
#[inline(always)]
pub fn set(buf: &mut [u8], field: PrmField, value: u128) -> Result<(), PrmError> {
    let d = field.def();
    if value & !d.max_value() != 0 {
        return Err(PrmError::ValueTooWide {
            field,
            width: d.width,
            value,
        });
    }
    let end = d.end_byte();
    let Some(bytes) = buf.get_mut(..end) else {
        return Err(PrmError::BufferTooShort {
            field,
            need: end,
            len: buf.len(),
        });
    };
    write_bits(bytes, usize::from(d.bit), usize::from(d.width), value);
    Ok(())
}

/// Reads `field` out of the `fte_match_param` buffer `buf`. The one getter of
/// the layout.
#[inline(always)]
pub fn get(buf: &[u8], field: PrmField) -> Result<u128, PrmError> {
    let d = field.def();
    let end = d.end_byte();
    let Some(bytes) = buf.get(..end) else {
        return Err(PrmError::BufferTooShort {
            field,
            need: end,
            len: buf.len(),
        });
    };
    Ok(read_bits(bytes, usize::from(d.bit), usize::from(d.width)))
}

/// Writes the `width` low bits of `v` at big-endian bit offset `off`.
/// `buf` holds at least the bytes the field touches (checked by [`set`]).
#[inline(always)]
fn write_bits(buf: &mut [u8], off: usize, width: usize, v: u128) {
    let start = off / 8;
    if off % 8 == 0 && width % 8 == 0 {
        // Byte-aligned: network byte order. Fixed-size copies for the widths
        // the table has, so a constant field compiles to plain stores.
        let b = v.to_be_bytes();
        match width / 8 {
            1 => buf[start] = b[15],
            2 => buf[start..start + 2].copy_from_slice(&b[14..]),
            3 => buf[start..start + 3].copy_from_slice(&b[13..]),
            4 => buf[start..start + 4].copy_from_slice(&b[12..]),
            6 => buf[start..start + 6].copy_from_slice(&b[10..]),
            16 => buf[start..start + 16].copy_from_slice(&b),
            n => buf[start..start + n].copy_from_slice(&b[16 - n..]),
        }
        return;
    }
    let end = off + width;
    for (byte, i) in buf[start..end.div_ceil(8)].iter_mut().zip(start..) {
        // Bits lo..hi of the buffer fall in byte i.
        let lo = off.max(8 * i);
        let hi = end.min(8 * i + 8);
        let shift = 8 * i + 8 - hi;
        let m = ((((1u16 << (hi - lo)) - 1) << shift) & 0xff) as u8;
        let chunk = (v >> (end - hi)) as u8;
        *byte = (*byte & !m) | ((chunk << shift) & m);
    }
}

/// Reads `width` bits at big-endian bit offset `off`.
#[inline(always)]
fn read_bits(buf: &[u8], off: usize, width: usize) -> u128 {
    let start = off / 8;
    if off % 8 == 0 && width % 8 == 0 {
        let n = width / 8;
        let mut b = [0u8; 16];
        b[16 - n..].copy_from_slice(&buf[start..start + n]);
        return u128::from_be_bytes(b);
    }
    let end = off + width;
    let mut v = 0u128;
    for (&byte, i) in buf[start..end.div_ceil(8)].iter().zip(start..) {
        let lo = off.max(8 * i);
        let hi = end.min(8 * i + 8);
        let n = hi - lo;
        let bits = (byte >> (8 * i + 8 - hi)) as u128 & ((1u128 << n) - 1);
        v = (v << n) | bits;
    }
    v
}

#[cfg(test)]
#[path = "tests/layout.rs"]
mod tests;

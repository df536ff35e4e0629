//! Between the wire (`openflow`) and the tables (`crate::rule`): OXM
//! matches ↔ [`Match`], instructions and actions ↔ [`Instructions`], a
//! FLOW_MOD → [`FlowMod`], rules → FLOW stats entries. Every refusal is the
//! OpenFlow error the spec names for it.
//!
//! One table ([`WIRE`]) says where each wire field lands in the key and
//! under which `ovs-fields` name (which carries the prerequisites, checked
//! by the same builder the flow text uses). Encoding picks, per key field,
//! the first entry whose prerequisite the match satisfies: OpenFlow basic
//! fields first, then Nicira's where 1.3 has none (`reg0`, `ip_frag`...),
//! and the ONF experimenter's `tcp_flags`.

use std::collections::HashMap;

use megaflow::{Field, Match, MeterId};
use openflow::action::{Action, Instruction, NX_VENDOR};
use openflow::flow::{command, flow_flags, NO_BUFFER, TABLE_ALL};
use openflow::oxm::{
    field_spec, ofb, Oxm, OxmMatch, CLASS_BASIC, CLASS_NXM0, CLASS_NXM1, CLASS_ONF,
    ONF_EXPERIMENTER,
};
use openflow::{FlowMod as WireFlowMod, OfpError};

use crate::rule::{
    CtAction, CtZone, FieldRange, FlowFlags, FlowMod, FlowModCommand, Instructions, OfAction,
    OfPort, RuleSpec,
};
use crate::text::{field_def, MatchBuilder};
use crate::tlv::TlvTable;
use crate::{Cookie, Priority, TableId};
use megaflow::tunnel::OptionSlot;
use openflow::oxm::{tun_metadata_index, NX_TUN_METADATA0};

/// How a wire value maps to key bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    /// The same number.
    Plain,
    /// OXM VLAN_VID (with OFPVID_PRESENT) → `vlan_tci` bits 0..12.
    VlanVid,
    /// VLAN_PCP → `vlan_tci` bits 13..15 (and the tag present).
    VlanPcp,
    /// NXM_OF_IP_TOS (the ToS byte) → DSCP.
    Tos,
    /// NXM_OF_IN_PORT (16 bits) → the 32-bit port: the reserved ports
    /// (0xff00 and up) are OpenFlow 1.1's (0xffffff00 and up), as Open
    /// vSwitch maps them (ovn-controller loads 0xffff, OFPP_NONE).
    Port16,
}

/// `NXM_OF_IN_PORT`'s header.
const NXM_OF_IN_PORT: u32 = 2;

/// A 16-bit port number as its 32-bit one (a wider value is as it is).
pub(crate) fn port16(v: u128) -> u128 {
    if (0xff00..=0xffff).contains(&v) {
        v | 0xffff_0000
    } else {
        v
    }
}

struct WireField {
    class: u16,
    field: u8,
    /// The `ovs-fields` name (prerequisites and writability).
    name: &'static str,
    key: Field,
    conv: Conv,
}

const fn w(class: u16, field: u8, name: &'static str, key: Field, conv: Conv) -> WireField {
    WireField {
        class,
        field,
        name,
        key,
        conv,
    }
}

use Conv::{Plain, Port16, Tos, VlanPcp, VlanVid};
use Field as F;
const B: u16 = CLASS_BASIC;
const N0: u16 = CLASS_NXM0;
const N1: u16 = CLASS_NXM1;
const ONF: u16 = CLASS_ONF;

/// Wire fields in encoding preference order (basic, then NXM_1 where 1.3
/// has nothing).
const WIRE: &[WireField] = &[
    w(B, 0, "in_port", F::InPort, Plain),
    w(B, 2, "metadata", F::Metadata, Plain),
    w(B, 3, "eth_dst", F::EthDst, Plain),
    w(B, 4, "eth_src", F::EthSrc, Plain),
    w(B, 5, "eth_type", F::EthType, Plain),
    w(B, 6, "vlan_vid", F::VlanTci, VlanVid),
    w(B, 7, "vlan_pcp", F::VlanTci, VlanPcp),
    w(B, 8, "ip_dscp", F::IpDscp, Plain),
    w(B, 9, "ip_ecn", F::IpEcn, Plain),
    w(B, 10, "ip_proto", F::IpProto, Plain),
    w(B, 11, "ipv4_src", F::Ipv4Src, Plain),
    w(B, 12, "ipv4_dst", F::Ipv4Dst, Plain),
    w(B, 13, "tcp_src", F::TpSrc, Plain),
    w(B, 14, "tcp_dst", F::TpDst, Plain),
    w(B, 15, "udp_src", F::TpSrc, Plain),
    w(B, 16, "udp_dst", F::TpDst, Plain),
    w(B, 17, "sctp_src", F::TpSrc, Plain),
    w(B, 18, "sctp_dst", F::TpDst, Plain),
    w(B, 19, "icmp_type", F::TpSrc, Plain),
    w(B, 20, "icmp_code", F::TpDst, Plain),
    w(B, 21, "arp_op", F::IpProto, Plain),
    w(B, 22, "arp_spa", F::Ipv4Src, Plain),
    w(B, 23, "arp_tpa", F::Ipv4Dst, Plain),
    w(B, 24, "arp_sha", F::ArpSha, Plain),
    w(B, 25, "arp_tha", F::ArpTha, Plain),
    w(B, 26, "ipv6_src", F::Ipv6Src, Plain),
    w(B, 27, "ipv6_dst", F::Ipv6Dst, Plain),
    w(B, 28, "ipv6_label", F::Ipv6Label, Plain),
    w(B, 29, "icmpv6_type", F::TpSrc, Plain),
    w(B, 30, "icmpv6_code", F::TpDst, Plain),
    w(B, 31, "nd_target", F::NdTarget, Plain),
    w(B, 32, "nd_sll", F::ArpSha, Plain),
    w(B, 33, "nd_tll", F::ArpTha, Plain),
    w(B, 38, "tun_id", F::TunId, Plain),
    w(N1, 0, "reg0", F::Reg0, Plain),
    w(N1, 1, "reg1", F::Reg1, Plain),
    w(N1, 2, "reg2", F::Reg2, Plain),
    w(N1, 3, "reg3", F::Reg3, Plain),
    w(N1, 4, "reg4", F::Reg4, Plain),
    w(N1, 5, "reg5", F::Reg5, Plain),
    w(N1, 6, "reg6", F::Reg6, Plain),
    w(N1, 7, "reg7", F::Reg7, Plain),
    w(N1, 8, "reg8", F::Reg8, Plain),
    w(N1, 9, "reg9", F::Reg9, Plain),
    w(N1, 10, "reg10", F::Reg10, Plain),
    w(N1, 11, "reg11", F::Reg11, Plain),
    w(N1, 12, "reg12", F::Reg12, Plain),
    w(N1, 13, "reg13", F::Reg13, Plain),
    w(N1, 14, "reg14", F::Reg14, Plain),
    w(N1, 15, "reg15", F::Reg15, Plain),
    w(N1, 26, "ip_frag", F::IpFrag, Plain),
    w(N1, 29, "nw_ttl", F::IpTtl, Plain),
    w(N1, 31, "tun_src", F::TunSrc, Plain),
    w(N1, 32, "tun_dst", F::TunDst, Plain),
    w(N1, 33, "pkt_mark", F::PktMark, Plain),
    w(N1, 104, "tun_flags", F::TunFlags, Plain),
    w(N1, 36, "recirc_id", F::RecircId, Plain),
    w(N1, 35, "dp_hash", F::DpHash, Plain),
    w(N1, 37, "conj_id", F::ConjId, Plain),
    w(N1, 105, "ct_state", F::CtState, Plain),
    w(N1, 106, "ct_zone", F::CtZone, Plain),
    w(N1, 107, "ct_mark", F::CtMark, Plain),
    w(N1, 108, "ct_label", F::CtLabel, Plain),
    w(N1, 119, "ct_nw_proto", F::CtNwProto, Plain),
    w(N1, 120, "ct_nw_src", F::CtNwSrc, Plain),
    w(N1, 121, "ct_nw_dst", F::CtNwDst, Plain),
    w(N1, 122, "ct_ipv6_src", F::CtIpv6Src, Plain),
    w(N1, 123, "ct_ipv6_dst", F::CtIpv6Dst, Plain),
    w(N1, 124, "ct_tp_src", F::CtTpSrc, Plain),
    w(N1, 125, "ct_tp_dst", F::CtTpDst, Plain),
    w(N1, 109, "tun_ipv6_src", F::TunIpv6Src, Plain),
    w(N1, 110, "tun_ipv6_dst", F::TunIpv6Dst, Plain),
    // As Open vSwitch sends it in OpenFlow 1.3 (1.5 has a basic field).
    w(ONF, 42, "tcp_flags", F::TcpFlags, Plain),
];

/// Wire fields decoded but never chosen for encoding: the Nicira
/// spellings of fields [`WIRE`] encodes another way.
const DECODE_ONLY: &[WireField] = &[
    w(N1, 34, "tcp_flags", F::TcpFlags, Plain),
    w(B, 42, "tcp_flags", F::TcpFlags, Plain),
    w(N1, 16, "tun_id", F::TunId, Plain),
    w(N1, 17, "arp_sha", F::ArpSha, Plain),
    w(N1, 18, "arp_tha", F::ArpTha, Plain),
    w(N1, 19, "ipv6_src", F::Ipv6Src, Plain),
    w(N1, 20, "ipv6_dst", F::Ipv6Dst, Plain),
    w(N1, 21, "icmpv6_type", F::TpSrc, Plain),
    w(N1, 22, "icmpv6_code", F::TpDst, Plain),
    w(N1, 23, "nd_target", F::NdTarget, Plain),
    w(N1, 24, "nd_sll", F::ArpSha, Plain),
    w(N1, 25, "nd_tll", F::ArpTha, Plain),
    w(N1, 27, "ipv6_label", F::Ipv6Label, Plain),
    w(N1, 28, "ip_ecn", F::IpEcn, Plain),
    w(N0, 0, "in_port", F::InPort, Port16),
    w(N0, 1, "eth_dst", F::EthDst, Plain),
    w(N0, 2, "eth_src", F::EthSrc, Plain),
    w(N0, 3, "eth_type", F::EthType, Plain),
    w(N0, 4, "vlan_tci", F::VlanTci, Plain),
    w(N0, 5, "nw_tos", F::IpDscp, Tos),
    w(N0, 6, "ip_proto", F::IpProto, Plain),
    w(N0, 7, "ipv4_src", F::Ipv4Src, Plain),
    w(N0, 8, "ipv4_dst", F::Ipv4Dst, Plain),
    w(N0, 9, "tcp_src", F::TpSrc, Plain),
    w(N0, 10, "tcp_dst", F::TpDst, Plain),
    w(N0, 11, "udp_src", F::TpSrc, Plain),
    w(N0, 12, "udp_dst", F::TpDst, Plain),
    w(N0, 13, "icmp_type", F::TpSrc, Plain),
    w(N0, 14, "icmp_code", F::TpDst, Plain),
    w(N0, 15, "arp_op", F::IpProto, Plain),
    w(N0, 16, "arp_spa", F::Ipv4Src, Plain),
    w(N0, 17, "arp_tpa", F::Ipv4Dst, Plain),
];

const BAD_MATCH: u16 = 4;
const BAD_ACTION: u16 = 2;
const BAD_INSTRUCTION: u16 = 3;
const FLOW_MOD_FAILED: u16 = 5;

fn wire_field(class: u16, field: u8) -> Option<&'static WireField> {
    // Every OXM of every flow mod is looked up: a map built once, the
    // first entry of a (class, field) winning.
    static BY_WIRE: std::sync::OnceLock<HashMap<(u16, u8), &'static WireField>> =
        std::sync::OnceLock::new();
    BY_WIRE
        .get_or_init(|| {
            let mut m = HashMap::new();
            for f in WIRE.iter().chain(DECODE_ONLY) {
                m.entry((f.class, f.field)).or_insert(f);
            }
            m
        })
        .get(&(class, field))
        .copied()
}

fn be(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b))
}

fn to_be(v: u128, width: usize) -> Vec<u8> {
    (0..width).rev().map(|i| (v >> (8 * i)) as u8).collect()
}

fn ones(bits: u8) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// The input port (`None` when not given) and the pipeline fields
/// (registers, metadata), as (field, value, mask), of a packet-in's
/// metadata as a controller sends it back (NXT_RESUME); its wide
/// registers already narrowed. Fields this switch does not know, and the
/// packet's own, are left: the packet brings those.
pub fn resume_metadata(m: &OxmMatch) -> (Option<u32>, Vec<(Field, u128, u128)>) {
    let mut in_port = None;
    let mut fields = Vec::new();
    for (wf, v, mask) in m.fields.iter().filter_map(|o| oxm_to_key(o).ok()) {
        if wf.key == F::InPort {
            in_port = Some(v as u32);
        } else if crate::wildcards::PIPELINE_FIELDS.contains(&wf.key) {
            fields.push((wf.key, v, mask));
        }
    }
    (in_port, fields)
}

/// An OXM as (field definition, key value, key mask).
fn oxm_to_key(o: &Oxm) -> Result<(&'static WireField, u128, u128), OfpError> {
    let wf = wire_field(o.class, o.field).ok_or(OfpError::new(BAD_MATCH, 6))?;
    let v = be(&o.value);
    let m = o.mask.as_deref().map(be);
    let bits = wf.key.layout().bits;
    let bad_value = OfpError::new(BAD_MATCH, 7);
    let (v, m) = match wf.conv {
        Plain => {
            let full = ones(bits);
            if v & !full != 0 || m.is_some_and(|m| m & !full != 0) {
                return Err(bad_value);
            }
            (v, m.unwrap_or(full))
        }
        VlanVid => {
            if v & !0x1fff != 0 {
                return Err(bad_value);
            }
            (v, m.unwrap_or(0x1fff) & 0x1fff)
        }
        VlanPcp => {
            if v > 7 {
                return Err(bad_value);
            }
            ((v << 13) | 0x1000, 0xf000)
        }
        Tos => ((v >> 2) & 0x3f, 0x3f),
        Port16 => (port16(v), ones(bits)),
    };
    Ok((wf, v, m))
}

/// The match an `ofp_match` describes; its prerequisites checked.
/// `packet_type` may name Ethernet, the only kind of packet this switch
/// has (so it matches nothing more); another is `BAD_VALUE`.
/// `tlv` places the `tun_metadata<n>` fields; one it does not map is
/// `NXFMFC_INVALID_TLV_FIELD`, as Open vSwitch answers.
pub fn match_from_wire(m: &OxmMatch, tlv: &TlvTable) -> Result<Match, OfpError> {
    let mut b = MatchBuilder::new(tlv);
    for o in &m.fields {
        if (o.class, o.field) == (CLASS_BASIC, ofb::PACKET_TYPE) {
            if o.value != [0, 0, 0, 0] {
                return Err(OfpError::new(BAD_MATCH, 7));
            }
            continue;
        }
        if let Some((slot, value, mask)) = tun_metadata_oxm(o, tlv, OfpError::new(BAD_MATCH, 7))? {
            let name = format!("tun_metadata{}", slot.index);
            b.apply_tun_metadata(&name, slot.index, Some((value, mask)))
                .map_err(|_| OfpError::new(BAD_MATCH, 10))?;
            continue;
        }
        let (wf, v, mask) = oxm_to_key(o)?;
        b.apply_value(wf.name, v, mask)
            .map_err(|_| OfpError::new(BAD_MATCH, 10))?;
    }
    b.finish().map_err(|_| OfpError::new(BAD_MATCH, 9))
}

/// The slot of `tun_metadata<index>`, or `NXFMFC_INVALID_TLV_FIELD`.
fn tun_metadata_slot(tlv: &TlvTable, index: u8) -> Result<OptionSlot, OfpError> {
    tlv.slot(u16::from(index))
        .ok_or(openflow::nx_tlv::err::INVALID_TLV_FIELD)
}

/// A `tun_metadata<n>` OXM (`None`: another field) as its slot, value
/// and mask in the option's own bits. Values are at most the option's
/// length (Open vSwitch's clients send the fewest bytes that hold them);
/// a longer one is `bad`.
fn tun_metadata_oxm(
    o: &Oxm,
    tlv: &TlvTable,
    bad: OfpError,
) -> Result<Option<(OptionSlot, u128, u128)>, OfpError> {
    let Some(index) = tun_metadata_index(o.class, o.field) else {
        return Ok(None);
    };
    let slot = tun_metadata_slot(tlv, index)?;
    let bytes = |b: &[u8]| {
        if b.len() > usize::from(slot.len) {
            return Err(bad);
        }
        Ok(be(b))
    };
    let value = bytes(&o.value)?;
    let mask = match &o.mask {
        Some(m) => bytes(m)?,
        None => slot.ones(),
    };
    Ok(Some((slot, value & mask, mask)))
}

/// The (class, field) an NXM/OXM header names.
fn header_parts(h: u32) -> (u16, u8) {
    ((h >> 16) as u16, ((h >> 9) & 0x7f) as u8)
}

/// The `n` of a header naming `NXM_NX_TUN_METADATA<n>`.
fn header_tun_metadata(h: u32) -> Option<u8> {
    let (class, field) = header_parts(h);
    tun_metadata_index(class, field)
}

/// Each [`WIRE`] entry's field definition and wire width and
/// maskability, looked up once (a dump converts every rule).
fn wire_defs() -> &'static [Option<(crate::text::FieldDef, usize, bool)>] {
    static DEFS: std::sync::OnceLock<Vec<Option<(crate::text::FieldDef, usize, bool)>>> =
        std::sync::OnceLock::new();
    DEFS.get_or_init(|| {
        WIRE.iter()
            .map(|wf| {
                let (width, maskable) = field_spec(wf.class, wf.field)?;
                Some((field_def(wf.name)?, width, maskable))
            })
            .collect()
    })
}

/// The fields of `m` as OXM, basic fields first.
pub fn match_to_wire(m: &Match, tlv: &TlvTable) -> OxmMatch {
    let mask = m.mask();
    let key = m.key();
    let mut fields = Vec::new();
    let present = mask.field(F::TunMdPresent) as u64;
    for slot in tlv.slots() {
        if present & slot.present_bit() == 0 {
            continue;
        }
        let bits = mask.field(F::TunOpts) & slot.mask();
        let width = usize::from(slot.len);
        let mk = bits >> slot.shift();
        fields.push(Oxm {
            class: N1,
            field: NX_TUN_METADATA0 + slot.index,
            value: to_be((key.field(F::TunOpts) & bits) >> slot.shift(), width),
            mask: (mk != slot.ones()).then(|| to_be(mk, width)),
        });
    }
    let mut done: Vec<Field> = Vec::new();
    for (wf, def) in WIRE.iter().zip(wire_defs()) {
        let bits = mask.field(wf.key);
        if bits == 0 || (done.contains(&wf.key) && wf.key != F::VlanTci) {
            continue;
        }
        let Some((def, width, maskable)) = *def else {
            continue;
        };
        if !def.prereq.holds(m) {
            continue;
        }
        let val = key.field(wf.key);
        let (v, mk) = match wf.conv {
            Plain => (val, bits),
            VlanVid => {
                if bits & 0x1fff == 0 {
                    continue;
                }
                (val & 0x1fff, bits & 0x1fff)
            }
            VlanPcp => {
                if bits & 0xe000 != 0xe000 {
                    continue;
                }
                ((val >> 13) & 7, 7)
            }
            Tos | Port16 => continue,
        };
        let full = match wf.conv {
            VlanVid => 0x1fff,
            VlanPcp => 7,
            _ => ones(wf.key.layout().bits),
        };
        fields.push(Oxm {
            class: wf.class,
            field: wf.field,
            value: to_be(v, width),
            mask: (mk != full && maskable).then(|| to_be(mk, width)),
        });
        done.push(wf.key);
    }
    OxmMatch { fields }
}

/// Which TABLE_FEATURES property a header list is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderList {
    /// MATCH: every field, the maskable ones with the has-mask bit.
    Match,
    /// WILDCARDS: every field, no has-mask bit (Open vSwitch refuses one
    /// there with BAD_MASK).
    Wildcards,
    /// WRITE/APPLY_SETFIELD: the fields actions may write.
    SetField,
}

/// The OXM headers of the fields this switch matches, for
/// TABLE_FEATURES, as the 32-bit words on the wire: an experimenter
/// field's header is followed by its experimenter id (and its length
/// counts it), as in a match.
pub fn wire_headers(list: HeaderList) -> Vec<u32> {
    let setfield = list == HeaderList::SetField;
    WIRE.iter()
        .filter(|wf| !setfield || field_def(wf.name).is_some_and(|d| d.writable))
        .filter_map(|wf| {
            let (width, maskable) = field_spec(wf.class, wf.field)?;
            let hm = maskable && list == HeaderList::Match;
            let onf = wf.class == CLASS_ONF;
            let len = if hm { 2 * width } else { width } + if onf { 4 } else { 0 };
            let header = (u32::from(wf.class) << 16)
                | (u32::from(wf.field) << 9)
                | (u32::from(hm) << 8)
                | len as u32;
            Some([Some(header), onf.then_some(ONF_EXPERIMENTER)])
        })
        .flatten()
        .flatten()
        .collect()
}

/// The key field an NXM/OXM header names (as `load`/`move` use them).
/// Bits `ofs..ofs+n_bits` of the field whose NXM/OXM header is `h`
/// (`move`, `push`, `pop`): at least one bit, all inside the field.
fn field_range(h: u32, ofs: u16, n_bits: u16) -> Result<FieldRange, OfpError> {
    let field = header_field(h)?;
    let fits = u32::from(ofs) + u32::from(n_bits) <= u32::from(field.layout().bits);
    if n_bits == 0 || !fits {
        return Err(OfpError::new(BAD_ACTION, 5));
    }
    Ok(FieldRange {
        field,
        ofs: ofs as u8,
        n_bits: n_bits as u8,
        opt: None,
    })
}

/// [`field_range`], or bits of the Geneve option a
/// `NXM_NX_TUN_METADATA<n>` header names (mapped by the bridge's TLV
/// table, else `INVALID_TLV_FIELD`).
pub(crate) fn range_from_wire(
    h: u32,
    ofs: u16,
    n_bits: u16,
    tlv: &TlvTable,
) -> Result<FieldRange, OfpError> {
    match header_tun_metadata(h) {
        Some(index) => FieldRange::option(tun_metadata_slot(tlv, index)?, ofs, n_bits)
            .ok_or(OfpError::new(BAD_ACTION, 5)),
        None => field_range(h, ofs, n_bits),
    }
}

fn header_field(h: u32) -> Result<Field, OfpError> {
    let (class, field) = header_parts(h);
    wire_field(class, field)
        .filter(|wf| matches!(wf.conv, Plain | Port16) || wf.key == F::VlanTci)
        .map(|wf| wf.key)
        .ok_or(OfpError::new(BAD_ACTION, 5))
}

/// The header `move`/`load` name a key field by.
fn field_header(f: Field) -> Option<u32> {
    // NXM_OF_VLAN_TCI carries the whole TCI.
    // The first plain spelling: the basic field, else Nicira's (the whole
    // TCI is NXM_OF_VLAN_TCI).
    // (Nicira's 32-bit header rather than an experimenter's 64-bit one.)
    let wf = WIRE
        .iter()
        .chain(DECODE_ONLY)
        .find(|wf| wf.key == f && wf.conv == Plain && wf.class != CLASS_ONF)?;
    wire_header(wf)
}

/// The 32-bit NXM/OXM header naming a wire field, unmasked.
fn wire_header(wf: &WireField) -> Option<u32> {
    let (width, _) = field_spec(wf.class, wf.field)?;
    Some((u32::from(wf.class) << 16) | (u32::from(wf.field) << 9) | width as u32)
}

/// The header a range of a field is named by in a rule matching `m`:
/// the low 16 bits of `in_port` are `NXM_OF_IN_PORT` (the 16-bit port,
/// as the translation reads and writes them); a key field two protocols
/// share (`ipv4_src` is ARP's `arp_spa`) by the name whose prerequisites
/// the match has, else its first plain name.
fn range_header(r: &FieldRange, m: &Match) -> Option<u32> {
    if let Some(slot) = r.opt {
        // Open vSwitch's header for a variable-length field: its widest
        // length (124 bytes), no mask.
        let field = openflow::oxm::NX_TUN_METADATA0 + slot.index;
        return Some(u32::from(CLASS_NXM1) << 16 | u32::from(field) << 9 | 124);
    }
    if r.field == F::InPort && r.ofs == 0 && r.n_bits == 16 {
        return Some(NXM_OF_IN_PORT);
    }
    let fitting = WIRE.iter().find(|wf| {
        wf.key == r.field
            && wf.conv == Plain
            && wf.class != CLASS_ONF
            && field_def(wf.name).is_some_and(|d| d.prereq.holds(m))
    });
    match fitting {
        Some(wf) => wire_header(wf),
        None => field_header(r.field),
    }
}

/// `NXAST_SAMPLE`.
const NX_SAMPLE: u16 = 29;

fn action_from_wire(a: &Action, table: TableId, tlv: &TlvTable) -> Result<OfAction, OfpError> {
    Ok(match a {
        Action::SetField(o) | Action::NxRegLoad2(o)
            if tun_metadata_index(o.class, o.field).is_some() =>
        {
            let bad = OfpError::new(BAD_ACTION, 13);
            let (slot, value, mask) = tun_metadata_oxm(o, tlv, bad)?.ok_or(bad)?;
            OfAction::SetTunMetadata { slot, value, mask }
        }
        // A masked set_field (1.5) is a reg_load2.
        Action::NxRegLoad2(o) | Action::SetField(o @ Oxm { mask: Some(_), .. }) => {
            let (wf, v, m) = oxm_to_key(o).map_err(|_| OfpError::new(BAD_ACTION, 13))?;
            if wf.conv != Plain || !field_def(wf.name).is_some_and(|d| d.writable) {
                return Err(OfpError::new(BAD_ACTION, 13));
            }
            OfAction::SetField {
                field: wf.key,
                value: v & m,
                mask: m,
            }
        }
        Action::NxRegLoad {
            ofs,
            n_bits,
            dst,
            value,
        } if header_tun_metadata(*dst).is_some() => {
            let index = header_tun_metadata(*dst).unwrap_or_default();
            let slot = tun_metadata_slot(tlv, index)?;
            let (value, mask) = reg_load_bits(*ofs, *n_bits, *value, 8 * u32::from(slot.len))?;
            OfAction::SetTunMetadata { slot, value, mask }
        }
        Action::Output { port, max_len } => OfAction::Output {
            port: OfPort::from_number(*port).ok_or(OfpError::new(BAD_ACTION, 4))?,
            max_len: *max_len,
        },
        Action::PushVlan(tpid) => {
            if !matches!(*tpid, 0x8100 | 0x88a8) {
                return Err(OfpError::new(BAD_ACTION, 5));
            }
            OfAction::PushVlan(*tpid)
        }
        Action::PopVlan => OfAction::PopVlan,
        Action::DecNwTtl => OfAction::DecTtl,
        Action::NxDecTtlCntIds(ids) => OfAction::DecTtlIds(ids.clone()),
        Action::NxClone(inner) => OfAction::Clone(actions_from_wire(inner, table, tlv)?),
        Action::NxLearn { learn2, body } => OfAction::Learn {
            learn2: *learn2,
            body: body.clone(),
        },
        // OFPAT_SET_NW_TTL: `mod_nw_ttl`, a write of the whole TTL.
        Action::SetNwTtl(v) => OfAction::SetField {
            field: F::IpTtl,
            value: u128::from(*v),
            mask: 0xff,
        },
        Action::SetField(o) => {
            let (wf, v, _) = oxm_to_key(o).map_err(|_| OfpError::new(BAD_ACTION, 13))?;
            let writable = field_def(wf.name).is_some_and(|d| d.writable);
            if !writable {
                return Err(OfpError::new(BAD_ACTION, 13));
            }
            match wf.conv {
                VlanVid => OfAction::SetField {
                    field: F::VlanTci,
                    value: (v & 0xfff) | 0x1000,
                    mask: 0x1fff,
                },
                VlanPcp => OfAction::SetField {
                    field: F::VlanTci,
                    value: v & 0xe000,
                    mask: 0xe000,
                },
                _ => OfAction::SetField {
                    field: wf.key,
                    value: v,
                    mask: ones(wf.key.layout().bits),
                },
            }
        }
        Action::NxResubmit { in_port, table: t } => {
            let t = match t {
                None | Some(255) => table,
                Some(t) if *t <= TableId::MAX.0 => TableId(*t),
                Some(_) => return Err(OfpError::new(BAD_ACTION, 5)),
            };
            // A 16-bit (OpenFlow 1.0) port number.
            match OfPort::from_number(port16(u128::from(*in_port)) as u32) {
                Some(OfPort::InPort) => OfAction::Resubmit(t),
                Some(port @ (OfPort::Port(_) | OfPort::Controller | OfPort::Local)) => {
                    OfAction::ResubmitPort(port, t)
                }
                _ => return Err(OfpError::new(BAD_ACTION, 5)),
            }
        }
        // The whole of NXM_OF_IN_PORT: a 16-bit port number.
        Action::NxRegLoad {
            ofs: 0,
            n_bits: 16,
            dst,
            value,
        } if *dst == NXM_OF_IN_PORT => OfAction::SetField {
            field: F::InPort,
            value: port16(u128::from(*value)),
            mask: ones(32),
        },
        Action::NxRegLoad {
            ofs,
            n_bits,
            dst,
            value,
        } => {
            let field = header_field(*dst)?;
            let bits = u32::from(field.layout().bits);
            let (value, mask) = reg_load_bits(*ofs, *n_bits, *value, bits)?;
            OfAction::SetField { field, value, mask }
        }
        Action::NxRegMove(c) | Action::CopyField(c) => OfAction::Move {
            src: range_from_wire(c.src, c.src_ofs, c.n_bits, tlv)?,
            dst: range_from_wire(c.dst, c.dst_ofs, c.n_bits, tlv)?,
        },
        Action::NxStack {
            pop,
            ofs,
            n_bits,
            field,
        } => {
            let range = range_from_wire(*field, *ofs, *n_bits, tlv)?;
            if *pop {
                OfAction::Pop(range)
            } else {
                OfAction::Push(range)
            }
        }
        Action::NxNote(bytes) => OfAction::Note(bytes.clone()),
        Action::NxCheckPktLarger {
            pkt_len,
            ofs,
            field,
        } => OfAction::CheckPktLarger {
            pkt_len: *pkt_len,
            dst: range_from_wire(*field, *ofs, 1, tlv)?,
        },
        &Action::NxConjunction {
            id,
            clause,
            n_clauses,
        } => OfAction::Conjunction {
            id,
            clause,
            n_clauses,
        },
        Action::Experimenter { experimenter, data } if *experimenter == NX_VENDOR => {
            let sub = data.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
            match (sub, data.get(2..4)) {
                (Some(NX_SAMPLE), Some(p)) => OfAction::Sample {
                    probability: u16::from_be_bytes([p[0], p[1]]),
                },
                _ => return Err(OfpError::new(BAD_ACTION, 3)),
            }
        }
        Action::Experimenter { .. } => return Err(OfpError::new(BAD_ACTION, 2)),
        Action::NxCt(ct) => OfAction::Ct(Box::new(ct_from_wire(ct)?)),
        Action::NxCtClear => OfAction::CtClear,
        Action::NxController(c) => OfAction::Controller(c.clone()),
        // NAT only inside a ct().
        Action::NxNat(_) => return Err(OfpError::new(BAD_ACTION, BAD_ARGUMENT)),
        Action::Group(g) => OfAction::Group(*g),
        // MPLS, PBB, queues, TTL copies: not in this switch.
        _ => return Err(OfpError::new(BAD_ACTION, 0)),
    })
}

/// An `NXAST_REG_LOAD` of `value` into bits `ofs..ofs + n_bits` of a
/// `width`-bit field, as (value, mask) in the field's layout.
fn reg_load_bits(ofs: u16, n_bits: u16, value: u64, width: u32) -> Result<(u128, u128), OfpError> {
    if u32::from(ofs) + u32::from(n_bits) > width || n_bits > 64 {
        return Err(OfpError::new(BAD_ACTION, 5));
    }
    if u128::from(value) & !ones(n_bits as u8) != 0 {
        return Err(OfpError::new(BAD_ACTION, 5));
    }
    Ok(openflow::regs::load_bits(ofs, n_bits, value))
}

/// An `NXAST_REG_LOAD` into the field `dst` names of the `mask` bits of
/// `value` (one run of at most 64 bits, else none).
fn reg_load(dst: u32, value: u128, mask: u128) -> Option<Action> {
    let ofs = mask.trailing_zeros();
    let n = (mask >> ofs).trailing_ones();
    if n == 0 || n > 64 || (mask >> ofs) >> n != 0 {
        return None;
    }
    Some(Action::NxRegLoad {
        ofs: ofs as u16,
        n_bits: n as u16,
        dst,
        value: (value >> ofs) as u64,
    })
}

fn actions_from_wire(
    v: &[Action],
    table: TableId,
    tlv: &TlvTable,
) -> Result<Vec<OfAction>, OfpError> {
    let mut out = Vec::with_capacity(v.len());
    for_each_narrow(v, |a| {
        out.push(action_from_wire(a, table, tlv)?);
        Ok(())
    })?;
    Ok(out)
}

/// Each action of `v`, an action on a wide register (`xreg`, `xxreg`)
/// as the actions on the registers it spans.
fn for_each_narrow(
    v: &[Action],
    mut f: impl FnMut(&Action) -> Result<(), OfpError>,
) -> Result<(), OfpError> {
    for a in v {
        match openflow::regs::narrow_action(a) {
            Some(parts) => parts.iter().try_for_each(&mut f)?,
            None => f(a)?,
        }
    }
    Ok(())
}

/// `OFPP_TABLE`: a PACKET_OUT's "through the tables".
const PORT_TABLE: u32 = 0xffff_fff9;

/// A PACKET_OUT's actions: as a rule's, plus `output:TABLE` (the packet
/// goes through the tables from table 0).
pub fn packet_out_actions(v: &[Action], tlv: &TlvTable) -> Result<Vec<OfAction>, OfpError> {
    let mut out = Vec::with_capacity(v.len());
    for_each_narrow(v, |a| {
        out.push(match a {
            Action::Output {
                port: PORT_TABLE, ..
            } => OfAction::Resubmit(TableId(0)),
            _ => action_from_wire(a, TableId(0), tlv)?,
        });
        Ok(())
    })?;
    Ok(out)
}

/// The first action of a refused flow mod that is refused on its own,
/// described for a log line (a Nicira subtype by number, any other as
/// decoded), if one is.
pub fn refused_action(fm: &WireFlowMod, tlv: &TlvTable) -> Option<String> {
    let table = TableId(fm.table_id.min(TableId::MAX.0));
    fm.instructions
        .iter()
        .flat_map(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
        .find(|a| actions_from_wire(std::slice::from_ref(*a), table, tlv).is_err())
        .map(|a| match a {
            Action::Experimenter { experimenter, data } if *experimenter == NX_VENDOR => data
                .get(..2)
                .map(|b| format!("Nicira action subtype {}", u16::from_be_bytes([b[0], b[1]])))
                .unwrap_or_else(|| "a Nicira action without a subtype".into()),
            other => {
                let mut text = format!("{other:?}");
                text.truncate(200);
                text
            }
        })
}

/// The instruction set of a flow mod for `table`.
pub fn instructions_from_wire(
    v: &[Instruction],
    table: TableId,
    tlv: &TlvTable,
) -> Result<Instructions, OfpError> {
    let mut i = Instructions::default();
    let mut seen = Vec::new();
    for ins in v {
        if seen.contains(&ins.ty()) {
            return Err(OfpError::new(BAD_INSTRUCTION, 1));
        }
        seen.push(ins.ty());
        match ins {
            Instruction::GotoTable(t) => {
                if *t > TableId::MAX.0 {
                    return Err(OfpError::new(BAD_INSTRUCTION, 2));
                }
                i.goto_table = Some(TableId(*t));
            }
            Instruction::WriteMetadata { value, mask } => i.write_metadata = Some((*value, *mask)),
            Instruction::WriteActions(a) => i.write = Some(actions_from_wire(a, table, tlv)?),
            // 1.5's meter is an action; it acts first, as the
            // instruction does.
            Instruction::ApplyActions(a) => {
                let mut rest = Vec::with_capacity(a.len());
                for x in a {
                    match x {
                        Action::Meter(m) if i.meter.is_none() => i.meter = Some(MeterId(*m)),
                        Action::Meter(_) => return Err(OfpError::new(BAD_INSTRUCTION, 1)),
                        _ => rest.push(x.clone()),
                    }
                }
                i.apply = actions_from_wire(&rest, table, tlv)?
            }
            Instruction::ClearActions => i.clear_actions = true,
            Instruction::Meter(m) => i.meter = Some(MeterId(*m)),
            Instruction::Experimenter { .. } => return Err(OfpError::new(BAD_INSTRUCTION, 5)),
        }
    }
    if i.conjunction_conflict().is_some() {
        return Err(openflow::action::BAD_CONJUNCTION);
    }
    Ok(i)
}

fn action_to_wire(a: &OfAction, m: &Match) -> Option<Action> {
    let oxm = |class, field, v: u128| {
        let (width, _) = field_spec(class, field)?;
        Some(Action::SetField(Oxm {
            class,
            field,
            value: to_be(v, width),
            mask: None,
        }))
    };
    Some(match a {
        OfAction::Output { port, max_len } => Action::Output {
            port: port.number(),
            max_len: *max_len,
        },
        OfAction::PushVlan(t) => Action::PushVlan(*t),
        OfAction::PopVlan => Action::PopVlan,
        OfAction::SetVlanVid(v) => return oxm(B, 6, u128::from(*v) | 0x1000),
        OfAction::SetVlanPcp(p) => return oxm(B, 7, u128::from(*p)),
        OfAction::DecTtl => Action::DecNwTtl,
        OfAction::DecTtlIds(ids) => Action::NxDecTtlCntIds(ids.clone()),
        OfAction::Learn { learn2, body } => Action::NxLearn {
            learn2: *learn2,
            body: body.clone(),
        },
        OfAction::Clone(inner) => Action::NxClone(
            inner
                .iter()
                .map(|a| action_to_wire(a, m))
                .collect::<Option<Vec<_>>>()?,
        ),
        OfAction::Group(g) => Action::Group(*g),
        OfAction::Resubmit(t) => Action::NxResubmit {
            in_port: 0xfff8,
            table: Some(t.0),
        },
        OfAction::ResubmitPort(p, t) => Action::NxResubmit {
            in_port: u16::try_from(p.number() & 0xffff).ok()?,
            table: Some(t.0),
        },
        OfAction::Sample { probability } => {
            let mut data = NX_SAMPLE.to_be_bytes().to_vec();
            data.extend_from_slice(&probability.to_be_bytes());
            data.extend_from_slice(&[0; 12]);
            Action::Experimenter {
                experimenter: NX_VENDOR,
                data,
            }
        }
        OfAction::SetField {
            field: F::IpTtl,
            value,
            mask: 0xff,
        } => Action::SetNwTtl(*value as u8),
        // A write of in_port goes by its 16-bit name (OXM's IN_PORT is not
        // writable), as Open vSwitch writes it.
        OfAction::SetField {
            field: F::InPort,
            value,
            mask: 0xffff_ffff,
        } if !(0xff00..0xffff_ff00).contains(value) => Action::NxRegLoad {
            ofs: 0,
            n_bits: 16,
            dst: NXM_OF_IN_PORT,
            value: (*value & 0xffff) as u64,
        },
        OfAction::SetField { field, value, mask } => {
            let full = ones(field.layout().bits);
            if *field == F::VlanTci && *mask == 0x1fff {
                return oxm(B, 6, value & 0x1fff);
            }
            if *field == F::VlanTci && *mask == 0xe000 {
                return oxm(B, 7, (value >> 13) & 7);
            }
            if *mask == full {
                // The field's encoding the match's prerequisites pick.
                if let Some(wf) = WIRE.iter().find(|wf| {
                    wf.key == *field
                        && wf.conv == Plain
                        && field_def(wf.name).is_some_and(|d| d.prereq.holds(m))
                }) {
                    return oxm(wf.class, wf.field, *value);
                }
            }
            // A contiguous part of a field: NXAST_REG_LOAD.
            reg_load(field_header(*field)?, *value, *mask)?
        }
        OfAction::SetTunMetadata { slot, value, mask } => {
            let width = usize::from(slot.len);
            let whole = *mask == slot.ones();
            let oxm = Oxm {
                class: N1,
                field: NX_TUN_METADATA0 + slot.index,
                value: to_be(*value, width),
                mask: (!whole).then(|| to_be(*mask, width)),
            };
            // Masked: NXAST_REG_LOAD2, as Open vSwitch sends it.
            if whole {
                Action::SetField(oxm)
            } else {
                Action::NxRegLoad2(oxm)
            }
        }
        OfAction::Move { src, dst } => Action::NxRegMove(openflow::action::FieldCopy {
            n_bits: u16::from(src.n_bits),
            src_ofs: src.named_ofs(),
            dst_ofs: dst.named_ofs(),
            src: range_header(src, m)?,
            dst: range_header(dst, m)?,
        }),
        OfAction::Push(f) | OfAction::Pop(f) => Action::NxStack {
            pop: matches!(a, OfAction::Pop(_)),
            ofs: f.named_ofs(),
            n_bits: u16::from(f.n_bits),
            field: range_header(f, m)?,
        },
        OfAction::Note(bytes) => Action::NxNote(bytes.clone()),
        OfAction::CheckPktLarger { pkt_len, dst } => Action::NxCheckPktLarger {
            pkt_len: *pkt_len,
            ofs: dst.named_ofs(),
            field: range_header(dst, m)?,
        },
        &OfAction::Conjunction {
            id,
            clause,
            n_clauses,
        } => Action::NxConjunction {
            id,
            clause,
            n_clauses,
        },
        OfAction::Ct(ct) => ct_to_wire(ct, m)?,
        OfAction::CtClear => Action::NxCtClear,
        OfAction::Controller(c) => Action::NxController(c.clone()),
    })
}

/// OFPBAC_BAD_ARGUMENT.
const BAD_ARGUMENT: u16 = 5;

/// `NXAST_CT` as the tables take it: flags known, a 16-bit zone field,
/// no helper, and inside only NAT and writes of `ct_mark`/`ct_label`
/// (those with `commit`), as Open vSwitch checks.
fn ct_from_wire(ct: &openflow::nx_ct::NxCt) -> Result<CtAction, OfpError> {
    use openflow::nx_ct::{CT_F_COMMIT, CT_F_FORCE, CT_RECIRC_NONE};
    let bad = OfpError::new(BAD_ACTION, BAD_ARGUMENT);
    if ct.flags & !(CT_F_COMMIT | CT_F_FORCE) != 0 || ct.alg != 0 {
        return Err(bad);
    }
    let zone = if ct.zone_src == 0 {
        CtZone::Imm(ct.zone)
    } else {
        let field = header_field(ct.zone_src)?;
        let (ofs, n_bits) = (ct.zone >> 6, (ct.zone & 0x3f) + 1);
        if n_bits != 16 || u32::from(ofs) + 16 > u32::from(field.layout().bits) {
            return Err(bad);
        }
        CtZone::Field(FieldRange {
            field,
            ofs: ofs as u8,
            n_bits: 16,
            opt: None,
        })
    };
    let table = match ct.recirc_table {
        CT_RECIRC_NONE => None,
        t if t <= TableId::MAX.0 => Some(TableId(t)),
        _ => return Err(bad),
    };
    let commit = ct.flags & CT_F_COMMIT != 0;
    let mut out = CtAction {
        commit,
        force: ct.flags & CT_F_FORCE != 0,
        table,
        zone,
        nat: None,
        exec: Vec::new(),
    };
    for_each_narrow(&ct.actions, |a| {
        match a {
            Action::NxNat(n) => out.nat = Some(nat_from_wire(n)?),
            Action::SetField(o) | Action::NxRegLoad2(o) => {
                let (wf, v, m) = oxm_to_key(o).map_err(|_| bad)?;
                if !matches!(wf.key, F::CtMark | F::CtLabel) || !commit {
                    return Err(bad);
                }
                out.exec.push(OfAction::SetField {
                    field: wf.key,
                    value: v & m,
                    mask: m,
                });
            }
            Action::NxRegLoad {
                ofs,
                n_bits,
                dst,
                value,
            } => {
                let field = header_field(*dst)?;
                if !matches!(field, F::CtMark | F::CtLabel) || !commit {
                    return Err(bad);
                }
                let (value, mask) =
                    reg_load_bits(*ofs, *n_bits, *value, u32::from(field.layout().bits))?;
                out.exec.push(OfAction::SetField { field, value, mask });
            }
            // A move into the mark or label: evaluated when translated.
            Action::NxRegMove(c) | Action::CopyField(c) => {
                let src = field_range(c.src, c.src_ofs, c.n_bits)?;
                let dst = field_range(c.dst, c.dst_ofs, c.n_bits)?;
                if !matches!(dst.field, F::CtMark | F::CtLabel) || !commit {
                    return Err(bad);
                }
                out.exec.push(OfAction::Move { src, dst });
            }
            _ => return Err(bad),
        }
        Ok(())
    })?;
    Ok(out)
}

fn nat_from_wire(n: &openflow::nx_ct::NxNat) -> Result<conntrack::NatSpec, OfpError> {
    use conntrack::{Addr, AddrRange, NatKind, NatRange, NatSpec};
    use openflow::nx_ct::*;
    let kind = match (n.flags & NAT_F_SRC != 0, n.flags & NAT_F_DST != 0) {
        (true, _) => NatKind::Src,
        (_, true) => NatKind::Dst,
        // A bare `nat`.
        _ => return Ok(NatSpec { range: None }),
    };
    let addrs = match (n.ipv4_min, n.ipv4_max, n.ipv6_min, n.ipv6_max) {
        (Some(lo), hi, None, None) => Some(AddrRange {
            min: Addr::v4(lo),
            max: Addr::v4(hi.unwrap_or(lo)),
            v6: false,
        }),
        (None, None, Some(lo), hi) => Some(AddrRange {
            min: Addr(lo),
            max: Addr(hi.unwrap_or(lo)),
            v6: true,
        }),
        _ => None,
    };
    let port_min = n.proto_min.unwrap_or(0);
    Ok(NatSpec {
        range: Some(NatRange {
            kind,
            addrs,
            port_min,
            port_max: n.proto_max.unwrap_or(port_min),
            random: n.flags & NAT_F_PROTO_RANDOM != 0,
            hash: n.flags & NAT_F_PROTO_HASH != 0,
            persistent: n.flags & NAT_F_PERSISTENT != 0,
        }),
    })
}

/// `ct(...)` as Open vSwitch encodes it: NXAST_CT, NAT first inside.
fn ct_to_wire(ct: &CtAction, m: &Match) -> Option<Action> {
    use openflow::nx_ct::*;
    let (zone_src, zone) = match ct.zone {
        CtZone::Imm(z) => (0, z),
        CtZone::Field(r) => (
            field_header(r.field)?,
            (u16::from(r.ofs) << 6) | (u16::from(r.n_bits) - 1),
        ),
    };
    let mut actions = Vec::new();
    if let Some(n) = &ct.nat {
        actions.push(Action::NxNat(nat_to_wire(n)));
    }
    for a in &ct.exec {
        actions.push(action_to_wire(a, m)?);
    }
    Some(Action::NxCt(Box::new(NxCt {
        flags: if ct.commit { CT_F_COMMIT } else { 0 } | if ct.force { CT_F_FORCE } else { 0 },
        zone_src,
        zone,
        recirc_table: ct.table.map_or(CT_RECIRC_NONE, |t| t.0),
        alg: 0,
        actions,
    })))
}

/// A NAT as ovs-ofctl sends it: a one-address (one-port) range carries
/// only its minimum.
fn nat_to_wire(n: &conntrack::NatSpec) -> openflow::nx_ct::NxNat {
    use openflow::nx_ct::*;
    let Some(r) = n.range else {
        return NxNat::default();
    };
    let mut w = NxNat {
        flags: match r.kind {
            conntrack::NatKind::Src => NAT_F_SRC,
            conntrack::NatKind::Dst => NAT_F_DST,
        } | if r.persistent { NAT_F_PERSISTENT } else { 0 }
            | if r.hash { NAT_F_PROTO_HASH } else { 0 }
            | if r.random { NAT_F_PROTO_RANDOM } else { 0 },
        ..NxNat::default()
    };
    if let Some(a) = r.addrs {
        let one = a.min == a.max;
        if a.v6 {
            w.ipv6_min = Some(a.min.0);
            w.ipv6_max = (!one).then_some(a.max.0);
        } else {
            let b = |x: &conntrack::Addr| [x.0[0], x.0[1], x.0[2], x.0[3]];
            w.ipv4_min = Some(b(&a.min));
            w.ipv4_max = (!one).then(|| b(&a.max));
        }
        if r.port_min != 0 {
            w.proto_min = Some(r.port_min);
            w.proto_max = (r.port_max != r.port_min).then_some(r.port_max);
        }
    }
    w
}

/// A rule's instructions on the wire (`m` picks field encodings). An
/// action with no wire form is left out.
pub fn instructions_to_wire(i: &Instructions, m: &Match) -> Vec<Instruction> {
    let acts = |v: &[OfAction]| v.iter().filter_map(|a| action_to_wire(a, m)).collect();
    let mut out = Vec::new();
    if let Some(id) = i.meter {
        out.push(Instruction::Meter(id.0));
    }
    if !i.apply.is_empty() {
        out.push(Instruction::ApplyActions(acts(&i.apply)));
    }
    if i.clear_actions {
        out.push(Instruction::ClearActions);
    }
    if let Some(w) = &i.write {
        out.push(Instruction::WriteActions(acts(w)));
    }
    if let Some((value, mask)) = i.write_metadata {
        out.push(Instruction::WriteMetadata { value, mask });
    }
    if let Some(t) = i.goto_table {
        out.push(Instruction::GotoTable(t.0));
    }
    out
}

/// A FLOW_MOD as the tables take it.
pub fn flow_mod_from_wire(fm: &WireFlowMod, tlv: &TlvTable) -> Result<FlowMod, OfpError> {
    let cmd = match fm.command {
        command::ADD => FlowModCommand::Add,
        command::MODIFY => FlowModCommand::Modify,
        command::MODIFY_STRICT => FlowModCommand::ModifyStrict,
        command::DELETE => FlowModCommand::Delete,
        command::DELETE_STRICT => FlowModCommand::DeleteStrict,
        _ => return Err(OfpError::new(FLOW_MOD_FAILED, 6)),
    };
    let known = flow_flags::SEND_FLOW_REM
        | flow_flags::CHECK_OVERLAP
        | flow_flags::RESET_COUNTS
        | flow_flags::NO_PKT_COUNTS
        | flow_flags::NO_BYT_COUNTS;
    if fm.flags & !known != 0 {
        return Err(OfpError::new(FLOW_MOD_FAILED, 7));
    }
    if fm.buffer_id != NO_BUFFER {
        // No buffers (FEATURES says 0).
        return Err(OfpError::BUFFER_UNKNOWN);
    }
    let table = match fm.table_id {
        TABLE_ALL if cmd == FlowModCommand::Add => return Err(OfpError::new(FLOW_MOD_FAILED, 2)),
        TABLE_ALL => None,
        // Open vSwitch's hidden table: OFPBRC_EPERM, as it answers.
        254 => return Err(OfpError::new(1, 5)),
        t if t > TableId::MAX.0 => return Err(OfpError::new(FLOW_MOD_FAILED, 2)),
        t => Some(TableId(t)),
    };
    let matched = match_from_wire(&fm.matched, tlv)?;
    let instructions = instructions_from_wire(&fm.instructions, table.unwrap_or(TableId(0)), tlv)?;
    // out_port filters deletes only; adds and modifies ignore it (os-ken
    // sends 0 there).
    let out_port = match cmd {
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
            OfPort::from_number(fm.out_port).ok_or(OfpError::BAD_PORT)?
        }
        _ => OfPort::Any,
    };
    let f = fm.flags;
    Ok(FlowMod {
        command: cmd,
        table,
        rule: RuleSpec {
            table: table.unwrap_or(TableId(0)),
            priority: Priority(fm.priority),
            matched,
            cookie: Cookie(fm.cookie),
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            importance: fm.importance,
            flags: FlowFlags {
                send_flow_rem: f & flow_flags::SEND_FLOW_REM != 0,
                check_overlap: f & flow_flags::CHECK_OVERLAP != 0,
                reset_counts: f & flow_flags::RESET_COUNTS != 0,
                no_packet_counts: f & flow_flags::NO_PKT_COUNTS != 0,
                no_byte_counts: f & flow_flags::NO_BYT_COUNTS != 0,
            },
            instructions,
        },
        cookie_mask: fm.cookie_mask,
        out_port,
        out_group: (fm.out_group != openflow::group::GROUP_ANY).then_some(fm.out_group),
    })
}

/// A rule's flags on the wire.
pub fn flags_to_wire(f: &FlowFlags) -> u16 {
    let mut v = 0;
    for (on, bit) in [
        (f.send_flow_rem, flow_flags::SEND_FLOW_REM),
        (f.check_overlap, flow_flags::CHECK_OVERLAP),
        (f.reset_counts, flow_flags::RESET_COUNTS),
        (f.no_packet_counts, flow_flags::NO_PKT_COUNTS),
        (f.no_byte_counts, flow_flags::NO_BYT_COUNTS),
    ] {
        if on {
            v |= bit;
        }
    }
    v
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;

/// A group bucket's actions as the switch runs them.
pub fn bucket_actions_from_wire(v: &[Action], tlv: &TlvTable) -> Result<Vec<OfAction>, OfpError> {
    actions_from_wire(v, TableId(0), tlv)
}

/// A group bucket's actions on the wire (an action with no wire form is
/// left out).
pub fn bucket_actions_to_wire(v: &[OfAction]) -> Vec<Action> {
    let any = Match::catch_all();
    v.iter().filter_map(|a| action_to_wire(a, &any)).collect()
}

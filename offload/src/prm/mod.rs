//! # prm: megaflow matches as the device's `fte_match_param` bytes
//!
//! The Direct Rule API takes a match as two buffers in the device's own
//! layout (the PRM's `fte_match_param`): a matcher's *mask* and a rule's
//! *value*, plus `match_criteria_enable`, the bitmap of the 64-byte blocks
//! (outer headers, misc, inner headers, misc2, ...) that the mask uses. This
//! module turns a megaflow [`Match`](megaflow::Match) into those bytes
//! ([`encode`]) and back ([`decode`]); the `sim` backend decodes the same
//! bytes the `mlx5` backend hands to `mlx5dv_dr_matcher_create` and
//! `mlx5dv_dr_rule_create`.
//!
//! ## Layout as data
//!
//! [`layout`] holds the whole layout as one table of (block, field, bit
//! offset, width), [`FIELDS`], each row checked against rdma-core's
//! `providers/mlx5/mlx5_ifc.h`, and the one bounds-checked setter and getter,
//! [`set`] and [`get`], that every byte of a buffer is written and read
//! through.
//!
//! ## Translation
//!
//! [`encode`] works like Open vSwitch's offload translators: it *consumes*
//! the megaflow mask field by field, one translator per layer (source port,
//! L2 and VLANs, L3, L4) writing mask and value symmetrically, and refuses
//! the flow with [`Unsupported`] — naming the megaflow field and the reason
//! — as soon as a field cannot be expressed, or when mask bits are left that
//! no translator took. Such a flow stays in software. Nothing allocates, the
//! output is two fixed arrays, and [`encode_into`] reuses a caller's buffer,
//! clearing only the blocks it used (about 40 ns for a 5-tuple megaflow).
//!
//! [`decode`] is the inverse and the *reader of untrusted bytes*: any
//! `(criteria, mask, value)` goes through [`Encoded::from_bytes`] (lengths,
//! value bits inside the mask) and then is consumed field by field the same
//! way, so every mask bit it does not understand is an error naming the PRM
//! field, as `mlx5dv_dr_matcher_create` answers EOPNOTSUPP for a mask it
//! cannot consume.
//!
//! ## Device rules the encoding follows (and decoding enforces)
//!
//! - **IP version.** Direct Rule picks its IPv4/IPv6 parsers from
//!   `outer.ip_version` *in the mask*, which must hold 4 or 6 (not 0xf), and
//!   the rule's value must hold the same number ("IP version in matcher mask
//!   and rule should be equal and set to 4, 6 or 0", mlx5dv_dr man page;
//!   `dr_ste_build_pre_check_spec` in providers/mlx5/dr_ste.c). Without it no
//!   L3/L4 field is consumed. So an exact IPv4/IPv6 `eth_type` is encoded as
//!   *both* `ethertype` (exact) and `ip_version` (4 or 6); decoding accepts
//!   `ip_version` alone as the same exact `eth_type`.
//! - **VLAN tags.** `cvlan_tag`/`svlan_tag` are one qualifier in the device
//!   (`first_vlan_qualifier` in dr_ste_v1.c): none, C-VLAN (TPID 0x8100) or
//!   S-VLAN (0x88a8); either mask bit masks the whole qualifier. "Tagged with
//!   any TPID" is not expressible, so a megaflow that matches tag presence
//!   must also match `vlan_tpid` exactly; "untagged" is both bits masked to 0.
//!   Same for the second tag in misc (`outer_second_cvlan_tag`, bit 0 of
//!   misc byte 12, and `outer_second_svlan_tag`, bit 2). The key's
//!   `VLAN_PRESENT` bit sits where the CFI is, so the real CFI is never in a
//!   key and `first_cfi` is never matched.
//! - **Ethertype.** Exact only, and an ethertype proper (>= 0x0600): the key
//!   stores 802.3 frames as 0x05ff and LLC/SNAP frames under their SNAP type,
//!   the device sees the length field, so a partial mask could match frames
//!   the megaflow does not. A third tag (eth_type 0x8100/0x88a8) is refused.
//! - **Fragments.** The device has one `frag` bit ("is a fragment"); the key
//!   has `FRAG_ANY` and `FRAG_LATER`. `ip_frag` with mask `FRAG_ANY` maps to
//!   it; `(0, FRAG_ANY|FRAG_LATER)` ("not a fragment") is the same set and
//!   is accepted (decoding gives the `FRAG_ANY` form), as are mask bits
//!   above those two under value 0 (`set_exact` gives 0xff); first-vs-later
//!   is refused.
//! - **L4 ports.** The device has separate TCP and UDP port fields, so ports
//!   need `ip_proto` exactly 6 or 17; SCTP and ICMP type/code are refused.
//!   `tcp_flags` needs `ip_proto` 6 and fits 9 bits (NS..FIN).
//! - **IPv6 next header.** The key's `ip_proto` is the protocol after the
//!   extension headers; to stay sound whatever the device reports for
//!   extension headers, IPv6 `ip_proto` must be exact and not an extension
//!   header number (0, 43, 44, 51, 60).
//! - **Source port.** `in_port` must be exact. It becomes either
//!   `misc.source_port` = the vport (Direct Rule refuses a partial
//!   source_port mask, dr_ste.c), or, when the firmware tags packets with
//!   vport metadata, `misc2.metadata_reg_c_0` under the configured mask
//!   ([`SourcePortMode`]).
//! - **Tunnel packets.** A megaflow whose `in_port` is a tunnel port
//!   ([`PortMap::tunnel`]) matches a packet the device sees *before*
//!   decap, on the uplink: the source port is the uplink's, the `tun_*`
//!   fields are the outer headers (`tun_src`/`tun_dst` the IPv4 or IPv6
//!   addresses, with the ethertype and `ip_version` they imply; UDP;
//!   `frag` 0, as software decapsulates no fragment; `tun_tp_dst` the UDP
//!   port, exact and the kind's IANA port, the only ones the device
//!   parses a tunnel on; `tun_tp_src`, `tun_ttl`, `tun_tos` as DSCP and
//!   ECN), `tun_id` the VNI (`misc.vxlan_vni` or `misc.geneve_vni`; bits
//!   above 24 never match), Geneve's OAM flag `misc.geneve_oam` and its
//!   Ethernet payload type; and the packet's own fields go to
//!   `inner_headers` (and misc's `inner_second_*`, inner flow label). The
//!   rule's first action is the decap. A megaflow of any other port
//!   matches zero tunnel metadata, which always holds there (and is
//!   dropped); any other value is refused. [`decode`] reads no tunnel
//!   rule: it refuses the inner block and the VNI fields by name.
//!
//! Callers: the offload manager encodes each megaflow it offers to the
//! device (an [`Unsupported`] becomes the flow's "not offloaded" reason);
//! the backends take the [`Encoded`] bytes, and the `sim` backend reads rule
//! buffers back through [`Encoded::from_bytes`], [`decode`] and the field
//! table.
//!
//! Thread-safety: pure functions over plain values.

mod decode;
mod encode;
pub mod layout;

use std::collections::HashMap;
use std::fmt;

use megaflow::key::FastBuild;
use megaflow::{Field, PortNo};
use thiserror::Error;

use crate::Vport;

pub use decode::decode;
pub use encode::{encode, encode_into};
pub use layout::{
    get, set, Block, FieldDef, PrmError, PrmField, BLOCK_LEN, CRITERIA_ALL, ENCODED_LEN, FIELDS,
    MATCH_PARAM_LEN,
};

/// An `fte_match_param` buffer (as long as [`ENCODED_LEN`]) with each
/// metadata register reg_c_`n` set to `v`: a mask or a value over misc2.
pub fn reg_c_match(values: &[(u8, u32)]) -> Vec<u8> {
    let mut b = vec![0u8; ENCODED_LEN];
    for &(n, v) in values {
        if let Some(f) = PrmField::reg_c(n) {
            // A 32-bit value in a 32-bit field of a buffer that holds misc2.
            let _ = set(&mut b, f, u128::from(v));
        }
    }
    b
}

/// How FDB rules name the port a packet came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourcePortMode {
    /// `misc.source_port` = the vport number, exact.
    MiscSourcePort,
    /// The firmware tags each packet with its vport's metadata in
    /// `metadata_reg_c_0`: the rule matches `reg_c_0 & mask == tag << shift`,
    /// where the tag comes from [`PortMap::metadata_tag`].
    /// `mlx5dv_query_port(..., MLX5DV_QUERY_PORT_VPORT_REG_C0)` reports the
    /// value and mask per vport: `shift` is the mask's trailing zeros and the
    /// tag is `value >> shift`.
    Metadata { mask: u32, shift: u8 },
}

impl SourcePortMode {
    /// Linux's layout: the vport metadata in the upper 16 bits of reg_c_0.
    pub const REG_C0_UPPER_16: SourcePortMode = SourcePortMode::Metadata {
        mask: 0xffff_0000,
        shift: 16,
    };
}

/// Datapath port numbers ↔ eSwitch vports, and vports ↔ their reg_c_0
/// metadata tags. The defaults make the tag the vport number, as the `sim`
/// backend models it.
pub trait PortMap {
    /// The vport behind a datapath port, if it is an eSwitch port.
    fn vport(&self, port: PortNo) -> Option<Vport>;
    /// The datapath port of a vport.
    fn port(&self, vport: Vport) -> Option<PortNo>;
    /// The vport's metadata tag for [`SourcePortMode::Metadata`].
    fn metadata_tag(&self, vport: Vport) -> Option<u32> {
        Some(u32::from(vport.0))
    }
    /// The vport of a metadata tag.
    fn tag_vport(&self, tag: u32) -> Option<Vport> {
        u16::try_from(tag).ok().map(Vport)
    }
    /// A tunnel port: its packets arrive encapsulated on an uplink, where
    /// a rule matches them before decap.
    fn tunnel(&self, _port: PortNo) -> Option<TunnelGround> {
        None
    }
}

/// Where a tunnel port's packets reach the eSwitch: the protocol, and the
/// uplink vport they arrive on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TunnelGround {
    pub kind: megaflow::tunnel::Kind,
    pub uplink: Vport,
}

/// A [`PortMap`] from explicit pairs.
#[derive(Clone, Debug, Default)]
pub struct PortTable {
    to_vport: HashMap<PortNo, Vport, FastBuild>,
    to_port: HashMap<Vport, PortNo, FastBuild>,
    /// Metadata tags a device reported (absent: the vport number).
    tags: HashMap<Vport, u32, FastBuild>,
    tag_vports: HashMap<u32, Vport, FastBuild>,
    tunnels: HashMap<PortNo, TunnelGround, FastBuild>,
}

impl PortTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `port` ↔ `vport`, replacing earlier pairs of either.
    pub fn insert(&mut self, port: PortNo, vport: Vport) {
        if let Some(old) = self.to_vport.insert(port, vport) {
            self.to_port.remove(&old);
        }
        if let Some(old) = self.to_port.insert(vport, port) {
            if old != port {
                self.to_vport.remove(&old);
            }
        }
    }

    /// Sets (`Some`) or clears where tunnel port `port`'s packets arrive.
    pub fn set_tunnel(&mut self, port: PortNo, ground: Option<TunnelGround>) {
        match ground {
            Some(g) => {
                self.tunnels.insert(port, g);
            }
            None => {
                self.tunnels.remove(&port);
            }
        }
    }

    /// Forgets `port` and its vport.
    pub fn remove(&mut self, port: PortNo) {
        self.tunnels.remove(&port);
        if let Some(v) = self.to_vport.remove(&port) {
            self.to_port.remove(&v);
            if let Some(t) = self.tags.remove(&v) {
                self.tag_vports.remove(&t);
            }
        }
    }

    /// Builder form of [`PortTable::insert`].
    pub fn with(mut self, port: PortNo, vport: Vport) -> Self {
        self.insert(port, vport);
        self
    }

    /// The reg_c_0 metadata tag a device gives `vport` (a real eSwitch's
    /// tags are not its vport numbers: `mlx5dv_query_port` reports them).
    pub fn set_tag(&mut self, vport: Vport, tag: u32) {
        if let Some(old) = self.tags.insert(vport, tag) {
            self.tag_vports.remove(&old);
        }
        self.tag_vports.insert(tag, vport);
    }
}

impl PortMap for PortTable {
    fn vport(&self, port: PortNo) -> Option<Vport> {
        self.to_vport.get(&port).copied()
    }

    fn port(&self, vport: Vport) -> Option<PortNo> {
        self.to_port.get(&vport).copied()
    }

    fn metadata_tag(&self, vport: Vport) -> Option<u32> {
        Some(self.tags.get(&vport).copied().unwrap_or(u32::from(vport.0)))
    }

    /// A device that reported tags knows no others; without any, the
    /// tag is the vport number (the sim's model).
    fn tag_vport(&self, tag: u32) -> Option<Vport> {
        if self.tags.is_empty() {
            u16::try_from(tag).ok().map(Vport)
        } else {
            self.tag_vports.get(&tag).copied()
        }
    }

    fn tunnel(&self, port: PortNo) -> Option<TunnelGround> {
        self.tunnels.get(&port).copied()
    }
}

/// A megaflow field the device cannot match as the megaflow does: the flow
/// stays in software, and `reason` says why (shown by `dump-flows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct Unsupported {
    /// The megaflow field.
    pub field: Field,
    /// Why it cannot be offloaded.
    pub reason: &'static str,
}

impl From<Unsupported> for megaflow::offload::NotOffloaded {
    fn from(u: Unsupported) -> Self {
        megaflow::offload::NotOffloaded::Match {
            field: u.field.name(),
            reason: u.reason,
        }
    }
}

/// Why bytes do not decode to a megaflow match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// `match_sz` above [`MATCH_PARAM_LEN`] or not a multiple of 4 (Direct
    /// Rule: EINVAL).
    #[error("match buffer of {len} bytes: must be a multiple of 4 and at most {MATCH_PARAM_LEN}")]
    BadLength { len: usize },
    /// `match_criteria_enable` has bits above misc5 (EINVAL).
    #[error("match_criteria_enable {0:#x} has unknown bits")]
    BadCriteria(u8),
    /// A value bit outside the mask (Direct Rule: EINVAL, "Rule parameters
    /// contains a value not specified by mask").
    #[error("value has bits outside the mask in {block} byte {byte}")]
    ValueOutsideMask { block: Block, byte: usize },
    /// A masked block this decoder has no fields for (misc3..misc5).
    #[error("{0} block is masked; nothing eswitch matches lives there")]
    UnsupportedBlock(Block),
    /// A masked PRM field with no megaflow counterpart.
    #[error("{0} has no megaflow field")]
    UnsupportedField(PrmField),
    /// Mask bits in a reserved range.
    #[error("reserved mask bits in byte {byte}")]
    ReservedBits { byte: usize },
    /// A masked field whose mask or value the device or the megaflow key
    /// cannot mean.
    #[error("{field}: {reason}")]
    Invalid {
        field: PrmField,
        reason: &'static str,
    },
    /// A source vport (or metadata tag) with no datapath port.
    #[error("source {0} has no datapath port")]
    UnknownVport(Vport),
    /// A reg_c_0 metadata tag with no vport.
    #[error("reg_c_0 tag {0:#x} names no vport")]
    UnknownTag(u32),
}

/// A match in the device's format: `match_criteria_enable` and the mask and
/// value buffers, holding outer, misc, inner and misc2 ([`ENCODED_LEN`]
/// bytes; Direct Rule reads the absent misc3..misc5 as zero).
///
/// Invariants: every value bit is inside the mask, and blocks outside
/// `criteria` are zero. Built by [`encode`] or, from outside bytes, by
/// [`Encoded::from_bytes`].
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Encoded {
    criteria: u8,
    mask: [u8; ENCODED_LEN],
    value: [u8; ENCODED_LEN],
}

impl Encoded {
    /// Adds a match of the `mask` bits of reg_c `n` to `value`.
    pub fn set_reg_c(&mut self, n: u8, value: u32, mask: u32) {
        if let Some(f) = PrmField::reg_c(n) {
            // A 32-bit value in a 32-bit field of the buffers' misc2.
            let _ = set(&mut self.mask, f, u128::from(mask));
            let _ = set(&mut self.value, f, u128::from(value & mask));
            self.criteria |= Block::Misc2.criteria_bit();
        }
    }

    /// The catch-all match: no criteria, empty buffers.
    pub const EMPTY: Encoded = Encoded {
        criteria: 0,
        mask: [0; ENCODED_LEN],
        value: [0; ENCODED_LEN],
    };

    /// Checks outside bytes as `mlx5dv_dr_matcher_create` and
    /// `mlx5dv_dr_rule_create` would and keeps what the device reads: the
    /// blocks enabled in `criteria` (Direct Rule ignores the others). A
    /// buffer may be shorter than the blocks it enables; the rest reads as
    /// zero.
    pub fn from_bytes(criteria: u8, mask: &[u8], value: &[u8]) -> Result<Encoded, DecodeError> {
        if criteria & !CRITERIA_ALL != 0 {
            return Err(DecodeError::BadCriteria(criteria));
        }
        for len in [mask.len(), value.len()] {
            if len > MATCH_PARAM_LEN || len % 4 != 0 {
                return Err(DecodeError::BadLength { len });
            }
        }
        let mut out = Encoded {
            criteria,
            ..Encoded::EMPTY
        };
        for block in Block::ALL {
            if criteria & block.criteria_bit() == 0 {
                continue;
            }
            let range = block.base_byte()..block.base_byte() + BLOCK_LEN;
            let m = mask
                .get(range.clone())
                .unwrap_or(mask.get(range.start..).unwrap_or(&[]));
            let v = value
                .get(range.clone())
                .unwrap_or(value.get(range.start..).unwrap_or(&[]));
            for (i, (&vb, &mb)) in v
                .iter()
                .zip(m.iter().chain(std::iter::repeat(&0)))
                .enumerate()
            {
                if vb & !mb != 0 {
                    return Err(DecodeError::ValueOutsideMask {
                        block,
                        byte: range.start + i,
                    });
                }
            }
            if range.end > ENCODED_LEN {
                if m.iter().any(|&b| b != 0) {
                    return Err(DecodeError::UnsupportedBlock(block));
                }
                continue;
            }
            out.mask[range.start..range.start + m.len()].copy_from_slice(m);
            out.value[range.start..range.start + v.len()].copy_from_slice(v);
        }
        Ok(out)
    }

    /// Resets to [`Encoded::EMPTY`], clearing only the blocks in use (the
    /// others are zero by invariant).
    #[inline]
    pub fn clear(&mut self) {
        for block in Block::ALL {
            if self.criteria & block.criteria_bit() != 0 {
                let start = block.base_byte();
                if let (Some(m), Some(v)) = (
                    self.mask.get_mut(start..start + BLOCK_LEN),
                    self.value.get_mut(start..start + BLOCK_LEN),
                ) {
                    m.fill(0);
                    v.fill(0);
                }
            }
        }
        self.criteria = 0;
    }

    /// `match_criteria_enable`.
    #[inline]
    pub fn criteria(&self) -> u8 {
        self.criteria
    }

    /// Bytes to pass as `match_sz`: up to the end of the last enabled block
    /// (0 for the catch-all).
    #[inline]
    pub fn match_sz(&self) -> usize {
        (8 - self.criteria.leading_zeros() as usize).min(4) * BLOCK_LEN
    }

    /// The matcher's mask buffer (`match_sz` bytes).
    #[inline]
    pub fn mask(&self) -> &[u8] {
        &self.mask[..self.match_sz()]
    }

    /// The rule's value buffer (`match_sz` bytes).
    #[inline]
    pub fn value(&self) -> &[u8] {
        &self.value[..self.match_sz()]
    }

    /// The mask bits of one field.
    #[inline]
    pub fn field_mask(&self, field: PrmField) -> u128 {
        // The table test keeps every field inside ENCODED_LEN.
        get(&self.mask, field).unwrap_or(0)
    }

    /// The value bits of one field.
    #[inline]
    pub fn field_value(&self, field: PrmField) -> u128 {
        get(&self.value, field).unwrap_or(0)
    }
}

impl Default for Encoded {
    fn default() -> Self {
        Encoded::EMPTY
    }
}

impl fmt::Debug for Encoded {
    /// `criteria=0x3 outer.ethertype=0x800/0xffff ...`: the masked fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "criteria={:#x}", self.criteria)?;
        for d in FIELDS {
            let m = self.field_mask(d.field);
            if m != 0 {
                write!(f, " {}={:#x}/{m:#x}", d.name, self.field_value(d.field))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "tests/module.rs"]
mod tests;

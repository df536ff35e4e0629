//! Restore tags: what the device did to a packet it hands to software.
//!
//! A packet the FDB does not finish reaches the eSwitch manager, and so
//! software. On its own it says nothing of what the hardware already did:
//! a sampler's copy looks like a miss, and a packet that was rewritten by
//! one table and missed the next arrives rewritten with its state gone.
//! The contract (../shared/DESIGN.md, "Contracts"): every packet the
//! device hands to software carries a *restore tag*, 0 for a plain miss,
//! otherwise an id the slow path registered here beforehand ([`Restore`]).
//!
//! How the tag gets there, on the sim and on a ConnectX alike:
//! - In the FDB, the rule that may send a packet up writes the tag into
//!   reg_c_1 ([`REG_TAG`]); reg_c_0 holds the source vport's metadata,
//!   written by the firmware. Only reg_c_0 and reg_c_1 cross from the FDB
//!   to the manager's NIC RX (`fdb_to_vport_reg_c_id`).
//! - In the manager's NIC RX, the slow-path receive queue (a raw-packet QP
//!   and an extended CQ, the `verbs` port) is steered by `mlx5dv_create_flow`
//!   rules ([`rx`]): one per served port at [`rx::SOURCE_PRIORITY`]
//!   (reg_c_0's source bits → flow tag 0) and one per registered tag at
//!   [`rx::TAG_PRIORITY`] (reg_c_1 == tag → flow tag = tag). Every rule
//!   copies reg_c_0 into reg_b, so the completion tells the source vport
//!   too.
//! - Software reads the flow tag (`ibv_wc_read_flow_tag`, the low 24 bits
//!   of the CQE's dword 56: tags are below 2^24, [`TAG_MAX`]) and reg_b
//!   (the CQE's dword 36), and asks the [`RestoreTable`] what to do:
//!   [`Arrival`].
//!
//! Order makes a tag reliable: a tag is registered here before any rule
//! that writes it exists, and unregistered after the last one is gone. A
//! packet still queued with a tag whose flow has just gone is
//! [`Arrival::Stale`]: dropped and counted, as a rewritten packet cannot
//! start over.
//!
//! A backend whose slow path cannot read tags (the representor netdevs:
//! the kernel keeps the CQE) says so through
//! [`DrBackend::restore_path`](crate::dr::DrBackend::restore_path), and the
//! offload manager keeps every flow that would need a tag in software with
//! the reason `no restore path`.

use std::collections::HashMap;
use std::sync::RwLock;

use megaflow::actions::SampleCookie;
use megaflow::offload::HwId;

/// The register an FDB rule writes a restore tag into.
pub const REG_TAG: u8 = 1;

/// The register that says where a packet came from (vport metadata).
pub const REG_SOURCE: u8 = 0;

/// The largest tag: a CQE's flow tag has 24 bits, and the kernel refuses a
/// larger `MLX5DV_FLOW_ACTION_TAG` with EINVAL.
pub const TAG_MAX: u32 = (1 << 24) - 1;

/// The tag of a plain miss (and of every packet a tag rule did not steer).
pub const PLAIN_MISS: u32 = 0;

/// What a registered tag tells software about a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restore {
    /// A sampler's copy of flow `flow`: it goes to the sFlow exporter under
    /// `cookie` and is never forwarded (the original went on in hardware).
    SampledCopy { flow: HwId, cookie: SampleCookie },
    /// The packet went through stage `stage` of flow `flow` (its rewrites
    /// done, `state` written) and missed the table of the next stage:
    /// software continues at `stage + 1` with the packet as it arrives.
    Continue { flow: HwId, stage: u8, state: u32 },
    /// The packet went through flow `flow`'s first stage, which ends in
    /// `ct(..),recirc(recirc)`, and missed the conntrack table untouched:
    /// software tracks it with `ct` and looks it up with `recirc`.
    AtCt {
        flow: HwId,
        ct: conntrack::CtSpec,
        recirc: u32,
    },
    /// The packet went through flow `flow`'s first stage and a conntrack
    /// entry of `zone` (which rewrote it when `translated`, and counted
    /// it), and missed the next stage's table: software gives it the
    /// connection's state and looks it up with `recirc`.
    PostCt {
        flow: HwId,
        zone: u16,
        translated: bool,
        recirc: u32,
    },
}

impl Restore {
    /// Where the datapath resumes a packet of an offloaded `ct()` stage;
    /// `None` for the other restores.
    pub fn resume(&self) -> Option<megaflow::Resume> {
        match *self {
            Restore::AtCt { ct, recirc, .. } => Some(megaflow::Resume::AtCt { spec: ct, recirc }),
            Restore::PostCt {
                zone,
                translated,
                recirc,
                ..
            } => Some(megaflow::Resume::PostCt {
                zone,
                translated,
                recirc,
            }),
            Restore::SampledCopy { .. } | Restore::Continue { .. } => None,
        }
    }
}

/// How software must take a packet the device handed to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Nothing happened to it in hardware: the whole pipeline runs.
    Miss,
    /// What its tag was registered for.
    Restored(Restore),
    /// A tag nobody holds now (its flow went while the packet was queued):
    /// dropped and counted.
    Stale(u32),
}

/// A tag that cannot be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error("restore tag 0 is the plain miss and cannot be registered")]
    Zero,
    #[error("restore tag {0:#x} is above the CQE flow tag's 24 bits")]
    TooLarge(u32),
    #[error("restore tag {0:#x} is already registered")]
    Taken(u32),
}

/// The registered tags: written by whoever installs the rules that write
/// them (the offload manager), read by every thread that receives packets
/// from the device.
#[derive(Debug, Default)]
pub struct RestoreTable(RwLock<HashMap<u32, Restore>>);

impl RestoreTable {
    /// Registers `tag` before any rule writes it.
    pub fn register(&self, tag: u32, what: Restore) -> Result<(), TagError> {
        if tag == PLAIN_MISS {
            return Err(TagError::Zero);
        }
        if tag > TAG_MAX {
            return Err(TagError::TooLarge(tag));
        }
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&tag) {
            return Err(TagError::Taken(tag));
        }
        map.insert(tag, what);
        Ok(())
    }

    /// Forgets `tag`, after the last rule that wrote it is gone.
    pub fn unregister(&self, tag: u32) -> Option<Restore> {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&tag)
    }

    /// What `tag` stands for now.
    pub fn get(&self, tag: u32) -> Option<Restore> {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.get(&tag).copied()
    }

    /// How to take a packet that arrived with `tag`.
    pub fn classify(&self, tag: u32) -> Arrival {
        if tag == PLAIN_MISS {
            return Arrival::Miss;
        }
        match self.get(tag) {
            Some(r) => Arrival::Restored(r),
            None => Arrival::Stale(tag),
        }
    }

    /// Registered tags.
    pub fn len(&self) -> usize {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sampled flows among them.
    pub fn samplers(&self) -> usize {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.values()
            .filter(|r| matches!(r, Restore::SampledCopy { .. }))
            .count()
    }
}

/// The manager's NIC RX steering of the slow-path receive queue, as the
/// bytes `mlx5dv_create_flow_matcher` and `mlx5dv_create_flow` take (and
/// the sim decodes): `fte_match_param` masks and values over misc2, and
/// the modify-header every rule carries.
pub mod rx {
    use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
    use crate::prm::{reg_c_match, Block};

    use super::{REG_SOURCE, REG_TAG};

    /// Priority of the tag matcher (`mlx5dv_flow_matcher_attr.priority`:
    /// lower is looked up first).
    pub const TAG_PRIORITY: u16 = 0;
    /// Priority of the per-port source matcher: after the tags.
    pub const SOURCE_PRIORITY: u16 = TAG_PRIORITY + 1;

    /// `match_criteria_enable` of both matchers: misc2.
    pub fn criteria() -> u8 {
        Block::Misc2.criteria_bit()
    }

    fn reg(reg: u8, v: u32) -> Vec<u8> {
        reg_c_match(&[(reg, v)])
    }

    /// The tag matcher's mask: all of reg_c_1.
    pub fn tag_mask() -> Vec<u8> {
        reg(REG_TAG, u32::MAX)
    }

    /// The value of `tag`'s rule.
    pub fn tag_value(tag: u32) -> Vec<u8> {
        reg(REG_TAG, tag)
    }

    /// The source matcher's mask: the bits of reg_c_0 that hold the vport
    /// metadata (`mlx5dv_query_port`'s `reg_c0.mask`).
    pub fn source_mask(mask: u32) -> Vec<u8> {
        reg(REG_SOURCE, mask)
    }

    /// The value of a port's source rule (`reg_c0.value`).
    pub fn source_value(value: u32) -> Vec<u8> {
        reg(REG_SOURCE, value)
    }

    /// The modify-header of every rule: COPY reg_c_0 → reg_b, so the
    /// completion carries the source vport's metadata.
    pub fn copy_source() -> Vec<u8> {
        encode_list(&[ModifyOp::copy32(
            ModifyField::RegC(REG_SOURCE),
            ModifyField::RegB,
        )])
    }
}

#[cfg(test)]
#[path = "tests/restore.rs"]
mod tests;

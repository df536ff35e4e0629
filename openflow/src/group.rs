//! GROUP_MOD and the GROUP, GROUP_DESC and GROUP_FEATURES multipart bodies
//! (OpenFlow 1.3, 7.3.4.2 and 7.3.5.10–12).

use crate::action::{emit_actions, parse_actions, Action};
use crate::error::{OfpError, ParseError};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_group_mod_command`.
pub mod group_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `ofp_group_type`.
pub mod group_type {
    pub const ALL: u8 = 0;
    pub const SELECT: u8 = 1;
    pub const INDIRECT: u8 = 2;
    pub const FF: u8 = 3;
}

/// `OFPG_MAX`: the highest group number a GROUP_MOD may create.
pub const GROUP_MAX: u32 = 0xffff_ff00;
/// `OFPG_ALL`: every group (delete, stats).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// `OFPG_ANY`: no group (wildcard in requests, a bucket's unset watch_group).
pub const GROUP_ANY: u32 = 0xffff_ffff;

/// Bytes of `ofp_bucket` before its actions.
const BUCKET_LEN: usize = 16;
/// Bytes of `ofp_group_desc` before its buckets.
const GROUP_DESC_LEN: usize = 8;
/// Bytes of `ofp_group_stats` before its bucket counters.
const GROUP_STATS_LEN: usize = 40;

/// `ofp_bucket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Relative weight (SELECT groups; 0 for the others).
    pub weight: u16,
    /// The port whose liveness decides the bucket's (FF groups).
    pub watch_port: u32,
    /// The group whose liveness decides the bucket's (FF groups).
    pub watch_group: u32,
    pub actions: Vec<Action>,
    /// Its id (1.5; `None`: its place in the list, as 1.3 numbers them).
    pub bucket_id: Option<u32>,
}

impl Bucket {
    fn parse(r: &mut Reader<'_>) -> Result<Bucket, ParseError> {
        let len = usize::from(r.u16("bucket.len")?);
        if len < BUCKET_LEN || len % 8 != 0 || len - 2 > r.remaining() {
            return Err(ParseError::Invalid {
                what: "bucket",
                detail: format!("length {len}"),
                error: OfpError::new(6, 12),
            });
        }
        let mut b = r.sub(len - 2, "bucket")?;
        let weight = b.u16("bucket.weight")?;
        let watch_port = b.u32("bucket.watch_port")?;
        let watch_group = b.u32("bucket.watch_group")?;
        b.skip(4, "bucket.pad")?;
        Ok(Bucket {
            weight,
            watch_port,
            watch_group,
            actions: parse_actions(&mut b)?,
            bucket_id: None,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u16(self.weight);
        out.put_u32(self.watch_port);
        out.put_u32(self.watch_group);
        out.put_zeros(4);
        emit_actions(&self.actions, out);
        patch_len(out, start, start);
    }
}

fn parse_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Bucket::parse(r)?);
    }
    Ok(v)
}

/// `ofp_group_mod` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMod {
    pub command: u16,
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
    /// The selection method and its parameter (1.5's group property;
    /// `None` in 1.3, which carries none).
    pub method: Option<(String, u64)>,
    /// 1.5's `command_bucket_id` (the bucket an INSERT/REMOVE_BUCKET
    /// names).
    pub command_bucket_id: u32,
}

impl GroupMod {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<GroupMod, ParseError> {
        if r.version() >= crate::header::V15 {
            return crate::versions::group_mod_parse_v15(r);
        }
        let command = r.u16("group_mod.command")?;
        let group_type = r.u8("group_mod.type")?;
        r.skip(1, "group_mod.pad")?;
        let group_id = r.u32("group_mod.group_id")?;
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            buckets: parse_buckets(r)?,
            method: None,
            command_bucket_id: GROUP_ANY,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u16(self.command);
        out.put_u8(self.group_type);
        out.put_zeros(1);
        out.put_u32(self.group_id);
        self.buckets.iter().for_each(|b| b.emit(out));
    }
}

/// `ofp_group_desc`: one entry of a GROUP_DESC reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDesc {
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
    /// The selection method (written in 1.5 only).
    pub method: Option<(String, u64)>,
}

impl GroupDesc {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<GroupDesc, ParseError> {
        let len = usize::from(r.u16("group_desc.length")?);
        if len < GROUP_DESC_LEN || len - 2 > r.remaining() {
            return Err(ParseError::BadLength {
                what: "group desc",
                length: len,
            });
        }
        let mut b = r.sub(len - 2, "group_desc")?;
        let group_type = b.u8("group_desc.type")?;
        b.skip(1, "group_desc.pad")?;
        let group_id = b.u32("group_desc.group_id")?;
        Ok(GroupDesc {
            group_type,
            group_id,
            buckets: parse_buckets(&mut b)?,
            method: None,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.group_type);
        out.put_zeros(1);
        out.put_u32(self.group_id);
        self.buckets.iter().for_each(|b| b.emit(out));
        patch_len(out, start, start);
    }
}

/// `ofp_group_stats`: one entry of a GROUP reply.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GroupStats {
    pub group_id: u32,
    /// Flows that forward to the group.
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// (packets, bytes) per bucket, in bucket order.
    pub buckets: Vec<(u64, u64)>,
}

impl GroupStats {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<GroupStats, ParseError> {
        let len = usize::from(r.u16("group_stats.length")?);
        if len < GROUP_STATS_LEN || (len - GROUP_STATS_LEN) % 16 != 0 || len - 2 > r.remaining() {
            return Err(ParseError::BadLength {
                what: "group stats",
                length: len,
            });
        }
        let mut b = r.sub(len - 2, "group_stats")?;
        b.skip(2, "group_stats.pad")?;
        let mut g = GroupStats {
            group_id: b.u32("group_stats.group_id")?,
            ref_count: b.u32("group_stats.ref_count")?,
            ..GroupStats::default()
        };
        b.skip(4, "group_stats.pad2")?;
        g.packet_count = b.u64("group_stats.packet_count")?;
        g.byte_count = b.u64("group_stats.byte_count")?;
        g.duration_sec = b.u32("group_stats.duration_sec")?;
        g.duration_nsec = b.u32("group_stats.duration_nsec")?;
        while !b.is_empty() {
            g.buckets.push((
                b.u64("bucket_counter.packets")?,
                b.u64("bucket_counter.bytes")?,
            ));
        }
        Ok(g)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u16((GROUP_STATS_LEN + 16 * self.buckets.len()) as u16);
        out.put_zeros(2);
        out.put_u32(self.group_id);
        out.put_u32(self.ref_count);
        out.put_zeros(4);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        for (p, b) in &self.buckets {
            out.put_u64(*p);
            out.put_u64(*b);
        }
    }
}

/// `ofp_group_features_capabilities`.
pub mod group_capabilities {
    pub const SELECT_WEIGHT: u32 = 1 << 0;
    pub const SELECT_LIVENESS: u32 = 1 << 1;
    pub const CHAINING: u32 = 1 << 2;
    pub const CHAINING_CHECKS: u32 = 1 << 3;
}

/// `ofp_group_features`: the GROUP_FEATURES reply (40 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GroupFeatures {
    /// Bitmap of `1 << group_type` supported.
    pub types: u32,
    pub capabilities: u32,
    /// Most groups of each type (ALL, SELECT, INDIRECT, FF).
    pub max_groups: [u32; 4],
    /// Bitmap of `1 << action_type` each type's buckets support.
    pub actions: [u32; 4],
}

impl GroupFeatures {
    pub const LEN: usize = 40;

    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<GroupFeatures, ParseError> {
        let mut f = GroupFeatures {
            types: r.u32("group_features.types")?,
            capabilities: r.u32("group_features.capabilities")?,
            ..GroupFeatures::default()
        };
        for m in &mut f.max_groups {
            *m = r.u32("group_features.max_groups")?;
        }
        for a in &mut f.actions {
            *a = r.u32("group_features.actions")?;
        }
        Ok(f)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.types);
        out.put_u32(self.capabilities);
        self.max_groups.iter().for_each(|m| out.put_u32(*m));
        self.actions.iter().for_each(|a| out.put_u32(*a));
    }
}

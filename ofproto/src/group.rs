//! OpenFlow groups (OpenFlow 1.3, 5.6): ALL, SELECT, INDIRECT and
//! FAST_FAILOVER, their buckets, and their counters.
//!
//! Translation runs a group in place of the `group:N` action: every bucket
//! of an ALL group on its own copy of the packet, the one bucket of an
//! INDIRECT group, the first live bucket of a FAST_FAILOVER group, and for
//! SELECT the bucket a hash of the flow's addresses and ports picks among
//! the live buckets by weight (highest random weight, so adding or removing
//! a bucket moves only the flows of that bucket). The hash fields are
//! un-wildcarded, as Open vSwitch's default selection method does: each
//! connection gets its own megaflow, carrying its bucket's actions, which
//! the device can hold like any other (a device has no per-packet hash
//! selection, so the alternative — one wide megaflow that picks a bucket
//! per packet — would keep all of a SELECT group's traffic in software).
//!
//! An ALL group whose buckets only output becomes, after translation, a
//! megaflow with several outputs: the offload manager turns that into one
//! `dest_array`.
//!
//! Chained groups (a bucket with a `group` action) are refused.
//!
//! Counters: a megaflow remembers the group and the buckets its packets
//! went through (as [`RuleRef`]s in [`GROUP_TABLE`]) and credits them with
//! the rules' counters, so group and bucket counters are as fresh as the
//! rules' (software at once, hardware at each counter poll).

use std::collections::BTreeMap;
use std::fmt;

use megaflow::{PortNo, Timestamp};
use thiserror::Error;

use crate::classifier::RuleId;
use crate::rule::OfAction;
use crate::table::{RuleRef, RuleUid};
use crate::text::format_action_list;
use crate::TableId;

/// The pseudo-table a [`RuleRef`] names to credit a group: `id` is the
/// group's number; `uid` is, for the group itself, its life (from ADD to
/// DELETE) times 2^16, and for a bucket, the group's incarnation (a
/// MODIFY starts a new one) times 2^16 plus 1 + the bucket's index.
pub const GROUP_TABLE: TableId = TableId(0xfe);

pub use openflow::group::GROUP_MAX;

/// The most groups a switch holds.
pub const MAX_GROUPS: usize = 65_536;

/// The most buckets in one group.
pub const MAX_BUCKETS: usize = 1024;

/// `ofp_group_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupType {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupType {
    const ALL: [GroupType; 4] = [
        GroupType::All,
        GroupType::Select,
        GroupType::Indirect,
        GroupType::FastFailover,
    ];

    /// From the wire number.
    pub fn from_number(n: u8) -> Option<GroupType> {
        GroupType::ALL.into_iter().find(|t| t.number() == n)
    }

    /// The wire number (`ofp_group_type`).
    pub fn number(self) -> u8 {
        use openflow::group::group_type as t;
        match self {
            GroupType::All => t::ALL,
            GroupType::Select => t::SELECT,
            GroupType::Indirect => t::INDIRECT,
            GroupType::FastFailover => t::FF,
        }
    }

    /// The name `ovs-ofctl` uses.
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }
}

/// One bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// SELECT: relative share (0: never chosen).
    pub weight: u16,
    /// The port whose state decides whether the bucket is live.
    pub watch_port: Option<PortNo>,
    /// The actions run on the packet (in order, on the group's copy).
    pub actions: Vec<OfAction>,
}

/// A group as GROUP_MOD defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: u32,
    pub ty: GroupType,
    pub buckets: Vec<Bucket>,
    /// SELECT: how a bucket is picked (Open vSwitch's
    /// `selection_method`, with its `selection_method_param`).
    pub method: SelectMethod,
}

/// How a SELECT group picks a bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SelectMethod {
    /// None asked for: the switch's default (`[openflow] select_method`).
    #[default]
    Default,
    /// A hash of the flow's addresses and ports in translation: each
    /// connection its own megaflow, which the device can hold.
    Hash,
    /// The datapath hashes the packet (`hash`), recirculates, and the
    /// next stage picks the bucket by `dp_hash`: a few megaflows for any
    /// number of connections, in software. `param`: the hash algorithm
    /// in the upper 32 bits (0 L4, 1 symmetric L4), its basis in the
    /// lower.
    DpHash { param: u64 },
}

/// Most `dp_hash` values a group maps onto its buckets (Open vSwitch's
/// `MAX_SELECT_GROUP_HASH_VALUES`).
pub const MAX_HASH_VALUES: usize = 256;

/// A `dp_hash` group's map: the bucket of each value of `dp_hash & (len -
/// 1)`, apportioned by weight (Webster's method: each bucket's share of
/// the values is as close to its share of the weight as whole values
/// allow).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpHashMap {
    pub alg: megaflow::actions::HashAlg,
    pub basis: u32,
    pub buckets: Vec<u16>,
}

impl DpHashMap {
    /// The map for `buckets` with as many values as they need (at least
    /// 16, at least 4 a bucket up to [`MAX_HASH_VALUES`], enough for the
    /// lightest bucket's share to be one value); `None` when that is more
    /// than `max` or no bucket has weight.
    pub fn apportion(buckets: &[Bucket], max: usize) -> Option<Vec<u16>> {
        let total: u64 = buckets.iter().map(|b| u64::from(b.weight)).sum();
        let lightest = buckets.iter().map(|b| b.weight).filter(|w| *w > 0).min()?;
        let need = total.div_ceil(u64::from(lightest));
        let per_bucket = (buckets.len() as u64 * 4).min(MAX_HASH_VALUES as u64);
        let n = need.max(per_bucket).next_power_of_two().max(16);
        if n > max.min(MAX_HASH_VALUES) as u64 {
            return None;
        }
        // Webster (Sainte-Laguë): each value goes to the bucket with the
        // highest weight / (2 * values so far + 1).
        let mut given = vec![0u64; buckets.len()];
        let mut map = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let mut best = 0;
            for i in 1..buckets.len() {
                let (wi, wb) = (
                    u64::from(buckets[i].weight),
                    u64::from(buckets[best].weight),
                );
                // wi / (2 gi + 1) > wb / (2 gb + 1), in integers.
                if wi * (2 * given[best] + 1) > wb * (2 * given[i] + 1) {
                    best = i;
                }
            }
            given[best] += 1;
            map.push(best as u16);
        }
        Some(map)
    }
}

impl fmt::Display for GroupSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group_id={},type={}", self.id, self.ty.name())?;
        for b in &self.buckets {
            f.write_str(",bucket=")?;
            if self.ty == GroupType::Select {
                write!(f, "weight:{},", b.weight)?;
            }
            if let Some(p) = b.watch_port {
                write!(f, "watch_port:{p},")?;
            }
            write!(f, "actions={}", format_action_list(&b.actions))?;
        }
        Ok(())
    }
}

/// Why a GROUP_MOD was refused; each maps to its OpenFlow error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum GroupError {
    #[error("group {0} already exists")]
    Exists(u32),
    #[error("group {0} does not exist")]
    Unknown(u32),
    #[error("group number {0} is above OFPG_MAX")]
    Invalid(u32),
    #[error("an indirect group has exactly one bucket, not {0}")]
    IndirectBuckets(usize),
    #[error("bucket {0}: a weight other than 0 is for select groups")]
    Weight(usize),
    #[error("bucket {0}: a fast-failover bucket needs a watch_port")]
    Watch(usize),
    #[error("bucket {0}: watch_port {1:#x} is not a port")]
    BadWatchPort(usize, u32),
    #[error("bucket {0}: watching a group's liveness is not supported")]
    WatchGroup(usize),
    #[error("bucket {0}: chained groups are not supported")]
    Chaining(usize),
    #[error("no room for another group ({MAX_GROUPS} in use)")]
    OutOfGroups,
    #[error("more than {MAX_BUCKETS} buckets")]
    OutOfBuckets,
    #[error("a selection method is for select groups")]
    Method,
    #[error("dp_hash algorithm {0} is unknown (0: l4, 1: symmetric l4)")]
    HashAlg(u32),
}

/// The `dp_hash` map of a SELECT group that picks by `dp_hash` (asked
/// for, or by default when `default` and its weights fit in 256 values;
/// a group that asked for `dp_hash` and does not fit hashes in
/// translation, as Open vSwitch falls back).
fn dp_hash_map(spec: &GroupSpec, default: bool) -> Option<DpHashMap> {
    use megaflow::actions::HashAlg;
    if spec.ty != GroupType::Select {
        return None;
    }
    let (alg, basis) = match spec.method {
        SelectMethod::Hash => return None,
        SelectMethod::Default if !default => return None,
        SelectMethod::Default => (HashAlg::SymL4, 0),
        SelectMethod::DpHash { param } => {
            (HashAlg::from_number((param >> 32) as u32)?, param as u32)
        }
    };
    let buckets = DpHashMap::apportion(&spec.buckets, MAX_HASH_VALUES)?;
    Some(DpHashMap {
        alg,
        basis,
        buckets,
    })
}

/// A group with its life and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub spec: GroupSpec,
    /// Life: from ADD to DELETE (the group's counters run through it).
    pub life: u64,
    /// Incarnation: a modify makes a new one (bucket counters restart).
    pub uid: u64,
    pub created: Timestamp,
    pub packets: u64,
    pub bytes: u64,
    /// (packets, bytes) per bucket.
    pub bucket_stats: Vec<(u64, u64)>,
    /// A SELECT group that picks by `dp_hash`: its map (`None`: it picks
    /// by a hash in translation).
    pub dp_hash: Option<DpHashMap>,
}

impl Group {
    /// The [`RuleRef`] that credits the group (`bucket` `None`) or one of
    /// its buckets.
    pub fn credit_ref(&self, bucket: Option<usize>) -> RuleRef {
        let uid = match bucket {
            None => self.life << 16,
            Some(i) => self.uid << 16 | (i as u64 + 1),
        };
        RuleRef {
            bridge: crate::BridgeNo::MAIN,
            table: GROUP_TABLE,
            id: RuleId(self.spec.id),
            uid: RuleUid(uid),
        }
    }
}

/// The groups of one switch.
#[derive(Clone, Debug, Default)]
pub struct GroupTable {
    groups: BTreeMap<u32, Group>,
    next_uid: u64,
    generation: u64,
    /// SELECT groups with no method of their own pick by `dp_hash` (Open
    /// vSwitch's default since 2.10); else by a hash in translation.
    dp_hash_default: bool,
}

impl GroupTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts every change (part of the tables' generation).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Puts back `earlier`, a copy taken before changes that must not
    /// stand, under a new generation (incarnations never reused).
    pub fn roll_back_to(&mut self, mut earlier: GroupTable) {
        earlier.generation = self.generation.max(earlier.generation) + 1;
        earlier.next_uid = earlier.next_uid.max(self.next_uid);
        *self = earlier;
    }

    /// Whether SELECT groups that name no method pick by `dp_hash` (as
    /// Open vSwitch does when their weights fit in 256 values; else they
    /// hash in translation). The groups there are now change with it.
    pub fn set_dp_hash_default(&mut self, on: bool) {
        if self.dp_hash_default == on {
            return;
        }
        self.dp_hash_default = on;
        self.generation += 1;
        for g in self.groups.values_mut() {
            g.dp_hash = dp_hash_map(&g.spec, on);
        }
    }

    pub fn dp_hash_default(&self) -> bool {
        self.dp_hash_default
    }

    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Group> + '_ {
        self.groups.values()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    fn check(spec: &GroupSpec) -> Result<(), GroupError> {
        if spec.id > GROUP_MAX {
            return Err(GroupError::Invalid(spec.id));
        }
        if spec.buckets.len() > MAX_BUCKETS {
            return Err(GroupError::OutOfBuckets);
        }
        if spec.ty == GroupType::Indirect && spec.buckets.len() != 1 {
            return Err(GroupError::IndirectBuckets(spec.buckets.len()));
        }
        if spec.ty != GroupType::Select && spec.method != SelectMethod::Default {
            return Err(GroupError::Method);
        }
        if let SelectMethod::DpHash { param } = spec.method {
            let alg = (param >> 32) as u32;
            if megaflow::actions::HashAlg::from_number(alg).is_none() {
                return Err(GroupError::HashAlg(alg));
            }
        }
        for (i, b) in spec.buckets.iter().enumerate() {
            if spec.ty != GroupType::Select && b.weight != 0 {
                return Err(GroupError::Weight(i));
            }
            if spec.ty == GroupType::FastFailover && b.watch_port.is_none() {
                return Err(GroupError::Watch(i));
            }
            if b.actions.iter().any(|a| matches!(a, OfAction::Group(_))) {
                return Err(GroupError::Chaining(i));
            }
        }
        Ok(())
    }

    /// A new incarnation of a group: `life`, `created` and counts of the
    /// one it replaces, or new ones.
    fn make(&mut self, spec: GroupSpec, old: Option<&Group>, now: Timestamp) -> Group {
        self.next_uid += 1;
        self.generation += 1;
        Group {
            bucket_stats: vec![(0, 0); spec.buckets.len()],
            dp_hash: dp_hash_map(&spec, self.dp_hash_default),
            spec,
            life: old.map_or(self.next_uid, |g| g.life),
            uid: self.next_uid,
            created: old.map_or(now, |g| g.created),
            packets: old.map_or(0, |g| g.packets),
            bytes: old.map_or(0, |g| g.bytes),
        }
    }

    /// OFPGC_ADD.
    pub fn add(&mut self, spec: GroupSpec, now: Timestamp) -> Result<(), GroupError> {
        Self::check(&spec)?;
        if self.groups.contains_key(&spec.id) {
            return Err(GroupError::Exists(spec.id));
        }
        if self.groups.len() >= MAX_GROUPS {
            return Err(GroupError::OutOfGroups);
        }
        let g = self.make(spec, None, now);
        self.groups.insert(g.spec.id, g);
        Ok(())
    }

    /// OFPGC_MODIFY: new type and buckets; the group's counters and age
    /// stay, the buckets' restart.
    pub fn modify(&mut self, spec: GroupSpec) -> Result<(), GroupError> {
        Self::check(&spec)?;
        let old = self
            .groups
            .remove(&spec.id)
            .ok_or(GroupError::Unknown(spec.id))?;
        let g = self.make(spec, Some(&old), old.created);
        self.groups.insert(g.spec.id, g);
        Ok(())
    }

    /// OFPGC_DELETE of one group (`None`: all); returns the numbers
    /// removed. Deleting a group that does not exist is no error.
    pub fn delete(&mut self, id: Option<u32>) -> Vec<u32> {
        let gone: Vec<u32> = match id {
            None => self.groups.keys().copied().collect(),
            Some(g) => self
                .groups
                .contains_key(&g)
                .then_some(g)
                .into_iter()
                .collect(),
        };
        for g in &gone {
            self.groups.remove(g);
        }
        if !gone.is_empty() {
            self.generation += 1;
        }
        gone
    }

    /// Adds counts to a group or bucket named by [`Group::credit_ref`]
    /// (nothing when that incarnation is gone).
    pub fn credit(&mut self, r: RuleRef, packets: u64, bytes: u64) {
        let Some(g) = self.groups.get_mut(&r.id.0) else {
            return;
        };
        let (incarnation, bucket) = (r.uid.0 >> 16, (r.uid.0 & 0xffff) as usize);
        match bucket {
            0 if incarnation == g.life => {
                g.packets += packets;
                g.bytes += bytes;
            }
            b if b > 0 && incarnation == g.uid => {
                if let Some(s) = g.bucket_stats.get_mut(b - 1) {
                    s.0 += packets;
                    s.1 += bytes;
                }
            }
            _ => {}
        }
    }
}

//! GROUP_MOD and the group multiparts over a bridge's [`GroupTable`].

use std::collections::HashMap;

use crate::group::SelectMethod;
use megaflow::{PortNo, Timestamp};
use openflow::action::action_type;
use openflow::group::{group_capabilities, group_command, GROUP_ALL, GROUP_ANY};
use openflow::{GroupDesc, GroupFeatures, GroupMod, GroupStats, OfpError};

use super::convert;
use crate::bridge::Bridge;
use crate::group::{Bucket, GroupError, GroupSpec, GroupTable, GroupType, MAX_GROUPS};
use crate::rule::{OfAction, OfPort};
use crate::table::RemovedRule;

/// `OFPET_GROUP_MOD_FAILED`.
const GROUP_MOD_FAILED: u16 = 6;

impl GroupError {
    /// The OpenFlow error that answers it.
    pub fn of_error(&self) -> OfpError {
        let code = match self {
            GroupError::Exists(_) => 0,
            GroupError::Invalid(_) | GroupError::IndirectBuckets(_) => 1,
            GroupError::Weight(_) => 2,
            GroupError::OutOfGroups => 3,
            GroupError::OutOfBuckets => 4,
            GroupError::Chaining(_) => 5,
            GroupError::WatchGroup(_) => 6,
            GroupError::Unknown(_) => 8,
            GroupError::Watch(_) | GroupError::BadWatchPort(..) => 13,
            // OFPGMFC_BAD_TYPE: the method does not fit the group.
            GroupError::Method | GroupError::HashAlg(_) => 10,
        };
        OfpError::new(GROUP_MOD_FAILED, code)
    }
}

/// A GROUP_MOD on `br` at `now`. Deleting a group deletes the rules that
/// run it (5.6); those come back for FLOW_REMOVED.
pub fn group_mod(
    br: &mut Bridge,
    gm: &GroupMod,
    now: Timestamp,
) -> Result<Vec<RemovedRule>, (OfpError, String)> {
    let refuse = |e: GroupError| (e.of_error(), format!("group mod refused: {e}"));
    match gm.command {
        group_command::DELETE => {
            let which = (gm.group_id != GROUP_ALL).then_some(gm.group_id);
            Ok(br.delete_groups(which, now))
        }
        group_command::ADD | group_command::MODIFY => {
            let ty = GroupType::from_number(gm.group_type).ok_or((
                OfpError::new(GROUP_MOD_FAILED, 10),
                format!("group mod refused: unknown group type {}", gm.group_type),
            ))?;
            let mut buckets = Vec::with_capacity(gm.buckets.len());
            for (i, b) in gm.buckets.iter().enumerate() {
                if b.watch_group != GROUP_ANY {
                    return Err(refuse(GroupError::WatchGroup(i)));
                }
                let watch_port = match OfPort::from_number(b.watch_port) {
                    Some(OfPort::Any) => None,
                    Some(OfPort::Port(p)) => Some(p),
                    _ => return Err(refuse(GroupError::BadWatchPort(i, b.watch_port))),
                };
                let actions = convert::bucket_actions_from_wire(&b.actions, br.tlv())
                    .map_err(|e| (e, format!("group mod refused: bucket {i}: {}", e.name())))?;
                buckets.push(Bucket {
                    weight: b.weight,
                    watch_port,
                    actions,
                });
            }
            // OpenFlow 1.3 carries no selection method (Open vSwitch's
            // ovs-ofctl drops it below 1.5): the switch's default; 1.5
            // names it in a group property.
            let method = match gm.method.as_ref().map(|(n, p)| (n.as_str(), *p)) {
                None | Some(("", _)) => SelectMethod::Default,
                Some(("hash", _)) => SelectMethod::Hash,
                Some(("dp_hash", param)) => SelectMethod::DpHash { param },
                Some((other, _)) => {
                    return Err((
                        OfpError::new(GROUP_MOD_FAILED, 10),
                        format!("group mod refused: unknown selection method {other:?} (hash and dp_hash are known)"),
                    ))
                }
            };
            let spec = GroupSpec {
                id: gm.group_id,
                ty,
                buckets,
                method,
            };
            if gm.command == group_command::ADD {
                br.add_group(spec, now).map_err(refuse)?;
            } else {
                br.modify_group(spec).map_err(refuse)?;
            }
            Ok(Vec::new())
        }
        c => Err((
            OfpError::new(GROUP_MOD_FAILED, 11),
            format!("group mod refused: unknown command {c}"),
        )),
    }
}

/// The groups a PACKET_OUT's actions name must exist (as a flow mod's,
/// [`Bridge::apply_flow_mod`]).
pub fn check_groups(groups: &GroupTable, actions: &[OfAction]) -> Result<(), OfpError> {
    match actions.iter().find_map(|a| match a {
        OfAction::Group(g) if groups.get(*g).is_none() => Some(*g),
        _ => None,
    }) {
        Some(g) => {
            let (t, c) = crate::table::FlowModError::UnknownGroup(g).of_error();
            Err(OfpError::new(t, c))
        }
        None => Ok(()),
    }
}

/// GROUP_DESC entries.
pub fn group_desc(groups: &GroupTable) -> Vec<GroupDesc> {
    groups
        .iter()
        .map(|g| GroupDesc {
            group_type: g.spec.ty.number(),
            group_id: g.spec.id,
            buckets: g
                .spec
                .buckets
                .iter()
                .map(|b| openflow::Bucket {
                    weight: b.weight,
                    watch_port: b.watch_port.map_or(OfPort::Any.number(), |p: PortNo| p.0),
                    watch_group: GROUP_ANY,
                    actions: convert::bucket_actions_to_wire(&b.actions),
                    bucket_id: None,
                })
                .collect(),
            method: match g.spec.method {
                SelectMethod::Default => None,
                SelectMethod::Hash => Some(("hash".to_string(), 0)),
                SelectMethod::DpHash { param } => Some(("dp_hash".to_string(), param)),
            },
        })
        .collect()
}

/// GROUP stats of `id` (`OFPG_ALL`: every group) at `now` (an unknown
/// group: no entry). `ref_count` counts the rules that run the group.
pub fn group_stats(br: &Bridge, id: u32, now: Timestamp) -> Vec<GroupStats> {
    let asked = |g: u32| id == GROUP_ALL || g == id;
    let mut refs: HashMap<u32, u32> = HashMap::new();
    for t in br.tables.tables() {
        for (_, r) in t.rules() {
            let mut seen: Vec<u32> = Vec::new();
            for g in r.spec.instructions.groups().filter(|&g| asked(g)) {
                if !seen.contains(&g) {
                    seen.push(g);
                    *refs.entry(g).or_default() += 1;
                }
            }
        }
    }
    br.groups
        .iter()
        .filter(|g| asked(g.spec.id))
        .map(|g| {
            let (duration_sec, duration_nsec) = super::duration(now.since(g.created));
            GroupStats {
                group_id: g.spec.id,
                ref_count: refs.get(&g.spec.id).copied().unwrap_or(0),
                packet_count: g.packets,
                byte_count: g.bytes,
                duration_sec,
                duration_nsec,
                buckets: g.bucket_stats.clone(),
            }
        })
        .collect()
}

/// What the group table supports.
pub fn group_features() -> GroupFeatures {
    let actions = [
        action_type::OUTPUT,
        action_type::PUSH_VLAN,
        action_type::POP_VLAN,
        action_type::DEC_NW_TTL,
        action_type::SET_FIELD,
    ]
    .iter()
    .fold(0u32, |m, &t| m | 1 << t);
    GroupFeatures {
        types: 0b1111,
        capabilities: group_capabilities::SELECT_WEIGHT | group_capabilities::SELECT_LIVENESS,
        max_groups: [MAX_GROUPS as u32; 4],
        actions: [actions; 4],
    }
}

//! Meters and samplers: flows that continue in the level-2 table.
//!
//! A metered or sampled flow's level-1 rule is `[counter, modify-header
//! (reg_c_1 = tag), flow_meter | flow_sampler]`; in the level-2 table the
//! tag picks the flow's rules: `(tag, red)` → drop (metered flows), `tag` →
//! the rest of its actions.
//!
//! The tag is written by the level-1 rule's modify-header, not by the
//! sampler's own SET action: rdma-core (`dr_action_create_sampler_restore_tbl`
//! in `providers/mlx5/dr_action.c`) accepts only a SET of reg_c_0 there,
//! and the sampled copy would not carry it (the copy leaves before the
//! SET); written before the sampler, the tag is on the original and on the
//! copy, so software learns which flow a sampled copy belongs to. The
//! copy's action is the FDB default_miss (to the eSwitch manager), which
//! rdma-core accepts among sample actions (`DR_ACTION_TYP_MISS` in
//! `dr_action_create_sampler_term_tbl`).
//!
//! Software tells the copy from a miss by its restore tag
//! ([`crate::restore`]): the flow's tag is registered as a sampled copy
//! of it, and a restore rule steers reg_c_1 == tag to the slow-path queue
//! with that flow tag, before the level-1 rule exists. Without a restore
//! path a sampled flow stays in software (`no restore path`): its copies
//! would reach software as misses and be forwarded twice. A metered flow
//! needs none: its level-2 rules go in before its level-1 rule and out
//! after it, so no packet of it misses in level 2.

use megaflow::offload::{HwId, MeterBand, NotOffloaded};
use megaflow::MeterId;

use crate::dr::meter::{Color, MeterMode, MeterParams};
use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
use crate::dr::{
    ActionId, ActionSpec, DrBackend, FlowMeterAttr, FlowSamplerAttr, MatcherId, RestoreRuleId,
    RuleId, SyncFlags,
};
use crate::prm::{reg_c_match, Block};
use crate::restore::{Restore, TAG_MAX};

use super::translate::Stage;
use super::{action, backend, OffloadManager, REG_COLOR, REG_FLOW_TAG};

/// Priority of the (tag, colour) matcher in the level-2 table: first.
const RED_PRIORITY: u16 = 0;
/// Priority of the tag matcher in the level-2 table.
const TAG_PRIORITY: u16 = 1;

/// An OpenFlow meter in hardware.
pub(super) struct MeterDef {
    pub(super) band: MeterBand,
    /// Its flow_meter action (shared by the flows installed since).
    pub(super) action: ActionId,
}

/// What a metered or sampled flow holds besides a plain flow's objects.
#[derive(Default)]
pub(super) struct Staged {
    /// Its reg_c_1 value.
    pub(super) tag: Option<u32>,
    /// The per-flow modify-header writing the tag.
    mark: Option<ActionId>,
    /// The shared flow_meter action it uses (counted in `meter_users`).
    meter: Option<ActionId>,
    /// Its own flow_sampler action.
    sampler: Option<ActionId>,
    /// Level 2: (tag, red) → drop.
    red_rule: Option<RuleId>,
    /// Level 2: tag → the rest of its actions.
    rest_rule: Option<RuleId>,
    /// A sampled flow's: whether its tag is registered in the restore
    /// table, and the slow-path queue's rule for it.
    registered: bool,
    restore_rule: Option<RestoreRuleId>,
}

/// An `fte_match_param` buffer with each reg_c `n` set to `v`, and its
/// criteria (misc2).
fn regs(values: &[(u8, u32)]) -> (u8, Vec<u8>) {
    (Block::Misc2.criteria_bit(), reg_c_match(values))
}

impl<B: DrBackend> OffloadManager<B> {
    /// The current flow_meter action of meter `id`.
    pub(super) fn meter_action(&self, id: MeterId) -> Result<ActionId, NotOffloaded> {
        self.meters
            .get(&id)
            .map(|d| d.action)
            .ok_or_else(|| action(&format!("meter:{id} (not defined in hardware)")))
    }

    /// [`FlowOffload::set_meter`](megaflow::offload::FlowOffload::set_meter).
    /// A new or changed band gets a new flow_meter action (on error the old
    /// one stays defined); the old action, or that of a deleted meter, is
    /// destroyed now if no flow uses it, else with its last flow.
    pub(super) fn define_meter(
        &mut self,
        id: MeterId,
        band: Option<MeterBand>,
    ) -> Result<(), NotOffloaded> {
        let old = match band {
            Some(band) => {
                if self.meters.get(&id).is_some_and(|d| d.band == band) {
                    return Ok(());
                }
                let mode = if band.packets {
                    MeterMode::Packets
                } else {
                    MeterMode::Bytes
                };
                let params = MeterParams::single_rate(band.rate, band.burst, mode);
                let spec = ActionSpec::FlowMeter(FlowMeterAttr {
                    next_table: self.level2,
                    active: true,
                    reg_c_index: REG_COLOR,
                    params: params.encode().to_vec(),
                });
                let a = self
                    .backend
                    .action_create(self.domain, spec)
                    .map_err(backend("action_create"))?;
                self.meters.insert(id, MeterDef { band, action: a })
            }
            None => self.meters.remove(&id),
        };
        if let Some(old) = old {
            if !self.meter_users.contains_key(&old.action) {
                let _ = self.backend.action_destroy(old.action);
            }
        }
        Ok(())
    }

    /// A flow stops using a flow_meter action: destroyed with its last
    /// flow once its meter was changed or deleted.
    fn unuse_meter(&mut self, a: ActionId) {
        let left = match self.meter_users.get_mut(&a) {
            Some(n) => {
                *n = n.saturating_sub(1);
                *n
            }
            None => return,
        };
        if left == 0 {
            self.meter_users.remove(&a);
            if !self.meters.values().any(|d| d.action == a) {
                let _ = self.backend.action_destroy(a);
            }
        }
    }

    /// A tag no live flow has, recorded for `id`. Tags go round from 1
    /// (0 is an unmarked packet) to [`TAG_MAX`] (a completion's flow tag
    /// has 24 bits), so a removed flow's tag comes back as late as
    /// possible.
    fn alloc_tag(&mut self, id: HwId) -> Result<u32, NotOffloaded> {
        if self.tags.len() >= TAG_MAX as usize {
            return Err(NotOffloaded::TableFull);
        }
        loop {
            let t = self.next_tag;
            self.next_tag = if t >= TAG_MAX { 1 } else { t + 1 };
            if t != 0 && !self.tags.contains_key(&t) {
                self.tags.insert(t, id);
                return Ok(t);
            }
        }
    }

    /// A level-2 matcher, created on first use and kept until shutdown.
    fn level2_matcher(&mut self, red: bool) -> Result<MatcherId, NotOffloaded> {
        let cached = if red {
            self.red_matcher
        } else {
            self.tag_matcher
        };
        if let Some(m) = cached {
            return Ok(m);
        }
        let (criteria, mask, priority) = if red {
            let (c, m) = regs(&[(REG_FLOW_TAG, u32::MAX), (REG_COLOR, u32::MAX)]);
            (c, m, RED_PRIORITY)
        } else {
            let (c, m) = regs(&[(REG_FLOW_TAG, u32::MAX)]);
            (c, m, TAG_PRIORITY)
        };
        let m = self
            .backend
            .matcher_create(self.level2, priority, criteria, &mask)
            .map_err(backend("matcher_create"))?;
        if red {
            self.red_matcher = Some(m);
        } else {
            self.tag_matcher = Some(m);
        }
        Ok(m)
    }

    /// The level-2 part of a metered (`meter`: its action) or sampled flow,
    /// into `st`; `rest`: the DR actions after the meter or sampler. Gives
    /// the level-1 actions after the counter.
    pub(super) fn stage2(
        &mut self,
        id: HwId,
        stage: Stage,
        meter: Option<ActionId>,
        rest: &[ActionId],
        st: &mut Staged,
    ) -> Result<Vec<ActionId>, NotOffloaded> {
        if matches!(stage, Stage::Sample { .. }) && self.backend.restore_path().is_err() {
            return Err(NotOffloaded::NoRestorePath);
        }
        let tag = self.alloc_tag(id)?;
        st.tag = Some(tag);
        let tag_matcher = self.level2_matcher(false)?;
        let (_, value) = regs(&[(REG_FLOW_TAG, tag)]);
        st.rest_rule = Some(
            self.backend
                .rule_create(tag_matcher, &value, rest)
                .map_err(backend("rule_create"))?,
        );
        let last = match (stage, meter) {
            (Stage::Meter(_), Some(m)) => {
                *self.meter_users.entry(m).or_insert(0) += 1;
                st.meter = Some(m);
                let red_matcher = self.level2_matcher(true)?;
                let drop = self.drop_action()?;
                let (_, value) = regs(&[(REG_FLOW_TAG, tag), (REG_COLOR, Color::Red as u32)]);
                st.red_rule = Some(
                    self.backend
                        .rule_create(red_matcher, &value, &[drop])
                        .map_err(backend("rule_create"))?,
                );
                m
            }
            (Stage::Sample { ratio, cookie }, _) => {
                // Registered, then steered, before any rule writes the tag.
                self.restore
                    .register(tag, Restore::SampledCopy { flow: id, cookie })
                    .map_err(|_| NotOffloaded::TableFull)?;
                st.registered = true;
                st.restore_rule = Some(
                    self.backend
                        .restore_rule_create(tag)
                        .map_err(backend("restore_rule_create"))?,
                );
                let miss = self.shared_action(self.shared.miss, ActionSpec::DefaultMiss)?;
                self.shared.miss = Some(miss);
                let spec = ActionSpec::FlowSampler(FlowSamplerAttr {
                    sample_ratio: ratio,
                    default_next_table: self.level2,
                    sample_actions: vec![miss],
                    action: None,
                });
                let s = self
                    .backend
                    .action_create(self.domain, spec)
                    .map_err(backend("action_create"))?;
                st.sampler = Some(s);
                s
            }
            _ => return Err(action("meter")),
        };
        let mark = encode_list(&[ModifyOp::set(ModifyField::RegC(REG_FLOW_TAG), tag)]);
        let mark = self
            .backend
            .action_create(self.domain, ActionSpec::ModifyHeader(mark))
            .map_err(backend("action_create"))?;
        st.mark = Some(mark);
        Ok(vec![mark, last])
    }

    /// Gives back a flow's level-2 rules, its marker and sampler, its use
    /// of a meter and its tag (whatever of them it has).
    pub(super) fn release_staged(&mut self, st: Staged) {
        for r in [st.rest_rule, st.red_rule].into_iter().flatten() {
            let _ = self.backend.rule_destroy(r);
        }
        for a in [st.sampler, st.mark].into_iter().flatten() {
            let _ = self.backend.action_destroy(a);
        }
        if let Some(m) = st.meter {
            self.unuse_meter(m);
        }
        if let Some(r) = st.restore_rule {
            // The FDB's destroys are posted, the NIC RX flow's removal is
            // not: the level-1 rule must be gone from the device before
            // the tag stops being steered, or a copy still in flight would
            // arrive untagged, as a miss.
            let _ = self.backend.domain_sync(self.domain, SyncFlags::ALL);
            let _ = self.backend.restore_rule_destroy(r);
        }
        if let Some(t) = st.tag {
            self.tags.remove(&t);
            if st.registered {
                self.restore.unregister(t);
            }
        }
    }
}

//! `check_pkt_larger(LEN)->DST`, as Open vSwitch translates it for a
//! datapath with `check_pkt_len` (`xlate_check_pkt_larger`): what follows
//! the action (the rest of its list, the rule's instructions and the chain
//! they go on to) is translated twice, once with `DST` set to 1 and once
//! with it 0, into the two branches of one `check_pkt_len` datapath
//! action, which picks one by the packet's length. In a resubmit, the
//! fork ends where the resubmit returns: what its caller does next runs
//! once, after it, on the packet as the action found it (the datapath
//! runs the branch on a copy). The megaflow holds for packets of any
//! length; nothing about the length is matched.

use megaflow::{Actions, DpAction, FlowKey, Mask};

use super::vlan::Tag;
use super::Ctx;
use crate::recirc::Step;
use crate::rule::{FieldRange, OfAction};

/// The translation's state where the action ran: each branch starts
/// from it.
pub(super) struct PktFork {
    size: u16,
    dst: FieldRange,
    flow: FlowKey,
    written: Mask,
    tags: Option<Vec<Tag>>,
    bits: (u16, u16, u16),
    action_set: Vec<OfAction>,
    stack: Vec<u128>,
    ct_live: bool,
    hashed: bool,
}

impl Ctx<'_> {
    /// The action: the state kept, and what follows gathered (as a freeze
    /// gathers it) for [`finish_fork`](Self::finish_fork).
    pub(super) fn check_pkt_larger(&mut self, size: u16, dst: FieldRange) {
        self.commit();
        self.pkt_fork = Some(Box::new(PktFork {
            size,
            dst,
            flow: self.flow,
            written: self.wc.written(),
            tags: self.vlan_snapshot(),
            bits: (self.dirty, self.committed, self.touched),
            action_set: self.action_set.clone(),
            stack: self.stack.clone(),
            ct_live: self.ct_live,
            hashed: self.hashed,
        }));
        self.note(|| format!("check_pkt_larger({size}): what follows, for both outcomes"));
        self.freezing = Some(Vec::new());
    }

    /// Translates what followed the action twice, into a `check_pkt_len`;
    /// false when no fork is pending.
    pub(super) fn finish_fork(&mut self) -> bool {
        let Some(fork) = self.pkt_fork.take() else {
            return false;
        };
        let steps: Vec<Step> = self.freezing.take().unwrap_or_default();
        if self.error.is_some() {
            return true;
        }
        let before = std::mem::take(&mut self.out);
        let mut branches = Vec::with_capacity(2);
        for larger in [1u128, 0] {
            self.back_to(&fork);
            self.write_range(&fork.dst, larger);
            self.resume(&steps);
            self.finish_freezing();
            branches.push(std::mem::take(&mut self.out));
        }
        self.out = before;
        // What follows the fork (the callers' actions, when it was in a
        // resubmit) sees the state the action found.
        self.back_to(&fork);
        let le = branches.pop().unwrap_or_default();
        let gt = branches.pop().unwrap_or_default();
        self.out.push(DpAction::CheckPktLen {
            size: fork.size,
            gt: Actions::new(gt),
            le: Actions::new(le),
        });
        true
    }

    /// The translation's state as the action found it.
    fn back_to(&mut self, fork: &PktFork) {
        self.flow = fork.flow;
        self.wc.restore_written(fork.written);
        self.vlan_restore(fork.tags.clone());
        (self.dirty, self.committed, self.touched) = fork.bits;
        self.action_set = fork.action_set.clone();
        self.stack = fork.stack.clone();
        self.ct_live = fork.ct_live;
        self.hashed = fork.hashed;
    }
}

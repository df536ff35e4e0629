//! VLAN tags during translation: a stack of the packet's original tags and
//! tags the pipeline pushed or rewrote.
//!
//! The key holds two tags: the outer (`vlan_tpid`/`vlan_tci`, position 0)
//! and the inner (`vlan2_*`, position 1). An entry [`Tag::Orig`] stands for
//! an original tag whose value has not been needed; [`Tag::New`] is a tag
//! with a known value. Two stacks are kept: what the pipeline sees now
//! (`cur`) and what the datapath packet carries after the actions emitted so
//! far (`dp`). A commit pops the datapath tags above the longest common
//! bottom of the two and pushes the pipeline's tags above it.
//!
//! Soundness bookkeeping: the key fields of a position hold the pipeline's
//! current tag there. An original tag in its original position is the
//! packet's own bits (reads un-wildcard them as usual); anything else
//! (a new tag, an original tag that moved, an empty position) is a value the
//! translation already knows, so it is written and marked as such, after
//! un-wildcarding the original bits it was copied from.

use megaflow::key::{VLAN_PCP_MASK, VLAN_PRESENT, VLAN_VID_MASK};
use megaflow::{DpAction, Field};

use super::Ctx;

/// One tag of a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tag {
    /// The packet's original tag at this position (0 outer, 1 inner).
    Orig(u8),
    /// A tag of known value (`tci` includes [`VLAN_PRESENT`]).
    New { tpid: u16, tci: u16 },
}

/// The pipeline's and the datapath's tag stacks, outermost first.
#[derive(Clone, Debug, Default)]
pub(super) struct VlanStack {
    init: bool,
    cur: Vec<Tag>,
    dp: Vec<Tag>,
}

const POS_FIELDS: [(Field, Field); 2] = [
    (Field::VlanTpid, Field::VlanTci),
    (Field::Vlan2Tpid, Field::Vlan2Tci),
];

impl Ctx<'_> {
    /// Reads how many tags the packet arrived with (only the present bits).
    fn vlan_init(&mut self) {
        if self.vlan.init {
            return;
        }
        self.vlan.init = true;
        let stack = self.orig_stack();
        self.vlan.cur = stack.clone();
        self.vlan.dp = stack;
    }

    /// The tags the packet arrived with (reads only their present bits).
    fn orig_stack(&mut self) -> Vec<Tag> {
        let present = u128::from(VLAN_PRESENT);
        let mut stack = Vec::new();
        if self.read_packet(Field::VlanTci, present) != 0 {
            stack.push(Tag::Orig(0));
            if self.read_packet(Field::Vlan2Tci, present) != 0 {
                stack.push(Tag::Orig(1));
            }
        }
        stack
    }

    /// The pipeline's tags, for [`Ctx::vlan_restore`] (`None`: not read
    /// yet).
    pub(super) fn vlan_snapshot(&self) -> Option<Vec<Tag>> {
        self.vlan.init.then(|| self.vlan.cur.clone())
    }

    /// Puts the pipeline's tags back as they were at `snap` (a group
    /// bucket's copy of the packet is done); the datapath's stay, so the
    /// next commit turns them back.
    pub(super) fn vlan_restore(&mut self, snap: Option<Vec<Tag>>) {
        match snap {
            Some(cur) => self.vlan.cur = cur,
            // First read inside the bucket: the packet's own tags (whose
            // presence that read already recorded).
            None if self.vlan.init => self.vlan.cur = self.orig_stack(),
            None => {}
        }
    }

    /// The value of a tag, reading the original's `tci_bits` if needed.
    fn tag_value(&mut self, tag: Tag, tci_bits: u16) -> (u16, u16) {
        match tag {
            Tag::New { tpid, tci } => (tpid, tci),
            Tag::Orig(pos) => {
                let (tf, cf) = POS_FIELDS[usize::from(pos)];
                let tpid = self.read_packet(tf, 0xffff) as u16;
                let tci = self.read_packet(cf, u128::from(tci_bits)) as u16;
                (tpid, tci | VLAN_PRESENT)
            }
        }
    }

    /// Brings the key's VLAN fields in line with the pipeline's stack.
    fn vlan_sync(&mut self) {
        for (pos, &(tf, cf)) in POS_FIELDS.iter().enumerate() {
            let tag = self.vlan.cur.get(pos).copied();
            match tag {
                Some(Tag::Orig(p)) if usize::from(p) == pos => {
                    self.flow.set_field(tf, self.orig.field(tf));
                    self.flow.set_field(cf, self.orig.field(cf));
                    self.wc.unwrite(tf);
                    self.wc.unwrite(cf);
                }
                _ => {
                    let (tpid, tci) = match tag {
                        Some(t) => self.tag_value(t, 0xffff),
                        None => (0, 0),
                    };
                    self.flow.set_field(tf, u128::from(tpid));
                    self.flow.set_field(cf, u128::from(tci));
                    self.wc.write(tf, 0xffff);
                    self.wc.write(cf, 0xffff);
                }
            }
        }
    }

    /// `pop_vlan`: removes the outer tag; a no-op when untagged.
    pub(super) fn vlan_pop(&mut self) {
        self.vlan_init();
        if self.vlan.cur.is_empty() {
            self.note(|| "pop_vlan skipped: no tag".into());
            return;
        }
        self.vlan.cur.remove(0);
        self.vlan_sync();
    }

    /// `push_vlan`: a new outer tag copying VID and PCP of the current outer
    /// tag, or zero.
    pub(super) fn vlan_push(&mut self, tpid: u16) {
        self.vlan_init();
        let copy = VLAN_VID_MASK | VLAN_PCP_MASK;
        let tci = match self.vlan.cur.first().copied() {
            Some(t) => self.tag_value(t, copy).1 & copy,
            None => 0,
        };
        self.vlan.cur.insert(
            0,
            Tag::New {
                tpid,
                tci: tci | VLAN_PRESENT,
            },
        );
        self.vlan_sync();
    }

    /// Sets the `bits` of the outer tag's TCI to `value`, pushing an 802.1Q
    /// tag when untagged (as `mod_vlan_vid`/`mod_vlan_pcp` do).
    pub(super) fn vlan_set(&mut self, bits: u16, value: u16) {
        self.vlan_init();
        let keep = (VLAN_VID_MASK | VLAN_PCP_MASK) & !bits;
        let (tpid, old) = match self.vlan.cur.first().copied() {
            Some(t) => self.tag_value(t, keep),
            None => (0x8100, VLAN_PRESENT),
        };
        let tci = (old & keep) | (value & bits) | VLAN_PRESENT;
        let tag = Tag::New { tpid, tci };
        match self.vlan.cur.first_mut() {
            Some(top) => *top = tag,
            None => self.vlan.cur.push(tag),
        }
        self.vlan_sync();
    }

    /// Emits the pops and pushes that turn the datapath's tags into the
    /// pipeline's.
    pub(super) fn commit_vlan(&mut self) {
        if !self.vlan.init || self.vlan.cur == self.vlan.dp {
            return;
        }
        let (cur, dp) = (&self.vlan.cur, &self.vlan.dp);
        let common = cur
            .iter()
            .rev()
            .zip(dp.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let pops = dp.len() - common;
        let pushes: Vec<Tag> = cur[..cur.len() - common].iter().rev().copied().collect();
        for _ in 0..pops {
            self.out.push(DpAction::PopVlan);
        }
        for t in pushes {
            let (tpid, tci) = self.tag_value(t, 0xffff);
            self.out.push(DpAction::PushVlan {
                tpid,
                tci: tci & !VLAN_PRESENT,
            });
        }
        self.vlan.dp = self.vlan.cur.clone();
    }

    /// The VLAN the pipeline's packet is in now: the outer tag's VID, or
    /// `None` when untagged. Reads only what it needs.
    pub(super) fn vlan_current(&mut self) -> Option<u16> {
        let present = self.read_bits(Field::VlanTci, u128::from(VLAN_PRESENT));
        if present == 0 {
            return None;
        }
        Some(self.read_bits(Field::VlanTci, u128::from(VLAN_VID_MASK)) as u16)
    }
}

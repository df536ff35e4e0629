//! The conntrack chain ([`crate::ct`]): its tables, first stages that end
//! in `ct(..),recirc(R)`, and the conntrack entries of established
//! connections.

use conntrack::{Addr, CtSpec, Tuple};
use megaflow::offload::{CtRule, HwId, NotOffloaded};
use megaflow::{DpAction, Field, FlowKey, Mask, Match};

use super::translate::rewrite;

use crate::ct::{
    level_ct, level_post, MAX_PASSES, NAT_ASKED, REG_MARK, REG_RECIRC, REG_ZONE_STATE, STATE_SHIFT,
    TAG_BLOCK, TAG_HIT, TAG_TRANSLATED,
};
use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
use crate::dr::{ActionId, ActionSpec, DrBackend, DrError, RestoreRuleId, SyncFlags, TableId};
use crate::prm::encode_into;
use crate::restore::{Restore, REG_TAG, TAG_MAX};

use super::{action, backend, Held, OffloadManager};

/// One `ct()` pass's tables (see [`crate::ct::MAX_PASSES`]): its
/// conntrack table, the table of the stages after it, and the jumps to
/// them.
pub(super) struct Tables {
    pub(super) ct: TableId,
    pub(super) post: TableId,
    to_ct: ActionId,
    to_post: ActionId,
}

/// What a chained stage holds besides a plain flow's objects: its block
/// of tags, those registered, the slow-path queue's rules for them, and
/// the recirculation id it leads to (its pass recorded for it).
#[derive(Default)]
pub(super) struct ChainHeld {
    base: Option<u32>,
    registered: Vec<u32>,
    rules: Vec<RestoreRuleId>,
    next: Option<u32>,
}

/// The passes the stages of each recirculation id follow (the pass of
/// the chained stages that lead there), with how many such stages live.
#[derive(Default)]
pub(super) struct Passes {
    of_recirc: std::collections::HashMap<u32, (usize, usize)>,
}

impl Passes {
    /// The pass after which recirculation `r`'s stages run, if a chained
    /// stage in the device leads there.
    pub(super) fn after(&self, r: u32) -> Option<usize> {
        self.of_recirc.get(&r).map(|&(d, _)| d)
    }
}

/// The `ct()` a chained first stage ends in, and the recirculation id
/// after it.
pub(super) type Chained = (CtSpec, u32);

/// A stage's actions that end in `ct(..),recirc(R)`: the actions before,
/// and the `ct()` and `R`. What a conntrack entry cannot do for the
/// `ct()` leaves the flow in software.
pub(super) fn split(actions: &[DpAction]) -> Result<(&[DpAction], Option<Chained>), NotOffloaded> {
    let before_end = actions.len().saturating_sub(1);
    if actions[..before_end]
        .iter()
        .any(|a| matches!(a, DpAction::Recirc(_)))
    {
        return Err(action(
            "a forked ct(table=T) (actions after it): the FDB does not copy a packet to two stages",
        ));
    }
    match actions {
        [rest @ .., DpAction::Ct(spec), DpAction::Recirc(r)] => {
            if spec.force {
                return Err(action("ct(force): ending a connection is software's"));
            }
            if spec.mark.is_some() || spec.label.is_some() {
                return Err(action(
                    "ct(exec(...)): marks and labels are written by software",
                ));
            }
            // A ct_clear just before: the ct() replaces every bit of
            // tracking state it would clear (the CT entry's registers on a
            // hit, software's ct() on a miss), so it is nothing here.
            let mut rest = rest;
            while let [before @ .., DpAction::CtClear] = rest {
                rest = before;
            }
            Ok((rest, Some((**spec, *r))))
        }
        _ => Ok((actions, None)),
    }
}

/// The match of one direction of a connection in the CT table (the
/// registers aside): its 5-tuple, and for TCP no SYN, FIN or RST (those
/// open, close or reset the connection: software sees them).
fn ct_match(t: &Tuple) -> Result<Match, NotOffloaded> {
    let (proto, flags) = match t.proto {
        6 => (6u128, true),
        17 => (17, false),
        p => return Err(action(&format!("ct entry of protocol {p}"))),
    };
    let mut fields = vec![Field::EthType, Field::IpProto, Field::TpSrc, Field::TpDst];
    let mut k = FlowKey::ZERO;
    if t.v6 {
        fields.extend([Field::Ipv6Src, Field::Ipv6Dst]);
        k.set_field(Field::EthType, 0x86dd);
        k.set_field(Field::Ipv6Src, t.src.to_u128(true));
        k.set_field(Field::Ipv6Dst, t.dst.to_u128(true));
    } else {
        fields.extend([Field::Ipv4Src, Field::Ipv4Dst]);
        k.set_field(Field::EthType, 0x0800);
        k.set_field(Field::Ipv4Src, t.src.to_u128(false));
        k.set_field(Field::Ipv4Dst, t.dst.to_u128(false));
    }
    k.set_field(Field::IpProto, proto);
    k.set_field(Field::TpSrc, u128::from(t.sport));
    k.set_field(Field::TpDst, u128::from(t.dport));
    let mut mask = Mask::exact_fields(&fields);
    if flags {
        // FIN (0x01), SYN (0x02) and RST (0x04) clear.
        mask.set_field(Field::TcpFlags, 0x07);
    }
    Ok(Match::new(&k, &mask))
}

/// A CT entry's match as the device takes it: [`ct_match`] encoded, and
/// the zone and asked-for-NAT bit in reg_c_2. The source port is never
/// matched, so `mode` and `ports` only carry the manager's settings.
pub(crate) fn ct_entry_match(
    r: &CtRule,
    mode: crate::prm::SourcePortMode,
    ports: &dyn crate::prm::PortMap,
    out: &mut crate::prm::Encoded,
) -> Result<(), NotOffloaded> {
    let m = ct_match(&r.tuple)?;
    encode_into(&m, mode, ports, out)?;
    let nat = if r.nat { NAT_ASKED } else { 0 };
    out.set_reg_c(REG_ZONE_STATE, u32::from(r.zone) | nat, 0xffff | NAT_ASKED);
    Ok(())
}

/// A CT entry's modify-header ops: the NAT rewrite, the state and mark
/// registers, and the restore tag's two bits.
pub(crate) fn ct_entry_ops(r: &CtRule) -> Result<Vec<ModifyOp>, NotOffloaded> {
    let mut ops = Vec::new();
    let mut bits = TAG_HIT;
    if let Some(to) = &r.rewrite {
        nat_ops(&ct_match(&r.tuple)?, &r.tuple, to, &mut ops)?;
        bits |= TAG_TRANSLATED;
    }
    let zone_state = u32::from(r.zone) | u32::from(r.meta.state) << STATE_SHIFT;
    ops.push(ModifyOp::set(ModifyField::RegC(REG_ZONE_STATE), zone_state));
    ops.push(ModifyOp::set(ModifyField::RegC(REG_MARK), r.meta.mark));
    ops.push(ModifyOp::Set {
        field: ModifyField::RegC(REG_TAG),
        offset: 0,
        length: 2,
        data: bits,
    });
    Ok(ops)
}

/// A chained first stage's register writes: its tag, the zone (and
/// whether its `ct()` asked for NAT), the next stage's recirculation id.
pub(crate) fn chain_regs(tag: u32, spec: &CtSpec, recirc: u32) -> Vec<ModifyOp> {
    let nat = if spec.nat.is_some() { NAT_ASKED } else { 0 };
    vec![
        ModifyOp::set(ModifyField::RegC(REG_TAG), tag),
        ModifyOp::set(
            ModifyField::RegC(REG_ZONE_STATE),
            u32::from(spec.zone) | nat,
        ),
        ModifyOp::set(ModifyField::RegC(REG_RECIRC), recirc),
    ]
}

/// The modify-header ops that turn `from` into `to`: the header sets of
/// the addresses and ports that differ, as a megaflow's would be
/// (`m` is the entry's match, which says the protocols).
fn nat_ops(
    m: &Match,
    from: &Tuple,
    to: &Tuple,
    ops: &mut Vec<ModifyOp>,
) -> Result<(), NotOffloaded> {
    let v6 = to.v6;
    let addr = |a: Addr, src: bool| match (v6, src) {
        (true, true) => DpAction::SetIpv6Src(a.to_u128(true)),
        (true, false) => DpAction::SetIpv6Dst(a.to_u128(true)),
        (false, true) => DpAction::SetIpv4Src(a.to_u128(false) as u32),
        (false, false) => DpAction::SetIpv4Dst(a.to_u128(false) as u32),
    };
    let mut sets = Vec::new();
    if from.src != to.src {
        sets.push(addr(to.src, true));
    }
    if from.dst != to.dst {
        sets.push(addr(to.dst, false));
    }
    if from.sport != to.sport {
        sets.push(DpAction::SetTpSrc(to.sport));
    }
    if from.dport != to.dport {
        sets.push(DpAction::SetTpDst(to.dport));
    }
    sets.iter().try_for_each(|a| rewrite(m, a, ops))
}

impl<B: DrBackend> OffloadManager<B> {
    /// The tables of passes `0..=pass`, made on first use; a pass made
    /// now gets the conntrack entries already in the device.
    pub(super) fn chain_tables(&mut self, pass: usize) -> Result<&Tables, NotOffloaded> {
        if pass >= MAX_PASSES {
            return Err(action(&format!(
                "a ct() pass beyond the {MAX_PASSES} the device chains"
            )));
        }
        while self.chain.len() <= pass {
            let d = self.chain.len();
            let t = self.make_pass(d)?;
            self.chain.push(t);
            if d > 0 {
                self.replicate_ct(d);
            }
        }
        Ok(&self.chain[pass])
    }

    fn make_pass(&self, pass: usize) -> Result<Tables, NotOffloaded> {
        let b = &*self.backend;
        let d = self.domain;
        let ct = b
            .table_create(d, level_ct(pass))
            .map_err(backend("table_create"))?;
        let made = b.table_create(d, level_post(pass)).and_then(|post| {
            b.action_create(d, ActionSpec::DestTable(ct))
                .and_then(|to_ct| {
                    b.action_create(d, ActionSpec::DestTable(post))
                        .map(|to_post| (to_ct, to_post))
                        .inspect_err(|_| {
                            let _ = b.action_destroy(to_ct);
                        })
                })
                .map(|(to_ct, to_post)| (post, to_ct, to_post))
                .inspect_err(|_| {
                    let _ = b.table_destroy(post);
                })
        });
        match made {
            Ok((post, to_ct, to_post)) => Ok(Tables {
                ct,
                post,
                to_ct,
                to_post,
            }),
            Err(e) => {
                let _ = b.table_destroy(ct);
                Err(backend("table_create")(e))
            }
        }
    }

    /// The jump to the conntrack table of `pass`.
    pub(super) fn jump_to_ct(&mut self, pass: usize) -> Result<ActionId, NotOffloaded> {
        Ok(self.chain_tables(pass)?.to_ct)
    }

    /// A chained stage's tags, registered and steered to the slow-path
    /// queue before any rule writes them, and its next stages' pass
    /// (`pass + 1` after its `ct()`, the pass-th of the path) recorded;
    /// the register writes of its rule.
    pub(super) fn chain_stage(
        &mut self,
        id: HwId,
        spec: &CtSpec,
        (recirc, pass): (u32, usize),
        ch: &mut ChainHeld,
    ) -> Result<Vec<ModifyOp>, NotOffloaded> {
        // Without tags, a CT miss would come back as a plain miss and run
        // (and count) the first stage twice.
        if self.backend.restore_path().is_err() {
            return Err(NotOffloaded::NoRestorePath);
        }
        self.chain_tables(pass)?;
        match self.passes.of_recirc.get_mut(&recirc) {
            Some((d, n)) if *d == pass => *n += 1,
            Some((d, _)) => {
                return Err(action(&format!(
                    "recirc({recirc}) after ct() pass {pass}: its stages run after pass {d}"
                )))
            }
            None => {
                self.passes.of_recirc.insert(recirc, (pass, 1));
            }
        }
        ch.next = Some(recirc);
        let base = self.alloc_tag_block(id)?;
        ch.base = Some(base);
        let post = |translated| Restore::PostCt {
            flow: id,
            zone: spec.zone,
            translated,
            recirc,
        };
        let tags = [
            (
                base,
                Restore::AtCt {
                    flow: id,
                    ct: *spec,
                    recirc,
                },
            ),
            (base | TAG_HIT, post(false)),
            (base | TAG_HIT | TAG_TRANSLATED, post(true)),
        ];
        for (tag, what) in tags {
            self.restore
                .register(tag, what)
                .map_err(|_| NotOffloaded::TableFull)?;
            ch.registered.push(tag);
            ch.rules.push(
                self.backend
                    .restore_rule_create(tag)
                    .map_err(backend("restore_rule_create"))?,
            );
        }
        Ok(chain_regs(base, spec, recirc))
    }

    /// [`TAG_BLOCK`] consecutive tags no live flow has, from a multiple of
    /// [`TAG_BLOCK`], recorded for `id`.
    fn alloc_tag_block(&mut self, id: HwId) -> Result<u32, NotOffloaded> {
        let blocks = TAG_MAX / TAG_BLOCK;
        for _ in 0..blocks {
            let mut base = self.next_tag.div_ceil(TAG_BLOCK) * TAG_BLOCK;
            if base == 0 || base + TAG_BLOCK - 1 > TAG_MAX {
                base = TAG_BLOCK;
            }
            self.next_tag = base + TAG_BLOCK;
            if self.next_tag > TAG_MAX {
                self.next_tag = 1;
            }
            if (base..base + TAG_BLOCK).all(|t| !self.tags.contains_key(&t)) {
                for t in base..base + TAG_BLOCK {
                    self.tags.insert(t, id);
                }
                return Ok(base);
            }
        }
        Err(NotOffloaded::TableFull)
    }

    /// Gives back a chained stage's tags and rules, after its rule left
    /// the device (synced first, so no packet in flight loses its tag).
    pub(super) fn release_chain(&mut self, ch: ChainHeld) {
        if !ch.rules.is_empty() {
            let _ = self.backend.domain_sync(self.domain, SyncFlags::ALL);
            for r in ch.rules {
                let _ = self.backend.restore_rule_destroy(r);
            }
        }
        for t in ch.registered {
            self.restore.unregister(t);
        }
        if let Some(base) = ch.base {
            for t in base..base + TAG_BLOCK {
                self.tags.remove(&t);
            }
        }
        if let Some(r) = ch.next {
            if let Some((_, n)) = self.passes.of_recirc.get_mut(&r) {
                *n -= 1;
                if *n == 0 {
                    self.passes.of_recirc.remove(&r);
                }
            }
        }
    }

    /// Puts one direction of a connection into the conntrack table of
    /// every pass in use.
    pub(super) fn install_ct(&mut self, r: &CtRule) -> Result<HwId, NotOffloaded> {
        self.reap_some();
        self.chain_tables(0)?;
        ct_entry_match(r, self.config.source_port, &self.ports, &mut self.scratch)?;
        let (criteria, mask, value) = self.scratch_match();
        let id = self.install_held(|me, id, held| {
            for pass in 0..me.chain.len() {
                me.build_ct(id, pass, r, (criteria, &mask), &value, held)?;
            }
            Ok(())
        })?;
        self.ct_live.insert(id, *r);
        Ok(id)
    }

    /// One pass's rule of a conntrack entry (the first into `held.rule`,
    /// the others into `held.extra`; one counter for all).
    fn build_ct(
        &mut self,
        id: HwId,
        pass: usize,
        r: &CtRule,
        key: (u8, &[u8]),
        value: &[u8],
        held: &mut Held,
    ) -> Result<(), NotOffloaded> {
        let bytes = encode_list(&ct_entry_ops(r)?);
        let spec = ActionSpec::ModifyHeader(bytes.clone());
        let modify = self.counted_action(bytes, spec, &mut held.counted)?;
        let jump = self.chain_tables(pass)?.to_post;
        let counter = match held.counter {
            Some((counter, _)) => counter,
            None => {
                let (counter, slot) = self.counter(id)?;
                held.counter = Some((counter, slot));
                counter
            }
        };
        let (matcher, k) = self.matcher(level_ct(pass), key)?;
        let rule = self
            .backend
            .rule_create(matcher, value, &[counter, modify, jump])
            .map_err(|e| {
                self.release_matcher(&k);
                backend("rule_create")(e)
            })?;
        if held.rule.is_none() {
            held.matcher = Some(k);
            held.rule = Some(rule);
        } else {
            held.extra.push((rule, k));
        }
        Ok(())
    }

    /// The conntrack entries in the device, put into the table of `pass`
    /// (made after them). One refused stays out of it: its direction
    /// misses there and software tracks it, as before it was offered.
    fn replicate_ct(&mut self, pass: usize) {
        let live: Vec<(HwId, CtRule)> = self.ct_live.iter().map(|(&i, &r)| (i, r)).collect();
        for (id, r) in live {
            let Some(mut held) = self.flows.remove(&id) else {
                continue;
            };
            let built = ct_entry_match(&r, self.config.source_port, &self.ports, &mut self.scratch)
                .and_then(|()| {
                    let (criteria, mask, value) = self.scratch_match();
                    self.build_ct(id, pass, &r, (criteria, &mask), &value, &mut held)
                });
            if let Err(e) = built {
                tracing::debug!(?id, "conntrack entry not copied to pass {pass}: {e}");
            }
            self.flows.insert(id, held);
        }
    }

    /// Destroys the passes' jumps and tables, the last pass first (their
    /// rules and matchers went with their flows).
    pub(super) fn shutdown_chain(&mut self) -> Result<(), DrError> {
        while let Some(t) = self.chain.pop() {
            let b = &*self.backend;
            b.action_destroy(t.to_ct)?;
            b.action_destroy(t.to_post)?;
            b.table_destroy(t.post)?;
            b.table_destroy(t.ct)?;
        }
        Ok(())
    }
}

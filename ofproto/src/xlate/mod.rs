//! Translation: a packet's key through the OpenFlow pipeline into datapath
//! actions and the widest mask under which they hold (a megaflow).
//!
//! One [`Ctx`] per translation carries the packet as the pipeline sees it
//! now (`flow`, rewritten by set-field, VLAN and move actions), the
//! untouched key (`orig`), the accumulated [`Wildcards`], the datapath
//! actions emitted so far and the OpenFlow action set. Every read of the key
//! goes through `Ctx::read`/`Ctx::read_bits` (or the classifier, which
//! records into the same `Wildcards`), so the final mask is exactly the bits
//! some decision depended on (DESIGN.md, contract 1).
//!
//! Rewrites are emitted lazily: a set-field marks its field dirty and the
//! datapath `set` is emitted just before the next output, with the field's
//! value at that point. Whether a field is emitted depends only on which
//! actions ran, never on the packet's old value (Open vSwitch compares with
//! the old value and must un-wildcard it to do so; eswitch does not).
//! VLAN tags are tracked as a stack of original and pushed tags
//! (`vlan.rs`), committed as pops and pushes.
//!
//! Semantics: OpenFlow 1.3 instruction order (meter, apply-actions,
//! clear-actions, write-actions, write-metadata, goto-table); a table miss
//! with no table-miss rule drops and discards the action set; the action set
//! runs when a rule without goto-table ends the pipeline; `resubmit(,T)`
//! runs table T's rule (and its goto chain) in place, at most
//! [`MAX_DEPTH`] deep and [`MAX_LOOKUPS`] lookups in all; an output to the
//! input port by number is skipped (OpenFlow requires `IN_PORT`);
//! `dec_ttl` is left to the datapath, which drops a packet whose TTL would
//! expire (so the TTL is not un-wildcarded).

mod group;
mod learn;
mod normal;
mod patch;
mod pkt_len;
mod trace;
mod vlan;

pub use trace::{TraceEvent, TracedRule};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use megaflow::actions::{ArpField, ControllerExtra, SampleCookie, SampleOutput, UserspaceReason};
use megaflow::key::{
    PACKET_META_FIELDS, TUNNEL_FIELDS, VLAN_PCP_MASK, VLAN_PRESENT, VLAN_VID_MASK,
};
use megaflow::{Actions, DpAction, Field, FlowKey, Mask, Match, PortNo, Timestamp};

use crate::bridge::{Bridge, Generations};
use crate::bridges::BridgeNo;
use crate::mac::MacLearn;
use crate::recirc::{FrozenState, Step};
use crate::rule::{ControllerAction, CtAction, CtZone, OfAction, OfPort};
use crate::table::RuleRef;
use crate::wildcards::{Wildcards, PIPELINE_FIELDS};
use crate::TableId;

/// Most `resubmit`s to a table at or before the resubmitting one nested
/// at once (Open vSwitch's `MAX_DEPTH`): only those can loop; a resubmit
/// to a later table cannot, and does not count.
pub const MAX_DEPTH: u32 = 64;
/// Deepest nesting of `resubmit`s of any kind (each is a native stack
/// frame of the translation; OVN's path through a logical switch, a
/// router and a second switch is about 120 deep).
pub const MAX_NESTING: u32 = 512;
/// Most table lookups in one translation.
pub const MAX_LOOKUPS: u32 = 4096;

const ETH_TYPE_IPV4: u128 = 0x0800;
const ETH_TYPE_IPV6: u128 = 0x86dd;
const ETH_TYPE_ARP: u128 = 0x0806;

/// Why a translation was cut short; the packet is dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XlateError {
    #[error(
        "resubmit nested too deep (over {MAX_DEPTH} back to an earlier table, or {MAX_NESTING} in all)"
    )]
    TooDeep,
    #[error("more than {MAX_LOOKUPS} table lookups")]
    TooManyLookups,
    #[error("set_field on {0} is not supported by the datapath")]
    UnsupportedSetField(Field),
    #[error("recirculation context {0:#x} not found")]
    NoRecircContext(u32),
    #[error(
        "no recirculation id left (at most {} at once)",
        crate::recirc::MAX_IDS
    )]
    RecircIdsExhausted,
}

/// The result of translating one key.
#[derive(Clone, Debug)]
pub struct Translation {
    /// The megaflow mask: the bits the result depends on.
    pub mask: Mask,
    /// Datapath actions; empty means drop.
    pub actions: Vec<DpAction>,
    /// Every rule hit, in order (for stats and for the revalidator).
    pub rules: Vec<RuleRef>,
    /// True when NORMAL consulted the MAC table: the result also depends on
    /// `generations.mac`.
    pub uses_mac_table: bool,
    /// True when a tunnel output consulted the underlay: the result also
    /// depends on `generations.underlay`.
    pub uses_underlay: bool,
    /// Generations of the inputs at translation time.
    pub generations: Generations,
    /// What NORMAL learned from this packet (apply with `Bridge::learn`).
    pub learned: Vec<MacLearn>,
    /// The flows `learn` actions built, each for its bridge (add with
    /// `Bridge::learn_flows`, for a packet's translation only).
    pub learned_flows: Vec<(BridgeNo, crate::FlowMod)>,
    /// Set when translation was cut short (the packet is dropped).
    pub error: Option<XlateError>,
    /// Every step, when tracing.
    pub trace: Vec<TraceEvent>,
    /// The packet as the pipeline left it.
    pub final_flow: FlowKey,
}

impl Translation {
    /// What it read besides the tables and ports.
    pub fn uses(&self) -> crate::bridge::Uses {
        crate::bridge::Uses {
            mac: self.uses_mac_table,
            underlay: self.uses_underlay,
        }
    }

    /// The megaflow: the key under the mask.
    pub fn megaflow(&self, key: &FlowKey) -> Match {
        Match::new(key, &self.mask)
    }

    /// The datapath actions as the megaflow cache stores them.
    pub fn datapath_actions(&self) -> Actions {
        Actions::new(self.actions.clone())
    }

    /// True when the packet goes nowhere.
    pub fn is_drop(&self) -> bool {
        self.actions.is_empty()
    }
}

/// Header fields the datapath can rewrite, in the order their `set`
/// actions are emitted.
/// On an ARP packet, `Ipv4Src`/`Ipv4Dst` are its protocol addresses and
/// `IpProto` its opcode; `ArpSha`/`ArpTha` are ARP's only.
const DP_FIELDS: [Field; 14] = [
    Field::EthSrc,
    Field::EthDst,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::IpProto,
    Field::ArpSha,
    Field::ArpTha,
];

/// `Field::IpTtl`'s index in [`DP_FIELDS`].
const TTL_SLOT: usize = 8;
const _: () = assert!(matches!(DP_FIELDS[TTL_SLOT], Field::IpTtl));

/// The datapath action that sets `field` to `v` on a packet of
/// ethertype `eth_type`.
fn dp_set(field: Field, v: u128, eth_type: u128) -> DpAction {
    if eth_type == ETH_TYPE_ARP {
        match field {
            Field::Ipv4Src => return DpAction::SetArp(ArpField::Spa(v as u32)),
            Field::Ipv4Dst => return DpAction::SetArp(ArpField::Tpa(v as u32)),
            Field::IpProto => return DpAction::SetArp(ArpField::Op(v as u16)),
            Field::ArpSha => return DpAction::SetArp(ArpField::Sha(v as u64)),
            Field::ArpTha => return DpAction::SetArp(ArpField::Tha(v as u64)),
            _ => {}
        }
    }
    match field {
        Field::EthSrc => DpAction::SetEthSrc(v as u64),
        Field::EthDst => DpAction::SetEthDst(v as u64),
        Field::Ipv4Src => DpAction::SetIpv4Src(v as u32),
        Field::Ipv4Dst => DpAction::SetIpv4Dst(v as u32),
        Field::Ipv6Src => DpAction::SetIpv6Src(v),
        Field::Ipv6Dst => DpAction::SetIpv6Dst(v),
        Field::IpDscp => DpAction::SetDscp(v as u8),
        Field::IpEcn => DpAction::SetEcn(v as u8),
        Field::IpTtl => DpAction::SetTtl(v as u8),
        Field::TpSrc => DpAction::SetTpSrc(v as u16),
        _ => DpAction::SetTpDst(v as u16),
    }
}

/// Fields the pipeline may write that exist only inside it.
fn is_pipeline_field(f: Field) -> bool {
    PIPELINE_FIELDS.contains(&f)
        || matches!(f, Field::PktMark | Field::InPort)
        || TUNNEL_FIELDS.contains(&f)
}

/// How a table visit ended.
enum Next {
    Goto(TableId),
    End,
    Miss,
    Abort,
}

/// The state of one translation.
pub(crate) struct Ctx<'a> {
    /// The switch's bridges (the main one, holding the others).
    root: &'a Bridge,
    /// The bridge the packet is in now, and its number (a patch port
    /// takes it to another).
    br: &'a Bridge,
    bi: BridgeNo,
    now: Timestamp,
    orig: FlowKey,
    flow: FlowKey,
    wc: Wildcards,
    out: Vec<DpAction>,
    /// Bit i: `DP_FIELDS[i]` was written since the last commit.
    dirty: u16,
    /// Bit i: the datapath packet's `DP_FIELDS[i]` was changed by an
    /// emitted action (a group bucket's copy puts these back).
    committed: u16,
    /// Bit i: an action changed `DP_FIELDS[i]` (set or `dec_ttl`).
    touched: u16,
    vlan: vlan::VlanStack,
    action_set: Vec<OfAction>,
    rules: Vec<RuleRef>,
    /// The rule whose actions run now: its table, cookie, and whether it
    /// is its table's miss entry (priority 0, matching everything), for
    /// packet-ins.
    current: (TableId, u64, bool),
    depth: u32,
    /// Resubmits back to an earlier (or the same) table now nested.
    loops: u32,
    lookups: u32,
    uses_mac_table: bool,
    uses_underlay: bool,
    learned: Vec<MacLearn>,
    error: Option<XlateError>,
    tracing: bool,
    trace: Vec<TraceEvent>,
    /// A `dp_hash` group cut the stage short: what the next stage runs
    /// first, gathered as the action lists it was in unwind (nothing more
    /// runs in this stage).
    freezing: Option<Vec<Step>>,
    /// The packet's `dp_hash` is computed (by this stage or an earlier).
    hashed: bool,
    /// The packet's `ct_*` fields are its tracking state (not cleared by
    /// a `ct()` or `ct_clear` of this stage, or at a stage that did not
    /// come from `ct()`).
    ct_live: bool,
    /// Group buckets being run (a freeze there would have to resume a
    /// bucket's copy: a `dp_hash` group in one hashes in translation).
    in_bucket: u32,
    /// `push`/`pop`'s values, each right-aligned (carried into the next
    /// stage of a recirculation).
    stack: Vec<u128>,
    /// A `controller(pause)` ran: the freeze (`freezing`, which stops
    /// what follows) is its continuation, not a recirculation.
    paused: bool,
    /// `resubmit(PORT,TABLE)`: the in_port the next table lookup sees.
    lookup_port: Option<u32>,
    /// A `check_pkt_larger` ran: what follows is gathered (`freezing`)
    /// for its two branches.
    pkt_fork: Option<Box<pkt_len::PktFork>>,
    /// What `learn` actions built.
    learned_flows: Vec<(BridgeNo, crate::FlowMod)>,
}

/// Why a megaflow that ran a `learn` this switch does not run stays in
/// software.
pub const LEARN_NOT_RUN: &str =
    "learn(...) with fin timeouts, delete_learned, limit or result_dst: kept as sent, not run";

/// Most values `push` keeps at once.
pub const MAX_STACK: usize = 1024;

/// Translates `key` through `br`'s pipeline, starting at table 0.
impl Bridge {
    /// Translates a packet's key through the pipeline (no side effects).
    pub fn translate(&self, key: &FlowKey, now: Timestamp) -> Translation {
        translate(self, key, now, false)
    }

    /// Translates and records every step for a readable explanation.
    pub fn trace(&self, key: &FlowKey, now: Timestamp) -> Translation {
        translate(self, key, now, true)
    }
}

fn translate(root: &Bridge, key: &FlowKey, now: Timestamp, tracing: bool) -> Translation {
    let mut ctx = Ctx::new(root, key, now, tracing);
    let id = key.recirc_id() as u32;
    if id != 0 {
        // A later stage: sampling, tunnel ingress and fail-open happened
        // at the first.
        match root.recirc.thaw(id) {
            Some(state) => {
                ctx.thaw(&state);
                if state.steps.is_empty() {
                    ctx.run_chain(state.table, true);
                } else {
                    ctx.resume(&state.steps);
                }
            }
            None => ctx.fail(XlateError::NoRecircContext(id)),
        }
        return ctx.finish();
    }
    // The bridge is the input port's: with more than one, the megaflow
    // depends on in_port.
    let (bi, br) = if root.others().next().is_some() {
        root.home(PortNo(ctx.read(Field::InPort) as u32))
    } else {
        (BridgeNo::MAIN, root)
    };
    ctx.enter(bi, br);
    ctx.port_sampling();
    ctx.tunnel_ingress();
    ctx.not_a_tunnel_packet();
    if br.fail_open() {
        // Fail-open: the switch is a learning switch until a controller
        // is back.
        ctx.normal();
    } else {
        ctx.run_chain(TableId(0), true);
    }
    ctx.finish()
}

impl Bridge {
    /// Goes on from `controller(pause)`'s continuation `id` with the
    /// packet the controller sent back (`key`, from NXT_RESUME): the frozen
    /// state, then the pipeline fields the controller gave (`fields`: its
    /// metadata as (field, value, mask), e.g. the register bit OVN sets to
    /// say what it did), then what
    /// was not run. An unknown id fails with `NoRecircContext`.
    pub fn translate_resume(
        &self,
        key: &FlowKey,
        id: u32,
        fields: &[(Field, u128, u128)],
        now: Timestamp,
    ) -> Translation {
        let mut ctx = Ctx::new(self, key, now, false);
        match self.recirc.thaw(id) {
            Some(state) => {
                ctx.thaw(&state);
                for &(f, v, m) in fields {
                    let old = ctx.flow.field(f);
                    ctx.flow.set_field(f, (old & !m) | (v & m));
                    ctx.wc.write(f, m);
                }
                ctx.resume(&state.steps);
            }
            None => ctx.fail(XlateError::NoRecircContext(id)),
        }
        ctx.finish()
    }

    /// Translates `actions` run on a packet with `key` (a PACKET_OUT's
    /// action list: no table lookup unless an action resubmits).
    pub fn translate_actions(
        &self,
        key: &FlowKey,
        actions: &[OfAction],
        now: Timestamp,
    ) -> Translation {
        self.translate_actions_in(BridgeNo::MAIN, key, actions, now)
    }

    /// [`translate_actions`](Self::translate_actions) in bridge `no` (a
    /// PACKET_OUT on that bridge's OpenFlow connection).
    pub fn translate_actions_in(
        &self,
        no: BridgeNo,
        key: &FlowKey,
        actions: &[OfAction],
        now: Timestamp,
    ) -> Translation {
        let mut ctx = Ctx::new(self, key, now, false);
        if let Some(b) = self.sub(no) {
            ctx.enter(no, b);
        }
        ctx.actions(actions);
        ctx.finish()
    }
}

impl<'a> Ctx<'a> {
    fn new(root: &'a Bridge, key: &FlowKey, now: Timestamp, tracing: bool) -> Ctx<'a> {
        // Every megaflow is of one stage: recirc_id exact (as Open
        // vSwitch's `xlate_wc_init`).
        let mut wc = Wildcards::new();
        wc.unwildcard_field(Field::RecircId);
        Ctx {
            root,
            br: root,
            bi: BridgeNo::MAIN,
            now,
            orig: *key,
            flow: *key,
            wc,
            out: Vec::new(),
            dirty: 0,
            committed: 0,
            touched: 0,
            vlan: vlan::VlanStack::default(),
            action_set: Vec::new(),
            rules: Vec::new(),
            // No rule yet (a PACKET_OUT's actions): the cookie of none.
            current: (TableId(0), u64::MAX, false),
            depth: 0,
            loops: 0,
            lookups: 0,
            uses_mac_table: false,
            uses_underlay: false,
            learned: Vec::new(),
            error: None,
            tracing,
            trace: Vec::new(),
            freezing: None,
            hashed: false,
            ct_live: true,
            in_bucket: 0,
            stack: Vec::new(),
            paused: false,
            lookup_port: None,
            pkt_fork: None,
            learned_flows: Vec::new(),
        }
    }

    /// True once nothing more may run: an error, a freeze or a pause.
    fn halted(&self) -> bool {
        self.error.is_some() || self.freezing.is_some()
    }

    /// Freezes what a `dp_hash` group or `controller(pause)` cut short,
    /// under an id (the recirculation or the continuation).
    fn finish_freezing(&mut self) {
        if self.finish_fork() {
            return;
        }
        if let Some(steps) = self.freezing.take() {
            if self.error.is_none() {
                let ct = self.ct_live;
                if self.paused {
                    self.continuation(steps, ct);
                } else {
                    self.freeze(TableId(0), steps, ct);
                }
            }
        }
        self.paused = false;
    }

    fn finish(mut self) -> Translation {
        self.finish_freezing();
        if self.error.is_some() {
            self.out.clear();
        }
        self.sample_outputs();
        self.pin_tag_kinds();
        Translation {
            mask: self.wc.finish(),
            actions: self.out,
            rules: self.rules,
            uses_mac_table: self.uses_mac_table,
            uses_underlay: self.uses_underlay,
            generations: self.root.generations(),
            learned: self.learned,
            learned_flows: self.learned_flows,
            error: self.error,
            trace: self.trace,
            final_flow: self.flow,
        }
    }
}

impl<'a> Ctx<'a> {
    /// Reads a whole field of the packet as the pipeline sees it now.
    #[inline]
    fn read(&mut self, field: Field) -> u128 {
        self.wc.read(&self.flow, field)
    }

    /// Reads some bits of a field of the packet as the pipeline sees it now.
    #[inline]
    fn read_bits(&mut self, field: Field, bits: u128) -> u128 {
        self.wc.read_bits(&self.flow, field, bits)
    }

    /// Reads bits of the packet as it arrived (for original VLAN tags).
    #[inline]
    fn read_packet(&mut self, field: Field, bits: u128) -> u128 {
        self.wc.unwildcard_packet(field, bits);
        self.orig.field(field) & bits
    }

    fn note(&mut self, text: impl FnOnce() -> String) {
        if self.tracing {
            self.trace.push(TraceEvent::Note {
                depth: self.depth,
                text: text(),
            });
        }
    }

    fn fail(&mut self, e: XlateError) {
        if self.error.is_none() {
            let msg = e.to_string();
            self.note(|| format!("error: {msg}"));
            self.error = Some(e);
        }
    }

    /// Runs `start` and the tables it goes to. At the top level a chain that
    /// ends in a rule without goto-table executes the action set.
    fn run_chain(&mut self, start: TableId, top: bool) {
        let mut table = start;
        loop {
            match self.visit(table, top) {
                Next::Goto(g) => table = g,
                Next::End => {
                    if top {
                        self.execute_action_set();
                    }
                    return;
                }
                Next::Miss | Next::Abort => return,
            }
        }
    }

    /// Looks `table` up and runs the instructions of the rule found
    /// (`top`: in the pipeline's own chain, not a resubmit's).
    fn visit(&mut self, table: TableId, top: bool) -> Next {
        self.lookups += 1;
        if self.lookups > MAX_LOOKUPS {
            self.fail(XlateError::TooManyLookups);
            return Next::Abort;
        }
        let br: &'a Bridge = self.br;
        // `resubmit(PORT,TABLE)`: this lookup alone sees PORT (on a copy
        // of the key, made only then).
        let with_port = self.lookup_port.take().map(|p| {
            let mut flow = self.flow;
            flow.set_field(Field::InPort, u128::from(p));
            flow
        });
        let flow = with_port.as_ref().unwrap_or(&self.flow);
        let hit = br
            .tables
            .table(table)
            .and_then(|t| t.lookup(flow, &mut self.wc));
        if self.tracing {
            self.trace.push(TraceEvent::Table {
                depth: self.depth,
                table,
                rule: hit.map(|(id, r)| Box::new(TracedRule::new(self.bi, table, id, r))),
            });
        }
        let Some((id, rule)) = hit else {
            return Next::Miss;
        };
        self.rules.push(RuleRef {
            bridge: self.bi,
            table,
            id,
            uid: rule.uid,
        });
        self.current = (
            table,
            rule.spec.cookie.0,
            rule.spec.priority.0 == 0 && rule.spec.matched == megaflow::Match::catch_all(),
        );
        let ins = &rule.spec.instructions;
        if let Some(m) = ins.meter {
            self.out.push(DpAction::Meter(m));
        }
        if !self.actions(&ins.apply) {
            // Cut short: a freeze gathers the rest of the rule.
            if let Some(steps) = &mut self.freezing {
                steps.push(Step::Instructions(crate::rule::Instructions {
                    clear_actions: ins.clear_actions,
                    write: ins.write.clone(),
                    write_metadata: ins.write_metadata,
                    ..Default::default()
                }));
                match ins.goto_table {
                    Some(table) => steps.push(Step::Chain { table, top }),
                    None if top => steps.push(Step::ActionSet),
                    None => {}
                }
            }
            return Next::Abort;
        }
        self.after_apply(ins);
        match ins.goto_table {
            Some(g) => Next::Goto(g),
            None => Next::End,
        }
    }

    /// A rule's instructions after its apply-actions: clear-actions,
    /// write-actions, write-metadata.
    fn after_apply(&mut self, ins: &crate::rule::Instructions) {
        if ins.clear_actions {
            self.action_set.clear();
        }
        if let Some(w) = &ins.write {
            for a in w {
                write_action_set(&mut self.action_set, a);
            }
        }
        if let Some((v, m)) = ins.write_metadata {
            self.set_field(Field::Metadata, u128::from(v), u128::from(m));
        }
    }

    /// Runs the action set in the order OpenFlow 1.3 (5.10) prescribes.
    fn execute_action_set(&mut self) {
        if self.action_set.is_empty() {
            return;
        }
        let mut set = std::mem::take(&mut self.action_set);
        set.sort_by_key(action_set_rank);
        // A group in the set takes precedence over an output (5.10).
        if set.iter().any(|a| matches!(a, OfAction::Group(_))) {
            set.retain(|a| !matches!(a, OfAction::Output { .. }));
        }
        if self.tracing {
            self.note(|| format!("executing action set ({} actions)", set.len()));
        }
        self.actions(&set);
    }

    /// Runs `list` in order; false when it was cut short (an error or a
    /// freeze, which gathers the actions not run).
    fn actions(&mut self, list: &[OfAction]) -> bool {
        for (i, a) in list.iter().enumerate() {
            self.action(a);
            if self.halted() {
                if let Some(steps) = &mut self.freezing {
                    steps.extend(list[i + 1..].iter().cloned().map(Step::Action));
                }
                return false;
            }
        }
        true
    }

    /// A later stage that resumes in the middle of a rule: its steps, in
    /// order (a freeze among them gathers those not run).
    fn resume(&mut self, steps: &[Step]) {
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Action(a) => self.action(a),
                Step::Instructions(ins) => self.after_apply(ins),
                Step::Chain { table, top } => self.run_chain(*table, *top),
                Step::ActionSet => self.execute_action_set(),
            }
            if self.halted() {
                if let Some(more) = &mut self.freezing {
                    more.extend(steps[i + 1..].iter().cloned());
                }
                return;
            }
        }
    }

    fn action(&mut self, a: &OfAction) {
        if self.tracing {
            self.trace.push(TraceEvent::Action {
                depth: self.depth,
                action: a.clone(),
            });
        }
        match a {
            OfAction::Output { port, max_len } => self.output(*port, *max_len),
            OfAction::PushVlan(tpid) => self.vlan_push(*tpid),
            OfAction::PopVlan => self.vlan_pop(),
            OfAction::SetVlanVid(v) => self.vlan_set(VLAN_VID_MASK, *v),
            OfAction::SetVlanPcp(p) => self.vlan_set(VLAN_PCP_MASK, u16::from(*p) << 13),
            OfAction::SetField { field, value, mask } => self.set_field(*field, *value, *mask),
            OfAction::SetTunMetadata { slot, value, mask } => {
                let shift = slot.shift();
                let mask = (mask << shift) & slot.mask();
                self.set_field(Field::TunOpts, value << shift, mask);
                let bit = u128::from(slot.present_bit());
                self.set_field(Field::TunMdPresent, bit, bit);
            }
            OfAction::Move { src, dst } => {
                let v = self.read_bits(src.field, src.mask()) >> src.ofs;
                self.write_range(dst, v);
            }
            OfAction::Push(f) => {
                let v = self.read_bits(f.field, f.mask()) >> f.ofs;
                if self.stack.len() >= MAX_STACK {
                    self.note(|| format!("push: the stack holds {MAX_STACK} values, skipped"));
                } else {
                    self.stack.push(v);
                }
            }
            OfAction::Pop(f) => match self.stack.pop() {
                Some(v) => self.write_range(f, v),
                // As Open vSwitch: nothing to pop leaves the field.
                None => self.note(|| "pop: the stack is empty".to_string()),
            },
            // A conjunctive flow is never a lookup's answer (the table
            // answers with the conj_id flow instead): nothing to run.
            OfAction::Note(_) | OfAction::Conjunction { .. } => {}
            OfAction::DecTtl | OfAction::DecTtlIds(_) => self.dec_ttl(),
            OfAction::Learn { learn2, body } => self.learn(*learn2, body),
            OfAction::Clone(inner) => self.on_copy(|ctx| {
                for a in inner {
                    ctx.action(a);
                    if ctx.halted() {
                        break;
                    }
                }
            }),
            OfAction::CheckPktLarger { pkt_len, dst } => self.check_pkt_larger(*pkt_len, *dst),
            OfAction::ResubmitPort(p, t) => {
                // As Open vSwitch: the table's lookup sees the port; the
                // rule it finds runs with the packet's own.
                self.lookup_port = Some(p.number());
                self.action(&OfAction::Resubmit(*t));
                self.lookup_port = None;
            }
            OfAction::Resubmit(t) => {
                let back = u32::from(*t <= self.current.0);
                if self.loops >= MAX_DEPTH || self.depth >= MAX_NESTING {
                    self.fail(XlateError::TooDeep);
                    return;
                }
                let current = self.current;
                self.loops += back;
                self.depth += 1;
                let forked = self.pkt_fork.is_some();
                self.run_chain(*t, false);
                if !forked {
                    // A check_pkt_larger in the resubmitted chain forks
                    // only that chain: the caller goes on after it.
                    self.finish_fork();
                }
                self.depth -= 1;
                self.loops -= back;
                // The rule that resubmitted goes on (its table and cookie
                // for a later packet-in), as in Open vSwitch.
                self.current = current;
            }
            OfAction::Group(g) => self.group(*g),
            OfAction::Sample { probability } => {
                self.commit();
                let rate = (65535.0 / f64::from((*probability).max(1))).round() as u32;
                self.sample(u32::from(*probability) * 65537, rate);
            }
            OfAction::Ct(ct) => self.conntrack(ct),
            OfAction::Controller(c) => {
                self.controller(c.max_len, Some(c));
                if c.pause {
                    // Nothing after it runs now: what would is frozen, and
                    // goes on when the controller sends the packet back
                    // (NXT_RESUME with the packet-in's continuation).
                    self.note(|| "controller(pause): the pipeline stops here".into());
                    self.paused = true;
                    self.freezing = Some(Vec::new());
                }
            }
            OfAction::CtClear => {
                self.out.push(DpAction::CtClear);
                self.clear_ct_fields();
            }
        }
    }

    /// `ct(...)`: the datapath tracks the packet as the pipeline made it
    /// (pending rewrites go first); with `table=T` the stage ends in a
    /// recirculation to T.
    fn conntrack(&mut self, ct: &CtAction) {
        self.commit();
        let zone = match ct.zone {
            CtZone::Imm(z) => z,
            CtZone::Field(r) => (self.read_bits(r.field, r.mask()) >> r.ofs) as u16,
        };
        let mut spec = conntrack::CtSpec {
            zone,
            commit: ct.commit,
            force: ct.force,
            nat: ct.nat,
            mark: None,
            label: None,
        };
        for a in &ct.exec {
            // The bits written: a set's value, or a move's source as it
            // is at this point of the pipeline.
            let (field, value, mask) = match a {
                OfAction::SetField { field, value, mask } => (*field, *value, *mask),
                OfAction::Move { src, dst } => {
                    let v = self.read_bits(src.field, src.mask()) >> src.ofs;
                    (dst.field, v << dst.ofs, dst.mask())
                }
                // The parser and the wire decoder let nothing else in.
                _ => continue,
            };
            let merge = |acc: Option<(u128, u128)>| {
                let (v0, m0) = acc.unwrap_or((0, 0));
                Some(((v0 & !mask) | (value & mask), m0 | mask))
            };
            match field {
                Field::CtMark => {
                    let acc = spec.mark.map(|(v, m)| (u128::from(v), u128::from(m)));
                    spec.mark = merge(acc).map(|(v, m)| (v as u32, m as u32));
                }
                Field::CtLabel => spec.label = merge(spec.label),
                _ => {}
            }
        }
        self.out.push(DpAction::Ct(Box::new(spec)));
        // What ct() will say is not known here: in the rest of this stage
        // the packet reads as untracked (Open vSwitch clears the fields).
        self.clear_ct_fields();
        if let Some(t) = ct.table {
            // A fork (Open vSwitch's): the tracked copy goes on at table
            // T, and the packet itself, untracked, runs what follows
            // here. Nothing following: the recirculation ends the stage.
            // The action set went with the copy (frozen): it runs once,
            // where the pipeline goes on. (Open vSwitch 3.1 keeps it for
            // both and aborts on it: `ofproto-dpif-rid.c:235: assertion
            // state->action_set_len <= state->ofpacts_len failed`.)
            if self.freeze(t, Vec::new(), true) {
                self.action_set.clear();
            }
        }
    }

    /// The `ct_*` fields read as zero from here on (pipeline constants).
    fn clear_ct_fields(&mut self) {
        self.ct_live = false;
        for &f in &PACKET_META_FIELDS[2..] {
            self.flow.set_field(f, 0);
            self.wc.write(f, f.layout().max_value());
        }
    }

    /// Freezes what the next stage needs (its start: `table`, or `steps`
    /// when not empty) under an id, and the datapath recirculates the
    /// packet to it. False when no id was left (the translation failed).
    fn freeze(&mut self, table: TableId, steps: Vec<Step>, conntracked: bool) -> bool {
        let state = self.frozen(table, steps, conntracked);
        match self.br.recirc.freeze(state) {
            Some(id) => {
                self.note(|| format!("recirculate to {id:#x}: resume at table {table}"));
                self.out.push(DpAction::Recirc(id));
                true
            }
            None => {
                self.fail(XlateError::RecircIdsExhausted);
                false
            }
        }
    }

    /// `controller(pause)`'s continuation: what was not run (`steps`),
    /// frozen under an id the packet-in carries; the controller's
    /// NXT_RESUME goes on from it ([`Bridge::translate_resume`]).
    fn continuation(&mut self, mut steps: Vec<Step>, conntracked: bool) {
        if steps.is_empty() {
            // Nothing after the pause: a resume runs nothing.
            steps.push(Step::ActionSet);
        }
        let state = self.frozen(TableId(0), steps, conntracked);
        let Some(id) = self.br.recirc.freeze(state) else {
            self.fail(XlateError::RecircIdsExhausted);
            return;
        };
        self.note(|| format!("continuation {id:#x}: the controller may resume here"));
        let last = self.out.iter_mut().rev().find_map(|a| match a {
            DpAction::Userspace(UserspaceReason::Controller { extra, .. }) => Some(extra),
            _ => None,
        });
        if let Some(extra) = last {
            let mut x = extra.as_deref().cloned().unwrap_or_default();
            x.continuation = Some(id);
            *extra = Some(std::sync::Arc::new(x));
        }
    }

    /// The state a later stage (or a resume) starts from.
    fn frozen(&mut self, table: TableId, steps: Vec<Step>, conntracked: bool) -> FrozenState {
        self.commit();
        let written = self.wc.written();
        let mut fields = Vec::new();
        for &f in PIPELINE_FIELDS {
            let v = self.flow.field(f);
            if v != 0 {
                fields.push((f, v, f.layout().max_value()));
            }
        }
        for &f in TUNNEL_FIELDS.iter().chain(&[Field::PktMark, Field::InPort]) {
            let w = written.field(f);
            if w != 0 {
                fields.push((f, self.flow.field(f) & w, w));
            }
        }
        FrozenState {
            bridge: self.bi,
            table,
            fields,
            action_set: self.action_set.clone(),
            conntracked,
            steps,
            hashed: self.hashed,
            stack: self.stack.clone(),
        }
    }

    /// Starts a later stage from its frozen state.
    fn thaw(&mut self, s: &FrozenState) {
        if let Some(b) = self.root.sub(s.bridge) {
            self.enter(s.bridge, b);
        }
        for &(f, v, m) in &s.fields {
            let old = self.flow.field(f);
            self.flow.set_field(f, (old & !m) | (v & m));
            self.wc.write(f, m);
        }
        if !s.conntracked {
            self.clear_ct_fields();
        }
        self.hashed = s.hashed;
        self.stack = s.stack.clone();
        self.action_set = s.action_set.clone();
        let t = s.table;
        self.note(|| format!("resume at table {t}"));
    }

    /// A sampled copy to the sFlow exporter, 1 packet in `rate`.
    fn sample(&mut self, probability: u32, rate: u32) {
        let cookie = SampleCookie::new(rate);
        self.out.push(DpAction::Sample {
            probability,
            actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample(cookie))]),
        });
    }

    /// The input port's sFlow sampling, first of all actions (where the
    /// offload layer can hand it to the device's sampler).
    /// The megaflow matches in_port only when some port samples.
    fn port_sampling(&mut self) {
        if !self.br.ports.iter().any(|p| p.sample_rate > 0) {
            return;
        }
        let in_port = PortNo(self.read(Field::InPort) as u32);
        let rate = self.br.ports.get(in_port).map_or(0, |p| p.sample_rate);
        if rate > 0 {
            self.note(|| format!("sFlow: 1 in {rate} packets of port {in_port} sampled"));
            self.sample((f64::from(u32::MAX) / f64::from(rate)).round() as u32, rate);
        }
    }

    /// Fills in the output of every sampled copy's cookie: where the
    /// packet itself goes once all actions are known.
    fn sample_outputs(&mut self) {
        let output = SampleOutput::of(&self.out);
        for a in &mut self.out {
            let DpAction::Sample { actions, .. } = a else {
                continue;
            };
            let patched: Vec<DpAction> = actions
                .iter()
                .map(|a| match a {
                    DpAction::Userspace(UserspaceReason::Sample(c)) => {
                        DpAction::Userspace(UserspaceReason::Sample(SampleCookie { output, ..*c }))
                    }
                    other => other.clone(),
                })
                .collect();
            *actions = Actions::new(patched);
        }
    }

    /// True when the packet (as it is now) has the headers `field` needs.
    fn dp_prereq_ok(&mut self, field: Field) -> bool {
        match field {
            Field::EthSrc | Field::EthDst => true,
            Field::Ipv4Src | Field::Ipv4Dst => {
                matches!(self.read(Field::EthType), ETH_TYPE_IPV4 | ETH_TYPE_ARP)
            }
            Field::IpProto | Field::ArpSha | Field::ArpTha => {
                self.read(Field::EthType) == ETH_TYPE_ARP
            }
            Field::Ipv6Src | Field::Ipv6Dst => self.read(Field::EthType) == ETH_TYPE_IPV6,
            Field::IpDscp | Field::IpEcn | Field::IpTtl => {
                matches!(self.read(Field::EthType), ETH_TYPE_IPV4 | ETH_TYPE_IPV6)
            }
            // ICMP's type and code too (the key's tp_src and tp_dst).
            Field::TpSrc | Field::TpDst => match self.read(Field::EthType) {
                ETH_TYPE_IPV4 => matches!(self.read(Field::IpProto), 1 | 6 | 17 | 132),
                ETH_TYPE_IPV6 => matches!(self.read(Field::IpProto), 6 | 17 | 58 | 132),
                _ => false,
            },
            _ => {
                matches!(self.read(Field::EthType), ETH_TYPE_IPV4 | ETH_TYPE_IPV6)
                    && matches!(self.read(Field::IpProto), 6 | 17 | 132)
            }
        }
    }

    /// Writes `value` into the `mask` bits of `field`.
    fn set_field(&mut self, field: Field, value: u128, mask: u128) {
        let mask = mask & field.layout().max_value();
        if field == Field::VlanTci {
            let vid = (mask as u16) & VLAN_VID_MASK;
            let pcp = (mask as u16) & VLAN_PCP_MASK;
            if mask as u16 & VLAN_PRESENT != 0 && value as u16 & VLAN_PRESENT == 0 {
                self.vlan_pop();
                return;
            }
            if vid != 0 {
                self.vlan_set(vid, value as u16);
            }
            if pcp != 0 {
                self.vlan_set(pcp, value as u16);
            }
            return;
        }
        let slot = DP_FIELDS.iter().position(|&f| f == field);
        // nd_sll/nd_tll share ArpSha/ArpTha: ND options are not written.
        let nd = matches!(field, Field::ArpSha | Field::ArpTha)
            && self.read(Field::EthType) == ETH_TYPE_IPV6;
        if (slot.is_none() && !is_pipeline_field(field)) || nd {
            self.fail(XlateError::UnsupportedSetField(field));
            return;
        }
        if slot.is_some() && !self.dp_prereq_ok(field) {
            self.note(|| format!("set_field on {field} skipped: packet lacks the header"));
            return;
        }
        let old = self.flow.field(field);
        self.flow.set_field(field, (old & !mask) | (value & mask));
        self.wc.write(field, mask);
        if let Some(i) = slot {
            self.dirty |= 1 << i;
            self.touched |= 1 << i;
        }
    }

    fn dec_ttl(&mut self) {
        if !self.dp_prereq_ok(Field::IpTtl) {
            self.note(|| "dec_ttl skipped: not IP".into());
            return;
        }
        self.commit();
        self.out.push(DpAction::DecTtl);
        self.committed |= 1 << TTL_SLOT;
        self.touched |= 1 << TTL_SLOT;
        let ttl = self.flow.ip_ttl();
        self.flow.set_ip_ttl(ttl.wrapping_sub(1) & 0xff);
        // A constant TTL stays constant; one from the packet is now
        // arithmetic on the packet's.
        if !self.wc.is_written(Field::IpTtl, 0xff) {
            self.wc.derive_whole(Field::IpTtl);
        }
    }

    /// A megaflow that looked at a tag of a tagged packet also names the
    /// tag's TPID: the eSwitch matches "C-VLAN" or "S-VLAN", never "some
    /// tag", so without it a VLAN megaflow could not be offloaded (Open
    /// vSwitch's datapath keys carry the TPID the same way).
    fn pin_tag_kinds(&mut self) {
        let present = u128::from(VLAN_PRESENT);
        for (tci, tpid) in [
            (Field::VlanTci, Field::VlanTpid),
            (Field::Vlan2Tci, Field::Vlan2Tpid),
        ] {
            if self.wc.mask().field(tci) != 0 && self.orig.field(tci) & present != 0 {
                self.wc.unwildcard_packet(tpid, 0xffff);
            }
        }
    }

    /// Emits the pending VLAN changes and `set` actions.
    fn commit(&mut self) {
        self.commit_vlan();
        let mut d = self.dirty;
        while d != 0 {
            let i = d.trailing_zeros() as usize;
            d &= d - 1;
            let f = DP_FIELDS[i];
            // The datapath sets the whole field: bits the pipeline did not
            // write come from the packet.
            let v = self.read(f);
            let eth_type = self.read(Field::EthType);
            self.out.push(dp_set(f, v, eth_type));
        }
        self.committed |= self.dirty;
        self.dirty = 0;
    }

    fn output(&mut self, port: OfPort, max_len: u16) {
        match port {
            OfPort::Port(p) => {
                let in_port = self.read(Field::InPort) as u32;
                if p.0 == in_port {
                    self.note(|| format!("output:{p} skipped: it is the input port"));
                } else {
                    self.output_port(p);
                }
            }
            OfPort::InPort => {
                let in_port = self.read(Field::InPort) as u32;
                self.output_port(PortNo(in_port));
            }
            OfPort::All | OfPort::Flood => {
                let in_port = self.read(Field::InPort) as u32;
                let br: &'a Bridge = self.br;
                for p in br.ports.iter() {
                    if p.no.0 != in_port && (port == OfPort::All || p.flood) {
                        self.output_port(p.no);
                    }
                }
            }
            OfPort::Controller => self.controller(max_len, None),
            OfPort::Local => self.output_port(PortNo(OfPort::LOCAL_NUMBER)),
            OfPort::Normal => self.normal(),
            OfPort::Any => {}
        }
    }

    /// `v` into the bits `r` names. The low 16 bits of `in_port` are
    /// `NXM_OF_IN_PORT`, a 16-bit port number: written, they are the
    /// whole port (its reserved numbers the 32-bit ones), so that
    /// `push:NXM_OF_IN_PORT[]` ... `pop:NXM_OF_IN_PORT[]` around a load of
    /// OFPP_NONE (ovn-controller's) puts the port back as it was.
    fn write_range(&mut self, r: &crate::rule::FieldRange, v: u128) {
        if r.field == Field::InPort && r.ofs == 0 && r.n_bits == 16 {
            let v = if v >= 0xff00 { v | 0xffff_0000 } else { v };
            self.set_field(Field::InPort, v, 0xffff_ffff);
        } else {
            self.set_field(r.field, v << r.ofs, r.mask());
        }
        if let Some(slot) = r.opt {
            // A Geneve option written is an option the packet carries.
            let bit = u128::from(slot.present_bit());
            self.set_field(Field::TunMdPresent, bit, bit);
        }
    }

    /// A packet-in of the packet as it is now: from `output:CONTROLLER`
    /// (`c` `None`) or a `controller(...)` action. The registers go with
    /// it (a controller reads its logical ports from them): the megaflow
    /// depends on them.
    fn controller(&mut self, max_len: u16, c: Option<&ControllerAction>) {
        self.commit();
        let (table, cookie, miss) = self.current;
        let metadata = self.read(Field::Metadata) as u64;
        let mut regs = [0u32; 16];
        for (i, f) in megaflow::key::REGS.iter().enumerate() {
            regs[i] = self.read(*f) as u32;
        }
        let other = self.bi != BridgeNo::MAIN;
        let in_port = other.then(|| self.read(Field::InPort) as u32);
        let extra = (c.is_some() || regs.iter().any(|r| *r != 0) || other).then(|| {
            std::sync::Arc::new(ControllerExtra {
                reason: c.map(|c| c.reason),
                controller_id: c.map_or(0, |c| c.controller_id),
                userdata: c.map(|c| c.userdata.clone()).unwrap_or_default(),
                regs,
                continuation: None,
                bridge: self.bi.0,
                in_port,
            })
        });
        self.out
            .push(DpAction::Userspace(UserspaceReason::Controller {
                max_len,
                table: table.0,
                cookie,
                miss,
                metadata,
                extra,
            }));
    }

    /// Sends the packet, as it is now, to a port that exists and is up.
    fn output_port(&mut self, p: PortNo) {
        let br: &'a Bridge = self.br;
        match br.ports.get(p) {
            Some(info) if info.patch.is_some() => self.patch_output(p, info.patch),
            Some(info) if info.up => {
                self.commit();
                match &info.tunnel {
                    Some(t) => self.tunnel_output(p, t),
                    None => self.out.push(DpAction::Output(p)),
                }
            }
            Some(_) => self.note(|| format!("output:{p} skipped: port is down")),
            None => self.note(|| format!("output:{p} skipped: no such port")),
        }
    }
}

/// Adds an action to an action set: one action of each kind (one per field
/// for set-field), a later write replacing an earlier one.
fn write_action_set(set: &mut Vec<OfAction>, a: &OfAction) {
    let same = |x: &OfAction| match (x, a) {
        (OfAction::SetField { field: f, .. }, OfAction::SetField { field: g, .. }) => f == g,
        (OfAction::Move { dst: f, .. }, OfAction::Move { dst: g, .. }) => f.field == g.field,
        (OfAction::SetTunMetadata { slot: f, .. }, OfAction::SetTunMetadata { slot: g, .. }) => {
            f.index == g.index
        }
        _ => std::mem::discriminant(x) == std::mem::discriminant(a),
    };
    set.retain(|x| !same(x));
    set.push(a.clone());
}

/// Execution order of the action set (OpenFlow 1.3, 5.10).
fn action_set_rank(a: &OfAction) -> u8 {
    match a {
        OfAction::PopVlan => 0,
        OfAction::PushVlan(_) => 1,
        OfAction::DecTtl | OfAction::DecTtlIds(_) => 2,
        OfAction::SetVlanVid(_)
        | OfAction::SetVlanPcp(_)
        | OfAction::SetField { .. }
        | OfAction::SetTunMetadata { .. }
        | OfAction::Move { .. }
        | OfAction::Push(_)
        | OfAction::Pop(_)
        | OfAction::Note(_)
        | OfAction::Learn { .. }
        | OfAction::CheckPktLarger { .. }
        | OfAction::Conjunction { .. } => 3,
        OfAction::Sample { .. }
        | OfAction::Resubmit(_)
        | OfAction::ResubmitPort(..)
        | OfAction::Ct(_)
        | OfAction::CtClear => 4,
        OfAction::Output { .. }
        | OfAction::Group(_)
        | OfAction::Controller(_)
        | OfAction::Clone(_) => 5,
    }
}

impl Ctx<'_> {
    /// A packet that came in a tunnel: the megaflow matches what chose its
    /// tunnel port (the outer addresses, the UDP port, the key), as
    /// Open vSwitch's `tnl_wc_init` does, so the device can match the
    /// outer headers of the packets it takes (a decap rule) and a packet
    /// of no tunnel (`tun_*` zero) never shares the megaflow.
    fn tunnel_ingress(&mut self) {
        let in_port = PortNo(self.orig.in_port() as u32);
        let br: &Bridge = self.br;
        if br.ports.get(in_port).is_none_or(|p| p.tunnel.is_none()) {
            return;
        }
        let (src, dst) = if self.orig.tun_dst() != 0 {
            (Field::TunSrc, Field::TunDst)
        } else {
            (Field::TunIpv6Src, Field::TunIpv6Dst)
        };
        // tun_id always, as Open vSwitch: a hardware rule sees the packet
        // on the uplink, where every tunnel port is one, so the fields
        // that chose the port must all be in the rule.
        for f in [Field::InPort, Field::TunTpDst, src, dst, Field::TunId] {
            self.wc.unwildcard_packet(f, f.layout().max_value());
        }
    }

    /// A packet on a port where tunnel packets are decapsulated (an
    /// uplink), on a bridge with tunnel ports: what tells it apart from a
    /// tunnel packet for a local endpoint is read, as Open vSwitch's
    /// `tnl_port_map_lookup` reads it (the ethertype, the destination
    /// address and, when it is local, the protocol and the UDP port). Its
    /// megaflow, and a hardware rule made of it (which sees packets before
    /// any decap), then cannot cover a tunnel's packets.
    fn not_a_tunnel_packet(&mut self) {
        let br: &Bridge = self.br;
        let in_port = PortNo(self.orig.in_port() as u32);
        if !br.ports.get(in_port).is_some_and(|p| p.decap) {
            return;
        }
        let tunnels = br.ports.iter().filter_map(|p| p.tunnel.as_deref());
        if tunnels.clone().next().is_none() {
            return;
        }
        let k = self.orig;
        self.wc.unwildcard_packet(Field::EthType, 0xffff);
        let (dst, addr) = match k.eth_type() as u16 {
            megaflow::extract::ETH_TYPE_IPV4 => (
                Field::Ipv4Dst,
                IpAddr::V4(Ipv4Addr::from(k.ipv4_dst() as u32)),
            ),
            megaflow::extract::ETH_TYPE_IPV6 => {
                (Field::Ipv6Dst, IpAddr::V6(Ipv6Addr::from(k.ipv6_dst())))
            }
            _ => return,
        };
        self.wc.unwildcard_packet(dst, dst.layout().max_value());
        self.uses_underlay = true;
        let underlay = br.underlay().map(|u| &**u as &dyn crate::tunnel::Underlay);
        if !crate::tunnel::is_local_endpoint(tunnels.clone(), underlay, addr) {
            return;
        }
        self.wc.unwildcard_packet(Field::IpProto, 0xff);
        if k.ip_proto() == u64::from(megaflow::extract::IP_PROTO_UDP) {
            self.wc.unwildcard_packet(Field::TpDst, 0xffff);
        }
    }

    /// The Geneve options an output to `t` carries: the flow's present
    /// `tun_metadata<n>` as the TLV table maps them (Open vSwitch's
    /// `tun_metadata_to_geneve`). VXLAN carries none.
    fn geneve_options(
        &mut self,
        t: &crate::tunnel::TunnelPort,
    ) -> Vec<megaflow::tunnel::GeneveOpt> {
        if t.kind != megaflow::tunnel::Kind::Geneve {
            return Vec::new();
        }
        let present = self.read(Field::TunMdPresent) as u64;
        if present == 0 {
            return Vec::new();
        }
        let opts = self.read(Field::TunOpts);
        self.br.tlv().option_map().options(opts, present)
    }

    /// An output to tunnel port `p`: the outer header from the port's
    /// options, the flow's `tun_*` fields where they say `flow`, and the
    /// underlay's next hop. Nothing is sent when the endpoint cannot be
    /// reached now (the trace says why; the underlay's change re-translates).
    fn tunnel_output(&mut self, p: PortNo, t: &crate::tunnel::TunnelPort) {
        use crate::tunnel::{outer, FromFlow, Tos, Unreachable};
        let dst = match t.remote {
            FromFlow::Fixed(a) => a,
            FromFlow::Flow => {
                let v4 = self.read(Field::TunDst) as u32;
                if v4 != 0 {
                    IpAddr::V4(Ipv4Addr::from(v4))
                } else {
                    let v6 = self.read(Field::TunIpv6Dst);
                    if v6 == 0 {
                        self.note(|| format!("output:{p} skipped: remote_ip=flow and no tun_dst"));
                        return;
                    }
                    IpAddr::V6(Ipv6Addr::from(v6))
                }
            }
        };
        let vni = match t.key {
            FromFlow::Fixed(k) => k,
            FromFlow::Flow => self.read(Field::TunId) as u32,
        };
        let tos = match t.tos {
            Tos::Fixed(v) => v,
            Tos::Flow => self.read(Field::TunTos) as u8,
            Tos::Inherit => ((self.read(Field::IpDscp) as u8) << 2) | self.read(Field::IpEcn) as u8,
        };
        self.uses_underlay = true;
        let Some(underlay) = self.br.underlay() else {
            let why = Unreachable::NoUnderlay;
            self.note(|| format!("output:{p} skipped: {why}"));
            return;
        };
        let hop = match underlay.next_hop(dst, t.local) {
            Ok(h) => h,
            Err(why) => {
                self.note(|| format!("output:{p} skipped: {why}"));
                return;
            }
        };
        let opts = self.geneve_options(t);
        match outer(t, dst, vni, tos, &hop) {
            Some(mut h) => match megaflow::tunnel::Encap::new({
                h.opts = opts;
                h
            }) {
                Ok(h) => self.out.push(DpAction::TunnelPush {
                    header: std::sync::Arc::new(h),
                    port: hop.port,
                    mtu: hop.mtu,
                }),
                Err(e) => self.note(|| format!("output:{p} skipped: {e}")),
            },
            None => self.note(|| {
                format!(
                    "output:{p} skipped: source {} and remote {dst} differ in family",
                    hop.src
                )
            }),
        }
    }
}

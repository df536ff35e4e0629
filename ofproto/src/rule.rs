//! OpenFlow rules: what a flow mod carries and what a table stores.
//!
//! A rule is a [`Match`] (megaflow's key layout, wildcarded bits zero by
//! construction), a priority, a cookie, timeouts, flags and an
//! [`Instructions`] set. The text syntax (`crate::text`) parses into these
//! types and prints them back; the tables (`crate::table`) store them; the
//! translator (`crate::xlate`) executes them. Plain data, no state.

use std::fmt;

use megaflow::{Field, Match, MeterId, PortNo};

use crate::{Cookie, Priority, TableId};

/// An OpenFlow port as actions and `in_port`/`out_port` name it: a numbered
/// port or one of the reserved ports of OpenFlow 1.3 (section 4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OfPort {
    /// A physical or logical port, `1..=0xffffff00`.
    Port(PortNo),
    /// `IN_PORT`: back out of the ingress port.
    InPort,
    /// `ALL`: every port except the ingress port.
    All,
    /// `FLOOD`: every port except the ingress port (and ports with flooding
    /// disabled), as the normal pipeline would flood.
    Flood,
    /// `CONTROLLER`: a packet-in to the controllers.
    Controller,
    /// `LOCAL`: the switch's own local port.
    Local,
    /// `NORMAL`: the built-in MAC-learning L2 switch.
    Normal,
    /// `ANY`/`NONE`: no port (a wildcard in `out_port` filters).
    Any,
}

impl OfPort {
    /// Highest number a non-reserved port may have (OFPP_MAX).
    pub const MAX_NUMBER: u32 = 0xffff_ff00;
    /// OpenFlow number of `LOCAL`.
    pub const LOCAL_NUMBER: u32 = 0xffff_fffe;

    /// The OpenFlow 1.3 32-bit number of this port.
    pub fn number(self) -> u32 {
        match self {
            OfPort::Port(p) => p.0,
            OfPort::InPort => 0xffff_fff8,
            OfPort::Normal => 0xffff_fffa,
            OfPort::Flood => 0xffff_fffb,
            OfPort::All => 0xffff_fffc,
            OfPort::Controller => 0xffff_fffd,
            OfPort::Local => Self::LOCAL_NUMBER,
            OfPort::Any => 0xffff_ffff,
        }
    }

    /// The port an OpenFlow 1.3 number names, `None` for reserved numbers
    /// OpenFlow 1.3 does not assign (`0`, `0xffffff01..=0xfffffff7`, `TABLE`).
    pub fn from_number(n: u32) -> Option<OfPort> {
        Some(match n {
            1..=Self::MAX_NUMBER => OfPort::Port(PortNo(n)),
            0xffff_fff8 => OfPort::InPort,
            0xffff_fffa => OfPort::Normal,
            0xffff_fffb => OfPort::Flood,
            0xffff_fffc => OfPort::All,
            0xffff_fffd => OfPort::Controller,
            Self::LOCAL_NUMBER => OfPort::Local,
            0xffff_ffff => OfPort::Any,
            _ => return None,
        })
    }
}

impl fmt::Display for OfPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfPort::Port(p) => write!(f, "{p}"),
            OfPort::InPort => f.write_str("IN_PORT"),
            OfPort::All => f.write_str("ALL"),
            OfPort::Flood => f.write_str("FLOOD"),
            OfPort::Controller => f.write_str("CONTROLLER"),
            OfPort::Local => f.write_str("LOCAL"),
            OfPort::Normal => f.write_str("NORMAL"),
            OfPort::Any => f.write_str("ANY"),
        }
    }
}

/// A bit range of a key field, as `move`/`load` name it
/// (`NXM_NX_REG0[0..15]`, `reg1[]`), or of a Geneve option the bridge's
/// TLV table maps (`NXM_NX_TUN_METADATA0[16..30]`: `field` is `tun_opts`,
/// `ofs` counts in `tun_opts`, and `opt` names the option).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldRange {
    pub field: Field,
    /// Least significant bit of the range (in the key field).
    pub ofs: u8,
    /// Number of bits, at least 1; `ofs + n_bits` is at most the field width.
    pub n_bits: u8,
    /// The option a `tun_metadata<n>` range is in (writing it makes the
    /// option present).
    pub opt: Option<megaflow::tunnel::OptionSlot>,
}

impl FieldRange {
    /// Bits `ofs..ofs + n_bits` of a key field.
    pub fn new(field: Field, ofs: u8, n_bits: u8) -> Self {
        FieldRange {
            field,
            ofs,
            n_bits,
            opt: None,
        }
    }

    /// Bits `ofs..ofs + n_bits` of option `slot` (counted from the
    /// option's least significant bit), `None` past the option's end.
    pub fn option(slot: megaflow::tunnel::OptionSlot, ofs: u16, n_bits: u16) -> Option<Self> {
        let width = 8 * u32::from(slot.len);
        if n_bits == 0 || u32::from(ofs) + u32::from(n_bits) > width {
            return None;
        }
        Some(FieldRange {
            field: Field::TunOpts,
            ofs: (slot.shift() + u32::from(ofs)) as u8,
            n_bits: n_bits as u8,
            opt: Some(slot),
        })
    }

    /// The first bit as its field names it: in the option for a
    /// `tun_metadata<n>` range.
    pub fn named_ofs(&self) -> u16 {
        let shift = self.opt.map_or(0, |s| s.shift());
        (u32::from(self.ofs) - shift) as u16
    }

    /// The whole field.
    pub fn whole(field: Field) -> Self {
        FieldRange::new(field, 0, field.layout().bits)
    }

    /// The range's bits as a mask of the field's value.
    pub fn mask(self) -> u128 {
        let ones = if self.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.n_bits) - 1
        };
        ones << self.ofs
    }
}

/// One OpenFlow action (an entry of an apply-actions list or of an action
/// set). The `ovs-ofctl` spellings that mean the same thing parse into the
/// same variant (`mod_dl_src:X` and `set_field:X->eth_src` are both a
/// [`OfAction::SetField`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OfAction {
    /// `output:PORT`, `in_port`, `all`, `flood`, `local`, `normal`,
    /// `controller:MAX_LEN`. `max_len` matters only for `CONTROLLER`
    /// (OpenFlow's default 0xffff means "the whole packet").
    Output { port: OfPort, max_len: u16 },
    /// `push_vlan:TPID`: a new outer tag; its TCI copies the old outer tag's
    /// or is zero.
    PushVlan(u16),
    /// `pop_vlan` / `strip_vlan`.
    PopVlan,
    /// `mod_vlan_vid:VID`: set the VID of the outer tag, pushing an 802.1Q tag
    /// when untagged (Open vSwitch's behaviour).
    SetVlanVid(u16),
    /// `mod_vlan_pcp:PCP`: set the PCP of the outer tag, pushing an 802.1Q tag
    /// when untagged.
    SetVlanPcp(u8),
    /// `set_field:VALUE[/MASK]->FIELD`, `load:VALUE->FIELD[range]` and the
    /// `mod_*` classics. Only the `mask` bits of the field change.
    SetField {
        field: Field,
        value: u128,
        mask: u128,
    },
    /// `set_field:VALUE[/MASK]->tun_metadataN` (and `load` into it): the
    /// option's bits of `tun_opts` at `slot` change as `mask` says, and the
    /// option is present. `value` and `mask` are the option's own bytes
    /// (`slot.len` of them), bound to the TLV table when the action was read.
    SetTunMetadata {
        slot: megaflow::tunnel::OptionSlot,
        value: u128,
        mask: u128,
    },
    /// `move:SRC[range]->DST[range]` (equal widths).
    Move { src: FieldRange, dst: FieldRange },
    /// `push:FIELD[range]`: the bits onto the translation's stack.
    Push(FieldRange),
    /// `pop:FIELD[range]`: the top of the stack into the bits.
    Pop(FieldRange),
    /// `note:HH.HH...`: bytes kept with the flow; it does nothing.
    Note(Vec<u8>),
    /// `conjunction(ID,K/N)`: this flow is clause `clause` (0-based; the
    /// text's K is `clause + 1`) of the `n_clauses` clauses of conjunctive
    /// match `id`. A flow with it has only conjunctions (and notes); the
    /// table never answers a lookup with it, but with the flow matching
    /// `conj_id=ID` once every clause has a match (see `crate::table`).
    Conjunction { id: u32, clause: u8, n_clauses: u8 },
    /// `dec_ttl`.
    DecTtl,
    /// `learn(...)` (NXAST_LEARN, `learn2` for NXAST_LEARN2), kept as the
    /// wire's bytes after the subtype and given back as they came; it
    /// learns no flow here (a translation notes so). OVN writes it for
    /// load-balancer hairpin and affinity.
    Learn { learn2: bool, body: Vec<u8> },
    /// `clone(ACTIONS)`: the actions on a copy of the packet and of the
    /// pipeline's state (fields, registers, stack); what follows the
    /// clone sees the packet as it was before it.
    Clone(Vec<OfAction>),
    /// `dec_ttl(ID,...)`: `dec_ttl`, its expiry for the controllers of
    /// these ids (none: OVN's form; it checks the TTL itself first).
    DecTtlIds(Vec<u16>),
    /// `resubmit(,TABLE)`: look the packet up in another table now and run
    /// the actions found there, then continue here.
    Resubmit(TableId),
    /// `resubmit(PORT,TABLE)`: the same, with `in_port` taken as `PORT`
    /// for that lookup (and what it runs), then put back. OVN's
    /// packet-outs start its pipeline so, from `CONTROLLER`.
    ResubmitPort(OfPort, TableId),
    /// `check_pkt_larger(LEN)->DST`: the one-bit `DST` says whether the
    /// packet is longer than `LEN` bytes (its Ethernet frame), for what
    /// follows in its action list and the rule's instructions.
    CheckPktLarger { pkt_len: u16, dst: FieldRange },
    /// `sample(probability=P)`: a copy of 1 in `65535 / P` packets to
    /// userspace for flow monitoring.
    Sample { probability: u16 },
    /// `group:N`: run group N's buckets (see [`crate::group`]).
    Group(u32),
    /// `ct(...)`: track the packet in the connection tracker (see
    /// [`CtAction`]).
    Ct(Box<CtAction>),
    /// `ct_clear`: forget the packet's tracking state.
    CtClear,
    /// `controller(...)` as Nicira's actions carry it: a packet-in with a
    /// reason, a controller id, userdata; `pause` stops the pipeline
    /// there (see [`ControllerAction`]).
    Controller(Box<ControllerAction>),
}

/// A `controller(...)` action: the wire's own form (NXAST_CONTROLLER2's
/// fields), kept whole so that it prints and dumps back as it came.
pub type ControllerAction = openflow::nx_controller::NxController;

/// Where `ct()` takes its zone from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtZone {
    Imm(u16),
    /// `zone=NXM_NX_REG0[0..15]`: 16 bits of a field, read when the
    /// action runs.
    Field(FieldRange),
}

/// `ct(commit,force,table=T,zone=Z,nat(...),exec(...))`, Open vSwitch's
/// NXAST_CT with its nested NXAST_NAT and exec actions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CtAction {
    pub commit: bool,
    /// End a connection met in its reply direction (requires `commit`).
    pub force: bool,
    /// The table the packet is looked up in next, with its tracking state
    /// (a recirculation); `None`: the pipeline goes on untracked-looking.
    pub table: Option<TableId>,
    pub zone: CtZone,
    pub nat: Option<conntrack::NatSpec>,
    /// `exec(...)`: `set_field`/`load` into `ct_mark` and `ct_label`, in
    /// order (only with `commit`).
    pub exec: Vec<OfAction>,
}

/// The instruction set of a rule (OpenFlow 1.3, section 5.9), in execution
/// order: meter, apply-actions, clear-actions, write-actions,
/// write-metadata, goto-table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Instructions {
    /// `meter:N`.
    pub meter: Option<MeterId>,
    /// The apply-actions list (`actions=` entries outside any instruction).
    /// Empty with no other instruction means drop.
    pub apply: Vec<OfAction>,
    /// `clear_actions`.
    pub clear_actions: bool,
    /// `write_actions(...)`.
    pub write: Option<Vec<OfAction>>,
    /// `write_metadata:VALUE[/MASK]` as (value, mask).
    pub write_metadata: Option<(u64, u64)>,
    /// `goto_table:N`.
    pub goto_table: Option<TableId>,
}

impl Instructions {
    /// Every action of the apply-actions list and of the written action
    /// set, in that order.
    pub fn actions(&self) -> impl Iterator<Item = &OfAction> + '_ {
        self.apply.iter().chain(self.write.iter().flatten())
    }

    /// Whether a packet this rule takes may be looked up in another table
    /// after it: `goto_table`, a `resubmit`, or a group (whose buckets
    /// may resubmit).
    pub fn goes_on(&self) -> bool {
        self.goto_table.is_some()
            || self.actions().any(|a| {
                matches!(
                    a,
                    OfAction::Resubmit(_) | OfAction::ResubmitPort(..) | OfAction::Group(_)
                )
            })
    }

    /// The groups the actions run.
    pub fn groups(&self) -> impl Iterator<Item = u32> + '_ {
        self.actions().filter_map(|a| match a {
            OfAction::Group(g) => Some(*g),
            _ => None,
        })
    }

    /// The `conjunction(id, clause, n_clauses)` actions of a conjunctive
    /// flow (empty for any other flow).
    pub fn conjunctions(&self) -> impl Iterator<Item = (u32, u8, u8)> + '_ {
        self.apply.iter().filter_map(|a| match *a {
            OfAction::Conjunction {
                id,
                clause,
                n_clauses,
            } => Some((id, clause, n_clauses)),
            _ => None,
        })
    }

    /// What shares a flow with its `conjunction` actions that may not (as
    /// Open vSwitch: only other conjunctions and notes may), or `None`.
    /// `Some(Err(name))` names an instruction, `Some(Ok(a))` an action.
    pub fn conjunction_conflict(&self) -> Option<Result<&OfAction, &'static str>> {
        let in_write = self.write.iter().flatten();
        let conj = |a: &&OfAction| matches!(a, OfAction::Conjunction { .. });
        if !self.apply.iter().any(|a| conj(&a)) {
            // A conjunction in the action set is refused as beside
            // write_actions.
            return in_write
                .clone()
                .any(|a| conj(&a))
                .then_some(Err("write_actions"));
        }
        if let Some(a) = self
            .apply
            .iter()
            .find(|a| !matches!(a, OfAction::Conjunction { .. } | OfAction::Note(_)))
        {
            return Some(Ok(a));
        }
        let others = [
            (self.meter.is_some(), "meter"),
            (self.clear_actions, "clear_actions"),
            (self.write.is_some(), "write_actions"),
            (self.write_metadata.is_some(), "write_metadata"),
            (self.goto_table.is_some(), "goto_table"),
        ];
        others
            .iter()
            .find(|(on, _)| *on)
            .map(|&(_, name)| Err(name))
    }

    /// True for `actions=drop`: nothing at all.
    pub fn is_drop(&self) -> bool {
        *self == Instructions::default()
    }
}

/// Rule flags a flow mod may set (OFPFF_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowFlags {
    /// `send_flow_rem`: tell the controller when the rule is removed.
    pub send_flow_rem: bool,
    /// `check_overlap`: refuse an add that overlaps a rule of the same
    /// priority.
    pub check_overlap: bool,
    /// `reset_counts`: a modify zeroes the counters.
    pub reset_counts: bool,
    /// `no_packet_counts`.
    pub no_packet_counts: bool,
    /// `no_byte_counts`.
    pub no_byte_counts: bool,
}

/// Everything a rule is, as a flow mod gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSpec {
    pub table: TableId,
    pub priority: Priority,
    pub matched: Match,
    pub cookie: Cookie,
    /// Seconds; 0 = none.
    pub idle_timeout: u16,
    /// Seconds; 0 = none.
    pub hard_timeout: u16,
    /// `importance` (OpenFlow 1.4; parsed and kept, used for eviction order).
    pub importance: u16,
    pub flags: FlowFlags,
    pub instructions: Instructions,
}

impl RuleSpec {
    /// OpenFlow's default priority.
    pub const DEFAULT_PRIORITY: Priority = Priority(0x8000);

    /// A rule in `table` at `priority` matching `matched` that drops.
    pub fn new(table: TableId, priority: Priority, matched: Match) -> Self {
        RuleSpec {
            table,
            priority,
            matched,
            cookie: Cookie(0),
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            flags: FlowFlags::default(),
            instructions: Instructions::default(),
        }
    }
}

/// The kind of a flow mod (OFPFC_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowModCommand {
    Add,
    Modify,
    ModifyStrict,
    Delete,
    DeleteStrict,
}

/// A flow mod: a command and the rule it names. For modify and delete,
/// `cookie_mask` selects rules whose cookie agrees with `rule.cookie` under
/// it, and `out_port` (when not `Any`) keeps only rules that output there;
/// `table` `None` means all tables (delete only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub command: FlowModCommand,
    /// `None`: every table (`table=255` / no `table=` on delete).
    pub table: Option<TableId>,
    pub rule: RuleSpec,
    pub cookie_mask: u64,
    pub out_port: OfPort,
    /// Modify and delete: only rules that run this group (`None`: any).
    pub out_group: Option<u32>,
}

impl FlowMod {
    /// An add or modify that runs a meter `known` says the switch does not
    /// have: the error it is refused with (`OFPMMFC_INVALID_METER`, as
    /// Open vSwitch refuses it), whoever sent it.
    pub fn unknown_meter(
        &self,
        known: impl FnOnce(MeterId) -> bool,
    ) -> Option<crate::table::FlowModError> {
        let id = self.rule.instructions.meter?;
        if matches!(
            self.command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        ) {
            return None;
        }
        (!known(id)).then_some(crate::table::FlowModError::UnknownMeter(id.0))
    }

    /// Adds `spec` to its table (an add with no filters: tests, flow
    /// files, fixtures).
    pub fn add(spec: RuleSpec) -> FlowMod {
        FlowMod {
            command: FlowModCommand::Add,
            table: Some(spec.table),
            rule: spec,
            cookie_mask: 0,
            out_port: OfPort::Any,
            out_group: None,
        }
    }
}

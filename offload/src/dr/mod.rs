//! # dr: the Direct Rule object model and the backend trait
//!
//! The `mlx5dv_dr_*` API (rdma-core `providers/mlx5/man/mlx5dv_dr_flow.3.md`,
//! ../shared/seeds/004) as Rust types, one trait, two backends: `sim` (the
//! software eSwitch in [`crate::sim`]) and `mlx5` (FFI, a later issue). The
//! offload manager talks to [`DrBackend`] only.
//!
//! ```text
//! domain (FDB) ─► table (level; 0 = root) ─► matcher (priority, criteria, mask)
//!                                              └─► rule (value, [actions])
//! actions: drop, default_miss, dest_vport, dest_table, dest_array,
//!          flow_counter(bulk, offset), flow_meter, flow_sampler,
//!          push_vlan, pop_vlan, modify_header
//! ```
//!
//! Masks and values are `fte_match_param` bytes ([`crate::prm`]);
//! modify-header actions are PRM `set/add/copy_action_in` words
//! ([`modify`]); meter parameters are the PRM `flow_meter_parameters`
//! ([`meter`]). Handles are plain copyable ids; a backend checks every one
//! and answers [`DrError::Stale`] for a destroyed object, where C would
//! have a dangling pointer.
//!
//! Every call takes `&self`: backends are shared between the offload
//! manager (one writer) and the datapath threads (the `sim` backend
//! forwards packets concurrently with rule updates).

pub mod dump;
pub mod error;
pub mod meter;
pub mod modify;

use std::fmt;

pub use dump::DeviceDump;
pub use error::{DrError, Errno, Object, Resource};

use crate::Vport;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name {
            /// Slot in the backend's table.
            pub index: u32,
            /// Incarnation of the slot, so a stale handle is detected.
            pub generation: u32,
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.index)
            }
        }
    };
}

handle!(
    /// A domain (`mlx5dv_dr_domain`).
    DomainId,
    "d"
);
handle!(
    /// A table (`mlx5dv_dr_table`).
    TableId,
    "t"
);
handle!(
    /// A matcher (`mlx5dv_dr_matcher`).
    MatcherId,
    "m"
);
handle!(
    /// A rule (`mlx5dv_dr_rule`).
    RuleId,
    "r"
);
handle!(
    /// An action (`mlx5dv_dr_action`).
    ActionId,
    "a"
);
handle!(
    /// A DEVX flow counter bulk object.
    CounterBulkId,
    "c"
);
handle!(
    /// A restore rule: the slow-path receive queue's steering of one
    /// restore tag (`mlx5dv_create_flow` in the manager's NIC RX).
    RestoreRuleId,
    "x"
);

/// One destination of a dest_array (`struct mlx5dv_dr_action_dest_attr`):
/// a dest_vport or dest_table action (`MLX5DV_DR_ACTION_DEST`), or an
/// encap (an `L2_TO_L2_TUNNEL` packet reformat) and the dest_vport its
/// copy leaves by (`MLX5DV_DR_ACTION_DEST_REFORMAT`): how one rule floods
/// a packet to local ports and into tunnels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArrayDest {
    pub reformat: Option<ActionId>,
    pub to: ActionId,
}

impl From<ActionId> for ArrayDest {
    fn from(to: ActionId) -> ArrayDest {
        ArrayDest { reformat: None, to }
    }
}

/// `enum mlx5dv_dr_domain_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainType {
    /// Packets received by the NIC; default: drop.
    NicRx,
    /// Packets sent by the NIC; default: to the vport.
    NicTx,
    /// The eSwitch forwarding database; default: to the eSwitch manager.
    Fdb,
}

impl DomainType {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            DomainType::NicRx => "NIC_RX",
            DomainType::NicTx => "NIC_TX",
            DomainType::Fdb => "FDB",
        }
    }
}

/// `enum mlx5dv_dr_domain_sync_flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SyncFlags {
    /// Wait for queued software work.
    pub sw: bool,
    /// Also flush the steering cache so the next packet sees the latest rules.
    pub hw: bool,
    /// Free cached device memory.
    pub mem: bool,
}

impl SyncFlags {
    /// SW | HW: every rule created so far is live.
    pub const ALL: SyncFlags = SyncFlags {
        sw: true,
        hw: true,
        mem: false,
    };
}

/// `struct mlx5dv_dr_flow_meter_attr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMeterAttr {
    /// Where every packet continues after colouring (not the root).
    pub next_table: TableId,
    /// Whether the meter runs (an inactive meter colours everything green).
    pub active: bool,
    /// The reg_c (0..=7) that receives the colour.
    pub reg_c_index: u8,
    /// PRM `flow_meter_parameters` bytes ([`meter::PARAMS_LEN`]).
    pub params: Vec<u8>,
}

/// `struct mlx5dv_dr_flow_sampler_attr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSamplerAttr {
    /// About one packet in `sample_ratio` is sampled (not 0).
    pub sample_ratio: u32,
    /// Where every original packet continues.
    pub default_next_table: TableId,
    /// What the sampled copy gets (at least one action).
    pub sample_actions: Vec<ActionId>,
    /// One PRM SET action (8 bytes) applied to the original before the
    /// default table, typically a reg_c with the flow's id; `None` for none.
    pub action: Option<[u8; 8]>,
}

/// What an action does: the argument of each `mlx5dv_dr_action_create_*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionSpec {
    /// Terminating: drop. Cannot be mixed with a destination.
    Drop,
    /// Terminating: the domain's default behaviour (FDB: to the eSwitch
    /// manager, software sees the packet on the ingress representor).
    DefaultMiss,
    /// Terminating: to a vport (FDB only).
    DestVport(Vport),
    /// Terminating: continue in a table of a higher level.
    DestTable(TableId),
    /// Terminating: a copy to each destination (dest_vport or dest_table
    /// actions, a dest_vport behind its own encap).
    DestArray(Vec<ArrayDest>),
    /// Count packets and bytes in a counter of a bulk.
    FlowCounter { bulk: CounterBulkId, offset: u32 },
    /// Terminating: colour by a two-rate meter, write the colour to a reg_c
    /// and continue in the next table.
    FlowMeter(FlowMeterAttr),
    /// Terminating: sample a copy, continue in the default table.
    FlowSampler(FlowSamplerAttr),
    /// Push a VLAN header, `TPID << 16 | TCI` (TPID 0x8100 or 0x88a8).
    PushVlan { header: u32 },
    /// Pop the outer VLAN header.
    PopVlan,
    /// Rewrite header fields and registers: PRM modify-header actions, 8
    /// bytes each.
    ModifyHeader(Vec<u8>),
    /// `mlx5dv_dr_action_create_packet_reformat`: decapsulate
    /// (`L2TunnelToL2`, no data) or encapsulate in `data`, a whole outer
    /// header (`L2ToL2Tunnel`; the fields the hardware fills left zero).
    PacketReformat { reformat: Reformat, data: Vec<u8> },
}

/// A packet reformat's type (`MLX5DV_FLOW_ACTION_PACKET_REFORMAT_TYPE_*`,
/// the values of the uapi).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reformat {
    /// Decap: the outer headers of a VXLAN/Geneve packet come off.
    L2TunnelToL2 = 0,
    /// Encap: an outer header goes on.
    L2ToL2Tunnel = 1,
}

impl ActionSpec {
    /// The action's name as the man page spells it.
    pub fn name(&self) -> &'static str {
        ActionKind::of(self).name()
    }
}

/// The type of an action, without its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionKind {
    Drop,
    DefaultMiss,
    DestVport,
    DestTable,
    DestArray,
    FlowCounter,
    FlowMeter,
    FlowSampler,
    PushVlan,
    PopVlan,
    ModifyHeader,
    Decap,
    Encap,
}

impl ActionKind {
    /// The kind of a spec.
    pub fn of(spec: &ActionSpec) -> ActionKind {
        match spec {
            ActionSpec::Drop => ActionKind::Drop,
            ActionSpec::DefaultMiss => ActionKind::DefaultMiss,
            ActionSpec::DestVport(_) => ActionKind::DestVport,
            ActionSpec::DestTable(_) => ActionKind::DestTable,
            ActionSpec::DestArray(_) => ActionKind::DestArray,
            ActionSpec::FlowCounter { .. } => ActionKind::FlowCounter,
            ActionSpec::FlowMeter(_) => ActionKind::FlowMeter,
            ActionSpec::FlowSampler(_) => ActionKind::FlowSampler,
            ActionSpec::PushVlan { .. } => ActionKind::PushVlan,
            ActionSpec::PopVlan => ActionKind::PopVlan,
            ActionSpec::ModifyHeader(_) => ActionKind::ModifyHeader,
            ActionSpec::PacketReformat { reformat, .. } => match reformat {
                Reformat::L2TunnelToL2 => ActionKind::Decap,
                Reformat::L2ToL2Tunnel => ActionKind::Encap,
            },
        }
    }

    /// The name as the man page spells it.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Drop => "drop",
            ActionKind::DefaultMiss => "default_miss",
            ActionKind::DestVport => "dest_vport",
            ActionKind::DestTable => "dest_table",
            ActionKind::DestArray => "dest_array",
            ActionKind::FlowCounter => "flow_counter",
            ActionKind::FlowMeter => "flow_meter",
            ActionKind::FlowSampler => "flow_sampler",
            ActionKind::PushVlan => "push_vlan",
            ActionKind::PopVlan => "pop_vlan",
            ActionKind::ModifyHeader => "modify_header",
            ActionKind::Decap => "packet_reformat(l2_tunnel_to_l2)",
            ActionKind::Encap => "packet_reformat(l2_to_l2_tunnel)",
        }
    }
}

/// The state of the action-sequence check (rdma-core `dr_action.c`
/// `next_action_state`, FDB ingress), for the subset of actions modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionState {
    NoAction,
    NonTerm,
    ModifyHdr,
    PopVlan,
    PushVlan,
    Decap,
    Encap,
    Term,
}

impl ActionState {
    fn name(self) -> &'static str {
        match self {
            ActionState::NoAction => "nothing",
            ActionState::NonTerm => "a counter",
            ActionState::ModifyHdr => "modify_header",
            ActionState::PopVlan => "pop_vlan",
            ActionState::PushVlan => "push_vlan",
            ActionState::Decap => "decap",
            ActionState::Encap => "encap",
            ActionState::Term => "a terminating action",
        }
    }

    /// The state after `kind`, or the error the library gives. The table is
    /// the FDB-ingress row of rdma-core's state machine: counters go
    /// anywhere; drop and default_miss only before any rewrite; a rewrite
    /// order of pop → modify → push; nothing but counters after a
    /// terminating action. Reformats: decap first, encap last and then
    /// only a vport (`decap → modify → push VLAN → encap → vport`).
    pub fn next(self, kind: ActionKind) -> Result<ActionState, DrError> {
        use ActionKind as K;
        use ActionState as S;
        let terminal = matches!(
            kind,
            K::DestTable | K::DestVport | K::DestArray | K::FlowMeter | K::FlowSampler
        );
        let next = match (self, kind) {
            (_, K::FlowCounter) if self != S::NoAction => Some(self),
            (S::NoAction, K::FlowCounter) => Some(S::NonTerm),
            (S::NoAction | S::NonTerm, K::Drop | K::DefaultMiss) => Some(S::Term),
            (S::Term, _) => None,
            (S::Encap, K::DestVport) => Some(S::Term),
            (S::Encap, _) => None,
            (_, _) if terminal => Some(S::Term),
            (S::NoAction | S::NonTerm, K::Decap) => Some(S::Decap),
            (S::NoAction | S::NonTerm | S::PopVlan | S::Decap, K::ModifyHeader) => {
                Some(S::ModifyHdr)
            }
            (S::NoAction | S::NonTerm | S::PopVlan | S::Decap, K::PopVlan) => Some(S::PopVlan),
            (S::NoAction | S::NonTerm | S::ModifyHdr | S::PushVlan | S::Decap, K::PushVlan) => {
                Some(S::PushVlan)
            }
            (
                S::NoAction | S::NonTerm | S::ModifyHdr | S::PushVlan | S::PopVlan | S::Decap,
                K::Encap,
            ) => Some(S::Encap),
            _ => None,
        };
        next.ok_or(DrError::ActionSequence {
            action: kind.name(),
            after: self.name(),
        })
    }
}

/// Checks a rule's action list as `mlx5dv_dr_rule_create` does: the
/// sequence ([`ActionState::next`]), each type at most once except VLAN
/// push/pop (at most two of them together).
pub fn check_sequence(kinds: impl IntoIterator<Item = ActionKind>) -> Result<(), DrError> {
    let mut state = ActionState::NoAction;
    let mut seen = [0u8; 13];
    let mut vlans = 0;
    for kind in kinds {
        if kind == ActionKind::PushVlan && vlans == 2 {
            return Err(DrError::TooManyVlans);
        }
        let max = match kind {
            ActionKind::PushVlan | ActionKind::PopVlan => {
                vlans += 1;
                2
            }
            _ => 1,
        };
        let n = &mut seen[kind as usize];
        *n += 1;
        if *n > max {
            return Err(DrError::RepeatedAction(kind.name()));
        }
        state = state.next(kind)?;
    }
    Ok(())
}

/// One counter of a bulk query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct CounterValue {
    pub packets: u64,
    pub bytes: u64,
}

/// The Direct Rule API. Creates return a handle or the error the library
/// would set errno to; destroys fail with EBUSY while others use the object.
pub trait DrBackend: Send + Sync {
    /// `mlx5dv_dr_domain_create`.
    fn domain_create(&self, ty: DomainType) -> Result<DomainId, DrError>;
    /// `mlx5dv_dr_domain_destroy`: EBUSY while it has tables or actions.
    fn domain_destroy(&self, domain: DomainId) -> Result<(), DrError>;
    /// `mlx5dv_dr_domain_sync`.
    fn domain_sync(&self, domain: DomainId, flags: SyncFlags) -> Result<(), DrError>;
    /// `mlx5dv_dr_domain_allow_duplicate_rules` (allowed by default on
    /// non-root tables).
    fn domain_allow_duplicate_rules(&self, domain: DomainId, allow: bool) -> Result<(), DrError>;

    /// `mlx5dv_dr_table_create`.
    fn table_create(&self, domain: DomainId, level: u32) -> Result<TableId, DrError>;
    /// `mlx5dv_dr_table_destroy`: EBUSY while it has matchers or actions
    /// lead to it.
    fn table_destroy(&self, table: TableId) -> Result<(), DrError>;

    /// `mlx5dv_dr_matcher_create`: `mask` is `fte_match_param` bytes
    /// (`match_sz` of them).
    fn matcher_create(
        &self,
        table: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError>;
    /// `mlx5dv_dr_matcher_destroy`: EBUSY while it has rules.
    fn matcher_destroy(&self, matcher: MatcherId) -> Result<(), DrError>;

    /// `mlx5dv_dr_rule_create`.
    fn rule_create(
        &self,
        matcher: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError>;
    /// `mlx5dv_dr_rule_destroy`.
    fn rule_destroy(&self, rule: RuleId) -> Result<(), DrError>;

    /// `mlx5dv_dr_action_create_*` in `domain`.
    fn action_create(&self, domain: DomainId, spec: ActionSpec) -> Result<ActionId, DrError>;
    /// `mlx5dv_dr_action_destroy`: EBUSY while rules or other actions use it.
    fn action_destroy(&self, action: ActionId) -> Result<(), DrError>;

    /// Allocates a DEVX flow counter bulk of `2^log_size` counters
    /// (ALLOC_FLOW_COUNTER with `flow_counter_bulk_log_size`).
    fn counter_bulk_alloc(&self, log_size: u8) -> Result<CounterBulkId, DrError>;
    /// Frees a bulk: EBUSY while counter actions use it.
    fn counter_bulk_free(&self, bulk: CounterBulkId) -> Result<(), DrError>;
    /// One QUERY_FLOW_COUNTER for the whole bulk: `out` gets every counter,
    /// by offset.
    fn counter_bulk_query(
        &self,
        bulk: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError>;

    /// Everything programmed now, for `eswitchctl dump-rules` and for
    /// checking that a shut-down device is empty: the sim walks its
    /// state; a real device answers from its own dump.
    fn dump(&self) -> Result<DeviceDump, DrError>;

    /// Whether the packets this device hands to software carry a restore
    /// tag ([`crate::restore`]), or why not. The default: a slow path on
    /// the representor netdevs, where the kernel keeps the completion.
    fn restore_path(&self) -> Result<(), &'static str> {
        Err(NO_RESTORE_PATH)
    }

    /// Steers packets whose reg_c_1 is `tag` to the slow-path receive
    /// queue with flow tag `tag` (EINVAL for 0 or a tag of more than 24
    /// bits, EEXIST for a tag already steered).
    fn restore_rule_create(&self, tag: u32) -> Result<RestoreRuleId, DrError> {
        let _ = tag;
        Err(DrError::NoRestorePath(NO_RESTORE_PATH))
    }

    /// Removes a restore rule.
    fn restore_rule_destroy(&self, rule: RestoreRuleId) -> Result<(), DrError> {
        let _ = rule;
        Err(DrError::Stale(Object::RestoreRule))
    }
}

/// Why a backend without a tag-reading slow path has none.
pub const NO_RESTORE_PATH: &str =
    "the slow path receives on representor netdevs, which carry no restore tag";

/// Implements [`DrBackend`] for a wrapper type by forwarding every call to
/// one of its fields: `delegate_backend!(Wrapper, field)`, or
/// `delegate_backend!(Wrapper<B: DrBackend>, field)` for a generic one.
#[macro_export]
macro_rules! delegate_backend {
    ($ty:ident $(<$g:ident: $bound:path>)?, $field:tt) => {
        impl$(<$g: $bound>)? $crate::dr::DrBackend for $ty$(<$g>)? {
            fn domain_create(
                &self,
                ty: $crate::dr::DomainType,
            ) -> Result<$crate::dr::DomainId, $crate::dr::DrError> {
                self.$field.domain_create(ty)
            }
            fn domain_destroy(&self, d: $crate::dr::DomainId) -> Result<(), $crate::dr::DrError> {
                self.$field.domain_destroy(d)
            }
            fn domain_sync(
                &self,
                d: $crate::dr::DomainId,
                flags: $crate::dr::SyncFlags,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.domain_sync(d, flags)
            }
            fn domain_allow_duplicate_rules(
                &self,
                d: $crate::dr::DomainId,
                allow: bool,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.domain_allow_duplicate_rules(d, allow)
            }
            fn table_create(
                &self,
                d: $crate::dr::DomainId,
                level: u32,
            ) -> Result<$crate::dr::TableId, $crate::dr::DrError> {
                self.$field.table_create(d, level)
            }
            fn table_destroy(&self, t: $crate::dr::TableId) -> Result<(), $crate::dr::DrError> {
                self.$field.table_destroy(t)
            }
            fn matcher_create(
                &self,
                t: $crate::dr::TableId,
                priority: u16,
                criteria: u8,
                mask: &[u8],
            ) -> Result<$crate::dr::MatcherId, $crate::dr::DrError> {
                self.$field.matcher_create(t, priority, criteria, mask)
            }
            fn matcher_destroy(
                &self,
                m: $crate::dr::MatcherId,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.matcher_destroy(m)
            }
            fn rule_create(
                &self,
                m: $crate::dr::MatcherId,
                value: &[u8],
                actions: &[$crate::dr::ActionId],
            ) -> Result<$crate::dr::RuleId, $crate::dr::DrError> {
                self.$field.rule_create(m, value, actions)
            }
            fn rule_destroy(&self, r: $crate::dr::RuleId) -> Result<(), $crate::dr::DrError> {
                self.$field.rule_destroy(r)
            }
            fn action_create(
                &self,
                d: $crate::dr::DomainId,
                spec: $crate::dr::ActionSpec,
            ) -> Result<$crate::dr::ActionId, $crate::dr::DrError> {
                self.$field.action_create(d, spec)
            }
            fn action_destroy(&self, a: $crate::dr::ActionId) -> Result<(), $crate::dr::DrError> {
                self.$field.action_destroy(a)
            }
            fn counter_bulk_alloc(
                &self,
                log_size: u8,
            ) -> Result<$crate::dr::CounterBulkId, $crate::dr::DrError> {
                self.$field.counter_bulk_alloc(log_size)
            }
            fn counter_bulk_free(
                &self,
                b: $crate::dr::CounterBulkId,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.counter_bulk_free(b)
            }
            fn counter_bulk_query(
                &self,
                b: $crate::dr::CounterBulkId,
                out: &mut Vec<$crate::dr::CounterValue>,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.counter_bulk_query(b, out)
            }
            fn dump(&self) -> Result<$crate::dr::DeviceDump, $crate::dr::DrError> {
                self.$field.dump()
            }
            fn restore_path(&self) -> Result<(), &'static str> {
                self.$field.restore_path()
            }
            fn restore_rule_create(
                &self,
                tag: u32,
            ) -> Result<$crate::dr::RestoreRuleId, $crate::dr::DrError> {
                self.$field.restore_rule_create(tag)
            }
            fn restore_rule_destroy(
                &self,
                r: $crate::dr::RestoreRuleId,
            ) -> Result<(), $crate::dr::DrError> {
                self.$field.restore_rule_destroy(r)
            }
        }
    };
}
pub use delegate_backend;

#[cfg(test)]
#[path = "tests/sequence.rs"]
mod tests;

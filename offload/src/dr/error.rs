//! Direct Rule errors: what went wrong, and the errno the real library sets.
//!
//! Every `mlx5dv_dr_*` create call returns NULL with `errno` set and every
//! destroy returns the errno. Each [`DrError`] variant is one documented (or
//! source-verified) failure and [`DrError::errno`] is the value rdma-core
//! gives for it, checked in `providers/mlx5/dr_action.c`, `dr_rule.c`,
//! `dr_matcher.c` and `dr_domain.c` (rdma-core 691953d8): for example
//! "Invalid action sequence provided" is `EOPNOTSUPP` (the action state
//! machine), "Destination table level should be higher than source table"
//! is `EINVAL`, a duplicate rule with duplicates disabled is `EEXIST`.

use std::fmt;

use thiserror::Error;

use crate::prm::DecodeError;

use super::meter::MeterError;
use super::modify::ModifyError;

/// The errno values Direct Rule reports (Linux numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Errno {
    EIO,
    ENOMEM,
    EBUSY,
    EEXIST,
    EINVAL,
    ENOSPC,
    EOPNOTSUPP,
    ETIMEDOUT,
}

impl Errno {
    /// The Linux number.
    pub fn code(self) -> i32 {
        match self {
            Errno::EIO => 5,
            Errno::ENOMEM => 12,
            Errno::EBUSY => 16,
            Errno::EEXIST => 17,
            Errno::EINVAL => 22,
            Errno::ENOSPC => 28,
            Errno::EOPNOTSUPP => 95,
            Errno::ETIMEDOUT => 110,
        }
    }

    /// The errno of a Linux number, if it is one Direct Rule reports.
    pub fn from_code(code: i32) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.code() == code)
    }

    /// Every value, for tables and tests.
    pub const ALL: [Errno; 8] = [
        Errno::EIO,
        Errno::ENOMEM,
        Errno::EBUSY,
        Errno::EEXIST,
        Errno::EINVAL,
        Errno::ENOSPC,
        Errno::EOPNOTSUPP,
        Errno::ETIMEDOUT,
    ];

    /// The symbolic name, `ENOSPC`.
    pub fn name(self) -> &'static str {
        match self {
            Errno::EIO => "EIO",
            Errno::ENOMEM => "ENOMEM",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::EINVAL => "EINVAL",
            Errno::ENOSPC => "ENOSPC",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::ETIMEDOUT => "ETIMEDOUT",
        }
    }

    /// Parses `ENOSPC` (any case).
    pub fn from_name(s: &str) -> Option<Errno> {
        Errno::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of object a handle names, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Object {
    Domain,
    Table,
    Matcher,
    Rule,
    Action,
    CounterBulk,
    RestoreRule,
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Object::Domain => "domain",
            Object::Table => "table",
            Object::Matcher => "matcher",
            Object::Rule => "rule",
            Object::Action => "action",
            Object::CounterBulk => "counter bulk",
            Object::RestoreRule => "restore rule",
        })
    }
}

/// A resource with a capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Rules in one table (steering memory of its hash tables).
    TableRules,
    /// Flow counters over all bulks.
    Counters,
    /// Flow meters.
    Meters,
    /// Matchers in one table.
    Matchers,
    /// Modify-header actions in one modify-header object.
    ModifyActions,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::TableRules => "rules in the table",
            Resource::Counters => "flow counters",
            Resource::Meters => "flow meters",
            Resource::Matchers => "matchers in the table",
            Resource::ModifyActions => "modify-header actions",
        })
    }
}

/// A failed Direct Rule call.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DrError {
    /// A rule with the same value is in the matcher and duplicates are not
    /// allowed (root tables never allow them).
    #[error("EEXIST: a rule with the same value is already in the matcher")]
    DuplicateRule,
    /// Match bytes the device refuses: lengths, value bits outside the mask
    /// (EINVAL) or mask bits it cannot match (EOPNOTSUPP).
    #[error("{errno}: {0}", errno = match_errno(.0))]
    Match(DecodeError),
    /// The IP version in the rule differs from the matcher's ("IP version in
    /// matcher mask and rule should be equal and set to 4, 6 or 0").
    #[error("EINVAL: rule ip_version {rule} differs from the matcher's {mask}")]
    IpVersion { mask: u8, rule: u8 },
    /// An action not allowed after the ones before it (drop or a
    /// destination after a terminating action, and so on).
    #[error("EOPNOTSUPP: invalid action sequence: {action} after {after}")]
    ActionSequence {
        action: &'static str,
        after: &'static str,
    },
    /// The same action type twice in one rule (VLAN actions: three times).
    #[error("EINVAL: action {0} given more often than allowed")]
    RepeatedAction(&'static str),
    /// More than two VLAN push/pop actions in one rule.
    #[error("EOPNOTSUPP: more than two VLAN actions in one rule")]
    TooManyVlans,
    /// An action that does not exist in this domain type (dest_vport outside
    /// the FDB, a sampler in NIC_TX).
    #[error("EOPNOTSUPP: {action} is not supported in a {domain} domain")]
    WrongDomain {
        action: &'static str,
        domain: &'static str,
    },
    /// Objects of two different domains used together.
    #[error("EINVAL: {0} belongs to a different domain")]
    OtherDomain(Object),
    /// A vport the eSwitch does not have.
    #[error("EINVAL: no vport {0}")]
    NoVport(u32),
    /// A destination, meter or sampler next table not above the rule's table.
    #[error("EINVAL: {what} at level {to} is not above the rule's table at level {from}")]
    Level {
        what: &'static str,
        from: u32,
        to: u32,
    },
    /// A meter whose next table is the root table.
    #[error("EOPNOTSUPP: a meter cannot continue in the root table")]
    RootNextTable,
    /// An object still used by others.
    #[error("EBUSY: {what} still has {users} user(s): {by}")]
    InUse {
        what: Object,
        users: usize,
        by: &'static str,
    },
    /// A capacity reached.
    #[error("ENOSPC: no room for more {0}")]
    NoSpace(Resource),
    /// A handle to an object that does not exist (destroyed, or never made).
    #[error("EINVAL: no such {0}")]
    Stale(Object),
    /// A bad argument, with what was wrong.
    #[error("EINVAL: {0}")]
    Invalid(&'static str),
    /// Bad modify-header bytes.
    #[error("{errno}: {0}", errno = if .0.errno_is_eopnotsupp() { "EOPNOTSUPP" } else { "EINVAL" })]
    Modify(ModifyError),
    /// Bad flow meter parameters.
    #[error("EINVAL: flow meter parameters: {0}")]
    Meter(MeterError),
    /// The device's slow path cannot read restore tags (the reason): no
    /// restore rule can be made.
    #[error("EOPNOTSUPP: no restore path: {0}")]
    NoRestorePath(&'static str),
    /// A failure the fault injector was told to produce.
    #[error("{errno}: injected fault on {op}")]
    Injected { errno: Errno, op: &'static str },
    /// A real device refused a call for a reason the checks made before
    /// calling it did not see: the errno the library set (`code`, the raw
    /// number; `errno`, the nearest Direct Rule value, EIO for others).
    #[error("{errno}: the device refused {op} (errno {code})")]
    Device {
        op: &'static str,
        errno: Errno,
        code: i32,
    },
}

fn match_errno(e: &DecodeError) -> Errno {
    match e {
        DecodeError::UnsupportedBlock(_)
        | DecodeError::UnsupportedField(_)
        | DecodeError::Invalid { .. } => Errno::EOPNOTSUPP,
        _ => Errno::EINVAL,
    }
}

impl DrError {
    /// The errno the real library sets for this failure.
    pub fn errno(&self) -> Errno {
        match self {
            DrError::DuplicateRule => Errno::EEXIST,
            DrError::Match(e) => match_errno(e),
            DrError::ActionSequence { .. }
            | DrError::TooManyVlans
            | DrError::WrongDomain { .. }
            | DrError::RootNextTable
            | DrError::NoRestorePath(_) => Errno::EOPNOTSUPP,
            DrError::Modify(e) if e.errno_is_eopnotsupp() => Errno::EOPNOTSUPP,
            DrError::InUse { .. } => Errno::EBUSY,
            DrError::NoSpace(_) => Errno::ENOSPC,
            DrError::Injected { errno, .. } | DrError::Device { errno, .. } => *errno,
            DrError::IpVersion { .. }
            | DrError::RepeatedAction(_)
            | DrError::OtherDomain(_)
            | DrError::NoVport(_)
            | DrError::Level { .. }
            | DrError::Stale(_)
            | DrError::Invalid(_)
            | DrError::Modify(_)
            | DrError::Meter(_) => Errno::EINVAL,
        }
    }
}

impl From<DecodeError> for DrError {
    fn from(e: DecodeError) -> Self {
        DrError::Match(e)
    }
}

impl From<ModifyError> for DrError {
    fn from(e: ModifyError) -> Self {
        DrError::Modify(e)
    }
}

impl From<MeterError> for DrError {
    fn from(e: MeterError) -> Self {
        DrError::Meter(e)
    }
}

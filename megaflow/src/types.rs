//! Newtypes for numbers that must not mix.

use std::fmt;

/// A datapath port number (the `in_port` of a key, the target of `output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortNo(pub u32);

impl fmt::Display for PortNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A meter id, as the pipeline numbers meters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeterId(pub u32);

impl fmt::Display for MeterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A point in time in nanoseconds on the datapath clock (monotonic live,
/// the capture's clock in replay). The caller supplies it per batch so the hot
/// path never reads a clock per packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const NEVER: Timestamp = Timestamp(0);

    pub fn from_millis(ms: u64) -> Self {
        Timestamp(ms.saturating_mul(1_000_000))
    }

    pub fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Nanoseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

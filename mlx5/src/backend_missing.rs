//! Built without rdma-core: the backend type exists (so the switch can
//! name it) but no value of it can be made; [`crate::open`] says why.

use offload::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DeviceDump, DomainId, DomainType, DrBackend,
    DrError, MatcherId, RuleId, SyncFlags, TableId,
};
use offload::prm::SourcePortMode;
use offload::sim::SimBackend;
use offload::Vport;

/// No device can be opened in this build.
pub enum Mlx5Backend {}

impl Mlx5Backend {
    pub fn source_port(&self) -> SourcePortMode {
        match *self {}
    }

    pub fn vport_tag(&self, _: Vport) -> Option<u32> {
        match *self {}
    }

    pub fn model(&self) -> &SimBackend {
        match *self {}
    }

    pub fn set_cross_check(&mut self, _: bool) {
        match *self {}
    }

    pub fn take_divergences(&self) -> Vec<crate::Divergence> {
        match *self {}
    }

    pub fn open_slow_path(&self, _: u8, _: u32) -> Result<(), crate::SlowPathError> {
        match *self {}
    }

    pub fn poll_slow_path(
        &self,
        _: usize,
        _: impl FnMut(crate::Arrived<'_>),
    ) -> Result<usize, crate::QueueError> {
        match *self {}
    }

    pub fn vport_of_metadata(&self, _: u32) -> Option<Vport> {
        match *self {}
    }

    pub fn differences(&self) -> Result<Vec<String>, DrError> {
        match *self {}
    }
}

impl DrBackend for Mlx5Backend {
    fn domain_create(&self, _: DomainType) -> Result<DomainId, DrError> {
        match *self {}
    }
    fn domain_destroy(&self, _: DomainId) -> Result<(), DrError> {
        match *self {}
    }
    fn domain_sync(&self, _: DomainId, _: SyncFlags) -> Result<(), DrError> {
        match *self {}
    }
    fn domain_allow_duplicate_rules(&self, _: DomainId, _: bool) -> Result<(), DrError> {
        match *self {}
    }
    fn table_create(&self, _: DomainId, _: u32) -> Result<TableId, DrError> {
        match *self {}
    }
    fn table_destroy(&self, _: TableId) -> Result<(), DrError> {
        match *self {}
    }
    fn matcher_create(&self, _: TableId, _: u16, _: u8, _: &[u8]) -> Result<MatcherId, DrError> {
        match *self {}
    }
    fn matcher_destroy(&self, _: MatcherId) -> Result<(), DrError> {
        match *self {}
    }
    fn rule_create(&self, _: MatcherId, _: &[u8], _: &[ActionId]) -> Result<RuleId, DrError> {
        match *self {}
    }
    fn rule_destroy(&self, _: RuleId) -> Result<(), DrError> {
        match *self {}
    }
    fn action_create(&self, _: DomainId, _: ActionSpec) -> Result<ActionId, DrError> {
        match *self {}
    }
    fn action_destroy(&self, _: ActionId) -> Result<(), DrError> {
        match *self {}
    }
    fn counter_bulk_alloc(&self, _: u8) -> Result<CounterBulkId, DrError> {
        match *self {}
    }
    fn counter_bulk_free(&self, _: CounterBulkId) -> Result<(), DrError> {
        match *self {}
    }
    fn counter_bulk_query(
        &self,
        _: CounterBulkId,
        _: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        match *self {}
    }
    fn dump(&self) -> Result<DeviceDump, DrError> {
        match *self {}
    }
}

/// Without rdma-core nothing starts.
pub fn start(
    _device: &str,
    _reps: &[crate::device::RepPort],
) -> Result<Mlx5Backend, crate::device::StartError> {
    Err(crate::device::DeviceError::BuiltWithout.into())
}

//! Megaflow cache (being written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowHandle(u64);
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowStats;
#[derive(Debug)]
pub enum InsertError {}
#[derive(Clone, Debug, Default)]
pub struct CacheConfig;
pub struct MegaflowCache;

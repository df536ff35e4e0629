//! # megaflow: eswitch's software datapath
//!
//! Everything a packet meets between a port and the decision of what to do
//! with it, and nothing of OpenFlow or of the NIC:
//!
//! - [`extract`]: zero-copy, length-checked parsing of a frame into a
//!   fixed-layout [`FlowKey`] (plus the header [`Layout`] for rewriting);
//! - [`key`]: [`FlowKey`], [`Mask`] (same layout) and [`Match`] (a key whose
//!   wildcarded bits are zero, by construction);
//! - [`actions`]: datapath actions and their execution on a packet buffer,
//!   with IPv4 and L4 checksum updates;
//! - [`cache`]: the megaflow cache, an exact-match front over a tuple-space
//!   search (one hash table per distinct mask, ranked by hits), with per-flow
//!   stats, a flow limit, and a batch lookup;
//! - [`shard`]: how several threads share a cache (see below);
//! - [`port`]: the port I/O trait with in-memory and pcap implementations.
//!
//! ## Concurrency
//!
//! Like Open vSwitch's per-PMD classifiers, each datapath thread *owns* its
//! cache ([`shard::Shard`]): lookups, stats updates, inserts and removals run
//! on that one thread, with no locks and no atomics on the hot path. Other
//! threads (the upcall handler that installs flows, the revalidator that reads
//! stats and evicts) hold a [`shard::ShardHandle`] and send commands through a
//! bounded queue; the owner applies them between receive batches and answers
//! through a reply channel. So a lookup can never see a torn or freed entry
//! (only the owner touches entries), removals hand back the flow's final
//! stats (none are lost), and a dump is a consistent snapshot taken between
//! two batches. The cost is that a change takes effect at the next batch
//! boundary (microseconds), which the upcall path tolerates: until then the
//! packets of that flow keep missing and queue as upcalls, as in OVS.
#![forbid(unsafe_code)]

pub mod actions;
pub mod build;
pub mod cache;
pub mod extract;
pub mod key;
pub mod offload;
pub mod port;
pub mod shard;
mod types;

pub use actions::{Actions, DpAction};
pub use cache::{CacheConfig, FlowHandle, FlowStats, InsertError, MegaflowCache};
pub use extract::{extract, extract_into, Extracted, Layout, ParseCounters, ParseError};
pub use key::{Field, FlowKey, Mask, Match, KEY_WORDS};
pub use types::{MeterId, PortNo, Timestamp};

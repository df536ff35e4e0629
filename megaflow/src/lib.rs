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
//! - [`datapath`]: one thread's [`Datapath`]: its cache shard, meters and
//!   sampler, commands from the slow path in, stats deltas out (see below);
//! - [`meter`]: token-bucket meters shared by the datapath threads;
//! - [`rand`]: [`SplitMix64`], the one small seedable generator;
//! - [`port`]: the port I/O trait with in-memory and pcap implementations;
//! - [`tunnel`]: VXLAN and Geneve outer headers, built for software encap
//!   and for the NIC's packet reformat, and read back at decap.
//!
//! ## Concurrency
//!
//! Like Open vSwitch's per-PMD classifiers, each datapath thread *owns* its
//! [`Datapath`]: lookups, stats updates, inserts and removals run on that
//! one thread, with no locks and no atomics on the hot path (a packet
//! through a meter charges the meter's shared bucket). The slow path (the
//! upcall handler that installs flows, the revalidator that reads stats
//! and evicts) sends [`DpCommand`]s through a [`datapath::link`]; the owner
//! applies them between receive batches and sends back [`DpEvent`]s: the
//! counts of the flows hit since the last report, and the last counts of
//! each flow removed. So a lookup can never see a torn or freed entry (only
//! the owner touches entries), and no count is lost or reported twice. The
//! cost is that a change takes effect at the next batch boundary
//! (microseconds), which the upcall path tolerates: until then the packets
//! of that flow keep missing and queue as upcalls, as in OVS.
#![forbid(unsafe_code)]

pub mod actions;
pub mod cache;
pub mod datapath;
pub mod extract;
pub mod frame;
pub mod key;
pub mod meter;
pub mod offload;
pub mod port;
pub mod rand;
pub mod shard;
pub mod tunnel;
mod types;

pub use actions::{Actions, DpAction};
pub use cache::{CacheConfig, FlowHandle, FlowStats, InsertError, MegaflowCache};
pub use datapath::{Datapath, DatapathCounters, DpCommand, DpEvent, FlowId, Lookup, Resume};
pub use extract::{extract, extract_into, Extracted, Layout, ParseCounters, ParseError};
pub use key::{Field, FlowKey, Mask, Match, PackedKey, KEY_WORDS};
pub use rand::SplitMix64;
pub use tunnel::TunnelKey;
pub use types::{MeterId, PortNo, Timestamp};

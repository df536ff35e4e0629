//! An OVSDB client (RFC 7047), for eswitchd to follow an `Open_vSwitch`
//! database the way `ovs-vswitchd` does.
//!
//! - [`Client`]: one JSON-RPC connection (`unix:PATH` or `tcp:IP:PORT`).
//!   A reader thread parses the server's stream of JSON values, hands each
//!   reply to the call waiting for it, answers the server's `echo`
//!   probes, and queues notifications (`update`, `locked`, `stolen`) for
//!   [`Client::next_notification`]. Calls block (with a timeout) and may
//!   come from any thread.
//! - [`Datum`] and [`Atom`]: column values in their JSON forms.
//! - [`op`]: the operations of a `transact`; [`Client::transact`] returns
//!   their results, or the first operation's error with its details.
//! - [`TableUpdates`] and [`Replica`]: a monitor's initial contents and
//!   updates, applied to a local copy of the monitored tables.
//!
//! No maintained OVSDB crate was fit for a switch daemon (the ones
//! published are pre-1.0 sketches without locks or replicas), so this one
//! is written for the job and tested against Debian's `ovsdb-server`.

mod client;
mod datum;
pub mod op;
mod replica;

pub use client::{Client, Notification, DEFAULT_TIMEOUT};
pub use datum::{Atom, Datum};
pub use replica::{Replica, Row, RowUpdate, TableUpdates};

use std::time::Duration;

/// What went wrong, naming the call or the value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0:?} is not a database target: expected unix:PATH or tcp:IP:PORT")]
    Target(String),
    #[error("cannot connect to {target}: {source}")]
    Connect {
        target: String,
        source: std::io::Error,
    },
    #[error("the connection is closed: {0}")]
    Closed(String),
    #[error("{method}: no reply within {after:?}")]
    Timeout { method: String, after: Duration },
    #[error("{method}: the server answered with error {error}")]
    Rpc {
        method: String,
        error: serde_json::Value,
    },
    #[error("transact: operation {index} failed: {error}{details}")]
    Transaction {
        index: usize,
        error: String,
        details: String,
    },
    #[error("{method}: unexpected reply {reply}")]
    Reply {
        method: String,
        reply: serde_json::Value,
    },
    #[error("bad value: {0}")]
    Datum(String),
    #[error("cannot send: {0}")]
    Io(#[from] std::io::Error),
}

//! Where the slow path's megaflows go: the datapaths.
//!
//! The slow path ([`super::Pipeline`]) never looks packets up itself: each
//! datapath thread owns a [`Datapath`] (cache shard, meters, sampler), and
//! the slow path changes them only through [`DpCommand`]s and learns what
//! they did only through [`DpEvent`]s. [`Datapaths`] is that boundary:
//! the daemon implements it over channels to its datapath threads (a
//! megaflow exact on `in_port` goes to the one thread that receives the
//! port, any other to every thread); [`LocalDatapath`] is one datapath on
//! the slow path's own thread, for replay, tests and benchmarks, where a
//! command takes effect at once.

use megaflow::{Datapath, DpCommand, DpEvent, PortNo};

/// The datapaths of one switch, as the slow path sees them.
pub trait Datapaths {
    /// Sends `cmd` to the datapath that receives `port`'s packets, or to
    /// every datapath for `None`; returns how many datapaths it went to
    /// (each of them answers a [`DpCommand::Remove`] with one
    /// [`DpEvent::Removed`]).
    fn send(&mut self, port: Option<PortNo>, cmd: &DpCommand) -> u32;

    /// Appends the events sent since the last call.
    fn collect(&mut self, out: &mut Vec<DpEvent>);
}

/// One datapath on the caller's thread: commands apply at once.
pub struct LocalDatapath(pub Datapath);

impl Datapaths for LocalDatapath {
    fn send(&mut self, _port: Option<PortNo>, cmd: &DpCommand) -> u32 {
        self.0.apply(cmd.clone());
        1
    }

    fn collect(&mut self, out: &mut Vec<DpEvent>) {
        self.0.report(out);
    }
}

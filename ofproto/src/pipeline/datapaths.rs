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

/// Datapaths on their own threads, each reached through a link. A port's
/// packets are received by one thread (its home); a megaflow exact on
/// `in_port` goes to that thread only, any other to every thread.
#[derive(Default)]
pub struct ThreadedDatapaths {
    links: Vec<megaflow::datapath::DatapathLink>,
    homes: std::collections::HashMap<PortNo, usize>,
}

impl ThreadedDatapaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a datapath thread's link; returns its index.
    pub fn add(&mut self, link: megaflow::datapath::DatapathLink) -> usize {
        self.links.push(link);
        self.links.len() - 1
    }

    /// `port`'s packets are received by datapath `index` from now on
    /// (`None`: by none, the port is closed).
    pub fn assign(&mut self, port: PortNo, index: Option<usize>) {
        match index {
            Some(i) if i < self.links.len() => {
                self.homes.insert(port, i);
            }
            _ => {
                self.homes.remove(&port);
            }
        }
    }

    /// The datapath that receives `port`.
    pub fn home(&self, port: PortNo) -> Option<usize> {
        self.homes.get(&port).copied()
    }
}

impl Datapaths for ThreadedDatapaths {
    fn send(&mut self, port: Option<PortNo>, cmd: &DpCommand) -> u32 {
        let sent = |l: &megaflow::datapath::DatapathLink| u32::from(l.send(cmd.clone()));
        match port {
            // A port no thread receives: no datapath needs the flow (when
            // the port opens, its first packets' upcalls install it).
            Some(p) => self
                .homes
                .get(&p)
                .and_then(|&i| self.links.get(i))
                .map_or(0, sent),
            None => self.links.iter().map(sent).sum(),
        }
    }

    fn collect(&mut self, out: &mut Vec<DpEvent>) {
        for l in &self.links {
            l.collect(out);
        }
    }
}

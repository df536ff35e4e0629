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

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use megaflow::{Datapath, DatapathCounters, DpCommand, DpEvent, PortNo};
use parking_lot::RwLock;

/// The datapaths of one switch, as the slow path sees them.
pub trait Datapaths {
    /// Sends `cmd` to the datapath that receives `port`'s packets, or to
    /// every datapath for `None`; returns how many datapaths it went to
    /// (each of them answers a [`DpCommand::Remove`] with one
    /// [`DpEvent::Removed`]).
    fn send(&mut self, port: Option<PortNo>, cmd: &DpCommand) -> u32;

    /// Appends the events sent since the last call.
    fn collect(&mut self, out: &mut Vec<DpEvent>);

    /// A sender other threads install megaflows through, if these
    /// datapaths take commands from other threads (`None`: they are the
    /// slow path's own, and so is every install).
    fn sender(&self) -> Option<Arc<dyn DpSender>> {
        None
    }

    /// Each datapath's counters, in the order the datapaths were added
    /// (a datapath on its own thread: as of its last report).
    fn counters(&self) -> Vec<DatapathCounters>;
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

    fn counters(&self) -> Vec<DatapathCounters> {
        vec![self.0.counters()]
    }
}

/// Sends commands to datapaths without the slow path: what a handler
/// thread installs a megaflow through ([`super::FlowSetup`]). Commands
/// from it and from the slow path reach each datapath in the order they
/// were sent.
pub trait DpSender: Send + Sync {
    /// As [`Datapaths::send`].
    fn send(&self, port: Option<PortNo>, cmd: &DpCommand) -> u32;
}

/// Datapaths on their own threads, each reached through a link. A port's
/// packets are received by one thread (its home); a megaflow exact on
/// `in_port` goes to that thread only, any other to every thread.
#[derive(Default)]
pub struct ThreadedDatapaths {
    links: Vec<megaflow::datapath::DatapathLink>,
    /// The threads' command channels and the ports' homes, shared with
    /// the handlers ([`Datapaths::sender`]).
    routes: Arc<RwLock<Routes>>,
}

#[derive(Default)]
struct Routes {
    cmds: Vec<Sender<DpCommand>>,
    homes: HashMap<PortNo, usize>,
}

impl DpSender for RwLock<Routes> {
    fn send(&self, port: Option<PortNo>, cmd: &DpCommand) -> u32 {
        let r = self.read();
        let sent = |c: &Sender<DpCommand>| u32::from(c.send(cmd.clone()).is_ok());
        match port {
            // A port no thread receives: no datapath needs the flow (when
            // the port opens, its first packets' upcalls install it).
            Some(p) => r.homes.get(&p).and_then(|&i| r.cmds.get(i)).map_or(0, sent),
            None => r.cmds.iter().map(sent).sum(),
        }
    }
}

impl ThreadedDatapaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a datapath thread's link; returns its index.
    pub fn add(&mut self, link: megaflow::datapath::DatapathLink) -> usize {
        self.routes.write().cmds.push(link.commands());
        self.links.push(link);
        self.links.len() - 1
    }

    /// `port`'s packets are received by datapath `index` from now on
    /// (`None`: by none, the port is closed).
    pub fn assign(&mut self, port: PortNo, index: Option<usize>) {
        let mut r = self.routes.write();
        match index {
            Some(i) if i < self.links.len() => {
                r.homes.insert(port, i);
            }
            _ => {
                r.homes.remove(&port);
            }
        }
    }

    /// The datapath that receives `port`.
    pub fn home(&self, port: PortNo) -> Option<usize> {
        self.routes.read().homes.get(&port).copied()
    }
}

impl Datapaths for ThreadedDatapaths {
    fn send(&mut self, port: Option<PortNo>, cmd: &DpCommand) -> u32 {
        DpSender::send(&*self.routes, port, cmd)
    }

    fn collect(&mut self, out: &mut Vec<DpEvent>) {
        for l in &self.links {
            l.collect(out);
        }
    }

    fn sender(&self) -> Option<Arc<dyn DpSender>> {
        Some(self.routes.clone())
    }

    fn counters(&self) -> Vec<DatapathCounters> {
        self.links.iter().map(|l| l.counters()).collect()
    }
}

//! Sharing a megaflow cache between threads: one owner, many requesters.
//!
//! A [`Shard`] is a [`MegaflowCache`] owned by one datapath thread. Other
//! threads (the upcall handler, the revalidator, the control socket) hold
//! cloneable [`ShardHandle`]s and send [`Command`]s through a bounded queue.
//! The owner calls [`Shard::apply_pending`] between receive batches; each
//! command is applied whole and answered through its own reply channel.
//!
//! Why this scheme (the crate docs have the summary): the hot path stays free
//! of locks, atomics and deferred reclamation; a lookup can never observe a
//! half-inserted or freed entry because only the owner touches entries; stats
//! are plain integers updated in place, and a removal returns the flow's final
//! counts, so none are lost. It mirrors Open vSwitch's per-PMD flow tables,
//! where each PMD thread has its own classifier.
//!
//! Backpressure: the queue is bounded. `try_*` methods return
//! [`ShardError::Busy`] instead of waiting (the upcall handler uses them and
//! drops the install, as OVS does under load); the plain methods wait for room.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::time::Duration;

use thiserror::Error;

use crate::actions::Actions;
use crate::cache::{CacheConfig, FlowHandle, FlowStats, InsertError, MegaflowCache, RemovedFlow};
use crate::key::Match;

/// One flow as a dump reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSnapshot {
    pub handle: FlowHandle,
    pub matched: Match,
    pub actions: Actions,
    pub stats: FlowStats,
    pub generation: u64,
    pub offload: u64,
}

/// A request to the owning thread.
#[derive(Debug)]
#[non_exhaustive]
pub enum Command {
    Insert {
        /// Boxed: a match is 384 bytes, the other commands are small.
        matched: Box<Match>,
        actions: Actions,
        generation: u64,
        reply: Sender<Result<FlowHandle, InsertError>>,
    },
    Remove {
        handle: FlowHandle,
        reply: Sender<Option<RemovedFlow>>,
    },
    Modify {
        handle: FlowHandle,
        actions: Actions,
        generation: u64,
        reply: Sender<bool>,
    },
    SetOffload {
        handle: FlowHandle,
        state: u64,
        reply: Sender<bool>,
    },
    Dump {
        reply: Sender<Vec<FlowSnapshot>>,
    },
    SetFlowLimit(usize),
}

/// Why a command could not be carried out.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    #[error("the shard's command queue is full")]
    Busy,
    #[error("the shard's owning thread has stopped")]
    Gone,
    #[error("no answer from the shard within the time limit")]
    Timeout,
}

/// The answer to one command, to wait for.
#[derive(Debug)]
pub struct Reply<T>(Receiver<T>);

impl<T> Reply<T> {
    /// Waits for the owner to apply the command.
    pub fn wait(self) -> Result<T, ShardError> {
        self.0.recv().map_err(|_| ShardError::Gone)
    }

    /// Waits at most `limit`. The reply stays valid after a timeout: wait
    /// again (a removal's final stats are only in its reply, so giving up on
    /// it loses them).
    pub fn wait_timeout(&self, limit: Duration) -> Result<T, ShardError> {
        self.0.recv_timeout(limit).map_err(|e| match e {
            RecvTimeoutError::Timeout => ShardError::Timeout,
            RecvTimeoutError::Disconnected => ShardError::Gone,
        })
    }
}

/// A cache and the queue of commands for it; owned by one thread.
pub struct Shard {
    cache: MegaflowCache,
    rx: Receiver<Command>,
}

impl Shard {
    /// A new shard and the first handle to it. `queue_len` bounds the number
    /// of commands waiting.
    pub fn new(cfg: CacheConfig, queue_len: usize) -> (Shard, ShardHandle) {
        let (tx, rx) = mpsc::sync_channel(queue_len.max(1));
        (
            Shard {
                cache: MegaflowCache::new(cfg),
                rx,
            },
            ShardHandle { tx },
        )
    }

    /// The cache, for lookups on the owning thread.
    #[inline]
    pub fn cache(&mut self) -> &mut MegaflowCache {
        &mut self.cache
    }

    /// Read-only view of the cache.
    pub fn cache_ref(&self) -> &MegaflowCache {
        &self.cache
    }

    /// Applies up to `max` waiting commands; returns how many were applied.
    /// Call between batches. A requester that went away is not an error.
    pub fn apply_pending(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(cmd) = self.rx.try_recv() else { break };
            self.apply(cmd);
            n += 1;
        }
        n
    }

    fn apply(&mut self, cmd: Command) {
        let c = &mut self.cache;
        // Send errors mean the requester stopped waiting; the command still
        // took effect, which is what it asked for.
        match cmd {
            Command::Insert {
                matched,
                actions,
                generation,
                reply,
            } => {
                let _ = reply.send(c.insert(&matched, actions, generation));
            }
            Command::Remove { handle, reply } => {
                let _ = reply.send(c.remove(handle));
            }
            Command::Modify {
                handle,
                actions,
                generation,
                reply,
            } => {
                let _ = reply.send(c.modify(handle, actions, generation));
            }
            Command::SetOffload {
                handle,
                state,
                reply,
            } => {
                let _ = reply.send(c.set_offload(handle, state));
            }
            Command::Dump { reply } => {
                let _ = reply.send(snapshot(c));
            }
            Command::SetFlowLimit(limit) => c.set_flow_limit(limit),
        }
    }
}

/// Every flow of a cache, copied out.
pub fn snapshot(c: &MegaflowCache) -> Vec<FlowSnapshot> {
    c.iter()
        .map(|f| FlowSnapshot {
            handle: f.handle,
            matched: f.matched(),
            actions: f.actions().clone(),
            stats: f.stats(),
            generation: f.generation(),
            offload: f.offload(),
        })
        .collect()
}

/// A requester's side of a shard. Cloneable and `Send`.
#[derive(Clone, Debug)]
pub struct ShardHandle {
    tx: SyncSender<Command>,
}

impl ShardHandle {
    fn send<T>(
        &self,
        wait: bool,
        make: impl FnOnce(Sender<T>) -> Command,
    ) -> Result<Reply<T>, ShardError> {
        let (reply, rx) = mpsc::channel();
        let cmd = make(reply);
        if wait {
            self.tx.send(cmd).map_err(|_| ShardError::Gone)?;
        } else {
            self.tx.try_send(cmd).map_err(|e| match e {
                TrySendError::Full(_) => ShardError::Busy,
                TrySendError::Disconnected(_) => ShardError::Gone,
            })?;
        }
        Ok(Reply(rx))
    }

    /// Queues an insert, waiting for room in the queue.
    pub fn insert(
        &self,
        matched: Match,
        actions: Actions,
        generation: u64,
    ) -> Result<Reply<Result<FlowHandle, InsertError>>, ShardError> {
        self.send(true, |reply| Command::Insert {
            matched: Box::new(matched),
            actions,
            generation,
            reply,
        })
    }

    /// Queues an insert, or fails with [`ShardError::Busy`] if the queue is full.
    pub fn try_insert(
        &self,
        matched: Match,
        actions: Actions,
        generation: u64,
    ) -> Result<Reply<Result<FlowHandle, InsertError>>, ShardError> {
        self.send(false, |reply| Command::Insert {
            matched: Box::new(matched),
            actions,
            generation,
            reply,
        })
    }

    /// Queues a removal; the reply carries the flow's final stats.
    pub fn remove(&self, handle: FlowHandle) -> Result<Reply<Option<RemovedFlow>>, ShardError> {
        self.send(true, |reply| Command::Remove { handle, reply })
    }

    /// Queues an action change.
    pub fn modify(
        &self,
        handle: FlowHandle,
        actions: Actions,
        generation: u64,
    ) -> Result<Reply<bool>, ShardError> {
        self.send(true, |reply| Command::Modify {
            handle,
            actions,
            generation,
            reply,
        })
    }

    /// Queues an update of a flow's opaque offload state.
    pub fn set_offload(&self, handle: FlowHandle, state: u64) -> Result<Reply<bool>, ShardError> {
        self.send(true, |reply| Command::SetOffload {
            handle,
            state,
            reply,
        })
    }

    /// Queues a dump of every flow with its stats.
    pub fn dump(&self) -> Result<Reply<Vec<FlowSnapshot>>, ShardError> {
        self.send(true, |reply| Command::Dump { reply })
    }

    /// Changes the flow limit (no reply).
    pub fn set_flow_limit(&self, limit: usize) -> Result<(), ShardError> {
        self.tx
            .send(Command::SetFlowLimit(limit))
            .map_err(|_| ShardError::Gone)
    }
}

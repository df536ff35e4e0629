//! The rtnetlink task: dump, then follow the link multicast group.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::stream::{StreamExt, TryStreamExt};
use netlink_packet_core::NetlinkPayload;
use rtnetlink::sys::AsyncSocket;
use rtnetlink::{new_connection, new_multicast_connection, MulticastGroup};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::netlink::{link_info, link_msg};
use super::table::{LinkInfo, PortEvent, RepresentorConfig, Representors};
use crate::Vport;

/// How long to wait before reopening a failed netlink connection.
const RETRY: Duration = Duration::from_millis(500);

/// Longest a link dump may take before the connection is reopened.
const DUMP_TIMEOUT: Duration = Duration::from_secs(10);

/// How the tracker's netlink sockets are set up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackerOptions {
    /// SO_RCVBUF of the multicast socket, in bytes (the kernel doubles it
    /// and applies its minimum); `None`: the system default
    /// (`net.core.rmem_default`). A buffer that fills (a burst of link
    /// changes the task does not read in time) drops messages and the
    /// next read is ENOBUFS: the tracker then dumps every link again and
    /// diffs.
    pub rcvbuf: Option<usize>,
}

struct Shared {
    table: Mutex<Representors>,
    resync_request: Notify,
    resyncs: AtomicU64,
    overruns: AtomicU64,
    options: TrackerOptions,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Representors> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Follows representors over rtnetlink and reports [`PortEvent`]s. The task
/// stops when the event receiver is dropped or the `Tracker` is.
pub struct Tracker {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Tracker {
    /// Starts the task on the current tokio runtime. Events go to the
    /// returned receiver (bounded by `capacity`): first `Added` for every
    /// representor present, then changes as they happen.
    pub fn start(
        config: RepresentorConfig,
        capacity: usize,
    ) -> (Tracker, mpsc::Receiver<PortEvent>) {
        Tracker::start_with(config, capacity, TrackerOptions::default())
    }

    /// [`start`](Self::start) with socket options.
    pub fn start_with(
        config: RepresentorConfig,
        capacity: usize,
        options: TrackerOptions,
    ) -> (Tracker, mpsc::Receiver<PortEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let shared = Arc::new(Shared {
            table: Mutex::new(Representors::new(config)),
            resync_request: Notify::new(),
            resyncs: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
            options,
        });
        let task = tokio::spawn(run(shared.clone(), tx));
        (Tracker { shared, task }, rx)
    }

    /// The port table as of now.
    pub fn snapshot(&self) -> Representors {
        self.shared.table().clone()
    }

    /// Asks for a full resync (as after an overrun).
    pub fn request_resync(&self) {
        self.shared.resync_request.notify_one();
    }

    /// Full dumps done so far, the initial one included.
    pub fn resyncs(&self) -> u64 {
        self.shared.resyncs.load(Ordering::Relaxed)
    }

    /// Overruns (ENOBUFS: link messages the kernel dropped) so far.
    pub fn overruns(&self) -> u64 {
        self.shared.overruns.load(Ordering::Relaxed)
    }

    /// A handle that changes what is tracked, from any thread.
    pub fn handle(&self) -> TrackerHandle {
        TrackerHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Stops the task.
    pub fn stop(self) {}
}

/// Changes a running [`Tracker`]'s names (ports added and removed while
/// the daemon runs).
#[derive(Clone)]
pub struct TrackerHandle {
    shared: Arc<Shared>,
}

impl TrackerHandle {
    /// Tracks the netdev `name` as the representor of `vport` (a veth or
    /// other non-switchdev netdev is a representor only by name); a
    /// resync reports it if it exists.
    pub fn track(&self, name: &str, vport: Option<Vport>) {
        self.shared.table().track(name, vport);
        self.shared.resync_request.notify_one();
    }

    /// Stops taking `name` as a representor by name.
    pub fn untrack(&self, name: &str) {
        self.shared.table().untrack(name);
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every link, dumped on a connection of its own: the multicast socket's
/// buffer may be full (that is why a resync is needed), and a dump's
/// replies must not be lost with the notifications.
async fn dump() -> Result<Vec<LinkInfo>, String> {
    let (conn, handle, _) = new_connection().map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let links = async {
        let mut links = handle.link().get().execute();
        let mut out = Vec::new();
        while let Some(msg) = links.try_next().await.map_err(|e| e.to_string())? {
            out.extend(link_info(&msg));
        }
        Ok(out)
    };
    let r = match tokio::time::timeout(DUMP_TIMEOUT, links).await {
        Ok(r) => r,
        Err(_) => Err(format!("no complete reply within {DUMP_TIMEOUT:?}")),
    };
    conn.abort();
    r
}

/// Sends events; `false` when the receiver is gone.
async fn send_all(tx: &mpsc::Sender<PortEvent>, events: Vec<PortEvent>) -> bool {
    for ev in events {
        if tx.send(ev).await.is_err() {
            return false;
        }
    }
    true
}

/// Dumps and diffs against the table. `None`: the receiver is gone;
/// `Some(false)`: the dump failed.
async fn resync(shared: &Shared, tx: &mpsc::Sender<PortEvent>) -> Option<bool> {
    match dump().await {
        Ok(links) => {
            let events = shared.table().resync(links);
            let sent = send_all(tx, events).await;
            // Counted once its events are in the channel.
            shared.resyncs.fetch_add(1, Ordering::Relaxed);
            sent.then_some(true)
        }
        Err(e) => {
            tracing::warn!("representor link dump failed: {e}");
            Some(false)
        }
    }
}

async fn run(shared: Arc<Shared>, tx: mpsc::Sender<PortEvent>) {
    loop {
        if tx.is_closed() {
            return;
        }
        let (mut conn, _handle, mut messages) =
            match new_multicast_connection(&[MulticastGroup::Link]) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("rtnetlink connection failed: {e}");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
        if let Some(size) = shared.options.rcvbuf {
            if let Err(e) = conn.socket_mut().socket_mut().set_rx_buf_sz(size) {
                tracing::warn!("cannot set the rtnetlink receive buffer to {size} bytes: {e}");
            }
        }
        let conn = tokio::spawn(conn);
        // Subscribed before dumping: nothing falls in between.
        let mut healthy = match resync(&shared, &tx).await {
            None => {
                conn.abort();
                return;
            }
            Some(ok) => ok,
        };
        let mut overrun = false;
        while healthy {
            let need_resync = tokio::select! {
                m = messages.next() => match m {
                    None => {
                        tracing::warn!("rtnetlink stream ended; reconnecting");
                        healthy = false;
                        false
                    }
                    Some((msg, _)) => match msg.payload {
                        NetlinkPayload::InnerMessage(m) => {
                            if let Some(lm) = link_msg(&m) {
                                let events = shared.table().apply(lm);
                                if !send_all(&tx, events).await {
                                    conn.abort();
                                    return;
                                }
                            }
                            false
                        }
                        NetlinkPayload::Overrun(_) => {
                            // What the socket still holds is older than
                            // what was lost: applied after a dump it would
                            // undo it. A new socket, subscribed before
                            // its dump, starts clean.
                            shared.overruns.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(
                                "rtnetlink overrun (ENOBUFS: link messages lost); resubscribing and resyncing representors"
                            );
                            overrun = true;
                            healthy = false;
                            false
                        }
                        NetlinkPayload::Error(e) => {
                            tracing::warn!("rtnetlink error message ({e:?}); resyncing representors");
                            true
                        }
                        _ => false,
                    },
                },
                () = shared.resync_request.notified() => true,
                () = tx.closed() => {
                    conn.abort();
                    return;
                }
            };
            if need_resync {
                match resync(&shared, &tx).await {
                    None => {
                        conn.abort();
                        return;
                    }
                    Some(ok) => healthy = ok,
                }
            }
        }
        conn.abort();
        if !overrun {
            tokio::time::sleep(RETRY).await;
        }
    }
}

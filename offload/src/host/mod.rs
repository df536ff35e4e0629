//! Host state over rtnetlink for the tunnel ports: links (MAC, MTU),
//! addresses, routes and neighbours, dumped and followed.
//!
//! [`HostTracker`] subscribes to the link, address, route and neighbour
//! groups, then dumps all four; every notification (the ones ready
//! together taken as one) is followed by a new dump, and a dump that
//! differs from the table replaces it and bumps the generation. A host
//! has few routes and neighbours, and a dump takes milliseconds: this
//! keeps the table exact without replaying the kernel's update rules, at
//! the cost of a dump per change. Readers ([`HostState`]) never wait on the
//! task: they read the last table under a read lock.
//!
//! A neighbour the underlay needs and the kernel has not resolved is asked
//! for with `RTM_NEWNEIGH` + `NTF_USE` (the kernel's `neigh_event_send`:
//! it sends the ARP or ND solicitation itself, as for a packet of its
//! own); the answer arrives as a neighbour notification.

mod table;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use futures::stream::{StreamExt, TryStreamExt};
use futures::FutureExt;
use netlink_packet_core::NetlinkPayload;
use netlink_packet_route::neighbour::{NeighbourFlags, NeighbourState};
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::RouteNetlinkMessage;
use rtnetlink::{new_connection, new_multicast_connection, MulticastGroup};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use table::{Hop, HostLink, HostRoute, HostTable, NeighState};

const RETRY: Duration = Duration::from_millis(500);
const DUMP_TIMEOUT: Duration = Duration::from_secs(10);

/// The table as the readers see it.
#[derive(Debug)]
pub struct HostState {
    table: RwLock<HostTable>,
    generation: AtomicU64,
    dumps: AtomicU64,
    resolve: mpsc::UnboundedSender<(u32, IpAddr)>,
}

impl HostState {
    /// The table as of the last dump.
    pub fn table(&self) -> RwLockReadGuard<'_, HostTable> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Bumped by every dump that changed the table.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Dumps completed (the first one included).
    pub fn dumps(&self) -> u64 {
        self.dumps.load(Ordering::Acquire)
    }

    /// Asks the kernel to resolve `addr` on link `ifindex` (never waits).
    pub fn request_resolution(&self, ifindex: u32, addr: IpAddr) {
        let _ = self.resolve.send((ifindex, addr));
    }

    fn replace(&self, t: HostTable) {
        let mut cur = self.table.write().unwrap_or_else(|e| e.into_inner());
        if *cur != t {
            *cur = t;
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        drop(cur);
        self.dumps.fetch_add(1, Ordering::AcqRel);
    }
}

/// The task following the host's tables; stops when dropped.
pub struct HostTracker {
    state: Arc<HostState>,
    task: JoinHandle<()>,
}

impl HostTracker {
    /// Starts on the current tokio runtime.
    pub fn start() -> HostTracker {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(HostState {
            table: RwLock::new(HostTable::default()),
            generation: AtomicU64::new(0),
            dumps: AtomicU64::new(0),
            resolve: tx,
        });
        let task = tokio::spawn(run(Arc::clone(&state), rx));
        HostTracker { state, task }
    }

    pub fn state(&self) -> Arc<HostState> {
        Arc::clone(&self.state)
    }
}

impl Drop for HostTracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Links, addresses, routes and neighbours, on a connection of their own.
async fn dump() -> Result<HostTable, String> {
    let (conn, handle, _) = new_connection().map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let all = async {
        let mut t = HostTable::default();
        let e = |e: rtnetlink::Error| e.to_string();
        let mut links = handle.link().get().execute();
        while let Some(m) = links.try_next().await.map_err(e)? {
            t.add(&RouteNetlinkMessage::NewLink(m));
        }
        let mut addrs = handle.address().get().execute();
        while let Some(m) = addrs.try_next().await.map_err(e)? {
            t.add(&RouteNetlinkMessage::NewAddress(m));
        }
        let mut routes = handle.route().get(RouteMessage::default()).execute();
        while let Some(m) = routes.try_next().await.map_err(e)? {
            t.add(&RouteNetlinkMessage::NewRoute(m));
        }
        let mut neighs = handle.neighbours().get().execute();
        while let Some(m) = neighs.try_next().await.map_err(e)? {
            t.add(&RouteNetlinkMessage::NewNeighbour(m));
        }
        Ok(t)
    };
    let r = match tokio::time::timeout(DUMP_TIMEOUT, all).await {
        Ok(r) => r,
        Err(_) => Err(format!("no complete reply within {DUMP_TIMEOUT:?}")),
    };
    conn.abort();
    r
}

/// `RTM_NEWNEIGH` with `NTF_USE`: the kernel solicits the neighbour.
async fn solicit(ifindex: u32, addr: IpAddr) -> Result<(), String> {
    let (conn, handle, _) = new_connection().map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let r = handle
        .neighbours()
        .add(ifindex, addr)
        .state(NeighbourState::None)
        .flags(NeighbourFlags::Use)
        .replace()
        .execute()
        .await
        .map_err(|e| e.to_string());
    conn.abort();
    r
}

async fn resync(state: &HostState) -> bool {
    match dump().await {
        Ok(t) => {
            state.replace(t);
            true
        }
        Err(e) => {
            tracing::warn!("host route/neighbour dump failed: {e}");
            false
        }
    }
}

async fn run(state: Arc<HostState>, mut resolve: mpsc::UnboundedReceiver<(u32, IpAddr)>) {
    let groups = [
        MulticastGroup::Link,
        MulticastGroup::Ipv4Ifaddr,
        MulticastGroup::Ipv6Ifaddr,
        MulticastGroup::Ipv4Route,
        MulticastGroup::Ipv6Route,
        MulticastGroup::Neigh,
    ];
    loop {
        let (conn, _handle, mut messages) = match new_multicast_connection(&groups) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("rtnetlink connection for host state failed: {e}");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let conn = tokio::spawn(conn);
        // Subscribed before dumping: nothing falls in between.
        let mut healthy = resync(&state).await;
        while healthy {
            tokio::select! {
                m = messages.next() => match m {
                    None => healthy = false,
                    Some((msg, _)) => {
                        if matches!(msg.payload, NetlinkPayload::Overrun(_)) {
                            tracing::warn!("rtnetlink overrun on host state; resubscribing");
                            healthy = false;
                            continue;
                        }
                        // What else is ready is part of the same change.
                        while let Some(Some(_)) = messages.next().now_or_never() {}
                        healthy = resync(&state).await;
                    }
                },
                r = resolve.recv() => match r {
                    None => {
                        conn.abort();
                        return;
                    }
                    Some((ifindex, addr)) => {
                        if let Err(e) = solicit(ifindex, addr).await {
                            tracing::warn!(%addr, ifindex, "neighbour solicitation request failed: {e}");
                        }
                    }
                },
            }
        }
        conn.abort();
        tokio::time::sleep(RETRY).await;
    }
}

#[cfg(test)]
mod tests;

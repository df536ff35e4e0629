//! The OpenFlow side of a switch with several bridges
//! ([`ofproto::bridges`]): each bridge has its own server (its management
//! socket, controllers, fail mode and datapath id); a connection sees its
//! bridge's tables through [`BridgeGuard`]; packet-ins go to the server of
//! the bridge whose pipeline sent them ([`OfBridges`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use ofproto::{Bridge, BridgeNo};

/// Bridge `no` of a guard on the switch's bridges (all under one lock).
/// A bridge deleted while a connection of its own was being served reads
/// as an empty bridge, and changes to it go nowhere.
pub struct BridgeGuard<G> {
    g: G,
    no: BridgeNo,
    gone: Option<Box<Bridge>>,
}

impl<G: std::ops::Deref<Target = Bridge>> BridgeGuard<G> {
    pub fn new(g: G, no: BridgeNo) -> Self {
        let gone = g.sub(no).is_none().then(|| Box::new(Bridge::new()));
        BridgeGuard { g, no, gone }
    }
}

impl<G: std::ops::Deref<Target = Bridge>> std::ops::Deref for BridgeGuard<G> {
    type Target = Bridge;

    fn deref(&self) -> &Bridge {
        match &self.gone {
            Some(b) => b,
            None => self.g.sub(self.no).unwrap_or(&*self.g),
        }
    }
}

impl<G: std::ops::DerefMut<Target = Bridge>> std::ops::DerefMut for BridgeGuard<G> {
    fn deref_mut(&mut self) -> &mut Bridge {
        match &mut self.gone {
            Some(b) => b,
            None => {
                let no = self.no;
                // Present at construction, and the lock held since.
                if self.g.sub(no).is_some() {
                    self.g.sub_mut(no).expect("the bridge is there")
                } else {
                    &mut self.g
                }
            }
        }
    }
}

/// The servers of the bridges other than the main one, by bridge, as the
/// main server's packet-in distributor reaches them.
pub struct OfBridges<S>(Arc<Mutex<BTreeMap<BridgeNo, Weak<S>>>>);

impl<S> Clone for OfBridges<S> {
    fn clone(&self) -> Self {
        OfBridges(Arc::clone(&self.0))
    }
}

impl<S> Default for OfBridges<S> {
    fn default() -> Self {
        OfBridges(Arc::default())
    }
}

impl<S> OfBridges<S> {
    pub fn insert(&self, no: BridgeNo, s: &Arc<S>) {
        self.lock().insert(no, Arc::downgrade(s));
    }

    pub fn remove(&self, no: BridgeNo) {
        self.lock().remove(&no);
    }

    /// Bridge `no`'s server, while it runs.
    pub fn get(&self, no: BridgeNo) -> Option<Arc<S>> {
        self.lock().get(&no)?.upgrade()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<BridgeNo, Weak<S>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_reaches_its_own_bridge_and_a_deleted_one_changes_nothing() {
        let mut main = Bridge::new();
        let ex = main.add_bridge().expect("room");
        main.sub_mut(ex)
            .expect("ex")
            .add_port(ofproto::PortInfo::new(megaflow::PortNo(3), "p3"));
        {
            let g = BridgeGuard::new(&mut main, ex);
            assert_eq!(g.ports().len(), 1);
        }
        {
            let g = BridgeGuard::new(&mut main, BridgeNo::MAIN);
            assert!(g.ports().is_empty());
        }
        assert!(main.remove_bridge(ex));
        let mut g = BridgeGuard::new(&mut main, ex);
        g.add_port(ofproto::PortInfo::new(megaflow::PortNo(9), "p9"));
        drop(g);
        assert!(main.ports().get(megaflow::PortNo(9)).is_none());
    }
}

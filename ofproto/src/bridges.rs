//! More than one bridge in a switch, joined by patch ports, as
//! `ovs-vswitchd` runs `br-int` beside OVN's provider bridges.
//!
//! As in Open vSwitch (`ofproto-dpif-xlate.c`, `patch_port_output`), the
//! bridges share one datapath: their ports are numbered in one space (an
//! OpenFlow port number is its datapath port number), and a packet sent
//! to a patch port is not a datapath output: translation goes on in the
//! peer's bridge, received on the peer port, with its metadata, registers,
//! tunnel and tracking state cleared, then comes back to the rest of the
//! sender's actions with the packet as it was. One megaflow (one FDB rule)
//! therefore carries a packet across every bridge it crosses.
//!
//! The bridge the switch was made with is [`BridgeNo::MAIN`]; the others
//! live inside it ([`Bridge::add_bridge`]), so one lock covers them all and
//! a translation reads any of them. Each has its own tables, groups, MAC
//! table, ports and fail mode; the recirculation ids, the underlay and the
//! generations a megaflow is checked against are the switch's.

use megaflow::PortNo;

use crate::bridge::Bridge;

/// A bridge of the switch: 0 the main one, then the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BridgeNo(pub u8);

impl BridgeNo {
    pub const MAIN: BridgeNo = BridgeNo(0);
}

impl std::fmt::Display for BridgeNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bridge {}", self.0)
    }
}

/// Most bridges a switch holds (the main one included).
pub const MAX_BRIDGES: usize = 255;

impl Bridge {
    /// Adds an empty bridge (no ports, no rules, not fail-open) beside
    /// this one, sharing its recirculation ids and underlay; its number,
    /// or `None` when [`MAX_BRIDGES`] exist.
    pub fn add_bridge(&mut self) -> Option<BridgeNo> {
        let mut b = self.sibling();
        b.groups_mut()
            .set_dp_hash_default(self.groups().dp_hash_default());
        let slot = match self.others.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.others.len() + 1 < MAX_BRIDGES => {
                self.others.push(None);
                self.others.len() - 1
            }
            None => return None,
        };
        self.others[slot] = Some(b);
        Some(BridgeNo(slot as u8 + 1))
    }

    /// Deletes bridge `no` (never the main one) with its tables and ports
    /// (a patch port elsewhere that led to it leads nowhere now); whether
    /// it was there.
    pub fn remove_bridge(&mut self, no: BridgeNo) -> bool {
        if no == BridgeNo::MAIN {
            return false;
        }
        let Some(slot) = self.others.get_mut(usize::from(no.0) - 1) else {
            return false;
        };
        match slot.take() {
            Some(b) => {
                // Its generations stay counted (the sums never go back),
                // and its going is a change of tables and ports.
                self.retired.add(&b.generations());
                self.retired.tables += 1;
                self.retired.ports += 1;
                true
            }
            None => false,
        }
    }

    /// Bridge `no` (this one for [`BridgeNo::MAIN`]).
    pub fn sub(&self, no: BridgeNo) -> Option<&Bridge> {
        match no.0 {
            0 => Some(self),
            n => self.others.get(usize::from(n) - 1)?.as_ref(),
        }
    }

    /// Bridge `no`, to change.
    pub fn sub_mut(&mut self, no: BridgeNo) -> Option<&mut Bridge> {
        match no.0 {
            0 => Some(self),
            n => self.others.get_mut(usize::from(n) - 1)?.as_mut(),
        }
    }

    /// The other bridges and their numbers.
    pub fn others(&self) -> impl Iterator<Item = (BridgeNo, &Bridge)> + '_ {
        self.others
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((BridgeNo(i as u8 + 1), b.as_ref()?)))
    }

    /// Removes the rules and MAC entries of every bridge whose time has
    /// come; the rules removed, each with its bridge.
    pub fn expire(&mut self, now: megaflow::Timestamp) -> Vec<crate::table::RemovedRule> {
        let mut out = self.tables.expire(now);
        self.mac.expire(now);
        for (i, b) in self.others.iter_mut().enumerate() {
            let Some(b) = b else {
                continue;
            };
            b.mac.expire(now);
            out.extend(b.tables.expire(now).into_iter().map(|mut r| {
                r.bridge = BridgeNo(i as u8 + 1);
                r
            }));
        }
        out
    }

    /// Adds the flows `learn` actions built ([`crate::learn`]), each to its
    /// bridge: a flow the table has already, the same, is refreshed (its
    /// idle timer restarted), not replaced, so that learning what is known
    /// changes nothing else (no megaflow is revalidated for it).
    pub fn learn_flows(&mut self, flows: &[(BridgeNo, crate::FlowMod)], now: megaflow::Timestamp) {
        for (no, fm) in flows {
            let Some(b) = self.sub_mut(*no) else {
                continue;
            };
            let r = &fm.rule;
            let same = b.tables.table(r.table).and_then(|t| {
                let id = t.classifier().find_exact(&r.matched, r.priority)?;
                let have = t.rule(id)?;
                let alike = have.spec.instructions == r.instructions
                    && have.spec.cookie == r.cookie
                    && (have.spec.idle_timeout, have.spec.hard_timeout)
                        == (r.idle_timeout, r.hard_timeout);
                alike.then_some(crate::RuleRef {
                    bridge: BridgeNo::MAIN,
                    table: r.table,
                    id,
                    uid: have.uid,
                })
            });
            match same {
                Some(rr) => b.tables.credit(rr, 0, 0, now),
                // A table that refuses it (full, a bad table) learns
                // nothing; the packet went on as translated.
                None => {
                    let _ = b.apply_flow_mod(fm, now);
                }
            }
        }
    }

    /// The bridge port `no` is on (the main one for a port of none).
    pub fn home(&self, no: PortNo) -> (BridgeNo, &Bridge) {
        self.others()
            .find(|(_, b)| b.ports.get(no).is_some())
            .unwrap_or((BridgeNo::MAIN, self))
    }

    /// The bridge port `no` is on, to change (`None`: no bridge has it).
    pub(crate) fn home_mut(&mut self, no: PortNo) -> Option<&mut Bridge> {
        if self.ports.get(no).is_some() {
            return Some(self);
        }
        self.others
            .iter_mut()
            .flatten()
            .find(|b| b.ports.get(no).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::PortInfo;

    #[test]
    fn bridges_are_numbered_from_one_and_a_deleted_number_is_reused_while_generations_only_grow() {
        let mut br = Bridge::new();
        let a = br.add_bridge().expect("room");
        let b = br.add_bridge().expect("room");
        assert_eq!((a, b), (BridgeNo(1), BridgeNo(2)));
        br.sub_mut(b)
            .expect("b")
            .add_port(PortInfo::new(PortNo(7), "p7"));
        assert_eq!(br.home(PortNo(7)).0, b);
        assert_eq!(br.home(PortNo(8)).0, BridgeNo::MAIN);
        let before = br.generations();
        assert!(br.remove_bridge(a));
        assert!(!br.remove_bridge(a), "gone already");
        assert!(!br.remove_bridge(BridgeNo::MAIN), "the main bridge stays");
        assert!(br.sub(a).is_none());
        assert_eq!(br.add_bridge(), Some(a), "its number is free again");
        let after = br.generations();
        assert!(after.tables > before.tables && after.ports > before.ports);
        br.set_port_up(PortNo(7), false);
        assert!(!br.sub(b).expect("b").ports().get(PortNo(7)).expect("p7").up);
        assert!(br.remove_port(PortNo(7)).is_some());
        assert!(br.sub(b).expect("b").ports().is_empty());
    }
}

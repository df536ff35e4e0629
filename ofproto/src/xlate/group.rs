//! `group:N` and `clone(...)` during translation: each bucket (and a
//! clone's actions) runs on its own copy of the packet (the pipeline's view of the packet, its written bits and its
//! VLAN tags are put back after the bucket; the datapath's packet is put
//! back by the next commit, which re-sets every field a bucket changed).

use megaflow::{DpAction, Field, FlowKey};

use super::{Ctx, ETH_TYPE_IPV4, ETH_TYPE_IPV6};
use crate::group::{DpHashMap, Group, GroupType};
use crate::recirc::Step;
use crate::rule::OfAction;
use crate::table::RuleRef;

impl<'a> Ctx<'a> {
    /// Runs group `id`.
    pub(super) fn group(&mut self, id: u32) {
        let br: &'a crate::Bridge = self.br;
        let Some(g) = br.groups.get(id) else {
            self.note(|| format!("group:{id} skipped: no such group"));
            return;
        };
        self.rules.push(RuleRef {
            bridge: self.bi,
            ..g.credit_ref(None)
        });
        let n = g.spec.buckets.len();
        match g.spec.ty {
            GroupType::All => {
                for i in 0..n {
                    self.bucket(g, i);
                    if self.halted() {
                        return;
                    }
                }
            }
            GroupType::Indirect => (0..n.min(1)).for_each(|i| self.bucket(g, i)),
            GroupType::FastFailover => match (0..n).find(|&i| self.bucket_live(g, i)) {
                Some(i) => self.bucket(g, i),
                None => self.note(|| format!("group:{id}: no live bucket, dropped")),
            },
            GroupType::Select => {
                let picked = match &g.dp_hash {
                    Some(map) if self.in_bucket == 0 || self.hashed => {
                        match self.select_dp_hash(g, map) {
                            Some(pick) => pick,
                            // Hashed and recirculated: the next stage
                            // picks, and counts the packet in the group.
                            None => {
                                self.rules.pop();
                                return;
                            }
                        }
                    }
                    _ => self.select(g),
                };
                match picked {
                    Some(i) => self.bucket(g, i),
                    None => self.note(|| format!("group:{id}: no live bucket, dropped")),
                }
            }
        }
    }

    /// A bucket is live when it watches no port or its port is up.
    fn bucket_live(&self, g: &Group, i: usize) -> bool {
        match g.spec.buckets[i].watch_port {
            None => true,
            Some(p) => self.br.ports.get(p).is_some_and(|info| info.up),
        }
    }

    /// The SELECT bucket for this flow: highest random weight over the
    /// live buckets of non-zero weight, keyed by a symmetric hash of the
    /// flow's addresses and ports (both directions of a connection take
    /// the same bucket).
    fn select(&mut self, g: &Group) -> Option<usize> {
        let h = self.flow_hash();
        // Weighted rendezvous hashing: bucket i scores w_i / -ln(u_i) with
        // u_i uniform in (0, 1), which picks it with probability w_i / sum w.
        let score = |i: usize| {
            let r = mix(h ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            f64::from(g.spec.buckets[i].weight) / -u.ln()
        };
        (0..g.spec.buckets.len())
            .filter(|&i| g.spec.buckets[i].weight > 0 && self.bucket_live(g, i))
            .map(|i| (i, score(i)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// The bucket of a group that picks by `dp_hash`: once the packet's
    /// hash is known (an earlier stage computed it), the first live
    /// bucket from its value on in the map (the megaflow matches only the
    /// map's bits of `dp_hash`); before, the datapath hashes the packet
    /// and recirculates, and this group runs again at the next stage
    /// (`None`: the stage ends here).
    fn select_dp_hash(&mut self, g: &Group, map: &DpHashMap) -> Option<Option<usize>> {
        if !self.hashed {
            self.commit();
            self.out.push(DpAction::Hash {
                alg: map.alg,
                basis: map.basis,
            });
            self.hashed = true;
            let id = g.spec.id;
            self.note(|| {
                format!("group:{id}: dp_hash computed, the bucket is picked at the next stage")
            });
            self.freezing = Some(vec![Step::Action(OfAction::Group(id))]);
            return None;
        }
        let n = map.buckets.len();
        let h = self.read_bits(Field::DpHash, (n - 1) as u128) as usize;
        let pick = (0..n)
            .map(|k| usize::from(map.buckets[(h + k) & (n - 1)]))
            .find(|&i| self.bucket_live(g, i));
        Some(pick)
    }

    /// Ethernet addresses and type, IP addresses and protocol, L4 ports:
    /// read (un-wildcarded) as far as the packet has them.
    fn flow_hash(&mut self) -> u64 {
        let mut h = mix((self.read(Field::EthSrc) ^ self.read(Field::EthDst)) as u64
            ^ (self.read(Field::EthType) as u64) << 48);
        let l3 = match self.read(Field::EthType) {
            ETH_TYPE_IPV4 => Some((Field::Ipv4Src, Field::Ipv4Dst)),
            ETH_TYPE_IPV6 => Some((Field::Ipv6Src, Field::Ipv6Dst)),
            _ => None,
        };
        if let Some((s, d)) = l3 {
            let a = self.read(s) ^ self.read(d);
            h = mix(h ^ a as u64 ^ (a >> 64) as u64);
            let proto = self.read(Field::IpProto);
            h = mix(h ^ proto as u64);
            if matches!(proto, 6 | 17 | 132) {
                let p = self.read(Field::TpSrc) ^ self.read(Field::TpDst);
                h = mix(h ^ p as u64);
            }
        }
        h
    }

    /// Runs bucket `i` of `g` on a copy of the packet.
    fn bucket(&mut self, g: &'a Group, i: usize) {
        self.note(|| format!("group:{} bucket {i}", g.spec.id));
        self.rules.push(RuleRef {
            bridge: self.bi,
            ..g.credit_ref(Some(i))
        });
        self.on_copy(|ctx| {
            for a in &g.spec.buckets[i].actions {
                ctx.action(a);
                if ctx.halted() {
                    break;
                }
            }
        });
    }

    /// Runs `f` on a copy of the packet and of the pipeline's state (a
    /// group bucket, a `clone`): afterwards the fields, written bits,
    /// VLAN tags and stack are as before, and the datapath's packet is
    /// put back by the next commit.
    pub(super) fn on_copy(&mut self, f: impl FnOnce(&mut Self)) {
        let flow: FlowKey = self.flow;
        let stack = self.stack.clone();
        let written = self.wc.written();
        let tags = self.vlan_snapshot();
        let (dirty, committed, touched) = (self.dirty, self.committed, self.touched);
        self.committed = 0;
        self.touched = 0;
        self.depth += 1;
        self.in_bucket += 1;
        f(self);
        self.in_bucket -= 1;
        self.depth -= 1;
        self.flow = flow;
        self.stack = stack;
        self.wc.restore_written(written);
        self.vlan_restore(tags);
        // The datapath's packet differs from the restored one in the
        // fields the bucket changed and emitted; fields pending before the
        // bucket and emitted in it (unchanged) are done.
        let changed = self.committed & self.touched;
        self.dirty = (dirty & !self.committed) | changed;
        self.committed |= committed;
        self.touched |= touched;
    }
}

/// A 64-bit finaliser (SplitMix64's).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

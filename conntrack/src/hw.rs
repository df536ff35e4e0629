//! What the FDB's conntrack table needs from the tracker.
//!
//! An established connection's packets may pass a hardware CT table that
//! matches a direction's tuple in its zone, rewrites it as NAT would, and
//! writes the state software would give them. The tracker decides which
//! connections may go there ([`Tracker::hw_view`]: established TCP on
//! both sides, or UDP that has seen a reply), hears of those the slow path
//! saw pass an offloaded `ct()` stage ([`Tracker::offer`],
//! [`Tracker::take_offers`]), keeps them alive while hardware forwards
//! them ([`Tracker::hw_used`], after which their TCP segments are tracked
//! without sequence checks: the tracker no longer sees them all), and
//! gives a packet that missed after the CT table the state the table gave
//! it ([`Tracker::restore_meta`]).

use std::sync::atomic::Ordering::Relaxed;

use crate::nat::NAT_NONE;
use crate::packet;
use crate::state::{EST, RPL, TRK};
use crate::table::{nat_bit, Conn, Proto, Tracker, OTHER_BIDIR};
use crate::timeout::Class;
use crate::tuple::Tuple;
use crate::CtMeta;

/// `Conn::hw` bits: the original, the reply direction offered.
const OFFERED: [u8; 2] = [1, 2];
/// `Conn::hw` bit: hardware forwarded some of its packets.
pub(crate) const LIBERAL: u8 = 4;

/// The most offers waiting for the offload thread; more are dropped (and
/// offered again by a later packet: their bit is not kept).
pub const OFFERS_MAX: usize = 4096;

/// A connection direction the slow path saw pass an offloaded `ct()`
/// stage established: a candidate for the FDB's CT table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Offer {
    pub zone: u16,
    /// The connection's original tuple.
    pub orig: Tuple,
    /// The reply direction (its packets carry the reply tuple).
    pub reply: bool,
    /// The `ct()` asked for NAT.
    pub nat: bool,
}

/// One direction of a connection as the CT table does it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwView {
    /// The tuple its packets arrive with.
    pub tuple: Tuple,
    /// The tuple they leave with, when `ct(nat)` translates them.
    pub rewrite: Option<Tuple>,
    /// What tracking writes into their metadata.
    pub meta: CtMeta,
}

impl Tracker {
    /// The CT-table view of direction `reply` of the connection whose
    /// original tuple is `orig` in `zone`, through a `ct()` that asks
    /// (`nat`) or not for NAT. `None` unless hardware may take it: TCP
    /// established on both sides, or UDP that has seen a reply.
    pub fn hw_view(
        &self,
        zone: u16,
        orig: &Tuple,
        reply: bool,
        nat: bool,
        now: u64,
    ) -> Option<HwView> {
        let (g, _, idx, found_reply) = self.locate(zone, orig, now)?;
        let c = g.conns[idx as usize].as_ref()?;
        if found_reply || c.key[0] != *orig {
            return None;
        }
        let eligible = match &c.proto {
            Proto::Tcp(t) => t.established(),
            Proto::Other(st) => orig.proto == 17 && *st == OTHER_BIDIR,
            Proto::Icmp(_) => false,
        };
        if !eligible {
            return None;
        }
        let d = reply as usize;
        let translated = nat && c.nat != NAT_NONE;
        let mut state = TRK | EST | if reply { RPL } else { 0 };
        let rewrite = if translated {
            state |= nat_bit(c.nat, reply);
            c.key[1 - d].reverse()
        } else {
            None
        };
        Some(HwView {
            tuple: c.key[d],
            rewrite,
            meta: CtMeta {
                state,
                zone,
                mark: c.mark,
                label: c.label(),
                orig: c.key[0],
            },
        })
    }

    /// Offers direction `reply` of a connection to the offload thread,
    /// once: a direction already offered (and not forgotten since) is not
    /// queued again.
    pub fn offer(&self, zone: u16, orig: &Tuple, reply: bool, nat: bool, now: u64) {
        self.with_conn(zone, orig, now, |c| {
            let bit = OFFERED[reply as usize];
            if c.hw & bit != 0 {
                return;
            }
            let Some(mut q) = self.offers.try_lock() else {
                return;
            };
            if q.len() < OFFERS_MAX {
                c.hw |= bit;
                q.push(Offer {
                    zone,
                    orig: *orig,
                    reply,
                    nat,
                });
                self.offered.store(true, Relaxed);
            }
        });
    }

    /// Moves the waiting offers into `out`.
    pub fn take_offers(&self, out: &mut Vec<Offer>) {
        let mut q = self.offers.lock();
        self.offered.store(false, Relaxed);
        out.append(&mut q);
    }

    /// Whether offers may be waiting (one lock-free read: the offload
    /// thread asks before it takes the queue's lock).
    pub fn has_offers(&self) -> bool {
        self.offered.load(Relaxed)
    }

    /// Hardware no longer holds direction `reply` of the connection: a
    /// later packet may offer it again.
    pub fn hw_forget(&self, zone: u16, orig: &Tuple, reply: bool, now: u64) {
        self.with_conn(zone, orig, now, |c| c.hw &= !OFFERED[reply as usize]);
    }

    /// Hardware took a direction of the connection: from now on it
    /// forwards segments this tracker does not see, so the tracker checks
    /// the connection's TCP segments liberally (as Linux does a connection
    /// its flowtable took). False: the connection is gone.
    pub fn hw_taken(&self, zone: u16, orig: &Tuple, now: u64) -> bool {
        self.with_conn(zone, orig, now, |c| c.hw |= LIBERAL)
            .is_some()
    }

    /// Hardware forwarded packets of the connection since the last call:
    /// it lives on as if software had seen them (its established
    /// timeout), and its TCP segments are tracked liberally from now on.
    /// False: the connection is gone.
    pub fn hw_used(&self, zone: u16, orig: &Tuple, now: u64) -> bool {
        self.with_conn(zone, orig, now, |c| {
            c.hw |= LIBERAL;
            let class = match &c.proto {
                Proto::Tcp(t) if t.established() => Class::TcpEstablished,
                Proto::Other(st) if *st == OTHER_BIDIR => Class::OtherBidir,
                // Closing meanwhile: software's own packets set its timeout.
                _ => return,
            };
            c.expires = c.expires.max(now + self.timeouts.millis(zone, class));
            self.hw_refreshed.fetch_add(1, Relaxed);
        })
        .is_some()
    }

    /// Runs `f` on the connection whose original tuple is `orig` in
    /// `zone`, under its shard's lock; `None`: no such connection.
    fn with_conn<R>(
        &self,
        zone: u16,
        orig: &Tuple,
        now: u64,
        f: impl FnOnce(&mut Conn) -> R,
    ) -> Option<R> {
        let (mut g, _, idx, _) = self.locate(zone, orig, now)?;
        let c = g.conns[idx as usize].as_mut()?;
        (c.key[0] == *orig).then(|| f(c))
    }

    /// The tracking state the CT table gave a packet that then missed the
    /// next stage's table: the packet at `l3` of `frame` as it left the
    /// CT table (`translated`: rewritten by NAT there), in `zone`. `None`:
    /// no such connection now.
    pub fn restore_meta(
        &self,
        frame: &[u8],
        l3: usize,
        eth_type: u16,
        zone: u16,
        translated: bool,
        now: u64,
    ) -> Option<CtMeta> {
        let p = packet::parse(frame, l3, eth_type).ok()?;
        // A translated packet carries the other direction's view.
        let lookup = if translated {
            p.tuple.reverse()?
        } else {
            p.tuple
        };
        let (g, _, idx, found_reply) = self.locate(zone, &lookup, now)?;
        let c = g.conns[idx as usize].as_ref()?;
        let reply = found_reply ^ translated;
        let mut state = TRK | EST | if reply { RPL } else { 0 };
        if translated {
            state |= nat_bit(c.nat, reply);
        }
        Some(CtMeta {
            state,
            zone,
            mark: c.mark,
            label: c.label(),
            orig: c.key[0],
        })
    }

    /// Connections whose expiry hardware use refreshed, since start.
    pub fn hw_refreshes(&self) -> u64 {
        self.hw_refreshed.load(Relaxed)
    }
}

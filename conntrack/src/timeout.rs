//! Timeouts: which class a connection is in after each packet, the
//! seconds each class lasts, and timeout policies per zone.
//!
//! The classes and their defaults are Open vSwitch's userspace ones, and a
//! policy names them with the attribute names of its `CT_Timeout_Policy`
//! (`tcp_syn_sent`, ..., `icmp_reply`), including Open vSwitch's pairing of
//! internal classes to those names. Policies are shared by all datapath
//! threads: a zone maps to one of 256 policy slots (slot 0 the default),
//! read with two relaxed atomic loads per packet.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};

use parking_lot::Mutex;

/// A connection's timeout class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    TcpFirst,
    TcpOpening,
    TcpEstablished,
    TcpClosing,
    TcpFinWait,
    TcpClosed,
    OtherFirst,
    OtherMultiple,
    OtherBidir,
    IcmpFirst,
    IcmpReply,
}

pub const N_CLASSES: usize = 11;

/// Each class's policy attribute name and default in seconds.
pub const ATTRS: [(&str, u32); N_CLASSES] = [
    ("tcp_syn_sent", 30),
    ("tcp_syn_recv", 30),
    ("tcp_established", 86_400),
    ("tcp_fin_wait", 900),
    ("tcp_time_wait", 45),
    ("tcp_close", 30),
    ("udp_first", 60),
    ("udp_single", 60),
    ("udp_multiple", 30),
    ("icmp_first", 60),
    ("icmp_reply", 30),
];

/// A bad policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("unknown timeout attribute '{0}' (known: tcp_syn_sent, tcp_syn_recv, tcp_established, tcp_fin_wait, tcp_time_wait, tcp_close, udp_first, udp_single, udp_multiple, icmp_first, icmp_reply)")]
    UnknownAttr(String),
    #[error("timeout for '{0}' must be at least 1 second")]
    Zero(String),
    #[error("too many distinct timeout policies (at most 255 besides the default)")]
    Full,
}

const SLOTS: usize = 256;

pub(crate) struct Timeouts {
    zone_slot: Box<[AtomicU8]>,
    secs: Box<[[AtomicU32; N_CLASSES]]>,
    /// Slot use counts and contents, for assignment (control path only).
    admin: Mutex<Vec<(u32, [u32; N_CLASSES])>>,
}

impl Timeouts {
    pub(crate) fn new() -> Timeouts {
        let defaults = ATTRS.map(|(_, s)| s);
        let secs: Box<[[AtomicU32; N_CLASSES]]> =
            (0..SLOTS).map(|_| defaults.map(AtomicU32::new)).collect();
        let mut admin = vec![(0u32, defaults); SLOTS];
        admin[0].0 = u32::MAX;
        Timeouts {
            zone_slot: (0..=u16::MAX as usize).map(|_| AtomicU8::new(0)).collect(),
            secs,
            admin: Mutex::new(admin),
        }
    }

    /// Milliseconds a connection of `zone` in `class` lives from now.
    #[inline]
    pub(crate) fn millis(&self, zone: u16, class: Class) -> u64 {
        let slot = self.zone_slot[zone as usize].load(Relaxed) as usize;
        self.secs[slot][class as usize].load(Relaxed) as u64 * 1000
    }

    /// Parses `attr=secs` pairs over the defaults.
    pub(crate) fn policy(attrs: &[(&str, u32)]) -> Result<[u32; N_CLASSES], PolicyError> {
        let mut p = ATTRS.map(|(_, s)| s);
        for (name, secs) in attrs {
            let i = ATTRS
                .iter()
                .position(|(n, _)| n.eq_ignore_ascii_case(name))
                .ok_or_else(|| PolicyError::UnknownAttr(name.to_string()))?;
            if *secs == 0 {
                return Err(PolicyError::Zero(name.to_string()));
            }
            p[i] = *secs;
        }
        Ok(p)
    }

    /// Gives `zone` its own policy (`None`: back to the default). Connections
    /// take it at their next refresh.
    pub(crate) fn set_zone(
        &self,
        zone: u16,
        policy: Option<[u32; N_CLASSES]>,
    ) -> Result<(), PolicyError> {
        let mut admin = self.admin.lock();
        let old = self.zone_slot[zone as usize].load(Relaxed) as usize;
        let new = match policy {
            None => 0,
            Some(p) => match (1..SLOTS).find(|&i| admin[i].0 > 0 && admin[i].1 == p) {
                Some(i) => i,
                None => {
                    let i = (1..SLOTS).find(|&i| admin[i].0 == 0 || i == old && admin[i].0 == 1);
                    let i = i.ok_or(PolicyError::Full)?;
                    for (c, s) in p.iter().enumerate() {
                        self.secs[i][c].store(*s, Relaxed);
                    }
                    admin[i].1 = p;
                    i
                }
            },
        };
        if new != old {
            if new != 0 {
                admin[new].0 += 1;
            }
            if old != 0 {
                admin[old].0 -= 1;
            }
        }
        self.zone_slot[zone as usize].store(new as u8, Relaxed);
        Ok(())
    }

    /// Replaces the default policy (slot 0).
    pub(crate) fn set_default(&self, p: [u32; N_CLASSES]) {
        let mut admin = self.admin.lock();
        for (c, s) in p.iter().enumerate() {
            self.secs[0][c].store(*s, Relaxed);
        }
        admin[0].1 = p;
    }

    /// The policy `zone` uses.
    pub(crate) fn of_zone(&self, zone: u16) -> [u32; N_CLASSES] {
        let slot = self.zone_slot[zone as usize].load(Relaxed) as usize;
        std::array::from_fn(|c| self.secs[slot][c].load(Relaxed))
    }
}

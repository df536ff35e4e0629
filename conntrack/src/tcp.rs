//! TCP window tracking, as Linux `nf_conntrack` and Open vSwitch's
//! userspace tracker (both after Guido van Rooij's pf algorithm) do it.
//!
//! Each side (peer 0 the originator, peer 1 the responder) keeps the
//! highest sequence number it sent (`seqlo`), the highest the other side's
//! acks and window allow it to send (`seqhi`), its largest window and its
//! window scale. A segment is in window when its data fits between those
//! bounds and its ack is near what the other side sent; a segment that
//! fails gets a looser check that lets a tracker pick up a connection
//! mid-stream or see junk after close without breaking it; anything else
//! is invalid (`inv`), and the connection is left as it was.
//!
//! The states are the `CT_DPIF_TCPS_*` numbering (compared with `<`); like
//! Open vSwitch, only CLOSED, SYN_SENT, ESTABLISHED, CLOSING, FIN_WAIT_2
//! and TIME_WAIT are ever set.

use crate::packet::{TcpSeg, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
use crate::timeout::Class;

pub const CLOSED: u8 = 0;
pub const SYN_SENT: u8 = 2;
pub const SYN_RECV: u8 = 3;
pub const ESTABLISHED: u8 = 4;
pub const CLOSING: u8 = 7;
pub const FIN_WAIT_2: u8 = 9;
pub const TIME_WAIT: u8 = 10;

/// The state names, by number.
pub const STATE_NAMES: [&str; 11] = [
    "CLOSED",
    "LISTEN",
    "SYN_SENT",
    "SYN_RECV",
    "ESTABLISHED",
    "CLOSE_WAIT",
    "FIN_WAIT_1",
    "CLOSING",
    "LAST_ACK",
    "FIN_WAIT_2",
    "TIME_WAIT",
];

/// The window scale option was seen on this side's SYN.
const WS_FLAG: u8 = 0x80;
/// Picked up mid-stream: scaling unknown, be liberal.
const WS_UNKNOWN: u8 = 0x40;
const WS_SHIFT: u8 = 0x0f;
/// How far an ack may be from the other side's highest sequence number.
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;

/// What an update says about the packet and the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// Out of window or bad flags: `inv`, the connection unchanged.
    Invalid,
    /// In window.
    Valid,
    /// Valid, and the packet is still `new` (a retransmitted SYN).
    ValidNew,
    /// A SYN for a connection both sides have closed: the old connection
    /// goes and a new one starts with this packet.
    New,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peer {
    pub seqlo: u32,
    pub seqhi: u32,
    pub max_win: u16,
    pub wscale: u8,
    pub state: u8,
}

/// Both sides of a TCP connection: 24 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tcp {
    pub peers: [Peer; 2],
}

fn geq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

fn gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Flag combinations no stack sends.
pub fn invalid_flags(flags: u8) -> bool {
    let syn = flags & TCP_SYN != 0;
    let ack = flags & TCP_ACK != 0;
    let rst = flags & TCP_RST != 0;
    let fin = flags & TCP_FIN != 0;
    (syn && (rst || fin))
        || (!syn && !ack && !rst)
        || (!ack && flags & (TCP_FIN | 0x08 | 0x20) != 0)
}

/// Whether a segment may start tracking: valid flags and not a SYN-ACK
/// (a bare SYN, or an ACK or RST of a stream picked up mid-way).
pub fn valid_new(seg: &TcpSeg) -> bool {
    !invalid_flags(seg.flags) && seg.flags & (TCP_SYN | TCP_ACK) != (TCP_SYN | TCP_ACK)
}

fn div_ceil_shift(v: u32, shift: u8) -> u32 {
    if shift == 0 {
        v
    } else {
        v.div_ceil(1 << shift)
    }
}

impl Tcp {
    /// The connection as its first (originator's) segment starts it.
    pub fn new(seg: &TcpSeg) -> (Tcp, Class) {
        let mut t = Tcp::default();
        let syn = seg.flags & TCP_SYN != 0;
        let fin = seg.flags & TCP_FIN != 0;
        let src = &mut t.peers[0];
        src.seqlo = seg.seq;
        src.seqhi = seg
            .seq
            .wrapping_add(seg.len)
            .wrapping_add(1 + syn as u32 + fin as u32);
        if syn {
            src.wscale = seg.wscale.map(|w| w | WS_FLAG).unwrap_or(0);
        } else {
            src.wscale = WS_UNKNOWN;
            t.peers[1].wscale = WS_UNKNOWN;
        }
        let src = &mut t.peers[0];
        let win = div_ceil_shift((seg.win as u32).max(1), src.wscale & WS_SHIFT);
        src.max_win = win.min(u16::MAX as u32) as u16;
        src.state = SYN_SENT;
        t.peers[1].seqhi = 1;
        t.peers[1].max_win = 1;
        t.peers[1].state = CLOSED;
        (t, Class::TcpFirst)
    }

    /// Tracks one segment of an existing connection, sent by the responder
    /// when `reply`. `seq_check` false skips the window test (Open
    /// vSwitch's `ct-disable-tcp-seq-chk`). Returns the verdict and the
    /// timeout class to refresh to (`None`: keep the current expiry).
    pub fn update(
        &mut self,
        seg: &TcpSeg,
        reply: bool,
        seq_check: bool,
    ) -> (Update, Option<Class>) {
        let flags = seg.flags;
        if invalid_flags(flags) {
            return (Update::Invalid, None);
        }
        let (si, di) = if reply { (1, 0) } else { (0, 1) };
        let syn = flags & TCP_SYN != 0;
        let ack_set = flags & TCP_ACK != 0;
        let rst = flags & TCP_RST != 0;
        let fin = flags & TCP_FIN != 0;
        if syn && !ack_set {
            if self.peers[si].state >= FIN_WAIT_2 && self.peers[di].state >= FIN_WAIT_2 {
                self.peers[si].state = CLOSED;
                self.peers[di].state = CLOSED;
                return (Update::New, None);
            }
            if self.peers[si].state <= SYN_SENT {
                self.peers[si].state = SYN_SENT;
                return (Update::ValidNew, Some(Class::TcpFirst));
            }
        }
        let (mut src, mut dst) = (self.peers[si], self.peers[di]);
        let (mut sws, mut dws) = (0u8, 0u8);
        if !syn {
            if src.wscale & WS_FLAG != 0 && dst.wscale & WS_FLAG != 0 {
                sws = src.wscale & WS_SHIFT;
                dws = dst.wscale & WS_SHIFT;
            } else if src.wscale & WS_UNKNOWN != 0 && dst.wscale & WS_UNKNOWN != 0 {
                sws = 14;
                dws = 14;
            }
        }
        let mut win = seg.win as u32;
        let orig_seq = seg.seq;
        let mut seq = seg.seq;
        let mut ack = seg.ack;
        let mut end;
        let mut check_ackskew = true;
        if src.state < SYN_SENT {
            // The first segment from this side (the responder's SYN-ACK).
            end = seq.wrapping_add(seg.len).wrapping_add(syn as u32);
            if syn && dst.wscale & WS_FLAG != 0 {
                src.wscale = seg.wscale.map(|w| w | WS_FLAG).unwrap_or(0);
                if src.wscale & WS_FLAG != 0 {
                    sws = src.wscale & WS_SHIFT;
                    win = div_ceil_shift(win, sws);
                    dws = dst.wscale & WS_SHIFT;
                } else {
                    // Only one side offered scaling: none is used.
                    let scaled = (dst.max_win as u32) << (dst.wscale & WS_SHIFT);
                    dst.max_win = scaled.min(u16::MAX as u32) as u16;
                    dst.wscale = 0;
                }
            }
            end = end.wrapping_add(fin as u32);
            src.seqlo = seq;
            src.state = SYN_SENT;
            let w = end.wrapping_add(((dst.max_win as u32) << dws).max(1));
            if src.seqhi == 1 || geq(w, src.seqhi) {
                src.seqhi = w;
                check_ackskew = false;
            }
            src.max_win = src.max_win.max(win.min(u16::MAX as u32) as u16);
        } else {
            end = seq
                .wrapping_add(seg.len)
                .wrapping_add(syn as u32 + fin as u32);
        }
        if !ack_set || (ack == 0 && rst) {
            ack = dst.seqlo;
        }
        if seq == end {
            seq = src.seqlo;
            end = src.seqlo;
        }
        let ackskew = if check_ackskew {
            dst.seqlo.wrapping_sub(ack) as i32 as i64
        } else {
            0
        };
        let dst_win = (dst.max_win as u32) << dws;
        let strict = geq(src.seqhi, end)
            && geq(seq, src.seqlo.wrapping_sub(dst_win))
            && ackskew >= -MAX_ACK_WINDOW
            && ackskew <= (MAX_ACK_WINDOW << sws)
            && (!rst
                || orig_seq == src.seqlo
                || orig_seq == src.seqlo.wrapping_add(1)
                || orig_seq.wrapping_add(1) == src.seqlo);
        let advance = |src: &mut Peer, dst: &mut Peer| {
            src.max_win = src.max_win.max(win.min(u16::MAX as u32) as u16);
            if gt(end, src.seqlo) {
                src.seqlo = end;
            }
            let w = win << sws;
            if geq(ack.wrapping_add(w), dst.seqhi) {
                dst.seqhi = ack.wrapping_add(w.max(1));
            }
        };
        let verdict = if strict || !seq_check {
            advance(&mut src, &mut dst);
            if syn && src.state < SYN_SENT {
                src.state = SYN_SENT;
            }
            if fin && src.state < CLOSING {
                src.state = CLOSING;
            }
            if ack_set {
                if dst.state == SYN_SENT {
                    dst.state = ESTABLISHED;
                } else if dst.state == CLOSING {
                    dst.state = FIN_WAIT_2;
                }
            }
            if rst {
                src.state = TIME_WAIT;
                dst.state = TIME_WAIT;
            }
            let class = if src.state >= FIN_WAIT_2 && dst.state >= FIN_WAIT_2 {
                Class::TcpClosed
            } else if src.state >= CLOSING && dst.state >= CLOSING {
                Class::TcpFinWait
            } else if src.state < ESTABLISHED || dst.state < ESTABLISHED {
                Class::TcpOpening
            } else if src.state >= CLOSING || dst.state >= CLOSING {
                Class::TcpClosing
            } else {
                Class::TcpEstablished
            };
            (Update::Valid, Some(class))
        } else if (dst.state < SYN_SENT || dst.state >= FIN_WAIT_2 || src.state >= FIN_WAIT_2)
            && geq(src.seqhi.wrapping_add(MAX_ACK_WINDOW as u32), end)
            && geq(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW as u32))
        {
            advance(&mut src, &mut dst);
            if fin && src.state < CLOSING {
                src.state = CLOSING;
            }
            if rst {
                src.state = TIME_WAIT;
                dst.state = TIME_WAIT;
            }
            (Update::Valid, None)
        } else {
            return (Update::Invalid, None);
        };
        self.peers[si] = src;
        self.peers[di] = dst;
        verdict
    }

    /// The state `dump-conntrack` prints: the later of the two, with
    /// FIN_WAIT_2 shown as TIME_WAIT and SYN_RECV as ESTABLISHED.
    pub fn coalesced_state(&self) -> u8 {
        match self.peers[0].state.max(self.peers[1].state) {
            FIN_WAIT_2 => TIME_WAIT,
            SYN_RECV => ESTABLISHED,
            s => s,
        }
    }

    /// Both sides established and neither closing: what hardware may take.
    pub fn established(&self) -> bool {
        self.peers.iter().all(|p| p.state == ESTABLISHED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> TcpSeg {
        TcpSeg {
            seq,
            ack,
            win: 64240,
            flags,
            len,
            wscale: if flags & TCP_SYN != 0 { Some(7) } else { None },
        }
    }

    /// A handshake, data both ways, and a close, as Linux sends them.
    fn handshake() -> Tcp {
        let (mut t, c) = Tcp::new(&seg(TCP_SYN, 1000, 0, 0));
        assert_eq!(c, Class::TcpFirst);
        assert_eq!(
            t.update(&seg(TCP_SYN | TCP_ACK, 5000, 1001, 0), true, true)
                .0,
            Update::Valid
        );
        assert_eq!(t.peers[0].state, ESTABLISHED);
        let (u, c) = t.update(&seg(TCP_ACK, 1001, 5001, 0), false, true);
        assert_eq!((u, c), (Update::Valid, Some(Class::TcpEstablished)));
        t
    }

    #[test]
    fn a_handshake_data_and_close_walk_the_states() {
        let mut t = handshake();
        assert!(t.established());
        assert_eq!(
            t.update(&seg(TCP_ACK, 1001, 5001, 500), false, true).0,
            Update::Valid
        );
        assert_eq!(
            t.update(&seg(TCP_ACK, 5001, 1501, 1000), true, true).0,
            Update::Valid
        );
        let (u, c) = t.update(&seg(TCP_FIN | TCP_ACK, 1501, 6001, 0), false, true);
        assert_eq!((u, c), (Update::Valid, Some(Class::TcpClosing)));
        assert_eq!(t.coalesced_state(), CLOSING);
        let (u, c) = t.update(&seg(TCP_FIN | TCP_ACK, 6001, 1502, 0), true, true);
        assert_eq!((u, c), (Update::Valid, Some(Class::TcpFinWait)));
        let (u, c) = t.update(&seg(TCP_ACK, 1502, 6002, 0), false, true);
        assert_eq!((u, c), (Update::Valid, Some(Class::TcpClosed)));
        assert_eq!(t.coalesced_state(), TIME_WAIT);
        // A new SYN on the closed pair reopens it.
        assert_eq!(
            t.update(&seg(TCP_SYN, 9000, 0, 0), false, true).0,
            Update::New
        );
    }

    #[test]
    fn data_far_outside_the_window_is_invalid_and_changes_nothing() {
        let mut t = handshake();
        let before = t;
        let (u, _) = t.update(&seg(TCP_ACK, 1001 + 50_000_000, 5001, 100), false, true);
        assert_eq!(u, Update::Invalid);
        assert_eq!(t, before);
        // With the check off, the same segment passes.
        assert_eq!(
            t.update(&seg(TCP_ACK, 1001 + 50_000_000, 5001, 100), false, false)
                .0,
            Update::Valid
        );
    }

    #[test]
    fn an_ack_for_data_never_sent_is_invalid() {
        let mut t = handshake();
        assert_eq!(
            t.update(&seg(TCP_ACK, 1001, 5001 + 10_000_000, 0), false, true)
                .0,
            Update::Invalid
        );
    }

    #[test]
    fn a_retransmitted_syn_is_still_new_and_a_syn_ack_cannot_start() {
        let (mut t, _) = Tcp::new(&seg(TCP_SYN, 1000, 0, 0));
        assert_eq!(
            t.update(&seg(TCP_SYN, 1000, 0, 0), false, true),
            (Update::ValidNew, Some(Class::TcpFirst))
        );
        assert!(!valid_new(&seg(TCP_SYN | TCP_ACK, 1, 1, 0)));
        assert!(valid_new(&seg(TCP_ACK, 1, 1, 0)));
    }

    #[test]
    fn impossible_flags_are_invalid() {
        for f in [TCP_SYN | TCP_RST, TCP_SYN | TCP_FIN, 0, TCP_FIN, 0x08] {
            assert!(invalid_flags(f), "{f:#x}");
        }
        for f in [
            TCP_SYN,
            TCP_RST,
            TCP_ACK,
            TCP_ACK | TCP_FIN,
            TCP_RST | TCP_ACK,
        ] {
            assert!(!invalid_flags(f), "{f:#x}");
        }
    }

    #[test]
    fn an_rst_in_window_closes_both_sides() {
        let mut t = handshake();
        assert_eq!(
            t.update(&seg(TCP_RST, 1001, 0, 0), false, true).0,
            Update::Valid
        );
        assert_eq!(t.coalesced_state(), TIME_WAIT);
    }

    #[test]
    fn an_rst_with_a_wrong_sequence_number_is_invalid() {
        let mut t = handshake();
        assert_eq!(
            t.update(&seg(TCP_RST, 1001 + 30_000, 0, 0), false, true).0,
            Update::Invalid
        );
        assert!(t.established());
    }
}

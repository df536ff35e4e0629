//! Fast frame writing for the demo workload.
//!
//! [`megaflow::frame::FrameSpec::build`] allocates a vector and checksums
//! the whole payload for every frame, which at 1 514 bytes costs more than
//! the rest of the generator together. These writers produce the same bytes
//! (same IPv4 header, same payload pattern, same checksums, same padding to
//! 60 bytes; the tests compare them) into a reused buffer, taking the
//! payload from a constant and its checksum contribution from a table of
//! prefix sums. They add what the demo needs and `FrameSpec` lacks: TCP
//! sequence and acknowledgement numbers, window and options.

use megaflow::frame::checksum;

/// Longest payload the tables cover.
pub(super) const MAX_PAYLOAD: usize = 2048;

/// The payload bytes `FrameSpec::build` writes: byte `i` is `i * 31 + 7`.
const PATTERN: [u8; MAX_PAYLOAD] = {
    let mut p = [0u8; MAX_PAYLOAD];
    let mut i = 0;
    while i < MAX_PAYLOAD {
        p[i] = (i as u8).wrapping_mul(31).wrapping_add(7);
        i += 1;
    }
    p
};

/// `WORD_SUMS[w]`: sum of the first `w` big-endian 16-bit words of the
/// pattern (at most 1 024 * 65 535: fits).
const WORD_SUMS: [u32; MAX_PAYLOAD / 2 + 1] = {
    let mut s = [0u32; MAX_PAYLOAD / 2 + 1];
    let mut w = 0;
    while w < MAX_PAYLOAD / 2 {
        let word = ((PATTERN[2 * w] as u32) << 8) | PATTERN[2 * w + 1] as u32;
        s[w + 1] = s[w] + word;
        w += 1;
    }
    s
};

/// The unfolded one's complement sum of the first `len` pattern bytes (an
/// odd last byte counts as a high byte), as `megaflow::frame::sum16` gives.
fn payload_sum(len: usize) -> u32 {
    let len = len.min(MAX_PAYLOAD);
    let mut s = WORD_SUMS[len / 2];
    if len % 2 == 1 {
        s += u32::from(PATTERN[len - 1]) << 8;
    }
    s
}

pub(super) const ETH_BROADCAST: u64 = 0xffff_ffff_ffff;

/// TCP flag bits.
pub(super) const FIN: u16 = 0x001;
pub(super) const SYN: u16 = 0x002;
pub(super) const PSH: u16 = 0x008;
pub(super) const ACK: u16 = 0x010;

/// Addresses of a frame.
#[derive(Clone, Copy, Debug)]
pub(super) struct Addrs {
    pub src_mac: u64,
    pub dst_mac: u64,
    pub src_ip: u32,
    pub dst_ip: u32,
}

/// A TCP header's variable part.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tcp<'a> {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    /// Options, a multiple of 4 bytes, at most 40.
    pub options: &'a [u8],
}

/// Writes Ethernet and IPv4 headers (TOS 0, id 0, DF, TTL 64) for an L4
/// segment of `l4_len` bytes.
fn eth_ipv4(buf: &mut Vec<u8>, a: &Addrs, proto: u8, l4_len: usize) {
    let mut h = [0u8; 34];
    h[0..6].copy_from_slice(&a.dst_mac.to_be_bytes()[2..]);
    h[6..12].copy_from_slice(&a.src_mac.to_be_bytes()[2..]);
    h[12] = 0x08;
    h[14] = 0x45;
    // Callers keep l4_len below 65 515.
    h[16..18].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
    h[20] = 0x40;
    h[22] = 64;
    h[23] = proto;
    h[26..30].copy_from_slice(&a.src_ip.to_be_bytes());
    h[30..34].copy_from_slice(&a.dst_ip.to_be_bytes());
    let c = checksum(0, &h[14..34]);
    h[24..26].copy_from_slice(&c.to_be_bytes());
    buf.extend_from_slice(&h);
}

/// The pseudo-header sum of an IPv4 segment.
fn pseudo(a: &Addrs, proto: u8, l4_len: usize) -> u32 {
    (a.src_ip >> 16)
        + (a.src_ip & 0xffff)
        + (a.dst_ip >> 16)
        + (a.dst_ip & 0xffff)
        + u32::from(proto)
        + l4_len as u32
}

/// Appends the payload and pads the frame to 60 bytes.
fn finish(buf: &mut Vec<u8>, payload: usize) {
    buf.extend_from_slice(&PATTERN[..payload]);
    if buf.len() < 60 {
        buf.resize(60, 0);
    }
}

/// Replaces `buf` with an Ethernet/IPv4/TCP frame with `payload` pattern
/// bytes (at most [`MAX_PAYLOAD`]).
pub(super) fn tcp(buf: &mut Vec<u8>, a: &Addrs, t: &Tcp<'_>, payload: usize) {
    let payload = payload.min(MAX_PAYLOAD);
    let opt_len = t.options.len().min(40) & !3;
    let hdr_len = 20 + opt_len;
    let l4_len = hdr_len + payload;
    buf.clear();
    eth_ipv4(buf, a, 6, l4_len);
    let mut h = [0u8; 60];
    h[0..2].copy_from_slice(&t.sport.to_be_bytes());
    h[2..4].copy_from_slice(&t.dport.to_be_bytes());
    h[4..8].copy_from_slice(&t.seq.to_be_bytes());
    h[8..12].copy_from_slice(&t.ack.to_be_bytes());
    let off_flags = ((hdr_len as u16 / 4) << 12) | (t.flags & 0x1ff);
    h[12..14].copy_from_slice(&off_flags.to_be_bytes());
    h[14..16].copy_from_slice(&t.window.to_be_bytes());
    h[20..hdr_len].copy_from_slice(&t.options[..opt_len]);
    // The header has an even length, so the payload's words line up.
    let c = checksum(pseudo(a, 6, l4_len) + payload_sum(payload), &h[..hdr_len]);
    h[16..18].copy_from_slice(&c.to_be_bytes());
    buf.extend_from_slice(&h[..hdr_len]);
    finish(buf, payload);
}

/// Replaces `buf` with an Ethernet/IPv4/UDP frame with `payload` pattern
/// bytes (at most [`MAX_PAYLOAD`]).
pub(super) fn udp(buf: &mut Vec<u8>, a: &Addrs, sport: u16, dport: u16, payload: usize) {
    let payload = payload.min(MAX_PAYLOAD);
    let l4_len = 8 + payload;
    buf.clear();
    eth_ipv4(buf, a, 17, l4_len);
    let mut h = [0u8; 8];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    let mut c = checksum(pseudo(a, 17, l4_len) + payload_sum(payload), &h);
    if c == 0 {
        c = 0xffff;
    }
    h[6..8].copy_from_slice(&c.to_be_bytes());
    buf.extend_from_slice(&h);
    finish(buf, payload);
}

/// Replaces `buf` with an ARP request (broadcast) from `mac`/`ip` for
/// `target_ip`, as [`megaflow::frame::arp_request`] builds it.
pub(super) fn arp_request(buf: &mut Vec<u8>, mac: u64, ip: u32, target_ip: u32) {
    arp(buf, 1, mac, ip, ETH_BROADCAST, 0, target_ip);
}

/// Replaces `buf` with the ARP reply of `mac`/`ip` to `to_mac`/`to_ip`.
pub(super) fn arp_reply(buf: &mut Vec<u8>, mac: u64, ip: u32, to_mac: u64, to_ip: u32) {
    arp(buf, 2, mac, ip, to_mac, to_mac, to_ip);
}

/// An Ethernet/ARP frame: `eth_dst`, opcode, sender, target.
fn arp(buf: &mut Vec<u8>, op: u8, sha: u64, spa: u32, eth_dst: u64, tha: u64, tpa: u32) {
    buf.clear();
    buf.extend_from_slice(&eth_dst.to_be_bytes()[2..]);
    buf.extend_from_slice(&sha.to_be_bytes()[2..]);
    buf.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, op]);
    buf.extend_from_slice(&sha.to_be_bytes()[2..]);
    buf.extend_from_slice(&spa.to_be_bytes());
    buf.extend_from_slice(&tha.to_be_bytes()[2..]);
    buf.extend_from_slice(&tpa.to_be_bytes());
    buf.resize(60, 0);
}

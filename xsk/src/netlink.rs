//! Attaching and detaching an XDP program with rtnetlink, the fallback for
//! kernels without BPF links for XDP (before 5.9): one hand-encoded
//! `RTM_SETLINK` request with a nested `IFLA_XDP` attribute, and its
//! `NLMSG_ERROR` acknowledgement (with the kernel's extended-ack message,
//! when it sends one).
//!
//! ```text
//! nlmsghdr   len u32 | type u16 = RTM_SETLINK | flags u16 = REQUEST|ACK | seq u32 | pid u32 = 0
//! ifinfomsg  family u8 = AF_UNSPEC | pad u8 | type u16 | index i32 | flags u32 | change u32
//! nlattr     IFLA_XDP | NLA_F_NESTED
//!   nlattr   IFLA_XDP_FD           i32  (-1 detaches)
//!   nlattr   IFLA_XDP_FLAGS        u32  (mode, UPDATE_IF_NOEXIST, REPLACE)
//!   nlattr   IFLA_XDP_EXPECTED_FD  i32  (only with XDP_FLAGS_REPLACE)
//! ```
//!
//! Everything is in host byte order, as netlink is.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys;

const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 0x2;
/// In an ack's flags: the original request's payload was not echoed.
const NLM_F_CAPPED: u16 = 0x100;
/// In an ack's flags: extended-ack attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
const SOL_NETLINK: i32 = 270;
const NETLINK_EXT_ACK: i32 = 11;

const NLMSG_HDRLEN: usize = 16;

/// XDP attach flags (linux/if_link.h).
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub const XDP_FLAGS_REPLACE: u32 = 1 << 4;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn put_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

/// What an `RTM_SETLINK` XDP request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpRequest {
    pub ifindex: u32,
    /// Program descriptor, -1 to detach.
    pub fd: i32,
    pub flags: u32,
    /// With `XDP_FLAGS_REPLACE`: only act if this program is the one
    /// attached.
    pub expected_fd: Option<i32>,
}

/// Encodes the request as one netlink message with sequence number `seq`.
pub fn encode_setlink_xdp(req: &XdpRequest, seq: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    // nlmsghdr; the length is patched at the end.
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // ifinfomsg
    m.push(libc::AF_UNSPEC as u8);
    m.push(0);
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&(req.ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // IFLA_XDP { ... }
    let mut nest = Vec::with_capacity(24);
    put_attr(&mut nest, IFLA_XDP_FD, &req.fd.to_ne_bytes());
    put_attr(&mut nest, IFLA_XDP_FLAGS, &req.flags.to_ne_bytes());
    if let Some(e) = req.expected_fd {
        put_attr(&mut nest, IFLA_XDP_EXPECTED_FD, &e.to_ne_bytes());
    }
    put_attr(&mut m, IFLA_XDP | NLA_F_NESTED, &nest);
    let len = m.len() as u32;
    m[..4].copy_from_slice(&len.to_ne_bytes());
    m
}

/// A negative acknowledgement (or a failure to talk to the kernel).
#[derive(Debug)]
pub struct NetlinkError {
    pub source: io::Error,
    /// The kernel's extended-ack message, e.g. "XDP program already
    /// attached".
    pub message: Option<String>,
}

impl fmt::Display for NetlinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(m) = &self.message {
            write!(f, " (kernel: {m})")?;
        }
        Ok(())
    }
}

impl NetlinkError {
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// The extended-ack message among the TLVs of an `NLMSG_ERROR` payload.
fn ext_ack_message(mut tlvs: &[u8]) -> Option<String> {
    while tlvs.len() >= 4 {
        let len = u16_at(tlvs, 0)? as usize;
        let ty = u16_at(tlvs, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > tlvs.len() {
            return None;
        }
        if ty == NLMSGERR_ATTR_MSG {
            let s = &tlvs[4..len];
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            return Some(String::from_utf8_lossy(&s[..end]).into_owned());
        }
        tlvs = tlvs.get(align4(len)..).unwrap_or(&[]);
    }
    None
}

/// Looks for the acknowledgement of request `seq` in one datagram:
/// `None` if there is none (read on), `Some(Ok)` for success,
/// `Some(Err)` with the errno and extended-ack message otherwise.
pub fn parse_ack(mut buf: &[u8], seq: u32) -> Option<Result<(), NetlinkError>> {
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0)? as usize;
        let ty = u16_at(buf, 4)?;
        let flags = u16_at(buf, 6)?;
        let mseq = u32_at(buf, 8)?;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return None;
        }
        let payload = &buf[NLMSG_HDRLEN..len];
        if ty == NLMSG_ERROR && mseq == seq {
            let err = u32_at(payload, 0)? as i32;
            if err == 0 {
                return Some(Ok(()));
            }
            // nlmsgerr: error, then the request's header, then (unless
            // capped) its payload, then the extended-ack TLVs.
            let orig_len = u32_at(payload, 4).unwrap_or(0) as usize;
            let mut tlv_off = 4 + NLMSG_HDRLEN;
            if flags & NLM_F_CAPPED == 0 {
                tlv_off = 4 + align4(orig_len.max(NLMSG_HDRLEN));
            }
            let message = if flags & NLM_F_ACK_TLVS != 0 {
                payload.get(tlv_off..).and_then(ext_ack_message)
            } else {
                None
            };
            return Some(Err(NetlinkError {
                source: io::Error::from_raw_os_error(err.saturating_neg()),
                message,
            }));
        }
        buf = buf.get(align4(len)..).unwrap_or(&[]);
    }
    None
}

static SEQ: AtomicU32 = AtomicU32::new(1);

fn io_err(source: io::Error) -> NetlinkError {
    NetlinkError {
        source,
        message: None,
    }
}

/// Sends `req` on a fresh `NETLINK_ROUTE` socket and waits (at most 2 s)
/// for its acknowledgement.
pub fn set_xdp(req: &XdpRequest) -> Result<(), NetlinkError> {
    let sock =
        sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE).map_err(io_err)?;
    // Extended acks are a nicety; old kernels refuse the option.
    let _ = sys::setsockopt(&sock, SOL_NETLINK, NETLINK_EXT_ACK, &1i32);
    sys::set_recv_timeout(&sock, 2).map_err(io_err)?;
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    sys::netlink_send(&sock, &encode_setlink_xdp(req, seq)).map_err(io_err)?;
    let mut buf = vec![0u8; 8192];
    loop {
        let n = sys::recv(&sock, &mut buf).map_err(io_err)?;
        if n == 0 {
            return Err(io_err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "netlink socket closed before the ack",
            )));
        }
        if let Some(r) = parse_ack(&buf[..n], seq) {
            return r;
        }
    }
}

#[cfg(test)]
#[path = "tests/netlink.rs"]
mod tests;

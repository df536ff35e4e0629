//! Datapath actions and their execution on a packet buffer.
//!
//! Purpose: [`DpAction`] is what a megaflow entry tells the datapath to do
//! with a packet, independent of OpenFlow (the pipeline translates its
//! actions into these) and of the NIC (the offload layer translates these
//! into its own). [`execute`] applies a list of them, in order, to one
//! packet buffer and hands every copy that leaves to an [`ActionSink`].
//!
//! Callers: the datapath threads run [`execute`] for each packet that hits
//! the megaflow cache, with the [`Layout`] that extraction produced; the
//! upcall path runs it for the packet that missed once its actions are known;
//! replay and tests use [`CollectSink`].
//!
//! Invariants:
//! - nothing here panics or reads out of bounds, whatever the bytes, the
//!   layout or the action list: every header access is length checked, and an
//!   action whose layer the packet lacks (setting an L4 port on ARP or on a
//!   later fragment, an IPv4 address on IPv6, ...) is skipped and counted in
//!   [`ExecOutcome::skipped`];
//! - checksums stay valid: a field rewrite updates the IPv4 header checksum
//!   and the TCP/UDP/ICMPv6 checksums it is part of (through the
//!   pseudo-header for addresses) incrementally (RFC 1624, eqn. 3), which
//!   gives the same bytes as a full recomputation when the checksum was
//!   valid before; a UDP checksum of zero ("none") stays zero, and a computed
//!   zero is written 0xffff; SCTP's CRC32c is patched by the difference of
//!   the CRCs before and after a port change, so a wrong CRC stays wrong;
//! - the [`Layout`] follows the bytes: VLAN push/pop shift `l3`, `l4` and
//!   `l3_end` by 4, so later actions and the caller see correct offsets.
//!
//! The header rewrites themselves live in [`edit`], public so that other
//! datapath models (the offload crate's NIC simulator) rewrite with the same
//! code.
//!
//! Thread-safety: [`Actions`] is an immutable `Arc` slice, cheap to clone
//! and to share between threads; [`execute`] is a function of its arguments
//! and the sink.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Deref;
use std::sync::Arc;

use crate::extract::Layout;
use crate::types::{MeterId, PortNo};

pub mod edit;

// The tests reach these through `use super::*`.
#[cfg(test)]
use crate::extract::{
    ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_QINQ, ETH_TYPE_VLAN, IP_PROTO_ICMPV6, IP_PROTO_SCTP,
    IP_PROTO_TCP, IP_PROTO_UDP, NO_OFFSET,
};
#[cfg(test)]
use edit::{crc32c, csum_update};

#[cfg(test)]
mod tests;

/// Why a packet is sent to userspace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UserspaceReason {
    /// A packet-in to the controller; at most `max_len` bytes of it go
    /// (execution always hands over the whole packet). What the packet-in
    /// says besides the packet: the table and cookie of the rule that sent
    /// it, whether that rule was the table's miss entry (reason NO_MATCH
    /// rather than ACTION), and the pipeline's metadata at that point.
    Controller {
        max_len: u16,
        table: u8,
        cookie: u64,
        miss: bool,
        metadata: u64,
        /// What a `controller(...)` action adds (its reason, controller,
        /// userdata) and the registers at that point; `None` for a plain
        /// `output:CONTROLLER` with every register zero.
        extra: Option<std::sync::Arc<ControllerExtra>>,
    },
    /// A sampled copy for flow monitoring (sFlow): what the exporter
    /// says about it besides the packet and its input port.
    Sample(SampleCookie),
    /// An explicit `userspace` action of the pipeline.
    Action,
    /// The flow needs processing the datapath cannot do.
    SlowPath,
}

impl UserspaceReason {
    /// A packet-in from an ACTION of table 0, cookie 0, no metadata.
    pub const fn controller(max_len: u16) -> UserspaceReason {
        UserspaceReason::Controller {
            max_len,
            table: 0,
            cookie: 0,
            miss: false,
            metadata: 0,
            extra: None,
        }
    }
}

/// What a packet-in carries besides the packet, table, cookie and
/// metadata: the `controller(...)` action's reason (`OFPR_*`, `None`:
/// NO_MATCH or ACTION as `miss` says), controller id and userdata, and
/// the pipeline's registers (`reg0`..`reg15`) when the action ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ControllerExtra {
    pub reason: Option<u8>,
    pub controller_id: u16,
    pub userdata: Vec<u8>,
    pub regs: [u32; 16],
    /// `controller(pause)`: the frozen state (a recirculation id) the
    /// pipeline goes on from when the controller sends the packet back
    /// (NXT_RESUME).
    pub continuation: Option<u32>,
    /// The bridge whose pipeline sent it (0: the main one) and, in another
    /// bridge, the input port there (a patch port), as its controllers see
    /// the packet.
    pub bridge: u8,
    pub in_port: Option<u32>,
}

impl fmt::Display for UserspaceReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserspaceReason::Controller {
                max_len,
                table,
                cookie,
                miss,
                metadata,
                extra,
            } => {
                write!(f, "controller(max_len={max_len}")?;
                if *table != 0 {
                    write!(f, ",table={table}")?;
                }
                if *cookie != 0 {
                    write!(f, ",cookie={cookie:#x}")?;
                }
                if *miss {
                    f.write_str(",miss")?;
                }
                if *metadata != 0 {
                    write!(f, ",metadata={metadata:#x}")?;
                }
                if let Some(x) = extra {
                    if let Some(r) = x.reason {
                        write!(f, ",reason={r}")?;
                    }
                    if x.controller_id != 0 {
                        write!(f, ",id={}", x.controller_id)?;
                    }
                    if !x.userdata.is_empty() {
                        f.write_str(",userdata=")?;
                        for (i, b) in x.userdata.iter().enumerate() {
                            write!(f, "{}{b:02x}", if i == 0 { "" } else { "." })?;
                        }
                    }
                }
                f.write_str(")")
            }
            UserspaceReason::Sample(c) => write!(f, "{c}"),
            UserspaceReason::Action => f.write_str("action"),
            UserspaceReason::SlowPath => f.write_str("slow_path"),
        }
    }
}

/// What a sampled copy carries to the sFlow exporter (Open vSwitch's
/// `user_action_cookie` of type sFlow): the rate it was sampled at and
/// where the packet itself went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SampleCookie {
    /// 1 packet in `rate` is sampled.
    pub rate: u32,
    pub output: SampleOutput,
}

impl SampleCookie {
    /// A cookie of `rate` whose output translation has not filled in.
    pub const fn new(rate: u32) -> SampleCookie {
        SampleCookie {
            rate,
            output: SampleOutput::Unknown,
        }
    }
}

/// Where a sampled packet went (sFlow's `output` of a flow sample).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleOutput {
    /// Not known.
    Unknown,
    /// To one port.
    Port(PortNo),
    /// To this many ports.
    Multiple(u32),
    /// Nowhere: the flow drops it.
    Drop,
}

impl SampleOutput {
    /// The output of a flow whose actions are `actions`: what its top
    /// level outputs (sampled copies' own actions do not count).
    pub fn of(actions: &[DpAction]) -> SampleOutput {
        let mut ports = actions.iter().filter_map(|a| match a {
            DpAction::Output(p) => Some(*p),
            _ => None,
        });
        match (ports.next(), ports.count()) {
            (None, _) => SampleOutput::Drop,
            (Some(p), 0) => SampleOutput::Port(p),
            (Some(_), more) => SampleOutput::Multiple(more as u32 + 1),
        }
    }
}

impl fmt::Display for SampleCookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sflow(rate={},output=", self.rate)?;
        match self.output {
            SampleOutput::Unknown => f.write_str("unknown")?,
            SampleOutput::Port(p) => write!(f, "{p}")?,
            SampleOutput::Multiple(n) => write!(f, "multiple:{n}")?,
            SampleOutput::Drop => f.write_str("drop")?,
        }
        f.write_str(")")
    }
}

/// One datapath action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send the packet as it is now to a port.
    Output(PortNo),
    /// Stop here: the packet goes nowhere else.
    Drop,
    /// Insert a tag after the MAC addresses, before any existing tag. `tci` is
    /// written as given (PCP | DEI | VID).
    PushVlan {
        tpid: u16,
        tci: u16,
    },
    /// Remove the outermost tag (no-op on an untagged packet).
    PopVlan,
    /// Ethernet source, the 48-bit address in the low bits.
    SetEthSrc(u64),
    /// Ethernet destination, the 48-bit address in the low bits.
    SetEthDst(u64),
    SetIpv4Src(u32),
    SetIpv4Dst(u32),
    SetIpv6Src(u128),
    SetIpv6Dst(u128),
    /// IPv4 TOS / IPv6 traffic class DSCP bits (6-bit value).
    SetDscp(u8),
    /// ECN bits (2-bit value).
    SetEcn(u8),
    /// IPv4 TTL / IPv6 hop limit.
    SetTtl(u8),
    /// TCP/UDP/SCTP source port.
    SetTpSrc(u16),
    /// TCP/UDP/SCTP destination port.
    SetTpDst(u16),
    /// An Ethernet/IPv4 ARP packet's field (no checksum to fix).
    SetArp(ArpField),
    /// Decrement the TTL / hop limit; a packet whose TTL is 0 or 1 is dropped.
    DecTtl,
    /// Police through a meter; a packet over the rate is dropped.
    Meter(MeterId),
    /// With `probability` (a fraction of `u32::MAX`; `u32::MAX` = always),
    /// run `actions` on a copy of the packet; the packet itself goes on.
    Sample {
        probability: u32,
        actions: Actions,
    },
    /// Run `gt` if the packet (its Ethernet frame) is longer than `size`
    /// bytes, else `le` (Open vSwitch's `check_pkt_len`); nothing follows.
    CheckPktLen {
        size: u16,
        gt: Actions,
        le: Actions,
    },
    /// Nothing done to the packet: the megaflow stays in software, for
    /// this reason (a pipeline action the switch keeps but does not run).
    SoftwareOnly(&'static str),
    /// Send the packet to userspace.
    Userspace(UserspaceReason),
    /// Send a copy of the packet, encapsulated in `header`, to `port` (the
    /// uplink the route says); the packet itself goes on unencapsulated.
    /// A copy whose outer IP packet would exceed `mtu` is not sent
    /// ([`ExecOutcome::too_big`]).
    TunnelPush {
        header: Arc<crate::tunnel::Encap>,
        port: PortNo,
        mtu: u16,
    },
    /// Look the packet, as modified so far, up again with `recirc_id` set
    /// to this id (the next stage of its pipeline), on the same datapath
    /// thread. Last in a list, the packet goes on there. Anywhere else it
    /// forks (Open vSwitch's `ct(table=T)` followed by more actions): a
    /// copy of the packet as it is now goes to that stage once the list
    /// is done ([`ActionSink::fork`]), and the packet itself runs the rest
    /// of the list.
    Recirc(u32),
    /// Track the packet in the connection tracker (Open vSwitch's `ct`):
    /// its `ct_*` metadata is set, and a committed connection is stored;
    /// with NAT the packet is translated. The next stage (after a
    /// [`Recirc`](Self::Recirc)) matches the result.
    Ct(Box<conntrack::CtSpec>),
    /// Forget the packet's tracking state (`ct_clear`).
    CtClear,
    /// Compute the packet's `dp_hash` ([`dp_hash`]) for the next stage
    /// to match (a `dp_hash` select group picks its bucket there).
    Hash {
        alg: HashAlg,
        basis: u32,
    },
}

/// What [`DpAction::Hash`] hashes (Open vSwitch's `OVS_HASH_ALG_*`, the
/// upper half of a group's `selection_method_param`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashAlg {
    /// IP addresses, protocol and L4 ports (`hash(l4(B))`).
    L4,
    /// The same, equal for both directions of a connection
    /// (`hash(sym_l4(B))`).
    SymL4,
}

impl HashAlg {
    /// From the algorithm number (0: L4, 1: symmetric L4).
    pub fn from_number(n: u32) -> Option<HashAlg> {
        match n {
            0 => Some(HashAlg::L4),
            1 => Some(HashAlg::SymL4),
            _ => None,
        }
    }
}

/// The `dp_hash` of a packet (its headers at `layout`): a hash with
/// `basis` of its IP addresses, IP protocol and, for TCP, UDP and SCTP,
/// L4 ports (Ethernet addresses and type when it is not IP); with
/// [`HashAlg::SymL4`] both directions of a connection hash alike. Never 0:
/// 0 is "not computed".
pub fn dp_hash(pkt: &[u8], layout: &Layout, alg: HashAlg, basis: u32) -> u32 {
    use crate::extract::NO_OFFSET;
    // An endpoint: an address (up to 16 bytes) and a port.
    let ip = (layout.l3 != NO_OFFSET).then(|| usize::from(layout.l3));
    let (mut a, mut b) = ([0u8; 18], [0u8; 18]);
    let copy = |dst: &mut [u8], src: Option<&[u8]>| {
        if let Some(src) = src {
            dst[..src.len()].copy_from_slice(src);
        }
    };
    let proto = match ip.and_then(|l3| Some((l3, pkt.get(l3)? >> 4))) {
        Some((l3, 4)) => {
            copy(&mut a, pkt.get(l3 + 12..l3 + 16));
            copy(&mut b, pkt.get(l3 + 16..l3 + 20));
            pkt.get(l3 + 9).copied().unwrap_or(0)
        }
        Some((l3, 6)) => {
            copy(&mut a, pkt.get(l3 + 8..l3 + 24));
            copy(&mut b, pkt.get(l3 + 24..l3 + 40));
            pkt.get(l3 + 6).copied().unwrap_or(0)
        }
        _ => {
            copy(&mut a, pkt.get(6..12));
            copy(&mut b, pkt.get(..6));
            copy(&mut a[16..], pkt.get(12..14));
            0
        }
    };
    if matches!(proto, 6 | 17 | 132) && layout.l4 != NO_OFFSET {
        let l4 = usize::from(layout.l4);
        copy(&mut a[16..], pkt.get(l4..l4 + 2));
        copy(&mut b[16..], pkt.get(l4 + 2..l4 + 4));
    }
    if alg == HashAlg::SymL4 && b < a {
        std::mem::swap(&mut a, &mut b);
    }
    let mut h = crate::key::WordHasher::new();
    h.push(u64::from(basis) << 8 | u64::from(proto));
    for e in [&a, &b] {
        h.push(u64::from_le_bytes(e[..8].try_into().unwrap_or_default()));
        h.push(u64::from_le_bytes(e[8..16].try_into().unwrap_or_default()));
        h.push(u64::from(u16::from_le_bytes([e[16], e[17]])));
    }
    let v = h.finish();
    match (v ^ (v >> 32)) as u32 {
        0 => 1,
        x => x,
    }
}

/// How many times a packet may recirculate (Open vSwitch's
/// `MAX_RECIRC_DEPTH`); one more is dropped ([`DropReason::RecircDepth`]).
pub const MAX_RECIRC_DEPTH: usize = 8;

/// An ARP field a [`DpAction::SetArp`] writes, with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArpField {
    /// The opcode (1 request, 2 reply).
    Op(u16),
    /// Sender hardware address, the 48-bit address in the low bits.
    Sha(u64),
    /// Sender protocol (IPv4) address.
    Spa(u32),
    /// Target hardware address.
    Tha(u64),
    /// Target protocol (IPv4) address.
    Tpa(u32),
}

/// Whether `a` may change the headers a key was parsed from.
fn rewrites(a: &DpAction) -> bool {
    match a {
        DpAction::Output(_)
        | DpAction::Drop
        | DpAction::Recirc(_)
        | DpAction::Userspace(_)
        | DpAction::Meter(_)
        | DpAction::Sample { .. }
        | DpAction::TunnelPush { .. }
        | DpAction::CtClear
        | DpAction::Hash { .. }
        | DpAction::SoftwareOnly(_) => false,
        DpAction::Ct(spec) => spec.nat.is_some(),
        _ => true,
    }
}

/// A `ct()` as Open vSwitch's `dpctl/dump-flows` writes it.
fn fmt_ct(f: &mut fmt::Formatter<'_>, spec: &conntrack::CtSpec) -> fmt::Result {
    let mut parts: Vec<String> = Vec::new();
    if spec.commit {
        parts.push(if spec.force {
            "force_commit".into()
        } else {
            "commit".into()
        });
    }
    if spec.zone != 0 {
        parts.push(format!("zone={}", spec.zone));
    }
    if let Some((v, m)) = spec.mark {
        parts.push(format!("mark={v:#x}/{m:#x}"));
    }
    if let Some((v, m)) = spec.label {
        parts.push(format!("label={v:#x}/{m:#x}"));
    }
    if let Some(nat) = spec.nat {
        parts.push(conntrack::nat::format_nat(&nat));
    }
    if parts.is_empty() {
        f.write_str("ct")
    } else {
        write!(f, "ct({})", parts.join(","))
    }
}

fn fmt_mac(f: &mut fmt::Formatter<'_>, m: u64) -> fmt::Result {
    let b = m.to_be_bytes();
    write!(
        f,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

impl fmt::Display for DpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpAction::Output(p) => write!(f, "output:{p}"),
            DpAction::Drop => f.write_str("drop"),
            DpAction::PushVlan { tpid, tci } => {
                write!(f, "push_vlan(tpid={tpid:#06x},tci={tci:#06x})")
            }
            DpAction::PopVlan => f.write_str("pop_vlan"),
            DpAction::SetEthSrc(m) => {
                f.write_str("set(eth_src=")?;
                fmt_mac(f, *m)?;
                f.write_str(")")
            }
            DpAction::SetEthDst(m) => {
                f.write_str("set(eth_dst=")?;
                fmt_mac(f, *m)?;
                f.write_str(")")
            }
            DpAction::SetIpv4Src(a) => write!(f, "set(ipv4_src={})", Ipv4Addr::from(*a)),
            DpAction::SetIpv4Dst(a) => write!(f, "set(ipv4_dst={})", Ipv4Addr::from(*a)),
            DpAction::SetIpv6Src(a) => write!(f, "set(ipv6_src={})", Ipv6Addr::from(*a)),
            DpAction::SetIpv6Dst(a) => write!(f, "set(ipv6_dst={})", Ipv6Addr::from(*a)),
            DpAction::SetDscp(v) => write!(f, "set(ip_dscp={v})"),
            DpAction::SetEcn(v) => write!(f, "set(ip_ecn={v})"),
            DpAction::SetTtl(v) => write!(f, "set(ip_ttl={v})"),
            DpAction::SetTpSrc(v) => write!(f, "set(tp_src={v})"),
            DpAction::SetTpDst(v) => write!(f, "set(tp_dst={v})"),
            DpAction::SetArp(ArpField::Op(v)) => write!(f, "set(arp_op={v})"),
            DpAction::SetArp(ArpField::Sha(m)) => {
                f.write_str("set(arp_sha=")?;
                fmt_mac(f, *m)?;
                f.write_str(")")
            }
            DpAction::SetArp(ArpField::Spa(a)) => write!(f, "set(arp_spa={})", Ipv4Addr::from(*a)),
            DpAction::SetArp(ArpField::Tha(m)) => {
                f.write_str("set(arp_tha=")?;
                fmt_mac(f, *m)?;
                f.write_str(")")
            }
            DpAction::SetArp(ArpField::Tpa(a)) => write!(f, "set(arp_tpa={})", Ipv4Addr::from(*a)),
            DpAction::DecTtl => f.write_str("dec_ttl"),
            DpAction::Meter(id) => write!(f, "meter({id})"),
            DpAction::Sample {
                probability,
                actions,
            } => {
                let pct = *probability as f64 * 100.0 / u32::MAX as f64;
                write!(f, "sample(sample={pct:.1}%,actions({actions}))")
            }
            DpAction::CheckPktLen { size, gt, le } => {
                write!(f, "check_pkt_len(size={size},gt({gt}),le({le}))")
            }
            DpAction::SoftwareOnly(why) => write!(f, "software_only({why})"),
            DpAction::Userspace(r) => write!(f, "userspace({r})"),
            DpAction::Recirc(id) => write!(f, "recirc({id:#x})"),
            DpAction::Ct(spec) => fmt_ct(f, spec),
            DpAction::CtClear => f.write_str("ct_clear"),
            DpAction::Hash { alg, basis } => match alg {
                HashAlg::L4 => write!(f, "hash(l4({basis}))"),
                HashAlg::SymL4 => write!(f, "hash(sym_l4({basis}))"),
            },
            DpAction::TunnelPush { header, port, mtu } => {
                let h = header.outer();
                let kind = h.kind.name();
                let (src, dst) = match h.ip {
                    crate::tunnel::OuterIp::V4 { src, dst } => (
                        Ipv4Addr::from(src).to_string(),
                        Ipv4Addr::from(dst).to_string(),
                    ),
                    crate::tunnel::OuterIp::V6 { src, dst } => (
                        Ipv6Addr::from(src).to_string(),
                        Ipv6Addr::from(dst).to_string(),
                    ),
                };
                write!(
                    f,
                    "tnl_push({kind},vni={:#x},src={src},dst={dst},eth_dst=",
                    h.vni
                )?;
                fmt_mac(
                    f,
                    u64::from_be_bytes([
                        0,
                        0,
                        h.eth_dst[0],
                        h.eth_dst[1],
                        h.eth_dst[2],
                        h.eth_dst[3],
                        h.eth_dst[4],
                        h.eth_dst[5],
                    ]),
                )?;
                write!(f, ",tp_dst={},out_port={port},mtu={mtu})", h.udp_dst)
            }
        }
    }
}

/// An immutable, cheaply clonable action list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Actions(Arc<[DpAction]>);

impl Actions {
    pub fn new(actions: Vec<DpAction>) -> Self {
        Actions(actions.into())
    }

    /// The empty list, which drops.
    pub fn drop_all() -> Self {
        Actions::new(Vec::new())
    }

    /// How many hold this very list (clones share it).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    pub fn as_slice(&self) -> &[DpAction] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for Actions {
    fn default() -> Self {
        Actions::drop_all()
    }
}

impl Deref for Actions {
    type Target = [DpAction];

    fn deref(&self) -> &[DpAction] {
        &self.0
    }
}

impl From<Vec<DpAction>> for Actions {
    fn from(v: Vec<DpAction>) -> Self {
        Actions::new(v)
    }
}

impl FromIterator<DpAction> for Actions {
    fn from_iter<I: IntoIterator<Item = DpAction>>(iter: I) -> Self {
        Actions(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Actions {
    type Item = &'a DpAction;
    type IntoIter = std::slice::Iter<'a, DpAction>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Comma-separated actions in Open vSwitch datapath style; `drop` when empty.
impl fmt::Display for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("drop");
        }
        for (i, a) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// Where executed packets go, and the answers execution needs from outside.
pub trait ActionSink {
    /// A copy of the packet leaves through `port`.
    fn output(&mut self, port: PortNo, pkt: &[u8]);
    /// A copy made of `head` then `body` (a tunnel header and the packet)
    /// leaves through `port`. The default joins them in a per-thread
    /// buffer; a sink that can send two parts overrides it.
    fn output_parts(&mut self, port: PortNo, head: &[u8], body: &[u8]) {
        with_joined(head, body, |frame| self.output(port, frame));
    }
    /// A copy of the packet goes to userspace.
    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]);
    /// Charges `len` bytes to meter `id`: true = pass, false = packet dropped.
    fn meter(&mut self, id: MeterId, len: usize) -> bool;
    /// Draws a sample with `probability` (fraction of `u32::MAX`): true = take.
    fn sample(&mut self, probability: u32) -> bool;
    /// Runs `ct()` on the packet (its L3 header at `l3`, of `eth_type`; 0
    /// when it has none). The default has no tracker: the action is
    /// skipped (false).
    fn conntrack(
        &mut self,
        spec: &conntrack::CtSpec,
        pkt: &mut [u8],
        l3: usize,
        eth_type: u16,
    ) -> bool {
        let _ = (spec, pkt, l3, eth_type);
        false
    }
    /// `ct_clear`: forgets the packet's tracking state.
    fn ct_clear(&mut self) {}
    /// A [`DpAction::Recirc`] before the list's end: a copy of `pkt` (its
    /// headers at `layout`, its tracking state as `ct()` left it) goes to
    /// stage `recirc` after the list. The default cannot run later stages:
    /// the action is skipped (false).
    fn fork(&mut self, recirc: u32, pkt: &[u8], layout: &Layout) -> bool {
        let _ = (recirc, pkt, layout);
        false
    }
}

/// An [`ActionSink`] that only counts outputs (meters pass, samples are
/// not taken): for benchmarks, which must not allocate per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountSink {
    pub outputs: u64,
    pub userspace: u64,
}

impl ActionSink for CountSink {
    fn output(&mut self, _: PortNo, _: &[u8]) {
        self.outputs += 1;
    }
    fn userspace(&mut self, _: &UserspaceReason, _: &[u8]) {
        self.userspace += 1;
    }
    fn meter(&mut self, _: MeterId, _: usize) -> bool {
        true
    }
    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

/// An [`ActionSink`] that records everything, for tests and replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectSink {
    /// Every output, in order.
    pub outputs: Vec<(PortNo, Vec<u8>)>,
    /// Every packet sent to userspace, in order.
    pub userspace: Vec<(UserspaceReason, Vec<u8>)>,
    /// Every meter consulted, with the packet length charged.
    pub meter_calls: Vec<(MeterId, usize)>,
    /// Every sample drawn, with its probability.
    pub sample_calls: Vec<u32>,
    /// Answer to [`ActionSink::meter`] (default: pass).
    pub meter_pass: bool,
    /// Answer to [`ActionSink::sample`] (default: take).
    pub sample_take: bool,
}

impl CollectSink {
    pub fn new() -> Self {
        CollectSink {
            outputs: Vec::new(),
            userspace: Vec::new(),
            meter_calls: Vec::new(),
            sample_calls: Vec::new(),
            meter_pass: true,
            sample_take: true,
        }
    }
}

impl Default for CollectSink {
    fn default() -> Self {
        CollectSink::new()
    }
}

impl ActionSink for CollectSink {
    fn output(&mut self, port: PortNo, pkt: &[u8]) {
        self.outputs.push((port, pkt.to_vec()));
    }

    fn userspace(&mut self, reason: &UserspaceReason, pkt: &[u8]) {
        self.userspace.push((reason.clone(), pkt.to_vec()));
    }

    fn meter(&mut self, id: MeterId, len: usize) -> bool {
        self.meter_calls.push((id, len));
        self.meter_pass
    }

    fn sample(&mut self, probability: u32) -> bool {
        self.sample_calls.push(probability);
        self.sample_take
    }
}

/// Why the packet's own action path ended without (further) delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A [`DpAction::Drop`].
    Explicit,
    /// The meter refused the packet.
    Meter(MeterId),
    /// [`DpAction::DecTtl`] on a TTL / hop limit of 0 or 1.
    TtlExpired,
    /// The actions ran out without any output or userspace action on the
    /// packet's own path (an empty list included; sampled copies don't count).
    NoOutput,
    /// Recirculated more than [`MAX_RECIRC_DEPTH`] times.
    RecircDepth,
    /// Handed over by the device after its conntrack table, for a
    /// connection the tracker no longer has.
    CtGone,
}

impl DropReason {
    /// Stable short name for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Explicit => "explicit",
            DropReason::Meter(_) => "meter",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoOutput => "no_output",
            DropReason::RecircDepth => "recirc_depth",
            DropReason::CtGone => "ct_gone",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`execute`] did.
///
/// In C order, each counter beside a field that is not summed: the
/// actions store the counters one by one, and [`then`](Self::then) reads
/// them right after; two counters side by side are read as one 16-byte
/// load, which stalls on store forwarding (a few percent of a tracked
/// packet's time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ExecOutcome {
    /// Calls to [`ActionSink::output`], sampled copies included.
    pub outputs: usize,
    /// Set when the packet's own path stopped on `Drop`, a meter or an
    /// expired TTL (outputs before it did happen), or delivered nothing.
    pub dropped: Option<DropReason>,
    /// Calls to [`ActionSink::userspace`], sampled copies included.
    pub userspace: usize,
    /// The stage ended in [`DpAction::Recirc`]: the packet goes on to
    /// stage `recirc`.
    pub recirc: Option<u32>,
    /// Actions skipped because the packet lacks the layer they act on (or is
    /// too short for it), and samples nested deeper than [`MAX_SAMPLE_DEPTH`].
    pub skipped: usize,
    /// The `dp_hash` a [`DpAction::Hash`] computed, for the next stage.
    pub dp_hash: Option<u32>,
    /// Tunnel outputs not sent: the encapsulated packet would exceed the
    /// uplink's MTU.
    pub too_big: usize,
    /// An action changed the packet's headers (a set, a tag pushed or
    /// popped, a TTL, NAT): the next stage must parse it again.
    pub rewritten: bool,
    /// Copies sent on to a later stage by a [`DpAction::Recirc`] before
    /// the list's end ([`ActionSink::fork`]).
    pub forks: usize,
}

impl ExecOutcome {
    pub fn is_dropped(&self) -> bool {
        self.dropped.is_some()
    }

    /// Adds the next stage's outcome: its counts add up, its end (drop,
    /// recirculation) is the packet's.
    pub fn then(&mut self, next: &ExecOutcome) {
        self.outputs += next.outputs;
        self.userspace += next.userspace;
        self.skipped += next.skipped;
        self.too_big += next.too_big;
        self.forks += next.forks;
        self.dp_hash = next.dp_hash.or(self.dp_hash);
        self.dropped = next.dropped;
        self.recirc = next.recirc;
        self.rewritten |= next.rewritten;
    }
}

thread_local! {
    /// Where [`with_joined`] builds a frame: one buffer per thread, so
    /// joining allocates nothing once it has grown.
    static JOINED: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(2048));
}

/// Runs `f` on `head` followed by `body` as one frame (for sinks and
/// ports that send one slice).
pub fn with_joined(head: &[u8], body: &[u8], f: impl FnOnce(&[u8])) {
    JOINED.with(|s| match s.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            buf.extend_from_slice(head);
            buf.extend_from_slice(body);
            f(&buf);
        }
        // Re-entered from inside `f`: a buffer of its own.
        Err(_) => f(&[head, body].concat()),
    })
}

/// Deepest nesting of [`DpAction::Sample`] executed; deeper samples are
/// skipped, so a hostile action list cannot exhaust the stack.
pub const MAX_SAMPLE_DEPTH: usize = 8;

/// Runs `actions` in order on `pkt`, whose headers `layout` describes (as
/// [`crate::extract::extract_into`] returned it), sending the results to
/// `sink`. `pkt` and `layout` are left as the last action made them.
pub fn execute(
    actions: &[DpAction],
    pkt: &mut Vec<u8>,
    layout: &mut Layout,
    sink: &mut impl ActionSink,
) -> ExecOutcome {
    let mut out = ExecOutcome::default();
    execute_into(actions, pkt, layout, sink, &mut out);
    out
}

/// [`execute`] into `out` (reset first). For the datapath's per-packet
/// loop: a returned outcome is copied with wide loads over the counters
/// the actions just stored one by one, which stall on store forwarding.
#[inline]
pub fn execute_into(
    actions: &[DpAction],
    pkt: &mut Vec<u8>,
    layout: &mut Layout,
    sink: &mut impl ActionSink,
    out: &mut ExecOutcome,
) {
    *out = ExecOutcome::default();
    out.dropped = run(actions, pkt, layout, sink, 0, out);
}

/// Headers up to this long are built in a short stack buffer.
const SHORT_HEADER: usize = 96;

/// Sends `pkt` behind `header` (filled for it) to `port`, as two parts,
/// through an `N`-byte buffer.
#[inline(always)]
fn tunnel_push<const N: usize, S: ActionSink>(
    header: &crate::tunnel::Encap,
    pkt: &[u8],
    hash: u32,
    port: PortNo,
    sink: &mut S,
) -> bool {
    let mut head = [0u8; N];
    match header.header(pkt, hash, &mut head) {
        Ok(n) => {
            sink.output_parts(port, &head[..n], pkt);
            true
        }
        Err(_) => false,
    }
}

fn run<S: ActionSink>(
    actions: &[DpAction],
    pkt: &mut Vec<u8>,
    layout: &mut Layout,
    sink: &mut S,
    depth: usize,
    out: &mut ExecOutcome,
) -> Option<DropReason> {
    let mut delivered = false;
    for (i, action) in actions.iter().enumerate() {
        if depth == 0 && rewrites(action) {
            out.rewritten = true;
        }
        let applied = match action {
            DpAction::Output(port) => {
                sink.output(*port, pkt);
                out.outputs += 1;
                delivered = true;
                true
            }
            DpAction::Drop => return Some(DropReason::Explicit),
            // A sampled copy does not recirculate.
            DpAction::Recirc(_) if depth > 0 => false,
            DpAction::Recirc(id) if i + 1 < actions.len() => {
                let forked = sink.fork(*id, pkt, layout);
                if forked {
                    out.forks += 1;
                    // The copy is delivered at its stage.
                    delivered = true;
                }
                forked
            }
            DpAction::Recirc(id) => {
                // The packet goes on to its next stage: delivered there.
                out.recirc = Some(*id);
                out.skipped += actions.len() - i - 1;
                return None;
            }
            // A sampled copy is not tracked: only the packet itself.
            DpAction::Ct(_) | DpAction::CtClear if depth > 0 => false,
            DpAction::Ct(spec) => {
                let (l3, eth_type) = ct_l3(pkt, layout);
                sink.conntrack(spec, pkt, l3, eth_type)
            }
            DpAction::CtClear => {
                sink.ct_clear();
                true
            }
            // A sampled copy has no next stage to hash for.
            DpAction::Hash { .. } if depth > 0 => false,
            DpAction::Hash { alg, basis } => {
                out.dp_hash = Some(dp_hash(pkt, layout, *alg, *basis));
                true
            }
            DpAction::Userspace(reason) => {
                sink.userspace(reason, pkt);
                out.userspace += 1;
                delivered = true;
                true
            }
            DpAction::Meter(id) => {
                if !sink.meter(*id, pkt.len()) {
                    return Some(DropReason::Meter(*id));
                }
                true
            }
            DpAction::Sample {
                probability,
                actions,
            } => {
                if depth >= MAX_SAMPLE_DEPTH {
                    false
                } else {
                    if sink.sample(*probability) {
                        let mut copy = pkt.clone();
                        let mut copy_layout = *layout;
                        // The copy's fate does not change the packet's.
                        let _ = run(actions, &mut copy, &mut copy_layout, sink, depth + 1, out);
                    }
                    true
                }
            }
            DpAction::CheckPktLen { size, gt, le } => {
                let branch = if pkt.len() > usize::from(*size) {
                    gt
                } else {
                    le
                };
                if depth >= MAX_SAMPLE_DEPTH {
                    false
                } else if i + 1 == actions.len() {
                    // Last: the branch is the packet's fate.
                    return run(branch, pkt, layout, sink, depth + 1, out);
                } else {
                    // Actions follow (it was in a resubmit): the branch
                    // runs on a copy, as Open vSwitch's clone of it.
                    let mut copy = pkt.clone();
                    let mut copy_layout = *layout;
                    let _ = run(branch, &mut copy, &mut copy_layout, sink, depth + 1, out);
                    true
                }
            }
            DpAction::SoftwareOnly(_) => true,
            DpAction::DecTtl => match edit::dec_ttl(pkt, layout) {
                Some(true) => true,
                Some(false) => return Some(DropReason::TtlExpired),
                None => false,
            },
            DpAction::PushVlan { tpid, tci } => edit::push_vlan(pkt, layout, *tpid, *tci),
            DpAction::PopVlan => {
                edit::pop_vlan(pkt, layout);
                true
            }
            DpAction::SetEthSrc(m) => edit::set_eth_src(pkt, *m),
            DpAction::SetEthDst(m) => edit::set_eth_dst(pkt, *m),
            DpAction::SetIpv4Src(a) => edit::set_ipv4_src(pkt, layout, *a),
            DpAction::SetIpv4Dst(a) => edit::set_ipv4_dst(pkt, layout, *a),
            DpAction::SetIpv6Src(a) => edit::set_ipv6_src(pkt, layout, *a),
            DpAction::SetIpv6Dst(a) => edit::set_ipv6_dst(pkt, layout, *a),
            DpAction::SetDscp(v) => edit::set_dscp(pkt, layout, *v),
            DpAction::SetEcn(v) => edit::set_ecn(pkt, layout, *v),
            DpAction::SetTtl(v) => edit::set_ttl(pkt, layout, *v),
            DpAction::SetTpSrc(p) => edit::set_tp_src(pkt, layout, *p),
            DpAction::SetTpDst(p) => edit::set_tp_dst(pkt, layout, *p),
            DpAction::SetArp(a) => edit::set_arp(pkt, layout, *a),
            DpAction::TunnelPush { header, port, mtu } => {
                if header.ip_packet_len(pkt.len()) > usize::from(*mtu) {
                    out.too_big += 1;
                    // Counted as the packet's delivery: it was sent to a
                    // port, which refused it.
                    delivered = true;
                    true
                } else {
                    let hash = crate::tunnel::flow_hash(pkt, layout);
                    // A short buffer for the usual headers (VXLAN, Geneve
                    // with few options): less to clear per packet.
                    let sent = if header.len() <= SHORT_HEADER {
                        tunnel_push::<SHORT_HEADER, S>(header, pkt, hash, *port, sink)
                    } else {
                        tunnel_push::<{ crate::tunnel::HEADER_MAX }, S>(
                            header, pkt, hash, *port, sink,
                        )
                    };
                    if sent {
                        out.outputs += 1;
                        delivered = true;
                    }
                    sent
                }
            }
        };
        if !applied {
            out.skipped += 1;
        }
    }
    if delivered {
        None
    } else {
        Some(DropReason::NoOutput)
    }
}

/// Where `ct()` finds a packet's network header: its offset and the
/// ethertype before it ((0, 0): none).
pub fn ct_l3(pkt: &[u8], layout: &Layout) -> (usize, u16) {
    if layout.l3 == crate::extract::NO_OFFSET || layout.l3 < 2 {
        return (0, 0);
    }
    let l3 = layout.l3 as usize;
    let et = pkt
        .get(l3 - 2..l3)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    (l3, et)
}

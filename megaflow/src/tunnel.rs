//! Tunnel headers: VXLAN (RFC 7348) and Geneve (RFC 8926) over IPv4 or
//! IPv6, built and read back.
//!
//! One description of the outer header ([`Outer`]) serves three users:
//! - the software datapath's encap ([`Outer::encap`]): the whole packet,
//!   with the IPv4 total length and header checksum, the IPv6 payload
//!   length, the UDP length and a UDP source port taken from the inner
//!   flow's hash (entropy for the underlay's ECMP, as Linux's
//!   `udp_flow_src_port` does), the UDP checksum 0 unless asked for;
//! - the NIC's encap ([`Outer::reformat_data`]): the bytes of an
//!   `L2_TO_L2_TUNNEL` packet reformat context, with every field the
//!   hardware fills left zero, as Linux's mlx5 driver builds them (IPv4
//!   total length, id and checksum; IPv6 payload length; the UDP source
//!   port, length and checksum);
//! - decap ([`decap`]): a packet from the wire whose outer UDP port is a
//!   tunnel port's is read back into its tunnel metadata and the offset of
//!   the inner frame; a fragmented or malformed one is an error naming
//!   why (the datapath drops and counts it).

use std::net::IpAddr;

use thiserror::Error;

use crate::frame::checksum;
use crate::key::{FlowKey, TUN_OPT_SPACE};

/// VXLAN's IANA port.
pub const VXLAN_PORT: u16 = 4789;
/// Geneve's IANA port.
pub const GENEVE_PORT: u16 = 6081;
/// Geneve's protocol type for an Ethernet payload (Transparent Ethernet
/// Bridging).
pub const GENEVE_ETH: u16 = 0x6558;
/// The largest VNI: 24 bits.
pub const VNI_MAX: u32 = (1 << 24) - 1;
/// The most Geneve option bytes (the 6-bit `opt_len` counts 4-byte words).
pub const GENEVE_OPTS_MAX: usize = 63 * 4;

/// The tunnel protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Vxlan,
    Geneve,
}

impl Kind {
    /// The protocol's name (`vxlan`, `geneve`), as port types and dumps
    /// spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Vxlan => "vxlan",
            Kind::Geneve => "geneve",
        }
    }

    /// The protocol's IANA UDP port.
    pub fn default_port(self) -> u16 {
        match self {
            Kind::Vxlan => VXLAN_PORT,
            Kind::Geneve => GENEVE_PORT,
        }
    }
}

/// One Geneve option: class, type, and data (a multiple of 4 bytes, at
/// most 124).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GeneveOpt {
    pub class: u16,
    /// The type; bit 7 is the critical bit.
    pub ty: u8,
    pub data: Vec<u8>,
}

/// The outer addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OuterIp {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// An outer header: what a tunnel port's options, the route and the
/// neighbour say.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outer {
    pub kind: Kind,
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    pub ip: OuterIp,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 don't-fragment.
    pub df: bool,
    pub udp_dst: u16,
    /// Fill the outer UDP checksum (software only: the NIC cannot).
    pub csum: bool,
    pub vni: u32,
    /// Geneve only.
    pub opts: Vec<GeneveOpt>,
}

/// Why a header cannot be built, or a packet not decapsulated.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TunnelError {
    #[error("VNI {0:#x} is above 24 bits")]
    Vni(u32),
    #[error("VXLAN carries no options")]
    VxlanOptions,
    #[error("a Geneve option's data is {0} bytes: it must be a multiple of 4, at most 124")]
    OptionLength(usize),
    #[error("Geneve options of {0} bytes: at most {GENEVE_OPTS_MAX}")]
    OptionsTooLong(usize),
    #[error("the outer packet is a fragment: tunnels are decapsulated whole")]
    Fragment,
    #[error("the outer packet is cut short ({0})")]
    Truncated(&'static str),
    #[error("malformed {0} header")]
    Malformed(&'static str),
    #[error("the encapsulated packet ({0} bytes) does not fit an outer IP header")]
    TooLong(usize),
}

const ETH: usize = 14;
const IPV4: usize = 20;
const IPV6: usize = 40;
const UDP: usize = 8;
const VXLAN: usize = 8;
const GENEVE: usize = 8;

impl Outer {
    /// VXLAN over IPv4 with VNI `vni` between `src` and `dst`, the MACs
    /// given, every other field at its default: TOS 0, TTL 64, DF, port
    /// 4789, no UDP checksum.
    pub fn vxlan_v4(macs: ([u8; 6], [u8; 6]), src: [u8; 4], dst: [u8; 4], vni: u32) -> Outer {
        Outer {
            kind: Kind::Vxlan,
            eth_src: macs.0,
            eth_dst: macs.1,
            ip: OuterIp::V4 { src, dst },
            tos: 0,
            ttl: 64,
            df: true,
            udp_dst: VXLAN_PORT,
            csum: false,
            vni,
            opts: Vec::new(),
        }
    }

    fn ip_len(&self) -> usize {
        match self.ip {
            OuterIp::V4 { .. } => IPV4,
            OuterIp::V6 { .. } => IPV6,
        }
    }

    fn opts_len(&self) -> usize {
        self.opts.iter().map(|o| 4 + o.data.len()).sum()
    }

    /// The length of the header before the inner frame.
    pub fn len(&self) -> usize {
        let tunnel = match self.kind {
            Kind::Vxlan => VXLAN,
            Kind::Geneve => GENEVE + self.opts_len(),
        };
        ETH + self.ip_len() + UDP + tunnel
    }

    /// Never: an outer header always has its fixed parts.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn check(&self) -> Result<(), TunnelError> {
        if self.vni > VNI_MAX {
            return Err(TunnelError::Vni(self.vni));
        }
        match self.kind {
            Kind::Vxlan if !self.opts.is_empty() => return Err(TunnelError::VxlanOptions),
            _ => {}
        }
        for o in &self.opts {
            if o.data.len() % 4 != 0 || o.data.len() > 124 {
                return Err(TunnelError::OptionLength(o.data.len()));
            }
        }
        let n = self.opts_len();
        if n > GENEVE_OPTS_MAX {
            return Err(TunnelError::OptionsTooLong(n));
        }
        Ok(())
    }

    /// Writes the header for an inner frame of `inner` bytes; `fill`: the
    /// lengths, IPv4 checksum and UDP source port `sport` are filled (else
    /// left zero for the hardware).
    fn write(&self, inner: usize, sport: u16, fill: bool, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.eth_dst);
        out.extend_from_slice(&self.eth_src);
        let l4_len = UDP + (self.len() - ETH - self.ip_len() - UDP) + inner;
        match self.ip {
            OuterIp::V4 { src, dst } => {
                out.extend_from_slice(&0x0800u16.to_be_bytes());
                let total = if fill { (IPV4 + l4_len) as u16 } else { 0 };
                let frag: u16 = if self.df { 0x4000 } else { 0 };
                out.push(0x45);
                out.push(self.tos);
                out.extend_from_slice(&total.to_be_bytes());
                out.extend_from_slice(&[0, 0]); // id
                out.extend_from_slice(&frag.to_be_bytes());
                out.push(self.ttl);
                out.push(17);
                out.extend_from_slice(&[0, 0]); // checksum
                out.extend_from_slice(&src);
                out.extend_from_slice(&dst);
                if fill {
                    let ip = start + ETH;
                    let c = checksum(0, &out[ip..ip + IPV4]);
                    out[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
                }
            }
            OuterIp::V6 { src, dst } => {
                out.extend_from_slice(&0x86ddu16.to_be_bytes());
                let vtc = 0x6000_0000u32 | (u32::from(self.tos) << 20);
                out.extend_from_slice(&vtc.to_be_bytes());
                let plen = if fill { l4_len as u16 } else { 0 };
                out.extend_from_slice(&plen.to_be_bytes());
                out.push(17);
                out.push(self.ttl);
                out.extend_from_slice(&src);
                out.extend_from_slice(&dst);
            }
        }
        let (sport, ulen) = if fill { (sport, l4_len as u16) } else { (0, 0) };
        out.extend_from_slice(&sport.to_be_bytes());
        out.extend_from_slice(&self.udp_dst.to_be_bytes());
        out.extend_from_slice(&ulen.to_be_bytes());
        out.extend_from_slice(&[0, 0]); // checksum: later, or never
        match self.kind {
            Kind::Vxlan => {
                out.extend_from_slice(&0x0800_0000u32.to_be_bytes());
                out.extend_from_slice(&(self.vni << 8).to_be_bytes());
            }
            Kind::Geneve => {
                let words = (self.opts_len() / 4) as u8;
                let crit = self.opts.iter().any(|o| o.ty & 0x80 != 0);
                out.push(words & 0x3f);
                out.push(if crit { 0x40 } else { 0 });
                out.extend_from_slice(&GENEVE_ETH.to_be_bytes());
                out.extend_from_slice(&(self.vni << 8).to_be_bytes());
                write_options(&self.opts, out);
            }
        }
    }

    /// The data of the NIC's `L2_TO_L2_TUNNEL` reformat context: the outer
    /// header with every field the hardware fills left zero.
    pub fn reformat_data(&self) -> Result<Vec<u8>, TunnelError> {
        self.check()?;
        let mut v = Vec::with_capacity(self.len());
        self.write(0, 0, false, &mut v);
        Ok(v)
    }

    /// `inner` encapsulated into `out` (cleared first), as software sends
    /// it: lengths and the IPv4 checksum filled, the UDP source port from
    /// `hash` (the inner flow's), the UDP checksum only with `csum`.
    pub fn encap(&self, inner: &[u8], hash: u32, out: &mut Vec<u8>) -> Result<(), TunnelError> {
        self.check()?;
        let l4 = self.len() - ETH - self.ip_len() + inner.len();
        if l4 > self.l4_limit() {
            return Err(TunnelError::TooLong(inner.len()));
        }
        out.clear();
        out.reserve(self.len() + inner.len());
        self.write(inner.len(), source_port(hash), true, out);
        out.extend_from_slice(inner);
        if self.csum {
            let udp = ETH + self.ip_len();
            let c = udp_checksum(&out[ETH..udp], &out[udp..]);
            out[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
        }
        Ok(())
    }

    fn l4_limit(&self) -> usize {
        match self.ip {
            OuterIp::V4 { .. } => usize::from(u16::MAX) - IPV4,
            OuterIp::V6 { .. } => usize::from(u16::MAX),
        }
    }

    /// The outer IP packet's length for an inner frame of `inner` bytes
    /// (what must fit the uplink's MTU).
    pub fn ip_packet_len(&self, inner: usize) -> usize {
        self.len() - ETH + inner
    }
}

/// An outer header ready for the datapath: checked once, its bytes built
/// once (a template with the lengths, the IPv4 checksum's length part and
/// the UDP source port left for each packet), so encapsulating a packet
/// is a copy and four patched fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Encap {
    outer: Outer,
    template: Vec<u8>,
    /// IPv4: the unfolded one's complement sum of the template's IP
    /// header with its total length and checksum zero; each packet's
    /// checksum adds its length to it.
    ip_sum: Option<u32>,
}

impl Encap {
    /// The header of `outer`, or why it cannot be built.
    pub fn new(outer: Outer) -> Result<Encap, TunnelError> {
        outer.check()?;
        let mut template = Vec::with_capacity(outer.len());
        // Filled with an empty inner frame: every length is the header's
        // own, each packet's adds its frame's length.
        outer.write(0, 0, true, &mut template);
        let ip_sum = matches!(outer.ip, OuterIp::V4 { .. }).then(|| {
            let mut h = [0u8; IPV4];
            h.copy_from_slice(&template[ETH..ETH + IPV4]);
            h[2..4].fill(0);
            h[10..12].fill(0);
            crate::frame::sum16(&h)
        });
        Ok(Encap {
            outer,
            template,
            ip_sum,
        })
    }

    pub fn outer(&self) -> &Outer {
        &self.outer
    }

    /// The header's length.
    pub fn len(&self) -> usize {
        self.template.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The outer IP packet's length for an inner frame of `inner` bytes.
    pub fn ip_packet_len(&self, inner: usize) -> usize {
        self.outer.ip_packet_len(inner)
    }

    /// `inner` encapsulated into `out` (cleared first), as
    /// [`Outer::encap`] gives it.
    pub fn encap_into(
        &self,
        inner: &[u8],
        hash: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), TunnelError> {
        let mut h = [0u8; HEADER_MAX];
        let n = self.header(inner, hash, &mut h)?;
        out.clear();
        out.extend_from_slice(&h[..n]);
        out.extend_from_slice(inner);
        Ok(())
    }

    /// The header for `inner` (which follows it on the wire) into `out`;
    /// its length. Sent as two parts, the packet is never copied to
    /// prepend it.
    pub fn header(&self, inner: &[u8], hash: u32, out: &mut [u8]) -> Result<usize, TunnelError> {
        let ip = self.outer.ip_len();
        let n = self.template.len();
        let l4 = n - ETH - ip + inner.len();
        if l4 > self.outer.l4_limit() {
            return Err(TunnelError::TooLong(inner.len()));
        }
        let Some(out) = out.get_mut(..n) else {
            return Err(TunnelError::TooLong(inner.len()));
        };
        out.copy_from_slice(&self.template);
        fill_header_summed(out, inner.len(), source_port(hash), self.ip_sum);
        let udp = ETH + ip;
        if self.outer.csum {
            // The UDP part of the header is of even length: the sums of
            // its words and of the inner frame's add up.
            let c = udp_checksum_parts(&out[ETH..udp], &out[udp..], inner);
            out[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
        }
        Ok(n)
    }
}

/// Fills in an outer header `head` (Ethernet, IPv4 without options or
/// IPv6, UDP, ...) what depends on the packet behind it, as a NIC's encap
/// does: the IPv4 total length and header checksum (or the IPv6 payload
/// length) and the UDP length for an inner frame of `inner` bytes, and
/// the UDP source port `sport`. The software datapath's template and the
/// sim's reformat both fill through this.
pub fn fill_header(head: &mut [u8], inner: usize, sport: u16) {
    fill_header_summed(head, inner, sport, None);
}

/// [`fill_header`], given the IPv4 header's sum without its total length
/// and checksum when it is known (a template's), so only the length is
/// added.
#[inline]
fn fill_header_summed(head: &mut [u8], inner: usize, sport: u16, ip_sum: Option<u32>) {
    let l3_end = head.len() + inner - ETH;
    let put = |b: &mut [u8], at: usize, v: usize| {
        b[at..at + 2].copy_from_slice(&(v as u16).to_be_bytes());
    };
    let udp = if head[12..14] == [0x08, 0x00] {
        put(head, ETH + 2, l3_end);
        put(head, ETH + 10, 0);
        let c = match ip_sum {
            Some(sum) => checksum(sum + l3_end as u32, &[]),
            None => checksum(0, &head[ETH..ETH + IPV4]),
        };
        head[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        ETH + IPV4
    } else {
        put(head, ETH + 4, l3_end - IPV6);
        ETH + IPV6
    };
    put(head, udp, usize::from(sport));
    put(head, udp + 4, head.len() + inner - udp);
}

/// The longest outer header: Ethernet, IPv6, UDP, Geneve with the most
/// options.
pub const HEADER_MAX: usize = ETH + IPV6 + UDP + GENEVE + GENEVE_OPTS_MAX;

/// The UDP source port for a flow hash: in 49152..=65535 (IANA's dynamic
/// range), spread by the hash's high bits as Linux's `udp_flow_src_port`
/// spreads it.
pub fn source_port(hash: u32) -> u16 {
    const MIN: u32 = 49152;
    const SPAN: u64 = 65536 - 49152;
    (MIN + ((u64::from(hash) * SPAN) >> 32) as u32) as u16
}

/// The UDP checksum over `ip` (the IPv4 or IPv6 header, for the
/// pseudo-header) and `udp` (header and payload, its checksum field 0);
/// 0 is sent as 0xffff.
fn udp_checksum(ip: &[u8], udp: &[u8]) -> u16 {
    udp_checksum_parts(ip, udp, &[])
}

/// [`udp_checksum`] of a datagram in two parts, `head` of even length.
fn udp_checksum_parts(ip: &[u8], head: &[u8], body: &[u8]) -> u16 {
    let addrs = if ip.len() == IPV4 {
        &ip[12..20]
    } else {
        &ip[8..40]
    };
    let len = (head.len() + body.len()) as u32;
    let init = crate::frame::sum16(addrs) + 17 + len + crate::frame::sum16(head);
    match checksum(init, body) {
        0 => 0xffff,
        c => c,
    }
}

/// What a decapsulated packet's outer headers said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decapped {
    pub kind: Kind,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    pub df: bool,
    pub udp_src: u16,
    pub udp_dst: u16,
    /// The outer UDP checksum was set.
    pub csum: bool,
    /// Geneve's OAM bit.
    pub oam: bool,
    pub vni: u32,
    /// Where the Geneve options are in the packet (empty for VXLAN),
    /// checked well formed; [`Decapped::options`] reads them. Decap itself
    /// allocates nothing.
    pub opts: std::ops::Range<usize>,
    /// Where the inner Ethernet frame starts.
    pub inner: usize,
}

impl Decapped {
    /// The Geneve options of `pkt`, the packet this was read from.
    pub fn options(&self, pkt: &[u8]) -> Vec<GeneveOpt> {
        raw_options(pkt.get(self.opts.clone()).unwrap_or(&[]))
            .map(|(class, ty, data)| GeneveOpt {
                class,
                ty,
                data: data.to_vec(),
            })
            .collect()
    }
}

/// Each option of the raw Geneve options `b` as (class, type, data), up to
/// the first that does not fit.
fn raw_options(b: &[u8]) -> impl Iterator<Item = (u16, u8, &[u8])> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let n = usize::from(*b.get(at + 3)? & 0x1f) * 4;
        let data = b.get(at + 4..at + 4 + n)?;
        let opt = (be16(b, at), b[at + 2], data);
        at += 4 + n;
        Some(opt)
    })
}

/// `opts` as a Geneve header carries them.
pub fn write_options(opts: &[GeneveOpt], out: &mut Vec<u8>) {
    for o in opts {
        out.extend_from_slice(&o.class.to_be_bytes());
        out.push(o.ty);
        out.push((o.data.len() / 4) as u8 & 0x1f);
        out.extend_from_slice(&o.data);
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a packet from the wire: `Ok(None)` when it is not UDP to one of
/// `ports` (an untagged Ethernet frame is expected), its tunnel metadata
/// when it is, an error when it is such a packet but a fragment, cut
/// short or malformed.
pub fn decap(pkt: &[u8], ports: &[(u16, Kind)]) -> Result<Option<Decapped>, TunnelError> {
    if pkt.len() < ETH {
        return Ok(None);
    }
    let (src, dst, tos, ttl, df, l4) = match be16(pkt, 12) {
        0x0800 => {
            let ip = &pkt[ETH..];
            if ip.len() < IPV4 || ip[9] != 17 {
                return Ok(None);
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if ip[0] >> 4 != 4 || ihl < IPV4 || ip.len() < ihl {
                return Err(TunnelError::Malformed("IPv4"));
            }
            let frag = be16(ip, 6);
            if frag & 0x3fff != 0 {
                return Err(TunnelError::Fragment);
            }
            let s: [u8; 4] = ip[12..16]
                .try_into()
                .map_err(|_| TunnelError::Malformed("IPv4"))?;
            let d: [u8; 4] = ip[16..20]
                .try_into()
                .map_err(|_| TunnelError::Malformed("IPv4"))?;
            (
                IpAddr::from(s),
                IpAddr::from(d),
                ip[1],
                ip[8],
                frag & 0x4000 != 0,
                ETH + ihl,
            )
        }
        0x86dd => {
            let ip = &pkt[ETH..];
            // Extension headers (a fragment header among them) are not
            // followed: such a packet is not decapsulated here.
            if ip.len() < IPV6 || ip[6] != 17 {
                return Ok(None);
            }
            let s: [u8; 16] = ip[8..24]
                .try_into()
                .map_err(|_| TunnelError::Malformed("IPv6"))?;
            let d: [u8; 16] = ip[24..40]
                .try_into()
                .map_err(|_| TunnelError::Malformed("IPv6"))?;
            let tc = ((be16(ip, 0) >> 4) & 0xff) as u8;
            (
                IpAddr::from(s),
                IpAddr::from(d),
                tc,
                ip[7],
                false,
                ETH + IPV6,
            )
        }
        _ => return Ok(None),
    };
    if pkt.len() < l4 + UDP {
        return Ok(None);
    }
    let udp_dst = be16(pkt, l4 + 2);
    let Some(&(_, kind)) = ports.iter().find(|(p, _)| *p == udp_dst) else {
        return Ok(None);
    };
    let udp_src = be16(pkt, l4);
    let csum = be16(pkt, l4 + 6) != 0;
    let t = l4 + UDP;
    let (vni, oam, opts, inner) = match kind {
        Kind::Vxlan => {
            if pkt.len() < t + VXLAN {
                return Err(TunnelError::Truncated("VXLAN header"));
            }
            if be32(pkt, t) & 0x0800_0000 == 0 {
                return Err(TunnelError::Malformed("VXLAN (no VNI flag)"));
            }
            (be32(pkt, t + 4) >> 8, false, 0..0, t + VXLAN)
        }
        Kind::Geneve => {
            if pkt.len() < t + GENEVE {
                return Err(TunnelError::Truncated("Geneve header"));
            }
            if pkt[t] >> 6 != 0 {
                return Err(TunnelError::Malformed("Geneve (version)"));
            }
            if be16(pkt, t + 2) != GENEVE_ETH {
                return Err(TunnelError::Malformed("Geneve (not an Ethernet payload)"));
            }
            let opt_len = usize::from(pkt[t] & 0x3f) * 4;
            let end = t + GENEVE + opt_len;
            if pkt.len() < end {
                return Err(TunnelError::Truncated("Geneve options"));
            }
            let mut at = t + GENEVE;
            while at < end {
                if at + 4 > end {
                    return Err(TunnelError::Malformed("Geneve option"));
                }
                let n = usize::from(pkt[at + 3] & 0x1f) * 4;
                if at + 4 + n > end {
                    return Err(TunnelError::Malformed("Geneve option"));
                }
                at += 4 + n;
            }
            (
                be32(pkt, t + 4) >> 8,
                pkt[t + 1] & 0x80 != 0,
                t + GENEVE..end,
                end,
            )
        }
    };
    if pkt.len() < inner + ETH {
        return Err(TunnelError::Truncated("inner Ethernet header"));
    }
    Ok(Some(Decapped {
        kind,
        src,
        dst,
        tos,
        ttl,
        df,
        udp_src,
        udp_dst,
        csum,
        oam,
        vni,
        opts,
        inner,
    }))
}

/// Where the bridge's TLV table puts one Geneve option in the key:
/// `tun_metadata<index>` is option (`class`, `ty`) of `len` bytes, at
/// byte `offset` of `tun_opts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptionSlot {
    pub index: u8,
    pub class: u16,
    pub ty: u8,
    pub offset: u8,
    pub len: u8,
}

impl OptionSlot {
    /// The bit of `tun_opts` the option's last byte ends at.
    pub fn shift(&self) -> u32 {
        8 * (TUN_OPT_SPACE as u32 - u32::from(self.offset) - u32::from(self.len))
    }

    /// Every bit of the option's own value (`len` bytes).
    pub fn ones(&self) -> u128 {
        if self.len as usize >= TUN_OPT_SPACE {
            u128::MAX
        } else {
            (1u128 << (8 * u32::from(self.len))) - 1
        }
    }

    /// The option's bits in `tun_opts`.
    pub fn mask(&self) -> u128 {
        self.ones() << self.shift()
    }

    /// The presence bit in `tun_md_present`.
    pub fn present_bit(&self) -> u64 {
        1 << self.index
    }
}

/// Why a packet's Geneve options cannot enter a flow key (Open vSwitch
/// drops such a packet too).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OptionError {
    #[error("Geneve option class {class:#06x} type {ty:#04x} is {got} bytes; its TLV mapping says {want}")]
    Length {
        class: u16,
        ty: u8,
        got: usize,
        want: u8,
    },
    #[error("unknown critical Geneve option class {class:#06x} type {ty:#04x}")]
    UnknownCritical { class: u16, ty: u8 },
}

/// The TLV table as the datapath applies it: which options fill which
/// bits of the key at receive, and which options an encapsulation
/// carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OptionMap {
    slots: Vec<OptionSlot>,
}

impl OptionMap {
    /// A map of `slots` (by index; each must fit [`TUN_OPT_SPACE`]).
    pub fn new(mut slots: Vec<OptionSlot>) -> OptionMap {
        slots.sort_by_key(|s| s.index);
        debug_assert!(slots
            .iter()
            .all(|s| usize::from(s.offset) + usize::from(s.len) <= TUN_OPT_SPACE));
        OptionMap { slots }
    }

    pub fn slots(&self) -> &[OptionSlot] {
        &self.slots
    }

    /// The key's `(tun_opts, tun_md_present)` of the raw Geneve options
    /// `raw` (as [`decap`] checked them well formed), by Open vSwitch's
    /// rules: a mapped option of another length, or an unmapped critical
    /// one, is an error; other unmapped options are ignored.
    pub fn read(&self, raw: &[u8]) -> Result<(u128, u64), OptionError> {
        let (mut opts, mut present) = (0u128, 0u64);
        for (class, ty, data) in raw_options(raw) {
            let n = data.len();
            match self.slots.iter().find(|s| (s.class, s.ty) == (class, ty)) {
                Some(s) if usize::from(s.len) == n => {
                    let v = data.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b));
                    opts |= v << s.shift();
                    present |= s.present_bit();
                }
                Some(s) => {
                    return Err(OptionError::Length {
                        class,
                        ty,
                        got: n,
                        want: s.len,
                    })
                }
                None if ty & 0x80 != 0 => return Err(OptionError::UnknownCritical { class, ty }),
                None => {}
            }
        }
        Ok((opts, present))
    }

    /// The options an encapsulation of a key with these `tun_opts` and
    /// `tun_md_present` carries, by index.
    pub fn options(&self, opts: u128, present: u64) -> Vec<GeneveOpt> {
        self.slots
            .iter()
            .filter(|s| present & s.present_bit() != 0)
            .map(|s| GeneveOpt {
                class: s.class,
                ty: s.ty,
                data: ((opts & s.mask()) >> s.shift()).to_be_bytes()
                    [TUN_OPT_SPACE - usize::from(s.len)..]
                    .to_vec(),
            })
            .collect()
    }
}

/// The tunnel metadata a decapsulated packet brings into its flow key
/// (the `tun_*` fields); all zero for a packet that came in no tunnel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunnelKey {
    pub id: u64,
    pub ipv4_src: u32,
    pub ipv4_dst: u32,
    pub ipv6_src: u128,
    pub ipv6_dst: u128,
    /// [`crate::key::TUN_FLAG_OAM`].
    pub flags: u16,
    pub tos: u8,
    pub ttl: u8,
    pub tp_src: u16,
    pub tp_dst: u16,
    /// Mapped Geneve option data (`tun_opts`), placed by an [`OptionMap`].
    pub opts: u128,
    /// Which `tun_metadata<n>` the packet carried (`tun_md_present`).
    pub present: u64,
}

impl TunnelKey {
    /// No tunnel.
    pub const NONE: TunnelKey = TunnelKey {
        id: 0,
        ipv4_src: 0,
        ipv4_dst: 0,
        ipv6_src: 0,
        ipv6_dst: 0,
        flags: 0,
        tos: 0,
        ttl: 0,
        tp_src: 0,
        tp_dst: 0,
        opts: 0,
        present: 0,
    };

    /// What a decapsulated packet's outer headers say.
    pub fn of(d: &Decapped) -> TunnelKey {
        let mut k = TunnelKey {
            id: u64::from(d.vni),
            flags: if d.oam {
                crate::key::TUN_FLAG_OAM as u16
            } else {
                0
            },
            tos: d.tos,
            ttl: d.ttl,
            tp_src: d.udp_src,
            tp_dst: d.udp_dst,
            ..TunnelKey::NONE
        };
        match (d.src, d.dst) {
            (IpAddr::V4(s), IpAddr::V4(t)) => {
                k.ipv4_src = u32::from(s);
                k.ipv4_dst = u32::from(t);
            }
            (s, t) => {
                k.ipv6_src = ip6_bits(s);
                k.ipv6_dst = ip6_bits(t);
            }
        }
        k
    }

    /// Whether the packet came in a tunnel.
    pub fn is_set(&self) -> bool {
        self.ipv4_dst != 0 || self.ipv6_dst != 0
    }

    /// Writes the `tun_*` fields of `key`.
    #[inline]
    pub fn write(&self, key: &mut FlowKey) {
        // The tunnel fields fill their words whole (checked below): whole
        // words are stored.
        let w = key.words_mut();
        w[6] = self.id;
        w[7] = u64::from(self.ipv4_src) << 32 | u64::from(self.ipv4_dst);
        w[22] = (self.ipv6_src >> 64) as u64;
        w[23] = self.ipv6_src as u64;
        w[24] = (self.ipv6_dst >> 64) as u64;
        w[25] = self.ipv6_dst as u64;
        w[26] = u64::from(self.flags) << 48
            | u64::from(self.tos) << 40
            | u64::from(self.ttl) << 32
            | u64::from(self.tp_src) << 16
            | u64::from(self.tp_dst);
        w[27] = (self.opts >> 64) as u64;
        w[28] = self.opts as u64;
        w[29] = self.present;
    }

    /// The `tun_*` fields of `key`.
    pub fn read(key: &FlowKey) -> TunnelKey {
        TunnelKey {
            id: key.tun_id(),
            ipv4_src: key.tun_src() as u32,
            ipv4_dst: key.tun_dst() as u32,
            ipv6_src: key.tun_ipv6_src(),
            ipv6_dst: key.tun_ipv6_dst(),
            flags: key.tun_flags() as u16,
            tos: key.tun_tos() as u8,
            ttl: key.tun_ttl() as u8,
            tp_src: key.tun_tp_src() as u16,
            tp_dst: key.tun_tp_dst() as u16,
            opts: key.tun_opts(),
            present: key.tun_md_present(),
        }
    }
}

// The layout [`TunnelKey::write`] stores whole words of.
const _: () = {
    use crate::key::Field as F;
    const fn at(f: F, word: u8, shift: u8) -> bool {
        let l = f.layout();
        l.word == word && l.shift == shift
    }
    assert!(at(F::TunId, 6, 0) && at(F::TunSrc, 7, 32) && at(F::TunDst, 7, 0));
    assert!(at(F::TunIpv6Src, 22, 0) && at(F::TunIpv6Dst, 24, 0));
    assert!(at(F::TunFlags, 26, 48) && at(F::TunTos, 26, 40) && at(F::TunTtl, 26, 32));
    assert!(at(F::TunTpSrc, 26, 16) && at(F::TunTpDst, 26, 0));
    assert!(at(F::TunOpts, 27, 0) && at(F::TunMdPresent, 29, 0));
};

fn ip6_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A hash of an inner frame's flow (its addresses and L4 ports, as far as
/// `layout` found them) for the outer UDP source port: packets of one
/// flow take one underlay path, different flows spread.
pub fn flow_hash(pkt: &[u8], layout: &crate::extract::Layout) -> u32 {
    use crate::extract::NO_OFFSET;
    let mut h = crate::key::WordHasher::new();
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        let n = b.len().min(8);
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    h.push(word(pkt.get(..12).unwrap_or(pkt)));
    if layout.l3 != NO_OFFSET {
        let l3 = usize::from(layout.l3);
        let addrs = match pkt.get(l3).map(|b| b >> 4) {
            Some(4) => pkt.get(l3 + 12..l3 + 20),
            Some(6) => pkt.get(l3 + 8..l3 + 40),
            _ => None,
        };
        for c in addrs.unwrap_or(&[]).chunks(8) {
            h.push(word(c));
        }
    }
    if layout.l4 != NO_OFFSET {
        let l4 = usize::from(layout.l4);
        h.push(word(pkt.get(l4..l4 + 4).unwrap_or(&[])));
    }
    let v = h.finish();
    (v ^ (v >> 32)) as u32
}

#[cfg(test)]
#[path = "tests/tunnel.rs"]
mod tests;

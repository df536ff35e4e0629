//! Megaflow [`Match`] → `fte_match_param` mask and value.
//!
//! One translator per layer consumes the fields it understands from a copy
//! of the mask (`Enc::take`) and writes mask and value together
//! (`Enc::put`, through the layout's one setter). Whatever is left at the
//! end has no device field and refuses the flow, naming the first such
//! field. The device rules followed are listed in the module comment of
//! [`prm`](super).

use megaflow::extract::{
    ETH_TYPE_ARP, ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_QINQ, ETH_TYPE_VLAN, IP_PROTO_ICMP,
    IP_PROTO_ICMPV6, IP_PROTO_SCTP, IP_PROTO_TCP, IP_PROTO_UDP,
};
use megaflow::key::{
    FRAG_ANY, FRAG_LATER, PACKET_META_FIELDS, TUNNEL_FIELDS, TUN_FLAG_OAM, VLAN_PRESENT,
    VLAN_VID_MASK,
};
use megaflow::tunnel::Kind;
use megaflow::{Field, FlowKey, Mask, Match, PortNo};

use super::layout::{set, PrmError, PrmField};
use super::{Encoded, PortMap, SourcePortMode, Unsupported};
use crate::Vport;

/// IPv6 extension header numbers the key's `ip_proto` never ends on.
const IPV6_EXT_HEADERS: [u8; 5] = [0, 43, 44, 51, 60];

/// Encodes a megaflow match as the device's mask and value. `ports` maps
/// `in_port` to its vport (and metadata tag); `mode` says how the FDB
/// matches the source port.
///
/// Errors name the first megaflow field the device cannot match as the
/// megaflow does; the flow then stays in software.
pub fn encode(
    m: &Match,
    mode: SourcePortMode,
    ports: &dyn PortMap,
) -> Result<Encoded, Unsupported> {
    let mut out = Encoded::EMPTY;
    encode_into(m, mode, ports, &mut out)?;
    Ok(out)
}

/// [`encode`] into a caller's buffer, for hot paths: only the blocks the
/// previous contents used are cleared. On error `out` holds a partial
/// encoding (still within its invariants) that must not be installed.
pub fn encode_into(
    m: &Match,
    mode: SourcePortMode,
    ports: &dyn PortMap,
    out: &mut Encoded,
) -> Result<(), Unsupported> {
    out.clear();
    let mut e = Enc {
        key: m.key(),
        left: *m.mask(),
        out,
        h: &OUTER,
    };
    match e.source_port(mode, ports)? {
        Some(kind) => {
            // The packet's own headers are the inner ones.
            e.tunnel(kind)?;
            e.h = &INNER;
        }
        None => e.no_tunnel()?,
    }
    e.packet_meta()?;
    let l3 = e.eth_type()?;
    e.eth_addrs()?;
    e.vlan(e.h.vlan1)?;
    e.vlan(e.h.vlan2)?;
    let proto = e.l3(l3)?;
    e.l4(proto)?;
    e.finish()
}

/// The device fields of one block of packet headers: the outer headers,
/// or the inner ones of a tunnel packet (`dr_match_spec` both, with their
/// second VLAN and flow label in misc).
struct Headers {
    smac: PrmField,
    dmac: PrmField,
    ethertype: PrmField,
    ip_version: PrmField,
    vlan1: VlanFields,
    vlan2: VlanFields,
    ip_protocol: PrmField,
    dscp: PrmField,
    ecn: PrmField,
    ttl: PrmField,
    frag: PrmField,
    src_ip: PrmField,
    dst_ip: PrmField,
    flow_label: PrmField,
    tcp_sport: PrmField,
    tcp_dport: PrmField,
    udp_sport: PrmField,
    udp_dport: PrmField,
    tcp_flags: PrmField,
}

const OUTER: Headers = Headers {
    smac: PrmField::OuterSmac,
    dmac: PrmField::OuterDmac,
    ethertype: PrmField::OuterEthertype,
    ip_version: PrmField::OuterIpVersion,
    vlan1: VlanFields {
        tpid: Field::VlanTpid,
        tci: Field::VlanTci,
        cvlan: PrmField::OuterCvlanTag,
        svlan: PrmField::OuterSvlanTag,
        prio: PrmField::OuterFirstPrio,
        vid: PrmField::OuterFirstVid,
    },
    vlan2: VlanFields {
        tpid: Field::Vlan2Tpid,
        tci: Field::Vlan2Tci,
        cvlan: PrmField::MiscOuterSecondCvlanTag,
        svlan: PrmField::MiscOuterSecondSvlanTag,
        prio: PrmField::MiscOuterSecondPrio,
        vid: PrmField::MiscOuterSecondVid,
    },
    ip_protocol: PrmField::OuterIpProtocol,
    dscp: PrmField::OuterIpDscp,
    ecn: PrmField::OuterIpEcn,
    ttl: PrmField::OuterIpTtlHoplimit,
    frag: PrmField::OuterFrag,
    src_ip: PrmField::OuterSrcIp,
    dst_ip: PrmField::OuterDstIp,
    flow_label: PrmField::MiscOuterIpv6FlowLabel,
    tcp_sport: PrmField::OuterTcpSport,
    tcp_dport: PrmField::OuterTcpDport,
    udp_sport: PrmField::OuterUdpSport,
    udp_dport: PrmField::OuterUdpDport,
    tcp_flags: PrmField::OuterTcpFlags,
};

const INNER: Headers = Headers {
    smac: PrmField::InnerSmac,
    dmac: PrmField::InnerDmac,
    ethertype: PrmField::InnerEthertype,
    ip_version: PrmField::InnerIpVersion,
    vlan1: VlanFields {
        tpid: Field::VlanTpid,
        tci: Field::VlanTci,
        cvlan: PrmField::InnerCvlanTag,
        svlan: PrmField::InnerSvlanTag,
        prio: PrmField::InnerFirstPrio,
        vid: PrmField::InnerFirstVid,
    },
    vlan2: VlanFields {
        tpid: Field::Vlan2Tpid,
        tci: Field::Vlan2Tci,
        cvlan: PrmField::MiscInnerSecondCvlanTag,
        svlan: PrmField::MiscInnerSecondSvlanTag,
        prio: PrmField::MiscInnerSecondPrio,
        vid: PrmField::MiscInnerSecondVid,
    },
    ip_protocol: PrmField::InnerIpProtocol,
    dscp: PrmField::InnerIpDscp,
    ecn: PrmField::InnerIpEcn,
    ttl: PrmField::InnerIpTtlHoplimit,
    frag: PrmField::InnerFrag,
    src_ip: PrmField::InnerSrcIp,
    dst_ip: PrmField::InnerDstIp,
    flow_label: PrmField::MiscInnerIpv6FlowLabel,
    tcp_sport: PrmField::InnerTcpSport,
    tcp_dport: PrmField::InnerTcpDport,
    udp_sport: PrmField::InnerUdpSport,
    udp_dport: PrmField::InnerUdpDport,
    tcp_flags: PrmField::InnerTcpFlags,
};

/// What the exact `eth_type` says about L3.
#[derive(Clone, Copy, PartialEq, Eq)]
enum L3 {
    /// `eth_type` wildcarded.
    Any,
    Ipv4,
    Ipv6,
    Arp,
    /// Another exact ethertype.
    Other,
}

/// The key and mask fields of one VLAN tag and the device fields they map to.
#[derive(Clone, Copy)]
struct VlanFields {
    tpid: Field,
    tci: Field,
    cvlan: PrmField,
    svlan: PrmField,
    prio: PrmField,
    vid: PrmField,
}

/// The encoder's state: the match's key, the mask bits not consumed yet,
/// and the output.
struct Enc<'a> {
    key: &'a FlowKey,
    left: Mask,
    out: &'a mut Encoded,
    /// Where the packet's own headers go.
    h: &'static Headers,
}

/// Shorthand for an [`Unsupported`] error.
fn no<T>(field: Field, reason: &'static str) -> Result<T, Unsupported> {
    Err(Unsupported { field, reason })
}

impl Enc<'_> {
    /// Consumes a field: its (value, mask) if any mask bit is set.
    #[inline(always)]
    fn take(&mut self, f: Field) -> Option<(u128, u128)> {
        let m = self.left.field(f);
        if m == 0 {
            return None;
        }
        self.left.set_field(f, 0);
        Some((self.key.field(f), m))
    }

    /// Writes mask `m` and value `v & m` of a device field for the megaflow
    /// field `src`, through the layout's setter; a mask wider than the
    /// device field refuses `src`.
    #[inline(always)]
    fn put(&mut self, src: Field, dst: PrmField, v: u128, m: u128) -> Result<(), Unsupported> {
        let r = set(&mut self.out.mask, dst, m).and_then(|()| set(&mut self.out.value, dst, v & m));
        match r {
            Ok(()) => {
                if m != 0 {
                    self.out.criteria |= dst.def().block.criteria_bit();
                }
                Ok(())
            }
            Err(PrmError::ValueTooWide { .. }) => no(src, "mask wider than the device field"),
            Err(_) => no(src, "device field outside the encoded blocks"),
        }
    }

    /// `eth_type`: exact ethertypes only; IPv4/IPv6 also set `ip_version`.
    fn eth_type(&mut self) -> Result<L3, Unsupported> {
        let f = Field::EthType;
        let Some((v, m)) = self.take(f) else {
            return Ok(L3::Any);
        };
        if m != 0xffff {
            return no(
                f,
                "partial ethertype mask: the device sees 802.3 lengths where the key has 0x05ff",
            );
        }
        let ty = v as u16;
        if ty < 0x0600 {
            return no(
                f,
                "802.3 frame without ethertype: the device sees the length field",
            );
        }
        if ty == ETH_TYPE_VLAN || ty == ETH_TYPE_QINQ {
            return no(f, "third VLAN tag: the device matches two tags");
        }
        self.put(f, self.h.ethertype, v, m)?;
        Ok(match ty {
            ETH_TYPE_IPV4 => {
                self.put(f, self.h.ip_version, 4, 4)?;
                L3::Ipv4
            }
            ETH_TYPE_IPV6 => {
                self.put(f, self.h.ip_version, 6, 6)?;
                L3::Ipv6
            }
            ETH_TYPE_ARP => L3::Arp,
            _ => L3::Other,
        })
    }

    /// `in_port` → `misc.source_port` or `metadata_reg_c_0`; a tunnel
    /// port's packets come from its uplink, and the tunnel's kind is
    /// returned.
    fn source_port(
        &mut self,
        mode: SourcePortMode,
        ports: &dyn PortMap,
    ) -> Result<Option<Kind>, Unsupported> {
        let f = Field::InPort;
        let Some((v, m)) = self.take(f) else {
            return Ok(None);
        };
        if m != u128::from(u32::MAX) {
            return no(f, "partial in_port mask");
        }
        let port = PortNo(v as u32);
        if let Some(t) = ports.tunnel(port) {
            self.source_vport(mode, ports, t.uplink)?;
            return Ok(Some(t.kind));
        }
        let Some(vport) = ports.vport(port) else {
            return no(f, "not an eSwitch port (no vport)");
        };
        self.source_vport(mode, ports, vport)?;
        Ok(None)
    }

    /// The rule's source vport.
    fn source_vport(
        &mut self,
        mode: SourcePortMode,
        ports: &dyn PortMap,
        vport: Vport,
    ) -> Result<(), Unsupported> {
        let f = Field::InPort;
        match mode {
            SourcePortMode::MiscSourcePort => {
                self.put(f, PrmField::MiscSourcePort, u128::from(vport.0), 0xffff)
            }
            SourcePortMode::Metadata { mask, shift } => {
                let Some(tag) = ports.metadata_tag(vport) else {
                    return no(f, "vport has no metadata tag");
                };
                let value = u64::from(tag)
                    .checked_shl(u32::from(shift))
                    .unwrap_or(u64::MAX);
                if mask == 0 || value & !u64::from(mask) != 0 {
                    return no(f, "vport metadata tag does not fit the reg_c_0 mask");
                }
                self.put(
                    f,
                    PrmField::Misc2MetadataRegC0,
                    u128::from(value),
                    u128::from(mask),
                )
            }
        }
    }

    /// `eth_src`, `eth_dst`: any bit mask.
    fn eth_addrs(&mut self) -> Result<(), Unsupported> {
        if let Some((v, m)) = self.take(Field::EthSrc) {
            self.put(Field::EthSrc, self.h.smac, v, m)?;
        }
        if let Some((v, m)) = self.take(Field::EthDst) {
            self.put(Field::EthDst, self.h.dmac, v, m)?;
        }
        Ok(())
    }

    /// One VLAN tag: presence and TPID → the C/S qualifier; PCP and VID bits
    /// → prio and vid. Inlined so the field constants fold.
    #[inline(always)]
    fn vlan(&mut self, t: VlanFields) -> Result<(), Unsupported> {
        let tpid = self.take(t.tpid);
        let (tv, tm) = self.take(t.tci).unwrap_or((0, 0));
        let present = u128::from(VLAN_PRESENT);
        // The qualifier: Some((cvlan, svlan)) when the tag kind is known.
        let qual = match tpid {
            Some((v, m)) => {
                if m != 0xffff {
                    return no(t.tpid, "partial TPID mask");
                }
                let q = match v as u16 {
                    0 => (false, false),
                    ETH_TYPE_VLAN => (true, false),
                    ETH_TYPE_QINQ => (false, true),
                    _ => return no(t.tpid, "TPID other than 0x8100 or 0x88a8"),
                };
                if tm & present != 0 && (tv & present != 0) != (v != 0) {
                    return no(t.tci, "tag presence contradicts the TPID");
                }
                Some(q)
            }
            None if tm & present != 0 => {
                if tv & present != 0 {
                    return no(
                        t.tci,
                        "tag of any TPID: the device matches C-VLAN or S-VLAN, not either \
                         (the mask needs the TPID)",
                    );
                }
                Some((false, false))
            }
            None if tm != 0 => {
                return no(t.tci, "VID/PCP bits without tag presence and TPID");
            }
            None => None,
        };
        if let Some((c, s)) = qual {
            self.put(t.tci, t.cvlan, u128::from(c), 1)?;
            self.put(t.tci, t.svlan, u128::from(s), 1)?;
        }
        let pcp = (tm >> 13) & 7;
        if pcp != 0 {
            self.put(t.tci, t.prio, tv >> 13, pcp)?;
        }
        let vid = tm & u128::from(VLAN_VID_MASK);
        if vid != 0 {
            self.put(t.tci, t.vid, tv & u128::from(VLAN_VID_MASK), vid)?;
        }
        Ok(())
    }

    /// Checks that an L3 field may be matched under `l3`.
    fn need_ip(f: Field, l3: L3) -> Result<(), Unsupported> {
        match l3 {
            L3::Ipv4 | L3::Ipv6 => Ok(()),
            L3::Arp => no(f, "ARP field: the device has none"),
            _ => no(f, "needs an exact IPv4 or IPv6 eth_type"),
        }
    }

    /// L3: protocol, DSCP, ECN, TTL, fragments, addresses, flow label.
    /// Returns the exact `ip_proto`, if any.
    fn l3(&mut self, l3: L3) -> Result<Option<u8>, Unsupported> {
        let mut proto = None;
        if let Some((v, m)) = self.take(Field::IpProto) {
            Self::need_ip(Field::IpProto, l3)?;
            if l3 == L3::Ipv6 && (m != 0xff || IPV6_EXT_HEADERS.contains(&(v as u8))) {
                return no(
                    Field::IpProto,
                    "IPv6 next header must be exact and not an extension header",
                );
            }
            if m == 0xff {
                proto = Some(v as u8);
            }
            self.put(Field::IpProto, self.h.ip_protocol, v, m)?;
        }
        self.plain(Field::IpDscp, self.h.dscp, l3)?;
        self.plain(Field::IpEcn, self.h.ecn, l3)?;
        self.plain(Field::IpTtl, self.h.ttl, l3)?;
        if let Some((v, m)) = self.take(Field::IpFrag) {
            let f = Field::IpFrag;
            Self::need_ip(f, l3)?;
            let any = u128::from(FRAG_ANY);
            let later = u128::from(FRAG_LATER);
            // Keys only ever set FRAG_ANY and FRAG_LATER: other mask bits
            // with value 0 always hold and are dropped.
            if v & !(any | later) != 0 {
                return no(f, "fragment bits the flow key never sets");
            }
            let m = m & (any | later);
            let bit = if m == any {
                v
            } else if m == any | later && v == 0 {
                0
            } else {
                return no(f, "first vs later fragment: the device has one frag bit");
            };
            self.put(f, self.h.frag, bit, 1)?;
        }
        // IPv4 sits in the last 32 bits of the 128-bit address fields.
        self.addr(Field::Ipv4Src, self.h.src_ip, l3, L3::Ipv4)?;
        self.addr(Field::Ipv4Dst, self.h.dst_ip, l3, L3::Ipv4)?;
        self.addr(Field::Ipv6Src, self.h.src_ip, l3, L3::Ipv6)?;
        self.addr(Field::Ipv6Dst, self.h.dst_ip, l3, L3::Ipv6)?;
        if let Some((v, m)) = self.take(Field::Ipv6Label) {
            let f = Field::Ipv6Label;
            Self::need_ip(f, l3)?;
            if l3 != L3::Ipv6 {
                return no(f, "flow label of an IPv4 flow");
            }
            self.put(f, self.h.flow_label, v, m)?;
        }
        Ok(proto)
    }

    /// An L3 field copied bit for bit.
    #[inline(always)]
    fn plain(&mut self, f: Field, dst: PrmField, l3: L3) -> Result<(), Unsupported> {
        if let Some((v, m)) = self.take(f) {
            Self::need_ip(f, l3)?;
            self.put(f, dst, v, m)?;
        }
        Ok(())
    }

    /// An address of IP version `want`.
    #[inline(always)]
    fn addr(&mut self, f: Field, dst: PrmField, l3: L3, want: L3) -> Result<(), Unsupported> {
        if let Some((v, m)) = self.take(f) {
            Self::need_ip(f, l3)?;
            if l3 != want {
                return no(f, "address of the other IP version");
            }
            self.put(f, dst, v, m)?;
        }
        Ok(())
    }

    /// L4: TCP or UDP ports by `ip_proto`, TCP flags.
    fn l4(&mut self, proto: Option<u8>) -> Result<(), Unsupported> {
        self.port(Field::TpSrc, self.h.tcp_sport, self.h.udp_sport, proto)?;
        self.port(Field::TpDst, self.h.tcp_dport, self.h.udp_dport, proto)?;
        if let Some((v, m)) = self.take(Field::TcpFlags) {
            if proto != Some(IP_PROTO_TCP) {
                return no(Field::TcpFlags, "TCP flags without ip_proto 6");
            }
            self.put(Field::TcpFlags, self.h.tcp_flags, v, m)?;
        }
        Ok(())
    }

    /// One L4 port: the TCP or the UDP field by `ip_proto`.
    #[inline(always)]
    fn port(
        &mut self,
        f: Field,
        tcp: PrmField,
        udp: PrmField,
        proto: Option<u8>,
    ) -> Result<(), Unsupported> {
        let Some((v, m)) = self.take(f) else {
            return Ok(());
        };
        // One put per arm, so each writes a constant field.
        match proto {
            Some(IP_PROTO_TCP) => self.put(f, tcp, v, m),
            Some(IP_PROTO_UDP) => self.put(f, udp, v, m),
            Some(IP_PROTO_ICMP | IP_PROTO_ICMPV6) => no(
                f,
                "ICMP type/code: not mapped to the device's misc3 ICMP fields",
            ),
            Some(IP_PROTO_SCTP) => no(f, "SCTP port: the device has TCP and UDP port fields only"),
            _ => no(f, "L4 port without an exact TCP or UDP ip_proto"),
        }
    }

    /// A packet from a tunnel of `kind`: its tunnel metadata are the outer
    /// headers the device parses before decap (IPv4 or IPv6 by the
    /// addresses matched, UDP, not a fragment), the UDP port the device
    /// parses the tunnel on, and the VNI (and Geneve's OAM bit and
    /// Ethernet payload, as software's decap requires).
    fn tunnel(&mut self, kind: Kind) -> Result<(), Unsupported> {
        let src4 = self.take(Field::TunSrc);
        let dst4 = self.take(Field::TunDst);
        let src6 = self.take(Field::TunIpv6Src);
        let dst6 = self.take(Field::TunIpv6Dst);
        let v4 = src4.is_some() || dst4.is_some();
        let v6 = src6.is_some() || dst6.is_some();
        let (ty, ver, src, dst) = match (v4, v6) {
            (true, false) => (
                ETH_TYPE_IPV4,
                4,
                (Field::TunSrc, src4),
                (Field::TunDst, dst4),
            ),
            (false, true) => (
                ETH_TYPE_IPV6,
                6,
                (Field::TunIpv6Src, src6),
                (Field::TunIpv6Dst, dst6),
            ),
            (true, true) => return no(Field::TunIpv6Dst, "IPv4 and IPv6 tunnel addresses"),
            (false, false) => {
                return no(
                    Field::TunDst,
                    "tunnel addresses not matched: a rule could take another tunnel's packets",
                )
            }
        };
        let f = dst.0;
        self.put(f, PrmField::OuterEthertype, u128::from(ty), 0xffff)?;
        self.put(f, PrmField::OuterIpVersion, ver, ver)?;
        self.put(f, PrmField::OuterIpProtocol, u128::from(IP_PROTO_UDP), 0xff)?;
        // Software decapsulates no outer fragment.
        self.put(f, PrmField::OuterFrag, 0, 1)?;
        for ((field, vm), prm) in [(src, PrmField::OuterSrcIp), (dst, PrmField::OuterDstIp)] {
            if let Some((v, m)) = vm {
                self.put(field, prm, v, m)?;
            }
        }
        let f = Field::TunTpDst;
        match self.take(f) {
            Some((v, 0xffff)) if v == u128::from(kind.default_port()) => {
                self.put(f, PrmField::OuterUdpDport, v, 0xffff)?;
            }
            Some((_, 0xffff)) => {
                return no(
                    f,
                    "the device parses VXLAN on UDP port 4789 and Geneve on 6081 only",
                )
            }
            _ => {
                return no(
                    f,
                    "UDP port not exact: the device parses a tunnel by its port",
                )
            }
        }
        if let Some((v, m)) = self.take(Field::TunTpSrc) {
            self.put(Field::TunTpSrc, PrmField::OuterUdpSport, v, m)?;
        }
        if let Some((v, m)) = self.take(Field::TunTtl) {
            self.put(Field::TunTtl, PrmField::OuterIpTtlHoplimit, v, m)?;
        }
        if let Some((v, m)) = self.take(Field::TunTos) {
            if m >> 2 != 0 {
                self.put(Field::TunTos, PrmField::OuterIpDscp, v >> 2, m >> 2)?;
            }
            if m & 3 != 0 {
                self.put(Field::TunTos, PrmField::OuterIpEcn, v & 3, m & 3)?;
            }
        }
        let vni = match kind {
            Kind::Vxlan => PrmField::MiscVxlanVni,
            Kind::Geneve => PrmField::MiscGeneveVni,
        };
        if let Some((v, m)) = self.take(Field::TunId) {
            if v & m & !0xff_ffff != 0 {
                return no(
                    Field::TunId,
                    "tun_id above the 24-bit VNI: no packet has it",
                );
            }
            self.put(Field::TunId, vni, v & 0xff_ffff, m & 0xff_ffff)?;
        }
        if let Some((v, m)) = self.take(Field::TunFlags) {
            let oam = u128::from(TUN_FLAG_OAM);
            if v & m & !oam != 0 {
                return no(Field::TunFlags, "a tunnel flag decap never sets");
            }
            match kind {
                Kind::Geneve if m & oam != 0 => {
                    self.put(Field::TunFlags, PrmField::MiscGeneveOam, v & oam, 1)?;
                }
                Kind::Vxlan if v & m & oam != 0 => {
                    return no(Field::TunFlags, "OAM on VXLAN: decap never sets it");
                }
                _ => {}
            }
        }
        if kind == Kind::Geneve {
            // Software decapsulates only an Ethernet payload.
            self.put(
                Field::TunDst,
                PrmField::MiscGeneveProtocolType,
                u128::from(megaflow::tunnel::GENEVE_ETH),
                0xffff,
            )?;
        }
        self.no_options(kind)
    }

    /// Geneve options: the device reads them only through its flex parser,
    /// which this backend does not program. So a decap rule takes only
    /// packets with no options (`geneve_opt_len` 0), whose `tun_opts` and
    /// `tun_md_present` are zero: a match on zeros there holds and is
    /// dropped; any other stays in software. A packet with options misses
    /// the rule and is switched in software, where its options are read.
    fn no_options(&mut self, kind: Kind) -> Result<(), Unsupported> {
        for f in [Field::TunOpts, Field::TunMdPresent] {
            if let Some((v, m)) = self.take(f) {
                if v & m != 0 {
                    return no(
                        f,
                        "a Geneve option match needs the device's flex parser, which this backend does not program",
                    );
                }
            }
        }
        if kind == Kind::Geneve {
            self.put(Field::TunDst, PrmField::MiscGeneveOptLen, 0, 0x3f)?;
        }
        Ok(())
    }

    /// A packet from no tunnel has zero tunnel metadata: a match on zeros
    /// always holds and is dropped; any other value never does.
    fn no_tunnel(&mut self) -> Result<(), Unsupported> {
        for f in TUNNEL_FIELDS {
            if let Some((v, m)) = self.take(f) {
                if v & m != 0 {
                    return no(f, "tunnel metadata on a packet from no tunnel port");
                }
            }
        }
        Ok(())
    }

    /// A later stage's megaflow (an exact non-zero `recirc_id`) matches
    /// what the conntrack chain wrote into registers
    /// ([`crate::ct`]); a first stage's, nothing of the packet's metadata.
    fn packet_meta(&mut self) -> Result<(), Unsupported> {
        let later = {
            let m = self.left.field(Field::RecircId);
            m != 0 && self.key.field(Field::RecircId) & m != 0
        };
        if !later {
            return self.no_packet_meta();
        }
        let reg = |n: u8| PrmField::reg_c(n).expect("the chain's registers exist");
        let (v, m) = self.take(Field::RecircId).expect("a later stage's mask");
        if m != 0xffff_ffff {
            return no(Field::RecircId, "a partial recirc_id match");
        }
        self.put(Field::RecircId, reg(crate::ct::REG_RECIRC), v, m)?;
        let shift = crate::ct::STATE_SHIFT;
        let (zv, zm) = self.take(Field::CtZone).unwrap_or((0, 0));
        let (sv, sm) = self.take(Field::CtState).unwrap_or((0, 0));
        let (v, m) = (zv | sv << shift, zm | sm << shift);
        if m != 0 {
            self.put(Field::CtState, reg(crate::ct::REG_ZONE_STATE), v, m)?;
        }
        if let Some((v, m)) = self.take(Field::CtMark) {
            self.put(Field::CtMark, reg(crate::ct::REG_MARK), v, m)?;
        }
        for f in PACKET_META_FIELDS {
            // take() gives only fields with mask bits set.
            if self.take(f).is_some() {
                let why = match f {
                    Field::CtLabel => "ct_label: the FDB's conntrack table carries no labels",
                    Field::DpHash => "dp_hash: the device does not hash packets",
                    _ => "the original direction's tuple: the FDB's conntrack table does not write it",
                };
                return no(f, why);
            }
        }
        Ok(())
    }

    /// A packet from a port (the root table's) has not recirculated nor
    /// been through `ct()`: `recirc_id`, `dp_hash` and the ct fields are
    /// zero. A match on zeros there holds and is dropped; any other value
    /// belongs to a later stage, which this FDB layout has no table for.
    fn no_packet_meta(&mut self) -> Result<(), Unsupported> {
        for f in PACKET_META_FIELDS {
            if let Some((v, m)) = self.take(f) {
                if v & m != 0 {
                    return no(
                        f,
                        "tracking state on a first stage: only the conntrack table writes it",
                    );
                }
            }
        }
        Ok(())
    }

    /// Bits outside every key field are ignored: keys and packets hold
    /// zero there.
    fn finish(&self) -> Result<(), Unsupported> {
        if self.left.words().iter().all(|&w| w == 0) {
            return Ok(());
        }
        match self.left.fields().next() {
            Some(field) => no(field, leftover_reason(field)),
            None => Ok(()),
        }
    }
}

/// Why a field no translator takes cannot be offloaded.
fn leftover_reason(f: Field) -> &'static str {
    match f {
        Field::PktMark => "pkt_mark is pipeline metadata: the device has no such field",
        Field::Metadata
        | Field::Reg0
        | Field::Reg1
        | Field::Reg2
        | Field::Reg3
        | Field::Reg4
        | Field::Reg5
        | Field::Reg6
        | Field::Reg7
        | Field::Reg8
        | Field::Reg9
        | Field::Reg10
        | Field::Reg11
        | Field::Reg12
        | Field::Reg13
        | Field::Reg14
        | Field::Reg15 => "pipeline metadata/register: the device has no such field",
        Field::TunId
        | Field::TunSrc
        | Field::TunDst
        | Field::TunIpv6Src
        | Field::TunIpv6Dst
        | Field::TunFlags
        | Field::TunTos
        | Field::TunTtl
        | Field::TunTpSrc
        | Field::TunTpDst
        | Field::TunOpts
        | Field::TunMdPresent => "tunnel metadata the device does not match",
        Field::NdTarget => "ND target: the device has no such field",
        Field::ArpSha | Field::ArpTha => "ARP/ND link-layer address: the device has no such field",
        _ => "the device has no such field",
    }
}

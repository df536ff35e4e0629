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
use megaflow::key::{FRAG_ANY, FRAG_LATER, VLAN_PRESENT, VLAN_VID_MASK};
use megaflow::{Field, FlowKey, Mask, Match, PortNo};

use super::layout::{set, PrmError, PrmField};
use super::{Encoded, PortMap, SourcePortMode, Unsupported};

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
    };
    let l3 = e.eth_type()?;
    e.source_port(mode, ports)?;
    e.eth_addrs()?;
    e.vlan(VLAN1)?;
    e.vlan(VLAN2)?;
    let proto = e.l3(l3)?;
    e.l4(proto)?;
    e.finish()
}

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
struct VlanFields {
    tpid: Field,
    tci: Field,
    cvlan: PrmField,
    svlan: PrmField,
    prio: PrmField,
    vid: PrmField,
}

const VLAN1: VlanFields = VlanFields {
    tpid: Field::VlanTpid,
    tci: Field::VlanTci,
    cvlan: PrmField::OuterCvlanTag,
    svlan: PrmField::OuterSvlanTag,
    prio: PrmField::OuterFirstPrio,
    vid: PrmField::OuterFirstVid,
};

const VLAN2: VlanFields = VlanFields {
    tpid: Field::Vlan2Tpid,
    tci: Field::Vlan2Tci,
    cvlan: PrmField::MiscOuterSecondCvlanTag,
    svlan: PrmField::MiscOuterSecondSvlanTag,
    prio: PrmField::MiscOuterSecondPrio,
    vid: PrmField::MiscOuterSecondVid,
};

/// The encoder's state: the match's key, the mask bits not consumed yet,
/// and the output.
struct Enc<'a> {
    key: &'a FlowKey,
    left: Mask,
    out: &'a mut Encoded,
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
        self.put(f, PrmField::OuterEthertype, v, m)?;
        Ok(match ty {
            ETH_TYPE_IPV4 => {
                self.put(f, PrmField::OuterIpVersion, 4, 4)?;
                L3::Ipv4
            }
            ETH_TYPE_IPV6 => {
                self.put(f, PrmField::OuterIpVersion, 6, 6)?;
                L3::Ipv6
            }
            ETH_TYPE_ARP => L3::Arp,
            _ => L3::Other,
        })
    }

    /// `in_port` → `misc.source_port` or `metadata_reg_c_0`.
    fn source_port(
        &mut self,
        mode: SourcePortMode,
        ports: &dyn PortMap,
    ) -> Result<(), Unsupported> {
        let f = Field::InPort;
        let Some((v, m)) = self.take(f) else {
            return Ok(());
        };
        if m != u128::from(u32::MAX) {
            return no(f, "partial in_port mask");
        }
        let Some(vport) = ports.vport(PortNo(v as u32)) else {
            return no(f, "not an eSwitch port (no vport)");
        };
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
            self.put(Field::EthSrc, PrmField::OuterSmac, v, m)?;
        }
        if let Some((v, m)) = self.take(Field::EthDst) {
            self.put(Field::EthDst, PrmField::OuterDmac, v, m)?;
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
            self.put(Field::IpProto, PrmField::OuterIpProtocol, v, m)?;
        }
        self.plain(Field::IpDscp, PrmField::OuterIpDscp, l3)?;
        self.plain(Field::IpEcn, PrmField::OuterIpEcn, l3)?;
        self.plain(Field::IpTtl, PrmField::OuterIpTtlHoplimit, l3)?;
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
            self.put(f, PrmField::OuterFrag, bit, 1)?;
        }
        // IPv4 sits in the last 32 bits of the 128-bit address fields.
        self.addr(Field::Ipv4Src, PrmField::OuterSrcIp, l3, L3::Ipv4)?;
        self.addr(Field::Ipv4Dst, PrmField::OuterDstIp, l3, L3::Ipv4)?;
        self.addr(Field::Ipv6Src, PrmField::OuterSrcIp, l3, L3::Ipv6)?;
        self.addr(Field::Ipv6Dst, PrmField::OuterDstIp, l3, L3::Ipv6)?;
        if let Some((v, m)) = self.take(Field::Ipv6Label) {
            let f = Field::Ipv6Label;
            Self::need_ip(f, l3)?;
            if l3 != L3::Ipv6 {
                return no(f, "flow label of an IPv4 flow");
            }
            self.put(f, PrmField::MiscOuterIpv6FlowLabel, v, m)?;
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
        self.port(
            Field::TpSrc,
            PrmField::OuterTcpSport,
            PrmField::OuterUdpSport,
            proto,
        )?;
        self.port(
            Field::TpDst,
            PrmField::OuterTcpDport,
            PrmField::OuterUdpDport,
            proto,
        )?;
        if let Some((v, m)) = self.take(Field::TcpFlags) {
            if proto != Some(IP_PROTO_TCP) {
                return no(Field::TcpFlags, "TCP flags without ip_proto 6");
            }
            self.put(Field::TcpFlags, PrmField::OuterTcpFlags, v, m)?;
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
        | Field::Reg7 => "pipeline metadata/register: the device has no such field",
        Field::TunId
        | Field::TunSrc
        | Field::TunDst
        | Field::TunIpv6Src
        | Field::TunIpv6Dst
        | Field::TunFlags
        | Field::TunTos
        | Field::TunTtl
        | Field::TunTpSrc
        | Field::TunTpDst => "tunnel metadata: decap offload not implemented",
        Field::NdTarget => "ND target: the device has no such field",
        Field::ArpSha | Field::ArpTha => "ARP/ND link-layer address: the device has no such field",
        _ => "the device has no such field",
    }
}

//! Match fields of the flow syntax: the name table, value parsing per kind of
//! field, prerequisites, the builder that assembles a [`Match`], and the
//! `FIELD[a..b]` subfields of `load` and `move`.
//!
//! The table ([`FIELDS`]) is data: each `ovs-fields(7)` name (and alias) maps
//! to a key [`Field`], a [`Kind`] saying how its text reads (an address, a
//! number, one of the VLAN spellings that touch part of `vlan_tci`...), a
//! [`Prereq`] and whether actions may write it. Parsing a value yields a
//! `(value, mask)` pair in the field's own bit layout; the builder narrows
//! the match with it through [`Match::set_field_masked`], so wildcarded key
//! bits stay zero.
//!
//! Duplicates: a field given twice must be given the same way (else
//! `duplicate field`); two spellings that touch the same bits (`ip` and
//! `ipv6`, `dl_vlan=0xffff` and `dl_vlan_pcp`) must agree on the bits both
//! touch (else a conflict). Prerequisites are checked once the whole match
//! has been read, so `tp_dst=80,tcp` is as good as `tcp,tp_dst=80`.

use megaflow::key::{FRAG_ANY, FRAG_LATER, VLAN_PRESENT};
use megaflow::tunnel::OptionSlot;
use megaflow::{Field, Match};

use super::value::{self, VResult, ValueError};
use super::{ParseError, ParseErrorKind};
use crate::rule::FieldRange;
use crate::tlv::TlvTable;

/// How a field's value reads and which bits of its key field it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A port number or reserved port name (`in_port`).
    Port,
    /// `aa:bb:cc:dd:ee:ff[/MASK]`.
    Mac,
    /// `a.b.c.d[/N|/MASK]`.
    Ipv4,
    /// IPv6 address `[/N|/MASK]`.
    Ipv6,
    /// A number printed in decimal (ports, TTL...), `V[/M]`.
    Dec,
    /// A number printed in hex (registers, metadata...), `V[/M]`.
    Hex,
    /// `dl_vlan`: a VID (tagged) or `0xffff` (untagged).
    DlVlan,
    /// `dl_vlan_pcp`: a PCP of a tagged frame.
    VlanPcp,
    /// `vlan_vid`: OXM style, the present bit is part of the value.
    VlanVid,
    /// `nw_tos`: the ToS byte; stored as its DSCP (`tos >> 2`).
    NwTos,
    /// `nw_frag`: `no|yes|first|later|not_later` or a number.
    Frag,
    /// `tcp_flags`: `+syn-ack` flag syntax or a number.
    TcpFlags,
    /// `tun_flags`: `+oam` flag syntax or a number.
    TunFlags,
    /// `ct_state`: `+trk-new` flag syntax, `est|trk` (exact), or a number.
    CtState,
}

impl Kind {
    /// True for kinds whose value is the key field itself, bit for bit (so
    /// they may name a `load`/`move` subfield).
    fn is_plain(self) -> bool {
        !matches!(
            self,
            Kind::DlVlan | Kind::VlanPcp | Kind::VlanVid | Kind::NwTos
        )
    }
}

/// What the rest of a match must say for a field to make sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prereq {
    None,
    /// IPv4 or ARP/RARP (`nw_src`: an ARP SPA under `arp`).
    IpOrArp,
    /// IPv4 only (`ipv4_src`: under `arp` the wire field is ARP_SPA).
    Ipv4,
    /// IPv4 or IPv6.
    IpAny,
    Arp,
    Ipv6,
    /// TCP, UDP or SCTP over IPv4 or IPv6.
    L4,
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Icmp6,
    /// ICMPv6 neighbour solicitation or advertisement.
    Nd,
    /// ICMPv6 neighbour solicitation.
    NdSll,
    /// ICMPv6 neighbour advertisement.
    NdTll,
    /// A tracked, valid connection: `ct_state` with one of new, est, rel,
    /// rpl, snat, dnat, or `+trk-inv` (Open vSwitch's `is_ct_valid`).
    Ct,
}

pub(crate) const ETH_IP: u128 = 0x0800;
pub(crate) const ETH_IPV6: u128 = 0x86dd;
pub(crate) const ETH_ARP: u128 = 0x0806;
pub(crate) const ETH_RARP: u128 = 0x8035;
pub(crate) const PROTO_ICMP: u128 = 1;
pub(crate) const PROTO_TCP: u128 = 6;
pub(crate) const PROTO_UDP: u128 = 17;
pub(crate) const PROTO_SCTP: u128 = 132;
pub(crate) const PROTO_ICMP6: u128 = 58;
const ND_SOLICIT: u128 = 135;
const ND_ADVERT: u128 = 136;

/// The value of `field` when the match pins all of its bits.
pub(crate) fn exact(m: &Match, field: Field) -> Option<u128> {
    m.mask().is_exact(field).then(|| m.key().field(field))
}

impl Prereq {
    /// The shorthand the message names when the prerequisite is missing.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Prereq::None => "",
            Prereq::IpOrArp | Prereq::Ipv4 => "ip",
            Prereq::IpAny => "ip or ipv6",
            Prereq::Arp => "arp",
            Prereq::Ipv6 => "ipv6",
            Prereq::L4 => "tcp, udp or sctp",
            Prereq::Tcp => "tcp",
            Prereq::Udp => "udp",
            Prereq::Sctp => "sctp",
            Prereq::Icmp => "icmp",
            Prereq::Icmp6 => "icmp6",
            Prereq::Nd => "icmp6,icmpv6_type=135 or 136",
            Prereq::NdSll => "icmp6,icmpv6_type=135",
            Prereq::NdTll => "icmp6,icmpv6_type=136",
            Prereq::Ct => "ct_state=+trk-inv (or +new, +est, +rel, +rpl, +snat, +dnat)",
        }
    }

    /// True when `m` satisfies the prerequisite.
    pub(crate) fn holds(self, m: &Match) -> bool {
        let eth = exact(m, Field::EthType);
        let proto = exact(m, Field::IpProto);
        let ip = eth == Some(ETH_IP);
        let ip_any = ip || eth == Some(ETH_IPV6);
        let arp = matches!(eth, Some(ETH_ARP | ETH_RARP));
        let icmp6 = eth == Some(ETH_IPV6) && proto == Some(PROTO_ICMP6);
        let icmp_type = exact(m, Field::TpSrc);
        match self {
            Prereq::None => true,
            Prereq::IpOrArp => ip || arp,
            Prereq::Ipv4 => ip,
            Prereq::IpAny => ip_any,
            Prereq::Arp => arp,
            Prereq::Ipv6 => eth == Some(ETH_IPV6),
            Prereq::L4 => ip_any && matches!(proto, Some(PROTO_TCP | PROTO_UDP | PROTO_SCTP)),
            Prereq::Tcp => ip_any && proto == Some(PROTO_TCP),
            Prereq::Udp => ip_any && proto == Some(PROTO_UDP),
            Prereq::Sctp => ip_any && proto == Some(PROTO_SCTP),
            Prereq::Icmp => ip && proto == Some(PROTO_ICMP),
            Prereq::Icmp6 => icmp6,
            Prereq::Nd => icmp6 && matches!(icmp_type, Some(ND_SOLICIT | ND_ADVERT)),
            Prereq::NdSll => icmp6 && icmp_type == Some(ND_SOLICIT),
            Prereq::NdTll => icmp6 && icmp_type == Some(ND_ADVERT),
            Prereq::Ct => {
                let mask = m.mask().field(Field::CtState);
                let v = m.key().field(Field::CtState) & mask;
                let valid = 0x01 | 0x02 | 0x04 | 0x08 | 0x40 | 0x80;
                v & valid != 0 || (v & 0x20 != 0 && mask & 0x10 != 0 && v & 0x10 == 0)
            }
        }
    }
}

/// One name of a match field.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FieldDef {
    pub name: &'static str,
    pub field: Field,
    pub kind: Kind,
    pub prereq: Prereq,
    /// Actions (`set_field`, `load`, `move` destination) may write it.
    pub writable: bool,
}

const fn def(
    name: &'static str,
    field: Field,
    kind: Kind,
    prereq: Prereq,
    writable: bool,
) -> FieldDef {
    FieldDef {
        name,
        field,
        kind,
        prereq,
        writable,
    }
}

use Field as F;
use Kind as K;
use Prereq as P;

/// Every match field name the syntax knows (ovs-fields(7) names and the
/// classic aliases), plus the eswitch-only `vlan_tpid`, `vlan2_tpid`,
/// `vlan2_tci` (and `ipv4_src`/`ipv4_dst`/`ip_ttl`, megaflow's own names).
pub(crate) const FIELDS: &[FieldDef] = &[
    def("in_port", F::InPort, K::Port, P::None, true),
    def("pkt_mark", F::PktMark, K::Hex, P::None, true),
    def("metadata", F::Metadata, K::Hex, P::None, true),
    def("reg0", F::Reg0, K::Hex, P::None, true),
    def("reg1", F::Reg1, K::Hex, P::None, true),
    def("reg2", F::Reg2, K::Hex, P::None, true),
    def("reg3", F::Reg3, K::Hex, P::None, true),
    def("reg4", F::Reg4, K::Hex, P::None, true),
    def("reg5", F::Reg5, K::Hex, P::None, true),
    def("reg6", F::Reg6, K::Hex, P::None, true),
    def("reg7", F::Reg7, K::Hex, P::None, true),
    def("reg8", F::Reg8, K::Hex, P::None, true),
    def("reg9", F::Reg9, K::Hex, P::None, true),
    def("reg10", F::Reg10, K::Hex, P::None, true),
    def("reg11", F::Reg11, K::Hex, P::None, true),
    def("reg12", F::Reg12, K::Hex, P::None, true),
    def("reg13", F::Reg13, K::Hex, P::None, true),
    def("reg14", F::Reg14, K::Hex, P::None, true),
    def("reg15", F::Reg15, K::Hex, P::None, true),
    def("tun_id", F::TunId, K::Hex, P::None, true),
    def("tunnel_id", F::TunId, K::Hex, P::None, true),
    def("tun_src", F::TunSrc, K::Ipv4, P::None, true),
    def("tun_dst", F::TunDst, K::Ipv4, P::None, true),
    def("tun_ipv6_src", F::TunIpv6Src, K::Ipv6, P::None, true),
    def("tun_ipv6_dst", F::TunIpv6Dst, K::Ipv6, P::None, true),
    def("tun_flags", F::TunFlags, K::TunFlags, P::None, true),
    def("tun_tos", F::TunTos, K::Dec, P::None, true),
    def("tun_ttl", F::TunTtl, K::Dec, P::None, true),
    def("tun_tp_src", F::TunTpSrc, K::Dec, P::None, true),
    def("tun_tp_dst", F::TunTpDst, K::Dec, P::None, true),
    def("dl_src", F::EthSrc, K::Mac, P::None, true),
    def("eth_src", F::EthSrc, K::Mac, P::None, true),
    def("dl_dst", F::EthDst, K::Mac, P::None, true),
    def("eth_dst", F::EthDst, K::Mac, P::None, true),
    def("dl_type", F::EthType, K::Hex, P::None, false),
    def("eth_type", F::EthType, K::Hex, P::None, false),
    def("vlan_tci", F::VlanTci, K::Hex, P::None, true),
    def("dl_vlan", F::VlanTci, K::DlVlan, P::None, true),
    def("vlan_vid", F::VlanTci, K::VlanVid, P::None, true),
    def("dl_vlan_pcp", F::VlanTci, K::VlanPcp, P::None, true),
    def("vlan_pcp", F::VlanTci, K::VlanPcp, P::None, true),
    def("vlan_tpid", F::VlanTpid, K::Hex, P::None, false),
    def("vlan2_tpid", F::Vlan2Tpid, K::Hex, P::None, false),
    def("vlan2_tci", F::Vlan2Tci, K::Hex, P::None, false),
    def("nw_src", F::Ipv4Src, K::Ipv4, P::IpOrArp, true),
    def("ip_src", F::Ipv4Src, K::Ipv4, P::IpOrArp, true),
    def("ipv4_src", F::Ipv4Src, K::Ipv4, P::Ipv4, true),
    def("nw_dst", F::Ipv4Dst, K::Ipv4, P::IpOrArp, true),
    def("ip_dst", F::Ipv4Dst, K::Ipv4, P::IpOrArp, true),
    def("ipv4_dst", F::Ipv4Dst, K::Ipv4, P::Ipv4, true),
    def("arp_spa", F::Ipv4Src, K::Ipv4, P::Arp, true),
    def("arp_tpa", F::Ipv4Dst, K::Ipv4, P::Arp, true),
    def("arp_op", F::IpProto, K::Dec, P::Arp, true),
    def("arp_sha", F::ArpSha, K::Mac, P::Arp, true),
    def("arp_tha", F::ArpTha, K::Mac, P::Arp, true),
    def("nw_proto", F::IpProto, K::Dec, P::IpAny, false),
    def("ip_proto", F::IpProto, K::Dec, P::IpAny, false),
    def("nw_tos", F::IpDscp, K::NwTos, P::IpAny, true),
    def("ip_dscp", F::IpDscp, K::Dec, P::IpAny, true),
    def("nw_ecn", F::IpEcn, K::Dec, P::IpAny, true),
    def("ip_ecn", F::IpEcn, K::Dec, P::IpAny, true),
    def("nw_ttl", F::IpTtl, K::Dec, P::IpAny, true),
    def("ip_ttl", F::IpTtl, K::Dec, P::IpAny, true),
    def("nw_frag", F::IpFrag, K::Frag, P::IpAny, false),
    def("ip_frag", F::IpFrag, K::Frag, P::IpAny, false),
    def("ipv6_src", F::Ipv6Src, K::Ipv6, P::Ipv6, true),
    def("ipv6_dst", F::Ipv6Dst, K::Ipv6, P::Ipv6, true),
    def("ipv6_label", F::Ipv6Label, K::Hex, P::Ipv6, true),
    def("tp_src", F::TpSrc, K::Dec, P::L4, true),
    def("tp_dst", F::TpDst, K::Dec, P::L4, true),
    def("tcp_src", F::TpSrc, K::Dec, P::Tcp, true),
    def("tcp_dst", F::TpDst, K::Dec, P::Tcp, true),
    def("udp_src", F::TpSrc, K::Dec, P::Udp, true),
    def("udp_dst", F::TpDst, K::Dec, P::Udp, true),
    def("sctp_src", F::TpSrc, K::Dec, P::Sctp, true),
    def("sctp_dst", F::TpDst, K::Dec, P::Sctp, true),
    def("tcp_flags", F::TcpFlags, K::TcpFlags, P::Tcp, false),
    def("icmp_type", F::TpSrc, K::Dec, P::Icmp, true),
    def("icmp_code", F::TpDst, K::Dec, P::Icmp, true),
    def("icmpv6_type", F::TpSrc, K::Dec, P::Icmp6, true),
    def("icmpv6_code", F::TpDst, K::Dec, P::Icmp6, true),
    def("nd_target", F::NdTarget, K::Ipv6, P::Nd, true),
    def("nd_sll", F::ArpSha, K::Mac, P::NdSll, true),
    def("nd_tll", F::ArpTha, K::Mac, P::NdTll, true),
    // Recirculation and connection tracking: read-only (`ct_mark` and
    // `ct_label` are written only inside `ct(exec(...))`).
    def("recirc_id", F::RecircId, K::Hex, P::None, false),
    def("dp_hash", F::DpHash, K::Hex, P::None, false),
    def("conj_id", F::ConjId, K::Dec, P::None, false),
    def("ct_state", F::CtState, K::CtState, P::None, false),
    def("ct_zone", F::CtZone, K::Dec, P::None, false),
    def("ct_mark", F::CtMark, K::Hex, P::None, false),
    def("ct_label", F::CtLabel, K::Hex, P::None, false),
    def("ct_nw_src", F::CtNwSrc, K::Ipv4, P::Ct, false),
    def("ct_nw_dst", F::CtNwDst, K::Ipv4, P::Ct, false),
    def("ct_ipv6_src", F::CtIpv6Src, K::Ipv6, P::Ct, false),
    def("ct_ipv6_dst", F::CtIpv6Dst, K::Ipv6, P::Ct, false),
    def("ct_nw_proto", F::CtNwProto, K::Dec, P::Ct, false),
    def("ct_tp_src", F::CtTpSrc, K::Dec, P::Ct, false),
    def("ct_tp_dst", F::CtTpDst, K::Dec, P::Ct, false),
];

/// A list of `ct_state` flags (`trk,est`, `+trk+est` or `trk|est`) as
/// bits, as `ofproto/trace --ct-next` reads it; the error names the flag.
pub fn ct_state_flags(s: &str) -> Result<u8, String> {
    let mut v = 0;
    for name in s.split([',', '|', '+']).filter(|n| !n.is_empty()) {
        v |= CT_STATE_FLAGS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b as u8)
            .ok_or_else(|| format!("{s}: unknown ct_state flag \"{name}\""))?;
    }
    Ok(v)
}

/// `ct_state` flag names, in bit order (Open vSwitch's `CS_*`).
pub(crate) const CT_STATE_FLAGS: [(&str, u128); 8] = [
    ("new", 0x01),
    ("est", 0x02),
    ("rel", 0x04),
    ("rpl", 0x08),
    ("inv", 0x10),
    ("trk", 0x20),
    ("snat", 0x40),
    ("dnat", 0x80),
];

/// The definition of a match field name. Names megaflow adds later (not in
/// [`FIELDS`]) resolve to a read-only hex field under their
/// [`Field::name`], so printing any match stays parseable.
pub(crate) fn field_def(name: &str) -> Option<FieldDef> {
    // Looked up by name for every field of every flow (text and wire):
    // a map built once, the first definition of a name winning.
    static BY_NAME: std::sync::OnceLock<std::collections::HashMap<&'static str, FieldDef>> =
        std::sync::OnceLock::new();
    let map = BY_NAME.get_or_init(|| {
        let mut m = std::collections::HashMap::new();
        for d in FIELDS {
            m.entry(d.name).or_insert(*d);
        }
        for &f in Field::ALL {
            m.entry(f.name())
                .or_insert_with(|| def(f.name(), f, Kind::Hex, Prereq::None, false));
        }
        m
    });
    map.get(name).copied()
}

/// A protocol shorthand (`tcp`, `ipv6`, ...): an ethertype and maybe an IP
/// protocol.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shorthand {
    pub name: &'static str,
    pub eth_type: u128,
    pub proto: Option<u128>,
}

const fn sh(name: &'static str, eth_type: u128, proto: Option<u128>) -> Shorthand {
    Shorthand {
        name,
        eth_type,
        proto,
    }
}

pub(crate) const SHORTHANDS: &[Shorthand] = &[
    sh("ip", ETH_IP, None),
    sh("ipv6", ETH_IPV6, None),
    sh("arp", ETH_ARP, None),
    sh("rarp", ETH_RARP, None),
    sh("icmp", ETH_IP, Some(PROTO_ICMP)),
    sh("icmp6", ETH_IPV6, Some(PROTO_ICMP6)),
    sh("tcp", ETH_IP, Some(PROTO_TCP)),
    sh("tcp6", ETH_IPV6, Some(PROTO_TCP)),
    sh("udp", ETH_IP, Some(PROTO_UDP)),
    sh("udp6", ETH_IPV6, Some(PROTO_UDP)),
    sh("sctp", ETH_IP, Some(PROTO_SCTP)),
    sh("sctp6", ETH_IPV6, Some(PROTO_SCTP)),
];

/// The shorthand for an exact ethertype and (maybe) IP protocol, preferring
/// one that covers the protocol too. The bool says whether it did.
pub(crate) fn shorthand_for(eth_type: u128, proto: Option<u128>) -> Option<(&'static str, bool)> {
    if let Some(p) = proto {
        if let Some(s) = SHORTHANDS
            .iter()
            .find(|s| s.eth_type == eth_type && s.proto == Some(p))
        {
            return Some((s.name, true));
        }
    }
    SHORTHANDS
        .iter()
        .find(|s| s.eth_type == eth_type && s.proto.is_none())
        .map(|s| (s.name, false))
}

/// `tcp_flags` flag names, in printing order.
pub(crate) const TCP_FLAGS: [(&str, u128); 9] = [
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// `tun_flags` flag names (Open vSwitch's public tunnel flags).
pub(crate) const TUN_FLAGS: [(&str, u128); 1] = [("oam", megaflow::key::TUN_FLAG_OAM as u128)];

/// `nw_frag` keywords as (name, value, mask) of `ip_frag`.
pub(crate) const FRAG_KEYWORDS: [(&str, u128, u128); 5] = [
    ("no", 0, FRAG_ANY as u128),
    ("yes", FRAG_ANY as u128, FRAG_ANY as u128),
    ("first", FRAG_ANY as u128, (FRAG_ANY | FRAG_LATER) as u128),
    (
        "later",
        (FRAG_ANY | FRAG_LATER) as u128,
        (FRAG_ANY | FRAG_LATER) as u128,
    ),
    ("not_later", 0, FRAG_LATER as u128),
];

const PRESENT: u128 = VLAN_PRESENT as u128;

/// Parses `text` as a value of `def`, giving `(value, mask)` in the key
/// field's layout with `value` inside `mask`.
pub(crate) fn parse_value(def: &FieldDef, text: &str) -> Result<(u128, u128), ParseError> {
    parse_kind(def.kind, def.field, text).map_err(|e| e.at(text, def.name))
}

fn no_mask(m: Option<&str>) -> VResult<()> {
    match m {
        Some(_) => Err(ValueError::bad("this field takes no mask")),
        None => Ok(()),
    }
}

fn parse_kind(kind: Kind, field: Field, text: &str) -> VResult<(u128, u128)> {
    let max = field.layout().max_value();
    let (v, m) = value::split_mask(text);
    let num_mask = |m: Option<&str>, max: u128| -> VResult<u128> {
        m.map_or(Ok(max), |m| value::number_max(m, max))
    };
    if matches!(field, Field::RecircId | Field::ConjId) {
        // Open vSwitch's "invalid mask": these match exactly or not at all.
        no_mask(m)?;
    }
    let (value, mask) = match kind {
        Kind::Port => (value::port_number(v)?, num_mask(m, max)?),
        Kind::Mac => (value::mac(v)?, m.map_or(Ok(max), value::mac)?),
        Kind::Ipv4 => (value::ipv4(v)?, m.map_or(Ok(max), value::ipv4_mask)?),
        Kind::Ipv6 => (value::ipv6(v)?, m.map_or(Ok(max), value::ipv6_mask)?),
        Kind::Dec | Kind::Hex => (value::number_max(v, max)?, num_mask(m, max)?),
        Kind::DlVlan => {
            no_mask(m)?;
            match value::number(v)? {
                0xffff => (0, 0xffff),
                vid if vid <= 0x0fff => (PRESENT | vid, 0x1fff),
                _ => {
                    return Err(ValueError::bad(
                        "VLAN id must be at most 4095 (or 0xffff for untagged)",
                    ))
                }
            }
        }
        Kind::VlanPcp => {
            no_mask(m)?;
            let pcp = value::number_max(v, 7)?;
            ((pcp << 13) | PRESENT, 0xf000)
        }
        Kind::VlanVid => (value::number_max(v, 0x1fff)?, num_mask(m, 0x1fff)?),
        Kind::NwTos => {
            let tos = value::number_max(v, 0xff)?;
            let tos_mask = num_mask(m, 0xfc)?;
            if tos & 3 != 0 || tos_mask & 3 != 0 {
                return Err(ValueError::bad(
                    "the ECN bits (low 2 bits) of the ToS must be zero",
                ));
            }
            (tos >> 2, tos_mask >> 2)
        }
        Kind::Frag => match FRAG_KEYWORDS.iter().find(|(name, _, _)| *name == text) {
            Some(&(_, value, mask)) => (value, mask),
            None => {
                let n = value::number_max(v, max).map_err(|_| {
                    ValueError::bad("expected no, yes, first, later, not_later or a number")
                })?;
                (n, num_mask(m, max)?)
            }
        },
        Kind::CtState => {
            if text.starts_with(['+', '-']) {
                flags(text, &CT_STATE_FLAGS, "ct_state")?
            } else if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
                // `est|trk`: exactly these flags.
                let mut v = 0;
                for name in text.split('|') {
                    let bit = CT_STATE_FLAGS
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|&(_, b)| b)
                        .ok_or_else(|| {
                            ValueError::bad(format!("unknown ct_state flag \"{name}\""))
                        })?;
                    v |= bit;
                }
                (v, max)
            } else {
                (value::number_max(v, max)?, num_mask(m, max)?)
            }
        }
        Kind::TcpFlags | Kind::TunFlags => {
            let (names, what) = match kind {
                Kind::TcpFlags => (&TCP_FLAGS[..], "TCP"),
                _ => (&TUN_FLAGS[..], "tunnel"),
            };
            if text.starts_with(['+', '-']) {
                flags(text, names, what)?
            } else {
                (value::number_max(v, max)?, num_mask(m, max)?)
            }
        }
    };
    Ok((value & mask, mask))
}

/// `+syn-ack...`: `+` flags must be set, `-` flags clear; `names` are
/// the `what` (TCP, tunnel) flags.
fn flags(s: &str, names: &[(&str, u128)], what: &str) -> VResult<(u128, u128)> {
    let (mut value, mut mask) = (0u128, 0u128);
    let mut rest = s;
    while !rest.is_empty() {
        let (set, after) = if let Some(r) = rest.strip_prefix('+') {
            (true, r)
        } else if let Some(r) = rest.strip_prefix('-') {
            (false, r)
        } else {
            return Err(ValueError::bad("expected +FLAG or -FLAG"));
        };
        let end = after.find(['+', '-']).unwrap_or(after.len());
        let (name, next) = after.split_at(end);
        let bit = names
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, b)| b)
            .ok_or_else(|| ValueError::bad(format!("unknown {what} flag \"{name}\"")))?;
        if mask & bit != 0 {
            return Err(ValueError::bad(format!(
                "{what} flag \"{name}\" given twice"
            )));
        }
        mask |= bit;
        if set {
            value |= bit;
        }
        rest = next;
    }
    Ok((value, mask))
}

/// Who set some bits of a key field, for duplicate and conflict checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Field(Field, Kind),
    Shorthand(&'static str),
    /// `tun_metadata<n>` (they share `tun_opts` and `tun_md_present`).
    TunMetadata(u8),
}

#[derive(Debug)]
struct Assignment {
    group: Group,
    label: String,
    field: Field,
    value: u128,
    mask: u128,
}

/// Builds a [`Match`] from `name[=value]` tokens in any order.
#[derive(Debug)]
pub(crate) struct MatchBuilder<'t> {
    matched: Match,
    sets: Vec<Assignment>,
    checks: Vec<(Prereq, String)>,
    /// Where `tun_metadata<n>` lands in the key.
    tlv: &'t TlvTable,
}

impl Default for MatchBuilder<'static> {
    fn default() -> Self {
        MatchBuilder::new(&crate::tlv::EMPTY)
    }
}

/// The `n` of a `tun_metadata<n>` name.
pub(crate) fn tun_metadata_name(name: &str) -> Option<u8> {
    tun_metadata_number(name.strip_prefix("tun_metadata")?)
}

/// `n` of 0..64 written without leading zeros (`tun_metadata<n>`,
/// `NXM_NX_TUN_METADATA<n>`).
pub(crate) fn tun_metadata_number(n: &str) -> Option<u8> {
    let i: u8 = n.parse().ok()?;
    (i < 64 && (!n.starts_with('0') || n == "0")).then_some(i)
}

/// The slot of `tun_metadata<index>` in `tlv`, or the error that says
/// it is not mapped.
pub(crate) fn tun_metadata_slot(
    tlv: &TlvTable,
    index: u8,
    name: &str,
) -> Result<OptionSlot, ParseError> {
    tlv.slot(u16::from(index)).ok_or_else(|| {
        ParseError::new(
            name,
            ParseErrorKind::Unsupported {
                reason: "this tun_metadata field is not mapped to a Geneve option: map it first (ovs-ofctl add-tlv-map)",
            },
        )
    })
}

/// A `tun_metadata` value `V[/M]` of the option at `slot`.
pub(crate) fn tun_metadata_value(
    text: &str,
    slot: &OptionSlot,
    name: &str,
) -> Result<(u128, u128), ParseError> {
    let max = slot.ones();
    let (v, m) = value::split_mask(text);
    let value = value::number_max(v, max).map_err(|e| e.at(text, name))?;
    let mask = match m {
        Some(m) => value::number_max(m, max).map_err(|e| e.at(text, name))?,
        None => max,
    };
    Ok((value & mask, mask))
}

impl<'t> MatchBuilder<'t> {
    /// A builder that places `tun_metadata<n>` as `tlv` says.
    pub(crate) fn new(tlv: &'t TlvTable) -> Self {
        MatchBuilder {
            matched: Match::catch_all(),
            sets: Vec::new(),
            checks: Vec::new(),
            tlv,
        }
    }

    /// `tun_metadata<index>=value/mask` (the option's own bytes; `None`:
    /// `NP`, the option absent).
    pub(crate) fn apply_tun_metadata(
        &mut self,
        name: &str,
        index: u8,
        value: Option<(u128, u128)>,
    ) -> Result<(), ParseError> {
        let slot = tun_metadata_slot(self.tlv, index, name)?;
        let group = Group::TunMetadata(index);
        let bit = u128::from(slot.present_bit());
        match value {
            Some((v, m)) => {
                let shift = slot.shift();
                self.assign(
                    group,
                    name,
                    Field::TunOpts,
                    v << shift,
                    (m << shift) & slot.mask(),
                )?;
                self.assign(group, name, Field::TunMdPresent, bit, bit)
            }
            None => self.assign(group, name, Field::TunMdPresent, 0, bit),
        }
    }

    /// Adds one token: a shorthand (no value) or `field=value`.
    pub(crate) fn apply(&mut self, name: &str, value: Option<&str>) -> Result<(), ParseError> {
        if let Some(index) = tun_metadata_name(name) {
            let text = value.ok_or_else(|| ParseError::new(name, ParseErrorKind::MissingValue))?;
            let slot = tun_metadata_slot(self.tlv, index, name)?;
            let v = match text {
                "NP" => None,
                _ => Some(tun_metadata_value(text, &slot, name)?),
            };
            return self.apply_tun_metadata(name, index, v);
        }
        if let Some(s) = SHORTHANDS.iter().find(|s| s.name == name) {
            if value.is_some() {
                return Err(ParseError::new(name, ParseErrorKind::UnexpectedValue));
            }
            let group = Group::Shorthand(s.name);
            self.assign(group, name, Field::EthType, s.eth_type, 0xffff)?;
            if let Some(p) = s.proto {
                self.assign(group, name, Field::IpProto, p, 0xff)?;
            }
            return Ok(());
        }
        let def =
            field_def(name).ok_or_else(|| ParseError::new(name, ParseErrorKind::UnknownField))?;
        let text = value.ok_or_else(|| ParseError::new(name, ParseErrorKind::MissingValue))?;
        let (v, m) = parse_value(&def, text)?;
        self.assign(Group::Field(def.field, def.kind), name, def.field, v, m)?;
        self.checks.push((def.prereq, name.to_string()));
        Ok(())
    }

    /// Adds one field given as key bits (a match read from the wire):
    /// `name` is its `ovs-fields` name, which carries the prerequisite;
    /// `value` and `mask` are in the key field's own layout.
    pub(crate) fn apply_value(
        &mut self,
        name: &str,
        value: u128,
        mask: u128,
    ) -> Result<(), ParseError> {
        let def =
            field_def(name).ok_or_else(|| ParseError::new(name, ParseErrorKind::UnknownField))?;
        self.assign(
            Group::Field(def.field, def.kind),
            name,
            def.field,
            value,
            mask,
        )?;
        self.checks.push((def.prereq, name.to_string()));
        Ok(())
    }

    fn assign(
        &mut self,
        group: Group,
        label: &str,
        field: Field,
        value: u128,
        mask: u128,
    ) -> Result<(), ParseError> {
        for a in self.sets.iter().filter(|a| a.field == field) {
            let same_group = a.group == group;
            if same_group && a.label == label {
                if (a.value, a.mask) != (value, mask) {
                    return Err(ParseError::new(label, ParseErrorKind::DuplicateField));
                }
            } else if (same_group && (a.value, a.mask) != (value, mask))
                || (a.value ^ value) & a.mask & mask != 0
            {
                return Err(ParseError::new(
                    label,
                    ParseErrorKind::Conflict {
                        with: a.label.clone(),
                    },
                ));
            }
        }
        self.sets.push(Assignment {
            group,
            label: label.to_string(),
            field,
            value,
            mask,
        });
        self.matched.set_field_masked(field, value, mask);
        Ok(())
    }

    /// The match, once every field's prerequisites hold.
    pub(crate) fn finish(self) -> Result<Match, ParseError> {
        for (prereq, name) in &self.checks {
            if !prereq.holds(&self.matched) {
                return Err(ParseError::new(
                    name,
                    ParseErrorKind::MissingPrerequisite {
                        prerequisite: prereq.label(),
                    },
                ));
            }
        }
        Ok(self.matched)
    }
}

/// NXM and OXM names of `load`/`move` subfields, with writability.
const NXM_FIELDS: &[(&str, Field, bool)] = &[
    ("NXM_OF_IN_PORT", F::InPort, true),
    ("NXM_OF_ETH_DST", F::EthDst, true),
    ("NXM_OF_ETH_SRC", F::EthSrc, true),
    ("NXM_OF_ETH_TYPE", F::EthType, false),
    ("NXM_OF_VLAN_TCI", F::VlanTci, true),
    ("NXM_OF_IP_PROTO", F::IpProto, false),
    ("NXM_OF_IP_SRC", F::Ipv4Src, true),
    ("NXM_OF_IP_DST", F::Ipv4Dst, true),
    ("NXM_OF_TCP_SRC", F::TpSrc, true),
    ("NXM_OF_TCP_DST", F::TpDst, true),
    ("NXM_OF_UDP_SRC", F::TpSrc, true),
    ("NXM_OF_UDP_DST", F::TpDst, true),
    ("NXM_OF_ICMP_TYPE", F::TpSrc, true),
    ("NXM_OF_ICMP_CODE", F::TpDst, true),
    ("NXM_OF_ARP_OP", F::IpProto, true),
    ("NXM_OF_ARP_SPA", F::Ipv4Src, true),
    ("NXM_OF_ARP_TPA", F::Ipv4Dst, true),
    ("NXM_NX_REG0", F::Reg0, true),
    ("NXM_NX_REG1", F::Reg1, true),
    ("NXM_NX_REG2", F::Reg2, true),
    ("NXM_NX_REG3", F::Reg3, true),
    ("NXM_NX_REG4", F::Reg4, true),
    ("NXM_NX_REG5", F::Reg5, true),
    ("NXM_NX_REG6", F::Reg6, true),
    ("NXM_NX_REG7", F::Reg7, true),
    ("NXM_NX_REG8", F::Reg8, true),
    ("NXM_NX_REG9", F::Reg9, true),
    ("NXM_NX_REG10", F::Reg10, true),
    ("NXM_NX_REG11", F::Reg11, true),
    ("NXM_NX_REG12", F::Reg12, true),
    ("NXM_NX_REG13", F::Reg13, true),
    ("NXM_NX_REG14", F::Reg14, true),
    ("NXM_NX_REG15", F::Reg15, true),
    ("NXM_NX_TUN_ID", F::TunId, true),
    ("NXM_NX_TUN_IPV4_SRC", F::TunSrc, true),
    ("NXM_NX_TUN_IPV4_DST", F::TunDst, true),
    ("NXM_NX_TUN_IPV6_SRC", F::TunIpv6Src, true),
    ("NXM_NX_TUN_IPV6_DST", F::TunIpv6Dst, true),
    ("NXM_NX_TUN_FLAGS", F::TunFlags, true),
    ("NXM_NX_ARP_SHA", F::ArpSha, true),
    ("NXM_NX_ARP_THA", F::ArpTha, true),
    ("NXM_NX_IPV6_SRC", F::Ipv6Src, true),
    ("NXM_NX_IPV6_DST", F::Ipv6Dst, true),
    ("NXM_NX_IPV6_LABEL", F::Ipv6Label, true),
    ("NXM_NX_ICMPV6_TYPE", F::TpSrc, true),
    ("NXM_NX_ICMPV6_CODE", F::TpDst, true),
    ("NXM_NX_ND_TARGET", F::NdTarget, true),
    ("NXM_NX_ND_SLL", F::ArpSha, true),
    ("NXM_NX_ND_TLL", F::ArpTha, true),
    ("NXM_NX_IP_FRAG", F::IpFrag, false),
    ("NXM_NX_IP_ECN", F::IpEcn, true),
    ("NXM_NX_IP_TTL", F::IpTtl, true),
    ("NXM_NX_PKT_MARK", F::PktMark, true),
    ("NXM_NX_TCP_FLAGS", F::TcpFlags, false),
    ("NXM_NX_CT_STATE", F::CtState, false),
    ("NXM_NX_CT_ZONE", F::CtZone, false),
    ("NXM_NX_CT_MARK", F::CtMark, false),
    ("NXM_NX_CT_LABEL", F::CtLabel, false),
    ("NXM_NX_CT_NW_PROTO", F::CtNwProto, false),
    ("NXM_NX_CT_NW_SRC", F::CtNwSrc, false),
    ("NXM_NX_CT_NW_DST", F::CtNwDst, false),
    ("NXM_NX_CT_IPV6_SRC", F::CtIpv6Src, false),
    ("NXM_NX_CT_IPV6_DST", F::CtIpv6Dst, false),
    ("NXM_NX_CT_TP_SRC", F::CtTpSrc, false),
    ("NXM_NX_CT_TP_DST", F::CtTpDst, false),
    ("NXM_NX_CONJ_ID", F::ConjId, false),
    ("OXM_OF_METADATA", F::Metadata, true),
    ("OXM_OF_IN_PORT", F::InPort, true),
    ("OXM_OF_ETH_DST", F::EthDst, true),
    ("OXM_OF_ETH_SRC", F::EthSrc, true),
    ("OXM_OF_ETH_TYPE", F::EthType, false),
    ("OXM_OF_IP_DSCP", F::IpDscp, true),
    ("OXM_OF_IP_ECN", F::IpEcn, true),
    ("OXM_OF_IP_PROTO", F::IpProto, false),
    ("OXM_OF_IPV4_SRC", F::Ipv4Src, true),
    ("OXM_OF_IPV4_DST", F::Ipv4Dst, true),
    ("OXM_OF_TCP_SRC", F::TpSrc, true),
    ("OXM_OF_TCP_DST", F::TpDst, true),
    ("OXM_OF_UDP_SRC", F::TpSrc, true),
    ("OXM_OF_UDP_DST", F::TpDst, true),
    ("OXM_OF_SCTP_SRC", F::TpSrc, true),
    ("OXM_OF_SCTP_DST", F::TpDst, true),
    ("OXM_OF_ICMPV4_TYPE", F::TpSrc, true),
    ("OXM_OF_ICMPV4_CODE", F::TpDst, true),
    ("OXM_OF_ARP_OP", F::IpProto, true),
    ("OXM_OF_ARP_SPA", F::Ipv4Src, true),
    ("OXM_OF_ARP_TPA", F::Ipv4Dst, true),
    ("OXM_OF_ARP_SHA", F::ArpSha, true),
    ("OXM_OF_ARP_THA", F::ArpTha, true),
    ("OXM_OF_IPV6_SRC", F::Ipv6Src, true),
    ("OXM_OF_IPV6_DST", F::Ipv6Dst, true),
    ("OXM_OF_IPV6_FLABEL", F::Ipv6Label, true),
    ("OXM_OF_ICMPV6_TYPE", F::TpSrc, true),
    ("OXM_OF_ICMPV6_CODE", F::TpDst, true),
    ("OXM_OF_IPV6_ND_TARGET", F::NdTarget, true),
    ("OXM_OF_IPV6_ND_SLL", F::ArpSha, true),
    ("OXM_OF_IPV6_ND_TLL", F::ArpTha, true),
    ("OXM_OF_TUNNEL_ID", F::TunId, true),
];

/// A `load`/`move` subfield `NAME[]`, `NAME[n]`, `NAME[a..b]` (or a bare
/// `NAME`: the whole field), with whether actions may write it.
/// The NXM name Open vSwitch prints for a subfield of `field`.
pub(crate) fn nxm_name(field: Field) -> &'static str {
    NXM_FIELDS
        .iter()
        .find(|(_, f, _)| *f == field)
        .map_or(field.name(), |(n, _, _)| n)
}

pub(crate) fn parse_subfield(s: &str) -> Result<(FieldRange, bool), ParseError> {
    let (name, range) = match s.split_once('[') {
        Some((name, rest)) => match rest.strip_suffix(']') {
            Some(range) => (name, Some(range)),
            None => {
                return Err(
                    ValueError::bad("expected NAME[], NAME[BIT] or NAME[START..END]").at(s, name),
                )
            }
        },
        None => (s, None),
    };
    let (field, writable) = NXM_FIELDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, f, w)| (f, w))
        .or_else(|| {
            field_def(name)
                .filter(|d| d.kind.is_plain())
                .map(|d| (d.field, d.writable))
        })
        .ok_or_else(|| ParseError::new(name, ParseErrorKind::UnknownField))?;
    let width = u32::from(field.layout().bits);
    let whole = FieldRange::whole(field);
    let range = match range {
        None | Some("") => whole,
        Some(r) => {
            let bad = |why: String| ValueError::bad(why).at(s, name);
            let bit = |t: &str| -> Result<u32, ParseError> {
                let n = value::number(t).map_err(|e| e.at(s, name))?;
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n < width)
                    .ok_or_else(|| bad(format!("bit {n} outside the {width}-bit field")))
            };
            let (lo, hi) = match r.split_once("..") {
                Some((a, b)) => (bit(a)?, bit(b)?),
                None => {
                    let b = bit(r)?;
                    (b, b)
                }
            };
            if lo > hi {
                return Err(bad(format!("empty bit range {lo}..{hi}")));
            }
            // Both bounds are below the field width (at most 128), so they
            // and the width of the range fit in a u8.
            FieldRange {
                field,
                ofs: lo as u8,
                n_bits: (hi - lo + 1) as u8,
                opt: None,
            }
        }
    };
    Ok((range, writable))
}

#[cfg(test)]
#[path = "tests/fields.rs"]
mod tests;

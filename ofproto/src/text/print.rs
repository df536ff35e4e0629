//! Printing matches, instructions and rules in the flow syntax.
//!
//! The output is canonical (one spelling per meaning, fields in a fixed
//! order) and parseable: for every rule the parser can produce,
//! `parse_flow(&format_rule(r), Add)` gives `r` back. The order and names
//! follow `ovs-ofctl dump-flows`: protocol shorthand first, then metadata,
//! `in_port`, VLAN, Ethernet, L3, L4. Names depend on context where the key
//! shares slots (`arp_spa` under `arp`, `icmp_type` under `icmp`, `nd_sll`
//! under `icmp6`). Any bits the classic spellings cannot say are printed as
//! `field=0xVALUE/0xMASK`, so nothing in a match is ever dropped; a match
//! whose prerequisites do not hold still prints, but will not parse back.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use megaflow::key::VLAN_PRESENT;
use megaflow::{Field, Match};

use super::fields::{
    exact, shorthand_for, CT_STATE_FLAGS, ETH_ARP, ETH_IP, ETH_IPV6, ETH_RARP, FRAG_KEYWORDS,
    PROTO_ICMP, PROTO_ICMP6, TCP_FLAGS, TUN_FLAGS,
};
use crate::rule::{FieldRange, Instructions, OfAction, OfPort, RuleSpec};
use crate::tlv::TlvTable;
use megaflow::tunnel::OptionSlot;

/// How a field's values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Mac,
    Ipv4,
    Ipv6,
    Dec,
    Hex,
    Port,
}

fn style(field: Field) -> Style {
    match field {
        Field::EthSrc | Field::EthDst | Field::ArpSha | Field::ArpTha => Style::Mac,
        Field::Ipv4Src | Field::Ipv4Dst | Field::TunSrc | Field::TunDst => Style::Ipv4,
        Field::Ipv6Src
        | Field::Ipv6Dst
        | Field::NdTarget
        | Field::TunIpv6Src
        | Field::TunIpv6Dst => Style::Ipv6,
        Field::InPort => Style::Port,
        Field::IpProto
        | Field::IpDscp
        | Field::IpEcn
        | Field::IpTtl
        | Field::TpSrc
        | Field::TpDst
        | Field::TunTos
        | Field::TunTtl
        | Field::TunTpSrc
        | Field::TunTpDst
        | Field::CtZone
        | Field::CtNwProto
        | Field::CtTpSrc
        | Field::CtTpDst
        | Field::ConjId => Style::Dec,
        Field::CtNwSrc | Field::CtNwDst => Style::Ipv4,
        Field::CtIpv6Src | Field::CtIpv6Dst => Style::Ipv6,
        _ => Style::Hex,
    }
}

/// The low 48 bits of `v` as an Ethernet address.
fn mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// `value` (under `mask`, when not all of `field`) in the field's style.
fn value(field: Field, v: u128, mask: u128) -> String {
    // `v` and `mask` fit the field's width (a `Match` and the parser keep
    // them so), so the narrowing casts below lose nothing.
    let full = field.layout().max_value();
    let st = style(field);
    if mask == full {
        return match st {
            Style::Mac => mac(v),
            Style::Ipv4 => Ipv4Addr::from(v as u32).to_string(),
            Style::Ipv6 => Ipv6Addr::from(v).to_string(),
            Style::Dec => v.to_string(),
            Style::Hex => format!("{v:#x}"),
            Style::Port => match u32::try_from(v).ok().and_then(OfPort::from_number) {
                Some(OfPort::Port(_)) | None => v.to_string(),
                Some(reserved) => reserved.to_string(),
            },
        };
    }
    match st {
        Style::Mac => format!("{}/{}", mac(v), mac(mask)),
        Style::Ipv4 => {
            let m = mask as u32;
            if m.leading_ones() + m.trailing_zeros() == 32 {
                format!("{}/{}", Ipv4Addr::from(v as u32), m.leading_ones())
            } else {
                format!("{}/{}", Ipv4Addr::from(v as u32), Ipv4Addr::from(m))
            }
        }
        Style::Ipv6 => {
            if mask.leading_ones() + mask.trailing_zeros() == 128 {
                format!("{}/{}", Ipv6Addr::from(v), mask.leading_ones())
            } else {
                format!("{}/{}", Ipv6Addr::from(v), Ipv6Addr::from(mask))
            }
        }
        Style::Dec | Style::Hex | Style::Port => format!("{v:#x}/{mask:#x}"),
    }
}

/// Match fields in printing order (the shorthand comes before all).
const ORDER: &[Field] = &[
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::TunIpv6Src,
    Field::TunIpv6Dst,
    Field::TunTos,
    Field::TunTtl,
    Field::TunTpSrc,
    Field::TunTpDst,
    Field::TunFlags,
    Field::TunOpts,
    Field::TunMdPresent,
    Field::Metadata,
    Field::Reg0,
    Field::Reg1,
    Field::Reg2,
    Field::Reg3,
    Field::Reg4,
    Field::Reg5,
    Field::Reg6,
    Field::Reg7,
    Field::Reg8,
    Field::Reg9,
    Field::Reg10,
    Field::Reg11,
    Field::Reg12,
    Field::Reg13,
    Field::Reg14,
    Field::Reg15,
    Field::PktMark,
    Field::InPort,
    Field::VlanTci,
    Field::VlanTpid,
    Field::Vlan2Tpid,
    Field::Vlan2Tci,
    Field::EthSrc,
    Field::EthDst,
    Field::EthType,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::Ipv6Label,
    Field::IpProto,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::IpFrag,
    Field::ArpSha,
    Field::ArpTha,
    Field::NdTarget,
    Field::TpSrc,
    Field::TpDst,
    Field::TcpFlags,
];

/// Fields Open vSwitch prints before the protocol shorthand, in its order.
const BEFORE_SHORTHAND: &[Field] = &[
    Field::RecircId,
    Field::DpHash,
    Field::ConjId,
    Field::CtState,
    Field::CtZone,
    Field::CtMark,
    Field::CtLabel,
    Field::CtNwSrc,
    Field::CtIpv6Src,
    Field::CtNwDst,
    Field::CtIpv6Dst,
    Field::CtNwProto,
    Field::CtTpSrc,
    Field::CtTpDst,
];

/// `recirc_id`, `ct_state`, ... as Open vSwitch's `match_format` writes
/// them.
fn format_packet_meta(parts: &mut Vec<String>, field: Field, v: u128, mask: u128) {
    let full = field.layout().max_value();
    let text = match field {
        Field::CtState if mask == full => {
            let names: Vec<&str> = CT_STATE_FLAGS
                .iter()
                .filter(|(_, b)| v & b != 0)
                .map(|(n, _)| *n)
                .collect();
            if names.is_empty() {
                "0".to_string()
            } else {
                names.join("|")
            }
        }
        Field::CtState => CT_STATE_FLAGS
            .iter()
            .filter(|(_, b)| mask & b != 0)
            .map(|(n, b)| format!("{}{n}", if v & b != 0 { '+' } else { '-' }))
            .collect(),
        Field::RecircId | Field::DpHash | Field::CtMark | Field::CtLabel => {
            if mask == full {
                ovs_hex(v)
            } else {
                format!("{}/{}", ovs_hex(v), ovs_hex(mask))
            }
        }
        _ => value(field, v, mask),
    };
    parts.push(format!("{}={text}", field.name()));
}

/// What the printer knows about the match's protocols.
struct Context {
    arp: bool,
    icmp: bool,
    icmp6: bool,
}

/// Prints a match: `tcp,in_port=1,nw_src=10.0.0.0/8,tp_dst=80`; the
/// catch-all match prints as the empty string.
pub fn format_match(m: &Match) -> String {
    format_match_in(m, &crate::tlv::EMPTY)
}

/// [`format_match`] on a bridge whose TLV table is `tlv`: the option bits
/// it maps print as `tun_metadata<n>`; any it does not, as `tun_opts` and
/// `tun_md_present`.
pub fn format_match_in(m: &Match, tlv: &TlvTable) -> String {
    let mut parts: Vec<String> = Vec::new();
    let eth = exact(m, Field::EthType);
    let proto = exact(m, Field::IpProto);
    let mut skip: Vec<Field> = BEFORE_SHORTHAND.to_vec();
    for &field in BEFORE_SHORTHAND {
        let mask = m.mask().field(field);
        // A megaflow's recirc_id is always exact; 0 (from a port) is
        // the usual case and not printed.
        if mask == 0 || (field == Field::RecircId && m.key().field(field) == 0) {
            continue;
        }
        format_packet_meta(&mut parts, field, m.key().field(field) & mask, mask);
    }
    if let Some((name, covers_proto)) = eth.and_then(|e| shorthand_for(e, proto)) {
        parts.push(name.to_string());
        skip.push(Field::EthType);
        if covers_proto {
            skip.push(Field::IpProto);
        }
    }
    let ctx = Context {
        arp: matches!(eth, Some(ETH_ARP | ETH_RARP)),
        icmp: eth == Some(ETH_IP) && proto == Some(PROTO_ICMP),
        icmp6: eth == Some(ETH_IPV6) && proto == Some(PROTO_ICMP6),
    };
    let rest = Field::ALL.iter().filter(|f| !ORDER.contains(f));
    let (mut opts_left, mut present_left) = (
        m.mask().field(Field::TunOpts),
        (m.mask().field(Field::TunMdPresent) as u64),
    );
    for &field in ORDER.iter().chain(rest) {
        if field == Field::TunOpts {
            tun_metadata(&mut parts, m, tlv, &mut opts_left, &mut present_left);
        }
        let mask = match field {
            Field::TunOpts => opts_left,
            Field::TunMdPresent => u128::from(present_left),
            _ => m.mask().field(field),
        };
        if mask == 0 || skip.contains(&field) {
            continue;
        }
        format_field(&mut parts, &ctx, field, m.key().field(field) & mask, mask);
    }
    parts.join(",")
}

/// A number as Open vSwitch's `ds_put_hex` writes bytes: `0` or `0x...`.
fn ovs_hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// A `tun_metadata` value `V[/M]` of the option at `slot`.
fn tun_metadata_text(v: u128, mask: u128, slot: &OptionSlot) -> String {
    if mask == slot.ones() {
        ovs_hex(v)
    } else {
        format!("{}/{}", ovs_hex(v), ovs_hex(mask))
    }
}

/// The `tun_metadata<n>` a match names (as `tlv` maps them), taking their
/// bits out of `opts_left` and `present_left`.
fn tun_metadata(
    parts: &mut Vec<String>,
    m: &Match,
    tlv: &TlvTable,
    opts_left: &mut u128,
    present_left: &mut u64,
) {
    for slot in tlv.slots() {
        let (i, bit) = (slot.index, slot.present_bit());
        if *present_left & bit == 0 {
            continue;
        }
        *present_left &= !bit;
        let mask = m.mask().field(Field::TunOpts) & slot.mask();
        *opts_left &= !slot.mask();
        if m.key().tun_md_present() & bit == 0 {
            parts.push(format!("tun_metadata{i}=NP"));
        } else if mask == 0 {
            // Present, any value: Open vSwitch prints the name alone.
            parts.push(format!("tun_metadata{i}"));
        } else {
            let v = (m.key().tun_opts() & mask) >> slot.shift();
            let text = tun_metadata_text(v, mask >> slot.shift(), &slot);
            parts.push(format!("tun_metadata{i}={text}"));
        }
    }
}

fn format_field(parts: &mut Vec<String>, ctx: &Context, field: Field, v: u128, mask: u128) {
    let full = field.layout().max_value();
    let name = match field {
        Field::VlanTci => return format_vlan(parts, v, mask),
        Field::EthType => {
            if mask == full {
                parts.push(format!("dl_type=0x{v:04x}"));
                return;
            }
            "dl_type"
        }
        Field::EthSrc => "dl_src",
        Field::EthDst => "dl_dst",
        Field::Ipv4Src if ctx.arp => "arp_spa",
        Field::Ipv4Dst if ctx.arp => "arp_tpa",
        Field::Ipv4Src => "nw_src",
        Field::Ipv4Dst => "nw_dst",
        Field::IpProto if ctx.arp => "arp_op",
        Field::IpProto => "nw_proto",
        Field::IpDscp => {
            if mask == full {
                parts.push(format!("nw_tos={}", v << 2));
                return;
            }
            "ip_dscp"
        }
        Field::IpEcn => "nw_ecn",
        Field::IpTtl => "nw_ttl",
        Field::IpFrag => {
            match FRAG_KEYWORDS
                .iter()
                .find(|&&(_, fv, fm)| (fv, fm) == (v, mask))
            {
                Some((kw, _, _)) => parts.push(format!("nw_frag={kw}")),
                None => parts.push(format!("ip_frag={v:#x}/{mask:#x}")),
            }
            return;
        }
        Field::ArpSha if ctx.icmp6 => "nd_sll",
        Field::ArpTha if ctx.icmp6 => "nd_tll",
        Field::TpSrc if ctx.icmp => "icmp_type",
        Field::TpDst if ctx.icmp => "icmp_code",
        Field::TpSrc if ctx.icmp6 => "icmpv6_type",
        Field::TpDst if ctx.icmp6 => "icmpv6_code",
        Field::TcpFlags | Field::TunFlags => {
            let (names, all, name) = match field {
                Field::TcpFlags => (&TCP_FLAGS[..], 0x1ff, "tcp_flags"),
                _ => (&TUN_FLAGS[..], 0x1, "tun_flags"),
            };
            if mask & !all == 0 {
                let mut s = format!("{name}=");
                for &(flag, bit) in names {
                    if mask & bit != 0 {
                        s.push(if v & bit != 0 { '+' } else { '-' });
                        s.push_str(flag);
                    }
                }
                parts.push(s);
                return;
            }
            name
        }
        _ => read_name(field),
    };
    parts.push(format!("{name}={}", value(field, v, mask)));
}

/// `dl_vlan`/`dl_vlan_pcp` when the TCI bits say exactly that, else
/// `vlan_tci=V/M`.
fn format_vlan(parts: &mut Vec<String>, v: u128, mask: u128) {
    let present = u128::from(VLAN_PRESENT);
    let tagged = v & present != 0;
    let vid = v & 0x0fff;
    let pcp = v >> 13;
    match mask {
        0x1fff if tagged => parts.push(format!("dl_vlan={vid}")),
        0xf000 if tagged => parts.push(format!("dl_vlan_pcp={pcp}")),
        0xffff if tagged => {
            parts.push(format!("dl_vlan={vid}"));
            parts.push(format!("dl_vlan_pcp={pcp}"));
        }
        0xffff => parts.push(format!("vlan_tci=0x{v:04x}")),
        _ => parts.push(format!("vlan_tci=0x{v:04x}/0x{mask:04x}")),
    }
}

/// The name of a field as a `move` source or a generic match field.
fn read_name(field: Field) -> &'static str {
    match field {
        Field::Ipv4Src => "ip_src",
        Field::Ipv4Dst => "ip_dst",
        Field::IpProto => "nw_proto",
        Field::IpEcn => "nw_ecn",
        Field::IpTtl => "nw_ttl",
        _ => field.name(),
    }
}

/// The name of a field as a `set_field`/`move` destination (IP protocol is
/// not writable; the same slot is writable as the ARP opcode).
fn write_name(field: Field) -> &'static str {
    match field {
        Field::IpProto => "arp_op",
        _ => read_name(field),
    }
}

fn subfield(r: &FieldRange, name: &str) -> String {
    let (name, width) = match r.opt {
        Some(slot) => (
            format!("tun_metadata{}", slot.index),
            8 * u32::from(slot.len),
        ),
        None => (name.to_string(), u32::from(r.field.layout().bits)),
    };
    let ofs = u32::from(r.named_ofs());
    if ofs == 0 && u32::from(r.n_bits) == width {
        format!("{name}[]")
    } else if r.n_bits == 1 {
        format!("{name}[{ofs}]")
    } else {
        let hi = ofs + u32::from(r.n_bits) - 1;
        format!("{name}[{ofs}..{hi}]")
    }
}

/// The name an action is written with (`output`, `set_field`, ...), for
/// errors that name one.
pub(crate) fn action_name(a: &OfAction) -> String {
    let mut text = String::new();
    format_action(&mut text, a);
    let end = text.find([':', '(']).unwrap_or(text.len());
    text[..end].to_ascii_lowercase()
}

fn format_action(out: &mut String, a: &OfAction) {
    // Writing to a String cannot fail.
    let _ = match a {
        OfAction::Output {
            port: OfPort::Controller,
            max_len,
        } => write!(out, "CONTROLLER:{max_len}"),
        OfAction::Output {
            port: OfPort::Port(p),
            max_len: 0,
        } => write!(out, "output:{p}"),
        OfAction::Output { port, max_len: 0 } => write!(out, "{port}"),
        OfAction::Output { port, max_len } => {
            write!(out, "output(port={port},max_len={max_len})")
        }
        OfAction::PushVlan(tpid) => write!(out, "push_vlan:{tpid:#06x}"),
        OfAction::PopVlan => write!(out, "pop_vlan"),
        OfAction::SetVlanVid(vid) => write!(out, "mod_vlan_vid:{vid}"),
        OfAction::SetVlanPcp(pcp) => write!(out, "mod_vlan_pcp:{pcp}"),
        OfAction::SetField { field, value, mask } => {
            write!(out, "set_field:{}", set_field_arg(*field, *value, *mask))
        }
        OfAction::SetTunMetadata { slot, value, mask } => write!(
            out,
            "set_field:{}->tun_metadata{}",
            tun_metadata_text(*value, *mask, slot),
            slot.index
        ),
        OfAction::Move { src, dst } => write!(
            out,
            "move:{}->{}",
            subfield(src, read_name(src.field)),
            subfield(dst, write_name(dst.field))
        ),
        OfAction::Push(f) => write!(out, "push:{}", subfield(f, read_name(f.field))),
        OfAction::CheckPktLarger { pkt_len, dst } => write!(
            out,
            "check_pkt_larger({pkt_len})->{}",
            subfield(dst, write_name(dst.field))
        ),
        OfAction::Pop(f) => write!(out, "pop:{}", subfield(f, write_name(f.field))),
        OfAction::Note(bytes) => write!(out, "note:{}", super::value::to_dotted_hex(bytes)),
        OfAction::Conjunction {
            id,
            clause,
            n_clauses,
        } => write!(
            out,
            "conjunction({id},{}/{n_clauses})",
            u16::from(*clause) + 1
        ),
        OfAction::DecTtl => write!(out, "dec_ttl"),
        // The flow specs are not decoded here (ovs-ofctl prints them from
        // the same bytes in a dump).
        OfAction::Learn { learn2, body } => write!(
            out,
            "{}(raw={})",
            if *learn2 { "learn2" } else { "learn" },
            super::value::to_dotted_hex(body)
        ),
        OfAction::Clone(inner) => {
            out.push_str("clone(");
            format_actions(out, inner);
            out.push(')');
            Ok(())
        }
        OfAction::DecTtlIds(ids) => {
            let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
            write!(out, "dec_ttl({})", ids.join(","))
        }
        OfAction::Resubmit(t) => write!(out, "resubmit(,{t})"),
        OfAction::ResubmitPort(p, t) => write!(out, "resubmit({p},{t})"),
        OfAction::Group(g) => write!(out, "group:{g}"),
        OfAction::Sample { probability } => write!(out, "sample(probability={probability})"),
        OfAction::Ct(ct) => {
            out.push_str(&super::ct::format_ct(ct, |acts| {
                let mut s = String::new();
                format_actions(&mut s, acts);
                s
            }));
            Ok(())
        }
        OfAction::CtClear => write!(out, "ct_clear"),
        OfAction::Controller(c) => {
            let mut parts = Vec::new();
            if c.max_len != u16::MAX {
                parts.push(format!("max_len={}", c.max_len));
            }
            if c.reason != openflow::nx_controller::REASON_ACTION {
                let r = super::actions::PACKET_IN_REASONS.get(usize::from(c.reason));
                parts.push(format!("reason={}", r.copied().unwrap_or("unknown")));
            }
            if c.controller_id != 0 {
                parts.push(format!("id={}", c.controller_id));
            }
            if !c.userdata.is_empty() {
                parts.push(format!(
                    "userdata={}",
                    super::value::to_dotted_hex(&c.userdata)
                ));
            }
            if c.pause {
                parts.push("pause".into());
            }
            if c.meter_id != openflow::nx_controller::NO_METER {
                parts.push(format!("meter_id={}", c.meter_id));
            }
            if parts.is_empty() {
                write!(out, "CONTROLLER:{}", c.max_len)
            } else {
                write!(out, "controller({})", parts.join(","))
            }
        }
    };
}

/// `VALUE[/MASK]->FIELD`.
fn set_field_arg(field: Field, v: u128, mask: u128) -> String {
    let present = u128::from(VLAN_PRESENT);
    if field == Field::VlanTci && v & present != 0 {
        match mask {
            0x1fff => return format!("{v}->vlan_vid"),
            0xf000 => return format!("{}->vlan_pcp", v >> 13),
            _ => {}
        }
    }
    let shown = if field == Field::VlanTci && mask != 0xffff {
        format!("0x{v:04x}/0x{mask:04x}")
    } else {
        value(field, v, mask)
    };
    format!("{shown}->{}", write_name(field))
}

/// Prints an action list (`drop` when empty): `output:1,group:2`.
pub fn format_action_list(actions: &[OfAction]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut s = String::new();
    format_actions(&mut s, actions);
    s
}

fn format_actions(out: &mut String, actions: &[OfAction]) {
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        format_action(out, a);
    }
}

/// Prints an instruction set: `drop` when empty, else
/// `meter:1,output:2,clear_actions,write_actions(...),write_metadata:0x1/0xff,goto_table:2`.
pub fn format_instructions(i: &Instructions) -> String {
    if i.is_drop() {
        return "drop".to_string();
    }
    let mut items: Vec<String> = Vec::new();
    if let Some(m) = i.meter {
        items.push(format!("meter:{m}"));
    }
    if !i.apply.is_empty() {
        let mut s = String::new();
        format_actions(&mut s, &i.apply);
        items.push(s);
    }
    if i.clear_actions {
        items.push("clear_actions".to_string());
    }
    if let Some(w) = &i.write {
        let mut s = String::from("write_actions(");
        format_actions(&mut s, w);
        s.push(')');
        items.push(s);
    }
    if let Some((v, m)) = i.write_metadata {
        items.push(if m == u64::MAX {
            format!("write_metadata:{v:#x}")
        } else {
            format!("write_metadata:{v:#x}/{m:#x}")
        });
    }
    if let Some(t) = i.goto_table {
        items.push(format!("goto_table:{t}"));
    }
    items.join(",")
}

/// Prints a rule as `ovs-ofctl dump-flows` would, minus statistics:
/// `table=1, priority=100, cookie=0x5, idle_timeout=10, tcp,tp_dst=80 actions=output:2`.
/// Defaults (cookie 0, no timeouts, importance 0, flags off) are left out.
pub fn format_rule(r: &RuleSpec) -> String {
    format_rule_in(r, &crate::tlv::EMPTY)
}

/// [`format_rule`] on a bridge whose TLV table is `tlv`.
pub fn format_rule_in(r: &RuleSpec, tlv: &TlvTable) -> String {
    let mut s = format!("table={}, priority={}", r.table, r.priority.0);
    // Writing to a String cannot fail.
    if r.cookie.0 != 0 {
        let _ = write!(s, ", cookie={:#x}", r.cookie.0);
    }
    for (name, v) in [
        ("idle_timeout", r.idle_timeout),
        ("hard_timeout", r.hard_timeout),
        ("importance", r.importance),
    ] {
        if v != 0 {
            let _ = write!(s, ", {name}={v}");
        }
    }
    let f = &r.flags;
    for (name, on) in [
        ("send_flow_rem", f.send_flow_rem),
        ("check_overlap", f.check_overlap),
        ("reset_counts", f.reset_counts),
        ("no_packet_counts", f.no_packet_counts),
        ("no_byte_counts", f.no_byte_counts),
    ] {
        if on {
            let _ = write!(s, ", {name}");
        }
    }
    let m = format_match_in(&r.matched, tlv);
    if !m.is_empty() {
        s.push_str(", ");
        s.push_str(&m);
    }
    s.push_str(" actions=");
    s.push_str(&format_instructions(&r.instructions));
    s
}

#[cfg(test)]
#[path = "tests/print.rs"]
mod tests;

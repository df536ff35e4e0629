//! Property tests of the flow syntax:
//! - random valid rules (any subset of match fields with values and masks
//!   satisfying the prerequisites, any instruction set) survive
//!   `format_rule` → `parse_flow(Add)` unchanged;
//! - the parsers never panic, on arbitrary strings and on valid lines with
//!   random edits; and whatever parses prints to text that parses back to
//!   the same rule.

use megaflow::{Field, FlowKey, Mask, Match, MeterId, PortNo};
use ofproto::rule::{FieldRange, FlowFlags};
use ofproto::text::{format_rule, parse_flow, parse_instructions, parse_match};
use ofproto::{
    Cookie, FlowModCommand, Instructions, OfAction, OfPort, Priority, RuleSpec, TableId,
};
use proptest::prelude::*;

/// Fields `set_field` and `move` may write.
const WRITABLE: &[Field] = &[
    Field::InPort,
    Field::PktMark,
    Field::Metadata,
    Field::Reg0,
    Field::Reg1,
    Field::Reg2,
    Field::Reg3,
    Field::Reg4,
    Field::Reg5,
    Field::Reg6,
    Field::Reg7,
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::EthSrc,
    Field::EthDst,
    Field::VlanTci,
    Field::IpProto,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::Ipv6Label,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::TpSrc,
    Field::TpDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::NdTarget,
    Field::ArpSha,
    Field::ArpTha,
];

/// Fields with no prerequisite.
const FREE: &[Field] = &[
    Field::InPort,
    Field::PktMark,
    Field::Metadata,
    Field::Reg0,
    Field::Reg3,
    Field::Reg7,
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::EthSrc,
    Field::EthDst,
    Field::VlanTci,
    Field::VlanTpid,
    Field::Vlan2Tpid,
    Field::Vlan2Tci,
];

/// A (value, mask) of `field`: the mask exact, a prefix, random or a
/// single bit, the value anything (the match keeps it under the mask).
fn value_mask(field: Field) -> impl Strategy<Value = (Field, u128, u128)> {
    let max = field.layout().max_value();
    let bits = u32::from(field.layout().bits);
    let mask = prop_oneof![
        3 => Just(max),
        1 => (1..=bits).prop_map(move |n| (max << (bits - n)) & max),
        1 => any::<u128>().prop_map(move |m| m & max),
        1 => (0..bits).prop_map(|b| 1u128 << b),
    ];
    (any::<u128>(), mask).prop_map(move |(v, m)| (field, v & m, m))
}

fn some_of(fields: &'static [Field]) -> impl Strategy<Value = Vec<(Field, u128, u128)>> {
    proptest::sample::subsequence(fields, 0..=fields.len())
        .prop_flat_map(|fs| fs.into_iter().map(value_mask).collect::<Vec<_>>())
}

fn exact(field: Field, v: u128) -> (Field, u128, u128) {
    (field, v, field.layout().max_value())
}

/// The protocol fields of a match, consistent with its prerequisites.
fn protocol_fields() -> impl Strategy<Value = Vec<(Field, u128, u128)>> {
    let ip_common: &'static [Field] = &[Field::IpDscp, Field::IpEcn, Field::IpTtl, Field::IpFrag];
    let l4_ports: &'static [Field] = &[Field::TpSrc, Field::TpDst];
    let ipv4: &'static [Field] = &[Field::Ipv4Src, Field::Ipv4Dst];
    let ipv6: &'static [Field] = &[Field::Ipv6Src, Field::Ipv6Dst, Field::Ipv6Label];
    let arp: &'static [Field] = &[
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::IpProto,
        Field::ArpSha,
        Field::ArpTha,
    ];
    let l4 = |eth: u128, proto: u128| {
        let base = vec![exact(Field::EthType, eth), exact(Field::IpProto, proto)];
        let mut extra: Vec<&'static [Field]> = vec![ip_common, l4_ports];
        extra.push(if eth == 0x0800 { ipv4 } else { ipv6 });
        if proto == 6 {
            extra.push(&[Field::TcpFlags]);
        }
        (
            Just(base),
            extra.into_iter().map(some_of).collect::<Vec<_>>(),
        )
            .prop_map(|(b, e)| {
                b.into_iter()
                    .chain(e.into_iter().flatten())
                    .collect::<Vec<_>>()
            })
    };
    prop_oneof![
        // nothing, or an arbitrary ethertype
        Just(vec![]),
        value_mask(Field::EthType).prop_map(|f| vec![f]),
        // ip / ipv6 with an arbitrary (maybe masked) protocol
        (
            some_of(ip_common),
            some_of(ipv4),
            proptest::option::of(value_mask(Field::IpProto))
        )
            .prop_map(|(a, b, p)| {
                let mut v = vec![exact(Field::EthType, 0x0800)];
                v.extend(a.into_iter().chain(b).chain(p));
                v
            }),
        (
            some_of(ip_common),
            some_of(ipv6),
            proptest::option::of(value_mask(Field::IpProto))
        )
            .prop_map(|(a, b, p)| {
                let mut v = vec![exact(Field::EthType, 0x86dd)];
                v.extend(a.into_iter().chain(b).chain(p));
                v
            }),
        (prop_oneof![Just(0x0806u128), Just(0x8035)], some_of(arp)).prop_map(|(eth, f)| {
            let mut v = vec![exact(Field::EthType, eth)];
            v.extend(f);
            v
        }),
        l4(0x0800, 6),
        l4(0x0800, 17),
        l4(0x0800, 132),
        l4(0x86dd, 6),
        l4(0x86dd, 17),
        l4(0x86dd, 132),
        // icmp: type and code in the port slots
        (some_of(ipv4), some_of(l4_ports)).prop_map(|(a, b)| {
            let mut v = vec![exact(Field::EthType, 0x0800), exact(Field::IpProto, 1)];
            v.extend(a.into_iter().chain(b));
            v
        }),
        // icmp6, maybe neighbour discovery
        (
            some_of(ipv6),
            some_of(&[Field::TpDst]),
            0..3u8,
            some_of(&[Field::NdTarget]),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(|(a, code, nd, target, ll, mac)| {
                let mut v = vec![exact(Field::EthType, 0x86dd), exact(Field::IpProto, 58)];
                v.extend(a.into_iter().chain(code));
                match nd {
                    1 | 2 => {
                        let (ty, slot) = if nd == 1 {
                            (135, Field::ArpSha)
                        } else {
                            (136, Field::ArpTha)
                        };
                        v.push(exact(Field::TpSrc, ty));
                        v.extend(target);
                        if ll {
                            v.push(exact(slot, u128::from(mac) & 0xffff_ffff_ffff));
                        }
                    }
                    _ => {}
                }
                v
            }),
    ]
}

fn arb_match() -> impl Strategy<Value = Match> {
    (some_of(FREE), protocol_fields()).prop_map(|(free, proto)| {
        let mut m = Match::new(&FlowKey::ZERO, &Mask::EMPTY);
        for (f, v, mask) in free.into_iter().chain(proto) {
            m.set_field_masked(f, v, mask);
        }
        m
    })
}

fn arb_port() -> impl Strategy<Value = OfPort> {
    prop_oneof![
        4 => (1..=OfPort::MAX_NUMBER).prop_map(|n| OfPort::Port(PortNo(n))),
        1 => prop_oneof![
            Just(OfPort::InPort),
            Just(OfPort::All),
            Just(OfPort::Flood),
            Just(OfPort::Controller),
            Just(OfPort::Local),
            Just(OfPort::Normal),
        ],
    ]
}

fn arb_range(fields: &'static [Field]) -> impl Strategy<Value = FieldRange> {
    proptest::sample::select(fields).prop_flat_map(|field| {
        let width = field.layout().bits;
        (0..width).prop_flat_map(move |ofs| {
            (1..=width - ofs).prop_map(move |n_bits| FieldRange::new(field, ofs, n_bits))
        })
    })
}

fn arb_move() -> impl Strategy<Value = OfAction> {
    (
        arb_range(Field::ALL),
        proptest::sample::select(WRITABLE),
        any::<u8>(),
    )
        .prop_map(|(src, dst_field, pick)| {
            let dst_width = dst_field.layout().bits;
            let n_bits = src.n_bits.min(dst_width);
            let src = FieldRange { n_bits, ..src };
            let room = dst_width - n_bits;
            let ofs = if room == 0 { 0 } else { pick % (room + 1) };
            OfAction::Move {
                src,
                dst: FieldRange {
                    field: dst_field,
                    ofs,
                    n_bits,
                    opt: None,
                },
            }
        })
}

fn arb_action() -> impl Strategy<Value = OfAction> {
    prop_oneof![
        3 => (arb_port(), prop_oneof![3 => Just(0u16), 1 => any::<u16>()]).prop_map(|(port, max_len)| {
            OfAction::Output { port, max_len }
        }),
        1 => prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(OfAction::PushVlan),
        1 => Just(OfAction::PopVlan),
        1 => (0..=4095u16).prop_map(OfAction::SetVlanVid),
        1 => (0..=7u8).prop_map(OfAction::SetVlanPcp),
        3 => proptest::sample::select(WRITABLE).prop_flat_map(value_mask).prop_map(
            |(field, value, mask)| OfAction::SetField { field, value, mask }
        ),
        2 => arb_move(),
        1 => Just(OfAction::DecTtl),
        1 => (0..=253u8).prop_map(|t| OfAction::Resubmit(TableId(t))),
        1 => (1..=u16::MAX).prop_map(|probability| OfAction::Sample { probability }),
    ]
}

fn arb_instructions(table: u8) -> impl Strategy<Value = Instructions> {
    let goto = if table < TableId::MAX.0 {
        proptest::option::of((table + 1..=TableId::MAX.0).prop_map(TableId)).boxed()
    } else {
        Just(None).boxed()
    };
    (
        proptest::option::of((1..=0xffff_0000u32).prop_map(MeterId)),
        proptest::collection::vec(arb_action(), 0..5),
        any::<bool>(),
        proptest::option::of(proptest::collection::vec(arb_action(), 0..3)),
        proptest::option::of((any::<u64>(), any::<u64>()).prop_map(|(v, m)| (v & m, m))),
        goto,
    )
        .prop_map(
            |(meter, apply, clear_actions, write, write_metadata, goto_table)| Instructions {
                meter,
                apply,
                clear_actions,
                write,
                write_metadata,
                goto_table,
            },
        )
}

fn arb_rule() -> impl Strategy<Value = RuleSpec> {
    (0..=TableId::MAX.0).prop_flat_map(|table| {
        (
            any::<u16>(),
            arb_match(),
            any::<u64>(),
            (any::<u16>(), any::<u16>(), any::<u16>()),
            any::<[bool; 5]>(),
            arb_instructions(table),
        )
            .prop_map(
                move |(priority, matched, cookie, (idle, hard, importance), f, instructions)| {
                    RuleSpec {
                        table: TableId(table),
                        priority: Priority(priority),
                        matched,
                        cookie: Cookie(cookie),
                        idle_timeout: idle,
                        hard_timeout: hard,
                        importance,
                        flags: FlowFlags {
                            send_flow_rem: f[0],
                            check_overlap: f[1],
                            reset_counts: f[2],
                            no_packet_counts: f[3],
                            no_byte_counts: f[4],
                        },
                        instructions,
                    }
                },
            )
    })
}

/// One random edit of a line, on characters (never splitting one).
#[derive(Clone, Debug)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, char),
    Truncate(usize),
    Duplicate(usize, usize),
    Swap(usize, usize),
    /// Drop the n-th comma/space separated token.
    DropToken(usize),
}

fn arb_edit() -> impl Strategy<Value = Edit> {
    let chars = prop_oneof![
        4 => proptest::sample::select(
            &[',', ' ', '=', ':', '/', '(', ')', '[', ']', '.', '-', '>', '0', 'x', 'f', '+'][..]
        ),
        1 => any::<char>(),
    ];
    prop_oneof![
        1 => (any::<usize>(), 1..8usize).prop_map(|(a, n)| Edit::Delete(a, n)),
        1 => (any::<usize>(), chars).prop_map(|(a, c)| Edit::Insert(a, c)),
        1 => any::<usize>().prop_map(Edit::Truncate),
        1 => (any::<usize>(), 1..12usize).prop_map(|(a, n)| Edit::Duplicate(a, n)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        3 => any::<usize>().prop_map(Edit::DropToken),
    ]
}

fn apply_edits(s: &str, edits: &[Edit]) -> String {
    let mut c: Vec<char> = s.chars().collect();
    for e in edits {
        let len = c.len().max(1);
        match *e {
            Edit::Delete(a, n) => {
                let a = a % len;
                let end = (a + n).min(c.len());
                if a < end {
                    c.drain(a..end);
                }
            }
            Edit::Insert(a, ch) => {
                let a = a % (c.len() + 1);
                c.insert(a, ch);
            }
            Edit::Truncate(a) => c.truncate(a % len),
            Edit::Duplicate(a, n) => {
                let a = a % len;
                let end = (a + n).min(c.len());
                if a < end {
                    let seg: Vec<char> = c[a..end].to_vec();
                    c.splice(end..end, seg);
                }
            }
            Edit::Swap(a, b) => {
                if !c.is_empty() {
                    let (a, b) = (a % c.len(), b % c.len());
                    c.swap(a, b);
                }
            }
            Edit::DropToken(n) => {
                let text: String = c.iter().collect();
                let tokens: Vec<&str> = text.split([',', ' ']).collect();
                let n = n % tokens.len();
                let kept: Vec<&str> = tokens
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != n)
                    .map(|(_, t)| *t)
                    .collect();
                c = kept.join(",").chars().collect();
            }
        }
    }
    c.into_iter().collect()
}

/// If `s` parses as an add, its printed form parses back to the same rule.
fn check_reparse(s: &str) -> Result<(), TestCaseError> {
    let _ = parse_match(s);
    let _ = parse_instructions(s);
    for command in [
        FlowModCommand::Modify,
        FlowModCommand::Delete,
        FlowModCommand::DeleteStrict,
    ] {
        let _ = parse_flow(s, command);
    }
    if let Ok(fm) = parse_flow(s, FlowModCommand::Add) {
        let text = format_rule(&fm.rule);
        let again = parse_flow(&text, FlowModCommand::Add)
            .map_err(|e| TestCaseError::fail(format!("{s:?} -> {text:?}: {e}")))?;
        prop_assert_eq!(&again.rule, &fm.rule, "{:?} -> {:?}", s, text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rules_round_trip(rule in arb_rule()) {
        let text = format_rule(&rule);
        let fm = parse_flow(&text, FlowModCommand::Add)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&fm.rule, &rule, "{}", text);
        prop_assert_eq!(fm.table, Some(rule.table));
        prop_assert_eq!(fm.command, FlowModCommand::Add);
    }

    #[test]
    fn arbitrary_strings_do_not_panic(s in any::<String>()) {
        check_reparse(&s)?;
    }

    #[test]
    fn flowish_strings_do_not_panic(
        s in "[a-z_0-9=,:/.()>\\[\\] +-]{0,60}(actions=[a-z_0-9=,:/.()>\\[\\] +-]{0,40})?"
    ) {
        check_reparse(&s)?;
    }

    #[test]
    fn edited_valid_lines_do_not_panic(
        rule in arb_rule(),
        edits in proptest::collection::vec(arb_edit(), 1..4),
    ) {
        let s = apply_edits(&format_rule(&rule), &edits);
        check_reparse(&s)?;
    }
}

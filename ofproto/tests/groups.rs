//! Groups: what each type does to a packet during translation, the
//! megaflow that comes out, and the GROUP_MOD rules.

mod common;

use common::tcp;
use megaflow::{DpAction, Field, FlowKey, Match, PortNo, Timestamp};
use ofproto::group::{Bucket, GroupError, GroupSpec, GroupTable, GroupType, GROUP_TABLE};
use ofproto::rule::{Instructions, OfAction, OfPort, RuleSpec};
use ofproto::{Bridge, Priority, TableId};

const NOW: Timestamp = Timestamp(1_000_000);

fn out(p: u32) -> OfAction {
    OfAction::Output {
        port: OfPort::Port(PortNo(p)),
        max_len: 0,
    }
}

fn bucket(actions: Vec<OfAction>) -> Bucket {
    Bucket {
        weight: 0,
        watch_port: None,
        actions,
    }
}

fn group(br: &mut Bridge, id: u32, ty: GroupType, buckets: Vec<Bucket>) {
    br.add_group(
        GroupSpec {
            id,
            ty,
            buckets,
            method: Default::default(),
        },
        NOW,
    )
    .expect("valid group");
}

/// Table 0: everything runs `actions`.
fn run_all(br: &mut Bridge, actions: Vec<OfAction>) {
    let mut s = RuleSpec::new(TableId(0), Priority(1), Match::catch_all());
    s.instructions = Instructions {
        apply: actions,
        ..Default::default()
    };
    br.apply_flow_mod(&ofproto::FlowMod::add(s), NOW)
        .expect("rule");
}

#[test]
fn an_all_group_of_outputs_is_a_megaflow_with_one_output_per_bucket() {
    let mut br = Bridge::with_ports(1..=4);
    group(
        &mut br,
        1,
        GroupType::All,
        vec![
            bucket(vec![out(2)]),
            bucket(vec![out(3)]),
            bucket(vec![out(1)]),
        ],
    );
    run_all(&mut br, vec![OfAction::Group(1)]);
    let t = br.translate(&tcp(1, 2, 3, 4), NOW);
    // output:1 is the input port: skipped, as outside a group.
    assert_eq!(
        t.actions,
        vec![DpAction::Output(PortNo(2)), DpAction::Output(PortNo(3))]
    );
    let fields: Vec<Field> = t.mask.fields().collect();
    assert_eq!(
        fields,
        vec![Field::InPort, Field::RecircId],
        "only the input port (and the stage, as every megaflow) is read"
    );
}

#[test]
fn each_bucket_of_an_all_group_gets_its_own_copy_of_the_packet() {
    let mut br = Bridge::with_ports(1..=4);
    let new_dst = 0x0200_0000_00aa_u128;
    group(
        &mut br,
        7,
        GroupType::All,
        vec![
            bucket(vec![
                OfAction::SetField {
                    field: Field::EthDst,
                    value: new_dst,
                    mask: (1 << 48) - 1,
                },
                OfAction::DecTtl,
                out(2),
            ]),
            bucket(vec![out(3)]),
        ],
    );
    run_all(&mut br, vec![OfAction::Group(7), out(4)]);
    let k = tcp(1, 2, 3, 4);
    let t = br.translate(&k, NOW);
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetEthDst(new_dst as u64),
            DpAction::DecTtl,
            DpAction::Output(PortNo(2)),
            // Back to the packet's own destination and TTL for bucket 1 and
            // for what follows the group.
            DpAction::SetEthDst(k.eth_dst()),
            DpAction::SetTtl(64),
            DpAction::Output(PortNo(3)),
            DpAction::Output(PortNo(4)),
        ]
    );
    // Putting the packet back read its destination and TTL.
    assert!(!t.mask.is_wildcard(Field::EthDst));
    assert!(!t.mask.is_wildcard(Field::IpTtl));
}

#[test]
fn an_indirect_group_runs_its_bucket_and_no_rule_can_name_a_missing_one() {
    let mut br = Bridge::with_ports(1..=4);
    group(&mut br, 2, GroupType::Indirect, vec![bucket(vec![out(4)])]);
    run_all(&mut br, vec![OfAction::Group(2)]);
    let t = br.translate(&tcp(1, 2, 3, 4), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(4))]);
    // A rule naming a group that does not exist is refused; deleting a
    // group deletes the rules that run it: no translation meets one.
    let mut s = RuleSpec::new(TableId(0), Priority(2), Match::catch_all());
    s.instructions.apply = vec![OfAction::Group(99)];
    assert!(br.apply_flow_mod(&ofproto::FlowMod::add(s), NOW).is_err());
    let removed = br.delete_groups(Some(2), NOW);
    assert_eq!(removed.len(), 1, "the rule that ran group 2 went with it");
    assert!(br.translate(&tcp(1, 2, 3, 4), NOW).actions.is_empty());
}

#[test]
fn a_fast_failover_group_takes_the_first_bucket_whose_port_is_up() {
    let mut br = Bridge::with_ports(1..=4);
    let watched = |p: u32| Bucket {
        weight: 0,
        watch_port: Some(PortNo(p)),
        actions: vec![out(p)],
    };
    group(
        &mut br,
        3,
        GroupType::FastFailover,
        vec![watched(2), watched(3)],
    );
    run_all(&mut br, vec![OfAction::Group(3)]);
    let k = tcp(1, 2, 3, 4);
    assert_eq!(
        br.translate(&k, NOW).actions,
        vec![DpAction::Output(PortNo(2))]
    );
    let before = br.generations();
    br.set_port_up(PortNo(2), false);
    assert_ne!(br.generations(), before, "megaflows through it go stale");
    assert_eq!(
        br.translate(&k, NOW).actions,
        vec![DpAction::Output(PortNo(3))]
    );
    br.set_port_up(PortNo(3), false);
    assert!(
        br.translate(&k, NOW).actions.is_empty(),
        "no live bucket drops"
    );
}

#[test]
fn a_select_group_spreads_connections_by_weight_and_keeps_each_on_one_bucket() {
    let mut br = Bridge::with_ports(1..=4);
    let weighted = |w: u16, p: u32| Bucket {
        weight: w,
        watch_port: None,
        actions: vec![out(p)],
    };
    group(
        &mut br,
        4,
        GroupType::Select,
        vec![weighted(1, 2), weighted(3, 3), weighted(0, 4)],
    );
    run_all(&mut br, vec![OfAction::Group(4)]);
    let mut counts = [0u32; 5];
    let n = 4000u32;
    for i in 0..n {
        let k = tcp(0x0a00_0000 + i, 0x0a01_0000, 10_000 + (i % 5000) as u16, 80);
        let t = br.translate(&k, NOW);
        let [DpAction::Output(p)] = t.actions[..] else {
            panic!("one output, got {:?}", t.actions);
        };
        counts[p.0 as usize] += 1;
        // The bucket depends on addresses and ports: the megaflow is the
        // connection's.
        for f in [Field::Ipv4Src, Field::Ipv4Dst, Field::TpSrc, Field::TpDst] {
            assert!(!t.mask.is_wildcard(f), "{f} must be in the megaflow");
        }
        // The same connection, either direction, takes the same bucket.
        let mut back = tcp(0x0a01_0000, 0x0a00_0000 + i, 80, 10_000 + (i % 5000) as u16);
        back.set_eth_src(k.eth_dst());
        back.set_eth_dst(k.eth_src());
        back.set_in_port(2);
        assert_eq!(br.translate(&k, NOW).actions, t.actions);
        let tb = br.translate(&back, NOW);
        if p.0 != 2 {
            assert_eq!(tb.actions, t.actions, "reverse direction of connection {i}");
        }
    }
    assert_eq!(counts[4], 0, "weight 0 is never chosen");
    // 1:3 by weight; 4,000 draws put each share within a few percent.
    let share = f64::from(counts[3]) / f64::from(n);
    assert!((0.70..0.80).contains(&share), "bucket shares {counts:?}");
}

#[test]
fn removing_a_select_bucket_moves_only_its_connections() {
    let weighted = |p: u32| Bucket {
        weight: 1,
        watch_port: None,
        actions: vec![out(p)],
    };
    let mut br = Bridge::with_ports(1..=5);
    group(
        &mut br,
        5,
        GroupType::Select,
        vec![weighted(2), weighted(3), weighted(4)],
    );
    run_all(&mut br, vec![OfAction::Group(5)]);
    let keys: Vec<FlowKey> = (0..600).map(|i| tcp(i, 0x0a01_0000, 4000, 80)).collect();
    let before: Vec<_> = keys.iter().map(|k| br.translate(k, NOW).actions).collect();
    br.modify_group(GroupSpec {
        id: 5,
        ty: GroupType::Select,
        buckets: vec![weighted(2), weighted(3)],
        method: Default::default(),
    })
    .expect("modify");
    for (k, b) in keys.iter().zip(&before) {
        let a = br.translate(k, NOW).actions;
        if *b != vec![DpAction::Output(PortNo(4))] {
            assert_eq!(&a, b, "a connection of a remaining bucket moved");
        }
    }
}

#[test]
fn a_group_in_the_action_set_wins_over_an_output() {
    let mut br = Bridge::with_ports(1..=4);
    group(&mut br, 1, GroupType::Indirect, vec![bucket(vec![out(3)])]);
    let mut s = RuleSpec::new(TableId(0), Priority(1), Match::catch_all());
    s.instructions.write = Some(vec![out(2), OfAction::Group(1)]);
    br.apply_flow_mod(&ofproto::FlowMod::add(s), NOW)
        .expect("rule");
    let t = br.translate(&tcp(1, 2, 3, 4), NOW);
    assert_eq!(t.actions, vec![DpAction::Output(PortNo(3))]);
}

#[test]
fn translation_credits_the_group_and_the_buckets_it_ran() {
    let mut br = Bridge::with_ports(1..=4);
    group(
        &mut br,
        1,
        GroupType::All,
        vec![bucket(vec![out(2)]), bucket(vec![out(3)])],
    );
    run_all(&mut br, vec![OfAction::Group(1)]);
    let t = br.translate(&tcp(1, 2, 3, 4), NOW);
    let groups: Vec<_> = t.rules.iter().filter(|r| r.table == GROUP_TABLE).collect();
    assert_eq!(groups.len(), 3, "the group and its two buckets");
    for r in &t.rules {
        br.credit(*r, 10, 1000, NOW);
    }
    let g = br.groups().get(1).expect("group");
    assert_eq!((g.packets, g.bytes), (10, 1000));
    assert_eq!(g.bucket_stats, vec![(10, 1000), (10, 1000)]);
    // A modify is a new incarnation: old megaflows no longer credit the
    // buckets (they are not the new ones), but the group's total goes on
    // counting (the revalidator credits a megaflow's last counts before
    // it re-translates it), and a deleted group's life ends.
    br.modify_group(GroupSpec {
        id: 1,
        ty: GroupType::All,
        buckets: vec![bucket(vec![out(4)])],
        method: Default::default(),
    })
    .expect("modify");
    for r in &t.rules {
        br.credit(*r, 1, 1, NOW);
    }
    let g = br.groups().get(1).expect("group");
    assert_eq!((g.packets, g.bucket_stats.clone()), (11, vec![(0, 0)]));
    br.delete_groups(Some(1), NOW);
    br.add_group(
        GroupSpec {
            id: 1,
            ty: GroupType::All,
            buckets: vec![],
            method: Default::default(),
        },
        NOW,
    )
    .expect("re-add");
    for r in &t.rules {
        br.credit(*r, 1, 1, NOW);
    }
    assert_eq!(br.groups().get(1).expect("group").packets, 0, "a new group");
}

#[test]
fn group_mods_are_checked() {
    let mut table = GroupTable::new();
    let spec = |id, ty, buckets| GroupSpec {
        id,
        ty,
        buckets,
        method: Default::default(),
    };
    let g = &mut table;
    assert_eq!(
        g.add(spec(1, GroupType::Indirect, vec![]), NOW),
        Err(GroupError::IndirectBuckets(0))
    );
    let weighted = Bucket {
        weight: 2,
        ..bucket(vec![])
    };
    assert_eq!(
        g.add(spec(1, GroupType::All, vec![weighted]), NOW),
        Err(GroupError::Weight(0))
    );
    assert_eq!(
        g.add(spec(1, GroupType::FastFailover, vec![bucket(vec![])]), NOW),
        Err(GroupError::Watch(0))
    );
    assert_eq!(
        g.add(
            spec(1, GroupType::All, vec![bucket(vec![OfAction::Group(2)])]),
            NOW
        ),
        Err(GroupError::Chaining(0))
    );
    assert_eq!(
        g.add(spec(0xffff_ff01, GroupType::All, vec![]), NOW),
        Err(GroupError::Invalid(0xffff_ff01))
    );
    g.add(spec(1, GroupType::All, vec![]), NOW).expect("add");
    assert_eq!(
        g.add(spec(1, GroupType::All, vec![]), NOW),
        Err(GroupError::Exists(1))
    );
    assert_eq!(
        g.modify(spec(2, GroupType::All, vec![])),
        Err(GroupError::Unknown(2))
    );
    assert!(!g.is_empty() && g.len() == 1);
    assert_eq!(g.delete(Some(5)), Vec::<u32>::new());
    assert_eq!(g.delete(None), vec![1]);
}

#[test]
fn group_actions_parse_and_print_as_ovs_ofctl_writes_them() {
    let i = ofproto::text::parse_instructions("group:5,output:2").expect("parses");
    assert_eq!(i.apply, vec![OfAction::Group(5), out(2)]);
    assert_eq!(ofproto::text::format_instructions(&i), "group:5,output:2");
    assert!(ofproto::text::parse_instructions("group:4294967295").is_err());
    let fm = ofproto::text::parse_flow("out_group=5", ofproto::rule::FlowModCommand::Delete)
        .expect("delete filter");
    assert_eq!(fm.out_group, Some(5));
}

#[test]
fn a_flow_naming_a_group_that_does_not_exist_is_refused_wherever_it_comes_from() {
    let mut br = Bridge::with_ports(1..=2);
    let fm = ofproto::text::parse_flow(
        "priority=5,actions=group:3",
        ofproto::rule::FlowModCommand::Add,
    )
    .expect("parses");
    let e = br.apply_flow_mod(&fm, NOW).expect_err("no group 3");
    assert_eq!(e, ofproto::table::FlowModError::UnknownGroup(3));
    assert_eq!(e.of_error(), (2, 9), "OFPBAC_BAD_OUT_GROUP");
    assert!(br.tables().is_empty());
    group(&mut br, 3, GroupType::Indirect, vec![bucket(vec![out(2)])]);
    br.apply_flow_mod(&fm, NOW).expect("now it exists");
    assert_eq!(br.tables().len(), 1);
}

mod dp_hash {
    use super::*;
    use megaflow::actions::HashAlg;
    use ofproto::group::{DpHashMap, SelectMethod, MAX_HASH_VALUES};
    use proptest::prelude::*;

    fn weighted(w: u16, p: u32) -> Bucket {
        Bucket {
            weight: w,
            watch_port: None,
            actions: vec![out(p)],
        }
    }

    fn select(br: &mut Bridge, id: u32, buckets: Vec<Bucket>, method: SelectMethod) {
        br.add_group(
            GroupSpec {
                id,
                ty: GroupType::Select,
                buckets,
                method,
            },
            NOW,
        )
        .expect("valid group");
    }

    const SYM: SelectMethod = SelectMethod::DpHash { param: 1 << 32 };

    /// The recirculation id a first stage ends in, after `hash`.
    fn hashed_to(t: &ofproto::Translation, alg: HashAlg, basis: u32) -> u32 {
        match &t.actions[..] {
            [DpAction::Hash { alg: a, basis: b }, DpAction::Recirc(id)]
                if *a == alg && *b == basis =>
            {
                *id
            }
            a => panic!("expected hash then recirc: {a:?}"),
        }
    }

    /// `k` at stage `id` with `dp_hash` `h` (as the datapath hands it on).
    fn stage(k: &FlowKey, id: u32, h: u32) -> FlowKey {
        let mut k = *k;
        k.set_recirc_id(u64::from(id));
        k.set_dp_hash(u64::from(h));
        k
    }

    #[test]
    fn a_dp_hash_group_hashes_recirculates_and_picks_by_the_hash_bits() {
        let mut br = Bridge::with_ports(1..=5);
        let buckets = vec![weighted(1, 2), weighted(3, 3), weighted(0, 4)];
        select(&mut br, 7, buckets, SYM);
        run_all(&mut br, vec![OfAction::Group(7)]);
        // Stage one: one megaflow for every connection (no address or port
        // in it), the same id.
        let first = br.translate(&tcp(1, 0x0a01_0000, 4000, 80), NOW);
        let id = hashed_to(&first, HashAlg::SymL4, 0);
        for f in [Field::Ipv4Src, Field::Ipv4Dst, Field::TpSrc, Field::TpDst] {
            assert!(first.mask.is_wildcard(f), "{f} is not in the first stage");
        }
        for i in 0..200 {
            let t = br.translate(&tcp(i, 0x0a01_0000, 4000 + i as u16, 80), NOW);
            assert_eq!(t.actions, first.actions, "connection {i}");
        }
        // Stage two: 16 values of dp_hash's low bits, 4 to the weight-1
        // bucket, 12 to the weight-3 one, none to weight 0; the megaflow
        // matches those bits and no more.
        let mut counts = [0u32; 6];
        for h in 0..16u32 {
            let k = stage(&tcp(9, 0x0a01_0000, 4000, 80), id, h | 0x5a0);
            let t = br.translate(&k, NOW);
            let [DpAction::Output(p)] = t.actions[..] else {
                panic!("dp_hash {h}: {:?}", t.actions)
            };
            counts[p.0 as usize] += 1;
            assert_eq!(t.mask.field(Field::DpHash), 0xf, "dp_hash {h}");
            assert!(t.mask.is_wildcard(Field::TpSrc));
            // Any other packet with the same low bits: the same bucket.
            let other = stage(&tcp(77, 0x0a02_0000, 9, 443), id, h | 0x3f0);
            assert_eq!(br.translate(&other, NOW).actions, t.actions);
        }
        assert_eq!(counts[2..5], [4, 12, 0], "by weight: {counts:?}");
        // The group is credited once, at the stage that picks.
        assert!(!first.rules.iter().any(|r| r.table == GROUP_TABLE));
        let t = br.translate(&stage(&tcp(9, 1, 2, 3), id, 0x10), NOW);
        assert!(t.rules.iter().any(|r| r.table == GROUP_TABLE));
    }

    #[test]
    fn the_next_stage_goes_on_where_the_group_was_through_resubmits_and_gotos() {
        let mut br = Bridge::with_ports(1..=8);
        select(&mut br, 7, vec![weighted(1, 2)], SYM);
        // Table 0: resubmit to 1, then output 5, then go to 2; table 1:
        // the group, then output 6; table 2: output 7; write_actions(3)
        // waits in the action set.
        let rule = |table: u8, apply: Vec<OfAction>, goto: Option<u8>, write: bool| {
            let mut s = RuleSpec::new(TableId(table), Priority(1), Match::catch_all());
            s.instructions = Instructions {
                apply,
                goto_table: goto.map(TableId),
                write: write.then(|| vec![out(3)]),
                ..Default::default()
            };
            ofproto::FlowMod::add(s)
        };
        for fm in [
            rule(
                0,
                vec![OfAction::Resubmit(TableId(1)), out(5)],
                Some(2),
                true,
            ),
            rule(1, vec![OfAction::Group(7), out(6)], None, false),
            rule(2, vec![out(7)], None, false),
        ] {
            br.apply_flow_mod(&fm, NOW).expect("rule");
        }
        let first = br.translate(&tcp(1, 2, 3, 4), NOW);
        let id = hashed_to(&first, HashAlg::SymL4, 0);
        let t = br.translate(&stage(&tcp(1, 2, 3, 4), id, 0x77), NOW);
        let ports: Vec<u32> = t
            .actions
            .iter()
            .map(|a| match a {
                DpAction::Output(p) => p.0,
                a => panic!("{a:?}"),
            })
            .collect();
        assert_eq!(ports, vec![2, 6, 5, 7, 3], "{:?}", t.actions);
    }

    #[test]
    fn groups_that_name_no_method_follow_the_switch_default_and_fall_back_past_256_values() {
        let mut br = Bridge::with_ports(1..=5);
        select(
            &mut br,
            1,
            vec![weighted(1, 2), weighted(1, 3)],
            SelectMethod::Default,
        );
        let many: Vec<Bucket> = (0..300).map(|i| weighted(1, 2 + i % 3)).collect();
        select(&mut br, 2, many, SelectMethod::Default);
        select(&mut br, 3, vec![weighted(1, 2)], SelectMethod::Hash);
        let gen = br.groups().generation();
        let picks = |br: &Bridge, g: u32| br.groups().get(g).and_then(|g| g.dp_hash.clone());
        assert!(picks(&br, 1).is_none(), "hash in translation by default");
        br.groups_mut().set_dp_hash_default(true);
        assert!(br.groups().generation() > gen, "megaflows are revalidated");
        let m = picks(&br, 1).expect("dp_hash now");
        assert_eq!((m.alg, m.basis, m.buckets.len()), (HashAlg::SymL4, 0, 16));
        assert!(
            picks(&br, 2).is_none(),
            "300 buckets need more than 256 values"
        );
        assert!(picks(&br, 3).is_none(), "asked for hash");
        run_all(&mut br, vec![OfAction::Group(2)]);
        let t = br.translate(&tcp(1, 2, 3, 4), NOW);
        assert!(
            matches!(t.actions[..], [DpAction::Output(_)]),
            "{:?}",
            t.actions
        );
    }

    #[test]
    fn a_method_is_for_select_groups_and_its_algorithm_must_be_known() {
        let mut table = GroupTable::new();
        let spec = |ty, method| GroupSpec {
            id: 1,
            ty,
            buckets: vec![],
            method,
        };
        assert_eq!(
            table.add(spec(GroupType::All, SYM), NOW),
            Err(GroupError::Method)
        );
        let bad = SelectMethod::DpHash { param: 5 << 32 };
        assert_eq!(
            table.add(spec(GroupType::Select, bad), NOW),
            Err(GroupError::HashAlg(5))
        );
        assert!(table.add(spec(GroupType::Select, SYM), NOW).is_ok());
        // No bucket with weight: no map (the group drops, as without).
        assert!(table.get(1).is_some_and(|g| g.dp_hash.is_none()));
    }

    proptest! {
        /// The values go to the buckets by Webster's method, a bucket of
        /// weight 0 gets none, and the lightest bucket with weight gets at
        /// least one.
        #[test]
        fn the_map_apportions_values_by_weight(weights in prop::collection::vec(0u16..200, 1..40)) {
            let buckets: Vec<Bucket> = weights.iter().map(|&w| weighted(w, 2)).collect();
            let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
            let Some(map) = DpHashMap::apportion(&buckets, MAX_HASH_VALUES) else {
                // Only when nothing has weight or the lightest share needs
                // more than 256 values.
                let min = weights.iter().copied().filter(|w| *w > 0).min();
                prop_assert!(min.is_none_or(|m| total.div_ceil(u64::from(m)) > 256));
                return Ok(());
            };
            let n = map.len();
            prop_assert!(n.is_power_of_two() && (16..=MAX_HASH_VALUES).contains(&n));
            let hits: Vec<u64> = (0..weights.len())
                .map(|i| map.iter().filter(|&&b| usize::from(b) == i).count() as u64)
                .collect();
            for (i, &w) in weights.iter().enumerate() {
                let (w, h) = (u64::from(w), hits[i]);
                if w > 0 {
                    prop_assert!(h >= 1, "bucket {i} of weight {w} got none");
                } else {
                    prop_assert_eq!(h, 0, "bucket {} of weight 0", i);
                }
                // Webster's (Sainte-Laguë's) divisor method, as Open
                // vSwitch's `group_setup_dp_hash_table`: one divisor d
                // rounds every w / d to its hits, i.e. no bucket's next
                // quotient w / (2h + 1) beats another's last one
                // w' / (2h' - 1). (Not within one of the quota: the
                // method may stray further, rarely; Open vSwitch's does.)
                for (j, &wj) in weights.iter().enumerate() {
                    let (wj, hj) = (u64::from(wj), hits[j]);
                    if hj > 0 {
                        prop_assert!(
                            w * (2 * hj - 1) <= wj * (2 * h + 1),
                            "bucket {i} ({w}, {h} values) should have taken one of bucket {j}'s ({wj}, {hj})"
                        );
                    }
                }
            }
            prop_assert_eq!(hits.iter().sum::<u64>(), n as u64);
        }
    }
}

//! The megaflow contract (DESIGN.md), both halves, on random pipelines:
//! sound — for a random packet p, every packet q that agrees with p on
//! translate(p)'s mask gets the same datapath actions as p; and wide — the
//! mask holds only bits that a table the packet visited matches on or an
//! action reads.
//!
//! Tables are random: several tables chained by goto_table and resubmit,
//! overlapping wildcard rules (prefixes, port masks, VLAN, registers set by
//! earlier tables), and actions that rewrite what later tables match
//! (set_field, VLAN push/pop/modify, move, dec_ttl, write_metadata) or read
//! the packet (output to the input port, flood, NORMAL with a seeded MAC
//! table). Cases are seeded; a failure prints its seed, the tables and both
//! translations.

use megaflow::key::{FRAG_ANY, VLAN_PRESENT};
use megaflow::{Field, FlowKey, Mask, Match, PortNo, Timestamp};
use ofproto::group::{Bucket, GroupSpec, GroupType};
use ofproto::mac::MacLearn;
use ofproto::rule::{FieldRange, Instructions, OfAction, OfPort, RuleSpec};
use ofproto::wildcards::PIPELINE_FIELDS;
use ofproto::xlate::TraceEvent;
use ofproto::{Bridge, Priority, TableId};

/// xorshift64*: small, seedable, good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

const MACS: [u64; 4] = [
    0x0200_0000_0001,
    0x0200_0000_0002,
    0x0200_0000_0003,
    0xffff_ffff_ffff,
];
const V4: [u32; 5] = [
    0x0a00_0001,
    0x0a01_0203,
    0x0a01_02ff,
    0xc612_0001,
    0x0a80_0000,
];
const PORTS: [u16; 4] = [80, 443, 8080, 53];

fn prefix32(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

/// A random rule match built from realistic pieces.
fn random_match(r: &mut Rng) -> Match {
    let mut m = Match::catch_all();
    if r.chance(30) {
        m.set_field_masked(Field::InPort, u128::from(1 + r.below(4)), u32::MAX.into());
    }
    if r.chance(20) {
        m.set_field_masked(Field::EthDst, r.pick(&MACS).into(), (1u128 << 48) - 1);
    }
    if r.chance(30) {
        let vid = r.pick(&[0u16, 10, 20]);
        m.set_field_masked(Field::VlanTci, (VLAN_PRESENT | vid).into(), 0x1fff);
    } else if r.chance(10) {
        m.set_field_masked(Field::VlanTci, 0, 0xffff);
    }
    if r.chance(20) {
        m.set_field_masked(Field::Reg0, r.below(3).into(), u32::MAX.into());
    }
    if r.chance(10) {
        m.set_field_masked(Field::Metadata, r.below(3).into(), 0xff);
    }
    if r.chance(60) {
        m.set_field_masked(Field::EthType, 0x0800, 0xffff);
        for f in [Field::Ipv4Src, Field::Ipv4Dst] {
            if r.chance(50) {
                let len = r.pick(&[8u32, 16, 24, 31, 32]);
                m.set_field_masked(f, r.pick(&V4).into(), prefix32(len).into());
            }
        }
        if r.chance(15) {
            m.set_field_masked(Field::IpTtl, r.pick(&[63u128, 64, 1]), 0xff);
        }
        if r.chance(50) {
            m.set_field_masked(Field::IpProto, r.pick(&[6u128, 17]), 0xff);
            for f in [Field::TpSrc, Field::TpDst] {
                if r.chance(40) {
                    let mask = r.pick(&[0xffffu128, 0xff00, 0xfff0, 0x8000]);
                    m.set_field_masked(f, r.pick(&PORTS).into(), mask);
                }
            }
        }
    } else if r.chance(20) {
        m.set_field_masked(Field::EthType, 0x86dd, 0xffff);
        if r.chance(60) {
            let len = r.pick(&[16u32, 64, 128]);
            let mask = u128::MAX << (128 - len);
            m.set_field_masked(
                Field::Ipv6Src,
                0x2001_0db8u128 << 96 | r.below(3) as u128,
                mask,
            );
        }
    }
    m
}

fn random_action(r: &mut Rng, table: u8, n_tables: u8) -> OfAction {
    match r.below(16) {
        0..=2 => OfAction::Output {
            port: OfPort::Port(PortNo(1 + r.below(4) as u32)),
            max_len: 0,
        },
        3 => OfAction::Output {
            port: r.pick(&[OfPort::InPort, OfPort::Flood, OfPort::All, OfPort::Normal]),
            max_len: 0,
        },
        4 => OfAction::SetField {
            field: Field::Reg0,
            value: r.below(3).into(),
            mask: u32::MAX.into(),
        },
        5 => OfAction::SetField {
            field: Field::Ipv4Dst,
            value: r.pick(&V4).into(),
            mask: r.pick(&[u32::MAX, 0xffff_0000]).into(),
        },
        6 => OfAction::SetField {
            field: Field::EthDst,
            value: r.pick(&MACS).into(),
            mask: (1u128 << 48) - 1,
        },
        7 => OfAction::PushVlan(0x8100),
        8 => OfAction::PopVlan,
        9 => OfAction::SetVlanVid(r.pick(&[10u16, 20])),
        10 => OfAction::DecTtl,
        11 => OfAction::Move {
            src: FieldRange {
                field: Field::Ipv4Src,
                ofs: 24,
                n_bits: 2,
                opt: None,
            },
            dst: FieldRange {
                field: Field::Reg0,
                ofs: 0,
                n_bits: 2,
                opt: None,
            },
        },
        12 if table + 1 < n_tables => OfAction::Resubmit(TableId(
            table + 1 + r.below(u64::from(n_tables - table - 1)) as u8,
        )),
        13 => OfAction::SetField {
            field: Field::TpDst,
            value: r.pick(&PORTS).into(),
            mask: 0xffff,
        },
        14 => OfAction::Output {
            port: OfPort::Controller,
            max_len: 128,
        },
        15 if r.chance(60) => OfAction::Group(1 + r.below(N_GROUPS) as u32),
        15 if r.chance(50) => OfAction::Clone(
            (0..1 + r.below(3))
                .map(|_| random_action(r, table, n_tables))
                .collect(),
        ),
        _ => OfAction::SetVlanPcp(r.below(8) as u8),
    }
}

/// Groups 1..=N_GROUPS exist in every random bridge.
const N_GROUPS: u64 = 3;

/// A group of a random type whose buckets run random actions (no group
/// actions: chaining is refused).
fn random_group(r: &mut Rng, id: u32, n_tables: u8) -> GroupSpec {
    let ty = r.pick(&[
        GroupType::All,
        GroupType::Select,
        GroupType::Indirect,
        GroupType::FastFailover,
    ]);
    let n = if ty == GroupType::Indirect {
        1
    } else {
        r.below(4) as usize
    };
    let buckets = (0..n)
        .map(|_| Bucket {
            weight: if ty == GroupType::Select {
                r.below(3) as u16
            } else {
                0
            },
            watch_port: (ty == GroupType::FastFailover || r.chance(30))
                .then(|| PortNo(1 + r.below(4) as u32)),
            actions: (0..1 + r.below(3))
                .map(|_| loop {
                    let a = random_action(r, 0, n_tables);
                    if !matches!(a, OfAction::Group(_)) {
                        break a;
                    }
                })
                .collect(),
        })
        .collect();
    GroupSpec {
        id,
        ty,
        buckets,
        method: Default::default(),
    }
}

fn random_bridge(r: &mut Rng) -> Bridge {
    let mut br = Bridge::with_ports(1..=4);
    let now = Timestamp::from_millis(1);
    for (i, &mac) in MACS[..3].iter().enumerate() {
        br.learn(
            &[MacLearn {
                bridge: ofproto::BridgeNo::MAIN,
                vlan: 0,
                mac,
                port: PortNo(1 + i as u32),
            }],
            now,
        );
    }
    let n_tables = 1 + r.below(4) as u8;
    for id in 1..=N_GROUPS as u32 {
        let g = random_group(r, id, n_tables);
        br.add_group(g, now).expect("valid random group");
    }
    for p in 1..=4 {
        if r.chance(20) {
            br.set_port_up(PortNo(p), false);
        }
    }
    for t in 0..n_tables {
        let n_rules = 1 + r.below(12);
        for _ in 0..n_rules {
            let mut spec = RuleSpec::new(TableId(t), Priority(r.below(40) as u16), random_match(r));
            let mut ins = Instructions::default();
            for _ in 0..r.below(6) {
                ins.apply.push(random_action(r, t, n_tables));
            }
            if r.chance(15) {
                ins.write = Some(vec![random_action(r, t, n_tables)]);
            }
            if r.chance(5) {
                ins.clear_actions = true;
            }
            if r.chance(15) {
                ins.write_metadata = Some((r.below(3), 0xff));
            }
            if t + 1 < n_tables && r.chance(50) {
                ins.goto_table = Some(TableId(t + 1 + r.below(u64::from(n_tables - t - 1)) as u8));
            }
            spec.instructions = ins;
            br.apply_flow_mod(&ofproto::FlowMod::add(spec), now)
                .expect("valid random rule");
        }
        if r.chance(30) {
            add_conjunctions(r, &mut br, t, n_tables, now);
        }
    }
    br
}

/// Conjunctive flows in table `t`: two-clause conjunctions 1 and 2 over
/// random matches at one priority, and a `conj_id` flow for each.
fn add_conjunctions(r: &mut Rng, br: &mut Bridge, t: u8, n_tables: u8, now: Timestamp) {
    let prio = Priority(r.below(40) as u16);
    for _ in 0..2 + r.below(4) {
        let mut spec = RuleSpec::new(TableId(t), prio, random_match(r));
        spec.instructions.apply.push(OfAction::Conjunction {
            id: 1 + r.below(2) as u32,
            clause: r.below(2) as u8,
            n_clauses: 2,
        });
        br.apply_flow_mod(&ofproto::FlowMod::add(spec), now)
            .expect("valid conjunctive rule");
    }
    for id in 1..=2u128 {
        let mut m = random_match(r);
        m.set_field_masked(Field::ConjId, id, u32::MAX.into());
        let mut spec = RuleSpec::new(TableId(t), Priority(r.below(40) as u16), m);
        for _ in 0..1 + r.below(3) {
            spec.instructions.apply.push(random_action(r, t, n_tables));
        }
        br.apply_flow_mod(&ofproto::FlowMod::add(spec), now)
            .expect("valid conj_id rule");
    }
}

/// A packet near the rules' values.
fn random_packet(r: &mut Rng) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1 + r.below(4));
    k.set_eth_src(r.pick(&MACS) ^ r.below(2));
    k.set_eth_dst(r.pick(&MACS));
    if r.chance(40) {
        k.set_vlan_tpid(0x8100);
        k.set_vlan_tci(u64::from(
            VLAN_PRESENT | r.pick(&[0u16, 10, 20, 30]) | (r.below(8) as u16) << 13,
        ));
        if r.chance(30) {
            k.set_vlan2_tpid(0x8100);
            k.set_vlan2_tci(u64::from(VLAN_PRESENT | 7));
        }
    }
    match r.below(10) {
        0..=6 => {
            k.set_eth_type(0x0800);
            k.set_ipv4_src(u64::from(r.pick(&V4) ^ (1 << r.below(32))));
            k.set_ipv4_dst(u64::from(r.pick(&V4) ^ (1 << r.below(32))));
            k.set_ip_ttl(r.pick(&[1, 64, 63, 200]));
            if r.chance(10) {
                k.set_ip_frag(u64::from(FRAG_ANY));
            }
            let proto = r.pick(&[6u64, 17, 1]);
            k.set_ip_proto(proto);
            if proto != 1 {
                k.set_tp_src(u64::from(r.pick(&PORTS) ^ (1 << r.below(16))));
                k.set_tp_dst(u64::from(r.pick(&PORTS)) ^ (r.below(4) << r.below(14)));
            }
        }
        7..=8 => {
            k.set_eth_type(0x86dd);
            k.set_ipv6_src(0x2001_0db8u128 << 96 | r.below(3) as u128);
            k.set_ip_proto(6);
        }
        _ => k.set_eth_type(0x0806),
    }
    k
}

/// A packet that agrees with `p` on `mask`, random elsewhere (pipeline
/// fields stay zero: every packet from a port has them so).
fn agreeing_packet(r: &mut Rng, p: &FlowKey, mask: &Mask, near: &FlowKey) -> FlowKey {
    let pw = p.words();
    let mw = mask.words();
    let nw = near.words();
    let mut w = [0u64; megaflow::KEY_WORDS];
    for i in 0..w.len() {
        // Half the time take another realistic packet's bits, else noise.
        let other = if r.chance(50) { nw[i] } else { r.next() };
        w[i] = (pw[i] & mw[i]) | (other & !mw[i]);
    }
    let mut q = FlowKey::from_words(w);
    for &f in PIPELINE_FIELDS {
        q.set_field(f, 0);
    }
    q
}

fn dump(br: &Bridge) -> String {
    let mut s = String::new();
    for t in br.tables().tables() {
        for (_, rule) in t.rules() {
            s += &format!(
                "table={} prio={} {:?} -> {:?}\n",
                t.id(),
                rule.spec.priority.0,
                rule.spec.matched,
                rule.spec.instructions
            );
        }
    }
    for g in br.groups().iter() {
        s += &format!("{}\n", g.spec);
    }
    s
}

const SEEDS: u64 = 1500;

#[test]
fn megaflows_are_sound_on_random_pipelines() {
    let now = Timestamp::from_millis(2);
    let mut checked = 0u64;
    let mut wild_bits = 0u64;
    for seed in 0..SEEDS {
        let mut r = Rng::new(seed);
        let br = random_bridge(&mut r);
        for _ in 0..8 {
            let p = random_packet(&mut r);
            let tp = br.translate(&p, now);
            assert!(
                Match::new(&p, &tp.mask).matches(&p),
                "seed {seed}: the megaflow must match its own packet"
            );
            wild_bits += u64::from(tp.mask.words().iter().map(|w| w.count_zeros()).sum::<u32>());
            for _ in 0..40 {
                let near = random_packet(&mut r);
                let q = agreeing_packet(&mut r, &p, &tp.mask, &near);
                let tq = br.translate(&q, now);
                checked += 1;
                assert_eq!(
                    tp.actions,
                    tq.actions,
                    "seed {seed}: unsound megaflow\nmask: {:?}\np: {p:?}\nq: {q:?}\ntables:\n{}\ntrace p:\n{}\ntrace q:\n{}",
                    tp.mask,
                    dump(&br),
                    br.trace(&p, now).explain(&p),
                    br.trace(&q, now).explain(&q),
                );
            }
        }
    }
    eprintln!(
        "checked {checked} agreeing packets; mean wildcarded bits per megaflow {}",
        wild_bits / (SEEDS * 8)
    );
}

/// The VLAN fields: what NORMAL and the VLAN actions look at.
const VLAN_FIELDS: [Field; 4] = [
    Field::VlanTci,
    Field::VlanTpid,
    Field::Vlan2Tci,
    Field::Vlan2Tpid,
];

/// The fields an action may read of the packet, by what it means (not by
/// how translation is written): outputs compare with the input port, NORMAL
/// reads the addresses and tags, a datapath `set` writes a whole field (so
/// the bits not rewritten come from the packet) after checking the headers
/// are there, `move` reads its source, `dec_ttl` the TTL.
fn action_reads(a: &OfAction, mask: &mut Mask) {
    let prereqs = |mask: &mut Mask| {
        mask.set_exact(Field::EthType);
        mask.set_exact(Field::IpProto);
    };
    match a {
        OfAction::Output { port, .. } => {
            mask.set_exact(Field::InPort);
            if *port == OfPort::Normal {
                mask.set_exact(Field::EthSrc);
                mask.set_exact(Field::EthDst);
                for f in VLAN_FIELDS {
                    mask.set_exact(f);
                }
            }
        }
        OfAction::PushVlan(_)
        | OfAction::PopVlan
        | OfAction::SetVlanVid(_)
        | OfAction::SetVlanPcp(_) => {
            for f in VLAN_FIELDS {
                mask.set_exact(f);
            }
        }
        OfAction::SetField { field, .. } => {
            if VLAN_FIELDS.contains(field) {
                for f in VLAN_FIELDS {
                    mask.set_exact(f);
                }
            } else if !PIPELINE_FIELDS.contains(field) {
                mask.set_exact(*field);
                prereqs(mask);
            }
        }
        // Tunnel metadata: written, not read (a tunnel output reads it).
        OfAction::SetTunMetadata { .. } => {}
        OfAction::Move { src, dst } => {
            for f in [src.field, dst.field] {
                if !PIPELINE_FIELDS.contains(&f) {
                    mask.set_exact(f);
                }
            }
            prereqs(mask);
        }
        OfAction::Push(f) | OfAction::Pop(f) => {
            if !PIPELINE_FIELDS.contains(&f.field) {
                mask.set_exact(f.field);
            }
            prereqs(mask);
        }
        // Registers and metadata only: pipeline fields.
        OfAction::Note(_)
        | OfAction::Controller(_)
        | OfAction::Conjunction { .. }
        | OfAction::Learn { .. } => {}
        OfAction::DecTtl | OfAction::DecTtlIds(_) => {
            mask.set_exact(Field::IpTtl);
            prereqs(mask);
        }
        OfAction::Group(_) => {
            // The SELECT hash.
            for f in [
                Field::EthSrc,
                Field::EthDst,
                Field::EthType,
                Field::Ipv4Src,
                Field::Ipv4Dst,
                Field::Ipv6Src,
                Field::Ipv6Dst,
                Field::IpProto,
                Field::TpSrc,
                Field::TpDst,
            ] {
                mask.set_exact(f);
            }
        }
        OfAction::Resubmit(_)
        | OfAction::ResubmitPort(..)
        | OfAction::CheckPktLarger { .. }
        | OfAction::Sample { .. }
        | OfAction::CtClear => {}
        OfAction::Clone(inner) => inner.iter().for_each(|a| action_reads(a, mask)),
        // The zone's register (the tracker reads the packet, not the key).
        OfAction::Ct(ct) => {
            if let ofproto::rule::CtZone::Field(r) = ct.zone {
                if !PIPELINE_FIELDS.contains(&r.field) {
                    mask.set_exact(r.field);
                }
            }
        }
    }
}

/// Every field the bridge's actions may read, wherever they are.
fn actions_read(br: &Bridge) -> Mask {
    let mut mask = Mask::EMPTY;
    for t in br.tables().tables() {
        for (_, rule) in t.rules() {
            let ins = &rule.spec.instructions;
            for a in ins.apply.iter().chain(ins.write.iter().flatten()) {
                action_reads(a, &mut mask);
            }
        }
    }
    for g in br.groups().iter() {
        for a in g.spec.buckets.iter().flat_map(|b| &b.actions) {
            action_reads(a, &mut mask);
        }
    }
    mask
}

/// The bits a lookup in `table` that found a rule of priority `hit` (none:
/// a miss) may read, as a linear scan in priority order justifies them: the
/// masks of the rules it had to look at, those of priority `hit` or above
/// (every rule on a miss). A classifier probes one subtable per mask and
/// stops at the first whose highest priority is below the best found, and
/// its trie checks read no bit beyond the prefix of the subtable they skip,
/// so it reads no more than that. A table with conjunctive flows may look
/// again below the answer (the `conj_id` lookup): every rule.
fn lookup_reads(br: &Bridge, table: TableId, hit: Option<Priority>) -> Mask {
    br.tables()
        .table(table)
        .map(|t| {
            let conjunctive = t.rules().any(|(_, r)| r.is_conjunctive());
            t.rules()
                .filter(|(_, r)| conjunctive || hit.is_none_or(|p| r.spec.priority >= p))
                .fold(Mask::EMPTY, |m, (_, r)| m.union(r.spec.matched.mask()))
        })
        .unwrap_or(Mask::EMPTY)
}

/// The other half of the megaflow contract: megaflows are as wide as the
/// pipeline allows. A bit is un-wildcarded only if a lookup of the packet
/// had to look at a rule matching on it (see [`lookup_reads`]) or an action
/// of the bridge reads its field; everything else stays wildcarded. An
/// xlate that returned exact masks, read tables it did not visit or rules
/// below the one it hit, or whole fields for prefix rules fails here; the
/// check is shown to bite by counting the translations where an all-exact
/// mask would have been refused.
#[test]
fn megaflows_are_no_narrower_than_the_tables_and_actions_justify() {
    let now = Timestamp::from_millis(2);
    let mut all_fields = Mask::EMPTY;
    for &f in Field::ALL {
        all_fields.set_exact(f);
    }
    let (mut checked, mut exact_refused, mut visited_some) = (0u64, 0u64, 0u64);
    for seed in 0..SEEDS {
        let mut r = Rng::new(seed);
        let br = random_bridge(&mut r);
        let reads = actions_read(&br);
        for _ in 0..8 {
            let p = random_packet(&mut r);
            let t = br.trace(&p, now);
            assert_eq!(
                t.mask,
                br.translate(&p, now).mask,
                "seed {seed}: trace differs"
            );
            let mut allowed = reads;
            for ev in &t.trace {
                if let TraceEvent::Table { table, rule, .. } = ev {
                    let hit = rule.as_ref().map(|r| r.priority);
                    allowed = allowed.union(&lookup_reads(&br, *table, hit));
                }
            }
            // A megaflow that reads a tag also names its TPID (the eSwitch
            // matches C-VLAN or S-VLAN, never "some tag").
            for (tci, tpid) in [
                (Field::VlanTci, Field::VlanTpid),
                (Field::Vlan2Tci, Field::Vlan2Tpid),
            ] {
                if allowed.field(tci) != 0 {
                    allowed.set_exact(tpid);
                }
            }
            // Every megaflow is of one stage.
            allowed.set_exact(Field::RecircId);
            visited_some += u64::from(
                t.trace
                    .iter()
                    .any(|e| matches!(e, TraceEvent::Table { .. })),
            );
            checked += 1;
            exact_refused += u64::from(!all_fields.is_subset_of(&allowed));
            assert!(
                t.mask.is_subset_of(&allowed),
                "seed {seed}: megaflow reads bits nothing justifies\n\
                 mask:    {:?}\nallowed: {:?}\nextra:   {:?}\np: {p:?}\ntables:\n{}\ntrace:\n{}",
                t.mask,
                allowed,
                t.mask
                    .intersect(&Mask::from_words(allowed.words().map(|w| !w))),
                dump(&br),
                t.explain(&p),
            );
        }
    }
    eprintln!(
        "width: {checked} translations; an all-exact mask would have been refused in \
         {exact_refused}; {visited_some} visited a table"
    );
    assert_eq!(visited_some, checked, "every translation looks up table 0");
    assert!(
        exact_refused * 100 >= checked * 95,
        "the bound is too loose to bite: {exact_refused} of {checked}"
    );
}

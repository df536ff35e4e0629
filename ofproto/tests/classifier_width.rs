//! Width of the classifier's wildcards on hand-written tables whose ideal
//! megaflow mask is known, and a comparison with the linear reference on a
//! random ACL.

use megaflow::{Field, FlowKey, Mask, Match};
use ofproto::classifier::reference::ReferenceClassifier;
#[path = "../fixtures/workload.rs"]
mod workload;
use ofproto::{Classifier, Priority, RuleId, Wildcards};
use workload::{dense_acl, Rng as WRng};

/// A rule builder: `(field, value, mask bits)` triples.
fn rule(fields: &[(Field, u128, u128)]) -> Match {
    let mut k = FlowKey::ZERO;
    let mut m = Mask::EMPTY;
    for &(f, v, bits) in fields {
        k.set_field(f, v);
        m.set_field(f, bits);
    }
    Match::new(&k, &m)
}

fn exact(f: Field, v: u128) -> (Field, u128, u128) {
    (f, v, f.layout().max_value())
}

fn v4_src(addr: u32, plen: u32) -> (Field, u128, u128) {
    (
        Field::Ipv4Src,
        addr as u128,
        (u32::MAX << (32 - plen)) as u128,
    )
}

/// A TCP/IPv4 packet.
fn tcp4(in_port: u64, src: u32, dst: u32, sport: u64, dport: u64) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(in_port);
    k.set_eth_dst(0x0200_0000_0001);
    k.set_eth_src(0x0200_0000_0002);
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ip_ttl(64);
    k.set_ipv4_src(src as u64);
    k.set_ipv4_dst(dst as u64);
    k.set_tp_src(sport);
    k.set_tp_dst(dport);
    k.set_tcp_flags(0x010);
    k
}

fn classifier(rules: &[(Match, u16)]) -> Classifier {
    let mut c = Classifier::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        c.insert(RuleId(i as u32), m, Priority(*p));
    }
    c
}

fn lookup(c: &Classifier, k: &FlowKey) -> (Option<RuleId>, Mask) {
    let mut wc = Wildcards::new();
    let r = c.lookup(k, &mut wc);
    (r, *wc.mask())
}

#[test]
fn eth_dst_rules_leave_l3_l4_wildcarded() {
    let c = classifier(&[
        (rule(&[exact(Field::EthDst, 0x0200_0000_0001)]), 10),
        (rule(&[exact(Field::EthDst, 0x0200_0000_0009)]), 10),
    ]);
    let k = tcp4(1, 0x0a00_0001, 0x0a00_0002, 1234, 80);
    let (r, mask) = lookup(&c, &k);
    assert_eq!(r, Some(RuleId(0)));
    assert_eq!(mask, Mask::EMPTY.with_exact(Field::EthDst));
    let mut miss = k;
    miss.set_eth_dst(0x0200_0000_0005);
    let (r, mask) = lookup(&c, &miss);
    assert_eq!(r, None);
    assert_eq!(mask, Mask::EMPTY.with_exact(Field::EthDst));
}

#[test]
fn in_port_rules_record_only_in_port() {
    let c = classifier(&[
        (rule(&[exact(Field::InPort, 1)]), 5),
        (rule(&[exact(Field::InPort, 2)]), 5),
    ]);
    for port in [1, 2, 3] {
        let (r, mask) = lookup(&c, &tcp4(port, 1, 2, 3, 4));
        assert_eq!(r, (port < 3).then(|| RuleId(port as u32 - 1)));
        assert_eq!(mask, Mask::EMPTY.with_exact(Field::InPort), "port {port}");
    }
}

#[test]
fn nested_ipv4_prefixes_record_a_short_prefix() {
    let eth = exact(Field::EthType, 0x0800);
    let c = classifier(&[
        (rule(&[eth, v4_src(0x0a00_0000, 8)]), 10),
        (rule(&[eth, v4_src(0x0a01_0200, 24)]), 20),
    ]);
    // 10.9.9.9: the /24 subtable is skipped by the trie, which had to read
    // up to bit 12, where 10.9 (0000_1001) leaves 10.1 (0000_0001): /13.
    // The /8 rule matches: its whole mask (eth_type, /8).
    let (r, mask) = lookup(&c, &tcp4(1, 0x0a09_0909, 0x0a00_0002, 1, 2));
    assert_eq!(r, Some(RuleId(0)));
    assert_eq!(
        mask,
        Mask::EMPTY
            .with_exact(Field::EthType)
            .with(Field::Ipv4Src, 0xfff8_0000)
    );
    // 11.0.0.1: both subtables skipped by the trie after 8 bits.
    let (r, mask) = lookup(&c, &tcp4(1, 0x0b00_0001, 0x0a00_0002, 1, 2));
    assert_eq!(r, None);
    assert_eq!(mask, Mask::EMPTY.with(Field::Ipv4Src, 0xff00_0000));
    // 10.1.2.3: the /24 rule wins; the /8 subtable is never visited.
    let (r, mask) = lookup(&c, &tcp4(1, 0x0a01_0203, 0x0a00_0002, 1, 2));
    assert_eq!(r, Some(RuleId(1)));
    assert_eq!(
        mask,
        Mask::EMPTY
            .with_exact(Field::EthType)
            .with(Field::Ipv4Src, 0xffff_ff00)
    );
}

#[test]
fn ipv6_prefix_skip() {
    let eth = exact(Field::EthType, 0x86dd);
    let p48 = u128::MAX << 80;
    let c = classifier(&[(
        rule(&[eth, (Field::Ipv6Dst, 0x2001_0db8_0001 << 80, p48)]),
        10,
    )]);
    let mut k = FlowKey::ZERO;
    k.set_eth_type(0x86dd);
    // differs from 2001:db8:1:: at bit 47 (the last bit of the /48)
    k.set_ipv6_dst((0x2001_0db8_0000u128 << 80) | 1);
    let (r, mask) = lookup(&c, &k);
    assert_eq!(r, None);
    assert_eq!(mask, Mask::EMPTY.with(Field::Ipv6Dst, p48));
    // differs at bit 2: three bits decide
    k.set_ipv6_dst(0x0001u128 << 112);
    let (_, mask) = lookup(&c, &k);
    assert_eq!(mask, Mask::EMPTY.with(Field::Ipv6Dst, 0b111u128 << 125));
}

#[test]
fn non_ip_packet_does_not_consult_address_tries() {
    let eth = exact(Field::EthType, 0x0800);
    let c = classifier(&[(rule(&[eth, v4_src(0x0a00_0000, 8)]), 10)]);
    let mut k = FlowKey::ZERO;
    k.set_eth_type(0x86dd);
    k.set_ipv6_src(1);
    let (r, mask) = lookup(&c, &k);
    assert_eq!(r, None);
    // the L2 stage (eth_type) decides; no v4 bits of an IPv6 packet
    assert_eq!(mask, Mask::EMPTY.with_exact(Field::EthType));
}

#[test]
fn port_trie_records_ports_up_to_the_first_difference() {
    // 80 = 0x0050 and 443 = 0x01bb first differ at bit 7 of tp_dst.
    let c = classifier(&[(rule(&[exact(Field::TpDst, 80)]), 10)]);
    let (r, mask) = lookup(&c, &tcp4(1, 1, 2, 1000, 443));
    assert_eq!(r, None);
    assert_eq!(mask, Mask::EMPTY.with(Field::TpDst, 0xff00));

    // Same with the usual prerequisites in the rule: the ports alone decide.
    let c = classifier(&[(
        rule(&[
            exact(Field::EthType, 0x0800),
            exact(Field::IpProto, 6),
            exact(Field::TpDst, 80),
        ]),
        10,
    )]);
    let (r, mask) = lookup(&c, &tcp4(1, 1, 2, 1000, 443));
    assert_eq!(r, None);
    assert_eq!(mask, Mask::EMPTY.with(Field::TpDst, 0xff00));
    // ... but a UDP packet misses in the L3 stage (ip_proto).
    let mut udp = tcp4(1, 1, 2, 1000, 443);
    udp.set_ip_proto(17);
    let (_, mask) = lookup(&c, &udp);
    assert_eq!(
        mask,
        Mask::EMPTY
            .with_exact(Field::EthType)
            .with_exact(Field::IpProto)
    );
}

#[test]
fn port_trie_with_source_and_destination_prefixes() {
    // tp_src 1024/6 (0x0400/0xfc00), tp_dst exact 22
    let c = classifier(&[(
        rule(&[(Field::TpSrc, 0x0400, 0xfc00), exact(Field::TpDst, 22)]),
        10,
    )]);
    // tp_src 0x0401 is inside the /6 and dst 23 differs from 22 in its
    // last bit: every source bit of the mask and all 16 destination bits.
    let (r, mask) = lookup(&c, &tcp4(1, 1, 2, 0x0401, 23));
    assert_eq!(r, None);
    assert_eq!(
        mask,
        Mask::EMPTY
            .with(Field::TpSrc, 0xfc00)
            .with(Field::TpDst, 0xffff)
    );
    // tp_src 0x8000 differs at its first bit: one bit.
    let (_, mask) = lookup(&c, &tcp4(1, 1, 2, 0x8000, 22));
    assert_eq!(mask, Mask::EMPTY.with(Field::TpSrc, 0x8000));
}

#[test]
fn port_match_with_other_l4_difference_records_the_whole_mask() {
    // tp_dst 80 with SYN only: an ACK to port 80 has the rule's ports, so
    // the port trie cannot decide; the whole mask is recorded.
    let m = rule(&[exact(Field::TpDst, 80), (Field::TcpFlags, 0x002, 0x012)]);
    let c = classifier(&[(m, 10)]);
    let (r, mask) = lookup(&c, &tcp4(1, 1, 2, 1000, 80));
    assert_eq!(r, None);
    assert_eq!(mask, *m.mask());
}

#[test]
fn higher_priority_hit_hides_lower_subtables() {
    let c = classifier(&[
        (rule(&[exact(Field::InPort, 1)]), 100),
        (rule(&[exact(Field::TpDst, 80)]), 50),
        (rule(&[exact(Field::EthDst, 0x0200_0000_0001)]), 10),
    ]);
    let (r, mask) = lookup(&c, &tcp4(1, 1, 2, 1000, 80));
    assert_eq!(r, Some(RuleId(0)));
    assert_eq!(mask, Mask::EMPTY.with_exact(Field::InPort));
    let (r, mask) = lookup(&c, &tcp4(2, 1, 2, 1000, 80));
    assert_eq!(r, Some(RuleId(1)));
    assert_eq!(
        mask,
        Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::TpDst)
    );
}

#[test]
fn equal_priority_overlap_is_deterministic() {
    let a = rule(&[exact(Field::InPort, 1)]);
    let b = rule(&[exact(Field::TpDst, 80)]);
    let mut c = Classifier::new();
    c.insert(RuleId(0), &a, Priority(7));
    c.insert(RuleId(1), &b, Priority(7));
    let k = tcp4(1, 1, 2, 1000, 80);
    let (first, mask) = lookup(&c, &k);
    assert!(first.is_some());
    for port in [1u64, 2, 3] {
        for dport in [80u64, 81] {
            let q = tcp4(port, 9, 9, 9, dport);
            if (q.in_port() & mask.field(Field::InPort) as u64)
                == (1 & mask.field(Field::InPort) as u64)
                && (dport & mask.field(Field::TpDst) as u64)
                    == (80 & mask.field(Field::TpDst) as u64)
            {
                assert_eq!(lookup(&c, &q).0, first);
            }
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Packets near the ACL's rules.
fn acl_packet(r: &mut Rng, rules: &[(Match, u16)]) -> FlowKey {
    let (m, _) = rules[r.below(rules.len() as u64) as usize];
    let k = m.key();
    let mut src = k.ipv4_src() as u32;
    let mut dst = k.ipv4_dst() as u32;
    // random host bits, sometimes a random network bit too
    src ^= (r.next() as u32) & !(m.mask().field(Field::Ipv4Src) as u32);
    dst ^= (r.next() as u32) & !(m.mask().field(Field::Ipv4Dst) as u32);
    if r.below(3) == 0 {
        src ^= 1 << r.below(32);
    }
    let dmask = m.mask().field(Field::TpDst) as u64;
    let dport = if dmask != 0 && r.below(2) == 0 {
        k.tp_dst() | (r.next() & !dmask & 0xffff)
    } else {
        [22, 80, 443, 53, 8080, 33000][r.below(6) as usize]
    };
    let mut p = tcp4(1, src, dst, 1024 + r.below(60000), dport);
    p.set_ip_proto([6, 17][r.below(2) as usize]);
    p
}

fn bits(m: &Mask) -> u64 {
    m.words().iter().map(|w| w.count_ones() as u64).sum()
}

#[test]
fn random_acl_masks_versus_reference_and_ovs() {
    let mut r = Rng(0x5eed_1234_abcd_ef01);
    let rules = dense_acl(&mut WRng::new(r.next()), 1000);
    let c = classifier(&rules);
    let mut rf = ReferenceClassifier::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        rf.insert(RuleId(i as u32), m, Priority(*p));
    }
    let n = 2000;
    let fields = [
        Field::EthType,
        Field::IpProto,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::TpSrc,
        Field::TpDst,
    ];
    // per field: ours, Open vSwitch 3.1 policy, reference
    let mut per_field = [[0u64; 3]; 6];
    let mut total = [0u64; 3];
    let (mut hits, mut narrower, mut wider, mut subset_of_ovs) = (0u64, 0u64, 0u64, 0u64);
    for _ in 0..n {
        let k = acl_packet(&mut r, &rules);
        let (got, mask) = lookup(&c, &k);
        let mut owc = Wildcards::new();
        let ovs = c.lookup_ovs31(&k, &mut owc);
        let mut rwc = Wildcards::new();
        let want = rf.lookup(&k, &mut rwc);
        // priorities tie in this ACL: compare the winning priority
        let prio = |id: Option<RuleId>| id.map(|id| rules[id.0 as usize].1);
        assert_eq!(prio(got), prio(want));
        assert_eq!(got, ovs);
        assert!(mask.is_subset_of(rwc.mask()));
        let masks = [mask, *owc.mask(), *rwc.mask()];
        for (t, m) in total.iter_mut().zip(&masks) {
            *t += bits(m);
        }
        for (i, f) in fields.iter().enumerate() {
            for (j, m) in masks.iter().enumerate() {
                per_field[i][j] += m.field(*f).count_ones() as u64;
            }
        }
        hits += got.is_some() as u64;
        narrower += (bits(&mask) < bits(owc.mask())) as u64;
        wider += (bits(&mask) > bits(owc.mask())) as u64;
        subset_of_ovs += mask.is_subset_of(owc.mask()) as u64;
    }
    let avg = |x: u64| x as f64 / n as f64;
    eprintln!(
        "random ACL: {} rules, {} subtables, {hits}/{n} packets hit",
        rules.len(),
        c.subtable_count()
    );
    eprintln!(
        "average mask bits: classifier {:.1}, Open vSwitch 3.1 policy {:.1}, reference {:.1}",
        avg(total[0]),
        avg(total[1]),
        avg(total[2])
    );
    for (i, f) in fields.iter().enumerate() {
        let [a, b, c] = per_field[i];
        eprintln!("  {f}: {:.1} / {:.1} / {:.1}", avg(a), avg(b), avg(c));
    }
    eprintln!(
        "versus Open vSwitch policy: {narrower} narrower masks, {wider} wider, {subset_of_ovs}/{n} subsets"
    );
    assert!(total[0] <= total[1], "wider than Open vSwitch on average");
    assert!(wider * 20 <= n, "wider than Open vSwitch on many packets");
    assert!(
        total[0] * 4 < total[2] * 3,
        "not much narrower than the reference"
    );
}

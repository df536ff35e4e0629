//! Property tests of the `fte_match_param` encoding:
//! - canonical encodable matches survive encode → bytes → decode unchanged;
//! - for random packet keys and random masks, whatever encodes decodes to a
//!   match that agrees with the original on every packet key the parser can
//!   produce (the hardware rule matches exactly the megaflow's packets);
//! - arbitrary bytes never make the decoder panic, and what decodes and
//!   re-encodes is stable;
//! - the setter and getter round-trip any value at any field.
//!
//! Generators read a stream of random words ([`R`]), so shrinking drives a
//! failing case toward zeros = wildcards.

use megaflow::key::{FRAG_ANY, FRAG_LATER, VLAN_PRESENT};
use megaflow::{Field, FlowKey, Mask, Match, PortNo};
use offload::prm::{
    decode, encode, get, set, Encoded, PortTable, SourcePortMode, ENCODED_LEN, FIELDS,
    MATCH_PARAM_LEN,
};
use offload::Vport;
use proptest::prelude::*;

/// Ports 1..=8 and their vports.
const VPORTS: [u16; 8] = [0, 1, 2, 3, 4, 0xfffe, 0xffff, 100];

fn ports() -> PortTable {
    let mut t = PortTable::new();
    for (i, &v) in VPORTS.iter().enumerate() {
        t.insert(PortNo(i as u32 + 1), Vport(v));
    }
    t
}

/// A reader of random words.
struct R<'a>(&'a [u64], usize);

impl R<'_> {
    fn next(&mut self) -> u64 {
        let v = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        v
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
}

/// Builds a key and a mask field by field.
#[derive(Default)]
struct B {
    k: FlowKey,
    m: Mask,
}

impl B {
    fn put(&mut self, f: Field, v: u128, m: u128) {
        let max = f.layout().max_value();
        self.k.set_field(f, v & max);
        self.m.set_field(f, m & max);
    }
    /// Wildcard, exact or random bits (choice 0, 1, 2).
    fn some(&mut self, r: &mut R, f: Field, v: u128) {
        match r.below(3) {
            0 => {}
            1 => self.put(f, v, u128::MAX),
            _ => {
                let bits = r.u128();
                self.put(f, v, bits)
            }
        }
    }
    fn done(&self) -> Match {
        Match::new(&self.k, &self.m)
    }
}

fn mode(r: &mut R) -> SourcePortMode {
    if r.below(2) == 0 {
        SourcePortMode::MiscSourcePort
    } else {
        SourcePortMode::REG_C0_UPPER_16
    }
}

/// One VLAN tag in canonical form: none, untagged, or tagged with its TPID.
fn canonical_vlan(r: &mut R, b: &mut B, tpid: Field, tci: Field) {
    let present = u128::from(VLAN_PRESENT);
    match r.below(3) {
        0 => {}
        1 => {
            b.put(tpid, 0, u128::MAX);
            b.put(tci, 0, present | (r.next() as u128 & 0xefff));
        }
        _ => {
            b.put(tpid, u128::from(r.pick(&[0x8100u16, 0x88a8])), u128::MAX);
            b.put(
                tci,
                present | r.next() as u128,
                present | (r.next() as u128 & 0xefff),
            );
        }
    }
}

/// A match in the canonical encodable form (what decoding gives back).
fn canonical(r: &mut R) -> Match {
    let mut b = B::default();
    if r.below(2) == 1 {
        b.put(Field::InPort, 1 + r.below(8) as u128, u128::MAX);
    }
    let (src, dst) = (r.next() as u128, r.next() as u128);
    b.some(r, Field::EthSrc, src);
    b.some(r, Field::EthDst, dst);
    canonical_vlan(r, &mut b, Field::VlanTpid, Field::VlanTci);
    canonical_vlan(r, &mut b, Field::Vlan2Tpid, Field::Vlan2Tci);
    let l3 = r.below(4);
    match l3 {
        0 => return b.done(),
        1 => {
            let other = r.pick(&[0x0806u16, 0x88cc, 0x8847, 0x0600, 0xffff]);
            b.put(Field::EthType, u128::from(other), u128::MAX);
            return b.done();
        }
        2 => b.put(Field::EthType, 0x0800, u128::MAX),
        _ => b.put(Field::EthType, 0x86dd, u128::MAX),
    }
    let v6 = l3 == 3;
    for f in [Field::IpDscp, Field::IpEcn, Field::IpTtl] {
        let v = r.next() as u128;
        b.some(r, f, v);
    }
    if r.below(2) == 1 {
        b.put(Field::IpFrag, u128::from(r.below(2)), u128::from(FRAG_ANY));
    }
    let proto = match r.below(4) {
        0 => None,
        1 if !v6 => {
            let (v, m) = (r.next() as u128, r.next() as u128 & 0xff);
            b.put(Field::IpProto, v, m);
            (m == 0xff).then_some(v as u8)
        }
        _ => {
            let p = r.pick(&[6u8, 17, 58, 132, 1, 89]);
            b.put(Field::IpProto, u128::from(p), u128::MAX);
            Some(p)
        }
    };
    let (sa, da) = if v6 {
        (Field::Ipv6Src, Field::Ipv6Dst)
    } else {
        (Field::Ipv4Src, Field::Ipv4Dst)
    };
    let (s, d) = (r.u128(), r.u128());
    b.some(r, sa, s);
    b.some(r, da, d);
    if v6 {
        let l = r.next() as u128;
        b.some(r, Field::Ipv6Label, l);
    }
    if matches!(proto, Some(6 | 17)) {
        let (s, d) = (r.next() as u128, r.next() as u128);
        b.some(r, Field::TpSrc, s);
        b.some(r, Field::TpDst, d);
    }
    if proto == Some(6) && r.below(2) == 1 {
        b.put(Field::TcpFlags, r.next() as u128, r.next() as u128 & 0x1ff);
    }
    b.done()
}

/// A key the parser could produce for some packet.
fn packet_key(r: &mut R) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1 + r.below(9));
    k.set_eth_src(r.pick(&[0x0200_0000_0001, 0x0200_0000_0002, 0xffff_ffff_ffff]));
    k.set_eth_dst(r.pick(&[0x0200_0000_0001, 0x5254_0012_3456, 0x0100_5e00_0001]));
    let tags = r.below(3);
    let present = u64::from(VLAN_PRESENT);
    if tags >= 1 {
        k.set_vlan_tpid(r.pick(&[0x8100, 0x88a8]));
        k.set_vlan_tci(present | r.pick(&[0x0005, 0xa00a, 0x0000, 0x0fff]));
    }
    if tags == 2 {
        k.set_vlan2_tpid(r.pick(&[0x8100, 0x88a8]));
        k.set_vlan2_tci(present | r.pick(&[0x0014, 0x6005]));
    }
    let ty = r.pick(&[0x0800u16, 0x0800, 0x86dd, 0x86dd, 0x0806, 0x88cc, 0x05ff]);
    k.set_eth_type(u64::from(ty));
    match ty {
        0x0800 | 0x86dd => {
            let v6 = ty == 0x86dd;
            let proto = r.pick(&[6u8, 17, 132, if v6 { 58 } else { 1 }, 89]);
            k.set_ip_proto(u64::from(proto));
            k.set_ip_dscp(r.pick(&[0, 46, 63]));
            k.set_ip_ecn(r.below(4));
            k.set_ip_ttl(r.pick(&[64, 255, 1]));
            let frag = r.pick(&[0, 0, FRAG_ANY, FRAG_ANY | FRAG_LATER]);
            k.set_ip_frag(u64::from(frag));
            if v6 {
                k.set_ipv6_src(r.pick(&[0x2001_0db8 << 96, (0x2001_0db8 << 96) | 1, 1]));
                k.set_ipv6_dst(r.pick(&[0xfe80 << 112, (0x2001_0db8_0001_0002u128 << 64) | 5]));
                k.set_ipv6_label(r.pick(&[0, 0x12345]));
            } else {
                k.set_ipv4_src(r.pick(&[0x0a00_0001, 0x0a00_0002, 0xc0a8_0001]));
                k.set_ipv4_dst(r.pick(&[0x0a00_0001, 0x0a00_0002, 0x0808_0808]));
            }
            if frag & FRAG_LATER == 0 {
                match proto {
                    6 | 17 | 132 => {
                        k.set_tp_src(r.pick(&[80, 443, 12345]));
                        k.set_tp_dst(r.pick(&[80, 53, 4789]));
                        if proto == 6 {
                            k.set_tcp_flags(r.pick(&[0x002, 0x012, 0x010, 0x111]));
                        }
                    }
                    1 | 58 => {
                        k.set_tp_src(r.pick(&[8, 0, 135]));
                        k.set_tp_dst(0);
                    }
                    _ => {}
                }
            }
        }
        0x0806 => {
            k.set_ip_proto(r.pick(&[1, 2]));
            k.set_ipv4_src(r.pick(&[0x0a00_0001, 0x0a00_0002]));
            k.set_ipv4_dst(r.pick(&[0x0a00_0001, 0x0a00_0002]));
            k.set_arp_sha(r.pick(&[0x0200_0000_0001, 0]));
            k.set_arp_tha(r.pick(&[0x0200_0000_0002, 0]));
        }
        _ => {}
    }
    k
}

/// Field groups that stay consistent when copied from one packet key into
/// another.
const GROUPS: [&[Field]; 4] = [
    &[Field::InPort],
    &[Field::EthSrc, Field::EthDst],
    &[
        Field::VlanTpid,
        Field::VlanTci,
        Field::Vlan2Tpid,
        Field::Vlan2Tci,
    ],
    &[
        Field::EthType,
        Field::IpProto,
        Field::IpDscp,
        Field::IpEcn,
        Field::IpTtl,
        Field::IpFrag,
        Field::Ipv6Label,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::TpSrc,
        Field::TpDst,
        Field::TcpFlags,
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::NdTarget,
        Field::ArpSha,
        Field::ArpTha,
    ],
];

/// A random mask for `pkt`, biased toward encodable shapes: the fields of
/// the packet's own layers, prerequisites usually present, unsupported
/// fields and odd masks rare.
fn random_mask(r: &mut R, pkt: &FlowKey) -> Mask {
    let mut m = Mask::EMPTY;
    // odds: 1 in `odds` exact, 1 in `odds` random bits, else wildcard; a
    // field marked `rare` is considered only 1 time in 16.
    let mut pick = |r: &mut R, f: Field, odds: u64, rare: bool| {
        if rare && r.below(16) != 0 {
            return;
        }
        let bits = match r.below(odds) {
            0 => f.layout().max_value(),
            1 if r.below(4) == 0
                || !matches!(
                    f,
                    Field::InPort | Field::VlanTpid | Field::Vlan2Tpid | Field::EthType
                ) =>
            {
                r.u128()
            }
            _ => 0,
        };
        m.set_field(f, bits);
    };
    let ty = pkt.eth_type();
    let ip = ty == 0x0800 || ty == 0x86dd;
    let v6 = ty == 0x86dd;
    for f in [
        Field::InPort,
        Field::EthSrc,
        Field::EthDst,
        Field::VlanTpid,
        Field::VlanTci,
        Field::Vlan2Tpid,
        Field::Vlan2Tci,
        Field::EthType,
    ] {
        pick(r, f, 3, false);
    }
    for f in [
        Field::IpProto,
        Field::IpDscp,
        Field::IpEcn,
        Field::IpTtl,
        Field::IpFrag,
        Field::TpSrc,
        Field::TpDst,
        Field::TcpFlags,
    ] {
        pick(r, f, 4, !ip);
    }
    for f in [Field::Ipv4Src, Field::Ipv4Dst] {
        pick(r, f, 3, v6 || !ip);
    }
    for f in [Field::Ipv6Src, Field::Ipv6Dst, Field::Ipv6Label] {
        pick(r, f, 3, !v6);
    }
    for f in [
        Field::PktMark,
        Field::Reg3,
        Field::TunId,
        Field::NdTarget,
        Field::ArpSha,
        Field::ArpTha,
    ] {
        pick(r, f, 4, true);
    }
    // Prerequisites, most of the time.
    let any = |m: &Mask, fs: &[Field]| fs.iter().any(|&f| !m.is_wildcard(f));
    if r.below(8) != 0 && any(&m, &GROUPS[3][1..]) {
        m.set_exact(Field::EthType);
    }
    if r.below(8) != 0 && any(&m, &[Field::TpSrc, Field::TpDst, Field::TcpFlags]) {
        m.set_exact(Field::IpProto);
    }
    for (tpid, tci) in [
        (Field::VlanTpid, Field::VlanTci),
        (Field::Vlan2Tpid, Field::Vlan2Tci),
    ] {
        if r.below(8) != 0 && !m.is_wildcard(tci) {
            m.set_exact(tpid);
        }
    }
    if r.below(4) != 0 {
        m.set_field(Field::TcpFlags, m.field(Field::TcpFlags) & 0x1ff);
    }
    if !m.is_wildcard(Field::IpFrag) {
        let any = u128::from(FRAG_ANY);
        let frag = r.pick(&[any, any, any | u128::from(FRAG_LATER), 0xff, 2]);
        m.set_field(Field::IpFrag, frag);
    }
    m
}

/// Packet keys next to `base`: each field group copied whole from `other`,
/// each VLAN tag (TPID and TCI together) and each L3/L4 field but eth_type
/// copied alone, and `base` under every fragment state and first-tag kind.
fn neighbours(base: &FlowKey, other: &FlowKey) -> Vec<FlowKey> {
    let with = |fs: &[Field]| {
        let mut k = *base;
        for &f in fs {
            k.set_field(f, other.field(f));
        }
        k
    };
    let mut out: Vec<FlowKey> = GROUPS.iter().map(|g| with(g)).collect();
    out.push(with(&GROUPS[2][..2]));
    out.push(with(&GROUPS[2][2..]));
    out.extend(GROUPS[3][1..].iter().map(|&f| with(&[f])));
    for frag in [0, FRAG_ANY, FRAG_ANY | FRAG_LATER] {
        let mut k = *base;
        k.set_ip_frag(u64::from(frag));
        out.push(k);
    }
    let present = u64::from(VLAN_PRESENT);
    for tpid in [0, 0x8100, 0x88a8] {
        let mut k = *base;
        k.set_vlan_tpid(tpid);
        let tci = if tpid == 0 {
            0
        } else {
            base.vlan_tci() | present
        };
        k.set_vlan_tci(tci);
        out.push(k);
    }
    out
}

fn words() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 96)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Canonical matches: encode, pass the bytes through `from_bytes` (short
    /// and full-size), decode: the same match.
    #[test]
    fn canonical_matches_round_trip(w in words()) {
        let mut r = R(&w, 0);
        let mode = mode(&mut r);
        let m = canonical(&mut r);
        let p = ports();
        let e = match encode(&m, mode, &p) {
            Ok(e) => e,
            Err(err) => return Err(TestCaseError::fail(format!("{m:?}: {err}"))),
        };
        let back = Encoded::from_bytes(e.criteria(), e.mask(), e.value()).unwrap();
        prop_assert_eq!(&back, &e);
        let mut fm = e.mask().to_vec();
        fm.resize(MATCH_PARAM_LEN, 0);
        let mut fv = e.value().to_vec();
        fv.resize(MATCH_PARAM_LEN, 0);
        prop_assert_eq!(&Encoded::from_bytes(e.criteria(), &fm, &fv).unwrap(), &e);
        prop_assert_eq!(decode(&back, mode, &p), Ok(m), "{:?}", e);
    }

    /// Random packets and masks: whatever encodes decodes to a match that
    /// agrees with the megaflow on packet keys, and re-encodes to the same
    /// bytes.
    #[test]
    fn encodable_matches_keep_their_packets(w in words()) {
        let mut r = R(&w, 0);
        let mode = mode(&mut r);
        let pkt = packet_key(&mut r);
        let m = Match::new(&pkt, &random_mask(&mut r, &pkt));
        let p = ports();
        let Ok(e) = encode(&m, mode, &p) else { return Ok(()) };
        let d = decode(&e, mode, &p).map_err(|err| TestCaseError::fail(format!("{e:?}: {err}")))?;
        prop_assert_eq!(encode(&d, mode, &p), Ok(e.clone()));
        prop_assert!(d.matches(&pkt), "{:?} lost its own packet {:?}", d, pkt);
        for _ in 0..4 {
            let other = packet_key(&mut r);
            for k in neighbours(&pkt, &other) {
                prop_assert_eq!(d.matches(&k), m.matches(&k), "{:?} vs {:?} on {:?}", d, m, k);
            }
        }
    }

    /// Arbitrary bytes: no panic; a decoded match that encodes decodes to
    /// itself.
    #[test]
    fn arbitrary_bytes_decode_safely(criteria in any::<u8>(), sparse in prop::collection::vec((0..ENCODED_LEN, any::<u8>(), any::<u8>()), 0..12)) {
        let mut mb = [0u8; ENCODED_LEN];
        let mut vb = [0u8; ENCODED_LEN];
        for (i, m, v) in sparse {
            mb[i] = m;
            vb[i] = v & m;
        }
        let p = ports();
        for mode in [SourcePortMode::MiscSourcePort, SourcePortMode::REG_C0_UPPER_16] {
            let Ok(e) = Encoded::from_bytes(criteria, &mb, &vb) else { continue };
            let Ok(m) = decode(&e, mode, &p) else { continue };
            if let Ok(e2) = encode(&m, mode, &p) {
                prop_assert_eq!(decode(&e2, mode, &p), Ok(m));
            }
        }
    }

    /// The setter and getter agree at every field and leave other bits.
    #[test]
    fn setter_getter_round_trip(i in 0..FIELDS.len(), v in any::<u128>(), fill in any::<u8>()) {
        let d = &FIELDS[i];
        let v = v & d.max_value();
        let mut b = [fill; ENCODED_LEN];
        let before = b;
        set(&mut b, d.field, v).unwrap();
        prop_assert_eq!(get(&b, d.field), Ok(v));
        set(&mut b, d.field, get(&before, d.field).unwrap()).unwrap();
        prop_assert_eq!(b, before);
    }
}

/// The fraction of random masks that encode is not trivially small (so the
/// property above tests something).
#[test]
fn random_masks_often_encode() {
    let p = ports();
    let mut ok = 0;
    let mut hist = std::collections::HashMap::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let n = 2000;
    for _ in 0..n {
        let w: Vec<u64> = (0..96)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            })
            .collect();
        let mut r = R(&w, 0);
        let mode = mode(&mut r);
        let pkt = packet_key(&mut r);
        let m = Match::new(&pkt, &random_mask(&mut r, &pkt));
        match encode(&m, mode, &p) {
            Ok(_) => ok += 1,
            Err(e) => *hist.entry(e.to_string()).or_insert(0) += 1,
        }
    }
    let mut h: Vec<_> = hist.into_iter().collect();
    h.sort_by_key(|x| std::cmp::Reverse(x.1));
    h.truncate(8);
    assert!(
        ok * 5 > n,
        "only {ok} of {n} random masks encode; top refusals: {h:#?}"
    );
}

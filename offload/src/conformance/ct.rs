//! Conformance case: the conntrack chain ([`crate::ct`]) with the very
//! match and modify-header bytes the offload manager builds: a first
//! stage writes the chain's registers and jumps to the CT table, a CT
//! entry rewrites the packet as software's NAT does and writes the
//! state, mark and tag bits, a later stage matches those registers; each
//! kind of miss reaches software with the tag that says where it stopped.

use conntrack::state::{EST, SNAT, TRK};
use conntrack::{Addr, CtMeta, CtSpec, NatSpec, Tuple};
use megaflow::offload::CtRule;
use megaflow::{Field, FlowKey, Mask, Match};

use super::restore::{restore_path_or_skip, to_manager};
use super::*;
use crate::ct::{LEVEL_CT, LEVEL_POST_CT, TAG_HIT, TAG_TRANSLATED};
use crate::manager::chain::{chain_regs, ct_entry_match, ct_entry_ops};
use crate::prm::{encode, Encoded, PortTable, SourcePortMode};

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const GW: [u8; 4] = [10, 9, 0, 1];
const ZONE: u16 = 7;
const RECIRC: u32 = 0x123;
/// The first stage's tag (a multiple of four, as the manager allocates).
const TAG: u32 = 0x0f_0040;

fn tuple(sport: u16) -> Tuple {
    Tuple {
        src: Addr::v4(A),
        dst: Addr::v4(B),
        sport,
        dport: 80,
        proto: 6,
        v6: false,
    }
}

/// A segment from A's `sport` to B:80 with `flags`, to flow 1's MAC.
fn segment(sport: u16, flags: u16) -> Vec<u8> {
    FrameSpec::ipv4(
        u32::from_be_bytes(A),
        u32::from_be_bytes(B),
        L4::Tcp {
            sport,
            dport: 80,
            flags,
        },
    )
    .macs(SRC_MAC, mac(1))
    .payload(40)
    .build()
}

/// The entry of A's `sport` to B:80 (translated to the gateway when
/// `snat`) with `mark`.
fn entry(sport: u16, snat: bool, mark: u32) -> CtRule {
    let t = tuple(sport);
    CtRule {
        zone: ZONE,
        nat: true,
        tuple: t,
        rewrite: snat.then_some(Tuple {
            src: Addr::v4(GW),
            ..t
        }),
        meta: CtMeta {
            state: TRK | EST | if snat { SNAT } else { 0 },
            zone: ZONE,
            mark,
            label: 0,
            orig: t,
        },
    }
}

/// What software's NAT makes of `frame`: its source rewritten to `to`.
fn translated(frame: &[u8], to: &Tuple) -> Vec<u8> {
    let mut f = frame.to_vec();
    let p = conntrack::packet::parse(&f, 14, 0x0800).expect("a TCP segment parses");
    conntrack::packet::rewrite(&mut f, &p, to);
    f
}

/// A first stage ending in `ct(zone=7,nat),recirc(0x123)`, two CT
/// entries translated by the gateway and one not, and a later stage that
/// takes `+trk+est` packets of zone 7 with mark 5 to VF 2:
/// - an entry's segment goes through all three, rewritten exactly as
///   software's NAT rewrites it (checksums included);
/// - a FIN, and a segment of no entry, miss the CT table: software gets
///   them untouched with the first stage's tag;
/// - an entry's segment the later stage has no rule for (mark 6) reaches
///   software with the tag's HIT bit, and its TRANSLATED bit and the
///   rewrite when the entry translated it.
pub fn ct_chain_nat_and_restores<D: Device>(dev: &D) {
    restore_path_or_skip(dev);
    let p = pipe(dev);
    let ct = table(dev, p.d, LEVEL_CT);
    let post = table(dev, p.d, LEVEL_POST_CT);
    let to_ct = action(dev, p.d, ActionSpec::DestTable(ct));
    let to_post = action(dev, p.d, ActionSpec::DestTable(post));
    for tag in [TAG, TAG | TAG_HIT, TAG | TAG_HIT | TAG_TRANSLATED] {
        ok(dev.restore_rule_create(tag), "restore_rule_create");
    }
    let spec = CtSpec {
        zone: ZONE,
        nat: Some(NatSpec { range: None }),
        ..CtSpec::default()
    };
    let stage1 = modify(dev, p.d, &chain_regs(TAG, &spec, RECIRC));
    let m1 = matcher(dev, p.t1, 0, &dmac_mask());
    rule(dev, m1, &dmac_value(mac(1)), &[stage1, to_ct]);

    let (snat, plain, other) = (
        entry(40000, true, 5),
        entry(40002, false, 6),
        entry(40003, true, 6),
    );
    let mode = SourcePortMode::MiscSourcePort;
    let ports = PortTable::default();
    let mut e = Encoded::EMPTY;
    ct_entry_match(&snat, mode, &ports, &mut e).expect("the CT entry's match encodes");
    let mct = ok(
        dev.matcher_create(ct, 0, e.criteria(), e.mask()),
        "matcher_create in the CT table",
    );
    for r in [&snat, &plain, &other] {
        ct_entry_match(r, mode, &ports, &mut e).expect("the CT entry's match encodes");
        let m = modify(dev, p.d, &ct_entry_ops(r).expect("the CT entry's rewrite"));
        ok(
            dev.rule_create(mct, e.value(), &[m, to_post]),
            "rule_create in the CT table",
        );
    }

    // The later stage: recirc_id, ct_state +trk+est, ct_zone, ct_mark 5.
    let mut k = FlowKey::ZERO;
    k.set_field(Field::EthType, 0x0800);
    k.set_field(Field::RecircId, u128::from(RECIRC));
    k.set_field(Field::CtState, u128::from(TRK | EST));
    k.set_field(Field::CtZone, u128::from(ZONE));
    k.set_field(Field::CtMark, 5);
    let mut mask = Mask::exact_fields(&[
        Field::EthType,
        Field::RecircId,
        Field::CtZone,
        Field::CtMark,
    ]);
    mask.set_field(Field::CtState, u128::from(TRK | EST));
    let later = encode(&Match::new(&k, &mask), mode, &ports).expect("a later stage encodes");
    let mpost = ok(
        dev.matcher_create(post, 0, later.criteria(), later.mask()),
        "matcher_create in the post-ct table",
    );
    let out = to_vport(dev, p.d, dev.vf(2));
    ok(
        dev.rule_create(mpost, later.value(), &[out]),
        "rule_create in the post-ct table",
    );

    const ACK: u16 = 0x10;
    const FIN: u16 = 0x01;
    let seg = segment(40000, ACK);
    let through = one(dev, p.d, dev.ingress(), &seg);
    assert_eq!(
        through.egress,
        Egress::Vport(dev.vf(2)),
        "through the chain"
    );
    let to = snat.rewrite.expect("translated");
    assert_eq!(
        through.bytes,
        translated(&seg, &to),
        "rewritten as software's NAT"
    );

    for (what, f) in [
        ("a FIN", segment(40000, FIN | ACK)),
        ("a segment of no entry", segment(40001, ACK)),
    ] {
        let up = to_manager(dev, &dev.send(p.d, 0, dev.ingress(), &f));
        assert_eq!(up.tag, TAG, "{what}: the first stage's tag");
        assert_eq!(up.bytes, f, "{what}: untouched");
    }
    let f = segment(40002, ACK);
    let up = to_manager(dev, &dev.send(p.d, 0, dev.ingress(), &f));
    assert_eq!(up.tag, TAG | TAG_HIT, "a later-stage miss, untranslated");
    assert_eq!(up.bytes, f);
    let f = segment(40003, ACK);
    let up = to_manager(dev, &dev.send(p.d, 0, dev.ingress(), &f));
    assert_eq!(
        up.tag,
        TAG | TAG_HIT | TAG_TRANSLATED,
        "a later-stage miss, translated"
    );
    assert_eq!(
        up.bytes,
        translated(&f, &other.rewrite.expect("translated")),
        "translated by its entry"
    );
}

//! The wide views of the registers: `xreg<n>` (OpenFlow 1.5's
//! `OXM_OF_PKT_REG<n>`, 64 bits: `reg<2n>` the high half) and
//! `xxreg<n>` (`NXM_NX_XXREG<n>`, 128 bits: `reg<4n>` the highest
//! quarter). The switch keeps sixteen 32-bit registers; a wide field on
//! the wire is read as the registers it spans ([`narrow_match`],
//! [`narrow_action`]) and a match is written with `xreg`s where 1.5 wants
//! them ([`xregs_for_v15`]), as Open vSwitch writes its matches.

use crate::action::{Action, FieldCopy};
use crate::oxm::{field_spec, Oxm, OxmMatch, CLASS_NXM1};

/// `OFPXMC_PACKET_REGS`: the class of `OXM_OF_PKT_REG<n>`.
pub const CLASS_PKT_REGS: u16 = 0x8001;
/// `NXM_NX_XXREG0`'s field number (1..3 follow).
pub const NX_XXREG0: u8 = 111;
/// Registers of 32 bits.
pub const N_REGS: u8 = 16;

/// The first register a wide field covers and how many (`None`: not a
/// wide register).
pub fn wide(class: u16, field: u8) -> Option<(u8, u8)> {
    match (class, field) {
        (CLASS_PKT_REGS, n @ 0..=7) => Some((2 * n, 2)),
        (CLASS_NXM1, n @ NX_XXREG0..=114) => Some((4 * (n - NX_XXREG0), 4)),
        _ => None,
    }
}

fn be(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b))
}

fn reg_oxm(reg: u8, value: u32, mask: u32) -> Oxm {
    Oxm {
        class: CLASS_NXM1,
        field: reg,
        value: (value & mask).to_be_bytes().to_vec(),
        mask: (mask != u32::MAX).then(|| mask.to_be_bytes().to_vec()),
    }
}

/// The registers a wide OXM sets or matches, as `NXM_NX_REG<n>` OXMs
/// (the quarters its mask leaves out are left out); `None` for another
/// field.
pub fn split_oxm(o: &Oxm) -> Option<Vec<Oxm>> {
    let (first, count) = wide(o.class, o.field)?;
    let bits = 32 * u32::from(count);
    let full = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let v = be(&o.value);
    let m = o.mask.as_deref().map_or(full, be);
    Some(
        (0..count)
            .filter_map(|i| {
                let shift = 32 * u32::from(count - 1 - i);
                let mask = (m >> shift) as u32;
                (mask != 0).then(|| reg_oxm(first + i, (v >> shift) as u32, mask))
            })
            .collect(),
    )
}

/// A match's wide fields as the registers they span; a register named
/// twice (as itself and in a wide field, or in two) is the field it is:
/// `Err` with its number.
pub fn narrow_match(m: &mut OxmMatch) -> Result<(), u8> {
    if !m.fields.iter().any(|o| wide(o.class, o.field).is_some()) {
        return Ok(());
    }
    let mut out: Vec<Oxm> = Vec::with_capacity(m.fields.len() + 2);
    for o in m.fields.drain(..) {
        match split_oxm(&o) {
            Some(regs) => out.extend(regs),
            None => out.push(o),
        }
    }
    let mut seen = 0u32;
    for o in out
        .iter()
        .filter(|o| o.class == CLASS_NXM1 && o.field < N_REGS)
    {
        if seen & (1 << o.field) != 0 {
            return Err(o.field);
        }
        seen |= 1 << o.field;
    }
    m.fields = out;
    Ok(())
}

/// A match's registers as OpenFlow 1.5 writes them: each pair
/// `reg<2n>`/`reg<2n+1>` with a bit set as one `OXM_OF_PKT_REG<n>`, in
/// the place of the first of the two.
pub fn xregs_for_v15(m: &OxmMatch) -> OxmMatch {
    let reg = |o: &Oxm| (o.class == CLASS_NXM1 && o.field < N_REGS).then_some(o.field);
    let part = |n: u8| {
        m.fields.iter().find(|o| reg(o) == Some(n)).map(|o| {
            let v = be(&o.value) as u64;
            let mk = o
                .mask
                .as_deref()
                .map_or(u64::from(u32::MAX), |b| be(b) as u64);
            (v, mk)
        })
    };
    let mut fields = Vec::with_capacity(m.fields.len());
    let mut done = [false; 8];
    for o in &m.fields {
        let Some(r) = reg(o) else {
            fields.push(o.clone());
            continue;
        };
        let x = r / 2;
        if std::mem::replace(&mut done[usize::from(x)], true) {
            continue;
        }
        let (hv, hm) = part(2 * x).unwrap_or((0, 0));
        let (lv, lm) = part(2 * x + 1).unwrap_or((0, 0));
        let (v, mk) = ((hv << 32) | lv, (hm << 32) | lm);
        fields.push(Oxm {
            class: CLASS_PKT_REGS,
            field: x,
            value: v.to_be_bytes().to_vec(),
            mask: (mk != u64::MAX).then(|| mk.to_be_bytes().to_vec()),
        });
    }
    OxmMatch { fields }
}

/// An `NXAST_REG_LOAD` of `value` into bits `ofs..ofs + n_bits` as the
/// (value, mask) it writes in the field's bits (the value cut to
/// `n_bits`, at most 64).
pub fn load_bits(ofs: u16, n_bits: u16, value: u64) -> (u128, u128) {
    let n = if n_bits >= 64 {
        u128::from(u64::MAX)
    } else {
        (1u128 << n_bits) - 1
    };
    ((u128::from(value) & n) << ofs, n << ofs)
}

/// The NXM header of `NXM_NX_REG<n>`.
fn reg_header(n: u8) -> u32 {
    (u32::from(CLASS_NXM1) << 16) | (u32::from(n) << 9) | 4
}

/// One piece of a field in the bits of an action: the header of the
/// part and where its bit 0 lies in the whole.
#[derive(Clone, Copy)]
struct Part {
    header: u32,
    /// The whole field's bit that is the part's bit 0.
    base: u32,
    bits: u32,
}

/// The parts of the field a header names, least significant first: the
/// registers of a wide one, else the field itself.
fn parts(h: u32) -> Vec<Part> {
    let (class, field) = ((h >> 16) as u16, ((h >> 9) & 0x7f) as u8);
    match wide(class, field) {
        Some((first, count)) => (0..count)
            .map(|i| Part {
                header: reg_header(first + count - 1 - i),
                base: 32 * u32::from(i),
                bits: 32,
            })
            .collect(),
        None => {
            let bits = field_spec(class, field).map_or(u32::MAX, |(w, _)| 8 * w as u32);
            vec![Part {
                header: h,
                base: 0,
                bits,
            }]
        }
    }
}

/// The part of `p` bit `bit` of the whole field is in.
fn part_at(p: &[Part], bit: u32) -> Option<Part> {
    p.iter()
        .copied()
        .find(|q| bit >= q.base && bit - q.base < q.bits)
}

fn is_wide_header(h: u32) -> bool {
    wide((h >> 16) as u16, ((h >> 9) & 0x7f) as u8).is_some()
}

/// A move of `n_bits` from `src` bit `src_ofs` to `dst` bit `dst_ofs`
/// as moves between the parts (registers) the wide fields span; `None`
/// when a range runs past its field (the caller's check refuses it).
fn split_move(c: &FieldCopy) -> Option<Vec<Action>> {
    let (n_bits, src_ofs, dst_ofs) = (c.n_bits, c.src_ofs, c.dst_ofs);
    let (sp, dp) = (parts(c.src), parts(c.dst));
    let mut out = Vec::new();
    let mut i = 0u32;
    while i < u32::from(n_bits) {
        let (s, d) = (u32::from(src_ofs) + i, u32::from(dst_ofs) + i);
        let (a, b) = (part_at(&sp, s)?, part_at(&dp, d)?);
        let len = (u32::from(n_bits) - i)
            .min(a.base + a.bits - s)
            .min(b.base + b.bits - d);
        out.push(Action::NxRegMove(FieldCopy {
            n_bits: len as u16,
            src_ofs: (s - a.base) as u16,
            dst_ofs: (d - b.base) as u16,
            src: a.header,
            dst: b.header,
        }));
        i += len;
    }
    Some(out)
}

/// An action naming a wide register as the actions on the registers it
/// spans (`None`: it names none, or a range past its field, which the
/// caller refuses as it is).
///
/// A stack push of a wide field pushes its registers lowest first and a
/// pop pops them highest first, so a wide value pushed and popped into
/// a field of the same width lands as it was.
pub fn narrow_action(a: &Action) -> Option<Vec<Action>> {
    match a {
        Action::SetField(o) | Action::NxRegLoad2(o) => {
            Some(split_oxm(o)?.into_iter().map(Action::NxRegLoad2).collect())
        }
        Action::NxRegLoad {
            ofs,
            n_bits,
            dst,
            value,
        } if is_wide_header(*dst) => {
            let p = parts(*dst);
            let end = u32::from(*ofs) + u32::from(*n_bits);
            if *n_bits == 0 || *n_bits > 64 || end > p.iter().map(|q| q.bits).sum() {
                return None;
            }
            let (v, m) = load_bits(*ofs, *n_bits, *value);
            Some(
                p.iter()
                    .filter_map(|q| {
                        let mask = (m >> q.base) as u32;
                        (mask != 0).then(|| {
                            Action::NxRegLoad2(reg_oxm(
                                ((q.header >> 9) & 0x7f) as u8,
                                (v >> q.base) as u32,
                                mask,
                            ))
                        })
                    })
                    .collect(),
            )
        }
        Action::NxRegMove(c) | Action::CopyField(c)
            if is_wide_header(c.src) || is_wide_header(c.dst) =>
        {
            split_move(c)
        }
        Action::NxCheckPktLarger {
            pkt_len,
            ofs,
            field,
        } if is_wide_header(*field) => {
            let bit = u32::from(*ofs);
            let q = parts(*field)
                .into_iter()
                .find(|q| (q.base..q.base + q.bits).contains(&bit))?;
            Some(vec![Action::NxCheckPktLarger {
                pkt_len: *pkt_len,
                ofs: (bit - q.base) as u16,
                field: q.header,
            }])
        }
        Action::NxStack {
            pop,
            ofs,
            n_bits,
            field,
        } if is_wide_header(*field) => {
            let p = parts(*field);
            let (lo, hi) = (u32::from(*ofs), u32::from(*ofs) + u32::from(*n_bits));
            let mut v: Vec<Action> = p
                .iter()
                .filter_map(|q| {
                    let (a, b) = (lo.max(q.base), hi.min(q.base + q.bits));
                    (a < b).then(|| Action::NxStack {
                        pop: *pop,
                        ofs: (a - q.base) as u16,
                        n_bits: (b - a) as u16,
                        field: q.header,
                    })
                })
                .collect();
            if *pop {
                v.reverse();
            }
            Some(v)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg_of(o: &Oxm) -> (u8, u32, Option<u32>) {
        let v = u32::from_be_bytes(o.value[..4].try_into().unwrap());
        let m = o
            .mask
            .as_ref()
            .map(|m| u32::from_be_bytes(m[..4].try_into().unwrap()));
        (o.field, v, m)
    }

    #[test]
    fn an_xreg_match_is_its_two_registers_and_goes_back_for_1_5() {
        let x = Oxm {
            class: CLASS_PKT_REGS,
            field: 2,
            value: 0x0000_0005_0000_0007u64.to_be_bytes().to_vec(),
            mask: Some(0x0000_00ff_ffff_ffffu64.to_be_bytes().to_vec()),
        };
        let mut m = OxmMatch {
            fields: vec![x.clone()],
        };
        narrow_match(&mut m).expect("no register twice");
        let got: Vec<_> = m.fields.iter().map(reg_of).collect();
        assert_eq!(got, vec![(4, 5, Some(0xff)), (5, 7, None)]);
        assert_eq!(xregs_for_v15(&m).fields, vec![x]);
    }

    #[test]
    fn an_xxreg_quarter_the_mask_leaves_out_is_no_register() {
        let mut value = vec![0u8; 16];
        value[15] = 9;
        let mut mask = vec![0u8; 16];
        mask[12..].copy_from_slice(&[0xff; 4]);
        let o = Oxm {
            class: CLASS_NXM1,
            field: NX_XXREG0 + 1,
            value,
            mask: Some(mask),
        };
        let got: Vec<_> = split_oxm(&o).unwrap().iter().map(reg_of).collect();
        // xxreg1 is reg4..reg7, reg4 highest: its lowest quarter is reg7.
        assert_eq!(got, vec![(7, 9, None)]);
    }

    #[test]
    fn a_move_across_register_boundaries_is_split_where_either_side_crosses_one() {
        // ipv6_dst[0..128] -> xxreg0: four 32-bit moves, reg3 lowest.
        let ipv6_dst = (u32::from(CLASS_NXM1) << 16) | (20 << 9) | 16;
        let xx0 = (u32::from(CLASS_NXM1) << 16) | (u32::from(NX_XXREG0) << 9) | 16;
        let mv = |n_bits, src_ofs, src, dst| FieldCopy {
            n_bits,
            src_ofs,
            dst_ofs: 0,
            src,
            dst,
        };
        let v = split_move(&mv(128, 0, ipv6_dst, xx0)).unwrap();
        assert_eq!(v.len(), 4);
        let Action::NxRegMove(c) = v[0] else {
            panic!("{v:?}")
        };
        assert_eq!((c.n_bits, c.src_ofs, c.dst), (32, 0, reg_header(3)));
        // xxreg0[16..48] -> reg8[0..32]: reg3[16..32] then reg2[0..16].
        let v = split_move(&mv(32, 16, xx0, reg_header(8))).unwrap();
        let got: Vec<_> = v
            .iter()
            .map(|a| match a {
                Action::NxRegMove(c) => (c.n_bits, c.src_ofs, c.dst_ofs, c.src),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![(16, 16, 0, reg_header(3)), (16, 0, 16, reg_header(2))]
        );
        // Past the field: refused as it is.
        assert!(split_move(&mv(32, 120, xx0, reg_header(8))).is_none());
    }

    #[test]
    fn a_load_into_an_xreg_sets_the_bits_of_each_register_it_touches() {
        let xreg0_hdr = (u32::from(CLASS_PKT_REGS) << 16) | 8;
        let a = Action::NxRegLoad {
            ofs: 16,
            n_bits: 32,
            dst: xreg0_hdr,
            value: 0xaabb_ccdd,
        };
        let v = narrow_action(&a).unwrap();
        let got: Vec<_> = v
            .iter()
            .map(|a| match a {
                Action::NxRegLoad2(o) => reg_of(o),
                _ => unreachable!(),
            })
            .collect();
        // reg1 (low) gets 0xccdd << 16, reg0 (high) 0xaabb in its low bits.
        assert_eq!(
            got,
            vec![
                (1, 0xccdd_0000, Some(0xffff_0000)),
                (0, 0xaabb, Some(0xffff))
            ]
        );
    }
}

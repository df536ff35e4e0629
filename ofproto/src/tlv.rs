//! The bridge's TLV table: which Geneve option (class, type, length) each
//! `tun_metadata<n>` field stands for, as a controller sets it with
//! `NXT_TLV_TABLE_MOD` (`ovs-ofctl add-tlv-map`) and reads it with
//! `NXT_TLV_TABLE_REQUEST`.
//!
//! The rules are Open vSwitch's (`lib/tun-metadata.c`,
//! `lib/ofp-match.c`): a command other than ADD, DELETE or CLEAR is
//! `BAD_COMMAND`; an option length that is not a multiple of 4 or is over
//! 124 bytes is `BAD_OPT_LEN`; an index of 64 or more `BAD_FIELD_IDX`; an
//! ADD of an index already mapped is `ALREADY_MAPPED`, of an option already
//! mapped to another index `DUP_ENTRY`, beyond the option space
//! `TABLE_FULL`; a DELETE of an unmapped index is ignored. A mod is
//! atomic: on any error the table is as it was.
//!
//! The option space is eswitch's own: [`MAX_OPTION_SPACE`] bytes in all,
//! the room the flow key keeps for options (`tun_opts`; Open vSwitch's is
//! 256). Each mapping takes a contiguous run of it, the first that fits in
//! 4-byte steps (Open vSwitch may split an option over free runs; here an
//! ADD that finds no run long enough is `TABLE_FULL`).

use std::collections::BTreeMap;

use megaflow::tunnel::{OptionMap, OptionSlot};
use openflow::error::OfpError;
use openflow::nx_tlv::{err, TableMod, TableReply, TlvMap, CMD_ADD, CMD_CLEAR, CMD_DELETE};

/// `tun_metadata0` .. `tun_metadata63`.
pub const MAX_FIELDS: u16 = 64;
/// Bytes of option data all mappings together may take.
pub const MAX_OPTION_SPACE: u32 = megaflow::key::TUN_OPT_SPACE as u32;
/// Largest Geneve option body (`TLV_MAX_OPT_SIZE`).
pub const MAX_OPTION_LEN: u8 = 124;

/// The table: index → mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlvTable {
    /// index → (mapping, byte offset in the option space).
    maps: BTreeMap<u16, (TlvMap, u8)>,
}

/// The empty table.
pub static EMPTY: TlvTable = TlvTable {
    maps: BTreeMap::new(),
};

fn slot_of(m: &TlvMap, offset: u8) -> OptionSlot {
    OptionSlot {
        index: m.index as u8,
        class: m.class,
        ty: m.ty,
        offset,
        len: m.len,
    }
}

impl TlvTable {
    /// The mappings, by index.
    pub fn maps(&self) -> impl Iterator<Item = &TlvMap> + '_ {
        self.maps.values().map(|(m, _)| m)
    }

    /// The mapping of `tun_metadata<index>`.
    pub fn get(&self, index: u16) -> Option<&TlvMap> {
        self.maps.get(&index).map(|(m, _)| m)
    }

    /// Where `tun_metadata<index>` sits in the key.
    pub fn slot(&self, index: u16) -> Option<OptionSlot> {
        self.maps.get(&index).map(|(m, offset)| slot_of(m, *offset))
    }

    /// Every mapping's place in the key, by index.
    pub fn slots(&self) -> impl Iterator<Item = OptionSlot> + '_ {
        self.maps.values().map(|(m, offset)| slot_of(m, *offset))
    }

    /// The table as the datapath applies it.
    pub fn option_map(&self) -> OptionMap {
        OptionMap::new(self.slots().collect())
    }

    /// Bytes the mappings take.
    pub fn used(&self) -> u32 {
        self.maps.values().map(|(m, _)| u32::from(m.len)).sum()
    }

    /// The first free run of `len` bytes (4-byte steps), if any.
    fn place(&self, len: u8) -> Option<u8> {
        let space = MAX_OPTION_SPACE as u8;
        (0..space)
            .step_by(4)
            .filter(|&o| o + len <= space)
            .find(|&o| {
                self.maps
                    .values()
                    .all(|(m, at)| o + len <= *at || *at + m.len <= o)
            })
    }

    /// Applies a mod, all or nothing; the error is the one Open vSwitch
    /// answers. True when the table changed (a DELETE of what is not
    /// mapped does not change it).
    pub fn apply(&mut self, m: &TableMod) -> Result<bool, OfpError> {
        if m.command > CMD_CLEAR {
            return Err(err::BAD_COMMAND);
        }
        for map in &m.maps {
            if map.len % 4 != 0 || map.len > MAX_OPTION_LEN {
                return Err(err::BAD_OPT_LEN);
            }
            if map.index >= MAX_FIELDS {
                return Err(err::BAD_FIELD_IDX);
            }
        }
        let mut next = self.clone();
        match m.command {
            CMD_ADD => {
                for map in &m.maps {
                    if next.maps.contains_key(&map.index) {
                        return Err(err::ALREADY_MAPPED);
                    }
                    if next.maps().any(|o| (o.class, o.ty) == (map.class, map.ty)) {
                        return Err(err::DUP_ENTRY);
                    }
                    let at = next.place(map.len).ok_or(err::TABLE_FULL)?;
                    next.maps.insert(map.index, (*map, at));
                }
            }
            CMD_DELETE => {
                for map in &m.maps {
                    next.maps.remove(&map.index);
                }
            }
            _ => next.maps.clear(),
        }
        let changed = next != *self;
        *self = next;
        Ok(changed)
    }

    /// The `NXT_TLV_TABLE_REPLY` of the table.
    pub fn reply(&self) -> TableReply {
        TableReply {
            max_option_space: MAX_OPTION_SPACE,
            max_fields: MAX_FIELDS,
            maps: self.maps().copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(class: u16, ty: u8, len: u8, index: u16) -> TlvMap {
        TlvMap {
            class,
            ty,
            len,
            index,
        }
    }

    fn add(maps: Vec<TlvMap>) -> TableMod {
        TableMod {
            command: CMD_ADD,
            maps,
        }
    }

    #[test]
    fn mods_follow_open_vswitch_and_are_all_or_nothing() {
        let mut t = TlvTable::default();
        t.apply(&add(vec![map(0x0102, 0x80, 4, 0)])).expect("add");
        assert_eq!(t.get(0), Some(&map(0x0102, 0x80, 4, 0)));
        let before = t.clone();
        for (m, want) in [
            (add(vec![map(1, 1, 4, 0)]), err::ALREADY_MAPPED),
            (add(vec![map(0x0102, 0x80, 8, 1)]), err::DUP_ENTRY),
            (add(vec![map(1, 1, 6, 1)]), err::BAD_OPT_LEN),
            (add(vec![map(1, 1, 128, 1)]), err::BAD_OPT_LEN),
            (add(vec![map(1, 1, 4, 64)]), err::BAD_FIELD_IDX),
            // The second of two fails: neither is taken.
            (add(vec![map(1, 1, 4, 1), map(1, 1, 4, 2)]), err::DUP_ENTRY),
            (add(vec![map(1, 1, 16, 1)]), err::TABLE_FULL),
            (
                TableMod {
                    command: 3,
                    maps: vec![],
                },
                err::BAD_COMMAND,
            ),
        ] {
            assert_eq!(t.apply(&m), Err(want), "{m:?}");
            assert_eq!(t, before, "unchanged after {m:?}");
        }
        // DELETE ignores what is not mapped; CLEAR empties.
        t.apply(&add(vec![map(1, 1, 8, 5)])).expect("add");
        let del = TableMod {
            command: CMD_DELETE,
            maps: vec![map(0, 0, 0, 0), map(0, 0, 0, 9)],
        };
        t.apply(&del).expect("delete");
        assert_eq!(t.maps().map(|m| m.index).collect::<Vec<_>>(), [5]);
        let r = t.reply();
        assert_eq!(
            (r.max_option_space, r.max_fields, r.maps.len()),
            (16, 64, 1)
        );
        t.apply(&TableMod {
            command: CMD_CLEAR,
            maps: vec![],
        })
        .expect("clear");
        assert_eq!(t.used(), 0);
    }
}

#[cfg(test)]
mod placement {
    use super::*;

    fn add(t: &mut TlvTable, index: u16, len: u8) -> Result<bool, OfpError> {
        t.apply(&TableMod {
            command: CMD_ADD,
            maps: vec![TlvMap {
                class: 0x0102,
                ty: index as u8,
                len,
                index,
            }],
        })
    }

    #[test]
    fn mappings_take_disjoint_runs_and_freed_runs_are_reused() {
        let mut t = TlvTable::default();
        add(&mut t, 0, 4).expect("0");
        add(&mut t, 5, 8).expect("5");
        add(&mut t, 9, 4).expect("9");
        let at = |t: &TlvTable, i| t.slot(i).map(|s| (s.offset, s.len));
        assert_eq!(
            (at(&t, 0), at(&t, 5), at(&t, 9)),
            (Some((0, 4)), Some((4, 8)), Some((12, 4)))
        );
        assert_eq!(add(&mut t, 1, 4), Err(err::TABLE_FULL));
        t.apply(&TableMod {
            command: CMD_DELETE,
            maps: vec![TlvMap {
                class: 0,
                ty: 0,
                len: 0,
                index: 5,
            }],
        })
        .expect("delete");
        // A 4-byte run is free at 4 and at 8: the first is taken.
        add(&mut t, 2, 4).expect("2");
        assert_eq!(at(&t, 2), Some((4, 4)));
        // 8 bytes do not fit the one 4-byte run left.
        assert_eq!(add(&mut t, 3, 8), Err(err::TABLE_FULL));
        let m = t.option_map();
        assert_eq!(
            m.slots().iter().map(|s| s.index).collect::<Vec<_>>(),
            [0, 2, 9]
        );
        for (a, b) in m.slots().iter().zip(m.slots().iter().skip(1)) {
            assert_eq!(a.mask() & b.mask(), 0, "{a:?} and {b:?} overlap");
        }
    }
}

#[cfg(test)]
#[path = "tests/tun_metadata.rs"]
mod tun_metadata;

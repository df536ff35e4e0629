//! The TABLE and TABLE_FEATURES multipart bodies.

use crate::error::ParseError;
use crate::wire::{c_string, Put, Reader};

/// `OFP_MAX_TABLE_NAME_LEN`.
pub const TABLE_NAME_LEN: usize = 32;

/// `ofp_table_feature_prop_type` (the eight OpenFlow 1.3 requires of every
/// table, as Open vSwitch checks; the `_MISS` variants are these plus 1).
pub mod prop {
    pub const INSTRUCTIONS: u16 = 0;
    pub const NEXT_TABLES: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const APPLY_SETFIELD: u16 = 14;
}

/// One `ofp_table_features` entry; properties as (type, payload).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TableFeatures {
    pub table_id: u8,
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<(u16, Vec<u8>)>,
}

impl TableFeatures {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<TableFeatures, ParseError> {
        let len = usize::from(r.u16("table_features.length")?);
        if len < 64 || len % 8 != 0 {
            return Err(ParseError::BadLength {
                what: "table features entry",
                length: len,
            });
        }
        let mut b = r.sub(len - 2, "table features entry")?;
        let table_id = b.u8("table_features.table_id")?;
        b.skip(5, "table_features.pad")?;
        let name = c_string(b.bytes(TABLE_NAME_LEN, "table_features.name")?);
        let mut t = TableFeatures {
            table_id,
            name,
            metadata_match: b.u64("table_features.metadata_match")?,
            metadata_write: b.u64("table_features.metadata_write")?,
            config: b.u32("table_features.config")?,
            max_entries: b.u32("table_features.max_entries")?,
            properties: Vec::new(),
        };
        while !b.is_empty() {
            let ty = b.u16("table feature property type")?;
            let plen = usize::from(b.u16("table feature property length")?);
            if plen < 4 {
                return Err(ParseError::BadLength {
                    what: "table feature property",
                    length: plen,
                });
            }
            let data = b.bytes(plen - 4, "table feature property")?.to_vec();
            let pad = (8 - plen % 8) % 8;
            b.skip(pad, "table feature property padding")?;
            t.properties.push((ty, data));
        }
        Ok(t)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.put_zeros(5);
        out.put_str(&self.name, TABLE_NAME_LEN);
        out.put_u64(self.metadata_match);
        out.put_u64(self.metadata_write);
        out.put_u32(self.config);
        out.put_u32(self.max_entries);
        for (ty, data) in &self.properties {
            out.put_u16(*ty);
            out.put_u16((4 + data.len()) as u16);
            out.extend_from_slice(data);
            out.put_zeros((8 - (4 + data.len()) % 8) % 8);
        }
        let len = (out.len() - start) as u16;
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// One `ofp_table_stats` entry (24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

impl TableStats {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<TableStats, ParseError> {
        let table_id = r.u8("table_stats.table_id")?;
        r.skip(3, "table_stats.pad")?;
        Ok(TableStats {
            table_id,
            active_count: r.u32("table_stats.active_count")?,
            lookup_count: r.u64("table_stats.lookup_count")?,
            matched_count: r.u64("table_stats.matched_count")?,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.put_zeros(3);
        out.put_u32(self.active_count);
        out.put_u64(self.lookup_count);
        out.put_u64(self.matched_count);
    }
}

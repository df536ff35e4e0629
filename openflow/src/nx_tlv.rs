//! Nicira's TLV table messages: how a controller maps Geneve options
//! (class, type, length) to the `tun_metadata<n>` fields
//! (`NXM_NX_TUN_METADATA<n>`), as `ovs-ofctl add-tlv-map`, `del-tlv-map`
//! and `dump-tlv-map` send them and ovn-controller does at start.
//!
//! Layouts (Open vSwitch `include/openflow/nicira-ext.h`), all after the
//! experimenter header (vendor `NX_VENDOR`, subtype):
//! - `NXT_TLV_TABLE_MOD` (24): `command` (be16: ADD 0, DELETE 1, CLEAR 2),
//!   6 bytes of padding, then `nx_tlv_map`s;
//! - `NXT_TLV_TABLE_REQUEST` (25): empty;
//! - `NXT_TLV_TABLE_REPLY` (26): `max_option_space` (be32), `max_fields`
//!   (be16), 10 reserved bytes, then `nx_tlv_map`s;
//! - `nx_tlv_map` (8 bytes): `option_class` (be16), `option_type` (u8),
//!   `option_len` (u8, a multiple of 4), `index` (be16), 2 bytes of
//!   padding.
//!
//! Errors of a TLV table mod are Nicira experimenter errors
//! (`OFPERR_NXTTMFC_*`, NX1.2+ types 16..21 and 38).

use crate::error::{OfpError, ParseError, EXPERIMENTER_ERROR};
use crate::wire::{Put, Reader};

/// Experimenter subtypes.
pub const TABLE_MOD: u32 = 24;
pub const TABLE_REQUEST: u32 = 25;
pub const TABLE_REPLY: u32 = 26;

/// `nx_tlv_table_mod_command`.
pub const CMD_ADD: u16 = 0;
pub const CMD_DELETE: u16 = 1;
pub const CMD_CLEAR: u16 = 2;

/// `OFPERR_NXTTMFC_*` (Nicira experimenter error types, OpenFlow 1.2+).
pub mod err {
    use super::*;
    pub const BAD_COMMAND: OfpError = OfpError::new(EXPERIMENTER_ERROR, 16);
    pub const BAD_OPT_LEN: OfpError = OfpError::new(EXPERIMENTER_ERROR, 17);
    pub const BAD_FIELD_IDX: OfpError = OfpError::new(EXPERIMENTER_ERROR, 18);
    pub const TABLE_FULL: OfpError = OfpError::new(EXPERIMENTER_ERROR, 19);
    pub const ALREADY_MAPPED: OfpError = OfpError::new(EXPERIMENTER_ERROR, 20);
    pub const DUP_ENTRY: OfpError = OfpError::new(EXPERIMENTER_ERROR, 21);
    pub const INVALID_TLV_DEL: OfpError = OfpError::new(EXPERIMENTER_ERROR, 38);
    /// `NXFMFC_INVALID_TLV_FIELD`: a flow names an unmapped `tun_metadata`.
    pub const INVALID_TLV_FIELD: OfpError = OfpError::new(EXPERIMENTER_ERROR, 37);
}

/// One mapping: the Geneve option (class, type, length in bytes) and the
/// `tun_metadata` index it is read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TlvMap {
    pub class: u16,
    pub ty: u8,
    pub len: u8,
    pub index: u16,
}

impl TlvMap {
    /// Option (`class`, `ty`) of `len` bytes as `tun_metadata<index>`.
    pub const fn new(class: u16, ty: u8, len: u8, index: u16) -> TlvMap {
        TlvMap {
            class,
            ty,
            len,
            index,
        }
    }

    fn parse(r: &mut Reader<'_>) -> Result<TlvMap, ParseError> {
        let class = r.u16("tlv_map.option_class")?;
        let ty = r.u8("tlv_map.option_type")?;
        let len = r.u8("tlv_map.option_len")?;
        let index = r.u16("tlv_map.index")?;
        r.skip(2, "tlv_map.pad")?;
        Ok(TlvMap {
            class,
            ty,
            len,
            index,
        })
    }

    fn put(&self, out: &mut Vec<u8>) {
        out.put_u16(self.class);
        out.push(self.ty);
        out.push(self.len);
        out.put_u16(self.index);
        out.put_zeros(2);
    }
}

/// The maps after a fixed part: a whole number of 8-byte entries.
fn maps(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<TlvMap>, ParseError> {
    if r.remaining() % 8 != 0 {
        return Err(ParseError::BadLength {
            what,
            length: r.remaining(),
        });
    }
    let mut v = Vec::with_capacity(r.remaining() / 8);
    while r.remaining() > 0 {
        v.push(TlvMap::parse(r)?);
    }
    Ok(v)
}

/// `NXT_TLV_TABLE_MOD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMod {
    pub command: u16,
    pub maps: Vec<TlvMap>,
}

impl TableMod {
    /// From the body after the experimenter header.
    pub fn parse(body: &[u8]) -> Result<TableMod, ParseError> {
        let mut r = Reader::new(body);
        let command = r.u16("tlv_table_mod.command")?;
        r.skip(6, "tlv_table_mod.pad")?;
        let maps = maps(&mut r, "tlv_table_mod maps")?;
        Ok(TableMod { command, maps })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 8 * self.maps.len());
        out.put_u16(self.command);
        out.put_zeros(6);
        for m in &self.maps {
            m.put(&mut out);
        }
        out
    }
}

/// `NXT_TLV_TABLE_REPLY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableReply {
    pub max_option_space: u32,
    pub max_fields: u16,
    pub maps: Vec<TlvMap>,
}

impl TableReply {
    pub fn parse(body: &[u8]) -> Result<TableReply, ParseError> {
        let mut r = Reader::new(body);
        let max_option_space = r.u32("tlv_table_reply.max_option_space")?;
        let max_fields = r.u16("tlv_table_reply.max_fields")?;
        r.skip(10, "tlv_table_reply.reserved")?;
        let maps = maps(&mut r, "tlv_table_reply maps")?;
        Ok(TableReply {
            max_option_space,
            max_fields,
            maps,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 8 * self.maps.len());
        out.put_u32(self.max_option_space);
        out.put_u16(self.max_fields);
        out.put_zeros(10);
        for m in &self.maps {
            m.put(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_mod_bytes_as_open_vswitch_lays_them_out() {
        let m = TableMod {
            command: CMD_ADD,
            maps: vec![TlvMap::new(0x0102, 0x80, 4, 0)],
        };
        let b = m.encode();
        assert_eq!(b, [0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x80, 4, 0, 0, 0, 0]);
        assert_eq!(TableMod::parse(&b), Ok(m));
        // A map cut short is a length error, not a silent drop.
        assert!(matches!(
            TableMod::parse(&b[..12]),
            Err(ParseError::BadLength { .. })
        ));
    }

    #[test]
    fn table_reply_round_trips() {
        let r = TableReply {
            max_option_space: 256,
            max_fields: 64,
            maps: vec![
                TlvMap {
                    class: 0xffff,
                    ty: 1,
                    len: 8,
                    index: 3,
                },
                TlvMap {
                    class: 0x0102,
                    ty: 0x80,
                    len: 4,
                    index: 0,
                },
            ],
        };
        let b = r.encode();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[..6], &[0, 0, 1, 0, 0, 64]);
        assert_eq!(TableReply::parse(&b), Ok(r));
    }
}

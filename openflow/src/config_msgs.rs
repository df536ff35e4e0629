//! TABLE_MOD, PORT_MOD and QUEUE_GET_CONFIG.

use crate::error::ParseError;
use crate::wire::{Put, Reader};

/// `ofp_table_mod` after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMod {
    pub table_id: u8,
    pub config: u32,
}

impl TableMod {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<TableMod, ParseError> {
        let table_id = r.u8("table_mod.table_id")?;
        r.skip(3, "table_mod.pad")?;
        Ok(TableMod {
            table_id,
            config: r.u32("table_mod.config")?,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.put_zeros(3);
        out.put_u32(self.config);
    }
}

/// `ofp_port_mod` after the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

impl PortMod {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<PortMod, ParseError> {
        let port_no = r.u32("port_mod.port_no")?;
        r.skip(4, "port_mod.pad")?;
        let hw_addr = r.array("port_mod.hw_addr")?;
        r.skip(2, "port_mod.pad2")?;
        if r.version() >= crate::header::V14 {
            // 1.4: the features to advertise in an Ethernet property.
            let config = r.u32("port_mod.config")?;
            let mask = r.u32("port_mod.mask")?;
            let mut advertise = 0;
            while r.remaining() >= 4 {
                let ty = r.u16("port_mod prop.type")?;
                let len = usize::from(r.u16("port_mod prop.length")?);
                let mut p = r.sub(len.saturating_sub(4), "port_mod prop")?;
                r.skip((8 - len % 8) % 8 % (r.remaining() + 1), "port_mod prop pad")?;
                if ty == 0 {
                    advertise = p.u32("port_mod.advertise")?;
                }
            }
            return Ok(PortMod {
                port_no,
                hw_addr,
                config,
                mask,
                advertise,
            });
        }
        let p = PortMod {
            port_no,
            hw_addr,
            config: r.u32("port_mod.config")?,
            mask: r.u32("port_mod.mask")?,
            advertise: r.u32("port_mod.advertise")?,
        };
        r.skip(4, "port_mod.pad3")?;
        Ok(p)
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.put_zeros(4);
        out.extend_from_slice(&self.hw_addr);
        out.put_zeros(2);
        out.put_u32(self.config);
        out.put_u32(self.mask);
        out.put_u32(self.advertise);
        out.put_zeros(4);
    }
}

/// QUEUE_GET_CONFIG request (a port) and reply (the port and its
/// queues' `ofp_packet_queue` entries as bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    pub port: u32,
    pub queues: Vec<u8>,
}

impl QueueConfig {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<QueueConfig, ParseError> {
        let port = r.u32("queue_get_config.port")?;
        r.skip(4, "queue_get_config.pad")?;
        Ok(QueueConfig {
            port,
            queues: r.rest().to_vec(),
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port);
        out.put_zeros(4);
        out.extend_from_slice(&self.queues);
    }
}

//! `ofp_port` (64 bytes), as PORT_DESC and PORT_STATUS carry it.

use crate::error::ParseError;
use crate::wire::{c_string, Put, Reader};

/// `ofp_port_reason`: why a PORT_STATUS was sent.
pub mod reason {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

/// Bytes in `ofp_port`.
pub const PORT_LEN: usize = 64;

/// `OFP_MAX_PORT_NAME_LEN`.
pub const PORT_NAME_LEN: usize = 16;

/// `ofp_port_config` bits.
pub mod config {
    pub const PORT_DOWN: u32 = 1 << 0;
    pub const NO_RECV: u32 = 1 << 2;
    pub const NO_FWD: u32 = 1 << 5;
    pub const NO_PACKET_IN: u32 = 1 << 6;
}

/// `ofp_port_state` bits.
pub mod state {
    pub const LINK_DOWN: u32 = 1 << 0;
    pub const BLOCKED: u32 = 1 << 1;
    pub const LIVE: u32 = 1 << 2;
}

/// `ofp_port_features` bits (the ones a virtual port reports).
pub mod features {
    pub const F_10GB_FD: u32 = 1 << 6;
    pub const F_COPPER: u32 = 1 << 11;
    pub const F_FIBER: u32 = 1 << 12;
}

/// Reserved port numbers (`ofp_port_no`).
pub mod reserved {
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// One port's description.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// Up to 15 bytes on the wire.
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    /// kbps.
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl Port {
    pub fn parse(r: &mut Reader<'_>) -> Result<Port, ParseError> {
        let port_no = r.u32("port.port_no")?;
        r.skip(4, "port.pad")?;
        let hw_addr = r.array("port.hw_addr")?;
        r.skip(2, "port.pad2")?;
        let name = c_string(r.bytes(PORT_NAME_LEN, "port.name")?);
        Ok(Port {
            port_no,
            hw_addr,
            name,
            config: r.u32("port.config")?,
            state: r.u32("port.state")?,
            curr: r.u32("port.curr")?,
            advertised: r.u32("port.advertised")?,
            supported: r.u32("port.supported")?,
            peer: r.u32("port.peer")?,
            curr_speed: r.u32("port.curr_speed")?,
            max_speed: r.u32("port.max_speed")?,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.put_zeros(4);
        out.extend_from_slice(&self.hw_addr);
        out.put_zeros(2);
        out.put_str(&self.name, PORT_NAME_LEN);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.put_u32(v);
        }
    }
}

/// One `ofp_port_stats` entry (112 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortStatsEntry {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

impl PortStatsEntry {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<PortStatsEntry, ParseError> {
        let port_no = r.u32("port_stats.port_no")?;
        r.skip(4, "port_stats.pad")?;
        let mut c = [0u64; 12];
        for v in &mut c {
            *v = r.u64("port_stats.counter")?;
        }
        Ok(PortStatsEntry {
            port_no,
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            rx_frame_err: c[8],
            rx_over_err: c[9],
            rx_crc_err: c[10],
            collisions: c[11],
            duration_sec: r.u32("port_stats.duration_sec")?,
            duration_nsec: r.u32("port_stats.duration_nsec")?,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.put_zeros(4);
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ] {
            out.put_u64(v);
        }
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
    }
}

/// Bytes in `ofp_port_stats`.
pub const PORT_STATS_LEN: usize = 112;

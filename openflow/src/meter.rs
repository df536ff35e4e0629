//! METER_MOD and the METER, METER_CONFIG and METER_FEATURES multipart
//! bodies.

use crate::error::{OfpError, ParseError};
use crate::wire::{Put, Reader};

/// `ofp_meter_mod_command`.
pub mod meter_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `ofp_meter_flags`.
pub mod meter_flags {
    pub const KBPS: u16 = 1 << 0;
    pub const PKTPS: u16 = 1 << 1;
    pub const BURST: u16 = 1 << 2;
    pub const STATS: u16 = 1 << 3;
}

/// `ofp_meter_band_type`.
pub mod band_type {
    pub const DROP: u16 = 1;
    pub const DSCP_REMARK: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPM_ALL`: every meter (stats and config requests, delete).
pub const METER_ALL: u32 = 0xffff_ffff;

/// One band (16 bytes on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    pub ty: u16,
    pub rate: u32,
    pub burst_size: u32,
    /// DSCP_REMARK's prec_level; EXPERIMENTER's id (low bits).
    pub arg: u32,
}

impl Band {
    fn parse(r: &mut Reader<'_>) -> Result<Band, ParseError> {
        let ty = r.u16("band.type")?;
        let len = r.u16("band.len")?;
        if len != 16 {
            return Err(ParseError::Invalid {
                what: "meter band",
                detail: format!("length {len}, expected 16"),
                error: OfpError::new(12, 8),
            });
        }
        let rate = r.u32("band.rate")?;
        let burst_size = r.u32("band.burst_size")?;
        let arg = r.u32("band.arg")?;
        Ok(Band {
            ty,
            rate,
            burst_size,
            arg: if ty == band_type::DSCP_REMARK {
                arg >> 24
            } else {
                arg
            },
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.put_u16(self.ty);
        out.put_u16(16);
        out.put_u32(self.rate);
        out.put_u32(self.burst_size);
        out.put_u32(if self.ty == band_type::DSCP_REMARK {
            self.arg << 24
        } else {
            self.arg
        });
    }
}

fn parse_bands(r: &mut Reader<'_>) -> Result<Vec<Band>, ParseError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Band::parse(r)?);
    }
    Ok(v)
}

/// `ofp_meter_mod` after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterMod {
    pub command: u16,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<Band>,
}

impl MeterMod {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<MeterMod, ParseError> {
        Ok(MeterMod {
            command: r.u16("meter_mod.command")?,
            flags: r.u16("meter_mod.flags")?,
            meter_id: r.u32("meter_mod.meter_id")?,
            bands: parse_bands(r)?,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u16(self.command);
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        self.bands.iter().for_each(|b| b.emit(out));
    }
}

/// One `ofp_meter_config` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<Band>,
}

impl MeterConfig {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<MeterConfig, ParseError> {
        let len = usize::from(r.u16("meter_config.length")?);
        if len < 8 {
            return Err(ParseError::BadLength {
                what: "meter config entry",
                length: len,
            });
        }
        let mut b = r.sub(len - 2, "meter config entry")?;
        Ok(MeterConfig {
            flags: b.u16("meter_config.flags")?,
            meter_id: b.u32("meter_config.meter_id")?,
            bands: parse_bands(&mut b)?,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u16((8 + 16 * self.bands.len()) as u16);
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        self.bands.iter().for_each(|b| b.emit(out));
    }
}

/// One `ofp_meter_stats` entry (its bands' counts: packets, bytes).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub bands: Vec<(u64, u64)>,
}

impl MeterStats {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<MeterStats, ParseError> {
        let meter_id = r.u32("meter_stats.meter_id")?;
        let len = usize::from(r.u16("meter_stats.len")?);
        if len < 40 || (len - 40) % 16 != 0 {
            return Err(ParseError::BadLength {
                what: "meter stats entry",
                length: len,
            });
        }
        r.skip(6, "meter_stats.pad")?;
        let mut m = MeterStats {
            meter_id,
            flow_count: r.u32("meter_stats.flow_count")?,
            packet_in_count: r.u64("meter_stats.packet_in_count")?,
            byte_in_count: r.u64("meter_stats.byte_in_count")?,
            duration_sec: r.u32("meter_stats.duration_sec")?,
            duration_nsec: r.u32("meter_stats.duration_nsec")?,
            bands: Vec::new(),
        };
        for _ in 0..(len - 40) / 16 {
            m.bands
                .push((r.u64("band_stats.packets")?, r.u64("band_stats.bytes")?));
        }
        Ok(m)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.meter_id);
        out.put_u16((40 + 16 * self.bands.len()) as u16);
        out.put_zeros(6);
        out.put_u32(self.flow_count);
        out.put_u64(self.packet_in_count);
        out.put_u64(self.byte_in_count);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        for (p, b) in &self.bands {
            out.put_u64(*p);
            out.put_u64(*b);
        }
    }
}

/// `ofp_meter_features` (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MeterFeatures {
    pub max_meter: u32,
    pub band_types: u32,
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

impl MeterFeatures {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<MeterFeatures, ParseError> {
        let f = MeterFeatures {
            max_meter: r.u32("meter_features.max_meter")?,
            band_types: r.u32("meter_features.band_types")?,
            capabilities: r.u32("meter_features.capabilities")?,
            max_bands: r.u8("meter_features.max_bands")?,
            max_color: r.u8("meter_features.max_color")?,
        };
        r.skip(2, "meter_features.pad")?;
        Ok(f)
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.put_u32(self.max_meter);
        out.put_u32(self.band_types);
        out.put_u32(self.capabilities);
        out.put_u8(self.max_bands);
        out.put_u8(self.max_color);
        out.put_zeros(2);
    }
}

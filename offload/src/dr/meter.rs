//! Flow meters: the `flow_meter_parameters` bytes and the device's
//! two-rate token-bucket colouring.
//!
//! `mlx5dv_dr_action_create_flow_meter` takes the meter's parameters as the
//! PRM's 32-byte `flow_meter_parameters` ([`MeterParams::encode`],
//! [`MeterParams::decode`]); the device colours each packet through the
//! meter ([`MeterState::mark`]) and writes the colour into a reg_c, where
//! the next table matches it ([`Color`]).
//!
//! ## Layout
//!
//! Checked against rdma-core `tests/mlx5_prm_structs.py` class
//! `FlowMeterParams` at commit 691953d8 (big-endian bit order within each
//! byte):
//!
//! | byte   | contents |
//! |--------|----------|
//! | 0      | `valid[1] bucket_overflow[1] start_color[2] both_buckets_on_green[1] reserved[1] meter_mode[2]` |
//! | 1..8   | reserved |
//! | 8, 9   | `cbs_exponent`, `cbs_mantissa` |
//! | 10, 11 | `reserved[3] cir_exponent[5]`, `cir_mantissa` |
//! | 12..16 | reserved |
//! | 16, 17 | `ebs_exponent`, `ebs_mantissa` |
//! | 18, 19 | `reserved[3] eir_exponent[5]`, `eir_mantissa` |
//! | 20..32 | reserved |
//!
//! ## Semantics
//!
//! - CIR (EIR) = 10^9 × mantissa / 2^exponent per second, CBS (EBS) =
//!   mantissa × 2^exponent; in bytes with `meter_mode` 0, in packets with
//!   `meter_mode` 1. rdma-core's `test_flow_meter` (tests/test_mlx5_dr.py)
//!   gives `cir_mantissa=1, cir_exponent=6` as "15.625MBps". The rate
//!   exponents have 5 bits; the burst exponents a whole byte of which only
//!   0..=31 is accepted here.
//! - Colours written to the reg_c: RED = 0, GREEN = 2 (`FLOW_METER_RED`,
//!   `FLOW_METER_GREEN` in tests/test_mlx5_dr.py), YELLOW = 1.
//! - Marking is colour-blind (`start_color` is carried, not used):
//!   RFC 2698/4115-style committed (C) and excess (E) buckets, both full at
//!   creation. Token arithmetic is exact: tokens are kept in units of
//!   2^-32 byte (or packet), and a rate of 10^9 × m / 2^e per second is
//!   m × 2^(32 − e) units per nanosecond, an integer for e ≤ 31.
//!
//! Thread-safety: plain values; a [`MeterState`] is owned by whoever runs
//! the meter.

use std::fmt;

use thiserror::Error;

/// Size of `flow_meter_parameters` in bytes.
pub const PARAMS_LEN: usize = 32;

/// The colour the meter gives a packet, as the value written to the reg_c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    /// Over both rates (0).
    Red = 0,
    /// Within the excess rate (1).
    Yellow = 1,
    /// Within the committed rate (2).
    Green = 2,
}

impl Color {
    /// The colour of a register value, if it is one.
    pub fn from_reg(v: u32) -> Option<Color> {
        match v {
            0 => Some(Color::Red),
            1 => Some(Color::Yellow),
            2 => Some(Color::Green),
            _ => None,
        }
    }

    /// `red`, `yellow` or `green`.
    pub fn name(self) -> &'static str {
        match self {
            Color::Red => "red",
            Color::Yellow => "yellow",
            Color::Green => "green",
        }
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the meter counts (`meter_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MeterMode {
    /// Bytes: rates in bytes/s, bursts in bytes (0).
    Bytes,
    /// Packets: rates in packets/s, bursts in packets (1).
    Packets,
}

/// Why [`MeterParams::decode`] refused the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum MeterError {
    /// Not 32 bytes.
    #[error("flow_meter_parameters is {len} bytes, not 32")]
    BadLength {
        /// The length given.
        len: usize,
    },
    /// A reserved bit is set in byte `byte`.
    #[error("reserved bits set in byte {byte}")]
    ReservedBits {
        /// The first byte with a reserved bit set.
        byte: usize,
    },
    /// `meter_mode` is neither 0 (bytes) nor 1 (packets).
    #[error("meter_mode {0} is neither bytes (0) nor packets (1)")]
    BadMode(u8),
    /// `start_color` is 3 (no such colour).
    #[error("start_color 3 is not a colour")]
    BadStartColor,
    /// A burst exponent above 31.
    #[error("{which}_exponent {exponent} is above 31")]
    ExponentOutOfRange {
        /// `cbs` or `ebs`.
        which: &'static str,
        /// The exponent given.
        exponent: u8,
    },
}

/// The contents of `flow_meter_parameters`. Rate and burst pairs are
/// `(exponent, mantissa)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MeterParams {
    /// The parameters are valid (the meter runs).
    pub valid: bool,
    /// Tokens overflowing the committed bucket go to the excess bucket.
    pub bucket_overflow: bool,
    /// Initial colour for colour-aware metering (0..=2); carried, not used
    /// by the colour-blind [`MeterState`].
    pub start_color: u8,
    /// A green packet also takes its cost from the excess bucket.
    pub both_buckets_on_green: bool,
    /// Bytes or packets.
    pub mode: MeterMode,
    /// Committed burst size (exponent ≤ 31, mantissa).
    pub cbs: (u8, u8),
    /// Committed information rate (5-bit exponent, mantissa).
    pub cir: (u8, u8),
    /// Excess burst size (exponent ≤ 31, mantissa).
    pub ebs: (u8, u8),
    /// Excess information rate (5-bit exponent, mantissa).
    pub eir: (u8, u8),
}

/// Largest burst exponent.
const MAX_BURST_EXP: u8 = 31;

/// 10^9 × m / 2^e.
fn rate(pair: (u8, u8)) -> f64 {
    let (e, m) = pair;
    1e9 * f64::from(m) / f64::from(1u32 << (e & 0x1f))
}

/// m × 2^e, the exponent capped at 31.
fn burst(pair: (u8, u8)) -> u64 {
    let (e, m) = pair;
    u64::from(m) << e.min(MAX_BURST_EXP)
}

/// The (exponent, mantissa) whose rate is closest (relative error) to
/// `r` per second; ties go to the smaller exponent. 0 gives (0, 0).
fn rate_pair(r: u64) -> (u8, u8) {
    if r == 0 {
        return (0, 0);
    }
    let want = r as f64;
    let mut best = (0u8, 1u8);
    let mut best_err = f64::INFINITY;
    for e in 0..=31u8 {
        let scale = f64::from(1u32 << e) / 1e9;
        let m = (want * scale).round().clamp(1.0, 255.0) as u8;
        let err = (rate((e, m)) - want).abs() / want;
        if err < best_err {
            best = (e, m);
            best_err = err;
        }
    }
    best
}

/// The (exponent, mantissa) of the smallest burst ≥ `b` (255 × 2^31 at
/// most); 0 gives (0, 0).
fn burst_pair(b: u64) -> (u8, u8) {
    for e in 0..=MAX_BURST_EXP {
        let m = b.div_ceil(1u64 << e);
        if let Ok(m) = u8::try_from(m) {
            return (e, m);
        }
    }
    (MAX_BURST_EXP, u8::MAX)
}

impl MeterParams {
    /// The 32 bytes. Fields are written modulo their widths (start_color 2
    /// bits, rate exponents 5 bits); burst exponents are written as given.
    pub fn encode(&self) -> [u8; PARAMS_LEN] {
        let mut b = [0u8; PARAMS_LEN];
        let mode = match self.mode {
            MeterMode::Bytes => 0,
            MeterMode::Packets => 1,
        };
        b[0] = u8::from(self.valid) << 7
            | u8::from(self.bucket_overflow) << 6
            | (self.start_color & 3) << 4
            | u8::from(self.both_buckets_on_green) << 3
            | mode;
        b[8] = self.cbs.0;
        b[9] = self.cbs.1;
        b[10] = self.cir.0 & 0x1f;
        b[11] = self.cir.1;
        b[16] = self.ebs.0;
        b[17] = self.ebs.1;
        b[18] = self.eir.0 & 0x1f;
        b[19] = self.eir.1;
        b
    }

    /// Reads and checks the bytes: exactly 32, no reserved bit set,
    /// `meter_mode` 0 or 1, `start_color` not 3, burst exponents ≤ 31.
    pub fn decode(b: &[u8]) -> Result<Self, MeterError> {
        let b: &[u8; PARAMS_LEN] = b
            .try_into()
            .map_err(|_| MeterError::BadLength { len: b.len() })?;
        // Reserved bits of each byte.
        const RESERVED: [u8; PARAMS_LEN] = {
            let mut r = [0xffu8; PARAMS_LEN];
            r[0] = 0x04;
            r[8] = 0;
            r[9] = 0;
            r[10] = 0xe0;
            r[11] = 0;
            r[16] = 0;
            r[17] = 0;
            r[18] = 0xe0;
            r[19] = 0;
            r
        };
        if let Some(byte) = (0..PARAMS_LEN).find(|&i| b[i] & RESERVED[i] != 0) {
            return Err(MeterError::ReservedBits { byte });
        }
        let mode = match b[0] & 3 {
            0 => MeterMode::Bytes,
            1 => MeterMode::Packets,
            m => return Err(MeterError::BadMode(m)),
        };
        let start_color = (b[0] >> 4) & 3;
        if start_color == 3 {
            return Err(MeterError::BadStartColor);
        }
        for (which, exponent) in [("cbs", b[8]), ("ebs", b[16])] {
            if exponent > MAX_BURST_EXP {
                return Err(MeterError::ExponentOutOfRange { which, exponent });
            }
        }
        Ok(MeterParams {
            valid: b[0] & 0x80 != 0,
            bucket_overflow: b[0] & 0x40 != 0,
            start_color,
            both_buckets_on_green: b[0] & 0x08 != 0,
            mode,
            cbs: (b[8], b[9]),
            cir: (b[10], b[11]),
            ebs: (b[16], b[17]),
            eir: (b[18], b[19]),
        })
    }

    /// The committed rate per second (bytes or packets): 10^9 × m / 2^e.
    pub fn cir_per_sec(&self) -> f64 {
        rate(self.cir)
    }

    /// The committed burst (bytes or packets): m × 2^e.
    pub fn cbs(&self) -> u64 {
        burst(self.cbs)
    }

    /// The excess rate per second (bytes or packets).
    pub fn eir_per_sec(&self) -> f64 {
        rate(self.eir)
    }

    /// The excess burst (bytes or packets).
    pub fn ebs(&self) -> u64 {
        burst(self.ebs)
    }

    /// A valid single-rate meter: the representable CIR closest to
    /// `rate_per_sec` (the pair minimising the relative error, within 0.5%
    /// for rates from 60 to 2.5 × 10^11 per second; 0 gives mantissa 0),
    /// the smallest representable CBS ≥ `burst`, no excess bucket.
    pub fn single_rate(rate_per_sec: u64, burst: u64, mode: MeterMode) -> MeterParams {
        MeterParams {
            valid: true,
            bucket_overflow: false,
            start_color: 0,
            both_buckets_on_green: false,
            mode,
            cbs: burst_pair(burst),
            cir: rate_pair(rate_per_sec),
            ebs: (0, 0),
            eir: (0, 0),
        }
    }
}

/// Fractional bits of the token counts.
const FRAC: u32 = 32;

/// One token bucket in units of 2^-32 byte (or packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    tokens: u128,
    cap: u128,
    /// Units added per nanosecond: m × 2^(32 − e).
    per_ns: u128,
}

impl Bucket {
    fn new(rate: (u8, u8), burst: (u8, u8)) -> Self {
        let cap = u128::from(self::burst(burst)) << FRAC;
        let (e, m) = rate;
        Bucket {
            tokens: cap,
            cap,
            per_ns: u128::from(m) << (FRAC - u32::from(e & 0x1f)),
        }
    }

    /// Adds `units`, capped; returns what did not fit.
    fn fill(&mut self, units: u128) -> u128 {
        let t = self.tokens.saturating_add(units);
        self.tokens = t.min(self.cap);
        t - self.tokens
    }
}

/// Two-rate token-bucket colouring state of one meter (colour-blind), as
/// the device runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterState {
    c: Bucket,
    e: Bucket,
    last_ns: u64,
    packets: bool,
    bucket_overflow: bool,
    both_buckets_on_green: bool,
}

impl MeterState {
    /// A meter created at `now_ns` with both buckets full. A burst
    /// exponent above 31 (which [`MeterParams::decode`] refuses) counts as
    /// 31; rate exponents are read modulo 32, as encoded.
    pub fn new(p: &MeterParams, now_ns: u64) -> Self {
        MeterState {
            c: Bucket::new(p.cir, p.cbs),
            e: Bucket::new(p.eir, p.ebs),
            last_ns: now_ns,
            packets: p.mode == MeterMode::Packets,
            bucket_overflow: p.bucket_overflow,
            both_buckets_on_green: p.both_buckets_on_green,
        }
    }

    /// Colours a packet of `len_bytes` arriving at `now_ns`. The buckets
    /// first refill for the time since the last call (none if `now_ns` is
    /// not later: time never goes backwards): C by CIR up to CBS, E by EIR
    /// up to EBS, plus, with `bucket_overflow`, what overflowed C. The cost
    /// is the length (bytes mode) or 1 (packets mode): green if C holds it
    /// (taken from C, and from E too, saturating, with
    /// `both_buckets_on_green`), else yellow if E holds it (taken from E),
    /// else red (nothing taken).
    pub fn mark(&mut self, now_ns: u64, len_bytes: u32) -> Color {
        let elapsed = u128::from(now_ns.saturating_sub(self.last_ns));
        self.last_ns = self.last_ns.max(now_ns);
        if elapsed > 0 {
            let spill = self.c.fill(elapsed.saturating_mul(self.c.per_ns));
            let extra = if self.bucket_overflow { spill } else { 0 };
            self.e
                .fill(elapsed.saturating_mul(self.e.per_ns).saturating_add(extra));
        }
        let units = if self.packets { 1 } else { len_bytes };
        let cost = u128::from(units) << FRAC;
        if self.c.tokens >= cost {
            self.c.tokens -= cost;
            if self.both_buckets_on_green {
                self.e.tokens = self.e.tokens.saturating_sub(cost);
            }
            Color::Green
        } else if self.e.tokens >= cost {
            self.e.tokens -= cost;
            Color::Yellow
        } else {
            Color::Red
        }
    }

    /// Tokens in the committed bucket (bytes or packets, rounded down).
    pub fn committed_tokens(&self) -> u64 {
        u64::try_from(self.c.tokens >> FRAC).unwrap_or(u64::MAX)
    }

    /// Tokens in the excess bucket (bytes or packets, rounded down).
    pub fn excess_tokens(&self) -> u64 {
        u64::try_from(self.e.tokens >> FRAC).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
#[path = "tests/meter.rs"]
mod tests;

//! The PRM commands the backend sends itself, through DEVX: flow counter
//! bulks (ALLOC and QUERY; DEALLOC_FLOW_COUNTER, 0x93a at rdma-core line
//! 130, is the kernel's, derived from the ALLOC when the DEVX object is
//! destroyed) and the general device
//! capabilities (QUERY_HCA_CAP). Pure byte building and parsing, tested
//! byte for byte against the PRM layouts.
//!
//! Layouts (bit offsets as `mlx5_ifc.h` names them, `reserved_at_XX`):
//! - `mlx5_ifc_alloc_flow_counter_in_bits`: opcode [0x00,16), uid [0x10,16),
//!   op_mod [0x30,16), `flow_counter_bulk_log_size` [0x73,5),
//!   `flow_counter_bulk` [0x78,8]; 16 bytes. rdma-core 691953d8
//!   `providers/mlx5/mlx5_ifc.h` line 3294 has the command without the two
//!   bulk fields (`reserved_at_40[0x40]`); Linux
//!   `include/linux/mlx5/mlx5_ifc.h` adds them (`reserved_at_40[0x33]`,
//!   then the log size, then the legacy byte, which counts units of 128).
//! - `mlx5_ifc_alloc_flow_counter_out_bits` (rdma-core line 3304): status
//!   [0x00,8), syndrome [0x20,32), flow_counter_id [0x40,32); 16 bytes.
//! - `mlx5_ifc_query_flow_counter_in_bits` (Linux): opcode [0x00,16),
//!   op_mod [0x30,16), clear [0xc0,1), num_of_counters (30 bits ending at
//!   0xdf; 16 bits [0xd0,16) in older headers, the same bytes for counts
//!   under 65,536), flow_counter_id [0xe0,32); 32 bytes.
//! - `mlx5_ifc_query_flow_counter_out_bits`: status, syndrome, then from
//!   byte 16 one `mlx5_ifc_traffic_counter_bits` per counter: packets
//!   [0x00,64), octets [0x40,64), big-endian.
//! - `mlx5_ifc_query_hca_cap_in_bits` (rdma-core line 1553): opcode, op_mod
//!   [0x30,16) = capability type << 1 | current (1); 16 bytes. Out: 16
//!   bytes, then the capability (4,096 bytes); in `mlx5_ifc_cmd_hca_cap_bits`
//!   (rdma-core line 849) `log_max_flow_counter_bulk` is [0x348,8) (line
//!   1134, after `reserved_at_347`).

use offload::dr::CounterValue;
use thiserror::Error;

/// `MLX5_CMD_OP_QUERY_HCA_CAP` (rdma-core `mlx5_ifc.h` line 44).
pub const QUERY_HCA_CAP: u16 = 0x100;
/// `MLX5_CMD_OP_ALLOC_FLOW_COUNTER`.
pub const ALLOC_FLOW_COUNTER: u16 = 0x939;
/// `MLX5_CMD_OP_QUERY_FLOW_COUNTER`.
pub const QUERY_FLOW_COUNTER: u16 = 0x93b;

/// Most counters one QUERY_FLOW_COUNTER returns: the output (16 bytes plus
/// 16 per counter) must fit the command interface's 16-bit length.
pub const MAX_QUERY_COUNTERS: u32 = 4094;

/// Bytes of the ALLOC_FLOW_COUNTER input and output.
pub const ALLOC_FLOW_COUNTER_LEN: usize = 16;
/// Bytes of the QUERY_FLOW_COUNTER input.
pub const QUERY_FLOW_COUNTER_IN_LEN: usize = 32;
/// Bytes of a command output before its payload.
pub const OUT_HEADER_LEN: usize = 16;
/// Bytes of one capability page.
pub const HCA_CAP_LEN: usize = 4096;

/// A command the device answered with a bad status, or an output too
/// short.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CmdError {
    #[error("command {opcode:#x} failed: status {status:#x}, syndrome {syndrome:#x}")]
    Status {
        opcode: u16,
        status: u8,
        syndrome: u32,
    },
    #[error("command {opcode:#x}: output of {len} bytes, expected {want}")]
    Short {
        opcode: u16,
        len: usize,
        want: usize,
    },
    #[error("a bulk of 2^{0} counters: the log size is at most 31 and the legacy size is whole units of 128 (2^7..2^14)")]
    BulkSize(u8),
}

/// How a bulk's size is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkSize {
    /// `flow_counter_bulk_log_size`: 2^n counters (devices with the log
    /// capability).
    Log(u8),
    /// `flow_counter_bulk`: n × 128 counters (older firmware).
    Units128(u8),
}

impl BulkSize {
    /// The encoding for 2^`log` counters on a device whose
    /// `log_max_flow_counter_bulk` is `cap_log` (0: no log-size support).
    pub fn for_log(log: u8, cap_log: u8) -> Result<BulkSize, CmdError> {
        if cap_log > 0 && log <= cap_log && log <= 31 {
            return Ok(BulkSize::Log(log));
        }
        if (7..=14).contains(&log) {
            return Ok(BulkSize::Units128(1 << (log - 7)));
        }
        Err(CmdError::BulkSize(log))
    }

    /// Counters in the bulk.
    pub fn counters(self) -> u64 {
        match self {
            BulkSize::Log(n) => 1 << n,
            BulkSize::Units128(n) => 128 * u64::from(n),
        }
    }
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Checks a command output's length and status.
pub fn check_out(opcode: u16, out: &[u8], want: usize) -> Result<(), CmdError> {
    if out.len() < want.max(8) {
        return Err(CmdError::Short {
            opcode,
            len: out.len(),
            want: want.max(8),
        });
    }
    if out[0] != 0 {
        return Err(CmdError::Status {
            opcode,
            status: out[0],
            syndrome: get_u32(out, 4),
        });
    }
    Ok(())
}

/// ALLOC_FLOW_COUNTER input for a bulk of `size`.
pub fn alloc_flow_counter_in(size: BulkSize) -> [u8; ALLOC_FLOW_COUNTER_LEN] {
    let mut b = [0u8; ALLOC_FLOW_COUNTER_LEN];
    put_u16(&mut b, 0, ALLOC_FLOW_COUNTER);
    match size {
        // Bits 0x73..0x77: the low five bits of byte 14.
        BulkSize::Log(n) => b[14] = n & 0x1f,
        // Bits 0x78..0x7f: byte 15.
        BulkSize::Units128(n) => b[15] = n,
    }
    b
}

/// The first counter id of an allocated bulk.
pub fn alloc_flow_counter_out(out: &[u8]) -> Result<u32, CmdError> {
    check_out(ALLOC_FLOW_COUNTER, out, ALLOC_FLOW_COUNTER_LEN)?;
    Ok(get_u32(out, 8))
}

/// QUERY_FLOW_COUNTER input for `count` counters from `first` (at most
/// [`MAX_QUERY_COUNTERS`]; 0 means just `first`).
pub fn query_flow_counter_in(first: u32, count: u32) -> [u8; QUERY_FLOW_COUNTER_IN_LEN] {
    let mut b = [0u8; QUERY_FLOW_COUNTER_IN_LEN];
    put_u16(&mut b, 0, QUERY_FLOW_COUNTER);
    // clear (bit 0xc0) and dump_to_memory (0xc1) stay 0.
    put_u32(&mut b, 24, count.min(MAX_QUERY_COUNTERS) & 0x3fff_ffff);
    put_u32(&mut b, 28, first);
    b
}

/// Bytes of a QUERY_FLOW_COUNTER output for `count` counters.
pub fn query_flow_counter_out_len(count: u32) -> usize {
    OUT_HEADER_LEN + 16 * count.max(1) as usize
}

/// The counters of a QUERY_FLOW_COUNTER output, appended to `into`.
pub fn query_flow_counter_out(
    out: &[u8],
    count: u32,
    into: &mut Vec<CounterValue>,
) -> Result<(), CmdError> {
    check_out(QUERY_FLOW_COUNTER, out, query_flow_counter_out_len(count))?;
    for i in 0..count.max(1) as usize {
        let at = OUT_HEADER_LEN + 16 * i;
        into.push(CounterValue {
            packets: get_u64(out, at),
            bytes: get_u64(out, at + 8),
        });
    }
    Ok(())
}

/// The `(first, count)` queries that read a bulk of `size` counters
/// starting at `base`, each within [`MAX_QUERY_COUNTERS`].
pub fn query_chunks(base: u32, size: u64) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(u64::from(MAX_QUERY_COUNTERS));
        v.push((base.wrapping_add(done as u32), n as u32));
        done += n;
    }
    v
}

/// `MLX5_CAP_GENERAL`.
pub const CAP_GENERAL: u16 = 0;

/// QUERY_HCA_CAP input for the current values of capability `cap`.
pub fn query_hca_cap_in(cap: u16) -> [u8; 16] {
    let mut b = [0u8; 16];
    put_u16(&mut b, 0, QUERY_HCA_CAP);
    put_u16(&mut b, 6, cap << 1 | 1);
    b
}

/// Bytes of a QUERY_HCA_CAP output.
pub const QUERY_HCA_CAP_OUT_LEN: usize = OUT_HEADER_LEN + HCA_CAP_LEN;

/// `log_max_flow_counter_bulk` of a general-capability QUERY_HCA_CAP
/// output: bit 0x348 of the capability, byte 0x69.
pub fn log_max_flow_counter_bulk(out: &[u8]) -> Result<u8, CmdError> {
    check_out(QUERY_HCA_CAP, out, OUT_HEADER_LEN + 0x6a)?;
    Ok(out[OUT_HEADER_LEN + 0x69])
}

#[cfg(test)]
#[path = "tests/cmd.rs"]
mod tests;

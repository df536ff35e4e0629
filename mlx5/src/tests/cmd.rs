//! Byte vectors written out from the `mlx5_ifc.h` layouts cited in the
//! module: bit offset / 8 = byte, MSB first.

use super::*;

#[test]
fn alloc_flow_counter_in_with_a_log_size() {
    // opcode 0x0939 at bytes 0..2; uid, op_mod 0; log size 2^15 in the
    // low five bits of byte 14 (bits 0x73..0x77); legacy byte 15 zero.
    let want: [u8; 16] = [
        0x09, 0x39, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 15, 0,
    ];
    assert_eq!(alloc_flow_counter_in(BulkSize::Log(15)), want);
    // Only five bits: 2^33 cannot be asked for.
    assert_eq!(alloc_flow_counter_in(BulkSize::Log(0x21))[14], 0x01);
}

#[test]
fn alloc_flow_counter_in_with_the_legacy_units_of_128() {
    let b = alloc_flow_counter_in(BulkSize::Units128(4));
    assert_eq!(&b[..2], &[0x09, 0x39]);
    assert_eq!((b[14], b[15]), (0, 4), "512 counters: 4 units of 128");
    assert_eq!(BulkSize::Units128(4).counters(), 512);
}

#[test]
fn bulk_sizes_follow_the_capability() {
    assert_eq!(BulkSize::for_log(12, 23), Ok(BulkSize::Log(12)));
    // No log capability: units of 128.
    assert_eq!(BulkSize::for_log(12, 0), Ok(BulkSize::Units128(32)));
    assert_eq!(BulkSize::for_log(12, 0).map(BulkSize::counters), Ok(4096));
    // Above the capability, and below one unit: the legacy form or nothing.
    assert_eq!(BulkSize::for_log(14, 10), Ok(BulkSize::Units128(128)));
    assert_eq!(BulkSize::for_log(3, 0), Err(CmdError::BulkSize(3)));
    assert_eq!(BulkSize::for_log(16, 0), Err(CmdError::BulkSize(16)));
}

#[test]
fn alloc_flow_counter_out_gives_the_first_id_or_the_status() {
    let mut out = [0u8; 16];
    out[8..12].copy_from_slice(&0x0080_0040u32.to_be_bytes());
    assert_eq!(alloc_flow_counter_out(&out), Ok(0x0080_0040));
    out[0] = 0x05; // BAD_RES_STATE
    out[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    assert_eq!(
        alloc_flow_counter_out(&out),
        Err(CmdError::Status {
            opcode: ALLOC_FLOW_COUNTER,
            status: 5,
            syndrome: 0x1234_5678
        })
    );
    assert!(matches!(
        alloc_flow_counter_out(&out[..10]),
        Err(CmdError::Short { want: 16, .. })
    ));
}

#[test]
fn query_flow_counter_in_names_the_first_counter_and_how_many() {
    // opcode at 0..2; op_mod 0; mkey/address 0; clear (bit 0xc0) 0;
    // num_of_counters in the low bits of bytes 24..28; flow_counter_id at
    // bytes 28..32.
    let want: [u8; 32] = [
        0x09, 0x3b, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0x0f, 0xfe, 0x00, 0x80, 0x00, 0x40,
    ];
    assert_eq!(query_flow_counter_in(0x0080_0040, 4094), want);
    // Never more than one output's worth.
    assert_eq!(
        &query_flow_counter_in(1, 100_000)[24..28],
        &[0, 0, 0x0f, 0xfe]
    );
    assert_eq!(query_flow_counter_out_len(4094), 16 + 16 * 4094);
    assert!(query_flow_counter_out_len(MAX_QUERY_COUNTERS) <= 0xffff);
}

#[test]
fn query_flow_counter_out_reads_packets_then_octets_per_counter() {
    let mut out = vec![0u8; query_flow_counter_out_len(2)];
    out[16..24].copy_from_slice(&7u64.to_be_bytes());
    out[24..32].copy_from_slice(&700u64.to_be_bytes());
    out[32..40].copy_from_slice(&(1u64 << 40).to_be_bytes());
    out[40..48].copy_from_slice(&u64::MAX.to_be_bytes());
    let mut v = Vec::new();
    query_flow_counter_out(&out, 2, &mut v).expect("parses");
    assert_eq!(
        v,
        vec![
            CounterValue {
                packets: 7,
                bytes: 700
            },
            CounterValue {
                packets: 1 << 40,
                bytes: u64::MAX
            }
        ]
    );
    assert!(query_flow_counter_out(&out[..40], 2, &mut v).is_err());
}

#[test]
fn a_bulk_is_read_in_chunks_of_at_most_4094() {
    assert_eq!(query_chunks(100, 4094), vec![(100, 4094)]);
    assert_eq!(
        query_chunks(0x1000, 10_000),
        vec![(0x1000, 4094), (0x1000 + 4094, 4094), (0x1000 + 8188, 1812)]
    );
    let total: u32 = query_chunks(0, 1 << 20).iter().map(|c| c.1).sum();
    assert_eq!(total, 1 << 20);
    assert!(query_chunks(0, 0).is_empty());
}

#[test]
fn query_hca_cap_asks_for_the_current_general_capabilities() {
    assert_eq!(
        query_hca_cap_in(CAP_GENERAL),
        [0x01, 0x00, 0, 0, 0, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    let mut out = vec![0u8; QUERY_HCA_CAP_OUT_LEN];
    // log_max_flow_counter_bulk: capability bit 0x348 = byte 0x69.
    out[16 + 0x69] = 23;
    out[16 + 0x68] = 0xff; // the bits before it are other fields
    assert_eq!(log_max_flow_counter_bulk(&out), Ok(23));
}

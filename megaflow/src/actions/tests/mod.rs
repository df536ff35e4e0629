//! Tests of action execution.
//!
//! Expected frames are written out byte by byte, checksums included (they
//! were computed independently of this crate), and every checksum of every
//! frame is also recomputed from scratch by [`check_checksums`], so each test
//! shows that the incremental updates equal a full recomputation.

use super::*;
use crate::extract::extract_into;
use crate::key::FlowKey;
use frames::*;

mod frames;
mod hash;
mod l2;
mod l3;
mod l4;
mod output;
mod props;
mod sample_meter;

// ---------------------------------------------------------------------------
// Checksums recomputed from scratch.

fn sum16(data: &[u8]) -> u64 {
    data.chunks(2)
        .map(|c| match c {
            [a, b] => u64::from(u16::from_be_bytes([*a, *b])),
            [a] => u64::from(*a) << 8,
            _ => 0,
        })
        .sum()
}

/// Internet checksum of `pseudo` followed by `data`, the two bytes of
/// `data` at `at` (the checksum field) counted as zero.
fn full_csum(pseudo: &[u8], data: &[u8], at: usize) -> u16 {
    let mut d = data.to_vec();
    d[at] = 0;
    d[at + 1] = 0;
    let mut s = sum16(pseudo) + sum16(&d);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Bit-at-a-time CRC32c, independent of the table-driven one.
fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn parse(pkt: &[u8]) -> (FlowKey, Layout) {
    let mut key = FlowKey::ZERO;
    let ex = extract_into(1, pkt, &mut key);
    (key, ex.layout)
}

/// Recomputes every checksum of `pkt` (IPv4 header, TCP, UDP, ICMP,
/// ICMPv6, SCTP) and compares it with the stored one.
fn check_checksums(pkt: &[u8]) -> Result<(), String> {
    let (key, l) = parse(pkt);
    if l.l3 == NO_OFFSET {
        return Ok(());
    }
    let l3 = usize::from(l.l3);
    let (mut pseudo, v6) = match key.eth_type() as u16 {
        ETH_TYPE_IPV4 => {
            let ihl = usize::from(pkt[l3] & 0x0f) * 4;
            let h = &pkt[l3..l3 + ihl];
            let (got, want) = (be16(&h[10..]), full_csum(&[], h, 10));
            if got != want {
                return Err(format!("IPv4 checksum {got:#06x}, recomputed {want:#06x}"));
            }
            (pkt[l3 + 12..l3 + 20].to_vec(), false)
        }
        ETH_TYPE_IPV6 => (pkt[l3 + 8..l3 + 40].to_vec(), true),
        _ => return Ok(()),
    };
    if l.l4 == NO_OFFSET {
        return Ok(());
    }
    let seg = &pkt[usize::from(l.l4)..usize::from(l.l3_end)];
    let proto = key.ip_proto() as u8;
    if v6 {
        pseudo.extend((seg.len() as u32).to_be_bytes());
        pseudo.extend([0, 0, 0, proto]);
    } else {
        pseudo.extend([0, proto]);
        pseudo.extend((seg.len() as u16).to_be_bytes());
    }
    let at = match proto {
        IP_PROTO_TCP => 16,
        IP_PROTO_UDP => 6,
        IP_PROTO_ICMPV6 if v6 => 2,
        1 if !v6 => {
            pseudo.clear();
            2
        }
        IP_PROTO_SCTP => {
            let got = u32::from_le_bytes([seg[8], seg[9], seg[10], seg[11]]);
            let mut d = seg.to_vec();
            d[8..12].fill(0);
            let want = crc32c_bitwise(&d);
            if got != want {
                return Err(format!("SCTP CRC {got:#010x}, recomputed {want:#010x}"));
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    let got = be16(&seg[at..]);
    if proto == IP_PROTO_UDP && got == 0 {
        return Ok(());
    }
    let mut want = full_csum(&pseudo, seg, at);
    if proto == IP_PROTO_UDP && want == 0 {
        want = 0xffff;
    }
    if got != want {
        return Err(format!(
            "L4 ({proto}) checksum {got:#06x}, recomputed {want:#06x}"
        ));
    }
    Ok(())
}

/// Runs `actions` on a copy of `pkt` with its extracted layout.
fn run_on(
    actions: &[DpAction],
    pkt: &[u8],
    sink: &mut CollectSink,
) -> (Vec<u8>, Layout, ExecOutcome) {
    let mut buf = pkt.to_vec();
    let (_, mut layout) = parse(pkt);
    let out = execute(actions, &mut buf, &mut layout, sink);
    (buf, layout, out)
}

/// Runs `actions` then `output:1` on `pkt` and returns the one output.
fn output_of(actions: &[DpAction], pkt: &[u8]) -> (Vec<u8>, ExecOutcome) {
    let mut all = actions.to_vec();
    all.push(DpAction::Output(PortNo(1)));
    let mut sink = CollectSink::new();
    let (buf, layout, out) = run_on(&all, pkt, &mut sink);
    assert_eq!(sink.outputs.len(), 1);
    assert_eq!(sink.outputs[0], (PortNo(1), buf.clone()));
    assert_eq!(layout, parse(&buf).1, "layout kept in step with the bytes");
    (buf, out)
}

fn ip4(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}

fn ip6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}

// ---------------------------------------------------------------------------
// Checksum tests.

#[test]
fn hand_built_frames_have_valid_checksums() {
    for pkt in [
        P1_IN,
        P1_OUT,
        P1_PORT2,
        P1_PORT3,
        P1_DSCP,
        P1_TTL2,
        P1_TTL1,
        P2_IN,
        P2_OUT,
        P3_IN,
        P3_OUT,
        P4_OUT,
        P8_PUSH_OUT,
        P8_POP_IN,
        P8_POP_OUT,
        P5_IN,
        P5_OUT,
        P6_IN,
        P6_OUT,
        P6_DSCP,
        P7_IN,
        P7_OUT,
        SCTP_IN,
        SCTP_OUT,
    ] {
        check_checksums(pkt).unwrap();
        let (key, l) = parse(pkt);
        assert_ne!(l.l4, NO_OFFSET, "{key:?}");
    }
}

#[test]
fn incremental_update_matches_rfc1624_examples() {
    // RFC 1624 section 4: HC 0xdd2f, m 0x5555 -> 0x3285 gives 0x0000.
    assert_eq!(csum_update(0xdd2f, &[0x55, 0x55], &[0x32, 0x85]), 0x0000);
    // No change leaves the checksum as it was.
    assert_eq!(csum_update(0x1234, &[1, 2, 3, 4], &[1, 2, 3, 4]), 0x1234);
}

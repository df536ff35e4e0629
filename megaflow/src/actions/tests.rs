//! Tests of action execution.
//!
//! Expected frames are written out byte by byte, checksums included (they
//! were computed independently of this crate), and every checksum of every
//! frame is also recomputed from scratch by [`check_checksums`], so each test
//! shows that the incremental updates equal a full recomputation.

use super::*;
use crate::extract::extract_into;
use crate::key::FlowKey;
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Hand-built frames. Ethernet 02:00:00:00:00:01 -> 02:00:00:00:00:02.

#[rustfmt::skip]
const P1_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // eth dst
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // eth src
    0x08, 0x00,                         // IPv4
    0x45, 0x00, 0x00, 0x2c,             // ver/ihl, tos, total length 44
    0x1c, 0x46, 0x40, 0x00,             // id, DF
    0x40, 0x06, 0x9c, 0x6d,             // ttl 64, TCP, checksum
    0xc0, 0xa8, 0x00, 0x01,             // src 192.168.0.1
    0xc0, 0xa8, 0x00, 0xc7,             // dst 192.168.0.199
    0x04, 0xd2, 0x00, 0x50,             // ports 1234 -> 80
    0x00, 0x00, 0x00, 0x01,             // seq
    0x00, 0x00, 0x00, 0x00,             // ack
    0x50, 0x02, 0x72, 0x10,             // offset 5, SYN, window
    0x2d, 0x08, 0x00, 0x00,             // checksum, urgent
    0x68, 0x69, 0x21, 0x21,             // "hi!!"
];

/// P1 after set(ipv4_src=10.1.2.3),set(tp_dst=8080).
#[rustfmt::skip]
const P1_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x2c,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x06, 0x51, 0x13,             // new header checksum
    0x0a, 0x01, 0x02, 0x03,             // src 10.1.2.3
    0xc0, 0xa8, 0x00, 0xc7,
    0x04, 0xd2, 0x1f, 0x90,             // ports 1234 -> 8080
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0xc2, 0x6d, 0x00, 0x00,             // new TCP checksum
    0x68, 0x69, 0x21, 0x21,
];

/// P1 with eth src 02:00:00:00:00:aa.
#[rustfmt::skip]
const P1_PORT2: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0xaa, // eth src
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x2c,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x06, 0x9c, 0x6d,
    0xc0, 0xa8, 0x00, 0x01,
    0xc0, 0xa8, 0x00, 0xc7,
    0x04, 0xd2, 0x00, 0x50,
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x2d, 0x08, 0x00, 0x00,
    0x68, 0x69, 0x21, 0x21,
];

/// P1_PORT2 then set(ipv4_dst=192.168.0.42),set(tp_src=40000).
#[rustfmt::skip]
const P1_PORT3: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0xaa,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x2c,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x06, 0x9d, 0x0a,             // header checksum
    0xc0, 0xa8, 0x00, 0x01,
    0xc0, 0xa8, 0x00, 0x2a,             // dst 192.168.0.42
    0x9c, 0x40, 0x00, 0x50,             // ports 40000 -> 80
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x96, 0x36, 0x00, 0x00,             // TCP checksum
    0x68, 0x69, 0x21, 0x21,
];

/// P1 after set(ip_dscp=46),set(ip_ecn=1): TOS 0xb9.
#[rustfmt::skip]
const P1_DSCP: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0xb9, 0x00, 0x2c,             // TOS 0xb9
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x06, 0x9b, 0xb4,             // header checksum
    0xc0, 0xa8, 0x00, 0x01,
    0xc0, 0xa8, 0x00, 0xc7,
    0x04, 0xd2, 0x00, 0x50,
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x2d, 0x08, 0x00, 0x00,             // TCP checksum unchanged
    0x68, 0x69, 0x21, 0x21,
];

/// P1 with TTL 2.
#[rustfmt::skip]
const P1_TTL2: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x2c,
    0x1c, 0x46, 0x40, 0x00,
    0x02, 0x06, 0xda, 0x6d,             // ttl 2
    0xc0, 0xa8, 0x00, 0x01,
    0xc0, 0xa8, 0x00, 0xc7,
    0x04, 0xd2, 0x00, 0x50,
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x2d, 0x08, 0x00, 0x00,
    0x68, 0x69, 0x21, 0x21,
];

/// P1 with TTL 1.
#[rustfmt::skip]
const P1_TTL1: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x2c,
    0x1c, 0x46, 0x40, 0x00,
    0x01, 0x06, 0xdb, 0x6d,             // ttl 1
    0xc0, 0xa8, 0x00, 0x01,
    0xc0, 0xa8, 0x00, 0xc7,
    0x04, 0xd2, 0x00, 0x50,
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x2d, 0x08, 0x00, 0x00,
    0x68, 0x69, 0x21, 0x21,
];

#[rustfmt::skip]
const P2_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,             // total length 32
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x85,             // ttl 64, UDP, checksum
    0x0a, 0x00, 0x00, 0x01,             // src 10.0.0.1
    0x0a, 0x00, 0x00, 0x02,             // dst 10.0.0.2
    0x30, 0x39, 0x00, 0x35,             // ports 12345 -> 53
    0x00, 0x0c, 0xe3, 0xb7,             // length 12, checksum
    0x64, 0x6e, 0x73, 0x3f,             // "dns?"
];

/// P2 after set(ipv4_dst=172.16.0.9),set(tp_src=5353),set(ip_ttl=7).
#[rustfmt::skip]
const P2_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x07, 0x11, 0xa1, 0x6d,             // ttl 7, header checksum
    0x0a, 0x00, 0x00, 0x01,
    0xac, 0x10, 0x00, 0x09,             // dst 172.16.0.9
    0x14, 0xe9, 0x00, 0x35,             // ports 5353 -> 53
    0x00, 0x0c, 0x5c, 0xf0,             // UDP checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P2 without UDP checksum.
#[rustfmt::skip]
const P3_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x85,
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x00, 0x35,
    0x00, 0x0c, 0x00, 0x00,             // no checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P3 after set(ipv4_src=10.9.8.7),set(tp_dst=4789): UDP checksum stays 0.
#[rustfmt::skip]
const P3_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x02, 0x76,             // header checksum
    0x0a, 0x09, 0x08, 0x07,             // src 10.9.8.7
    0x0a, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x12, 0xb5,             // ports 12345 -> 4789
    0x00, 0x0c, 0x00, 0x00,             // still no checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P2 after set(tp_dst=58348), for which the UDP checksum computes to 0
/// and is sent as 0xffff.
#[rustfmt::skip]
const P4_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x85,
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x30, 0x39, 0xe3, 0xec,             // ports 12345 -> 58348
    0x00, 0x0c, 0xff, 0xff,             // checksum 0 sent as 0xffff
    0x64, 0x6e, 0x73, 0x3f,
];

/// P2 after push_vlan(tpid=0x8100,tci=0x2064),set(ipv4_dst=10.0.0.3).
#[rustfmt::skip]
const P8_PUSH_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x81, 0x00, 0x20, 0x64,             // tag: PCP 1, VID 100
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x84,             // header checksum
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x03,             // dst 10.0.0.3
    0x30, 0x39, 0x00, 0x35,
    0x00, 0x0c, 0xe3, 0xb6,             // UDP checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P2 with an 802.1ad tag, VID 100.
#[rustfmt::skip]
const P8_POP_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x88, 0xa8, 0x00, 0x64,             // tag
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x85,
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x00, 0x35,
    0x00, 0x0c, 0xe3, 0xb7,
    0x64, 0x6e, 0x73, 0x3f,
];

/// P8_POP_IN after pop_vlan,set(tp_dst=67).
#[rustfmt::skip]
const P8_POP_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x20,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x11, 0x0a, 0x85,
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x00, 0x43,             // ports 12345 -> 67
    0x00, 0x0c, 0xe3, 0xa9,             // UDP checksum
    0x64, 0x6e, 0x73, 0x3f,
];

#[rustfmt::skip]
const P5_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,                         // IPv6
    0x60, 0x01, 0x23, 0x45,             // version, tc 0, flow label 0x12345
    0x00, 0x18, 0x06, 0x40,             // payload 24, TCP, hop limit 64
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // src 2001:db8::1
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // dst 2001:db8::2
    0x04, 0xd2, 0x00, 0x50,             // ports 1234 -> 80
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x53, 0xac, 0x00, 0x00,             // TCP checksum
    0x68, 0x69, 0x21, 0x21,
];

/// P5 after set(ipv6_src=2001:db8:ffff::42),set(tp_src=443),dec_ttl.
#[rustfmt::skip]
const P5_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x60, 0x01, 0x23, 0x45,
    0x00, 0x18, 0x06, 0x3f,             // hop limit 63
    0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42, // src 2001:db8:ffff::42
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x01, 0xbb, 0x00, 0x50,             // ports 443 -> 80
    0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x72, 0x10,
    0x56, 0x82, 0x00, 0x00,             // TCP checksum
    0x68, 0x69, 0x21, 0x21,
];

#[rustfmt::skip]
const P6_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x60, 0x01, 0x23, 0x45,
    0x00, 0x0c, 0x11, 0x40,             // payload 12, UDP, hop limit 64
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x00, 0x35,             // ports 12345 -> 53
    0x00, 0x0c, 0x9c, 0x45,             // length, checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P6 after set(ipv6_dst=fe80::1234),set(tp_dst=9999).
#[rustfmt::skip]
const P6_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x60, 0x01, 0x23, 0x45,
    0x00, 0x0c, 0x11, 0x40,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, // dst fe80::1234
    0x30, 0x39, 0x27, 0x0f,             // ports 12345 -> 9999
    0x00, 0x0c, 0x92, 0x71,             // UDP checksum
    0x64, 0x6e, 0x73, 0x3f,
];

/// P6 after set(ip_dscp=46),set(ip_ecn=1): traffic class 0xb9.
#[rustfmt::skip]
const P6_DSCP: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x6b, 0x91, 0x23, 0x45,             // version 6, tc 0xb9, flow label
    0x00, 0x0c, 0x11, 0x40,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x30, 0x39, 0x00, 0x35,
    0x00, 0x0c, 0x9c, 0x45,
    0x64, 0x6e, 0x73, 0x3f,
];

/// ICMPv6 echo request 2001:db8::1 -> 2001:db8::2.
#[rustfmt::skip]
const P7_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x60, 0x01, 0x23, 0x45,
    0x00, 0x08, 0x3a, 0x40,             // payload 8, ICMPv6, hop limit 64
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x80, 0x00, 0x24, 0x40,             // echo request, checksum
    0x00, 0x07, 0x00, 0x01,             // id, seq
];

/// P7 after set(ipv6_src=fd00::a),set(ipv6_dst=fd00::b).
#[rustfmt::skip]
const P7_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x86, 0xdd,
    0x60, 0x01, 0x23, 0x45,
    0x00, 0x08, 0x3a, 0x40,
    0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, // src fd00::a
    0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, // dst fd00::b
    0x80, 0x00, 0x85, 0x9e,             // ICMPv6 checksum
    0x00, 0x07, 0x00, 0x01,
];

/// SCTP 5000 -> 6000 over IPv4, CRC32c stored little endian.
#[rustfmt::skip]
const SCTP_IN: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x24,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x84, 0x0a, 0x0e,             // SCTP
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x13, 0x88, 0x17, 0x70,             // ports 5000 -> 6000
    0xde, 0xad, 0xbe, 0xef,             // verification tag
    0xad, 0x3f, 0x1f, 0x3b,             // CRC32c
    0x00, 0x00, 0x00, 0x04,
];

/// SCTP_IN after set(tp_src=5001),set(tp_dst=36412).
#[rustfmt::skip]
const SCTP_OUT: &[u8] = &[
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x00,
    0x45, 0x00, 0x00, 0x24,
    0x1c, 0x46, 0x40, 0x00,
    0x40, 0x84, 0x0a, 0x0e,
    0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02,
    0x13, 0x89, 0x8e, 0x3c,             // ports 5001 -> 36412
    0xde, 0xad, 0xbe, 0xef,
    0x66, 0x2f, 0xaa, 0x27,             // CRC32c
    0x00, 0x00, 0x00, 0x04,
];

/// ARP request 10.0.0.1 -> 10.0.0.2.
#[rustfmt::skip]
const ARP: &[u8] = &[
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x06,
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
];

const BASES: &[&[u8]] = &[
    P1_IN, P1_TTL1, P2_IN, P3_IN, P8_POP_IN, P5_IN, P6_IN, P7_IN, SCTP_IN, ARP,
];

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
// Hand-built frames.

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
fn ipv4_tcp_set_address_and_port() {
    let (out, o) = output_of(
        &[
            DpAction::SetIpv4Src(ip4("10.1.2.3")),
            DpAction::SetTpDst(8080),
        ],
        P1_IN,
    );
    assert_eq!(out, P1_OUT);
    check_checksums(&out).unwrap();
    assert_eq!(
        o,
        ExecOutcome {
            outputs: 1,
            userspace: 0,
            skipped: 0,
            dropped: None
        }
    );
}

#[test]
fn ipv4_udp_set_address_port_and_ttl() {
    let acts = [
        DpAction::SetIpv4Dst(ip4("172.16.0.9")),
        DpAction::SetTpSrc(5353),
        DpAction::SetTtl(7),
    ];
    let (out, _) = output_of(&acts, P2_IN);
    assert_eq!(out, P2_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv4_udp_zero_checksum_stays_zero() {
    let acts = [
        DpAction::SetIpv4Src(ip4("10.9.8.7")),
        DpAction::SetTpDst(4789),
    ];
    let (out, _) = output_of(&acts, P3_IN);
    assert_eq!(out, P3_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn udp_checksum_computing_to_zero_is_sent_as_ffff() {
    let (out, _) = output_of(&[DpAction::SetTpDst(58348)], P2_IN);
    assert_eq!(out, P4_OUT);
    check_checksums(&out).unwrap();
    // And back: 0xffff is a valid stored form of zero to update from.
    let (back, _) = output_of(&[DpAction::SetTpDst(53)], &out);
    assert_eq!(back, P2_IN);
}

#[test]
fn ipv4_tos_dscp_and_ecn() {
    let (out, _) = output_of(&[DpAction::SetDscp(46), DpAction::SetEcn(1)], P1_IN);
    assert_eq!(out, P1_DSCP);
    check_checksums(&out).unwrap();
    // Out-of-range bits are masked off.
    let (out, _) = output_of(
        &[DpAction::SetDscp(46 | 0xc0), DpAction::SetEcn(1 | 0xfc)],
        P1_IN,
    );
    assert_eq!(out, P1_DSCP);
}

#[test]
fn ipv6_tcp_set_source_port_and_hop_limit() {
    let acts = [
        DpAction::SetIpv6Src(ip6("2001:db8:ffff::42")),
        DpAction::SetTpSrc(443),
        DpAction::DecTtl,
    ];
    let (out, _) = output_of(&acts, P5_IN);
    assert_eq!(out, P5_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv6_udp_set_destination_and_port() {
    let acts = [
        DpAction::SetIpv6Dst(ip6("fe80::1234")),
        DpAction::SetTpDst(9999),
    ];
    let (out, _) = output_of(&acts, P6_IN);
    assert_eq!(out, P6_OUT);
    check_checksums(&out).unwrap();
}

#[test]
fn ipv6_traffic_class() {
    let (out, _) = output_of(&[DpAction::SetDscp(46), DpAction::SetEcn(1)], P6_IN);
    assert_eq!(out, P6_DSCP);
}

#[test]
fn ipv6_icmpv6_pseudo_header() {
    let acts = [
        DpAction::SetIpv6Src(ip6("fd00::a")),
        DpAction::SetIpv6Dst(ip6("fd00::b")),
        DpAction::SetTpSrc(1), // ICMPv6 has no ports: skipped
    ];
    let (out, o) = output_of(&acts, P7_IN);
    assert_eq!(out, P7_OUT);
    check_checksums(&out).unwrap();
    assert_eq!(o.skipped, 1);
}

#[test]
fn sctp_ports_patch_the_crc32c() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c_bitwise(b"123456789"), 0xe306_9283);
    let (out, _) = output_of(
        &[DpAction::SetTpSrc(5001), DpAction::SetTpDst(36412)],
        SCTP_IN,
    );
    assert_eq!(out, SCTP_OUT);
    check_checksums(&out).unwrap();
    // A wrong CRC stays wrong by the same difference.
    let mut bad = SCTP_IN.to_vec();
    bad[42] ^= 0x5a;
    let (out, _) = output_of(&[DpAction::SetTpSrc(5001), DpAction::SetTpDst(36412)], &bad);
    assert_eq!(out[42], SCTP_OUT[42] ^ 0x5a);
    assert_eq!(out[43..], SCTP_OUT[43..]);
    // Address changes do not touch it (no pseudo-header in SCTP).
    let (out, _) = output_of(&[DpAction::SetIpv4Src(ip4("1.2.3.4"))], SCTP_IN);
    assert_eq!(out[42..46], SCTP_IN[42..46]);
    check_checksums(&out).unwrap();
}

#[test]
fn push_vlan_then_set() {
    let acts = [
        DpAction::PushVlan {
            tpid: ETH_TYPE_VLAN,
            tci: 0x2064,
        },
        DpAction::SetIpv4Dst(ip4("10.0.0.3")),
    ];
    let (out, _) = output_of(&acts, P2_IN);
    assert_eq!(out, P8_PUSH_OUT);
    check_checksums(&out).unwrap();
    let mut sink = CollectSink::new();
    let (_, layout, _) = run_on(&acts, P2_IN, &mut sink);
    assert_eq!(
        layout,
        Layout {
            l3: 18,
            l4: 38,
            l3_end: 50,
            vlans: 1
        }
    );
}

#[test]
fn pop_vlan_then_set() {
    let (out, _) = output_of(&[DpAction::PopVlan, DpAction::SetTpDst(67)], P8_POP_IN);
    assert_eq!(out, P8_POP_OUT);
    check_checksums(&out).unwrap();
    // Popping an untagged packet changes nothing.
    let (out, o) = output_of(&[DpAction::PopVlan], P2_IN);
    assert_eq!(out, P2_IN);
    assert_eq!(o.skipped, 0);
}

#[test]
fn push_goes_outside_existing_tag_and_pops_in_order() {
    let push = DpAction::PushVlan {
        tpid: ETH_TYPE_VLAN,
        tci: 0x0005,
    };
    let (out, _) = output_of(std::slice::from_ref(&push), P8_POP_IN);
    assert_eq!(
        out[12..20],
        [0x81, 0x00, 0x00, 0x05, 0x88, 0xa8, 0x00, 0x64]
    );
    assert_eq!(out[20..], P8_POP_IN[16..]);
    let (key, layout) = parse(&out);
    assert_eq!((key.vlan_tci(), key.vlan2_tci()), (0x1005, 0x1064));
    assert_eq!(layout.vlans, 2);
    let (out, _) = output_of(&[push, DpAction::PopVlan, DpAction::PopVlan], P8_POP_IN);
    assert_eq!(out, P2_IN);
    // A push on a frame shorter than an Ethernet header is skipped.
    let mut sink = CollectSink::new();
    let (buf, _, o) = run_on(
        &[DpAction::PushVlan {
            tpid: 0x8100,
            tci: 1,
        }],
        &P2_IN[..13],
        &mut sink,
    );
    assert_eq!(buf, P2_IN[..13]);
    assert_eq!(o.skipped, 1);
}

#[test]
fn dec_ttl_to_expiry() {
    let acts = [
        DpAction::DecTtl,
        DpAction::Output(PortNo(1)),
        DpAction::DecTtl,
        DpAction::Output(PortNo(2)),
    ];
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_TTL2, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_TTL1.to_vec())]);
    check_checksums(P1_TTL1).unwrap();
    assert_eq!(o.outputs, 1);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    // TTL 0 expires too; IPv6 hop limit 1 as well.
    let (_, _, o) = run_on(&[DpAction::SetTtl(0), DpAction::DecTtl], P1_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    let (_, _, o) = run_on(&[DpAction::SetTtl(1), DpAction::DecTtl], P6_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::TtlExpired));
    // Not IP: skipped, not dropped.
    let (buf, _, o) = run_on(
        &[DpAction::DecTtl, DpAction::Output(PortNo(3))],
        ARP,
        &mut sink,
    );
    assert_eq!((buf.as_slice(), o.skipped, o.dropped), (ARP, 1, None));
}

#[test]
fn sample_runs_on_a_copy() {
    let acts = [
        DpAction::Sample {
            probability: u32::MAX,
            actions: Actions::new(vec![
                DpAction::SetEthSrc(0x0200_0000_00aa),
                DpAction::Output(PortNo(9)),
            ]),
        },
        DpAction::Output(PortNo(1)),
    ];
    let mut sink = CollectSink::new();
    let (buf, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(buf, P1_IN);
    assert_eq!(
        sink.outputs,
        vec![(PortNo(9), P1_PORT2.to_vec()), (PortNo(1), P1_IN.to_vec())]
    );
    assert_eq!(sink.sample_calls, vec![u32::MAX]);
    assert_eq!((o.outputs, o.dropped), (2, None));

    let mut sink = CollectSink {
        sample_take: false,
        ..CollectSink::new()
    };
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_IN.to_vec())]);
    assert_eq!(o.outputs, 1);

    // A drop inside the sample drops the copy only; a sample alone
    // delivers only the copy, so the packet itself is dropped.
    let inner = |a: Vec<DpAction>| DpAction::Sample {
        probability: 1 << 31,
        actions: Actions::new(a),
    };
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(
        &[inner(vec![DpAction::Drop]), DpAction::Output(PortNo(1))],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, None));
    let (_, _, o) = run_on(
        &[inner(vec![DpAction::Output(PortNo(4))])],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, Some(DropReason::NoOutput)));
}

#[test]
fn sample_nesting_is_bounded() {
    let mut acts = Actions::new(vec![DpAction::Output(PortNo(0))]);
    for _ in 0..20 {
        acts = Actions::new(vec![
            DpAction::Output(PortNo(0)),
            DpAction::Sample {
                probability: u32::MAX,
                actions: acts,
            },
        ]);
    }
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    // The top level and MAX_SAMPLE_DEPTH nested levels run.
    assert_eq!(o.outputs, MAX_SAMPLE_DEPTH + 1);
    assert_eq!(o.skipped, 1);
}

#[test]
fn meter_drop_and_pass() {
    let acts = [DpAction::Meter(MeterId(5)), DpAction::Output(PortNo(1))];
    let mut sink = CollectSink {
        meter_pass: false,
        ..CollectSink::new()
    };
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert!(sink.outputs.is_empty());
    assert_eq!(sink.meter_calls, vec![(MeterId(5), P1_IN.len())]);
    assert_eq!(o.dropped, Some(DropReason::Meter(MeterId(5))));
    assert!(o.is_dropped());

    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(sink.outputs, vec![(PortNo(1), P1_IN.to_vec())]);
    assert_eq!(o.dropped, None);
}

#[test]
fn outputs_to_several_ports_with_changes_between() {
    let acts = [
        DpAction::Output(PortNo(1)),
        DpAction::SetEthSrc(0x0200_0000_00aa),
        DpAction::Output(PortNo(2)),
        DpAction::SetIpv4Dst(ip4("192.168.0.42")),
        DpAction::SetTpSrc(40000),
        DpAction::Output(PortNo(3)),
    ];
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&acts, P1_IN, &mut sink);
    assert_eq!(
        sink.outputs,
        vec![
            (PortNo(1), P1_IN.to_vec()),
            (PortNo(2), P1_PORT2.to_vec()),
            (PortNo(3), P1_PORT3.to_vec()),
        ]
    );
    assert_eq!((o.outputs, o.dropped), (3, None));
    for (_, p) in &sink.outputs {
        check_checksums(p).unwrap();
    }
}

#[test]
fn set_eth_addresses() {
    let (out, _) = output_of(
        &[
            DpAction::SetEthDst(0x0a0b_0c0d_0e0f),
            DpAction::SetEthSrc(0xffff_0000_0000_0001),
        ],
        ARP,
    );
    assert_eq!(
        out[..12],
        [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0, 0, 0, 0, 0, 1]
    );
    assert_eq!(out[12..], ARP[12..]);
}

#[test]
fn missing_layers_are_skipped() {
    let all_l3_l4 = [
        DpAction::SetIpv4Src(1),
        DpAction::SetIpv4Dst(2),
        DpAction::SetIpv6Src(3),
        DpAction::SetIpv6Dst(4),
        DpAction::SetDscp(5),
        DpAction::SetEcn(1),
        DpAction::SetTtl(9),
        DpAction::DecTtl,
        DpAction::SetTpSrc(7),
        DpAction::SetTpDst(8),
    ];
    // ARP: no IP, no L4.
    let (out, o) = output_of(&all_l3_l4, ARP);
    assert_eq!((out.as_slice(), o.skipped), (ARP, all_l3_l4.len()));
    // IPv6: IPv4 addresses skipped.
    let (out, o) = output_of(&[DpAction::SetIpv4Src(1), DpAction::SetIpv4Dst(2)], P6_IN);
    assert_eq!((out.as_slice(), o.skipped), (P6_IN, 2));
    // IPv4: IPv6 addresses skipped.
    let (out, o) = output_of(&[DpAction::SetIpv6Src(1), DpAction::SetIpv6Dst(2)], P2_IN);
    assert_eq!((out.as_slice(), o.skipped), (P2_IN, 2));
    // Unknown ethertype whose payload looks like IPv4: skipped.
    let mut odd = P2_IN.to_vec();
    odd[12..14].copy_from_slice(&[0x88, 0xb5]);
    let (out, o) = output_of(&all_l3_l4, &odd);
    assert_eq!((out, o.skipped), (odd, all_l3_l4.len()));
    // Truncated frames: everything skipped, nothing panics.
    for n in 0..P2_IN.len() {
        let mut sink = CollectSink::new();
        let mut acts = all_l3_l4.to_vec();
        acts.extend([
            DpAction::SetEthSrc(1),
            DpAction::PopVlan,
            DpAction::Output(PortNo(1)),
        ]);
        let (_, _, o) = run_on(&acts, &P2_IN[..n], &mut sink);
        assert_eq!(o.outputs, 1);
    }
}

#[test]
fn later_fragment_has_no_l4() {
    // P2 as a later fragment (offset 8 bytes), header checksum redone.
    let mut frag = P2_IN.to_vec();
    frag[20..22].copy_from_slice(&[0x00, 0x01]);
    let c = full_csum(&[], &frag[14..34], 10);
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    check_checksums(&frag).unwrap();
    assert_eq!(parse(&frag).1.l4, NO_OFFSET);

    let acts = [
        DpAction::SetIpv4Src(ip4("10.9.8.7")),
        DpAction::SetTpDst(99),
    ];
    let (out, o) = output_of(&acts, &frag);
    assert_eq!(o.skipped, 1);
    assert_eq!(out[26..30], [10, 9, 8, 7]);
    assert_eq!(out[34..], frag[34..], "the payload is not an L4 header");
    check_checksums(&out).unwrap();

    // A stale layout that still claims an L4 header is not believed.
    let mut buf = frag.clone();
    let mut layout = parse(P2_IN).1;
    let o = execute(&acts, &mut buf, &mut layout, &mut CollectSink::new());
    assert_eq!(o.skipped, 1);
    assert_eq!(buf[34..], frag[34..]);
}

#[test]
fn ipv6_routing_header_keeps_destination_out_of_the_pseudo_header() {
    // IPv6 / routing header (1 segment left, final destination inside) / TCP.
    let mut pkt = P5_IN[..14].to_vec();
    pkt.extend([0x60, 0, 0, 0, 0x00, 0x30, 43, 64]);
    pkt.extend(ip6("2001:db8::1").to_be_bytes());
    pkt.extend(ip6("2001:db8::2").to_be_bytes());
    pkt.extend([IP_PROTO_TCP, 2, 4, 1, 0, 0, 0, 0]);
    pkt.extend(ip6("2001:db8::99").to_be_bytes());
    pkt.extend(&P5_IN[54..]);
    let (_, layout) = parse(&pkt);
    assert_eq!(layout.l4, 14 + 40 + 24);
    let (out, _) = output_of(&[DpAction::SetIpv6Dst(ip6("2001:db8::3"))], &pkt);
    assert_eq!(out[78..], pkt[78..], "TCP checksum untouched");
    let (out, _) = output_of(&[DpAction::SetIpv6Src(ip6("2001:db8::3"))], &pkt);
    assert_ne!(
        out[94..96],
        pkt[94..96],
        "the source is in the pseudo-header"
    );
    assert_eq!(
        be16(&out[94..]),
        csum_update(
            be16(&pkt[94..]),
            &ip6("2001:db8::1").to_be_bytes(),
            &ip6("2001:db8::3").to_be_bytes()
        )
    );
}

#[test]
fn drop_empty_and_userspace() {
    let mut sink = CollectSink::new();
    let (_, _, o) = run_on(&[], P1_IN, &mut sink);
    assert_eq!(o.dropped, Some(DropReason::NoOutput));
    let (_, _, o) = run_on(
        &[DpAction::Drop, DpAction::Output(PortNo(1))],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (0, Some(DropReason::Explicit)));
    let (_, _, o) = run_on(
        &[DpAction::Output(PortNo(1)), DpAction::Drop],
        P1_IN,
        &mut sink,
    );
    assert_eq!((o.outputs, o.dropped), (1, Some(DropReason::Explicit)));

    let mut sink = CollectSink::new();
    let reason = UserspaceReason::Controller { max_len: 128 };
    let (_, _, o) = run_on(&[DpAction::Userspace(reason.clone())], P1_IN, &mut sink);
    assert_eq!(sink.userspace, vec![(reason, P1_IN.to_vec())]);
    assert_eq!((o.userspace, o.dropped), (1, None));
    assert_eq!(DropReason::TtlExpired.to_string(), "ttl_expired");
}

#[test]
fn display() {
    let a = Actions::new(vec![
        DpAction::PushVlan {
            tpid: 0x8100,
            tci: 0x1064,
        },
        DpAction::SetIpv4Src(ip4("10.0.0.1")),
        DpAction::Output(PortNo(2)),
    ]);
    assert_eq!(
        a.to_string(),
        "push_vlan(tpid=0x8100,tci=0x1064),set(ipv4_src=10.0.0.1),output:2"
    );
    assert_eq!(Actions::default().to_string(), "drop");
    assert_eq!(Actions::from(vec![DpAction::Drop]).to_string(), "drop");
    let a: Actions = [
        DpAction::PopVlan,
        DpAction::SetEthSrc(0x0200_0000_00aa),
        DpAction::SetEthDst(0xffff_ffff_ffff),
        DpAction::SetIpv6Dst(ip6("2001:db8::1")),
        DpAction::SetDscp(46),
        DpAction::SetEcn(1),
        DpAction::SetTtl(3),
        DpAction::SetTpSrc(1),
        DpAction::SetTpDst(2),
        DpAction::DecTtl,
        DpAction::Meter(MeterId(7)),
        DpAction::Sample {
            probability: u32::MAX / 2,
            actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample)]),
        },
        DpAction::Userspace(UserspaceReason::Controller { max_len: 65535 }),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        a.to_string(),
        "pop_vlan,set(eth_src=02:00:00:00:00:aa),set(eth_dst=ff:ff:ff:ff:ff:ff),\
         set(ipv6_dst=2001:db8::1),set(ip_dscp=46),set(ip_ecn=1),set(ip_ttl=3),\
         set(tp_src=1),set(tp_dst=2),dec_ttl,meter(7),\
         sample(sample=50.0%,actions(userspace(sample))),\
         userspace(controller(max_len=65535))"
    );
    assert_eq!(a.len(), 13);
    assert!(!a.is_empty());
    assert_eq!(a.as_slice()[0], DpAction::PopVlan);
    assert_eq!((&a).into_iter().count(), 13);
}

#[test]
fn incremental_update_matches_rfc1624_examples() {
    // RFC 1624 section 4: HC 0xdd2f, m 0x5555 -> 0x3285 gives 0x0000.
    assert_eq!(csum_update(0xdd2f, &[0x55, 0x55], &[0x32, 0x85]), 0x0000);
    // No change leaves the checksum as it was.
    assert_eq!(csum_update(0x1234, &[1, 2, 3, 4], &[1, 2, 3, 4]), 0x1234);
}

// ---------------------------------------------------------------------------
// Properties.

fn arb_leaf() -> impl Strategy<Value = DpAction> {
    (
        0u8..20,
        any::<u64>(),
        any::<u128>(),
        prop_oneof![Just(0x8100u16), Just(0x88a8), any::<u16>()],
    )
        .prop_map(|(kind, a, b, tpid)| match kind {
            0 | 1 => DpAction::Output(PortNo(a as u32)),
            2 => DpAction::Drop,
            3 => DpAction::PushVlan {
                tpid,
                tci: a as u16,
            },
            4 => DpAction::PopVlan,
            5 => DpAction::SetEthSrc(a),
            6 => DpAction::SetEthDst(a),
            7 => DpAction::SetIpv4Src(a as u32),
            8 => DpAction::SetIpv4Dst(a as u32),
            9 => DpAction::SetIpv6Src(b),
            10 => DpAction::SetIpv6Dst(b),
            11 => DpAction::SetDscp(a as u8),
            12 => DpAction::SetEcn(a as u8),
            13 => DpAction::SetTtl(a as u8),
            14 => DpAction::SetTpSrc(a as u16),
            15 => DpAction::SetTpDst(a as u16),
            16 => DpAction::DecTtl,
            17 => DpAction::Meter(MeterId(a as u32)),
            18 => DpAction::Userspace(UserspaceReason::Controller { max_len: a as u16 }),
            _ => DpAction::Userspace(UserspaceReason::Action),
        })
}

fn arb_actions() -> impl Strategy<Value = Vec<DpAction>> {
    let action = arb_leaf().prop_recursive(3, 32, 6, |inner| {
        (any::<u32>(), vec(inner, 0..6)).prop_map(|(probability, a)| DpAction::Sample {
            probability,
            actions: Actions::new(a),
        })
    });
    vec(action, 0..12)
}

/// Random bytes, or a valid frame mutated and possibly cut short.
fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..128),
        (
            0..BASES.len(),
            vec((0usize..100, any::<u8>()), 0..6),
            0usize..100
        )
            .prop_map(|(i, muts, cut)| {
                let mut p = BASES[i].to_vec();
                for (at, v) in muts {
                    if let Some(b) = p.get_mut(at) {
                        *b = v;
                    }
                }
                if cut % 3 == 0 {
                    p.truncate(p.len().saturating_sub(cut));
                }
                p
            }),
    ]
}

fn arb_offset() -> impl Strategy<Value = u16> {
    prop_oneof![Just(NO_OFFSET), 0u16..130, any::<u16>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics(
        pkt in arb_packet(),
        actions in arb_actions(),
        meter_pass in any::<bool>(),
        sample_take in any::<bool>(),
        random_layout in prop::option::of((arb_offset(), arb_offset(), arb_offset(), any::<u8>())),
    ) {
        let mut sink = CollectSink { meter_pass, sample_take, ..CollectSink::new() };
        let mut buf = pkt.clone();
        let mut layout = match random_layout {
            Some((l3, l4, l3_end, vlans)) => Layout { l3, l4, l3_end, vlans },
            None => parse(&pkt).1,
        };
        let o = execute(&actions, &mut buf, &mut layout, &mut sink);
        prop_assert_eq!(o.outputs, sink.outputs.len());
        prop_assert_eq!(o.userspace, sink.userspace.len());
    }
}

/// A valid IPv4 or IPv6 packet with TCP, UDP or (IPv6) ICMPv6.
#[derive(Clone, Debug)]
struct Spec {
    v6: bool,
    src: u128,
    dst: u128,
    proto: u8,
    sport: u16,
    dport: u16,
    ttl: u8,
    tos: u8,
    udp_zero: bool,
    payload: Vec<u8>,
}

fn arb_spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        any::<u128>(),
        any::<u128>(),
        0u8..3,
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<bool>(),
        vec(any::<u8>(), 0..40),
    )
        .prop_map(
            |(v6, src, dst, p, sport, dport, ttl, tos, udp_zero, payload)| {
                let proto = match p {
                    0 => IP_PROTO_TCP,
                    1 => IP_PROTO_UDP,
                    _ if v6 => IP_PROTO_ICMPV6,
                    _ => IP_PROTO_UDP,
                };
                let (src, dst) = if v6 {
                    (src, dst)
                } else {
                    (src & 0xffff_ffff, dst & 0xffff_ffff)
                };
                Spec {
                    v6,
                    src,
                    dst,
                    proto,
                    sport,
                    dport,
                    ttl,
                    tos,
                    udp_zero,
                    payload,
                }
            },
        )
}

/// Builds the packet, every checksum computed in full.
fn build(s: &Spec) -> Vec<u8> {
    let mut l4 = match s.proto {
        IP_PROTO_TCP => {
            let mut t = vec![0u8; 20];
            t[0..2].copy_from_slice(&s.sport.to_be_bytes());
            t[2..4].copy_from_slice(&s.dport.to_be_bytes());
            t[12] = 0x50;
            t[13] = 0x18;
            t
        }
        IP_PROTO_UDP => {
            let mut u = vec![0u8; 8];
            u[0..2].copy_from_slice(&s.sport.to_be_bytes());
            u[2..4].copy_from_slice(&s.dport.to_be_bytes());
            u[4..6].copy_from_slice(&((8 + s.payload.len()) as u16).to_be_bytes());
            u
        }
        _ => vec![128, 0, 0, 0, 0, 1, 0, 1],
    };
    l4.extend(&s.payload);
    let len = l4.len();
    let mut pkt = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    let pseudo = if s.v6 {
        pkt.extend(ETH_TYPE_IPV6.to_be_bytes());
        let vtcfl = (6u32 << 28) | (u32::from(s.tos) << 20) | 0xbeef;
        pkt.extend(vtcfl.to_be_bytes());
        pkt.extend((len as u16).to_be_bytes());
        pkt.extend([s.proto, s.ttl]);
        pkt.extend(s.src.to_be_bytes());
        pkt.extend(s.dst.to_be_bytes());
        let mut ph = pkt[22..54].to_vec();
        ph.extend((len as u32).to_be_bytes());
        ph.extend([0, 0, 0, s.proto]);
        ph
    } else {
        pkt.extend(ETH_TYPE_IPV4.to_be_bytes());
        pkt.extend([0x45, s.tos]);
        pkt.extend(((20 + len) as u16).to_be_bytes());
        pkt.extend([0, 7, 0, 0, s.ttl, s.proto, 0, 0]);
        pkt.extend((s.src as u32).to_be_bytes());
        pkt.extend((s.dst as u32).to_be_bytes());
        let c = full_csum(&[], &pkt[14..34], 10);
        pkt[24..26].copy_from_slice(&c.to_be_bytes());
        let mut ph = pkt[26..34].to_vec();
        ph.extend([0, s.proto]);
        ph.extend((len as u16).to_be_bytes());
        ph
    };
    let at = match s.proto {
        IP_PROTO_TCP => 16,
        IP_PROTO_UDP => 6,
        _ => 2,
    };
    let mut c = full_csum(&pseudo, &l4, at);
    if s.proto == IP_PROTO_UDP {
        c = if s.udp_zero {
            0
        } else if c == 0 {
            0xffff
        } else {
            c
        };
    }
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    pkt.extend(l4);
    pkt
}

fn arb_edit() -> impl Strategy<Value = DpAction> {
    (0u8..13, any::<u128>(), any::<bool>()).prop_map(|(kind, v, qinq)| match kind {
        0 => DpAction::SetIpv4Src(v as u32),
        1 => DpAction::SetIpv4Dst(v as u32),
        2 => DpAction::SetIpv6Src(v),
        3 => DpAction::SetIpv6Dst(v),
        4 => DpAction::SetDscp(v as u8),
        5 => DpAction::SetEcn(v as u8),
        6 => DpAction::SetTtl(v as u8),
        7 => DpAction::DecTtl,
        8 => DpAction::SetTpSrc(v as u16),
        9 => DpAction::SetTpDst(v as u16),
        10 => DpAction::PushVlan {
            tpid: if qinq { ETH_TYPE_QINQ } else { ETH_TYPE_VLAN },
            tci: v as u16,
        },
        11 => DpAction::PopVlan,
        _ => DpAction::SetEthSrc(v as u64),
    })
}

/// What the packet's fields should be after the edits, by a simple model.
fn model(s: &Spec, edits: &[DpAction]) -> (Spec, usize, i32, bool) {
    let mut m = s.clone();
    let (mut skipped, mut vlans) = (0, 0i32);
    let has_ports = m.proto != IP_PROTO_ICMPV6;
    for e in edits {
        match *e {
            DpAction::SetIpv4Src(a) if !m.v6 => m.src = u128::from(a),
            DpAction::SetIpv4Dst(a) if !m.v6 => m.dst = u128::from(a),
            DpAction::SetIpv6Src(a) if m.v6 => m.src = a,
            DpAction::SetIpv6Dst(a) if m.v6 => m.dst = a,
            DpAction::SetDscp(d) => m.tos = (m.tos & 3) | ((d & 0x3f) << 2),
            DpAction::SetEcn(e) => m.tos = (m.tos & 0xfc) | (e & 3),
            DpAction::SetTtl(t) => m.ttl = t,
            DpAction::DecTtl if m.ttl <= 1 => return (m, skipped, vlans, true),
            DpAction::DecTtl => m.ttl -= 1,
            DpAction::SetTpSrc(p) if has_ports => m.sport = p,
            DpAction::SetTpDst(p) if has_ports => m.dport = p,
            DpAction::PushVlan { .. } => vlans += 1,
            DpAction::PopVlan => vlans = (vlans - 1).max(0),
            DpAction::SetEthSrc(_) => {}
            _ => skipped += 1,
        }
    }
    (m, skipped, vlans, false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn edits_keep_checksums_valid(spec in arb_spec(), edits in vec(arb_edit(), 0..10)) {
        let pkt = build(&spec);
        prop_assert_eq!(check_checksums(&pkt), Ok(()));
        let (want, want_skipped, vlans, expired) = model(&spec, &edits);

        let mut all = edits.clone();
        all.push(DpAction::Output(PortNo(1)));
        let mut sink = CollectSink::new();
        let (buf, layout, o) = run_on(&all, &pkt, &mut sink);
        if expired {
            prop_assert_eq!(o.dropped, Some(DropReason::TtlExpired));
            prop_assert!(sink.outputs.is_empty());
            return Ok(());
        }
        prop_assert_eq!(o.dropped, None);
        prop_assert_eq!(o.skipped, want_skipped);
        prop_assert_eq!(&sink.outputs, &vec![(PortNo(1), buf.clone())]);
        prop_assert_eq!(usize::from(layout.vlans), vlans as usize);
        if vlans > 2 {
            // Extraction stops after two tags; pop the rest to check.
            let mut buf = buf.clone();
            let mut layout = layout;
            let pops = vec![DpAction::PopVlan; vlans as usize - 2];
            execute(&pops, &mut buf, &mut layout, &mut CollectSink::new());
            prop_assert_eq!(layout, parse(&buf).1);
            prop_assert_eq!(check_checksums(&buf), Ok(()));
            return Ok(());
        }
        prop_assert_eq!(layout, parse(&buf).1);
        prop_assert_eq!(check_checksums(&buf), Ok(()));

        let (key, _) = parse(&buf);
        if spec.v6 {
            prop_assert_eq!((key.ipv6_src(), key.ipv6_dst()), (want.src, want.dst));
        } else {
            prop_assert_eq!((key.ipv4_src(), key.ipv4_dst()), (want.src as u64, want.dst as u64));
        }
        prop_assert_eq!(key.ip_dscp(), u64::from(want.tos >> 2));
        prop_assert_eq!(key.ip_ecn(), u64::from(want.tos & 3));
        prop_assert_eq!(key.ip_ttl(), u64::from(want.ttl));
        if want.proto != IP_PROTO_ICMPV6 {
            prop_assert_eq!((key.tp_src(), key.tp_dst()), (u64::from(want.sport), u64::from(want.dport)));
        }
        if !spec.v6 && spec.proto == IP_PROTO_UDP && spec.udp_zero {
            let l4 = usize::from(layout.l4);
            prop_assert_eq!(&buf[l4 + 6..l4 + 8], &[0u8, 0][..]);
        }
    }
}

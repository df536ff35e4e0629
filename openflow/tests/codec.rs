//! The codec: every typed message survives emit → parse; arbitrary bytes
//! never panic the parser or the framer; known byte layouts decode to the
//! values the spec puts there; each malformed shape maps to its ERROR.

use openflow::action::NX_VENDOR;
use openflow::message::role;
use openflow::multipart::mp_type;
use openflow::oxm::{
    field_spec, BASIC_FIELDS, CLASS_BASIC, CLASS_NXM0, CLASS_NXM1, CLASS_ONF, NXM0_FIELDS,
    NXM1_FIELDS, ONF_FIELDS,
};
use openflow::{
    bitmap_has, bitmap_of, error_reply, parse, Action, AggregateReply, AsyncConfig, Desc, Features,
    FlowMod, FlowRemoved, FlowStats, FlowStatsRequest, Framer, Instruction, Message, MpReply,
    MpRequest, OfpError, Oxm, OxmMatch, PacketIn, PacketOut, ParseError, Port, PortStatus, Role,
    SwitchConfig, TableFeatures, TableStats, ERROR_TYPES,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9_-]{0,15}"
}

fn port() -> impl Strategy<Value = Port> {
    (any::<u32>(), any::<[u8; 6]>(), name(), vec(any::<u32>(), 8)).prop_map(
        |(port_no, hw_addr, name, w)| Port {
            port_no,
            hw_addr,
            name,
            config: w[0],
            state: w[1],
            curr: w[2],
            advertised: w[3],
            supported: w[4],
            peer: w[5],
            curr_speed: w[6],
            max_speed: w[7],
        },
    )
}

fn desc() -> impl Strategy<Value = Desc> {
    (
        "[ -~]{0,255}",
        "[ -~]{0,255}",
        "[ -~]{0,255}",
        "[ -~]{0,31}",
        "[ -~]{0,255}",
    )
        .prop_map(|(a, b, c, d, e)| Desc {
            mfr_desc: a,
            hw_desc: b,
            sw_desc: c,
            serial_num: d,
            dp_desc: e,
        })
}

/// A valid field: a known class and number, the right width, a mask
/// only where allowed and then with the value inside it.
fn oxm() -> impl Strategy<Value = Oxm> {
    let basic: Vec<u8> = BASIC_FIELDS.iter().map(|f| f.0).collect();
    let nxm0: Vec<u8> = NXM0_FIELDS.iter().map(|f| f.0).collect();
    let nxm1: Vec<u8> = NXM1_FIELDS.iter().map(|f| f.0).collect();
    let onf: Vec<u8> = ONF_FIELDS.iter().map(|f| f.0).collect();
    (
        prop_oneof![
            prop::sample::select(basic).prop_map(|f| (CLASS_BASIC, f)),
            (0u8..16).prop_map(|f| (CLASS_NXM1, f)),
            prop::sample::select(nxm0).prop_map(|f| (CLASS_NXM0, f)),
            prop::sample::select(nxm1).prop_map(|f| (CLASS_NXM1, f)),
            prop::sample::select(onf).prop_map(|f| (CLASS_ONF, f)),
        ],
        any::<bool>(),
        vec(any::<u8>(), 32),
    )
        .prop_map(|((class, field), masked, bytes)| {
            let (w, maskable) = field_spec(class, field).expect("known");
            let mask: Vec<u8> = bytes[16..16 + w].to_vec();
            let masked = masked && maskable;
            let value: Vec<u8> = bytes[..w]
                .iter()
                .zip(&mask)
                .map(|(v, m)| if masked { v & m } else { *v })
                .collect();
            Oxm {
                class,
                field,
                value,
                mask: masked.then_some(mask),
            }
        })
}

fn oxm_match() -> impl Strategy<Value = OxmMatch> {
    vec(oxm(), 0..6).prop_map(|fields| {
        let mut seen = std::collections::HashSet::new();
        OxmMatch {
            fields: fields
                .into_iter()
                .filter(|f| seen.insert((f.class, f.field)))
                .collect(),
        }
    })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        Just(Action::CopyTtlOut),
        Just(Action::DecNwTtl),
        Just(Action::PopVlan),
        any::<u16>().prop_map(Action::PushVlan),
        any::<u32>().prop_map(Action::Group),
        any::<u8>().prop_map(Action::SetNwTtl),
        oxm().prop_map(|mut o| {
            o.mask = None;
            Action::SetField(o)
        }),
        (any::<u16>(), prop::option::of(any::<u8>()))
            .prop_map(|(in_port, table)| Action::NxResubmit { in_port, table }),
        (0u16..64, 1u16..65, any::<u32>(), any::<u64>()).prop_map(|(ofs, n, dst, value)| {
            Action::NxRegLoad {
                ofs,
                n_bits: n.min(64),
                dst,
                value,
            }
        }),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(n_bits, src_ofs, dst_ofs, src, dst)| Action::NxRegMove(
                openflow::action::FieldCopy {
                    n_bits,
                    src_ofs,
                    dst_ofs,
                    src,
                    dst
                }
            )),
        (
            any::<u32>().prop_filter("not nicira", |e| *e != NX_VENDOR),
            vec(any::<u8>(), 0..3)
        )
            .prop_map(|(experimenter, n)| Action::Experimenter {
                experimenter,
                data: vec![0; 8 * n.len()],
            }),
    ]
}

fn instruction() -> impl Strategy<Value = Instruction> {
    prop_oneof![
        any::<u8>().prop_map(Instruction::GotoTable),
        (any::<u64>(), any::<u64>())
            .prop_map(|(value, mask)| Instruction::WriteMetadata { value, mask }),
        vec(action(), 0..4).prop_map(Instruction::WriteActions),
        vec(action(), 0..4).prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        any::<u32>().prop_map(Instruction::Meter),
    ]
}

fn flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        (any::<u64>(), any::<u64>(), any::<u8>(), 0u8..5),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
        ),
        oxm_match(),
        vec(instruction(), 0..4),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, command),
                (idle, hard, prio, buf, op, og, flags),
                matched,
                instructions,
            )| FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command,
                idle_timeout: idle,
                hard_timeout: hard,
                priority: prio,
                buffer_id: buf,
                out_port: op,
                out_group: og,
                flags,
                importance: 0,
                matched,
                instructions,
            },
        )
}

fn stats_request() -> impl Strategy<Value = FlowStatsRequest> {
    (
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        oxm_match(),
    )
        .prop_map(
            |(table_id, out_port, out_group, cookie, cookie_mask, matched)| FlowStatsRequest {
                table_id,
                out_port,
                out_group,
                cookie,
                cookie_mask,
                matched,
            },
        )
}

fn flow_stats() -> impl Strategy<Value = FlowStats> {
    (
        flow_mod(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(f, s, ns, p, b)| FlowStats {
            table_id: f.table_id,
            duration_sec: s,
            duration_nsec: ns,
            priority: f.priority,
            idle_timeout: f.idle_timeout,
            hard_timeout: f.hard_timeout,
            flags: f.flags,
            cookie: f.cookie,
            packet_count: p,
            byte_count: b,
            matched: f.matched,
            instructions: f.instructions,
            idle_sec: 0,
            importance: 0,
        })
}

fn table_features() -> impl Strategy<Value = TableFeatures> {
    (
        any::<u8>(),
        name(),
        any::<u64>(),
        any::<u32>(),
        vec((any::<u16>(), vec(any::<u8>(), 0..40)), 0..5),
    )
        .prop_map(|(table_id, name, m, max, properties)| TableFeatures {
            table_id,
            name,
            metadata_match: m,
            metadata_write: !m,
            config: 3,
            max_entries: max,
            properties,
        })
}

fn band() -> impl Strategy<Value = openflow::Band> {
    use openflow::meter::band_type;
    (0u8..3, any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(k, rate, burst_size, a)| {
        let (ty, arg) = match k {
            0 => (band_type::DROP, 0),
            1 => (band_type::DSCP_REMARK, a % 64),
            _ => (band_type::EXPERIMENTER, a),
        };
        openflow::Band {
            ty,
            rate,
            burst_size,
            arg,
        }
    })
}

fn bucket() -> impl Strategy<Value = openflow::Bucket> {
    (
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
        vec(action(), 0..3),
    )
        .prop_map(
            |(weight, watch_port, watch_group, actions)| openflow::Bucket {
                weight,
                watch_port,
                watch_group,
                actions,
                bucket_id: None,
            },
        )
}

fn group_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (0u16..3, any::<u8>(), any::<u32>(), vec(bucket(), 0..3)).prop_map(
            |(command, group_type, group_id, buckets)| Message::GroupMod(openflow::GroupMod {
                command,
                group_type,
                group_id,
                buckets,
                method: None,
                command_bucket_id: openflow::group::GROUP_ANY,
            })
        ),
        any::<u32>().prop_map(|g| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::Group(g)
        }),
        Just(Message::MultipartRequest {
            flags: 0,
            body: MpRequest::GroupDesc(openflow::group::GROUP_ALL)
        }),
        Just(Message::MultipartRequest {
            flags: 0,
            body: MpRequest::GroupFeatures
        }),
        vec((any::<u8>(), any::<u32>(), vec(bucket(), 0..3)), 0..3).prop_map(|v| {
            Message::MultipartReply {
                flags: 0,
                body: MpReply::GroupDesc(
                    v.into_iter()
                        .map(|(group_type, group_id, buckets)| openflow::GroupDesc {
                            group_type,
                            group_id,
                            buckets,
                            method: None,
                        })
                        .collect(),
                ),
            }
        }),
        vec(
            (
                vec(any::<u32>(), 4),
                vec(any::<u64>(), 2),
                vec((any::<u64>(), any::<u64>()), 0..4)
            ),
            0..3
        )
        .prop_map(|v| Message::MultipartReply {
            flags: 0,
            body: MpReply::Group(
                v.into_iter()
                    .map(|(w, c, buckets)| openflow::GroupStats {
                        group_id: w[0],
                        ref_count: w[1],
                        packet_count: c[0],
                        byte_count: c[1],
                        duration_sec: w[2],
                        duration_nsec: w[3],
                        buckets,
                    })
                    .collect(),
            ),
        }),
        (vec(any::<u32>(), 10)).prop_map(|w| Message::MultipartReply {
            flags: 0,
            body: MpReply::GroupFeatures(openflow::GroupFeatures {
                types: w[0],
                capabilities: w[1],
                max_groups: [w[2], w[3], w[4], w[5]],
                actions: [w[6], w[7], w[8], w[9]],
            }),
        }),
    ]
}

fn meter_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (0u16..3, any::<u16>(), any::<u32>(), vec(band(), 0..3)).prop_map(
            |(command, flags, meter_id, bands)| Message::MeterMod(openflow::MeterMod {
                command,
                flags,
                meter_id,
                bands
            })
        ),
        any::<u32>().prop_map(|m| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::Meter(m)
        }),
        any::<u32>().prop_map(|m| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::MeterConfig(m)
        }),
        Just(Message::MultipartRequest {
            flags: 0,
            body: MpRequest::MeterFeatures
        }),
        vec((any::<u16>(), any::<u32>(), vec(band(), 0..3)), 0..3).prop_map(|v| {
            Message::MultipartReply {
                flags: 0,
                body: MpReply::MeterConfig(
                    v.into_iter()
                        .map(|(flags, meter_id, bands)| openflow::MeterConfig {
                            flags,
                            meter_id,
                            bands,
                        })
                        .collect(),
                ),
            }
        }),
        vec(
            (
                any::<u32>(),
                any::<u64>(),
                vec((any::<u64>(), any::<u64>()), 0..3)
            ),
            0..3
        )
        .prop_map(|v| Message::MultipartReply {
            flags: 0,
            body: MpReply::Meter(
                v.into_iter()
                    .map(|(meter_id, n, bands)| openflow::MeterStats {
                        meter_id,
                        flow_count: meter_id / 2,
                        packet_in_count: n,
                        byte_in_count: n / 3,
                        duration_sec: meter_id,
                        duration_nsec: 5,
                        bands,
                    })
                    .collect(),
            ),
        }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(m, t, b)| Message::MultipartReply {
            flags: 0,
            body: MpReply::MeterFeatures(openflow::MeterFeatures {
                max_meter: m,
                band_types: t,
                capabilities: t / 2,
                max_bands: b,
                max_color: 0,
            })
        }),
    ]
}

fn flow_message() -> impl Strategy<Value = Message> {
    let bytes = || vec(any::<u8>(), 0..200);
    prop_oneof![
        Just(Message::MultipartRequest {
            flags: 0,
            body: MpRequest::Table
        }),
        any::<u32>().prop_map(|p| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::PortStats(p)
        }),
        vec((any::<u32>(), any::<u64>(), any::<u32>()), 0..4).prop_map(|v| {
            Message::MultipartReply {
                flags: 0,
                body: MpReply::PortStats(
                    v.into_iter()
                        .map(|(p, c, d)| openflow::PortStatsEntry {
                            port_no: p,
                            rx_packets: c,
                            tx_bytes: c / 3,
                            collisions: c / 7,
                            duration_sec: d,
                            ..Default::default()
                        })
                        .collect(),
                ),
            }
        }),
        vec(table_features(), 0..3).prop_map(|v| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::TableFeatures(v)
        }),
        vec(table_features(), 0..3).prop_map(|v| Message::MultipartReply {
            flags: 1,
            body: MpReply::TableFeatures(v)
        }),
        vec(
            (any::<u8>(), any::<u32>(), any::<u64>(), any::<u64>()),
            0..5
        )
        .prop_map(|v| {
            Message::MultipartReply {
                flags: 0,
                body: MpReply::Table(
                    v.into_iter()
                        .map(|(t, a, l, m)| TableStats {
                            table_id: t,
                            active_count: a,
                            lookup_count: l,
                            matched_count: m,
                        })
                        .collect(),
                ),
            }
        }),
        flow_mod().prop_map(Message::FlowMod),
        (flow_mod(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(|(f, reason, d, p)| {
            Message::FlowRemoved(FlowRemoved {
                cookie: f.cookie,
                priority: f.priority,
                reason,
                table_id: f.table_id,
                duration_sec: d,
                duration_nsec: d / 2,
                idle_timeout: f.idle_timeout,
                hard_timeout: f.hard_timeout,
                packet_count: p,
                byte_count: p / 3,
                matched: f.matched,
            })
        }),
        (
            any::<u32>(),
            any::<u16>(),
            any::<u8>(),
            any::<u8>(),
            any::<u64>(),
            oxm_match(),
            bytes()
        )
            .prop_map(
                |(buffer_id, total_len, reason, table_id, cookie, matched, data)| {
                    Message::PacketIn(PacketIn {
                        buffer_id,
                        total_len,
                        reason,
                        table_id,
                        cookie,
                        matched,
                        data,
                    })
                }
            ),
        (any::<u32>(), any::<u32>(), vec(action(), 0..4), bytes()).prop_map(
            |(buffer_id, in_port, actions, data)| Message::PacketOut(PacketOut {
                buffer_id,
                in_port,
                actions,
                data
            })
        ),
        stats_request().prop_map(|r| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::Flow(r)
        }),
        stats_request().prop_map(|r| Message::MultipartRequest {
            flags: 0,
            body: MpRequest::Aggregate(r)
        }),
        vec(flow_stats(), 0..3).prop_map(|v| Message::MultipartReply {
            flags: 1,
            body: MpReply::Flow(v)
        }),
        (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(p, b, n)| Message::MultipartReply {
            flags: 0,
            body: MpReply::Aggregate(AggregateReply {
                packet_count: p,
                byte_count: b,
                flow_count: n
            })
        }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![4 => base_message(), 3 => flow_message(), 1 => meter_message()]
}

fn base_message() -> impl Strategy<Value = Message> {
    let bytes = || vec(any::<u8>(), 0..200);
    let other_mp = prop::sample::select(vec![5u16, 0xffff]);
    prop_oneof![
        prop::option::of(vec(any::<u32>(), 1..4)).prop_map(|bitmap| Message::Hello { bitmap }),
        (any::<u16>(), any::<u16>(), bytes()).prop_map(|(t, c, data)| Message::Error {
            error: OfpError::new(t, c),
            data
        }),
        bytes().prop_map(Message::EchoRequest),
        bytes().prop_map(Message::EchoReply),
        (any::<u32>(), any::<u32>(), bytes()).prop_map(|(e, t, data)| Message::Experimenter {
            experimenter: e,
            exp_type: t,
            data
        }),
        Just(Message::FeaturesRequest),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>()
        )
            .prop_map(|(d, b, t, a, c)| Message::FeaturesReply(Features {
                datapath_id: d,
                n_buffers: b,
                n_tables: t,
                auxiliary_id: a,
                capabilities: c
            })),
        Just(Message::GetConfigRequest),
        (any::<u16>(), any::<u16>()).prop_map(|(f, m)| Message::GetConfigReply(SwitchConfig {
            flags: f,
            miss_send_len: m
        })),
        (any::<u16>(), any::<u16>()).prop_map(|(f, m)| Message::SetConfig(SwitchConfig {
            flags: f,
            miss_send_len: m
        })),
        (any::<u8>(), port())
            .prop_map(|(reason, desc)| Message::PortStatus(PortStatus { reason, desc })),
        (
            any::<u16>(),
            prop_oneof![
                Just(MpRequest::Desc),
                Just(MpRequest::PortDesc(openflow::port::reserved::ANY)),
                (other_mp.clone(), bytes()).prop_map(|(ty, body)| MpRequest::Other { ty, body }),
            ]
        )
            .prop_map(|(flags, body)| Message::MultipartRequest { flags, body }),
        (
            any::<u16>(),
            prop_oneof![
                desc().prop_map(MpReply::Desc),
                vec(port(), 0..5).prop_map(MpReply::PortDesc),
                (other_mp, bytes()).prop_map(|(ty, body)| MpReply::Other { ty, body }),
            ]
        )
            .prop_map(|(flags, body)| Message::MultipartReply { flags, body }),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        (any::<u32>(), any::<u64>()).prop_map(|(r, g)| Message::RoleRequest(Role {
            role: r,
            generation_id: g
        })),
        (any::<u32>(), any::<u64>()).prop_map(|(r, g)| Message::RoleReply(Role {
            role: r,
            generation_id: g
        })),
        Just(Message::GetAsyncRequest),
        vec(any::<u32>(), 6).prop_map(|w| Message::SetAsync(AsyncConfig {
            packet_in_mask: [w[0], w[1]],
            port_status_mask: [w[2], w[3]],
            flow_removed_mask: [w[4], w[5]],
        })),
        (any::<u8>(), any::<u32>()).prop_map(|(table_id, config)| {
            Message::TableMod(openflow::TableMod { table_id, config })
        }),
        (any::<u32>(), any::<[u8; 6]>(), any::<u32>(), any::<u32>()).prop_map(|(p, hw, c, m)| {
            Message::PortMod(openflow::PortMod {
                port_no: p,
                hw_addr: hw,
                config: c,
                mask: m,
                advertise: c ^ m,
            })
        }),
        group_message(),
        any::<u32>().prop_map(
            |port| Message::QueueGetConfigRequest(openflow::QueueConfig {
                port,
                queues: vec![]
            })
        ),
        (any::<u32>(), bytes()).prop_map(|(port, queues)| Message::QueueGetConfigReply(
            openflow::QueueConfig { port, queues }
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_message_survives_emit_then_parse(m in message(), xid in any::<u32>()) {
        let bytes = m.to_bytes(xid).expect("fits");
        let (h, back) = parse(&bytes).expect("parses");
        prop_assert_eq!(h.xid, xid);
        prop_assert_eq!(h.ty, m.ty() as u8);
        prop_assert_eq!(usize::from(h.length), bytes.len());
        // A HELLO's bitmap comes back without trailing padding words.
        prop_assert_eq!(back, m);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_errors_map_to_defined_codes(
        bytes in vec(any::<u8>(), 0..300),
        patch_len in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if patch_len && bytes.len() >= 4 {
            // Make the header's length right so the body parsers run.
            let n = bytes.len() as u16;
            bytes[2..4].copy_from_slice(&n.to_be_bytes());
            bytes[0] = 4;
        }
        if let Err(e) = parse(&bytes) {
            prop_assert!(e.ofp_error().is_defined(), "{e}");
        }
        let mut f = Framer::new();
        for chunk in bytes.chunks(7) {
            f.push(chunk);
            while let Ok(Some(m)) = f.next_message() {
                let _ = parse(&m);
            }
        }
    }

    #[test]
    fn the_framer_cuts_a_stream_of_messages_at_their_boundaries_however_it_arrives(
        msgs in vec(message(), 1..8),
        cut in 1usize..50,
    ) {
        let mut stream = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            m.emit(i as u32, &mut stream).expect("fits");
        }
        let mut f = Framer::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(cut) {
            f.push(chunk);
            while let Some(m) = f.next_message().expect("valid stream") {
                got.push(parse(&m).expect("parses").1);
            }
        }
        prop_assert_eq!(f.pending(), 0);
        prop_assert_eq!(got, msgs);
    }
}

#[test]
fn a_hello_with_a_version_bitmap_has_the_specs_layout() {
    // OpenFlow 1.0, 1.3 and 1.4 (bits 1, 4, 5): header, element type 1,
    // length 8 (4 + one word), the bitmap, no padding.
    let bytes = [
        0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00,
        0x32,
    ];
    let (h, m) = parse(&bytes).expect("hello");
    assert_eq!((h.version, h.xid), (4, 7));
    let Message::Hello { bitmap: Some(b) } = &m else {
        panic!("{m:?}")
    };
    assert!(bitmap_has(b, 4) && bitmap_has(b, 1) && bitmap_has(b, 5));
    assert!(!bitmap_has(b, 2) && !bitmap_has(b, 40));
    assert_eq!(m.to_bytes(7).expect("emit"), bytes);
    assert_eq!(bitmap_of(4), vec![0x10]);
    // An OpenFlow 1.0 HELLO: a bare header, any version.
    let (h, m) = parse(&[1, 0, 0, 8, 0, 0, 0, 1]).expect("1.0 hello");
    assert_eq!((h.version, m), (1, Message::Hello { bitmap: None }));
}

#[test]
fn features_reply_and_port_desc_have_the_specs_sizes() {
    let f = Message::FeaturesReply(Features {
        datapath_id: 0x0000_0102_0304_0506,
        n_buffers: 0,
        n_tables: 254,
        auxiliary_id: 0,
        capabilities: 0x4f,
    });
    let b = f.to_bytes(1).expect("emit");
    assert_eq!(b.len(), 32, "ofp_switch_features");
    assert_eq!(&b[8..16], &[0, 0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(b[20], 254);
    let p = Message::MultipartReply {
        flags: 0,
        body: MpReply::PortDesc(vec![Port {
            port_no: 1,
            name: "vm1".into(),
            ..Port::default()
        }]),
    };
    let b = p.to_bytes(2).expect("emit");
    assert_eq!(b.len(), 16 + 64, "multipart header + one ofp_port");
    assert_eq!(u16::from_be_bytes([b[8], b[9]]), mp_type::PORT_DESC);
    assert_eq!(&b[16 + 16..16 + 19], b"vm1");
    let d = Message::MultipartReply {
        flags: 0,
        body: MpReply::Desc(Desc::default()),
    };
    assert_eq!(d.to_bytes(3).expect("emit").len(), 16 + 1056, "ofp_desc");
    let r = Message::RoleRequest(Role {
        role: role::MASTER,
        generation_id: 9,
    });
    assert_eq!(r.to_bytes(4).expect("emit").len(), 24, "ofp_role_request");
}

#[test]
fn malformed_shapes_map_to_the_errors_the_spec_names() {
    let err = |b: &[u8]| parse(b).expect_err("malformed").ofp_error();
    // Wrong version on anything but HELLO.
    assert_eq!(err(&[1, 5, 0, 8, 0, 0, 0, 1]), OfpError::BAD_VERSION);
    // A type past METER_MOD.
    assert_eq!(err(&[4, 30, 0, 8, 0, 0, 0, 1]), OfpError::BAD_TYPE);
    // A length that disagrees with the bytes, or is below the header.
    assert_eq!(err(&[4, 2, 0, 9, 0, 0, 0, 1]), OfpError::BAD_LEN);
    assert_eq!(err(&[4, 2, 0, 4, 0, 0, 0, 1]), OfpError::BAD_LEN);
    // FEATURES_REQUEST with a body; a short ROLE_REQUEST.
    assert_eq!(err(&[4, 5, 0, 9, 0, 0, 0, 1, 0]), OfpError::BAD_LEN);
    assert_eq!(
        err(&[4, 24, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2]),
        OfpError::BAD_LEN
    );
    // A multipart type the spec does not have.
    let mut mp = vec![4, 18, 0, 16, 0, 0, 0, 1, 0, 99, 0, 0, 0, 0, 0, 0];
    assert_eq!(err(&mp), OfpError::BAD_MULTIPART);
    mp[9] = 0;
    assert!(matches!(
        parse(&mp),
        Ok((
            _,
            Message::MultipartRequest {
                body: MpRequest::Desc,
                ..
            }
        ))
    ));
    // What a truncation names.
    let e = parse(&[4, 24, 0, 8, 0, 0, 0, 1]).expect_err("short role");
    assert!(e.to_string().contains("role"), "{e}");
    assert!(matches!(e, ParseError::BadLength { .. }));
}

#[test]
fn every_error_type_and_code_of_the_spec_has_a_name() {
    let codes: usize = ERROR_TYPES.iter().map(|(_, _, c)| c.len()).sum();
    // 2 + 14 + 16 + 9 + 12 + 8 + 15 + 5 + 3 + 3 + 3 + 3 + 12 + 6.
    assert_eq!(codes, 111);
    assert_eq!(OfpError::BAD_MULTIPART.name(), "BAD_REQUEST/BAD_MULTIPART");
    assert_eq!(OfpError::new(5, 3).name(), "FLOW_MOD_FAILED/OVERLAP");
    assert_eq!(OfpError::new(13, 5).name(), "TABLE_FEATURES_FAILED/EPERM");
    assert!(!OfpError::new(13, 6).is_defined());
    assert!(!OfpError::new(14, 0).is_defined());
    // An ERROR reply carries what it answers, whole (as Open vSwitch), up
    // to what one message holds.
    let offending = vec![0xaa; 200];
    let Message::Error { data, .. } = error_reply(OfpError::BAD_TYPE, &offending) else {
        panic!()
    };
    assert_eq!(data, offending);
    let Message::Error { data, .. } = error_reply(OfpError::BAD_TYPE, &vec![0xbb; 70_000]) else {
        panic!()
    };
    assert_eq!(data.len(), openflow::message::ERROR_DATA_LEN);
}

#[test]
fn a_long_multipart_reply_splits_at_the_64_kib_limit_and_reads_back_whole() {
    use openflow::multipart::{emit_reply_parts, MORE};
    let entries: Vec<Port> = (0..3000u32)
        .map(|i| Port {
            port_no: i,
            name: format!("p{i}"),
            ..Port::default()
        })
        .collect();
    let mut out = Vec::new();
    let n =
        emit_reply_parts(&mut out, 4, 9, mp_type::PORT_DESC, &entries, Port::emit).expect("fits");
    let mut f = Framer::new();
    f.push(&out);
    let mut got = Vec::new();
    let mut flags = Vec::new();
    while let Some(m) = f.next_message().expect("frames") {
        assert!(m.len() <= openflow::MAX_LEN);
        let (h, m) = parse(&m).expect("parses");
        assert_eq!(h.xid, 9);
        let Message::MultipartReply {
            flags: fl,
            body: MpReply::PortDesc(p),
        } = m
        else {
            panic!("{m:?}")
        };
        flags.push(fl);
        got.extend(p);
    }
    assert_eq!(flags.len(), n);
    assert!(n >= 3, "3,000 ports of 64 bytes take {n} messages");
    assert!(flags[..n - 1].iter().all(|f| f & MORE != 0) && flags[n - 1] & MORE == 0);
    assert_eq!(got, entries);
    // One item larger than a message can carry is refused, nothing added.
    let mut out = vec![1, 2, 3];
    let big = [vec![0u8; 70_000]];
    let e = emit_reply_parts(&mut out, 4, 1, 0xffff, &big, |b, o| o.extend_from_slice(b));
    assert!(e.is_err());
    assert_eq!(out, vec![1, 2, 3]);
}

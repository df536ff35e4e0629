//! The connection state machine fed byte streams, as a controller or
//! `ovs-ofctl` would send them.

use super::*;

struct Sw {
    roles: Roles,
    bridge: Bridge,
    /// The generation a revalidator pass has synced (tests move it).
    synced: u64,
    sync_requests: u32,
    /// Each NXT_RESUME's translation: its datapath actions.
    resumed: Vec<String>,
}

impl OfSwitch for Sw {
    fn features(&self) -> Features {
        Features {
            datapath_id: 0xabc,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: 7,
        }
    }
    fn desc(&self) -> Desc {
        Desc {
            mfr_desc: "eswitch".into(),
            ..Desc::default()
        }
    }
    fn ports(&self) -> Vec<Port> {
        vec![Port {
            port_no: 1,
            name: "vm1".into(),
            ..Port::default()
        }]
    }
    fn roles(&mut self) -> &mut Roles {
        &mut self.roles
    }
    type BridgeRef<'a> = &'a mut Bridge;
    fn bridge(&mut self) -> &mut Bridge {
        &mut self.bridge
    }
    type BridgeView<'a> = &'a Bridge;
    fn bridge_view(&mut self) -> &Bridge {
        &self.bridge
    }
    fn now(&self) -> Timestamp {
        Timestamp(5_000_000_000)
    }
    fn tables_synced(&self) -> u64 {
        self.synced
    }
    fn request_sync(&mut self) {
        self.sync_requests += 1;
    }
    fn packet_out(
        &mut self,
        _: u32,
        _: &[crate::rule::OfAction],
        _: &[u8],
    ) -> Result<(), OfpError> {
        Ok(())
    }

    fn resume(
        &mut self,
        in_port: u32,
        id: u32,
        fields: &[(megaflow::Field, u128, u128)],
        frame: &[u8],
    ) -> Result<(), OfpError> {
        let mut key = megaflow::FlowKey::ZERO;
        megaflow::extract::extract_into(in_port, frame, &mut key);
        let t = self
            .bridge
            .translate_resume(&key, id, fields, megaflow::Timestamp::from_millis(1));
        if t.error.is_some() {
            return Err(openflow::flow::nx_packet_in::STALE);
        }
        self.resumed.push(t.datapath_actions().to_string());
        Ok(())
    }
}

fn sw() -> Sw {
    Sw {
        roles: Roles::default(),
        bridge: Bridge::new(),
        synced: u64::MAX,
        sync_requests: 0,
        resumed: Vec::new(),
    }
}

const PROBE: Duration = Duration::from_secs(5);

fn bytes(m: &Message, xid: u32) -> Vec<u8> {
    m.to_bytes(xid).expect("emit")
}

fn hello13() -> Vec<u8> {
    bytes(
        &Message::Hello {
            bitmap: Some(openflow::bitmap_of(4)),
        },
        1,
    )
}

/// Every message in `out`, parsed.
fn msgs(out: &[u8]) -> Vec<(u32, Message)> {
    let mut f = Framer::new();
    f.push(out);
    let mut v = Vec::new();
    while let Some(m) = f.next_message().expect("frames") {
        let (h, m) = parse(&m).expect("parses");
        v.push((h.xid, m));
    }
    v
}

/// An open connection with its HELLO taken.
fn open(sw: &mut Sw, id: u64, t: Instant) -> Connection {
    let mut c = Connection::new(id, t, PROBE);
    let first = msgs(&c.take_output());
    assert!(matches!(&first[..], [(_, Message::Hello { bitmap: Some(b) })] if bitmap_has(b, 4)));
    c.receive(&hello13(), sw, t);
    assert_eq!(c.state(), &State::Open);
    c
}

fn ask(c: &mut Connection, sw: &mut Sw, m: &Message, xid: u32) -> Vec<(u32, Message)> {
    c.receive(&bytes(m, xid), sw, Instant::now());
    msgs(&c.take_output())
}

/// An OFPFC_ADD of a catch-all rule of `priority` in table 0 applying
/// `actions`.
fn add_flow(priority: u16, actions: Vec<openflow::Action>) -> Message {
    Message::FlowMod(openflow::FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id: openflow::flow::NO_BUFFER,
        out_port: OfPort::Any.number(),
        out_group: openflow::group::GROUP_ANY,
        flags: 0,
        importance: 0,
        matched: openflow::OxmMatch::default(),
        instructions: vec![openflow::Instruction::ApplyActions(actions)],
    })
}

fn error_of(replies: &[(u32, Message)]) -> Option<OfpError> {
    match replies {
        [(_, Message::Error { error, .. })] => Some(*error),
        _ => None,
    }
}

#[test]
fn the_version_is_the_highest_both_hellos_allow() {
    let mut s = sw();
    let t = Instant::now();
    // (the peer's bitmap or, without one, its HELLO's version) -> agreed.
    for (bitmap, version, want) in [
        (Some(vec![(1 << 1) | (1 << 5)]), 5, 5),
        (Some(vec![(1 << 4) | (1 << 6)]), 6, 6),
        (Some(vec![(1 << 4) | (1 << 7)]), 7, 4),
        (None, 4, 4),
        (None, 6, 6),
        (None, 7, 6),
    ] {
        let mut c = Connection::new(1, t, PROBE);
        let ours = c.take_output();
        // Ours offers 1.3, 1.4 and 1.5 under 1.5's header.
        assert_eq!(ours[0], 6, "{ours:x?}");
        let (_, m) = parse(&ours).expect("our hello");
        assert_eq!(
            m,
            Message::Hello {
                bitmap: Some(vec![0x70])
            }
        );
        let mut hello = Message::Hello { bitmap }.to_bytes(3).expect("emit");
        hello[0] = version;
        c.receive(&hello, &mut s, t);
        assert!(!c.is_closed(), "{:?}", c.last_error());
        assert_eq!(c.version(), want);
        // What follows is answered in that version.
        let echo = Message::EchoRequest(vec![1])
            .to_bytes_as(want, 9)
            .expect("emit");
        c.receive(&echo, &mut s, t);
        assert_eq!(c.take_output()[0], want);
        // A message of another version is BAD_VERSION, and nothing closes.
        let other = Message::EchoRequest(vec![1])
            .to_bytes_as(if want == 4 { 6 } else { 4 }, 10)
            .expect("emit");
        c.receive(&other, &mut s, t);
        assert_eq!(
            error_of(&msgs(&c.take_output())),
            Some(OfpError::BAD_VERSION)
        );
        assert!(!c.is_closed());
    }
}

#[test]
fn a_peer_without_1_3_gets_hello_failed_and_the_connection_closes() {
    let mut s = sw();
    let t = Instant::now();
    let mut c = Connection::new(1, t, PROBE);
    c.take_output();
    // OpenFlow 1.0 and 1.2 only.
    let hello = Message::Hello {
        bitmap: Some(vec![(1 << 1) | (1 << 3)]),
    };
    c.receive(&bytes(&hello, 3), &mut s, t);
    assert!(c.is_closed());
    let out = msgs(&c.take_output());
    assert_eq!(error_of(&out), Some(OfpError::HELLO_INCOMPATIBLE));
    let Message::Error { data, .. } = &out[0].1 else {
        unreachable!()
    };
    assert!(String::from_utf8_lossy(data).contains("1.3"));
    // A bare 1.0 HELLO (no bitmap) is no better; a bare 1.5 one is: the
    // peer supports everything up to its version.
    let mut c = Connection::new(2, t, PROBE);
    c.receive(&[1, 0, 0, 8, 0, 0, 0, 9], &mut s, t);
    assert!(c.is_closed());
    let mut c = Connection::new(3, t, PROBE);
    c.receive(&[6, 0, 0, 8, 0, 0, 0, 9], &mut s, t);
    assert_eq!(c.state(), &State::Open);
}

#[test]
fn requests_get_their_replies_with_the_requests_xid() {
    let mut s = sw();
    let mut c = open(&mut s, 1, Instant::now());
    let r = ask(&mut c, &mut s, &Message::EchoRequest(b"ping".to_vec()), 77);
    assert_eq!(r, vec![(77, Message::EchoReply(b"ping".to_vec()))]);
    let r = ask(&mut c, &mut s, &Message::FeaturesRequest, 78);
    assert!(matches!(&r[..], [(78, Message::FeaturesReply(f))] if f.datapath_id == 0xabc));
    let r = ask(
        &mut c,
        &mut s,
        &Message::MultipartRequest {
            flags: 0,
            body: MpRequest::PortDesc(OfPort::Any.number()),
        },
        79,
    );
    assert!(
        matches!(&r[..], [(79, Message::MultipartReply { body: MpReply::PortDesc(p), .. })] if p[0].name == "vm1")
    );
    let r = ask(&mut c, &mut s, &Message::BarrierRequest, 80);
    assert_eq!(r, vec![(80, Message::BarrierReply)]);
    // SET_CONFIG has no reply; GET_CONFIG shows it.
    let cfg = SwitchConfig {
        flags: 1,
        miss_send_len: 0xffff,
    };
    assert!(ask(&mut c, &mut s, &Message::SetConfig(cfg), 81).is_empty());
    let r = ask(&mut c, &mut s, &Message::GetConfigRequest, 82);
    assert_eq!(r, vec![(82, Message::GetConfigReply(cfg))]);
    assert_eq!(c.stats().rx_msgs, 7, "the HELLO and six requests");
}

#[test]
fn what_the_switch_cannot_honour_gets_the_error_the_spec_names_and_the_connection_stays() {
    let mut s = sw();
    let mut c = open(&mut s, 1, Instant::now());
    let exp = Message::Experimenter {
        experimenter: 0x1234,
        exp_type: 1,
        data: vec![],
    };
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &exp, 5)),
        Some(OfpError::BAD_EXPERIMENTER)
    );
    let bad_cfg = Message::SetConfig(SwitchConfig {
        flags: 9,
        miss_send_len: 0,
    });
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &bad_cfg, 6)),
        Some(OfpError::SWITCH_CONFIG_BAD_FLAGS)
    );
    // A reply type sent to the switch; a bad version; garbage of the
    // right length.
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &Message::BarrierReply, 7)),
        Some(OfpError::BAD_TYPE)
    );
    c.receive(&[1, 5, 0, 8, 0, 0, 0, 8], &mut s, Instant::now());
    assert_eq!(
        error_of(&msgs(&c.take_output())),
        Some(OfpError::BAD_VERSION)
    );
    // A message only switches send, with a body that would not parse
    // (a FLOW_REMOVED cut short): BAD_TYPE for its type, not an error of
    // its body.
    c.receive(
        &[4, 11, 0, 12, 0, 0, 0, 10, 1, 2, 3, 4],
        &mut s,
        Instant::now(),
    );
    assert_eq!(error_of(&msgs(&c.take_output())), Some(OfpError::BAD_TYPE));
    c.receive(&[4, 99, 0, 8, 0, 0, 0, 9], &mut s, Instant::now());
    let r = msgs(&c.take_output());
    assert_eq!(error_of(&r), Some(OfpError::BAD_TYPE));
    assert_eq!(r[0].0, 9, "the error carries the offending xid");
    let Message::Error { data, .. } = &r[0].1 else {
        unreachable!()
    };
    assert_eq!(data, &[4, 99, 0, 8, 0, 0, 0, 9], "and its bytes");
    assert_eq!(c.state(), &State::Open);
    // A length below the header: where the next message starts is
    // unknown, so the connection answers and closes.
    c.receive(&[4, 2, 0, 3, 0, 0, 0, 1], &mut s, Instant::now());
    assert_eq!(error_of(&msgs(&c.take_output())), Some(OfpError::BAD_LEN));
    assert!(c.is_closed());
    assert!(c.last_error().is_some_and(|e| e.contains("framing")));
}

#[test]
fn nxt_set_packet_in_format_chooses_packet_in2_and_refuses_what_is_not_sent() {
    use openflow::flow::nx_packet_in as nx;
    let mut s = sw();
    let mut c = open(&mut s, 1, Instant::now());
    let set = |format: &[u8]| Message::Experimenter {
        experimenter: openflow::action::NX_VENDOR,
        exp_type: nx::SET_FORMAT,
        data: format.to_vec(),
    };
    assert!(!c.wants_packet_in2());
    assert!(ask(&mut c, &mut s, &set(&[0, 0, 0, 2]), 5).is_empty());
    assert!(c.wants_packet_in2());
    // The old NXT_PACKET_IN and unknown formats: refused, nothing changed.
    for (f, xid) in [([0, 0, 0, 1], 6), ([0, 0, 0, 9], 7)] {
        assert_eq!(
            error_of(&ask(&mut c, &mut s, &set(&f), xid)),
            Some(OfpError::REQUEST_EPERM)
        );
        assert!(c.wants_packet_in2());
    }
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &set(&[0, 2]), 8)),
        Some(OfpError::BAD_LEN)
    );
    assert!(ask(&mut c, &mut s, &set(&[0, 0, 0, 0]), 9).is_empty());
    assert!(!c.wants_packet_in2());
    assert_eq!(c.state(), &State::Open);
}

#[test]
fn a_request_before_hello_breaks_the_handshake() {
    let mut s = sw();
    let mut c = Connection::new(1, Instant::now(), PROBE);
    c.take_output();
    c.receive(&bytes(&Message::FeaturesRequest, 2), &mut s, Instant::now());
    assert_eq!(
        error_of(&msgs(&c.take_output())),
        Some(OfpError::HELLO_EPERM)
    );
    assert!(c.is_closed());
}

#[test]
fn a_quiet_peer_is_probed_then_dropped() {
    let mut s = sw();
    let t0 = Instant::now();
    let mut c = open(&mut s, 1, t0);
    c.tick(t0 + PROBE / 2);
    assert!(c.take_output().is_empty());
    c.tick(t0 + PROBE);
    assert!(matches!(
        &msgs(&c.take_output())[..],
        [(_, Message::EchoRequest(_))]
    ));
    // An answer resets the clock.
    c.receive(
        &bytes(&Message::EchoReply(vec![]), 2),
        &mut s,
        t0 + PROBE * 3 / 2,
    );
    c.tick(t0 + PROBE * 2);
    assert_eq!(c.state(), &State::Open);
    c.tick(t0 + PROBE * 5 / 2);
    assert_eq!(c.stats().echo_requests_sent, 2);
    c.tick(t0 + PROBE * 4);
    assert!(c.is_closed());
    assert!(c.last_error().is_some_and(|e| e.contains("inactivity")));
}

#[test]
fn roles_follow_generation_ids_and_a_new_master_demotes_the_old() {
    let mut s = sw();
    let mut a = open(&mut s, 1, Instant::now());
    let mut b = open(&mut s, 2, Instant::now());
    let req = |role, generation_id| {
        Message::RoleRequest(Role {
            role,
            generation_id,
        })
    };
    let r = ask(&mut a, &mut s, &req(role::MASTER, 10), 1);
    assert_eq!(
        r,
        vec![(
            1,
            Message::RoleReply(Role {
                role: role::MASTER,
                generation_id: 10
            })
        )]
    );
    let r = ask(&mut b, &mut s, &req(role::MASTER, 11), 2);
    assert!(matches!(&r[..], [(2, Message::RoleReply(x))] if x.role == role::MASTER));
    assert_eq!(s.roles.of(1), role::SLAVE, "the old master is a slave now");
    // A stale generation id, a role that does not exist.
    assert_eq!(
        error_of(&ask(&mut a, &mut s, &req(role::MASTER, 9), 3)),
        Some(OfpError::ROLE_STALE)
    );
    assert_eq!(
        error_of(&ask(&mut a, &mut s, &req(7, 12), 4)),
        Some(OfpError::ROLE_BAD_ROLE)
    );
    // A slave may not modify the switch.
    let fm = Message::GroupMod(openflow::GroupMod {
        command: 0,
        group_type: 0,
        group_id: 1,
        buckets: vec![],
        method: None,
        command_bucket_id: openflow::group::GROUP_ANY,
    });
    assert_eq!(
        error_of(&ask(&mut a, &mut s, &fm, 5)),
        Some(OfpError::IS_SLAVE)
    );
    let cfg = Message::SetConfig(SwitchConfig::default());
    assert_eq!(
        error_of(&ask(&mut a, &mut s, &cfg, 6)),
        Some(OfpError::IS_SLAVE)
    );
    // NOCHANGE reports; EQUAL needs no generation.
    let r = ask(&mut a, &mut s, &req(role::NOCHANGE, 0), 7);
    assert!(
        matches!(&r[..], [(7, Message::RoleReply(x))] if x.role == role::SLAVE && x.generation_id == 11)
    );
    let r = ask(&mut a, &mut s, &req(role::EQUAL, 0), 8);
    assert!(matches!(&r[..], [(8, Message::RoleReply(x))] if x.role == role::EQUAL));
    // Wrapping generation ids: 2^64 - 1 then 0 is newer.
    let mut t = Roles::default();
    t.request(
        1,
        Role {
            role: role::MASTER,
            generation_id: u64::MAX,
        },
    )
    .expect("first");
    t.request(
        1,
        Role {
            role: role::MASTER,
            generation_id: 0,
        },
    )
    .expect("wrapped is newer");
}

#[test]
fn bytes_arriving_in_any_cuts_give_the_same_replies() {
    let mut s = sw();
    let mut stream = hello13();
    for (i, m) in [
        Message::FeaturesRequest,
        Message::EchoRequest(vec![1, 2, 3]),
        Message::BarrierRequest,
    ]
    .iter()
    .enumerate()
    {
        m.emit(10 + i as u32, &mut stream).expect("emit");
    }
    let mut whole = Connection::new(1, Instant::now(), PROBE);
    whole.receive(&stream, &mut s, Instant::now());
    let want = msgs(&whole.take_output());
    assert_eq!(want.len(), 4, "HELLO and three replies");
    for cut in 1..stream.len() {
        let mut c = Connection::new(1, Instant::now(), PROBE);
        for chunk in stream.chunks(cut) {
            c.receive(chunk, &mut s, Instant::now());
        }
        assert_eq!(msgs(&c.take_output()), want, "cut {cut}");
    }
}

#[test]
fn group_mods_build_groups_that_flows_run_and_deleting_one_deletes_its_flows() {
    use openflow::group::{group_command, group_type};
    use openflow::{Action, Bucket, GroupMod};
    let mut s = sw();
    s.bridge = Bridge::with_ports([1, 2, 3]);
    let t = Instant::now();
    let mut c = open(&mut s, 1, t);
    let out = |p: u32| Action::Output {
        port: p,
        max_len: 0,
    };
    let bucket = |p: u32| Bucket {
        weight: 0,
        watch_port: openflow::group::GROUP_ANY,
        watch_group: openflow::group::GROUP_ANY,
        actions: vec![out(p)],
        bucket_id: None,
    };
    let gm = |command, group_type, buckets| {
        Message::GroupMod(GroupMod {
            command,
            group_type,
            group_id: 10,
            buckets,
            method: None,
            command_bucket_id: openflow::group::GROUP_ANY,
        })
    };
    let add = gm(
        group_command::ADD,
        group_type::ALL,
        vec![bucket(2), bucket(3)],
    );
    assert!(ask(&mut c, &mut s, &add, 2).is_empty(), "added silently");
    let gen = s.bridge.generations();
    // Errors: exists, unknown type, modify of an unknown group, an
    // indirect group of two buckets.
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &add, 3)),
        Some(OfpError::new(6, 0))
    );
    let bad_type = gm(group_command::ADD, 9, vec![]);
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &bad_type, 4)),
        Some(OfpError::new(6, 10))
    );
    let mut unknown = gm(group_command::MODIFY, group_type::ALL, vec![]);
    if let Message::GroupMod(g) = &mut unknown {
        g.group_id = 11;
    }
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &unknown, 5)),
        Some(OfpError::new(6, 8))
    );
    let two = gm(
        group_command::MODIFY,
        group_type::INDIRECT,
        vec![bucket(2), bucket(3)],
    );
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &two, 6)),
        Some(OfpError::new(6, 1))
    );
    assert_eq!(
        s.bridge.generations(),
        gen,
        "a refused group mod changes nothing"
    );
    assert!(c
        .last_error()
        .is_some_and(|e| e.contains("exactly one bucket")));
    // Watching another group's liveness: WATCH_UNSUPPORTED; watching a
    // reserved port: BAD_WATCH.
    let watched = |watch_port, watch_group| {
        Message::GroupMod(GroupMod {
            command: group_command::ADD,
            group_type: group_type::FF,
            group_id: 12,
            buckets: vec![Bucket {
                watch_port,
                watch_group,
                ..bucket(2)
            }],
            method: None,
            command_bucket_id: openflow::group::GROUP_ANY,
        })
    };
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &watched(2, 7), 40)),
        Some(OfpError::new(6, 6))
    );
    let controller = OfPort::Controller.number();
    let any = openflow::group::GROUP_ANY;
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &watched(controller, any), 41)),
        Some(OfpError::new(6, 13))
    );
    assert_eq!(
        s.bridge.generations(),
        gen,
        "a refused watch changes nothing"
    );

    // A flow may run group 10 but not group 11.
    let flow = |g: u32| add_flow(1, vec![Action::Group(g)]);
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &flow(11), 7)),
        Some(OfpError::new(2, 9))
    );
    assert!(ask(&mut c, &mut s, &flow(10), 8).is_empty());
    assert_eq!(s.bridge.tables.len(), 1);

    // GROUP_DESC gives the group back; GROUP its reference count.
    let mp = |body| Message::MultipartRequest { flags: 0, body };
    let r = ask(
        &mut c,
        &mut s,
        &mp(MpRequest::GroupDesc(openflow::group::GROUP_ALL)),
        9,
    );
    let [(
        9,
        Message::MultipartReply {
            body: MpReply::GroupDesc(d),
            ..
        },
    )] = &r[..]
    else {
        panic!("{r:?}");
    };
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].buckets, vec![bucket(2), bucket(3)]);
    let r = ask(
        &mut c,
        &mut s,
        &mp(MpRequest::Group(openflow::group::GROUP_ALL)),
        10,
    );
    let [(
        10,
        Message::MultipartReply {
            body: MpReply::Group(st),
            ..
        },
    )] = &r[..]
    else {
        panic!("{r:?}");
    };
    assert_eq!(
        (st[0].group_id, st[0].ref_count, st[0].buckets.len()),
        (10, 1, 2)
    );
    let r = ask(&mut c, &mut s, &mp(MpRequest::GroupFeatures), 11);
    let [(
        11,
        Message::MultipartReply {
            body: MpReply::GroupFeatures(f),
            ..
        },
    )] = &r[..]
    else {
        panic!("{r:?}");
    };
    assert_eq!(f.types, 0b1111, "all four group types");

    // Deleting the group deletes the flow that ran it.
    let del = gm(group_command::DELETE, 0, vec![]);
    assert!(ask(&mut c, &mut s, &del, 12).is_empty());
    assert!(s.bridge.groups.is_empty());
    assert_eq!(s.bridge.tables.len(), 0);
}

#[test]
fn no_request_is_acted_on_while_the_output_is_over_its_limit_and_none_is_lost() {
    let mut s = sw();
    let t = Instant::now();
    let mut c = Connection::new(1, t, PROBE).with_limits(65_535, 1024);
    c.take_output();
    c.receive(&hello13(), &mut s, t);
    // 500 DESC requests in one read: each reply is over 1,000 bytes.
    let burst: Vec<u8> = (0..500u32)
        .flat_map(|x| {
            let desc = Message::MultipartRequest {
                flags: 0,
                body: MpRequest::Desc,
            };
            bytes(&desc, 10 + x)
        })
        .collect();
    c.receive(&burst, &mut s, t);
    let mut xids = Vec::new();
    let mut rounds = 0;
    loop {
        let out = c.take_output();
        // At most one reply past the limit at a time.
        assert!(out.len() < 1024 + 1200, "{} bytes queued", out.len());
        xids.extend(msgs(&out).into_iter().map(|(x, _)| x));
        if !c.backlogged() {
            break;
        }
        rounds += 1;
        c.resume(&mut s);
    }
    assert!(
        rounds >= 400,
        "the output limit held requests back: {rounds} rounds"
    );
    assert_eq!(
        xids,
        (10..510).collect::<Vec<u32>>(),
        "every reply, in order"
    );
    assert_eq!(c.state(), &State::Open);
}

#[test]
fn a_message_over_the_limit_is_refused_with_bad_len_and_the_connection_closes() {
    let mut s = sw();
    let t = Instant::now();
    let mut c = Connection::new(1, t, PROBE).with_limits(256, 1 << 20);
    c.take_output();
    c.receive(&hello13(), &mut s, t);
    // An ECHO of 200 bytes is taken; one of 300 is not.
    let replies = ask(&mut c, &mut s, &Message::EchoRequest(vec![7; 200]), 5);
    assert!(matches!(&replies[..], [(5, Message::EchoReply(d))] if d.len() == 200));
    // Only its header has arrived: refused without waiting for the rest.
    let big = bytes(&Message::EchoRequest(vec![7; 300]), 6);
    c.receive(&big[..8], &mut s, t);
    assert_eq!(error_of(&msgs(&c.take_output())), Some(OfpError::BAD_LEN));
    assert!(c.is_closed());
    assert!(
        c.last_error().is_some_and(|e| e.contains("limit of 256")),
        "{:?}",
        c.last_error()
    );
}

mod bundle_tests {
    use super::*;
    use openflow::bundle::{self as b, ctrl, error as be, onf_error, BundleAdd, BundleCtrl};
    use openflow::Action;

    fn control(id: u32, ty: u16, flags: u16) -> Message {
        Message::Experimenter {
            experimenter: b::ONF_VENDOR,
            exp_type: b::ET_BUNDLE_CONTROL,
            data: BundleCtrl {
                bundle_id: id,
                ty,
                flags,
                props: vec![],
            }
            .encode(),
        }
    }

    fn add(id: u32, flags: u16, inner: &Message, xid: u32) -> Message {
        Message::Experimenter {
            experimenter: b::ONF_VENDOR,
            exp_type: b::ET_BUNDLE_ADD_MESSAGE,
            data: BundleAdd {
                bundle_id: id,
                flags,
                message: bytes(inner, xid),
            }
            .encode(),
        }
    }

    /// A flow mod adding `priority`, running `group` when given.
    fn flow(priority: u16, group: Option<u32>) -> Message {
        add_flow(priority, group.map(Action::Group).into_iter().collect())
    }

    /// The reply's control type, or its error.
    fn reply(r: &[(u32, Message)]) -> Result<u16, OfpError> {
        match r {
            [(
                _,
                Message::Experimenter {
                    experimenter: b::ONF_VENDOR,
                    exp_type: b::ET_BUNDLE_CONTROL,
                    data,
                },
            )] => Ok(BundleCtrl::parse(data).expect("control").ty),
            _ => Err(error_of(r).unwrap_or_else(|| panic!("{r:?}"))),
        }
    }

    #[test]
    fn a_bundle_commits_all_in_order_or_nothing() {
        let mut s = sw();
        let mut c = open(&mut s, 1, Instant::now());
        let atomic = b::flags::ATOMIC | b::flags::ORDERED;
        assert_eq!(
            reply(&ask(
                &mut c,
                &mut s,
                &control(7, ctrl::OPEN_REQUEST, atomic),
                2
            )),
            Ok(ctrl::OPEN_REPLY)
        );
        for (i, p) in [10u16, 20, 30].into_iter().enumerate() {
            let xid = 10 + i as u32;
            assert!(ask(&mut c, &mut s, &add(7, atomic, &flow(p, None), xid), xid).is_empty());
        }
        assert_eq!(s.bridge.tables.len(), 0, "nothing before the commit");
        let gen = s.bridge.generations();
        assert_eq!(
            reply(&ask(
                &mut c,
                &mut s,
                &control(7, ctrl::COMMIT_REQUEST, atomic),
                3
            )),
            Ok(ctrl::COMMIT_REPLY)
        );
        assert_eq!(s.bridge.tables.len(), 3);
        assert_ne!(s.bridge.generations(), gen);

        // A bad message in the middle: its error with its xid, then
        // MSG_FAILED for the commit; the tables as before the bundle.
        ask(&mut c, &mut s, &add(8, 0, &flow(40, None), 20), 20);
        ask(&mut c, &mut s, &add(8, 0, &flow(50, Some(99)), 21), 21);
        ask(&mut c, &mut s, &add(8, 0, &flow(60, None), 22), 22);
        let before = s.bridge.tables.len();
        let r = ask(&mut c, &mut s, &control(8, ctrl::COMMIT_REQUEST, 0), 4);
        match &r[..] {
            [(21, Message::Error { error: e1, .. }), (4, Message::Error { error: e2, data })] => {
                assert_eq!(*e1, OfpError::new(2, 9), "BAD_OUT_GROUP for the flow mod");
                assert_eq!(*e2, onf_error(be::MSG_FAILED));
                assert_eq!(&data[..4], &b::ONF_VENDOR.to_be_bytes(), "ONF's error");
            }
            r => panic!("{r:?}"),
        }
        assert_eq!(
            s.bridge.tables.len(),
            before,
            "the first add rolled back too"
        );
        // The bundle is gone after a commit, good or bad.
        assert_eq!(
            reply(&ask(
                &mut c,
                &mut s,
                &control(8, ctrl::COMMIT_REQUEST, 0),
                5
            )),
            Err(onf_error(be::BAD_ID))
        );
        // The rolled-back tables go on working.
        assert!(ask(&mut c, &mut s, &flow(70, None), 6).is_empty());
        assert_eq!(s.bridge.tables.len(), before + 1);
    }

    #[test]
    fn bundle_misuse_gets_the_error_onf_names_and_the_connection_stays() {
        let mut s = sw();
        let mut c = open(&mut s, 1, Instant::now());
        let ask_r = |c: &mut Connection, s: &mut Sw, m: &Message, xid| reply(&ask(c, s, m, xid));
        // (bundle, control type, flags): the answer.
        let steps = [
            ((1, ctrl::OPEN_REQUEST, 0), Ok(ctrl::OPEN_REPLY)),
            ((1, ctrl::OPEN_REQUEST, 0), Err(onf_error(be::BUNDLE_EXIST))),
            ((2, ctrl::CLOSE_REQUEST, 0), Err(onf_error(be::BAD_ID))),
            ((1, ctrl::CLOSE_REQUEST, 1), Err(onf_error(be::BAD_FLAGS))),
            ((1, 99, 0), Err(onf_error(be::BAD_TYPE))),
            ((1, ctrl::OPEN_REQUEST, 0x80), Err(onf_error(be::BAD_FLAGS))),
        ];
        for (xid, ((id, ty, flags), want)) in (2..).zip(steps) {
            let got = ask_r(&mut c, &mut s, &control(id, ty, flags), xid);
            assert_eq!(got, want, "bundle {id} type {ty} flags {flags:#x}");
        }
        // The added message's xid must be the add's.
        assert_eq!(
            error_of(&ask(&mut c, &mut s, &add(1, 0, &flow(1, None), 99), 8)),
            Some(onf_error(be::MSG_BAD_XID))
        );
        // Only flow and group mods are bundled.
        let echo = Message::EchoRequest(vec![]);
        assert_eq!(
            error_of(&ask(&mut c, &mut s, &add(1, 0, &echo, 9), 9)),
            Some(onf_error(be::MSG_UNSUP))
        );
        // A message that does not parse answers with its own error.
        let mut broken = bytes(&flow(1, None), 10);
        broken.truncate(20);
        broken[2..4].copy_from_slice(&20u16.to_be_bytes());
        let m = Message::Experimenter {
            experimenter: b::ONF_VENDOR,
            exp_type: b::ET_BUNDLE_ADD_MESSAGE,
            data: [&[0, 0, 0, 1, 0, 0, 0, 0][..], &broken].concat(),
        };
        assert!(
            error_of(&ask(&mut c, &mut s, &m, 10)).is_some_and(|e| e.ty == 1),
            "BAD_REQUEST"
        );
        // Closed: no more adds; discard drops it.
        assert_eq!(
            ask_r(&mut c, &mut s, &control(1, ctrl::CLOSE_REQUEST, 0), 11),
            Ok(ctrl::CLOSE_REPLY)
        );
        assert_eq!(
            error_of(&ask(&mut c, &mut s, &add(1, 0, &flow(1, None), 12), 12)),
            Some(onf_error(be::BUNDLE_CLOSED))
        );
        assert_eq!(
            ask_r(&mut c, &mut s, &control(1, ctrl::DISCARD_REQUEST, 0), 13),
            Ok(ctrl::DISCARD_REPLY)
        );
        assert_eq!(
            ask_r(&mut c, &mut s, &control(1, ctrl::COMMIT_REQUEST, 0), 14),
            Err(onf_error(be::BAD_ID))
        );
        // An add opens its bundle; at most MAX_BUNDLES are open.
        assert!(ask(&mut c, &mut s, &add(5, 0, &flow(1, None), 15), 15).is_empty());
        for id in 100..100 + bundles::MAX_BUNDLES as u32 - 1 {
            assert_eq!(
                ask_r(&mut c, &mut s, &control(id, ctrl::OPEN_REQUEST, 0), 16),
                Ok(ctrl::OPEN_REPLY)
            );
        }
        assert_eq!(
            ask_r(&mut c, &mut s, &control(999, ctrl::OPEN_REQUEST, 0), 17),
            Err(onf_error(be::OUT_OF_BUNDLES))
        );
        assert_eq!(
            ask_r(&mut c, &mut s, &control(5, ctrl::COMMIT_REQUEST, 0), 18),
            Ok(ctrl::COMMIT_REPLY)
        );
        assert_eq!(s.bridge.tables.len(), 1);
        assert_eq!(c.state(), &State::Open);
    }
}

/// `controller(pause)`: the packet-in's continuation, sent back in an
/// NXT_RESUME (as `ovs-ofctl monitor ... resume` and ovn-controller do,
/// with the registers the controller changed), runs what the pause left:
/// the rest of the rule, a resubmit's return, the action set.
#[test]
fn a_paused_pipeline_goes_on_from_its_continuation_with_the_controllers_registers() {
    use crate::text::parse_flow;
    let mut s = sw();
    s.bridge = Bridge::with_ports(1..=4);
    let now = megaflow::Timestamp::from_millis(1);
    for f in [
        "table=0,priority=10,actions=resubmit(,1),output:3",
        "table=1,priority=10,actions=controller(userdata=01.02,pause),resubmit(,2)",
        "table=2,priority=10,reg0=7,actions=output:2",
        "table=2,priority=5,actions=output:4",
    ] {
        s.bridge
            .apply_flow_mod(
                &parse_flow(f, crate::rule::FlowModCommand::Add).expect("flow"),
                now,
            )
            .expect("added");
    }
    let frame = megaflow::frame::FrameSpec::ipv4(
        0xc612_0001,
        0xc612_0002,
        megaflow::frame::L4::udp(1000, 53),
    )
    .build();
    let mut key = megaflow::FlowKey::ZERO;
    megaflow::extract::extract_into(1, &frame, &mut key);
    let t = s.bridge.translate(&key, now);
    let id = t
        .actions
        .iter()
        .find_map(|a| match a {
            megaflow::DpAction::Userspace(megaflow::actions::UserspaceReason::Controller {
                extra: Some(x),
                ..
            }) => x.continuation,
            _ => None,
        })
        .expect("the packet-in carries a continuation");
    // Nothing after the pause runs now.
    assert!(!t
        .actions
        .iter()
        .any(|a| matches!(a, megaflow::DpAction::Output(_))));
    // The packet-in2 as sent, and the NXT_RESUME a controller makes of it
    // (its metadata with reg0 = 7 as OpenFlow 1.5's packet register 0).
    let pin = openflow::flow::PacketIn {
        buffer_id: openflow::flow::NO_BUFFER,
        total_len: frame.len() as u16,
        reason: 1,
        table_id: 1,
        cookie: 0,
        matched: openflow::OxmMatch {
            fields: vec![
                openflow::Oxm::basic(openflow::oxm::ofb::IN_PORT, &1u32.to_be_bytes()),
                // reg0's low 3 bits only (masked), as Open vSwitch encodes
                // a register a controller set some bits of.
                openflow::Oxm {
                    class: openflow::regs::CLASS_PKT_REGS,
                    field: 0,
                    value: (7u64 << 32).to_be_bytes().to_vec(),
                    mask: Some((7u64 << 32).to_be_bytes().to_vec()),
                },
            ],
        },
        data: frame.clone(),
    };
    let body = pin.nx_packet_in2_paused(&[1, 2], Some(id));
    assert_eq!(openflow::flow::PacketIn::continuation_of(&body), Some(id));
    let mut c = open(&mut s, 1, Instant::now());
    let resume = Message::Experimenter {
        experimenter: openflow::action::NX_VENDOR,
        exp_type: openflow::flow::nx_packet_in::RESUME,
        data: body,
    };
    let replies = ask(&mut c, &mut s, &resume, 9);
    assert!(replies.is_empty(), "{replies:?}");
    // reg0 = 7 from the controller: table 2 outputs to 2; then the
    // resubmit returns and table 0's rule outputs to 3.
    assert_eq!(s.resumed, vec!["output:2,output:3".to_string()]);
    // A continuation this switch did not make is stale.
    let stale = Message::Experimenter {
        experimenter: openflow::action::NX_VENDOR,
        exp_type: openflow::flow::nx_packet_in::RESUME,
        data: pin.nx_packet_in2_paused(&[], Some(0xdead)),
    };
    assert_eq!(
        error_of(&ask(&mut c, &mut s, &stale, 10)),
        Some(openflow::flow::nx_packet_in::STALE)
    );
}

//! The connection state machine fed byte streams, as a controller or
//! `ovs-ofctl` would send them.

use super::*;

struct Sw {
    roles: Roles,
    bridge: Bridge,
    /// The generation a revalidator pass has synced (tests move it).
    synced: u64,
    sync_requests: u32,
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
    fn bridge(&mut self) -> &mut Bridge {
        &mut self.bridge
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
}

fn sw() -> Sw {
    Sw {
        roles: Roles::default(),
        bridge: Bridge::new(),
        synced: u64::MAX,
        sync_requests: 0,
    }
}

const PROBE: Duration = Duration::from_secs(5);

fn bytes(m: &Message, xid: u32) -> Vec<u8> {
    m.to_bytes(xid).expect("emit")
}

fn hello13() -> Vec<u8> {
    bytes(
        &Message::Hello {
            bitmap: Some(bitmap_of(4)),
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

fn error_of(replies: &[(u32, Message)]) -> Option<OfpError> {
    match replies {
        [(_, Message::Error { error, .. })] => Some(*error),
        _ => None,
    }
}

#[test]
fn a_peer_without_1_3_gets_hello_failed_and_the_connection_closes() {
    let mut s = sw();
    let t = Instant::now();
    let mut c = Connection::new(1, t, PROBE);
    c.take_output();
    // OpenFlow 1.0 and 1.4 only.
    let hello = Message::Hello {
        bitmap: Some(vec![(1 << 1) | (1 << 5)]),
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
            body: MpRequest::PortDesc,
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

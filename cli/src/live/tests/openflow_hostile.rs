//! A running daemon's OpenFlow channels against hostile clients: streams
//! of malformed messages, more connections than allowed, messages over the
//! size limit, a peer that asks and never reads. Each gets an ERROR of the
//! right type and code or a closed connection; other controllers stay
//! connected and forwarding never stops.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;

use ::openflow::{parse, Framer, Message, MpRequest, MsgType, OfpError};

use super::openflow_tests::{flow_mod, next, raw_client, start_cfg, TempDir};
use super::tests::{frame, wait_for};
use super::*;

/// A seeded stream, so a failure can be replayed.
struct Rng(proptest::test_runner::TestRng);

impl Rng {
    fn new() -> Rng {
        use proptest::test_runner::{RngAlgorithm, TestRng};
        Rng(TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    }
    fn next(&mut self) -> u64 {
        proptest::prelude::Rng::next_u64(&mut self.0)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Valid requests to mutate.
fn seeds() -> Vec<Vec<u8>> {
    use ofproto::FlowModCommand as C;
    let mp = |body| Message::MultipartRequest { flags: 0, body };
    [
        flow_mod(
            "table=0,priority=5,udp,nw_dst=198.18.0.9,tp_dst=53,actions=output:2",
            C::Add,
        ),
        flow_mod(
            "priority=7,in_port=2,dl_vlan=5,actions=strip_vlan,output:1",
            C::Modify,
        ),
        flow_mod("table=1,cookie=0x5/-1", C::Delete),
        mp(MpRequest::Desc),
        mp(MpRequest::Table),
        mp(MpRequest::PortStats(0xffff_ffff)),
        Message::FeaturesRequest,
        Message::BarrierRequest,
        Message::EchoRequest(vec![1, 2, 3]),
    ]
    .iter()
    .map(|m| m.to_bytes(0).expect("emit"))
    .collect()
}

/// Messages that change the switch: a hostile client may send valid ones
/// (that is a controller's right), but this test keeps to malformed input
/// and reads, so the forwarding it checks is the switch's, not the
/// client's choice.
fn changes_the_switch(m: &Message) -> bool {
    !matches!(
        m.ty(),
        MsgType::EchoRequest
            | MsgType::EchoReply
            | MsgType::FeaturesRequest
            | MsgType::GetConfigRequest
            | MsgType::MultipartRequest
            | MsgType::BarrierRequest
            | MsgType::QueueGetConfigRequest
            | MsgType::GetAsyncRequest
            | MsgType::Hello
    )
}

/// What OpenFlow 1.3.5 says a switch answers a malformed request with,
/// written from the spec, not from this codec: a version other than 1.3's
/// is BAD_REQUEST/BAD_VERSION and a type it does not define (above
/// METER_MOD, 29) BAD_REQUEST/BAD_TYPE (§7.5.4.1 and A.4.4); otherwise
/// the error types a request of that type may get (§7.3 and A.4.4: every
/// request BAD_REQUEST; a FLOW_MOD also BAD_ACTION, BAD_INSTRUCTION,
/// BAD_MATCH, FLOW_MOD_FAILED; a MULTIPART request also BAD_MATCH (flow
/// and aggregate stats), BAD_ACTION and TABLE_FEATURES_FAILED; ...).
fn spec_answer(m: &[u8]) -> (Option<OfpError>, &'static [u16]) {
    const REQUEST: &[u16] = &[1];
    let (version, ty) = (m[0], m[1]);
    if version != 4 {
        return (Some(OfpError::BAD_VERSION), REQUEST);
    }
    if ty > 29 {
        return (Some(OfpError::BAD_TYPE), REQUEST);
    }
    let types: &'static [u16] = match ty {
        // A malformed HELLO after the handshake: HELLO_FAILED, or (a body
        // its length does not frame) BAD_REQUEST/BAD_LEN.
        0 => &[0, 1],
        9 => &[1, 10],
        13 => &[1, 2],
        14 => &[1, 2, 3, 4, 5],
        15 => &[1, 2, 6],
        16 => &[1, 7],
        17 => &[1, 8],
        18 => &[1, 2, 4, 13],
        22 => &[1, 9],
        24 => &[1, 11],
        29 => &[1, 12],
        _ => REQUEST,
    };
    (None, types)
}

/// One mutated message (its header's length kept true, so the stream
/// stays framed) and whether the codec takes it (a taken one is answered
/// as any request); `None` for one it takes that would change the switch
/// (the codec only filters: what an error must be comes from
/// [`spec_answer`]).
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Option<(Vec<u8>, bool)> {
    let mut m = seeds[rng.below(seeds.len())].clone();
    match rng.below(7) {
        // Flipped bytes past the header.
        0 | 1 => {
            for _ in 0..=rng.below(4) {
                if m.len() > 8 {
                    let i = 8 + rng.below(m.len() - 8);
                    m[i] ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            let keep = 8 + rng.below(m.len().saturating_sub(8).max(1));
            m.truncate(keep.min(m.len()));
        }
        3 => m[1] = rng.next() as u8,
        4 => m[0] = [1u8, 2, 3, 5, 6, 0xff][rng.below(6)],
        5 => m.extend((0..1 + rng.below(40)).map(|_| rng.next() as u8)),
        _ => {
            m = (0..8 + rng.below(120)).map(|_| rng.next() as u8).collect();
            m[0] = 4;
        }
    }
    let xid = rng.next() as u32 | 1;
    m[4..8].copy_from_slice(&xid.to_be_bytes());
    let len = m.len() as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    match parse(&m) {
        Err(_) => Some((m, false)),
        Ok((_, msg)) if changes_the_switch(&msg) => None,
        Ok(_) => Some((m, true)),
    }
}

/// Reads until the ECHO_REPLY with `xid`: every message before it, or
/// `None` if the switch closed the connection.
fn until_echo(s: &mut UnixStream, f: &mut Framer, xid: u32) -> Option<Vec<(u32, Message)>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        while let Some(raw) = f.next_message().expect("the switch frames what it sends") {
            let (h, m) = parse(&raw).expect("the switch sends valid OpenFlow 1.3");
            if h.xid == xid && matches!(m, Message::EchoReply(_)) {
                return Some(got);
            }
            got.push((h.xid, m));
        }
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => f.push(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("no answer from the switch: {e}"),
        }
    }
}

#[test]
fn a_hostile_stream_gets_errors_or_a_close_while_other_controllers_and_forwarding_go_on() {
    const MESSAGES: usize = 3000;
    let dir = TempDir::new("hostile");
    let sock = dir.0.join("br0.mgmt");
    let (d, of, h) = start_cfg(&sock, 5000, |_| {});
    let board = of.board();
    let (mut b, mut fb) = raw_client(&sock);
    let (mut a, mut fa) = raw_client(&sock);
    let seeds = seeds();
    let mut rng = Rng::new();
    let (mut sent, mut errors, mut answered, mut closes, mut forwarded) = (0, 0, 0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while sent < MESSAGES && Instant::now() < deadline {
        let Some((msg, taken)) = mutate(&mut rng, &seeds) else {
            continue;
        };
        let (exact, types) = spec_answer(&msg);
        sent += 1;
        let probe = 0x8000_0000 | sent as u32;
        a.write_all(&msg).expect("send");
        a.write_all(&Message::EchoRequest(vec![]).to_bytes(probe).expect("echo"))
            .expect("send echo");
        match until_echo(&mut a, &mut fa, probe) {
            Some(got) => {
                let xid = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
                let errs: Vec<OfpError> = got
                    .iter()
                    .filter_map(|(x, m)| match m {
                        Message::Error { error, .. } if *x == xid => Some(*error),
                        _ => None,
                    })
                    .collect();
                assert!(errs.len() <= 1, "{msg:02x?}: more than one ERROR: {errs:?}");
                if let Some(&e) = errs.first() {
                    assert!(
                        exact.is_none_or(|want| e == want) && types.contains(&e.ty),
                        "{msg:02x?}: ERROR {e:?}, the spec says {exact:?} or a type of {types:?}"
                    );
                    assert!(e.is_defined(), "{msg:02x?}: {e:?} is not in the spec");
                    errors += 1;
                } else {
                    assert!(
                        exact.is_none(),
                        "{msg:02x?}: no ERROR, the spec says {exact:?}"
                    );
                    answered += 1;
                }
                // What the codec refuses the switch refuses too.
                assert!(
                    taken || !errs.is_empty(),
                    "{msg:02x?} refused by the codec, not answered with an ERROR"
                );
            }
            None => {
                // Only a stream the switch cannot frame any more is closed.
                closes += 1;
                (a, fa) = raw_client(&sock);
            }
        }
        if sent % 100 == 0 {
            let f = frame(5000 + (sent / 100) as u16);
            assert!(h["vm1"].rx.inject(&f, Default::default()));
            let mut seen = false;
            wait_for("vm1 → vm2 while the hostile client sends", || {
                seen |= h["vm2"].received().contains(&f);
                seen
            });
            forwarded += 1;
        }
    }
    eprintln!(
        "hostile: {sent} messages: {errors} errors as expected, {answered} answered, \
         {closes} connections closed; {forwarded} frames forwarded meanwhile"
    );
    assert_eq!(sent, MESSAGES, "within the time bound");
    assert!(errors > MESSAGES / 2, "most were malformed: {errors}");
    // Every message kept a true length of at least a header, so the
    // stream always framed: no connection had reason to be closed.
    assert_eq!(closes, 0, "connections closed on a framed stream");
    // The other controller never noticed.
    b.write_all(&Message::EchoRequest(vec![7]).to_bytes(77).expect("echo"))
        .expect("echo");
    loop {
        let (xid, m) = next(&mut b, &mut fb);
        if xid == 77 {
            assert_eq!(m, Message::EchoReply(vec![7]));
            break;
        }
    }
    assert!(board.connections().iter().all(|c| c.state == "open"));
    of.stop();
    d.stop().expect("stop");
}

/// A client that has finished its handshake (or `None`: the switch closed
/// it before its HELLO).
fn try_client(sock: &std::path::Path) -> Option<(UnixStream, Framer)> {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => None,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
        Ok(n) => {
            let hello = Message::Hello {
                bitmap: Some(::openflow::bitmap_of(4)),
            };
            s.write_all(&hello.to_bytes(1).expect("emit"))
                .expect("hello");
            let mut f = Framer::new();
            f.push(&buf[..n]);
            let first = f.next_message().expect("frames").expect("a whole HELLO");
            assert!(matches!(parse(&first), Ok((_, Message::Hello { .. }))));
            Some((s, f))
        }
        Err(e) => panic!("read: {e}"),
    }
}

#[test]
fn connections_past_the_limit_are_closed_at_accept_and_room_is_made_when_one_ends() {
    let dir = TempDir::new("maxconn");
    let sock = dir.0.join("br0.mgmt");
    let (d, of, _) = start_cfg(&sock, 5000, |c| c.max_connections = 3);
    let board = of.board();
    let mut open: Vec<_> = (0..3)
        .map(|_| try_client(&sock).expect("within the limit"))
        .collect();
    wait_for("3 open", || board.connections().len() == 3);
    for _ in 0..5 {
        assert!(try_client(&sock).is_none(), "a fourth connection is closed");
    }
    assert_eq!(board.refused(), 5);
    // The three are served.
    for (i, (s, f)) in open.iter_mut().enumerate() {
        s.write_all(
            &Message::EchoRequest(vec![])
                .to_bytes(i as u32 + 5)
                .expect("echo"),
        )
        .expect("echo");
        assert_eq!(next(s, f), (i as u32 + 5, Message::EchoReply(vec![])));
    }
    drop(open.pop());
    wait_for("one gone", || board.connections().len() == 2);
    assert!(try_client(&sock).is_some(), "room again");
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn a_message_over_the_size_limit_closes_only_its_connection() {
    let dir = TempDir::new("maxmsg");
    let sock = dir.0.join("br0.mgmt");
    let (d, of, _) = start_cfg(&sock, 5000, |c| c.max_message_bytes = 1024);
    let board = of.board();
    let (mut a, mut fa) = raw_client(&sock);
    let (mut b, mut fb) = raw_client(&sock);
    let small = Message::EchoRequest(vec![1; 1000]);
    a.write_all(&small.to_bytes(3).expect("emit"))
        .expect("send");
    assert_eq!(
        next(&mut a, &mut fa),
        (3, Message::EchoReply(vec![1; 1000]))
    );
    let big = Message::EchoRequest(vec![1; 2000]);
    a.write_all(&big.to_bytes(4).expect("emit")).expect("send");
    let (_, m) = next(&mut a, &mut fa);
    assert!(
        matches!(m, Message::Error { error, .. } if error == OfpError::BAD_LEN),
        "{m:?}"
    );
    let mut rest = Vec::new();
    let _ = a.read_to_end(&mut rest);
    wait_for("a closed", || board.connections().len() == 1);
    b.write_all(&Message::EchoRequest(vec![2]).to_bytes(5).expect("emit"))
        .expect("send");
    assert_eq!(next(&mut b, &mut fb), (5, Message::EchoReply(vec![2])));
    of.stop();
    d.stop().expect("stop");
}

/// `n` DESC requests (each answered with over 1 KB) in one write.
fn desc_burst(n: u32, first_xid: u32) -> Vec<u8> {
    let desc = Message::MultipartRequest {
        flags: 0,
        body: MpRequest::Desc,
    };
    (0..n)
        .flat_map(|i| desc.to_bytes(first_xid + i).expect("emit"))
        .collect()
}

#[test]
fn a_peer_that_asks_and_does_not_read_is_held_back_then_dropped_and_others_go_on() {
    const N: u32 = 3000;
    let dir = TempDir::new("maxqueue");
    let sock = dir.0.join("br0.mgmt");
    // Probe 1 s: a peer that takes nothing for 2 s is dropped.
    let (d, of, h) = start_cfg(&sock, 1000, |c| c.max_queued_bytes = 65_535);
    let board = of.board();
    let (mut x, mut fx) = raw_client(&sock);
    let (mut y, _) = raw_client(&sock);
    let (mut z, mut fz) = raw_client(&sock);
    wait_for("3 open", || board.connections().len() == 3);
    let ids: Vec<u64> = board.connections().iter().map(|c| c.id).collect();
    // x asks for 3 MB of replies and waits a little before reading: the
    // switch stops reading x's requests while x's replies wait.
    x.write_all(&desc_burst(N, 100)).expect("x asks");
    std::thread::sleep(Duration::from_millis(500));
    let rx_x = board
        .connections()
        .iter()
        .find(|c| c.id == ids[0])
        .map(|c| c.rx_msgs)
        .expect("x listed");
    assert!(
        rx_x < u64::from(N),
        "x's requests are held back while it does not read: {rx_x} read"
    );
    let mut xids = Vec::new();
    while xids.len() < N as usize {
        match next(&mut x, &mut fx) {
            (xid, Message::MultipartReply { .. }) => xids.push(xid),
            (xid, Message::EchoRequest(d)) => x
                .write_all(&Message::EchoReply(d).to_bytes(xid).expect("emit"))
                .expect("echo reply"),
            (_, Message::PortStatus(_)) => {}
            other => panic!("x: {other:?}"),
        }
    }
    assert_eq!(
        xids,
        (100..100 + N).collect::<Vec<_>>(),
        "every reply, in order"
    );
    // y asks the same and never reads: dropped, and meanwhile z is served
    // and vm1's traffic forwarded.
    y.write_all(&desc_burst(N, 100)).expect("y asks");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        z.write_all(&Message::EchoRequest(vec![]).to_bytes(9).expect("emit"))
            .expect("z echo");
        loop {
            match next(&mut z, &mut fz) {
                (9, Message::EchoReply(_)) => break,
                (xid, Message::EchoRequest(d)) => z
                    .write_all(&Message::EchoReply(d).to_bytes(xid).expect("emit"))
                    .expect("echo reply"),
                _ => {}
            }
        }
        let f = frame(6000);
        assert!(h["vm1"].rx.inject(&f, Default::default()));
        let mut seen = false;
        wait_for("vm1 → vm2 while y stalls", || {
            seen |= h["vm2"].received().contains(&f);
            seen
        });
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for("y dropped", || {
        board.connections().iter().all(|c| c.id != ids[1])
    });
    let mut got = Vec::new();
    y.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = y.read_to_end(&mut got);
    assert!(
        got.len() < N as usize * 1000,
        "y got {} bytes before it was dropped",
        got.len()
    );
    assert!(board.connections().iter().any(|c| c.id == ids[2]));
    of.stop();
    d.stop().expect("stop");
}

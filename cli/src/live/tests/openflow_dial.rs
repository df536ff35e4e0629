//! Controllers the switch dials: its fail modes without one (standalone
//! falls back to NORMAL, secure keeps the tables) and two controllers'
//! roles (a slave cannot modify flows until it becomes master).

use std::io::{Read, Write};

use ::openflow::{parse, Framer, Message, OfpError};

use super::openflow_tests::*;
use super::tests::{frame, wait_for};
use super::*;

/// The next connection to `l` within `limit`: a switch that never dials
/// fails the test (`what` names it), never hangs it. The stream is
/// blocking again, its reads bounded to 5 s.
pub(super) fn accept_within(
    l: &std::net::TcpListener,
    limit: Duration,
    what: &str,
) -> std::net::TcpStream {
    l.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + limit;
    let s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{what}: not within {limit:?}: {e}"),
        }
    };
    s.set_nonblocking(false).expect("blocking");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Accepts the switch's connection on `l` and completes the handshake as
/// a controller would.
fn accept_switch(l: &std::net::TcpListener) -> (std::net::TcpStream, Framer) {
    let mut s = accept_within(l, Duration::from_secs(10), "the switch connects");
    let mut f = Framer::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = f.next_message().expect("framing") {
            let (_, m) = parse(&m).expect("parse");
            assert!(matches!(m, Message::Hello { .. }), "{m:?}");
            break;
        }
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed");
        f.push(&buf[..n]);
    }
    let hello = Message::Hello {
        bitmap: Some(::openflow::bitmap_of(4)),
    };
    s.write_all(&hello.to_bytes(1).expect("emit"))
        .expect("hello");
    (s, f)
}

/// Sends a frame from vm2 (the config's table has no rule for it: drop)
/// and says whether vm1 got it within `wait`.
fn vm2_reaches_vm1(h: &Vms, sport: u16, wait: Duration) -> bool {
    let f = probe(sport);
    assert!(h["vm2"].rx.inject(&f, Default::default()));
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if h["vm1"].received().contains(&f) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// vm2's frame of a new flow (UDP source port `sport`) to vm1.
fn probe(sport: u16) -> Vec<u8> {
    megaflow::frame::FrameSpec::ipv4(0xc612_0002, 0xc612_0001, megaflow::frame::L4::udp(sport, 7))
        .build()
}

/// That vm2's frame of a new flow is dropped and does not reach vm1,
/// decided by an event, not a window: the slow path counted a drop (a
/// handler counts a packet after sending its outputs, so a frame sent
/// anywhere would be out first) and vm1 has nothing. A frame forwarded
/// instead is never counted as a drop: the wait fails the test.
fn vm2_does_not_reach_vm1(h: &Vms, core: &Core<SimBackend>, sport: u16) -> bool {
    let f = probe(sport);
    let before = lock(core).counters().sw_drops;
    assert!(h["vm2"].rx.inject(&f, Default::default()));
    wait_for("vm2's frame dropped by the slow path", || {
        lock(core).counters().sw_drops > before
    });
    !h["vm1"].received().contains(&f)
}

#[test]
fn standalone_falls_back_to_normal_without_a_controller_and_reconnects() {
    let dir = TempDir::new("standalone");
    let sock = dir.0.join("br0.mgmt");
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let (d, of, h) = start_cfg(&sock, 200, |c| {
        c.controllers = vec![format!("tcp:{addr}")];
        c.fail_mode = "standalone".into();
    });
    // The switch has connected (the kernel accepted) but no controller
    // answered: after the probe interval it switches with NORMAL, so
    // vm2's frame, which the table drops, floods to vm1.
    let core = d.core();
    wait_for("fail-open", || lock(&core).pipeline().bridge().fail_open());
    assert!(
        vm2_reaches_vm1(&h, 100, Duration::from_secs(5)),
        "NORMAL floods"
    );
    // A controller answers: the tables again (the frame is dropped).
    let (c, _f) = accept_switch(&l);
    let board = of.board();
    wait_for("the controller listed open", || {
        board
            .connections()
            .iter()
            .any(|x| x.listener.starts_with("tcp:") && x.state == "open")
    });
    wait_for("fail-open left", || {
        !lock(&core).pipeline().bridge().fail_open()
    });
    // The pass the change asked for re-translates the cached megaflows.
    wait_for("the megaflows revalidated", || {
        let sw = lock(&core);
        let tables = sw.pipeline().bridge().generations().tables;
        sw.pipeline().synced_tables() >= tables
    });
    assert!(vm2_does_not_reach_vm1(&h, &core, 101), "tables back");
    // The controller goes away: the switch reconnects (backoff from 1 s).
    drop(c);
    let (_c, _f) = accept_switch(&l);
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn secure_keeps_the_tables_without_a_controller() {
    let dir = TempDir::new("secure");
    let sock = dir.0.join("br0.mgmt");
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let (d, of, h) = start_cfg(&sock, 100, |c| {
        c.controllers = vec![format!("tcp:{addr}")];
        c.fail_mode = "secure".into();
    });
    assert!(vm2_does_not_reach_vm1(&h, &d.core(), 100), "secure drops");
    // The config's flows still forward.
    assert!(h["vm1"].rx.inject(&frame(1000), Default::default()));
    wait_for("vm1 → vm2 still", || !h["vm2"].received().is_empty());
    drop(l);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn a_second_controller_in_slave_role_cannot_modify_flows_until_it_becomes_master() {
    use ::openflow::message::role;
    let dir = TempDir::new("slave");
    let sock = dir.0.join("br0.mgmt");
    let la = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let lb = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (aa, ab) = (la.local_addr().expect("a"), lb.local_addr().expect("b"));
    let (d, of, _h) = start_cfg(&sock, 5000, |c| {
        c.controllers = vec![format!("tcp:{aa}"), format!("tcp:{ab}")];
        c.fail_mode = "secure".into();
    });
    let (mut a, mut fa) = accept_switch(&la);
    let (mut b, mut fb) = accept_switch(&lb);
    let ask = |s: &mut std::net::TcpStream, f: &mut Framer, m: &Message, xid: u32| {
        s.write_all(&m.to_bytes(xid).expect("emit")).expect("send");
        s.write_all(&Message::BarrierRequest.to_bytes(xid + 1).expect("emit"))
            .expect("barrier");
        let mut got = Vec::new();
        loop {
            let (x, m) = next_reply(s, f);
            if x == xid + 1 && m == Message::BarrierReply {
                return got;
            }
            got.push(m);
        }
    };
    let role_req = |r, g| {
        Message::RoleRequest(::openflow::Role {
            role: r,
            generation_id: g,
        })
    };
    let r = ask(&mut a, &mut fa, &role_req(role::MASTER, 1), 10);
    assert!(
        matches!(&r[..], [Message::RoleReply(x)] if x.role == role::MASTER),
        "{r:?}"
    );
    let r = ask(&mut b, &mut fb, &role_req(role::SLAVE, 1), 10);
    assert!(
        matches!(&r[..], [Message::RoleReply(x)] if x.role == role::SLAVE),
        "{r:?}"
    );
    let core = d.core();
    let rules = || lock(&core).pipeline().bridge().tables().len();
    let before = rules();
    // The slave's flow mod is refused with IS_SLAVE and changes nothing.
    let add = flow_mod("priority=50,udp,actions=drop", ofproto::FlowModCommand::Add);
    let r = ask(&mut b, &mut fb, &add, 20);
    assert!(
        matches!(&r[..], [Message::Error { error, .. }] if *error == OfpError::IS_SLAVE),
        "{r:?}"
    );
    assert_eq!(rules(), before);
    // The master's goes in.
    assert!(ask(&mut a, &mut fa, &add, 20).is_empty());
    assert_eq!(rules(), before + 1);
    let board = of.board();
    let listed = board.connections();
    assert!(
        listed.iter().any(|c| c.role == "master") && listed.iter().any(|c| c.role == "slave"),
        "{listed:?}"
    );
    // The master goes away; the slave takes over with a newer generation
    // and may now change the tables.
    drop(a);
    let r = ask(&mut b, &mut fb, &role_req(role::MASTER, 2), 30);
    assert!(
        matches!(&r[..], [Message::RoleReply(x)] if x.role == role::MASTER),
        "{r:?}"
    );
    let del = flow_mod("priority=50,udp", ofproto::FlowModCommand::DeleteStrict);
    assert!(ask(&mut b, &mut fb, &del, 40).is_empty());
    assert_eq!(rules(), before);
    // The old master reconnects (backoff from 1 s) and claims mastership
    // with its stale generation: refused.
    let (mut a, mut fa) = accept_switch(&la);
    let r = ask(&mut a, &mut fa, &role_req(role::MASTER, 1), 50);
    assert!(
        matches!(&r[..], [Message::Error { error, .. }] if *error == OfpError::ROLE_STALE),
        "{r:?}"
    );
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

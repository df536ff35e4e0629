//! Runtime control of the OpenFlow side: controllers and the fail mode
//! changed while the switch runs (`eswitchctl set-controller`,
//! `set-fail-mode`), as `ovs-vsctl` changes Open vSwitch's.

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

use super::openflow_dial_tests::accept_within;
use super::openflow_tests::{start, TempDir};

#[test]
fn controllers_and_the_fail_mode_change_while_the_switch_runs() {
    let dir = TempDir::new("set-controller");
    let sock = dir.0.join("br0.mgmt");
    let (d, of) = start(&sock, 5000);
    let (board, core) = (of.board(), d.core());
    assert!(board.controllers().is_empty());
    // A controller listening: dialled once it is set.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let target = format!("tcp:{}", l.local_addr().expect("addr"));
    let set = board
        .set_controllers(&core, std::slice::from_ref(&target))
        .expect("set-controller");
    assert_eq!(set, vec![target.clone()]);
    let accept = |what: &str| accept_within(&l, Duration::from_secs(10), what);
    let mut c = accept("the switch dials the new controller");
    let mut buf = [0u8; 8];
    c.read_exact(&mut buf).expect("the switch's HELLO");
    assert_eq!(buf[1], 0, "OFPT_HELLO");
    // A bad target changes nothing.
    let e = board
        .set_controllers(&core, &[target.clone(), "tls:198.18.0.1:6653".into()])
        .expect_err("bad target");
    assert!(format!("{e:#}").contains("expected tcp:IP:PORT"), "{e:#}");
    assert_eq!(board.controllers(), vec![target.clone()]);
    // The same set again: the connection stays, no second dial.
    board
        .set_controllers(&core, std::slice::from_ref(&target))
        .expect("same");
    std::thread::sleep(Duration::from_millis(300));
    assert!(l.accept().is_err(), "no second connection");
    // Removed: its connection is closed.
    assert!(board.set_controllers(&core, &[]).expect("del").is_empty());
    let mut rest = Vec::new();
    let closed = c.read_to_end(&mut rest);
    assert!(
        closed.is_ok(),
        "the switch closes the connection: {closed:?}"
    );
    // The fail mode.
    assert_eq!(board.fail_mode(), "standalone");
    assert_eq!(board.set_fail_mode("secure").expect("secure"), "secure");
    assert_eq!(board.fail_mode(), "secure");
    let e = board.set_fail_mode("open").expect_err("bad mode");
    assert!(
        e.to_string().contains("expected standalone or secure"),
        "{e}"
    );
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

//! `ovs-vsctl set-ssl` and an `ssl:` controller against `eswitchd run
//! --ovsdb`, as a user sets up a TLS controller for Open vSwitch: the keys
//! and certificates come from the database's `SSL` row (made by Open
//! vSwitch's own `ovs-pki`), the controller from its `Controller` row.
//!
//! Checked: once both are set, eswitchd dials the controller (a Python TLS
//! server that requires a client certificate signed by the switch CA),
//! completes the handshake with the switch certificate the `SSL` row names
//! and sends an OpenFlow HELLO; a controller whose certificate is not from
//! the controller CA the row names is refused (no HELLO reaches it); after
//! `ovs-vsctl del-ssl` no TLS connection is made at all.
//!
//! Needs root (the lab's conventions), ovs-pki, openssl, python3 and the
//! OVN lab's tools (`SKIP` otherwise).

mod ovn;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ovn::{wait_for, Ovn};

const T: &str = "set_ssl_and_an_ssl_controller_in_the_database_make_eswitchd_dial_it_over_tls";
const H: &str = "h1";

/// A TLS controller on 127.0.0.1 holding `cert`/`key`, requiring a client
/// certificate from `client_ca`: prints its port, then `HELLO <version>`
/// for the first OpenFlow HELLO it reads (or `REFUSED`), then ends.
fn controller(cert: &str, key: &str, client_ca: &str) -> (std::process::Child, u16) {
    let py = format!(
        "import ssl,socket\n\
         ctx=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
         ctx.load_cert_chain('{cert}','{key}')\n\
         ctx.load_verify_locations('{client_ca}')\n\
         ctx.verify_mode=ssl.CERT_REQUIRED\n\
         s=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(4)\n\
         print(s.getsockname()[1],flush=True)\ns.settimeout(15)\n\
         while True:\n\
         \x20 c,_=s.accept()\n\
         \x20 try:\n\
         \x20   t=ctx.wrap_socket(c,server_side=True)\n\
         \x20   h=t.recv(8)\n\
         \x20   if len(h)==8 and h[1]==0:\n\
         \x20     print('HELLO',h[0],flush=True)\n\
         \x20     break\n\
         \x20 except Exception as e:\n\
         \x20   print('REFUSED',type(e).__name__,flush=True)\n"
    );
    let mut child = Command::new("python3")
        .args(["-c", &py])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    let out = child.stdout.as_mut().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("port");
    (child, line.trim().parse().expect("a port"))
}

/// What the controller printed after its port (it ends on a HELLO, or
/// is killed after `limit`).
fn outcome(mut c: std::process::Child, limit: Duration) -> String {
    let done = wait_for(limit, || matches!(c.try_wait(), Ok(Some(_))));
    if done.is_none() {
        let _ = c.kill();
    }
    c.wait_with_output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn set_ssl_and_an_ssl_controller_in_the_database_make_eswitchd_dial_it_over_tls() {
    if !ovn::can_run(T) {
        return;
    }
    let (Some(pki_bin), Some(_)) = (prereq::tool(T, "ovs-pki"), prereq::tool(T, "openssl")) else {
        return;
    };
    let mut ovn = Ovn::new(T, "ossl");
    let dir = ovn.dir.clone();
    let pki = |args: &[&str]| {
        let out = Command::new(&pki_bin)
            .current_dir(&dir)
            .args(args)
            .output()
            .expect("ovs-pki");
        assert!(
            out.status.success(),
            "{T}: ovs-pki {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    pki(&["--dir=pki", "init"]);
    pki(&["--dir=pki", "req+sign", "ctl", "controller"]);
    pki(&["--dir=pki", "req+sign", "sc", "switch"]);
    pki(&["--dir=rogue", "init"]);
    pki(&["--dir=rogue", "req+sign", "rogue", "controller"]);
    let f = |n: &str| dir.join(n).display().to_string();

    ovn.host_db(H, "198.19.0.1");
    ovn.eswitchd(H, None);

    // The switch's keys: its certificate, and the CA its controllers'
    // certificates must come from.
    ovn.vsctl(
        H,
        &[
            "set-ssl",
            &f("sc-privkey.pem"),
            &f("sc-cert.pem"),
            &f("pki/controllerca/cacert.pem"),
        ],
    );
    // A controller holding `who`'s certificate, made br-int's controller:
    // what it saw within `wait`.
    let dial = |who: &str, wait: u64| {
        let (ctl, port) = controller(
            &f(&format!("{who}-cert.pem")),
            &f(&format!("{who}-privkey.pem")),
            &f("pki/switchca/cacert.pem"),
        );
        ovn.vsctl(
            H,
            &["set-controller", "br-int", &format!("ssl:127.0.0.1:{port}")],
        );
        outcome(ctl, Duration::from_secs(wait))
    };
    let said = dial("ctl", 15);
    assert!(said.contains("HELLO"), "{T}: the controller saw: {said:?}");

    // A controller whose certificate is from another CA: eswitchd does not
    // talk OpenFlow to it.
    let said = dial("rogue", 4);
    assert!(
        !said.contains("HELLO"),
        "{T}: a rogue controller got: {said:?}"
    );

    // No SSL row: no TLS at all.
    ovn.vsctl(H, &["del-ssl"]);
    let said = dial("ctl", 4);
    assert!(
        !said.contains("HELLO"),
        "{T}: TLS without an SSL row: {said:?}"
    );
    let log = std::fs::read_to_string(ovn.path(&format!("{H}/eswitchd.log"))).unwrap_or_default();
    assert!(log.contains("SSL keys and certificates set"), "{T}: {log}");
    // The rogue was refused by eswitchd's check of its certificate.
    assert!(log.contains("invalid peer certificate"), "{T}: {log}");
    assert!(log.contains("needs keys and certificates"), "{T}: {log}");
}

//! TLS OpenFlow channels with real peers: `ovs-ofctl -p KEY -c CERT -C
//! CACERT ... ssl:` against a `pssl:` listener, os-ken as a TLS controller
//! the switch dials with `ssl:`, and peers without a valid certificate
//! refused. The certificates come from Open vSwitch's own `ovs-pki`, so
//! its PKI layout (a switch CA and a controller CA) is what is tested.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::openflow_tests::{
    collect_lines, l2_frame, ofctl_to, start_daemon, wait_for_long, Child, TempDir,
};
use super::tests::{config, flows, wait_for};
use super::*;
use crate::config::SslConfig;

/// Open vSwitch's PKI in a directory: `ovs-pki init` (a switch CA and a
/// controller CA), a switch certificate (`sc-*`), a controller one
/// (`ctl-*`), and a certificate from another PKI (`rogue-*`).
struct Pki(PathBuf);

impl Pki {
    fn make(test: &str, dir: &Path) -> Option<Pki> {
        let bin = prereq::tool(test, "ovs-pki")?;
        prereq::tool(test, "openssl")?;
        let exec = |exe: &Path, cwd: &Path, args: &[&str]| {
            let out = Command::new(exe)
                .current_dir(cwd)
                .args(args)
                .output()
                .expect("run it");
            assert!(
                out.status.success(),
                "{} {args:?}: {}",
                exe.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let run = |args: &[&str]| exec(&bin, dir, args);
        let openssl = |cwd: &Path, args: &[&str]| exec(Path::new("openssl"), cwd, args);
        run(&["--dir=pki", "init"]);
        run(&["--dir=pki", "req+sign", "ctl", "controller"]);
        run(&["--dir=pki", "req+sign", "sc", "switch"]);
        run(&["--dir=rogue-pki", "init"]);
        run(&["--dir=rogue-pki", "req+sign", "rogue", "controller"]);
        // A controller certificate from the right CA that expired in 2020.
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "old-privkey.pem",
                "-out",
                "old-req.pem",
                "-subj",
                "/C=US/ST=CA/O=Open vSwitch/OU=controller/CN=old controller",
            ],
        );
        openssl(
            &dir.join("pki/controllerca"),
            &[
                "ca",
                "-config",
                "ca.cnf",
                "-batch",
                "-extensions",
                "usr_cert",
                "-startdate",
                "20200101000000Z",
                "-enddate",
                "20200102000000Z",
                "-in",
                "../../old-req.pem",
                "-out",
                "../../old-cert.pem",
            ],
        );
        Some(Pki(dir.to_path_buf()))
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    /// The switch's side: its key and certificate, and the controller CA.
    fn switch(&self) -> SslConfig {
        SslConfig {
            private_key: self.0.join("sc-privkey.pem"),
            certificate: self.0.join("sc-cert.pem"),
            ca_cert: self.0.join("pki/controllerca/cacert.pem"),
        }
    }

    /// `-p KEY -c CERT -C CACERT` for a client with certificate `who`.
    fn client_args(&self, who: &str) -> Vec<String> {
        vec![
            "-p".into(),
            self.file(&format!("{who}-privkey.pem")),
            "-c".into(),
            self.file(&format!("{who}-cert.pem")),
            "-C".into(),
            self.file("pki/switchca/cacert.pem"),
        ]
    }
}

/// A test peer's view of the server: any certificate will do (what is
/// tested is the server's check of the client).
#[derive(Debug)]
struct AnyServer(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A rustls client that completes its side of the handshake with the
/// `pssl:` listener at `addr`, showing the certificate and key of `who`
/// (`None`: none at all), then sends an OpenFlow HELLO: the bytes that
/// came back, or the error that ended it (a refusing server sends an
/// alert instead of OpenFlow).
fn tls_peer(addr: std::net::SocketAddr, pki: &Pki, who: Option<&str>) -> Result<Vec<u8>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(std::sync::Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(AnyServer(provider)));
    let cfg = match who {
        None => builder.with_no_client_auth(),
        Some(w) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_file_iter(pki.file(&format!("{w}-cert.pem")))
                    .expect("cert")
                    .collect::<Result<_, _>>()
                    .expect("cert");
            let key =
                PrivateKeyDer::from_pem_file(pki.file(&format!("{w}-privkey.pem"))).expect("key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        }
    };
    let name = ServerName::try_from("switch").expect("name");
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).expect("conn");
    let mut sock = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    let hello = ::openflow::Message::Hello {
        bitmap: Some(::openflow::bitmap_of(4)),
    };
    tls.write_all(&hello.to_bytes(1).expect("hello"))
        .map_err(|e| format!("write: {e}"))?;
    let mut got = vec![0u8; 64];
    match tls.read(&mut got) {
        Ok(n) => {
            got.truncate(n);
            Ok(got)
        }
        Err(e) => Err(format!("read: {e}")),
    }
}

fn ofctl_ssl(bin: &Path, pki: &Pki, who: &str, port: u16, args: &[&str]) -> Result<String, String> {
    let target = format!("ssl:127.0.0.1:{port}");
    ofctl_to(bin, &pki.client_args(who), args[0], &target, &args[1..])
}

/// The Python of the os-ken virtualenv the test command makes.
fn osken_python() -> PathBuf {
    std::env::var_os("ESWITCH_OSKEN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/osken-venv/bin/python")
        })
}

/// The os-ken L2 learning app (integration/osken/run.py), listening on a
/// free loopback port, its output collected; stopped on drop.
pub(super) struct OsKen {
    _child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl OsKen {
    /// Started with run.py's `extra` arguments (the TLS files), once it
    /// listens; `None` after skipping `test` if os-ken is not installed.
    pub(super) fn start(test: &str, extra: &[String]) -> Option<(OsKen, u16)> {
        let python = osken_python();
        if !python.exists() {
            prereq::skip(
                test,
                format!(
                    "os-ken is not installed at {} (integration/scripts/test.sh makes that \
                     virtualenv; or set ESWITCH_OSKEN_PYTHON)",
                    python.display()
                ),
            );
            return None;
        }
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        drop(l);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/osken/run.py");
        let mut child = Child(
            Command::new(&python)
                .arg(&script)
                .arg(port.to_string())
                .args(extra)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("start os-ken"),
        );
        let lines = collect_lines(child.0.stdout.take().expect("stdout"));
        let app = OsKen {
            _child: child,
            lines,
        };
        wait_for_long("os-ken listening", || app.seen("listening") > 0);
        Some((app, port))
    }

    /// Lines of its output that contain `what`.
    pub(super) fn seen(&self, what: &str) -> usize {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l.contains(what))
            .count()
    }
}

#[test]
fn pssl_serves_ovs_ofctl_with_certificates_and_refuses_peers_without_a_valid_one() {
    const T: &str = "pssl_serves_ovs_ofctl_with_certificates_and_refuses_peers_without_a_valid_one";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("pssl");
    let Some(pki) = Pki::make(T, &dir.0) else {
        return;
    };
    let sock = dir.0.join("br0.mgmt");
    let (d, of, h) = start_daemon(&sock, 5000, &config(), &flows(), |c| {
        c.listen.push("pssl:0".into());
        c.ssl = Some(pki.switch());
    });
    let addr = of.local_addrs()[1].expect("pssl address");
    assert!(
        addr.ip().is_loopback(),
        "pssl:PORT listens on loopback: {addr}"
    );
    let port = addr.port();
    let show = ofctl_ssl(&bin, &pki, "ctl", port, &["show"]).expect("show over TLS");
    assert!(show.contains("dpid:00000000000000ab"), "{show}");
    ofctl_ssl(
        &bin,
        &pki,
        "ctl",
        port,
        &["add-flow", "priority=20,in_port=2,actions=output:1"],
    )
    .expect("add-flow over TLS");
    let dump = ofctl_ssl(&bin, &pki, "ctl", port, &["dump-flows"]).expect("dump-flows");
    assert!(
        dump.contains("priority=20,in_port=2 actions=output:1")
            || dump.contains("priority=20,in_port=vm2 actions=output:vm1"),
        "{dump}"
    );
    // The flow it added forwards.
    let f = super::tests::frame(4000);
    assert!(h["vm2"].rx.inject(&f, Default::default()));
    wait_for("vm2 → vm1 by the flow added over TLS", || {
        h["vm1"].received().contains(&f)
    });
    let board = of.board();
    // A certificate from another CA: the handshake fails, nothing is
    // served.
    let e = ofctl_ssl(&bin, &pki, "rogue", port, &["show"]).expect_err("a rogue certificate");
    assert!(!e.contains("dpid:"), "{e}");
    // Peers that complete their side of the handshake (ovs-ofctl without
    // -c refuses on its own side, so it would prove nothing): the same
    // client gets the switch's HELLO with the controller certificate, and
    // an alert, never OpenFlow, with none, another CA's or an expired one.
    let good = tls_peer(addr, &pki, Some("ctl")).expect("a valid certificate is served");
    assert_eq!(
        good.first(),
        Some(&::openflow::V15),
        "the switch's HELLO: {good:02x?}"
    );
    for who in [None, Some("rogue"), Some("old")] {
        let got = tls_peer(addr, &pki, who);
        assert!(
            !matches!(&got, Ok(b) if b.first() == Some(&::openflow::V15)),
            "{who:?}: served OpenFlow: {got:02x?}"
        );
        let e = got.err().unwrap_or_default();
        assert!(
            e.contains("alert") || e.contains("Alert") || e.is_empty(),
            "{who:?}: ended by a TLS alert, not {e}"
        );
    }
    // Plain OpenFlow on the TLS port: no HELLO back, the connection ends.
    let mut plain = TcpStream::connect(addr).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let hello = ::openflow::Message::Hello {
        bitmap: Some(::openflow::bitmap_of(4)),
    };
    plain
        .write_all(&hello.to_bytes(1).expect("hello"))
        .expect("send");
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(
        got.first() != Some(&::openflow::V15),
        "a plain client got OpenFlow back: {got:02x?}"
    );
    // None of them is listed, and a good client is still served.
    wait_for("the refused connections gone", || {
        board.connections().is_empty()
    });
    let show = ofctl_ssl(&bin, &pki, "ctl", port, &["show"]).expect("show again");
    assert!(show.contains("dpid:00000000000000ab"), "{show}");
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn an_os_ken_controller_over_tls_programs_eswitchd() {
    const T: &str = "an_os_ken_controller_over_tls_programs_eswitchd";
    let dir = TempDir::new("osken-tls");
    let Some(pki) = Pki::make(T, &dir.0) else {
        return;
    };
    // os-ken holds the controller certificate and trusts the switch CA.
    let tls = [
        pki.file("ctl-privkey.pem"),
        pki.file("ctl-cert.pem"),
        pki.file("pki/switchca/cacert.pem"),
    ];
    let Some((app, port)) = OsKen::start(T, &tls) else {
        return;
    };
    let seen = |what: &str| app.seen(what);
    let sock = dir.0.join("br0.mgmt");
    let empty = FlowFile::parse("").expect("empty table");
    let (d, of, h) = start_daemon(&sock, 5000, &config(), &empty, |c| {
        c.controllers = vec![format!("ssl:127.0.0.1:{port}")];
        c.fail_mode = "secure".into();
        c.ssl = Some(pki.switch());
    });
    wait_for_long("os-ken sees the switch over TLS", || {
        seen("connected dpid=00000000000000ab") > 0
    });
    let board = of.board();
    // Waited for, not sampled: under load os-ken may drop its first
    // connection (CI saw one reset after the handshake), and the switch
    // dials again.
    let target = format!("ssl:127.0.0.1:{port}");
    wait_for_long("the TLS connection to os-ken open", || {
        board
            .connections()
            .iter()
            .any(|c| c.listener == target && c.state == "open")
    });
    wait_for("the app's table-miss entry", || {
        lock(&d.core()).pipeline().bridge().tables().len() == 1
    });
    // vm1 → vm2: a packet-in over TLS, flooded back by the app.
    let a = l2_frame(1, 2, 1000);
    assert!(h["vm1"].rx.inject(&a, Default::default()));
    wait_for_long("the flood on vm2", || h["vm2"].received().contains(&a));
    let b = l2_frame(2, 1, 1000);
    assert!(h["vm2"].rx.inject(&b, Default::default()));
    wait_for_long("vm2 → vm1", || h["vm1"].received().contains(&b));
    wait_for_long("a learned flow", || seen("flow in_port=") >= 1);
    of.stop();
    d.stop().expect("stop");
    drop(app);
}

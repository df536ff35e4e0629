use super::*;

const FULL: &str = r#"
flows = "flows.txt"

[backend]
kind = "sim"

[offload]
mode = "hot"
hot_packets = 5
hot_window_ms = 2000
budget = 1000

[limits]
flow_limit = 5000
max_idle_ms = 3000

[[port]]
name = "vm1"
ofport = 1
vport = "vf0"

[[port]]
name = "uplink"
ofport = 9
vport = "p0"
"#;

#[test]
fn a_full_config_gives_ports_and_pipeline_settings() {
    let c = Config::parse(FULL).expect("parses");
    let ports = c.port_specs().expect("ports");
    assert_eq!(ports.len(), 2);
    assert_eq!((ports[0].no, ports[0].vport), (PortNo(1), Some(Vport(1))));
    assert_eq!(ports[1].vport, Some(Vport::UPLINK));
    let p = c.pipeline().expect("pipeline");
    assert_eq!(
        p.offload.mode,
        OffloadMode::Hot {
            packets: 5,
            window_ns: 2_000 * MS
        }
    );
    assert_eq!(p.offload.budget, Some(1000));
    assert_eq!(p.revalidator.flow_limit, 5000);
    assert_eq!(
        p.revalidator.port_flow_limit, 625,
        "an eighth of the flow limit"
    );
    assert_eq!(p.revalidator.max_idle_ns, 3_000 * MS);
    assert_eq!(p.revalidator.interval_ns, 500 * MS, "default kept");
}

#[test]
fn an_empty_config_is_all_defaults() {
    let c = Config::parse("").expect("parses");
    let p = c.pipeline().expect("pipeline");
    assert_eq!(p.offload, OffloadPolicy::default());
    assert_eq!(p.revalidator, RevalidatorConfig::default());
    assert!(c.port_specs().expect("ports").is_empty());
}

#[test]
fn errors_name_the_bad_key_or_value() {
    for (text, want) in [
        ("[offload]\nmode = \"sometimes\"", "offload.mode = \"sometimes\""),
        ("[offload]\nhot_pakets = 3", "hot_pakets"),
        ("[backend]\nkind = \"dpdk\"", "backend.kind = \"dpdk\""),
        (
            "[backend]\nslow_path = \"rings\"",
            "backend.slow_path = \"rings\": expected \"verbs\"",
        ),
        ("[limits]\nflow_limit = 0", "limits.flow_limit = 0"),
        (
            "[[port]]\nname = \"a\"\nofport = 1\nvport = \"vf0\"\n[[port]]\nname = \"b\"\nofport = 1\nvport = \"vf1\"",
            "clashes with port \"a\"",
        ),
        ("[[port]]\nname = \"a\"\nofport = 1\nvport = \"vfx\"", "bad vport \"vfx\""),
        ("flows = 3", "flows"),
        ("[datapath]\nthreads = 0", "datapath.threads = 0: expected 1 to 64"),
        ("[datapath]\nthreads = 65", "datapath.threads = 65"),
        (
            "[openflow]\nlisten = [\"pssl:6653\"]",
            "openflow.listen: pssl:6653:127.0.0.1 needs [openflow.ssl]",
        ),
        (
            "[openflow]\ncontrollers = [\"ssl:198.18.0.1:6653\"]",
            "\"ssl:198.18.0.1:6653\" needs [openflow.ssl]",
        ),
        (
            "[openflow]\ncontrollers = [\"tls:198.18.0.1:6653\"]",
            "expected tcp:IP:PORT or ssl:IP:PORT",
        ),
        ("[openflow]\nlisten = [\"tcp:6653\"]", "expected punix:PATH, ptcp:PORT[:IP] or pssl:PORT[:IP]"),
        ("[openflow]\nmax_connections = 0", "openflow.max_connections = 0"),
        ("[openflow]\nmax_message_bytes = 10", "openflow.max_message_bytes = 10: expected 64 to 65535"),
        ("[openflow]\nmax_queued_bytes = 100", "openflow.max_queued_bytes = 100"),
        ("[openflow.ssl]\nprivate_key = \"k.pem\"", "missing field `certificate`"),
        (
            "[sflow]\ncollectors = [\"198.18.0.1\"]",
            "sflow.collectors: \"198.18.0.1\": expected IP:PORT",
        ),
        ("[sflow]\nheader_bytes = 8", "sflow.header_bytes = 8: expected 14 to 1024"),
        ("[sflow]\nmax_datagram_bytes = 200", "sflow.max_datagram_bytes = 200: expected 272"),
        ("[sflow]\nqueue = 0", "sflow.queue = 0"),
        ("[sflow]\nsampling_rat = 10", "sampling_rat"),
        ("[sflow.ports]\nvm9 = 10", "sflow.ports.vm9: no [[port]] named \"vm9\""),
    ] {
        let e = format!("{:#}", Config::parse(text).expect_err(text));
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn listeners_are_loopback_unless_an_address_is_given_and_ssl_paths_follow_the_config() {
    let dir = std::env::temp_dir().join(format!("esw-cfg-ssl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("eswitch.toml");
    std::fs::write(
        &path,
        "[openflow]\nlisten = [\"ptcp:6653\", \"pssl:6654\", \"pssl:6655:198.18.0.1\"]\n\
         controllers = [\"tcp:198.18.0.2:6653\", \"ssl:[::1]:6653\"]\n\
         [openflow.ssl]\nprivate_key = \"sc-privkey.pem\"\ncertificate = \"/etc/x/sc-cert.pem\"\n\
         ca_cert = \"pki/cacert.pem\"\n",
    )
    .expect("write");
    let cfg = Config::load(&path).expect("config");
    let _ = std::fs::remove_dir_all(&dir);
    let eps: Vec<String> = cfg
        .openflow
        .endpoints()
        .expect("endpoints")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        eps,
        [
            "ptcp:6653:127.0.0.1",
            "pssl:6654:127.0.0.1",
            "pssl:6655:198.18.0.1"
        ]
    );
    let ctls: Vec<String> = cfg
        .openflow
        .controller_addrs()
        .expect("controllers")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ctls, ["tcp:198.18.0.2:6653", "ssl:[::1]:6653"]);
    let ssl = cfg.openflow.ssl.expect("ssl");
    assert_eq!(ssl.private_key, dir.join("sc-privkey.pem"));
    assert_eq!(
        ssl.certificate,
        std::path::PathBuf::from("/etc/x/sc-cert.pem")
    );
    assert_eq!(ssl.ca_cert, dir.join("pki/cacert.pem"));
}

#[test]
fn tls_files_that_are_missing_or_wrong_are_named() {
    let dir = std::env::temp_dir().join(format!("esw-cfg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").expect("write");
    let ssl = |k: &str, c: &str, ca: &str| crate::config::SslConfig {
        private_key: dir.join(k),
        certificate: dir.join(c),
        ca_cert: dir.join(ca),
    };
    for (cfg, want) in [
        (
            ssl("nokey.pem", "not.pem", "not.pem"),
            "openflow.ssl.certificate",
        ),
        (
            ssl("nokey.pem", "absent.pem", "not.pem"),
            "openflow.ssl.certificate",
        ),
    ] {
        let e = format!(
            "{:#}",
            crate::live::tls::TlsSettings::load(&cfg).expect_err(want)
        );
        assert!(e.contains(want), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sflow_rates_come_from_the_port_or_the_default_and_only_with_a_collector() {
    let text = "[sflow]\nsampling_rate = 100\n[sflow.ports]\nvm1 = 7\nvm2 = 0\n\
                [[port]]\nname = \"vm1\"\nofport = 1\nvport = \"vf0\"\n\
                [[port]]\nname = \"vm2\"\nofport = 2\nvport = \"vf1\"\n\
                [[port]]\nname = \"vm3\"\nofport = 3\nvport = \"vf2\"\n";
    let mut cfg = Config::parse(text).expect("config");
    assert_eq!(cfg.sflow.rate_of("vm1"), 0, "no collector: no sampling");
    cfg.sflow.collectors = vec!["127.0.0.1:6343".into()];
    let rates: Vec<u32> = ["vm1", "vm2", "vm3", "later"]
        .iter()
        .map(|n| cfg.sflow.rate_of(n))
        .collect();
    assert_eq!(rates, [7, 0, 100, 100]);
    let d = Config::default().sflow;
    assert_eq!(
        (d.polling_interval, d.header_bytes, d.max_datagram_bytes),
        (20, 128, 1400)
    );
}

const TUNNELS: &str = r#"
[[port]]
name = "vm1"
ofport = 1
vport = "vf0"

[[port]]
name = "wire0"
ofport = 100
type = "uplink"

[[port]]
name = "vx0"
ofport = 200
type = "vxlan"
options = { remote_ip = "198.19.0.2", key = 4242, csum = true }

[underlay]
local = ["198.19.0.1"]

[[underlay.next_hop]]
remote = "198.19.0.2"
port = "wire0"
mac = "02:00:00:00:ff:02"
mtu = 9000
"#;

#[test]
fn tunnel_ports_and_a_given_underlay() {
    let c = Config::parse(TUNNELS).expect("config");
    let specs = c.port_specs().expect("ports");
    let vx = specs.iter().find(|p| p.name == "vx0").expect("vx0");
    assert_eq!(vx.kind, PortKind::Vxlan);
    assert_eq!(vx.vport, None);
    let t = vx.tunnel.as_ref().expect("options");
    assert_eq!(t.key, ofproto::tunnel::FromFlow::Fixed(4242));
    assert!(t.csum);
    let u = c
        .underlay
        .as_ref()
        .expect("underlay")
        .underlay(&specs)
        .expect("underlay");
    assert_eq!(
        u.local,
        vec!["198.19.0.1".parse::<std::net::IpAddr>().unwrap()]
    );
    let (remote, hop) = u.hops[0];
    assert_eq!(remote, "198.19.0.2".parse::<std::net::IpAddr>().unwrap());
    assert_eq!(
        (hop.port, hop.mtu, hop.src),
        (PortNo(100), 9000, u.local[0])
    );
    assert_eq!(hop.eth_dst, [2, 0, 0, 0, 0xff, 2]);
}

#[test]
fn bad_tunnel_config_is_named() {
    for (from, to, want) in [
        ("key = 4242", "key = \"x\"", "option key=\"x\""),
        (
            "type = \"vxlan\"",
            "type = \"vxlan\"\nvport = \"vf3\"",
            "with no vport",
        ),
        (
            "port = \"wire0\"",
            "port = \"vm1\"",
            "next_hop.port = \"vm1\": not an uplink",
        ),
        (
            "mac = \"02:00:00:00:ff:02\"",
            "mac = \"02:00\"",
            "next_hop.mac = \"02:00\"",
        ),
        (
            "local = [\"198.19.0.1\"]",
            "local = [\"nowhere\"]",
            "underlay local = \"nowhere\"",
        ),
    ] {
        let text = TUNNELS.replace(from, to);
        let e = Config::parse(&text)
            .and_then(|c| {
                let specs = c.port_specs()?;
                c.underlay.expect("underlay").underlay(&specs).map(|_| ())
            })
            .expect_err(want);
        assert!(format!("{e:#}").contains(want), "{e:#} (wanted {want})");
    }
    // Options on a port that takes none.
    let text = TUNNELS.replace(
        "type = \"uplink\"",
        "type = \"uplink\"\noptions = { remote_ip = \"1.2.3.4\" }",
    );
    let e = Config::parse(&text)
        .and_then(|c| c.port_specs())
        .expect_err("options");
    assert!(format!("{e:#}").contains("takes no options"), "{e:#}");
}

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
    assert_eq!((ports[0].no, ports[0].vport), (PortNo(1), Vport(1)));
    assert_eq!(ports[1].vport, Vport::UPLINK);
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
        ("[limits]\nflow_limit = 0", "limits.flow_limit = 0"),
        (
            "[[port]]\nname = \"a\"\nofport = 1\nvport = \"vf0\"\n[[port]]\nname = \"b\"\nofport = 1\nvport = \"vf1\"",
            "clashes with port \"a\"",
        ),
        ("[[port]]\nname = \"a\"\nofport = 1\nvport = \"vfx\"", "bad vport \"vfx\""),
        ("flows = 3", "flows"),
        ("[datapath]\nthreads = 0", "datapath.threads = 0: expected 1 to 64"),
        ("[datapath]\nthreads = 65", "datapath.threads = 65"),
    ] {
        let e = format!("{:#}", Config::parse(text).expect_err(text));
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

use serde_json::json;

use super::*;

/// The byte column where `word` starts in `line`.
fn col(line: &str, word: &str) -> usize {
    line.find(word)
        .unwrap_or_else(|| panic!("{word} in {line:?}"))
}

#[test]
fn tables_align_columns_and_right_align_numbers() {
    let t = table(
        "",
        &["NAME", "RX", "STATE"],
        &[
            vec!["vm1".into(), "5".into(), "up".into()],
            vec!["a-long-name".into(), "12345".into(), "down".into()],
        ],
    );
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0], "NAME            RX  STATE");
    assert_eq!(lines[1], "vm1              5  up");
    assert_eq!(lines[2], "a-long-name  12345  down");
    // Header only for no rows, indented when asked.
    assert_eq!(table("  ", &["A", "B"], &[]), "  A  B\n");
}

#[test]
fn show_fills_live_columns_or_dashes() {
    let v = json!({"ports": [
        {"name": "vm1", "ofport": 1, "type": "representor", "vport": "vf0", "rx_packets": 10,
         "tx_hw_packets": 3, "tx_sw_packets": 4, "tx_bytes": 700},
        {"name": "vm2-long", "ofport": 2, "type": "uplink", "vport": "uplink", "rx_packets": 0,
         "tx_hw_packets": 0, "tx_sw_packets": 0, "tx_bytes": 0,
         "ifindex": 42, "state": "up", "kind": "af_packet",
         "rx_dropped": 2, "tx_dropped": 1},
    ]});
    let out = show(&v);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    for h in [
        "NAME", "OFPORT", "TYPE", "VPORT", "IFINDEX", "STATE", "IO", "RX", "TX(hw)", "TX(sw)",
        "DROPS",
    ] {
        assert!(lines[0].contains(h), "{h}: {}", lines[0]);
    }
    // The replay port has no live status.
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "vm1",
            "1",
            "representor",
            "vf0",
            "-",
            "-",
            "-",
            "10",
            "3",
            "4",
            "-"
        ]
    );
    let cells: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "vm2-long",
            "2",
            "uplink",
            "uplink",
            "42",
            "up",
            "af_packet",
            "0",
            "0",
            "0",
            "3"
        ]
    );
    // Columns line up: VPORT starts at the same place in every line.
    assert_eq!(col(lines[0], "VPORT"), col(lines[1], "vf0"));
    assert_eq!(col(lines[0], "TYPE"), col(lines[2], "uplink"));
    // No ports: just the header.
    assert_eq!(show(&json!({"ports": []})).lines().count(), 1);
    assert_eq!(show(&json!({})).lines().count(), 1);
}

#[test]
fn dump_flows_prints_one_dpctl_line_per_megaflow() {
    let v = json!({"flows": [
        {"match": "in_port(1),eth_type(0x0800),ipv4(dst=198.18.0.2)", "actions": "output:2",
         "packets": 4, "bytes": 400, "used": 1.25, "offloaded": "yes", "state": "offloaded",
         "line": "ignored"},
        {"match": "any", "actions": "drop", "packets": 0, "bytes": 0, "used": "never",
         "offloaded": "no (not hot)"},
        {"line": "an old daemon's line"},
    ]});
    let out = dump_flows(&v);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "in_port(1),eth_type(0x0800),ipv4(dst=198.18.0.2), packets:4, bytes:400, used:1.250s, offloaded:yes actions:output:2"
    );
    assert_eq!(
        lines[1],
        "any, packets:0, bytes:0, used:never, offloaded:no (not hot) actions:drop"
    );
    assert_eq!(lines[2], "an old daemon's line");
    assert_eq!(dump_flows(&json!({"flows": []})), "");
    // Missing counters print as dashes rather than failing.
    let partial = dump_flows(&json!({"flows": [{"match": "any"}]}));
    assert_eq!(
        partial,
        "any, packets:-, bytes:-, used:-, offloaded:- actions:-\n"
    );
}

#[test]
fn dump_of_reads_like_ovs_ofctl() {
    let v = json!({"rules": [
        {"rule": "priority=10,ip,nw_dst=198.18.0.2,actions=output:2", "packets": 3, "bytes": 180},
    ]});
    assert_eq!(
        dump_of(&v),
        " n_packets=3, n_bytes=180, priority=10,ip,nw_dst=198.18.0.2,actions=output:2\n"
    );
    assert_eq!(dump_of(&json!({"rules": []})), "");
}

fn device() -> serde_json::Value {
    json!({
        "domains": [{"id": "d0", "type": "FDB", "allow_duplicates": true}],
        "tables": [
            {"id": "t0", "domain": "d0", "domain_type": "FDB", "level": 0, "matchers": 1, "rules": 1},
            {"id": "t1", "domain": "d0", "domain_type": "FDB", "level": 1, "matchers": 1, "rules": 2},
            {"id": "t2", "domain": "d0", "domain_type": "FDB", "level": 2, "matchers": 0, "rules": 0},
        ],
        "matchers": [
            {"id": "m0", "table": "t0", "level": 0, "priority": 0, "criteria": 0, "blocks": [],
             "mask": [], "rules": 1},
            {"id": "m1", "table": "t1", "level": 1, "priority": 1, "criteria": 9,
             "blocks": ["outer", "misc2"],
             "mask": [{"name": "outer.ip_version", "value": "0x4"},
                      {"name": "outer.dst_ip", "value": "255.255.255.0"},
                      {"name": "misc2.metadata_reg_c_0", "value": "0xffff0000"}],
             "rules": 2},
        ],
        "rules": [
            {"id": "r0", "matcher": "m0", "table": "t0", "value": [],
             "actions": ["dest_table(level 1)"], "counter": null},
            {"id": "r1", "matcher": "m1", "table": "t1",
             "value": [{"name": "outer.ip_version", "value": "4"},
                       {"name": "outer.dst_ip", "value": "198.18.0.0"},
                       {"name": "misc2.metadata_reg_c_0", "value": "0x20000"}],
             "actions": ["counter(bulk 0 + 0)", "dest_vport(3)"],
             "counter": {"packets": 12345, "bytes": 999}},
            {"id": "r22", "matcher": "m1", "table": "t1",
             "value": [{"name": "outer.dst_ip", "value": "10.0.0.0"}],
             "actions": ["counter(bulk 0 + 1)", "drop"],
             "counter": {"packets": 7, "bytes": 420}},
        ],
    })
}

#[test]
fn dump_rules_groups_tables_matchers_and_rules() {
    let out = dump_rules(&device());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "domain d0 (FDB, duplicates allowed)");
    assert_eq!(lines[1], "  table t0 level 0 (FDB): 1 matcher, 1 rule");
    assert_eq!(lines[2], "    matcher m0 priority 0 mask: any");
    assert!(lines[3].trim_start().starts_with("RULE"), "{}", lines[3]);
    assert_eq!(
        lines[4].split_whitespace().collect::<Vec<_>>(),
        ["r0", "-", "-", "any", "dest_table(level", "1)"]
    );
    assert_eq!(lines[5], "  table t1 level 1 (FDB): 1 matcher, 2 rules");
    assert_eq!(
        lines[6],
        "    matcher m1 priority 1 mask: outer.ip_version=0x4 outer.dst_ip=255.255.255.0 misc2.metadata_reg_c_0=0xffff0000"
    );
    // The rules of m1 as an aligned table: counts right-aligned.
    let (h, r1, r22) = (lines[7], lines[8], lines[9]);
    assert!(r1.starts_with("      r1 "), "{r1}");
    assert!(
        r1.contains("outer.ip_version=4 outer.dst_ip=198.18.0.0 misc2.metadata_reg_c_0=0x20000")
    );
    assert!(r1.ends_with("counter(bulk 0 + 0), dest_vport(3)"), "{r1}");
    assert_eq!(col(h, "PACKETS") + "PACKETS".len(), col(r1, "12345") + 5);
    assert_eq!(col(r1, "12345") + 4, col(r22, "7"));
    assert_eq!(col(h, "ACTIONS"), col(r1, "counter"));
    assert_eq!(col(h, "ACTIONS"), col(r22, "counter"));
    // An empty table: its line only.
    assert_eq!(lines[10], "  table t2 level 2 (FDB): 0 matchers, 0 rules");
    assert_eq!(lines.len(), 11);
    // Nothing programmed.
    assert!(
        dump_rules(&json!({"domains": [], "tables": [], "matchers": [], "rules": []}))
            .starts_with("no domains")
    );
}

#[test]
fn stats_align_names_and_list_nested_counts() {
    let v = json!({
        "packets": 10,
        "upcall_drops_rate": 2,
        "offload_failures": {"action controller": 3, "match tp_src": 1},
        "aged": 0,
        "demoted": {},
    });
    let out = stats(&v);
    let lines: Vec<&str> = out.lines().collect();
    // serde_json keeps keys sorted.
    assert_eq!(lines[0], "aged:              0");
    assert_eq!(lines[1], "demoted:           none");
    assert_eq!(lines[2], "offload_failures:");
    assert_eq!(lines[3], "  action controller: 3");
    assert_eq!(lines[4], "  match tp_src:      1");
    assert_eq!(lines[5], "packets:           10");
    assert_eq!(lines[6], "upcall_drops_rate: 2");
    assert_eq!(stats(&json!({})), "");
}

#[test]
fn trace_and_edits_print_briefly_and_render_dispatches() {
    // The explanation already ends with the megaflow and the actions: they
    // are printed once.
    let explain = "Flow: in_port=1,ip\n\n 0. ip, priority 10\n\nFinal flow: unchanged\n\
                   Megaflow: ip,nw_dst=198.18.0.2\nDatapath actions: output:2\n\
                   Fields: exact: in_port";
    let v = json!({"trace": explain, "megaflow": "ip,nw_dst=198.18.0.2",
                   "actions": "output:2"});
    let out = render("trace", &v);
    assert_eq!(out, format!("{explain}\n"));
    assert_eq!(out.matches("Megaflow:").count(), 1, "{out}");
    assert_eq!(out.matches("Datapath actions:").count(), 1, "{out}");
    assert_eq!(
        render("add-flow", &json!({"added": 1, "replaced": 0})),
        "added 1, replaced 0\n"
    );
    assert_eq!(render("del-flows", &json!({"removed": 2})), "removed 2\n");
    assert_eq!(render("nope", &json!({"a": 1})), "{\n  \"a\": 1\n}\n");
    assert_eq!(text(&json!(null)), "-");
    assert_eq!(text(&json!(true)), "true");
}

use megaflow::frame::{FrameSpec, L4};
use megaflow::PortNo;
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

use super::*;
use crate::switch::{Discard, FlowFile, SimSwitch};

const T0: u64 = 1_700_000_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

fn switch() -> SimSwitch {
    let ports = crate::replay::default_ports(3);
    let flows = FlowFile::parse(
        "priority=10,ip,nw_dst=198.18.0.2,actions=output:2\npriority=0,actions=drop",
    )
    .expect("table");
    SimSwitch::new(
        &ports,
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("switch")
}

fn ok(r: Response) -> Value {
    match r {
        Response::Ok(v) => v,
        Response::Error(e) => panic!("error: {e}"),
    }
}

fn req(line: &str) -> Request {
    parse_request(line).expect("request parses")
}

#[test]
fn requests_parse_from_json_lines_and_bad_ones_are_named() {
    assert_eq!(req(r#"{"cmd":"dump-flows"}"#), Request::DUMP_FLOWS);
    assert_eq!(
        req(r#"{"cmd":"dump-flows","only":"software","reason":"ENOSPC","sort":"bytes"}"#),
        Request::DumpFlows {
            only: Some(FlowKind::Software),
            reason: Some("ENOSPC".into()),
            sort: Some(SortKey::Bytes),
        }
    );
    assert_eq!(
        req(r#"{"cmd":"add-flow","flow":"actions=drop"}"#),
        Request::AddFlow {
            flow: "actions=drop".into()
        }
    );
    assert_eq!(
        req(r#"{"cmd":"del-flows"}"#),
        Request::DelFlows { flow: None }
    );
    let e = parse_request(r#"{"cmd":"dump-everything"}"#).expect_err("unknown");
    assert!(e.contains("dump-everything"), "{e}");
    let e = parse_request("not json").expect_err("garbage");
    assert!(e.starts_with("bad request"), "{e}");
    // Responses are one JSON object each.
    let line = serde_json::to_string(&Response::Error("x".into())).expect("json");
    assert_eq!(line, r#"{"error":"x"}"#);
}

#[test]
fn dump_flows_shows_what_traffic_made_and_where_it_runs() {
    let mut sw = switch();
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 53)).build();
    for i in 0..4 {
        sw.receive(at(i), &[(PortNo(1), &f)], &mut Discard);
    }
    let v = ok(handle(&mut sw, &Request::DUMP_FLOWS, at(10)));
    let flows = v["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0]["offloaded"], "yes");
    assert_eq!(flows[0]["state"], "offloaded");
    assert!(flows[0]["line"]
        .as_str()
        .expect("line")
        .contains("actions:output:2"));
    let s = ok(handle(&mut sw, &Request::Stats, at(10)));
    assert_eq!(s["packets"], 4);
    assert_eq!(s["hw_handled"], 1);
    assert_eq!(s["offloaded"], 1);
    let show = ok(handle(&mut sw, &Request::Show, at(10)));
    assert_eq!(show["ports"][0]["rx_packets"], 4);
    assert_eq!(show["ports"][1]["tx_hw_packets"], 1);
    sw.finish(at(20)).expect("clean");
}

#[test]
fn add_and_delete_flows_change_the_tables_and_bad_ones_change_nothing() {
    let mut sw = switch();
    let v = ok(handle(
        &mut sw,
        &Request::AddFlow {
            flow: "priority=20,udp,tp_dst=53,actions=output:3".into(),
        },
        at(1),
    ));
    assert_eq!(v["added"], 1);
    // The megaflows follow now, not at the next pass due.
    assert!(sw.pipeline().pass_wanted());
    let of = ok(handle(&mut sw, &Request::DumpOf, at(2)));
    assert_eq!(of["rules"].as_array().expect("rules").len(), 3);
    let bad = handle(
        &mut sw,
        &Request::AddFlow {
            flow: "priority=20,udp,tp_dts=53,actions=output:3".into(),
        },
        at(3),
    );
    match bad {
        Response::Error(e) => assert!(e.contains("tp_dts"), "{e}"),
        other => panic!("{other:?}"),
    }
    let tr = ok(handle(
        &mut sw,
        &Request::Trace {
            packet: "in_port=1,udp,nw_dst=198.18.0.2,tp_dst=53".into(),
            ct_next: vec![],
        },
        at(4),
    ));
    assert_eq!(tr["actions"], "output:3");
    let text = tr["trace"].as_str().expect("trace");
    assert!(
        text.contains("priority 20") || text.contains("priority=20"),
        "{text}"
    );
    let d = ok(handle(
        &mut sw,
        &Request::DelFlows {
            flow: Some("udp".into()),
        },
        at(5),
    ));
    assert_eq!(d["removed"], 1);
    let of = ok(handle(&mut sw, &Request::DumpOf, at(6)));
    assert_eq!(of["rules"].as_array().expect("rules").len(), 2);
    sw.finish(at(7)).expect("clean");
}

#[test]
fn dump_flows_gives_match_actions_and_used_apart_from_the_line() {
    let mut sw = switch();
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 53)).build();
    sw.receive(at(0), &[(PortNo(1), &f)], &mut Discard);
    sw.receive(at(250), &[(PortNo(1), &f)], &mut Discard);
    let v = ok(handle(&mut sw, &Request::DUMP_FLOWS, at(1_750)));
    let flow = &v["flows"][0];
    let m = flow["match"].as_str().expect("match");
    assert!(m.contains("198.18.0.2"), "{m}");
    assert!(!m.contains("actions"), "{m}");
    assert_eq!(flow["actions"], "output:2");
    // The second packet went through hardware: the first revalidator pass
    // that folds it in sets `used`; before it, the software hit counts.
    let used = flow["used"].as_f64().expect("seconds");
    assert!((0.0..=1.75).contains(&used), "{used}");
    assert!(flow["line"].as_str().expect("line").starts_with(m.trim()));
    // A flow that never saw a packet says so.
    let line = r#"{"cmd":"add-flow","flow":"priority=30,udp,tp_dst=54,actions=output:3"}"#;
    ok(handle(&mut sw, &req(line), at(1_800)));
    sw.finish(at(2_000)).expect("clean");
}

#[test]
fn stats_carry_the_live_counters() {
    let mut sw = switch();
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0009, L4::udp(1, 53)).build();
    sw.receive(at(0), &[(PortNo(1), &f)], &mut Discard);
    {
        let c = sw.counters_mut();
        c.upcalls_queued = 7;
        c.upcall_drops_rate = 2;
        c.upcall_drops_full = 1;
    }
    let s = ok(handle(&mut sw, &req(r#"{"cmd":"stats"}"#), at(1)));
    assert_eq!(s["upcalls_queued"], 7);
    assert_eq!(s["upcall_drops_rate"], 2);
    assert_eq!(s["upcall_drops_full"], 1);
    // 198.18.0.9 hits priority=0,actions=drop in software.
    assert_eq!(s["sw_drops"], 1);
    assert_eq!(s["hw_drops"], 0);
    assert_eq!(s["packets"], 1);
    sw.finish(at(2)).expect("clean");
}

#[test]
fn dump_rules_shows_the_device_with_decoded_matches_and_counters() {
    assert_eq!(req(r#"{"cmd":"dump-rules"}"#), Request::DumpRules);
    let mut sw = switch();
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 53)).build();
    for i in 0..4 {
        sw.receive(at(i), &[(PortNo(1), &f)], &mut Discard);
    }
    let d = ok(handle(&mut sw, &Request::DumpRules, at(10)));
    assert_eq!(d["domains"][0]["type"], "FDB");
    let levels = super::table_levels(&d);
    assert_eq!(levels, vec![0, 1, 2]);
    let rules = d["rules"].as_array().expect("rules");
    let offloaded: Vec<&Value> = rules
        .iter()
        .filter(|r| {
            r["actions"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "dest_vport(2)"))
        })
        .collect();
    assert_eq!(offloaded.len(), 1, "{rules:?}");
    let r = offloaded[0];
    let value = r["value"].as_array().expect("value");
    let dst = value
        .iter()
        .find(|f| f["name"] == "outer.dst_ip")
        .expect("dst field");
    assert_eq!(dst["value"], "198.18.0.2");
    // What the eSwitch forwarded was counted by the rule.
    let hw = sw.counters().hw_handled;
    assert!(hw > 0);
    assert_eq!(r["counter"]["packets"], hw);
    assert_eq!(r["counter"]["bytes"], hw * f.len() as u64);
    sw.finish(at(20)).expect("clean");
}

#[test]
fn dump_flows_filters_by_where_a_flow_runs_and_why_and_sorts_by_traffic() {
    let mut sw = switch();
    let hot = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(1, 53)).build();
    let cold = FrameSpec::ipv4(0xc612_0001, 0xc612_0009, L4::udp(1, 53)).build();
    sw.receive(at(0), &[(PortNo(1), &cold)], &mut Discard);
    for i in 1..5 {
        sw.receive(at(i), &[(PortNo(1), &hot)], &mut Discard);
    }
    let dump = |sw: &mut _, only, reason: Option<&str>, sort| {
        let req = Request::DumpFlows {
            only,
            reason: reason.map(str::to_string),
            sort,
        };
        let v = ok(handle(sw, &req, at(10)));
        v["flows"].as_array().expect("flows").clone()
    };
    let all = dump(&mut sw, None, None, None);
    assert_eq!(all.len(), 2, "{all:?}");
    let off = dump(&mut sw, Some(FlowKind::Offloaded), None, None);
    assert_eq!(off.len(), 1);
    assert_eq!(off[0]["offloaded"], "yes");
    let soft = dump(&mut sw, Some(FlowKind::Software), None, None);
    assert_eq!(soft.len(), 1);
    assert_ne!(soft[0]["match"], off[0]["match"]);
    assert_eq!(soft[0]["packets"], 1);
    let why = soft[0]["offloaded"].as_str().expect("why").to_string();
    assert!(why.starts_with("no ("), "{why}");
    let reason = &why[4..why.len() - 1];
    assert_eq!(dump(&mut sw, None, Some(reason), None).len(), 1);
    assert!(dump(&mut sw, None, Some("no such reason"), None).is_empty());
    // Most first: the hot flow (its packets in software so far; the one
    // the device forwarded is counted at the next poll) before the cold.
    for (key, field) in [(SortKey::Packets, "packets"), (SortKey::Bytes, "bytes")] {
        let sorted = dump(&mut sw, None, None, Some(key));
        let n: Vec<u64> = sorted
            .iter()
            .map(|f| f[field].as_u64().unwrap_or(0))
            .collect();
        assert!(n[0] > n[1], "{key:?}: {n:?}");
        assert_eq!(sorted[0]["match"], off[0]["match"]);
    }
    sw.finish(at(20)).expect("clean");
}

#[test]
fn dp_stats_count_each_stage_of_a_stateful_table_and_clear_starts_them_again() {
    let ports = crate::replay::default_ports(3);
    let flows = FlowFile::parse(
        "table=0,priority=50,ct_state=-trk,ip actions=ct(table=1,zone=7)\n\
         table=1,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=7),output:2\n\
         table=1,priority=50,ct_state=+trk+est,ip actions=output:1\n\
         table=1,priority=40,ct_state=+trk,ip actions=drop",
    )
    .expect("table");
    let mut cfg = PipelineConfig::default();
    // Software only: every packet runs through the datapath.
    cfg.offload.mode = ofproto::OffloadMode::Off;
    let mut sw = SimSwitch::new(&ports, &flows, cfg, SimConfig::default(), at(0)).expect("switch");
    let out = FrameSpec::ipv4(0xc612_0001, 0xc613_0001, L4::udp(1000, 53)).build();
    let back = FrameSpec::ipv4(0xc613_0001, 0xc612_0001, L4::udp(53, 1000)).build();
    sw.receive(at(1), &[(PortNo(1), &out)], &mut Discard);
    for i in 0..5 {
        sw.receive(at(2 + i), &[(PortNo(2), &back)], &mut Discard);
    }
    let v = ok(handle(&mut sw, &Request::DpStats, at(10)));
    let t = &v["datapaths"][0];
    assert_eq!(v["datapaths"].as_array().expect("threads").len(), 1);
    // Six packets. The first missed at its first stage: the slow path
    // ran both its stages. The second recirculated and missed its second
    // stage (the reply's state, est, was new to it). The other four ran
    // both stages here: the first of them found its second stage by a
    // search and left the hint the other three took.
    assert_eq!(t["packets"], 6);
    assert_eq!(t["recirculations"], 5);
    assert_eq!(t["misses"], 2);
    assert_eq!(t["hinted_hits"], 3);
    assert_eq!(t["passes_per_packet"], 1.83);
    let n = |k: &str| t[k].as_u64().expect("count");
    assert_eq!(
        n("emc_hits") + n("megaflow_hits") + n("hinted_hits") + n("misses"),
        11
    );
    let text = v["text"].as_str().expect("text");
    assert!(
        text.starts_with("datapath thread 0:\n  packets received: 6\n"),
        "{text}"
    );
    assert!(
        text.contains("avg. datapath passes per packet: 1.83\n"),
        "{text}"
    );
    assert_eq!(render::render("dp-stats", &v), text);

    // Cleared: from zero, and only what came after.
    ok(handle(&mut sw, &Request::DpStatsClear, at(11)));
    let v = ok(handle(&mut sw, &Request::DpStats, at(11)));
    assert_eq!(v["datapaths"][0]["packets"], 0);
    assert_eq!(v["datapaths"][0]["passes_per_packet"], 0.0);
    sw.receive(at(12), &[(PortNo(2), &back)], &mut Discard);
    let v = ok(handle(&mut sw, &Request::DpStats, at(13)));
    let t = &v["datapaths"][0];
    assert_eq!(
        (&t["packets"], &t["recirculations"], &t["misses"]),
        (&json!(1), &json!(1), &json!(0))
    );
    assert_eq!(req(r#"{"cmd":"dp-stats-clear"}"#), Request::DpStatsClear);
    sw.finish(at(20)).expect("clean");
}

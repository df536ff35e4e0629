//! A stateful flow table on the sim switch: the tracker every datapath
//! shares decides, `eswitchctl`'s conntrack requests show and change it,
//! and flows with `ct()` stay in software with their reason.

use megaflow::frame::{FrameSpec, L4};
use offload::dr::DrBackend;
use offload::sim::SimConfig;
use ofproto::PipelineConfig;

use super::*;
use crate::control::{handle, Request, Response};

const T0: u64 = 1_700_000_000_000_000_000;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * 1_000_000)
}

#[derive(Default)]
struct Out(Vec<(u32, Vec<u8>)>);

impl Egressor for Out {
    fn tx(&mut self, port: PortNo, frame: &[u8], _: Path) {
        self.0.push((port.0, frame.to_vec()));
    }
}

/// Port 1 may open connections to port 2, SNATed to 198.19.0.1; port 2
/// answers.
const TABLE: &str = "table=0,priority=50,ct_state=-trk,ip actions=ct(table=1,zone=7,nat)
table=1,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=7,nat(src=198.19.0.1)),output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=1 actions=output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=2 actions=output:1
table=1,priority=40,ct_state=+trk,ip actions=drop";

fn ask(sw: &mut SimSwitch, req: Request, ms: u64) -> serde_json::Value {
    match handle(sw, &req, at(ms)) {
        Response::Ok(v) => v,
        Response::Error(e) => panic!("{req:?}: {e}"),
    }
}

fn send(sw: &mut SimSwitch, port: u32, f: Vec<u8>, ms: u64) -> Vec<(u32, Vec<u8>)> {
    let mut out = Out::default();
    sw.receive(at(ms), &[(PortNo(port), &f[..])], &mut out);
    out.0
}

#[test]
fn a_snat_firewall_on_the_sim_switch_with_its_conntrack_requests() {
    let flows = FlowFile::parse(TABLE).expect("table");
    let mut sw = SimSwitch::new(
        &crate::replay::default_ports(2),
        &flows,
        PipelineConfig::default(),
        SimConfig::default(),
        at(0),
    )
    .expect("switch");
    let a = 0xc612_0002u32;
    let b = 0xc612_0003u32;
    let out = send(
        &mut sw,
        1,
        FrameSpec::ipv4(a, b, L4::udp(5000, 53)).build(),
        1,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    let (port, f) = &out[0];
    assert_eq!(*port, 2);
    // Translated on the way out.
    assert_eq!(&f[26..30], &[198, 19, 0, 1]);
    // The reply to the translated address comes back to A.
    let reply = FrameSpec::ipv4(0xc613_0001, b, L4::udp(53, 5000)).build();
    let reply = {
        let mut r = reply;
        // src b, dst 198.19.0.1
        r[26..30].copy_from_slice(&b.to_be_bytes());
        r[30..34].copy_from_slice(&[198, 19, 0, 1]);
        r
    };
    let out = send(&mut sw, 2, reply, 2);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].0, 1);
    assert_eq!(&out[0].1[30..34], &a.to_be_bytes());
    // A stranger from port 2: dropped.
    assert!(send(
        &mut sw,
        2,
        FrameSpec::ipv4(0xc612_0009, a, L4::udp(53, 5001)).build(),
        3
    )
    .is_empty());

    let v = ask(
        &mut sw,
        Request::DumpConntrack {
            zone: None,
            stats: false,
        },
        4,
    );
    let lines: Vec<&str> = v["conns"]
        .as_array()
        .expect("conns is a list")
        .iter()
        .map(|c| c["line"].as_str().expect("each line is text"))
        .collect();
    assert_eq!(
        lines,
        vec!["udp,orig=(src=198.18.0.2,dst=198.18.0.3,sport=5000,dport=53),reply=(src=198.18.0.3,dst=198.19.0.1,sport=53,dport=5000),zone=7"]
    );
    // eswitchctl prints them as dpctl does: one connection a line.
    let shown = crate::control::render::render("dump-conntrack", &v);
    assert_eq!(shown, format!("{}\n", lines[0]));
    let v = ask(
        &mut sw,
        Request::ConntrackStats {
            zone: None,
            verbose: false,
        },
        4,
    );
    assert_eq!(v["text"], "Connections Stats:\n    Total: 1\n  UDP: 1\n");
    assert_eq!(
        crate::control::render::render("conntrack-stats", &v),
        v["text"]
    );
    ask(
        &mut sw,
        Request::CtSetLimits {
            args: vec!["default=10".into(), "zone=7,limit=1".into()],
        },
        4,
    );
    let v = ask(&mut sw, Request::CtGetLimits { zones: vec![] }, 4);
    assert_eq!(v["text"], "default limit=10\nzone=7,limit=1,count=1\n");
    // The zone is full: a second connection is new, not committed, and
    // so dropped by nothing here: it goes out untranslated.
    let out = send(
        &mut sw,
        1,
        FrameSpec::ipv4(a, b, L4::udp(5001, 53)).build(),
        5,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].1[26..30], &a.to_be_bytes());
    assert_eq!(
        ask(
            &mut sw,
            Request::ConntrackStats {
                zone: None,
                verbose: false
            },
            5
        )["zone_full"],
        1
    );
    // The scrape says the same.
    use crate::live::metrics::{encode_snapshot, LiveMetrics, Snapshot};
    let text =
        encode_snapshot(&Snapshot::of(&sw), &[], &LiveMetrics::default(), "sim").expect("scrape");
    for line in [
        "eswitch_conntrack_connections{zone=\"7\"} 1",
        "eswitch_conntrack_created_total 1",
        "eswitch_conntrack_refused_total{reason=\"zone_full\"} 1",
        "eswitch_conntrack_limit 3000000",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    // Trace, stage after stage, as ofproto/trace --ct-next.
    let tr = ask(
        &mut sw,
        Request::Trace {
            packet: "in_port=1,udp,nw_src=198.18.0.2,nw_dst=198.18.0.3,tp_dst=53".into(),
            ct_next: vec!["trk,new".into()],
        },
        6,
    );
    let stages = tr["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 2, "{tr}");
    assert!(
        stages[0]["actions"]
            .as_str()
            .expect("actions are text")
            .starts_with("ct(zone=7,nat),recirc(0x"),
        "{tr}"
    );
    assert_eq!(
        tr["actions"],
        "ct(commit,zone=7,nat(src=198.19.0.1)),output:2"
    );
    assert!(
        tr["trace"]
            .as_str()
            .expect("the trace is text")
            .contains("stage 1: recirc_id=0x"),
        "{tr}"
    );
    let tr = ask(
        &mut sw,
        Request::Trace {
            packet: "in_port=2,udp,nw_dst=198.18.0.2".into(),
            ct_next: vec!["+trk+new".into()],
        },
        6,
    );
    assert_eq!(tr["actions"], "drop", "strangers are dropped: {tr}");
    // Without --ct-next, the trace says where it stops.
    let tr = ask(
        &mut sw,
        Request::Trace {
            packet: "in_port=1,udp".into(),
            ct_next: vec![],
        },
        6,
    );
    assert!(
        tr["trace"]
            .as_str()
            .expect("the trace is text")
            .contains("give --ct-next"),
        "{tr}"
    );
    match handle(
        &mut sw,
        &Request::Trace {
            packet: "in_port=1,udp".into(),
            ct_next: vec!["trk,bogus".into()],
        },
        at(6),
    ) {
        Response::Error(e) => assert!(e.contains("bogus"), "{e}"),
        r => panic!("{r:?}"),
    }
    // Flush by tuple, then everything.
    let v = ask(&mut sw, Request::FlushConntrack { args: vec!["zone=7".into(), "ct_nw_src=198.18.0.2,ct_nw_dst=198.18.0.3,ct_nw_proto=17,ct_tp_src=5000,ct_tp_dst=53".into()] }, 6);
    assert_eq!(v["flushed"], 1);
    match handle(
        &mut sw,
        &Request::FlushConntrack {
            args: vec!["ct_nw_proto=17,ct_tp_src=1".into(), "bogus".into()],
        },
        at(6),
    ) {
        Response::Error(e) => assert!(e.contains("bogus") || e.contains("missing value"), "{e}"),
        r => panic!("{r:?}"),
    }
    assert!(ask(
        &mut sw,
        Request::DumpConntrack {
            zone: None,
            stats: true
        },
        7
    )["conns"]
        .as_array()
        .expect("conns is a list")
        .is_empty());
    // The flow that commits (ct() then an output) stays in software,
    // saying why.
    let flows = ask(
        &mut sw,
        Request::DumpFlows {
            only: None,
            reason: None,
            sort: None,
        },
        8,
    );
    let offl: Vec<&str> = flows["flows"]
        .as_array()
        .expect("flows is a list")
        .iter()
        .map(|f| f["offloaded"].as_str().expect("offloaded is text"))
        .collect();
    assert!(
        offl.iter().any(|o| o.contains("conntrack")
            || o.contains("ct")
            || o.contains("recirc")
            || o.starts_with("no")),
        "{offl:?}"
    );
}

/// A switch with the SNAT firewall; `offload` off keeps everything in
/// software.
fn snat_switch(offload: bool) -> SimSwitch {
    let flows = FlowFile::parse(TABLE).expect("table");
    let mut cfg = PipelineConfig::default();
    if !offload {
        cfg.offload.mode = ofproto::pipeline::OffloadMode::Off;
    }
    SimSwitch::new(
        &crate::replay::default_ports(2),
        &flows,
        cfg,
        SimConfig::default(),
        at(0),
    )
    .expect("switch")
}

/// Round `i` of a UDP conversation between A (port 1, SNATed) and B
/// (port 2) on source port `sport`: A's packet, then B's answer to the
/// translated address.
fn conversation(sport: u16, i: u8) -> [(u32, Vec<u8>); 2] {
    let (a, b) = (0xc612_0002u32, 0xc612_0003u32);
    let mut out = FrameSpec::ipv4(a, b, L4::udp(sport, 53)).build();
    let mut back = FrameSpec::ipv4(b, 0xc613_0001, L4::udp(53, sport)).build();
    // A payload byte that differs per round, checksums kept valid by
    // writing it before the build would be cleaner; the UDP checksum of
    // these frames is zero (not checked).
    let n = out.len();
    out[n - 1] = i;
    let n = back.len();
    back[n - 1] = i;
    [(1, out), (2, back)]
}

#[test]
fn established_connections_go_to_the_fdb_conntrack_table_and_forward_as_software_does() {
    let mut hw = snat_switch(true);
    let mut sw = snat_switch(false);
    let mut ms = 1;
    let run = |hw: &mut SimSwitch, sw: &mut SimSwitch, sport: u16, rounds: u8, ms: &mut u64| {
        for i in 0..rounds {
            for (port, f) in conversation(sport, i) {
                let a = send(hw, port, f.clone(), *ms);
                let b = send(sw, port, f, *ms);
                // The same frames out of the same ports, with or without
                // the device's conntrack table.
                assert_eq!(a, b, "round {i} from port {port}");
                assert_eq!(a.len(), 1, "round {i} from port {port}: {a:?}");
                *ms += 1;
            }
        }
    };
    run(&mut hw, &mut sw, 5000, 40, &mut ms);
    hw.pipeline_mut().revalidate(at(ms));
    let st = hw.pipeline().ct_hw_stats();
    assert_eq!(st.entries, 2, "both directions in the CT table: {st:?}");
    assert_eq!(st.refused, 0, "{st:?}");
    // dump-conntrack says so: which directions, and what they counted.
    let v = ask(
        &mut hw,
        Request::DumpConntrack {
            zone: None,
            stats: false,
        },
        ms,
    );
    let c = &v["conns"][0];
    assert_eq!(c["hw"], serde_json::json!(["orig", "reply"]), "{v}");
    assert!(c["hw_packets"].as_u64().expect("a count") > 0, "{v}");
    let shown = crate::control::render::render("dump-conntrack", &v);
    assert!(shown.ends_with(" hw=(orig,reply)\n"), "{shown}");
    assert!(shown.starts_with("udp,orig=(src=198.18.0.2,"), "{shown}");
    let before = hw.counters();
    let counted = hw.pipeline().ct_hw_stats().packets;
    run(&mut hw, &mut sw, 5000, 20, &mut ms);
    let after = hw.counters();
    // Every packet of the established connection now forwarded by the
    // device: first stage, conntrack entry (NAT included), later stage.
    assert_eq!(
        after.hw_handled - before.hw_handled,
        40,
        "hw {} sw {} restored {}",
        after.hw_handled - before.hw_handled,
        after.sw_handled - before.sw_handled,
        after.ct_restored - before.ct_restored
    );
    assert_eq!(after.sw_handled, before.sw_handled);
    hw.pipeline_mut().revalidate(at(ms));
    // Their entries counted them.
    assert_eq!(hw.pipeline().ct_hw_stats().packets - counted, 40);
    // A scrape says the same.
    use crate::live::metrics::{encode_snapshot, LiveMetrics, Snapshot};
    let st = hw.pipeline().ct_hw_stats();
    let text =
        encode_snapshot(&Snapshot::of(&hw), &[], &LiveMetrics::default(), "sim").expect("scrape");
    for line in [
        "eswitch_conntrack_hw_entries 2".to_string(),
        format!("eswitch_conntrack_hw_packets_total {}", st.packets),
        "eswitch_conntrack_hw_changes_total{change=\"installed\"} 2".to_string(),
        "eswitch_conntrack_hw_changes_total{change=\"refused\"} 0".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    // The tracker kept the connection alive from the hardware's counts.
    assert!(hw.tracker().hw_refreshes() > 0);

    // A second connection still starts in software and joins the first.
    run(&mut hw, &mut sw, 5001, 10, &mut ms);
    hw.pipeline_mut().revalidate(at(ms));
    assert_eq!(hw.pipeline().ct_hw_stats().entries, 4);

    // A flush takes the connections out of the tracker, and the next pass
    // out of the device; their packets start over in software, alike.
    ask(
        &mut hw,
        Request::FlushConntrack {
            args: vec!["zone=7".into()],
        },
        ms,
    );
    ask(
        &mut sw,
        Request::FlushConntrack {
            args: vec!["zone=7".into()],
        },
        ms,
    );
    hw.pipeline_mut().revalidate(at(ms));
    let st = hw.pipeline().ct_hw_stats();
    assert_eq!(st.entries, 0, "{st:?}");
    assert_eq!(st.removed, 4, "{st:?}");
    let before = hw.counters();
    run(&mut hw, &mut sw, 5000, 1, &mut ms);
    assert_eq!(hw.counters().sw_handled - before.sw_handled, 2);

    // The device's own view: the chain's tables, the entries' rules in
    // level 3; at stop nothing is left in it.
    run(&mut hw, &mut sw, 5000, 30, &mut ms);
    hw.pipeline_mut().revalidate(at(ms));
    assert_eq!(hw.pipeline().ct_hw_stats().entries, 2);
    let d = ask(&mut hw, Request::DumpRules, ms);
    let levels = crate::control::table_levels(&d);
    assert_eq!(levels, vec![0, 1, 2, 3, 4], "{d}");
    let dev = Arc::clone(hw.device());
    hw.finish(at(ms + 1)).expect("finish");
    assert!(
        dev.dump().expect("dump").is_empty(),
        "the device is empty after stop"
    );
}

/// OVN's shape: an ingress ACL's zone (7) and an egress ACL's (8) on one
/// path, port 1 opening to port 2: two `ct()` passes a packet.
const TWO_ZONES: &str = "table=0,priority=50,ct_state=-trk,ip actions=ct(table=1,zone=7)
table=1,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=7),ct_clear,ct(table=2,zone=8)
table=1,priority=50,ct_state=+trk+est,ip actions=ct_clear,ct(table=2,zone=8)
table=1,priority=40,ct_state=+trk,ip actions=drop
table=2,priority=50,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=8),output:2
table=2,priority=50,ct_state=+trk+est,ip,in_port=1 actions=output:2
table=2,priority=50,ct_state=+trk+est,ip,in_port=2 actions=output:1
table=2,priority=40,ct_state=+trk,ip actions=drop";

#[test]
fn a_path_through_two_conntrack_zones_goes_to_the_fdb_through_two_passes() {
    let switch = |offload: bool| {
        let mut cfg = PipelineConfig::default();
        if !offload {
            cfg.offload.mode = ofproto::pipeline::OffloadMode::Off;
        }
        SimSwitch::new(
            &crate::replay::default_ports(2),
            &FlowFile::parse(TWO_ZONES).expect("table"),
            cfg,
            SimConfig::default(),
            at(0),
        )
        .expect("switch")
    };
    let (mut hw, mut sw) = (switch(true), switch(false));
    let (a, b) = (0xc612_0002u32, 0xc612_0003u32);
    let mut ms = 1;
    let mut run = |hw: &mut SimSwitch, sw: &mut SimSwitch, rounds: u8| {
        for i in 0..rounds {
            let mut there = FrameSpec::ipv4(a, b, L4::udp(6000, 53)).build();
            let mut back = FrameSpec::ipv4(b, a, L4::udp(53, 6000)).build();
            let (n, m) = (there.len(), back.len());
            there[n - 1] = i;
            back[m - 1] = i;
            for (port, f) in [(1, there), (2, back)] {
                let x = send(hw, port, f.clone(), ms);
                let y = send(sw, port, f, ms);
                assert_eq!(x, y, "round {i} from port {port}");
                assert_eq!(x.len(), 1, "round {i} from port {port}: {x:?}");
                ms += 1;
            }
        }
        ms
    };
    let now = run(&mut hw, &mut sw, 40);
    hw.pipeline_mut().revalidate(at(now));
    let st = hw.pipeline().ct_hw_stats();
    // Both directions of both zones' connections.
    assert_eq!(st.entries, 4, "{st:?}");
    assert_eq!(st.refused, 0, "{st:?}");
    let before = hw.counters();
    let now = run(&mut hw, &mut sw, 20);
    let after = hw.counters();
    assert_eq!(
        (
            after.hw_handled - before.hw_handled,
            after.sw_handled - before.sw_handled
        ),
        (40, 0),
        "every packet through both passes in the device"
    );
    // The device has the second pass's tables above the first's.
    let d = ask(&mut hw, Request::DumpRules, now);
    assert_eq!(
        crate::control::table_levels(&d),
        vec![0, 1, 2, 3, 4, 5, 6],
        "{d}"
    );
    let dev = Arc::clone(hw.device());
    hw.finish(at(now + 1)).expect("finish");
    assert!(
        dev.dump().expect("dump").is_empty(),
        "the device is empty after stop"
    );
}

/// One step of a random stateful capture: the next packet of connection
/// `conn` (its handshake, then data from the side `from_client` says with
/// `payload` bytes, or, with `fin`, its close), `gap` ms after the last;
/// `pass`: a revalidator pass after it.
#[derive(Clone, Debug)]
struct Step {
    conn: usize,
    from_client: bool,
    payload: u16,
    fin: bool,
    gap: u8,
    pass: bool,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    (
        0..4usize,
        any::<bool>(),
        0..1400u16,
        proptest::bool::weighted(0.03),
        0..40u8,
        proptest::bool::weighted(0.05),
    )
        .prop_map(|(conn, from_client, payload, fin, gap, pass)| Step {
            conn,
            from_client,
            payload,
            fin,
            gap,
            pass,
        })
}

/// A TCP connection of the capture: A's port `40000 + i` to B:80, SNATed
/// to 198.19.0.1 (its port kept) by the firewall.
#[derive(Clone, Debug, Default)]
struct Tcp {
    /// Packets sent: 0..3 the handshake, then data; after a FIN, the
    /// close's three packets.
    k: u32,
    seq: [u32; 2],
    /// The side that sent the first FIN (0 client, 1 server) and packets
    /// of the close sent.
    closing: Option<(usize, u32)>,
}

const SYN: u16 = 0x02;
const FIN: u16 = 0x01;
const ACK: u16 = 0x10;
const PSH: u16 = 0x08;

impl Tcp {
    /// The next packet: (from the client, flags, payload); `None` once
    /// closed.
    fn next(&mut self, s: &Step) -> Option<(bool, u16, usize)> {
        let k = self.k;
        self.k += 1;
        if let Some((first, n)) = self.closing {
            // FIN from `first`, FIN from the other, the last ACK.
            let (side, flags) = match n {
                0 => (first, FIN | ACK),
                1 => (1 - first, FIN | ACK),
                2 => (first, ACK),
                _ => return None,
            };
            self.closing = Some((first, n + 1));
            return Some((side == 0, flags, 0));
        }
        Some(match k {
            0 => (true, SYN, 0),
            1 => (false, SYN | ACK, 0),
            2 => (true, ACK, 0),
            _ if s.fin => {
                self.closing = Some((usize::from(!s.from_client), 1));
                (s.from_client, FIN | ACK, 0)
            }
            _ => (s.from_client, PSH | ACK, usize::from(s.payload)),
        })
    }

    /// The frame of that packet of connection `i`, and its in_port.
    fn frame(&mut self, i: usize, from_client: bool, flags: u16, len: usize) -> (u32, Vec<u8>) {
        let (a, b, gw) = (0xc612_0002u32, 0xc612_0003u32, 0xc613_0001u32);
        let port = 40000 + i as u16;
        let me = usize::from(!from_client);
        let seq = self.seq[me];
        let ack = if flags & ACK != 0 {
            self.seq[1 - me]
        } else {
            0
        };
        self.seq[me] = seq
            .wrapping_add(len as u32)
            .wrapping_add(u32::from(flags & (SYN | FIN) != 0));
        if from_client {
            let f = megaflow::frame::tcp_segment(a, b, port, 80, flags, seq, ack, len);
            (1, f)
        } else {
            let f = megaflow::frame::tcp_segment(b, gw, 80, port, flags, seq, ack, len);
            (2, f)
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// The same capture of TCP connections (handshakes, data both ways in
    /// any order and size, closes) through the SNAT firewall with the
    /// FDB's conntrack table and without it: the same frames out, in the
    /// same order, and the same connections in the tracker.
    #[test]
    fn the_conntrack_table_forwards_every_capture_as_software_does(
        steps in proptest::collection::vec(step(), 40..300)
    ) {
        let mut hw = snat_switch(true);
        let mut sw = snat_switch(false);
        let mut conns: Vec<Tcp> = (0..4)
            .map(|i| Tcp {
                seq: [1000 + 100_000 * i as u32, 7_000_000 + 100_000 * i as u32],
                ..Tcp::default()
            })
            .collect();
        let mut ms = 1;
        for s in &steps {
            ms += u64::from(s.gap);
            let c = &mut conns[s.conn];
            let Some((from_client, flags, len)) = c.next(s) else {
                continue;
            };
            let (port, f) = c.frame(s.conn, from_client, flags, len);
            let a = send(&mut hw, port, f.clone(), ms);
            let b = send(&mut sw, port, f, ms);
            proptest::prop_assert_eq!(a, b, "conn {} flags {:#x}", s.conn, flags);
            if s.pass {
                hw.pipeline_mut().revalidate(at(ms));
                sw.pipeline_mut().revalidate(at(ms));
            }
        }
        let dump = |sw: &mut SimSwitch| -> Vec<String> {
            let v = ask(sw, Request::DumpConntrack { zone: None, stats: false }, ms);
            let mut l: Vec<String> = v["conns"]
                .as_array()
                .expect("conns is a list")
                .iter()
                .map(|c| c["line"].as_str().expect("a line").to_string())
                .collect();
            l.sort();
            l
        };
        proptest::prop_assert_eq!(dump(&mut hw), dump(&mut sw));
        // A long capture's established packets went through the table.
        if steps.len() >= 200 {
            let c = hw.counters();
            proptest::prop_assert!(c.hw_handled > 0, "{} in hardware", c.hw_handled);
            proptest::prop_assert!(hw.pipeline().ct_hw_stats().installed > 0);
        }
    }
}

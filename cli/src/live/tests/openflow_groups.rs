//! What a controller changes beyond single flows, with `ovs-ofctl -O
//! OpenFlow13` against the daemon on memory ports: groups (and a select
//! group picking by `dp_hash`), bundles applied all or nothing, and the
//! conntrack flushes. No root needed.

use super::openflow_tests::{flow_lines, handled, ofctl, start_daemon, with_ofctl, TempDir};
use super::tests::{config, flows, frame, wait_for};
use super::*;

#[test]
fn ovs_ofctl_groups_fan_out_and_select_and_an_all_group_is_offloaded_as_a_dest_array() {
    const T: &str =
        "ovs_ofctl_groups_fan_out_and_select_and_an_all_group_is_offloaded_as_a_dest_array";
    let Some((bin, _dir, sock, d, of, h)) = with_ofctl(T, "groups") else {
        return;
    };
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    run(
        "add-group",
        &["group_id=1,type=all,bucket=output:2,bucket=output:3"],
    )
    .expect("add-group");
    run("add-flow", &["priority=30,in_port=1,actions=group:1"]).expect("add-flow");
    // Refusals, each with the error the spec names.
    // (ovs-ofctl itself refuses an indirect group of two buckets.)
    let e = run("add-group", &["group_id=2,type=indirect"]).expect_err("indirect of none");
    assert!(e.contains("OFPGMFC_INVALID_GROUP"), "{e}");
    let e = run("add-group", &["group_id=1,type=all,bucket=output:2"]).expect_err("exists");
    assert!(e.contains("OFPGMFC_GROUP_EXISTS"), "{e}");
    let e = run("add-flow", &["priority=31,in_port=2,actions=group:99"]).expect_err("no group");
    assert!(e.contains("OFPBAC_BAD_OUT_GROUP"), "{e}");
    let groups = run("dump-groups", &[]).expect("dump-groups");
    assert!(
        groups.contains("group_id=1,type=all")
            && groups.contains("actions=output:2")
            && groups.contains("actions=output:3")
            && !groups.contains("group_id=2"),
        "{groups}"
    );

    // Every frame from vm1 reaches vm2 and vm3; the hot megaflow goes to
    // the sim FDB as one rule with a dest_array of both vports.
    let (mut to2, mut to3) = (0usize, 0usize);
    let sent = 8usize;
    for i in 0..sent {
        assert!(h["vm1"].rx.inject(&frame(3000), Default::default()));
        wait_for("a copy on vm2 and on vm3", || {
            to2 += h["vm2"].received().len();
            to3 += h["vm3"].received().len();
            to2 > i && to3 > i
        });
    }
    assert_eq!((to2, to3), (sent, sent));
    let core = d.core();
    wait_for("the group's megaflow offloaded", || {
        lock(&core).pipeline().offloaded_len() >= 1
    });
    let dump = lock(&core).dump_rules().expect("dump");
    assert!(
        dump.rules
            .iter()
            .any(|r| r.actions.iter().any(|a| a.starts_with("dest_array("))),
        "{:#?}",
        dump.rules
    );
    drop(core);
    // Group and bucket counters count every frame, hardware's included.
    wait_for("the group's counters", || {
        run("dump-group-stats", &[]).is_ok_and(|s| {
            s.contains(&format!("packet_count={sent}"))
                && s.contains(&format!("bucket0:packet_count={sent}"))
                && s.contains(&format!("bucket1:packet_count={sent}"))
        })
    });
    let stats = run("dump-group-stats", &[]).expect("dump-group-stats");
    assert!(stats.contains("ref_count=1"), "{stats}");

    // A SELECT group spreads connections over its buckets, each
    // connection to exactly one.
    run(
        "mod-group",
        &["group_id=1,type=select,bucket=weight:1,actions=output:2,bucket=weight:1,actions=output:3"],
    )
    .expect("mod-group");
    let _ = (h["vm2"].received(), h["vm3"].received());
    let conns = 40u16;
    let core = d.core();
    let before = handled(&core);
    let (mut to2, mut to3) = (0usize, 0usize);
    for i in 0..conns {
        assert!(h["vm1"].rx.inject(&frame(4000 + i), Default::default()));
        wait_for("the connection's frame delivered", || {
            to2 += h["vm2"].received().len();
            to3 += h["vm3"].received().len();
            to2 + to3 > usize::from(i)
        });
    }
    // Every connection's upcall handled (each a new flow; a handler
    // counts a packet after sending its outputs): nothing more comes.
    wait_for("every connection's upcall handled", || {
        handled(&core) >= before + u64::from(conns)
    });
    drop(core);
    to2 += h["vm2"].received().len();
    to3 += h["vm3"].received().len();
    assert_eq!(to2 + to3, usize::from(conns), "one copy per connection");
    assert!(to2 > 0 && to3 > 0, "both buckets used: {to2} / {to3}");

    // Deleting the group deletes the flow that ran it.
    run("del-groups", &[]).expect("del-groups");
    let lines = flow_lines(&run("dump-flows", &[]).expect("dump-flows"));
    assert!(!lines.iter().any(|l| l.contains("group:1")), "{lines:?}");
    assert!(run("dump-groups", &[])
        .expect("dump-groups")
        .lines()
        .all(|l| !l.contains("group_id")));
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn ovs_ofctl_ct_flush_zone_and_ct_flush_remove_tracked_connections() {
    const T: &str = "ovs_ofctl_ct_flush_zone_and_ct_flush_remove_tracked_connections";
    let Some((bin, _dir, sock, d, of, h)) = with_ofctl(T, "ct-flush") else {
        return;
    };
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    run(
        "add-flow",
        &["priority=40,in_port=1,ip,actions=ct(commit,zone=7),output:2"],
    )
    .expect("flow");
    run(
        "add-flow",
        &["priority=40,in_port=2,ip,actions=ct(commit,zone=8),output:1"],
    )
    .expect("flow");
    // Three connections in zone 7 (from vm1), one in zone 8 (from vm2).
    for sport in [6000, 6001, 6002] {
        assert!(h["vm1"].rx.inject(&frame(sport), Default::default()));
    }
    assert!(h["vm2"].rx.inject(&frame(6000), Default::default()));
    let core = d.core();
    let tracked = |zone: u16| {
        let t = lock(&core).tracker();
        t.dump(Some(zone), 0).len()
    };
    wait_for("four connections tracked", || {
        tracked(7) == 3 && tracked(8) == 1
    });
    run("ct-flush-zone", &["7"]).expect("ct-flush-zone");
    assert_eq!((tracked(7), tracked(8)), (0, 1), "zone 7 only");
    // A whole original tuple in zone 8: that connection. One that is not
    // there is no error (as Open vSwitch answers).
    let tuple =
        "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=17,ct_tp_src=6000,ct_tp_dst=9";
    run("ct-flush", &["zone=9", tuple]).expect("nothing there");
    assert_eq!(tracked(8), 1);
    run("ct-flush", &["zone=8", tuple]).expect("ct-flush");
    assert_eq!(tracked(8), 0);
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn ovs_ofctl_bundles_apply_all_or_nothing() {
    const T: &str = "ovs_ofctl_bundles_apply_all_or_nothing";
    let Some((bin, dir, sock, d, of, _h)) = with_ofctl(T, "bundles") else {
        return;
    };
    let file = |name: &str, flows: &[&str]| {
        let p = dir.0.join(name);
        std::fs::write(&p, flows.join("\n")).expect("flow file");
        p.display().to_string()
    };
    let ok = file(
        "ok.txt",
        &[
            "priority=5,ip,actions=output:2",
            "priority=6,tcp,actions=output:3",
        ],
    );
    let bad = file(
        "bad.txt",
        &[
            "priority=7,udp,actions=output:2",
            "priority=8,icmp,actions=group:99",
            "priority=9,arp,actions=drop",
        ],
    );
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    let lines = || flow_lines(&run("dump-flows", &[]).expect("dump-flows"));
    let before = lines();
    run("add-flows", &["--bundle", &ok]).expect("a good bundle");
    let with_ok = lines();
    assert_eq!(with_ok.len(), before.len() + 2, "{with_ok:?}");
    assert!(
        with_ok
            .iter()
            .any(|l| l.contains("priority=6,tcp actions=output:3")),
        "{with_ok:?}"
    );
    // One bad flow mod: its error (with the error for the commit), and
    // none of the bundle's flows, not even the one before it.
    let e = run("add-flows", &["--bundle", &bad]).expect_err("a bad bundle");
    assert!(e.contains("OFPBAC_BAD_OUT_GROUP"), "{e}");
    assert_eq!(lines(), with_ok, "nothing of the bad bundle stands");
    // replace-flows in a bundle: the table becomes the file.
    let only = file("only.txt", &["priority=4,ip,actions=drop"]);
    run("replace-flows", &["--bundle", &only]).expect("replace-flows");
    let now = lines();
    assert_eq!(now.len(), 1, "{now:?}");
    assert!(now[0].contains("priority=4,ip actions=drop"), "{now:?}");
    // The connection and the switch go on.
    run("add-flow", &["priority=3,arp,actions=drop"]).expect("after bundles");
    assert_eq!(lines().len(), 2);
    of.stop();
    d.stop().expect("stop");
}

#[test]
fn with_select_method_dp_hash_an_ovs_ofctl_select_group_picks_by_dp_hash() {
    const T: &str = "with_select_method_dp_hash_an_ovs_ofctl_select_group_picks_by_dp_hash";
    let Some(bin) = prereq::tool(T, "ovs-ofctl") else {
        return;
    };
    let dir = TempDir::new("dp-hash");
    let sock = dir.0.join("br0.mgmt");
    let mut cfg = config();
    cfg.openflow.select_method = "dp_hash".into();
    let (mut d, of, h) = start_daemon(&sock, 5000, &cfg, &flows(), |_| {});
    d.apply(&PortEvent::Up { ifindex: 12 });
    let run = |cmd: &str, extra: &[&str]| ofctl(&bin, &sock, cmd, extra);
    run(
        "add-group",
        &["group_id=1,type=select,bucket=weight:1,actions=output:2,bucket=weight:1,actions=output:3"],
    )
    .expect("add-group");
    run("add-flow", &["priority=30,in_port=1,actions=group:1"]).expect("add-flow");
    // 60 connections, two frames each: each connection to one VM, both
    // frames to the same one.
    let core = d.core();
    let before = handled(&core);
    drop(core);
    let (mut to2, mut to3) = (0usize, 0usize);
    let conns = 60u16;
    for round in 0..2 {
        for i in 0..conns {
            assert!(h["vm1"].rx.inject(&frame(5000 + i), Default::default()));
            let want = usize::from(round * conns + i) + 1;
            wait_for("the connection's frame delivered", || {
                let (a, b) = (h["vm2"].received(), h["vm3"].received());
                for f in a.iter().chain(&b) {
                    assert_eq!(f, &frame(5000 + i), "only this connection's frame");
                }
                to2 += a.len();
                to3 += b.len();
                if round == 1 {
                    // The second frame goes where the first went.
                    assert!(a.is_empty() || b.is_empty());
                }
                to2 + to3 >= want
            });
        }
    }
    assert_eq!(to2 + to3, 2 * usize::from(conns), "one copy a frame");
    assert!(to2 > 0 && to3 > 0, "both buckets used: {to2} / {to3}");
    let core = d.core();
    wait_for("every frame handled", || {
        handled(&core) >= before + 2 * u64::from(conns)
    });
    // Few megaflows for all the connections: the first stage hashes and
    // recirculates, the next picks by 4 bits of dp_hash; none is in the
    // device (it has no dp_hash), each says why.
    let dump = lock(&core).pipeline().dump();
    let text: Vec<String> = dump
        .iter()
        .map(|f| {
            format!(
                "{} actions:{} offloaded:{}",
                ofproto::text::format_match(&f.matched),
                f.actions,
                f.offloaded()
            )
        })
        .collect();
    assert!(dump.len() <= 1 + 16, "{text:#?}");
    assert!(
        text.iter()
            .any(|t| t.contains("actions:hash(sym_l4(0)),recirc(")
                && t.contains("the FDB computes no dp_hash")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("dp_hash=0x") && t.contains("/0xf")),
        "{text:#?}"
    );
    drop(core);
    of.stop();
    d.stop().expect("stop");
}

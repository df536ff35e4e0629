//! Meters and samplers through the manager, checked by sending frames
//! through the sim.

use megaflow::actions::{SampleCookie, SampleOutput};
use megaflow::offload::MeterBand;
use megaflow::MeterId;

use super::*;
use crate::dr::meter::Color;
use crate::dr::Errno;
use crate::restore::{Arrival, Restore};
use crate::sim::{DropCause, OutFrame, Snapshot};

fn vf(n: u16) -> Vport {
    Vport::vf(n).expect("vf")
}

/// `frame(sport)` with a payload that makes it `len` bytes (60 at least).
fn sized(sport: u16, len: usize) -> Vec<u8> {
    // Ethernet, IPv4 and TCP headers.
    const HEADERS: usize = 14 + 20 + 20;
    let f = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(sport, 80))
        .payload(len.saturating_sub(HEADERS))
        .build();
    assert_eq!(f.len(), len.max(60));
    f
}

/// Sends `f` from port 1 (VF 1) at `now_ns`; every frame out.
fn send_at(mgr: &OffloadManager<SimBackend>, now_ns: u64, f: &[u8]) -> Vec<OutFrame> {
    let mut out = Output::new();
    mgr.backend()
        .process(mgr.domain(), now_ns, vf(1), f, &mut out);
    out.frames().to_vec()
}

fn meter(id: u32) -> DpAction {
    DpAction::Meter(MeterId(id))
}

/// One in four, as OVS writes it.
fn quarter() -> u32 {
    (f64::from(u32::MAX) / 4.0).round() as u32
}

/// The cookie of the sampled flows here: 1 in 4, out port 2.
const COOKIE: SampleCookie = SampleCookie {
    rate: 4,
    output: SampleOutput::Port(PortNo(2)),
};

fn sample(probability: u32) -> DpAction {
    DpAction::Sample {
        probability,
        actions: Actions::new(vec![DpAction::Userspace(UserspaceReason::Sample(COOKIE))]),
    }
}

fn acts(v: Vec<DpAction>) -> Actions {
    Actions::new(v)
}

/// Sends `n` frames of `len` bytes of flow `sport` evenly over one
/// simulated second; the frames out.
fn one_second(mgr: &OffloadManager<SimBackend>, sport: u16, n: u64, len: usize) -> Vec<OutFrame> {
    let f = sized(sport, len);
    (0..n)
        .flat_map(|i| send_at(mgr, 1 + i * 1_000_000_000 / n, &f))
        .collect()
}

#[test]
fn a_metered_flow_is_policed_to_its_rate_and_counts_every_packet() {
    let mut mgr = manager();
    let (rate, burst) = (100_000u64, 5_000u64);
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(rate, burst)))
        .expect("set_meter");
    let id = mgr
        .install(&flow(1), &acts(vec![meter(1), DpAction::Output(PortNo(2))]))
        .expect("offload");
    let tag = mgr.tag_of(id).expect("a metered flow has a tag");
    assert_eq!(mgr.flow_of_tag(tag), Some(id));
    // Twice the rate: 2000 frames of 100 bytes in one second.
    let (n, len) = (2000u64, 100usize);
    let out = one_second(&mgr, 1, n, len);
    assert_eq!(out.len() as u64, n, "one fate per frame");
    let mut green_bytes = 0u64;
    let mut red = 0;
    for o in &out {
        assert_eq!(o.regs[1], tag, "reg_c_1 carries the flow's tag");
        let colour = Color::from_reg(o.regs[2]).expect("reg_c_2 holds a colour");
        match o.egress {
            Egress::Vport(v) => {
                assert_eq!(v, vf(2));
                assert_eq!(colour, Color::Green);
                green_bytes += o.bytes.len() as u64;
            }
            Egress::Drop(DropCause::Rule) => {
                assert_eq!(colour, Color::Red);
                red += 1;
            }
            other => panic!("unexpected egress {other:?}"),
        }
    }
    assert!(red > 0, "over the rate, packets are dropped");
    // Over a second: the rate plus the initial burst, within 3%.
    let want = (rate + burst) as f64;
    let err = (green_bytes as f64 - want).abs() / rate as f64;
    assert!(
        err < 0.03,
        "forwarded {green_bytes} bytes, want about {want}"
    );
    // The flow counter is before the meter: it counts every packet.
    let s = stats(&mut mgr);
    assert_eq!(
        s[&id],
        HwStats {
            packets: n,
            bytes: n * len as u64
        }
    );
}

#[test]
fn a_meter_is_shared_by_its_flows_and_can_count_packets() {
    let mut mgr = manager();
    let band = MeterBand {
        rate: 500,
        burst: 20,
        packets: true,
    };
    mgr.set_meter(MeterId(3), Some(band)).expect("set_meter");
    let to2 = acts(vec![meter(3), DpAction::Output(PortNo(2))]);
    let to3 = acts(vec![meter(3), DpAction::Output(PortNo(3))]);
    let a = mgr.install(&flow(1), &to2).expect("a");
    let b = mgr.install(&flow(2), &to3).expect("b");
    assert_ne!(mgr.tag_of(a), mgr.tag_of(b));
    assert_eq!(mgr.backend().snapshot().meters, 1, "one flow_meter action");
    // 1000 packets of each flow over a second, of varied sizes: in packets
    // mode the size does not matter; the two flows share the bucket.
    let n = 1000u64;
    let mut green = [0u64; 2];
    for i in 0..n {
        let now = 1 + i * 1_000_000_000 / n;
        for (k, sport) in [1u16, 2].into_iter().enumerate() {
            for o in send_at(&mgr, now, &sized(sport, 64 + (i as usize * 37) % 1400)) {
                match o.egress {
                    Egress::Vport(v) => {
                        assert_eq!(v, vf(2 + k as u16), "each flow keeps its own output");
                        green[k] += 1;
                    }
                    Egress::Drop(_) => {}
                    other => panic!("unexpected egress {other:?}"),
                }
            }
        }
    }
    let total = (green[0] + green[1]) as f64;
    let want = (band.rate + band.burst) as f64;
    assert!(
        (total - want).abs() / band.rate as f64 <= 0.03,
        "{green:?} packets forwarded, want about {want} together"
    );
    assert!(green.iter().all(|&g| g > 0), "{green:?}");
}

#[test]
fn a_sampled_flow_sends_about_one_copy_in_four_to_software() {
    let mut mgr = manager();
    let id = mgr
        .install(
            &flow(1),
            &acts(vec![sample(quarter()), DpAction::Output(PortNo(2))]),
        )
        .expect("offload");
    let tag = mgr.tag_of(id).expect("a sampled flow has a tag");
    let restore = mgr.restore_table();
    assert_eq!(restore.samplers(), 1);
    let n = 4000u64;
    let f = frame(1);
    let (mut copies, mut originals) = (0u64, 0u64);
    for i in 0..n {
        for o in send_at(&mgr, i, &f) {
            // Told apart by what the slow-path queue's completion says,
            // as software does; the sim's own flag must agree.
            let arrival = restore.classify(o.tag);
            if o.egress == (Egress::Manager { ingress: vf(1) }) {
                copies += 1;
                assert!(o.sampled, "only copies reach the manager");
                assert_eq!(o.tag, tag, "the copy names its flow");
                assert_eq!(mgr.flow_of_tag(o.tag), Some(id));
                assert_eq!(
                    arrival,
                    Arrival::Restored(Restore::SampledCopy {
                        flow: id,
                        cookie: COOKIE
                    }),
                    "and its cookie"
                );
                assert_eq!(o.reg_b, o.regs[0], "reg_b: the source's metadata");
                assert_eq!(o.bytes, f);
            } else {
                assert!(!o.sampled);
                originals += 1;
                assert_eq!(o.egress, Egress::Vport(vf(2)));
                assert_eq!(o.bytes, f);
            }
        }
    }
    assert_eq!(originals, n, "every packet is forwarded");
    let (mean, sigma) = (n as f64 / 4.0, (n as f64 * 0.25 * 0.75).sqrt());
    assert!(
        (copies as f64 - mean).abs() <= 5.0 * sigma,
        "{copies} copies of {n}, want {mean} ± {}",
        5.0 * sigma
    );
    assert_eq!(
        stats(&mut mgr)[&id].packets,
        n,
        "the counter sees every packet"
    );
    mgr.remove(id);
    assert!(restore.is_empty(), "a removed flow's tag goes with it");
    assert_eq!(restore.classify(tag), Arrival::Stale(tag));
    assert!(mgr.backend().dump().expect("dump").restore_rules.is_empty());
}

#[test]
fn without_a_restore_path_sampled_flows_stay_in_software_and_metered_ones_do_not() {
    let no_path = SimConfig {
        restore_path: false,
        ..SimConfig::default()
    };
    let mut mgr = manager_with(no_path, ManagerConfig::default());
    let sampled = acts(vec![sample(quarter()), DpAction::Output(PortNo(2))]);
    let e = mgr
        .install(&flow(1), &sampled)
        .expect_err("no restore path");
    assert_eq!(e, NotOffloaded::NoRestorePath);
    assert_eq!(e.to_string(), "no restore path");
    assert!(!e.is_transient(), "trying again cannot help");
    assert!(mgr.is_empty() && mgr.restore_table().is_empty());
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(10_000, 1_000)))
        .expect("set_meter");
    let metered = acts(vec![meter(1), DpAction::Output(PortNo(2))]);
    mgr.install(&flow(2), &metered)
        .expect("a metered flow never misses in level 2: no tag needed");
    // The device's answer to a restore rule, and what a miss carries.
    let e = mgr.backend().restore_rule_create(5).expect_err("no path");
    assert_eq!(e.errno(), Errno::EOPNOTSUPP);
    let out = send_at(&mgr, 0, &frame(9));
    assert_eq!(out[0].egress, Egress::Manager { ingress: vf(1) });
    assert_eq!((out[0].tag, out[0].reg_b), (0, 0), "no completion at all");
}

#[test]
fn a_sampled_flow_rewrites_the_original_in_level_2_not_the_copy() {
    let mut mgr = manager();
    let always = u32::MAX;
    mgr.install(
        &flow(1),
        &acts(vec![
            sample(always),
            DpAction::SetEthDst(0x0200_0000_0099),
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 7,
            },
            DpAction::Output(PortNo(3)),
        ]),
    )
    .expect("offload");
    let out = send_at(&mgr, 0, &frame(1));
    assert_eq!(out.len(), 2, "{out:?}");
    let copy = out.iter().find(|o| o.sampled).expect("a copy");
    let orig = out.iter().find(|o| !o.sampled).expect("the original");
    assert_eq!(copy.bytes, frame(1), "the copy is the packet as it came");
    assert_eq!(orig.egress, Egress::Vport(vf(3)));
    let want = FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(1, 80))
        .macs(0x0200_0000_0001, 0x0200_0000_0099)
        .build();
    assert_eq!(orig.bytes[..12], want[..12]);
    assert_eq!(orig.bytes[12..16], [0x81, 0x00, 0x00, 0x07]);
}

#[test]
fn sample_ratios_follow_the_probability() {
    use crate::manager::translate::sample_ratio;
    assert_eq!(sample_ratio(u32::MAX), 1);
    assert_eq!(sample_ratio(quarter()), 4);
    assert_eq!(sample_ratio(u32::MAX / 100), 100);
    assert_eq!(sample_ratio(1), u32::MAX);
    assert_eq!(sample_ratio(0), u32::MAX, "never: as rare as it gets");
}

#[test]
fn removing_staged_flows_frees_their_objects_and_shutdown_frees_all() {
    let mut mgr = manager();
    let backend = Arc::clone(mgr.backend());
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(10_000, 1_000)))
        .expect("set_meter");
    let metered = acts(vec![
        meter(1),
        DpAction::SetEthDst(0x0200_0000_0099),
        DpAction::Output(PortNo(2)),
    ]);
    let sampled = acts(vec![sample(quarter()), DpAction::Output(PortNo(3))]);
    let a = mgr.install(&flow(1), &metered).expect("a");
    let b = mgr.install(&flow(2), &sampled).expect("b");
    let base = backend.snapshot();
    let c = mgr.install(&flow(3), &metered).expect("c");
    let d = mgr.install(&flow(4), &sampled).expect("d");
    let more = backend.snapshot();
    assert!(more.rules > base.rules && more.actions > base.actions);
    let (tc, td) = (mgr.tag_of(c), mgr.tag_of(d));
    mgr.remove(c);
    mgr.remove(d);
    assert_eq!(backend.snapshot(), base, "c and d left nothing behind");
    assert_eq!(mgr.tag_of(c), None);
    for t in [tc, td].into_iter().flatten() {
        assert_eq!(mgr.flow_of_tag(t), None);
    }
    for sport in [3, 4] {
        let out = send_at(&mgr, 0, &frame(sport));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].egress, Egress::Manager { ingress: vf(1) });
    }
    // a and b still work.
    assert_eq!(send_at(&mgr, 0, &frame(1))[0].egress, Egress::Vport(vf(2)));
    assert!(send_at(&mgr, 0, &frame(2))
        .iter()
        .any(|o| !o.sampled && o.egress == Egress::Vport(vf(3))));
    let _ = (a, b);
    mgr.shutdown().expect("shutdown");
    assert_eq!(backend.snapshot(), Snapshot::default());
}

#[test]
fn a_changed_band_gets_a_new_meter_and_the_old_goes_with_its_last_flow() {
    let mut mgr = manager();
    let backend = Arc::clone(mgr.backend());
    let m = MeterId(1);
    let to2 = acts(vec![meter(1), DpAction::Output(PortNo(2))]);
    let slow = MeterBand::bytes(1_000, 200);
    let fast = MeterBand::bytes(1_000_000, 100_000);
    mgr.set_meter(m, Some(slow)).expect("slow");
    mgr.set_meter(m, Some(slow)).expect("the same band again");
    assert_eq!(backend.snapshot().meters, 1, "an unchanged band is kept");
    let old = mgr.install(&flow(1), &to2).expect("old");
    mgr.set_meter(m, Some(fast)).expect("fast");
    assert_eq!(backend.snapshot().meters, 2, "the old one serves its flow");
    let new = mgr.install(&flow(2), &to2).expect("new");
    // The old flow is still policed by the slow band, the new by the fast.
    let fwd = |mgr: &OffloadManager<SimBackend>, sport| {
        one_second(mgr, sport, 100, 100)
            .iter()
            .filter(|o| matches!(o.egress, Egress::Vport(_)))
            .count()
    };
    assert!(fwd(&mgr, 1) < 20);
    assert_eq!(fwd(&mgr, 2), 100);
    // Moving the old flow (as the revalidator does) frees the old meter.
    let moved = mgr.replace(old, &flow(1), &to2).expect("replace");
    assert_eq!(backend.snapshot().meters, 1);
    // Deleting a meter in use is deferred to its last flow; new installs
    // naming it are refused at once.
    mgr.set_meter(m, None).expect("delete");
    assert_eq!(mgr.meter_count(), 0);
    assert_eq!(backend.snapshot().meters, 1, "still used by two flows");
    assert_eq!(
        mgr.install(&flow(3), &to2).map_err(|e| e.to_string()),
        Err("action meter:1 (not defined in hardware)".into())
    );
    mgr.remove(new);
    assert_eq!(backend.snapshot().meters, 1);
    mgr.remove(moved);
    assert_eq!(backend.snapshot().meters, 0, "gone with its last flow");
    // Deleting an unused or unknown meter destroys at once or is a no-op.
    mgr.set_meter(MeterId(9), Some(slow)).expect("define");
    assert_eq!(backend.snapshot().meters, 1);
    mgr.set_meter(MeterId(9), None).expect("delete");
    mgr.set_meter(MeterId(10), None).expect("unknown");
    assert_eq!(backend.snapshot().meters, 0);
    mgr.shutdown().expect("shutdown");
    assert_eq!(backend.snapshot(), Snapshot::default());
}

#[test]
fn meter_and_sample_refusals_name_the_reason_and_leave_nothing() {
    let mut mgr = manager();
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(1_000, 100)))
        .expect("set_meter");
    let before = mgr.backend().snapshot();
    let cases: Vec<(Vec<DpAction>, &str)> = vec![
        (
            vec![meter(7), DpAction::Output(PortNo(2))],
            "action meter:7 (not defined in hardware)",
        ),
        (
            vec![
                DpAction::SetEthDst(0x0200_0000_0099),
                meter(1),
                DpAction::Output(PortNo(2)),
            ],
            "action meter after set(eth_dst=02:00:00:00:00:99)",
        ),
        (
            vec![meter(1), sample(quarter()), DpAction::Output(PortNo(2))],
            "action meter and sample in one flow",
        ),
        (
            vec![DpAction::Output(PortNo(2)), sample(quarter())],
            "action sample after output:2",
        ),
        (
            vec![
                DpAction::Sample {
                    probability: quarter(),
                    actions: acts(vec![DpAction::Output(PortNo(3))]),
                },
                DpAction::Output(PortNo(2)),
            ],
            "action sample of actions(output:3) (only a sampled copy to the exporter is offloaded)",
        ),
        (
            vec![meter(1), DpAction::Output(PortNo(9))],
            "action output:9 (no vport)",
        ),
        (
            vec![
                sample(quarter()),
                DpAction::Userspace(UserspaceReason::Action),
            ],
            "action userspace",
        ),
    ];
    for (list, want) in cases {
        let e = mgr.install(&flow(1), &acts(list.clone())).expect_err(want);
        assert_eq!(e.to_string(), want, "{list:?}");
        assert!(!e.is_transient(), "{want}");
        assert_eq!(mgr.backend().snapshot(), before, "{want}: nothing left");
    }
    assert!(mgr.is_empty());
    assert!(mgr.tags.is_empty());
}

#[test]
fn a_device_error_midway_through_a_staged_install_leaks_nothing() {
    let mut mgr = manager();
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(1_000, 100)))
        .expect("set_meter");
    let lists = [
        acts(vec![
            meter(1),
            DpAction::SetEthDst(0x0200_0000_0099),
            DpAction::Output(PortNo(2)),
        ]),
        acts(vec![
            sample(quarter()),
            DpAction::SetEthSrc(0x0200_0000_0042),
            DpAction::Output(PortNo(3)),
        ]),
    ];
    // Warm up the shared objects and the level-2 matchers.
    for (i, l) in lists.iter().enumerate() {
        let id = mgr.install(&flow(100 + i as u16), l).expect("warm up");
        mgr.remove(id);
    }
    let _ = stats(&mut mgr);
    let before = mgr.backend().snapshot();
    let mut failures = 0;
    for l in &lists {
        for op in [Op::ActionCreate, Op::RuleCreate, Op::MatcherCreate] {
            for nth in 1..=5 {
                mgr.backend().inject(Fault::nth(op, nth, Errno::EIO));
                let r = mgr.install(&flow(1), l);
                mgr.backend().clear_faults();
                match r {
                    Ok(id) => mgr.remove(id),
                    Err(e) => {
                        failures += 1;
                        assert!(
                            matches!(e, NotOffloaded::Backend { errno: "EIO", .. }),
                            "{e}"
                        );
                    }
                }
                let _ = stats(&mut mgr);
                assert_eq!(mgr.backend().snapshot(), before, "{op:?} #{nth}");
                assert!(mgr.is_empty() && mgr.tags.is_empty());
                assert!(mgr.meter_users.is_empty());
            }
        }
    }
    assert!(failures >= 6, "the faults hit: {failures}");
}

#[test]
fn a_meter_the_device_refuses_stays_undefined() {
    let mut mgr = manager();
    mgr.backend()
        .inject(Fault::nth(Op::ActionCreate, 1, Errno::ENOSPC));
    assert_eq!(
        mgr.set_meter(MeterId(1), Some(MeterBand::bytes(1_000, 100)))
            .map_err(|e| e.to_string()),
        Err("backend error ENOSPC on action_create".into())
    );
    assert_eq!(mgr.meter_count(), 0);
    // A failed change keeps the old band.
    mgr.set_meter(MeterId(1), Some(MeterBand::bytes(1_000, 100)))
        .expect("define");
    mgr.backend()
        .inject(Fault::nth(Op::ActionCreate, 1, Errno::ENOSPC));
    assert!(mgr
        .set_meter(MeterId(1), Some(MeterBand::bytes(2_000, 100)))
        .is_err());
    assert_eq!(mgr.backend().snapshot().meters, 1);
    mgr.install(&flow(1), &acts(vec![meter(1), DpAction::Output(PortNo(2))]))
        .expect("the old band still serves");
}

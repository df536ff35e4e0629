//! The walk of a packet through the software datapath, across threads and
//! crates: a "VM" memory port sends frames; the datapath thread receives a
//! batch and runs each packet through its `Datapath` (parse, lookup,
//! execute); misses go to an upcall handler thread that decides (here: a
//! fixed L2 rule by destination MAC, one port per vport) and installs the
//! megaflow through the datapath's link. Checks what each port received,
//! that after the installs every packet is a hit, and that the reported
//! counts add up.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use megaflow::actions::{ActionSink, DpAction, UserspaceReason};
use megaflow::datapath::link;
use megaflow::port::{MemoryPort, PacketBatch, PacketMeta, Port};
use megaflow::{
    extract_into, Actions, CacheConfig, Datapath, DpCommand, DpEvent, Field, FlowId, FlowKey,
    Lookup, Mask, Match, MeterId, PortNo, Timestamp,
};
use offload::Vport;

/// Ports by number: 1 = VM (VF 0), 2 = VF 1, 3 = uplink.
fn vport_of(port: PortNo) -> Vport {
    match port.0 {
        1 => Vport::vf(0).expect("vf 0 has a vport"),
        2 => Vport::vf(1).expect("vf 1 has a vport"),
        _ => Vport::UPLINK,
    }
}

fn frame(dst: u8, src_port: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&28u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, dst]);
    f[34..36].copy_from_slice(&src_port.to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f[38..40].copy_from_slice(&8u16.to_be_bytes());
    f
}

/// Collects outputs per port number.
#[derive(Default)]
struct Outputs(Vec<(PortNo, Vec<u8>)>);

impl ActionSink for Outputs {
    fn output(&mut self, port: PortNo, pkt: &[u8]) {
        self.0.push((port, pkt.to_vec()));
    }
    fn userspace(&mut self, _: &UserspaceReason, _: &[u8]) {}
    fn meter(&mut self, _: MeterId, _: usize) -> bool {
        true
    }
    fn sample(&mut self, _: u32) -> bool {
        false
    }
}

#[test]
fn packets_walk_from_miss_to_megaflow_hits() {
    let (mut vm, mut rep) = MemoryPort::pair("vm", "vf0-rep");
    let mut dp = Datapath::new(CacheConfig::default(), 1);
    let (link, mut end) = link();
    let commands = link.commands();
    let mut events = Vec::new();
    let (upcall_tx, upcall_rx) = mpsc::sync_channel::<FlowKey>(128);

    // Upcall handler: L2 by destination MAC; the megaflow matches in_port
    // and eth_dst only (everything else is wildcarded).
    let handler = thread::spawn(move || {
        let mask = Mask::EMPTY
            .with_exact(Field::InPort)
            .with_exact(Field::EthDst);
        let mut installed = std::collections::BTreeSet::new();
        while let Ok(key) = upcall_rx.recv_timeout(Duration::from_secs(2)) {
            let out = match key.eth_dst() & 0xff {
                2 => PortNo(2),
                _ => PortNo(3),
            };
            let actions = Actions::new(vec![
                DpAction::PushVlan {
                    tpid: 0x8100,
                    tci: vport_of(out).0,
                },
                DpAction::Output(out),
            ]);
            // The flow's id: its destination (a slow path knows what it
            // installed and does not install a flow twice).
            let id = key.eth_dst() & 0xff;
            if installed.insert(id) {
                let matched = Box::new(Match::new(&key, &mask));
                let cmd = DpCommand::Insert {
                    id: FlowId(id),
                    matched,
                    actions,
                };
                commands.send(cmd).expect("datapath alive");
            }
        }
        installed.len()
    });

    // The VM sends 4 rounds of 8 frames to two destinations.
    let mut sent = PacketBatch::new();
    let mut per_port = [0usize; 4];
    let mut misses_per_round = vec![];
    let started = Instant::now();
    for round in 0..4u16 {
        sent.clear();
        for i in 0..8u16 {
            let dst = if i % 2 == 0 { 2 } else { 9 };
            sent.push(
                &frame(dst, round * 100 + i),
                PacketMeta::new(Timestamp(round as u64)),
            );
        }
        vm.send(&sent).unwrap();

        // Datapath: receive on the representor side, look up, execute.
        let mut rx = PacketBatch::new();
        let n = rep.recv_batch(&mut rx).unwrap();
        assert_eq!(n, 8);
        end.serve(&mut dp, 64, &mut events);
        let mut misses = 0;
        for p in &rx {
            let mut buf = p.data.to_vec();
            let mut outs = Outputs::default();
            match dp.process(p.meta.ts, PortNo(1), &mut buf, &mut outs) {
                Lookup::Hit(_) => {
                    let mut key = FlowKey::ZERO;
                    extract_into(1, p.data, &mut key);
                    for (port, bytes) in outs.0 {
                        let mut k = FlowKey::ZERO;
                        extract_into(port.0, &bytes, &mut k);
                        assert_eq!(
                            k.vlan_tci() as u16 & 0x0fff,
                            vport_of(port).0 & 0x0fff,
                            "tagged with the vport"
                        );
                        assert_eq!(k.tp_src(), key.tp_src(), "payload headers kept");
                        per_port[port.0 as usize] += 1;
                    }
                }
                Lookup::Miss => {
                    misses += 1;
                    upcall_tx.send(*dp.key()).unwrap();
                }
            }
        }
        misses_per_round.push(misses);
        // Let the handler's installs arrive before the next round.
        let deadline = Instant::now() + Duration::from_secs(2);
        while dp.len() < 2 && Instant::now() < deadline {
            end.serve(&mut dp, 64, &mut events);
            thread::sleep(Duration::from_millis(1));
        }
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    drop(upcall_tx);
    let installed = handler.join().unwrap();
    end.flush(&mut dp, &mut events);

    assert_eq!(
        misses_per_round[0], 8,
        "first round: everything is an upcall"
    );
    assert_eq!(
        &misses_per_round[1..],
        &[0, 0, 0],
        "then every packet hits a megaflow"
    );
    assert_eq!(installed, 2, "one megaflow per destination");
    assert_eq!(per_port, [0, 0, 12, 12]);
    let mut reported = Vec::new();
    link.collect(&mut reported);
    let total: u64 = reported
        .iter()
        .map(|e| match e {
            DpEvent::Stats { delta, .. } => delta.packets,
            other => panic!("unexpected {other:?}"),
        })
        .sum();
    assert_eq!(total, 24, "every hit reported once");
}

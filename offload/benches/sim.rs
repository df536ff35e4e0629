//! Offload benchmark: `cargo bench -p offload --bench sim`.
//!
//! Prints `bench: <name> <value> <unit>` lines (median of rounds):
//! - `offload.prm.encode` Mops: encoding a typical 5-tuple megaflow (in_port
//!   as misc.source_port, eth_type, ip_proto, IPv4 src/dst, TCP ports) into
//!   `fte_match_param` mask and value bytes, a fresh `Encoded` per call;
//! - `offload.prm.encode_into` Mops: the same into a reused buffer.

use std::hint::black_box;
use std::time::Instant;

use megaflow::{Field, FlowKey, Mask, Match, PortNo};
use offload::prm::{encode, encode_into, Encoded, PortTable, SourcePortMode};
use offload::Vport;

const ROUNDS: usize = 5;
const N: u32 = 2_000_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut ports = PortTable::new();
    for i in 1..=8u32 {
        ports.insert(PortNo(i), Vport(i as u16));
    }
    let mut k = FlowKey::ZERO;
    k.set_in_port(4);
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ipv4_src(0x0a00_0001);
    k.set_ipv4_dst(0x0a00_0002);
    k.set_tp_dst(80);
    let mask = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::EthType)
        .with_exact(Field::IpProto)
        .with_exact(Field::Ipv4Src)
        .with_exact(Field::Ipv4Dst)
        .with_exact(Field::TpSrc)
        .with_exact(Field::TpDst);
    let matches: Vec<Match> = (0..1024u64)
        .map(|i| {
            let mut kk = k;
            kk.set_tp_src(1024 + i);
            Match::new(&kk, &mask)
        })
        .collect();
    let mode = SourcePortMode::MiscSourcePort;
    let rate = |f: &mut dyn FnMut(&Match) -> u8| {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    let mut sum = 0u32;
                    for i in 0..N {
                        sum += u32::from(f(black_box(&matches[(i & 1023) as usize])));
                    }
                    black_box(sum);
                    f64::from(N) / t.elapsed().as_secs_f64() / 1e6
                })
                .collect(),
        )
    };
    let by_value = rate(&mut |m| encode(m, mode, &ports).map_or(0, |e| e.value()[21]));
    println!("bench: offload.prm.encode {by_value:.1} Mops");
    let mut e = Encoded::EMPTY;
    let into = rate(&mut |m| encode_into(m, mode, &ports, &mut e).map_or(0, |()| e.value()[21]));
    println!("bench: offload.prm.encode_into {into:.1} Mops");
}

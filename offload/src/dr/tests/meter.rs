//! Tests of the flow meter parameters and colouring.

use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

const SEC: u64 = 1_000_000_000;

/// Offers `len`-byte packets at `offered` bytes/s (or packets/s with
/// `per_packet`) for one second to a fresh meter; returns the bytes (or
/// packets) of each colour, indexed by `Color as usize`.
fn run_one_second(p: &MeterParams, offered: f64, len: u32, per_packet: bool) -> [u64; 3] {
    let units = if per_packet { 1.0 } else { f64::from(len) };
    let interval = units * 1e9 / offered;
    let mut m = MeterState::new(p, 0);
    let mut out = [0u64; 3];
    let mut i = 0u64;
    loop {
        let t = (i as f64 * interval) as u64;
        if t >= SEC {
            break;
        }
        let c = m.mark(t, len);
        out[c as usize] += if per_packet { 1 } else { u64::from(len) };
        i += 1;
    }
    out
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= want * tol
}

#[test]
fn rdma_core_example_rate() {
    // tests/test_mlx5_dr.py: cir_mantissa=1, cir_exponent=6 # 15.625MBps.
    let p = MeterParams {
        valid: true,
        bucket_overflow: true,
        start_color: 2,
        both_buckets_on_green: false,
        mode: MeterMode::Bytes,
        cbs: (0, 0),
        cir: (6, 1),
        ebs: (0, 0),
        eir: (0, 0),
    };
    assert_eq!(p.cir_per_sec(), 15.625e6);
    let b = p.encode();
    assert_eq!(b[0], 0b1110_0000);
    assert_eq!(b[10], 6);
    assert_eq!(b[11], 1);
    assert!(b[1..10].iter().all(|&x| x == 0));
    assert_eq!(MeterParams::decode(&b), Ok(p));
}

#[test]
fn golden_layout() {
    let p = MeterParams {
        valid: true,
        bucket_overflow: false,
        start_color: 1,
        both_buckets_on_green: true,
        mode: MeterMode::Packets,
        cbs: (3, 0x11),
        cir: (0x1f, 0x22),
        ebs: (31, 0x33),
        eir: (4, 0x44),
    };
    let mut want = [0u8; 32];
    // 1 | 0 | 01 | 1 | 0 | 01
    want[0] = 0b1001_1001;
    want[8..12].copy_from_slice(&[3, 0x11, 0x1f, 0x22]);
    want[16..20].copy_from_slice(&[31, 0x33, 4, 0x44]);
    assert_eq!(p.encode(), want);
    assert_eq!(MeterParams::decode(&want), Ok(p));
    assert_eq!(p.cbs(), 0x11 << 3);
    assert_eq!(p.ebs(), 0x33 << 31);
    assert_eq!(p.eir_per_sec(), 1e9 * 68.0 / 16.0);
}

#[test]
fn decode_errors() {
    let good = MeterParams::single_rate(1_000_000, 10_000, MeterMode::Bytes).encode();
    assert_eq!(
        MeterParams::decode(&good[..31]),
        Err(MeterError::BadLength { len: 31 })
    );
    assert_eq!(
        MeterParams::decode(&[0; 33]),
        Err(MeterError::BadLength { len: 33 })
    );
    for (byte, bit) in [
        (0, 0x04),
        (1, 1),
        (7, 0x80),
        (10, 0x20),
        (12, 1),
        (18, 0x80),
        (31, 1),
    ] {
        let mut b = good;
        b[byte] |= bit;
        assert_eq!(
            MeterParams::decode(&b),
            Err(MeterError::ReservedBits { byte }),
            "byte {byte}"
        );
    }
    let mut b = good;
    b[0] |= 2;
    assert_eq!(MeterParams::decode(&b), Err(MeterError::BadMode(2)));
    let mut b = good;
    b[0] |= 0x30;
    assert_eq!(MeterParams::decode(&b), Err(MeterError::BadStartColor));
    let mut b = good;
    b[8] = 32;
    assert_eq!(
        MeterParams::decode(&b),
        Err(MeterError::ExponentOutOfRange {
            which: "cbs",
            exponent: 32
        })
    );
    let mut b = good;
    b[16] = 0xff;
    let e = MeterParams::decode(&b).unwrap_err();
    assert_eq!(e.to_string(), "ebs_exponent 255 is above 31");
}

#[test]
fn single_rate_picks_the_closest_pair() {
    let p = MeterParams::single_rate(125_000, 64_000, MeterMode::Bytes);
    assert!(p.valid);
    assert_eq!((p.ebs, p.eir), ((0, 0), (0, 0)));
    assert!(within(p.cir_per_sec(), 125_000.0, 0.005));
    assert_eq!(p.cbs(), 64_000);
    // Exactly representable rates come out exact.
    let p = MeterParams::single_rate(15_625_000, 0, MeterMode::Bytes);
    assert_eq!(p.cir_per_sec(), 15.625e6);
    assert_eq!(p.cbs, (0, 0));
    let p = MeterParams::single_rate(0, 1, MeterMode::Packets);
    assert_eq!(p.cir.1, 0);
    assert_eq!(p.cir_per_sec(), 0.0);
    assert_eq!(p.cbs(), 1);
    // Bursts beyond the largest representable one saturate.
    let p = MeterParams::single_rate(1, u64::MAX, MeterMode::Bytes);
    assert_eq!(p.cbs, (31, 255));
}

#[test]
fn green_bytes_follow_cir_plus_cbs() {
    // 1 Mbit/s .. 10 Gbit/s, in bytes/s; offered at twice the rate.
    for cir in [
        125_000u64,
        1_250_000,
        12_500_000,
        125_000_000,
        1_250_000_000,
    ] {
        let p = MeterParams::single_rate(cir, 64_000, MeterMode::Bytes);
        assert!(within(p.cir_per_sec(), cir as f64, 0.005), "{cir}");
        let got = run_one_second(&p, 2.0 * p.cir_per_sec(), 1000, false);
        let want = p.cir_per_sec() + p.cbs() as f64;
        assert!(
            within(got[Color::Green as usize] as f64, want, 0.01),
            "cir {cir}: green {} want {want}",
            got[Color::Green as usize]
        );
        assert_eq!(got[Color::Yellow as usize], 0, "no excess bucket");
        let offered: u64 = got.iter().sum();
        assert!(within(offered as f64, 2.0 * p.cir_per_sec(), 0.01));
    }
}

#[test]
fn packet_mode_counts_packets() {
    let p = MeterParams::single_rate(1000, 10, MeterMode::Packets);
    // 10^9 × 67 / 2^26 = 998.4 packets/s: the closest rate (also
    // 134 / 2^27; ties go to the smaller exponent).
    assert_eq!(p.cir, (26, 67));
    assert!(within(p.cir_per_sec(), 1000.0, 0.005));
    assert_eq!(p.cbs(), 10);
    let want = p.cir_per_sec() + 10.0;
    // 1500-byte packets at 2000 packets/s: the length does not matter.
    let got = run_one_second(&p, 2000.0, 1500, true);
    assert!(
        within(got[Color::Green as usize] as f64, want, 0.01),
        "{got:?}"
    );
    let got = run_one_second(&p, 2000.0, 64, true);
    assert!(
        within(got[Color::Green as usize] as f64, want, 0.01),
        "{got:?}"
    );
    assert_eq!(got.iter().sum::<u64>(), 2000);
}

#[test]
fn excess_rate_marks_yellow() {
    let mut p = MeterParams::single_rate(1_000_000, 20_000, MeterMode::Bytes);
    let excess = MeterParams::single_rate(500_000, 10_000, MeterMode::Bytes);
    p.eir = excess.cir;
    p.ebs = excess.cbs;
    // Offered 3 MB/s, above CIR + EIR.
    let offered = 3e6;
    let got = run_one_second(&p, offered, 1000, false);
    let green = p.cir_per_sec() + p.cbs() as f64;
    // Until C is empty every packet is green and E, full, wastes its
    // refill; from then on E gives EIR.
    let drained = p.cbs() as f64 / (offered - p.cir_per_sec());
    let yellow = p.ebs() as f64 + p.eir_per_sec() * (1.0 - drained);
    assert!(
        within(got[Color::Green as usize] as f64, green, 0.01),
        "{got:?}"
    );
    assert!(
        within(got[Color::Yellow as usize] as f64, yellow, 0.01),
        "{got:?}"
    );
    let red = offered - green - yellow;
    assert!(
        within(got[Color::Red as usize] as f64, red, 0.01),
        "{got:?}"
    );
}

#[test]
fn buckets_start_full_and_drain_in_order() {
    let p = MeterParams {
        valid: true,
        bucket_overflow: false,
        start_color: 0,
        both_buckets_on_green: false,
        mode: MeterMode::Bytes,
        cbs: (0, 200),
        cir: (0, 0),
        ebs: (0, 100),
        eir: (0, 0),
    };
    let mut m = MeterState::new(&p, 5);
    assert_eq!((m.committed_tokens(), m.excess_tokens()), (200, 100));
    assert_eq!(m.mark(5, 150), Color::Green);
    assert_eq!(m.mark(6, 60), Color::Yellow, "C has 50, E has 100");
    assert_eq!(m.mark(7, 50), Color::Green);
    assert_eq!(m.mark(8, 41), Color::Red, "E has 40");
    assert_eq!(m.mark(9, 40), Color::Yellow);
    assert_eq!(m.mark(10, 1), Color::Red);
}

#[test]
fn both_buckets_on_green_and_overflow() {
    let mut p = MeterParams {
        valid: true,
        bucket_overflow: false,
        start_color: 0,
        both_buckets_on_green: true,
        mode: MeterMode::Bytes,
        cbs: (0, 100),
        cir: (0, 1), // 1 byte/ns
        ebs: (0, 100),
        eir: (0, 0),
    };
    let mut m = MeterState::new(&p, 0);
    assert_eq!(m.mark(0, 100), Color::Green);
    assert_eq!(m.excess_tokens(), 0, "green also took from E");
    // 200 ns later C is full again (100 bytes overflowed); E stays empty
    // without bucket_overflow.
    assert_eq!(m.mark(200, 1), Color::Green);
    assert_eq!(m.excess_tokens(), 0);

    p.both_buckets_on_green = false;
    p.bucket_overflow = true;
    let mut m = MeterState::new(&p, 0);
    assert_eq!(m.mark(0, 100), Color::Green);
    assert_eq!(m.excess_tokens(), 100);
    assert_eq!(m.mark(0, 100), Color::Yellow);
    assert_eq!(m.excess_tokens(), 0);
    // 150 ns: C refills by 150, capped at 100; the 50 spilled go to E.
    assert_eq!(m.mark(150, 0), Color::Green);
    assert_eq!((m.committed_tokens(), m.excess_tokens()), (100, 50));
}

#[test]
fn time_never_goes_backwards() {
    let p = MeterParams {
        valid: true,
        bucket_overflow: false,
        start_color: 0,
        both_buckets_on_green: false,
        mode: MeterMode::Bytes,
        cbs: (0, 100),
        cir: (0, 1),
        ebs: (0, 0),
        eir: (0, 0),
    };
    let mut m = MeterState::new(&p, 1000);
    assert_eq!(m.mark(1000, 100), Color::Green);
    // An earlier time refills nothing, and does not move the clock back.
    assert_eq!(m.mark(10, 1), Color::Red);
    assert_eq!(m.mark(1000, 1), Color::Red);
    assert_eq!(m.mark(1010, 10), Color::Green);
    assert_eq!(m.committed_tokens(), 0);
}

fn arb_params() -> impl Strategy<Value = MeterParams> {
    (
        any::<(bool, bool, bool, bool)>(),
        0..3u8,
        (0..=31u8, any::<u8>()),
        (0..=31u8, any::<u8>()),
        (0..=31u8, any::<u8>()),
        (0..=31u8, any::<u8>()),
    )
        .prop_map(
            |((valid, overflow, both, packets), start_color, cbs, cir, ebs, eir)| MeterParams {
                valid,
                bucket_overflow: overflow,
                start_color,
                both_buckets_on_green: both,
                mode: if packets {
                    MeterMode::Packets
                } else {
                    MeterMode::Bytes
                },
                cbs,
                cir,
                ebs,
                eir,
            },
        )
}

proptest! {
    #[test]
    fn params_round_trip(p in arb_params()) {
        prop_assert_eq!(MeterParams::decode(&p.encode()), Ok(p));
    }

    #[test]
    fn decode_never_panics(b in vec(any::<u8>(), 0..40)) {
        if let Ok(p) = MeterParams::decode(&b) {
            prop_assert_eq!(&p.encode()[..], &b[..]);
        }
    }

    #[test]
    fn decode_of_32_bytes_never_panics(b in any::<[u8; 32]>()) {
        if let Ok(p) = MeterParams::decode(&b) {
            prop_assert_eq!(p.encode(), b);
        }
    }

    #[test]
    fn single_rate_is_within_half_a_percent(rate in 60u64..250_000_000_000, burst in any::<u64>()) {
        let p = MeterParams::single_rate(rate, burst, MeterMode::Bytes);
        prop_assert!(within(p.cir_per_sec(), rate as f64, 0.005), "{:?}", p.cir);
        // The smallest representable burst at or above the request.
        let best = (0..=31u8)
            .flat_map(|e| (0..=255u8).map(move |m| u64::from(m) << e))
            .filter(|&v| v >= burst)
            .min()
            .unwrap_or(255 << 31);
        prop_assert_eq!(p.cbs(), best);
        prop_assert!(MeterParams::decode(&p.encode()).is_ok());
    }

    #[test]
    fn marking_never_panics(
        p in arb_params(),
        steps in vec((any::<u64>(), any::<u32>()), 1..50),
    ) {
        let mut m = MeterState::new(&p, 0);
        for (t, len) in steps {
            let _ = m.mark(t, len);
            prop_assert!(m.committed_tokens() <= p.cbs());
            prop_assert!(m.excess_tokens() <= p.ebs());
        }
    }
}

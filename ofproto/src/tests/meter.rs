use super::*;

#[test]
fn add_meter_syntax_parses_and_prints_back() {
    let m = parse_meter("meter=1,kbps,burst,band=type=drop,rate=8000,burst_size=800").expect("ok");
    assert_eq!(
        m,
        MeterSpec {
            id: MeterId(1),
            packets: false,
            rate: 8000,
            burst_size: 800,
            stats: false,
        }
    );
    assert_eq!(parse_meter(&m.to_string()).expect("round trip"), m);
    let p = parse_meter("meter=7,pktps,band=type=drop,rate=100").expect("ok");
    assert!(p.packets);
    assert_eq!(
        p.band(),
        MeterBand {
            rate: 100,
            burst: 10,
            packets: true
        }
    );
    // 8000 kbit/s = 1,000,000 B/s; burst 800 kbit = 100,000 B.
    assert_eq!(m.band(), MeterBand::bytes(1_000_000, 100_000));
}

#[test]
fn bad_meters_name_the_problem() {
    for (text, what) in [
        ("meter=1,kbps", "missing band"),
        ("kbps,band=type=drop,rate=5", "missing meter=ID"),
        ("meter=0,band=type=drop,rate=5", "out of range"),
        ("meter=1,band=type=dscp_remark,rate=5", "dscp_remark"),
        ("meter=1,band=type=drop,rate=x", "\"x\" is not a number"),
        (
            "meter=1,flurb,band=type=drop,rate=5",
            "unknown token \"flurb\"",
        ),
        ("meter=1,band=type=drop,rate=0", "rate 0"),
    ] {
        let e = parse_meter(text).expect_err(text).to_string();
        assert!(e.contains(what), "{text}: {e}");
    }
}

#[test]
fn bucket_passes_the_rate_over_time() {
    // 10,000 B/s, burst 1,000 B; 100-byte packets every 1 ms = 100,000 B/s offered.
    let mut b = Bucket::new(MeterBand::bytes(10_000, 1_000));
    let mut passed = 0u64;
    for i in 0..10_000u64 {
        if b.charge(100, Timestamp(1_000_000 + i * 1_000_000)) {
            passed += 100;
        }
    }
    // 10 s at 10,000 B/s plus the initial burst.
    let want = 10_000 * 10 + 1_000;
    assert!(
        passed.abs_diff(want) <= 200,
        "passed {passed}, want about {want}"
    );
}

#[test]
fn packet_meter_counts_packets_and_unknown_meter_drops() {
    let mut t = MeterTable::new();
    t.set(parse_meter("meter=2,pktps,band=type=drop,rate=10,burst_size=2").expect("ok"));
    let now = Timestamp(5_000_000_000);
    let results: Vec<bool> = (0..4).map(|_| t.charge(MeterId(2), 1500, now)).collect();
    assert_eq!(results, [true, true, false, false]);
    let s = t.stats(MeterId(2)).expect("stats");
    assert_eq!((s.packets, s.dropped_packets), (2, 2));
    // 100 ms later one more token.
    assert!(t.charge(MeterId(2), 64, Timestamp(5_100_000_000)));
    assert!(!t.charge(MeterId(9), 64, now), "unknown meter drops");
    let g = t.generation();
    t.remove(MeterId(2));
    assert!(t.generation() > g);
}

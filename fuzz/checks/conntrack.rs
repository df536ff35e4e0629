//! Fuzz target for the connection tracker (`conntrack`, what `ct()` runs
//! on every packet a stateful table sends it): any bytes, as an Ethernet
//! frame, are tracked or marked invalid without a panic; the state is
//! always tracked, never both invalid and new/established; the frame keeps
//! its length; a translated packet parses again with the translated
//! address; what the FDB's conntrack table asks of the tracker (the state
//! a post-ct miss gets back, the directions hardware may take, offers)
//! holds on the same bytes; and the same bytes read as `flush-conntrack`
//! arguments and as a `nat(...)` argument are read or refused with a
//! reason.
//!
//! Input: byte 0 chooses the action (bit 0 commit, bit 1 SNAT, bit 2 a
//! second packet in the reply direction), the rest is the frame.

use conntrack::state::{EST, INV, NEW, SNAT, TRK};
use conntrack::{Addr, Config, CtMeta, CtSpec, FlushFilter, NatKind, NatRange, NatSpec, Tracker};

const NAT_ADDR: [u8; 4] = [198, 19, 0, 1];

fn spec(flags: u8) -> CtSpec {
    CtSpec {
        zone: 3,
        commit: flags & 1 != 0,
        nat: (flags & 2 != 0).then_some(NatSpec {
            range: Some(NatRange {
                port_min: 1024,
                port_max: 1030,
                ..NatRange::to_addr(NatKind::Src, Addr::v4(NAT_ADDR), false)
            }),
        }),
        ..CtSpec::default()
    }
}

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Some((&flags, frame)) = data.split_first() else {
        return;
    };
    let t = Tracker::new(Config {
        seed: Some(1),
        max_conns: 4,
        ..Config::default()
    });
    let mut f = frame.to_vec();
    let et = f
        .get(12..14)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let mut m = CtMeta::default();
    t.execute(&mut f, 14, et, &spec(flags), &mut m, 1_000);
    assert_eq!(f.len(), frame.len());
    assert!(m.state & TRK != 0, "{:#x}", m.state);
    assert!(
        m.state & INV == 0 || m.state & (NEW | EST) == 0,
        "{:#x}",
        m.state
    );
    if m.state & SNAT != 0 {
        let p = conntrack::packet::parse(&f, 14, et).expect("a translated packet parses");
        assert_eq!(p.tuple.src, Addr::v4(NAT_ADDR));
    }
    if flags & 4 != 0 {
        // The frame again, as its own reply would look: swapped.
        if let Ok(p) = conntrack::packet::parse(&f, 14, et) {
            if let Some(r) = p.tuple.reverse() {
                let mut g = f.clone();
                conntrack::packet::rewrite(&mut g, &p, &r);
                let mut m2 = CtMeta::default();
                t.execute(&mut g, 14, et, &spec(0), &mut m2, 2_000);
                assert!(m2.state & TRK != 0);
            }
        }
    }
    // What the FDB's conntrack table asks of the tracker, on the same
    // bytes: the state a post-ct miss gets back is established; a
    // direction hardware may take is established TCP or UDP, offered at
    // most once a direction.
    for translated in [false, true] {
        if let Some(r) = t.restore_meta(&f, 14, et, 3, translated, 2_500) {
            assert_eq!(r.state & (TRK | EST), TRK | EST, "{:#x}", r.state);
        }
    }
    if m.orig.proto != 0 {
        for reply in [false, true] {
            if let Some(v) = t.hw_view(3, &m.orig, reply, flags & 2 != 0, 2_500) {
                assert_eq!(v.meta.state & (TRK | EST | NEW | INV), TRK | EST);
                assert!(matches!(v.tuple.proto, 6 | 17));
                t.offer(3, &m.orig, reply, false, 2_500);
                t.offer(3, &m.orig, reply, false, 2_500);
            }
        }
        let mut offers = Vec::new();
        t.take_offers(&mut offers);
        assert!(offers.len() <= 2, "{offers:?}");
        let _ = t.hw_used(3, &m.orig, 2_600);
    }
    assert!(t.len() <= 4);
    let _ = t.dump(None, 1_500);
    let _ = t.proto_counts(None, 1_500);
    t.sweep(u64::MAX / 2, 1 << 20);
    assert!(t.is_empty());
    if let Ok(text) = std::str::from_utf8(frame) {
        let args: Vec<&str> = text.split_whitespace().collect();
        if let Ok(filter) = FlushFilter::parse(&args) {
            let _ = t.flush(&filter);
        }
        if let Ok(n) = conntrack::nat::parse_nat(text) {
            let back = conntrack::nat::format_nat(&n);
            let inner = back.strip_prefix("nat").unwrap_or(&back);
            let inner = inner
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .unwrap_or(inner);
            assert_eq!(
                conntrack::nat::parse_nat(inner),
                Ok(n),
                "{text:?} printed as {back:?}"
            );
        }
    }
}

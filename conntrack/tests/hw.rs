//! What the FDB's conntrack table asks of the tracker: which connection
//! directions hardware may take and what it does to their packets (the
//! same as software), offers made once, hardware use keeping connections
//! alive, and the state a packet that missed after the table gets back.

mod common;

use common::*;
use conntrack::state::*;
use conntrack::Tracker;

#[test]
fn only_an_established_tcp_connection_is_for_hardware_and_both_directions_read_as_software() {
    let t = tracker();
    let s = ct(
        &t,
        &mut tcp(A, B, 40000, 80, SYN, 1000, 0, 0),
        &commit(0),
        0,
    );
    let orig = s.orig;
    assert!(t.hw_view(0, &orig, false, false, 1).is_none(), "SYN_SENT");
    ct(
        &t,
        &mut tcp(B, A, 80, 40000, SYN | ACK, 5000, 1001, 0),
        &zone(0),
        1,
    );
    assert!(
        t.hw_view(0, &orig, false, false, 2).is_none(),
        "one side still opening"
    );
    // The handshake's last ACK: what software gives it, hardware gives
    // every later packet of that direction.
    let sw = ct(
        &t,
        &mut tcp(A, B, 40000, 80, ACK, 1001, 5001, 0),
        &zone(0),
        2,
    );
    let v = t.hw_view(0, &orig, false, false, 3).expect("established");
    assert_eq!(v.meta, sw);
    assert_eq!(v.tuple, orig);
    assert_eq!(v.rewrite, None);
    let back = ct(
        &t,
        &mut tcp(B, A, 80, 40000, ACK, 5001, 1001, 0),
        &zone(0),
        3,
    );
    let r = t
        .hw_view(0, &orig, true, false, 4)
        .expect("reply direction");
    assert_eq!(r.meta, back);
    assert_eq!(r.meta.state, TRK | EST | RPL);
    assert_eq!(r.tuple, orig.reverse().expect("reverses"));
    // Another zone's view of it does not exist; a FIN takes it back.
    assert!(t.hw_view(1, &orig, false, false, 4).is_none());
    ct(
        &t,
        &mut tcp(A, B, 40000, 80, FIN | ACK, 1001, 5001, 0),
        &zone(0),
        5,
    );
    assert!(t.hw_view(0, &orig, false, false, 6).is_none(), "closing");
}

#[test]
fn a_snat_connection_is_rewritten_as_software_rewrites_it_and_restored_from_the_rewrite() {
    let t = tracker();
    let mut f = udp(A, B, 5000, 53);
    let first = ct(&t, &mut f, &snat(0, 0), 0);
    assert_eq!(first.state, TRK | NEW | SNAT);
    let orig = first.orig;
    // UDP is for hardware once it has a reply.
    assert!(t.hw_view(0, &orig, false, true, 1).is_none());
    let mut reply = udp(B, GW, 53, 5000);
    let back = ct(&t, &mut reply, &NAT, 1);
    assert_eq!(back.state, TRK | EST | RPL | DNAT);
    for (is_reply, from, to) in [
        (false, udp(A, B, 5000, 53), f.clone()),
        (true, udp(B, GW, 53, 5000), reply.clone()),
    ] {
        let v = t.hw_view(0, &orig, is_reply, true, 2).expect("established");
        assert_eq!(v.tuple, parsed(&from).tuple, "reply {is_reply}");
        assert_eq!(v.rewrite, Some(parsed(&to).tuple), "reply {is_reply}");
        // Software gives the same packet the same state and bytes.
        let mut sw = from.clone();
        let m = ct(&t, &mut sw, &NAT, 3);
        assert_eq!(v.meta, m, "reply {is_reply}");
        assert_eq!(tuple_of(&sw), tuple_of(&to));
        // A packet the table rewrote and that then missed the next table
        // gets that state back.
        let got = t
            .restore_meta(&to, L3, eth_type(&to), 0, true, 4)
            .expect("the connection");
        assert_eq!(got, v.meta, "reply {is_reply}");
        // Without ct(nat) the table leaves the packet alone.
        let plain = t
            .hw_view(0, &orig, is_reply, false, 4)
            .expect("established");
        assert_eq!(plain.rewrite, None);
        assert_eq!(plain.meta.state & (SNAT | DNAT), 0);
        let got = t
            .restore_meta(&from, L3, eth_type(&from), 0, false, 4)
            .expect("the connection");
        assert_eq!(got, plain.meta);
    }
    // A packet of no connection has no state to restore.
    let stranger = udp(B, A, 53, 9999);
    assert!(t
        .restore_meta(&stranger, L3, eth_type(&stranger), 0, false, 5)
        .is_none());
}

#[test]
fn a_direction_is_offered_once_until_hardware_forgets_it() {
    let t = tracker();
    let m = ct(&t, &mut udp(A, B, 6000, 53), &commit(3), 0);
    ct(&t, &mut udp(B, A, 53, 6000), &zone(3), 1);
    let mut got = Vec::new();
    for now in 2..5 {
        t.offer(3, &m.orig, false, false, now);
    }
    t.offer(3, &m.orig, true, false, 5);
    t.take_offers(&mut got);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].reply, got[1].reply), (false, true));
    t.take_offers(&mut got);
    assert_eq!(got.len(), 2, "taken once");
    t.hw_forget(3, &m.orig, false, 6);
    t.offer(3, &m.orig, false, false, 7);
    t.offer(3, &m.orig, true, false, 7);
    got.clear();
    t.take_offers(&mut got);
    assert_eq!(got.len(), 1, "only the forgotten direction: {got:?}");
}

#[test]
fn hardware_use_keeps_a_connection_alive_and_its_tcp_tracked_liberally() {
    let t = tracker();
    let spec = commit(0);
    ct(&t, &mut tcp(A, B, 41000, 80, SYN, 1000, 0, 0), &spec, 0);
    ct(
        &t,
        &mut tcp(B, A, 80, 41000, SYN | ACK, 5000, 1001, 0),
        &zone(0),
        1,
    );
    let m = ct(
        &t,
        &mut tcp(A, B, 41000, 80, ACK, 1001, 5001, 0),
        &zone(0),
        2,
    );
    // Far beyond the window software knows: invalid, as hardware had not
    // carried the bytes between.
    let far = |t: &Tracker, now| {
        ct(
            t,
            &mut tcp(A, B, 41000, 80, ACK, 1001 + 100_000_000, 5001, 10),
            &zone(0),
            now,
        )
        .state
    };
    assert_eq!(far(&t, 3), TRK | INV);
    let established_ms = 24 * 3600 * 1000;
    // Hardware forwarded its packets for longer than software's view of
    // it would last: it lives on, and its segments are checked liberally.
    let late = 2 * established_ms;
    for now in (established_ms / 2..=late).step_by((established_ms / 2) as usize) {
        assert!(t.hw_used(0, &m.orig, now), "alive at {now}");
    }
    assert!(t.hw_view(0, &m.orig, false, false, late).is_some());
    assert_eq!(far(&t, late + 1), TRK | EST);
    assert_eq!(t.hw_refreshes(), 4);
    // A connection that is gone is said to be.
    assert!(!t.hw_used(0, &m.orig, late + 10 * established_ms));
}

//! ICMPv6 and neighbour discovery.

use super::*;

#[test]
fn icmpv6_echo() {
    let (key, ex) = run(&v6_icmp(&icmp(128, 0, &[0x12, 0x34, 0, 1, 9, 9])));
    assert_eq!(ex.error, None);
    assert_eq!(key.ip_proto(), 58);
    assert_eq!((key.icmp_type(), key.icmp_code()), (128, 0));
    assert_eq!(key.nd_target(), 0);
    assert_eq!(ex.layout.l4, 54);
}

#[test]
fn nd_solicitation_with_sll() {
    let f = v6_icmp(&nd(135, IP6_B, &nd_opt(1, &SLL)));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (135, 0));
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), mac_u64(SLL));
    assert_eq!(key.arp_tha(), 0);
    assert_eq!(key.ip_ttl(), 255);
    assert_eq!(ex.layout.l4, 54);
    assert_eq!(ex.layout.l3_end as usize, f.len());

    // Without options: the target only.
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &[])));
    assert_eq!(ex.error, None);
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!((key.arp_sha(), key.arp_tha()), (0, 0));
}

#[test]
fn nd_advertisement_with_tll() {
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &nd_opt(2, &TLL))));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (136, 0));
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), 0);
    assert_eq!(key.arp_tha(), mac_u64(TLL));
}

#[test]
fn nd_options_that_do_not_apply_are_skipped() {
    // Nonce (type 14), a 16-byte "SLL" (not the Ethernet form), then the SLL.
    let mut opts = nd_opt(14, &[1, 2, 3, 4, 5, 6]);
    opts.extend(nd_opt(1, &[0xee; 14]));
    opts.extend(nd_opt(1, &SLL));
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &opts)));
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_sha(), mac_u64(SLL));

    // TLL in a solicitation and SLL in an advertisement are ignored.
    let (key, ex) = run(&v6_icmp(&nd(135, IP6_B, &nd_opt(2, &TLL))));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.nd_target(), key.arp_sha(), key.arp_tha()),
        (IP6_B, 0, 0)
    );
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &nd_opt(1, &SLL))));
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.nd_target(), key.arp_sha(), key.arp_tha()),
        (IP6_B, 0, 0)
    );

    // A non-zero code is not neighbour discovery.
    let mut m = nd(135, IP6_B, &nd_opt(1, &SLL));
    m[1] = 1;
    let (key, ex) = run(&v6_icmp(&m));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.tp_dst()), (135, 1));
    assert_eq!((key.nd_target(), key.arp_sha()), (0, 0));

    // Router solicitation (133) is not parsed as ND either.
    let (key, ex) = run(&v6_icmp(&icmp(133, 0, &[0; 4])));
    assert_eq!(ex.error, None);
    assert_eq!((key.tp_src(), key.nd_target()), (133, 0));
}

#[test]
fn malformed_nd_options_clear_nd_fields() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zero-length option", {
            let mut o = nd_opt(1, &SLL);
            o[1] = 0;
            o
        }),
        ("zero-length option after a good one", {
            let mut o = nd_opt(1, &SLL);
            o.extend_from_slice(&[14, 0, 0, 0, 0, 0, 0, 0]);
            o
        }),
        ("duplicate SLL", {
            let mut o = nd_opt(1, &SLL);
            o.extend(nd_opt(1, &TLL));
            o
        }),
        ("option longer than the payload", {
            let mut o = nd_opt(1, &SLL);
            o[1] = 2;
            o
        }),
        ("truncated option", nd_opt(1, &SLL)[..5].to_vec()),
        ("one trailing byte", {
            let mut o = nd_opt(1, &SLL);
            o.push(1);
            o
        }),
    ];
    for (what, opts) in cases {
        let f = v6_icmp(&nd(135, IP6_B, &opts));
        let (key, ex) = run(&f);
        assert_eq!(ex.error, Some(ParseError::BadNd), "{what}");
        assert_eq!(
            (key.nd_target(), key.arp_sha(), key.arp_tha()),
            (0, 0, 0),
            "{what}"
        );
        // The ICMPv6 type/code and the IPv6 layer are kept.
        assert_eq!((key.tp_src(), key.tp_dst()), (135, 0), "{what}");
        assert_eq!((key.ip_proto(), key.ipv6_src()), (58, IP6_A), "{what}");
        assert_eq!(ex.layout.l4, 54, "{what}");
    }

    // Duplicate TLL in an advertisement.
    let mut o = nd_opt(2, &TLL);
    o.extend(nd_opt(2, &SLL));
    let (key, ex) = run(&v6_icmp(&nd(136, IP6_B, &o)));
    assert_eq!(ex.error, Some(ParseError::BadNd));
    assert_eq!((key.nd_target(), key.arp_tha()), (0, 0));
}

#[test]
fn nd_options_are_bounded_by_payload_length() {
    // An SLL option sits in the Ethernet padding, outside the IPv6 payload.
    let mut f = v6_icmp(&nd(135, IP6_B, &[]));
    f.extend(nd_opt(1, &SLL));
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.nd_target(), IP6_B);
    assert_eq!(key.arp_sha(), 0);
}

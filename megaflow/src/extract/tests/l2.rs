//! Ethernet, VLAN tags, 802.3 / LLC-SNAP and ARP.

use super::*;

// ------------------------------------------------------------- Ethernet

#[test]
fn short_frames_are_truncated_ethernet() {
    let f = eth(0x88cc, &[1, 2, 3]);
    for len in 0..14 {
        let (key, ex) = run(&f[..len]);
        assert_eq!(ex.error, Some(ParseError::TruncatedEthernet));
        assert_eq!(ex.layout, Layout::NONE);
        let mut want = FlowKey::ZERO;
        want.set_in_port(7);
        assert_eq!(key, want);
    }
}

#[test]
fn unknown_ethertype_keeps_l2_only() {
    let f = eth(0x88cc, &[0xaa; 40]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.in_port(), 7);
    assert_eq!(key.eth_dst(), mac_u64(MAC_B));
    assert_eq!(key.eth_src(), mac_u64(MAC_A));
    assert_eq!(key.eth_type(), 0x88cc);
    assert_eq!(key.vlan_tci(), 0);
    assert_eq!(only(&key, L2_FIELDS), key);
    assert_eq!(ex.layout.l3, 14);
    assert_eq!(ex.layout.l4, NO_OFFSET);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn in_port_is_kept_whole_and_key_is_overwritten() {
    let f = eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, b"x")));
    let mut key = FlowKey::from_words([u64::MAX; crate::key::KEY_WORDS]);
    let ex = extract_into(0xfedc_ba98, &f, &mut key);
    assert_eq!(ex.error, None);
    assert_eq!(key.in_port(), 0xfedc_ba98);
    assert_eq!(key, extract(0xfedc_ba98, &f));
    assert_eq!(key.metadata(), 0);
    assert_eq!(key.nd_target(), 0);
    assert_eq!(key.ipv6_src(), 0);
}

// ------------------------------------------------------------------ VLAN

#[test]
fn single_vlan_tag() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 0xa064)], ETH_TYPE_IPV4, &ip);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.vlan_tci(), (0xa064 | VLAN_PRESENT) as u64);
    assert_eq!(key.vlan_tci() as u16 & crate::key::VLAN_VID_MASK, 100);
    assert_eq!((key.vlan_tci() as u16 & crate::key::VLAN_PCP_MASK) >> 13, 5);
    assert_eq!(key.vlan_tpid(), 0x8100);
    assert_eq!((key.vlan2_tpid(), key.vlan2_tci()), (0, 0));
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!((key.tp_src(), key.tp_dst()), (1, 2));
    assert_eq!(ex.layout.vlans, 1);
    assert_eq!(ex.layout.l3, 18);
    assert_eq!(ex.layout.l4, 38);

    // A priority tag (VID 0, PCP 0) differs from no tag.
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 0)], ETH_TYPE_IPV4, &ip);
    let (key, _) = run(&f);
    assert_eq!(key.vlan_tci(), VLAN_PRESENT as u64);
    let untagged = extract(7, &eth(ETH_TYPE_IPV4, &ip));
    assert_eq!(untagged.vlan_tci(), 0);
    assert_ne!(key, untagged);
}

#[test]
fn qinq_double_tag() {
    let ip = V4::default().build(&udp(40101, 53, b"q"));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 0x600a), (ETH_TYPE_VLAN, 0x0064)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.vlan_tpid(), 0x88a8);
    assert_eq!(key.vlan_tci(), 0x700a);
    assert_eq!(key.vlan2_tpid(), 0x8100);
    assert_eq!(key.vlan2_tci(), 0x1064);
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!((key.tp_src(), key.tp_dst()), (40101, 53));
    assert_eq!(ex.layout.vlans, 2);
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l4, 42);
}

#[test]
fn third_tag_is_left_as_ethertype() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 1), (ETH_TYPE_VLAN, 2), (ETH_TYPE_VLAN, 3)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x8100);
    assert_eq!(key.vlan_tci(), 0x1001);
    assert_eq!(key.vlan2_tci(), 0x1002);
    assert_eq!((key.ip_proto(), key.ipv4_src(), key.tp_src()), (0, 0, 0));
    assert_eq!(ex.layout.vlans, 2);
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l3_end, NO_OFFSET);
}

#[test]
fn truncated_vlan_tags() {
    let ip = V4::default().build(&udp(1, 2, b""));
    let f = eth_tagged(
        &[(ETH_TYPE_QINQ, 0x0123), (ETH_TYPE_VLAN, 0x0456)],
        ETH_TYPE_IPV4,
        &ip,
    );
    let full = extract(7, &f);
    let mut one_tag = only(&full, ETH_FIELDS);
    one_tag.set_vlan_tpid(0x88a8);
    one_tag.set_vlan_tci(0x1123);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, Some(ParseError::TruncatedVlan), only(&full, ETH_FIELDS)),
            stage(18, Some(ParseError::TruncatedVlan), one_tag),
            stage(22, Some(ParseError::BadIpv4), only(&full, L2_FIELDS)),
            stage(f.len(), None, full),
        ],
    );
}

// --------------------------------------------------------------- 802.3

#[test]
fn llc_snap_carries_an_ethertype() {
    let ip = V4::default().build(&udp(40102, 9999, b"snap"));
    let mut p = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    p.extend_from_slice(&ip);
    let f = dot3(&p);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x0800);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!((key.tp_src(), key.tp_dst()), (40102, 9999));
    assert_eq!(ex.layout.l3, 22);
    assert_eq!(ex.layout.l4, 42);

    // Truncation inside the SNAP header: plain 802.3, no error.
    let full = key;
    let mut plain = only(&full, ETH_FIELDS);
    plain.set_eth_type(ETH_TYPE_NONE as u64);
    let l2 = only(&full, L2_FIELDS);
    assert_eq!(l2.eth_type(), 0x0800);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, None, plain),
            stage(22, Some(ParseError::BadIpv4), l2),
            stage(f.len(), None, full),
        ],
    );
}

#[test]
fn plain_802_3_is_eth_type_none() {
    // STP BPDU behind LLC 42 42 03.
    let mut p = vec![0x42, 0x42, 0x03];
    p.extend_from_slice(&[0; 35]);
    let f = dot3(&p);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(key.eth_src(), mac_u64(MAC_A));
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // SNAP with a non-zero OUI (Cisco CDP) is not an ethertype encapsulation.
    let f = dot3(&[0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00, 1, 2, 3, 4]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // SNAP whose "ethertype" is a length is 802.3 as well.
    let f = dot3(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x01, 0x00, 0x45, 0, 0, 20]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x05ff);
    assert_eq!(ex.layout.l3, NO_OFFSET);

    // The boundary: 0x05ff is a length, 0x0600 an ethertype.
    let (key, ex) = run(&eth(0x05ff, &[0; 8]));
    assert_eq!((key.eth_type(), ex.layout.l3), (0x05ff, NO_OFFSET));
    let (key, ex) = run(&eth(0x0600, &[0; 8]));
    assert_eq!((key.eth_type(), ex.layout.l3), (0x0600, 14));

    // 802.3 behind a VLAN tag.
    let f = eth_tagged(&[(ETH_TYPE_VLAN, 5)], 0x0010, &[0x42; 16]);
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!((key.eth_type(), key.vlan_tci()), (0x05ff, 0x1005));
}

// ------------------------------------------------------------------- ARP

#[test]
fn arp_request_and_reply() {
    let req = eth(ETH_TYPE_ARP, &arp(1, MAC_A, IP_A, [0; 6], IP_B));
    let (key, ex) = run(&req);
    assert_eq!(ex.error, None);
    assert_eq!(key.eth_type(), 0x0806);
    assert_eq!(key.arp_op(), 1);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!(key.ipv4_dst(), ip_u64(IP_B));
    assert_eq!(key.arp_sha(), mac_u64(MAC_A));
    assert_eq!(key.arp_tha(), 0);
    assert_eq!((key.tp_src(), key.ip_ttl()), (0, 0));
    assert_eq!(ex.layout.l3, 14);
    assert_eq!(ex.layout.l4, NO_OFFSET);

    // Reply, padded to 60 bytes.
    let mut rep = eth(ETH_TYPE_ARP, &arp(2, MAC_B, IP_B, MAC_A, IP_A));
    rep.resize(60, 0);
    let (key, ex) = run(&rep);
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_op(), 2);
    assert_eq!(key.ipv4_src(), ip_u64(IP_B));
    assert_eq!(key.ipv4_dst(), ip_u64(IP_A));
    assert_eq!(key.arp_sha(), mac_u64(MAC_B));
    assert_eq!(key.arp_tha(), mac_u64(MAC_A));
}

#[test]
fn unusual_arp() {
    // Opcode above 255: addresses but no opcode.
    let (key, ex) = run(&eth(ETH_TYPE_ARP, &arp(0x0101, MAC_A, IP_A, MAC_B, IP_B)));
    assert_eq!(ex.error, None);
    assert_eq!(key.arp_op(), 0);
    assert_eq!(key.ipv4_src(), ip_u64(IP_A));
    assert_eq!(key.arp_tha(), mac_u64(MAC_B));

    // Not Ethernet/IPv4 (hardware type 6, or a 16-byte protocol address).
    for (i, v) in [(1usize, 6u8), (5, 16), (4, 8)] {
        let mut a = arp(1, MAC_A, IP_A, MAC_B, IP_B);
        a[i] = v;
        let f = eth(ETH_TYPE_ARP, &a);
        let (key, ex) = run(&f);
        assert_eq!(ex.error, None);
        assert_eq!(key, only(&key, L2_FIELDS), "byte {i} = {v}");
        assert_eq!(key.eth_type(), 0x0806);
    }

    // ARP behind a VLAN tag.
    let f = eth_tagged(
        &[(ETH_TYPE_VLAN, 100)],
        ETH_TYPE_ARP,
        &arp(1, MAC_A, IP_A, [0; 6], IP_B),
    );
    let (key, ex) = run(&f);
    assert_eq!(ex.error, None);
    assert_eq!(
        (key.vlan_tci(), key.arp_op(), key.ipv4_dst()),
        (0x1064, 1, ip_u64(IP_B))
    );
}

#[test]
fn truncated_arp() {
    let f = eth(ETH_TYPE_ARP, &arp(1, MAC_A, IP_A, [0; 6], IP_B));
    let full = extract(7, &f);
    sweep(
        &f,
        &[
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(14, Some(ParseError::TruncatedArp), only(&full, L2_FIELDS)),
            stage(42, None, full),
        ],
    );
}

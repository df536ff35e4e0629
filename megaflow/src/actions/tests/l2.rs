//! Ethernet addresses and VLAN tags.

use super::*;

#[test]
fn push_vlan_then_set() {
    let acts = [
        DpAction::PushVlan {
            tpid: ETH_TYPE_VLAN,
            tci: 0x2064,
        },
        DpAction::SetIpv4Dst(ip4("10.0.0.3")),
    ];
    let (out, _) = output_of(&acts, P2_IN);
    assert_eq!(out, P8_PUSH_OUT);
    check_checksums(&out).unwrap();
    let mut sink = CollectSink::new();
    let (_, layout, _) = run_on(&acts, P2_IN, &mut sink);
    assert_eq!(
        layout,
        Layout {
            l3: 18,
            l4: 38,
            l3_end: 50,
            vlans: 1
        }
    );
}

#[test]
fn pop_vlan_then_set() {
    let (out, _) = output_of(&[DpAction::PopVlan, DpAction::SetTpDst(67)], P8_POP_IN);
    assert_eq!(out, P8_POP_OUT);
    check_checksums(&out).unwrap();
    // Popping an untagged packet changes nothing.
    let (out, o) = output_of(&[DpAction::PopVlan], P2_IN);
    assert_eq!(out, P2_IN);
    assert_eq!(o.skipped, 0);
}

#[test]
fn push_goes_outside_existing_tag_and_pops_in_order() {
    let push = DpAction::PushVlan {
        tpid: ETH_TYPE_VLAN,
        tci: 0x0005,
    };
    let (out, _) = output_of(std::slice::from_ref(&push), P8_POP_IN);
    assert_eq!(
        out[12..20],
        [0x81, 0x00, 0x00, 0x05, 0x88, 0xa8, 0x00, 0x64]
    );
    assert_eq!(out[20..], P8_POP_IN[16..]);
    let (key, layout) = parse(&out);
    assert_eq!((key.vlan_tci(), key.vlan2_tci()), (0x1005, 0x1064));
    assert_eq!(layout.vlans, 2);
    let (out, _) = output_of(&[push, DpAction::PopVlan, DpAction::PopVlan], P8_POP_IN);
    assert_eq!(out, P2_IN);
    // A push on a frame shorter than an Ethernet header is skipped.
    let mut sink = CollectSink::new();
    let (buf, _, o) = run_on(
        &[DpAction::PushVlan {
            tpid: 0x8100,
            tci: 1,
        }],
        &P2_IN[..13],
        &mut sink,
    );
    assert_eq!(buf, P2_IN[..13]);
    assert_eq!(o.skipped, 1);
}

#[test]
fn set_eth_addresses() {
    let (out, _) = output_of(
        &[
            DpAction::SetEthDst(0x0a0b_0c0d_0e0f),
            DpAction::SetEthSrc(0xffff_0000_0000_0001),
        ],
        ARP,
    );
    assert_eq!(
        out[..12],
        [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0, 0, 0, 0, 0, 1]
    );
    assert_eq!(out[12..], ARP[12..]);
}

#[test]
fn arp_fields_are_written_where_the_key_reads_them_and_nowhere_else() {
    let req = crate::frame::arp_request(0x0200_0000_0001, ip4("198.18.0.1"), ip4("198.18.0.2"));
    let acts = [
        DpAction::SetArp(ArpField::Op(2)),
        DpAction::SetArp(ArpField::Sha(0x0200_0000_00aa)),
        DpAction::SetArp(ArpField::Spa(ip4("198.18.7.1"))),
        DpAction::SetArp(ArpField::Tha(0x0200_0000_00bb)),
        DpAction::SetArp(ArpField::Tpa(ip4("198.18.7.2"))),
    ];
    let (out, o) = output_of(&acts, &req);
    assert_eq!(o.skipped, 0);
    let key = parse(&out).0;
    assert_eq!(key.field(crate::Field::IpProto), 2);
    assert_eq!(key.field(crate::Field::ArpSha), 0x0200_0000_00aa);
    assert_eq!(
        key.field(crate::Field::Ipv4Src),
        u128::from(ip4("198.18.7.1"))
    );
    assert_eq!(key.field(crate::Field::ArpTha), 0x0200_0000_00bb);
    assert_eq!(
        key.field(crate::Field::Ipv4Dst),
        u128::from(ip4("198.18.7.2"))
    );
    // Only those bytes changed: the Ethernet header and the tail stay.
    let changed: Vec<usize> = (0..req.len()).filter(|&i| req[i] != out[i]).collect();
    assert!(
        changed.iter().all(|&i| (20..42).contains(&i)),
        "{changed:?}"
    );
    // Not an ARP packet: nothing written, the action counted as skipped.
    let (out, o) = output_of(&[DpAction::SetArp(ArpField::Tpa(1))], P2_IN);
    assert_eq!((out.as_slice(), o.skipped), (P2_IN, 1));
}

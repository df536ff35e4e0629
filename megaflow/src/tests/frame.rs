use super::*;
use crate::extract;

fn verify(f: &[u8]) {
    let key = extract(1, f);
    let l3 = 14 + 4 * (usize::from(key.vlan_tci() != 0) + usize::from(key.vlan2_tci() != 0));
    if key.eth_type() == 0x0800 {
        assert_eq!(checksum(0, &f[l3..l3 + 20]), 0, "IPv4 header checksum");
        let total = usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]));
        let l4 = &f[l3 + 20..l3 + total];
        let pseudo = sum16(&f[l3 + 12..l3 + 20]) + u32::from(f[l3 + 9]) + l4.len() as u32;
        let init = if f[l3 + 9] == 1 { 0 } else { pseudo };
        assert_eq!(checksum(init, l4), 0, "L4 checksum");
    } else {
        let plen = usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]));
        let l4 = &f[l3 + 40..l3 + 40 + plen];
        let pseudo = sum16(&f[l3 + 8..l3 + 40]) + u32::from(f[l3 + 6]) + l4.len() as u32;
        assert_eq!(checksum(pseudo, l4), 0, "L4 checksum");
    }
}

#[test]
fn frames_parse_back_with_valid_checksums() {
    let cases = [
        FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::tcp(1234, 80)).payload(100),
        FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(5000, 53)),
        FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::Icmp { ty: 8, code: 0 }).payload(56),
        FrameSpec::ipv6(0x2001_0db8 << 96 | 1, 0x2001_0db8 << 96 | 2, L4::udp(1, 2)).payload(3),
        FrameSpec::ipv6(1, 2, L4::Icmp { ty: 128, code: 0 }),
        FrameSpec::ipv4(1, 2, L4::udp(7, 9))
            .vlan(0x88a8, 5)
            .vlan(0x8100, 100),
    ];
    for spec in cases {
        let f = spec.build();
        assert!(f.len() >= 60);
        verify(&f);
        let key = extract(1, &f);
        match spec.l4 {
            L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport } => {
                assert_eq!(
                    (key.tp_src(), key.tp_dst()),
                    (u64::from(sport), u64::from(dport))
                );
            }
            _ => {}
        }
        match spec.l3 {
            L3::Ipv4 { src, dst } => {
                assert_eq!(
                    (key.ipv4_src(), key.ipv4_dst()),
                    (u64::from(src), u64::from(dst))
                )
            }
            L3::Ipv6 { src, dst } => assert_eq!((key.ipv6_src(), key.ipv6_dst()), (src, dst)),
        }
    }
}

#[test]
fn arp_request_is_broadcast_arp() {
    let f = arp_request(0x0200_0000_0001, 0xc612_0001, 0xc612_0002);
    let key = extract(3, &f);
    assert_eq!(key.eth_type(), 0x0806);
    assert_eq!(key.eth_dst(), 0xffff_ffff_ffff);
    assert_eq!(f.len(), 60);
}

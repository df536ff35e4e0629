//! Truncation sweeps over every prefix of a frame, and the error counters.

use super::*;

// ---------------------------------------------------- truncation sweeps

/// Every prefix of a valid frame: the IP length check makes any cut inside
/// the IP packet a bad L3 header, with everything past L2 zero.
#[test]
fn truncated_ip_frames() {
    let v4 = V4 {
        proto: IP_PROTO_TCP,
        opts: vec![1, 1, 1, 0],
        ..V4::default()
    };
    let v6 = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    };
    let mut chain = ext(IP_PROTO_UDP, 0);
    chain.extend(udp(1, 2, b"xy"));
    let frames = [
        (
            eth(ETH_TYPE_IPV4, &v4.build(&tcp(1, 2, 2, &[]))),
            ParseError::BadIpv4,
        ),
        (
            eth_tagged(
                &[(ETH_TYPE_VLAN, 7)],
                ETH_TYPE_IPV4,
                &V4::default().build(&udp(1, 2, b"z")),
            ),
            ParseError::BadIpv4,
        ),
        (eth(ETH_TYPE_IPV6, &v6.build(&chain)), ParseError::BadIpv6),
        (
            v6_icmp(&nd(135, IP6_B, &nd_opt(1, &SLL))),
            ParseError::BadIpv6,
        ),
    ];
    for (f, err) in &frames {
        let full = extract(7, f);
        let l3 = 14 + 4 * (full.vlan_tci() != 0) as usize;
        let mut stages = vec![
            stage(
                0,
                Some(ParseError::TruncatedEthernet),
                only(&full, &[Field::InPort]),
            ),
            stage(l3, Some(*err), only(&full, L2_FIELDS)),
            stage(f.len(), None, full),
        ];
        if l3 > 14 {
            stages.insert(
                1,
                stage(14, Some(ParseError::TruncatedVlan), only(&full, ETH_FIELDS)),
            );
        }
        sweep(f, &stages);
    }
}

/// Cuts the IPv4 payload (`l4`) at every length, with the total length
/// adjusted, and checks which L4 error each cut gives.
fn sweep_ipv4_l4(proto: u8, l4: &[u8], need: usize, err: ParseError) {
    let ip = V4 {
        proto,
        ..V4::default()
    };
    let full = extract(7, &eth(ETH_TYPE_IPV4, &ip.build(l4)));
    let l3_key = only(&full, &fields(&[L2_FIELDS, L3_FIELDS, &[Field::IpProto]]));
    for k in 0..=l4.len() {
        let f = eth(ETH_TYPE_IPV4, &ip.build(&l4[..k]));
        let (key, ex) = run(&f);
        if k < need {
            assert_eq!(ex.error, Some(err), "proto {proto}, {k} bytes");
            assert_eq!(key, l3_key, "proto {proto}, {k} bytes");
            assert_eq!(ex.layout.l4, NO_OFFSET);
        } else {
            assert_eq!(ex.error, None, "proto {proto}, {k} bytes");
            assert_eq!(key, full, "proto {proto}, {k} bytes");
            assert_eq!(ex.layout.l4, 34);
        }
        assert_eq!(ex.layout.l3_end as usize, f.len());
    }
}

#[test]
fn truncated_l4_headers() {
    let t = tcp(1, 2, 0x011, &[1, 1, 1, 1]);
    sweep_ipv4_l4(IP_PROTO_TCP, &t, 24, ParseError::BadTcp);
    sweep_ipv4_l4(IP_PROTO_UDP, &udp(3, 4, b""), 8, ParseError::TruncatedUdp);
    sweep_ipv4_l4(IP_PROTO_SCTP, &sctp(5, 6), 12, ParseError::TruncatedSctp);
    sweep_ipv4_l4(
        IP_PROTO_ICMP,
        &icmp(8, 0, &[]),
        4,
        ParseError::TruncatedIcmp,
    );

    // A TCP data offset below 5 words is invalid even with bytes to spare.
    let mut t = tcp(1, 2, 0x002, &[0; 8]);
    for doff in 0..5u8 {
        t[12] = doff << 4;
        let ip = V4 {
            proto: IP_PROTO_TCP,
            ..V4::default()
        };
        let (key, ex) = run(&eth(ETH_TYPE_IPV4, &ip.build(&t)));
        assert_eq!(ex.error, Some(ParseError::BadTcp), "doff {doff}");
        assert_eq!(key.tp_src(), 0);
    }
}

#[test]
fn truncated_ipv6_chain_and_l4() {
    let mut p = ext(IPV6_ROUTING, 0);
    p.extend(ext(IPV6_DSTOPTS, 2));
    p.extend(ext(IP_PROTO_TCP, 1));
    p.extend(tcp(9, 10, 0x002, &[]));
    let hdr = V6 {
        nh: IPV6_HOPOPTS,
        ..V6::default()
    };
    let full = extract(7, &eth(ETH_TYPE_IPV6, &hdr.build(&p)));
    let l3 = fields(&[L2_FIELDS, L3_FIELDS]);
    for k in 0..=p.len() {
        let (key, ex) = run(&eth(ETH_TYPE_IPV6, &hdr.build(&p[..k])));
        if k < 48 {
            assert_eq!(ex.error, Some(ParseError::BadIpv6Ext), "{k} bytes");
            assert_eq!(key, only(&full, &l3), "{k} bytes");
        } else if k < 68 {
            assert_eq!(ex.error, Some(ParseError::BadTcp), "{k} bytes");
            let mut want = only(&full, &l3);
            want.set_ip_proto(6);
            assert_eq!(key, want, "{k} bytes");
        } else {
            assert_eq!((ex.error, key), (None, full));
        }
    }
}

#[test]
fn truncated_nd() {
    let m = nd(135, IP6_B, &nd_opt(1, &SLL));
    let full = extract(7, &v6_icmp(&m));
    let l3 = fields(&[L2_FIELDS, L3_FIELDS, &[Field::IpProto]]);
    for k in 0..=m.len() {
        let (key, ex) = run(&v6_icmp(&m[..k]));
        let mut want = only(&full, &l3);
        let err = match k {
            0..=3 => Some(ParseError::TruncatedIcmp),
            4..=23 => {
                want.set_tp_src(135);
                Some(ParseError::BadNd)
            }
            24 => {
                want.set_tp_src(135);
                want.set_nd_target(IP6_B);
                None
            }
            25..=31 => {
                want.set_tp_src(135);
                Some(ParseError::BadNd)
            }
            _ => {
                want = full;
                None
            }
        };
        assert_eq!(ex.error, err, "{k} bytes");
        assert_eq!(key, want, "{k} bytes");
        assert_eq!(ex.layout.l4 == NO_OFFSET, k < 4, "{k} bytes");
    }
}

// ------------------------------------------------------------- counters

#[test]
fn parse_counters() {
    let mut c = ParseCounters::default();
    assert_eq!(c.total(), 0);
    let frames = [
        vec![0u8; 5],
        vec![0u8; 13],
        eth(ETH_TYPE_IPV4, &[0x45]),
        eth(ETH_TYPE_IPV4, &V4::default().build(&udp(1, 2, b""))),
    ];
    for f in &frames {
        let mut key = FlowKey::ZERO;
        c.record(&extract_into(1, f, &mut key));
    }
    assert_eq!(c.count(ParseError::TruncatedEthernet), 2);
    assert_eq!(c.count(ParseError::BadIpv4), 1);
    assert_eq!(c.count(ParseError::BadNd), 0);
    assert_eq!(c.total(), 3);
    let v: Vec<_> = c.iter().collect();
    assert_eq!(
        v,
        vec![(ParseError::TruncatedEthernet, 2), (ParseError::BadIpv4, 1)]
    );
    // Every error has its own counter slot and a distinct name.
    for (i, e) in ParseError::ALL.iter().enumerate() {
        assert_eq!(*e as usize, i);
        assert_eq!(e.to_string(), e.name());
    }
    let mut names: Vec<_> = ParseError::ALL.iter().map(|e| e.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ParseError::ALL.len());
}

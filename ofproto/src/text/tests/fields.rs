//! Unit tests of `ofproto/src/text/fields.rs`, kept beside it.

use super::*;

fn m(tokens: &[(&str, Option<&str>)]) -> Result<Match, ParseError> {
    let mut b = MatchBuilder::default();
    for (n, v) in tokens {
        b.apply(n, *v)?;
    }
    b.finish()
}

#[test]
fn every_field_is_in_the_table_or_resolvable() {
    for &f in Field::ALL {
        assert!(
            FIELDS.iter().any(|d| d.field == f) || field_def(f.name()).is_some(),
            "{f}"
        );
    }
    // names are unique
    for (i, d) in FIELDS.iter().enumerate() {
        assert!(
            FIELDS[i + 1..].iter().all(|e| e.name != d.name),
            "{}",
            d.name
        );
        assert!(SHORTHANDS.iter().all(|s| s.name != d.name), "{}", d.name);
    }
}

#[test]
fn vlan_spellings() {
    let a = m(&[("dl_vlan", Some("5")), ("dl_vlan_pcp", Some("3"))]).unwrap();
    assert_eq!(a.key().vlan_tci(), 0x1000 | 5 | (3 << 13));
    assert_eq!(a.mask().field(Field::VlanTci), 0xffff);
    let u = m(&[("dl_vlan", Some("0xffff"))]).unwrap();
    assert_eq!(u.mask().field(Field::VlanTci), 0xffff);
    assert_eq!(u.key().vlan_tci(), 0);
    let err = m(&[("dl_vlan", Some("0xffff")), ("dl_vlan_pcp", Some("1"))]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"dl_vlan_pcp\" conflicts with \"dl_vlan\""
    );
    let v = m(&[("vlan_vid", Some("0x1000/0x1000"))]).unwrap();
    assert_eq!(v.mask().field(Field::VlanTci), 0x1000);
}

#[test]
fn tcp_flag_syntax() {
    let tcp_flags = |s| flags(s, &TCP_FLAGS, "TCP");
    assert_eq!(tcp_flags("+syn-ack").unwrap(), (0x002, 0x012));
    assert_eq!(tcp_flags("-fin").unwrap(), (0, 1));
    assert!(tcp_flags("+syn+syn").is_err());
    assert!(tcp_flags("+bogus").is_err());
    assert!(tcp_flags("+").is_err());
}

#[test]
fn tunnel_fields_parse_print_and_round_trip() {
    let tun = |s| flags(s, &TUN_FLAGS, "tunnel");
    assert_eq!(tun("+oam").unwrap(), (1, 1));
    assert_eq!(tun("-oam").unwrap(), (0, 1));
    let e = tun("+csum").unwrap_err();
    assert!(format!("{e:?}").contains("unknown tunnel flag"), "{e:?}");
    for text in [
        "tun_ipv6_dst=2001:db8::1,tun_flags=+oam",
        "tun_id=0x1092,tun_dst=198.19.0.2,tun_tos=4,tun_ttl=63,tun_tp_dst=6081",
    ] {
        let toks: Vec<(&str, Option<&str>)> = text
            .split(',')
            .map(|t| match t.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (t, None),
            })
            .collect();
        let got = m(&toks).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let printed = crate::text::format_match(&got);
        for t in text.split(',') {
            assert!(printed.contains(t), "{text} printed as {printed}");
        }
    }
}

#[test]
fn frag_keywords() {
    for (kw, v, mask) in FRAG_KEYWORDS {
        let got = m(&[("ip", None), ("nw_frag", Some(kw))]).unwrap();
        assert_eq!(got.key().field(Field::IpFrag), v, "{kw}");
        assert_eq!(got.mask().field(Field::IpFrag), mask, "{kw}");
    }
}

#[test]
fn shorthand_selection() {
    assert_eq!(shorthand_for(ETH_IP, Some(PROTO_TCP)), Some(("tcp", true)));
    assert_eq!(shorthand_for(ETH_IP, Some(99)), Some(("ip", false)));
    assert_eq!(shorthand_for(ETH_IPV6, None), Some(("ipv6", false)));
    assert_eq!(shorthand_for(0x88cc, None), None);
}

#[test]
fn subfields() {
    let (r, w) = parse_subfield("NXM_NX_REG0[0..15]").unwrap();
    assert_eq!((r.field, r.ofs, r.n_bits, w), (Field::Reg0, 0, 16, true));
    let (r, _) = parse_subfield("reg1[]").unwrap();
    assert_eq!(r, FieldRange::whole(Field::Reg1));
    let (r, _) = parse_subfield("ipv6_src[127]").unwrap();
    assert_eq!((r.ofs, r.n_bits), (127, 1));
    assert!(!parse_subfield("nw_proto[]").unwrap().1);
    assert!(parse_subfield("reg0[32]").is_err());
    assert!(parse_subfield("reg0[5..4]").is_err());
    assert!(parse_subfield("reg0[1").is_err());
    assert!(parse_subfield("vlan_vid[]").is_err());
    assert_eq!(
        parse_subfield("regx[]").unwrap_err().to_string(),
        "unknown field \"regx\""
    );
}

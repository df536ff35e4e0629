//! Unit tests of `ofproto/src/text/value.rs`, kept beside it.

use super::*;

#[test]
fn numbers() {
    assert_eq!(number("0").unwrap(), 0);
    assert_eq!(number("0x1F").unwrap(), 31);
    assert_eq!(number("4294967295").unwrap(), 0xffff_ffff);
    for bad in ["", "0x", "-1", "+1", "1.0", "x1", "0x1g"] {
        assert!(number(bad).is_err(), "{bad}");
    }
    assert!(number_max("256", 255).is_err());
    assert!(number(&"9".repeat(60)).is_err());
}

#[test]
fn macs() {
    assert_eq!(mac("aa:bb:cc:dd:ee:ff").unwrap(), 0xaabb_ccdd_eeff);
    assert_eq!(mac("0:1:2:3:4:5").unwrap(), 0x0001_0203_0405);
    for bad in [
        "aa:bb:cc:dd:ee",
        "aa:bb:cc:dd:ee:ff:00",
        "aaa:bb:cc:dd:ee:ff",
        "",
        ":::::",
    ] {
        assert!(mac(bad).is_err(), "{bad}");
    }
}

#[test]
fn ip_masks() {
    assert_eq!(ipv4_mask("8").unwrap(), 0xff00_0000);
    assert_eq!(ipv4_mask("0").unwrap(), 0);
    assert_eq!(ipv4_mask("32").unwrap(), 0xffff_ffff);
    assert_eq!(ipv4_mask("255.0.255.0").unwrap(), 0xff00_ff00);
    assert!(matches!(
        ipv4_mask("33"),
        Err(ValueError::PrefixTooLong { prefix: 33, .. })
    ));
    assert_eq!(ipv6_mask("64").unwrap(), u128::MAX << 64);
    assert_eq!(ipv6_mask("ffff::").unwrap(), 0xffff << 112);
    assert!(matches!(
        ipv6_mask("129"),
        Err(ValueError::PrefixTooLong { prefix: 129, .. })
    ));
}

#[test]
fn ports() {
    assert_eq!(port("LOCAL").unwrap(), OfPort::Local);
    assert_eq!(port("in_port").unwrap(), OfPort::InPort);
    assert_eq!(port("7").unwrap(), OfPort::Port(megaflow::PortNo(7)));
    assert_eq!(port("4294967294").unwrap(), OfPort::Local);
    assert!(port("0").is_err());
    assert!(port("eth0").is_err());
    assert_eq!(port_number("local").unwrap(), 0xffff_fffe);
}

#[test]
fn lists() {
    assert_eq!(
        split_list("a, b(c,d)  e,,f").unwrap(),
        vec!["a", "b(c,d)", "e", "f"]
    );
    assert!(split_list("a(b").is_err());
    assert!(split_list("a)b(").is_err());
    assert_eq!(matching_paren("x(a(b)c)d", 1), Some(7));
    assert_eq!(matching_paren("x(a", 1), None);
}

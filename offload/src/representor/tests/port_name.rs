use super::{parse_port_name, PortKind, PortName};
use crate::Vport;
use proptest::prelude::*;

fn vport_of(s: &str) -> Option<Vport> {
    parse_port_name(s).and_then(|p| p.vport())
}

#[test]
fn uplinks_are_vport_ffff() {
    assert_eq!(
        parse_port_name("p0"),
        Some(PortName::local(PortKind::Uplink {
            port: 0,
            split: None
        }))
    );
    assert_eq!(vport_of("p0"), Some(Vport::UPLINK));
    assert_eq!(vport_of("p1"), Some(Vport(0xffff)));
    assert_eq!(
        parse_port_name("p0s1").map(|p| p.kind),
        Some(PortKind::Uplink {
            port: 0,
            split: Some(1)
        })
    );
    assert_eq!(vport_of("p0s1"), Some(Vport::UPLINK));
}

#[test]
fn pf_and_host_pf_are_vport_0() {
    assert_eq!(vport_of("pf0"), Some(Vport::PF));
    assert_eq!(vport_of("pf0hpf"), Some(Vport::PF));
    assert_eq!(
        parse_port_name("pf0hpf").map(|p| p.kind),
        Some(PortKind::HostPf { pf: 0 })
    );
}

#[test]
fn vf_n_is_vport_n_plus_1() {
    assert_eq!(
        parse_port_name("pf0vf3"),
        Some(PortName::local(PortKind::Vf { pf: 0, vf: 3 }))
    );
    assert_eq!(vport_of("pf0vf3"), Some(Vport(4)));
    assert_eq!(vport_of("pf1vf0"), Some(Vport(1)));
    // VF 65533 would be vport 0xfffe (ECPF): no such VF vport.
    assert_eq!(vport_of("pf0vf65533"), None);
}

#[test]
fn sf_vport_needs_config() {
    let p = parse_port_name("pf0sf88");
    assert_eq!(p, Some(PortName::local(PortKind::Sf { pf: 0, sf: 88 })));
    assert_eq!(p.and_then(|p| p.vport()), None);
}

#[test]
fn controller_prefix_is_an_external_host() {
    let p = parse_port_name("c1pf0vf2");
    assert_eq!(
        p,
        Some(PortName {
            controller: Some(1),
            kind: PortKind::Vf { pf: 0, vf: 2 }
        })
    );
    assert_eq!(p.and_then(|p| p.vport()), Some(Vport(3)));
    assert_eq!(vport_of("c1pf0"), Some(Vport::PF));
    assert_eq!(
        parse_port_name("c2pf1sf7").map(|p| p.controller),
        Some(Some(2))
    );
    // Physical ports have no controller.
    assert_eq!(parse_port_name("c1p0"), None);
}

#[test]
fn legacy_numeric_is_a_vf_number() {
    assert_eq!(
        parse_port_name("3"),
        Some(PortName::local(PortKind::LegacyVf { vf: 3 }))
    );
    assert_eq!(vport_of("3"), Some(Vport(4)));
    assert_eq!(vport_of("0"), Some(Vport(1)));
}

#[test]
fn garbage_is_rejected() {
    for s in [
        "",
        "p",
        "pf",
        "pfvf1",
        "pf0vf",
        "pf0vfx",
        "pf0xx",
        "pf0sf",
        "c",
        "c1",
        "cpf0",
        "p0s",
        "p0x",
        "vf3",
        "eth0",
        "01",
        "pf00",
        "pf0vf01",
        "+3",
        "-1",
        "p 0",
        "pf0vf3 ",
        "99999999999",
        "pf70000",
        "ecpf",
        "uplink",
    ] {
        assert_eq!(parse_port_name(s), None, "{s:?}");
    }
}

#[test]
fn canonical_names_print_back() {
    for s in [
        "p0", "p1", "p0s1", "pf0", "pf0hpf", "pf0vf3", "pf0sf88", "c1pf0vf2", "c1pf0", "3",
    ] {
        let p = parse_port_name(s);
        assert_eq!(p.map(|p| p.to_string()).as_deref(), Some(s));
    }
}

fn any_port_name() -> impl Strategy<Value = PortName> {
    let kind = prop_oneof![
        (any::<u32>(), proptest::option::of(any::<u32>()))
            .prop_map(|(port, split)| PortKind::Uplink { port, split }),
        any::<u16>().prop_map(|pf| PortKind::Pf { pf }),
        any::<u16>().prop_map(|pf| PortKind::HostPf { pf }),
        (any::<u16>(), any::<u16>()).prop_map(|(pf, vf)| PortKind::Vf { pf, vf }),
        (any::<u16>(), any::<u32>()).prop_map(|(pf, sf)| PortKind::Sf { pf, sf }),
        any::<u16>().prop_map(|vf| PortKind::LegacyVf { vf }),
    ];
    (proptest::option::of(any::<u32>()), kind).prop_map(|(controller, kind)| {
        let controller = match kind {
            PortKind::Uplink { .. } | PortKind::LegacyVf { .. } => None,
            _ => controller,
        };
        PortName { controller, kind }
    })
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,24}") {
        let _ = parse_port_name(&s);
    }

    #[test]
    fn never_panics_on_name_like_input(s in "[cpfvshb0-9]{0,16}") {
        if let Some(p) = parse_port_name(&s) {
            // Whatever parses is canonical: it prints back to itself.
            prop_assert_eq!(p.to_string(), s);
        }
    }

    #[test]
    fn print_then_parse_round_trips(p in any_port_name()) {
        prop_assert_eq!(parse_port_name(&p.to_string()), Some(p));
    }

    #[test]
    fn vf_vport_matches_vport_from_str(vf in 0u16..0xfffd) {
        let name = format!("pf0vf{vf}");
        prop_assert_eq!(vport_of(&name), name.parse::<Vport>().ok());
    }
}

//! Decap rules encoded from tunnel megaflows (a packet that came in a
//! VXLAN or Geneve tunnel port, with the fields Open vSwitch's
//! `tnl_wc_init` matches and inner fields of several shapes) take exactly
//! the packets on the uplink that software would decapsulate into that
//! port and match with the megaflow, and hand on exactly the inner frame
//! (property test against megaflow's own decap and match).

mod sim_common;

use megaflow::tunnel::{decap, GeneveOpt, Kind, Outer, OuterIp, GENEVE_PORT, VXLAN_PORT};
use megaflow::TunnelKey;
use offload::dr::Reformat;
use offload::prm::TunnelGround;
use sim_common::*;

/// The datapath port of the tunnel ports, by kind.
fn tunnel_port(kind: Kind) -> PortNo {
    match kind {
        Kind::Vxlan => PortNo(10),
        Kind::Geneve => PortNo(11),
    }
}

fn port_table() -> PortTable {
    let mut t = PortTable::new()
        .with(PortNo(1), Vport(1))
        .with(PortNo(3), Vport::UPLINK);
    for kind in [Kind::Vxlan, Kind::Geneve] {
        let ground = TunnelGround {
            kind,
            uplink: Vport::UPLINK,
        };
        t.set_tunnel(tunnel_port(kind), Some(ground));
    }
    t
}

const SRC4: [[u8; 4]; 2] = [[198, 19, 0, 2], [198, 19, 0, 3]];
const DST4: [[u8; 4]; 2] = [[198, 19, 0, 1], [198, 19, 0, 9]];
const V6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;

/// A tunnel packet of a small space, so matches hit often.
#[derive(Clone, Debug)]
struct Tun {
    geneve: bool,
    v6: bool,
    src: usize,
    dst: usize,
    vni: u32,
    /// The outer UDP port is not the kind's (a packet no tunnel takes).
    odd_port: bool,
    oam: bool,
    opts: bool,
    tos: u8,
    /// The inner frame: (ip src, ip dst, tcp, sport, dport).
    inner: (u32, u32, bool, u16, u16),
}

impl Tun {
    fn kind(&self) -> Kind {
        if self.geneve {
            Kind::Geneve
        } else {
            Kind::Vxlan
        }
    }

    fn inner_frame(&self) -> Vec<u8> {
        let (s, d, tcp, sp, dp) = self.inner;
        let l4 = if tcp {
            L4::Tcp {
                sport: sp,
                dport: dp,
                flags: 0x10,
            }
        } else {
            L4::udp(sp, dp)
        };
        FrameSpec::ipv4(s, d, l4).payload(20).build()
    }

    fn frame(&self) -> Vec<u8> {
        let ip = if self.v6 {
            OuterIp::V6 {
                src: (V6 + 0x10 + self.src as u128).to_be_bytes(),
                dst: (V6 + self.dst as u128).to_be_bytes(),
            }
        } else {
            OuterIp::V4 {
                src: SRC4[self.src],
                dst: DST4[self.dst],
            }
        };
        let kind = self.kind();
        let mut o = Outer::vxlan_v4(
            ([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]),
            [0; 4],
            [0; 4],
            self.vni,
        );
        o.kind = kind;
        o.ip = ip;
        o.tos = self.tos;
        o.df = false;
        o.udp_dst = if self.odd_port {
            8472
        } else {
            kind.default_port()
        };
        if self.geneve && self.opts {
            o.opts = vec![GeneveOpt {
                class: 0x0102,
                ty: 0x80,
                data: vec![1, 2, 3, 4],
            }];
        }
        let mut v = Vec::new();
        o.encap(&self.inner_frame(), 0x1234, &mut v).expect("encap");
        if self.geneve && self.oam {
            // The Geneve header follows Ethernet, IP and UDP.
            let t = 14 + if self.v6 { 40 } else { 20 } + 8;
            v[t + 1] |= 0x80;
        }
        v
    }

    /// What software makes of it: the tunnel port it enters and its key.
    fn software(&self, f: &[u8]) -> Option<(megaflow::FlowKey, usize)> {
        let d = decap(f, &[(VXLAN_PORT, Kind::Vxlan), (GENEVE_PORT, Kind::Geneve)]).ok()??;
        let mut key = megaflow::extract(tunnel_port(d.kind).0, &f[d.inner..]);
        TunnelKey::of(&d).write(&mut key);
        Some((key, d.inner))
    }
}

fn tun() -> impl Strategy<Value = Tun> {
    (
        (
            any::<bool>(),
            any::<bool>(),
            0usize..2,
            0usize..2,
            prop::sample::select(vec![4242u32, 7, 0xff_ffff]),
            prop::bool::weighted(0.1),
            any::<bool>(),
            any::<bool>(),
            prop::sample::select(vec![0u8, 0xb8, 0x03]),
        ),
        (
            prop::sample::select(vec![0xc612_0001u32, 0xc612_0002]),
            prop::sample::select(vec![0xc612_00c8u32, 0xc612_00c9]),
            any::<bool>(),
            prop::sample::select(vec![5000u16, 80]),
            prop::sample::select(vec![9u16, 443]),
        ),
    )
        .prop_map(
            |((geneve, v6, src, dst, vni, odd_port, oam, opts, tos), inner)| Tun {
                geneve,
                v6,
                src,
                dst,
                vni,
                odd_port,
                oam,
                opts,
                tos,
                inner,
            },
        )
}

const OUT: Vport = Vport(8);

/// The masks a tunnel megaflow has: what chose the port (Open vSwitch's
/// `tnl_wc_init`), then inner fields of one of a few shapes.
fn tunnel_mask(v6: bool, shape: u8, tos: bool) -> Mask {
    let (s, d) = if v6 {
        (Field::TunIpv6Src, Field::TunIpv6Dst)
    } else {
        (Field::TunSrc, Field::TunDst)
    };
    let mut m = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::TunTpDst)
        .with_exact(s)
        .with_exact(d)
        .with_exact(Field::TunId);
    if tos {
        m = m.with_exact(Field::TunTos).with(Field::TunFlags, 1);
    }
    match shape {
        0 => m.with_exact(Field::EthDst),
        1 => m
            .with_exact(Field::EthType)
            .with_exact(Field::IpProto)
            .with_exact(Field::Ipv4Src)
            .with_exact(Field::Ipv4Dst)
            .with_exact(Field::TpSrc)
            .with_exact(Field::TpDst),
        _ => m
            .with_exact(Field::EthType)
            .with(Field::Ipv4Dst, 0xffff_ff00),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decap_rules_take_exactly_the_packets_software_gives_their_port(
        base in tun().prop_filter("a tunnel packet", |t| !t.odd_port),
        packets in prop::collection::vec(tun(), 40),
        shape in 0u8..3,
        tos in any::<bool>(),
        metadata in any::<bool>(),
    ) {
        let ports = port_table();
        let mode = source_mode(metadata);
        let f = base.frame();
        let (key, _) = base.software(&f).expect("software decapsulates the template");
        let m = Match::new(&key, &tunnel_mask(base.v6, shape, tos));
        let enc = encode(&m, mode, &ports);
        prop_assert!(enc.is_ok(), "{:?} is offloadable: {:?}", m, enc);
        let Ok(enc) = enc else { return Ok(()) };
        let sim = SimBackend::default();
        let decap = ActionSpec::PacketReformat {
            reformat: Reformat::L2TunnelToL2,
            data: Vec::new(),
        };
        let d = install_with(&sim, &enc, &[decap], OUT).map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
        for (i, p) in std::iter::once(&base).chain(&packets).enumerate() {
            let f = p.frame();
            let sw = p.software(&f);
            let want_sw = sw.as_ref().is_some_and(|(k, _)| m.matches(k));
            prop_assert!(i > 0 || want_sw, "the template matches its own match");
            // A Geneve packet with options misses the rule (the device
            // cannot read them) and is switched in software.
            let want = want_sw && !(p.geneve && p.opts);
            let got = send_at(&sim, d, 0, Vport::UPLINK, &f);
            prop_assert_eq!(got.len(), 1);
            let hit = got[0].egress == Egress::Vport(OUT);
            prop_assert_eq!(hit, want, "match {:?}, packet {:?}", m, p);
            match (&sw, hit) {
                (Some((_, inner)), true) => prop_assert_eq!(&got[0].bytes[..], &f[*inner..]),
                _ => prop_assert_eq!(&got[0].bytes, &f),
            }
        }
    }
}

/// What the device cannot do as software does is refused by name; a
/// packet from no tunnel matching zero tunnel metadata is accepted.
#[test]
fn tunnel_matches_the_device_cannot_take_are_refused_by_name() {
    let ports = port_table();
    let mode = SourcePortMode::MiscSourcePort;
    let t = Tun {
        geneve: false,
        v6: false,
        src: 0,
        dst: 0,
        vni: 4242,
        odd_port: false,
        oam: false,
        opts: false,
        tos: 0,
        inner: (0xc612_0001, 0xc612_00c8, false, 5000, 9),
    };
    let (key, _) = t.software(&t.frame()).expect("decap");
    let refused = |mask: Mask, k: &megaflow::FlowKey| {
        encode(&Match::new(k, &mask), mode, &ports)
            .map(|_| ())
            .unwrap_err()
    };
    // The UDP port not exact, or one the device does not parse VXLAN on.
    let loose = tunnel_mask(false, 0, false).with(Field::TunTpDst, 0xff00);
    assert_eq!(refused(loose, &key).field, Field::TunTpDst);
    let mut odd = key;
    odd.set_field(Field::TunTpDst, 8472);
    let e = refused(tunnel_mask(false, 0, false), &odd);
    assert!(e.reason.contains("4789"), "{e}");
    // No addresses: the rule could take another tunnel's packets.
    let bare = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::TunTpDst);
    assert_eq!(refused(bare, &key).field, Field::TunDst);
    // A VNI above 24 bits never matches.
    let mut wide = key;
    wide.set_field(Field::TunId, 1 << 30);
    assert_eq!(
        refused(tunnel_mask(false, 0, false), &wide).field,
        Field::TunId
    );
    // VXLAN's OAM is never set.
    let mut oam = key;
    oam.set_field(Field::TunFlags, 1);
    let m = tunnel_mask(false, 0, true);
    assert_eq!(refused(m, &oam).field, Field::TunFlags);
    // A Geneve option match needs the flex parser; an absent option (zero)
    // holds on every packet a Geneve rule takes (those with no options).
    let g = Tun { geneve: true, ..t };
    let (gkey, _) = g.software(&g.frame()).expect("decap");
    let mut opt = gkey;
    opt.set_field(Field::TunMdPresent, 1);
    opt.set_field(Field::TunOpts, 0xabcd << 96);
    let with_opts = tunnel_mask(false, 0, false)
        .with_exact(Field::TunMdPresent)
        .with_exact(Field::TunOpts);
    let e = refused(with_opts, &opt);
    assert_eq!(e.field, Field::TunOpts);
    assert!(e.reason.contains("flex parser"), "{e}");
    let e = encode(&Match::new(&gkey, &with_opts), mode, &ports).expect("options absent");
    assert_eq!(e.field_mask(PrmField::MiscGeneveOptLen), 0x3f);
    // From a VF: zero tunnel metadata always holds there, any other value
    // never does.
    let vf = megaflow::extract(1, &t.inner_frame());
    let zero = Mask::EMPTY
        .with_exact(Field::InPort)
        .with_exact(Field::TunId);
    let e = encode(&Match::new(&vf, &zero), mode, &ports).expect("zero tun_id from a VF");
    assert_eq!(e.field_mask(PrmField::MiscVxlanVni), 0);
    let mut vf_tun = vf;
    vf_tun.set_field(Field::TunId, 5);
    assert_eq!(refused(zero, &vf_tun).field, Field::TunId);
}

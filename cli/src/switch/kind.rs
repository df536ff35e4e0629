//! Port kinds: what a port is to the switch, each kind's specifics behind
//! one trait ([`Kind`]), so a new kind (`vxlan`, `geneve`, `patch`: ports
//! with no netdev of their own) is one more implementation and one more
//! variant, and touches no other kind.
//!
//! - `representor`: a VF (or PF, SF) representor of the eSwitch: its
//!   packets come through the FDB (a miss reaches software on it), and
//!   rules forward to its vport.
//! - `uplink`: the wire side of the eSwitch (the uplink representor on a
//!   ConnectX, a veth end in the lab): its vport is always `uplink`;
//!   tunnel traffic enters and leaves here.
//! - `internal`: a port of the host's own IP stack (a tap or veth end the
//!   host configures, as Open vSwitch's internal ports), e.g. to hold a
//!   tunnel endpoint address. It has no vport: its packets reach the
//!   switch in software only, and flows that name it stay in software
//!   (the device has no port to match or forward to).
//! - `vxlan`, `geneve`: tunnel ports. No netdev and no vport: a packet
//!   enters one when it arrives on an uplink for a local endpoint and the
//!   port's UDP port (decapsulated at receive), and an output to one
//!   encapsulates and leaves by the uplink the route says.

use std::fmt;

use anyhow::bail;
use offload::Vport;

/// A port's kind (`type` in the config and `eswitchctl add-port --type`,
/// as `ovs-vsctl`'s `Interface.type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortKind {
    #[default]
    Representor,
    Uplink,
    Internal,
    Vxlan,
    Geneve,
    /// One end of a pair joining two bridges (`options:peer`).
    Patch,
}

/// What differs from one kind of port to another.
pub trait Kind: Sync {
    /// The kind's name (config, `show`, metrics labels).
    fn name(&self) -> &'static str;

    /// The port's vport from the one the user gave and the one its
    /// netdev reports (a representor's `phys_port_name`), or why it
    /// cannot have one. `None`: a port the device does not see (by
    /// default: none may be given, [`without_vport`](Self::without_vport)
    /// says why).
    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        _reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>> {
        match given {
            None => Ok(None),
            Some(v) => bail!(
                "port \"{port}\": {} no vport (got {v})",
                self.without_vport()
            ),
        }
    }

    /// Why a port of the kind has no vport ("a ... port is ..., with").
    fn without_vport(&self) -> String {
        format!("a {} port has", self.name())
    }

    /// Whether the port is a netdev the daemon opens for its packets (a
    /// tunnel or patch port will not be).
    fn has_netdev(&self) -> bool {
        true
    }

    /// The tunnel protocol of a tunnel port.
    fn tunnel(&self) -> Option<megaflow::tunnel::Kind> {
        None
    }
}

struct Representor;
struct Uplink;
struct Internal;
struct Tunnel(megaflow::tunnel::Kind);
struct Patch;

impl Kind for Representor {
    fn name(&self) -> &'static str {
        "representor"
    }

    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>> {
        match given.or(reported) {
            Some(Vport::UPLINK) => {
                bail!("port \"{port}\": vport uplink is for a port of type uplink")
            }
            Some(v) => Ok(Some(v)),
            None => bail!(
                "port \"{port}\": no representor of that name with a vport is known; give --vport (vport = in the config)"
            ),
        }
    }
}

impl Kind for Uplink {
    fn name(&self) -> &'static str {
        "uplink"
    }

    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        _reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>> {
        match given {
            None | Some(Vport::UPLINK) => Ok(Some(Vport::UPLINK)),
            Some(v) => bail!("port \"{port}\": an uplink port's vport is uplink, not {v}"),
        }
    }
}

impl Kind for Internal {
    fn name(&self) -> &'static str {
        "internal"
    }

    fn without_vport(&self) -> String {
        "an internal port is the host's own and has".into()
    }
}

impl Kind for Tunnel {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn without_vport(&self) -> String {
        format!("a {} port is a tunnel, with", self.0.name())
    }

    fn has_netdev(&self) -> bool {
        false
    }

    fn tunnel(&self) -> Option<megaflow::tunnel::Kind> {
        Some(self.0)
    }
}

impl Kind for Patch {
    fn name(&self) -> &'static str {
        "patch"
    }

    fn without_vport(&self) -> String {
        "a patch port joins two bridges, with".into()
    }

    fn has_netdev(&self) -> bool {
        false
    }
}

impl PortKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [PortKind; 6] = [
        PortKind::Representor,
        PortKind::Uplink,
        PortKind::Internal,
        PortKind::Vxlan,
        PortKind::Geneve,
        PortKind::Patch,
    ];

    /// The kind's specifics.
    pub fn spec(self) -> &'static dyn Kind {
        match self {
            PortKind::Representor => &Representor,
            PortKind::Uplink => &Uplink,
            PortKind::Internal => &Internal,
            PortKind::Vxlan => &Tunnel(megaflow::tunnel::Kind::Vxlan),
            PortKind::Geneve => &Tunnel(megaflow::tunnel::Kind::Geneve),
            PortKind::Patch => &Patch,
        }
    }

    pub fn name(self) -> &'static str {
        self.spec().name()
    }

    /// A tunnel port's options from `(name, value)` pairs; `None` for
    /// any other kind, which takes no options.
    pub fn tunnel(
        self,
        port: &str,
        options: &[(String, String)],
    ) -> anyhow::Result<Option<std::sync::Arc<ofproto::tunnel::TunnelPort>>> {
        let pairs = options.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        if self == PortKind::Patch {
            // Its one option is read by `peer`.
            return Ok(None);
        }
        match self.spec().tunnel() {
            Some(t) => ofproto::tunnel::TunnelPort::from_options(t, pairs)
                .map(|p| Some(std::sync::Arc::new(p)))
                .map_err(|e| anyhow::anyhow!("port \"{port}\": {e}")),
            None if options.is_empty() => Ok(None),
            None => bail!(
                "port \"{port}\": a {} port takes no options ({} given)",
                self.name(),
                options[0].0
            ),
        }
    }

    /// A patch port's peer (`options:peer`, its only option, required, as
    /// Open vSwitch's `netdev-vport.c` says); `None` for any other kind.
    pub fn peer(self, port: &str, options: &[(String, String)]) -> anyhow::Result<Option<String>> {
        if self != PortKind::Patch {
            return Ok(None);
        }
        let mut peer = None;
        for (k, v) in options {
            match k.as_str() {
                "peer" => peer = Some(v.clone()),
                other => {
                    bail!("port \"{port}\": a patch port takes only option peer (got {other})")
                }
            }
        }
        match peer {
            Some(p) if p == port => bail!("port \"{port}\": a patch port cannot be its own peer"),
            Some(p) if !p.is_empty() => Ok(Some(p)),
            _ => bail!("port \"{port}\": a patch port needs options:peer"),
        }
    }

    /// A port's type and vport as the user wrote them (`type =` and
    /// `vport =` in the config, `--type` and `--vport` of `add-port`):
    /// the type (given, else [`infer`](Self::infer)red) and the vport
    /// given, each error naming the port.
    pub fn parse_words(
        port: &str,
        kind: Option<&str>,
        vport: Option<&str>,
    ) -> anyhow::Result<(PortKind, Option<Vport>)> {
        let named = |e: anyhow::Error| e.context(format!("port \"{port}\""));
        let typed = kind
            .map(str::parse::<PortKind>)
            .transpose()
            .map_err(named)?;
        let given = vport
            .map(str::parse::<Vport>)
            .transpose()
            .map_err(|e| named(e.into()))?;
        Ok((PortKind::infer(typed, given), given))
    }

    /// The kind a port is of: the one given, else the one its vport
    /// implies (a port on vport `uplink` is the uplink, as configs written
    /// before port types said), else a representor.
    pub fn infer(given: Option<PortKind>, vport: Option<Vport>) -> PortKind {
        match (given, vport) {
            (Some(k), _) => k,
            (None, Some(Vport::UPLINK)) => PortKind::Uplink,
            (None, _) => PortKind::Representor,
        }
    }
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PortKind {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<PortKind> {
        match PortKind::ALL.iter().find(|k| k.name() == s) {
            Some(k) => Ok(*k),
            None => {
                let names: Vec<&str> = PortKind::ALL.iter().map(|k| k.name()).collect();
                bail!("port type \"{s}\": expected one of {}", names.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_resolves_its_vport_or_says_why_not() {
        let vf0 = Vport::vf(0);
        let r = PortKind::Representor.spec();
        assert_eq!(r.vport("p", vf0, None).expect("given"), vf0);
        assert_eq!(r.vport("p", None, vf0).expect("reported"), vf0);
        let e = r.vport("p", None, None).expect_err("none");
        assert!(e.to_string().contains("give --vport"), "{e}");
        let e = r.vport("p", Some(Vport::UPLINK), None).expect_err("uplink");
        assert!(e.to_string().contains("type uplink"), "{e}");

        let u = PortKind::Uplink.spec();
        assert_eq!(
            u.vport("w", None, vf0).expect("default"),
            Some(Vport::UPLINK)
        );
        let e = u.vport("w", vf0, None).expect_err("vf");
        assert!(e.to_string().contains("not vf0"), "{e}");

        let i = PortKind::Internal.spec();
        assert_eq!(i.vport("h", None, vf0).expect("none"), None);
        let e = i.vport("h", vf0, None).expect_err("vf");
        assert!(e.to_string().contains("has no vport"), "{e}");
    }

    #[test]
    fn a_port_on_the_uplink_vport_is_the_uplink_unless_typed() {
        let up = Some(Vport::UPLINK);
        assert_eq!(PortKind::infer(None, up), PortKind::Uplink);
        assert_eq!(PortKind::infer(None, Vport::vf(1)), PortKind::Representor);
        assert_eq!(PortKind::infer(None, None), PortKind::Representor);
        let typed = PortKind::infer(Some(PortKind::Representor), up);
        assert_eq!(typed, PortKind::Representor);
        assert!(typed.spec().vport("p", up, None).is_err(), "and refused");
    }

    #[test]
    fn kinds_read_back_by_name_and_a_bad_one_is_named() {
        for k in PortKind::ALL {
            assert_eq!(k.name().parse::<PortKind>().expect("parses"), k);
        }
        let e = "gre".parse::<PortKind>().expect_err("not a kind");
        assert_eq!(
            e.to_string(),
            "port type \"gre\": expected one of representor, uplink, internal, vxlan, geneve, patch"
        );
        let opts = |o: &[(&str, &str)]| -> Vec<(String, String)> {
            o.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let p = PortKind::Patch;
        assert!(!p.spec().has_netdev());
        assert_eq!(
            p.peer("a", &opts(&[("peer", "b")])).expect("peer"),
            Some("b".into())
        );
        for (o, why) in [
            (opts(&[]), "needs options:peer"),
            (opts(&[("peer", "a")]), "its own peer"),
            (
                opts(&[("peer", "b"), ("x", "1")]),
                "only option peer (got x)",
            ),
        ] {
            let e = p.peer("a", &o).expect_err(why);
            assert!(e.to_string().contains(why), "{e}");
        }
        assert_eq!(PortKind::Vxlan.peer("t", &[]).expect("none"), None);
        let t = PortKind::Vxlan.spec();
        assert!(!t.has_netdev());
        assert_eq!(t.vport("t", None, None).expect("none"), None);
        let e = t.vport("t", Vport::vf(0), None).expect_err("vf");
        assert!(e.to_string().contains("with no vport"), "{e}");
    }
}

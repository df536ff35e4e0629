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
}

/// What differs from one kind of port to another.
pub trait Kind: Sync {
    /// The kind's name (config, `show`, metrics labels).
    fn name(&self) -> &'static str;

    /// The port's vport from the one the user gave and the one its
    /// netdev reports (a representor's `phys_port_name`), or why it
    /// cannot have one. `None`: a port the device does not see.
    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>>;

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

    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        _reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>> {
        no_vport(port, given, "an internal port is the host's own and has")
    }
}

/// A port the device does not see: none may be given (`what` says why).
fn no_vport(port: &str, given: Option<Vport>, what: &str) -> anyhow::Result<Option<Vport>> {
    match given {
        None => Ok(None),
        Some(v) => bail!("port \"{port}\": {what} no vport (got {v})"),
    }
}

impl Kind for Tunnel {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn vport(
        &self,
        port: &str,
        given: Option<Vport>,
        _reported: Option<Vport>,
    ) -> anyhow::Result<Option<Vport>> {
        no_vport(
            port,
            given,
            &format!("a {} port is a tunnel, with", self.0.name()),
        )
    }

    fn has_netdev(&self) -> bool {
        false
    }

    fn tunnel(&self) -> Option<megaflow::tunnel::Kind> {
        Some(self.0)
    }
}

impl PortKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [PortKind; 5] = [
        PortKind::Representor,
        PortKind::Uplink,
        PortKind::Internal,
        PortKind::Vxlan,
        PortKind::Geneve,
    ];

    /// The kind's specifics.
    pub fn spec(self) -> &'static dyn Kind {
        match self {
            PortKind::Representor => &Representor,
            PortKind::Uplink => &Uplink,
            PortKind::Internal => &Internal,
            PortKind::Vxlan => &Tunnel(megaflow::tunnel::Kind::Vxlan),
            PortKind::Geneve => &Tunnel(megaflow::tunnel::Kind::Geneve),
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
            "port type \"gre\": expected one of representor, uplink, internal, vxlan, geneve"
        );
        let t = PortKind::Vxlan.spec();
        assert!(!t.has_netdev());
        assert_eq!(t.vport("t", None, None).expect("none"), None);
        let e = t.vport("t", Vport::vf(0), None).expect_err("vf");
        assert!(e.to_string().contains("with no vport"), "{e}");
    }
}

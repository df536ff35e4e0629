//! Datapath actions into DR actions: the stage (meter or sampler) a flow
//! starts with, header rewrites as modify-header words, and the rest in
//! device order.

use megaflow::actions::{SampleCookie, UserspaceReason};
use megaflow::offload::NotOffloaded;
use megaflow::MeterId;
use megaflow::{DpAction, Field, Match, PortNo};

use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
use crate::dr::{ActionId, ActionSpec, DrBackend, Reformat};
use crate::prm::PortMap as _;
use crate::Vport;

use super::{action, Counted, OffloadManager};

/// How a flow starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Its actions in its level-1 rule.
    Plain,
    /// Through an OpenFlow meter, then the rest in level 2.
    Meter(MeterId),
    /// Through a sampler of one in `ratio` whose copies carry `cookie`,
    /// then the rest in level 2.
    Sample { ratio: u32, cookie: SampleCookie },
}

/// The sampler ratio of an OVS sample probability (a fraction of
/// `u32::MAX`): `round(u32::MAX / probability)`, at least 1.
pub(super) fn sample_ratio(probability: u32) -> u32 {
    let r = (f64::from(u32::MAX) / f64::from(probability)).round();
    r.clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Splits a flow's actions into its stage and the actions after it. A
/// meter or a sample must come first (nothing but the counter runs before
/// them in hardware), one of them at most; a sample's actions must be
/// exactly one `userspace(sflow(..))`, which the device does by sending the copy
/// to software.
pub(super) fn stage(actions: &[DpAction]) -> Result<(Stage, &[DpAction]), NotOffloaded> {
    let is_meter = |a: &DpAction| matches!(a, DpAction::Meter(_));
    let is_sample = |a: &DpAction| matches!(a, DpAction::Sample { .. });
    if actions.iter().any(is_meter) && actions.iter().any(is_sample) {
        return Err(action("meter and sample in one flow"));
    }
    let Some((first, rest)) = actions.split_first() else {
        return Ok((Stage::Plain, actions));
    };
    if let Some(late) = rest.iter().find(|a| is_meter(a) || is_sample(a)) {
        let what = if is_meter(late) { "meter" } else { "sample" };
        return Err(action(&format!("{what} after {first}")));
    }
    match first {
        DpAction::Meter(id) => Ok((Stage::Meter(*id), rest)),
        DpAction::Sample {
            probability,
            actions: sampled,
        } => {
            let &[DpAction::Userspace(UserspaceReason::Sample(cookie))] = sampled.as_slice() else {
                return Err(action(&format!(
                    "sample of actions({sampled}) (only a sampled copy to the exporter is offloaded)"
                )));
            };
            Ok((
                Stage::Sample {
                    ratio: sample_ratio(*probability),
                    cookie,
                },
                rest,
            ))
        }
        _ => Ok((Stage::Plain, actions)),
    }
}

/// The modify-header ops for one set action, given what the match says
/// about the packet.
pub(super) fn rewrite(
    m: &Match,
    a: &DpAction,
    ops: &mut Vec<ModifyOp>,
) -> Result<(), NotOffloaded> {
    let (k, mask) = (m.key(), m.mask());
    let exact = |f: Field| mask.is_exact(f);
    let v4 = exact(Field::EthType) && k.eth_type() == 0x0800;
    let v6 = exact(Field::EthType) && k.eth_type() == 0x86dd;
    let proto = if exact(Field::IpProto) {
        Some(k.ip_proto())
    } else {
        None
    };
    let set = |ops: &mut Vec<ModifyOp>, f: ModifyField, v: u32| ops.push(ModifyOp::set(f, v));
    let need = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(action(&format!(
                "{what} without an exact layer in the match"
            )))
        }
    };
    match *a {
        DpAction::SetEthSrc(mac) => {
            set(ops, ModifyField::SmacHi, (mac >> 16) as u32);
            set(ops, ModifyField::SmacLo, (mac & 0xffff) as u32);
        }
        DpAction::SetEthDst(mac) => {
            set(ops, ModifyField::DmacHi, (mac >> 16) as u32);
            set(ops, ModifyField::DmacLo, (mac & 0xffff) as u32);
        }
        DpAction::SetIpv4Src(ip) => {
            need(v4, "set(ipv4_src)")?;
            set(ops, ModifyField::Sipv4, ip);
        }
        DpAction::SetIpv4Dst(ip) => {
            need(v4, "set(ipv4_dst)")?;
            set(ops, ModifyField::Dipv4, ip);
        }
        DpAction::SetIpv6Src(ip) | DpAction::SetIpv6Dst(ip) => {
            need(v6, "set(ipv6)")?;
            let src = matches!(a, DpAction::SetIpv6Src(_));
            for i in 0..4u8 {
                let word = (ip >> (96 - 32 * u32::from(i))) as u32;
                let f = if src {
                    ModifyField::Sipv6(i)
                } else {
                    ModifyField::Dipv6(i)
                };
                set(ops, f, word);
            }
        }
        DpAction::SetDscp(d) => {
            need(v4 || v6, "set(ip_dscp)")?;
            set(ops, ModifyField::IpDscp, u32::from(d));
        }
        DpAction::SetEcn(e) => {
            need(v4 || v6, "set(ip_ecn)")?;
            set(ops, ModifyField::IpEcn, u32::from(e));
        }
        DpAction::SetTtl(t) => {
            need(v4 || v6, "set(ip_ttl)")?;
            let f = if v4 {
                ModifyField::IpTtl
            } else {
                ModifyField::Ipv6HopLimit
            };
            set(ops, f, u32::from(t));
        }
        DpAction::DecTtl => {
            need(v4 || v6, "dec_ttl")?;
            let field = if v4 {
                ModifyField::IpTtl
            } else {
                ModifyField::Ipv6HopLimit
            };
            ops.push(ModifyOp::Add { field, data: 0xff });
        }
        DpAction::SetTpSrc(p) | DpAction::SetTpDst(p) => {
            let src = matches!(a, DpAction::SetTpSrc(_));
            let f = match (proto, src) {
                (Some(6), true) => ModifyField::TcpSport,
                (Some(6), false) => ModifyField::TcpDport,
                (Some(17), true) => ModifyField::UdpSport,
                (Some(17), false) => ModifyField::UdpDport,
                _ => return Err(action("set(tp_port) on a protocol other than TCP or UDP")),
            };
            set(ops, f, u32::from(p));
        }
        _ => return Err(action(&a.to_string())),
    }
    Ok(())
}

impl<B: DrBackend> OffloadManager<B> {
    /// The DR actions for a megaflow's datapath actions (without a meter
    /// or sample, which [`stage`] took off), in device order; the counted
    /// shared actions used (a modify-header, an encap header: give them
    /// back with `release_counted`). `chain`: the stage ends in `ct()`
    /// (module `chain` took it off): these register writes join its
    /// rewrites, and it goes on to the conntrack table instead of a
    /// destination.
    pub(super) fn translate(
        &mut self,
        m: &Match,
        actions: &[DpAction],
        chain: Option<(Vec<ModifyOp>, usize)>,
    ) -> Result<(Vec<ActionId>, Vec<Counted>), NotOffloaded> {
        let mut pops = 0;
        let mut pushes = Vec::new();
        let mut ops = Vec::new();
        // Each copy: its encap header (a tunnel's), and its vport.
        let mut outs: Vec<(Option<Vec<u8>>, Vport)> = Vec::new();
        for a in actions {
            match a {
                DpAction::Output(p) => {
                    let out = (None, self.vport_of(*p)?);
                    if outs.contains(&out) {
                        // Software sends a copy per output; a dest_array
                        // delivers one per destination.
                        return Err(action(&format!("output:{p} twice")));
                    }
                    outs.push(out);
                }
                DpAction::TunnelPush { header, port, .. } => {
                    let data = header
                        .outer()
                        .reformat_data()
                        .map_err(|e| action(&format!("tnl_push: {e}")))?;
                    let out = (Some(data), self.vport_of(*port)?);
                    if outs.contains(&out) {
                        return Err(action(&format!("tnl_push to {port} twice")));
                    }
                    outs.push(out);
                }
                DpAction::Drop => {}
                _ if !outs.is_empty() => {
                    return Err(action(&format!("{a} after an output")));
                }
                DpAction::PopVlan => {
                    if !ops.is_empty() || !pushes.is_empty() {
                        return Err(action("pop_vlan after a rewrite"));
                    }
                    pops += 1;
                }
                DpAction::PushVlan { tpid, tci } => {
                    pushes.push(u32::from(*tpid) << 16 | u32::from(*tci));
                }
                DpAction::Meter(_) => return Err(action("meter after another action")),
                DpAction::Sample { .. } => return Err(action("sample after another action")),
                DpAction::Recirc(_) => {
                    return Err(action(
                        "recirc without ct() before it: only a ct() stage continues in hardware",
                    ))
                }
                DpAction::Ct(spec) if spec.commit => {
                    return Err(action(
                        "ct(commit) of a new connection: only software commits connections",
                    ))
                }
                DpAction::Ct(_) => {
                    return Err(action(
                        "ct() before other actions: the FDB's conntrack table ends a stage",
                    ))
                }
                // No later stage in the device reads the tracking state
                // of a stage that does not recirculate: clearing it is
                // nothing there (a stage that ends in ct() had its
                // ct_clear taken off by `chain::split`).
                DpAction::CtClear if !actions.iter().any(|a| matches!(a, DpAction::Recirc(_))) => {}
                DpAction::CtClear => {
                    return Err(action("ct_clear: the FDB does not clear tracking state"))
                }
                DpAction::SoftwareOnly(why) => return Err(action(why)),
                DpAction::CheckPktLen { .. } => {
                    return Err(action(
                        "check_pkt_len: the FDB picks no actions by a packet's length",
                    ))
                }
                DpAction::Hash { .. } => return Err(action(
                    "hash: the FDB computes no dp_hash (a dp_hash select group picks in software)",
                )),
                DpAction::Userspace(r) => {
                    let name = match r {
                        UserspaceReason::Controller { .. } => "controller",
                        UserspaceReason::Sample(_) => "userspace(sflow)",
                        UserspaceReason::Action => "userspace",
                        UserspaceReason::SlowPath => "slow_path",
                    };
                    return Err(action(name));
                }
                set => {
                    if !pushes.is_empty() {
                        return Err(action(&format!("{set} after push_vlan")));
                    }
                    rewrite(m, set, &mut ops)?;
                }
            }
        }
        if pops + pushes.len() > 2 {
            return Err(action("more than two VLAN actions"));
        }
        let mut list = Vec::new();
        // A tunnel port's packet: its rule matched it on the uplink, its
        // actions are for the inner frame.
        let from_tunnel = m.mask().is_exact(Field::InPort)
            && self
                .ports
                .tunnel(PortNo(m.key().in_port() as u32))
                .is_some();
        if from_tunnel && chain.is_some() {
            // Software would resume it decapsulated, its tunnel key lost.
            return Err(action("ct() on a tunnel's packet"));
        }
        if from_tunnel {
            let spec = ActionSpec::PacketReformat {
                reformat: Reformat::L2TunnelToL2,
                data: Vec::new(),
            };
            let a = self.shared_action(self.shared.decap, spec)?;
            self.shared.decap = Some(a);
            list.push(a);
        }
        for _ in 0..pops {
            let a = self.shared_action(self.shared.pop, ActionSpec::PopVlan)?;
            self.shared.pop = Some(a);
            list.push(a);
        }
        let mut counted = Vec::new();
        let r = match chain {
            Some((regs, pass)) => {
                self.finish_chained(ops, (regs, pass), &pushes, &outs, &mut list, &mut counted)
            }
            None => self.finish(ops, pushes, outs, &mut list, &mut counted),
        };
        match r {
            Ok(()) => Ok((list, counted)),
            Err(e) => {
                self.release_counted(counted);
                Err(e)
            }
        }
    }

    /// A chained stage's rewrites and register writes, then the jump to
    /// the conntrack table of its pass: nothing may leave before `ct()`.
    fn finish_chained(
        &mut self,
        mut ops: Vec<ModifyOp>,
        (regs, pass): (Vec<ModifyOp>, usize),
        pushes: &[u32],
        outs: &[(Option<Vec<u8>>, Vport)],
        list: &mut Vec<ActionId>,
        counted: &mut Vec<Counted>,
    ) -> Result<(), NotOffloaded> {
        if !outs.is_empty() {
            return Err(action("an output before ct()"));
        }
        if !pushes.is_empty() {
            return Err(action("push_vlan before ct()"));
        }
        ops.extend(regs);
        let bytes = encode_list(&ops);
        let spec = ActionSpec::ModifyHeader(bytes.clone());
        list.push(self.counted_action(bytes, spec, counted)?);
        list.push(self.jump_to_ct(pass)?);
        Ok(())
    }

    /// The rewrites, the pushes, and the copies' encaps and destinations
    /// (shared actions, in the device's order).
    fn finish(
        &mut self,
        ops: Vec<ModifyOp>,
        pushes: Vec<u32>,
        outs: Vec<(Option<Vec<u8>>, Vport)>,
        list: &mut Vec<ActionId>,
        counted: &mut Vec<Counted>,
    ) -> Result<(), NotOffloaded> {
        if !ops.is_empty() {
            let bytes = encode_list(&ops);
            let spec = ActionSpec::ModifyHeader(bytes.clone());
            list.push(self.counted_action(bytes, spec, counted)?);
        }
        for h in pushes {
            let a = self.shared_action(
                self.shared.push.get(&h).copied(),
                ActionSpec::PushVlan { header: h },
            )?;
            self.shared.push.insert(h, a);
            list.push(a);
        }
        let term = match outs.as_slice() {
            [] => self.drop_action()?,
            [(None, v)] => self.vport_action(*v)?,
            [(Some(data), v)] => {
                list.push(self.encap_action(data.clone(), counted)?);
                self.vport_action(*v)?
            }
            many => {
                // A copy to each destination, a tunnel's behind its own
                // encap. The array holds its encaps, so it is counted
                // like them (and given back before them); its key is its
                // destinations and their headers.
                let mut dests = Vec::new();
                let mut key = Vec::new();
                for (e, v) in many {
                    let reformat = match e {
                        Some(data) => Some(self.encap_action(data.clone(), counted)?),
                        None => None,
                    };
                    dests.push(crate::dr::ArrayDest {
                        reformat,
                        to: self.vport_action(*v)?,
                    });
                    let h = e.as_deref().unwrap_or_default();
                    key.extend_from_slice(&v.0.to_be_bytes());
                    key.extend_from_slice(&(h.len() as u16).to_be_bytes());
                    key.extend_from_slice(h);
                }
                self.counted_action(key, ActionSpec::DestArray(dests), counted)?
            }
        };
        list.push(term);
        Ok(())
    }

    /// The counted encap of header `data`.
    fn encap_action(
        &mut self,
        data: Vec<u8>,
        counted: &mut Vec<Counted>,
    ) -> Result<ActionId, NotOffloaded> {
        let spec = ActionSpec::PacketReformat {
            reformat: Reformat::L2ToL2Tunnel,
            data: data.clone(),
        };
        self.counted_action(data, spec, counted)
    }

    /// The shared dest_vport of `v`.
    fn vport_action(&mut self, v: Vport) -> Result<ActionId, NotOffloaded> {
        let a = self.shared_action(self.shared.vport.get(&v).copied(), ActionSpec::DestVport(v))?;
        self.shared.vport.insert(v, a);
        Ok(a)
    }
}

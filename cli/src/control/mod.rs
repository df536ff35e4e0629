//! The control protocol `eswitchctl` speaks to the daemon: one JSON
//! request per line, one JSON response per line.
//!
//! ```text
//! {"cmd":"dump-flows"}                          → {"ok":{"flows":[...]}}
//! {"cmd":"add-flow","flow":"priority=5,actions=drop"}
//! {"cmd":"del-flows","flow":"ip,nw_dst=198.18.0.2"}
//! {"cmd":"trace","packet":"in_port=1,udp,nw_dst=198.18.0.2,tp_dst=53"}
//! {"cmd":"show"} {"cmd":"dump-of"} {"cmd":"dump-rules"} {"cmd":"stats"}
//! ```
//!
//! `dump-flows` gives per megaflow `match`, `actions`, `packets`, `bytes`,
//! `used` (seconds since the last packet, or `"never"`), `offloaded`
//! (`yes` or `no (reason)`), `state` and the whole `line`; `dump-rules`
//! gives the device's own [`DeviceDump`](offload::dr::DeviceDump).
//!
//! A request that cannot be carried out gets `{"error":"..."}` naming what
//! was wrong; nothing changes and the switch goes on.
//! [`handle`] is the whole server side on a [`Switch`], whatever its
//! device; [`socket`]
//! carries the lines (the daemon's server, `eswitchctl`'s client), and
//! [`render`] prints answers for people.

use megaflow::offload::FlowOffload;
use megaflow::Timestamp;
use ofproto::text::{format_rule_in, parse_flow_in, parse_match_in};
use ofproto::{Datapaths, FlowModCommand};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::switch::{Device, Switch};

pub mod ct;
pub mod dp;
pub mod render;
pub mod socket;

/// One request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Ports with their counters.
    Show,
    /// Megaflows: match, actions, counters, offloaded or why not; only
    /// those `only` names (`offloaded` or `software`) and whose
    /// offloaded-or-why-not text contains `reason`, sorted by `sort`
    /// (`packets` or `bytes`, most first) if given.
    DumpFlows {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        only: Option<FlowKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sort: Option<SortKey>,
    },
    /// What is programmed in the (simulated) device: tables, matchers,
    /// rules with their decoded match, actions and counters.
    DumpRules,
    /// The OpenFlow tables.
    DumpOf,
    /// Adds a flow (ovs-ofctl syntax).
    AddFlow { flow: String },
    /// Deletes the flows a match selects (all without one).
    DelFlows {
        #[serde(default)]
        flow: Option<String>,
    },
    /// How a packet (flow syntax) walks the tables; at each
    /// recirculation (`ct(table=T)`) the next stage goes on with the
    /// tracking state the next `ct_next` entry says (`trk,est`, as
    /// `ofproto/trace --ct-next`).
    Trace {
        packet: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ct_next: Vec<String>,
    },
    /// Pipeline and switch counters.
    Stats,
    /// Adds a port while the daemon runs (not written to the config).
    AddPort {
        name: String,
        #[serde(default)]
        ofport: Option<u32>,
        #[serde(default)]
        vport: Option<String>,
        /// `representor` (the default), `uplink`, `internal`, `vxlan`,
        /// `geneve`.
        #[serde(default, rename = "type")]
        kind: Option<String>,
        /// A tunnel port's options, `NAME=VALUE` each.
        #[serde(default)]
        options: Vec<String>,
    },
    /// Removes a port while the daemon runs.
    DelPort { name: String },
    /// The controllers the switch connects to (`ovs-vsctl
    /// get-controller`).
    GetController,
    /// Replaces them (`ovs-vsctl set-controller`; none: `del-controller`).
    SetController {
        #[serde(default)]
        targets: Vec<String>,
    },
    /// `standalone` or `secure` (`ovs-vsctl get-fail-mode`).
    GetFailMode,
    /// Sets it (`ovs-vsctl set-fail-mode`).
    SetFailMode { mode: String },
    /// Tracked connections (`ovs-appctl dpctl/dump-conntrack [-s]`), of
    /// one zone if given.
    DumpConntrack {
        #[serde(default)]
        zone: Option<u16>,
        #[serde(default)]
        stats: bool,
    },
    /// Removes connections (`dpctl/flush-conntrack` arguments).
    FlushConntrack {
        #[serde(default)]
        args: Vec<String>,
    },
    /// Connections per protocol and the tracker's counters
    /// (`dpctl/ct-stats-show`).
    ConntrackStats {
        #[serde(default)]
        zone: Option<u16>,
        #[serde(default)]
        verbose: bool,
    },
    /// Zone limits (`dpctl/ct-set-limits` arguments).
    CtSetLimits { args: Vec<String> },
    /// Zone limits in force (`dpctl/ct-get-limits`).
    CtGetLimits {
        #[serde(default)]
        zones: Vec<u16>,
    },
    /// Each datapath thread's counters since the last `DpStatsClear`
    /// (`dpif-netdev/pmd-stats-show`).
    DpStats,
    /// Starts those counters again from zero (`pmd-stats-clear`).
    DpStatsClear,
}

impl Request {
    /// Whether the daemon's OpenFlow side answers it (the controllers and
    /// the fail mode), not the switch.
    pub fn is_openflow(&self) -> bool {
        matches!(
            self,
            Request::GetController
                | Request::SetController { .. }
                | Request::GetFailMode
                | Request::SetFailMode { .. }
        )
    }
}

/// Which megaflows `dump-flows` lists (Open vSwitch's `type=offloaded`
/// and `type=ovs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowKind {
    /// In the device.
    Offloaded,
    /// In software only (with the reason why not in the device).
    Software,
}

/// What `dump-flows` sorts by, most first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortKey {
    Packets,
    Bytes,
}

impl Request {
    /// `dump-flows` with no filter and no sort.
    pub const DUMP_FLOWS: Request = Request::DumpFlows {
        only: None,
        reason: None,
        sort: None,
    };
}

/// One response: `{"ok": ...}` or `{"error": "..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Response {
    Ok(Value),
    Error(String),
}

/// The megaflows of `pipeline` as `dump-flows` gives them: per flow `line`
/// (the whole line), `match`, `actions`, `packets`, `bytes`, `used`
/// (seconds before `now`, or "never"), `state` and `offloaded`.
pub fn megaflows_json<O: FlowOffload, D: Datapaths>(
    pipeline: &ofproto::Pipeline<O, D>,
    now: Timestamp,
) -> Vec<Value> {
    megaflows_filtered(pipeline, now, None, None, None)
}

/// [`megaflows_json`], only those of `only` whose offloaded-or-why-not
/// text contains `reason`, sorted by `sort` (most first; ties keep the
/// dump's order).
pub fn megaflows_filtered<O: FlowOffload, D: Datapaths>(
    pipeline: &ofproto::Pipeline<O, D>,
    now: Timestamp,
    only: Option<FlowKind>,
    reason: Option<&str>,
    sort: Option<SortKey>,
) -> Vec<Value> {
    let mut flows: Vec<_> = pipeline
        .dump()
        .into_iter()
        .map(|d| {
            let off = d.offloaded();
            (d, off)
        })
        .filter(|(_, off)| match only {
            Some(FlowKind::Offloaded) => off == "yes",
            Some(FlowKind::Software) => off != "yes",
            None => true,
        })
        .filter(|(_, off)| reason.is_none_or(|r| off.contains(r)))
        .collect();
    match sort {
        Some(SortKey::Packets) => flows.sort_by_key(|(d, _)| std::cmp::Reverse(d.stats.packets)),
        Some(SortKey::Bytes) => flows.sort_by_key(|(d, _)| std::cmp::Reverse(d.stats.bytes)),
        None => {}
    }
    let tlv = pipeline.bridge().tlv().clone();
    flows
        .iter()
        .map(|(d, off)| {
            let m = ofproto::text::format_match_in(&d.matched, &tlv);
            let used = if d.stats.used == Timestamp::NEVER {
                json!("never")
            } else {
                json!((now.since(d.stats.used) / 1_000_000) as f64 / 1e3)
            };
            json!({
                "line": d.line(now),
                "match": if m.is_empty() { "any".to_string() } else { m },
                "actions": if d.actions.is_empty() {
                    "drop".to_string()
                } else {
                    d.actions.to_string()
                },
                "packets": d.stats.packets,
                "bytes": d.stats.bytes,
                "used": used,
                "state": d.state.name(),
                "offloaded": off,
            })
        })
        .collect()
}

/// `trace` of `key`, stage after stage: each `recirc` goes on with the
/// next of `ct_next`'s states (and the zone of the stage's `ct()`), as
/// Open vSwitch's `ofproto/trace --ct-next` does; without one it stops
/// there, saying so.
fn trace_stages<B: Device, D: Datapaths>(
    sw: &Switch<B, D>,
    mut key: megaflow::FlowKey,
    ct_next: &[String],
    now: Timestamp,
) -> Result<Value, String> {
    let states: Vec<u8> = ct_next
        .iter()
        .map(|s| ofproto::text::ct_state_flags(s).map_err(|e| format!("--ct-next {e}")))
        .collect::<Result<_, _>>()?;
    let br = sw.pipeline().bridge();
    let mut text = String::new();
    let mut stages = Vec::new();
    for stage in 0..=megaflow::actions::MAX_RECIRC_DEPTH {
        let t = br.trace(&key, now);
        let actions = t.datapath_actions();
        let shown = if actions.is_empty() {
            "drop".to_string()
        } else {
            actions.to_string()
        };
        if stage > 0 {
            text.push_str(&format!(
                "\n===== stage {stage}: recirc_id={:#x} =====\n",
                key.recirc_id()
            ));
        }
        text.push_str(&t.explain(&key));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        stages.push(json!({
            "megaflow": ofproto::text::format_match(&t.megaflow(&key)),
            "actions": shown,
        }));
        let Some(megaflow::DpAction::Recirc(id)) = t.actions.last() else {
            break;
        };
        let Some(&state) = states.get(stage) else {
            text.push_str(&format!(
                "\nThe packet recirculates to {id:#x}; give --ct-next FLAGS to trace its next stage.\n"
            ));
            break;
        };
        let zone = t.actions.iter().rev().find_map(|a| match a {
            megaflow::DpAction::Ct(spec) => Some(spec.zone),
            _ => None,
        });
        key.set_recirc_id(u64::from(*id));
        key.set_ct_state(u64::from(state));
        key.set_ct_zone(u64::from(zone.unwrap_or(0)));
    }
    let last = stages.last().cloned().unwrap_or(Value::Null);
    Ok(json!({
        "trace": text,
        "megaflow": last["megaflow"],
        "actions": last["actions"],
        "stages": stages,
    }))
}

/// Parses one request line; the error names what is wrong.
pub fn parse_request(line: &str) -> Result<Request, String> {
    serde_json::from_str(line).map_err(|e| format!("bad request: {e}"))
}

/// Carries out a request on the switch at time `now`.
pub fn handle<B: Device, D: Datapaths>(
    sw: &mut Switch<B, D>,
    req: &Request,
    now: Timestamp,
) -> Response {
    match run(sw, req, now) {
        Ok(v) => Response::Ok(v),
        Err(e) => Response::Error(e),
    }
}

fn run<B: Device, D: Datapaths>(
    sw: &mut Switch<B, D>,
    req: &Request,
    now: Timestamp,
) -> Result<Value, String> {
    // What handlers staged since the offload thread's last tick.
    sw.pipeline_mut().adopt();
    match req {
        Request::Show => Ok(json!({ "ports": sw.port_summaries() })),
        Request::DumpFlows { only, reason, sort } => Ok(json!({
            "flows": megaflows_filtered(sw.pipeline(), now, *only, reason.as_deref(), *sort)
        })),
        Request::DumpRules => {
            let dump = sw.dump_rules().map_err(|e| format!("dump-rules: {e:#}"))?;
            serde_json::to_value(dump).map_err(|e| format!("dump-rules: {e}"))
        }
        Request::DumpOf => {
            let br = sw.pipeline().bridge();
            let rules: Vec<Value> = br
                .tables()
                .tables()
                .flat_map(|t| t.rules().map(|(_, r)| r))
                .map(|r| {
                    json!({
                        "rule": format_rule_in(&r.spec, br.tlv()),
                        "packets": r.packets,
                        "bytes": r.bytes,
                    })
                })
                .collect();
            Ok(json!({ "rules": rules }))
        }
        Request::AddFlow { flow } => {
            let out = apply_text(sw, flow, FlowModCommand::Add, now)?;
            Ok(json!({ "added": out.added, "replaced": out.replaced }))
        }
        Request::DelFlows { flow } => {
            let text = flow.as_deref().unwrap_or("");
            let out = apply_text(sw, text, FlowModCommand::Delete, now)?;
            Ok(json!({ "removed": out.removed.len() }))
        }
        Request::Trace { packet, ct_next } => {
            let m =
                parse_match_in(packet, sw.pipeline().bridge().tlv()).map_err(|e| e.to_string())?;
            trace_stages(sw, *m.key(), ct_next, now)
        }
        Request::AddPort { .. } | Request::DelPort { .. } => {
            Err("ports are added and removed by the daemon's main thread (eswitchd run)".into())
        }
        Request::GetController
        | Request::SetController { .. }
        | Request::GetFailMode
        | Request::SetFailMode { .. } => {
            Err("controllers and the fail mode are the OpenFlow side's (eswitchd run)".into())
        }
        Request::DumpConntrack { zone, stats } => {
            let hw = sw.pipeline().ct_hw_conns();
            Ok(ct::dump(&sw.tracker(), *zone, *stats, now, &hw))
        }
        Request::FlushConntrack { args } => ct::flush(&sw.tracker(), args),
        Request::ConntrackStats { zone, verbose } => {
            Ok(ct::stats(&sw.tracker(), *zone, *verbose, now))
        }
        Request::CtSetLimits { args } => ct::set_limits(&sw.tracker(), args),
        Request::CtGetLimits { zones } => Ok(ct::get_limits(&sw.tracker(), zones)),
        Request::DpStats => Ok(dp::stats(&sw.datapath_counters())),
        Request::DpStatsClear => {
            sw.clear_datapath_counters();
            Ok(json!({}))
        }
        Request::Stats => {
            let st = sw.pipeline().stats().clone();
            let ct_hw = sw.pipeline().ct_hw_stats();
            let c = sw.counters();
            let (undestroyed, destroy_refusals) = {
                let o = sw.pipeline().offloader().lock();
                (o.undestroyed(), o.destroy_refusals())
            };
            Ok(json!({
                "packets": c.rx.packets,
                "bytes": c.rx.bytes,
                "hw_handled": c.hw_handled,
                "sw_handled": c.sw_handled,
                "hw_drops": c.hw_drops,
                "sw_drops": c.sw_drops,
                "hw_samples": c.hw_samples,
                "sw_samples": c.sw_samples,
                "restore_drops": c.restore_drops,
                "ct_restored": c.ct_restored,
                "ct_hw": {
                    "entries": ct_hw.entries,
                    "installed": ct_hw.installed,
                    "refused": ct_hw.refused,
                    "removed": ct_hw.removed,
                    "packets": ct_hw.packets,
                },
                "tunnel_rx": c.tunnel_rx,
                "tunnel_drop_fragment": c.tunnel_drop_fragment,
                "tunnel_drop_malformed": c.tunnel_drop_malformed,
                "tunnel_drop_unknown_vni": c.tunnel_drop_unknown_vni,
                "tunnel_drop_bad_option": c.tunnel_drop_bad_option,
                "tunnel_too_big": c.tunnel_too_big,
                "to_controller": c.to_controller,
                "upcalls": st.upcalls,
                "upcalls_queued": c.upcalls_queued,
                "upcall_drops_rate": c.upcall_drops_rate,
                "upcall_drops_full": c.upcall_drops_full,
                "cache_hits": st.hits,
                "megaflows": sw.pipeline().len(),
                "megaflows_created": st.megaflows_created,
                "offloaded": sw.pipeline().offloaded_len(),
                "offload_failures": st.offload_failures,
                "hw_undestroyed": undestroyed,
                "hw_destroy_refusals": destroy_refusals,
                "poll_errors": st.poll_errors,
                "demoted": st.demoted,
                "aged": st.aged,
                "evicted_limit": st.evicted_limit,
                "evicted_fair": st.evicted_fair,
                "flow_limit_hits": st.flow_limit_hits,
                "port_limit_hits": st.port_limit_hits,
                "port_flow_limit": sw.pipeline().config().revalidator.port_flow_limit,
                "revalidator_passes": st.passes,
                "illegal_transitions": st.illegal_transitions,
                "rules_expired": st.rules_expired,
                "recirc_ids_freed": st.recirc_ids_freed,
                "flow_limit": sw.pipeline().flow_limit(),
            }))
        }
    }
}

/// Parses a flow in ovs-ofctl syntax and applies it as `cmd`; the
/// megaflows follow at a pass run now, not at the next one due (as after
/// an OpenFlow flow mod).
fn apply_text<B: Device, D: Datapaths>(
    sw: &mut Switch<B, D>,
    text: &str,
    cmd: FlowModCommand,
    now: Timestamp,
) -> Result<ofproto::table::FlowModOutcome, String> {
    let fm = parse_flow_in(text, cmd, sw.pipeline().bridge().tlv()).map_err(|e| e.to_string())?;
    let meters = sw.pipeline().meters();
    if let Some(e) = fm.unknown_meter(|id| meters.get(id).is_some()) {
        return Err(e.to_string());
    }
    drop(meters);
    let out = sw
        .pipeline_mut()
        .bridge_mut()
        .apply_flow_mod(&fm, now)
        .map_err(|e| e.to_string())?;
    sw.pipeline_mut().request_pass();
    Ok(out)
}

/// The levels of the tables a `dump-rules` answer lists, in order (for
/// tests).
#[cfg(test)]
pub(crate) fn table_levels(dump: &Value) -> Vec<u64> {
    dump["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .filter_map(|t| t["level"].as_u64())
        .collect()
}

#[cfg(test)]
#[path = "tests/requests.rs"]
mod tests;

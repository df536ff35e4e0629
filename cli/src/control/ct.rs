//! The conntrack requests, in the forms of `ovs-appctl dpctl/*`:
//! `dump-conntrack`, `flush-conntrack`, `conntrack-stats`
//! (`ct-stats-show`), `ct-set-limits`, `ct-get-limits`.

use std::collections::HashMap;

use conntrack::{FlushFilter, Tracker};
use megaflow::Timestamp;
use serde_json::{json, Value};

/// `dump-conntrack [zone] [-s]`: one line per connection, as
/// `ovs-appctl dpctl/dump-conntrack [-s]` prints it.
///
/// `hw`: the connections with a direction in the device's conntrack
/// table; each connection says which (`hw`: `orig`, `reply`) and the
/// packets their entries counted.
pub fn dump(
    t: &Tracker,
    zone: Option<u16>,
    stats: bool,
    now: Timestamp,
    hw: &HashMap<(u16, conntrack::Tuple), ofproto::pipeline::CtHwConn>,
) -> Value {
    let conns: Vec<Value> = t
        .dump(zone, now.as_millis())
        .iter()
        .map(|e| {
            let h = hw.get(&(e.zone, e.orig)).copied().unwrap_or_default();
            let dirs: Vec<&str> = ["orig", "reply"]
                .into_iter()
                .zip(h.dirs)
                .filter_map(|(name, on)| on.then_some(name))
                .collect();
            json!({
                "line": e.format(stats),
                "zone": e.zone,
                "mark": e.mark,
                "labels": format!("{:#x}", e.label),
                "timeout": e.timeout,
                "state": e.tcp.map(|(_, s)| conntrack::tcp::STATE_NAMES[s as usize]),
                "hw": dirs,
                "hw_packets": h.packets,
            })
        })
        .collect();
    json!({ "conns": conns })
}

/// `flush-conntrack [zone=N] [mark=X[/M]] [labels=Y[/N]] [ORIG [REPLY]]`.
pub fn flush(t: &Tracker, args: &[String]) -> Result<Value, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let f = FlushFilter::parse(&args)?;
    let n = t
        .flush(&f)
        .map_err(|e| format!("failed to flush conntrack: {e}"))?;
    Ok(json!({ "flushed": n }))
}

/// `conntrack-stats [zone] [-m]`: `ovs-appctl dpctl/ct-stats-show`'s text
/// and the numbers, with the tracker's own counters.
pub fn stats(t: &Tracker, zone: Option<u16>, verbose: bool, now: Timestamp) -> Value {
    let c = t.proto_counts(zone, now.as_millis());
    let s = t.stats();
    json!({
        "text": c.format(verbose),
        "total": c.total,
        "tcp": c.tcp,
        "udp": c.udp,
        "icmp": c.icmp,
        "icmpv6": c.icmpv6,
        "other": c.other,
        "max_conns": t.max_conns(),
        "created": s.created,
        "removed": s.removed,
        "invalid": s.invalid,
        "related": s.related,
        "table_full": s.table_full,
        "zone_full": s.zone_full,
        "nat_exhausted": s.nat_exhausted,
    })
}

/// `ct-set-limits [default=L] [zone=N,limit=L]...`, as dpctl reads them.
pub fn set_limits(t: &Tracker, args: &[String]) -> Result<Value, String> {
    let mut default = None;
    let mut zones = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if let Some(d) = a.strip_prefix("default=") {
            if i != 0 {
                return Err("default= must come first".into());
            }
            default = Some(
                d.parse::<u32>()
                    .map_err(|_| "invalid default limit".to_string())?,
            );
            continue;
        }
        let (mut zone, mut limit) = (None, None);
        for kv in a.split(',') {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("field {kv} missing value"))?;
            match k {
                "zone" => {
                    zone = Some(
                        v.parse::<u16>()
                            .map_err(|_| format!("failed to parse field {k}"))?,
                    )
                }
                "limit" => {
                    limit = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("failed to parse field {k}"))?,
                    )
                }
                _ => return Err(format!("invalid zone limit field: {k}")),
            }
        }
        match (zone, limit) {
            (Some(z), Some(l)) => zones.push((z, l)),
            _ => return Err(format!("failed to parse zone limit: {a}")),
        }
    }
    t.set_limits(default, &zones);
    Ok(json!({}))
}

/// `ct-get-limits [zone=N1[,N2]...]`.
pub fn get_limits(t: &Tracker, zones: &[u16]) -> Value {
    let l = t.limits(zones);
    let mut text = format!("default limit={}", l.default);
    for (z, limit, count) in &l.zones {
        text.push_str(&format!("\nzone={z},limit={limit},count={count}"));
    }
    text.push('\n');
    json!({
        "text": text,
        "default": l.default,
        "zones": l.zones.iter().map(|(z, l, c)| json!({"zone": z, "limit": l, "count": c})).collect::<Vec<_>>(),
    })
}

//! How `eswitchctl` prints the daemon's answers for people: aligned
//! tables, one line per megaflow or OpenFlow rule, the device's tables
//! grouped down to their rules. Every function takes the `ok` value of a
//! [`Response`](crate::control::Response) as JSON and tolerates missing
//! fields (printed as `-`), so an older or newer daemon still prints.
//! Each result ends with a newline unless it is empty.

use serde_json::Value;

/// A JSON scalar as text: strings as they are, numbers and booleans as
/// JSON writes them, null or absent as `-`.
pub fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.parse::<f64>().is_ok()
}

/// An aligned table: a header row, then `rows`, columns two spaces apart;
/// a column whose cells are all numbers (or `-`) is right-aligned. Each
/// line is prefixed with `indent`; trailing spaces are trimmed.
pub fn table(indent: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    let mut numeric = vec![true; cols];
    for row in rows {
        for (i, cell) in row.iter().take(cols).enumerate() {
            width[i] = width[i].max(cell.chars().count());
            if cell != "-" && !is_number(cell) {
                numeric[i] = false;
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let mut line = String::from(indent);
        for (i, w) in width.iter().enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w.saturating_sub(cell.chars().count());
            if numeric[i] && !rows.is_empty() {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&Value::Null)
}

/// `show`: NAME OFPORT TYPE VPORT IFINDEX STATE IO RX TX(hw) TX(sw) DROPS
/// (TYPE: the port's kind; IO: how the daemon receives on it). The live
/// columns are `-` for a port without status (replay).
pub fn show(v: &Value) -> String {
    let rows: Vec<Vec<String>> = array(v, "ports")
        .iter()
        .map(|p| {
            let drops = match (
                field(p, "rx_dropped").as_u64(),
                field(p, "tx_dropped").as_u64(),
            ) {
                (None, None) => "-".to_string(),
                (rx, tx) => (rx.unwrap_or(0) + tx.unwrap_or(0)).to_string(),
            };
            vec![
                text(field(p, "name")),
                text(field(p, "ofport")),
                text(field(p, "type")),
                text(field(p, "vport")),
                text(field(p, "ifindex")),
                text(field(p, "state")),
                text(field(p, "kind")),
                text(field(p, "rx_packets")),
                text(field(p, "tx_hw_packets")),
                text(field(p, "tx_sw_packets")),
                drops,
            ]
        })
        .collect();
    let mut out = table(
        "",
        &[
            "NAME", "OFPORT", "TYPE", "VPORT", "IFINDEX", "STATE", "IO", "RX", "TX(hw)", "TX(sw)",
            "DROPS",
        ],
        &rows,
    );
    for p in array(v, "ports") {
        if let Some(t) = field(p, "tunnel").as_str() {
            out.push_str(&format!(
                "tunnel {}: {t}; adds {} bytes (an IPv4 underlay)\n",
                text(field(p, "name")),
                text(field(p, "overhead"))
            ));
        }
    }
    if let Some(conns) = v.get("openflow").and_then(Value::as_array) {
        let rows: Vec<Vec<String>> = conns
            .iter()
            .map(|c| {
                let last = match field(c, "last_error") {
                    Value::Null => "-".to_string(),
                    e => text(e),
                };
                vec![
                    text(field(c, "id")),
                    text(field(c, "listener")),
                    text(field(c, "peer")),
                    text(field(c, "state")),
                    text(field(c, "role")),
                    text(field(c, "rx_msgs")),
                    text(field(c, "tx_msgs")),
                    text(field(c, "errors_sent")),
                    text(field(c, "packet_ins")),
                    text(field(c, "packet_in_drops")),
                    last,
                ]
            })
            .collect();
        out.push_str("\nOpenFlow connections:\n");
        out.push_str(&table(
            "  ",
            &[
                "ID",
                "LISTENER",
                "PEER",
                "STATE",
                "ROLE",
                "RX",
                "TX",
                "ERRORS",
                "LAST ERROR",
            ],
            &rows,
        ));
    }
    out
}

/// `used` as `1.234s` or `never`.
fn used(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(s) => format!("{s:.3}s"),
            None => n.to_string(),
        },
        other => text(other),
    }
}

/// `dump-flows`: one line per megaflow, as `ovs-appctl dpctl/dump-flows`
/// prints them: `<match>, packets:N, bytes:N, used:1.234s, offloaded:yes
/// actions:...` (`offloaded:no (reason)` for a flow in software).
pub fn dump_flows(v: &Value) -> String {
    let mut out = String::new();
    for f in array(v, "flows") {
        if f.get("match").is_none() {
            // An older daemon: only the whole line.
            out.push_str(&text(field(f, "line")));
        } else {
            out.push_str(&format!(
                "{}, packets:{}, bytes:{}, used:{}, offloaded:{} actions:{}",
                text(field(f, "match")),
                text(field(f, "packets")),
                text(field(f, "bytes")),
                used(field(f, "used")),
                text(field(f, "offloaded")),
                text(field(f, "actions")),
            ));
        }
        out.push('\n');
    }
    out
}

/// `dump-of`: like `ovs-ofctl dump-flows`, ` n_packets=N, n_bytes=N, <rule>`.
pub fn dump_of(v: &Value) -> String {
    let mut out = String::new();
    for r in array(v, "rules") {
        out.push_str(&format!(
            " n_packets={}, n_bytes={}, {}\n",
            text(field(r, "packets")),
            text(field(r, "bytes")),
            text(field(r, "rule")),
        ));
    }
    out
}

/// Named fields (`[{"name":..,"value":..}]`) as `name=value name=value`,
/// or `any` when there are none.
fn fields(v: &Value) -> String {
    let parts: Vec<String> = v
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|f| format!("{}={}", text(field(f, "name")), text(field(f, "value"))))
        .collect();
    if parts.is_empty() {
        "any".to_string()
    } else {
        parts.join(" ")
    }
}

fn plural(n: &Value, one: &str) -> String {
    match n.as_u64() {
        Some(1) => format!("1 {one}"),
        Some(k) => format!("{k} {one}s"),
        None => format!("- {one}s"),
    }
}

/// `dump-rules`: per domain, its tables by level; per table, its matchers
/// (priority, mask fields); per matcher, an aligned table of its rules
/// (packets, bytes, value fields, actions).
pub fn dump_rules(v: &Value) -> String {
    let mut out = String::new();
    let tables = array(v, "tables");
    let matchers = array(v, "matchers");
    let rules = array(v, "rules");
    let domains = array(v, "domains");
    if domains.is_empty() && tables.is_empty() {
        return "no domains: nothing is programmed in the device\n".to_string();
    }
    for d in domains {
        let dups = match field(d, "allow_duplicates").as_bool() {
            Some(true) => ", duplicates allowed",
            Some(false) => ", no duplicates",
            None => "",
        };
        out.push_str(&format!(
            "domain {} ({}{dups})\n",
            text(field(d, "id")),
            text(field(d, "type"))
        ));
        let mine = tables
            .iter()
            .filter(|t| field(t, "domain") == field(d, "id"));
        for t in mine {
            dump_table(&mut out, t, matchers, rules);
        }
    }
    // Tables whose domain is not listed (should not happen).
    let known: Vec<&Value> = domains.iter().map(|d| field(d, "id")).collect();
    for t in tables
        .iter()
        .filter(|t| !known.contains(&field(t, "domain")))
    {
        dump_table(&mut out, t, matchers, rules);
    }
    let differences = array(v, "differences");
    if !differences.is_empty() {
        out.push_str("the device's own dump differs from this:\n");
        for d in differences {
            out.push_str(&format!("  {}\n", text(d)));
        }
    }
    let restore = array(v, "restore_rules");
    if !restore.is_empty() {
        let tags: Vec<String> = restore
            .iter()
            .map(|r| format!("{} tag {}", text(field(r, "id")), text(field(r, "tag"))))
            .collect();
        out.push_str(&format!(
            "slow-path queue (NIC RX): {} restore rule(s): {}\n",
            restore.len(),
            tags.join(", ")
        ));
    }
    out
}

fn dump_table(out: &mut String, t: &Value, matchers: &[Value], rules: &[Value]) {
    let id = field(t, "id");
    out.push_str(&format!(
        "  table {} level {} ({}): {}, {}\n",
        text(id),
        text(field(t, "level")),
        text(field(t, "domain_type")),
        plural(field(t, "matchers"), "matcher"),
        plural(field(t, "rules"), "rule"),
    ));
    for m in matchers.iter().filter(|m| field(m, "table") == id) {
        let mid = field(m, "id");
        out.push_str(&format!(
            "    matcher {} priority {} mask: {}\n",
            text(mid),
            text(field(m, "priority")),
            fields(field(m, "mask")),
        ));
        let rows: Vec<Vec<String>> = rules
            .iter()
            .filter(|r| field(r, "matcher") == mid)
            .map(|r| {
                let c = field(r, "counter");
                let actions: Vec<String> = array(r, "actions").iter().map(text).collect();
                vec![
                    text(field(r, "id")),
                    text(field(c, "packets")),
                    text(field(c, "bytes")),
                    fields(field(r, "value")),
                    if actions.is_empty() {
                        "-".to_string()
                    } else {
                        actions.join(", ")
                    },
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push_str(&table(
                "      ",
                &["RULE", "PACKETS", "BYTES", "MATCH", "ACTIONS"],
                &rows,
            ));
        }
    }
}

/// `stats`: `name: value`, names padded so the values line up; a nested
/// object (offload failures by reason) is listed below its name.
pub fn stats(v: &Value) -> String {
    let Some(map) = v.as_object() else {
        return format!("{}\n", text(v));
    };
    let width = map.keys().map(|k| k.chars().count()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, val) in map {
        let name = format!("{k}:");
        match val {
            Value::Object(inner) if inner.is_empty() => {
                out.push_str(&format!("{name:<width$} none\n", width = width))
            }
            Value::Object(inner) => {
                out.push_str(&format!("{name}\n"));
                let iw = inner.keys().map(|k| k.chars().count()).max().unwrap_or(0) + 1;
                for (ik, iv) in inner {
                    let iname = format!("{ik}:");
                    out.push_str(&format!("  {iname:<iw$} {}\n", text(iv), iw = iw));
                }
            }
            other => out.push_str(&format!("{name:<width$} {}\n", text(other), width = width)),
        }
    }
    out
}

/// `trace`: the walk through the tables, ending with the megaflow and the
/// datapath actions (the explanation holds them; `--json` also gives them
/// as fields of their own).
pub fn trace(v: &Value) -> String {
    let mut out = text(field(v, "trace"));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// `add-flow`: `added N, replaced N`.
pub fn add_flow(v: &Value) -> String {
    format!(
        "added {}, replaced {}\n",
        text(field(v, "added")),
        text(field(v, "replaced"))
    )
}

/// `del-flows`: `removed N`.
pub fn del_flows(v: &Value) -> String {
    format!("removed {}\n", text(field(v, "removed")))
}

fn add_port(v: &Value) -> String {
    format!(
        "added port {} (ofport {}, vport {})\n",
        text(field(v, "added")),
        text(field(v, "ofport")),
        text(field(v, "vport"))
    )
}

fn del_port(v: &Value) -> String {
    format!(
        "removed port {} (ofport {}); {} megaflows flushed\n",
        text(field(v, "removed")),
        text(field(v, "ofport")),
        text(field(v, "flushed"))
    )
}

/// The human output of command `cmd` (`show`, `dump-flows`, ...); an
/// unknown command's value is printed as pretty JSON.
pub fn render(cmd: &str, v: &Value) -> String {
    match cmd {
        "show" => show(v),
        "dump-flows" => dump_flows(v),
        "dump-rules" => dump_rules(v),
        "dump-of" => dump_of(v),
        "add-flow" => add_flow(v),
        "del-flows" => del_flows(v),
        "trace" => trace(v),
        "stats" => stats(v),
        "add-port" => add_port(v),
        "del-port" => del_port(v),
        // One target a line, as `ovs-vsctl get-controller`; nothing after
        // a change, as `ovs-vsctl`.
        "get-controller" => lines(&v["controllers"]),
        "set-controller" | "del-controller" | "set-fail-mode" => String::new(),
        "get-fail-mode" => format!("{}\n", v["fail_mode"].as_str().unwrap_or("")),
        // dpctl's line; a connection the device's conntrack table carries
        // says which directions after it.
        "dump-conntrack" => v["conns"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        let line = c["line"].as_str().unwrap_or("");
                        let hw: Vec<&str> = c["hw"]
                            .as_array()
                            .map(|d| d.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        if hw.is_empty() {
                            format!("{line}\n")
                        } else {
                            format!("{line} hw=({})\n", hw.join(","))
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
        "conntrack-stats" | "ct-get-limits" | "dp-stats" => {
            v["text"].as_str().unwrap_or("").to_string()
        }
        "flush-conntrack" | "ct-set-limits" | "dp-stats-clear" => String::new(),
        _ => pretty(v),
    }
}

/// The strings of a JSON array, one a line.
fn lines(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| format!("{s}\n"))
        .collect()
}

/// Pretty JSON with a final newline (`--json`).
pub fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

#[cfg(test)]
#[path = "tests/render.rs"]
mod tests;

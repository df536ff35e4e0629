//! `dp-stats` and `dp-stats-clear`: what each datapath thread did, in the
//! form of Open vSwitch's `ovs-appctl dpif-netdev/pmd-stats-show` and
//! `pmd-stats-clear`.

use megaflow::DatapathCounters;
use serde_json::{json, Value};

/// A ratio to two places, 0 over nothing.
fn per(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        (n as f64 / d as f64 * 100.0).round() / 100.0
    }
}

/// One datapath thread's counters: the numbers, and the lines
/// `pmd-stats-show` would print for them.
fn thread(index: usize, c: &DatapathCounters) -> Value {
    let (d, k) = (&c.dp, &c.cache);
    // Packets (first stages) and recirculated stages each take one pass.
    let passes = d.packets + d.recirculations;
    let searches = k.tss_hits + k.misses;
    json!({
        "thread": index,
        "packets": d.packets,
        "recirculations": d.recirculations,
        "passes_per_packet": per(passes, d.packets),
        "emc_hits": k.emc_hits,
        "hinted_hits": k.hinted_hits,
        "megaflow_hits": k.tss_hits,
        "subtable_probes": k.subtable_probes,
        "probes_per_search": per(k.subtable_probes, searches),
        "misses": d.misses,
        "recirc_too_deep": d.recirc_too_deep,
        "forks": d.forks,
        "forks_lost": d.forks_lost,
        "commands": d.commands,
    })
}

/// `dp-stats`: each datapath thread's counters since the last clear.
pub fn stats(counters: &[DatapathCounters]) -> Value {
    let threads: Vec<Value> = counters
        .iter()
        .enumerate()
        .map(|(i, c)| thread(i, c))
        .collect();
    let text: String = threads.iter().map(text).collect();
    json!({ "datapaths": threads, "text": text })
}

/// One thread's lines, as `pmd-stats-show` prints a PMD thread's.
fn text(t: &Value) -> String {
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    let f = |k: &str| t[k].as_f64().unwrap_or(0.0);
    format!(
        "datapath thread {}:\n  \
         packets received: {}\n  \
         packet recirculations: {}\n  \
         avg. datapath passes per packet: {:.2}\n  \
         emc hits: {}\n  \
         hinted hits (the stage after ct()): {}\n  \
         megaflow hits: {}\n  \
         avg. subtable lookups per megaflow search: {:.2}\n  \
         misses (to the slow path): {}\n  \
         dropped, recirculated too deep: {}\n  \
         forked copies: {} (lost: {})\n  \
         slow path commands applied: {}\n",
        n("thread"),
        n("packets"),
        n("recirculations"),
        f("passes_per_packet"),
        n("emc_hits"),
        n("hinted_hits"),
        n("megaflow_hits"),
        f("probes_per_search"),
        n("misses"),
        n("recirc_too_deep"),
        n("forks"),
        n("forks_lost"),
        n("commands"),
    )
}

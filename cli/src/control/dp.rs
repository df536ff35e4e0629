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
fn thread(index: usize, c: &DatapathCounters) -> (Value, String) {
    let (d, k) = (&c.dp, &c.cache);
    // Packets (first stages) and recirculated stages each take one pass.
    let passes = per(d.packets + d.recirculations, d.packets);
    let probes = per(k.subtable_probes, k.tss_hits + k.misses);
    let json = json!({
        "thread": index,
        "packets": d.packets,
        "recirculations": d.recirculations,
        "passes_per_packet": passes,
        "emc_hits": k.emc_hits,
        "hinted_hits": k.hinted_hits,
        "megaflow_hits": k.tss_hits,
        "subtable_probes": k.subtable_probes,
        "probes_per_search": probes,
        "misses": d.misses,
        "recirc_too_deep": d.recirc_too_deep,
        "forks": d.forks,
        "forks_lost": d.forks_lost,
        "commands": d.commands,
    });
    let text = format!(
        "datapath thread {index}:\n  \
         packets received: {}\n  \
         packet recirculations: {}\n  \
         avg. datapath passes per packet: {passes:.2}\n  \
         emc hits: {}\n  \
         hinted hits (the stage after ct()): {}\n  \
         megaflow hits: {}\n  \
         avg. subtable lookups per megaflow search: {probes:.2}\n  \
         misses (to the slow path): {}\n  \
         dropped, recirculated too deep: {}\n  \
         forked copies: {} (lost: {})\n  \
         slow path commands applied: {}\n",
        d.packets,
        d.recirculations,
        k.emc_hits,
        k.hinted_hits,
        k.tss_hits,
        d.misses,
        d.recirc_too_deep,
        d.forks,
        d.forks_lost,
        d.commands,
    );
    (json, text)
}

/// `dp-stats`: each datapath thread's counters since the last clear.
pub fn stats(counters: &[DatapathCounters]) -> Value {
    let (threads, text): (Vec<Value>, String) = counters
        .iter()
        .enumerate()
        .map(|(i, c)| thread(i, c))
        .unzip();
    json!({ "datapaths": threads, "text": text })
}

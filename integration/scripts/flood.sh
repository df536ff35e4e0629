#!/usr/bin/env bash
# A VM floods eswitchd with new flows while others carry on (root).
#
#   flood.sh [--runs N] [--flood-seconds S] [--flood-rate PPS] [--stream-rate PPS]
#            [--max-idle-ms MS] [--port-flow-limit N] [--bin DIR] [--no-build]
#
# The lab (lab.sh, 5 VMs):
#   vm1  the attacker: --flood-rate new UDP 5-tuples/s (default 215,000) for
#        --flood-seconds (default 10) to vm4; every 5-tuple is its own
#        megaflow (table 0 matches the source port exactly, table 1 the
#        destination address and port).
#   vm2  well-behaved: a --stream-rate UDP stream (default 50,000 pps) to vm5,
#        established before the flood and running through it; a ping every
#        10 ms to vm3; and, from 1 s into the flood, 500 new 5-tuples to vm4
#        (3 packets each, spread over the flood).
# Each run prints `flood: KEY VALUE` lines; at the end the medians over the
# runs are printed as `bench:` lines:
#   reliability.flood_established_loss_pct     stream packets lost (target <= 0.1 %)
#   reliability.flood_rtt_p99_ratio            ping RTT p99 during / before (target <= 2)
#   reliability.flood_rss_growth_mb            eswitchd's peak RSS growth (target <= 64 MB)
#   reliability.flood_victim_new_flows_cached_pct
#                                              vm2's new 5-tuples that got a megaflow (>= 99 %)
#   reliability.flood_recovery_s               the flood's upcalls handled until vm1
#                                              holds no megaflow
#                                              (bound: max-idle + one revalidator pass)
# and, per run, the attacker's upcalls admitted and dropped and the megaflows
# at the peak. --bin names the directory of eswitchd, eswitchctl and
# esw-pktgen (default: target/release, built unless --no-build).
# Only 198.18.0.0/15 is used; the lab is removed on exit, also on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
flood_s=10
flood_rate=215000
stream_rate=50000
max_idle_ms=10000
interval_ms=500
port_flow_limit=
bin=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
  --runs) runs=$2; shift 2 ;;
  --flood-seconds) flood_s=$2; shift 2 ;;
  --flood-rate) flood_rate=$2; shift 2 ;;
  --stream-rate) stream_rate=$2; shift 2 ;;
  --max-idle-ms) max_idle_ms=$2; shift 2 ;;
  --port-flow-limit) port_flow_limit=$2; shift 2 ;;
  --bin) bin=$2; build=; shift 2 ;;
  --no-build) build=; shift ;;
  *) echo "flood.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in runs flood_s flood_rate stream_rate max_idle_ms; do
  case "${!v}" in
  '' | *[!0-9]*) echo "flood.sh: $v '${!v}' is not a whole number" >&2; exit 2 ;;
  esac
done
if [ "$flood_s" -lt 3 ] || [ "$flood_s" -gt 60 ]; then
  echo "flood.sh: --flood-seconds $flood_s: expected 3..60" >&2
  exit 2
fi
# The victim's flows must outlive the flood until they are counted.
if [ "$max_idle_ms" -le $((flood_s * 1000 - 1000)) ]; then
  echo "flood.sh: --max-idle-ms $max_idle_ms must exceed the flood less a second" >&2
  exit 2
fi
# shellcheck source=lab-run.sh
. "$here/lab-run.sh"
lab_need flood ip ethtool ping python3
lab_run flood.sh fl

rx_vm() { rx "$tag-vm$1" eth0; }

# Table 0: a rule per UDP source port the generators use (32768 of them),
# so each megaflow is exact on it; table 1: the destination address and
# port, so it is exact on those too. ICMP and ARP: NORMAL.
{
  for p in $(seq 1024 $((1024 + 32767))); do
    echo "table=0,priority=10,udp,tp_src=$p,actions=goto_table:1"
  done
  echo "table=0,priority=1,actions=normal"
  for d in $(seq 5001 5040); do
    echo "table=1,priority=10,udp,nw_dst=198.18.0.4,tp_dst=$d,actions=output:4"
    echo "table=1,priority=10,udp,nw_dst=198.18.0.5,tp_dst=$d,actions=output:5"
  done
} >"$work/flood.flows"
{
  printf '[limits]\nmax_idle_ms = %d\nrevalidator_interval_ms = %d\n' "$max_idle_ms" "$interval_ms"
  if [ -n "$port_flow_limit" ]; then
    printf 'port_flow_limit = %d\n' "$port_flow_limit"
  fi
} >"$work/flood.toml"

# p99 of the `time=` values in a ping output file (ms).
p99() {
  sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p' "$1" | sort -g |
    awk '{a[NR]=$1} END {if (NR == 0) {print "nan"; exit} i = int(NR * 0.99 + 0.999); if (i > NR) i = NR; print a[i]}'
}

one_run() {
  local k=$1 out=$work/run$k
  mkdir -p "$out"
  "$here/lab.sh" start --name "$tag" --vms 5 --dir "$work/lab" --flows "$work/flood.flows" \
    --extra "$work/flood.toml" --eswitchd "$bin/eswitchd" >/dev/null
  local pid
  pid=$(cat "$work/lab/eswitchd.pid")
  # ARP resolved and MACs learned before anything is counted.
  ip netns exec "$tag-vm2" ping -c 2 -i 0.2 -W 1 198.18.0.3 >/dev/null
  ip netns exec "$tag-vm2" ping -c 1 -W 1 198.18.0.5 >/dev/null || true
  ip netns exec "$tag-vm1" ping -c 1 -W 1 198.18.0.4 >/dev/null || true
  sleep 0.5
  local pre=4 post=2
  local stream_s=$((pre + flood_s + post))
  local r5a
  r5a=$(rx_vm 5)
  # The stream, established (offloaded) before the flood.
  ip netns exec "$tag-vm2" "$bin/esw-pktgen" --iface eth0 --src-mac "$(mac 2)" --dst-mac "$(mac 5)" \
    --src-ip 198.18.0.2 --dst-ip 198.18.0.5 --rate "$stream_rate" --seconds "$stream_s" --json \
    >"$out/stream.json" &
  local stream_pid=$!
  pids+=("$stream_pid")
  sleep 1
  # Baseline RTTs and memory.
  ip netns exec "$tag-vm2" ping -i 0.01 -c 250 -W 1 198.18.0.3 >"$out/ping_before.txt" || true
  local rss0
  rss0=$(rss_kb "$pid")
  # The flood.
  ip netns exec "$tag-vm1" "$bin/esw-pktgen" --iface eth0 --src-mac "$(mac 1)" --dst-mac "$(mac 4)" \
    --src-ip 198.18.0.1 --dst-ip 198.18.0.4 --flows 1000000 --rate "$flood_rate" \
    --seconds "$flood_s" --json >"$out/flood.json" &
  local flood_pid=$!
  pids+=("$flood_pid")
  sleep 1
  ip netns exec "$tag-vm2" ping -i 0.01 -c $(((flood_s - 2) * 100)) -W 1 198.18.0.3 \
    >"$out/ping_during.txt" &
  local ping_pid=$!
  pids+=("$ping_pid")
  # The victim's new flows: 500 5-tuples, 3 packets each, over the flood.
  local vic_s=$((flood_s - 2))
  ip netns exec "$tag-vm2" "$bin/esw-pktgen" --iface eth0 --src-mac "$(mac 2)" --dst-mac "$(mac 4)" \
    --src-ip 198.18.0.2 --dst-ip 198.18.0.4 --flows 500 --count 1500 \
    --rate $((1500 / vic_s + 1)) --seconds "$vic_s" --json >"$out/victim.json" &
  local vic_pid=$!
  pids+=("$vic_pid")
  # Memory and megaflows through the flood.
  local rss_peak=$rss0 mf_peak=0
  while kill -0 "$flood_pid" 2>/dev/null; do
    local r m
    r=$(rss_kb "$pid")
    [ "$r" -gt "$rss_peak" ] && rss_peak=$r
    m=$(ctl --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["megaflows"])')
    [ "$m" -gt "$mf_peak" ] && mf_peak=$m
    sleep 0.2
  done
  wait "$flood_pid" || true
  wait "$vic_pid" || true
  wait "$ping_pid" || true
  local t1
  t1=$(date +%s.%N)
  local r
  r=$(rss_kb "$pid")
  [ "$r" -gt "$rss_peak" ] && rss_peak=$r
  ctl --json show >"$out/show.json"
  ctl --json stats >"$out/stats.json"
  ctl --json dump-flows >"$out/flows.json"
  wait "$stream_pid" || true
  sleep 0.3
  local r5b
  r5b=$(rx_vm 5)
  # The handler drains what the flood left queued first (a queued miss of
  # a megaflow installed meanwhile refreshes its last use): recovery counts
  # from the drained queue.
  local t_drained drain_s
  for _ in $(seq 1 300); do
    if ctl --json stats | python3 -c 'import json,sys
s = json.load(sys.stdin)
sys.exit(0 if s["upcalls"] >= s["upcalls_queued"] else 1)'; then
      break
    fi
    sleep 0.1
  done
  t_drained=$(date +%s.%N)
  drain_s=$(awk -v a="$t1" -v b="$t_drained" 'BEGIN {printf "%.2f", b - a}')
  # Recovery: until vm1 holds no megaflow, in seconds and in revalidator
  # passes (the passes are what a test can bound: a slow machine runs fewer
  # of them in max-idle, never more). The wall-clock limit only ends the
  # wait if they never go.
  local rec=nan rec_passes=nan limit_s passes0
  t1=$t_drained
  passes0=$(ctl --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["revalidator_passes"])')
  limit_s=$(awk -v i="$max_idle_ms" -v p="$interval_ms" 'BEGIN {print (i + 2 * p) / 1000 + 30}')
  while :; do
    local n now
    n=$(ctl --json show | python3 -c 'import json,sys
print(next((p.get("megaflows", 0) for p in json.load(sys.stdin)["ports"] if p["name"] == "vm1"), 0))')
    now=$(date +%s.%N)
    if [ "$n" = 0 ]; then
      rec=$(awk -v a="$t1" -v b="$now" 'BEGIN {printf "%.2f", b - a}')
      rec_passes=$(ctl --json stats | python3 -c 'import json,sys
print(json.load(sys.stdin)["revalidator_passes"] - int(sys.argv[1]))' "$passes0")
      break
    fi
    if awk -v a="$t1" -v b="$now" -v l="$limit_s" 'BEGIN {exit !(b - a > l)}'; then
      break
    fi
    sleep 0.1
  done
  python3 - "$out" "$r5a" "$r5b" "$rss0" "$rss_peak" "$mf_peak" "$rec" "$(p99 "$out/ping_before.txt")" \
    "$(p99 "$out/ping_during.txt")" "$rec_passes" "$drain_s" <<'EOF'
import json, re, sys
out, r5a, r5b, rss0, rss_peak, mf_peak, rec, p99b, p99d, rec_passes, drain_s = sys.argv[1:]
load = lambda n: json.load(open(f"{out}/{n}"))
stream, flood, victim = load("stream.json"), load("flood.json"), load("victim.json")
show, stats, flows = load("show.json"), load("stats.json"), load("flows.json")["flows"]
sent = stream["sent"]
got = int(r5b) - int(r5a)
loss = max(0, sent - got) / sent * 100 if sent else float("nan")
# vm2's new 5-tuples to vm4 that have a megaflow (exact on their source port).
cached, offl = set(), set()
for f in flows:
    m = f["match"]
    if "in_port=2," in m + "," and "nw_dst=198.18.0.4" in m:
        sp = re.search(r"tp_src=(\d+)", m)
        if sp:
            cached.add(sp.group(1))
            if f["offloaded"] == "yes":
                offl.add(sp.group(1))
vic_flows = min(500, victim["sent"])
ports = {p["name"]: p for p in show["ports"]}
a = ports.get("vm1", {})
print(f"flood: sent {flood['sent']} new-flow packets at {flood['pps']:.0f}/s; stream {sent} at {stream['pps']:.0f}/s")
print(f"flood: established_loss_pct {loss:.4f}")
ratio = float(p99d) / float(p99b) if p99b not in ("nan", "0") else float("nan")
print(f"flood: rtt_p99_before_ms {p99b}")
print(f"flood: rtt_p99_during_ms {p99d}")
print(f"flood: rtt_p99_ratio {ratio:.2f}")
print(f"flood: rss_before_mb {int(rss0) / 1024:.1f}")
print(f"flood: rss_growth_mb {(int(rss_peak) - int(rss0)) / 1024:.1f}")
print(f"flood: victim_new_flows_cached_pct {len(cached) / vic_flows * 100 if vic_flows else float('nan'):.2f}")
print(f"flood: victim_new_flows_offloaded_pct {len(offl) / vic_flows * 100 if vic_flows else float('nan'):.2f}")
print(f"flood: flood_sent {flood['sent']}")
print(f"flood: attacker_rx {a.get('rx_packets', 0)}")
print(f"flood: attacker_upcalls_admitted {a.get('upcalls', 0)}")
print(f"flood: attacker_upcalls_dropped {a.get('upcall_drops', 0)}")
print(f"flood: attacker_megaflows_end {a.get('megaflows', 0)}")
print(f"flood: megaflows_peak {mf_peak}")
print(f"flood: port_flow_limit {stats.get('port_flow_limit', 0)}")
print(f"flood: port_limit_hits {stats.get('port_limit_hits', 0)}")
print(f"flood: evicted_fair {stats.get('evicted_fair', 0)}")
print(f"flood: recovery_s {rec}")
print(f"flood: recovery_passes {rec_passes}")
print(f"flood: queue_drain_s {drain_s}")
EOF
  "$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null 2>&1 || true
  pids=()
}

for k in $(seq 1 "$runs"); do
  one_run "$k" | tee "$work/result$k"
done
med() { cat "$work"/result* | awk -v k="$1" '$1 == "flood:" && $2 == k {print $3}' | median; }
echo "bench: reliability.flood_established_loss_pct $(med established_loss_pct) %"
echo "bench: reliability.flood_rtt_p99_ratio $(med rtt_p99_ratio) ratio"
echo "bench: reliability.flood_rss_growth_mb $(med rss_growth_mb) MB"
echo "bench: reliability.flood_victim_new_flows_cached_pct $(med victim_new_flows_cached_pct) %"
echo "bench: reliability.flood_recovery_s $(med recovery_s) s"

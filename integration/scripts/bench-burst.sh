#!/usr/bin/env bash
# A burst of new flows from one VM, live in the lab (root). Prints:
#
#   slowpath.burst_lossfree_setup_per_s   the highest offered rate at which a
#                                         burst of --flows new 5-tuples (one
#                                         packet each, each its own megaflow
#                                         under --rules rules) all became
#                                         megaflows and were all delivered
#
# with the daemon's default upcall admission (rate limit, queue, per-port
# fair share: a lone busy port may use the queue, fairness is for
# contention). The median over --runs runs of the rate ladder; each run's
# steps are printed as comments.
#
#   bench-burst.sh [--runs N] [--flows N] [--rules N] [--handlers N] [--port-type T]
#                  [--bin DIR] [--no-build]
#
# Only 198.18.0.0/15 is used; the lab and the daemon go on exit, also on
# failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
flows=9000
rules=40000
port_type=auto
handlers=1
build=1
bin=
while [ $# -gt 0 ]; do
  case "$1" in
  --runs) runs=$2; shift 2 ;;
  --flows) flows=$2; shift 2 ;;
  --rules) rules=$2; shift 2 ;;
  --handlers) handlers=$2; shift 2 ;;
  --port-type) port_type=$2; shift 2 ;;
  --bin) bin=$2; shift 2 ;;
  --no-build) build=; shift ;;
  *) echo "bench-burst.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in "$runs" "$flows" "$rules" "$handlers"; do
  case "$v" in
  '' | *[!0-9]*) echo "bench-burst.sh: '$v' is not a number" >&2; exit 2 ;;
  esac
done
if [ "$flows" -gt "$rules" ] || [ "$rules" -gt 64000 ]; then
  echo "bench-burst.sh: need --flows <= --rules <= 64000 (one rule per UDP source port)" >&2
  exit 2
fi
. "$here/lab-run.sh"
lab_need bench-burst ip ethtool
lab_run bench-burst.sh bb

sink_mac=02:00:00:00:99:99
# One rule per UDP source port from 1024: each packet of a burst matches
# its own rule exactly, so each is a new megaflow.
{
  for p in $(seq 1024 $((1024 + rules - 1))); do
    echo "priority=10,udp,in_port=1,tp_src=$p,actions=output:2"
  done
  echo "priority=5,arp,actions=flood"
} >"$work/burst.flows"
# Flows age out quickly between bursts; admission stays at its defaults.
printf '[limits]\nmax_idle_ms = 300\nrevalidator_interval_ms = 100\n\n[slowpath]\nhandlers = %d\n' \
  "$handlers" >"$work/burst.toml"
mkdir -p "$work/lab"
"$here/lab.sh" start --name "$tag" --vms 2 --dir "$work/lab" --port-type "$port_type" \
  --flows "$work/burst.flows" --extra "$work/burst.toml" --eswitchd "$bin/eswitchd" >/dev/null

bests=()
for run in $(seq 1 "$runs"); do
  best=0
  for rate in 80000 160000 240000 320000 400000 480000 640000 800000; do
    read -r made got pps < <(setup_trial "$flows" "$rate" "$sink_mac")
    echo "# run $run: offered $rate/s (sent at $pps/s): $made of $flows flows created, $got delivered"
    # The sender does not always reach the rate offered: the best is the
    # highest rate it reached in a loss-free step before the first loss.
    if [ "$made" -eq "$flows" ] && [ "$got" -eq "$flows" ]; then
      best=$(awk -v p="$pps" -v b="$best" 'BEGIN {printf "%d", (p > b) ? p : b}')
    else
      break
    fi
  done
  bests+=("$best")
done
drops=$(ctl --json show | python3 -c 'import json,sys
print(sum(p.get("upcall_drops", 0) for p in json.load(sys.stdin)["ports"]))' 2>/dev/null || echo "?")
echo "# upcalls dropped at admission over all runs: $drops"
echo "bench: slowpath.burst_lossfree_setup_per_s $(printf '%s\n' "${bests[@]}" | median) flows/s"

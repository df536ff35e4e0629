#!/usr/bin/env bash
# What sFlow export costs forwarding (root). Prints `bench:` lines:
#
#   sflow.fwd_mpps_off     VM1 -> eswitchd -> VM2, 64-byte UDP, one flow
#                          offloaded in sim, no sFlow
#   sflow.fwd_mpps_on      the same with every port sampled 1 in --rate
#                          (default 1000) and exported to sfcapd
#   sflow.export_overhead  on / off, of the medians (target >= 0.97)
#
#   bench-sflow.sh [--runs N] [--seconds S] [--rate N] [--bin DIR] [--no-build]
#
# Runs alternate off and on (--runs of each, default 5, of --seconds each,
# default 3), each on a lab started afresh, so drift on this shared machine
# hits both alike. In the "on" runs sfcapd listens in the switch namespace;
# what it stored is counted with nfdump (`# sfcapd stored N samples`).
# Only 198.18.0.0/15 is used; the lab and sfcapd are removed on exit, also
# on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=5
secs=3
rate=1000
build=1
while [ $# -gt 0 ]; do
  case "$1" in
  --runs) runs=$2; shift 2 ;;
  --seconds) secs=$2; shift 2 ;;
  --rate) rate=$2; shift 2 ;;
  --bin) bin=$2; shift 2 ;;
  --no-build) build=; shift ;;
  *) echo "bench-sflow.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
. "$here/lab-run.sh"
lab_need bench-sflow.sh sfcapd nfdump
lab_run bench-sflow.sh bs

sink_mac=02:00:00:00:99:99
mkdir -p "$work/lab"
printf 'priority=10,in_port=1,actions=output:2\npriority=10,in_port=2,actions=output:1\n' >"$work/fwd.flows"
printf '[sflow]\ncollectors = ["127.0.0.1:6343"]\nagent = "198.18.0.254"\nsampling_rate = %s\n' \
  "$rate" >"$work/on.toml"
: >"$work/off.toml"

# one MODE: one run's Mpps on a fresh lab (MODE off or on).
one() {
  local mode=$1 collector=
  "$here/lab.sh" start --name "$tag" --vms 2 --dir "$work/lab" \
    --flows "$work/fwd.flows" --extra "$work/$mode.toml" \
    --eswitchd "$bin/eswitchd" >/dev/null
  if [ "$mode" = on ]; then
    mkdir -p "$work/sfcapd"
    ip netns exec "$tag-sw" sfcapd -b 127.0.0.1 -p 6343 -t 3600 -w "$work/sfcapd" >/dev/null 2>&1 &
    collector=$!
    pids+=("$collector")
  fi
  # Warm up: the flow turns hot and is offloaded.
  ip netns exec "$tag-vm1" "$bin/esw-pktgen" --iface eth0 --dst-mac "$sink_mac" --rate 1000 \
    --seconds 0.5 >/dev/null
  sleep 0.6
  blast "$tag-vm1" eth0 "$tag-vm2" eth0 "$sink_mac" "$secs" >>"$work/$mode"
  if [ "$mode" = on ]; then
    local c
    c=$(ctl --json stats | awk -F'[:,]' '/"hw_samples"/ {gsub(/ /, "", $2); print $2}')
    echo "$c" >>"$work/hw_samples"
  fi
  "$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null
  if [ -n "$collector" ]; then
    kill -TERM "$collector" 2>/dev/null || true
    wait "$collector" 2>/dev/null || true
  fi
}

for _ in $(seq 1 "$runs"); do
  one off
  one on
done
off=$(median <"$work/off")
on=$(median <"$work/on")
echo "# off runs: $(tr '\n' ' ' <"$work/off")Mpps; on runs: $(tr '\n' ' ' <"$work/on")Mpps"
stored=0
for f in "$work"/sfcapd/nfcapd.*; do
  [ -e "$f" ] || continue
  case "$f" in *current*) continue ;; esac
  n=$(nfdump -q -N -o 'fmt:%in' -r "$f" | grep -c . || true)
  stored=$((stored + n))
done
echo "# the sampler took $(awk '{s += $1} END {print s + 0}' "$work/hw_samples") copies in the on runs; sfcapd stored $stored samples"
echo "bench: sflow.fwd_mpps_off $off Mpps"
echo "bench: sflow.fwd_mpps_on $on Mpps"
awk -v a="$on" -v b="$off" 'BEGIN {printf "bench: sflow.export_overhead %.3f ratio\n", (b > 0) ? a / b : 0}'

#!/usr/bin/env bash
# Live datapath benchmarks on veth pairs (root). Prints `bench:` lines:
#
#   datapath.raw_veth_mpps     esw-pktgen between two namespaces over a plain veth pair
#   datapath.fwd_mpps          VM1 -> eswitchd -> VM2, 64-byte UDP, one flow, offloaded in sim
#   datapath.fwd_vs_raw        the ratio of the two medians (target >= 0.8)
#   datapath.flow_setup_per_s  highest offered rate of new 5-tuples (each packet a new flow,
#                              a table keyed on L4 ports) at which every flow became a
#                              megaflow and every packet was delivered
#
# Each rate is the median of --runs runs (default 3) of --seconds (default 3).
#   bench-veth.sh [--runs N] [--seconds S] [--port-type auto|af_xdp|af_packet] [--no-build]
# Counting is at the receiving VM's eth0 (rx_packets). Only 198.18.0.0/15 is used;
# namespaces and the daemon are removed on exit, also on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
secs=3
port_type=auto
build=1
while [ $# -gt 0 ]; do
  case "$1" in
  --runs) runs=$2; shift 2 ;;
  --seconds) secs=$2; shift 2 ;;
  --port-type) port_type=$2; shift 2 ;;
  --no-build) build=; shift ;;
  *) echo "bench-veth.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "SKIP bench-veth: needs root (network namespaces)"
  exit 0
fi
if [ -n "$build" ]; then
  (cd "$root" && cargo build --release -q -p cli --bin eswitchd --bin eswitchctl &&
    cargo build --release -q -p integration --bin esw-pktgen)
fi
bin=$root/target/release
# rx, median, blast.
. "$here/lab-run.sh"
tag="bv$$"
work=$(mktemp -d /tmp/eswitch-bench.XXXXXX)

cleanup() {
  "$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null 2>&1 || true
  "$here/lab.sh" down --name "$tag" >/dev/null 2>&1 || true
  ip netns del "$tag-ra" 2>/dev/null || true
  ip netns del "$tag-rb" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Every run sends to a MAC no interface has: the receiving VM counts each
# frame (rx_packets) and drops it before IP, so the receiver's stack costs the
# same little in every setup, and it sends nothing back.
sink_mac=02:00:00:00:99:99

# --- raw veth ---------------------------------------------------------------
ip netns add "$tag-ra"
ip netns add "$tag-rb"
ip link add "${tag}a" netns "$tag-ra" type veth peer name "${tag}b" netns "$tag-rb"
ip -n "$tag-ra" addr add 198.18.1.1/24 dev "${tag}a"
ip -n "$tag-rb" addr add 198.18.1.2/24 dev "${tag}b"
ip -n "$tag-ra" link set "${tag}a" up
ip -n "$tag-rb" link set "${tag}b" up
raw=$(for _ in $(seq 1 "$runs"); do
  blast "$tag-ra" "${tag}a" "$tag-rb" "${tag}b" "$sink_mac" "$secs" --dst-ip 198.18.1.2 --src-ip 198.18.1.1
done | median)
echo "bench: datapath.raw_veth_mpps $raw Mpps"
ip netns del "$tag-ra"
ip netns del "$tag-rb"

# --- forwarding through eswitchd ---------------------------------------------
mkdir -p "$work/lab"
printf 'priority=10,in_port=1,actions=output:2\npriority=10,in_port=2,actions=output:1\n' >"$work/fwd.flows"
"$here/lab.sh" start --name "$tag" --vms 2 --dir "$work/lab" --port-type "$port_type" \
  --flows "$work/fwd.flows" --eswitchd "$bin/eswitchd" >/dev/null
# Warm up: the flow turns hot and is offloaded.
ip netns exec "$tag-vm1" "$bin/esw-pktgen" --iface eth0 --dst-mac "$sink_mac" --rate 1000 --seconds 0.5 >/dev/null
sleep 0.6
kind=$(ctl --json show | awk -F'"' '/"kind"/ {print $4; exit}')
fwd=$(for _ in $(seq 1 "$runs"); do
  blast "$tag-vm1" eth0 "$tag-vm2" eth0 "$sink_mac" "$secs"
done | median)
hw=$(lab_stat hw_handled)
all=$(lab_stat packets)
echo "bench: datapath.fwd_mpps $fwd Mpps"
awk -v f="$fwd" -v r="$raw" 'BEGIN {printf "bench: datapath.fwd_vs_raw %.2f ratio\n", (r > 0) ? f / r : 0}'
echo "# ports: $kind; the sim eSwitch handled $hw of $all received packets"
"$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null

# --- flow setup ------------------------------------------------------------------
# One rule per UDP source port used: each packet matches one exactly, so its
# megaflow keeps the whole port (and, with 32768 source ports, each packet of a
# trial is a new flow). Flows age out between trials.
nflows=32768
{
  for p in $(seq 1024 $((1024 + nflows - 1))); do
    echo "priority=10,udp,in_port=1,tp_src=$p,actions=output:2"
  done
  echo "priority=5,arp,actions=flood"
} >"$work/setup.flows"
printf '[limits]\nflow_limit = 400000\nmax_idle_ms = 300\nrevalidator_interval_ms = 100\nupcall_rate = 0\nupcall_queue = 65536\n' >"$work/setup.toml"
"$here/lab.sh" start --name "$tag" --vms 2 --dir "$work/lab" --port-type "$port_type" \
  --flows "$work/setup.flows" --extra "$work/setup.toml" --eswitchd "$bin/eswitchd" >/dev/null
best=0
for rate in 50000 100000 150000 200000 250000 300000 400000 500000; do
  read -r made got pps < <(setup_trial "$nflows" "$rate" "$sink_mac")
  echo "# offered $rate/s (sent at $pps/s): $made of $nflows flows created, $got delivered"
  if [ "$made" -eq "$nflows" ] && [ "$got" -eq "$nflows" ]; then
    best=$(awk -v p="$pps" 'BEGIN {printf "%d", p}')
  else
    break
  fi
done
echo "bench: datapath.flow_setup_per_s $best flows/s"

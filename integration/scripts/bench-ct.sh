#!/usr/bin/env bash
# Established connections through ct() against plain forwarding, live and
# in software, through eswitchd and through a private Open vSwitch 3.1
# (Debian's, userspace datapath) on the same veths in the same run (root).
# Prints `bench:` lines, medians of --runs runs (default 3) of --seconds
# (default 3) each, counted at the receiving VM's eth0 (rx_packets):
#
#   ct.live_plain_mpps       vm1 -> vm2, `in_port=1 -> output:2`, eswitchd
#   ct.live_est_mpps         the same packets, connections established
#                            (their replies seen), through the conntrack
#                            tutorial firewall (`ct(table=1)`, then `+est`)
#   ct.live_est_vs_plain     the second over the first
#   ct.live_*_ovs            the same through Open vSwitch
#
# eswitchd runs with `[offload] mode = "off"` (every packet in its
# software datapath, on the sim backend), ports of --port-type (default
# af_packet, as Open vSwitch's userspace datapath reads veths);
# Open vSwitch with `datapath_type=netdev`. --conns UDP connections (default
# 1000), opened from vm1 and answered from vm2 before the timed runs.
#   bench-ct.sh [--runs N] [--seconds S] [--conns N] [--port-type T] [--no-build] [--no-ovs]
# Only 198.18.0.0/15 is used; namespaces and daemons go on exit, also on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
secs=3
conns=1000
port_type=af_packet
build=1
ovs=1
while [ $# -gt 0 ]; do
  case "$1" in
  --runs) runs=$2; shift 2 ;;
  --seconds) secs=$2; shift 2 ;;
  --conns) conns=$2; shift 2 ;;
  --port-type) port_type=$2; shift 2 ;;
  --no-build) build=; shift ;;
  --no-ovs) ovs=; shift ;;
  *) echo "bench-ct.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
. "$here/lab-run.sh"
lab_need bench-ct
if [ -n "$ovs" ]; then
  for t in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl; do
    if ! command -v "$t" >/dev/null 2>&1; then
      echo "# $t is not installed: no Open vSwitch figures (apt-get install openvswitch-switch)"
      ovs=
      break
    fi
  done
fi
lab_run bench-ct.sh bc

sink_mac=02:00:00:00:99:99
printf 'priority=50,ip,in_port=1,actions=output:2\npriority=50,ip,in_port=2,actions=output:1\n' \
  >"$work/plain.flows"
cat >"$work/ct.flows" <<'EOF'
table=0,priority=50,ct_state=-trk,ip,actions=ct(table=1,zone=7)
table=1,priority=50,ct_state=+trk+new,ip,in_port=1,actions=ct(commit,zone=7),output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=1,actions=output:2
table=1,priority=50,ct_state=+trk+est,ip,in_port=2,actions=output:1
table=1,priority=40,ct_state=+trk,ip,actions=drop
EOF
printf '[offload]\nmode = "off"\n' >"$work/off.toml"

# Opens the connections: one packet of each from vm1, then one answer
# of each from vm2, slowly enough that no upcall is dropped.
open_conns() {
  ip netns exec "$tag-vm1" "$bin/esw-pktgen" --iface eth0 --dst-mac "$sink_mac" \
    --flows "$conns" --count "$conns" --rate 20000 --seconds 30 >/dev/null
  sleep 0.3
  ip netns exec "$tag-vm2" "$bin/esw-pktgen" --iface eth0 --dst-mac "$sink_mac" \
    --src-mac 02:00:00:00:00:02 --src-ip 198.18.0.2 --dst-ip 198.18.0.1 --reverse \
    --flows "$conns" --count "$conns" --rate 20000 --seconds 30 >/dev/null
  sleep 0.3
}

# Each run's Mpps vm1 -> vm2 over the --conns flows, one a line.
runs_of() {
  for _ in $(seq 1 "$runs"); do
    blast "$tag-vm1" eth0 "$tag-vm2" eth0 "$sink_mac" "$secs" --flows "$conns"
  done
}

# The packets the table-1 rule for state STATE (`est`, `new`) from port 1
# counted, in an ovs-ofctl-style dump on stdin.
rule_packets() {
  awk -v st="$1" '/table=1/ && /in_port=1/ && ($0 ~ "ct_state=[+]" st "[+]trk" || $0 ~ "ct_state=[+]trk[+]" st) {
    if (match($0, /n_packets=[0-9]+/)) print substr($0, RSTART + 10, RLENGTH - 10); exit }'
}

# Checks that the timed packets were established ones: the `+est` rule
# counted them, not the `+new` one (which would forward them too).
check_est() {
  local who=$1 dump=$2 est new
  est=$(rule_packets est <<<"$dump")
  new=$(rule_packets new <<<"$dump")
  echo "# $who: table 1 from port 1 counted ${est:-0} established packets, ${new:-0} new"
  if [ "${est:-0}" -lt $((10 * conns)) ] || [ "${new:-0}" -gt $((2 * conns)) ]; then
    echo "bench-ct.sh: $who: the timed packets were not those of established connections" >&2
    exit 1
  fi
}

# --- eswitchd ---------------------------------------------------------------
declare -A esw
for t in plain ct; do
  "$here/lab.sh" start --name "$tag" --vms 2 --dir "$work/lab" --port-type "$port_type" \
    --flows "$work/$t.flows" --extra "$work/off.toml" --eswitchd "$bin/eswitchd" >/dev/null
  [ "$t" = ct ] && open_conns
  esw[$t]=$(runs_of | tr '\n' ' ')
  if [ "$t" = ct ]; then
    check_est eswitchd "$(ctl dump-of)"
    ctl dp-stats | sed 's/^/# /'
  fi
  "$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null
done

# --- Open vSwitch --------------------------------------------------------------
declare -A ovsr
if [ -n "$ovs" ]; then
  od=$work/ovs
  mkdir -p "$od"
  export OVS_RUNDIR=$od OVS_DBDIR=$od OVS_LOGDIR=$od OVS_SYSCONFDIR=$od
  vsctl() { ovs-vsctl --db="unix:$od/db.sock" --timeout=20 "$@"; }
  ofctl() { ovs-ofctl --timeout=20 -O OpenFlow13 "$@"; }
  for t in plain ct; do
    "$here/lab.sh" up --name "$tag" --vms 2 --dir "$work/lab" >/dev/null
    rm -f "$od"/*
    ovsdb-tool create "$od/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$od/conf.db" --remote="punix:$od/db.sock" --unixctl="$od/ovsdb.ctl" \
      --log-file="$od/ovsdb.log" -vconsole:off &
    pids+=($!)
    for _ in $(seq 1 100); do [ -S "$od/db.sock" ] && break; sleep 0.05; done
    vsctl --no-wait init
    ip netns exec "$tag-sw" ovs-vswitchd "unix:$od/db.sock" --disable-system \
      --unixctl="$od/vswitchd.ctl" --log-file="$od/vswitchd.log" -vconsole:off &
    pids+=($!)
    vsctl add-br br0 -- set bridge br0 datapath_type=netdev fail_mode=secure \
      -- add-port br0 vm1 -- set interface vm1 ofport_request=1 \
      -- add-port br0 vm2 -- set interface vm2 ofport_request=2
    ofctl add-flows "unix:$od/br0.mgmt" "$work/$t.flows"
    [ "$t" = ct ] && open_conns
    ovsr[$t]=$(runs_of | tr '\n' ' ')
    if [ "$t" = ct ]; then
      check_est "Open vSwitch" "$(ofctl --no-names dump-flows "unix:$od/br0.mgmt")"
      echo "# Open vSwitch: $(ovs-appctl -t "$od/vswitchd.ctl" dpctl/dump-conntrack | grep -c 'zone=7') connections in zone 7"
    fi
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    "$here/lab.sh" down --name "$tag" >/dev/null
  done
fi

# The figures: the medians of each side and their ratio.
report() {
  local suffix=$1 pm em
  pm=$(tr ' ' '\n' <<<"$2" | grep . | median)
  em=$(tr ' ' '\n' <<<"$3" | grep . | median)
  echo "bench: ct.live_plain_mpps$suffix $pm Mpps"
  echo "bench: ct.live_est_mpps$suffix $em Mpps"
  awk -v e="$em" -v p="$pm" -v s="$suffix" \
    'BEGIN {printf "bench: ct.live_est_vs_plain%s %.3f ratio\n", s, (p > 0) ? e / p : 0}'
}
echo "# runs (Mpps): eswitchd plain ${esw[plain]}/ est ${esw[ct]}"
report "" "${esw[plain]}" "${esw[ct]}"
if [ -n "$ovs" ]; then
  echo "# runs (Mpps): Open vSwitch plain ${ovsr[plain]}/ est ${ovsr[ct]}"
  report "_ovs" "${ovsr[plain]}" "${ovsr[ct]}"
fi

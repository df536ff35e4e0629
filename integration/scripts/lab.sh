#!/usr/bin/env bash
# A live eswitch lab on one host: N network namespaces stand for VMs, each
# joined by a veth pair to a "switch" namespace where the other ends stand
# for the VF representors that eswitchd serves.
#
#   lab.sh up    [--name TAG] [--vms N] [--dir DIR] [--port-type T] [--flows FILE]
#                [--extra TOML]   (TOML tables appended to the config, e.g. [limits])
#                [--uplink] [--internal]   (an uplink port and an internal port too)
#   lab.sh start [same options]   up, then eswitchd in the switch namespace
#   lab.sh stop  [--name TAG] [--dir DIR]   SIGTERM eswitchd (by PID), then down
#   lab.sh down  [--name TAG]     delete the namespaces (and so the veths)
#   lab.sh env   [--name TAG] [--dir DIR]   print the commands to use the lab
#
# Namespaces: TAG-sw (eswitchd, netdevs vm1..vmN) and TAG-vm1..TAG-vmN (eth0,
# 198.18.0.K/16, MAC 02:00:00:00:00:KK). --uplink adds the port "wire0"
# (type uplink, ofport 100) whose peer is eth0 of TAG-wire, a host on the
# wire (198.18.1.1/16, MAC 02:00:00:00:ff:01). --internal adds the port
# "host0" (type internal, ofport 200) whose peer "host0h" stays in TAG-sw as
# the host's own interface (198.18.2.1/16, MAC 02:00:00:00:fe:01). DIR (default /tmp/eswitch-TAG)
# gets eswitch.toml, eswitchd.sock, eswitchd.pid and eswitchd.log. Only
# addresses from 198.18.0.0/15 (the benchmarking range) are used.
set -euo pipefail

cmd=${1:-}
[ $# -gt 0 ] && shift
name=lab
vms=3
dir=
port_type=auto
flows=
extra=
uplink=0
internal=0
eswitchd=${ESWITCHD:-}
while [ $# -gt 0 ]; do
  case "$1" in
  --name) name=$2; shift 2 ;;
  --vms) vms=$2; shift 2 ;;
  --dir) dir=$2; shift 2 ;;
  --port-type) port_type=$2; shift 2 ;;
  --flows) flows=$2; shift 2 ;;
  --extra) extra=$2; shift 2 ;;
  --uplink) uplink=1; shift ;;
  --internal) internal=1; shift ;;
  --eswitchd) eswitchd=$2; shift 2 ;;
  *) echo "lab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
dir=${dir:-/tmp/eswitch-$name}
case "$vms" in
'' | *[!0-9]*) echo "lab.sh: --vms '$vms' is not a number" >&2; exit 2 ;;
esac
if [ "$vms" -lt 1 ] || [ "$vms" -gt 200 ]; then
  echo "lab.sh: --vms $vms: expected 1..200" >&2
  exit 2
fi
if [ ${#name} -gt 10 ]; then
  echo "lab.sh: --name '$name' is longer than 10 characters" >&2
  exit 2
fi
sw="$name-sw"

need_tools() {
  for t in ip ethtool; do
    if ! command -v "$t" >/dev/null 2>&1; then
      echo "lab.sh: $t is not installed (apt-get install iproute2 ethtool)" >&2
      exit 1
    fi
  done
}

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "lab.sh: needs root (network namespaces)" >&2
    exit 1
  fi
}

up() {
  need_root
  need_tools
  if ip netns list | grep -qw "^$sw"; then
    echo "lab.sh: lab '$name' exists; 'lab.sh down --name $name' first" >&2
    exit 1
  fi
  mkdir -p "$dir"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  local cfg="$dir/eswitch.toml"
  {
    echo "# written by lab.sh for lab '$name'"
    if [ -n "$flows" ]; then
      echo "flows = \"$(realpath "$flows")\""
    fi
    echo
    echo "[datapath]"
    echo "port_type = \"$port_type\""
    echo "control_socket = \"$dir/eswitchd.sock\""
    if [ -n "$extra" ]; then
      echo
      cat "$extra"
    fi
  } >"$cfg"
  for k in $(seq 1 "$vms"); do
    local vm="$name-vm$k" mac
    mac=$(printf '02:00:00:00:%02x:%02x' $((k / 256)) $((k % 256)))
    ip netns add "$vm"
    ip -n "$vm" link set lo up
    ip link add "vm$k" netns "$sw" type veth peer name eth0 netns "$vm"
    ip -n "$vm" link set eth0 address "$mac"
    ip -n "$vm" addr add "198.18.$((k / 256)).$((k % 256))/16" dev eth0
    # A VF's checksums are complete when its frames reach the eSwitch (the
    # NIC computes them); a veth leaves them to the receiver unless
    # transmit checksum offload is off.
    ip netns exec "$vm" ethtool -K eth0 tx off >/dev/null
    ip netns exec "$vm" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
    ip -n "$vm" link set eth0 up
    # The representor end: no address, no IPv6 chatter of its own.
    ip netns exec "$sw" sysctl -qw "net.ipv6.conf.vm$k.disable_ipv6=1"
    ip -n "$sw" link set "vm$k" up
    {
      echo
      echo "[[port]]"
      echo "name = \"vm$k\""
      echo "ofport = $k"
      echo "vport = \"vf$((k - 1))\""
    } >>"$cfg"
  done
  if [ "$uplink" = 1 ]; then
    # The wire: a host beyond the uplink.
    local wire="$name-wire"
    ip netns add "$wire"
    ip -n "$wire" link set lo up
    ip link add wire0 netns "$sw" type veth peer name eth0 netns "$wire"
    ip -n "$wire" link set eth0 address 02:00:00:00:ff:01
    ip -n "$wire" addr add 198.18.1.1/16 dev eth0
    ip netns exec "$wire" ethtool -K eth0 tx off >/dev/null
    ip netns exec "$wire" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
    ip -n "$wire" link set eth0 up
    ip netns exec "$sw" sysctl -qw net.ipv6.conf.wire0.disable_ipv6=1
    ip -n "$sw" link set wire0 up
    printf '\n[[port]]\nname = "wire0"\nofport = 100\ntype = "uplink"\n' >>"$cfg"
  fi
  if [ "$internal" = 1 ]; then
    # The host's own interface: host0 is the switch's end, host0h the
    # host stack's (in the switch namespace, which stands for the host).
    ip -n "$sw" link add host0 type veth peer name host0h
    ip -n "$sw" link set host0h address 02:00:00:00:fe:01
    ip -n "$sw" addr add 198.18.2.1/16 dev host0h
    ip netns exec "$sw" ethtool -K host0h tx off >/dev/null
    ip netns exec "$sw" sysctl -qw net.ipv6.conf.host0h.disable_ipv6=1
    ip netns exec "$sw" sysctl -qw net.ipv6.conf.host0.disable_ipv6=1
    ip -n "$sw" link set host0h up
    ip -n "$sw" link set host0 up
    printf '\n[[port]]\nname = "host0"\nofport = 200\ntype = "internal"\n' >>"$cfg"
  fi
  echo "lab '$name': $vms VMs$([ "$uplink" = 1 ] && echo ", uplink wire0")$([ "$internal" = 1 ] && echo ", internal host0"), config $cfg"
}

down() {
  need_root
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-(sw|wire|vm[0-9]+)$" || true); do
    ip netns del "$ns"
  done
}

start() {
  up
  if [ -z "$eswitchd" ]; then
    eswitchd=$(cd "$(dirname "$0")/../.." && pwd)/target/release/eswitchd
  fi
  if [ ! -x "$eswitchd" ]; then
    echo "lab.sh: $eswitchd not built (cargo build --release -p cli)" >&2
    down
    exit 1
  fi
  RUST_LOG=${RUST_LOG:-info} ip netns exec "$sw" "$eswitchd" run --config "$dir/eswitch.toml" \
    >"$dir/eswitchd.log" 2>&1 &
  echo $! >"$dir/eswitchd.pid"
  for _ in $(seq 1 100); do
    [ -S "$dir/eswitchd.sock" ] && break
    if ! kill -0 "$(cat "$dir/eswitchd.pid")" 2>/dev/null; then
      echo "lab.sh: eswitchd exited:" >&2
      cat "$dir/eswitchd.log" >&2
      down
      exit 1
    fi
    sleep 0.1
  done
  # Ready when every port is open and its link is up.
  local ctl
  ctl="$(dirname "$eswitchd")/eswitchctl"
  if [ -x "$ctl" ]; then
    for _ in $(seq 1 100); do
      local n
      n=$("$ctl" --socket "$dir/eswitchd.sock" --json show 2>/dev/null | grep -c '"state": "up"' || true)
      [ "$n" = "$((vms + uplink + internal))" ] && break
      sleep 0.1
    done
  fi
  echo "eswitchd running (pid $(cat "$dir/eswitchd.pid"), log $dir/eswitchd.log)"
  lab_env
}

stop() {
  local pidf="$dir/eswitchd.pid"
  if [ -f "$pidf" ]; then
    local pid
    pid=$(cat "$pidf")
    if kill -TERM "$pid" 2>/dev/null; then
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidf"
    tail -n 3 "$dir/eswitchd.log" || true
  fi
  down
}

lab_env() {
  cat <<EOF
try:
  ip netns exec $name-vm1 ping -c 3 198.18.0.2
  eswitchctl --socket $dir/eswitchd.sock show
  eswitchctl --socket $dir/eswitchd.sock dump-flows
  eswitchctl --socket $dir/eswitchd.sock dump-rules
  lab.sh stop --name $name
EOF
}

case "$cmd" in
up) up ;;
down) down ;;
start) start ;;
stop) stop ;;
env) lab_env ;;
*)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac

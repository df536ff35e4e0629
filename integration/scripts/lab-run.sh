# Sourced by the bench scripts that run eswitchd in a lab (flood.sh,
# soak.sh): `lab_need WHAT TOOL...` prints `SKIP WHAT: <reason>` and exits
# 0 without root or one of the tools; `lab_run NAME TAG_PREFIX` builds the release binaries unless
# $build is empty, checks $bin (default target/release) has eswitchd,
# eswitchctl and esw-pktgen, makes $tag (unique, at most 10 characters)
# and $work, and removes the lab, $work and every PID in $pids on exit.
# Then: mac K, ctl ARGS (eswitchctl on the lab's socket), rss_kb PID,
# rx NS IFACE (its rx_packets), median (of numbers on stdin),
# blast NS IFACE PEER_NS PEER_IF DST_MAC SECONDS [esw-pktgen args...]
# (esw-pktgen's Mpps as the peer counted them), lab_stat KEY (a number of
# `eswitchctl stats`), and setup_trial FLOWS RATE DST_MAC (new flows from
# vm1 of lab $tag: prints "MADE DELIVERED PPS").

lab_need() {
  local what=$1 t
  shift
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP $what: needs root (network namespaces)"
    exit 0
  fi
  for t in "$@"; do
    if ! command -v "$t" >/dev/null 2>&1; then
      echo "SKIP $what: $t is not installed"
      exit 0
    fi
  done
}

lab_run() {
  local name=$1 prefix=$2
  if [ -n "${build:-}" ]; then
    (cd "$root" && cargo build --release -q -p cli --bin eswitchd --bin eswitchctl &&
      cargo build --release -q -p integration --bin esw-pktgen)
  fi
  bin=${bin:-$root/target/release}
  local b
  for b in eswitchd eswitchctl esw-pktgen; do
    if [ ! -x "$bin/$b" ]; then
      echo "$name: $bin/$b is not built" >&2
      exit 1
    fi
  done
  tag="$prefix$$"
  tag=${tag:0:10}
  work=$(mktemp -d "/tmp/eswitch-${name%.sh}.XXXXXX")
  pids=()
  trap lab_run_cleanup EXIT
}

lab_run_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$here/lab.sh" stop --name "$tag" --dir "$work/lab" >/dev/null 2>&1 || true
  "$here/lab.sh" down --name "$tag" >/dev/null 2>&1 || true
  rm -rf "$work"
}

mac() { printf '02:00:00:00:00:%02x' "$1"; }
ctl() { "$bin/eswitchctl" --socket "$work/lab/eswitchd.sock" "$@"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

rx() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_packets"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

blast() {
  local ns=$1 ifc=$2 pns=$3 pif=$4 dmac=$5 s=$6
  shift 6
  local a b
  a=$(rx "$pns" "$pif")
  ip netns exec "$ns" "$bin/esw-pktgen" --iface "$ifc" --dst-mac "$dmac" --seconds "$s" "$@" >/dev/null
  sleep 0.2
  b=$(rx "$pns" "$pif")
  awk -v n=$((b - a)) -v s="$s" 'BEGIN {printf "%.3f\n", n / s / 1e6}'
}

# A top-level key only (two spaces in): `packets` is also inside `ct_hw`.
lab_stat() { ctl --json stats | awk -F'[:,]' -v k="  \"$1\"" '$1 == k {gsub(/ /, "", $2); print $2; exit}'; }

# FLOWS new 5-tuples, one packet each, from vm1's eth0 to DST_MAC at RATE
# once the daemon holds no megaflow (at most 10 s of waiting): prints the
# megaflows created, the frames vm2 received and the rate esw-pktgen
# reached.
setup_trial() {
  local flows=$1 rate=$2 dmac=$3 c0 r0 c1 r1 out pps
  for _ in $(seq 1 100); do
    [ "$(lab_stat megaflows)" = 0 ] && break
    sleep 0.1
  done
  c0=$(lab_stat megaflows_created)
  r0=$(rx "$tag-vm2" eth0)
  out=$(ip netns exec "$tag-vm1" "$bin/esw-pktgen" --iface eth0 --dst-mac "$dmac" \
    --flows "$flows" --count "$flows" --rate "$rate" --seconds 30 --json)
  sleep 0.5
  c1=$(lab_stat megaflows_created)
  r1=$(rx "$tag-vm2" eth0)
  pps=$(echo "$out" | sed -n 's/.*"pps":\([0-9.]*\).*/\1/p')
  echo "$((c1 - c0)) $((r1 - r0)) $pps"
}

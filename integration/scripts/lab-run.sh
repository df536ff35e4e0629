# Sourced by the bench scripts that run eswitchd in a lab (flood.sh,
# soak.sh): `lab_need WHAT TOOL...` prints `SKIP WHAT: <reason>` and exits
# 0 without root or one of the tools; `lab_run NAME TAG_PREFIX` builds the release binaries unless
# $build is empty, checks $bin (default target/release) has eswitchd,
# eswitchctl and esw-pktgen, makes $tag (unique, at most 10 characters)
# and $work, and removes the lab, $work and every PID in $pids on exit.
# Then: mac K, ctl ARGS (eswitchctl on the lab's socket), rss_kb PID.

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

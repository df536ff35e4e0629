#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while and reports executions and
# crashes per target.
#
#   fuzz.sh [--seconds S] [--targets a,b,...] [--no-build]
#
# Seeds fuzz/corpus/<target> first (fuzz/seed.py: the demo capture, the
# recorded ovs-ofctl sessions in fuzz/seeds/openflow, the README's flows,
# meters and configs, control requests, a live rtnetlink link dump), then
# runs each target for S seconds (default 60) with libFuzzer on one core.
# Prints per target:
#   fuzz: <target> execs <N> crashes <C> corpus <K>
# and `bench: fuzz.<target>_execs <N> runs`; exits 1 if any target crashed
# (the input is kept in fuzz/artifacts/<target>/). Needs a nightly
# toolchain and cargo-fuzz (`rustup toolchain install nightly; cargo
# install cargo-fuzz`).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=60
targets=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
  --seconds) seconds=$2; shift 2 ;;
  --targets) targets=$2; shift 2 ;;
  --no-build) build=; shift ;;
  *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$seconds" in
'' | *[!0-9]* | 0) echo "fuzz.sh: --seconds '$seconds' is not a positive whole number" >&2; exit 2 ;;
esac
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "SKIP fuzz: no nightly toolchain (rustup toolchain install nightly)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "SKIP fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz)"
  exit 0
fi
cd "$root/fuzz"
all=$(cargo +nightly fuzz list)
targets=${targets:-$(echo "$all" | tr '\n' ',')}
IFS=',' read -r -a list <<<"$targets"
for t in "${list[@]}"; do
  [ -z "$t" ] && continue
  if ! grep -qx "$t" <<<"$all"; then
    echo "fuzz.sh: no target '$t' (targets: $(echo "$all" | tr '\n' ' '))" >&2
    exit 2
  fi
done
if [ -n "$build" ]; then
  cargo +nightly fuzz build -O
fi
python3 "$root/fuzz/seed.py" "$root/fuzz/corpus"
log=$(mktemp /tmp/eswitch-fuzz.XXXXXX)
trap 'rm -f "$log"' EXIT
failed=0
for t in "${list[@]}"; do
  [ -z "$t" ] && continue
  mkdir -p "corpus/$t" "artifacts/$t"
  before=$(find "artifacts/$t" -type f | wc -l)
  rc=0
  # -rss_limit_mb: a target must not need more than 2 GB for one input.
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$seconds" \
    -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -n 1)
  after=$(find "artifacts/$t" -type f | wc -l)
  crashes=$((after - before))
  if [ "$rc" != 0 ] && [ "$crashes" = 0 ]; then
    crashes=1
  fi
  echo "fuzz: $t execs ${execs:-0} crashes $crashes corpus $(find "corpus/$t" -type f | wc -l)"
  echo "bench: fuzz.${t}_execs ${execs:-0} runs"
  if [ "$crashes" != 0 ]; then
    failed=1
    grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -n 20 >&2 || true
  fi
done
exit "$failed"

#!/usr/bin/env bash
# Every test of the workspace, on a fresh Debian machine (the README's test
# command; `make test` runs the same):
#
#   integration/scripts/test.sh [ARGS...]     ARGS go to `cargo test --workspace`
#
# 1. What the tests run (prereq/packages.txt: ip, ethtool, ping, tcpdump,
#    tshark, Open vSwitch, ...) is installed when missing: as root,
#    `apt-get update` once and `apt-get install` under a policy-rc.d that
#    lets no package start a service (openvswitch-switch would start a
#    system OVS). As another user nothing is installed, and the script says
#    which tests will be skipped and why. ESWITCH_NO_INSTALL=1 installs
#    nothing.
#    os-ken (PyPI, pinned) goes into a virtualenv in target/osken-venv.
# 2. `cargo test --workspace` runs with ESWITCH_SKIP_LOG naming a file where
#    each skipped test is written (prereq::skip).
# 3. The skipped tests are listed, and a closing line counts them:
#    `tests: N passed, N failed, N skipped, N not run (hardware)` (passed does not include the
#    skipped ones, which cargo reports as ok).
#
# ESWITCH_NO_SKIP=1 (.ci/run sets it) makes every skip a failure.
# Exit status: cargo's.
set -uo pipefail
cd "$(dirname "$0")/../.."

export PATH="$PATH:/usr/sbin:/sbin"
packages_file=prereq/packages.txt

# Programs (and their packages) that are not installed.
missing_programs=()
missing_packages=()
scan() {
  missing_programs=()
  missing_packages=()
  local prog pkg
  while read -r prog pkg; do
    case "$prog" in '' | '#'*) continue ;; esac
    if ! command -v "$prog" >/dev/null 2>&1; then
      missing_programs+=("$prog")
      case " ${missing_packages[*]} " in
      *" $pkg "*) ;;
      *) missing_packages+=("$pkg") ;;
      esac
    fi
  done <"$packages_file"
}

install_packages() {
  export DEBIAN_FRONTEND=noninteractive
  # Packages must not start services: a policy-rc.d that denies every start,
  # unless the machine has one of its own.
  local policy=/usr/sbin/policy-rc.d own_policy=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  local rc=0
  echo "test.sh: installing ${missing_packages[*]}"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing_packages[@]}" ||
    rc=$?
  if [ -n "$own_policy" ]; then
    rm -f "$policy"
  fi
  return $rc
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo is not installed (the Rust toolchain, e.g. through rustup)" >&2
  exit 1
fi

uid=$(id -u)
# Build dependencies: rdma-core-sys compiles against Debian's rdma-core
# headers and links libmlx5/libibverbs, found by pkg-config. Without them
# nothing builds, so they are installed (as root) or the run stops here.
if ! pkg-config --exists 'libmlx5 >= 1.20' 2>/dev/null; then
  missing_packages=(libibverbs-dev pkg-config)
  if [ "$uid" = 0 ] && [ "${ESWITCH_NO_INSTALL:-}" != 1 ]; then
    install_packages || {
      echo "test.sh: installing libibverbs-dev failed" >&2
      exit 1
    }
  else
    echo "test.sh: the build needs Debian's rdma-core headers: apt-get install libibverbs-dev pkg-config" >&2
    exit 1
  fi
fi
# The tests build the mlx5 backend for real: a missing rdma-core is an error
# here, not the empty fallback a plain `cargo build` accepts.
export ESWITCH_REQUIRE_RDMA_CORE=1
scan
if [ ${#missing_packages[@]} -gt 0 ]; then
  if [ "${ESWITCH_NO_INSTALL:-}" = 1 ]; then
    echo "test.sh: ESWITCH_NO_INSTALL=1: not installing ${missing_packages[*]}"
  elif [ "$uid" = 0 ]; then
    if ! install_packages; then
      echo "test.sh: installing ${missing_packages[*]} failed" >&2
      exit 1
    fi
    scan
    if [ ${#missing_programs[@]} -gt 0 ]; then
      echo "test.sh: still missing after the install: ${missing_programs[*]}" >&2
      exit 1
    fi
  fi
fi
if [ "$uid" != 0 ]; then
  echo "test.sh: not root (uid $uid): nothing is installed, and these tests will print SKIP:"
  echo "  - scenarios on network namespaces and veth pairs (netdev AF_PACKET, xsk AF_XDP"
  echo "    and BPF, offload representor tracking, integration capture walk, cli live"
  echo "    daemon): they need root"
  echo "  - the Open vSwitch reference tests (integration ovs_trace, ovs_width): they need root"
fi
if [ ${#missing_programs[@]} -gt 0 ]; then
  echo "test.sh: tests that run these programs will print SKIP: ${missing_programs[*]}" \
    "(Debian packages: ${missing_packages[*]})"
fi

# os-ken from PyPI, pinned, in a virtualenv under target/ (the OpenFlow
# controller of the os-ken scenario). Python's venv module is Debian's
# python3-venv, installed here as root when missing.
osken_version=4.2.2
osken_venv=${ESWITCH_OSKEN_VENV:-$PWD/target/osken-venv}
osken_ok() {
  [ -x "$osken_venv/bin/python" ] &&
    "$osken_venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("os-ken") != sys.argv[1])' \
      "$osken_version" 2>/dev/null
}
if ! osken_ok && [ "${ESWITCH_NO_INSTALL:-}" != 1 ]; then
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null && [ "$uid" = 0 ]; then
    missing_packages=(python3-venv)
    install_packages || echo "test.sh: installing python3-venv failed" >&2
  fi
  echo "test.sh: installing os-ken $osken_version into $osken_venv"
  rm -rf "$osken_venv"
  if ! { python3 -m venv "$osken_venv" &&
    "$osken_venv/bin/pip" install -q --disable-pip-version-check "os-ken==$osken_version"; }; then
    echo "test.sh: installing os-ken failed: the os-ken scenario will print SKIP" >&2
  fi
fi
export ESWITCH_OSKEN_PYTHON=$osken_venv/bin/python

skiplog=$(mktemp "${TMPDIR:-/tmp}/eswitch-skips.XXXXXX")
output=$(mktemp "${TMPDIR:-/tmp}/eswitch-test.XXXXXX")
trap 'rm -f "$skiplog" "$output"' EXIT

# The fuzz targets (their own workspace under fuzz/) build with the tree,
# on stable without sanitizers: a target that no longer compiles fails the
# test command, not the next fuzz run (integration/scripts/fuzz.sh runs
# them, on nightly). Their checks run on every seed in cargo test
# (cli/tests/fuzz_seeds.rs).
echo "test.sh: building the fuzz targets"
fuzz_rc=0
cargo build --manifest-path fuzz/Cargo.toml --bins --locked || fuzz_rc=$?

ESWITCH_SKIP_LOG=$skiplog cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$output"
rc=${PIPESTATUS[0]}
if [ "$fuzz_rc" != 0 ]; then
  echo "test.sh: the fuzz targets did not build (see above)" >&2
  [ "$rc" != 0 ] || rc=$fuzz_rc
fi

# cargo's per-binary lines: "test result: ok. 4 passed; 0 failed; 1 ignored; ..."
read -r passed failed ignored < <(
  awk '/^test result: /{
         for (i = 1; i <= NF; i++) {
           if ($(i+1) ~ /^passed;?$/) p += $i
           if ($(i+1) ~ /^failed;?$/) f += $i
           if ($(i+1) ~ /^ignored;?$/) g += $i
         }
       } END { print p + 0, f + 0, g + 0 }' "$output"
)
# Lines ending in "\thardware" are tests of hardware no CI machine has
# (prereq::no_hardware): listed apart, never failures.
hwlog=$(grep -P '\thardware$' "$skiplog" || true)
grep -vP '\thardware$' "$skiplog" > "$skiplog.sw" || true
mv "$skiplog.sw" "$skiplog"
skipped=$(cut -f1 "$skiplog" | sort -u | grep -c . || true)
nothw=$(printf '%s' "$hwlog" | cut -f1 | sort -u | grep -c . || true)
echo
if [ "$skipped" -gt 0 ]; then
  echo "skipped tests ($skipped):"
  sort -u "$skiplog" | sed 's/^\([^\t]*\)\t/  SKIP \1: /'
fi
if [ "$nothw" -gt 0 ]; then
  echo "not run: no such hardware here ($nothw):"
  printf '%s\n' "$hwlog" | sort -u | sed 's/\thardware$//; s/^\([^\t]*\)\t/  NOT RUN \1: /'
fi
# Under ESWITCH_NO_SKIP a skip fails its test (counted in failed); otherwise
# cargo counted it as passed.
strict=${ESWITCH_NO_SKIP:-}
if [ -z "$strict" ] || [ "$strict" = 0 ]; then
  passed=$((passed - skipped))
fi
# Cargo counted the hardware tests as passed: they did not run.
passed=$((passed - nothw))
if [ "$ignored" -gt 0 ]; then
  echo "ignored: $ignored (helpers run by other tests, see 'cargo test -- --list --ignored')"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped, $nothw not run (hardware)"
exit "$rc"

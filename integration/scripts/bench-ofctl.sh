#!/usr/bin/env bash
# ovs-ofctl against eswitchd and a private Open vSwitch in the same run
# (root): builds eswitchd (release), then runs `cargo bench -p integration
# --bench ofctl`, which prints
#
#   openflow.add_flows_ovs_ofctl_per_s (and _ovs, _ratio)
#   openflow.dump_flows_ovs_ofctl_ms (and _ovs, openflow.dump_flows_ovs_ofctl_100k_ratio)
#
#   bench-ofctl.sh [FLOWS]     (default 100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -q -p cli --bin eswitchd
OFCTL_FLOWS=${1:-100000} ESWITCHD="$root/target/release/eswitchd" \
  cargo bench -q -p integration --bench ofctl

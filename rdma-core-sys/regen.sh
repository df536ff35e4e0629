#!/usr/bin/env bash
# Regenerates src/bindings/*.rs and csrc/layout.c from the installed rdma-core
# headers (Debian: libibverbs-dev). Needs bindgen-cli 0.70
# (`cargo install bindgen-cli --version 0.70.1`) and libclang-dev.
#
# src/bindings/*.rs: the FFI declarations, with bindgen's compile-time layout
# assertions (the Rust side), split by API (tools/split_bindings.py). csrc/layout.c: the same sizes, alignments and
# offsets as C _Static_asserts, compiled by build.rs against the headers
# installed where the crate is built (the C side): a header whose layout
# drifted from the committed bindings fails the build.
set -euo pipefail
cd "$(dirname "$0")"
cflags=$(pkg-config --cflags libmlx5 libibverbs)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bindgen csrc/wrap.h \
  --output "$out" \
  --rust-target 1.77 \
  --no-prepend-enum-name \
  --no-doc-comments \
  --with-derive-default \
  --allowlist-function 'ibv_(get_device_list|free_device_list|get_device_name|open_device|close_device|alloc_pd|dealloc_pd)' \
  --allowlist-function 'mlx5dv_(is_supported|open_device|query_device|devx_.*|dr_.*|dump_dr_.*|create_flow.*|destroy_flow.*)' \
  --allowlist-function 'ibv_(create_qp|modify_qp|destroy_qp|destroy_cq|reg_mr|dereg_mr)' \
  --allowlist-function 'eswitch_.*' \
  --allowlist-type 'ibv_(cq_init_attr_ex|create_cq_wc_flags|cq_init_attr_mask|create_cq_attr_flags|poll_cq_attr|qp_init_attr|qp_attr|qp_attr_mask|qp_state|qp_type|access_flags|wc_status|wc_opcode|wr_opcode|send_flags)' \
  --allowlist-type 'eswitch_.*' \
  --allowlist-type 'mlx5dv_(dr_.*|flow_.*|context_attr|context_attr_flags|port|query_port_flags)' \
  --allowlist-type 'mlx5_ib_uapi_.*' \
  --allowlist-type 'ibv_flow_(attr|spec.*|flags|attr_type)' \
  --allowlist-var 'MLX5DV_.*' \
  -- $cflags
python3 tools/split_bindings.py "$out" src/bindings
python3 tools/layout_c.py src/bindings > csrc/layout.c

#!/usr/bin/env bash
# Records the real PyTorch mix of real_mix.py under tracer on an NVIDIA machine (root, PyTorch; no Rust
# toolchain needed there) and writes, under $OUT (or ./gpu-results):
#   pytorch-mix.jsonl.zst   the trace (compressed; the copy under fixtures/ is this file)
#   report.txt / report-full.txt / report.json   `tracer report`, with short and with whole names
#
#   bench/gpu/record_real.sh [TRACER_BINARY]      (default: target/release/tracer)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
trace="$out/pytorch-mix.jsonl.zst"
"$tracer" record --force -o "$trace" --lib "$libcuda" -- python3 "$here/real_mix.py"
"$tracer" report "$trace" > "$out/report.txt"
"$tracer" report --full-names "$trace" > "$out/report-full.txt" 2>&1 || true
"$tracer" report --json "$trace" > "$out/report.json"
ls -la "$out"

#!/usr/bin/env bash
# Issue 27's PyTorch check on the GPU machine: workload.py --libraries (cuBLAS GEMMs, a CUDA graph, a cuDNN
# convolution, a user-written Triton kernel) traced by tracer from its start and run under torch.profiler
# (CUPTI): per-kernel executions compared (compare.py), and the ledger (ledger.py): which file holds each
# kernel's code, which mapped libraries were called. Writes under $OUT.
#   bench/gpu/libraries.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
python3 "$here/workload.py" --mode oracle --libraries --out "$out/libraries-oracle.json"
"$tracer" record -q --force -o "$out/libraries.jsonl.zst" -- python3 "$here/workload.py" --mode trace --libraries
"$tracer" report --json "$out/libraries.jsonl.zst" > "$out/libraries.report.json"
"$tracer" report "$out/libraries.jsonl.zst" > "$out/libraries.report.txt" 2>&1 || true
status=0
python3 "$here/compare.py" "$out/libraries.report.json" "$out/libraries-oracle.json" | tail -4 || status=1
python3 "$here/ledger.py" "$out/libraries.report.json"
exit $status

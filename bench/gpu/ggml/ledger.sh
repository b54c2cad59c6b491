#!/usr/bin/env bash
# Issue 27's harness on the GPU machine: which mapped libraries llama.cpp called and dispatched from, and
# each step's passes. llama-bench on the random-weight model (build.sh) with a 513-token prompt (two
# micro-batches at the default n_ubatch 512) and 4 tokens, in Q4_K_M (ggml's own MMQ/MMVQ kernels) and F16
# (large F16 products through cuBLAS), traced by tracer from its start and run under the CUPTI oracle:
# per-kernel executions compared (compare.py), the ledger printed (ledger.py). Writes under $OUT.
#   bench/gpu/ggml/ledger.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
. "$here/cupti.sh"
status=0
for q in q4_k_m f16; do
  args=(-m "$models/$q.gguf" -p 513 -n 4 -r 1)
  "$tracer" record -q --force -o "$out/ledger-$q.jsonl.zst" -- "$bin/llama-bench" "${args[@]}" > "$out/ledger-$q.bench.txt" 2>&1
  CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-ledger-$q.raw.json" \
    "$bin/llama-bench" "${args[@]}" > /dev/null 2>&1
  "$tracer" report --json "$out/ledger-$q.jsonl.zst" > "$out/ledger-$q.report.json"
  "$tracer" report "$out/ledger-$q.jsonl.zst" > "$out/ledger-$q.report.txt" 2>&1 || true
  cupti_demangle "$out/cupti-ledger-$q.raw.json" "$out/cupti-ledger-$q.json"
  echo "== $q: per-kernel executions, tracer vs CUPTI"
  python3 "$here/../compare.py" "$out/ledger-$q.report.json" "$out/cupti-ledger-$q.json" llama-bench | tail -3 || status=1
  echo "== $q: ledger"
  python3 "$here/../ledger.py" "$out/ledger-$q.report.json"
done
exit $status

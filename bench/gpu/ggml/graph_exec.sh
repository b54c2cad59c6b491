#!/usr/bin/env bash
# Issue 28's evidence on real silicon: llama-bench's steady decode loop (-p 0 -n 128 -r 100000: its CUDA
# graph never changes), attached late by tracer for 5 s (every replay unresolved: the capture came before),
# then the graph executables it replayed read from the live process with the chain of
# bench/gpu/graphexec_layout.md (graphexec_read.py), their kernel names compared with a from-start trace of
# the same bench. Writes under $OUT.
#   bench/gpu/ggml/graph_exec.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$tracer" record -q --force -o "$out/graph-start.jsonl.zst" -- "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 128 -r 2 > /dev/null
"$tracer" report --json "$out/graph-start.jsonl.zst" > "$out/graph-start.report.json"
"$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 128 -r 100000 > "$out/graph-late-bench.out" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true' EXIT
sleep 8
"$tracer" record -q --force -o "$out/graph-late.jsonl" --pid "$bench" --duration 5s
"$tracer" report "$out/graph-late.jsonl" > "$out/graph-late.txt" 2>&1 || true
grep -i "replay" "$out/graph-late.txt" | head -5 || true
python3 "$here/../graphexec_read.py" "$bench" "$out/graph-late.jsonl" "$out/graph-start.report.json" | tee "$out/graph-exec.txt"
kill $bench || true

#!/usr/bin/env bash
# Issue 28 on real silicon: llama-bench's steady decode loop (-p 0 -n 128 -r 100000: its CUDA graph never
# changes), attached late by tracer for 5 s: the graph executables it replays were made before the attach,
# so tracer reads their kernels from the driver's objects (tracer/src/names/graph_exec.rs). Prints the
# share of executions named and checks every name against a from-start trace of the same bench
# (named_share.py, exit 1 on a name the program does not have); the chain is also read independently by
# graphexec_read.py. Writes under $OUT.
#   bench/gpu/ggml/graph_exec.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$tracer" record -q --force -o "$out/graph-start.jsonl.zst" -- "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 128 -r 2 > /dev/null
"$tracer" report --json "$out/graph-start.jsonl.zst" > "$out/graph-start.report.json"
"$tracer" report "$out/graph-start.jsonl.zst" > "$out/graph-start.txt" 2>&1 || true
"$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 128 -r 100000 > "$out/graph-late-bench.out" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true' EXIT
sleep 8
grep -m1 'libcuda\.so' "/proc/$bench/maps" || true
"$tracer" record -q --force -o "$out/graph-late.jsonl" --pid "$bench" --duration 5s
"$tracer" report "$out/graph-late.jsonl" > "$out/graph-late.txt" 2>&1 || true
"$tracer" report --json "$out/graph-late.jsonl" > "$out/graph-late.report.json"
echo "== late attach: the report's graph lines"
grep -i -A1 "graph replays\|layout" "$out/graph-late.txt" | head -12 || true
echo "== late attach: share of executions named, names against the from-start trace"
python3 "$here/../named_share.py" "$out/graph-late.report.json" "$out/graph-start.report.json" | tee "$out/graph-late.share.txt"
echo "== from-start: the checks of the layout against captured graphs"
grep -i "layout\|graph replays" "$out/graph-start.txt" | head -6 || true
python3 "$here/../graphexec_read.py" "$bench" "$out/graph-late.jsonl" "$out/graph-start.report.json" > "$out/graph-exec.txt" || true
tail -3 "$out/graph-exec.txt"
kill $bench || true

#!/usr/bin/env bash
# Late attach to llama.cpp on real silicon (issue 12): llama-bench decodes a long run on the Q4_K_M
# model; tracer attaches by PID after it is warm, for a few seconds. Then the same bench traced from its
# start gives the true names. Prints the share of executions named, by source, what stays unnamed by
# library, and graph replays of graphs captured before the attach. Writes under $OUT.
#   bench/gpu/ggml/late_attach.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
"$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 100000 -r 1 > "$out/llama-late-bench.out" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true' EXIT
sleep 5
"$tracer" record --force -o "$out/llama-late.jsonl.zst" --pid "$bench" --duration 5s
kill $bench || true
"$tracer" report "$out/llama-late.jsonl.zst" > "$out/llama-late.txt" 2>&1 || true
"$tracer" report --json "$out/llama-late.jsonl.zst" > "$out/llama-late.report.json"
"$tracer" record -q --force -o "$out/llama-start.jsonl.zst" -- "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 8 -n 16 -r 1 > /dev/null
"$tracer" report --json "$out/llama-start.jsonl.zst" > "$out/llama-start.report.json"
python3 "$here/../named_share.py" "$out/llama-late.report.json" "$out/llama-start.report.json" | tee "$out/llama-late.share.txt"
"$tracer" report --json "$out/llama-late.jsonl.zst" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("counters"))' || true

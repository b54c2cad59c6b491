#!/usr/bin/env bash
# Late attach on real silicon (issue 12): a PyTorch eager generate loop starts first (late_loop.py);
# once it is warm, tracer attaches by PID for a few seconds. Prints the share of kernel executions
# named, by source, and what stays unnamed by the library whose code launched it; then traces the same
# loop from its start (every name seen live) and checks each late name against those. Writes under $OUT:
#   late-pytorch.jsonl.zst, late-pytorch.report.json, late-pytorch.txt, start-pytorch.report.json
#
#   bench/gpu/late_attach.sh [TRACER_BINARY]      (default: target/release/tracer)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
seconds="${SECONDS_TRACED:-8}"
python3 "$here/late_loop.py" > "$out/late-loop.out" 2>&1 &
loop=$!
trap 'kill $loop 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q ready "$out/late-loop.out" 2>/dev/null && break; sleep 0.2; done
grep -q ready "$out/late-loop.out" || { cat "$out/late-loop.out"; exit 1; }
sleep 2
"$tracer" record --force -o "$out/late-pytorch.jsonl.zst" --pid "$loop" --duration "${seconds}s"
"$tracer" report --json "$out/late-pytorch.jsonl.zst" > "$out/late-pytorch.report.json"
"$tracer" report "$out/late-pytorch.jsonl.zst" > "$out/late-pytorch.txt" 2>&1 || true
kill $loop
"$tracer" record -q --force -o "$out/start-pytorch.jsonl.zst" --duration 40s -- timeout 45 python3 "$here/late_loop.py" > /dev/null || true
"$tracer" report --json "$out/start-pytorch.jsonl.zst" > "$out/start-pytorch.report.json"
python3 "$here/named_share.py" "$out/late-pytorch.report.json" "$out/start-pytorch.report.json" |
  tee "$out/late-pytorch.share.txt"
# The footer's counters of the late recording: drops, names learned, what stayed unnamed.
"$tracer" report --json "$out/late-pytorch.jsonl.zst" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("counters"))' || true

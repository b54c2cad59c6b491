#!/usr/bin/env bash
# Issue 28 with PyTorch: a loop replaying one CUDA graph captured with torch.cuda.graphs (graph_loop.py)
# runs first; tracer attaches by PID for 5 s, so the executable was made before the attach and its kernels
# can only come from the driver's objects. Twice: with keep_graph=True (the source graph lives: named) and
# with PyTorch's default (the source graph destroyed after instantiation: said why not). Each late report
# is checked against a from-start trace of the same loop (named_share.py). Writes under $OUT.
#   bench/gpu/graph_late.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
status=0
for mode in keep default; do
  echo "== PyTorch graph loop, $mode"
  python3 "$here/graph_loop.py" "$mode" > "$out/graph-$mode.out" 2>&1 &
  loop=$!
  for _ in $(seq 600); do grep -q ready "$out/graph-$mode.out" 2>/dev/null && break; sleep 0.2; done
  if ! grep -q ready "$out/graph-$mode.out"; then cat "$out/graph-$mode.out"; kill $loop 2>/dev/null || true; status=1; continue; fi
  head -1 "$out/graph-$mode.out"
  grep -m1 'libcuda\.so' "/proc/$loop/maps" || true
  "$tracer" record -q --force -o "$out/graph-$mode-late.jsonl" --pid "$loop" --duration 5s
  kill $loop || true
  "$tracer" report "$out/graph-$mode-late.jsonl" > "$out/graph-$mode-late.txt" 2>&1 || true
  "$tracer" report --json "$out/graph-$mode-late.jsonl" > "$out/graph-$mode-late.report.json"
  "$tracer" record -q --force -o "$out/graph-$mode-start.jsonl" -- python3 "$here/graph_loop.py" "$mode" 3 > /dev/null
  "$tracer" report --json "$out/graph-$mode-start.jsonl" > "$out/graph-$mode-start.report.json"
  "$tracer" report "$out/graph-$mode-start.jsonl" > "$out/graph-$mode-start.txt" 2>&1 || true
  grep -i -A1 "graph replays\|layout" "$out/graph-$mode-late.txt" | head -10 || true
  python3 "$here/named_share.py" "$out/graph-$mode-late.report.json" "$out/graph-$mode-start.report.json" || status=1
  echo "-- from start:"
  grep -i "graph replays\|layout" "$out/graph-$mode-start.txt" | head -4 || true
done
exit $status

#!/usr/bin/env bash
# Tracer's own CPU per decoded token, in the steady decode alone: llama-bench (Q4_K_M, one long decode of
# LONG tokens, default 8192, CUDA graphs off with GRAPHS=off) recorded by tracer, and by the empty programs
# (what any recording costs: its drain and session waking on their timers); tracer's threads' run time
# (/proc/PID/task/*/schedstat, nanoseconds) read at WARM seconds (default 4) into the recording and WINDOW
# seconds (default 8) later, divided by the tokens decoded in between (llama-bench's own tokens/s times the
# window). Unlike decode_cost.sh's long-minus-short runs, tracer's start and stop (a few hundred ms of CPU
# whose spread is tens of µs a token there) are outside the window. ROUNDS (default 3) interleaved rounds;
# with PERF=1 and perf installed, one tracer run is also sampled by perf (its top symbols to
# $OUT/steady-perf.txt). With BASE="PATH ...", each round also records with each of those tracer binaries
# (earlier builds; the mode is the file's name), so that builds are compared on one host. The last tracer
# recording's footer counters on runs go to $OUT/steady-runs.txt. Writes $OUT/steady-cpu.txt.
#   bench/gpu/ggml/steady_cpu.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
long=${LONG:-8192} warm=${WARM:-4} window=${WINDOW:-8}
graphs=
[ "${GRAPHS:-on}" = off ] && graphs=GGML_CUDA_DISABLE_GRAPHS=1
run_time() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
one() {
  local mode=$1 flags=$2 json=/tmp/steady-$1.json binary=${3:-$tracer}
  # shellcheck disable=SC2086 # flags: a list of record options
  "$binary" record -q --force --debug-sync-teardown $flags -o "/tmp/steady-$mode.jsonl.zst" -- \
    env $graphs taskset -c "${BENCH_CPU:-2}" "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n "$long" -r 1 \
    -o json > "$json" &
  local rec=$!
  sleep "$warm"
  local a b
  a=$(run_time $rec)
  if [ "${PERF:-0}" = 1 ] && [ "$mode" = tracer ] && command -v perf > /dev/null; then
    perf record -q -F 999 -p $rec -o /tmp/steady.perf -- sleep "$window" > /dev/null 2>&1 || true
  else
    sleep "$window"
  fi
  b=$(run_time $rec)
  wait $rec
  local ts
  ts=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["avg_ts"])' "$json")
  python3 -c 'import sys; a, b, w, ts = map(float, sys.argv[2:]); print(f"{sys.argv[1]} {(b - a) / 1e3 / (w * ts):.2f} us/token {100 * (b - a) / 1e9 / w:.2f} % of a core {ts:.0f} tokens/s")' \
    "$mode" "$a" "$b" "$window" "$ts"
}
for round in $(seq "${ROUNDS:-3}"); do
  one empty "--probe-mode empty"
  for b in ${BASE:-}; do one "$(basename "$b")" "" "$b"; done
  one tracer ""
done | tee "$out/steady-cpu.txt"
python3 - "$out/steady-cpu.txt" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, us, *_ = line.split()
    v[mode].append(float(us))
for mode, xs in v.items():
    print(f"{mode}: median {statistics.median(xs):.2f} us of tracer's CPU a token in the steady decode (rounds: "
          + ", ".join(f"{x:.2f}" for x in xs) + ")")
PY
if [ -f /tmp/steady.perf ]; then
  perf report -i /tmp/steady.perf --no-children --sort dso,symbol 2> /dev/null | grep -v '^#' | grep . | head -60 \
    > "$out/steady-perf.txt" || true
fi
"$tracer" report --json /tmp/steady-tracer.jsonl.zst | python3 -c '
import json, sys
v = json.load(sys.stdin)
t = v["trace"]
print({k: n for k, n in v.get("counters", {}).items() if "run" in k or k == "tracer_cpu_us"})
print("repeat lines", t.get("repeat_runs"), "launches repeated", t.get("launches_repeated"))
' > "$out/steady-runs.txt" || true

#!/usr/bin/env bash
# Issue 13's harness on the GPU machine: the real llama.cpp (CUDA backend, build.sh) against CUPTI.
# For Q4_K_M and Q8_0: `llama-bench -p 3,8,9,11,290 -n 8 -r 1` traced by tracer from its start, and the same
# bench under the CUPTI injection oracle (cupti_counts.c); per-kernel executions compared by demangled name
# (compare.py, exit 1 on a difference), and the phases against what llama-bench ran (5 prompts x warm-up
# and run = 10 prefill steps; warm-up and 8 tokens = 9 decode steps). Then decode tokens/s with no tracer,
# with empty programs on the same attach points, and with tracer, interleaved. Writes under $OUT.
#   bench/gpu/ggml/run.sh [TRACER_BINARY]        (RECORD_FLAGS: extra flags for the traced runs, e.g. --all-calls;
#   ROUNDS: tokens/s rounds, 0 for none)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
started=$(date +%s)
. "$here/cupti.sh"
status=0
for q in q4_k_m q8_0; do
  args=(-m "$models/$q.gguf" -p 3,8,9,11,290 -n 8 -r 1)
  # shellcheck disable=SC2086 # RECORD_FLAGS: extra record flags, e.g. --all-calls
  "$tracer" record -q --force ${RECORD_FLAGS:-} -o "$out/ggml-$q.jsonl.zst" -- "$bin/llama-bench" "${args[@]}" > "$out/ggml-$q.bench.txt" 2>&1
  CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-$q.raw.json" \
    "$bin/llama-bench" "${args[@]}" > /dev/null 2>&1
  "$tracer" report --json "$out/ggml-$q.jsonl.zst" > "$out/ggml-$q.report.json"
  "$tracer" report "$out/ggml-$q.jsonl.zst" > "$out/ggml-$q.report.txt" 2>&1 || true
  cupti_demangle "$out/cupti-$q.raw.json" "$out/cupti-$q.json"
  echo "== $q: per-kernel executions, tracer vs CUPTI"
  python3 "$here/../compare.py" "$out/ggml-$q.report.json" "$out/cupti-$q.json" | tail -4 || status=1
  echo "== $q: phases (expected, steps cut by llama.cpp's batches: prefill 12 steps of widths 1, 3, 8, 9, 11, 290; decode 7 steps of width 1; by kernel widths alone: prefill 10, decode 9)"
  python3 - "$out/ggml-$q.report.json" <<'PY' || status=1
import json, sys
ok = True
for p in json.load(open(sys.argv[1]))["processes"]:
    phases = {ph["phase"]: ph for ph in p.get("phases", [])}
    for ph in phases.values():
        print(f"  {ph['phase']:<8} steps {ph['steps']:>3}  batch widths {', '.join(ph['batch_widths'])}")
    if not phases:
        continue
    if p.get("mmq_widths"):
        print("  MMQ column counts (ne11): " + ", ".join(f"{n} from the {k}" for k, n in p["mmq_widths"].items()))
    # llama-bench's generation test starts at an empty context: its first token (warm-up and run) is, by its
    # batch, a prompt of one token; the kernel-width rule (no libllama seen) calls it decode.
    if any(ph.get("steps_from_batches") for ph in phases.values()):
        want = {"prefill": (12, ["1", "11", "290", "3", "8", "9"]), "decode": (7, ["1"])}
    else:
        want = {"prefill": (10, ["11", "290", "3", "8", "9"]), "decode": (9, ["1"])}
    for name, (steps, widths) in want.items():
        got = phases.get(name, {})
        if (got.get("steps"), sorted(got.get("batch_widths", []))) != (steps, sorted(widths)):
            ok = False
    print("  phases: " + ("MATCH" if ok else "DIFFER"))
sys.exit(0 if ok else 1)
PY
done
rounds="${ROUNDS:-7}"
if [ "$rounds" = 0 ]; then
  echo "device time for this run: $(( $(date +%s) - started )) s after the build"
  exit $status
fi
echo "== decode tokens/s (llama-bench -p 0 -n 512 -r 10, Q4_K_M), $rounds rounds interleaved, bench pinned to CPU 2"
tg() { "$@" taskset -c 2 "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n 512 -r 10 -o json 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])'; }
for round in $(seq "$rounds"); do
  echo "none   $(tg env)"
  echo "empty  $(tg "$tracer" record -q --force --debug-sync-teardown -o /tmp/empty.jsonl --probe-mode empty --)"
  echo "tracer $(tg "$tracer" record -q --force --debug-sync-teardown -o /tmp/tg.jsonl.zst --)"
done | tee "$out/tokens.txt"
python3 - "$out/tokens.txt" <<'PY'
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, v = line.split()
    by[mode].append(float(v))
m = {k: statistics.median(v) for k, v in by.items()}
line = (f"median tokens/s: none {m['none']:.0f}, empty {m['empty']:.0f}, tracer {m['tracer']:.0f}; "
        f"tracer at {100 * m['tracer'] / m['none']:.1f} % of untraced")
empty_cost, tracer_cost = 1 / m["empty"] - 1 / m["none"], 1 / m["tracer"] - 1 / m["none"]
if empty_cost > 0:
    line += f"; cost {tracer_cost / empty_cost:.2f}x the empty programs'"
else:
    line += "; the empty programs measured no cost here (the run-to-run noise is larger than the traps)"
print(line)
PY
echo "device time for this run: $(( $(date +%s) - started )) s after the build"
exit $status

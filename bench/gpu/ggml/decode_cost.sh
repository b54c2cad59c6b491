#!/usr/bin/env bash
# Issue 13's cost on the real decode loop, measured where the traps land: the kernel time (ru_stime) the
# llama-bench process spends, per generated token, with no tracer, with empty programs on the same attach
# points, and with tracer. A uprobe's trap and its program run in the traced thread's kernel time; the decode
# loop is GPU-bound and spins in user space while it waits, so tokens/s and user time hide sub-percent costs.
# Loading the model costs more kernel time than decoding, so each mode runs a long and a short decode and the
# difference is divided by the tokens between them. Rounds interleaved; medians. Writes $OUT/decode-cost.txt.
#   bench/gpu/ggml/decode_cost.sh [TRACER_BINARY]        (ROUNDS, default 5)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
long=2048 short=64 reps=10
tokens=$(( (long - short) * (reps + 1) ))   # llama-bench runs a warm-up before its repetitions
run() { # MODE N PREFIX...: one llama-bench run of N tokens; prints "MODE N stime_s utime_s tokens_per_s"
  local mode=$1 n=$2; shift 2
  "$@" python3 -c '
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_stime, r.ru_utime, json.loads(p.stdout)[0]["avg_ts"])
' taskset -c 2 "$bin/llama-bench" -m "$models/q4_k_m.gguf" -p 0 -n "$n" -r $reps -o json | sed "s/^/$mode $n /"
}
for round in $(seq "${ROUNDS:-5}"); do
  for n in $long $short; do
    run none $n env
    run empty $n "$tracer" record -q --force -o /tmp/cost-empty.jsonl --probe-mode empty --
    run tracer $n "$tracer" record -q --force -o /tmp/cost-tracer.jsonl.zst --
  done
done | tee "$out/decode-cost.txt"
python3 - "$out/decode-cost.txt" "$tokens" "$long" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, n, st, ut, ts = line.split()
    runs[(mode, n)].append((float(st), float(ut), float(ts)))
tokens, long = int(sys.argv[2]), sys.argv[3]
per_token = {}
for mode in ("none", "empty", "tracer"):
    short = [k for k in runs if k[0] == mode and k[1] != long][0]
    # Round by round: the long run's kernel time minus the short run's, per token between them.
    d = [(a[0] - b[0]) / tokens for a, b in zip(runs[(mode, long)], runs[short])]
    per_token[mode] = statistics.median(d)
    ts = statistics.median(r[2] for r in runs[(mode, long)])
    print(f"{mode:<7} decode kernel time {1e6 * per_token[mode]:6.2f} us/token (rounds: "
          + ", ".join(f"{1e6 * x:.2f}" for x in d) + f"); {ts:.0f} tokens/s")
empty, tracer = per_token["empty"] - per_token["none"], per_token["tracer"] - per_token["none"]
print(f"added kernel time per token: empty programs {1e6 * empty:.2f} us, tracer {1e6 * tracer:.2f} us"
      + (f" ({tracer / empty:.2f}x the empty programs')" if empty > 0 else ""))
PY

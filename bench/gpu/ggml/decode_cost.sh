#!/usr/bin/env bash
# Issue 13's cost on the real decode loop, measured where the traps land: the kernel time (ru_stime) the
# llama-bench process spends, per generated token, with no tracer, with empty programs on the same attach
# points, with tracer (its default probe set), and with `tracer record --all-calls` (every call probed, the
# earlier default). A uprobe's trap and its program run in the traced thread's kernel time; the decode
# loop is GPU-bound and spins in user space while it waits, so tokens/s and user time hide sub-percent costs.
# Loading the model costs more kernel time than decoding, so each mode runs a long and a short decode and the
# difference is divided by the tokens between them. Rounds interleaved; medians. Each tracer releases its
# probes before it exits (--debug-sync-teardown): the next run must not meet them. Writes $OUT/decode-cost.txt.
#   bench/gpu/ggml/decode_cost.sh [TRACER_BINARY]        (ROUNDS, default 5; BENCH_CPU, default 2;
#   LONG (default 2048) and REPS (default 10): the long decode and its repetitions; DEADLINE: epoch seconds by which the rounds must end, each taking ROUND_S (default 90); STATS=0 skips the
#   --program-stats runs (STATS_ROUNDS, default 3, of tracer and the empty programs: the low-noise estimate); GRAPHS=off: ggml's CUDA graphs disabled (GGML_CUDA_DISABLE_GRAPHS=1), every kernel
#   a launch, as in HIP builds without graphs, batched decode and PyTorch eager; BASE_TRACER=PATH: an earlier
#   build recorded too, as mode `base`, in the same rounds; ALL=0 skips the --all-calls runs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
long=${LONG:-2048} short=64 reps=${REPS:-10}
graphs=
[ "${GRAPHS:-on}" = off ] && graphs=GGML_CUDA_DISABLE_GRAPHS=1
echo "GRAPHS=${GRAPHS:-on}" >&2
tokens=$(( (long - short) * reps ))   # llama-bench's generation warm-up is one token, in both runs
# One llama-bench run of N tokens: prints "MODE N BENCH_STIME BENCH_UTIME ALL_STIME ALL_UTIME TOKENS_PER_S".
# The inner python is the recorded command (tracer follows it to llama-bench): its children's rusage is
# llama-bench's alone. The outer one's is everything it waited for: llama-bench, and tracer's own process
# when one runs (its cost lands on other cores, not on the decode loop's).
inner='
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_stime, r.ru_utime, json.loads(p.stdout)[0]["avg_ts"])
'
outer='
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
st, ut, ts = p.stdout.split()[-3:]
print(st, ut, r.ru_stime, r.ru_utime, ts)
'
run() {
  local mode=$1 n=$2; shift 2
  python3 -c "$outer" "$@" python3 -c "$inner" env $graphs taskset -c "${BENCH_CPU:-2}" "$bin/llama-bench" -m "$models/q4_k_m.gguf" \
    -p 0 -n "$n" -r $reps -o json | sed "s/^/$mode $n /"
}
for round in $(seq "${ROUNDS:-5}"); do
  # A device call has a time limit: start no round that might not end before DEADLINE (epoch seconds).
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) + ${ROUND_S:-90} )) -gt "$DEADLINE" ]; then
    echo "round $round not started: DEADLINE near" >&2
    break
  fi
  t0=$(date +%s)
  for n in $long $short; do
    run none $n env
    run empty $n "$tracer" record -q --force --debug-sync-teardown -o /tmp/cost-empty.jsonl --probe-mode empty --
    if [ -n "${BASE_TRACER:-}" ]; then
      run base $n "$BASE_TRACER" record -q --force --debug-sync-teardown -o /tmp/cost-base.jsonl.zst --
    fi
    run tracer $n "$tracer" record -q --force --debug-sync-teardown -o "/tmp/cost-tracer-$n.jsonl.zst" --
    if [ "${ALL:-1}" = 1 ]; then
      run all $n "$tracer" record -q --force --debug-sync-teardown --all-calls -o "/tmp/cost-all-$n.jsonl.zst" --
    fi
  done
  echo "round $round took $(( $(date +%s) - t0 )) s" >&2
done | tee "$out/decode-cost.txt"
# What tracer saw per token in the last round: calls written and tallied in the kernel, long minus short.
for n in $long $short; do "$tracer" report --json "/tmp/cost-tracer-$n.jsonl.zst" > "/tmp/cost-tracer-$n.json"; done
# And the programs' own time, as the kernel times it (--program-stats), long minus short, per token: tracer's
# and the empty programs' (what timing a run costs by itself), STATS_ROUNDS (default 3) rounds interleaved.
stats_rounds=0
[ "${STATS:-1}" = 1 ] && stats_rounds=${STATS_ROUNDS:-3}
for r in $(seq "$stats_rounds"); do
  for mode in tracer empty; do
    probe_mode=record
    [ $mode = empty ] && probe_mode=empty
    for n in $long $short; do
      f="/tmp/cost-stats-$mode-$r-$n"
      run stats $n "$tracer" record -q --force --debug-sync-teardown --program-stats --probe-mode $probe_mode \
        -o "$f.jsonl.zst" -- > /dev/null
      "$tracer" report --json "$f.jsonl.zst" > "$f.json"
    done
  done
done
python3 - "$out/decode-cost.txt" "$tokens" "$long" "/tmp/cost-tracer-$long.json" "/tmp/cost-tracer-$short.json" \
  "$stats_rounds" "$short" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, n, *v = line.split()
    runs[(mode, n)].append([float(x) for x in v])
tokens, long = int(sys.argv[2]), sys.argv[3]
def per_token(mode, field):
    short = [k for k in runs if k[0] == mode and k[1] != long][0]
    # Round by round: the long run's time minus the short run's, per token between them.
    return [(a[field] - b[field]) / tokens for a, b in zip(runs[(mode, long)], runs[short])]
bench = {}
modes = [m for m in ("none", "empty", "base", "tracer", "all") if (m, long) in runs]
for mode in modes:
    d = per_token(mode, 0)
    bench[mode] = statistics.median(d)
    ts = statistics.median(r[4] for r in runs[(mode, long)])
    print(f"{mode:<7} llama-bench kernel time {1e6 * bench[mode]:6.2f} us/token (rounds: "
          + ", ".join(f"{1e6 * x:.2f}" for x in d) + f"); {ts:.0f} tokens/s")
empty, tracer = bench["empty"] - bench["none"], bench["tracer"] - bench["none"]
print(f"added to llama-bench's kernel time per token: empty programs {1e6 * empty:.2f} us, tracer {1e6 * tracer:.2f} us"
      + (f" ({tracer / empty:.2f}x the empty programs')" if empty > 0 else "")
      + (f", tracer --all-calls {1e6 * (bench['all'] - bench['none']):.2f} us" if "all" in bench else ""))
if "base" in bench and empty > 0:
    base = bench["base"] - bench["none"]
    print(f"the earlier build (BASE_TRACER): {1e6 * base:.2f} us ({base / empty:.2f}x the empty programs')")
ts = {m: statistics.median(r[4] for r in runs[(m, long)]) for m in modes}
print("decode tokens/s, medians: " + ", ".join(f"{m} {ts[m]:.0f} ({100 * ts[m] / ts['none']:.1f} %)" for m in modes))
for mode in ("empty", "tracer"):
    own = [s + u for s, u in zip(per_token(mode, 2), per_token(mode, 3))]
    mine = [s + u for s, u in zip(per_token(mode, 0), per_token(mode, 1))]
    print(f"{mode:<7} tracer's own process: {1e6 * statistics.median(a - b for a, b in zip(own, mine)):.2f} us CPU "
          "per token (user + kernel, on other cores)")
def calls(path):
    out = {}
    for p in json.load(open(path))["processes"]:
        for a in p.get("api", []):
            out[a["api"]] = out.get(a["api"], 0) + a["calls"]
    return out
def traps(path):
    return sum(ph.get("traps", 0) for p in json.load(open(path))["processes"] for ph in p.get("phases", []))
print(f"traps per token (the report's phases, long minus short): {(traps(sys.argv[4]) - traps(sys.argv[5])) / tokens:.2f}")
lo, sh = calls(sys.argv[4]), calls(sys.argv[5])
per = {f: (lo[f] - sh.get(f, 0)) / tokens for f in lo}
print("traced calls per token (last round): " + ", ".join(f"{f} {v:.2f}" for f, v in sorted(per.items(), key=lambda x: -x[1]) if v >= 0.01)
      + f"; {sum(per.values()):.2f} in all")
def programs(mode, r, n):
    return json.load(open(f"/tmp/cost-stats-{mode}-{r}-{n}.json")).get("programs", {})
stats_rounds, short = int(sys.argv[6]), sys.argv[7]
total = {"tracer": [], "empty": []}
for r in range(1, stats_rounds + 1):
    for mode in total:
        lo, sh = programs(mode, r, long), programs(mode, r, short)
        ns = {k: (v["ns"] - sh.get(k, {}).get("ns", 0)) / tokens for k, v in lo.items()}
        runs = {k: (v["runs"] - sh.get(k, {}).get("runs", 0)) / tokens for k, v in lo.items()}
        total[mode].append(sum(ns.values()))
        print(f"{mode} programs per token, round {r} (kernel-timed, --program-stats): "
              + ", ".join(f"{k} {runs[k]:.2f} runs {ns[k]:.0f} ns ({ns[k] / runs[k]:.0f} a run)"
                          for k in sorted(ns, key=lambda k: -ns[k]) if runs[k] >= 0.01)
              + f"; {sum(ns.values()):.0f} ns in all")
if stats_rounds and empty > 0:
    # The kernel times each run of a program alike, so tracer's programs minus the empty ones is what tracer's
    # work adds to each trap; over the traps' own cost (empty over none, above) it estimates the ratio with far
    # less noise than the kernel times of whole runs.
    extra = statistics.median(total["tracer"]) - statistics.median(total["empty"])
    print(f"tracer's programs over the empty ones: {extra / 1000:.2f} us a token (rounds: tracer "
          + ", ".join(f"{t / 1000:.2f}" for t in total["tracer"]) + "; empty "
          + ", ".join(f"{t / 1000:.2f}" for t in total["empty"])
          + f"); estimated ratio {(empty + extra * 1e-9) / empty:.2f}x the empty programs' (their cost {1e6 * empty:.2f} us)")
PY

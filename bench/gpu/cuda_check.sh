#!/usr/bin/env bash
# The real-GPU check of tracer's CUDA probes (run as root on an NVIDIA machine with PyTorch; no Rust
# toolchain needed there):
#
#   bench/gpu/cuda_check.sh [TRACER_BINARY]      (default: target/release/tracer)
#
# 1. counts: the workload of workload.py under `tracer record` and, separately, under torch.profiler
#    (CUPTI); per kernel name, tracer's executions (launches + graph replays x captured nodes) must equal
#    CUPTI's. Prints the table.
# 2. overhead: a launch-bound loop (x.add_(1)) without tracer, with empty programs on the same attach
#    points, with tracer (driver probes, one trap per launch), and with tracer --cuda-runtime (the
#    runtime API view too); microseconds per launch and the ratios.
# Results go to $OUT (or ./gpu-results) as files too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
py=python3

match=0
if [ -z "${SKIP_COUNTS:-}" ]; then
echo "== 1. per-kernel counts: tracer vs CUPTI (torch.profiler)"
$py "$here/workload.py" --mode oracle --out "$out/oracle.json"
"$tracer" record -q --force -o "$out/workload.jsonl" -- $py "$here/workload.py" --mode trace
"$tracer" report --json "$out/workload.jsonl" > "$out/workload-report.json"
"$tracer" report "$out/workload.jsonl" > "$out/workload-report.txt"
set +e
$py "$here/compare.py" "$out/workload-report.json" "$out/oracle.json" | tee "$out/compare.txt"
match=${PIPESTATUS[0]}
set -e
fi

echo "== 2. overhead: launch-bound loop (x.add_(1)), microseconds per launch"
libcudart="$($py -c 'import glob, os, torch; d = os.path.dirname(os.path.dirname(torch.__file__)); print((glob.glob(d + "/nvidia/*/lib/libcudart.so*") + glob.glob(d + "/nvidia/cuda_runtime/lib/libcudart.so*"))[0])' 2>/dev/null || true)"
# The loop runs pinned to one core, tracer's reader elsewhere: the figure is the launching thread's.
cpu=$(( $(nproc) - 1 ))
loop() { "$@" taskset -c $cpu $py "$here/workload.py" --mode loop | tail -1; }
runs=${RUNS:-7}
: > "$out/overhead.txt"
for i in $(seq $runs); do
  echo "none    $(loop)" >> "$out/overhead.txt"
  echo "empty   $(loop "$tracer" record -q --force --debug-sync-teardown -o "$out/empty.jsonl" --probe-mode empty --lib "$libcuda" --)" >> "$out/overhead.txt"
  echo "tracer  $(loop "$tracer" record -q --force --debug-sync-teardown -o "$out/loop.jsonl" --lib "$libcuda" --)" >> "$out/overhead.txt"
  if [ -n "$libcudart" ]; then
    echo "runtime $(loop "$tracer" record -q --force --debug-sync-teardown -o "$out/loop-rt.jsonl" --ring-size 67108864 --cuda-runtime --lib "$libcuda" --lib "$libcudart" --)" >> "$out/overhead.txt"
  fi
done
$py - "$out/overhead.txt" <<'PY'
import json, statistics, sys
by, best = {}, {}
for line in open(sys.argv[1]):
    mode, js = line.split(None, 1)
    r = json.loads(js)
    by.setdefault(mode, []).append(r["us_per_launch"])
    best.setdefault(mode, []).append(r["us_per_launch_min"])
none, none_best = statistics.median(by["none"]), min(best["none"])
print("per process: the median round; across processes: median [min-max]; best: the fastest round of all")
print(f"{'mode':<8} {'us/launch':>9} {'[min-max]':>15} {'ratio':>6} {'best':>6} {'ratio':>6}")
for mode in ["none", "empty", "tracer", "runtime"]:
    if mode in by:
        v, b = by[mode], min(best[mode])
        m = statistics.median(v)
        print(f"{mode:<8} {m:>9.2f} {f'[{min(v):.2f}-{max(v):.2f}]':>15} {m / none:>6.2f} {b:>6.2f} {b / none_best:>6.2f}")
PY
for f in loop loop-rt; do
  [ -f "$out/$f.jsonl" ] || continue
  "$tracer" report --json "$out/$f.jsonl" | $py -c '
import json, sys
r = json.load(sys.stdin)
calls = {a["api"]: a["calls"] for p in r["processes"] for a in p["api"]}
loop = 205000  # 5 000 warm-up + 10 rounds x 20 000 timed launches
hits = sum(v for k, v in calls.items() if k in ("cuLaunchKernel", "cudaLaunchKernel"))
dropped = r["drops_total"]
print(f"{sys.argv[1]}: probe hits on the launch path per launch: {hits / loop:.2f}; most frequent calls: {dict(sorted(calls.items(), key=lambda kv: -kv[1])[:4])}; records dropped: {dropped}")
' "$f"
  rm -f "$out/$f.jsonl"
done
rm -f "$out/empty.jsonl" "$out/loop-rt.jsonl"
exit $match

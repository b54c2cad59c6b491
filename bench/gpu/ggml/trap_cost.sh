#!/usr/bin/env bash
# The per-call cost behind issue 13's "tracer within 1.2x of the empty programs' cost", in two parts:
# 1. the trap: bench/launch_loop.c calling the stand-in libamdhip64 (bench/standin, a test double whose
#    launch does nothing) in a tight loop, with no tracer, with empty programs and with tracer; no GPU in
#    the loop, so the difference is the probes' alone (hipLaunchKernel: entry + return, two traps a call).
# 2. the programs on the CUDA calls of the decode loop: trap_cost.cu runs each kind (idle sync, async copy
#    to the device, launch, graph replay, copy to the host + its sync) in a tight loop under empty
#    programs and under tracer, both with --program-stats: the kernel times every program run, so the
#    programs' cost per call is exact where the GPU calls' own times vary by more than a trap.
# Probes are released before each tracer exits (--debug-sync-teardown): a run must not meet the last
# run's probes. Rounds interleaved, loops pinned to one core, medians. Writes $OUT/trap-cost.txt.
#   bench/gpu/ggml/trap_cost.sh [TRACER_BINARY]   (ROUNDS, default 5; ITERATIONS, default 100000;
#                                                  BENCH_CPU, default 2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
work="${LLAMA_WORK:-/tmp/llama}"
bench="$here/../.."
mkdir -p "$work"
cc -O2 -shared -fPIC -Wl,-soname,libamdhip64.so.5 -Wl,--version-script="$bench/standin/hip_standin.map" \
  -o "$work/libamdhip64.so.5" "$bench/standin/hip_standin.c"
cc -O2 -o "$work/launch_loop" "$bench/launch_loop.c" -L"$work" -l:libamdhip64.so.5 -Wl,-rpath,"$work" -lpthread
have_cuda=0
if command -v nvcc > /dev/null; then
  nvcc -O2 -std=c++17 -o "$work/trap_cost" "$here/trap_cost.cu" -lcuda && have_cuda=1
fi
cpu="${BENCH_CPU:-2}" n="${ITERATIONS:-100000}"
rec=("$tracer" record -q --force --debug-sync-teardown --program-stats)
# The programs' time in a trace: "NS RUNS".
programs() { python3 -c '
import json, sys
f = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
p = f.get("programs", {}).values()
print(sum(x["ns"] for x in p), sum(x["runs"] for x in p))' "$1"; }
ns_of() { sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; }
for round in $(seq "${ROUNDS:-5}"); do
  loop=(taskset -c "$cpu" "$work/launch_loop" count "$n")
  echo "trap none $("${loop[@]}" | ns_of) 0 0"
  echo "trap empty $("${rec[@]}" --lib "$work/libamdhip64.so.5" -o /tmp/trap.jsonl --probe-mode empty -- "${loop[@]}" |
    ns_of) $(programs /tmp/trap.jsonl)"
  echo "trap tracer $("${rec[@]}" --lib "$work/libamdhip64.so.5" -o /tmp/trap.jsonl -- "${loop[@]}" | ns_of) $(
    programs /tmp/trap.jsonl)"
  [ $have_cuda = 1 ] || continue
  for kind in sync htod launch graph dtoh; do
    for mode in empty record; do
      line="$("${rec[@]}" -o /tmp/trap.jsonl --probe-mode $mode -- taskset -c "$cpu" "$work/trap_cost" "$n" "$kind")"
      echo "$kind $mode ${line#* } $(programs /tmp/trap.jsonl)"
    done
  done
done | tee "$out/trap-cost.txt"
python3 - "$out/trap-cost.txt" "$n" <<'PY'
import collections, statistics, sys
n = int(sys.argv[2])
ns, prog = collections.defaultdict(list), collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    kind, mode, v, pns, runs = line.split()
    ns[(kind, mode)].append(float(v))
    # Program time per call of the loop: trap_cost makes 5 passes of n calls (dtoh: n/2 pairs), the stand-in
    # loop n calls.
    calls = n if kind == "trap" else 5 * (n // 2 if kind == "dtoh" else n)
    prog[(kind, mode)].append(float(pns) / calls)
    if kind not in order:
        order.append(kind)
med = lambda k: statistics.median(ns[k])
pmed = lambda k: statistics.median(prog[k])
trap = (med(("trap", "empty")) - med(("trap", "none"))) / 2
print(f"the trap (stand-in hipLaunchKernel, entry + return): none {med(('trap', 'none')):.1f} ns a call, "
      f"empty programs +{2 * trap:.1f}, tracer +{med(('trap', 'tracer')) - med(('trap', 'none')):.1f}; "
      f"programs (kernel-timed) {pmed(('trap', 'empty')):.1f} and {pmed(('trap', 'tracer')):.1f} ns a call; "
      f"one trap with its empty program: {trap:.1f} ns")
if len(order) > 1:
    print(f"{'call':<8}{'programs: empty':>17}{'tracer':>9}{'ratio':>8}   ns per call; ratio = (trap + tracer's program)"
          " / (trap + empty program), the trap as above")
    empty_prog = pmed(("trap", "empty")) / 2   # the empty program's time per trap, within `trap`
    for kind in order[1:]:
        e, t = pmed((kind, "empty")), pmed((kind, "record"))
        traps = 2 if kind == "dtoh" else 1
        bare = traps * (trap - empty_prog)
        print(f"{kind:<8}{e:>17.1f}{t:>9.1f}{(bare + t) / (bare + e):>7.2f}x")
PY

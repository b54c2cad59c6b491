#!/usr/bin/env bash
# llama.cpp's Vulkan backend under tracer, on this machine's Vulkan device (Mesa's lavapipe where there is no
# GPU), against two oracles nobody here wrote: gdb breakpoints on the Vulkan loader's entry points (every
# call's count, from a second run of the same deterministic benchmark) and llama-bench's own test plan.
#
#   bench/vulkan/run.sh            (as root; builds llama.cpp with bench/vulkan/build.sh first if needed)
#
# Env knobs: TRACER (default target/release/tracer), LLAMA_VK_WORK (see build.sh), PROMPT (default 8),
# GEN (default 4), LLAMA_VK_BIN and LLAMA_VK_MODEL (a llama.cpp Vulkan build's bin directory and a model:
# then build.sh is not run; bench/vulkan/device.sh uses them on the GPU machine). GGML_VK_VISIBLE_DEVICES=0
# is set: ggml-vulkan skips a CPU-type device (lavapipe) unless it is named. Without gdb, the breakpoint
# counts are left out (said); GDB names another gdb (the GPU machine has cuda-gdb, which debugs host code too).
# Prints per API call tracer's count and gdb's, the steps and tokens tracer cut against llama-bench's plan, and
# the kernels with their ggml shader names and families; MATCH or MISMATCH per line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tracer="${TRACER:-$root/target/release/tracer}"
work="${LLAMA_VK_WORK:-/work/llvk}"
prompt="${PROMPT:-8}"
gen="${GEN:-4}"
if [ -n "${LLAMA_VK_BIN:-}" ]; then
  bin="$LLAMA_VK_BIN"
  model="${LLAMA_VK_MODEL:?LLAMA_VK_MODEL names the model with LLAMA_VK_BIN}"
else
  "$here/build.sh" > /dev/null
  bin="$work/build/bin"
  model="$work/models/q4_k_m.gguf"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export GGML_VK_VISIBLE_DEVICES=0
bench=("$bin/llama-bench" -m "$model" -p "$prompt" -n "$gen" -r 1 -ngl 99)

# 1. Under tracer.
start=$(date +%s%N)
"$tracer" record -q -o "$out/t.jsonl" -- "${bench[@]}" > "$out/bench.txt" 2> "$out/bench.err"
echo "traced run: $(( ($(date +%s%N) - start) / 1000000 )) ms; llama-bench says:"
grep -E "ggml_vulkan|pp$prompt|tg$gen" "$out/bench.txt" "$out/bench.err" | sed 's/^[^:]*:/  /'
"$tracer" report --json "$out/t.jsonl" > "$out/report.json"
"$tracer" report "$out/t.jsonl" > "$out/report.txt"

# 2. Under gdb, counting the loader's entry points (breakpoints, a separate run: uprobes and gdb's
# breakpoints are not mixed).
apis=(vkCreateShaderModule vkCreateComputePipelines vkCmdBindPipeline vkCmdDispatch vkCmdDispatchBase
  vkCmdDispatchIndirect vkQueueSubmit vkQueueSubmit2)
{
  echo "set pagination off"
  echo "set breakpoint pending on"
  echo "set print thread-events off"
  for a in "${apis[@]}"; do printf 'break %s\ncommands\nsilent\ncontinue\nend\n' "$a"; done
  echo "run"
  echo "info breakpoints"
} > "$out/count.gdb"
gdb="${GDB:-gdb}"
if command -v "$gdb" > /dev/null; then
  "$gdb" -batch -x "$out/count.gdb" --args "${bench[@]}" > "$out/gdb.txt" 2>&1
else
  echo "no gdb here: the breakpoint counts are left out" > "$out/gdb.txt"
fi

python3 - "$out" "$prompt" "$gen" "${apis[@]}" <<'EOF'
import json, re, sys
out, prompt, gen, apis = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
gdb = open(f"{out}/gdb.txt").read()
hits = {}
# `info breakpoints`: an entry per breakpoint ("1       breakpoint     keep y   0x... <vkCmdDispatch+4>"),
# then, for one that was hit, "\tbreakpoint already hit 459 times".
entries = re.split(r"\n(?=\d+\s+breakpoint\s)", gdb[gdb.rfind("Num     Type"):])
for e in entries[1:]:
    name = re.search(r"<(\w+?)(?:\+\d+)?>|in (\w+)", e)
    hit = re.search(r"breakpoint already hit (\d+) times?", e)
    if name:
        hits[name.group(1) or name.group(2)] = int(hit.group(1)) if hit else 0
report = json.load(open(f"{out}/report.json"))
p = next(p for p in report["processes"] if p["comm"].startswith("llama-bench"))
calls = {a["api"]: a["calls"] for a in p["api"]}
ok = True
have_gdb = not gdb.startswith("no gdb")
print(f"{'API call':28} {'tracer':>8} {'gdb':>8}")
for a in apis:
    t, g = calls.get(a, 0), hits.get(a, 0)
    if have_gdb:
        ok &= t == g
        print(f"{a:28} {t:>8} {g:>8}  {'MATCH' if t == g else 'MISMATCH'}")
    else:
        print(f"{a:28} {t:>8} {'-':>8}  (no gdb)")
# llama-bench's plan: a warm-up and -r 1 run of the prompt (PROMPT tokens in one step each), a warm-up
# token and GEN generated tokens (one step each).
steps = sum(ph["steps"] for ph in p["phases"])
tokens = sum(ph.get("tokens", 0) for ph in p["phases"])
plan_steps, plan_tokens = 2 + 1 + gen, 2 * prompt + 1 + gen
print(f"steps: tracer {steps}, llama-bench's plan {plan_steps}  {'MATCH' if steps == plan_steps else 'MISMATCH'}")
print(f"tokens: tracer {tokens}, llama-bench's plan {plan_tokens}  {'MATCH' if tokens == plan_tokens else 'MISMATCH'}")
ok &= steps == plan_steps and tokens == plan_tokens
unnamed = [k for k in p["kernels"] if k["source"] == "unnamed"]
print(f"kernels: {len(p['kernels'])}, named by shader {sum(k['source'] == 'shader' for k in p['kernels'])}, unnamed {len(unnamed)}")
for k in sorted(p["kernels"], key=lambda k: -k["launches"]):
    c = k["class"]
    print(f"  {k['launches']:>6}  {c['family'] + (' ' + c['quant'] if c.get('quant') else ''):24} {k['name']}")
counters = {k: v for k, v in report["counters"].items() if k.startswith(("shader_", "pipelines_", "vulkan_", "dispatches_", "command_buffers_"))}
print(f"shader counters: {counters or 'none'}")
dispatched = calls.get("vkCmdDispatch", 0) > 0
if not dispatched:
    print("no Vulkan dispatch was made: llama-bench did not run on a Vulkan device (see its lines above)")
print("RESULT:", "MATCH" if ok and dispatched and not unnamed else "MISMATCH")
EOF
sed -n '/^  phases/,/^  tokens from/p' "$out/report.txt"

#!/usr/bin/env bash
# The by-value batch on the GPU machine: decode_api.c calls the pinned llama.cpp's `llama_decode` with a
# `struct llama_batch` of two sequences (as Ollama's runner and llama-cpp-python call it), traced by tracer
# from its start; each phase's steps and tokens compared with the program's own truth.
#   bench/gpu/ggml/decode_api.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
LLAMA_TARGETS="${LLAMA_TARGETS:-llama llama-quantize}" . "$here/build.sh"
cc -O2 -Wall -I"$work/llama.cpp/include" -I"$work/llama.cpp/ggml/include" "$here/decode_api.c" \
  -o "$work/decode_api" -L"$bin" -lllama -Wl,-rpath,"$bin"
"$tracer" record -q --force -o "$out/decode-api.jsonl.zst" -- "$work/decode_api" "$models/q4_k_m.gguf" \
  > "$out/decode-api.truth.json" 2> "$out/decode-api.log"
"$tracer" report --json "$out/decode-api.jsonl.zst" > "$out/decode-api.report.json"
"$tracer" report "$out/decode-api.jsonl.zst" > "$out/decode-api.report.txt" 2>&1 || true
python3 - "$out/decode-api.report.json" "$out/decode-api.truth.json" <<'PY'
import json, sys
report, truth = json.load(open(sys.argv[1])), json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
p = next(p for p in report["processes"] if p["comm"] == "decode_api")
phases = {ph["phase"]: ph for ph in p["phases"]}
for name, ph in phases.items():
    print(f"  {name:<8} steps {ph['steps']} (from batches {ph.get('steps_from_batches', 0)}): {ph.get('compositions')}")
got = {k: phases.get(k, {}).get("steps", 0) for k in ("prefill", "mixed", "decode")}
tokens = (sum(ph.get("prompt_tokens", 0) for ph in phases.values()), sum(ph.get("decode_tokens", 0) for ph in phases.values()))
want = {k: truth[k] for k in ("prefill", "mixed", "decode")}
ok = got == want and tokens == (truth["prompt_tokens"], truth["decode_tokens"]) and truth["failed"] == 0
print(f"  steps {got} (program {want}), tokens prompt/decode {tokens} (program {truth['prompt_tokens']}/{truth['decode_tokens']}): "
      + ("MATCH" if ok else "DIFFER"))
sys.exit(0 if ok else 1)
PY

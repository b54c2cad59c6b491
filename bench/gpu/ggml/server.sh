#!/usr/bin/env bash
# Issue 13's llama-server decode run on the GPU machine: llama-server (Q4_K_M, all layers on the GPU) serves
# two completions (prompts of 11 and 290 tokens given as token ids, 8 tokens each, greedy, EOS ignored, no
# prompt cache), once traced by tracer from its start and once under the CUPTI oracle; per-kernel
# executions compared by demangled name. Phases are checked against the server's own figures: two prefill
# steps of width 2 at start-up (common_init_from_params's warm-up decodes bos + eos; the server then decodes
# two tokens to learn whether the context can drop part of a sequence, common_context_can_seq_rm), one per
# request of width prompt_n, and a decode step per generated token after the first (the last sampled token is
# not decoded). Then the same two requests to an
# untraced server with tracer attached by PID (`record --pid`), as a user attaches to a running server.
# Writes under $OUT; exits 1 on a difference.
#   bench/gpu/ggml/server.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
. "$here/cupti.sh"
started=$(date +%s)
port=18080
server_args=(-m "$models/q4_k_m.gguf" -ngl 99 -c 2048 -np 1 --port "$port" --no-ui)
. "$here/serve.sh"
ask() { # ask OUTPUT_JSON: the two completions, their timings written as one JSON list
  python3 - "$port" "$1" <<'PY'
import json, sys, urllib.request
port, path = sys.argv[1], sys.argv[2]
done = []
for n in (11, 290):
    body = {"prompt": list(range(100, 100 + n)), "n_predict": 8, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = json.load(urllib.request.urlopen(req))["timings"]
    done.append({"prompt_n": t["prompt_n"], "predicted_n": t["predicted_n"]})
json.dump(done, open(path, "w"))
print("server: " + "; ".join(f"prompt {d['prompt_n']} tokens, {d['predicted_n']} generated" for d in done))
PY
}

echo "== llama-server traced from its start"
"$tracer" record -q --force -o "$out/server.jsonl.zst" -- "$bin/llama-server" "${server_args[@]}" \
  > "$out/server.log" 2>&1 &
tracer_pid=$!
wait_ready
ask "$out/server-requests.json"
stop_server "$(server_pid)"
wait "$tracer_pid"
"$tracer" report --json "$out/server.jsonl.zst" > "$out/server.report.json"
"$tracer" report "$out/server.jsonl.zst" > "$out/server.report.txt" 2>&1 || true

echo "== llama-server under the CUPTI oracle"
CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-server.raw.json" \
  "$bin/llama-server" "${server_args[@]}" > /dev/null 2>&1 &
wait_ready
ask "$out/server-requests-cupti.json"
stop_server "$(server_pid)"
wait
cupti_demangle "$out/cupti-server.raw.json" "$out/cupti-server.json"
status=0
python3 "$here/../compare.py" "$out/server.report.json" "$out/cupti-server.json" | tail -4 || status=1

check_phases() { # REPORT REQUESTS STARTUP(1: the two start-up decodes were traced)
  python3 - "$@" <<'PY'
import json, sys
report, requests, startup = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3] == "1"
widths = (["2", "2"] if startup else []) + [str(r["prompt_n"]) for r in requests]
want = {"prefill": (len(widths), sorted(set(widths))),
        "decode": (sum(r["predicted_n"] - 1 for r in requests), ["1"])}
ok = False
for p in report["processes"]:
    phases = {ph["phase"]: ph for ph in p.get("phases", [])}
    if not phases:
        continue
    for ph in phases.values():
        print(f"  {ph['phase']:<8} steps {ph['steps']:>3}  batch widths {', '.join(ph['batch_widths'])}")
    if p.get("mmq_widths"):
        print("  MMQ column counts (ne11): " + ", ".join(f"{n} from the {k}" for k, n in p["mmq_widths"].items()))
    got = {k: (v["steps"], sorted(v["batch_widths"])) for k, v in phases.items()}
    ok = all(got.get(k) == (s, sorted(w)) for k, (s, w) in want.items())
print(f"  expected: prefill {want['prefill'][0]} steps (widths {', '.join(widths)}), "
      f"decode {want['decode'][0]} steps (width 1): " + ("MATCH" if ok else "DIFFER"))
sys.exit(0 if ok else 1)
PY
}
echo "== phases, traced from the start"
check_phases "$out/server.report.json" "$out/server-requests.json" 1 || status=1

echo "== llama-server attached by PID after its start"
"$bin/llama-server" "${server_args[@]}" > "$out/server-late.log" 2>&1 &
wait_ready
pid="$(server_pid)"
"$tracer" record -q --force -o "$out/server-late.jsonl.zst" --pid "$pid" > "$out/server-late-tracer.log" 2>&1 &
tracer_pid=$!
sleep 3   # tracer attaches, reads the runner's libraries and code objects
ask "$out/server-requests-late.json"
kill -INT "$tracer_pid"; wait "$tracer_pid" || true
stop_server "$pid"
"$tracer" report --json "$out/server-late.jsonl.zst" > "$out/server-late.report.json"
"$tracer" report "$out/server-late.jsonl.zst" > "$out/server-late.report.txt" 2>&1 || true
python3 "$here/../named_share.py" "$out/server-late.report.json" "$out/server.report.json" | sed 's/^/  /' || status=1
check_phases "$out/server-late.report.json" "$out/server-requests-late.json" 0 || status=1
echo "device time for this run: $(( $(date +%s) - started )) s after the build"
exit $status

#!/usr/bin/env bash
# Issue 38 on the GPU machine: llama-server with 4 slots (-np 4, Q4_K_M, all layers on the GPU) serves four
# completions sent at once (bench/gpu/ggml/slots.py), so its steps carry several sequences: prompts beside
# decode tokens, several sequences decoding together.
#  1. Traced from its start, with the CUPTI oracle injected into the same server process (one run, so the
#     schedule the two see is the same): per-kernel executions compared (compare.py); each phase's prompt
#     and decode tokens against the server's timings; steps with batches against its n_decode_total; each
#     step's decode sequences against the server's own -v log.
#  2. The same requests to an untraced server with tracer attached by PID (`record --pid`).
#  3. F16 (its products through cuBLAS), 2 slots, two requests at once: cuBLAS calls per phase.
# Writes under $OUT; exits 1 on a difference.
#   bench/gpu/ggml/slots.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
. "$here/cupti.sh"
started=$(date +%s)
port=18090
. "$here/serve.sh"
metrics() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" > "$1"; }
status=0

echo "== 4 slots, traced from the start, CUPTI in the same process"
args=(-m "$models/q4_k_m.gguf" -ngl 99 -c 8192 -np 4 --port "$port" --no-ui --metrics)
CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-slots.raw.json" \
  "$tracer" record -q --force -o "$out/slots.jsonl.zst" -- "$bin/llama-server" "${args[@]}" -v > "$out/slots.log" 2>&1 &
tracer_pid=$!
wait_ready
python3 "$here/slots.py" ask "$port" "$out/slots-requests.json"
metrics "$out/slots-metrics.txt"
stop_server "$(server_pid)"
wait "$tracer_pid"
"$tracer" report --json "$out/slots.jsonl.zst" > "$out/slots.report.json"
"$tracer" report "$out/slots.jsonl.zst" > "$out/slots.report.txt" 2>&1 || true
cupti_demangle "$out/cupti-slots.raw.json" "$out/cupti-slots.json"
python3 "$here/../compare.py" "$out/slots.report.json" "$out/cupti-slots.json" llama-server | tail -3 || status=1
python3 "$here/slots.py" check "$out/slots.report.json" "$out/slots-requests.json" 4 "$out/slots-metrics.txt" || status=1
"$tracer" export --format perfetto -o "$out/slots.perfetto.json" "$out/slots.jsonl.zst"
python3 "$here/slots.py" log "$out/slots.perfetto.json" "$out/slots.log" || status=1

echo "== 4 slots, attached by PID after the start"
"$bin/llama-server" "${args[@]}" > "$out/slots-late.log" 2>&1 &
wait_ready
pid="$(server_pid)"
"$tracer" record -q --force -o "$out/slots-late.jsonl.zst" --pid "$pid" --ready-file "$out/ready" \
  > "$out/slots-late-tracer.log" 2>&1 &
tracer_pid=$!
for _ in $(seq 300); do [ -f "$out/ready" ] && break; sleep 0.1; done
python3 "$here/slots.py" ask "$port" "$out/slots-late-requests.json"
kill -INT "$tracer_pid"; wait "$tracer_pid" || true
stop_server "$pid"
"$tracer" report --json "$out/slots-late.jsonl.zst" > "$out/slots-late.report.json"
"$tracer" report "$out/slots-late.jsonl.zst" > "$out/slots-late.report.txt" 2>&1 || true
python3 "$here/slots.py" check "$out/slots-late.report.json" "$out/slots-late-requests.json" 0 || status=1

echo "== F16, 2 slots: cuBLAS calls per phase"
args=(-m "$models/f16.gguf" -ngl 99 -c 4096 -np 2 --port "$port" --no-ui)
"$tracer" record -q --force -o "$out/slots-f16.jsonl.zst" -- "$bin/llama-server" "${args[@]}" > "$out/slots-f16.log" 2>&1 &
tracer_pid=$!
wait_ready
python3 "$here/slots.py" ask "$port" "$out/slots-f16-requests.json"
stop_server "$(server_pid)"
wait "$tracer_pid"
"$tracer" report --json "$out/slots-f16.jsonl.zst" > "$out/slots-f16.report.json"
"$tracer" report "$out/slots-f16.jsonl.zst" > "$out/slots-f16.report.txt" 2>&1 || true
python3 "$here/slots.py" check "$out/slots-f16.report.json" "$out/slots-f16-requests.json" 4 || status=1
echo "device time for this run: $(( $(date +%s) - started )) s after the build"
exit $status

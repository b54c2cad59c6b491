#!/usr/bin/env bash
# Issue 78 on the GPU machine: an Ollama 0.30-shaped tree attached late. `bin/ollama` is the Ollama TEST DOUBLE
# of the tests (fixtures/c/ollama_shim.c: it only starts its runner with Ollama's argv and waits); the runner is
# the pinned llama.cpp's real llama-server, copied to `lib/ollama/llama-server`, its ggml and llama libraries
# beside it, the CUDA backend and the CUDA runtime it links under `lib/ollama/cuda_v13/` (on LD_LIBRARY_PATH,
# as Ollama sets it), started as `llama-server --model BLOB --port P --host 127.0.0.1 --parallel 2 ...` with the
# model a blob named by a manifest in a models directory. Three recordings of two requests at once, then one
# (slots.py ask-two-then-one):
#   start   `--ollama-pid SERVER` before the server starts its runner: every name seen live (the truth);
#   server  `--ollama-pid SERVER` after the runner answered a first request (its kernels resolved, its graphs
#           captured): what a person gets attaching to an Ollama that already serves;
#   pid     `--pid RUNNER` at the same point.
# Prints each late recording's share of executions named (named_share.py against the start's names), and the
# runner's label. Exits 1 when the server's late attach names less than every execution.
#   bench/gpu/ggml/ollama_late.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
. "$here/build.sh"
tree="$work/ollama-tree"
rm -rf "$tree"
mkdir -p "$tree/bin" "$tree/lib/ollama/cuda_v13" "$tree/models/blobs"
cc -O2 -o "$tree/bin/ollama" "$here/../../../fixtures/c/ollama_shim.c"
cp "$bin/llama-server" "$tree/lib/ollama/"
for lib in "$bin"/lib*.so*; do
  case "$(basename "$lib")" in
    libggml-cuda*) cp -L "$lib" "$tree/lib/ollama/cuda_v13/" ;;
    *) cp -L "$lib" "$tree/lib/ollama/" ;;
  esac
done
# The CUDA runtime libraries the backend links, bundled beside it as Ollama bundles them.
for dep in $(ldd "$tree/lib/ollama/cuda_v13/"libggml-cuda*.so | awk '/libcudart|libcublas/{print $3}'); do
  cp -L "$dep" "$tree/lib/ollama/cuda_v13/"
done
digest="$(sha256sum "$models/q4_k_m.gguf" | cut -d' ' -f1)"
blob="$tree/models/blobs/sha256-$digest"
cp "$models/q4_k_m.gguf" "$blob"
mkdir -p "$tree/models/manifests/registry.ollama.ai/library/tiny"
printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":1}]}' \
  "$digest" > "$tree/models/manifests/registry.ollama.ai/library/tiny/q4"
echo "tree: $(cd "$tree" && find . -type f | sort | tr '\n' ' ')"
port=18093
. "$here/serve.sh"
runner="0|0|$tree/lib/ollama/llama-server|llama-server|--model|$blob|--port|$port|--host|127.0.0.1|-ngl|99|-c|8192|--parallel|2|--no-ui"
status=0

# Starts the server waiting on a fifo; `go` lets it start its runner.
start_server() {
  rm -f "$out/ollama-ctl"
  mkfifo "$out/ollama-ctl"
  LD_LIBRARY_PATH="$tree/lib/ollama:$tree/lib/ollama/cuda_v13" OLLAMA_SHIM_CHILDREN="$runner" \
    "$tree/bin/ollama" serve < "$out/ollama-ctl" > "$out/ollama-$1.server.log" 2>&1 &
  shim=$!
  exec 3> "$out/ollama-ctl"
}
go() { echo go >&3; }
end_server() {
  exec 3>&-
  pkill -INT -P "$shim" llama-server || true
  while pgrep -P "$shim" > /dev/null; do sleep 0.1; done
  kill "$shim" 2>/dev/null || true
  wait "$shim" 2>/dev/null || true
}
record() {  # NAME ARGS...: a recording in the background, waited for until its probes are live
  local name="$1"; shift
  rm -f "$out/ollama-$name.ready"
  "$tracer" record -q --force -o "$out/ollama-$name.jsonl.zst" --ready-file "$out/ollama-$name.ready" \
    --models-dir "$tree/models" "$@" > "$out/ollama-$name.log" 2>&1 &
  rec=$!
  for _ in $(seq 600); do [ -s "$out/ollama-$name.ready" ] && return; sleep 0.1; done
  echo "tracer never went live: $(tail -3 "$out/ollama-$name.log")"; exit 1
}
stop_recording() {
  kill -INT "$rec"; wait "$rec" || true
  "$tracer" report --json "$out/ollama-$1.jsonl.zst" > "$out/ollama-$1.report.json"
  "$tracer" report "$out/ollama-$1.jsonl.zst" > "$out/ollama-$1.report.txt" 2>&1 || true
}
warm() {
  python3 -c "import json, urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:$port/completion', json.dumps({'prompt': 'hello there', 'n_predict': 8}).encode(), {'Content-Type': 'application/json'})).read()"
}

echo "== start: --ollama-pid before the runner starts"
start_server start
record start --ollama-pid "$shim"
go; wait_ready
python3 "$here/slots.py" ask-two-then-one "$port" "$out/ollama-start-requests.json"
stop_recording start
end_server

for how in server pid; do
  echo "== $how: attached after the runner answered a first request"
  start_server "$how"
  go; wait_ready; warm
  runner_pid="$(pgrep -P "$shim" -x llama-server)"
  started_ns=$(date +%s%N)
  if [ "$how" = server ]; then record "$how" --ollama-pid "$shim"; else record "$how" --pid "$runner_pid"; fi
  echo "live $(( ($(date +%s%N) - started_ns) / 1000000 )) ms after the command"
  python3 "$here/slots.py" ask-two-then-one "$port" "$out/ollama-$how-requests.json"
  stop_recording "$how"
  end_server
  python3 "$here/../named_share.py" "$out/ollama-$how.report.json" "$out/ollama-start.report.json" \
    | tee "$out/ollama-$how.share.txt" || status=1
  python3 - "$out/ollama-$how.report.json" "$runner_pid" <<'EOF'
import json, sys
report, pid = json.load(open(sys.argv[1])), int(sys.argv[2])
for p in report["processes"]:
    if p["pid"] == pid:
        print(f"runner pid {pid}: role {p.get('role')}, model {p.get('model_name')}")
EOF
done
grep -q "named .* (100.00 %)" "$out/ollama-server.share.txt" || { echo "the server's late attach left executions unnamed"; status=1; }
exit $status

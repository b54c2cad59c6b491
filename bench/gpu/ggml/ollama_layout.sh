#!/usr/bin/env bash
# Issue 59 on the GPU machine: the pinned llama.cpp linked as Ollama's llama engine links it. libllama and
# llama.cpp's common code in the program, stripped; ggml's libraries (libggml-base.so, libggml-cuda.so) shared,
# as Ollama loads them from lib/ollama: no libllama.so is mapped, so no batch is read, and tracer judges each
# step from its passes' inputs (token positions and output rows as ggml's scheduler copies them to the device).
# llama-server with 2 slots serves two completions at once, then one after them (bench/gpu/ggml/slots.py
# ask-two-then-one), then with 4 slots four at once (ask, the eBPF programs' own time kept: --program-stats);
# traced from its start with the CUPTI oracle in the same process:
#  - per-kernel executions against CUPTI's (compare.py);
#  - prompt and decode tokens against the server's timings (plus its two start-up decodes of 2 tokens);
#  - steps that decoded several sequences labelled decode (or mixed beside a prompt), never prefill.
# Builds in $LLAMA_WORK (default /tmp/llama-ollama): ggml shared with CUDA, installed into a prefix, then
# llama-server and llama-quantize against it (LLAMA_USE_SYSTEM_GGML, BUILD_SHARED_LIBS off). Writes under $OUT;
# exits 1 on a difference.
#   bench/gpu/ggml/ollama_layout.sh [TRACER_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../common.sh"
work="${LLAMA_WORK:-/tmp/llama-ollama}"
tarball="${LLAMA_TARBALL:-target/llama/llama.cpp.tar.gz}"
models="$work/models"
server="$work/static/bin/llama-server"
started=$(date +%s)
if [ ! -x "$server" ]; then
  mkdir -p "$work"
  tar xzf "$tarball" -C "$work"
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
  common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF
          -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
  cmake -S "$work/llama.cpp" -B "$work/shared" "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_SERVER=OFF > "$work/shared-cmake.log"
  cmake --build "$work/shared" --target ggml -j "$(nproc)" > "$work/shared-build.log"
  cmake --install "$work/shared/ggml" --prefix "$work/ggml-prefix" > "$work/ggml-install.log"
  echo "built ggml (CUDA, sm_$arch, shared) in $(( $(date +%s) - started )) s"
  cmake -S "$work/llama.cpp" -B "$work/static" "${common[@]}" -DLLAMA_USE_SYSTEM_GGML=ON \
    -Dggml_DIR="$work/ggml-prefix/lib/cmake/ggml" -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags > "$work/static-cmake.log"
  cmake --build "$work/static" --target llama-server llama-quantize -j "$(nproc)" > "$work/static-build.log"
  strip "$server"
  echo "built llama-server (libllama linked in, stripped) in $(( $(date +%s) - started )) s"
fi
echo "llama-server's libraries: $(readelf -d "$server" | grep -o 'NEEDED.*' | grep -o '\[.*\]' | tr '\n' ' ')"
echo "its symbols: $(nm "$server" 2>&1 | head -1)"
if [ ! -f "$models/q4_k_m.gguf" ]; then
  mkdir -p "$models"
  python3 "$here/make_model.py" "$work/llama.cpp" "$models/f16.gguf"
  "$work/static/bin/llama-quantize" "$models/f16.gguf" "$models/q4_k_m.gguf" Q4_K_M > /dev/null 2>&1
fi
bin="$work/static/bin"
. "$here/cupti.sh"
port=18091
. "$here/serve.sh"
status=0

echo "== 2 slots, libllama linked in: two requests at once, then one; traced from its start, CUPTI in the same process"
args=(-m "$models/q4_k_m.gguf" -ngl 99 -c 8192 -np 2 --port "$port" --no-ui)
CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-ollama-layout.raw.json" \
  "$tracer" record -q --force -o "$out/ollama-layout.jsonl.zst" -- "$server" "${args[@]}" > "$out/ollama-layout.log" 2>&1 &
tracer_pid=$!
wait_ready
python3 "$here/slots.py" ask-two-then-one "$port" "$out/ollama-layout-requests.json"
stop_server "$(server_pid)"
wait "$tracer_pid"
"$tracer" report --json "$out/ollama-layout.jsonl.zst" > "$out/ollama-layout.report.json"
"$tracer" report "$out/ollama-layout.jsonl.zst" > "$out/ollama-layout.report.txt" 2>&1 || true
grep -q "libllama" "$out/ollama-layout.report.txt" && { echo "a libllama was mapped"; status=1; }
cupti_demangle "$out/cupti-ollama-layout.raw.json" "$out/cupti-ollama-layout.json"
python3 "$here/../compare.py" "$out/ollama-layout.report.json" "$out/cupti-ollama-layout.json" llama-server | tail -3 || status=1
python3 "$here/slots.py" check-inputs "$out/ollama-layout.report.json" "$out/ollama-layout-requests.json" 4 || status=1
sed -n '/phases (/,/API calls tallied/p' "$out/ollama-layout.report.txt" | grep -v 'passes in order' | head -40

echo "== 4 slots, four requests at once (prompts of 11, 23, 290 and 600 tokens), the programs' own time kept"
args=(-m "$models/q4_k_m.gguf" -ngl 99 -c 8192 -np 4 --port "$port" --no-ui)
CUDA_INJECTION64_PATH="$work/libcupti_counts.so" CUPTI_COUNTS="$out/cupti-ollama-layout-4.raw.json" \
  "$tracer" record -q --force --program-stats -o "$out/ollama-layout-4.jsonl.zst" -- "$server" "${args[@]}" \
  > "$out/ollama-layout-4.log" 2>&1 &
tracer_pid=$!
wait_ready
python3 "$here/slots.py" ask "$port" "$out/ollama-layout-4-requests.json"
stop_server "$(server_pid)"
wait "$tracer_pid"
"$tracer" report --json "$out/ollama-layout-4.jsonl.zst" > "$out/ollama-layout-4.report.json"
"$tracer" report "$out/ollama-layout-4.jsonl.zst" > "$out/ollama-layout-4.report.txt" 2>&1 || true
cupti_demangle "$out/cupti-ollama-layout-4.raw.json" "$out/cupti-ollama-layout-4.json"
python3 "$here/../compare.py" "$out/ollama-layout-4.report.json" "$out/cupti-ollama-layout-4.json" llama-server | tail -3 || status=1
python3 "$here/slots.py" check-inputs "$out/ollama-layout-4.report.json" "$out/ollama-layout-4-requests.json" 4 || status=1
grep -E "tensor_set calls|eBPF programs" "$out/ollama-layout-4.report.txt" || true
echo "device time for this run: $(( $(date +%s) - started )) s with the build"
exit $status

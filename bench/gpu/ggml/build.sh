#!/usr/bin/env bash
# Builds llama.cpp's CUDA backend on the GPU machine from the pinned source llama.cpp.tar.gz (the
# vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist, trimmed; bench/gpu/ggml/fetch_source.sh makes it here),
# then the random-weight model in F16, Q4_K_M and Q8_0. Sourced by the harness scripts; sets $bin, $models.
#   LLAMA_TARBALL (default target/llama/llama.cpp.tar.gz), LLAMA_WORK (default /tmp/llama), LLAMA_TARGETS
#   (default "llama-bench llama-quantize llama-server"; run.sh and decode_cost.sh need only the first two)
work="${LLAMA_WORK:-/tmp/llama}"
tarball="${LLAMA_TARBALL:-target/llama/llama.cpp.tar.gz}"
bin="$work/build/bin"
models="$work/models"
targets="${LLAMA_TARGETS:-llama-bench llama-quantize llama-server}"
missing=0
for t in $targets; do [ -x "$bin/$t" ] || missing=1; done
if [ $missing = 1 ]; then
  mkdir -p "$work"
  tar xzf "$tarball" -C "$work"
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
  start=$(date +%s)
  cmake -S "$work/llama.cpp" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF > "$work/cmake.log"
  # shellcheck disable=SC2086 # a list of targets
  cmake --build "$work/build" --target $targets -j "$(nproc)" > "$work/build.log"
  echo "built llama.cpp (CUDA, sm_$arch) in $(( $(date +%s) - start )) s"
fi
if [ ! -f "$models/q4_k_m.gguf" ]; then
  mkdir -p "$models"
  python3 "$(dirname "${BASH_SOURCE[0]}")/make_model.py" "$work/llama.cpp" "$models/f16.gguf"
  "$bin/llama-quantize" "$models/f16.gguf" "$models/q4_k_m.gguf" Q4_K_M > /dev/null 2>&1
  "$bin/llama-quantize" "$models/f16.gguf" "$models/q8_0.gguf" Q8_0 > /dev/null 2>&1
fi

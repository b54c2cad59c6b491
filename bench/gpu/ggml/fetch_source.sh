#!/usr/bin/env bash
# Run here (not on the GPU machine, which reaches no package registry): fetches the pinned llama.cpp
# source, the vendor/llama.cpp of the llama-cpp-python sdist, and trims it to what the CUDA build of
# llama-bench, llama-quantize and llama-server, gguf-py and the llama vocab need (~8 MB): target/llama/llama.cpp.tar.gz.
# The GPU scripts take it with the tracer binary (carry both).
set -euo pipefail
version="${LLAMA_CPP_PYTHON:-0.3.36}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="$root/target/llama"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"
# pip prepares an sdist's metadata even to download it: its build backend must be installed.
python3 -m pip install -q scikit-build-core cmake
python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation "llama-cpp-python==$version" -d "$tmp"
tar xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
vendor="$tmp/llama_cpp_python-$version/vendor"
mkdir -p "$tmp/stage"
tar cf - -C "$vendor" --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/tests \
  --exclude=llama.cpp/examples --exclude=llama.cpp/.github --exclude=llama.cpp/media --exclude=llama.cpp/tools/ui \
  --exclude=llama.cpp/ggml/src/ggml-vulkan --exclude=llama.cpp/ggml/src/ggml-sycl \
  --exclude=llama.cpp/ggml/src/ggml-opencl --exclude=llama.cpp/ggml/src/ggml-cann \
  --exclude=llama.cpp/ggml/src/ggml-webgpu llama.cpp | tar xf - -C "$tmp/stage"
mkdir -p "$tmp/stage/llama.cpp/models"
cp "$vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf" "$tmp/stage/llama.cpp/models/"
# llama-server links the web UI's asset table; built with LLAMA_BUILD_UI=OFF and LLAMA_USE_PREBUILT_UI=OFF
# that table is empty and needs only these files of tools/ui (the UI's sources are left out).
mkdir -p "$tmp/stage/llama.cpp/tools/ui"
cp "$vendor"/llama.cpp/tools/ui/{CMakeLists.txt,sources.cmake,ui.cpp.in,ui.h.in} "$tmp/stage/llama.cpp/tools/ui/"
tar czf "$dest/llama.cpp.tar.gz" -C "$tmp/stage" llama.cpp
ls -la "$dest/llama.cpp.tar.gz"

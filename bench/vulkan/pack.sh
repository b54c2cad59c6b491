#!/usr/bin/env bash
# Packs the llama.cpp Vulkan build of bench/vulkan/build.sh for the GPU machine: llama-bench, llama-quantize
# and their shared libraries in one directory, as target/vkdev/llama-vulkan.tar.gz (bench/vulkan/device.sh
# unpacks it). libggml-vulkan.so is not stripped: its symbol table names the shaders.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${LLAMA_VK_WORK:-/work/llvk}/build/bin"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/compat" "$root/target/vkdev"
# This machine's C++ runtime, for a GPU machine whose own is older (device.sh uses it only then).
cp -L "$(cc -print-file-name=libstdc++.so.6)" "$(cc -print-file-name=libgcc_s.so.1)" "$stage/compat/"
cp -L "$bin/llama-bench" "$bin/llama-quantize" "$bin"/lib*-impl.so "$stage/lib/"
for f in "$bin"/lib*.so.0; do cp -L "$f" "$stage/lib/"; done
tar czf "$root/target/vkdev/llama-vulkan.tar.gz" -C "$stage" lib compat
ls -la "$root/target/vkdev/llama-vulkan.tar.gz"

#!/usr/bin/env bash
# On the GPU machine (run from the repository root, as root): llama.cpp's Vulkan backend, built on the
# development machine by bench/vulkan/build.sh and carried as target/vkdev/llama-vulkan.tar.gz (made by
# bench/vulkan/pack.sh), on the machine's Vulkan driver, under tracer, against gdb's breakpoint counts
# (bench/vulkan/run.sh). The model is made there from the pinned source (target/llama/llama.cpp.tar.gz:
# gguf-py and the vocab) with bench/gpu/ggml/make_model.py and the carried llama-quantize.
# Carry: target/device/tracer, target/vkdev, target/llama/llama.cpp.tar.gz, .gl (the Vulkan loader's .deb,
# as the device notes say). Env: PROMPT, GEN (run.sh's).
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  icd="$(ls /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json 2> /dev/null | head -1 || true)"
  [ -z "$icd" ] || export VK_DRIVER_FILES="$icd"
fi
echo "Vulkan driver file: ${VK_DRIVER_FILES:-none found}"
work=/tmp/vkdev
mkdir -p "$work"
tar xzf target/vkdev/llama-vulkan.tar.gz -C "$work"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -f "$work/q4_k_m.gguf" ]; then
  tar xzf target/llama/llama.cpp.tar.gz -C "$work"
  python3 bench/gpu/ggml/make_model.py "$work/llama.cpp" "$work/f16.gguf" > /dev/null
  "$work/lib/llama-quantize" "$work/f16.gguf" "$work/q4_k_m.gguf" Q4_K_M > /dev/null 2>&1
fi
# The GPU machine has no gdb; cuda-gdb stops in host code as gdb does.
command -v gdb > /dev/null || export GDB=cuda-gdb
# Libraries built on Debian 12 need its libstdc++ where the machine's is older (carried beside them in compat/).
if ! "$work/lib/llama-bench" --help > /dev/null 2>&1; then
  echo "llama-bench does not start with this machine's libraries: $("$work/lib/llama-bench" --help 2>&1 | head -1); using compat/"
  export LD_LIBRARY_PATH="$work/compat:$LD_LIBRARY_PATH"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
TRACER=target/device/tracer LLAMA_VK_BIN="$work/lib" LLAMA_VK_MODEL="$work/q4_k_m.gguf" bench/vulkan/run.sh

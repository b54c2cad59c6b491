#!/usr/bin/env bash
# Builds llama.cpp's Vulkan backend (ggml-vulkan, shared libraries) on this machine from the pinned source,
# the vendor/llama.cpp of the llama-cpp-python sdist (as bench/gpu/ggml/fetch_source.sh pins it), then the
# random-weight model of bench/gpu/ggml/make_model.py in F16 and Q4_K_M. With no GPU, the Vulkan device is
# Mesa's lavapipe (llvmpipe, mesa-vulkan-drivers). The build compiles some hundreds of compute shaders with
# glslc (1117 SPIR-V modules) and takes long on a small machine (570 s at -j2 on 2 cores); run it under nohup.
#
# Needs: cmake (>= 3.19), a C/C++ compiler, glslc, the Vulkan loader (libvulkan-dev), spirv-headers (its CMake
# config), python3 with numpy; ninja is used when found. Debian 12:
#   apt-get install -y cmake ninja-build glslc libvulkan-dev spirv-headers mesa-vulkan-drivers
#   python3 -m pip install numpy
# Debian 12's Vulkan headers (1.3.239) are too old for this ggml-vulkan (it uses vk::LayerSettingEXT, headers
# >= 1.3.272). When the system's vulkan.hpp lacks it, the script takes the headers only (nothing is installed)
# from Debian 13's libvulkan-dev 1.4.309.0-1: `apt-get download` with a private apt configuration under the work
# dir, `dpkg -x` into $LLAMA_VK_WORK/vulkan-headers, passed to cmake as Vulkan_INCLUDE_DIR. The library linked
# is still the system's libvulkan.so.1.
#
# Env knobs:
#   LLAMA_VK_WORK     work dir, outside the repo (default /work/llvk): source copy llama.cpp/, build/ (binaries
#                     and libraries in build/bin), models/ (f16.gguf, q4_k_m.gguf), cmake.log, build.log
#   LLAMA_SRC         an unpacked llama.cpp source tree to build from (default: $LLAMA_VK_WORK/llama.cpp, which
#                     is filled on the first run from the sdist, fetched with pip into a temp dir)
#   LLAMA_SDIST       an already downloaded llama_cpp_python-<version>.tar.gz to take the source from instead of pip
#   LLAMA_CPP_PYTHON  the llama-cpp-python version whose sdist pins the source (default 0.3.36)
#   LLAMA_VK_JOBS     build parallelism (default 2)
#   LLAMA_TARGETS     targets to build (default "llama-bench llama-quantize")
#   LLAMA_VK_REBUILD  1 to build even when the targets already exist (default 0)
#   VULKAN_INCLUDE_DIR  Vulkan headers to build with (default: the system's if new enough, else the above)
#   VK_HEADERS_DEB    Debian suite and libvulkan-dev version for those headers (default "trixie 1.4.309.0-1")
#   LLAMA_VK_NO_MODELS  1 to build only, without the models (`cargo xtask setup` makes the build for a test)
#   LLAMA_VK_STATIC_SERVER  1 to build too a stripped llama-server linked as Ollama links llama.cpp (libllama in
#                     the program, ggml's libraries shared): $LLAMA_VK_WORK/static/bin/llama-server
set -euo pipefail

# A failed step's log said whole: where it is, its lines that say why (wherever they are in it: a compiler's
# error comes before the lines of the jobs that ran beside it), then its last lines.
fail_log() {
  local log="$1" what="$2" n
  echo "build.sh: $what failed; its whole log: $log (below, each line cut at 400 characters)" >&2
  n=$(grep -cE 'error|Error|ERROR|FAILED|No such file|Killed|No space' "$log" || true)
  n="${n:-0}"
  if [ "$n" -gt 0 ]; then
    echo "build.sh: the lines of $log that say why ($n; $(( n > 40 ? n - 40 : 0 )) past the 40th left out here):" >&2
    grep -nE 'error|Error|ERROR|FAILED|No such file|Killed|No space' "$log" | head -40 | cut -c1-400 >&2
  else
    echo "build.sh: no line of $log names an error" >&2
  fi
  echo "build.sh: the last 40 lines of $log:" >&2
  tail -40 "$log" | cut -c1-400 >&2
  exit 1
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${LLAMA_VK_WORK:-/work/llvk}"
version="${LLAMA_CPP_PYTHON:-0.3.36}"
jobs="${LLAMA_VK_JOBS:-2}"
targets="${LLAMA_TARGETS:-llama-bench llama-quantize}"
build="$work/build"
bin="$build/bin"
models="$work/models"
mkdir -p "$work"

for tool in cmake glslc python3; do
  command -v "$tool" > /dev/null || { echo "build.sh: $tool not found (see the header for what to install)" >&2; exit 1; }
done
[ -f /usr/include/vulkan/vulkan.hpp ] || [ -n "${VULKAN_SDK:-}" ] || [ -n "${VULKAN_INCLUDE_DIR:-}" ] ||
  { echo "build.sh: no Vulkan headers (apt-get install libvulkan-dev)" >&2; exit 1; }
[ "${LLAMA_VK_NO_MODELS:-0}" = 1 ] || python3 -c 'import numpy' 2> /dev/null ||
  { echo "build.sh: python3 lacks numpy (pip install numpy)" >&2; exit 1; }
# ggml-vulkan's CMake asks for SPIRV-Headers' package config (Debian's spirv-headers).
[ -f /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ] || [ -n "${CMAKE_PREFIX_PATH:-}" ] ||
  { echo "build.sh: no SPIRV-Headers CMake config (apt-get install spirv-headers)" >&2; exit 1; }

# --- source ------------------------------------------------------------------------------------------------
src="${LLAMA_SRC:-$work/llama.cpp}"
if [ ! -f "$src/CMakeLists.txt" ]; then
  [ -z "${LLAMA_SRC:-}" ] || { echo "build.sh: LLAMA_SRC=$LLAMA_SRC has no CMakeLists.txt" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  sdist="${LLAMA_SDIST:-}"
  if [ -z "$sdist" ]; then
    # pip prepares an sdist's metadata even to download it: its build backend must be installed.
    python3 -m pip install -q scikit-build-core
    python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation "llama-cpp-python==$version" -d "$tmp"
    sdist="$tmp/llama_cpp_python-$version.tar.gz"
  fi
  tar xzf "$sdist" -C "$tmp" "llama_cpp_python-$version/vendor/llama.cpp"
  rm -rf "$src"
  mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp" "$src"
  echo "source: llama.cpp of llama-cpp-python $version sdist -> $src"
fi

# --- Vulkan headers ----------------------------------------------------------------------------------------
vk_inc="${VULKAN_INCLUDE_DIR:-}"
if [ -z "$vk_inc" ] && [ -z "${VULKAN_SDK:-}" ] && ! grep -q LayerSettingEXT /usr/include/vulkan/vulkan_structs.hpp; then
  vk_inc="$work/vulkan-headers/usr/include"
  if [ ! -f "$vk_inc/vulkan/vulkan.hpp" ]; then
    read -r suite vkver <<< "${VK_HEADERS_DEB:-trixie 1.4.309.0-1}"
    apt_dir="$work/apt-$suite"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/deb"
    # The mirror this system's apt already uses for Debian's main archive (deb822 or one-line sources).
    # (A system with deb822 sources alone has no sources.list: grep's status is not the answer.)
    mirror="$( (grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list || true) |
      grep -vE 'security|updates' | grep -oE 'https?://[^ ]+' | head -1)"
    [ -n "$mirror" ] || { echo "build.sh: no Debian mirror in this system's apt sources" >&2; exit 1; }
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" > "$apt_dir/sources.list"
    apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache")
    apt-get -q "${apt_opts[@]}" update > "$apt_dir/update.log" 2>&1 ||
      fail_log "$apt_dir/update.log" "apt-get update (Debian $suite's lists, for the Vulkan headers)"
    (cd "$apt_dir/deb" && apt-get -q "${apt_opts[@]}" download "libvulkan-dev=$vkver" > ../download.log 2>&1) ||
      fail_log "$apt_dir/download.log" "apt-get download libvulkan-dev=$vkver"
    dpkg -x "$apt_dir"/deb/libvulkan-dev_*.deb "$work/vulkan-headers"
  fi
  echo "Vulkan headers: $vk_inc ($(grep -m1 '#define VK_HEADER_VERSION ' "$vk_inc/vulkan/vulkan_core.h"))"
fi
vk_args=()
[ -z "$vk_inc" ] || vk_args=(-DVulkan_INCLUDE_DIR="$vk_inc")

# --- build -------------------------------------------------------------------------------------------------
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
missing="${LLAMA_VK_REBUILD:-0}"
for t in $targets; do [ -x "$bin/$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  start=$(date +%s)
  # Web UI off as in bench/gpu/ggml/build.sh (the server is not built here anyway).
  if ! cmake -S "$src" -B "$build" "${gen[@]}" "${vk_args[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON > "$work/cmake.log" 2>&1; then
    fail_log "$work/cmake.log" "cmake (configure)"
  fi
  # shellcheck disable=SC2086 # a list of targets
  if ! cmake --build "$build" --target $targets -j "$jobs" > "$work/build.log" 2>&1; then
    fail_log "$work/build.log" "cmake --build"
  fi
  echo "built llama.cpp (Vulkan) in $(( $(date +%s) - start )) s (-j$jobs; logs $work/cmake.log, $work/build.log)"
fi
ls "$bin"/*.so* 2> /dev/null || true

# --- llama-server linked as Ollama links llama.cpp ---------------------------------------------------------
# Ollama's llama engine links llama.cpp into its Go binary and loads ggml's libraries (libggml-base.so and a
# backend each) from lib/ollama: no libllama.so is mapped. The same here: the shared build's ggml installed into
# $work/ggml-prefix, the server built against it with libllama and llama.cpp's common code linked in
# (LLAMA_USE_SYSTEM_GGML, BUILD_SHARED_LIBS off), then stripped as Ollama's release binaries are. Its run path
# names the prefix as a DT_RPATH (--disable-new-dtags), which the loader also applies to libggml.so's own
# dependencies (the CPU and Vulkan backends): it runs from where it lies.
static="$work/static"
if [ "${LLAMA_VK_STATIC_SERVER:-0}" = 1 ] && [ ! -x "$static/bin/llama-server" ]; then
  start=$(date +%s)
  # Every file ggml's install rules name is built first (a no-op after the build above; where the targets were
  # already there, it finishes a build dir left partial), then installed into a fresh staging prefix, checked,
  # and only then moved into place: a failed or partial install never stays behind as the prefix. DESTDIR is
  # unset: it would send the files elsewhere.
  if ! cmake --build "$build" --target ggml ggml-base ggml-cpu ggml-vulkan -j "$jobs" > "$work/ggml-build.log" 2>&1; then
    fail_log "$work/ggml-build.log" "cmake --build (ggml's libraries, before their install)"
  fi
  stage="$work/ggml-prefix.tmp"
  rm -rf "$stage"
  mkdir -p "$stage"
  if ! env -u DESTDIR cmake --install "$build/ggml" --prefix "$stage" > "$work/ggml-install.log" 2>&1; then
    fail_log "$work/ggml-install.log" "cmake --install $build/ggml"
  fi
  for f in lib/cmake/ggml/ggml-config.cmake include/ggml.h lib/libggml.so lib/libggml-base.so lib/libggml-cpu.so \
      lib/libggml-vulkan.so; do
    [ -e "$stage/$f" ] || { echo "build.sh: ggml's install left no $stage/$f" >&2; fail_log "$work/ggml-install.log" "cmake --install $build/ggml"; }
  done
  rm -rf "$work/ggml-prefix"
  mv "$stage" "$work/ggml-prefix"
  if ! cmake -S "$src" -B "$static" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_SYSTEM_GGML=ON \
      -Dggml_DIR="$work/ggml-prefix/lib/cmake/ggml" -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
      > "$work/static-cmake.log" 2>&1; then
    fail_log "$work/static-cmake.log" "cmake (configure of the Ollama-linked llama-server)"
  fi
  if ! cmake --build "$static" --target llama-server -j "$jobs" > "$work/static-build.log" 2>&1; then
    fail_log "$work/static-build.log" "cmake --build of the Ollama-linked llama-server"
  fi
  strip "$static/bin/llama-server"
  echo "built llama-server with libllama linked in, ggml shared, stripped, in $(( $(date +%s) - start )) s"
fi

# --- model -------------------------------------------------------------------------------------------------
if [ "${LLAMA_VK_NO_MODELS:-0}" = 1 ]; then
  exit 0
fi
if [ ! -f "$models/q4_k_m.gguf" ]; then
  mkdir -p "$models"
  python3 "$root/bench/gpu/ggml/make_model.py" "$src" "$models/f16.gguf"
  "$bin/llama-quantize" "$models/f16.gguf" "$models/q4_k_m.gguf" Q4_K_M > "$work/quantize.log" 2>&1 ||
    fail_log "$work/quantize.log" "llama-quantize"
fi
ls -la "$models"

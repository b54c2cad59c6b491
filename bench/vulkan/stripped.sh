#!/usr/bin/env bash
# A stripped ggml-vulkan against the unstripped copy it was stripped from: the pinned llama.cpp's Vulkan build
# (bench/vulkan/build.sh), its libggml-vulkan.so copied and stripped (`strip --strip-all`: no symbol table, as
# Debian and Ollama ship it), the same llama-bench run under tracer once with each copy, on this machine's Vulkan
# device (Mesa's lavapipe where there is no GPU). Tracer finds ggml's pipeline maker in either copy's code
# (record/probes/ggml_vulkan.rs) and names each pipeline by ggml's own name, read as ggml makes it: every
# dispatch should be SAME. With UNFOUND=1 the assertion text tracer finds that function by is changed in both
# copies (as another ggml version could have it): the unstripped copy then names each pipeline by its SPIR-V
# array's symbol, the stripped one by the calls in the library's code that create pipelines
# (record/names/pipelines.rs). That the two copies agree is the check: the symbol table is a second source
# nobody here wrote.
#
#   bench/vulkan/stripped.sh       (as root; builds llama.cpp with bench/vulkan/build.sh first if needed)
#
# Env knobs: TRACER (default target/release/tracer), LLAMA_VK_WORK (see build.sh), PROMPT (default 8), GEN
# (default 4), UNFOUND (default 0). GGML_VK_VISIBLE_DEVICES=0 is set: ggml-vulkan skips a CPU-type device
# (lavapipe) unless named. The two runs dispatch the same kernels in the same order (llama-bench's graph is
# deterministic): each dispatch's kernel with one copy is compared with the other's. Prints per pair of names its
# dispatches and
#   SAME      the names are equal;
#   AMONG     the stripped copy's name lists every pipeline ggml makes from that module, the array's among them;
#   RUN-TIME  the stripped copy left it unnamed by ggml (its pipeline's name is built at run time: named by its
#             SPIR-V, counted);
#   MISMATCH  anything else (a wrong name: exit status 1);
# then the counts of each, and whether both runs dispatched the same kernels as often.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tracer="${TRACER:-$root/target/release/tracer}"
work="${LLAMA_VK_WORK:-/work/llvk}"
"$here/build.sh" > /dev/null
bin="$work/build/bin"
model="$work/models/q4_k_m.gguf"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export GGML_VK_VISIBLE_DEVICES=0

# The copies: the whole bin directory (its libraries find each other by RUNPATH; LD_LIBRARY_PATH, which comes
# first, points the run at the copy).
cp -a "$bin" "$out/full"
cp -a "$bin" "$out/stripped"
lib="$(readlink -f "$out/stripped/libggml-vulkan.so")"
strip --strip-all "$lib"
echo "stripped: $lib ($(nm "$lib" 2>&1 | head -1))"
if [ "${UNFOUND:-0}" = 1 ]; then
  for copy in full stripped; do
    sed -i 's/wg_denoms\[0\] > 0 && wg_denoms\[1\] > 0/wg_denoms[0] ! 0 \&\& wg_denoms[1] > 0/' \
      "$(readlink -f "$out/$copy/libggml-vulkan.so")"
  done
fi

bench=(-m "$model" -p "${PROMPT:-8}" -n "${GEN:-4}" -r 1 -ngl 99)
"$tracer" record -q -o "$out/full.jsonl" -- env LD_LIBRARY_PATH="$out/full" "$out/full/llama-bench" "${bench[@]}" \
  > "$out/full.txt" 2>&1
"$tracer" record -q -o "$out/stripped.jsonl" -- env LD_LIBRARY_PATH="$out/stripped" "$out/stripped/llama-bench" \
  "${bench[@]}" > "$out/stripped.txt" 2>&1
python3 - "$out/full.jsonl" "$out/stripped.jsonl" << 'EOF'
import json, sys

def dispatches(path):
    """Each vkCmdDispatch in order (llama-bench's: the only process that makes any): its kernel's name, source."""
    names, seq = {}, []
    for line in open(path):
        r = json.loads(line)
        if r["type"] == "kernel":
            names[(r["pid"], r["id"])] = (r["name"], r["source"])
        elif r["type"] == "launch" and r["api"] == "vkCmdDispatch":
            seq.append((r["pid"], r["kernel"]))
    return [names.get(k, ("?", "unnamed")) for k in seq]

full, stripped = dispatches(sys.argv[1]), dispatches(sys.argv[2])
if len(full) != len(stripped) or not full:
    print(f"MISMATCH: {len(full)} dispatches unstripped, {len(stripped)} stripped")
    sys.exit(1)
# The same deterministic run: dispatch i of one is dispatch i of the other.
pairs = {}
for f, s in zip(full, stripped):
    pairs[(f, s)] = pairs.get((f, s), 0) + 1
tally = {}
for ((fname, _), (sname, ssource)), n in sorted(pairs.items(), key=lambda kv: -kv[1]):
    if fname == sname:
        verdict = "SAME"
    elif ssource == "shader" and fname in sname.split("|"):
        verdict = "AMONG"
    elif ssource == "spirv":
        verdict = "RUN-TIME"
    else:
        verdict = "MISMATCH"
    tally[verdict] = tally.get(verdict, 0) + n
    print(f"{verdict:9} {n:5}  {fname:32} {sname}")
print("dispatches:", "; ".join(f"{k} {v}" for k, v in sorted(tally.items())), "of", len(full))
sys.exit(1 if "MISMATCH" in tally else 0)
EOF

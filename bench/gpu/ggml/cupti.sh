# The CUPTI oracle for the ggml harnesses (sourced after common.sh and build.sh): builds cupti_counts.c
# against the machine's CUPTI into $work/libcupti_counts.so (use it with CUDA_INJECTION64_PATH and
# CUPTI_COUNTS=FILE), and cupti_demangle RAW OUT, which turns its counts by mangled name into counts by
# demangled name (as `tracer report --json` names kernels) and prints the totals.
cuda="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
cupti="$cuda/extras/CUPTI"
[ -d "$cupti/include" ] || cupti="$cuda"
krec="$(grep -o 'CUpti_ActivityKernel[0-9]\+' "$cupti/include/cupti_activity.h" | sort -u -V | tail -1)"
cc -O2 -Wall -shared -fPIC -DKREC="$krec" -I"$cupti/include" -I"$cuda/include" "$here/cupti_counts.c" \
  -o "$work/libcupti_counts.so" -L"$cupti/lib64" -lcupti -Wl,-rpath,"$cupti/lib64"
echo "CUPTI oracle built ($krec)"
cupti_demangle() {
  python3 - "$1" "$2" <<'PY'
import json, subprocess, sys
raw = json.load(open(sys.argv[1]))
names = sorted(raw["kernels"])
out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
json.dump({d: raw["kernels"][n] for n, d in zip(names, out)}, open(sys.argv[2], "w"))
print(f"CUPTI: {sum(raw['kernels'].values())} executions of {len(names)} kernels, {raw['dropped']} records dropped")
PY
}

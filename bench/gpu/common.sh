# Shared set-up of the scripts under bench/gpu (sourced, not run): the tracer binary ($1 or
# target/release/tracer), the results folder ($OUT or ./gpu-results), tracefs mounted, and the
# path of the machine's libcuda.so.1 (ldconfig's, else the container runtime's usual place).
tracer="${1:-target/release/tracer}"
out="${OUT:-gpu-results}"
mkdir -p "$out"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
export PYTHONUNBUFFERED=1
libcuda="$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')"
[ -n "$libcuda" ] || libcuda=/usr/local/nvidia/lib64/libcuda.so.1

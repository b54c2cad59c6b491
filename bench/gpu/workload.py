"""The PyTorch workload of the real-GPU check (bench/gpu/cuda_check.sh).

  --mode trace    run the workload (under `tracer record`)
  --mode oracle   run the same workload under torch.profiler (CUPTI); write per-kernel counts as JSON
  --mode loop     a launch-bound loop (x.add_(1)); print microseconds per launch

The workload: matmul + ReLU + add (cuBLAS and PyTorch element-wise kernels), then the same step captured
into a CUDA graph and replayed. Nothing launches a kernel before the profiled region starts (inputs are
copied from the host), so tracer's whole-process counts and CUPTI's region counts cover the same work.
"""

import argparse
import collections
import json
import sys
import time

import torch

ITERS = 10
REPLAYS = 20
N = 1024


def step(x, y):
    return torch.relu(x @ y) + 1


def libraries(x):
    """A convolution (cuDNN) and a user-written Triton kernel (when Triton is installed): kernels whose
    code comes from libraries other than cuBLAS, and from an image compiled at run time."""
    w = torch.randn(16, 1, 3, 3, device="cuda")
    for _ in range(ITERS):
        torch.nn.functional.conv2d(x[None, None, :64, :64], w)
    try:
        import triton
        import triton.language as tl
    except ImportError:
        print("triton: not installed, its part skipped", file=sys.stderr)
        return

    @triton.jit
    def add_one(ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + i, tl.load(ptr + i, mask=i < n) + 1, mask=i < n)

    flat = x.reshape(-1)
    for _ in range(ITERS):
        add_one[(triton.cdiv(flat.numel(), 1024),)](flat, flat.numel(), BLOCK=1024)


def workload(x, y, with_libraries=False):
    if with_libraries:
        libraries(x.clone())
    for _ in range(ITERS):
        step(x, y)
    static_x = torch.empty_like(x)
    static_x.copy_(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up before capture, as PyTorch's docs ask
            step(static_x, y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(static_x, y)
    for _ in range(REPLAYS):
        graph.replay()
    torch.cuda.synchronize()


def inputs():
    torch.manual_seed(0)
    x = torch.randn(N, N).to("cuda")  # host-to-device copies: no kernel
    y = torch.randn(N, N).to("cuda")
    torch.cuda.synchronize()
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["trace", "oracle", "loop"], required=True)
    ap.add_argument("--out", default="oracle.json")
    ap.add_argument("--launches", type=int, default=20_000, help="launches per timed round (loop mode)")
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds (loop mode)")
    ap.add_argument("--libraries", action="store_true", help="add a cuDNN convolution and a Triton kernel")
    a = ap.parse_args()
    if a.mode == "loop":
        x = torch.zeros(1, device="cuda")
        for _ in range(5_000):
            x.add_(1)
        torch.cuda.synchronize()
        per_launch = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            for _ in range(a.launches):
                x.add_(1)
            torch.cuda.synchronize()
            per_launch.append((time.perf_counter() - t0) / a.launches * 1e6)
        per_launch.sort()
        print(
            json.dumps(
                {
                    "launches": 5_000 + a.launches * a.rounds,
                    "us_per_launch": per_launch[len(per_launch) // 2],
                    "us_per_launch_min": per_launch[0],
                }
            )
        )
        return
    x, y = inputs()
    if a.mode == "trace":
        workload(x, y, a.libraries)
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        workload(x, y, a.libraries)
    counts = collections.Counter()
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if e.name.startswith(("Memcpy", "Memset")):
            continue
        counts[e.name] += 1
    json.dump(counts, open(a.out, "w"), indent=1, sort_keys=True)
    print(f"oracle: {sum(counts.values())} kernel executions, {len(counts)} kernels", file=sys.stderr)


if __name__ == "__main__":
    main()

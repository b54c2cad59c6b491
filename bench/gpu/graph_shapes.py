"""CUDA graphs of several shapes, captured with PyTorch's default (the source graph destroyed once the
executable is made), each replayed twice (bench/gpu/graph_copies.sh).

`python3 graph_shapes.py SHAPE...`, each SHAPE one of: `lin:N` (N element-wise kernels, one after another),
`fork` (a kernel on a side stream joined back: two branches), `copy:N` (N kernels around a device-to-device
copy). tracer, recording from the start, reads the first four executables of a process at their first
replay and checks them against what it saw captured; the script prints each graph's kernel count as
PyTorch built it.
"""

import sys

import torch

x = torch.ones(1024, device="cuda")
side = torch.cuda.Stream()


def shape(spec):
    kind, _, n = spec.partition(":")
    n = int(n or 0)

    def run():
        y = x
        if kind == "lin":
            for _ in range(n):
                y = y + 1
        elif kind == "fork":
            a = x * 2
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                b = x + 1
            torch.cuda.current_stream().wait_stream(side)
            y = a + b
        elif kind == "copy":
            for _ in range(n):
                y = y + 1
            z = torch.empty_like(y)
            z.copy_(y)
            y = z * 2
        return y

    return run


graphs = []
for spec in sys.argv[1:]:
    run = shape(spec)
    run()  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = run()
    graphs.append((spec, g, out))
for spec, g, out in graphs:
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    print(f"{spec}: replayed, sum {float(out.sum())}", flush=True)

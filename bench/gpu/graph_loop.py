"""A PyTorch loop replaying one CUDA graph, already running when tracer attaches (bench/gpu/graph_late.sh).

`python3 graph_loop.py keep|default [SECONDS]`: a small transformer-like block (cuBLAS GEMMs, layer norm,
GELU, softmax, residual adds) captured once with `torch.cuda.graphs`, then replayed with the result copied to
the host after each replay (as a token's logits are), until killed or for SECONDS. `keep` captures with
`torch.cuda.CUDAGraph(keep_graph=True)` (the source graph lives on); `default` with PyTorch's default, which
destroys the source graph once the executable is made. Prints "ready" after the first replay.
"""

import sys
import time

import torch

keep = sys.argv[1] == "keep"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else None
torch.manual_seed(0)
dim = 1024
w = [torch.randn(dim, dim, device="cuda", dtype=torch.float16) / 32 for _ in range(4)]
norm = torch.nn.LayerNorm(dim, device="cuda", dtype=torch.float16)
x = torch.randn(16, dim, device="cuda", dtype=torch.float16)


def block(h):
    for m in w:
        a = torch.softmax(norm(h) @ m, dim=-1)
        h = h + torch.nn.functional.gelu(a @ m.t())
    return h.float().sum()


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        block(x)
torch.cuda.current_stream().wait_stream(side)
print(f"torch {torch.__version__}, cuda {torch.version.cuda}", flush=True)
g = torch.cuda.CUDAGraph(keep_graph=True) if keep else torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = block(x)
if keep and hasattr(g, "instantiate"):
    g.instantiate()
g.replay()
out.item()
print("ready", flush=True)
end = None if seconds is None else time.monotonic() + seconds
replays = 0
while end is None or time.monotonic() < end:
    g.replay()
    out.item()
    replays += 1
print(f"replays {replays}", flush=True)

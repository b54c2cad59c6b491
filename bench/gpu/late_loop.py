"""A PyTorch eager generate loop that is already running when tracer attaches (bench/gpu/late_attach.sh).

The small random-weight Llama of real_mix.py generates tokens again and again (cuBLAS/cuBLASLt GEMMs,
PyTorch element-wise and reduction kernels, SDPA); "ready" is printed after the first generate, when
every kernel has been loaded and resolved, then it loops until killed.
"""

import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from real_mix import generate, llama  # noqa: E402

model = llama()
generate(model)
torch.cuda.synchronize()
print("ready", flush=True)
while True:
    generate(model)

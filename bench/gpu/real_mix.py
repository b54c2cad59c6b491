"""A real PyTorch mix for the report (bench/gpu/record_real.sh records it under tracer).

What a user of tracer runs on a GPU, in one process, from libraries nobody here wrote:
  - a small Llama (Hugging Face transformers, random weights built from a config: nothing is downloaded)
    generating tokens in eager mode: cuBLAS/cuBLASLt GEMMs, PyTorch element-wise and reduction kernels,
    scaled-dot-product attention;
  - the same model's forward under torch.compile (Inductor): Triton kernels, compiled by helper processes
    (ptxas), which tracer follows;
  - attention through each SDPA backend that runs here: cuDNN, flash, memory-efficient;
  - a convolution (cuDNN);
  - an all-reduce through NCCL with one rank, when NCCL initialises.
Prints one line per part; a part that cannot run here says why and the rest goes on.
"""

import os
import sys

import torch


def part(name, fn):
    try:
        fn()
        torch.cuda.synchronize()
        print(f"{name}: ok", flush=True)
    except Exception as e:  # noqa: BLE001 - a part that cannot run here is reported, the rest goes on
        print(f"{name}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:160]})", flush=True)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    model.config._attn_implementation = "sdpa"
    return model


def generate(model):
    ids = torch.randint(0, 4096, (1, 32), device="cuda")
    with torch.no_grad():
        model.generate(ids, max_new_tokens=16, do_sample=False, min_new_tokens=16)


def compiled(model):
    fwd = torch.compile(model.forward)
    ids = torch.randint(0, 4096, (1, 64), device="cuda")
    with torch.no_grad():
        for _ in range(3):
            fwd(input_ids=ids)


def sdpa_backends():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(1, 8, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        part(f"  sdpa {backend.name}", lambda b=backend: _sdpa(sdpa_kernel, b, q, k, v))


def _sdpa(sdpa_kernel, backend, q, k, v):
    with sdpa_kernel(backend):
        for _ in range(2):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def conv():
    torch.backends.cudnn.benchmark = False
    c = torch.nn.Conv2d(16, 32, 3, padding=1).to("cuda", torch.float16)
    x = torch.randn(4, 16, 64, 64, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        for _ in range(2):
            c(x)


def nccl():
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    t = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.destroy_process_group()


def main():
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    model = llama()
    part("llama generate (eager, sdpa)", lambda: generate(model))
    part("llama forward (torch.compile, Inductor/Triton)", lambda: compiled(model))
    part("sdpa backends", sdpa_backends)
    part("conv2d (cuDNN)", conv)
    part("all-reduce (NCCL, one rank)", nccl)


if __name__ == "__main__":
    main()

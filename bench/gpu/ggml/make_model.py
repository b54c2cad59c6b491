"""Writes a small random-weight llama GGUF (F16) with llama.cpp's own gguf-py and the tokenizer of its
vocab-only `models/ggml-vocab-llama-spm.gguf`; `llama-quantize` then makes the quantized models.

  python3 make_model.py LLAMA_CPP_DIR OUT.gguf

Shapes: 4 layers, embedding 512, 8 heads of 64 (4 KV heads), feed-forward 1536: every row a multiple of 256,
as the K-quants need, and a head size ggml-cuda's flash attention has kernels for.
"""

import sys

import numpy as np

src, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, f"{src}/gguf-py")
import gguf  # noqa: E402

N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 512, 4, 8, 4, 1536, 4096
HEAD = N_EMBD // N_HEAD

vocab = gguf.GGUFReader(f"{src}/models/ggml-vocab-llama-spm.gguf")
field = lambda k: vocab.fields[k].contents()  # noqa: E731
tokens = field("tokenizer.ggml.tokens")

w = gguf.GGUFWriter(out, "llama")
w.add_context_length(N_CTX)
w.add_embedding_length(N_EMBD)
w.add_block_count(N_LAYER)
w.add_feed_forward_length(N_FF)
w.add_head_count(N_HEAD)
w.add_head_count_kv(N_HEAD_KV)
w.add_rope_dimension_count(HEAD)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(field("tokenizer.ggml.scores"))
w.add_token_types(field("tokenizer.ggml.token_type"))
w.add_bos_token_id(field("tokenizer.ggml.bos_token_id"))
w.add_eos_token_id(field("tokenizer.ggml.eos_token_id"))

rng = np.random.default_rng(0)


def matrix(rows, cols):
    return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)


w.add_tensor("token_embd.weight", matrix(len(tokens), N_EMBD))
w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
w.add_tensor("output.weight", matrix(len(tokens), N_EMBD))
for i in range(N_LAYER):
    b = f"blk.{i}."
    w.add_tensor(b + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor(b + "attn_q.weight", matrix(N_EMBD, N_EMBD))
    w.add_tensor(b + "attn_k.weight", matrix(N_HEAD_KV * HEAD, N_EMBD))
    w.add_tensor(b + "attn_v.weight", matrix(N_HEAD_KV * HEAD, N_EMBD))
    w.add_tensor(b + "attn_output.weight", matrix(N_EMBD, N_EMBD))
    w.add_tensor(b + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor(b + "ffn_gate.weight", matrix(N_FF, N_EMBD))
    w.add_tensor(b + "ffn_up.weight", matrix(N_FF, N_EMBD))
    w.add_tensor(b + "ffn_down.weight", matrix(N_EMBD, N_FF))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {out}: {len(tokens)} tokens, {N_LAYER} layers")

// decode_api: llama.cpp's C API as Ollama's runner and llama-cpp-python call it: `llama_decode` with a
// `struct llama_batch` built by `llama_batch_init` (passed by value), two sequences as a 2-slot server would
// batch them. Step 1: sequence 0's prompt of 11 tokens; step 2: sequence 0's decode token beside sequence
// 1's prompt of 23; then 6 steps of both sequences decoding one token each. Prints its truth as one JSON line.
//   decode_api MODEL.gguf
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void add(struct llama_batch *b, llama_token t, llama_pos pos, llama_seq_id seq, int8_t logits) {
    int i = b->n_tokens++;
    b->token[i] = t;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 99;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.n_seq_max = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    struct llama_batch b = llama_batch_init(512, 0, 2);
    int failed = 0, steps = 0;
    // Step 1: a prompt of 11 tokens on sequence 0.
    b.n_tokens = 0;
    for (int i = 0; i < 11; i++) add(&b, 100 + i, i, 0, i == 10);
    failed += llama_decode(ctx, b) != 0, steps++;
    // Step 2: sequence 0's sampled token, then sequence 1's prompt of 23.
    b.n_tokens = 0;
    add(&b, 200, 11, 0, 1);
    for (int i = 0; i < 23; i++) add(&b, 300 + i, i, 1, i == 22);
    failed += llama_decode(ctx, b) != 0, steps++;
    // Steps 3-8: both decode.
    for (int s = 0; s < 6; s++) {
        b.n_tokens = 0;
        add(&b, 400 + s, 12 + s, 0, 1);
        add(&b, 500 + s, 23 + s, 1, 1);
        failed += llama_decode(ctx, b) != 0, steps++;
    }
    llama_synchronize(ctx);
    printf("{\"steps\": %d, \"failed\": %d, \"prefill\": 1, \"mixed\": 1, \"decode\": 6, \"prompt_tokens\": 34, "
           "\"decode_tokens\": 13}\n", steps, failed);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return failed ? 1 : 0;
}

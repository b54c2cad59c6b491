// The cost of one probed call, by the kind of call llama.cpp's decode loop makes, in a tight loop of that
// call alone: built and run on the GPU machine by trap_cost.sh with no tracer, with empty programs on the
// same attach points, and with tracer. What tracer adds beyond the empty programs is what its programs do
// (filter, tally, gate, write, read parameters); what the empty programs add is the trap itself.
//   trap_cost [ITERATIONS [KIND]]   prints "KIND ns_per_call" for each kind (or the one named), the median
//   of 5 passes; kinds: sync, htod, launch, graph, dtoh (a copy to the host and its sync, per pair)
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

__global__ void noop(int x) {
    if (x == 12345) printf("unreachable\n");
}

#define CHECK(call)                                                  \
    do {                                                             \
        CUresult r_ = (call);                                        \
        if (r_ != CUDA_SUCCESS) {                                    \
            fprintf(stderr, "%s failed: %d\n", #call, (int)r_);      \
            exit(1);                                                 \
        }                                                            \
    } while (0)

static double now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

// Every 256 iterations the stream is drained, so enqueued work never fills the queue; those syncs are
// part of the figure (1 in 256) as in the loop they come from.
template <typename F>
static double per_call(int n, CUstream s, F body) {
    std::vector<double> passes;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            body();
            if ((i & 255) == 255) CHECK(cuStreamSynchronize(s));
        }
        CHECK(cuStreamSynchronize(s));
        passes.push_back((now_ns() - t0) / n);
    }
    std::sort(passes.begin(), passes.end());
    return passes[2];
}

int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    const char* only = argc > 2 ? argv[2] : nullptr;
    auto want = [&](const char* kind) { return !only || strcmp(only, kind) == 0; };
    cudaFree(0);  // the runtime makes the primary context current
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, 4096));
    int* h;
    CHECK(cuMemAllocHost((void**)&h, 4096));
    CUfunction f;
    if (cudaGetFuncBySymbol(&f, (const void*)noop) != cudaSuccess) return 1;
    int arg = 1;
    void* params[] = {&arg};
    // A one-kernel graph, replayed as llama.cpp replays its decode graph.
    CUgraph g;
    CUgraphExec ge;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphInstantiate(&ge, g, 0));

    if (want("sync")) printf("sync %.1f\n", per_call(n, s, [&] { CHECK(cuStreamSynchronize(s)); }));
    if (want("htod")) printf("htod %.1f\n", per_call(n, s, [&] { CHECK(cuMemcpyHtoDAsync(d, h, 4, s)); }));
    if (want("launch"))
        printf("launch %.1f\n",
               per_call(n, s, [&] { CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr)); }));
    if (want("graph")) printf("graph %.1f\n", per_call(n, s, [&] { CHECK(cuGraphLaunch(ge, s)); }));
    // A copy toward the host and the sync that waits for it: the pattern that ends a decode step (the sync
    // is then written, not tallied). Per pair.
    if (want("dtoh"))
        printf("dtoh %.1f\n", per_call(n / 2, s, [&] {
                   CHECK(cuMemcpyDtoHAsync(h, d, 4, s));
                   CHECK(cuStreamSynchronize(s));
               }));
    return 0;
}

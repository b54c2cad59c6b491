/* Benchmark driver: calls hipLaunchKernel in a loop, from several threads, optionally paced.
 *   launch_loop count N [threads]      N calls per thread as fast as possible; prints ns per call
 *   launch_loop paced RATE SECONDS     RATE calls per second for SECONDS, one thread
 *   launch_loop tokens N               N decode "tokens" shaped like ggml's HIP/CUDA backend with graphs:
 *                                      per token one hipGraphLaunch and 14 hipStreamSynchronize
 *   launch_loop eager N                N decode "tokens" shaped like llama.cpp's CUDA decode without graphs
 *                                      (H100, Q4_K_M, GGML_CUDA_DISABLE_GRAPHS=1): per token 82 launches,
 *                                      15 syncs, 7 async copies toward the device and 1 back (the logits)
 * Prints one line: "calls=<total> ns_per_call=<mean over all threads> cpu_s=<own CPU seconds>"
 * (tokens: "tokens=<N> ns_per_token=<mean> cpu_s=<own CPU seconds>"). */
#include <pthread.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { uint32_t x, y, z; } dim3;
int hipLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t shmem, void* stream);
int hipGraphLaunch(void* exec, void* stream);
int hipStreamSynchronize(void* stream);
int hipMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream);

static void kernel_stub(void) {}

/* This process's own CPU time, so a harness can subtract it from a tracer that started it. */
static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static long per_thread;
static uint64_t elapsed[64];

static void* worker(void* arg) {
    long id = (long)arg;
    dim3 g = {64, 1, 1}, b = {256, 1, 1};
    void* args[1] = {0};
    uint64_t t0 = now_ns();
    for (long i = 0; i < per_thread; i++) hipLaunchKernel((const void*)kernel_stub, g, b, args, 0, 0);
    elapsed[id] = now_ns() - t0;
    return NULL;
}

int main(int argc, char** argv) {
    if (argc >= 3 && strcmp(argv[1], "count") == 0) {
        per_thread = atol(argv[2]);
        int threads = argc > 3 ? atoi(argv[3]) : 1;
        if (threads < 1 || threads > 64) return 2;
        pthread_t t[64];
        for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void*)i);
        uint64_t sum = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += elapsed[i];
        }
        printf("calls=%ld ns_per_call=%.1f cpu_s=%.3f\n", per_thread * threads, (double)sum / (per_thread * threads), cpu_s());
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "paced") == 0) {
        long rate = atol(argv[2]);
        double seconds = atof(argv[3]);
        long total = (long)(rate * seconds);
        dim3 g = {64, 1, 1}, b = {256, 1, 1};
        void* args[1] = {0};
        uint64_t t0 = now_ns();
        for (long i = 0; i < total; i++) {
            uint64_t due = t0 + (uint64_t)(i * (1e9 / rate));
            while (now_ns() < due) {
                struct timespec s = {0, 20000};
                nanosleep(&s, NULL);
            }
            hipLaunchKernel((const void*)kernel_stub, g, b, args, 0, 0);
        }
        printf("calls=%ld ns_per_call=%.1f cpu_s=%.3f\n", total, (double)(now_ns() - t0) / total, cpu_s());
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "tokens") == 0) {
        long tokens = atol(argv[2]);
        static char exec;
        uint64_t t0 = now_ns();
        for (long i = 0; i < tokens; i++) {
            hipGraphLaunch(&exec, 0);
            for (int s = 0; s < 14; s++) hipStreamSynchronize(0);
        }
        printf("tokens=%ld ns_per_token=%.1f cpu_s=%.3f\n", tokens, (double)(now_ns() - t0) / tokens, cpu_s());
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "eager") == 0) {
        long tokens = atol(argv[2]);
        static char up[64], logits[64];
        dim3 g = {64, 1, 1}, b = {256, 1, 1};
        void* args[1] = {0};
        uint64_t t0 = now_ns();
        for (long i = 0; i < tokens; i++) {
            for (int c = 0; c < 7; c++) hipMemcpyAsync(up, logits, sizeof up, 1, 0); /* hipMemcpyHostToDevice */
            for (int k = 0; k < 82; k++) {
                hipLaunchKernel((const void*)kernel_stub, g, b, args, 0, 0);
                if (k % 5 == 4 && k / 5 < 14) hipStreamSynchronize(0);
            }
            hipMemcpyAsync(logits, up, sizeof logits, 2, 0); /* hipMemcpyDeviceToHost */
            hipStreamSynchronize(0);
        }
        printf("tokens=%ld ns_per_token=%.1f cpu_s=%.3f\n", tokens, (double)(now_ns() - t0) / tokens, cpu_s());
        return 0;
    }
    fprintf(stderr, "usage: launch_loop count N [threads] | paced RATE SECONDS | tokens N | eager N\n");
    return 2;
}

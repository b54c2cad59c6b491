/* TEST DOUBLE for benchmarks: a stand-in libamdhip64 whose probed entry points return at once.
 *
 * The real runtime spends ~30 us failing each hipLaunchKernel without a GPU, which would drown the
 * cost of the probes; this library exports the same symbol names under the same version node
 * (hip_4.2), so tracer attaches to it exactly as to the real one. Used by `cargo xtask bench` only. */
#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t x, y, z; } dim3;
typedef int hipError_t;

#define API __attribute__((visibility("default"), noinline))

API hipError_t hipLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t shmem, void* stream) {
    __asm__ volatile("" ::"r"(f), "r"(args), "r"(shmem), "r"(stream) : "memory");
    return (hipError_t)(g.x == 0 || b.x == 0);
}
API hipError_t __hipPushCallConfiguration(dim3 g, dim3 b, size_t shmem, void* stream) {
    __asm__ volatile("" ::"r"(shmem), "r"(stream) : "memory");
    return (hipError_t)(g.x == 0 || b.x == 0);
}
API void** __hipRegisterFatBinary(const void* data) { return (void**)data; }
API void __hipRegisterFunction(void** modules, const void* host, char* dev, const char* name, unsigned limit,
                               void* tid, void* bid, dim3* bd, dim3* gd, int* ws) {
    __asm__ volatile("" ::"r"(modules), "r"(host), "r"(dev), "r"(name) : "memory");
}
API hipError_t hipMalloc(void** p, size_t n) { *p = (void*)0x1000; return n == 0; }
API hipError_t hipFree(void* p) { return p == NULL; }
API hipError_t hipMemcpy(void* d, const void* s, size_t n, int kind) { return d == s && n && kind; }
API hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, int kind, void* st) {
    return d == s && n && kind && st;
}
API hipError_t hipDeviceSynchronize(void) { return 0; }
API hipError_t hipStreamSynchronize(void* s) { return s != NULL; }
API hipError_t hipGraphLaunch(void* exec, void* s) { return exec == NULL || s != NULL; }

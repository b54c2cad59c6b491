// Where does the CUDA driver keep a function's name? For each kernel of this program, the CUfunction the
// runtime resolves (cudaGetFuncBySymbol) and the one a module lookup gives (cuModuleGetFunction on a cubin
// loaded with cuModuleLoadData) are searched, through /proc/self/mem (a bad pointer cannot crash the scan),
// for a pointer to the kernel's mangled name: at CUfunction+off (one level) and at *(CUfunction+o1)+o2 (two
// levels). Offsets that hold for every kernel are printed; cuFuncGetName's own answer is printed beside.
//   nvcc -O2 -o cufunc_layout cufunc_layout.cu -lcuda && ./cufunc_layout
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

__global__ void alpha_kernel(float* x) { x[threadIdx.x] += 1.0f; }
template <int N>
__global__ void beta_kernel(float* x, int n) { x[threadIdx.x] *= N + n; }
__global__ void gamma_kernel_with_a_longer_name(int* y, int a, int b) { y[0] = a + b; }

static int mem = -1;

static bool read_at(uint64_t addr, void* buf, size_t n) { return pread(mem, buf, n, (off_t)addr) == (ssize_t)n; }

static bool string_at(uint64_t addr, const char* want) {
    char buf[512] = {};
    size_t n = strlen(want) + 1;
    if (n > sizeof buf || !read_at(addr, buf, n)) return false;
    return memcmp(buf, want, n) == 0;
}

struct Hits {
    std::map<long, int> one;                // offset -> kernels where it held
    std::map<std::pair<long, long>, int> two;
};

static void scan(const char* what, uint64_t f, const char* name, Hits& h) {
    uint64_t words[128];
    if (!read_at(f, words, sizeof words)) {
        printf("  %s: CUfunction %#lx unreadable\n", what, (unsigned long)f);
        return;
    }
    for (int i = 0; i < 128; i++) {
        if (string_at(words[i], name)) {
            h.one[i * 8]++;
            printf("  %s %s: name at *(f+%d)\n", what, name, i * 8);
        }
        uint64_t inner[64];
        if (words[i] < 4096 || !read_at(words[i], inner, sizeof inner)) continue;
        for (int j = 0; j < 64; j++) {
            if (string_at(inner[j], name)) {
                h.two[{i * 8, j * 8}]++;
                printf("  %s %s: name at *(*(f+%d)+%d)\n", what, name, i * 8, j * 8);
            }
        }
    }
}

int main(int argc, char** argv) {
    mem = open("/proc/self/mem", O_RDONLY);
    cudaFree(nullptr);
    int driver = 0;
    cuDriverGetVersion(&driver);
    printf("driver API version %d\n", driver);
    struct K { const void* sym; const char* name; } ks[] = {
        {(const void*)alpha_kernel, "_Z12alpha_kernelPf"},
        {(const void*)beta_kernel<3>, "_Z11beta_kernelILi3EEvPfi"},
        {(const void*)gamma_kernel_with_a_longer_name, "_Z31gamma_kernel_with_a_longer_namePiii"},
    };
    Hits h;
    int n = 0;
    for (auto& k : ks) {
        cudaFunction_t f = nullptr;
        if (cudaGetFuncBySymbol(&f, k.sym) != cudaSuccess) { printf("cudaGetFuncBySymbol failed\n"); continue; }
        const char* got = nullptr;
#if CUDA_VERSION >= 12030
        cuFuncGetName(&got, (CUfunction)f);
#endif
        printf("runtime CUfunction %p for %s; cuFuncGetName -> %p %s\n", (void*)f, k.name, (void*)got, got ? got : "-");
        scan("runtime", (uint64_t)f, k.name, h);
        n++;
    }
    // A cubin loaded through the driver (as cuBLAS/cuDNN do): argv[1].
    if (argc > 1) {
        FILE* fp = fopen(argv[1], "rb");
        std::vector<char> img(1 << 24);
        size_t len = fread(img.data(), 1, img.size(), fp);
        img.resize(len);
        CUmodule m;
        if (cuModuleLoadData(&m, img.data()) == CUDA_SUCCESS) {
            for (auto& k : ks) {
                CUfunction f;
                if (cuModuleGetFunction(&f, m, k.name) != CUDA_SUCCESS) continue;
                printf("module CUfunction %p for %s\n", (void*)f, k.name);
                scan("module", (uint64_t)f, k.name, h);
                n++;
            }
        }
    }
    printf("functions scanned: %d\n", n);
    for (auto& [off, c] : h.one) printf("one level: *(f+%ld) held for %d of %d\n", off, c, n);
    for (auto& [off, c] : h.two) printf("two levels: *(*(f+%ld)+%ld) held for %d of %d\n", off.first, off.second, c, n);
    return 0;
}

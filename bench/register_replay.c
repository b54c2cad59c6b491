// register_replay: a library's constructor, replayed against the real HIP runtime (a test double of the
// registering library's code only; the runtime is Debian's libamdhip64).
//
// Usage: register_replay LIBRARY PLAN
// It maps LIBRARY whole (read-only, as a loader maps its fat binary), then follows PLAN, one line each:
//   F OFFSET   __hipRegisterFatBinary with a wrapper pointing at the offload bundle at OFFSET in LIBRARY
//   K NAME     __hipRegisterFunction of kernel NAME under the last fat binary, its host handle a
//              distinct address inside the mapping
// For a library that cannot be loaded here (the real libggml-hip.so of a ROCm 6 build needs ROCm 6's
// libraries), this puts its 1e4 registrations and its fat binary in front of tracer as its constructor
// would. Prints "registered F fat binaries, K kernels" and exits.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct wrapper {
    unsigned int magic, version;
    const void* binary;
    const void* unused;
};

void** __hipRegisterFatBinary(const void* data);
void __hipRegisterFunction(void** modules, const void* host, char* device, const char* name, unsigned int limit,
                           void* tid, void* bid, void* block, void* grid, int* wave);

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: register_replay LIBRARY PLAN\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 1;
    }
    const char* base = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    FILE* plan = fopen(argv[2], "r");
    if (base == MAP_FAILED || !plan) {
        perror("map or plan");
        return 1;
    }
    char line[8192];
    void** modules = NULL;
    long fats = 0, kernels = 0;
    while (fgets(line, sizeof line, plan)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == 'F') {
            struct wrapper* w = malloc(sizeof *w);  // kept: the runtime holds on to it
            w->magic = 0x48495046;
            w->version = 1;
            w->binary = base + strtoull(line + 2, NULL, 10);
            w->unused = NULL;
            modules = __hipRegisterFatBinary(w);
            fats++;
        } else if (line[0] == 'K' && modules) {
            char* name = strdup(line + 2);
            // A distinct handle inside the mapping, as a host stub lies in its library.
            __hipRegisterFunction(modules, base + 8 * (kernels % (st.st_size / 8)), name, name, ~0u, NULL, NULL,
                                  NULL, NULL, NULL);
            kernels++;
        }
    }
    printf("registered %ld fat binaries, %ld kernels\n", fats, kernels);
    return 0;
}

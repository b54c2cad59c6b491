/* The oracle for any CUDA process: a CUPTI injection library (CUDA_INJECTION64_PATH) that counts each
 * kernel execution by its mangled name through the activity API (concurrent-kernel records: graph
 * replays' kernels included) and writes {"dropped": N, "kernels": {name: count}} to $CUPTI_COUNTS at exit.
 * Built on the GPU machine by run.sh against that machine's CUPTI; KREC is the newest kernel record struct
 * its cupti_activity.h declares (the one this CUPTI fills). */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER (8u << 20)
#define SLOTS (1u << 16)

static struct {
    char* name;
    unsigned long long count;
} table[SLOTS];
static unsigned long long dropped, overflow;

static void count(const char* name) {
    uint64_t h = 1469598103934665603ull;
    for (const char* c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (unsigned i = 0; i < SLOTS; i++) {
        unsigned at = (unsigned)((h + i) % SLOTS);
        if (!table[at].name) table[at].name = strdup(name);
        if (strcmp(table[at].name, name) == 0) {
            table[at].count++;
            return;
        }
    }
    overflow++;
}

static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = aligned_alloc(8, BUFFER);
    *size = BUFFER;
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity* record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            count(((KREC*)record)->name);
    size_t lost = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &lost) == CUPTI_SUCCESS) dropped += lost;
    free(buffer);
}

static void finish(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const char* path = getenv("CUPTI_COUNTS");
    FILE* f = fopen(path ? path : "cupti-counts.json", "w");
    if (!f) return;
    fprintf(f, "{\"dropped\": %llu, \"overflow\": %llu, \"kernels\": {", dropped, overflow);
    int first = 1;
    for (unsigned i = 0; i < SLOTS; i++)
        if (table[i].name) {
            fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", table[i].name, table[i].count);
            first = 0;
        }
    fprintf(f, "}}\n");
    fclose(f);
}

int InitializeInjection(void) {
    if (cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
    atexit(finish);
    return 1;
}

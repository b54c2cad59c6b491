// Where does the CUDA driver keep, in a CUgraphExec, the kernels the executable runs? Graphs of several
// shapes are built (stream capture, cudaGraphAddKernelNode, cudaGraphExecUpdate), and from each
// CUgraphExec a bounded pointer-chasing search through /proc/self/mem (a bad pointer cannot crash it)
// looks for words equal to each kernel node's CUfunction (also its CUkernel, and pointers to the
// kernel's mangled name). Hit paths are generalised with one wildcard component (an array index) and
// kept when the kernels found along the wildcard equal, as a multiset, the graph's kernel nodes.
// Paths that hold for every graph shape are printed, with the count words that match.
//   nvcc -O2 -arch=sm_90 -o graphexec_layout graphexec_layout.cu -lcuda
//   ./graphexec_layout --search   (the broad search)
//   ./graphexec_layout            (the found layout, checked: resolve() here and from a child process)
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            printf("%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define CKD(x)                                                                                   \
    do {                                                                                         \
        CUresult e_ = (x);                                                                       \
        if (e_ != CUDA_SUCCESS) {                                                                \
            const char* s_ = nullptr;                                                            \
            cuGetErrorString(e_, &s_);                                                           \
            printf("%s:%d %s -> %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");                   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

__global__ void alpha_kernel(float* x) { x[threadIdx.x] += 1.0f; }
template <int N>
__global__ void beta_kernel(float* x, int n) { x[threadIdx.x] *= N + n; }
__global__ void gamma_kernel_with_a_longer_name(int* y, int a, int b) { y[threadIdx.x] = a + b; }
namespace deep {
namespace inner {
__global__ void delta_kernel_with_an_even_much_longer_name_for_layout_tests(double* d, unsigned long n) {
    if (threadIdx.x < n) d[threadIdx.x] += 2.0;
}
}  // namespace inner
}  // namespace deep

// ---------------------------------------------------------------------------------------------------
// Memory reads, all through /proc/self/mem.
static int mem = -1;

static size_t read_some(uint64_t addr, void* buf, size_t n) {
    if (addr < 4096 || addr >= 0x800000000000ull) return 0;
    ssize_t r = pread(mem, buf, n, (off_t)addr);
    return r < 0 ? 0 : (size_t)r;
}
static bool read_at(uint64_t addr, void* buf, size_t n) { return read_some(addr, buf, n) == n; }
static bool read_u64(uint64_t addr, uint64_t* v) { return read_at(addr, v, 8); }
static bool read_u32(uint64_t addr, uint32_t* v) { return read_at(addr, v, 4); }
static std::string read_cstr(uint64_t addr, size_t max = 512) {
    char buf[512] = {};
    size_t n = read_some(addr, buf, std::min(max, sizeof buf - 1));
    buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
    return std::string(buf, strnlen(buf, n));
}
static bool pointer_like(uint64_t v) { return v >= 0x10000 && v < 0x800000000000ull && (v & 7) == 0; }

// ---------------------------------------------------------------------------------------------------
// The kernels and their driver objects.
struct Kern {
    const void* sym;
    CUfunction F = nullptr;  // cudaGetFuncBySymbol
    CUkernel K = nullptr;    // cudaGetKernel
    const char* name = nullptr;  // cuFuncGetName
    uint64_t np = 0;         // *(F+8)
};
static const int NK = 4;
static Kern ks[NK] = {
    {(const void*)alpha_kernel},
    {(const void*)beta_kernel<3>},
    {(const void*)gamma_kernel_with_a_longer_name},
    {(const void*)deep::inner::delta_kernel_with_an_even_much_longer_name_for_layout_tests},
};

struct Target { char type; int k; uint32_t delta; };
static std::unordered_map<uint64_t, Target> targets;  // value -> what it is (exec searches)
static void add_target(uint64_t v, char type, int k) {
    if (v && !targets.count(v)) targets[v] = {type, k, 0};
}

static float *dx, *dx2;
static int* dy;
static double* dd;
static int n2 = 2, one = 1, two = 2;
static unsigned long n32 = 32;
static void* a0[] = {&dx};
static void* a1[] = {&dx, &n2};
static void* a2[] = {&dy, &one, &two};
static void* a3[] = {&dd, &n32};
static void** args_for(int k) { return k == 0 ? a0 : k == 1 ? a1 : k == 2 ? a2 : a3; }

static void launch(int k, cudaStream_t s) {
    switch (k) {
        case 0: alpha_kernel<<<1, 32, 0, s>>>(dx); break;
        case 1: beta_kernel<3><<<1, 32, 0, s>>>(dx, 2); break;
        case 2: gamma_kernel_with_a_longer_name<<<1, 32, 0, s>>>(dy, 1, 2); break;
        default: deep::inner::delta_kernel_with_an_even_much_longer_name_for_layout_tests<<<1, 32, 0, s>>>(dd, 32);
    }
}

// seq: kernel index, or -1 memset node, -2 memcpy node
static cudaGraph_t capture(const std::vector<int>& seq, cudaStream_t s) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k : seq) {
        if (k == -1) CK(cudaMemsetAsync(dy, 0, 128, s));
        else if (k == -2) CK(cudaMemcpyAsync(dx2, dx, 128, cudaMemcpyDeviceToDevice, s));
        else launch(k, s);
    }
    CK(cudaStreamEndCapture(s, &g));
    return g;
}

static cudaGraphNode_t add_kernel(cudaGraph_t g, int k, std::vector<cudaGraphNode_t> deps) {
    cudaKernelNodeParams p = {};
    p.func = (void*)ks[k].sym;
    p.gridDim = dim3(1);
    p.blockDim = dim3(32);
    p.sharedMemBytes = 0;
    p.kernelParams = args_for(k);
    p.extra = nullptr;
    cudaGraphNode_t n;
    CK(cudaGraphAddKernelNode(&n, g, deps.data(), deps.size(), &p));
    return n;
}

// ---------------------------------------------------------------------------------------------------
// Ground truth of a graph.
struct Truth {
    int nall = 0, nkernel = 0;
    int cnt[NK] = {};
    std::vector<int> order;  // kernel index per kernel node, in cudaGraphGetNodes order
    std::vector<cudaGraphNode_t> nodes;
    std::vector<int> types, kof;  // per node: type, kernel index or -1
};

static Truth truth_of(cudaGraph_t g, bool verbose) {
    Truth t;
    size_t n = 0;
    CK(cudaGraphGetNodes(g, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CK(cudaGraphGetNodes(g, nodes.data(), &n));
    t.nall = (int)n;
    t.nodes = nodes;
    int func_is_F = 0, kern_is_K = 0, unmatched = 0;
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType ty;
        CK(cudaGraphNodeGetType(nodes[i], &ty));
        t.types.push_back((int)ty);
        t.kof.push_back(-1);
        if (ty != cudaGraphNodeTypeKernel) {
            if (verbose) printf("    node %zu %p type %d\n", i, (void*)nodes[i], (int)ty);
            continue;
        }
        // The params struct read raw: func at 0, kern at 56 (CUDA_KERNEL_NODE_PARAMS_v2), so that this
        // compiles whatever the header calls the fields.
        alignas(8) unsigned char raw[256] = {};
        CKD(cuGraphKernelNodeGetParams((CUgraphNode)nodes[i], (CUDA_KERNEL_NODE_PARAMS*)raw));
        uint64_t func = 0, kern = 0;
        memcpy(&func, raw, 8);
        if (sizeof(CUDA_KERNEL_NODE_PARAMS) >= 64) memcpy(&kern, raw + 56, 8);
        int k = -1;
        for (int j = 0; j < NK; j++)
            if (func == (uint64_t)ks[j].F || (kern && kern == (uint64_t)ks[j].K)) k = j;
        if (k < 0) {
            unmatched++;
            printf("    node %zu: kernel node with func %#lx kern %#lx matches no known kernel\n", i,
                   (unsigned long)func, (unsigned long)kern);
            continue;
        }
        if (func == (uint64_t)ks[k].F) func_is_F++;
        if (kern == (uint64_t)ks[k].K) kern_is_K++;
        add_target(func, 'f', k);
        add_target(kern, 'k', k);
        if (verbose) printf("    node %zu %p kernel %d func %#lx kern %#lx\n", i, (void*)nodes[i], k,
                            (unsigned long)func, (unsigned long)kern);
        t.cnt[k]++;
        t.kof.back() = k;
        t.nkernel++;
        t.order.push_back(k);
    }
    printf("  truth: %d nodes, %d kernel nodes (per kernel %d %d %d %d); node func==F for %d, kern==K for %d, "
           "unmatched %d\n",
           t.nall, t.nkernel, t.cnt[0], t.cnt[1], t.cnt[2], t.cnt[3], func_is_F, kern_is_K, unmatched);
    return t;
}

// ---------------------------------------------------------------------------------------------------
// The search. Targets are words of known value (CUfunction 'F', CUkernel 'K', name pointer 'N', a source
// graph's node handle 'G', ...), objects that start with a kernel's mangled name ('S'), and, when asked,
// graph-node-like objects ('P'): an object whose word at X - delta (X: where a graph node keeps its
// CUfunction, found from the source graphs' node handles) is a known CUfunction.
static const int D = 3;  // dereferences at most
struct Cfg {
    std::unordered_map<uint64_t, Target>* values;
    bool nodes;
    size_t scan[D + 1], expand[D + 1];
};
static const size_t CAP = 400000;  // objects per search
static std::vector<uint32_t> Xs;    // offsets of the CUfunction in a kernel node object
static std::unordered_map<uint64_t, int> Fk;  // CUfunction -> kernel

struct Obj {
    uint64_t addr;
    int depth;
    int str;    // kernel whose mangled name starts here, or -1
    int node;   // kernel of a node-like object, or -1
    uint32_t delta;
    std::vector<std::pair<uint32_t, uint32_t>> in;  // (parent object, offset in parent)
};
struct Hit {
    uint32_t obj, off;
    char type;
    int k;
    uint32_t delta;
};
struct Scan {
    std::vector<Obj> objs;
    std::vector<Hit> hits;
    bool capped = false;
};

static Scan search(uint64_t root, const Cfg& cfg) {
    Scan s;
    std::unordered_map<uint64_t, uint32_t> id;
    s.objs.push_back({root, 0, -1, -1, 0, {}});
    id[root] = 0;
    std::vector<uint64_t> buf(65536 / 8);
    for (size_t qi = 0; qi < s.objs.size(); qi++) {
        uint64_t a = s.objs[qi].addr;
        int d = s.objs[qi].depth;
        size_t got = read_some(a, buf.data(), cfg.scan[d]);
        if (got < 8) continue;
        const char* c = (const char*)buf.data();
        if (qi != 0 && c[0] == '_' && c[1] == 'Z') {
            for (int k = 0; k < NK; k++) {
                size_t n = strlen(ks[k].name) + 1;
                if (n <= got && memcmp(c, ks[k].name, n) == 0) s.objs[qi].str = k;
            }
            if (s.objs[qi].str >= 0) continue;
        }
        if (cfg.nodes && qi != 0) {
            for (uint32_t dlt = 0; dlt <= 0x40 && s.objs[qi].node < 0; dlt += 8)
                for (uint32_t X : Xs) {
                    if (X < dlt || X - dlt + 8 > got) continue;
                    auto it = Fk.find(buf[(X - dlt) / 8]);
                    if (it != Fk.end()) {
                        s.objs[qi].node = it->second;
                        s.objs[qi].delta = dlt;
                        break;
                    }
                }
            if (s.objs[qi].node >= 0) continue;  // a node is not followed
        }
        size_t nw = got / 8;
        for (size_t w = 0; w < nw; w++) {
            uint64_t v = buf[w];
            auto it = cfg.values->find(v);
            if (it != cfg.values->end()) {
                s.hits.push_back({(uint32_t)qi, (uint32_t)(w * 8), it->second.type, it->second.k, it->second.delta});
                continue;  // a target is not followed
            }
            if (d < D && w * 8 < cfg.expand[d] && pointer_like(v)) {
                auto jt = id.find(v);
                if (jt != id.end()) {
                    if (jt->second != qi && s.objs[jt->second].in.size() < 8)
                        s.objs[jt->second].in.push_back({(uint32_t)qi, (uint32_t)(w * 8)});
                } else if (s.objs.size() < CAP) {
                    id[v] = (uint32_t)s.objs.size();
                    Obj o{v, d + 1, -1, -1, 0, {}};
                    o.in.push_back({(uint32_t)qi, (uint32_t)(w * 8)});
                    s.objs.push_back(std::move(o));
                } else {
                    s.capped = true;
                }
            }
        }
    }
    for (size_t i = 0; i < s.objs.size(); i++) {
        if (s.objs[i].str >= 0)
            for (auto& e : s.objs[i].in) s.hits.push_back({e.first, e.second, 'S', s.objs[i].str, 0});
        if (s.objs[i].node >= 0)
            for (auto& e : s.objs[i].in) s.hits.push_back({e.first, e.second, 'P', s.objs[i].node, s.objs[i].delta});
    }
    return s;
}

static void paths_to(const Scan& s, uint32_t o, int budget, std::vector<uint32_t>& cur,
                     std::vector<std::vector<uint32_t>>& out) {
    if (out.size() >= 64) return;
    if (o == 0) {
        out.push_back(std::vector<uint32_t>(cur.rbegin(), cur.rend()));
        return;
    }
    if (budget == 0) return;
    for (auto& e : s.objs[o].in) {
        cur.push_back(e.second);
        paths_to(s, e.first, budget - 1, cur, out);
        cur.pop_back();
    }
}

static const uint32_t WILD = 0xffffffffu;
struct Cand {
    char type;
    int j;
    std::vector<uint32_t> comps;
    std::map<uint32_t, int> ent;  // wildcard offset -> label
};
static std::string key_of(char type, uint32_t delta, const std::vector<uint32_t>& comps) {
    std::string k(1, type);
    if (delta) {
        char b[32];
        snprintf(b, sizeof b, "-%#x", delta);
        k += b;
    }
    k += " [";
    for (size_t i = 0; i < comps.size(); i++) {
        char b[32];
        if (comps[i] == WILD) snprintf(b, sizeof b, "%s*", i ? "," : "");
        else snprintf(b, sizeof b, "%s%#x", i ? "," : "", comps[i]);
        k += b;
    }
    return k + "]";
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
}

static bool chain_of(uint64_t root, const std::vector<uint32_t>& comps, int j, std::vector<uint64_t>& chain) {
    chain.assign(1, root);
    for (int i = 0; i < j; i++) {
        uint64_t v;
        if (!read_u64(chain.back() + comps[i], &v)) return false;
        chain.push_back(v);
    }
    return true;
}

// What is being looked for in one search.
struct Want {
    int nall = 0, nkernel = 0;
    std::vector<int> cnt;    // per label
    std::vector<int> order;  // labels in cudaGraphGetNodes order
};

static std::set<std::string> count_tags(uint64_t root, const Cand& c, const Want& t) {
    std::set<std::string> tags;
    std::vector<uint64_t> chain;
    if (!chain_of(root, c.comps, c.j, chain)) return tags;
    for (size_t lvl = 0; lvl < chain.size(); lvl++) {
        static uint32_t w[1024];
        size_t got = read_some(chain[lvl], w, sizeof w) / 4;
        for (size_t i = 0; i < got; i++) {
            char b[64];
            if ((int)w[i] == t.nall) { snprintf(b, sizeof b, "L%zu+%#zx==nodes", lvl, i * 4); tags.insert(b); }
            if ((int)w[i] == t.nkernel) { snprintf(b, sizeof b, "L%zu+%#zx==kernels", lvl, i * 4); tags.insert(b); }
        }
    }
    if (c.j >= 1) {
        uint64_t at = chain[c.j - 1] + c.comps[c.j - 1];
        for (int dlt = 8; dlt <= 16; dlt += 8) {
            uint64_t v;
            if (!read_u64(at + dlt, &v) || v <= chain[c.j]) continue;
            uint64_t diff = v - chain[c.j];
            char b[96];
            if (diff % t.nall == 0) { snprintf(b, sizeof b, "(ptr+%d - ptr)/nodes=%#lx", dlt, (unsigned long)(diff / t.nall)); tags.insert(b); }
            if (diff % t.nkernel == 0) { snprintf(b, sizeof b, "(ptr+%d - ptr)/kernels=%#lx", dlt, (unsigned long)(diff / t.nkernel)); tags.insert(b); }
        }
    }
    return tags;
}

struct Summary {
    std::vector<std::string> labels;
    std::map<std::string, std::string> status;  // key -> one char per search: E exact, S superset, . none
    std::map<std::string, std::set<std::string>> counts;  // key -> count tags holding in every exact search
    std::map<std::string, std::string> info;     // key -> stride/offsets seen, per search
};

// Which objects were found node-like in the last exec search: base address -> kernel.
static std::map<uint64_t, int> last_nodes;

static void analyse(Summary& sum, const char* label, uint64_t root, const Cfg& cfg, const Want& t,
                    int show = 25) {
    auto t0 = std::chrono::steady_clock::now();
    Scan s = search(root, cfg);
    int idx = (int)sum.labels.size();
    sum.labels.push_back(label);
    std::map<std::string, Cand> cands;
    size_t npaths = 0;
    std::map<char, int> bytype;
    last_nodes.clear();
    for (auto& o : s.objs)
        if (o.node >= 0) last_nodes[o.addr - o.delta] = o.node;
    for (auto& h : s.hits) {
        bytype[h.type]++;
        if (h.k < 0 || h.k >= (int)t.cnt.size()) continue;
        std::vector<std::vector<uint32_t>> ps;
        std::vector<uint32_t> cur;
        paths_to(s, h.obj, D, cur, ps);
        for (auto& p : ps) {
            p.push_back(h.off);
            npaths++;
            for (size_t j = 0; j < p.size(); j++) {
                std::vector<uint32_t> comps = p;
                comps[j] = WILD;
                std::string key = key_of(h.type, h.delta, comps);
                auto it = cands.find(key);
                if (it == cands.end()) it = cands.emplace(key, Cand{h.type, (int)j, comps, {}}).first;
                it->second.ent[p[j]] = h.k;
            }
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("== %s: root %#lx: %zu objects%s, %zu hits (", label, (unsigned long)root, s.objs.size(),
           s.capped ? " (capped)" : "", s.hits.size());
    for (auto& [ty, n] : bytype) printf("%c %d ", ty, n);
    printf("), %zu node-like objects, %zu paths, %.1fs\n", last_nodes.size(), npaths, secs);
    int nexact = 0, nsuper = 0;
    std::vector<std::pair<int, std::string>> supers;
    for (auto& [key, c] : cands) {
        std::vector<int> cnt(t.cnt.size(), 0);
        for (auto& [off, k] : c.ent) cnt[k]++;
        bool ge = true, eq = true;
        for (size_t k = 0; k < cnt.size(); k++) {
            if (cnt[k] < t.cnt[k]) ge = false;
            if (cnt[k] != t.cnt[k]) eq = false;
        }
        if (!ge) continue;
        std::string& st = sum.status[key];
        if (st.size() < (size_t)idx) st.resize(idx, '.');
        st.push_back(eq ? 'E' : 'S');
        std::vector<uint32_t> offs;
        std::vector<int> seq;
        for (auto& [off, k] : c.ent) { offs.push_back(off); seq.push_back(k); }
        uint64_t g = 0;
        for (size_t i = 1; i < offs.size(); i++) g = gcd64(g, offs[i] - offs[i - 1]);
        bool contiguous = g && (offs.back() - offs.front()) == g * (offs.size() - 1);
        std::vector<int> rev(seq.rbegin(), seq.rend());
        const char* ord = seq == t.order ? "order=GetNodes" : rev == t.order ? "order=reversed" : "order=other";
        char b[256];
        snprintf(b, sizeof b, "n=%zu first=%#x last=%#x stride(gcd)=%#lx %s %s", offs.size(), offs.front(),
                 offs.back(), (unsigned long)g, contiguous ? "contiguous" : "gaps", eq ? ord : "");
        if (eq) {
            nexact++;
            sum.info[key] += std::string(label) + ": " + b + "\n";
            auto tags = count_tags(root, c, t);
            auto ct = sum.counts.find(key);
            if (ct == sum.counts.end()) sum.counts[key] = tags;
            else {
                std::set<std::string> keep;
                for (auto& x : ct->second) if (tags.count(x)) keep.insert(x);
                ct->second = keep;
            }
            if (nexact <= show) printf("  E %s %s\n", key.c_str(), b);
        } else {
            nsuper++;
            int extra = 0;
            for (size_t k = 0; k < cnt.size(); k++) extra += cnt[k] - t.cnt[k];
            supers.push_back({extra, key + " " + b});
        }
    }
    std::sort(supers.begin(), supers.end());
    for (size_t i = 0; i < supers.size() && (int)i < show / 3; i++)
        printf("  S(+%d) %s\n", supers[i].first, supers[i].second.c_str());
    printf("  %d exact, %d superset wildcard paths\n", nexact, nsuper);
}

static void summarise(Summary& sum, const char* what, int show = 40) {
    printf("== summary (%s) over %zu searches:", what, sum.labels.size());
    for (auto& l : sum.labels) printf(" %s", l.c_str());
    printf("\n");
    std::vector<std::pair<int, std::string>> order;
    for (auto& [key, st] : sum.status) {
        st.resize(sum.labels.size(), '.');
        order.push_back({-(int)std::count(st.begin(), st.end(), 'E'), key});
    }
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() && (int)i < show; i++) {
        auto& key = order[i].second;
        printf("  %s  %s\n", sum.status[key].c_str(), key.c_str());
        if (-order[i].first == (int)sum.labels.size()) {
            std::string inf = sum.info[key];
            size_t p = 0, q;
            while ((q = inf.find('\n', p)) != std::string::npos) {
                printf("      %s\n", inf.substr(p, q - p).c_str());
                p = q + 1;
            }
            printf("      count words holding in every search:");
            for (auto& tg : sum.counts[key]) printf(" %s", tg.c_str());
            printf("\n");
        }
    }
}

// Links between node objects: (offset in a node, offset into the node pointed to) -> how many nodes.
static void link_hist(const char* what, const std::vector<uint64_t>& bases) {
    std::unordered_map<uint64_t, int> idx;
    for (size_t i = 0; i < bases.size(); i++) idx[bases[i]] = (int)i;
    std::map<std::pair<uint32_t, uint32_t>, int> h;
    for (uint64_t b : bases) {
        uint64_t w[0x800 / 8];
        size_t got = read_some(b, w, sizeof w) / 8;
        std::set<std::pair<uint32_t, uint32_t>> seen;
        for (size_t i = 0; i < got; i++)
            for (uint32_t d = 0; d <= 0x40; d += 8) {
                auto it = idx.find(w[i] - d);
                if (it != idx.end() && bases[it->second] != b) seen.insert({(uint32_t)(i * 8), d});
            }
        for (auto& x : seen) h[x]++;
    }
    std::vector<std::pair<int, std::pair<uint32_t, uint32_t>>> v;
    for (auto& [k, n] : h) v.push_back({-n, k});
    std::sort(v.begin(), v.end());
    printf("  links among %zu %s:", bases.size(), what);
    for (size_t i = 0; i < v.size() && i < 10; i++)
        printf(" [+%#x -> node+%#x: %d]", v[i].second.first, v[i].second.second, -v[i].first);
    printf("\n");
}

static void run_exec(cudaGraphExec_t e, cudaStream_t s, int times) {
    for (int i = 0; i < times; i++) CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
}

static Want want_exec(const Truth& t) {
    Want w;
    w.nall = t.nall;
    w.nkernel = t.nkernel;
    w.cnt.assign(t.cnt, t.cnt + NK);
    w.order = t.order;
    return w;
}

static Cfg exec_cfg() { return Cfg{&targets, true, {4096, 4096, 2048, 2048}, {4096, 2048, 2048, 0}}; }

static void dump_words(const char* what, uint64_t a, size_t n) {
    printf("  %s %#lx:\n", what, (unsigned long)a);
    for (size_t o = 0; o < n; o += 64) {
        uint64_t w[8] = {};
        read_some(a + o, w, sizeof w);
        printf("    +%03zx:", o);
        for (int i = 0; i < 8; i++) printf(" %lx", (unsigned long)w[i]);
        printf("\n");
    }
}

static Summary sumExec, sumGraph;

static void exec_search(const char* label, cudaGraphExec_t e, const Truth& t) {
    analyse(sumExec, label, (uint64_t)e, exec_cfg(), want_exec(t));
    std::vector<uint64_t> bases;
    int per[NK] = {};
    for (auto& [b, k] : last_nodes) { bases.push_back(b); per[k]++; }
    printf("  node-like objects reached: per kernel %d %d %d %d; first:", per[0], per[1], per[2], per[3]);
    for (size_t i = 0; i < bases.size() && i < 8; i++) printf(" %#lx(k%d)", (unsigned long)bases[i], last_nodes[bases[i]]);
    printf("\n");
    link_hist("node-like objects", bases);
}

// ---------------------------------------------------------------------------------------------------
// Targeted checks (run 3): the record array of the exec, the clone nodes, and ground-truth-free resolvers.
struct Case {
    std::string label;
    cudaGraphExec_t e;
    Truth t;  // what the exec runs (top-level nodes)
    std::vector<std::string> names;  // mangled names of its kernel nodes, in cudaGraphGetNodes order
    bool train;
};
static std::unordered_map<uint64_t, std::string> src_handles;  // source node handle -> "gX#i"
static std::unordered_map<uint64_t, std::string> graphs_known;  // graph handle -> label

static std::string ann(uint64_t v, uint64_t exec) {
    char b[96];
    if (v == 0) return "0";
    auto it = src_handles.find(v);
    if (it != src_handles.end()) return "src:" + it->second;
    auto gt = graphs_known.find(v);
    if (gt != graphs_known.end()) return "graph:" + gt->second;
    if (v >= exec && v < exec + 0x4000) { snprintf(b, sizeof b, "exec+%#lx", (unsigned long)(v - exec)); return b; }
    uint32_t ty;
    uint64_t owner, f;
    if (pointer_like(v) && read_at(v + 4, &ty, 4) && ty <= 12 && read_u64(v + 0x18, &owner) && read_u64(v + 0x20, &f)) {
        auto fk = Fk.find(f);
        if (ty == 0 && fk != Fk.end()) {
            auto og = graphs_known.find(owner);
            snprintf(b, sizeof b, "node(k%d,owner %s)", fk->second, og != graphs_known.end() ? og->second.c_str() : "other");
            return b;
        }
    }
    snprintf(b, sizeof b, "%lx", (unsigned long)v);
    return b;
}

// Ground-truth-free resolver over any memory file (this process's or another's).
struct Spec {
    int baseKind;  // 0: records inline at exec+baseOff; 1: records at *(exec+baseOff)
    uint32_t baseOff;
    int countKind;  // 0: u32 at exec+countOff; 1: (u64 at exec+countOff - base) / stride; 2: none (walk)
    uint32_t countOff;
    uint32_t stride, r;  // record stride; offset of the node pointer in a record
};
static std::string spec_str(const Spec& p) {
    char b[160];
    if (p.countKind == 2)
        snprintf(b, sizeof b, "base=%s%#x%s count=(walk while same owner) stride=%#x node@rec+%#x", p.baseKind ? "*(exec+" : "exec+",
                 p.baseOff, p.baseKind ? ")" : "", p.stride, p.r);
    else
        snprintf(b, sizeof b, "base=%s%#x%s count=%s%#x%s stride=%#x node@rec+%#x", p.baseKind ? "*(exec+" : "exec+",
                 p.baseOff, p.baseKind ? ")" : "", p.countKind ? "(*(exec+" : "u32(exec+", p.countOff,
                 p.countKind ? ")-base)/stride" : ")", p.stride, p.r);
    return b;
}
static int memfd_for_resolve = -1;
static bool rd(uint64_t a, void* b, size_t n) {
    if (a < 4096 || a >= 0x800000000000ull) return false;
    return pread(memfd_for_resolve, b, n, (off_t)a) == (ssize_t)n;
}
static bool rd64(uint64_t a, uint64_t* v) { return rd(a, v, 8); }

// One record of the exec, read through the chain: the node's type (u32 at node+4; 0 = kernel), and for a
// kernel node its CUfunction (node+0x20) and the name at *(CUfunction+8).
struct Ent {
    uint32_t type = 0xffffffffu;
    uint64_t node = 0, f = 0;
    std::string name;
};
static bool resolve_entries(uint64_t exec, const Spec& p, std::vector<Ent>& out, uint64_t& n) {
    out.clear();
    uint64_t base = exec + p.baseOff;
    if (p.baseKind == 1 && !rd64(exec + p.baseOff, &base)) return false;
    if (p.countKind == 2) {
        // No count: records while the node pointer reads as a node of the same owner as record 0's.
        uint64_t owner0 = 0;
        n = 0;
        for (uint64_t i = 0; i < 100000; i++) {
            uint64_t node, owner;
            uint32_t ty;
            if (!rd64(base + i * p.stride + p.r, &node) || !rd(node + 4, &ty, 4) || ty > 12 || !rd64(node + 0x18, &owner)) break;
            if (i == 0) owner0 = owner;
            else if (owner != owner0) break;
            n++;
        }
    } else if (p.countKind == 0) {
        uint32_t c;
        if (!rd(exec + p.countOff, &c, 4)) return false;
        n = c;
    } else {
        uint64_t end;
        if (!rd64(exec + p.countOff, &end) || end < base || (end - base) % p.stride) return false;
        n = (end - base) / p.stride;
    }
    if (n == 0 || n > 100000) return false;
    for (uint64_t i = 0; i < n; i++) {
        Ent e;
        if (rd64(base + i * p.stride + p.r, &e.node) && rd(e.node + 4, &e.type, 4) && e.type == 0 && rd64(e.node + 0x20, &e.f)) {
            uint64_t np;
            char nm[256] = {};
            if (rd64(e.f + 8, &np) && np >= 4096 && np < 0x800000000000ull &&
                pread(memfd_for_resolve, nm, sizeof nm - 1, (off_t)np) > 0)
                e.name = nm;
        }
        out.push_back(e);
    }
    return true;
}
// resolve(): the kernel names an exec runs, through the found chain only (no ground truth).
static bool resolve(uint64_t exec, const Spec& p, std::vector<std::string>& names, uint64_t& n) {
    std::vector<Ent> es;
    names.clear();
    if (!resolve_entries(exec, p, es, n)) return false;
    for (auto& e : es)
        if (e.type == 0 && !e.name.empty()) names.push_back(e.name);
    return true;
}
// O: every kernel node named right at its position (cudaGraphGetNodes order), other nodes not kernels;
// K: the same, but some non-kernel node reads as a kernel; M: kernel names right as a multiset only;
// x: wrong names; n: record count != node count; -: chain unreadable.
static char judge(const Case& c, const Spec& p) {
    std::vector<Ent> es;
    uint64_t n = 0;
    if (!resolve_entries((uint64_t)c.e, p, es, n)) return '-';
    if ((int)n != c.t.nall) return 'n';
    int ok = 0, extra = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (c.t.kof[i] >= 0) ok += es[i].type == 0 && es[i].name == ks[c.t.kof[i]].name;
        else extra += es[i].type == 0;
    }
    if (ok == c.t.nkernel) return extra ? 'K' : 'O';
    std::vector<std::string> a, b = c.names;
    for (auto& e : es)
        for (int k = 0; k < NK; k++)
            if (e.type == 0 && e.name == ks[k].name) a.push_back(e.name);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b ? 'M' : 'x';
}

// Per position: kernel nodes named right, non-kernel nodes that read as kernels.
static void agreement(const Case& c, const Spec& p, int& agree, int& extra) {
    std::vector<Ent> es;
    uint64_t n = 0;
    agree = extra = 0;
    if (!resolve_entries((uint64_t)c.e, p, es, n)) return;
    for (uint64_t i = 0; i < n && i < c.t.kof.size(); i++) {
        if (c.t.kof[i] >= 0) agree += es[i].type == 0 && es[i].name == ks[c.t.kof[i]].name;
        else extra += es[i].type == 0;
    }
}

static Case make_case(const char* label, cudaGraph_t g, cudaGraphExec_t e, bool train, bool verbose) {
    Case c;
    c.label = label;
    c.e = e;
    printf("-- %s: graph %p exec %p\n", label, (void*)g, (void*)e);
    c.t = truth_of(g, verbose);
    for (int k : c.t.order) c.names.push_back(ks[k].name);
    c.train = train;
    for (size_t i = 0; i < c.t.nodes.size(); i++) src_handles[(uint64_t)c.t.nodes[i]] = std::string(label) + "#" + std::to_string(i);
    graphs_known[(uint64_t)g] = label;
    return c;
}

static void dump_exec(const Case& c, size_t records) {
    uint64_t e = (uint64_t)c.e;
    printf("  exec %s %#lx words (annotated, zeros skipped):\n   ", c.label.c_str(), (unsigned long)e);
    int col = 0;
    for (uint32_t o = 0; o < 0x3c0; o += 8) {
        uint64_t v = 0;
        read_u64(e + o, &v);
        if (!v) continue;
        printf(" +%x=%s", o, ann(v, e).c_str());
        if (++col % 6 == 0) printf("\n   ");
    }
    printf("\n");
    for (size_t i = 0; i < records; i++) {
        printf("   rec %zu @exec+%#lx:", i, (unsigned long)(0x3c0 + i * 0x28));
        for (int w = 0; w < 5; w++) {
            uint64_t v = 0;
            read_u64(e + 0x3c0 + i * 0x28 + w * 8, &v);
            printf(" %s", ann(v, e).c_str());
        }
        printf("\n");
    }
}

static void targeted(cudaStream_t st) {
    std::vector<Case> cases;
    // Training: A, B, C (as in the search).
    cudaGraph_t gA = capture({0, 1, 1, 2, 2, 2}, st);
    cudaGraphExec_t eA;
    CK(cudaGraphInstantiate(&eA, gA, 0));
    cases.push_back(make_case("A", gA, eA, true, false));
    std::vector<int> seqB;
    for (int i = 0; i < 38; i++) {
        if (i == 10) seqB.push_back(-1);
        if (i == 25) seqB.push_back(-2);
        seqB.push_back(i % 4);
    }
    cudaGraph_t gB = capture(seqB, st);
    cudaGraphExec_t eB;
    CK(cudaGraphInstantiate(&eB, gB, 0));
    cases.push_back(make_case("B", gB, eB, true, false));
    cudaGraph_t gC;
    CK(cudaGraphCreate(&gC, 0));
    cudaGraphNode_t c0 = add_kernel(gC, 3, {});
    cudaGraphNode_t c1 = add_kernel(gC, 1, {c0});
    cudaGraphNode_t c2 = add_kernel(gC, 0, {c0});
    cudaGraphNode_t c3 = add_kernel(gC, 3, {c1, c2});
    cudaGraphNode_t c4 = add_kernel(gC, 2, {c3});
    add_kernel(gC, 2, {});
    add_kernel(gC, 1, {c4});
    cudaGraphExec_t eC;
    CK(cudaGraphInstantiate(&eC, gC, 0));
    cases.push_back(make_case("C", gC, eC, true, false));
    // Held out. D: (0,1,2,0), later updated to (3,3,1,2).
    cudaGraph_t gD1 = capture({0, 1, 2, 0}, st);
    cudaGraphExec_t eD;
    CK(cudaGraphInstantiate(&eD, gD1, 0));
    cases.push_back(make_case("D1", gD1, eD, false, false));
    // E: 120 nodes (kernels in a scrambled order, 3 memsets, 2 memcpys); its graph destroyed after instantiation.
    std::vector<int> seqE;
    for (int i = 0; i < 115; i++) {
        if (i % 40 == 5) seqE.push_back(-1);
        if (i % 50 == 17) seqE.push_back(-2);
        seqE.push_back((i * 7 + i / 3) % 4);
    }
    cudaGraph_t gE = capture(seqE, st);
    cudaGraphExec_t eE;
    CK(cudaGraphInstantiate(&eE, gE, 0));
    cases.push_back(make_case("E(graph destroyed)", gE, eE, false, false));
    // F1, F2: two execs of one graph (kernels 2,3,0), the graph destroyed afterwards too.
    cudaGraph_t gF = capture({2, 3, 0}, st);
    cudaGraphExec_t eF1, eF2;
    CK(cudaGraphInstantiate(&eF1, gF, 0));
    CK(cudaGraphInstantiate(&eF2, gF, 0));
    cases.push_back(make_case("F1", gF, eF1, false, false));
    cases.push_back(make_case("F2", gF, eF2, false, false));
    CK(cudaGraphDestroy(gE));
    CK(cudaGraphDestroy(gF));
    // Some churn on the heap after the destroy, so that freed memory is reused.
    std::vector<cudaGraph_t> junk;
    for (int i = 0; i < 20; i++) junk.push_back(capture({3, 2, 1, 0, 3, 2, 1, 0}, st));
    for (auto g : junk) CK(cudaGraphDestroy(g));
    std::vector<void*> heap;
    for (int i = 0; i < 2000; i++) { heap.push_back(malloc(1896)); memset(heap.back(), 0x5a, 1896); }

    for (auto& c : cases) printf("  %s: %d nodes, %d kernel nodes\n", c.label.c_str(), c.t.nall, c.t.nkernel);
    // H: 1000 kernel nodes, graph kept.
    std::vector<int> seqH;
    for (int i = 0; i < 1000; i++) seqH.push_back((i * 5 + i / 7) % 4);
    cudaGraph_t gH = capture(seqH, st);
    cudaGraphExec_t eH;
    CK(cudaGraphInstantiate(&eH, gH, 0));
    cases.push_back(make_case("H(1000)", gH, eH, false, false));
    // P: a child graph node (informational): parent = kernel 0 -> child graph (kernel 3 -> kernel 1).
    cudaGraph_t gchild, gpar;
    CK(cudaGraphCreate(&gchild, 0));
    cudaGraphNode_t ch0 = add_kernel(gchild, 3, {});
    add_kernel(gchild, 1, {ch0});
    CK(cudaGraphCreate(&gpar, 0));
    cudaGraphNode_t p0 = add_kernel(gpar, 0, {});
    cudaGraphNode_t pc;
    CK(cudaGraphAddChildGraphNode(&pc, gpar, &p0, 1, gchild));
    cudaGraphExec_t eP;
    CK(cudaGraphInstantiate(&eP, gpar, 0));
    Case cP = make_case("P(child graph)", gpar, eP, false, true);

    // Where the record array and the count sit, per exec.
    for (auto& c : cases) {
        uint64_t e = (uint64_t)c.e, b = 0, g = 0;
        uint32_t w[6] = {};
        read_u64(e + 0x3a0, &b);
        read_u64(e + 8, &g);
        read_at(e + 0x398, w, 8);
        read_at(e + 0x3a8, w + 2, 8);
        printf("  %-20s nodes %4d: u32 +0x398=%u +0x39c=%u +0x3a8=%#x +0x3ac=%u; *(exec+0x3a0)=exec%+ld; *(exec+8)=%s\n",
               c.label.c_str(), c.t.nall, w[0], w[1], w[2], w[3], (long)(b - e), ann(g, e).c_str());
    }

    std::vector<Spec> specs;
    for (int bk = 0; bk < 2; bk++)
        for (int ci = 0; ci < 4; ci++)
            for (uint32_t r : {0u, 0x10u}) {
                Spec p;
                p.baseKind = bk;
                p.baseOff = bk ? 0x3a0 : 0x3c0;
                p.countKind = ci == 3 ? 2 : 0;
                p.countOff = ci == 0 ? 0x398 : ci == 1 ? 0x39c : ci == 2 ? 0x3ac : 0;
                p.stride = 0x28;
                p.r = r;
                specs.push_back(p);
            }

    // Judge every spec on every case, in this process: before any launch, after launches, after the update.
    memfd_for_resolve = mem;
    std::vector<std::string> rows(specs.size());
    auto judge_all = [&](const std::vector<Case>& cs) {
        for (size_t i = 0; i < specs.size(); i++) {
            rows[i] += ' ';
            for (auto& c : cs) rows[i].push_back(judge(c, specs[i]));
        }
    };
    judge_all(cases);
    for (auto& c : cases) { for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(c.e, st)); }
    CK(cudaStreamSynchronize(st));
    printf("  launched every exec 3 times\n");
    judge_all(cases);
    cudaGraph_t gD2 = capture({3, 3, 1, 2}, st);
    Case dU = make_case("D-updated", gD2, eD, false, false);
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t ue = cudaGraphExecUpdate(eD, gD2, &info);
    printf("  cudaGraphExecUpdate -> %s, result %d\n", cudaGetErrorString(ue), (int)info.result);
    judge_all({dU});
    CK(cudaGraphLaunch(eD, st));
    CK(cudaStreamSynchronize(st));
    judge_all({dU});
    CK(cudaGraphDestroy(gD2));
    for (int i = 0; i < 200; i++) { heap.push_back(malloc(1896)); memset(heap.back(), 0x5a, 1896); }
    judge_all({dU});
    cases[3].label = "D1(now updated)";
    cases.push_back(dU);
    Truth again = truth_of(gD1, false);
    printf("  D1 source graph after the update: kernels");
    for (int k : again.order) printf(" %d", k);
    printf("\n");

    printf("  specs (O: every kernel node named right at its position; K: the same, but a non-kernel node reads as a\n"
           "  kernel; M: right multiset only; x: wrong; n: count differs; -: unreadable)\n");
    printf("  columns: [before launch:");
    for (size_t i = 0; i < cases.size() - 1; i++) printf(" %s", cases[i].label.c_str());
    printf("] [after 3 launches: same] [D-updated] [D-updated, launched] [D-updated, D2 destroyed]\n");
    const Spec* best = nullptr;
    for (size_t i = 0; i < specs.size(); i++) {
        bool all_ok = true;
        for (char ch : rows[i]) if (ch != ' ' && ch != 'O' && ch != 'K') all_ok = false;
        printf("   %s  %s\n", rows[i].c_str(), spec_str(specs[i]).c_str());
        if (all_ok && !best) best = &specs[i];
    }
    Spec fallback{1, 0x3a0, 0, 0x398, 0x28, 0x10};
    if (!best) { printf("  no spec held for every case; going on with the fallback\n"); best = &fallback; }
    printf("  chosen: %s\n", spec_str(*best).c_str());

    // What the non-kernel nodes (memset, memcpy) look like through the chain.
    for (auto& c : cases) {
        if (c.label == "D1(now updated)") continue;
        std::vector<Ent> es;
        uint64_t n = 0;
        if (!resolve_entries((uint64_t)c.e, *best, es, n) || (int)n != c.t.nall) continue;
        int shown = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (c.t.kof[i] >= 0 || shown++ >= 3) continue;
            uint64_t w[8] = {};
            read_at(es[i].node, w, sizeof w);
            printf("  %s node %lu (source type %d): exec's node %#lx type %u f %#lx name '%s'; words", c.label.c_str(),
                   (unsigned long)i, c.t.types[i], (unsigned long)es[i].node, es[i].type, (unsigned long)es[i].f,
                   es[i].name.c_str());
            for (auto x : w) printf(" %lx", (unsigned long)x);
            printf("\n");
        }
    }

    // resolve() with the chosen spec, in this process, next to the ground truth.
    for (auto& c : cases) {
        if (c.label == "D1(now updated)") continue;
        std::vector<std::string> got;
        uint64_t n = 0;
        bool ok = resolve((uint64_t)c.e, *best, got, n);
        int agree = 0, extra = 0;
        agreement(c, *best, agree, extra);
        printf("  resolve %s: %s, %lu records, %zu kernel names; %d of %d kernel nodes named right at their position, "
               "%d non-kernel nodes read as kernels (truth: %d nodes)\n",
               c.label.c_str(), ok ? "ok" : "FAILED", (unsigned long)n, got.size(), agree, c.t.nkernel, extra, c.t.nall);
        if (c.t.nkernel <= 8)
            for (size_t i = 0; i < std::max(got.size(), c.names.size()); i++)
                printf("      %-70s | %s\n", i < got.size() ? got[i].c_str() : "-", i < c.names.size() ? c.names[i].c_str() : "-");
    }
    {
        std::vector<Ent> es;
        uint64_t n = 0;
        bool ok = resolve_entries((uint64_t)eP, *best, es, n);
        uint32_t w[2] = {};
        read_at((uint64_t)eP + 0x398, w, 8);
        printf("  %s: %s, %lu records (u32 +0x398=%u +0x39c=%u; top-level truth %d nodes, %d kernel node; the child graph holds kernels 3 then 1):\n",
               cP.label.c_str(), ok ? "ok" : "FAILED", (unsigned long)n, w[0], w[1], cP.t.nall, cP.t.nkernel);
        for (auto& e : es) printf("      node %#lx type %u name '%s'\n", (unsigned long)e.node, e.type, e.name.c_str());
    }

    // The same from another process: a child reads this one through /proc/PPID/mem.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
        memfd_for_resolve = open(path, O_RDONLY);
        printf("  child %d reading %s (fd %d)\n", (int)getpid(), path, memfd_for_resolve);
        for (auto& c : cases) {
            if (c.label == "D1(now updated)") continue;
            std::vector<std::string> got;
            uint64_t n = 0;
            bool ok = resolve((uint64_t)c.e, *best, got, n);
            int agree = 0, extra = 0;
            agreement(c, *best, agree, extra);
            printf("  child resolve %s: %s, %lu records, %zu kernel names; %d of %d kernel nodes right, %d extra\n",
                   c.label.c_str(), ok ? "ok" : "FAILED", (unsigned long)n, got.size(), agree, c.t.nkernel, extra);
        }
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(kid, &status, 0);
    printf("  child exited %d\n", status);
    for (auto h : heap) free(h);
}

int main(int argc, char** argv) {
    bool broad = argc > 1 && strcmp(argv[1], "--search") == 0;
    mem = open("/proc/self/mem", O_RDONLY);
    CK(cudaFree(nullptr));
    int driver = 0, runtime = 0;
    cuDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("driver API version %d, runtime %d, CUDA_VERSION %d, sizeof(CUDA_KERNEL_NODE_PARAMS) %zu\n", driver,
           runtime, CUDA_VERSION, sizeof(CUDA_KERNEL_NODE_PARAMS));
    printf("node types: kernel %d memcpy %d memset %d\n", (int)cudaGraphNodeTypeKernel, (int)cudaGraphNodeTypeMemcpy,
           (int)cudaGraphNodeTypeMemset);
    CK(cudaMalloc(&dx, 4096));
    CK(cudaMalloc(&dx2, 4096));
    CK(cudaMalloc(&dy, 4096));
    CK(cudaMalloc(&dd, 4096));
    for (int k = 0; k < NK; k++) {
        CK(cudaGetFuncBySymbol((cudaFunction_t*)&ks[k].F, ks[k].sym));
#if CUDART_VERSION >= 12010
        CK(cudaGetKernel((cudaKernel_t*)&ks[k].K, ks[k].sym));
#endif
        CKD(cuFuncGetName(&ks[k].name, ks[k].F));
        read_u64((uint64_t)ks[k].F + 8, &ks[k].np);
        printf("kernel %d: F %p K %p name %p %s; *(F+8) %#lx %s\n", k, (void*)ks[k].F, (void*)ks[k].K,
               (void*)ks[k].name, ks[k].name, (unsigned long)ks[k].np,
               ks[k].np == (uint64_t)ks[k].name ? "(== name)" : "(!= name)");
        add_target((uint64_t)ks[k].F, 'F', k);
        add_target((uint64_t)ks[k].K, 'K', k);
        add_target(ks[k].np, 'N', k);
        add_target((uint64_t)ks[k].name, 'N', k);
        Fk[(uint64_t)ks[k].F] = k;
    }
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (!broad) {
        targeted(st);
        return 0;
    }

    // The graphs. A: 6 kernel nodes, counts 1,2,3.
    cudaGraph_t gA = capture({0, 1, 1, 2, 2, 2}, st);
    cudaGraphExec_t eA;
    CK(cudaGraphInstantiate(&eA, gA, 0));
    // B: 38 kernel nodes cycling 0..3, a memset and a memcpy node.
    std::vector<int> seqB;
    for (int i = 0; i < 38; i++) {
        if (i == 10) seqB.push_back(-1);
        if (i == 25) seqB.push_back(-2);
        seqB.push_back(i % 4);
    }
    cudaGraph_t gB = capture(seqB, st);
    cudaGraphExec_t eB;
    CK(cudaGraphInstantiate(&eB, gB, 0));
    // C: explicit kernel nodes, fork and join, 7 kernel nodes.
    cudaGraph_t gC;
    CK(cudaGraphCreate(&gC, 0));
    cudaGraphNode_t c0 = add_kernel(gC, 3, {});
    cudaGraphNode_t c1 = add_kernel(gC, 1, {c0});
    cudaGraphNode_t c2 = add_kernel(gC, 0, {c0});
    cudaGraphNode_t c3 = add_kernel(gC, 3, {c1, c2});
    cudaGraphNode_t c4 = add_kernel(gC, 2, {c3});
    add_kernel(gC, 2, {});
    add_kernel(gC, 1, {c4});
    cudaGraphExec_t eC;
    CK(cudaGraphInstantiate(&eC, gC, 0));
    // D: 4 kernel nodes (0,1,2,0), later updated to (3,3,1,2).
    cudaGraph_t gD1 = capture({0, 1, 2, 0}, st);
    cudaGraphExec_t eD;
    CK(cudaGraphInstantiate(&eD, gD1, 0));

    printf("-- A (capture, kernels 0,1,1,2,2,2): graph %p exec %p\n", (void*)gA, (void*)eA);
    Truth tA = truth_of(gA, true);
    printf("-- B (capture, 38 kernels cycling 0..3, memset, memcpy): graph %p exec %p\n", (void*)gB, (void*)eB);
    Truth tB = truth_of(gB, false);
    printf("-- C (cudaGraphAddKernelNode, fork/join, kernels 3,1,0,3,2,2,1): graph %p exec %p\n", (void*)gC, (void*)eC);
    Truth tC = truth_of(gC, true);
    printf("-- D1 (capture, kernels 0,1,2,0): graph %p exec %p\n", (void*)gD1, (void*)eD);
    Truth tD1 = truth_of(gD1, true);

    // 1. The source graphs' node objects: where the CUfunction, CUkernel, owning graph and type sit.
    struct GT { const char* name; cudaGraph_t g; Truth* t; } gts[] = {{"A", gA, &tA}, {"B", gB, &tB}, {"C", gC, &tC}, {"D1", gD1, &tD1}};
    std::map<uint32_t, int> fOff, kOff, gOff, tyOff;
    int nkn = 0, nn = 0;
    for (auto& gt : gts) {
        for (size_t i = 0; i < gt.t->nodes.size(); i++) {
            uint64_t w[0x800 / 8] = {};
            size_t got = read_some((uint64_t)gt.t->nodes[i], w, sizeof w) / 8;
            int k = gt.t->kof[i];
            nn++;
            if (k >= 0) nkn++;
            for (size_t j = 0; j < got; j++) {
                if (k >= 0 && w[j] == (uint64_t)ks[k].F) fOff[j * 8]++;
                if (k >= 0 && w[j] == (uint64_t)ks[k].K) kOff[j * 8]++;
                if (w[j] == (uint64_t)gt.g) gOff[j * 8]++;
            }
            const uint32_t* u = (const uint32_t*)w;
            for (size_t j = 0; j < got * 2; j++)
                if ((int)u[j] == gt.t->types[i]) tyOff[j * 4]++;
        }
    }
    printf("-- node objects (%d nodes, %d kernel nodes, of graphs A B C D1)\n", nn, nkn);
    printf("  CUfunction at:");
    for (auto& [o, n] : fOff) if (n == nkn) { printf(" +%#x", o); Xs.push_back(o); }
    printf("\n  CUkernel at:");
    for (auto& [o, n] : kOff) if (n == nkn) printf(" +%#x", o);
    printf("\n  owning graph at:");
    for (auto& [o, n] : gOff) if (n == nn) printf(" +%#x", o);
    printf("\n  u32 == node type at:");
    for (auto& [o, n] : tyOff) if (n == nn) printf(" +%#x", o);
    printf("\n  handle spacing in B:");
    for (size_t i = 1; i < tB.nodes.size() && i < 12; i++)
        printf(" %ld", (long)((uint64_t)tB.nodes[i] - (uint64_t)tB.nodes[i - 1]));
    printf("\n");
    if (!Xs.empty()) {
        dump_words("A node 0 from 0", (uint64_t)tA.nodes[0], 0x100);
        uint64_t lo = Xs[0] >= 0x80 ? Xs[0] - 0x80 : 0;
        dump_words("A node 0 around the CUfunction", (uint64_t)tA.nodes[0] + lo, 0x100);
        for (size_t i = 0; i < tB.nodes.size(); i++)
            if (tB.kof[i] < 0) dump_words(tB.types[i] == (int)cudaGraphNodeTypeMemset ? "B memset node from 0" : "B memcpy node from 0", (uint64_t)tB.nodes[i], 0x100);
    }
    if (Xs.empty() || Xs.back() + 0x48 > 2048) printf("  !! CUfunction offset not usable for node detection\n");

    // 2. Source graph layout: from the CUgraph, where are its nodes?
    for (auto& gt : gts) {
        std::unordered_map<uint64_t, Target> vals;
        Want w;
        w.nall = gt.t->nall;
        w.nkernel = gt.t->nkernel;
        for (size_t i = 0; i < gt.t->nodes.size(); i++) {
            for (uint32_t d = 0; d <= 0x40; d += 8) vals[(uint64_t)gt.t->nodes[i] + d] = {d ? 'g' : 'G', (int)i, d};
            w.cnt.push_back(1);
            w.order.push_back((int)i);
        }
        Cfg cfg{&vals, false, {4096, 4096, 2048, 1024}, {4096, 2048, 1024, 0}};
        analyse(sumGraph, gt.name, (uint64_t)gt.g, cfg, w, 12);
    }
    std::vector<uint64_t> hb;
    for (auto n : tB.nodes) hb.push_back((uint64_t)n);
    link_hist("source nodes of B", hb);
    summarise(sumGraph, "source graph -> node handles", 25);

    // 3. The executables: source node handles are targets too ('G', by kernel).
    for (auto& gt : gts)
        for (size_t i = 0; i < gt.t->nodes.size(); i++)
            if (gt.t->kof[i] >= 0) targets[(uint64_t)gt.t->nodes[i]] = {'G', gt.t->kof[i], 0};
    dump_words("exec A", (uint64_t)eA, 0x300);
    dump_words("exec B", (uint64_t)eB, 0x300);
    exec_search("A", eA, tA);
    exec_search("B", eB, tB);
    exec_search("C", eC, tC);
    exec_search("D1", eD, tD1);
    printf("-- launching A, B, C, D1 three times each\n");
    run_exec(eA, st, 3);
    run_exec(eB, st, 3);
    run_exec(eC, st, 3);
    run_exec(eD, st, 3);
    exec_search("A-launched", eA, tA);
    exec_search("B-launched", eB, tB);
    exec_search("C-launched", eC, tC);
    printf("-- D2 (capture, kernels 3,3,1,2), cudaGraphExecUpdate(D)\n");
    cudaGraph_t gD2 = capture({3, 3, 1, 2}, st);
    Truth tD2 = truth_of(gD2, true);
    for (size_t i = 0; i < tD2.nodes.size(); i++)
        if (tD2.kof[i] >= 0) targets[(uint64_t)tD2.nodes[i]] = {'G', tD2.kof[i], 0};
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t ue = cudaGraphExecUpdate(eD, gD2, &info);
    printf("  cudaGraphExecUpdate -> %s, result %d\n", cudaGetErrorString(ue), (int)info.result);
    if (ue == cudaSuccess) {
        exec_search("D-updated", eD, tD2);
        run_exec(eD, st, 2);
        exec_search("D-updated-launched", eD, tD2);
    } else {
        cudaGetLastError();
    }
    summarise(sumExec, "exec -> kernels", 40);
    return 0;
}

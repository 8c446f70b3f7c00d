// PHAST on the GPU (Delling, Goldberg, Nowatzyk, Werneck, "PHAST: Hardware-Accelerated Shortest Path
// Trees", IPDPS 2011; the CU-CH query of Karimi, Koppelman, Michael, ICS '19, sec. 3.8), batched over k
// sources with node-major distance rows: d[v * k + j] is the distance of (renumbered) node v from source j,
// so the k threads of one node read the k distances of a tail in one coalesced access.
//
// Nodes are renumbered by level, top first: the core (if any) is [0, c), then every level from the
// highest to level 0 is a contiguous range. One tree (or k trees) is, in one CUDA graph:
//   upward pass   levels 0, 1, ..., top, core: every node pulls over its upward in-arcs (tail at a lower
//                 level), so d holds the distances of the upward search space (one source: ph_up_search,
//                 one block searching the space itself);
//   core step     d[b] = min over core a of d[a] + D[a][b] (the core is a complete graph: one dense step);
//   downward pass levels top, ..., 0: every node pulls over its downward in-arcs (tail at a higher level).
// Distances are unsigned 32-bit with DINF; a sum that would reach DINF raises flags[F_OVF].
#include "gpuroute_common.cuh"

extern "C" {

// d[src[j] * k + j] = 0 for the k sources (renumbered ids), after d was filled with DINF.
__global__ void ph_sources(int k, const int* __restrict__ src, unsigned int* d) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < k) d[(unsigned long long)src[j] * k + j] = 0u;
}

// One level: nodes [lo, hi) pull over their in-arcs (CSR by head over renumbered ids).
__global__ void ph_level(int lo, int hi, int k, const int* __restrict__ fo, const int* __restrict__ tl,
                         const unsigned int* __restrict__ w, unsigned int* d, int* flags) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long items = (unsigned long long)(hi - lo) * k;
    if (x >= items) return;
    int v = lo + (int)(x / k);
    int j = (int)(x - (unsigned long long)(v - lo) * k);
    unsigned long long self = (unsigned long long)v * k + j;
    unsigned int best = d[self];
    const int a1 = fo[v + 1];
    bool ovf = false;
    for (int a = fo[v]; a < a1; ++a) {
        unsigned int du = d[(unsigned long long)tl[a] * k + j];
        if (du == DINF) continue;
        unsigned long long s = (unsigned long long)du + w[a];
        if (s >= DINF) { ovf = true; continue; }
        if ((unsigned int)s < best) best = (unsigned int)s;
    }
    d[self] = best;
    if (ovf) flags[F_OVF] = 1;
}

// One relaxation of a pull: a reached tail's distance du plus the arc's weight w lowers best, or raises ovf
// where the sum would reach DINF.
__device__ __forceinline__ void ph_relax(unsigned int du, unsigned int w, unsigned int& best, bool& ovf) {
    if (du == DINF) return;
    const unsigned long long s = (unsigned long long)du + w;
    if (s >= DINF) { ovf = true; return; }
    if ((unsigned int)s < best) best = (unsigned int)s;
}

// ph_level with U in-arcs a step: their tails and weights are read first, then the U tail distances are
// loaded together (U independent loads in flight a thread instead of one dependent chain of tail id ->
// distance per arc), then relaxed; the last < U arcs the same way under a guard. The same minimum and
// overflow flag as ph_level. U = 4 for every level; 8 or 16 for the top levels' nodes, whose in-arcs from
// the core and the levels above are many (a chain of U-steps bounds their launch).
}  // extern "C"

// INIT says where an item's own distance comes from: 0, its row d[v * k + j] (filled with DINF before the
// pass); 1, a bit mask of the items the upward pass wrote (mask[v * kw + j / 32] bit j % 32, kw = ceil(k / 32)),
// so the rows of the downward pass's nodes need no fill and are not read where the bit is clear; 2, the pass's
// sources (0 at src[j], else DINF: the upward pass pulled level by level, which writes every node's row).
template <int U, int INIT>
__device__ __forceinline__ void ph_level_u(int lo, int hi, int k, const int* __restrict__ fo,
                                           const int* __restrict__ tl, const unsigned int* __restrict__ w,
                                           unsigned int* d, int* flags, const unsigned int* __restrict__ init) {
    const unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long items = (unsigned long long)(hi - lo) * k;
    if (x >= items) return;
    const int v = lo + (int)(x / k);
    const int j = (int)(x - (unsigned long long)(v - lo) * k);
    const unsigned long long self = (unsigned long long)v * k + j;
    const unsigned long long kk = (unsigned long long)k;
    unsigned int best;
    if (INIT == 0) {
        best = d[self];
    } else if (INIT == 1) {
        const unsigned int bits = init[(unsigned long long)v * ((k + 31) >> 5) + (j >> 5)];
        best = ((bits >> (j & 31)) & 1u) ? d[self] : DINF;
    } else {
        best = ((const int*)init)[j] == v ? 0u : DINF;
    }
    int a = fo[v];
    const int a1 = fo[v + 1];
    bool ovf = false;
    int t[U];
    unsigned int ww[U], dd[U];
    for (; a + U <= a1; a += U) {
#pragma unroll
        for (int i = 0; i < U; ++i) { t[i] = tl[a + i]; ww[i] = w[a + i]; }
#pragma unroll
        for (int i = 0; i < U; ++i) dd[i] = d[t[i] * kk + j];
#pragma unroll
        for (int i = 0; i < U; ++i) ph_relax(dd[i], ww[i], best, ovf);
    }
#pragma unroll
    for (int i = 0; i < U - 1; ++i) {
        t[i] = a + i < a1 ? tl[a + i] : 0;
        ww[i] = a + i < a1 ? w[a + i] : 0u;
    }
#pragma unroll
    for (int i = 0; i < U - 1; ++i) dd[i] = a + i < a1 ? d[t[i] * kk + j] : DINF;
#pragma unroll
    for (int i = 0; i < U - 1; ++i) ph_relax(dd[i], ww[i], best, ovf);
    d[self] = best;
    if (ovf) flags[F_OVF] = 1;
}

extern "C" {

#define PH_LEVEL(NAME, U, INIT)                                                                         \
    __global__ void NAME(int lo, int hi, int k, const int* __restrict__ fo, const int* __restrict__ tl,    \
                         const unsigned int* __restrict__ w, unsigned int* d, int* flags,                 \
                         const unsigned int* __restrict__ init) {                                         \
        ph_level_u<U, INIT>(lo, hi, k, fo, tl, w, d, flags, init);                                        \
    }
// init: unused (INIT 0), the mask (m), the sources (s); see ph_level_u.
PH_LEVEL(ph_level4, 4, 0)
PH_LEVEL(ph_level8, 8, 0)
PH_LEVEL(ph_level16, 16, 0)
PH_LEVEL(ph_level4m, 4, 1)
PH_LEVEL(ph_level8m, 8, 1)
PH_LEVEL(ph_level16m, 16, 1)
PH_LEVEL(ph_level4s, 4, 2)
PH_LEVEL(ph_level8s, 8, 2)
PH_LEVEL(ph_level16s, 16, 2)
#undef PH_LEVEL

// The core: for core nodes b in [0, c): d[b] = min(d[b], min over a of d[a] + D[a * c + b]). Grid
// (ceil(c / blockDim), k, chunks): block (x, j, z) gathers the reached core nodes a of source j in the z-th
// slice of a (their ids and distances, compacted into shared memory: a source reaches few of the core's
// nodes, through its label's hubs or its upward search) and lowers d[b] with atomicMin, so one source's
// c x c step spreads over many blocks (one block alone walks all c rows: ~c dependent L2 round trips) and
// reads only the rows D[a] of reached a. The compaction's order varies between runs; the minimum does not.
// Another block may read d[a] while this one lowers it: harmless, since D is the core's exact distance
// matrix (the triangle inequality holds), so a value already lowered through the core gives no smaller
// sum than the one it came from.
__global__ void ph_core(int c, int k, const unsigned int* __restrict__ D, unsigned int* d, int* flags) {
    const int j = blockIdx.y;
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    const int per = (c + gridDim.z - 1) / gridDim.z;
    const int a0 = blockIdx.z * per;
    const int a1 = min(c, a0 + per);
    extern __shared__ unsigned int da[];  // per distances, then per ids
    int* ia = (int*)(da + per);
    __shared__ int reached;
    if (threadIdx.x == 0) reached = 0;
    __syncthreads();
    for (int a = a0 + threadIdx.x; a < a1; a += blockDim.x) {
        const unsigned int du = d[(unsigned long long)a * k + j];
        if (du != DINF) {
            const int q = atomicAdd(&reached, 1);
            da[q] = du;
            ia[q] = a;
        }
    }
    __syncthreads();
    if (b >= c) return;  // no barrier below this point
    const int m = reached;
    unsigned int best = DINF;
    bool ovf = false;
    for (int q = 0; q < m; ++q) {
        const unsigned int du = da[q];
        const unsigned int w = D[(unsigned long long)ia[q] * c + b];
        if (w == DINF) continue;
        const unsigned long long s = (unsigned long long)du + w;
        if (s >= DINF) { ovf = true; continue; }
        if ((unsigned int)s < best) best = (unsigned int)s;
    }
    if (best != DINF) atomicMin(&d[(unsigned long long)b * k + j], best);
    if (ovf) flags[F_OVF] = 1;
}

// One level with a warp per (node, source) item: the lanes stride over the node's in-arcs and the warp
// takes the minimum with shuffles. For the top levels, whose few nodes have hundreds of in-arcs each:
// a thread per node would walk them one by one (a chain of dependent L2 round trips).
__global__ void ph_level_warp(int lo, int hi, int k, const int* __restrict__ fo, const int* __restrict__ tl,
                              const unsigned int* __restrict__ w, unsigned int* d, int* flags) {
    const unsigned long long x = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const unsigned long long items = (unsigned long long)(hi - lo) * k;
    if (x >= items) return;  // whole warps leave together (x is per warp)
    const int v = lo + (int)(x / k);
    const int j = (int)(x - (unsigned long long)(v - lo) * k);
    const unsigned long long self = (unsigned long long)v * k + j;
    unsigned int best = DINF;
    bool ovf = false;
    const int a1 = fo[v + 1];
    for (int a = fo[v] + lane; a < a1; a += 32) {
        const unsigned int du = d[(unsigned long long)tl[a] * k + j];
        if (du == DINF) continue;
        const unsigned long long s = (unsigned long long)du + w[a];
        if (s >= DINF) { ovf = true; continue; }
        if ((unsigned int)s < best) best = (unsigned int)s;
    }
    for (int o = 16; o > 0; o >>= 1) best = min(best, __shfl_down_sync(0xFFFFFFFFu, best, o));
    if (lane == 0) {
        const unsigned int cur = d[self];
        if (best < cur) d[self] = best;
    }
    if (__any_sync(0xFFFFFFFFu, ovf) && lane == 0) flags[F_OVF] = 1;
}

// The upward pass from hub labels (the labels of gpuroute.ch.query.HubLabels, on the device): block j
// writes source j's forward label into its distances, d[lidpos[hub[i]] * k + j] = dist[i] over the entries
// i of label id slid[j] (node is the labels' (n + 1, 4) int64 row table, lidpos a label id's renumbered
// node). Exact for PHAST: the highest node m of a shortest s-v path is in s's forward label with its exact
// distance (the labels' cover property), and the core step and the downward sweep carry it from m to v,
// as they carry the upward search's upper bounds.
__global__ void ph_label_up(int k, const int* __restrict__ slid, const long long* __restrict__ node,
                            const int* __restrict__ hub, const int* __restrict__ dist,
                            const int* __restrict__ lidpos, unsigned int* d) {
    const int j = blockIdx.x;
    if (j >= k) return;
    const long long a1 = node[4LL * slid[j] + 4];
    for (long long i = node[4LL * slid[j]] + threadIdx.x; i < a1; i += blockDim.x)
        d[(unsigned long long)lidpos[hub[i]] * k + j] = (unsigned int)dist[i];
}

// ph_label_up for a pass whose rows were not filled: the core's rows [0, c * k) were, and a hub below the core
// also sets its item's bit in mask (node-major, kw = ceil(k / 32) words a node, zeroed before) for the
// downward pass's ph_level*m.
__global__ void ph_label_up_m(int k, int c, const int* __restrict__ slid, const long long* __restrict__ node,
                              const int* __restrict__ hub, const int* __restrict__ dist,
                              const int* __restrict__ lidpos, unsigned int* d, unsigned int* mask) {
    const int j = blockIdx.x;
    if (j >= k) return;
    const unsigned long long kw = (unsigned long long)((k + 31) >> 5);
    const long long a1 = node[4LL * slid[j] + 4];
    for (long long i = node[4LL * slid[j]] + threadIdx.x; i < a1; i += blockDim.x) {
        const int p = lidpos[hub[i]];
        d[(unsigned long long)p * k + j] = (unsigned int)dist[i];
        if (p >= c) atomicOr(mask + (unsigned long long)p * kw + (j >> 5), 1u << (j & 31));
    }
}

// The upward search of one source as one block (a single tree: the upward search space of a hierarchy is
// a few thousand nodes, so 50-odd level launches over all n nodes cost more than a label-correcting search
// over the space itself). Rounds of a frontier in global memory (q0, q1: n ints each); a node enters the
// next frontier once per round (stamp[v] = round, zeroed before the pass) when an arc lowers it. The
// up-arcs form a DAG (rank increases), so the rounds end after at most the search space's depth plus
// re-pushes; a warp per frontier node, its lanes over the node's arcs. d is read with __ldcg (L2): other threads of the block lower it with atomicMin, which L1
// would not see. Core nodes (ids < c) are lowered but not expanded: the core step takes them on.
__global__ void __launch_bounds__(1024)
ph_up_search(int c, const int* __restrict__ src, const int* __restrict__ fo, const int* __restrict__ hd,
             const unsigned int* __restrict__ w, unsigned int* d, int* stamp, int* q0, int* q1, int* flags) {
    __shared__ int n_cur, n_next;
    int* cur = q0;
    int* nxt = q1;
    if (threadIdx.x == 0) {
        n_cur = 0;
        const int s = src[0];
        if (s >= c) { cur[0] = s; n_cur = 1; }
    }
    __syncthreads();
    int round = 1;
    bool ovf = false;
    while (n_cur > 0) {
        if (threadIdx.x == 0) n_next = 0;
        __syncthreads();
        const int m = n_cur;
        const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
        for (int i = threadIdx.x >> 5; i < m; i += warps) {  // a warp per frontier node, lanes over its arcs
            const int u = cur[i];
            const unsigned int du = __ldcg(d + u);
            const int a1 = fo[u + 1];
            for (int a = fo[u] + lane; a < a1; a += 32) {
                const int v = hd[a];
                const unsigned long long sum = (unsigned long long)du + w[a];
                if (sum >= DINF) { ovf = true; continue; }
                const unsigned int sv = (unsigned int)sum;
                if (sv >= __ldcg(d + v)) continue;
                const unsigned int old = atomicMin(d + v, sv);
                if (sv < old && v >= c && atomicExch(stamp + v, round) != round) nxt[atomicAdd(&n_next, 1)] = v;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) n_cur = n_next;
        int* t = cur; cur = nxt; nxt = t;
        ++round;
        __syncthreads();
    }
    if (ovf) flags[F_OVF] = 1;
}

// Back to the caller's node ids, source-major: out[j * n + v] = d[pos[v] * k + j] (uint32), for k rows.
// A 32 x 32 tile through shared memory: the reads of a tile row (one node, 32 sources) and the writes of
// a tile column (one source, 32 nodes) are both coalesced. Block (32, 8), grid (ceil(n / 32),
// ceil(k / 32)).
__global__ void ph_gather(int n, int k, const int* __restrict__ pos, const unsigned int* __restrict__ d,
                          unsigned int* out) {
    __shared__ unsigned int tile[32][33];
    const int v0 = blockIdx.x * 32, j0 = blockIdx.y * 32;
    for (int r = threadIdx.y; r < 32; r += 8) {
        const int v = v0 + r, j = j0 + threadIdx.x;
        if (v < n && j < k) tile[r][threadIdx.x] = d[(unsigned long long)pos[v] * k + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += 8) {
        const int j = j0 + r, v = v0 + threadIdx.x;
        if (v < n && j < k) out[(unsigned long long)j * n + v] = tile[threadIdx.x][r];
    }
}

// The same with int64 output (INF, the largest int64, for DINF): the gather and the widening in one pass.
__global__ void ph_gather64(int n, int k, const int* __restrict__ pos, const unsigned int* __restrict__ d,
                            long long* out) {
    __shared__ unsigned int tile[32][33];
    const int v0 = blockIdx.x * 32, j0 = blockIdx.y * 32;
    for (int r = threadIdx.y; r < 32; r += 8) {
        const int v = v0 + r, j = j0 + threadIdx.x;
        if (v < n && j < k) tile[r][threadIdx.x] = d[(unsigned long long)pos[v] * k + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += 8) {
        const int j = j0 + r, v = v0 + threadIdx.x;
        if (v < n && j < k) {
            const unsigned int x = tile[threadIdx.x][r];
            out[(unsigned long long)j * n + v] = (x == DINF) ? 0x7FFFFFFFFFFFFFFFLL : (long long)x;
        }
    }
}

// A table: out[i * t + q] = d[tpos[q] * k + i] for the t targets (renumbered ids) of the k sources.
__global__ void ph_table(int t, int k, const int* __restrict__ tpos, const unsigned int* __restrict__ d,
                         unsigned int* out) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (unsigned long long)t * k) return;
    int i = (int)(x / t);
    int q = (int)(x - (unsigned long long)i * t);
    out[x] = d[(unsigned long long)tpos[q] * k + i];
}

// Paired distances: out[i] = d[tpos[i] * k + slot[i]] for pairs whose source sits in slot[i] of this pass
// (slot[i] < 0: not in this pass, left as it is).
__global__ void ph_pairs(int m, int k, const int* __restrict__ slot, const int* __restrict__ tpos,
                         const unsigned int* __restrict__ d, unsigned int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    int j = slot[i];
    if (j >= 0) out[i] = d[(unsigned long long)tpos[i] * k + j];
}

}  // extern "C"

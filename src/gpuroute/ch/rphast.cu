// RPHAST on the GPU (Delling, Goldberg, Werneck, "Faster Batched Shortest Paths in Road Networks", ATMOS
// 2011): one-to-many distances to a fixed target set, over the target selection of gpuroute.ch.rphast
// (restricted ids: [0, c) the whole core, [c, R) the selected non-core nodes by depth, top first; their
// downward in-arcs as a CSR by head fo / tl / w). The launcher is gpuroute/ch/rphast_gpu.py; the numba twin
// is gpuroute.ch.rphast._rows (the same sums, the same minima: equal results).
//
// k sources at once, node-major rows as PHAST's: d[r * k + j] is restricted node r's distance from source j.
// A pass:
//   fill        d = DINF (every item: the rows are reused by the next pass);
//   upward      (a) the sources' non-core upward entries written into their rows, and
//               (b) the core step for the selected core columns b (core_sel): d[b] = min over the source's
//                   core entries a of dist(a) + D[a][b] (D = core_dist[:, core_sel], (c, cb); its diagonal
//                   is 0, so an entry at b itself counts), in slices of es entries staged in shared memory,
//                   each slice's minimum put with atomicMin;
//               the entries come from the sources' forward hub labels (Up = UpLabels: the label's hubs below
//               the core, then from cstart[label] its core hubs) or from upward searches run on the host
//               (Up = UpEntries: per source its non-core entries, then its core entries);
//   levels      top first: every node pulls over its in-arcs, `lanes` threads (a power of two, up to a
//               warp) per (node, source) item, reduced with shuffles. A level is a phase of merged depths
//               (TargetSelection.merged): a node may read a tail of its own phase before or after that tail is
//               lowered (a benign race: the tail's own in-arcs, extended, are the node's too, so either value
//               gives the same minimum); the stores are single 32-bit words;
//   out         out[j * t + q] = d[trid[q] * k + j].
// Either one launch per phase (the launcher captures them in a CUDA graph: batches of many sources) or one
// persistent kernel for the whole pass (few sources: rph_pass_*), its phases separated by the grid barrier
// of gpuroute_common.cuh (every block resident: the launcher sizes the grid by occupancy), its distance
// reads through L2 (__ldcg: other blocks wrote them before the barrier; L1 is not coherent).
// Distances are unsigned 32-bit with DINF; a sum that would reach DINF raises flags[F_OVF].
#include "gpuroute_common.cuh"

#define RPH_FULL 0xFFFFFFFFu
// Core entries of one source staged in shared memory at a time.
#define RPH_STAGE 512

template <bool CG>
__device__ __forceinline__ unsigned int rph_ld(const unsigned int* p) {
    if (CG) return __ldcg(p);
    return *p;
}

// A source's upward entries from its forward hub label: hubs are label ids, ascending; those at or past
// cstart[label] are the core's (the core holds the highest label ids). lidr: label id -> restricted id
// (-1 outside the selection; a core node's restricted id is its core position).
struct UpLabels {
    const long long* node;   // the labels' (n + 1, 4) row table: forward label of v at node[4v] .. node[4v + 4]
    const int* slid;         // (k,) the sources' label ids
    const long long* cstart; // (n,) first core hub of each forward label
    const int* hub;
    const int* dist;
    const int* lidr;
    __device__ __forceinline__ long long nc_begin(int j) const { return node[4LL * slid[j]]; }
    __device__ __forceinline__ long long nc_end(int j) const { return cstart[slid[j]]; }
    __device__ __forceinline__ long long c_begin(int j) const { return cstart[slid[j]]; }
    __device__ __forceinline__ long long c_end(int j) const { return node[4LL * slid[j] + 4]; }
    __device__ __forceinline__ int rid(long long q) const { return lidr[hub[q]]; }
    __device__ __forceinline__ unsigned int dist_of(long long q) const { return (unsigned int)dist[q]; }
};

// Upward entries computed on the host: source j's non-core entries first[2j] .. first[2j + 1], its core
// entries first[2j + 1] .. first[2j + 2] (restricted ids erid, distances edist < DINF).
struct UpEntries {
    const long long* first;
    const int* erid;
    const unsigned int* edist;
    __device__ __forceinline__ long long nc_begin(int j) const { return first[2 * j]; }
    __device__ __forceinline__ long long nc_end(int j) const { return first[2 * j + 1]; }
    __device__ __forceinline__ long long c_begin(int j) const { return first[2 * j + 1]; }
    __device__ __forceinline__ long long c_end(int j) const { return first[2 * j + 2]; }
    __device__ __forceinline__ int rid(long long q) const { return erid[q]; }
    __device__ __forceinline__ unsigned int dist_of(long long q) const { return edist[q]; }
};

__device__ __forceinline__ void rph_fill(unsigned long long m, unsigned int* d, unsigned long long tid,
                                         unsigned long long nth) {
    for (unsigned long long x = tid; x < m; x += nth) d[x] = DINF;
}

// (a) non-core entries: sources j0, j0 + jn, ...; entries q0, q0 + qn, ... of each.
template <class Up>
__device__ __forceinline__ void rph_up_noncore(const Up& up, int k, unsigned int* d, int j0, int jn, long long q0,
                                               long long qn) {
    for (int j = j0; j < k; j += jn) {
        const long long e = up.nc_end(j);
        for (long long q = up.nc_begin(j) + q0; q < e; q += qn) {
            const int r = up.rid(q);
            if (r >= 0) d[(unsigned long long)r * k + j] = up.dist_of(q);
        }
    }
}

// (b) the core step, in units (source j, chunk of blockDim.x columns, slice z of es core entries): a unit
// stages its entries in shared memory (RPH_STAGE at a time) and lowers its columns with atomicMin (d's core
// slots hold DINF from the fill; the entries include the column's own node where reached: D's diagonal is 0).
// Units blk, blk + nblk, ... (block-uniform: the barriers inside are reached by the whole block).
template <class Up>
__device__ __forceinline__ void rph_up_core(const Up& up, int k, int cb, const int* __restrict__ csel,
                                            const unsigned int* __restrict__ D, unsigned int* d, bool& ovf,
                                            int* s_rid, unsigned int* s_dist, int es, int ns, int blk, int nblk) {
    const int per = (cb + (int)blockDim.x - 1) / (int)blockDim.x;
    const long long units = (long long)k * per * ns;
    for (long long u = blk; u < units; u += nblk) {
        const int j = (int)(u / ((long long)per * ns));
        const int rem = (int)(u - (long long)j * per * ns);
        const int chunk = rem / ns, z = rem - (rem / ns) * ns;
        const int bi = chunk * (int)blockDim.x + (int)threadIdx.x;
        const long long c0 = up.c_begin(j) + (long long)z * es;
        const long long c1 = min(up.c_end(j), c0 + es);
        unsigned int best = DINF;
        for (long long base = c0; base < c1; base += RPH_STAGE) {
            const int m = (int)min((long long)RPH_STAGE, c1 - base);
            __syncthreads();
            for (int i = threadIdx.x; i < m; i += blockDim.x) {
                s_rid[i] = up.rid(base + i);
                s_dist[i] = up.dist_of(base + i);
            }
            __syncthreads();
            if (bi < cb) {
#pragma unroll 4
                for (int i = 0; i < m; ++i) {
                    const unsigned int x = D[(unsigned long long)s_rid[i] * cb + bi];
                    if (x == DINF) continue;
                    const unsigned long long s = (unsigned long long)s_dist[i] + x;
                    if (s >= DINF) { ovf = true; continue; }
                    if ((unsigned int)s < best) best = (unsigned int)s;
                }
            }
        }
        if (bi < cb && best != DINF) atomicMin(d + (unsigned long long)csel[bi] * k + j, best);
    }
}

// One level [lo, hi): 2^lg lanes per (node, source) item x = (v - lo) * k + j, lane g of the item over arcs
// fo[v] + g, fo[v] + g + 2^lg, ...; lane 0 starts from the node's own (upward) value and writes the minimum.
// The loop runs over whole warps (b is the warp's first thread), so every lane of a warp reaches the
// shuffles; tid / nth: this thread's index and the threads of the grid (multiples of 32).
template <bool CG>
__device__ __forceinline__ void rph_level_items(int lo, int hi, int k, int lg, const int* __restrict__ fo,
                                                const int* __restrict__ tl, const unsigned int* __restrict__ w,
                                                unsigned int* d, bool& ovf, unsigned long long tid,
                                                unsigned long long nth) {
    const unsigned long long items = (unsigned long long)(hi - lo) * k;
    const unsigned long long total = items << lg;
    const int lanes = 1 << lg;
    const int lane32 = (int)(tid & 31ull);
    const int g = lane32 & (lanes - 1);
    for (unsigned long long b = tid & ~31ull; b < total; b += nth) {
        const unsigned long long x = (b + lane32) >> lg;
        const bool valid = x < items;
        unsigned int best = DINF;
        int v = 0, j = 0;
        if (valid) {
            v = lo + (int)(x / k);
            j = (int)(x - (unsigned long long)(v - lo) * k);
            if (g == 0) best = rph_ld<CG>(d + (unsigned long long)v * k + j);
            const int a1 = fo[v + 1];
#pragma unroll 4
            for (int a = fo[v] + g; a < a1; a += lanes) {
                const unsigned int du = rph_ld<CG>(d + (unsigned long long)tl[a] * k + j);
                if (du == DINF) continue;
                const unsigned long long s = (unsigned long long)du + w[a];
                if (s >= DINF) { ovf = true; continue; }
                if ((unsigned int)s < best) best = (unsigned int)s;
            }
        }
        for (int o = lanes >> 1; o > 0; o >>= 1) best = min(best, __shfl_down_sync(RPH_FULL, best, o));
        if (valid && g == 0) d[(unsigned long long)v * k + j] = best;
    }
}

template <bool CG>
__device__ __forceinline__ void rph_out_items(int t, int k, const int* __restrict__ trid, const unsigned int* d,
                                              unsigned int* out, unsigned long long tid, unsigned long long nth) {
    const unsigned long long m = (unsigned long long)t * k;
    for (unsigned long long x = tid; x < m; x += nth) {
        const int q = (int)(x / k);
        const int j = (int)(x - (unsigned long long)q * k);
        out[(unsigned long long)j * t + q] = rph_ld<CG>(d + (unsigned long long)trid[q] * k + j);
    }
}

// The whole pass in one persistent kernel. lv: (L, 3) int32 rows (lo, hi, lg), top first. bar: the grid
// barrier's [arrived, generation], zeroed once.
template <class Up>
__device__ __forceinline__ void rph_pass(const Up& up, int R, int k, int L, const int* __restrict__ lv,
                                         const int* __restrict__ fo, const int* __restrict__ tl,
                                         const unsigned int* __restrict__ w, int cb, const int* __restrict__ csel,
                                         const unsigned int* __restrict__ D, int es, int ns, int t,
                                         const int* __restrict__ trid, unsigned int* d, unsigned int* out, int* flags,
                                         unsigned int* bar) {
    __shared__ int s_rid[RPH_STAGE];
    __shared__ unsigned int s_dist[RPH_STAGE];
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool ovf = false;
    rph_fill((unsigned long long)R * k, d, tid, nth);
    grid_barrier(bar);
    rph_up_noncore(up, k, d, 0, 1, (long long)tid, (long long)nth);
    rph_up_core(up, k, cb, csel, D, d, ovf, s_rid, s_dist, es, ns, (int)blockIdx.x, (int)gridDim.x);
    grid_barrier(bar);
    for (int l = 0; l < L; ++l) {
        rph_level_items<true>(lv[3 * l], lv[3 * l + 1], k, lv[3 * l + 2], fo, tl, w, d, ovf, tid, nth);
        grid_barrier(bar);
    }
    rph_out_items<true>(t, k, trid, d, out, tid, nth);
    if (ovf) flags[F_OVF] = 1;
}

extern "C" __global__ void rph_pass_labels(int R, int k, int L, const int* lv, const int* fo, const int* tl,
                                           const unsigned int* w, int cb, const int* csel, const unsigned int* D,
                                           int es, int ns, int t, const int* trid, const long long* node,
                                           const int* slid, const long long* cstart, const int* hub, const int* dist,
                                           const int* lidr, unsigned int* d, unsigned int* out, int* flags,
                                           unsigned int* bar) {
    const UpLabels up{node, slid, cstart, hub, dist, lidr};
    rph_pass(up, R, k, L, lv, fo, tl, w, cb, csel, D, es, ns, t, trid, d, out, flags, bar);
}

extern "C" __global__ void rph_pass_entries(int R, int k, int L, const int* lv, const int* fo, const int* tl,
                                            const unsigned int* w, int cb, const int* csel, const unsigned int* D,
                                            int es, int ns, int t, const int* trid, const long long* first,
                                            const int* erid, const unsigned int* edist, unsigned int* d, unsigned int* out,
                                            int* flags, unsigned int* bar) {
    const UpEntries up{first, erid, edist};
    rph_pass(up, R, k, L, lv, fo, tl, w, cb, csel, D, es, ns, t, trid, d, out, flags, bar);
}

// ---- one launch per phase (captured in a CUDA graph by the launcher)
extern "C" __global__ void rph_fill_rows(unsigned long long m, unsigned int* d) {
    rph_fill(m, d, (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x,
             (unsigned long long)gridDim.x * blockDim.x);
}

// (a) with a block per source: grid (min(k, ...)), any block size.
extern "C" __global__ void rph_up_noncore_labels(int k, const long long* node, const int* slid, const long long* cstart,
                                                 const int* hub, const int* dist, const int* lidr, unsigned int* d) {
    const UpLabels up{node, slid, cstart, hub, dist, lidr};
    rph_up_noncore(up, k, d, (int)blockIdx.x, (int)gridDim.x, (long long)threadIdx.x, (long long)blockDim.x);
}

extern "C" __global__ void rph_up_noncore_entries(int k, const long long* first, const int* erid,
                                                  const unsigned int* edist, unsigned int* d) {
    const UpEntries up{first, erid, edist};
    rph_up_noncore(up, k, d, (int)blockIdx.x, (int)gridDim.x, (long long)threadIdx.x, (long long)blockDim.x);
}

// (b) grid: k * ceil(cb / blockDim.x) * ns blocks (fewer is fine: the blocks stride over the units).
extern "C" __global__ void rph_up_core_labels(int k, int cb, const int* csel, const unsigned int* D, int es, int ns,
                                              const long long* node, const int* slid, const long long* cstart,
                                              const int* hub, const int* dist, const int* lidr, unsigned int* d,
                                              int* flags) {
    __shared__ int s_rid[RPH_STAGE];
    __shared__ unsigned int s_dist[RPH_STAGE];
    const UpLabels up{node, slid, cstart, hub, dist, lidr};
    bool ovf = false;
    rph_up_core(up, k, cb, csel, D, d, ovf, s_rid, s_dist, es, ns, (int)blockIdx.x, (int)gridDim.x);
    if (ovf) flags[F_OVF] = 1;
}

extern "C" __global__ void rph_up_core_entries(int k, int cb, const int* csel, const unsigned int* D, int es, int ns,
                                               const long long* first, const int* erid, const unsigned int* edist,
                                               unsigned int* d, int* flags) {
    __shared__ int s_rid[RPH_STAGE];
    __shared__ unsigned int s_dist[RPH_STAGE];
    const UpEntries up{first, erid, edist};
    bool ovf = false;
    rph_up_core(up, k, cb, csel, D, d, ovf, s_rid, s_dist, es, ns, (int)blockIdx.x, (int)gridDim.x);
    if (ovf) flags[F_OVF] = 1;
}

// One level: grid * block >= (hi - lo) * k * 2^lg threads (or fewer: the threads stride), block a multiple of 32.
extern "C" __global__ void rph_level(int lo, int hi, int k, int lg, const int* fo, const int* tl,
                                     const unsigned int* w, unsigned int* d, int* flags) {
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool ovf = false;
    rph_level_items<false>(lo, hi, k, lg, fo, tl, w, d, ovf, tid, nth);
    if (ovf) flags[F_OVF] = 1;
}

extern "C" __global__ void rph_out(int t, int k, const int* trid, const unsigned int* d, unsigned int* out) {
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    rph_out_items<false>(t, k, trid, d, out, tid, nth);
}

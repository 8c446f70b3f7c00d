// PHAST on the GPU (Delling, Goldberg, Nowatzyk, Werneck, "PHAST: Hardware-Accelerated Shortest Path
// Trees", IPDPS 2011; the CU-CH query of Karimi, Koppelman, Michael, ICS '19, sec. 3.8), batched over k
// sources with node-major distance rows: d[v * k + j] is the distance of (renumbered) node v from source j,
// so the k threads of one node read the k distances of a tail in one coalesced access.
//
// Nodes are renumbered by level, top first: the core (if any) is [0, c), then every level from the
// highest to level 0 is a contiguous range. One tree (or k trees) is, in one CUDA graph:
//   upward pass   levels 0, 1, ..., top, core: every node pulls over its upward in-arcs (tail at a lower
//                 level), so d holds the distances of the upward search space;
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

// The core: for core nodes b in [0, c): d[b] = min(d[b], min over a of d[a] + D[a * c + b]). Grid
// (ceil(c / threads), k): a block holds one source's c core distances in shared memory.
__global__ void ph_core(int c, int k, const unsigned int* __restrict__ D, unsigned int* d, int* flags) {
    int j = blockIdx.y;
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    extern __shared__ unsigned int da[];
    for (int a = threadIdx.x; a < c; a += blockDim.x) da[a] = d[(unsigned long long)a * k + j];
    __syncthreads();
    if (b >= c) return;  // no barrier below this point
    unsigned int best = da[b];
    bool ovf = false;
    for (int a = 0; a < c; ++a) {
        unsigned int du = da[a];
        unsigned int w = D[(unsigned long long)a * c + b];
        if (du == DINF || w == DINF) continue;
        unsigned long long s = (unsigned long long)du + w;
        if (s >= DINF) { ovf = true; continue; }
        if ((unsigned int)s < best) best = (unsigned int)s;
    }
    // Another block may read d[b] while this one writes it: harmless, since D is the core's exact
    // distance matrix (the triangle inequality holds), so a value already lowered through the core
    // gives no smaller sum than the one it came from.
    d[(unsigned long long)b * k + j] = best;
    if (ovf) flags[F_OVF] = 1;
}

// Back to the caller's node ids, source-major: out[j * n + v] = d[pos[v] * k + j] (uint32), for k rows.
__global__ void ph_gather(int n, int k, const int* __restrict__ pos, const unsigned int* __restrict__ d,
                          unsigned int* out) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (unsigned long long)n * k) return;
    int j = (int)(x / n);
    int v = (int)(x - (unsigned long long)j * n);
    out[x] = d[(unsigned long long)pos[v] * k + j];
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

// CU-CH contraction kernels (Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP
// Query", ICS '19, sec. 3.3-3.6, Algorithms 1 and 2), launched by ch/cuch_gpu.py. The numba twin is
// ch/cuch.py; its module doc states every rule, and both must decide alike (integers only).
//
// The overlay graph G_l (original node ids) is a forward CSR sorted by (tail, head) -- ffo int64 (n+1),
// fhead int32, fw int64 -- and a backward CSR sorted by (head, tail) -- bfo int64 (n+1), btail int32,
// bw int64. A node's out-neighbours W are therefore sorted by id: the searches look a node up in W by
// binary search (the paper's hash table of Algorithm 2, without collisions).
//
// SCORE and SHORTCUT give one group of GS = 8, 16 or 32 lanes (a power of two chosen per iteration
// from the largest in-degree: the paper's T_l = max(8, 2^ceil(lg D_l)), at most a warp) to each node v.
// The group caches v's out-arcs (w_j, w(v, w_j)) in shared memory (global memory when there are more
// than its share of the cache), and lane t takes the in-neighbours u_t, u_{t+GS}, ... :
//   1-hop: for every out-arc u -> y, y = w_j in W: the pair (u, w_j) is witnessed when
//          w(u, y) <= w(u, v) + w(v, w_j);
//   2-hop (SHORTCUT only): for every u -> x (x != v) and x -> y, y = w_j in W: witnessed when
//          w(u, x) + w(x, y) < w(u, v) + w(v, w_j) (strict, sec. 3.4).
// SHORTCUT writes one byte per broken path (u_i, v, w_j) at off[k] + i |W| + j (1: a shortcut is
// needed): the paper's shortcut bit vector, one row per lane, so no two lanes write the same byte and
// no atomics are needed; the launcher compacts the flags.
//
// Every lane of a warp reaches the group reductions (__shfl_xor_sync over the full mask): lanes of a
// group past the end of the node list compute with empty neighbourhoods instead of returning.

#include "gpuroute_common.cuh"

#ifndef CU_BLOCK
#define CU_BLOCK 256
#endif
// Out-arcs cached in shared memory per block (split evenly between its groups).
#ifndef CU_CACHE
#define CU_CACHE 2048
#endif

#define CU_INF 0x7FFFFFFFFFFFFFFFLL

typedef long long i64;

extern "C" {

// Index of x in the ascending keys[0, n), or -1.
__device__ __forceinline__ int find_sorted(const int* keys, int n, int x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int m = (lo + hi) >> 1;
        const int k = keys[m];
        if (k < x) lo = m + 1;
        else if (k > x) hi = m;
        else return m;
    }
    return -1;
}

// Sum / max over the gs lanes of a group (gs a power of two <= 32, groups aligned in the warp); every
// lane of the warp must call it.
__device__ __forceinline__ i64 group_sum(i64 x, int gs) {
    for (int o = gs >> 1; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o, gs);
    return x;
}
__device__ __forceinline__ i64 group_max(i64 x, int gs) {
    for (int o = gs >> 1; o > 0; o >>= 1) {
        const i64 y = __shfl_xor_sync(0xffffffffu, x, o, gs);
        x = y > x ? y : x;
    }
    return x;
}

// The group's node (or -1 past the end) and its out-arcs cached for the group (in shared memory when
// they fit its share, else pointers into global memory). Ends with __syncwarp.
struct Hood {
    int v, nw, nu;
    i64 w0, u0;
    const int* wh;
    const i64* ww;
};

__device__ __forceinline__ Hood load_hood(i64 k, i64 n_nodes, const int* nodes, const i64* ffo,
                                          const int* fhead, const i64* fw, const i64* bfo, int gs,
                                          int* sh_h, i64* sh_w) {
    const int groups = CU_BLOCK / gs;
    const int g = threadIdx.x / gs, lane = threadIdx.x % gs;
    const int cap = CU_CACHE / groups;
    Hood h;
    h.v = -1;
    h.nw = h.nu = 0;
    h.w0 = h.u0 = 0;
    if (k < n_nodes) {
        h.v = nodes[k];
        h.w0 = ffo[h.v];
        h.nw = (int)(ffo[h.v + 1] - h.w0);
        h.u0 = bfo[h.v];
        h.nu = (int)(bfo[h.v + 1] - h.u0);
    }
    int* myh = sh_h + g * cap;
    i64* myw = sh_w + g * cap;
    if (h.nw <= cap) {
        for (int i = lane; i < h.nw; i += gs) {
            myh[i] = fhead[h.w0 + i];
            myw[i] = fw[h.w0 + i];
        }
        h.wh = myh;
        h.ww = myw;
    } else {
        h.wh = fhead + h.w0;
        h.ww = fw + h.w0;
    }
    __syncwarp();
    return h;
}

// SCORE (sec. 3.3): cost[k] of node nodes[k], k < n_nodes. One group of gs lanes per node.
__global__ void __launch_bounds__(CU_BLOCK) cuch_score(i64 n_nodes, const int* __restrict__ nodes,
                                                       const i64* __restrict__ ffo, const int* __restrict__ fhead,
                                                       const i64* __restrict__ fw, const i64* __restrict__ bfo,
                                                       const int* __restrict__ btail, const i64* __restrict__ bw,
                                                       i64 mean_w, int gs, i64* __restrict__ cost) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const int groups = CU_BLOCK / gs;
    const int lane = threadIdx.x % gs;
    const i64 k = (i64)blockIdx.x * groups + threadIdx.x / gs;
    const Hood h = load_hood(k, n_nodes, nodes, ffo, fhead, fw, bfo, gs, sh_h, sh_w);
    i64 s = 0, mx = 0, maxnbr = 0, needed = 0;
    for (int j = lane; j < h.nw; j += gs) {
        const int x = h.wh[j];
        const i64 wx = h.ww[j];
        s += wx;
        mx = wx > mx ? wx : mx;
        const i64 dx = ffo[x + 1] - ffo[x] + bfo[x + 1] - bfo[x];
        maxnbr = dx > maxnbr ? dx : maxnbr;
    }
    for (int i = lane; i < h.nu; i += gs) {
        const int u = btail[h.u0 + i];
        const i64 wu = bw[h.u0 + i];
        s += wu;
        mx = wu > mx ? wu : mx;
        const i64 du = ffo[u + 1] - ffo[u] + bfo[u + 1] - bfo[u];
        maxnbr = du > maxnbr ? du : maxnbr;
        i64 c = h.nw;
        if (find_sorted(h.wh, h.nw, u) >= 0) c -= 1;  // the pair (u, u)
        const i64 a1 = ffo[u + 1];
        for (i64 a = ffo[u]; a < a1; ++a) {
            const int j = find_sorted(h.wh, h.nw, fhead[a]);
            if (j >= 0 && fw[a] <= wu + h.ww[j]) c -= 1;  // 1-hop witness, not strict
        }
        needed += c;
    }
    s = group_sum(s, gs);
    needed = group_sum(needed, gs);
    mx = group_max(mx, gs);
    maxnbr = group_max(maxnbr, gs);
    if (lane == 0 && k < n_nodes) {
        const i64 deg = (i64)h.nw + h.nu;
        const i64 ed = needed - deg;
        const i64 dd = deg > 1 ? deg : 1;
        cost[k] = 64 * ed + 16 * deg + 4 * maxnbr + (16 * s) / (dd * mean_w) + (16 * mx) / mean_w;
    }
}

// SELECT, one Luby round, part 1: newsel[v] = 1 for every undecided candidate v (state 1) whose key
// (cost_of[v], v) is below the key of every neighbour (in or out) that is an undecided or selected
// candidate (state 1 or 2). One thread per candidate.
__global__ void cuch_luby_decide(i64 n_cand, const int* __restrict__ cand, const int* __restrict__ state,
                                 const i64* __restrict__ cost_of, const i64* __restrict__ ffo,
                                 const int* __restrict__ fhead, const i64* __restrict__ bfo,
                                 const int* __restrict__ btail, unsigned char* __restrict__ newsel) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_cand) return;
    const int v = cand[t];
    if (state[v] != 1) return;
    const i64 cv = cost_of[v];
    for (i64 a = ffo[v]; a < ffo[v + 1]; ++a) {
        const int x = fhead[a];
        const int sx = state[x];
        if ((sx == 1 || sx == 2) && (cost_of[x] < cv || (cost_of[x] == cv && x < v))) return;
    }
    for (i64 b = bfo[v]; b < bfo[v + 1]; ++b) {
        const int x = btail[b];
        const int sx = state[x];
        if ((sx == 1 || sx == 2) && (cost_of[x] < cv || (cost_of[x] == cv && x < v))) return;
    }
    newsel[v] = 1;
}

// Part 2: the round's picks become selected (2); undecided candidates next to a pick become excluded (3).
// Reads only newsel, writes only state[own node]: no race.
__global__ void cuch_luby_apply(i64 n_cand, const int* __restrict__ cand, int* __restrict__ state,
                                const unsigned char* __restrict__ newsel, const i64* __restrict__ ffo,
                                const int* __restrict__ fhead, const i64* __restrict__ bfo,
                                const int* __restrict__ btail) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_cand) return;
    const int v = cand[t];
    if (state[v] != 1) return;
    if (newsel[v]) {
        state[v] = 2;
        return;
    }
    for (i64 a = ffo[v]; a < ffo[v + 1]; ++a)
        if (newsel[fhead[a]]) {
            state[v] = 3;
            return;
        }
    for (i64 b = bfo[v]; b < bfo[v + 1]; ++b)
        if (newsel[btail[b]]) {
            state[v] = 3;
            return;
        }
}

// SHORTCUT (sec. 3.4, Algorithm 2): flags[off[k] + i |W| + j] = 1 when the broken path
// (u_i, v, w_j), v = sel[k], u_i != w_j, has no 1-hop (<=) or 2-hop (<) witness in G_l. One group per
// contracted node, one row (u_i) per lane at a time.
__global__ void __launch_bounds__(CU_BLOCK) cuch_shortcut(i64 n_sel, const int* __restrict__ sel,
                                                          const i64* __restrict__ off, const i64* __restrict__ ffo,
                                                          const int* __restrict__ fhead, const i64* __restrict__ fw,
                                                          const i64* __restrict__ bfo, const int* __restrict__ btail,
                                                          const i64* __restrict__ bw, int gs,
                                                          unsigned char* __restrict__ flags) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const int groups = CU_BLOCK / gs;
    const int lane = threadIdx.x % gs;
    const i64 k = (i64)blockIdx.x * groups + threadIdx.x / gs;
    const Hood h = load_hood(k, n_sel, sel, ffo, fhead, fw, bfo, gs, sh_h, sh_w);
    if (h.v < 0) return;  // no reductions below: the lanes of a finished group may leave
    for (int i = lane; i < h.nu; i += gs) {
        const int u = btail[h.u0 + i];
        const i64 wu = bw[h.u0 + i];
        unsigned char* row = flags + off[k] + (i64)i * h.nw;
        for (int j = 0; j < h.nw; ++j) row[j] = h.wh[j] != u;
        const i64 a1 = ffo[u + 1];
        for (i64 a = ffo[u]; a < a1; ++a) {
            const int x = fhead[a];
            const i64 wx = fw[a];
            const int j = find_sorted(h.wh, h.nw, x);
            if (j >= 0 && wx <= wu + h.ww[j]) row[j] = 0;  // 1 hop
            if (x == h.v) continue;  // u -> v -> w is the broken path itself
            const i64 b1 = ffo[x + 1];
            for (i64 b = ffo[x]; b < b1; ++b) {
                const int j2 = find_sorted(h.wh, h.nw, fhead[b]);
                if (j2 >= 0 && wx + fw[b] < wu + h.ww[j2]) row[j2] = 0;  // 2 hops, strict
            }
        }
    }
}

// EXTRACT's merge of parallel arcs: for each run [seg[s], seg[s+1]) of equal (tail, head) in the sorted
// permutation order[], best[s] = the arc of least (w, mid, arc). One thread per run.
__global__ void cuch_merge_best(i64 n_seg, const i64* __restrict__ seg, const i64* __restrict__ order,
                                const i64* __restrict__ w, const int* __restrict__ mid, const int* __restrict__ arc,
                                i64* __restrict__ best) {
    const i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_seg) return;
    i64 b = order[seg[s]];
    for (i64 p = seg[s] + 1; p < seg[s + 1]; ++p) {
        const i64 e = order[p];
        if (w[e] < w[b] || (w[e] == w[b] && (mid[e] < mid[b] || (mid[e] == mid[b] && arc[e] < arc[b])))) b = e;
    }
    best[s] = b;
}

// APSP (sec. 3.6): one Floyd-Warshall round k over the dense (c, c) distance matrix, in place (row and
// column k do not change in round k: the diagonal is 0 and weights are positive). CU_INF = unreachable.
__global__ void cuch_fw_round(int c, int k, i64* __restrict__ d) {
    const i64 x = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (i64)c * c) return;
    const i64 i = x / c, j = x - i * c;
    const i64 dik = d[i * c + k];
    const i64 dkj = d[(i64)k * c + j];
    if (dik == CU_INF || dkj == CU_INF) return;
    const i64 s = dik + dkj;
    if (s < d[x]) d[x] = s;
}

// The core pairs' middles: for a != b with a finite distance, the direct overlay arc's (mid, arc) when
// its weight is the distance, else mid = the smallest p with an overlay arc p -> b and
// d(a, p) + w(p, b) == d(a, b), arc -1; (-1, -1) elsewhere. wd, md, ad: the direct arcs, dense (c, c).
__global__ void cuch_core_mid(int c, const int* __restrict__ core, const int* __restrict__ pos,
                              const i64* __restrict__ bfo, const int* __restrict__ btail, const i64* __restrict__ bw,
                              const i64* __restrict__ d, const i64* __restrict__ wd, const int* __restrict__ md,
                              const int* __restrict__ ad, int* __restrict__ omid, int* __restrict__ oarc) {
    const i64 x = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (i64)c * c) return;
    const i64 a = x / c, b = x - a * c;
    const i64 dab = d[x];
    int m = -1, r = -1;
    if (a != b && dab != CU_INF) {
        if (wd[x] == dab) {
            m = md[x];
            r = ad[x];
        } else {
            const int vb = core[b];
            for (i64 q = bfo[vb]; q < bfo[vb + 1]; ++q) {
                const int p = btail[q];
                const i64 dp = d[a * c + pos[p]];
                if (dp != CU_INF && dp + bw[q] == dab && (m < 0 || p < m)) m = p;
            }
        }
    }
    omid[x] = m;
    oarc[x] = r;
}

}  // extern "C"

// CU-CH contraction kernels (Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP
// Query", ICS '19, sec. 3.3-3.6, Algorithms 1 and 2), launched by ch/cuch_gpu.py. The numba twin is
// ch/cuch.py; its module doc states every rule, and both must decide alike (integers only).
//
// The overlay graph G_l (original node ids) is a forward CSR sorted by (tail, head) -- ffo int64 (n+1),
// ftail/fhead int32, fw int64, fmid/farc int32 -- and a backward CSR sorted by (head, tail) -- bfo
// int64 (n+1), btail int32, bw int64, bperm int32 (the forward index of each backward arc). The arc
// arrays have a capacity; the arc count m of G_l lives on the device (info[I_M]). Offsets are exact for
// every node of G_l (the alive nodes); entries of removed nodes are stale and never read. A node's
// out-neighbours W are sorted by id: the searches look a node up in W by binary search (the paper's hash
// table of Algorithm 2, without collisions).
//
// Sizes stay on the device: every iteration's counts go to one row `info` of int64 (layout I_* below,
// mirrored in cuch_gpu.py), which the host reads once per iteration (after SELECT).
//
// SCORE and SHORTCUT give one group of GS = 8, 16 or 32 lanes (a power of two chosen from the largest
// in-degree: the paper's T_l = max(8, 2^ceil(lg D_l)), at most a warp; any GS gives the same result) to
// each node v. The group caches v's out-arcs (w_j, w(v, w_j)) in shared memory (global memory when there
// are more than its share of the cache), and lane t takes the in-neighbours u_t, u_{t+GS}, ... (on
// overlays of high degree -- the late iterations: few nodes, hundreds of arcs each -- the wide SCORE
// gives a block to v and a warp to each u, the row SHORTCUT 1, 2 or 4 warps to each (u, v), whose
// threads take u's out-arcs x; the same decisions):
//   1-hop: for every out-arc u -> y, y = w_j in W: the pair (u, w_j) is witnessed when
//          w(u, y) <= w(u, v) + w(v, w_j);
//   2-hop (SHORTCUT only): for every u -> x (x != v) and x -> y, y = w_j in W: witnessed when
//          w(u, x) + w(x, y) < w(u, v) + w(v, w_j) (strict, sec. 3.4).
// SHORTCUT writes one entry per broken path (u_i, v, w_j) at off[k] + i |W| + j: the sort key
// u_i * n + w_j of the shortcut it needs, or CU_SENT when witnessed (the paper's shortcut bit vector),
// straight into EXTRACT's arc list, so no compaction is needed: no atomics.
//
// EXTRACT sorts the 64-bit keys tail * n + head of G_l's kept arcs and the shortcuts (dropped arcs carry
// CU_SENT and sort last; where it fits, the arc's index rides in the key's low bits, so a keys-only sort
// suffices), keeps the least (w, mid, arc) of each run of equal keys (a scan gives the output
// positions), and builds the backward CSR by a second key sort.
//
// The scans take two launches: phase 1 writes per-block sums, phase 3 has each block add up the sums of
// the blocks before it (no launch in between) and the last block write the totals.
//
// Every lane of a warp reaches the group reductions (__shfl_xor_sync over the full mask), and every
// thread of a block reaches the block scans: threads past the end compute with empty data instead of
// returning.

#include "gpuroute_common.cuh"

#ifndef CU_BLOCK
#define CU_BLOCK 256
#endif
// Out-arcs cached in shared memory per block (split evenly between its groups).
#ifndef CU_CACHE
#define CU_CACHE 2048
#endif
// Elements per thread of the scans (a block covers CU_BLOCK * SCAN_ITEMS).
#ifndef SCAN_ITEMS
#define SCAN_ITEMS 8
#endif
#define SCAN_TILE (CU_BLOCK * SCAN_ITEMS)

#define CU_INF 0x7FFFFFFFFFFFFFFFLL
// Sort key of an arc that is dropped (sorts after every real key u * n + w < n^2).
#define CU_SENT 0x7FFFFFFFFFFFFFFFLL
#define FW_B 32

typedef long long i64;

// The per-iteration info row (int64), mirrored in cuch_gpu.py.
enum {
    I_NSEL = 0,    // |U_l|                                   (SELECT's scan)
    I_PAIRS = 1,   // broken paths sum |U| |W| over U_l       (SELECT's scan)
    I_UP = 2,      // out-arcs of U_l (up hierarchy arcs)     (SELECT's scan)
    I_DOWN = 3,    // in-arcs of U_l (down hierarchy arcs)    (SELECT's scan)
    I_M = 4,       // arcs of G_l                             (previous EXTRACT)
    I_MAXIN = 5,   // largest in-degree in G_l                (SCORE)
    I_MAXDEG = 6,  // largest in + out degree in G_l          (SCORE)
    I_SUMW = 7,    // weight sum of G_l                       (previous EXTRACT)
    I_SHORT = 8,   // candidate shortcuts of iteration l      (SHORTCUT)
    I_OVF = 9,     // a cost outside int32: SELECT's packed key is not exact (the host redoes it)
    I_WIDTH = 16
};

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

// First index i in the ascending a[0, n) with a[i] >= x.
__device__ __forceinline__ i64 lower_bound_i32(const int* a, i64 n, i64 x) {
    i64 lo = 0, hi = n;
    while (lo < hi) {
        const i64 m = (lo + hi) >> 1;
        if ((i64)a[m] < x) lo = m + 1;
        else hi = m;
    }
    return lo;
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

// Exclusive scan over the block of NV columns: x[c] becomes the sum over the lower threads, tot[c] the
// block's total (every thread). Every thread of the block must call it.
template <int NV>
__device__ __forceinline__ void block_scan(i64 (&x)[NV], i64 (&tot)[NV]) {
    __shared__ i64 sh[NV][CU_BLOCK / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    i64 inc[NV];
#pragma unroll
    for (int c = 0; c < NV; ++c) {
        inc[c] = x[c];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const i64 y = __shfl_up_sync(0xffffffffu, inc[c], o);
            if (lane >= o) inc[c] += y;
        }
    }
    __syncthreads();
    if (lane == 31) {
#pragma unroll
        for (int c = 0; c < NV; ++c) sh[c][wid] = inc[c];
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < NV; ++c) {
        i64 pre = 0, t = 0;
        for (int w = 0; w < CU_BLOCK / 32; ++w) {
            const i64 s = sh[c][w];
            if (w < wid) pre += s;
            t += s;
        }
        x[c] = inc[c] - x[c] + pre;
        tot[c] = t;
    }
    __syncthreads();
}

// Largest x over the block (every thread must call it); the result is valid in every thread.
__device__ __forceinline__ i64 block_max(i64 x) {
    __shared__ i64 sh[CU_BLOCK / 32];
    for (int o = 16; o > 0; o >>= 1) {
        const i64 y = __shfl_xor_sync(0xffffffffu, x, o);
        x = y > x ? y : x;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = x;
    __syncthreads();
    i64 r = sh[0];
    for (int w = 1; w < CU_BLOCK / 32; ++w) r = sh[w] > r ? sh[w] : r;
    __syncthreads();
    return r;
}

__device__ __forceinline__ i64 block_sum(i64 x) {
    i64 a[1] = {x}, t[1];
    block_scan<1>(a, t);
    return t[0];
}

// The two-phase scans: phase 1 writes each block's column sums to bsum[block][4]; in phase 3 every block
// sums the entries of the blocks before it itself (pre[c], every thread), so no launch turns bsum into
// prefixes, and the last block knows the totals (pre + its own).
template <int NV>
__device__ __forceinline__ void block_prefix(const i64* bsum, i64 (&pre)[NV]) {
    i64 x[NV], tot[NV];
#pragma unroll
    for (int c = 0; c < NV; ++c) x[c] = 0;
    for (i64 b = threadIdx.x; b < (i64)blockIdx.x; b += CU_BLOCK)
#pragma unroll
        for (int c = 0; c < NV; ++c) x[c] += bsum[b * 4 + c];
    block_scan<NV>(x, tot);
#pragma unroll
    for (int c = 0; c < NV; ++c) pre[c] = tot[c];
}

__device__ __forceinline__ i64 warp_sum(i64 x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// EXTRACT's sort keys: with ib >= 0 the arc's index e rides in the low ib bits, (key << ib) | e, so one
// key sort (no index array) gives both the order and the arcs (the host checks that it fits in 63
// bits); with ib < 0 the plain key (the host sorts an index array). CU_SENT stays CU_SENT.
__device__ __forceinline__ i64 pack_key(i64 key, i64 e, int ib) { return ib < 0 ? key : (key << ib) | e; }
__device__ __forceinline__ i64 unpack_key(i64 pk, int ib) { return (ib < 0 || pk == CU_SENT) ? pk : pk >> ib; }
__device__ __forceinline__ i64 unpack_idx(i64 pk, int ib) { return pk & ((1LL << ib) - 1); }

extern "C" {

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

// SCORE (sec. 3.3): the cost of node nodes[k], k < n_nodes, into cost[k] and cost_of[v]; SELECT's key
// skey[k] = cost * 2^32 + v (the order of (cost, v); I_OVF raised when a cost leaves int32). Also the
// overlay's largest in-degree and degree (info, by atomicMax). mean_w from info (I_SUMW // I_M, at least
// 1). One group of gs lanes per node.
__global__ void __launch_bounds__(CU_BLOCK) cuch_score(i64 n_nodes, const int* __restrict__ nodes,
                                                       const i64* __restrict__ ffo, const int* __restrict__ fhead,
                                                       const i64* __restrict__ fw, const i64* __restrict__ bfo,
                                                       const int* __restrict__ btail, const i64* __restrict__ bw,
                                                       i64* __restrict__ info, int gs, i64* __restrict__ cost,
                                                       i64* __restrict__ cost_of, i64* __restrict__ skey) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const int groups = CU_BLOCK / gs;
    const int lane = threadIdx.x % gs;
    const i64 k = (i64)blockIdx.x * groups + threadIdx.x / gs;
    const Hood h = load_hood(k, n_nodes, nodes, ffo, fhead, fw, bfo, gs, sh_h, sh_w);
    const i64 m_arcs = info[I_M];
    i64 mean_w = m_arcs > 0 ? info[I_SUMW] / m_arcs : 1;
    if (mean_w < 1) mean_w = 1;
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
    const bool lead_lane = lane == 0 && k < n_nodes;
    const i64 deg = (i64)h.nw + h.nu;
    if (lead_lane) {
        const i64 ed = needed - deg;
        const i64 dd = deg > 1 ? deg : 1;
        const i64 cv = 64 * ed + 16 * deg + 4 * maxnbr + (16 * s) / (dd * mean_w) + (16 * mx) / mean_w;
        cost[k] = cv;
        cost_of[h.v] = cv;
        if (cv < -2147483648LL || cv > 2147483647LL) info[I_OVF] = 1;
        skey[k] = cv * 4294967296LL + h.v;
    }
    const i64 bin = block_max(lead_lane ? (i64)h.nu : 0);
    const i64 bdeg = block_max(lead_lane ? deg : 0);
    if (threadIdx.x == 0) {
        if (bin > 0) atomicMax(&info[I_MAXIN], bin);
        if (bdeg > 0) atomicMax(&info[I_MAXDEG], bdeg);
    }
}

// SCORE, wide form for overlays of high degree: one block per node; v's out-arcs cached for the block,
// warp w takes the in-neighbours u_w, u_{w+8}, ... and its lanes stride over u's out-arcs (1-hop
// search). The same results as cuch_score.
__global__ void __launch_bounds__(CU_BLOCK) cuch_score_wide(i64 n_nodes, const int* __restrict__ nodes,
                                                            const i64* __restrict__ ffo, const int* __restrict__ fhead,
                                                            const i64* __restrict__ fw, const i64* __restrict__ bfo,
                                                            const int* __restrict__ btail, const i64* __restrict__ bw,
                                                            i64* __restrict__ info, i64* __restrict__ cost,
                                                            i64* __restrict__ cost_of, i64* __restrict__ skey) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const i64 k = blockIdx.x;
    const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int v = nodes[k];
    const i64 w0 = ffo[v], u0 = bfo[v];
    const int nw = (int)(ffo[v + 1] - w0), nu = (int)(bfo[v + 1] - u0);
    const int* wh = fhead + w0;
    const i64* ww = fw + w0;
    if (nw <= CU_CACHE) {
        for (int i = threadIdx.x; i < nw; i += CU_BLOCK) {
            sh_h[i] = wh[i];
            sh_w[i] = ww[i];
        }
        wh = sh_h;
        ww = sh_w;
    }
    __syncthreads();
    const i64 m_arcs = info[I_M];
    i64 mean_w = m_arcs > 0 ? info[I_SUMW] / m_arcs : 1;
    if (mean_w < 1) mean_w = 1;
    i64 s = 0, mx = 0, maxnbr = 0, needed = 0;
    for (int j = threadIdx.x; j < nw; j += CU_BLOCK) {
        const int x = wh[j];
        const i64 wx = ww[j];
        s += wx;
        mx = wx > mx ? wx : mx;
        const i64 dx = ffo[x + 1] - ffo[x] + bfo[x + 1] - bfo[x];
        maxnbr = dx > maxnbr ? dx : maxnbr;
    }
    for (int i = threadIdx.x; i < nu; i += CU_BLOCK) {
        const int u = btail[u0 + i];
        const i64 wu = bw[u0 + i];
        s += wu;
        mx = wu > mx ? wu : mx;
        const i64 du = ffo[u + 1] - ffo[u] + bfo[u + 1] - bfo[u];
        maxnbr = du > maxnbr ? du : maxnbr;
    }
    for (int i = wid; i < nu; i += CU_BLOCK / 32) {  // uniform per warp
        const int u = btail[u0 + i];
        const i64 wu = bw[u0 + i];
        i64 hits = 0;
        const i64 a1 = ffo[u + 1];
        for (i64 a = ffo[u] + lane; a < a1; a += 32) {
            const int j = find_sorted(wh, nw, fhead[a]);
            if (j >= 0 && fw[a] <= wu + ww[j]) hits += 1;  // 1-hop witness, not strict
        }
        hits = warp_sum(hits);
        if (lane == 0) needed += nw - hits - (find_sorted(wh, nw, u) >= 0 ? 1 : 0);  // and the pair (u, u)
    }
    s = block_sum(s);
    needed = block_sum(needed);
    mx = block_max(mx);
    maxnbr = block_max(maxnbr);
    if (threadIdx.x == 0) {
        const i64 deg = (i64)nw + nu;
        const i64 ed = needed - deg;
        const i64 dd = deg > 1 ? deg : 1;
        const i64 cv = 64 * ed + 16 * deg + 4 * maxnbr + (16 * s) / (dd * mean_w) + (16 * mx) / mean_w;
        cost[k] = cv;
        cost_of[v] = cv;
        if (cv < -2147483648LL || cv > 2147483647LL) info[I_OVF] = 1;
        skey[k] = cv * 4294967296LL + v;
        if (nu > 0) atomicMax(&info[I_MAXIN], (i64)nu);
        if (deg > 0) atomicMax(&info[I_MAXDEG], deg);
    }
}

// SELECT: the candidates are the nodes whose key cost * 2^32 + id is at most the n_cand-th smallest
// (sorted[thr]): state 1, every other node of G_l state 0; newsel cleared.
__global__ void cuch_mark(i64 n_nodes, const int* __restrict__ nodes, const i64* __restrict__ cost_of,
                          const i64* __restrict__ sorted, i64 thr, int* __restrict__ state, int* __restrict__ newsel) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_nodes) return;
    const int v = nodes[t];
    state[v] = cost_of[v] * 4294967296LL + v <= sorted[thr] ? 1 : 0;
    newsel[v] = 0;
}

// SELECT, one Luby round (tag = round + 1), part 1: newsel[v] = tag for every undecided candidate v
// (state 1) whose key (cost_of[v], v) is below the key of every neighbour (in or out) that is an
// undecided or selected candidate (state 1 or 2). One thread per node of the list.
__global__ void cuch_luby_decide(i64 n_nodes, const int* __restrict__ nodes, const int* __restrict__ state,
                                 const i64* __restrict__ cost_of, const i64* __restrict__ ffo,
                                 const int* __restrict__ fhead, const i64* __restrict__ bfo,
                                 const int* __restrict__ btail, int* __restrict__ newsel, int tag) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_nodes) return;
    const int v = nodes[t];
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
    newsel[v] = tag;
}

// Part 2: the round's picks become selected (2); undecided candidates next to a pick become excluded (3).
// Reads only newsel, writes only state[own node]: no race.
__global__ void cuch_luby_apply(i64 n_nodes, const int* __restrict__ nodes, int* __restrict__ state,
                                const int* __restrict__ newsel, const i64* __restrict__ ffo,
                                const int* __restrict__ fhead, const i64* __restrict__ bfo,
                                const int* __restrict__ btail, int tag) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_nodes) return;
    const int v = nodes[t];
    if (state[v] != 1) return;
    if (newsel[v] == tag) {
        state[v] = 2;
        return;
    }
    for (i64 a = ffo[v]; a < ffo[v + 1]; ++a)
        if (newsel[fhead[a]] == tag) {
            state[v] = 3;
            return;
        }
    for (i64 b = bfo[v]; b < bfo[v + 1]; ++b)
        if (newsel[btail[b]] == tag) {
            state[v] = 3;
            return;
        }
}

// SELECT's compaction, over the node list of G_l (ascending): the selected nodes (state 2) in id order.
// Columns: selected, broken paths |U| |W|, out-degree, in-degree (of selected nodes).
__device__ __forceinline__ void sel_vals(i64 k, i64 n_nodes, const int* nodes, const int* state, const i64* ffo,
                                         const i64* bfo, int& v, i64 (&x)[4]) {
    x[0] = x[1] = x[2] = x[3] = 0;
    v = -1;
    if (k >= n_nodes) return;
    v = nodes[k];
    if (state[v] != 2) return;
    const i64 o = ffo[v + 1] - ffo[v], in = bfo[v + 1] - bfo[v];
    x[0] = 1;
    x[1] = o * in;
    x[2] = o;
    x[3] = in;
}

__global__ void __launch_bounds__(CU_BLOCK) cuch_sel_reduce(i64 n_nodes, const int* __restrict__ nodes,
                                                            const int* __restrict__ state, const i64* __restrict__ ffo,
                                                            const i64* __restrict__ bfo, i64* __restrict__ bsum) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[4] = {0, 0, 0, 0}, tot[4];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        int v;
        i64 x[4];
        sel_vals(base + i, n_nodes, nodes, state, ffo, bfo, v, x);
        for (int c = 0; c < 4; ++c) acc[c] += x[c];
    }
    block_scan<4>(acc, tot);
    if (threadIdx.x == 0)
        for (int c = 0; c < 4; ++c) bsum[blockIdx.x * 4 + c] = tot[c];
}

// Phase 3 (the last block writes the totals to info[I_NSEL .. I_DOWN]): sel[] (ascending), the next
// node list nxt[] (the rest, ascending), off[] (start of each
// selected node's broken paths), roff[] (its first row u_0 among all rows), the hierarchy bookkeeping of each selected node v: rank (base_rank +
// its position), order, level, and where its up / down arcs go in the hierarchy buffers (hu_start,
// hd_start; base_up / base_down arcs are there already) and how many (hu_cnt, hd_cnt).
__global__ void __launch_bounds__(CU_BLOCK) cuch_sel_scatter(
        i64 n_nodes, const int* __restrict__ nodes, const int* __restrict__ state, const i64* __restrict__ ffo,
        const i64* __restrict__ bfo, const i64* __restrict__ bsum, i64* __restrict__ info, i64 base_rank, i64 base_up,
        i64 base_down, int lev,
        int* __restrict__ sel, int* __restrict__ nxt, i64* __restrict__ off, i64* __restrict__ roff, int* __restrict__ rank,
        int* __restrict__ order, int* __restrict__ level, i64* __restrict__ hu_start, int* __restrict__ hu_cnt,
        i64* __restrict__ hd_start, int* __restrict__ hd_cnt) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[4] = {0, 0, 0, 0}, tot[4];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        int v;
        i64 x[4];
        sel_vals(base + i, n_nodes, nodes, state, ffo, bfo, v, x);
        for (int c = 0; c < 4; ++c) acc[c] += x[c];
    }
    block_scan<4>(acc, tot);
    i64 pre[4];
    block_prefix<4>(bsum, pre);
    for (int c = 0; c < 4; ++c) acc[c] += pre[c];
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0)
        for (int c = 0; c < 4; ++c) info[I_NSEL + c] = pre[c] + tot[c];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 k = base + i;
        if (k >= n_nodes) break;
        int v;
        i64 x[4];
        sel_vals(k, n_nodes, nodes, state, ffo, bfo, v, x);
        if (x[0]) {
            const i64 ps = acc[0];
            sel[ps] = v;
            off[ps] = acc[1];
            roff[ps] = acc[3];
            rank[v] = (int)(base_rank + ps);
            order[base_rank + ps] = v;
            level[v] = lev;
            hu_start[v] = base_up + acc[2];
            hu_cnt[v] = (int)x[2];
            hd_start[v] = base_down + acc[3];
            hd_cnt[v] = (int)x[3];
        } else {
            nxt[k - acc[0]] = v;
        }
        for (int c = 0; c < 4; ++c) acc[c] += x[c];
    }
}

// SHORTCUT (sec. 3.4, Algorithm 2): for v = sel[k], pkey[ebase + off[k] + i |W| + j] = u_i * n + w_j when the
// broken path (u_i, v, w_j), u_i != w_j, has no 1-hop (<=) or 2-hop (<) witness in G_l, else CU_SENT;
// pw / pmid / parc the shortcut's weight, middle (v) and arc (-1). One group per contracted node, one
// row (u_i) per lane at a time. The count of needed shortcuts goes to info[I_SHORT].
__global__ void __launch_bounds__(CU_BLOCK) cuch_shortcut(
        i64 n_sel, const int* __restrict__ sel, const i64* __restrict__ off, const i64* __restrict__ ffo,
        const int* __restrict__ fhead, const i64* __restrict__ fw, const i64* __restrict__ bfo,
        const int* __restrict__ btail, const i64* __restrict__ bw, i64 n, int gs, int ib, i64 ebase,
        i64* __restrict__ pkey, i64* __restrict__ pw, int* __restrict__ pmid, int* __restrict__ parc,
        i64* __restrict__ info) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const int groups = CU_BLOCK / gs;
    const int lane = threadIdx.x % gs;
    const i64 k = (i64)blockIdx.x * groups + threadIdx.x / gs;
    const Hood h = load_hood(k, n_sel, sel, ffo, fhead, fw, bfo, gs, sh_h, sh_w);
    pkey += ebase;  // the broken paths' entries start at ebase
    pw += ebase;
    pmid += ebase;
    parc += ebase;
    i64 found = 0;
    for (int i = lane; i < h.nu; i += gs) {  // empty past the end (h.nu = 0)
        const int u = btail[h.u0 + i];
        const i64 wu = bw[h.u0 + i];
        const i64 row = off[k] + (i64)i * h.nw;
        i64* key = pkey + row;
        const i64 ubase = (i64)u * n;
        for (int j = 0; j < h.nw; ++j) {
            const int wj = h.wh[j];
            key[j] = wj != u ? pack_key(ubase + wj, ebase + row + j, ib) : CU_SENT;
            pw[row + j] = wu + h.ww[j];
            pmid[row + j] = h.v;
            parc[row + j] = -1;
        }
        const i64 a1 = ffo[u + 1];
        for (i64 a = ffo[u]; a < a1; ++a) {
            const int x = fhead[a];
            const i64 wx = fw[a];
            const int j = find_sorted(h.wh, h.nw, x);
            if (j >= 0 && wx <= wu + h.ww[j]) key[j] = CU_SENT;  // 1 hop
            if (x == h.v) continue;  // u -> v -> w is the broken path itself
            const i64 b1 = ffo[x + 1];
            for (i64 b = ffo[x]; b < b1; ++b) {
                const int j2 = find_sorted(h.wh, h.nw, fhead[b]);
                if (j2 >= 0 && wx + fw[b] < wu + h.ww[j2]) key[j2] = CU_SENT;  // 2 hops, strict
            }
        }
        for (int j = 0; j < h.nw; ++j) found += key[j] != CU_SENT;
    }
    const i64 total = block_sum(found);
    if (threadIdx.x == 0 && total) atomicAdd((unsigned long long*)&info[I_SHORT], (unsigned long long)total);
}

// SHORTCUT, row form for overlays of high degree: wpr warps per row (v = sel[k], u_i), rows r < R (R =
// the in-arcs of U_l; roff[k] = the first row of sel[k]). The row's threads cache W, write the row's
// entries, then stride over u's out-arcs x (1 hop), each scanning x's out-arcs (2 hops); a witness
// overwrites the entry with CU_SENT (threads write the same value: no race). The same results as
// cuch_shortcut.
__global__ void __launch_bounds__(CU_BLOCK) cuch_shortcut_rows(
        i64 R, i64 n_sel, const int* __restrict__ sel, const i64* __restrict__ roff, const i64* __restrict__ off,
        const i64* __restrict__ ffo, const int* __restrict__ fhead, const i64* __restrict__ fw,
        const i64* __restrict__ bfo, const int* __restrict__ btail, const i64* __restrict__ bw, i64 n, int wpr,
        int ib, i64 ebase, i64* __restrict__ pkey, i64* __restrict__ pw, int* __restrict__ pmid,
        int* __restrict__ parc, i64* __restrict__ info) {
    __shared__ int sh_h[CU_CACHE];
    __shared__ i64 sh_w[CU_CACHE];
    const int tpr = 32 * wpr, rpb = CU_BLOCK / tpr;
    const int slot = threadIdx.x / tpr, t = threadIdx.x % tpr;
    const int cap = CU_CACHE / rpb;
    const i64 r = (i64)blockIdx.x * rpb + slot;
    const bool live = r < R;
    pkey += ebase;  // the broken paths' entries start at ebase
    pw += ebase;
    pmid += ebase;
    parc += ebase;
    int v = -1, nw = 0, u = -1;
    i64 wu = 0, row = 0;
    const int* wh = fhead;
    const i64* ww = fw;
    if (live) {
        i64 lo = 0, hi = n_sel;  // the last k with roff[k] <= r
        while (hi - lo > 1) {
            const i64 md = (lo + hi) >> 1;
            if (roff[md] <= r) lo = md;
            else hi = md;
        }
        const i64 k = lo;
        v = sel[k];
        const i64 i = r - roff[k];
        const i64 w0 = ffo[v];
        nw = (int)(ffo[v + 1] - w0);
        u = btail[bfo[v] + i];
        wu = bw[bfo[v] + i];
        wh = fhead + w0;
        ww = fw + w0;
        row = off[k] + i * nw;
        const i64 ubase = (i64)u * n;
        const bool cached = nw <= cap;
        int* myh = sh_h + slot * cap;
        i64* myw = sh_w + slot * cap;
        for (int j = t; j < nw; j += tpr) {
            const int wj = wh[j];
            const i64 wwj = ww[j];
            if (cached) {
                myh[j] = wj;
                myw[j] = wwj;
            }
            pkey[row + j] = wj != u ? pack_key(ubase + wj, ebase + row + j, ib) : CU_SENT;
            pw[row + j] = wu + wwj;
            pmid[row + j] = v;
            parc[row + j] = -1;
        }
        if (cached) {
            wh = myh;
            ww = myw;
        }
    }
    __syncthreads();
    if (live) {
        i64* key = pkey + row;
        const i64 a1 = ffo[u + 1];
        for (i64 a = ffo[u] + t; a < a1; a += tpr) {
            const int x = fhead[a];
            const i64 wx = fw[a];
            const int j = find_sorted(wh, nw, x);
            if (j >= 0 && wx <= wu + ww[j]) key[j] = CU_SENT;  // 1 hop
            if (x == v) continue;  // u -> v -> w is the broken path itself
            const i64 b1 = ffo[x + 1];
            for (i64 b = ffo[x]; b < b1; ++b) {
                const int j2 = find_sorted(wh, nw, fhead[b]);
                if (j2 >= 0 && wx + fw[b] < wu + ww[j2]) key[j2] = CU_SENT;  // 2 hops, strict
            }
        }
    }
    __syncthreads();
    i64 found = 0;
    if (live)
        for (int j = t; j < nw; j += tpr) found += pkey[row + j] != CU_SENT;
    const i64 total = block_sum(found);
    if (threadIdx.x == 0 && total) atomicAdd((unsigned long long*)&info[I_SHORT], (unsigned long long)total);
}

// UPDATE + EXTRACT's input, one thread per arc index e < m of G_l: forward arc e keeps its key tail * n +
// head when neither end is in U_l (state 2), else CU_SENT (weight, mid, arc copied alongside); when its
// tail is in U_l it is an up hierarchy arc of the tail, copied to the up buffer at hu_start[tail] + its
// place in the tail's list; when the head of backward arc e is in U_l, that arc is a down hierarchy arc
// of the head, copied to the down buffer at hd_start[head] + its place in the head's list.
__global__ void cuch_extract_keys(i64 m, const int* __restrict__ ftail, const int* __restrict__ fhead,
                                  const i64* __restrict__ fw, const int* __restrict__ fmid, const int* __restrict__ farc,
                                  const i64* __restrict__ ffo, const i64* __restrict__ bfo, const int* __restrict__ bhead,
                                  const int* __restrict__ btail, const i64* __restrict__ bw, const int* __restrict__ bperm,
                                  const int* __restrict__ state, i64 n, int ib, i64* __restrict__ ckey, i64* __restrict__ cw,
                                  int* __restrict__ cmid, int* __restrict__ carc, const i64* __restrict__ hu_start,
                                  const i64* __restrict__ hd_start, int* __restrict__ uo, int* __restrict__ uh,
                                  i64* __restrict__ uw, int* __restrict__ um, int* __restrict__ ua,
                                  int* __restrict__ dob, int* __restrict__ dt, i64* __restrict__ dw,
                                  int* __restrict__ dm, int* __restrict__ da) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    const int t = ftail[e], h = fhead[e];
    const int st = state[t], sh = state[h];
    const i64 w = fw[e];
    const int md = fmid[e], ar = farc[e];
    ckey[e] = (st != 2 && sh != 2) ? pack_key((i64)t * n + h, e, ib) : CU_SENT;
    cw[e] = w;
    cmid[e] = md;
    carc[e] = ar;
    if (st == 2) {
        const i64 p = hu_start[t] + (e - ffo[t]);
        uo[p] = t;
        uh[p] = h;
        uw[p] = w;
        um[p] = md;
        ua[p] = ar;
    }
    const int bh = bhead[e];
    if (state[bh] == 2) {
        const i64 p = hd_start[bh] + (e - bfo[bh]);
        const int f = bperm[e];
        dob[p] = bh;
        dt[p] = btail[e];
        dw[p] = bw[e];
        dm[p] = fmid[f];
        da[p] = farc[f];
    }
}

// G_0's input: the graph's arcs (loops dropped), mid -1, arc = its id.
__global__ void cuch_input_keys(i64 m, const int* __restrict__ tail, const int* __restrict__ head, i64 n, int ib,
                                i64* __restrict__ ckey, int* __restrict__ cmid, int* __restrict__ carc) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    const int t = tail[e], h = head[e];
    ckey[e] = t != h ? pack_key((i64)t * n + h, e, ib) : CU_SENT;
    cmid[e] = -1;
    carc[e] = (int)e;
}

// EXTRACT's merge, phase 1, over the sorted keys: with ib >= 0 src is the sorted packed keys, else src is
// the unsorted keys and order the sorting permutation. ks[p] = the p-th smallest key, ke[p] = its arc's
// index; one column: the number of runs of equal real keys (their first position). key2 (the backward
// sort keys) all CU_SENT: phase 3 writes the first M.
__device__ __forceinline__ void sorted_at(i64 p, const i64* src, const i64* order, int ib, i64& k, i64& e) {
    if (ib >= 0) {
        const i64 pk = src[p];
        k = unpack_key(pk, ib);
        e = pk == CU_SENT ? -1 : unpack_idx(pk, ib);
    } else {
        e = order[p];
        k = e < 0 ? CU_SENT : src[e];  // -1: a dropped arc's place (EXTRACT by merging)
    }
}

__global__ void __launch_bounds__(CU_BLOCK) cuch_seg_reduce(i64 T, const i64* __restrict__ src,
                                                            const i64* __restrict__ order, int ib, i64* __restrict__ ks,
                                                            i64* __restrict__ ke, i64* __restrict__ key2,
                                                            i64* __restrict__ bsum) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[1] = {0}, tot[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= T) break;
        i64 k, e;
        sorted_at(p, src, order, ib, k, e);
        ks[p] = k;
        ke[p] = e;
        key2[p] = CU_SENT;
        if (k != CU_SENT) {
            i64 k0 = CU_SENT, e0;
            if (p > 0) sorted_at(p - 1, src, order, ib, k0, e0);
            if (p == 0 || k0 != k) acc[0] += 1;
        }
    }
    block_scan<1>(acc, tot);
    if (threadIdx.x == 0) {
        bsum[blockIdx.x * 4] = tot[0];
        bsum[blockIdx.x * 4 + 1] = bsum[blockIdx.x * 4 + 2] = bsum[blockIdx.x * 4 + 3] = 0;
    }
}

// Phase 3: each run's least (w, mid, arc) becomes arc q of the next overlay (q = the run's rank):
// ftail, fhead, fw, fmid, farc, and key2[q] = head * n + tail packed with q (the backward CSR's sort
// key). The last block writes the arc count M to info[I_M]; the weight sum goes to info[I_SUMW].
__global__ void __launch_bounds__(CU_BLOCK) cuch_seg_scatter(
        i64 T, const i64* __restrict__ ks, const i64* __restrict__ ke, const i64* __restrict__ cw,
        const int* __restrict__ cmid, const int* __restrict__ carc, const i64* __restrict__ bsum, i64 n, int ib,
        i64* __restrict__ info, int* __restrict__ ftail, int* __restrict__ fhead, i64* __restrict__ fw,
        int* __restrict__ fmid, int* __restrict__ farc, i64* __restrict__ key2, i64 m_old, i64* __restrict__ qof,
        i64* __restrict__ nk, i64* __restrict__ nq, i64* __restrict__ cnt) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[1] = {0}, tot[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= T) break;
        const i64 k = ks[p];
        if (k != CU_SENT && (p == 0 || ks[p - 1] != k)) acc[0] += 1;
    }
    block_scan<1>(acc, tot);
    i64 pre[1];
    block_prefix<1>(bsum, pre);
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) info[I_M] = pre[0] + tot[0];
    i64 q = acc[0] + pre[0];
    i64 sumw = 0;
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= T) break;
        const i64 k = ks[p];
        if (k == CU_SENT || (p > 0 && ks[p - 1] == k)) continue;
        const i64 e = ke[p];
        i64 bwt = cw[e];
        int bm = cmid[e], ba = carc[e];
        for (i64 p2 = p + 1; p2 < T && ks[p2] == k; ++p2) {
            const i64 e2 = ke[p2];
            const i64 w2 = cw[e2];
            const int m2 = cmid[e2], a2 = carc[e2];
            if (w2 < bwt || (w2 == bwt && (m2 < bm || (m2 == bm && a2 < ba)))) {
                bwt = w2;
                bm = m2;
                ba = a2;
            }
        }
        const i64 t = k / n, h = k - t * n;
        ftail[q] = (int)t;
        fhead[q] = (int)h;
        fw[q] = bwt;
        fmid[q] = bm;
        farc[q] = ba;
        key2[q] = pack_key(h * n + t, q, ib);
        if (m_old >= 0) {  // EXTRACT by merging: an old arc's new place, or a run of new arcs only
            if (e < m_old) {
                qof[e] = q;
            } else {
                const i64 x = (i64)atomicAdd((unsigned long long*)&cnt[2], 1ULL);
                nk[x] = key2[q];
                nq[x] = q;
            }
        }
        sumw += bwt;
        ++q;
    }
    const i64 s = block_sum(sumw);
    if (threadIdx.x == 0 && s) atomicAdd((unsigned long long*)&info[I_SUMW], (unsigned long long)s);
}

// EXTRACT by merging (iterations after G_0): the old arcs' keys ckey[0:m] are already in order (the
// previous overlay's forward CSR) but for CU_SENT holes, so only the new shortcuts' keys are sorted (apart)
// and the two sequences merged (merge path: an element's place is its rank in its own sequence plus the
// number of the other's keys before it; on equal keys the old arc first, as a stable sort puts it). The
// result is what the full sort gives: with ib >= 0 the sorted packed keys, else the sorting permutation
// (-1 at the dropped arcs' places, which sort last). The backward order likewise: the old arcs in the
// previous backward CSR's order, the runs of new arcs only sorted apart, merged.
__device__ __forceinline__ i64 lb_i64(const i64* a, i64 n, i64 x) {  // first i with a[i] >= x
    i64 lo = 0, hi = n;
    while (lo < hi) {
        const i64 mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}
__device__ __forceinline__ i64 ub_i64(const i64* a, i64 n, i64 x) {  // first i with a[i] > x
    i64 lo = 0, hi = n;
    while (lo < hi) {
        const i64 mid = (lo + hi) >> 1;
        if (a[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// cnt[1] = the new keys before CU_SENT (bkey sorted, n_new of them); cnt[0], cnt[2], cnt[3] = 0.
__global__ void cuch_mg_count(const i64* __restrict__ bkey, i64 n_new, i64* __restrict__ cnt) {
    cnt[1] = lb_i64(bkey, n_new, CU_SENT);
    cnt[0] = cnt[2] = cnt[3] = 0;
}

// Phase 1 of a compaction: bsum[block * 4] = the kept elements of the block's tile (with use_perm, element p
// is key[perm[p]]).
__global__ void __launch_bounds__(CU_BLOCK) cuch_mg_keep_reduce(i64 m, const i64* __restrict__ key,
                                                                const int* __restrict__ perm, int use_perm,
                                                                i64* __restrict__ bsum) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[1] = {0}, tot[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= m) break;
        acc[0] += key[use_perm ? perm[p] : p] != CU_SENT;
    }
    block_scan<1>(acc, tot);
    if (threadIdx.x == 0) {
        bsum[blockIdx.x * 4] = tot[0];
        bsum[blockIdx.x * 4 + 1] = bsum[blockIdx.x * 4 + 2] = bsum[blockIdx.x * 4 + 3] = 0;
    }
}

// The forward merge, old side: old key p (p < m, kept) of rank r goes to akey[r] and to its place
// r + (new keys below it); cnt[0] = the kept old keys. bkey: the new keys sorted, cnt[1] of them real.
__global__ void __launch_bounds__(CU_BLOCK) cuch_mg_old(i64 m, const i64* __restrict__ ckey,
                                                        const i64* __restrict__ bsum, const i64* __restrict__ bkey,
                                                        int ib, i64* __restrict__ akey, i64* __restrict__ out,
                                                        i64* __restrict__ cnt) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    const i64 nb = cnt[1];
    i64 acc[1] = {0}, tot[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= m) break;
        acc[0] += ckey[p] != CU_SENT;
    }
    block_scan<1>(acc, tot);
    i64 pre[1];
    block_prefix<1>(bsum, pre);
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) cnt[0] = pre[0] + tot[0];
    i64 r = acc[0] + pre[0];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 p = base + i;
        if (p >= m) break;
        const i64 k = ckey[p];
        if (k == CU_SENT) continue;
        akey[r] = k;
        out[r + lb_i64(bkey, nb, k)] = ib >= 0 ? k : p;
        ++r;
    }
}

// The forward merge, new side (one thread per place p < T): new key p (p < cnt[1]) to its place p + (old
// keys at or below it); the places from cnt[0] + cnt[1] on get the dropped arcs (CU_SENT, or -1).
// bord (ib < 0): the new keys' sorting permutation, indices from m.
__global__ void cuch_mg_new(i64 T, i64 m, const i64* __restrict__ bkey, const i64* __restrict__ bord, int ib,
                            const i64* __restrict__ akey, const i64* __restrict__ cnt, i64* __restrict__ out) {
    const i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= T) return;
    const i64 ca = cnt[0], nb = cnt[1];
    if (p < nb) {
        const i64 k = bkey[p];
        out[p + ub_i64(akey, ca, k)] = ib >= 0 ? k : m + bord[p];
    }
    if (p >= ca + nb) out[p] = ib >= 0 ? CU_SENT : -1;
}

// The backward merge, old side: the previous overlay's backward arcs b < m_old (forward arc bperm[b]) that
// are kept, in their order, with their new forward index q = qof[bperm[b]] and key (head, tail, q); nk:
// the runs of new arcs' keys sorted (cnt[2] of them). cnt[3] = the kept old arcs.
__global__ void __launch_bounds__(CU_BLOCK) cuch_mg_bold(i64 m_old, const int* __restrict__ bperm,
                                                         const i64* __restrict__ ckey, const i64* __restrict__ qof,
                                                         const int* __restrict__ ftail, const int* __restrict__ fhead,
                                                         i64 n, const i64* __restrict__ bsum, const i64* __restrict__ nk,
                                                         int ib, i64* __restrict__ akey, i64* __restrict__ out,
                                                         i64* __restrict__ cnt) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    const i64 nn = cnt[2];
    i64 acc[1] = {0}, tot[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 b = base + i;
        if (b >= m_old) break;
        acc[0] += ckey[bperm[b]] != CU_SENT;
    }
    block_scan<1>(acc, tot);
    i64 pre[1];
    block_prefix<1>(bsum, pre);
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) cnt[3] = pre[0] + tot[0];
    i64 r = acc[0] + pre[0];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 b = base + i;
        if (b >= m_old) break;
        const i64 e = bperm[b];
        if (ckey[e] == CU_SENT) continue;
        const i64 q = qof[e];
        const i64 k = pack_key((i64)fhead[q] * n + ftail[q], q, ib);
        akey[r] = k;
        out[r + lb_i64(nk, nn, k)] = ib >= 0 ? k : q;
        ++r;
    }
}

// The backward merge, new side: run key p (p < cnt[2]) to its place; nq (ib < 0): its forward index.
__global__ void cuch_mg_bnew(i64 T, const i64* __restrict__ nk, const i64* __restrict__ nq, int ib,
                             const i64* __restrict__ akey, const i64* __restrict__ cnt, i64* __restrict__ out) {
    const i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= T) return;
    const i64 ca = cnt[3], nn = cnt[2];
    if (p < nn) {
        const i64 k = nk[p];
        out[p + ub_i64(akey, ca, k)] = ib >= 0 ? k : nq[p];
    }
    if (p >= ca + nn) out[p] = ib >= 0 ? CU_SENT : -1;
}

// The backward CSR: arc q (q < M) in (head, tail) order is forward arc j: with ib >= 0 the index in the
// sorted packed key src[q], else border[q].
__global__ void cuch_back(i64 T, const i64* __restrict__ src, const i64* __restrict__ border, int ib,
                          const int* __restrict__ ftail, const int* __restrict__ fhead, const i64* __restrict__ fw,
                          const i64* __restrict__ info, int* __restrict__ bhead, int* __restrict__ btail,
                          i64* __restrict__ bw, int* __restrict__ bperm) {
    const i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= T || q >= info[I_M]) return;
    const i64 j = ib >= 0 ? unpack_idx(src[q], ib) : border[q];
    bhead[q] = fhead[j];
    btail[q] = ftail[j];
    bw[q] = fw[j];
    bperm[q] = (int)j;
}

// The CSR offsets by binary search over the sorted tails (forward) and heads (backward): with full,
// fo[x] for every x in [0, cnt); else fo[v] and fo[v + 1] for v = nodes[t], t < cnt (the nodes of G_l).
__global__ void cuch_offsets(i64 cnt, const int* __restrict__ nodes, int full, const int* __restrict__ ftail,
                             const int* __restrict__ bhead, const i64* __restrict__ info, i64* __restrict__ ffo,
                             i64* __restrict__ bfo) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cnt) return;
    const i64 M = info[I_M];
    if (full) {
        ffo[t] = lower_bound_i32(ftail, M, t);
        bfo[t] = lower_bound_i32(bhead, M, t);
    } else {
        const i64 v = nodes[t];
        ffo[v] = lower_bound_i32(ftail, M, v);
        ffo[v + 1] = lower_bound_i32(ftail, M, v + 1);
        bfo[v] = lower_bound_i32(bhead, M, v);
        bfo[v + 1] = lower_bound_i32(bhead, M, v + 1);
    }
}

// ------------------------------------------------------------------------------------ the core (APSP)
// The core's nodes: position pos[v], rank (after every contracted node, by id), order, level.
__global__ void cuch_core_nodes(i64 c, const int* __restrict__ core, i64 n, int lev, int* __restrict__ rank,
                                int* __restrict__ order, int* __restrict__ level, int* __restrict__ pos) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= c) return;
    const int v = core[i];
    rank[v] = (int)(n - c + i);
    order[n - c + i] = v;
    level[v] = lev;
    pos[v] = (int)i;
}

// Dense (c, c): dist 0 on the diagonal, CU_INF elsewhere; the direct arcs' wd CU_INF, md / ad -1.
__global__ void cuch_core_init(i64 c, i64* __restrict__ dist, i64* __restrict__ wd, int* __restrict__ md,
                               int* __restrict__ ad) {
    const i64 x = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= c * c) return;
    const i64 a = x / c, b = x - a * c;
    dist[x] = a == b ? 0 : CU_INF;
    wd[x] = CU_INF;
    md[x] = -1;
    ad[x] = -1;
}

// The final overlay's arcs (all between core nodes, one per pair) into the dense matrices.
__global__ void cuch_core_scatter(i64 m, const int* __restrict__ ftail, const int* __restrict__ fhead,
                                  const i64* __restrict__ fw, const int* __restrict__ fmid, const int* __restrict__ farc,
                                  const int* __restrict__ pos, i64 c, i64* __restrict__ dist, i64* __restrict__ wd,
                                  int* __restrict__ md, int* __restrict__ ad) {
    const i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= m) return;
    const i64 x = (i64)pos[ftail[q]] * c + pos[fhead[q]];
    dist[x] = fw[q];
    wd[x] = fw[q];
    md[x] = fmid[q];
    ad[x] = farc[q];
}

// APSP (sec. 3.6) by blocked Floyd-Warshall over FW_B x FW_B tiles of the dense (c, c) matrix, in place
// (exact: the distances do not depend on the order of the relaxations). Round kb: cuch_fw_cross does
// the diagonal tile (kb, kb) and the tiles of row kb and column kb (each block first closes the diagonal
// tile in shared memory), cuch_fw_rest every other tile. Row and column k of a tile do not change in
// step k (the diagonal is 0, weights are not negative), so one barrier per step suffices.
__device__ __forceinline__ i64 min_plus(i64 cur, i64 a, i64 b) {
    if (a == CU_INF || b == CU_INF) return cur;
    const i64 s = a + b;
    return s < cur ? s : cur;
}

__global__ void __launch_bounds__(FW_B* FW_B) cuch_fw_cross(int c, int kb, i64* __restrict__ d) {
    __shared__ i64 D[FW_B][FW_B];
    __shared__ i64 S[FW_B][FW_B];
    const int nb = (c + FW_B - 1) / FW_B;
    int b = blockIdx.x;
    const bool col = b >= nb;
    if (col) b -= nb;
    if (col && b == kb) return;  // the whole block: the diagonal tile is the row block's
    const int ty = threadIdx.y, tx = threadIdx.x;
    const int k0 = kb * FW_B;
    {
        const int gi = k0 + ty, gj = k0 + tx;
        D[ty][tx] = (gi < c && gj < c) ? d[(i64)gi * c + gj] : CU_INF;
    }
    __syncthreads();
    for (int k = 0; k < FW_B; ++k) {
        const i64 v = min_plus(D[ty][tx], D[ty][k], D[k][tx]);
        __syncthreads();
        D[ty][tx] = v;
        __syncthreads();
    }
    if (!col && b == kb) {
        const int gi = k0 + ty, gj = k0 + tx;
        if (gi < c && gj < c) d[(i64)gi * c + gj] = D[ty][tx];
        return;
    }
    // row tile (kb, b) or column tile (b, kb)
    const int gi = col ? b * FW_B + ty : k0 + ty;
    const int gj = col ? k0 + tx : b * FW_B + tx;
    S[ty][tx] = (gi < c && gj < c) ? d[(i64)gi * c + gj] : CU_INF;
    __syncthreads();
    for (int k = 0; k < FW_B; ++k) {
        const i64 v = col ? min_plus(S[ty][tx], S[ty][k], D[k][tx]) : min_plus(S[ty][tx], D[ty][k], S[k][tx]);
        __syncthreads();
        S[ty][tx] = v;
        __syncthreads();
    }
    if (gi < c && gj < c) d[(i64)gi * c + gj] = S[ty][tx];
}

__global__ void __launch_bounds__(FW_B* FW_B) cuch_fw_rest(int c, int kb, i64* __restrict__ d) {
    __shared__ i64 R[FW_B][FW_B];
    __shared__ i64 Cc[FW_B][FW_B];
    const int bi = blockIdx.y, bj = blockIdx.x;
    if (bi == kb || bj == kb) return;
    const int ty = threadIdx.y, tx = threadIdx.x;
    const int k0 = kb * FW_B;
    const int gi = bi * FW_B + ty, gj = bj * FW_B + tx;
    R[ty][tx] = (gi < c && k0 + tx < c) ? d[(i64)gi * c + k0 + tx] : CU_INF;
    Cc[ty][tx] = (k0 + ty < c && gj < c) ? d[(i64)(k0 + ty) * c + gj] : CU_INF;
    __syncthreads();
    if (gi >= c || gj >= c) return;
    i64 v = d[(i64)gi * c + gj];
#pragma unroll 8
    for (int k = 0; k < FW_B; ++k) v = min_plus(v, R[ty][k], Cc[k][tx]);
    d[(i64)gi * c + gj] = v;
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

// Hierarchy arcs of the core: core node a (block a < c) has up arcs to the b > a with a finite d(a, b);
// core node b (block c + b) has down arcs from the a > b with a finite d(a, b) (core ranks follow ids).
// cuch_core_counts counts them (hu_cnt / hd_cnt by node id); cuch_core_fill writes them, in order, at
// the node's offset (ufo / dfo).
__global__ void __launch_bounds__(CU_BLOCK) cuch_core_counts(int c, const int* __restrict__ core,
                                                             const i64* __restrict__ d, int* __restrict__ hu_cnt,
                                                             int* __restrict__ hd_cnt) {
    int r = blockIdx.x;
    const bool col = r >= c;
    if (col) r -= c;
    i64 cnt = 0;
    for (int j = r + 1 + threadIdx.x; j < c; j += CU_BLOCK)
        cnt += (col ? d[(i64)j * c + r] : d[(i64)r * c + j]) != CU_INF;
    cnt = block_sum(cnt);
    if (threadIdx.x == 0) (col ? hd_cnt : hu_cnt)[core[r]] = (int)cnt;
}

__global__ void __launch_bounds__(CU_BLOCK) cuch_core_fill(
        int c, const int* __restrict__ core, const i64* __restrict__ d, const int* __restrict__ omid,
        const int* __restrict__ oarc, const int* __restrict__ ufo, const int* __restrict__ dfo,
        int* __restrict__ up_head, i64* __restrict__ up_w, int* __restrict__ up_mid, int* __restrict__ up_arc,
        int* __restrict__ dn_tail, i64* __restrict__ dn_w, int* __restrict__ dn_mid, int* __restrict__ dn_arc) {
    int r = blockIdx.x;
    const bool col = r >= c;
    if (col) r -= c;
    i64 at = col ? dfo[core[r]] : ufo[core[r]];
    for (int j0 = r + 1; j0 < c; j0 += CU_BLOCK) {
        const int j = j0 + threadIdx.x;
        i64 idx = 0, x = CU_INF;
        if (j < c) {
            idx = col ? (i64)j * c + r : (i64)r * c + j;
            x = d[idx];
        }
        i64 f[1] = {x != CU_INF}, tot[1];
        block_scan<1>(f, tot);
        if (x != CU_INF) {
            const i64 p = at + f[0];
            if (col) {
                dn_tail[p] = core[j];
                dn_w[p] = x;
                dn_mid[p] = omid[idx];
                dn_arc[p] = oarc[idx];
            } else {
                up_head[p] = core[j];
                up_w[p] = x;
                up_mid[p] = omid[idx];
                up_arc[p] = oarc[idx];
            }
        }
        at += tot[0];
    }
}

// ------------------------------------------------------------------------------------ the hierarchy CSRs
// up_first_out / down_first_out: exclusive scans of hu_cnt / hd_cnt over the n nodes (int32).
__global__ void __launch_bounds__(CU_BLOCK) cuch_fo_reduce(i64 n, const int* __restrict__ hu_cnt,
                                                           const int* __restrict__ hd_cnt, i64* __restrict__ bsum) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[2] = {0, 0}, tot[2];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 x = base + i;
        if (x >= n) break;
        acc[0] += hu_cnt[x];
        acc[1] += hd_cnt[x];
    }
    block_scan<2>(acc, tot);
    if (threadIdx.x == 0) {
        bsum[blockIdx.x * 4] = tot[0];
        bsum[blockIdx.x * 4 + 1] = tot[1];
        bsum[blockIdx.x * 4 + 2] = bsum[blockIdx.x * 4 + 3] = 0;
    }
}

__global__ void __launch_bounds__(CU_BLOCK) cuch_fo_scatter(i64 n, const int* __restrict__ hu_cnt,
                                                            const int* __restrict__ hd_cnt, const i64* __restrict__ bsum,
                                                            i64* __restrict__ totals, int* __restrict__ ufo,
                                                            int* __restrict__ dfo) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    i64 acc[2] = {0, 0}, tot[2];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 x = base + i;
        if (x >= n) break;
        acc[0] += hu_cnt[x];
        acc[1] += hd_cnt[x];
    }
    block_scan<2>(acc, tot);
    i64 pre[2];
    block_prefix<2>(bsum, pre);
    acc[0] += pre[0];
    acc[1] += pre[1];
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        const i64 x = base + i;
        if (x >= n) break;
        ufo[x] = (int)acc[0];
        dfo[x] = (int)acc[1];
        acc[0] += hu_cnt[x];
        acc[1] += hd_cnt[x];
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
        totals[0] = pre[0] + tot[0];
        totals[1] = pre[1] + tot[1];
        ufo[n] = (int)totals[0];
        dfo[n] = (int)totals[1];
    }
}

// The contracted nodes' hierarchy arcs, from the buffers (in contraction order) to their places in the
// CSRs: buffer arc i of owner v goes to first_out[v] + (i - start[v]). Threads [0, nu) up, then down.
__global__ void cuch_hgather(i64 nu, i64 nd, const int* __restrict__ uo, const int* __restrict__ uh,
                             const i64* __restrict__ uw, const int* __restrict__ um, const int* __restrict__ ua,
                             const int* __restrict__ dob, const int* __restrict__ dt, const i64* __restrict__ dw,
                             const int* __restrict__ dm, const int* __restrict__ da, const i64* __restrict__ hu_start,
                             const i64* __restrict__ hd_start, const int* __restrict__ ufo,
                             const int* __restrict__ dfo, int* __restrict__ up_head, i64* __restrict__ up_w,
                             int* __restrict__ up_mid, int* __restrict__ up_arc, int* __restrict__ dn_tail,
                             i64* __restrict__ dn_w, int* __restrict__ dn_mid, int* __restrict__ dn_arc) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < nu) {
        const int v = uo[t];
        const i64 p = ufo[v] + (t - hu_start[v]);
        up_head[p] = uh[t];
        up_w[p] = uw[t];
        up_mid[p] = um[t];
        up_arc[p] = ua[t];
    } else if (t < nu + nd) {
        const i64 i = t - nu;
        const int v = dob[i];
        const i64 p = dfo[v] + (i - hd_start[v]);
        dn_tail[p] = dt[i];
        dn_w[p] = dw[i];
        dn_mid[p] = dm[i];
        dn_arc[p] = da[i];
    }
}

}  // extern "C"

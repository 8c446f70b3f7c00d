// Accessibility on the GPU: fold a block of bounded one-to-all distances into per-node accumulators.
//
// D is a (k, n) block of 32-bit distances, source-major, in the caller's node ids: D[j * n + v] is the
// distance of node v from the j-th point node of the block over the *reverse* graph, i.e. d(v -> point j)
// (PHAST trees of the reverse hierarchy, gpuroute.ch.phast_gpu, gathered back to node ids). A thread
// per node v walks the block's k rows in order (row j at column v: the threads of a warp read 32
// consecutive words), so every node folds the points in ascending order, exactly as the CPU twin's
// single-chunk fold (gpuroute/accessibility/cpu.py) does with the same double-precision operations
// (explicit _rn intrinsics: no fused multiply-add that the CPU would not do).
#include "gpuroute_common.cuh"

enum { M_SUM = 0, M_MEAN = 1, M_STD = 2, M_COUNT = 3, M_MIN = 4, M_MAX = 5 };
enum { D_FLAT = 0, D_LINEAR = 1, D_EXP = 2 };

__device__ __forceinline__ double acc_decay(int decay, double x, double radius) {
    if (decay == D_FLAT) return 1.0;
    if (decay == D_LINEAR) return __dsub_rn(1.0, __ddiv_rn(x, radius));
    return exp(-__ddiv_rn(x, radius));
}

extern "C" {

// Aggregate: node v's accumulator (a0[v], a1[v], cn[v]) folds every point j of the block with
// D[j * n + v] <= bound (bound < DINF, so unreached nodes never count); cn counts the values in range. Per point: count, sum, mean,
// M2 (sum of squared deviations), min and max of the values placed at it.
__global__ void acc_block(int n, int k, const unsigned int* __restrict__ D, unsigned int bound, double radius,
                          int decay, int mode, const long long* __restrict__ cnt, const double* __restrict__ s1,
                          const double* __restrict__ mean, const double* __restrict__ m2,
                          const double* __restrict__ mn, const double* __restrict__ mx, double* a0, double* a1,
                          long long* cn) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    double x0 = a0[v], x1 = a1[v];
    long long c = cn[v];
    for (int j = 0; j < k; ++j) {
        const unsigned int x = D[(unsigned long long)j * n + v];
        if (x > bound) continue;
        if (mode == M_SUM || mode == M_MEAN) {
            x0 = __dadd_rn(x0, __dmul_rn(acc_decay(decay, (double)x, radius), s1[j]));
            c += cnt[j];
        } else if (mode == M_COUNT) {
            c += cnt[j];
        } else if (mode == M_STD) {  // Chan, Golub, LeVeque (1979), eq. 2.1: merge (c, x0, x1) with the point's
            const long long nb = cnt[j];
            const long long nn = c + nb;
            const double delta = __dsub_rn(mean[j], x0);
            x0 = __dadd_rn(x0, __dmul_rn(delta, __ddiv_rn((double)nb, (double)nn)));
            x1 = __dadd_rn(__dadd_rn(x1, m2[j]),
                           __dmul_rn(__dmul_rn(delta, delta), __ddiv_rn(__dmul_rn((double)c, (double)nb), (double)nn)));
            c = nn;
        } else if (mode == M_MIN) {
            if (mn[j] < x0) x0 = mn[j];
            c += cnt[j];
        } else {
            if (mx[j] > x0) x0 = mx[j];
            c += cnt[j];
        }
    }
    a0[v] = x0;
    a1[v] = x1;
    cn[v] = c;
}

// Nearest points of interest: node v keeps its k smallest (distance, poi id) pairs in lexicographic order,
// column-major (bd[q * n + v], bi[q * n + v]; empty: DINF and the largest int64). The block's point j holds
// the POIs poi_ids[first[j] .. first[j + 1]) (ascending ids, all at distance D[j * n + v]).
__global__ void near_block(int n, int k, int kk, const unsigned int* __restrict__ D, unsigned int bound,
                           const long long* __restrict__ first, const long long* __restrict__ poi_ids,
                           unsigned int* bd, long long* bi) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const unsigned long long last = (unsigned long long)(kk - 1) * n + v;
    unsigned int kd = bd[last];
    long long ki = bi[last];
    for (int j = 0; j < k; ++j) {
        const unsigned int x = D[(unsigned long long)j * n + v];
        if (x > bound || x > kd) continue;
        for (long long q = first[j]; q < first[j + 1]; ++q) {
            const long long id = poi_ids[q];
            if (x > kd || (x == kd && id >= ki)) break;  // ids ascend: no later POI of this node fits
            int i = kk - 1;
            while (i > 0) {
                const unsigned long long p = (unsigned long long)(i - 1) * n + v;
                const unsigned int pd = bd[p];
                const long long pi = bi[p];
                if (pd < x || (pd == x && pi < id)) break;
                bd[p + n] = pd;
                bi[p + n] = pi;
                --i;
            }
            bd[(unsigned long long)i * n + v] = x;
            bi[(unsigned long long)i * n + v] = id;
            kd = bd[last];
            ki = bi[last];
        }
    }
}

// ---------------------------------------------------------------------------------------------- ball search
// Bounded searches without a hierarchy: a block per source at a time (persistent blocks take the chunk's
// sources by an atomic counter), label-correcting rounds over a frontier restricted to distance <= bound,
// on the graph given (the reverse graph: distances d(v -> source)). Each block owns n-word arrays: dist
// (DINF between sources: reset from its visit list), stamp (the round a node was last queued, rounds
// numbered on across sources and launches -- rounds[block] keeps the count -- so that it is never reset),
// two frontiers and the visit list. A relaxation
// lowers dist with atomicMin; the thread that sees DINF as the old value appends the node to the visit
// list (once), and a node enters the next frontier once per round. Pruning at the bound is exact: a
// path's prefix is never longer than the path. When the source is done its ball is appended to the
// chunk's output (v, d, source index) at an offset taken by one atomicAdd; past cap it sets *over and
// writes nothing (the host runs the chunk again, smaller). Same idea as ph_up_search in ch/phast.cu.
__global__ void __launch_bounds__(1024)
ball_search(int n, int m, const long long* __restrict__ src, int j0, const int* __restrict__ fo,
            const int* __restrict__ tl, const int* __restrict__ w, unsigned int bound, unsigned int* dist_all,
            int* stamp_all, int* queue_all, int* vis_all, int* rounds, int* next, unsigned long long* total,
            unsigned long long cap, int* out_v, unsigned int* out_d, int* out_j, int* over) {
    __shared__ int s_idx, n_cur, n_next, n_vis;
    __shared__ unsigned long long base;
    const unsigned long long off = (unsigned long long)blockIdx.x * n;
    unsigned int* dist = dist_all + off;
    int* stamp = stamp_all + off;
    int* vis = vis_all + off;
    int* q0 = queue_all + 2 * off;
    int* q1 = q0 + n;
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    int round = rounds[blockIdx.x] + 1;  // this block's stamps hold earlier launches' rounds: go on from there
    for (;;) {
        if (threadIdx.x == 0) s_idx = atomicAdd(next, 1);
        __syncthreads();
        const int si = s_idx;
        if (si >= m) {  // every thread read s_idx before anyone can change it again
            if (threadIdx.x == 0) rounds[blockIdx.x] = round;
            return;
        }
        int* cur = q0;
        int* nxt = q1;
        if (threadIdx.x == 0) {
            const int s = (int)src[si];
            dist[s] = 0u;
            cur[0] = s;
            vis[0] = s;
            n_cur = 1;
            n_vis = 1;
        }
        __syncthreads();
        while (n_cur > 0) {
            if (threadIdx.x == 0) n_next = 0;
            __syncthreads();
            const int cnt = n_cur;
            for (int i = threadIdx.x >> 5; i < cnt; i += warps) {  // a warp per frontier node, lanes over arcs
                const int u = cur[i];
                const unsigned int du = __ldcg(dist + u);
                const int a1 = fo[u + 1];
                for (int a = fo[u] + lane; a < a1; a += 32) {
                    const unsigned long long sum = (unsigned long long)du + (unsigned int)w[a];
                    if (sum > bound) continue;
                    const int v = tl[a];
                    const unsigned int sv = (unsigned int)sum;
                    if (sv >= __ldcg(dist + v)) continue;
                    const unsigned int old = atomicMin(dist + v, sv);
                    if (sv < old) {
                        if (old == DINF) vis[atomicAdd(&n_vis, 1)] = v;
                        if (atomicExch(stamp + v, round) != round) nxt[atomicAdd(&n_next, 1)] = v;
                    }
                }
            }
            __syncthreads();
            if (threadIdx.x == 0) n_cur = n_next;
            int* t = cur; cur = nxt; nxt = t;
            ++round;
            __syncthreads();
        }
        const int r = n_vis;
        if (threadIdx.x == 0) {
            base = atomicAdd(total, (unsigned long long)r);
            if (base + r > cap) *over = 1;
        }
        __syncthreads();
        const bool fits = base + r <= cap;
        for (int i = threadIdx.x; i < r; i += blockDim.x) {
            const int v = vis[i];
            if (fits) {
                out_v[base + i] = v;
                out_d[base + i] = __ldcg(dist + v);
                out_j[base + i] = j0 + si;
            }
            dist[v] = DINF;
        }
        __syncthreads();
    }
}

// Aggregate from balls sorted by (node, point): node v folds the entries seg[v] .. seg[v + 1] in order
// (ascending point index, as the CPU twin's single chunk does), with acc_block's operations.
__global__ void acc_sorted(int n, const long long* __restrict__ seg, const int* __restrict__ js,
                           const unsigned int* __restrict__ ds, double radius, int decay, int mode,
                           const long long* __restrict__ cnt, const double* __restrict__ s1,
                           const double* __restrict__ mean, const double* __restrict__ m2,
                           const double* __restrict__ mn, const double* __restrict__ mx, double* a0, double* a1,
                           long long* cn) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    double x0 = a0[v], x1 = a1[v];
    long long c = cn[v];
    for (long long e = seg[v]; e < seg[v + 1]; ++e) {
        const int j = js[e];
        const double x = (double)ds[e];
        if (mode == M_SUM || mode == M_MEAN) {
            x0 = __dadd_rn(x0, __dmul_rn(acc_decay(decay, x, radius), s1[j]));
            c += cnt[j];
        } else if (mode == M_COUNT) {
            c += cnt[j];
        } else if (mode == M_STD) {
            const long long nb = cnt[j];
            const long long nn = c + nb;
            const double delta = __dsub_rn(mean[j], x0);
            x0 = __dadd_rn(x0, __dmul_rn(delta, __ddiv_rn((double)nb, (double)nn)));
            x1 = __dadd_rn(__dadd_rn(x1, m2[j]),
                           __dmul_rn(__dmul_rn(delta, delta), __ddiv_rn(__dmul_rn((double)c, (double)nb), (double)nn)));
            c = nn;
        } else if (mode == M_MIN) {
            if (mn[j] < x0) x0 = mn[j];
            c += cnt[j];
        } else {
            if (mx[j] > x0) x0 = mx[j];
            c += cnt[j];
        }
    }
    a0[v] = x0;
    a1[v] = x1;
    cn[v] = c;
}

// Nearest POIs from sorted balls: near_block's insertion over node v's entries.
__global__ void near_sorted(int n, int kk, const long long* __restrict__ seg, const int* __restrict__ js,
                            const unsigned int* __restrict__ ds, const long long* __restrict__ first,
                            const long long* __restrict__ poi_ids, unsigned int* bd, long long* bi) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const unsigned long long last = (unsigned long long)(kk - 1) * n + v;
    unsigned int kd = bd[last];
    long long ki = bi[last];
    for (long long e = seg[v]; e < seg[v + 1]; ++e) {
        const unsigned int x = ds[e];
        if (x > kd) continue;
        const int j = js[e];
        for (long long q = first[j]; q < first[j + 1]; ++q) {
            const long long id = poi_ids[q];
            if (x > kd || (x == kd && id >= ki)) break;
            int i = kk - 1;
            while (i > 0) {
                const unsigned long long p = (unsigned long long)(i - 1) * n + v;
                const unsigned int pd = bd[p];
                const long long pi = bi[p];
                if (pd < x || (pd == x && pi < id)) break;
                bd[p + n] = pd;
                bi[p + n] = pi;
                --i;
            }
            bd[(unsigned long long)i * n + v] = x;
            bi[(unsigned long long)i * n + v] = id;
            kd = bd[last];
            ki = bi[last];
        }
    }
}

}  // extern "C"

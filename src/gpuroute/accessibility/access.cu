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

}  // extern "C"

// Hub-label queries on the GPU (Abraham, Delling, Goldberg, Werneck, "A Hub-Based Labeling Algorithm for
// Shortest Paths on Road Networks", SEA 2011): dist(s, t) = min over the hubs h of both labels of
// d_f(s, h) + d_b(t, h). The labels are built on the CPU from the hierarchy (gpuroute.ch.query.HubLabels)
// and uploaded as they are: node (n + 1, 4) int64 (a label id's forward start, backward start, ...),
// hub int32 (label ids, ascending in each label), dist int32 or int64.
//
// One warp a query. The lanes take the forward label of s 32 entries at a time (coalesced) and look each
// hub up in the backward label of t by binary search; a lane's hubs increase, so its search starts where
// the last one ended. A warp minimum gives the distance. The numba twin is query._meet, merging the two
// labels sequentially; both give the smallest sum over the common hubs, so the results are equal.
#include "gpuroute_common.cuh"

#define HL_INF 0x7FFFFFFFFFFFFFFFLL

template <typename D>
__device__ __forceinline__ long long hl_meet(const long long* __restrict__ node, const int* __restrict__ hub,
                                             const D* __restrict__ dist, int s, int t, int lane) {
    const long long a1 = node[4LL * s + 4];
    const long long b0 = node[4LL * t + 1], b1 = node[4LL * t + 5];
    long long best = HL_INF;
    long long lo = b0;
    for (long long i = node[4LL * s] + lane; i < a1 && lo < b1; i += 32) {
        const int x = hub[i];
        long long hi = b1;
        while (lo < hi) {  // lower bound of x in hub[lo, b1)
            const long long m = (lo + hi) >> 1;
            if (hub[m] < x) lo = m + 1; else hi = m;
        }
        if (lo < b1 && hub[lo] == x) {
            const long long sum = (long long)dist[i] + (long long)dist[lo];
            if (sum < best) best = sum;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const long long other = __shfl_down_sync(0xFFFFFFFFu, best, o);
        if (other < best) best = other;
    }
    return best;
}

// Paired distances: out[q] = dist(s[q], t[q]) (label ids), HL_INF where no hub is common, 0 where s == t.
template <typename D>
__device__ __forceinline__ void hl_pairs_body(long long m, const long long* __restrict__ node,
                                              const int* __restrict__ hub, const D* __restrict__ dist,
                                              const int* __restrict__ s, const int* __restrict__ t,
                                              long long* __restrict__ out) {
    const long long q = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (q >= m) return;  // whole warps leave together
    const int lane = threadIdx.x & 31;
    const int u = s[q], v = t[q];
    const long long best = (u == v) ? 0LL : hl_meet(node, hub, dist, u, v, lane);
    if (lane == 0) out[q] = best;
}

// A table: out[i * nt + j] = dist(s[i], t[j]) for ns sources and nt targets (label ids); consecutive
// warps share a source, so its forward label stays in L1.
template <typename D>
__device__ __forceinline__ void hl_table_body(int ns, int nt, const long long* __restrict__ node,
                                              const int* __restrict__ hub, const D* __restrict__ dist,
                                              const int* __restrict__ s, const int* __restrict__ t,
                                              long long* __restrict__ out) {
    const long long q = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (q >= (long long)ns * nt) return;
    const int lane = threadIdx.x & 31;
    const int i = (int)(q / nt);
    const int j = (int)(q - (long long)i * nt);
    const int u = s[i], v = t[j];
    const long long best = (u == v) ? 0LL : hl_meet(node, hub, dist, u, v, lane);
    if (lane == 0) out[q] = best;
}

extern "C" {

__global__ void hl_pairs32(long long m, const long long* __restrict__ node, const int* __restrict__ hub,
                           const int* __restrict__ dist, const int* __restrict__ s, const int* __restrict__ t,
                           long long* __restrict__ out) {
    hl_pairs_body<int>(m, node, hub, dist, s, t, out);
}

__global__ void hl_pairs64(long long m, const long long* __restrict__ node, const int* __restrict__ hub,
                           const long long* __restrict__ dist, const int* __restrict__ s,
                           const int* __restrict__ t, long long* __restrict__ out) {
    hl_pairs_body<long long>(m, node, hub, dist, s, t, out);
}

__global__ void hl_table32(int ns, int nt, const long long* __restrict__ node, const int* __restrict__ hub,
                           const int* __restrict__ dist, const int* __restrict__ s, const int* __restrict__ t,
                           long long* __restrict__ out) {
    hl_table_body<int>(ns, nt, node, hub, dist, s, t, out);
}

__global__ void hl_table64(int ns, int nt, const long long* __restrict__ node, const int* __restrict__ hub,
                           const long long* __restrict__ dist, const int* __restrict__ s,
                           const int* __restrict__ t, long long* __restrict__ out) {
    hl_table_body<long long>(ns, nt, node, hub, dist, s, t, out);
}

}  // extern "C"

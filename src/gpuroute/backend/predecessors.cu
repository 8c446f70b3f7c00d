// Canonical predecessors on the GPU (the CPU engine's rule, gpuroute.sssp.dijkstra): pred[v] is the
// smallest tail u of a tight in-arc, dist[u] + w(u, v) == dist[v]; -1 for sources (distance 0) and
// unreachable nodes. Batched over k * n items (item x = s * n + v), 32-bit device distances.
#include "gpuroute_common.cuh"

extern "C" {

__global__ void canonical_pred(unsigned long long total, int n, const int* __restrict__ rfo,
                               const int* __restrict__ rtl, const int* __restrict__ rw,
                               const unsigned int* __restrict__ dist, int* pred) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= total) return;
    unsigned long long s = x / (unsigned long long)n;
    unsigned long long base = s * n;
    int v = (int)(x - base);
    unsigned int dv = dist[x];
    int best = -1;
    if (dv != DINF && dv != 0u) {
        for (int j = rfo[v]; j < rfo[v + 1]; ++j) {
            int u = rtl[j];
            unsigned int du = dist[base + u];
            if (du != DINF && (unsigned long long)du + (unsigned int)rw[j] == dv && (best < 0 || u < best)) best = u;
        }
    }
    pred[x] = best;
}

// 32-bit device distances to int64 with the host sentinel INF (2^63 - 1) for DINF.
__global__ void widen_dist(unsigned long long total, const unsigned int* __restrict__ d32, long long* d64) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= total) return;
    unsigned int d = d32[x];
    d64[x] = d == DINF ? 0x7FFFFFFFFFFFFFFFll : (long long)d;
}

// dist = DINF except one source per slot (see init_dist_item).
__global__ void init_dist(unsigned long long total, unsigned int* dist, const int* sources, int n) {
    init_dist_item(total, dist, sources, n);
}

}  // extern "C"

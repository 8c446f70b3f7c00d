// Martin et al. and Crauser et al. (Ortega-Arranz, Torres, Llanos, Gonzalez-Escribano, "A New GPU-based
// Approach to the Shortest Path Problem" , sec. IV): each phase relaxes from the frontier F,
// reduces the minimum over the unsettled set U by the rule, and settles every node within the bound.
// The rules (the CPU twin in cpu.py uses the same numbers, gpuroute.sssp.settle.RULES):
//   RULE_MARTIN   settle delta == min dist over U                              (sec. IV-D, eq. 3)
//   RULE_GENERAL  bound = min over U of dist + min out-arc weight (Crauser)     (sec. IV-A/B, eq. 1)
//   RULE_ECONOMIC bound = min dist over U + min arc weight (Crauser economic)  (sec. IV-C, eq. 2)
#include "gpuroute_common.cuh"

enum { RULE_MARTIN = 0, RULE_GENERAL = 1, RULE_ECONOMIC = 2 };

extern "C" {

// Martin et al. / Crauser et al. (Ortega-Arranz et al., sec. IV). U: unsettled, F: frontier. kind: RULE_MARTIN (settle
// delta == min), RULE_GENERAL (min of dist + min out weight), RULE_ECONOMIC (min + gmin).
// red[par] collects this phase's minimum.
__global__ void dk_relax_succ(int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                              const unsigned char* U, const unsigned char* F, unsigned int* dist,
                              unsigned int* red, int* flags, int par) {
    if (flags[F_DONE]) return;
    if (lead()) { red[par] = DINF; flags[F_PHASES] += 1; }
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !F[v]) return;
    unsigned int dv = dist[v];
    for (int a = fo[v]; a < fo[v + 1]; ++a) {
        int u = hd[a];
        if (U[u]) atomicMin(&dist[u], sat_add(dv, w[a], flags));
    }
}

__global__ void dk_relax_pred(int n, const int* __restrict__ rfo, const int* __restrict__ rtl, const int* __restrict__ rw,
                              const unsigned char* U, const unsigned char* F, unsigned int* dist,
                              unsigned int* red, int* flags, int par) {
    if (flags[F_DONE]) return;
    if (lead()) { red[par] = DINF; flags[F_PHASES] += 1; }
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !U[v]) return;
    unsigned int best = dist[v];
    for (int j = rfo[v]; j < rfo[v + 1]; ++j) {
        int u = rtl[j];
        if (F[u]) { unsigned int nd = sat_add(dist[u], rw[j], flags); if (nd < best) best = nd; }
    }
    dist[v] = best;
}

__global__ void dk_min(int n, const unsigned char* U, const unsigned int* dist, const unsigned int* minw,
                       unsigned int* red, int* flags, int par, int kind) {
    if (flags[F_DONE]) return;
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int val = DINF;
    if (v < n && U[v] && dist[v] != DINF) {
        if (kind == RULE_GENERAL) {
            unsigned long long s = (unsigned long long)dist[v] + minw[v];
            val = s >= DINF ? DINF : (unsigned int)s;
        } else {
            val = dist[v];
        }
    }
    for (int o = 16; o > 0; o >>= 1) val = min(val, __shfl_down_sync(0xFFFFFFFFu, val, o));
    __shared__ unsigned int sm[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sm[wid] = val;
    __syncthreads();
    if (wid == 0) {
        val = lane < (blockDim.x + 31) / 32 ? sm[lane] : DINF;
        for (int o = 16; o > 0; o >>= 1) val = min(val, __shfl_down_sync(0xFFFFFFFFu, val, o));
        if (lane == 0 && val != DINF) atomicMin(&red[par], val);
    }
}

__global__ void dk_update(int n, unsigned char* U, unsigned char* F, const unsigned int* dist,
                          const unsigned int* red, int* flags, unsigned int* stats, int stats_cap,
                          int par, int kind, unsigned int gmin) {
    if (flags[F_DONE]) return;
    unsigned int m = red[par];
    if (m == DINF) { if (lead()) flags[F_DONE] = 1; return; }
    unsigned long long lim = m;
    if (kind == RULE_ECONOMIC) lim += gmin;
    int ph = flags[F_PHASES] - 1;  // counted by this phase's relax kernel
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    bool settle = false;
    if (v < n) {
        F[v] = 0;
        unsigned int d = dist[v];
        if (U[v] && d != DINF && (kind == RULE_MARTIN ? d == m : (unsigned long long)d <= lim)) {
            U[v] = 0; F[v] = 1; settle = true;
        }
    }
    if (ph < stats_cap) {
        unsigned int b = __ballot_sync(0xFFFFFFFFu, settle);
        if ((threadIdx.x & 31) == 0 && b) atomicAdd(&stats[ph], (unsigned int)__popc(b));
    }
}

// Minimum outgoing arc weight of every node (Crauser's Delta_node), INF if none.
__global__ void min_out_weight(int n, const int* fo, const int* w, unsigned int* minw) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned int m = DINF;
    for (int a = fo[v]; a < fo[v + 1]; ++a) m = min(m, (unsigned int)w[a]);
    minw[v] = m;
}

}  // extern "C"

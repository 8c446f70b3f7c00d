// Selection and adaptive thread creation, the paper's two-kernel phases ("Accelerating SSSP Algorithm
// on GPU with Adaptive Thread Creation", Alg. 4 SELECT/UPDATE with SWITCH_KERNEL, Alg. 5
// SELECT_RELAX_KERNEL, Alg. 6 SELECT_UPDATE_KERNEL). The fused one-kernel-per-phase versions are in
// fused.cu; launchers in gpu.py. Distances are 32-bit (gpuroute_common.cuh).
#include "gpuroute_common.cuh"

extern "C" {

// Selection (Adaptive Thread Creation paper, Alg. 5 SELECT_RELAX_KERNEL and Alg. 6 SELECT_UPDATE_KERNEL). Queues q[par]
// (read) and q[par^1] (write); sched[] makes "if n is not scheduled then add n to NWa".
__global__ void sel_relax(int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                          unsigned char* ma, const unsigned int* ca, unsigned int* ua,
                          unsigned int* q0, unsigned int* q1, unsigned int* cnt, unsigned int* sched,
                          int* flags, unsigned int* stats, int stats_cap, int par) {
    if (flags[F_DONE]) return;
    if (flags[F_MODE] != 0) return;  // adaptive-by-count: an all-node phase this time
    int p = par;
    unsigned int c = cnt[p];
    if (c == 0) { if (lead()) flags[F_DONE] = 1; return; }
    if (lead()) { int ph = flags[F_PHASES]++; if (ph < stats_cap) stats[ph] = c; }
    const unsigned int* qr = p ? q1 : q0;
    unsigned int* qw = p ? q0 : q1;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i - threadIdx.x < c; i += gridDim.x * blockDim.x) {
        bool active = i < c;
        int v = active ? (int)qr[i] : 0;
        if (active && ma[v]) {
            ma[v] = 0;
            unsigned int dv = ca[v];
            for (int a = fo[v]; a < fo[v + 1]; ++a) {
                int u = hd[a];
                unsigned int nd = sat_add(dv, w[a], flags);
                unsigned int old = atomicMin(&ua[u], nd);
                warp_push(nd < old && atomicExch(&sched[u], 1u) == 0u, (unsigned int)u, qw, &cnt[p ^ 1]);
            }
        }
    }
}

__global__ void sel_update(int n, unsigned char* ma, unsigned int* ca, const unsigned int* ua,
                           unsigned int* q0, unsigned int* q1, unsigned int* cnt, unsigned int* sched,
                           int* flags, int par, float frac_all) {
    if (flags[F_DONE]) return;
    int p = par;
    unsigned int c2 = cnt[p ^ 1];
    const unsigned int* qw = p ? q0 : q1;
    if (lead()) {
        cnt[p] = 0;
        // adaptive-by-count: choose the next phase's thread mapping from the frontier size
        if (frac_all > 0.f) flags[F_MODE] = (c2 > (unsigned int)(frac_all * n)) ? 1 : 0;
    }
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < c2; i += gridDim.x * blockDim.x) {
        int u = (int)qw[i];
        sched[u] = 0u;
        unsigned int nu = ua[u];
        if (nu < ca[u]) { ca[u] = nu; ma[u] = 1; }
    }
}

// All-node relax for the adaptive-by-count loop (the conventional mapping: one thread per node, test
// Ma), pushing improved heads to the same queue so that the update stays queue-driven.
__global__ void ad_relax_all(int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                             unsigned char* ma, const unsigned int* ca, unsigned int* ua,
                             unsigned int* q0, unsigned int* q1, unsigned int* cnt, unsigned int* sched,
                             int* flags, unsigned int* stats, int stats_cap, int par) {
    if (flags[F_DONE] || flags[F_MODE] != 1) return;
    unsigned int c = cnt[par];
    if (c == 0) { if (lead()) flags[F_DONE] = 1; return; }
    if (lead()) { int ph = flags[F_PHASES]++; if (ph < stats_cap) stats[ph] = c; }
    unsigned int* qw = par ? q0 : q1;
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !ma[v]) return;
    ma[v] = 0;
    unsigned int dv = ca[v];
    for (int a = fo[v]; a < fo[v + 1]; ++a) {
        int u = hd[a];
        unsigned int nd = sat_add(dv, w[a], flags);
        unsigned int old = atomicMin(&ua[u], nd);
        warp_push(nd < old && atomicExch(&sched[u], 1u) == 0u, (unsigned int)u, qw, &cnt[par ^ 1]);
    }
}

// SWITCH_KERNEL of Adaptive Thread Creation paper, Alg. 4 (line 29): build the read queue NRa from the mask Ma.
__global__ void switch_build_queue(int n, const unsigned char* ma, unsigned int* q, unsigned int* cnt) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    bool on = v < n && ma[v];
    warp_push(on, (unsigned int)v, q, cnt);
}

}  // extern "C"

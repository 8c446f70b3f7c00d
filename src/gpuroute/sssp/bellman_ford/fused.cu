// Fused Bellman-Ford phases (Harish & Narayanan's method as "Accelerating SSSP Algorithm on GPU
// with Adaptive Thread Creation", run it in Alg. 1-3, with UPDATE of phase p fused into RELAX of phase p + 1),
// and adaptive thread creation (Adaptive Thread Creation paper, Alg. 4) with the switch on the device. One kernel per phase,
// CUDA-graph replays, device-side termination. Launchers in gpu.py; the paper's own two-kernel loop is
// conventional.cu, its selection kernels selection.cu.
#include "gpuroute_common.cuh"

extern "C" {

// Fused conventional step: Harish & Narayanan's UPDATE_KERNEL of phase p and RELAX_KERNEL of phase
// p + 1 in ONE kernel, one thread per 4 consecutive nodes (16-byte loads of Ca and Ua). A node with
// Ua < Ca takes the new distance and relaxes its out-arcs into Ua with atomicMin whose result is unused
// (fire-and-forget reductions, no round trip). Relaxations that land while the kernel runs are seen
// either now or in the next phase, so the fixed point is the exact distance. changed[] rotates mod 3:
// phase p reads changed[(p+2)%3] (phase p-1's), sets changed[p%3], zeroes changed[(p+1)%3].
// pc[par] is this phase's index (for stats); the lead thread writes the next one into pc[par^1].
__global__ void fc_step(int nq, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                        unsigned int* ca, unsigned int* ua, unsigned int* changed, int* flags, unsigned int* pc,
                        unsigned int* stats, int stats_cap, int par, int p3) {
    if (flags[F_DONE]) return;
    if (changed[(p3 + 2) % 3] == 0) { if (lead()) flags[F_DONE] = 1; return; }
    unsigned int ph = pc[par];
    if (lead()) { changed[(p3 + 1) % 3] = 0; pc[par ^ 1] = ph + 1; flags[F_PHASES] = (int)ph + 1; }
    __shared__ unsigned int block_act;
    if (threadIdx.x == 0) block_act = 0;
    __syncthreads();
    unsigned int act = 0;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < nq; q += gridDim.x * blockDim.x) {
        uint4 u4 = __ldcg(reinterpret_cast<const uint4*>(ua) + q);
        uint4 c4 = __ldcg(reinterpret_cast<const uint4*>(ca) + q);
        unsigned int uu[4] = {u4.x, u4.y, u4.z, u4.w};
        unsigned int cc[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (uu[j] < cc[j]) {
                int v = 4 * q + j;
                ca[v] = uu[j];
                ++act;
                int a1 = fo[v + 1];
                for (int a = fo[v]; a < a1; ++a) {
                    unsigned int nd = sat_add(uu[j], w[a], flags);
                    if (nd != DINF) atomicMin(&ua[hd[a]], nd);
                }
            }
        }
    }
    // One "changed" store and one stats reduction per block: a store per active thread to the same
    // word serialises at one L2 slice (ncu: ~13k cycles per NY phase before this change).
    act = __reduce_add_sync(0xFFFFFFFFu, act);
    if ((threadIdx.x & 31) == 0 && act) atomicAdd(&block_act, act);
    __syncthreads();
    if (threadIdx.x == 0 && block_act) {
        changed[p3] = 1u;
        if (ph < (unsigned int)stats_cap) atomicAdd(&stats[ph], block_act);
    }
}

// The same fused step with one thread per node: every active node's round-trip chain (load Ua/Ca,
// load offsets, load heads/weights, fire-and-forget atomicMin) runs in parallel with the others'
// instead of four after one another in a thread. Measured faster on NY (BENCHMARKS.md).
//
// chase > 0: after relaxing node v, a thread follows the first head it improved and relaxes that
// node at once, up to `chase` hops, instead of leaving it to the next phase (road networks are long
// chains, and a phase costs a launch plus several memory round trips). The followed node's Ca is
// lowered with atomicMin to the distance its arcs were relaxed with, so the invariant "Ua < Ca iff the
// node is pending" still holds and the fixed point is exact; a stale store only causes a redundant
// relaxation in the next phase.
__global__ void fc_step1(int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                         unsigned int* ca, unsigned int* ua, unsigned int* changed, int* flags, unsigned int* pc,
                         unsigned int* stats, int stats_cap, int par, int p3, int chase, unsigned long long* ts) {
    // The prologue's loads are issued together (not one round trip per early-exit test).
    const int done = flags[F_DONE];
    const unsigned int prev = changed[(p3 + 2) % 3];
    unsigned int ph = pc[par];
    if (done) return;
    if (prev == 0) { if (lead()) lead_finish(flags, ts, stats, stats_cap, ph); return; }
    if (lead()) lead_start(flags, ts, stats, stats_cap, ph, prev, changed, p3, pc, par);
    __shared__ unsigned int block_act;
    if (threadIdx.x == 0) block_act = 0;
    __syncthreads();
    unsigned int act = 0;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        unsigned int u = __ldcg(ua + v);
        unsigned int c = __ldcg(ca + v);
        if (u < c) {
            ++act;
            if (chase == 0) {
                ca[v] = u;
                int a0 = fo[v], a1 = fo[v + 1];
                for (int a = a0; a < a1; ++a) {
                    unsigned int nd = sat_add(u, w[a], flags);
                    if (nd != DINF) atomicMin(&ua[hd[a]], nd);
                }
            } else {
                atomicMin(&ca[v], u);
                int x = v;
                unsigned int dx = u;
                for (int hop = 0; hop <= chase; ++hop) {
                    int a0 = fo[x], a1 = fo[x + 1];
                    int nx = -1;
                    unsigned int ndx = 0;
                    for (int a = a0; a < a1; ++a) {
                        unsigned int nd = sat_add(dx, w[a], flags);
                        if (nd == DINF) continue;
                        int y = hd[a];
                        if (nx < 0 && hop < chase) {
                            if (nd < atomicMin(&ua[y], nd)) { nx = y; ndx = nd; }
                        } else {
                            atomicMin(&ua[y], nd);
                        }
                    }
                    if (nx < 0) break;
                    atomicMin(&ca[nx], ndx);
                    x = nx;
                    dx = ndx;
                }
            }
        }
    }
    // One atomicAdd per active block: changed[p3] counts the nodes this phase processed (nonzero: one
    // more phase) and the lead of the next phase copies it into stats[ph]. (A store per active thread
    // to one word serialises at one L2 slice: ncu ~13k cycles per NY phase. BENCHMARKS.md compares
    // this with the earlier flag store plus stats atomic per block.)
    act = __reduce_add_sync(0xFFFFFFFFu, act);
    if ((threadIdx.x & 31) == 0 && act) atomicAdd(&block_act, act);
    __syncthreads();
    if (threadIdx.x == 0 && block_act) atomicAdd(&changed[p3], block_act);
}

// ----------------------------------------------------------------------------------------------
// Adaptive thread creation (Adaptive Thread Creation paper, Alg. 4) on the fused conventional step, with device-side
// switching. A phase is one of three kinds:
//   all-node        one thread per node, fc_step1's loop (FA_SCAN);
//   all-node+build  one thread per node, and every head whose Ua a relaxation lowered is appended once
//                   to the queue of the next phase ("if n is not scheduled": sched[] holds the phase
//                   stamp), one atomicAdd per warp (FA_SCAN_BUILD);
//   queue           one thread per queued node (selection, Alg. 5-6), building the next queue when this
//                   phase builds (FA_QUEUE).
// fa_step runs whichever kind the phase is, the kind's loop compiled separately (fa_loop<K>). (Three
// kernels, one per kind, all launched every phase and two returning at once, let the all-node loop run
// at fc_step1's 30 registers but cost 2 idle launches a phase: 65 % slower on NY, 12 % on tiled NY 4x4,
// 3 % on 8x8, H200; removed.)
// Phase p + 1 runs on the queue iff phase p built it (ast[par^1] = build(p)). Pending nodes (Ua < Ca)
// are always in the queue of a queue phase: a node pending at the start of phase p + 1 was either
// processed in phase p (and, lowered again after that, queued) or lowered during it (queued).
// Whether phase p builds:
//   count switch (cfg[2] == 0): phase p - 1 processed fewer than cfg[3] nodes (the counted frontier);
//   time switch  (cfg[2] != 0): the paper's rule on the mean time of the last two phases, measured on the
//                device with %globaltimer: in the queue regime switch to all-node phases when the mean
//                exceeds cfg[0] (up, ns), in the all-node regime switch to the queue when it drops below
//                cfg[1] (down, ns). cfg lives in device memory (set by the host between runs: the
//                calibration probes and the solver share one captured CUDA graph).
//                The lead of phase p decides for phase p + 1 (ast[2 + (par^1)]); after a switch the
//                regime is held for 4 phases so that the two phases measured ran in the new regime.
// Counters rotate mod 3 like changed[]: qcnt[p%3] is read, qcnt[(p+1)%3] written, qcnt[(p+2)%3]
// zeroed. changed[] counts the nodes each phase processed (one atomicAdd per active block; zero ends the
// loop); the lead of phase p + 1 copies the count of phase p into stats[p]. ts[p] receives the
// %globaltimer time (ns) at the start of phase p (and ts[phases] at the end of the last one).
// ast: [0..1] on-queue flag per parity, [2..3] build flag per parity (time switch), [4] phases since the
// last regime switch; tring[4]: the last four phase start times; pmode[p]: the kind phase p ran.

}  // extern "C" (the adaptive step is a template)

enum { FA_SCAN = 0, FA_SCAN_BUILD = 1, FA_QUEUE = 2 };

// The relaxation loop of one phase of kind K (compile-time, so the all-node loop is fc_step1's).
template <int K>
__device__ __forceinline__ unsigned int fa_loop(int n, const int* __restrict__ fo, const int* __restrict__ hd,
                                                const int* __restrict__ w, unsigned int* ca, unsigned int* ua,
                                                int* flags, const unsigned int* qin, unsigned int* qout,
                                                unsigned int* cout, unsigned int items, bool build, unsigned int ph,
                                                unsigned int* sched) {
    unsigned int act = 0;
    const unsigned int end = K == FA_QUEUE ? items : (unsigned int)n;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < end; i += gridDim.x * blockDim.x) {
        const int v = K == FA_QUEUE ? (int)qin[i] : (int)i;
        const unsigned int u = __ldcg(ua + v);
        const unsigned int c = __ldcg(ca + v);
        if (u < c) {
            ++act;
            ca[v] = u;
            const int a0 = fo[v], a1 = fo[v + 1];
            for (int a = a0; a < a1; ++a) {
                const unsigned int nd = sat_add(u, w[a], flags);
                if (nd == DINF) continue;
                const int h = hd[a];
                if (K == FA_SCAN_BUILD || (K == FA_QUEUE && build)) {
                    const bool push = nd < atomicMin(&ua[h], nd) && atomicExch(&sched[h], ph + 1) != ph + 1;
                    warp_push(push, (unsigned int)h, qout, cout);
                } else {
                    atomicMin(&ua[h], nd);
                }
            }
        }
    }
    return act;
}

// One phase of the adaptive method (see above).
__device__ __forceinline__ void fa_phase(int n, const int* __restrict__ fo, const int* __restrict__ hd,
                                         const int* __restrict__ w, unsigned int* ca, unsigned int* ua,
                                         unsigned int* changed, int* flags, unsigned int* pc, unsigned int* stats,
                                         int stats_cap, int par, int p3, unsigned int* q0, unsigned int* q1,
                                         unsigned int* qcnt, unsigned int* ast, unsigned int* sched,
                                         const unsigned long long* cfg,
                                         unsigned long long* ts, unsigned long long* tring,
                                         unsigned char* pmode) {
    // Every prologue load is indexed by kernel arguments alone and issued before the first test.
    const int done = flags[F_DONE];
    const unsigned int prev = changed[(p3 + 2) % 3];
    const unsigned int ph = pc[par];
    const bool on_queue = ast[par] != 0;
    const unsigned int bflag = ast[2 + par];
    const unsigned int qc = qcnt[p3];
    const bool timed = cfg[2] != 0;
    const unsigned long long thr = cfg[3];
    if (done) return;
    const bool build = timed ? (bflag != 0) : ((unsigned long long)prev < thr);
    const int kind = on_queue ? FA_QUEUE : (build ? FA_SCAN_BUILD : FA_SCAN);
    if (prev == 0) { if (lead()) lead_finish(flags, ts, stats, stats_cap, ph); return; }
    if (lead()) {
        const unsigned long long now = lead_start(flags, ts, stats, stats_cap, ph, prev, changed, p3, pc, par);
        if (ph < (unsigned int)stats_cap) pmode[ph] = (unsigned char)kind;
        qcnt[(p3 + 2) % 3] = 0;
        ast[par ^ 1] = build ? 1u : 0u;
        if (timed) {
            unsigned int nb = bflag;
            unsigned int since = ast[4] + 1;
            if (ph >= 2 && since >= 4) {
                const unsigned long long t1 = tring[(ph - 1) & 3], t2 = tring[(ph - 2) & 3];
                const unsigned long long mean = ((now - t1) + (t1 - t2)) / 2;
                if (bflag && mean > cfg[0]) nb = 0u;
                else if (!bflag && mean < cfg[1]) nb = 1u;
            }
            if (nb != bflag) since = 0;
            ast[4] = since;
            ast[2 + (par ^ 1)] = nb;
        }
        tring[ph & 3] = now;
    }
    const unsigned int* qin = (ph & 1) ? q1 : q0;
    unsigned int* qout = (ph & 1) ? q0 : q1;
    unsigned int* cout = &qcnt[(p3 + 1) % 3];
    __shared__ unsigned int block_act;
    if (threadIdx.x == 0) block_act = 0;
    __syncthreads();
    unsigned int act;
    const int k = kind;
    if (k == FA_SCAN) act = fa_loop<FA_SCAN>(n, fo, hd, w, ca, ua, flags, qin, qout, cout, qc, build, ph, sched);
    else if (k == FA_SCAN_BUILD) act = fa_loop<FA_SCAN_BUILD>(n, fo, hd, w, ca, ua, flags, qin, qout, cout, qc, build, ph, sched);
    else act = fa_loop<FA_QUEUE>(n, fo, hd, w, ca, ua, flags, qin, qout, cout, qc, build, ph, sched);
    act = __reduce_add_sync(0xFFFFFFFFu, act);
    if ((threadIdx.x & 31) == 0 && act) atomicAdd(&block_act, act);
    __syncthreads();
    if (threadIdx.x == 0 && block_act) atomicAdd(&changed[p3], block_act);
}

#define FA_ARGS int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w, \
    unsigned int* ca, unsigned int* ua, unsigned int* changed, int* flags, unsigned int* pc, unsigned int* stats, \
    int stats_cap, int par, int p3, unsigned int* q0, unsigned int* q1, unsigned int* qcnt, unsigned int* ast, \
    unsigned int* sched, const unsigned long long* cfg, \
    unsigned long long* ts, unsigned long long* tring, unsigned char* pmode
#define FA_PASS n, fo, hd, w, ca, ua, changed, flags, pc, stats, stats_cap, par, p3, q0, q1, qcnt, ast, sched, \
    cfg, ts, tring, pmode

extern "C" {

// Registers: the largest of the three loops, capped at 32 so that 2048 threads fit an SM as with
// fc_step1 (nvcc 13, sm_90: 32 with or without the cap; the earlier single-loop fa_step took 38
// uncapped, 6 blocks of 256 per SM instead of 8).
__global__ void __launch_bounds__(1024, 2) fa_step(FA_ARGS) { fa_phase(FA_PASS); }

}  // extern "C"

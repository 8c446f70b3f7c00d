// Near-far (Davidson, Baxter, Garland, Owens, "Work-Efficient Parallel GPU Methods for Single-Source
// Shortest Paths", IPDPS 2014, sec. 4), batched over many sources: one fused kernel per phase replayed
// as a CUDA graph (fq_step), and the whole loop in one persistent cooperative launch (nf_persistent).
// With delta = INF the fused step is a Bellman-Ford work queue. Launchers in gpu.py; the CPU twin in
// cpu.py runs the same phases. Distances are 32-bit (gpuroute_common.cuh).
#include "gpuroute_common.cuh"

extern "C" {

// Fused frontier step: near-far (Davidson, Baxter, Garland, Owens, IPDPS 2014) with adaptive thread
// mapping, ONE kernel per phase, batched over k sources (items x = s*n + v). With delta = INF it is a
// Bellman-Ford work queue; with all_threshold < k*n it switches, per phase and on the device, between
// one thread per queued item and one thread per item (the Adaptive Thread Creation paper's two thread-creation modes, chosen by
// the frontier count instead of the measured phase time).
//
// State by phase: near queues alternate by parity (`par`), their counters rotate mod 3 (`p3`: read
// cnt[p3], write cnt[(p3+1)%3], zero cnt[(p3+2)%3] -- read one phase ago, written one phase later), far
// piles and their counters (cnt[3..5]) rotate mod 3 with the split count ks. st[2*par..] holds (T, ks)
// for this phase; the lead thread writes next phase's copy. Membership: bit `par` of sched[x] = "x is in
// the near queue of parity par" (so clearing the current bit never loses a push into the next queue);
// infar[x] = "x is in the far pile". Distances are updated in place (atomicMin): a node relaxes with its
// latest tentative distance, and any improvement re-queues it, so the result is exact.
__device__ __forceinline__ unsigned int* pick3(unsigned int* a, unsigned int* b, unsigned int* c, unsigned int i) {
    return i == 0 ? a : (i == 1 ? b : c);
}

// Relax the out-arcs of item x. Arcs go in chunks of 4 so that the memory round trips of a chunk
// overlap: the loads, then the 4 atomicMin, then the 4 membership atomics, then ONE atomicAdd per warp
// for all its pushes (near and far) -- 4 dependent round trips per chunk instead of 3 per arc.
__device__ __forceinline__ void fq_relax_item(unsigned int x, int n, const int* __restrict__ fo,
                                              const int* __restrict__ hd, const int* __restrict__ w,
                                              unsigned int* dist, unsigned int* sched, unsigned int* infar,
                                              unsigned int T, int par, unsigned int* qw, unsigned int* cw,
                                              unsigned int* fw, unsigned int* cfw, int* flags) {
    unsigned int s = x / (unsigned int)n;
    unsigned int base = s * (unsigned int)n;
    int v = (int)(x - base);
    atomicAnd(&sched[x], ~(1u << par));  // leave the current queue (result unused: no round trip)
    unsigned int dv = ((volatile unsigned int*)dist)[x];
    const unsigned int nb = 1u << (par ^ 1);
    const int a1 = fo[v + 1];
    const int lane = threadIdx.x & 31;
    const unsigned int lt = (1u << lane) - 1u;
    for (int a = fo[v]; a < a1; a += 4) {
        unsigned int y[4], nd[4];
        bool tn[4], tf[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bool ok = a + j < a1;
            y[j] = ok ? base + (unsigned int)hd[a + j] : 0u;
            nd[j] = ok ? sat_add(dv, w[a + j], flags) : DINF;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bool imp = nd[j] != DINF && nd[j] < atomicMin(&dist[y[j]], nd[j]);
            tn[j] = imp && nd[j] < T;
            tf[j] = imp && nd[j] >= T;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (tn[j]) tn[j] = !(atomicOr(&sched[y[j]], nb) & nb);
            if (tf[j]) tf[j] = atomicExch(&infar[y[j]], 1u) == 0u;
        }
        unsigned int mask = __activemask();
        unsigned int bn[4], bf[4], totn = 0, totf = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bn[j] = __ballot_sync(mask, tn[j]);
            bf[j] = __ballot_sync(mask, tf[j]);
            totn += __popc(bn[j]);
            totf += __popc(bf[j]);
        }
        if (totn | totf) {
            int leader = __ffs(mask) - 1;
            unsigned int on = 0, of = 0;
            if (lane == leader) {
                if (totn) on = atomicAdd(cw, totn);
                if (totf) of = atomicAdd(cfw, totf);
            }
            on = __shfl_sync(mask, on, leader);
            of = __shfl_sync(mask, of, leader);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (tn[j]) qw[on + __popc(bn[j] & lt)] = y[j];
                if (tf[j]) fw[of + __popc(bf[j] & lt)] = y[j];
                on += __popc(bn[j]);
                of += __popc(bf[j]);
            }
        }
    }
}

__global__ void fq_step(int n, unsigned int total, const int* __restrict__ fo, const int* __restrict__ hd,
                        const int* __restrict__ w, unsigned int* dist, unsigned int* near0, unsigned int* near1,
                        unsigned int* far0, unsigned int* far1, unsigned int* far2, unsigned int* cnt,
                        unsigned int* sched, unsigned int* infar, unsigned int* st, int* flags,
                        unsigned int* stats, int stats_cap, unsigned int delta, unsigned int all_threshold,
                        int par, int p3) {
    if (flags[F_DONE]) return;
    unsigned int c = cnt[p3];
    unsigned int T = st[2 * par], ks = st[2 * par + 1];
    unsigned int fcur = ks % 3;
    unsigned int cf = cnt[3 + fcur];
    unsigned int* qr = par ? near1 : near0;
    unsigned int* qw = par ? near0 : near1;
    unsigned int* cw = &cnt[(p3 + 1) % 3];
    const unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int nth = gridDim.x * blockDim.x;
    if (c == 0 && cf == 0) { if (lead()) flags[F_DONE] = 1; return; }
    if (lead()) {
        cnt[(p3 + 2) % 3] = 0;
        int ph = flags[F_PHASES]++;
        if (ph < stats_cap) stats[ph] = c;
    }
    if (c == 0) {
        // near queue empty: raise the threshold and split the far pile (Davidson et al. sec. 4)
        unsigned long long T2l = (unsigned long long)T + delta;
        unsigned int T2 = T2l >= DINF ? DINF : (unsigned int)T2l;
        unsigned int fnext = (ks + 1) % 3;
        if (lead()) { st[2 * (par ^ 1)] = T2; st[2 * (par ^ 1) + 1] = ks + 1; cnt[3 + (ks + 2) % 3] = 0; }
        const unsigned int* fr = pick3(far0, far1, far2, fcur);
        unsigned int* fw = pick3(far0, far1, far2, fnext);
        for (unsigned int i = tid; i - threadIdx.x < cf; i += nth) {
            bool active = i < cf;
            unsigned int y = active ? fr[i] : 0u;
            bool to_near = false, to_far = false;
            if (active) {
                unsigned int d = ((volatile unsigned int*)dist)[y];
                if (d < T2) {
                    atomicExch(&infar[y], 0u);
                    to_near = !(atomicOr(&sched[y], 1u << (par ^ 1)) & (1u << (par ^ 1)));
                } else {
                    to_far = true;  // stays in the far pile (infar stays set), moved to the next buffer
                }
            }
            warp_push(to_near, y, qw, cw);
            warp_push(to_far, y, fw, &cnt[3 + fnext]);
        }
        return;
    }
    if (lead()) { st[2 * (par ^ 1)] = T; st[2 * (par ^ 1) + 1] = ks; }
    unsigned int* fw = pick3(far0, far1, far2, fcur);
    unsigned int* cfw = &cnt[3 + fcur];
    if (c > all_threshold) {
        // many queued items: one thread per item in id order (coalesced), membership from sched bits
        for (unsigned int x = tid; x < total; x += nth)
            if (sched[x] & (1u << par)) fq_relax_item(x, n, fo, hd, w, dist, sched, infar, T, par, qw, cw, fw, cfw, flags);
    } else {
        for (unsigned int i = tid; i < c; i += nth)
            fq_relax_item(qr[i], n, fo, hd, w, dist, sched, infar, T, par, qw, cw, fw, cfw, flags);
    }
}

// ----------------------------------------------------------------------------------------------
// Persistent near-far: the whole loop in one launch, rounds separated by a software grid barrier
// (the launch is cooperative, so every block is resident). Batched: `k` sources, items x = s*n + v.
// Rounds are bounded on the host side by a watchdog counter `max_rounds` (flags[F_OVF] = 2 if hit).
__global__ void nf_persistent(int n, int k, const int* __restrict__ fo, const int* __restrict__ hd,
                              const int* __restrict__ w, unsigned int* dist, unsigned int* near0,
                              unsigned int* near1, unsigned int* far0, unsigned int* far1,
                              unsigned int* cnt /* [0..2] near (mod 3), [3..4] far */, unsigned int* sched,
                              unsigned int* infar, unsigned int* bar, int* flags, unsigned int* stats,
                              int stats_cap, unsigned int delta, unsigned int T0, long long max_rounds) {
    const unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int nth = gridDim.x * blockDim.x;
    volatile unsigned int* vcnt = cnt;
    unsigned int T = T0;
    int fp = 0;
    long long r = 0;
    for (;; ++r) {
        if (r >= max_rounds) { if (tid == 0) flags[F_OVF] = 2; break; }
        unsigned int c = vcnt[r % 3];
        const unsigned int* qr = (r & 1) ? near1 : near0;
        unsigned int* qw = (r & 1) ? near0 : near1;
        unsigned int* cw = &cnt[(r + 1) % 3];
        unsigned int* fw = fp ? far1 : far0;
        if (tid == 0) { cnt[(r + 2) % 3] = 0; if (r < stats_cap) stats[r] = c; }
        for (unsigned int i = tid; i - threadIdx.x < c; i += nth) {
            bool active = i < c;
            unsigned int x = active ? qr[i] : 0u;
            unsigned int s = x / (unsigned int)n;
            unsigned int base = s * (unsigned int)n;
            int v = (int)(x - base);
            int a0 = 0, a1 = 0;
            unsigned int dv = 0;
            if (active) {
                atomicExch(&sched[x], 0u);
                __threadfence();
                dv = ((volatile unsigned int*)dist)[x];
                a0 = fo[v]; a1 = fo[v + 1];
            }
            for (int a = a0; a < a1; ++a) {
                unsigned int y = base + (unsigned int)hd[a];
                unsigned int nd = sat_add(dv, w[a], flags);
                unsigned int old = atomicMin(&dist[y], nd);
                if (nd < old) {
                    if (nd < T) {
                        if (atomicExch(&sched[y], 1u) == 0u) qw[atomicAdd(cw, 1u)] = y;
                    } else if (atomicExch(&infar[y], 1u) == 0u) {
                        fw[atomicAdd(&cnt[3 + fp], 1u)] = y;
                    }
                }
            }
        }
        grid_barrier(bar);
        // advance the threshold while the next near queue is empty and the far pile is not
        while (vcnt[(r + 1) % 3] == 0) {
            unsigned int cf = vcnt[3 + fp];
            if (cf == 0) break;
            unsigned long long T2 = (unsigned long long)T + delta;
            T = T2 >= DINF ? DINF : (unsigned int)T2;
            const unsigned int* fr = fp ? far1 : far0;
            unsigned int* fo2 = fp ? far0 : far1;
            for (unsigned int i = tid; i - threadIdx.x < cf; i += nth) {
                bool active = i < cf;
                unsigned int y = active ? fr[i] : 0u;
                bool to_near = false, to_far = false;
                if (active) {
                    atomicExch(&infar[y], 0u);
                    __threadfence();
                    unsigned int d = ((volatile unsigned int*)dist)[y];
                    if (d < T) to_near = atomicExch(&sched[y], 1u) == 0u;
                    else to_far = atomicExch(&infar[y], 1u) == 0u;
                }
                warp_push(to_near, y, qw, cw);
                warp_push(to_far, y, fo2, &cnt[3 + (fp ^ 1)]);
            }
            grid_barrier(bar);
            if (tid == 0) cnt[3 + fp] = 0;
            fp ^= 1;
            grid_barrier(bar);
        }
        if (vcnt[(r + 1) % 3] == 0) break;  // near and far both empty: done
    }
    if (tid == 0) { flags[F_PHASES] = (int)(r + 1); flags[F_DONE] = 1; }
}

}  // extern "C"

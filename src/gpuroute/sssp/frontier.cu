// Frontier-based GPU SSSP kernels: selection and adaptive thread creation (seed 001, Alg. 4-6),
// Martin et al. and Crauser et al. (seed 002, sec. IV), near-far (Davidson et al. 2014) as a CUDA-graph
// phase loop and as one persistent kernel (also batched over many sources), and the canonical
// predecessor pass shared by all of them.
//
// Distances are 32-bit (INF = 0xFFFFFFFF); a relaxation whose sum would reach INF raises flags[F_OVF]
// instead of wrapping. Batched kernels address item x = s * n + v (source slot s, node v).
//
// Device-side termination: flags[F_DONE] is set by the kernel that sees the loop finished; every
// later kernel of a captured CUDA graph returns at once. flags[F_PHASES] counts phases; stats[p]
// receives the number of updated (frontier) nodes of phase p when p < stats_cap.


#define DINF 0xFFFFFFFFu
enum { F_CH0 = 0, F_CH1 = 1, F_DONE = 2, F_PHASES = 3, F_OVF = 4, F_MODE = 5, F_FARPAR = 6 };

__device__ __forceinline__ bool lead() { return blockIdx.x == 0 && threadIdx.x == 0; }

// Append `val` to queue q (counter *cnt) once per item, using one atomicAdd per warp.
__device__ __forceinline__ void warp_push(bool pred, unsigned int val, unsigned int* q, unsigned int* cnt) {
    unsigned int mask = __activemask();
    unsigned int ballot = __ballot_sync(mask, pred);
    if (!ballot) return;
    int lane = threadIdx.x & 31;
    int leader = __ffs(ballot) - 1;
    unsigned int base = 0;
    if (lane == leader) base = atomicAdd(cnt, (unsigned int)__popc(ballot));
    base = __shfl_sync(mask, base, leader);
    if (pred) q[base + __popc(ballot & ((1u << lane) - 1))] = val;
}

__device__ __forceinline__ unsigned int sat_add(unsigned int d, int w, int* flags) {
    unsigned long long s = (unsigned long long)d + (unsigned int)w;
    if (s >= DINF) { flags[F_OVF] = 1; return DINF; }
    return (unsigned int)s;
}

// %globaltimer: the GPU's nanosecond clock, common to all SMs (phase times measured on the device).
__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Phase bookkeeping of the fused loops (fc_step1, fa_step), done by the lead thread of phase ph:
// the loop is finished (phase ph - 1 processed nothing): set done, stamp the end time;
__device__ __forceinline__ void lead_finish(int* flags, unsigned long long* ts, unsigned int* stats, int stats_cap,
                                            unsigned int ph) {
    flags[F_DONE] = 1;
    if (ph < (unsigned int)stats_cap) ts[ph] = gtimer();
    if (ph >= 1 && ph - 1 < (unsigned int)stats_cap) stats[ph - 1] = 0;
}

// or a phase starts: stamp it, record phase ph - 1's count, zero the counter phase ph + 1 will add
// to, and publish the next phase number. Returns the stamp.
__device__ __forceinline__ unsigned long long lead_start(int* flags, unsigned long long* ts, unsigned int* stats,
                                                         int stats_cap, unsigned int ph, unsigned int prev,
                                                         unsigned int* changed, int p3, unsigned int* pc, int par) {
    const unsigned long long now = gtimer();
    if (ph < (unsigned int)stats_cap) ts[ph] = now;
    if (ph >= 1 && ph - 1 < (unsigned int)stats_cap) stats[ph - 1] = prev;
    changed[(p3 + 1) % 3] = 0;
    pc[par ^ 1] = ph + 1;
    flags[F_PHASES] = (int)ph + 1;
    return now;
}

extern "C" {

// ----------------------------------------------------------------------------------------------
// Initialisation shared by the 32-bit kernels: dist = INF except the sources (one per slot).
__global__ void init_dist(unsigned long long total, unsigned int* dist, const int* sources, int n) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= total) return;
    unsigned long long s = x / (unsigned long long)n;
    int v = (int)(x - s * n);
    dist[x] = (sources[s] == v) ? 0u : DINF;
}

// ----------------------------------------------------------------------------------------------
// Selection (seed 001, Alg. 5 SELECT_RELAX_KERNEL and Alg. 6 SELECT_UPDATE_KERNEL). Queues q[par]
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

// SWITCH_KERNEL of seed 001 Alg. 4 (line 29): build the read queue NRa from the mask Ma.
__global__ void switch_build_queue(int n, const unsigned char* ma, unsigned int* q, unsigned int* cnt) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    bool on = v < n && ma[v];
    warp_push(on, (unsigned int)v, q, cnt);
}

// ----------------------------------------------------------------------------------------------
// Martin et al. / Crauser et al. (seed 002). U: unsettled, F: frontier. kind: 0 Martin (settle
// delta == min), 1 Crauser general (min of dist + min out weight), 2 Crauser economic (min + gmin).
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
        if (kind == 1) {
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
    if (kind == 2) lim += gmin;
    int ph = flags[F_PHASES] - 1;  // counted by this phase's relax kernel
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    bool settle = false;
    if (v < n) {
        F[v] = 0;
        unsigned int d = dist[v];
        if (U[v] && d != DINF && (kind == 0 ? d == m : (unsigned long long)d <= lim)) {
            U[v] = 0; F[v] = 1; settle = true;
        }
    }
    if (ph < stats_cap) {
        unsigned int b = __ballot_sync(0xFFFFFFFFu, settle);
        if ((threadIdx.x & 31) == 0 && b) atomicAdd(&stats[ph], (unsigned int)__popc(b));
    }
}

// ----------------------------------------------------------------------------------------------
// Fused frontier step: near-far (Davidson, Baxter, Garland, Owens, IPDPS 2014) with adaptive thread
// mapping, ONE kernel per phase, batched over k sources (items x = s*n + v). With delta = INF it is a
// Bellman-Ford work queue; with all_threshold < k*n it switches, per phase and on the device, between
// one thread per queued item and one thread per item (seed 001's two thread-creation modes, chosen by
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
__device__ __forceinline__ void grid_barrier(unsigned int* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int* vb = bar;
        unsigned int gen = vb[1];
        __threadfence();
        unsigned int arrived = atomicAdd(&bar[0], 1u);
        if (arrived == gridDim.x - 1) {
            bar[0] = 0;
            __threadfence();
            atomicAdd(&bar[1], 1u);
        } else {
            while (vb[1] == gen) { __nanosleep(20); }
        }
        __threadfence();
    }
    __syncthreads();
}

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

// ----------------------------------------------------------------------------------------------
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
// Adaptive thread creation (seed 001 Alg. 4) on the fused conventional step, with device-side
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
//   time switch  (cfg[2] != 0): the seed's rule on the mean time of the last two phases, measured on the
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

// ----------------------------------------------------------------------------------------------
// Canonical predecessors (the CPU engine's rule): pred[v] = smallest tail u of a tight in-arc,
// dist[u] + w(u,v) == dist[v]; -1 for sources and unreachable nodes. Batched over k*n items.
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

// Minimum outgoing arc weight of every node (Crauser's Delta_node), INF if none.
__global__ void min_out_weight(int n, const int* fo, const int* w, unsigned int* minw) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned int m = DINF;
    for (int a = fo[v]; a < fo[v + 1]; ++a) m = min(m, (unsigned int)w[a]);
    minw[v] = m;
}

}  // extern "C"

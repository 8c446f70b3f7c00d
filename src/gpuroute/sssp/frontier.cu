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
                if (nd < old && atomicExch(&sched[u], 1u) == 0u) {
                    unsigned int pos = atomicAdd(&cnt[p ^ 1], 1u);
                    qw[pos] = (unsigned int)u;
                }
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
        if (nd < old && atomicExch(&sched[u], 1u) == 0u) {
            unsigned int pos = atomicAdd(&cnt[par ^ 1], 1u);
            qw[pos] = (unsigned int)u;
        }
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
// Near-far (Davidson, Baxter, Garland, Owens, IPDPS 2014) as a CUDA-graph phase loop.
// Phase: relax the near queue (heads below the threshold T go to the next near queue, others to the
// far pile), then nf_split (only if the next near queue is empty: T += delta and the far pile is
// split), then nf_control (bookkeeping, termination). ctl: [0] T, [1] split happened this phase.
__global__ void nf_relax(int n, const int* __restrict__ fo, const int* __restrict__ hd, const int* __restrict__ w,
                         unsigned int* dist, unsigned int* near0, unsigned int* near1, unsigned int* far0,
                         unsigned int* far1, unsigned int* cnt, unsigned int* sched, unsigned int* infar,
                         unsigned int* ctl, int* flags, unsigned int* stats, int stats_cap, int par) {
    if (flags[F_DONE]) return;
    unsigned int c = cnt[par];
    if (lead()) { int ph = flags[F_PHASES]; if (ph < stats_cap) stats[ph] = c; }
    const unsigned int* qr = par ? near1 : near0;
    unsigned int* qw = par ? near0 : near1;
    int fp = flags[F_FARPAR];
    unsigned int* fw = fp ? far1 : far0;
    unsigned int T = ctl[0];
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i - threadIdx.x < c; i += gridDim.x * blockDim.x) {
        bool active = i < c;
        int v = active ? (int)qr[i] : 0;
        int a0 = 0, a1 = 0;
        unsigned int dv = 0;
        if (active) {
            atomicExch(&sched[v], 0u);
            __threadfence();
            dv = ((volatile unsigned int*)dist)[v];
            a0 = fo[v]; a1 = fo[v + 1];
        }
        for (int a = a0; a < a1; ++a) {
            int u = hd[a];
            unsigned int nd = sat_add(dv, w[a], flags);
            unsigned int old = atomicMin(&dist[u], nd);
            if (nd < old) {
                if (nd < T) {
                    if (atomicExch(&sched[u], 1u) == 0u) qw[atomicAdd(&cnt[par ^ 1], 1u)] = (unsigned int)u;
                } else if (atomicExch(&infar[u], 1u) == 0u) {
                    fw[atomicAdd(&cnt[2 + fp], 1u)] = (unsigned int)u;
                }
            }
        }
    }
}

__global__ void nf_split(int n, unsigned int* dist, unsigned int* near0, unsigned int* near1, unsigned int* far0,
                         unsigned int* far1, unsigned int* cnt, unsigned int* sched, unsigned int* infar,
                         unsigned int* ctl, int* flags, unsigned int delta, int par) {
    if (flags[F_DONE]) return;
    if (cnt[par ^ 1] != 0) return;  // next near queue not empty: no split this phase
    int fp = flags[F_FARPAR];
    unsigned int cf = cnt[2 + fp];
    if (cf == 0) return;
    unsigned long long T2 = (unsigned long long)ctl[0] + delta;
    unsigned int T = T2 >= DINF ? DINF : (unsigned int)T2;
    if (lead()) ctl[1] = 1;
    const unsigned int* fr = fp ? far1 : far0;
    unsigned int* fw = fp ? far0 : far1;
    unsigned int* qw = par ? near0 : near1;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i - threadIdx.x < cf; i += gridDim.x * blockDim.x) {
        bool active = i < cf;
        int u = active ? (int)fr[i] : 0;
        bool to_near = false, to_far = false;
        if (active) {
            atomicExch(&infar[u], 0u);
            __threadfence();
            unsigned int d = ((volatile unsigned int*)dist)[u];
            if (d < T) to_near = atomicExch(&sched[u], 1u) == 0u;
            else to_far = atomicExch(&infar[u], 1u) == 0u;
        }
        warp_push(to_near, (unsigned int)u, qw, &cnt[par ^ 1]);
        warp_push(to_far, (unsigned int)u, fw, &cnt[2 + (fp ^ 1)]);
    }
}

__global__ void nf_control(unsigned int* cnt, unsigned int* ctl, int* flags, unsigned int delta, int par) {
    if (flags[F_DONE]) return;
    flags[F_PHASES] += 1;
    cnt[par] = 0;
    if (ctl[1]) {  // a split happened: advance T, swap the far piles
        unsigned long long T2 = (unsigned long long)ctl[0] + delta;
        ctl[0] = T2 >= DINF ? DINF : (unsigned int)T2;
        int fp = flags[F_FARPAR];
        cnt[2 + fp] = 0;
        flags[F_FARPAR] = fp ^ 1;
        ctl[1] = 0;
    }
    if (cnt[par ^ 1] == 0 && cnt[2 + flags[F_FARPAR]] == 0) flags[F_DONE] = 1;
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

// gpuroute_common.cuh: what every gpuroute kernel file shares (included by each .cu file; on the GPU
// machine gpuroute.backend.kernels.load_module inlines it, CI's nvcc check passes -I).
//
// Distances on the device are unsigned 32-bit with DINF = 0xFFFFFFFF for "not reached"; a relaxation
// whose sum would reach DINF raises flags[F_OVF] instead of wrapping (the launcher raises OverflowError).
// Batched kernels address item x = s * n + v (source slot s, node v).
//
// The flag words (int32 flags[N_FLAGS], mirrored in gpuroute/backend/flags.py, a test compares them):
//   F_CH0, F_CH1  "something changed" of the last two phases (by parity; the Adaptive Thread Creation paper's conventional loop)
//   F_DONE        the loop is finished: every later kernel of a captured CUDA graph returns at once
//   F_PHASES      phases (or rounds) run
//   F_OVF         1: a distance overflowed the 32-bit keys; 2: a persistent kernel hit its bound
//   F_MODE        adaptive-by-count thread mapping of the next phase (selection kernels)
//   F_FARPAR      near-far: parity of the far pile
#pragma once

#define DINF 0xFFFFFFFFu
enum { F_CH0 = 0, F_CH1 = 1, F_DONE = 2, F_PHASES = 3, F_OVF = 4, F_MODE = 5, F_FARPAR = 6, N_FLAGS = 8 };

// The first thread of the grid does the per-phase bookkeeping.
__device__ __forceinline__ bool lead() { return blockIdx.x == 0 && threadIdx.x == 0; }

// d + w in 32 bits, saturating at DINF with the overflow flag raised.
__device__ __forceinline__ unsigned int sat_add(unsigned int d, int w, int* flags) {
    unsigned long long s = (unsigned long long)d + (unsigned int)w;
    if (s >= DINF) { flags[F_OVF] = 1; return DINF; }
    return (unsigned int)s;
}

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

// %globaltimer: the GPU's nanosecond clock, common to all SMs (phase times measured on the device).
__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Phase bookkeeping of the fused loops, done by the lead thread of phase ph: the loop is finished
// (phase ph - 1 processed nothing): set done, stamp the end time;
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

// Software grid barrier for persistent cooperative kernels (every block resident): bar[0] counts
// arrivals, bar[1] is the generation.
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

// dist = DINF except the sources (one per slot s: item s * n + sources[s] = 0).
__device__ __forceinline__ void init_dist_item(unsigned long long total, unsigned int* dist, const int* sources,
                                               int n) {
    unsigned long long x = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= total) return;
    unsigned long long s = x / (unsigned long long)n;
    int v = (int)(x - s * n);
    dist[x] = (sources[s] == v) ? 0u : DINF;
}

// Harish & Narayanan's GPU Bellman-Ford: the "conventional method" of "Accelerating SSSP Algorithm on GPU
// with Adaptive Thread Creation", Algorithms 1-3, with the paper's two kernels per phase.
//
// One thread per node in every phase. RELAX_KERNEL (Alg. 2): a node whose mask Ma is set clears it
// and relaxes its outgoing arcs into Ua with atomicMin. UPDATE_KERNEL (Alg. 3): if Ua[v] < Ca[v] the
// node takes the new tentative distance and sets Ma[v] for the next phase. (The paper's Alg. 2 line 6
// reads Wa[n]; the weight meant is the arc's, Wa[i].)
//
// Keys. A 64-bit key packs (tentative distance << 32 | predecessor node): one atomicMin then keeps the
// smallest distance and, among ties, the smallest predecessor id -- exactly the canonical predecessor
// rule of the CPU engine. Without predecessors a 32-bit key holds the distance alone. Distances are
// exact up to 2^32 - 2; a relaxation that would exceed that raises the overflow flag (the Python side
// turns it into an OverflowError) instead of wrapping.
//
// Device-side termination. flags[F_CH0..F_CH1]: "something changed" of the last two phases (by parity);
// flags[F_DONE]: done; flags[F_PHASES]: phases run; flags[F_OVF]: overflow. A phase whose predecessor changed nothing
// sets done and every later kernel returns at once, so a CUDA graph of many phases can be replayed and
// the host reads `done` once per replay instead of once per phase.

#include "gpuroute_common.cuh"

#define KEY_INF64 0xFFFFFFFFFFFFFFFFull
#define DIST_LIMIT 0xFFFFFFFFull  // distances must stay strictly below this

__device__ __forceinline__ unsigned int key_dist(unsigned long long k) { return (unsigned int)(k >> 32); }
__device__ __forceinline__ unsigned int key_dist(unsigned int k) { return k; }

__device__ __forceinline__ unsigned long long make_key(unsigned long long d, int pred, unsigned long long*) {
    return (d << 32) | (unsigned int)pred;
}
__device__ __forceinline__ unsigned int make_key(unsigned long long d, int, unsigned int*) {
    return (unsigned int)d;
}

// Returns true when the loop is finished; also counts phases. Called by every kernel of a phase.
__device__ __forceinline__ bool phase_gate(int* flags, int parity, bool first_kernel) {
    if (flags[F_DONE]) return true;
    if (flags[F_CH0 + (parity ^ 1)] == 0) {
        if (first_kernel && lead()) flags[F_DONE] = 1;
        return true;
    }
    return false;
}

template <typename K>
__device__ void relax_node(int v, const int* __restrict__ first_out, const int* __restrict__ head,
                           const int* __restrict__ weight, const K* __restrict__ ca, K* ua, int* flags) {
    unsigned long long dv = key_dist(ca[v]);
    int e = first_out[v + 1];
    for (int a = first_out[v]; a < e; ++a) {
        unsigned long long nd = dv + (unsigned long long)weight[a];
        if (nd >= DIST_LIMIT) { flags[F_OVF] = 1; continue; }
        K key = make_key(nd, v, (K*)nullptr);
        atomicMin(&ua[head[a]], key);
    }
}

// RELAX_KERNEL (Alg. 2). parity alternates 0/1 by phase; pass -1 for the host-driven loop (no gate).
template <typename K>
__device__ void relax_all(int n, const int* first_out, const int* head, const int* weight,
                          unsigned char* ma, const K* ca, K* ua, int* flags, int parity) {
    if (parity >= 0) {
        if (phase_gate(flags, parity, true)) return;
        if (lead()) { flags[F_CH0 + parity] = 0; flags[F_PHASES] += 1; }
    }
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !ma[v]) return;
    ma[v] = 0;
    relax_node<K>(v, first_out, head, weight, ca, ua, flags);
}

// UPDATE_KERNEL (Alg. 3). Ca takes Ua's key whenever it is smaller (a smaller predecessor at the same
// distance too), but Ma is set only when the distance itself dropped.
template <typename K>
__device__ void update_all(int n, unsigned char* ma, K* ca, const K* ua, int* flags, int parity) {
    if (parity >= 0 && phase_gate(flags, parity, false)) return;
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    K u = ua[v], c = ca[v];
    if (u < c) {
        ca[v] = u;
        if (key_dist(u) < key_dist(c)) {
            ma[v] = 1;
            flags[F_CH0 + (parity < 0 ? 0 : parity)] = 1;
        }
    }
}

extern "C" {

__global__ void conv_relax_k64(int n, const int* first_out, const int* head, const int* weight,
                               unsigned char* ma, const unsigned long long* ca, unsigned long long* ua,
                               int* flags, int parity) {
    relax_all<unsigned long long>(n, first_out, head, weight, ma, ca, ua, flags, parity);
}
__global__ void conv_update_k64(int n, unsigned char* ma, unsigned long long* ca, const unsigned long long* ua,
                                int* flags, int parity) {
    update_all<unsigned long long>(n, ma, ca, ua, flags, parity);
}
__global__ void conv_relax_k32(int n, const int* first_out, const int* head, const int* weight,
                               unsigned char* ma, const unsigned int* ca, unsigned int* ua, int* flags, int parity) {
    relax_all<unsigned int>(n, first_out, head, weight, ma, ca, ua, flags, parity);
}
__global__ void conv_update_k32(int n, unsigned char* ma, unsigned int* ca, const unsigned int* ua,
                                int* flags, int parity) {
    update_all<unsigned int>(n, ma, ca, ua, flags, parity);
}

// Initialise keys to +inf, masks to 0, then the source to distance 0 with mask set.
__global__ void init_k64(int n, unsigned long long* ca, unsigned long long* ua, unsigned char* ma, int source) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned long long k = (v == source) ? (unsigned long long)0xFFFFFFFFu /* dist 0, pred -1 */ : KEY_INF64;
    ca[v] = k; ua[v] = k; ma[v] = (v == source);
}
__global__ void init_k32(int n, unsigned int* ca, unsigned int* ua, unsigned char* ma, int source) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned int k = (v == source) ? 0u : 0xFFFFFFFFu;
    ca[v] = k; ua[v] = k; ma[v] = (v == source);
}

}  // extern "C"

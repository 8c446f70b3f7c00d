// Cell-local Bellman-Ford: one thread block per cell, local convergence in shared memory, boundary
// arcs exchanged between rounds.
//
// Road networks need ~860 Bellman-Ford phases on NY because a shortest path is a long chain of arcs
// and a phase advances it by one arc; each phase costs a launch plus a few dependent memory round
// trips, and that product is the floor of every phase-synchronous method (BENCHMARKS.md). Here the
// nodes are renumbered so that cell c owns the contiguous range [c*S, c*S + S) of close nodes (the cells of
// Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs", Euro-Par 2014, sec. 2). A round is one kernel; in it every dirty cell's block
//   1. loads its tentative distances into shared memory, and each thread the internal in-arcs (both
//      endpoints in the cell) of its nodes into registers (padded slots; the few beyond them into
//      shared memory);
//   2. runs Bellman-Ford inside the cell until nothing changes, in pull form: each node takes the
//      minimum over its in-arcs of sd[u] + w, one __syncthreads per local iteration, no atomics
//      (bounded by S iterations);
//   3. writes the nodes that improved (dist below lastd, the distance their boundary arcs were last
//      relaxed with) back with atomicMin, records them in lastd, and relaxes their boundary arcs (head
//      in another cell) into global memory, marking the head's cell dirty;
//   4. if another block lowered a node of this cell meanwhile, goes back to 1 (at most max_reps times),
//      so that progress crosses cells within a round, not only between rounds.
// A chain of arcs now costs one round per cell boundary it crosses instead of one phase per arc.
//
// Correctness. Every stored distance is the length of some path. A node with dist < lastd is pending
// and its cell is dirty (whoever lowers a node of another cell marks that cell after the atomicMin,
// __threadfence between, and the block clears its dirty word before it reads distances). When no cell
// is dirty, every arc satisfies dist[h] <= dist[u] + w, so the distances are exact. Rounds are bounded
// by n + 1 (each round finalises at least the next boundary crossing of every shortest path).
//
// Two loops over the same per-cell work (load_cell, relax_cell): cb_round, one kernel per round in
// CUDA-graph replays (the gate is folded in), and cb_persistent, one cooperative launch for the whole
// search with no rounds (see its comment). flags[F_DONE]: done; flags[F_PHASES]: rounds; flags[F_OVF]:
// overflow (2: the persistent kernel's activation guard). Global distances are unsigned 32-bit with INF = 0xFFFFFFFF, as in the other kernels.
//
// Inside a block LINF = 2^31 - 1 stands for "unreached": LINF + w cannot wrap in 32 bits, so a pull
// is one add and one min per in-arc. Finite distances must stay below LINF, else flags[F_OVF] is raised
// (OverflowError).
//
// Compile-time: CB_NPT nodes per thread (S = CB_NPT * CB_T), CB_T threads per block, CB_MINB blocks per
// SM the register budget must allow (all cells co-resident), CB_MAXIN in-arc slots kept in registers.

#ifndef CB_NPT
#define CB_NPT 1
#endif
#ifndef CB_T
#define CB_T 1024
#endif
#ifndef CB_MINB
#define CB_MINB 1
#endif
#ifndef CB_MAXIN
#define CB_MAXIN 4
#endif
#define LINF 0x7FFFFFFF

#include "gpuroute_common.cuh"

extern "C" {

// du + w in unsigned 32-bit: du <= LINF and w <= 2^31 - 1, so the sum never wraps; a sum >= LINF
// never lowers a minimum that starts at most at LINF.
__device__ __forceinline__ unsigned int pull_sum(unsigned int du, int w) { return du + (unsigned int)w; }

// What a block keeps in registers about the cell it works on (see load_cell).
struct CellRegs {
    unsigned int last[CB_NPT];
    unsigned short iu[CB_NPT][CB_MAXIN];
    int iw[CB_NPT][CB_MAXIN];
    int oa[CB_NPT], ob[CB_NPT];
};

// Load cell c: its in-arcs beyond the register slots into shared memory (sow/sou, after the cell's
// distances sd[0, cell_size)), and each thread's register slots and lastd of its nodes. Ends with a
// barrier.
__device__ __forceinline__ void load_cell(int c, int n, int cell_size, const unsigned short* __restrict__ pu,
                                          const int* __restrict__ pw, const int* __restrict__ ofo,
                                          const unsigned short* __restrict__ otl, const int* __restrict__ ow,
                                          const unsigned int* lastd, unsigned int* sd, CellRegs& r) {
    const int v0 = c * cell_size;
    const int nc = min(cell_size, n - v0);
    const int obase = ofo[v0];
    const int no = ofo[v0 + nc] - obase;
    int* sow = (int*)(sd + cell_size);
    unsigned short* sou = (unsigned short*)(sow + no);
    for (int i = threadIdx.x; i < no; i += blockDim.x) { sow[i] = ow[obase + i]; sou[i] = otl[obase + i]; }
    // CB_MAXIN in-arc slots of each node in registers: (tail inside the cell, weight), padded with (the
    // node itself, 0), which never lowers the minimum. Slot-major (pu[k * n + v]): coalesced loads.
#pragma unroll
    for (int j = 0; j < CB_NPT; ++j) {
        int v = threadIdx.x + j * blockDim.x;
        int gv = min(v0 + v, n - 1);
        r.last[j] = __ldcg(lastd + gv);
        r.oa[j] = v < nc ? ofo[gv] - obase : 0;
        r.ob[j] = v < nc ? ofo[gv + 1] - obase : 0;
#pragma unroll
        for (int k = 0; k < CB_MAXIN; ++k) {
            r.iu[j][k] = v < nc ? pu[(size_t)k * n + gv] : (unsigned short)v;
            r.iw[j][k] = v < nc ? pw[(size_t)k * n + gv] : 0;
        }
    }
    __syncthreads();
}

// One pass over cell c: load its tentative distances into shared memory, run Bellman-Ford inside the
// cell to convergence (pull form), write back the nodes that improved and relax their boundary arcs.
// A boundary relaxation that lowers dist[h] sets the dirty word of h's cell; with `work` (the
// asynchronous kernel) a 0 -> 1 change of that word also counts one unit of pending work, before this
// block gives up its own (see cb_persistent). Returns the local iterations run.
__device__ __forceinline__ int relax_cell(int c, int n, int cell_size, const int* __restrict__ ofo,
                                          const int* __restrict__ xfo, const int* __restrict__ xhd,
                                          const int* __restrict__ xw, unsigned int* dist, unsigned int* lastd,
                                          unsigned int* dirty, unsigned int* work, unsigned int* sd,
                                          CellRegs& r, int& mark, int& upd, int& ovf) {
    const int v0 = c * cell_size;
    const int nc = min(cell_size, n - v0);
    const int obase = ofo[v0];
    const int no = ofo[v0 + nc] - obase;
    const int* sow = (const int*)(sd + cell_size);
    const unsigned short* sou = (const unsigned short*)(sow + no);
    unsigned int dv[CB_NPT];
#pragma unroll
    for (int j = 0; j < CB_NPT; ++j) {
        int v = threadIdx.x + j * blockDim.x;
        if (v < cell_size) {
            unsigned int g = v < nc ? __ldcg(dist + v0 + v) : DINF;
            dv[j] = min(g, (unsigned int)LINF);
            sd[v] = dv[j];
        }
    }
    __syncthreads();

    // Local Bellman-Ford, pull form, in place: every node takes the minimum over its in-arcs of
    // sd[u] + w (see pull_sum). Only the owner writes sd[v]: no atomics; reads race benignly
    // (old or new value, both upper bounds). Converges in at most nc + 1 iterations.
    volatile unsigned int* vsd = sd;
    int its = 0;
    for (int it = 0; it <= nc; ++it) {
        int improved = 0;
#pragma unroll
        for (int j = 0; j < CB_NPT; ++j) {
            unsigned int m = dv[j];
#pragma unroll
            for (int k = 0; k < CB_MAXIN; ++k) m = min(m, pull_sum(vsd[r.iu[j][k]], r.iw[j][k]));
            for (int a = r.oa[j]; a < r.ob[j]; ++a) m = min(m, pull_sum(vsd[sou[a]], sow[a]));
            if (m < dv[j]) {
                dv[j] = m;
                vsd[threadIdx.x + j * blockDim.x] = m;
                improved = 1;
            }
        }
        ++its;
        if (!__syncthreads_or(improved)) break;
    }

    // Write back improved nodes, relax their boundary arcs. A node left at LINF while one of its
    // in-slots is finite means a sum saturated: overflow.
#pragma unroll
    for (int j = 0; j < CB_NPT; ++j) {
        int v = threadIdx.x + j * blockDim.x;
        if (v < nc) {
            if (dv[j] == LINF) {
#pragma unroll
                for (int k = 0; k < CB_MAXIN; ++k) if (sd[r.iu[j][k]] < LINF) ovf = 1;
                for (int a = r.oa[j]; a < r.ob[j]; ++a) if (sd[sou[a]] < LINF) ovf = 1;
                continue;
            }
            unsigned int d = dv[j];
            if (d < r.last[j]) {
                ++upd;
                int gv = v0 + v;
                r.last[j] = d;
                lastd[gv] = d;
                atomicMin(&dist[gv], d);
                for (int a = xfo[gv]; a < xfo[gv + 1]; ++a) {
                    unsigned long long s2 = (unsigned long long)d + (unsigned int)xw[a];
                    if (s2 >= (unsigned long long)LINF) { ovf = 1; continue; }
                    unsigned int nd = (unsigned int)s2;
                    int h = xhd[a];
                    if (nd < atomicMin(&dist[h], nd)) {
                        __threadfence();
                        if (atomicExch(&dirty[h / cell_size], 1u) == 0u && work) atomicAdd(work, 1u);
                        mark = 1;
                    }
                }
            }
        }
    }
    return its;
}

__global__ void __launch_bounds__(CB_T, CB_MINB)
cb_round(int n, int cell_size, const unsigned short* __restrict__ pu, const int* __restrict__ pw,
         const int* __restrict__ ofo, const unsigned short* __restrict__ otl, const int* __restrict__ ow,
         const int* __restrict__ xfo, const int* __restrict__ xhd, const int* __restrict__ xw,
         unsigned int* dist, unsigned int* lastd, unsigned int* dirty, int* flags, unsigned int* stats,
         int stats_cap, int max_reps, unsigned int* changed, unsigned int* pc, int par, int p3,
         unsigned long long* prof) {
    // Round gate: stop when the previous round dirtied no cell. changed[] rotates mod 3: round p reads
    // changed[(p+2)%3] (round p-1's), sets changed[p%3], zeroes changed[(p+1)%3]; pc[par] is this round's
    // index, the lead thread writes the next one into pc[par^1].
    // Prologue: the loads and the dirty-word exchange are issued together, before the first test (when
    // the loop is finishing no cell is dirty, so the early exchange changes nothing).
    const int c = blockIdx.x;
    __shared__ unsigned int s_go, s_mark, s_upd;
    unsigned int go = 0;
    if (threadIdx.x == 0) go = atomicExch(&dirty[c], 0u);
    const int done = flags[F_DONE];
    const unsigned int prev = changed[(p3 + 2) % 3];
    const int ph = (int)pc[par];
    if (done) return;
    if (prev == 0) { if (blockIdx.x == 0 && threadIdx.x == 0) flags[F_DONE] = 1; return; }
    if (blockIdx.x == 0 && threadIdx.x == 0) { changed[(p3 + 1) % 3] = 0; pc[par ^ 1] = ph + 1; flags[F_PHASES] = ph + 1; }
    long long t0 = clock64();
    if (threadIdx.x == 0) {
        s_go = go;
        s_mark = 0;
        s_upd = 0;
        __threadfence();  // the clear is ordered before this block's reads of dist
    }
    __syncthreads();
    if (!s_go) return;

    extern __shared__ unsigned int sd[];  // cell_size tentative distances, LINF = unreached; then in-arcs
    CellRegs r;
    load_cell(c, n, cell_size, pu, pw, ofo, otl, ow, lastd, sd, r);
    long long t_local = 0;
    int its = 0, mark = 0, upd = 0, ovf = 0;
    for (int rep = 0; rep < max_reps; ++rep) {
        if (rep > 0) {  // go on in this round only if another block lowered a node of this cell meanwhile
            __syncthreads();
            if (threadIdx.x == 0) { s_go = atomicExch(&dirty[c], 0u); __threadfence(); }
            __syncthreads();
            if (!s_go) break;
        }
        long long tb = clock64();
        its += relax_cell(c, n, cell_size, ofo, xfo, xhd, xw, dist, lastd, dirty, nullptr, sd, r, mark, upd, ovf);
        t_local += clock64() - tb;
    }
    if (ovf) flags[F_OVF] = 1;
    mark = __reduce_or_sync(0xFFFFFFFFu, mark);
    upd = __reduce_add_sync(0xFFFFFFFFu, upd);
    if ((threadIdx.x & 31) == 0) {
        if (mark) s_mark = 1;
        if (upd) atomicAdd(&s_upd, (unsigned int)upd);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (s_mark) changed[p3] = 1u;
        if (s_upd && ph >= 0 && ph < stats_cap) atomicAdd(&stats[ph], s_upd);
        // Profile (prof may be null): per round, cells run, local iterations (sum, max), and the most
        // clock cycles a block spent loading its cell, and in local passes + write-back.
        if (prof && ph >= 0 && ph < stats_cap) {
            unsigned long long* q = prof + 8ull * ph;
            atomicAdd(q + 0, 1ull);
            atomicAdd(q + 1, (unsigned long long)its);
            atomicMax(q + 2, (unsigned long long)its);
            atomicMax(q + 3, (unsigned long long)(clock64() - t0 - t_local));
            atomicMax(q + 4, (unsigned long long)t_local);
        }
    }
}

// Asynchronous cell-local Bellman-Ford: ONE cooperative launch for the whole search, no rounds. Block b
// owns cells b, b + G, b + 2G, ... (G = gridDim.x; one cell per block when the grid holds every cell,
// and then the cell's in-arcs stay in registers for the whole search). Its lead thread polls the
// dirty words of its cells and claims one with atomicExch; the block relaxes it (relax_cell), which
// lowers and marks cells of other blocks; a cell is worked on again as soon as it is dirty, so a
// shortest path crosses a cell boundary in the time of one cell pass instead of one round.
//
// Termination: *work counts the set dirty words plus the cells being relaxed. A 0 -> 1 dirty change
// adds one (inside relax_cell, by a block that is itself counted), a claim turns a dirty word into a
// cell being relaxed, and the claiming block subtracts one only after its own marks (fence + barrier
// first). So *work == 0 only when no cell is dirty and none is being relaxed: every arc then satisfies
// dist[h] <= dist[u] + w (the round kernel's argument), and every block returns. Every block must be
// resident (a cooperative launch, which fails rather than run a grid that does not fit). Guard:
// activations are bounded by (n + 1) x n_cells (each one follows a strict decrease of some distance);
// past it flags[F_OVF] = 2 and every block returns.
__global__ void __launch_bounds__(CB_T, CB_MINB)
cb_persistent(int n, int n_cells, int cell_size, const unsigned short* __restrict__ pu, const int* __restrict__ pw,
              const int* __restrict__ ofo, const unsigned short* __restrict__ otl, const int* __restrict__ ow,
              const int* __restrict__ xfo, const int* __restrict__ xhd, const int* __restrict__ xw,
              unsigned int* dist, unsigned int* lastd, unsigned int* dirty, int* flags, unsigned int* work,
              unsigned long long* counters, unsigned long long max_acts) {
    extern __shared__ unsigned int sd[];
    __shared__ int s_cell;
    const int G = gridDim.x;
    const int cpb = (n_cells + G - 1) / G;  // cells per block
    CellRegs r;
    int loaded = -1, scan = 0, ovf = 0;
    unsigned long long acts = 0, upd_all = 0, its_all = 0;
    while (true) {
        if (threadIdx.x == 0) {
            int pick = -1;
            while (true) {
                for (int i = 0; i < cpb; ++i) {
                    int k = scan + i;
                    if (k >= cpb) k -= cpb;
                    int cc = blockIdx.x + k * G;
                    if (cc < n_cells && __ldcv(dirty + cc) && atomicExch(&dirty[cc], 0u)) {
                        pick = cc;
                        scan = k + 1 == cpb ? 0 : k + 1;
                        break;
                    }
                }
                if (pick >= 0) break;
                if (__ldcv(work) == 0u || __ldcv((unsigned int*)flags + F_OVF) == 2u) break;
                __nanosleep(32);
            }
            __threadfence();  // the claim is ordered before this block's reads of dist
            s_cell = pick;
        }
        __syncthreads();
        const int c = s_cell;
        if (c < 0) break;
        if (++acts > max_acts) {
            if (threadIdx.x == 0) flags[F_OVF] = 2;
            break;
        }
        if (c != loaded) {
            load_cell(c, n, cell_size, pu, pw, ofo, otl, ow, lastd, sd, r);
            loaded = c;
        }
        int mark = 0, upd = 0;
        its_all += relax_cell(c, n, cell_size, ofo, xfo, xhd, xw, dist, lastd, dirty, work, sd, r, mark, upd, ovf);
        upd_all += upd;
        __threadfence();  // this thread's marks (and their work increments) before the release below
        __syncthreads();
        if (threadIdx.x == 0) atomicSub(work, 1u);
    }
    if (ovf) atomicMax(flags + F_OVF, 1);
    // counters: [0] cell activations, [1] node write-backs, [2] local iterations (block sums)
    unsigned long long u = upd_all;
    for (int o = 16; o > 0; o >>= 1) u += __shfl_down_sync(0xFFFFFFFFu, u, o);
    if ((threadIdx.x & 31) == 0 && u) atomicAdd(counters + 1, u);
    if (threadIdx.x == 0) {
        atomicAdd(counters + 0, acts);
        atomicAdd(counters + 2, its_all);
    }
}

// Start a search: dist = lastd = INF, dist[source] = 0, only the source's cell dirty.
__global__ void cb_init(int n, int n_cells, int cell_size, unsigned int* dist, unsigned int* lastd,
                        unsigned int* dirty, int* flags, unsigned int* changed, unsigned int* pc, int source) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { dist[i] = (i == source) ? 0u : DINF; lastd[i] = DINF; }
    if (i < n_cells) dirty[i] = (i == source / cell_size) ? 1u : 0u;
    if (i < 8) flags[i] = 0;
    if (i < 3) changed[i] = (i == 2);
    if (i < 2) pc[i] = 0;
}

// Distances back in the original node order: out[v] = dist[rank[v]] as int64 with INF = 2^63 - 1
// (gpuroute.INF); d32 (optional) receives the 32-bit original-order distances for the predecessor pass.
__global__ void cb_output(int n, const int* __restrict__ rank, const unsigned int* __restrict__ dist,
                          long long* out, unsigned int* d32) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned int d = dist[rank[v]];
    if (out) out[v] = d == DINF ? 0x7FFFFFFFFFFFFFFFll : (long long)d;
    if (d32) d32[v] = d;
}

}  // extern "C"

// CRP customization on the GPU (Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs",
// Euro-Par 2014, sec. 3 "local implementation" and sec. 5), over the per-level search graphs of
// gpuroute.crp.topology (the arc-based turn model: a vertex is an arc ending in the cell, or, as a sink,
// one of the cell's exit points).
//
// One customization of a level is two kernels on one stream, no host round trip:
//   crp_aggregate  the cost of every edge of the level's search graph under the current metric (the
//                  paper's aggregation phase with its metric decoder): a turn's decoded cost at the lowest
//                  level, a clique entry of the level below above it; unusable edges get I64INF;
//   crp_bf_level   one thread block per work unit (a cell and a group of g of its entry points): the
//                  unit's distances (vertex-major, d[v * g + i]) live in shared memory; Bellman-Ford
//                  rounds pull over every vertex's incoming edges, in place, separated by block
//                  barriers, until a round improves nothing (__syncthreads_or: block-local termination,
//                  the paper's block-based synchronisation); then the clique row of each entry point
//                  (distances of the exit points) and, optionally, the shortest-path tree (the smallest
//                  forward edge index that is tight) are written out. A unit whose distances do not fit
//                  in shared memory uses its slice of a global scratch array instead (the paper's
//                  global-memory fallback).
//   crp_micro      the lowest level when it runs microinstructions (sec. 4, gpuroute.crp.microcode): one
//                  thread block per packed group of cells; arc instructions initialise the memory array M
//                  (shared memory, or a global scratch slice) from the decoded turn costs, then the
//                  instructions run layer by layer, one thread each, a block barrier between layers, and
//                  the clique values are copied out.
// crp_decode is the metric decoder: turn t costs penalty[kind[t]] (or the per-turn override) + the cost of
// its out-arc; restricted or overridden-closed turns, and turns into a closed arc (cost I64INF), are -1
// (FORBIDDEN).
//
// Costs are int64 (exact, whatever the metric); I64INF = INT64_MAX marks "no path", as the CPU twin's
// CLIQUE_INF. Edge costs are positive, so a tight in-edge is never part of a cycle and the trees are trees.
#include "gpuroute_common.cuh"

typedef long long i64;
#define I64INF 0x7fffffffffffffffLL
#define KIND_RESTRICTED 4

extern "C" __global__ void crp_decode(i64 n_turns, const unsigned char* __restrict__ kind,
                                      const int* __restrict__ out_arc, const i64* __restrict__ arc_cost,
                                      const i64* __restrict__ penalty, const i64* __restrict__ override_cost,
                                      int has_override, i64* __restrict__ turn_cost) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_turns) return;
    int k = kind[t];
    i64 c;
    if (k == KIND_RESTRICTED) {
        c = -1;
    } else {
        i64 p = has_override ? override_cost[t] : penalty[k];
        const i64 a = arc_cost[out_arc[t]];
        // a closed out-arc (CLOSED = I64INF, live traffic at speed 0) forbids the turn: no p + INF overflow
        c = ((has_override && p == -1) || a == I64INF) ? -1 : p + a;
    }
    turn_cost[t] = c;
}

// ecost[a] = cost of incoming edge a (ref >= 0: turn ref, negative = forbidden; ref < 0: clique entry
// -ref - 1 of the level below, I64INF where that pair has no path).
extern "C" __global__ void crp_aggregate(i64 n_edges, const i64* __restrict__ r_ref, const i64* __restrict__ turn_cost,
                                         const i64* __restrict__ clique, i64* __restrict__ ecost) {
    i64 a = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= n_edges) return;
    i64 ref = r_ref[a];
    i64 c;
    if (ref >= 0) {
        c = turn_cost[ref];
        if (c < 0) c = I64INF;
    } else {
        c = clique[-ref - 1];
    }
    ecost[a] = c;
}

// Bellman-Ford of one work unit over distances d (shared or global), then its outputs.
template <typename TT>
__device__ void bf_unit(i64* d, unsigned char* act, i64 n, int g, int i0, i64 lo, const int* __restrict__ v_orig,
                        const i64* __restrict__ f_first, const int* __restrict__ f_dst, const i64* __restrict__ r_first,
                        const int* __restrict__ r_src, const int* __restrict__ r_fe, const i64* __restrict__ ecost,
                        const int* __restrict__ ent_loc, int nx, const int* __restrict__ ex_loc, i64 cq, i64 tb,
                        int keep_tree, i64* __restrict__ clique, TT* __restrict__ tree, int* rounds_max) {
    const i64 items = n * g;
    // act (when not null): two flags per vertex, cur = act[v], next = act[n + v]; a vertex is relaxed in a
    // round only if an in-neighbour improved since it was last relaxed (the frontier of the rounds)
    unsigned char* cur = act;
    unsigned char* nxt = act ? act + n : nullptr;
    for (i64 t = threadIdx.x; t < items; t += blockDim.x) d[t] = I64INF;
    if (act)
        for (i64 v = threadIdx.x; v < 2 * n; v += blockDim.x) act[v] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < g; i += blockDim.x) {
        int e = ent_loc[i0 + i];
        d[(i64)e * g + i] = 0;
        if (act)
            for (i64 a = f_first[lo + e]; a < f_first[lo + e + 1]; ++a) cur[f_dst[a]] = 1;
    }
    __syncthreads();
    int rounds = 0;
    for (;;) {
        int improved = 0;
        for (i64 t = threadIdx.x; t < items; t += blockDim.x) {
            i64 v = t / g;
            if (cur && !cur[v]) continue;
            int i = (int)(t - v * g);
            i64 best = d[t];
            const i64 a1 = r_first[lo + v + 1];
            for (i64 a = r_first[lo + v]; a < a1; ++a) {
                i64 c = ecost[a];
                if (c == I64INF) continue;
                i64 du = ((volatile i64*)d)[(i64)r_src[a] * g + i];
                if (du == I64INF) continue;
                if (du + c < best) best = du + c;
            }
            if (best < d[t]) {
                d[t] = best;
                improved = 1;
                if (nxt)
                    for (i64 b = f_first[lo + v]; b < f_first[lo + v + 1]; ++b) nxt[f_dst[b]] = 1;
            }
        }
        ++rounds;
        if (!__syncthreads_or(improved)) break;
        if (act) {
            for (i64 v = threadIdx.x; v < n; v += blockDim.x) {
                cur[v] = nxt[v];
                nxt[v] = 0;
            }
            __syncthreads();
        }
    }
    if (threadIdx.x == 0) atomicMax(rounds_max, rounds);
    // clique rows of entries i0 .. i0 + g - 1: the distances of the exit points
    for (i64 t = threadIdx.x; t < (i64)g * nx; t += blockDim.x) {
        int i = (int)(t / nx);
        int j = (int)(t - (i64)i * nx);
        clique[cq + (i64)(i0 + i) * nx + j] = d[(i64)ex_loc[j] * g + i];
    }
    if (!keep_tree) return;
    // shortest-path trees: 1 + the smallest tight forward edge (counted from the cell's first edge), 0 for
    // the entry point itself and for unreached vertices
    for (i64 t = threadIdx.x; t < items; t += blockDim.x) {
        i64 v = t / g;
        int i = (int)(t - v * g);
        i64 dv = d[t];
        int best = 0x7fffffff;
        if (dv != I64INF && v != ent_loc[i0 + i]) {
            const i64 a1 = r_first[lo + v + 1];
            for (i64 a = r_first[lo + v]; a < a1; ++a) {
                i64 c = ecost[a];
                if (c == I64INF) continue;
                i64 du = d[(i64)r_src[a] * g + i];
                if (du != I64INF && du + c == dv && r_fe[a] < best) best = r_fe[a];
            }
        }
        tree[tb + (i64)(i0 + i) * n + v_orig[lo + v]] = (TT)(best == 0x7fffffff ? 0 : best + 1);
    }
}

// One level: block b customizes work unit units[b] (a cell, entries [u_i0, u_i0 + u_g)).
//   vf (cells + 1)           the cell's vertices [vf[c], vf[c + 1]) (level-local ids, renumbered by hops
//                            from the entry points; v_orig gives each one's original cell-local index)
//   r_first (V + 1), r_src, r_fe   incoming edges by head; tail counted from the cell's first vertex;
//                                  forward edge index counted from the cell's first forward edge
//   ent_first/ent_loc, ex_first/ex_loc  entry and exit points, as vertices counted from the cell's first
//   cq_first, tree_first (cells + 1)    global offsets of the cell's clique and trees
//   u_scr                     >= 0: the unit's slice of `scratch` (distances too big for shared memory)
template <typename TT>
__device__ void level_body(const int* __restrict__ units, const int* __restrict__ u_cell, const int* __restrict__ u_i0,
                           const int* __restrict__ u_g, const i64* __restrict__ u_scr, const i64* __restrict__ vf,
                           const int* __restrict__ v_orig, const i64* __restrict__ f_first,
                           const int* __restrict__ f_dst, const i64* __restrict__ r_first, const int* __restrict__ r_src, const int* __restrict__ r_fe,
                           const i64* __restrict__ ecost, const i64* __restrict__ ent_first, const int* __restrict__ ent_loc,
                           const i64* __restrict__ ex_first, const int* __restrict__ ex_loc,
                           const i64* __restrict__ cq_first, const i64* __restrict__ tree_first, i64* __restrict__ clique,
                           TT* __restrict__ tree, i64* __restrict__ scratch, int keep_tree, int smem_items,
                           int frontier, int* rounds_max) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int u = units[blockIdx.x];
    const int c = u_cell[u];
    const i64 lo = vf[c];
    const i64 n = vf[c + 1] - lo;
    const int g = u_g[u];
    if (n == 0 || g == 0) return;
    const i64 e0 = ent_first[c];
    const i64 x0 = ex_first[c];
    const int nx = (int)(ex_first[c + 1] - x0);
    const bool shared = u_scr[u] < 0;
    i64* d = shared ? (i64*)smem_raw : scratch + u_scr[u];
    unsigned char* act = (shared && frontier) ? smem_raw + (i64)smem_items * 8 : nullptr;
    const int keep = keep_tree && tree_first[c + 1] > tree_first[c];
    bf_unit<TT>(d, act, n, g, u_i0[u], lo, v_orig, f_first, f_dst, r_first, r_src, r_fe, ecost, ent_loc + e0, nx, ex_loc + x0, cq_first[c],
                tree_first[c], keep, clique, tree, rounds_max);
}

extern "C" __global__ void crp_bf_level_u16(const int* units, const int* u_cell, const int* u_i0, const int* u_g,
                                            const i64* u_scr, const i64* vf, const int* v_orig, const i64* f_first,
                                            const int* f_dst, const i64* r_first, const int* r_src,
                                            const int* r_fe, const i64* ecost, const i64* ent_first, const int* ent_loc,
                                            const i64* ex_first, const int* ex_loc, const i64* cq_first,
                                            const i64* tree_first, i64* clique, unsigned short* tree, i64* scratch,
                                            int keep_tree, int smem_items, int frontier, int* rounds_max) {
    level_body<unsigned short>(units, u_cell, u_i0, u_g, u_scr, vf, v_orig, f_first, f_dst, r_first, r_src, r_fe, ecost, ent_first, ent_loc,
                               ex_first, ex_loc, cq_first, tree_first, clique, tree, scratch, keep_tree, smem_items,
                    frontier, rounds_max);
}

extern "C" __global__ void crp_bf_level_i32(const int* units, const int* u_cell, const int* u_i0, const int* u_g,
                                            const i64* u_scr, const i64* vf, const int* v_orig, const i64* f_first,
                                            const int* f_dst, const i64* r_first, const int* r_src,
                                            const int* r_fe, const i64* ecost, const i64* ent_first, const int* ent_loc,
                                            const i64* ex_first, const int* ex_loc, const i64* cq_first,
                                            const i64* tree_first, i64* clique, int* tree, i64* scratch,
                                            int keep_tree, int smem_items, int frontier, int* rounds_max) {
    level_body<int>(units, u_cell, u_i0, u_g, u_scr, vf, v_orig, f_first, f_dst, r_first, r_src, r_fe, ecost, ent_first, ent_loc,
                    ex_first, ex_loc, cq_first, tree_first, clique, tree, scratch, keep_tree, smem_items,
                    frontier, rounds_max);
}

// ------------------------------------------------------------------------------------------ push levels
// The kernel of every level whose cells fit its shared memory (written for the upper levels' few big cells: NY's
// 69 and 5 cells of ~300-750 vertices, 20-55 in-edges each; faster on NY's level 0 too).
// crp_bf_level's pull gives each (vertex, entry) item to one thread, which walks the vertex's in-edges one
// by one: every load a different cache line per lane, dependent on the last, and the edges re-read for each
// entry point -- latency-bound rounds. Here the threads stride over the cell's edges instead, in forward
// order (by renumbered tail: the hop order of the sweeps), each edge read once per round and relaxed for all
// g entry points of the unit: coalesced loads, independent iterations, no per-vertex imbalance. Relaxations
// push: d[v] = min(d[v], d[u] + c) by a shared-memory atomicMin (values only decrease: a stale read is safe,
// and the fixpoint -- the shortest distances -- is the same whatever the order). The frontier is the set of
// tails that improved since their edges were last relaxed: three rotating flag rows (read this round, set
// for the next, cleared for the one after), so one block barrier per round. Trees: the same rule as
// crp_bf_level (1 + the smallest tight forward edge), by an atomicMin over the tight edges into an int32
// row per item. No global-memory fallback: the host uses this kernel on a level only where every unit fits.
// Any block size (the host picks one per level: customize_gpu.push_threads).
//   f_first (V + 1)   forward edges by renumbered tail; f_pack (E) tail | head << 16 (cell-local,
//                     renumbered: cells of at most 65,536 vertices); f_fe (E) the edge's forward index
//                     counted from the cell's first forward edge (the trees' edge id); fcost (E) its cost
//                     (crp_aggregate over the level's f_ref)
// Shared memory (dynamic, >= 15 x items bytes): d int64 (n x g), best int32 (n x g), 3 flag rows of n bytes.
// Each thread loads CRP_PUSH_UNROLL edges (tail/head and cost, independent coalesced loads) before relaxing
// them: with one or two blocks a multiprocessor, a load at a time per warp would leave the rounds
// latency-bound (a big cell's edges come from L2, ~80 per thread per round at 512 threads).
#ifndef CRP_PUSH_UNROLL
#define CRP_PUSH_UNROLL 8
#endif
// One edge of a round: relax tail -> head for the unit's g entry points; returns whether the head improved.
__device__ __forceinline__ int push_edge(i64* d, int g, unsigned pk, i64 cost, const unsigned char* cur,
                                         unsigned char* nxt, int frontier) {
    const int tl = (int)(pk & 0xffffu);
    if (cost == I64INF || (frontier && !((volatile const unsigned char*)cur)[tl])) return 0;
    const int hd = (int)(pk >> 16);
    const volatile i64* du = (const volatile i64*)(d + tl * g);
    i64* dv = d + hd * g;
    int mark = 0;
    for (int i = 0; i < g; ++i) {
        const i64 x = du[i];
        if (x == I64INF) continue;
        const i64 nd = x + cost;
        if (nd < ((volatile i64*)dv)[i] && atomicMin((long long*)(dv + i), (long long)nd) > nd) mark = 1;
    }
    if (mark) ((volatile unsigned char*)nxt)[hd] = 1;
    return mark;
}

template <typename TT>
__device__ void push_body(const int* __restrict__ units, const int* __restrict__ u_cell, const int* __restrict__ u_i0,
                          const int* __restrict__ u_g, const i64* __restrict__ vf, const int* __restrict__ v_orig,
                          const i64* __restrict__ f_first, const unsigned* __restrict__ f_pack,
                          const int* __restrict__ f_fe, const i64* __restrict__ fcost,
                          const i64* __restrict__ ent_first, const int* __restrict__ ent_loc_all,
                          const i64* __restrict__ ex_first, const int* __restrict__ ex_loc_all,
                          const i64* __restrict__ cq_first, const i64* __restrict__ tree_first, i64* __restrict__ clique,
                          TT* __restrict__ tree, int keep_tree, int frontier, int* rounds_max) {
    extern __shared__ __align__(16) unsigned char push_smem[];
    const int u = units[blockIdx.x];
    const int c = u_cell[u];
    const i64 lo = vf[c];
    const int n = (int)(vf[c + 1] - lo);
    const int g = u_g[u];
    if (n == 0 || g == 0) return;
    const int i0 = u_i0[u];
    const int items = n * g;
    const int* __restrict__ ent_loc = ent_loc_all + ent_first[c];
    const i64 x0 = ex_first[c];
    const int nx = (int)(ex_first[c + 1] - x0);
    const int* __restrict__ ex_loc = ex_loc_all + x0;
    i64* d = (i64*)push_smem;
    int* best = (int*)(push_smem + (size_t)items * 8);
    unsigned char* fl = push_smem + (size_t)items * 12;  // flag rows fl[0..n), fl[n..2n), fl[2n..3n)
    const i64 b0 = f_first[lo];
    const i64 b1 = f_first[lo + n];
    for (int t = threadIdx.x; t < items; t += blockDim.x) d[t] = I64INF;
    for (int t = threadIdx.x; t < 3 * n; t += blockDim.x) fl[t] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < g; i += blockDim.x) {
        const int e = ent_loc[i0 + i];
        d[e * g + i] = 0;
        fl[e] = 1;  // round 0 relaxes the entry points' out-edges
    }
    __syncthreads();
    int rounds = 0;
    for (;;) {
        const unsigned char* cur = fl + (rounds % 3) * n;
        unsigned char* nxt = fl + ((rounds + 1) % 3) * n;
        unsigned char* old = fl + ((rounds + 2) % 3) * n;  // read last round, written next round: cleared now
        int improved = 0;
        const i64 step = (i64)blockDim.x * CRP_PUSH_UNROLL;
        for (i64 b = b0 + threadIdx.x; b < b1; b += step) {
            unsigned pk[CRP_PUSH_UNROLL];
            i64 cost[CRP_PUSH_UNROLL];
#pragma unroll
            for (int k = 0; k < CRP_PUSH_UNROLL; ++k) {  // the loads first, all in flight
                const i64 e = b + (i64)k * blockDim.x;
                pk[k] = e < b1 ? f_pack[e] : 0u;
                cost[k] = e < b1 ? fcost[e] : I64INF;
            }
#pragma unroll
            for (int k = 0; k < CRP_PUSH_UNROLL; ++k) improved |= push_edge(d, g, pk[k], cost[k], cur, nxt, frontier);
        }
        if (frontier)
            for (int t = threadIdx.x; t < n; t += blockDim.x) old[t] = 0;
        ++rounds;
        if (!__syncthreads_or(improved)) break;  // (without the frontier every tail is relaxed every round)
    }
    if (threadIdx.x == 0) atomicMax(rounds_max, rounds);
    const i64 cq = cq_first[c];
    for (int t = threadIdx.x; t < g * nx; t += blockDim.x) {
        const int i = t / nx;
        const int j = t - i * nx;
        clique[cq + (i64)(i0 + i) * nx + j] = d[ex_loc[j] * g + i];
    }
    if (!keep_tree || tree_first[c + 1] <= tree_first[c]) return;
    for (int t = threadIdx.x; t < items; t += blockDim.x) best[t] = 0x7fffffff;
    __syncthreads();
    const i64 step = (i64)blockDim.x * CRP_PUSH_UNROLL;
    for (i64 b = b0 + threadIdx.x; b < b1; b += step) {
        unsigned pk[CRP_PUSH_UNROLL];
        i64 cost[CRP_PUSH_UNROLL];
        int fe[CRP_PUSH_UNROLL];
#pragma unroll
        for (int k = 0; k < CRP_PUSH_UNROLL; ++k) {
            const i64 e = b + (i64)k * blockDim.x;
            pk[k] = e < b1 ? f_pack[e] : 0u;
            cost[k] = e < b1 ? fcost[e] : I64INF;
            fe[k] = e < b1 ? f_fe[e] : 0;
        }
#pragma unroll
        for (int k = 0; k < CRP_PUSH_UNROLL; ++k) {
            if (cost[k] == I64INF) continue;
            const int tl = (int)(pk[k] & 0xffffu);
            const int hd = (int)(pk[k] >> 16);
            for (int i = 0; i < g; ++i) {
                const i64 x = d[tl * g + i];
                if (x == I64INF || x + cost[k] != d[hd * g + i] || hd == ent_loc[i0 + i]) continue;
                atomicMin(best + hd * g + i, fe[k]);
            }
        }
    }
    __syncthreads();
    const i64 tb = tree_first[c];
    for (int t = threadIdx.x; t < items; t += blockDim.x) {
        const int v = t / g;
        const int i = t - v * g;
        const int bv = best[t];
        tree[tb + (i64)(i0 + i) * n + v_orig[lo + v]] = (TT)(bv == 0x7fffffff ? 0 : bv + 1);
    }
}

// (PUSH_PARAMS: the kernels' leading parameters; PUSH_ARGS: the same names, passed on)
#define PUSH_PARAMS                                                                                                \
    const int *units, const int *u_cell, const int *u_i0, const int *u_g, const i64 *vf, const int *v_orig,       \
        const i64 *f_first, const unsigned *f_pack, const int *f_fe, const i64 *fcost, const i64 *ent_first,       \
        const int *ent_loc, const i64 *ex_first, const int *ex_loc, const i64 *cq_first, const i64 *tree_first,    \
        i64 *clique
#define PUSH_ARGS                                                                                                  \
    units, u_cell, u_i0, u_g, vf, v_orig, f_first, f_pack, f_fe, fcost, ent_first, ent_loc, ex_first, ex_loc,     \
        cq_first, tree_first, clique

extern "C" __global__ void crp_push_level_u16(PUSH_PARAMS, unsigned short* tree, int keep_tree, int frontier,
                                              int* rounds_max) {
    push_body<unsigned short>(PUSH_ARGS, tree, keep_tree, frontier, rounds_max);
}

extern "C" __global__ void crp_push_level_i32(PUSH_PARAMS, int* tree, int keep_tree, int frontier, int* rounds_max) {
    push_body<int>(PUSH_ARGS, tree, keep_tree, frontier, rounds_max);
}

// ------------------------------------------------------------------------------------------ microcode
// One triple: M[c] = min(M[c], M[a] + M[b]), or M[a] + M[b] where the instruction is c's first write.
__device__ __forceinline__ void micro_exec(i64* M, unsigned a, unsigned b, unsigned c, bool first) {
    const i64 va = M[a];
    const i64 vb = M[b];
    const i64 s = (va == I64INF || vb == I64INF) ? I64INF : va + vb;
    if (first || s < M[c]) M[c] = s;
}

// Block blockIdx.x runs packed block blocks[blockIdx.x] of a gpuroute.crp.microcode.MicroProgram:
//   b_arc_first (B + 1), ai_turn, ai_pos   arc instructions: M[ai_pos] = turn_cost[ai_turn] (INF if < 0)
//   b_lay_first (B + 1), lay_word          the block's layer l: words [lay_word[b_lay_first[b] + l], .. + 1)
//   words                                  compact: a | (b - a - 1) << a_bits | (c - b + 2^(dc_bits-1))
//                                          << (a_bits + db_bits) | first << 31, dc_bits = 31 - a_bits -
//                                          db_bits; absolute (db_bits = 0): a | b << a_bits | c << 2 a_bits |
//                                          first << 31; wide (b_wide): two words, a | b << 21 | c << 42 |
//                                          first << 63
//   b_scr                                  -1: M in shared memory; else its offset in `scratch`
//   b_out_first (B + 1), o_pos, o_dst      clique[o_dst] = M[o_pos] (INF where o_pos < 0)
extern "C" __global__ void crp_micro(const int* __restrict__ blocks, const i64* __restrict__ b_arc_first,
                                     const int* __restrict__ ai_turn, const int* __restrict__ ai_pos,
                                     const i64* __restrict__ b_lay_first, const i64* __restrict__ lay_word,
                                     const unsigned int* __restrict__ words, const unsigned char* __restrict__ b_wide,
                                     const i64* __restrict__ b_scr, const i64* __restrict__ b_out_first,
                                     const int* __restrict__ o_pos, const i64* __restrict__ o_dst, int a_bits,
                                     int db_bits, const i64* __restrict__ turn_cost, i64* __restrict__ clique,
                                     i64* __restrict__ scratch) {
    extern __shared__ __align__(16) i64 micro_smem[];
    const int b = blocks[blockIdx.x];
    i64* M = b_scr[b] < 0 ? micro_smem : scratch + b_scr[b];
    for (i64 k = b_arc_first[b] + threadIdx.x; k < b_arc_first[b + 1]; k += blockDim.x) {
        const i64 t = turn_cost[ai_turn[k]];
        M[ai_pos[k]] = t < 0 ? I64INF : t;
    }
    __syncthreads();
    const bool wide = b_wide[b] != 0;
    const int dc_bits = db_bits ? 31 - a_bits - db_bits : 1;
    const unsigned amask = (1u << a_bits) - 1u;
    const unsigned dbmask = (1u << db_bits) - 1u;
    const unsigned dcmask = (1u << dc_bits) - 1u;
    const unsigned dcoff = 1u << (dc_bits - 1);
    const i64 l0 = b_lay_first[b];
    const i64 l1 = b_lay_first[b + 1];
    for (i64 l = l0; l + 1 < l1; ++l) {
        const i64 w0 = lay_word[l];
        const i64 w1 = lay_word[l + 1];
        if (wide) {
            for (i64 k = w0 + 2 * (i64)threadIdx.x; k < w1; k += 2 * (i64)blockDim.x) {
                const unsigned long long x = (unsigned long long)words[k] | ((unsigned long long)words[k + 1] << 32);
                const unsigned m21 = (1u << 21) - 1u;
                micro_exec(M, (unsigned)(x & m21), (unsigned)((x >> 21) & m21), (unsigned)((x >> 42) & m21),
                           (x >> 63) != 0ull);
            }
        } else {
            if (db_bits == 0) {  // absolute form: three a_bits positions
                for (i64 k = w0 + threadIdx.x; k < w1; k += blockDim.x) {
                    const unsigned w = words[k];
                    micro_exec(M, w & amask, (w >> a_bits) & amask, (w >> (2 * a_bits)) & amask, (w >> 31) != 0u);
                }
            } else {
                for (i64 k = w0 + threadIdx.x; k < w1; k += blockDim.x) {
                    const unsigned w = words[k];
                    const unsigned a = w & amask;
                    const unsigned bb = a + 1u + ((w >> a_bits) & dbmask);
                    const unsigned c = bb + ((w >> (a_bits + db_bits)) & dcmask) - dcoff;
                    micro_exec(M, a, bb, c, (w >> 31) != 0u);
                }
            }
        }
        __syncthreads();
    }
    for (i64 k = b_out_first[b] + threadIdx.x; k < b_out_first[b + 1]; k += blockDim.x) {
        const int p = o_pos[k];
        clique[o_dst[k]] = p < 0 ? I64INF : M[p];
    }
}

// crp_aggregate over some ranges of the incoming edges only (a traffic update: the in-edges of its dirty
// cells, contiguous per cell); ranges: (first edge, count) pairs, one block per range.
extern "C" __global__ void crp_aggregate_ranges(i64 n_ranges, const i64* __restrict__ ranges,
                                                const i64* __restrict__ r_ref, const i64* __restrict__ turn_cost,
                                                const i64* __restrict__ clique, i64* __restrict__ ecost) {
    for (i64 k = blockIdx.x; k < n_ranges; k += gridDim.x) {
        const i64 s = ranges[2 * k], len = ranges[2 * k + 1];
        for (i64 i = threadIdx.x; i < len; i += blockDim.x) {
            const i64 a = s + i;
            const i64 ref = r_ref[a];
            i64 c;
            if (ref >= 0) {
                c = turn_cost[ref];
                if (c < 0) c = I64INF;
            } else {
                c = clique[-ref - 1];
            }
            ecost[a] = c;
        }
    }
}

// Ranges of up to four (source, destination) array pairs copied in one launch (gpuroute.crp.state_buffers: a
// traffic update brings the spare device copy up to date -- cliques, trees, decoded turn costs, and the new turn
// costs from the upload -- and packs the cells it re-customized for the copy back, without touching the rest).
//   seg (n_seg x 4)          per range: pair (0..3), source byte offset, destination byte offset, bytes
//   chunk_first (n_seg + 1)  the range's first chunk: a range is cut into chunks of chunk_bytes (a multiple of
//                            16), the last one shorter; empty ranges have none
// One warp per chunk (grid-stride over the chunks): the range by a binary search over chunk_first, then the
// chunk's bytes in the widest words both addresses allow (16-byte vectors where source and destination agree
// modulo 16; 8, 4, 2, 1 bytes otherwise), the unaligned head and tail byte by byte; coalesced. The ranges'
// destinations must not overlap (they are written concurrently).
struct alignas(16) crp_v16 {
    unsigned long long lo, hi;
};

template <class W>
__device__ __forceinline__ void copy_words(const unsigned char* __restrict__ s, unsigned char* __restrict__ d, i64 n,
                                           int lane) {
    const W* __restrict__ sw = (const W*)s;
    W* __restrict__ dw = (W*)d;
    for (i64 k0 = 0; k0 < n; k0 += 128) {  // four words per lane in flight
        W v0, v1, v2, v3;
        const i64 k = k0 + lane;
        if (k < n) v0 = sw[k];
        if (k + 32 < n) v1 = sw[k + 32];
        if (k + 64 < n) v2 = sw[k + 64];
        if (k + 96 < n) v3 = sw[k + 96];
        if (k < n) dw[k] = v0;
        if (k + 32 < n) dw[k + 32] = v1;
        if (k + 64 < n) dw[k + 64] = v2;
        if (k + 96 < n) dw[k + 96] = v3;
    }
}

extern "C" __global__ void crp_copy_chunks(i64 n_seg, const i64* __restrict__ seg, const i64* __restrict__ chunk_first,
                                           i64 chunk_bytes, const unsigned char* s0, unsigned char* d0,
                                           const unsigned char* s1, unsigned char* d1, const unsigned char* s2,
                                           unsigned char* d2, const unsigned char* s3, unsigned char* d3) {
    if (n_seg <= 0) return;
    const i64 n_chunks = chunk_first[n_seg];
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    const int lane = (int)(threadIdx.x & 31);
    for (i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < n_chunks; w += warps) {
        i64 lo = 0, hi = n_seg - 1;  // the last range whose first chunk is <= w
        while (lo < hi) {
            const i64 mid = (lo + hi + 1) >> 1;
            if (chunk_first[mid] <= w) lo = mid;
            else hi = mid - 1;
        }
        const i64* g = seg + 4 * lo;
        const i64 pair = g[0];
        const i64 off = (w - chunk_first[lo]) * chunk_bytes;
        i64 n = g[3] - off;
        if (n > chunk_bytes) n = chunk_bytes;
        const unsigned char* s = (pair == 0 ? s0 : pair == 1 ? s1 : pair == 2 ? s2 : s3) + g[1] + off;
        unsigned char* d = (pair == 0 ? d0 : pair == 1 ? d1 : pair == 2 ? d2 : d3) + g[2] + off;
        const unsigned long long x = (unsigned long long)s ^ (unsigned long long)d;
        i64 wb = 16;
        while (wb > 1 && (x & (unsigned long long)(wb - 1))) wb >>= 1;
        i64 head = (i64)((unsigned long long)(wb - (i64)((unsigned long long)s & (unsigned long long)(wb - 1))) &
                         (unsigned long long)(wb - 1));
        if (head > n) head = n;
        const i64 nw = (n - head) / wb;
        const i64 t0 = head + nw * wb;
        if (lane < head) d[lane] = s[lane];  // head and tail: fewer than wb <= 16 bytes each
        if (t0 + lane < n) d[t0 + lane] = s[t0 + lane];
        if (wb == 16) copy_words<crp_v16>(s + head, d + head, nw, lane);
        else if (wb == 8) copy_words<unsigned long long>(s + head, d + head, nw, lane);
        else if (wb == 4) copy_words<unsigned int>(s + head, d + head, nw, lane);
        else if (wb == 2) copy_words<unsigned short>(s + head, d + head, nw, lane);
        else copy_words<unsigned char>(s + head, d + head, nw, lane);
    }
}

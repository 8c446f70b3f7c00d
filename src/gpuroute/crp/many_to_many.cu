// The GPU twin of the overlay's many-to-many table (gpuroute.crp.many_to_many_gpu; the CPU twin
// gpuroute.crp.many_to_many, whose module docstring defines the searches): OSRM's many_to_many_mld with
// buckets over arc states, int64 fixed-point labels, one GPU thread per search.
//
//   m2m_backward         one thread per target: the multi-level backward search to exhaustion, writing its
//                        bucket entries into its own slice of cap entries
//   m2m_compact_entries  one block per target: its slice to its range of the compacted entries (parents
//                        made global)
//   m2m_forward          one thread per source: the forward search joining the buckets into its row of the
//                        (S, T) outputs; optionally the union tree of its chosen paths into its slice
//   m2m_compact_nodes    one block per source: its union-tree slice to its range
//   m2m_combine          one thread per cell: the one-arc legs, the chosen pair, the cost as a route reports it
//
// A search's records live in its own open-addressing hash table of H slots (a power of two; linear
// probing over the keys, an int32 array apart: key = state, -1 empty, the launcher fills the keys, one
// search per slot and launch; at most H / 2 records), its indexed binary heap in H keys and record indices
// (the record holds its heap slot: -1 never queued, -2 settled), exactly the CPU twin's ih_update /
// ih_pop, so equal keys are settled in the same order and labels, parents and options are the same. A
// search whose table or output slice fills stops with status 1 or 2; the launcher runs it again with more
// room.
//
// The numba emulation in many_to_many_gpu.py (_emu_*) is this file statement for statement: change both.
#include "gpuroute_common.cuh"

typedef long long i64;
#define I64INF 0x7fffffffffffffffLL
#define NO_REF (-0x7fffffffffffffffLL - 1LL)
#define ST_OK 0
#define ST_HASH_FULL 1
#define ST_OUT_FULL 2

// Record x of the hash tables (many_to_many_gpu._RECORD_WORDS: 4 int64 words, 32 bytes, one memory sector):
// distance, edge reference, then int32 halves: heap slot (-1 never queued, -2 settled), root option, previous
// record (local; -1 for a seed label), and the state's bucket entry (backward) or union-tree node (forward).
// `rec` is the int64 array, `r32` the same memory as int32.
#define R_D(x) rec[4 * (x)]
#define R_REF(x) rec[4 * (x) + 1]
#define R_SLOT(x) r32[8 * (x) + 4]
#define R_ROOT(x) r32[8 * (x) + 5]
#define R_PREV(x) r32[8 * (x) + 6]
#define R_AUX(x) r32[8 * (x) + 7]

// Record index (global) of state s in the table [base, base + H), or -1 - (the free slot where it goes).
__device__ __forceinline__ i64 m2m_find(const int* __restrict__ hkey, i64 base, i64 H, i64 s) {
    i64 i = (i64)(((unsigned long long)s * 2654435761ull) & (unsigned long long)(H - 1));
    while (true) {
        int k = hkey[base + i];
        if (k == (int)s) return base + i;
        if (k < 0) return -1 - (base + i);
        i = (i + 1) & (H - 1);
    }
}

// gpuroute.crp.search.ih_update: insert record r (local index) with key k or lower its key.
__device__ __forceinline__ i64 m2m_heap_update(i64* __restrict__ hk, int* __restrict__ hv, int* __restrict__ r32,
                                               i64 base, i64 size, i64 k, int r) {
    i64 i = R_SLOT(base + r);
    if (i < 0) {
        i = size;
        size += 1;
    }
    while (i > 0) {
        i64 p = (i - 1) >> 1;
        if (hk[base + p] <= k) break;
        hk[base + i] = hk[base + p];
        hv[base + i] = hv[base + p];
        R_SLOT(base + hv[base + i]) = (int)i;
        i = p;
    }
    hk[base + i] = k;
    hv[base + i] = r;
    R_SLOT(base + r) = (int)i;
    return size;
}

// gpuroute.crp.search.ih_pop: remove the minimum (read hk[base], hv[base] first), mark it settled.
__device__ __forceinline__ i64 m2m_heap_pop(i64* __restrict__ hk, int* __restrict__ hv, int* __restrict__ r32,
                                            i64 base, i64 size) {
    R_SLOT(base + hv[base]) = -2;
    size -= 1;
    if (size == 0) return 0;
    i64 k = hk[base + size];
    int v = hv[base + size];
    i64 i = 0;
    while (true) {
        i64 c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && hk[base + c + 1] < hk[base + c]) c += 1;
        if (hk[base + c] >= k) break;
        hk[base + i] = hk[base + c];
        hv[base + i] = hv[base + c];
        R_SLOT(base + hv[base + i]) = (int)i;
        i = c;
    }
    hk[base + i] = k;
    hv[base + i] = v;
    R_SLOT(base + v) = (int)i;
    return size;
}

// gpuroute.crp.search.state_level: the highest level p + 1 whose cell cells[a * L + p] is none of the
// query's cells keep[p * o + j]; 0 if none.
__device__ __forceinline__ int m2m_level(i64 a, const int* __restrict__ cells, int L, const int* __restrict__ keep,
                                         int o) {
    for (int p = L - 1; p >= 0; --p) {
        int c = cells[a * L + p];
        bool hit = false;
        for (int j = 0; j < o; ++j) {
            if (c == keep[p * o + j]) {
                hit = true;
                break;
            }
        }
        if (!hit) return p + 1;
    }
    return 0;
}

// Python's floor division of int64 (the CPU twin's //).
__device__ __forceinline__ i64 m2m_floordiv(i64 a, i64 b) {
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

extern "C" __global__ void m2m_backward(
    i64 n_items, const i64* __restrict__ items, i64 H, i64 cap, int L, int o, const int* __restrict__ keepT,
    const i64* __restrict__ t_st, const i64* __restrict__ t_lab, i64 scale, const i64* __restrict__ rfirst,
    const i64* __restrict__ rin, const i64* __restrict__ rturn, const i64* __restrict__ tcost,
    const int* __restrict__ tc, const int* __restrict__ exit_idx, const i64* __restrict__ cell_base,
    const i64* __restrict__ ent_first, const i64* __restrict__ ent_st, const i64* __restrict__ ex_first,
    const i64* __restrict__ cq_first, const i64* __restrict__ clique, int* __restrict__ hkey, i64* __restrict__ rec,
    i64* __restrict__ hk, int* __restrict__ hv, int* __restrict__ e_state,
    i64* __restrict__ e_label, int* __restrict__ e_parent, i64* __restrict__ e_ref, int* __restrict__ e_root,
    unsigned char* __restrict__ e_seed, i64* __restrict__ e_cnt, int* __restrict__ status) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_items) return;
    const i64 t = items[i];
    const int* keep = keepT + t * (i64)L * o;
    const i64 base = i * H;
    const i64 eb = i * cap;
    const i64 lim = H >> 1;
    int* r32 = reinterpret_cast<int*>(rec);
    i64 n = 0, used = 0, size = 0;
    int stat = ST_OK;
    for (int k = 0; k < o; ++k) {
        const i64 b = t_st[t * o + k];
        if (b < 0) continue;
        const i64 c = t_lab[t * o + k];
        if (n >= cap) {
            stat = ST_OUT_FULL;
            break;
        }
        e_state[eb + n] = (int)b;
        e_label[eb + n] = c;
        e_parent[eb + n] = -1;
        e_ref[eb + n] = NO_REF;
        e_root[eb + n] = k;
        e_seed[eb + n] = 1;
        i64 x = m2m_find(hkey, base, H, b);
        const i64 cur = x < 0 ? I64INF : R_D(x);
        if (c < cur) {
            if (x < 0) {
                if (used >= lim) {
                    stat = ST_HASH_FULL;
                    break;
                }
                x = -1 - x;
                hkey[x] = (int)b;
                R_SLOT(x) = -1;
                used += 1;
            }
            R_D(x) = c;
            R_ROOT(x) = k;
            R_PREV(x) = -1;
            R_REF(x) = NO_REF;
            R_AUX(x) = (int)n;
            size = m2m_heap_update(hk, hv, r32, base, size, c, (int)(x - base));
        }
        n += 1;
    }
    while (stat == ST_OK && size > 0) {
        const i64 d = hk[base];
        const int r = hv[base];
        const i64 x = base + r;
        size = m2m_heap_pop(hk, hv, r32, base, size);
        const i64 b = hkey[x];
        if (R_PREV(x) >= 0) {
            if (n >= cap) {
                stat = ST_OUT_FULL;
                break;
            }
            e_state[eb + n] = (int)b;
            e_label[eb + n] = d;
            e_parent[eb + n] = R_AUX(base + R_PREV(x));
            e_ref[eb + n] = R_REF(x);
            e_root[eb + n] = R_ROOT(x);
            e_seed[eb + n] = 0;
            R_AUX(x) = (int)n;
            n += 1;
        }
        const int root = R_ROOT(x);
        const int q = m2m_level(b, tc, L, keep, o);
        i64 g = 0, j = 0, nx = 0, lo, hi;
        if (q == 0) {
            lo = rfirst[b];
            hi = rfirst[b + 1];
        } else {
            const int p = q - 1;
            g = cell_base[p] + tc[b * L + p];
            j = exit_idx[b * L + p];
            if (j < 0) continue;
            nx = ex_first[g + 1] - ex_first[g];
            lo = 0;
            hi = ent_first[g + 1] - ent_first[g];
        }
        for (i64 k = lo; k < hi; ++k) {
            i64 c, a, ref;
            if (q == 0) {
                ref = rturn[k];
                c = tcost[ref];
                if (c < 0) continue;
                a = rin[k];
            } else {
                const i64 pos = cq_first[g] + k * nx + j;
                c = clique[pos];
                if (c >= I64INF) continue;
                a = ent_st[ent_first[g] + k];
                ref = -(1 + pos);
            }
            const i64 nd = d + c * scale;
            i64 y = m2m_find(hkey, base, H, a);
            const i64 cur = y < 0 ? I64INF : R_D(y);
            if (nd < cur) {
                if (y < 0) {
                    if (used >= lim) {
                        stat = ST_HASH_FULL;
                        break;
                    }
                    y = -1 - y;
                    hkey[y] = (int)a;
                    R_SLOT(y) = -1;
                    used += 1;
                }
                R_D(y) = nd;
                R_ROOT(y) = root;
                R_PREV(y) = r;
                R_REF(y) = ref;
                size = m2m_heap_update(hk, hv, r32, base, size, nd, (int)(y - base));
            }
        }
    }
    e_cnt[i] = n;
    status[i] = stat;
}

extern "C" __global__ void m2m_compact_entries(
    i64 n_items, const i64* __restrict__ items, i64 cap, const i64* __restrict__ off, const bool* __restrict__ ok,
    const int* __restrict__ e_state, const i64* __restrict__ e_label, const int* __restrict__ e_parent,
    const i64* __restrict__ e_ref, const int* __restrict__ e_root, const unsigned char* __restrict__ e_seed,
    i64* __restrict__ o_state, i64* __restrict__ o_label, i64* __restrict__ o_parent, i64* __restrict__ o_ref,
    i64* __restrict__ o_root, bool* __restrict__ o_seed, i64* __restrict__ o_tgt) {
    const i64 i = blockIdx.x;
    if (i >= n_items || !ok[i]) return;
    const i64 o0 = off[i];
    const i64 n = off[i + 1] - o0;
    const i64 eb = i * cap;
    for (i64 x = threadIdx.x; x < n; x += blockDim.x) {
        o_state[o0 + x] = e_state[eb + x];
        o_label[o0 + x] = e_label[eb + x];
        const i64 p = e_parent[eb + x];
        o_parent[o0 + x] = p >= 0 ? p + o0 : -1;
        o_ref[o0 + x] = e_ref[eb + x];
        o_root[o0 + x] = e_root[eb + x];
        o_seed[o0 + x] = e_seed[eb + x] != 0;
        o_tgt[o0 + x] = items[i];
    }
}

extern "C" __global__ void m2m_forward(
    i64 n_items, const i64* __restrict__ items, i64 H, i64 cap, int want_tree, int L, int o,
    const int* __restrict__ keepS, const i64* __restrict__ s_st, const i64* __restrict__ s_lab, i64 scale,
    const i64* __restrict__ tfirst, const i64* __restrict__ tout, const i64* __restrict__ tcost,
    const int* __restrict__ hc, const int* __restrict__ entry_idx, const i64* __restrict__ cell_base,
    const i64* __restrict__ ex_first, const i64* __restrict__ ex_st, const i64* __restrict__ cq_first,
    const i64* __restrict__ clique, const i64* __restrict__ b_first, const i64* __restrict__ b_tgt,
    const i64* __restrict__ b_lab, const i64* __restrict__ b_eid, const i64* __restrict__ z_first,
    const i64* __restrict__ z_tgt, const i64* __restrict__ z_lab, const i64* __restrict__ z_eid, i64 lowb, i64 n_t,
    int* __restrict__ hkey, i64* __restrict__ rec, i64* __restrict__ hk, int* __restrict__ hv,
    i64* __restrict__ o_best, i64* __restrict__ o_root, i64* __restrict__ o_eid,
    i64* __restrict__ o_xref, i64* __restrict__ o_node, int* __restrict__ n_state, int* __restrict__ n_parent,
    i64* __restrict__ n_ref, i64* __restrict__ n_cnt, int* __restrict__ status) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_items) return;
    const i64 s = items[i];
    const int* keep = keepS + s * (i64)L * o;
    const i64 base = i * H;
    const i64 nb = i * cap;
    const i64 row = s * n_t;
    const i64 lim = H >> 1;
    int* r32 = reinterpret_cast<int*>(rec);
    for (i64 t = 0; t < n_t; ++t) o_best[row + t] = I64INF;
    i64 used = 0, size = 0;
    int stat = ST_OK;
    for (int k = 0; k < o; ++k) {
        const i64 a = s_st[s * o + k];
        if (a < 0) continue;
        const i64 c = s_lab[s * o + k];
        i64 x = m2m_find(hkey, base, H, a);
        const i64 cur = x < 0 ? I64INF : R_D(x);
        if (c < cur) {
            if (x < 0) {
                if (used >= lim) {
                    stat = ST_HASH_FULL;
                    break;
                }
                x = -1 - x;
                hkey[x] = (int)a;
                R_SLOT(x) = -1;
                R_AUX(x) = -1;
                used += 1;
            }
            R_D(x) = c;
            R_ROOT(x) = k;
            R_PREV(x) = -1;
            R_REF(x) = NO_REF;
            size = m2m_heap_update(hk, hv, r32, base, size, c, (int)(x - base));
        }
    }
    i64 found = 0, worst = I64INF, pops = 0;
    while (stat == ST_OK && size > 0) {
        if (found == n_t) {
            if (worst == I64INF || (pops & 63) == 0) {
                worst = o_best[row];
                for (i64 t = 1; t < n_t; ++t)
                    if (o_best[row + t] > worst) worst = o_best[row + t];
            }
            if (hk[base] + lowb >= worst) break;
        }
        const i64 d = hk[base];
        const int r = hv[base];
        const i64 x = base + r;
        size = m2m_heap_pop(hk, hv, r32, base, size);
        pops += 1;
        const i64 v = hkey[x];
        const int root = R_ROOT(x);
        for (i64 e = b_first[v]; e < b_first[v + 1]; ++e) {
            const i64 t = b_tgt[e];
            const i64 c = d + b_lab[e];
            if (c < o_best[row + t]) {
                if (o_best[row + t] == I64INF) found += 1;
                o_best[row + t] = c;
                o_node[row + t] = r;
                o_xref[row + t] = NO_REF;
                o_eid[row + t] = b_eid[e];
                o_root[row + t] = root;
            }
        }
        if (R_PREV(x) >= 0) {  // a label that came by an edge: the target seeds here are reached too
            for (i64 e = z_first[v]; e < z_first[v + 1]; ++e) {
                const i64 t = z_tgt[e];
                const i64 c = d + z_lab[e];
                if (c < o_best[row + t]) {
                    if (o_best[row + t] == I64INF) found += 1;
                    o_best[row + t] = c;
                    o_node[row + t] = r;
                    o_xref[row + t] = NO_REF;
                    o_eid[row + t] = z_eid[e];
                    o_root[row + t] = root;
                }
            }
        }
        const int q = m2m_level(v, hc, L, keep, o);
        i64 qbase = 0, g = 0, lo, hi;
        if (q == 0) {
            lo = tfirst[v];
            hi = tfirst[v + 1];
        } else {
            const int p = q - 1;
            g = cell_base[p] + hc[v * L + p];
            const i64 i0 = entry_idx[v * L + p];
            if (i0 < 0) continue;
            const i64 nx = ex_first[g + 1] - ex_first[g];
            qbase = cq_first[g] + i0 * nx;
            lo = 0;
            hi = nx;
        }
        for (i64 k = lo; k < hi; ++k) {
            i64 c, y, ref;
            if (q == 0) {
                c = tcost[k];
                if (c < 0) continue;
                y = tout[k];
                ref = k;
            } else {
                c = clique[qbase + k];
                if (c >= I64INF) continue;
                y = ex_st[ex_first[g] + k];
                ref = -(1 + qbase + k);
            }
            const i64 nd = d + c * scale;
            if (y != v) {  // an edge into a target's option state: the target behind (or at) it
                for (i64 e = z_first[y]; e < z_first[y + 1]; ++e) {
                    const i64 t = z_tgt[e];
                    const i64 cc = nd + z_lab[e];
                    if (cc < o_best[row + t]) {
                        if (o_best[row + t] == I64INF) found += 1;
                        o_best[row + t] = cc;
                        o_node[row + t] = r;
                        o_xref[row + t] = ref;
                        o_eid[row + t] = z_eid[e];
                        o_root[row + t] = root;
                    }
                }
            }
            i64 z = m2m_find(hkey, base, H, y);
            const i64 cur = z < 0 ? I64INF : R_D(z);
            if (nd < cur) {
                if (z < 0) {
                    if (used >= lim) {
                        stat = ST_HASH_FULL;
                        break;
                    }
                    z = -1 - z;
                    hkey[z] = (int)y;
                    R_SLOT(z) = -1;
                    R_AUX(z) = -1;
                    used += 1;
                }
                R_D(z) = nd;
                R_ROOT(z) = root;
                R_PREV(z) = r;
                R_REF(z) = ref;
                size = m2m_heap_update(hk, hv, r32, base, size, nd, (int)(z - base));
            }
        }
    }
    i64 nn = 0;
    if (stat == ST_OK && want_tree) {
        for (i64 t = 0; t < n_t; ++t) {
            if (o_best[row + t] == I64INF) continue;
            i64 y = o_node[row + t];
            i64 prev = -1;
            while (true) {
                if (R_AUX(base + y) >= 0) {
                    if (prev >= 0) n_parent[nb + prev] = R_AUX(base + y);
                    break;
                }
                if (nn >= cap) {
                    stat = ST_OUT_FULL;
                    break;
                }
                n_state[nb + nn] = hkey[base + y];
                n_ref[nb + nn] = R_REF(base + y);
                n_parent[nb + nn] = -1;
                R_AUX(base + y) = (int)nn;
                if (prev >= 0) n_parent[nb + prev] = (int)nn;
                prev = nn;
                nn += 1;
                const i64 u = R_PREV(base + y);
                if (u < 0) break;
                y = u;
            }
            if (stat != ST_OK) break;
        }
    }
    if (stat == ST_OK) {
        for (i64 t = 0; t < n_t; ++t) {
            if (o_best[row + t] == I64INF) {
                o_root[row + t] = -1;
                o_eid[row + t] = -1;
                o_xref[row + t] = NO_REF;
                o_node[row + t] = -1;
            } else if (want_tree) {
                o_node[row + t] = R_AUX(base + o_node[row + t]);
            } else {
                o_node[row + t] = -1;
            }
        }
    }
    n_cnt[i] = nn;
    status[i] = stat;
}

extern "C" __global__ void m2m_compact_nodes(
    i64 n_items, const i64* __restrict__ items, i64 cap, const i64* __restrict__ off, const bool* __restrict__ ok,
    const int* __restrict__ n_state, const int* __restrict__ n_parent, const i64* __restrict__ n_ref,
    i64* __restrict__ o_state, i64* __restrict__ o_parent, i64* __restrict__ o_ref, i64* __restrict__ o_src) {
    const i64 i = blockIdx.x;
    if (i >= n_items || !ok[i]) return;
    const i64 o0 = off[i];
    const i64 n = off[i + 1] - o0;
    const i64 nb = i * cap;
    for (i64 x = threadIdx.x; x < n; x += blockDim.x) {
        o_state[o0 + x] = n_state[nb + x];
        o_parent[o0 + x] = n_parent[nb + x];
        o_ref[o0 + x] = n_ref[nb + x];
        o_src[o0 + x] = items[i];
    }
}

// The CPU twin's _combine per cell (s, t) = (cell / T, cell % T), every float operation rounded on its own
// (no fused multiply-add), in the CPU twin's order.
extern "C" __global__ void m2m_combine(
    i64 S, i64 T, int os, int ot, const i64* __restrict__ o_best, const i64* __restrict__ o_root,
    const i64* __restrict__ o_eid, const i64* __restrict__ e_root, const i64* __restrict__ sa,
    const double* __restrict__ sf, const i64* __restrict__ ta, const double* __restrict__ tf,
    const i64* __restrict__ s_lab, const i64* __restrict__ t_lab, i64 scale, const double* __restrict__ cost,
    double* __restrict__ out_cost, i64* __restrict__ so, i64* __restrict__ to, bool* __restrict__ same) {
    const i64 cell = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= S * T) return;
    const i64 s = cell / T;
    const i64 t = cell - s * T;
    i64 lab = o_best[cell];
    int dj = -1, dk = -1;
    for (int j = 0; j < os; ++j) {
        const i64 a = sa[s * os + j];
        if (a < 0) continue;
        const double fa = sf[s * os + j];
        for (int k = 0; k < ot; ++k) {
            if (ta[t * ot + k] != a) continue;
            const double fb = tf[t * ot + k];
            if (fa <= fb) {
                const i64 dl = (i64)rint(__dmul_rn(__dmul_rn((double)scale, __dsub_rn(fb, fa)), cost[a]));
                if (dl < lab || (dl == lab && (dk < 0 || k < dk || (k == dk && j < dj)))) {
                    lab = dl;
                    dj = j;
                    dk = k;
                }
            }
        }
    }
    same[cell] = dk >= 0;
    if (dk >= 0) {
        out_cost[cell] = __dmul_rn(__dsub_rn(tf[t * ot + dk], sf[s * os + dj]), cost[sa[s * os + dj]]);
        so[cell] = dj;
        to[cell] = dk;
    } else if (o_best[cell] < I64INF) {
        const i64 j = o_root[cell];
        const i64 k = e_root[o_eid[cell]];
        const i64 p = m2m_floordiv(o_best[cell] - s_lab[s * os + j] - t_lab[t * ot + k], scale);
        const double head = __dmul_rn(__dsub_rn(1.0, sf[s * os + j]), cost[sa[s * os + j]]);
        const double tail = __dmul_rn(__dsub_rn(1.0, tf[t * ot + k]), cost[ta[t * ot + k]]);
        out_cost[cell] = __dsub_rn(__dadd_rn(head, __ll2double_rn(p)), tail);
        so[cell] = j;
        to[cell] = k;
    } else {
        out_cost[cell] = __longlong_as_double(0x7ff0000000000000LL);  // +inf
        so[cell] = -1;
        to[cell] = -1;
    }
}

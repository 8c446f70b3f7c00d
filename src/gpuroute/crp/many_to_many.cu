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
// A search's steps are one device function each, used by both searches: m2m_relax (a label into the search's
// hash-table record), m2m_level_edges / m2m_level_edge (a settled state's edges at its query level), m2m_join (a
// forward label meeting bucket entries), m2m_put_entry (a bucket entry).
// The numba emulation in many_to_many_gpu.py (_emu_*, _relax; the steps shared with the CPU twin:
// many_to_many.level_edges, level_edge, join, put_entry) is this file statement for statement: change both.
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

// Heap slot i of the search at base holds key k and record r (local index); the record holds its slot.
__device__ __forceinline__ void m2m_heap_put(i64* __restrict__ hk, int* __restrict__ hv, int* __restrict__ r32,
                                             i64 base, i64 i, i64 k, int r) {
    hk[base + i] = k;
    hv[base + i] = r;
    R_SLOT(base + r) = (int)i;
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
        const i64 p = (i - 1) >> 1;
        if (hk[base + p] <= k) break;
        m2m_heap_put(hk, hv, r32, base, i, hk[base + p], hv[base + p]);
        i = p;
    }
    m2m_heap_put(hk, hv, r32, base, i, k, r);
    return size;
}

// gpuroute.crp.search.ih_pop: remove the minimum (read hk[base], hv[base] first), mark it settled.
__device__ __forceinline__ i64 m2m_heap_pop(i64* __restrict__ hk, int* __restrict__ hv, int* __restrict__ r32,
                                            i64 base, i64 size) {
    R_SLOT(base + hv[base]) = -2;
    size -= 1;
    if (size == 0) return 0;
    const i64 k = hk[base + size];
    const int v = hv[base + size];
    i64 i = 0;
    while (true) {
        i64 c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && hk[base + c + 1] < hk[base + c]) c += 1;
        if (hk[base + c] >= k) break;
        m2m_heap_put(hk, hv, r32, base, i, hk[base + c], hv[base + c]);
        i = c;
    }
    m2m_heap_put(hk, hv, r32, base, i, k, v);
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

// What m2m_relax returns instead of a record (many_to_many_gpu._NOT_LOWER, _TABLE_FULL).
#define RELAX_NOT_LOWER (-1LL)
#define RELAX_TABLE_FULL (-2LL)

// Label d for state s in the search's table [base, base + H) where it is lower than its label (a state without
// a record has none: a new record, never queued, aux -1; at most lim records, `used` of them taken), with its
// root option, previous record (local; -1 for a seed label) and edge reference; its heap key follows. Returns
// the record (global) whose label was lowered, RELAX_NOT_LOWER, or RELAX_TABLE_FULL where s needs a new record
// and the table is full. many_to_many_gpu._relax.
__device__ __forceinline__ i64 m2m_relax(int* __restrict__ hkey, i64* __restrict__ rec, i64* __restrict__ hk,
                                         int* __restrict__ hv, i64 base, i64 H, i64 lim, i64& used, i64& size, i64 s,
                                         i64 d, int root, int prev, i64 ref) {
    int* r32 = reinterpret_cast<int*>(rec);
    i64 x = m2m_find(hkey, base, H, s);
    const i64 cur = x < 0 ? I64INF : R_D(x);
    if (d >= cur) return RELAX_NOT_LOWER;
    if (x < 0) {
        if (used >= lim) return RELAX_TABLE_FULL;
        x = -1 - x;
        hkey[x] = (int)s;
        R_SLOT(x) = -1;
        R_AUX(x) = -1;
        used += 1;
    }
    R_D(x) = d;
    R_ROOT(x) = root;
    R_PREV(x) = prev;
    R_REF(x) = ref;
    size = m2m_heap_update(hk, hv, r32, base, size, d, (int)(x - base));
    return x;
}

// The edges a search relaxes from settled state v (forward: out of it, backward: into it) at its query level q
// (m2m_level over cells: the head cells forward, the tail cells backward), the range lo <= k < hi that
// m2m_level_edge reads: level 0, the turns at CSR positions first[v] .. first[v + 1]; level q > 0, the clique of
// v's cell at that level, forward the row of its entry idx (k over the cell's exits: clique position start + k,
// far state ex_st[far + k]; far_first = ex_first), backward the column of its exit (k over the entries: position
// start + k * stride, stride the cell's exit count, far state ent_st[far + k]; far_first = ent_first); empty
// where v is none of its cell's entries (exits). many_to_many.level_edges.
struct m2m_edges {
    int q;
    i64 lo, hi, start, stride, far;
};

__device__ __forceinline__ m2m_edges m2m_level_edges(i64 v, const int* __restrict__ cells, int L,
                                                     const int* __restrict__ keep, int o, const i64* __restrict__ first,
                                                     const int* __restrict__ idx, const i64* __restrict__ cell_base,
                                                     const i64* __restrict__ cq_first, const i64* __restrict__ ex_first,
                                                     const i64* __restrict__ far_first, bool backward) {
    m2m_edges e = {m2m_level(v, cells, L, keep, o), 0, 0, 0, 0, 0};
    if (e.q == 0) {
        e.lo = first[v];
        e.hi = first[v + 1];
        return e;
    }
    const int p = e.q - 1;
    const i64 g = cell_base[p] + cells[v * L + p];
    const i64 i = idx[v * L + p];
    if (i < 0) return e;
    const i64 nx = ex_first[g + 1] - ex_first[g];
    e.far = far_first[g];
    if (backward) {
        e.hi = far_first[g + 1] - far_first[g];
        e.start = cq_first[g] + i;
        e.stride = nx;
    } else {
        e.hi = nx;
        e.start = cq_first[g] + i * nx;
        e.stride = 1;
    }
    return e;
}

// Edge k of m2m_level_edges' range: its cost (unscaled; negative where it is closed: a forbidden turn, no path
// across the cell), its far state x and edge reference ref (a turn id, or -(1 + clique position)). Level 0: the
// turn is turn[k] backward (rturn), k itself forward (turn unused), x = head0[k] (rin / tout); else
// x = far_st[far + k] (ent_st / ex_st). many_to_many.level_edge.
__device__ __forceinline__ i64 m2m_level_edge(const m2m_edges& e, i64 k, const i64* __restrict__ turn,
                                              const i64* __restrict__ tcost, const i64* __restrict__ head0,
                                              const i64* __restrict__ clique, const i64* __restrict__ far_st,
                                              bool backward, i64& x, i64& ref) {
    if (e.q == 0) {
        ref = backward ? turn[k] : k;
        const i64 c = tcost[ref];
        if (c < 0) return c;
        x = head0[k];
        return c;
    }
    const i64 pos = e.start + k * e.stride;
    const i64 c = clique[pos];
    if (c >= I64INF) return -1;
    x = far_st[e.far + k];
    ref = -(1 + pos);
    return c;
}

// Bucket entry n of a backward search: its state, backward label, parent entry (-1 for a seed entry), edge
// reference (NO_REF for a seed entry), root option and whether it is a seed entry. many_to_many.put_entry.
__device__ __forceinline__ void m2m_put_entry(int* __restrict__ e_state, i64* __restrict__ e_label,
                                              int* __restrict__ e_parent, i64* __restrict__ e_ref,
                                              int* __restrict__ e_root, unsigned char* __restrict__ e_seed, i64 n,
                                              i64 state, i64 label, int parent, i64 ref, int root, int seed) {
    e_state[n] = (int)state;
    e_label[n] = label;
    e_parent[n] = parent;
    e_ref[n] = ref;
    e_root[n] = root;
    e_seed[n] = (unsigned char)seed;
}

// A forward label d meets the bucket entries [lo, hi) (target tgt, backward label lab, entry id eid): every
// target t whose cell row + t it improves gets the label d + lab, the meeting record at, the extra edge ref
// (NO_REF: a settle-time meeting), the entry and the source option root. Returns found plus the cells reached
// for the first time. many_to_many.join.
__device__ __forceinline__ i64 m2m_join(i64 d, i64 lo, i64 hi, const i64* __restrict__ tgt,
                                        const i64* __restrict__ lab, const i64* __restrict__ eid,
                                        i64* __restrict__ best, i64* __restrict__ meet, i64* __restrict__ xref,
                                        i64* __restrict__ ent, i64* __restrict__ froot, i64 row, i64 at, i64 ref,
                                        int root, i64 found) {
    for (i64 i = lo; i < hi; ++i) {
        const i64 t = row + tgt[i];
        const i64 c = d + lab[i];
        if (c < best[t]) {
            if (best[t] == I64INF) found += 1;
            best[t] = c;
            meet[t] = at;
            xref[t] = ref;
            ent[t] = eid[i];
            froot[t] = root;
        }
    }
    return found;
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
        m2m_put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, eb + n, b, c, -1, NO_REF, k, 1);
        const i64 x = m2m_relax(hkey, rec, hk, hv, base, H, lim, used, size, b, c, k, -1, NO_REF);
        if (x == RELAX_TABLE_FULL) {
            stat = ST_HASH_FULL;
            break;
        }
        if (x >= 0) R_AUX(x) = (int)n;
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
            m2m_put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, eb + n, b, d, R_AUX(base + R_PREV(x)),
                          R_REF(x), R_ROOT(x), 0);
            R_AUX(x) = (int)n;
            n += 1;
        }
        const int root = R_ROOT(x);
        const m2m_edges es = m2m_level_edges(b, tc, L, keep, o, rfirst, exit_idx, cell_base, cq_first, ex_first,
                                             ent_first, true);
        for (i64 k = es.lo; k < es.hi; ++k) {
            i64 a, ref;
            const i64 c = m2m_level_edge(es, k, rturn, tcost, rin, clique, ent_st, true, a, ref);
            if (c < 0) continue;
            if (m2m_relax(hkey, rec, hk, hv, base, H, lim, used, size, a, d + c * scale, root, r, ref) ==
                RELAX_TABLE_FULL) {
                stat = ST_HASH_FULL;
                break;
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
        if (m2m_relax(hkey, rec, hk, hv, base, H, lim, used, size, a, s_lab[s * o + k], k, -1, NO_REF) ==
            RELAX_TABLE_FULL) {
            stat = ST_HASH_FULL;
            break;
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
        found = m2m_join(d, b_first[v], b_first[v + 1], b_tgt, b_lab, b_eid, o_best, o_node, o_xref, o_eid, o_root,
                         row, r, NO_REF, root, found);
        if (R_PREV(x) >= 0)  // a label that came by an edge: the target seeds here are reached too
            found = m2m_join(d, z_first[v], z_first[v + 1], z_tgt, z_lab, z_eid, o_best, o_node, o_xref, o_eid,
                             o_root, row, r, NO_REF, root, found);
        const m2m_edges es = m2m_level_edges(v, hc, L, keep, o, tfirst, entry_idx, cell_base, cq_first, ex_first,
                                             ex_first, false);
        for (i64 k = es.lo; k < es.hi; ++k) {
            i64 y, ref;
            const i64 c = m2m_level_edge(es, k, nullptr, tcost, tout, clique, ex_st, false, y, ref);
            if (c < 0) continue;
            const i64 nd = d + c * scale;
            if (y != v)  // an edge into a target's option state: the target behind (or at) it
                found = m2m_join(nd, z_first[y], z_first[y + 1], z_tgt, z_lab, z_eid, o_best, o_node, o_xref, o_eid,
                                 o_root, row, r, ref, root, found);
            if (m2m_relax(hkey, rec, hk, hv, base, H, lim, used, size, y, nd, root, r, ref) == RELAX_TABLE_FULL) {
                stat = ST_HASH_FULL;
                break;
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

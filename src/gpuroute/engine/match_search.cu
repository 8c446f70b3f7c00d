// The GPU twin of /match's bounded transition searches (gpuroute.engine.match_gpu; the CPU twin
// gpuroute.engine.match_hmm._search / transitions, whose docstrings define the search): one GPU thread per
// transition job (a source candidate s and its pair's target range t0:t1, bound, lmax), running the CPU
// twin's sequential loop -- the same lazy binary heap (gpuroute.graph.heap.heap_push / heap_pop: the same
// sift order, so equal keys are settled in the same order), the same float64 operations each rounded on its
// own (__dmul_rn / __dadd_rn / __dsub_rn: no fused multiply-add) -- and writing the job's row of the same
// `out` (the route length, m, of the weight-optimal route to each target candidate; inf where none within
// the bound and lmax), bit for bit.
//
//   match_search   one thread per job (items[i]: the job's index)
//
// Per-thread scratch: the search's records live in its own open-addressing hash table of H slots (a power of
// two; linear probing over an int32 key array, key = arc, -1 empty, filled by the launcher: one search per
// slot and launch; at most H / 2 records), each record the arc's label (metric units), its route length (m)
// and the last target option row on the arc (-1: none; the CPU twin's tmark linked list is walked by
// scanning the target rows downwards for the same arc: its order). The heap holds (label, record) pairs in
// H slots (the CPU's holds (label, arc): the heap's comparisons read only the keys, so its shape and pops are
// the same), slot j of the launch's search t at j * n + t (interleaved: a warp's reads of the top slots, the
// root at every pop, are one transaction). The records of the target options' arcs are made first. A search whose table or heap fills
// stops with status 1 or 2; the launcher runs it again with four times the room, and a search that cannot
// fit on the CPU twin.
//
// The numba emulation in match_gpu.py (_emu_search) is this file statement for statement: change both.
#include "gpuroute_common.cuh"

typedef long long i64;
#define MS_OK 0
#define MS_HASH_FULL 1
#define MS_HEAP_FULL 2
#define MS_INF __longlong_as_double(0x7ff0000000000000LL)

// Record (global) of arc a in the table [base, base + H), or -1 - (the free slot where it goes).
__device__ __forceinline__ i64 ms_find(const int* __restrict__ hkey, i64 base, i64 H, i64 a) {
    i64 i = (i64)(((unsigned long long)a * 2654435761ull) & (unsigned long long)(H - 1));
    while (true) {
        int k = hkey[base + i];
        if (k == (int)a) return base + i;
        if (k < 0) return -1 - (base + i);
        i = (i + 1) & (H - 1);
    }
}

// The next target option row below r (down to r0) on arc a, or -1 (the CPU twin's tnext list).
__device__ __forceinline__ i64 ms_next(const int* __restrict__ oarc, i64 r0, i64 r, i64 a) {
    for (i64 q = r - 1; q >= r0; --q) {
        if (oarc[q] == (int)a) return q;
    }
    return -1;
}

// gpuroute.graph.heap.heap_push on the search's heap: slot j of search t at [j * n + t] (the searches of a launch
// interleaved, so a warp's reads of the top slots are one transaction).
__device__ __forceinline__ i64 ms_push(double* __restrict__ hk, int* __restrict__ hv, i64 t, i64 n, i64 size,
                                       double key, int item) {
    i64 i = size;
    while (i > 0) {
        const i64 p = (i - 1) >> 1;
        const double kp = hk[p * n + t];
        if (kp <= key) break;
        hk[i * n + t] = kp;
        hv[i * n + t] = hv[p * n + t];
        i = p;
    }
    hk[i * n + t] = key;
    hv[i * n + t] = item;
    return size + 1;
}

// gpuroute.graph.heap.heap_pop (size > 0; the caller read slot 0 first).
__device__ __forceinline__ i64 ms_pop(double* __restrict__ hk, int* __restrict__ hv, i64 t, i64 n, i64 size) {
    size -= 1;
    if (size > 0) {
        const double k = hk[size * n + t];
        const int x = hv[size * n + t];
        i64 i = 0;
        while (true) {
            i64 c = 2 * i + 1;
            if (c >= size) break;
            double kc = hk[c * n + t];
            if (c + 1 < size) {
                const double k1 = hk[(c + 1) * n + t];
                if (k1 < kc) {
                    kc = k1;
                    c += 1;
                }
            }
            if (kc >= k) break;
            hk[i * n + t] = kc;
            hv[i * n + t] = hv[c * n + t];
            i = c;
        }
        hk[i * n + t] = k;
        hv[i * n + t] = x;
    }
    return size;
}

// A new record for arc a at the free slot -1 - x: label inf, length 0, no target row.
__device__ __forceinline__ i64 ms_insert(int* __restrict__ hkey, double* __restrict__ rec, int* __restrict__ rtm, i64 x,
                                         i64 a) {
    x = -1 - x;
    hkey[x] = (int)a;
    rec[2 * x] = MS_INF;
    rec[2 * x + 1] = 0.0;
    rtm[x] = -1;
    return x;
}

extern "C" __global__ void match_search(
    i64 n, const i64* __restrict__ items, i64 H,
    const i64* __restrict__ job_s, const i64* __restrict__ job_pair, const i64* __restrict__ pair_t0,
    const i64* __restrict__ pair_t1, const double* __restrict__ pair_bound, const double* __restrict__ pair_lmax,
    const i64* __restrict__ pair_off, const i64* __restrict__ pair_s0,
    const i64* __restrict__ ostart, const int* __restrict__ oarc, const double* __restrict__ ofrac,
    const int* __restrict__ ocand,
    const i64* __restrict__ first, const int* __restrict__ out_arc, const double* __restrict__ tcost,
    const double* __restrict__ cost, const double* __restrict__ length, double minpen,
    int* __restrict__ hkey, double* __restrict__ rec, int* __restrict__ rtm, double* __restrict__ hk,
    int* __restrict__ hv, double* __restrict__ best, double* __restrict__ out, i64* __restrict__ work,
    int* __restrict__ status) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const i64 k = items[i];
    const i64 base = i * H;
    const i64 lim = H >> 1;
    const i64 p = job_pair[k];
    const i64 s = job_s[k];
    const i64 t0 = pair_t0[p];
    const i64 t1 = pair_t1[p];
    const i64 nt = t1 - t0;
    const double bound = pair_bound[p];
    const double lmax = pair_lmax[p];
    const i64 ob = pair_off[p] + (s - pair_s0[p]) * nt;
    double* bst = best + ob;
    double* blen = out + ob;
    for (i64 j = 0; j < nt; ++j) {
        bst[j] = MS_INF;
        blen[j] = MS_INF;
    }
    i64 used = 0;
    int stat = MS_OK;
    i64 pops = 0, turns = 0;
    // the target options by arc: the record of each target arc holds its last row
    const i64 r0 = ostart[t0];
    const i64 r1 = ostart[t1];
    for (i64 r = r0; r < r1; ++r) {
        const i64 a = oarc[r];
        i64 x = ms_find(hkey, base, H, a);
        if (x < 0) {
            if (used >= lim) {
                stat = MS_HASH_FULL;
                break;
            }
            x = ms_insert(hkey, rec, rtm, x, a);
            used += 1;
        }
        rtm[x] = (int)r;
    }
    // the same-arc leg: a target ahead on a source option's arc
    if (stat == MS_OK) {
        for (i64 q = ostart[s]; q < ostart[s + 1]; ++q) {
            const i64 a = oarc[q];
            const double fa = ofrac[q];
            const i64 x = ms_find(hkey, base, H, a);
            i64 r = x >= 0 ? rtm[x] : -1;
            while (r >= 0) {
                if (ofrac[r] >= fa) {
                    const i64 j = ocand[r] - t0;
                    const double v = __dmul_rn(__dsub_rn(ofrac[r], fa), cost[a]);
                    if (v < bst[j]) {
                        bst[j] = v;
                        blen[j] = __dmul_rn(__dsub_rn(ofrac[r], fa), length[a]);
                    }
                }
                r = ms_next(oarc, r0, r, a);
            }
        }
    }
    i64 size = 0;
    if (stat == MS_OK) {
        for (i64 q = ostart[s]; q < ostart[s + 1]; ++q) {
            const i64 a = oarc[q];
            const double d = __dmul_rn(__dsub_rn(1.0, ofrac[q]), cost[a]);
            i64 x = ms_find(hkey, base, H, a);
            const double cur = x >= 0 ? rec[2 * x] : MS_INF;
            if (d < cur) {
                if (x < 0) {
                    if (used >= lim) {
                        stat = MS_HASH_FULL;
                        break;
                    }
                    x = ms_insert(hkey, rec, rtm, x, a);
                    used += 1;
                }
                rec[2 * x] = d;
                rec[2 * x + 1] = __dmul_rn(__dsub_rn(1.0, ofrac[q]), length[a]);
                if (size >= H) {
                    stat = MS_HEAP_FULL;
                    break;
                }
                size = ms_push(hk, hv, i, n, size, d, (int)(x - base));
            }
        }
    }
    double worst = 0.0;
    bool dirty = true;  // worst (the largest best) is recomputed only after a best changed
    while (stat == MS_OK && size > 0) {
        const double d = hk[i];
        const i64 x = base + hv[i];
        size = ms_pop(hk, hv, i, n, size);
        pops += 1;
        if (d > rec[2 * x]) continue;
        if (d > bound) break;
        if (dirty) {
            worst = 0.0;
            for (i64 j = 0; j < nt; ++j) {
                if (bst[j] > worst) worst = bst[j];
            }
            dirty = false;
        }
        if (__dadd_rn(d, minpen) >= worst) break;  // every target final
        if (rec[2 * x + 1] > lmax) continue;  // every route through x is longer than any transition can use
        const i64 ax = hkey[x];
        for (i64 e = first[ax]; e < first[ax + 1]; ++e) {
            const double tc = tcost[e];
            if (tc < 0) continue;
            turns += 1;
            const i64 y = out_arc[e];
            const double nd = __dadd_rn(d, tc);
            i64 z = ms_find(hkey, base, H, y);
            i64 r = z >= 0 ? rtm[z] : -1;
            while (r >= 0) {  // the relaxation-time join: a target on the arc turned into
                const i64 j = ocand[r] - t0;
                const double v = __dadd_rn(__dsub_rn(nd, cost[y]), __dmul_rn(ofrac[r], cost[y]));
                if (v < bst[j]) {
                    bst[j] = v;
                    blen[j] = __dadd_rn(rec[2 * x + 1], __dmul_rn(ofrac[r], length[y]));
                    dirty = true;
                }
                r = ms_next(oarc, r0, r, y);
            }
            const double cur = z >= 0 ? rec[2 * z] : MS_INF;
            if (nd < cur) {
                if (z < 0) {
                    if (used >= lim) {
                        stat = MS_HASH_FULL;
                        break;
                    }
                    z = ms_insert(hkey, rec, rtm, z, y);
                    used += 1;
                }
                rec[2 * z] = nd;
                rec[2 * z + 1] = __dadd_rn(rec[2 * x + 1], length[y]);
                if (size >= H) {
                    stat = MS_HEAP_FULL;
                    break;
                }
                size = ms_push(hk, hv, i, n, size, nd, (int)(z - base));
            }
        }
    }
    for (i64 j = 0; j < nt; ++j) {
        if (!(bst[j] <= bound && blen[j] <= lmax)) blen[j] = MS_INF;
    }
    work[2 * i] = pops;
    work[2 * i + 1] = turns;
    status[i] = stat;
}

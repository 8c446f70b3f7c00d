// vrp.cu: the GPU twin of gpuroute/tours/cvrp.py (CVRP local search on an asymmetric cost matrix):
// the whole neighbourhood -- relocate, swap and 2-opt* between routes under capacity, relocate, swap,
// 2-opt and Or-opt (2-3 customers, both orientations) within a route -- evaluated in parallel and reduced
// to the best feasible move, which is applied on the device; ruin-and-recreate chains, a block each.
// Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete optimization. Part I" (EURO J. Transp.
// Logist. 2013), the VRP part: evaluate every move in parallel, reduce, apply, repeat.
//
// State of a solution (cvrp.py's module docstring; int32 / float64 here):
//   E     int32 R x W   route r: depot, E[r, 1..lens[r]] customers, depot; routes 0..nr-2 non-empty,
//                       route nr-1 empty (so a move can open a route)
//   lens  int32 R, nr int32 (one word)
//   load  float64 R; fwd, bwd, dcum float64 R x W: prefix sums over each extended route, filled by
//         sol_refresh left to right exactly as cvrp.refresh (one thread a route), so bitwise the CPU's
//   cr, ca  int32 N: route and position of the g-th customer in route order
//   xr, xa  int32 N + R: route and position a (0..lens[r]) of the e-th extended position
//   off   int32 R + 1 (customers before each route), scr int32 2W (scratch of a move)
//
// Work items of one evaluation (cvrp.vrp_items; nr routes, N customers), each looping its last index
// exactly as cvrp._row does, with the CPU's operations in its order (no products, so no FMA): 
//   A  g * nr + r2, g < N           relocate (b ascending) then swap (b ascending) of customer g into r2
//   B  N nr + e * nr + r2, e < N+nr  2-opt* of r1 = xr[e] cut after a = xa[e] with r2 > r1, b ascending
//   C  (2N + nr) nr ... + e          2-opt within r1 from a, b ascending
//   D  ... + 2 g + L - 2             Or-opt of the L customers from position ca[g], k ascending, kept then
//                                    reversed
// The reduction is on the key (delta, r1, rank), rank = cvrp.vrp_move_rank: the CPU keeps the first
// move found in its row r1 (strict <) and the lowest row among equal rows, and the rank numbers each
// row's moves in the CPU's order, so the smallest key is the CPU's best_vrp_move.
//
// Kernels:
//   vrp_state   1 block: refresh the state of one solution, its cost, the device-clock stop time
//   vrp_eval    many blocks: grid-stride over the items, each block writes its best key
//   vrp_finish  1 block: reduce the block keys, write the best move, apply it when asked (and improving,
//               and under max_moves, and before the stop time) and refresh; else flags[F_DONE]. A CUDA
//               graph of (vrp_eval, vrp_finish) x K is replayed until F_DONE.
//   vrp_set_stop, vrp_ils   1 block per chain: `iters` steps of ruin & recreate (host-drawn lists) + the
//               descent (the same items by the block) + accept if not worse, until a device-clock time
#include "gpuroute_common.cuh"

enum { VM_RELOCATE = 0, VM_SWAP = 1, VM_TWO_OPT_STAR = 2, VM_TWO_OPT = 3, VM_OR_OPT = 4, VM_OR_OPT_REV = 5 };
#define VRP_FULL 0xffffffffu
#define VRP_NONE 0x7fffffff
#define VRP_NONE64 0x7fffffffffffffffLL

__device__ __forceinline__ double vrp_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// ------------------------------------------------------------------------------------------- keys
__device__ __forceinline__ bool vkey_less(double d, int r, long long k, double bd, int br, long long bk) {
    return d < bd || (d == bd && (r < br || (r == br && k < bk)));
}

__device__ __forceinline__ void vtake(double d, int r, long long k, double& bd, int& br, long long& bk) {
    if (vkey_less(d, r, k, bd, br, bk)) { bd = d; br = r; bk = k; }
}

__device__ __forceinline__ void vwarp_argmin(double& d, int& r, long long& k) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const double od = __shfl_down_sync(VRP_FULL, d, off);
        const int orr = __shfl_down_sync(VRP_FULL, r, off);
        const long long ok = __shfl_down_sync(VRP_FULL, k, off);
        vtake(od, orr, ok, d, r, k);
    }
}

// The block's smallest key, returned to every thread (blockDim.x a multiple of 32; all threads call it).
__device__ void vblock_argmin(double& d, int& r, long long& k) {
    __shared__ double sd[32];
    __shared__ int sr[32];
    __shared__ long long sk[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    vwarp_argmin(d, r, k);
    __syncthreads();
    if (lane == 0) { sd[w] = d; sr[w] = r; sk[w] = k; }
    __syncthreads();
    if (w == 0) {
        d = lane < nw ? sd[lane] : vrp_inf();
        r = lane < nw ? sr[lane] : VRP_NONE;
        k = lane < nw ? sk[lane] : VRP_NONE64;
        vwarp_argmin(d, r, k);
        if (lane == 0) { sd[0] = d; sr[0] = r; sk[0] = k; }
    }
    __syncthreads();
    d = sd[0]; r = sr[0]; k = sk[0];
}

// ------------------------------------------------------------------------------------------- a solution
struct Sol {
    int* E; int* lens; int* nr; double* load; double* fwd; double* bwd; double* dcum;
    int* cr; int* ca; int* xr; int* xa; int* off; int* scr;
};

// Solution b of arrays holding B solutions back to back.
__device__ __forceinline__ Sol sol_at(int b, int R, int W, int N, int* E, int* L, int* NR, double* LOAD, double* FWD,
                                      double* BWD, double* DCUM, int* CR, int* CA, int* XR, int* XA, int* OFF,
                                      int* SCR) {
    const size_t rw = (size_t)R * W;
    Sol s;
    s.E = E + b * rw; s.lens = L + (size_t)b * R; s.nr = NR + b; s.load = LOAD + (size_t)b * R;
    s.fwd = FWD + b * rw; s.bwd = BWD + b * rw; s.dcum = DCUM + b * rw;
    s.cr = CR + (size_t)b * N; s.ca = CA + (size_t)b * N; s.xr = XR + (size_t)b * (N + R);
    s.xa = XA + (size_t)b * (N + R); s.off = OFF + (size_t)b * (R + 1); s.scr = SCR + (size_t)b * 2 * W;
    return s;
}

// cvrp.refresh (a thread a route, left to right, so bitwise the CPU's sums) and the item maps. Whole
// block; the solution's E, lens, nr written before a barrier.
__device__ void sol_refresh(const Sol& s, int W, int n, const double* c, const double* dem) {
    const size_t N_ = (size_t)n;
    const int nr = s.nr[0];
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        const int m = s.lens[r];
        const int* e = s.E + (size_t)r * W;
        double* f = s.fwd + (size_t)r * W;
        double* bw = s.bwd + (size_t)r * W;
        double* dc = s.dcum + (size_t)r * W;
        f[0] = 0.0; bw[0] = 0.0; dc[0] = 0.0;
        for (int t = 0; t <= m; ++t) {
            f[t + 1] = f[t] + c[e[t] * N_ + e[t + 1]];
            bw[t + 1] = bw[t] + c[e[t + 1] * N_ + e[t]];
            if (t >= 1) dc[t] = dc[t - 1] + dem[e[t]];
        }
        s.load[r] = m > 0 ? dc[m] : 0.0;
    }
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int r = 0; r < nr; ++r) { s.off[r] = acc; acc += s.lens[r]; }
        s.off[nr] = acc;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        const int m = s.lens[r], o = s.off[r];
        for (int a = 1; a <= m; ++a) { s.cr[o + a - 1] = r; s.ca[o + a - 1] = a; }
        for (int a = 0; a <= m; ++a) { s.xr[o + r + a] = r; s.xa[o + r + a] = a; }
    }
    __syncthreads();
}

// cvrp.route_costs_total, summed in route order (one thread).
__device__ double sol_cost(const Sol& s, int W) {
    double t = 0.0;
    const int nr = s.nr[0];
    for (int r = 0; r < nr; ++r) t += s.fwd[(size_t)r * W + s.lens[r] + 1];
    return t;
}

// ------------------------------------------------------------------------------------------- ranks
__device__ __forceinline__ long long rank_a(int nr, int W, int a, int r2, int kind, int b) {
    return (((long long)a * nr + r2) * 2 + kind) * W + b;
}
__device__ __forceinline__ long long base_b(int nr, int W) { return 2LL * nr * W * W; }
__device__ __forceinline__ long long base_c(int nr, int W) { return base_b(nr, W) + (long long)nr * W * W; }
__device__ __forceinline__ long long base_d(int nr, int W) { return base_c(nr, W) + (long long)W * W; }

// cvrp.vrp_move_from_rank: the move (t, a, r2, b, k) of rank rk in route r1.
__device__ void decode_vrp(int nr, int W, int r1, long long rk, int& t, int& a, int& r2, int& b, int& k) {
    k = -1;
    if (rk < base_b(nr, W)) {
        b = (int)(rk % W);
        long long q = rk / W;
        const int kind = (int)(q % 2);
        q /= 2;
        r2 = (int)(q % nr);
        a = (int)(q / nr);
        t = kind ? VM_SWAP : VM_RELOCATE;
        return;
    }
    if (rk < base_c(nr, W)) {
        const long long q0 = rk - base_b(nr, W);
        b = (int)(q0 % W);
        const long long q = q0 / W;
        a = (int)(q % W);
        r2 = (int)(q / W);
        t = VM_TWO_OPT_STAR;
        return;
    }
    if (rk < base_d(nr, W)) {
        const long long q = rk - base_c(nr, W);
        a = (int)(q / W);
        b = (int)(q % W);
        r2 = r1;
        t = VM_TWO_OPT;
        return;
    }
    long long q = rk - base_d(nr, W);
    const int rev = (int)(q % 2);
    q /= 2;
    k = (int)(q % W);
    q /= W;
    a = (int)(q % W);
    const int L2 = (int)(q / W);
    b = a + L2 + 1;
    r2 = r1;
    t = rev ? VM_OR_OPT_REV : VM_OR_OPT;
}

// Items of the evaluation of a solution of N customers in nr routes.
__device__ __forceinline__ long long vrp_items(int N, int nr) {
    return (long long)N * nr + (long long)(N + nr) * nr + (N + nr) + 2LL * N;
}

#define CC(u, v) c[(size_t)(u) * n + (v)]
#define EE(r, t) E[(size_t)(r) * W + (t)]

// Work item `it` (table above): fold each of its moves into (bd, br, bk). cvrp._row, operation for operation.
__device__ void eval_item(long long it, int n, int N, int W, const double* __restrict__ c,
                          const double* __restrict__ dem, double cap, const Sol& s, int nr, double& bd, int& br,
                          long long& bk) {
    const int* E = s.E;
    const int* lens = s.lens;
    const double* load = s.load;
    const long long nA = (long long)N * nr;
    if (it < nA) {  // A: relocate and swap
        const int g = (int)(it / nr), r2 = (int)(it % nr);
        const int r1 = s.cr[g], a = s.ca[g];
        const int m1 = lens[r1], m2 = lens[r2];
        const int x = EE(r1, a), p = EE(r1, a - 1), q = EE(r1, a + 1);
        const double dx = dem[x];
        const double rem = (CC(p, q) - CC(p, x)) - CC(x, q);
        if (r2 != r1) {
            if (load[r2] + dx <= cap && !(m2 == 0 && m1 == 1)) {
                for (int b = 0; b <= m2; ++b) {
                    const int u = EE(r2, b), v = EE(r2, b + 1);
                    const double d = ((rem + CC(u, x)) + CC(x, v)) - CC(u, v);
                    vtake(d, r1, rank_a(nr, W, a, r2, 0, b), bd, br, bk);
                }
            }
            if (r2 > r1) {
                for (int b = 1; b <= m2; ++b) {
                    const int y = EE(r2, b);
                    const double dy = dem[y];
                    if ((load[r1] - dx) + dy > cap || (load[r2] - dy) + dx > cap) continue;
                    const int u = EE(r2, b - 1), v = EE(r2, b + 1);
                    const double d = ((((((CC(p, y) + CC(y, q)) - CC(p, x)) - CC(x, q)) + CC(u, x)) + CC(x, v))
                                      - CC(u, y)) - CC(y, v);
                    vtake(d, r1, rank_a(nr, W, a, r2, 1, b), bd, br, bk);
                }
            }
        } else {
            for (int b = 0; b <= m1; ++b) {
                if (b == a || b == a - 1) continue;
                const int u = EE(r1, b), v = EE(r1, b + 1);
                const double d = ((rem + CC(u, x)) + CC(x, v)) - CC(u, v);
                vtake(d, r1, rank_a(nr, W, a, r1, 0, b), bd, br, bk);
            }
            for (int b = a + 1; b <= m1; ++b) {
                const int y = EE(r1, b), v = EE(r1, b + 1);
                double d;
                if (b == a + 1) {
                    d = ((((CC(p, y) + CC(y, x)) + CC(x, v)) - CC(p, x)) - CC(x, y)) - CC(y, v);
                } else {
                    const int u = EE(r1, b - 1);
                    d = ((((((CC(p, y) + CC(y, q)) - CC(p, x)) - CC(x, q)) + CC(u, x)) + CC(x, v)) - CC(u, y))
                        - CC(y, v);
                }
                vtake(d, r1, rank_a(nr, W, a, r1, 1, b), bd, br, bk);
            }
        }
        return;
    }
    it -= nA;
    const long long nB = (long long)(N + nr) * nr;
    if (it < nB) {  // B: 2-opt* with a later route
        const int e = (int)(it / nr), r2 = (int)(it % nr);
        const int r1 = s.xr[e], a = s.xa[e];
        if (r2 <= r1) return;
        const int m1 = lens[r1], m2 = lens[r2];
        const double* fwd = s.fwd;
        const double* dcum = s.dcum;
        const double tot1 = fwd[(size_t)r1 * W + m1 + 1], tot2 = fwd[(size_t)r2 * W + m2 + 1];
        const double dc1 = dcum[(size_t)r1 * W + a], f1a = fwd[(size_t)r1 * W + a],
                     f1a1 = fwd[(size_t)r1 * W + a + 1];
        const int ea = EE(r1, a), ea1 = EE(r1, a + 1);
        const long long rb = base_b(nr, W) + ((long long)r2 * W + a) * W;
        for (int b = 0; b <= m2; ++b) {
            if ((a == 0 && b == 0) || (a == m1 && b == m2)) continue;
            const double dc2 = dcum[(size_t)r2 * W + b];
            const double l1 = (dc1 + load[r2]) - dc2;
            const double l2 = (dc2 + load[r1]) - dc1;
            if (l1 > cap || l2 > cap) continue;
            const double n1 = ((f1a + CC(ea, EE(r2, b + 1))) + tot2) - fwd[(size_t)r2 * W + b + 1];
            const double n2 = ((fwd[(size_t)r2 * W + b] + CC(EE(r2, b), ea1)) + tot1) - f1a1;
            const double d = ((n1 + n2) - tot1) - tot2;
            vtake(d, r1, rb + b, bd, br, bk);
        }
        return;
    }
    it -= nB;
    if (it < N + nr) {  // C: 2-opt within the route
        const int e = (int)it;
        const int r1 = s.xr[e], a = s.xa[e];
        const int m1 = lens[r1];
        if (a > m1 - 2) return;
        const double* fwd = s.fwd + (size_t)r1 * W;
        const double* bwd = s.bwd + (size_t)r1 * W;
        const int ea = EE(r1, a), ea1 = EE(r1, a + 1);
        const long long rc = base_c(nr, W) + (long long)a * W;
        for (int b = a + 2; b <= m1; ++b) {
            const int eb = EE(r1, b), eb1 = EE(r1, b + 1);
            const double d = ((((CC(ea, eb) + CC(ea1, eb1)) - CC(ea, ea1)) - CC(eb, eb1)) + (bwd[b] - bwd[a + 1]))
                             - (fwd[b] - fwd[a + 1]);
            vtake(d, r1, rc + b, bd, br, bk);
        }
        return;
    }
    it -= N + nr;
    {  // D: Or-opt of L = 2, 3 customers within the route
        const int g = (int)(it / 2), L = 2 + (int)(it % 2);
        const int r1 = s.cr[g], sa = s.ca[g];
        const int m1 = lens[r1];
        const int se = sa + L - 1;
        if (se > m1) return;
        const double* fwd = s.fwd + (size_t)r1 * W;
        const double* bwd = s.bwd + (size_t)r1 * W;
        const int pr = EE(r1, sa - 1), nx = EE(r1, se + 1), sf = EE(r1, sa), sl = EE(r1, se);
        const double rem = (CC(pr, nx) - CC(pr, sf)) - CC(sl, nx);
        const double inner = (bwd[se] - bwd[sa]) - (fwd[se] - fwd[sa]);
        const long long rd = base_d(nr, W) + (((long long)(L - 2) * W + sa) * W) * 2;
        for (int k = 0; k <= m1; ++k) {
            if (k >= sa - 1 && k <= se) continue;
            const int u = EE(r1, k), v = EE(r1, k + 1);
            const double cuv = CC(u, v);
            const double d1 = ((rem - cuv) + CC(u, sf)) + CC(sl, v);
            vtake(d1, r1, rd + 2LL * k, bd, br, bk);
            const double d2 = (((rem - cuv) + CC(u, sl)) + CC(sf, v)) + inner;
            vtake(d2, r1, rd + 2LL * k + 1, bd, br, bk);
        }
    }
}

// ------------------------------------------------------------------------------------------- moves
// E[r] := depot, seq[0..m), depot.
__device__ void sol_set(const Sol& s, int W, int r, const int* seq, int m, int depot) {
    int* e = s.E + (size_t)r * W;
    e[0] = depot;
    for (int t = 0; t < m; ++t) e[t + 1] = seq[t];
    e[m + 1] = depot;
    s.lens[r] = m;
}

// cvrp.normalize: drop empty routes, append one empty route (one thread).
__device__ void sol_normalize(const Sol& s, int W, int depot) {
    const int nr = s.nr[0];
    int w = 0;
    for (int r = 0; r < nr; ++r) {
        const int m = s.lens[r];
        if (m > 0) {
            if (w != r) {
                for (int t = 0; t < m + 2; ++t) s.E[(size_t)w * W + t] = s.E[(size_t)r * W + t];
                s.lens[w] = m;
            }
            ++w;
        }
    }
    s.E[(size_t)w * W] = depot;
    s.E[(size_t)w * W + 1] = depot;
    s.lens[w] = 0;
    s.nr[0] = w + 1;
}

// cvrp.apply_vrp_move (one thread), then normalize.
__device__ void sol_apply(const Sol& s, int W, int depot, int t, int r1, int a, int r2, int b, int k) {
    int* E = s.E;
    const int m1 = s.lens[r1], m2 = s.lens[r2];
    const int* s1 = E + (size_t)r1 * W + 1;  // customers of r1: s1[0..m1)
    const int* s2 = E + (size_t)r2 * W + 1;
    int* x1 = s.scr;
    int* x2 = s.scr + W;
    if (t == VM_RELOCATE) {
        const int x = EE(r1, a);
        if (r1 != r2) {
            int m = 0;
            for (int q = 0; q < m1; ++q) if (q != a - 1) x1[m++] = s1[q];
            int h = 0;
            for (int q = 0; q < b; ++q) x2[h++] = s2[q];
            x2[h++] = x;
            for (int q = b; q < m2; ++q) x2[h++] = s2[q];
            sol_set(s, W, r1, x1, m, depot);
            sol_set(s, W, r2, x2, h, depot);
        } else {
            int m = 0;
            for (int q = 0; q < m1; ++q) if (q != a - 1) x2[m++] = s1[q];  // rest
            const int bb = b < a ? b : b - 1;
            int h = 0;
            for (int q = 0; q < bb; ++q) x1[h++] = x2[q];
            x1[h++] = x;
            for (int q = bb; q < m; ++q) x1[h++] = x2[q];
            sol_set(s, W, r1, x1, h, depot);
        }
    } else if (t == VM_SWAP) {
        const int x = EE(r1, a), y = EE(r2, b);
        EE(r1, a) = y;
        EE(r2, b) = x;
    } else if (t == VM_TWO_OPT_STAR) {
        int m = 0, h = 0;
        for (int q = 0; q < a; ++q) x1[m++] = s1[q];
        for (int q = b; q < m2; ++q) x1[m++] = s2[q];
        for (int q = 0; q < b; ++q) x2[h++] = s2[q];
        for (int q = a; q < m1; ++q) x2[h++] = s1[q];
        sol_set(s, W, r1, x1, m, depot);
        sol_set(s, W, r2, x2, h, depot);
    } else if (t == VM_TWO_OPT) {
        int i = a + 1, j = b;
        while (i < j) {
            const int tmp = EE(r1, i);
            EE(r1, i) = EE(r1, j);
            EE(r1, j) = tmp;
            ++i; --j;
        }
    } else {  // Or-opt: customers s1[a-1 .. b-1] after extended position k
        const int L = b - a + 1;
        int* seg = x2;
        for (int q = 0; q < L; ++q) seg[q] = t == VM_OR_OPT_REV ? s1[b - 1 - q] : s1[a - 1 + q];
        int m = 0;
        if (k < a) {
            for (int q = 0; q < k; ++q) x1[m++] = s1[q];
            for (int q = 0; q < L; ++q) x1[m++] = seg[q];
            for (int q = k; q < a - 1; ++q) x1[m++] = s1[q];
            for (int q = b; q < m1; ++q) x1[m++] = s1[q];
        } else {
            for (int q = 0; q < a - 1; ++q) x1[m++] = s1[q];
            for (int q = b; q < k; ++q) x1[m++] = s1[q];
            for (int q = 0; q < L; ++q) x1[m++] = seg[q];
            for (int q = k; q < m1; ++q) x1[m++] = s1[q];
        }
        sol_set(s, W, r1, x1, m, depot);
    }
    sol_normalize(s, W, depot);
}

// The best move of the solution by the whole block (every item), returned to every thread.
__device__ void block_best_move(int n, int N, int W, const double* c, const double* dem, double cap, const Sol& s,
                                double& bd, int& br, long long& bk) {
    const int nr = s.nr[0];
    const long long T = vrp_items(N, nr);
    bd = vrp_inf(); br = VRP_NONE; bk = VRP_NONE64;
    for (long long it = threadIdx.x; it < T; it += blockDim.x) eval_item(it, n, N, W, c, dem, cap, s, nr, bd, br, bk);
    vblock_argmin(bd, br, bk);
}

// Descent of a solution by one block (cvrp.vrp_descent): best move, apply if it gains more than eps,
// refresh, until a local minimum or max_moves moves; the state must be refreshed. stop_at > 0: the block
// reads the device clock before each evaluation and stops once it passes stop_at (*aborted = true).
// Returns the moves applied (the same in every thread).
__device__ int block_vrp_descent(int n, int N, int W, int depot, const double* c, const double* dem, double cap,
                                 const Sol& s, double eps, int max_moves, unsigned long long stop_at, bool* aborted) {
    __shared__ int s_stop;
    int moves = 0;
    *aborted = false;
    while (moves < max_moves) {
        if (stop_at) {
            if (threadIdx.x == 0) s_stop = gtimer() >= stop_at;
            __syncthreads();
            if (s_stop) { *aborted = true; break; }
        }
        double bd;
        int br;
        long long bk;
        block_best_move(n, N, W, c, dem, cap, s, bd, br, bk);
        if (!(bd < -eps) || br == VRP_NONE) break;
        if (threadIdx.x == 0) {
            int t, a, r2, b, k;
            decode_vrp(s.nr[0], W, br, bk, t, a, r2, b, k);
            sol_apply(s, W, depot, t, br, a, r2, b, k);
        }
        __syncthreads();
        sol_refresh(s, W, n, c, dem);
        ++moves;
    }
    return moves;
}

// ------------------------------------------------------------------------------------------- one solution
#define SOL_PARAMS int* E, int* L, int* NR, double* LOAD, double* FWD, double* BWD, double* DCUM, int* CR, int* CA, \
                   int* XR, int* XA, int* OFF, int* SCR
#define SOL_ARGS E, L, NR, LOAD, FWD, BWD, DCUM, CR, CA, XR, XA, OFF, SCR

// 1 block: refresh solution 0, its cost, stop_at[0] = now + budget_ns (0: none), timed_out[0] = 0.
extern "C" __global__ void vrp_state(int n, int N, int R, int W, const double* __restrict__ c,
                                     const double* __restrict__ dem, SOL_PARAMS, double* cost,
                                     unsigned long long budget_ns, unsigned long long* stop_at, int* timed_out) {
    const Sol s = sol_at(0, R, W, N, SOL_ARGS);
    sol_refresh(s, W, n, c, dem);
    if (threadIdx.x == 0) {
        cost[0] = sol_cost(s, W);
        stop_at[0] = budget_ns ? gtimer() + budget_ns : 0ull;
        timed_out[0] = 0;
    }
}

// Many blocks: block b folds items b * blockDim.x + thread, + gridDim.x * blockDim.x, ... and writes its
// best key to blk_*[b]. Returns at once once flags[F_DONE] is set.
extern "C" __global__ void vrp_eval(int n, int N, int R, int W, const double* __restrict__ c,
                                    const double* __restrict__ dem, double cap, SOL_PARAMS,
                                    const int* __restrict__ flags, double* blk_d, int* blk_r, long long* blk_k) {
    if (flags[F_DONE]) return;
    const Sol s = sol_at(0, R, W, N, SOL_ARGS);
    const int nr = s.nr[0];
    const long long T = vrp_items(N, nr);
    double bd = vrp_inf();
    int br = VRP_NONE;
    long long bk = VRP_NONE64;
    for (long long it = (long long)blockIdx.x * blockDim.x + threadIdx.x; it < T;
         it += (long long)gridDim.x * blockDim.x)
        eval_item(it, n, N, W, c, dem, cap, s, nr, bd, br, bk);
    vblock_argmin(bd, br, bk);
    if (threadIdx.x == 0) { blk_d[blockIdx.x] = bd; blk_r[blockIdx.x] = br; blk_k[blockIdx.x] = bk; }
}

// 1 block: best of the nblk block keys -> best_d[0], best_m[0..5] = (type, r1, a, r2, b, k) (type -1: no
// move). If ctl[1] (apply) and the move gains more than ctl_d[0] (eps) and fewer than ctl[0] (max_moves)
// moves were applied (flags[F_PHASES]) and the device clock is before stop_at[0] (when set): apply it,
// refresh, count it, cost[0] out; past stop_at: timed_out[0] = 1 and flags[F_DONE]; else flags[F_DONE].
extern "C" __global__ void vrp_finish(int n, int N, int R, int W, int depot, int nblk, const double* __restrict__ c,
                                      const double* __restrict__ dem, SOL_PARAMS, const double* blk_d,
                                      const int* blk_r, const long long* blk_k, const int* ctl, const double* ctl_d,
                                      int* flags, double* best_d, int* best_m, double* cost,
                                      const unsigned long long* stop_at, int* timed_out) {
    __shared__ int s_late;
    if (flags[F_DONE]) return;
    if (threadIdx.x == 0) s_late = stop_at[0] != 0ull && gtimer() >= stop_at[0];
    __syncthreads();
    if (s_late) {
        if (threadIdx.x == 0) { flags[F_DONE] = 1; timed_out[0] = 1; }
        return;
    }
    const Sol s = sol_at(0, R, W, N, SOL_ARGS);
    const int moves = flags[F_PHASES];
    const int max_moves = ctl[0], apply = ctl[1];
    const double eps = ctl_d[0];
    double bd = vrp_inf();
    int br = VRP_NONE;
    long long bk = VRP_NONE64;
    for (int b = threadIdx.x; b < nblk; b += blockDim.x) vtake(blk_d[b], blk_r[b], blk_k[b], bd, br, bk);
    vblock_argmin(bd, br, bk);
    int t = -1, a = -1, r2 = -1, b = -1, k = -1;
    if (br != VRP_NONE) decode_vrp(s.nr[0], W, br, bk, t, a, r2, b, k);
    const bool go = apply && br != VRP_NONE && bd < -eps && moves < max_moves;
    __syncthreads();  // every thread has read nr before thread 0 applies the move
    if (threadIdx.x == 0) {
        best_d[0] = bd;
        best_m[0] = t; best_m[1] = br == VRP_NONE ? -1 : br; best_m[2] = a; best_m[3] = r2; best_m[4] = b;
        best_m[5] = k;
        if (go) sol_apply(s, W, depot, t, br, a, r2, b, k);
        else flags[F_DONE] = 1;
    }
    __syncthreads();
    if (go) {
        sol_refresh(s, W, n, c, dem);
        if (threadIdx.x == 0) {
            flags[F_PHASES] = moves + 1;
            cost[0] = sol_cost(s, W);
            if (moves + 1 >= max_moves) flags[F_DONE] = 1;
        }
    }
}

// ------------------------------------------------------------------------------------------- chains
// One thread: stop_at[0] = now + budget_ns on the device clock (0: no limit), the common end of the
// launch that follows (blocks of a later wave stop then too, not a budget after their own start).
extern "C" __global__ void vrp_set_stop(unsigned long long budget_ns, unsigned long long* stop_at) {
    if (threadIdx.x == 0) stop_at[0] = budget_ns ? gtimer() + budget_ns : 0ull;
}

// Block b runs `iters` steps of chain b (cvrp.vrp_steps step for step): the working solution b := the
// chain's current one (CE, CL, CNR, ccost); ruin & recreate with the list orders[b][it][0..kmax) (stop
// ids, -1 ends it; cvrp.ruin_recreate); refresh; the descent (block_vrp_descent); accept when its cost is
// at most ccost[b] + eps. stop_at[0] > 0 (vrp_set_stop): the blocks stop then (device clock, read before
// each move), the step under way abandoned and rejected. moves[b], improved[b], steps[b] accumulate.
// MARK: int32 B x n, zero on entry and on exit.
extern "C" __global__ void vrp_ils(int n, int N, int R, int W, int depot, int B, int iters, int kmax,
                                   const double* __restrict__ c, const double* __restrict__ dem, double cap,
                                   SOL_PARAMS, int* CE, int* CL, int* CNR, double* ccost, int* MARK,
                                   const int* __restrict__ orders, double eps, int max_moves,
                                   const unsigned long long* __restrict__ stop_at_p, int* moves, int* improved,
                                   int* steps) {
    const int bi = blockIdx.x;
    if (bi >= B) return;
    const Sol s = sol_at(bi, R, W, N, SOL_ARGS);
    const size_t rw = (size_t)R * W;
    int* ce = CE + bi * rw;
    int* cl = CL + (size_t)bi * R;
    int* mark = MARK + (size_t)bi * n;
    __shared__ int s_accept;
    const unsigned long long stop_at = stop_at_p[0];
    int mv = 0, imp = 0, done = 0;
    for (int it = 0; it < iters; ++it) {
        const int* ord = orders + ((size_t)bi * iters + it) * kmax;
        // the working copy
        const int cnr = CNR[bi];
        for (size_t q = threadIdx.x; q < (size_t)cnr * W; q += blockDim.x) s.E[q] = ce[q];
        for (int r = threadIdx.x; r < cnr; r += blockDim.x) s.lens[r] = cl[r];
        if (threadIdx.x == 0) {
            s.nr[0] = cnr;
            for (int q = 0; q < kmax && ord[q] >= 0; ++q) mark[ord[q]] = 1;
        }
        __syncthreads();
        // ruin: each route keeps its unmarked customers in order
        for (int r = threadIdx.x; r < cnr; r += blockDim.x) {
            int* e = s.E + (size_t)r * W;
            const int m = s.lens[r];
            int h = 0;
            for (int t = 1; t <= m; ++t) {
                const int v = e[t];
                if (!mark[v]) e[++h] = v;
            }
            e[h + 1] = depot;
            s.lens[r] = h;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int q = 0; q < kmax && ord[q] >= 0; ++q) mark[ord[q]] = 0;
            sol_normalize(s, W, depot);
        }
        __syncthreads();
        for (int r = threadIdx.x; r < s.nr[0]; r += blockDim.x) {  // loads summed as ruin_recreate sums them
            double l = 0.0;
            for (int t = 1; t <= s.lens[r]; ++t) l += dem[s.E[(size_t)r * W + t]];
            s.load[r] = l;
        }
        __syncthreads();
        // recreate: each removed customer in order, cheapest feasible insertion (lowest route, position)
        for (int q = 0; q < kmax; ++q) {
            const int x = ord[q];
            if (x < 0) break;
            const int nr = s.nr[0];
            double bd = vrp_inf();
            int br = VRP_NONE;
            long long bk = VRP_NONE64;
            for (int r = threadIdx.x; r < nr; r += blockDim.x) {
                if (s.load[r] + dem[x] > cap) continue;
                const int m = s.lens[r];
                const int* e = s.E + (size_t)r * W;
                for (int b = 0; b <= m; ++b) {
                    const int u = e[b], v = e[b + 1];
                    const double d = (CC(u, x) + CC(x, v)) - CC(u, v);
                    vtake(d, r, b, bd, br, bk);
                }
            }
            vblock_argmin(bd, br, bk);
            if (threadIdx.x == 0) {
                const int m = s.lens[br];
                int* e = s.E + (size_t)br * W;
                for (int t = m + 1; t > (int)bk; --t) e[t + 1] = e[t];
                e[bk + 1] = x;
                s.lens[br] = m + 1;
                s.load[br] += dem[x];
                if (br == nr - 1) {
                    sol_normalize(s, W, depot);
                    s.load[s.nr[0] - 1] = 0.0;
                }
            }
            __syncthreads();
        }
        sol_refresh(s, W, n, c, dem);
        bool aborted;
        mv += block_vrp_descent(n, N, W, depot, c, dem, cap, s, eps, max_moves, stop_at, &aborted);
        if (aborted) break;  // the same in every thread
        ++done;
        if (threadIdx.x == 0) {
            const double qc = sol_cost(s, W);
            const double cc = ccost[bi];
            s_accept = qc <= cc + eps;
            if (qc < cc - eps) ++imp;
            if (s_accept) { ccost[bi] = qc; CNR[bi] = s.nr[0]; }
        }
        __syncthreads();
        if (s_accept) {
            const int nr = s.nr[0];
            for (size_t q = threadIdx.x; q < (size_t)nr * W; q += blockDim.x) ce[q] = s.E[q];
            for (int r = threadIdx.x; r < nr; r += blockDim.x) cl[r] = s.lens[r];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        moves[bi] += mv;
        improved[bi] += imp;
        steps[bi] += done;
    }
}

// local_search.cu: the GPU twin of gpuroute/tours/local_search.py (best-improvement local search for
// the TSP on an asymmetric cost matrix): evaluate the whole neighbourhood in parallel, reduce to the
// best move, apply it on the device, loop until no move improves. Brodtkorb, Hagen, Schulz, Hasle,
// "GPU computing in discrete optimization. Part I" (EURO J. Transp. Logist. 2013), "Programming example
// in CUDA": one thread per move subset, a reduction to the best move, the move applied, repeated.
//
// State of one tour (all arrays of length n, n >= 3):
//   p    int32   the closed tour (positions -> stops), the same array as the CPU twin's p
//   arc  float64 arc[t] = c[p[t], p[(t+1) % n]]
//   fwd  float64 fwd[t] = sum_{u<t} c[p[u], p[u+1]]   (bitwise the CPU's prefix_sums, see block_state)
//   bwd  float64 bwd[t] = sum_{u<t} c[p[u+1], p[u]]
// c and ct (c transposed) are n x n row-major float64; every read of the evaluation is in a row fixed
// for the first index i (rows p[i-1], p[i], p[i+1], p[i+2] of c and of ct), as in the CPU twin.
//
// Moves, exactly the CPU twin's (module docstring of local_search.py): (type, i, j, k) with
// TWO_OPT=0, OR_OPT=1, OR_OPT_REV=2, SWAP=3, RELOCATE=4. Each delta is computed with the same
// operations in the same order as local_search._row_best, so the deltas are bitwise equal to the CPU's.
// Tie-breaking: the CPU keeps the first move found in row i (2-opt by j, swap by j, then for L = 1, 2, 3
// the insertion points k < i (orientation kept, then reversed) and k > j (kept, then reversed)) and the
// lowest row among equal rows. The GPU reduces on the key (delta, i, rank) lexicographically, where the
// rank of a move within its row follows the CPU's order:
//   2-opt (i, j):               rank = j
//   swap (i, j):                rank = n + j
//   segment of L stops at i..j, inserted after k, part = (k > j), rev = reversed:
//                               rank = 2n + (L-1) 4n + part 2n + rev n + k
// (gpuroute.tours.gpu.move_rank / move_from_rank mirror this). The minimum of the key is the CPU's
// best move.
//
// Kernels:
//   ls_state     1 block: arcs and prefix sums of one tour (the start of a single-tour descent)
//   ls_eval      many blocks: each evaluates some rows i (all j / k of them) and writes its best key
//   ls_finish    1 block: reduces the blocks' keys, writes the best move, applies it (if improving and
//                asked to) and rebuilds the state; sets flags[F_DONE] at a local minimum. A CUDA graph of
//                (ls_eval, ls_finish) x K is replayed until the host sees F_DONE: 2 launches per move,
//                one host read per K moves.
//   ls_batch     1 block per tour: a whole descent of each of B tours in one launch (persistent loop,
//                no host sync and no launch per move)
//   ls_ils       1 block per chain: `iters` iterated-local-search steps per chain (double bridge on the
//                device from host-drawn cut points, descent, accept if not worse) in one launch, until
//                a device-clock time (ls_set_stop: one time for every block of the launch)
//   ls_broadcast copies the best chain over the others
//   ls_nearest   1 block: the nearest-neighbour start tour on a matrix that lives on the device
//   ls_cand_batch, ls_cand_ils   the same with the candidate-list descent of the CPU twin
//                (local_search_queue: K nearest stops per stop, a FIFO queue of stops whose arcs changed,
//                the best move around one stop at a time), see "candidate lists" below
#include "gpuroute_common.cuh"

enum { MV_TWO_OPT = 0, MV_OR_OPT = 1, MV_OR_OPT_REV = 2, MV_SWAP = 3, MV_RELOCATE = 4 };
#define LS_MAX_SEG 3
#define LS_NONE 0x7fffffff
#define LS_FULL 0xffffffffu

__device__ __forceinline__ double ls_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// (d, i, r) < (bd, bi, br) lexicographically.
__device__ __forceinline__ bool key_less(double d, int i, int r, double bd, int bi, int br) {
    return d < bd || (d == bd && (i < bi || (i == bi && r < br)));
}

__device__ __forceinline__ void take(double d, int i, int r, double& bd, int& bi, int& br) {
    if (key_less(d, i, r, bd, bi, br)) { bd = d; bi = i; br = r; }
}

// Move (type, j, k) of row i from its rank (the inverse of the encoding above).
__device__ __forceinline__ void decode_move(int n, int i, int r, int& t, int& j, int& k) {
    if (r < n) { t = MV_TWO_OPT; j = r; k = -1; return; }
    if (r < 2 * n) { t = MV_SWAP; j = r - n; k = -1; return; }
    int q = r - 2 * n;
    const int L = q / (4 * n) + 1;
    q -= (L - 1) * 4 * n;
    q -= (q / (2 * n)) * 2 * n;  // drop the part: k tells it
    const int rev = q / n;
    k = q - rev * n;
    j = i + L - 1;
    t = L == 1 ? MV_RELOCATE : (rev ? MV_OR_OPT_REV : MV_OR_OPT);
}

// Cost change of exchanging the cyclically adjacent p[i], p[j] (j == i + 1, or i == 0 and j == n - 1):
// local_search.delta_swap's first two branches, same operation order.
__device__ __forceinline__ double delta_swap_adjacent(int n, const double* c, const int* p, int i, int j) {
    const size_t N = (size_t)n;
    const int x = p[i], y = p[j];
    if (j == i + 1) {
        const int a = p[(i - 1 + n) % n], b = p[(j + 1) % n];
        return ((((c[a * N + y] + c[y * N + x]) + c[x * N + b]) - c[a * N + x]) - c[x * N + y]) - c[y * N + b];
    }
    const int a = p[n - 2], b = p[1];
    return ((((c[a * N + x] + c[x * N + y]) + c[y * N + b]) - c[a * N + y]) - c[y * N + x]) - c[x * N + b];
}

// Evaluate rows i = row_first, row_first + row_step, ... and, in each, the columns x = lane, lane + tpr,
// ... (x is j for 2-opt and swap, k for the segment moves); fold every move into the thread's best key.
// Deltas: local_search._row_best, operation for operation.
__device__ void eval_rows(int n, const double* c, const double* ct, const int* p, const double* arc,
                          const double* fwd, const double* bwd, int row_first, int row_step, int lane, int tpr,
                          double& bd, int& bi, int& br) {
    const size_t N = (size_t)n;
    for (int i = row_first; i < n; i += row_step) {
        const int im1 = (i - 1 + n) % n;
        const int a = p[i];                  // x of the swap, sf of the segments
        const int b = p[(i + 1) % n];        // an of the swap
        const int ap = p[im1];               // prv of the segments
        const double arc_im1 = arc[im1];
        const double arc_i = arc[i];
        const double* ca = c + a * N;
        const double* cb = c + b * N;
        const double* cap = c + ap * N;
        const double* cta = ct + a * N;
        const double* ctb = ct + b * N;
        // 2-opt: base = -arc[i] + bwd[i+1] * -1.0 + fwd[i+1] (valid when i + 1 < n)
        double base = 0.0;
        if (i + 1 < n) base = ((-arc_i) + (-bwd[i + 1])) + fwd[i + 1];
        const double sub_i = arc_im1 + arc_i;
        // segments p[i..i+L-1]
        double rem[LS_MAX_SEG], inner[LS_MAX_SEG];
        const double* csl[LS_MAX_SEG];
        const double* ctsl[LS_MAX_SEG];
        int nseg = 0;
#pragma unroll
        for (int L = 1; L <= LS_MAX_SEG; ++L) {
            const int j = i + L - 1;
            rem[L - 1] = 0.0; inner[L - 1] = 0.0; csl[L - 1] = ca; ctsl[L - 1] = cta;
            if (j < n) {
                const int sl = p[j];
                const int nxt = p[(j + 1) % n];
                rem[L - 1] = (cap[nxt] - arc_im1) - arc[j];
                inner[L - 1] = (bwd[j] - bwd[i]) - (fwd[j] - fwd[i]);
                csl[L - 1] = c + sl * N;
                ctsl[L - 1] = ct + sl * N;
                nseg = L;
            }
        }
        const int R2 = 2 * n;
        for (int x = lane; x < n; x += tpr) {
            const int px = p[x];
            const int x1 = x + 1 < n ? x + 1 : 0;
            const int px1 = p[x1];
            const double arc_x = arc[x];
            // 2-opt (i, j = x): reverse p[i+1..x]
            if (x >= i + 2) {
                const double dd = ((((ca[px] + cb[px1]) - arc_x) + base) + bwd[x]) - fwd[x];
                take(dd, i, x, bd, bi, br);
            }
            // swap (i, j = x)
            if (x > i) {
                if (x == i + 1 || (i == 0 && x == n - 1)) {
                    if (!(i == 0 && x == n - 1 && n == 3)) {  // the same as (0, 1) on a 3-cycle
                        take(delta_swap_adjacent(n, c, p, i, x), i, n + x, bd, bi, br);
                    }
                } else {
                    const int bp = p[x - 1];
                    const double dd = (((((cap[px] + ctb[px]) + cta[bp]) + ca[px1]) - sub_i) - arc[x - 1]) - arc_x;
                    take(dd, i, n + x, bd, bi, br);
                }
            }
            // relocate (L = 1) and Or-opt (L = 2, 3): segment p[i..j] after p[k], k = x
#pragma unroll
            for (int L = 1; L <= LS_MAX_SEG; ++L) {
                const int j = i + L - 1;
                int part;
                if (L > nseg) continue;
                if (x <= i - 2) part = 0;
                else if (x >= j + 1 && !(i == 0 && x == n - 1)) part = 1;
                else continue;
                const int rbase = R2 + (L - 1) * 4 * n + part * R2;
                const double r0 = rem[L - 1] - arc_x;
                const double dd = (r0 + cta[px]) + csl[L - 1][px1];
                take(dd, i, rbase + x, bd, bi, br);
                if (L > 1) {
                    const double dr = ((r0 + ctsl[L - 1][px]) + ca[px1]) + inner[L - 1];
                    take(dr, i, rbase + n + x, bd, bi, br);
                }
            }
        }
    }
}

__device__ __forceinline__ void warp_argmin(double& d, int& i, int& r) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const double od = __shfl_down_sync(LS_FULL, d, off);
        const int oi = __shfl_down_sync(LS_FULL, i, off);
        const int orr = __shfl_down_sync(LS_FULL, r, off);
        take(od, oi, orr, d, i, r);
    }
}

// The block's smallest key, returned to every thread. blockDim.x is a multiple of 32; every thread of
// the block calls it.
__device__ void block_argmin(double& d, int& i, int& r) {
    __shared__ double sd[32];
    __shared__ int si[32], sr[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    warp_argmin(d, i, r);
    __syncthreads();  // the previous call's readers of sd[0] are done
    if (lane == 0) { sd[w] = d; si[w] = i; sr[w] = r; }
    __syncthreads();
    if (w == 0) {
        d = lane < nw ? sd[lane] : ls_inf();
        i = lane < nw ? si[lane] : LS_NONE;
        r = lane < nw ? sr[lane] : LS_NONE;
        warp_argmin(d, i, r);
        if (lane == 0) { sd[0] = d; si[0] = i; sr[0] = r; }
    }
    __syncthreads();
    d = sd[0]; i = si[0]; r = sr[0];
}

// Rebuild arc, fwd, bwd of the tour p (whole block). fwd/bwd are first filled with the arcs they add
// (fwd[t] = c[p[t-1], p[t]], bwd[t] = c[p[t], p[t-1]]), then scanned in place: warp 0 scans fwd, warp 1
// bwd. exact == 0: each array summed left to right (one dependent chain of n additions, ~n x the
// FP64 add latency), so the sums are bitwise those of the CPU's prefix_sums (fwd[t] = fwd[t-1] + c[...],
// IEEE addition commutes); exact == 1 (the host checked that
// every cost is an integer and n * max cost < 2^53, so every partial sum is exact in any order): 32
// chunks per array, a warp scan of the chunk totals.
__device__ void block_state(int n, const double* c, const int* p, double* arc, double* fwd, double* bwd, int exact) {
    const size_t N = (size_t)n;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int u = p[t];
        const int v = p[t + 1 < n ? t + 1 : 0];
        const double a = c[u * N + v];
        arc[t] = a;
        if (t + 1 < n) {
            fwd[t + 1] = a;
            bwd[t + 1] = c[v * N + u];
        } else {
            fwd[0] = 0.0;
            bwd[0] = 0.0;
        }
    }
    __syncthreads();
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (w < 2) {
        double* s = w == 0 ? fwd : bwd;
        if (!exact) {
            // left to right: the warp loads 32 terms at a time (coalesced) and every lane adds them in
            // order, the same dependent chain in each lane; lane q keeps the sum through term base + q
            double run = 0.0;
            for (int base = 1; base < n; base += 32) {
                const int t = base + lane;
                const double v = t < n ? s[t] : 0.0;
                double mine = 0.0;
#pragma unroll
                for (int q = 0; q < 32; ++q) {
                    const double vq = __shfl_sync(LS_FULL, v, q);
                    if (base + q < n) run = run + vq;
                    if (q == lane) mine = run;
                }
                if (t < n) s[t] = mine;
            }
        } else {
            const int chunk = (n + 31) / 32;
            const int lo = lane * chunk;
            const int hi = min(n, lo + chunk);
            double tot = 0.0;
            for (int t = lo; t < hi; ++t) tot += s[t];
            double incl = tot;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const double o = __shfl_up_sync(LS_FULL, incl, off);
                if (lane >= off) incl += o;
            }
            double run = incl - tot;
            for (int t = lo; t < hi; ++t) {
                run += s[t];
                s[t] = run;
            }
        }
    }
    __syncthreads();
}

// Apply move (t, i, j, k) to p in place (whole block), as local_search.apply_move: the changed range
// [lo, hi] is copied to scratch, then p[q] = scratch[source of q].
__device__ void block_apply(int n, int* p, int* scratch, int t, int i, int j, int k) {
    int lo, hi;
    if (t == MV_TWO_OPT) { lo = i + 1; hi = j; }
    else if (t == MV_SWAP) { lo = i; hi = j; }
    else if (k > j) { lo = i; hi = k; }
    else { lo = k + 1; hi = j; }
    for (int q = lo + threadIdx.x; q <= hi; q += blockDim.x) scratch[q] = p[q];
    __syncthreads();
    const int L = j - i + 1;
    const bool rev = t == MV_OR_OPT_REV;
    for (int q = lo + threadIdx.x; q <= hi; q += blockDim.x) {
        int s;
        if (t == MV_TWO_OPT) {
            s = i + 1 + j - q;
        } else if (t == MV_SWAP) {
            s = q == i ? j : (q == j ? i : q);
        } else if (k > j) {  // p[j+1..k] shift left by L, the segment lands on [k-L+1, k]
            if (q <= k - L) s = q + L;
            else { const int h = q - (k - L + 1); s = rev ? j - h : i + h; }
        } else {  // the segment lands on [k+1, k+L], p[k+1..i-1] shift right by L
            if (q <= k + L) { const int h = q - (k + 1); s = rev ? j - h : i + h; }
            else s = q - L;
        }
        p[q] = scratch[s];
    }
    __syncthreads();
}

// Descent of one tour by one block: best move of the whole neighbourhood, apply if it gains more than
// eps, until a local minimum or max_moves moves (local_search.local_search). The state must be built.
// stop_at > 0: before each evaluation the block's first thread reads the device clock (%globaltimer, ns)
// and the descent is abandoned once it reaches stop_at (*aborted = true: the tour is then no local
// minimum). Returns the moves applied; every thread returns the same.
__device__ int block_descent(int n, const double* c, const double* ct, int* p, int* scratch, double* arc,
                             double* fwd, double* bwd, int exact, double eps, int max_moves, int tpr,
                             unsigned long long stop_at, bool* aborted) {
    __shared__ int s_stop;
    const int rows = blockDim.x / tpr;
    const int r = threadIdx.x / tpr, lane = threadIdx.x - r * tpr;
    int moves = 0;
    *aborted = false;
    while (moves < max_moves) {
        if (stop_at) {  // one reading for the whole block, so that every thread leaves together
            if (threadIdx.x == 0) s_stop = gtimer() >= stop_at;
            __syncthreads();
            if (s_stop) { *aborted = true; break; }
        }
        double bd = ls_inf();
        int bi = LS_NONE, br = LS_NONE;
        eval_rows(n, c, ct, p, arc, fwd, bwd, r, rows, lane, tpr, bd, bi, br);
        block_argmin(bd, bi, br);
        if (!(bd < -eps) || bi == LS_NONE) break;
        int t, j, k;
        decode_move(n, bi, br, t, j, k);
        block_apply(n, p, scratch, t, bi, j, k);
        block_state(n, c, p, arc, fwd, bwd, exact);
        ++moves;
    }
    return moves;
}

// ---------------------------------------------------------------------------------- one tour, many blocks
// Also starts the descent's clock: stop_at[0] = now + budget_ns on the device clock (0: no limit), and
// timed_out[0] = 0.
extern "C" __global__ void ls_state(int n, const double* __restrict__ c, const int* p, double* arc, double* fwd,
                                    double* bwd, int exact, double* cost, unsigned long long budget_ns,
                                    unsigned long long* stop_at, int* timed_out) {
    block_state(n, c, p, arc, fwd, bwd, exact);
    if (threadIdx.x == 0) {
        cost[0] = fwd[n - 1] + arc[n - 1];
        stop_at[0] = budget_ns ? gtimer() + budget_ns : 0ull;
        timed_out[0] = 0;
    }
}

// Block b evaluates rows b * rows + r, + gridDim.x * rows, ... (rows = blockDim.x / tpr) and writes its
// best key to blk_*[b]. Returns at once after the loop is done (a captured graph's trailing launches).
extern "C" __global__ void ls_eval(int n, const double* __restrict__ c, const double* __restrict__ ct,
                                   const int* __restrict__ p, const double* __restrict__ arc,
                                   const double* __restrict__ fwd, const double* __restrict__ bwd, int tpr,
                                   const int* __restrict__ flags, double* blk_d, int* blk_i, int* blk_r) {
    if (flags[F_DONE]) return;
    const int rows = blockDim.x / tpr;
    const int r = threadIdx.x / tpr, lane = threadIdx.x - r * tpr;
    double bd = ls_inf();
    int bi = LS_NONE, br = LS_NONE;
    eval_rows(n, c, ct, p, arc, fwd, bwd, blockIdx.x * rows + r, gridDim.x * rows, lane, tpr, bd, bi, br);
    block_argmin(bd, bi, br);
    if (threadIdx.x == 0) { blk_d[blockIdx.x] = bd; blk_i[blockIdx.x] = bi; blk_r[blockIdx.x] = br; }
}

// One block: the best of the nblk block keys -> best_d[0], best_m[0..3] = (type, i, j, k) (type -1: no
// move). If `apply` (ctl[1]) and the move gains more than eps (ctl_d[0]) and fewer than max_moves
// (ctl[0]) moves were applied (flags[F_PHASES]): apply it, rebuild the state, count it; else set
// flags[F_DONE]. Past the device-clock time stop_at[0] (when not 0; set by ls_state) nothing is applied:
// flags[F_DONE] and timed_out[0] are set (the tour is then the last one reached, no local minimum).
extern "C" __global__ void ls_finish(int n, int nblk, const double* __restrict__ c, int* p, int* scratch, double* arc,
                                     double* fwd, double* bwd, int exact, const double* blk_d, const int* blk_i,
                                     const int* blk_r, const int* ctl, const double* ctl_d, int* flags,
                                     double* best_d, int* best_m, double* cost, const unsigned long long* stop_at,
                                     int* timed_out) {
    __shared__ int s_late;
    if (flags[F_DONE]) return;
    if (threadIdx.x == 0) s_late = stop_at[0] != 0ull && gtimer() >= stop_at[0];
    __syncthreads();
    if (s_late) {
        if (threadIdx.x == 0) { flags[F_DONE] = 1; timed_out[0] = 1; }
        return;
    }
    const int moves = flags[F_PHASES];
    const int max_moves = ctl[0], apply = ctl[1];
    const double eps = ctl_d[0];
    double bd = ls_inf();
    int bi = LS_NONE, br = LS_NONE;
    for (int b = threadIdx.x; b < nblk; b += blockDim.x) take(blk_d[b], blk_i[b], blk_r[b], bd, bi, br);
    block_argmin(bd, bi, br);
    int t = -1, j = -1, k = -1;
    if (bi != LS_NONE) decode_move(n, bi, br, t, j, k);
    if (threadIdx.x == 0) {
        best_d[0] = bd;
        best_m[0] = t; best_m[1] = bi == LS_NONE ? -1 : bi; best_m[2] = j; best_m[3] = k;
    }
    if (apply && bi != LS_NONE && bd < -eps && moves < max_moves) {
        block_apply(n, p, scratch, t, bi, j, k);
        block_state(n, c, p, arc, fwd, bwd, exact);
        if (threadIdx.x == 0) {
            flags[F_PHASES] = moves + 1;
            cost[0] = fwd[n - 1] + arc[n - 1];
            if (moves + 1 >= max_moves) flags[F_DONE] = 1;
        }
    } else if (threadIdx.x == 0) {
        flags[F_DONE] = 1;
    }
}

// ---------------------------------------------------------------------------------- many tours, a block each
// Block b runs the whole descent of tour P[b] (B x n) in place; cost[b] (closed-tour cost, summed as the
// CPU's tour_cost) and moves[b] out.
extern "C" __global__ void ls_batch(int n, int B, const double* __restrict__ c, const double* __restrict__ ct,
                                    int* P, int* S, double* ARC, double* FWD, double* BWD, int exact, double eps,
                                    int max_moves, int tpr, double* cost, int* moves) {
    const int b = blockIdx.x;
    if (b >= B) return;
    const size_t off = (size_t)b * n;
    int* p = P + off;
    double* arc = ARC + off;
    double* fwd = FWD + off;
    double* bwd = BWD + off;
    block_state(n, c, p, arc, fwd, bwd, exact);
    bool aborted;
    const int mv = block_descent(n, c, ct, p, S + off, arc, fwd, bwd, exact, eps, max_moves, tpr, 0ull, &aborted);
    if (threadIdx.x == 0) {
        cost[b] = fwd[n - 1] + arc[n - 1];
        moves[b] = mv;
    }
}

// One block: the nearest-neighbour tour of local_search.nearest_neighbour_tour on a device matrix (so that
// a matrix made on the device never goes to the host for the start tour): p[0] = first, last (if >= 0 and
// not first) kept for p[n-1]; each step appends the unused stop v nearest to the current one by c[cur, v],
// ties to the lowest index (the CPU twin's rule: the key (c, v) reduced with block_argmin). used: int32 (n)
// scratch, 1 for the stops placed (and last). budget_ns > 0: the device clock is read before each step and
// the tour stops growing budget_ns after the launch; placed[0] = the stops placed (n - 1 or n when it ran
// to the end), and the host puts the others in index order (local_search.nearest_neighbour_paced's rule).
extern "C" __global__ void ls_nearest(int n, const double* __restrict__ c, int first, int last, int* p, int* used,
                                      unsigned long long budget_ns, int* placed) {
    __shared__ unsigned long long s_t0;
    __shared__ int s_stop;
    if (threadIdx.x == 0) s_t0 = gtimer();
    for (int v = threadIdx.x; v < n; v += blockDim.x) used[v] = 0;
    __syncthreads();
    const unsigned long long stop_at = budget_ns ? s_t0 + budget_ns : 0ull;
    const bool fixed_end = last >= 0 && last != first;
    const int limit = fixed_end ? n - 1 : n;
    if (threadIdx.x == 0) {
        p[0] = first;
        used[first] = 1;
        if (last >= 0) used[last] = 1;
        if (fixed_end) p[n - 1] = last;
    }
    __syncthreads();
    int cur = first;
    int m = 1;
    for (; m < limit; ++m) {
        if (stop_at) {
            if (threadIdx.x == 0) s_stop = gtimer() >= stop_at;
            __syncthreads();
            if (s_stop) break;
        }
        const double* row = c + (size_t)cur * n;
        double bd = ls_inf();
        int bi = LS_NONE, br = 0;
        for (int v = threadIdx.x; v < n; v += blockDim.x)
            if (!used[v]) take(row[v], v, 0, bd, bi, br);
        block_argmin(bd, bi, br);
        if (threadIdx.x == 0) {
            p[m] = bi;
            used[bi] = 1;
        }
        __syncthreads();
        cur = bi;
    }
    if (threadIdx.x == 0) placed[0] = m;
}

// One thread: stop_at[0] = now + budget_ns on the device clock (0: no limit), the common end of the ILS
// launch that follows (blocks of a later wave stop then too, not a budget after their own start).
extern "C" __global__ void ls_set_stop(unsigned long long budget_ns, unsigned long long* stop_at) {
    if (threadIdx.x == 0) stop_at[0] = budget_ns ? gtimer() + budget_ns : 0ull;
}

// Block b runs `iters` iterated-local-search steps of chain b: tour = double bridge of CUR[b] at the
// cut points cuts[b][it] = (a, m, e), 1 <= a < m < e <= n (tour = cur[0..a) cur[m..e) cur[a..m) cur[e..n),
// local_search.double_bridge; a == 0: no perturbation), descent, then CUR[b] = tour when its cost is at
// most cur_cost[b] + eps. stop_at_p[0] > 0 (ls_set_stop): the blocks stop at that device-clock time; the
// step under way is abandoned and rejected, so CUR[b] stays a local minimum. moves[b], improved[b]
// (steps that lowered the cost by more than eps) and steps[b] (steps completed) accumulate.
extern "C" __global__ void ls_ils(int n, int B, int iters, const double* __restrict__ c,
                                  const double* __restrict__ ct, int* CUR, double* cur_cost, int* P, int* S,
                                  double* ARC, double* FWD, double* BWD, const int* __restrict__ cuts, int exact,
                                  double eps, int max_moves, int tpr, const unsigned long long* __restrict__ stop_at_p,
                                  int* moves, int* improved, int* steps) {
    const int b = blockIdx.x;
    if (b >= B) return;
    const size_t off = (size_t)b * n;
    int* cur = CUR + off;
    int* p = P + off;
    double* arc = ARC + off;
    double* fwd = FWD + off;
    double* bwd = BWD + off;
    __shared__ int s_accept;
    const unsigned long long stop_at = stop_at_p[0];
    int mv = 0, imp = 0, done = 0;
    for (int it = 0; it < iters; ++it) {
        const int* cu = cuts + ((size_t)b * iters + it) * 3;
        const int a = cu[0], m = cu[1], e = cu[2];
        for (int t = threadIdx.x; t < n; t += blockDim.x) {
            int s = t;
            if (a > 0 && t >= a && t < e) s = t < a + (e - m) ? m + (t - a) : a + (t - a - (e - m));
            p[t] = cur[s];
        }
        __syncthreads();
        block_state(n, c, p, arc, fwd, bwd, exact);
        bool aborted;
        mv += block_descent(n, c, ct, p, S + off, arc, fwd, bwd, exact, eps, max_moves, tpr, stop_at, &aborted);
        if (aborted) break;  // the same in every thread
        ++done;
        if (threadIdx.x == 0) {
            const double qc = fwd[n - 1] + arc[n - 1];
            const double cc = cur_cost[b];
            s_accept = qc <= cc + eps;
            if (qc < cc - eps) ++imp;
            if (s_accept) cur_cost[b] = qc;
        }
        __syncthreads();
        if (s_accept) {
            for (int t = threadIdx.x; t < n; t += blockDim.x) cur[t] = p[t];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        moves[b] += mv;
        improved[b] += imp;
        steps[b] += done;
    }
}

// Grid (ceil(n / blockDim.x), B): every chain but `best` takes chain best's tour and cost.
extern "C" __global__ void ls_broadcast(int n, int B, int best, int* CUR, double* cur_cost) {
    const int b = blockIdx.y;
    if (b >= B || b == best) return;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) CUR[(size_t)b * n + t] = CUR[(size_t)best * n + t];
    if (t == 0) cur_cost[b] = cur_cost[best];
}

// ================================================================================== candidate lists
// The GPU twin of local_search.local_search_queue (the CPU's candidate-list descent) and of its ILS
// (local_search.ils_round). nbr (n x K, int32) holds the K nearest stops of each stop
// (local_search.candidate_lists). The moves around a pair of positions (x, y) are those of
// local_search._pair_best, numbered by a slot 0..22 in the CPU's order of evaluation:
//   0: 2-opt (x, y) [y >= x + 2]       1: 2-opt (x - 1, y - 1 or n - 1)     2: 2-opt (y, x) [x >= y + 2]
//   3, 4: swap of p[y] with p[x + 1], p[x - 1] (cyclic)
//   5, 6: relocate p[y] after p[x], p[x - 1]
//   7..14 (L = 2), 15..22 (L = 3): segment starting (side 0) / ending (side 1) at y, inserted after p[x]
//         (h 0) / p[x - 1] (h 1), kept then reversed: slot = 7 + 8 (L - 2) + 4 side + 2 h + rev
// A stop u's moves are the work items w = q * 23 + slot (q: candidate index), the CPU's order, and the
// block reduces on the key (delta, w): the smallest delta, ties to the first the CPU finds (its strict
// "<"). The polish scan (every stop, local_search._best_candidates) uses w = x * 23 K + q * 23 + slot.
// Deltas are computed with the CPU delta functions' operations in their order (no products, so no FMA),
// over the prefix sums of block_state, so they are bitwise the CPU's.
#define CAND_SLOTS 23

__device__ __forceinline__ double cd_two_opt(int n, const double* c, const int* p, const double* fwd,
                                             const double* bwd, int i, int j) {
    const size_t N = (size_t)n;
    const int a = p[i], b = p[i + 1], e = p[j], d = p[j + 1 < n ? j + 1 : 0];
    return ((((c[a * N + e] + c[b * N + d]) - c[a * N + b]) - c[e * N + d]) + (bwd[j] - bwd[i + 1]))
           - (fwd[j] - fwd[i + 1]);
}

// local_search.delta_or_opt: p[i..j] moved between p[k] and p[k+1], reversed if rev.
__device__ __forceinline__ double cd_or_opt(int n, const double* c, const int* p, const double* fwd,
                                            const double* bwd, int i, int j, int k, int rev) {
    const size_t N = (size_t)n;
    const int prv = p[(i - 1 + n) % n], nxt = p[(j + 1) % n], sf = p[i], sl = p[j];
    const int u = p[k], w = p[(k + 1) % n];
    double d = ((c[prv * N + nxt] - c[prv * N + sf]) - c[sl * N + nxt]) - c[u * N + w];
    if (rev) d = d + (((c[u * N + sl] + c[sf * N + w]) + (bwd[j] - bwd[i])) - (fwd[j] - fwd[i]));
    else d = d + (c[u * N + sf] + c[sl * N + w]);
    return d;
}

// local_search.delta_swap (i < j).
__device__ __forceinline__ double cd_swap(int n, const double* c, const int* p, int i, int j) {
    if (j == i + 1 || (i == 0 && j == n - 1)) return delta_swap_adjacent(n, c, p, i, j);
    const size_t N = (size_t)n;
    const int x = p[i], y = p[j];
    const int ap = p[(i - 1 + n) % n], an = p[i + 1], bp = p[j - 1], bn = p[(j + 1) % n];
    return ((((((c[ap * N + y] + c[y * N + an]) + c[bp * N + x]) + c[x * N + bn]) - c[ap * N + x])
             - c[x * N + an]) - c[bp * N + y]) - c[y * N + bn];
}

// Move `slot` of the pair (x, y) (table above): its delta, or +inf when the slot holds no legal move.
__device__ double cand_slot(int n, const double* c, const int* p, const double* fwd, const double* bwd, int x,
                            int y, int slot, int& t, int& i, int& j, int& k) {
    const double inf = ls_inf();
    k = -1;
    if (slot == 0) {
        if (y < x + 2) return inf;
        t = MV_TWO_OPT; i = x; j = y;
        return cd_two_opt(n, c, p, fwd, bwd, i, j);
    }
    if (slot == 1) {
        i = x - 1; j = y > 0 ? y - 1 : n - 1;
        if (i < 0 || j < i + 2) return inf;
        t = MV_TWO_OPT;
        return cd_two_opt(n, c, p, fwd, bwd, i, j);
    }
    if (slot == 2) {
        if (x < y + 2) return inf;
        t = MV_TWO_OPT; i = y; j = x;
        return cd_two_opt(n, c, p, fwd, bwd, i, j);
    }
    if (slot < 5) {
        const int s = slot == 3 ? (x + 1) % n : (x - 1 + n) % n;
        if (s == y) return inf;
        t = MV_SWAP; i = min(s, y); j = max(s, y);
        return cd_swap(n, c, p, i, j);
    }
    int q = slot - 5, L, side, h, rev;
    if (q < 2) { L = 1; side = 0; h = q; rev = 0; }
    else { q -= 2; L = 2 + q / 8; q -= (L - 2) * 8; side = q / 4; h = (q / 2) % 2; rev = q % 2; }
    const int s0 = side == 0 ? y : y - L + 1;
    const int e0 = s0 + L - 1;
    if (s0 < 0 || e0 >= n) return inf;
    k = h == 0 ? x : (x - 1 + n) % n;
    if (k < 0 || k >= n || (s0 <= k && k <= e0) || k == (s0 - 1 + n) % n) return inf;  // _or_valid
    i = s0; j = e0;
    t = L == 1 ? MV_RELOCATE : (rev ? MV_OR_OPT_REV : MV_OR_OPT);
    return cd_or_opt(n, c, p, fwd, bwd, i, j, k, rev);
}

// Stops whose arcs move (t, i, j, k) changes, before it is applied (local_search._touched).
__device__ int cand_touched(int n, const int* p, int t, int i, int j, int k, int* out) {
    if (t == MV_TWO_OPT) {
        out[0] = p[i]; out[1] = p[i + 1]; out[2] = p[j]; out[3] = p[(j + 1) % n];
        return 4;
    }
    if (t == MV_SWAP) {
        out[0] = p[(i - 1 + n) % n]; out[1] = p[i]; out[2] = p[(i + 1) % n];
        out[3] = p[(j - 1 + n) % n]; out[4] = p[j]; out[5] = p[(j + 1) % n];
        return 6;
    }
    out[0] = p[(i - 1 + n) % n]; out[1] = p[i]; out[2] = p[j]; out[3] = p[(j + 1) % n];
    out[4] = p[k]; out[5] = p[(k + 1) % n];
    return 6;
}

// pos (inverse of p), arcs and prefix sums of the tour p (whole block; p written before a barrier); inq,
// when given, cleared.
__device__ void cand_state(int n, const double* c, const int* p, int* pos, int* inq, double* arc, double* fwd,
                           double* bwd, int exact) {
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        pos[p[t]] = t;
        if (inq) inq[t] = 0;
    }
    block_state(n, c, p, arc, fwd, bwd, exact);  // its barriers publish pos and inq too
}

// Queue-driven descent of one tour by one block, local_search.local_search_queue step for step: a FIFO
// ring queue[(head + size) % n] of stops (inq marks them), seeded with seed[0..n_seed) in order (repeats
// dropped); pop u, the best move among those creating an arc between u and a candidate of u; apply it if
// it gains more than eps and push the stops whose arcs changed, then u. With `polish`, an empty queue is
// refilled by the best move of the whole candidate neighbourhood (pushing its touched stops) until that
// finds nothing. The state must be built (cand_state). stop_at > 0: abandoned at that device-clock time
// (*aborted = true) as block_descent does. Returns the moves applied (the same in every thread).
__device__ int block_cand_descent(int n, const double* c, const int* nbr, int K, int* p, int* pos, int* scratch,
                                  double* arc, double* fwd, double* bwd, int* queue, int* inq, const int* seed,
                                  int n_seed, int exact, double eps, int max_moves, int polish,
                                  unsigned long long stop_at, bool* aborted) {
    __shared__ int s_u, s_stop, s_head, s_size;
    const int per_stop = K * CAND_SLOTS;
    if (threadIdx.x == 0) {
        s_head = 0;
        s_size = 0;
        for (int h = 0; h < n_seed; ++h) {
            const int v = seed[h];
            if (!inq[v]) { inq[v] = 1; queue[(s_head + s_size) % n] = v; ++s_size; }
        }
    }
    __syncthreads();
    int moves = 0;
    *aborted = false;
    while (moves < max_moves) {
        if (stop_at) {
            if (threadIdx.x == 0) s_stop = gtimer() >= stop_at;
            __syncthreads();
            if (s_stop) { *aborted = true; break; }
        }
        if (threadIdx.x == 0) {
            if (s_size == 0) {
                s_u = -1;
            } else {
                const int u = queue[s_head];
                s_head = (s_head + 1) % n;
                --s_size;
                inq[u] = 0;
                s_u = u;
            }
        }
        __syncthreads();
        const int u = s_u;
        if (u < 0 && !polish) break;  // the same in every thread
        const int W = u >= 0 ? per_stop : n * per_stop;
        const int xu = u >= 0 ? pos[u] : 0;
        double bd = ls_inf();
        int bw = LS_NONE, zero = 0;
        for (int w = threadIdx.x; w < W; w += blockDim.x) {
            const int xi = w / per_stop;
            const int r = w - xi * per_stop;
            const int q = r / CAND_SLOTS;
            const int slot = r - q * CAND_SLOTS;
            const int x = u >= 0 ? xu : xi;
            const int y = pos[nbr[(size_t)p[x] * K + q]];
            if (y == x) continue;
            int t, i, j, k;
            const double d = cand_slot(n, c, p, fwd, bwd, x, y, slot, t, i, j, k);
            take(d, w, 0, bd, bw, zero);
        }
        block_argmin(bd, bw, zero);
        if (!(bd < -eps) || bw == LS_NONE) {
            if (u < 0) break;  // polish found nothing: a local minimum of the candidate neighbourhood
            continue;
        }
        // the move of key bw, decoded alike in every thread
        const int xi = bw / per_stop;
        const int r = bw - xi * per_stop;
        const int q = r / CAND_SLOTS;
        const int slot = r - q * CAND_SLOTS;
        const int x = u >= 0 ? xu : xi;
        const int y = pos[nbr[(size_t)p[x] * K + q]];
        int t, i, j, k;
        cand_slot(n, c, p, fwd, bwd, x, y, slot, t, i, j, k);
        int tch[6], m = 0;
        if (threadIdx.x == 0) m = cand_touched(n, p, t, i, j, k, tch);  // read before block_apply's barrier
        block_apply(n, p, scratch, t, i, j, k);
        cand_state(n, c, p, pos, nullptr, arc, fwd, bwd, exact);
        ++moves;
        if (threadIdx.x == 0) {
            for (int h = 0; h <= m; ++h) {
                const int v = h == m ? u : tch[h];
                if (v < 0) continue;  // polish pushes the touched stops only
                if (!inq[v]) { inq[v] = 1; queue[(s_head + s_size) % n] = v; ++s_size; }
            }
        }
        // thread 0 alone reads and writes the queue; the next barrier is at the top of the loop
    }
    return moves;
}

// Block b: the candidate descent of tour P[b] (B x n) in place, the queue seeded with active[0..n_active)
// (local_search.local_search_queue(c, p, nbr, eps, max_moves, active, polish)); cost[b] (closed-tour
// cost, summed as the CPU's tour_cost) and moves[b] out. budget_ns > 0: the descent stops budget_ns after
// the block started (device clock, read before each move), keeping the tour reached; complete[b] = 0 then
// (1 when the descent ended by itself).
extern "C" __global__ void ls_cand_batch(int n, int B, const double* __restrict__ c, const int* __restrict__ nbr,
                                         int K, int* P, int* POS, int* S, double* ARC, double* FWD, double* BWD,
                                         int* QUEUE, int* INQ, int exact, double eps, int max_moves, int polish,
                                         const int* __restrict__ active, int n_active, double* cost, int* moves,
                                         unsigned long long budget_ns, int* complete) {
    const int b = blockIdx.x;
    if (b >= B) return;
    __shared__ unsigned long long s_t0;
    if (threadIdx.x == 0) s_t0 = gtimer();
    __syncthreads();
    const unsigned long long stop_at = budget_ns ? s_t0 + budget_ns : 0ull;
    const size_t off = (size_t)b * n;
    int* p = P + off;
    int* pos = POS + off;
    double* arc = ARC + off;
    double* fwd = FWD + off;
    double* bwd = BWD + off;
    cand_state(n, c, p, pos, INQ + off, arc, fwd, bwd, exact);
    bool aborted;
    const int mv = block_cand_descent(n, c, nbr, K, p, pos, S + off, arc, fwd, bwd, QUEUE + off, INQ + off, active,
                                      n_active, exact, eps, max_moves, polish, stop_at, &aborted);
    if (threadIdx.x == 0) {
        cost[b] = fwd[n - 1] + arc[n - 1];
        moves[b] = mv;
        complete[b] = aborted ? 0 : 1;
    }
}

// ls_ils with the candidate descent (local_search.ils_round): block b runs `iters` steps of chain b, each a
// double bridge of CUR[b] at cuts[b][it] = (a, m, e) (a == 0: none), the candidate descent seeded with the
// six stops around the cuts in local_search.double_bridge's order (cur[a-1], cur[a], cur[m-1], cur[m],
// cur[e-1], cur[e]), no polish, and CUR[b] = tour when its cost is at most cur_cost[b] + eps. stop_at_p,
// moves, improved, steps: as ls_ils.
extern "C" __global__ void ls_cand_ils(int n, int B, int iters, const double* __restrict__ c,
                                       const int* __restrict__ nbr, int K, int* CUR, double* cur_cost, int* P,
                                       int* POS, int* S, double* ARC, double* FWD, double* BWD, int* QUEUE,
                                       int* INQ, const int* __restrict__ cuts, int exact, double eps,
                                       int max_moves, const unsigned long long* __restrict__ stop_at_p, int* moves,
                                       int* improved, int* steps) {
    const int b = blockIdx.x;
    if (b >= B) return;
    const size_t off = (size_t)b * n;
    int* cur = CUR + off;
    int* p = P + off;
    int* pos = POS + off;
    double* arc = ARC + off;
    double* fwd = FWD + off;
    double* bwd = BWD + off;
    __shared__ int s_accept, s_seed[6], s_nseed;
    const unsigned long long stop_at = stop_at_p[0];
    int mv = 0, imp = 0, done = 0;
    for (int it = 0; it < iters; ++it) {
        const int* cu = cuts + ((size_t)b * iters + it) * 3;
        const int a = cu[0], m = cu[1], e = cu[2];
        for (int t = threadIdx.x; t < n; t += blockDim.x) {
            int s = t;
            if (a > 0 && t >= a && t < e) s = t < a + (e - m) ? m + (t - a) : a + (t - a - (e - m));
            p[t] = cur[s];
        }
        if (threadIdx.x == 0) {
            s_nseed = a > 0 ? 6 : 0;
            if (a > 0) {
                s_seed[0] = cur[a - 1]; s_seed[1] = cur[a]; s_seed[2] = cur[m - 1];
                s_seed[3] = cur[m]; s_seed[4] = cur[e - 1]; s_seed[5] = cur[e % n];
            }
        }
        __syncthreads();
        cand_state(n, c, p, pos, INQ + off, arc, fwd, bwd, exact);
        bool aborted;
        mv += block_cand_descent(n, c, nbr, K, p, pos, S + off, arc, fwd, bwd, QUEUE + off, INQ + off, s_seed,
                                 s_nseed, exact, eps, max_moves, 0, stop_at, &aborted);
        if (aborted) break;  // the same in every thread
        ++done;
        if (threadIdx.x == 0) {
            const double qc = fwd[n - 1] + arc[n - 1];
            const double cc = cur_cost[b];
            s_accept = qc <= cc + eps;
            if (qc < cc - eps) ++imp;
            if (s_accept) cur_cost[b] = qc;
        }
        __syncthreads();
        if (s_accept) {
            for (int t = threadIdx.x; t < n; t += blockDim.x) cur[t] = p[t];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        moves[b] += mv;
        improved[b] += imp;
        steps[b] += done;
    }
}

#include "gpuroute_common.cuh"
// Isochrone lattice on the GPU (launcher: gpuroute/engine/services/isochrone/lattice.py, IsochroneGPU; the numba twin is in
// the same module): node costs from PHAST rows (or the arcs' entry costs of the CPU's turn-aware search, by_arc),
// the reachable pieces' extent, their marks on the lattice,
// and the field codes of every contour (two separable passes). Every floating-point step is written with
// explicit round-to-nearest intrinsics (no fused multiply-add), in the twin's order, so that the codes
// equal the twin's bit for bit.

#define ISO_FAR 255

// East/north metres of (lon, lat) in the frame of (lon0, lat0): the twin's _local.
__device__ __forceinline__ void iso_local(double lon, double lat, double lon0, double lat0, double kx, double ky,
                                          double* x, double* y) {
    double t = __dadd_rn(__dsub_rn(lon, lon0), 180.0);
    double md = fmod(t, 360.0);
    if (md < 0.0) md = __dadd_rn(md, 360.0);
    *x = __dmul_rn(__dsub_rn(md, 180.0), kx);
    *y = __dmul_rn(__dsub_rn(lat, lat0), ky);
}

// End points of the reachable piece of an arc: the twin's _piece.
__device__ __forceinline__ void iso_piece(double tx, double ty, double hx, double hy, double lo, double budget,
                                          double wa, double* x0, double* y0, double* x1, double* y1) {
    double hi = 1.0;
    if (wa > 0.0) hi = fmin(1.0, __dadd_rn(lo, __dmul_rn(fmax(budget, 0.0), __ddiv_rn(1.0, wa))));
    double dx = __dsub_rn(hx, tx), dy = __dsub_rn(hy, ty);
    *x0 = __dadd_rn(tx, __dmul_rn(lo, dx));
    *y0 = __dadd_rn(ty, __dmul_rn(lo, dy));
    *x1 = __dadd_rn(tx, __dmul_rn(hi, dx));
    *y1 = __dadd_rn(ty, __dmul_rn(hi, dy));
}

// Monotone map of a double onto a signed 64-bit key (and back: the map is its own inverse).
__device__ __forceinline__ long long iso_key(double v) {
    long long b = __double_as_longlong(v);
    return b >= 0 ? b : (b ^ 0x7FFFFFFFFFFFFFFFLL);
}

// best[v] = min over sources s with rows[s][v] <= bounds[s] of rows[s][v] + offs[s] (+inf: none).
extern "C" __global__ void iso_best(int n, int k, const long long* __restrict__ rows, const long long* __restrict__ bounds,
                                    const double* __restrict__ offs, double* __restrict__ best) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    double b = __longlong_as_double(0x7FF0000000000000LL);  // +inf
    for (int s = 0; s < k; ++s) {
        long long d = rows[(long long)s * n + v];
        if (d <= bounds[s]) {
            double x = __dadd_rn((double)d, offs[s]);
            if (x < b) b = x;
        }
    }
    best[v] = b;
}

// Item i < m: arc i from a reached tail (lo = 0, budget = C - d(tail)); item m + j: the origin's arc
// o_arc[j] from its fraction o_frac[j] (budget C). Returns false when the item draws nothing for contour q.
// by_arc: best holds per ARC its entry cost (the turn-aware search's), d(tail) reads best[a] (the twin's
// _pieces with by_arc); else per node, best[tail[a]].
__device__ __forceinline__ bool iso_item(long long i, int m, const int* __restrict__ tail, const int* __restrict__ head,
                                         const double* __restrict__ lon, const double* __restrict__ lat,
                                         const double* __restrict__ w, const double* __restrict__ best,
                                         const double* __restrict__ cus, int q, const int* __restrict__ o_arc,
                                         const double* __restrict__ o_frac, double lon0, double lat0, double kx,
                                         double ky, int by_arc, double* x0, double* y0, double* x1, double* y1) {
    int a, u;
    double lo, budget;
    if (i < m) {
        a = (int)i;
        u = tail[a];
        double du = by_arc ? best[a] : best[u];
        if (!(du <= cus[q])) return false;
        lo = 0.0;
        budget = __dsub_rn(cus[q], du);
    } else {
        a = o_arc[i - m];
        u = tail[a];
        lo = o_frac[i - m];
        budget = cus[q];
    }
    int v = head[a];
    double tx, ty, hx, hy;
    iso_local(lon[u], lat[u], lon0, lat0, kx, ky, &tx, &ty);
    iso_local(lon[v], lat[v], lon0, lat0, kx, ky, &hx, &hy);
    iso_piece(tx, ty, hx, hy, lo, budget, w[a], x0, y0, x1, y1);
    return true;
}

// ext[q][0..3] = (xmin, ymin, xmax, ymax) of the pieces' end points, as iso_key values (pre-set to the
// keys of +inf, +inf, -inf, -inf). One warp reduction per contour, one atomic per warp and value.
extern "C" __global__ void iso_extent(int m, int n_o, int K, const int* __restrict__ tail, const int* __restrict__ head,
                                      const double* __restrict__ lon, const double* __restrict__ lat,
                                      const double* __restrict__ w, const double* __restrict__ best,
                                      const double* __restrict__ cus, const int* __restrict__ o_arc,
                                      const double* __restrict__ o_frac, double lon0, double lat0, double kx, double ky,
                                      long long* __restrict__ ext, int by_arc) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool live = i < (long long)m + n_o;
    const double inf = __longlong_as_double(0x7FF0000000000000LL);
    for (int q = 0; q < K; ++q) {
        double a0 = inf, a1 = inf, a2 = -inf, a3 = -inf;
        double x0, y0, x1, y1;
        if (live && iso_item(i, m, tail, head, lon, lat, w, best, cus, q, o_arc, o_frac, lon0, lat0, kx, ky, by_arc, &x0,
                             &y0, &x1, &y1)) {
            a0 = fmin(x0, x1);
            a1 = fmin(y0, y1);
            a2 = fmax(x0, x1);
            a3 = fmax(y0, y1);
        }
        for (int off = 16; off > 0; off >>= 1) {
            a0 = fmin(a0, __shfl_down_sync(0xFFFFFFFFu, a0, off));
            a1 = fmin(a1, __shfl_down_sync(0xFFFFFFFFu, a1, off));
            a2 = fmax(a2, __shfl_down_sync(0xFFFFFFFFu, a2, off));
            a3 = fmax(a3, __shfl_down_sync(0xFFFFFFFFu, a3, off));
        }
        if ((threadIdx.x & 31) == 0 && a0 <= a2) {
            atomicMin(&ext[4 * q + 0], iso_key(a0));
            atomicMin(&ext[4 * q + 1], iso_key(a1));
            atomicMax(&ext[4 * q + 2], iso_key(a2));
            atomicMax(&ext[4 * q + 3], iso_key(a3));
        }
    }
}

// marked[q][y][x] = 1 at every sample of every piece (samples every cell, both ends included).
extern "C" __global__ void iso_mark(int m, int n_o, int K, const int* __restrict__ tail, const int* __restrict__ head,
                                    const double* __restrict__ lon, const double* __restrict__ lat,
                                    const double* __restrict__ w, const double* __restrict__ best,
                                    const double* __restrict__ cus, const int* __restrict__ o_arc,
                                    const double* __restrict__ o_frac, double lon0, double lat0, double kx, double ky,
                                    double cell, long long i0, long long j0, int W, int H,
                                    unsigned char* __restrict__ marked, int by_arc) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)m + n_o) return;
    for (int q = 0; q < K; ++q) {
        double x0, y0, x1, y1;
        if (!iso_item(i, m, tail, head, lon, lat, w, best, cus, q, o_arc, o_frac, lon0, lat0, kx, ky, by_arc, &x0, &y0,
                      &x1, &y1))
            break;  // contours run largest first
        double p0x = __ddiv_rn(x0, cell), p0y = __ddiv_rn(y0, cell);
        double sx = __dsub_rn(__ddiv_rn(x1, cell), p0x), sy = __dsub_rn(__ddiv_rn(y1, cell), p0y);
        long long n = (long long)ceil(__dsqrt_rn(__dadd_rn(__dmul_rn(sx, sx), __dmul_rn(sy, sy)))) + 1;
        double den = (double)(n - 1 > 1 ? n - 1 : 1);
        sx = __ddiv_rn(sx, den);
        sy = __ddiv_rn(sy, den);
        unsigned char* mq = marked + (long long)q * H * W;
        for (long long k = 0; k < n; ++k) {
            long long ix = (long long)floor(__dadd_rn(p0x, __dmul_rn((double)k, sx))) - i0;
            long long iy = (long long)floor(__dadd_rn(p0y, __dmul_rn((double)k, sy))) - j0;
            mq[iy * W + ix] = 1;
        }
    }
}

// hsq[y][x] = min over |dx| <= m, x + dx in [x0, x1), marked[y][x + dx] of dx^2 (0x3FFF: none), for the
// window rows [y0, y1) and columns [x0, x1) of one contour (a thread per window point, row-major).
extern "C" __global__ void iso_hpass(int W, int x0, int y0, int x1, int y1, int m,
                                     const unsigned char* __restrict__ marked_q, unsigned short* __restrict__ hsq) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long ww = x1 - x0;
    if (i >= ww * (y1 - y0)) return;
    int y = y0 + (int)(i / ww);
    int x = x0 + (int)(i % ww);
    const unsigned char* row = marked_q + (long long)y * W;
    unsigned short h = 0x3FFF;
    for (int dx = -m; dx <= m; ++dx) {
        int xx = x + dx;
        if (xx < x0 || xx >= x1) continue;
        unsigned short c = (unsigned short)(dx * dx);
        if (row[xx] && c < h) h = c;
    }
    hsq[(long long)y * W + x] = h;
}

// codes[q][y][x] = code_of[min over |dy| <= m, y + dy in [y0, y1) of hsq[y + dy][x] + dy^2] (FAR beyond
// the table), raised to codes[q - 1][y][x]; FAR outside the window. A thread per lattice point of the grid.
extern "C" __global__ void iso_vpass(int q, int W, int H, int x0, int y0, int x1, int y1, int m,
                                     const unsigned char* __restrict__ code_of, int n_code,
                                     const unsigned short* __restrict__ hsq, unsigned char* __restrict__ codes) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)W * H) return;
    int y = (int)(i / W);
    int x = (int)(i % W);
    long long at = ((long long)q * H + y) * W + x;
    if (x < x0 || x >= x1 || y < y0 || y >= y1) {
        codes[at] = ISO_FAR;
        return;
    }
    unsigned int acc = 0x3FFF;
    for (int dy = -m; dy <= m; ++dy) {
        int yy = y + dy;
        if (yy < y0 || yy >= y1) continue;
        unsigned int s = (unsigned int)hsq[(long long)yy * W + x] + (unsigned int)(dy * dy);
        if (s < acc) acc = s;
    }
    unsigned char code = acc < (unsigned int)n_code ? code_of[acc] : (unsigned char)ISO_FAR;
    if (q > 0) {
        unsigned char p = codes[at - (long long)H * W];
        if (p > code) code = p;
    }
    codes[at] = code;
}

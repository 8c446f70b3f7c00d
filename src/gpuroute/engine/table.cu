// The phantom-node step of the engine's /table (gpuroute.engine.table_combine; CPU twin: its numba
// kernel): for every cell (i, j), the cheapest of the source phantom's options a (an arc, the rest of it
// costing sc[i, a]) and the target phantom's options b (an arc, its start costing tc[j, b]):
//   via  = sc[i, a] + d[si[i, a] * nt + ti[j, b]] + tc[j, b]       (d: the hierarchy's node table)
//   same = (tf[j, b] - sf[i, a]) * ws[i, a]   where a == b and sf <= tf (both on one arc, in order)
// minimised in option order (a major), the first minimum kept; the chosen options and whether the
// same-arc route won are written beside the cost. One thread per cell; costs are float64 with +inf for
// "no route" (d already converted).
#include "gpuroute_common.cuh"

extern "C" __global__ void table_combine(int S, int T, int ko, int kt, int nt, const double* __restrict__ d,
                                         const long long* __restrict__ si, const long long* __restrict__ ti,
                                         const double* __restrict__ sc, const double* __restrict__ tc,
                                         const long long* __restrict__ sa, const long long* __restrict__ ta,
                                         const double* __restrict__ sf, const double* __restrict__ tf,
                                         const double* __restrict__ ws, double* __restrict__ best,
                                         long long* __restrict__ so, long long* __restrict__ to,
                                         unsigned char* __restrict__ same_won) {
    long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (long long)S * T) return;
    int i = (int)(x / T);
    int j = (int)(x - (long long)i * T);
    double b = __longlong_as_double(0x7ff0000000000000LL);  // +inf
    long long bo = 0, bt = 0;
    unsigned char bs = 0;
    for (int a = 0; a < ko; ++a) {
        long long arc_a = sa[(long long)i * ko + a];
        if (arc_a < 0) continue;
        double sca = sc[(long long)i * ko + a];
        const double* row = d + si[(long long)i * ko + a] * (long long)nt;
        double sfa = sf[(long long)i * ko + a];
        for (int c = 0; c < kt; ++c) {
            long long arc_c = ta[(long long)j * kt + c];
            if (arc_c < 0) continue;
            double via = sca + row[ti[(long long)j * kt + c]] + tc[(long long)j * kt + c];
            double tfc = tf[(long long)j * kt + c];
            double same = __longlong_as_double(0x7ff0000000000000LL);
            if (arc_a == arc_c && sfa <= tfc) same = (tfc - sfa) * ws[(long long)i * ko + a];
            double v = via < same ? via : same;
            if (v < b) { b = v; bo = a; bt = c; bs = same <= via; }
        }
    }
    best[x] = b;
    so[x] = bo;
    to[x] = bt;
    same_won[x] = bs;
}

"""The CPU twin of accessibility (numba): bounded Dijkstra searches with one reused heap per thread,
in parallel over sources (``prange``), folding what they settle into per-node accumulators.

Two formulations of "for every node ``v``, the points ``p`` with ``d(v, p) <= r``":

* **points** (:func:`aggregate_points`, :func:`nearest_points`): one bounded search from every distinct
  point node ``p`` over the *reverse* graph settles exactly the nodes ``v`` with ``d(v, p) <= r`` (a
  search on the transposed graph gives distances *to* its source); each folds ``p`` into ``v``'s
  accumulator. Threads own private accumulators (merged at the end), so memory is
  ``threads x n x (3 words, or 2k for nearest)``, capped by ``config.ACCESS_CPU_MAX_ACC_BYTES``.
* **nodes** (:func:`aggregate_nodes`, :func:`nearest_nodes`): one bounded search from every node over
  the forward graph gathers the points it settles. No merge; the nearest-POI search stops as soon as
  the k-th POI's distance is passed (Dijkstra settles by increasing distance), which wins when POIs are
  dense.

Both settle by Dijkstra (Dijkstra, "A note on two problems in connexion with graphs", Numer. Math. 1959)
with a lazy-deletion binary heap (:func:`gpuroute.sssp.dijkstra.heap_push`) and relax only arcs whose
head stays within the bound, as pandana's range queries do (Foti, Waddell, Luxen, "A Generalized
Computational Framework for Accessibility: From the Pedestrian to the Metropolitan Scale", TRB 2012).

Accumulators (one triple ``(a0, a1, cn)`` per node; :data:`MODES`; ``cn`` counts the values in range
in every mode): ``sum`` and ``mean``: ``a0 = sum w(d) x``; ``count``: ``cn``; ``std``: running mean
``a0`` and sum of squared deviations ``a1`` merged by Chan, Golub, LeVeque ("Updating Formulae and a Pairwise Algorithm
for Computing Sample Variances", 1979, eq. 2.1); ``min``/``max``: ``a0``. A point node carries the
count, sum, mean, M2, min and max of the values placed at it (:func:`point_stats`), so several values at
one node cost one fold. The GPU twin (``access.cu``) folds in the same order with the same operations.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from ..graph.constants import INF
from ..graph.heap import heap_pop, heap_push

_INF = INF
#: Accumulator modes, in the order of :data:`gpuroute.accessibility.TYPES`.
SUM, MEAN, STD, COUNT, MIN, MAX = 0, 1, 2, 3, 4, 5
MODES = {"sum": SUM, "mean": MEAN, "std": STD, "count": COUNT, "min": MIN, "max": MAX}
#: Decay codes.
FLAT, LINEAR, EXP = 0, 1, 2
DECAYS = {"flat": FLAT, "linear": LINEAR, "exp": EXP}
#: Empty slot of a nearest-POI list: (INF, NO_ID_KEY) sorts after every real (distance, poi) pair.
NO_ID_KEY = np.iinfo(np.int64).max


def point_stats(nodes, values):
    """Group the values by node: ``(P int64 (m,), cnt int64, s1, mean, m2, mn, mx float64 (m,))`` for the
    ``m`` distinct nodes ``P`` (sorted): count, sum, mean, sum of squared deviations from the mean
    (two-pass, exact for one value: 0), min and max of the values at each."""
    nodes = np.asarray(nodes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(nodes, kind="stable")
    ns, vs = nodes[order], values[order]
    if ns.size == 0:
        e = np.zeros(0)
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), e, e.copy(), e.copy(), e.copy(), e.copy()
    first = np.flatnonzero(np.r_[True, ns[1:] != ns[:-1]])
    P = ns[first]
    cnt = np.diff(np.r_[first, ns.size]).astype(np.int64)
    s1 = np.add.reduceat(vs, first)
    mean = s1 / cnt
    dev = vs - np.repeat(mean, cnt)
    m2 = np.add.reduceat(dev * dev, first)
    mn = np.minimum.reduceat(vs, first)
    mx = np.maximum.reduceat(vs, first)
    return P, cnt, s1, mean, m2, mn, mx


def init_acc(mode, shape):
    """Empty accumulators ``(a0, a1, cn)`` of ``shape``: a0 is +inf for min, -inf for max, else 0."""
    a0 = np.full(shape, np.inf if mode == MIN else (-np.inf if mode == MAX else 0.0))
    return a0, np.zeros(shape), np.zeros(shape, dtype=np.int64)


@njit(cache=True, inline="always")
def _decay(decay, x, radius):
    if decay == FLAT:
        return 1.0
    if decay == LINEAR:
        return 1.0 - x / radius
    return math.exp(-x / radius)


@njit(cache=True, inline="always")
def _fold(mode, decay, radius, x, j, cnt, s1, mean, m2, mn, mx, a0, a1, cn, v):
    """Fold point node ``j`` at distance ``x`` into node ``v``'s accumulator."""
    if mode == SUM or mode == MEAN:
        a0[v] = a0[v] + _decay(decay, x, radius) * s1[j]
        cn[v] += cnt[j]
    elif mode == COUNT:
        cn[v] += cnt[j]
    elif mode == STD:
        na = cn[v]
        nb = cnt[j]
        nn = na + nb
        delta = mean[j] - a0[v]
        a0[v] = a0[v] + delta * (float(nb) / float(nn))
        a1[v] = a1[v] + m2[j] + delta * delta * (float(na) * float(nb) / float(nn))
        cn[v] = nn
    elif mode == MIN:
        if mn[j] < a0[v]:
            a0[v] = mn[j]
        cn[v] += cnt[j]
    else:
        if mx[j] > a0[v]:
            a0[v] = mx[j]
        cn[v] += cnt[j]


@njit(cache=True)
def _ball(fo, hd, w, s, bound, dist, hk, hn, out_node, out_dist):
    """Bounded Dijkstra from ``s``: the nodes at distance ``<= bound`` in settling order into
    ``out_node``/``out_dist``; returns how many. ``dist`` (all INF on entry) is reset before returning."""
    r = 0
    dist[s] = 0
    size = heap_push(hk, hn, 0, 0, s)
    while size > 0:
        du, u, size = heap_pop(hk, hn, size)
        if du > dist[u]:
            continue
        out_node[r] = u
        out_dist[r] = du
        r += 1
        for a in range(fo[u], fo[u + 1]):
            v = hd[a]
            nd = du + w[a]
            if nd <= bound and nd < dist[v]:
                dist[v] = nd
                size = heap_push(hk, hn, size, nd, v)
    # every node whose distance was set was settled (pushes stay within the bound): reset them
    for i in range(r):
        dist[out_node[i]] = _INF
    return r


@njit(cache=True, parallel=True)
def _aggregate_points(rfo, rtl, rw, P, cnt, s1, mean, m2, mn, mx, bound, radius, decay, mode, heap_cap,
                      A0, A1, CN):
    n_chunks = A0.shape[0]
    n = rfo.shape[0] - 1
    m = P.shape[0]
    for ci in prange(n_chunks):
        lo = ci * m // n_chunks
        hi = (ci + 1) * m // n_chunks
        dist = np.full(n, _INF, dtype=np.int64)
        hk = np.empty(heap_cap, dtype=np.int64)
        hn = np.empty(heap_cap, dtype=np.int32)
        on = np.empty(n, dtype=np.int32)
        od = np.empty(n, dtype=np.int64)
        a0 = A0[ci]
        a1 = A1[ci]
        cn = CN[ci]
        for j in range(lo, hi):
            r = _ball(rfo, rtl, rw, P[j], bound, dist, hk, hn, on, od)
            for i in range(r):
                _fold(mode, decay, radius, od[i], j, cnt, s1, mean, m2, mn, mx, a0, a1, cn, on[i])


@njit(cache=True, parallel=True)
def _aggregate_nodes(fo, hd, w, pidx, cnt, s1, mean, m2, mn, mx, bound, radius, decay, mode, heap_cap, n_chunks,
                     a0, a1, cn):
    n = fo.shape[0] - 1
    for ci in prange(n_chunks):
        lo = ci * n // n_chunks
        hi = (ci + 1) * n // n_chunks
        dist = np.full(n, _INF, dtype=np.int64)
        hk = np.empty(heap_cap, dtype=np.int64)
        hn = np.empty(heap_cap, dtype=np.int32)
        on = np.empty(n, dtype=np.int32)
        od = np.empty(n, dtype=np.int64)
        for v in range(lo, hi):
            r = _ball(fo, hd, w, v, bound, dist, hk, hn, on, od)
            for i in range(r):
                j = pidx[on[i]]
                if j >= 0:
                    _fold(mode, decay, radius, od[i], j, cnt, s1, mean, m2, mn, mx, a0, a1, cn, v)


@njit(cache=True, inline="always")
def _insert(bd, bi, base, k, x, pid):
    """Insert ``(x, pid)`` into the sorted list ``bd/bi[base : base + k]`` (lexicographic order) if it is
    smaller than its last entry; returns False when it is not (nor is any later pid at this ``x``)."""
    last = base + k - 1
    if x > bd[last] or (x == bd[last] and pid >= bi[last]):
        return False
    i = last
    while i > base and (bd[i - 1] > x or (bd[i - 1] == x and bi[i - 1] > pid)):
        bd[i] = bd[i - 1]
        bi[i] = bi[i - 1]
        i -= 1
    bd[i] = x
    bi[i] = pid
    return True


@njit(cache=True, parallel=True)
def _nearest_points(rfo, rtl, rw, P, poi_first, poi_ids, bound, k, heap_cap, BD, BI):
    n_chunks = BD.shape[0]
    n = rfo.shape[0] - 1
    m = P.shape[0]
    for ci in prange(n_chunks):
        lo = ci * m // n_chunks
        hi = (ci + 1) * m // n_chunks
        dist = np.full(n, _INF, dtype=np.int64)
        hk = np.empty(heap_cap, dtype=np.int64)
        hn = np.empty(heap_cap, dtype=np.int32)
        on = np.empty(n, dtype=np.int32)
        od = np.empty(n, dtype=np.int64)
        bd = BD[ci]
        bi = BI[ci]
        for j in range(lo, hi):
            r = _ball(rfo, rtl, rw, P[j], bound, dist, hk, hn, on, od)
            for i in range(r):
                base = on[i] * k
                for q in range(poi_first[j], poi_first[j + 1]):
                    if not _insert(bd, bi, base, k, od[i], poi_ids[q]):
                        break


@njit(cache=True, parallel=True)
def _nearest_nodes(fo, hd, w, pidx, poi_first, poi_ids, bound, k, heap_cap, n_chunks, bd, bi):
    n = fo.shape[0] - 1
    for ci in prange(n_chunks):
        lo = ci * n // n_chunks
        hi = (ci + 1) * n // n_chunks
        dist = np.full(n, _INF, dtype=np.int64)
        hk = np.empty(heap_cap, dtype=np.int64)
        hn = np.empty(heap_cap, dtype=np.int32)
        touched = np.empty(n, dtype=np.int32)
        for v in range(lo, hi):
            base = v * k
            last = base + k - 1
            nt = 1
            touched[0] = v
            dist[v] = 0
            size = heap_push(hk, hn, 0, 0, v)
            while size > 0:
                du, u, size = heap_pop(hk, hn, size)
                if du > bd[last]:
                    break  # the k-th POI is nearer than anything left (ties at bd[last] still settle)
                if du > dist[u]:
                    continue
                j = pidx[u]
                if j >= 0:
                    for q in range(poi_first[j], poi_first[j + 1]):
                        if not _insert(bd, bi, base, k, du, poi_ids[q]):
                            break
                for a in range(fo[u], fo[u + 1]):
                    x = hd[a]
                    nd = du + w[a]
                    if nd <= bound and nd < dist[x]:
                        if dist[x] == _INF:
                            touched[nt] = x
                            nt += 1
                        dist[x] = nd
                        size = heap_push(hk, hn, size, nd, x)
            for i in range(nt):
                dist[touched[i]] = _INF


# ---------------------------------------------------------------------------------------------- Python side
def _threads():
    return max(1, int(numba.get_num_threads()))


def _point_chunks(n, per_node_bytes, m, chunks=None):
    """Chunks of the points formulation: one per thread, at least one, at most ``m``, and within
    ``config.ACCESS_CPU_MAX_ACC_BYTES`` of private accumulators."""
    from .. import config

    if chunks is None:
        chunks = config.ACCESS_CPU_CHUNKS
    if chunks is None:
        budget = int(config.ACCESS_CPU_MAX_ACC_BYTES)
        chunks = min(_threads(), max(1, budget // max(1, n * per_node_bytes)))
    return int(max(1, min(int(chunks), max(m, 1))))


def merge_acc(mode, a, b):
    """Merge accumulator ``b = (a0, a1, cn)`` into ``a`` (in place, vectorised; Chan et al. for std)."""
    a0, a1, cn = a
    b0, b1, bn = b
    if mode in (SUM, MEAN, COUNT):
        a0 += b0
    elif mode == STD:
        nn = cn + bn
        safe = np.maximum(nn, 1).astype(np.float64)
        delta = b0 - a0
        new0 = a0 + delta * (bn / safe)
        new1 = a1 + b1 + delta * delta * (cn.astype(np.float64) * bn / safe)
        take = bn > 0
        a0[take] = new0[take]
        a1[take] = new1[take]
        cn[:] = nn
    elif mode == MIN:
        np.minimum(a0, b0, out=a0)
    else:
        np.maximum(a0, b0, out=a0)
    if mode != STD:
        cn += bn
    return a


def aggregate_points(csr_rev, stats, bound, radius, decay, mode, chunks=None):
    """Accumulators ``(a0, a1, cn)`` (n,) of the points formulation (reverse searches from the point nodes).

    Parameters
    ----------
    csr_rev : (rfo, rtail, rweight)
        The reverse graph: arcs entering ``v`` at ``rfo[v]:rfo[v+1]``, their tails and weights.
    stats : tuple
        :func:`point_stats` of the points.
    bound : int
        Largest distance included (the radius rounded down, in the weight's unit).
    radius : float
        The radius of the decay.
    decay, mode : int
        :data:`DECAYS` and :data:`MODES` codes.
    chunks : int, optional
        Parallel chunks (private accumulators each); default one per thread within
        ``config.ACCESS_CPU_MAX_ACC_BYTES``. One chunk folds the points in ascending node order, as the GPU.
    """
    rfo, rtl, rw = csr_rev
    n = rfo.size - 1
    P, cnt, s1, mean, m2, mn, mx = stats
    c = _point_chunks(n, 24, P.size, chunks)
    A0, A1, CN = init_acc(mode, (c, n))
    _aggregate_points(rfo, rtl, rw, P, cnt, s1, mean, m2, mn, mx, int(bound), float(radius), int(decay), int(mode),
                      rw.size + 2, A0, A1, CN)
    acc = (A0[0].copy(), A1[0].copy(), CN[0].copy())
    for i in range(1, c):
        merge_acc(mode, acc, (A0[i], A1[i], CN[i]))
    return acc


def aggregate_nodes(csr, stats, bound, radius, decay, mode):
    """Accumulators ``(a0, a1, cn)`` (n,) of the nodes formulation (a forward search from every node)."""
    fo, hd, w = csr
    n = fo.size - 1
    P, cnt, s1, mean, m2, mn, mx = stats
    pidx = np.full(n, -1, dtype=np.int64)
    pidx[P] = np.arange(P.size)
    a0, a1, cn = init_acc(mode, n)
    chunks = max(1, min(n, 4 * _threads()))
    _aggregate_nodes(fo, hd, w, pidx, cnt, s1, mean, m2, mn, mx, int(bound), float(radius), int(decay), int(mode),
                     w.size + 2, chunks, a0, a1, cn)
    return a0, a1, cn


def _poi_csr(poi_nodes, P):
    """POIs grouped by their node's position in ``P``: ``(first int64 (m+1,), ids int64)``, ids ascending."""
    order = np.lexsort((np.arange(poi_nodes.size), poi_nodes))
    pos = np.searchsorted(P, poi_nodes[order])
    first = np.zeros(P.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(pos, minlength=P.size), out=first[1:])
    return first, order.astype(np.int64)


def empty_lists(shape):
    return np.full(shape, _INF, dtype=np.int64), np.full(shape, NO_ID_KEY, dtype=np.int64)


@njit(cache=True, parallel=True)
def _merge_lists(ad, ai, bd, bi, k):
    n = ad.shape[0] // k
    for v in prange(n):
        base = v * k
        td = np.empty(k, dtype=np.int64)
        ti = np.empty(k, dtype=np.int64)
        p = 0
        q = 0
        for r in range(k):
            x, y = base + p, base + q
            if p < k and (q >= k or ad[x] < bd[y] or (ad[x] == bd[y] and ai[x] <= bi[y])):
                td[r] = ad[x]
                ti[r] = ai[x]
                p += 1
            else:
                td[r] = bd[y]
                ti[r] = bi[y]
                q += 1
        for r in range(k):
            ad[base + r] = td[r]
            ai[base + r] = ti[r]


def merge_lists(k, a, b):
    """Merge sorted nearest lists ``b = (bd, bi)`` (n, k) into ``a`` (in place): per node the k smallest
    (distance, poi) pairs of both, in lexicographic order."""
    ad, ai = a
    bd, bi = b
    if ad.size:
        _merge_lists(ad.reshape(-1), ai.reshape(-1), np.ascontiguousarray(bd).reshape(-1),
                     np.ascontiguousarray(bi).reshape(-1), int(k))
    return a


def nearest_points(csr_rev, P, poi_first, poi_ids, bound, k, chunks=None):
    """The k nearest (distance, poi) pairs of every node (n, k) by reverse searches from the POI nodes."""
    rfo, rtl, rw = csr_rev
    n = rfo.size - 1
    c = _point_chunks(n, 16 * k, P.size, chunks)
    BD, BI = empty_lists((c, n * k))
    _nearest_points(rfo, rtl, rw, P, poi_first, poi_ids, int(bound), int(k), rw.size + 2, BD, BI)
    acc = (BD[0].reshape(n, k).copy(), BI[0].reshape(n, k).copy())
    for i in range(1, c):
        merge_lists(k, acc, (BD[i].reshape(n, k), BI[i].reshape(n, k)))
    return acc


def nearest_nodes(csr, P, poi_first, poi_ids, bound, k):
    """The k nearest (distance, poi) pairs of every node (n, k) by a forward search from every node that
    stops past the k-th POI."""
    fo, hd, w = csr
    n = fo.size - 1
    pidx = np.full(n, -1, dtype=np.int64)
    pidx[P] = np.arange(P.size)
    bd, bi = empty_lists(n * k)
    chunks = max(1, min(n, 4 * _threads()))
    _nearest_nodes(fo, hd, w, pidx, poi_first, poi_ids, int(bound), int(k), w.size + 2, chunks, bd, bi)
    return bd.reshape(n, k), bi.reshape(n, k)

"""The GPU side of accessibility, two methods (``config.ACCESS_GPU_METHOD``), both folding the points in
ascending order into per-node accumulators (``access.cu``), as the CPU twin (:mod:`.cpu`) does with one
chunk -- so the results are the twin's, bit for bit but for ``exp``:

* ``"ball"`` (the default where the graph is at hand): bounded searches on the reverse graph, a thread
  block per point node at a time (``ball_search``: label-correcting rounds pruned at the radius, on
  :meth:`gpuroute.backend.device_graph.DeviceGraph.reverse`), each ball appended to a chunk's output as
  (node, distance, point) entries, sorted by (node, point) with CuPy and folded by a thread per node
  (``acc_sorted``, ``near_sorted``). Work: the balls only (a 2 km ball of NY is ~500 nodes), no
  hierarchy. Memory: 20 bytes x n per resident block (``config.ACCESS_GPU_BALL_BYTES`` caps the blocks)
  plus ``config.ACCESS_GPU_BALL_ITEMS`` entries per chunk (a chunk that overflows runs again, smaller).
* ``"phast"``: blocks of PHAST trees of the reverse hierarchy (one per point node,
  :meth:`gpuroute.ch.ContractionHierarchy.tree` with CuPy sources and 32-bit distances, so the block stays
  on the device), each folded by ``acc_block`` / ``near_block`` before the next block overwrites it. Work:
  full sweeps of all n nodes per point; memory: one block of ``k x n`` distances (``k`` from
  ``config.ACCESS_GPU_BLOCK_ITEMS``) plus PHAST's own pass. The better choice when a radius covers much of
  the graph, and the only one for a hierarchy loaded without its graph.
"""
from __future__ import annotations

import numpy as np

from .. import config
from ..backend.flags import DINF
from ..backend.kernels import load_module

METHODS = ("auto", "ball", "phast")


def method(ix):
    """The GPU method for an :class:`~gpuroute.accessibility.index.AccessIndex` (``config.ACCESS_GPU_METHOD``;
    ``"auto"``: ``"ball"`` when the graph is there, else ``"phast"``).

    Raises
    ------
    ValueError
        An unknown method, or ``"ball"`` without the graph.
    """
    m = config.ACCESS_GPU_METHOD
    if m not in METHODS:
        raise ValueError(f"config.ACCESS_GPU_METHOD must be one of {METHODS}, got {m!r}")
    if m == "auto":
        return "ball" if ix.graph is not None else "phast"
    if m == "ball" and ix.graph is None:
        raise ValueError("ACCESS_GPU_METHOD='ball' searches the graph; the hierarchy was loaded without it")
    return m


def _sorted_balls(ix, P, bound):
    """Yield, per chunk of the point nodes ``P`` (in order), the chunk's balls sorted by (node, point):
    ``(seg int64 (n+1,), js int32, ds uint32)`` (CuPy): node v's entries are ``seg[v] .. seg[v+1]``, ``js``
    the points' positions in ``P`` (ascending within a node), ``ds`` the distances ``d(v -> P[j])``."""
    import cupy as cp

    from ..backend.device_graph import DeviceGraph

    if int(bound) > DINF - 1:
        raise OverflowError(f"a radius of {int(bound)} exceeds the GPU ball searches' 32-bit distances (at most "
                            f"{DINF - 1}); use device='cpu' (or ACCESS_GPU_METHOD='phast', exact while distances fit)")
    dg = DeviceGraph.shared(ix.graph, ix.weight)
    fo, tl, w = dg.reverse()
    n = ix.n
    m = int(P.size)
    kern = load_module("accessibility/access.cu").get_function("ball_search")
    sms = int(cp.cuda.Device().attributes["MultiProcessorCount"])
    blocks = max(1, min(sms * int(config.ACCESS_GPU_BALL_BLOCKS_PER_SM), m,
                        int(config.ACCESS_GPU_BALL_BYTES) // max(1, 20 * n)))
    dist = cp.full(blocks * n, DINF, dtype=cp.uint32)
    stamp = cp.zeros(blocks * n, dtype=cp.int32)
    queue = cp.empty(2 * blocks * n, dtype=cp.int32)
    vis = cp.empty(blocks * n, dtype=cp.int32)
    rounds = cp.zeros(blocks, dtype=cp.int32)
    counters = cp.zeros(4, dtype=cp.uint64)  # total, next source (low word), overflow (low word)
    cap = int(config.ACCESS_GPU_BALL_ITEMS)
    out_v = cp.empty(cap, dtype=cp.int32)
    out_d = cp.empty(cap, dtype=cp.uint32)
    out_j = cp.empty(cap, dtype=cp.int32)
    Pd = cp.asarray(np.asarray(P, dtype=np.int64))
    b = _bound32(bound)
    tpb = int(config.ACCESS_GPU_BALL_THREADS)
    nodes = cp.arange(n + 1, dtype=cp.int32)
    chunk = min(m, blocks)  # a first wave measures the balls
    lo = 0
    while lo < m:
        hi = min(m, lo + chunk)
        counters.fill(0)
        total = counters[0:1]
        nxt = counters[1:2].view(cp.int32)[0:1]
        over = counters[2:3].view(cp.int32)[0:1]
        kern((min(blocks, hi - lo),), (tpb,),
             (np.int32(n), np.int32(hi - lo), Pd[lo:hi], np.int32(lo), fo, tl, w, b, dist, stamp, queue, vis, rounds, nxt,
              total, np.uint64(cap), out_v, out_d, out_j, over))
        t, overflowed = (int(x) for x in counters[[0, 2]].get())
        if overflowed:
            if hi - lo == 1:
                raise MemoryError(f"one ball holds more than config.ACCESS_GPU_BALL_ITEMS = {cap} entries: raise it, "
                                  "or use ACCESS_GPU_METHOD='phast' for radii this large")
            chunk = max(1, (hi - lo) // 2)
            continue
        key = out_v[:t].astype(cp.int64) * m + out_j[:t]
        order = cp.argsort(key)
        vs = out_v[:t][order]
        seg = cp.searchsorted(vs, nodes).astype(cp.int64)
        yield seg, out_j[:t][order], out_d[:t][order]
        per = max(1.0, t / (hi - lo))
        chunk = max(1, min(m, int(cap / (1.25 * per))))
        lo = hi


def _block(m, n):
    """Point nodes per block: at most ``config.ACCESS_GPU_BLOCK_ITEMS // n``, the m split evenly."""
    per = max(1, int(config.ACCESS_GPU_BLOCK_ITEMS) // max(n, 1))
    blocks = -(-max(m, 1) // per)
    return -(-max(m, 1) // blocks)


def _bound32(bound):
    return np.uint32(min(int(bound), DINF - 1))


def _blocks(rev, P):
    """Yield ``(lo, hi, D)``: the (hi - lo, n) uint32 distances to ``P[lo:hi]`` (CuPy, node ids)."""
    import cupy as cp

    n = rev.n_nodes
    per = _block(P.size, n)
    for lo in range(0, P.size, per):
        hi = min(P.size, lo + per)
        D = rev.tree(cp.asarray(P[lo:hi]), device="gpu", dtype="uint32")
        yield lo, hi, D.reshape(hi - lo, n)


def aggregate_gpu(ix, stats, bound, radius, decay, mode):
    """Accumulators ``(a0, a1, cn)`` (n,) NumPy, as :func:`gpuroute.accessibility.cpu.aggregate_points`.

    Parameters
    ----------
    ix : AccessIndex
        The network (:func:`method` picks the ball searches or the reverse hierarchy's PHAST trees).
    stats : tuple
        :func:`gpuroute.accessibility.cpu.point_stats`.
    bound : int
    radius : float
    decay, mode : int

    Raises
    ------
    OverflowError
        A distance that does not fit the GPU's 32-bit distances (PHAST's check).
    """
    import cupy as cp

    from .cpu import MAX, MIN

    n = ix.n
    P, cnt, s1, mean, m2, mn, mx = stats
    fill = np.inf if mode == MIN else (-np.inf if mode == MAX else 0.0)
    a0 = cp.full(n, fill, dtype=cp.float64)
    a1 = cp.zeros(n, dtype=cp.float64)
    cn = cp.zeros(n, dtype=cp.int64)
    dev = [cp.asarray(a) for a in (cnt, s1, mean, m2, mn, mx)]
    tpb = int(config.ACCESS_GPU_THREADS)
    grid = ((n + tpb - 1) // tpb,)
    if method(ix) == "ball":
        kern = load_module("accessibility/access.cu").get_function("acc_sorted")
        for seg, js, ds in _sorted_balls(ix, P, bound):
            kern(grid, (tpb,), (np.int32(n), seg, js, ds, np.float64(radius), np.int32(decay), np.int32(mode), *dev,
                                a0, a1, cn))
        return a0.get(), a1.get(), cn.get()
    rev = ix.reverse("gpu")
    kern = load_module("accessibility/access.cu").get_function("acc_block")
    b = _bound32(bound)
    for lo, hi, D in _blocks(rev, P):
        args = [x[lo:hi] for x in dev]
        kern(grid, (tpb,), (np.int32(n), np.int32(hi - lo), D, b, np.float64(radius), np.int32(decay), np.int32(mode),
                            *args, a0, a1, cn))
    return a0.get(), a1.get(), cn.get()


def nearest_gpu(ix, P, poi_first, poi_ids, bound, k):
    """The k nearest (distance, poi) pairs of every node: ``(dist int64 (n, k) with INF, ids int64 (n, k)
    with the largest int64 for empty slots)``, as :func:`gpuroute.accessibility.cpu.nearest_points`."""
    import cupy as cp

    from ..graph.constants import INF
    from .cpu import NO_ID_KEY

    n = ix.n
    bd = cp.full((k, n), DINF, dtype=cp.uint32)
    bi = cp.full((k, n), NO_ID_KEY, dtype=cp.int64)
    first = np.asarray(poi_first, dtype=np.int64)
    ids = cp.asarray(np.asarray(poi_ids, dtype=np.int64))
    tpb = int(config.ACCESS_GPU_THREADS)
    grid = ((n + tpb - 1) // tpb,)
    if method(ix) == "ball":
        kern = load_module("accessibility/access.cu").get_function("near_sorted")
        fd = cp.asarray(first)
        for seg, js, ds in _sorted_balls(ix, P, bound):
            kern(grid, (tpb,), (np.int32(n), np.int32(k), seg, js, ds, fd, ids, bd, bi))
    else:
        rev = ix.reverse("gpu")
        kern = load_module("accessibility/access.cu").get_function("near_block")
        b = _bound32(bound)
        for lo, hi, D in _blocks(rev, P):
            f = cp.asarray(first[lo:hi + 1])
            kern(grid, (tpb,), (np.int32(n), np.int32(hi - lo), np.int32(k), D, b, f, ids, bd, bi))
    d = cp.ascontiguousarray(bd.T).get().astype(np.int64)
    d[d == DINF] = INF
    return d, cp.ascontiguousarray(bi.T).get()

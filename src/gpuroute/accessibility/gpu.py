"""The GPU side of accessibility: blocks of PHAST trees of the reverse hierarchy (one per distinct point
node, :meth:`gpuroute.ch.ContractionHierarchy.tree` with CuPy sources and 32-bit distances, so the block
stays on the device), each folded into per-node accumulators by ``access.cu`` before the next block
overwrites it. Device memory: one block of ``k x n`` distances (``k`` from
``config.ACCESS_GPU_BLOCK_ITEMS``) plus PHAST's own pass, plus the accumulators (24 bytes a node, or
12k for the k nearest POIs).

The CPU twin is :mod:`gpuroute.accessibility.cpu`; both fold the points in ascending node order.
"""
from __future__ import annotations

import numpy as np

from .. import config
from ..backend.flags import DINF
from ..backend.kernels import load_module


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


def aggregate_gpu(rev, stats, bound, radius, decay, mode):
    """Accumulators ``(a0, a1, cn)`` (n,) NumPy, as :func:`gpuroute.accessibility.cpu.aggregate_points`.

    Parameters
    ----------
    rev : ContractionHierarchy
        The reverse hierarchy (:func:`gpuroute.accessibility.index.reverse_ch`).
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

    n = rev.n_nodes
    P, cnt, s1, mean, m2, mn, mx = stats
    fill = np.inf if mode == MIN else (-np.inf if mode == MAX else 0.0)
    a0 = cp.full(n, fill, dtype=cp.float64)
    a1 = cp.zeros(n, dtype=cp.float64)
    cn = cp.zeros(n, dtype=cp.int64)
    dev = [cp.asarray(a) for a in (cnt, s1, mean, m2, mn, mx)]
    kern = load_module("accessibility/access.cu").get_function("acc_block")
    tpb = int(config.ACCESS_GPU_THREADS)
    b = _bound32(bound)
    for lo, hi, D in _blocks(rev, P):
        args = [x[lo:hi] for x in dev]
        kern(((n + tpb - 1) // tpb,), (tpb,),
             (np.int32(n), np.int32(hi - lo), D, b, np.float64(radius), np.int32(decay), np.int32(mode), *args,
              a0, a1, cn))
    return a0.get(), a1.get(), cn.get()


def nearest_gpu(rev, P, poi_first, poi_ids, bound, k):
    """The k nearest (distance, poi) pairs of every node: ``(dist int64 (n, k) with INF, ids int64 (n, k)
    with the largest int64 for empty slots)``, as :func:`gpuroute.accessibility.cpu.nearest_points`."""
    import cupy as cp

    from ..graph.constants import INF
    from .cpu import NO_ID_KEY

    n = rev.n_nodes
    bd = cp.full((k, n), DINF, dtype=cp.uint32)
    bi = cp.full((k, n), NO_ID_KEY, dtype=cp.int64)
    first = np.asarray(poi_first, dtype=np.int64)
    ids = cp.asarray(np.asarray(poi_ids, dtype=np.int64))
    kern = load_module("accessibility/access.cu").get_function("near_block")
    tpb = int(config.ACCESS_GPU_THREADS)
    b = _bound32(bound)
    for lo, hi, D in _blocks(rev, P):
        f = cp.asarray(first[lo:hi + 1])
        kern(((n + tpb - 1) // tpb,), (tpb,), (np.int32(n), np.int32(hi - lo), np.int32(k), D, b, f, ids, bd, bi))
    d = cp.ascontiguousarray(bd.T).get().astype(np.int64)
    d[d == DINF] = INF
    return d, cp.ascontiguousarray(bi.T).get()

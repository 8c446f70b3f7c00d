"""The phantom-node step of the engine's table: node-to-node hierarchy distances turned into
phantom-to-phantom costs, minimised over each phantom's options (its arcs; several where a coordinate
snaps to a junction). CPU twin (numba, parallel over sources) and GPU kernel (``table.cu``, one thread per
cell) with the same inputs, outputs and tie-breaking (options in order, source option major, the first
minimum kept).

This is OSRM's phantom-node handling of its many-to-many search (a route leaves the source's segment
through either end and enters the target's segment likewise, or stays on one segment when both lie on it
in order), done as one pass over the (sources x targets) cells after the hierarchy's node table.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..backend.kernels import load_module


@njit(cache=True, parallel=True)
def _combine_cpu(d, si, ti, sc, tc, sa, ta, sf, tf, ws, best, so, to, same_won):
    S, ko = sa.shape
    T, kt = ta.shape
    for i in prange(S):
        for j in range(T):
            b = math.inf
            bo = 0
            bt = 0
            bs = False
            for a in range(ko):
                if sa[i, a] < 0:
                    continue
                for c in range(kt):
                    if ta[j, c] < 0:
                        continue
                    via = sc[i, a] + d[si[i, a], ti[j, c]] + tc[j, c]
                    same = math.inf
                    if sa[i, a] == ta[j, c] and sf[i, a] <= tf[j, c]:
                        same = (tf[j, c] - sf[i, a]) * ws[i, a]
                    v = via if via < same else same
                    if v < b:
                        b = v
                        bo = a
                        bt = c
                        bs = same <= via
            best[i, j] = b
            so[i, j] = bo
            to[i, j] = bt
            same_won[i, j] = bs


def combine(d, si, ti, sc, tc, sa, ta, sf, tf, ws, *, to_host=True):
    """Phantom-to-phantom costs from a node table.

    Parameters
    ----------
    d : float64 (U, V), NumPy or CuPy
        Node-to-node distances (+inf where none); a CuPy array runs the GPU kernel.
    si, ti : int64 (S, ko), (T, kt)
        Row of ``d`` of each source option, column of each target option.
    sc, tc : float64 (S, ko), (T, kt)
        Cost from the source to its option's node, from the target option's node to the target (+inf for
        an unused option).
    sa, ta : int64 (S, ko), (T, kt)
        The options' arcs (-1 unused).
    sf, tf : float64
        The phantoms' positions on the options' arcs (fractions 0..1).
    ws : float64 (S, ko)
        The cost of each source option's arc (for the same-arc case).
    to_host : bool
        With a CuPy ``d``: True (default) copies the results to the host; False leaves them on the device
        as CuPy arrays, no host copy (the trip's tour search takes the costs there: issue 23), after a
        synchronisation of the current stream (``d`` may be reused once it returns). No effect on a NumPy
        ``d`` (the results are on the host already).

    Returns
    -------
    (best float64 (S, T), so int64 (S, T), to int64 (S, T), same_won bool (S, T))
        NumPy arrays; CuPy arrays for a CuPy ``d`` with ``to_host=False``.
    """
    S, T = sa.shape[0], ta.shape[0]
    if type(d).__module__.startswith("cupy"):
        import cupy as cp

        k = load_module("engine/table.cu").get_function("table_combine")
        best = cp.empty((S, T), np.float64)
        so = cp.empty((S, T), np.int64)
        to = cp.empty((S, T), np.int64)
        sw = cp.empty((S, T), np.uint8)
        n = S * T
        if n:
            args = [cp.asarray(np.ascontiguousarray(x)) for x in (si, ti, sc, tc, sa, ta, sf, tf, ws)]
            k(((n + 255) // 256,), (256,), (np.int32(S), np.int32(T), np.int32(sa.shape[1]), np.int32(ta.shape[1]),
                                            np.int32(d.shape[1]), cp.ascontiguousarray(d), *args, best, so, to, sw))
        if not to_host:  # synchronised: once this returns, ``d`` (the engine's table buffers) may be reused
            sw = sw.astype(bool)
            cp.cuda.get_current_stream().synchronize()
            return best, so, to, sw
        return best.get(), so.get(), to.get(), sw.get().astype(bool)
    best = np.empty((S, T), np.float64)
    so = np.empty((S, T), np.int64)
    to = np.empty((S, T), np.int64)
    sw = np.empty((S, T), np.bool_)
    _combine_cpu(np.ascontiguousarray(d, np.float64), si, ti, sc, tc, sa, ta, sf, tf, ws, best, so, to, sw)
    return best, so, to, sw

"""Device-side helpers every GPU SSSP family shares: canonical predecessors from 32-bit distances,
widening to the host's int64 distances with ``INF``, and the source initialisation (kernels in
``predecessors.cu``)."""
from __future__ import annotations

import numpy as np

from .kernels import load_module

_THREADS = 256


def _grid(total):
    return ((int(total) + _THREADS - 1) // _THREADS,)


def canonical_predecessors(dgraph, dist32, stream):
    """Canonical predecessors of ``k`` shortest-path trees from their distances.

    Parameters
    ----------
    dgraph : DeviceGraph
        The graph and weight the distances were computed on (its reverse CSR is used).
    dist32 : cupy.ndarray of uint32, shape (k, n) or (n,)
        Device distances, ``DINF`` where unreachable, 0 at the sources.
    stream : cupy.cuda.Stream

    Returns
    -------
    cupy.ndarray of int32, same shape: the smallest tail of a tight in-arc, ``NO_PREDECESSOR`` (-1)
    for sources and unreachable nodes (the CPU engine's rule).
    """
    import cupy as cp

    rfo, rtl, rw = dgraph.reverse()
    k = load_module("backend/predecessors.cu").get_function("canonical_pred")
    total = dist32.size
    pred = cp.empty(dist32.shape, dtype=cp.int32)
    with stream:
        k(_grid(total), (_THREADS,), (np.uint64(total), np.int32(dgraph.n_nodes), rfo, rtl, rw, dist32.ravel(),
                                      pred.ravel()))
    return pred


def widen(dist32, stream, out=None):
    """``int64`` copy of 32-bit device distances with ``INF`` for ``DINF`` (one kernel, no temporaries)."""
    import cupy as cp

    k = load_module("backend/predecessors.cu").get_function("widen_dist")
    out = cp.empty(dist32.shape, dtype=cp.int64) if out is None else out
    with stream:
        k(_grid(dist32.size), (_THREADS,), (np.uint64(dist32.size), dist32.ravel(), out.ravel()))
    return out


def init_distances(dist32, sources_dev, n, stream):
    """``dist32`` (k * n,) := ``DINF`` except item ``s * n + sources[s]`` := 0 for each slot ``s``."""
    k = load_module("backend/predecessors.cu").get_function("init_dist")
    with stream:
        k(_grid(dist32.size), (_THREADS,), (np.uint64(dist32.size), dist32, sources_dev, np.int32(n)))

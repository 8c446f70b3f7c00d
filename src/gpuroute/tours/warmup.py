"""Compile the tour kernels before a search's clock starts (:mod:`gpuroute.tours.budget`).

:func:`warm_up` runs every compiled kernel of :func:`~gpuroute.tours.tsp` and
:func:`~gpuroute.tours.cvrp` once on a tiny instance, with the argument types the searches use, so that
numba compiles them (or loads them from its on-disk cache, ``cache=True``) and, on the GPU, CuPy compiles
the ``.cu`` modules and its own elementwise kernels and the CUDA context exists. Done once per process
and family; later calls return 0.0 at once. The searches call it themselves and report its seconds in
``stats["warmup_seconds"]``, outside their time limit; a server calls it at start-up.

Measured first-call costs (2-core CI machine, loaded): from a warm numba cache 0.2 s for the TSP kernels
and 0.1 s for the CVRP kernels; cold (an empty cache) 11 s and 12 s. On a GPU machine add CuPy's import
and the CUDA context, and, the first time a ``.cu`` file's text is seen, NVRTC (seconds; CuPy caches the
result on disk).
"""
from __future__ import annotations

import threading

import numpy as np

from . import budget

__all__ = ["warm_up", "warm_up_tsp", "warm_up_cvrp"]

_done = set()
_lock = threading.Lock()


def _once(key, fn):
    with _lock:
        if key in _done:
            return 0.0
        t = budget.clock()
        fn()
        _done.add(key)
        return budget.clock() - t


def _tsp_cpu():
    from . import local_search as ls

    rng = np.random.default_rng(0)
    n, K = 12, 3
    C = rng.integers(1, 100, (n, n)).astype(np.float64)
    ct = np.ascontiguousarray(C.T)
    nbr = np.empty((n, K), np.int64)
    ls.candidate_rows(C, K, 0, n, nbr)
    ls.candidate_lists(C, K)
    p = np.empty(n, np.int64)
    used = np.zeros(n, np.bool_)
    m, limit = ls.nearest_neighbour_start(n, 0, -1, p, used)
    ls.nearest_neighbour_steps(C, p, used, m, limit, n)
    ls.nearest_neighbour_tour(C, 0, -1)
    cost = ls.tour_cost(C, p)
    q = p.copy()
    ls.full_descent(C, ct, q, 0.5, 100, 1 << 40)
    pos, fwd, bwd = np.empty(n, np.int64), np.empty(n), np.empty(n)
    queue, inq, qs = np.empty(n, np.int64), np.zeros(n, np.bool_), np.zeros(3, np.int64)
    everyone = np.arange(n, dtype=np.int64)
    q = p.copy()
    ls.queue_init(C, q, pos, fwd, bwd, queue, inq, qs, everyone)
    ls.queue_descent(C, q, pos, fwd, bwd, nbr, 0.5, 1000, queue, inq, qs, True, 1 << 40)
    cost = ls.tour_cost(C, q)
    ls.ils_round(C, q, cost, nbr, 0, 0.5, 1000, 2, 1, 1 << 40)
    ls.local_search_queue(C, q.copy(), nbr, 0.5, 1000, everyone, True)
    # the Or-opt search of a symmetric matrix (api._search_or)
    ls.symmetric_rows(C, 0, n)
    S = C + C.T
    snbr = ls.candidate_lists(S, K)
    q = p.copy()
    spos = np.empty(n, np.int64)
    spos[q] = np.arange(n)
    log, lgs = np.empty((ls.OR_LOG_CAP, 2), np.int64), np.zeros(1, np.int64)
    queue[:] = q
    inq[:] = True
    qs[:] = (0, n, 0)
    ls.or_descent(S, q, spos, snbr, 0.5, queue, inq, qs, log, lgs, False, 1 << 40)
    m = 2
    tours, poss = np.tile(q, (m, 1)), np.tile(spos, (m, 1))
    ls.or_ils_chains(S, tours, poss, np.full(m, ls.tour_cost(S, q)), snbr, 0.5, 2, np.arange(m, dtype=np.int64),
                     1000, np.zeros((m, 4), np.int64))


def warm_up_tsp(device="cpu", device_matrix=None):
    """Compile (or load) the kernels of :func:`~gpuroute.tours.tsp` on ``device`` ("cpu" or "gpu"; the
    GPU search uses the CPU kernels for its start too). ``device_matrix``: the dtype of a CuPy matrix the
    search will take (on "gpu"): CuPy's kernels of its checks on the device, of the closed-tour reduction
    and of the device-side candidate lists and start (:func:`gpuroute.tours.gpu.warm_up_device_matrix`) are
    compiled for it, once per dtype. Returns the seconds spent (0.0 when done before in this process)."""
    s = _once(("tsp", "cpu"), _tsp_cpu)
    if device == "gpu":
        from . import gpu

        s += _once(("tsp", "gpu"), gpu.warm_up)
        if device_matrix is not None:
            dt = np.dtype(device_matrix)
            s += _once(("tsp", "gpu", dt.str), lambda: gpu.warm_up_device_matrix(dt))
    return s


def _cvrp_cpu():
    import importlib

    # the package's function cvrp shadows the submodule's attribute
    importlib.import_module("gpuroute.tours.cvrp").warm_up_kernels()


def warm_up_cvrp(device="cpu"):
    """Compile (or load) the kernels of :func:`~gpuroute.tours.cvrp` on ``device`` ("cpu" or "gpu").
    Returns the seconds spent (0.0 when done before in this process)."""
    s = _once(("cvrp", "cpu"), _cvrp_cpu)
    if device == "gpu":
        from . import vrp_gpu

        s += _once(("cvrp", "gpu"), vrp_gpu.warm_up)
    return s


def warm_up(device="auto"):
    """Compile every kernel of the tour searches (TSP and CVRP) for ``device`` ("auto": the GPU ones too
    when a GPU is usable) before any time limit runs. Returns the seconds spent.

    Raises
    ------
    GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    ValueError
        Unknown device.
    """
    from ..backend import resolve_device

    dev = resolve_device(device)
    return warm_up_tsp(dev) + warm_up_cvrp(dev)

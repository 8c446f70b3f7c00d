"""Public single-source shortest paths: one signature for every algorithm and device.

``sssp(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
device="auto")``. Every algorithm returns the distances of the CPU Dijkstra and the canonical
predecessors (see :mod:`gpuroute.sssp._cpu`), on every device.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..backend import is_cupy_array, resolve_device
from ..graph.constants import DIST_DTYPE
from ..graph.errors import GraphError
from . import _cpu


@dataclass
class SSSPResult:
    """Result of :func:`sssp_full`.

    Attributes
    ----------
    dist : ndarray int64, shape (k, n)
        Shortest distances in the weight's unit; ``INF`` where unreachable.
    pred : ndarray int32, shape (k, n), or None
        Canonical predecessors; ``NO_PREDECESSOR`` (-1) for sources and unreachable nodes.
    stats : dict
        Per-algorithm statistics (phases, per-phase updated-node counts and times, ...).
    """

    dist: object
    pred: object = None
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    name: str
    cpu: object  # fn(graph, weight, sources, want_pred, variant, **opts) -> (dist, pred, stats)
    gpu: object  # same, returning CuPy arrays; None if CPU only
    variants: tuple = (None,)
    doc: str = ""


ALGORITHMS: dict[str, Algorithm] = {}


def register(alg: Algorithm, *aliases):
    for nm in (alg.name, *aliases):
        ALGORITHMS[nm] = alg


def _dijkstra_cpu(graph, weight, sources, want_pred, variant, **opts):
    w = graph.weight(weight)
    rfo, rt, ra = (graph.rev_first_out, graph.rev_tail, graph.rev_arc) if want_pred else (
        np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    dist, pred = _cpu.dijkstra_many(graph.first_out, graph.head, w, sources, rfo, rt, ra, want_pred)
    return dist, (pred if want_pred else None), {}


def _conventional_cpu(graph, weight, sources, want_pred, variant, **opts):
    w = graph.weight(weight)
    dist = np.empty((sources.size, graph.n_nodes), dtype=DIST_DTYPE)
    phases = []
    for i, s in enumerate(sources):
        phases.append(_cpu.bellman_ford_cpu(graph.first_out, graph.head, w, int(s), dist[i]))
    pred = None
    if want_pred:
        pred = _cpu.canonical_predecessors_many(graph.rev_first_out, graph.rev_tail, graph.rev_arc, w, dist, sources)
    return dist, pred, {"phases": np.asarray(phases)}


def _conventional_gpu(graph, weight, sources, want_pred, variant, mode="graph", **opts):
    import cupy as cp

    from ._cuda import ConventionalGPU

    solver = ConventionalGPU(graph, weight, want_pred)
    dists, preds, phases = [], [], []
    for s in sources:
        d, p, ph = solver.run(int(s), mode=mode)
        dists.append(d)
        preds.append(p)
        phases.append(ph)
    dist = cp.stack(dists)
    pred = cp.stack(preds) if want_pred else None
    return dist, pred, {"phases": np.asarray(phases)}


register(Algorithm("dijkstra", _dijkstra_cpu, None, doc="binary-heap Dijkstra (CPU, numba)"))
register(Algorithm("conventional", _conventional_cpu, _conventional_gpu,
                   doc="Harish & Narayanan Bellman-Ford, seed 001 Alg. 1-3"), "bellman-ford", "harish")


def _check_sources(graph, sources):
    src = np.asarray(sources)
    scalar = src.ndim == 0
    src = np.atleast_1d(src)
    if src.ndim != 1:
        raise ValueError(f"sources must be an int or a 1-D array of node ids, got shape {src.shape}")
    if src.size and src.dtype.kind not in "iu":
        raise TypeError(f"sources must be integer node ids (dtype {src.dtype})")
    src = src.astype(np.int64)
    bad = (src < 0) | (src >= graph.n_nodes)
    if bad.any():
        raise IndexError(f"source {int(src[bad][0])} is outside the node range [0, {graph.n_nodes})")
    return src, scalar


def sssp_full(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
              device="auto", **options):
    """Like :func:`sssp` but returns an :class:`SSSPResult` with statistics (always 2-D arrays)."""
    if graph.n_nodes == 0:
        raise GraphError("the graph is empty (0 nodes): there is no source to search from")
    if is_cupy_array(sources):
        sources = sources.get()
    src, _ = _check_sources(graph, sources)
    graph.weight(weight)  # KeyError naming the weights if unknown
    dev = resolve_device(device)
    if algorithm == "auto":
        algorithm = "dijkstra" if dev == "cpu" else "conventional"
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {sorted(ALGORITHMS)}")
    alg = ALGORITHMS[algorithm]
    if variant not in alg.variants:
        raise ValueError(f"algorithm {algorithm!r} takes variant in {alg.variants}, got {variant!r}")
    if dev == "gpu" and alg.gpu is None:
        if device == "gpu":
            raise ValueError(f"algorithm {algorithm!r} has no GPU implementation; use device='cpu'")
        dev = "cpu"
    fn = alg.gpu if dev == "gpu" else alg.cpu
    dist, pred, stats = fn(graph, weight, src, bool(return_predecessors), variant, **options)
    stats = dict(stats, algorithm=alg.name, device=dev)
    return SSSPResult(dist, pred, stats)


def sssp(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
         device="auto", **options):
    """Shortest distances from one or several sources to every node.

    Parameters
    ----------
    graph : RoadGraph
    sources : int or array_like of int, shape (k,)
        Source node ids (internal, 0-based). NumPy or CuPy.
    weight : str, optional
        Weight name (default: the graph's first weight).
    algorithm : str
        ``"auto"`` (Dijkstra on the CPU, the fastest GPU method on the GPU), ``"dijkstra"`` (CPU),
        ``"conventional"`` (alias ``"bellman-ford"``; Harish & Narayanan, seed 001 Alg. 1-3), and the
        others listed in ``gpuroute.sssp.ALGORITHMS``.
    variant : str, optional
        ``"successor"`` or ``"predecessor"`` where the seed defines both.
    return_predecessors : bool
        Also return the canonical shortest-path tree.
    device : {"auto", "cpu", "gpu"}
    **options
        Algorithm-specific (e.g. ``mode="host"`` runs the conventional GPU loop as seed 001 does).

    Returns
    -------
    dist : ndarray int64, shape (k, n) -- or (n,) for a scalar source
        Distances in the weight's unit; ``gpuroute.INF`` where unreachable.
    pred : ndarray int32, same shape (only with ``return_predecessors``)
        ``gpuroute.NO_PREDECESSOR`` (-1) for the sources and unreachable nodes.
        Arrays are NumPy, or CuPy when ``sources`` was a CuPy array.

    Raises
    ------
    IndexError
        A source outside ``[0, n_nodes)``.
    GraphError
        An empty graph.
    KeyError
        An unknown weight name.
    ValueError
        Unknown algorithm/variant/device, or a CPU-only algorithm with ``device="gpu"``.
    GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    OverflowError
        On the GPU, a distance that does not fit the 32-bit device keys (> 2^32 - 2).
    """
    want_cupy = is_cupy_array(sources)
    scalar = np.ndim(sources) == 0 and not want_cupy
    res = sssp_full(graph, sources, weight=weight, algorithm=algorithm, variant=variant,
                    return_predecessors=return_predecessors, device=device, **options)
    dist, pred = res.dist, res.pred
    if want_cupy:
        import cupy as cp

        dist = cp.asarray(dist)
        pred = cp.asarray(pred) if pred is not None else None
    else:
        dist = dist.get() if is_cupy_array(dist) else dist
        pred = pred.get() if is_cupy_array(pred) else pred
    if scalar:
        dist = dist[0]
        pred = pred[0] if pred is not None else None
    return (dist, pred) if return_predecessors else dist

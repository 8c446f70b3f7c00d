"""Public single-source shortest paths: one signature for every algorithm and device.

``sssp(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
device="auto", dtype="int64", **options)``. Every algorithm returns the distances of the CPU Dijkstra
and the canonical predecessors (:mod:`gpuroute.sssp.dijkstra`), on every device.

The families, each with its numba twin, GPU launcher, ``.cu`` kernels and one options record side by
side: :mod:`~gpuroute.sssp.bellman_ford` (conventional, selection, adaptive), :mod:`~gpuroute.sssp.settle`
(Martín, Crauser), :mod:`~gpuroute.sssp.buckets` (near-far, Δ-stepping), :mod:`~gpuroute.sssp.cell_bf`.

GPU buffers have an owner: :class:`SSSPQuery` (a query object reused across calls) holds its solvers and
uses a :class:`~gpuroute.backend.device_graph.DeviceGraph`, its own or the caller's. The functional
``sssp()`` keeps one query object per (graph, weight, algorithm, variant, options), released with the
graph or by :func:`release`.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ..backend import is_cupy_array, resolve_device
from ..graph.constants import INF, INF_U32
from ..graph.errors import GraphError
from . import dijkstra
from .bellman_ford import cpu as bf_cpu
from .bellman_ford import options as bf_opts
from .buckets import cpu as bk_cpu
from .buckets import options as bk_opts
from .cell_bf import cpu as cb_cpu
from .cell_bf import options as cb_opts
from .common import STATS_KEYS, collect
from .settle import cpu as st_cpu
from .settle import options as st_opts

DTYPES = ("int64", "uint32")


@dataclass
class SSSPResult:
    """Result of :func:`sssp_full`.

    Attributes
    ----------
    dist : ndarray, shape (k, n)
        Shortest distances in the weight's unit: int64 with ``INF`` where unreachable, or with
        ``dtype="uint32"`` uint32 with ``INF_U32``. NumPy, or CuPy for CuPy sources.
    pred : ndarray int32, shape (k, n), or None
        Canonical predecessors; ``NO_PREDECESSOR`` (-1) for sources and unreachable nodes.
    stats : dict
        The layout of :mod:`gpuroute.sssp.common` (same keys for every algorithm and device).
    """

    dist: object
    pred: object = None
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its declaration and its twins.

    ``cpu(graph, weight, sources, want_pred, variant, opts) -> (dist, pred, runs, params)``;
    ``gpu(dgraph, variant, opts) -> runner`` with ``runner.solve(sources, want_pred, phase_times, dtype,
    to_host) -> (dist, pred, runs, params)``; None when there is no GPU kernel.
    """

    spec: object
    cpu: object
    gpu: object = None

    @property
    def name(self):
        return self.spec.name

    @property
    def variants(self):
        return self.spec.variants

    @property
    def doc(self):
        return self.spec.doc


def _gpu(module, fn):
    """A GPU entry imported on first use (``import gpuroute`` never needs CuPy)."""

    def make(dgraph, variant, opts):
        import importlib

        return getattr(importlib.import_module(module, __package__), fn)(dgraph, variant, opts)

    return make


def _settle_gpu(name):
    def make(dgraph, variant, opts):
        from .settle.gpu import settle_gpu

        return settle_gpu(name)(dgraph, variant, opts)

    return make


ALGORITHMS: dict[str, Algorithm] = {}


def register(alg: Algorithm, *aliases):
    for nm in (alg.name, *aliases):
        ALGORITHMS[nm] = alg


register(Algorithm(dijkstra.SPEC, dijkstra.run_cpu))
register(Algorithm(bf_opts.CONVENTIONAL, bf_cpu.conventional_cpu, _gpu(".bellman_ford.gpu", "conventional_gpu")),
         "bellman-ford", "harish")
register(Algorithm(bf_opts.SELECTION, bf_cpu.selection_cpu, _gpu(".bellman_ford.gpu", "selection_gpu")))
register(Algorithm(bf_opts.ADAPTIVE, bf_cpu.adaptive_cpu, _gpu(".bellman_ford.gpu", "adaptive_gpu")))
register(Algorithm(st_opts.MARTIN, st_cpu.settle_cpu("martin"), _settle_gpu("martin")))
register(Algorithm(st_opts.CRAUSER, st_cpu.settle_cpu("crauser"), _settle_gpu("crauser")))
register(Algorithm(st_opts.CRAUSER_ECONOMIC, st_cpu.settle_cpu("crauser-economic"), _settle_gpu("crauser-economic")))
register(Algorithm(bk_opts.NEAR_FAR, bk_cpu.near_far_cpu, _gpu(".buckets.gpu", "near_far_gpu")))
register(Algorithm(cb_opts.CELL_BF, cb_cpu.cell_bf_cpu, _gpu(".cell_bf.gpu", "cell_bf_gpu")))
register(Algorithm(bk_opts.DELTA_STEPPING, bk_cpu.delta_stepping_cpu))


def auto_algorithm(n_nodes, device, n_sources=1):
    """The algorithm ``algorithm="auto"`` runs: Dijkstra on the CPU; on the GPU cell-local Bellman-Ford
    for one source (on graphs up to ``config.SSSP_AUTO_CELL_MAX_NODES`` nodes, None = any size), else
    near-far batched over the sources (BENCHMARKS.md has the measurements behind this rule)."""
    from .. import config

    if device == "cpu":
        return "dijkstra"
    limit = config.SSSP_AUTO_CELL_MAX_NODES
    if n_sources == 1 and (limit is None or n_nodes <= limit):
        return "cell-bf"
    return "near-far"


def _check_sources(n, sources):
    if is_cupy_array(sources):
        sources = sources.get()
    src = np.asarray(sources)
    scalar = src.ndim == 0
    src = np.atleast_1d(src)
    if src.ndim != 1:
        raise ValueError(f"sources must be an int or a 1-D array of node ids, got shape {src.shape}")
    if src.size and src.dtype.kind not in "iu":
        raise TypeError(f"sources must be integer node ids (dtype {src.dtype})")
    src = np.ascontiguousarray(src.astype(np.int64))
    bad = (src < 0) | (src >= n)
    if bad.any():
        raise IndexError(f"source {int(src[bad][0])} is outside the node range [0, {n})")
    return src, scalar


def _check_dtype(dtype):
    d = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if d not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return d


def narrow_to_uint32(dist):
    """int64 distances with INF -> uint32 with INF_U32 (OverflowError if a finite one does not fit)."""
    fin = dist != INF
    if fin.any() and int(dist[fin].max()) >= INF_U32:
        raise OverflowError("a distance is >= 2^32 - 1 and does not fit dtype='uint32'; use dtype='int64'")
    return np.where(fin, dist, INF_U32).astype(np.uint32)


class SSSPQuery:
    """One-to-all shortest paths on one graph and weight, reused across calls (one per thread).

    Parameters
    ----------
    graph : RoadGraph or DeviceGraph
        A DeviceGraph stays the caller's (not released by :meth:`release`) and implies the GPU.
    weight : str, optional
        Weight name (default: the graph's first weight; ignored for a DeviceGraph, which has one).
    algorithm : str
        As :func:`sssp`; ``"auto"`` resolves per call from the number of sources.
    variant : str, optional
    device : {"auto", "cpu", "gpu"}
        ``"auto"``: the GPU when usable and the algorithm has a GPU kernel, else the CPU.
    **options
        The algorithm's options (``gpuroute.ALGORITHMS[name].spec.options``), checked now.

    Raises
    ------
    ValueError, TypeError, KeyError, GPUUnavailableError
        As :func:`sssp`, at construction.
    """

    def __init__(self, graph, *, weight=None, algorithm="auto", variant=None, device="auto", _weak=False,
                 **options):
        from ..backend.device_graph import DeviceGraph

        if isinstance(graph, DeviceGraph):
            if device == "cpu":
                raise ValueError("a DeviceGraph lives on the GPU: device='cpu' needs the RoadGraph")
            self.dgraph, self._own_dgraph = graph, False
            self.weight = graph.weight_name
            rg = graph.graph
            device = "gpu"
        else:
            self.dgraph, self._own_dgraph = None, True
            rg = graph
            self.weight = graph.default_weight if weight is None else weight
            graph.weight(self.weight)  # KeyError naming the weights
        # the functional API's queries hold the graph weakly (they live in a WeakKeyDictionary keyed by it)
        self._graph = weakref.ref(rg) if _weak else rg
        self._weak = _weak
        if rg.n_nodes == 0:
            raise GraphError("the graph is empty (0 nodes): there is no source to search from")
        if algorithm != "auto" and algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}; choose from {sorted(ALGORITHMS)}")
        self.algorithm = algorithm
        self.variant = variant
        self.device_requested = device
        self.options = dict(options)
        resolve_device(device)  # ValueError / GPUUnavailableError now
        if algorithm != "auto":
            self._plan(algorithm)  # option and variant errors at construction
        self._runners = {}

    @property
    def graph(self):
        """The RoadGraph searched."""
        g = self._graph() if self._weak else self._graph
        if g is None:
            raise RuntimeError("the graph of this query was garbage collected")
        return g

    def _plan(self, name):
        alg = ALGORITHMS[name]
        if self.variant not in alg.variants:
            raise ValueError(f"algorithm {name!r} takes variant in {alg.variants}, got {self.variant!r}")
        opts = alg.spec.parse(self.options)
        dev = resolve_device(self.device_requested, alg.gpu is not None)
        if dev == "gpu" and alg.gpu is None:
            raise ValueError(f"algorithm {name!r} has no GPU implementation; use device='cpu'")
        return alg, opts, dev

    def _runner(self, alg, opts):
        key = alg.name
        if key not in self._runners:
            if self.dgraph is None:
                from ..backend.device_graph import DeviceGraph

                self.dgraph = DeviceGraph.shared(self.graph, self.weight)
            self._runners[key] = alg.gpu(self.dgraph, self.variant, opts)
        return self._runners[key]

    def full(self, sources, *, return_predecessors=False, dtype="int64"):
        """:class:`SSSPResult` (2-D arrays, stats) from ``sources``; see :func:`sssp_full`."""
        dtype = _check_dtype(dtype)
        want_cupy = is_cupy_array(sources)
        src, _ = _check_sources(self.graph.n_nodes, sources)
        name = self.algorithm
        if name == "auto":
            dev = resolve_device(self.device_requested)
            name = auto_algorithm(self.graph.n_nodes, dev, src.size)
        alg, opts, dev = self._plan(name)
        want_pred = bool(return_predecessors)
        if dev == "gpu":
            runner = self._runner(alg, opts)
            dist, pred, runs, params = runner.solve(src, want_pred, opts["phase_times"], dtype, not want_cupy)
        else:
            dist, pred, runs, params = alg.cpu(self.graph, self.weight, src, want_pred, self.variant, opts)
            if dtype == "uint32":
                dist = narrow_to_uint32(dist)
            if want_cupy:
                import cupy as cp

                dist = cp.asarray(dist)
                pred = cp.asarray(pred) if pred is not None else None
        stats = collect(alg.spec, dev, self.variant, runs, params)
        return SSSPResult(dist, pred, stats)

    def __call__(self, sources, *, return_predecessors=False, dtype="int64"):
        """Distances (and predecessors) as :func:`sssp` returns them."""
        scalar = np.ndim(sources) == 0 and not is_cupy_array(sources)
        res = self.full(sources, return_predecessors=return_predecessors, dtype=dtype)
        dist, pred = res.dist, res.pred
        if scalar:
            dist = dist[0]
            pred = pred[0] if pred is not None else None
        return (dist, pred) if return_predecessors else dist

    def release(self):
        """Free this query's GPU solvers now. The DeviceGraph stays: it is the caller's, or the one the
        functional API shares per (graph, weight), freed by :func:`release`."""
        self._runners = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


_QUERIES = weakref.WeakKeyDictionary()  # RoadGraph -> {key: SSSPQuery} (a DeviceGraph owns its own)


def _shared_query(graph, weight, algorithm, variant, device, options):
    from ..backend.device_graph import DeviceGraph

    wname = graph.weight_name if isinstance(graph, DeviceGraph) else (graph.default_weight if weight is None else weight)
    try:
        key = (wname, algorithm, variant, device, tuple(sorted(options.items())))
        hash(key)
    except TypeError:  # an unhashable option value: a fresh query, not kept
        return SSSPQuery(graph, weight=weight, algorithm=algorithm, variant=variant, device=device, **options)
    per = graph.queries if isinstance(graph, DeviceGraph) else _QUERIES.setdefault(graph, {})
    q = per.get(key)
    if q is None:
        q = per[key] = SSSPQuery(graph, weight=weight, algorithm=algorithm, variant=variant, device=device,
                                 _weak=not isinstance(graph, DeviceGraph), **options)
    return q


def release(graph=None):
    """Release the query objects (GPU solvers) and shared DeviceGraphs the functional API keeps for
    ``graph`` (for every graph when None)."""
    from ..backend.device_graph import DeviceGraph, release_shared

    if isinstance(graph, DeviceGraph):  # the caller's upload stays; its query objects go
        for q in graph.queries.values():
            q.release()
        graph.queries = {}
        return
    graphs = [graph] if graph is not None else list(_QUERIES.keys())
    for g in graphs:
        for q in _QUERIES.pop(g, {}).values():
            q.release()
    release_shared(graph)


def sssp_full(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
              device="auto", dtype="int64", **options):
    """Like :func:`sssp` but returns an :class:`SSSPResult` with statistics (always 2-D arrays)."""
    q = _shared_query(graph, weight, algorithm, variant, device, options)
    return q.full(sources, return_predecessors=return_predecessors, dtype=dtype)


def sssp(graph, sources, *, weight=None, algorithm="auto", variant=None, return_predecessors=False,
         device="auto", dtype="int64", **options):
    """Shortest distances from one or several sources to every node.

    Parameters
    ----------
    graph : RoadGraph or DeviceGraph
    sources : int or array_like of int, shape (k,)
        Source node ids (internal, 0-based). NumPy or CuPy.
    weight : str, optional
        Weight name (default: the graph's first weight).
    algorithm : str
        ``"auto"`` (see :func:`auto_algorithm`), ``"dijkstra"`` (CPU), ``"conventional"`` (alias
        ``"bellman-ford"``; Harish & Narayanan as "Accelerating SSSP Algorithm on GPU with Adaptive
        Thread Creation", Alg. 1-3, describes it), ``"selection"`` (same paper, Alg. 5-6), ``"adaptive"`` (Alg. 4),
        ``"martin"``, ``"crauser"``, ``"crauser-economic"`` (Ortega-Arranz et al., "A New GPU-based
        Approach to the Shortest Path Problem", sec. IV), ``"near-far"`` (Davidson et al., IPDPS 2014),
        ``"cell-bf"`` (cell-local Bellman-Ford, ours: ``sssp/cell_bf/cell_bf.cu``), ``"delta-stepping"``
        (Meyer & Sanders 2003; CPU). ``gpuroute.ALGORITHMS[name].spec`` lists each one's options and
        variants.
    variant : str, optional
        ``"successor"`` / ``"predecessor"`` for martin/crauser*; ``"count"``, ``"time"``, ``"time-host"``
        for adaptive (None: ``config.SSSP_ADAPTIVE_VARIANT``).
    return_predecessors : bool
        Also return the canonical shortest-path tree.
    device : {"auto", "cpu", "gpu"}
        ``"auto"``: the GPU when usable and the algorithm has a GPU kernel, else the CPU.
    dtype : {"int64", "uint32"}
        ``"uint32"``: 32-bit distances with ``gpuroute.INF_U32`` where unreachable (half the bytes to
        copy; on the GPU the device's own distances, no conversion).
    **options
        The algorithm's options (the same names on both devices; an option that only changes a GPU
        launch is accepted on the CPU and has no effect there), e.g. conventional ``mode=``, near-far
        ``delta=``/``delta_factor=``/``batch=``, adaptive ``frac=``/``up_us=``/``down_us=``, cell-bf
        ``threads=``/``nodes_per_thread=``/``loop=``; every algorithm ``phase_times=True``. An unknown
        option raises TypeError listing the accepted ones.

    Returns
    -------
    dist : ndarray, shape (k, n) -- or (n,) for a scalar source
        int64 (``gpuroute.INF`` where unreachable) or uint32 (``gpuroute.INF_U32``).
    pred : ndarray int32, same shape (only with ``return_predecessors``)
        ``gpuroute.NO_PREDECESSOR`` (-1) for the sources and unreachable nodes.
        Arrays are NumPy (page-locked host memory for batched GPU results), or CuPy when ``sources`` was
        a CuPy array.

    Raises
    ------
    IndexError
        A source outside ``[0, n_nodes)``.
    GraphError
        An empty graph.
    KeyError
        An unknown weight name.
    ValueError
        Unknown algorithm/variant/device/dtype, or a CPU-only algorithm with ``device="gpu"``.
    TypeError
        An option the algorithm does not take.
    GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    OverflowError
        On the GPU, a distance that does not fit the 32-bit device keys (> 2^32 - 2).
    """
    q = _shared_query(graph, weight, algorithm, variant, device, options)
    return q(sources, return_predecessors=return_predecessors, dtype=dtype)


__all__ = ["sssp", "sssp_full", "SSSPQuery", "SSSPResult", "ALGORITHMS", "Algorithm", "auto_algorithm", "release",
           "STATS_KEYS", "DTYPES"]

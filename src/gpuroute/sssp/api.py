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


def _no_options(name, opts):
    if opts:
        raise TypeError(f"unknown option(s) for {name}: {sorted(opts)}")


def _dijkstra_cpu(graph, weight, sources, want_pred, variant, **opts):
    _no_options("dijkstra", opts)
    w = graph.weight(weight)
    rfo, rt, ra = (graph.rev_first_out, graph.rev_tail, graph.rev_arc) if want_pred else (
        np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    dist, pred = _cpu.dijkstra_many(graph.first_out, graph.head, w, sources, rfo, rt, ra, want_pred)
    return dist, (pred if want_pred else None), {}


def _conventional_cpu(graph, weight, sources, want_pred, variant, **opts):
    _no_options("conventional on the CPU", opts)
    w = graph.weight(weight)
    dist = np.empty((sources.size, graph.n_nodes), dtype=DIST_DTYPE)
    phases = []
    for i, s in enumerate(sources):
        phases.append(_cpu.bellman_ford_cpu(graph.first_out, graph.head, w, int(s), dist[i]))
    pred = None
    if want_pred:
        pred = _cpu.canonical_predecessors_many(graph.rev_first_out, graph.rev_tail, graph.rev_arc, w, dist, sources)
    return dist, pred, {"phases": np.asarray(phases)}


def _solver(graph, cls, weight, *args, **kw):
    """Build (once per graph, weight and parameters) a GPU solver object; reused across calls."""
    cache = graph.__dict__.setdefault("_solver_cache", {})
    key = (cls.__name__, weight, args, tuple(sorted(kw.items())))
    if key not in cache:
        import cupy as cp

        cache[key] = cls(graph, weight, *args, **kw)
        # Buffers were allocated and zeroed on CuPy's default stream: make sure that work is done
        # before the solver's own stream uses them (a race seen on first use of large buffers).
        cp.cuda.Device().synchronize()
    return cache[key]


def _stack_gpu(results, want_pred):
    import cupy as cp

    if len(results) == 1:  # one source: a view, no copy
        dist = results[0][0][None]
        pred = results[0][1][None] if want_pred else None
    else:
        dist = cp.stack([r[0] for r in results])
        pred = cp.stack([r[1] for r in results]) if want_pred else None
    stats = {"phases": np.asarray([r[2]["phases"] for r in results])}
    for key in ("updated", "times_us", "selection_phase", "queue_phases", "modes"):
        if key in results[0][2]:
            stats[key] = [r[2][key] for r in results]
    for key in ("delta", "up_us", "down_us", "t_all_us", "t_queue_us", "cooperative", "loop", "cell_size", "n_cells"):
        if key in results[0][2]:
            stats[key] = results[0][2][key]
    return dist, pred, stats


def _conventional_gpu(graph, weight, sources, want_pred, variant, mode="fused", phase_times=False, **opts):
    from ._cuda import ConventionalGPU

    if mode == "fused":
        from ._cuda_frontier import ConventionalFusedGPU

        solver = _solver(graph, ConventionalFusedGPU, weight, **opts)
        return _stack_gpu([solver.run(int(s), want_pred, phase_times) for s in sources], want_pred)
    _no_options(f"conventional mode={mode!r}", opts)

    solver = _solver(graph, ConventionalGPU, weight, want_pred)
    res = []
    for s in sources:
        d, p, ph = solver.run(int(s), mode=mode)
        res.append((d, p, {"phases": ph}))
    return _stack_gpu(res, want_pred)


def _gpu_method(cls, **fixed):
    def run(graph, weight, sources, want_pred, variant, phase_times=False, **opts):
        from . import _cuda_frontier as cf

        kw = dict(fixed)
        if variant is not None and cls in ("DijkstraFrontierGPU",):
            kw["variant"] = variant
        kw.update(opts)
        if cls == "CellBFGPU":
            from ._cuda_cells import CellBFGPU as klass
        else:
            klass = getattr(cf, cls)
        solver = _solver(graph, klass, weight, **kw)
        return _stack_gpu([solver.run(int(s), want_pred, phase_times) for s in sources], want_pred)

    return run


def _adaptive_gpu(graph, weight, sources, want_pred, variant, phase_times=False, **opts):
    from .. import config
    from . import _cuda_frontier as cf

    if variant is None:
        variant = config.ADAPTIVE_VARIANT
    if variant == "time-host":  # the seed's loop: host-timed phases, a read-back per phase
        solver = _solver(graph, cf.AdaptiveTimeGPU, weight, **opts)
    else:  # "time" / "count": device-side switch (device clock / counted frontier), fused step
        solver = _solver(graph, cf.AdaptiveFusedGPU, weight, switch=variant, **opts)
    return _stack_gpu([solver.run(int(s), want_pred, phase_times) for s in sources], want_pred)


def _near_far_gpu(graph, weight, sources, want_pred, variant, phase_times=False, loop="graph", delta=None,
                  frac=None, batch=None, delta_factor=None, **opts):
    import cupy as cp

    from .. import config
    from . import _cuda_frontier as cf

    _no_options("near-far", opts)
    batch = int(batch or (1 if sources.size == 1 else config.BATCH_SOURCES))
    batch = max(1, min(batch, config.MAX_BATCH_ITEMS // max(graph.n_nodes, 1)))
    if delta is None and delta_factor is not None:
        delta = float("inf") if delta_factor == float("inf") else cf.default_delta(graph, weight, delta_factor)
    if loop == "graph":
        solver = _solver(graph, cf.NearFarGPU, weight, delta=delta, frac=frac, max_sources=batch)
    elif loop == "persistent":
        solver = _solver(graph, cf.NearFarPersistentGPU, weight, delta=delta, max_sources=batch)
    else:
        raise ValueError(f"loop must be 'graph' or 'persistent', got {loop!r}")
    dists, preds, phases, upd, times = [], [], [], [], []
    for i in range(0, sources.size, batch):
        chunk = [int(s) for s in sources[i:i + batch]]
        if loop == "graph":
            d, p, st = solver.run_many(chunk, want_pred, phase_times)
        else:
            d, p, st = solver.run_many(chunk, want_pred)
        dists.append(d)
        preds.append(p)
        phases.append(st["phases"])
        upd.append(st.get("updated"))
        times.append(st.get("times_us"))
    dist = cp.concatenate(dists)
    pred = cp.concatenate(preds) if want_pred else None
    return dist, pred, {"phases": np.asarray(phases), "updated": upd, "times_us": times, "delta": st["delta"],
                        "batch": batch, "loop": loop}


def _cell_bf_cpu(graph, weight, sources, want_pred, variant, **opts):
    from ._cells import cell_bf_cpu

    return cell_bf_cpu(graph, weight, sources, want_pred, variant, **opts)


def _cpu_frontier(name, ignore_variant=False):
    def run(graph, weight, sources, want_pred, variant, **opts):
        from . import _cpu_frontier

        if ignore_variant:  # the CPU twin of adaptive switches on the counted frontier in either variant
            variant = None
        return getattr(_cpu_frontier, name)(graph, weight, sources, want_pred, variant, **opts)

    return run


register(Algorithm("dijkstra", _dijkstra_cpu, None, doc="binary-heap Dijkstra (CPU, numba)"))
register(Algorithm("conventional", _conventional_cpu, _conventional_gpu,
                   doc="Harish & Narayanan Bellman-Ford, seed 001 Alg. 1-3"), "bellman-ford", "harish")
register(Algorithm("selection", _cpu_frontier("selection_cpu"), _gpu_method("SelectionGPU"),
                   doc="updated-node threads with a duplicate-free device queue, seed 001 Alg. 5-6"))
register(Algorithm("adaptive", _cpu_frontier("adaptive_cpu", ignore_variant=True), _adaptive_gpu, variants=(None, "time", "time-host", "count"),
                   doc="adaptive thread creation, seed 001 Alg. 4: switch by phase time measured on the device "
                       "('time'), by host-timed phases as the seed runs it ('time-host'), or by the frontier "
                       "counted on the device ('count')"))
_SP = (None, "successor", "predecessor")
register(Algorithm("martin", _cpu_frontier("martin_cpu"), _gpu_method("DijkstraFrontierGPU", kind=0), variants=_SP,
                   doc="Martin et al.: frontier = unsettled nodes at the minimum distance, seed 002 sec. IV-D/E"))
register(Algorithm("crauser", _cpu_frontier("crauser_cpu"), _gpu_method("DijkstraFrontierGPU", kind=1),
                   variants=_SP, doc="Crauser et al. general variant, seed 002 sec. IV-A/B"))
register(Algorithm("crauser-economic", _cpu_frontier("crauser_economic_cpu"),
                   _gpu_method("DijkstraFrontierGPU", kind=2), variants=_SP,
                   doc="Crauser et al. economic variant, seed 002 sec. IV-C"))
register(Algorithm("near-far", _cpu_frontier("near_far_cpu"), _near_far_gpu,
                   doc="near-far (Davidson et al. 2014): persistent kernel, batched over many sources"))
register(Algorithm("cell-bf", _cell_bf_cpu, _gpu_method("CellBFGPU"),
                   doc="cell-local Bellman-Ford: a thread block per cell runs to local convergence in shared "
                       "memory, boundary arcs relaxed into other cells, asynchronously in one persistent launch "
                       "or in rounds (cells as in seed 000 sec. 2)"))
register(Algorithm("delta-stepping", _cpu_frontier("delta_stepping_cpu"), None,
                   doc="delta-stepping (Meyer & Sanders 2003), CPU twin"))


def auto_algorithm(graph, device, n_sources=1):
    """The algorithm ``algorithm="auto"`` runs: Dijkstra on the CPU; on the GPU cell-local Bellman-Ford
    for one source (on graphs up to ``config.AUTO_CELL_MAX_NODES`` nodes, None = any size), else near-far
    batched over the sources (BENCHMARKS.md has the measurements behind this rule)."""
    from .. import config

    if device == "cpu":
        return "dijkstra"
    limit = config.AUTO_CELL_MAX_NODES
    if n_sources == 1 and (limit is None or graph.n_nodes <= limit):
        return "cell-bf"
    return "near-far"


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
        algorithm = auto_algorithm(graph, dev, len(src))
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
        ``"auto"`` (see :func:`auto_algorithm`), ``"dijkstra"`` (CPU), ``"conventional"`` (alias
        ``"bellman-ford"``; Harish & Narayanan, seed 001 Alg. 1-3), ``"selection"`` (seed 001
        Alg. 5-6), ``"adaptive"`` (seed 001 Alg. 4), ``"martin"`` (seed 002 sec. IV-D/E),
        ``"crauser"`` / ``"crauser-economic"`` (seed 002 sec. IV-A-C), ``"near-far"`` (Davidson et al.
        2014), ``"cell-bf"`` (cell-local Bellman-Ford, ours: see ``sssp/cells.cu``), ``"delta-stepping"``
        (Meyer & Sanders 2003; CPU). ``gpuroute.ALGORITHMS`` lists them with
        the variants they take and whether they have a GPU kernel.
    variant : str, optional
        ``"successor"`` or ``"predecessor"`` for martin/crauser*; for adaptive ``"time"`` (the seed's
        rule on phase times measured on the device), ``"time-host"`` (the seed's rule and loop: phases
        timed by the host, a read-back per phase) or ``"count"`` (the frontier counted on the device);
        None = ``config.ADAPTIVE_VARIANT``.
    return_predecessors : bool
        Also return the canonical shortest-path tree.
    device : {"auto", "cpu", "gpu"}
    **options
        Algorithm-specific, GPU: conventional ``mode="fused"|"graph"|"host"`` (``"host"`` runs the
        loop as seed 001 does), ``chase=L``, ``nodes_per_thread=1|4``, ``pipelined=`` (fused);
        near-far ``delta=`` (weight units,
        ``float("inf")`` for a plain work queue) or ``delta_factor=`` (x mean weight, default 64),
        ``batch=`` (sources per pass), ``frac=`` (adaptive thread mapping), ``loop="graph"|"persistent"``;
        adaptive ``up_us=``, ``down_us=`` (variants time, time-host) or ``frac=`` (variant count),
        ``pipelined=`` (time, count); cell-bf ``threads=``,
        ``nodes_per_thread=`` (cell size = their product; CPU twin ``cell_size=``), ``loop="async"|"rounds"``,
        ``order="grow"|"hilbert"``, ``reps=``, ``max_in=``; every GPU method
        ``phase_times=True`` (per-phase times in ``sssp_full(...).stats``). CPU twins: near-far and
        delta-stepping ``delta=``; adaptive ``up=``, ``down=`` (fractions of n). An option the chosen
        implementation does not know raises TypeError.

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

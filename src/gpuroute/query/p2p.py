"""Point-to-point shortest paths: unidirectional Dijkstra, bidirectional Dijkstra, A*, and one GPU
one-to-all search followed back along its tree. Every returned path carries the ids of its arcs, and
those arcs' weights sum exactly to the returned distance.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from ..backend import resolve_device
from ..geo.kernels import min_weight_per_length
from ..graph.constants import DIST_DTYPE, INDEX_DTYPE, INF
from ..graph.units import Unit
from . import _kernels as K
from .paths import extract_path, path_arcs

__all__ = ["PathResult", "METHODS", "shortest_path"]

#: Methods accepted by :func:`shortest_path` (the last one runs on the GPU).
METHODS = ("dijkstra", "bidirectional", "astar", "gpu-sssp")
#: Relative slack taken off the A* factor so that floating-point rounding of great-circle lengths cannot
#: make the potential overestimate.
_ASTAR_SLACK = 1e-7


@dataclass
class PathResult:
    """One shortest path.

    Attributes
    ----------
    distance : int
        Length in the weight's unit; ``gpuroute.INF`` if the target cannot be reached.
    nodes : ndarray int32, shape (k,)
        Nodes from source to target; empty if unreachable, ``[source]`` if source == target.
    arcs : ndarray int32, shape (max(k - 1, 0),)
        Arc ids along the path; ``graph.weight(weight)[arcs].sum() == distance``.
    weight : str
        Name of the weight that was minimised.
    unit : Unit
        Its :class:`~gpuroute.graph.units.Unit` (``graph.units[weight]``; for an overlay's metric, the
        graph weight's Unit with the metric's symbol, :func:`gpuroute.crp.overlay.metric_unit`).
    settled : int
        Nodes settled by the search (both directions for ``"bidirectional"``); a work measure.
    method : str
        The search that produced it.
    device : str
        ``"cpu"`` or ``"gpu"``: where it ran.
    stats : dict
        Method-specific details (meeting node, A* factor).
    """

    distance: int
    nodes: np.ndarray
    arcs: np.ndarray
    weight: str
    unit: Unit
    settled: int = 0
    method: str = ""
    stats: dict = field(default_factory=dict)
    device: str = "cpu"

    @property
    def reachable(self) -> bool:
        """True when a path exists."""
        return self.distance != INF


def _check_node(graph, x, what):
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an integer node id, got {type(x).__name__}") from None
    if v < 0 or v >= graph.n_nodes:
        raise IndexError(f"{what} {v} is outside the node range [0, {graph.n_nodes})")
    return v


def _astar_factor(graph, weight_name, w):
    """``(1 - slack) * min over arcs of w(a) / length(a)``, once per (graph, weight)."""

    def build():
        c = graph.coords
        k = min_weight_per_length(graph.tail, graph.head, w, c[:, 0], c[:, 1], graph.is_planar)
        return 0.0 if not np.isfinite(k) else float(k) * (1.0 - _ASTAR_SLACK)

    return graph.derived(("astar_factor", weight_name), build)


def shortest_path(graph, source, target, *, weight=None, method=None, device="auto"):
    """Shortest path from ``source`` to ``target``.

    Parameters
    ----------
    graph : RoadGraph
    source, target : int
        Internal node ids in ``[0, n_nodes)``.
    weight : str, optional
        Weight to minimise (default: the graph's first weight).
    method : {None, "bidirectional", "dijkstra", "astar", "gpu-sssp"}
        None: ``"bidirectional"`` on the CPU, ``"gpu-sssp"`` on the GPU. ``"dijkstra"``: unidirectional Dijkstra (1959) with a binary heap, stopping once the target is
        settled. ``"bidirectional"``: bidirectional Dijkstra (Pohl 1971) on the forward and reverse CSR,
        stopping when ``min_fwd_queue + min_bwd_queue >= best`` (Goldberg & Harrelson 2005, Sec. 3).
        ``"astar"``: A* (Hart, Nilsson & Raphael 1968) with ``h(v) = floor(k * gc(v, target))`` where
        ``gc`` is the great-circle length in metres and ``k = min over arcs of w(a) / gc(a)`` (arcs of
        positive length), computed once per (graph, weight) and cached; the triangle inequality makes
        ``h`` admissible and consistent. Planar graphs use the Euclidean length instead.
        ``"gpu-sssp"`` (GPU): one GPU one-to-all search from ``source`` with predecessors
        (``sssp(..., algorithm="auto")``: cell-local Bellman-Ford), then the tree path back from
        ``target``.
    device : {"auto", "cpu", "gpu"}
        As everywhere in gpuroute: ``"auto"`` is the GPU when one is usable and the method has a GPU
        implementation, else the CPU. The CPU methods (dijkstra, bidirectional, astar) run on the CPU
        under ``"auto"``; with ``method=None`` a GPU machine runs ``"gpu-sssp"``.
        ``PathResult.device`` says where it ran.

    Returns
    -------
    PathResult
        ``distance`` INF and empty ``nodes``/``arcs`` if ``target`` cannot be reached (no exception).

    Raises
    ------
    IndexError
        ``source`` or ``target`` outside ``[0, n_nodes)``.
    TypeError
        A non-integer node id.
    KeyError
        Unknown weight name.
    ValueError
        Unknown method; ``"astar"`` on a graph without coordinates; a CPU method with ``device="gpu"``
        or ``"gpu-sssp"`` with ``device="cpu"``.
    GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    OverflowError
        ``device="gpu"`` and a distance beyond the GPU kernels' 32-bit range.
    """
    if method is not None and method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {list(METHODS)}")
    dev = resolve_device(device, method is None or method == "gpu-sssp")
    if method is None:
        method = "gpu-sssp" if dev == "gpu" else "bidirectional"
    if method == "gpu-sssp" and dev != "gpu":
        raise ValueError("method 'gpu-sssp' runs on the GPU; use device='gpu' or 'auto' on a GPU machine")
    if method != "gpu-sssp" and dev == "gpu":
        raise ValueError(f"method {method!r} runs on the CPU; use device='cpu' or 'auto' (or method='gpu-sssp')")
    s = _check_node(graph, source, "source")
    t = _check_node(graph, target, "target")
    w = graph.weight(weight)
    wname = graph.default_weight if weight is None else weight
    if method == "gpu-sssp":
        return _shortest_path_gpu(graph, s, t, weight, wname)
    if method == "astar" and graph.coords is None:
        raise ValueError(f"method='astar' needs node coordinates, but graph {graph.name!r} has none")
    unit = graph.units[wname]
    empty = np.zeros(0, dtype=INDEX_DTYPE)
    if s == t:
        return PathResult(0, np.array([s], dtype=INDEX_DTYPE), empty, wname, unit, 0, method)

    n = graph.n_nodes
    fo, hd = graph.first_out, graph.head
    stats = {}
    if method == "bidirectional":
        dist_f = np.full(n, INF, dtype=DIST_DTYPE)
        dist_b = np.full(n, INF, dtype=DIST_DTYPE)
        arc_f = np.full(n, -1, dtype=INDEX_DTYPE)
        arc_b = np.full(n, -1, dtype=INDEX_DTYPE)
        best, meet, settled = K.bidirectional_pp(
            fo, hd, w, graph.rev_first_out, graph.rev_tail, graph.rev_arc, s, t, dist_f, dist_b, arc_f, arc_b)
        best, meet, settled = int(best), int(meet), int(settled)
        if best == INF:
            return PathResult(INF, empty, empty, wname, unit, settled, method)
        buf = np.empty(n, dtype=INDEX_DTYPE)
        k1 = K.trace_back(arc_f, graph.tail, s, meet, buf)
        first = buf[:k1].copy()
        k2 = K.trace_forward(arc_b, hd, meet, t, buf)
        if k1 < 0 or k2 < 0:  # pragma: no cover - would be a kernel bug
            raise RuntimeError("internal error: bidirectional search trees do not join")
        arcs = np.concatenate((first, buf[:k2])).astype(INDEX_DTYPE)
        distance = best
        stats["meeting_node"] = meet
    else:
        dist = np.full(n, INF, dtype=DIST_DTYPE)
        pred_arc = np.full(n, -1, dtype=INDEX_DTYPE)
        if method == "dijkstra":
            settled = int(K.dijkstra_pp(fo, hd, w, s, t, dist, pred_arc))
        else:
            k = _astar_factor(graph, wname, w)
            c = graph.coords
            h = np.full(n, -1, dtype=np.int64)
            settled = int(K.astar_pp(fo, hd, w, c[:, 0], c[:, 1], graph.is_planar, k, s, t,
                                              dist, pred_arc, h))
            stats["astar_factor"] = k
        distance = int(dist[t])
        if distance == INF:
            return PathResult(INF, empty, empty, wname, unit, settled, method, stats)
        buf = np.empty(n, dtype=INDEX_DTYPE)
        k1 = K.trace_back(pred_arc, graph.tail, s, t, buf)
        if k1 < 0:  # pragma: no cover - would be a kernel bug
            raise RuntimeError("internal error: predecessor arcs do not lead back to the source")
        arcs = buf[:k1].copy()
    nodes = np.empty(arcs.size + 1, dtype=INDEX_DTYPE)
    nodes[:-1] = graph.tail[arcs]
    nodes[-1] = t
    return PathResult(distance, nodes, arcs, wname, unit, settled, method, stats)


def _shortest_path_gpu(graph, s, t, weight, wname):
    """One GPU one-to-all search with predecessors, then the tree path from ``s`` to ``t``."""
    from ..sssp import sssp

    unit = graph.units[wname]
    empty = np.zeros(0, dtype=INDEX_DTYPE)
    dist, pred = sssp(graph, s, weight=weight, return_predecessors=True, device="gpu")
    distance = int(dist[t])
    if distance == INF:
        return PathResult(INF, empty, empty, wname, unit, 0, "gpu-sssp", device="gpu")
    nodes = extract_path(pred, s, t)
    arcs = path_arcs(graph, nodes, weight)
    reached = int(np.count_nonzero(dist < INF))
    return PathResult(distance, nodes, arcs, wname, unit, reached, "gpu-sssp", device="gpu")


def compile_kernels(method=None):
    """Compile (or load from numba's on-disk cache) the CPU kernels of ``method`` (None: bidirectional) on
    a 2-node graph, so that the first query's time is the query's alone. Returns the seconds it took
    (about 0 once compiled in this process; seconds on a cold cache). ``"gpu-sssp"`` compiles nothing
    here (its CUDA modules compile on first use and are cached by CuPy)."""
    import time

    from ..graph.road_graph import RoadGraph

    t0 = time.perf_counter()
    if method == "gpu-sssp":
        return 0.0
    g = _TINY.get("graph")
    if g is None:
        g = _TINY["graph"] = RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coords=[[0.0, 0.0], [0.001, 0.0]])
    for m in ("dijkstra", "bidirectional", "astar") if method is None else (method,):
        if (m, "done") not in _TINY:
            shortest_path(g, 0, 1, method=m, device="cpu")
            _TINY[m, "done"] = True
    return time.perf_counter() - t0


_TINY = {}

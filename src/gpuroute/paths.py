"""Point-to-point queries and path helpers: snapping, one shortest path, paths from predecessor arrays.

Public API
----------
nearest_node, nearest_nodes, OutOfBoundsError
    Snap lon/lat (or planar x/y) points to the nearest graph node with a k-d tree built once per graph.
shortest_path, PathResult, METHODS
    One source-target shortest path by unidirectional Dijkstra, bidirectional Dijkstra or A*.
extract_path, path_arcs, path_length
    Nodes from a predecessor array; arcs and length of a node sequence.

The searches are numba kernels in :mod:`gpuroute._paths_cpu`. Every returned path carries the ids of
its arcs, and those arcs' weights sum exactly to the returned distance.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from . import _paths_cpu
from ._paths_cpu import EARTH_RADIUS_M
from .backend import resolve_device, to_numpy
from .graph.constants import DIST_DTYPE, INDEX_DTYPE, INF, NO_PREDECESSOR

__all__ = ["OutOfBoundsError", "PathResult", "METHODS", "nearest_node", "nearest_nodes", "shortest_path",
           "extract_path", "path_arcs", "path_length", "great_circle_m"]

#: Margin, in degrees, added on every side of a lon/lat graph's bounding box before a point counts as
#: outside it (0.01 degree is about 1.1 km of latitude).
BBOX_MARGIN_DEG = 0.01
#: The same margin for planar graphs, as a fraction of the larger side of the bounding box.
BBOX_MARGIN_FRACTION = 0.01
#: Methods accepted by :func:`shortest_path`.
METHODS = ("dijkstra", "bidirectional", "astar")
#: Relative slack taken off the A* factor so that floating-point rounding of great-circle lengths cannot
#: make the potential overestimate.
_ASTAR_SLACK = 1e-7


class OutOfBoundsError(ValueError):
    """A query point lies outside the graph's bounding box (expanded by a small margin).

    Attributes
    ----------
    bbox : tuple of float
        ``(min_x, min_y, max_x, max_y)`` of the expanded box (lon/lat degrees or planar units).
    """

    def __init__(self, message, bbox):
        super().__init__(message)
        self.bbox = tuple(float(b) for b in bbox)


# ---------------------------------------------------------------------------------------------- geometry
def great_circle_m(lon1, lat1, lon2, lat2):
    """Great-circle distance in metres (haversine, mean Earth radius 6,371,008.8 m).

    Parameters
    ----------
    lon1, lat1, lon2, lat2 : float or array_like of float
        Degrees (WGS84); broadcast together.

    Returns
    -------
    float64 ndarray (broadcast shape) or float
    """
    p1 = np.radians(lat1)
    p2 = np.radians(lat2)
    dl = np.radians(np.subtract(lon2, lon1))
    a = np.sin(0.5 * (p2 - p1)) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(0.5 * dl) ** 2
    return 2.0 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


def _is_planar(graph):
    return graph.coord_system == "planar"


def _require_coords(graph, what):
    if graph.coords is None:
        raise ValueError(f"{what} needs node coordinates, but graph {graph.name!r} has none "
                         "(load it with coordinates, e.g. a DIMACS .co file)")
    if graph.coord_system not in ("lonlat", "planar"):
        raise ValueError(f"graph {graph.name!r} has coord_system {graph.coord_system!r}; "
                         "expected 'lonlat' or 'planar'")


def _unit_vectors(lon, lat):
    lo = np.radians(lon)
    la = np.radians(lat)
    c = np.cos(la)
    return np.column_stack((c * np.cos(lo), c * np.sin(lo), np.sin(la)))


class _Snapper:
    """The cached k-d tree of one graph's coordinates and its expanded bounding box."""

    def __init__(self, graph):
        from scipy.spatial import cKDTree

        xy = graph.coords
        self.coords = xy
        self.coord_system = graph.coord_system
        self.planar = _is_planar(graph)
        lo = xy.min(axis=0)
        hi = xy.max(axis=0)
        if self.planar:
            margin = BBOX_MARGIN_FRACTION * float(np.max(hi - lo))
        else:
            margin = BBOX_MARGIN_DEG
        self.bbox = (lo[0] - margin, lo[1] - margin, hi[0] + margin, hi[1] + margin)
        # lon/lat: the chord between unit vectors grows monotonically with the great-circle distance,
        # so the tree's Euclidean nearest neighbour is the great-circle nearest one (no projection error).
        pts = xy if self.planar else _unit_vectors(xy[:, 0], xy[:, 1])
        self.tree = cKDTree(pts)

    def valid_for(self, graph):
        return self.coords is graph.coords and self.coord_system == graph.coord_system


def _snapper(graph):
    s = graph.__dict__.get("_kdtree")
    if s is None or not s.valid_for(graph):
        s = _Snapper(graph)
        graph.__dict__["_kdtree"] = s
    return s


def nearest_nodes(graph, lons, lats):
    """Snap many points to their nearest graph nodes.

    Parameters
    ----------
    graph : RoadGraph
        Must have coordinates. For ``coord_system="lonlat"`` the points are lon/lat degrees and
        "nearest" is by great-circle distance (the k-d tree holds 3-D unit vectors, so there is no
        projection error); for ``"planar"`` they are x/y and nearest is Euclidean.
    lons, lats : array_like of float, shape (k,)
        Longitudes and latitudes (or x and y); broadcast together.

    Returns
    -------
    nodes : ndarray int32, shape (k,)
        Node id nearest to each point (ties broken by the k-d tree).
    offsets : ndarray float64, shape (k,)
        Distance from each point to its node: great-circle metres (lon/lat) or planar units.

    Raises
    ------
    ValueError
        The graph has no coordinates or no nodes, or a coordinate is not finite.
    OutOfBoundsError
        A point lies outside the graph's bounding box expanded by ``BBOX_MARGIN_DEG`` degrees
        (``BBOX_MARGIN_FRACTION`` of the box for planar graphs); the message gives the point and box.

    Notes
    -----
    The tree is built on the first call and cached on the graph (``graph.__dict__["_kdtree"]``); it is
    rebuilt if ``graph.coords`` is replaced.
    """
    _require_coords(graph, "nearest_nodes")
    if graph.n_nodes == 0:
        raise ValueError(f"graph {graph.name!r} has no nodes to snap to")
    x, y = np.broadcast_arrays(np.asarray(lons, dtype=np.float64), np.asarray(lats, dtype=np.float64))
    x = np.atleast_1d(x).ravel()
    y = np.atleast_1d(y).ravel()
    bad = ~(np.isfinite(x) & np.isfinite(y))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"point {i} ({x[i]}, {y[i]}) has a non-finite coordinate")
    s = _snapper(graph)
    x0, y0, x1, y1 = s.bbox
    out = (x < x0) | (x > x1) | (y < y0) | (y > y1)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        names = ("x", "y") if s.planar else ("lon", "lat")
        raise OutOfBoundsError(
            f"point {i} ({names[0]}={x[i]}, {names[1]}={y[i]}) lies outside graph {graph.name!r}'s bounding "
            f"box {names[0]} [{x0:.6f}, {x1:.6f}] x {names[1]} [{y0:.6f}, {y1:.6f}] (margin included)",
            s.bbox)
    if s.planar:
        offsets, idx = s.tree.query(np.column_stack((x, y)))
        offsets = np.asarray(offsets, dtype=np.float64)
    else:
        _, idx = s.tree.query(_unit_vectors(x, y))
        c = graph.coords[idx]
        offsets = great_circle_m(x, y, c[:, 0], c[:, 1])
    return np.asarray(idx, dtype=INDEX_DTYPE), np.asarray(offsets, dtype=np.float64)


def nearest_node(graph, lon, lat):
    """Snap one point to its nearest graph node.

    Parameters
    ----------
    graph : RoadGraph
    lon, lat : float
        Degrees (lon/lat graphs) or planar x/y.

    Returns
    -------
    node : int
    offset_m : float
        Great-circle metres from the point to the node (planar units for planar graphs).

    Raises
    ------
    ValueError, OutOfBoundsError
        As :func:`nearest_nodes`.
    """
    if np.ndim(lon) or np.ndim(lat):
        raise ValueError("nearest_node takes one point; use nearest_nodes for arrays")
    nodes, offs = nearest_nodes(graph, [lon], [lat])
    return int(nodes[0]), float(offs[0])


# ---------------------------------------------------------------------------------------------- results
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
    unit : str
        Its unit (``graph.units[weight]``).
    settled : int
        Nodes settled by the search (both directions for ``"bidirectional"``); a work measure.
    method : str
        The search that produced it.
    """

    distance: int
    nodes: np.ndarray
    arcs: np.ndarray
    weight: str
    unit: str
    settled: int = 0
    method: str = ""
    stats: dict = field(default_factory=dict)

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
    """``(1 - slack) * min over arcs of w(a) / length(a)``, cached per (graph, weight)."""
    cache = graph.__dict__.setdefault("_astar_factor", {})
    hit = cache.get(weight_name)
    if hit is not None and hit[0] is w and hit[1] is graph.coords:
        return hit[2]
    c = graph.coords
    k = _paths_cpu.min_weight_per_length(graph.tail, graph.head, w, c[:, 0], c[:, 1], _is_planar(graph))
    k = 0.0 if not np.isfinite(k) else float(k) * (1.0 - _ASTAR_SLACK)
    cache[weight_name] = (w, c, k)
    return k


def shortest_path(graph, source, target, *, weight=None, method="bidirectional", device="cpu"):
    """Shortest path from ``source`` to ``target``.

    Parameters
    ----------
    graph : RoadGraph
    source, target : int
        Internal node ids in ``[0, n_nodes)``.
    weight : str, optional
        Weight to minimise (default: the graph's first weight).
    method : {"bidirectional", "dijkstra", "astar"}
        ``"dijkstra"``: unidirectional Dijkstra (1959) with a binary heap, stopping once the target is
        settled. ``"bidirectional"``: bidirectional Dijkstra (Pohl 1971) on the forward and reverse CSR,
        stopping when ``min_fwd_queue + min_bwd_queue >= best`` (Goldberg & Harrelson 2005, Sec. 3).
        ``"astar"``: A* (Hart, Nilsson & Raphael 1968) with ``h(v) = floor(k * gc(v, target))`` where
        ``gc`` is the great-circle length in metres and ``k = min over arcs of w(a) / gc(a)`` (arcs of
        positive length), computed once per (graph, weight) and cached; the triangle inequality makes
        ``h`` admissible and consistent. Planar graphs use the Euclidean length instead.
    device : {"cpu", "auto", "gpu"}
        ``"cpu"`` and ``"auto"`` run ``method`` on the CPU (a point-to-point search settles a small
        part of a city network: faster there than a whole GPU search). ``"gpu"`` ignores ``method``
        and runs one GPU one-to-all search from ``source`` with predecessors
        (``sssp(..., algorithm="auto")``, cell-local Bellman-Ford for one source), then follows the
        shortest-path tree back from ``target`` (``PathResult.method`` is ``"gpu-sssp"``).

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
        Unknown method; ``"astar"`` on a graph without coordinates.
    GPUUnavailableError
        ``device="gpu"`` without a usable GPU.
    OverflowError
        ``device="gpu"`` and a distance beyond the GPU kernels' 32-bit range.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {list(METHODS)}")
    resolve_device(device)  # ValueError for an unknown device, GPUUnavailableError for "gpu" without one
    s = _check_node(graph, source, "source")
    t = _check_node(graph, target, "target")
    w = graph.weight(weight)
    wname = graph.default_weight if weight is None else weight
    if device == "gpu":
        return _shortest_path_gpu(graph, s, t, weight, wname)
    if method == "astar":
        _require_coords(graph, "method='astar'")
    unit = graph.units.get(wname, "")
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
        best, meet, settled = _paths_cpu.bidirectional_pp(
            fo, hd, w, graph.rev_first_out, graph.rev_tail, graph.rev_arc, s, t, dist_f, dist_b, arc_f, arc_b)
        best, meet, settled = int(best), int(meet), int(settled)
        if best == INF:
            return PathResult(INF, empty, empty, wname, unit, settled, method)
        buf = np.empty(n, dtype=INDEX_DTYPE)
        k1 = _paths_cpu.trace_back(arc_f, graph.tail, s, meet, buf)
        first = buf[:k1].copy()
        k2 = _paths_cpu.trace_forward(arc_b, hd, meet, t, buf)
        if k1 < 0 or k2 < 0:  # pragma: no cover - would be a kernel bug
            raise RuntimeError("internal error: bidirectional search trees do not join")
        arcs = np.concatenate((first, buf[:k2])).astype(INDEX_DTYPE)
        distance = best
        stats["meeting_node"] = meet
    else:
        dist = np.full(n, INF, dtype=DIST_DTYPE)
        pred_arc = np.full(n, -1, dtype=INDEX_DTYPE)
        if method == "dijkstra":
            settled = int(_paths_cpu.dijkstra_pp(fo, hd, w, s, t, dist, pred_arc))
        else:
            k = _astar_factor(graph, wname, w)
            c = graph.coords
            h = np.full(n, -1, dtype=np.int64)
            settled = int(_paths_cpu.astar_pp(fo, hd, w, c[:, 0], c[:, 1], _is_planar(graph), k, s, t,
                                              dist, pred_arc, h))
            stats["astar_factor"] = k
        distance = int(dist[t])
        if distance == INF:
            return PathResult(INF, empty, empty, wname, unit, settled, method, stats)
        buf = np.empty(n, dtype=INDEX_DTYPE)
        k1 = _paths_cpu.trace_back(pred_arc, graph.tail, s, t, buf)
        if k1 < 0:  # pragma: no cover - would be a kernel bug
            raise RuntimeError("internal error: predecessor arcs do not lead back to the source")
        arcs = buf[:k1].copy()
    nodes = np.empty(arcs.size + 1, dtype=INDEX_DTYPE)
    nodes[:-1] = graph.tail[arcs]
    nodes[-1] = t
    return PathResult(distance, nodes, arcs, wname, unit, settled, method, stats)


def _shortest_path_gpu(graph, s, t, weight, wname):
    """One GPU one-to-all search with predecessors, then the tree path from ``s`` to ``t``."""
    from .sssp import sssp

    unit = graph.units.get(wname, "")
    empty = np.zeros(0, dtype=INDEX_DTYPE)
    dist, pred = sssp(graph, s, weight=weight, return_predecessors=True, device="gpu")
    distance = int(dist[t])
    if distance == INF:
        return PathResult(INF, empty, empty, wname, unit, 0, "gpu-sssp")
    nodes = extract_path(pred, s, t)
    arcs = path_arcs(graph, nodes, weight)
    reached = int(np.count_nonzero(dist < INF))
    return PathResult(distance, nodes, arcs, wname, unit, reached, "gpu-sssp")


# ---------------------------------------------------------------------------------------------- helpers
def extract_path(pred, source, target):
    """Nodes of the path ``source -> target`` in a shortest-path tree given by predecessors.

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        ``pred[v]`` is the node before ``v``; ``NO_PREDECESSOR`` (-1) for the root and unreachable
        nodes (as returned by ``sssp(..., return_predecessors=True)`` for one source). NumPy or CuPy.
    source, target : int

    Returns
    -------
    ndarray int32, shape (k,)
        ``source, ..., target``; ``[source]`` if they are equal; empty if ``pred[target]`` is -1
        (target unreachable).

    Raises
    ------
    ValueError
        ``pred`` is not 1-D, or is malformed: the walk from ``target`` runs into a cycle (more than ``n``
        steps) or into -1 / an id outside ``[0, n)`` before reaching ``source``.
    IndexError
        ``source`` or ``target`` outside ``[0, n)``.
    """
    p = to_numpy(pred)
    if p.ndim != 1:
        raise ValueError(f"pred must be 1-D (one source's tree), got shape {p.shape}")
    if p.size and p.dtype.kind not in "iu":
        raise ValueError(f"pred must hold integer node ids, got dtype {p.dtype}")
    n = p.size
    s = operator.index(source)
    t = operator.index(target)
    for what, v in (("source", s), ("target", t)):
        if v < 0 or v >= n:
            raise IndexError(f"{what} {v} is outside the node range [0, {n})")
    if s == t:
        return np.array([s], dtype=INDEX_DTYPE)
    if p[t] == NO_PREDECESSOR:
        return np.zeros(0, dtype=INDEX_DTYPE)
    out = np.empty(n, dtype=np.int64)
    k = _paths_cpu.walk_predecessors(np.ascontiguousarray(p, dtype=np.int64), s, t, out)
    if k == -2:
        raise ValueError(f"malformed predecessor array: following pred from target {t} does not reach "
                         f"source {s} within n={n} steps (a cycle)")
    if k == -1:
        raise ValueError(f"malformed predecessor array: following pred from target {t} hits -1 or an id "
                         f"outside [0, {n}) before reaching source {s}")
    return out[:k][::-1].astype(INDEX_DTYPE)


def _as_nodes(graph, nodes):
    v = np.asarray(to_numpy(nodes))
    if v.ndim != 1:
        raise ValueError(f"nodes must be a 1-D sequence, got shape {v.shape}")
    if v.size and v.dtype.kind not in "iu":
        raise TypeError(f"nodes must be integer node ids, got dtype {v.dtype}")
    v = v.astype(np.int64)
    bad = (v < 0) | (v >= graph.n_nodes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexError(f"node {int(v[i])} at position {i} is outside the node range [0, {graph.n_nodes})")
    return v


def path_arcs(graph, nodes, weight=None):
    """Arc ids joining consecutive nodes of a path.

    Parameters
    ----------
    graph : RoadGraph
    nodes : array_like of int, shape (k,)
    weight : str, optional
        Only matters if the graph holds parallel arcs (possible for a graph built directly with the
        ``RoadGraph`` constructor): the lightest under this weight is chosen. Graphs from
        ``RoadGraph.from_arcs`` have exactly one arc per (u, v).

    Returns
    -------
    ndarray int32, shape (max(k - 1, 0),)

    Raises
    ------
    ValueError
        Two consecutive nodes are not joined by an arc (the message names them and their position).
    IndexError
        A node id outside ``[0, n_nodes)``.
    """
    v = _as_nodes(graph, nodes)
    w = graph.weight(weight)
    out = np.empty(max(v.size - 1, 0), dtype=INDEX_DTYPE)
    if v.size < 2:
        return out
    i = _paths_cpu.arcs_between(graph.first_out, graph.head, w, v, out)
    if i >= 0:
        raise ValueError(f"no arc {int(v[i])} -> {int(v[i + 1])} (path positions {i}, {i + 1}) "
                         f"in graph {graph.name!r}")
    return out


def path_length(graph, nodes, weight=None):
    """Length of a path given by its nodes: the sum of its arcs' weights.

    Parameters
    ----------
    graph : RoadGraph
    nodes : array_like of int, shape (k,)
        ``k >= 1``; a single node has length 0.
    weight : str, optional
        Default: the graph's first weight.

    Returns
    -------
    int
        In the weight's unit (``graph.units[weight]``).

    Raises
    ------
    ValueError
        An empty path (an unreachable target has distance ``INF``, not a path), or two consecutive
        nodes not joined by an arc.
    IndexError, KeyError
        A bad node id; an unknown weight.
    """
    v = _as_nodes(graph, nodes)
    if v.size == 0:
        raise ValueError("an empty path has no length (an unreachable target's distance is INF)")
    arcs = path_arcs(graph, v, weight)
    return int(graph.weight(weight)[arcs].astype(np.int64).sum())

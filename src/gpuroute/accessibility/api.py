"""``aggregate`` and ``nearest_pois``: pandana's accessibility queries (Foti, Waddell, Luxen, "A
Generalized Computational Framework for Accessibility: From the Pedestrian to the Metropolitan Scale",
TRB 2012; the ``pandana`` package) without a precompute step. The public functions validate, snap, pick
the device and the formulation, and format; the searches are in :mod:`.cpu` (numba) and :mod:`.gpu`.

Semantics (checked against pandana 0.8, ``Network.aggregate`` / ``Network.nearest_pois``):

* Direction: node ``v`` aggregates the values placed at nodes ``u`` with ``d(v -> u) <= radius``, the
  network distance *from* ``v`` (pandana's range query searches forward from each source node; on a
  two-way network both directions agree).
* Inclusion: ``d <= radius`` (a node exactly at the radius counts, with weight 0 under linear decay).
* Decay of a value ``x`` at distance ``d``: ``flat`` ``x``; ``linear`` ``(1 - d / radius) x``;
  ``exp`` (alias ``exponential``) ``exp(-d / radius) x``.
* Types: ``sum`` of the decayed values; ``mean`` = that sum / the number of values (pandana divides the
  decayed sum by the count); ``count``; ``std`` = the population standard deviation of the values
  (decay ignored, as pandana forces ``flat``); ``min`` and ``max`` of the values (decay ignored).
  pandana's ``ave`` is accepted for ``mean``.
* Empty (no value in range): pandana's values, :data:`EMPTY`: 0 for ``sum``, ``mean``, ``count``, ``std``
  and -1 for ``min`` and ``max`` (``empty=`` replaces them, e.g. ``np.nan``).
* Nearest POIs: the k smallest (distance, poi) pairs within ``radius``, ties broken by the POI's position
  (pandana leaves ties in no stated order); a missing one has distance ``max_distance`` (default: the
  radius, pandana's fill) and id :data:`NO_POI` (-1; pandana uses NaN).

Differences from pandana: values stay float64 (pandana keeps ``min``/``max`` candidates as float32);
distances are the integer weights (pandana scales float impedances by 1000 and truncates); ``std`` is
computed by Chan, Golub and LeVeque's update (equal to pandana's ``sqrt(E[x^2] - mean^2)`` in exact
arithmetic, without its cancellation); pandana's quantile types (``25pct``, ``median``, ``75pct``) are
not offered.

Formulation (``strategy``). ``"points"``: one bounded search from every *distinct* point node over the
reverse graph (``d(v, p)`` for every ``v``), each folded into the nodes it reaches: as many searches as
point nodes. ``"nodes"``: one bounded search from every node over the forward graph gathering the
points it settles (the nearest-POI search stops past the k-th POI). ``"auto"``: on the GPU always
``"points"`` (a search costs the same from a point or a node, and there are never more point nodes than
nodes; the GPU's two methods, bounded ball searches and PHAST trees, are :mod:`.gpu`'s);
on the CPU ``"points"`` while the distinct point nodes are at most ``config.ACCESS_CPU_NODES_FRACTION``
(aggregate) or ``config.ACCESS_CPU_NEAREST_NODES_FRACTION`` (nearest POIs: the early stop makes dense
POIs cheap from every node) of the nodes, else ``"nodes"``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import config
from ..backend import resolve_device
from ..extras import require
from ..graph.constants import INF
from .cpu import DECAYS, MAX, MEAN, MIN, MODES, STD, SUM
from .index import AccessIndex

#: Aggregation types (pandana's, less its quantiles).
TYPES = ("sum", "mean", "count", "std", "min", "max")
#: Decays (``exponential`` is accepted for ``exp``).
DECAY_NAMES = ("flat", "linear", "exp")
#: pandana's value for a node with no value in range, by type.
EMPTY = {"sum": 0.0, "mean": 0.0, "count": 0.0, "std": 0.0, "min": -1.0, "max": -1.0}
#: POI id of a missing nearest POI.
NO_POI = -1
#: Formulations.
STRATEGIES = ("auto", "points", "nodes")


# ---------------------------------------------------------------------------------------------- validation
def weight_unit(ix):
    """The :class:`~gpuroute.graph.units.Unit` of the index's weight (the empty unit, of unknown scale, for a
    hierarchy loaded without its graph)."""
    from ..graph.units import NONE

    return ix.graph.units[ix.weight] if ix.graph is not None else NONE


def radius_in_weight_units(radius, ix, unit=None):
    """``(radius, largest included integer distance)`` in the weight's unit, from a number or a quantity
    string (:func:`gpuroute.graph.units.to_weight_units`; ``unit`` as there)."""
    from ..graph.units import to_weight_units

    if isinstance(radius, np.number):
        radius = radius.item()
    r = to_weight_units(radius, weight_unit(ix), unit=unit, what="radius")
    return r, min(int(math.floor(r)), int(INF) - 1)  # the largest distance included (INF never is)


def _type(type):
    t = str(type).lower()
    t = "mean" if t == "ave" else t
    if t not in TYPES:
        raise ValueError(f"type must be one of {TYPES}, got {type!r}")
    return t


def _decay(decay, radius):
    d = str(decay).lower()
    d = "exp" if d == "exponential" else d
    if d not in DECAY_NAMES:
        raise ValueError(f"decay must be one of {DECAY_NAMES} (or 'exponential'), got {decay!r}")
    if d != "flat" and radius <= 0:
        raise ValueError(f"decay={decay!r} divides by the radius: it needs radius > 0")
    return d


def _strategy(strategy):
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


def is_frame(x):
    """Whether ``x`` looks like a pandas/GeoPandas DataFrame (duck-typed: pandas need not be installed)."""
    return hasattr(x, "columns") and hasattr(x, "index") and hasattr(x, "iloc")


def frame_xy(frame, what):
    """``(x, y)`` float64 of a GeoDataFrame of points (its geometry) or a DataFrame with ``lon``/``lat``
    (or ``x``/``y``) columns.

    Raises
    ------
    ValueError
        No point geometry and no such columns; a geometry that is not a point.
    """
    geom = getattr(frame, "geometry", None) if "geometry" in getattr(frame, "columns", ()) or \
        hasattr(frame, "_geometry_column_name") else None
    if geom is not None:
        kinds = set(np.asarray(geom.geom_type).tolist()) if len(geom) else set()
        if kinds - {"Point"}:
            raise ValueError(f"{what}: every geometry must be a Point (got {sorted(kinds)}); take centroids first")
        return np.asarray(geom.x, dtype=np.float64), np.asarray(geom.y, dtype=np.float64)
    cols = {str(c).lower(): c for c in frame.columns}
    for a, b in (("lon", "lat"), ("lng", "lat"), ("longitude", "latitude"), ("x", "y")):
        if a in cols and b in cols:
            return (np.asarray(frame[cols[a]], dtype=np.float64), np.asarray(frame[cols[b]], dtype=np.float64))
    raise ValueError(f"{what}: a frame needs point geometries or lon/lat (or x/y) columns; it has {list(frame.columns)}")


def resolve_nodes(ix, nodes, what, snapping="default"):
    """Internal node ids (int64 (k,)) of ``nodes``: ids (array-like, pandas Series), or a (Geo)DataFrame of
    points snapped to their nearest nodes (:func:`gpuroute.geo.nearest_nodes`).

    Raises
    ------
    TypeError
        Ids that are not integers.
    IndexError
        An id outside ``[0, n)`` (naming its position).
    ValueError
        A frame without points or coordinates; snapping without node coordinates.
    """
    if is_frame(nodes):
        from ..geo import nearest_nodes

        if ix.graph is None:
            raise ValueError(f"{what}: snapping points needs the graph's coordinates; the hierarchy was loaded "
                             "without its graph")
        x, y = frame_xy(nodes, what)
        return nearest_nodes(ix.graph, x, y, snapping=snapping)[0].astype(np.int64)
    a = np.atleast_1d(np.asarray(getattr(nodes, "values", nodes)))
    if a.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise TypeError(f"{what} must be integer node ids (dtype {a.dtype})")
    a = a.astype(np.int64)
    bad = (a < 0) | (a >= ix.n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexError(f"{what}[{i}] = {int(a[i])} is outside the node range [0, {ix.n})")
    return a


def _values(values, nodes_arg, k):
    if values is None:
        return np.ones(k)
    if isinstance(values, str):
        if not is_frame(nodes_arg):
            raise ValueError(f"values={values!r} names a column, but node_ids is not a frame")
        if values not in nodes_arg.columns:
            raise KeyError(f"values: no column {values!r} in the frame; it has {list(nodes_arg.columns)}")
        values = nodes_arg[values]
    v = np.atleast_1d(np.asarray(getattr(values, "values", values)))
    if v.ndim != 1 or v.size != k:
        raise ValueError(f"values must hold one number per point: {k} points, values of shape {v.shape}")
    if v.size and v.dtype.kind not in "biuf":
        raise TypeError(f"values must be numbers (dtype {v.dtype})")
    v = v.astype(np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"values[{i}] is {v[i]}: values must be finite (drop missing values first)")
    return v


def _device(device, strategy):
    """The device: ``"auto"`` with ``strategy="nodes"`` (a CPU formulation) is the CPU."""
    return "cpu" if device == "auto" and strategy == "nodes" else resolve_device(device)


def _pick(strategy, dev, m, n, nearest=False):
    if dev == "gpu":
        if strategy == "nodes":
            raise ValueError("strategy='nodes' runs on the CPU; the GPU searches from the points")
        return "points"
    if strategy != "auto":
        return strategy
    frac = config.ACCESS_CPU_NEAREST_NODES_FRACTION if nearest else config.ACCESS_CPU_NODES_FRACTION
    return "points" if m <= float(frac) * n else "nodes"


def _node_frame(ix, columns):
    pd = require("pandas", "accessibility results as DataFrames (frame=True)")

    idx = pd.Index(np.arange(ix.n), name="node")
    df = pd.DataFrame(columns, index=idx)
    g = ix.graph
    if g is not None and g.node_ids is not None:
        df.insert(0, "node_id", g.node_ids)
    return df


# ---------------------------------------------------------------------------------------------- aggregate
def partial_aggregate(index, nodes, values, bound, radius, decay, mode, *, device="cpu", strategy="points",
                      chunks=None):
    """Mergeable accumulators ``(a0, a1, cn)`` (n,) of some points (validated ids and values): the piece
    :func:`aggregate` and :func:`gpuroute.distributed.aggregate` share. Merge with
    :func:`gpuroute.accessibility.cpu.merge_acc`, finish with :func:`finish`."""
    from . import cpu

    ix = AccessIndex(index)
    stats = cpu.point_stats(nodes, values)
    if stats[0].size == 0:
        return cpu.init_acc(mode, ix.n)
    if device == "gpu":
        from .gpu import aggregate_gpu

        return aggregate_gpu(ix, stats, bound, radius, decay, mode)
    if strategy == "nodes":
        return cpu.aggregate_nodes(ix.csr(), stats, bound, radius, decay, mode)
    return cpu.aggregate_points(ix.csr_reverse(), stats, bound, radius, decay, mode, chunks)


def finish(acc, type, empty="pandana"):
    """The aggregate (n,) float64 of accumulators ``(a0, a1, cn)``; ``empty`` where no value was in range
    (``"pandana"``: :data:`EMPTY`)."""
    a0, a1, cn = acc
    mode = MODES[type]
    e = EMPTY[type] if isinstance(empty, str) and empty == "pandana" else float(empty)
    has = cn > 0
    if mode == SUM:
        out = a0.copy()
    elif mode == MEAN:
        out = a0 / np.maximum(cn, 1)
    elif mode == STD:
        out = np.sqrt(np.maximum(a1, 0.0) / np.maximum(cn, 1))
    elif mode in (MIN, MAX):
        out = a0.copy()
    else:
        out = cn.astype(np.float64)
    out[~has] = e
    return out


def aggregate(index, node_ids, values=None, radius=None, *, type="sum", decay="flat", weight=None, device="auto",
              strategy="auto", empty="pandana", snapping="default", as_frame=False, unit=None):
    """Aggregate, for every node, the values placed at nodes within a network radius of it (pandana's
    ``Network.aggregate``; semantics in the module doc).

    Parameters
    ----------
    index : RoadGraph or ContractionHierarchy
        The network. A graph is searched directly on the CPU; on the GPU a hierarchy is built from it
        once (CU-CH, kept on the graph) -- pass a hierarchy to reuse your own.
    node_ids : array_like of int, shape (k,), or (Geo)DataFrame
        Where each value is placed: internal node ids, or points (a GeoDataFrame of Point geometries, or a
        DataFrame with ``lon``/``lat`` or ``x``/``y`` columns) snapped to their nearest nodes.
    values : array_like of float, shape (k,), or str, optional
        One value per point (a column name of the frame); default 1 (pandana's default: counts).
    radius : float or str
        ``>= 0``: a quantity with its unit (``"2 km"``, ``"500 m"``, ``"10 min"``), or a number in ``unit``.
        A bare number without ``unit`` is taken in the weight's unit only where that is metres or seconds
        (or a unit of unknown scale); elsewhere (DIMACS NY: ~0.1 m steps; OSM times: deciseconds) it is
        refused as ambiguous (:func:`gpuroute.graph.units.to_weight_units`).
    type : {"sum", "mean", "count", "std", "min", "max"}
    decay : {"flat", "linear", "exp"}
    weight : str, optional
        The graph's weight (default: its first, or the hierarchy's).
    device : {"auto", "cpu", "gpu"}
    strategy : {"auto", "points", "nodes"}
        The formulation (module doc); the result is the same. ``"nodes"`` runs on the CPU (``device="auto"``
        then means the CPU; ``device="gpu"`` raises ValueError).
    empty : "pandana" or float
        The value of a node with nothing in range (default :data:`EMPTY`).
    snapping : {"default", "any"}
        For frames: :func:`gpuroute.geo.nearest_nodes`'s rule.
    as_frame : bool
        Return a pandas DataFrame indexed by node (``node``), one column named ``type`` (and ``node_id``
        with the external ids when the graph has them).
    unit : {None, "native", "m", "km", "s", "min", "h"}
        The unit of a numeric ``radius`` (``"native"``: the weight's own unit).

    Returns
    -------
    ndarray float64, shape (n,), or DataFrame

    Raises
    ------
    ValueError
        A negative or non-finite radius, a bare radius where its unit is ambiguous, a unit of the other
        quantity or unknown; an unknown type, decay or strategy, a decay other than flat with radius 0,
        values of the wrong length or not finite, a frame without points.
    IndexError
        A node id outside ``[0, n)``.
    TypeError
        ``index`` is not a graph or hierarchy; ids that are not integers.
    GPUUnavailableError
        ``device="gpu"`` without a GPU.
    OverflowError
        GPU distances beyond 32 bits (use ``device="cpu"``).

    Notes
    -----
    Floating point: sums are accumulated in float64 in the order of the formulation, so the two
    formulations (and a multi-threaded CPU run) agree to about 1e-12 relative; the GPU folds points
    in the CPU's single-chunk order with the same operations (``exp`` may differ in its last bit).
    Counts, ``min`` and ``max`` are exact.
    """
    if radius is None:
        raise TypeError("aggregate() needs a radius (e.g. '2 km')")
    ix = AccessIndex(index, weight)
    r, bound = radius_in_weight_units(radius, ix, unit)
    t = _type(type)
    d = _decay(decay, r)
    _strategy(strategy)
    nodes = resolve_nodes(ix, node_ids, "node_ids", snapping)
    vals = _values(values, node_ids, nodes.size)
    dev = _device(device, strategy)
    m = np.unique(nodes).size
    strat = _pick(strategy, dev, m, ix.n)
    mode = MODES[t]
    acc = partial_aggregate(ix, nodes, vals, bound, r, DECAYS[d], mode, device=dev, strategy=strat)
    out = finish(acc, t, empty)
    return _node_frame(ix, {t: out}) if as_frame else out


# ---------------------------------------------------------------------------------------------- nearest
def partial_nearest(index, poi_nodes, bound, k, *, device="cpu", strategy="points", ids=None, chunks=None):
    """The k smallest (distance, poi) pairs of every node (n, k), raw: INF and the largest int64 in empty
    slots; POI ids are positions in ``poi_nodes`` (or ``ids``, an int64 array of the same length). Merge
    with :func:`gpuroute.accessibility.cpu.merge_lists`."""
    from . import cpu

    ix = AccessIndex(index)
    poi_nodes = np.asarray(poi_nodes, dtype=np.int64)
    ids = np.arange(poi_nodes.size, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    if poi_nodes.size == 0:
        return cpu.empty_lists((ix.n, k))
    P = np.unique(poi_nodes)
    first, order = cpu._poi_csr(poi_nodes, P)
    pid = ids[order]
    if device == "gpu":
        from .gpu import nearest_gpu

        return nearest_gpu(ix, P, first, pid, bound, k)
    if strategy == "nodes":
        return cpu.nearest_nodes(ix.csr(), P, first, pid, bound, k)
    return cpu.nearest_points(ix.csr_reverse(), P, first, pid, bound, k, chunks)


def distance_factor(radius, ix, unit=None):
    """Multiplier from the weight's unit to the unit the caller speaks: ``unit``, else the unit named in a
    radius string (``"2 km"`` -> km), else 1 (the weight's own)."""
    from ..graph.units import QUANTITY_UNITS, factor_to, split_quantity

    if unit is None and isinstance(radius, str):
        sym = split_quantity(radius)[1]
        unit = sym if sym in QUANTITY_UNITS else None
    return 1.0 if unit is None else factor_to(weight_unit(ix), unit, "unit")


def finish_nearest(lists, fill, factor=1.0):
    """``(distances float64 (n, k) with ``fill``, ids int64 (n, k) with NO_POI)`` of raw lists, distances
    multiplied by ``factor`` (the weight's unit to the caller's)."""
    d, i = lists
    miss = d == INF
    dist = d.astype(np.float64)
    if factor != 1.0:
        dist *= factor
    dist[miss] = fill
    ids = i.copy()
    ids[miss] = NO_POI
    return dist, ids


def nearest_pois(index, poi_node_ids, radius, k=1, *, weight=None, device="auto", strategy="auto", max_distance=None,
                 snapping="default", as_frame=False, unit=None):
    """The k nearest points of interest of every node within a network radius (pandana's
    ``Network.nearest_pois`` with ``include_poi_ids=True``; semantics in the module doc).

    Parameters
    ----------
    index : RoadGraph or ContractionHierarchy
    poi_node_ids : array_like of int, shape (m,), or (Geo)DataFrame
        The POIs' nodes (internal ids), or points snapped to their nearest nodes. A POI's id is its
        position here (0 .. m-1); several POIs may share a node.
    radius : float or str
        ``>= 0``, as :func:`aggregate`'s (``"2 km"``, or a number in ``unit``).
    k : int
        POIs per node, ``>= 1``.
    weight, device, strategy, snapping
        As :func:`aggregate`.
    max_distance : float, optional
        Distance reported for a missing POI, in the unit of the returned distances (default: ``radius``,
        pandana's).
    unit : {None, "native", "m", "km", "s", "min", "h"}
        The unit of a numeric ``radius`` and of the returned distances: with ``unit`` (or a radius string
        such as ``"2 km"``, whose unit is then used) distances come back in that unit, else in the
        weight's.
    as_frame : bool
        A DataFrame indexed by node with pandana's columns: ``1 .. k`` (distances) and ``poi1 .. poik``
        (ids, :data:`NO_POI` where missing).

    Returns
    -------
    distances : ndarray float64, shape (n, k)
        Ascending along each row, in ``unit`` (above); ``max_distance`` where fewer than k POIs are in
        range.
    poi_ids : ndarray int64, shape (n, k)
        :data:`NO_POI` (-1) where missing. (One DataFrame instead with ``as_frame``.)

    Raises
    ------
    ValueError
        A negative radius, ``k < 1``, an unknown strategy.
    IndexError
        A node id outside ``[0, n)``.
    TypeError, GPUUnavailableError, OverflowError
        As :func:`aggregate`.
    """
    ix = AccessIndex(index, weight)
    r, bound = radius_in_weight_units(radius, ix, unit)
    if isinstance(k, bool) or not isinstance(k, (numbers.Integral, np.integer)):
        raise TypeError(f"k must be an integer >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    k = int(k)
    _strategy(strategy)
    nodes = resolve_nodes(ix, poi_node_ids, "poi_node_ids", snapping)
    dev = _device(device, strategy)
    strat = _pick(strategy, dev, np.unique(nodes).size, ix.n, nearest=True)
    lists = partial_nearest(ix, nodes, bound, k, device=dev, strategy=strat)
    f = distance_factor(radius, ix, unit)
    fill = r * f if max_distance is None else float(max_distance)
    dist, ids = finish_nearest(lists, fill, f)
    if not as_frame:
        return dist, ids
    cols = {q + 1: dist[:, q] for q in range(k)}
    cols.update({f"poi{q + 1}": ids[:, q] for q in range(k)})
    return _node_frame(ix, cols)


__all__ = ["aggregate", "nearest_pois", "TYPES", "DECAY_NAMES", "EMPTY", "NO_POI", "STRATEGIES",
           "partial_aggregate", "partial_nearest", "finish", "finish_nearest", "resolve_nodes", "frame_xy",
           "radius_in_weight_units", "distance_factor", "weight_unit"]

"""The isochrone service (:meth:`gpuroute.engine.Engine.isochrone`) past validation, and its pipeline: the reachable pieces of road of every
contour drawn on one lattice, a distance field per contour, its level set traced as rings (marching
squares), small holes filled and small parts dropped on the rings, Douglas-Peucker, GeoJSON.

Pipeline (one request, ``K`` contours, largest first):

1. **Search** (:mod:`.search`: :func:`~.search.search_cpu`, :func:`~.search.reach_cpu`): the cost of every node reachable within the largest
   contour from the heads of the snapped origin's arcs: a bounded Dijkstra over the graph (numba) that
   gives up after ``config.SERVE_ISOCHRONE_DIJKSTRA_FRACTION`` of the nodes are settled, for the
   hierarchy's bounded PHAST (``ContractionHierarchy.within``: a sweep over every node). On the GPU
   (:class:`.lattice.IsochroneGPU`): one PHAST pass over the origin's heads (Delling, Goldberg, Nowatzyk,
   Werneck, "PHAST: Hardware-Accelerated Shortest Path Trees", IPDPS 2011) whose rows stay on the device.
   On an engine with an overlay (a :class:`Metric` with ``turns``): the ENTRY cost of every arc reachable
   within it by routes as ``/route`` drives them (turn costs paid, restrictions honoured, the overlay's
   current metric), a turn-aware bounded Dijkstra on arcs on the CPU
   (:func:`.search.search_turns`); the pieces are then drawn per arc (on the GPU, where one is used:
   the arcs' entry costs scattered into a per-arc array on the device, the kernels reading an arc's
   entry cost where they read its tail's cost).
2. **Lattice** (:mod:`.lattice`: :func:`~.lattice.lattice`): square cells of ``config.SERVE_ISOCHRONE_CELL_M`` (default half the
   band's half-width ``config.SERVE_ISOCHRONE_BUFFER_M``), coarser where the largest contour's bounding
   box would need more than ``config.SERVE_ISOCHRONE_MAX_CELLS`` cells (then the band is at least one
   cell): the resolution follows the contour's size. The window is the pieces' bounding box plus the
   band; each contour traces its own part of it.
3. **Marks and field** (:mod:`.lattice`: ``extent_cpu``, ``mark_cpu``, ``field_cpu``; the GPU twins
   ``iso_best``, ``iso_extent``, ``iso_mark``, ``iso_hpass``, ``iso_vpass`` in ``isochrone.cu``, equal bit
   for bit): every reachable piece (arc ``u -> v`` with ``d(u) <= C`` cut at ``min(1, (C - d(u)) / c)``,
   or, by arcs, with its entry cost in place of ``d(u)``; the origin's arcs from the origin on) is sampled every cell and its cells marked; the field of a
   lattice point is the exact Euclidean distance to the nearest marked point within ``reach = r + 1.5``
   cells, by two separable passes (the nearest mark along the row, then the minimum over the column
   window of ``dx^2 + dy^2``; Danielsson, "Euclidean distance mapping", CGIP 1980, bounded to the
   reach), stored as the code ``dx^2 + dy^2`` (``FAR`` beyond reach); a contour's codes are raised to
   the next larger contour's (so contours nest). On the CPU, a large request's extent and marks run in
   parts of the items and its two passes in bands of rows on worker threads
   (``config.SERVE_ISOCHRONE_LATTICE_THREADS``): the same codes.
4. **Rings** (:mod:`.polygons`: :func:`~.polygons.trace`): marching squares (Lorensen and Cline, "Marching cubes", SIGGRAPH 1987, in
   two dimensions) at the level ``r + 1e-3`` cell, with linear interpolation along lattice edges,
   saddles resolved by keeping the inside corners apart (parts are 4-connected sets of inside lattice
   points), every ring followed once from its first horizontal crossing in row-major order (shells
   counter-clockwise, holes clockwise).
5. **Structure** (:func:`~.polygons.structure`): the part of each hole and the hole enclosing each shell, found by
   one walk along a lattice row from the ring's first crossing (the first crossing to its left belongs
   to a ring of the same part, or of the enclosing region: no point-in-polygon test); holes below
   ``config.SERVE_ISOCHRONE_MAX_HOLE_M2`` filled, parts below ``denoise`` times the largest dropped,
   parts inside a filled hole dropped, parts of a contour in a part the next larger contour drops
   dropped (what clipping to it did).
6. **Simplification** (:func:`~.polygons.simplify`): Douglas-Peucker (Douglas and Peucker, "Algorithms for the
   reduction of the number of points required to represent a digitized line or its caricature",
   Cartographica 1973) between anchors: ring starts and the ends of the runs a contour shares with the
   next larger or smaller one (the same lattice edges with the same field values), so that shared runs
   simplify to the same vertices in both contours.
7. **Degrees, checks** (:func:`~.polygons.rings_of`): positions in degrees rounded to 6 decimals, repeats and
   back-and-forth spikes of the rounding dropped; then two checks on a uniform grid of segments, the
   second in a worker thread (``config.SERVE_ISOCHRONE_CHECK_THREADS``): each contour valid on the
   rounded positions (rings of at least 3 vertices, their orientation, no spike, no two segments
   meeting except neighbours at their vertex, each ring inside exactly the rings the structure says),
   each contour inside the next larger one before the rounding (segments of the two identical, apart,
   or meeting at a common vertex where the smaller one runs into the larger one's inside; one vertex of
   each ring on the right side). A vertex can only have crossed a ring's simplified boundary if it is
   within the tolerance of it, so rays are cast from those alone. Every predicate is a floating-point
   filter (Shewchuk, "Adaptive precision floating-point arithmetic and fast robust geometric
   predicates", 1997, the first stage) that answers "unsure" near zero. Where segments meet, the
   vertices Douglas-Peucker dropped under them are kept again and the checks rerun; any other failure
   hands the request to the GEOS path (:func:`~.polygons.geos_geometries`: shapely's Douglas-Peucker, validity,
   clipping, snap-rounding), as it ran before (on NY, 5 and 10 min: none of 108 requests needed it).
"""
from __future__ import annotations

import numpy as np

from .... import config
from ....backend import resolve_device
from ...osrm import EngineError, waypoints
from . import lattice, search
from .polygons import geometries

__all__ = ["isochrone", "metric_of", "graph_arrays", "gpu_drawer"]


def isochrone(engine, origin, met, values, *, metric, polygons=True, denoise=1.0, generalize=0.0, colors=None,
              coordinates="lists", shapely):
    """The isochrone answer (see :meth:`gpuroute.engine.Engine.isochrone`): a GeoJSON FeatureCollection.

    Parameters
    ----------
    engine : Engine
    origin : PhantomSet
        The snapped origin (one point); its nearest segment's options are searched from.
    met : search.Metric
        :func:`metric_of`'s (or an exclusion's).
    values : list of float
        Validated contours (s or m, in the caller's order).
    metric : {"duration", "distance"}
    polygons : bool
        Polygons (True) or their rings as lines.
    denoise, generalize : float
        Validated.
    colors : list of str or None
        ``"#rrggbb"`` per contour.
    coordinates : {"lists", "arrays"}
    shapely : module
        shapely (>= 2), for the GEOS path.
    """
    ranked = sorted(range(len(values)), key=lambda k: -values[k])
    r = origin.rows(0)
    own = r.start + np.flatnonzero(~origin.tie[r])  # its segment's arcs, not the ties'
    o_lon, o_lat = float(origin.lon[0]), float(origin.lat[0])
    req = search.Request(met, engine._head, list(zip(origin.arc[own].tolist(), origin.fraction[own].tolist(),
                                                     strict=True)), [values[i] / met.scale for i in ranked], o_lon,
                         o_lat)
    gpu = gpu_drawer(engine, met)
    if gpu is not None:
        codes, lat = gpu.codes(req, met if met.turns is not None else None)
    else:
        codes, lat = lattice.codes_cpu(graph_arrays(engine), met, req)
    geoms, _ = geometries(shapely, codes, lat, len(values), denoise, generalize, o_lon, o_lat, polygons,
                          coordinates == "arrays")
    features = []
    for i, geom in zip(ranked, geoms, strict=True):
        props = {"contour": values[i], "metric": metric}
        if colors is not None:
            props["color"] = colors[i]
        features.append({"type": "Feature", "properties": props, "geometry": geom})
    return {"code": "Ok", "type": "FeatureCollection", "features": features,
            "waypoints": waypoints(origin, engine._fingerprint, engine._names)}


def metric_of(engine, metric):
    """The :class:`.search.Metric` of ``"duration"`` or ``"distance"`` (cached on the engine per weight);
    EngineError InvalidOptions naming why when the engine cannot search it. With an overlay: the turn-aware
    metric of :class:`.search.OverlayMetrics` (the overlay's current one where it is of that quantity)."""
    e = engine
    if e._traffic is not None:
        om = getattr(e, "_iso_overlay", None)
        if om is None:
            om = e._iso_overlay = search.OverlayMetrics(e.graph, e._traffic)  # a race builds two, harmlessly
        return om.get(metric)
    g = e.graph
    quantity = "time" if metric == "duration" else "length"
    unit = g.units[e.weight]
    cache = getattr(e, "_iso_metrics", None)
    if cache is None:
        cache = e._iso_metrics = {}  # a race builds a metric twice, harmlessly
    if unit.quantity == quantity:
        ch, name = e.ch, e.weight
    elif metric == "distance" and e.distance_ch is not None:
        ch, name = e.distance_ch, e.distance_ch.weight
    else:
        ch = None
        names = [k for k in g.weights if g.units[k].quantity == quantity]
        if metric == "duration" and "travel_time" in names:
            names = ["travel_time"]
        if not names:
            raise EngineError("InvalidOptions", f"metric={metric} needs a {quantity} weight; graph "
                              f"{g.name!r} has only {', '.join(sorted(g.weights))} and the engine has no "
                              f"hierarchy for {'durations' if metric == 'duration' else 'distances'}")
        name = names[0]
    key = (name, ch is not None)
    if key not in cache:
        w = e._w if ch is e.ch and name == e.weight else g.weight(name).astype(np.float64)
        scale = e._w_scale if ch is e.ch and name == e.weight else float(g.units[name].scale or 1.0)
        if ch is not None:
            csr = (np.asarray(g.first_out, dtype=np.int64), np.asarray(g.head, dtype=np.int32),
                   np.asarray(g.weight(name), dtype=np.int64))
            cache[key] = search.Metric(name, w, scale, csr=csr, ch=ch)
        else:
            csr = g.to_scipy(name).astype(np.float64)

            def bounded(source, bound, csr=csr):
                from scipy.sparse.csgraph import dijkstra

                d = dijkstra(csr, indices=source, limit=bound)
                nodes = np.flatnonzero(d <= bound)
                return nodes, d[nodes]

            cache[key] = search.Metric(name, w, scale, search=bounded)
    return cache[key]


def graph_arrays(engine):
    """``(first_out int64, head int64, tail int64, lon float64, lat float64)`` of the engine's graph (cached
    on the engine)."""
    arr = getattr(engine, "_iso_arrays", None)
    if arr is None:
        g = engine.graph
        c = np.asarray(g.coords, dtype=np.float64)
        arr = engine._iso_arrays = (np.asarray(g.first_out, dtype=np.int64), engine._head, engine._tail,
                                    np.ascontiguousarray(c[:, 0]), np.ascontiguousarray(c[:, 1]))
    return arr


def gpu_drawer(engine, met):
    """The GPU drawer of a metric (:class:`.lattice.IsochroneGPU`, built once per engine and metric name), or
    None where isochrones run on the CPU (``config.SERVE_ISOCHRONE_DEVICE``; neither a hierarchy nor turns;
    no GPU). A metric with ``turns`` (an engine with an overlay) draws on the GPU from the CPU's turn-aware
    search; its drawer takes the request's metric (``/customize`` replaces it).
    :meth:`gpuroute.engine.Engine.close` drops them."""
    if met.ch is None and met.turns is None:
        return None
    if resolve_device(str(config.SERVE_ISOCHRONE_DEVICE)) != "gpu":
        return None
    cache = getattr(engine, "_iso_gpu", None)
    if cache is None:
        cache = engine._iso_gpu = {}
    key = met.name if met.turns is None else ("turns", met.name)
    with lattice.BUILD_LOCK:
        if key not in cache:
            cache[key] = lattice.IsochroneGPU(graph_arrays(engine), met)
    return cache[key]

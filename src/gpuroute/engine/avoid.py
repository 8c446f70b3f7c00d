"""``avoid_polygons`` and ``avoid_ways``: routes, tables, trips and isochrones that avoid an area or some
OpenStreetMap ways, per request. An avoid is one more way to make the excluded-arc mask of
:mod:`gpuroute.engine.exclude` (the mask is OR-ed with ``exclude=``'s classes); everything past the mask
(the customization with turns into excluded arcs forbidden, the masked snapping, the isochrone metric) is
exclude's own machinery.

Which arcs an avoid excludes
----------------------------
* ``avoid_polygons``: a GeoJSON ``Polygon`` or ``MultiPolygon`` (RFC 7946: lon/lat positions, closed
  rings of at least 4 positions, holes allowed), or a shapely (Multi)Polygon. An arc is excluded when
  its straight segment (tail node to head node) **intersects the closed polygon**: a road inside the
  area, crossing it, or touching its boundary is avoided (a road through a hole is not). The test is
  planar in lon/lat degrees (exact at the nodes; a segment is a few tens of metres). Each polygon must be
  valid (shapely ``is_valid``: no self-intersection, holes inside their shell); the parts of a
  MultiPolygon may overlap (they are tested one by one).
* ``avoid_ways``: OSM way ids (the arc attribute ``way_id`` of a graph extracted from OSM); every arc of
  those ways is excluded. An id no arc carries is ``InvalidValue`` naming it (a way the profile dropped,
  or one whose segments all lost to a parallel way: :mod:`gpuroute.io.lua_extract`).

Errors (all ``InvalidValue``, the message starting with the field's name; checked before the
coordinates, as exclude's): not a GeoJSON (Multi)Polygon (another type, malformed coordinates, a
position off [-180, 180] x [-90, 90], an open ring), an invalid polygon (with shapely's
``explain_validity``), more than ``config.SERVE_AVOID_MAX_POLYGONS`` polygons or
``config.SERVE_AVOID_MAX_VERTICES`` positions (over every ring), more than ``config.SERVE_AVOID_MAX_WAYS``
way ids, an id that is not an integer or no arc's. An engine without an overlay answers
``NotImplemented`` (as exclude).

Cost per request and cache policy
---------------------------------
The first avoid of an engine builds a shapely LineString per arc and their STRtree (lazily, once per
engine; Monaco, 28,306 arcs: 25-65 ms on this 2-core CPU). A request with an avoid then pays the tree
query (0.06-0.2 ms for a street-sized box) and, unless the same excluded-arc set was served lately, ONE
customization of the overlay (Monaco, 2-core CPU: 1.7-1.9 ms with both cores free, 14-36 ms while other
processes load them, as an uncached exclude) plus a segment index for snapping (15-30 ms, the larger part):
an uncached route with an avoid took 54 ms (min; 100 ms median under load) against 0.5 ms cached and
0.33 ms without avoid. Those are kept in a small least-recently-used cache keyed by a hash of the resulting
excluded-arc mask (so the same area written twice, or two areas covering the same arcs, share an entry)
of ``config.SERVE_AVOID_CACHE`` entries (0: none kept), apart from exclude's own per-combination cache so
that one-off avoids never evict the declared combinations; like exclude's, an entry is stale as soon as
``/customize`` installs another metric. An avoid that excludes no arc is no avoid (nothing customized).
"""
from __future__ import annotations

import math
import numbers
import threading

import numpy as np

from .. import config
from .osrm import EngineError

__all__ = ["avoid_mask", "polygons_of"]

_LOCK = threading.Lock()


def _bad(field, why):
    return EngineError("InvalidValue", f"{field}: {why}")


def _positions(ring, where):
    """A ring's positions as float64 (k, 2), checked (numbers, lon/lat range, closed, >= 4)."""
    if not isinstance(ring, (list, tuple)):
        raise _bad("avoid_polygons", f"{where} is not a list of positions")
    out = np.empty((len(ring), 2))
    for i, p in enumerate(ring):
        if (not isinstance(p, (list, tuple)) or len(p) not in (2, 3)
                or not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in p)):
            raise _bad("avoid_polygons", f"{where}[{i}] is not a position [lon, lat]")
        lon, lat = float(p[0]), float(p[1])
        if not (math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90):
            raise _bad("avoid_polygons", f"{where}[{i}] = [{p[0]}, {p[1]}] is not a lon/lat position (longitude "
                                         "in [-180, 180], latitude in [-90, 90])")
        out[i] = lon, lat
    if len(out) < 4:
        raise _bad("avoid_polygons", f"{where} has {len(out)} positions (a linear ring has at least 4)")
    if not np.array_equal(out[0], out[-1]):
        raise _bad("avoid_polygons", f"{where} is not closed (its first and last positions differ)")
    return out


def polygons_of(value):
    """The shapely Polygons of an ``avoid_polygons`` value, checked.

    Parameters
    ----------
    value : dict or shapely.geometry.Polygon or shapely.geometry.MultiPolygon
        A GeoJSON geometry object (``{"type": "Polygon", "coordinates": [ring, ...]}`` or
        ``{"type": "MultiPolygon", "coordinates": [[ring, ...], ...]}``), positions ``[lon, lat]``.

    Returns
    -------
    list of shapely.geometry.Polygon
        One per polygon, each valid.

    Raises
    ------
    EngineError
        ``InvalidValue`` ("avoid_polygons: ..."): see the module doc; ``NotImplemented`` without shapely.
    """
    from ..extras import require

    try:
        shapely = require("shapely", "avoid_polygons")
    except ImportError as e:
        raise EngineError("NotImplemented", str(e)) from None
    if isinstance(value, shapely.Geometry):
        if value.geom_type not in ("Polygon", "MultiPolygon"):
            raise _bad("avoid_polygons", f"a {value.geom_type}, expected a Polygon or MultiPolygon")
        value = shapely.geometry.mapping(value)
        value = {"type": value["type"], "coordinates": value["coordinates"]}
    if not isinstance(value, dict):
        raise _bad("avoid_polygons", f"expected a GeoJSON Polygon or MultiPolygon object, got {type(value).__name__}")
    kind = value.get("type")
    if kind not in ("Polygon", "MultiPolygon"):
        raise _bad("avoid_polygons", f"GeoJSON type {str(kind)[:40]!r}, expected Polygon or MultiPolygon")
    coords = value.get("coordinates")
    if not isinstance(coords, (list, tuple)) or not coords:
        raise _bad("avoid_polygons", f"a {kind} needs non-empty \"coordinates\"")
    polys = [coords] if kind == "Polygon" else coords
    top_p, top_v = int(config.SERVE_AVOID_MAX_POLYGONS), int(config.SERVE_AVOID_MAX_VERTICES)
    if 0 < top_p < len(polys):
        raise _bad("avoid_polygons", f"{len(polys)} polygons, over the limit of {top_p}")
    seen = 0
    for k, rings in enumerate(polys):  # count before reading the numbers (a huge list is refused cheaply)
        if not isinstance(rings, (list, tuple)) or not rings:
            raise _bad("avoid_polygons", f"polygon {k} is not a non-empty list of rings")
        seen += sum(len(r) if isinstance(r, (list, tuple)) else 0 for r in rings)
    if 0 < top_v < seen:
        raise _bad("avoid_polygons", f"{seen} positions, over the limit of {top_v}")
    out = []
    for k, rings in enumerate(polys):
        where = "coordinates" if kind == "Polygon" else f"coordinates[{k}]"
        shell, *holes = [_positions(r, f"{where}[{j}]") for j, r in enumerate(rings)]
        poly = shapely.Polygon(shell, holes)
        if not poly.is_valid:
            raise _bad("avoid_polygons", f"{'the polygon' if kind == 'Polygon' else f'polygon {k}'} is not valid "
                                         f"({shapely.is_valid_reason(poly)})")
        out.append(poly)
    return out


def _way_ids(values):
    """``avoid_ways`` as int64 (k,), checked (integers, the count)."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise _bad("avoid_ways", f"expected a list of OSM way ids, got {str(values)[:60]!r}")
    ids = list(values)
    top = int(config.SERVE_AVOID_MAX_WAYS)
    if 0 < top < len(ids):
        raise _bad("avoid_ways", f"{len(ids)} way ids, over the limit of {top}")
    for x in ids:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
            raise _bad("avoid_ways", f"{str(x)[:40]!r} is not an OSM way id (an integer)")
        if not -(1 << 63) <= int(x) < (1 << 63):
            raise _bad("avoid_ways", f"way {int(x)} is not in the graph")
    return np.asarray([int(x) for x in ids], dtype=np.int64)


class _Arcs:
    """Per engine, made on first use: the arcs' segments in a shapely STRtree, the graph's sorted way ids."""

    def __init__(self, graph):
        self.graph = graph
        self._tree = None
        self._ways = None

    def tree(self, shapely):
        if self._tree is None:
            g = self.graph
            if g.coords is None or getattr(g, "coord_system", "lonlat") != "lonlat":
                raise EngineError("NotImplemented", "avoid_polygons needs a graph with lon/lat coordinates")
            c = np.asarray(g.coords, dtype=np.float64)
            seg = np.stack([c[np.asarray(g.tail, dtype=np.int64)], c[np.asarray(g.head, dtype=np.int64)]], axis=1)
            self._tree = shapely.STRtree(shapely.linestrings(seg))  # item i = arc i
        return self._tree

    def ways(self):
        if self._ways is None:
            w = self.graph.arc_attrs.get("way_id")
            if w is None:
                raise _bad("avoid_ways", "this graph has no OSM way ids (arc attribute way_id: extract it from "
                                         "OSM data)")
            w = np.asarray(w, dtype=np.int64)
            self._ways = (w, np.unique(w))
        return self._ways


def _arcs(engine):
    from .exclude import excluder

    ex = excluder(engine)  # one per engine: the arcs' index lives beside exclude's caches
    a = getattr(ex, "_avoid_arcs", None)
    if a is None:
        with _LOCK:
            a = getattr(ex, "_avoid_arcs", None)
            if a is None:
                a = ex._avoid_arcs = _Arcs(engine.graph)
    return a


def _empty(v):
    return v is None or (isinstance(v, (list, tuple, np.ndarray)) and len(v) == 0)


def avoid_mask(engine, avoid_polygons=None, avoid_ways=None):
    """The arcs ``avoid_polygons`` and ``avoid_ways`` exclude on ``engine``'s graph.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
    avoid_polygons : dict or shapely (Multi)Polygon, optional
        See :func:`polygons_of`.
    avoid_ways : sequence of int, optional
        OSM way ids.

    Returns
    -------
    ndarray bool (m,) or None
        None when neither is given (None or empty).

    Raises
    ------
    EngineError
        ``InvalidValue`` naming the field (module doc), ``NotImplemented`` (no shapely; no lon/lat).
    """
    if _empty(avoid_polygons) and _empty(avoid_ways):
        return None
    arcs = _arcs(engine)
    out = np.zeros(engine.graph.n_arcs, dtype=bool)
    if not _empty(avoid_ways):
        ids = _way_ids(avoid_ways)
        way_of, known = arcs.ways()
        pos = np.minimum(np.searchsorted(known, ids), known.size - 1)
        missing = ids[known[pos] != ids] if known.size else ids
        if missing.size:
            raise _bad("avoid_ways", f"way {int(missing[0])} is not in the graph (no arc of this dataset carries "
                                     "that OSM way id)")
        out |= np.isin(way_of, ids)
    if not _empty(avoid_polygons):
        polys = polygons_of(avoid_polygons)  # NotImplemented naming the extra without shapely
        from ..extras import require

        hit = arcs.tree(require("shapely", "avoid_polygons")).query(polys, predicate="intersects")
        out[hit[1]] = True
    return out

"""Snapping points onto road segments, as OSRM does (the service layer's snapping; ``nearest_node`` in
:mod:`gpuroute.geo.snap` snaps to nodes).

A *segment* is one straight piece of road between two graph nodes ``u`` and ``v``: the arcs ``u -> v``
and ``v -> u`` of a two-way street are ONE segment with a forward and a reverse arc, a one-way street's
segment has a forward arc only. A coordinate is projected onto the nearest segment (of the graph's
largest strongly connected component by default, as OSRM's default snapping), and the coordinates of a
request come back as one :class:`PhantomSet` of arrays: per snapping option (a usable arc of the nearest
segment or of a tie) the arc, the fraction along it, the segment, the snapped location, the distance and
the street name. A route may then start or end in the middle of an arc (OSRM's phantom nodes).
:meth:`SegmentIndex.snap_checked` takes coordinates and options already validated (the engine's
parameter records) and checks nothing again; :meth:`SegmentIndex.snap_batch`, :meth:`~SegmentIndex.snap`
and :meth:`~SegmentIndex.nearest` validate theirs first (library callers).

Candidates come from a k-d tree over sample points placed along every segment (both ends, and every
``config.SERVE_SEGMENT_SAMPLE_SPACING_M`` metres between): every segment within distance ``r`` of the
point has a sample within ``r + spacing / 2``, so a ball query of that radius followed by exact
point-to-segment projections gives the exact nearest segment(s). Projections are computed in a local
equirectangular frame centred on the query point (east/north metres with the one Earth radius
:data:`gpuroute.geo.EARTH_RADIUS_M`): exact for the straight segments of an OSM graph at street scale.
Many coordinates are snapped together by :meth:`SegmentIndex.snap_batch` (one nearest-sample query, one
ball query and one compiled projection pass for all of them; the same phantoms and errors as one
:meth:`SegmentIndex.snap` after the other), as the engine's services do.

A request's coordinates (with or without radius, bearing, approach) take their candidates from a second
index instead, built beside the k-d tree: a uniform lon/lat grid listing the segments that pass through each cell
(``config.SERVE_SEGMENT_GRID_CELL_M``). The lon/lat rectangle of every point within ``r`` metres in a point's
frame covers a cell of each segment within ``r``, so the grid's candidates hold the k-d tree ball's segments
within ``r``, on which alone the answer depends: one compiled call (:func:`_grid_rows`,
:func:`_grid_nearest`) finds the candidates, projects, picks the nearest segment and its ties and writes the
PhantomSet's rows, with the same bits as the k-d tree's way (issue 20: ~37 -> ~9 us a route's snapping,
~150 -> ~11 us with bearings or curb approaches). A coordinate farther than :data:`_GRID_MAX_M` from every
road, a radius with no segment (NoSegment), a rectangle across the antimeridian (or a network with a segment
across it: no grid) take the k-d tree's way.

Options, as OSRM defines them (``docs/http.md``, "General options"):

* ``radius``: the largest snap distance in metres (None: unlimited);
* ``bearing = (value, range)``: only segments one of whose directions points within ``range`` degrees
  of ``value`` (clockwise from north); the phantom keeps only the matching directions;
* ``approach``: ``"unrestricted"`` or ``"curb"``. Curb keeps, on a two-way segment, only the direction
  that has the point on its *right*: gpuroute assumes driving on the right (as OSRM's car profile does
  by default), so a vehicle stops at the curb on the point's side. A one-way segment keeps its one
  direction (OSRM ignores the approach there too).

Ties: :meth:`SegmentIndex.snap` keeps, besides the nearest segment, every usable segment whose distance is
within :data:`SNAP_TIE_M` of the nearest one and whose snapped point is within :data:`SNAP_TIE_M` of the
nearest one's, i.e. the segments meeting at a junction the point sits on (:attr:`PhantomSet.tie`), and a route or table leaves from
(arrives on) whichever of them is best, as OSRM >= 5.26 does with equidistant segments: a coordinate on a
junction node may leave along any street meeting there. The tolerance is not 1e-6 m because OSRM sees
coordinates on its 1e-6 degree grid: a node given at 6 decimals (its OSM position has 7) lies up to ~7 cm
from gpuroute's node but exactly on OSRM's, and the segments meeting there are then a few millimetres apart
in gpuroute and tied in OSRM.
"""
from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import config
from . import EARTH_RADIUS_M, haversine_m, unit_vectors
from .kernels import gc_metres, gc_metres_pairs
from .snap import SnapError, largest_scc_mask


def kdtree_class():
    """scipy's ``cKDTree`` (the class itself), without importing the rest of ``scipy.spatial``.

    ``from scipy.spatial import cKDTree`` runs the package's ``__init__``, which imports every submodule
    (distances, rotations, Delaunay, ...): ~0.17 s of a server's start for the one class snapping uses (its
    extension module alone loads in ~1 ms; BENCHMARKS.md, "Per-request CPU of GET /route and start to first
    answer"). The extension module ``scipy.spatial._ckdtree`` is loaded from its file and registered under
    its own name, so that a later ``import scipy.spatial`` takes that same module (one class, one
    ``isinstance``). Where that fails (another scipy layout), the package import.

    Returns
    -------
    type
        ``scipy.spatial.cKDTree``.
    """
    import sys

    name = "scipy.spatial._ckdtree"
    with _KDTREE_LOCK:  # one load, however many threads build an index at once
        mod = sys.modules.get(name)
        if mod is None:
            mod = _load_kdtree_module(name)
    tree = getattr(mod, "cKDTree", None)
    if tree is None:
        from scipy.spatial import cKDTree as tree
    return tree


_KDTREE_LOCK = threading.Lock()


def _load_kdtree_module(name):
    """scipy's ``_ckdtree`` extension module loaded from its file and registered in ``sys.modules`` as ``name``
    (None where it is not found or does not load)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    try:
        import scipy

        folder = os.path.join(os.path.dirname(scipy.__file__), "spatial")
        path = next((p for p in (os.path.join(folder, "_ckdtree" + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
                     if os.path.isfile(p)), None)
        if path is None:
            return None
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod
    except Exception:  # another layout: the package's import (kdtree_class)
        return None


#: Accepted values of ``approach``.
APPROACHES = ("unrestricted", "curb")
#: Batches of at least this many coordinates query the k-d tree on every core (smaller ones on one:
#: starting threads costs more than it saves for a route's few coordinates).
_PARALLEL_QUERY_MIN = 256
#: Accepted values of ``component``.
COMPONENTS = ("largest", "any")
#: Snapping ties (metres): :meth:`SegmentIndex.snap` also keeps every usable segment at most this much
#: farther than the nearest one whose snapped point lies at most this far from the nearest one's (a
#: junction node: about OSRM's 1e-6 degree coordinate grid, see the module notes).
SNAP_TIE_M = 0.1
#: :meth:`SegmentIndex.snap_batch` snaps a coordinate farther than this (metres) from every road one at a
#: time (the growing balls of :meth:`SegmentIndex._search`), where the local frame's scale error grows.
_BATCH_MAX_M = 5000.0

_DEG = math.pi / 180.0
#: :func:`_grid_rows`' ``limit``, ``bearing`` and ``curb`` of a request without radiuses, bearings, approaches
#: (size 0: none; never written).
_UNLIMITED = np.zeros(0)
_NO_BEARING = np.zeros((0, 2))
_NO_CURB = np.zeros(0, dtype=bool)


class NoSegment(SnapError):
    """No segment to snap a coordinate to (OSRM's ``NoSegment``): none within the radius, or none that
    passes the bearing filter.

    Attributes
    ----------
    index : int
        Position of the coordinate in the query.
    distance : float
        Distance in metres to the nearest segment that was rejected (``inf`` when none was looked at).
    code : str
        ``"NoSegment"``.
    """

    code = "NoSegment"

    def __init__(self, message, index, distance=math.inf):
        super().__init__(message, index, distance)


@dataclass(frozen=True, eq=False)
class PhantomSet:
    """Coordinates snapped onto segments (OSRM's phantom nodes), as arrays: one row per *snapping option*.

    A coordinate may leave (or arrive) by every usable arc of the segment it snapped to (the forward arc
    ``u -> v`` at the snapped fraction, the reverse arc at ``1 -`` it), and by those of the segments tied
    with it at a junction (:data:`SNAP_TIE_M`). The options of point ``i`` are the rows
    ``point_start[i]:point_start[i + 1]`` (a CSR, as a graph's ``first_out``): its nearest segment's arcs
    first (forward before reverse), then its ties' in order of distance. Every point has at least one.

    Attributes
    ----------
    point_start : ndarray int64 (n + 1,)
        Rows of each point.
    arc : ndarray int32 (r,)
        Graph arc id of each option.
    fraction : ndarray float64 (r,)
        Position of the snapped point along ``arc``, from its tail, in ``[0, 1]``.
    segment : ndarray int32 (r,)
        Segment id (in the :class:`SegmentIndex`) of each option.
    segment_fraction : ndarray float64 (r,)
        Position along the segment's ``u -> v`` (OSRM's hint carries it).
    lon, lat : ndarray float64 (r,)
        The snapped location on the option's segment (degrees).
    distance : ndarray float64 (r,)
        Great-circle metres from the input coordinate to ``(lon, lat)``.
    name_id : ndarray int32 (r,)
        Street name of the segment's way (index into ``graph.meta["way_names"]``; -1 unnamed).
    tie : ndarray bool (r,)
        The option belongs to a segment tied with the nearest one (not the nearest itself).
    input_lon, input_lat : ndarray float64 (n,)
        The coordinates as given.

    Notes
    -----
    Forward and backward offsets depend on the metric, which a customization changes after snapping:
    :meth:`offsets` gives them for an arc-cost array. The point's waypoint (OSRM's ``location``,
    ``distance``, ``name``, ``hint``) is its first row's (:attr:`first`).
    """

    point_start: np.ndarray
    arc: np.ndarray
    fraction: np.ndarray
    segment: np.ndarray
    segment_fraction: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    distance: np.ndarray
    name_id: np.ndarray
    tie: np.ndarray
    input_lon: np.ndarray
    input_lat: np.ndarray

    @property
    def n_points(self):
        return int(self.point_start.size - 1)

    def __len__(self):
        return self.n_points

    @property
    def first(self):
        """int64 (n,): the row of each point's nearest segment's first option (its waypoint)."""
        return self.point_start[:-1]

    @property
    def counts(self):
        """int64 (n,): options per point."""
        return np.diff(self.point_start)

    def rows(self, i):
        """The rows (a slice) of point ``i``."""
        return slice(int(self.point_start[i]), int(self.point_start[i + 1]))

    def options(self, i):
        """``(arc int64 (o,), fraction float64 (o,))`` of point ``i``'s options, in order."""
        s, t = self.point_start[i:i + 2].tolist()
        return self.arc[s:t].astype(np.int64), self.fraction[s:t]

    def offsets(self, cost):
        """Forward and backward offsets of every option under arc costs ``cost`` (array (m,), the metric's
        unit): ``(forward, backward)`` float64 (r,), ``forward = (1 - fraction) cost[arc]`` (from the point
        to the arc's head: a source's start cost) and ``backward = fraction cost[arc]`` (from the arc's
        tail to the point: a target's end cost)."""
        c = np.asarray(cost)[self.arc]
        return (1.0 - self.fraction) * c, self.fraction * c

    def padded(self, points=None, width=2):
        """Options of some points as padded arrays, for the many-to-many kernels: ``(arcs int64 (k, o),
        fraction float64 (k, o))``, point ``points[j]``'s options in row ``j`` in order, unused slots
        ``-1`` and ``0.0``; ``o`` the most options of any of them (at least ``width``).

        ``points``: int array (k,) of point indices (repeats allowed; default all)."""
        ps = self.point_start
        p = np.arange(self.n_points, dtype=np.int64) if points is None else np.asarray(points, dtype=np.int64)
        cnt = ps[p + 1] - ps[p]
        k = p.size
        o = max(int(width), int(cnt.max()) if k else 0)
        arcs = np.full((k, o), -1, dtype=np.int64)
        frac = np.zeros((k, o))
        if k:
            row_of = np.repeat(np.arange(k, dtype=np.int64), cnt)
            pos = np.arange(row_of.size, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            src = np.repeat(ps[p], cnt) + pos
            arcs[row_of, pos] = self.arc[src]
            frac[row_of, pos] = self.fraction[src]
        return arcs, frac

    def take(self, points):
        """The phantoms of some points (int array (k,), repeats allowed), in that order: a PhantomSet."""
        p = np.asarray(points, dtype=np.int64)
        ps = self.point_start
        cnt = ps[p + 1] - ps[p]
        start = np.zeros(p.size + 1, dtype=np.int64)
        np.cumsum(cnt, out=start[1:])
        src = np.repeat(ps[p] - start[:-1], cnt) + np.arange(int(start[-1]), dtype=np.int64)
        return PhantomSet(start, *(getattr(self, f)[src] for f in _ROW_FIELDS), self.input_lon[p], self.input_lat[p])

    @staticmethod
    def concat(sets):
        """One PhantomSet of the points of ``sets`` in order."""
        sets = list(sets)
        if not sets:
            return _from_candidates(_no_candidates(), 0, np.zeros(0), np.zeros(0))
        starts = [np.zeros(1, dtype=np.int64)]
        off = 0
        for s in sets:
            starts.append(s.point_start[1:] + off)
            off += int(s.point_start[-1])
        return PhantomSet(np.concatenate(starts), *(np.concatenate([getattr(s, f) for s in sets]) for f in _ROW_FIELDS),
                          np.concatenate([s.input_lon for s in sets]), np.concatenate([s.input_lat for s in sets]))

    @classmethod
    def _of_rows(cls, start, ints, floats, tie, input_lon, input_lat):
        """The PhantomSet of :func:`_grid_rows`' arrays (its fields rows of ``ints`` and ``floats``), made
        without the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field: ~2 us a request)."""
        ps = object.__new__(cls)
        ps.__dict__.update(point_start=start, arc=ints[0], fraction=floats[0], segment=ints[1],
                           segment_fraction=floats[1], lon=floats[2], lat=floats[3], distance=floats[4],
                           name_id=ints[2], tie=tie, input_lon=input_lon, input_lat=input_lat)
        return ps

    def __repr__(self):
        return f"PhantomSet(points={self.n_points}, options={int(self.arc.size)})"


_ROW_FIELDS = ("arc", "fraction", "segment", "segment_fraction", "lon", "lat", "distance", "name_id", "tie")
#: Per-candidate-segment fields (:func:`_from_candidates`): the point (its position among the coordinates),
#: segment, forward and reverse arc (-1: not usable), fraction along u -> v, snapped lon/lat, distance from
#: the input (m), name id, tie.
_CAND_FIELDS = ("point", "segment", "fwd", "rev", "frac", "lon", "lat", "distance", "name_id", "tie")


def _no_candidates():
    z = np.zeros(0, dtype=np.int64)
    f = np.zeros(0)
    return {"point": z, "segment": z, "fwd": z, "rev": z, "frac": f, "lon": f, "lat": f, "distance": f,
            "name_id": z, "tie": np.zeros(0, dtype=bool)}


def _concat_candidates(parts):
    parts = [p for p in parts if p["point"].size]
    if len(parts) <= 1:
        return parts[0] if parts else _no_candidates()
    return {f: np.concatenate([p[f] for p in parts]) for f in _CAND_FIELDS}


def _from_candidates(c, n, input_lon, input_lat):
    """The PhantomSet of ``n`` points from their candidate segments (``c``: arrays of :data:`_CAND_FIELDS`,
    each point's candidates in order, nearest first, points in any order): every candidate's usable arcs,
    forward (at ``frac``) before reverse (at ``1 - frac``), one row each (:func:`_expand`, one compiled
    pass)."""
    out = _expand(np.int64(n), *(np.ascontiguousarray(c[f]) for f in _CAND_FIELDS))
    return PhantomSet(*out, np.asarray(input_lon, dtype=np.float64), np.asarray(input_lat, dtype=np.float64))


@njit(cache=True)
def _expand(n, point, segment, fwd, rev, frac, lon, lat, distance, name_id, tie):
    """:func:`_from_candidates`' rows: a stable counting sort of the candidates by point, then one row per
    usable arc. Returns the PhantomSet's row arrays (``point_start`` first, :data:`_ROW_FIELDS` order)."""
    k = point.size
    start = np.zeros(n + 1, np.int64)
    for j in range(k):
        start[point[j] + 1] += (fwd[j] >= 0) + (rev[j] >= 0)
    for i in range(n):
        start[i + 1] += start[i]
    r = start[n]
    arc = np.empty(r, np.int32)
    fr = np.empty(r, np.float64)
    sg = np.empty(r, np.int32)
    sf = np.empty(r, np.float64)
    lo = np.empty(r, np.float64)
    la = np.empty(r, np.float64)
    di = np.empty(r, np.float64)
    ni = np.empty(r, np.int32)
    ti = np.empty(r, np.bool_)
    pos = start[:n].copy()
    for j in range(k):
        for d in range(2):
            a = fwd[j] if d == 0 else rev[j]
            if a < 0:
                continue
            q = pos[point[j]]
            pos[point[j]] += 1
            arc[q] = a
            fr[q] = frac[j] if d == 0 else 1.0 - frac[j]
            sg[q] = segment[j]
            sf[q] = frac[j]
            lo[q] = lon[j]
            la[q] = lat[j]
            di[q] = distance[j]
            ni[q] = name_id[j]
            ti[q] = tie[j]
    return start, arc, fr, sg, sf, lo, la, di, ni, ti


@njit(cache=True)
def _settled(ints, floats, best, done, tie_first, tie_rows, index):
    """:func:`_snap_kernel`'s rows of the points it settled with a segment, as candidate arrays
    (:data:`_CAND_FIELDS`, ``point`` from ``index``): each point's nearest segment, then its ties."""
    m = best.size
    c = 0
    for o in range(m):
        if done[o] and best[o] >= 0:
            c += 1 + tie_first[o + 1] - tie_first[o]
    point = np.empty(c, np.int64)
    segment = np.empty(c, np.int64)
    fwd = np.empty(c, np.int64)
    rev = np.empty(c, np.int64)
    frac = np.empty(c, np.float64)
    lon = np.empty(c, np.float64)
    lat = np.empty(c, np.float64)
    dist = np.empty(c, np.float64)
    nid = np.empty(c, np.int64)
    tie = np.empty(c, np.bool_)
    c = 0
    for o in range(m):
        if not (done[o] and best[o] >= 0):
            continue
        for q in range(-1, tie_first[o + 1] - tie_first[o]):
            r = best[o] if q < 0 else tie_rows[tie_first[o] + q]
            point[c] = index[o]
            segment[c] = ints[r, 0]
            fwd[c] = ints[r, 3]
            rev[c] = ints[r, 4]
            frac[c] = floats[r, 0]
            lon[c] = floats[r, 1]
            lat[c] = floats[r, 2]
            dist[c] = floats[r, 3]
            nid[c] = ints[r, 5]
            tie[c] = q >= 0
            c += 1
    return point, segment, fwd, rev, frac, lon, lat, dist, nid, tie


@njit(cache=True)
def _snap_rows(lon0, lat0, limit, reach, tie, lens, samples, sample_segment, lon_u, lat_u, lon_v, lat_v, u, v,
               forward_arc, reverse_arc, name_id):
    """:func:`_snap_kernel` (the same arguments), and when it settles every point with a segment, the
    PhantomSet's row arrays (:func:`_settled_rows`) in the same call: ``(every, rows)``, ``every`` whether it
    did (else ``rows`` holds empty arrays). Only the rows come back to Python (each array returned costs a
    boxing)."""
    ints, floats, best, done, tie_first, tie_rows = _snap_kernel(lon0, lat0, limit, reach, tie, lens, samples,
                                                                 sample_segment, lon_u, lat_u, lon_v, lat_v, u, v,
                                                                 forward_arc, reverse_arc, name_id)
    every = True
    for i in range(best.size):
        if not done[i] or best[i] < 0:
            every = False
            break
    if every:
        return True, _settled_rows(ints, floats, best, tie_first, tie_rows)
    none = np.empty(0, np.int64)
    return False, _settled_rows(ints, floats, none, none, none)


@njit(cache=True)
def _settled_rows(ints, floats, best, tie_first, tie_rows):
    """:func:`_settled` and :func:`_expand` in one pass, for a batch whose every point ``o`` (in order, the
    whole request) :func:`_snap_kernel` settled with a segment: the PhantomSet's row arrays (``point_start``
    first, :data:`_ROW_FIELDS` order), each candidate's usable arcs, forward (at the fraction) before
    reverse (at ``1 -`` it), the nearest segment before its ties."""
    m = best.size
    start = np.zeros(m + 1, np.int64)
    for o in range(m):
        c = 0
        for q in range(-1, tie_first[o + 1] - tie_first[o]):
            r = best[o] if q < 0 else tie_rows[tie_first[o] + q]
            c += (ints[r, 3] >= 0) + (ints[r, 4] >= 0)
        start[o + 1] = start[o] + c
    n = start[m]
    arc = np.empty(n, np.int32)
    fr = np.empty(n, np.float64)
    sg = np.empty(n, np.int32)
    sf = np.empty(n, np.float64)
    lo = np.empty(n, np.float64)
    la = np.empty(n, np.float64)
    di = np.empty(n, np.float64)
    ni = np.empty(n, np.int32)
    ti = np.empty(n, np.bool_)
    w = 0
    for o in range(m):
        for q in range(-1, tie_first[o + 1] - tie_first[o]):
            r = best[o] if q < 0 else tie_rows[tie_first[o] + q]
            for d in range(2):
                a = ints[r, 3 + d]
                if a < 0:
                    continue
                arc[w] = a
                fr[w] = floats[r, 0] if d == 0 else 1.0 - floats[r, 0]
                sg[w] = ints[r, 0]
                sf[w] = floats[r, 0]
                lo[w] = floats[r, 1]
                la[w] = floats[r, 2]
                di[w] = floats[r, 3]
                ni[w] = ints[r, 5]
                ti[w] = q >= 0
                w += 1
    return start, arc, fr, sg, sf, lo, la, di, ni, ti


def check_bearing(bearing, index=0):
    """Validate one OSRM bearing ``(value, range)``: value in [0, 360], range in [0, 180] (degrees).

    Returns
    -------
    (float, float) or None

    Raises
    ------
    ValueError
        Not a pair of finite numbers in range (the message names the coordinate index).
    """
    if bearing is None:
        return None
    try:
        value, rng = (float(x) for x in bearing)
    except (TypeError, ValueError):
        raise ValueError(f"bearing of coordinate {index} must be a pair (value, range), got {bearing!r}") from None
    if not (0.0 <= value <= 360.0 and 0.0 <= rng <= 180.0):
        raise ValueError(f"bearing of coordinate {index} is ({value:g}, {rng:g}): value must be in [0, 360] "
                         "and range in [0, 180] degrees")
    return value, rng


def angle_difference(a, b):
    """Smallest absolute difference of two bearings in degrees, in [0, 180] (broadcasts)."""
    d = np.abs(np.mod(np.asarray(a, dtype=np.float64) - b, 360.0))
    return np.minimum(d, 360.0 - d)


def local_xy(lon, lat, lon0, lat0):
    """East/north metres of lon/lat points in the equirectangular frame centred on ``(lon0, lat0)``
    (longitude differences wrapped to [-180, 180)); broadcasts, returns ``(x, y)`` float64 arrays."""
    dlon = np.mod(np.asarray(lon, dtype=np.float64) - lon0 + 180.0, 360.0) - 180.0
    x = dlon * (_DEG * EARTH_RADIUS_M * math.cos(lat0 * _DEG))
    y = (np.asarray(lat, dtype=np.float64) - lat0) * (_DEG * EARTH_RADIUS_M)
    return x, y


def bearing_deg(dx, dy):
    """Bearing in degrees clockwise from north, in [0, 360), of east/north displacements (broadcasts)."""
    return np.mod(np.degrees(np.arctan2(dx, dy)), 360.0)


#: :func:`gpuroute.geo.haversine_m` of one pair of points, compiled (the one numba haversine, issue 19:
#: the same bits from Python, from :func:`_haversine_pairs` and in any batch).
_haversine1 = gc_metres
#: :func:`_haversine1` of every pair ``i`` of four float64 (c,) arrays: float64 (c,) metres.
_haversine_pairs = gc_metres_pairs


@njit(cache=True)
def project_one(lon0, lat0, kx, ky, lon_u, lat_u, lon_v, lat_v):
    """Projection of the point ``(lon0, lat0)`` onto the segment ``(lon_u, lat_u) -> (lon_v, lat_v)`` in the
    local frame centred on the point (``kx``, ``ky``: metres per degree east and north there): fraction,
    distance, bearing, side, lon, lat. The one arithmetic of :func:`_project_kernel` and
    :func:`_snap_kernel`, so that one point snapped alone and in a batch gives the same bits."""
    ax = (((lon_u - lon0 + 180.0) % 360.0) - 180.0) * kx
    ay = (lat_u - lat0) * ky
    bx = (((lon_v - lon0 + 180.0) % 360.0) - 180.0) * kx
    by = (lat_v - lat0) * ky
    dx, dy = bx - ax, by - ay
    ll = dx * dx + dy * dy
    t = -(ax * dx + ay * dy) / ll if ll > 0 else 0.0
    t = min(max(t, 0.0), 1.0)
    px, py = ax + t * dx, ay + t * dy
    slon = lon_u + t * ((((lon_v - lon_u + 180.0) % 360.0)) - 180.0)
    if abs(slon) > 180.0:  # only a segment across the antimeridian
        slon = ((slon + 180.0) % 360.0) - 180.0
    return (t, math.hypot(px, py), math.degrees(math.atan2(dx, dy)) % 360.0, dx * (-ay) - dy * (-ax), slon,
            lat_u + t * (lat_v - lat_u))


@njit(cache=True)
def _project_kernel(lon0, lat0, s, lon_u, lat_u, lon_v, lat_v, out):
    """:meth:`SegmentIndex.project` of one point onto segments ``s`` (the arithmetic of :func:`local_xy`
    and :func:`bearing_deg`, one loop): rows of ``out`` (6, c) are fraction, distance, bearing, side, lon,
    lat."""
    kx = _DEG * EARTH_RADIUS_M * math.cos(lat0 * _DEG)
    ky = _DEG * EARTH_RADIUS_M
    for i in range(s.size):
        j = s[i]
        r = project_one(lon0, lat0, kx, ky, lon_u[j], lat_u[j], lon_v[j], lat_v[j])
        for f in range(6):
            out[f, i] = r[f]


@njit(cache=True)
def _snap_kernel(lon0, lat0, limit, reach, tie, lens, samples, sample_segment, lon_u, lat_u, lon_v, lat_v, u, v,
                 forward_arc, reverse_arc, name_id):
    """:meth:`SegmentIndex._snap_plain`'s exact step, for points whose candidate segments are those of the
    samples of a ball each (``samples``: the balls' sample ids, ``lens[i]`` of them for point ``i``).

    Per point: the distinct candidate segments, ascending; their projections (:func:`project_one`); the
    nearest within ``limit[i]`` (the smaller segment id on equal distances); whether that is final: the
    ball held every segment within ``reach[i]`` metres, so the answer is exact when ``reach[i] >=
    limit[i]`` or the nearest lies at most ``reach[i] - tie`` away (``tie < 0``: no ties); and, with
    ``tie >= 0``, its ties: the other candidates within ``tie`` of the nearest's distance (and the limit)
    whose snapped point lies within ``tie`` (great circle) of the nearest's, ordered by distance, then id.

    Returns
    -------
    (ints, floats, best, done, tie_first, tie_rows)
        One row per phantom found (nearest segments and ties): ``ints`` int64 (r, 7) segment, u, v,
        forward arc, reverse arc, name id, point; ``floats`` float64 (r, 5) fraction, lon, lat (snapped),
        the great-circle distance from the point and the projection distance (in the point's frame). ``best`` int64 (k,) the row of each point's nearest
        segment (-1: none within the limit); ``done`` bool (k,); the ties of point ``i``: rows
        ``tie_rows[tie_first[i]:tie_first[i + 1]]``.
    """
    k = lon0.size
    total = 0
    for i in range(k):
        total += lens[i]
    seg = np.empty(total, np.int64)
    for j in range(total):
        seg[j] = sample_segment[samples[j]]
    first = np.zeros(k + 1, np.int64)
    c = 0
    lo = 0
    for i in range(k):
        srt = np.sort(seg[lo:lo + lens[i]])
        lo += lens[i]
        for j in range(srt.size):
            if j == 0 or srt[j] != srt[j - 1]:
                seg[c] = srt[j]
                c += 1
        first[i + 1] = c
    proj = np.empty((4, c), np.float64)
    best = np.full(k, -1, np.int64)
    done = np.zeros(k, np.bool_)
    tie_first = np.zeros(k + 1, np.int64)
    pos = np.empty(c, np.int64)  # the candidate of each row
    owner = np.empty(c, np.int64)
    rows = 0
    ky = _DEG * EARTH_RADIUS_M
    for i in range(k):
        kx = _DEG * EARTH_RADIUS_M * math.cos(lat0[i] * _DEG)
        b = -1
        bd = math.inf
        for p in range(first[i], first[i + 1]):
            j = seg[p]
            r = project_one(lon0[i], lat0[i], kx, ky, lon_u[j], lat_u[j], lon_v[j], lat_v[j])
            proj[0, p] = r[0]
            proj[1, p] = r[1]
            proj[2, p] = r[4]
            proj[3, p] = r[5]
            if r[1] <= limit[i] and (b < 0 or r[1] < bd):
                b = p
                bd = r[1]
        done[i] = reach[i] >= limit[i] or (b >= 0 and bd + max(tie, 0.0) <= reach[i])
        if b >= 0:
            best[i] = rows
            pos[rows] = b
            owner[rows] = i
            rows += 1
        if tie >= 0.0 and b >= 0:
            cut = bd + tie
            t0 = rows
            for p in range(first[i], first[i + 1]):
                if p != b and proj[1, p] <= cut and proj[1, p] <= limit[i] \
                        and _haversine1(proj[2, p], proj[3, p], proj[2, b], proj[3, b]) <= tie:
                    # insert by (distance, id): candidates come by id, so after every equal distance
                    q = rows
                    while q > t0 and proj[1, pos[q - 1]] > proj[1, p]:
                        pos[q] = pos[q - 1]
                        q -= 1
                    pos[q] = p
                    owner[rows] = i
                    rows += 1
        tie_first[i + 1] = rows
    ints = np.empty((rows, 7), np.int64)
    floats = np.empty((rows, 5), np.float64)
    for r in range(rows):
        p = pos[r]
        i = owner[r]
        j = seg[p]
        ints[r, 0] = j
        ints[r, 1] = u[j]
        ints[r, 2] = v[j]
        ints[r, 3] = forward_arc[j]
        ints[r, 4] = reverse_arc[j]
        ints[r, 5] = name_id[j]
        ints[r, 6] = i
        floats[r, 0] = proj[0, p]
        floats[r, 1] = proj[2, p]
        floats[r, 2] = proj[3, p]
        floats[r, 3] = _haversine1(lon0[i], lat0[i], proj[2, p], proj[3, p])
        floats[r, 4] = proj[1, p]
    # tie rows: those after each point's nearest
    tie_rows = np.empty(rows, np.int64)
    t_first = np.zeros(k + 1, np.int64)
    nt = 0
    for i in range(k):
        for r in range(tie_first[i], tie_first[i + 1]):
            if r != best[i]:
                tie_rows[nt] = r
                nt += 1
        t_first[i + 1] = nt
    return ints, floats, best, done, t_first, tie_rows[:nt]


# ---------------------------------------------------------------------------------------------- grid index
#: ``SegmentIndex._grid`` parameters (float64 (6,)): west and south edges (degrees), cells per degree east and
#: north, cells east and north.
_GRID_FIELDS = ("lon0", "lat0", "per_lon", "per_lat", "nx", "ny")
#: Extra reach of a grid query (metres, and relative): the rounding of the frame's arithmetic
#: (:func:`project_one`) is ~1e-9 m; a candidate too many only costs a projection.
_GRID_MARGIN_M = 1e-3
_GRID_MARGIN_REL = 1e-9
#: Padding (in cells) of each column's span of a segment (:func:`_grid_cells`): the rounding of its
#: interpolation.
_GRID_PAD = 1e-6
#: :func:`_grid_rows` leaves a point whose nearest segment (plus the tie) lies farther than this (metres) to
#: the k-d tree's balls (:meth:`SegmentIndex._snap_plain`; a grid rectangle of this reach covers ~(2 x 1000 /
#: 25)^2 cells).
_GRID_MAX_M = 1000.0


def _kernel_array(a, dtype):
    """``a`` as a C-contiguous, writable array of ``dtype`` (copied only where it is not one already): numba
    types a read-only array apart from a writable one, so a kernel called with both would compile (or load) a
    second signature on the request path, one the warm-up did not run."""
    out = np.ascontiguousarray(a, dtype=dtype)
    return out if out.flags.writeable else out.copy()


def _segment_grid(geom, n_segments, cell_m=None):
    """The grid index of segments ``geom`` (float64 (4, s): lon_u, lat_u, lon_v, lat_v): ``(grid, cell_start,
    cell_segment)`` (:func:`_grid_build`), or None where a segment crosses the antimeridian (the k-d tree's
    balls then answer every request). Cells of ``cell_m`` metres (default ``config.SERVE_SEGMENT_GRID_CELL_M``)
    at the mid latitude, larger where that gives more than ``config.SERVE_SEGMENT_GRID_CELLS_PER_SEGMENT``
    cells per segment."""
    if np.any(np.abs(geom[2] - geom[0]) > 180.0):
        return None
    cell_m = float(config.SERVE_SEGMENT_GRID_CELL_M if cell_m is None else cell_m)
    lon0 = float(min(geom[0].min(), geom[2].min()))
    lon1 = float(max(geom[0].max(), geom[2].max()))
    lat0 = float(min(geom[1].min(), geom[3].min()))
    lat1 = float(max(geom[1].max(), geom[3].max()))
    ky = _DEG * EARTH_RADIUS_M
    kx = max(ky * math.cos(0.5 * (lat0 + lat1) * _DEG), 1.0)
    most = max(config.SERVE_SEGMENT_GRID_CELLS_PER_SEGMENT * n_segments, 1024.0)
    area = max((lon1 - lon0) * kx, 1.0) * max((lat1 - lat0) * ky, 1.0)
    cell_m = max(cell_m, math.sqrt(area / most))
    pw, ph = kx / cell_m, ky / cell_m
    nx = int(math.floor((lon1 - lon0) * pw)) + 1
    ny = int(math.floor((lat1 - lat0) * ph)) + 1
    grid = np.array([lon0, lat0, pw, ph, nx, ny], dtype=np.float64)
    cell_start, cell_segment = _grid_build(geom, grid)
    return grid, cell_start, cell_segment


@njit(cache=True)
def _angle_difference(a, b):
    """:func:`angle_difference` of two bearings (degrees), compiled: the same bits."""
    d = abs((a - b) % 360.0)
    return min(d, 360.0 - d)


@njit(cache=True)
def _grid_cells(x0, y0, x1, y1, nx, ny, out, w):
    """The cells (``iy * nx + ix``) a segment from ``(x0, y0)`` to ``(x1, y1)`` (grid units) passes through,
    column by column (each column's span of y padded by :data:`_GRID_PAD`), written to ``out`` from ``w``
    on (``out`` None-like of size 0: only counted); returns the new ``w``."""
    if x1 < x0:
        x0, y0, x1, y1 = x1, y1, x0, y0
    c0 = max(int(math.floor(x0)), 0)
    c1 = min(int(math.floor(x1)), nx - 1)
    for cx in range(c0, c1 + 1):
        if x1 > x0:
            xa = max(x0, float(cx))
            xb = min(x1, float(cx + 1))
            ya = y0 + (xa - x0) / (x1 - x0) * (y1 - y0)
            yb = y0 + (xb - x0) / (x1 - x0) * (y1 - y0)
        else:
            ya, yb = y0, y1
        r0 = max(int(math.floor(min(ya, yb) - _GRID_PAD)), 0)
        r1 = min(int(math.floor(max(ya, yb) + _GRID_PAD)), ny - 1)
        for cy in range(r0, r1 + 1):
            if out.size:
                out[w] = cy * nx + cx
            w += 1
    return w


@njit(cache=True)
def _grid_build(geom, grid):
    """The segments of every cell of a uniform lon/lat grid (``grid``: :data:`_GRID_FIELDS`), a CSR:
    ``(cell_start int64 (nx * ny + 1,), cell_segment int32 (e,))``, each cell's segments ascending. A segment
    is listed in every cell it passes through (:func:`_grid_cells`), so a rectangle that meets a segment
    covers one of its cells. ``geom``: float64 (4, s) lon_u, lat_u, lon_v, lat_v (no segment across the
    antimeridian)."""
    lon0, lat0, pw, ph = grid[0], grid[1], grid[2], grid[3]
    nx, ny = int(grid[4]), int(grid[5])
    s = geom.shape[1]
    none = np.empty(0, np.int64)
    count = np.zeros(nx * ny + 1, np.int64)
    buf = np.empty(64, np.int64)
    for j in range(s):
        x0, y0 = (geom[0, j] - lon0) * pw, (geom[1, j] - lat0) * ph
        x1, y1 = (geom[2, j] - lon0) * pw, (geom[3, j] - lat0) * ph
        c = _grid_cells(x0, y0, x1, y1, nx, ny, none, 0)
        if c > buf.size:
            buf = np.empty(2 * c, np.int64)
        _grid_cells(x0, y0, x1, y1, nx, ny, buf, 0)
        for q in range(c):
            count[buf[q] + 1] += 1
    for i in range(nx * ny):
        count[i + 1] += count[i]
    seg = np.empty(count[nx * ny], np.int32)
    pos = count[:nx * ny].copy()
    for j in range(s):  # ascending j: each cell's list ascending
        x0, y0 = (geom[0, j] - lon0) * pw, (geom[1, j] - lat0) * ph
        x1, y1 = (geom[2, j] - lon0) * pw, (geom[3, j] - lat0) * ph
        c = _grid_cells(x0, y0, x1, y1, nx, ny, buf, 0)
        for q in range(c):
            seg[pos[buf[q]]] = j
            pos[buf[q]] += 1
    return count, seg


@njit(cache=True)
def _grid_candidates(lon0, lat0, reach, grid, cell_start, cell_segment, geom, out):
    """The distinct segments, ascending, listed in the cells of the lon/lat rectangle holding every point
    within ``reach`` metres of ``(lon0, lat0)`` in the point's frame (:func:`project_one`; plus
    :data:`_GRID_MARGIN_M`) and whose box (``geom``, float64 (4, s)) meets it: a superset of the segments
    within ``reach``. Written to ``out`` (grown when short); returns ``(out, count)``, count -1 when the
    rectangle crosses the antimeridian (the grid cannot answer)."""
    kx = _DEG * EARTH_RADIUS_M * math.cos(lat0 * _DEG)
    ky = _DEG * EARTH_RADIUS_M
    m = reach * (1.0 + _GRID_MARGIN_REL) + _GRID_MARGIN_M
    if not kx > 0.0:
        return out, -1
    dlon = m / kx
    w, e = lon0 - dlon, lon0 + dlon
    if not (w > -180.0 and e < 180.0):
        return out, -1
    s, n = lat0 - m / ky, lat0 + m / ky
    pw, ph = grid[2], grid[3]
    nx, ny = int(grid[4]), int(grid[5])
    fx0 = math.floor((w - grid[0]) * pw)
    fx1 = math.floor((e - grid[0]) * pw)
    fy0 = math.floor((s - grid[1]) * ph)
    fy1 = math.floor((n - grid[1]) * ph)
    if fx1 < 0 or fy1 < 0 or fx0 > nx - 1 or fy0 > ny - 1:
        return out, 0
    cx0, cx1 = max(int(fx0), 0), min(int(fx1), nx - 1)
    cy0, cy1 = max(int(fy0), 0), min(int(fy1), ny - 1)
    c = 0
    for cy in range(cy0, cy1 + 1):
        for cx in range(cx0, cx1 + 1):
            cell = cy * nx + cx
            a, b = cell_start[cell], cell_start[cell + 1]
            if c + b - a > out.size:
                big = np.empty(2 * (c + b - a), np.int64)
                big[:c] = out[:c]
                out = big
            for q in range(a, b):
                j = cell_segment[q]
                # only the segments whose box meets the rectangle (the others lie beyond the reach)
                if min(geom[0, j], geom[2, j]) <= e and max(geom[0, j], geom[2, j]) >= w \
                        and min(geom[1, j], geom[3, j]) <= n and max(geom[1, j], geom[3, j]) >= s:
                    out[c] = j
                    c += 1
    if c > 1 and (cy1 > cy0 or cx1 > cx0):  # several cells: sorted, each segment once
        srt = np.sort(out[:c])
        n = 0
        for j in range(c):
            if j == 0 or srt[j] != srt[j - 1]:
                out[n] = srt[j]
                n += 1
        c = n
    return out, c


@njit(cache=True)
def _put_phantom_row(ints, floats, w, arc, j, name, t, dd, lon, lat, d):
    """Row ``w`` of a PhantomSet's row arrays: the phantom arc ``arc`` on segment ``j`` (``name`` its name id) in
    direction ``dd`` (0 forward, 1 reverse), ``t`` the projection's fraction along the segment, ``(lon, lat)``
    the projected location, ``d`` metres from the coordinate."""
    ints[0, w] = arc
    ints[1, w] = j
    ints[2, w] = name
    floats[0, w] = t if dd == 0 else 1.0 - t
    floats[1, w] = t
    floats[2, w] = lon
    floats[3, w] = lat
    floats[4, w] = d


@njit(cache=True)
def _grid_rows(lon0, lat0, limit, bearing, curb, spacing, tie, grid, cell_start, cell_segment, geom, phantom,
               name_id):
    """:meth:`SegmentIndex.snap_checked`'s answer for a whole request, the candidate segments taken from the
    grid (:func:`_grid_candidates`) instead of a k-d tree's balls: ``(every, point_start, ints, floats, tie)``.
    Per point, the nearest usable segment within ``limit[i]`` (``limit`` of size 0: unlimited) and its ties as
    :func:`_snap_kernel` (plain coordinates) and :meth:`SegmentIndex._search` (a bearing ``bearing[i]``, a
    ``curb[i]`` approach: :meth:`SegmentIndex._filtered`'s directions; ``bearing`` of 0 rows or NaN rows,
    ``curb`` of size 0: none) find them (``tie < 0``: none), among the candidates within ``reach =
    min(spacing, limit[i])`` metres (the first step of :meth:`SegmentIndex._snap_plain`); final when ``reach >=
    limit[i]`` or the nearest lies at most ``reach - tie`` away, else again with the reach ``bd + tie`` when
    the nearest distance ``bd`` lies within the reach (the second step's ``D0 + tie``, whose answer is the
    same: the nearest within the radius and its ties), or twice the reach, up to :data:`_GRID_MAX_M`. The
    answer of a step depends on the segments within its reach only, so it is the k-d tree's whatever
    superset of them the candidates are. ``phantom``: int64 (3, s) the forward and reverse arcs a phantom
    lists (-1: excluded) and the reverse arc (-1: one-way).

    Returns
    -------
    every : bool
        Every point settled with a segment (else the other arrays are empty and the caller snaps the request
        the general way): a point farther than :data:`_GRID_MAX_M` from every road, none within its radius,
        a rectangle across the antimeridian.
    point_start : int64 (k + 1,)
    ints : int32 (3, r)
        arc, segment, name id of each row (the PhantomSet's).
    floats : float64 (5, r)
        fraction (along the arc), segment fraction, lon, lat, distance.
    tie : bool (r,)
    """
    k = lon0.size
    n_lim = limit.size
    ky = _DEG * EARTH_RADIUS_M
    cand = np.empty(256, np.int64)
    n_brg = bearing.shape[0]
    n_curb = curb.size
    proj = np.empty((4, 256), np.float64)
    dirs = np.empty((2, 256), np.bool_)  # the candidate's usable directions after the filters
    # the selected segments (nearest, then ties) of every point, in order
    sel = np.empty(4 * k + 4, np.int64)
    sel_f = np.empty((3, 4 * k + 4), np.float64)  # fraction, lon, lat
    sel_tie = np.empty(4 * k + 4, np.bool_)
    sel_dir = np.empty((2, 4 * k + 4), np.bool_)
    start = np.zeros(k + 1, np.int64)
    sel_start = np.zeros(k + 1, np.int64)
    ns = 0
    rows = 0
    fail = (False, start, np.empty((3, 0), np.int32), np.empty((5, 0), np.float64), np.empty(0, np.bool_))
    kx = 0.0
    for i in range(k):
        lim = limit[i] if n_lim else math.inf
        has_b = n_brg > 0 and not math.isnan(bearing[i, 0])
        is_curb = n_curb > 0 and curb[i]
        reach = min(spacing, lim)
        while True:
            cand, c = _grid_candidates(lon0[i], lat0[i], reach, grid, cell_start, cell_segment, geom, cand)
            if c < 0:
                return fail
            if proj.shape[1] < c:
                proj = np.empty((4, 2 * c), np.float64)
                dirs = np.empty((2, 2 * c), np.bool_)
            kx = _DEG * EARTH_RADIUS_M * math.cos(lat0[i] * _DEG)
            b = -1
            bd = math.inf
            for p in range(c):
                j = cand[p]
                r = project_one(lon0[i], lat0[i], kx, ky, geom[0, j], geom[1, j], geom[2, j], geom[3, j])
                proj[0, p] = r[0]
                proj[1, p] = r[1]
                proj[2, p] = r[4]
                proj[3, p] = r[5]
                # the usable directions (:meth:`SegmentIndex._filtered`): bearing, then curb on the two
                # directions left, then the index's arc mask
                fo = True
                ro = phantom[2, j] >= 0
                if has_b:
                    fo = _angle_difference(r[2], bearing[i, 0]) <= bearing[i, 1]
                    ro = ro and _angle_difference(r[2] + 180.0, bearing[i, 0]) <= bearing[i, 1]
                if is_curb and fo and ro:
                    if r[3] > 0:
                        fo = False
                    if r[3] < 0:
                        ro = False
                fo = fo and phantom[0, j] >= 0
                ro = ro and phantom[1, j] >= 0
                dirs[0, p] = fo
                dirs[1, p] = ro
                if (fo or ro) and r[1] <= lim and (b < 0 or r[1] < bd):
                    b = p
                    bd = r[1]
            if reach >= lim or (b >= 0 and bd + max(tie, 0.0) <= reach):
                break  # settled: every segment within bd + tie (or the radius) is a candidate
            # not settled: the nearest segment lies beyond reach - tie. Within reach, bd is the nearest
            # distance, and a reach of bd + tie settles the point; else the reach doubles
            reach = min(bd + max(tie, 0.0) if bd <= reach else 2.0 * reach, lim)
            if reach > _GRID_MAX_M:  # far from every road: the k-d tree's way (:meth:`SegmentIndex._snap_plain`)
                return fail
        if b < 0:  # none within the radius (NoSegment)
            return fail
        if ns + c + 1 > sel.size:
            grow = 2 * (ns + c + 1)
            s2 = np.empty(grow, np.int64)
            s2[:ns] = sel[:ns]
            f2 = np.empty((3, grow), np.float64)
            f2[:, :ns] = sel_f[:, :ns]
            t2 = np.empty(grow, np.bool_)
            t2[:ns] = sel_tie[:ns]
            d2 = np.empty((2, grow), np.bool_)
            d2[:, :ns] = sel_dir[:, :ns]
            sel, sel_f, sel_tie, sel_dir = s2, f2, t2, d2
        t0 = ns
        sel[ns] = b
        ns += 1
        if tie >= 0.0:
            cut = bd + tie
            for p in range(c):
                if p != b and (dirs[0, p] or dirs[1, p]) and proj[1, p] <= cut and proj[1, p] <= lim \
                        and _haversine1(proj[2, p], proj[3, p], proj[2, b], proj[3, b]) <= tie:
                    # insert by (distance, id): candidates come by id, so after every equal distance
                    q = ns
                    while q > t0 + 1 and proj[1, sel[q - 1]] > proj[1, p]:
                        sel[q] = sel[q - 1]
                        q -= 1
                    sel[q] = p
                    ns += 1
        for q in range(t0, ns):  # candidate positions -> segments and their projections
            p = sel[q]
            j = cand[p]
            sel[q] = j
            sel_f[0, q] = proj[0, p]
            sel_f[1, q] = proj[2, p]
            sel_f[2, q] = proj[3, p]
            sel_tie[q] = q > t0
            sel_dir[0, q] = dirs[0, p]
            sel_dir[1, q] = dirs[1, p]
            rows += sel_dir[0, q] + sel_dir[1, q]
        start[i + 1] = rows
        sel_start[i + 1] = ns
    ints = np.empty((3, rows), np.int32)
    floats = np.empty((5, rows), np.float64)
    ties = np.empty(rows, np.bool_)
    w = 0
    for i in range(k):
        for q in range(sel_start[i], sel_start[i + 1]):
            j = sel[q]
            t = sel_f[0, q]
            d = _haversine1(lon0[i], lat0[i], sel_f[1, q], sel_f[2, q])
            for dd in range(2):
                if not sel_dir[dd, q]:
                    continue
                _put_phantom_row(ints, floats, w, phantom[dd, j], j, name_id[j], t, dd, sel_f[1, q], sel_f[2, q], d)
                ties[w] = sel_tie[q]
                w += 1
    return True, start, ints, floats, ties


@njit(cache=True)
def _grid_nearest(lon0, lat0, number, lim, spacing, grid, cell_start, cell_segment, geom, phantom, name_id):
    """:meth:`SegmentIndex.nearest_checked` of a coordinate without bearing or approach, the candidates from the
    grid: the ``number`` nearest segments within ``lim`` metres (``inf``: unlimited), by distance then id
    (:meth:`SegmentIndex._search`'s answer), each a point of its own with its usable arcs, no ties:
    ``(found, point_start, ints, floats, tie)`` as :func:`_grid_rows` gives them. The reach starts at
    ``min(spacing, lim)`` and doubles until it holds ``number`` segments or reaches ``lim``; ``found`` False
    (empty arrays) when none is found or the reach passes :data:`_GRID_MAX_M` first, or the grid cannot
    answer: the caller searches the k-d tree's way."""
    ky = _DEG * EARTH_RADIUS_M
    kx = _DEG * EARTH_RADIUS_M * math.cos(lat0 * _DEG)
    cand = np.empty(256, np.int64)
    fail = (False, np.zeros(1, np.int64), np.empty((3, 0), np.int32), np.empty((5, 0), np.float64),
            np.empty(0, np.bool_))
    reach = min(spacing, lim)
    while True:
        cand, c = _grid_candidates(lon0, lat0, reach, grid, cell_start, cell_segment, geom, cand)
        if c < 0:
            return fail
        proj = np.empty((4, c), np.float64)
        sure = 0
        for p in range(c):
            j = cand[p]
            r = project_one(lon0, lat0, kx, ky, geom[0, j], geom[1, j], geom[2, j], geom[3, j])
            proj[0, p] = r[0]
            proj[1, p] = r[1]
            proj[2, p] = r[4]
            proj[3, p] = r[5]
            sure += r[1] <= reach
        if sure >= number or reach >= lim:
            break
        reach = min(2.0 * reach, lim)
        if reach > _GRID_MAX_M:
            return fail
    # every segment within the reach is a candidate: the nearest of them, by distance then id (stable)
    keep = np.empty(sure, np.int64)
    q = 0
    for p in range(c):
        if proj[1, p] <= reach:
            keep[q] = p
            q += 1
    keep = keep[np.argsort(proj[1, keep], kind="mergesort")[:min(number, sure)]]
    n = keep.size
    if n == 0:
        return fail
    rows = 0
    for p in keep:
        rows += (phantom[0, cand[p]] >= 0) + (phantom[1, cand[p]] >= 0)
    start = np.zeros(n + 1, np.int64)
    ints = np.empty((3, rows), np.int32)
    floats = np.empty((5, rows), np.float64)
    ties = np.zeros(rows, np.bool_)
    w = 0
    for i in range(n):
        p = keep[i]
        j = cand[p]
        t = proj[0, p]
        d = _haversine1(lon0, lat0, proj[2, p], proj[3, p])
        for dd in range(2):
            a = phantom[dd, j]
            if a < 0:
                continue
            _put_phantom_row(ints, floats, w, a, j, name_id[j], t, dd, proj[2, p], proj[3, p], d)
            w += 1
        start[i + 1] = w
    return True, start, ints, floats, ties


class SegmentIndex:
    """Segments of a lon/lat road graph, a k-d tree over points sampled along them and a grid of the cells they
    pass through (see the module notes; the grid: ~0.3 s a million segments to build, ~40 bytes a segment).

    Parameters
    ----------
    graph : RoadGraph
        With lon/lat coordinates (``coord_system="lonlat"``). Street names come from the arc attribute
        ``name_id`` and ``graph.meta["way_names"]`` (:func:`gpuroute.io.load_osm`) when present.
    component : {"largest", "any"}
        ``"largest"``: only segments of the largest strongly connected component (every two phantoms
        are then connected both ways); ``"any"``: every segment. Either way, where the graph has the
        arc attribute ``is_startpoint`` (a graph extracted with a Lua profile), only segments where
        OSRM lets a waypoint snap (``is_startpoint`` of either direction).
    spacing : float, optional
        Sample spacing in metres; default ``config.SERVE_SEGMENT_SAMPLE_SPACING_M``.
    arc_mask : array_like of bool, shape (m,), optional
        The arcs a waypoint may use (OSRM's ``exclude=``: :mod:`gpuroute.engine.exclude`). A segment is
        indexed where one of its directions is usable, and a phantom lists its usable directions only
        (an excluded one is -1), as osrm-routed's ``CheckSegmentExclude``; the ``curb`` approach still
        reads the segment's two directions (OSRM applies it to the enabled ones), the component is the
        graph's. Default: every arc.
    startpoints : bool
        False: ``is_startpoint`` is not read, every segment of the component is indexed (OSRM's map matching
        snaps trace points onto every edge: ``GetPhantomNodesInRange(..., use_all_edges=true)``).

    Attributes
    ----------
    u, v : ndarray int32 (s,)
        End nodes of each segment.
    forward_arc, reverse_arc : ndarray int64 (s,)
        Arc ``u -> v`` (always >= 0) and arc ``v -> u`` (-1 for a one-way segment).
    name_id : ndarray int32 (s,)
    names : list of str
    length_m : ndarray float64 (s,)
    usable_fwd, usable_rev : ndarray bool (s,) or None
        With ``arc_mask``: whether each segment's forward (reverse) arc is usable; None without it.

    Raises
    ------
    ValueError
        A graph without coordinates, a planar graph, an unknown ``component``, no segment to index.
    """

    def __init__(self, graph, *, component="largest", spacing=None, arc_mask=None, startpoints=True):
        cKDTree = kdtree_class()

        if component not in COMPONENTS:
            raise ValueError(f"component must be one of {COMPONENTS}, got {component!r}")
        if graph.coords is None:
            raise ValueError(f"segment snapping needs node coordinates, but graph {graph.name!r} has none")
        if graph.is_planar:
            raise ValueError(f"segment snapping needs lon/lat coordinates; graph {graph.name!r} is planar")
        self.graph = graph
        self.component = component
        n = graph.n_nodes
        tail = graph.tail.astype(np.int64)
        head = graph.head.astype(np.int64)
        m = tail.size
        if m == 0:
            raise ValueError(f"graph {graph.name!r} has no segment to snap to")
        # the reverse of each arc (v -> u), -1 when the street is one-way
        key = tail * n + head
        order = np.argsort(key, kind="stable")
        skey = key[order]
        rkey = head * n + tail
        pos = np.minimum(np.searchsorted(skey, rkey), m - 1)
        rev = np.where(skey[pos] == rkey, order[pos], -1)
        keep = (rev < 0) | (np.arange(m) < rev)
        if component == "largest":
            scc = largest_scc_mask(graph)
            keep &= scc[tail] & scc[head]
        sp = graph.arc_attrs.get("is_startpoint") if startpoints else None
        if sp is not None:  # OSRM's is_startpoint (Lua profiles): no waypoint on ferries and the like
            sp = np.asarray(sp, dtype=bool)
            keep &= sp | np.where(rev >= 0, sp[np.maximum(rev, 0)], False)
        usable = None
        if arc_mask is not None:  # OSRM's exclude: a segment stays where one of its directions is usable
            usable = np.asarray(arc_mask)
            if usable.shape != (m,) or usable.dtype != np.bool_:
                raise ValueError(f"arc_mask must be a bool array of shape ({m},) (one per arc), got "
                                 f"{usable.dtype} {usable.shape}")
            keep &= usable | np.where(rev >= 0, usable[np.maximum(rev, 0)], False)
        fwd = np.flatnonzero(keep)
        if fwd.size == 0:
            raise ValueError(f"graph {graph.name!r} has no segment to snap to")
        self.usable_fwd = None if usable is None else usable[fwd].copy()
        self.usable_rev = None if usable is None else np.where(rev[fwd] >= 0, usable[np.maximum(rev[fwd], 0)], False)
        # the arcs a phantom of each segment lists (an excluded direction: -1), and each segment's reverse arc:
        # rows of one array (the grid's kernel takes it whole)
        self._phantom = np.empty((3, fwd.size), dtype=np.int64)
        self._phantom[0] = fwd if usable is None else np.where(self.usable_fwd, fwd, -1)
        self._phantom[1] = rev[fwd] if usable is None else np.where(self.usable_rev, rev[fwd], -1)
        self._phantom[2] = rev[fwd]  # the reverse arc, usable or not (the curb approach reads it)
        self._phantom_fwd, self._phantom_rev = self._phantom[0], self._phantom[1]
        self.forward_arc = fwd.astype(np.int64)
        self.reverse_arc = rev[fwd].astype(np.int64)
        self.u = tail[fwd].astype(np.int32)
        self.v = head[fwd].astype(np.int32)
        xy = graph.coords
        # lon_u, lat_u, lon_v, lat_v: rows of one float64 (4, s) array (the grid's kernel takes it whole)
        self._geom = np.empty((4, fwd.size))
        self._geom[0], self._geom[1] = xy[self.u, 0], xy[self.u, 1]
        self._geom[2], self._geom[3] = xy[self.v, 0], xy[self.v, 1]
        self.lon_u, self.lat_u, self.lon_v, self.lat_v = self._geom
        self.length_m = haversine_m(self.lon_u, self.lat_u, self.lon_v, self.lat_v)
        names = graph.meta.get("way_names") or []
        self.names = list(names)
        nid = graph.arc_attrs.get("name_id")
        self.name_id = (np.asarray(nid)[self.forward_arc].astype(np.int32) if nid is not None and self.names
                        else np.full(fwd.size, -1, dtype=np.int32))
        # samples: both ends and every `spacing` metres between
        self.spacing = float(config.SERVE_SEGMENT_SAMPLE_SPACING_M if spacing is None else spacing)
        if not self.spacing > 0:
            raise ValueError(f"spacing must be > 0 metres, got {self.spacing}")
        pieces = np.maximum(1, np.ceil(self.length_m / self.spacing)).astype(np.int64)
        counts = pieces + 1
        seg_of = np.repeat(np.arange(fwd.size, dtype=np.int64), counts)
        starts = np.cumsum(counts) - counts
        k = np.arange(seg_of.size, dtype=np.int64) - starts[seg_of]
        f = k / pieces[seg_of]
        slon = self.lon_u[seg_of] + f * (np.mod(self.lon_v - self.lon_u + 180.0, 360.0)[seg_of] - 180.0)
        slat = self.lat_u[seg_of] + f * (self.lat_v - self.lat_u)[seg_of]
        self.sample_segment = seg_of
        # half the largest gap between samples, plus slack for the frame's and the chord's small errors
        self._slack = 0.5 * float((self.length_m / pieces).max()) * 1.01 + 1.0
        self.tree = cKDTree(unit_vectors(slon, slat) * EARTH_RADIUS_M)
        self._grid = _segment_grid(self._geom, self.n_segments)

    @classmethod
    def of(cls, graph, component="largest"):
        """The index of ``graph`` (built once per graph and component, kept by :meth:`RoadGraph.derived`)."""
        return graph.derived(("segment_index", component), lambda: cls(graph, component=component))

    @property
    def n_segments(self):
        return int(self.u.size)

    def name_of(self, name_id):
        """The street name of a ``name_id`` (``""`` for -1)."""
        return self.names[name_id] if 0 <= name_id < len(self.names) else ""

    # ------------------------------------------------------------------ projection
    def project(self, lon, lat, segments):
        """Exact projections of one point onto some segments, in the local frame centred on the point.

        Parameters
        ----------
        lon, lat : float
            Degrees.
        segments : ndarray int (c,)

        Returns
        -------
        dict of ndarray (c,)
            ``fraction`` (along u -> v, in [0, 1]), ``distance`` (metres, in the frame), ``bearing``
            (of u -> v, degrees clockwise from north), ``side`` (the cross product of u -> v with u -> point:
            < 0 when the point lies on the right of u -> v), ``lon``/``lat`` (the snapped points).
        """
        s = np.asarray(segments, dtype=np.int64)
        out = np.empty((6, s.size))
        _project_kernel(float(lon), float(lat), s, self.lon_u, self.lat_u, self.lon_v, self.lat_v, out)
        return {"fraction": out[0], "distance": out[1], "bearing": out[2], "side": out[3], "lon": out[4],
                "lat": out[5]}

    def _filtered(self, lon, lat, segments, bearing, approach):
        """Projections onto ``segments`` with the usable directions after the filters:
        ``(proj, fwd_ok, rev_ok)``."""
        p = self.project(lon, lat, segments)
        s = np.asarray(segments, dtype=np.int64)
        fwd_ok = np.ones(s.size, dtype=bool)
        rev_ok = self.reverse_arc[s] >= 0
        if bearing is not None:
            value, rng = bearing
            fwd_ok &= angle_difference(p["bearing"], value) <= rng
            rev_ok &= angle_difference(p["bearing"] + 180.0, value) <= rng
        if approach == "curb":
            two_way = fwd_ok & rev_ok
            right = p["side"] < 0
            left = p["side"] > 0
            fwd_ok = np.where(two_way & left, False, fwd_ok)
            rev_ok = np.where(two_way & right, False, rev_ok)
        if self.usable_fwd is not None:  # excluded directions (arc_mask)
            fwd_ok &= self.usable_fwd[s]
            rev_ok &= self.usable_rev[s]
        return p, fwd_ok, rev_ok

    # ------------------------------------------------------------------ queries
    def _search(self, lon, lat, number, radius, bearing, approach, tie=None):
        """The ``number`` nearest usable segments: ``(segments, proj, fwd_ok, rev_ok, nearest_rejected)``
        sorted by distance (fewer when the radius or the graph runs out); with ``tie`` (metres) also every
        further one within ``tie`` of the nearest."""
        lo, la = lon * _DEG, lat * _DEG  # unit_vectors of one point, without arrays
        q = (EARTH_RADIUS_M * math.cos(la) * math.cos(lo), EARTH_RADIUS_M * math.cos(la) * math.sin(lo),
             EARTH_RADIUS_M * math.sin(la))
        r = self.spacing  # most points lie this near a road; else the nearest sample sets the radius below
        limit = math.inf if radius is None else float(radius)
        n_samples = self.sample_segment.size
        rejected = math.inf
        while True:
            r_eff = min(r, limit)
            # chord <= arc; the frame's scale error grows with the distance (a few per mille per km)
            idx = self.tree.query_ball_point(q, r_eff * (1.01 + 5.0 * r_eff / EARTH_RADIUS_M) + self._slack,
                                             return_sorted=False)
            if len(idx) == 0 and r_eff < limit:
                r = max(2.0 * r, float(self.tree.query(q, k=1)[0]) + self._slack)
                continue
            segs = np.sort(self.sample_segment[np.asarray(idx, dtype=np.int64)])
            if segs.size > 1:  # np.unique, without its overhead on a few dozen values
                segs = segs[np.concatenate(([True], segs[1:] != segs[:-1]))]
            p, fo, ro = self._filtered(lon, lat, segs, bearing, approach)
            ok = (fo | ro) & (p["distance"] <= limit)
            close = p["distance"] <= r_eff
            if (~ok & close).any():
                rejected = float(p["distance"][~ok & close].min())
            everything = len(idx) >= n_samples
            sure = ok & (close | everything)
            if int(sure.sum()) >= number or r_eff >= limit or everything:
                sel = np.flatnonzero(sure)
                sel = sel[np.argsort(p["distance"][sel], kind="stable")]  # ties: the smaller id (segs sorted)
                if tie is not None and sel.size:
                    cut = float(p["distance"][sel[0]]) + float(tie)
                    if cut > r_eff and not (r_eff >= limit or everything):
                        r = max(2.0 * r, cut + 1.0)  # ties may lie beyond the searched radius
                        continue
                    m = int(np.count_nonzero(p["distance"][sel] <= cut))  # a prefix: sel is sorted
                    if m > 1:  # the same place too (a junction node), not another road as far away
                        near = _haversine_pairs(p["lon"][sel[:m]], p["lat"][sel[:m]], np.full(m, p["lon"][sel[0]]),
                                                np.full(m, p["lat"][sel[0]])) <= float(tie)
                        sel = np.concatenate([sel[:number], sel[number:m][near[number:]]])
                    else:
                        sel = sel[:number]
                else:
                    sel = sel[:number]
                return segs[sel], {k: v[sel] for k, v in p.items()}, fo[sel], ro[sel], rejected
            r = max(2.0 * r, r + 50.0)

    def _candidates(self, lon, lat, number, radius, bearing, approach, index, tie, point):
        """The candidate segments (:data:`_CAND_FIELDS` arrays, nearest first, the first not a tie) of one
        checked coordinate (:meth:`_search`); ``point`` fills the ``point`` field. NoSegment when none."""
        segs, p, fo, ro, rejected = self._search(lon, lat, number, radius, bearing, approach, tie)
        if segs.size == 0:
            raise self._no_segment(lon, lat, radius, bearing, approach, index, rejected)
        c = segs.size
        return {"point": np.full(c, point, dtype=np.int64), "segment": segs.astype(np.int64),
                "fwd": np.where(fo, self.forward_arc[segs], -1), "rev": np.where(ro, self.reverse_arc[segs], -1),
                "frac": p["fraction"], "lon": p["lon"], "lat": p["lat"],
                "distance": _haversine_pairs(np.full(c, lon), np.full(c, lat), p["lon"], p["lat"]),
                "name_id": self.name_id[segs].astype(np.int64), "tie": np.arange(c) > 0}

    def nearest(self, lon, lat, number=1, *, radius=None, bearing=None, approach="unrestricted", index=0):
        """The ``number`` nearest usable segments of one coordinate (OSRM's ``/nearest``), nearest first
        (ties: the smaller segment id), each as a point of its own.

        Parameters
        ----------
        lon, lat : float
            Degrees.
        number : int
            How many distinct segments (>= 1).
        radius : float, optional
            Largest snap distance in metres (None: unlimited).
        bearing : (float, float), optional
            ``(value, range)`` in degrees.
        approach : {"unrestricted", "curb"} or None
        index : int
            The coordinate's position in the query (named in errors).

        Returns
        -------
        PhantomSet
            One point per segment found (at least one; fewer than ``number`` when the radius or the
            component holds fewer), each with that segment's usable arcs and no ties.

        Raises
        ------
        ValueError
            A non-finite or out-of-range coordinate, a bad ``number``, ``radius``, ``bearing`` or
            ``approach`` (the message names ``index``).
        NoSegment
            No usable segment within the radius (or passing the bearing filter).
        """
        lon, lat = self._check_point(lon, lat, index)
        number = int(number)
        if number < 1:
            raise ValueError(f"number must be >= 1, got {number}")
        radius, bearing, approach = self._check_options(radius, bearing, approach, index)
        return self.nearest_checked(lon, lat, number, radius=radius, bearing=bearing, approach=approach, index=index)

    def nearest_checked(self, lon, lat, number, *, radius=None, bearing=None, approach="unrestricted", index=0):
        """:meth:`nearest` of a coordinate and options already validated (``lon``/``lat`` finite floats in
        range, ``number >= 1``, ``radius`` float >= 0 or None, ``bearing`` a checked pair or None,
        ``approach`` one of :data:`APPROACHES`): nothing is checked again. Raises NoSegment.

        Without bearing and approach, the candidates come from the grid in one compiled call
        (:func:`_grid_nearest`); else (or where the grid cannot answer) from :meth:`_search`."""
        if bearing is None and approach in (None, "unrestricted") and self._grid is not None:
            found, start, ints, floats, ties = _grid_nearest(float(lon), float(lat), int(number),
                                                             math.inf if radius is None else float(radius),
                                                             self.spacing, *self._grid, self._geom, self._phantom,
                                                             self.name_id)
            if found:
                k = start.size - 1
                return PhantomSet._of_rows(start, ints, floats, ties, np.full(k, float(lon)), np.full(k, float(lat)))
        c = self._candidates(float(lon), float(lat), number, radius, bearing, approach, index, None, 0)
        k = c["point"].size
        c["point"] = np.arange(k, dtype=np.int64)
        c["tie"] = np.zeros(k, dtype=bool)
        return _from_candidates(c, k, np.full(k, float(lon)), np.full(k, float(lat)))

    @staticmethod
    def _check_options(radius, bearing, approach, index):
        """Validated ``(radius, bearing, approach)`` of coordinate ``index`` (approach None ->
        ``"unrestricted"``); ValueError naming the index."""
        if radius is not None:
            radius = float(radius)
            if not radius >= 0:
                raise ValueError(f"radius of coordinate {index} must be >= 0 metres, got {radius}")
        bearing = check_bearing(bearing, index)
        approach = "unrestricted" if approach is None else approach
        if approach not in APPROACHES:
            raise ValueError(f"approach of coordinate {index} must be one of {APPROACHES}, got {approach!r}")
        return radius, bearing, approach

    @staticmethod
    def _no_segment(lon, lat, radius, bearing, approach, index, rejected):
        """The :class:`NoSegment` of coordinate ``index``, saying which options left nothing."""
        why = []
        if radius is not None:
            why.append(f"within {radius:,.1f} m")
        if bearing is not None:
            why.append(f"with a direction within {bearing[1]:g} degrees of bearing {bearing[0]:g}")
        if approach == "curb":
            why.append("on the curb side")
        return NoSegment(f"Could not find a matching segment for coordinate {index} ({lon}, {lat})"
                         + (": none " + ", ".join(why) if why else ""), index, rejected)

    def snap(self, lon, lat, *, radius=None, bearing=None, approach="unrestricted", index=0, tie=SNAP_TIE_M):
        """The nearest usable segment of one coordinate, with every other usable segment within ``tie``
        metres of it as ties (``tie=None``: none): a PhantomSet of one point (options and errors as
        :meth:`nearest`)."""
        lon, lat = self._check_point(lon, lat, index)
        radius, bearing, approach = self._check_options(radius, bearing, approach, index)
        c = self._candidates(lon, lat, 1, radius, bearing, approach, index, tie, 0)
        return _from_candidates(c, 1, np.array([lon]), np.array([lat]))

    def snap_many(self, coords, *, radiuses=None, bearings=None, approaches=None):
        """Snap a list of coordinates, each with its own options (OSRM's per-coordinate lists): the
        PhantomSet of :meth:`snap_batch`.

        Parameters
        ----------
        coords : sequence of (lon, lat), length k
        radiuses : sequence of float or None, length k, optional
        bearings : sequence of (value, range) or None, length k, optional
        approaches : sequence of {"unrestricted", "curb", None}, length k, optional

        Returns
        -------
        PhantomSet of k points

        Raises
        ------
        ValueError
            An option list of another length than ``coords``, or a bad value (naming the index).
        NoSegment
            The first coordinate with no usable segment (``.index``).
        """
        k = len(coords)
        lons, lats = np.zeros(k), np.zeros(k)
        for i, c in enumerate(coords):
            try:
                lon, lat = c
            except (TypeError, ValueError):
                raise ValueError(f"coordinate {i} must be a (lon, lat) pair, got {c!r}") from None
            lons[i], lats[i] = self._check_point(lon, lat, i)
        return self.snap_batch(lons, lats, radiuses=radiuses, bearings=bearings, approaches=approaches)

    def snap_batch(self, lons, lats, *, radiuses=None, bearings=None, approaches=None, tie=SNAP_TIE_M):
        """:meth:`snap` of many coordinates at once: the same options and the same errors as snapping one
        after the other, validated here, then snapped by :meth:`snap_checked`.

        Parameters
        ----------
        lons, lats : array_like of float, shape (k,)
            Degrees.
        radiuses : sequence of float or None, length k, optional
            Largest snap distance of each coordinate in metres (None: unlimited).
        bearings : sequence of (value, range) or None, length k, optional
        approaches : sequence of {"unrestricted", "curb", None}, length k, optional
        tie : float or None
            As :meth:`snap`'s (metres).

        Returns
        -------
        PhantomSet of k points

        Raises
        ------
        ValueError
            ``lons`` and ``lats`` of different lengths, an option list of another length, or the first
            coordinate (in order) with a bad value or option, as :meth:`snap` says it.
        NoSegment
            The first coordinate with no usable segment (``.index``), when no earlier coordinate is bad.
        """
        lon, lat = np.asarray(lons), np.asarray(lats)
        if lon.ndim != 1 or lat.ndim != 1 or lon.size != lat.size:
            raise ValueError(f"lons and lats must be two vectors of one length, got shapes {lon.shape} and {lat.shape}")
        k = lon.size
        for what, lst in (("radiuses", radiuses), ("bearings", bearings), ("approaches", approaches)):
            if lst is not None and len(lst) != k:
                raise ValueError(f"{what} has {len(lst)} entries for {k} coordinates")
        # the first bad coordinate or option, raised after the coordinates before it are snapped
        stop, err = k, None
        limit = np.full(k, np.inf)
        brg = np.full((k, 2), np.nan)
        curb = np.zeros(k, dtype=bool)
        lon_f, lat_f = np.zeros(k), np.zeros(k)
        for i in range(k):
            try:
                lon_f[i], lat_f[i] = self._check_point(lon[i], lat[i], i)
                if radiuses is not None or bearings is not None or approaches is not None:
                    r, b, a = self._check_options(None if radiuses is None else radiuses[i],
                                                  None if bearings is None else bearings[i],
                                                  None if approaches is None else approaches[i], i)
                    if r is not None:
                        limit[i] = r
                    if b is not None:
                        brg[i] = b
                    curb[i] = a == "curb"
            except ValueError as e:
                stop, err = i, e
                break
        out = self.snap_checked(lon_f[:stop], lat_f[:stop], radius=limit[:stop], bearing=brg[:stop], curb=curb[:stop],
                                tie=tie)
        if err is not None:
            raise err
        return out

    def snap_checked(self, lon, lat, *, radius=None, bearing=None, curb=None, tie=SNAP_TIE_M):
        """Snap validated coordinates (nothing is checked again): the PhantomSet of their nearest usable
        segments and ties, and the first coordinate without one raised.

        Every coordinate within ~1 km of a usable segment: one compiled call (:func:`_grid_rows`) takes the
        candidates from the grid, projects, filters by bearing and approach, and writes the PhantomSet's rows.
        Otherwise (a coordinate farther out or without a segment within its radius, a network without grid),
        the k-d tree's way, with the same answer: coordinates without a bearing and with an unrestricted
        approach (the plain case; a radius is fine) take one nearest-sample query and one ball query of the
        k-d tree for all of them (scipy's, on every core), then one compiled pass of exact projections over
        every (coordinate, candidate segment) pair picks the nearest segment and its ties. The ball of a
        coordinate holds every segment within the projection distance ``D0`` to the segment of its nearest
        sample (an upper bound of the nearest segment's distance), plus ``tie``, capped by its radius: the
        guarantee of :meth:`_search`'s growing balls, reached in one step. Coordinates with a bearing or a
        curb approach, and the rare ones farther than 5 km from every road, are snapped one at a time by
        :meth:`_search`.

        Parameters
        ----------
        lon, lat : ndarray float64 (k,)
            Finite degrees in range.
        radius : ndarray float64 (k,), optional
            Metres >= 0; ``inf``: unlimited (default: all unlimited).
        bearing : ndarray float64 (k, 2), optional
            ``(value, range)`` degrees per coordinate, checked (:func:`check_bearing`); NaN rows: none.
        curb : ndarray bool (k,), optional
            The coordinate's approach is ``"curb"``.
        tie : float or None
            Metres (:meth:`snap`).

        Returns
        -------
        PhantomSet of k points

        Raises
        ------
        NoSegment
            The first coordinate with no usable segment (``.index``: its position).
        """
        # contiguous, writable float64 (a record's coordinate columns are strided views, a parsed request's
        # radiuses read-only): one compiled kernel signature
        lon = _kernel_array(lon, np.float64)
        lat = _kernel_array(lat, np.float64)
        k = lon.size
        limit = _UNLIMITED if radius is None else _kernel_array(radius, np.float64)
        if k and self._grid is not None:
            # one compiled call, the candidates from the grid (the same answer as the k-d tree's balls and
            # :meth:`_search`, :func:`_grid_rows`)
            every, start, ints, floats, ties = _grid_rows(
                lon, lat, limit, _NO_BEARING if bearing is None else _kernel_array(bearing, np.float64),
                _NO_CURB if curb is None else _kernel_array(curb, np.bool_), self.spacing,
                -1.0 if tie is None else float(tie), *self._grid, self._geom, self._phantom, self.name_id)
            if every:
                return PhantomSet._of_rows(start, ints, floats, ties, lon, lat)
        if radius is None:
            limit = np.full(k, np.inf)
        if bearing is None and curb is None:  # no bearing, no approach (the common request): nothing to test
            has_b = curb = special = np.zeros(k, dtype=bool)
            plain = True
        else:
            has_b = np.zeros(k, dtype=bool) if bearing is None else ~np.isnan(np.asarray(bearing)[:, 0])
            curb = np.zeros(k, dtype=bool) if curb is None else np.asarray(curb, dtype=bool)
            special = has_b | curb  # snapped one at a time
            plain = not special.any()
        if plain:  # every coordinate plain (the common request): no gathers
            fast = np.arange(k, dtype=np.int64)
            cands, found, far = self._snap_plain(lon, lat, limit, fast, tie, whole=True)
            if isinstance(cands, PhantomSet):  # every coordinate settled by the first ball (the common case)
                return cands
            if found.all():
                return _from_candidates(cands, k, lon, lat)
        else:
            fast = np.flatnonzero(~special)
            cands, found, far = self._snap_plain(lon[fast], lat[fast], limit[fast], fast, tie)
        first_none = k
        miss = np.flatnonzero(~found & ~far)
        if miss.size:
            first_none = int(fast[miss[0]])
        parts = [cands]
        one_by_one = np.sort(np.concatenate([np.flatnonzero(special), fast[far]]))
        for i in one_by_one[one_by_one < first_none].tolist():  # raises the first NoSegment among them
            r = None if math.isinf(limit[i]) else float(limit[i])
            b = (float(bearing[i, 0]), float(bearing[i, 1])) if has_b[i] else None
            parts.append(self._candidates(float(lon[i]), float(lat[i]), 1, r, b, "curb" if curb[i] else "unrestricted",
                                          i, tie, i))
        if first_none < k:
            i = first_none
            raise self._no_segment(float(lon[i]), float(lat[i]), None if math.isinf(limit[i]) else float(limit[i]),
                                   None, "unrestricted", i, math.inf)
        return _from_candidates(_concat_candidates(parts), k, lon, lat)

    def _snap_plain(self, lon, lat, limit, index, tie, whole=False):
        """:meth:`snap_checked` of coordinates without bearing or approach: ``(candidates, found, far)``,
        the candidate arrays (:data:`_CAND_FIELDS`, ``point`` from ``index``) of the coordinates settled,
        a bool (k,) mask of those settled, and a bool (k,) mask of the coordinates left to :meth:`_search`
        (farther than :data:`_BATCH_MAX_M` from every road). ``whole``: the coordinates are the request's,
        in order (``index`` is ``arange(k)``); when the first step settles every one with a segment,
        ``candidates`` is then their PhantomSet itself (:func:`_settled_rows`: no candidate arrays).

        Two steps, each a ball query of the k-d tree for all coordinates at once and one compiled pass
        (:func:`_snap_kernel`): first balls of ``spacing`` metres (or the radius when smaller), where most
        coordinates have their segment; those whose nearest segment (plus ``tie``) does not lie inside it
        then take the nearest sample's segment's distance ``D0`` as their reach (the guarantee of
        :meth:`_search`'s growing balls, reached in one step)."""
        k = lon.size
        found = np.zeros(k, dtype=bool)
        far = np.zeros(k, dtype=bool)
        if k == 0:
            return _no_candidates(), found, far
        q = unit_vectors(lon, lat) * EARTH_RADIUS_M
        # threads pay off for big batches only (scipy starts them on every call: ~4 per request)
        workers = -1 if k >= _PARALLEL_QUERY_MIN else 1
        tie_m = -1.0 if tie is None else float(tie)
        # most coordinates lie within `spacing` of a road: one ball each settles them
        reach = np.minimum(self.spacing, limit)
        raw, done, ok = self._snap_balls(q, lon, lat, limit, reach, index, tie_m, workers, raw=True, rows=whole)
        if whole:
            if raw[-1] is not None:  # the common request: its PhantomSet from the same compiled call
                found[:] = True
                return PhantomSet(*raw[-1], lon, lat), found, far
            raw = raw[:-1]
        found[:] = ok
        c1 = dict(zip(_CAND_FIELDS, _settled(*raw, index), strict=True))
        rest = np.flatnonzero(~done)
        if rest.size == 0:
            return c1, found, far
        # the others: D0, the projection distance to the segment of the nearest sample, bounds the nearest
        # segment's
        lon, lat, limit, index, q = lon[rest], lat[rest], limit[rest], index[rest], q[rest]
        _, nn = self.tree.query(q, k=1, workers=workers)
        one = np.full(rest.size, np.inf)  # that one segment of each, without limit nor ties: its distance
        _, floats, best, _, _, _ = _snap_kernel(
            lon, lat, one, one, -1.0, np.ones(rest.size, dtype=np.int64), np.asarray(nn, dtype=np.int64),
            self.sample_segment, self.lon_u, self.lat_u, self.lon_v, self.lat_v, self.u, self.v, self.forward_arc,
            self.reverse_arc, self.name_id)
        reach = np.minimum(floats[best, 4] + max(tie_m, 0.0), limit)
        far[rest] = ~(reach <= _BATCH_MAX_M)
        sub = np.flatnonzero(~far[rest])
        c2 = _no_candidates()
        if sub.size:
            c2, _, ok2 = self._snap_balls(q[sub], lon[sub], lat[sub], limit[sub], reach[sub], index[sub], tie_m,
                                          workers)
            found[rest[sub]] = ok2
        return _concat_candidates([c1, c2]), found, far

    def _snap_balls(self, q, lon, lat, limit, reach, index, tie, workers, raw=False, rows=False):
        """One step of :meth:`_snap_plain`: balls holding every segment within ``reach`` metres of each
        point (chord <= arc; the frame's scale error), the exact step (:func:`_snap_kernel`): ``(candidates,
        done, found)``, the candidate arrays of the points it settles with a segment (``raw``: the kernel's
        outputs instead), and two bool masks: settled, and settled with a segment.

        ``rows`` (with ``raw``; the points are a whole request, in order): the kernel's outputs are followed by
        the PhantomSet's row arrays (:func:`_settled_rows`, from the same compiled call, :func:`_snap_rows`)
        when every point is settled with a segment (the kernel's outputs are then None: nothing reads them),
        else by None (the kernel is run again for its outputs: the rare request with a point off every first
        ball)."""
        balls = self.tree.query_ball_point(q, reach * (1.01 + 5.0 * reach / EARTH_RADIUS_M) + self._slack,
                                           return_sorted=False, workers=workers)
        m = reach.size
        lens = np.fromiter(map(len, balls), dtype=np.int64, count=m)
        samples = np.fromiter(itertools.chain.from_iterable(balls), dtype=np.int64, count=int(lens.sum()))
        if raw and rows:
            every, settled = _snap_rows(lon, lat, limit, reach, float(tie), lens, samples, self.sample_segment,
                                        self.lon_u, self.lat_u, self.lon_v, self.lat_v, self.u, self.v,
                                        self._phantom_fwd, self._phantom_rev, self.name_id)
            if every:  # only the rows are read: no kernel output comes back to Python
                return (None, None, None, None, None, None, settled), None, None
        ints, floats, best, done, tie_first, tie_rows = _snap_kernel(
            lon, lat, limit, reach, float(tie), lens, samples, self.sample_segment, self.lon_u, self.lat_u,
            self.lon_v, self.lat_v, self.u, self.v, self._phantom_fwd, self._phantom_rev, self.name_id)
        found = done & (best >= 0)
        if raw:
            return (ints, floats, best, done, tie_first, tie_rows) + ((None,) if rows else ()), done, found
        return dict(zip(_CAND_FIELDS, _settled(ints, floats, best, done, tie_first, tie_rows, index), strict=True)), \
            done, found

    @staticmethod
    def _check_point(lon, lat, index):
        try:
            lon, lat = float(lon), float(lat)
        except (TypeError, ValueError):
            raise ValueError(f"coordinate {index} must be numbers, got ({lon!r}, {lat!r})") from None
        if not (math.isfinite(lon) and math.isfinite(lat) and -180.0 <= lon <= 180.0 and -90.0 <= lat <= 90.0):
            raise ValueError(f"coordinate {index} ({lon}, {lat}) is not a valid longitude/latitude")
        return lon, lat

    def __repr__(self):
        return (f"SegmentIndex({self.graph.name!r}, component={self.component!r}, segments={self.n_segments:,}, "
                f"samples={self.sample_segment.size:,})")


__all__ = ["SegmentIndex", "PhantomSet", "NoSegment", "APPROACHES", "COMPONENTS", "check_bearing",
           "angle_difference", "local_xy", "bearing_deg"]

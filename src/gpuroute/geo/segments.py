"""Snapping points onto road segments, as OSRM does (the service layer's snapping; ``nearest_node`` in
:mod:`gpuroute.geo.snap` snaps to nodes).

A *segment* is one straight piece of road between two graph nodes ``u`` and ``v``: the arcs ``u -> v``
and ``v -> u`` of a two-way street are ONE segment with a forward and a reverse arc, a one-way street's
segment has a forward arc only. A coordinate is projected onto the nearest segment (of the graph's
largest strongly connected component by default, as OSRM's default snapping), and the result is a
:class:`Phantom`: the segment, the fraction along it, the snapped location, the distance and the street
name. A route may then start or end in the middle of an arc (OSRM's phantom nodes).

Candidates come from a k-d tree over sample points placed along every segment (both ends, and every
``config.SERVE_SEGMENT_SAMPLE_SPACING_M`` metres between): every segment within distance ``r`` of the
point has a sample within ``r + spacing / 2``, so a ball query of that radius followed by exact
point-to-segment projections gives the exact nearest segment(s). Projections are computed in a local
equirectangular frame centred on the query point (east/north metres with the one Earth radius
:data:`gpuroute.geo.EARTH_RADIUS_M`): exact for the straight segments of an OSM graph at street scale.

Options, as OSRM defines them (``docs/http.md``, "General options"):

* ``radius``: the largest snap distance in metres (None: unlimited);
* ``bearing = (value, range)``: only segments one of whose directions points within ``range`` degrees
  of ``value`` (clockwise from north); the phantom keeps only the matching directions;
* ``approach``: ``"unrestricted"`` or ``"curb"``. Curb keeps, on a two-way segment, only the direction
  that has the point on its *right*: gpuroute assumes driving on the right (as OSRM's car profile does
  by default), so a vehicle stops at the curb on the point's side. A one-way segment keeps its one
  direction (OSRM ignores the approach there too).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import config
from . import EARTH_RADIUS_M, haversine_m, unit_vectors
from .snap import SnapError, largest_scc_mask

#: Accepted values of ``approach``.
APPROACHES = ("unrestricted", "curb")
#: Accepted values of ``component``.
COMPONENTS = ("largest", "any")

_DEG = math.pi / 180.0


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


@dataclass(frozen=True)
class Phantom:
    """A coordinate snapped onto a segment (OSRM's phantom node).

    Attributes
    ----------
    segment : int
        Segment id in the :class:`SegmentIndex`.
    u, v : int
        The segment's end nodes; ``fraction`` is measured from ``u`` towards ``v``.
    forward_arc : int
        Arc ``u -> v`` usable from this point, or -1 (absent, or excluded by a bearing or approach).
    reverse_arc : int
        Arc ``v -> u`` usable from this point, or -1. At least one of the two arcs is >= 0.
    fraction : float
        Position of the snapped point along ``u -> v``, in ``[0, 1]``.
    lon, lat : float
        The snapped location (degrees).
    distance : float
        Great-circle distance in metres from the input coordinate to the snapped location.
    name : str
        Street name of the segment's way (``""`` when unnamed or the graph has no names).
    name_id : int
        Index into ``graph.meta["way_names"]``, -1 when unnamed.
    index : int
        Position of the coordinate in the query.
    input_lon, input_lat : float
        The coordinate as given.
    """

    segment: int
    u: int
    v: int
    forward_arc: int
    reverse_arc: int
    fraction: float
    lon: float
    lat: float
    distance: float
    name: str
    name_id: int
    index: int
    input_lon: float
    input_lat: float

    @property
    def arcs(self):
        """The usable arcs as ``(arc, fraction along the arc)`` pairs: ``(forward_arc, fraction)`` and
        ``(reverse_arc, 1 - fraction)``, those >= 0 only."""
        out = []
        if self.forward_arc >= 0:
            out.append((self.forward_arc, self.fraction))
        if self.reverse_arc >= 0:
            out.append((self.reverse_arc, 1.0 - self.fraction))
        return out


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


class SegmentIndex:
    """Segments of a lon/lat road graph and a k-d tree over points sampled along them.

    Parameters
    ----------
    graph : RoadGraph
        With lon/lat coordinates (``coord_system="lonlat"``). Street names come from the arc attribute
        ``name_id`` and ``graph.meta["way_names"]`` (:func:`gpuroute.io.load_osm`) when present.
    component : {"largest", "any"}
        ``"largest"``: only segments of the largest strongly connected component (every two phantoms
        are then connected both ways); ``"any"``: every segment.
    spacing : float, optional
        Sample spacing in metres; default ``config.SERVE_SEGMENT_SAMPLE_SPACING_M``.

    Attributes
    ----------
    u, v : ndarray int32 (s,)
        End nodes of each segment.
    forward_arc, reverse_arc : ndarray int64 (s,)
        Arc ``u -> v`` (always >= 0) and arc ``v -> u`` (-1 for a one-way segment).
    name_id : ndarray int32 (s,)
    names : list of str
    length_m : ndarray float64 (s,)

    Raises
    ------
    ValueError
        A graph without coordinates, a planar graph, an unknown ``component``, no segment to index.
    """

    def __init__(self, graph, *, component="largest", spacing=None):
        from scipy.spatial import cKDTree

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
        fwd = np.flatnonzero(keep)
        if fwd.size == 0:
            raise ValueError(f"graph {graph.name!r} has no segment to snap to")
        self.forward_arc = fwd.astype(np.int64)
        self.reverse_arc = rev[fwd].astype(np.int64)
        self.u = tail[fwd].astype(np.int32)
        self.v = head[fwd].astype(np.int32)
        xy = graph.coords
        self.lon_u, self.lat_u = xy[self.u, 0].copy(), xy[self.u, 1].copy()
        self.lon_v, self.lat_v = xy[self.v, 0].copy(), xy[self.v, 1].copy()
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
        ax, ay = local_xy(self.lon_u[s], self.lat_u[s], lon, lat)
        bx, by = local_xy(self.lon_v[s], self.lat_v[s], lon, lat)
        dx, dy = bx - ax, by - ay
        ll = dx * dx + dy * dy
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(ll > 0, -(ax * dx + ay * dy) / ll, 0.0)
        t = np.clip(t, 0.0, 1.0)
        px, py = ax + t * dx, ay + t * dy
        dlon = np.mod(self.lon_v[s] - self.lon_u[s] + 180.0, 360.0) - 180.0
        slon = self.lon_u[s] + t * dlon
        wrap = np.abs(slon) > 180.0  # only a segment across the antimeridian
        if wrap.any():
            slon = np.where(wrap, np.mod(slon + 180.0, 360.0) - 180.0, slon)
        slat = self.lat_u[s] + t * (self.lat_v[s] - self.lat_u[s])
        return {"fraction": t, "distance": np.hypot(px, py), "bearing": bearing_deg(dx, dy),
                "side": dx * (-ay) - dy * (-ax), "lon": slon, "lat": slat}

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
        return p, fwd_ok, rev_ok

    # ------------------------------------------------------------------ queries
    def _search(self, lon, lat, number, radius, bearing, approach):
        """The ``number`` nearest usable segments: ``(segments, proj, fwd_ok, rev_ok, nearest_rejected)``
        sorted by distance (fewer when the radius or the graph runs out)."""
        q = unit_vectors(np.array([lon]), np.array([lat]))[0] * EARTH_RADIUS_M
        d0, _ = self.tree.query(q, k=1)
        r = float(d0) + self._slack
        limit = math.inf if radius is None else float(radius)
        n_samples = self.sample_segment.size
        rejected = math.inf
        while True:
            r_eff = min(r, limit)
            # chord <= arc; the frame's scale error grows with the distance (a few per mille per km)
            idx = self.tree.query_ball_point(q, r_eff * (1.01 + 5.0 * r_eff / EARTH_RADIUS_M) + self._slack)
            segs = np.unique(self.sample_segment[np.asarray(idx, dtype=np.int64)])
            p, fo, ro = self._filtered(lon, lat, segs, bearing, approach)
            ok = (fo | ro) & (p["distance"] <= limit)
            close = p["distance"] <= r_eff
            if (~ok & close).any():
                rejected = float(p["distance"][~ok & close].min())
            everything = len(idx) >= n_samples
            sure = ok & (close | everything)
            if int(sure.sum()) >= number or r_eff >= limit or everything:
                sel = np.flatnonzero(sure)
                sel = sel[np.lexsort((segs[sel], p["distance"][sel]))][:number]
                return segs[sel], {k: v[sel] for k, v in p.items()}, fo[sel], ro[sel], rejected
            r = max(2.0 * r, r + 50.0)

    def _phantom(self, seg, p, i, fo, ro, index, lon, lat):
        s = int(seg)
        nid = int(self.name_id[s])
        slon, slat = float(p["lon"][i]), float(p["lat"][i])
        return Phantom(segment=s, u=int(self.u[s]), v=int(self.v[s]),
                       forward_arc=int(self.forward_arc[s]) if fo[i] else -1,
                       reverse_arc=int(self.reverse_arc[s]) if ro[i] else -1,
                       fraction=float(p["fraction"][i]), lon=slon, lat=slat,
                       distance=float(haversine_m(lon, lat, slon, slat)), name=self.name_of(nid), name_id=nid,
                       index=int(index), input_lon=float(lon), input_lat=float(lat))

    def nearest(self, lon, lat, number=1, *, radius=None, bearing=None, approach="unrestricted", index=0):
        """The ``number`` nearest usable segments of one coordinate (OSRM's ``/nearest``), nearest first
        (ties: the smaller segment id).

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
        list of Phantom
            At least one; fewer than ``number`` when the radius or the component holds fewer.

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
        if radius is not None:
            radius = float(radius)
            if not radius >= 0:
                raise ValueError(f"radius of coordinate {index} must be >= 0 metres, got {radius}")
        bearing = check_bearing(bearing, index)
        approach = "unrestricted" if approach is None else approach
        if approach not in APPROACHES:
            raise ValueError(f"approach of coordinate {index} must be one of {APPROACHES}, got {approach!r}")
        segs, p, fo, ro, rejected = self._search(lon, lat, number, radius, bearing, approach)
        if segs.size == 0:
            why = []
            if radius is not None:
                why.append(f"within {radius:,.1f} m")
            if bearing is not None:
                why.append(f"with a direction within {bearing[1]:g} degrees of bearing {bearing[0]:g}")
            if approach == "curb":
                why.append("on the curb side")
            raise NoSegment(f"Could not find a matching segment for coordinate {index} ({lon}, {lat})"
                            + (": none " + ", ".join(why) if why else ""), index, rejected)
        return [self._phantom(s, p, i, fo, ro, index, lon, lat) for i, s in enumerate(segs)]

    def snap(self, lon, lat, *, radius=None, bearing=None, approach="unrestricted", index=0):
        """The nearest usable segment of one coordinate: a :class:`Phantom` (see :meth:`nearest`)."""
        return self.nearest(lon, lat, 1, radius=radius, bearing=bearing, approach=approach, index=index)[0]

    def snap_many(self, coords, *, radiuses=None, bearings=None, approaches=None):
        """Snap a list of coordinates, each with its own options (OSRM's per-coordinate lists).

        Parameters
        ----------
        coords : sequence of (lon, lat), length k
        radiuses : sequence of float or None, length k, optional
        bearings : sequence of (value, range) or None, length k, optional
        approaches : sequence of {"unrestricted", "curb", None}, length k, optional

        Returns
        -------
        list of Phantom, length k

        Raises
        ------
        ValueError
            An option list of another length than ``coords``, or a bad value (naming the index).
        NoSegment
            The first coordinate with no usable segment (``.index``).
        """
        k = len(coords)
        for what, lst in (("radiuses", radiuses), ("bearings", bearings), ("approaches", approaches)):
            if lst is not None and len(lst) != k:
                raise ValueError(f"{what} has {len(lst)} entries for {k} coordinates")
        out = []
        for i, c in enumerate(coords):
            try:
                lon, lat = c
            except (TypeError, ValueError):
                raise ValueError(f"coordinate {i} must be a (lon, lat) pair, got {c!r}") from None
            out.append(self.snap(lon, lat, radius=None if radiuses is None else radiuses[i],
                                 bearing=None if bearings is None else bearings[i],
                                 approach=None if approaches is None else approaches[i], index=i))
        return out

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


__all__ = ["SegmentIndex", "Phantom", "NoSegment", "APPROACHES", "COMPONENTS", "check_bearing",
           "angle_difference", "local_xy", "bearing_deg"]

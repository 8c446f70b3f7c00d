"""Typed parameter records of the engine's services: the ONE place where a request's coordinates and
options are checked, its limits applied and OSRM's vocabulary spelled (issue 19, deliverable 5).

Each service has a frozen record -- :class:`RouteParams`, :class:`TableParams`, :class:`TripParams`,
:class:`NearestParams`, :class:`IsochroneParams`, :class:`CustomizeParams`, :class:`MatchParams` -- built by its ``from_kwargs``
classmethod from the Python API's arguments (the :class:`gpuroute.engine.Engine` methods' keywords) and a
``limits`` mapping (the engine's :attr:`~gpuroute.engine.Engine.limits`, else :func:`default_limits`: the
``config.SERVE_*`` tunables). The HTTP server (:mod:`gpuroute.server.parse`) turns an OSRM URL into the same
keywords and builds the same record, then hands it to :meth:`gpuroute.engine.Engine.run`: a request is
validated once, here, whichever way it came. The dataclass constructors themselves check nothing (a
record made by ``dataclasses.replace`` of a checked one stays checked); only ``from_kwargs`` validates.

Arrays and sentinels
--------------------
``coords`` float64 (n, 2), lon/lat in degrees. ``radiuses`` float64 (n,) in metres, :data:`UNLIMITED`
(``inf``) where unbounded; ``bearings`` float64 (n, 2) ``(value, range)`` in degrees, :data:`NO_BEARING`
(NaN) rows where none; ``approaches`` int8 (n,), an index into :data:`APPROACHES` or :data:`NO_APPROACH`
(-1). Each is None when the request gave none at all (the segment index's fast path). Arrays are
read-only.

Errors (:class:`gpuroute.engine.osrm.EngineError`, the same code over HTTP and from Python)
-------------------------------------------------------------------------------------------
* ``InvalidOptions``: a structure or an option value the option does not take (OSRM's ``IsValid``):
  coordinates that are not a list; too few coordinates (route, trip: 2; table: 1; nearest, isochrone:
  exactly 1); a per-coordinate list whose length is not the coordinates'; a radius < 0, a bearing outside
  0..360 / 0..180, an approach, geometries, overview, annotation, source, destination, snapping,
  fallback_coordinate, matrices, metric or ring format outside its vocabulary; a flag that is not
  true/false; ``alternatives`` < 0; ``number`` < 1; a ``sources``/``destinations`` index out of range
  (as osrm-routed); a table without annotations; no contours; ``denoise`` outside [0, 1], a negative
  ``generalize``, colours that are not ``rrggbb`` or not one per contour; customize's neither-or-both.
* ``InvalidValue``: a coordinate that is not a (lon, lat) pair in [-180, 180] x [-90, 90] (naming its
  index); ``fallback_speed``, ``scale_factor`` or ``time_limit`` not a number > 0; a contour not > 0; a
  ``depart_at`` that is not an ISO 8601 date and time (its calendar is the engine's to check).
* ``TooBig``: more coordinates than ``max_locations_route`` / ``max_locations_trip``; more table cells
  (sources x destinations) than ``max_locations_table``; ``number`` above ``max_locations_nearest``;
  ``alternatives`` above ``max_alternatives``; more contours than ``max_isochrone_contours``, a contour
  above ``max_isochrone_duration_s`` / ``max_isochrone_distance_m``.

A limit that is missing, None or <= 0 is no limit, except ``max_alternatives``: 0 allows no alternative
(``true`` included), as ``osrm-routed --max-alternatives 0``; None or < 0 is no limit (:func:`max_alternatives`). What needs the dataset stays with the engine: an
``exclude`` combination, ``avoid_polygons`` / ``avoid_ways`` (:mod:`gpuroute.engine.exclude`,
:mod:`gpuroute.engine.avoid`; carried here as given), a table of durations on a graph without travel times,
an isochrone metric without its weight, customize's arc ids and metric names
(:mod:`gpuroute.engine.traffic`).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import config
from ..geo.segments import APPROACHES as SEGMENT_APPROACHES
from .osrm import GEOMETRIES, OVERVIEWS, ROUTE_ANNOTATIONS, TABLE_ANNOTATIONS, EngineError

#: Radius sentinel: no bound (OSRM's ``unlimited``).
UNLIMITED = math.inf
#: Bearing sentinel: a row of NaN, no bearing filter for that coordinate.
NO_BEARING = math.nan
#: Approach sentinel: none given (the segment index's default, ``unrestricted``).
NO_APPROACH = -1
#: OSRM's approaches (the segment index's, one definition); a record's ``approaches`` holds their indices.
APPROACHES = SEGMENT_APPROACHES
#: ``/trip``'s ``source`` and ``destination``.
TRIP_SOURCES = ("any", "first")
TRIP_DESTINATIONS = ("any", "last")
#: ``snapping`` (``any`` needs an engine that takes it) and ``/table``'s ``fallback_coordinate``.
SNAPPINGS = ("default", "any")
FALLBACK_COORDINATES = ("input", "snapped")
#: How a table's matrices, and an isochrone's rings, come back (Python lists or NumPy arrays).
MATRICES = ("lists", "arrays")
#: How a route's legs' ``steps`` and ``annotation`` come back (Python objects, or their JSON text as
#: ``orjson.Fragment``: :func:`gpuroute.engine.services.route.leg_parts`).
LEG_PARTS = ("objects", "json")
RING_FORMATS = ("lists", "arrays")
#: Isochrone metrics.
ISOCHRONE_METRICS = ("duration", "distance")


def default_limits():
    """The limits of a request where the caller gives none: ``config.SERVE_*`` (a fresh dict).

    Keys: ``max_locations_route``, ``max_locations_table`` (cells), ``max_locations_nearest``,
    ``max_locations_trip``, ``max_locations_map_matching``, ``max_alternatives``, ``max_isochrone_contours``, ``max_isochrone_duration_s``,
    ``max_isochrone_distance_m``."""
    return {"max_locations_route": int(config.SERVE_MAX_LOCATIONS_ROUTE),
            "max_locations_table": int(config.SERVE_MAX_LOCATIONS_TABLE),
            "max_locations_nearest": int(config.SERVE_MAX_LOCATIONS_NEAREST),
            "max_locations_trip": int(config.SERVE_MAX_LOCATIONS_TRIP),
            "max_locations_map_matching": int(config.SERVE_MAX_LOCATIONS_MAP_MATCHING),
            "max_alternatives": int(config.SERVE_MAX_ALTERNATIVES),
            "max_isochrone_contours": int(config.SERVE_ISOCHRONE_MAX_CONTOURS),
            "max_isochrone_duration_s": float(config.SERVE_ISOCHRONE_MAX_DURATION_S),
            "max_isochrone_distance_m": float(config.SERVE_ISOCHRONE_MAX_DISTANCE_M)}


# ------------------------------------------------------------------------------------------ checks
def _limit(limits, key):
    """The limit ``key`` of ``limits`` (None: :func:`default_limits`), None where there is none."""
    v = (default_limits() if limits is None else limits).get(key)
    return None if v is None or v <= 0 else v


def max_alternatives(limits):
    """The most alternatives one route may ask for: ``limits["max_alternatives"]`` (None:
    :func:`default_limits`), an int >= 0 -- **0 refuses every alternative**, ``alternatives=true`` included
    (``osrm-routed --max-alternatives 0``, measured on 26.10) -- or None for no limit (the value None or < 0,
    which osrm-routed cannot be given). Unlike the other limits, 0 is not "no limit"."""
    v = (default_limits() if limits is None else limits).get("max_alternatives")
    return None if v is None or v < 0 else int(v)


def _frozen(a):
    a.setflags(write=False)
    return a


def check_coordinates(coords):
    """Checked coordinates: float64 (n, 2) lon/lat degrees (read-only).

    Raises
    ------
    EngineError
        ``InvalidOptions`` (not a list), ``InvalidValue`` naming the first bad coordinate's index.
    """
    if coords is None or isinstance(coords, (str, bytes)) or not hasattr(coords, "__len__"):
        raise EngineError("InvalidOptions", "coordinates must be a list of [lon, lat] pairs")
    if 0 < len(coords) <= _FEW_COORDINATES:  # a request's handful of pairs: no array passes
        arr = None
        if isinstance(coords, (list, tuple)):
            arr = _few_coordinates(coords)
        elif (isinstance(coords, np.ndarray) and coords.ndim == 2 and coords.shape[1] == 2
              and coords.dtype.kind in "biuf"):  # the HTTP layer's parsed (k, 2) array
            arr = _few_coordinates(coords.tolist())
        if arr is not None:
            return arr
    arr = None
    if len(coords) == 0:
        arr = np.zeros((0, 2))
    elif isinstance(coords, np.ndarray) and coords.ndim == 2 and coords.shape[1] == 2 and coords.dtype.kind in "biuf":
        arr = coords.astype(np.float64)
    elif not isinstance(coords, np.ndarray) and (set(map(type, coords)) <= {list, tuple}  # no str: no scan
                                                 or not any(isinstance(c, (str, bytes)) for c in coords)):
        try:
            a = np.asarray(coords, dtype=np.float64)
            arr = a if a.ndim == 2 and a.shape[1] == 2 else None
        except (TypeError, ValueError):
            arr = None
    if arr is None:  # not n pairs of numbers: the first bad one, named
        for i, c in enumerate(coords):
            try:
                if isinstance(c, (str, bytes)) or len(c) != 2:
                    raise TypeError
                float(c[0]), float(c[1])
            except (TypeError, ValueError):
                raise EngineError("InvalidValue", f"Invalid coordinate value at index {i}: {c!r} is not a "
                                  "[lon, lat] pair") from None
        arr = np.asarray([(float(c[0]), float(c[1])) for c in coords], dtype=np.float64).reshape(-1, 2)
    lon, lat = arr[:, 0], arr[:, 1]
    bad = np.flatnonzero(~(np.isfinite(lon) & np.isfinite(lat) & (np.abs(lon) <= 180.0) & (np.abs(lat) <= 90.0)))
    if bad.size:
        i = int(bad[0])
        raise EngineError("InvalidValue", f"Invalid coordinate value at index {i}: ({lon[i]}, {lat[i]}) is not a "
                          "longitude in [-180, 180] and a latitude in [-90, 90]")
    return _frozen(np.ascontiguousarray(arr))


#: Up to this many coordinates given as a list, :func:`check_coordinates` checks them one by one in Python
#: (a few float conversions cost less than NumPy's array passes on a 2-point request).
_FEW_COORDINATES = 16


def _few_coordinates(coords):
    """:func:`check_coordinates` of a short list of (lon, lat) pairs of numbers in range, or None where one
    is not (then the array path names it, with the same message)."""
    out = []
    for c in coords:
        if not isinstance(c, (list, tuple)) or len(c) != 2:
            return None
        try:
            lon, lat = float(c[0]), float(c[1])
        except (TypeError, ValueError):
            return None
        if not (-180.0 <= lon <= 180.0 and -90.0 <= lat <= 90.0):  # NaN fails too; inf is out of range
            return None
        out.append((lon, lat))
    return _frozen(np.array(out, dtype=np.float64))


def check_one_coordinate(coord):
    """One checked coordinate, ``(lon, lat)`` or a list of one ``[[lon, lat]]``: float64 (1, 2); errors
    as :func:`check_coordinates`, and InvalidOptions for a list of several coordinates."""
    if (coord is not None and not isinstance(coord, (str, bytes)) and hasattr(coord, "__len__") and len(coord)
            and not isinstance(coord[0], (int, float, np.number, str, bytes)) and hasattr(coord[0], "__len__")):
        if len(coord) != 1:  # a list of coordinates
            raise EngineError("InvalidOptions", "Only one input coordinate is supported")
        coord = coord[0]
    return check_coordinates([coord])


def per_coordinate(value, k, what):
    """A per-coordinate option list (or None) of length ``k``; InvalidOptions otherwise."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise EngineError("InvalidOptions", f"{what} must be a list with one entry per coordinate")
    if len(value) != k:
        raise EngineError("InvalidOptions",
                          f"Number of elements in {what} size {len(value)} does not match coordinate size {k}")
    return list(value)


def one_entry(value, what):
    """``/nearest`` and isochrone options: a one-entry list, or the entry itself (a radius, an approach, a
    bearing pair)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        single_bearing = (what == "bearings" and len(value) == 2
                          and all(isinstance(x, (int, float, np.number)) for x in value))
        if not single_bearing:
            return per_coordinate(value, 1, what)
    return [value]


def _plain_numbers(value):
    """float64 (k,) of a list or tuple of Python ints and floats (no bool), or None (anything else, or a value
    ``float`` cannot take): the fast path of the per-value checks, which name a bad value themselves."""
    if not isinstance(value, (list, tuple)) or not set(map(type, value)) <= {int, float}:
        return None
    try:
        return np.asarray(value, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return None


def check_radiuses(value, k):
    """float64 (k,) metres, :data:`UNLIMITED` for None/``"unlimited"`` entries, or None; InvalidOptions
    naming the coordinate."""
    value = per_coordinate(value, k, "radiuses")
    if value is None:
        return None
    fast = _plain_numbers(value)
    if fast is not None and fast.shape == (k,) and (fast >= 0).all():
        return _frozen(fast)
    out = np.full(k, UNLIMITED)
    for i, r in enumerate(value):
        if r is None or (isinstance(r, str) and r == "unlimited"):
            continue
        try:
            x = float(r) if not isinstance(r, (bool, bytes)) else math.nan
        except (OverflowError, TypeError, ValueError):  # OverflowError: an int beyond any float
            x = math.nan
        if not x >= 0:
            raise EngineError("InvalidOptions", f"radius of coordinate {i} must be a number of metres >= 0 "
                              f"or 'unlimited', got {r!r}")
        out[i] = x
    return _frozen(out)


def check_bearings(value, k):
    """float64 (k, 2) ``(value, range)`` degrees, :data:`NO_BEARING` rows for None entries, or None;
    InvalidOptions naming the coordinate (value in [0, 360], range in [0, 180])."""
    value = per_coordinate(value, k, "bearings")
    if value is None:
        return None
    out = np.full((k, 2), NO_BEARING)
    for i, b in enumerate(value):
        if b is None:
            continue
        try:
            if isinstance(b, (str, bytes)):
                raise TypeError
            v, r = (float(x) for x in b)
        except (TypeError, ValueError):
            raise EngineError("InvalidOptions", f"bearing of coordinate {i} must be a pair (value, range), "
                              f"got {b!r}") from None
        if not (0.0 <= v <= 360.0 and 0.0 <= r <= 180.0):
            raise EngineError("InvalidOptions", f"bearing of coordinate {i} is ({v:g}, {r:g}): value must be in "
                              "[0, 360] and range in [0, 180] degrees")
        out[i] = v, r
    return _frozen(out)


def check_approaches(value, k):
    """int8 (k,) indices into :data:`APPROACHES`, :data:`NO_APPROACH` for None entries, or None;
    InvalidOptions naming the coordinate."""
    value = per_coordinate(value, k, "approaches")
    if value is None:
        return None
    out = np.full(k, NO_APPROACH, dtype=np.int8)
    for i, a in enumerate(value):
        if a is None:
            continue
        if not isinstance(a, str) or a not in APPROACHES:
            raise EngineError("InvalidOptions", f"approach of coordinate {i} must be one of {APPROACHES}, "
                              f"got {a!r}")
        out[i] = APPROACHES.index(a)
    return _frozen(out)


def choice(value, allowed, what):
    """``value`` if one of ``allowed`` (``False`` is ``"false"`` where that is allowed); else InvalidOptions."""
    if value is False and "false" in allowed:
        value = "false"
    if not isinstance(value, str) or value not in allowed:
        raise EngineError("InvalidOptions", f"{what} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def flag(value, what, default=None):
    """A bool (``True``/``False``, NumPy's too); None -> ``default`` when that is not None; else
    InvalidOptions."""
    if value is None and default is not None:
        return bool(default)
    if not isinstance(value, (bool, np.bool_)):
        raise EngineError("InvalidOptions", f"{what} must be true or false, got {value!r}")
    return bool(value)


def annotation_set(value, allowed, what="annotations"):
    """Annotation names (a tuple in ``allowed``'s order) from True/False/None, ``"true"``/``"false"``,
    ``"a,b"`` or a sequence; InvalidOptions naming the first unknown one."""
    if value is None or value is False:
        return ()
    if value is True:
        return tuple(allowed)
    if isinstance(value, str):
        if value in ("true", "false"):
            return tuple(allowed) if value == "true" else ()
        value = [a for a in value.split(",") if a]
    try:
        names = tuple(value)
    except TypeError:
        raise EngineError("InvalidOptions", f"{what} must be true, false or a list of {allowed}") from None
    bad = [a for a in names if a not in allowed]
    if bad:
        raise EngineError("InvalidOptions", f"unknown {what} {bad[0]!r}; allowed: {', '.join(allowed)}")
    return tuple(a for a in allowed if a in names)


def indices(idx, k, what):
    """Coordinate indices: int64 array, or None for all (None or ``"all"``); InvalidOptions for a
    malformed list or an index outside the ``k`` coordinates (osrm-routed's code)."""
    if idx is None or (isinstance(idx, str) and idx == "all"):
        return None
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        idx = [idx]
    try:
        vals = [int(v) if not isinstance(v, (bool, str, bytes)) and float(v) == int(v) else None for v in idx]
    except (TypeError, ValueError, OverflowError):
        vals = [None]
    if not vals or any(v is None for v in vals):
        raise EngineError("InvalidOptions", f"{what} must be a non-empty list of coordinate indices, got {idx!r}")
    bad = [v for v in vals if not 0 <= v < k]
    if bad:
        raise EngineError("InvalidOptions", f"{what} index {bad[0]} is outside the {k} coordinates [0, {k - 1}]")
    return _frozen(np.asarray(vals, dtype=np.int64))


def positive(v, what, unit=""):
    """A finite float > 0, or None for None; InvalidValue otherwise."""
    if v is None:
        return None
    try:
        x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not (x > 0 and math.isfinite(x)):
        raise EngineError("InvalidValue", f"{what} must be a number{unit} > 0, got {v!r}")
    return x


def number_in(v, what, lo, hi):
    """A float in [lo, hi]; InvalidOptions otherwise."""
    try:
        x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not lo <= x <= hi:
        raise EngineError("InvalidOptions", f"{what} must be a number in [{lo:g}, {hi:g}], got {v!r}")
    return x


def check_contours(values, metric, limits=None):
    """Contour values, float64 (k,) in the caller's order (seconds or metres); InvalidOptions (none),
    TooBig (too many, one over the limit), InvalidValue (one not > 0)."""
    if isinstance(values, (int, float, np.number)) and not isinstance(values, bool):
        values = [values]
    if values is None or isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) == 0:
        raise EngineError("InvalidOptions", "contours must be a non-empty list of "
                          + ("seconds" if metric == "duration" else "metres"))
    mx = _limit(limits, "max_isochrone_contours")
    if mx and len(values) > mx:
        raise EngineError("TooBig", f"Number of contours {len(values)} is higher than current maximum ({mx})")
    unit = "s" if metric == "duration" else "m"
    top = _limit(limits, "max_isochrone_duration_s" if metric == "duration" else "max_isochrone_distance_m")
    out = np.empty(len(values))
    for k, v in enumerate(values):
        try:
            x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
        except (TypeError, ValueError):
            x = math.nan
        if not (x > 0 and math.isfinite(x)):
            raise EngineError("InvalidValue", f"contour {k} must be a number of {unit} > 0, got {v!r}")
        if top and x > top:
            raise EngineError("TooBig", f"contour {k} of {x:g} {unit} is higher than current maximum ({top:g} {unit})")
        out[k] = x
    return _frozen(out)


def check_colors(values, k):
    """``#rrggbb`` colours (a tuple, one per contour) or None; InvalidOptions otherwise."""
    if values is None:
        return None
    if isinstance(values, str):
        values = values.split(",")
    if isinstance(values, (bytes, dict)) or not hasattr(values, "__len__"):
        raise EngineError("InvalidOptions", f"colors must be a list of one colour per contour, got {values!r}")
    if len(values) != k:
        raise EngineError("InvalidOptions", f"colors has {len(values)} colours for {k} contours")
    out = []
    for col in values:
        h = col[1:] if isinstance(col, str) and col.startswith("#") else col
        if not (isinstance(h, str) and len(h) == 6 and all(ch in "0123456789abcdefABCDEF" for ch in h)):
            raise EngineError("InvalidOptions", f"colors must be hex colours rrggbb, got {col!r}")
        out.append("#" + h.lower())
    return tuple(out)


def check_depart_at(value):
    """A checked ``depart_at`` (:func:`gpuroute.engine.timeslots.parse_depart_at`): a datetime (aware, or
    naive: wall-clock time in the time profile's zone) or None; InvalidValue naming an unparsable value.
    Whether it lies in the profile's calendar is the engine's to judge."""
    from .timeslots import parse_depart_at

    return parse_depart_at(value)


def _count(n, least, limits, key):
    """At least ``least`` coordinates (InvalidOptions), at most ``limits[key]`` (TooBig)."""
    if n < least:
        word = {1: "one", 2: "two"}[least]
        raise EngineError("InvalidOptions", f"Number of coordinates needs to be at least {word}.")
    mx = _limit(limits, key) if key else None
    if mx and n > mx:
        raise EngineError("TooBig", f"Number of entries {n} is higher than current maximum ({mx})")


# ------------------------------------------------------------------------------------------ records
@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Waypoints:
    """What every service's record holds: the coordinates and their snapping options.

    Attributes
    ----------
    coords : ndarray float64 (n, 2)
        lon/lat degrees.
    radiuses : ndarray float64 (n,) or None
        Metres; :data:`UNLIMITED` where unbounded. None: none given.
    bearings : ndarray float64 (n, 2) or None
        ``(value, range)`` degrees; :data:`NO_BEARING` rows where none.
    approaches : ndarray int8 (n,) or None
        Indices into :data:`APPROACHES`; :data:`NO_APPROACH` where none.
    exclude, avoid_polygons, avoid_ways
        As given (checked against the dataset by :func:`gpuroute.engine.exclude.resolve`).
    snapping : {"default", "any"}
        ``any`` needs an engine that takes it (gpuroute's does not: :meth:`gpuroute.engine.Engine.run`
        refuses it).
    """

    coords: np.ndarray
    radiuses: np.ndarray | None = None
    bearings: np.ndarray | None = None
    approaches: np.ndarray | None = None
    exclude: object = None
    avoid_polygons: object = None
    avoid_ways: object = None
    snapping: str = "default"

    #: The service's name (``"route"``, ...; a class attribute, not a field).
    service = None

    @property
    def n(self):
        """Number of coordinates."""
        return int(self.coords.shape[0])

    def snap_options(self):
        """``(radiuses, bearings, approaches)`` as the Python API and
        :meth:`gpuroute.geo.segments.SegmentIndex.snap_batch` take them: lists with None where unbounded /
        none (each None when the request gave none)."""
        r, b, a = self.radiuses, self.bearings, self.approaches
        rs = None if r is None else [None if math.isinf(x) else x for x in r.tolist()]
        bs = None if b is None else [None if math.isnan(v) else (v, g) for v, g in b.tolist()]
        aps = None if a is None else [None if x < 0 else APPROACHES[x] for x in a.tolist()]
        return rs, bs, aps

    def kwargs(self):
        """The record as the Python API's keywords (the service method's, coordinates first under
        ``"coords"``): lists of plain values with None where a sentinel is, defaults left out. For
        engines without :meth:`gpuroute.engine.Engine.run` (the HTTP server calls those by keyword)."""
        rs, bs, aps = self.snap_options()
        out = {"coords": [tuple(c) for c in self.coords.tolist()]}
        for name, v in (("radiuses", rs), ("bearings", bs), ("approaches", aps)):
            if v is not None:
                out[name] = v
        for f in dataclasses.fields(self):
            if f.name in out or f.name in ("coords", "radiuses", "bearings", "approaches"):
                continue
            v = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and _same(v, f.default):
                continue
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif isinstance(v, tuple) and f.name in ("annotations", "colors"):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_kwargs(cls, coords, *, radiuses=None, bearings=None, approaches=None):
        """Checked coordinates and per-coordinate options alone (no service: what
        :meth:`gpuroute.engine.Engine._snap` takes outside a request). Raises EngineError."""
        c = check_coordinates(coords)
        return cls(**cls._common(c, c.shape[0], radiuses, bearings, approaches, None, None, None, "default"))

    @classmethod
    def _common(cls, coords, k, radiuses_, bearings_, approaches_, exclude, avoid_polygons, avoid_ways, snapping):
        return dict(coords=coords, radiuses=check_radiuses(radiuses_, k), bearings=check_bearings(bearings_, k),
                    approaches=check_approaches(approaches_, k), exclude=exclude, avoid_polygons=avoid_polygons,
                    avoid_ways=avoid_ways, snapping=choice(snapping, SNAPPINGS, "snapping"))


def _same(a, b):
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class RouteParams(Waypoints):
    """``/route``: the checked arguments of :meth:`gpuroute.engine.Engine.route`.

    Attributes
    ----------
    alternatives : int
        >= 0: the most alternative routes after the shortest one (0: none; ``true`` is 1, as OSRM's grammar);
        two waypoints only, "up to" (:func:`gpuroute.engine.services.route.plan_alternatives`).
    steps : bool
    annotations : tuple of str
        Of :data:`gpuroute.engine.osrm.ROUTE_ANNOTATIONS`, in that order.
    geometries : {"polyline", "polyline6", "geojson"}
    overview : {"simplified", "full", "false"}
    continue_straight : bool or None
        None: the profile's default (the engine resolves it).
    depart_at : datetime.datetime or None
        The departure time (:func:`check_depart_at`; the slot of the engine's time profile,
        :mod:`gpuroute.engine.timeslots`); None: the current metric.
    leg_parts : {"objects", "json"}
        The legs' ``steps`` and ``annotation`` as Python objects, or as ``orjson.Fragment`` of their JSON text
        (the same JSON; for a JSON writer, orjson >= 3.10: the HTTP server's answer).
    """

    alternatives: int = 0
    steps: bool = False
    annotations: tuple = ()
    geometries: str = "polyline"
    overview: str = "simplified"
    continue_straight: bool | None = None
    depart_at: object = None
    leg_parts: str = "objects"

    service = "route"

    @classmethod
    def from_kwargs(cls, coords, *, limits=None, alternatives=False, steps=False, annotations=False,
                    geometries="polyline", overview="simplified", radiuses=None, bearings=None, approaches=None,
                    continue_straight=None, exclude=None, avoid_polygons=None, avoid_ways=None, snapping="default",
                    depart_at=None, leg_parts="objects"):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.route`'s); ``limits``:
        ``max_locations_route``, ``max_alternatives``. Raises EngineError (see the module)."""
        c = check_coordinates(coords)
        _count(c.shape[0], 2, limits, "max_locations_route")
        common = cls._common(c, c.shape[0], radiuses, bearings, approaches, exclude, avoid_polygons, avoid_ways,
                             snapping)
        if isinstance(alternatives, bool) or isinstance(alternatives, np.bool_):
            alt = int(bool(alternatives))
        elif isinstance(alternatives, (int, np.integer)) and alternatives >= 0:
            alt = int(alternatives)
        else:
            raise EngineError("InvalidOptions", f"alternatives must be true, false or a number >= 0, "
                              f"got {alternatives!r}")
        top = max_alternatives(limits)
        if top is not None and alt > top:  # true is one alternative: refused where the limit is 0 (osrm-routed)
            raise EngineError("TooBig", f"Requested number of alternatives {alt} is higher than current maximum "
                              f"({top})")
        if continue_straight is not None:
            continue_straight = flag(continue_straight, "continue_straight")
        return cls(**common, alternatives=alt, steps=flag(steps, "steps"),
                   annotations=annotation_set(annotations, ROUTE_ANNOTATIONS),
                   geometries=choice(geometries, GEOMETRIES, "geometries"),
                   overview=choice(overview, OVERVIEWS, "overview"), continue_straight=continue_straight,
                   depart_at=check_depart_at(depart_at), leg_parts=choice(leg_parts, LEG_PARTS, "leg_parts"))


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TableParams(Waypoints):
    """``/table``: the checked arguments of :meth:`gpuroute.engine.Engine.table`.

    Attributes
    ----------
    sources, destinations : ndarray int64 or None
        Coordinate indices; None: every coordinate.
    annotations : tuple of str
        Non-empty, of ``("duration", "distance")``.
    fallback_speed, scale_factor : float or None
        > 0.
    fallback_coordinate : {"input", "snapped"}
    matrices : {"lists", "arrays"}
    depart_at : datetime.datetime or None
        As :class:`RouteParams`'.
    """

    sources: np.ndarray | None = None
    destinations: np.ndarray | None = None
    annotations: tuple = ("duration",)
    fallback_speed: float | None = None
    scale_factor: float | None = None
    fallback_coordinate: str = "input"
    matrices: str = "lists"
    depart_at: object = None

    service = "table"

    def source_indices(self):
        """int64 (|sources|,): the sources, every coordinate for None."""
        return np.arange(self.n, dtype=np.int64) if self.sources is None else self.sources

    def destination_indices(self):
        """int64 (|destinations|,)."""
        return np.arange(self.n, dtype=np.int64) if self.destinations is None else self.destinations

    @classmethod
    def from_kwargs(cls, coords, *, limits=None, sources=None, destinations=None, annotations=("duration",),
                    radiuses=None, bearings=None, approaches=None, fallback_speed=None, scale_factor=None,
                    matrices="lists", exclude=None, avoid_polygons=None, avoid_ways=None, snapping="default",
                    fallback_coordinate="input", depart_at=None):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.table`'s); ``limits``:
        ``max_locations_table`` (cells). Raises EngineError (see the module)."""
        c = check_coordinates(coords)
        k = c.shape[0]
        _count(k, 1, limits, None)
        src = indices(sources, k, "sources")
        dst = indices(destinations, k, "destinations")
        ns = k if src is None else src.size
        nd = k if dst is None else dst.size
        mx = _limit(limits, "max_locations_table")
        if mx and ns * nd > mx:
            raise EngineError("TooBig", f"Too many table coordinates: {ns} x {nd} = {ns * nd} cells, the maximum "
                              f"is {mx}")
        common = cls._common(c, k, radiuses, bearings, approaches, exclude, avoid_polygons, avoid_ways, snapping)
        ann = annotation_set(annotations, TABLE_ANNOTATIONS)
        if not ann:
            raise EngineError("InvalidOptions", "annotations must name duration and/or distance")
        return cls(**common, sources=src, destinations=dst, annotations=ann,
                   fallback_speed=positive(fallback_speed, "fallback_speed"),
                   scale_factor=positive(scale_factor, "scale_factor"),
                   fallback_coordinate=choice(fallback_coordinate, FALLBACK_COORDINATES, "fallback_coordinate"),
                   matrices=choice(matrices, MATRICES, "matrices"), depart_at=check_depart_at(depart_at))


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TripParams(Waypoints):
    """``/trip``: the checked arguments of :meth:`gpuroute.engine.Engine.trip` (``steps``,
    ``annotations``, ``geometries``, ``overview`` as :class:`RouteParams`').

    Attributes
    ----------
    roundtrip : bool
    source : {"any", "first"}
    destination : {"any", "last"}
    time_limit : float or None
        Seconds > 0 (None: the size-scaled default).
    depart_at : datetime.datetime or None
        As :class:`RouteParams`' (the matrix and every leg on the departure slot's metric).
    """

    roundtrip: bool = True
    source: str = "any"
    destination: str = "any"
    steps: bool = False
    annotations: tuple = ()
    geometries: str = "polyline"
    overview: str = "simplified"
    time_limit: float | None = None
    depart_at: object = None

    service = "trip"

    def leg_points(self, order):
        """int64 (n,) or (n + 1,): the coordinates the trip's route passes through, ``order`` (an int sequence,
        each coordinate once) and, on a roundtrip, ``order[0]`` again at the end."""
        return np.asarray(list(order) + ([order[0]] if self.roundtrip else []), dtype=np.int64)

    def route_params(self, order):
        """The :class:`RouteParams` (checked already: no validation runs) of the trip's route through the
        coordinates in ``order`` (:meth:`leg_points`), with ``continue_straight=False`` and the same options."""
        rows = self.leg_points(order)

        def pick(a):
            return None if a is None else _frozen(np.ascontiguousarray(a[rows]))

        return RouteParams(coords=pick(self.coords), radiuses=pick(self.radiuses), bearings=pick(self.bearings),
                           approaches=pick(self.approaches), exclude=self.exclude,
                           avoid_polygons=self.avoid_polygons, avoid_ways=self.avoid_ways, snapping=self.snapping,
                           steps=self.steps, annotations=self.annotations, geometries=self.geometries,
                           overview=self.overview, continue_straight=False, depart_at=self.depart_at)

    @classmethod
    def from_kwargs(cls, coords, *, limits=None, roundtrip=True, source="any", destination="any", steps=False,
                    annotations=False, geometries="polyline", overview="simplified", radiuses=None, bearings=None,
                    approaches=None, time_limit=None, exclude=None, avoid_polygons=None, avoid_ways=None,
                    snapping="default", depart_at=None):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.trip`'s; ``roundtrip`` also
        ``"true"``/``"false"``); ``limits``: ``max_locations_trip``. Raises EngineError (see the module);
        the combination of ``roundtrip``, ``source`` and ``destination`` is the engine's to judge
        (``NotImplemented``)."""
        c = check_coordinates(coords)
        _count(c.shape[0], 2, limits, "max_locations_trip")
        if isinstance(roundtrip, str) and roundtrip in ("true", "false"):
            roundtrip = roundtrip == "true"
        common = cls._common(c, c.shape[0], radiuses, bearings, approaches, exclude, avoid_polygons, avoid_ways,
                             snapping)
        return cls(**common, roundtrip=flag(roundtrip, "roundtrip"),
                   source=choice(source, TRIP_SOURCES, "source"),
                   destination=choice(destination, TRIP_DESTINATIONS, "destination"), steps=flag(steps, "steps"),
                   annotations=annotation_set(annotations, ROUTE_ANNOTATIONS),
                   geometries=choice(geometries, GEOMETRIES, "geometries"),
                   overview=choice(overview, OVERVIEWS, "overview"),
                   time_limit=positive(time_limit, "time_limit", " of seconds"), depart_at=check_depart_at(depart_at))


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class NearestParams(Waypoints):
    """``/nearest``: one coordinate (``coords`` (1, 2)) and ``number`` (int >= 1) of results."""

    number: int = 1

    service = "nearest"

    @classmethod
    def from_kwargs(cls, coord, *, limits=None, number=1, radiuses=None, bearings=None, approaches=None,
                    exclude=None, snapping="default"):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.nearest`'s: ``coord`` one
        ``(lon, lat)``, the options one-entry lists or the entry itself); ``limits``:
        ``max_locations_nearest``. Raises EngineError (see the module)."""
        c = check_one_coordinate(coord)
        if isinstance(number, (bool, np.bool_)) or not isinstance(number, (int, np.integer)) or number < 1:
            raise EngineError("InvalidOptions", f"number must be an integer >= 1, got {number!r}")
        mx = _limit(limits, "max_locations_nearest")
        if mx and number > mx:
            raise EngineError("TooBig", f"Number of results {number} is higher than current maximum ({mx})")
        common = cls._common(c, 1, one_entry(radiuses, "radiuses"), one_entry(bearings, "bearings"),
                             one_entry(approaches, "approaches"), exclude, None, None, snapping)
        return cls(**common, number=int(number))


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class IsochroneParams(Waypoints):
    """Isochrones: one origin (``coords`` (1, 2)) and its contours.

    Attributes
    ----------
    contours : ndarray float64 (k,)
        Seconds (``metric="duration"``) or metres, each > 0, in the caller's order.
    metric : {"duration", "distance"}
    polygons : bool
    denoise : float in [0, 1]
    generalize : float
        Metres >= 0 (the default: ``config.SERVE_ISOCHRONE_GENERALIZE_M``).
    colors : tuple of str or None
        ``#rrggbb``, one per contour.
    coordinates : {"lists", "arrays"}
        How rings come back.
    depart_at : datetime.datetime or None
        As :class:`RouteParams`' (durations on the departure slot's metric).
    """

    contours: np.ndarray = None
    metric: str = "duration"
    polygons: bool = True
    denoise: float = 1.0
    generalize: float = None
    colors: tuple | None = None
    coordinates: str = "lists"
    depart_at: object = None

    service = "isochrone"

    @classmethod
    def from_kwargs(cls, coord, contours, *, limits=None, metric="duration", polygons=True, denoise=1.0,
                    generalize=None, colors=None, radiuses=None, bearings=None, approaches=None,
                    coordinates="lists", exclude=None, avoid_polygons=None, avoid_ways=None, snapping="default",
                    depart_at=None):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.isochrone`'s); ``limits``:
        ``max_isochrone_contours``, ``max_isochrone_duration_s``, ``max_isochrone_distance_m``. Raises
        EngineError (see the module)."""
        metric = choice(metric, ISOCHRONE_METRICS, "metric")
        values = check_contours(contours, metric, limits)
        pg = flag(polygons, "polygons")
        fmt = choice(coordinates, RING_FORMATS, "coordinates")
        dn = number_in(denoise, "denoise", 0.0, 1.0)
        gz = number_in(config.SERVE_ISOCHRONE_GENERALIZE_M if generalize is None else generalize, "generalize",
                       0.0, math.inf)
        cols = check_colors(colors, values.size)
        c = check_one_coordinate(coord)
        common = cls._common(c, 1, one_entry(radiuses, "radiuses"), one_entry(bearings, "bearings"),
                             one_entry(approaches, "approaches"), exclude, avoid_polygons, avoid_ways, snapping)
        return cls(**common, contours=values, metric=metric, polygons=pg, denoise=dn, generalize=gz, colors=cols,
                   coordinates=fmt, depart_at=check_depart_at(depart_at))


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class CustomizeParams:
    """``/customize``: exactly one of ``updates`` (a list of update objects, checked against the graph by
    :meth:`gpuroute.engine.traffic.TrafficRouter.parse_updates`) and ``metric`` (a name, checked against
    the overlay's metrics)."""

    updates: list | None = None
    metric: str | None = None

    service = "customize"

    def kwargs(self):
        """``{"updates": ..., "metric": ...}`` as :meth:`gpuroute.engine.Engine.customize` takes them."""
        return {"updates": self.updates, "metric": self.metric}

    @classmethod
    def from_kwargs(cls, updates=None, *, metric=None):
        """The checked record. Raises EngineError ``InvalidOptions`` (neither or both given, updates not a
        list, metric not a string)."""
        if (updates is None) == (metric is None):
            raise EngineError("InvalidOptions", "give either updates (a list) or metric (a name), not "
                              + ("both" if updates is not None else "neither"))
        if updates is not None and (isinstance(updates, (str, bytes, dict)) or not hasattr(updates, "__len__")):
            raise EngineError("InvalidOptions", f"updates must be a list of update objects, got "
                              f"{type(updates).__name__}")
        if metric is not None and not isinstance(metric, str):
            raise EngineError("InvalidOptions", f"metric must be a name, got {metric!r}")
        return cls(updates=None if updates is None else list(updates), metric=metric)


#: ``/match``'s ``gaps``.
MATCH_GAPS = ("split", "ignore")


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class MatchParams(Waypoints):
    """``/match``: the checked arguments of :meth:`gpuroute.engine.Engine.match` (``steps``, ``annotations``,
    ``geometries``, ``overview`` as :class:`RouteParams`'; ``radiuses`` are each point's GPS standard
    deviation in metres, finite and > 0; no ``approaches``).

    Attributes
    ----------
    timestamps : ndarray float64 (n,) or None
        Seconds (integers >= 0, as OSRM's UNIX times), non-decreasing.
    gaps : {"split", "ignore"}
    tidy : bool
    """

    timestamps: np.ndarray | None = None
    gaps: str = "split"
    tidy: bool = False
    steps: bool = False
    annotations: tuple = ()
    geometries: str = "polyline"
    overview: str = "simplified"

    service = "match"

    @classmethod
    def from_kwargs(cls, coords, *, limits=None, timestamps=None, radiuses=None, bearings=None, approaches=None,
                    gaps="split", tidy=False, steps=False, annotations=False, geometries="polyline",
                    overview="simplified", exclude=None, avoid_polygons=None, avoid_ways=None, snapping="default"):
        """The checked record (arguments as :meth:`gpuroute.engine.Engine.match`'s); ``limits``:
        ``max_locations_map_matching``. Raises EngineError (see the module): ``InvalidOptions`` (fewer than two
        coordinates, ``timestamps`` or ``radiuses`` of another length than the coordinates, an ``approaches``
        list, an unknown ``gaps`` or other option value), ``InvalidValue`` (a bad coordinate; a timestamp that
        is not an integer >= 0, or smaller than the one before: "Timestamps need to be monotonically
        increasing", naming the index; a radius that is not a finite number > 0), ``TooBig`` (more
        coordinates than ``max_locations_map_matching``)."""
        c = check_coordinates(coords)
        k = c.shape[0]
        _count(k, 2, limits, "max_locations_map_matching")
        if approaches is not None:
            raise EngineError("InvalidOptions", "approaches is not supported by match")
        common = cls._common(c, k, radiuses, bearings, None, exclude, avoid_polygons, avoid_ways, snapping)
        r = common["radiuses"]
        if r is not None:
            bad = np.flatnonzero(~(np.isfinite(r) & (r > 0)))
            if bad.size:
                i = int(bad[0])
                raise EngineError("InvalidValue", f"radius of coordinate {i} is {r[i]:g}: a /match radius is the "
                                  "GPS standard deviation, a number of metres > 0")
        ts = per_coordinate(timestamps, k, "timestamps")
        if ts is not None:
            vals = _plain_numbers(ts)  # a list of ints or floats: checked as one array
            if vals is None or not (np.isfinite(vals) & (vals >= 0) & (vals == np.trunc(vals))).all():
                vals = _timestamps(ts, k)
            down = np.flatnonzero(np.diff(vals) < 0)
            if down.size:
                i = int(down[0]) + 1
                raise EngineError("InvalidValue", f"Timestamps need to be monotonically increasing: timestamp {i} "
                                  f"({vals[i]:g}) is before timestamp {i - 1} ({vals[i - 1]:g})")
            ts = _frozen(vals)
        return cls(**common, timestamps=ts, gaps=choice(gaps, MATCH_GAPS, "gaps"), tidy=flag(tidy, "tidy"),
                   steps=flag(steps, "steps"), annotations=annotation_set(annotations, ROUTE_ANNOTATIONS),
                   geometries=choice(geometries, GEOMETRIES, "geometries"),
                   overview=choice(overview, OVERVIEWS, "overview"))


def _timestamps(ts, k):
    """float64 (k,) of /match's timestamps checked one by one (InvalidValue naming the first that is not an
    integer number of seconds >= 0)."""
    vals = np.empty(k)
    for i, v in enumerate(ts):
        try:
            x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
        except (OverflowError, TypeError, ValueError):  # OverflowError: an int beyond any float
            x = math.nan
        if not (math.isfinite(x) and x >= 0 and x == int(x)):
            raise EngineError("InvalidValue", f"timestamp of coordinate {i} must be an integer number of "
                              f"seconds >= 0, got {v!r}")
        vals[i] = x
    return vals


#: Record type of each service.
RECORDS = {"route": RouteParams, "table": TableParams, "trip": TripParams, "nearest": NearestParams,
           "isochrone": IsochroneParams, "customize": CustomizeParams, "match": MatchParams}

__all__ = ["APPROACHES", "NO_APPROACH", "NO_BEARING", "UNLIMITED", "RECORDS", "CustomizeParams", "IsochroneParams",
           "MatchParams", "NearestParams", "RouteParams", "TableParams", "TripParams", "Waypoints", "default_limits"]

"""An OSRM v5-compatible HTTP API over :class:`gpuroute.engine.Engine` (Starlette; JSON by orjson).

This module is the HTTP layer only: it parses the URL and the options, checks the limits, calls the
engine in a worker thread and encodes its answer. Routing, snapping and the shapes of the answers are
the engine's. ``GET /`` is a web page over this API (an offline map drawn from ``GET /network``,
routes through leaflet-routing-machine's OSRM client, isochrones, a traffic slider on ``POST
/customize``): :mod:`gpuroute.server.web`.

URLs (osrm-backend ``docs/http.md``)
------------------------------------
``GET /{service}/v1/{profile}/{coordinates}[.json][?option=value&...]`` with ``service`` one of
``route``, ``table``, ``nearest``, ``trip`` (served when the engine has a ``trip`` method) and
``isochrone`` (gpuroute's own; served when the engine has an ``isochrone`` method).
``{coordinates}`` is ``lon,lat;lon,lat;...`` (degrees), or
``polyline(...)`` (Google's encoding, precision 5) or ``polyline6(...)`` (precision 6); a bare ``?``
inside a polyline is understood (OSRM clients do not always escape it). The profile is any name of
letters, digits, ``_``, ``-`` and ``.``, and is ignored (one engine serves one profile, as
``osrm-routed``). Only the ``json`` format exists.

``POST`` takes the same URL (the coordinates may then be left out of it: ``POST /table/v1/car``) with
the options in the body, either

* ``application/x-www-form-urlencoded``: exactly the query string's ``option=value`` pairs, plus
  ``coordinates=lon,lat;lon,lat`` when the URL has none; or
* ``application/json``: an object of the same option names, with values either as the query string
  writes them (``"radiuses": "5;unlimited"``) or as JSON (``"coordinates": [[7.42, 43.73], ...]``,
  ``"radiuses": [5, null]``, ``"bearings": [[90, 20], null]``, ``"sources": [0, 1]``,
  ``"annotations": ["duration", "distance"]``, ``"steps": true``).

Options given in both the query string and the body, or coordinates in both the URL and the body, are
refused (``InvalidQuery``). ``POST`` is how large tables are sent: the body may hold up to
``max_body_bytes``, while URLs are bounded by the HTTP server's header limit.

Options
-------
Every service: ``bearings`` (``value,range;...``, integers 0..360 and 0..180, empty element = none),
``radiuses`` (``metres;unlimited;...``), ``approaches`` (``curb;unrestricted;...``), ``hints``
(accepted and ignored; only their count is checked), ``generate_hints`` (``false`` drops the ``hint``
of every waypoint from the answer), ``exclude`` (``class,class``; refused unless the engine takes an
``exclude`` argument) and ``snapping`` (``default`` or ``any``; ``any`` is refused unless the engine
takes a ``snapping`` argument). A per-coordinate option has one element per coordinate.
``route``, ``table``, ``trip`` and ``isochrone`` also take ``avoid_polygons`` (a GeoJSON Polygon or
MultiPolygon, lon/lat: percent-encoded JSON in the URL, a JSON object or its text in a JSON body) and
``avoid_ways`` (OSM way ids ``id,id,...``; a JSON list in a body): the roads inside, crossing or touching
the area and the ways' arcs are avoided as ``exclude``'s classes (:mod:`gpuroute.engine.avoid`); every
error of theirs is ``InvalidValue`` naming the option.

* ``route``: ``alternatives`` (``true``, ``false`` or a count), ``steps``, ``annotations`` (``true``,
  ``false`` or names from ``nodes,distance,duration,datasources,weight,speed``), ``geometries``
  (``polyline``, ``polyline6``, ``geojson``), ``overview`` (``simplified``, ``full``, ``false``),
  ``continue_straight`` (``default``, ``true``, ``false``), ``skip_waypoints``.
* ``table``: ``sources`` and ``destinations`` (``all`` or ``i;j;...``), ``annotations``
  (``duration``, ``distance`` or ``duration,distance``), ``fallback_speed`` (> 0), ``scale_factor``
  (> 0), ``fallback_coordinate`` (``input`` or ``snapped``; ``snapped`` needs an engine that takes it),
  ``skip_waypoints``.
* ``nearest``: exactly one coordinate; ``number`` (integer >= 1).
* ``trip``: at least two coordinates, at most ``max_locations_trip``; ``roundtrip`` (``true``,
  ``false``), ``source`` (``any``, ``first``), ``destination`` (``any``, ``last``), ``steps``,
  ``annotations``, ``geometries``, ``overview``, ``skip_waypoints`` as for ``route``
  (:meth:`gpuroute.engine.Engine.trip`; ``roundtrip=false`` without ``source=first`` and
  ``destination=last`` is the engine's ``NotImplemented``, as OSRM's).
* ``isochrone``: exactly one coordinate (``/isochrone/v1/{profile}/{lon},{lat}``); exactly one of
  ``contours_minutes`` (``5,10,15``: travel times, passed to the engine in seconds with
  ``metric="duration"``) and ``contours_meters`` (``1000,2000``: route lengths, ``metric="distance"``),
  at most ``max_isochrone_contours`` values, each > 0 and at most ``max_isochrone_duration_s`` (or
  ``max_isochrone_distance_m``); ``contours_colors`` (``ff0000,00ff00``, one per contour),
  ``polygons`` (``true``: Polygon geometries, the default; ``false``: their rings as lines),
  ``denoise`` (0..1), ``generalize`` (metres >= 0), ``skip_waypoints``. The answer is a GeoJSON
  FeatureCollection (Valhalla's and Mapbox's shape) with ``"code": "Ok"`` and the snapped origin in
  ``waypoints``; a feature's ``properties.contour`` is in seconds or metres
  (:meth:`gpuroute.engine.Engine.isochrone`). In a JSON body the contours may be a list
  (``"contours_minutes": [5, 10]``).

Errors
------
Every error is one JSON line ``{"code": ..., "message": ...}``, HTTP 400 as ``osrm-routed`` answers
(except ``InternalError``, 500, and ``Timeout``, 504, which are not the client's fault):

* ``InvalidUrl``: not ``/{service}/{version}/{profile}/{coordinates}``, an empty coordinate list, a
  profile with other characters, a format other than ``json``.
* ``InvalidService``: a service other than route, table, nearest, trip, isochrone (or trip or
  isochrone with an engine that has no method of that name). ``InvalidVersion``: not ``v1``.
* ``InvalidQuery``: the URL or body does not parse: malformed coordinates or polyline, an option
  without ``=``, an option given twice, a value of the wrong syntax (``steps=maybe``,
  ``radiuses=abc``; numbers are ASCII: ``[+-]digits[.digits][e[+-]digits]``, as OSRM's grammar), a body
  that is not a JSON object or a form (``NaN`` and ``Infinity`` are no JSON: named with their place).
* ``InvalidOptions``: an unknown option (for this service), a per-coordinate option whose element
  count differs from the number of coordinates, too few coordinates (route: 2, nearest: exactly 1),
  a ``sources``/``destinations`` index out of range (as OSRM), an isochrone without contours or with
  both ``contours_minutes`` and ``contours_meters``.
* ``InvalidValue``: a well-formed value out of range: a coordinate outside [-180, 180] x [-90, 90]
  (``Invalid coordinate value.``), a bearing outside 0..360/0..180, a negative radius, ``number=0``,
  ``fallback_speed``/``scale_factor`` <= 0, an ``exclude``/``snapping`` the engine cannot do, a contour
  <= 0, ``denoise`` outside 0..1, a negative ``generalize``, a colour that is not ``rrggbb``; an
  ``avoid_polygons`` that is not JSON, not a valid GeoJSON (Multi)Polygon or over the limits; an
  ``avoid_ways`` entry that is not an integer or no way of the graph, or too many of them.
* ``TooBig``: more coordinates than ``max_locations_route`` (``max_locations_trip`` for a trip); a
  table of more than
  ``max_locations_table`` cells (sources x destinations, as the engine counts them: 10,000 is
  ``osrm-routed --max-table-size 100``); ``number`` above ``max_locations_nearest`` (the engine's
  meaning of that limit, ``osrm-routed --max-nearest-size``); ``alternatives`` above
  ``max_alternatives``; a body over ``max_body_bytes``; more contours than ``max_isochrone_contours``,
  a contour above ``max_isochrone_duration_s`` (seconds) or ``max_isochrone_distance_m``; a URL longer
  than the HTTP server's request-line limit (HTTP 414, :mod:`gpuroute.server.http`: ``gpuroute serve``
  sets it to ``max_body_bytes``).
* ``Forbidden`` (HTTP 403): a write from another web origin, or ``POST /customize`` switched off;
  ``UnsupportedMediaType`` (HTTP 415): a write whose body is not ``application/json`` (see
  :func:`create_app`).
* The engine's own codes (``NoSegment``, ``NoRoute``, ``NoTable``, ...): any exception the engine
  raises with a string ``code`` attribute (:class:`gpuroute.engine.EngineError`) is answered with
  that code and its message.

Limits and safety
-----------------
The limits are the engine's ``limits`` mapping, then :data:`DEFAULT_LIMITS` for the keys it lacks,
then the ``limits`` argument of :func:`create_app` (``None`` or a value <= 0 means no limit for a
count). The adapter checks them before calling the engine; the engine checks its own ``limits`` too, so
raising a limit above the engine's takes raising the engine's (``gpuroute serve`` does both).
``default_radius`` (metres; ``None``: unlimited, OSRM's default, as ``osrm-routed --default-radius``)
is the snapping radius of every coordinate whose ``radiuses`` element is empty or missing; an explicit
``unlimited`` stays unlimited. With it, a coordinate far from any road is answered ``NoSegment``. Nothing in a request names a file: the profile is ignored and every option is a number, a
flag or a word from a fixed list. The engine runs in worker threads (at most ``workers`` at a time,
an ``anyio.CapacityLimiter``), each request bounded by ``timeout_s``: past it the client gets 504 and
the thread is abandoned, finishing its query in the background (a running query cannot be stopped).
When the engine has a ``query_for_thread()`` method, each worker thread calls it once and keeps the
object it returns (the engine's per-thread query state), then calls ``route``/``table``/``nearest``
on that object; otherwise it calls the engine's methods directly. The JSON encoding also runs in the
worker thread. A table comes back from an engine whose ``table`` takes ``matrices`` as NumPy arrays
(``matrices="arrays"``), written to JSON without nested lists (the same bytes: ``null`` where no
route). Reads carry ``Access-Control-Allow-Origin: *``, as ``osrm-routed``'s do; a write
(``POST /customize``) never does, and is taken from the server's own origin or an allowed one only
(:func:`create_app`, Notes). With ``warm_up=True`` every service is run once at startup, so that no
request compiles anything (:mod:`gpuroute.server.warmup`).
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import math
import os
import re
import threading
from urllib.parse import parse_qsl, unquote

log = logging.getLogger("gpuroute.server")

#: The services served, each under ``/{service}/v1/...``.
SERVICES = ("route", "table", "nearest", "isochrone", "trip")

#: The one protocol version.
VERSION = "v1"

#: Limits used where the engine's ``limits`` has no value (see the module documentation).
DEFAULT_LIMITS = {
    "max_locations_route": 500,
    "max_locations_table": 10000,
    "max_locations_nearest": 100,
    "max_locations_trip": 100,
    "max_alternatives": 3,
    "max_isochrone_contours": 4,
    "max_isochrone_duration_s": 7200.0,
    "max_isochrone_distance_m": 100000.0,
    "default_radius": None,
    "max_body_bytes": 1 << 20,
    "timeout_s": 30.0,
    "workers": min(8, os.cpu_count() or 1),
}

_COMMON = frozenset({"bearings", "radiuses", "generate_hints", "hints", "approaches", "exclude", "snapping"})
_AVOID = frozenset({"avoid_polygons", "avoid_ways"})

#: The options each service takes.
OPTIONS = {
    "route": _COMMON | _AVOID | {"alternatives", "steps", "annotations", "geometries", "overview", "continue_straight",
                        "skip_waypoints"},
    "table": _COMMON | _AVOID | {"sources", "destinations", "annotations", "fallback_speed", "fallback_coordinate",
                        "scale_factor", "skip_waypoints"},
    "nearest": _COMMON | {"number"},
    "trip": _COMMON | _AVOID | {"roundtrip", "source", "destination", "steps", "annotations", "geometries", "overview",
                       "skip_waypoints"},
    "isochrone": _COMMON | _AVOID | {"contours_minutes", "contours_meters", "contours_colors", "polygons", "denoise",
                            "generalize", "skip_waypoints"},
}

ROUTE_ANNOTATIONS = ("nodes", "distance", "duration", "datasources", "weight", "speed")
TABLE_ANNOTATIONS = ("duration", "distance")
GEOMETRIES = ("polyline", "polyline6", "geojson")
OVERVIEWS = ("simplified", "full", "false")
APPROACHES = ("curb", "unrestricted")

_PROFILE = re.compile(r"[A-Za-z0-9_.\-]+")
# ASCII digits only (``\d`` would take other scripts' digits, which float() reads): OSRM's grammar, written
# so that a number can end at one place only (``[0-9]+\.?[0-9]*`` backtracked quadratically on a long run of
# digits that does not match: a 64 KiB URL cost tens of seconds of CPU)
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_FLOAT = re.compile(_NUMBER)
_INT = re.compile(r"[+-]?[0-9]+")
#: A whole ``lon,lat;lon,lat;...`` list (one match instead of two per coordinate), of :data:`_NUMBER`.
_COORDS = re.compile(rf"{_NUMBER},{_NUMBER}(?:;{_NUMBER},{_NUMBER})*")
_NAME = re.compile(r"[A-Za-z0-9_\-]+")
_FORMAT = re.compile(r"(?P<body>.*?)(?:\.(?P<fmt>[A-Za-z][A-Za-z0-9]*))?", re.S)
_CODE = re.compile(r"[A-Z][A-Za-z]+")


class OSRMError(Exception):
    """A request answered with an OSRM error: ``{"code": code, "message": message}``, HTTP ``status``.

    Parameters
    ----------
    code : str
        The OSRM code (``InvalidUrl``, ``InvalidQuery``, ``InvalidOptions``, ``InvalidValue``, ``TooBig``,
        ...).
    message : str
        One line for people.
    status : int, default 400
        The HTTP status.
    """

    def __init__(self, code, message, status=400):
        super().__init__(message)
        self.code = code
        self.message = " ".join(str(message).split())
        self.status = status


@dataclasses.dataclass
class ServiceCall:
    """A parsed request: the engine method to call and its arguments.

    Attributes
    ----------
    service : str
        ``route``, ``table`` or ``nearest`` (the engine method of that name).
    profile : str
        The profile named in the URL (ignored).
    coordinates : list of (float, float)
        ``(lon, lat)`` in degrees.
    kwargs : dict
        Keyword arguments for the engine method (only the options the request gave).
    generate_hints : bool
        False: drop ``hint`` from the answer's waypoints.
    skip_waypoints : bool
        True: drop the answer's ``waypoints`` (``sources``/``destinations`` for a table).
    """

    service: str
    profile: str
    coordinates: list
    kwargs: dict
    generate_hints: bool = True
    skip_waypoints: bool = False


# --------------------------------------------------------------------------------------------------
# URL and coordinates


def split_target(target):
    """Split a request target (``/service/version/profile/coordinates[.fmt][?query]``, not yet
    percent-decoded) into ``(service, version, profile, coordinates_or_None, query)``.

    The coordinates are percent-decoded and their ``.fmt`` suffix checked (only ``json``); the query is
    returned raw. A ``?`` inside ``polyline(...)`` does not start the query.

    Raises
    ------
    OSRMError
        ``InvalidUrl``.
    """
    path, sep, query = target.partition("?")
    segs = path.split("/", 4)
    if len(segs) < 4 or segs[0] != "" or not all(segs[1:4]):
        raise OSRMError("InvalidUrl", f"URL {_clip(target)!r} is not /{{service}}/{{version}}/{{profile}}/"
                                      "{coordinates}")
    service, version, profile = (unquote(s) for s in segs[1:4])
    if len(segs) == 4:
        return service, version, profile, None, query
    rest = unquote(segs[4])
    if rest.startswith(("polyline(", "polyline6(")) and ")" not in rest and sep and ")" in query:
        head, _, tail = query.partition(")")  # a bare '?' of the polyline alphabet split the target
        fmt, _, query = tail.partition("?")
        rest = rest + "?" + unquote(head) + ")" + unquote(fmt)
    m = _FORMAT.fullmatch(rest)
    rest, fmt = m["body"], m["fmt"]
    if fmt is not None and fmt != "json":
        raise OSRMError("InvalidUrl", f"format {fmt!r} is not supported (only json)")
    if not rest:
        return service, version, profile, None, query
    return service, version, profile, rest, query


def parse_coordinates(text):
    """``[(lon, lat), ...]`` from ``lon,lat;lon,lat`` or ``polyline(...)``/``polyline6(...)``.

    Raises
    ------
    OSRMError
        ``InvalidQuery`` (malformed) or ``InvalidValue`` (a position outside [-180, 180] x [-90, 90]).
    """
    for prefix, precision in (("polyline(", 5), ("polyline6(", 6)):
        if text.startswith(prefix):
            if not text.endswith(")") or len(text) == len(prefix) + 1:
                raise OSRMError("InvalidQuery", f"malformed {prefix[:-1]}(...) coordinates")
            coords = _decode_polyline(text[len(prefix):-1], precision)
            break
    else:
        if _COORDS.fullmatch(text):  # well-formed: numbers in pairs (else the loop names the bad item)
            v = list(map(float, text.replace(";", ",").split(",")))
            coords = list(zip(v[0::2], v[1::2], strict=True))
        else:
            coords = None
    if coords is None:
        coords = []
        pos = 0
        for item in text.split(";"):
            parts = item.split(",")
            if len(parts) != 2 or not all(_FLOAT.fullmatch(p) for p in parts):
                raise OSRMError("InvalidQuery", f"coordinates malformed close to position {pos}: expected "
                                                f"lon,lat;lon,lat..., got {_clip(item)!r}")
            coords.append((float(parts[0]), float(parts[1])))
            pos += len(item) + 1
    for lon, lat in coords:
        if not (math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90):
            raise OSRMError("InvalidValue", f"Invalid coordinate value. ({lon:g},{lat:g}: longitude must be in "
                                            "[-180, 180] and latitude in [-90, 90], in that order)")
    return coords


def _decode_polyline(text, precision):
    import polyline

    if not text or any(not 63 <= ord(c) <= 126 for c in text):
        raise OSRMError("InvalidQuery", "malformed polyline: characters outside the polyline alphabet")
    try:
        pts = polyline.decode(text, precision)
    except Exception:  # the package raises IndexError/ValueError on a truncated string
        raise OSRMError("InvalidQuery", "malformed polyline: the encoding ends inside a number (truncated or "
                                        "not a polyline)") from None
    if not pts:
        raise OSRMError("InvalidQuery", "malformed polyline: no coordinates")
    return [(float(lon), float(lat)) for lat, lon in pts]


def parse_query(query):
    """``{option: value}`` from a raw query string (``&``-separated ``option=value``, percent-decoded;
    ``+`` stays ``+``).

    Raises
    ------
    OSRMError
        ``InvalidQuery``: a pair without ``=``, an option given twice.
    """
    out = {}
    for pair in query.split("&"):
        if not pair:
            continue
        key, eq, value = pair.partition("=")
        key = unquote(key)
        if not eq:
            raise OSRMError("InvalidQuery", f"query string malformed: {_clip(key)!r} has no '=value'")
        if key in out:
            raise OSRMError("InvalidQuery", f"option {_clip(key)!r} given twice")
        out[key] = unquote(value)
    return out


# --------------------------------------------------------------------------------------------------
# POST bodies

_COMMA_LISTS = frozenset({"annotations", "exclude", "contours_minutes", "contours_meters", "contours_colors",
                          "avoid_ways"})


def parse_body(body, content_type):
    """``{option: value}`` (values as the query string writes them) from a POST body.

    Parameters
    ----------
    body : bytes
    content_type : str
        ``application/json`` or ``application/x-www-form-urlencoded``; anything else is read as JSON when
        the body starts with ``{``, as a form otherwise.

    Raises
    ------
    OSRMError
        ``InvalidQuery``: not UTF-8, not a JSON object, a value of no meaning, an option given twice.
    """
    ctype = (content_type or "").split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise OSRMError("InvalidQuery", "the body is not UTF-8") from None
    if not text.strip():
        return {}
    if ctype == "application/json" or (ctype != "application/x-www-form-urlencoded"
                                       and text.lstrip().startswith("{")):
        obj = loads_json(body)
        if not isinstance(obj, dict):
            raise OSRMError("InvalidQuery", "the JSON body must be an object of options")
        return {str(k): _json_value(k, v) for k, v in obj.items() if v is not None}
    out = {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise OSRMError("InvalidQuery", "the body is not a form (option=value&...)") from None
    for k, v in pairs:
        if k in out:
            raise OSRMError("InvalidQuery", f"option {_clip(k)!r} given twice")
        out[k] = v
    return out


class _NotFinite(str):
    """A JSON number token that is no finite double (``NaN``, ``Infinity``, ``1e400``), as written."""


def loads_json(raw):
    """The JSON value of ``raw`` (bytes or str; orjson), an out-of-range number named with where it is.

    Raises
    ------
    OSRMError
        ``InvalidQuery``: not JSON, or ``NaN``/``Infinity`` (not JSON numbers); ``InvalidValue``: a number
        past the double range (``1e400``). The message names the value and its place
        (``updates[0].cost``).
    """
    import orjson

    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        err = e
    # orjson refuses NaN, Infinity and 1e400 alike: the standard parser says which value, and where
    import json

    def number(token):
        x = float(token)
        return x if math.isfinite(x) else _NotFinite(token)

    try:
        obj = json.loads(raw, parse_constant=_NotFinite, parse_float=number)
    except (ValueError, RecursionError):
        raise OSRMError("InvalidQuery", f"the body is not JSON: {err}") from None
    found = _not_finite(obj, "")
    if found is None:  # taken by the standard parser (integers past 64 bits): its reading stands
        return obj
    where, token = found
    where = f"{where}: " if where else ""
    if token.lstrip("+-") in ("NaN", "Infinity"):
        raise OSRMError("InvalidQuery", f"{where}{token} is not a JSON number (numbers must be finite)")
    raise OSRMError("InvalidValue", f"{where}{_clip(token)} is out of the range of a number (a finite double)")


def _not_finite(obj, where):
    """``(place, token)`` of the first :class:`_NotFinite` in a parsed JSON value, else None."""
    stack = [(obj, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, _NotFinite):
            return at, str(v)
        if isinstance(v, dict):
            stack.extend((x, f"{at}.{k}" if at else str(k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, f"{at}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def _json_value(key, v):
    """A JSON option value written as the query string writes it."""
    def scalar(x):
        if x is None:
            return ""
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, (int, float, str)):
            return repr(x) if isinstance(x, float) else str(x)
        raise OSRMError("InvalidQuery", f"option {_clip(key)!r}: unexpected JSON value {_clip(x)!r}")

    if key == "avoid_polygons" and isinstance(v, (dict, list)):  # GeoJSON: its JSON text, as a URL writes it
        import orjson

        return orjson.dumps(v).decode()
    if isinstance(v, list):
        sep = "," if key in _COMMA_LISTS else ";"
        return sep.join(",".join(scalar(y) for y in x) if isinstance(x, list) else scalar(x) for x in v)
    return scalar(v)


# --------------------------------------------------------------------------------------------------
# Options


def _bool(name, v):
    if v == "true":
        return True
    if v == "false":
        return False
    raise OSRMError("InvalidQuery", f"{name}={_clip(v)!r}: expected true or false")


def _float(name, v):
    if not _FLOAT.fullmatch(v):
        raise OSRMError("InvalidQuery", f"{name}: {_clip(v)!r} is not a number")
    return float(v)


def _int(name, v):
    if not _INT.fullmatch(v):
        raise OSRMError("InvalidQuery", f"{name}: {_clip(v)!r} is not an integer")
    return int(v)


def _word(name, v, allowed):
    if v not in allowed:
        raise OSRMError("InvalidValue", f"{name}={_clip(v)!r}: expected one of {', '.join(allowed)}")
    return v


def _per_coordinate(name, v, n, parse):
    items = v.split(";")
    if len(items) != n:
        raise OSRMError("InvalidOptions", f"Number of elements in {name} size {len(items)} does not match "
                                          f"coordinate size {n}")
    return [None if x == "" else parse(x) for x in items]


def _radius(x):
    if x == "unlimited":
        return math.inf  # None is left for an empty element: the default radius
    r = _float("radiuses", x)
    if r < 0 or not math.isfinite(r):
        raise OSRMError("InvalidValue", f"radiuses: {x!r} is not a radius in metres >= 0 (or unlimited)")
    return r


def _bearing(x):
    parts = x.split(",")
    if len(parts) != 2:
        raise OSRMError("InvalidQuery", f"bearings: {_clip(x)!r} is not value,range")
    value, rng = (_float("bearings", p) for p in parts)
    if not (0 <= value <= 360 and 0 <= rng <= 180):
        raise OSRMError("InvalidValue", f"bearings: {x!r} out of range (value 0..360, range 0..180)")
    return tuple(int(b) if b == int(b) else b for b in (value, rng))


def _approach(x):
    return _word("approaches", x, APPROACHES)


def _indices(name, v, n):
    if v == "all":
        return None
    out = []
    for x in v.split(";"):
        i = _int(name, x)
        if not 0 <= i < n:
            raise OSRMError("InvalidOptions", f"{name}: index {i} is out of range (0 <= index < {n}, the "
                                              "number of coordinates)")
        out.append(i)
    return out


def _names(name, v, allowed):
    items = v.split(",")
    for x in items:
        if x not in allowed:
            raise OSRMError("InvalidValue", f"{name}: {_clip(x)!r} is not one of {', '.join(allowed)}")
    return items


def _limit(limits, key):
    v = limits.get(key)
    return None if v is None or v <= 0 else v


def parse_request(service, profile, coordinates, options, limits=None):
    """Check one request and turn it into a :class:`ServiceCall`.

    Parameters
    ----------
    service, profile : str
        From the URL (service and version already checked).
    coordinates : str
        As the URL writes them (``lon,lat;...`` or ``polyline(...)``).
    options : dict of str to str
        Option name to value, as the query string writes them.
    limits : dict, optional
        :data:`DEFAULT_LIMITS`' keys (missing keys take those values).

    Returns
    -------
    ServiceCall

    Raises
    ------
    OSRMError
        See the module documentation for the codes.
    """
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    if not _PROFILE.fullmatch(profile):
        raise OSRMError("InvalidUrl", f"profile {_clip(profile)!r}: letters, digits, '_', '-' and '.' only")
    unknown = sorted(set(options) - OPTIONS[service])
    if unknown:
        raise OSRMError("InvalidOptions", f"unknown option{'s' if len(unknown) > 1 else ''} "
                                          f"{', '.join(map(repr, map(_clip, unknown)))} for service {service} "
                                          f"(options: {', '.join(sorted(OPTIONS[service]))})")
    coords = parse_coordinates(coordinates)
    n = len(coords)
    if service in ("route", "trip") and n < 2:
        raise OSRMError("InvalidOptions", "Number of coordinates needs to be at least two.")
    if service == "trip" and _limit(limits, "max_locations_trip") and n > limits["max_locations_trip"]:
        raise OSRMError("TooBig", f"Number of entries {n} is higher than current maximum "
                                  f"({limits['max_locations_trip']})")
    if service in ("nearest", "isochrone") and n != 1:
        raise OSRMError("InvalidOptions", "Only one input coordinate is supported")
    if service == "route" and _limit(limits, "max_locations_route") and n > limits["max_locations_route"]:
        raise OSRMError("TooBig", f"Number of entries {n} is higher than current maximum "
                                  f"({limits['max_locations_route']})")

    kw = {}
    call = ServiceCall(service, profile, coords, kw)
    o = dict(options)
    radiuses = _per_coordinate("radiuses", o.pop("radiuses"), n, _radius) if "radiuses" in o else None
    default_radius = _limit(limits, "default_radius")
    if default_radius and radiuses is None:
        radiuses = [None] * n
    if radiuses is not None:
        kw["radiuses"] = [None if r == math.inf else default_radius if r is None else r for r in radiuses]
    if "bearings" in o:
        kw["bearings"] = _per_coordinate("bearings", o.pop("bearings"), n, _bearing)
    if "approaches" in o:
        kw["approaches"] = _per_coordinate("approaches", o.pop("approaches"), n, _approach)
    if "hints" in o:  # accepted and ignored (the count is checked, as OSRM does)
        _per_coordinate("hints", o.pop("hints"), n, str)
    if "generate_hints" in o:
        call.generate_hints = _bool("generate_hints", o.pop("generate_hints"))
    if "skip_waypoints" in o:
        call.skip_waypoints = _bool("skip_waypoints", o.pop("skip_waypoints"))
    if "exclude" in o:
        v = o.pop("exclude")
        if v:
            items = v.split(",")
            if not all(_NAME.fullmatch(x) for x in items):
                raise OSRMError("InvalidQuery", f"exclude={_clip(v)!r}: expected class,class,...")
            kw["exclude"] = items
    if "snapping" in o:
        if _word("snapping", o.pop("snapping"), ("default", "any")) == "any":
            kw["snapping"] = "any"
    _avoid_options(o, kw)

    if service == "route":
        _route_options(o, kw, limits)
    elif service == "table":
        _table_options(o, kw, n, limits)
    elif service == "isochrone":
        _isochrone_options(o, kw, limits)
    elif service == "trip":
        _trip_options(o, kw, limits)
    else:
        if "number" in o:
            number = _int("number", o.pop("number"))
            if number < 1:
                raise OSRMError("InvalidValue", f"number={number}: must be >= 1")
            top = _limit(limits, "max_locations_nearest")
            if top and number > top:
                raise OSRMError("TooBig", f"Number of results {number} is higher than current maximum ({top})")
            kw["number"] = number
    assert not o, o
    return call


def _route_options(o, kw, limits):
    if "alternatives" in o:
        v = o.pop("alternatives")
        alt = _bool("alternatives", v) if v in ("true", "false") else _int("alternatives", v)
        if alt is not True and alt is not False:
            if alt < 0:
                raise OSRMError("InvalidValue", f"alternatives={alt}: must be true, false or a count >= 0")
            top = _limit(limits, "max_alternatives")
            if top and alt > top:
                raise OSRMError("TooBig", f"Requested number of alternatives {alt} is higher than current "
                                          f"maximum ({top})")
            alt = alt if alt > 0 else False
        kw["alternatives"] = alt
    if "steps" in o:
        kw["steps"] = _bool("steps", o.pop("steps"))
    if "annotations" in o:
        v = o.pop("annotations")
        kw["annotations"] = _bool("annotations", v) if v in ("true", "false") else _names(
            "annotations", v, ROUTE_ANNOTATIONS)
    if "geometries" in o:
        kw["geometries"] = _word("geometries", o.pop("geometries"), GEOMETRIES)
    if "overview" in o:
        kw["overview"] = _word("overview", o.pop("overview"), OVERVIEWS)
    if "continue_straight" in o:
        v = o.pop("continue_straight")
        kw["continue_straight"] = None if v == "default" else _bool("continue_straight", v)


def _trip_options(o, kw, limits):
    """``/trip``: ``roundtrip``, ``source`` (any, first), ``destination`` (any, last) and the route options
    that apply (``steps``, ``annotations``, ``geometries``, ``overview``); the combination itself is the
    engine's to judge (``NotImplemented``)."""
    if "roundtrip" in o:
        kw["roundtrip"] = _bool("roundtrip", o.pop("roundtrip"))
    if "source" in o:
        kw["source"] = _word("source", o.pop("source"), ("any", "first"))
    if "destination" in o:
        kw["destination"] = _word("destination", o.pop("destination"), ("any", "last"))
    _route_options(o, kw, limits)


def _table_options(o, kw, n, limits):
    if "sources" in o:
        kw["sources"] = _indices("sources", o.pop("sources"), n)
    if "destinations" in o:
        kw["destinations"] = _indices("destinations", o.pop("destinations"), n)
    if "annotations" in o:
        kw["annotations"] = tuple(_names("annotations", o.pop("annotations"), TABLE_ANNOTATIONS))
    for name in ("fallback_speed", "scale_factor"):
        if name in o:
            x = _float(name, o.pop(name))
            if not (x > 0 and math.isfinite(x)):
                raise OSRMError("InvalidValue", f"{name} must be > 0")
            kw[name] = x
    if "fallback_coordinate" in o:
        if _word("fallback_coordinate", o.pop("fallback_coordinate"), ("input", "snapped")) == "snapped":
            kw["fallback_coordinate"] = "snapped"
    top = _limit(limits, "max_locations_table")
    n_src = n if kw.get("sources") is None else len(kw["sources"])
    n_dst = n if kw.get("destinations") is None else len(kw["destinations"])
    if top and n_src * n_dst > top:
        raise OSRMError("TooBig", f"Too many table coordinates ({n_src} x {n_dst} = {n_src * n_dst} cells; at "
                                  f"most {top})")


def _isochrone_options(o, kw, limits):
    given = [k for k in ("contours_minutes", "contours_meters") if k in o]
    if len(given) != 1:
        raise OSRMError("InvalidOptions", "isochrone needs exactly one of contours_minutes and contours_meters"
                        + (" (both given)" if given else ""))
    name = given[0]
    values = [_float(name, x) for x in o.pop(name).split(",")]
    top = _limit(limits, "max_isochrone_contours")
    if top and len(values) > top:
        raise OSRMError("TooBig", f"Number of contours {len(values)} is higher than current maximum ({top})")
    minutes = name == "contours_minutes"
    scale, unit = (60.0, "s") if minutes else (1.0, "m")
    top = _limit(limits, "max_isochrone_duration_s" if minutes else "max_isochrone_distance_m")
    for x in values:
        if not (x > 0 and math.isfinite(x)):
            raise OSRMError("InvalidValue", f"{name}: {x:g} is not a contour > 0")
        if top and x * scale > top:
            raise OSRMError("TooBig", f"{name}: {x:g} ({x * scale:g} {unit}) is higher than current maximum "
                                      f"({top:g} {unit})")
    kw["contours"] = [x * scale for x in values]
    kw["metric"] = "duration" if minutes else "distance"
    if "contours_colors" in o:
        colors = o.pop("contours_colors").split(",")
        if len(colors) != len(values):
            raise OSRMError("InvalidOptions", f"contours_colors has {len(colors)} colours for {len(values)} "
                                              "contours")
        if not all(re.fullmatch(r"#?[0-9A-Fa-f]{6}", c) for c in colors):
            raise OSRMError("InvalidValue", f"contours_colors={_clip(','.join(colors))!r}: expected rrggbb,...")
        kw["colors"] = colors
    if "polygons" in o:
        kw["polygons"] = _bool("polygons", o.pop("polygons"))
    if "denoise" in o:
        x = _float("denoise", o.pop("denoise"))
        if not 0 <= x <= 1:
            raise OSRMError("InvalidValue", f"denoise={x:g}: must be in [0, 1]")
        kw["denoise"] = x
    if "generalize" in o:
        x = _float("generalize", o.pop("generalize"))
        if not (x >= 0 and math.isfinite(x)):
            raise OSRMError("InvalidValue", f"generalize={x:g}: must be a number of metres >= 0")
        kw["generalize"] = x


def _avoid_options(o, kw):
    """``avoid_polygons`` (JSON text -> the parsed value; the engine checks the geometry) and
    ``avoid_ways`` (``id,id,...`` -> list of int); every error ``InvalidValue`` naming the option."""
    if "avoid_polygons" in o:
        v = o.pop("avoid_polygons")
        if v.strip():
            try:
                obj = loads_json(v.encode())
            except OSRMError as e:
                raise OSRMError("InvalidValue", f"avoid_polygons: not a GeoJSON object ({e.message})") from None
            if not isinstance(obj, dict):
                raise OSRMError("InvalidValue", f"avoid_polygons: expected a GeoJSON Polygon or MultiPolygon object, "
                                                f"got {_clip(v)!r}")
            kw["avoid_polygons"] = obj
    if "avoid_ways" in o:
        v = o.pop("avoid_ways")
        if v:
            items = v.split(",")
            bad = [x for x in items if not _INT.fullmatch(x)]
            if bad:
                raise OSRMError("InvalidValue", f"avoid_ways: {_clip(bad[0])!r} is not an OSM way id (expected "
                                                "id,id,...)")
            kw["avoid_ways"] = [int(x) for x in items]


#: Keyword arguments that only some engines take; a request that needs one is refused by the others.
OPTIONAL_KWARGS = {"exclude": "Exclude flag combination is not supported.",
                   "avoid_polygons": "avoid_polygons is not supported by this engine",
                   "avoid_ways": "avoid_ways is not supported by this engine",
                   "snapping": "snapping=any is not supported by this engine",
                   "fallback_coordinate": "fallback_coordinate=snapped is not supported by this engine"}


def _clip(s, n=60):
    s = str(s)
    return s if len(s) <= n else s[:n] + "..."


# --------------------------------------------------------------------------------------------------
# The application


def _accepted_kwargs(fn):
    """The keyword names ``fn`` takes (``None``: any, it has ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


def _engine_error(e):
    """``(code, message)`` for an exception the engine raised with an OSRM code, else None."""
    code = getattr(e, "code", None)
    if isinstance(code, str) and _CODE.fullmatch(code):
        msg = getattr(e, "message", None) or (e.args[1] if len(e.args) > 1 else str(e)) or code
        return code, msg
    return None


def _strip(res, call):
    """The answer without hints (``generate_hints=false``) or waypoints (``skip_waypoints=true``)."""
    if call.generate_hints and not call.skip_waypoints:
        return res
    res = dict(res)
    for key in ("waypoints", "sources", "destinations"):
        if key not in res:
            continue
        if call.skip_waypoints and call.service != "nearest":
            del res[key]
        elif not call.generate_hints and isinstance(res[key], list):
            res[key] = [{k: v for k, v in w.items() if k != "hint"} if isinstance(w, dict) else w
                        for w in res[key]]
    return res


def _json_default(obj):
    if hasattr(obj, "tolist"):  # NumPy scalars and arrays orjson does not take natively
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def _matrix_fragments(res):
    """A table answer whose matrices came as arrays, with them written to JSON already
    (:func:`gpuroute.engine.osrm.matrix_json`: orjson's bytes, by a parallel compiled writer) and handed to
    orjson as ``orjson.Fragment`` (orjson >= 3.10; before, orjson writes the arrays itself)."""
    import numpy as np
    import orjson

    if not hasattr(orjson, "Fragment"):
        return res
    from ..engine.osrm import matrix_json

    out = dict(res)
    for key in ("durations", "distances"):
        v = out.get(key)
        if isinstance(v, np.ndarray) and v.ndim == 2:
            out[key] = orjson.Fragment(matrix_json(v))
    return out


def encode(obj):
    """JSON bytes of ``obj`` (orjson; NumPy arrays and scalars; NaN and infinities become ``null``)."""
    import orjson

    return orjson.dumps(obj, default=_json_default, option=orjson.OPT_SERIALIZE_NUMPY)


def create_app(engine, *, limits=None, allow_customize=False, web_assets=None, allow_origins=(), warm_up=False):
    """The OSRM v5-compatible Starlette application over ``engine``.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
        Anything with ``route``, ``table`` and ``nearest`` methods as :class:`gpuroute.engine.Engine`'s
        (and optionally ``limits`` and ``query_for_thread()``).
    limits : dict, optional
        Overrides of the engine's ``limits`` and of :data:`DEFAULT_LIMITS` (``max_locations_route``,
        ``max_locations_table``, ``max_locations_nearest``, ``max_alternatives``, ``max_body_bytes``,
        ``timeout_s``, ``workers``); None or <= 0 lifts a count limit.
    allow_customize : bool, default False
        Serve ``POST /customize`` (live traffic: it changes what every later request is answered with,
        so it is an administrator's endpoint). Off: it answers HTTP 403 ``{"code": "Forbidden"}``.
        ``gpuroute serve`` turns it on for loopback binds unless ``--no-allow-customize``, and off for
        other binds unless ``--allow-customize``.
    web_assets : path-like, optional
        Where the web page's third-party JavaScript lies (default
        :func:`gpuroute.server.web.assets_dir`: ``$GPUROUTE_WEB_ASSETS``, else the fetched ``.venv/web``).
    allow_origins : sequence of str, optional
        Web origins (``scheme://host[:port]``, e.g. ``https://map.example``) whose pages may write
        (``POST /customize``) besides the server's own; ``gpuroute serve --allow-origin``. See Notes.
    warm_up : bool, default False
        Run every service once at the application's startup (its ASGI lifespan, which uvicorn runs before
        it listens), so that no request compiles anything (:func:`gpuroute.server.warm_up`); until then
        ``GET /health`` answers 503 ``"status": "warming"``.

    Returns
    -------
    starlette.applications.Starlette
        Its ``state.limits`` holds the limits in force, ``state.engine`` the engine,
        ``state.allow_customize`` the flag, ``state.allow_origins`` the normalized origins,
        ``state.ready`` whether the warm-up is done (True at once without ``warm_up``). ``GET /health``
        answers ``{"status": "ok", "services": [...] (those the engine has a method for), "version":
        "v1", "limits": {...}, "customize": bool}`` (``customize``: ``POST /customize`` is on and the
        engine can customize: it has a ``customize`` method and, where it has an ``overlay`` attribute,
        an overlay), plus ``"engine": engine.info`` where the engine has that mapping (property or
        method) and ``"capabilities"`` (which algorithm serves which service,
        :attr:`gpuroute.engine.Engine.capabilities`) and ``"exclude"`` (the classes and the ``exclude=``
        combinations served, :meth:`gpuroute.engine.exclude.Excluder.info`) where that mapping has them; HTTP 503 with
        ``"status": "warming"`` while the warm-up runs. ``GET /`` is the web page (an offline map,
        routes, isochrones, traffic), with ``/network``, ``/web/...``, ``/vendor/...`` and
        ``/THIRD-PARTY`` (:mod:`gpuroute.server.web`).

    Raises
    ------
    ValueError
        An ``allow_origins`` entry that is not an origin (``*``, a path, a scheme other than http(s)).

    Notes
    -----
    ``POST /customize`` takes a JSON object (at most ``max_body_bytes``): ``{"updates": [{"arc": id,
    "cost": c}, ...]}``, ``{"updates": [{"from": osm_node_id, "to": osm_node_id, "speed_kmh": v},
    ...]}`` or ``{"metric": "time" | "distance" | "time-uturn"}``, passed to ``engine.customize`` in a
    worker thread; it answers ``{"code": "Ok", "seconds": ..., "cells": [...], ...}``, or the engine's
    error (``InvalidValue`` naming the bad update, ``InvalidOptions``, ``NotImplemented`` without an
    overlay) with HTTP 400; a body that is not a JSON object is ``InvalidQuery``. A customization that
    runs past ``timeout_s`` is answered 504 but still completes (the swap is atomic either way).

    Writes and other web pages: reads (every OSRM service, ``/health``, ``/network``) answer any origin
    (``Access-Control-Allow-Origin: *``, as ``osrm-routed``; ``OPTIONS`` preflights too). A write is
    refused with 403 ``Forbidden`` when its ``Origin`` header (which browsers send with every POST) is
    neither the server's own (the scheme and ``Host`` the request came with) nor in ``allow_origins``,
    or, on a server listening on a loopback address, when a page's ``Host`` is a name other than
    ``localhost`` (a DNS-rebinding page); and with 415 ``UnsupportedMediaType`` unless its
    ``Content-Type`` is ``application/json`` (a page can send text/plain or a form to another origin
    without asking first, never JSON). A write's answer never carries a wildcard: an allowed foreign
    origin gets its own name back; its preflight (``OPTIONS /customize``) is answered 204 for allowed
    origins and 403 otherwise. Clients without an ``Origin`` (curl, scripts) are not browsers: the
    origin rule does not apply to them, the JSON rule does.
    """
    import contextlib

    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    lim = dict(DEFAULT_LIMITS)
    lim.update({k: v for k, v in dict(getattr(engine, "limits", None) or {}).items()})
    lim.update(limits or {})
    origins = []
    for o in allow_origins or ():
        n = normalize_origin(o)
        if n is None:
            raise ValueError(f"allowed origin {o!r} is not a web origin: expected scheme://host[:port] with "
                             "scheme http or https, no path (e.g. https://map.example)")
        origins.append(n)
    origins = tuple(dict.fromkeys(origins))
    server = _Server(engine, lim)
    can_customize = bool(allow_customize) and _can_customize(engine)

    async def health(request):
        ready = bool(app.state.ready)
        body = {"status": "ok" if ready else "warming", "services": list(server.services), "version": VERSION,
                "limits": lim, "customize": can_customize}
        if not ready:
            body["message"] = "compiling and running every service once before serving (the first start after " \
                              "an install takes longest)"
        try:  # gpuroute's Engine: graph name, sizes, profile, weight (a property or a method)
            info = getattr(engine, "info", None)
            info = info() if callable(info) else info
            if isinstance(info, dict):
                body["engine"] = info
                if "capabilities" in info:
                    body["capabilities"] = info["capabilities"]
                if "exclude" in info:  # the classes and the exclude= combinations served
                    body["exclude"] = info["exclude"]
        except Exception:  # the health check answers even so
            log.exception("engine.info failed")
        return Response(encode(body), status_code=200 if ready else 503, media_type="application/json",
                        headers=_HEADERS)

    async def osrm(request):
        if request.method == "OPTIONS":  # a read's preflight: open to every origin, as the read itself
            return Response(status_code=204, headers=_READ_PREFLIGHT)
        try:
            status, body = await server.handle(request)
        except OSRMError as e:
            status, body = e.status, encode({"code": e.code, "message": e.message})
        return Response(body, status_code=status, media_type="application/json", headers=_HEADERS)

    async def customize(request):
        origin = request.headers.get("origin")
        headers = {"Vary": "Origin"}
        try:
            refusal = _write_refusal(request, origins)
            if refusal is not None:
                raise refusal
            if origin is not None:  # own or allowed (else refused above): named, never a wildcard
                headers["Access-Control-Allow-Origin"] = origin
            if request.method == "OPTIONS":
                return Response(status_code=204, headers={**headers, **_WRITE_PREFLIGHT})
            _require_json(request)
            if not allow_customize:
                raise OSRMError("Forbidden", "POST /customize is off: start gpuroute serve with --allow-customize "
                                             "(the default on loopback binds)", status=403)
            status, body = await server.customize(request)
        except OSRMError as e:
            status, body = e.status, encode({"code": e.code, "message": e.message})
        return Response(body, status_code=status, media_type="application/json", headers=headers)

    from .web import routes as web_routes

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if not app.state.ready:
            import anyio.to_thread

            from .warmup import warm_up as run_warm_up

            await anyio.to_thread.run_sync(run_warm_up, app)
        yield

    app = Starlette(routes=[Route("/health", health, methods=["GET"]),
                            Route("/customize", customize, methods=["POST", "OPTIONS"]),
                            *web_routes(engine, allow_customize=can_customize, assets=web_assets),
                            Route("/{path:path}", osrm, methods=["GET", "POST", "OPTIONS"])],
                    lifespan=lifespan)
    app.state.allow_customize = bool(allow_customize)
    app.state.allow_origins = origins
    app.state.limits = lim
    app.state.engine = engine
    app.state.adapter = server
    app.state.can_customize = can_customize
    app.state.ready = not warm_up
    app.state.warm_report = None
    return app


_HEADERS = {"Access-Control-Allow-Origin": "*"}
_READ_PREFLIGHT = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                   "Access-Control-Allow-Headers": "Content-Type", "Access-Control-Max-Age": "600"}
_WRITE_PREFLIGHT = {"Access-Control-Allow-Methods": "POST, OPTIONS", "Access-Control-Allow-Headers": "Content-Type",
                    "Access-Control-Max-Age": "600"}
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>\[[0-9a-f:.]+\]|[a-z0-9._~\-]+)(?::(?P<port>[0-9]{1,5}))?/?",
                     re.ASCII)


def normalize_origin(text, *, scheme=None):
    """``scheme://host[:port]`` of a web origin, lower case, without a default port (80 for http, 443 for
    https); None when ``text`` is no http(s) origin (``null``, ``*``, a path, user info, a query).

    With ``scheme``, ``text`` is a ``Host`` header (``host[:port]``) of a request that came over it.
    """
    if not isinstance(text, str):
        return None
    text = text.strip().lower()
    if scheme is not None:
        text = f"{scheme.lower()}://{text}"
    m = _ORIGIN.fullmatch(text)
    if m is None or (m["port"] is not None and not 0 < int(m["port"]) < 65536):
        return None
    port = m["port"]
    if port is None or port == _DEFAULT_PORTS[m["scheme"]]:
        return f"{m['scheme']}://{m['host']}"
    return f"{m['scheme']}://{m['host']}:{int(port)}"


def _is_loopback_address(host):
    import ipaddress

    try:
        return ipaddress.ip_address(str(host).strip("[]")).is_loopback
    except ValueError:
        return False


def _write_refusal(request, allowed):
    """The :class:`OSRMError` (403 ``Forbidden``) a write with ``request``'s headers is refused with, or
    None: see :func:`create_app`'s Notes. ``allowed``: normalized origins."""
    origin = request.headers.get("origin")
    if origin is None:  # not a browser's page: curl, scripts, another server
        return None
    got = normalize_origin(origin)
    if got is not None and got in allowed:
        return None
    scheme = request.scope.get("scheme") or "http"
    host = request.headers.get("host") or ""
    own = normalize_origin(host, scheme=scheme)
    hint = ("gpuroute serve --allow-origin URL allows another site's pages to write; reads (route, table, ...) "
            "are open to every origin")
    if got is None or got != own:
        return OSRMError("Forbidden", f"cross-origin write refused: Origin {_clip(origin)!r} is not this server's "
                                      f"own ({own or 'unknown: no Host header'}) ({hint})", status=403)
    server = request.scope.get("server") or ()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    if server and _is_loopback_address(server[0]) and not (
            _is_loopback_address(name) or name == "localhost" or name.endswith(".localhost")):
        import ipaddress

        try:
            ipaddress.ip_address(name)
            return None  # an address literal is no re-pointed name
        except ValueError:
            pass
        return OSRMError("Forbidden", f"write refused: this server listens on loopback but the page came as "
                                      f"{_clip(host)!r} (a name re-pointed at this machine?); use "
                                      f"http://localhost or http://127.0.0.1, or {hint}", status=403)
    return None


def _require_json(request):
    """415 ``UnsupportedMediaType`` unless the request says its body is ``application/json``."""
    ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise OSRMError("UnsupportedMediaType", f"a write needs Content-Type: application/json (got "
                                                f"{_clip(ctype) or 'none'!r})", status=415)


def _can_customize(engine):
    """Whether ``engine`` can answer ``customize``: it has the method, and an overlay where it has that
    attribute (gpuroute's Engine without a dataset directory answers NotImplemented)."""
    if not callable(getattr(engine, "customize", None)):
        return False
    return getattr(engine, "overlay", True) is not None


def _abandon_kwarg():
    """anyio's keyword that lets a timed-out request return while its thread runs on (anyio >= 4.1:
    ``abandon_on_cancel``; before: ``cancellable``)."""
    try:
        import anyio.to_thread

        names = inspect.signature(anyio.to_thread.run_sync).parameters
    except (ImportError, TypeError, ValueError):
        return {}
    return {"abandon_on_cancel": True} if "abandon_on_cancel" in names else (
        {"cancellable": True} if "cancellable" in names else {})


_ABANDON = _abandon_kwarg()


class _Server:
    """Request handling with the engine, the limits, the worker-thread limiter and the per-thread cache."""

    def __init__(self, engine, limits):
        self.engine = engine
        self.limits = limits
        self.local = threading.local()
        self.per_thread = callable(getattr(engine, "query_for_thread", None))
        self.accepted = {s: _accepted_kwargs(getattr(engine, s, None)) for s in SERVICES}
        self.services = [s for s in SERVICES if callable(getattr(engine, s, None))]
        # tables as arrays (orjson writes them, NaN as null) from an engine that can answer so
        self.table_kwargs = {"matrices": "arrays"} if "matrices" in (self.accepted["table"] or ()) else {}
        # isochrone rings as arrays (orjson writes the same JSON without a Python float per position)
        iso = self.accepted.get("isochrone") or ()
        self.isochrone_kwargs = {"coordinates": "arrays"} if "coordinates" in iso else {}
        self._limiter = None
        self._limiter_loop = None
        # hooks of the worker processes (gpuroute.server.workers): ``before()`` runs in the worker thread
        # before each engine call (numba's threads per worker); ``customizer(updates, metric=...)`` replaces
        # ``engine.customize`` (under the workers' lock, published to every worker)
        self.before = None
        self.customizer = None

    def limiter(self):
        import asyncio

        import anyio

        loop = asyncio.get_running_loop()
        if self._limiter_loop is not loop:  # a limiter belongs to one event loop (TestClient runs several)
            self._limiter = anyio.CapacityLimiter(max(1, int(self.limits.get("workers") or 1)))
            self._limiter_loop = loop
        return self._limiter

    async def handle(self, request):
        scope = request.scope
        raw = scope.get("raw_path") or scope["path"].encode()
        target = raw.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        service, version, profile, coords, query = split_target(target)
        if service not in self.services:
            raise OSRMError("InvalidService", f"Service {_clip(service)} not found! (services: "
                                              f"{', '.join(self.services)})")
        if version != VERSION:
            raise OSRMError("InvalidVersion", f"Service {service} has no version {_clip(version)} (only {VERSION})")
        options = parse_query(query)
        if request.method == "POST":
            body = parse_body(await self.read_body(request), request.headers.get("content-type"))
            twice = sorted(set(body) & set(options))
            if twice:
                raise OSRMError("InvalidQuery", f"option {_clip(twice[0])!r} given in both the URL and the body")
            if "coordinates" in body:
                if coords is not None:
                    raise OSRMError("InvalidQuery", "coordinates given in both the URL and the body")
                coords = body.pop("coordinates")
            options.update(body)
        if not coords:
            raise OSRMError("InvalidUrl", "no coordinates: /{service}/v1/{profile}/{lon,lat;lon,lat...}")
        call = parse_request(service, profile, coords, options, self.limits)
        accepted = self.accepted[service]
        for name, message in OPTIONAL_KWARGS.items():
            if name in call.kwargs and accepted is not None and name not in accepted:
                raise OSRMError("InvalidValue", message)
        return await self.run(call)

    async def read_body(self, request):
        top = _limit(self.limits, "max_body_bytes")
        size = request.headers.get("content-length")
        if top and size is not None and (not (size.isascii() and size.isdigit()) or int(size) > top):
            raise OSRMError("TooBig", f"request body of {_clip(size)} bytes is over the limit of {top}")
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if top and len(buf) > top:
                raise OSRMError("TooBig", f"request body over the limit of {top} bytes")
        return bytes(buf)

    async def run(self, call):
        import anyio

        timeout = _limit(self.limits, "timeout_s")
        try:
            with anyio.fail_after(timeout):
                return await anyio.to_thread.run_sync(self.work, call, limiter=self.limiter(), **_ABANDON)
        except TimeoutError:
            log.warning("%s request over the timeout of %s s", call.service, timeout)
            raise OSRMError("Timeout", f"the request took longer than {timeout} s", status=504) from None

    async def customize(self, request):
        """``POST /customize``: the JSON body checked, ``engine.customize`` run in a worker thread;
        ``(status, body bytes)``."""
        import anyio

        raw = await self.read_body(request)
        body = loads_json(raw) if raw.strip() else None  # an out-of-range number is named, with its place
        if not isinstance(body, dict):
            raise OSRMError("InvalidQuery", 'the body must be a JSON object: {"updates": [...]} or {"metric": ...}')
        extra = sorted(set(body) - {"updates", "metric"})
        if extra:
            raise OSRMError("InvalidOptions", f"unknown option {_clip(extra[0])!r} (customize takes updates or metric)")
        fn = self.customizer or getattr(self.engine, "customize", None)
        if not callable(fn):
            raise OSRMError("NotImplemented", "this engine cannot be customized")

        def call():
            try:
                res = fn(body.get("updates"), metric=body.get("metric"))
            except Exception as e:
                err = _engine_error(e)
                if err is None:
                    log.exception("customize failed")
                    return 500, encode({"code": "InternalError",
                                        "message": f"internal error ({type(e).__name__}) in customize"})
                return 400, encode({"code": err[0], "message": " ".join(str(err[1]).split())})
            return 200, encode(res)

        timeout = _limit(self.limits, "timeout_s")
        try:
            with anyio.fail_after(timeout):
                return await anyio.to_thread.run_sync(call, limiter=self.limiter(), **_ABANDON)
        except TimeoutError:
            raise OSRMError("Timeout", f"the customization took longer than {timeout} s (it completes in the "
                                       "background)", status=504) from None

    def work(self, call):
        """In a worker thread: call the engine and encode its answer; ``(status, body bytes)``."""
        if self.before is not None:
            self.before()
        target = self.engine
        if self.per_thread:
            target = getattr(self.local, "query", None)
            if target is None:
                target = self.local.query = self.engine.query_for_thread()
        fn = getattr(target, call.service)
        arg = call.coordinates[0] if call.service in ("nearest", "isochrone") else call.coordinates
        extra = {"table": self.table_kwargs, "isochrone": self.isochrone_kwargs}.get(call.service, {})
        kwargs = call.kwargs | extra
        try:
            res = fn(arg, **kwargs)
        except Exception as e:
            err = _engine_error(e)
            if err is None:
                log.exception("%s failed", call.service)
                return 500, encode({"code": "InternalError",
                                    "message": f"internal error ({type(e).__name__}) in service {call.service}"})
            code, msg = err
            return 400, encode({"code": code, "message": " ".join(str(msg).split())})
        status = 200 if not isinstance(res, dict) or res.get("code", "Ok") == "Ok" else 400
        if call.service == "table" and self.table_kwargs and isinstance(res, dict):
            res = _matrix_fragments(res)
        return status, encode(_strip(res, call))

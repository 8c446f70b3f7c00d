"""OSRM's URL grammar: a request target and its query string (or POST body) into a typed parameter record
of :mod:`gpuroute.engine.params`, and nothing else.

This module reads text: ``/{service}/{version}/{profile}/{coordinates}[.json][?query]``, the coordinates
(``lon,lat;lon,lat`` or ``polyline(...)``/``polyline6(...)``), the ``option=value`` pairs and their
syntax (numbers, ``true``/``false``, ``a;b;c`` per coordinate, ``a,b`` lists), which options each service
takes, and a POST body (a form or a JSON object). Every rule about values -- ranges, the vocabulary of
``geometries``/``overview``/``annotations``/``approaches``/..., the number of coordinates, list lengths,
limits -- is the record's (``XParams.from_kwargs``), applied once; its :class:`gpuroute.engine.EngineError`
comes back as :class:`OSRMError` with the same code and message. See :mod:`gpuroute.server.app` for the
codes.
"""
from __future__ import annotations

import dataclasses
import math
import re
from urllib.parse import parse_qsl, unquote

import numpy as np

from ..engine import params as P

#: The one protocol version.
VERSION = "v1"

_COMMON = frozenset({"bearings", "radiuses", "generate_hints", "hints", "approaches", "exclude", "snapping"})
_AVOID = frozenset({"avoid_polygons", "avoid_ways"})
#: ``depart_at`` (ISO 8601; :mod:`gpuroute.engine.timeslots`): the services that take it.
_DEPART = frozenset({"depart_at"})

#: The options each service takes (URL names).
OPTIONS = {
    "route": _COMMON | _AVOID | _DEPART | {"alternatives", "steps", "annotations", "geometries", "overview", "continue_straight",
                                 "skip_waypoints"},
    "table": _COMMON | _AVOID | _DEPART | {"sources", "destinations", "annotations", "fallback_speed", "fallback_coordinate",
                                 "scale_factor", "skip_waypoints"},
    "nearest": _COMMON | {"number"},
    "trip": _COMMON | _AVOID | _DEPART | {"roundtrip", "source", "destination", "steps", "annotations", "geometries", "overview",
                                "skip_waypoints"},
    "match": _COMMON | _AVOID | {"timestamps", "gaps", "tidy", "steps", "annotations", "geometries", "overview",
                                 "skip_waypoints"},
    "isochrone": _COMMON | _AVOID | _DEPART | {"contours_minutes", "contours_meters", "contours_colors", "polygons", "denoise",
                                     "generalize", "skip_waypoints"},
}

_PROFILE = re.compile(r"[A-Za-z0-9_.\-]+")
# ASCII digits only (``\d`` would take other scripts' digits, which float() reads): OSRM's grammar, written
# so that a number can end at one place only (``[0-9]+\.?[0-9]*`` backtracked quadratically on a long run of
# digits that does not match: a 64 KiB URL cost tens of seconds of CPU)
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
FLOAT = re.compile(_NUMBER)
_INT = re.compile(r"[+-]?[0-9]+")
#: A whole ``lon,lat;lon,lat;...`` list (one match instead of two per coordinate), of :data:`_NUMBER`.
_COORDS = re.compile(rf"{_NUMBER},{_NUMBER}(?:;{_NUMBER},{_NUMBER})*")
_NAME = re.compile(r"[A-Za-z0-9_\-]+")
_FORMAT = re.compile(r"(?P<body>.*?)(?:\.(?P<fmt>[A-Za-z][A-Za-z0-9]*))?", re.S)


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
    """A parsed request.

    Attributes
    ----------
    service : str
        ``route``, ``table``, ``nearest``, ``trip``, ``isochrone`` or ``match``.
    profile : str
        The profile named in the URL (ignored).
    params : gpuroute.engine.params.Waypoints
        The checked record (:class:`~gpuroute.engine.params.RouteParams`, ...).
    generate_hints : bool
        False: drop ``hint`` from the answer's waypoints.
    skip_waypoints : bool
        True: drop the answer's ``waypoints`` (``sources``/``destinations`` for a table).
    """

    service: str
    profile: str
    params: object
    generate_hints: bool = True
    skip_waypoints: bool = False


def clip(s, n=60):
    s = str(s)
    return s if len(s) <= n else s[:n] + "..."


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
        raise OSRMError("InvalidUrl", f"URL {clip(target)!r} is not /{{service}}/{{version}}/{{profile}}/"
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


def coordinate_array(text):
    """float64 (n, 2) lon/lat from ``lon,lat;lon,lat`` or ``polyline(...)``/``polyline6(...)``: the
    grammar only (the values are the record's to check).

    Raises
    ------
    OSRMError
        ``InvalidQuery`` (malformed).
    """
    for prefix, precision in (("polyline(", 5), ("polyline6(", 6)):
        if text.startswith(prefix):
            if not text.endswith(")") or len(text) == len(prefix) + 1:
                raise OSRMError("InvalidQuery", f"malformed {prefix[:-1]}(...) coordinates")
            return _decode_polyline(text[len(prefix):-1], precision)
    if _COORDS.fullmatch(text):  # well-formed: numbers in pairs (else the loop names the bad item)
        return np.array(text.replace(";", ",").split(","), dtype=np.float64).reshape(-1, 2)
    pos = 0
    for item in text.split(";"):
        parts = item.split(",")
        if len(parts) != 2 or not all(FLOAT.fullmatch(p) for p in parts):
            raise OSRMError("InvalidQuery", f"coordinates malformed close to position {pos}: expected "
                                            f"lon,lat;lon,lat..., got {clip(item)!r}")
        pos += len(item) + 1
    raise AssertionError("unreachable: every item parsed but the whole did not")  # pragma: no cover


def parse_coordinates(text):
    """``[(lon, lat), ...]`` from ``lon,lat;lon,lat`` or ``polyline(...)``/``polyline6(...)``, checked
    (:func:`gpuroute.engine.params.check_coordinates`).

    Raises
    ------
    OSRMError
        ``InvalidQuery`` (malformed) or ``InvalidValue`` (a position outside [-180, 180] x [-90, 90]).
    """
    arr = coordinate_array(text)
    try:
        arr = P.check_coordinates(arr)
    except Exception as e:
        raise _from_engine(e) from None
    return [tuple(c) for c in arr.tolist()]


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
    return np.asarray(pts, dtype=np.float64).reshape(-1, 2)[:, ::-1].copy()


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
            raise OSRMError("InvalidQuery", f"query string malformed: {clip(key)!r} has no '=value'")
        if key in out:
            raise OSRMError("InvalidQuery", f"option {clip(key)!r} given twice")
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
            raise OSRMError("InvalidQuery", f"option {clip(k)!r} given twice")
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
    raise OSRMError("InvalidValue", f"{where}{clip(token)} is out of the range of a number (a finite double)")


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
        raise OSRMError("InvalidQuery", f"option {clip(key)!r}: unexpected JSON value {clip(x)!r}")

    if key == "avoid_polygons" and isinstance(v, (dict, list)):  # GeoJSON: its JSON text, as a URL writes it
        import orjson

        return orjson.dumps(v).decode()
    if isinstance(v, list):
        sep = "," if key in _COMMA_LISTS else ";"
        return sep.join(",".join(scalar(y) for y in x) if isinstance(x, list) else scalar(x) for x in v)
    return scalar(v)


# --------------------------------------------------------------------------------------------------
# Option syntax (values are the record's to check)


def _bool(name, v):
    if v == "true":
        return True
    if v == "false":
        return False
    raise OSRMError("InvalidQuery", f"{name}={clip(v)!r}: expected true or false")


def _float(name, v):
    if not FLOAT.fullmatch(v):
        raise OSRMError("InvalidQuery", f"{name}: {clip(v)!r} is not a number")
    return float(v)


def _int(name, v):
    if not _INT.fullmatch(v):
        raise OSRMError("InvalidQuery", f"{name}: {clip(v)!r} is not an integer")
    return int(v)


def _items(v, parse):
    """``a;b;c`` -> ``[parse(a), ...]`` (an empty element -> None)."""
    return [None if x == "" else parse(x) for x in v.split(";")]


def _radius(x):
    return "unlimited" if x == "unlimited" else _float("radiuses", x)


def _bearing(x):
    parts = x.split(",")
    if len(parts) != 2:
        raise OSRMError("InvalidQuery", f"bearings: {clip(x)!r} is not value,range")
    return tuple(int(b) if b == int(b) else b for b in (_float("bearings", p) for p in parts))


def limit_of(limits, key):
    v = limits.get(key)
    return None if v is None or v <= 0 else v


def _from_engine(e):
    """The :class:`OSRMError` of a record's EngineError (same code and message)."""
    code = getattr(e, "code", None)
    if not isinstance(code, str):
        raise e
    return OSRMError(code, getattr(e, "message", None) or str(e))


def parse_request(service, profile, coordinates, options, limits=None):
    """One request's text into a :class:`ServiceCall` holding its checked record.

    Parameters
    ----------
    service, profile : str
        From the URL (service and version already checked).
    coordinates : str
        As the URL writes them (``lon,lat;...`` or ``polyline(...)``).
    options : dict of str to str
        Option name to value, as the query string writes them.
    limits : dict, optional
        The server's limits (:data:`gpuroute.server.app.DEFAULT_LIMITS`' keys; the record applies the
        ``max_*`` ones; ``default_radius`` is the radius of a coordinate whose ``radiuses`` element is
        empty or missing).

    Returns
    -------
    ServiceCall

    Raises
    ------
    OSRMError
        ``InvalidUrl`` (profile), ``InvalidQuery`` (syntax), ``InvalidOptions`` (an option the service does
        not take, ``hints`` of another count, an isochrone's contours given neither or twice), and the
        record's codes (:mod:`gpuroute.engine.params`).
    """
    limits = dict(limits or {})
    if not _PROFILE.fullmatch(profile):
        raise OSRMError("InvalidUrl", f"profile {clip(profile)!r}: letters, digits, '_', '-' and '.' only")
    unknown = sorted(set(options) - OPTIONS[service])
    if unknown:
        raise OSRMError("InvalidOptions", f"unknown option{'s' if len(unknown) > 1 else ''} "
                                          f"{', '.join(map(repr, map(clip, unknown)))} for service {service} "
                                          f"(options: {', '.join(sorted(OPTIONS[service]))})")
    coords = coordinate_array(coordinates)
    o = dict(options)
    call = ServiceCall(service, profile, None)
    kw = {}
    if "radiuses" in o:
        kw["radiuses"] = _items(o.pop("radiuses"), _radius)
    default_radius = limit_of(limits, "default_radius")
    if default_radius:  # an empty or missing element: the server's default radius
        rs = kw.get("radiuses") or [None] * len(coords)
        kw["radiuses"] = [default_radius if r is None else r for r in rs] if len(rs) == len(coords) else rs
    if "bearings" in o:
        kw["bearings"] = _items(o.pop("bearings"), _bearing)
    if "approaches" in o:
        kw["approaches"] = _items(o.pop("approaches"), str)
    hints = o.pop("hints").split(";") if "hints" in o else None  # accepted and ignored; the count is checked
    if "generate_hints" in o:
        call.generate_hints = _bool("generate_hints", o.pop("generate_hints"))
    if "skip_waypoints" in o:
        call.skip_waypoints = _bool("skip_waypoints", o.pop("skip_waypoints"))
    if "exclude" in o:
        v = o.pop("exclude")
        if v:
            items = v.split(",")
            if not all(_NAME.fullmatch(x) for x in items):
                raise OSRMError("InvalidQuery", f"exclude={clip(v)!r}: expected class,class,...")
            kw["exclude"] = items
    if "snapping" in o:
        kw["snapping"] = o.pop("snapping")
    _avoid_options(o, kw)
    if "depart_at" in o:  # the text as given: the record parses it (InvalidValue naming it)
        kw["depart_at"] = o.pop("depart_at")
    if service in ("route", "trip", "match"):
        _route_options(o, kw)
    if service == "match":
        _match_options(o, kw)
    if service == "trip":
        if "roundtrip" in o:
            kw["roundtrip"] = _bool("roundtrip", o.pop("roundtrip"))
        for name in ("source", "destination"):
            if name in o:
                kw[name] = o.pop(name)
    elif service == "table":
        _table_options(o, kw)
    elif service == "isochrone":
        _isochrone_options(o, kw)
    elif service == "nearest" and "number" in o:
        kw["number"] = _int("number", o.pop("number"))
    assert not o, o
    record = P.RECORDS[service]
    try:
        if hints is not None:
            P.per_coordinate(hints, len(coords), "hints")
        if service in ("nearest", "isochrone"):
            contours = kw.pop("contours", None)
            args = (coords, contours) if service == "isochrone" else (coords,)
        else:
            args = (coords,)
        call.params = record.from_kwargs(*args, limits=limits, **kw)
    except Exception as e:
        raise _from_engine(e) from None
    return call


def _route_options(o, kw):
    """``route``'s options (and ``trip``'s share: steps, annotations, geometries, overview)."""
    if "alternatives" in o:
        v = o.pop("alternatives")
        kw["alternatives"] = _bool("alternatives", v) if v in ("true", "false") else _int("alternatives", v)
    if "steps" in o:
        kw["steps"] = _bool("steps", o.pop("steps"))
    if "annotations" in o:
        v = o.pop("annotations")
        kw["annotations"] = _bool("annotations", v) if v in ("true", "false") else v.split(",")
    for name in ("geometries", "overview"):
        if name in o:
            kw[name] = o.pop(name)
    if "continue_straight" in o:
        v = o.pop("continue_straight")
        kw["continue_straight"] = None if v == "default" else _bool("continue_straight", v)


def _match_options(o, kw):
    """``match``'s own options: ``timestamps`` (``t;t;...``, integers), ``gaps``, ``tidy``."""
    if "timestamps" in o:
        kw["timestamps"] = _items(o.pop("timestamps"), lambda x: _int("timestamps", x))
    if "gaps" in o:
        kw["gaps"] = o.pop("gaps")
    if "tidy" in o:
        kw["tidy"] = _bool("tidy", o.pop("tidy"))


def _table_options(o, kw):
    for name in ("sources", "destinations"):
        if name in o:
            v = o.pop(name)
            kw[name] = "all" if v == "all" else [_int(name, x) for x in v.split(";")]
    if "annotations" in o:
        kw["annotations"] = o.pop("annotations").split(",")
    for name in ("fallback_speed", "scale_factor"):
        if name in o:
            kw[name] = _float(name, o.pop(name))
    if "fallback_coordinate" in o:
        kw["fallback_coordinate"] = o.pop("fallback_coordinate")


def _isochrone_options(o, kw):
    given = [k for k in ("contours_minutes", "contours_meters") if k in o]
    if len(given) != 1:
        raise OSRMError("InvalidOptions", "isochrone needs exactly one of contours_minutes and contours_meters"
                        + (" (both given)" if given else ""))
    name = given[0]
    minutes = name == "contours_minutes"
    kw["contours"] = [_float(name, x) * (60.0 if minutes else 1.0) for x in o.pop(name).split(",")]
    kw["metric"] = "duration" if minutes else "distance"
    if "contours_colors" in o:
        kw["colors"] = o.pop("contours_colors").split(",")
    if "polygons" in o:
        kw["polygons"] = _bool("polygons", o.pop("polygons"))
    for name in ("denoise", "generalize"):
        if name in o:
            kw[name] = _float(name, o.pop(name))


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
                                                f"got {clip(v)!r}")
            kw["avoid_polygons"] = obj
    if "avoid_ways" in o:
        v = o.pop("avoid_ways")
        if v:
            items = v.split(",")
            bad = [x for x in items if not _INT.fullmatch(x)]
            if bad:
                raise OSRMError("InvalidValue", f"avoid_ways: {clip(bad[0])!r} is not an OSM way id (expected "
                                                "id,id,...)")
            kw["avoid_ways"] = [int(x) for x in items]


__all__ = ["OPTIONS", "OSRMError", "ServiceCall", "VERSION", "coordinate_array", "loads_json", "parse_body",
           "parse_coordinates", "parse_query", "parse_request", "split_target"]

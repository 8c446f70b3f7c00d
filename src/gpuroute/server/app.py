"""An OSRM v5-compatible HTTP API over :class:`gpuroute.engine.Engine` (Starlette; JSON by orjson).

This module is the HTTP layer only: :mod:`gpuroute.server.parse` turns the URL and the options into a
typed parameter record (:mod:`gpuroute.engine.params`: the one place where values, limits and OSRM's
vocabulary are checked, for HTTP and Python callers alike), this module hands the record to the engine
(:meth:`gpuroute.engine.Engine.run`, which checks nothing again), on the event loop for a short request
and in a worker thread otherwise, and encodes its answer.
Routing, snapping and the shapes of the answers are the engine's. ``GET /`` is a web page over this API (an offline map drawn from ``GET /network``,
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
* ``match``: at least two coordinates, at most ``max_locations_map_matching``; ``timestamps``
  (``t;t;...``, integer seconds, non-decreasing), ``radiuses`` (each point's GPS standard deviation, metres
  > 0), ``gaps`` (``split``, ``ignore``), ``tidy``, ``steps``, ``annotations``, ``geometries``, ``overview``,
  ``skip_waypoints`` (drops ``tracepoints``); no ``approaches`` nor ``waypoints``. The answer holds
  ``matchings`` (routes with ``confidence``) and ``tracepoints`` (:meth:`gpuroute.engine.Engine.match`).

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
  an isochrone without contours or with both ``contours_minutes`` and ``contours_meters``; and a value
  the option does not take (as osrm-routed's ``IsValid`` and the Python API: the same check,
  :mod:`gpuroute.engine.params`): a word outside the option's vocabulary (``geometries=wkt``,
  ``approaches=left``, ``snapping=nearest``, ...), a bearing outside 0..360/0..180, a negative radius,
  ``number=0``, a ``sources``/``destinations`` index out of range, ``denoise`` outside 0..1, a negative
  ``generalize``, a colour that is not ``rrggbb``.
* ``InvalidValue``: a coordinate outside [-180, 180] x [-90, 90] (``Invalid coordinate value``, naming
  its index), ``fallback_speed``/``scale_factor`` <= 0, a contour <= 0, an ``exclude``/``snapping`` the
  engine cannot do; an ``avoid_polygons`` that is not JSON, not a valid GeoJSON (Multi)Polygon or over
  the limits; an ``avoid_ways`` entry that is not an integer or no way of the graph, or too many of them.
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
count; ``max_alternatives`` 0 allows none, as ``osrm-routed --max-alternatives 0``, and None or < 0 lifts it). The request's record applies them (:mod:`gpuroute.engine.params`) and the engine, handed the
record, does not check again (a Python caller's record gets the engine's own ``limits``; ``gpuroute
serve`` sets both alike).
``default_radius`` (metres; ``None``: unlimited, OSRM's default, as ``osrm-routed --default-radius``)
is the snapping radius of every coordinate whose ``radiuses`` element is empty or missing; an explicit
``unlimited`` stays unlimited. With it, a coordinate far from any road is answered ``NoSegment``. Nothing in a request names a file: the profile is ignored and every option is a number, a
flag or a word from a fixed list. A short request to gpuroute's Engine (a ``/route`` of a few
coordinates, a ``/nearest``: the ``config.SERVE_INLINE_*`` rule, :func:`inline_request`) is answered on
the event loop, where a worker thread's hand-off would cost more than the request (each worker process of
``gpuroute serve`` has its own loop), unless an engine call runs in a thread of the process meanwhile.
The others run in worker threads (at most ``workers`` at a time,
an ``anyio.CapacityLimiter``), each request bounded by ``timeout_s``: past it the client gets 504 and
the thread is abandoned, finishing its query in the background (a running query cannot be stopped).
A ``GET`` of a service skips Starlette's router, middleware, request and response objects
(``create_app``'s application answers it itself): the same status, headers and bytes.
When the engine has a ``query_for_thread()`` method, each worker thread calls it once and keeps the
object it returns (the engine's per-thread query state) and calls it; otherwise it calls the engine.
An engine (or query object) with a ``run`` method (gpuroute's) gets the request's record; any other gets
its ``route``/``table``/... method called with the record's values as keywords
(:meth:`gpuroute.engine.params.Waypoints.kwargs`). The JSON encoding runs where the engine ran. A table comes back from an engine whose ``table`` takes ``matrices`` as NumPy arrays
(``matrices="arrays"``), written to JSON without nested lists (the same bytes: ``null`` where no
route). Reads carry ``Access-Control-Allow-Origin: *``, as ``osrm-routed``'s do; a write
(``POST /customize``) never does, and is taken from the server's own origin or an allowed one only
(:func:`create_app`, Notes). With ``warm_up=True`` every service is run once at startup, so that no
request compiles anything (:mod:`gpuroute.server.warmup`).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import re
import threading

from .. import config
from ..engine.params import default_limits
from .parse import (  # noqa: F401  (the URL grammar; FLOAT: tests/server/test_number_grammar.py)
    FLOAT,
    OPTIONS,
    VERSION,
    OSRMError,
    ServiceCall,
    clip,
    limit_of,
    loads_json,
    parse_body,
    parse_coordinates,
    parse_query,
    parse_request,
    split_target,
)

log = logging.getLogger("gpuroute.server")

#: The services served, each under ``/{service}/v1/...``.
SERVICES = ("route", "table", "nearest", "isochrone", "trip", "match")

#: Limits used where the engine's ``limits`` has no value (see the module documentation): the
#: ``config.SERVE_*`` ones of :func:`gpuroute.engine.params.default_limits`, and the server's own.
DEFAULT_LIMITS = {
    **default_limits(),
    "default_radius": None,
    "max_body_bytes": 1 << 20,
    "timeout_s": 30.0,
    "workers": min(8, os.cpu_count() or 1),
}

_CODE = re.compile(r"[A-Z][A-Za-z]+")


#: Keyword arguments that only some engines take; a request that needs one is refused by the others.
OPTIONAL_KWARGS = {"exclude": "Exclude flag combination is not supported.",
                   "avoid_polygons": "avoid_polygons is not supported by this engine",
                   "avoid_ways": "avoid_ways is not supported by this engine",
                   "snapping": "snapping=any is not supported by this engine",
                   "fallback_coordinate": "fallback_coordinate=snapped is not supported by this engine"}


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
    for key in ("waypoints", "sources", "destinations", "tracepoints"):
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


def _has_fragment():
    """Whether orjson is there and splices JSON text in (``orjson.Fragment``, orjson >= 3.10)."""
    try:
        import orjson
    except ImportError:
        return False
    return hasattr(orjson, "Fragment")


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
        (and optionally ``limits``, ``query_for_thread()`` and ``run(record)``).
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

    from starlette.responses import Response
    from starlette.routing import Route

    lim = dict(DEFAULT_LIMITS)
    lim.update(default_limits())  # config.SERVE_* as they are now (a test or a deployment may have set them)
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

    app = _app_class()(server, routes=[Route("/health", health, methods=["GET"]),
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


def inline_request(call):
    """Whether ``call`` (a :class:`ServiceCall`) is short enough to be answered on the event loop
    (``config.SERVE_INLINE_*``): a ``/route`` of at most ``SERVE_INLINE_ROUTE_MAX_COORDS`` coordinates
    without alternatives, a ``/nearest`` of at most ``SERVE_INLINE_NEAREST_MAX_NUMBER`` results, a
    ``/table`` of at most ``SERVE_INLINE_TABLE_MAX_CELLS`` cells; none with ``exclude``, ``avoid_polygons``
    or ``avoid_ways`` (the first request of a kind customizes the overlay). ``/trip`` and ``/isochrone``:
    never."""
    p = call.params
    if (getattr(p, "exclude", None) is not None or getattr(p, "avoid_polygons", None) is not None
            or getattr(p, "avoid_ways", None) is not None):
        return False
    service = call.service
    if service == "route":
        return len(p.coords) <= config.SERVE_INLINE_ROUTE_MAX_COORDS and not p.alternatives
    if service == "nearest":
        return p.number <= config.SERVE_INLINE_NEAREST_MAX_NUMBER
    if service == "table":
        n = len(p.coords)
        rows = n if p.sources is None else len(p.sources)
        cols = n if p.destinations is None else len(p.destinations)
        return rows * cols <= config.SERVE_INLINE_TABLE_MAX_CELLS
    return False


#: ``GET`` paths answered without Starlette's routing, request and response objects (:meth:`_App.answer`).
_FAST_PREFIXES = tuple(f"/{s}/" for s in SERVICES)
_JSON_HEAD = (b"content-type", b"application/json")
_CORS_HEAD = (b"access-control-allow-origin", b"*")
_ERROR_500 = b"Internal Server Error"


def _internal_error():
    """``(500, body, headers)`` as Starlette's ServerErrorMiddleware answers an exception (logged here)."""
    log.exception("Exception in a GET of an OSRM service")
    return 500, _ERROR_500, [(b"content-length", b"%d" % len(_ERROR_500)), (b"content-type", b"text/plain; charset=utf-8")]


@functools.cache
def _app_class():
    from starlette.applications import Starlette

    class App(Starlette):
        """The Starlette application with a short path for ``GET /{service}/...`` (an OSRM service): the
        same answer, status and headers as its ``/{path:path}`` route gives, without the router, the
        middleware, the request and response objects; a short request (:func:`inline_request`) is answered
        on the event loop, the others in a worker thread as before."""

        def __init__(self, server, **kwargs):
            super().__init__(**kwargs)
            self.adapter = server

        @staticmethod
        def fast(scope):
            """Whether :meth:`answer` serves this request scope."""
            return scope["type"] == "http" and scope["method"] == "GET" and scope["path"].startswith(_FAST_PREFIXES)

        async def __call__(self, scope, receive, send):
            if self.fast(scope):
                return await self.answer(scope, send)
            return await super().__call__(scope, receive, send)

        async def answer(self, scope, send, extra=None):
            """Answer a ``GET`` of an OSRM service; ``extra()``: headers to append (a worker's)."""
            server = self.adapter
            try:
                status, body, call = server.answer_get(scope)
                if call is not None:
                    try:
                        status, body = await server.run(call)
                    except OSRMError as e:
                        status, body = e.status, encode({"code": e.code, "message": e.message})
                headers = [_CORS_HEAD, (b"content-length", b"%d" % len(body)), _JSON_HEAD]
            except Exception:  # as Starlette's ServerErrorMiddleware answers an exception
                status, body, headers = _internal_error()
            if extra is not None:
                headers += extra()
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        def direct(self, scope, extra=None):
            """The answer to a ``GET`` of an OSRM service when it is ready without waiting (a refused
            request, a short one answered here): ``(status, headers, body bytes)``, the headers as
            :meth:`answer` sends them (``extra()`` appended); None when :meth:`answer` is to take the
            request (another path, a request for a worker thread). For an HTTP protocol that writes the
            answer itself (:mod:`gpuroute.server.http`: one write, no ASGI task)."""
            if not self.fast(scope):
                return None
            try:
                status, body, call = self.adapter.answer_get(scope)
                if call is not None:
                    return None
                headers = [_CORS_HEAD, (b"content-length", b"%d" % len(body)), _JSON_HEAD]
            except Exception:
                status, body, headers = _internal_error()
            if extra is not None:
                headers += extra()
            return status, headers, body

    return App

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
        return OSRMError("Forbidden", f"cross-origin write refused: Origin {clip(origin)!r} is not this server's "
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
                                      f"{clip(host)!r} (a name re-pointed at this machine?); use "
                                      f"http://localhost or http://127.0.0.1, or {hint}", status=403)
    return None


def _require_json(request):
    """415 ``UnsupportedMediaType`` unless the request says its body is ``application/json``."""
    ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise OSRMError("UnsupportedMediaType", f"a write needs Content-Type: application/json (got "
                                                f"{clip(ctype) or 'none'!r})", status=415)


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
        # a route's steps and annotations as JSON text (orjson splices it in) from an engine that can answer so
        self.route_json_parts = "leg_parts" in (self.accepted.get("route") or ()) and _has_fragment()
        self._limiter = None
        self._limiter_loop = None
        # hooks of the worker processes (gpuroute.server.workers): ``before()`` runs in the worker thread
        # before each engine call (numba's threads per worker); ``customizer(updates, metric=...)`` replaces
        # ``engine.customize`` (under the workers' lock, published to every worker)
        self.before = None
        self.customizer = None
        # short requests on the event loop (config.SERVE_INLINE_*): gpuroute's Engine only (its ``run``)
        self.inline = callable(getattr(engine, "run", None)) and not self.per_thread
        self.busy = 0  # engine calls running in worker threads of this process
        self._unsupported = {}  # record type -> ((field, default), ...) the engine's method does not take
        self._busy_lock = threading.Lock()
        # GET /route's options parsed once per query string (gpuroute.server.fastpath): the same records
        from .fastpath import RouteTemplates

        self.route_templates = RouteTemplates(self) if "route" in self.services else None

    def limiter(self):
        import asyncio

        import anyio

        loop = asyncio.get_running_loop()
        if self._limiter_loop is not loop:  # a limiter belongs to one event loop (TestClient runs several)
            self._limiter = anyio.CapacityLimiter(max(1, int(self.limits.get("workers") or 1)))
            self._limiter_loop = loop
        return self._limiter

    def target(self, scope):
        """The URL part of a request: ``(service, profile, coords or None, options)``; raises
        :class:`OSRMError` (InvalidUrl, InvalidService, InvalidVersion, InvalidQuery)."""
        raw = scope.get("raw_path") or scope["path"].encode()
        target = raw.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        service, version, profile, coords, query = split_target(target)
        if service not in self.services:
            raise OSRMError("InvalidService", f"Service {clip(service)} not found! (services: "
                                              f"{', '.join(self.services)})")
        if version != VERSION:
            raise OSRMError("InvalidVersion", f"Service {service} has no version {clip(version)} (only {VERSION})")
        return service, profile, coords, parse_query(query)

    def call(self, service, profile, coords, options):
        """The checked :class:`ServiceCall` of a request's parts (raises :class:`OSRMError`)."""
        if not coords:
            raise OSRMError("InvalidUrl", "no coordinates: /{service}/v1/{profile}/{lon,lat;lon,lat...}")
        call = parse_request(service, profile, coords, options, self.limits)
        self.refuse_unsupported(call)
        if self.route_json_parts and service == "route" and (call.params.steps or call.params.annotations):
            call.params = dataclasses.replace(call.params, leg_parts="json")  # the short parse's templates keep it
        return call

    async def handle(self, request):
        service, profile, coords, options = self.target(request.scope)
        if request.method == "POST":
            body = parse_body(await self.read_body(request), request.headers.get("content-type"))
            twice = sorted(set(body) & set(options))
            if twice:
                raise OSRMError("InvalidQuery", f"option {clip(twice[0])!r} given in both the URL and the body")
            if "coordinates" in body:
                if coords is not None:
                    raise OSRMError("InvalidQuery", "coordinates given in both the URL and the body")
                coords = body.pop("coordinates")
            options.update(body)
        return await self.run(self.call(service, profile, coords, options))

    def answer_get(self, scope):
        """``(status, body bytes, call or None)`` of a ``GET`` of an OSRM service when it can be answered on
        the event loop (parsing, an error, a short request: :meth:`short`); ``(None, None, call)`` when the
        call is to run in a worker thread (:meth:`run`)."""
        call = None if self.route_templates is None else self.route_templates.call(scope)
        if call is None:
            try:
                call = self.call(*self.target(scope))
            except OSRMError as e:
                return e.status, encode({"code": e.code, "message": e.message}), None
        if self.short(call):
            status, body = self.work(call)
            return status, body, None
        return None, None, call

    def refuse_unsupported(self, call):
        """``InvalidValue`` for a request that needs a keyword the engine's method does not take
        (:data:`OPTIONAL_KWARGS`: an ``exclude``, ``snapping=any``, ...): what this engine can do, not
        whether the request is well-formed (the record said that)."""
        p = call.params
        checks = self._unsupported.get(type(p))
        if checks is None:  # once per record type: the optional fields this engine's method does not take
            accepted = self.accepted[call.service]
            checks = self._unsupported[type(p)] = () if accepted is None else tuple(
                (f.name, f.default) for f in dataclasses.fields(p)
                if f.name in OPTIONAL_KWARGS and f.name not in accepted)
        for name, default in checks:
            if getattr(p, name) != default:
                raise OSRMError("InvalidValue", OPTIONAL_KWARGS[name])

    async def read_body(self, request):
        top = limit_of(self.limits, "max_body_bytes")
        size = request.headers.get("content-length")
        if top and size is not None and (not (size.isascii() and size.isdigit()) or int(size) > top):
            raise OSRMError("TooBig", f"request body of {clip(size)} bytes is over the limit of {top}")
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if top and len(buf) > top:
                raise OSRMError("TooBig", f"request body over the limit of {top} bytes")
        return bytes(buf)

    def short(self, call):
        """Whether ``call`` is answered on the event loop rather than in a worker thread: an engine with a
        ``run`` method (gpuroute's: its costs are known), no engine call running in a thread of this process,
        and a short request by the ``config.SERVE_INLINE_*`` rule (:func:`inline_request`)."""
        return self.inline and self.busy == 0 and inline_request(call)

    async def run(self, call):
        import anyio

        if self.short(call):
            return self.work(call)
        timeout = limit_of(self.limits, "timeout_s")
        try:
            with anyio.fail_after(timeout):
                return await self.in_thread(self.work, call)
        except TimeoutError:
            log.warning("%s request over the timeout of %s s", call.service, timeout)
            raise OSRMError("Timeout", f"the request took longer than {timeout} s", status=504) from None

    async def in_thread(self, fn, *args):
        """``fn(*args)`` in a worker thread (the limiter's), counted in :attr:`busy` from before it is handed
        over until it returns (a timed-out call that runs on stays counted; one cancelled before it started
        is not run), so that no request runs on the event loop meanwhile (:meth:`short`)."""
        import anyio.to_thread

        state = ["pending"]
        lock = self._busy_lock

        def job():
            with lock:
                if state[0] == "cancelled":
                    return None
                state[0] = "running"
            try:
                return fn(*args)
            finally:
                with lock:
                    self.busy -= 1

        with lock:
            self.busy += 1
        try:
            return await anyio.to_thread.run_sync(job, limiter=self.limiter(), **_ABANDON)
        except BaseException:
            with lock:
                if state[0] == "pending":
                    state[0] = "cancelled"
                    self.busy -= 1
            raise

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
            raise OSRMError("InvalidOptions", f"unknown option {clip(extra[0])!r} (customize takes updates or metric)")
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

        timeout = limit_of(self.limits, "timeout_s")
        try:
            with anyio.fail_after(timeout):
                return await self.in_thread(call)
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
        service = call.service
        extra = self.table_kwargs if service == "table" else self.isochrone_kwargs if service == "isochrone" else None
        try:
            if callable(getattr(target, "run", None)):  # gpuroute's Engine: the checked record, checked once
                res = target.run(dataclasses.replace(call.params, **extra) if extra else call.params)
            else:  # another engine: its method, by keyword (the record's values)
                kwargs = call.params.kwargs()
                coords = kwargs.pop("coords")
                arg = coords[0] if call.service in ("nearest", "isochrone") else coords
                res = getattr(target, call.service)(arg, **((kwargs | extra) if extra else kwargs))
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

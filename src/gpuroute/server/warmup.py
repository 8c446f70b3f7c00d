"""The server's warm-up: every service answered once before the server says it is ready.

The engine's kernels are numba functions, compiled on their first call (or loaded from numba's cache,
which takes a while too): without a warm-up the first ``/table`` of a fresh server compiled for 5.7 s and
the first ``/isochrone`` for 11.5 s (issue 18). :func:`warm_up` runs each service the server offers
through the same path a request takes (:func:`gpuroute.server.app.parse_request`, the worker's call and
the JSON encoding), with the options that select other kernels (steps, annotations, distances, both
isochrone metrics, a search small enough for the bounded Dijkstra and one as large as the limits allow
for the hierarchy's), at points of the engine's own graph, and the customization path without changing
the metric (``engine.warm_customize()``). :func:`gpuroute.server.create_app` with ``warm_up=True`` runs
it at the application's startup, which uvicorn completes before it listens; ``gpuroute serve`` runs it
before it starts uvicorn.
"""
from __future__ import annotations

import logging
import time

log = logging.getLogger("gpuroute.server")


#: Stops of the largest warm-up trip, at least: up to ``config.TOUR_EXACT_MAX_N`` the order is exact
#: (Held–Karp), past it searched and, past 7 stops, perturbed (iterated local search); the warm-up takes
#: one more than ``TOUR_EXACT_MAX_N`` when that is more, so that the search is compiled too.
TRIP_STOPS = 12


def warm_points(engine, k=TRIP_STOPS):
    """``k`` positions ``(lon, lat)`` of the engine's graph to warm up at (node positions spread evenly
    over its node ids), or None when the engine has no graph coordinates."""
    import numpy as np

    g = getattr(engine, "graph", None)
    coords = getattr(g, "coords", None)
    if coords is None or len(coords) == 0:
        return None
    idx = np.linspace(0, len(coords) - 1, k).round().astype(np.int64)
    return [(float(coords[i][0]), float(coords[i][1])) for i in idx]


def off_network_point(engine):
    """``(lon, lat)`` just outside the south-west corner of the engine's graph (0.02 degrees beyond its
    bounding box), or None without coordinates: a coordinate that the first ball of the segment index does
    not settle, so that snapping's second step is compiled by the warm-up too."""
    import numpy as np

    coords = getattr(getattr(engine, "graph", None), "coords", None)
    if coords is None or len(coords) == 0:
        return None
    lo = np.asarray(coords, dtype=np.float64).min(axis=0)
    return (max(float(lo[0]) - 0.02, -180.0), max(float(lo[1]) - 0.02, -90.0))


#: Points of the warm-up's long /match trace: more transition searches than ``config.SERVE_MATCH_PARALLEL_JOBS``
#: (64) with one candidate a point already, so the parallel kernel is compiled before serving too.
_MATCH_POINTS = 70
#: GPS standard deviation (metres) of the long trace's points when they lie on a segment (a ``/nearest``
#: answer's location): a few candidates a point. The searches grow with the square of the candidates: with
#: 50 m, 40 points cost 0.27 s of CPU at every start (Monaco), for kernels that a few candidates load too.
_MATCH_SIGMA_M = 10


def _requests(services, pts, limits, off=None, on=None):
    """``(service, coordinates text, options)`` of the warm-up, for the services offered; ``off``: a
    point off the network (:func:`off_network_point`) for one table request; ``on``: a point on a segment
    (:func:`on_network_point`) for the long ``/match`` trace (None: the first point, with 50 m)."""
    def c(*i):
        return ";".join(f"{pts[j][0]:.7f},{pts[j][1]:.7f}" for j in i)

    top_match = limits.get("max_locations_map_matching")
    n_match = max(2, min(_MATCH_POINTS, int(top_match) if top_match and top_match > 0 else _MATCH_POINTS))
    trace, sigma = (c(*[0] * n_match), 50) if on is None else \
        (";".join([f"{on[0]:.7f},{on[1]:.7f}"] * n_match), _MATCH_SIGMA_M)
    top_trip = limits.get("max_locations_trip")
    trip_stops = max(2, min(len(pts), int(top_trip) if top_trip and top_trip > 0 else len(pts)))
    top_s = _positive(limits.get("max_isochrone_duration_s"), 3600.0)
    top_m = _positive(limits.get("max_isochrone_distance_m"), 50000.0)
    out = [
        ("route", c(0, 1), {}),
        # alternatives: several pairs, so that some candidate reaches the local-optimality test's searches
        *[("route", c(i, i + 1), {"alternatives": "3", "overview": "full"}) for i in range(min(6, len(pts) - 1))],
        ("route", c(0, 1, 2), {"steps": "true", "annotations": "true", "overview": "full", "geometries": "geojson",
                               "continue_straight": "true"}),
        ("table", c(0, 1, 2, 3), {}),
        ("table", c(0, 1, 2, 3), {"annotations": "duration,distance", "sources": "0;1", "destinations": "1;2;3"}),
        ("nearest", c(0), {"number": "2"}),
        # up to 3 stops the tour is enumerated, past them searched
        ("trip", c(0, 1, 2), {}),
        ("trip", c(*range(trip_stops)), {}),
        ("trip", c(0, 1, 2, 3), {"roundtrip": "false", "source": "first", "destination": "last", "steps": "true"}),
        # a reach small enough for the bounded Dijkstra, then one as large as a client may ask (the
        # hierarchy's one-to-all), for both metrics
        ("isochrone", c(1), {"contours_minutes": "1"}),
        ("isochrone", c(1), {"contours_minutes": f"1,{top_s / 60.0:g}"}),
        ("isochrone", c(1), {"contours_meters": f"200,{top_m:g}", "polygons": "false"}),
        # map matching's kernels (a point twice: it always matches), then a trace long enough for the
        # transition searches' parallel path (config.SERVE_MATCH_PARALLEL_JOBS searches and more)
        ("match", c(0, 0), {"timestamps": "0;1", "radiuses": "50;50"}),
        ("match", trace, {"timestamps": ";".join(str(5 * i) for i in range(n_match)),
                          "radiuses": ";".join([str(sigma)] * n_match)}),
    ]
    if off is not None:  # snapping's second step (a point the first ball does not settle)
        out.append(("table", f"{off[0]:.7f},{off[1]:.7f};{c(0)}", {"radiuses": "unlimited;unlimited"}))
    return [r for r in out if r[0] in services]


def on_network_point(server, pts):
    """``(lon, lat)`` of a point on a segment the engine snaps to (the location ``/nearest`` answers for the
    first warm-up point), or None where that request fails or answers no location."""
    import orjson

    from .app import OSRMError, parse_request

    if "nearest" not in server.services:
        return None
    try:
        status, body = server.work(parse_request("nearest", "warm-up", f"{pts[0][0]:.7f},{pts[0][1]:.7f}", {},
                                                 server.limits))
        loc = orjson.loads(body)["waypoints"][0]["location"] if status == 200 else None
        return (float(loc[0]), float(loc[1])) if loc is not None else None
    except (OSRMError, KeyError, IndexError, TypeError, ValueError, orjson.JSONDecodeError):
        return None


def _on_one_thread(server, call):
    """Answer ``call`` once more with one numba thread in this thread: map matching's Viterbi pass that searches
    its own tables (:func:`gpuroute.engine.services.match._lazy`: taken on one thread, or for batches of many
    traces) is then compiled too, whatever this process's thread setting."""
    import numba

    threads = numba.get_num_threads()
    if threads == 1:  # the request just answered took it
        return
    numba.set_num_threads(1)
    try:
        server.work(call)
    finally:
        numba.set_num_threads(threads)


def _positive(v, default):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return default
    return v if v > 0 else default


def warm_up(app):
    """Answer every service of ``app`` once (see the module documentation), then mark it ready.

    Parameters
    ----------
    app : starlette.applications.Starlette
        Made by :func:`gpuroute.server.create_app`.

    Returns
    -------
    dict
        ``{"seconds": total, "services": {service: seconds}, "failed": [messages]}`` (also
        ``app.state.warm_report``). A request that fails is logged and listed, and the server is ready
        even so (it serves what it can, as it would without a warm-up).
    """
    from .app import OSRMError, parse_request

    state = app.state
    if state.ready and state.warm_report is not None:
        return state.warm_report
    server = state.adapter
    engine = state.engine
    t0 = time.perf_counter()
    report = {"seconds": 0.0, "services": {}, "failed": []}
    from .. import config

    pts = warm_points(engine, max(TRIP_STOPS, int(config.TOUR_EXACT_MAX_N) + 1))
    if pts is None:
        log.warning("warm-up: the engine has no graph coordinates to query at; the first request of each service "
                    "compiles what it needs")
    else:
        log.info("warm-up: compiling and running %s once", ", ".join(server.services))
        on = on_network_point(server, pts) if "match" in server.services else None
        reqs = _requests(server.services, pts, server.limits, off_network_point(engine), on)
        long_match = [r for r in reqs if r[0] == "match"][-1:]  # the long trace (the list's last /match)
        for service, coords, options in reqs:
            t = time.perf_counter()
            try:
                call = parse_request(service, "warm-up", coords, options, server.limits)
                status, body = server.work(call)
            except OSRMError as e:  # a limit below the warm-up's request: that request is not served anyway
                status, body = e.status, e.message.encode()
            if status == 200 and [(service, coords, options)] == long_match:
                _on_one_thread(server, call)  # the Viterbi pass that searches its own tables
            if status != 200:
                msg = f"{service} {options or ''}: HTTP {status} {bytes(body)[:200].decode(errors='replace')}"
                report["failed"].append(msg)
                log.warning("warm-up: %s", msg)
            report["services"][service] = report["services"].get(service, 0.0) + time.perf_counter() - t
    if state.can_customize and callable(getattr(engine, "warm_customize", None)):
        t = time.perf_counter()
        try:
            engine.warm_customize()
        except Exception as e:  # the server still serves; /customize compiles on its first call then
            log.exception("warm-up: customize failed")
            report["failed"].append(f"customize: {type(e).__name__}: {e}")
        report["services"]["customize"] = time.perf_counter() - t
    report["seconds"] = time.perf_counter() - t0
    log.info("warm-up: done in %.1f s (%s)", report["seconds"],
             ", ".join(f"{k} {v:.2f} s" for k, v in report["services"].items()))
    state.warm_report = report
    state.ready = True
    return report
